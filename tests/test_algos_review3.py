"""Third review of mmevo.grpo.algos: differential fuzzing against verl (volcengine/verl at b178a3c,
trainer/ppo/core_algos.py and utils/torch_functional.py).

Expected numbers are verl's outputs on the same inputs (noted next to each) or hand arithmetic with ``math``.
"""

import math

import pytest
import torch

from mmevo.grpo.algos import agg_loss, kl_penalty, logprobs_from_logits, masked_mean, policy_loss

nan, inf = math.nan, math.inf
AGG = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")


# --------------------------------------------------------------------------- bf16 aggregation
@pytest.mark.parametrize("agg,expected", [
    ("token-mean", 900 / 301),  # verl agg_loss: 2.9900331497192383
    ("seq-mean-token-mean", 900 / 301),  # verl (global_batch_size=1): 2.9900331497192383
    ("seq-mean-token-sum", 900.0),  # verl: 900.0
    ("seq-mean-token-sum-norm", 900 / 301),  # verl, factor T = 301: 2.9900331497192383
])
def test_agg_loss_bf16_counts_301_tokens_exactly(agg, expected):
    # a bf16 loss matrix was aggregated with a bf16 mask: the count 301 rounds to 300 (and the row sum 900 is kept
    # only by luck), so token-mean gave 3.0 instead of 900 / 301; verl (float mask) sums in float32
    L = torch.full((1, 301), 3.0, dtype=torch.bfloat16)
    L[0, 0] = 0.0
    out = agg_loss(L, torch.ones(1, 301), agg)
    assert out.dtype == torch.float32
    assert out.item() == pytest.approx(expected, rel=1e-6)


def test_masked_mean_bf16_counts_tokens_exactly():
    L = torch.full((2, 301), 3.0, dtype=torch.bfloat16)
    L[:, 0] = 0.0
    M = torch.ones(2, 301)
    M[1] = 0.0
    assert masked_mean(L, M).item() == pytest.approx(900 / 301, rel=1e-6)  # verl masked_mean: 2.9900331497192383
    assert masked_mean(L, M, dim=-1).tolist() == pytest.approx([900 / 301, 0.0], rel=1e-6)


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_policy_loss_all_bf16_inputs(agg):
    # one token clipped at 1 + 0.2 (bf16: 1.203125), 300 with ratio 1, advantage +1
    lp = torch.zeros(1, 301, dtype=torch.bfloat16)
    lp[0, 0] = 0.5
    loss, m = policy_loss(lp, torch.zeros(1, 301, dtype=torch.bfloat16), torch.tensor([1.0], dtype=torch.bfloat16),
                          torch.ones(1, 301), agg=agg)
    assert loss.item() == pytest.approx(-(1.203125 + 300) / 301, rel=1e-6)  # verl pg_loss: -1.000674843788147
    assert m["clip_frac"] == pytest.approx(1 / 301, rel=1e-6)  # verl actor/pg_clipfrac: 0.003322259057313204


# --------------------------------------------------------------------------- shapes
def test_mask_of_another_shape_is_an_error():
    # a [T] mask over a [B, T] loss broadcast silently: token-mean divided the sum of B rows by T tokens
    L = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    for agg in AGG:
        with pytest.raises(ValueError, match="mask must have the shape"):
            agg_loss(L, torch.ones(3), agg)
        with pytest.raises(ValueError, match="mask must have the shape"):
            agg_loss(L, torch.ones(1, 3), agg)
    with pytest.raises(ValueError, match="mask must have the shape"):
        masked_mean(L, torch.ones(3))
    with pytest.raises(ValueError, match="mask must have the shape"):
        masked_mean(L, torch.ones(1, 3), dim=-1)
    assert agg_loss(L, torch.ones(2, 3), "token-mean").item() == pytest.approx(3.5)


