"""Second review of the GRPO math (mmevo.grpo.algos) and the reward-head mixer (mmevo.rewards.heads).

Expected numbers are computed here by hand with ``math`` (never by the code under test).
"""

import math

import pytest
import torch

from mmevo.grpo.algos import agg_loss, entropy_from_logits, group_advantages, policy_loss
from mmevo.rewards.heads import AccuracyHead, RewardMixer, ScoredSample

inf, nan = math.inf, math.nan


def _entropy_and_grad(zs):
    """Entropy H = -sum p log p and dH/dz_i = p_i (sum_j p_j z_j - z_i) of softmax(zs), in plain math."""
    e = [math.exp(z) for z in zs]
    p = [x / sum(e) for x in e]
    mean_z = sum(pi * z for pi, z in zip(p, zs))
    return -sum(pi * math.log(pi) for pi in p), [pi * (mean_z - z) for pi, z in zip(p, zs)]


# --------------------------------------------------------------------------- entropy
def test_entropy_with_minus_inf_logits_is_finite_and_right():
    # a -inf logit is a token of probability 0 (vocab masking): it adds lim p log p = 0, not 0 * -inf = NaN
    z = torch.tensor([[0.0, 0.0, -inf], [1.0, 2.0, -inf]], requires_grad=True)
    h = entropy_from_logits(z)
    h_ref, g_ref = _entropy_and_grad([1.0, 2.0])
    assert h[0].item() == pytest.approx(math.log(2), abs=1e-6)
    assert h[1].item() == pytest.approx(h_ref, abs=1e-6)
    h.sum().backward()
    assert torch.isfinite(z.grad).all(), z.grad
    assert z.grad[0].tolist() == pytest.approx([0.0, 0.0, 0.0], abs=1e-7)
    assert z.grad[1].tolist() == pytest.approx(g_ref + [0.0], abs=1e-6)


def test_entropy_with_minus_inf_logits_bf16():
    z = torch.tensor([[1.0, -inf, 2.0, 3.0, -inf]], dtype=torch.bfloat16)
    h_ref, _ = _entropy_and_grad([1.0, 2.0, 3.0])
    h = entropy_from_logits(z)
    assert h.dtype == torch.float32
    assert h.item() == pytest.approx(h_ref, abs=1e-5)


# --------------------------------------------------------------------------- advantages
@pytest.mark.parametrize("scale", ["group", "batch", "none"])
@pytest.mark.parametrize("bad", [nan, inf, -inf])
def test_group_advantages_non_finite_reward_is_an_error(scale, bad):
    # one NaN reward used to turn its whole group (all of the batch for "batch") into NaN advantages, silently
    with pytest.raises(ValueError, match=r"rewards must be finite.*\[1\]"):
        group_advantages(torch.tensor([1.0, bad, 0.0, 1.0]), torch.tensor([0, 0, 1, 1]), scale)


def test_group_advantages_finite_rewards_unchanged():
    # group 0: mean 0.5, unbiased std sqrt(0.5); group 1: all equal -> 0
    adv = group_advantages(torch.tensor([1.0, 0.0, 2.0, 2.0]), torch.tensor([0, 0, 1, 1]))
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    assert adv.tolist() == pytest.approx([a, -a, 0.0, 0.0], abs=1e-6)


# --------------------------------------------------------------------------- Dr.GRPO normaliser
@pytest.mark.parametrize("factor", [0, 0.0, -4.0, nan, inf])
def test_sum_norm_bad_loss_scale_factor_is_an_error(factor):
    L, M = torch.ones(2, 3), torch.ones(2, 3)
    with pytest.raises(ValueError, match="loss_scale_factor"):
        agg_loss(L, M, "seq-mean-token-sum-norm", loss_scale_factor=factor)
    with pytest.raises(ValueError, match="loss_scale_factor"):
        policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.tensor([1.0, -1.0]), M,
                    agg="seq-mean-token-sum-norm", loss_scale_factor=factor)


def test_sum_norm_good_factor_and_other_modes_ignore_it():
    L = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    M = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    assert agg_loss(L, M, "seq-mean-token-sum-norm", loss_scale_factor=4.0).item() == pytest.approx(18.0 / 4.0)
    assert agg_loss(L, M, "seq-mean-token-sum-norm").item() == pytest.approx(18.0 / 3.0)  # default T = 3
    # ignored (documented) by the other modes, even when it would be invalid for the norm mode
    assert agg_loss(L, M, "token-mean", loss_scale_factor=0.0).item() == pytest.approx(18.0 / 5.0)


# --------------------------------------------------------------------------- reward mixer
def _sample(resp, gold="2"):
    return ScoredSample(response=resp, group_id=0, gold=gold, choices=None)


def test_mixer_without_heads_is_an_error():
    with pytest.raises(ValueError, match="at least one head"):
        RewardMixer({})


