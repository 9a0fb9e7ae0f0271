"""HONEST review 21: hostile inputs to the replay write-back, the replay buffer's sampler and the difficulty
controller are named errors, not silently other values (hand-built vectors, the real parts)."""

from __future__ import annotations

import math

import pytest
import torch

from mmevo.data.schema import Example
from mmevo.honest.curriculum import DifficultyController
from mmevo.honest.replay import ReplayBuffer, group_outcomes


def _aux(correct, confidence):
    return {"correct": correct, "confidence": confidence}


# -- group_outcomes: the write-back's aggregation ------------------------------------------------------------------
def test_group_outcomes_by_hand_with_abstains_ties_and_ungraded_groups():
    # group 0: right at 0.9, wrong at 0.3, abstain (wrong, no confidence) -> 1 of 3 right; mean c 0.6 over the two
    # that stated one, confident majority 1 of 2: a tie, no majority -> False
    # group 1: right at 1.0, right at 0.8 -> True, c 0.9; group 2: no gold -> correct None, nothing to write
    gids = torch.tensor([0, 0, 0, 1, 1, 2])
    aux = [_aux(True, 0.9), _aux(False, 0.3), _aux(False, None), _aux(True, 1.0), _aux(1, 0.8), _aux(None, 0.5)]
    g0, g1, g2 = group_outcomes(gids, aux)
    assert (g0.n, g0.n_graded, g0.n_correct, g0.correct, g0.confident_correct) == (3, 3, 1, False, False)
    assert g0.confidence == pytest.approx(0.6)
    assert (g1.correct, g1.confident_correct) == (True, True) and g1.confidence == pytest.approx(0.9)
    assert (g2.correct, g2.confident_correct, g2.confidence) == (None, None, 0.5)


@pytest.mark.parametrize("correct", ["False", "True", 0.5, math.nan, 2])
def test_group_outcomes_names_a_correctness_that_is_no_outcome(correct):
    # bool("False") and bool(0.5) counted as a hit: the replay stored y = 1 for a wrong group
    aux = [_aux(True, 0.2), _aux(correct, 0.2)]
    with pytest.raises(ValueError, match=r"sample 1: aux 'correct'"):
        group_outcomes(torch.tensor([0, 0]), aux)


@pytest.mark.parametrize("confidence", [math.nan, 1.5, -0.1, math.inf, True, "0.5"])
def test_group_outcomes_names_a_confidence_outside_the_unit_interval(confidence):
    # NaN made the group's mean NaN, True was averaged as 1.0
    aux = [_aux(True, 0.2), _aux(False, confidence)]
    with pytest.raises(ValueError, match=r"sample 1: aux 'confidence'"):
        group_outcomes(torch.tensor([0, 0]), aux)


# -- ReplayBuffer.sample ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1.5, True, "2", None, -1])
def test_replay_sample_names_a_size_that_is_no_count(n):
    buffer = ReplayBuffer(4)
    buffer.add(Example("a", "q", "1", [], []), 0.5, True)
    with pytest.raises(ValueError, match="replay sample size n must be an integer >= 0"):
        buffer.sample(n)


def test_replay_sample_of_zero_is_empty_and_of_an_integer_is_that_many():
    buffer = ReplayBuffer(4)
    buffer.add(Example("a", "q", "1", [], []), 0.5, True)
    assert buffer.sample(0) == [] and len(buffer.sample(3)) == 3


# -- DifficultyController -----------------------------------------------------------------------------------------
def test_controller_refuses_a_domain_string_read_as_its_letters():
    with pytest.raises(ValueError, match="must be a list of domain names"):
        DifficultyController("arithmetic")
    with pytest.raises(ValueError, match="must be a list of domain names"):
        DifficultyController(["arithmetic", 3])
    assert DifficultyController(("arithmetic", "logic")).domains == ["arithmetic", "logic"]


