"""Hand-computed checks for mmevo.grpo.algos."""

import math

import pytest
import torch

from mmevo.grpo.algos import (
    agg_loss,
    entropy_from_logits,
    group_advantages,
    kl_penalty,
    logprobs_from_logits,
    masked_mean,
    policy_loss,
    reward_std,
)

ATOL = 1e-5


def close(actual, expected, atol=ATOL):
    actual = torch.as_tensor(actual, dtype=torch.float64)
    expected = torch.as_tensor(expected, dtype=torch.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert torch.allclose(actual, expected, atol=atol, rtol=0), (actual, expected)


# --------------------------------------------------------------------------- #
# group_advantages
# --------------------------------------------------------------------------- #
# group 0 = [1, 0, 0, 1]: mean .5, deviations +-.5, sum sq = 1,
#   unbiased var = 1/3, std = 0.5773503 -> adv = +-0.5/0.5773503 = +-0.8660254
# group 1 = [0, 1, 2, 3]: mean 1.5, deviations -1.5,-.5,.5,1.5, sum sq = 5,
#   unbiased var = 5/3, std = 1.2909944 -> adv = -1.1618950, -0.3872983, +...
REWARDS = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 2.0, 3.0])
IDS = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])


def test_group_adv_group_scale():
    adv = group_advantages(REWARDS, IDS, scale="group")
    assert adv.dtype == torch.float32
    close(adv, [0.8660254, -0.8660254, -0.8660254, 0.8660254,
                -1.1618950, -0.3872983, 0.3872983, 1.1618950])


def test_group_adv_default_is_group():
    close(group_advantages(REWARDS, IDS), group_advantages(REWARDS, IDS, scale="group"))


def test_group_adv_batch_scale():
    # whole batch: mean 8/8 = 1, deviations 0,-1,-1,0,-1,0,1,2 -> sum sq 8,
    # unbiased var 8/7, std_all = 1.0690450.
    # centred by group mean: .5,-.5,-.5,.5,-1.5,-.5,.5,1.5
    # .5/1.0690450 = 0.4677072, 1.5/1.0690450 = 1.4031215
    adv = group_advantages(REWARDS, IDS, scale="batch")
    assert adv.dtype == torch.float32
    close(adv, [0.4677072, -0.4677072, -0.4677072, 0.4677072,
                -1.4031215, -0.4677072, 0.4677072, 1.4031215])


def test_group_adv_batch_scale_with_a_given_std():
    # std_all = 2: the group-centred rewards .5,-.5,-.5,.5,-1.5,-.5,.5,1.5 over 2 (+1e-6)
    adv = group_advantages(REWARDS, IDS, scale="batch", std_all=2.0)
    close(adv, [0.25, -0.25, -0.25, 0.25, -0.75, -0.25, 0.25, 0.75])
    # a batch split in two (a rank's share each) with the whole batch's std gives the unsplit advantages
    whole = group_advantages(REWARDS, IDS, scale="batch")
    sigma = reward_std(REWARDS)
    assert abs(float(sigma) - 1.0690450) < 1e-6
    halves = torch.cat([group_advantages(REWARDS[:4], IDS[:4], "batch", std_all=sigma),
                        group_advantages(REWARDS[4:], IDS[4:], "batch", std_all=sigma)])
    assert torch.equal(halves, whole)
    # ignored by the other scales; refused when not one finite number >= 0 (a NaN std: another rank's NaN reward)
    assert torch.equal(group_advantages(REWARDS, IDS, "group", std_all=5.0), group_advantages(REWARDS, IDS, "group"))
    for bad in (float("nan"), float("inf"), -1.0, torch.tensor([1.0, 2.0])):
        with pytest.raises(ValueError, match="std_all"):
            group_advantages(REWARDS, IDS, "batch", std_all=bad)


def test_reward_std():
    assert reward_std(torch.tensor([1.0, 2.0, 4.0])).item() == pytest.approx(torch.tensor([1.0, 2.0, 4.0]).std().item())
    assert reward_std(torch.tensor([3.0])).item() == 0.0 and reward_std(torch.zeros(0)).item() == 0.0
    assert reward_std(torch.tensor([1.0, 2.0])).dtype == torch.float64


def test_group_adv_none_scale():
    adv = group_advantages(REWARDS, IDS, scale="none")
    close(adv, [0.5, -0.5, -0.5, 0.5, -1.5, -0.5, 0.5, 1.5])


