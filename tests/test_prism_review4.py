"""Fourth review of Prism (seed 000): the reward's n_c / n̄ at huge and subnormal counts, numpy / tensor flags in a
sample's aux, and the nearest-centroid assignment at magnitudes and precisions float32 normalisation got wrong.
Expected numbers are derived by hand in the comments beside them.
"""

import json
import math

import numpy as np
import pytest
import torch

from mmevo.prism.clusters import assign_clusters, load_centroids
from mmevo.rewards.heads import ScoredSample
from mmevo.rewards.prism import PrismCoverageHead, coverage_rewards

E = math.exp
R1 = 1 + 5 * E(-1)  # zpd(0.75) = 1, a cluster at the mean count: 1 + 5 e^-1 = 2.8393972058572117
R2 = 1 + 5 * E(-2)  # a cluster at twice the mean count: 1 + 5 e^-2 = 1.6766764161830636


# -- r(q) = zpd(p) (1 + lam exp(-n_c / n̄)): the ratio n_c / n̄ at any scale of the counts ----------------
def test_coverage_reward_of_huge_counts_is_their_ratio():
    # counts [1e308, 1e308]: n_c / n̄ = 1 for both (their sum overflowed to inf, n̄ = inf, every rarity exp(0) = 1: 6.0)
    r = coverage_rewards([0.75, 0.75], [0, 1], [1e308, 1e308])
    assert r.tolist() == pytest.approx([R1, R1], rel=1e-12)
    # [1.7e308, 0]: n̄ = 8.5e307, cluster 0 at 2 n̄, cluster 1 at 0 (rarity 1: 1 + 5 = 6)
    r = coverage_rewards([0.75, 0.75], [0, 1], [1.7e308, 0.0])
    assert r.tolist() == pytest.approx([R2, 6.0], rel=1e-12)


def test_coverage_reward_of_subnormal_counts_is_their_ratio():
    # [5e-324, 0] (the smallest float64): n̄ = 2.5e-324 rounded to 0, so the visited cluster read as unvisited (6.0)
    r = coverage_rewards([0.75, 0.75], [0, 1], [5e-324, 0.0])
    assert r.tolist() == pytest.approx([R2, 6.0], rel=1e-12)
    # the same in float32 ([1e-45, 0]; p float32 keeps the work in float32)
    r = coverage_rewards(torch.tensor([0.75, 0.75]), [0, 1], torch.tensor([1e-45, 0.0]))
    assert r.dtype == torch.float32 and r.tolist() == pytest.approx([R2, 6.0], rel=1e-6)


def test_head_with_a_huge_init_count_rewards_as_with_one():
    # init_count 1e308 (finite, accepted) and K = 2: every n_c = n̄, so step 1 gives 1 + 5 e^-1 as with init_count 1
    head = PrismCoverageHead(centroids="", k=2, init_count=1e308)
    r, m = head.score([ScoredSample("r", 0, None, None, aux={"question": "q", "p": 0.75, "cluster": 0})])
    assert r.tolist() == pytest.approx([R1], rel=1e-6)
    # counts after: [0.99e308 + 0.01, 0.99e308], max / mean = 1 (their sum overflowed: max / inf = 0)
    assert m["counts_max_over_mean"] == pytest.approx(1.0, rel=1e-12)


# -- the head's aux: numpy / torch flags and ids -------------------------------------------------------------------
def _score(aux, k=4):
    head = PrismCoverageHead(centroids="", k=k)
    r, _ = head.score([ScoredSample("r", 0, None, None, aux=aux)])
    return r.tolist(), head.counts.tolist()


@pytest.mark.parametrize("flag", [np.False_, torch.tensor(False), np.array(False)])
def test_head_numpy_or_tensor_false_valid_marks_the_sample_invalid(flag):
    # aux["valid"] = False of numpy / torch ("is not False" held for them): reward -1, no visit, all counts 1 -> 0.99
    rewards, counts = _score({"question": "q", "p": 0.75, "cluster": 1, "valid": flag})
    assert rewards == [-1.0]
    assert counts == pytest.approx([0.99] * 4, rel=1e-12)


@pytest.mark.parametrize("flag", [torch.tensor(True), np.array(True)])
def test_head_tensor_bool_p_is_refused(flag):
    # a 0-dim bool tensor / array read as p = 1.0 (reward 0), as a Python / numpy bool already is refused
    with pytest.raises(ValueError, match=r"aux\['p'\].*not a number"):
        _score({"question": "q", "p": flag, "cluster": 1})


