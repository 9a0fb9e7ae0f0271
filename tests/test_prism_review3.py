"""Third review of Prism (seed 000): the diversity table's Gini at large K, hostile aux values and non-finite settings of
the coverage head, and sentence-transformers directories the embedder used to embed silently wrong. Expected numbers
are derived by hand in the comments beside them.
"""

import json
import math
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mmevo.config import ConfigError, PrismConfig
from mmevo.prism.clusters import SentenceEmbedder, check_prism_config, pooling_mode
from mmevo.rewards.heads import ScoredSample
from mmevo.rewards.prism import PrismCoverageHead, diversity_stats

E = math.exp


# -- diversity table: Gini = sum_i sum_j |x_i - x_j| / (2 k sum x) ------------------------------------------------
def test_diversity_gini_is_exact_and_linear_time_in_k():
    # ids [0, 0, 1], k = 4: x = [2, 1, 0, 0]; ordered pairs |2-1|·2 + |2-0|·4 + |1-0|·4 = 2 + 8 + 4 = 14; 14 / 24
    assert diversity_stats([0, 0, 1], 4)["gini"] == pytest.approx(7 / 12, rel=1e-12)
    # all questions in one cluster of k = 5: x = [3, 0, 0, 0, 0]: 2·4·3 / (2·5·3) = 4/5
    assert diversity_stats([2, 2, 2], 5)["gini"] == pytest.approx(4 / 5, rel=1e-12)
    # 64 clusters with one question each out of k = 8000: ordered pairs 2·64·(k - 64) / (2·k·64) = (k - 64) / k.
    # The [k, k] matrix of differences took ~1.7 s and 1 GB here (and the head computes the table every step)
    t0 = time.perf_counter()
    s = diversity_stats(list(range(64)), 8000)
    assert time.perf_counter() - t0 < 0.5
    assert s["gini"] == pytest.approx((8000 - 64) / 8000, rel=1e-12)
    assert s["active_clusters"] == 64 and s["normalized_entropy"] == pytest.approx(math.log(64) / math.log(8000))


# -- the coverage head: aux values it used to misread ------------------------------------------------------------
def _sample(aux):
    return ScoredSample("r", 0, None, None, aux=aux)


def test_head_refuses_non_integer_cluster_ids_and_a_bool_p():
    head = PrismCoverageHead(centroids="", k=4)
    # a valid id: first step, counts all 1, n̄ = 1: zpd(.75) · (1 + 5 e^-1)
    r, _ = head.score([_sample({"question": "q", "p": 0.75, "cluster": np.int64(2)})])
    assert r.tolist() == pytest.approx([1 + 5 * E(-1)], rel=1e-6)
    # 1.7 was read as cluster 1 and True as cluster 1 (int()), silently rewarded and counted
    for bad in (1.7, True, 2.0, "2"):
        with pytest.raises(ValueError, match=r"sample 0: aux\['cluster'\].*not an integer"):
            PrismCoverageHead(centroids="", k=4).score([_sample({"question": "q", "p": 0.75, "cluster": bad})])
    # p = True was read as p = 1 (reward 0, no visit) without a word
    for bad in (True, np.bool_(False)):
        with pytest.raises(ValueError, match=r"sample 0: aux\['p'\].*not a number"):
            PrismCoverageHead(centroids="", k=4).score([_sample({"question": "q", "p": bad, "cluster": 1})])


@pytest.mark.parametrize("kw", [{"lam": float("nan")}, {"lam": float("inf")}, {"init_count": float("inf")}])
def test_head_and_config_refuse_non_finite_lam_and_init_count(kw):
    # accepted before: lam = nan / inf gave nan / inf rewards at the first step, init_count = inf an error there
    with pytest.raises(ValueError, match="finite"):
        PrismCoverageHead(centroids="", k=4, **kw)
    cfg = SimpleNamespace(prism=PrismConfig(**kw), data=SimpleNamespace(format="generic"))
    with pytest.raises(ConfigError, match="finite"):
        check_prism_config(cfg)


