"""Prism coverage reward (mmevo.rewards.prism): hand-computed values, band edges, EMA forms, the head's state."""

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from mmevo.rewards.heads import HEADS, RewardMixer, ScoredSample
from mmevo.rewards.prism import PrismCoverageHead, coverage_rewards, diversity_stats, ema_counts, zpd

E = math.exp


# -- zpd ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_zpd_hand_values_and_band_edges(dtype):
    p = torch.tensor([0.0, 0.49, 0.4999, 0.5, 0.6, 0.75, 0.875, 0.9, 0.9001, 0.95, 1.0], dtype=dtype)
    want = [0.0, 0.0, 0.0, 0.375, 0.625, 1.0, 0.6875, 0.625, 0.0, 0.0, 0.0]
    got = zpd(p)
    assert got.dtype == dtype
    assert got.tolist() == pytest.approx(want, abs=1e-6)
    # the 8-sample solver's possible agreements: 4/8 .. 7/8 are in the band, 8/8 is not
    eighths = zpd(torch.arange(9, dtype=dtype) / 8).tolist()
    assert eighths == pytest.approx([0, 0, 0, 0, 0.375, 0.6875, 1.0, 0.6875, 0.0], abs=1e-6)


def test_zpd_rejects_integer_input_and_nan():
    with pytest.raises(ValueError):
        zpd(torch.tensor([1, 0]))
    with pytest.raises(ValueError, match=r"p\[1\] is NaN"):  # scored 0, silently
        zpd(torch.tensor([0.7, float("nan")]))


# -- coverage_rewards --------------------------------------------------------------------------------------------
def test_coverage_rewards_hand_computed():
    counts = torch.tensor([1.0, 3.0, 2.0, 2.0], dtype=torch.float64)  # mean 2
    p = torch.tensor([0.75, 0.75, 0.5, 0.3, 0.9, 0.0], dtype=torch.float64)
    clusters = torch.tensor([0, 1, 1, 0, 2, 3])
    want = [1.0 * (1 + 5 * E(-0.5)), 1.0 * (1 + 5 * E(-1.5)), 0.375 * (1 + 5 * E(-1.5)), 0.0,
            0.625 * (1 + 5 * E(-1.0)), 0.0]  # the last: a question the solver never answered (p = 0)
    assert coverage_rewards(p, clusters, counts).tolist() == pytest.approx(want, rel=1e-12)
    # lam scales only the bonus; lam = 0 leaves the quality term alone
    assert coverage_rewards(p, clusters, counts, lam=0.0).tolist() == pytest.approx(
        [1.0, 1.0, 0.375, 0.0, 0.625, 0.0])
    assert coverage_rewards(p, clusters, counts, lam=2.0)[0].item() == pytest.approx(1 + 2 * E(-0.5))


def test_coverage_rewards_invalid_is_minus_one_whatever_else():
    counts = torch.ones(3)
    p = torch.tensor([0.75, float("nan"), 0.75, 0.0])
    clusters = torch.tensor([2, -1, 7, 0])  # invalid rows may carry any cluster id
    valid = torch.tensor([True, False, False, True])
    r = coverage_rewards(p, clusters, counts, valid=valid)
    assert r.tolist() == pytest.approx([1 + 5 * E(-1.0), -1.0, -1.0, 0.0], rel=1e-6)
    with pytest.raises(ValueError, match="outside"):
        coverage_rewards(p, clusters, counts)  # the same ids on valid rows are an error


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_coverage_rewards_keeps_dtype_and_mutates_nothing(dtype):
    p = torch.tensor([0.6, 0.8, 0.3], dtype=dtype)
    clusters = torch.tensor([0, 1, 1])
    counts = torch.tensor([0.5, 1.5], dtype=torch.float64)
    valid = torch.tensor([True, True, False])
    copies = [t.clone() for t in (p, clusters, counts, valid)]
    r = coverage_rewards(p, clusters, counts, valid=valid)
    assert r.dtype == dtype and r.shape == (3,)
    for a, b in zip((p, clusters, counts, valid), copies):
        assert torch.equal(a, b)
    assert r.float().tolist() == pytest.approx([0.625 * (1 + 5 * E(-0.5)), 0.875 * (1 + 5 * E(-1.5)), -1.0],
                                               rel=1e-2 if dtype == torch.bfloat16 else 1e-6)


