"""Round 27b, hostile responses against MATH-V scoring: a long answer of brackets was scanned in quadratic time (each
bracket looked back over all that came before it) before its length refused it: 100 KB of "(" took 25 s."""

import time

import pytest

from mmevo.eval.scoring import mathvision_is_equal, score_mathvision

N = 100_000
HOSTILE = {
    "parens": "(" * N,
    "braces": "{" * N,
    "fracs": "\\frac{1}{" * (N // 9) + "2" + "}" * (N // 9),
    "roots": "\\sqrt{" * (N // 6) + "2" + "}" * (N // 6),
    "products": "\\frac{\\sqrt{2}}{3}\\cdot" * (N // 20),
    "brackets": "[(" * (N // 2),
}


@pytest.fixture(scope="module", autouse=True)
def warm():
    mathvision_is_equal("\\frac{1}{2}", "0.5")


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_long_bracketed_answers_end_fast(name):
    text = HOSTILE[name]
    t = time.monotonic()
    assert mathvision_is_equal("5", text) is False
    assert score_mathvision(text, {"answer": "5", "options": []}) is False
    assert score_mathvision("\\boxed{" + text + "}", {"answer": "B", "options": ["1", "2", "3", "4", "5"]}) is False
    assert time.monotonic() - t < 2.0  # 1-25 s each before


def test_short_answers_still_read():
    assert mathvision_is_equal("0.5", "\\frac{1}{2}")
    assert mathvision_is_equal("(1,2)", "(1, \\frac{4}{2})") is False  # official: 2.0 is not 2
    assert mathvision_is_equal("(1,2)", "(1, 2)")
    assert score_mathvision("so \\boxed{\\frac{(1+1)}{4}}", {"answer": "0.5", "options": []})
    assert not score_mathvision("\\boxed{(" * 300 + "}", {"answer": "0.5", "options": []})
