"""Round-27 equation vectors for MM-Zero's seed functions (seed 001: ``diversity_adjustment``, ``proposal_rewards``).

The reference is the seed's text in exact rational arithmetic (``Fraction``), so float rounding in our code cannot
hide behind the same rounding in the reference. Beyond rounds eq20 / eq22 / eq26: a strength or a count given as a
one-element tensor or array (a tensor strength of 0.5 was refused as "must be finite and >= 0"), and the seed's Lab
mechanism (a categorical policy over proposals, trained 60 steps at lr 0.5 on the rewards, must pass 0.72).
"""

import random
from fractions import Fraction

import numpy as np
import pytest
import torch

from mmevo.rewards.mmzero import diversity_adjustment, proposal_rewards

WEIGHTS = (Fraction(45, 100), Fraction(20, 100), Fraction(35, 100))  # seed: caption / easy / hard
HALF = Fraction(1, 2)


def exact_diversity(row, M, strength):
    """-clip(dot(shares - 1/M, [.45, .20, .35]) * M * strength, -strength, +strength)."""
    st = Fraction(strength)
    x = sum((Fraction(s) - Fraction(1, M)) * w for s, w in zip(row, WEIGHTS)) * M * st
    return -min(max(x, -st), st)


def exact_proposal(executed, easy, cons, adjustments, valid):
    """-1 for an invalid format; else 1/N sum_j e_j [min(s_j, .5) + min(c_j, 1 - c_j)] + sum_k a_k over ALL N."""
    if not valid:
        return Fraction(-1)
    base = sum(min(Fraction(s), HALF) + min(Fraction(c), 1 - Fraction(c))
               for e, s, c in zip(executed, easy, cons) if e)
    return base / len(executed) + sum(Fraction(a) for a in adjustments)


def _close(got: float, want: Fraction, dtype) -> bool:
    ulp = 2.0 ** -52 if dtype == torch.float64 else 2.0 ** -23
    return abs(Fraction(got) - want) <= 4 * ulp * max(1, abs(want))


def test_proposal_rewards_equal_the_exact_seed_value_on_1500_random_batches():
    rng = random.Random(27)
    for case in range(1500):
        B, N = rng.choice([1, 1, 3, 17]), rng.choice([1, 2, 4, 7, 64])
        p_exec = rng.choice([0.0, 1.0, 0.5, rng.random()])  # all-fail, all-pass, mixed
        ex = [[rng.random() < p_exec for _ in range(N)] for _ in range(B)]
        share = lambda: rng.choice([0.0, 1.0, 0.5, 0.25, 0.75, rng.random(), rng.randint(0, 5) / 5])  # noqa: E731
        s = [[share() for _ in range(N)] for _ in range(B)]
        c = [[share() for _ in range(N)] for _ in range(B)]
        a = [[rng.choice([0.0, -0.3]), rng.choice([0.0, -0.15 * rng.random()]), rng.uniform(-0.5, 0.5)]
             for _ in range(B)]
        v = [rng.random() < 0.85 for _ in range(B)]
        for dtype in (torch.float64, torch.float32):
            args = (torch.tensor(ex), torch.tensor(s, dtype=dtype), torch.tensor(c, dtype=dtype),
                    torch.tensor(a, dtype=dtype), torch.tensor(v))
            got = proposal_rewards(*args)
            assert got.dtype == dtype and got.shape == (B,) and not got.requires_grad
            # the reference reads the same (rounded) inputs the tensors hold
            rows = zip(ex, *(x.double().tolist() for x in args[1:4]), v)
            for b, (g, row) in enumerate(zip(got.tolist(), rows)):
                assert _close(g, exact_proposal(*row), dtype), (case, dtype, b, g, float(exact_proposal(*row)))


def test_proposal_rewards_seed_sentences():
    one_of_two = proposal_rewards(torch.tensor([[True, False]]), torch.tensor([[1.0, 0.0]]),
                                  torch.tensor([[0.5, 0.0]]), torch.zeros(1, 3), torch.tensor([True]))
    assert one_of_two.tolist() == [0.5]  # "one success in two attempts, easy=1 and c=0.5 yield base reward 0.5"
    # all renders failed: only the adjustments; an invalid format is -1 whatever the rest says
    got = proposal_rewards(torch.zeros(2, 4, dtype=torch.bool), torch.ones(2, 4), torch.full((2, 4), 0.5),
                           torch.tensor([[-0.3, -0.15, 0.5], [9.0, 9.0, 9.0]]), torch.tensor([True, False]))
    assert got.tolist() == pytest.approx([0.05, -1.0], abs=1e-7)


