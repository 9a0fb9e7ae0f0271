"""Round-3 equation vectors for Prism's coverage reward (seed 000, "How It Works"), re-derived from the seed:

    r(q) = zpd(p(q)) * (1 + lam * exp(-n_c(q) / n_bar)),  zpd(p) = max(0, 1 - |p - 0.75| / 0.4) for p in [0.5, 0.9]
    n_k <- gamma * n_k + (1 - gamma) * 1[k visited]

Beyond rounds eq20 / eq22: tuples and numpy arrays (and numpy scalars) for every argument, one ulp either side of
both band edges, -0.0 and subnormal counts, 10,000 clusters / questions, identical results on a second call, and
cluster ids that torch cannot read (a generator, None, text) named by their argument.
"""

import math
import random

import numpy as np
import pytest
import torch

from mmevo.rewards.prism import coverage_rewards, diversity_stats, ema_counts, zpd


def ref_zpd(p):
    return max(0.0, 1.0 - abs(p - 0.75) / 0.4) if 0.5 <= p <= 0.9 else 0.0


def ref_reward(p, c, counts, lam=5.0):
    n_bar = math.fsum(counts) / len(counts)
    rarity = 1.0 if n_bar == 0 else math.exp(-counts[c] / n_bar)
    return ref_zpd(p) * (1.0 + lam * rarity)


def ref_ema(counts, visited, gamma=0.99):
    seen = set(visited)
    return [gamma * n + (1.0 - gamma) * (1.0 if k in seen else 0.0) for k, n in enumerate(counts)]


def test_zpd_one_ulp_either_side_of_each_band_edge():
    nx = math.nextafter
    cases = [0.5, nx(0.5, 0), nx(0.5, 1), 0.9, nx(0.9, 0), nx(0.9, 1), 0.75, nx(0.75, 0), nx(0.75, 1), -0.0, 5e-324]
    got = zpd(torch.tensor(cases, dtype=torch.float64)).tolist()
    assert got == pytest.approx([ref_zpd(p) for p in cases], abs=1e-15)
    assert got[0] == 0.375 and got[1] == 0.0 and got[2] > 0.375  # 0.5 is in the band, the float below is not
    assert got[3] == pytest.approx(0.625) and got[5] == 0.0  # same at 0.9
    assert got[6] == 1.0 and got[7] < 1.0 and got[8] < 1.0


@pytest.mark.parametrize("wrap", [list, tuple, np.array])
def test_coverage_rewards_from_lists_tuples_and_numpy_on_300_batches(wrap):
    rng = random.Random(26)
    for _ in range(300):
        K, B = rng.randint(1, 12), rng.randint(1, 8)
        counts = [rng.choice([0.0, 1.0, rng.uniform(0, 5), rng.uniform(0, 1e-3)]) for _ in range(K)]
        if not any(counts):
            counts[0] = 1.0
        p = [rng.choice([0.5, 0.9, 0.75, 0.49, 0.91, rng.random()]) for _ in range(B)]
        cl = [rng.randrange(K) for _ in range(B)]
        lam = rng.choice([5.0, 0.0, rng.uniform(0, 10)])
        got = coverage_rewards(wrap(p), wrap(cl), wrap(counts), lam)
        assert got.dtype == torch.float64 and got.shape == (B,)
        assert got.tolist() == pytest.approx([ref_reward(pi, ci, counts, lam) for pi, ci in zip(p, cl)], abs=1e-12)
        assert torch.equal(got, coverage_rewards(wrap(p), wrap(cl), wrap(counts), lam))  # no state between calls


def test_coverage_rewards_with_numpy_scalars_and_integer_counts():
    got = coverage_rewards([np.float64(0.75)], [np.int64(1)], [np.int64(1), np.int64(3)], np.float64(5.0))
    assert got.item() == pytest.approx(1.0 * (1 + 5 * math.exp(-3 / 2)), abs=1e-15)


def test_coverage_rewards_negative_zero_and_subnormal_counts():
    # -0.0 counts are 0 counts: all zero -> every cluster as rare as an unvisited one, exp(0) = 1
    assert coverage_rewards([0.75], [0], [-0.0, -0.0]).item() == 6.0
    # subnormal counts keep their ratios: n_c / n_bar = 2 for the visited cluster, 0 for the other
    got = coverage_rewards([0.75, 0.75], [0, 1], [1e-323, 0.0]).tolist()
    assert got == pytest.approx([1 + 5 * math.exp(-2.0), 6.0], abs=1e-12)
    # huge counts (their mean would overflow) keep theirs too
    got = coverage_rewards([0.75], [0], [1.7e308, 1.7e308]).item()
    assert got == pytest.approx(1 + 5 * math.exp(-1.0), abs=1e-12)


def test_coverage_rewards_over_10000_clusters_and_questions():
    K = 10_000
    counts = [1.0] * K
    counts[7] = 2.0
    p = [0.75] * K
    cl = list(range(K))
    got = coverage_rewards(torch.tensor(p, dtype=torch.float64), torch.tensor(cl), torch.tensor(counts,
                                                                                                 dtype=torch.float64))
    n_bar = (K + 1) / K
    assert got[0].item() == pytest.approx(1 + 5 * math.exp(-1 / n_bar), abs=1e-12)
    assert got[7].item() == pytest.approx(1 + 5 * math.exp(-2 / n_bar), abs=1e-12)


def test_ema_counts_from_tuples_numpy_on_300_steps():
    rng = random.Random(2600)
    for _ in range(300):
        K = rng.randint(1, 9)
        counts = [rng.uniform(0, 3) for _ in range(K)]
        visited = tuple(rng.randrange(K) for _ in range(rng.randint(0, 6)))
        gamma = rng.choice([0.99, 0.0, 1.0, rng.random()])
        for v in (visited, np.array(visited, dtype=np.int64)):
            got = ema_counts(np.array(counts), v, np.float64(gamma))
            assert got.tolist() == pytest.approx(ref_ema(counts, visited, gamma), abs=1e-15)


def test_ema_counts_decay_at_10000_visits_of_one_cluster_adds_once():
    got = ema_counts([1.0, 1.0], [0] * 10_000, 0.99).tolist()
    assert got == pytest.approx([1.0, 0.99], abs=1e-15)


def test_inputs_are_not_mutated():
    counts = torch.tensor([1.0, 2.0], dtype=torch.float64)
    p = torch.tensor([0.6, 0.8], dtype=torch.float64)
    coverage_rewards(p, torch.tensor([0, 1]), counts)
    ema_counts(counts, torch.tensor([0]))
    assert counts.tolist() == [1.0, 2.0] and p.tolist() == [0.6, 0.8]


@pytest.mark.parametrize("bad", [None, "a", ["x"], (i for i in [0])])
def test_unreadable_cluster_ids_are_named(bad):
    # torch's "Could not infer dtype of generator" / "too many dimensions 'str'" named no argument
    with pytest.raises(ValueError, match="visited"):
        ema_counts([1.0, 1.0], bad)
    with pytest.raises(ValueError, match="clusters"):
        coverage_rewards([0.6], bad, [1.0])


def test_diversity_stats_of_a_generator_and_10000_questions():
    assert diversity_stats((i % 4 for i in range(8)), 4)["normalized_entropy"] == pytest.approx(1.0)
    s = diversity_stats([0] * 10_000, 128)
    assert s["active_clusters"] == 1 and s["top10_share"] == 1.0 and s["normalized_entropy"] == 0.0
    assert s["gini"] == pytest.approx(127 / 128)  # one cluster holds everything: (k - 1) / k
