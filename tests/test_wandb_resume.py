"""A resumed trainer continues its checkpoint's wandb run (same id, rewound to the checkpoint's step) instead of
opening a second run, and what ``wandb sync`` would upload holds every step once. Real wandb, offline, no network."""

import time

import pytest

from conftest import randomize
from mmevo.config import load_config
from mmevo.data.synthetic import split_train_heldout
from mmevo.grpo.checkpoint import latest_checkpoint, load_trainer_state
from mmevo.grpo.trainer import GRPOTrainer
from mmevo.metrics import RunLogger, read_curve
from mmevo.models.loader import load_model
from mmevo.rollout.factory import build_engine

wandb = pytest.importorskip("wandb")
from wandb.proto import wandb_internal_pb2  # noqa: E402


def wandb_records(path) -> list:
    """The records of an offline run's ``.wandb`` transaction log: a 7-byte header (":W&B", magic, version), then
    leveldb-log chunks in 32 KiB blocks, each chunk a 7-byte header (crc32c, little-endian length, type: 1 full,
    2 first, 3 middle, 4 last); a block's tail shorter than a header is zero padding. (wandb 0.31 ships no Python
    reader for it.)"""
    data = path.read_bytes()
    assert data[:4] == b":W&B", path
    records, pending, pos, block = [], b"", 7, 32768
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == 0:  # zero padding up to the block's end
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
    return records


