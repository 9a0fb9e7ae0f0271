"""Review of the one-GPU check scripts (scripts/gpu_check.py, scripts/gpu_check.sh): what a single lent GPU run
needs to survive -- a timed-out torchrun leaves no worker behind, the time budget covers the whole shell run, and a
failed wheel install does not end the run. CPU only, no model is built."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"


@pytest.fixture(scope="module")
def gpu_check():
    return load_script("gpu_check")


def _alive(pid: int) -> bool:
    """Running (a zombie, which nobody may reap in a container, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = [ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith("State:")]
    except OSError:
        return False
    return not (state and state[0].split()[1] == "Z")


# A stand-in for torchrun: its worker runs in a session of its own (as torch.distributed.elastic starts it), and the
# launcher stops the worker only when it is itself terminated (SIGTERM), never when it is killed.
LAUNCHER = """
import os, signal, subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
open(sys.argv[1], "w").write(str(worker.pid))
def stop(*_):
    os.killpg(worker.pid, signal.SIGTERM)
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
time.sleep(60)
"""


def test_timed_out_train_run_leaves_no_worker_behind(gpu_check, tmp_path):
    """A run past its timeout is reported as timed out, and the launcher's worker (the real trainer under torchrun,
    holding the GPU) is gone afterwards: the later checks get the GPU to themselves."""
    launcher, pid_file = tmp_path / "launcher.py", tmp_path / "worker.pid"
    launcher.write_text(LAUNCHER)
    gpu_check._DEADLINE[:] = []  # no run budget: the timeout given is the one used
    worker = None
    try:
        t0 = time.perf_counter()
        proc, wall, _ = gpu_check._run_train([sys.executable, str(launcher), str(pid_file)], timeout=8)
        assert time.perf_counter() - t0 < 9
        worker = int(pid_file.read_text())
        assert proc is None and 0 < wall <= 8.5  # timed out
        deadline = time.time() + 5
        while _alive(worker) and time.time() < deadline:
            time.sleep(0.1)
        assert not _alive(worker), "the worker of the timed-out run is still running"
    finally:
        if worker is not None and _alive(worker):
            os.kill(worker, signal.SIGKILL)


def test_run_that_finishes_in_time_keeps_its_exit_code(gpu_check):
    gpu_check._DEADLINE[:] = []
    proc, _, tail = gpu_check._run_train([sys.executable, "-c", "import sys; print('x'); sys.exit(3)"], timeout=30)
    assert proc is not None and proc.returncode == 3 and proc.stdout == "x\n" and tail == ""


def test_budget_counts_from_the_shell_scripts_start(gpu_check, tmp_path, monkeypatch):
    """gpu_check.sh exports its start time: with 100 s of a 120 s budget spent before Python ran (wheel install,
    imports), only 20 s are left, so a check needing 30 s is skipped; the checks needing 1 s still run."""
    def quick(args, path):
        return {"ok": True}

    for fn in ("check_hf_rollout", "check_grpo_step", "check_packed_forward", "check_deepspeed", "check_zero3_vllm",
               "check_rehearsal", "check_vllm"):
        monkeypatch.setattr(gpu_check, fn, quick)
    monkeypatch.setattr(gpu_check.be, "tiny_model_path", lambda cache_dir: tmp_path)
    needs = dict.fromkeys(gpu_check.CHECKS, 1)
    needs["rehearsal_7b"] = 30
    monkeypatch.setattr(gpu_check, "CHECK_NEEDS_S", needs)
    monkeypatch.setenv("GPU_CHECK_STARTED", f"{time.time() - 100:.3f}")
    args = gpu_check.parse_args(["--device", "cpu", "--budget-s", "120", "--cache-dir", str(tmp_path)])
    out = gpu_check.run(args)
    assert out["skipped"] == ["rehearsal_7b"] and "time budget" in out["rehearsal_7b"]["skipped"]
    assert out["vllm"]["ok"] is True
    assert 15 < gpu_check._time_left() <= 20
    # without the variable (gpu_check.py run directly) the budget counts from the run's start
    monkeypatch.delenv("GPU_CHECK_STARTED")
    out = gpu_check.run(args)
    assert out["skipped"] == [] and 115 < gpu_check._time_left() <= 120
    gpu_check._DEADLINE[:] = []


def test_shell_script_runs_the_checks_when_the_wheel_install_fails(tmp_path):
    """A wheel install that fails (no pip, a bad wheel) is reported, and gpu_check.py still runs."""
    wheels, out_dir, mark = tmp_path / "whl", tmp_path / "out", tmp_path / "ran"
    wheels.mkdir()
    (wheels / "broken-0.0-py3-none-any.whl").write_text("not a wheel")
    fake_python = tmp_path / "python"
    fake_python.write_text(f'#!/usr/bin/env bash\nif [ "$1" = -m ] && [ "$2" = pip ]; then exit 1; fi\n'
                           f'echo "$@" > "{mark}"\n')
    fake_python.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake_python), "WHEELS": str(wheels), "OUT": str(out_dir)}
    proc = subprocess.run(["bash", str(SCRIPTS / "gpu_check.sh"), "--quick"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "installing the wheels" in proc.stderr and "failed" in proc.stderr
    assert mark.read_text().split() == ["scripts/gpu_check.py", "--device", "cuda", "--out",
                                        f"{out_dir}/gpu_check.json", "--quick"]
