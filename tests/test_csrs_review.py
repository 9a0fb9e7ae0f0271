"""Review of CSRS against the paper: SFR (Eq. 7-8) on realistic answer spellings, anchor (Eq. 6) and noise (Eq. 9)
boundary cases, majority-vote baseline rules.

Every expected number is derived by hand from the paper, never read off the code:

    Eq. 6: anchor = floor(omega * len(R_p)) tokens of the maternal response R_p
    Eq. 7: R_base(a) = Count(a, A_all) / ((m + 1) n),   A_all = A_n (maternal) + A_m (re-inference)
    Eq. 8: R = (gamma * tanh(beta * (f_r / (f_base + eps) - 1)) + 1) * R_base,   f_r = Count(a, A_m) / (m n)

with gamma = 0.2, beta = 5.0 (Table 2 optimum) and eps = 1e-6. "Count(a, .)" counts an ANSWER, so two spellings of
one value (a number with and without its unit) are one answer and must be counted together.
"""

import math
import random

import numpy as np
import pytest
from PIL import Image

from mmevo.csrs.perturb import perturb_image
from mmevo.csrs.retrace import anchor_position, anchor_prefixes, sample_omegas
from mmevo.rewards.answers import canonical_answer, extract_answer, group_answer_keys
from mmevo.rewards.heads import ScoredSample, SFRHead
from mmevo.rewards.majority import majority_vote_rewards
from mmevo.rewards.sfr import softened_frequency_rewards

TOL = 1e-9


def _box(ans):
    return f"<think>reasoning</think> The answer is \\boxed{{{ans}}}."


def _sfr_group(maternal, reinference, choices=None):
    samples = [ScoredSample(_box(a), 0, None, choices, False, "maternal", -1, None) for a in maternal]
    samples += [ScoredSample(_box(a), 0, None, choices, False, "reinference", 0, None) for a in reinference]
    r, _ = SFRHead().score(samples)
    return r[: len(maternal)].double().tolist()


# ------------------------------------------------------------------ one answer, several spellings (Count in Eq. 7)

@pytest.mark.parametrize("bare, spelled", [
    # "~" is LaTeX's non-breaking space; "\mathrm{~cm}" is how Qwen-style models write units on GeoQA / Geometry3K
    (r"4\sqrt{3}", r"4\sqrt{3} \mathrm{~cm}"),
    (r"4\sqrt{3}", r"4\sqrt{3}~\text{cm}"),
    # a unit after pi (circle areas / circumferences of Geometry3K)
    (r"12\pi", r"12 \pi \text{ cm}^2"),
    (r"12\pi", r"12\pi \mathrm{~cm}^{2}"),
    (r"\frac{16}{3}\pi", r"\frac{16}{3} \pi \mathrm{~cm}^{2}"),
    # a sentence period after the unit, inside the box
    ("12", r"12 \text{ cm}^2."),
    (r"4\sqrt{3}", r"4\sqrt{3}\text{ cm}."),
    ("10", r"10 \text{ m}."),
])
def test_a_unit_spelling_is_the_same_answer(bare, spelled):
    assert extract_answer(_box(spelled)) == spelled
    keys = group_answer_keys([bare, spelled])
    assert keys[0] is not None and keys[0] == keys[1]
    assert canonical_answer(spelled) == canonical_answer(bare)


@pytest.mark.parametrize("latex, typed", [
    ("-5", "\u22125"),  # U+2212, the typeset minus sign
    (r"-\frac{1}{2}", "\u2212\\frac{1}{2}"),
    (r"5\sqrt{2}", "5\u221a2"),  # U+221A, the radical sign
    (r"2\sqrt{3}", "2\u221a(3)"),
    (r"\sqrt{x}", "\u221a{x}"),
    (r"\frac{\sqrt{2}}{2}", "\u221a2/2"),
])
def test_unicode_minus_and_radical_are_their_latex_spelling(latex, typed):
    keys = group_answer_keys([latex, typed, "7"])
    assert keys[0] is not None and keys[0] == keys[1] != keys[2]
    assert canonical_answer(typed) == canonical_answer(latex) or latex.startswith(r"\frac")


def test_a_radical_keeps_its_argument():
    keys = group_answer_keys(["5\u221a2", r"5\sqrt{3}", "\u221a12", r"2\sqrt{3}"])
    assert keys[0] != keys[1] and keys[2] == keys[3] != keys[1]