def test_group_adv_singleton_group_is_zero():
    # id 0 is a singleton -> exactly 0; group 1 = [1, 3]: mean 2, std sqrt(2)
    # -> -1/1.4142136 = -0.7071068
    for scale in ("group", "batch", "none"):
        adv = group_advantages(torch.tensor([5.0, 1.0, 3.0]), torch.tensor([0, 1, 1]), scale=scale)
        assert not torch.isnan(adv).any()
        assert adv[0].item() == 0.0
    adv = group_advantages(torch.tensor([5.0, 1.0, 3.0]), torch.tensor([0, 1, 1]))
    close(adv, [0.0, -0.7071068, 0.7071068])


def test_group_adv_batch_of_one():
    for scale in ("group", "batch", "none"):
        adv = group_advantages(torch.tensor([3.0]), torch.tensor([4]), scale=scale)
        assert adv.tolist() == [0.0]


def test_group_adv_identical_rewards_is_zero():
    for scale in ("group", "batch", "none"):
        adv = group_advantages(torch.tensor([2.0, 2.0, 2.0]), torch.tensor([1, 1, 1]), scale=scale)
        assert not torch.isnan(adv).any()
        close(adv, [0.0, 0.0, 0.0])


def test_group_adv_noncontiguous_ids():
    # ids 7 -> rewards [1, 3] (mean 2), ids 3 -> rewards [2, 6] (mean 4)
    r = torch.tensor([1.0, 2.0, 3.0, 6.0])
    ids = torch.tensor([7, 3, 7, 3])
    close(group_advantages(r, ids, scale="none"), [-1.0, -2.0, 1.0, 2.0])
    # std(7) = sqrt(2), std(3) = sqrt(8): every entry +-0.7071068
    close(group_advantages(r, ids, scale="group"), [-0.7071068, -0.7071068, 0.7071068, 0.7071068])
    # negative / large ids work too
    close(group_advantages(r, torch.tensor([-5, 10**9, -5, 10**9]), scale="none"),
          [-1.0, -2.0, 1.0, 2.0])


def test_group_adv_float64_input_gives_float32():
    adv = group_advantages(REWARDS.double(), IDS, scale="none")
    assert adv.dtype == torch.float32


def test_group_adv_bad_scale():
    with pytest.raises(ValueError, match="group.*batch.*none"):
        group_advantages(REWARDS, IDS, scale="zscore")


# --------------------------------------------------------------------------- #
# kl_penalty
# --------------------------------------------------------------------------- #
def test_kl_values():
    logp = torch.tensor([-1.0, -2.0])
    ref = torch.tensor([-2.0, -1.0])
    close(kl_penalty(logp, ref, "k1"), [1.0, -1.0])
    close(kl_penalty(logp, ref, "k2"), [0.5, 0.5])
    # d = ref - logp = [-1, 1]: exp(-1) + 1 - 1 = 0.3678794; exp(1) - 1 - 1 = 0.7182818
    close(kl_penalty(logp, ref, "k3"), [0.3678794, 0.7182818])
    close(kl_penalty(logp, ref, "low_var_kl"), [0.3678794, 0.7182818])


def test_kl_equal_is_zero():
    x = torch.tensor([-0.3, -4.0])
    for kind in ("k1", "k2", "k3", "low_var_kl"):
        close(kl_penalty(x, x, kind), [0.0, 0.0])


def test_k3_clamping():
    # d = -100 -> clamp -20: exp(-20) + 20 - 1 = 19.000000002 -> clamp 10
    # d = +100 -> clamp 20: exp(20) - 21 ~ 4.85e8 -> clamp 10
    logp = torch.tensor([0.0, -100.0, -1e6])
    ref = torch.tensor([-100.0, 0.0, 0.0])
    out = kl_penalty(logp, ref, "k3")
    assert torch.isfinite(out).all()
    close(out, [10.0, 10.0, 10.0])


def test_kl_bad_kind():
    with pytest.raises(ValueError):
        kl_penalty(torch.zeros(2), torch.zeros(2), "k4")


