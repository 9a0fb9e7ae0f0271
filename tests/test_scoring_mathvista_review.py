"""MathVista: three shapes of response that plainly state an answer, from which the rule-based stand-in for the
official GPT extractor read nothing or the wrong thing (GPT, reading the response, extracts the stated answer).

A. A number written in words on an integer / float row ("The answer is six.", "There are three cars.",
   "\\boxed{three}") extracted ''. A number word now counts where the extractor already reads an answer (a boxed or
   marked answer, or the final sentence of an unmarked response) and only when no digits give one; the pronoun "one"
   ("no one", "the one on the left", "one of them") is no number.
B. A bare option letter before "is correct" / "is the correct answer" / "is the answer" ("C is correct.") extracted ''
   ("Option C is correct." was read). Now read for a multi_choice row, for a capital that is one of its option
   letters and opens a sentence or clause, not in a check ("whether C is correct") nor a statement about a point ("A
   is the right angle").
C. A dash between the letter and the text ("Answer: C - 5", "C — 5", "C – 5") kept the whole "C - 5", which the
   official nearest-choice rule maps by edit distance: with pid 271's choices ("3", "4.5", "5", "6") to "3". The dash
   is now a letter separator like "." / ":" / ")" (not "A - B", a difference of points).

The rows are copies of MathVista testmini rows (the fixture rows by pid, and pid 271); verdicts are through the
official normalisation and comparison (``score_mathvista``).
"""

from __future__ import annotations

import json

import pytest

from datapaths import FIXTURES
from mmevo.eval.scoring import extract_mathvista_answer, score_mathvista

with open(FIXTURES / "mathvista_testmini" / "testmini.json", encoding="utf-8") as _fh:
    _ROWS = json.load(_fh)

SPRING = _ROWS["1"]  # float, answer 1.2 (precision 1)
COUNT = _ROWS["4"]  # integer, answer 4
ANGLES = _ROWS["3"]  # multi_choice 135° / 140° / 145° / 150°, answer 145° (C)
ANGLE_H = _ROWS["5"]  # multi_choice 97 / 102 / 107 / 122, answer 97 (A)
YES_NO = _ROWS["20"]  # multi_choice Yes / No, answer No (B)
FIND_Y = {"pid": "271", "question": "Find y", "question_type": "multi_choice", "answer_type": "text",
          "choices": ["3", "4.5", "5", "6"], "answer": "5", "precision": None, "unit": None}
COUNT_21 = {**COUNT, "answer": "21"}
COUNT_1 = {**COUNT, "answer": "1"}
COUNT_0 = {**COUNT, "answer": "0"}


# -- A. numbers written in words ---------------------------------------------------------------------------------
@pytest.mark.parametrize("response,item,extracted", [
    ("The answer is four.", COUNT, "4"),  # was ''
    ("Answer: Four", COUNT, "4"),
    ("\\boxed{four}", COUNT, "4"),
    ("There are four objects left.", COUNT, "4"),  # the final statement of an unmarked response
    ("Subtracting the large rubber sphere and the big shiny cylinder leaves one cube and three spheres.\n\n"
     "So there are four objects left.", COUNT, "4"),
    ("After removing them, there are four objects left.\n\nLet me know if you need anything else!", COUNT, "4"),
    ("So the final answer is twenty-one.", COUNT_21, "21"),
    ("\\boxed{Twenty one}", COUNT_21, "21"),
    ("The answer is one.", COUNT_1, "1"),
    ("There is only one.", COUNT_1, "1"),
    ("The answer is zero.", COUNT_0, "0"),
    ("The answer is a hundred and five.", {**COUNT, "answer": "105"}, "105"),
    ("The answer is one point two.", SPRING, "1.2"),  # a decimal in words, for a float row
    ("The answer is four. This answer is correct.", COUNT, "4"),  # an earlier marked answer in words
])
def test_a_number_in_words_is_read_where_an_answer_is_read(response, item, extracted):
    assert extract_mathvista_answer(response, item) == extracted
    assert score_mathvista(response, item) is True


