"""CSRS (seed 003) equation vectors beyond tests/test_eq20_csrs_equations.py: the paper's own configuration
(n = 8 maternal, m = 5 re-inferences each), the limits of gamma / beta / eps, keys that Python's equality would merge
(a bool with the answer 1), the anchor cut floor(omega * len) for rates whose binary double misses the decimal, and
MM-UPT's majority vote on ties between equivalent spellings.

Eq. 7: R_base(a) = f_base(a) = Count(a, A_all) / ((m + 1) n)
Eq. 8: R_final = (gamma tanh(beta (f_r / (f_base + eps) - 1)) + 1) R_base,  f_r = Count(a, A_m) / (m n)"""

import math
import random
from fractions import Fraction

import numpy as np
import pytest
import torch

from mmevo.csrs.retrace import anchor_position, anchor_prefixes
from mmevo.grpo.algos import group_advantages
from mmevo.rewards.heads import ScoredSample, SFRHead
from mmevo.rewards.majority import majority_vote_rewards
from mmevo.rewards.sfr import softened_frequency_rewards


def eq8(count_all, count_re, n, m, gamma=0.2, beta=5.0, eps=1e-6):
    f_base = count_all / ((m + 1) * n)
    f_r = count_re / (m * n)
    return (gamma * math.tanh(beta * (f_r / (f_base + eps) - 1)) + 1) * f_base


def test_the_papers_configuration_n8_m5_by_hand():
    # A: 5 maternal + 20 re-inferences of 48; B: 2 + 15; C: 1 + 5
    maternal = ["A", "A", "A", "A", "A", "B", "B", "C"]
    reinference = ["A"] * 20 + ["B"] * 15 + ["C"] * 5
    got = softened_frequency_rewards(maternal, reinference).tolist()
    a = (0.2 * math.tanh(5.0 * ((20 / 40) / (25 / 48 + 1e-6) - 1)) + 1) * 25 / 48
    b = (0.2 * math.tanh(5.0 * ((15 / 40) / (17 / 48 + 1e-6) - 1)) + 1) * 17 / 48
    c = (0.2 * math.tanh(5.0 * ((5 / 40) / (6 / 48 + 1e-6) - 1)) + 1) * 6 / 48
    assert got == pytest.approx([a] * 5 + [b] * 2 + [c], abs=1e-15)
    # the long-tail answer B grows under re-inference (15/40 > 17/48) and is boosted, the mode A shrinks, damped
    assert b > 17 / 48 and a < 25 / 48
    assert a == pytest.approx(0.500272, abs=1e-6) and b == pytest.approx(0.374418, abs=1e-6)


def test_a_maternal_answer_no_reinference_reproduces_is_damped_by_almost_1_minus_gamma():
    got = softened_frequency_rewards(["A", "B"], ["A"] * 10).tolist()
    # B: f_base = 1/12, f_r = 0 -> tanh(-5) -> (1 - 0.2 tanh 5) / 12
    assert got[1] == pytest.approx((1 - 0.2 * math.tanh(5.0)) / 12, abs=1e-15)
    assert got[0] == pytest.approx(eq8(11, 10, 2, 5), abs=1e-15)


@pytest.mark.parametrize("kw", [{"gamma": 0.0}, {"beta": 0.0}])
def test_gamma_or_beta_zero_leave_the_base_reward(kw):
    mat, re = ["x", "y", "y", None], ["x", "x", "y", None, "z", "z", "x", "y"]
    assert softened_frequency_rewards(mat, re, **kw).tolist() == pytest.approx([4 / 12, 4 / 12, 4 / 12, 0.0],
                                                                              abs=1e-15)


def test_gamma_one_and_eps_zero():
    # gamma = 1: an answer absent from the re-inferences keeps (1 - tanh 5) of its base; eps = 0: f_r / f_base exact
    got = softened_frequency_rewards(["p", "q"], ["p", "p"], gamma=1.0, eps=0.0).tolist()
    assert got[1] == pytest.approx((1 - math.tanh(5.0)) * 1 / 4, abs=1e-15)
    assert got[0] == pytest.approx((math.tanh(5.0 * ((2 / 2) / (3 / 4) - 1)) + 1) * 3 / 4, abs=1e-15)


def test_every_answer_different_and_every_answer_equal():
    # all differ: each maternal answer is 1 of (m+1)n and absent from the re-inferences
    got = softened_frequency_rewards(["a", "b", "c"], ["d", "e", "f", "g", "h", "i"]).tolist()
    assert got == pytest.approx([(1 - 0.2 * math.tanh(5.0)) / 9] * 3, abs=1e-15)
    # all identical: f_r = f_base = 1 -> tanh(5 (1 / (1 + eps) - 1)) ~ -5e-6 -> just below 1
    got = softened_frequency_rewards(["a"] * 3, ["a"] * 6).tolist()
    assert got == pytest.approx([(0.2 * math.tanh(5.0 * (1 / (1 + 1e-6) - 1)) + 1)] * 3, abs=1e-15)
    assert all(g < 1.0 for g in got)


