"""Review 21 of answer matching (accuracy with a gold, the label-free vote's and SFR's answer classes).

1. Scientific notation: a plain number "1e4" / "2.5e-3" was a number to the cheap steps (1e4 = 10000) but reached
   math-verify as written, which reads a lower-case "e" as Euler's number ("1e4" was 4e, "2.5e-3" was 2.5e - 3): so
   "1e4" equalled 10000 but not "10^4" nor "1\\times 10^4", while "1E4" (math-verify's exponent) equalled both. A
   number in scientific notation now reaches math-verify spelt "m\\times10^{k}". "3e", "e^2" and "2e^{3}" have no
   exponent digits and stay Euler's e.
2. One-sided marks in a list: "2^{+}, 3^{+}" (one-sided limit points, or a set of charges) is not the numbers "2, 3"
   (deliberate now; it was False only because math-verify reads no "2^{+}"), both ways, and so no spelling or order of
   it matched another: "2^+, 3^+", "3^{+}, 2^{+}", "2+, 3+" were three answers. Such a list now matches the same counts
   marked alike, in any order and spelling. A lone "2^{+}" stays the charge +2, which is 2 (review 20).
"""

from __future__ import annotations

import itertools

import pytest

from mmevo.rewards.answers import answers_equivalent, group_answer_keys
from mmevo.rewards.majority import majority_vote_rewards

TEN_THOUSAND = ["10000", "10^4", "1e4", "1\\times 10^4", "10,000", "1E4", "1e+4", "10^{4}"]


@pytest.mark.parametrize("a, b", list(itertools.combinations(TEN_THOUSAND, 2)))
def test_spellings_of_ten_thousand_are_one_answer_both_ways(a, b):
    assert answers_equivalent(a, b) and answers_equivalent(b, a)


@pytest.mark.parametrize("a, b, same", [
    ("2.5e-3", "2.5\\times 10^{-3}", True), ("2.5e-3", "0.0025", True), ("2.5E-3", "\\frac{1}{400}", True),
    ("1e-3", "10^{-3}", True), ("1E6", "10^6", True), ("1e6", "1,000,000", True), ("1.5e3", "1.5 \\times 10^3", True),
    ("1e400", "10^{400}", True),  # past a double's range: compared by math-verify, not as floats
    ("1e4, 2e4", "10^4, 2\\times 10^4", True),  # inside a list too
    ("x = 1e4", "x = 10^4", True),
    ("1e4", "4e", False), ("1e4", "4\\cdot e", False),  # not Euler's e
    ("1e4", "10^5", False), ("2.5e-3", "2.5\\times 10^{3}", False),
    ("3e", "3", False), ("3e", "3\\cdot e", True),  # no exponent digits: 3 times e
    ("e^2", "e^{2}", True), ("e^2", "2", False), ("2e^{3}", "2e^3", True), ("2e^{3}", "2000", False),
])
def test_scientific_notation_both_ways(a, b, same):
    assert answers_equivalent(a, b) is same
    assert answers_equivalent(b, a) is same


def test_ten_thousand_is_one_class_in_any_order():
    for order in itertools.permutations(["10000", "10^4", "1e4", "1\\times 10^4", "10,000"]):
        keys = group_answer_keys(list(order) + ["7"])
        assert len(set(keys[:5])) == 1 and keys[5] != keys[0], order


def test_majority_vote_counts_scientific_spelling_with_its_value():
    # 10^4 twice and 1e4 twice out-vote 7 three times; 1e4 was its own class and 7 won with 3 votes
    responses = [f"\\boxed{{{a}}}" for a in ["10^4", "1e4", "7", "10^4", "1e4", "7", "7"]]
    rewards, metrics = majority_vote_rewards(responses, [0] * 7)
    assert rewards.tolist() == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("a, b, same", [
    ("2^{+}, 3^{+}", "2, 3", False), ("2^{+}, 3^{+}", "+2, +3", False), ("\\{2^{+}, 3^{+}\\}", "\\{2, 3\\}", False),
    ("2^{+}, 3", "2, 3", False), ("2^{-}, 3^{-}", "-2, -3", False), ("2^{+}, 3^{+}", "2^{-}, 3^{+}", False),
    ("2^{+}, 3^{+}", "2^{+}", False), ("2^{+}, 3^{+}", "2^{+}, 3^{+}, 3^{+}", False),
    ("2^{+}, 3^{+}", "2^+, 3^+", True), ("2^{+}, 3^{+}", "3^{+}, 2^{+}", True), ("2^{+}, 3^{+}", "2+, 3+", True),
    ("\\{2^{+}, 3^{+}\\}", "\\{3^+, 2^+\\}", True), ("2^{-}, 3^{+}", "3+, 2^-", True),
    ("2^{+}", "2", True),  # a lone superscript sign is a charge (review 20)
])
def test_lists_with_one_sided_marks_both_ways(a, b, same):
    assert answers_equivalent(a, b) is same
    assert answers_equivalent(b, a) is same


def test_one_sided_lists_are_one_class_apart_from_the_numbers_in_any_order():
    answers = ["2^{+}, 3^{+}", "3^+, 2^+", "2, 3", "2+, 3+"]
    for order in itertools.permutations(answers):
        keys = dict(zip(order, group_answer_keys(list(order))))
        assert keys["2^{+}, 3^{+}"] == keys["3^+, 2^+"] == keys["2+, 3+"] != keys["2, 3"], order
