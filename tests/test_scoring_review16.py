"""Review 16: realistic model answers on the shipped MathVista and MATH-Vision rows.

Responses in the styles Qwen2.5-VL writes (a chain of thought ending in "\\boxed{...}", "The answer is X", "Answer:
(B)", "**Final Answer:** ...", the answer alone on its first or last line, option letters with or without their
text, numbers with units, degrees, percentages, fractions, thousands separators) were generated for every row of
MathVista testmini and MATH-V test and scored by mmevo and by the official pipeline.

MathVista. The official extract_answer.py asks GPT for the answer unless the response is a choice text or parses as
an int / float (those rule paths are run as they are); GPT returns the answer the response states, which the official
normaliser (calculate_score.py) then maps: a number to the nearest choice text by edit distance, "45.0" to the int
45. Below, each case gives that extraction; ``test_the_official_pipeline_agrees`` recomputes the official verdict in
``.venv-parity`` (lmms-eval's port of the rule paths and the normaliser, the GPT call stubbed to return the stated
answer's extraction). mmevo's rule-based extractor missed eight classes, each a "was ..." below:

1. a number (and a unit) where the choices are numbers with a unit, or a unit where they are plain numbers: "70" or
   "70.0" for the choice "70°", "4" for "4cm", "6 degrees" / "11^{\\circ}" for "6" / "11" (was no answer, or the
   nearest text "6 \\sqrt 2");
2. the answer stated first with a unit, a currency sign, a name or thousands separators, then an explanation with
   other numbers: "400 units\\n\\nExplanation: ..." (was the explanation's last number);
3. "Answer - 5.": the dash after "Answer" read as a minus sign (was -5);
4. a letter with its option's text in brackets, "C (5)" (was the nearest text to "C (5)");
5. an unmarked response whose last line is the list (was every number of the response in one list);
6. an unmarked response whose final statement ends by naming a choice, "So the result is 130.0." / "... is **B**."
   (was no answer, or a choice text or letter met earlier);
7. an unmarked response whose last line is a number naming no choice, "...\n\n**0.4**" against "0.38", "0.42", ...
   (was no answer; the official normaliser maps the number to the nearest choice text);
8. an approximation ("about 18", "\\approx 47.6", "18 (rounded)"), an answer in single quotes ("'decrease'") and an
   answer followed by a clause ("6.0, as shown in the figure").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mmevo.eval.scoring import extract_mathvista_answer, score_mathvista

ROOT = Path(__file__).resolve().parents[1]
PARITY_PY = ROOT / ".venv-parity" / "bin" / "python"


def _mc(pid: str, choices: list[str], answer: str) -> dict:
    return {"pid": pid, "question_type": "multi_choice", "answer_type": "text", "choices": choices, "answer": answer,
            "precision": None, "unit": None}


def _ff(pid: str, atype: str, answer: str, precision: int | None = None) -> dict:
    return {"pid": pid, "question_type": "free_form", "answer_type": atype, "choices": None, "answer": answer,
            "precision": precision, "unit": None}


# MathVista testmini rows, as in testmini.json
ANGLES_70 = _mc("30", ["60°", "70°", "80°", "85°"], "70°")
ANGLES_145 = _mc("3", ["135°", "140°", "145°", "150°"], "145°")
LENGTHS = _mc("68", ["2cm", "4cm", "6cm", "8cm"], "4cm")
ROOTS = _mc("82", ["3", "3 \\sqrt 2", "6", "6 \\sqrt 2"], "6")
SIDES = _mc("878", ["6", "2√{2}", "11", "24"], "11")
FIVES = _mc("271", ["3", "4.5", "5", "6"], "5")
SMALL = _mc("283", ["2", "4", "5", "10"], "5")
ANGLES_130 = _mc("195", ["120°", "125°", "130°", "135°"], "130°")
COUNTS = _mc("371", ["3", "4", "5", "6"], "4")
ROUNDED = _mc("388", ["0.38", "0.42", "0.92", "2.40"], "0.42")
TREND = _mc("418", ["remain the same", "increase", "decrease", "NA"], "decrease")
LETTER_CHOICES = _mc("706", ["A", "B", "C", "D", "E"], "C")
COUNT_400 = _ff("19", "integer", "400")
COUNT_16 = _ff("67", "integer", "16")
COUNT_18 = _ff("71", "integer", "18")
YEARS = _ff("415", "integer", "15017")
COUNT_5 = _ff("11", "integer", "5")
ANGLE_FLOAT = _ff("74", "float", "47.6", 1)
DIGITS = _ff("225", "list", "[0, 2, 0, 2, 1, 7, 1, 2, 0, 3, 0, 6]")

EXPLANATION = "\n\nExplanation: The angle ABC is 40 degrees, so angle ACB = 180 - 40 - 70 = 70 degrees."
COT = "Let's analyze the image step by step. The bar for 2015 reaches about 45 and the bar for 2016 about 50."

# (item, response, what the official GPT extractor returns for it, the official verdict)
VISTA = [
    # 1. a number, or a unit, written otherwise than the choices write it
    (ANGLES_70, "70", "70", True),  # was '' (no answer)
    (ANGLES_70, "70.0", "70.0", True),  # was ''
    (ANGLES_70, "70\n\nExplanation: The other angles are 60 and 80 degrees.", "70", True),  # was '80°'
    (ANGLES_145, "145.0", "145.0", True),  # was ''
    (LENGTHS, "4", "4", True),  # was ''
    (LENGTHS, "4.0\n\nExplanation: The ruler shows 4 cm.", "4.0", True),  # was ''
    (LENGTHS, "$6^{\\circ}$", "6", False),
    (ROOTS, f"{COT}\n\nTherefore, the answer is $\\boxed{{6 degrees}}$.", "6", True),  # was '6 \\sqrt 2'
    (SIDES, f"{COT}\n答案是 $11^{{\\circ}}$", "11", True),  # was '2√{2}'
    (SIDES, f"{COT}\n\\boxed{{24^\\circ}}", "24", False),
    # 2. the answer stated first, then an explanation with other numbers
    (COUNT_400, "400 units" + EXPLANATION, "400", True),  # was '70'
    (COUNT_16, "\\$16" + EXPLANATION, "16", True),  # was '70'
    (COUNT_18, "x = 18" + EXPLANATION, "18", True),  # was '70'
    (YEARS, "15,017" + EXPLANATION, "15017", True),  # was '70'
    (ANGLE_FLOAT, "47.6^\\circ" + EXPLANATION, "47.6", True),  # was '70'
    (ANGLE_FLOAT, "47.6\\%" + EXPLANATION, "47.6", True),  # was '70'
    (COUNT_18, "19 cm" + EXPLANATION, "19", False),  # was '70': wrong either way
    # 3. a dash after "Answer" separates
    (COUNT_5, f"{COT}\nAnswer - 5.", "5", True),  # was '-5'
    (ANGLE_FLOAT, f"{COT}\nAnswer - 47.6^\\circ.", "47.6", True),  # was '-47.6'
    (ANGLES_70, f"{COT}\nAnswer - 70.0.", "70.0", True),  # was ''
    # 4. a letter with its option's text in brackets
    (FIVES, f"{COT}\n\nCorrect answer: C (5)", "C", True),  # was 'C (5)' -> nearest '4.5'
    (SMALL, "C (5)\n\nExplanation: the side is 4 cm and the top row has 2 squares.", "C", True),  # was '2'
    (SMALL, "D (10)" + EXPLANATION, "D", False),  # (was '10', the choice text it names: wrong either way)
    # 5. an unmarked response ending with its list
    (DIGITS, f"{COT}\n\n**0, 2, 0, 2, 1, 7, 1, 2, 0, 3, 0, 6**", "[0, 2, 0, 2, 1, 7, 1, 2, 0, 3, 0, 6]", True),
    # 6. a choice named at the end of an unmarked response's final statement
    (ANGLES_130, f"{COT}\n\nSo the result is 130.0.", "130.0", True),  # was ''
    (ANGLES_130, f"{COT}\n\nSo the measure of the angle is 130 degrees.", "130", True),
    (COUNTS, f"{COT} A cube has 6 faces.\n\nSo the result is **B**.", "B", True),  # was '6' (the last choice text)
    (COUNTS, f"{COT} There are (A) 3 cubes.\n\nSo the result is **B**.", "B", True),  # was 'A'
    (COUNTS, f"{COT}\n\nSo the result is **C**.", "C", False),
    # 7. a number alone on an unmarked last line that names no choice: the official nearest choice text
    (ROUNDED, f"{COT}\n\n**0.4**", "0.4", True),  # was '' (no answer)
    (ROUNDED, "0.4", "0.4", True),  # was ''
    (ROUNDED, f"{COT}\n\n0.9", "0.9", False),
    # 8. an approximation, a single-quoted answer, an answer followed by a clause
    (ANGLE_FLOAT, "\\approx 47.6" + EXPLANATION, "47.6", True),  # was '70'
    (COUNT_18, "about 18" + EXPLANATION, "18", True),  # was '70'
    (COUNT_18, "18 (rounded)" + EXPLANATION, "18", True),  # was '70'
    (FIVES, f"{COT}\n\nI think the answer is about 5.", "5", True),  # was 'about 5' -> nearest '4.5'
    (TREND, f"{COT}\n\nThe answer is 'decrease', as shown in the figure.", "decrease", True),  # was 'increase'
    (ROOTS, f"{COT}\n\nThe answer is 6.0, as shown in the figure.", "6.0", True),  # was '6 \\sqrt 2'
    (LETTER_CHOICES, "'C'\n\nUsing the formula $A = \\frac{1}{2}bh$, the area is 12.", "C", True),  # was 'A'
]


@pytest.mark.parametrize("item,response,gpt_extraction,official", VISTA)
def test_mathvista_realistic_answers_get_the_official_verdict(item, response, gpt_extraction, official):
    assert score_mathvista(response, item) is official


@pytest.mark.parametrize("item,response,extracted", [
    # neighbours the new rules must leave alone
    (COUNT_400, "Step 1\n\nThe count is 400.", "400"),  # a first line without a lone number is no answer
    (COUNT_400, "3 red and 2 blue\n\nSo 400 in all.", "400"),  # nor one with two numbers
    (COUNT_400, "2015 Sales Report\n\nThe bars add up to 400.", "400"),  # nor a title
    (COUNT_400, "1.\nCount the cubes.\n2.\nCount them: 400.", "400"),  # a numbered list
    (COUNT_5, "The answer is -5.", "-5"),  # a minus right after "is" stays a sign
    (COUNT_5, "Answer: -5", "-5"),
    (ANGLES_70, "The answer is 75.", "75"),  # a number equal to no choice: the official nearest-text rule
    (FIVES, "The answer is 4.5.", "4.5"),
    (_mc("x", ["5 cm", "5 m"], "5 m"), "Reasoning.\n\n5", "5"),  # two choices of that number: the official nearest
    (_mc("x", ["5 cm", "5 m"], "5 m"), "The length is 5.", ""),  # no line of its own, no choice named: no answer
])
def test_neighbouring_answers_keep_their_reading(item, response, extracted):
    assert extract_mathvista_answer(response, item) == extracted


def _official_mathvista(cases: list[tuple[dict, str, str]]) -> list[bool]:
    """The official verdict of each (item, response, GPT extraction): the official rule paths of extract_answer on the
    response when they fire, else the official normalisation of the GPT extraction; run in .venv-parity."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import parity_mathvista

    items = {}
    norm, ext = [], []
    for k, (item, response, extraction) in enumerate(cases):
        key = f"{item['pid']}#{k}"
        items[key] = dict(item, pid=key, question=item.get("question", ""), query="")
        norm.append({"pid": key, "extraction": extraction})
        ext.append({"pid": key, "response": response})
    ref_norm, ref_ext = parity_mathvista.score_reference(items, norm, ext)
    return [e["official_equal"] if e["rules_fired"] else n["official_equal"] for n, e in zip(ref_norm, ref_ext)]


