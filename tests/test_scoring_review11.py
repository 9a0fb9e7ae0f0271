"""MATH-V: three more places where ours read an answer otherwise than the official scorer (lmms-eval 0.7.3's port with
``from math import *``, latex2sympy2 1.9.1, in the state a whole-benchmark run is in: see below). Every value and
verdict below is that scorer's on the same input; ``test_the_official_scorer_agrees`` recomputes them in
``.venv-parity`` (skipped without it).

1. A factorial after a comparison ("4^{1/2}<5!") was refused by the cost guard: only a number after + - * / = , ( {
   [ or another factorial counted as a factorial's operand, so "5!" stayed unjudged next to a power.
2. A factorial of a power or of a bracket group holding one ("(2^{2})!", "{2^{2}}!", "2^{3}!" = (2^3)!) was refused
   by syntax. The guard now works out the value of a factorial's operand wherever it is integer literal arithmetic
   and bounds that; huge ones stay refused ("(10^{10})!", "2^34!", "(20!)!").
3. ``\\tau`` read 6.28 (math's tau). In a fresh process latex2sympy2 reads it as the symbol tau, which the official
   ``eval`` under ``from math import *`` does make 6.28; but the official script scores a whole benchmark in one
   process, and once latex2sympy2 has parsed a differential (the "d" of any word such as "degrees") its global
   ``var`` is a Symbol and every letter, Greek letter or accent it reads raises. Ours models that state (see
   ``mathvision_is_equal``) but let letters through: "\\tau" and letters that sympy cancels ("\\binom{x}{0}" = 1) got
   a value. \\pi (a token of its own there) keeps its value.

Neighbour: a literal argument of a gcd / lcm / binomial with a braced power chain ("\\gcd(2^{2}^{9}, 4)") was valued as
Python's right-nested 2**(2**9) (over the gcd bound: refused) instead of latex2sympy2's left-nested (2^2)^9.
"""

from __future__ import annotations

import math

import pytest

from mathv_official import assert_refused_quickly, parity_tests
from mmevo.eval.scoring import _too_costly_for_sympy, mathvision_is_equal


# (answer, the official value: eval(str(latex2sympy(answer))) rounded to 2 decimals, None where it raises)
VALUES = [
    # 1. a factorial after a comparison (a comparison is a bool there, which rounds as 1 / 0)
    ("4^{1/2}<5!", 1),
    ("4^{1/2}\\le 5!", 1),
    ("4^{1/2}\\leq 5!", 1),
    ("4^{1/2}>5!", 0),
    ("4^{1/2}\\geq 5!", 0),
    ("2^{10}\\leqslant 7!", 1),
    ("2^{2}<3!", 1),
    ("3!\\le 6", 1),
    ("5!>2^{2}", 1),
    ("4^{1/2}\\neq 5!", None),  # Ne(...): a NameError
    # 2. a factorial of a power, or of a group holding one
    ("(2^{2})!", 24),
    ("{2^{2}}!", 24),
    ("[2^{2}]!", 24),
    ("\\left(2^{2}\\right)!", 24),
    ("\\{2^{2}\\}!", 24),
    ("2^{3}!", 40320),  # (2^3)!: the factorial takes the whole power
    ("2^3!", 40320),
    ("(2)^{3}!", 40320),
    ("(1+2)!", 6),
    ("(2^{2}+1)!", 120),
    ("(3^{2}-1)!", 40320),
    ("(2^{2})!!", math.factorial(24)),
    ("(2^{2^{2}})!", math.factorial(16)),
    ("(2^{2})^{2}!", math.factorial(16)),
    ("2^3^2!", math.factorial(64)),  # ((2^3)^2)!
    ("3\\cdot2^{2}!", 72),
    ("-2^{2}!", -24),
    ("10-2^{2}!", -14),
    ("2^{3}4!", 192),  # 2^3 * 4!
    ("(2^{2})!\\cdot 1000", 24000),
    ("2^{(1+2)!}", 64),
    ("10^{3}!", math.factorial(1000)),
    ("(10^{3})!", math.factorial(1000)),
    ("(2^{10})!", math.factorial(1024)),
    ("\\frac{(2^{2})!}{2}", 12.0),
    ("\\sqrt{(2^{2})!}", 4.9),
    ("(2^{2}-5)!", None),  # factorial(-1): a ValueError
    ("(4/2)!", None),  # factorial(2.0): a TypeError
    ("(21!-21!)!", 1),
    ("(300!-300!)!", 1),
    # the neighbour: a braced chain in a gcd / binomial argument nests to the left
    ("\\gcd(2^{2}^{9}, 4)", 4),
    ("\\binom{2^{1}^{9}}{2}", 130816),
    # 3. letters raise in the state an official run is in; \\pi does not
    ("\\tau", None),
    ("2\\tau", None),
    ("\\tau+1", None),
    ("\\frac{\\tau}{2}", None),
    ("\\sin\\tau", None),
    ("\\tau-\\tau", None),
    ("\\tau^{0}", None),
    ("\\binom{x}{0}", None),
    ("\\gcd(x,1)", None),
    ("\\binom{\\sin x}{0}", None),
    ("\\binom{f(x)}{0}", None),
    ("\\pi", 3.14),
    ("2\\pi", 6.28),
    ("\\pi^{2}", 9.87),
    ("\\binom{f(2)}{0}", 1),  # a function's name is no atom there
    ("\\binom{dx}{0}", 1),  # nor a differential
    ("e^0", 1),
]

# (response, gold, the official verdict)
VERDICTS = [
    ("\\boxed{4^{1/2}<5!}", "1", True),
    ("\\boxed{4^{1/2}<5!}", "0", False),
    ("\\boxed{3!\\le 6}", "1", True),
    ("\\boxed{(2^{2})!}", "24", True),
    ("So the answer is $\\boxed{(2^{2})!}$.", "24", True),
    ("\\boxed{2^{3}!}", "40320", True),
    ("\\boxed{(1+2)!}", "6", True),
    ("\\boxed{(2^{2})!+1}", "25", True),
    ("\\boxed{\\gcd(2^{2}^{9}, 4)}", "4", True),
    ("\\boxed{\\tau}", "6.28", False),
    ("The answer is $\\tau$.", "6.28", False),
    ("\\boxed{2\\tau}", "12.57", False),
    ("\\boxed{\\tau}", "\\tau", True),  # the same string
    ("\\boxed{\\pi}", "3.14", True),
    ("\\boxed{\\binom{x}{0}}", "1", False),
]

# Too costly for the official eval (each runs for minutes or more): still refused by the guard, before parsing.
HUGE = ["(10^{10})!", "100000!", "99,999!", "(9^{9})!", "2^34!", "2^{13}!", "(2^{100})!", "(20!)!", "(2^{2})!!!",
        "9!!!", "(4000+4000)!", "((9!)!)!", "(10^{4})!", "2^{99999}!", "(2^{3})!!", "9^{9^{9}}", "(1000!)!"]


(test_values_match_the_official_scorer, test_verdicts_match_the_official_scorer,
 test_the_official_scorer_agrees) = parity_tests(VALUES, VERDICTS)


@pytest.mark.parametrize("latex", [v for v, official in VALUES if official is not None and "\\pi" not in v
                                   and ("!" in v or "^" in v)])
def test_cheap_factorials_pass_the_guard(latex):
    assert not _too_costly_for_sympy(latex)


@pytest.mark.parametrize("latex", HUGE)
def test_huge_ones_are_still_refused_by_the_guard(latex):
    assert_refused_quickly(latex)