# --------------------------------------------------------------------------- #
# policy_loss
# --------------------------------------------------------------------------- #
# Batch: B=3, T=4, old_logp = 0, logp = log(ratio), clip_low=.2, clip_high=.28
# row 0, A=+1,  ratios [1.0, 1.5, 0.5, 1.0], mask [1,1,1,0]
#   t0: max(-1, -1)         = -1
#   t1: max(-1.5, -1.28)    = -1.28   (upper clip active)
#   t2: max(-0.5, -0.8)     = -0.5    (A>0, low ratio: not clipped)
# row 1, A=-2,  ratios [0.5, 1.1, 2.0, 1.0], mask [1,1,0,0]
#   t0: max(1.0, 1.6)       = 1.6     (lower clip active)
#   t1: max(2.2, 2.2)       = 2.2
#   t2: masked (would be 4.0)
# row 2, A=+3,  ratios all 1, mask all 0
# masked sums: row0 = -2.78, row1 = 3.8, row2 = 0, total = 1.02, tokens = 5
RATIOS = torch.tensor([[1.0, 1.5, 0.5, 1.0],
                       [0.5, 1.1, 2.0, 1.0],
                       [1.0, 1.0, 1.0, 1.0]])
MASK = torch.tensor([[1, 1, 1, 0],
                     [1, 1, 0, 0],
                     [0, 0, 0, 0]])
ADV = torch.tensor([1.0, -2.0, 3.0])
OLD = torch.zeros(3, 4)


def _logp(requires_grad=False):
    return RATIOS.log().clone().requires_grad_(requires_grad)


@pytest.mark.parametrize(
    "agg,expected",
    [
        ("token-mean", 1.02 / 5),  # 0.204
        # (-2.78/3 + 3.8/2 + 0) / 3 = (-0.9266667 + 1.9) / 3 = 0.3244444
        ("seq-mean-token-mean", 0.3244444),
        ("seq-mean-token-sum", 1.02 / 3),  # 0.34
        ("seq-mean-token-sum-norm", 1.02 / 4),  # T = 4 -> 0.255
    ],
)
def test_policy_loss_agg_modes(agg, expected):
    loss, _ = policy_loss(_logp(), OLD, ADV, MASK, clip_low=0.2, clip_high=0.28, agg=agg)
    assert loss.dim() == 0
    close(loss, expected)


def test_policy_loss_sum_norm_custom_factor():
    loss, _ = policy_loss(_logp(), OLD, ADV, MASK, 0.2, 0.28,
                          agg="seq-mean-token-sum-norm", loss_scale_factor=2.0)
    close(loss, 0.51)  # 1.02 / 2


def test_policy_loss_clip_higher_differs_from_symmetric():
    # symmetric 0.2/0.2: row0 t1 becomes max(-1.5, -1.2) = -1.2 -> total 1.10
    sym, m_sym = policy_loss(_logp(), OLD, ADV, MASK, clip_low=0.2, clip_high=0.2)
    asym, _ = policy_loss(_logp(), OLD, ADV, MASK, clip_low=0.2, clip_high=0.28)
    close(sym, 1.10 / 5)  # 0.22
    close(asym, 1.02 / 5)  # 0.204
    # with clip_high=0.6 ratio 1.5 is no longer clipped: -1.5 -> total 0.8
    wide, m_wide = policy_loss(_logp(), OLD, ADV, MASK, clip_low=0.2, clip_high=0.6)
    close(wide, 0.8 / 5)
    assert m_wide["clip_frac_high"] == 0.0
    close(m_sym["clip_frac_high"], 0.2)


def test_policy_loss_metrics():
    _, m = policy_loss(_logp(), OLD, ADV, MASK, clip_low=0.2, clip_high=0.28)
    assert set(m) == {"clip_frac_low", "clip_frac_high", "clip_frac", "clip_frac_dual",
                      "approx_kl", "ratio_mean", "ratio_max"}
    assert all(isinstance(v, float) for v in m.values())
    close(m["clip_frac_low"], 1 / 5)   # row1 t0
    close(m["clip_frac_high"], 1 / 5)  # row0 t1
    assert m["clip_frac_dual"] == 0.0  # row1: -A*c = 6 > 2.2 (and the masked 4.0)
    close(m["clip_frac"], 2 / 5)
    # approx_kl = mean(old - logp) = -(ln1 + ln1.5 + ln.5 + ln.5 + ln1.1)/5
    #           = -(0 + 0.4054651 - 0.6931472 - 0.6931472 + 0.0953102)/5 = 0.1771038
    close(m["approx_kl"], 0.1771038)
    close(m["ratio_mean"], 4.6 / 5)  # (1 + 1.5 + .5 + .5 + 1.1)/5 = 0.92
    close(m["ratio_max"], 1.5)       # masked-out ratio 2.0 ignored


