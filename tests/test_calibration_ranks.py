"""`mmevo eval --calibration` under torchrun (2 real CPU processes): it runs as one process, as the benchmark
evaluation does. It used to generate every held-out task on every rank and have both ranks write calibration.json,
reliability.png and responses.jsonl into one eval.out_dir (rank 1 without holding its lock), exit 0."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mmevo.honest.calibration import run_calibration_eval
from mmevo.config import load_config

ROOT = Path(__file__).resolve().parent.parent
REFUSAL = "mmevo eval --calibration runs as one process, not under a launcher with WORLD_SIZE=2"


def test_calibration_eval_under_torchrun_is_refused_on_every_rank(tiny_text_path, tmp_path):
    out = tmp_path / "cal"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    log_dir = tmp_path / "logs"
    # --monitor-interval 10: torchrun stops the other ranks as soon as it sees one fail (every 0.1 s by default), and
    # on an idle machine rank 0's refusal came first and rank 1 was killed before it printed its own
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29563",
           "--monitor-interval", "10",
           "--log_dir", str(log_dir), "--redirects", "3", "-m", "mmevo.cli", "eval", "--calibration",
           "--model", str(tiny_text_path), "--out", str(out), "--limit", "4", "--max-tokens", "4",
           "data.n_train=20", "data.n_heldout=8", "trainer.progress=false"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # each rank's own stderr (torchrun --redirects 3 keeps them apart): both refused, neither loaded the model
    errs = {p.parent.name: p.read_text() for p in log_dir.rglob("stderr.log")}
    assert sorted(errs) == ["0", "1"], sorted(errs)
    for rank, err in errs.items():
        assert f"mmevo eval: error: {REFUSAL}" in err, (rank, err[-2000:])
        assert "Loading weights" not in err, (rank, err[-2000:])
    assert not any(p.name in ("calibration.json", "responses.jsonl", "reliability.png") for p in out.rglob("*"))


def test_calibration_eval_in_one_process_still_writes_its_report(tiny_text_path, tmp_path, monkeypatch):
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    out = tmp_path / "cal"
    cfg = load_config(None, [f"model.path={tiny_text_path}", "data.heldout=honest_tasks", f"eval.out_dir={out}",
                             "eval.limit=3", "eval.max_tokens=4", "data.n_train=20", "data.n_heldout=8",
                             "trainer.progress=false"])
    summary = run_calibration_eval(cfg)
    assert summary["n"] == 3 and summary["reused"] is False
    assert len((out / "responses.jsonl").read_text().splitlines()) == 3
    assert json.loads((out / "calibration.json").read_text())["examples"] == 3
    monkeypatch.setenv("WORLD_SIZE", "2")  # the same call under a launcher's environment
    with pytest.raises(ValueError, match=REFUSAL):
        run_calibration_eval(cfg)
