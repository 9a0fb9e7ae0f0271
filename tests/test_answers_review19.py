"""Review 19 of the trainer's answer matching (the accuracy reward, and ``mmevo eval`` on Geometry3K / GeoQA / generic
rows) on the shared InterGPS rows: an answer naming both a choice's letter and a value, and math inside text wrappers.

1. ``\\boxed{80^\\circ \\text{ (D)}}`` (the value, then its option's letter) named no option and was no number: scored
   wrong against the gold D = 80. And a box naming one option by its letter and another by its value ("(D) 30",
   "D: 30", "A. 80") was read by its letter alone: right when that letter was gold, whatever the value. Now the
   value then its letter ("80 (D)", "80, option D", "80\\text{ (D)}"), the letter then its value with only a space, a
   comma or a dash between or in brackets ("\\text{D}\\ 80", "D, 80", "D - 80", "D (80^\\circ)": read only when the
   value is D's), "[D]", and a boxed "Answer: D" / "The answer is D" name that option, and a letter with another
   option's value names none. Sweep (`test_every_choice_in_every_spelling`): 4,320 boxed answers on the ten rows,
   every letter in 8 spellings, every (letter, option value) in 22 and every option value in 12: 434 wrong verdicts
   before (264 wrong answers scored right, nearly all a letter with another option's value; 170 right ones scored
   wrong), 0 now.
2. ``\\text{\\frac{20}{3}}`` was left as text (a wrapper's argument could hold no braces), so it matched no
   ``\\frac{20}{3}``; the same for ``\\mathrm{\\sqrt{3}}``, ``\\textbf{\\dfrac{20}{3}}``; ``\\textrm`` / ``\\mathit`` /
   ``\\boldsymbol`` / ``\\textsf`` ... were no wrappers, and ``\\textstyle`` was read as a symbol.
"""

from __future__ import annotations

import pytest

from datapaths import shared
from mmevo.data.benchmarks import load_items
from mmevo.eval.runner import scorer_for
from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import answers_equivalent, extract_answer, group_answer_keys, normalize_choice


@pytest.fixture(scope="module")
def rows() -> dict:
    items, _ = load_items("intergps", shared("geometry3k_samples", "Geometry3K InterGPS sample rows"))
    return {it.id: it for it in items}


def _verdicts(item, response: str) -> tuple[bool, float]:
    """(``mmevo eval``'s verdict, the trainer's accuracy reward) for ``response`` on ``item``."""
    _, correct = scorer_for("intergps")(response, item)
    return correct, float(accuracy_rewards([response], [item.answer], [item.choices])[0])


@pytest.mark.parametrize("response, right", [
    ("\\boxed{80^\\circ \\text{ (D)}}", True),  # was wrong
    ("\\boxed{80\\text{ (D)}}", True),  # was wrong
    ("\\boxed{80 (D)}", True),  # was wrong
    ("\\boxed{80^{\\circ} (D)}", True),  # was wrong
    ("\\boxed{80, option D}", True),  # was wrong
    ("\\boxed{80 \\text{(option D)}}", True),  # was wrong
    ("<answer>80^\\circ (D)</answer>", True),  # was wrong
    ("\\boxed{\\text{Option D: } 80}", True),  # was wrong
    ("\\boxed{\\text{D}\\ 80}", True),  # was wrong
    ("\\boxed{\\text{(D) } 80^\\circ}", True),
    ("\\boxed{D: 80}", True),
    ("\\boxed{(D) 80}", True),
    ("\\boxed{D. 80^\\circ}", True),
    ("\\boxed{(D) 81}", True),  # a value that is no option's: the letter decides, as before
    ("\\boxed{D (80^\\circ)}", True),  # was wrong
    ("\\boxed{D, 80}", True),  # was wrong
    ("\\boxed{D - 80}", True),  # was wrong
    ("\\boxed{[D]}", True),  # was wrong
    ("\\boxed{\\text{Answer: D}}", True),  # was wrong
    ("\\boxed{\\text{The answer is D}}", True),  # was wrong
    ("\\boxed{Answer: 80^\\circ}", True),
    ("\\boxed{D (81)}", False),  # letter first, a value in brackets that is no option's: not read as D
    ("\\boxed{D (30)}", False),
    ("\\boxed{A, 80}", False),
    ("\\boxed{[A]}", False),
    ("\\boxed{\\text{Answer: A}}", False),
    # a letter and another option's value name two options
    ("\\boxed{(D) 30}", False),  # was right
    ("\\boxed{D: 30}", False),  # was right
    ("\\boxed{\\text{(D) } 30^\\circ}", False),  # was right
    ("\\boxed{30 (D)}", False),
    ("\\boxed{80 (A)}", False),
    ("\\boxed{A. 80}", False),
    ("\\boxed{\\text{A}\\ 80}", False),
    ("\\boxed{80 (B)}", False),
    ("\\boxed{D 30}", False),
    # kept (README)
    ("The answer is 80.", False),
    ("\\boxed{d}", False),
])
def test_a_letter_and_a_value_name_one_option_only_when_they_agree(rows, response, right):
    assert _verdicts(rows["11"], response) == (right, float(right))  # m arc AB: 30 / 40 / 60 / 80, gold D


