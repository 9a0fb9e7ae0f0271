"""Round 27b, hostile groups against the label-free rewards: a group of many distinct answers that math-verify compares
slowly (each pair 0.3-1 s) was compared pairwise, both ways: 48 of them (one CSRS group) took about 15 minutes. A
group's comparisons are now bounded; ordinary answers keep their classes."""

import time

import pytest

from mmevo.rewards.answers import answers_equivalent, group_answer_keys
from mmevo.rewards.majority import majority_vote_rewards


@pytest.fixture(scope="module", autouse=True)
def warm():
    answers_equivalent("\\frac{1}{2}", "x")  # imports math-verify and sympy outside the timed calls


def test_many_slow_distinct_answers_end_within_the_group_budget():
    group = ["\\binom{%d}{x}" % (99 - i) for i in range(16)]  # each pair 0.3-1 s: 16 * 15 pairs took minutes
    t = time.monotonic()
    keys = group_answer_keys(group)
    assert time.monotonic() - t < 25.0  # about 10 s: the group budget and one last comparison
    assert len(set(keys)) == 16  # none of them equal


def test_a_majority_vote_over_slow_answers_ends():
    responses = ["\\boxed{{\\sinh(-1 - %di)}^{9}}" % (i + 1) for i in range(12)] + ["\\boxed{5}"] * 3
    t = time.monotonic()
    rewards, info = majority_vote_rewards(responses, [0] * len(responses))
    # ~10 s here (the group budget), also beside 9 busy processes; one CI run beside the demo took 167 s, before an
    # input that kept running out of its deadline was cached after two tries (unbounded it took minutes)
    assert time.monotonic() - t < 60.0
    assert rewards.tolist() == [0.0] * 12 + [1.0] * 3 and info["pseudo_labels"][0] == "5"


ORDINARY = ["\\sqrt{8}", "2\\sqrt{2}", "x^2+2x+1", "(x+1)^2", "\\sin(2x)", "2\\sin(x)\\cos(x)", "0.5", "\\frac{1}{2}",
            "\\sec^2 x", "1+\\tan^2 x"]


def test_ordinary_answers_keep_their_classes_beside_slow_ones():
    alone = group_answer_keys(ORDINARY)
    assert len(set(alone)) == 5
    slow = ["\\binom{99}{x}", "\\theta / 3 + 7 / 99", "{\\sinh(-1 - i)}^{9}", "\\pi + -1"]
    for group in (slow + ORDINARY, ORDINARY + slow, slow[:2] + ORDINARY + slow[2:]):
        keys = group_answer_keys(group)
        ordinary = [keys[group.index(a)] for a in ORDINARY]
        assert [ordinary.index(k) for k in ordinary] == [alone.index(k) for k in alone], group
        assert not set(ordinary) & {keys[group.index(a)] for a in slow}


def test_the_reward_mixer_counts_the_comparisons_it_cut_short():
    """A step whose vote was bounded says so (``reward/comparisons_cut_short``); one of ordinary answers logs 0."""
    from mmevo.rewards.heads import RewardMixer, ScoredSample

    def samples(answers):
        return [ScoredSample("\\boxed{%s}" % a, 0, None, None) for a in answers]

    _, ordinary = RewardMixer({"majority": 1.0})(samples(ORDINARY + ["0.5"]))
    assert ordinary["reward/comparisons_cut_short"] == 0.0
    slow = ["{\\sinh(-1 - %di)}^{9}" % (i + 1) for i in range(12)] + ["5"] * 3
    _, bounded = RewardMixer({"majority": 1.0})(samples(slow))
    assert bounded["reward/comparisons_cut_short"] > 0
