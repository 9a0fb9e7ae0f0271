"""Tests for mmevo.rewards.sfr: the Softened Frequency Reward of CSRS (Eq. 7-8)."""

import math

import pytest
import torch

from mmevo.rewards.sfr import frequency_counts, softened_frequency_rewards


def sfr_by_hand(r_base, f_r, gamma=0.2, beta=5.0, eps=1e-6):
    return (gamma * math.tanh(beta * (f_r / (r_base + eps) - 1.0)) + 1.0) * r_base


def test_hand_computed_group():
    # maternal [a, a, b, None], re-inference [a, b, b, b, None, a]: n = 4, 6 re-inferences, total 10.
    # a: Count(a, A_all) = 2 + 2 = 4 -> R_base = 0.4; f_r = 2/6 = 1/3;
    #    f_r / R_base - 1 = -1/6; tanh(5 * -1/6) = tanh(-0.8333) = -0.6822; R = (1 - 0.13644) * 0.4 = 0.34542
    # b: Count(b, A_all) = 1 + 3 = 4 -> R_base = 0.4; f_r = 3/6 = 0.5;
    #    f_r / R_base - 1 = 0.25; tanh(1.25) = 0.84828; R = (1 + 0.169656) * 0.4 = 0.46786
    # None -> 0
    r = softened_frequency_rewards(["a", "a", "b", None], ["a", "b", "b", "b", None, "a"])
    assert r.dtype == torch.float64 and r.shape == (4,)
    ra, rb = sfr_by_hand(0.4, 1 / 3), sfr_by_hand(0.4, 0.5)
    assert r.tolist() == pytest.approx([ra, ra, rb, 0.0], abs=1e-12)
    assert r.tolist() == pytest.approx([0.34542, 0.34542, 0.46786, 0.0], abs=1e-4)


def test_boost_and_damp_relative_to_base():
    r = softened_frequency_rewards(["a", "a", "b", None], ["a", "b", "b", "b", None, "a"])
    assert r[0] < 0.4 < r[2]  # a is rarer under re-inference (damped), b more frequent (boosted)
    # the modulation never exceeds gamma
    assert 0.4 * 0.8 <= r[0] and r[2] <= 0.4 * 1.2


def test_equal_frequency_gives_base():
    # f_r == R_base (up to eps) -> tanh(~0) -> R ~ R_base
    r = softened_frequency_rewards(["x", "y"], ["x", "y", "x", "y"])
    assert r.tolist() == pytest.approx([0.5, 0.5], abs=1e-5)


def test_all_none_group_is_zero():
    r = softened_frequency_rewards([None, None, None], [None] * 6)
    assert r.dtype == torch.float64 and r.tolist() == [0.0, 0.0, 0.0]


def test_none_never_matches_none():
    # maternal "x" alone: the Nones count in the denominators but never as an answer
    r = softened_frequency_rewards(["x", None], [None, None])
    # R_base = 1/4, f_r = 0 -> (1 + 0.2 tanh(-5)) / 4
    assert r.tolist() == pytest.approx([sfr_by_hand(0.25, 0.0), 0.0], abs=1e-12)


def test_empty_reinference_gives_base():
    r = softened_frequency_rewards(["a", "b", "a", None], [])
    assert r.tolist() == pytest.approx([0.5, 0.25, 0.5, 0.0], abs=1e-15)


def test_empty_maternal():
    r = softened_frequency_rewards([], ["a", "b"])
    assert r.dtype == torch.float64 and r.shape == (0,)


def test_single_maternal_answer():
    assert softened_frequency_rewards(["x"], []).tolist() == [1.0]
    # total 3, R_base = 2/3, f_r = 1/2 < R_base -> damped
    r = softened_frequency_rewards(["x"], ["x", "y"])
    assert r.tolist() == pytest.approx([sfr_by_hand(2 / 3, 0.5)], abs=1e-12)
    assert r.item() < 2 / 3


def test_hashable_keys_of_any_type():
    r = softened_frequency_rewards([("frac", 1, 2), 3, 3], [3, ("frac", 1, 2), ("frac", 1, 2)])
    # (frac,1,2): R_base = 3/6, f_r = 2/3 (boost); 3: R_base = 3/6, f_r = 1/3 (damp)
    assert r.tolist() == pytest.approx([sfr_by_hand(0.5, 2 / 3), sfr_by_hand(0.5, 1 / 3), sfr_by_hand(0.5, 1 / 3)], abs=1e-12)


@pytest.mark.parametrize(
    "maternal, reinference, kw",
    [
        (["a"] * 8, [None] * 40, {}),  # f_r = 0 everywhere
        (["a"] * 8, ["a"] * 40, {"eps": 0.0}),
        (["a", "b"], ["b"] * 1000, {"eps": 0.0, "beta": 1e308}),  # beta * x overflows to +-inf -> tanh saturates
        (["a", None], ["a"], {"gamma": 0.0, "beta": 0.0}),
        (["a", "b", "c"], ["d"] * 5, {"eps": 1e300}),
    ],
)
def test_extreme_cases_are_finite(maternal, reinference, kw):
    r = softened_frequency_rewards(maternal, reinference, **kw)
    assert torch.isfinite(r).all() and (r >= 0).all()


@pytest.mark.parametrize(
    "kw", [{"gamma": -0.1}, {"gamma": float("nan")}, {"beta": float("inf")}, {"beta": -1.0}, {"eps": -1e-6}, {"gamma": "x"}]
)
def test_bad_params_raise(kw):
    with pytest.raises(ValueError):
        softened_frequency_rewards(["a"], ["a"], **kw)


def test_frequency_counts_skips_none():
    assert frequency_counts(["a", None, "a", "b", None]) == {"a": 2, "b": 1}
