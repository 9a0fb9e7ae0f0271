"""Mutation-testing additions for ``mmevo.eval.scoring``: each case below pins a rule of the official scorers that a
mutated implementation (a dropped normalisation step, a changed operator, index, constant or flag) got past the other
tests with.

Every expected value was produced by the reference, not by mmevo: MATH-V by lmms-eval 0.7.3's port of the official
MATH-V scorer (``lmms_eval/tasks/mathvision/{utils,eval_utils}.py``: ``mathvision_process_results`` (extraction and
verdict), ``is_equal``, ``eval_tuple``; same values with and without the ``from math import *`` of the official
``utils.py``), MathVista by ``normalize_extracted_answer`` / ``get_most_similar`` / ``Levenshtein.distance`` and the
rule-based fast paths of ``extract_answer`` (lmms-eval's ``mathvista_evals.py``, identical to the official
``evaluation/calculate_score.py`` / ``extract_answer.py``; the official ``safe_equal`` is ``prediction == answer``).
They were run on the same inputs and hard-coded here.
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import (
    _eval_tuple,
    _most_similar,
    edit_distance,
    extract_mathvision_answer,
    extract_mathvista_answer,
    mathvision_is_equal,
    mathvista_is_correct,
    normalize_mathvista_extraction,
    score_mathvision,
    score_mathvista,
)

# --------------------------------------------------------------------------------------------------------------
# MATH-V: the extracted answer (the model answer ``mathvision_process_results`` hands to ``is_equal``)
# --------------------------------------------------------------------------------------------------------------

# (response, answer extracted by the reference). Several inputs spell a LaTeX command with a unit word inside it
# ("\\apkmprox", "\\tekmxt"): ``find_math_answer`` removes "km" / "units" after its other clean-ups, which
# rebuilds the command for the steps that follow (``_strip_string``), so each step is seen on its own.
MATHV_EXTRACTIONS = [
    ('\\boxed{\\sqrt{2}\\frac1}', '\\sqrt{2}\\frac1'),
    ('\\boxed{\\sqrt{2}\\frac12}', '\\sqrt{2}\\frac{1}{2}'),
    ('\\boxed{\\sqrt{2}\\frac1{2}}', '\\sqrt{2}\\frac{1}{2}'),
    ('\\boxed{01/2}', '01/2'),
    ('\\boxed{\\sqrt(3)}', '\\sqrt{(}3)'),
    ('\\boxed{\\sqrt34}', '\\sqrt{3}4'),
    ('\\boxed{1\\!000}', '1000'),
    ('\\boxed{\\units\\pi}', '\\pi'),
    ('\\boxed{\\tfrac{1}{2}}', '\\frac{1}{2}'),
    ('\\boxed{\\dfrac{1}{2}}', '\\frac{1}{2}'),
    ('\\boxed{\\leunitsft(5\\riunitsght)}', '(5)'),
    ('\\boxed{90^\\ckmirc}', '90'),
    ('\\boxed{\\$5}', '5'),
    ('\\boxed{5\\tekmxt{cm}}', '5\\text{cm}'),
    ('\\boxed{5%}', '5%'),
    ('\\boxed{5\\%}', '5'),
    ('\\boxed{\\frac{.5}{2}}', '\\frac{0.5}{2}'),
    ('\\boxed{.5}', '\\frac{1}{2}'),
    ('\\boxed{1\\apkmprox2\\apkmprox3}', '1\\approx2\\approx3'),
    ('\\boxed{1\\apkmprox2}', '2'),
    ('\\boxed{\\frac12}', '\\frac12'),
    ('\\boxed{0.5}', '\\frac{1}{2}'),
    ('\\boxed{1/2}', '\\frac{1}{2}'),
    ('\\boxed{ABC}', 'abc'),
    ('\\boxed{x^{}2}', 'x^2'),
    ('\\boxed{1} \\BOXED{2}', '1'),
    ('\\boxed{{}}', ''),
    ('\\boxed{5} and }', '5'),
    ('\\boxed{x=5}', '5'),
    ('\\boxed{\\pi\\approx3.14}', '3.14'),
    ('\\boxed{1\\,000}', '1000'),
    ('\\boxed{-∞}', '-\\infty'),
    ('\\boxed{(-\\infty,+\\infty)}', '(-\\infty,\\infty)'),
    ('\\boxed{\\text{5}}', '{5}'),
    ('\\boxed{\\mbox{5}}', '{5}'),
    ('\\boxed{\\begin{bmatrix}1\\end{bmatrix}}', '\\begin{pmatrix}1\\end{pmatrix}'),
    ('\\boxed{5k^{\\circ}m}', '5'),
    ('\\boxed{5k^\\circm}', '5'),
    ('\\boxed{5{m}^3}', '5'),
    ('\\boxed{5m^3}', '5'),
    ('\\boxed{5{units}}', '5'),
    ('\\boxed{5units}', '5'),
    ('\\boxed{5{km}}', '5'),
    ('\\boxed{5km}', '5'),
    ('\\boxed{\\\\text5}', '5'),
    ('\\boxed{5k\\leftm}', '5'),
    ('Final: C. ', 'c'),
    ('  B\nreasoning', 'b'),
    ('Final: E.', 'e'),
    ('xC.', 'xc'),
    ('x(C).', 'xc'),
    ('Cat', 'cat'),
    ('(C)x', 'cx'),
    ('(C) Cx', 'ccx'),
    ('x C.', 'c'),
    ('x (C).', 'c'),
    ('C\nfoo', 'c'),
    ('(C)\nfoo', 'c'),
    ('(C) C\nfoo', 'c'),
    ('It is 12..', '12'),
    ('5 is 2, this4', '5is2,this4'),
    ('It is .5', '\\frac{1}{2}'),
    ('The answer is 3. \\Boxed{5}', '5'),
    ('The answer is 7 apples', '7apples'),
    ('the answer is 3\nThe answer is 4', '4'),
    ('the answer is\n5', '5'),
    ('the answer is 5. Next', '5'),
    ('the answer is 5\nmore', '5'),
    ('the answer is 2.5', '2.5'),
    ('5\nabc', '5abc'),
    ('\\boxed{1} \\boxed{2}', '2'),
    ('\\boxed{1} \\boxed{2} \\boxed{3}', '3'),
    ('\\boxed{(E)}', 'e'),
    ('\\boxed{(b)}', 'b'),
    ('\\boxed{{b}}', 'b'),
    ('\\boxed{{e}}', 'e'),
    ('\\boxed{5.}', '5'),
    ('\\boxed{:5}', '5'),
    ('\\boxed{5\t}', '5'),
    ('The answer should be 7 apples', '7apples'),
    ('the final answer is 4\nthe answer is 3', '3'),
    ('The correct answer is 7 apples', '7apples'),
    ('The final answer is 7 apples', '7apples'),
    ('\\boxed{\\sqrt{2}\\frac{1}{2}}', '\\sqrt{2}\\frac{1}{2}'),
    ('\\boxed{$5$}', '5'),
    ('\\boxed{x=y=5}', '5'),
    ('\\boxed{a\\approx b\\approx 3}', '3'),
    ('the answer is 3\nThe answer is 4 apples', '3'),
    ('the answer is 2.5 cm', '2.5cm'),
    ('the final answer is 4\nthe answer is 3 cm', '4'),
]


@pytest.mark.parametrize("response, official", MATHV_EXTRACTIONS)
def test_mathv_extraction_matches_reference(response, official):
    assert extract_mathvision_answer(response) == official


# (ground truth, model answer, reference ``is_equal``)
MATHV_EQUAL = [
    ('[1,2]', '[1.0,2]', True),
    ('ABC', 'abc', True),
    ('  ', '  ', False),
    ('', '', False),
    ('abc ', ' abc', True),
    ('(1,2)', '(1.0,2)', True),
    ('1.23', '1.24', False),
    ('1.231', '1.234', True),
    ('1.004', '1.006', False),
    ('1.001', '1.002', True),
    ('a b', 'ab', False),
    ('1', '1>0', True),
    ('1', '2>1', True),
    ('0', '1>1', True),
    ('1', '1\\geq 1', True),
    ('e', '\\exp(1)', False),
    ('2.72', '\\exp(1)', False),
    ('2.72', 'e^{1}', False),
    ('(a,1)', '(a,1.0)', True),
    ('(\\infty,1)', '(\\infty,1.0)', True),
    ('(-a,1)', '(-a,1.0)', True),
    ('{1,2}', '{1.0,2}', False),
    ('(1,2)', '(1, 2)', True),
    ('(1.0, a)', '(1, a)', False),
    ('-2', '-(2)', True),
    ('2', '5//2', False),
    ('1', '5\\bmod 2', False),
    ('-2', '2', False),
]


@pytest.mark.parametrize("gt, answer, official", MATHV_EQUAL)
def test_mathv_is_equal_matches_reference(gt, answer, official):
    assert mathvision_is_equal(gt, answer) is official


# (string, reference ``eval_tuple``)
MATHV_TUPLES = [
    ('(5)', '(5)'),
    ('(2/4)', '(2/4)'),
    ('[1.0,2]', '[1,2]'),
    ('{1.0,2}', '{1.0,2}'),
    ('(a,1.0)', '(a,1)'),
    ('(\\infty,1.0)', '(\\infty,1)'),
    ('(-a,1.0)', '(-a,1)'),
    ('(1.234,2)', '(1.23,2)'),
    ('(1,2)', '(1,2)'),
    ('(x,1.0)', '(x,1.0)'),
    ('[1,2]', '[1,2]'),
    ('(1.0, a)', '(1.0, a)'),
    ('(1, 2.0)', '(1,2)'),
    ('()', '()'),
    ('(1,)', '(1,)'),
]


@pytest.mark.parametrize("s, official", MATHV_TUPLES)
def test_mathv_eval_tuple_matches_reference(s, official):
    assert _eval_tuple(s) == official


# (response, answer, options, reference verdict)
MATHV_VERDICTS = [
    ('The answer is C', 'C', ['1', '2', '3', '4', '5'], True),
    ('\\boxed{5}', 'E', ['1', '2', '3', '4', '5'], True),
    ('\\boxed{3}', 'C', ['1', '2', '3', '4', '5'], True),
    ('\\boxed{C}', 'C', ['1', '2', '3', '4', '5'], True),
    ('\\boxed{2}', 'B', ['1', '2', '3'], True),
]


@pytest.mark.parametrize("response, answer, options, official", MATHV_VERDICTS)
def test_mathv_verdict_matches_reference(response, answer, options, official):
    assert score_mathvision(response, {"answer": answer, "options": options}) is official


# Chains of inequalities: latex2sympy2 1.9.1 nests them to the left ("1<3<2" is "(1 < 3) < 2"), which the official
# ``eval`` turns into a bool (True < 2 is True) and ``round`` into 1 / 0. A numeric chain therefore has a value there.
# (gt, model answer, reference ``is_equal``)
MATHV_CHAINED_RELATIONS = [
    ('1', '1<2<3', True),
    ('1', '1<3<2', True),
    ('0', '1<3<2', False),
    ('0', '3>2>1', True),
    ('1', '3>2>1', False),
    ('1', '1\\leq 2 \\leq 3', True),
    ('1', '0<1<2<3', True),
    ('1', '1<2>0', True),
    ('1', '2>1', True),
    ('0', '1>1', True),
    ('1', '1\\geq 1', True),
    ('1', '1 \\le 2 < 3', True),
    ('1', 'x<2<3', False),
    ('1', '\\frac{1}{2}<1<2', True),
    ('(1,1)', '(1<2<3,2>1)', True),
]


@pytest.mark.parametrize("gt, answer, official", MATHV_CHAINED_RELATIONS)
def test_mathv_chained_inequality_is_nested_like_latex2sympy2(gt, answer, official):
    assert mathvision_is_equal(gt, answer) is official


def test_mathv_chained_inequality_verdict():
    # reference mathvision_process_results: True
    assert score_mathvision("\\boxed{1<2<3}", {"answer": "1", "options": []}) is True


# --------------------------------------------------------------------------------------------------------------
# MathVista: normalisation, nearest choice, edit distance, fast paths of the extractor
# --------------------------------------------------------------------------------------------------------------

# (extraction, choices, question_type, answer_type, precision, reference ``normalize_extracted_answer``)
MATHVISTA_NORMALISED = [
    (' A ', ['x', 'y'], 'multi_choice', 'text', None, 'x'),
    ('(b)', ['x', 'y'], 'multi_choice', 'text', None, 'y'),
    ('(A) or (B)', ['x', 'y'], 'multi_choice', 'text', None, 'x'),
    ('b', ['apple', 'banana'], 'multi_choice', 'text', None, 'apple'),
    ('2.7', [], 'free_form', 'integer', None, '2'),
    ('2.0', [], 'free_form', 'integer', None, '2'),
    ('1.25', [], 'free_form', 'float', 1, '1.2'),
    ('1.26', [], 'free_form', 'float', 2, '1.26'),
    ('3.14159', [], 'free_form', 'float', 0, '3.0'),
    ('[1, 2]', [], 'free_form', 'list', None, '[1, 2]'),
    ('(B) text', ['x', 'y'], 'multi_choice', 'text', None, 'y'),
    ('hello', [], 'free_form', 'text', None, 'hello'),
    ('', ['abc', 'd', 'ef'], 'multi_choice', 'text', None, 'd'),
    ('-7.9', [], 'free_form', 'integer', None, '-7'),
    ('1e3', [], 'free_form', 'integer', None, '1000'),
    (' A ', ['xyz', 'A'], 'multi_choice', 'text', None, 'xyz'),
    ('ab', ['ab', 'AB'], 'multi_choice', 'text', None, 'ab'),
    ('[1, 2] ', [], 'free_form', 'list', None, '[1, 2] '),
]


@pytest.mark.parametrize("extraction, choices, qtype, atype, precision, official", MATHVISTA_NORMALISED)
def test_mathvista_normalisation_matches_reference(extraction, choices, qtype, atype, precision, official):
    item = {"choices": choices, "question_type": qtype, "answer_type": atype, "precision": precision}
    assert normalize_mathvista_extraction(extraction, item) == official


# (prediction, choices, reference ``get_most_similar``: smallest edit distance, the first choice on a tie)
MATHVISTA_MOST_SIMILAR = [
    ('b', ['a', 'c'], 'a'),
    ('', ['abc', 'd', 'ef'], 'd'),
]


@pytest.mark.parametrize("prediction, choices, official", MATHVISTA_MOST_SIMILAR)
def test_mathvista_most_similar_matches_reference(prediction, choices, official):
    assert _most_similar(prediction, choices) == official


# (a, b, ``Levenshtein.distance(a, b)``)
EDIT_DISTANCES = [
    ('', 'abc', 3),
    ('abc', '', 3),
    ('kitten', 'sitting', 3),
    ('flaw', 'lawn', 2),
    ('ab', 'ba', 2),
]


@pytest.mark.parametrize("a, b, official", EDIT_DISTANCES)
def test_edit_distance_matches_levenshtein(a, b, official):
    assert edit_distance(a, b) == official


# (response, question_type, answer_type, choices, precision, what the official ``extract_answer`` returns before its
# GPT call: the response if it is a choice text, ``str(int(response))`` for an integer, ``str(float(response))`` for a
# float; "" for an empty response)
MATHVISTA_FAST_PATHS = [
    ('12345678901234567890', 'free_form', 'integer', None, None, '12345678901234567890'),
    ('1e3', 'free_form', 'float', None, 1, '1000.0'),
    ('1_000', 'free_form', 'integer', None, None, '1000'),
    ('', 'multi_choice', 'text', ['abc', 'd', 'ef'], None, ''),
    ('ef', 'multi_choice', 'text', ['abc', 'd', 'ef'], None, 'ef'),
    (' 7 ', 'free_form', 'integer', None, None, '7'),
    ('2.50', 'free_form', 'float', None, 2, '2.5'),
]


@pytest.mark.parametrize("response, qtype, atype, choices, precision, official", MATHVISTA_FAST_PATHS)
def test_mathvista_fast_paths_match_reference(response, qtype, atype, choices, precision, official):
    item = {"question_type": qtype, "answer_type": atype, "choices": choices, "precision": precision}
    assert extract_mathvista_answer(response, item) == official


_MC = {"question_type": "multi_choice", "answer_type": "text", "choices": ["abc", "d", "ef"], "precision": None}


def test_mathvista_empty_response_is_the_nearest_choice():
    # Official pipeline: extract_answer("") is "", which normalize_extracted_answer maps to the nearest choice text
    # (edit distance to "": the shortest choice, "d").
    assert score_mathvista("", dict(_MC, answer="d")) is True
    assert score_mathvista("", dict(_MC, answer="ef")) is False


# (extraction, item, official verdict ``safe_equal(normalize_extracted_answer(...), answer)``). The official
# ``safe_equal`` (MathVista ``evaluation/calculate_score.py``) is ``prediction == answer``: no case folding and no
# stripping (lmms-eval's copy strips; the official one does not).
MATHVISTA_VERDICTS = [
    ("ab", {"question_type": "multi_choice", "answer_type": "text", "choices": ["ab", "AB"], "precision": None,
            "answer": "AB"}, False),
    ("[1, 2] ", {"question_type": "free_form", "answer_type": "list", "choices": None, "precision": None,
                 "answer": "[1, 2]"}, False),
    ("[1, 2]", {"question_type": "free_form", "answer_type": "list", "choices": None, "precision": None,
                "answer": "[1, 2]"}, True),
    ("2.0", {"question_type": "free_form", "answer_type": "integer", "choices": None, "precision": None,
             "answer": "2"}, True),
]


@pytest.mark.parametrize("extraction, item, official", MATHVISTA_VERDICTS)
def test_mathvista_verdict_matches_official_safe_equal(extraction, item, official):
    assert mathvista_is_correct(extraction, item) is official
