"""Verifiable accuracy reward, used when a gold answer exists."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .answers import answers_equivalent, extract_answer, refuse_text_for_choices, refuse_text_for_list

__all__ = ["accuracy_rewards"]


def accuracy_rewards(
    responses: Sequence[str],
    golds: Sequence[str | None],
    choices: Sequence[Sequence[str] | None] | None = None,
) -> torch.Tensor:
    """1.0 where the extracted answer is equivalent to the gold, else 0.0 (float32 [B]).

    A missing gold scores 0 rather than raising, so label-free items mixed into a batch
    never earn accuracy credit by accident.
    """
    refuse_text_for_list("responses", responses)
    refuse_text_for_list("golds", golds)
    n = len(responses)
    if choices is None:
        choices = [None] * n
    if len(golds) != n or len(choices) != n:
        raise ValueError(f"length mismatch: {n} responses, {len(golds)} golds, {len(choices)} choices")
    for i, ch in enumerate(choices):  # one flat option list given for all samples: each sample's options were letters
        refuse_text_for_choices(f"choices[{i}]", ch)
    out = []
    for resp, gold, ch in zip(responses, golds, choices):
        if gold is None:
            out.append(0.0)
            continue
        pred = extract_answer(resp, ch)
        out.append(1.0 if answers_equivalent(pred, gold, ch) else 0.0)
    return torch.tensor(out, dtype=torch.float32)
