"""Votes and rewards over answers that differ only in Unicode spelling (NFKC-equal forms, invisible format
characters, hyphen look-alikes), hand-computed: equal answers share one vote, superscripts never meet plain digits."""

import math

import pytest

from mmevo.rewards.answers import answers_equivalent, group_answer_keys
from mmevo.rewards.majority import majority_vote_rewards
from mmevo.rewards.sfr import softened_frequency_rewards

# (spelling, plain spelling it must vote with): NFKC maps each left side onto the right one
SAME = [
    ("①", "1"),  # circled digit
    ("Ⅳ", "IV"),  # roman numeral compatibility character
    ("﹣5", "-5"),  # small hyphen-minus
    ("\u20105", "-5"),  # hyphen
    ("\u20115", "-5"),  # non-breaking hyphen
    ("\u20125", "-5"),  # figure dash
    ("\u200b5", "5"),  # zero-width space before the number
    ("1\u200b000", "1000"),  # zero-width space inside it
    ("\ufeff7", "7"),  # BOM
    ("x₁", "x_1"),  # subscript digit is an index
    ("xⁿ", "x^n"),  # superscript letter is an exponent
    ("30º", "30"),  # ordinal indicator used as a degree mark
    ("cafe\u0301", "café"),  # decomposed accent
]


@pytest.mark.parametrize("odd, plain", SAME)
def test_compatibility_spelling_shares_the_plain_key(odd, plain):
    keys = group_answer_keys([odd, plain])
    assert keys[0] == keys[1]
    assert answers_equivalent(odd, plain) and answers_equivalent(plain, odd)


@pytest.mark.parametrize("script, plain", [("x²", "x2"), ("xⁿ", "xn"), ("x₁", "x1"), ("10⁻³", "10-3")])
def test_scripts_never_merge_with_plain_characters(script, plain):
    keys = group_answer_keys([script, plain])
    assert keys[0] != keys[1]
    assert not answers_equivalent(script, plain)


def test_majority_vote_counts_nfkc_spellings_as_one_answer():
    # group 0: "①", "1", "\u200b1" are one answer (3 votes) against "2", "2" (2 votes): the 1s win
    responses = ["\\boxed{①}", "\\boxed{1}", "\\boxed{\u200b1}", "\\boxed{2}", "\\boxed{2}"]
    rewards, metrics = majority_vote_rewards(responses, [0] * 5)
    assert rewards.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert metrics["modal_share"] == pytest.approx(3 / 5)
    assert metrics["distinct_answers_mean"] == 2


def test_sfr_counts_a_small_hyphen_minus_with_the_ascii_minus():
    # maternal ["-5", "﹣5", "3"], reinference ["‐5", "3", "3"]: -5 and 3 count 3 of 6 each; f_r 1/3 and 2/3
    maternal = group_answer_keys(["-5", "﹣5", "3"])
    reinference_keys = group_answer_keys(["-5", "\u20105", "3", "3"])[1:]  # keyed in one group, as a trainer does
    assert maternal[0] == maternal[1] == reinference_keys[0]
    r = softened_frequency_rewards(maternal, reinference_keys, gamma=0.2, beta=5.0, eps=0.0)
    base = 3 / 6
    expected_minus5 = (0.2 * math.tanh(5.0 * ((1 / 3) / base - 1.0)) + 1.0) * base
    base3 = 3 / 6
    expected_3 = (0.2 * math.tanh(5.0 * ((2 / 3) / base3 - 1.0)) + 1.0) * base3
    assert r.tolist() == pytest.approx([expected_minus5, expected_minus5, expected_3])


@pytest.mark.parametrize("letter", ["Ｂ", "（B）", "（Ｂ）", "\u200bB"])
def test_full_width_choice_letter_names_its_option(letter):
    choices = ["10", "20", "30"]
    keys = group_answer_keys([letter, "B", "20"], choices)
    assert keys[0] == keys[1] == keys[2]
    assert answers_equivalent(letter, "20", choices)
    rewards, _ = majority_vote_rewards([f"\\boxed{{{letter}}}", "\\boxed{20}", "\\boxed{10}"], [0, 0, 0],
                                       [choices] * 3)
    assert rewards.tolist() == [1.0, 1.0, 0.0]