# -- sentence-transformers directories ---------------------------------------------------------------------------
def _st_dir(path, modules, pooling):
    path.mkdir(parents=True)
    (path / "modules.json").write_text(json.dumps(modules))
    (path / "1_Pooling").mkdir()
    (path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return path


ST = "sentence_transformers.models."
MODULES = [{"idx": 0, "name": "0", "path": "", "type": ST + "Transformer"},
           {"idx": 1, "name": "1", "path": "1_Pooling", "type": ST + "Pooling"},
           {"idx": 2, "name": "2", "path": "2_Normalize", "type": ST + "Normalize"}]


def test_pooling_mode_refuses_what_it_cannot_reproduce(tmp_path):
    mean = {"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}
    assert pooling_mode(_st_dir(tmp_path / "ok", MODULES, mean)) == "mean"
    # sum / sqrt(len) is the mean times sqrt(len) > 0: the same unit vector
    assert pooling_mode(_st_dir(tmp_path / "sqrt", MODULES, {"pooling_mode_mean_sqrt_len_tokens": True})) == "mean"
    # a Dense projection after pooling was skipped: the raw hidden size embedded instead of the model's output
    dense = MODULES[:2] + [{"idx": 2, "name": "2", "path": "2_Dense", "type": ST + "Dense"}]
    with pytest.raises(ValueError, match="Dense.*not supported"):
        pooling_mode(_st_dir(tmp_path / "dense", dense, mean))
    # weighted-mean pooling was read as plain mean; cls + mean (concatenated) as cls
    with pytest.raises(ValueError, match="weightedmean"):
        pooling_mode(_st_dir(tmp_path / "wm", MODULES, {"pooling_mode_weightedmean_tokens": True}))
    with pytest.raises(ValueError, match="several pooling modes"):
        pooling_mode(_st_dir(tmp_path / "two", MODULES, {"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True}))


def test_sentence_embedder_truncates_where_the_model_says(tmp_path):
    """Last-token pooling of a 300-token text must pool its last token; a fixed 256-token cut pooled token 255."""
    from transformers import BertConfig, BertModel, BertTokenizer

    d = _st_dir(tmp_path / "tiny-st", MODULES, {"pooling_mode_lasttoken": True})
    (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 512, "do_lower_case": False}))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]
    BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(d)
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=16, max_position_embeddings=512)).eval()
    model.save_pretrained(d)
    text = " ".join(["a", "b", "c"] * 100)  # 300 words: 302 tokens with [CLS] and [SEP]
    emb = SentenceEmbedder(str(d))
    assert emb.max_length == 512
    ids = torch.tensor([[2] + [5, 6, 7] * 100 + [3]])
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[0]  # [302, 8]
    got = emb.embed([text])[0]
    assert torch.allclose(got, torch.nn.functional.normalize(hidden[-1], dim=0), atol=1e-5)
    # an explicit max_length still wins; a directory without the file keeps 256
    assert SentenceEmbedder(str(d), max_length=64).max_length == 64
    (d / "sentence_bert_config.json").unlink()
    assert SentenceEmbedder(str(d)).max_length == 256


def test_loop_refuses_a_centroids_file_with_another_k_than_prism_k(tmp_path):
    """prism.k=8 against a 3-centroid file ran with 3 clusters without a word; now the loop's assigner names both."""
    import numpy as np
    import pytest

    from mmevo.evolve.prism import ClusterAssigner
    from mmevo.prism.clusters import save_centroids

    path = tmp_path / "centroids.npy"
    save_centroids(path, np.eye(3, 5, dtype=np.float32), {"embedder": "all-MiniLM-L6-v2", "seed": 0})
    with pytest.raises(ValueError, match=r"prism.k=8, but .* holds 3 centroids: set prism.k=3"):
        ClusterAssigner(str(path), "", k=8)
    assert ClusterAssigner(str(path), "", k=3).k == 3 and ClusterAssigner(str(path), "").k == 3
