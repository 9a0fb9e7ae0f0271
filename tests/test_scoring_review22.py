"""Review 22: structured, multilingual and markdown-heavy MATH-Vision answers, as real model runs write them.

A sixth, independent generator wrote, on MATH-V rows with options and free-form rows, the shapes reviews 20 and 21
ran on MathVista only: GPT-4o / Claude / Gemini markdown ("### Step 1", "## Answer", "**Answer: (B)**", bullets
ending with the answer, display math ``\\[ x = 12 \\]`` / ``$$...$$`` on one or several lines, "The answer is:" with
the answer on the next line), terse InternVL / LLaVA outputs ("B", "B.", "Option B", the option's content alone),
JSON and Python dicts, "answer: B", ``<answer>`` / ``<final>`` / ``<output>`` / ``<result>`` / ``<final_answer>``
tags, code blocks closing the response, conclusions in Spanish, French, German, Japanese, Korean and Russian, Greek
and Cyrillic capitals that look like A / B / E, numbers in words ("twelve", "a dozen"), ranges and hedges ("between
11 and 13, most likely 12"), answers followed by a self-check naming other numbers, and outputs cut by the token
limit; each right and wrong, after reasoning in six styles (some ending with an equation, a table row or an
approximation). Of 185,010 pairs (162,818 distinct, 214 shapes over 1,099 test rows: every 4th row, all 95 with a
symbolic or odd gold and every third row with text options), mmevo and the official scorer (lmms-eval's port
given back the official ``from math import *``, 20 s per answer, never reached) disagreed on none.

The official scorer is deterministic code, so MathVista's GPT-extraction convention does not apply: mmevo keeps its
readings, however far from what the response means. Without a box or an English marker the response after its
last "=" or ``\\approx``, lower-cased and without spaces, is the answer, and latex2sympy2 reads it only up to the
first "." after a complete expression: the reasoning's ``\\approx 3.43`` wins over "Hence $$12$$",
"## Answer\\n\\n12", JSON, YAML, tags, code blocks and every other language's marker, which all score wrong.
"\\[ x = 12 \\]" scores wrong (the ``\\]`` stays after the last "="), a display cut before its ``\\]`` scores
right; "**12**", "Option B", a Greek "Β", "twelve", "11-13" and ``12 \\pm 1`` score wrong; "The answer is: B",
"**Final Answer:** B.", "La respuesta es B." (the official " B." ending) and an option's content alone score right.
The sample below is pinned with the official verdicts, which ``test_the_official_mathvision_scorer_agrees``
recomputes in ``.venv-parity`` with review 16's check.
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import score_mathvision
from test_scoring_review16 import assert_official_mathvision_agrees

# MATH-V test rows' options: row 2 (letters), row 83 (lengths), row 19 (expressions), row 15 (days)
LETTERS = ["A", "B", "C", "D", "E"]
LENGTHS = ["$20 \\mathrm{~cm}$", "$21 \\mathrm{~cm}$", "$22 \\mathrm{~cm}$", "$23 \\mathrm{~cm}$", "$25 \\mathrm{~cm}$"]
PRODUCTS = ["$2+4+3$", "$2 \\cdot 4+3$", "$2+4 \\cdot 3$", "$2 \\cdot 4 \\cdot 3$", "$2+4-3$"]
DAYS = ["Wednesday", "Thursday", "Friday", "Tuesday", "Sunday"]

# GPT-4o-style markdown reasoning ending with an approximation, as the generator wrote it
MD = ("### Step 1: Understand the figure\n\nThe figure shows a square of side 4 and a circle of radius 2.\n\n"
      "### Step 2: Compute\n\nThe shaded area is $16 - 4\\pi \\approx 3.43$.\n\n")
CHECK = ("\n\nLet me double-check: if the side were 5, the area would be 25, not 16; with 3 pieces we would get 9. "
         "Checking option A (7) and option E (20) again: both fail.")

# (response, answer, options, official verdict)
SHAPES = [
    # markdown headings, bold final lines, bullets, "The answer is:" on its own line
    (MD + "## Answer\n\nB", "B", LETTERS, False),  # read: "3.43.##answerb" -> 3.43
    (MD + "### Final Answer\n\n**B**", "B", LETTERS, False),
    (MD + "**Answer: (B)**", "B", LETTERS, False),
    (MD + "**Final Answer:** B.", "B", LETTERS, True),  # the official " B." ending
    (MD + "- The pattern holds for every row.\n- Therefore, the answer is **B**.", "B", LETTERS, False),
    (MD + "The answer is:\nB", "B", LETTERS, False),  # the marker's own line is ":"
    (MD + "The answer is: B", "B", LETTERS, True),
    (MD + "The final answer is:\n\\[\n\\boxed{B}\n\\]", "B", LETTERS, True),
    (MD + "The answer is **12**.", "12", [], False),
    (MD + "### Final Answer\n\n**12**", "12", [], False),
    (MD + "Hence\n$$\n12\n$$", "3.43", [], True),  # the reasoning's last value wins
    # display math as the conclusion
    (MD + "$$\n\\text{Answer} = B\n$$", "B", LETTERS, True),
    (MD + "Therefore,\n\\[ x = 12 \\]", "12", [], False),  # "12\\]" has no value
    (MD + "Thus:\n\\[\nx = 12\n\\]", "12", [], False),
    (MD + "Hence\n$$\n12\n$$", "12", [], False),
    (MD + "\\[ 12 \\]", "12", [], False),
    (MD + "\\[\n\\begin{aligned}\nx &= 2 + 10 \\\\\n  &= 12\n\\end{aligned}\n\\]", "12", [], False),
    (MD + "So the result is \\(12\\).", "12", [], False),
    # terse outputs
    ("B", "B", LETTERS, True),
    ("B.", "B", LETTERS, True),
    ("Option B", "B", LETTERS, False),
    ("(B)", "B", LETTERS, True),
    ("b.", "B", LETTERS, True),
    ("B) $21 \\mathrm{~cm}$", "B", LENGTHS, False),
    ("$21 \\mathrm{~cm}$", "B", LENGTHS, False),  # the raw option keeps its "$"; "21 cm" has no value
    ("$2 \\cdot 4 \\cdot 3$", "D", PRODUCTS, True),
    ("24", "D", PRODUCTS, True),  # the option's value
    ("Wednesday", "A", DAYS, True),
    ("The answer is Wednesday.", "A", DAYS, True),
    # JSON, dicts, "answer: B"
    ('{"answer": "B"}', "B", LETTERS, False),
    ('{"final_answer": 12}', "12", [], False),
    ("{'answer': 12}", "12", [], False),
    ("answer: B", "B", LETTERS, False),
    ("Answer: 12", "12", [], False),
    ("reasoning: see the figure\nanswer: 12\nconfidence: high", "12", [], False),
    (MD + '```json\n{"answer": "B", "confidence": 0.9}\n```', "B", LETTERS, False),
    # tags
    ("<think>" + MD + "</think>\n<final>B</final>", "B", LETTERS, False),
    ("<think>" + MD + "</think>\n<output>12</output>", "12", [], False),
    ("<result>The answer is 12.</result>", "12", [], True),  # "12." then the stop at "."
    ("<result>The answer is B.</result>", "B", LETTERS, False),
    ("<think>" + MD + "</think>\n<answer>12", "12", [], False),
    # code blocks closing the response
    (MD + "```\n12\n```", "12", [], False),
    (MD + "```python\nprint(2 + 3)\n```\nOutput:\n```\n12\n```", "12", [], False),
    (MD + "```latex\n\\boxed{12}\n```", "12", [], True),
    # other languages
    (MD + "La respuesta es B.", "B", LETTERS, True),
    (MD + "La respuesta es 12.", "12", [], False),
    (MD + "La réponse est 12", "12", [], False),
    (MD + "Die richtige Antwort ist Option B.", "B", LETTERS, True),
    (MD + "答えは B です。", "B", LETTERS, False),
    (MD + "정답은 12입니다.", "12", [], False),
    (MD + "Ответ: 12", "12", [], False),
    (MD + "Ответ: 12.", "12", [], False),
    (MD + "Respuesta: 2,5", "2.5", [], False),
    # Greek and Cyrillic capitals
    (MD + "The answer is Β.", "B", LETTERS, False),
    (MD + "\\boxed{Β}", "B", LETTERS, False),
    (MD + "The answer is В.", "B", LETTERS, False),
    ("Ε", "E", LETTERS, False),
    # numbers in words, ranges and hedges
    (MD + "The answer is twelve.", "12", [], False),
    (MD + "The answer is a dozen.", "12", [], False),
    (MD + "\\boxed{twelve}", "12", [], False),
    (MD + "The answer is 12 (twelve).", "12", [], False),
    (MD + "The answer is between 11 and 13, most likely 12.", "12", [], False),
    (MD + "Between 11 and 13, most likely 12.", "12", [], False),
    (MD + "The answer is 11-13.", "12", [], False),
    (MD + "\\boxed{12 \\pm 1}", "12", [], False),
    (MD + "The answer is either C or B, most likely B.", "B", LETTERS, True),
    (MD + "The answer is probably B.", "B", LETTERS, True),
    # a self-check after the answer
    (MD + "The answer is 12." + CHECK, "12", [], True),
    (MD + "\\boxed{12}" + CHECK, "12", [], True),
    (MD + "**Answer: B**" + CHECK, "B", LETTERS, False),
    (MD + "The answer is 12.\n\nCheck: $\\boxed{13}$ would exceed the limit.", "12", [], False),
    # cut by the token limit
    (MD + "The answer is", "12", [], False),
    (MD + "\\boxed{1", "12", [], False),
    (MD + "The answer is 1", "12", [], False),
    (MD + "The answer is 12. Let me verify: 3 + 4 = 7, and 7 \\times 2 = 1", "12", [], True),
    (MD + "\\[\nx = 12", "12", [], True),  # no "\\]" left after the "="
    (MD + "The answer is B. Let me verify by checking option C: it gives 1", "B", LETTERS, True),
]


@pytest.mark.parametrize("response,answer,options,official", SHAPES)
def test_structured_and_multilingual_answers_keep_the_official_verdict(response, answer, options, official):
    assert score_mathvision(response, {"answer": answer, "options": options}) is official


def test_the_official_mathvision_scorer_agrees():
    assert_official_mathvision_agrees(SHAPES)
