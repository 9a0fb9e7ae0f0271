"""MM-Zero reward equations (seed 001 and its exact API) against independent plain-Python references.

proposal_rewards:     r = 1/N sum_j e_j [min(s_j, 0.5) + min(c_j, 1 - c_j)] + sum_k a_k; invalid format -> -1
diversity_adjustment: -clip(dot(shares - 1/M, [.45, .20, .35]) M strength, -strength, +strength)
upstream pieces (DESIGN.md, MM-Zero's released code): easy-hard penalty -0.3 when mean min(c, 1 - c) < 0.15, type
penalty -0.15 max(0, f_type - 0.5) / 0.5, coder reward 1 + s + min(c, 1 - c) + penalties on a render, else 0."""

import math
import random

import pytest
import torch

from mmevo.rewards.mmzero import (coder_reward, diversity_adjustment, easy_hard_penalty, proposal_rewards,
                                  type_penalties)

TOL = 1e-9
WEIGHTS = (0.45, 0.20, 0.35)


def ref_diversity(row, M, strength):
    x = sum((s - 1.0 / M) * w for s, w in zip(row, WEIGHTS)) * M * strength
    return -min(max(x, -strength), strength)


def ref_proposal(executed, easy, cons, adjustments, valid):
    if not valid:
        return -1.0
    N = len(executed)
    base = sum(min(s, 0.5) + min(c, 1 - c) for e, s, c in zip(executed, easy, cons) if e) / N
    return base + sum(adjustments)


def rand_share(rng):
    return rng.choice([0.0, 1.0, 0.5, 0.25, 0.75, rng.random(), rng.randint(0, 8) / 8])


def test_proposal_rewards_match_the_reference_on_600_random_batches():
    rng = random.Random(1)
    for case in range(600):
        B, N = rng.randint(1, 6), rng.choice([1, 1, 2, 4, rng.randint(1, 12)])
        ex = [[rng.random() < rng.choice([0.0, 0.5, 1.0, 0.8]) for _ in range(N)] for _ in range(B)]
        s = [[rand_share(rng) for _ in range(N)] for _ in range(B)]
        c = [[rand_share(rng) for _ in range(N)] for _ in range(B)]
        a = [[rng.choice([0.0, -0.3]), -0.15 * rng.random(), rng.uniform(-0.5, 0.5)] for _ in range(B)]
        v = [rng.random() < 0.8 for _ in range(B)]
        f64 = torch.float64
        got = proposal_rewards(torch.tensor(ex), torch.tensor(s, dtype=f64), torch.tensor(c, dtype=f64),
                               torch.tensor(a, dtype=f64), torch.tensor(v))
        want = [ref_proposal(*row) for row in zip(ex, s, c, a, v)]
        assert got.dtype == torch.float64 and got.shape == (B,)
        for g, w in zip(got.tolist(), want):
            assert abs(g - w) <= TOL, (case, got, want)


def test_proposal_rewards_float32_is_the_rounded_float64_value():
    rng = random.Random(2)
    B, N = 50, 4
    ex = torch.rand(B, N, generator=torch.Generator().manual_seed(0)) < 0.7
    s, c = torch.rand(B, N, dtype=torch.float64), torch.rand(B, N, dtype=torch.float64)
    a = torch.rand(B, 3, dtype=torch.float64) - 0.5
    v = torch.tensor([rng.random() < 0.9 for _ in range(B)])
    got = proposal_rewards(ex, s.float(), c.float(), a.float(), v)
    assert got.dtype == torch.float32
    want = [ref_proposal(*row) for row in zip(ex.tolist(), s.float().tolist(), c.float().tolist(), a.float().tolist(),
                                              v.tolist())]
    assert got.tolist() == pytest.approx(want, abs=1e-6)


