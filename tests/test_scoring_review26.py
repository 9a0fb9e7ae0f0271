"""Review 26 (``scripts/parity_styles.py --styles new``): every shipped row's gold in markdown (bold, inline code,
code fences, a table), after "Final answer:" / "Answer:" / "答案", option texts differing by case / punctuation /
a trailing period / LaTeX, trailing zeros, a leading "+", units glued on, degree variants, "x=5", two answers,
ranges, intervals, vectors, yes / no for free-form rows, precision edges, long responses with the answer first or
last. One MathVista class missed the answer stated:

1. an answer in markdown inline code: "The answer is `C`." was read "`C`" (which the nearest-choice rule maps to
   some choice: 365 of 540 testmini multiple-choice rows wrong), a whole response "`A`" was read "" (524 of 540
   wrong). What a GPT extraction returns for either is the letter inside;
2. an answer stated first in a response over 20,000 characters ("C\n\n<25,000 characters of explanation>",
   "The answer is 4.\n<...>"): only the last 20,000 characters were read, so the answer was never seen (0 of 540
   multiple-choice and 45 of 460 free-form testmini rows right, the 45 by a number in the explanation). The GPT
   extraction sees the whole response; mmevo now reads the first 2,000 characters too (the cost stays bounded);
3. a whole response that is a worded choice without its punctuation ("The population of predatory insects would
   decrease" for the choice ending in "."; "Does Lindas snowboard ... wax" for "Does Linda's snowboard ... wax?"):
   read "" (an unmarked text naming no choice), 38 of 540 rows wrong. The GPT extraction returns the text, which
   the official nearest-choice rule maps to that choice.

As in reviews 16-25, where the official rule paths do not fire the official GPT extraction is taken to be the answer
the response states; ``test_the_official_mathvista_pipeline_agrees`` recomputes every verdict below in
``.venv-parity``.
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import extract_mathvista_answer, score_mathvista
from test_scoring_review16 import _ff, _mc, assert_official_mathvista_agrees

# MathVista testmini rows, as in testmini.json
ANGLES_145 = _mc("3", ["135°", "140°", "145°", "150°"], "145°")
QUARTER = _mc("7", ["half", "quarter", "o'clock", "quarter to", "quarter past"], "quarter")
LENGTHS = _mc("6", ["6cm", "7cm", "4cm", "5cm"], "6cm")
INSECTS = _mc("50", ["The population of steelheads would decrease.", "The population of stickleback fry would increase.",
                     "The population of predatory insects would increase.",
                     "The population of predatory insects would decrease."],
              "The population of predatory insects would decrease.")
WAX = _mc("18", ["Does Linda's snowboard slide down a hill in less time when it has a thin layer of wax or a thick layer of "
                 "wax?", "Does Linda's snowboard slide down a hill in less time when it has a layer of wax or when it does "
                 "not have a layer of wax?"],
          "Does Linda's snowboard slide down a hill in less time when it has a layer of wax or when it does not have a "
          "layer of wax?")
PDE = _mc("470", ["Baseline", "Diffusion", "PDE-Refiner", "Pushforward"], "PDE-Refiner")
SUMS = _mc("798", ["k + n + r", "k + p + s", "n + p + s", "n + p + t", "r + s + t"], "k + p + s")
SIGNS = _mc("x1", ["2", "-2", "0", "-1"], "-2")
HEIGHT = _ff("1", "float", "1.2", 1)
COUNT_4 = _ff("4", "integer", "4")

COT = "The two marked angles are equal, so the third follows from the angle sum."

# an explanation longer than the 20,000 characters read at a response's end, naming no answer
EXPLANATION = ("The two marked segments are equal, so the triangle is isosceles and the base angles are equal. " * 300)
assert len(EXPLANATION) > 25_000

# (item, response, what the official GPT extractor returns for it, the official verdict)
VISTA = [
    (ANGLES_145, f"{COT}\n\nThe answer is `C`.", "C", True),  # was '`C`' -> nearest choice
    (QUARTER, f"{COT}\n\nThe answer is `B`.", "B", True),  # was '`B`' -> nearest choice
    (LENGTHS, "`A`", "A", True),  # was ''
    (ANGLES_145, "`C`", "C", True),  # was ''
    (ANGLES_145, f"{COT}\n\nAnswer: `C`", "C", True),  # was '`C`'
    (ANGLES_145, f"{COT}\n\n**Answer:** `C`.", "C", True),  # was '`C`'
    (ANGLES_145, f"{COT}\n\nThe answer is `B`.", "B", False),  # the wrong letter in code stays wrong
    (QUARTER, "`quarter`", "quarter", True),  # (agreed before, by the nearest text)
    # 2. the answer first, then a long explanation
    (ANGLES_145, f"C\n\n{EXPLANATION}", "C", True),  # was '' (nearest choice '135°')
    (ANGLES_145, f"The answer is C.\n\n{EXPLANATION}", "C", True),  # was ''
    (LENGTHS, f"**Answer:** A\n\n{EXPLANATION}", "A", True),  # was ''
    (COUNT_4, f"4\n\n{EXPLANATION}", "4", True),  # was ''
    (COUNT_4, f"The answer is 4.\n\n{EXPLANATION}", "4", True),  # was ''
    (HEIGHT, f"\\boxed{{1.2}}\n\n{EXPLANATION}", "1.2", True),  # was ''
    (COUNT_4, f"The answer is 5.\n\n{EXPLANATION}", "5", False),
    # the answer at the end of a long response still wins over one stated first
    (ANGLES_145, f"The answer is B.\n\n{EXPLANATION}\n\nOn reflection, the answer is C.", "C", True),
    (ANGLES_145, f"The answer is C.\n\n{EXPLANATION}\n\nOn reflection, the answer is B.", "B", False),
    # a box or a marked answer in the first 2,000 characters, answered or taken back at the end of a response over
    # 20,000 characters: what followed the box / marker was read only to 20,000 characters, so the head's "3" won
    (COUNT_4, f"First guess: \\boxed{{3}}\n\n{EXPLANATION}\n\nThe answer is 4.", "4", True),  # was '3'
    (COUNT_4, f"\\boxed{{3}}\n\n{EXPLANATION[:20_500]}\n\nThe answer is 4.", "4", True),  # 20,540 chars: was '3'
    (ANGLES_145, f"\\boxed{{B}}\n\n{EXPLANATION}\n\nTherefore, the answer is C.", "C", True),  # was 'B'
    (COUNT_4, f"The answer is 3.\n\n{EXPLANATION}\n\nWait, actually it is 4.", "4", True),  # was '3'
    # 3. a worded choice without its punctuation
    (INSECTS, "The population of predatory insects would decrease", "The population of predatory insects would "
     "decrease", True),  # was ''
    (INSECTS, "the population of predatory insects would decrease!", "the population of predatory insects would "
     "decrease!", True),  # was ''
    (WAX, "Does Lindas snowboard slide down a hill in less time when it has a layer of wax or when it does not have a "
     "layer of wax", "Does Lindas snowboard slide down a hill in less time when it has a layer of wax or when it does "
     "not have a layer of wax", True),  # was ''
    (INSECTS, "The population of predatory insects would increase", "The population of predatory insects would "
     "increase", False),  # was ''
    (PDE, "PDERefiner", "PDERefiner", True),  # was ''
    (SUMS, "k  p  s", "k  p  s", True),  # was ''
    (SUMS, "n  p  s", "n  p  s", False),  # was ''
    # shapes that already agreed, pinned
    (INSECTS, "The population of predatory insects would decrease.", "The population of predatory insects would "
     "decrease.", True),
    (ANGLES_145, f"{EXPLANATION}\n\nThe answer is C.", "C", True),
    (ANGLES_145, f"{COT}\n\n```\nC\n```", "C", True),
    (HEIGHT, f"{COT}\n\nThe answer is `1.2`.", "1.2", True),
    (COUNT_4, "`4`", "4", True),
    (COUNT_4, "`5`", "5", False),
]


@pytest.mark.parametrize("item,response,gpt_extraction,official", VISTA)
def test_mathvista_inline_code_and_answer_first_get_the_official_verdict(item, response, gpt_extraction, official):
    assert score_mathvista(response, item) is official


@pytest.mark.parametrize("item,response,extracted", [
    (ANGLES_145, "The answer is `C`.", "C"),
    (LENGTHS, "`A`", "A"),
    (ANGLES_145, "Answer: ``C``", "C"),
    (QUARTER, "`quarter`", "quarter"),
    (COUNT_4, "The answer is `4`.", "4"),
    (INSECTS, "The population of predatory insects would decrease", "The population of predatory insects would decrease."),
    # numbers are not words: "-2" is not the choice "2" (a sign is no punctuation)
    (SIGNS, "The answer is -2", "-2"),
    (SIGNS, "-2", "-2"),
    # code that is not the answer alone is left as it is
    (ANGLES_145, "The answer is `C` or `D`.", "`C` or `D`"),
])
def test_answers_are_read_as_stated(item, response, extracted):
    assert extract_mathvista_answer(response, item) == extracted


def test_a_long_response_is_read_in_bounded_time():
    import time

    response = "The answer is C.\n\n" + EXPLANATION * 40 + "\n\n(1)" * 1000  # over a million characters
    t0 = time.process_time()
    assert score_mathvista(response, ANGLES_145) is True
    assert time.process_time() - t0 < 2.0


def test_the_official_mathvista_pipeline_agrees():
    assert_official_mathvista_agrees(VISTA)
