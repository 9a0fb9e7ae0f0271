"""Round 12 of the seed equations: each formula against an independent reference written from the seed text, on
random vectors and edge cases, plus the seed-named APIs called exactly as the seeds write them.

Defects found (each test below fails on the code before its fix):
- Prism ``coverage_rewards`` / ``ema_counts`` evaluated float32 / bf16 / fp16 inputs in their own precision and missed
  the correctly rounded value by an ulp (float32 p 0.55, counts [1, 1]: 1.4196986 for 1.4196987; float32 n 0.7,
  no visit: 0.69300002 for 0.69299996), where every other seed formula evaluates in float64 and rounds once;
- the HONEST replay adapter had no ``entropy_of_priorities()``, which seed 9's replay-collapse detector calls on the
  buffer of seed 3.3.
"""

import inspect
import math
import random
from fractions import Fraction

import numpy as np
import pytest
import torch

from mmevo.csrs.retrace import anchor_position
from mmevo.honest.health import LOG2, replay_entropy_low
from mmevo.honest.seed_api import CalibrationPrioritizedReplay
from mmevo.rewards.honest import (brier_reward, casr_reward, expected_calibration_error, hindsight_reward,
                                  replay_priorities)
from mmevo.rewards.mmzero import diversity_adjustment, proposal_rewards
from mmevo.rewards.prism import coverage_rewards, ema_counts, zpd
from mmevo.rewards.sfr import softened_frequency_rewards

from test_seed_vectors_edge import ref_sfr  # Eq. 7-8 from the seed text (the edge file's reference)

LOW = (torch.float32, torch.bfloat16, torch.float16)


# ------------------------------------------------------------------ references, straight from the seed texts
def ref_zpd(p):  # Prism: max(0, 1 - |p - 0.75| / 0.4) for p in [0.5, 0.9]
    return max(0.0, 1 - abs(p - 0.75) / 0.4) if 0.5 <= p <= 0.9 else 0.0


def ref_coverage(p, c, counts, lam=5.0):  # Prism: zpd(p) (1 + lam exp(-n_c / n_bar)), n_bar over all K
    return ref_zpd(p) * (1 + lam * math.exp(-counts[c] / (sum(counts) / len(counts))))


def ref_ema(counts, visited, gamma=0.99):  # Prism: n_k <- gamma n_k + (1 - gamma) 1[k visited]
    return [gamma * n + (1 - gamma) * (1.0 if k in visited else 0.0) for k, n in enumerate(counts)]


def ref_diversity(row, M, strength=0.5):  # MM-Zero: -clip(dot(shares - 1/M, w) M strength, -strength, strength)
    d = sum((s - 1 / M) * w for s, w in zip(row, (0.45, 0.20, 0.35))) * M * strength
    return -min(max(d, -strength), strength)


def ref_proposal(executed, easy, cons, adj, valid):  # MM-Zero: mean over ALL N attempts, + adjustments; invalid: -1
    if not valid:
        return -1.0
    n = len(executed)
    return sum(min(s, 0.5) + min(c, 1 - c) for e, s, c in zip(executed, easy, cons) if e) / n + sum(adj)


def ref_casr(c, r, y, chars):  # HONEST 2.5, defaults alpha 1, beta gamma delta 0.05, clip 0.30; r None: absent
    has_c, has_r = chars > 0, r is not None
    if not has_c and not has_r:
        return 0.0
    x = ((c - y) ** 2 - (r - y) ** 2 if has_c and has_r else 0.0) + (0.05 if chars >= 16 else 0.0)
    x -= 0.05 if has_r and abs(r - c) < 0.02 else 0.0
    x -= 0.05 if has_c != has_r else 0.0
    return max(-0.3, min(0.3, x))


def ref_ece(c, y, bins=10):  # HONEST 8: sum_b n_b / N |acc_b - conf_b|, lo <= c < hi, c = 1 in the last bin
    edges = np.linspace(0, 1, bins + 1)
    total = 0.0
    for b in range(bins):
        idx = [i for i, x in enumerate(c) if edges[b] <= x < edges[b + 1] or (b == bins - 1 and x == 1.0)]
        if idx:
            total += len(idx) / len(c) * abs(sum(y[i] for i in idx) / len(idx) - sum(c[i] for i in idx) / len(idx))
    return total


def once(x, dtype):
    """x (a float64 number) rounded once to ``dtype``: what a float64 evaluation rounded at the end returns."""
    return torch.tensor(x, dtype=torch.float64).to(dtype).item()


