"""Seed equations of HONEST (sections 2.1, 2.5, 3.1, 4.1-4.3, 7, 9) and Prism ("How It Works", configuration) on
small vectors worked out by hand here, independently of the implementation."""

import math

import pytest
import torch

from mmevo.config import load_config
from mmevo.honest.curriculum import DifficultyController
from mmevo.honest.mutators import DISTRACTORS, PRIMES
from mmevo.honest.replay import ReplayBuffer
from mmevo.honest.tasks import generate_task
from mmevo.rewards.honest import brier_reward, casr_reward, hindsight_reward, replay_priorities
from mmevo.rewards.prism import coverage_rewards, ema_counts, zpd


def test_brier_and_hindsight():
    c, y = torch.tensor([0.9, 0.2, 0.5]), torch.tensor([1, 1, 0])
    assert brier_reward(c, y).tolist() == pytest.approx([-0.01, -0.64, -0.25])
    assert hindsight_reward(c, y).tolist() == pytest.approx([-0.003, -0.192, -0.075])  # k = 0.3


def test_casr_terms_and_clip():
    # c, r, y, critique chars, has r ->  alpha dBrier + beta 1[>=16] - gamma 1[|r-c|<0.02] - delta 1[partial]
    rows = [(0.6, 0.9, 1, 20, True, 0.16 - 0.01 + 0.05),  # full, improves
            (0.6, 0.61, 1, 20, True, (0.16 - 0.1521) + 0.05 - 0.05),  # full, copy
            (0.6, 0.6, 1, 0, True, -0.05 - 0.05),  # copy without critique: partial too
            (0.6, 0.0, 1, 5, False, -0.05),  # short critique alone: partial, no beta
            (0.1, 1.0, 1, 30, True, 0.30),  # 0.81 + 0.05 clipped to 0.30
            (0.0, 1.0, 0, 30, True, -0.30),  # -1 + 0.05 clipped to -0.30
            (0.6, 0.0, 1, 0, False, 0.0)]  # neither: silent
    c, r, y, n, h, want = zip(*rows)
    got = casr_reward(torch.tensor(c, dtype=torch.float64), torch.tensor(r, dtype=torch.float64), torch.tensor(y),
                      torch.tensor(n), torch.tensor(h))
    assert got.tolist() == pytest.approx(list(want))


def test_replay_priorities_and_probabilities():
    c, y = torch.tensor([1.0, 0.0, 0.5], dtype=torch.float64), torch.tensor([1, 1, 0])
    want = [(0 + 1e-3) ** 0.6, (1 + 1e-3) ** 0.6, (0.5 + 1e-3) ** 0.6]
    assert replay_priorities(c, y).tolist() == pytest.approx(want)
    buf = ReplayBuffer()
    for i, (ci, yi) in enumerate(zip(c.tolist(), y.tolist())):
        buf.add(generate_task("arithmetic", 1, seed=0, index=i).to_example(), ci, bool(yi))
    assert buf.probabilities().tolist() == pytest.approx([w / sum(want) for w in want])
    assert buf.capacity == 4096


def test_curriculum_promotes_strictly_above_tau_after_20_and_demotes_below_020():
    ctl = DifficultyController(["arithmetic"])  # start 5, cap 8, 20 episodes, 0.75 / 0.20, cool-down 10
    for k in range(20):
        ctl.record("arithmetic", 5, k >= 5)  # 15 of 20 = 0.75: not above tau
    assert ctl.ceiling("arithmetic") == 5
    ctl.record("arithmetic", 5, True)  # window 16 of 20 = 0.8 > 0.75
    assert ctl.ceiling("arithmetic") == 6
    for _ in range(19):
        ctl.record("arithmetic", 6, False)
    assert ctl.ceiling("arithmetic") == 6  # 19 episodes only
    ctl.record("arithmetic", 6, False)
    assert ctl.ceiling("arithmetic") == 5  # 0 of 20 < 0.20
    for _ in range(40):
        ctl.record("arithmetic", 5, False)
    assert ctl.ceiling("arithmetic") == 5  # never below the unmutated tier


def test_mutator_constants():
    assert list(PRIMES) == [p for p in range(7, 98) if all(p % d for d in range(2, p))]
    assert len(set(DISTRACTORS)) == 50


def test_honest_defaults_are_the_seeds():
    h = load_config(None, []).honest
    assert (h.k, h.hindsight_prob, h.replay_capacity, h.replay_share, h.replay_warmup_steps, h.replay_alpha,
            h.replay_eps) == (0.3, 0.3, 4096, 0.3, 100, 0.6, 1e-3)
    assert (h.smc_cap, h.smc_promote, h.smc_demote, h.smc_min_episodes, h.smc_cooldown) == (8, 0.75, 0.20, 20, 10)
    assert (h.casr_alpha, h.casr_beta, h.casr_gamma, h.casr_delta, h.casr_clip, h.copy_tol) == \
        (1.0, 0.05, 0.05, 0.05, 0.30, 0.02)
    assert (h.health_reward_std_min, h.health_replay_cooldown, h.health_min_distinct_share,
            h.health_mutation_retries) == (1e-4, 50, 0.1, 3)
    assert not (h.hcr_enabled or h.replay_enabled or h.smc_enabled) and h.gss_mode == "off"


def test_prism_zpd_coverage_and_ema():
    p = torch.tensor([0.49, 0.5, 0.75, 0.875, 0.9, 0.91], dtype=torch.float64)
    assert zpd(p).tolist() == pytest.approx([0.0, 0.375, 1.0, 0.6875, 0.625, 0.0])
    counts = torch.tensor([1.0, 3.0], dtype=torch.float64)  # mean 2
    r = coverage_rewards(torch.tensor([0.75, 0.75, 0.5], dtype=torch.float64), torch.tensor([0, 1, 0]), counts)
    assert r.tolist() == pytest.approx([1 + 5 * math.exp(-0.5), 1 + 5 * math.exp(-1.5),
                                        0.375 * (1 + 5 * math.exp(-0.5))])
    assert ema_counts(counts, torch.tensor([1, 1])).tolist() == pytest.approx([0.99, 0.99 * 3 + 0.01])
    pc = load_config(None, []).prism
    assert (pc.lam, pc.gamma, pc.k, pc.init_count, tuple(pc.pool_band), pc.solver_samples, pc.max_per_cluster) == \
        (5.0, 0.99, 128, 1.0, (0.5, 0.9), 8, 100)