def test_policy_loss_gradient_token_mean():
    logp = _logp(requires_grad=True)
    loss, _ = policy_loss(logp, OLD, ADV, MASK, clip_low=0.2, clip_high=0.28)
    loss.backward()
    # unclipped: dL/dlogp = -A * ratio / 5; clipped or masked: 0
    expected = torch.tensor([[-1 * 1.0 / 5, 0.0, -1 * 0.5 / 5, 0.0],
                             [0.0, 2 * 1.1 / 5, 0.0, 0.0],
                             [0.0, 0.0, 0.0, 0.0]])
    close(logp.grad, expected)


def test_policy_loss_zero_mask_no_nan():
    zero = torch.zeros(3, 4)
    for agg in ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                "seq-mean-token-sum-norm"):
        logp = _logp(requires_grad=True)
        loss, m = policy_loss(logp, OLD, ADV, zero, agg=agg)
        loss.backward()
        assert loss.item() == 0.0
        assert torch.isfinite(logp.grad).all()
        assert all(math.isfinite(v) for v in m.values())
        assert m["ratio_max"] == 0.0 and m["clip_frac"] == 0.0


def test_policy_loss_extreme_log_ratio_finite():
    # log-ratio 1000 is clamped to 20 before exp
    logp = torch.tensor([[1000.0, -1000.0]])
    loss, m = policy_loss(logp, torch.zeros(1, 2), torch.tensor([-1.0]), torch.ones(1, 2))
    assert torch.isfinite(loss)
    close(m["ratio_max"], math.exp(20.0), atol=1e-3 * math.exp(20.0))


def test_policy_loss_bad_agg():
    with pytest.raises(ValueError, match="token-mean"):
        policy_loss(_logp(), OLD, ADV, MASK, agg="mean")
    with pytest.raises(ValueError, match="token-mean"):
        agg_loss(torch.zeros(2, 2), torch.ones(2, 2), "sum")


def test_masked_mean_and_agg_loss():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mk = torch.tensor([[1, 1, 0], [0, 0, 0]])
    close(masked_mean(x, mk), 1.5)           # (1+2)/2
    close(masked_mean(x, mk, dim=-1), [1.5, 0.0])  # empty row -> 0
    close(masked_mean(x, mk, dim=0), [1.0, 2.0, 0.0])
    close(agg_loss(x, mk, "seq-mean-token-mean"), 0.75)   # (1.5 + 0)/2
    close(agg_loss(x, mk, "seq-mean-token-sum"), 1.5)     # (3 + 0)/2
    close(agg_loss(x, mk, "seq-mean-token-sum-norm"), 1.0)  # 3 / T=3


# --------------------------------------------------------------------------- #
# entropy / logprobs
# --------------------------------------------------------------------------- #
def test_entropy_uniform():
    out = entropy_from_logits(torch.zeros(2, 3, 4))
    assert out.shape == (2, 3)
    close(out, torch.full((2, 3), 1.3862944))  # log 4


def test_entropy_known_and_extreme():
    # p = [.5, .25, .25]: H = .5 ln2 + 2 * .25 ln4 = 0.3465736 + 0.6931472 = 1.0397208
    logits = torch.tensor([[-0.6931472, -1.3862944, -1.3862944],
                           [1000.0, 0.0, -1000.0]])
    out = entropy_from_logits(logits)
    assert torch.isfinite(out).all()
    close(out, [1.0397208, 0.0])


def test_entropy_bf16_input():
    out = entropy_from_logits(torch.zeros(1, 4, dtype=torch.bfloat16))
    assert out.dtype == torch.float32
    close(out, [1.3862944])


def test_logprobs_from_logits():
    # logits = log p + 3 with p = [.5, .25, .25] (shift does not matter)
    row = [2.3068528, 1.6137056, 1.6137056]
    logits = torch.tensor([[row, row], [[0.0, 0.0, 0.0]] * 2])  # [2, 2, 3]
    labels = torch.tensor([[0, 2], [1, 0]])
    out = logprobs_from_logits(logits, labels)
    assert out.shape == (2, 2) and out.dtype == torch.float32
    # ln .5 = -0.6931472, ln .25 = -1.3862944, ln(1/3) = -1.0986123
    close(out, [[-0.6931472, -1.3862944], [-1.0986123, -1.0986123]])
    out16 = logprobs_from_logits(logits.bfloat16(), labels)
    assert out16.dtype == torch.float32
    close(out16, out, atol=2e-2)


