"""Review of Prism (seed 000) and MM-Zero (seed 001) against their papers: hand-derived numbers, the seed API, edges.

Every expected value is derived by hand from the papers' equations in the comment beside it, not from the code.
"""

import inspect
import math

import numpy as np
import pytest
import torch

from mmevo.rewards.mmzero import diversity_adjustment, proposal_rewards
from mmevo.rewards.prism import PrismCoverageHead, coverage_rewards, ema_counts, zpd

E = math.exp


# -- Prism: n_k <- gamma·n_k + (1 - gamma)·1[k visited] ---------------------------------------------------------------
@pytest.mark.parametrize("nothing", [[], (), np.array([]), torch.tensor([])])
def test_ema_counts_a_step_that_visits_nothing_decays_every_count(nothing):
    # no cluster visited (M = 0): every indicator is 0, n_k <- 0.9·n_k: [2, 1, .5] -> [1.8, .9, .45]
    # (an empty list / tuple / numpy array has no integer dtype; it used to raise "visited must hold integer ids")
    counts = torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)
    assert ema_counts(counts, nothing, gamma=0.9).tolist() == pytest.approx([1.8, 0.9, 0.45], abs=1e-15)
    assert counts.tolist() == [2.0, 1.0, 0.5]


def test_ema_counts_from_the_seed_initial_counts_with_ids_as_lists_tuples_and_numpy():
    # seed defaults: every count starts at smoothing_alpha = 1, gamma = 0.99; cluster 0 visited twice in the step
    # counts once (indicator): n_0 = .99·1 + .01·1 = 1, the others .99·1 = .99
    for visited in ([0, 0], (0, 0), np.array([0, 0]), torch.tensor([0, 0])):
        assert ema_counts(torch.ones(4, dtype=torch.float64), visited).tolist() == pytest.approx(
            [1.0, 0.99, 0.99, 0.99], abs=1e-15)
    # counts given as a float numpy array: 0.5·[1, 2] + 0.5·[0, 1] = [.5, 1.5]
    assert ema_counts(np.array([1.0, 2.0]), [1], gamma=0.5).tolist() == pytest.approx([0.5, 1.5])


# -- Prism: zpd(p) = max(0, 1 - |p - .75| / .4), p in [.5, .9]; r = zpd · (1 + lam·exp(-n_c / mean n)) -------------------
def test_zpd_and_coverage_rewards_accept_numpy_lists_and_python_numbers():
    # zpd(.5) = 1 - .25/.4 = .375; zpd(.75) = 1; zpd(.9) = 1 - .15/.4 = .625; .95 is outside the band: 0
    want = [0.375, 1.0, 0.625, 0.0]
    for p in (np.array([0.5, 0.75, 0.9, 0.95]), [0.5, 0.75, 0.9, 0.95], (0.5, 0.75, 0.9, 0.95)):
        assert zpd(p).tolist() == pytest.approx(want, abs=1e-12)
    assert float(zpd(0.75)) == 1.0 and float(zpd(0.9)) == pytest.approx(0.625)
    # counts [1, 3]: mean 2. p = .75 in cluster 0: 1·(1 + 5e^{-1/2}); p = .5 in cluster 1: .375·(1 + 5e^{-3/2})
    want = [1 + 5 * E(-0.5), 0.375 * (1 + 5 * E(-1.5))]
    assert coverage_rewards([0.75, 0.5], (0, 1), np.array([1.0, 3.0])).tolist() == pytest.approx(want, rel=1e-12)
    assert coverage_rewards(np.array([0.75, 0.5]), np.array([0, 1]), [1.0, 3.0], valid=[True, False]).tolist() == \
        pytest.approx([want[0], -1.0], rel=1e-12)


def test_coverage_reward_paper_numbers_on_eighths_of_an_eight_sample_solver():
    # counts after init (all 1, mean 1): rarity e^{-1} everywhere; p = k/8:
    # 4/8 -> .375, 5/8 -> 1 - .125/.4 = .6875, 6/8 -> 1, 7/8 -> .6875, 8/8 -> 0 (out of band), 3/8 -> 0
    p = torch.tensor([3, 4, 5, 6, 7, 8], dtype=torch.float64) / 8
    got = coverage_rewards(p, torch.tensor([0, 1, 2, 3, 0, 1]), torch.ones(4, dtype=torch.float64))
    bonus = 1 + 5 * E(-1)
    assert got.tolist() == pytest.approx([0.0, 0.375 * bonus, 0.6875 * bonus, bonus, 0.6875 * bonus, 0.0], rel=1e-12)