def test_sfr_counts_unit_spellings_as_one_answer():
    # n = 2 maternal, m = 1 re-inference each (A_all has (m + 1) n = 4 answers):
    #   maternal  4\sqrt{3}, 4\sqrt{3} \mathrm{~cm}     re-inference  4\sqrt{3}\text{ cm}., 6
    # all three 4\sqrt{3} spellings are one answer X:
    #   R_base(X) = Count(X, A_all) / 4 = 3/4,   f_r(X) = Count(X, A_m) / 2 = 1/2
    #   f_r / (R_base + eps) - 1 = 0.5 / 0.750001 - 1 = 0.666665777779 - 1 = -0.333334222221
    #   tanh(5 * -0.333334222221) = tanh(-1.666671111) = -0.9311102
    #   R = (1 - 0.2 * 0.9311102) * 0.75 = 0.8137780 * 0.75 = 0.6103335
    # (old code split the spellings: R_base 1/4 and 1/4 instead of 3/4 for both)
    r = _sfr_group([r"4\sqrt{3}", r"4\sqrt{3} \mathrm{~cm}"], [r"4\sqrt{3}\text{ cm}.", "6"])
    expected = (1 + 0.2 * math.tanh(5.0 * (0.5 / (0.75 + 1e-6) - 1.0))) * 0.75
    assert expected == pytest.approx(0.61033347, abs=1e-8)
    assert r == pytest.approx([expected, expected], abs=1e-6)  # the head returns float32


def test_sfr_pi_area_with_unit_boosted_like_its_bare_spelling():
    # n = 2, m = 2 (A_all: 6 answers). maternal 12\pi \text{ cm}^2, 8; re-inference 12\pi, 12\pi, 12π, 8
    #   X = 12 pi: Count(X, A_all) = 1 + 3 = 4 -> R_base = 4/6 = 2/3; f_r = 3/4
    #     0.75 / 0.666667666667 - 1 = 1.124998312503 - 1 = 0.124998312503; tanh(0.624991562) = 0.5545939
    #     R = (1 + 0.2 * 0.5545939) * 2/3 = 1.1109188 * 0.6666667 = 0.7406125
    #   8: Count = 2 -> R_base = 1/3; f_r = 1/4
    #     0.25 / 0.333334333333 - 1 = 0.749997750007 - 1 = -0.250002249993; tanh(-1.25001125) = -0.8482868
    #     R = (1 - 0.2 * 0.8482868) / 3 = 0.8303426 / 3 = 0.2767809
    r = _sfr_group([r"12\pi \text{ cm}^2", "8"], [r"12\pi", r"12\pi", "12π", "8"])
    x = (1 + 0.2 * math.tanh(5.0 * (0.75 / (2 / 3 + 1e-6) - 1.0))) * (2 / 3)
    e = (1 + 0.2 * math.tanh(5.0 * (0.25 / (1 / 3 + 1e-6) - 1.0))) * (1 / 3)
    assert (x, e) == pytest.approx((0.7406125, 0.2767809), abs=1e-6)
    assert r == pytest.approx([x, e], abs=1e-6)


def test_choice_letter_followed_by_latex_spacing_is_that_choice():
    ch = ["30°", "40°", "50°", "60°"]
    # "(B)\ 40^\circ" and "\text{(B)}\ 40^\circ": the letter B with its text after a LaTeX space -> choice B (40°)
    for ans in (r"(B)\ 40^\circ", r"\text{(B)}\ 40^\circ", r"B.\,40^\circ"):
        assert canonical_answer(ans, ch) == canonical_answer("B", ch) == ("num", 40.0)
    # majority vote (MM-UPT): B, (B)\ 40°, 40, C, C -> B has 3 votes, C 2: the three B spellings get 1
    votes, _ = majority_vote_rewards([_box(a) for a in ["B", r"(B)\ 40^\circ", "40", "C", "C"]], [0] * 5, [ch] * 5)
    assert votes.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_what_is_not_a_unit_stays_apart():
    assert canonical_answer("10 min") == ("str", "10min")
    assert canonical_answer("5 cm^4") == ("str", "5cm^4")
    assert canonical_answer(r"\pi") == ("str", r"\pi")
    assert group_answer_keys(["2m+1", "2"])[0] != group_answer_keys(["2m+1", "2"])[1]


# ------------------------------------------------------------------ Eq. 7-8 boundary cases (hand-computed)

def test_sfr_single_maternal_single_reinference():
    # n = 1, m = 1: A_all = {a, a}: R_base = 2/2 = 1, f_r = 1/1 = 1
    #   1 / (1 + 1e-6) - 1 = -9.99999000001e-7; tanh(5 * that) = -4.99999500e-6 (tanh x ~ x here)
    #   R = 1 - 0.2 * 4.999995e-6 = 0.999999000001
    assert softened_frequency_rewards(["a"], ["a"]).tolist() == pytest.approx([0.999999000001], abs=TOL)


