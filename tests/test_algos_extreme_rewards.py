"""group_advantages / reward_std at the ends of the float64 range: finite rewards give the equation's advantages.

Numbers by hand: a group {x, -x} has mean 0 and unbiased std sqrt(2) |x|, so (r - mean) / std = +-1/sqrt(2) whatever
|x|; {x, -x, 0} has std |x| and advantages (1, -1, 0).
"""

import math

import pytest
import torch

from mmevo.grpo.algos import group_advantages, reward_std

R = 1 / math.sqrt(2)


def t(*v):
    return torch.tensor(v, dtype=torch.float64)


@pytest.mark.parametrize("x", [1e200, 1e300, 1e308, 1.7e308, 1e-200, 1e-310, 5e-324])
@pytest.mark.parametrize("scale", ["group", "batch"])
def test_pair_of_extreme_rewards_has_unit_advantages(x, scale):
    # 1e200 squared to inf (std inf: advantages 0), 1e-200 squared to 0 (std 0: +-inf with eps 0), 1e308 - (-1e308)
    # overflowed (NaN)
    adv = group_advantages(t(x, -x), torch.tensor([0, 0]), scale, eps=0.0)
    assert adv.tolist() == pytest.approx([R, -R], rel=1e-6)


def test_triple_of_huge_rewards():
    adv = group_advantages(t(1e200, -1e200, 0.0), torch.tensor([3, 3, 3]), "group")
    assert adv.tolist() == pytest.approx([1.0, -1.0, 0.0], rel=1e-6)  # was [0, -0, 0]


def test_tiny_rewards_with_a_tinier_eps():
    # std 7.07e-201 dominates eps = 1e-300 (the squares underflowed to std 0: advantages (r - mean) / eps = +-5e99)
    adv = group_advantages(t(1e-200, 0.0), torch.tensor([0, 0]), "group", eps=1e-300)
    assert adv.tolist() == pytest.approx([R, -R], rel=1e-6)


def test_batch_scale_mixes_extreme_groups():
    # sigma_all of [1e308, -1e308, 1, 0] = sqrt(2/3) 1e308; group {1, 0} is centred to +-0.5, i.e. ~0 on that scale
    adv = group_advantages(t(1e308, -1e308, 1.0, 0.0), torch.tensor([0, 0, 1, 1]), "batch", eps=0.0)
    assert adv.tolist() == pytest.approx([math.sqrt(1.5), -math.sqrt(1.5), 0.0, 0.0], rel=1e-6, abs=1e-30)


def test_none_scale_beyond_float32_is_an_error():
    # r - mean = +-5e38 does not fit the float32 result: a clear error, not +-inf advantages
    with pytest.raises(ValueError, match="advantages are not finite in float32 at indices \\[0, 1\\]"):
        group_advantages(t(1e39, 0.0), torch.tensor([0, 0]), "none")
    assert group_advantages(t(1e30, 0.0), torch.tensor([0, 0]), "none").tolist() == pytest.approx([5e29, -5e29])


@pytest.mark.parametrize("x,std", [(1e200, math.sqrt(2) * 1e200), (1e-200, math.sqrt(2) * 1e-200),
                                   (1e-320, math.sqrt(2) * 1e-320)])
def test_reward_std_extreme(x, std):
    assert reward_std(t(x, -x)).item() == pytest.approx(std, rel=1e-3 if x < 1e-300 else 1e-12)


@pytest.mark.parametrize("v", [0.1, 0.9, 1 / 3, 7.0, 1e300])
@pytest.mark.parametrize("n", [2, 7, 8, 11, 33])
def test_reward_std_of_equal_rewards_is_exactly_zero(v, n):
    # the plain two-pass std of eight 0.1s was 1.47e-17 (the float64 mean misses 0.1 by an ulp)
    assert reward_std(torch.full((n,), v, dtype=torch.float64)).item() == 0.0


def _unscaled_advantages(r, group_ids, scale, eps, std_all=None):
    """The plain float64 arithmetic group_advantages had before its power-of-two scaling (min-shifted group means,
    two-pass std, std_all = the two-pass std about the batch mean): right for ordinary rewards."""
    r = r.to(torch.float64)
    _, inv = torch.unique(group_ids, return_inverse=True)
    g = int(inv.max()) + 1
    count = torch.zeros(g, dtype=torch.float64).index_add_(0, inv, torch.ones_like(r))
    low = torch.zeros(g, dtype=torch.float64).scatter_reduce_(0, inv, r, "amin", include_self=False)
    d = r - low[inv]
    centered = d - (torch.zeros(g, dtype=torch.float64).index_add_(0, inv, d) / count)[inv]
    if scale == "none":
        return centered.float()
    if scale == "group":
        sq = torch.zeros(g, dtype=torch.float64).index_add_(0, inv, centered * centered)
        adv = centered / ((sq / (count - 1).clamp(min=1)).sqrt() + eps)[inv]
    else:
        sigma = ((r - r.mean()) ** 2).sum().div(r.numel() - 1).sqrt() if std_all is None else std_all
        adv = centered / (sigma + eps)
    return torch.where(centered == 0, torch.zeros(()), adv).float()


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_ordinary_rewards_give_the_unscaled_bits(scale):
    # the scaling by a power of two is exact: random, 0 / 1, 0.1-step and large-spread rewards, every eps, and
    # std_all from other ranks, give the float32 bits of the plain arithmetic
    gen = torch.Generator().manual_seed(3)
    for trial in range(300):
        b = int(torch.randint(2, 48, (1,), generator=gen))
        ids = torch.randint(-3, 6, (b,), generator=gen)
        r = [torch.randn(b, generator=gen), torch.randint(0, 2, (b,), generator=gen).float(),
             torch.randint(0, 11, (b,), generator=gen).float() / 10,
             torch.randn(b, generator=gen, dtype=torch.float64) * 1e3][trial % 4]
        std_all = [None, reward_std(torch.cat([r.double(), torch.randn(9, generator=gen, dtype=torch.float64)]))]
        for eps in (0.0, 1e-8, 1e-6, 1e-2, 1.0):
            for sa in std_all if scale == "batch" else [None]:
                got = group_advantages(r, ids, scale, eps, std_all=sa)
                want = _unscaled_advantages(r, ids, scale, eps, std_all=sa)
                assert torch.equal(got.view(torch.int32), want.view(torch.int32)), (trial, eps, sa)