def test_policy_loss_mismatched_shapes_are_errors():
    lp, old, M = torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 3)
    with pytest.raises(ValueError, match="old_logp"):
        policy_loss(lp, torch.zeros(1, 3), torch.tensor([1.0, -1.0]), M)
    with pytest.raises(ValueError, match="mask must have the shape"):
        policy_loss(lp, old, torch.tensor([1.0, -1.0]), torch.ones(3))
    with pytest.raises(ValueError, match="advantages"):  # one advantage for two sequences: broadcast silently
        policy_loss(lp, old, torch.tensor([1.0]), M)
    with pytest.raises(ValueError, match="advantages"):
        policy_loss(lp, old, torch.ones(1, 3), M)
    # [B], [B, 1] and [B, T] advantages are all fine and agree; ratio 1 -> loss = -mean(A) = 0
    for adv in (torch.tensor([1.0, -1.0]), torch.tensor([[1.0], [-1.0]]), torch.tensor([[1.0] * 3, [-1.0] * 3])):
        loss, _ = policy_loss(lp, old, adv, M)
        assert loss.item() == 0.0


# --------------------------------------------------------------------------- clip range
@pytest.mark.parametrize("low,high", [(nan, 0.2), (0.2, nan), (-0.1, 0.2), (0.2, -0.5)])
def test_policy_loss_bad_clip_range_is_an_error(low, high):
    # NaN gave a NaN loss with clip fractions of 0; a negative epsilon an inverted clip range, silently
    lp, old = torch.tensor([[-1.0, -0.5]]), torch.tensor([[-1.2, -0.1]])
    with pytest.raises(ValueError, match="clip_(low|high) must be"):
        policy_loss(lp, old, torch.tensor([1.0]), torch.ones(1, 2), low, high)


def test_policy_loss_zero_and_wide_clip_range_are_fine():
    lp, old = torch.tensor([[-1.0, -0.5]]), torch.tensor([[-1.2, -0.1]])
    # clip 0: both ratios clipped to 1 from the side that limits the gain -> max(-A r, -A) per token
    loss, _ = policy_loss(lp, old, torch.tensor([1.0]), torch.ones(1, 2), 0.0, 0.0)
    r1, r2 = math.exp(0.2), math.exp(-0.4)
    assert loss.item() == pytest.approx((max(-r1, -1.0) + max(-r2, -1.0)) / 2, rel=1e-6)
    loss, _ = policy_loss(lp, old, torch.tensor([1.0]), torch.ones(1, 2), 5.0, inf)  # no clipping at all
    assert loss.item() == pytest.approx(-(r1 + r2) / 2, rel=1e-6)


# --------------------------------------------------------------------------- KL names
def test_kl_penalty_accepts_verl_names():
    lp, ref = torch.tensor([-1.0, -3.0, -0.5]), torch.tensor([-2.0, -1.0, -0.5])
    assert kl_penalty(lp, ref, "kl").tolist() == pytest.approx([1.0, -2.0, 0.0])  # verl "kl" = k1
    assert kl_penalty(lp, ref, "abs").tolist() == pytest.approx([1.0, 2.0, 0.0])  # verl "abs"
    assert kl_penalty(lp, ref, "mse").tolist() == pytest.approx([0.5, 2.0, 0.0])  # verl "mse" = k2
    with pytest.raises(ValueError, match="unknown kl kind 'full'"):
        kl_penalty(lp, ref, "full")


# --------------------------------------------------------------------------- log-probs
def test_logprobs_keep_float64():
    # float64 logits were rounded to float32: 100 + 1e-6 became 100, so the log-prob was -log 2, off by 5e-7
    z = torch.tensor([[[100.0, 100.0 + 1e-6]]], dtype=torch.float64)
    out = logprobs_from_logits(z, torch.tensor([[0]]))
    assert out.dtype == torch.float64
    assert abs(out.item() - (-math.log1p(math.exp(1e-6)))) < 1e-12  # verl: -0.6931476805600738
    assert logprobs_from_logits(z.float(), torch.tensor([[0]])).dtype == torch.float32
    assert logprobs_from_logits(z.bfloat16(), torch.tensor([[0]])).dtype == torch.float32