def test_coverage_rewards_all_counts_zero_makes_every_cluster_rare():
    # gamma = 0 after a step that visited nothing leaves every count at 0: rarity exp(0) = 1, reward zpd · (1 + lam)
    p = torch.tensor([0.75, 0.5, 0.9, 0.3], dtype=torch.float64)
    r = coverage_rewards(p, torch.tensor([0, 1, 2, 0]), torch.zeros(3, dtype=torch.float64))
    assert r.tolist() == pytest.approx([6.0, 0.375 * 6, 0.625 * 6, 0.0], rel=1e-12)
    assert coverage_rewards(p[:1], torch.tensor([1]), torch.zeros(3), lam=2.0).tolist() == pytest.approx([3.0])
    for bad in ([1.0, -0.5, 1.0], [1.0, float("nan"), 1.0], [1.0, float("inf"), 1.0]):
        with pytest.raises(ValueError, match="counts must be finite and >= 0"):
            coverage_rewards(p[:1], torch.tensor([0]), torch.tensor(bad))


# -- ema_counts --------------------------------------------------------------------------------------------------
def test_ema_indicator_counts_duplicates_once_and_per_question_differs():
    counts = torch.tensor([2.0, 1.0, 0.5], dtype=torch.float64)
    visited = torch.tensor([0, 0, 2])
    ind = ema_counts(counts, visited, gamma=0.9)
    assert ind.tolist() == pytest.approx([0.9 * 2 + 0.1, 0.9 * 1, 0.9 * 0.5 + 0.1])
    per_q = ema_counts(counts, visited, gamma=0.9, mode="per_question")
    assert per_q.tolist() == pytest.approx([0.9 * 2 + 0.2, 0.9 * 1, 0.9 * 0.5 + 0.1])
    assert ind[0] != per_q[0]
    assert counts.tolist() == [2.0, 1.0, 0.5]  # input not mutated
    # nothing visited: every cluster decays
    assert ema_counts(counts, torch.tensor([], dtype=torch.long), gamma=0.9).tolist() == pytest.approx([1.8, 0.9, 0.45])
    # counts start at 1 and a visited cluster stays there under the indicator form
    assert ema_counts(torch.ones(3), torch.tensor([1, 1, 1]), gamma=0.99).tolist() == pytest.approx([0.99, 1.0, 0.99])


def test_ema_counts_dtype_and_errors():
    c32 = torch.ones(4, dtype=torch.float32)
    assert ema_counts(c32, torch.tensor([3])).dtype == torch.float32
    with pytest.raises(ValueError, match="mode"):
        ema_counts(c32, torch.tensor([0]), mode="both")
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        ema_counts(c32, torch.tensor([4]))
    with pytest.raises(ValueError):
        ema_counts(c32, torch.tensor([0.0]))


# -- diversity_stats ---------------------------------------------------------------------------------------------
def test_diversity_uniform_all_in_one_and_empty():
    u = diversity_stats([0, 1, 2, 3, 3, 2, 1, 0], 4)
    assert u == {"questions": 8, "active_clusters": 4, "normalized_entropy": pytest.approx(1.0), "gini": 0.0,
                 "top10_share": pytest.approx(0.25)}
    one = diversity_stats([2] * 5, 4)
    assert one["active_clusters"] == 1 and one["normalized_entropy"] == 0.0
    assert one["gini"] == pytest.approx(0.75) and one["top10_share"] == 1.0  # gini of one full cluster: (k-1)/k
    assert diversity_stats([], 4) == {"questions": 0, "active_clusters": 0, "normalized_entropy": 0.0, "gini": 0.0,
                                      "top10_share": 0.0}
    for v in u.values():
        assert type(v) in (int, float)


def test_diversity_hand_made_counts():
    s = diversity_stats(torch.tensor([0, 0, 0, 1]), 10)  # counts [3, 1, 0 x 8]
    assert s["active_clusters"] == 2
    assert s["normalized_entropy"] == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)) / math.log(10))
    assert s["gini"] == pytest.approx(68 / 80)  # sum |x_i - x_j| = 2·(2 + 8·3 + 8·1) = 68; 2·k·sum x = 80
    assert s["top10_share"] == pytest.approx(0.75)  # ceil(10/10) = 1 cluster
    t = diversity_stats([0] * 5 + [1] * 3 + [2, 3], 11)  # ceil(11/10) = 2 largest clusters hold 8 of 10
    assert t["top10_share"] == pytest.approx(0.8)
    with pytest.raises(ValueError):
        diversity_stats([0, 4], 4)


