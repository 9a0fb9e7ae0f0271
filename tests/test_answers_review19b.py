"""Review 19b of the trainer's answer matching (the accuracy reward, and ``mmevo eval`` on Geometry3K): answers that
name more than one option scored right.

1. The value-then-letter form "<text> (D)" / "<text>, option D" (review 19) let the letter decide whatever the text
   before it was: "A (D)", "A, B, C (D)", "between 30 (A) and 80 (D)", "80 or 30 (D)", "not A (D)", "none (D)",
   "A, option D", "The answer is A (D)" all scored right on the gold D = 80 (and "80 (D) or 30 (A)" on the gold
   A). Now the text must be the lettered option's value, as for "D (80)".
2. A letter first with a text naming another option by its letter was the first letter's: "(D) (A)", "D. Option A",
   "(D) A", and the options restated on their lines, "(A) 30\\n(B) 40\\n(C) 60\\n(D) 80", right on the gold A.
   A letter with a list holding another option's value was the letter's too: "(D) 30 or 80", "(D) 30, 40, 60, 80".
   Each now names two options (neither).
"""

from __future__ import annotations

import pytest

from datapaths import shared
from mmevo.data.benchmarks import load_items
from mmevo.eval.runner import scorer_for
from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import answers_equivalent, group_answer_keys, normalize_choice

ARC = ["30", "40", "60", "80"]  # Geometry3K problem 11, m arc AB; gold D


@pytest.mark.parametrize("ans", [
    "A (D)", "(A), (D)", "A, B, C (D)", "A, B, C, (D)", "between 30 (A) and 80 (D)", "80 or 30 (D)", "30 or 80 (D)",
    "A or 80 (D)", "not A (D)", "none (D)", "all (D)", "x (D)", "\\frac{1}{2}(D)", "{A}(D)", "A, option D",
    "option A, option D", "A; option D", "Answer: A, option D", "The answer is A (D)",
])
def test_a_text_before_the_letter_must_be_that_options_value(ans):
    assert answers_equivalent(ans, "D", ARC) is False  # all were True
    assert answers_equivalent(ans, "80", ARC) is False


@pytest.mark.parametrize("ans", [
    "(D) (A)", "D. Option A", "(D) A", "D. A", "(D) or (A)", "(D) 30 or 80", "(D) 80 or 30", "D. 30, 40, 60, 80",
    "(D) 30 and 80", "(D) 80 (A)", "(D) A or B", "D. 80, A",
])
def test_a_letter_with_another_options_letter_or_value_names_neither(ans):
    assert answers_equivalent(ans, "D", ARC) is False  # all were True
    assert answers_equivalent(ans, "A", ARC) is False


@pytest.mark.parametrize("ans", [
    "(A) 30\n(B) 40\n(C) 60\n(D) 80", "(A) 30, 40, 60, 80", "80 (D) or 30 (A)", "80 (D), not 30 (A)", "(A) or (D)",
    "(A) and (D)",
])
def test_restating_several_options_is_not_the_first_or_last(ans):
    assert answers_equivalent(ans, "A", ARC) is False  # all were True
    assert answers_equivalent(ans, "D", ARC) is False


@pytest.mark.parametrize("ans", [
    "80 (D)", "80^\\circ \\text{ (D)}", "80, option D", "D (80)", "D, 80", "D - 80", "(D) 80", "(D) 81",
    "(D) 80, since 2 \\times 40 = 80", "[D]", "\\text{Answer: D}", "D", "80",
])
def test_one_option_in_any_spelling_is_still_right(ans):
    assert answers_equivalent(ans, "D", ARC) is True


def test_a_letter_whose_text_is_a_letter_keeps_its_own_text():
    cube = ["A", "B", "C", "E", "Impossible to determine"]  # MATH-V 742: option D's text is the letter "E"
    assert answers_equivalent("(D) E", "D", cube) is True
    assert answers_equivalent("(D) C", "D", cube) is False
    thousands = ["1", "10", "100", "1,000"]
    assert answers_equivalent("(D) 1,000", "D", thousands) is True  # "1,000" is one number, no list with "1"


def test_mixed_answers_group_apart_from_either_option():
    keys = group_answer_keys(["A (D)", "D", "A", "(D) (A)", "80 (D)"], ARC)
    assert keys[1] == keys[4]
    assert len({keys[0], keys[1], keys[2]}) == 3 and keys[3] not in (keys[1], keys[2])
    assert normalize_choice("A (D)", ARC) == "A (D)"


def test_on_the_row_the_reward_and_eval_agree():
    items, _ = load_items("intergps", shared("geometry3k_samples", "Geometry3K InterGPS sample rows"))
    row = {it.id: it for it in items}["11"]
    for response, right in [("\\boxed{A, B, C (D)}", False), ("\\boxed{(D) (A)}", False),
                            ("\\boxed{80 or 30 (D)}", False), ("\\boxed{80 (D)}", True)]:
        _, correct = scorer_for("intergps")(response, row)
        reward = float(accuracy_rewards([response], [row.answer], [row.choices])[0])
        assert (correct, reward) == (right, float(right)), response


@pytest.mark.parametrize("unit", ["(A) 1, ", "80 (A) ", "A or ", "A, option ", "[A] ", "30 or ", "30, "])
def test_long_adversarial_answers(unit):
    # (20,000 characters: at most 0.07 s each here, linear scans; not timed in the test)
    ans = (unit * (20000 // len(unit) + 1))[:20000]
    for text in (ans, ans + " (D)", "(D) " + ans):
        assert answers_equivalent(text, "D", ARC) is False, text[:20]


def test_a_long_distinct_list_after_a_letter_names_no_one_option():
    ans = "(D) " + ", ".join(str(i) for i in range(100, 4000))
    assert answers_equivalent(ans, "D", ARC) is False