# ------------------------------------------------------------------ defects: rounding once in low precision
@pytest.mark.parametrize("dtype", LOW)
def test_coverage_rewards_low_precision_is_the_float64_value_rounded_once(dtype):
    # float32 p 0.55 (0.550000011920929), counts [1, 1]: zpd = 0.5 - 0.0000000298, rarity e^-1
    # -> 1.41969871... ; evaluated in float32 it was 1.4196985960006714
    p = torch.tensor([0.55], dtype=dtype)
    pq = p.double().item()
    got = coverage_rewards(p, torch.tensor([0]), torch.tensor([1.0, 1.0], dtype=dtype))
    assert got.dtype == dtype
    assert got.item() == once(ref_coverage(pq, 0, [1.0, 1.0]), dtype)
    rng = random.Random(120)
    for _ in range(150):
        K, B = rng.randint(1, 6), rng.randint(1, 4)
        counts = torch.tensor([rng.choice([0.0, 1.0, rng.random() * 5]) for _ in range(K)], dtype=dtype)
        counts[0] = counts[0] + 0.5  # not all zero
        ps = torch.tensor([rng.uniform(0.45, 0.95) for _ in range(B)], dtype=dtype)
        cl = [rng.randrange(K) for _ in range(B)]
        got = coverage_rewards(ps, torch.tensor(cl), counts).tolist()
        cq = counts.double().tolist()
        want = [once(ref_coverage(x, c, cq), dtype) for x, c in zip(ps.double().tolist(), cl)]
        assert got == want, (ps, cl, counts)


@pytest.mark.parametrize("dtype, n, visited, want", [
    # float32 0.7 is 0.699999988079071: 0.99 n = 0.69299998819... -> 0.69299995899 (float32 evaluation: 0.69300001860)
    (torch.float32, 0.7, [], 0.6929999589920044),
    # float32 0.1 -> 0.99 * 0.10000000149 + 0.01 = 0.10900000148 -> 0.10900000483 (was 0.10899999738)
    (torch.float32, 0.1, [0], 0.10900000482797623),
    # bf16 0.3 is 0.30078125: 0.99 n + 0.01 = 0.30777344 -> 0.30859375 (was 0.306640625, one bf16 ulp under)
    (torch.bfloat16, 0.3, [0], 0.30859375),
    # fp16 0.1 is 0.0999755859375: 0.10897583 -> 0.10894775 (was 0.10900879)
    (torch.float16, 0.1, [0], 0.10894775390625),
])
def test_ema_counts_low_precision_is_the_float64_value_rounded_once(dtype, n, visited, want):
    counts = torch.tensor([n], dtype=dtype)
    got = ema_counts(counts, torch.tensor(visited, dtype=torch.long), 0.99)
    assert got.dtype == dtype and got.item() == want
    assert want == once(ref_ema(counts.double().tolist(), visited)[0], dtype)


@pytest.mark.parametrize("dtype", LOW)
def test_ema_counts_random_low_precision_vectors(dtype):
    rng = random.Random(121)
    for _ in range(150):
        K = rng.randint(1, 6)
        counts = torch.tensor([rng.choice([0.0, 1.0, rng.random() * 5]) for _ in range(K)], dtype=dtype)
        visited = [rng.randrange(K) for _ in range(rng.randint(0, 4))]
        gamma = rng.choice([0.99, 0.0, 1.0, rng.random()])
        got = ema_counts(counts, torch.tensor(visited, dtype=torch.long), gamma).tolist()
        assert got == [once(x, dtype) for x in ref_ema(counts.double().tolist(), visited, gamma)]


# ------------------------------------------------------------------ defect: the seed's replay API, section 9
def test_replay_adapter_has_the_detectors_entropy_of_priorities():
    buf = CalibrationPrioritizedReplay(seed=0)
    buf.add("What is 2 + 2?", 4, "math", 3, 0.75, True)
    buf.add("What is 3 + 3?", 6, "math", 3, 0.25, False)
    # two entries with the same error 0.25 (exact in binary): p = (1/2, 1/2), entropy log 2; not below the floor
    assert buf.entropy_of_priorities() == pytest.approx(LOG2, rel=1e-12)
    assert not replay_entropy_low(buf.entropy_of_priorities()).fired
    buf.add("What is 4 + 4?", 8, "math", 3, 0.0, True)  # error 1: priority 1.001^0.6, against 2 x 0.251^0.6
    pr = [0.251 ** 0.6, 0.251 ** 0.6, 1.001 ** 0.6]
    p = [x / sum(pr) for x in pr]
    assert buf.entropy_of_priorities() == pytest.approx(-sum(x * math.log(x) for x in p), rel=1e-12)
    assert buf.entropy_of_priorities() == pytest.approx(buf.snapshot()["priority_entropy"], rel=1e-12)
    one = CalibrationPrioritizedReplay()
    one.add("q", 1, "math", 1, 1.0, False)
    assert one.entropy_of_priorities() == 0.0 and replay_entropy_low(one.entropy_of_priorities()).fired


