"""Review 3 of answer equivalence: inputs whose parse or sympy evaluation takes seconds to minutes never reach
math-verify (every call stays bounded), while ordinary answers still do."""

from __future__ import annotations

import types

import pytest

from mmevo.rewards import answers as A


@pytest.fixture
def mv_calls(monkeypatch):
    """Records the strings math-verify is asked to parse and how often it verifies, then defers to it."""
    import math_verify

    calls = {"parse": [], "verify": 0}

    def parse(s, *a, **k):
        calls["parse"].append(s)
        return math_verify.parse(s, *a, **k)

    def verify(*a, **k):
        calls["verify"] += 1
        return math_verify.verify(*a, **k)

    def clear():
        for f in (A._mv_parse, A._mv_values, A._equivalent, A._light, A._to_number):
            f.cache_clear()

    clear()
    monkeypatch.setattr(A, "_MV", types.SimpleNamespace(parse=parse, verify=verify))
    yield calls
    clear()


@pytest.mark.parametrize("deep", [
    "{" * 20 + "5" + "}" * 20,  # 16 levels took 11 s to parse, 20 levels minutes
    "(" * 12 + "x" + ")" * 12,
    "\\frac{" * 18 + "1" + "}{2}" * 18,  # evalf and verify double per level: 3 s and more
    "\\frac{1}{1+" * 12 + "1" + "}" * 12,  # a continued fraction: 8 s in verify
])
def test_deep_nesting_never_reaches_the_parser(mv_calls, deep):
    assert A.answers_equivalent(deep, "5") is False
    assert mv_calls["parse"] == []


@pytest.mark.parametrize("chain", [
    "x" + "^x" * 16,  # 3 s to parse
    "x" + "^x_x" * 6,  # minutes to parse
    "x" + "_x" * 16,
    "x^{2}^{3}",
])
def test_script_chains_never_reach_the_parser(mv_calls, chain):
    assert A.answers_equivalent(chain, "y") is False
    assert mv_calls["parse"] == []


@pytest.mark.parametrize("pred, gold", [
    ("\\cos(\\cos(\\cos(\\cos(x))))", "\\tan(\\tan(\\tan(\\tan(x))))"),  # 8 levels of this took 10 s
    ("1/2/2/2/2/2/2/2/2/2/2/2/2/2", "2^{-13}"),  # tree depth 14: 2 s
    ("\\begin{pmatrix}x&1\\\\1&y\\end{pmatrix}^{60}", "1"),  # a symbolic matrix power never finished
])
def test_deep_or_expanding_parses_are_not_verified(mv_calls, pred, gold):
    assert A.answers_equivalent(pred, gold) is False
    assert mv_calls["verify"] == 0


@pytest.mark.parametrize("pred, gold", [
    ("\\sqrt{\\frac{1}{2}\\left(1+\\cos\\left(\\frac{\\pi}{3}\\right)\\right)}", "\\frac{\\sqrt{3}}{2}"),
    ("x_1^2+x_2^2", "x_2^2+x_1^2"),
    ("\\sin(\\cos(\\tan(0)))", "\\sin(1)"),
    ("\\frac{1}{(1 - \\cos \\alpha)^2}", "(1-\\cos\\alpha)^{-2}"),
    ("a_{n_{k}}^{2}", "a_{n_{k}}^{2}+0"),
    ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{pmatrix}1&2\\\\3&4.0\\end{pmatrix}"),
])
def test_ordinary_nesting_is_still_compared(mv_calls, pred, gold):
    assert A.answers_equivalent(pred, gold) is True
    assert A.answers_equivalent(gold, pred) is True
