"""Review round 5 of ``mmevo.eval.scoring``.

MATH-V: verdicts recorded from the official ``evaluate()`` (MATH-V ``evaluation/evaluate.py`` + ``utils.py`` with
latex2sympy2 1.9.1) on the same (response, answer) pairs. MathVista: the rule-based stand-in for the GPT extractor
must read the number a response states (values worked out by hand).
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import extract_mathvista_answer, mathvision_is_equal, score_mathvision, score_mathvista


def _ff(answer: str) -> dict:
    return {"answer": answer, "options": []}


# --------------------------------------------------------------------------------------------------------------
# MATH-V: what latex2sympy2 1.9.1 reads (official verdicts)
# --------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "response, answer, official",
    [
        # \pi before a bracket is a factor there ("\pi(2)" = 2*pi), not a function named \pi
        ("\\boxed{\\pi(2)}", "6.28", True),
        ("The answer is $\\pi(3)^2$.", "28.27", True),
        ("\\boxed{\\pi{(2)}}", "6.28", True),
        ("\\boxed{\\pi^{2}(2)}", "19.74", True),
        ("\\boxed{\\pi(2)}", "2\\pi", True),
        ("\\boxed{2\\pi}", "\\pi(2)", True),
    ],
)
def test_mathvision_pi_before_bracket_is_a_factor(response, answer, official):
    assert score_mathvision(response, _ff(answer)) is official


@pytest.mark.parametrize(
    "response, answer",
    [
        # commands its lexer has no token for: the official parse raises, never equal
        ("\\boxed{5\\medspace}", "5"),
        ("\\boxed{\\phantom{0}5}", "0"),
        ("\\boxed{1 \\lt 2}", "1"),
        ("\\boxed{3\\gt 2}", "1"),
        # \gamma / \Gamma are the symbol "gamma" there (math.gamma in the official eval): no number
        ("\\boxed{\\Gamma(5)}", "24"),
        ("\\boxed{\\gamma(2)}", "1"),
        # \exp is evaluated there but what holds it is not: floor(E), sqrt(E) are NameErrors for the eval
        ("\\boxed{\\lfloor \\exp(1)\\rfloor}", "2"),
        ("\\boxed{\\sqrt{\\exp(1)}}", "1.65"),
    ],
)
def test_mathvision_constructs_the_official_parse_refuses(response, answer):
    assert score_mathvision(response, _ff(answer)) is False


def test_mathvision_refusals_keep_their_neighbours():
    # (official: True for each)
    assert score_mathvision("\\boxed{\\exp(\\ln(5))}", _ff("5")) is True
    assert score_mathvision("\\boxed{\\pi}", _ff("3.14")) is True
    assert mathvision_is_equal("\\pi (1+1)", "6.28") is True
    assert mathvision_is_equal("10\\approx 3", "10") is False  # official: the gold side raises


# --------------------------------------------------------------------------------------------------------------
# MathVista: numbers the stand-in extractor must read
# --------------------------------------------------------------------------------------------------------------

FLOAT2 = {"question_type": "free_form", "answer_type": "float", "precision": 2, "answer": "0.75",
          "choices": None}
FLOAT1 = {"question_type": "free_form", "answer_type": "float", "precision": 1, "answer": "4.5",
          "choices": None}


def _int(answer: str) -> dict:
    return {"question_type": "free_form", "answer_type": "integer", "precision": None, "answer": answer,
            "choices": None}


def _mc(answer: str, choices: list[str]) -> dict:
    return {"question_type": "multi_choice", "answer_type": "text", "precision": None, "answer": answer,
            "choices": choices}


@pytest.mark.parametrize(
    "response, item, extracted",
    [
        ("The answer is 3/4.", FLOAT2, "0.75"),
        ("**Final Answer:** 14/2", _int("7"), "7"),
        ("Thus, the answer is 100/2, not 55.", _int("50"), "50"),
        ("**Final Answer:** -14/2", _int("-7"), "-7"),
        ("x = 12 + 6 = 14/2\n\nAnswer: 14/2", _int("7"), "7"),
        ("So the answer is 4 1/2.", FLOAT1, "4.5"),
        ("The answer is 4½.", FLOAT1, "4.5"),
    ],
)
def test_mathvista_slash_fractions_and_mixed_numbers(response, item, extracted):
    assert extract_mathvista_answer(response, item) == extracted
    assert score_mathvista(response, item) is True


def test_mathvista_slash_not_between_two_numbers_is_kept():
    # a date is no fraction, and an improper "fraction" after a whole number is no mixed number
    assert extract_mathvista_answer("The answer is 3/4/2020.", _int("3")) == "3"
    assert extract_mathvista_answer("The answer is 60 km/h.", _int("60")) == "60"
    assert extract_mathvista_answer("The answer is 12 14/2", _int("12")) == "12"
    # for an integer answer a fraction that is no whole number reads as "7 out of 10"
    assert extract_mathvista_answer("The answer is 7/10 students.", _int("7")) == "7"
    assert extract_mathvista_answer("The answer is 7/10.", {**FLOAT1, "answer": "0.7"}) == "0.7"


@pytest.mark.parametrize(
    "response, item, extracted",
    [
        ("The answer is 1{,}020.", _int("1020"), "1020"),  # LaTeX thousands separator
        ("\\boxed{2{,}019}", _int("2019"), "2019"),
        ("**Answer: ０．８**", {**FLOAT1, "answer": "0.8"}, "0.8"),  # full-width digits and point
        ("The answer is １８．２７", {**FLOAT2, "answer": "18.27"}, "18.27"),
        ("So the answer is 1.2 × 10³.", _int("1200"), "1200"),  # superscript exponent
        ("The area is 25 cm².", _int("25"), "25"),
    ],
)
def test_mathvista_number_spellings(response, item, extracted):
    assert extract_mathvista_answer(response, item) == extracted
    assert score_mathvista(response, item) is True


def test_mathvista_scientific_notation_is_exact():
    # 20.06 * 100 in binary floating point is 2005.9999999999998, which int() truncates to 2005
    response = "After checking, the answer is 20.06 \\times 10^{2}."
    assert extract_mathvista_answer(response, _int("2006")) == "2006"
    assert score_mathvista(response, _int("2006")) is True
    assert score_mathvista(response, _int("2005")) is False
    assert score_mathvista("So the answer is 150.17 × 10^2.", _int("15017")) is True


@pytest.mark.parametrize(
    "response, choices, gold, expected",
    [
        ("Answer: 5.0", ["10", "8", "6", "5"], "5", True),  # edit distance ties "10" and "5" (first wins)
        ("Answer: 5.0", ["10", "8", "6", "5"], "10", False),
        ("The answer is 2.0", ["12", "2", "20"], "2", True),  # nearest text: "20"
        ("So the correct option is 12.00.", ["10", "11", "12", "13"], "12", True),
        ("The answer is 15.00.", ["15", "100", "50", "50"], "15", True),
        # no choice equal to it: the official nearest text ("4.53" at edit distance 1, "4.29" at 2)
        ("The answer is 4.3", ["3.71", "4.29", "4.53", "6.75"], "4.53", True),
    ],
)
def test_mathvista_number_equal_to_one_choice(response, choices, gold, expected):
    assert score_mathvista(response, _mc(gold, choices)) is expected