def test_the_other_gold_of_a_mixed_answer_is_not_right_either(rows):
    # "(D) 30" names A by its value: wrong on a row whose gold is A too (problem 20: 16 / 32 / 74 / 80, gold A = 16)
    assert _verdicts(rows["20"], "\\boxed{(D) 16}") == (False, 0.0)
    assert _verdicts(rows["20"], "\\boxed{16 (A)}") == (True, 1.0)
    assert _verdicts(rows["20"], "\\boxed{80 (A)}") == (False, 0.0)


def test_irrational_values_with_their_letter(rows):
    y, sin_x = rows["15"], rows["19"]  # 5, 5√2, 5√3, 10 (gold C); four \frac{..\sqrt..}{..} (gold D)
    for response in ["\\boxed{5\\sqrt{3} (C)}", "\\boxed{(C) 5\\sqrt3}", "\\boxed{\\text{(C) } \\sqrt{75}}",
                     "\\boxed{\\text{C}\\ 5 \\sqrt { 3 }}"]:
        assert _verdicts(y, response) == (True, 1.0), response
    for response in ["\\boxed{5\\sqrt{2} (C)}", "\\boxed{(C) 10}", "\\boxed{5\\sqrt{3} (B)}"]:
        assert _verdicts(y, response) == (False, 0.0), response
    assert _verdicts(sin_x, "\\boxed{\\frac{2\\sqrt{2}}{5} \\text{ (D)}}") == (True, 1.0)
    assert _verdicts(sin_x, "\\boxed{(D) \\frac{\\sqrt{2}}{5}}") == (False, 0.0)


def test_a_mixed_answer_is_its_own_group():
    choices = ["30", "40", "60", "80"]
    keys = group_answer_keys(["(D) 30", "D", "80 (D)", "30", "A", "80^\\circ \\text{ (D)}"], choices)
    assert keys[1] == keys[2] == keys[5] and keys[3] == keys[4]
    assert keys[0] not in (keys[1], keys[3])
    assert normalize_choice("(D) 30", choices) == "(D) 30"
    assert normalize_choice("80 (D)", choices) == "80"


@pytest.mark.parametrize("ans", ["P(A)", "f(B)", "A x", "Area 80"])
def test_a_capital_in_brackets_after_a_name_is_no_option(ans):
    assert normalize_choice(ans, ["30", "40", "60", "80"]) == ans


@pytest.mark.parametrize("pred, gold", [
    ("\\text{\\frac{20}{3}}", "\\frac{20}{3}"),  # was unequal
    ("\\mathrm{\\frac{20}{3}}", "\\frac{20}{3}"),  # was unequal
    ("\\textbf{\\dfrac{20}{3}}", "20/3"),  # was unequal
    ("\\text{\\sqrt{3}}", "\\sqrt{3}"),  # was unequal
    ("\\text{5\\sqrt{3}}", "5\\sqrt{3}"),  # was unequal
    ("\\mathbf{\\frac{1}{2}}", "0.5"),  # was unequal
    ("\\text{\\(\\frac{20}{3}\\)}", "\\frac{20}{3}"),  # was unequal
    ("\\textrm{12 cm}", "12"),  # was unequal
    ("\\mathit{\\frac{20}{3}}", "\\frac{20}{3}"),  # was unequal
    ("\\boldsymbol{12}", "12"),  # was unequal
    ("\\textsf{12}", "12"),  # was unequal
    ("\\textstyle \\frac{20}{3}", "\\frac{20}{3}"),  # was unequal
    ("\\text{\\textbf{\\frac{20}{3}}}", "\\frac{20}{3}"),  # was unequal
    ("\\text{$\\frac{20}{3}$}", "\\frac{20}{3}"),
    ("\\text{\\textbf{5}}", "5"),
])
def test_math_inside_a_text_wrapper_is_that_math(pred, gold):
    assert answers_equivalent(pred, gold) is True
    assert answers_equivalent(extract_answer(f"so \\boxed{{{pred}}}."), gold) is True


