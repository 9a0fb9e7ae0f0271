"""Rollout strategies: what is sampled in one GRPO step, as a small protocol the trainer drives.

A strategy gets a :class:`RolloutContext` (the engine, the processor / tokenizer, a prompt encoder, the step's
sampling parameters and seed) and the step's examples, and returns a :class:`Rollout`: the samples, flattened, with
their group ids, which of them are trained on, and one ``aux`` dict per sample that reaches the reward heads as
``ScoredSample.aux``. It never sees the trainer. It may keep state (``state_dict`` / ``load_state_dict``, saved in
checkpoints) and may react to the step's rewards (``after_rewards``: replay write-back, curriculum outcomes).

``PlainGroups`` is standard GRPO (n samples per prompt); CSRS (``mmevo.csrs.strategy``) and the self-play loops build
on :func:`sample_groups`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from mmevo.data.schema import Example
from mmevo.models.inputs import EncodedPrompt
from mmevo.rollout.base import Completion, RolloutRequest, SamplingParams


@dataclass
class Rollout:
    """One step's samples, flattened: sample i belongs to group ``group_ids[i]`` (its prompt)."""

    prompts: list[EncodedPrompt]  # per sample
    completions: list[Completion]  # per sample
    texts: list[str]  # decoded responses
    group_ids: torch.Tensor  # [B] long
    examples: list[Example]  # per sample
    trainable: torch.Tensor | None = None  # [B] bool; None = all (CSRS: re-inferences only feed rewards)
    parents: list[int] | None = None  # [B] CSRS: index of each re-inference's maternal sample, -1 for maternal ones
    aux: list[dict] | None = None  # [B] per-sample data for the reward heads (None = empty dicts)
    skipped_prompts: int = 0  # prompts of this step left out (longer than data.max_prompt_length)
    extra_metrics: dict = field(default_factory=dict)

    def __post_init__(self):
        n = len(self.completions)
        lengths = {"prompts": len(self.prompts), "texts": len(self.texts), "group_ids": len(self.group_ids),
                   "examples": len(self.examples)}
        if self.trainable is not None:
            lengths["trainable"] = len(self.trainable)
        if self.parents is not None:
            lengths["parents"] = len(self.parents)
        if self.aux is not None:
            lengths["aux"] = len(self.aux)
        bad = {k: v for k, v in lengths.items() if v != n}
        if bad:
            raise ValueError(f"Rollout: {n} completions but {bad} (every per-sample list needs one entry per sample)")

    def __len__(self) -> int:
        return len(self.completions)

    def trainable_mask(self) -> torch.Tensor:
        return self.trainable if self.trainable is not None else torch.ones(len(self), dtype=torch.bool)

    def aux_of(self, i: int) -> dict:
        return self.aux[i] if self.aux is not None else {}

    @classmethod
    def empty(cls, skipped_prompts: int = 0, extra_metrics: dict | None = None) -> "Rollout":
        return cls([], [], [], torch.zeros(0, dtype=torch.long), [], skipped_prompts=skipped_prompts,
                   extra_metrics=dict(extra_metrics or {}))


@dataclass
class RolloutContext:
    """What a strategy may use to sample one step (never the trainer)."""

    engine: Any  # a RolloutEngine (generate / sync_weights / sleep / wake / close)
    processor: Any  # HF processor (VL: has .image_processor) or tokenizer (text models)
    tokenizer: Any  # decodes token ids
    encode: Callable[[Example], EncodedPrompt]  # chat template + image processing, cached by content
    params: SamplingParams  # the run's rollout sampling parameters, seeded with ``seed``
    n: int  # samples per prompt (rollout.n)
    max_prompt_length: int  # longer prompts are left out and counted
    step: int  # the trainer's step index
    seed: int  # this step's seed (run seed, step, rank and the trainer's seed_offset)
    stop_ids: Sequence[int] = ()  # tokens that end a response (retrace strips a trailing one)
    seed_offset: int = 0  # the trainer's seed_offset (a loop's iteration / role), for draws that must not use the rank

    def decode(self, ids: Sequence[int]) -> str:
        return decode(self.tokenizer, ids)


class RolloutStrategy:
    """Base class of strategies; subclasses implement ``rollout``."""

    name = "base"

    def rollout(self, ctx: RolloutContext, examples: list[Example]) -> Rollout:
        raise NotImplementedError

    def after_rewards(self, rollout: Rollout, rewards: torch.Tensor) -> dict | None:
        """Called with the step's total rewards [B] (every sample, in rollout order); may return metrics."""
        return None

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class PlainGroups(RolloutStrategy):
    """Standard GRPO sampling: n completions per prompt, all trainable."""

    name = "plain"

    def rollout(self, ctx: RolloutContext, examples: list[Example]) -> Rollout:
        return sample_groups(ctx, examples)


def encode_within_limit(ctx: RolloutContext, examples: Sequence[Example]) -> tuple[list[EncodedPrompt], list[Example]]:
    """Encoded prompts of the examples that fit ``ctx.max_prompt_length`` (verl's filter_overlong_prompts)."""
    prompts, kept = [], []
    for ex in examples:
        p = ctx.encode(ex)
        if len(p.input_ids) <= ctx.max_prompt_length:
            prompts.append(p)
            kept.append(ex)
    return prompts, kept


def sample_groups(ctx: RolloutContext, examples: Sequence[Example], n: int | None = None,
                  params: SamplingParams | None = None, keep_kv: bool = False) -> Rollout:
    """``n`` (default ``ctx.n``) completions per example that fits the prompt limit; overlong prompts are counted.
    ``keep_kv``: the completions keep their KV caches (engines with ``supports_kv_reuse``) for re-inferences."""
    n = ctx.n if n is None else n
    prompts, kept = encode_within_limit(ctx, examples)
    skipped = len(examples) - len(kept)
    if not prompts:
        return Rollout.empty(skipped_prompts=skipped)
    outs = ctx.engine.generate([RolloutRequest(p, n=n, keep_kv=keep_kv) for p in prompts], params or ctx.params)
    if len(outs) != len(prompts):  # zip below would silently drop the prompts past the shorter list
        raise ValueError(f"engine {type(ctx.engine).__name__}.generate returned {len(outs)} completion lists for "
                         f"{len(prompts)} requests (one list per request, in order)")
    short = [i for i, comps in enumerate(outs) if len(comps) != n]
    if short:  # a smaller group would be normalised over fewer samples than rollout.n, silently
        raise ValueError(f"engine {type(ctx.engine).__name__}.generate returned {len(outs[short[0]])} completions "
                         f"for request {short[0]}, {n} were asked for")
    flat_p, flat_c, flat_e, gids = [], [], [], []
    for gi, (p, ex, comps) in enumerate(zip(prompts, kept, outs)):
        for c in comps:
            flat_p.append(p)
            flat_c.append(c)
            flat_e.append(ex)
            gids.append(gi)
    texts = [ctx.decode(c.full_ids) for c in flat_c]
    return Rollout(flat_p, flat_c, texts, torch.tensor(gids, dtype=torch.long), flat_e, skipped_prompts=skipped)


def decode(tokenizer, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=True)


def step_seed(seed: int, step: int, rank: int = 0, offset: int = 0) -> int:
    """Per-step sampling seed: reproducible, independent of how many steps ran in this process (resume), distinct per
    rank, and per ``offset`` (a loop's iteration / role), so that iterations do not repeat the same random draws."""
    return (seed * 1_000_003 + step * 7_919 + rank * 104_729 + offset * 15_485_863) % (2**31 - 1)
