"""Bad input to the reward pieces the seeds' loops feed to GRPO: a clear error naming the argument, never a number.

Each case here used to return a silent number (shown in the comments) that the seeds' formulas cannot produce."""

import math

import pytest
import torch

from mmevo.honest.selfplay import generator_reward
from mmevo.rewards.mmzero import (coder_reward, diversity_adjustment, easy_hard_penalty, proposal_penalties, proposal_rewards,
                                  type_penalties)
from mmevo.rewards.prism import coverage_rewards, zpd

NAN, INF = float("nan"), float("inf")


# -- MM-Zero: the pieces "supplied upstream" of proposal_rewards ----------------------------------------------------
@pytest.mark.parametrize("bad", [NAN, 1.5, -0.1, INF, True])
def test_easy_hard_penalty_rejects_a_consistency_that_is_no_share(bad):
    # NaN gave 0.0 (no penalty), 1.5 / -0.1 / inf gave -0.3 (min(c, 1 - c) < 0), True read as c = 1
    with pytest.raises(ValueError, match=r"consistencies\[1\] must be a number in \[0, 1\]"):
        easy_hard_penalty([0.5, bad])


def test_easy_hard_penalty_rejects_non_finite_threshold_and_penalty():
    with pytest.raises(ValueError, match="threshold"):
        easy_hard_penalty([0.5], threshold=NAN)  # gave 0.0: NaN < nothing
    with pytest.raises(ValueError, match="penalty"):
        easy_hard_penalty([1.0], penalty=NAN)  # gave nan


@pytest.mark.parametrize("cons, want", [([0.85], 0.0), ([0.15], 0.0), ([0.7, 1.0], 0.0), ([0.8, 0.9], 0.0), ([0.9, 0.95], -0.3),
                                        ([0.5, 0.0], 0.0), ([], 0.0), ([1.0], -0.3), ([0.5], 0.0)])
def test_easy_hard_penalty_values_at_and_around_the_threshold(cons, want):
    # mean min(c, 1 - c) at exactly 0.15 (1 - 0.85 rounds to 0.15000000000000002, 0.3 / 2) is not below it
    assert easy_hard_penalty(cons) == want


@pytest.mark.parametrize("args, name", [((True, NAN, 0.5, 0.0), "easy"), ((True, 0.5, 1.5, 0.0), "consistency"),
                                        ((True, 0.5, NAN, 0.0), "consistency"), ((True, 0.5, 0.5, INF), "penalties"),
                                        ((True, 0.5, 0.5, NAN), "penalties"), (("no", 0.5, 0.5, 0.0), "rendered"),
                                        ((None, 0.5, 0.5, 0.0), "rendered")])
def test_coder_reward_rejects_bad_input(args, name):
    # nan easy -> nan, c 1.5 -> 1.0 (min(c, 1 - c) = -0.5), inf penalties -> inf, "no" read as rendered -> 2.0
    with pytest.raises(ValueError, match=f"^{name} must"):
        coder_reward(*args)


def test_coder_reward_values():
    assert coder_reward(True, 0.5, 0.25, -0.3) == pytest.approx(1.0 + 0.5 + 0.25 - 0.3)
    assert coder_reward(True, 1.0, 1.0, 0.0) == 2.0 and coder_reward(True, 0.0, 0.0, 0.0) == 1.0
    assert coder_reward(False, NAN, NAN, NAN) == 0.0  # a failed render's s / c are undefined: 0 whatever they hold


def test_type_penalties_reject_nan_weight_and_a_type_outside_the_population():
    with pytest.raises(ValueError, match="weight"):
        type_penalties(["a", "a", "a", "b"], weight=NAN)  # gave [nan, nan, nan, nan]
    with pytest.raises(ValueError, match="'c' is not in the population"):
        type_penalties(["c"], population=["a", "b"])  # gave [-0.0]: a share of 0
    assert type_penalties(["a"], population=["a", "a", "a", "b"]) == pytest.approx([-0.15 * 0.25 / 0.5])
    assert not any(math.isnan(x) for x in type_penalties(["x", "y", "x"]))


