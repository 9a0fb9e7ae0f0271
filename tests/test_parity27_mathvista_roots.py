"""MathVista free-form answers written with a root, pi or a fractional power (review 27 of the parity work).

The official pipeline normalises the GPT extraction with ``int(float(x))`` / ``round(float(x), precision)``: asked for
an integer or a decimal, that extraction is the value ("1.414") or the LaTeX as written ("\\sqrt{2}", which no float()
reads). Either way a stated "\\sqrt{2}" is never the integer 2, and "4.5\\pi" is 14.14 at two decimals. The rule-based
stand-in read the radicand or the coefficient instead (the first number of "\\sqrt{2}" is 2, of "5\\sqrt{3}" 5, of
"2^{1/2}" the 2 of "2^{0}" and ".5"), scoring a wrong answer right and a right one wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmevo.eval.scoring import extract_mathvista_answer, mathvista_is_correct, score_mathvista

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "mathvista_testmini" / "testmini.json"


def _rows() -> dict:
    if not DATA.exists():
        pytest.skip("MathVista testmini annotations not present")
    return json.loads(DATA.read_text(encoding="utf-8"))


def _official(extraction: str, item: dict) -> bool:
    # calculate_score.py's normalisation and equality (parity-tested in tests/test_parity_mathvista.py)
    return mathvista_is_correct(extraction, item)


# (pid, response, the value a GPT extraction of it returns): real testmini rows whose gold is a root or pi rounded
VALUE_CASES = [
    ("671", "The radius is 3, so the semicircle measures $4.5\\pi$. The answer is $4.5\\pi$.", "14.137"),  # gold 14.14
    ("671", "The answer is \\boxed{10\\sqrt{2}}", "14.142"),
    ("926", "The shaded area is \\boxed{5\\sqrt{2}}.", "7.071"),  # gold 7.07
    ("926", "The answer is $\\frac{10}{\\sqrt{2}}$", "7.071"),  # a root in a denominator
    ("641", "The cardiac output is \\boxed{\\frac{10\\sqrt{3}}{3}}", "5.774"),  # gold 5.77
    ("862", "The answer is $\\sqrt{109}$ m.", "10.440"),  # gold 10.44
    ("862", "Final answer: \\sqrt{109} \\approx 10.44", "10.440"),
    ("1", "The answer is \\sqrt{1.44}", "1.2"),  # gold 1.2, precision 1
    ("1", "So the ratio is $\\frac{\\sqrt{6}}{2}$.", "1.225"),
    ("4", "There are \\boxed{\\sqrt{16}} objects left.", "4"),  # integer gold 4
    ("4", "The answer is $\\sqrt[3]{64}$.", "4"),  # a perfect cube: 4, not 3.999... truncated to 3
    ("4", "The answer is 2^{2}", "4"),
]


@pytest.mark.parametrize("pid,response,value", VALUE_CASES)
def test_a_root_or_pi_reads_as_its_value(pid, response, value):
    item = _rows()[pid]
    assert _official(value, item), (pid, value)  # the value is right under the official rules
    assert score_mathvista(response, item), (pid, response, extract_mathvista_answer(response, item))


# A root's radicand, a coefficient, a power's base are never the answer: (pid, response, what a GPT extraction of it
# returns: the LaTeX as written, or the value), each wrong under the official rules
WRONG_CASES = [
    ("16", "The answer is \\sqrt{2}.", ("\\sqrt{2}", "1.414")),  # integer gold 2: was read 2
    ("16", "\\boxed{\\sqrt{2}}", ("\\sqrt{2}", "1.414")),
    ("16", "The answer is $2^{1/2}$", ("2^{1/2}", "1.414")),  # was read as "2^{1" and "/2}": 2
    ("16", "√2", ("√2", "1.414")),
    ("11", "The answer is \\boxed{5\\sqrt{3}}", ("5\\sqrt{3}", "8.660")),  # integer gold 5: was read 5
    ("11", "There are $5\\pi$ of them.", ("5\\pi", "15.708")),
    ("4", "The answer is $4\\sqrt{2}$.", ("4\\sqrt{2}", "5.657")),  # integer gold 4: 5.657 truncates to 5
]


@pytest.mark.parametrize("pid,response,extractions", WRONG_CASES)
def test_a_radicand_or_coefficient_is_not_the_answer(pid, response, extractions):
    item = _rows()[pid]
    assert not any(_official(e, item) for e in extractions)
    assert not score_mathvista(response, item), (pid, response, extract_mathvista_answer(response, item))


def test_fractional_powers_and_roots_on_a_synthetic_precision_three_row():
    item = {"pid": "p3", "question_type": "free_form", "answer_type": "float", "precision": 3, "answer": "1.414",
            "choices": None, "unit": None}
    for response in ("The answer is 2^{1/2}.", "The answer is 2^{0.5}", "\\boxed{\\sqrt 2}", "\\boxed{\\sqrt2}",
                     "The answer is $\\frac{\\sqrt{2}}{1}$", "x = \\sqrt{2} \\approx 1.414", "The answer is √2."):
        assert score_mathvista(response, item), (response, extract_mathvista_answer(response, item))
    # the negative root: -1.414
    neg = {**item, "answer": "-1.414"}
    assert score_mathvista("The answer is $-\\sqrt{2}$.", neg)
    assert score_mathvista("The answer is −\\sqrt{2}", neg)
    # no real value: never read as its radicand
    assert extract_mathvista_answer("The answer is \\sqrt{-4}", {**item, "answer": "-4.0"}) != "-4"
    # an even root of a negative number stays unread; a cube root of one is real
    cube = {**item, "answer": "-3.0"}
    assert score_mathvista("The answer is \\sqrt[3]{-27}", cube)


@pytest.mark.parametrize("minus", ["\u2010", "\u2011", "\u2012", "\ufe63"])
def test_a_hyphen_before_a_number_is_its_minus_sign(minus):
    # a non-breaking / figure hyphen is the sign, as U+2212 and U+2013 were (the value was read without it: "3")
    item = {"pid": "n1", "question_type": "free_form", "answer_type": "integer", "precision": None, "answer": "-3",
            "choices": None, "unit": None}
    assert score_mathvista(f"The value is {minus}3.", item)
    assert score_mathvista(f"The answer is {minus}3", item)
    assert not score_mathvista(f"The answer is {minus}3", {**item, "answer": "3"})
    floating = {**item, "answer_type": "float", "precision": 1, "answer": "-4.3"}
    assert score_mathvista(f"The answer is {minus}4.3", floating)
