"""Review 18: a third, independent generator of answers, imitating small VLMs early in RL training.

Messier styles than reviews 16-17: looping text, an answer stated then revised ("Wait, let me recount... so the
answer is 7"), two boxed answers, an empty ``\\boxed{}``, ``\\boxed{B: 12}``, ``\\boxed{\\text{(B) }12}``, the r1
format's ``<answer>...</answer>`` tags, "The correct option is: **(C) 45°**", lowercase "(c)", full-width "（B）" /
"５", units in words ("12 apples"), percentages against decimals, decimal commas ("3,5"), "approximately" / "≈",
"Yes." / "YES", lists with spaces or quotes, floats with one decimal too few or too many, "12.00", and Chinese
conclusions ("所以答案是 B").

MathVista, as in reviews 16-17: where the official rule paths do not fire, the official GPT extraction is taken to
be the answer the response states; ``test_the_official_mathvista_pipeline_agrees`` recomputes every verdict below in
``.venv-parity`` with review 16's machinery. mmevo's extractor missed five classes, each a "was ..." below:

1. an empty ``\\boxed{}`` next to an answer stated in words (was no answer: the empty box was the answer);
2. an answer in ``<answer>...</answer>`` tags after a think block (was no answer for a letter, or a choice the think
   block named);
3. a full-width option letter, "The answer is Ｂ." (was "Ｂ", the nearest choice text);
4. an approximated choice text, "approximately May" (was the nearest text to the whole);
5. a decimal comma in a marked float answer, "1,2" for 1.2 (was 1).
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import extract_mathvista_answer, score_mathvista
from test_scoring_review16 import _ff, _mc, assert_official_mathvista_agrees

# MathVista testmini rows, as in testmini.json
CLOCK = _mc("7", ["half", "quarter", "o'clock", "quarter to", "quarter past"], "quarter")
LETTERS = _mc("10", ["A", "B", "C", "D", "E"], "E")
YES_NO = _mc("25", ["yes", "no"], "no")
HALVES = _mc("28", ["7.5", "8", "8.5", "17"], "8.5")
MONTHS = _mc("43", ["August", "April", "May"], "May")
FLOAT_1 = _ff("1", "float", "1.2", 1)
FLOAT_2 = _ff("247", "float", "6.36", 2)
COUNT_4 = _ff("4", "integer", "4")

COT = "Let me analyze the figure step by step. First, identify the relevant parts; then compare them.\n\n"
THINK = f"<think>{COT}</think>\n"

# (item, response, what the official GPT extractor returns for it, the official verdict)
VISTA = [
    # 1. an empty box next to the stated answer
    (FLOAT_1, COT + "The answer is 1.2.\n\n\\boxed{}", "1.2", True),  # was ''
    (COUNT_4, COT + "\\boxed{}\n\nThe answer is 4.", "4", True),  # was ''
    (CLOCK, COT + "The answer is B.\n\n\\boxed{ }", "B", True),  # was ''
    (CLOCK, COT + "\\boxed{A}\n\nWait, let me check again.\n\n\\boxed{}", "A", False),  # was '': wrong either way
    # 2. the r1 format's answer tags
    (CLOCK, THINK + "<answer>B</answer>", "B", True),  # was ''
    (HALVES, THINK + "<answer> C </answer>", "C", True),  # was ''
    (YES_NO, f"<think>{COT}Option B looks close but no.</think>\n<answer>A</answer>", "A", False),  # was 'no'
    (COUNT_4, f"<think>{COT}So maybe 7? No.</think>\n<answer>The answer is 4.</answer>", "4", True),
    # 3. a full-width option letter
    (CLOCK, COT + "The answer is Ｂ.", "B", True),  # was 'Ｂ' -> 'half'
    (LETTERS, COT + "The answer is Ｅ.", "E", True),  # was 'Ｅ' -> 'A'
    (YES_NO, COT + "答案是 Ａ", "A", False),
    (CLOCK, COT + "答案是（Ｂ）", "B", True),  # was '（Ｂ）' -> 'half'
    # 4. an approximated choice text
    (MONTHS, COT + "The answer is approximately May.", "May", True),  # was 'approximately May' -> 'August'
    # 5. a decimal comma
    (FLOAT_1, COT + "The answer is 1,2.", "1.2", True),  # was '1'
    (FLOAT_2, COT + "\\boxed{6,36}", "6.36", True),  # was '6'
    (FLOAT_2, COT + "\\boxed{7,36}", "7.36", False),
    # shapes that already agreed, pinned
    (CLOCK, "I need to look at the image carefully. " * 4 + "The answer is B.", "B", True),
    (COUNT_4, COT + "The answer is 6.\n\nWait, let me recount... so the answer is 4.", "4", True),
    (COUNT_4, COT + "There are 6.\n\nWait, let me recount... Actually, there are 4.", "4", True),
    (CLOCK, COT + "\\boxed{C}\n\nWait, let me check again.\n\n\\boxed{B}", "B", True),
    (CLOCK, COT + "\\boxed{B: quarter}", "B", True),
    (CLOCK, COT + "\\boxed{\\text{(B) }quarter}", "B", True),
    (CLOCK, COT + "The correct option is: **(B) quarter**", "B", True),
    (CLOCK, COT + "So the answer is (b) quarter", "B", True),
    (CLOCK, COT + "答案是（B）", "B", True),
    (CLOCK, COT + "所以答案是 B。", "B", True),
    (COUNT_4, COT + "The answer is ４.", "4", True),
    (COUNT_4, THINK + "<answer>4 apples</answer>", "4", True),
    (COUNT_4, COT + "The answer is ≈ 4.", "4", True),
    (COUNT_4, COT + "The answer is 4.00.", "4.00", True),
    (FLOAT_2, COT + "The answer is 6.4.", "6.4", False),
    (FLOAT_2, COT + "The answer is 6.364.", "6.364", True),
    (YES_NO, "no.", "no", True),
]


@pytest.mark.parametrize("item,response,gpt_extraction,official", VISTA)
def test_mathvista_third_generator_answers_get_the_official_verdict(item, response, gpt_extraction, official):
    assert score_mathvista(response, item) is official


@pytest.mark.parametrize("item,response,extracted", [
    # neighbours the new rules must leave alone
    (COUNT_4, "The answer is 1,200.", "1200"),  # three digits after the comma: thousands
    (FLOAT_1, "The answer is 1,200.", "1200"),
    (FLOAT_1, "The points are (3,5) and (1,2); the slope is 1.5.", "1.5"),  # an unmarked response keeps its commas
    (CLOCK, COT + "The answer is B. \\boxed{D}", "D"),  # a filled box still wins
    (CLOCK, THINK + "<answer>\\boxed{D}</answer>", "D"),
    (CLOCK, "The answer is about quarter to.", "quarter to"),  # (was the nearest text to the whole)
])
def test_neighbouring_answers_keep_their_reading(item, response, extracted):
    assert extract_mathvista_answer(response, item) == extracted


def test_the_official_mathvista_pipeline_agrees():
    assert_official_mathvista_agrees(VISTA)
