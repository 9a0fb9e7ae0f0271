"""CSRS equations (seed 003) against independent plain-Python references, on many random vectors and edge cases.

Eq. 7: R_base(a) = f_base(a) = Count(a, A_all) / ((m + 1) n)
Eq. 8: R_final = (gamma tanh(beta (f_r / (f_base + eps) - 1)) + 1) R_base,  f_r = Count(a, A_m) / (m n)
RRM:   the anchor of a response of L tokens is floor(omega L), omega read as the decimal the user wrote.
MM-UPT baseline: reward 1 for an answer equal to the group's mode (first seen on ties), 0 otherwise / no answer.

The references share no code with mmevo: they count with list.count and loop in plain Python."""

import math
import random
from fractions import Fraction

import numpy as np
import pytest
import torch
from PIL import Image

from mmevo.csrs.perturb import perturb_image
from mmevo.csrs.retrace import anchor_position, anchor_prefixes
from mmevo.rewards.majority import majority_vote_rewards
from mmevo.rewards.sfr import softened_frequency_rewards

TOL = 1e-12


# -- references --------------------------------------------------------------------------------------------------
def ref_count(a, answers):
    """Count(a, A): occurrences of the answer a; a missing answer (None) matches nothing."""
    return sum(1 for x in answers if x is not None and x == a)


def ref_sfr(maternal, reinference, gamma=0.2, beta=5.0, eps=1e-6):
    n, mn = len(maternal), len(reinference)
    everything = list(maternal) + list(reinference)  # A_all, (m + 1) n answers
    out = []
    for a in maternal:
        if a is None:
            out.append(0.0)
            continue
        f_base = ref_count(a, everything) / len(everything)  # Eq. 7
        if mn == 0:  # no re-inference frequency to calibrate with
            out.append(f_base)
            continue
        f_r = ref_count(a, reinference) / mn
        out.append((gamma * math.tanh(beta * (f_r / (f_base + eps) - 1)) + 1) * f_base)  # Eq. 8
    return out


def ref_majority(keys):
    """keys: one answer per sample (None = no answer) of ONE group -> 0/1 rewards."""
    seen = [k for k in keys if k is not None]
    if not seen:
        return [0.0] * len(keys)
    best = max(seen.count(k) for k in seen)
    mode = next(k for k in seen if seen.count(k) == best)
    return [1.0 if k is not None and k == mode else 0.0 for k in keys]


def random_answers(rng, size, alphabet, none_share):
    return [None if rng.random() < none_share else rng.choice(alphabet) for _ in range(size)]


# -- SFR ---------------------------------------------------------------------------------------------------------
def test_sfr_matches_the_reference_on_600_random_groups():
    rng = random.Random(20)
    for case in range(600):
        n, m = rng.randint(1, 10), rng.randint(0, 7)
        alphabet = [f"a{i}" for i in range(rng.randint(1, 6))]
        none_share = rng.choice([0.0, 0.0, 0.2, 0.6, 1.0])
        mat = random_answers(rng, n, alphabet, none_share)
        re = random_answers(rng, m * n, alphabet, none_share)
        gamma = rng.choice([0.2, 0.0, 0.05, 0.35, 1.0, rng.random()])
        beta = rng.choice([5.0, 0.0, 3.5, 8.0, 50 * rng.random()])
        eps = rng.choice([1e-6, 0.0, 1e-3])
        got = softened_frequency_rewards(mat, re, gamma, beta, eps)
        want = ref_sfr(mat, re, gamma, beta, eps)
        assert got.dtype == torch.float64 and got.shape == (n,)
        for g, w in zip(got.tolist(), want):
            assert abs(g - w) <= TOL, (case, mat, re, gamma, beta, eps, got, want)


