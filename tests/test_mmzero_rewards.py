"""MM-Zero reward API (seed 001): contracts, the worked example, hand-computed numbers, and the seed's lab."""

import pytest
import torch

from mmevo.rewards.answers import answers_equivalent
from mmevo.rewards.mmzero import (cluster_shares, coder_reward, diversity_adjustment, easy_accuracy, easy_hard_penalty,
                                  modal_share, proposal_rewards, type_penalties)


def test_worked_example_one_success_in_two_attempts():
    # (1/2) * [1 * (min(1, .5) + min(.5, .5)) + 0] = 0.5: the failed render stays in the denominator
    r = proposal_rewards(torch.tensor([[True, False]]), torch.tensor([[1.0, 1.0]]), torch.tensor([[0.5, 0.5]]),
                         torch.zeros(1, 3), torch.tensor([True]))
    assert r.tolist() == [0.5] and r.dtype == torch.float32


def test_proposal_rewards_hand_numbers_adjustments_and_invalid_rows():
    executed = torch.tensor([[True, True, False, True], [True, True, True, True], [False, False, False, False]])
    easy = torch.tensor([[0.2, 0.9, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5], [1.0, 1.0, 1.0, 1.0]], dtype=torch.float64)
    c = torch.tensor([[0.6, 1.0, 0.5, 0.25], [0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]], dtype=torch.float64)
    adj = torch.tensor([[-0.3, -0.05, 0.1], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    valid = torch.tensor([True, False, True])
    before = [t.clone() for t in (executed, easy, c, adj, valid)]
    r = proposal_rewards(executed, easy, c, adj, valid)
    # row 0: attempts (0.2 + 0.4), (0.5 + 0.0), failed (0), (0.0 + 0.25) -> 1.35 / 4 = 0.3375; + (-0.3 - 0.05 + 0.1)
    #        = 0.0875
    # row 1: invalid format -> -1 whatever the renders; row 2: nothing executed -> 0
    assert r.dtype == torch.float64 and r.tolist() == pytest.approx([0.0875, -1.0, 0.0], abs=1e-12)
    assert all(torch.equal(a, b) for a, b in zip(before, (executed, easy, c, adj, valid)))  # nothing mutated


def test_proposal_rewards_are_detached_and_shapes_checked():
    easy = torch.full((2, 3), 0.7, requires_grad=True)
    r = proposal_rewards(torch.ones(2, 3, dtype=torch.bool), easy, torch.full((2, 3), 0.3), torch.zeros(2, 3),
                         torch.ones(2, dtype=torch.bool))
    assert not r.requires_grad and r.tolist() == pytest.approx([0.8, 0.8])  # min(.7,.5) + min(.3,.7)
    with pytest.raises(ValueError, match="bool"):
        proposal_rewards(torch.ones(2, 3), easy, easy, torch.zeros(2, 3), torch.ones(2, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"\[2, 3\]"):
        proposal_rewards(torch.ones(2, 3, dtype=torch.bool), easy, torch.zeros(2, 2), torch.zeros(2, 3),
                         torch.ones(2, dtype=torch.bool))


def test_diversity_adjustment_hand_numbers_clip_and_population():
    shares = torch.tensor([[0.5, 0.25, 0.25], [0.1, 0.1, 0.1], [1.0, 1.0, 1.0]], dtype=torch.float64)
    adj = diversity_adjustment(shares, valid_count=4, strength=0.5)
    # M = 4, 1/M = .25: row 0: (.25*.45 + 0 + 0) * 4 * .5 = .225 -> -.225
    # row 1: (-.15 * 1.0) * 2 = -.3 -> +.3 ; row 2: (.75 * 1.0) * 2 = 1.5 -> clipped to .5 -> -.5
    assert adj.tolist() == pytest.approx([-0.225, 0.3, -0.5], abs=1e-12) and adj.dtype == torch.float64
    # M is the supplied valid population, not the row count
    one = diversity_adjustment(torch.tensor([[0.1, 0.1, 0.1]]), valid_count=10, strength=1.0)
    assert one.tolist() == pytest.approx([0.0], abs=1e-7)  # 1/M = .1: no excess
    assert not diversity_adjustment(shares.requires_grad_(), 4).requires_grad
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="valid_count"):
            diversity_adjustment(shares.detach(), bad)
    with pytest.raises(ValueError, match="strength"):
        diversity_adjustment(shares.detach(), 4, strength=-0.1)


def test_upstream_pieces():
    assert easy_accuracy(["3", "3", None, "4"], "3") == 0.5
    assert modal_share(["a", "b", "b", None]) == ("b", 0.5)
    assert modal_share(["a", "b", None, None]) == ("a", 0.25)  # tie -> first seen
    assert modal_share([None, None]) == (None, 0.0)  # the default (Prism's p(q)) counts answerless samples
    assert easy_hard_penalty([1.0, 0.9]) == -0.3  # mean min(c, 1-c) = .05 < .15: too consistent (too easy)
    assert easy_hard_penalty([0.5, 0.75]) == 0.0 and easy_hard_penalty([]) == 0.0
    # types: chart x3, table x1 -> f_chart = .75: -.15 * .25 / .5 = -.075; table: 0
    assert type_penalties(["chart", "chart", "chart", "table"]) == pytest.approx([-0.075] * 3 + [0.0])
    assert type_penalties(["chart"] * 4) == [0.0] * 4  # one type only: no penalty
    assert cluster_shares([0, 0, 1, 2]) == [0.5, 0.5, 0.25, 0.25]
    assert coder_reward(True, 1.0, 0.5, -0.3) == pytest.approx(2.2) and coder_reward(False, 1.0, 0.5, 0.0) == 0.0


def test_consistency_is_the_modal_share_of_the_answered_samples():
    # MM-Zero's c: runs cut at max_tokens (None) leave the denominator instead of making the question look balanced
    assert modal_share(["7", "7", None, None], answered_only=True) == ("7", 1.0)
    assert modal_share(["a", "b", "b", None], answered_only=True) == ("b", pytest.approx(2 / 3))
    assert modal_share(["a", "b", None, None], answered_only=True) == ("a", 0.5)  # tie -> first seen
    assert modal_share([None, None], answered_only=True) == (None, 0.0)


def test_easy_accuracy_uses_answer_equivalence():
    # the Judge's rule: equivalent spellings match, None counts as wrong but stays in the denominator
    assert easy_accuracy(["7.0", "\\frac{14}{2}", "7", None, "8"], "7") == pytest.approx(3 / 5)
    assert easy_accuracy(["Yes.", "YES", "no"], "yes") == pytest.approx(2 / 3)
    assert easy_accuracy([], "7") == 0.0


def test_easy_accuracy_accepts_a_match_in_either_direction():
    # MM-Zero's released proposer reward grades grade(ans, easy) or grade(easy, ans); the set reading is one-sided
    assert answers_equivalent("(1,2)", "\\{2,1\\}") and not answers_equivalent("\\{2,1\\}", "(1,2)")
    assert easy_accuracy(["\\{2,1\\}", "(1,2)", None, "(3,4)"], "(1,2)") == pytest.approx(2 / 4)
    assert easy_accuracy(["(1,2)", "\\{2,1\\}"], "\\{2,1\\}") == pytest.approx(1.0)
    assert easy_accuracy(["x<3", "x>3"], "(-\\infty,3)") == pytest.approx(1 / 2)


def test_the_seed_lab_categorical_policy_learns_the_balanced_renderable_proposal():
    """60 gradient steps at lr 0.5 from uniform logits on fixed feedback records (CPU float64)."""
    torch.manual_seed(0)
    # four candidate proposals, N = 4 render attempts each
    executed = torch.tensor([[True, True, True, True],     # 0: renders, easy solvable, hard question balanced
                             [True, False, False, False],  # 1: rarely renders
                             [True, True, True, True],     # 2: renders, but hard question trivially consistent
                             [True, True, True, True]])    # 3: renders, but invalid format
    easy = torch.tensor([[1.0] * 4, [1.0] * 4, [1.0] * 4, [1.0] * 4], dtype=torch.float64)
    c = torch.tensor([[0.5] * 4, [0.5] * 4, [1.0] * 4, [0.5] * 4], dtype=torch.float64)
    valid = torch.tensor([True, True, True, False])
    shares = torch.tensor([[0.25, 0.25, 0.25], [0.25, 0.25, 0.25], [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]],
                          dtype=torch.float64)
    penalties = torch.tensor([easy_hard_penalty(row.tolist()) for row in c], dtype=torch.float64)
    adjustments = torch.stack([penalties, torch.zeros(4, dtype=torch.float64),
                               diversity_adjustment(shares, valid_count=3)], dim=1)
    rewards = proposal_rewards(executed, easy, c, adjustments, valid)  # [4]
    logits = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    p0 = torch.softmax(logits, 0)[0].item()
    for _ in range(60):
        p = torch.softmax(logits, 0)
        objective = (p * rewards).sum()  # expected teaching score
        (grad,) = torch.autograd.grad(objective, logits)
        with torch.no_grad():
            logits += 0.5 * grad
    p_target = torch.softmax(logits, 0)[0].item()
    assert rewards.argmax().item() == 0
    assert p_target > 0.72 and p_target - p0 > 0.3, (rewards.tolist(), p_target)
