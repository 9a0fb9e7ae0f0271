"""Review 28 (``scripts/parity_styles.py --styles fourth``): every shipped row's gold in markdown italics / underscores /
headings / bullets, after "Final Answer:" variants (the Minerva "Final Answer: The final answer is $X$. I hope it is
correct."), quoted, with a closing "!", in display math, in a sentence, with a unit in LaTeX, in words, with a decimal
comma, at the rounding edges of its precision, in \\left( \\right), pi / root spellings, option sentences
("Option B is correct.", "\\boxed{Answer: Option C}"), "None of the above", lists without brackets.

MATH-V: 0 disagreements with the official ``evaluate.py`` (every 20th test row, 10,993 pairs). MathVista (1,000
testmini rows, 70,760 pairs): 3,272 disagreed, now 163, all the documented "None of the above" on its own (an
unmarked text naming no option is no answer; ``VISTA_DOCUMENTED``). The classes fixed:

1. markdown emphasis with underscores, "__C__" / "_C_" / "The answer is _C_.": read "" or "_C_" (540 / 365 of 540
   multiple-choice rows wrong);
2. a closing "!", "C!": read "" (524 of 540 wrong);
3. an answer in math that opens a sentence going on, "Final Answer: The final answer is $C$. I hope it is correct.":
   read "C$. I hope it is correct" (356 of 540 letter rows wrong, and 10 with a number as the option text: "6. I hope
   ..." is no choice);
4. a boxed answer written as a sentence, "\\boxed{Option C is correct.}", "\\boxed{C is the correct answer.}",
   "\\boxed{Answer: Option C}": read as that text, for the nearest-choice rule (about 360 of 540 wrong each);
5. "E - (b)" alone where the option texts are bracketed letters (pids 168 / 849): read as the text "(b)", the letter of
   the 2nd option, not option E with its own text.

Where the official rule paths do not fire, the official GPT extraction is taken to be the answer the response states
(as in reviews 16-27); ``test_the_official_mathvista_pipeline_agrees`` recomputes every verdict in ``.venv-parity``.
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import extract_mathvista_answer, score_mathvista
from test_scoring_review16 import _ff, _mc, assert_official_mathvista_agrees

# MathVista testmini rows, as in testmini.json
ANGLES_145 = _mc("3", ["135°", "140°", "145°", "150°"], "145°")
CLOCK = _mc("7", ["half", "quarter", "o'clock", "quarter to", "quarter past"], "quarter")
ROOTS = _mc("82", ["3", "3 \\sqrt 2", "6", "6 \\sqrt 2"], "6")
LETTER_TEXTS = _mc("168", ["(c)", "(a)", "(e)", "(d)", "(b)"], "(b)")
HEIGHT = _ff("1", "float", "1.2", 1)

# (item, response, what the official GPT extractor returns for it, the official verdict)
VISTA = [
    # 1. markdown emphasis with underscores
    (ANGLES_145, "__C__", "C", True),  # was ''
    (ANGLES_145, "The answer is _C_.", "C", True),  # was '_C_' -> nearest choice
    (CLOCK, "___quarter___", "quarter", True),
    (ANGLES_145, "__B__", "B", False),
    # 2. a closing exclamation mark
    (ANGLES_145, "C!", "C", True),  # was ''
    (CLOCK, "B!", "B", True),  # was ''
    (ANGLES_145, "D!", "D", False),
    (ANGLES_145, "The answer is ***C***!", "C", True),  # was 'C*!' (the mark after the emphasis)
    (ANGLES_145, "__C__!", "C", True),  # was ''
    # 3. math opening a sentence that goes on
    (ANGLES_145, "Final Answer: The final answer is $C$. I hope it is correct.", "C", True),  # was 'C$. I hope ...'
    (ROOTS, "Final Answer: The final answer is $6$. I hope it is correct.", "6", True),  # was '6. I hope ...'
    (ANGLES_145, "Final Answer: The final answer is $A$. I hope it is correct.", "A", False),
    (HEIGHT, "Final Answer: The final answer is $1.2$. I hope it is correct.", "1.2", True),
    # 4. a boxed sentence naming the option
    (ANGLES_145, "\\boxed{Option C is correct.}", "C", True),  # was 'Option C is correct' -> nearest choice
    (ANGLES_145, "\\boxed{C is the correct answer.}", "C", True),
    (CLOCK, "\\boxed{Answer: Option B}", "B", True),
    (ANGLES_145, "The answer is: Option C is correct.", "C", True),
    (ANGLES_145, "\\boxed{Option A is correct.}", "A", False),
    # 5. a letter with its own option's text after a dash, the texts being bracketed letters
    (LETTER_TEXTS, "E - (b)", "E", True),  # was '(b)' -> option 2
    (LETTER_TEXTS, "D - (d)", "D", False),
    # shapes that already agreed, pinned
    (ANGLES_145, "***C***", "C", True),
    (ANGLES_145, "The answer is $C$, since the angles are equal.", "C", True),
    (HEIGHT, "__1.2__", "1.2", True),
]


@pytest.mark.parametrize("item,response,gpt_extraction,official", VISTA)
def test_mathvista_underscores_exclamations_math_sentences_and_boxed_verdicts_get_the_official_verdict(
        item, response, gpt_extraction, official):
    assert score_mathvista(response, item) is official


@pytest.mark.parametrize("item,response,extracted", [
    (ANGLES_145, "__C__", "C"),
    (ANGLES_145, "The answer is _C_.", "C"),
    (ANGLES_145, "C!", "C"),
    (ANGLES_145, "Final Answer: The final answer is $C$. I hope it is correct.", "C"),
    (ANGLES_145, "\\boxed{Answer: Option C}", "C"),
    (ANGLES_145, "\\boxed{Option C is correct.}", "C"),
    (LETTER_TEXTS, "E - (b)", "E"),
    # a factorial is no closing mark; a LaTeX subscript is no emphasis
    (_ff("x", "integer", "120"), "\\boxed{5!}", "5"),
    (_ff("x", "integer", "3"), "The answer is x_3.", "3"),
    # a whole response that restates the options with dashes first is still not read as its first letter
    (ANGLES_145, "A - 135°\nB - 140°\nC - 145°\nD - 150°\n\nThe angle BOC is 145°.", "145°"),
    # a boxed text naming no option goes to the official nearest-choice rule as it is
    (ANGLES_145, "\\boxed{the largest angle}", "the largest angle"),
    # documented: "None of the above" on its own names no option (no answer: wrong)
    (ANGLES_145, "None of the above", ""),
])
def test_answers_are_read_as_stated(item, response, extracted):
    assert extract_mathvista_answer(response, item) == extracted


def test_the_official_mathvista_pipeline_agrees():
    assert_official_mathvista_agrees(VISTA)
