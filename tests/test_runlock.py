"""One live run per output_dir (flock), and ranks that exit when their launcher is killed (PR_SET_PDEATHSIG)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mmevo.runlock import LOCK_FILE, OutputDirBusy, RunLock, output_dir_lock

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
for _k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
    ENV.pop(_k, None)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock / PR_SET_PDEATHSIG: Linux")


def _wait_for(cond, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _exited(pid: int) -> bool:
    """Gone, or a zombie nobody reaped yet (a re-parented process is reaped by init, maybe not at once)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def _kill_if_ours(pid: int, marker: str) -> None:
    """SIGKILL a process this test started (checked by its command line, in case the pid was reused)."""
    try:
        if marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


# -- the lock ------------------------------------------------------------------------------------------------------
def test_second_lock_fails_naming_the_holder_and_is_free_after_release(tmp_path):
    out = tmp_path / "run"
    first = RunLock(out).acquire()  # creates the directory
    rec = json.loads((out / LOCK_FILE).read_text())
    assert rec["pid"] == os.getpid() and rec["host"] == socket.gethostname() and rec["command"]
    with pytest.raises(OutputDirBusy) as e:
        RunLock(out).acquire()  # a second open file in the same process conflicts too
    msg = str(e.value)
    assert f"pid {os.getpid()}" in msg and socket.gethostname() in msg and rec["started"] in msg and str(out) in msg
    with pytest.raises(OutputDirBusy):
        with output_dir_lock(out):
            pass
    first.release()
    assert (out / LOCK_FILE).read_text() == ""  # released cleanly: no record left
    with output_dir_lock(out) as lock:
        assert lock.held and lock.previous is None
    with pytest.raises(KeyError):  # an error inside the run releases the lock too
        with output_dir_lock(out):
            raise KeyError("boom")
    RunLock(out).acquire().release()


HOLDER = """
import sys, time
from mmevo.runlock import RunLock
RunLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(600)
"""


def test_lock_held_by_another_process_is_taken_over_after_sigkill(tmp_path):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(OutputDirBusy) as e:
            RunLock(out).acquire()
        assert f"pid {holder.pid} on host {socket.gethostname()}" in str(e.value)
        holder.kill()  # SIGKILL: no cleanup runs, the lock file keeps its record
        holder.wait(timeout=30)
        assert json.loads((out / LOCK_FILE).read_text())["pid"] == holder.pid
        lock = RunLock(out).acquire()  # the kernel dropped the dead process's flock: simply taken over
        assert lock.previous["pid"] == holder.pid
        assert json.loads((out / LOCK_FILE).read_text())["pid"] == os.getpid()
        lock.release()
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()


def test_runs_refuse_a_busy_output_dir_before_loading_anything(tmp_path, capsys):
    from mmevo.cli import main

    out = tmp_path / "run"
    with RunLock(out):
        # model.path does not exist: a run that got past the lock would fail on loading instead
        for cmd, key in (("train", "trainer.output_dir"), ("sft", "sft.output_dir")):
            assert main([cmd, "model.path=no/such/model", f"{key}={out}"]) == 2
            err = capsys.readouterr().err
            assert "in use by another live mmevo run" in err and f"pid {os.getpid()}" in err, err
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # nothing else was written


# -- ranks that end with their launcher ----------------------------------------------------------------------------
LAUNCHER = """
import subprocess, sys, time
import os
subprocess.Popen([sys.executable, "-c", sys.argv[1], *sys.argv[2:], str(os.getpid())])
if sys.argv[3] != "orphan":
    time.sleep(600)
"""

CHILD = """
import json, os, sys, time
pidfile, mode, parent = sys.argv[1], sys.argv[2], int(sys.argv[3])
from mmevo.runlock import _pid1_may_be_our_launcher, exit_with_parent
if mode == "orphan":  # the launcher is gone before the hook runs
    deadline = time.monotonic() + 60
    while os.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.02)
    if os.getppid() != 1 or _pid1_may_be_our_launcher():
        open(pidfile, "w").write(json.dumps({"skip": f"re-parented to pid {os.getppid()}, not to an init"}))
        sys.exit(0)
def report():
    open(pidfile + ".tmp", "w").write(json.dumps({"pid": os.getpid()}))
    os.replace(pidfile + ".tmp", pidfile)
if mode == "orphan":
    report()  # the hook below ends this process at once
if mode != "off":
    assert exit_with_parent()
if mode != "orphan":
    report()  # armed (or, for the control, not)
time.sleep(600)
"""


def _start_family(tmp_path, mode):
    pidfile = tmp_path / f"child-{mode}.json"
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, CHILD, str(pidfile), mode], env=ENV,
                                start_new_session=True)
    return launcher, pidfile


@pytest.mark.parametrize("mode", ["on", "off"])
def test_child_exits_when_its_parent_is_killed(tmp_path, mode):
    launcher, pidfile = _start_family(tmp_path, mode)
    child = None
    try:
        child = json.loads(_wait_for(lambda: pidfile.exists() and pidfile.read_text(), 60, "the child"))["pid"]
        launcher.kill()
        launcher.wait(timeout=30)
        if mode == "on":
            _wait_for(lambda: _exited(child), 10, "the child to exit after its parent was killed")
        else:  # the control: without the hook the orphan lives on
            time.sleep(1.5)
            assert not _exited(child)
    finally:
        if launcher.poll() is None:
            launcher.kill()
        launcher.wait()
        if child:
            _kill_if_ours(child, "exit_with_parent")


def test_child_whose_parent_died_before_the_hook_exits_at_once(tmp_path):
    launcher, pidfile = _start_family(tmp_path, "orphan")
    launcher.wait(timeout=60)
    text = _wait_for(lambda: pidfile.exists() and pidfile.read_text(), 60, "the orphan")
    info = json.loads(text)
    if "skip" in info:
        pytest.skip(info["skip"])
    try:
        _wait_for(lambda: _exited(info["pid"]), 10, "the orphan to exit")
    finally:
        _kill_if_ours(info["pid"], "exit_with_parent")


def test_ranks_exit_when_the_torchrun_launcher_is_killed(tmp_path):
    pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (mmevo joins the group through it)")
    worker = ROOT / "tests" / "dist" / "launcher_death_worker.py"
    log = open(tmp_path / "torchrun.log", "w")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29541",
           str(worker), str(tmp_path)]
    launcher = subprocess.Popen(cmd, env=ENV, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    ranks = []
    try:
        def started():
            files = [tmp_path / f"rank{r}.json" for r in (0, 1)]
            if launcher.poll() is not None:
                raise AssertionError(f"torchrun ended early: {(tmp_path / 'torchrun.log').read_text()[-3000:]}")
            return all(f.exists() for f in files) and [json.loads(f.read_text()) for f in files]

        infos = _wait_for(started, 120, "both ranks to start")
        ranks = [i["pid"] for i in infos]
        assert [i["ppid"] for i in infos] == [launcher.pid] * 2 and infos[0]["world_size"] == 2
        launcher.kill()  # only the launcher: the ranks are in sessions of their own
        launcher.wait(timeout=30)
        _wait_for(lambda: all(_exited(p) for p in ranks), 15, "both ranks to exit after the launcher was killed")
    finally:
        if launcher.poll() is None:
            launcher.kill()
        launcher.wait()
        log.close()
        for pid in ranks:
            _kill_if_ours(pid, worker.name)
