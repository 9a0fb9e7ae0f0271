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
