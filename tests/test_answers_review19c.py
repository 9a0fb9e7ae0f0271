"""Review 19c of free-form answer matching: a hedged answer (two candidates in one box) scored right against a single
gold, which a policy learns to exploit by listing candidates.

1. Math delimiters inside a box were stripped from its ends only: "\\boxed{\\(1\\) or \\(2\\)}" read "1\\) or \\(2",
   which math-verify read as 1.
2. When math-verify's LaTeX parse failed it fell back to the last number in the text: "1 \\lor 2", "1 \\text{ (or }
   2)", "1 \\dots 2", "1 \\mid 2", "1 \\to 2" ... all equalled the gold 2. That fallback now stands only for an answer
   holding one number ("Answer: 80^\\circ", "5 (approx.)").
3. "\\lor" / "\\vee" / "\\land" / "\\wedge" / "and/or" and line breaks outside environments part listed items, as
   "or" / "and" / "," do: "x=1 \\lor x=2" and "x = 1 \\\\ x = 2" read as their last side, 2; now as the set {1, 2}.
"""

from __future__ import annotations

import pytest

from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import answers_equivalent, extract_answer, group_answer_keys

INNER_DELIMITER_HEDGES = [
    "\\boxed{\\(1\\) or \\(2\\)}", "\\boxed{\\(2\\) or \\(1\\)}", "\\boxed{\\(1\\), \\(2\\)}", "\\boxed{\\[1\\] or \\[2\\]}",
    "<answer>\\(1\\) or \\(2\\)</answer>", "\\boxed{\\(x=1\\) or \\(x=2\\)}", "\\boxed{$1$ or $2$}",
]

FALLBACK_HEDGES = [
    "\\boxed{1 \\lor 2}", "\\boxed{1 \\vee 2}", "\\boxed{1 \\land 2}", "\\boxed{1 \\wedge 2}", "\\boxed{1 \\bigvee 2}",
    "\\boxed{x=1 \\lor x=2}", "\\boxed{x=2 \\vee x=1}", "\\boxed{x=1 \\vee 2}", "\\boxed{\\frac12 \\lor 2}",
    "\\boxed{1 \\text{ (or } 2)}", "\\boxed{1 \\text{ (or 2)}}", "\\boxed{1 (or 2)}", "\\boxed{1 \\text{ [or } 2]}",
    "\\boxed{1 \\text{ and/or } 2}", "\\boxed{1 \\dots 2}", "\\boxed{1 \\cdots 2}", "\\boxed{1 \\vdots 2}",
    "\\boxed{1 \\mid 2}", "\\boxed{1|2}", "\\boxed{1 \\vert 2}", "\\boxed{1 \\& 2}", "\\boxed{1 \\cup 2}",
    "\\boxed{1 \\to 2}", "\\boxed{1 \\rightarrow 2}", "\\boxed{1 \\implies 2}", "\\boxed{1 \\Rightarrow 2}",
    "\\boxed{1 \\sim 2}", "\\boxed{1 \\text{ vs. } 2}", "\\boxed{1 ? 2}", "\\boxed{1 \\star 2}",
    "\\boxed{\\text{Answer: } 1 \\lor 2}", "\\boxed{\\text{The answer is } 1 \\text{ or } 2}",
    "\\boxed{x = 1 \\\\ x = 2}", "\\boxed{x = 2 \\\\ x = 1}", "\\boxed{x = 1 \\newline x = 2}",
    "\\boxed{\\begin{aligned}x&=1\\\\x&=2\\end{aligned}}",
]

# a bound or an exclusion holding one number: math-verify's fallback read each as that number
BOUNDS = [
    "\\boxed{\\ge 2}", "\\boxed{\\geq 2}", "\\boxed{\\geqslant 2}", "\\boxed{> 2}", "\\boxed{\\lt 2}", "\\boxed{< 2}",
    "\\boxed{≥ 2}", "\\boxed{\\le 2}", "\\boxed{\\neq 2}", "\\boxed{\\ne 2}", "\\boxed{2 \\text{ or more}}",
    "\\boxed{2 \\text{ or less}}", "\\boxed{2+}", "\\boxed{2-}",
]  # not "2^{+}": a superscript sign is a charge, +2, which is 2 (review 20, tests/test_answers_review20.py)


@pytest.mark.parametrize("response", BOUNDS)
def test_a_bound_is_not_its_number(response):
    assert answers_equivalent(extract_answer(response), "2") is False  # all were True


# already wrong before this review; kept wrong
KEPT_WRONG = [
    "\\boxed{1 or 2}", "\\boxed{1 \\text{ or } 2}", "\\boxed{1, 2}", "\\boxed{\\{1,2\\}}", "\\boxed{1 \\quad 2}",
    "\\boxed{\\text{either } 1 \\text{ or } 2}", "\\boxed{1 \\le x \\le 2}", "\\boxed{1 \\text{ to } 2}",
    "\\boxed{\\pm 1}", "\\boxed{x > 0}", "\\boxed{x \\in \\{1, 2\\}}", "\\boxed{1 \\text{ or possibly } 2}",
    "\\boxed{1 \\\\ 2}", "\\boxed{\\begin{cases}1\\\\2\\end{cases}}",
]


