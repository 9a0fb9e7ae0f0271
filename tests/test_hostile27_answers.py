"""Round 27, hostile answers against math-verify: comparisons sympy takes many seconds over end within a bound,
as not equal; ordinary symbolic answers still compare."""

import time

import pytest

from mmevo.rewards.answers import answers_equivalent, group_answer_keys

SLOW = [  # each took 5 s to minutes before
    ("2", "\\sec(k)^{99}"),
    ("-1!", "{{\\sec(k)}^{99}}^{9}"),
    ("2", "(\\sin(k)+\\cos(k))^{99}"),
    ("2", "\\sinh(k)^{99}"),
    ("\\binom{99}{x}", "\\theta / 3 + 7 / 99"),
    ("{\\sinh(-1 - i)}^{9}", "\\pi + -1"),
    ("\\sec({{i \\cdot 3}^{3}}^{99})", "\\cot(\\theta) \\cdot \\pi"),
    ("2", "\\sin(k)+\\cos(2k)+\\tan(3k)+\\sec(4k)+\\csc(5k)+\\cot(6k)+\\sinh(7k)+\\cosh(8k)+\\tanh(9k)+\\sin(10k)"),
]


@pytest.fixture(scope="module", autouse=True)
def warm():
    answers_equivalent("\\frac{1}{2}", "x")  # imports math-verify and sympy outside the timed calls


@pytest.mark.parametrize("a,b", SLOW)
def test_costly_comparisons_end_fast_as_not_equal(a, b):
    for pred, gold in ((a, b), (b, a)):
        t = time.monotonic()
        assert answers_equivalent(pred, gold) is False
        assert time.monotonic() - t < 6.0  # bounded (about 1-2 s here); it was 5 s to minutes


def test_a_group_of_costly_answers_ends():
    t = time.monotonic()
    keys = group_answer_keys(["2", "\\sec(k)^{99}", "\\sinh(k)^{99}", "2"])
    assert keys[0] == keys[3] and len(set(keys)) == 3
    assert time.monotonic() - t < 15.0


@pytest.mark.parametrize("a,b", [("\\sin^2(x)+\\cos^2(x)", "1"), ("\\sec^2 x", "1+\\tan^2 x"),
                                 ("(\\sin x+\\cos x)^2", "1+\\sin(2x)"), ("\\sin(2x)", "2\\sin(x)\\cos(x)"),
                                 ("x^2+2x+1", "(x+1)^2"), ("\\sqrt{8}", "2\\sqrt{2}")])
def test_ordinary_symbolic_answers_still_compare(a, b):
    assert answers_equivalent(a, b) and answers_equivalent(b, a)


def test_the_deadline_leaves_a_running_timer_alone():
    import signal

    previous = signal.signal(signal.SIGALRM, lambda *a: None)
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        assert answers_equivalent("\\sec(x)^{2}", "1+\\tan(x)^{2}")
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 20  # still ours, not cancelled
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
