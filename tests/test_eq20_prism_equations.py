"""Prism coverage reward (seed 000, "How It Works") against independent plain-Python references.

r(q) = zpd(p(q)) (1 + lambda exp(-n_c(q) / n_bar)),  zpd(p) = max(0, 1 - |p - 0.75| / 0.4) for p in [0.5, 0.9]
n_k <- gamma n_k + (1 - gamma) 1[k visited]           (lambda = 5, gamma = 0.99, counts start at alpha = 1)"""

import math
import random

import pytest
import torch

from mmevo.rewards.prism import coverage_rewards, ema_counts, zpd

TOL = 1e-12


def ref_zpd(p):
    return max(0.0, 1 - abs(p - 0.75) / 0.4) if 0.5 <= p <= 0.9 else 0.0


def ref_reward(p, cluster, counts, lam):
    n_bar = sum(counts) / len(counts)
    rarity = 1.0 if n_bar == 0 else math.exp(-counts[cluster] / n_bar)  # all counts 0: every cluster unvisited
    return ref_zpd(p) * (1 + lam * rarity)


def ref_ema(counts, visited, gamma):
    return [gamma * n + (1 - gamma) * (1.0 if k in visited else 0.0) for k, n in enumerate(counts)]


def rand_p(rng):
    return rng.choice([0.5, 0.9, 0.75, 0.0, 1.0, 0.49999, 0.90001, rng.random(), rng.randint(0, 8) / 8])


def test_zpd_matches_the_reference_on_1000_values():
    rng = random.Random(0)
    ps = [rand_p(rng) for _ in range(1000)] + [float("inf"), float("-inf"), -3.0, 7.0]
    got = zpd(torch.tensor(ps, dtype=torch.float64)).tolist()
    assert got == pytest.approx([ref_zpd(p) for p in ps], abs=TOL)
    edges = torch.tensor([0.5, 0.75, 0.9], dtype=torch.float64)
    assert zpd(edges).tolist() == pytest.approx([0.375, 1.0, 0.625], abs=TOL)


def test_coverage_rewards_match_the_reference_on_600_random_batches():
    rng = random.Random(1)
    for case in range(600):
        K, B = rng.choice([1, 2, 8, 128]), rng.randint(1, 10)
        counts = [rng.choice([1.0, 0.0, rng.random(), 50 * rng.random(), 1e-300]) for _ in range(K)]
        if rng.random() < 0.05:
            counts = [0.0] * K
        p = [rand_p(rng) for _ in range(B)]
        cl = [rng.randrange(K) for _ in range(B)]
        valid = [rng.random() < 0.9 for _ in range(B)]
        lam = rng.choice([5.0, 0.0, 1.0, 20 * rng.random()])
        got = coverage_rewards(torch.tensor(p, dtype=torch.float64), torch.tensor(cl),
                               torch.tensor(counts, dtype=torch.float64), lam, torch.tensor(valid)).tolist()
        want = [ref_reward(pi, c, counts, lam) if v else -1.0 for pi, c, v in zip(p, cl, valid)]
        for g, w in zip(got, want):
            assert abs(g - w) <= 1e-12 * max(1.0, abs(w)), (case, p, cl, counts, lam, got, want)


def test_coverage_rewards_hand_numbers():
    # K = 2 counts (1, 3): n_bar = 2; cluster 0: exp(-1/2), cluster 1: exp(-3/2); p = 0.75: zpd 1
    got = coverage_rewards(torch.tensor([0.75, 0.75], dtype=torch.float64), torch.tensor([0, 1]),
                           torch.tensor([1.0, 3.0], dtype=torch.float64)).tolist()
    assert got == pytest.approx([1 + 5 * math.exp(-0.5), 1 + 5 * math.exp(-1.5)], abs=TOL)
    # uniform counts (the start): every cluster exp(-1)
    got = coverage_rewards(torch.tensor([0.5], dtype=torch.float64), torch.tensor([3]),
                           torch.ones(128, dtype=torch.float64))
    assert got.tolist() == pytest.approx([0.375 * (1 + 5 * math.exp(-1))], abs=TOL)