@pytest.mark.parametrize("w", [nan, inf, -inf, "abc", None])
def test_mixer_non_finite_weight_is_an_error_naming_the_head(w):
    with pytest.raises(ValueError, match="'format'.*finite"):
        RewardMixer({"accuracy": 1.0, "format": w})


def test_mixer_weighted_sum_and_zero_weight():
    samples = [_sample("<think>x</think> \\boxed{2}"), _sample("<think>x</think> \\boxed{3}"), _sample("so \\boxed{2}")]
    # accuracy 1, 0, 1; format 1, 1, 0 (no think block)
    total, m = RewardMixer({"accuracy": 2.0, "format": 0.5})(samples)
    assert total.tolist() == pytest.approx([2.5, 0.5, 2.0])
    total, _ = RewardMixer({"accuracy": 2.0, "format": 0})(samples)  # weight 0 (a muted head) is allowed
    assert total.tolist() == pytest.approx([2.0, 0.0, 2.0])


def test_accuracy_head_on_an_empty_batch():
    # a rank without samples is not a label-free run: no error, no rewards
    r, m = AccuracyHead().score([])
    assert r.shape == (0,) and m == {"no_gold": 0}
    total, _ = RewardMixer({"accuracy": 1.0, "format": 0.1})([])
    assert total.shape == (0,)


@pytest.mark.parametrize("scale", ["group", "batch"])
def test_group_advantages_eps_zero_zero_signal_is_zero_not_nan(scale):
    # algo.adv_eps = 0 is a valid config; the docstring promises 0 (never NaN) for singleton / all-equal groups
    r, g = torch.tensor([1.0, 1.0, 0.0, 1.0, 2.0]), torch.tensor([0, 0, 1, 2, 2])
    adv = group_advantages(r, g, scale, eps=0.0)
    # group 2 centred: -0.5, 0.5; std: of group 2 [1, 2] sqrt(0.5) ("group"), of all five sqrt(2/4) ("batch")
    a = 0.5 / math.sqrt(0.5)
    assert adv.tolist() == pytest.approx([0.0, 0.0, 0.0, -a, a], abs=1e-6)
    assert group_advantages(torch.tensor([3.0]), torch.tensor([7]), scale, eps=0.0).tolist() == [0.0]
    assert group_advantages(torch.tensor([2.0, 2.0]), torch.tensor([0, 0]), scale, eps=0.0).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("eps", [1e-6, 0.0])
def test_group_advantages_all_equal_float64_group_is_exactly_zero(eps):
    # (0.1 + 0.1 + 0.1) / 3 != 0.1 in float64: the group was centred to +-1e-17 and divided by a std of 1e-17,
    # giving 1e-11 (eps 1e-6) or +-0.82 (eps 0) instead of 0 for a group without signal
    r = torch.tensor([0.1, 0.1, 0.1, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 1.0, 0.0], dtype=torch.float64)
    g = torch.tensor([0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2])
    adv = group_advantages(r, g, "group", eps=eps)
    a = 0.5 / (math.sqrt(0.5) + eps)  # group 2: [1, 0]
    assert adv[:11].tolist() == [0.0] * 11
    assert adv[11:].tolist() == pytest.approx([a, -a], abs=1e-6)
    assert group_advantages(r[:3], g[:3], "batch", eps=eps).tolist() == [0.0] * 3


def test_sfr_head_refuses_bad_gamma_beta_when_built():
    from mmevo.rewards.heads import RewardMixer

    for args in ({"gamma": -0.1}, {"beta": float("nan")}, {"gamma": "x"}):
        with pytest.raises(ValueError, match="sfr (gamma|beta)"):
            RewardMixer({"sfr": 1.0}, {"sfr": args})
    assert RewardMixer({"sfr": 1.0}, {"sfr": {"gamma": 0.0, "beta": 0.0}}).heads["sfr"].gamma == 0.0


def test_reward_state_of_other_heads_is_refused_on_resume():
    from mmevo.rewards.heads import RewardMixer

    prism = {"prism_coverage": {"centroids": "", "k": 2}}
    saved = RewardMixer({"prism_coverage": 1.0, "majority": 0.5}, prism).state_dict()
    assert saved["prism_coverage"]  # the coverage counts are the state to carry over
    RewardMixer({"prism_coverage": 1.0}, prism).load_state_dict(saved)  # same stateful heads: fine
    with pytest.raises(ValueError, match="reward head state"):  # the counts would be dropped silently
        RewardMixer({"majority": 1.0}).load_state_dict(saved)
    with pytest.raises(ValueError, match="reward head state"):  # the counts would restart silently
        RewardMixer({"prism_coverage": 1.0}, prism).load_state_dict({"majority": {}})
    RewardMixer({"majority": 1.0}).load_state_dict({"majority": {}})  # stateless heads: nothing to check