def test_sfr_answer_only_in_maternal_is_damped_to_the_floor():
    # n = 2, m = 2: maternal a, b; re-inference b, b, b, b. a: R_base = 1/6, f_r = 0 -> tanh(-5) = -0.999909204262595
    #   R = (1 - 0.199981840852519) / 6 = 0.133336359857913
    # b: R_base = 5/6, f_r = 1: 1 / 0.833334333333 - 1 = 0.199998560001728; tanh(0.99999280000864) = 0.7615911
    #   R = (1 + 0.1523182) * 5/6 = 0.9602652
    r = softened_frequency_rewards(["a", "b"], ["b"] * 4)
    b = (1 + 0.2 * math.tanh(5 * (1 / (5 / 6 + 1e-6) - 1))) * 5 / 6
    assert r.tolist() == pytest.approx([0.133336359857913, b], abs=TOL)
    assert b == pytest.approx(0.960265, abs=1e-6)


def test_sfr_paper_defaults_group_of_eight_by_five():
    # n = 8, m = 5 (Table 6): 48 answers. maternal: 47 x6, 52 x2; re-inference (40): 47 x20, 52 x18, none x2
    # 47: R_base = 26/48 = 0.541666666667, f_r = 20/40 = 0.5
    #     0.5 / 0.541667666667 - 1 = -0.07692478; tanh(-0.3846239) = -0.3667163; R = (1 - 0.0733433) * 0.541667 = 0.501939
    # 52: R_base = 20/48 = 0.416666666667, f_r = 18/40 = 0.45
    #     0.45 / 0.416667666667 - 1 = 0.07999741; tanh(0.3999870) = 0.3799379; R = (1 + 0.0759876) * 0.416667 = 0.448328
    mat = ["47"] * 6 + ["52"] * 2
    rein = ["47"] * 20 + ["52"] * 18 + [None] * 2
    r = softened_frequency_rewards(mat, rein)
    r47 = (1 + 0.2 * math.tanh(5 * (0.5 / (26 / 48 + 1e-6) - 1))) * 26 / 48
    r52 = (1 + 0.2 * math.tanh(5 * (0.45 / (20 / 48 + 1e-6) - 1))) * 20 / 48
    assert (r47, r52) == pytest.approx((0.501939, 0.448328), abs=1e-6)
    assert r.tolist() == pytest.approx([r47] * 6 + [r52] * 2, abs=TOL)
    # the long-tail answer 52 gains on re-inference; the ratio R(52)/R(47) exceeds Count ratio 20/26
    assert r52 / r47 > 20 / 26


# ------------------------------------------------------------------ Eq. 6 boundary cases

@pytest.mark.parametrize("length, omega, expected", [
    (1, 0.7, 0),  # floor(0.7) = 0: shorter than one token after the cut -> re-infer from the bare prompt
    (1, 0.99, 0),
    (2, 0.5, 1),
    (3, 0.1, 0),
    (1536, 0.7, 1075),  # floor(1075.2)
    (1535, 0.7, 1074),  # floor(1074.5)
    (10, 0.3, 3),
    (100, 0.29, 29),  # 0.29 * 100 = 28.999999999999996 in doubles; the paper's floor(29) is 29
    (7, 0.0, 0),
    (7, 1.0, 7),
])
def test_anchor_position_boundaries(length, omega, expected):
    assert anchor_position(length, omega) == expected


def test_anchor_prefixes_short_and_stop_only_responses():
    EOS = 2
    out = anchor_prefixes([[5, EOS], [EOS], [], [5, 6, 7, EOS]], [0.7] * 4, strip_ids={EOS})
    # own lengths 1, 0, 0, 3 -> floor(0.7), 0, 0, floor(2.1) = 0, 0, 0, 2
    assert out == [[], [], [], [5, 6]]


def test_random_anchor_omegas_are_in_the_open_unit_interval():
    ws = sample_omegas(1000, 0.7, True, random.Random(7))
    assert all(0.0 < w < 1.0 for w in ws)


# ------------------------------------------------------------------ Eq. 9 noise

def test_noise_is_additive_zero_mean_then_clipped_to_pixel_range():
    img = Image.new("RGB", (64, 64), (128, 128, 128))
    out = np.asarray(perturb_image(img, 10.0, seed=3), dtype=np.float64)
    d = out - 128.0
    assert abs(d.mean()) < 0.5 and abs(d.std() - 10.0) < 0.5  # I' = I + eps, eps ~ N(0, 10^2)
    white = np.asarray(perturb_image(Image.new("RGB", (64, 64), (255, 255, 255)), 10.0, seed=3))
    assert white.dtype == np.uint8 and white.max() == 255 and white.min() < 255
