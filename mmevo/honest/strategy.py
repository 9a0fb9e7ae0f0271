"""HONEST rollout strategy: plain group sampling (or any inner strategy) plus per-sample parse results in ``aux``, and
after the rewards the CPR replay write-back and the SMC curriculum outcomes.

The aux contract (every sample of a ``HonestStrategy`` rollout; heads see it as ``ScoredSample.aux``)::

    correct      bool | None   the strictly parsed answer (``protocol.parse_strict``) is equivalent to the example's
                               gold (``rewards.answers.answers_equivalent``); False when there is gold but no such
                               answer (wrong, abstained, rejected, no answer); None when there is no gold to grade
                               against (label-free: ``data.hide_labels``, or an example without an answer or with a
                               blank one: "", whitespace, zero-width characters)
    confidence   float | None  the stated <confidence> of a graded response (a real answer with a valid
                               probability), else None
    abstain      bool          the response abstained
    well_formed  bool          a graded answer or a clean abstain (the protocol's core holds)

Aux entries the inner strategy set are kept (these four keys win).

``after_rewards`` aggregates per prompt group (``replay.group_outcomes``: majority correctness over the trainable
samples, a tie is not a majority; mean confidence over the samples that stated one), then

- writes each group into the replay buffer (``replay_write_back``; groups without gold or confidence are skipped);
- records each group as one curriculum episode at its example's (domain, difficulty), except replayed prompts (the
  controller measures its own draws) and groups without gold (``curriculum_write_back``);

and returns their metrics plus the prompt source's (``difficulty/<domain>/ceiling``, replay buffer health): the
trainer logs what ``after_rewards`` returns, and a prompt source has no other way into ``metrics.jsonl``.

``HindsightSlotDraw`` (the inner strategy of legacy HCR runs, ``grpo.trainer.default_strategy``) is the seed's
hindsight step "with epsilon-probability per step" (2.3; ``--hindsight-prob``, section 7: ``honest.hindsight_prob``):
each GRPO step offers the ``<hindsight>`` slot (the legacy protocol prompt) with that probability, else every prompt
of the step uses the protocol without the slot (``protocol.CORE_SYSTEM_PROMPT``). The draw is a pure function of the
trainer seed, its ``seed_offset`` (a loop's iteration / role) and the step (``hindsight_slot_offered``): a resumed run,
and every rank, draws the same, and each iteration of a loop draws afresh. Each sample's
aux gets ``hindsight_offered`` (the ``honest_hindsight`` head pays 0 where it is False) and the step logs
``honest/hindsight_offered`` (1 or 0).
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import torch

from mmevo.data.schema import Example
from mmevo.honest.curriculum import PROMOTE, DifficultyController
from mmevo.honest.replay import REPLAY_FLAG, GroupOutcome, ReplayBuffer, group_outcomes, replay_write_back
from mmevo.rollout.strategy import PlainGroups, Rollout, RolloutContext, RolloutStrategy
from mmevo.validation import is_real_number

__all__ = ["HonestStrategy", "honest_aux", "curriculum_write_back", "HindsightSlotDraw", "hindsight_slot_offered",
           "HINDSIGHT_OFFERED", "OFFERED_METRIC"]

HINDSIGHT_OFFERED = "hindsight_offered"  # aux key: the sample's prompt offered the <hindsight> slot
OFFERED_METRIC = "honest/hindsight_offered"  # per step: 1.0 when its prompts offered the slot, else 0.0


def honest_aux(text: str, example: Example, use_gold: bool = True) -> dict:
    """The aux dict of one response to ``example`` (see the module docstring)."""
    from mmevo.honest.protocol import parse_strict
    from mmevo.rewards.answers import answers_equivalent
    from mmevo.rewards.honest import has_gold_answer

    p = parse_strict(text if isinstance(text, str) else "")
    gold = example.answer if use_gold and has_gold_answer(example.answer) else None  # "" is no gold either
    correct = None if gold is None else bool(p.answered and answers_equivalent(p.answer, gold, example.choices))
    return {"correct": correct, "confidence": p.confidence if p.graded else None, "abstain": p.abstain,
            "well_formed": p.well_formed}


def curriculum_write_back(controller: DifficultyController, rollout: Rollout, outcomes: list[GroupOutcome]) -> dict:
    """Record each graded, non-replayed group whose example has a domain of ``controller`` and a difficulty."""
    recorded = skipped = promoted = demoted = 0
    for o in outcomes:
        meta = rollout.examples[o.first].meta or {}
        if o.correct is None or meta.get(REPLAY_FLAG) or meta.get("domain") not in controller.ceilings \
                or "difficulty" not in meta:
            skipped += 1
            continue
        change = controller.record(meta["domain"], int(meta["difficulty"]), o.correct)
        recorded += 1
        promoted += change == PROMOTE
        demoted += change is not None and change != PROMOTE
    return {"curriculum/recorded": float(recorded), "curriculum/skipped": float(skipped),
            "curriculum/promoted_now": float(promoted), "curriculum/demoted_now": float(demoted)}


class HonestStrategy(RolloutStrategy):
    """``inner`` (default plain groups) + the aux contract; replay write-back into ``buffer`` and curriculum
    outcomes into ``controller`` (either may be None); ``metrics_from``: an object whose ``metrics()`` joins the
    step's metrics (the prompt source). Neither the buffer nor the controller is in this strategy's state: they are
    checkpointed by the prompt source that reads them (``ReplayMixSource``, ``CurriculumSource``)."""

    name = "honest"

    def __init__(self, inner: RolloutStrategy | None = None, buffer: ReplayBuffer | None = None,
                 controller: DifficultyController | None = None, metrics_from: Any = None, use_gold: bool = True):
        self.inner = inner if inner is not None else PlainGroups()
        self.buffer, self.controller, self.metrics_from, self.use_gold = buffer, controller, metrics_from, use_gold
        self.rounds = 0  # after_rewards calls (checkpointed)

    def rollout(self, ctx: RolloutContext, examples: list[Example]) -> Rollout:
        ro = self.inner.rollout(ctx, examples)
        ro.aux = [{**ro.aux_of(i), **honest_aux(ro.texts[i], ro.examples[i], self.use_gold)} for i in range(len(ro))]
        return ro

    def after_rewards(self, rollout: Rollout, rewards: torch.Tensor) -> dict:
        self.rounds += 1
        metrics = self.inner.after_rewards(rollout, rewards) or {}
        outcomes = group_outcomes(rollout.group_ids, [rollout.aux_of(i) for i in range(len(rollout))],
                                  rollout.trainable_mask())
        graded = [o for o in outcomes if o.correct is not None]
        if graded:
            metrics["honest/group_majority_correct"] = sum(o.correct for o in graded) / len(graded)
        if self.buffer is not None:
            metrics.update(replay_write_back(self.buffer, rollout, outcomes))
            metrics.update({f"replay/{k}": float(v) for k, v in self.buffer.snapshot().items() if k != "capacity"})
        if self.controller is not None:
            metrics.update(curriculum_write_back(self.controller, rollout, outcomes))
            metrics.update(self.controller.metrics())
        if callable(getattr(self.metrics_from, "metrics", None)):
            metrics.update(self.metrics_from.metrics())
        return metrics

    def state_dict(self) -> dict:
        return {"inner": self.inner.state_dict(), "rounds": self.rounds}

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state.get("inner") or {})
        self.rounds = int(state.get("rounds", 0))


def hindsight_slot_offered(prob: float, seed: int, step: int, offset: int = 0) -> bool:
    """Whether GRPO step ``step`` of a run seeded ``seed`` offers the hindsight slot: True with probability ``prob``,
    from a generator seeded by (seed, offset, step) alone (not by how many steps this process ran, nor by the rank).

    ``offset`` is the trainer's ``seed_offset``, which a loop sets per iteration / role so that they do not repeat
    the same random draws (``rollout.strategy.step_seed``): without it every iteration of a loop would offer the
    slot on the same steps. Offset 0 keeps the stream of a run without one (the draws of earlier runs, resumes)."""
    if not is_real_number(prob) or not 0.0 <= prob <= 1.0:  # NaN offered the slot on no step, silently
        raise ValueError(f"hindsight slot probability must be a number in [0, 1], got {prob!r}")
    if prob >= 1.0:
        return True
    if prob <= 0.0:
        return False
    key = f"honest-hindsight-slot/{seed}/{step}" + (f"/offset{offset}" if offset else "")
    return random.Random(key).random() < prob


class HindsightSlotDraw(RolloutStrategy):
    """``inner`` on prompts that offer the legacy ``<hindsight>`` slot on a share ``prob`` of the steps, the protocol
    without it on the others (see the module docstring). It needs the run's encoder to be a ``PromptCache`` of the
    legacy protocol prompt (``resolve_honest_config`` refuses a custom one); the prompts without the slot come from a
    second cache of the same kind. The draw needs no state: ``state_dict`` is the inner strategy's, unchanged."""

    name = "hindsight_slot"

    def __init__(self, inner: RolloutStrategy, prob: float, seed: int):
        if not is_real_number(prob) or not 0.0 <= prob <= 1.0:  # True was read as 1
            raise ValueError(f"hindsight slot probability must be a number in [0, 1], got {prob!r}")
        self.inner, self.prob, self.seed = inner, float(prob), int(seed)
        self._without: tuple[Any, Any] | None = None  # (the run's encoder, its sibling without the slot)

    def _encoder_without_slot(self, encode):
        from mmevo.honest.protocol import CORE_SYSTEM_PROMPT, LEGACY_SYSTEM_PROMPT

        if self._without is None or self._without[0] is not encode:
            if getattr(encode, "system_prompt", None) != LEGACY_SYSTEM_PROMPT or \
                    not callable(getattr(encode, "with_system_prompt", None)):
                raise ValueError("honest.hindsight_prob < 1 needs the run's prompts encoded with the HONEST legacy "
                                 "protocol prompt (data.system_prompt=honest) by a PromptCache, to drop the "
                                 "<hindsight> slot on the steps that do not offer it")
            self._without = (encode, encode.with_system_prompt(CORE_SYSTEM_PROMPT))
        return self._without[1]

    def rollout(self, ctx: RolloutContext, examples: list[Example]) -> Rollout:
        offered = hindsight_slot_offered(self.prob, self.seed, ctx.step, ctx.seed_offset)
        if not offered:
            ctx = dataclasses.replace(ctx, encode=self._encoder_without_slot(ctx.encode))
        ro = self.inner.rollout(ctx, examples)
        ro.aux = [{**ro.aux_of(i), HINDSIGHT_OFFERED: offered} for i in range(len(ro))]
        ro.extra_metrics[OFFERED_METRIC] = float(offered)
        return ro

    def after_rewards(self, rollout: Rollout, rewards: torch.Tensor) -> dict | None:
        return self.inner.after_rewards(rollout, rewards)

    def state_dict(self) -> dict:
        return self.inner.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state)