# --------------------------------------------------------------------------- #
# policy_loss: dual clip (arXiv:1912.09729, verl's clip_ratio_c)
# --------------------------------------------------------------------------- #
def _one_token(adv, ratio, c, requires_grad=False):
    logp = torch.tensor([[math.log(ratio)]], requires_grad=requires_grad)
    loss, m = policy_loss(logp, torch.zeros(1, 1), torch.tensor([adv]), torch.ones(1, 1),
                          clip_low=0.2, clip_high=0.2, clip_ratio_c=c)
    return logp, loss, m


def test_dual_clip_bounds_negative_advantage_token():
    # A=-1, ratio 5: L_clip = max(-A*5, -A*clip(5, .8, 1.2)) = max(5, 1.2) = 5
    # dual clip c=3: min(5, -A*c) = min(5, 3) = 3
    _, loss, m = _one_token(-1.0, 5.0, 3.0)
    close(loss, 3.0)
    assert m["clip_frac_dual"] == 1.0
    # disabled: 5
    _, loss, m = _one_token(-1.0, 5.0, None)
    close(loss, 5.0)
    assert m["clip_frac_dual"] == 0.0
    # the default is c=3 (verl's clip_ratio_c)
    loss, _ = policy_loss(torch.tensor([[math.log(5.0)]]), torch.zeros(1, 1), torch.tensor([-1.0]),
                          torch.ones(1, 1), clip_low=0.2, clip_high=0.2)
    close(loss, 3.0)


def test_dual_clip_leaves_positive_advantage_alone():
    # A=+1, ratio 5: max(-5, -1*1.2) = -1.2 with or without the dual clip
    # (applying the bound here would give min(-1.2, -3) = -3)
    for c in (3.0, 1.5, None):
        _, loss, m = _one_token(1.0, 5.0, c)
        close(loss, -1.2)
        assert m["clip_frac_dual"] == 0.0


def test_dual_clip_inactive_below_c():
    # A=-1, ratio 2: max(2, 1.2) = 2 < 3 -> 2 (dual bound not reached)
    _, loss, m = _one_token(-1.0, 2.0, 3.0)
    close(loss, 2.0)
    assert m["clip_frac_dual"] == 0.0
    # A=-2, ratio 2 with c=1.5: max(4, 2.4) = 4 > -A*c = 3 -> 3
    _, loss, m = _one_token(-2.0, 2.0, 1.5)
    close(loss, 3.0)
    assert m["clip_frac_dual"] == 1.0


def test_dual_clip_gradient_is_zero():
    # dual-clipped token: the loss is the constant -A*c -> d/dlogp = 0
    logp, loss, _ = _one_token(-1.0, 5.0, 3.0, requires_grad=True)
    loss.backward()
    assert logp.grad.item() == 0.0
    # without it: d(-A*rho)/dlogp = -A*rho = 5
    logp, loss, _ = _one_token(-1.0, 5.0, None, requires_grad=True)
    loss.backward()
    close(logp.grad, [[5.0]])


# B=3, T=3, old_logp = 0, clip .2/.2, c = 3
# row 0, A=-1, ratios [5, 2, 0.5], mask [1,1,1]
#   t0: max(5, 1.2) = 5 -> min(5, 3) = 3  (dual active, grad 0)
#   t1: max(2, 1.2) = 2 < 3 -> 2          (grad -A*rho = 2)
#   t2: max(0.5, 0.8) = 0.8 < 3 -> 0.8    (lower clip, grad 0)
# row 1, A=+2, ratios [5, 1, 4], mask [1,1,0]
#   t0: max(-10, -2.4) = -2.4             (upper clip, grad 0)
#   t1: max(-2, -2) = -2                  (grad -A*rho = -2)
#   t2: masked
# row 2, A=-0.5, ratios [10, 1, 1], mask [0,0,0]: t0 would be dual-clipped but is masked
# masked sum with c=3: 3 + 2 + 0.8 - 2.4 - 2 = 1.4 over 5 tokens -> 0.28
# without dual clip:   5 + 2 + 0.8 - 2.4 - 2 = 3.4 -> 0.68
# with c=1.5: row0 t0 min(5, 1.5) = 1.5, t1 min(2, 1.5) = 1.5, t2 0.8:
#   1.5 + 1.5 + 0.8 - 2.4 - 2 = -0.6 -> -0.12; dual active on 2 of 5 tokens
D_RATIOS = torch.tensor([[5.0, 2.0, 0.5], [5.0, 1.0, 4.0], [10.0, 1.0, 1.0]])
D_MASK = torch.tensor([[1, 1, 1], [1, 1, 0], [0, 0, 0]])
D_ADV = torch.tensor([-1.0, 2.0, -0.5])


