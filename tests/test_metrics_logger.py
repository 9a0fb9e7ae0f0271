"""RunLogger and wandb: each logger owns its own run, so several loggers can share one process."""

import pytest

from mmevo.metrics import RunLogger, read_jsonl

wandb = pytest.importorskip("wandb")


def offline_run_dirs(output_dir):
    return sorted(p for p in (output_dir / "wandb").glob("offline-run-*") if p.is_dir())


def test_two_loggers_in_one_process_keep_their_own_runs(wandb_offline):
    tmp = wandb_offline
    a = RunLogger(tmp / "a", config={"name": "a"}, wandb_mode="offline")
    b = RunLogger(tmp / "b", config={"name": "b"}, wandb_mode="offline")  # must not end a's run
    assert a._wandb is not None and b._wandb is not None
    assert a._wandb.id != b._wandb.id
    for step in range(3):  # interleaved
        a.log(step, {"loss": 1.0 + step, "tag": "x"})
        b.log(step, {"loss": 10.0 + step})
    run_a, run_b = a._wandb, b._wandb
    b.close()  # finishes b's own run and leaves a's run alive
    with pytest.raises(wandb.errors.UsageError):
        run_b.log({"loss": 0.0})
    a.log(3, {"loss": 4.0})
    a.close()
    a.close()  # idempotent
    with pytest.raises(wandb.errors.UsageError):
        run_a.log({"loss": 0.0})

    dirs_a, dirs_b = offline_run_dirs(tmp / "a"), offline_run_dirs(tmp / "b")
    assert len(dirs_a) == 1 and len(dirs_b) == 1
    assert dirs_a[0].resolve() != dirs_b[0].resolve()
    # each offline run wrote its own transaction log
    assert list(dirs_a[0].glob("*.wandb")) and list(dirs_b[0].glob("*.wandb"))

    rows_a, rows_b = read_jsonl(tmp / "a" / "metrics.jsonl"), read_jsonl(tmp / "b" / "metrics.jsonl")
    assert [(r["step"], r["loss"]) for r in rows_a] == [(0, 1.0), (1, 2.0), (2, 3.0), (3, 4.0)]
    assert [(r["step"], r["loss"]) for r in rows_b] == [(0, 10.0), (1, 11.0), (2, 12.0)]


def test_logger_without_a_run_still_writes_jsonl(wandb_offline, monkeypatch):
    def broken_init(*args, **kwargs):
        raise RuntimeError("no wandb today")

    monkeypatch.setattr(wandb, "init", broken_init)
    lg = RunLogger(wandb_offline / "c", wandb_mode="offline")
    assert lg._wandb is None
    lg.log(0, {"loss": 0.5})
    lg.log(1, {"loss": 0.25})
    lg.close()
    assert [(r["step"], r["loss"]) for r in read_jsonl(wandb_offline / "c" / "metrics.jsonl")] == [(0, 0.5), (1, 0.25)]