@pytest.mark.parametrize("response,item,extracted", [
    # a digit answer is never overridden by a number word
    ("The answer is 4. Final answer: five", COUNT, "4"),
    ("There are 4 objects left, not five.", COUNT, "4"),
    ("\\boxed{4} (four objects)", COUNT, "4"),
    ("The answer is 5, i.e. four plus one.", COUNT, "5"),
    # the pronoun "one" is no number
    ("No one can tell.", COUNT_1, ""),
    ("The one on the left is bigger.", COUNT_1, ""),
    ("The answer is one of the blue ones.", COUNT_1, ""),
    ("The first one is four, the second one is bigger.", COUNT, "4"),
    ("The answer is one-to-one.", COUNT_1, ""),
    # only the final statement of an unmarked response, not any word in it
    ("There are four objects. They are all small.", COUNT, ""),
    # a decimal in words is no integer; words that make no one number make none
    ("The answer is one point two.", COUNT, ""),
    ("The answer is two three.", COUNT, ""),
])
def test_number_words_do_not_turn_prose_into_answers(response, item, extracted):
    assert extract_mathvista_answer(response, item) == extracted


# -- B. a bare option letter before "is correct" / "is the answer" -----------------------------------------------
@pytest.mark.parametrize("response,item,extracted,verdict", [
    ("C is correct.", ANGLES, "C", True),  # was ''
    ("C is correct", ANGLES, "C", True),
    ("**C** is correct.", ANGLES, "C", True),
    ("So C is the correct answer.", ANGLES, "C", True),
    ("Therefore, A is the answer.", ANGLE_H, "A", True),
    ("Since the bisectors meet at 145 degrees, C is correct.", ANGLES, "C", True),
    ("C is correct because the angle is 145 degrees.", ANGLES, "C", True),
    ("Thus B is the best option.", YES_NO, "B", True),
    ("A is correct.", YES_NO, "A", False),  # the letter read, the wrong option
    ("Option C is the answer.", ANGLES, "C", True),  # with "option", "is the answer" too
])
def test_a_bare_option_letter_said_to_be_correct_is_the_answer(response, item, extracted, verdict):
    assert extract_mathvista_answer(response, item) == extracted
    assert score_mathvista(response, item) is verdict


@pytest.mark.parametrize("response,item", [
    ("E is correct.", ANGLES),  # not one of the row's options (A-D)
    ("c is correct.", ANGLES),  # not a capital
    ("Let's check if C is correct.", ANGLES),  # a check
    ("Check whether B is correct.", YES_NO),
    ("In triangle ABC, A is the right angle.", ANGLE_H),  # a statement about a point
    ("The point C is correct here", ANGLES),
    ("A is correct? No.", ANGLE_H),
    ("A is not correct.", ANGLE_H),
])
def test_a_letter_in_other_sentences_is_no_answer(response, item):
    assert extract_mathvista_answer(response, item) == ""


# -- C. a dash between the letter and the text -------------------------------------------------------------------
@pytest.mark.parametrize("response", [
    "Answer: C - 5",  # was 'C - 5', which the nearest-choice rule maps to "3"
    "Answer: C \u2014 5",
    "Answer: C \u2013 5",
    "Answer: C\u20145",
    "The answer is C - 5.",
    "\\boxed{C - 5}",
    "Answer: C - y = 5",
])
def test_a_letter_then_a_dash_is_the_letter(response):
    assert extract_mathvista_answer(response, FIND_Y) == "C"
    assert score_mathvista(response, FIND_Y) is True


@pytest.mark.parametrize("response,item,extracted", [
    ("Answer: C \u2014 145\u00b0", ANGLES, "C"),
    ("Answer: A \u2013 97", ANGLE_H, "A"),
    ("The answer is B - No", YES_NO, "B"),
    ("Answer: B - 102", ANGLE_H, "B"),  # the letter stated, the wrong option
    # not a letter separator: a letter that is no option, a difference of points, a hyphen without spaces
    ("Answer: E - 5", FIND_Y, "E - 5"),
    ("Answer: A - B", ANGLE_H, "A - B"),
    ("Answer: C-5", FIND_Y, "C-5"),
])
def test_a_dash_after_an_option_letter_only(response, item, extracted):
    assert extract_mathvista_answer(response, item) == extracted


def test_a_whole_unmarked_response_restating_options_with_dashes_is_not_read_as_its_first_letter():
    # (the dash is a separator only in a marked answer or a last line: a whole response may open with the options)
    response = "A - 135\u00b0\nB - 140\u00b0\nC - 145\u00b0\nD - 150\u00b0\n\nThe angle BOC is 145\u00b0."
    assert extract_mathvista_answer(response, ANGLES) != "A"
    assert score_mathvista(response, ANGLES) is True
