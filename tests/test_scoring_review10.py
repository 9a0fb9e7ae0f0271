"""MATH-V: two more places where ours read an answer otherwise than the official scorer (lmms-eval 0.7.3's port
with ``from math import *``, latex2sympy2 1.9.1); every verdict and value below is that scorer's on the same input.

1. A braced argument after a function with scripts: latex2sympy2 reads ``\\log_{2}{8}/2`` as log_2 of ``{8}/2`` (its
   ``func_arg_noparens``: the multiplicative expression that follows, as after ``\\log_2 8``), i.e. 2. Ours made the
   ``{8}`` a group ``(8)``, which ends the argument: log_2(8) / 2 = 1.5.
2. A chain of literal powers with a braced exponent, ``2^3^{2}`` ((2^3)^2 = 64), was refused by the cost guard (only
   bare-digit exponents were recognised as a cheap chain) and scored no value.
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import _latex_value, mathvision_is_equal, score_mathvision


@pytest.mark.parametrize("latex,official", [
    ("\\log_{2}{8}/2", 2.0),  # log_2(8/2)
    ("\\log_{2}{8}\\div 2", 2.0),
    ("\\log_2{8}/2", 2.0),
    ("\\log_{2}{8}\\cdot 2", 4.0),  # log_2(16)
    ("\\log_{2}{8}\\times 2", 4.0),
    ("\\log_{2}{8}2", 4.0),
    ("\\log_{2}{16}\\div{2}", 3.0),
    ("\\log_{3}{9}\\cdot\\log_{2}{8}", 3.0),  # log_3(9 * log_2(8))
    ("\\log_{10}{1000}/3", 2.52),
    ("2\\log_{2}{8}/\\sqrt{2}", 5.0),
    ("\\log_{2}{8}/-2", None),  # log_2(-4): no real value
    # unchanged: an additive sign ends the argument; a parenthesised argument ends at its ")"; no scripts
    ("\\log_{2}{8}+1", 4.0),
    ("\\log_{2}{8}-1", 2.0),
    ("\\log_{2}(8)/2", 1.5),
    ("\\frac{\\log_{2}{8}}{2}", 1.5),
    ("\\sqrt{2}\\log_{2}{8}", 4.24),
    ("\\log_{10}{100}-\\log_{10}{10}", 1.0),
    # literal power chains, braced exponents included, nest to the left
    ("2^3^{2}", 64),
    ("3^2^{2}", 81),
    ("10^3^{2}", 1000000),
    ("2^3^{2}^{4}", 16777216),
    ("2^{3}^{2}", 64),
])
def test_values_match_the_official_scorer(latex, official):
    value = _latex_value(latex)
    if official is None:
        assert value is None
    else:
        assert value is not None and round(float(value), 2) == official, value


@pytest.mark.parametrize("response,gold,official", [
    ("\\boxed{\\log_{2}{8}/2}", "2", True),
    ("\\boxed{\\log_{2}{8}/2}", "1.5", False),
    ("\\boxed{\\log_{2}{8}\\cdot 2}", "4", True),
    ("\\boxed{\\log_{2}{8}\\cdot 2}", "6", False),
    ("The answer is $\\log_{2}{16}\\div{2}$.", "2", False),
    ("\\boxed{2^3^{2}}", "64", True),
    ("So the answer is $\\boxed{2^2^{3}}$.", "64", True),
    ("\\boxed{3^2^{2}}", "81", True),
])
def test_verdicts_match_the_official_scorer(response, gold, official):
    assert score_mathvision(response, {"answer": gold, "options": []}) is official


def test_a_huge_braced_chain_is_still_refused_cheaply():
    assert _latex_value("9^{9}^{9999}") is None
    assert mathvision_is_equal("2^3^{9999}^{9999}", "5") is False
