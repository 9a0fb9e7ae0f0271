"""Review 19: messy MATH-Vision answers, as real model runs write them, against the official scorer.

A fourth, independent generator wrote the shapes small VLMs produce on MATH-V rows with options and on free-form rows:
an empty ``\\boxed{}`` before or after the answer, two different boxes (apart or glued, ``\\boxed{B}\\boxed{C}``), a
box revised in words, ``<answer>`` tags with and without a box inside, ``\\boxed{B: 12}``,
``\\boxed{\\text{(B) }12}``, ``\\boxed{(b)}``, full-width "（Ｂ）" / "５", looping and truncated text (cut inside a box),
``\\fbox{}``, ``\\boxed {B}``, ``$\\boxed{B}$``, "**B**", ``\\boxed{B.}``, ``\\text`` / ``\\mathrm`` / ``\\textbf`` in
the box, decimal commas, units in words, degrees, percents, ``\\frac12``, ``\\sqrt2``, ``2\\sqrt{3}`` for
``\\sqrt{12}``, negative zero, leading plus signs, Unicode minus signs and no-break spaces, Chinese conclusions. On
93,357 such response / row pairs (67,327 distinct, 164 shapes over 970 test rows: every 4th row, all 95 rows with a
symbolic or odd gold and 141 rows with text options), mmevo and the official scorer (lmms-eval's port given back the
official ``from math import *``, 20 s per answer, never reached) disagreed on none. The official readings are often
not what the response means (an empty box after the answer, a space before the brace, ``\\fbox``, a full-width letter,
``\\mathrm{B}`` or a decimal comma score wrong; ``\\boxed{12\\%}`` scores right against 12): mmevo follows them. A
sample of the shapes, pinned with the official verdicts, which ``test_the_official_mathvision_scorer_agrees``
recomputes in ``.venv-parity`` with review 16's check.
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import score_mathvision
from test_scoring_review16 import assert_official_mathvision_agrees

# MATH-V test rows' options: row 2 (letters), row 83 (lengths)
LETTERS = ["A", "B", "C", "D", "E"]
LENGTHS = ["$20 \\mathrm{~cm}$", "$21 \\mathrm{~cm}$", "$22 \\mathrm{~cm}$", "$23 \\mathrm{~cm}$", "$25 \\mathrm{~cm}$"]
COT = "Let me look at the figure carefully. The two triangles share a side, so the base angles are equal.\n\n"
LOOP = "Wait, let me re-check the figure. "

# (response, answer, options, official verdict)
MESSY = [
    # empty boxes, several boxes, revisions
    (COT + "\\boxed{}\n\nThe answer is B.", "B", LETTERS, True),
    (COT + "The answer is B.\n\n\\boxed{}", "B", LETTERS, False),
    (COT + "\\boxed{B}\n\nWait, let me check again.\n\n\\boxed{}", "B", LETTERS, False),
    (COT + "\\boxed{12}\n\nWait, let me check again.\n\n\\boxed{}", "12", [], False),
    (COT + "\\boxed{}\n\nSo $x = \\frac{1}{2}$.", "\\frac{1}{2}", [], True),  # no box left: the last "="
    (COT + "\\boxed{C}\n\nWait, that's wrong. \\boxed{B}", "B", LETTERS, True),
    (COT + "\\boxed{B}\\boxed{C}", "B", LETTERS, False),
    (COT + "\\boxed{C}\\boxed{B}", "B", LETTERS, True),
    (COT + "\\boxed{13}\n\nWait, let me recount... so the answer is 12.", "12", [], True),
    (COT + "\\boxed{B}\n\nThe answer is C.", "B", LETTERS, False),
    # answer tags
    ("<think>" + COT + "</think>\n<answer>B</answer>", "B", LETTERS, False),
    ("<think>" + COT + "</think>\n<answer>\\boxed{B}</answer>", "B", LETTERS, True),
    ("<think>" + COT + "</think>\n<answer>12</answer>", "12", [], False),
    ("<think>" + COT + "</think>\n<answer>The answer is 12.</answer>", "12", [], True),
    # letters in boxes
    (COT + "\\boxed{B: $21 \\mathrm{~cm}$}", "B", LENGTHS, False),
    (COT + "\\boxed{\\text{(B) }21 \\mathrm{~cm}}", "B", LENGTHS, False),
    (COT + "\\boxed{21 \\mathrm{~cm}}", "B", LENGTHS, False),
    (COT + "\\boxed{(b)}", "B", LETTERS, True),
    (COT + "\\boxed{b}", "B", LETTERS, True),
    (COT + "\\boxed{B.}", "B", LETTERS, True),
    (COT + "\\boxed{\\text{B}}", "B", LETTERS, True),
    (COT + "\\boxed{\\mathrm{B}}", "B", LETTERS, False),
    (COT + "\\boxed{\\textbf{B}}", "B", LETTERS, False),
    (COT + "\\boxed{\\text{Option B}}", "B", LETTERS, False),
    (COT + "\\boxed {B}", "B", LETTERS, False),
    (COT + "$\\boxed{B}$", "B", LETTERS, True),
    (COT + "\\fbox{B}", "B", LETTERS, False),
    (COT + "**B**", "B", LETTERS, False),
    (COT + "The answer is (b).", "B", LETTERS, True),
    # full-width letters and digits
    (COT + "\\boxed{Ｂ}", "B", LETTERS, False),
    (COT + "答案是（Ｂ）", "B", LETTERS, False),
    (COT + "The answer is ５.", "5", [], False),
    (COT + "\\boxed{５}", "5", [], False),
    # looping and truncated text
    (COT + LOOP * 30 + "\\boxed{B}", "B", LETTERS, True),
    (COT + "The answer is 12. " + LOOP * 12, "12", [], True),
    (COT + "\\boxed{1", "12", [], False),
    (COT + "\\boxed{12", "12", [], False),
    (COT + "So the answer is \\boxed{", "12", [], False),
    # Chinese conclusions
    (COT + "所以答案是 B。", "B", LETTERS, False),
    (COT + "故选B", "B", LETTERS, False),
    (COT + "综上所述，答案为 $\\boxed{12}$。", "12", [], True),
    # numbers: decimal commas, units, degrees, percents, signs
    (COT + "\\boxed{2,5}", "2.5", [], False),
    (COT + "The answer is 2,5.", "2.5", [], False),
    (COT + "\\boxed{12 apples}", "12", [], False),
    (COT + "\\boxed{12 \\text{ degrees}}", "12", [], False),
    (COT + "The answer is 12 cm.", "12", [], False),
    (COT + "\\boxed{45^\\circ}", "45", [], True),
    (COT + "\\boxed{45°}", "45", [], False),
    (COT + "\\boxed{250\\%}", "2.5", [], False),
    (COT + "\\boxed{50\\%}", "\\frac{1}{2}", [], False),
    (COT + "\\boxed{12\\%}", "12", [], True),
    (COT + "\\boxed{-0}", "0", [], True),
    (COT + "\\boxed{-0.0}", "0", [], True),
    (COT + "\\boxed{+12}", "12", [], True),
    (COT + "The answer is +12.", "12", [], True),
    (COT + "\\boxed{−12}", "12", [], False),
    (COT + "\\boxed{12\u00a0cm}", "12", [], False),
    # fractions and roots
    (COT + "\\boxed{\\frac12}", "\\frac{1}{2}", [], False),
    (COT + "\\boxed{\\dfrac{1}{2}}", "\\frac{1}{2}", [], True),
    (COT + "\\boxed{\\sqrt{12}}", "2\\sqrt{3}", [], True),
    (COT + "\\boxed{2\\sqrt3}", "2\\sqrt{3}", [], True),
    (COT + "\\boxed{3.46}", "2\\sqrt{3}", [], True),
    (COT + "\\boxed{\\sqrt2}", "1.41", [], True),
]


@pytest.mark.parametrize("response,answer,options,official", MESSY)
def test_messy_answers_keep_the_official_verdict(response, answer, options, official):
    assert score_mathvision(response, {"answer": answer, "options": options}) is official


def test_the_official_mathvision_scorer_agrees():
    assert_official_mathvision_agrees(MESSY)