@pytest.mark.parametrize("mat, re", [
    (["x"], []),  # n = 1, m = 0
    (["x"], ["x"]),  # n = 1, m = 1, all the same
    (["x"] * 8, ["x"] * 40),  # all-same answers: f_r = 1, f_base = 1 -> tanh(beta (1 / (1 + eps) - 1)) ~ 0
    (["x", "y"], ["y", "y"]),  # a tie in the maternal set broken by re-inference
    ([None, None], [None] * 4),  # nothing parsable
    (["x", None], [None, None]),  # one answer, unparsable re-inferences still in the denominator
    (["x", "y", "z"], ["w"] * 6),  # re-inference never agrees with any maternal answer: f_r = 0
    ([1, 1.0, Fraction(1)], [2, 2, 2]),  # Python's equality: 1 == 1.0 == Fraction(1) is one answer (a bool key is refused)
])
def test_sfr_edge_cases_match_the_reference(mat, re):
    got = softened_frequency_rewards(mat, re).tolist()
    assert got == pytest.approx(ref_sfr(mat, re), abs=TOL)


def test_sfr_hand_computed_numbers():
    # n = 2, m = 2: A_all = {x, y, x, x, y, y}; x: f_base = 3/6, f_r = 2/4 -> tanh(5 (0.5/(0.5 + 1e-6) - 1)) ~ -1e-5
    got = softened_frequency_rewards(["x", "y"], ["x", "x", "y", "y"]).tolist()
    tanh = math.tanh(5 * (0.5 / (0.5 + 1e-6) - 1))
    assert got == pytest.approx([(0.2 * tanh + 1) * 0.5] * 2, abs=TOL)
    # f_r = 0 saturates at (1 - gamma tanh(beta)) R_base: 1 answer of 6, 0.2 tanh(-5 * (0/(1/6 + 1e-6) - 1)) ...
    got = softened_frequency_rewards(["x", "y"], ["y"] * 4).tolist()
    assert got[0] == pytest.approx((0.2 * math.tanh(-5.0) + 1) / 6, abs=TOL)


def test_sfr_long_group_matches_the_reference():
    rng = random.Random(7)
    mat = random_answers(rng, 64, list("abcdefg"), 0.1)
    re = random_answers(rng, 64 * 16, list("abcdefg"), 0.1)
    assert softened_frequency_rewards(mat, re).tolist() == pytest.approx(ref_sfr(mat, re), abs=TOL)


@pytest.mark.parametrize("kwargs, name", [({"gamma": float("nan")}, "gamma"), ({"beta": float("inf")}, "beta"),
                                          ({"eps": -1.0}, "eps"), ({"gamma": True}, "gamma")])
def test_sfr_bad_hyperparameters_are_named(kwargs, name):
    with pytest.raises(ValueError, match=name):
        softened_frequency_rewards(["x"], ["x"], **kwargs)


def test_sfr_nan_key_is_named():
    with pytest.raises(ValueError, match=r"reinference\[1\] is NaN"):
        softened_frequency_rewards([1.0], [1.0, float("nan")])


# -- RRM anchor --------------------------------------------------------------------------------------------------
def ref_anchor(length, omega_text):
    return (Fraction(omega_text) * length).numerator // (Fraction(omega_text) * length).denominator


def test_anchor_position_is_floor_omega_len_on_600_random_cases():
    rng = random.Random(3)
    for _ in range(600):
        digits = rng.randint(1, 4)
        omega_text = f"{rng.randint(0, 10 ** digits) / 10 ** digits:.{digits}f}"
        length = rng.choice([0, 1, 2, 3, 7, 10, 100, rng.randint(0, 5000)])
        assert anchor_position(length, float(omega_text)) == ref_anchor(length, omega_text), (length, omega_text)


@pytest.mark.parametrize("length, omega, want", [(10, 0.7, 7), (100, 0.29, 29), (0, 0.7, 0), (1, 0.7, 0), (5, 0.0, 0),
                                                 (5, 1.0, 5), (3, 1 / 3, 0), (1000, 0.7, 700)])
def test_anchor_position_edges(length, omega, want):
    # 0.29 * 100 is 28.999999999999996 in floats; the paper's floor(omega len) of the written 0.29 is 29
    assert anchor_position(length, omega) == want


def test_anchor_prefixes_cut_each_response_at_its_own_length():
    rng = random.Random(5)
    responses = [[rng.randint(0, 99) for _ in range(rng.randint(0, 40))] for _ in range(50)]
    omegas = [rng.choice([0.1, 0.3, 0.5, 0.7, 0.9, 0.0, 1.0]) for _ in responses]
    got = anchor_prefixes(responses, omegas)
    for r, w, g in zip(responses, omegas, got):
        assert g == r[: ref_anchor(len(r), repr(w))]


