"""Review 20b of review 20's answer matching (the accuracy reward with a gold, the label-free vote's answer classes).

Five reward hacks the review-20 rules left open, each now fixed:
1. A value with an aside in words was read as that value alone whenever the aside gave no other "= result", so an
   aside naming a second value in words scored right: "2 (and 3)", "2 (another root: 3)", "2 (x > 0, else 3)",
   "2 \\text{ (the other root is } 3)" all matched the gold 2 (they did not at 902a838), and "2 (also 3; 1+1=2)" did
   at 902a838 already (math-verify's fallback took a closing "= 2" as the value restated). An aside's numbers must now
   sit in conditions ("x > 0", "x >= 0"), a name's index ("x_1") or a derivation of the value ("since 2+3", "3
   \\times 4 = 12", "3! = 6"), or restate it ("Mg^{2+}"). Asides with numbers in words ("10 cm (radius 5)", "3 (to 1
   d.p.)") are no longer read as their value, as at 902a838.
2. An approximation chain was checked only between neighbours, so rounding twice drifted: "1.45 \\approx 1.5
   \\approx 2" matched the gold 2 though 1.45 rounds to 1 (likewise "6.45 \\approx 6.5 \\approx 7" the gold 7). Every
   pair of sides must now agree.
3. A chain of more than four sides was compared whole, where math-verify reads its first side: "1 \\approx 2 \\approx
   3 \\approx 4 \\approx 5" matched the gold 1. It now names no answer.
4. A number beside a side that is no closed-form number was compared whole, read as its first side: "1 \\approx 2x",
   "1 \\approx 2\\%", "1 \\approx \\{2\\}" matched the gold 1. It now names no answer, except that a percentage is
   its fraction ("\\frac{1}{3} \\approx 33.3\\%" stays right), a braced number its content ("2 \\approx{2}") and
   the value after any name and "=" is the side ("m\\angle A = ...", "\\overline{AB} = ...", "P(A) = ..."; the
   name "m\\angle A" was read as "m").
5. Rounding compared magnitudes, so a complex value agreed with its modulus: "\\sqrt{-4} \\approx 2" matched the gold 2.
Checked and found right: 4,375 generated (pred, gold, options) pairs of ordinary answers against 902a838 (23 verdicts
changed, each an intended one), 400 vote groups of ordinary answers (no class changed), 2,000 accuracy checks (2.2 s
at 902a838, 1.1 s now) and 20,000-character inputs of each new syntax (at most 0.24 s for a group of four, linear).
"""

from __future__ import annotations

import pytest

from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import _approximate_sides, answers_equivalent, group_answer_keys


def _reward(box: str, gold: str) -> float:
    return float(accuracy_rewards(["So \\boxed{" + box + "}."], [gold])[0])


@pytest.mark.parametrize("box", [
    "2 (and 3)", "2 (another root: 3)", "2 (3 also works)", "2 (second answer 3)", "2 \\text{ (the other root is } 3)",
    "2 \\text{ (also } 3)", "2 (x > 0, \\text{else } 3)", "2 (if x > 0; otherwise 3)", "2 (x>0; x<0 gives 3)",
    "2 (also 3; 1+1=2)", "2 (and 3, since 1+1=2)", "2 (3 + 0 \\text{ also})",
])
def test_an_aside_naming_another_value_in_words_is_a_hedge(box):
    assert _reward(box, "2") == 0.0


@pytest.mark.parametrize("box, gold", [
    ("x = 2 (x > 0)", "2"), ("x = 2 (x >= 0)", "2"), ("x = 2 (x \\geq 0)", "2"), ("2 (n \\neq 3)", "2"),
    ("4 \\text{ (n is a positive integer)}", "4"), ("5 \\text{ (since } 2+3=5)", "5"), ("x=3 (since x>0)", "3"),
    ("12 (3 \\times 4 = 12)", "12"), ("48 \\text{ m}^2 \\text{ (approx.)}", "48"), ("12 (3 \\times 4)", "12"),
    ("5 (\\text{since } 2 + 3)", "5"), ("2 (\\text{since } 5 - 3)", "2"), ("6 \\text{ (} 3! = 6)", "6"),
    ("4 \\text{ (x}_1 = 4)", "4"), ("2 \\text{ (the ion is Mg}^{2+})", "2"), ("6 \\text{ (approx. } 6.0)", "6"),
])
def test_a_value_with_its_condition_or_derivation_is_still_right(box, gold):
    assert _reward(box, gold) == 1.0


