"""Spot-check 14: 200 random rows of each shipped benchmark file (MATH-V testmini and test, MathVista testmini), the
gold answer rewritten adversarially (spaces, trailing period, "The answer is ...", "$...$", "\\(...\\)", boxes,
units, bold, "Answer:", quotes, a chain of thought before it; a wrong answer in the same shapes as a control), each
verdict compared with the official scorer. MATH-V agreed on every pair; MathVista on every pair where the official
rule paths fire. Where they do not (the official GPT extraction would be asked), one class missed the answer stated:

a multiple-choice letter in inline math before a closing full stop, "The answer is $D$." (also "$\\text{D}$.",
"$\\mathrm{D}$."): the trailing "$" was stripped only at the very end, so the period kept it and the candidate
read "D$", which names no option: scored wrong (63 of 63 such answers to the 200 rows' multiple-choice rows).

As in reviews 16-24, the official GPT extraction is taken to be the letter stated, as the extraction prompt's own
multiple-choice example extracts "B" from "(B) 8/11"; ``test_the_official_mathvista_pipeline_agrees`` recomputes
every verdict below in ``.venv-parity``.
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import extract_mathvista_answer, score_mathvista
from test_scoring_review16 import _ff, _mc, assert_official_mathvista_agrees

# MathVista testmini rows, as in testmini.json
ANGLE_25 = _mc("977", ["65°", "5°", "15°", "25°"], "25°")
YES_NO = _mc("14", ["Yes", "No"], "Yes")
FRACTIONS = _mc("510", ["\\frac{2}{3}", "\\frac{3}{5}", "\\frac{3}{4}", "\\frac{4}{5}"], "\\frac{4}{5}")
SIX_CHOICES = _mc("394", ["HomeGrid", "Msgr S1", "Msgr S2", "Msgr S3", "VLN", "LangRoom"], "LangRoom")
COUNT_12 = _ff("100", "integer", "12")

COT = "We look at the figure and compare the options one by one."
VISTA = [
    (ANGLE_25, "The answer is $D$.", "D", True),  # was 'D$'
    (ANGLE_25, f"{COT}\nThe answer is $D$.", "D", True),  # was 'D$'
    (ANGLE_25, "The answer is $A$.", "A", False),  # was 'A$' (wrong either way)
    (YES_NO, "The answer is $A$.", "A", True),  # was 'A$'
    (YES_NO, "The answer is $\\text{A}$.", "A", True),  # was 'A$'
    (YES_NO, "So the answer is $\\mathrm{B}$.", "B", False),  # was 'B$'
    (FRACTIONS, "Answer: $D$.", "D", True),  # was 'D$'
    (SIX_CHOICES, "The answer is $F$ .", "F", True),  # was 'F$'
    (SIX_CHOICES, "Therefore the answer is $E$。", "E", False),  # was 'E$'
    # neighbours that already read right
    (ANGLE_25, "The answer is $D$", "D", True),
    (ANGLE_25, "The answer is $(D)$.", "D", True),
    (COUNT_12, "The answer is $12$.", "12", True),
]


@pytest.mark.parametrize("item,response,gpt_extraction,official", VISTA)
def test_a_letter_in_inline_math_before_a_full_stop_gets_the_official_verdict(item, response, gpt_extraction,
                                                                               official):
    assert score_mathvista(response, item) is official


@pytest.mark.parametrize("item,response,extracted", [
    (ANGLE_25, "The answer is $D$.", "D"),
    (YES_NO, "The answer is $\\text{A}$.", "A"),
    (SIX_CHOICES, "Therefore the answer is $E$。", "E"),
    (COUNT_12, "The answer is $12$.", "12"),
    (COUNT_12, "The answer is $5 + 7 = 12$.", "12"),  # (the inner "$" of a formula is not the one stripped)
])
def test_a_letter_in_inline_math_is_read_without_its_dollar(item, response, extracted):
    assert extract_mathvista_answer(response, item) == extracted


def test_the_official_mathvista_pipeline_agrees():
    assert_official_mathvista_agrees(VISTA)