# ------------------------------------------------------------------ seed APIs as the seeds write them
def test_mmzero_signatures_are_the_seeds():
    sig = inspect.signature(diversity_adjustment)
    assert list(sig.parameters) == ["shares", "valid_count", "strength"]
    assert sig.parameters["strength"].default == 0.5
    assert list(inspect.signature(proposal_rewards).parameters) == [
        "executed", "easy_accuracy", "consistency", "adjustments", "valid"]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_mmzero_random_vectors(dtype):
    rng = random.Random(122)
    for _ in range(150):
        B, N = rng.randint(1, 5), rng.randint(1, 6)
        M = rng.choice([1, 2, B, rng.randint(1, 40)])  # M is supplied, not B
        strength = rng.choice([0.0, 0.5, 1.0, rng.random() * 2])
        shares = torch.tensor([[rng.choice([0.0, 1.0, 1 / M, rng.random()]) for _ in range(3)] for _ in range(B)],
                              dtype=dtype, requires_grad=True)
        got = diversity_adjustment(shares, M, strength)
        assert got.dtype == dtype and got.shape == (B,) and not got.requires_grad
        sq = shares.detach().double().tolist()
        assert got.tolist() == [once(ref_diversity(row, M, strength), dtype) for row in sq]
        ex = [[rng.random() < 0.6 for _ in range(N)] for _ in range(B)]
        easy = torch.tensor([[rng.choice([0.0, 0.5, 1.0, rng.random()]) for _ in range(N)] for _ in range(B)],
                            dtype=dtype)
        cons = torch.tensor([[rng.choice([0.0, 0.5, 1.0, rng.random()]) for _ in range(N)] for _ in range(B)],
                            dtype=dtype)
        adj = torch.tensor([[rng.uniform(-1, 1) for _ in range(3)] for _ in range(B)], dtype=dtype)
        valid = [rng.random() < 0.8 for _ in range(B)]
        copies = [t.clone() for t in (easy, cons, adj)]
        got = proposal_rewards(torch.tensor(ex), easy, cons, adj, torch.tensor(valid))
        assert got.dtype == dtype and got.shape == (B,)
        assert all(torch.equal(a, b) for a, b in zip((easy, cons, adj), copies))  # no mutation
        want = [ref_proposal(*row) for row in zip(ex, easy.double().tolist(), cons.double().tolist(),
                                                  adj.double().tolist(), valid)]
        assert got.tolist() == pytest.approx([once(w, dtype) for w in want], rel=1e-12, abs=1e-12)


def test_mmzero_edges():
    # the seed's worked example: one success in two attempts, easy 1, c 0.5 -> base reward 0.5
    one = proposal_rewards(torch.tensor([[True, False]]), torch.tensor([[1.0, 0.0]], dtype=torch.float64),
                           torch.tensor([[0.5, 0.0]], dtype=torch.float64), torch.zeros(1, 3, dtype=torch.float64),
                           torch.tensor([True]))
    assert one.item() == 0.5
    # N = 1, every render failed: only the adjustments; a group of one proposal with M = 1: shares 1 are balanced
    assert proposal_rewards(torch.tensor([[False]]), torch.ones(1, 1), torch.ones(1, 1),
                            torch.tensor([[-0.3, -0.15, 0.25]]), torch.tensor([True])).item() == pytest.approx(-0.2)
    assert diversity_adjustment(torch.ones(1, 3, dtype=torch.float64), 1).item() == 0.0
    # all shares 1 in a population of 4: dot = 0.75, x 4 x 0.5 = 1.5 -> clipped to 0.5 -> -0.5
    assert diversity_adjustment(torch.ones(2, 3, dtype=torch.float64), 4).tolist() == [-0.5, -0.5]


