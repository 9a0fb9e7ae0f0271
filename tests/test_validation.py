"""The shared "a real number / an integer, not a bool" predicates, and call sites that now use them refusing a bool
with their own messages."""

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
import torch

from mmevo.honest.calibration import pillar_works
from mmevo.rewards.mmzero import coder_reward, diversity_adjustment, easy_hard_penalty
from mmevo.validation import is_integer_number, is_real_number


def test_real_number_predicate():
    for x in (0, 1, -3, 0.5, math.nan, math.inf, np.float32(0.25), np.float64(1.0), np.int64(2), Fraction(1, 3)):
        assert is_real_number(x), x
    for x in (True, False, np.True_, "1", None, Decimal("1"), 1 + 0j, torch.tensor(1.0), [1.0]):
        assert not is_real_number(x), x


def test_integer_number_predicate():
    for x in (0, 7, -1, np.int32(3), np.int64(4)):
        assert is_integer_number(x), x
    for x in (True, False, np.True_, 2.0, np.float64(2.0), math.nan, "2", None, Fraction(4, 2), torch.tensor(2)):
        assert not is_integer_number(x), x


@pytest.mark.parametrize("call, message", [
    (lambda: coder_reward(True, True, 0.5, 0.0),
     r"easy must be a number in \[0, 1\], got True"),
    (lambda: easy_hard_penalty([0.5], threshold=True),
     r"threshold must be a finite number, got True"),
    (lambda: diversity_adjustment(torch.zeros(1, 3), 1, strength=True), r"strength must be finite and >= 0, got True"),
    (lambda: pillar_works(0.3, 0.2, bar=True),
     r"pillar_works: bar must be a finite number, got True"),
    (lambda: pillar_works(False, 0.2),
     r"pillar_works: ece_base must be an ECE in \[0, 1\], got False"),
])
def test_call_sites_refuse_a_bool_with_their_own_message(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_call_sites_accept_numpy_numbers():
    assert coder_reward(np.bool_(True), np.float32(0.5), np.float64(0.25), -0.3) == pytest.approx(1.0 + 0.5 + 0.25 - 0.3)
    assert pillar_works(np.float64(0.30), np.float32(0.25)) is True


# -- head arguments from reward.head_args: a YAML yes / on is True, which float() and the range checks read as 1 ------
@pytest.mark.parametrize("head, args, message", [
    ("honest_format", {"malformed_penalty": True}, r"honest_format: malformed_penalty must be a finite number, got True"),
    ("honest_brier", {"abstain_reward": float("nan")}, r"honest_brier: abstain_reward must be a finite number, got nan"),
    ("honest_brier", {"malformed_penalty": "-1"}, r"honest_brier: malformed_penalty must be a finite number, got '-1'"),
    ("honest_hindsight", {"k": True}, r"honest_hindsight: k must be a finite number, got True"),
    ("honest_hindsight", {"alpha": True}, r"honest_hindsight: alpha must be a finite number, got True"),
    ("prism_coverage", {"k": 4, "centroids": "", "gamma": True}, r"prism_coverage: gamma must be a number, got True"),
    ("prism_coverage", {"k": 4, "centroids": "", "lam": True}, r"prism_coverage: lam must be a number, got True"),
    ("prism_coverage", {"k": 4, "centroids": "", "init_count": True},
     r"prism_coverage: init_count must be a number, got True"),
    ("mmzero_proposer", {"cluster_threshold": float("nan")}, r"cluster_threshold must be a finite number, got nan"),
    ("mmzero_proposer", {"cluster_threshold": True}, r"cluster_threshold must be a finite number, got True"),
])
def test_a_bool_head_argument_is_refused_naming_head_and_argument(head, args, message):
    """``reward.head_args={honest_format: {malformed_penalty: yes}}`` built a head that paid a malformed response
    +1.0; ``{prism_coverage: {gamma: yes}}`` one whose counts never moved (gamma 1). Both now fail when the trainer
    builds its reward heads, naming the head and the argument."""
    from mmevo.config import load_config
    from mmevo.grpo.trainer import head_arguments
    from mmevo.rewards.heads import RewardMixer

    cfg = load_config(None, [f"reward.heads={{{head}: 1.0}}"])
    cfg.reward.head_args = {head: args}
    with pytest.raises(ValueError, match=message):
        RewardMixer(cfg.reward.heads, head_arguments(cfg))


def test_honest_heads_keep_numeric_arguments():
    from mmevo.rewards.heads import ScoredSample
    from mmevo.rewards.honest import HonestFormatHead, HonestHindsightHead

    rewards, _ = HonestFormatHead(malformed_penalty=np.float32(-0.5)).score([ScoredSample("garbage", 0, None, [])])
    assert rewards.tolist() == [-0.5]
    assert HonestHindsightHead(k=0, alpha=2).casr["alpha"] == 2.0


def test_ema_counts_refuses_a_bool_gamma():
    from mmevo.rewards.prism import ema_counts

    with pytest.raises(ValueError, match=r"gamma must be in \[0, 1\], got True"):
        ema_counts(torch.ones(3, dtype=torch.float64), [0], gamma=True)
    assert ema_counts(torch.ones(3, dtype=torch.float64), [0], gamma=np.float64(0.5)).tolist() == [1.0, 0.5, 0.5]
