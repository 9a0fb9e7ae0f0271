"""Review 29 (``scripts/parity_styles.py --styles fifth``): a letter and a value in either order, agreeing or not ("80
(D)", "\\text{(D) } 80", "80, option D", "\\text{D}\\ 80", the gold's letter with a wrong value and the reverse), the
letter in text / font wrappers (nested, ``\\textrm``), free-form golds inside wrappers around math
(``\\text{\\frac{20}{3}}``, ``\\text{$12$}``, ``\\textstyle``), and every option's letter and text of the MATH-V rows
whose options are themselves letters.

MathVista (1,000 testmini rows, 61,605 pairs; a letter with another option's value is left out: what a GPT extraction
returns for it is not stated): 5,284 disagreed before, in three classes, 0 now:

1. a letter in a font wrapper other than ``\\text`` / ``\\textbf`` / ``\\mathbf`` / ``\\mathrm``, or in two
   (``\\textrm{C}``, ``\\text{\\textbf{C}}``): read as it stands ("\\textrm{C}", "\\text{C}"), which the official
   nearest-choice rule maps to some option (5,260 pairs);
2. a letter and its own option's text with only a space between, "C 5", ``\\boxed{\\text{C}\\ 5}`` (pid 271, choices
   3 / 4.5 / 5 / 6: the nearest text to "C 5" is "3"), and "E (b)" (pids 168 / 849, whose texts are bracketed
   letters: read "b", no option; 14 pairs);
3. an option's text with its letter after a comma, "(b), option E" (pids 168 / 849: read "(b)", the letter of the
   2nd option; 10 pairs).

MATH-V (every 20th test row from offset 7, 152 rows, 18,850 pairs, and the nine rows whose options are letters: 654,
742, 941, 1754, 1841, 428, 1058, 1127, 1503, 1,800 pairs): 0 disagreements with the official ``evaluate.py``; nor in
22,348 pairs of 24 letter and text spellings in 12 frames over those nine rows and rows 2 and 3. On rows whose
options are letters the official scorer accepts the gold's letter and the gold option's text alike, whatever other
option that text is the letter of: on 742 (options A, B, C, E, "Impossible to determine"; gold D, whose text is "E")
"\\boxed{E}" is right, on 654 (A, B, D, F, G; gold E = "G") "\\boxed{E}" and "\\boxed{G}" both, on 941 (K, E, N, G, U;
gold D = "G") "\\boxed{G}" but not "\\boxed{E}" (option B's text); a letter with its text ("\\boxed{(D) E}") is wrong.
mmevo keeps these verdicts.
"""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import extract_mathvista_answer, score_mathvision, score_mathvista
from test_scoring_review16 import _mc, assert_official_mathvision_agrees, assert_official_mathvista_agrees

# MathVista testmini rows, as in testmini.json
ANGLES_145 = _mc("3", ["135°", "140°", "145°", "150°"], "145°")
EIGHT = _mc("9", ["2", "4", "6", "8"], "8")
FIVES = _mc("271", ["3", "4.5", "5", "6"], "5")
LETTER_TEXTS = _mc("168", ["(c)", "(a)", "(e)", "(d)", "(b)"], "(b)")