def test_proposal_rewards_seed_examples():
    # seed section 3: one success in two attempts, easy = 1 and c = 0.5 give base reward 0.5
    r = proposal_rewards(torch.tensor([[True, False]]), torch.tensor([[1.0, 0.0]]), torch.tensor([[0.5, 0.0]]),
                         torch.zeros(1, 3), torch.tensor([True]))
    assert r.tolist() == [0.5]
    # invalid format overrides everything, adjustments included
    r = proposal_rewards(torch.tensor([[True]]), torch.tensor([[1.0]]), torch.tensor([[0.5]]),
                         torch.tensor([[-0.3, -0.15, 0.5]]), torch.tensor([False]))
    assert r.tolist() == [-1.0]
    # no render succeeded: the adjustments alone (n = 1, m = 1 style minimum shapes)
    r = proposal_rewards(torch.tensor([[False]]), torch.tensor([[float("nan")]]), torch.tensor([[float("nan")]]),
                         torch.tensor([[-0.3, 0.0, 0.25]], dtype=torch.float64), torch.tensor([True]))
    assert r.tolist() == pytest.approx([-0.05], abs=1e-7)  # float32 result


def test_proposal_rewards_long_rows():
    N = 4096
    ex = torch.ones(1, N, dtype=torch.bool)
    s, c = torch.full((1, N), 0.7, dtype=torch.float64), torch.full((1, N), 0.9, dtype=torch.float64)
    r = proposal_rewards(ex, s, c, torch.zeros(1, 3, dtype=torch.float64), torch.tensor([True]))
    assert r.item() == pytest.approx(0.5 + 0.1, abs=TOL)


@pytest.mark.parametrize("field", ["easy_accuracy", "consistency"])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.1, 1.5])
def test_proposal_rewards_name_a_bad_share_of_an_executed_attempt(field, bad):
    x = {"easy_accuracy": torch.tensor([[0.5, 0.5]]), "consistency": torch.tensor([[0.5, 0.5]])}
    x[field][0, 1] = bad
    with pytest.raises(ValueError, match=rf"{field}\[0, 1\]"):
        proposal_rewards(torch.tensor([[True, True]]), x["easy_accuracy"], x["consistency"], torch.zeros(1, 3),
                         torch.tensor([True]))


@pytest.mark.parametrize("name, args", [
    ("easy_accuracy", (torch.ones(2, 3, dtype=torch.bool), torch.zeros(2, 2), torch.zeros(2, 3), torch.zeros(2, 3),
                       torch.ones(2, dtype=torch.bool))),
    ("consistency", (torch.ones(2, 3, dtype=torch.bool), torch.zeros(2, 3), torch.zeros(3, 3), torch.zeros(2, 3),
                     torch.ones(2, dtype=torch.bool))),
    ("adjustments", (torch.ones(2, 3, dtype=torch.bool), torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 2),
                     torch.ones(2, dtype=torch.bool))),
    ("valid", (torch.ones(2, 3, dtype=torch.bool), torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3),
               torch.ones(3, dtype=torch.bool))),
    ("executed", (torch.ones(2, 3), torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2, 3),
                  torch.ones(2, dtype=torch.bool))),
    ("adjustments", (torch.ones(1, 1, dtype=torch.bool), torch.zeros(1, 1), torch.zeros(1, 1),
                     torch.tensor([[float("nan"), 0.0, 0.0]]), torch.ones(1, dtype=torch.bool))),
])
def test_proposal_rewards_name_the_wrong_argument(name, args):
    with pytest.raises(ValueError, match=f"^{name}"):
        proposal_rewards(*args)


def test_diversity_adjustment_matches_the_reference_on_600_random_rows():
    rng = random.Random(4)
    for case in range(600):
        B = rng.randint(1, 8)
        M = rng.choice([1, 2, B, rng.randint(1, 500)])
        strength = rng.choice([0.5, 0.0, 1.0, 3 * rng.random()])
        rows = [[rng.choice([1.0, 1.0 / M, 0.0, rng.random(), rng.randint(1, M) / M]) for _ in range(3)]
                for _ in range(B)]
        got = diversity_adjustment(torch.tensor(rows, dtype=torch.float64), M, strength)
        assert got.dtype == torch.float64 and got.shape == (B,) and not got.requires_grad
        for g, w in zip(got.tolist(), [ref_diversity(r, M, strength) for r in rows]):
            assert abs(g - w) <= TOL, (case, rows, M, strength, got)