def _d_loss(c, requires_grad=False, agg="token-mean"):
    logp = D_RATIOS.log().clone().requires_grad_(requires_grad)
    loss, m = policy_loss(logp, torch.zeros(3, 3), D_ADV, D_MASK, clip_low=0.2, clip_high=0.2,
                          agg=agg, clip_ratio_c=c)
    return logp, loss, m


def test_dual_clip_batch_values_and_metrics():
    _, loss, m = _d_loss(3.0)
    close(loss, 0.28)
    close(m["clip_frac_dual"], 1 / 5)   # row0 t0 only (row2 t0 is masked)
    close(m["clip_frac_low"], 1 / 5)    # row0 t2
    close(m["clip_frac_high"], 1 / 5)   # row1 t0 (row0 t0 has A<0)
    _, loss, m = _d_loss(None)
    close(loss, 0.68)
    assert m["clip_frac_dual"] == 0.0
    _, loss, m = _d_loss(1.5)
    close(loss, -0.12)
    close(m["clip_frac_dual"], 2 / 5)
    # seq-mean-token-sum with c=3: row sums 3 + 2 + 0.8 = 5.8, -2.4 - 2 = -4.4, 0
    #   -> (5.8 - 4.4 + 0)/3 = 1.4/3 = 0.4666667
    _, loss, _ = _d_loss(3.0, agg="seq-mean-token-sum")
    close(loss, 0.4666667)


def test_dual_clip_batch_gradient():
    logp, loss, _ = _d_loss(3.0, requires_grad=True)
    loss.backward()
    # token-mean over 5 tokens: d/dlogp = -A*rho/5 where unclipped, else 0
    # row0 t1: 2/5 = 0.4; row1 t1: -2/5 = -0.4; everything else 0 (dual, clip or mask)
    close(logp.grad, [[0.0, 0.4, 0.0], [0.0, -0.4, 0.0], [0.0, 0.0, 0.0]])
    logp, loss, _ = _d_loss(None, requires_grad=True)
    loss.backward()
    # without dual clip row0 t0 gets -A*rho/5 = 5/5 = 1
    close(logp.grad, [[1.0, 0.4, 0.0], [0.0, -0.4, 0.0], [0.0, 0.0, 0.0]])


def test_dual_clip_per_token_advantages():
    # [B, T] advantages: t0 A=-1 ratio 5 -> 3 (dual); t1 A=+1 ratio 5 -> -1.2
    # token-mean: (3 - 1.2)/2 = 0.9
    logp = torch.full((1, 2), math.log(5.0))
    loss, m = policy_loss(logp, torch.zeros(1, 2), torch.tensor([[-1.0, 1.0]]), torch.ones(1, 2),
                          clip_low=0.2, clip_high=0.2, clip_ratio_c=3.0)
    close(loss, 0.9)
    close(m["clip_frac_dual"], 0.5)


def _pre_dual_clip_policy_loss(logp, old_logp, adv, mask, clip_low, clip_high, agg):
    # Frozen copy of the body of policy_loss before the dual clip was added
    # (regression reference for clip_ratio_c=None, not an oracle for the dual clip).
    adv = adv.to(logp.dtype).unsqueeze(-1)
    mask_f = mask.to(logp.dtype)
    ratio = torch.exp(torch.clamp(logp - old_logp, min=-20.0, max=20.0))
    loss_mat = torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high))
    return agg_loss(loss_mat, mask_f, agg)


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                                 "seq-mean-token-sum-norm"])
def test_dual_clip_none_is_old_behaviour_bitwise(agg):
    g = torch.Generator().manual_seed(1234)
    B, T = 16, 24
    old = -torch.rand(B, T, generator=g) * 3
    logp = (old + torch.randn(B, T, generator=g) * 1.5).requires_grad_(True)
    adv = torch.randn(B, generator=g)
    mask = (torch.rand(B, T, generator=g) > 0.2).long()
    loss, m = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28, agg=agg, clip_ratio_c=None)
    (grad,) = torch.autograd.grad(loss, logp)
    logp2 = logp.detach().clone().requires_grad_(True)
    ref = _pre_dual_clip_policy_loss(logp2, old, adv, mask, 0.2, 0.28, agg)
    (ref_grad,) = torch.autograd.grad(ref, logp2)
    assert torch.equal(loss.detach(), ref.detach())
    assert torch.equal(grad, ref_grad)
    assert m["clip_frac_dual"] == 0.0
    # the inputs do exercise the dual clip: with c=3 the loss differs and some tokens are bounded
    loss3, m3 = policy_loss(logp, old, adv, mask, clip_low=0.2, clip_high=0.28, agg=agg, clip_ratio_c=3.0)
    assert m3["clip_frac_dual"] > 0.0
    assert loss3.item() < loss.item()
    assert {k: v for k, v in m3.items() if k != "clip_frac_dual"} == \
        {k: v for k, v in m.items() if k != "clip_frac_dual"}