@pytest.mark.parametrize("cid", [torch.tensor(1), np.array(1)])
def test_head_zero_dim_integer_cluster_id_is_read(cid):
    # cluster 1 of K = 4 at the initial counts [1, 1, 1, 1]: 1 + 5 e^-1; counts after: 0.99 · 1 + 0.01 for cluster 1
    rewards, counts = _score({"question": "q", "p": 0.75, "cluster": cid})
    assert rewards == pytest.approx([R1], rel=1e-6)
    assert counts == pytest.approx([0.99, 1.0, 0.99, 0.99], rel=1e-12)


def test_head_zero_dim_float_cluster_id_is_still_refused():
    with pytest.raises(ValueError, match="not an integer cluster id"):
        _score({"question": "q", "p": 0.75, "cluster": torch.tensor(1.0)})


# -- c(q): nearest centroid by cosine at any magnitude and in the inputs' precision ---------------------------------
C2 = [[0.0, 1.0], [1.0, 0.0]]  # cluster 0 = the y axis, cluster 1 = the x axis


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1e30, 1e-30, 1e-40])
def test_assign_embeddings_of_any_magnitude(scale, dtype):
    # e = s·(2, 1): cos to x = 2/sqrt(5) > cos to y = 1/sqrt(5) -> 1 whatever s. The norm overflowed at 1e30 (every
    # similarity 0 -> cluster 0) and underflowed to 0 at 1e-30 (refused as an all-zero row)
    e = torch.tensor([[2.0 * scale, 1.0 * scale], [1.0 * scale, 2.0 * scale]], dtype=dtype)
    assert assign_clusters(e, torch.tensor(C2, dtype=dtype)).tolist() == [1, 0]


def test_assign_centroids_of_any_magnitude():
    e = torch.tensor([[2.0, 1.0]])
    assert assign_clusters(e, torch.tensor([[0.0, 3e38], [3e38, 0.0]])).tolist() == [1]
    assert assign_clusters(e, torch.tensor([[0.0, 1e-39], [1e-39, 0.0]])).tolist() == [1]
    # a centroid of norm 1e-13 (below normalize's eps 1e-12 it stayed at norm 0.1): e = (1, 0.5) has cos 0.894 to the
    # x axis (cluster 0) and 0.447 to the y axis (cluster 1)
    assert assign_clusters(torch.tensor([[1.0, 0.5]]), torch.tensor([[1e-13, 0.0], [0.0, 1.0]])).tolist() == [0]


def test_assign_float64_inputs_in_float64():
    # e = (1, 1e-4, 0); c0 = (1, 0, 0): cos = 1/sqrt(1 + 1e-8); c1 = (1, 1e-9, 0): cos larger by ~1e-13 (e·c1 gains
    # 1e-13, |c1| grows by 5e-19). float32 rounded both to 1.0 and took the first
    e = np.array([[1.0, 1e-4, 0.0]])
    c = np.array([[1.0, 0.0, 0.0], [1.0, 1e-9, 0.0]])
    assert assign_clusters(e, c).tolist() == [1]
    assert assign_clusters(e.tolist(), c.tolist()).tolist() == [1]  # Python floats are float64 too


def test_assign_still_refuses_zero_and_non_finite_rows():
    with pytest.raises(ValueError, match="embeddings row 1"):
        assign_clusters(torch.tensor([[1.0, 0.0], [0.0, 0.0]]), torch.tensor(C2))
    with pytest.raises(ValueError, match="centroids row 0"):
        assign_clusters(torch.tensor([[1.0, 0.0]]), torch.tensor([[float("nan"), 1.0], [1.0, 0.0]]))


@pytest.mark.parametrize("arr", [np.array([[1e300, 2e300], [3.0, 1.0]]),  # float32 cast made row 0 inf -> NaN
                                 np.array([[1e-30, 2e-30], [3.0, 1.0]], dtype=np.float32),  # refused as all zero
                                 np.array([[1e-13, 2e-13], [3.0, 1.0]], dtype=np.float32)])  # came back at norm 0.22
def test_load_centroids_gives_unit_rows_at_any_magnitude(tmp_path, arr):
    path = tmp_path / "centroids.npy"
    np.save(path, arr)
    (tmp_path / "centroids.json").write_text(json.dumps({"embedder": "all-MiniLM-L6-v2", "dim": 2, "k": 2}))
    c, _ = load_centroids(path)
    # (1, 2) / sqrt(5) and (3, 1) / sqrt(10)
    assert c.tolist()[0] == pytest.approx([1 / math.sqrt(5), 2 / math.sqrt(5)], rel=1e-6)
    assert c.tolist()[1] == pytest.approx([3 / math.sqrt(10), 1 / math.sqrt(10)], rel=1e-6)