def test_diversity_adjustment_edges():
    # a balanced row (every share 1/M) is 0; a crowded one saturates at -strength, a rare one at +strength
    assert diversity_adjustment(torch.full((1, 3), 0.25, dtype=torch.float64), 4).tolist() == [0.0]
    assert diversity_adjustment(torch.ones(1, 3, dtype=torch.float64), 4).tolist() == [-0.5]
    assert diversity_adjustment(torch.zeros(1, 3, dtype=torch.float64), 4).tolist() == [0.5]
    # M = 1: the single valid proposal has share 1 = 1/M in every cluster -> 0
    assert diversity_adjustment(torch.ones(1, 3, dtype=torch.float64), 1).tolist() == [0.0]
    # strength 0 gives 0 for any row
    assert diversity_adjustment(torch.rand(5, 3, dtype=torch.float64), 7, 0.0).abs().max().item() == 0.0
    # grads never flow
    x = torch.full((2, 3), 0.3, requires_grad=True)
    assert not diversity_adjustment(x, 3).requires_grad


@pytest.mark.parametrize("kwargs, name", [({"valid_count": 0}, "valid_count"), ({"valid_count": 2.5}, "valid_count"),
                                          ({"strength": -1.0}, "strength"), ({"strength": float("nan")}, "strength")])
def test_diversity_adjustment_names_bad_arguments(kwargs, name):
    args = {"shares": torch.zeros(1, 3), "valid_count": 2, **kwargs}
    with pytest.raises(ValueError, match=name):
        diversity_adjustment(**args)


def test_upstream_pieces_match_the_reference_on_500_random_cases():
    rng = random.Random(9)
    for case in range(500):
        cons = [rng.choice([0.0, 1.0, 0.5, rng.random(), rng.randint(0, 8) / 8]) for _ in range(rng.randint(0, 6))]
        mean_balance = sum(min(c, 1 - c) for c in cons) / len(cons) if cons else None
        want = 0.0 if mean_balance is None or mean_balance >= 0.15 - 1e-9 else -0.3
        assert easy_hard_penalty(cons) == want, (case, cons)
        types = [rng.choice("abc"[: rng.randint(1, 3)]) for _ in range(rng.randint(1, 12))]
        got = type_penalties(types)
        for t, g in zip(types, got):
            f = types.count(t) / len(types)
            w = 0.0 if len(set(types)) == 1 else -0.15 * max(0.0, f - 0.5) / 0.5
            assert abs(g - w) <= TOL, (case, types, got)
        s, c, pen = rng.random(), rng.random(), -rng.random() * 0.45
        assert abs(coder_reward(True, s, c, pen) - (1 + s + min(c, 1 - c) + pen)) <= TOL
        assert coder_reward(False, s, c, pen) == 0.0


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), None, 2.5, True, torch.tensor(True)])
def test_diversity_adjustment_names_a_valid_count_that_is_no_count(bad):
    # NaN / inf / None escaped from int() as "cannot convert float NaN to integer", OverflowError, TypeError
    with pytest.raises(ValueError, match="valid_count must be an integer >= 1"):
        diversity_adjustment(torch.full((1, 3), 0.5, dtype=torch.float64), bad)


@pytest.mark.parametrize("count", [4, 4.0, torch.tensor(4)])
def test_diversity_adjustment_takes_a_count_of_any_integral_kind(count):
    got = diversity_adjustment(torch.tensor([[0.5, 0.25, 0.0]], dtype=torch.float64), count)
    assert got.tolist() == pytest.approx([ref_diversity([0.5, 0.25, 0.0], 4, 0.5)], abs=TOL)
