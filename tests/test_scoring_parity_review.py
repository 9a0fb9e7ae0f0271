"""Disagreements with the official scorers found by an adversarial parity review, pinned.

Every expected verdict below is the official one, computed on the exact (response, row) pair:

* MATH-V: ``mathvision_process_results`` of lmms-eval 0.7.3 (``lmms_eval/tasks/mathvision/utils.py``, with its
  ``find_math_answer`` / ``is_equal`` from ``eval_utils.py``), run with the ``math`` names that the official MATH-V
  ``evaluation/utils.py`` imports (``from math import *``; lmms-eval's copy dropped it, see
  tests/test_parity_mathvision.py). Where lmms-eval's copy decides otherwise it is said next to the case.
* MathVista: ``MathVistaEvaluator.extract_answer`` (its rule-based fast path: the response is a choice text) and
  ``normalize_extracted_answer`` of lmms-eval 0.7.3 (``lmms_eval/tasks/mathvista/mathvista_evals.py``, the official
  ``calculate_score.py`` rules), then the official ``safe_equal`` (``prediction == answer``).

The rows are written inline (free-form MATH-V rows need only ``answer`` / ``options``; the two MathVista rows are
testmini pids 168 and 849 as they are in testmini.json).
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import mathvista_is_correct, score_mathvision, score_mathvista


def _free_form(answer: str) -> dict:
    return {"answer": answer, "options": []}


# ----------------------------------------------------------------------------------------------------------
# MATH-V: latex2sympy2 stops reading at a token that cannot continue a complete expression
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "response, answer, official",
    [
        # No box and no answer flag: the whole response is the answer; latex2sympy2 reads the number and stops
        # at the "." after it (official mathvision_process_results -> is_equal: True).
        ("18. Because the two base angles are equal, the apex angle is 180 - 2 * 81.", "18", True),
        ("12. This follows from the similar triangles.", "12", True),
        ("4.5. The area of the shaded part is half of 9.", "4.5", True),
        # ... however long the rest is (nothing after the "." is read)
        ("18. " + "Because the base angles are equal, we subtract twice the base angle from the straight angle. " * 30,
         "18", True),
        # The degree sign outside the box: find_math_answer keeps "\\frac{45}{2}}^{\\circ"; latex2sympy2 stops at
        # the "}" that closes nothing, before the "\\circ" it could not read (official is_equal: True).
        ("\\boxed{\\dfrac{45}{2}}^{\\circ}", "22.5", True),
        # official True; lmms-eval's copy False (no sqrt without the math names)
        ("The angle is $\\boxed{2\\sqrt{3}}^{\\circ}$", "$2\\sqrt{3}$", True),
        # "&", a line break "\\\\" and "\\to" end the expression too (official is_equal: True)
        ("The answer is 6&", "6", True),
        ("The answer is 24 \\to", "24", True),
        ("\\boxed{60.\\\\}", "60", True),
        # ... and what follows the stop is never read, even a command it has no rule for (official is_equal: True)
        ("The answer is 22 \\to \\boxed", "22", True),
    ],
)
def test_mathvision_latex2sympy2_stops_reading(response, answer, official):
    assert score_mathvision(response, _free_form(answer)) is official


# ----------------------------------------------------------------------------------------------------------
# MATH-V: what the official eval(str(latex2sympy(x))) makes of exp and inequalities
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "response, answer, official",
    [
        # latex2sympy2 builds sympy.exp(x) evaluated: exp(log(5)) is printed "5" (official is_equal: True)
        ("\\boxed{\\exp(\\ln 5)}", "5", True),
        # an inequality evaluates to a bool, and round(True, 2) == 1, round(False, 2) == 0 (official is_equal)
        ("\\boxed{2 > 1}", "1", True),
        ("\\boxed{3 \\geq 5}", "0", True),
    ],
)
def test_mathvision_evaluated_expressions(response, answer, official):
    assert score_mathvision(response, _free_form(answer)) is official


# ----------------------------------------------------------------------------------------------------------
# MATH-V: the cost guards refused answers the official script scores in milliseconds
# ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "response, answer, official",
    [
        # a factorial of a small integer next to a power (official is_equal: True, in under 0.1 s; lmms-eval's
        # copy: False, it has no factorial name)
        ("\\boxed{2^3 \\cdot 3!}", "48", True),
        ("\\boxed{\\frac{10!}{2^{5}}}", "113400", True),
        ("\\boxed{2^5 - 5!}", "-88", True),
        ("\\boxed{\\frac{6!}{2^{4}}}", "45", True),
        ("\\boxed{\\binom{10}{3}\\cdot 3!}", "720", True),
        # a binomial / gcd with small arguments next to a power (official is_equal: True, lmms-eval's copy too)
        ("\\boxed{\\binom{5}{2}^2}", "100", True),
        ("\\boxed{2^{10}-\\binom{10}{0}}", "1023", True),
        ("\\boxed{\\gcd(12, 18)^2}", "36", True),
    ],
)
def test_mathvision_guards_do_not_refuse_cheap_answers(response, answer, official):
    assert score_mathvision(response, _free_form(answer)) is official


# ----------------------------------------------------------------------------------------------------------
# MathVista: the official letter rule applies to a choice text too
# ----------------------------------------------------------------------------------------------------------

PID_168 = {"question_type": "multi_choice", "answer_type": "text", "precision": None,
           "choices": ["(c)", "(a)", "(e)", "(d)", "(b)"], "answer": "(b)"}
PID_849 = {"question_type": "multi_choice", "answer_type": "text", "precision": None,
           "choices": ["(c)", "(d)", "(a)", "(b)", "(e)"], "answer": "(b)"}


@pytest.mark.parametrize(
    "row, extraction, official",
    [
        # official normalize_extracted_answer: "(b)" -> the letter B -> the 2nd choice ("(a)" / "(d)"), != "(b)"
        (PID_168, "(b)", False),
        (PID_849, "(b)", False),
        # ... and the 5th / 4th choice text, read as the letter E / D, is the gold "(b)"
        (PID_168, "(e)", True),
        (PID_849, "(d)", True),
    ],
)
def test_mathvista_choice_text_read_as_letter(row, extraction, official):
    assert mathvista_is_correct(extraction, row) is official


@pytest.mark.parametrize(
    "row, response, official",
    [
        # official extract_answer fast path (the response is a choice text: returned as is), then
        # normalize_extracted_answer as above
        (PID_168, "(b)", False),
        (PID_849, "(b)", False),
        (PID_849, "(d)", True),
    ],
)
def test_mathvista_choice_text_response(row, response, official):
    assert score_mathvista(response, row) is official
