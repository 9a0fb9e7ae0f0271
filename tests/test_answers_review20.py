"""Review 20 of the trainer's answer matching (the accuracy reward with a gold, the label-free vote's answer classes).

Seven known defects, each now fixed:
1. On a choice row, a letter with its own option's value spelled with a one-digit argument without braces ("C
   (5\\sqrt3)", "D (\\frac{2\\sqrt2}{5})") or another exact form ("C (\\sqrt{75})") named no option: the value was
   compared by spelling only. 12 of 3,024 boxed (letter, option value, spelling) answers on the ten shared rows were
   scored wrong, 1 now ("\\text{C}\\ \\sqrt{75}": after a bare space the value is still compared by spelling). And "(C) 5\\sqrt3 or 5\\sqrt2" (a letter listing another option's value without braces) was
   read by its letter, right on the gold C.
2. A repeating decimal ("6.\\overline{6}", "0.\\bar{3}", "0.1\\dot{6}") was no number: wrong against 20/3.
3. Without options, a letter label before a right value ("\\text{(A) } 2\\sqrt{3}") hid the value.
4. A superscript sign is a charge: "2^{+}" is +2, so 2 (it was read as the bound "2 or more"); "2^{-}" is -2, not 2
   (it was 2). A trailing plain sign stays a bound against a bare number ("2+", "2-" are not 2); all spellings of one
   signed count are one answer ("2+", "+2", "2^{+}").
5. "1 \\approx 2" was read as its left side, right on the gold 1; sides of an approximation now name one answer only
   when they agree to the approximation's last digit (both sides are then readings: "5\\sqrt{3} \\approx 8.66").
6. Unicode "∨" / "∧" / "∪" / "∩" / "≈" (and "≥ ≤ ≠ ± π × · ÷ ∞", full-width digits) are the LaTeX commands.
7. "x = 2 (x > 0)", a value with its condition as an aside, was no answer (the fallback read the aside's 0); so was
   "x = 2 \\text{ (since } x > 0)" and "4 \\text{ (n is a positive integer)}" (the aside's words read as symbols).
"""

from __future__ import annotations

import pytest

from datapaths import shared
from mmevo.data.benchmarks import load_items
from mmevo.eval.runner import scorer_for
from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import answers_equivalent, extract_answer, group_answer_keys


@pytest.fixture(scope="module")
def rows() -> dict:
    items, _ = load_items("intergps", shared("geometry3k_samples", "Geometry3K InterGPS sample rows"))
    return {it.id: it for it in items}


def _verdicts(item, response: str) -> tuple[bool, float]:
    """(``mmevo eval``'s verdict, the trainer's accuracy reward) for ``response`` on ``item``."""
    _, correct = scorer_for("intergps")(response, item)
    return correct, float(accuracy_rewards([response], [item.answer], [item.choices])[0])


@pytest.mark.parametrize("box, right", [
    ("C (5\\sqrt3)", True), ("C, 5\\sqrt3", True), ("C - 5\\sqrt3", True), ("\\text{C}\\ 5\\sqrt3", True),
    ("C (\\sqrt{75})", True), ("C, \\sqrt{75}", True), ("C (5√3)", True),
    ("B (5\\sqrt3)", False), ("C (5\\sqrt2)", False), ("C (\\sqrt{50})", False), ("B (5\\sqrt2)", False),
    ("D (\\sqrt{75})", False), ("C (5\\sqrt{3})", True), ("C", True), ("\\text{A}\\ x", False),
    # a letter listing another option's value without braces: "5\\sqrt2" was no spelling of the option "5 \\sqrt { 2 }",
    # so the letter decided and the hedge scored right
    ("(C) 5\\sqrt3 or 5\\sqrt2", False), ("(C) 5\\sqrt3, 5\\sqrt2", False), ("(C) \\frac12 or 5\\sqrt2", False),
])
def test_a_letter_with_its_own_value_in_any_exact_spelling(rows, box, right):
    # problem 15: 5 / 5√2 / 5√3 / 10, gold C (the brief's "D (5\sqrt3)" is this shape)
    assert _verdicts(rows["15"], "\\boxed{" + box + "}") == (right, float(right))


@pytest.mark.parametrize("box, right", [
    ("D (\\frac{2\\sqrt2}{5})", True), ("D, \\frac{2\\sqrt2}{5}", True), ("\\text{D}\\ \\frac{2\\sqrt2}{5}", True),
    ("D (\\dfrac{2\\sqrt{2}}{5})", True), ("D (\\frac{\\sqrt2}{5})", False), ("B (\\frac{2\\sqrt2}{5})", False),
])
def test_a_letter_with_its_own_fraction(rows, box, right):
    assert _verdicts(rows["19"], "\\boxed{" + box + "}") == (right, float(right))


