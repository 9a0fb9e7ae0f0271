"""Review 22 of answer matching for training rewards and votes: intervals against inequalities, degrees against
radians, differing units."""

import pytest

from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import _cheap_as_set, _mv_parse, answers_equivalent, group_answer_keys


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


# inequalities joined by "or" are the union of their sets (math-verify kept them a list of relations, equal to no
# interval); not a comma list (maybe a system), not equations ("x = 1 or x = 2" lists values), not two variables
@pytest.mark.parametrize("pred, gold", [
    ("x<1 \\text{ or } x>2", "(-\\infty,1)\\cup(2,\\infty)"),
    ("x<1 \\lor x>2", "(-\\infty,1)\\cup(2,\\infty)"),
    ("x < 1 or x \\ge 2", "(-\\infty,1)\\cup[2,\\infty)"),
    ("x<-1 or 1<x<3", "(-\\infty,-1)\\cup(1,3)"),
])
def test_inequalities_joined_by_or_match_the_union(pred, gold):
    assert answers_equivalent(pred, gold)
    assert answers_equivalent(gold, pred)


@pytest.mark.parametrize("pred, gold", [
    ("x<1 or x>2", "(-\\infty,1]\\cup(2,\\infty)"),
    ("x<1, x>2", "(-\\infty,1)\\cup(2,\\infty)"),
    ("x<1 or y>2", "(-\\infty,1)\\cup(2,\\infty)"),
    ("x<1 or x>2", "x<2 or x>1"),
])
def test_inequalities_joined_by_or_naming_another_set_stay_apart(pred, gold):
    assert not answers_equivalent(pred, gold)
    assert answers_equivalent("x=1 or x=2", "\\{1,2\\}")  # a list of values, as before


# sympy takes an inequality's set by solving it: a degree-8 polynomial or |x^8 - ...| took 1-2 s per comparison, so
# only low degrees are read as sets
@pytest.mark.parametrize("text, cheap", [
    ("x^2 \\le 4", True), ("x^3 - x > 0", True), ("|x - 1| \\le 2", True), ("1 < x < 2", True),
    ("x^8 - 3x^5 + 2x - 7 < 0", False), ("|x^8 - 3x^5 + 2| < 1", False), ("\\sin(x) > 0", False),
    ("x + y > 1", False),
])
def test_only_low_degree_inequalities_are_read_as_sets(text, cheap):
    (parsed,) = [x for x in _mv_parse(text) if not isinstance(x, str)]
    assert _cheap_as_set(parsed) is cheap


def test_accuracy_reward_of_an_inequality_against_a_gold_interval():
    rewards = accuracy_rewards(["so \\boxed{2 \\le x < 5}", "\\boxed{2 < x < 5}"], ["[2, 5)", "[2, 5)"])
    assert rewards.tolist() == [1.0, 0.0]


# a gold angle with a degree mark takes the same angle as a multiple of pi (30° is pi/6); a bare number against a
# multiple of pi stays apart (without the mark the unit is unknown, and a false match rewards a wrong answer), and so
# does a predicted degree against a gold in radians (review 20's "45°" against pi/4): the gold decides the unit
@pytest.mark.parametrize("pred, gold", [
    ("\\frac{\\pi}{6}", "30^\\circ"),
    ("\\pi/6", "30°"),
    ("\\frac{\\pi}{6}", "30 degrees"),
    ("2\\pi", "360^{\\circ}"),
    ("-\\frac{\\pi}{2}", "-90^\\circ"),
    ("\\frac{5\\pi}{6}", "150°"),
    ("\\frac{\\pi}{4} \\text{ rad}", "45^\\circ"),
])
def test_gold_degrees_match_the_same_angle_in_radians(pred, gold):
    assert answers_equivalent(pred, gold)
    assert not answers_equivalent(gold, pred)  # a predicted degree against a gold in radians


@pytest.mark.parametrize("pred, gold", [
    ("30", "\\frac{\\pi}{6}"),
    ("\\frac{\\pi}{6}", "30"),
    ("\\pi/6", "60^\\circ"),
    ("\\pi^2", "30^\\circ"),
    ("\\pi x", "30^\\circ"),
    ("\\frac{\\pi}{6}^\\circ", "30^\\circ"),
])
def test_degrees_and_radians_stay_apart_without_a_mark_or_at_another_angle(pred, gold):
    assert not answers_equivalent(pred, gold)


def test_vote_counts_an_angle_in_degrees_and_in_radians_as_one_answer():
    keys = group_answer_keys(["30^\\circ", "\\frac{\\pi}{6}", "\\frac{\\pi}{3}"])
    assert keys[0] == keys[1] != keys[2]


def test_an_angle_in_radians_names_the_option_in_degrees():
    options = ["30°", "45°", "60°", "90°"]
    assert answers_equivalent("\\frac{\\pi}{3}", "C", options)
    assert not answers_equivalent("\\frac{\\pi}{3}", "A", options)
    assert accuracy_rewards(["\\boxed{\\frac{\\pi}{6}}"], ["30^\\circ"]).tolist() == [1.0]


# two answers naming different length units are different answers, and a vote keeps them apart; a bare number meets
# either; no conversion ("5 m" is not "500 cm"); a squared unit is the same unit (an area written "cm")
@pytest.mark.parametrize("pred, gold, same", [
    ("5 m", "5 cm", False),
    ("5\\text{ mm}", "5 \\mathrm{cm}", False),
    ("5 m", "500 cm", False),
    ("5 cm", "5", True),
    ("5 \\mathrm{cm}^2", "5 cm", True),
    ("5 meters", "5 m", True),
    ("5 inches", "5 in", True),
    ("5 feet", "5 ft", True),
    ("5 units", "5 cm", True),
])
def test_answers_naming_different_units_differ(pred, gold, same):
    assert answers_equivalent(pred, gold) is same
    assert answers_equivalent(gold, pred) is same


# an inequality with radicals is solved with them cleared (x^{1/3} + x^{1/5} + x^{1/7} at degree 1/3 * lcm(3, 5, 7) =
# 35), as _solve_ok counts it: read as cheap by its bare degree (1/3), the comparison against an interval took ~8 s
@pytest.mark.parametrize("relation", [r"x^{1/3}+x^{1/5}+x^{1/7} > 1", r"x^{1/3} > x^{1/5}", r"x^{1/5} + x > 2"])
def test_an_inequality_with_radicals_is_not_taken_as_a_cheap_set(relation):
    (rel,) = [x for x in _mv_parse(relation) if hasattr(x, "lhs")]
    assert not _cheap_as_set(rel)


def test_a_square_root_inequality_stays_cheap():
    # x^{1/2} > 1 is degree 1/2 * 2 = 1 once the radical is cleared
    (rel,) = [x for x in _mv_parse(r"\sqrt{x} > 1") if hasattr(x, "lhs")]
    assert _cheap_as_set(rel)
