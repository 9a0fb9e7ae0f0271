"""Review 24 (MathVista): adversarial answers built from every answer type, precision, unit and choice form of
testmini.json (LaTeX, units, degrees, percent, thousands commas, scientific notation, trailing periods, several boxes,
letter vs text, "(A)" / "A." / "A)", lists, full-width digits, signs). Two classes read the wrong sign:

1. a sign in words before digits: "The answer is negative 3." was 3 (a sign in words before a number in words,
   "negative three", was already -3), also "minus 3" unless it is the operator of "10 minus 3";
2. a choice that is a negative number, stated with the minus U+2212 / U+2013 / U+FF0D or full-width digits ("x =
   \u22122", "\\boxed{\u22122}", "\uff0d\uff12"): was "2", the choice of the other sign, or the written text
   left to the nearest-choice rule (which picks "2" when it comes first). A free-form answer already read them.

And two classes missed the choice stated:

3. a choice with a square root or pi written otherwise than the choice writes it: the choices "2√{3}", "√{2}",
   "10 \\sqrt { 3 }" stated "2√3", "$√2$", "10√3" (was the text, which the nearest-choice rule maps to "2", or
   "2" read from "$√2$"), "9\\pi" for "9π" (agreed before, by the nearest text);
4. a choice that is a fraction, stated with a slash: the choices "\\frac{20}{3}", "\\frac { 40 } { 3 }",
   "\\frac{4}{3}" stated "20/3", "40/3", "4/3" (was the text, which the nearest-choice rule maps to "7" / "10" / "0.6").

As in reviews 16-23, where the official rule paths do not fire the official GPT extraction is taken to be the answer
the response states (for a multiple-choice row the letter of the choice stated, as the extraction prompt's own
multiple-choice example extracts "B" from "(B) 8/11"); ``test_the_official_mathvista_pipeline_agrees`` recomputes
every verdict below in ``.venv-parity``.
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import extract_mathvista_answer, score_mathvista
from test_scoring_review16 import _ff, _mc, assert_official_mathvista_agrees

# MathVista testmini rows, as in testmini.json
DMV_WAIT = _ff("45", "integer", "-3")
ELEVATOR = _ff("421", "integer", "-47")
PHE_ENERGY = _ff("833", "float", "-4.3", 1)
# testmini has no choice that is a negative number; these are such rows, both orders of the two signs
SIGNS_POSITIVE_FIRST = _mc("x1", ["2", "-2", "0", "-1"], "-2")
SIGNS_NEGATIVE_FIRST = _mc("x2", ["-2", "2", "0", "-1"], "-2")
SIGNS_POSITIVE_GOLD = _mc("x3", ["-2", "2", "0", "-1"], "2")
ROOT_3 = _mc("492", ["1", "√{3}", "2", "2√{3}"], "2√{3}")
ROOT_OR_3 = _mc("752", ["1", "√{3}", "2", "3"], "2")
ROOT_2 = _mc("916", ["2", "√{3}", "√{2}", "2-\\frac{√{3}}{3}"], "√{2}")
LATEX_ROOT = _mc("386", ["5", "10", "10 \\sqrt { 3 }", "20"], "10 \\sqrt { 3 }")
ROOT_METRES = _mc("523", ["10m", "5m", "5√{3}m", "10√{3}m"], "5√{3}m")
THIRDS = _mc("186", ["\\frac{20}{3}", "\\frac{10}{3}", "7", "\\frac{14}{3}"], "\\frac{20}{3}")
SPACED_THIRDS = _mc("310", ["10", "\\frac { 32 } { 3 }", "\\frac { 40 } { 3 }", "\\frac { 50 } { 3 }"],
                    "\\frac { 40 } { 3 }")
RATIO = _mc("203", ["\\frac{4}{3}", "0.75", "0.6", "0.8"], "\\frac{4}{3}")
PI_CHOICES = _mc("538", ["9π", "6π", "3π", "π"], "9π")

COT = "From the graph, the value starts at 4 and falls by 7 over the interval."

# (item, response, what the official GPT extractor returns for it, the official verdict)
VISTA = [
    # 1. a sign in words before digits
    (DMV_WAIT, f"{COT}\n\nThe answer is negative 3.", "-3", True),  # was '3'
    (DMV_WAIT, f"{COT}\n\nThe answer is minus 3.", "-3", True),  # was '3'
    (DMV_WAIT, f"{COT} So the change is negative 3.", "-3", True),  # was '3' (unmarked)
    (DMV_WAIT, "\\boxed{\\text{negative } 3}", "-3", True),  # was '3'
    (ELEVATOR, f"{COT}\n\nAnswer: negative 47", "-47", True),  # was '47'
    (PHE_ENERGY, f"{COT}\n\nThe energy is negative 4.3 kcal/mol.", "-4.3", True),  # was '4.3'
    (PHE_ENERGY, f"{COT}\n\nThe answer is negative 4.2.", "-4.2", False),  # (was '4.2': wrong either way)
    (SIGNS_POSITIVE_FIRST, f"{COT}\n\nThe answer is negative 2.", "B", True),  # was 'negative 2' -> nearest '2'
    # 2. a negative choice stated with another minus sign or full-width digits
    (SIGNS_POSITIVE_FIRST, f"{COT}\n\n\\boxed{{\u22122}}", "B", True),  # was '\u22122' -> nearest '2'
    (SIGNS_POSITIVE_FIRST, f"{COT}\n\nThe answer is \u22122.", "B", True),  # was '\u22122' -> nearest '2'
    (SIGNS_POSITIVE_FIRST, f"{COT}\n\nThe answer is \u2212 2.", "B", True),  # was '\u2212 2' -> nearest '2'
    (SIGNS_POSITIVE_FIRST, f"{COT}\n\nx = \u22122", "B", True),  # was '2'
    (SIGNS_POSITIVE_FIRST, "\u22122", "B", True),  # was '2'
    (SIGNS_POSITIVE_FIRST, "\uff0d\uff12", "B", True),  # was '2'
    (SIGNS_NEGATIVE_FIRST, f"{COT}\n\nSo the value is \u22122.", "A", True),  # was '2'
    (SIGNS_POSITIVE_GOLD, f"{COT}\n\nx = \u22122", "A", False),  # was '2': scored right
    # 3. a root or pi written otherwise than the choice writes it
    (ROOT_3, f"{COT}\n\nThe answer is 2√3.", "D", True),  # was '2√3' -> nearest '2'
    (ROOT_3, f"{COT}\n\n\\boxed{{2√3}}", "D", True),  # was '2√3' -> nearest '2'
    (ROOT_2, f"{COT}\n\nSo the distance is $√2$.", "C", True),  # was '2'
    (ROOT_2, f"{COT}\n\n\\boxed{{√2}}", "C", True),  # was '√2' -> nearest '2'
    (LATEX_ROOT, f"{COT}\n\n\\boxed{{10√3}}", "C", True),  # was '10√3' -> nearest '10'
    (ROOT_3, f"{COT}\n\nThe answer is √3.", "B", False),  # (was '√3' -> nearest '1': wrong either way)
    (ROOT_OR_3, f"{COT}\n\nThe answer is √3.", "B", False),  # (was '√3' -> nearest '3': wrong either way)
    (ROOT_METRES, f"{COT}\n\nThe answer is 5√3 m.", "C", True),  # (agreed by the nearest text)
    (PI_CHOICES, f"{COT}\n\n\\boxed{{9\\pi}}", "A", True),  # (agreed by the nearest text)
    # 4. a fraction stated with a slash
    (THIRDS, f"{COT}\n\nThe answer is 20/3.", "A", True),  # was '20/3' -> nearest '7'
    (THIRDS, f"{COT}\n\n\\boxed{{20/3}}", "A", True),  # was '20/3' -> nearest '7'
    (SPACED_THIRDS, f"{COT}\n\n\\boxed{{40/3}}", "C", True),  # was '40/3' -> nearest '10'
    (RATIO, f"{COT}\n\nAnswer: $4/3$", "A", True),  # was '4/3' -> nearest '0.6'
    (THIRDS, f"{COT}\n\n\\boxed{{10/3}}", "B", False),  # (was '10/3' -> nearest '7': wrong either way)
    # shapes that already agreed, pinned
    (THIRDS, f"{COT}\n\n\\boxed{{\\dfrac{{20}}{{3}}}}", "A", True),
    (DMV_WAIT, f"{COT}\n\nThe answer is -3.", "-3", True),
    (DMV_WAIT, f"{COT}\n\nThe answer is \u22123.", "-3", True),
    (DMV_WAIT, f"{COT}\n\n\\boxed{{\uff0d\uff13}}", "-3", True),
    (DMV_WAIT, f"{COT}\n\nThe answer is negative three.", "-3", True),
    (DMV_WAIT, f"{COT}\n\nIt is 7 minus 10 = -3.", "-3", True),
    (SIGNS_POSITIVE_FIRST, f"{COT}\n\nThe answer is -2.", "B", True),
    (SIGNS_POSITIVE_FIRST, f"{COT}\n\n\\boxed{{B}}", "B", True),
    (SIGNS_POSITIVE_GOLD, f"{COT}\n\nThe answer is 2.", "B", True),
]


@pytest.mark.parametrize("item,response,gpt_extraction,official", VISTA)
def test_mathvista_signs_roots_and_fractions_get_the_official_verdict(item, response, gpt_extraction, official):
    assert score_mathvista(response, item) is official


@pytest.mark.parametrize("item,response,extracted", [
    (DMV_WAIT, "The answer is negative 3.", "-3"),
    (PHE_ENERGY, "So the value is negative 4.3.", "-4.3"),
    (SIGNS_POSITIVE_FIRST, "x = \u22122", "-2"),
    (SIGNS_POSITIVE_FIRST, "\\boxed{\uff0d\uff12}", "-2"),
    (ROOT_3, "The answer is 2√3.", "2√{3}"),
    (ROOT_2, "So the distance is $√2$.", "√{2}"),
    (LATEX_ROOT, "\\boxed{10√3}", "10 \\sqrt { 3 }"),
    (PI_CHOICES, "\\boxed{9\\pi}", "9π"),
    (THIRDS, "The answer is 20/3.", "\\frac{20}{3}"),
    (SPACED_THIRDS, "\\boxed{40/3}", "\\frac { 40 } { 3 }"),
    # neighbours the new rules must leave alone
    (DMV_WAIT, "The answer is 10 minus 13, which is -3.", "10"),  # the operator (the marked answer's first number)
    (DMV_WAIT, "The answer is non-negative 3.", "3"),  # a word ending in "negative" is no sign
    (DMV_WAIT, "The answer is 3; the trend is negative.", "3"),  # a sign word before no number
    (SIGNS_POSITIVE_GOLD, "The answer is 2.", "2"),
])
def test_signs_roots_and_fractions_are_read_as_stated(item, response, extracted):
    assert extract_mathvista_answer(response, item) == extracted


def test_the_official_mathvista_pipeline_agrees():
    assert_official_mathvista_agrees(VISTA)