def test_a_derivation_of_another_value_is_no_derivation():
    assert _reward("12 (3 \\times 5)", "12") == 0.0
    assert _reward("12 (3 \\times 5)", "15") == 0.0


@pytest.mark.parametrize("box, gold", [
    ("1.45 \\approx 1.5 \\approx 2", "2"), ("1.45 \\approx 1.5 \\approx 2", "1.45"),
    ("6.45 \\approx 6.5 \\approx 7", "7"),
])
def test_rounding_twice_is_no_approximation(box, gold):
    assert _reward(box, gold) == 0.0


@pytest.mark.parametrize("box, gold", [
    ("\\frac{20}{3} \\approx 6.67 \\approx 6.7", "6.7"), ("\\frac{20}{3} \\approx 6.667 \\approx 6.67", "\\frac{20}{3}"),
    ("5\\sqrt{3} \\approx 8.66 \\approx 9", "9"), ("1.55 \\approx 1.6 \\approx 2", "2"),
])
def test_a_chain_of_agreeing_roundings_is_still_right(box, gold):
    assert _reward(box, gold) == 1.0


def test_a_long_chain_names_no_answer():
    for gold in ("1", "3", "5"):
        assert _reward(" \\approx ".join("12345"), gold) == 0.0
    assert _approximate_sides(" \\approx ".join(["1"] * 300)) == ()  # refused before any parse


@pytest.mark.parametrize("box", ["1 \\approx 2x", "1 \\approx 2\\%", "1 \\approx 2 + x", "1 \\approx \\{2\\}",
                                 "1 \\approx{2}", "x \\le 1 \\approx 1.0"])
def test_a_number_beside_no_number_is_a_hedge(box):
    assert _reward(box, "1") == 0.0


@pytest.mark.parametrize("box, gold", [
    ("\\frac{1}{2} \\approx 50\\%", "0.5"), ("50\\% \\approx 0.5", "0.5"), ("\\frac{1}{3} \\approx 33.3\\%", "\\frac{1}{3}"),
    ("2 \\approx{2}", "2"), ("2\\pi \\approx 6.28", "2\\pi"), ("2\\pi r \\approx 6.28r", "2\\pi r"),
    ("\\sqrt{2} \\approx 1.41 \\text{ cm}", "\\sqrt{2}"), ("x \\approx 2", "2"), ("m\\angle ABC \\approx 30", "30"),
    # the name "m\\angle A" was read as "m", so its side held no number (a hedge by the rule above)
    ("m\\angle A = \\frac{20}{3} \\approx 6.67", "\\frac{20}{3}"), ("m\\angle A = 5\\sqrt{3}^\\circ \\approx 8.66^\\circ", "8.66"),
    # any name before "=" ("\\overline{AB}", "P(A)", "\\theta", "AB = BC") is dropped, not only a plain one
    ("\\overline{AB} = 5\\sqrt{3} \\approx 8.66", "5\\sqrt{3}"), ("P(A) = \\frac{1}{3} \\approx 0.33", "\\frac{1}{3}"),
    ("\\theta = \\frac{\\pi}{3} \\approx 1.05", "1.05"), ("AB = BC = 5\\sqrt{3} \\approx 8.66", "5\\sqrt{3}"),
])
def test_percentages_braces_and_symbols_beside_their_approximation_are_still_right(box, gold):
    assert _reward(box, gold) == 1.0


def test_percentages_are_rounded_in_their_own_digits():
    assert answers_equivalent("\\frac{1}{3} \\approx 33\\%", "33\\%")
    assert not answers_equivalent("\\frac{1}{3} \\approx 40\\%", "\\frac{1}{3}")


def test_a_complex_value_is_not_its_modulus():
    # rounding compared magnitudes: |2i| = 2, so "\\sqrt{-4} \\approx 2" named the answer 2
    assert _reward("\\sqrt{-4} \\approx 2", "2") == 0.0
    assert _reward("\\sqrt{-4} \\approx 2", "2i") == 0.0
    assert _reward("x \\approx 2", "2") == 1.0


def test_hedges_do_not_join_the_class_of_either_value():
    answers = ["2", "2 (and 3)", "3", "1.45 \\approx 1.5 \\approx 2", "1 \\approx 2x", "x = 2 (x > 0)"]
    keys = group_answer_keys(answers)
    assert keys[5] == keys[0]
    assert len({keys[0], keys[1], keys[2]}) == 3
    assert keys[3] != keys[0] and keys[4] != keys[0]
