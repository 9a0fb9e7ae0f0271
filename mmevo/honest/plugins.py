"""The HONEST plug-ins of one run from its config: ``build_honest_plugins(cfg, train_examples) -> (strategy, source)``.

    strategy = HonestStrategy(the config's strategy: plain groups or CSRS; + replay write-back, curriculum outcomes)
    source   = CurriculumSource(train pool)   if honest.smc_enabled    else TaskSampler(train) (None: no train set)
    source   = ReplayMixSource(source, buffer) if honest.replay_enabled

Pass both to ``recipes.build_trainer(cfg, policy, strategy=strategy, prompt_source=source)``. The replay buffer and
the difficulty controller are shared by the strategy (writes) and the source (reads) and checkpointed with the
source. Gold answers grade the rollouts for write-back and curriculum unless ``data.hide_labels`` (then nothing is
written or recorded: HONEST's calibration needs gold).
"""

from __future__ import annotations

from collections.abc import Sequence

from mmevo.data.prompts import EpochSampler
from mmevo.data.schema import Example

__all__ = ["check_plugin_config", "build_honest_plugins", "TaskSampler"]


def _contradicts_its_expression(ex: Example) -> bool:
    """A task row (its meta has an expression) whose stated answer is not the verifier's re-derivation of it."""
    from mmevo.honest.tasks import recompute_answer

    meta = ex.meta or {}
    if "expression" not in meta:  # no task behind it (a plain question): nothing to check the answer against
        return False
    try:
        return recompute_answer(meta) != ex.answer
    except ValueError:  # an expression the verifier cannot evaluate re-derives no answer either
        return True


class TaskSampler(EpochSampler):
    """The train set's ``EpochSampler`` without SMC, counting the task rows whose gold contradicts their own expression.

    With SMC the curriculum leaves such rows out (``curriculum/pool_skipped``); without it they are trained on with
    that gold, so they are counted (``honest/gold_contradicts_expression`` and the summary's ``data``), not dropped:
    the row count is what a resume checks, and the state is the plain ``EpochSampler``'s (older checkpoints load)."""

    def __init__(self, examples: Sequence[Example], seed: int):
        super().__init__(examples, seed)
        bad = [ex for ex in self.examples if _contradicts_its_expression(ex)]
        self.gold_contradicts_expression = len(bad)
        self.first_gold_contradiction = (f"id {bad[0].id!r}: answer {bad[0].answer!r}, expression "
                                         f"{bad[0].meta['expression']!r}") if bad else None

    def metrics(self) -> dict[str, float]:
        return {"honest/gold_contradicts_expression": float(self.gold_contradicts_expression)}


def check_plugin_config(h) -> None:
    """ConfigError naming the field for a bad CPR / SMC setting of the ``honest`` section ``h``."""
    from mmevo.config import ConfigError
    from mmevo.honest.mutators import MUTATORS

    if h.replay_capacity < 1 or h.replay_warmup_steps < 0:
        raise ConfigError(f"need honest.replay_capacity >= 1 and honest.replay_warmup_steps >= 0, got "
                          f"honest.replay_capacity={h.replay_capacity}, honest.replay_warmup_steps="
                          f"{h.replay_warmup_steps}")
    if not 0.0 <= h.replay_share <= 1.0:
        raise ConfigError(f"honest.replay_share={h.replay_share} must be in [0, 1]")
    if not (h.replay_alpha >= 0 and h.replay_eps >= 0):
        raise ConfigError(f"honest.replay_alpha and honest.replay_eps must be >= 0, got honest.replay_alpha="
                          f"{h.replay_alpha}, honest.replay_eps={h.replay_eps}")
    if not 1 <= h.smc_min_episodes <= h.smc_window:
        raise ConfigError(f"honest.smc_min_episodes={h.smc_min_episodes} and honest.smc_window={h.smc_window}: "
                          "need 1 <= smc_min_episodes <= smc_window")
    if not 0.0 <= h.smc_demote < h.smc_promote <= 1.0:
        raise ConfigError(f"honest.smc_demote={h.smc_demote} and honest.smc_promote={h.smc_promote}: "
                          "need 0 <= smc_demote < smc_promote <= 1")
    if h.smc_cap < h.max_difficulty:
        raise ConfigError(f"honest.smc_cap={h.smc_cap} is below the start ceiling honest.max_difficulty="
                          f"{h.max_difficulty}")
    if h.smc_cooldown < 0 or h.health_mutation_retries < 0:
        raise ConfigError(f"honest.smc_cooldown and honest.health_mutation_retries must be >= 0, got "
                          f"honest.smc_cooldown={h.smc_cooldown}, honest.health_mutation_retries="
                          f"{h.health_mutation_retries}")
    if not 0.0 <= h.smc_ceiling_share <= 1.0:
        raise ConfigError(f"honest.smc_ceiling_share={h.smc_ceiling_share} must be in [0, 1]")
    bad = [m for m in h.smc_mutators if m not in MUTATORS]
    if not h.smc_mutators or bad:
        raise ConfigError(f"honest.smc_mutators={list(h.smc_mutators)!r}: give one or more of {list(MUTATORS)}")


def build_honest_plugins(cfg, train_examples: Sequence[Example] = (), heldout=None):
    """(HonestStrategy, prompt source or None) for ``cfg``; see the module docstring. ``heldout``: a
    ``mmevo.honest.heldout.HeldoutGuard`` the curriculum draws around (the train set is the caller's to filter)."""
    from mmevo.grpo.trainer import default_strategy
    from mmevo.honest.curriculum import CurriculumSource, DifficultyController
    from mmevo.honest.replay import ReplayBuffer, ReplayMixSource
    from mmevo.honest.strategy import HonestStrategy

    h = cfg.honest
    check_plugin_config(h)
    seed = cfg.trainer.seed
    controller = None
    if h.smc_enabled:
        controller = DifficultyController(h.domains, start=h.max_difficulty, cap=h.smc_cap, window=h.smc_window,
                                          promote=h.smc_promote, demote=h.smc_demote, min_episodes=h.smc_min_episodes,
                                          cooldown=h.smc_cooldown)
        source = CurriculumSource(controller, train_examples, seed=seed * 1_000_003 + h.seed,
                                  min_difficulty=h.min_difficulty, ceiling_share=h.smc_ceiling_share,
                                  max_retries=h.health_mutation_retries, mutators=list(h.smc_mutators),
                                  heldout=heldout)
    else:
        source = TaskSampler(train_examples, seed) if len(train_examples) else None
    buffer = None
    if h.replay_enabled:
        if source is None:
            raise ValueError("honest.replay_enabled needs fresh prompts to mix with: give a train set "
                             "(data.train=honest_tasks) or honest.smc_enabled=true")
        buffer = ReplayBuffer(h.replay_capacity, h.replay_alpha, h.replay_eps)
        source = ReplayMixSource(source, buffer, h.replay_share, h.replay_warmup_steps, h.replay_alpha, h.replay_eps,
                                 seed=seed, heldout=heldout)
    strategy = HonestStrategy(default_strategy(cfg), buffer=buffer, controller=controller, metrics_from=source,
                              use_gold=not cfg.data.hide_labels)
    return strategy, source