@pytest.mark.parametrize("pred, gold", [
    ("\\text{\\frac{20}{3}}", "\\frac{3}{20}"),
    ("\\text{\\sqrt{3}}", "3"),
    ("\\mathbb{12}", "12"),  # a blackboard letter is no presentation of a number
])
def test_wrapped_math_is_still_compared(pred, gold):
    assert answers_equivalent(pred, gold) is False


def test_wrapped_fraction_choice_on_a_row(rows):
    sin_x = rows["19"]
    assert _verdicts(sin_x, "\\boxed{\\text{\\frac{2\\sqrt{2}}{5}}}") == (True, 1.0)  # was wrong
    assert _verdicts(sin_x, "\\boxed{\\mathrm{\\frac{\\sqrt{2}}{5}}}") == (False, 0.0)


def _letter_only(L: str) -> list[str]:
    return [L, f"({L})", f"{L}.", f"[{L}]", f"\\text{{{L}}}", f"\\text{{({L})}}", f"\\text{{Answer: {L}}}",
            f"\\text{{The answer is {L}}}"]


def _letter_and_value(L: str, t: str) -> list[str]:
    return [f"{L}: {t}", f"{L}. {t}", f"({L}) {t}", f"{L}) {t}", f"\\text{{({L}) }} {t}", f"\\text{{({L}) }} {t}^\\circ",
            f"{t} ({L})", f"{t}^\\circ \\text{{ ({L})}}", f"{t}\\text{{ ({L})}}", f"{t}, ({L})", f"{t} (\\text{{{L}}})",
            f"{t} \\text{{(option {L})}}", f"\\text{{{L}: }} {t}", f"\\textbf{{({L})}} {t}", f"{t}^{{\\circ}} ({L})",
            f"\\text{{Option {L}: }} {t}", f"\\text{{{L}}}\\ {t}", f"{L} ({t})", f"{L}\\ ({t}^\\circ)", f"{L}, {t}",
            f"{L} - {t}", f"\\text{{Answer: }} {L}. {t}"]


def _value(t: str) -> list[str]:
    return [t, f"{t}^\\circ", f"{t}^{{\\circ}}", f"{t}°", f"\\text{{{t}}}", f"\\mathrm{{{t}}}", f"\\textbf{{{t}}}",
            f"{t} \\text{{ cm}}", f"x = {t}", f"\\left( {t} \\right)", f"\\displaystyle {t}", f"\\textstyle {t}"]


def test_every_choice_in_every_spelling(rows):
    """Every row, every option's value written with every letter: right only with the gold's letter and value."""
    assert sweep_errors(rows.values()) == []


def sweep_errors(items) -> list[tuple]:
    """(row, answer, right) of each wrong verdict: every letter alone, every letter with every option's value, every
    option's value alone, boxed."""
    wrong = []
    for item in items:
        gold = item.choices.index(item.answer)
        for k in range(len(item.choices)):
            for ans in _letter_only(chr(65 + k)):
                if _verdicts(item, f"\\boxed{{{ans}}}") != (k == gold, float(k == gold)):
                    wrong.append((item.id, ans, k == gold))
        for v, value in enumerate(item.choices):
            for k in range(len(item.choices)):
                for ans in _letter_and_value(chr(65 + k), value):
                    right = k == gold and v == gold
                    if _verdicts(item, f"\\boxed{{{ans}}}") != (right, float(right)):
                        wrong.append((item.id, ans, right))
            for ans in _value(value):
                right = v == gold
                if _verdicts(item, f"\\boxed{{{ans}}}") != (right, float(right)):
                    wrong.append((item.id, ans, right))
    return wrong
