"""Mutation-testing follow-up for mmevo/rewards/answers.py: tests that kill mutants the existing suite let through.
Each expected value follows from the rule the docstring / comment in answers.py states (or from plain LaTeX / maths),
not from reading off the current output."""

from __future__ import annotations

import pytest

from mmevo.rewards import answers as A


# -- extraction --------------------------------------------------------------------------------------------------------
def test_escaped_brace_inside_a_box_is_not_grouping():
    # "\{" is a literal set brace (_braced_from's docstring), so an unbalanced one, as in a piecewise answer
    # "\left\{ ... \right.", must not keep the box open
    assert A.extract_boxed(r"so \boxed{\left\{ x \mid x > 1 \right.} done") == r"\left\{ x \mid x > 1 \right."


@pytest.mark.parametrize("text", [r"<answer>\[ 7 \]</answer>", r"<answer>$\[7\]$</answer>", r"<answer>\[ \(7\) \]</answer>"])
def test_display_math_delimiters_are_stripped(text):
    # _clean strips math delimiters ($, \( \), \[ \]), nested ones too (it loops until nothing changes)
    assert A.extract_answer(text) == "7"


def test_letter_phrase_is_not_the_first_letter_of_a_word():
    # "Answer: Because ..." is prose, not choice B: the letter must stand alone
    assert A.extract_answer("Answer: Because the two angles are equal.", ["1", "2", "3", "4"]) is None


def test_fullwidth_colon_after_answer():
    # the phrase pattern accepts ":" and the full-width "：" of CJK text
    assert A.extract_answer("Answer：C", ["1", "2", "3", "4"]) == "C"


@pytest.mark.parametrize("text", ["D", "Answer: D", "the answer is (D)"])
def test_letter_just_past_the_choices_is_no_answer(text):
    # three choices are A, B, C: "D" names no choice (one past the end)
    assert A.extract_answer(text, ["1", "2", "3"]) is None


# -- choices -----------------------------------------------------------------------------------------------------------
def test_letter_in_math_delimiters_is_the_letter():
    assert A.normalize_choice("$B$", ["3", "4"]) == "4"


def test_choice_text_match_ignores_dollars_and_case():
    # a choice's text maps to that choice's text (normalize_choice docstring); "$" and case are markup / spelling
    assert A.normalize_choice("5", ["$4$", "$5$"]) == "$5$"
    assert A.normalize_choice("yes", ["No", "Yes"]) == "Yes"


def test_letter_label_needs_a_space_before_its_text():
    # "(B) text" (normalize_choice docstring) is a label, a space, then the text; "A.M." is an answer of its own
    assert A.normalize_choice("A.M.", ["9", "10"]) == "A.M."
    assert A.normalize_choice("A. 9", ["9", "10"]) == "9"


# -- normalisation -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("ans", ["60 degrees", "60 Degrees", "60 DEGREE", "60°"])
def test_degree_words_are_presentation(ans):
    # degree marks are presentation-only (_unwrap docstring): "60 degrees" is the number 60
    assert A.canonical_answer(ans) == A.canonical_answer("60") == ("num", 60.0)


def test_left_right_are_spacing():
    # \left / \right only size the delimiters
    assert A.canonical_answer(r"\left(1, 2\right)") == A.canonical_answer("(1, 2)")


@pytest.mark.parametrize("ans", [r"\dfrac{1}{2}", r"\tfrac{1}{2}", r"\frac12", "1/2", "0.5"])
def test_fraction_spellings_share_the_number_key(ans):
    # \dfrac and \tfrac are display variants of \frac; \frac12 is TeX shorthand for \frac{1}{2}
    assert A.canonical_answer(ans) == ("num", 0.5)


def test_negative_fraction_keeps_its_sign():
    assert A.canonical_answer(r"-\frac{1}{2}") == ("num", -0.5)
    assert A.canonical_answer(r"-\frac{3}{4}") != A.canonical_answer(r"\frac{3}{4}")


def test_comma_space_between_digits_is_a_list_not_a_thousand():
    # _light's docstring: "1,000" is a thousand but "1, 000" is a list
    assert A.canonical_answer("1,000") == A.canonical_answer("1000") == ("num", 1000.0)
    assert A.canonical_answer("1, 000") != A.canonical_answer("1,000")


def test_thousands_groups_need_one_to_three_leading_digits():
    # "1234,567" is not a thousands spelling (a group before the first comma has at most 3 digits)
    assert A.canonical_answer("1234,567") != ("num", 1234567.0)


def test_trailing_period_and_case_do_not_split_text_answers():
    assert A.canonical_answer("Yes.") == A.canonical_answer("yes")


def test_exponent_notation_is_a_number():
    assert A.canonical_answer("1e3") == A.canonical_answer("1000") == ("num", 1000.0)


def test_seven_digit_integer_is_a_number():
    assert A.canonical_answer("1234567") == ("num", 1234567.0)


def test_division_by_zero_is_not_zero():
    assert A.canonical_answer("1/0") != A.canonical_answer("0")
    assert not A.answers_equivalent("1/0", "0")


