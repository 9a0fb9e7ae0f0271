"""MATH-V: the cost guard judges literal arithmetic by the values it computes, not by its shape. Power chains and
towers with a decimal, signed or bracketed literal ("0.5^2^2", "2^3^{-1}", "(2)^2^3", "2^{2^{0.5}}"), a factorial
inside a power ("{8}^{3!}"), a floor ("\\lfloor 7!\\rfloor^{-1}") or e ("e^{2^{1.5}}") were refused (no value) although
the official scorer (lmms-eval 0.7.3's port with ``from math import *``, latex2sympy2 1.9.1, after one parse of a
differential: see tests/test_scoring_review11.py) evaluates them at once. An answer that is wholly literal arithmetic
is now evaluated by the guard as that eval will (``_literal_number``): integer powers exactly, up to 100,000 bits,
decimals and quotients as floats, which are cheap whatever the exponent; but with a floor, a ceiling or e, whose sympy
functions may compute their argument exactly, decimals and quotients are exact too and every exact power has at most
13,288 bits. Every value and verdict below is that scorer's;
``test_the_official_scorer_agrees`` recomputes them in ``.venv-parity`` (skipped without it).

latex2sympy2 nests a chain to the left: "2^3^{-1}" is (2^3)^{-1} = 0.125, not 2^{1/3}.
"""

from __future__ import annotations

import pytest

from mathv_official import assert_refused_quickly, assert_scored_in_bounded_time, parity_tests
from mmevo.eval.scoring import _too_costly_for_sympy

# (answer, the official value: eval(str(latex2sympy(answer))) rounded to 2 decimals, None where it raises)
VALUES = [
    # the cheap ones the guard refused
    ("0.5^2^2", 0.06),
    ("2^3^{-1}", 0.12),
    ("(2)^2^3", 64),
    ("{8}^{3!}", 262144),
    ("\\lfloor 7!\\rfloor^{-1}", 0.0),
    ("e^{2^{1.5}}", 16.92),
    ("2^{2^{0.5}}", 2.67),
    # more of their kind: decimal, signed, bracketed and braced bases, fractions, factorials, floors, e, \pi, roots
    ("0.5^{2}^{2}^{2}", 0.0),
    ("{-0.5}^2^3", 0.02),
    ("(-2)^3^2", 64),
    ("[3]^{2!}^{3!}", 531441),
    ("\\frac{1}{2}^{2}^{3}", 0.02),
    ("(0.5)^{0.5}^2", 0.5),
    ("\\left(2\\right)^{2}^{3}", 64),
    ("\\lfloor 2.5\\rfloor^{2^{0.5}}", 2.67),
    ("2^{\\pi^{2}}", 935.51),
    ("\\pi^{2}^{3}", 961.39),
    ("e^2^3", 403.43),
    ("2^2.5", 5.66),
    ("{3!}^{2}^{2}", 1296),
    ("2^{3!+1}", 128),
    ("9^{3!}^{3!}", 9**36),
    ("2^{7!}", 2**5040),
    ("\\sqrt{2}^{2^{0.5}}", 1.63),
    ("\\sqrt[3]{8}^{2}", 4.0),
    ("{6 \\choose 2}^{0.5}", 3.87),
    ("2\\cdot 0.5^2^2", 0.12),
    ("1-0.5^2^2", 0.94),
    ("\\frac{0.5^2^2}{2}", 0.03),
    ("2^{-2}^{-1}", 4.0),
    ("2^{1,000}^{0}", 1),
    # floats are cheap whatever the exponent: underflow to 0.0 ...
    ("\\frac{1}{2}^{99999}", 0.0),
    ("0.5^{9^{9}}", 0.0),
    ("0.5^{10!}", 0.0),
    ("10^{-3}^{2}", 0.0),
    # ... or an overflow, no value there (left to the shape rules, which refuse it)
    ("1.5^{12345}", None),
    # exact under a floor or in e's exponent, where sympy may compute it: 13,200 bits
    ("e^{-(1.0001^{990})}", 0.33),
    ("\\lfloor 1.0001^{990}\\rfloor+1", 2),
    # floors nested two deep (three are refused: see HUGE)
    ("\\lfloor \\lfloor 2.5\\rfloor\\rfloor+1", 3),
    ("\\lfloor \\lfloor 2.5\\rfloor+\\lfloor 3.5\\rfloor\\rfloor+1", 6),
    # cheap, and no value there either
    ("\\lceil 1.5\\rceil^{2}", None),  # ceiling: a NameError
    ("0^{-1}^2", None),
    ("(-8)^{\\frac{1}{3}}^3", None),  # complex
    ("2.5!^2", None),  # latex2sympy2 stops at "^" after "!": factorial(5/2) raises
    ("e^{1}^{2}", None),  # E: a NameError
]