def test_diversity_adjustment_equals_the_exact_seed_value_on_1500_random_rows():
    rng = random.Random(2727)
    for case in range(1500):
        M = rng.choice([1, 2, 3, 5, 64, 10 ** 6])
        B = rng.choice([1, 4, M if M < 100 else 9])  # M is the supplied population, not B
        strength = rng.choice([0.0, 0.5, 1.0, 3.0, rng.random()])
        rows = [[rng.choice([1 / M, 1.0, 0.0, rng.randint(1, M) / M, rng.random()]) for _ in range(3)]
                for _ in range(B)]
        for dtype in (torch.float64, torch.float32):
            shares = torch.tensor(rows, dtype=dtype)
            got = diversity_adjustment(shares, M, strength)
            assert got.dtype == dtype and got.shape == (B,) and not got.requires_grad
            for g, row in zip(got.tolist(), shares.double().tolist()):
                want = exact_diversity(row, M, strength)
                assert _close(g, want, dtype), (case, dtype, row, M, strength, g, float(want))


@pytest.mark.parametrize("strength", [torch.tensor(0.5), torch.tensor(0.5, dtype=torch.float64), torch.tensor([0.5]),
                                      np.array(0.5), np.float32(0.5)])
@pytest.mark.parametrize("count", [4, torch.tensor(4), np.array(4), np.int64(4)])
def test_diversity_adjustment_takes_a_one_element_tensor_or_array_as_its_number(strength, count):
    shares = torch.tensor([[0.5, 0.2, 0.1], [0.1, 0.1, 0.1], [0.25, 0.25, 0.25]])
    got = diversity_adjustment(shares, count, strength)
    assert got.tolist() == pytest.approx([float(exact_diversity(r, 4, 0.5)) for r in shares.double().tolist()],
                                         abs=1e-7)
    assert got.tolist() == pytest.approx([-0.1, 0.3, 0.0], abs=1e-7)


@pytest.mark.parametrize("strength", [torch.tensor(True), torch.tensor([0.5, 0.5]), torch.tensor(float("nan")),
                                      torch.tensor(-0.5), np.array([0.5, 0.5])])
def test_diversity_adjustment_still_refuses_a_tensor_strength_that_is_no_finite_number(strength):
    with pytest.raises(ValueError, match="strength"):
        diversity_adjustment(torch.zeros(1, 3), 1, strength)


def test_lab_mechanism_a_categorical_policy_learns_the_best_proposal():
    """The seed's Lab: a categorical policy over fixed proposals, uniform logits, 60 steps at lr 0.5 in float64, each
    step's proposal rewards (with the diversity adjustment over the policy's own mixture) as a detached signal; the
    target (the renderable, solvable, balanced proposal) must pass 0.72 and gain more than 0.3."""
    # four proposals, N = 4 render attempts each: target / renders fail / too easy / invalid format
    executed = torch.tensor([[True, True, True, False], [False, False, False, True], [True] * 4, [True] * 4])
    easy = torch.tensor([[1.0, 0.75, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [1.0] * 4, [1.0] * 4], dtype=torch.float64)
    cons = torch.tensor([[0.5, 0.5, 0.75, 0.0], [0.0, 0.0, 0.0, 0.5], [1.0] * 4, [0.5] * 4], dtype=torch.float64)
    valid = torch.tensor([True, True, True, False])
    logits = torch.zeros(4, dtype=torch.float64, requires_grad=True)
    start = None
    # fixed cluster shares over a population of M = 8 valid proposals: the target is in a cluster of its own, the
    # too-easy one in a crowded one; the easy-hard penalty hits the too-easy proposal (c = 1)
    shares = torch.tensor([[1, 1, 1], [2, 2, 1], [5, 4, 6], [1, 1, 1]], dtype=torch.float64) / 8
    adjustments = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [-0.3, -0.15, 0.0], [0.0, 0.0, 0.0]],
                               dtype=torch.float64)
    adjustments[:, 2] = diversity_adjustment(shares, 8)
    assert adjustments[:, 2].tolist() == pytest.approx([0.0, -0.325, -0.5, 0.0])  # a singleton cluster: 0
    for _ in range(60):
        probs = torch.softmax(logits, 0)
        r = proposal_rewards(executed, easy, cons, adjustments, valid)
        assert r.dtype == torch.float64 and not r.requires_grad
        loss = -(probs * (r - (probs.detach() * r).sum())).sum()  # expected policy gradient with a baseline
        logits.grad = None
        loss.backward()
        with torch.no_grad():
            logits -= 0.5 * logits.grad
        start = probs[0].item() if start is None else start
    final = torch.softmax(logits, 0)[0].item()
    assert final > 0.72 and final - start > 0.3, (start, final)
