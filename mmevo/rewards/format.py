"""Format reward: did the response follow the ``<think>...</think>`` then ``\\boxed{}`` protocol?

Kept separate from correctness so the trainer can weight "parseable" and "right" apart;
a response that cannot be parsed cannot take part in a majority vote either.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import torch

from .answers import _clean, _extract_boxed_strict

__all__ = ["format_reward", "format_rewards"]

_LAYOUT_RE = re.compile(r"\s*<think>(.*)</think>(.*)", re.DOTALL)


def format_reward(text: str) -> float:
    """1.0 iff: optional whitespace, exactly one think block, then a final part holding a
    non-empty ``\\boxed{...}``; else 0.0."""
    if not isinstance(text, str):
        return 0.0
    if text.count("<think>") != 1 or text.count("</think>") != 1:
        return 0.0
    m = _LAYOUT_RE.fullmatch(text)
    if m is None:
        return 0.0
    # empty as the answer extractor reads it: a box holding only math delimiters or a LaTeX space ("\boxed{\ }",
    # "\boxed{\(\)}") is no answer to any accuracy or vote head, so no format credit either
    if _clean(_extract_boxed_strict(m.group(2))) is None:
        return 0.0
    return 1.0


def format_rewards(texts: Sequence[str]) -> torch.Tensor:
    """`format_reward` for a batch, as float32 [B]."""
    return torch.tensor([format_reward(t) for t in texts], dtype=torch.float32)