# (response, gold, the official verdict)
VERDICTS = [
    ("\\boxed{0.5^2^2}", "0.0625", True),
    ("\\boxed{0.5^2^2}", "0.06", True),
    ("\\boxed{0.5^2^2}", "0.25", False),
    ("\\boxed{2^3^{-1}}", "0.125", True),
    ("\\boxed{2^3^{-1}}", "1.26", False),  # not 2^{1/3}
    ("\\boxed{(2)^2^3}", "64", True),
    ("\\boxed{(2)^2^3}", "256", False),
    ("\\boxed{{8}^{3!}}", "262144", True),
    ("\\boxed{\\lfloor 7!\\rfloor^{-1}}", "0", True),
    ("\\boxed{e^{2^{1.5}}}", "16.92", True),
    ("\\boxed{2^{2^{0.5}}}", "2.67", True),
    ("\\boxed{2^{10000}^{2}}", "4^{10000}", True),  # (2^10000)^2: 20,000 bits, plain integer arithmetic
    ("\\boxed{2^{7!}}", "2^{5040}", True),
    ("\\boxed{2^{3!}^{3000}}", "2^{18000}", True),
    ("\\boxed{\\frac{1}{2}^{99999}}", "0", True),
]

# Still refused by the guard, before parsing: costly (minutes, or all memory, in the official scorer) or over a bound.
HUGE = [
    "2^{100001}",  # over 100,000 bits
    "2^{9^{9}}",
    "9^{9^{9}}",
    "{8}^{3!}^{9^{9}}",
    "\\lfloor 7!\\rfloor^{2^{20}}",  # 12.9 million bits: seconds in the official scorer
    "2\\cdot 2^{1000}^{10^{5}}",
    "\\lfloor 2^{3!}^{17000}\\rfloor",  # 102,000 exact bits under a floor: over the bound of 100,000 there (review 14)
    "\\lfloor 1.0000001^{7000000000} \\rfloor+1",  # sympy's floor compares the exact power with 0: minutes
    "e^{-(1.0000001^{7000000000})}",  # sympy's exp evaluates the exact power: minutes
    "0.5^{\\lfloor 2.5\\rfloor}^{100000}",  # exact under a floor: 200,000 bits
    "e^{2^{20}}",  # a float overflow, then the tower rule
    "1.5^{100000}",
    # floors nested three deep: printing a sum holding one costs 0.3 s, four levels 3 s, five 37 s, in either scorer
    "\\lfloor \\lfloor \\lfloor 2\\rfloor\\rfloor\\rfloor+1",
    "\\left\\lfloor \\lceil \\llcorner 2\\lrcorner\\rceil \\right\\rfloor+1",
    "\\lfloor " * 5 + "2" + "\\rfloor" * 5 + "+1",
]


(test_values_match_the_official_scorer, test_verdicts_match_the_official_scorer,
 test_the_official_scorer_agrees) = parity_tests(VALUES, VERDICTS)


@pytest.mark.parametrize("latex", [v for v, official in VALUES if official is not None])
def test_cheap_literal_arithmetic_passes_the_guard(latex):
    assert not _too_costly_for_sympy(latex)


@pytest.mark.parametrize("latex", HUGE)
def test_costly_ones_are_still_refused_by_the_guard(latex):
    assert_refused_quickly(latex)


# Long answers of big literal arithmetic, each under the guard's bounds or just over them: each verdict in bounded time.
LONG = [
    "+".join(["0.3^{30000}"] * 80),  # floats: 0.0
    "+".join(["\\frac{1}{3}^{8000}", "\\frac{1}{5}^{5700}", "\\frac{1}{7}^{4700}", "\\frac{1}{11}^{3800}"] * 12) + "+e",
    "+".join(["(5000!)"] * 80),
    "+".join(["2^{99999}"] * 90),
    "\\cdot".join(["2^{99999}"] * 70),
    "+".join(["9^{9^{2}}^{{99}}"] * 50),
    "+".join(["\\lfloor 9999^{999}\\rfloor"] * 35),
    "+".join(["e^{-(1.0001^{990}-1.0001^{990})}"] * 25),
    "+".join(["\\lceil \\frac{9999^{999}+%d}{3}\\rceil" % i for i in range(25)]),
    "+".join(["\\lfloor \\lfloor 2.5\\rfloor\\rfloor"] * 28) + "+1",
    "\\lfloor " + "+".join(["\\lceil %d.5\\rceil" % i for i in range(40)]) + "\\rfloor+1",
]


def test_long_literal_arithmetic_is_scored_in_bounded_time():
    assert_scored_in_bounded_time(LONG, "1", cpu_s=5)
