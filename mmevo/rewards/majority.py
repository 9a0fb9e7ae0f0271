"""Label-free majority-vote reward (MM-UPT): the group's most common answer is the pseudo label."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

from mmevo.validation import as_index

from .answers import _no_choices, extract_answer, group_answer_keys, refuse_text_for_list

__all__ = ["majority_vote_rewards"]


def majority_vote_rewards(
    responses: Sequence[str],
    group_ids: Sequence[int],
    choices: Sequence[Sequence[str] | None] | None = None,
) -> tuple[torch.Tensor, dict]:
    """Reward 1.0 for samples whose answer matches their group's modal answer, else 0.0.

    Groups are identified by id, not position, so interleaved / non-contiguous batches work.
    Equivalent spellings share a vote (via `group_answer_keys`). Ties go to the answer that
    appears first, which keeps the reward deterministic for a given batch order. Samples
    without an answer never vote and never score. Returns (float32 [B], metrics) where
    metrics holds "pseudo_labels" {group_id: first raw answer of the mode, or None},
    "modal_share", "no_answer_frac" and "distinct_answers_mean".
    """
    refuse_text_for_list("responses", responses)
    refuse_text_for_list("group_ids", group_ids)
    for name, value in (("responses", responses), ("group_ids", group_ids)):
        if not hasattr(value, "__len__"):  # None / a number: len() raised a TypeError naming neither argument
            raise ValueError(f"{name} must be a list with one entry per sample, got {value!r:.60}")
    n = len(responses)
    if choices is None:
        choices = [None] * n
    if len(group_ids) != n or len(choices) != n:
        raise ValueError(f"length mismatch: {n} responses, {len(group_ids)} group ids, {len(choices)} choices")
    for i, c in enumerate(choices):
        if isinstance(c, (str, bytes)):  # one flat option list given for all samples: its letters became the options
            raise ValueError(f"choices[{i}] must be the sample's list of options or None, got the text {c!r}")

    answers = [extract_answer(r, c) for r, c in zip(responses, choices)]
    members: dict[int, list[int]] = {}
    for i, g in enumerate(group_ids):
        try:  # plain ints: elements of a tensor hash by identity, which made every sample a group of its own;
            g = as_index(g)  # a bool is refused: True joined group 1 and False group 0, silently
        except TypeError:
            raise ValueError(f"group_ids[{i}] must be an integer, got {g!r}") from None
        members.setdefault(g, []).append(i)

    rewards = [0.0] * n
    pseudo: dict[int, str | None] = {}
    shares: list[float] = []
    distinct: list[int] = []
    no_answer = 0  # no key: nothing extracted, or a blank (\boxed{\,}), which never votes either
    for g, idx in members.items():
        # the group's first non-empty option list; by length, as answers.py tests it (numpy options have no truth)
        ch = next((choices[i] for i in idx if not _no_choices(choices[i])), None)
        keys = group_answer_keys([answers[i] for i in idx], ch)
        no_answer += sum(k is None for k in keys)
        counts: dict[Hashable, int] = {}
        first: dict[Hashable, int] = {}
        for pos, k in enumerate(keys):
            if k is None:
                continue
            counts[k] = counts.get(k, 0) + 1
            first.setdefault(k, pos)
        distinct.append(len(counts))
        if not counts:
            pseudo[g] = None
            shares.append(0.0)
            continue
        mode = min(counts, key=lambda k: (-counts[k], first[k]))
        pseudo[g] = answers[idx[first[mode]]]
        shares.append(counts[mode] / len(idx))
        for pos, k in enumerate(keys):
            if k == mode:
                rewards[idx[pos]] = 1.0

    n_groups = len(members)
    metrics = {
        "pseudo_labels": pseudo,
        "modal_share": sum(shares) / n_groups if n_groups else 0.0,
        "no_answer_frac": no_answer / n if n else 0.0,
        "distinct_answers_mean": sum(distinct) / n_groups if n_groups else 0.0,
    }
    return torch.tensor(rewards, dtype=torch.float32), metrics
