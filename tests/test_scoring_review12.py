"""MATH-V: more places where ours read an answer otherwise than the official scorer (lmms-eval 0.7.3's port with
``from math import *``, latex2sympy2 1.9.1, after one parse of a differential: the state a whole-benchmark run is in;
see tests/test_scoring_review11.py). Every value and verdict below is that scorer's on the same input;
``test_the_official_scorer_agrees`` recomputes them in ``.venv-parity`` (skipped without it).

1. "30^\\degree", "30^{\\degree}" read 30 and "2\\vspace3" 6: latex2sympy2_extended's lexer has tokens for a degree
   sign and skips \\vspace, \\vskip, \\vrule, \\vcenter, \\vbox and \\hfil; latex2sympy2's lexer has no token for any
   of them (a lexer error). "^\\circ" is removed before parsing by the official answer cleaning, as by ours.
2. An opening delimiter glued to a letter ("\\lfloor e^2 \\rfloor" is "\\lfloore^2\\rfloor" once spaces are gone) was
   one unknown command in our model of its lexer, so the "\\rfloor" closed nothing; its lexer reads the longest token,
   "\\lfloor", then "e", as it already did for a closer ("\\rvertx").
3. Its number rule lets a decimal start at a thousands separator with no digit before it ("DIGIT* (',' DIGIT DIGIT
   DIGIT)* '.' DIGIT+"): ",500.5" is 500.5 and "1.5, 100.5" the juxtaposed numbers 1.5 and 100.5 (150.75); ours
   read neither.
4. "4.0" is written 4 before parsing (an exact rational, printed as an integer); before ",ddd" that made a
   thousands separator: "1.0, 250" (a list there) read 1250, "12.0,000" 12000.
5. "{6 \\choose 2}^2" and "{6 \\choose 2} \\cdot 4!" were refused by the cost guard (a "\\choose" next to any power,
   factorial or 5-digit number). A "{n \\choose k}" of integer literal arguments with a cheap value is now judged
   as that value written out, like "\\binom"'s arguments: "{99 \\choose 50}!" and "2^{{99 \\choose 50}}" stay refused.
"""

from __future__ import annotations


import pytest

from mathv_official import assert_refused_quickly, parity_tests
from mmevo.eval.scoring import _too_costly_for_sympy


# (answer, the official value: eval(str(latex2sympy(answer))) rounded to 2 decimals, None where it raises)
VALUES = [
    # 1. commands latex2sympy2's lexer has no token for
    ("30^\\degree", None),
    ("30^{\\degree}", None),
    ("30\\degree", None),
    ("2\\vspace3", None),
    ("2\\vspace{3}", None),
    ("2\\vskip3", None),
    ("\\vrule5", None),
    ("2\\vcenter3", None),
    ("2\\vbox3", None),
    ("5\\hfil", None),
    ("(5)\\vspace", None),
    ("5.\\degree", 5),  # never lexed: the parse stops at "."
    ("5&\\vspace", 5),
    ("30^\\circ", None),
    ("30^{\\circ}", None),
    # 2. an opening delimiter glued to a letter
    ("\\lfloore^2\\rfloor", 7),
    ("\\lfloore^{2}\\rfloor", 7),
    ("\\lfloore^2\\rfloor+1", 8),
    ("\\left\\lfloore^2\\right\\rfloor", 7),
    ("\\llcornere^2\\lrcorner", 7),
    ("\\lbracee^2\\rbrace", 7.39),
    ("\\lbracke^2\\rbrack", 7.39),
    ("\\lgroupe^2\\rgroup", 7.39),
    ("\\lceile^2\\rceil", None),  # ceiling(...): a NameError
    ("\\lfloore\\rfloor", None),  # a lone e is a letter
    ("\\pie^2", 23.21),
    ("\\sine^2", 0.89),
    ("2\\cdote^2", 14.78),
    # 3. a decimal that starts at a thousands separator
    (",500.5", 500.5),
    ("1.5,100.5", 150.75),
    ("1.5,100.5+1", 151.75),
    (".5,100.5", 50.25),
    ("1.0,250.5", 250.5),
    ("(,500.5)", 500.5),
    ("2(,500.5)", 1001.0),
    ("\\frac{1}{2},100.5", 50.25),
    (".51,000.5", 0.26),
    ("1,0000.5", 500.0),  # 1,000 then 0.5
    ("1,500.5", 1500.5),
    (",500", None),  # no decimal point: "," then 500
    ("1.5,100", None),
    (".51,000", None),
    # 4. a whole decimal before ",ddd" stays a decimal
    ("1.0,250", None),
    ("12.0,000", None),
    ("12.00,000", None),
    ("1,000.0,000", None),
    ("1,000.0", 1000),
    ("4.00", 4),
    # 5. a cheap "{n \\choose k}" next to a power or a factorial
    ("{6 \\choose 2}^2", 225),
    ("{6 \\choose 2} \\cdot 4!", 360),
    ("{3! \\choose 2}^2", 225.0),
    ("{{6\\choose2}\\choose2}^2", 11025),
    ("{6 \\choose 2}+2^{10}", 1039),
    ("\\sqrt{{6\\choose 2}}^2", 15.0),
    ("{6 \\choose 2}^{2^{3}}", 2562890625),
    ("{20000 \\choose 2}", 199990000),
    ("{x \\choose 2}^2", None),
]

# (response, gold, the official verdict)
VERDICTS = [
    ("\\boxed{30^\\degree}", "30", False),
    ("\\boxed{30^{\\degree}}", "30", False),
    ("The angle is $30^\\degree$.", "30", False),
    ("\\boxed{30^\\circ}", "30", True),
    ("\\boxed{30^{\\circ}}", "30", True),
    ("\\boxed{2\\vspace3}", "6", False),
    ("\\boxed{\\lfloor e^2 \\rfloor}", "7", True),
    ("\\boxed{\\lfloor e^2 \\rfloor}", "8", False),
    ("\\boxed{1.5, 100.5}", "150.75", True),
    ("\\boxed{,500.5}", "500.5", True),
    ("\\boxed{1.0, 250}", "1250", False),
    ("\\boxed{12.0,000}", "12000", False),
    ("\\boxed{1,000.0}", "1000", True),
    ("\\boxed{{6 \\choose 2}^2}", "225", True),
    ("\\boxed{{6 \\choose 2} \\cdot 4!}", "360", True),
]

# Too costly for the official eval: still refused by the guard, before parsing.
HUGE = ["{99 \\choose 50}!", "2^{{99\\choose 50}}", "{100000 \\choose 50000}", "{(10!)! \\choose 5}",
        "{6 \\choose 2}^{9^{9}}", "{2^{100} \\choose 2^{50}}", "{x \\choose 2}^{99999}"]


(test_values_match_the_official_scorer, test_verdicts_match_the_official_scorer,
 test_the_official_scorer_agrees) = parity_tests(VALUES, VERDICTS)


@pytest.mark.parametrize("latex", [v for v, official in VALUES if official is not None and "choose" in v])
def test_cheap_binomials_pass_the_guard(latex):
    assert not _too_costly_for_sympy(latex)


@pytest.mark.parametrize("latex", HUGE)
def test_huge_ones_are_still_refused_by_the_guard(latex):
    assert_refused_quickly(latex)