def test_a_bool_key_is_refused_not_counted_as_the_answer_1():
    # True == 1 == 1.0 and hashes alike: [True, 1] were one answer class with count 2
    with pytest.raises(ValueError, match=r"maternal\[0\] is the bool True"):
        softened_frequency_rewards([True, 1], [1])
    with pytest.raises(ValueError, match=r"reinference\[1\] is the bool False"):
        softened_frequency_rewards([0], [0, False])
    with pytest.raises(ValueError, match=r"maternal\[0\] is the bool True"):
        softened_frequency_rewards(torch.tensor([True, False]), [])
    with pytest.raises(ValueError, match=r"reinference\[0\] is the bool"):
        softened_frequency_rewards([1], np.array([True]))


def test_numbers_equal_in_value_are_one_answer_but_a_text_is_not():
    # 1, 1.0 and Fraction(1) are the same number; "1" is a text key, another class
    got = softened_frequency_rewards([1, 1.0, Fraction(1), "1"], []).tolist()
    assert got == pytest.approx([3 / 4, 3 / 4, 3 / 4, 1 / 4], abs=1e-15)


def test_sfr_head_equivalent_spellings_with_the_papers_shape():
    # n = 2 maternal, m = 2 re-inferences each; "1/2" and "\frac{1}{2}" are the answer 0.5
    texts = [("\\boxed{1/2}", "maternal"), ("\\boxed{3}", "maternal"),
             ("\\boxed{\\frac{1}{2}}", "reinference"), ("\\boxed{0.5}", "reinference"),
             ("\\boxed{0.50}", "reinference"), ("no box here", "reinference")]
    samples = [ScoredSample(t, 7, None, None, role=r) for t, r in texts]
    got, _ = SFRHead().score(samples)
    want = [eq8(4, 3, 2, 2), eq8(1, 0, 2, 2), 0.0, 0.0, 0.0, 0.0]
    assert got.tolist() == pytest.approx(want, abs=1e-7)
    # only maternal samples are trained on: their advantages are GRPO's over the maternal rewards alone
    adv = group_advantages(got[:2], torch.tensor([7, 7])).tolist()
    d = (want[0] - want[1]) / 2
    assert adv == pytest.approx([d / (math.sqrt(2 * d * d) + 1e-6), -d / (math.sqrt(2 * d * d) + 1e-6)], rel=1e-6)


# -- RRM anchor: floor(omega * len(R_p)) -------------------------------------------------------------------------
@pytest.mark.parametrize("length,omega,want", [
    (100, 0.29, 29),  # 0.29 * 100 = 28.999999999999996 in binary
    (100, 0.57, 57),  # 56.99999999999999
    (10, 0.7, 7), (20, 0.35, 7), (1000, 0.001, 1), (3, 0.7, 2), (1, 0.7, 0), (2, 0.5, 1),
    (10, np.float32(0.3), 3), (10, torch.tensor(0.7, dtype=torch.float32), 7), (7, Fraction(3, 7), 3),
    (10**6 + 1, 0.7, 700000), (10, 0.99, 9), (1, 0.99, 0),
])
def test_anchor_is_the_floor_of_omega_times_the_length(length, omega, want):
    assert anchor_position(length, omega) == want


def test_anchor_prefixes_random_against_the_exact_floor():
    rng = random.Random(24)
    for _ in range(400):
        omega = round(rng.uniform(0.01, 0.99), rng.choice([1, 2, 3]))
        toks = [rng.randrange(1, 50) for _ in range(rng.randint(0, 60))] + [0] * rng.randint(0, 3)
        content = len(toks)
        while content and toks[content - 1] == 0:
            content -= 1
        want = toks[:(Fraction(repr(omega)) * content).numerator // (Fraction(repr(omega)) * content).denominator]
        assert anchor_prefixes([toks], [omega], strip_ids=[0]) == [want]


# -- MM-UPT majority vote ----------------------------------------------------------------------------------------
def test_majority_vote_tie_between_equivalent_spellings_goes_to_the_first_seen_class():
    # 0.5 (as "1/2" and "0.5") and 3 (twice) tie at 2 votes; 0.5 is seen first (index 1; index 0 has no answer)
    resp = ["nothing", "\\boxed{1/2}", "\\boxed{3}", "\\boxed{3}", "\\boxed{0.5}"]
    r, m = majority_vote_rewards(resp, [0] * 5)
    assert r.tolist() == [0.0, 1.0, 0.0, 0.0, 1.0]
    assert m["pseudo_labels"] == {0: "1/2"} and m["modal_share"] == 2 / 5 and m["no_answer_frac"] == 1 / 5
    r, _ = majority_vote_rewards(list(reversed(resp)), [0] * 5)
    assert r.tolist() == [1.0, 0.0, 0.0, 1.0, 0.0]
    # interleaved groups are voted separately; a group of only unparsable answers scores 0 everywhere
    r, m = majority_vote_rewards(["\\boxed{2}", "x", "\\boxed{5}", "y", "\\boxed{5}"], [1, 2, 1, 2, 1])
    assert r.tolist() == [0.0, 0.0, 1.0, 0.0, 1.0] and m["pseudo_labels"] == {1: "5", 2: None}
