"""HONEST checked against the seed's equations by hand (review): the CASR anti-copy term, the SMC promotion
inequality and the section-8 bar, with each expected value derived from the seed's text in a comment."""

from types import SimpleNamespace

import pytest
import torch

from mmevo.honest.curriculum import DEMOTE, PROMOTE, DifficultyController
from mmevo.honest.protocol import format_response
from mmevo.rewards.honest import HonestHindsightHead, brier_reward, casr_reward, hindsight_reward, replay_priorities


def t(xs, dtype=torch.float64):
    return torch.tensor(xs, dtype=dtype)


# -- CASR (seed 2.5) -----------------------------------------------------------------------------------------------
# R_h = alpha [(c-y)^2 - (r-y)^2] + beta 1[critique_ok] - gamma 1[r ~ c] - delta 1[partial], alpha 1, beta = gamma =
# delta = 0.05, clip 0.30. The table gates only alpha on "full structure + graded answer"; -gamma "triggers when
# |r-c| < 0.02" and -delta when "critique XOR refined_confidence".
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_casr_anti_copy_penalty_also_applies_to_a_refined_confidence_without_critique(dtype):
    cases = [
        # c, r, y, critique chars, has r, expected
        (0.55, 0.55, 1, 0, True, -0.10),  # no critique, r = c: -gamma - delta = -0.05 - 0.05
        (0.28, 0.27, 0, 0, True, -0.10),  # |r - c| = 0.01 < 0.02: -gamma - delta
        (0.60, 0.62, 1, 0, True, -0.05),  # |r - c| = 0.02 is not < 0.02: -delta only (alpha needs the full form)
        (0.70, 0.90, 1, 0, True, -0.05),  # no copy: -delta
        (0.80, 0.80, 1, 20, True, 0.00),  # full copy: 0 + beta - gamma
        (0.50, 0.51, 1, 5, True, 0.25 - 0.49 ** 2 - 0.05),  # full, short critique, copy: 0.0099 - gamma = -0.0401
    ]
    c, r, y, chars, has, want = zip(*cases)
    got = casr_reward(t(c, dtype), t(r, dtype), t(y, dtype), torch.tensor(chars), torch.tensor(has))
    assert got.tolist() == pytest.approx(list(want), abs=1e-6)


def test_casr_head_charges_gamma_on_a_copied_refinement_without_critique():
    sample = SimpleNamespace(response=format_response("2 + 2 = 4", "4", 0.6, refined_confidence=0.6), gold="4",
                             choices=[], aux={})
    rewards, m = HonestHindsightHead(mode="refined").score([sample])
    # partial (r without critique) and |r - c| = 0 < 0.02: -delta - gamma = -0.10
    assert rewards.tolist() == pytest.approx([-0.10], abs=1e-6)
    assert m["copy"] == 1 and m["partial"] == 1 and m["full"] == 0


# -- SMC (seed 1 table: "When d=5 acc > τ"; 4.1: "crosses an upper threshold"; 4.3: tau = 0.75, 20 episodes) -------
def _controller():
    return DifficultyController(["arithmetic"], start=5, cap=8, window=20, promote=0.75, demote=0.20,
                                min_episodes=20, cooldown=10)


def test_smc_promotes_only_strictly_above_075():
    c = _controller()
    # 15 right of 20 at the ceiling: acc = 0.75, not > 0.75 -> no promotion
    changes = [c.record("arithmetic", 5, y) for y in [False] * 5 + [True] * 15]
    assert changes == [None] * 20 and c.ceiling("arithmetic") == 5 and c.rolling_accuracy("arithmetic") == 0.75
    # one more success pushes a failure out of the 20-episode window: 16 / 20 = 0.80 > 0.75 -> 6
    assert c.record("arithmetic", 5, True) == PROMOTE and c.ceiling("arithmetic") == 6


def test_smc_demotes_strictly_below_020():
    c = DifficultyController(["arithmetic"], start=5, cap=8, cooldown=0)
    for _ in range(20):
        c.record("arithmetic", 5, True)  # 20 / 20 > 0.75 -> 6
    assert c.ceiling("arithmetic") == 6
    # 4 / 20 = 0.20 is not below 0.20; 3 / 20 = 0.15 is
    assert [c.record("arithmetic", 6, y) for y in [True] * 4 + [False] * 16] == [None] * 20
    assert c.record("arithmetic", 6, False) == DEMOTE and c.ceiling("arithmetic") == 5


# -- section 8: "A pillar is considered to 'work' if Δ ECE ≤ -0.01" -----------------------------------------------
def test_pillar_works_bar():
    from mmevo.honest.calibration import pillar_works

    assert pillar_works(0.30, 0.29)  # Delta = -0.01: on the bar, works
    assert pillar_works(0.30, 0.25)  # -0.05
    assert not pillar_works(0.30, 0.295)  # -0.005
    assert not pillar_works(0.30, 0.31)  # +0.01
    with pytest.raises(ValueError, match="ece_pillar"):  # a NaN ECE (nothing graded) is no verdict either way
        pillar_works(0.30, float("nan"))


# -- the closed forms the review found correct (hand values) --------------------------------------------------------
def test_brier_hcr_and_cpr_hand_values():
    # R_B = -(c - y)^2: c 0.8 y 1 -> -0.04; c 0.8 y 0 -> -0.64; c 0 y 1 -> -1
    assert brier_reward(t([0.8, 0.8, 0.0]), torch.tensor([1, 0, 1])).tolist() == pytest.approx([-0.04, -0.64, -1.0])
    # R_H = -0.3 (r - y)^2: r 0.9 y 1 -> -0.003; r 0.5 y 0 -> -0.075
    assert hindsight_reward(t([0.9, 0.5]), torch.tensor([1, 0])).tolist() == pytest.approx([-0.003, -0.075])
    # p_i ~ (|c - y| + 1e-3)^0.6: errors 0, 1, 0.5 -> 0.001^0.6 = 0.0158489, 1.001^0.6 = 1.0006, 0.501^0.6 = 0.66058
    p = replay_priorities(t([1.0, 1.0, 0.5]), torch.tensor([1, 0, 1]))
    assert p.tolist() == pytest.approx([0.001 ** 0.6, 1.001 ** 0.6, 0.501 ** 0.6], rel=1e-12)
    assert (p / p.sum()).tolist() == pytest.approx([0.0094508, 0.5966627, 0.3938865], abs=1e-7)