# -- the head ----------------------------------------------------------------------------------------------------
def _samples(rows, role="maternal"):
    return [ScoredSample(response="q", group_id=i // 2, gold=None, choices=None, role=role, aux=dict(a))
            for i, a in enumerate(rows)]


def test_head_reads_rarity_before_update_and_updates_after():
    head = PrismCoverageHead(centroids="", k=2, gamma=0.5)
    batch = _samples([{"question": "a", "p": 0.75, "cluster": 0}, {"question": "b", "p": 0.75, "cluster": 0}])
    r, m = head.score(batch)
    assert r.dtype == torch.float32
    assert r.tolist() == pytest.approx([1 + 5 * E(-1.0)] * 2)  # counts [1, 1] before this batch
    assert head.counts.tolist() == pytest.approx([1.0, 0.5])  # indicator: 0.5·1 + 0.5, duplicates once
    r2, _ = head.score(batch)  # the next batch sees the updated counts: n0 = 1, mean 0.75
    assert r2.tolist() == pytest.approx([1 + 5 * E(-1 / 0.75)] * 2, rel=1e-6)
    assert m["valid_frac"] == 1.0 and m["distinct_clusters"] == 1 and m["zpd_mean"] == 1.0


def test_head_with_gamma_0_after_an_empty_step():
    head = PrismCoverageHead(centroids="", k=4, gamma=0.0)  # no memory: the counts are the last step's visits
    _, m = head.score(_samples([{"question": "a", "p": 0.3, "cluster": 0}]))  # out of band: visits nothing
    assert head.counts.tolist() == [0.0] * 4 and m["counts_max_over_mean"] == 1.0
    r, _ = head.score(_samples([{"question": "b", "p": 0.75, "cluster": 0}]))  # used to raise (mean count 0)
    assert r.tolist() == pytest.approx([6.0])  # 1 · (1 + 5 · exp(0))
    assert head.counts.tolist() == [1.0, 0.0, 0.0, 0.0]
    r, _ = head.score(_samples([{"question": "c", "p": 0.75, "cluster": c} for c in (0, 1)]))
    assert r.tolist() == pytest.approx([1 + 5 * E(-4.0), 6.0], rel=1e-6)  # mean 0.25: n0 / mean = 4, n1 = 0
    head.score([])  # a rank without samples: every count decays to 0 again
    assert head.counts.tolist() == [0.0] * 4
    r, _ = head.score(_samples([{"question": "d", "p": 0.5, "cluster": 3}, {"question": None}]))
    assert r.tolist() == pytest.approx([0.375 * 6, -1.0])


def test_head_default_visit_matches_the_config():
    from mmevo.config import PrismConfig

    head = PrismCoverageHead(centroids="", k=3, gamma=0.9)
    assert head.visit == PrismConfig().visit == "band"
    # only in-band questions (p in [0.5, 0.9]) visit: p = 0.3 and p = 0.95 leave their clusters to decay
    head.score(_samples([{"question": q, "p": p, "cluster": c} for q, p, c in (("a", 0.3, 0), ("b", 0.95, 1),
                                                                                ("c", 0.6, 2))]))
    assert head.counts.tolist() == pytest.approx([0.9, 0.9, 1.0])


def test_head_bad_input_invalid_unanswered_and_per_question_mode():
    rows = [{"question": None, "p": 0.8}, {"question": "   ", "p": 0.8, "cluster": 1},  # empty / unparseable
            {"question": "ok", "p": 0.8, "cluster": 1, "valid": False},
            {"question": "never answered", "p": None, "cluster": 2},  # the solver gave no answer: p = 0
            {"question": "x", "p": 0.75, "cluster": 1}, {"question": "y", "p": 0.75, "cluster": 1}]
    # visit="valid" (the head's default is "band"): the unanswered question (p = 0) visits its cluster too
    head = PrismCoverageHead(centroids="", k=3, gamma=0.9, ema_mode="per_question", visit="valid")
    r, m = head.score(_samples(rows))
    assert r.tolist() == pytest.approx([-1, -1, -1, 0, 1 + 5 * E(-1), 1 + 5 * E(-1)], rel=1e-6)
    # invalid samples visit nothing; the unanswered one visits cluster 2; cluster 1 twice (per question)
    assert head.counts.tolist() == pytest.approx([0.9, 0.9 + 0.2, 0.9 + 0.1])
    assert m["valid_frac"] == pytest.approx(0.5) and m["unanswered_frac"] == pytest.approx(1 / 3)
    band = PrismCoverageHead(centroids="", k=3, gamma=0.9, visit="band")
    band.score(_samples(rows))
    assert band.counts.tolist() == pytest.approx([0.9, 1.0, 0.9])  # only p in [0.5, 0.9] counts
    with pytest.raises(ValueError, match=r"aux\['p'\]"):
        head.score(_samples([{"question": "no p", "cluster": 0}]))
    with pytest.raises(ValueError, match="outside"):
        head.score(_samples([{"question": "q", "p": 0.5, "cluster": 3}]))
    with pytest.raises(ValueError, match="centroids"):  # no cluster in aux and no centroids to assign one
        head.score(_samples([{"question": "q", "p": 0.5}]))


def test_head_state_round_trip_and_handover(tmp_path):
    a = PrismCoverageHead(centroids="", k=4, gamma=0.9)
    batch = _samples([{"question": "q", "p": 0.6, "cluster": c} for c in (0, 0, 3)])
    a.score(batch)
    a.score(_samples([{"question": "q", "p": 0.6, "cluster": 1}]))
    state = a.state_dict()
    assert state["steps"] == 2 and len(state["counts"]) == 4
    b = PrismCoverageHead(centroids="", k=4, gamma=0.9)  # e.g. the next iteration's trainer
    b.load_state_dict(state)
    assert torch.equal(a.counts, b.counts) and b.steps == 2
    assert torch.equal(a.score(batch)[0], b.score(batch)[0])
    torch.save(b.state_dict(), tmp_path / "state.pt")  # as in a checkpoint's trainer_state.pt
    c = PrismCoverageHead(centroids="", k=4, gamma=0.9)
    c.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=False))
    assert torch.equal(c.counts, b.counts)
    with pytest.raises(ValueError, match="clusters"):
        PrismCoverageHead(centroids="", k=5).load_state_dict(state)


