"""Review tests for the run lock (hostile lock files, races between processes) and the single-process helpers."""

import errno
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mmevo.grpo import distributed as D
from mmevo.runlock import LOCK_FILE, OutputDirBusy, RunLock, output_dir_lock, read_holder

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
for _k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
    ENV.pop(_k, None)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock: Linux")


def _is_free(out) -> bool:
    try:
        RunLock(out).acquire().release()
        return True
    except OutputDirBusy:
        return False


# -- hostile lock files ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("content", ["[1, 2]", "123", '"holder"', "true", "garbage{", "", "\n", "null"])
def test_a_lock_file_with_garbage_is_taken_over_and_released(tmp_path, content):
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_FILE).write_text(content)
    assert read_holder(out) is None  # only a JSON object is a holder's record
    with output_dir_lock(out) as lock:
        assert lock.held and lock.previous is None
        assert json.loads((out / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert _is_free(out) and (out / LOCK_FILE).read_text() == ""


def test_a_busy_dir_with_a_non_object_record_still_gives_a_clear_refusal(tmp_path):
    out = tmp_path / "run"
    with RunLock(out):
        (out / LOCK_FILE).write_text("[7]")  # the holder's record was overwritten with garbage
        with pytest.raises(OutputDirBusy) as e:
            RunLock(out).acquire()
        assert str(out) in str(e.value) and "in use by another live mmevo run" in str(e.value)


def test_a_record_of_another_host_or_a_reused_live_pid_is_taken_over(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    # pid of a live unrelated process (our parent) and of another host: flock, not the pid, decides
    for rec in ({"pid": os.getppid(), "host": socket.gethostname(), "started": "x"},
                {"pid": 1, "host": "some-other-host", "started": "y"}):
        (out / LOCK_FILE).write_text(json.dumps(rec))
        lock = RunLock(out).acquire()
        assert lock.previous == rec
        lock.release()


def test_a_failed_record_write_does_not_keep_the_lock(tmp_path, monkeypatch):
    out = tmp_path / "run"

    def full_disk(*a):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full_disk)
    with pytest.raises(OSError) as e:
        RunLock(out).acquire()
    assert e.value.errno == errno.ENOSPC
    monkeypatch.undo()
    assert _is_free(out)  # the descriptor holding the flock was closed


def test_an_output_dir_that_cannot_hold_a_lock_file_fails_naming_the_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError) as e:
        RunLock(blocker / "run").acquire()  # the parent is a regular file
    assert str(blocker) in str(e.value)


def test_a_symlinked_output_dir_is_the_same_run(tmp_path):
    real = tmp_path / "real"
    link = tmp_path / "link"
    real.mkdir()
    link.symlink_to(real, target_is_directory=True)
    with RunLock(link):
        with pytest.raises(OutputDirBusy):
            RunLock(real).acquire()
        assert json.loads((real / LOCK_FILE).read_text())["output_dir"] == str(real.resolve())
    assert _is_free(real)


# -- two processes racing for a stale lock --------------------------------------------------------------------------
RACER = """
import os, sys, time
from pathlib import Path
from mmevo.runlock import OutputDirBusy, RunLock
out, go, stop = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
while not go.exists():
    time.sleep(0.001)
try:
    RunLock(out).acquire()
    print("won", flush=True)
except OutputDirBusy as e:
    print("lost " + str(e).replace(chr(10), " "), flush=True)
while not stop.exists():
    time.sleep(0.01)
"""


def test_processes_racing_for_a_stale_lock_have_exactly_one_winner(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_FILE).write_text(json.dumps({"pid": 999999, "host": socket.gethostname(), "started": "dead"}))
    go, stop = tmp_path / "go", tmp_path / "stop"
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(out), str(go), str(stop)], env=ENV,
                              stdout=subprocess.PIPE, text=True) for _ in range(4)]
    try:
        time.sleep(1.0)  # let every racer import and spin on the go file
        go.touch()
        lines = [p.stdout.readline().strip() for p in procs]
        winners = [p.pid for p, line in zip(procs, lines) if line == "won"]
        assert len(winners) == 1, lines
        assert all(line.startswith("lost output_dir") for line in lines if line != "won"), lines
        assert not _is_free(out)
    finally:
        stop.touch()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    assert _is_free(out)  # exit released the winner's flock


# -- the distributed helpers in one process -------------------------------------------------------------------------
def test_single_process_helpers_are_identities(monkeypatch):
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    assert (D.rank(), D.world_size(), D.local_rank(), D.is_main()) == (0, 1, 0, True)
    m = {"reward/mean": 0.5, "data/samples": 3, "note": "x"}
    assert D.all_reduce_mean(m, sum_keys=("data/samples",)) == m
    assert D.broadcast_from_main({"a": 1}) == {"a": 1} and D.all_gather_objects(7) == [7]
    D.barrier()
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert (D.rank(), D.world_size(), D.is_main(), D.local_rank()) == (2, 4, False, 2)


def test_reduction_semantics_by_key_name():
    vals = [1.0, 4.0, 7.0]
    assert D._reduce(vals, "reward/mean", ()) == 4.0
    assert D._reduce(vals, "data/samples", ("data/samples",)) == 12.0
    assert D._reduce(vals, "actor/ratio_max", ()) == 7.0
    assert D._reduce(vals, "memory/peak_rss_mb", ()) == 7.0
    assert D._reduce(vals, "actor/ratio_min", ()) == 1.0
    assert D._reduce(vals, "peak/x_rate", ()) == 4.0  # only the leaf name decides


def test_numpy_metrics_are_reduced_across_ranks_like_python_numbers():
    import numpy as np

    from mmevo.grpo.distributed import numeric_metrics

    got = numeric_metrics({"a": np.float32(0.5), "b": np.int64(3), "c": 2, "d": 1.5, "e": True, "f": "x",
                           "g": np.float64(0.25), "h": None})
    assert got == {"a": 0.5, "b": 3.0, "c": 2.0, "d": 1.5, "g": 0.25}  # a float32 was left rank-local before
    assert all(type(v) is float for v in got.values())
