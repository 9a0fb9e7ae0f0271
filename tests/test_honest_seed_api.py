"""The HONEST seed's own interfaces (3.3 replay, 4.3 SMC, 2.3 hindsight parsing) on mmevo's implementation, against
values computed by hand from the seed's formulas."""

import collections
import math
import random

import pytest

from mmevo.honest.curriculum import DifficultyController
from mmevo.honest.seed_api import CalibrationPrioritizedReplay, SelfMutatingCurriculum, parse_hindsight
from mmevo.honest.tasks import evaluate_expression, format_answer


def test_replay_add_sample_snapshot_as_the_seed_shows_them():
    buf = CalibrationPrioritizedReplay(capacity=3, seed=0)
    buf.add("2 + 2 = ?", 4, "arithmetic", 1, 0.9, True)  # |c - y| = 0.1
    buf.add("7 mod 3 = ?", 1, "modular", 2, 0.9, False)  # 0.9
    buf.add("True AND False?", False, "logic", 1, 0.5, True)  # 0.5
    assert len(buf) == 3
    # the seed's priorities (|c - y| + eps)^alpha, normalised: the draw frequencies follow them
    prio = [(e + 1e-3) ** 0.6 for e in (0.1, 0.9, 0.5)]
    draws = buf.sample(20000)
    freq = collections.Counter(d["prompt"] for d in draws)
    for prompt, p in zip(["2 + 2 = ?", "7 mod 3 = ?", "True AND False?"], prio):
        assert freq[prompt] / 20000 == pytest.approx(p / sum(prio), abs=0.015)
    d = next(d for d in draws if d["prompt"] == "7 mod 3 = ?")
    assert d == {"prompt": "7 mod 3 = ?", "gt": "1", "domain": "modular", "difficulty": 2, "conf": 0.9,
                 "correct": False, "priority": pytest.approx((0.9 + 1e-3) ** 0.6)}
    # alpha = 0: uniform; the same prompt written again is updated, a fourth one takes the oldest slot
    uniform = collections.Counter(d["prompt"] for d in buf.sample(9000, alpha=0.0))
    assert all(abs(v / 9000 - 1 / 3) < 0.02 for v in uniform.values())
    buf.add("2 + 2 = ?", 4, "arithmetic", 1, 0.2, True)
    assert len(buf) == 3 and buf.snapshot()["updated"] == 1
    buf.add("9 - 3 = ?", 6, "arithmetic", 1, 0.6, True)
    snap = buf.snapshot()
    assert (snap["size"], snap["overwritten"]) == (3, 1)
    assert snap["priority_entropy"] <= math.log(3)
    with pytest.raises(ValueError, match=r"confidence must be in \[0, 1\]"):
        buf.add("x", 1, "arithmetic", 1, 1.5, True)


def test_smc_promotes_past_5_after_min_episodes_above_the_threshold_and_samples_mutations():
    ctl = DifficultyController(["arithmetic", "logic"], start=5, window=4, min_episodes=4, cooldown=0)
    smc = SelfMutatingCurriculum(ctl, max_hard_difficulty=7, promote_threshold=0.75, min_episodes_at_max=6, seed=1)
    assert (ctl.cap, ctl.min_episodes, ctl.window) == (7, 6, 6)  # the seed's parameters rule
    for i in range(5):  # 5 of 5 right: not yet min_episodes_at_max episodes
        smc.record_outcome("arithmetic", 5, True)
        assert smc.maybe_promote("arithmetic") is None
    smc.record_outcome("arithmetic", 5, True)  # the 6th: 6/6 > 0.75, the ceiling rises (once)
    assert smc.ceiling("arithmetic") == 6 and smc.maybe_promote("arithmetic") is None
    assert smc.ceiling("logic") == 5
    for y in (True, True, False, True, True, False):  # 4/6 at the new ceiling: stays
        smc.record_outcome("arithmetic", 6, y)
    assert smc.ceiling("arithmetic") == 6
    # 0.75 exactly does not promote (strictly above, the seed's "acc > tau"); 4 of 4 does
    four = SelfMutatingCurriculum(DifficultyController(["logic"], start=5, window=4, min_episodes=4, cooldown=0),
                                  min_episodes_at_max=4)
    for y in (True, True, True, False, True, True, True):  # windows of 4: 0.75 each time
        four.record_outcome("logic", 5, y)
        assert four.ceiling("logic") == 5
    four.record_outcome("logic", 5, True)
    assert four.ceiling("logic") == 6
    rng = random.Random(3)
    tasks = [smc.sample("arithmetic", rng) for _ in range(30)]
    assert {t.domain for t in tasks} == {"arithmetic"} and max(t.difficulty for t in tasks) == 6
    for t in tasks:  # mutated or not, the gold answer is the verifier's value of the task's expression
        assert t.answer == format_answer(evaluate_expression(t.expression))
    # demotion below 0.20 over min_episodes_at_max episodes, back to the start ceiling, not below it
    for _ in range(6):
        smc.record_outcome("arithmetic", 6, False)
    assert smc.ceiling("arithmetic") == 5 and smc.snapshot()["arithmetic"]["max_unlocked_difficulty"] == 5
    with pytest.raises(ValueError, match="unknown curriculum domain"):
        smc.sample("chemistry")
    with pytest.raises(ValueError, match="demote < promote"):
        SelfMutatingCurriculum(DifficultyController(["logic"]), promote_threshold=0.1)


@pytest.mark.parametrize("text,r", [
    ("<reasoning>2+2</reasoning>\n<answer>4</answer>\n<confidence>0.6</confidence>\n<hindsight>0.9</hindsight>", 0.9),
    ("<reasoning>x</reasoning><answer>4</answer><confidence>0.6</confidence>", None),  # no slot: skipped
    ("<answer>4</answer><confidence>0.6</confidence><hindsight>1.5</hindsight>", None),  # out of [0, 1]
    ("<answer>4</answer><confidence>0.6</confidence><hindsight>high</hindsight>", None),
    ("", None),
])
def test_parse_hindsight(text, r):
    assert parse_hindsight(text) == r


def test_controller_retune_checks_first_keeps_outcomes_and_refuses_a_cap_under_a_reached_ceiling():
    ctl = DifficultyController(["logic"], start=5, window=4, min_episodes=4, cooldown=0)
    for y in (True, False, True):
        ctl.record("logic", 5, y)
    with pytest.raises(ValueError, match="demote < promote"):
        ctl.retune(8, 0.1, 0.2, 6)
    assert (ctl.cap, ctl.promote_at, ctl.min_episodes, ctl.window) == (8, 0.75, 4, 4)  # untouched by a refused call
    ctl.retune(7, 0.6, 0.1, 6)
    assert (ctl.cap, ctl.promote_at, ctl.demote_below, ctl.min_episodes, ctl.window) == (7, 0.6, 0.1, 6, 6)
    assert list(ctl.outcomes[("logic", 5)]) == [1, 0, 1] and ctl.outcomes[("logic", 5)].maxlen == 6
    assert list(ctl.recent["logic"]) == [1, 0, 1] and ctl.recent["logic"].maxlen == 6
    for y in (True, True, True):  # 5/6 > 0.6 over 6 episodes: promoted under the new rules
        ctl.record("logic", 5, y)
    assert ctl.ceiling("logic") == 6 and ctl.maybe_change("logic") is None
    with pytest.raises(ValueError, match=r"below the ceilings already reached: \{'logic': 6\}"):
        ctl.retune(5, 0.6, 0.1, 6)
    with pytest.raises(ValueError, match="unknown curriculum domain"):
        ctl.maybe_change("chemistry")
