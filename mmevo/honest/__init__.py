"""HONEST (seed: "HONEST · Self-Learning Calibration"): calibrated confidence as a trained skill.

- ``tasks``: deterministic procedural text tasks (arithmetic, modular arithmetic, logic; difficulty 1-5) with exact
  answers and a verifier that recomputes each answer from ``meta["expression"]`` (``data.train=honest_tasks``);
- ``protocol``: the ``<reasoning>/<answer>/<confidence>`` response protocol (abstain, legacy ``<hindsight>``,
  refined ``<critique>`` + ``<refined_confidence>``), its system prompts and the strict / lenient parsers;
- the rewards and the ``honest_brier`` / ``honest_hindsight`` / ``honest_format`` heads live in
  ``mmevo.rewards.honest``.
- CPR / SMC (seed 3-4): ``replay`` (calibration-prioritized replay buffer, replay-mix prompt source), ``mutators``
  (numeric / compositional / distractor, verifiable answers), ``curriculum`` (per-domain difficulty ceilings up to 8,
  curriculum prompt source), ``strategy`` (``HonestStrategy``: per-sample ``aux`` parse results, replay write-back
  and curriculum outcomes); ``build_honest_plugins(cfg, train)`` returns a run's (strategy, prompt source).
- GSS and the loop (seed 5, 7): ``selfplay`` (stub generator, trainable generator: ``<expression>`` parsing and
  verification, ``GeneratorStrategy`` + the ``honest_generator`` head, GSS prompt mix, ``SolverStrategy`` with the
  health monitor), ``loop`` (``run_honest``: ``mmevo evolve honest CONFIG``, solver / generator blocks).

``resolve_honest_config`` ties the ``honest`` config section to the rest of a run (called by ``load_config``);
``draws_hindsight_slot`` says whether a run offers the legacy hindsight slot per step (``honest.hindsight_prob``,
``strategy.HindsightSlotDraw``).
"""

from __future__ import annotations

HONEST_HEADS = ("honest_brier", "honest_hindsight", "honest_format")
HONEST_DATA = "honest_tasks"  # the data.train / data.heldout name of the generated tasks
HONEST_SFT_DATA = "honest_sft"  # the data.train name of the calibration SFT targets (mmevo.honest.sft)


def draws_hindsight_slot(cfg) -> bool:
    """Whether the run's GRPO steps draw the legacy ``<hindsight>`` slot with ``honest.hindsight_prob`` (seed 2.3:
    "epsilon-probability per step"): legacy mode with the ``honest_hindsight`` head in the reward (HCR). Else the
    prompt is the same on every step: refined mode (CASR) teaches its tags on each one, and a run without the head
    has nothing that rewards the slot."""
    return cfg.honest.hindsight_mode == "legacy" and bool(cfg.reward.heads.get("honest_hindsight"))


def build_honest_plugins(cfg, train_examples=(), heldout=None):
    """(HonestStrategy, prompt source) of the ``honest`` section's CPR / SMC settings (``mmevo.honest.plugins``)."""
    from mmevo.honest.plugins import build_honest_plugins as build

    return build(cfg, train_examples, heldout)


def head_defaults(h) -> dict[str, dict]:
    """Keyword arguments of each HONEST head from the ``honest`` config section ``h``."""
    return {"honest_brier": {"malformed_penalty": h.malformed_penalty, "abstain_reward": h.abstain_reward},
            "honest_hindsight": {"mode": h.hindsight_mode, "k": h.k, "alpha": h.casr_alpha, "beta": h.casr_beta,
                                 "gamma": h.casr_gamma, "delta": h.casr_delta, "clip": h.casr_clip,
                                 "copy_tol": h.copy_tol},
            "honest_format": {"malformed_penalty": h.malformed_penalty}}