def finished_records(path, timeout_s: float = 60.0) -> list:
    """``wandb_records`` once the log holds its run's ``exit`` record. ``run.finish()`` can return before wandb's
    service process has written the run out (seen on a loaded CI machine: a log with its header and no run record yet),
    so the log is read again until it is complete, or as it is after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            records = wandb_records(path)
        except Exception:  # a log still empty, or its last chunk half-written
            records = None
        if records and any(r.WhichOneof("record_type") == "exit" for r in records):
            return records
        if time.monotonic() > deadline:
            return records if records is not None else wandb_records(path)
        time.sleep(0.2)


def offline_segment(run_dir) -> dict:
    """One offline run directory: its run id, its rewind point (None: a new run), the steps its history holds and
    its start time."""
    (log,) = run_dir.glob("*.wandb")
    records = finished_records(log)
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    branch = (run.branch_point.run, run.branch_point.value) if run.HasField("branch_point") else None
    steps = [int(r.history.step.num) for r in records if r.WhichOneof("record_type") == "history"]
    return {"id": run.run_id, "branch": branch, "steps": steps, "start": run.start_time.ToNanoseconds()}


def offline_segments(output_dir) -> list[dict]:
    """The offline runs of one output dir, in start order (the order ``wandb sync`` replays a run's segments in)."""
    dirs = [p for p in (output_dir / "wandb").glob("offline-run-*") if p.is_dir()]
    return sorted((offline_segment(d) for d in dirs), key=lambda seg: seg["start"])


def synced_history(segments: list[dict]) -> list[int]:
    """The steps the server keeps once the segments are synced in order: a rewound segment first drops the run's
    steps after its branch point."""
    steps = []
    for seg in segments:
        if seg["branch"] is not None:
            steps = [s for s in steps if s <= seg["branch"][1]]
        steps += seg["steps"]
    return steps


def _cfg(out, **over):
    base = {"data.prompt_template": "none", "rollout.n": 2, "rollout.max_tokens": 4, "trainer.prompts_per_step": 2,
            "trainer.mini_batch_prompts": 2, "trainer.micro_batch_seqs": 4, "trainer.steps": 3,
            "trainer.output_dir": str(out), "trainer.wandb_mode": "offline", "trainer.progress": False,
            "trainer.save_every": 2, "algo.kl_coef": 0, "trainer.seed": 3, "reward.heads": "{accuracy: 1.0}"}
    base.update(over)
    return load_config(None, [f"{k}={v}" for k, v in base.items()])


def _trainer(cfg, path):
    lm = load_model(path)
    randomize(lm.model, std=0.15, seed=11)
    return GRPOTrainer(cfg, lm, build_engine(cfg, lm), split_train_heldout(12, 0, seed=5)[0], [])


def test_a_resumed_trainer_continues_its_wandb_run_with_no_step_twice(tiny_text_path, wandb_offline):
    out = wandb_offline / "run"
    # 3 steps, checkpoint at step 2, then the run dies: step 3 is in wandb but not in any checkpoint
    first = _trainer(_cfg(out), tiny_text_path)
    first.train()
    run_id = first.logger.wandb_run_id
    first.close()
    assert run_id is not None
    assert load_trainer_state(latest_checkpoint(out))["wandb_run_id"] == run_id

    resumed = _trainer(_cfg(out, **{"trainer.steps": 4}), tiny_text_path)  # resumes at step 2, runs 3 and 4
    resumed.train()
    assert resumed.logger.wandb_run_id == run_id
    resumed.close()
    assert load_trainer_state(latest_checkpoint(out))["wandb_run_id"] == run_id  # step 4's checkpoint: same run

    segments = offline_segments(out)
    assert [(s["id"], s["branch"], s["steps"]) for s in segments] == [
        (run_id, None, [1, 2, 3]),
        (run_id, (run_id, 2.0), [3, 4]),  # rewound to the checkpoint's step: step 3 is logged again, replacing it
    ]
    assert synced_history(segments) == [1, 2, 3, 4]
    assert [r["step"] for r in read_curve(out / "metrics.jsonl")] == [1, 2, 3, 4]

    # a fresh start in the same dir (resume=false) or in a new dir never continues that run
    for fresh_out, over in ((out, {"trainer.resume": False}), (wandb_offline / "other", {})):
        fresh = _trainer(_cfg(fresh_out, **{"trainer.steps": 1, **over}), tiny_text_path)
        fresh.train()
        fresh_id = fresh.logger.wandb_run_id
        fresh.close()
        assert fresh_id not in (None, run_id)
        assert [(s["branch"], s["steps"]) for s in offline_segments(fresh_out) if s["id"] == fresh_id] == [(None, [1])]


class _FakeRun:
    def __init__(self, run_id, starting_step):
        self.id, self.starting_step, self.logged = run_id, starting_step, []

    def log(self, metrics, step):
        self.logged.append(step)

    def finish(self):
        pass


def test_online_resume_where_the_server_refuses_to_rewind_sends_only_new_steps(tmp_path, monkeypatch):
    calls = []

    def init(**kwargs):  # a server without rewind: resume_from fails, resume="allow" continues at its last step + 1
        calls.append({k: kwargs.get(k) for k in ("id", "resume", "resume_from", "mode")})
        if kwargs.get("resume_from"):
            raise wandb.errors.CommError("rewind is not enabled for this run")
        return _FakeRun(kwargs["id"], starting_step=4)

    monkeypatch.setattr(wandb, "init", init)
    lg = RunLogger(tmp_path, wandb_mode="online", defer_wandb=True)
    assert lg.wandb_run_id is None  # deferred: nothing opened yet
    lg.begin(2, "abc123")
    assert calls == [{"id": None, "resume": None, "resume_from": "abc123?_step=2", "mode": "online"},
                     {"id": "abc123", "resume": "allow", "resume_from": None, "mode": "online"}]
    assert lg.wandb_run_id == "abc123"
    for step in (3, 4, 5):
        lg.log(step, {"loss": float(step)})
    assert lg._wandb.logged == [4, 5]  # the server already has step 3 (the run's before the resume)
    assert [r["step"] for r in read_curve(tmp_path / "metrics.jsonl")] == [3, 4, 5]  # the curve has them all


def test_wandb_failing_on_resume_never_kills_the_run(tmp_path, monkeypatch):
    def broken_init(**kwargs):
        raise RuntimeError("no wandb today")

    monkeypatch.setattr(wandb, "init", broken_init)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 1.0}\n{"step": 2, "loss": 2.0}\n')
    lg = RunLogger(tmp_path, wandb_mode="offline", defer_wandb=True)
    lg.begin(1, "abc123")  # the checkpoint is at step 1: step 2 goes, and the run goes on without wandb
    assert lg.wandb_run_id is None
    lg.log(2, {"loss": 0.5})
    lg.close()
    assert [(r["step"], r["loss"]) for r in read_curve(tmp_path / "metrics.jsonl")] == [(1, 1.0), (2, 0.5)]
