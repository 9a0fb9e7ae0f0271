"""Review 28: Geometry3K answer scoring (``mmevo eval --benchmark geometry3k_test`` and the trainer's accuracy reward)
on the real InterGPS rows, each choice written as a letter, "(D)", "D. 80", its text, its value as an integer / float /
with degrees / units / "x = ", in ``\\boxed{}`` / ``<answer>`` / after "The answer is", and the irrational choices as
``\\sqrt{}`` / ``\\frac{}`` / ``√`` / ``\\dfrac`` / the precise decimal: 2,864 + 121 (response, choice) pairs, 2 wrong
verdicts of these kinds, now right:

1. "\\boxed{120^o}" (the ASCII stand-in for the degree sign) against the choice "120": no number, scored wrong;
2. "The correct option is D." / "the correct choice is (B)": no answer read (only "answer is ..." named a letter),
   scored wrong.

Kept as they are (the trainer's math-verify reading, as EasyR1 / R1-V grade Geometry3K): a rounded decimal of an
irrational choice ("8.66" for 5√3) is not that choice; an unboxed value ("The answer is 80.") is no answer; a bare
lower-case letter ("\\boxed{d}") is not the option d (it may be a variable).
"""

from __future__ import annotations

import pytest

from datapaths import FIXTURES, shared
from mmevo.data.benchmarks import load_items
from mmevo.eval.runner import scorer_for
from mmevo.rewards.accuracy import accuracy_rewards


def _items(src) -> dict:
    items, _ = load_items("intergps", src)
    return {it.id: it for it in items}


def _verdicts(item, response: str) -> tuple[bool, float]:
    """(``mmevo eval``'s verdict, the trainer's accuracy reward) for ``response`` on ``item``."""
    _, correct = scorer_for("intergps")(response, item)
    return correct, float(accuracy_rewards([response], [item.answer], [item.choices])[0])


@pytest.fixture(scope="module")
def angle_q():
    # problem 17: parallelogram MNPQ, find angle Q; choices 30 / 45 / 60 / 120, answer D (120)
    return _items(shared("geometry3k_samples", "Geometry3K InterGPS sample rows"))["17"]


@pytest.fixture(scope="module")
def arc_ab():
    # problem 11: find m arc AB; choices 30 / 40 / 60 / 80, answer D (80)
    return _items(FIXTURES / "geometry3k_samples")["11"]


@pytest.mark.parametrize("response, right", [
    ("\\boxed{120^o}", True),  # was wrong
    ("\\boxed{120^{o}}", True),  # was wrong
    ("\\boxed{m\\angle Q = 120^o}", True),  # was wrong
    ("\\boxed{60^o}", False),
    ("\\boxed{120^\\circ}", True),
    ("\\boxed{120°}", True),
    ("\\boxed{D}", True),
])
def test_an_ascii_degree_mark_is_a_degree_mark(angle_q, response, right):
    assert _verdicts(angle_q, response) == (right, float(right))


@pytest.mark.parametrize("response, right", [
    ("The correct option is D.", True),  # was wrong (no answer)
    ("So the correct choice is (D).", True),  # was wrong
    ("The correct option is B.", False),
    ("The answer is D.", True),
    ("The answer is 80.", False),  # kept: an unboxed value is no answer
    ("\\boxed{80}", True),
    ("\\boxed{d}", False),  # kept: a bare lower-case letter may be a variable
])
def test_the_correct_option_named_by_its_letter_is_read(arc_ab, response, right):
    assert _verdicts(arc_ab, response) == (right, float(right))


def test_irrational_choices_in_their_spellings(angle_q):
    """Problem 15 (find y; choices 5, 5√2, 5√3, 10, answer C) and 19 (find sin x; the four \\frac{..\\sqrt..}{..}
    choices, answer D): every spelling of the gold choice is right, the other choices and a rounded decimal wrong."""
    items = _items(shared("geometry3k_samples", "Geometry3K InterGPS sample rows"))
    y, sin_x = items["15"], items["19"]
    for response in ["\\boxed{5\\sqrt{3}}", "\\boxed{5\\sqrt3}", "\\boxed{5 \\sqrt { 3 }}", "\\boxed{\\sqrt{75}}",
                     "\\boxed{5√3}", "\\boxed{8.660254}", "\\boxed{C}", "<answer>(C) 5\\sqrt{3}</answer>"]:
        assert _verdicts(y, response) == (True, 1.0), response
    for response in ["\\boxed{5\\sqrt{2}}", "\\boxed{10}", "\\boxed{8.66}"]:
        assert _verdicts(y, response) == (False, 0.0), response
    for response in ["\\boxed{\\frac{2\\sqrt{2}}{5}}", "\\boxed{\\dfrac{2\\sqrt2}{5}}", "\\boxed{\\sqrt{8}/5}",
                     "\\boxed{\\frac{2}{5}\\sqrt{2}}", "\\boxed{0.565685}", "\\boxed{D}"]:
        assert _verdicts(sin_x, response) == (True, 1.0), response
    for response in ["\\boxed{\\frac{\\sqrt{2}}{5}}", "\\boxed{\\frac{\\sqrt{5}}{5}}", "\\boxed{A}"]:
        assert _verdicts(sin_x, response) == (False, 0.0), response
