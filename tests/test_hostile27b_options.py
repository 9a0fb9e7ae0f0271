"""Round 27b: an answer naming a letter and a costly text was compared with every option in full, each up to the
math-verify deadline: "(A) \\binom{97}{x}" against five symbolic options took 5 s for one comparison."""

import time

import pytest

from mmevo.rewards.answers import answers_equivalent

OPTIONS = ["x+1", "2x", "x^2", "\\frac{x}{2}", "\\theta/3+7/99"]


@pytest.fixture(scope="module", autouse=True)
def warm():
    answers_equivalent("\\frac{1}{2}", "x")


@pytest.mark.parametrize("pred,gold,equal", [("(A) \\binom{97}{x}", "A", True), ("(E) {\\sinh(-1 - 3i)}^{9}", "A", False),
                                             ("\\binom{96}{x} (B)", "B", False)])
def test_a_letter_with_a_costly_text_ends_fast(pred, gold, equal):
    t = time.monotonic()
    assert answers_equivalent(pred, gold, OPTIONS) is equal
    assert time.monotonic() - t < 3.0  # 3.5-5 s before: one deadline per option


@pytest.mark.parametrize("pred,gold,equal", [("(B) 2x", "B", True), ("(B) x+1", "B", False), ("(B) x+1", "A", False),
                                             ("2x", "B", True), ("B", "2 x", True), ("x^{2}", "C", True),
                                             ("(D) x/2", "D", True), ("\\frac{1}{2}x", "D", True)])
def test_ordinary_letters_and_texts_compare_as_before(pred, gold, equal):
    assert answers_equivalent(pred, gold, OPTIONS) is equal
