"""MATH-V: functions and exact powers under a floor or e are judged by the values they compute. Answers with a
logarithm or a trigonometric function ("\\log(2^{12345})", "\\log_2 2^{20000}", "\\sin(\\frac{1}{2}^{99999})") went
through the cost guard's shape rules, which refuse a 5-digit exponent, although latex2sympy2 builds those functions
unevaluated and the official eval computes them with ``math`` at once; and under a floor, a ceiling or e an exact power
of more than 13,288 bits was refused ("\\lfloor 2^{14000}\\rfloor", "\\lfloor 1.01^{10000}\\rfloor",
"e^{-\\frac{1}{2^{20000}}}") although sympy's floor and exp of one of 100,000 bits take at most 0.05 s. The literal
arithmetic reader (``_literal_number``) now reads \\log, \\ln, \\log_b, \\exp and the trigonometric and hyperbolic
functions (their powers "\\sin^{2}" too), and an exact power under a floor or e may have 100,000 bits, all of them
together 400,000. Every value and verdict below is the official scorer's (lmms-eval 0.7.3's port with ``from math
import *``, latex2sympy2 1.9.1, after one parse of a differential: see tests/test_scoring_review11.py);
``test_the_official_scorer_agrees`` recomputes them in ``.venv-parity`` (skipped without it).

An absolute value is printed ``Abs(...)``, a name the official eval lacks (no value), and so is \\ln's base E:
"\\ln 2" has no value there, "\\log_2 8" (``log(8, 2)``) and "\\log 100" (base 10) do.
"""

from __future__ import annotations

import pytest

from mathv_official import assert_refused_quickly, assert_scored_in_bounded_time, parity_tests

# (answer, the official value: eval(str(latex2sympy(answer))) rounded to 2 decimals, None where it raises)
VALUES = [
    # logarithms of big powers: log(2**12345, 10) is computed by math.log
    ("\\log(2^{12345})", 3716.22),
    ("\\log 2^{10000}", 3010.3),
    ("\\log_2 2^{20000}", 20000.0),
    ("\\log_{2}{2^{99999}}", 99999.0),
    ("\\log_{2}(\\log_{2}(2^{65536}))", 16.0),  # review 9 had it refused: the logarithms are literal arithmetic now
    ("\\log_2 8", 3.0),
    ("\\log 100", 2.0),
    ("\\ln 2", None),  # log(2, E): E is no name there
    ("\\ln 2^{99999}", None),
    # trigonometric functions of tiny floats: (1/2)**99999 is 0.0 in Python
    ("\\cos(0.5^{99999})", 1.0),
    ("\\sin(\\frac{1}{2}^{99999})", 0.0),
    ("\\sin(\\pi/6)", 0.5),
    ("\\cos^{2}(\\pi/3)", 0.25),
    ("\\sin(2^{10000})", None),  # math.sin of an int over a float's range
    # absolute values: Abs is no name there
    ("|-3|", None),
    ("|2^{12345}|", None),
    # exact powers under a floor or e, up to 100,000 bits
    ("\\lfloor 2^{14000}\\rfloor-2^{14000}+1", 1),
    ("\\lfloor \\frac{10^{5000}+1}{3 \\cdot 10^{4999}} \\rfloor", 3),
    ("\\lfloor \\frac{2^{20000}}{2^{19999}} \\rfloor", 2),
    ("\\lfloor \\frac{7^{5000}}{7^{4999}}\\rfloor", 7),
    ("\\lfloor 1.01^{10000}\\rfloor", 16358287111890398148780984475212052330184704),
    ("\\lfloor 0.5^{20000}\\rfloor", 0),
    ("\\lfloor \\frac{1}{3}^{20000}\\rfloor+1", 1),
    ("\\lfloor 10^{-9000}\\rfloor", 0),
    ("e^{-\\frac{1}{2^{20000}}}", 1.0),
    ("e^{0.5^{14000}}", 1.0),
    ("e^{\\frac{2^{14000}}{2^{14000}}}", 2.72),
    ("e^{1-\\frac{3^{9000}}{3^{9000}}}", 1),
    ("e^{\\frac{1}{10^{5000}}}", 1.0),
]

# (response, gold, the official verdict)
VERDICTS = [
    ("\\boxed{\\log(2^{12345})}", "3716.22", True),
    ("\\boxed{\\log(2^{12345})}", "3716", False),
    ("\\boxed{\\log_{2} 2^{20000}}", "20000", True),
    ("\\boxed{\\log_2 2^{20000}}", "20000", False),  # extraction drops the space: log base 22
    ("The answer is $\\log_{2}{2^{99999}}$", "99999", True),
    ("\\boxed{\\cos(0.5^{99999})}", "1", True),
    ("\\boxed{\\sin(\\frac{1}{2}^{99999})}", "0", True),
    ("\\boxed{\\sin(\\frac{\\pi}{6})}", "\\frac{1}{2}", True),
    ("\\boxed{|-3|}", "3", False),
    ("\\boxed{\\ln 2}", "0.69", False),
    ("\\boxed{\\lfloor 2^{14000}\\rfloor}", "2^{14000}", True),
    ("\\boxed{\\lfloor \\frac{7^{5000}}{7^{4999}}\\rfloor}", "7", True),
    ("\\boxed{\\lfloor 1.01^{10000}\\rfloor}", "16358287111890398148780984475212052330184704", True),
    ("\\boxed{\\lfloor 0.5^{20000}\\rfloor}", "0", True),
    ("\\boxed{e^{-\\frac{1}{2^{20000}}}}", "1", True),
    ("\\boxed{e^{\\frac{2^{14000}}{2^{14000}}}}", "2.72", True),
    ("\\boxed{\\lfloor 2^{3!}^{3000}\\rfloor}", "2^{18000}", True),
]

(test_values_match_the_official_scorer, test_verdicts_match_the_official_scorer,
 test_the_official_scorer_agrees) = parity_tests(VALUES, VERDICTS)

# Still refused: an exact power over 100,000 bits under a floor or e (or over 400,000 bits of them in all), or a
# function of a power over the bound.
HUGE = [
    "\\lfloor 2^{100001}\\rfloor",
    "e^{-(1.0000001^{300000})}",  # 7,000,000 exact bits: minutes in the official scorer
    "\\lfloor 1.0000001^{7000000000} \\rfloor+1",
    "e^{" + "+".join(["1.0001^{7000}-1.0001^{7000}"] * 5) + "}",  # 5 x 2 x 93,000 bits
    "\\log(2^{100001})",
    "\\sin(9^{9^{9}})",
]


@pytest.mark.parametrize("latex", HUGE)
def test_costly_ones_are_still_refused_by_the_guard(latex):
    assert_refused_quickly(latex)


# Long answers of functions of big powers, each under the guard's bounds: each verdict in bounded time.
LONG = [
    "+".join(["\\log(2^{99999})"] * 60),
    "+".join(["\\sin(0.5^{99999})"] * 50),
    "+".join(["\\lfloor 1.0001^{7000}\\rfloor"] * 4) + "+1",
    "e^{" + "+".join(["1.0001^{3000}-1.0001^{3000}"] * 4) + "}",
]


def test_long_function_arithmetic_is_scored_in_bounded_time():
    assert_scored_in_bounded_time(LONG, "0.5", cpu_s=10)
