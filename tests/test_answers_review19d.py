"""Review 19d of free-form answer matching: the hedge rules of review 19c (math-verify's last-number fallback only for
an answer holding one number; a trailing "+" is the bound "2 or more") turned right answers wrong.

1. A right answer with its working in the box holds more than one number: "5 \\text{ (since } 2+3=5)",
   "12 \\text{ (} 3 \\times 4 = 12)", "48 \\text{ m}^2 \\text{ (approx.)}" (the unit's exponent counted as a number) and
   the aligned derivation "A &= 3 \\cdot 4 \\\\ &= 12" all scored 0; they scored 1 before review 19c. The fallback now
   also stands when the number it reads is the one the answer leads with or closes its derivation with, and no
   bound or second candidate ("or", "between") is offered.
2. Two spellings of one charge, "+2" and "2+" / "2^{+}", were one answer before review 19c and no longer matched.
"""

from __future__ import annotations

import pytest

from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import answers_equivalent, extract_answer, group_answer_keys

# (box content, gold): each scored 1 before review 19c and 0 after it
RIGHT_WITH_WORKING = [
    ("5 \\text{ (since } 2+3=5)", "5"), ("5 \\text{ (since } 2+3=5\\text{)}", "5"),
    ("48 \\text{ m}^2 \\text{ (approx.)}", "48"), ("3 \\text{ (x = 3)}", "3"),
    ("x=3 \\quad (\\text{since } x>0)", "3"), ("3 \\quad (\\text{since } x>0)", "3"),
    ("2 \\text{ (positive root, } x>0)", "2"), ("2 \\text{ (the ion is Mg}^{2+})", "2"),
    ("2 \\text{ (charge } 2^{+})", "2"),
    ("\\begin{aligned} A &= 3 \\cdot 4 \\\\ &= 12 \\end{aligned}", "12"),
    ("\\begin{align*} A &= 3 \\times 4 \\\\ &= 12 \\end{align*}", "12"), ("A = 3 \\cdot 4 \\\\ = 12", "12"),
    ("12 \\text{ (} 3 \\times 4 = 12 \\text{)}", "12"), ("4 \\text{ (x}_1 = 4)", "4"), ("6 \\text{ (} 3! = 6)", "6"),
    ("6 \\text{ (approx. } 6.0)", "6"),
]


@pytest.mark.parametrize("box, gold", RIGHT_WITH_WORKING)
def test_a_right_answer_with_its_working_is_right(box, gold):
    response = "So \\boxed{" + box + "}"
    assert answers_equivalent(extract_answer(response), gold) is True
    assert accuracy_rewards([response], [gold]).tolist() == [1.0]


# the new rule reads none of these as one of their numbers: each offers a second candidate or a bound
HEDGES_THAT_RESTATE = [
    "2 \\text{ (1 or 2)}", "2 (\\text{or } 1, \\text{or } 2)", "2 \\text{ (between 1 and 2)}", "2 \\text{ (or maybe } 1)",
    "2 \\; (\\ge 2)", "2 \\text{ (} \\ge 2)", "\\ge 2 \\text{ (so } 2)", "2 \\text{ (or more, } 2+)", "1 \\text{ (or } x=2)",
    "\\begin{aligned} x &= 1 \\\\ x &= 2 \\end{aligned}", "\\begin{aligned} x &= 2 \\\\ x &= 1 \\end{aligned}",
    "x = 1 \\text{ (or } x = 2)", "x = 2 \\text{ (or } x = 1)", "1 \\dots 2", "2 \\dots 1",
]


@pytest.mark.parametrize("box", HEDGES_THAT_RESTATE)
def test_a_hedge_that_repeats_a_candidate_is_still_no_answer(box):
    pred = extract_answer("\\boxed{" + box + "}")
    assert answers_equivalent(pred, "1") is False
    assert answers_equivalent(pred, "2") is False


@pytest.mark.parametrize("pred, gold", [
    ("2+", "+2"), ("2^{+}", "+2"), ("2^+", "+2"), ("\\text{2+}", "+2"), ("+2", "2+"), ("2^{+}", "2+"),
    ("+2", "2^{+}"), ("2+", "2^{+}"),
])
def test_spellings_of_one_charge_match(pred, gold):
    assert answers_equivalent(pred, gold) is True  # all False after review 19c, True before it


# ("2^{+}", "2") left: a superscript sign is a charge, +2, which is 2 (review 20, tests/test_answers_review20.py)
@pytest.mark.parametrize("pred, gold", [("2+", "2"), ("3+", "+2"), ("2+", "+3"), ("2^{+}", "3+")])
def test_a_trailing_plus_is_still_no_bare_number_nor_another_charge(pred, gold):
    assert answers_equivalent(pred, gold) is False


def test_answers_with_working_vote_with_their_value():
    answers = ["12", "\\begin{aligned} A &= 3 \\cdot 4 \\\\ &= 12 \\end{aligned}", "12 \\text{ (} 3 \\times 4 = 12)",
               "1 \\text{ (or } 12)", "5", "5 \\text{ (since } 2+3=5)", "2+", "2^{+}", "+2"]
    keys = group_answer_keys(answers)
    assert keys[0] == keys[1] == keys[2]
    assert keys[3] not in (keys[0], keys[4])
    assert keys[4] == keys[5] != keys[0]
    assert keys[6] == keys[7] == keys[8]
