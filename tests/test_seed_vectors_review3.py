"""Review 3 of the seed equations: an independent reference of every reward equation (CSRS Eq. 6-8, MM-Zero's
proposer reward and diversity adjustment, Prism's zpd / coverage / EMA, HONEST's R_B, R_H, CASR, CPR priority)
agreed with mmevo on random vectors; these pin a compact set of edge vectors per head, each expected value worked
out by hand from the seed's formula (arithmetic in the comments), and the one disagreement found (a NaN SFR key)."""

import math

import pytest
import torch

from mmevo.rewards.honest import brier_reward, casr_reward, hindsight_reward, replay_priorities
from mmevo.rewards.mmzero import diversity_adjustment, proposal_rewards
from mmevo.rewards.prism import coverage_rewards, ema_counts, zpd
from mmevo.rewards.sfr import softened_frequency_rewards


def sfr_eq8(f_r, f_base, gamma=0.2, beta=5.0, eps=1e-6):
    """CSRS Eq. 8 written out: (gamma tanh(beta (f_r / (f_base + eps) - 1)) + 1) f_base."""
    return (gamma * math.tanh(beta * (f_r / (f_base + eps) - 1)) + 1) * f_base


@pytest.mark.parametrize("maternal, reinference, want", [
    # n = 3, m = 2: A_all has 9 answers. a=1: Count = 2 + 1 -> f_base 3/9, f_r 1/6; tanh(5 (0.5 - 1)) = -0.98661
    # -> 0.80268 / 3 = 0.26756. a=2: Count = 1 + 5 -> f_base 6/9, f_r 5/6; tanh(5 * 0.25) = 0.84828 -> 0.77977
    ([1, 1, 2], [1, 2, 2, 2, 2, 2], [sfr_eq8(1 / 6, 1 / 3)] * 2 + [sfr_eq8(5 / 6, 2 / 3)]),
    ([7], [], [1.0]),  # single sample, no re-inference: R = R_base = 1 / 1
    ([1, 1], [1, 1, 1, 1], [sfr_eq8(1.0, 1.0)] * 2),  # all equal: f_r = f_base = 1, tanh(~-5e-6) -> 0.999999
    ([None, 1], [1, 1], [0.0, sfr_eq8(1.0, 0.75)]),  # no answer: 0; a=1: 3/4, f_r 1 -> 0.75 (1 + 0.2 tanh(5/3))
    ([1, 2], [2, 2], [sfr_eq8(0.0, 0.25), sfr_eq8(1.0, 0.75)]),  # a tie among maternals, broken by re-inference
    ([], [1], []),  # empty group
])
def test_sfr_edge_vectors(maternal, reinference, want):
    got = softened_frequency_rewards(maternal, reinference).tolist()
    assert got == pytest.approx(want, rel=1e-12)
    assert softened_frequency_rewards([1, 1, 2], [1, 2, 2, 2, 2, 2])[0].item() == pytest.approx(0.267559, abs=1e-6)


@pytest.mark.parametrize("keys", [
    ([float("nan"), float("nan")], [float("nan")]),
    (torch.tensor([float("nan"), float("nan")]), torch.tensor([float("nan")])),
    ([1, 1], [1, float("nan")]),
])
def test_sfr_nan_key_is_refused(keys):
    # Eq. 7's Count(a, A) needs a == a. A NaN key gave 0.999999 as one Python object repeated (all 3 "equal") but
    # 0.26667 from a tensor (each NaN its own answer): the reward hung on object identity. Now a ValueError.
    with pytest.raises(ValueError, match=r"(maternal|reinference)\[\d\] is NaN"):
        softened_frequency_rewards(*keys)


