"""Equation vectors, round 22: Prism's coverage reward run as the head runs it, step after step, against a plain-Python
reference of the seed's loop ("How It Works": rewards from the counts before the step, then
n_k <- gamma n_k + (1 - gamma) 1[k visited] for every k, counts starting at smoothing_alpha = 1)."""

import math
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mmevo.rewards.prism import PrismCoverageHead, coverage_rewards, diversity_stats, ema_counts, zpd


def ref_zpd(p):
    return max(0.0, 1 - abs(p - 0.75) / 0.4) if 0.5 <= p <= 0.9 else 0.0


def ref_reward(p, cluster, counts, lam):
    n_bar = sum(counts) / len(counts)
    rarity = 1.0 if n_bar == 0 else math.exp(-counts[cluster] / n_bar)
    return ref_zpd(p) * (1 + lam * rarity)


class RefLoop:
    """The seed's questioner step: reward each valid question, then the EMA over the clusters its in-band questions
    visited (p(q) in [0.5, 0.9], the seed's "For q with p(q) in [0.5, 0.9]")."""

    def __init__(self, k, lam, gamma, init=1.0):
        self.counts, self.lam, self.gamma = [init] * k, lam, gamma

    def step(self, rows):  # rows: (valid, p, cluster, maternal)
        out = [ref_reward(p, c, self.counts, self.lam) if ok else -1.0 for ok, p, c, _ in rows]
        visited = {c for ok, p, c, m in rows if ok and m and 0.5 <= p <= 0.9}
        self.counts = [self.gamma * n + (1 - self.gamma) * (k in visited) for k, n in enumerate(self.counts)]
        return out


def sample(valid, p, cluster, maternal):
    aux = {"question": "q?" if valid else "", "p": p, "cluster": cluster}
    return SimpleNamespace(aux=aux, role="maternal" if maternal else "paternal")


def test_head_matches_the_seed_loop_over_300_random_steps():
    rng = random.Random(2022)
    for run in range(15):
        k, lam, gamma = rng.choice([1, 2, 5, 16]), rng.choice([5.0, 0.0, 1.5]), rng.choice([0.99, 0.5, 0.0, 1.0])
        head, ref = PrismCoverageHead(centroids="", k=k, lam=lam, gamma=gamma), RefLoop(k, lam, gamma)
        for step in range(20):
            rows = [(rng.random() < 0.85, rng.choice([0.5, 0.9, 0.75, 0.49, 0.91, 1.0, 0.0, rng.random()]),
                     rng.randrange(k), rng.random() < 0.8) for _ in range(rng.randint(1, 12))]
            got, _ = head.score([sample(*r) for r in rows])
            want = ref.step(rows)
            # the head returns float32 rewards: compare with float32 rounding of the exact value
            assert got.tolist() == pytest.approx(want, rel=1e-6, abs=1e-7), (run, step)
            assert head.counts.tolist() == pytest.approx(ref.counts, abs=1e-12), (run, step)


def test_head_hand_numbers_two_steps():
    # k = 2, lambda 5, gamma 0.5, counts [1, 1]. Step 1: q in cluster 0 at p 0.75: 1 * (1 + 5 e^-1); the p = 0.95 one
    # in cluster 1 is outside the band: reward 0 and no visit. Counts -> [1, 0.5]; n_bar = 0.75.
    head = PrismCoverageHead(centroids="", k=2, lam=5.0, gamma=0.5)
    r, _ = head.score([sample(True, 0.75, 0, True), sample(True, 0.95, 1, True)])
    assert r.tolist() == pytest.approx([1 + 5 * math.exp(-1), 0.0], rel=1e-7)
    assert head.counts.tolist() == [1.0, 0.5]
    # step 2: cluster 1 at p 0.5 (zpd 0.375): 0.375 (1 + 5 e^(-0.5 / 0.75)); cluster 0 at p 0.9 (zpd 0.625)
    r, _ = head.score([sample(True, 0.5, 1, True), sample(True, 0.9, 0, True), sample(False, 0.8, 0, True)])
    assert r.tolist() == pytest.approx([0.375 * (1 + 5 * math.exp(-0.5 / 0.75)),
                                        0.625 * (1 + 5 * math.exp(-1 / 0.75)), -1.0], rel=1e-7)
    assert head.counts.tolist() == [1.0, 0.75]  # both visited: 0.5 n + 0.5 (1 -> 1, 0.5 -> 0.75)