# (item, response, what the official GPT extractor returns for it, the official verdict)
VISTA = [
    # 1. font wrappers
    (ANGLES_145, "\\boxed{\\textrm{C}}", "C", True),  # was '\\textrm{C}' -> nearest choice
    (ANGLES_145, "The answer is \\text{\\textbf{C}}.", "C", True),  # was '\\text{C}'
    (EIGHT, "\\boxed{\\textit{D}}", "D", True),  # was '\\textit{D}'
    (EIGHT, "$\\boxed{\\mathit{D}}$", "D", True),  # was '\\mathit{D}'
    (EIGHT, "<answer>\\boxed{\\textsf{D}}</answer>", "D", True),  # was '\\textsf{D}'
    (ANGLES_145, "\\boxed{\\textrm{B}}", "B", False),
    (EIGHT, "\\boxed{\\text{\\textbf{C}}}", "C", False),
    # 2. a letter, a space, its own option's text
    (FIVES, "\\boxed{\\text{C}\\ 5}", "C", True),  # was 'C\\ 5' -> nearest choice '3'
    (FIVES, "The answer is C 5.", "C", True),  # was 'C 5'
    (LETTER_TEXTS, "The answer is E (b).", "E", True),  # was 'E (b)' -> no option
    (FIVES, "The answer is C 4.5.", "C 4.5", False),  # not its own text: left to the nearest-choice rule
    # 3. the text, a comma, its letter named as an option
    (LETTER_TEXTS, "\\boxed{(b), option E}", "E", True),  # was '(b)', the letter of the 2nd option
    (FIVES, "The answer is 5, option C.", "5", True),
    # shapes that already agreed, pinned
    (ANGLES_145, "\\boxed{145^\\circ \\text{ (C)}}", "C", True),
    (ANGLES_145, "\\boxed{\\text{(C) } 145^\\circ}", "C", True),
    (FIVES, "\\boxed{5 (C)}", "C", True),
    (FIVES, "\\boxed{C: 5}", "C", True),
]


@pytest.mark.parametrize("item,response,gpt_extraction,official", VISTA)
def test_mathvista_wrapped_and_spaced_letters_get_the_official_verdict(item, response, gpt_extraction, official):
    assert score_mathvista(response, item) is official


@pytest.mark.parametrize("item,response,extracted", [
    (ANGLES_145, "\\boxed{\\textrm{C}}", "C"),
    (ANGLES_145, "\\boxed{\\text{\\textbf{C}}}", "C"),
    (FIVES, "\\boxed{C\\ 5}", "C"),
    (FIVES, "The answer is C 5.", "C"),
    (LETTER_TEXTS, "The answer is E (b).", "E"),
    (LETTER_TEXTS, "(b), option E", "E"),
    # a whole response restating the options on its lines is still not read as its first letter
    (FIVES, "A 3\nB 4.5\nC 5", ""),
])
def test_answers_are_read_as_stated(item, response, extracted):
    assert extract_mathvista_answer(response, item) == extracted


def test_the_official_mathvista_pipeline_agrees():
    assert_official_mathvista_agrees(VISTA)


# MATH-V rows whose options are letters (test.jsonl): (response, answer, options, official verdict)
CARDS = ["A", "B", "D", "F", "G"]  # 654, gold E: the card "G"
CUBE = ["A", "B", "C", "E", "Impossible to determine"]  # 742, gold D: the letter "E"
KENGU = ["K", "E", "N", "G", "U"]  # 941, gold D: the letter "G"
MATHV = [
    ("\\boxed{E}", "E", CARDS, True), ("\\boxed{G}", "E", CARDS, True), ("The answer is G.", "E", CARDS, True),
    ("\\boxed{D}", "E", CARDS, False), ("\\boxed{F}", "E", CARDS, False), ("\\boxed{(E) G}", "E", CARDS, False),
    ("\\boxed{D}", "D", CUBE, True), ("\\boxed{E}", "D", CUBE, True), ("The answer is E.", "D", CUBE, True),
    ("\\boxed{Impossible to determine}", "D", CUBE, False), ("\\boxed{(D) E}", "D", CUBE, False),
    ("\\boxed{E (D)}", "D", CUBE, False), ("\\boxed{C}", "D", CUBE, False),
    ("\\boxed{D}", "D", KENGU, True), ("\\boxed{G}", "D", KENGU, True), ("\\boxed{E}", "D", KENGU, False),
    ("The answer is E.", "D", KENGU, False), ("\\boxed{(D) G}", "D", KENGU, False),
]


@pytest.mark.parametrize("response,answer,options,official", MATHV)
def test_mathvision_rows_whose_options_are_letters(response, answer, options, official):
    assert score_mathvision(response, {"answer": answer, "options": options}) is official


def test_the_official_mathvision_scorer_agrees():
    assert_official_mathvision_agrees(MATHV)
