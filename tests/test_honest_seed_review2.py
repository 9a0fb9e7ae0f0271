"""HONEST review 2: bad input to the replay buffer, the curriculum controller, the reliability bins and the reward
weights gets a clear error naming the field instead of a silently wrong result (expected values by hand)."""

import math
import random

import pytest
import torch

from mmevo.data.schema import Example
from mmevo.honest.calibration import reliability_bins
from mmevo.honest.curriculum import PROMOTE, DifficultyController
from mmevo.honest.replay import ReplayBuffer
from mmevo.rewards.honest import casr_reward, hindsight_reward, replay_priorities


def ex(i):
    return Example(id=f"q{i}", problem=f"problem {i}", answer="1", choices=[], images=[])


def t(xs):
    return torch.tensor(xs, dtype=torch.float64)


# -- CPR buffer (seed 3.1: priority from |c - y|, y in {0, 1}) ------------------------------------------------------
@pytest.mark.parametrize("bad", [None, 0.5, float("nan"), 2, "False"])
def test_replay_add_rejects_a_correctness_that_is_not_0_or_1(bad):
    buf = ReplayBuffer(4)
    with pytest.raises(ValueError, match="correct"):
        buf.add(ex(0), 0.5, bad)
    assert len(buf) == 0 and buf.added == 0  # nothing stored


@pytest.mark.parametrize("bad", ["0.5", None, float("nan"), 1.5, -0.1])
def test_replay_add_rejects_a_confidence_that_is_not_a_probability(bad):
    buf = ReplayBuffer(4)
    with pytest.raises(ValueError, match="confidence"):
        buf.add(ex(0), bad, True)
    assert len(buf) == 0


def test_replay_add_accepts_0_1_and_bools_with_hand_priorities():
    buf = ReplayBuffer(4, alpha=1.0, eps=0.0)
    buf.add(ex(0), 0.25, 1)  # |0.25 - 1| = 0.75
    buf.add(ex(1), 0.25, False)  # |0.25 - 0| = 0.25
    assert [e.correct for e in buf.entries()] == [True, False]
    assert buf.probabilities().tolist() == pytest.approx([0.75, 0.25])  # alpha 1, eps 0: 0.75 / 1.0, 0.25 / 1.0
    assert len(buf.sample(3, rng=random.Random(0))) == 3


# -- SMC controller (seed 4.3: rolling accuracy of episode outcomes) -----------------------------------------------
@pytest.mark.parametrize("bad", [None, "False", "True", 0.5, float("nan")])
def test_curriculum_record_rejects_an_outcome_that_is_not_0_or_1(bad):
    c = DifficultyController(["arithmetic"], start=5, cap=8)
    with pytest.raises(ValueError, match="correct"):
        c.record("arithmetic", 5, bad)
    assert c.episodes_at_ceiling("arithmetic") == 0 and c.rolling_accuracy("arithmetic") is None


@pytest.mark.parametrize("bad", [float("nan"), 5.5, 0, -1, "5", True])
def test_curriculum_record_rejects_a_bad_difficulty(bad):
    c = DifficultyController(["arithmetic"], start=5, cap=8)
    with pytest.raises(ValueError, match="difficulty"):
        c.record("arithmetic", bad, True)
    assert c.episodes_at_ceiling("arithmetic") == 0


def test_curriculum_record_still_counts_0_1_outcomes():
    c = DifficultyController(["arithmetic"], start=5, cap=8, cooldown=0)
    # 19 ones: 19 / 19 but fewer than 20 episodes; the 20th (a 1) promotes: 20 / 20 > 0.75
    assert [c.record("arithmetic", 5, 1) for _ in range(19)] == [None] * 19
    assert c.record("arithmetic", 5, 1) == PROMOTE and c.ceiling("arithmetic") == 6


# -- reliability bins (seed 8: the calibration histogram) ----------------------------------------------------------
def test_reliability_bins_hand_values():
    # bin 0 {0.05 | 0}, bin 9 {0.95 | 1, 1.0 | 0}: mean conf 0.975, accuracy 0.5
    bins = reliability_bins([0.05, 0.95, 1.0], [False, True, 0])
    assert [b["count"] for b in bins] == [1, 0, 0, 0, 0, 0, 0, 0, 0, 2]
    assert bins[9]["mean_confidence"] == pytest.approx(0.975) and bins[9]["accuracy"] == 0.5
    assert bins[0]["accuracy"] == 0.0 and bins[5]["mean_confidence"] is None


@pytest.mark.parametrize("conf", [[1.5], [-0.2], [float("nan")]])
def test_reliability_bins_rejects_a_confidence_outside_0_1(conf):
    # before: 1.5 and NaN were filed in the last bin, -0.2 in the first
    with pytest.raises(ValueError, match="conf"):
        reliability_bins(conf, [True])


@pytest.mark.parametrize("correct", [[None], [float("nan")], [0.5], ["no"]])
def test_reliability_bins_rejects_a_correctness_that_is_not_0_or_1(correct):
    with pytest.raises(ValueError, match="correct"):
        reliability_bins([0.5], correct)


@pytest.mark.parametrize("bins", [0, -3, 2.0, True])
def test_reliability_bins_rejects_a_bad_bin_count(bins):
    with pytest.raises(ValueError, match="bins"):
        reliability_bins([0.5], [True], bins=bins)


# -- reward weights ------------------------------------------------------------------------------------------------
def test_hindsight_k_must_be_finite():
    # k = inf: -inf * (1 - 1)^2 = NaN for the perfect r = y
    with pytest.raises(ValueError, match="k"):
        hindsight_reward(t([1.0, 0.5]), t([1, 1]), k=math.inf)
    assert hindsight_reward(t([1.0, 0.5]), t([1, 1]), k=0.3).tolist() == pytest.approx([0.0, -0.075])


@pytest.mark.parametrize("alpha,eps", [(math.inf, 1e-3), (0.6, math.inf)])
def test_replay_priorities_alpha_eps_must_be_finite(alpha, eps):
    with pytest.raises(ValueError, match="alpha and eps"):
        replay_priorities(t([1.0, 0.5]), t([1, 1]), alpha, eps)


@pytest.mark.parametrize("name", ["alpha", "beta", "gamma", "delta"])
def test_casr_weights_must_be_finite(name):
    args = (t([0.9]), t([0.5]), t([0]), torch.tensor([20]), torch.tensor([True]))
    # with the defaults: 0.81 - 0.25 + 0.05 = 0.61 -> clipped to 0.30
    assert casr_reward(*args).tolist() == pytest.approx([0.30])
    with pytest.raises(ValueError, match=name):
        casr_reward(*args, **{name: float("nan")})