def test_coverage_edges_one_cluster_all_in_one_cluster_and_ties():
    # one cluster: n_c / n_bar = 1 whatever the count, so every in-band question gets zpd (1 + lam / e)
    for count in (1.0, 1e-300, 1e300, 0.0):
        r = coverage_rewards(torch.tensor([0.75], dtype=torch.float64), torch.tensor([0]),
                             torch.tensor([count], dtype=torch.float64))
        assert r.item() == pytest.approx(1 + 5 * (math.exp(-1) if count else 1.0), abs=1e-12)
    # every question in one cluster: equal rewards (a tie), ordered only by zpd
    p = torch.tensor([0.6, 0.75, 0.9, 0.5], dtype=torch.float64)
    r = coverage_rewards(p, torch.tensor([2, 2, 2, 2]), torch.tensor([1.0, 3.0, 0.5], dtype=torch.float64))
    rar = 1 + 5 * math.exp(-0.5 / 1.5)
    assert r.tolist() == pytest.approx([ref_zpd(x) * rar for x in p.tolist()], abs=1e-12)
    # empty batch: empty rewards; the counts still decay by gamma with no visits
    assert coverage_rewards(torch.zeros(0, dtype=torch.float64), torch.zeros(0, dtype=torch.long),
                            torch.ones(3, dtype=torch.float64)).shape == (0,)
    assert ema_counts(torch.ones(3, dtype=torch.float64), torch.zeros(0, dtype=torch.long), 0.99).tolist() == \
        pytest.approx([0.99] * 3, abs=1e-15)


def test_zpd_band_edges_in_every_float_dtype():
    # the band is closed: p exactly 0.5 and 0.9 (as each dtype rounds them) score; the next value outside scores 0
    for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        lo, hi = torch.tensor(0.5, dtype=dtype), torch.tensor(0.9, dtype=dtype)
        below = torch.nextafter(lo, torch.tensor(0.0, dtype=dtype)) if dtype != torch.bfloat16 else lo - 2 ** -9
        got = zpd(torch.stack([lo, hi, below])).double().tolist()
        want = [ref_zpd(float(lo)), ref_zpd(float(hi)), 0.0]
        assert got == pytest.approx(want, rel=2 ** -7 if dtype in (torch.float16, torch.bfloat16) else 1e-6), dtype
        assert got[0] > 0 and got[1] > 0 and got[2] == 0.0


def ref_stats(ids, k):
    x = [ids.count(j) for j in range(k)]
    n = sum(x)
    if n == 0:
        return dict(active=0, ent=0.0, gini=0.0, top=0.0)
    ent = -sum(v / n * math.log(v / n) for v in x if v)
    gini = sum(abs(a - b) for a in x for b in x) / (2 * k * n)
    top = sum(sorted(x, reverse=True)[:math.ceil(k / 10)]) / n
    return dict(active=sum(v > 0 for v in x), ent=ent / math.log(k) if k > 1 else 0.0, gini=gini, top=top)


def test_diversity_stats_match_the_seed_table_definitions_on_300_sets():
    rng = random.Random(11)
    for case in range(300):
        k = rng.choice([1, 2, 10, 11, 128])
        ids = [rng.randrange(rng.choice([1, k])) for _ in range(rng.randint(0, 60))]
        got, want = diversity_stats(ids, k), ref_stats(ids, k)
        assert got["active_clusters"] == want["active"] and got["questions"] == len(ids), case
        assert got["normalized_entropy"] == pytest.approx(want["ent"], abs=1e-12), case
        assert got["gini"] == pytest.approx(want["gini"], abs=1e-12), case
        assert got["top10_share"] == pytest.approx(want["top"], abs=1e-12), case


@pytest.mark.parametrize("flag", [0, 1, "no", 0.0])
def test_head_names_a_valid_flag_that_is_no_bool(flag):
    # only a bool False marked a sample invalid: valid=0 or "no" scored the question as a valid one, silently
    head = PrismCoverageHead(centroids="", k=3)
    s = sample(True, 0.75, 1, True)
    s.aux["valid"] = flag
    with pytest.raises(ValueError, match=r"sample 0: aux\['valid'\]"):
        head.score([s])
    assert head.counts.tolist() == [1.0, 1.0, 1.0] and head.steps == 0  # nothing updated


def test_head_takes_bool_flags_of_every_kind():
    head = PrismCoverageHead(centroids="", k=3)
    rows = [sample(True, 0.75, 1, True) for _ in range(4)]
    for s, flag in zip(rows, (False, torch.tensor(False), np.False_, None)):
        s.aux["valid"] = flag
    r, _ = head.score(rows)
    assert r.tolist()[:3] == [-1.0, -1.0, -1.0] and r.tolist()[3] > 0
