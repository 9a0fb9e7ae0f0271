"""Review 20: a fourth, independent generator of MathVista answers, in the styles of model families reviews 16-18 did
not imitate.

GPT-4o / Claude / Gemini: long markdown answers with "### Step 1" / "## Answer" headings, bold final lines
("**Answer: 12.5**", "**(B)**"), bullet lists whose last bullet holds the answer, a conclusion in LaTeX display math
(``\\[ x = 12 \\]``, ``$$...$$``, over one line or several) or inline math ("Therefore, $x = 12$.", ``\\( 12 \\)``),
``\\text{cm}``, ``^\\circ``, ``\\approx``, "The answer is:" with the answer on the next lines. InternVL / LLaVA /
MiniCPM / Phi: "B", "B.", "(B)", "Option B", "The answer is B. 12", the option text alone (other casing, a trailing
period, an article), "1)" / "i." numbering, "Yes". The official hint formats (the final value at the end, "12.0" for
an integer, a float at another precision, lists as "[1, 2]" / "1, 2" / "(1,2)"), numeric choices ("5", "5.0", "5
cm"), choices that are substrings of others, thousands separators, negative numbers, currency, percents, degrees.

As in reviews 16-18, where the official rule paths do not fire the official GPT extraction is taken to be the answer
the response states; ``test_the_official_mathvista_pipeline_agrees`` recomputes every verdict below in
``.venv-parity`` with review 16's machinery. mmevo's extractor missed five classes, each a "was ..." below:

1. an answer marker ending its line with the answer in display math over the next lines ("The answer is:\\n\\\\[\\n
   \\\\text{B}\\n\\\\]", was the "\\\\[" of its first line, or no answer);
2. an unmarked response whose conclusion is an equation naming a choice, in display or inline math or after a
   label ("\\\\[ x = 30 \\\\]", "Therefore, $x = 30$.", "- **Result: 30**" for the choice "30°", was no answer);
3. a choice text in LaTeX written without the choices' spaces ("\\\\frac{20}{3}" for "\\\\frac { 20 } { 3 }", was no
   answer; "6\\\\sqrt2" for "6 \\\\sqrt 2", was the choice "6");
4. a letter with its option's text after a comma ("Answer: C, 5", was the nearest text to "C, 5");
5. a choice in inline math delimiters ("the answer is \\\\(5\\\\).", was "\\\\(5\\\\)", the nearest text "4.5").
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import extract_mathvista_answer, score_mathvista
from test_scoring_review16 import _ff, _mc, assert_official_mathvista_agrees

# MathVista testmini rows, as in testmini.json
ANGLES_30 = _mc("55", ["60°", "45°", "30°", "25°"], "30°")
METRES = _mc("322", ["10m", "20m", "35m", "40m"], "40m")
FIVES = _mc("271", ["3", "4.5", "5", "6"], "5")
CLOCK = _mc("7", ["half", "quarter", "o'clock", "quarter to", "quarter past"], "quarter")
LETTERS = _mc("73", ["A", "B", "C", "D", "E", "F"], "D")
YES_NO = _mc("235", ["Yes", "No"], "Yes")
ROOTS = _mc("82", ["3", "3 \\sqrt 2", "6", "6 \\sqrt 2"], "6")
THIRDS = _mc("238", ["6", "\\frac { 20 } { 3 }", "7", "22 / 3"], "\\frac { 20 } { 3 }")
PI_THIRDS = _mc("640", ["\\frac { 3 } { 5 } \\pi", "\\frac { 5 } { 3 } \\pi", "5 \\pi", "10 \\pi"],
                "\\frac { 5 } { 3 } \\pi")
COUNT_5 = _ff("11", "integer", "5")
YEARS = _ff("415", "integer", "15017")
ANGLE_FLOAT = _ff("74", "float", "47.6", 1)
NEG_FLOAT = _ff("833", "float", "-4.3", 1)
DIGITS = _ff("506", "list", "[2014, 2016]")

STEPS = ("### Step 1: Understand the figure\nThe image shows the relevant quantities; we read them carefully.\n\n"
         "### Step 2: Compute\nUsing the values from the figure, we compare the quantities.\n\n")
GEMINI = "Here's how to solve this problem:\n\n* **Identify the parts:** the figure shows the given values.\n\n"
CLAUDE = "Looking at this image, I can see the key elements needed to answer the question.\n\n"

# (item, response, what the official GPT extractor returns for it, the official verdict)
VISTA = [
    # 1. the answer in display math over the lines after a marker
    (CLOCK, STEPS + "Therefore, the answer is:\n\\[\n\\text{B}\n\\]", "B", True),  # was '\\[' -> 'half'
    (LETTERS, STEPS + "Therefore, the answer is:\n\\[\n\\text{D}\n\\]", "D", True),  # was '\\[' -> 'A'
    (YES_NO, STEPS + "The answer is:\n$$\n\\text{B}\n$$", "B", False),  # was '$$': wrong either way
    (FIVES, STEPS + "The answer is:\n\\[\n5\n\\]", "5", True),  # was '\\[' -> '3'
    # 2. an unmarked conclusion that is an equation naming a choice
    (ANGLES_30, STEPS + "Thus\n\\[ x = 30 \\]", "30", True),  # was ''
    (ANGLES_30, STEPS + "$$\nx = 30\n$$", "30", True),  # was ''
    (ANGLES_30, STEPS + "Therefore, $x = 30$.", "30", True),  # was ''
    (ANGLES_30, STEPS + "Therefore, \\( x = 30 \\).", "30", True),  # was ''
    (ANGLES_30, GEMINI + "- The sum is computed above.\n- **Result: 30**", "30", True),  # was ''
    (ANGLES_30, STEPS + "Thus\n\\[ x = 45 \\]", "45", False),  # was '': wrong either way
    (METRES, STEPS + "Thus, the measure is \\(40^\\circ\\).", "40", True),  # was ''
    (METRES, STEPS + "Therefore, $\\angle ABC = 40^\\circ$.", "40", True),  # was ''
    # 3. a LaTeX choice text without the choices' spaces
    (THIRDS, "\\frac{20}{3}", "\\frac{20}{3}", True),  # was ''
    (THIRDS, STEPS + "So\n\\[\nx = \\frac{20}{3}\n\\]", "\\frac{20}{3}", True),  # was ''
    (PI_THIRDS, "\\frac{5}{3}\\pi", "\\frac{5}{3}\\pi", True),  # was ''
    (PI_THIRDS, STEPS + "Therefore, the answer is $\\frac{3}{5}\\pi$.", "\\frac{3}{5}\\pi", False),
    (ROOTS, "6\\sqrt2", "6\\sqrt2", False),  # was '6' (the choice "6"): scored right
    (ROOTS, STEPS + "So\n\\[\nx = 6\\sqrt2\n\\]", "6\\sqrt2", False),  # was '6'
    # 4. a letter, a comma and its option's text
    (FIVES, CLAUDE + "Answer: C, 5", "C", True),  # was 'C, 5' -> '4.5'
    (FIVES, CLAUDE + "Answer: B, 4.5", "B", False),
    # 5. a choice in inline math delimiters
    (FIVES, STEPS + "Thus, the answer is \\(5\\).", "5", True),  # was '\\(5\\)' -> '4.5'
    # shapes that already agreed, pinned
    (CLOCK, STEPS + "## Answer\n**(B)**", "B", True),
    (CLOCK, STEPS + "**Answer: (B) quarter**", "B", True),
    (CLOCK, STEPS + "## Final Answer\nThe correct option is **(B) quarter**.", "B", True),
    (CLOCK, CLAUDE + "- The figure shows the values.\n- Therefore, the answer is **B**.", "B", True),
    (CLOCK, CLAUDE + "Thus, the correct answer is:\n\n**(B) quarter**", "B", True),
    (CLOCK, "**Answer: B**\n\n### Explanation\nThe hands show options A, C and E are wrong.", "B", True),
    (CLOCK, "The answer is B. quarter", "B", True),
    (CLOCK, "Option B", "B", True),
    (CLOCK, "2) quarter", "quarter", True),
    (CLOCK, "ii. quarter", "quarter", True),
    (CLOCK, "A quarter.", "a quarter", True),  # an article, not the letter A
    (CLOCK, "Answer: quarter (B)", "B", True),
    (YES_NO, "Yes, because the figure shows it.", "Yes", True),
    (FIVES, "5 cm", "5 cm", True),
    (COUNT_5, STEPS + "## Answer\n**5**\n\n### Explanation\nThe bars show 45 and 50, a rise of 5.", "5", True),
    (COUNT_5, STEPS + "Therefore, the answer is:\n\\[ 5.0 \\]", "5.0", True),
    (COUNT_5, "The answer is 5.\n\nHere's my reasoning:\n1. The first bar is 45.\n2. The second is 50.", "5", True),
    (COUNT_5, STEPS + "**Answer: 5**\n\nLet me know if you have any other questions!", "5", True),
    (COUNT_5, "First, compare them step by step.\n\nThe final value is 5 (an integer).", "5", True),
    (YEARS, STEPS + "Thus\n\\[ x = 15,017 \\]", "15017", True),
    (ANGLE_FLOAT, STEPS + "$$\nd = 47.63\\,\\text{cm}\n$$", "47.63", True),  # the official round() to 1 digit
    (ANGLE_FLOAT, STEPS + "Therefore, $\\angle ABC = 47.5^\\circ$.", "47.5", False),
    (NEG_FLOAT, STEPS + "So, $x \\approx \u22124.3$.", "-4.3", True),
    (DIGITS, STEPS + "The answer is:\n\n**2014, 2016**", "[2014, 2016]", True),
    (DIGITS, "(2014,2016)", "[2014, 2016]", True),
]


@pytest.mark.parametrize("item,response,gpt_extraction,official", VISTA)
def test_mathvista_fourth_generator_answers_get_the_official_verdict(item, response, gpt_extraction, official):
    assert score_mathvista(response, item) is official


@pytest.mark.parametrize("item,response,extracted", [
    # neighbours the new rules must leave alone
    (ANGLES_30, STEPS + "The sum of the angles: 180", ""),  # a label with no choice after it: no answer
    (FIVES, STEPS + "Thus\n\\[ x = 7 \\]", ""),  # an equation whose right side is no choice
    (CLOCK, "Answer: C, quarter", "C, quarter"),  # the text of another option: no letter
    (FIVES, "Answer: C, because 5 fits", "C"),
    (COUNT_5, "The line break \\\\[2pt] then 5", "5"),  # a LaTeX line break's "\\[" is no display math
    (COUNT_5, "$$\nx = 5\n$$\nSo y = x + 2 = 7.", "7"),  # display math opening a derivation is not stated first
])
def test_neighbouring_answers_keep_their_reading(item, response, extracted):
    assert extract_mathvista_answer(response, item) == extracted


def test_the_official_mathvista_pipeline_agrees():
    assert_official_mathvista_agrees(VISTA)
