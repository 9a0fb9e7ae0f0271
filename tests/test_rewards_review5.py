"""Review 5 of the reward math: invalid inputs to the seed functions must raise a ValueError naming the field, not
come out as a silent wrong number (DESIGN.md conventions; MM-Zero seed section 4: "finite CPU inputs", s and c "in
[0, 1]"). Valid inputs keep their hand-derived values, including placeholders where the seed says they do not count.
"""

import math

import pytest
import torch

from mmevo.rewards.mmzero import diversity_adjustment, proposal_rewards
from mmevo.rewards.prism import coverage_rewards

NAN, INF = float("nan"), float("inf")


def _one_row(s, c, adj=(0.0, 0.0, 0.0), executed=(True,), valid=True):
    return (torch.tensor([list(executed)]), torch.tensor([list(s)], dtype=torch.float64),
            torch.tensor([list(c)], dtype=torch.float64), torch.tensor([list(adj)], dtype=torch.float64),
            torch.tensor([valid]))


# ---------------------------------------------------------------------------------------- MM-Zero proposal_rewards
@pytest.mark.parametrize("field,s,c", [
    ("consistency", [1.0], [1.5]),  # old: min(1.5, 1 - 1.5) = -0.5, reward (0.5 - 0.5) / 1 = 0.0, silently
    ("consistency", [1.0], [-0.2]),  # old: min(-0.2, 1.2) = -0.2, reward 0.3
    ("consistency", [1.0], [NAN]),  # old: NaN reward
    ("easy_accuracy", [NAN], [0.5]),  # old: NaN reward (clamp keeps NaN)
    ("easy_accuracy", [-1.0], [0.5]),  # old: min(-1, .5) + .5 = -0.5
])
def test_proposal_rewards_rejects_out_of_range_scores_of_an_executed_attempt(field, s, c):
    with pytest.raises(ValueError, match=rf"{field}\[0, 0\] must lie in \[0, 1\]"):
        proposal_rewards(*_one_row(s, c))


@pytest.mark.parametrize("bad", [NAN, INF, -INF])
def test_proposal_rewards_rejects_non_finite_adjustments_of_a_valid_row(bad):
    # old: reward NaN / +-inf
    with pytest.raises(ValueError, match=r"adjustments\[0, 2\] must be finite"):
        proposal_rewards(*_one_row([1.0], [0.5], adj=(0.0, 0.0, bad)))


def test_proposal_rewards_placeholders_where_the_seed_ignores_them():
    # MM-Zero seed: failed renders contribute 0 but stay in the denominator; an invalid format gives -1 whatever else.
    # row 0: attempt 0 executed s=1 -> min(1, .5) = .5, c=.5 -> min(.5, .5) = .5; attempt 1 failed (placeholders 7 and
    #        -3 are never read): (0.5 + 0.5 + 0) / 2 = 0.5, plus adjustments -0.3 + 0 + 0.1 = 0.3
    # row 1: invalid format (its c = 9 and NaN adjustment are never read): -1
    r = proposal_rewards(torch.tensor([[True, False], [True, True]]),
                         torch.tensor([[1.0, 7.0], [0.2, 0.2]], dtype=torch.float64),
                         torch.tensor([[0.5, -3.0], [9.0, 0.5]], dtype=torch.float64),
                         torch.tensor([[-0.3, 0.0, 0.1], [NAN, 0.0, 0.0]], dtype=torch.float64),
                         torch.tensor([True, False]))
    assert r.tolist() == pytest.approx([0.3, -1.0], abs=1e-12)


# ------------------------------------------------------------------------------------ MM-Zero diversity_adjustment
def test_diversity_adjustment_rejects_non_finite_shares():
    # old: NaN adjustment (NaN survives the clip)
    with pytest.raises(ValueError, match="shares must be finite"):
        diversity_adjustment(torch.tensor([[NAN, 0.2, 0.3]]), 4)


def test_diversity_adjustment_rejects_infinite_strength():
    # M = 1, shares all 1: dot(shares - 1, w) = 0, so old gave 0 * inf = NaN
    with pytest.raises(ValueError, match="strength must be finite"):
        diversity_adjustment(torch.ones(1, 3), 1, INF)


def test_diversity_adjustment_value_unchanged():
    # M = 4, shares (.5, .25, .25): dot(shares - .25, [.45, .2, .35]) = .25 * .45 = .1125; * 4 * .5 = .225 -> -.225
    d = diversity_adjustment(torch.tensor([[0.5, 0.25, 0.25]], dtype=torch.float64), 4, 0.5)
    assert d.tolist() == pytest.approx([-0.225], abs=1e-12)


# ---------------------------------------------------------------------------------------------- Prism coverage
@pytest.mark.parametrize("lam", [NAN, INF, -1.0])
def test_coverage_rewards_rejects_a_bad_lambda(lam):
    # old: NaN -> NaN reward; inf -> inf; -1 -> zpd(.75) * (1 - e^{-1/1}) = 0.632 (rare clusters penalised), silently
    with pytest.raises(ValueError, match="lam must be finite and >= 0"):
        coverage_rewards(torch.tensor([0.75], dtype=torch.float64), torch.tensor([0]),
                         torch.tensor([1.0], dtype=torch.float64), lam=lam)


def test_coverage_rewards_value_unchanged():
    # Prism: r = zpd(p) (1 + lam exp(-n_c / n_bar)); counts (1, 3): n_bar = 2.
    # q0: p = .75 -> zpd 1, cluster 0: 1 + 5 e^{-1/2};  q1: p = .5 -> zpd 1 - .25/.4 = .375, cluster 1: .375 (1 + 5 e^{-3/2})
    r = coverage_rewards(torch.tensor([0.75, 0.5], dtype=torch.float64), torch.tensor([0, 1]),
                         torch.tensor([1.0, 3.0], dtype=torch.float64), lam=5.0)
    assert r.tolist() == pytest.approx([1 + 5 * math.exp(-0.5), 0.375 * (1 + 5 * math.exp(-1.5))], abs=1e-12)
