"""A DeepSpeed op build killed mid-way (Ctrl-C, a test timeout) leaves torch's build lock behind, and every later
CPU run then waits for it forever inside ``deepspeed.init_distributed``, printing nothing. ``init_distributed`` now
names the file when it is old enough to be abandoned."""

import os
import time
import warnings

import pytest

from mmevo.grpo import distributed as D


@pytest.fixture
def build_root(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    (tmp_path / D.SHM_COMM_EXTENSION).mkdir()
    return tmp_path / D.SHM_COMM_EXTENSION


def _lock(build_dir, age_s: float):
    lock = build_dir / "lock"
    lock.write_text("")
    then = time.time() - age_s
    os.utime(lock, (then, then))
    return lock


def test_only_an_old_lock_is_stale(build_root):
    assert D.stale_build_lock(D.SHM_COMM_EXTENSION) is None  # no lock: the usual case
    lock = _lock(build_root, 30)
    assert D.stale_build_lock(D.SHM_COMM_EXTENSION) is None  # a build in progress
    _lock(build_root, D.STALE_BUILD_LOCK_S + 60)
    assert D.stale_build_lock(D.SHM_COMM_EXTENSION) == lock


@pytest.mark.parametrize("age_s, local_rank, warned", [(3600, "0", True), (30, "0", False), (3600, "1", False)])
def test_init_distributed_on_cpu_names_a_stale_lock_before_joining(build_root, monkeypatch, age_s, local_rank, warned):
    import deepspeed

    import mmevo.runlock

    lock = _lock(build_root, age_s)
    joined = []
    monkeypatch.setattr(mmevo.runlock, "exit_with_parent_if_launched", lambda: False)
    monkeypatch.setattr(deepspeed, "init_distributed", lambda dist_backend: joined.append(dist_backend))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", local_rank)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        D.init_distributed("cpu")
    msgs = [str(w.message) for w in caught if str(lock) in str(w.message)]
    assert joined == ["gloo"]  # a warning, not a refusal: another process may really be building it
    assert len(msgs) == int(warned)
    if warned:
        assert "60 min old" in msgs[0] and "delete that file" in msgs[0]
