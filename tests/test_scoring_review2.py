"""Review of the MathVista rule-based extractor: a choice letter followed by its reason, and "X and not Y"."""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import extract_mathvista_answer, score_mathvista

# MathVista testmini pid 5's choices; the gold here is the 3rd choice, i.e. the letter C. "107" is as close (edit
# distance) to "C because ..." as the wrong choices are, so only reading the letter scores these right.
ITEM = {"question_type": "multi_choice", "answer_type": "text", "choices": ["97", "102", "107", "122"],
        "precision": None, "answer": "107"}


@pytest.mark.parametrize("response", [
    "The answer is C because it is larger.",
    "The answer is C, because the bar is the tallest.",
    "The correct answer is C as the figure shows.",
    "Answer: C since 107 > 102.",
    "The answer is C which is the largest value.",
    "The answer is C; because of the scale.",
    "C because it is larger.",  # the whole response
])
def test_letter_followed_by_its_reason_is_the_letter(response):
    # the English of the documented "B，因为" ("B, because"): the letter C -> choice 3 -> "107"
    assert extract_mathvista_answer(response, ITEM) == "C"
    assert score_mathvista(response, ITEM) is True


@pytest.mark.parametrize("response", ["The answer is B because it is larger.", "The answer is D, since it is larger."])
def test_wrong_letter_followed_by_its_reason_is_wrong(response):
    assert extract_mathvista_answer(response, ITEM) == response.split("is ")[1][0]
    assert score_mathvista(response, ITEM) is False


def test_article_before_a_noun_is_not_a_letter():
    # "A square shape": the article A, not option A; the text goes to the official nearest-choice rule,
    # edit distances 10 / 6 / 10 -> "A square" (the 2nd choice, letter B)
    item = {"question_type": "multi_choice", "answer_type": "text", "precision": None,
            "choices": ["A circle", "A square", "A triangle"], "answer": "A square"}
    assert extract_mathvista_answer("The answer is A square shape.", item) == "A square shape"
    assert score_mathvista("The answer is A square shape.", item) is True


@pytest.mark.parametrize("response, extraction", [
    ("The answer is C and not B.", "C"),
    ("The answer is C but not A.", "C"),
    ("The answer is B and not C.", "B"),
])
def test_and_not_drops_the_negated_answer(response, extraction):
    # like the documented "C, not A" -> "C"
    assert extract_mathvista_answer(response, ITEM) == extraction
    assert score_mathvista(response, ITEM) is (extraction == "C")