@pytest.mark.parametrize("omega", [-0.1, 1.5, float("nan"), float("inf"), True, "0.7"])
def test_anchor_position_rejects_a_rate_outside_0_1(omega):
    with pytest.raises(ValueError, match="omega"):
        anchor_position(10, omega)


# -- VSP ---------------------------------------------------------------------------------------------------------
def test_vsp_noise_is_gaussian_with_the_given_sigma_and_sigma_0_is_identity():
    img = Image.fromarray(np.full((64, 64, 3), 128, dtype=np.uint8))
    out = np.asarray(perturb_image(img, 10.0, seed=1), dtype=np.float64) - 128.0
    assert abs(out.mean()) < 0.2 and abs(out.std() - 10.0) < 0.2  # rounding adds variance 1/12: 10.004
    assert np.array_equal(np.asarray(perturb_image(img, 0.0, seed=1)), np.asarray(img))


# -- MM-UPT majority vote ----------------------------------------------------------------------------------------
def test_majority_vote_matches_the_reference_on_500_random_batches():
    rng = random.Random(11)
    for case in range(500):
        n_groups, size = rng.randint(1, 4), rng.randint(1, 9)
        keys, groups = [], []
        for g in range(n_groups):
            keys += random_answers(rng, size, [str(i) for i in range(rng.randint(1, 4))], rng.choice([0.0, 0.3, 1.0]))
            groups += [g] * size
        order = list(range(len(keys)))
        rng.shuffle(order)  # interleaved groups
        keys, groups = [keys[i] for i in order], [groups[i] for i in order]
        responses = ["no final answer here" if k is None else f"so the answer is \\boxed{{{k}}}" for k in keys]
        got, _ = majority_vote_rewards(responses, groups)
        want = [0.0] * len(keys)
        for g in set(groups):
            idx = [i for i, x in enumerate(groups) if x == g]
            for i, r in zip(idx, ref_majority([keys[i] for i in idx])):
                want[i] = r
        assert got.tolist() == want, (case, keys, groups)


@pytest.mark.parametrize("mat, re, name", [(None, [], "maternal"), (["x"], None, "reinference"), (3, [], "maternal")])
def test_sfr_names_an_answer_list_that_is_no_list(mat, re, name):
    # a TypeError "'NoneType' object is not iterable" named neither argument
    with pytest.raises(ValueError, match=f"{name} must be a list"):
        softened_frequency_rewards(mat, re)


def test_sfr_head_scores_maternal_responses_by_eq_7_8_and_reinferences_0():
    # end to end from response texts: equivalent spellings (0.5, \frac{1}{2}) are one answer, no \boxed is no answer
    from mmevo.rewards.heads import ScoredSample, SFRHead

    rng = random.Random(12)
    spell = {"half": ["0.5", "\\frac{1}{2}", "1/2"], "two": ["2", "2.0"], "x": ["x+1"], None: None}
    for case in range(60):
        samples, keys, roles, groups = [], [], [], []
        for g in range(rng.randint(1, 3)):
            n, m = rng.randint(1, 4), rng.randint(0, 3)
            for role, count in (("maternal", n), ("reinference", n * m)):
                for _ in range(count):
                    k = rng.choice(list(spell))
                    text = "no answer" if k is None else f"\\boxed{{{rng.choice(spell[k])}}}"
                    samples.append(ScoredSample(text, g, None, None, role=role))
                    keys.append(k), roles.append(role), groups.append(g)
        got, _ = SFRHead().score(samples)
        want = [0.0] * len(samples)
        for g in set(groups):
            mat = [i for i in range(len(samples)) if groups[i] == g and roles[i] == "maternal"]
            re = [i for i in range(len(samples)) if groups[i] == g and roles[i] != "maternal"]
            for i, r in zip(mat, ref_sfr([keys[i] for i in mat], [keys[i] for i in re])):
                want[i] = r
        assert got.tolist() == pytest.approx(want, abs=1e-7), case  # the head returns float32
