"""MATH-V scoring parity on realistic answer forms (escaped braces, decimals divided into a negative number,
numbers juxtaposed after a "/", percents, 0/0), and MathVista's rule-based extraction of realistic outputs.

Every expected verdict is the official one, computed on the exact (response, row) pair with the official MATH-V
``evaluate()`` (``evaluation/evaluate.py`` + ``evaluation/utils.py``: ``find_math_answer``, ``is_equal`` with
latex2sympy2 1.9.1, sympy 1.14 and ``from math import *``). Every expected value is the official
``eval(str(latex2sympy(s)))`` of the string.
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import (
    _latex_value,
    extract_mathvista_answer,
    mathvision_is_equal,
    score_mathvision,
    score_mathvista,
)


def _free_form(answer: str) -> dict:
    return {"answer": answer, "options": []}


def _value(s: str):
    v = _latex_value(s)
    return None if v is None else round(v, 4)


# latex2sympy2's group rule takes "\{ expr \}" like "( expr )"; a list "\{5,6\}" is no number.
@pytest.mark.parametrize("s, official", [
    ("\\{5\\}+1", 6),
    ("\\left\\{5\\right\\}+1", 6),
    ("\\frac{\\{5\\}}{3}", 1.6667),
    ("2\\{5\\}", 10),
    ("\\{5\\}^2", 25),
    ("\\{2\\}\\{3\\}", 6),
    ("\\sqrt{\\{4\\}}", 2.0),
    ("\\{5\\}!", 120),
    ("\\sin\\{0\\}+1", 1.0),
    ("\\{2+3\\}\\times 2", 10),
    ("\\{1,000\\}+1", 1001),
    ("\\{5\\}", 5),
    ("\\{5,6\\}", None),
    ("\\{5}", None),
    ("{5\\}", None),
])
def test_escaped_braces_are_a_group(s, official):
    assert _value(s) == official


@pytest.mark.parametrize("response, answer, official", [
    ("So the answer is $\\boxed{\\left\\{5\\right\\}+1}$.", "6", True),
    ("\\boxed{\\frac{\\{5\\}}{2}}", "2.5", True),
    ("\\boxed{2\\{5\\}}", "10", True),
    ("\\boxed{\\{5,6\\}}", "5", False),
])
def test_escaped_braces_verdicts(response, answer, official):
    assert score_mathvision(response, _free_form(answer)) is official


# latex2sympy2 reads a decimal as an exact Rational; sympy prints -1 * (1/2)**-1 as "-1/1/2", which the official
# eval reads as (-1/1)/2 = -0.5 (not -2). With a positive numerator it prints "1/(1/2)" = 2.
@pytest.mark.parametrize("s, official", [
    ("-1/0.5", -0.5),
    ("-1/.5", -0.5),
    ("-2/0.5", -1.0),
    ("-1/2.5", -0.1),
    ("-1/0.25", -0.25),
    ("-\\frac{3}{1.5}", -0.5),
    ("\\frac{-3}{1.5}", -0.5),
    ("2-1/0.5", 1.5),
    ("-1\\div 0.5", -0.5),
    ("-(\\pi\\div0.5)", -1.5708),
    ("-0.5/0.25", -2.0),
    ("-1.5/0.5", -3.0),
    ("-1/\\frac{1}{2}", -2.0),
    ("1/0.5", 2.0),
    ("\\pi\\div0.5", 6.2832),
    ("-1/2", -0.5),
])
def test_decimal_divisor_prints_as_latex2sympy2(s, official):
    assert _value(s) == official


@pytest.mark.parametrize("response, answer, official", [
    ("\\boxed{-\\frac{3}{1.5}}", "-2", False),
    ("\\boxed{-\\frac{3}{1.5}}", "-0.5", True),
    ("The answer is -1/0.25.", "-4", False),
    ("The answer is -1/0.25.", "-0.25", True),
    ("\\boxed{1.5/0.5}", "3", True),
    ("\\boxed{(-1/0.5,3)}", "(-0.5,3)", True),
    ("\\boxed{(-1/0.5,3)}", "(-2,3)", False),
])
def test_decimal_divisor_verdicts(response, answer, official):
    assert score_mathvision(response, _free_form(answer)) is official


# Juxtaposed numbers multiply more tightly than "/" (latex2sympy2's postfix list is below its "/" rule).
@pytest.mark.parametrize("s, official", [
    ("1/2\\frac{1}{2}", 1.0),
    ("2/12\\frac{1}{2}", 0.3333),
    ("2/3\\dfrac{3}{4}", 0.8889),
    ("2/1 010", 0.2),
    ("2/1,0005", 0.0004),
    ("2/1047,1047", 0.0),
    ("2/0.5 2", 2.0),
    ("12\\frac{1}{2}", 6.0),
    ("1 010", 10),
    ("1047,1047", 7329728),
    ("1,000,0005", 5000000),
    ("5\\frac{1}{2}\\cdot 2", 5.0),
    ("\\log\\{\\sqrt{4}/1,0005\\}", -3.3979),
])
def test_juxtaposed_numbers_after_a_slash(s, official):
    assert _value(s) == official


@pytest.mark.parametrize("response, answer, official", [
    ("\\boxed{1/2\\frac{1}{2}}", "1", True),
    ("\\boxed{1/2\\frac{1}{2}}", "0.25", False),
    ("\\boxed{2/1,0005}", "0.0004", True),
    ("\\boxed{12\\frac{1}{2}}", "6", True),
])
def test_juxtaposed_numbers_verdicts(response, answer, official):
    assert score_mathvision(response, _free_form(answer)) is official


# latex2sympy2's percent is the Rational number/100: "100\\%" is the integer 1 (printed "1" by eval_tuple), and it
# prints and evaluates as the official does at a rounding edge (0.005 / -0.2 = -0.025 -> -0.03).
@pytest.mark.parametrize("asw, gt, official", [
    ("(1,2)", "(100\\%,2)", True),
    ("(1.0,2)", "(100\\%,2)", True),
    ("(0,1)", "(0\\%,1)", True),
    ("(-0.5,1)", "(-50\\%,1)", True),
    ("-0.03", "0.5\\%/-0.2", True),
    ("-0.02", "0.5\\%/-0.2", False),
    # latex2sympy2 keeps 0/0 unevaluated: "0/0" raises ZeroDivisionError in the official eval, also to the power 0
    ("1", "\\frac{0}{0}^0", False),
    ("1", "(0/0)^0", False),
    ("0", "0/0", False),
])
def test_percent_and_zero_by_zero(asw, gt, official):
    assert mathvision_is_equal(asw, gt) is official


@pytest.mark.parametrize("response", ["\\boxed{(0/0)^0}", "\\boxed{\\frac{0}{0}^{0}}"])
def test_zero_by_zero_to_the_power_zero_is_no_answer(response):
    assert score_mathvision(response, _free_form("1")) is False


def test_gold_with_spaced_digits_after_a_slash():
    # The gold is only lower-cased (its spaces stay): "2/1 010" is 2/(1*10) there.
    assert mathvision_is_equal("0.2", "2/1 010") is True
    assert mathvision_is_equal("20", "2/1 010") is False


# ---------------------------------------------------------------------------------------------------------------
# MathVista rule-based extraction (the stand-in for the official GPT extractor, whose prompt asks for the stated
# answer: the value or the letter). The verdict is then the official normaliser's.
# ---------------------------------------------------------------------------------------------------------------

def _choice_item(choices: list[str], answer: str) -> dict:
    return {"question_type": "multi_choice", "answer_type": "text", "choices": choices, "answer": answer,
            "precision": None}


_INTEGER_19 = {"question_type": "free_form", "answer_type": "integer", "choices": None, "answer": "19",
               "precision": None}
_ANGLES = _choice_item(["135°", "140°", "145°", "150°"], "145°")


@pytest.mark.parametrize("item, response, extraction, ok", [
    # a choice text occurs only as a text of its own: not "5" in "45", "no" in "know", "2" in "12"
    (_choice_item(["3", "4", "5", "6"], "3"), "The bar for 2019 is at 45. I think it's A.", "A", True),
    (_choice_item(["1", "2", "3", "6"], "3"), "We subtract 12 - 5 = 7. I think it's C.", "C", True),
    (_choice_item(["Yes", "No"], "Yes"), "Yes, the red bar is taller, as far as I know", "Yes", True),
    (_choice_item(["2", "2.5", "3"], "2.5"), "Reading the scale, it is 2.5", "2.5", True),
    (_choice_item(["2", "√{3}", "√{2}"], "√{2}"), "So x^2 = 16. I think it's C.", "C", True),
    # of choices ending at the same place, the longer one: "-5", not the "5" in it
    (_choice_item(["5", "-5"], "-5"), "Reading the axis, the value is -5", "-5", True),
    (_choice_item(["quarter", "quarter to"], "quarter to"), "The clock shows quarter to", "quarter to", True),
])
def test_mathvista_unmarked_choice_text_is_a_whole_text(item, response, extraction, ok):
    assert extract_mathvista_answer(response, item) == extraction
    assert score_mathvista(response, item) is ok


@pytest.mark.parametrize("item, response, extraction, ok", [
    # Markdown around the marker: "**Answer**: 19", a heading with the answer on the next line
    (_INTEGER_19, "**Answer**: 19\n\nExplanation: the first bar reads 20.", "19", True),
    (_INTEGER_19, "**Final Answer**: 19. The other bar is 20.", "19", True),
    (_INTEGER_19, "### Answer\n19\n\n### Explanation\nThe bar is at 20.", "19", True),
    (_INTEGER_19, "**Final Answer**\n\n19\n\nThe other bar is 20.", "19", True),
    (_INTEGER_19, "**Answer**: 20\n\nExplanation: not 19.", "20", False),
    (_ANGLES, "**Answer**: (C)\n\nOption (A) is too small.", "C", True),
    (_ANGLES, "### Final Answer\n(C) 145°\n\nNot (A).", "C", True),
    # "answer" inside a sentence is no heading
    (_INTEGER_19, "I answer\n20", "20", False),
])
def test_mathvista_markdown_answer_markers(item, response, extraction, ok):
    assert extract_mathvista_answer(response, item) == extraction
    assert score_mathvista(response, item) is ok


_FLOAT_1_2 = {"question_type": "free_form", "answer_type": "float", "choices": None, "answer": "1.2", "precision": 1}


@pytest.mark.parametrize("response, extraction, ok", [
    # a mixed number is its value (not "1" and "0.2" run together as "10.2")
    ("The answer is 1\\frac{1}{5}.", "1.2", True),
    ("The answer is 1 \\frac{1}{5} m.", "1.2", True),
    ("\\boxed{-1\\dfrac{1}{5}}", "-1.2", False),
    # digit arguments without braces
    ("The answer is \\tfrac65", "1.2", True),
    ("\\boxed{\\frac65}", "1.2", True),
    ("The answer is \\dfrac{6}{5}", "1.2", True),
])
def test_mathvista_fractions_written_in_latex(response, extraction, ok):
    assert extract_mathvista_answer(response, _FLOAT_1_2) == extraction
    assert score_mathvista(response, _FLOAT_1_2) is ok


def test_mathvista_long_digit_run_is_read_in_linear_time():
    # a pattern that could start at every digit of a long run was quadratic: 12000 digits took seconds
    import time

    item = {"question_type": "free_form", "answer_type": "integer", "choices": None, "answer": "8", "precision": None}
    t0 = time.process_time()
    assert extract_mathvista_answer("8" * 12000 + " 8", item) == "8"
    assert time.process_time() - t0 < 1.0
