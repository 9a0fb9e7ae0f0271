"""Second review of Prism (seed 000): bad input gets a clear error instead of a silently wrong cluster / count, and the
loop's seeds are distinct per iteration and phase. Expected numbers are derived by hand in the comments beside them.
"""

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import mmevo.evolve.prism as loop
from mmevo.models.embedder import TextEmbedder
from mmevo.prism.clusters import SentenceEmbedder, assign_clusters, load_centroids, save_centroids
from mmevo.rewards.prism import coverage_rewards, diversity_stats, ema_counts

NAN, INF = float("nan"), float("inf")


# -- c(q) = nearest centroid to embed(q) ---------------------------------------------------------------------------
def test_assign_clusters_refuses_nan_inf_and_zero_rows_instead_of_picking_cluster_0():
    c = torch.eye(3)
    # valid rows: [0, 0, 1] is centroid 2; [1, 1, 0] ties centroids 0 and 1 (cos 1/sqrt2 each): the first, 0
    assert assign_clusters(torch.tensor([[0.0, 0.0, 1.0], [1.0, 1.0, 0.0]]), c).tolist() == [2, 0]
    # a NaN embedding used to land in cluster 0 (argmax of a NaN row), a zero one too (all similarities 0)
    for row in ([NAN, 0.0, 0.0], [INF, 0.0, 0.0], [0.0, 0.0, 0.0]):
        with pytest.raises(ValueError, match="embeddings row 1"):
            assign_clusters(torch.tensor([[0.0, 0.0, 1.0], row]), c)
    # a NaN centroid won every argmax: [0, 0, 1] went to the NaN centroid 0 instead of its exact match 1
    with pytest.raises(ValueError, match="centroids row 0"):
        assign_clusters(torch.tensor([[0.0, 0.0, 1.0]]), torch.tensor([[NAN, 0.0, 0.0], [0.0, 0.0, 1.0]]))
    with pytest.raises(ValueError, match="centroids row 1"):
        assign_clusters(torch.tensor([[-1.0, 0.0, 0.0]]), torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="K = 0"):
        assign_clusters(torch.tensor([[1.0, 0.0]]), torch.zeros(0, 2))


@pytest.mark.parametrize("bad", [NAN, INF, 0.0])
def test_load_centroids_refuses_a_non_finite_or_zero_row(tmp_path, bad):
    c = np.eye(3, 4, dtype=np.float32)
    c[1] = bad
    path = tmp_path / "centroids.npy"
    save_centroids(path, c, {"embedder": "all-MiniLM-L6-v2"})
    with pytest.raises(ValueError, match="non-finite or an all-zero row"):
        load_centroids(path)
    save_centroids(path, np.eye(3, 4, dtype=np.float32) * 2, {"embedder": "all-MiniLM-L6-v2"})
    assert load_centroids(path)[0].tolist() == np.eye(3, 4).tolist()  # rows scaled to unit length


# -- r(q) = zpd(p) · (1 + λ · exp(-n_c / n̄)),  n_k <- γ·n_k + (1 - γ)·1[k visited] -----------------------------------
def test_coverage_rewards_refuses_bool_cluster_ids():
    # integer ids: counts [1, 2], mean 1.5; p = .75 (zpd 1) in cluster 1: 1 + 5·e^{-2/1.5}
    got = coverage_rewards(torch.tensor([0.75], dtype=torch.float64), torch.tensor([1]), torch.tensor([1.0, 2.0]))
    assert got.tolist() == pytest.approx([1 + 5 * math.exp(-4 / 3)], rel=1e-12)
    # a bool mask given as the ids used to read as cluster 1 silently
    with pytest.raises(ValueError, match="clusters must be an integer"):
        coverage_rewards([0.75], [True], [1.0, 2.0])
    with pytest.raises(ValueError, match="clusters must be an integer"):
        coverage_rewards(torch.tensor([0.75]), torch.tensor([True]), torch.tensor([1.0, 2.0]))


def test_ema_counts_refuses_nan_inf_and_negative_counts():
    # valid: gamma .5, [1, 3], cluster 1 visited: [.5, 1.5 + .5] = [.5, 2]
    assert ema_counts(torch.tensor([1.0, 3.0]), [1], gamma=0.5).tolist() == [0.5, 2.0]
    for bad in ([1.0, NAN], [1.0, INF], [1.0, -3.0]):  # used to decay into [1, nan] / [1, -2.97] silently
        with pytest.raises(ValueError, match="counts must be finite and >= 0"):
            ema_counts(torch.tensor(bad), [0])