@pytest.mark.parametrize("bad", [1.0, 0.5, 0.0, -3.0, float("nan")])
def test_dual_clip_bad_c_raises(bad):
    with pytest.raises(ValueError, match="clip_ratio_c"):
        policy_loss(_logp(), OLD, ADV, MASK, clip_ratio_c=bad)


# --------------------------------------------------------------------------- #
# Parity with verl's core_algos semantics (scalar reference written from its definitions)
# --------------------------------------------------------------------------- #
def _ref_token(lp, old, a, el, eh, c):
    """verl's vanilla policy loss of one token: (loss, clipped?, dual-clipped?, -clamped log-ratio)."""
    lr = min(max(lp - old, -20.0), 20.0)
    rho = math.exp(lr)
    l1, l2 = -a * rho, -a * min(max(rho, 1 - el), 1 + eh)
    l = max(l1, l2)
    dual = c is not None and a < 0 and l > -a * c
    return (-a * c if dual else l), l2 > l1, dual, -lr


def _ref_agg(rows, agg, T):
    """rows: per sequence the list of masked-in token losses (all-masked rows count in B, see agg_loss)."""
    if agg == "token-mean":
        n = sum(len(r) for r in rows)
        return sum(map(sum, rows)) / max(n, 1)
    if agg == "seq-mean-token-mean":
        return sum(sum(r) / max(len(r), 1) for r in rows) / len(rows)
    if agg == "seq-mean-token-sum":
        return sum(map(sum, rows)) / len(rows)
    return sum(map(sum, rows)) / T  # seq-mean-token-sum-norm, constant normaliser = T


# both advantage signs, ratios below / inside / above the clip range, 1e4 log-ratios, an all-masked
# row and a one-token row; A values are not representable in bf16
P_OLD = [[-1.0, -2.0, -0.5, -3.0], [-0.2, -1.0, -1.5, -2.0], [0.0, -1.0, -4.0, -1.0], [-2.0, -1.0, -1.0, -1.0]]
P_LP = [[-1.7, -1.9, 0.4, -3.0], [-0.2, 1.5, -1.8, -1e4], [-1e4, 1e4, -2.0, -1.0], [-2.5, 0.0, 0.0, 0.0]]
P_MASK = [[1, 1, 1, 1], [1, 1, 1, 0], [1, 1, 1, 0], [0, 0, 0, 0]]
P_ADV = [-0.7071, 1.2345, -2.3456, 0.5]


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum",
                                 "seq-mean-token-sum-norm"])
