"""Review 22 of answer matching for training rewards and votes: intervals against inequalities, degrees against
radians, differing units."""

import pytest

from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import answers_equivalent, group_answer_keys


# a gold interval (or union) accepts the inequality naming the same set: math-verify did this only for a gold
# inequality, so "2 \le x < 5" scored 0 against the gold "[2, 5)"
@pytest.mark.parametrize("pred, gold", [
    ("2 \\le x < 5", "[2, 5)"),
    ("x > 3", "(3, \\infty)"),
    ("x \\le 2", "(-\\infty, 2]"),
    ("3 < x", "(3, \\infty)"),
    ("|x-1| \\le 2", "[-1, 3]"),
    ("x \\neq 1", "(-\\infty, 1) \\cup (1, \\infty)"),
])
def test_inequality_matches_gold_interval(pred, gold):
    assert answers_equivalent(pred, gold)
    assert answers_equivalent(gold, pred)  # the other way math-verify already did


# never two different sets; and a finite open "(1, 2)" may be a point, so an inequality does not match it as a gold
@pytest.mark.parametrize("pred, gold", [
    ("x \\ge 3", "(3, \\infty)"),
    ("x > 3", "[3, \\infty)"),
    ("2 \\le x < 5", "[2, 5]"),
    ("2 < x < 5", "[2, 5)"),
    ("x^2 < 4", "[-2, 2]"),
    ("1 < x < 2", "(1, 2)"),
    ("y \\ge 2", "[2, 5)"),
])
def test_inequality_naming_another_set_stays_apart(pred, gold):
    assert not answers_equivalent(pred, gold)


def test_accuracy_reward_of_an_inequality_against_a_gold_interval():
    rewards = accuracy_rewards(["so \\boxed{2 \\le x < 5}", "\\boxed{2 < x < 5}"], ["[2, 5)", "[2, 5)"])
    assert rewards.tolist() == [1.0, 0.0]