def resolve_honest_config(cfg) -> None:
    """Check the ``honest`` section and apply it to ``cfg`` in place (idempotent):

    - ``data.system_prompt=honest``, or an empty one in a run that uses an HONEST head or ``honest_tasks`` / ``honest_sft`` data,
      becomes the protocol's system prompt for ``honest.hindsight_mode``; the r1v template (``<think>`` +
      ``\\boxed{}``, which contradicts the protocol) then becomes ``none``;
    - each HONEST head in ``reward.heads`` gets its arguments from the section; ``reward.head_args`` entries win,
      except the mode, which only ``honest.hindsight_mode`` sets (it also picks the prompt);
    - ``honest.hindsight_prob`` must be in [0, 1]; a run that draws the hindsight slot (``draws_hindsight_slot``) with
      a probability below 1 switches between the protocol's prompts with and without the slot, so it needs that
      prompt (not a custom ``data.system_prompt``). Refined mode ignores the probability (a warning when it was
      changed from its default): CASR's tags are taught on every step.
    """
    import warnings

    from mmevo.config import ConfigError, HonestConfig
    from mmevo.honest.protocol import LEGACY_SYSTEM_PROMPT, MODES, system_prompt
    from mmevo.honest.tasks import DOMAINS, MAX_DIFFICULTY, MIN_DIFFICULTY

    h = cfg.honest
    if h.hindsight_mode not in MODES:
        raise ConfigError(f"honest.hindsight_mode={h.hindsight_mode!r} not in {list(MODES)}")
    unknown = [d for d in h.domains if d not in DOMAINS]
    if not h.domains or unknown:
        raise ConfigError(f"honest.domains={list(h.domains)!r}: give one or more of {list(DOMAINS)}")
    if not MIN_DIFFICULTY <= h.min_difficulty <= h.max_difficulty <= MAX_DIFFICULTY:
        raise ConfigError(f"honest.min_difficulty={h.min_difficulty} and honest.max_difficulty={h.max_difficulty}: "
                          f"need {MIN_DIFFICULTY} <= min_difficulty <= max_difficulty <= {MAX_DIFFICULTY}")
    for key in ("k", "casr_clip", "copy_tol"):
        if not getattr(h, key) >= 0:
            raise ConfigError(f"honest.{key}={getattr(h, key)} must be >= 0")
    from mmevo.honest.sft import preset_for

    try:  # read only when calibration SFT starts (a loop's warm-up, after its role configs were built)
        preset_for(h.sft_tier)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if not 0.0 <= h.hindsight_prob <= 1.0:  # NaN fails too
        raise ConfigError(f"honest.hindsight_prob={h.hindsight_prob} must be in [0, 1]: the share of GRPO steps whose "
                          "prompt offers the <hindsight> slot")
    if h.hindsight_mode == "refined" and h.hindsight_prob != HonestConfig.hindsight_prob:
        warnings.warn(f"honest.hindsight_prob={h.hindsight_prob} is ignored in honest.hindsight_mode=refined: CASR's "
                      "<critique> and <refined_confidence> are taught on every step (only the legacy <hindsight> "
                      "slot is offered per step)", stacklevel=2)
    used = [n for n in HONEST_HEADS if n in cfg.reward.heads]
    d = cfg.data
    if d.system_prompt == "honest" or (not d.system_prompt and (used or {HONEST_DATA, HONEST_SFT_DATA} & {d.train, d.heldout})):
        d.system_prompt = system_prompt(h.hindsight_mode)
        if d.prompt_template == "r1v":
            d.prompt_template = "none"
    defaults = head_defaults(h)
    for name in used:
        given = dict(cfg.reward.head_args.get(name) or {})
        if name == "honest_hindsight" and given.get("mode", h.hindsight_mode) != h.hindsight_mode:
            raise ConfigError(f"reward.head_args.honest_hindsight.mode={given['mode']!r} differs from "
                              f"honest.hindsight_mode={h.hindsight_mode!r}: set honest.hindsight_mode only (it also "
                              "switches the system prompt)")
        cfg.reward.head_args[name] = {**defaults[name], **given}
    if draws_hindsight_slot(cfg) and h.hindsight_prob < 1.0 and d.system_prompt != LEGACY_SYSTEM_PROMPT:
        raise ConfigError(f"honest.hindsight_prob={h.hindsight_prob}: the hindsight slot is offered per step by "
                          "switching between the HONEST protocol prompts with and without it, but data.system_prompt "
                          f"is a custom prompt ({d.system_prompt[:60]!r}): set data.system_prompt=honest, or "
                          "honest.hindsight_prob=1 to keep yours on every step")