def test_proposal_penalties_reject_attempt_lists_of_different_lengths():
    aux = [{"valid": True, "content_type": "a", "executed": [True, False], "consistency": [1.0]}]
    # gave [(-0.3, 0.0)]: zip kept the first attempt and dropped the second silently
    with pytest.raises(ValueError, match="proposer sample 0: executed / consistency give 2 / 1"):
        proposal_penalties(aux)


# -- Prism: the coverage reward ------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [NAN, 1.5, -0.25, INF])
def test_coverage_rewards_reject_an_agreement_outside_0_1_of_a_valid_sample(bad):
    # each scored 0.0 (outside the zpd band), silently; the head already refused such an aux["p"]
    p = torch.tensor([0.75, bad], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"p\[1\] of a valid sample must lie in \[0, 1\]"):
        coverage_rewards(p, torch.tensor([0, 1]), torch.ones(2, dtype=torch.float64))
    # an invalid sample's p is a placeholder: -1 whatever it holds
    got = coverage_rewards(p, torch.tensor([0, -1]), torch.ones(2, dtype=torch.float64), valid=torch.tensor([True, False]))
    assert got.tolist() == pytest.approx([1.0 + 5.0 * math.exp(-1.0), -1.0])


def test_zpd_nan_is_an_error_and_the_band_edges_hold():
    with pytest.raises(ValueError, match=r"p\[2\] is NaN"):
        zpd(torch.tensor([0.5, 0.9, NAN], dtype=torch.float64))
    got = zpd(torch.tensor([0.5, 0.75, 0.9, 0.0, 1.0, 0.35, 1.15, INF, -INF], dtype=torch.float64)).tolist()
    assert got == pytest.approx([0.375, 1.0, 0.625, 0, 0, 0, 0, 0, 0], abs=1e-15)


# -- wrong types: named errors, not casts or TypeErrors -------------------------------------------------------------
def test_proposal_rewards_refuse_non_float_consistency_and_adjustments():
    ex, s, valid = torch.tensor([[True]]), torch.tensor([[0.5]], dtype=torch.float64), torch.tensor([True])
    c, adj = torch.tensor([[0.5]], dtype=torch.float64), torch.zeros(1, 3, dtype=torch.float64)
    assert proposal_rewards(ex, s, c, adj, valid).tolist() == [1.0]
    with pytest.raises(ValueError, match="^adjustments must be floating point"):
        proposal_rewards(ex, s, c, torch.tensor([[1, 0, 0]]), valid)  # gave 2.0: an integer adjustment of +1
    with pytest.raises(ValueError, match="^consistency must be floating point"):
        proposal_rewards(ex, s, torch.tensor([[True]]), adj, valid)  # gave 0.5: True read as c = 1


def test_strength_and_lam_of_no_number_are_named():
    with pytest.raises(ValueError, match="strength"):
        diversity_adjustment(torch.zeros(1, 3, dtype=torch.float64), 2, None)  # TypeError '<=' not supported
    with pytest.raises(ValueError, match="lam"):
        coverage_rewards(torch.tensor([0.7], dtype=torch.float64), torch.tensor([0]), torch.ones(1), None)


def test_generator_reward_names_mismatched_lengths():
    with pytest.raises(ValueError, match="confidences has 1 solver samples, correct 2"):
        generator_reward([0.5], [True, False])  # "zip() argument 2 is longer than argument 1"
    assert generator_reward([0.0, 0.5, 1.0, None], [True, True, True, False]) == (pytest.approx(0.5), 3)


# -- HONEST: the seed's section-8 bar -----------------------------------------------------------------------------
def test_pillar_works_refuses_an_ece_that_is_no_number():
    from mmevo.honest.calibration import pillar_works

    assert pillar_works(0.30, 0.29) and not pillar_works(0.30, 0.295) and pillar_works(0.05, 0.0)
    for base, pillar, name in ((NAN, 0.1, "ece_base"), (0.1, NAN, "ece_pillar"), ("0.3", 0.1, "ece_base"),
                               (0.3, 1.5, "ece_pillar"), (0.3, -0.1, "ece_pillar")):
        with pytest.raises(ValueError, match=f"{name} must be an ECE"):  # NaN read as False, "0.3" as 0.3
            pillar_works(base, pillar)
    with pytest.raises(ValueError, match="bar"):
        pillar_works(0.3, 0.1, bar=NAN)
