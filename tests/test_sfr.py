"""Tests for mmevo.rewards.sfr: the Softened Frequency Reward of CSRS (Eq. 7-8).

Every expected value is computed by hand (the arithmetic is in the comments, 15 significant
digits) with the paper's defaults gamma = 0.2, beta = 5.0 and eps = 1e-6:

    Eq. 7: R_base = f_base = Count(a, A_all) / |A_all|,   A_all = maternal + re-inference answers
    Eq. 8: R = (gamma * tanh(beta * (f_r / (f_base + eps) - 1)) + 1) * R_base,
           f_r = Count(a, A_m) / |A_m|

TOL is far below the size of the effect of eps (about 1e-6 relative), so a wrong constant, eps
in the wrong place, or base and re-inference frequencies swapped all fail.
"""

import pytest
import torch

from mmevo.rewards.sfr import frequency_counts, softened_frequency_rewards

TOL = 1e-12


def test_hand_computed_group():
    # maternal [a, a, b, None], re-inference [a, b, b, b, None, a]: n = 4, 6 re-inferences, total 10.
    # a: Count(a, A_all) = 2 + 2 = 4 -> R_base = 0.4; f_r = 2/6 = 1/3
    #    f_r / (R_base + eps) = 0.333333333333333 / 0.400001 = 0.833331250005208
    #    5 * (0.833331250005208 - 1) = -0.833343749973958; tanh(-0.833343749973958) = -0.682267358089363
    #    R = (1 + 0.2 * -0.682267358089363) * 0.4 = (1 - 0.136453471617873) * 0.4 = 0.345418611352851
    # b: Count(b, A_all) = 1 + 3 = 4 -> R_base = 0.4; f_r = 3/6 = 0.5
    #    0.5 / 0.400001 = 1.24999687500781; 5 * 0.24999687500781 = 1.24998437503906
    #    tanh(1.24998437503906) = 0.848279258428108
    #    R = (1 + 0.169655851685622) * 0.4 = 0.467862340674249
    # None -> 0
    r = softened_frequency_rewards(["a", "a", "b", None], ["a", "b", "b", "b", None, "a"])
    assert r.dtype == torch.float64 and r.shape == (4,)
    assert r.tolist() == pytest.approx([0.345418611352851, 0.345418611352851, 0.467862340674249, 0.0], abs=TOL)


def test_boost_and_damp_relative_to_base():
    r = softened_frequency_rewards(["a", "a", "b", None], ["a", "b", "b", "b", None, "a"])
    assert r[0] < 0.4 < r[2]  # a is rarer under re-inference (damped), b more frequent (boosted)
    # the modulation never exceeds gamma
    assert 0.4 * 0.8 <= r[0] and r[2] <= 0.4 * 1.2


def test_equal_frequency_gives_base_up_to_eps():
    # x: R_base = (1 + 2)/6 = 0.5, f_r = 2/4 = 0.5 (y the same)
    #   f_r / (R_base + eps) = 0.5 / 0.500001 = 0.999998000004; - 1 = -1.999996000008e-6
    #   tanh(5 * -1.999996000008e-6) = tanh(-9.99998000004e-6) = -9.99997999970667e-6
    #   R = (1 - 0.2 * 9.99997999970667e-6) * 0.5 = (1 - 1.99999599994133e-6) * 0.5 = 0.499999000002
    # (eps dropped: exactly 0.5; eps in the numerator, (f_r + eps) / R_base: 0.500001)
    r = softened_frequency_rewards(["x", "y"], ["x", "y", "x", "y"])
    assert r.tolist() == pytest.approx([0.499999000002, 0.499999000002], abs=TOL)
    # with eps = 0 the ratio is exactly 1: R = R_base
    assert softened_frequency_rewards(["x", "y"], ["x", "y", "x", "y"], eps=0.0).tolist() == [0.5, 0.5]


def test_all_none_group_is_zero():
    r = softened_frequency_rewards([None, None, None], [None] * 6)
    assert r.dtype == torch.float64 and r.tolist() == [0.0, 0.0, 0.0]


def test_none_never_matches_none():
    # maternal "x" alone: the Nones count in the denominators but never as an answer
    r = softened_frequency_rewards(["x", None], [None, None])
    # R_base = 1/4 (total 4: x, None, None, None), f_r = 0/2 = 0
    #   -> (1 + 0.2 * tanh(5 * (0 - 1))) * 0.25 = (1 - 0.2 * 0.999909204262595) * 0.25
    #   = (1 - 0.199981840852519) * 0.25 = 0.20000453978687
    assert r.tolist() == pytest.approx([0.20000453978687, 0.0], abs=TOL)


