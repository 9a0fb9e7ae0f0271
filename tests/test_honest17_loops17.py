"""HONEST / Prism loops, review 17: a real kill -9 in the middle of a trainable-GSS pool append (a torn pool.jsonl)
reruns to the uninterrupted run (1); both loops on the vLLM engine (2); bad task / seed input to both loops (3)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

# -- 1. kill -9 mid pool append, then rerun ---------------------------------------------------------------------------
_POOL_DRIVER = '''
import json, os, signal, sys

from mmevo.config import load_config
from mmevo.honest import loop
import mmevo.honest.selfplay as sp

kill_at = int(sys.argv[3])
if kill_at:  # SIGKILL in the kill_at-th pool append, once its first row and part of the next reached the disk
    calls = [0]
    append = loop.PoolWriter.__call__

    def append_or_die(self, rows):
        calls[0] += 1
        if calls[0] != kill_at:
            return append(self, rows)
        # PoolWriter's own write order: one json line per row, appended in order; the kill tears the second
        text = "".join(json.dumps({**r, "step": self.step}) + "\\n" for r in rows)
        cut = text.index("\\n") + 1 + 15
        with self.path.open("a", encoding="utf-8") as f:
            f.write(text[:cut])
            f.flush()
            os.fsync(f.fileno())
        os.kill(os.getpid(), signal.SIGKILL)

    loop.PoolWriter.__call__ = append_or_die

# the tiny generator writes no expression: each sample's problem comes from its text (deterministic per seed), and
# the frozen solver grades every sample, so every step accepts prompts_per_step x rollout.n problems
sp.parse_generated = lambda text: (sp.problem_from_expression(f"{len(text) % 7} + {sum(map(ord, text)) % 5}"), "")
sp.honest_aux = lambda text, ex: {"confidence": 0.5, "correct": True}
loop.run_honest(load_config("configs/honest_tiny.yaml", [
    f"model.path={sys.argv[1]}", f"honest.output_dir={sys.argv[2]}", "honest.gss_mode=trainable",
    "honest.warmup_sft=false", "honest.eval_calibration=false", "honest.gss_blocks=2", "honest.gss_block_steps=1",
    "honest.gss_generator_steps=2", "honest.gss_solver_samples=2", "data.n_train=16", "trainer.prompts_per_step=2",
    "trainer.mini_batch_prompts=2", "rollout.n=4", "rollout.max_tokens=12", "rollout.temperature=1.0"]))
'''


def _curve(path):
    return [{k: v for k, v in json.loads(line).items() if not k.startswith(("time/", "throughput/", "memory/"))}
            for line in path.read_text().splitlines() if line.strip()]


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_kill_mid_pool_append_leaves_a_torn_pool_that_the_rerun_cuts_back_to_the_uninterrupted_run(
        tiny_text_path, tmp_path):
    """SIGKILL while generator step 2 (block 1) appends its accepted problems: pool.jsonl ends in a torn row and
    holds a row of the step no checkpoint has. The rerun cuts the pool back to the generator's checkpoint (step 1),
    exports block 1's frozen solver again, runs step 2 again and ends as the uninterrupted run did: the same pool,
    curves, block summaries and final weights of both roles."""
    driver = tmp_path / "driver.py"
    driver.write_text(_POOL_DRIVER)
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}

    def run(out, kill_at=0):
        return subprocess.run([sys.executable, str(driver), str(tiny_text_path), str(out), str(kill_at)], cwd=root,
                              env=env, capture_output=True, text=True, timeout=600)

    ref, out = tmp_path / "uninterrupted", tmp_path / "killed"
    done = run(ref)
    assert done.returncode == 0, done.stderr[-3000:]
    pool = [json.loads(line) for line in (ref / "generator" / "pool.jsonl").read_text().splitlines()]
    assert [r["step"] for r in pool] == [1] * 8 + [2] * 8 + [3] * 8 + [4] * 8

    killed = run(out, kill_at=2)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    torn = (out / "generator" / "pool.jsonl").read_text()
    lines = torn.split("\n")
    assert len(lines) == 10 and lines[-1] and not torn.endswith("\n")  # 8 rows of step 1, 1 of step 2, a torn one
    assert json.loads(lines[8])["step"] == 2
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[-1])
    assert sorted(p.name for p in (out / "generator" / "checkpoints").iterdir() if p.name.startswith("step_")) == \
        ["step_000001"]
    assert not (out / "summary.json").exists()

    rerun = run(out)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert (out / "generator" / "pool.jsonl").read_text() == (ref / "generator" / "pool.jsonl").read_text()
    for role in ("solver", "generator"):
        assert _curve(out / role / "metrics.jsonl") == _curve(ref / role / "metrics.jsonl"), role
        assert _digest(out / role / "final" / "model.safetensors") == \
            _digest(ref / role / "final" / "model.safetensors"), role
    summary, want = (json.loads((d / "summary.json").read_text()) for d in (out, ref))
    assert summary["blocks"] == want["blocks"]
    # each block's pool: the distinct problems accepted up to its last generator step
    assert [b["pool_size"] for b in summary["blocks"]] == [len({r["id"] for r in pool if r["step"] <= s}) for s in (2, 4)]