@pytest.mark.parametrize("box, gold, right", [
    ("6.\\overline{6}", "\\frac{20}{3}", True), ("0.\\overline{3}", "\\frac{1}{3}", True),
    ("1.2\\overline{34}", "\\frac{611}{495}", True), ("0.\\dot{3}", "\\frac{1}{3}", True),
    ("6.66", "\\frac{20}{3}", False), ("6.\\overline{6}", "6.66", False),
])
def test_a_repeating_decimal_is_exact(box, gold, right):
    assert accuracy_rewards(["\\boxed{" + box + "}"], [gold]).tolist() == [float(right)]


@pytest.mark.parametrize("box, right", [
    ("\\text{(A) } 2\\sqrt{3}", True), ("(A) 2\\sqrt{3}", True), ("A. 2\\sqrt{3}", True), ("(A)", False),
    ("(A) 3\\sqrt{2}", False), ("(A) 2\\sqrt{3} \\text{ or } (B) 3", False),
])
def test_a_label_before_a_value_without_options(box, right):
    assert accuracy_rewards(["\\boxed{" + box + "}"], ["2\\sqrt{3}"]).tolist() == [float(right)]


def test_a_label_with_options_is_still_read_as_a_letter():
    choices = ["2\\sqrt{3}", "3\\sqrt{2}", "4", "6"]
    assert accuracy_rewards(["\\boxed{(B) 2\\sqrt{3}}"], ["A"], [choices]).tolist() == [0.0]  # names A and B
    assert accuracy_rewards(["\\boxed{(A) 2\\sqrt{3}}"], ["A"], [choices]).tolist() == [1.0]


@pytest.mark.parametrize("pred, gold, right", [
    ("2^{+}", "2", True), ("2^+", "2", True), ("\\boxed{2^{+}}", "2", True), ("2+", "2", False), ("2-", "2", False),
    ("2^{-}", "2", False), ("2^{-}", "-2", True), ("2-", "-2", True), ("2^{+}", "2+", True), ("+2", "2^{+}", True),
    ("2^{+}", "3", False), ("2^{-}", "2^{+}", False), ("2", "2+", False), ("2", "2^{+}", True),
])
def test_a_superscript_sign_is_a_charge(pred, gold, right):
    assert answers_equivalent(extract_answer(pred) or pred, gold) is right


@pytest.mark.parametrize("box, gold, right", [
    ("1 \\approx 2", "1", False), ("1 \\approx 2", "2", False), ("1 ≈ 2", "1", False), ("x \\approx 2", "2", True),
    ("\\frac{20}{3} \\approx 6.67", "\\frac{20}{3}", True), ("\\frac{20}{3} \\approx 6.67", "6.67", True),
    ("\\pi \\approx 4", "\\pi", False), ("2.5 \\approx 2", "2", False),
])
def test_an_approximation_must_agree_with_its_value(box, gold, right):
    assert accuracy_rewards(["\\boxed{" + box + "}"], [gold]).tolist() == [float(right)]


@pytest.mark.parametrize("box, gold, right", [
    ("1 ∨ 2", "1", False), ("1 ∨ 2", "1, 2", True), ("1 ∧ 2", "1, 2", True), ("x=1 ∨ x=2", "1, 2", True),
    ("１２", "12", True), ("x ≥ 2", "2", False),
])
def test_unicode_connectives_are_the_latex_ones(box, gold, right):
    assert accuracy_rewards(["\\boxed{" + box + "}"], [gold]).tolist() == [float(right)]


@pytest.mark.parametrize("box, gold, right", [
    ("x = 2 (x > 0)", "2", True), ("x = 2 (x > 0)", "0", False), ("x = 2 \\text{ (since } x > 0)", "2", True),
    ("4 \\text{ (n is a positive integer)}", "4", True), ("2 (x = 3)", "2", False), ("2 (x = 3)", "3", False),
    ("2 (> 0)", "2", False),
])
def test_a_value_with_its_condition(box, gold, right):
    assert accuracy_rewards(["\\boxed{" + box + "}"], [gold]).tolist() == [float(right)]


def test_ordinary_classes_are_unchanged_and_new_readings_vote_with_their_value():
    answers = ["5", "5 \\text{ cm}", "x = 5 (x > 0)", "6.\\overline{6}", "\\frac{20}{3}", "1 \\approx 2", "1", "2",
               "2^{+}", "１２", "12"]
    keys = group_answer_keys(answers)
    assert keys[0] == keys[1] == keys[2]
    assert keys[3] == keys[4] != keys[0]
    assert keys[5] not in (keys[6], keys[7])
    assert keys[8] == keys[7]
    assert keys[9] == keys[10]
