"""Round-3 equation vectors for MM-Zero's two seed functions (seed 001: ``diversity_adjustment``,
``proposal_rewards``), re-derived from the seed text with a plain-Python reference.

Beyond rounds eq20 / eq22: tensors built from numpy arrays and non-contiguous views, every float dtype, -0.0 and
subnormal inputs, the exact clip boundary and one ulp either side of it and of the 0.5 caps, 10,000 render attempts,
finite inputs whose result passes the float range, keyword names as the seed writes them, determinism.
"""

import inspect
import math
import random

import numpy as np
import pytest
import torch

from mmevo.rewards.mmzero import diversity_adjustment, proposal_rewards

WEIGHTS = (0.45, 0.20, 0.35)  # seed: caption / easy / hard


def ref_diversity(row, M, strength=0.5):
    """-clip(dot(shares - 1/M, w) * M * strength, -strength, +strength), read literally (exact arithmetic)."""
    from fractions import Fraction as F
    dot = sum((F(s) - F(1, M)) * F(w) for s, w in zip(row, WEIGHTS))
    x = dot * M * F(strength)
    return float(-min(max(x, -F(strength)), F(strength)))


def ref_proposal(executed, easy, cons, adj, valid):
    """Mean over ALL N attempts of e*(min(s, .5) + min(c, 1 - c)) plus the three adjustments; -1 if invalid."""
    if not valid:
        return -1.0
    N = len(executed)
    base = math.fsum(min(s, 0.5) + min(c, 1.0 - c) for e, s, c in zip(executed, easy, cons) if e) / N
    return base + math.fsum(adj)


def test_seed_keyword_names_and_defaults():
    d = inspect.signature(diversity_adjustment).parameters
    assert list(d) == ["shares", "valid_count", "strength"] and d["strength"].default == 0.5
    p = inspect.signature(proposal_rewards).parameters
    assert list(p) == ["executed", "easy_accuracy", "consistency", "adjustments", "valid"]
    out = proposal_rewards(executed=torch.tensor([[True, False]]), easy_accuracy=torch.tensor([[1.0, 0.0]]),
                           consistency=torch.tensor([[0.5, 0.0]]), adjustments=torch.zeros(1, 3),
                           valid=torch.tensor([True]))
    assert out.tolist() == [0.5]  # the seed's worked example: one success in two attempts, easy=1, c=0.5
    assert diversity_adjustment(shares=torch.tensor([[1.0, 1.0, 1.0]], dtype=torch.float64), valid_count=1,
                                strength=0.5).tolist() == [-0.0]


def test_diversity_adjustment_from_numpy_and_views_on_300_rows():
    rng = np.random.default_rng(26)
    for _ in range(300):
        B, M = int(rng.integers(1, 6)), int(rng.integers(1, 50))
        strength = float(rng.choice([0.0, 0.5, 1.0, rng.uniform(0, 3)]))
        arr = rng.uniform(0, 1, size=(3, B))  # transposed below: a non-contiguous [B, 3] view
        shares = torch.from_numpy(arr).t()
        got = diversity_adjustment(shares, np.int64(M), np.float64(strength))
        assert got.dtype == torch.float64 and got.shape == (B,) and not got.requires_grad
        for b in range(B):
            assert got[b].item() == pytest.approx(ref_diversity(arr[:, b].tolist(), M, strength), abs=1e-12)
        again = diversity_adjustment(shares, M, strength)
        assert torch.equal(got, again)  # no state between calls