def assert_official_mathvista_agrees(cases) -> None:
    """The official pipeline's verdicts on ``cases`` (item, response, GPT extraction, official verdict) are the
    pinned ones (skips without the reference venv's MathVista dependencies)."""
    if not PARITY_PY.exists():
        pytest.skip("the reference venv .venv-parity is missing: run `make parity-env`")
    probe = subprocess.run([str(PARITY_PY), "-c", "import lmms_eval, Levenshtein, yaml, loguru"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("the reference venv .venv-parity lacks the MathVista deps: run `make parity-env`")
    got = _official_mathvista([(item, response, extraction) for item, response, extraction, _ in cases])
    assert got == [official for *_, official in cases]


def test_the_official_mathvista_pipeline_agrees():
    assert_official_mathvista_agrees(VISTA)


# MATH-V: 48,640 realistic response / row pairs over all 3,040 test rows agreed with the official scorer. A sample
# of those shapes, pinned with the official verdicts (``test_the_official_mathvision_scorer_agrees`` recomputes them
# with lmms-eval's port given back the official ``from math import *``): (response, answer, options, official)
LETTERS = ["A", "B", "C", "D", "E"]
AREAS_CM = ["$16 \\mathrm{~cm}^{2}$", "$18 \\mathrm{~cm}^{2}$", "$20 \\mathrm{~cm}^{2}$", "$24 \\mathrm{~cm}^{2}$",
            "$56 \\mathrm{~cm}^{2}$"]
MATHV_COT = "Let's analyze the figure step by step.\n\nThe angle at A is 40^\\circ, so the base angles are equal."
MATHV = [
    (f"{MATHV_COT}\n\nTherefore, the answer is $\\boxed{{D}}$.", "D", LETTERS, True),
    (f"{MATHV_COT}\n\nThe answer is D.", "D", LETTERS, True),
    (f"{MATHV_COT}\n\n**Answer:** (D)", "D", LETTERS, False),  # no flag, no box: the whole text is compared
    (f"{MATHV_COT}\n\nThe answer is (D) 24.", "D", LETTERS, False),  # "d24"
    (f"{MATHV_COT}\n\n**Final Answer:** D", "D", LETTERS, False),  # no flag, no box: the whole text is compared
    (f"{MATHV_COT}\n\n\\boxed{{24 \\mathrm{{~cm}}^{{2}}}}", "D", AREAS_CM, False),  # the option text, less its "$"
    (f"{MATHV_COT}\n\nThe answer is $24 \\mathrm{{~cm}}^{{2}}$.", "D", AREAS_CM, False),
    (f"{MATHV_COT}\n\n\\boxed{{24}}", "D", AREAS_CM, False),
    (f"{MATHV_COT}\n\nThe final answer is: $\\boxed{{16\\sqrt{{3}}}}$", "$16 \\sqrt{3}$", [], True),
    (f"{MATHV_COT}\n\n\\[\n\\boxed{{27.71}}\n\\]", "$16 \\sqrt{3}$", [], True),
    (f"{MATHV_COT}\n\n\\boxed{{27.7}}", "$16 \\sqrt{3}$", [], False),
    (f"{MATHV_COT}\n\nThe answer is $27.7128$.", "$16 \\sqrt{3}$", [], True),
    (f"{MATHV_COT}\n\n\\boxed{{1,200}}", "1200", [], True),  # latex2sympy2 reads the thousands comma
    (f"{MATHV_COT}\n\n\\boxed{{60^\\circ}}", "60", [], True),
    (f"{MATHV_COT}\n\n\\boxed{{12 \\text{{ cm}}}}", "12", [], False),  # "12{cm}"
    (f"{MATHV_COT}\n\n\\boxed{{12\\,\\text{{cm}}^2}}", "12", [], False),
    (f"{MATHV_COT}\n\n\\boxed{{\\frac{{360}}{{7}}}}", "\\frac{360}7", [], False),  # the gold has no value there
    (f"{MATHV_COT}\n\n\\boxed{{51.43}}", "\\frac{360}7", [], False),
    (f"{MATHV_COT}\n\n\\boxed{{(3, -4)}}", "(3,-4)", [], True),
    (f"{MATHV_COT}\n\n\\boxed{{0.5}}", "\\frac{1}{2}", [], True),
    (f"{MATHV_COT}\n\n\\boxed{{50\\%}}", "\\frac{1}{2}", [], False),
    (f"{MATHV_COT}\n\nSo there are 6 in total.", "6", [], False),
    (f"{MATHV_COT}\n\nThe value is 6.", "6", [], True),
    (f"{MATHV_COT}\n\n答案是 6", "6", [], False),
]


@pytest.mark.parametrize("response,answer,options,official", MATHV)
def test_mathvision_realistic_answers_keep_the_official_verdict(response, answer, options, official):
    from mmevo.eval.scoring import score_mathvision

    assert score_mathvision(response, {"answer": answer, "options": options}) is official


def assert_official_mathvision_agrees(cases) -> None:
    """The official MATH-V scorer's verdicts on ``cases`` (response, answer, options, official verdict) are the pinned
    ones: lmms-eval's port given back the official ``from math import *``, 20 s per answer (skips without the
    reference venv)."""
    if not PARITY_PY.exists():
        pytest.skip("the reference venv .venv-parity is missing: run `make parity-env`")
    sys.path.insert(0, str(ROOT / "scripts"))
    import parity_mathvision

    pairs = [{"response": r, "answer": a, "options": o} for r, a, o, _ in cases]
    got = parity_mathvision.score_reference(pairs, 1, 20.0, math_namespace=True)
    assert [g["status"] for g in got] == ["ok"] * len(cases)
    assert [g["ok"] for g in got] == [official for *_, official in cases]


def test_the_official_mathvision_scorer_agrees():
    assert_official_mathvision_agrees(MATHV)
