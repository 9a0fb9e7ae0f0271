"""Review 22 (MathVista): a sixth, independent generator of answers, imitating Qwen2.5-VL-7B / 3B, base and RL-tuned
(this trainer's CSRS / MM-UPT recipes, EasyR1 / verl / R1-V / Vision-R1 style recipes).

R1-style outputs: ``<think> ... </think>`` then ``<answer> ... </answer>`` (with and without spaces or newlines,
unclosed or nested tags, an empty think, a think holding another tentative answer or box than the answer part, the
answer tag holding ``\\boxed{}``, a letter, the option text, a number with units or a sentence; the whole answer
left inside the think block; trailing garbage after the tag; the format hack "<answer>B</answer><answer>B</answer>");
``\\boxed{}`` shapes (an intermediate value boxed in the reasoning, two boxes at the end, ``\\boxed{(B)}``,
``\\boxed{\\text{B}}``, ``\\boxed{B: 12}``, ``\\boxed{12 \\text{ cm}}``, ``\\boxed{x = 12}``, ``\\boxed{\\frac{1}{2}}``
for a float row, ``\\boxed{[1, 2]}``, "Final Answer: The final answer is $\\boxed{12}$. I hope it is correct.");
Qwen's habits (the official hint followed literally: a bare number on the last line, "The final value is 3.";
Chinese reasoning with "答案是 B", "故选B", "所以答案为12", "选项B正确", "答：12"; repetition loops cut by the token
limit; the answer first and the reasoning after) and RL degeneracies ("B", "(B)", "B)", "Answer: B", "12.").

As in reviews 16-21, where the official rule paths do not fire the official GPT extraction is taken to be the
answer the response states; ``test_the_official_mathvista_pipeline_agrees`` recomputes every verdict below in
``.venv-parity`` with review 16's machinery. mmevo's extractor missed five classes, each a "was ..." below:

1. a box or a marked answer in the think block, then the answer part after ``</think>`` stating the answer
   ("<think>... $\\boxed{8}$? ...</think>\\n<answer>1.2</answer>", "<think>... So the answer is C.</think>\\n\\nB",
   "...</think>\\nThe final value is 5.": was the think block's box or marked answer);
2. a value boxed in the reasoning, then the answer marked after the box ("The total is $\\boxed{7}$ units.
   Therefore, the answer is C.": was the box);
3. a marked answer closing a think block with no answer part after it ("<think>... So the answer is B.</think>",
   also before "assistant" or a pleasantry: was "B.</think>", whose nearest choice text is another);
4. answer tags nested in the answer tag ("<answer><answer>C</answer></answer>": was "<answer>C");
5. a Chinese option verdict or pick, "选项B正确", "所以选项 B 是正确的", "答案选B" (was no answer, or "项 B 是正确的").

Ambiguous readings are not pinned as verdicts and keep their reading: two different answer tags ("<answer>A
</answer><answer>B</answer>", the format hack: the last), a loop cut before any answer, "50%" for the gold 0.5.
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import extract_mathvista_answer, score_mathvista
from test_scoring_review16 import _ff, _mc, assert_official_mathvista_agrees

# MathVista testmini rows, as in testmini.json
ANGLES_145 = _mc("3", ["135°", "140°", "145°", "150°"], "145°")
CLOCK = _mc("7", ["half", "quarter", "o'clock", "quarter to", "quarter past"], "quarter")
YES_NO = _mc("25", ["yes", "no"], "no")
HALVES = _mc("28", ["7.5", "8", "8.5", "17"], "8.5")
MONTHS = _mc("43", ["August", "April", "May"], "May")
FLOAT_1 = _ff("1", "float", "1.2", 1)
COUNT_5 = _ff("11", "integer", "5")
YEARS = _ff("506", "list", "[2014, 2016]")

# reasoning as the generator wrote it: other numbers in it
COT = ("To solve this, I look at the image. The left part shows 3 units and the right part 4 units, so together they "
       "span 7 units.")
ZH = "首先观察图形。左边的部分是3个单位，右边是4个单位，所以一共是7个单位。"
THINK = f"<think>\n{COT}\n</think>\n"

# (item, response, what the official GPT extractor returns for it, the official verdict)
VISTA = [
    # 1. the think block's box or marked answer, then the answer part
    (CLOCK, f"<think>{COT} So it is $\\boxed{{C}}$? Let me check again.</think>\n<answer>B</answer>", "B",
     True),  # was 'C'
    (FLOAT_1, f"<think>{COT} So it is $\\boxed{{8}}$? Let me check again.</think>\n<answer>1.2</answer>", "1.2",
     True),  # was '8'
    (COUNT_5, f"<think>{COT} So it is $\\boxed{{5}}$? Let me check again.</think>\n<answer>6</answer>", "6",
     False),  # was '5': scored right
    (ANGLES_145, f"<think>{COT} So it is $\\boxed{{D}}$? No.</think>\n<answer>\\boxed{{C}}</answer>", "C",
     True),  # (the box of the answer tag is the last one: agreed before)
    (CLOCK, f"<think>{COT} So the answer is C. Hmm, let me look again.</think>\n\nB", "B", True),  # was 'C'
    (COUNT_5, f"<think>{COT} So the answer is 12. Hmm, let me look again.</think>\n\n5", "5", True),  # was '12'
    (YEARS, f"<think>{COT} So the answer is [1, 2]. Hmm.</think>\n\n[2014, 2016]", "[2014, 2016]", True),
    (COUNT_5, f"<think>{COT} The answer is 12?</think>\nThe final value is 5.", "5", True),  # was '12'
    (FLOAT_1, f"<think>{COT} The answer is 8?</think>\nThe final value is 1.4.", "1.4",
     False),  # (was '8': wrong either way)
    # 2. a value boxed in the reasoning, then the answer marked after it
    (ANGLES_145, f"{COT} The total is $\\boxed{{7}}$ units.\n\nTherefore, the answer is C.", "C", True),  # was '7'
    (HALVES, f"{COT} The total is $\\boxed{{7}}$ units.\n\nTherefore, the answer is B.", "B",
     False),  # (was '7' -> '8': wrong either way)
    (FLOAT_1, f"{COT} The base is $\\boxed{{8}}$.\n\nTherefore, the answer is 1.2.", "1.2", True),  # was '8'
    (COUNT_5, f"{COT} The base is $\\boxed{{5}}$.\n\nTherefore, the answer is 12.", "12", False),  # was '5'
    (YEARS, f"{COT} The base is $\\boxed{{[1, 2]}}$.\n\nTherefore, the answer is [2014, 2016].", "[2014, 2016]",
     True),  # was '[1, 2]'
    # 3. the answer left inside the think block
    (CLOCK, f"<think>{COT} So the answer is B.</think>", "B", True),  # was 'B.</think>' -> 'half'
    (CLOCK, f"<think>{COT} So the answer is B.</think>\nassistant", "B", True),  # was 'B.</think>'
    (CLOCK, f"<think>{COT}\n\nThe answer is B.</think>\n\nI hope this helps!", "B", True),  # was 'B.</think>'
    (CLOCK, f"<think>{ZH}故选B</think>", "B", True),  # was 'B</think>' -> 'half'
    (MONTHS, f"<think>{COT} So the answer is B.</think>", "B",
     False),  # (was 'B.</think>' -> 'April': wrong either way)
    # 4. nested answer tags
    (CLOCK, f"{THINK}<answer><answer>B</answer></answer>", "B", True),  # was '<answer>B' -> "o'clock"
    (YES_NO, f"{THINK}<answer><answer>A</answer></answer>", "A", False),  # (was '<answer>A' -> 'yes': wrong either way)
    # 5. a Chinese option verdict or pick
    (CLOCK, f"{ZH}\n选项B正确。", "B", True),  # was ''
    (CLOCK, f"{ZH}\n所以选项 B 是正确的。", "B", True),  # was '项 B 是正确的' -> 'half'
    (ANGLES_145, f"{ZH}\n所以选项 C 是正确的。", "C", True),  # was '项 C 是正确的' -> '135°'
    (CLOCK, f"{ZH}\n答案选B。", "B", True),  # was ''
    (YES_NO, f"{ZH}\n答案选A。", "A", False),  # (was '': wrong either way)
    # shapes that already agreed, pinned
    (CLOCK, f"<think>{COT}</think><answer>B</answer>", "B", True),
    (CLOCK, f"<think> {COT} </think> <answer> B </answer>", "B", True),
    (CLOCK, f"<think>\n\n</think>\n<answer>B</answer>", "B", True),
    (CLOCK, f"{THINK}<answer>quarter</answer>", "quarter", True),
    (CLOCK, f"{THINK}<answer>(B) quarter</answer>", "B", True),
    (CLOCK, f"{THINK}<answer>B", "B", True),
    (CLOCK, f"<think>\n{COT}\n<answer>B</answer>", "B", True),
    (CLOCK, f"<think>{COT} <answer>C</answer> Hmm, no.</think>\n<answer>B</answer>", "B", True),
    (CLOCK, f"{THINK}<answer>B</answer><|im_end|>\n<|endoftext|>", "B", True),
    (CLOCK, f"{THINK}<answer>B</answer><answer>B</answer>", "B", True),
    (CLOCK, f"{COT}\n\nFinal Answer: The final answer is $\\boxed{{B}}$. I hope it is correct.", "B", True),
    (CLOCK, f"{COT}\n\n\\boxed{{quarter}} \\boxed{{B}}", "B", True),
    (CLOCK, f"{COT}\n\nThe answer is $\\boxed{{(B)}}$.", "B", True),
    (CLOCK, f"{COT}\n\n\\boxed{{B: quarter}}", "B", True),
    (COUNT_5, f"{THINK}<answer>5 cm</answer>", "5", True),
    (COUNT_5, f"{THINK}<answer>The length of AB is 5 cm.</answer>", "5", True),
    (COUNT_5, f"{COT}\n\n\\boxed{{5 \\text{{ cm}}}}", "5", True),
    (COUNT_5, f"{COT}\n\n\\boxed{{x = 5}}", "5", True),
    (FLOAT_1, f"{COT}\n\n\\boxed{{\\frac{{6}}{{5}}}}", "1.2", True),
    (YEARS, f"{COT}\n\n\\boxed{{[2014, 2016]}}", "[2014, 2016]", True),
    (COUNT_5, f"{COT}\n\n5", "5", True),
    (COUNT_5, f"{COT}\n\nThe final value is 5.", "5", True),
    (COUNT_5, f"{ZH}\n所以答案为5", "5", True),
    (COUNT_5, f"{ZH}\n答：5", "5", True),
    (CLOCK, f"{ZH}\n故选B", "B", True),
    (COUNT_5, f"{COT}\n" + "So the answer is 5. " * 8 + "So the answer is", "5", True),
    (CLOCK, f"B\n\n{COT} Option C is too small.", "B", True),
    (CLOCK, "B)", "B", True),
    (CLOCK, "Answer: B", "B", True),
    (COUNT_5, "5.", "5", True),
]


@pytest.mark.parametrize("item,response,gpt_extraction,official", VISTA)
def test_mathvista_sixth_generator_answers_get_the_official_verdict(item, response, gpt_extraction, official):
    assert score_mathvista(response, item) is official


@pytest.mark.parametrize("item,response,extracted", [
    # neighbours the new rules must leave alone, and ambiguous readings kept
    (COUNT_5, f"<think>{COT} The answer is 5.</think>\nI hope this helps!", "5"),  # an answer part stating none
    (COUNT_5, f"<think>{COT} The answer is 5.</think>\n<answer></answer>", "5"),
    (COUNT_5, f"{COT}\n\n\\boxed{{5}}\n\nThe answer is reasonable since 3 + 4 = 7.", "5"),  # a remark on the box
    (COUNT_5, f"{COT}\n\n\\boxed{{5}}\n\nLet me verify the answer: 3 + 4 = 7", "5"),  # a check of the box
    (COUNT_5, f"{COT}\n\n\\boxed{{8}}\n\nThe answer is not 5.", "8"),
    (COUNT_5, f"{COT}\n\nThe answer is \\boxed{{5}}.", "5"),
    (CLOCK, f"{COT}\n\n\\boxed{{B}}\n\nThe answer is correct.", "B"),
    (CLOCK, f"{ZH}\n所以选项 A 不正确，选项 B 正确。", "B"),
    (CLOCK, f"{ZH}\n所以选择 B。", "B"),
    (CLOCK, "<answer>C</answer><answer>B</answer>", "B"),  # the format hack with two answers: the last, as before
])
def test_neighbouring_answers_keep_their_reading(item, response, extracted):
    assert extract_mathvista_answer(response, item) == extracted


def test_the_official_mathvista_pipeline_agrees():
    assert_official_mathvista_agrees(VISTA)
