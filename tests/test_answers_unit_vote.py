"""The vote key agrees with `answers_equivalent` on named length units: "5 m" and "5 cm" are two answers, a bare "5"
votes with the class it joins first (the most frequent), as equivalence lets it join either."""
import math

import pytest

from mmevo.rewards.answers import answers_equivalent, canonical_answer, group_answer_keys
from mmevo.rewards.heads import SFRHead, ScoredSample
from mmevo.rewards.majority import majority_vote_rewards

VECTOR = ["5 m", "5 cm", "5 cm", "5"]


def _classes(keys):
    return sorted(sorted(i for i, k in enumerate(keys) if k == key) for key in set(keys))


def test_keys_split_two_named_units_and_keep_the_bare_number_with_the_mode():
    assert not answers_equivalent("5 m", "5 cm") and answers_equivalent("5", "5 cm")
    assert _classes(group_answer_keys(VECTOR)) == [[0], [1, 2, 3]]
    assert canonical_answer("5 cm") == ("num", 5.0)  # the cheap key is unchanged


@pytest.mark.parametrize("answers", [VECTOR, VECTOR[::-1], ["5", "5 cm", "5 m", "5 cm"]])
def test_classes_do_not_depend_on_order(answers):
    keys = group_answer_keys(answers)
    classes = {frozenset(a for a, k in zip(answers, keys) if k == key) for key in set(keys)}
    assert classes == {frozenset({"5 m"}), frozenset({"5 cm", "5"})}


def test_one_unit_or_spellings_of_it_keep_the_plain_key():
    assert group_answer_keys(["5 cm", "5", "5 centimeters"]) == [("num", 5)] * 3
    assert group_answer_keys(["5 m"]) == [("num", 5)]


def test_options_named_by_letter_keep_their_units_apart():
    keys = group_answer_keys(["B", "A", "A"], ["5 m", "5 cm"])
    assert keys[1] == keys[2] != keys[0]


def test_majority_vote_rewards_the_unit_class():
    rewards, metrics = majority_vote_rewards([f"\\boxed{{{a}}}" for a in VECTOR], [0] * 4)
    assert rewards.tolist() == [0.0, 1.0, 1.0, 1.0]
    assert metrics["modal_share"] == 0.75 and metrics["distinct_answers_mean"] == 2.0


def test_sfr_counts_the_units_apart():
    rein = ["5 cm", "5 m"]
    samples = [ScoredSample(f"\\boxed{{{a}}}", 0, None, None) for a in VECTOR]
    samples += [ScoredSample(f"\\boxed{{{a}}}", 0, None, None, role="reinference", parent=0) for a in rein]
    rewards, _ = SFRHead(gamma=0.2, beta=5.0).score(samples)

    def eq8(c_mat, c_re, n=4, n_re=2):  # Eq. 7-8 by hand
        base = (c_mat + c_re) / (n + n_re)
        return (0.2 * math.tanh(5.0 * ((c_re / n_re) / (base + 1e-6) - 1)) + 1) * base

    metre, centimetre = eq8(1, 1), eq8(3, 1)
    assert rewards[:4].tolist() == pytest.approx([metre, centimetre, centimetre, centimetre], abs=1e-6)


@pytest.mark.parametrize("answers", [["5 m", "5 cm", "5"], ["5", "5 m", "5 cm"], ["5 cm", "5", "5 m"]])
def test_a_bare_number_heading_a_tie_takes_one_unit_only(answers):
    keys = group_answer_keys(answers)
    assert keys[answers.index("5 m")] != keys[answers.index("5 cm")]
    assert len(set(keys)) == 2