def test_head_two_steps_with_the_seed_defaults():
    # seed: lam 5, gamma .99, counts start at 1. Step 1: two in-band questions in cluster 0 (p = .75), one out of band
    # in cluster 1 (p = 1): rewards 1 + 5e^{-1}, same, 0; then n_0 = 1 (visited once), n_1 = n_2 = .99 (p = 1 visits
    # nothing). Step 2: a p = .75 question in cluster 2: mean n = (1 + .99 + .99)/3 = 2.98/3, r = 1 + 5e^{-.99·3/2.98}
    from mmevo.rewards.heads import ScoredSample

    head = PrismCoverageHead(centroids="", k=3)
    rows = [("a", 0.75, 0), ("b", 0.75, 0), ("c", 1.0, 1)]
    r, _ = head.score([ScoredSample("q", 0, None, None, aux={"question": q, "p": p, "cluster": c}) for q, p, c in rows])
    assert r.tolist() == pytest.approx([1 + 5 * E(-1), 1 + 5 * E(-1), 0.0], rel=1e-6)
    assert head.counts.tolist() == pytest.approx([1.0, 0.99, 0.99], abs=1e-15)
    r, _ = head.score([ScoredSample("q", 0, None, None, aux={"question": "d", "p": 0.75, "cluster": 2})])
    assert r.tolist() == pytest.approx([1 + 5 * E(-0.99 * 3 / 2.98)], rel=1e-6)


# -- MM-Zero: the seed's exact API ------------------------------------------------------------------------------------
def test_mmzero_seed_signatures():
    sig = inspect.signature(diversity_adjustment)
    assert list(sig.parameters) == ["shares", "valid_count", "strength"]
    assert sig.parameters["strength"].default == 0.5
    assert list(inspect.signature(proposal_rewards).parameters) == ["executed", "easy_accuracy", "consistency",
                                                                    "adjustments", "valid"]


def test_diversity_adjustment_hand_numbers_with_m_not_b():
    shares = torch.tensor([[0.2, 0.5, 0.1], [0.0, 0.0, 0.0]], dtype=torch.float64)
    # M = 5, 1/M = .2: row 0: .45·0 + .20·.3 + .35·(-.1) = .025; ·5·.5 = .0625 -> -.0625
    #                  row 1: -.2·(.45 + .20 + .35) = -.2; ·2.5 = -.5 (at the clip) -> +.5
    out = diversity_adjustment(shares, valid_count=5)
    assert out.dtype == torch.float64 and out.tolist() == pytest.approx([-0.0625, 0.5], abs=1e-12)
    # strength 1, M = 2: [.5, 1, 0] - .5 = [0, .5, -.5]: .1 - .175 = -.075; ·2 = -.15 -> +.15
    assert diversity_adjustment(torch.tensor([[0.5, 1.0, 0.0]]), 2, 1.0).tolist() == pytest.approx([0.15], abs=1e-6)


def test_proposal_rewards_hand_numbers():
    # attempts: (min(.8,.5) + min(.9,.1)) = .6, failed -> 0 (kept in the denominator), (.3 + min(.4,.6)) = .7
    # mean over N = 3: 1.3/3; + (-.3 + 0 + .15) -> 1.3/3 - .15. Second row: invalid format -> -1
    r = proposal_rewards(torch.tensor([[True, False, True], [True, True, True]]),
                         torch.tensor([[0.8, 1.0, 0.3], [1.0, 1.0, 1.0]], dtype=torch.float64),
                         torch.tensor([[0.9, 0.5, 0.4], [0.5, 0.5, 0.5]], dtype=torch.float64),
                         torch.tensor([[-0.3, 0.0, 0.15], [0.0, 0.0, 0.0]], dtype=torch.float64),
                         torch.tensor([True, False]))
    assert r.dtype == torch.float64 and r.tolist() == pytest.approx([1.3 / 3 - 0.15, -1.0], abs=1e-12)