@pytest.mark.parametrize("response", INNER_DELIMITER_HEDGES + FALLBACK_HEDGES + KEPT_WRONG)
def test_a_hedge_is_right_against_no_single_candidate(response):
    pred = extract_answer(response)
    assert answers_equivalent(pred, "1") is False
    assert answers_equivalent(pred, "2") is False
    assert accuracy_rewards([response, response], ["1", "2"]).tolist() == [0.0, 0.0]


def test_delimiters_inside_a_box_are_dropped():
    assert extract_answer("\\boxed{\\(1\\) or \\(2\\)}") == "1  or  2"  # was "1\\) or \\(2"
    assert extract_answer("\\boxed{$1$, $2$}") == "1 ,  2"
    assert extract_answer("\\boxed{\\$5 \\text{ or } \\$6}") == "\\$5 \\text{ or } \\$6"  # a dollar sign stays
    assert extract_answer("\\boxed{\\(\\frac{1}{2}\\)}") == "\\frac{1}{2}"


@pytest.mark.parametrize("response", [
    "\\boxed{\\(1\\) or \\(2\\)}", "\\boxed{\\(2\\), \\(1\\)}", "\\boxed{\\(x=1\\) or \\(x=2\\)}", "\\boxed{$1$ or $2$}",
    "\\boxed{1 \\lor 2}", "\\boxed{1 \\vee 2}", "\\boxed{x=1 \\lor x=2}", "\\boxed{x = 2 \\vee x = 1}",
    "\\boxed{1 \\text{ and/or } 2}", "\\boxed{x = 1 \\\\ x = 2}", "\\boxed{x = 1 \\newline x = 2}",
    "\\boxed{1, 2}", "\\boxed{2, 1}", "\\boxed{\\{1,2\\}}", "\\boxed{1 \\text{ or } 2}",
])
def test_listed_candidates_match_a_gold_that_lists_them(response):
    pred = extract_answer(response)
    assert answers_equivalent(pred, "1, 2") is True
    assert answers_equivalent(pred, "\\{1,2\\}") is True


@pytest.mark.parametrize("pred, gold", [
    ("Answer: 80^\\circ", "80"), ("The answer is 5", "5"), ("Final answer: 5", "5"), ("\\text{The answer is } 5", "5"),
    ("5 (approx.)", "5"), ("\\approx 3.14", "3.14"), ("\\sim 1", "1"), ("x \\approx 1", "1"), ("x = 1", "1"),
    ("1 \\text{ cm}", "1"), ("\\frac{1}{2}", "0.5"), ("x \\in \\{1\\}", "1"), ("1 \\lor 1", "1"),
    ("1 \\text{ or } 1", "1"), ("\\$5", "5"), ("\\$ 12.50", "12.5"), ("5\\%", "5"), ("45^\\circ", "45"),
    ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{pmatrix}1&2\\\\3&4.0\\end{pmatrix}"),
    ("x = 1 \\text{ or } x = 2", "1, 2"), ("1 \\le x \\le 2", "1 \\le x \\le 2"), ("2\\sqrt{3}", "\\sqrt{12}"),
    ("a = 3, b = 4", "3, 4"), ("y = 2x + 1", "2x+1"),
])
def test_one_answer_in_any_spelling_is_still_right(pred, gold):
    assert answers_equivalent(pred, gold) is True


def test_two_boxes_read_the_last_as_math_verify_and_easyr1_do():
    # the last box is the final answer (math-verify's boxed extraction, EasyR1's and R1-V's graders): a response
    # boxing 1 then 2 scores as one boxing 2 alone, so a second box earns nothing over committing to it
    for response, gold, right in [("\\boxed{1} or \\boxed{2}", "2", True), ("\\boxed{1} or \\boxed{2}", "1", False),
                                  ("\\boxed{2}\\ldots\\boxed{1}", "1", True)]:
        assert answers_equivalent(extract_answer(response), gold) is right


def test_hedges_vote_apart_from_each_candidate():
    answers = ["2", "1 \\lor 2", "1\\) or \\(2", "1", "x=1 \\lor x=2", "1 \\text{ (or } 2)", "1 or 2"]
    keys = group_answer_keys(answers)
    assert keys[0] != keys[3]
    for i in (1, 4):  # the listed pair, whatever its spelling, is one answer apart from 1 and from 2
        assert keys[i] == keys[6] and keys[i] not in (keys[0], keys[3])
    assert keys[5] not in (keys[0], keys[3])