@pytest.mark.parametrize("kwargs, name", [({"window": 20.5}, "window"), ({"min_episodes": 2.0}, "min_episodes"),
                                          ({"cooldown": True}, "cooldown"), ({"start": 5.0}, "start"),
                                          ({"cap": "8"}, "cap")])
def test_controller_names_a_count_that_is_no_integer(kwargs, name):
    # int() cut a window of 20.5 to 20 and read cooldown=True as 1
    with pytest.raises(ValueError, match=rf"curriculum .*{name}.* must be integers"):
        DifficultyController(["arithmetic"], **kwargs)


@pytest.mark.parametrize("kwargs", [{"promote": True}, {"demote": False}, {"promote": "0.75"}])
def test_controller_names_a_threshold_that_is_no_number(kwargs):
    with pytest.raises(ValueError, match="curriculum thresholds must be numbers"):
        DifficultyController(["arithmetic"], **kwargs)


def test_controller_with_numpy_integers_promotes_as_the_seed_says():
    np = pytest.importorskip("numpy")
    c = DifficultyController(["arithmetic"], window=np.int64(20), min_episodes=np.int64(20))
    outcomes = [True] * 16 + [False] * 4  # 16 / 20 = 0.8 > 0.75 at the 20th episode
    changes = [c.record("arithmetic", 5, y) for y in outcomes]
    assert changes[:-1] == [None] * 19 and changes[-1] == "promote" and c.ceiling("arithmetic") == 6


# -- the sources' and the slot draw's shares and counts ------------------------------------------------------------
class _Fresh:
    def take(self, k):
        return [Example(f"f{i}", f"fresh {i}", "1", [], []) for i in range(k)]


@pytest.mark.parametrize("kwargs, what", [({"share": True}, "replay share"), ({"share": "0.3"}, "replay share"),
                                          ({"warmup_steps": 2.5}, "replay warm-up"),
                                          ({"warmup_steps": True}, "replay warm-up")])
def test_replay_mix_names_a_share_or_warmup_of_the_wrong_kind(kwargs, what):
    from mmevo.honest.replay import ReplayMixSource

    with pytest.raises(ValueError, match=what):
        ReplayMixSource(_Fresh(), ReplayBuffer(2), **kwargs)


@pytest.mark.parametrize("kwargs, what", [({"ceiling_share": True}, "ceiling_share"),
                                          ({"max_retries": 1.5}, "max_retries"),
                                          ({"min_difficulty": 1.5}, "min_difficulty")])
def test_curriculum_source_names_a_share_or_count_of_the_wrong_kind(kwargs, what):
    from mmevo.honest.curriculum import CurriculumSource

    with pytest.raises(ValueError, match=what):
        CurriculumSource(DifficultyController(["logic"]), **kwargs)


@pytest.mark.parametrize("prob", [math.nan, True, "0.3", 1.5])
def test_hindsight_slot_draw_names_a_probability_that_is_no_number_in_the_unit_interval(prob):
    # NaN offered the slot on no step (random() < NaN is False), silently
    from mmevo.honest.strategy import HindsightSlotDraw, hindsight_slot_offered
    from mmevo.rollout.strategy import PlainGroups

    with pytest.raises(ValueError, match="hindsight slot probability must be a number in"):
        hindsight_slot_offered(prob, 0, 1)
    with pytest.raises(ValueError, match="hindsight slot probability must be a number in"):
        HindsightSlotDraw(PlainGroups(), prob, 0)


def test_hindsight_slot_draw_keeps_its_shares_at_the_edges():
    from mmevo.honest.strategy import hindsight_slot_offered

    assert all(hindsight_slot_offered(1, 0, s) for s in range(50))
    assert not any(hindsight_slot_offered(0, 0, s) for s in range(50))
    share = sum(hindsight_slot_offered(0.3, 0, s) for s in range(2000)) / 2000
    assert abs(share - 0.3) < 0.04  # 2000 Bernoulli(0.3) draws: sd 0.01