def test_head_is_registered_and_mixes():
    assert HEADS["prism_coverage"] is PrismCoverageHead
    mixer = RewardMixer({"prism_coverage": 1.0}, {"prism_coverage": {"centroids": "", "k": 2, "lam": 1.0}})
    total, metrics = mixer(_samples([{"question": "q", "p": 0.75, "cluster": 1}, {"question": None}]))
    assert total.tolist() == pytest.approx([1 + E(-1), -1.0])
    assert "reward/prism_coverage/valid_frac" in metrics
    state = mixer.state_dict()
    assert state["prism_coverage"]["steps"] == 1
    with pytest.raises(ValueError, match="ema_mode"):
        RewardMixer({"prism_coverage": 1.0}, {"prism_coverage": {"centroids": "", "k": 2, "ema_mode": "x"}})


def test_head_needs_centroids_or_k(tmp_path):
    with pytest.raises(FileNotFoundError, match="mmevo prism build-clusters"):
        PrismCoverageHead(centroids=str(tmp_path / "centroids.npy"))
    with pytest.raises(ValueError, match="k"):
        PrismCoverageHead(centroids="")


_RANK_SCRIPT = textwrap.dedent("""
    import json, sys, torch, torch.distributed as dist
    rank, init = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    from mmevo.rewards.heads import ScoredSample
    from mmevo.rewards.prism import PrismCoverageHead
    head = PrismCoverageHead(centroids="", k=4, gamma=0.5, ema_mode=sys.argv[3])
    mine = [[0, 0], [2, 0]][rank]  # rank 0 visits cluster 0 twice, rank 1 clusters 2 and 0
    head.score([ScoredSample("q", 0, None, None, aux={"question": "q", "p": 0.75, "cluster": c}) for c in mine])
    print(json.dumps(head.counts.tolist()))
    dist.destroy_process_group()
""")


@pytest.mark.parametrize("mode,want", [("indicator", [1.0, 0.5, 1.0, 0.5]), ("per_question", [2.0, 0.5, 1.0, 0.5])])
def test_head_counts_agree_across_data_parallel_ranks(tmp_path, mode, want):
    init = f"file://{tmp_path / 'pg'}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [subprocess.Popen([sys.executable, "-c", _RANK_SCRIPT, str(r), init, mode], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
    counts = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    # both ranks hold the counts of the union of visits: indicator 0.5·1 + 0.5 for clusters 0 and 2;
    # per question cluster 0 was visited 3 times over the two ranks
    assert counts[0] == pytest.approx(want) and counts[1] == pytest.approx(want)


def test_a_rank_without_samples_still_makes_the_collective_call_of_the_coverage_head():
    """RewardMixer.empty_step (called by the trainer on a rank whose rollout is empty) scores an empty batch with the
    heads that make one collective call per step, so the counts still decay and no all-reduce is left waiting."""
    from mmevo.rewards.heads import RewardMixer

    mixer = RewardMixer({"prism_coverage": 1.0, "majority": 0.5},
                        {"prism_coverage": {"centroids": "", "k": 4, "gamma": 0.5}})
    head = mixer.heads["prism_coverage"]
    mixer.empty_step()
    assert head.steps == 1 and torch.allclose(head.counts, torch.full((4,), 0.5, dtype=head.counts.dtype))