def test_ema_counts_match_the_reference_on_600_random_steps():
    rng = random.Random(2)
    for case in range(600):
        K = rng.choice([1, 3, 128])
        counts = [rng.choice([1.0, 0.0, rng.random() * 10]) for _ in range(K)]
        visited = [rng.randrange(K) for _ in range(rng.choice([0, 1, 5, 200]))]
        gamma = rng.choice([0.99, 0.0, 1.0, rng.random()])
        got = ema_counts(torch.tensor(counts, dtype=torch.float64), torch.tensor(visited, dtype=torch.long), gamma)
        assert got.tolist() == pytest.approx(ref_ema(counts, set(visited), gamma), abs=TOL), case


def test_coverage_rewards_do_not_mutate_and_name_bad_input():
    counts = torch.ones(4, dtype=torch.float64)
    coverage_rewards(torch.tensor([0.6]), torch.tensor([1]), counts)
    assert counts.tolist() == [1.0] * 4
    with pytest.raises(ValueError, match="cluster id 4"):
        coverage_rewards(torch.tensor([0.6]), torch.tensor([4]), counts)
    with pytest.raises(ValueError, match="counts"):
        coverage_rewards(torch.tensor([0.6]), torch.tensor([0]), torch.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match=r"p\[0\]"):
        coverage_rewards(torch.tensor([float("nan")]), torch.tensor([0]), counts)
    with pytest.raises(ValueError, match="clusters"):
        coverage_rewards(torch.tensor([0.6, 0.7]), torch.tensor([0]), counts)
    with pytest.raises(ValueError, match="valid"):
        coverage_rewards(torch.tensor([0.6]), torch.tensor([0]), counts, valid=torch.tensor([True, False]))
    with pytest.raises(ValueError, match="gamma"):
        ema_counts(counts, torch.tensor([0]), float("nan"))
    with pytest.raises(ValueError, match="visited"):
        ema_counts(counts, torch.tensor([9]))


@pytest.mark.parametrize("bad", [None, "0.6"])
def test_zpd_names_an_agreement_that_is_no_number(bad):
    # None escaped as torch's TypeError "must be real number, not NoneType"
    with pytest.raises(ValueError, match="p must be a floating-point tensor"):
        zpd(bad)


def ref_diversity_stats(ids, k):
    counts = [ids.count(j) for j in range(k)]
    n = len(ids)
    if n == 0:
        return {"questions": 0, "active_clusters": 0, "normalized_entropy": 0.0, "gini": 0.0, "top10_share": 0.0}
    entropy = -sum(c / n * math.log(c / n) for c in counts if c)
    gini = sum(abs(a - b) for a in counts for b in counts) / (2 * k * n)  # mean absolute difference / (2 mean)
    top = sorted(counts, reverse=True)[: math.ceil(k / 10)]
    return {"questions": n, "active_clusters": sum(c > 0 for c in counts),
            "normalized_entropy": entropy / math.log(k) if k > 1 else 0.0, "gini": gini, "top10_share": sum(top) / n}


def test_diversity_stats_match_the_reference_on_500_random_sets():
    from mmevo.rewards.prism import diversity_stats

    rng = random.Random(6)
    for case in range(500):
        k = rng.choice([1, 2, 10, 128])
        skew = rng.random() * 3
        ids = [min(k - 1, int(k * rng.random() ** (1 + skew))) for _ in range(rng.choice([0, 1, 7, 300]))]
        got, want = diversity_stats(ids, k), ref_diversity_stats(ids, k)
        assert got.keys() == want.keys()
        for key in want:
            assert got[key] == pytest.approx(want[key], abs=1e-12), (case, key)


def test_nearest_centroid_matches_a_brute_force_reference_on_500_random_questions():
    # c(q) = the nearest centroid to embed(q); on unit rows (the sentence embedder's and build-clusters' centroids)
    # nearest in Euclidean distance is highest cosine similarity
    from mmevo.prism.clusters import assign_clusters

    rng = random.Random(8)

    def unit(v):
        n = math.sqrt(sum(x * x for x in v))
        return [x / n for x in v]

    d, k = 8, 16
    centroids = [unit([rng.gauss(0, 1) for _ in range(d)]) for _ in range(k)]
    emb = [unit([rng.gauss(0, 1) for _ in range(d)]) for _ in range(500)]
    got = assign_clusters(torch.tensor(emb, dtype=torch.float64), torch.tensor(centroids, dtype=torch.float64)).tolist()
    want = [min(range(k), key=lambda j: sum((a - b) ** 2 for a, b in zip(e, centroids[j]))) for e in emb]
    assert got == want
