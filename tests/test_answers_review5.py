"""Cost-guard fuzzing of answer equivalence: six kinds of short answer made math-verify / sympy run for 5 s to minutes
(rewards are computed on every step, off the main thread, where sympy cannot be interrupted): hyperbolic functions of
huge numbers (their size was bounded as if they did not grow), a binomial of a power (evaluated while parsing), sums of
powers, an integral of a high power, and relations holding a high power of a symbol (simplify / as_set)."""

from test_answers_review2 import _time_equivalence

from mmevo.rewards.answers import answers_equivalent

# (pred, gold): each took over 5 s in answers_equivalent (most over 15 s) before its guard
HEAVY_PAIRS = [
    (r"\lfloor\cosh(10^{6})\rfloor", "1"),
    ("1", r"\lfloor\cosh(10^{6})\rfloor"),
    (r"\sinh(\sinh(10^{9}))", "0"),
    (r"x\cosh(10^{9})", "0"),
    (r"y=\cosh(10^{9})", "y=1"),
    (r"\binom{2^{99}}{49999}", "1"),
    (r"\int_0^1 x^{99999} dx", "0"),
    (r"y=\sec(x)^{99}", "y=1"),
    (r"\{x>\sum_{k=1}^{99}k^{99}\}", "1"),
    (r"\{1,\sum_{k=1}^{99}k^{99}\}", r"\{1,2\}"),
    ("(1,2)", r"x^{999}=\sinh(9)"),
    (r"x^{99}=\sinh(9)", "x=1"),
]


def test_costly_answers_are_refused_fast():
    res = _time_equivalence(HEAVY_PAIRS, [p for p, _ in HEAVY_PAIRS[:8]] + ["1", "1"], timeout=60)
    assert [r[0] for r in res[:-1]] == [False] * len(HEAVY_PAIRS)
    assert res[-1][0] == 8  # the 7 heavy answers among them, each its own class, and "1" (3 times)
    assert max(r[1] for r in res[1:]) < 3.0  # the first includes the one-time math-verify import


def test_guards_keep_ordinary_answers():
    assert answers_equivalent(r"\binom{5}{2}", "10") is True
    assert answers_equivalent(r"\dbinom{6}{3}", "20") is True
    assert answers_equivalent(r"\sum_{k=1}^{10} k", "55") is True
    assert answers_equivalent(r"\int_0^1 x^2 dx", r"\frac{1}{3}") is True
    assert answers_equivalent(r"\cosh(0)", "1") is True
    assert answers_equivalent(r"y=x^{2}+1", "y=1+x^2") is True
    assert answers_equivalent(r"x^{8}+1=y", "y=1+x^{8}") is True  # degree 8: still compared