def test_overflowing_numbers_are_not_all_infinity():
    # 1e999 and 2e999 are different numbers; float() makes both inf, which must not make them "equal"
    assert not A.answers_equivalent("1e999", "2e999")
    assert A.canonical_answer("1e999") != A.canonical_answer("2e999")


# -- numeric tolerance (_numbers_close docstring) ----------------------------------------------------------------------
def test_integers_compare_exactly():
    assert not A.answers_equivalent("10001", "10000")  # within 1e-4 relative, but both integers


def test_a_non_integer_uses_the_relative_tolerance_even_against_an_integer():
    # 10000.5 is within 1e-4 of 10000 (group_answer_keys' docstring: "10000.5 is near 10000 and 10001")
    assert A.answers_equivalent("10000.5", "10000")
    assert A.answers_equivalent("10000.5", "10001")


def test_relative_tolerance_is_1e_4():
    assert A.answers_equivalent("0.3333", "1/3")  # |diff| / (1/3) = 1e-4 * 1.0
    assert not A.answers_equivalent("1.0005", "1")  # 5e-4 relative > 1e-4
    assert not A.answers_equivalent("0.0001", "0.0002")  # small values are not equal by an absolute 1e-3


def test_canonical_key_keeps_twelve_significant_digits():
    assert A.canonical_answer("1.0000001") != A.canonical_answer("1")  # 8 significant digits apart
    assert A.canonical_answer("0.1") == A.canonical_answer("0.10000000000000001")  # same double


def test_empty_answers():
    # an empty answer is no answer (_clean, canonical_answer docstrings)
    assert A.canonical_answer("$$") is None
    assert A.canonical_answer("  ") is None
    assert not A.answers_equivalent("", "")
    assert not A.answers_equivalent("$ $", "$$")


def test_math_verify_direction_gold_then_pred():
    # math-verify itself: verify(parse("$\{1,2\}$"), parse("$(2,1)$")) is True, with the arguments swapped False;
    # answers_equivalent(pred, gold) passes gold first
    assert A.answers_equivalent("(2,1)", r"\{1,2\}")
    assert not A.answers_equivalent(r"\{1,2\}", "(2,1)")


def test_a_plain_word_is_compared_as_text_on_either_side():
    # _wordlike's docstring: plain words are compared as text only; math-verify itself reads "xy" as x*y and finds
    # verify(parse("$y x$"), parse("$xy$")) True both ways, so the word "xy" must not reach it
    assert not A.answers_equivalent("xy", "y x")
    assert not A.answers_equivalent("y x", "xy")


# -- single_tag --------------------------------------------------------------------------------------------------------
def test_single_tag_counts_and_length():
    assert A.single_tag("<q>a</q> <q>b</q>", "q", 10) == (None, "several")
    assert A.single_tag("<q>abcde</q>", "q", 5) == ("abcde", "")  # more than max_chars is too long, equal is fine
    assert A.single_tag("<q>abcdef</q>", "q", 5) == (None, "too_long")
    assert A.single_tag("<q> a \n b </q>", "q", 5) == ("a b", "")  # whitespace runs collapsed


def test_an_exponent_holding_an_exponent_is_a_tower():
    # _scripts_ok's docstring: no towers (an exponent holding a "^"), with or without a big number in it
    assert not A._scripts_ok(r"x^{y^{2}}")
    assert not A._scripts_ok(r"2^{2^{40}}")
    assert A._scripts_ok(r"x^{2}_{1}")  # one ^ and one _ on a base is fine


# -- integers beyond a double's 53-bit mantissa (_exact_integer) ---------------------------------------------------------
@pytest.mark.parametrize("a,b", [("100000000000000001", "100000000000000000"),  # one double, two integers
                                 ("9007199254740993", "9,007,199,254,740,992"),  # 2**53 + 1 vs 2**53
                                 ("-12345678901234567891", "-12345678901234567890")])
def test_integers_above_two_to_the_53_compare_exactly(a, b):
    assert float(a.replace(",", "")) == float(b.replace(",", ""))  # what a float comparison would see
    assert not A.answers_equivalent(a, b) and not A.answers_equivalent(b, a)
    assert A.canonical_answer(a) != A.canonical_answer(b)
    keys = A.group_answer_keys([a, b, a])
    assert keys[0] == keys[2] != keys[1]


@pytest.mark.parametrize("a,b", [("1e17", "100000000000000000"), ("100,000,000,000,000,000", "1e17"),
                                 ("9007199254740993.0", "9007199254740993"), ("-0", "0")])
def test_spellings_of_one_large_integer_still_meet(a, b):
    assert A.answers_equivalent(a, b) and A.canonical_answer(a) == A.canonical_answer(b)


def test_thirteen_digit_integers_get_their_own_keys():
    # the 12-significant-digit key used to merge these two into one class though they are not equivalent
    assert not A.answers_equivalent("1000000000001", "1000000000000")
    assert A.group_answer_keys(["1000000000001", "1000000000000"]) == [("num", 1000000000001), ("num", 1000000000000)]