def test_empty_reinference_gives_base():
    r = softened_frequency_rewards(["a", "b", "a", None], [])
    assert r.tolist() == pytest.approx([0.5, 0.25, 0.5, 0.0], abs=1e-15)


def test_empty_maternal():
    r = softened_frequency_rewards([], ["a", "b"])
    assert r.dtype == torch.float64 and r.shape == (0,)


def test_single_maternal_answer():
    assert softened_frequency_rewards(["x"], []).tolist() == [1.0]
    # total 3, R_base = 2/3, f_r = 1/2 < R_base -> damped
    #   0.5 / (0.666666666666667 + 1e-6) = 0.749998875001687; 5 * (0.749998875001687 - 1) = -1.25000562499156
    #   tanh(-1.25000562499156) = -0.848285217281243
    #   R = (1 - 0.169657043456249) * 0.666666666666667 = 0.553561971029168
    r = softened_frequency_rewards(["x"], ["x", "y"])
    assert r.tolist() == pytest.approx([0.553561971029168], abs=TOL)


def test_hashable_keys_of_any_type():
    r = softened_frequency_rewards([("frac", 1, 2), 3, 3], [3, ("frac", 1, 2), ("frac", 1, 2)])
    # (frac,1,2): R_base = 3/6 = 0.5, f_r = 2/3 (boost)
    #   0.666666666666667 / 0.500001 = 1.333330666672; 5 * 0.333330666672 = 1.66665333336
    #   tanh(1.66665333336) = 0.931107834850482 -> R = (1 + 0.186221566970096) * 0.5 = 0.593110783485048
    # 3: R_base = 3/6 = 0.5, f_r = 1/3 (damp)
    #   0.333333333333333 / 0.500001 = 0.666665333336; 5 * -0.333334666664 = -1.66667333332
    #   tanh(-1.66667333332) = -0.93111049555961 -> R = (1 - 0.186222099111922) * 0.5 = 0.406888950444039
    assert r.tolist() == pytest.approx([0.593110783485048, 0.406888950444039, 0.406888950444039], abs=TOL)


@pytest.mark.parametrize(
    "maternal, reinference, kw, expected",
    [
        # f_r = 0 everywhere: R_base = 8/48 = 1/6 -> (1 - 0.2 * tanh(5)) / 6
        #   = (1 - 0.199981840852519) * 0.166666666666667 = 0.133336359857913
        (["a"] * 8, [None] * 40, {}, [0.133336359857913] * 8),
        # R_base = 48/48 = 1, f_r = 40/40 = 1, eps = 0 -> tanh(0) = 0 -> R = 1
        (["a"] * 8, ["a"] * 40, {"eps": 0.0}, [1.0] * 8),
        # beta * x overflows to +-inf -> tanh saturates at -+1:
        # a: R_base = 1/1002, f_r = 0 -> (1 - 0.2) / 1002 = 0.000798403193612774
        # b: R_base = 1001/1002, f_r = 1 > R_base -> (1 + 0.2) * 1001/1002 = 1.19880239520958
        (["a", "b"], ["b"] * 1000, {"eps": 0.0, "beta": 1e308}, [0.000798403193612774, 1.19880239520958]),
        # gamma = beta = 0: R = R_base; a: (1 + 1)/3 = 0.666666666666667
        (["a", None], ["a"], {"gamma": 0.0, "beta": 0.0}, [0.666666666666667, 0.0]),
        # huge eps: f_r / (R_base + 1e300) = 0 -> tanh(-5); R_base = 1/8
        #   -> (1 - 0.199981840852519) * 0.125 = 0.100002269893435
        (["a", "b", "c"], ["d"] * 5, {"eps": 1e300}, [0.100002269893435] * 3),
    ],
)
def test_extreme_cases(maternal, reinference, kw, expected):
    r = softened_frequency_rewards(maternal, reinference, **kw)
    assert torch.isfinite(r).all()
    assert r.tolist() == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize(
    "kw", [{"gamma": -0.1}, {"gamma": float("nan")}, {"beta": float("inf")}, {"beta": -1.0}, {"eps": -1e-6}, {"gamma": "x"}]
)
def test_bad_params_raise(kw):
    with pytest.raises(ValueError):
        softened_frequency_rewards(["a"], ["a"], **kw)


def test_frequency_counts_skips_none():
    assert frequency_counts(["a", None, "a", "b", None]) == {"a": 2, "b": 1}
