"""MATH-V scoring parity on garbage fragments: where latex2sympy2 stops reading and where it raises.

Every expected verdict is the official one, computed on the exact (response, row) pair with the official MATH-V
``evaluate()`` (``evaluation/evaluate.py`` + ``evaluation/utils.py``: ``find_math_answer``, ``is_equal`` with
latex2sympy2 1.9.1 and ``from math import *``). Every expected value is the official
``eval(str(latex2sympy(s)))`` of the string, ``None`` where it raises (or is no number).
"""

from __future__ import annotations

import math

import pytest

from mmevo.eval.scoring import _latex_value, mathvision_is_equal, score_mathvision


def _free_form(answer: str) -> dict:
    return {"answer": answer, "options": []}


def _value(s: str):
    v = _latex_value(s)
    return None if v is None else round(v, 2)


# latex2sympy2's top rule has no EOF: a "_" after what takes no subscript (a number, \pi, a closed group, "!") and a
# "^" after a postfix "!" / "'" end the expression, and what follows is never read. After a power, a letter or an
# accent the "_" is a subscript (and an error at the end); inside brackets the same token is an error.
@pytest.mark.parametrize("response, answer, official", [
    ("3_", "3", True),
    ("\\boxed{5_}", "5", True),
    ("3'^", "3", True),
    ("\\pi_", "\\pi", True),
    ("The answer is \\pi_1", "3.14", True),
    ("3!^2", "6", True),  # (3!), not (3!)^2 = 36
    ("3!^2", "36", False),
    ("\\sin 0_", "0", True),
    ("2^3_", "8", False),
    ("(3_)", "3", False),
    ("(3!^2)", "6", False),
])
def test_subscript_or_power_where_none_can_follow(response, answer, official):
    assert score_mathvision(response, _free_form(answer)) is official


@pytest.mark.parametrize("s, official", [
    ("3_", 3), ("3_{", 3), ("\\pi_", 3.14), ("3'^2", 3), ("\\frac{1}{2}_", 0.5), ("\\sqrt{4}_", 2.0), ("(3)_2", 3),
    ("2^{3}_{4}_", 8), ("2^3_", None), ("\\mathrm{5}_", None), ("x^{2}_", None),
])
def test_subscript_stop_values(s, official):
    assert _value(s) == official


# Each group rule pairs an opener with its own closer, and "\left" with "\right": another closer is an error.
@pytest.mark.parametrize("response, answer, official", [
    ("{5)", "5", False),
    ("{12)", "12", False),
    ("\\mbox{12\\right)", "12", False),  # find_math_answer makes it "{12)"
    ("{5)+1", "6", False),
    ("(5}", "5", False),
])
def test_bracket_closed_by_another_kind(response, answer, official):
    assert score_mathvision(response, _free_form(answer)) is official


@pytest.mark.parametrize("model, gt, official", [
    ("3", "\\left(3)", False),
    ("3", "(3\\right)", False),
    ("5", "5\\right+1", True),  # a "\right" that closes nothing ends the expression
    ("3", "\\left\\lfloor 3.5\\right\\rfloor", True),
])
def test_left_right_pairing(model, gt, official):
    assert score_mathvision(model, _free_form(gt)) is official


@pytest.mark.parametrize("s, official", [
    ("\\left(5)", None), ("(5\\right)", None), ("5\\left", None), ("5\\right+1", 5), ("\\left(5\\right)", 5),
    ("\\left|-3|", None), ("\\pi\\left|^{2}", None), ("3\\rfloor", 3), ("0.5\\rvert", 0.5),
])
def test_left_right_values(s, official):
    assert _value(s) == official


# Other tokens that end the expression at the top: closers of floor / vert groups, an arrow before letters, "&", the
# transform arrows, "\choose".
@pytest.mark.parametrize("response, answer, official", [
    ("The answer is 12\\to a", "12", True),
    ("0.5&\\sqrt{b}", "\\frac{1}{2}", True),
    ("\\boxed{3\\rfloor}", "3", True),
])
def test_other_stops(response, answer, official):
    assert score_mathvision(response, _free_form(answer)) is official


@pytest.mark.parametrize("s, official", [("3\\xrightarrow", 3), ("3<->4", 3), ("2\\choose 3", 2), ("12\\to a", 12)])
def test_other_stop_values(s, official):
    assert _value(s) == official


# latex2sympy2 reads "~" as a space; "\;" and "\:" are no tokens of its lexer (an error).
@pytest.mark.parametrize("response, answer, official", [("5~1", "5", True), ("\\boxed{5\\;}", "5", False)])
def test_lexer_spacing(response, answer, official):
    assert score_mathvision(response, _free_form(answer)) is official


def test_spacing_values():
    assert _value("5\\:1") is None
    assert _value("5~1") == 5


# Thousands separators only in a number's integer part: ".51,0002" is the list [0.51, 2], not 0.51 * 2.
def test_thousands_separator_not_after_decimal_point():
    assert score_mathvision("\\boxed{.51,0002}", _free_form("1.02")) is False
    assert score_mathvision("\\boxed{1,00001,000}", _free_form("1000000")) is True
    assert _latex_value(".51,0002") is None and _latex_value("1.5,000") is None


# \pi takes no exponent of its own (powers chain to the left), "^{\top}" is a transpose, "{n \choose k}" a binomial.
@pytest.mark.parametrize("response, answer, official", [
    ("\\boxed{10^\\pi^2}", "1919487.58", True),  # (10^pi)^2, not 10^(pi^2)
    ("\\boxed{2^{\\top}}", "2", True),
    ("\\boxed{{2\\choose 1}}", "2", True),
])
def test_pi_exponent_transpose_and_choose(response, answer, official):
    assert score_mathvision(response, _free_form(answer)) is official


def test_pi_exponent_value():
    assert math.isclose(_latex_value("10^\\pi^2"), 1919487.5835776986, rel_tol=1e-9)
    assert mathvision_is_equal("{2\\choose 1}", "2") is True
