"""Review 23: MATH-Vision answers as Qwen2.5-VL and the R1-style recipes that RL-tune it write them, on every row.

A seventh generator wrote, for every one of the 3,040 test rows, the outputs of Qwen2.5-VL-7B / 3B, base and
RL-tuned (this trainer, EasyR1 / verl, MM-UPT, R1-V): ``<think> ... </think> <answer> ... </answer>`` with and without
the tags, nested or unclosed, the answer tag holding a box, plain text, a sentence or the option's text; Minerva's
"Final Answer: The final answer is $\\boxed{12}$. I hope it is correct."; several boxes (an intermediate value boxed
before or after the answer, two answers boxed, a box in a box); for letter rows ``\\boxed{B}`` / ``\\boxed{(B)}`` /
``\\boxed{\\text{B}}`` / ``\\boxed{B. 12}`` / the option's content; fractions as ``\\frac{1}{2}`` / ``0.5`` /
``\\dfrac12`` / ``1/2`` / ``50\\%``; degrees, ``\\text{cm}``, ``\\mathrm{}``, "units", "km"; ``x=3``, ``3 \\text{ and } 5``,
``3, 5``, ``\\{3,5\\}``; Chinese conclusions (答案是 B, 故选B, 所以答案为 12); repetition loops cut by the token limit;
an empty think; the answer before the reasoning. Rows by answer type: 1,532 letter rows, 1,374 integer, 40 decimal,
30 fraction, 62 LaTeX expression (2 of them a letter without options), one interval / pair and one with units.

Of 99,795 distinct R1-style responses (52 shapes, 26 drawn per row with one right answer form each and a wrong
one every third shape) and 158,950 distinct (form, row) pairs that hand each of the generator's answer forms to the
official extraction directly (in a box, an answer tag, "the answer is", bare, a Chinese conclusion), mmevo and the
official scorer (lmms-eval's port given back the official ``from math import *``, 20 s per answer, never reached)
disagreed on none, nor on 29,991 reasoning tails after a last "=". Review 16's 48,640 pairs over every row,
rescored, and reviews 19 and 22's generators on every row (24,847 and 20,317 distinct pairs, a random draw of each
row's shapes) found none either.

The official script knows no tags: a response whose answer sits in ``<answer>12</answer>`` without a box or an
English flag is read whole (after its last "=") and scores wrong, as do 故选B and 所以答案为 12, while the answer tag
holding a box, Minerva's line and "The answer is B." in the think block score right. With several boxes the last
one counts, even an intermediate value boxed after the answer or the second of two answers. mmevo keeps all these
readings: the sample below is pinned with the official verdicts, which ``test_the_official_mathvision_scorer_agrees``
recomputes in ``.venv-parity`` with review 16's check.
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import score_mathvision
from test_scoring_review16 import assert_official_mathvision_agrees

# MATH-V test rows' options: row 2 (letters), row 83 (lengths), row 15 (days)
LETTERS = ["A", "B", "C", "D", "E"]
LENGTHS = ["$20 \\mathrm{~cm}$", "$21 \\mathrm{~cm}$", "$22 \\mathrm{~cm}$", "$23 \\mathrm{~cm}$", "$25 \\mathrm{~cm}$"]
DAYS = ["Wednesday", "Thursday", "Friday", "Tuesday", "Sunday"]

COUNT = "First, count the small triangles: there are 3 in the top row and 5 in the bottom row, 8 in total."
AREA = "Let me look at the figure. The square has side 4, so its area is $4^2 = 16$. The shaded part is $16 - 12.57 = 3.43$."
ZH = "首先，观察图形。正方形的边长为4，所以面积是16。"
LOOP = "Wait, let me re-check the figure. The side is 4, so the area is 16. " * 12

# (response, answer, options, official verdict)
SHAPES = [
    # think / answer tags: no box and no English flag, the whole response is read
    (f"<think>\n{COUNT}\n</think>\n<answer>B</answer>", "B", LETTERS, False),
    (f"<think>\n{AREA}\n</think>\n<answer>B</answer>", "B", LETTERS, False),  # "3.43.</think><answer>b</answer>"
    (f"<think> {COUNT} </think> <answer> B </answer>", "B", LETTERS, False),
    (f"<think>{COUNT}</think>\n<answer>\\boxed{{B}}</answer>", "B", LETTERS, True),
    (f"<think>{COUNT}</think>\n<answer>The answer is B.</answer>", "B", LETTERS, False),  # "b.</answer>"
    (f"<think>{COUNT}</think>\n<answer>12</answer>", "12", [], False),
    (f"<think>{AREA}</think>\n<answer>12</answer>", "12", [], False),
    (f"<think>{COUNT}</think>\n<answer>\\boxed{{12}}</answer>", "12", [], True),
    (f"<think>{COUNT}</think><answer>The answer is 12</answer>", "12", [], False),
    (f"<think>{COUNT}</think>\n<answer>The final answer is $\\boxed{{12}}$.</answer>", "12", [], True),
    (f"{COUNT}\n<answer>12</answer>", "12", [], False),
    ("<answer>12</answer>", "12", [], False),
    (f"<think>{COUNT} Therefore, the answer is 12.</think>", "12", [], True),  # "12.</think>" reads as 12
    (f"<think>{COUNT} Therefore, the answer is B.</think>", "B", LETTERS, False),
    (f"<think>{COUNT} <answer>12</answer></think>\n<answer>12</answer>", "12", [], False),
    (f"<think>{COUNT}</think>\n<answer><answer>B</answer></answer>", "B", LETTERS, False),
    (f"<think>{COUNT}</think>\n<answer>12", "12", [], False),
    (f"<think>{COUNT}</think>\n<answer>\\boxed{{12}}", "12", [], True),
    (f"<think>{COUNT} <answer>B</answer>", "B", LETTERS, False),
    (f"<think>{COUNT}\nThe answer is B.", "B", LETTERS, True),
    (f"<think>{COUNT}</think>\n<answer>B</answer>\nSo I choose B.", "B", LETTERS, True),  # the " B." ending
    (f"<think>{COUNT}</think>\n<answer>B</answer>\nSo I choose (B).", "B", LETTERS, True),
    ("<think>\n\n</think>\n<answer>12</answer>", "12", [], False),
    ("<think></think>\n\\boxed{12}", "12", [], True),
    (f"<think>{AREA}</think>\n\\boxed{{12}}", "12", [], True),
    (f"<answer>12</answer>\n<think>{COUNT}</think>", "12", [], False),
    (f"The answer is 12.\n\nReasoning: {COUNT}", "12", [], True),
    (f"\\boxed{{12}}\n\n{COUNT}", "12", [], True),
    (f"B\n{COUNT}", "B", LETTERS, True),
    (f"<think>{COUNT}</think>\n<answer>12</answer><|im_end|>", "12", [], False),
    # Minerva's "Final Answer" line
    (f"{COUNT}\n\nFinal Answer: The final answer is $\\boxed{{12}}$. I hope it is correct.", "12", [], True),
    (f"{COUNT}\n\nFinal Answer: The final answer is $12$. I hope it is correct.", "12", [], True),
    ("Final Answer: The final answer is B. I hope it is correct.", "B", LETTERS, True),
    ("Final Answer: The final answer is 12. I hope it is correct.", "12", [], True),
    # several boxes: the last one counts
    (f"{COUNT} One piece has area $\\boxed{{4}}$, so the answer is $\\boxed{{12}}$.", "12", [], True),
    (f"{COUNT} So the answer is $\\boxed{{12}}$. (Each piece: $\\boxed{{4}}$.)", "12", [], False),
    (f"$\\boxed{{12}}$\n\n{COUNT}\n\nFinal answer: $\\boxed{{12}}$", "12", [], True),
    (f"<think>{COUNT} so $\\boxed{{7}}$ pieces.</think>\n<answer>\\boxed{{12}}</answer>", "12", [], True),
    (f"{COUNT} \\boxed{{\\boxed{{12}}}}", "12", [], True),
    (f"{COUNT} \\boxed{{12}} or \\boxed{{13}}", "12", [], False),
    # a letter row's box
    (f"{COUNT} \\boxed{{B}}", "B", LENGTHS, True),
    (f"{COUNT} \\boxed{{(B)}}", "B", LENGTHS, True),
    (f"{COUNT} \\boxed{{\\text{{B}}}}", "B", LENGTHS, True),
    (f"{COUNT} \\boxed{{\\text{{(B)}}}}", "B", LENGTHS, True),
    (f"{COUNT} \\boxed{{\\textbf{{B}}}}", "B", LENGTHS, False),  # "bfb"
    (f"{COUNT} \\boxed{{\\mathrm{{B}}}}", "B", LENGTHS, False),
    (f"{COUNT} \\boxed{{B. 21 \\mathrm{{~cm}}}}", "B", LENGTHS, False),
    (f"{COUNT} \\boxed{{21 \\mathrm{{~cm}}}}", "B", LENGTHS, False),  # the option keeps its "$"
    (f"{COUNT} \\boxed{{21}}", "B", LENGTHS, False),
    (f"{COUNT} \\boxed{{b}}", "B", LENGTHS, True),
    (f"{COUNT} \\boxed{{Wednesday}}", "A", DAYS, True),
    (f"{COUNT} \\boxed{{A. Wednesday}}", "A", DAYS, False),
    (f"<think>{COUNT}</think>\n<answer>Wednesday</answer>", "A", DAYS, False),
    # fractions and percents
    (f"{COUNT} \\boxed{{\\frac{{1}}{{2}}}}", "\\frac{1}{2}", [], True),
    (f"{COUNT} \\boxed{{0.5}}", "\\frac{1}{2}", [], True),
    (f"{COUNT} \\boxed{{\\dfrac12}}", "\\frac{1}{2}", [], False),  # "\\frac12": fixed only beside a "sqrt"
    (f"{COUNT} \\boxed{{1/2}}", "\\frac{1}{2}", [], True),
    (f"{COUNT} \\boxed{{50\\%}}", "\\frac{1}{2}", [], False),
    (f"{COUNT} \\boxed{{0.50}}", "\\frac{1}{2}", [], True),
    (f"{COUNT} \\boxed{{2.33}}", "7/3", [], True),
    (f"{COUNT} \\boxed{{\\frac{{7}}{{3}}}}", "7/3", [], True),
    (f"{COUNT} \\boxed{{-0.96}}", "-\\frac{24}{25}", [], True),
    # degrees and units
    (f"{COUNT} \\boxed{{12^\\circ}}", "12", [], True),
    (f"{COUNT} \\boxed{{12°}}", "12", [], False),
    (f"{COUNT} \\boxed{{12 \\text{{ cm}}}}", "12", [], False),  # "12{cm}"
    (f"{COUNT} \\boxed{{12\\text{{cm}}}}", "12", [], False),
    (f"{COUNT} \\boxed{{12 \\mathrm{{cm}}}}", "12", [], False),
    (f"{COUNT} \\boxed{{12 \\text{{ degrees}}}}", "12", [], False),
    (f"{COUNT} \\boxed{{12 units}}", "12", [], True),
    (f"{COUNT} \\boxed{{12 km}}", "12", [], True),
    (f"{COUNT} \\boxed{{\\mathbf{{12}}}}", "12", [], False),
    (f"{COUNT} \\boxed{{\\text{{12}}}}", "12", [], True),
    (f"{COUNT} \\boxed{{3.91^\\circ}}", "$\\frac{90}{23}^{\\circ}$", [], False),  # the gold has no value
    # equations, pairs and sets
    (f"{COUNT} \\boxed{{x=3}}", "3", [], True),
    (f"{COUNT} \\boxed{{x = 3}}", "3", [], True),
    (f"{COUNT} \\boxed{{3 \\text{{ and }} 5}}", "3", [], False),
    (f"{COUNT} \\boxed{{3, 5}}", "3", [], False),
    (f"{COUNT} \\boxed{{\\{{3,5\\}}}}", "3", [], False),
    (f"{COUNT} \\boxed{{\\{{3\\}}}}", "3", [], True),
    (f"{COUNT} \\boxed{{(3, -4)}}", "(3,-4)", [], True),
    (f"{COUNT} \\boxed{{x=3, y=-4}}", "(3,-4)", [], False),  # after the last "=": "-4"
    (f"{COUNT} \\boxed{{27.71}}", "$16 \\sqrt{3}$", [], True),
    (f"{COUNT} \\boxed{{16\\sqrt3}}", "$16 \\sqrt{3}$", [], True),
    # Chinese conclusions
    (f"{ZH}答案是 B", "B", LETTERS, False),
    (f"{ZH}故选B", "B", LETTERS, False),
    (f"{ZH}故选B。", "B", LETTERS, False),
    (f"{ZH}所以答案为 12", "12", [], False),
    (f"{ZH}所以答案为 12。", "12", [], False),
    (f"{ZH}所以答案为 x = 12", "12", [], True),
    (f"{ZH}答案：$\\boxed{{12}}$", "12", [], True),
    (f"<think>{ZH}</think>\n<answer>12</answer>", "12", [], False),
    (f"{ZH}\n\nThe answer is 12.", "12", [], True),
    # repetition loops cut by the token limit
    (f"<think>{COUNT} The answer is 12. " + LOOP, "12", [], False),  # the loop's last "is 16."
    (f"<think>{COUNT} The answer is B. " + LOOP[:300], "B", LETTERS, True),
    (f"{COUNT} $\\boxed{{12}}$. " + LOOP, "12", [], False),
    (f"<think>{COUNT}</think><answer>12</answer>" + LOOP, "12", [], False),
    (f"{COUNT} {LOOP}\n\n$\\boxed{{12}}$", "12", [], True),
    ((f"{COUNT} $\\boxed{{12}}$. " + LOOP)[:120], "12", [], True),
]


@pytest.mark.parametrize("response,answer,options,official", SHAPES)
def test_r1_style_answers_keep_the_official_verdict(response, answer, options, official):
    assert score_mathvision(response, {"answer": answer, "options": options}) is official


def test_the_official_mathvision_scorer_agrees():
    assert_official_mathvision_agrees(SHAPES)