def test_diversity_adjustment_clip_boundary_and_one_ulp_either_side():
    # huge finite shares clip to exactly -+strength; a balanced row (every share 1/M) gives 0
    s = torch.tensor([[1.0, 1.0, 1.0]], dtype=torch.float64)  # balanced at M = 1: x = 0
    assert diversity_adjustment(s, 1, 0.5).item() == 0.0
    for strength in (0.5, 1.0, 2.0):
        crowded = torch.tensor([[1e300, 0.0, 0.0]], dtype=torch.float64)
        assert diversity_adjustment(crowded, 3, strength).item() == -strength
        rare = torch.tensor([[-1e300, 0.0, 0.0]], dtype=torch.float64)
        assert diversity_adjustment(rare, 3, strength).item() == strength
    # every share 2/M: dot = 1/M (the weights sum to 1), dot * M = 1, so x = strength exactly at the clip (M = 2, 4
    # keep it exact); one ulp above stays clipped, one ulp below is just inside
    for M in (2, 4):
        row = torch.tensor([[1 / M + 1 / M] * 3], dtype=torch.float64)
        assert diversity_adjustment(row, M, 0.5).item() == -0.5
        up = torch.tensor([[math.nextafter(2 / M, 2.0)] * 3], dtype=torch.float64)
        assert diversity_adjustment(up, M, 0.5).item() == -0.5
        down = torch.tensor([[math.nextafter(2 / M, 0.0)] * 3], dtype=torch.float64)
        inside = diversity_adjustment(down, M, 0.5).item()
        assert -0.5 < inside < -0.5 + 1e-14


def test_diversity_adjustment_with_zero_strength_is_zero_even_when_the_excess_overflows():
    # finite shares whose weighted excess times M passes float64's range: clip(x * 0, -0, 0) is 0 for every finite
    # x, but the old x * strength gave inf * 0 = NaN
    big = torch.tensor([[1e308, 1e308, 1e308], [-1e308, -1e308, -1e308]], dtype=torch.float64)
    out = diversity_adjustment(big, 10, 0.0)
    assert out.tolist() == [0.0, 0.0] and not torch.isnan(out).any()
    f32 = torch.tensor([[3e38, 3e38, 3e38]], dtype=torch.float32)
    assert diversity_adjustment(f32, 100, 0.0).tolist() == [0.0]
    # and a tiny strength keeps the clipped value, not a NaN
    assert diversity_adjustment(big, 10, 5e-324).tolist() == [-5e-324, 5e-324]


def test_diversity_adjustment_negative_zero_and_subnormal_shares():
    z = torch.tensor([[-0.0, -0.0, -0.0]], dtype=torch.float64)
    assert diversity_adjustment(z, 1, 0.5).item() == 0.5  # every share under 1/M: the rare-row bonus, clipped
    sub = torch.tensor([[5e-324, 0.0, 0.0]], dtype=torch.float64)
    assert diversity_adjustment(sub, 10 ** 6, 0.5).item() == pytest.approx(ref_diversity([5e-324, 0, 0], 10 ** 6))


def test_proposal_rewards_from_numpy_every_dtype_on_300_batches():
    rng = random.Random(2626)
    for t in range(300):
        B, N = rng.randint(1, 4), rng.randint(1, 7)
        ex = np.array([[rng.random() < 0.6 for _ in range(N)] for _ in range(B)])
        s = np.array([[rng.choice([0.0, 0.25, 0.5, 1.0, rng.random()]) for _ in range(N)] for _ in range(B)])
        c = np.array([[rng.choice([0.0, 0.5, 1.0, 1 / 3, rng.random()]) for _ in range(N)] for _ in range(B)])
        a = np.array([[rng.uniform(-0.5, 0.5) for _ in range(3)] for _ in range(B)])
        v = np.array([rng.random() < 0.8 for _ in range(B)])
        got = proposal_rewards(torch.from_numpy(ex), torch.from_numpy(s), torch.from_numpy(c), torch.from_numpy(a),
                               torch.from_numpy(v))
        assert got.dtype == torch.float64 and got.shape == (B,)
        for b in range(B):
            want = ref_proposal(ex[b].tolist(), s[b].tolist(), c[b].tolist(), a[b].tolist(), bool(v[b]))
            assert got[b].item() == pytest.approx(want, abs=1e-12)
        # float32 inputs: the float64 value rounded once
        got32 = proposal_rewards(torch.from_numpy(ex), torch.from_numpy(s).float(), torch.from_numpy(c).float(),
                                 torch.from_numpy(a).float(), torch.from_numpy(v))
        assert got32.dtype == torch.float32
        s32, c32, a32 = (np.float32(x).astype(np.float64) for x in (s, c, a))
        for b in range(B):
            want = ref_proposal(ex[b].tolist(), s32[b].tolist(), c32[b].tolist(), a32[b].tolist(), bool(v[b]))
            assert got32[b].item() == pytest.approx(want, abs=1e-6)


