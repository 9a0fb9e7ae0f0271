"""Review 17: a second, independent set of realistic answers on the shipped MathVista and MATH-Vision rows.

Styles review 16 did not write: mmevo's own eval format (``<think>...</think> \\boxed{X}``, the r1v prompt's
instruction), think blocks that name other numbers or options after the answer, an answer repeated in two forms
("B) 12", "12 (option B)"), markdown tables and bold, LaTeX spacing (``\\,``), ``\\dfrac`` / ``\\tfrac``, mixed
numbers, scientific notation, numbers in words with a sign, "Yes, it is", lists in brackets / parentheses / with
"and", floats with more digits than the row's precision, integers as "3.0"; for MATH-V, option letters as "(A)",
"A.", "Option A", ``\\text{A}`` in the box, the option's content instead of its letter, and free-form values with
units, ``^\\circ``, ``\\%``, ``\\,``, ``\\sqrt``, ``\\pi`` and scientific notation.

MathVista, as in review 16: where the official rule paths do not fire, the official GPT extraction is taken to be
the answer the response states, then the official normaliser and ``safe_equal`` decide;
``test_the_official_mathvista_pipeline_agrees`` recomputes every verdict below in ``.venv-parity`` with review
16's machinery. mmevo's extractor missed three classes, each a "was ..." below:

1. a markdown table row labelled as the answer, "| **Final answer** | **C** |" (was no answer);
2. an option's text with its letter named in brackets, "quarter (option B)" (was the text, whose nearest choice is
   "quarter to"; with the choice texts "(c)", "(a)", ... of pid 168, "(b) (option E)" was the letter B);
3. a negative number in words, "negative five", "minus three" (was the number without its sign).
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import extract_mathvista_answer, score_mathvista
from test_scoring_review16 import _ff, _mc, assert_official_mathvista_agrees

# MathVista testmini rows, as in testmini.json
ANGLES_145 = _mc("3", ["135°", "140°", "145°", "150°"], "145°")
CLOCK = _mc("7", ["half", "quarter", "o'clock", "quarter to", "quarter past"], "quarter")
SHUFFLED = _mc("168", ["(c)", "(a)", "(e)", "(d)", "(b)"], "(b)")
YES_NO = _mc("x", ["Yes", "No"], "Yes")
NEG_3 = _ff("45", "integer", "-3")
COUNT_5 = _ff("11", "integer", "5")
ANGLE_FLOAT = _ff("74", "float", "47.6", 1)

THINK = "<think>Reading the chart: the 2019 bar is at 45 and the 2020 bar at 50, a rise of 5.</think>"
TABLE = "Reading the chart step by step.\n\n| Step | Result |\n|---|---|\n| Compare | done |\n"

# (item, response, what the official GPT extractor returns for it, the official verdict)
VISTA = [
    # 1. a table row labelled as the answer
    (ANGLES_145, TABLE + "| **Final answer** | **C** |", "C", True),  # was ''
    (ANGLES_145, TABLE + "| **Final answer** | **A** |", "A", False),  # was '': wrong either way
    (CLOCK, TABLE + "| Answer | B |", "B", True),  # was ''
    (ANGLE_FLOAT, TABLE + "| **Answer** | 47.6 |\n\nThe other angle is 70.", "47.6", True),  # was '70'
    # 2. an option's text with its letter named in brackets
    (CLOCK, f"{THINK}\nThe answer is quarter (option B).", "B", True),  # was 'quarter (option B)' -> 'quarter to'
    (CLOCK, "Reading the clock.\n\nSo the answer is quarter (Option B).", "B", True),  # was 'quarter to'
    (SHUFFLED, f"{THINK}\nThe answer is (b) (option E).", "E", True),  # was 'B' -> '(a)'
    (CLOCK, f"{THINK}\nThe answer is half (option A).", "A", False),
    # 3. a negative number in words
    (NEG_3, f"{THINK}\n\nThe answer is minus three.", "-3", True),  # was '3'
    (NEG_3, f"{THINK}\n\nThe answer is negative three.", "-3", True),  # was '3'
    (COUNT_5, "Counting the objects.\n\nThe answer is negative five.", "-5", False),  # was '5': scored right
    (COUNT_5, "Counting the objects.\n\nThere are minus five left.", "-5", False),  # was '5'
    # shapes that already agreed, pinned: mmevo's own format and its neighbours
    (ANGLES_145, f"{THINK} \\boxed{{C}}", "C", True),
    (ANGLES_145, f"{THINK} \\boxed{{\\text{{C}}}}", "C", True),
    (ANGLES_145, f"<think>The answer is C. Let me check option A (135°): too small.</think>\n\\boxed{{C}}", "C", True),
    (ANGLES_145, f"{THINK}\nC) 145°", "C", True),
    (YES_NO, f"{THINK}\nYes, it is.", "Yes", True),
    (YES_NO, f"{THINK} \\boxed{{\\text{{No}}}}", "No", False),
    (COUNT_5, f"{THINK} \\boxed{{5.0}}", "5.0", True),
    (COUNT_5, f"{THINK} \\boxed{{\\dfrac{{10}}{{2}}}}", "5", True),
    (ANGLE_FLOAT, f"{THINK} \\boxed{{47.63}}", "47.63", True),  # the official round() to the row's precision
    (ANGLE_FLOAT, f"{THINK} \\boxed{{47.6\\,\\text{{cm}}}}", "47.6", True),
    (_ff("19", "integer", "400"), f"{THINK} \\boxed{{4 \\times 10^{{2}}}}", "400", True),
]


@pytest.mark.parametrize("item,response,gpt_extraction,official", VISTA)
def test_mathvista_second_generator_answers_get_the_official_verdict(item, response, gpt_extraction, official):
    assert score_mathvista(response, item) is official


@pytest.mark.parametrize("item,response,extracted", [
    # neighbours the new rules must leave alone
    (COUNT_5, "The answer is ten minus three.", "10"),  # "minus" after a number is the operator
    (COUNT_5, "The answer is (x + 2) minus two.", "2"),
    (COUNT_5, "| Answer choice | Count |\n|---|---|\n| a | 5 |", "5"),  # a header is no answer label
    (COUNT_5, "The answer is |-5|.", "-5"),  # an absolute value keeps its bars
    (CLOCK, "The answer is quarter to (option D).", "D"),
    (CLOCK, "The answer is quarter (option D).", "quarter (option D)"),  # text and letter disagree: no letter
])
def test_neighbouring_answers_keep_their_reading(item, response, extracted):
    assert extract_mathvista_answer(response, item) == extracted


def test_the_official_mathvista_pipeline_agrees():
    assert_official_mathvista_agrees(VISTA)