@pytest.mark.parametrize("c", [3.0, 1.5, None])
def test_policy_loss_parity_with_verl(agg, c):
    el, eh = 0.2, 0.28
    toks = [[_ref_token(P_LP[b][t], P_OLD[b][t], P_ADV[b], el, eh, c) for t in range(4) if P_MASK[b][t]]
            for b in range(4)]
    flat = [x for r in toks for x in r]
    lp = torch.tensor(P_LP, dtype=torch.float64, requires_grad=True)
    loss, m = policy_loss(lp, torch.tensor(P_OLD, dtype=torch.float64), torch.tensor(P_ADV, dtype=torch.float64),
                          torch.tensor(P_MASK), el, eh, agg=agg, clip_ratio_c=c)
    want = _ref_agg([[x[0] for x in r] for r in toks], agg, 4)
    close(loss, want, atol=1e-12 * max(1.0, abs(want)))  # A<0 with ratio e^20 and no dual clip: ~3e8
    close(m["clip_frac"], sum(x[1] for x in flat) / len(flat), atol=1e-12)       # verl pg_clipfrac
    close(m["clip_frac_dual"], sum(x[2] for x in flat) / len(flat), atol=1e-12)  # verl pg_clipfrac_lower
    close(m["approx_kl"], sum(x[3] for x in flat) / len(flat), atol=1e-9)        # verl ppo_kl (clamped)
    loss.backward()
    assert torch.isfinite(lp.grad).all()
    # a single token (T = 1): ratio e^-.5 = .607 < .8 with A > 0 is not clipped -> -A*rho in every mode
    one, _ = policy_loss(torch.tensor([[-2.5]]), torch.tensor([[-2.0]]), torch.tensor([0.5]), torch.ones(1, 1),
                         el, eh, agg=agg, clip_ratio_c=c)
    close(one, -0.5 * math.exp(-0.5))


def test_policy_loss_bf16_logp_keeps_fp32_advantages():
    # bf16 log-probs (values exactly representable), fp32 advantages and old log-probs: like verl the
    # advantages are not rounded to bf16 (1.2345 would become 1.234375, -2.3456 -> -2.34375)
    lp16 = torch.tensor(P_LP[:3], dtype=torch.bfloat16)
    toks = [[_ref_token(float(lp16[b, t]), P_OLD[b][t], P_ADV[b], 0.2, 0.2, 3.0) for t in range(4) if P_MASK[b][t]]
            for b in range(3)]
    loss, _ = policy_loss(lp16, torch.tensor(P_OLD[:3]), torch.tensor(P_ADV[:3]), torch.tensor(P_MASK[:3]))
    assert loss.dtype == torch.float32 and torch.isfinite(loss)
    close(loss, _ref_agg([[x[0] for x in r] for r in toks], "token-mean", 4), atol=2e-6)


def test_policy_loss_approx_kl_infinite_logprobs():
    # verl's ppo_kl clamps the log-ratio: -inf at a masked slot is 0 weight (not NaN), at a real token 20 (not inf)
    _, m = policy_loss(torch.tensor([[-1.0, -math.inf]]), torch.tensor([[-1.5, -1.0]]), torch.tensor([1.0]),
                       torch.tensor([[1, 0]]))
    close(m["approx_kl"], -0.5)
    lp = torch.tensor([[-math.inf, -1.0]], requires_grad=True)
    loss, m = policy_loss(lp, torch.tensor([[0.0, -1.0]]), torch.tensor([-1.0]), torch.ones(1, 2))
    close(m["approx_kl"], 10.0)  # (20 + 0) / 2
    loss.backward()
    assert all(math.isfinite(v) for v in m.values()) and torch.isfinite(lp.grad).all()


def test_group_adv_and_kl_parity_with_verl():
    # verl GRPO: (r - mean_g) / (torch.std(unbiased) + 1e-6), groups of >= 2
    r = [0.3, 1.0, 0.0, 0.7, 0.7, 0.7, 2.0, -1.0]
    ids = [5, 2, 5, 2, 9, 9, 5, 2]
    exp = []
    for i, g in enumerate(ids):
        grp = [r[j] for j in range(len(r)) if ids[j] == g]
        mu = sum(grp) / len(grp)
        sd = math.sqrt(sum((x - mu) ** 2 for x in grp) / (len(grp) - 1))
        exp.append((r[i] - mu) / (sd + 1e-6))
    close(group_advantages(torch.tensor(r, dtype=torch.float64), torch.tensor(ids)), exp)
    # kl estimators incl. the +-20 input and +-10 output clamps of k3
    lp, ref = [-1.0, -0.3, -30.0, 0.0, -2.0], [-1.2, -0.3, 0.0, -25.0, -1.99]
    for kind in ("k1", "k2", "k3", "low_var_kl"):
        want = []
        for a, b in zip(lp, ref):
            if kind == "k1":
                want.append(a - b)
            elif kind == "k2":
                want.append(0.5 * (a - b) ** 2)
            else:
                d = min(max(b - a, -20.0), 20.0)
                want.append(min(max(math.exp(d) - d - 1, -10.0), 10.0))
        close(kl_penalty(torch.tensor(lp, dtype=torch.float64), torch.tensor(ref, dtype=torch.float64), kind), want,
              atol=1e-12)