def test_sfr_random_vectors_and_edges():
    rng = random.Random(123)
    for _ in range(300):
        n, m, k = rng.randint(1, 8), rng.randint(0, 5), rng.randint(1, 4)
        maternal = [rng.choice(list(range(k)) + [None]) for _ in range(n)]
        extra = rng.randint(0, 2)  # n not dividing the re-inference count too
        reinference = [rng.choice(list(range(k)) + [None]) for _ in range(n * m + extra)]
        gamma, beta = rng.choice([(0.2, 5.0), (rng.random(), rng.random() * 10)])
        got = softened_frequency_rewards(maternal, reinference, gamma, beta).tolist()
        assert got == pytest.approx(ref_sfr(maternal, reinference, gamma, beta), rel=1e-12, abs=1e-15)
    assert softened_frequency_rewards(["7"], []).tolist() == [1.0]  # a group of one: R_base = 1
    assert softened_frequency_rewards([None, None], [None]).tolist() == [0.0, 0.0]  # empty answers


def test_anchor_position_exact_floor_on_random_vectors():
    rng = random.Random(124)
    for _ in range(1000):
        L = rng.choice([0, 1, 2, rng.randint(0, 4000)])
        w = rng.choice([0, 1, 0.0, 1.0, 0.7, 0.1, 0.3, 0.9, round(rng.random(), 2), round(rng.random(), 3)])
        assert anchor_position(L, w) == math.floor(Fraction(str(w)) * L), (L, w)


def test_prism_float64_random_vectors():
    rng = random.Random(125)
    for _ in range(200):
        K, B = rng.randint(1, 8), rng.randint(1, 5)
        counts = [rng.choice([0.0, 1.0, rng.random() * 5]) for _ in range(K)]
        counts[0] += 1.0
        p = [rng.choice([0.5, 0.9, 0.75, 0.49, 0.91, rng.random(), rng.randint(0, 8) / 8]) for _ in range(B)]
        cl = [rng.randrange(K) for _ in range(B)]
        lam = rng.choice([5.0, rng.random() * 10])
        got = coverage_rewards(torch.tensor(p, dtype=torch.float64), torch.tensor(cl),
                               torch.tensor(counts, dtype=torch.float64), lam).tolist()
        assert got == pytest.approx([ref_coverage(x, c, counts, lam) for x, c in zip(p, cl)], rel=1e-12)
        assert zpd(torch.tensor(p, dtype=torch.float64)).tolist() == pytest.approx([ref_zpd(x) for x in p],
                                                                                   rel=1e-12, abs=1e-15)
        visited = [rng.randrange(K) for _ in range(rng.randint(0, 5))]
        gamma = rng.choice([0.99, 0.0, 1.0, rng.random()])
        assert ema_counts(torch.tensor(counts, dtype=torch.float64), torch.tensor(visited, dtype=torch.long),
                          gamma).tolist() == ref_ema(counts, visited, gamma)


def test_honest_random_vectors():
    rng = random.Random(126)
    for _ in range(200):
        B = rng.randint(1, 6)
        c = [rng.choice([0.0, 1.0, 0.5, rng.random(), round(rng.random(), 2)]) for _ in range(B)]
        r = [rng.choice([0.0, 1.0, 0.5, rng.random(), round(rng.random(), 2), None]) for _ in range(B)]
        y = [rng.randint(0, 1) for _ in range(B)]
        chars = [rng.choice([0, 1, 15, 16, 17, 40]) for _ in range(B)]
        k = rng.choice([0.3, rng.random()])
        ct, yt = torch.tensor(c, dtype=torch.float64), torch.tensor(y)
        assert brier_reward(ct, yt).tolist() == [-(a - b) ** 2 for a, b in zip(c, y)]
        assert hindsight_reward(ct, yt, k).tolist() == pytest.approx([-k * (a - b) ** 2 for a, b in zip(c, y)],
                                                                     rel=1e-15, abs=0)
        assert replay_priorities(ct, yt).tolist() == pytest.approx([(abs(a - b) + 1e-3) ** 0.6 for a, b in zip(c, y)],
                                                                   rel=1e-14)
        rt = torch.tensor([x if x is not None else float("nan") for x in r], dtype=torch.float64)
        got = casr_reward(ct, rt, yt, torch.tensor(chars), torch.tensor([x is not None for x in r]))
        assert got.tolist() == pytest.approx([ref_casr(*row) for row in zip(c, r, y, chars)], rel=1e-12, abs=1e-15)
        bins = rng.choice([1, 2, 5, 10, 15])
        assert expected_calibration_error(ct, yt, bins) == pytest.approx(ref_ece(c, y, bins), rel=1e-12, abs=1e-15)
