"""One whole GRPO step under DeepSpeed ZeRO-1 / ZeRO-2 in 2 CPU processes (gloo) equals the same step in one process:
every update's gathered gradient, the post-step weights and the logged metrics (reduced over the ranks as
``GRPOTrainer.train`` logs them), for each loss aggregation with the KL and entropy terms, and two PPO epochs over two
mini-batches (the replayed rollout of tests/invar27_harness.py: unequal lengths, truncated responses, a
zero-advantage group and an empty response; 2 prompts per rank).

Tolerance 1e-5 relative on gradients and metrics (fp32, sums in another order). DeepSpeed keeps the optimizer it was
given (AdamW), whose first update is about lr x sign(g): an entry near 0 whose sign differs in its last bits moves by
up to 2 lr, so the weights are held to 1e-5 relative of the weights plus that (lr 1e-5)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (pip install deepspeed)")

from invar27_harness import assert_same_step, run_step  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "token-mean": {"algo.loss_agg": "token-mean"},
    "seq-mean-token-mean+kl+ent": {"algo.loss_agg": "seq-mean-token-mean", "algo.kl_coef": 0.2,
                                   "algo.kl_type": "k3+", "algo.entropy_coef": 0.03},
    "seq-mean-token-sum-norm+kl": {"algo.loss_agg": "seq-mean-token-sum-norm", "algo.kl_coef": 0.2,
                                   "algo.kl_type": "k2", "trainer.micro_batch_seqs": 3},
    "ppo2": {"algo.loss_agg": "seq-mean-token-sum", "algo.ppo_epochs": 2, "trainer.mini_batch_prompts": 2,
             "algo.kl_coef": 0.1, "algo.entropy_coef": 0.02, "trainer.micro_batch_seqs": 3,
             "trainer.logits_chunk_tokens": 7},
}
LR = 1e-5


def _zero_step(model, stage: int, over: dict, tmp_path, port: int) -> dict:
    """The worker's result: one DeepSpeed step in 2 processes under the shipped ZeRO-2 config at ``stage``."""
    ds_config = json.loads((ROOT / "configs" / "deepspeed" / "zero2.json").read_text())
    ds_config["zero_optimization"]["stage"] = stage
    (tmp_path / "ds.json").write_text(json.dumps(ds_config))
    out = tmp_path / "result.pt"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "PYTHONFAULTHANDLER": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
           str(ROOT / "tests" / "dist" / "invar27_step_worker.py"), str(model), str(tmp_path / "ds.json"), str(out),
           str(tmp_path / "run"), json.dumps(over)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return torch.load(out, weights_only=False)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("stage", [1, 2])
def test_zero_step_equals_the_single_process_step(tiny_vl_path, tmp_path, stage, case):
    over = {**CASES[case], "trainer.lr": LR}
    ds = _zero_step(tiny_vl_path, stage, over, tmp_path, 29700 + 10 * list(CASES).index(case) + stage)
    assert ds["world_size"] == 2
    # each rank keeps a contiguous share of the prompts (0, 1 | 2, 3) and its u-th mini-batch of them: two updates
    # of one prompt per rank train on {0, 2} then {1, 3}, which one process gets from that order
    order = [0, 2, 1, 3] if case == "ppo2" else None
    sp = run_step(tiny_vl_path, tmp_path / "sp", sgd=False, order=order, **over)
    assert len(sp["grads"]) == (4 if case == "ppo2" else 1)
    assert_same_step(ds, sp, what=(stage, case), weights_atol=2 * LR)


def test_pooled_mean_std_is_that_of_the_ranks_samples_together():
    from mmevo.grpo.distributed import pooled_mean_std

    g = torch.Generator().manual_seed(0)
    parts = [torch.randn(5, generator=g, dtype=torch.float64) + 3, torch.rand(2, generator=g, dtype=torch.float64),
             torch.tensor([7.0], dtype=torch.float64)]
    mean, std = pooled_mean_std([len(p) for p in parts], [float(p.mean()) for p in parts],
                                [float(p.std(unbiased=False)) for p in parts])
    every = torch.cat(parts)
    assert mean == pytest.approx(float(every.mean()), rel=1e-12)
    assert std == pytest.approx(float(every.std(unbiased=False)), rel=1e-12)
    # two ranks of rewards all 0 and all 1: std 0 each, 0.5 together (the mean of the ranks' stds said 0)
    assert pooled_mean_std([4, 4], [0.0, 1.0], [0.0, 0.0]) == (0.5, 0.5)
    assert pooled_mean_std([0, 0], [0.2, 0.4], [0.1, 0.3]) == pytest.approx((0.3, 0.2))  # no count: plain means
