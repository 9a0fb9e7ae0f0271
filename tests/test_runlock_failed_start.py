"""A run that fails at its start (no such device, a bad data path) leaves no empty output_dir holding only the lock
file; a directory that existed before, or that the run wrote into, is kept as it is."""

import sys

import pytest

from mmevo.config import load_config
from mmevo.recipes import run_grpo, run_sft
from mmevo.runlock import LOCK_FILE, RunLock, output_dir_lock

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock: Linux")


def _fail_inside(out, write=None):
    with pytest.raises(RuntimeError, match="boom"):
        with output_dir_lock(out):
            if write:
                (out / write).write_text("x")
            raise RuntimeError("boom")


def test_a_failed_start_removes_the_directory_it_created(tmp_path):
    out = tmp_path / "a" / "run"
    _fail_inside(out)
    assert not out.exists() and (tmp_path / "a").is_dir()  # only the leaf the lock made; parents stay


def test_a_directory_that_existed_or_got_files_is_kept(tmp_path):
    existed = tmp_path / "existed"
    existed.mkdir()
    _fail_inside(existed)
    assert sorted(p.name for p in existed.iterdir()) == [LOCK_FILE]
    written = tmp_path / "written"
    _fail_inside(written, write="metrics.jsonl")
    assert sorted(p.name for p in written.iterdir()) == [LOCK_FILE, "metrics.jsonl"]
    ok = tmp_path / "ok"
    with output_dir_lock(ok):  # a run that ends normally keeps its directory (and the released lock file)
        pass
    assert sorted(p.name for p in ok.iterdir()) == [LOCK_FILE]


def test_discard_needs_the_lock_held(tmp_path):
    lock = RunLock(tmp_path / "r").acquire()
    lock.release()
    assert lock.discard() is False and (tmp_path / "r" / LOCK_FILE).exists()


@pytest.mark.parametrize("run, key, over, error", [
    (run_grpo, "trainer.output_dir", ["model.device=cuda:7"], "model.device=cuda:7: this machine has"),
    (run_grpo, "trainer.output_dir", ["data.train=missing.jsonl"], "missing.jsonl"),
    (run_sft, "sft.output_dir", ["data.train=missing.jsonl"], "missing.jsonl"),
])
def test_train_and_sft_that_fail_at_start_leave_no_directory(tmp_path, run, key, over, error):
    out = tmp_path / "out"
    cfg = load_config(None, [f"{key}={out}", f"model.path={tmp_path / 'no-model'}", "trainer.steps=1",
                             "trainer.progress=false", "trainer.wandb_mode=disabled", *over])
    with pytest.raises((ValueError, FileNotFoundError), match=error):
        run(cfg)
    assert not out.exists()