def test_proposal_rewards_caps_one_ulp_either_side_of_one_half():
    up, down = math.nextafter(0.5, 1.0), math.nextafter(0.5, 0.0)
    ex, adj, v = torch.tensor([[True]]), torch.zeros(1, 3, dtype=torch.float64), torch.tensor([True])
    T = lambda x: torch.tensor([[x]], dtype=torch.float64)  # noqa: E731
    assert proposal_rewards(ex, T(up), T(0.0), adj, v).item() == 0.5  # easy capped at 0.5
    assert proposal_rewards(ex, T(down), T(0.0), adj, v).item() == down
    assert proposal_rewards(ex, T(0.0), T(up), adj, v).item() == 1.0 - up  # min(c, 1 - c) from the other side
    assert proposal_rewards(ex, T(0.0), T(down), adj, v).item() == down
    assert proposal_rewards(ex, T(-0.0), T(-0.0), adj, v).item() == 0.0
    assert proposal_rewards(ex, T(5e-324), T(5e-324), adj, v).item() == 1e-323


def test_proposal_rewards_over_10000_attempts_average_every_attempt():
    N = 10_000
    ex = torch.zeros(1, N, dtype=torch.bool)
    ex[0, ::4] = True  # 2,500 executed
    s = torch.full((1, N), 1.0, dtype=torch.float64)
    c = torch.full((1, N), 0.5, dtype=torch.float64)
    out = proposal_rewards(ex, s, c, torch.zeros(1, 3, dtype=torch.float64), torch.tensor([True]))
    assert out.item() == 0.25  # 2,500 * (0.5 + 0.5) / 10,000


def test_proposal_rewards_name_finite_adjustments_whose_sum_overflows():
    ex, s, c, v = torch.tensor([[True]]), torch.tensor([[0.5]], dtype=torch.float64), \
        torch.tensor([[0.5]], dtype=torch.float64), torch.tensor([True])
    with pytest.raises(ValueError, match=r"row 0.*overflows.*adjustments\[0\]"):
        proposal_rewards(ex, s, c, torch.tensor([[1e308, 1e308, 0.0]], dtype=torch.float64), v)
    with pytest.raises(ValueError, match="overflows torch.float32"):  # finite in float64, past float32's range
        proposal_rewards(ex, s.float(), c.float(), torch.tensor([[3e38, 3e38, 0.0]]), v)
    # an invalid row overflowing does not matter: it scores -1 whatever its adjustments are
    out = proposal_rewards(ex, s, c, torch.tensor([[1e308, 1e308, 0.0]], dtype=torch.float64), torch.tensor([False]))
    assert out.tolist() == [-1.0]
    # the largest finite sum still passes
    out = proposal_rewards(ex, s, c, torch.tensor([[8e307, 8e307, 0.0]], dtype=torch.float64), v)
    assert out.item() == pytest.approx(1.6e308, rel=1e-12)


def test_inputs_are_not_mutated_and_results_are_detached():
    s = torch.tensor([[0.9, 0.2]], dtype=torch.float64, requires_grad=True)
    c = torch.tensor([[0.3, 0.7]], dtype=torch.float64)
    before = (s.detach().clone(), c.clone())
    out = proposal_rewards(torch.tensor([[True, True]]), s, c, torch.zeros(1, 3, dtype=torch.float64),
                           torch.tensor([True]))
    assert not out.requires_grad and out.item() == pytest.approx((0.5 + 0.3 + 0.2 + 0.3) / 2)
    assert torch.equal(s.detach(), before[0]) and torch.equal(c, before[1])
