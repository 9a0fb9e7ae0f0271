"""MATH-V cost guards judged by size: a power of integer literals and a binomial of literal arguments are cheap up to
a size (100,000 bits; 20,000 bits for a binomial, which sympy evaluates while parsing) whatever the digits of their
exponent or arguments. Before, any 5-digit exponent, a tower exponent or power-of-powers product over 1000 and a
binomial argument over 9999 were refused, so "2^{10000}" against gold "(2^{100})^{100}" scored False where the
official MATH-V scorer (lmms-eval 0.7.3's port with ``from math import *``, latex2sympy2 1.9.1) says True. Every
verdict below is that scorer's on the same pair."""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import _too_costly_for_sympy, mathvision_is_equal, score_mathvision


@pytest.mark.parametrize("answer,gold,official", [
    ("2^{10000}", "(2^{100})^{100}", True),  # a 5-digit exponent; a power of powers with product 10000
    ("2^{20000}", "4^{10000}", True),
    ("2^{2^{10}}", "4^{512}", True),  # a tower of exponent 1024
    ("2^{2^{2^{2^{2}}}}", "2^{2^{2^{2^{2}}}}+0", True),  # 2^65536 (tests/test_scoring.py had it among the huge)
    ("9^99^99", "9^{9801}", True),  # a left-nested chain: 9^9801, 31,000 bits
    ("10^{-12345}", "0", True),  # 2^-41,000 is 0.0 in Python
    ("2^{99999}", "2\\cdot 2^{99998}", True),  # 99,999 bits, under the bound (a bit_length bound made it 199,998)
    ("\\binom{2^{14}}{2}", "134209536", True),
    ("\\binom{20000}{2}", "199990000", True),  # a 5-digit argument
    ("\\binom{20000}{30000}", "0", True),
    ("\\binom{10^{99}}{2}", "\\binom{10^{99}}{2}\\cdot 1", True),
    ("2^{10000}", "2^{10000}+1", False),
])
def test_cheap_literal_powers_and_binomials_are_evaluated(answer, gold, official):
    assert mathvision_is_equal(answer, gold) is official
    assert score_mathvision(f"So the answer is \\boxed{{{answer}}}.", {"answer": gold, "options": []}) is official


@pytest.mark.parametrize("answer", [
    "2^{100001}",  # over 100,000 bits
    "10^{30103}",
    "(2^{1000})^{101}",
    "2^{2^{17}}",
    "9^{9^{9}}",
    "2^9999^9999",
    "99999^{10000}",
    "\\binom{2^{15}}{2^{14}}",  # 32,765 bits
    "\\binom{10^{99}}{50000}",  # its log-gamma terms cancel in floating point: bounded from above instead
    "x^{12345}",  # not a literal base: the exponent bound of 1000 stays
    "1.5^{12345}",
    "x_2^{12345}",
    "(x^{100})^{100}",
    # under a root, a logarithm or a function, or next to a symbol or a fractional power, sympy evaluates what it can:
    # "\\sqrt{7^{10000}-99^{32}}" has it factor a 28,000-bit number (minutes), so the exponent bounds stay there
    "\\sqrt{7^{10000}-99^{32}}",
    "\\sin(2^{10000})",
    "x + 3^{12345}",
    "2^{10000} \\cdot \\pi",
    "(2^{10000})^{0.5}",
    "2^{10000} + 3^{0.5}",
    "\\sqrt{(7^{100})^{100}}",
    "\\sqrt{\\binom{2^{14}}{2}}",
])
def test_large_or_unjudged_powers_are_still_refused(answer):
    assert _too_costly_for_sympy(answer)
    assert mathvision_is_equal(answer, "1") is False


@pytest.mark.parametrize("answer", ["2^{10000}", "{2}^{99999}", "2^{-12345}", "(2^{100})^{100}", "2^{2^{16}}",
                                    "9^99^99", "\\binom{16384}{8192}", "\\binom{10^{99}}{2}",
                                    "\\frac{2^{10000}-1}{3} \\cdot 5 \\div (7^{5000}+1)", "1.5 + 2^{10000}",
                                    # refused as unjudged shapes before tests/test_scoring_review13.py, which judges
                                    # literal arithmetic by its values: 0.0 (a float), 2^20000
                                    "\\frac{1}{2}^{99999}", "2^{10000}^{2}"])
def test_cheap_ones_pass_the_guard(answer):
    assert not _too_costly_for_sympy(answer)