def test_diversity_stats_refuses_float_ids_instead_of_truncating_them():
    # ids [0, 1, 1], k = 3: counts x = [1, 2, 0], shares 1/3, 2/3
    # entropy -(1/3 ln 1/3 + 2/3 ln 2/3) / ln 3; Gini sum|x_i - x_j| / (2·k·sum x) = 2·(1 + 1 + 2) / 18 = 4/9;
    # top ceil(3/10) = 1 cluster: 2/3
    want_h = -(1 / 3 * math.log(1 / 3) + 2 / 3 * math.log(2 / 3)) / math.log(3)
    for ids in ([0, 1, 1], np.array([0, 1, 1], dtype=np.int32), torch.tensor([0, 1, 1])):
        s = diversity_stats(ids, 3)
        assert s["questions"] == 3 and s["active_clusters"] == 2
        assert s["normalized_entropy"] == pytest.approx(want_h, rel=1e-12)
        assert s["gini"] == pytest.approx(4 / 9, rel=1e-12) and s["top10_share"] == pytest.approx(2 / 3, rel=1e-12)
    assert diversity_stats([], 3)["questions"] == 0
    for bad in ([0.5, 1.7], np.array([0.0, 1.0]), [True, False]):  # [0.5, 1.7] used to count as [0, 1]
        with pytest.raises(ValueError, match="cluster ids must be integers"):
            diversity_stats(bad, 3)


# -- embed(q) -------------------------------------------------------------------------------------------------------
class _Batch(dict):
    def to(self, device):
        return self


def _fake_embedder(cls, pooling=None):
    """An embedder without weights: every token's hidden state is [1, 2, 2] (unit after pooling: [1, 2, 2] / 3)."""
    emb = object.__new__(cls)

    def tokenizer(texts, **kw):
        n = len(texts)
        return _Batch(input_ids=torch.ones(n, 2, dtype=torch.long), attention_mask=torch.ones(n, 2, dtype=torch.long))

    emb.tokenizer = tokenizer
    emb.model = lambda input_ids, attention_mask: SimpleNamespace(
        last_hidden_state=torch.tensor([1.0, 2.0, 2.0]).expand(input_ids.shape[0], 2, 3))
    emb.device, emb.batch_size, emb.max_length, emb.dim = "cpu", 4, 8, 3
    if pooling:
        emb.pooling = pooling
    return emb


@pytest.mark.parametrize("cls,pooling", [(TextEmbedder, None), (SentenceEmbedder, "mean"),
                                         (SentenceEmbedder, "lasttoken")])
def test_embed_refuses_one_str_instead_of_embedding_its_characters(cls, pooling):
    emb = _fake_embedder(cls, pooling)
    assert emb.embed(["a question"]).tolist()[0] == pytest.approx([1 / 3, 2 / 3, 2 / 3])
    with pytest.raises(TypeError, match="list of texts"):  # used to return 10 rows, one per character
        emb.embed("a question")


# -- the loop: seeds offset per iteration and phase -----------------------------------------------------------------
def test_loop_seed_offsets_are_distinct_per_iteration_and_phase(monkeypatch, tmp_path):
    import mmevo.recipes as recipes

    offsets = {}

    class Trainer:
        step_idx = 0

        def __init__(self):
            self.rewards = SimpleNamespace(heads={"prism_coverage": SimpleNamespace(state_dict=lambda: {})})

        def train(self):
            offsets[self.key] = self.seed_offset
            return []

        def logged_history(self):
            return []

        def export(self, path):
            return path

        def close(self):
            pass

    current = {}

    def build_trainer(*a, **kw):
        tr = Trainer()
        tr.key = current["key"]
        return tr

    class Dummy:
        def __init__(self, *a, **kw):
            pass

        def close(self):
            pass

        def remove_stale_records(self, *a):  # a finished questioner's clean-up (Recorder)
            return 0

    monkeypatch.setattr(recipes, "build_trainer", build_trainer)
    monkeypatch.setattr(recipes, "load_policy", lambda *a, **kw: None)
    monkeypatch.setattr(loop, "role_config", lambda *a, **kw: None)
    import mmevo.grpo.trainer as grpo_trainer

    monkeypatch.setattr(grpo_trainer, "default_strategy", lambda cfg: None)  # the solver's (wrapped for its records)
    for name in ("FrozenRole", "ClusterAssigner", "Recorder"):
        monkeypatch.setattr(loop, name, Dummy)
    cfg = SimpleNamespace(prism=SimpleNamespace(centroids="c.npy", embedder="", embed_batch=4, embed_device="cpu", k=0,
                                                solver_samples=2, questioner_prompts=2))
    pool = tmp_path / "pool.jsonl"
    pool.write_text(json.dumps({"question": "1 + 1?", "cluster": 0, "p": 0.75, "silver": "2"}) + "\n")
    q_index, s_index = loop.PHASES.index("questioner"), loop.PHASES.index("solver")
    for t in (1, 2, 3):
        current["key"] = ("questioner", t)
        loop.run_questioner(cfg, t, q_index, tmp_path, "s", {})
        current["key"] = ("solver", t)
        loop.run_solver(cfg, t, s_index, tmp_path, "s", pool)
    assert len(offsets) == 6
    # 2t + role gave the solver of iteration 1 and the questioner of iteration 2 the same offset (4)
    assert len(set(offsets.values())) == 6, offsets