@pytest.mark.parametrize("executed, easy, cons, adj, valid, want", [
    ([[True, False]], [[1.0, 0.0]], [[0.5, 0.0]], [[0, 0, 0]], [True], [0.5]),  # seed: (0.5 + 0.5 + 0) / 2
    ([[True]], [[0.3]], [[0.2]], [[-0.3, -0.15, 0.5]], [True], [0.3 + 0.2 + 0.05]),  # min(.3,.5)+min(.2,.8), + sum adj
    ([[False, False]], [[1.0, 1.0]], [[0.5, 0.5]], [[0.1, 0, 0]], [True], [0.1]),  # every render failed: 0 + adj
    ([[True]], [[1.0]], [[0.5]], [[0, 0, 0]], [False], [-1.0]),  # invalid format overrides everything
    ([[True]], [[0.0]], [[1.0]], [[0, 0, 0]], [True], [0.0]),  # s = 0, c = 1: min(1, 0) = 0
])
def test_proposal_reward_edge_vectors(executed, easy, cons, adj, valid, want):
    got = proposal_rewards(torch.tensor(executed), torch.tensor(easy, dtype=torch.float64),
                           torch.tensor(cons, dtype=torch.float64), torch.tensor(adj, dtype=torch.float64),
                           torch.tensor(valid))
    assert got.tolist() == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("shares, m, strength, want", [
    ([[1.0, 1.0, 1.0]], 4, 0.5, -0.5),  # (0.75 * (.45 + .20 + .35)) * 4 * 0.5 = 1.5 -> clip 0.5 -> -0.5
    ([[0.25, 0.25, 0.25]], 4, 0.5, 0.0),  # every share 1/M: balanced, 0
    ([[0.0, 0.0, 0.0]], 4, 0.5, 0.5),  # -0.25 * 1 * 4 * 0.5 = -0.5 -> +0.5 (rare clusters earn the bound)
    ([[0.5, 0.2, 0.3]], 2, 0.5, -(0.45 * 0 + 0.20 * -0.3 + 0.35 * -0.2) * 2 * 0.5),  # -(-0.13) = 0.13
    ([[1.0, 0.0, 0.0]], 1, 0.0, 0.0),  # strength 0: no adjustment
])
def test_diversity_adjustment_edge_vectors(shares, m, strength, want):
    got = diversity_adjustment(torch.tensor(shares, dtype=torch.float64), m, strength)
    assert got.item() == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("p, want", [(0.5, 0.375), (0.75, 1.0), (0.9, 0.625), (0.49, 0.0), (0.91, 0.0), (0.0, 0.0),
                                     (1.0, 0.0), (0.6, 1 - 0.15 / 0.4)])  # 1 - |p - 0.75| / 0.4 inside [0.5, 0.9]
def test_prism_zpd_edge_vectors(p, want):
    assert zpd(torch.tensor([p], dtype=torch.float64)).item() == pytest.approx(want, abs=1e-12)


def test_prism_coverage_and_ema_edge_vectors():
    # counts [1, 3]: n̄ = 2. p = 0.75 in cluster 0: 1 * (1 + 5 e^{-1/2}) = 4.03265; p = 0.5 in cluster 1:
    # 0.375 (1 + 5 e^{-3/2}) = 0.79337; p = 0.95: zpd 0 -> 0
    got = coverage_rewards(torch.tensor([0.75, 0.5, 0.95], dtype=torch.float64), torch.tensor([0, 1, 0]),
                           torch.tensor([1.0, 3.0], dtype=torch.float64))
    assert got.tolist() == pytest.approx([1 + 5 * math.exp(-0.5), 0.375 * (1 + 5 * math.exp(-1.5)), 0.0], rel=1e-12)
    assert got[0].item() == pytest.approx(4.032653, abs=1e-6)
    # EMA, gamma 0.99: visited {0 twice} -> 0.99 * 1 + 0.01 = 1.0; unvisited 3 -> 2.97
    new = ema_counts(torch.tensor([1.0, 3.0], dtype=torch.float64), torch.tensor([0, 0]))
    assert new.tolist() == pytest.approx([1.0, 2.97], rel=1e-12)


@pytest.mark.parametrize("fn, want", [
    (lambda: brier_reward(torch.tensor([0.7, 1.0, 0.0], dtype=torch.float64), torch.tensor([0, 1, 1])),
     [-0.49, 0.0, -1.0]),  # -(c - y)^2
    (lambda: hindsight_reward(torch.tensor([0.9, 0.0], dtype=torch.float64), torch.tensor([1, 1])),
     [-0.003, -0.3]),  # -0.3 (r - y)^2: 0.3 * 0.01, 0.3 * 1
    # CASR c=.9 r=.2 y=0, critique 20 chars: (.81 - .04) + .05 = .82 -> clipped to .30; c=.5 r=.51 y=1: .25 - .2401
    # + .05 - .05 (copy, |r - c| = .01 < .02) = .0099; refined only (no critique): 0 + 0 - .05 (copy) - .05 = -.10
    (lambda: casr_reward(torch.tensor([0.9, 0.5, 0.4], dtype=torch.float64),
                         torch.tensor([0.2, 0.51, 0.4], dtype=torch.float64), torch.tensor([0, 1, 1]),
                         torch.tensor([20, 20, 0]), torch.tensor([True, True, True])),
     [0.30, 0.0099, -0.10]),
    (lambda: replay_priorities(torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0, 0])),
     [1.001 ** 0.6, 0.001 ** 0.6]),  # (|c - y| + 1e-3)^0.6: 1.0006, 0.015849
])
def test_honest_edge_vectors(fn, want):
    assert fn().tolist() == pytest.approx(want, rel=1e-12, abs=1e-15)
