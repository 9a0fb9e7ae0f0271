"""HONEST calibration SFT warm-up (seed section 2.6, "Bringing tiny models on-line — Calibration SFT warmup").

Each example is an HONEST task whose ``solution`` is a strict protocol response (``format_response``) that bundles
the seed's three priors into one assistant target:

1. format compliance: every target is ``<reasoning>/<answer>/<confidence>`` in the strict order;
2. a correctness-conditioned confidence prior (seed: "when the SFT target's answer is the actual ground truth the
   confidence is sampled from a high-band (≈ 0.85 ± 0.10); when it has been deliberately perturbed the confidence is
   sampled from a low-band (≈ 0.25 ± 0.15)"): c ~ N(0.85, 0.10) for a correct answer, c ~ N(0.25, 0.15) for a
   perturbed (wrong) one, clipped to [0, 1] and written with two decimals;
3. a hindsight tag prior (seed: "half of the examples include <hindsight>r</hindsight> with r bound to the
   ground-truth correctness of the displayed answer"): in legacy mode a ``hindsight_share`` of the targets end in
   ``<hindsight>y</hindsight>`` (1 for a correct answer, 0 for a perturbed one). In refined mode (CASR, seed 2.5)
   those targets instead end in a ``<critique>`` that re-checks the answer and a ``<refined_confidence>``
   r = y + 0.25 (c - y), three quarters of the way from c to y, so the refinement always improves the Brier score;
   where c is already within 0.04 of y there is no room to refine without copying (CASR's anti-copy tolerance is
   0.02) and the target has no refinement slots.

The prompt of each target (seed 2.3: the slot is injected "with epsilon-probability per step", ``--hindsight-prob``):
where the RL phase offers the legacy ``<hindsight>`` slot only on some steps (legacy mode, ``honest.hindsight_prob``
< 1, see ``slot_follows_target``), a target that writes the slot is prompted with the legacy protocol prompt (which
offers it) and every other target with the protocol without the slot (``protocol.CORE_SYSTEM_PROMPT``), the two
prompts the GRPO steps switch between (``strategy.HindsightSlotDraw``). Otherwise every target keeps the run's one
prompt: SFT would else teach "the slot is offered, leave it out" on the prompt where RL pays for writing it, and never
show the prompt without it. The per-target prompt is ``meta[SFT_SYSTEM_PROMPT]`` (read by ``grpo.sft.run_sft``).

Knobs come from the seed's tier table (``SFT_PRESETS``, quoted below); ``honest.sft_tier`` names a tier or a preset,
``honest.sft_n`` / ``sft_max_difficulty`` / ``sft_hindsight_frac`` override single values. The seed gives no share of
perturbed targets: ``honest.sft_perturbed_frac`` (default 0.5, equal classes, so neither confidence band dominates).
Shares are exact (round(n * share) targets), assigned by seeded shuffles; every draw comes from ``random.Random``
seeded with the seed and the example index, so the same arguments give the same examples on every machine.

``mmevo sft data.train=honest_sft data.system_prompt=honest`` trains on them (``recipes.load_examples``); the tier's
recommended epochs are reported in the data stats, ``sft.epochs`` sets the run's.
"""

from __future__ import annotations

import ast
import random
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from mmevo.data.schema import SFT_SYSTEM_PROMPT, Example
from mmevo.honest.tasks import DOMAINS, MAX_DIFFICULTY, MIN_DIFFICULTY, HonestTask, generate_tasks

__all__ = ["SFTPreset", "SFT_PRESETS", "TIER_PRESETS", "CORRECT_BAND", "PERTURBED_BAND", "SFTPlan", "sft_plan",
           "calibration_sft_examples", "perturb_answer", "load_calibration_sft", "SFT_STREAM"]


@dataclass(frozen=True)
class SFTPreset:
    tier: str  # tiny | small | medium
    sft_n: int  # calibration SFT examples
    epochs: int  # recommended SFT epochs
    max_difficulty: int  # hardest task difficulty in the SFT set
    hindsight_frac: float  # share of targets with the hindsight slot
    hindsight_mode: str  # recommended --hindsight-mode for the RL phase after SFT


# Seed 2.6, "Tier-aware defaults":
# | Preset   | tier   | sft_n | epochs | max_d | hindsight_frac | recommended `--hindsight-mode` |
# | qwen0.5b | tiny   | 1500  | 2      | 2     | 0.50           | legacy                         |
# | llama1b  | tiny   | 1500  | 2      | 2     | 0.50           | legacy                         |
# | qwen1.5b | small  | 1000  | 2      | 3     | 0.40           | refined                        |
# | qwen3b   | medium | 600   | 1      | 4     | 0.30           | refined                        |
# | llama3b  | medium | 700   | 1      | 4     | 0.30           | refined                        |
# | phi4mini | medium | 500   | 1      | 4     | 0.30           | refined                        |
SFT_PRESETS: dict[str, SFTPreset] = {
    "qwen0.5b": SFTPreset("tiny", 1500, 2, 2, 0.50, "legacy"),
    "llama1b": SFTPreset("tiny", 1500, 2, 2, 0.50, "legacy"),
    "qwen1.5b": SFTPreset("small", 1000, 2, 3, 0.40, "refined"),
    "qwen3b": SFTPreset("medium", 600, 1, 4, 0.30, "refined"),
    "llama3b": SFTPreset("medium", 700, 1, 4, 0.30, "refined"),
    "phi4mini": SFTPreset("medium", 500, 1, 4, 0.30, "refined"),
}
# a tier name stands for its first preset in the seed's table (medium: qwen3b's 600 examples)
TIER_PRESETS: dict[str, SFTPreset] = {"tiny": SFT_PRESETS["qwen0.5b"], "small": SFT_PRESETS["qwen1.5b"],
                                      "medium": SFT_PRESETS["qwen3b"]}

CORRECT_BAND = (0.85, 0.10)  # (mean, sd) of the confidence on a correct target (seed 2.6)
PERTURBED_BAND = (0.25, 0.15)  # (mean, sd) of the confidence on a deliberately perturbed target (seed 2.6)
CONFIDENCE_DECIMALS = 2  # targets write "0.85", not "0.8512": fewer tokens for a tiny model to learn
REFINE_KEEP = 0.25  # refined mode: r = y + REFINE_KEEP (c - y)
REFINE_MIN_GAP = 0.04  # refined mode: no refinement when |c - y| is below this (|r - c| would be under 0.03)
SFT_STREAM = "sft"  # task stream of the SFT set (held-out honest_tasks come from the "heldout" stream)
ARITHMETIC_OFFSETS = (-10, -2, -1, 1, 2, 10)  # perturbations of an integer answer: off by one, two, a carry


@dataclass(frozen=True)
class SFTPlan:
    """Every resolved knob of one calibration SFT set."""

    n: int
    tier: str  # the tier or preset name asked for
    seed: int
    hindsight_share: float
    perturbed_share: float
    mode: str  # legacy | refined: which hindsight slot the hindsight share gets
    slot_prompts: bool  # legacy: prompt a target with the slot iff it writes the slot (``slot_follows_target``)
    domains: tuple[str, ...]
    min_difficulty: int
    max_difficulty: int
    preset: SFTPreset  # the seed's row behind ``tier``

    def as_dict(self) -> dict:
        d = asdict(self)
        d["domains"] = list(self.domains)
        return d


def preset_for(tier: str) -> SFTPreset:
    """The seed's preset of a tier (tiny | small | medium) or of a preset name (qwen0.5b, llama1b, ...)."""
    key = tier.strip().lower()
    if key in TIER_PRESETS:
        return TIER_PRESETS[key]
    if key in SFT_PRESETS:
        return SFT_PRESETS[key]
    raise ValueError(f"honest.sft_tier={tier!r}: give a tier {sorted(TIER_PRESETS)} or a preset {sorted(SFT_PRESETS)}")


def slot_follows_target(cfg) -> bool:
    """Whether the calibration SFT of ``cfg`` prompts each target with the ``<hindsight>`` slot exactly when the
    target writes it: when the RL phase after it offers the slot only on some steps, i.e. legacy mode with
    ``honest.hindsight_prob`` < 1, unless ``reward.heads`` names HONEST heads without the hindsight one (the RL run
    of this config then prompts with the slot on every step). A config without HONEST heads (``mmevo sft``'s own)
    is taken to precede the seed's ``--hindsight`` run."""
    from mmevo.honest import HONEST_HEADS, draws_hindsight_slot

    h = cfg.honest
    if h.hindsight_mode != "legacy" or h.hindsight_prob >= 1.0:
        return False
    heads = getattr(getattr(cfg, "reward", None), "heads", None) or {}
    if not any(heads.get(name) for name in HONEST_HEADS):
        return True
    return draws_hindsight_slot(cfg)


def sft_plan(cfg=None, *, n: int | None = None, tier: str | None = None, seed: int | None = None,
             hindsight_share: float | None = None, perturbed_share: float | None = None, mode: str | None = None,
             domains: Sequence[str] | None = None, min_difficulty: int | None = None,
             max_difficulty: int | None = None, slot_prompts: bool | None = None) -> SFTPlan:
    """Resolve the knobs: explicit arguments win, then ``cfg.honest`` (when given), then the tier's preset.
    ``slot_prompts`` defaults to ``slot_follows_target(cfg)``, without a config to legacy mode (whose RL default,
    ``hindsight_prob`` 0.3, offers the slot per step); it applies to legacy mode only.

    The difficulty range is ``[min_difficulty, preset max_d]`` cut to the config's ``[min_difficulty,
    max_difficulty]`` (at least one difficulty)."""
    from mmevo.honest.protocol import MODES

    h = cfg.honest if cfg is not None else None

    def pick(given, field: str, default):
        if given is not None:
            return given
        return getattr(h, field) if h is not None else default

    tier = pick(tier, "sft_tier", "tiny")
    preset = preset_for(tier)
    n = pick(n, "sft_n", 0) or preset.sft_n
    share_h = pick(hindsight_share, "sft_hindsight_frac", -1.0)
    share_h = preset.hindsight_frac if share_h is None or share_h < 0 else share_h
    share_p = pick(perturbed_share, "sft_perturbed_frac", 0.5)
    mode = pick(mode, "hindsight_mode", preset.hindsight_mode)
    domains = tuple(pick(domains, "domains", DOMAINS))
    lo = pick(min_difficulty, "min_difficulty", MIN_DIFFICULTY)
    if max_difficulty is None:
        cap = h.max_difficulty if h is not None else MAX_DIFFICULTY
        max_difficulty = (h.sft_max_difficulty if h is not None and h.sft_max_difficulty else preset.max_difficulty)
        max_difficulty = max(lo, min(max_difficulty, cap))
    seed = pick(seed, "seed", 0)
    if slot_prompts is None:
        slot_prompts = slot_follows_target(cfg) if cfg is not None else True
    slot_prompts = bool(slot_prompts) and mode == "legacy"
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"honest.sft_n must be a positive integer (0 = the tier's), got {n!r}")
    for name, share in (("sft_hindsight_frac", share_h), ("sft_perturbed_frac", share_p)):
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"honest.{name} must lie in [0, 1], got {share!r}")
    if mode not in MODES:
        raise ValueError(f"honest.hindsight_mode={mode!r} not in {list(MODES)}")
    if not MIN_DIFFICULTY <= lo <= max_difficulty <= MAX_DIFFICULTY:
        raise ValueError(f"calibration SFT difficulty range {lo}..{max_difficulty} is not inside "
                         f"{MIN_DIFFICULTY}..{MAX_DIFFICULTY} (honest.min_difficulty / honest.sft_max_difficulty)")
    return SFTPlan(n=n, tier=tier, seed=seed, hindsight_share=float(share_h), perturbed_share=float(share_p),
                   mode=mode, slot_prompts=slot_prompts, domains=domains, min_difficulty=lo,
                   max_difficulty=max_difficulty, preset=preset)


# ------------------------------------------------------------------------------------------------------- targets
def _question_patterns() -> list[re.Pattern]:
    """One regex per task question template, capturing the displayed expression."""
    from mmevo.honest.tasks import _QUESTION

    return [re.compile(re.escape(t).replace(re.escape("{expr}"), "(?P<expr>.+)") + r"\Z", re.DOTALL)
            for t in _QUESTION.values()]


_PATTERNS = _question_patterns()


def displayed_expression(question: str) -> str:
    """The expression as the question shows it ("27 × (24 - 6) + 9"), for the worked reasoning."""
    for pattern in _PATTERNS:
        m = pattern.match(question)
        if m:
            return m.group("expr")
    raise ValueError(f"HONEST question {question!r} matches no task template")


def _modulus(expression: str) -> int | None:
    """m of a modular task's expression ``... % m`` or ``pow(a, e, m)``; None for other shapes."""
    node = ast.parse(expression, mode="eval").body
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.right, ast.Constant):
        return int(node.right.value)
    if isinstance(node, ast.Call) and len(node.args) == 3 and isinstance(node.args[2], ast.Constant):
        return int(node.args[2].value)
    return None


def perturb_answer(task: HonestTask, rng: random.Random) -> str:
    """A plausible wrong answer: logic flips True / False, a remainder moves to another residue of the same modulus,
    an integer is off by one of ``ARITHMETIC_OFFSETS``."""
    if task.answer in ("True", "False"):
        return "False" if task.answer == "True" else "True"
    value = int(task.answer)
    m = _modulus(task.expression) if task.domain == "modular" else None
    if m is not None and m >= 2:
        return str((value + rng.randint(1, m - 1)) % m)
    return str(value + rng.choice(ARITHMETIC_OFFSETS))


def _band(rng: random.Random, band: tuple[float, float]) -> float:
    mean, sd = band
    return round(min(1.0, max(0.0, rng.gauss(mean, sd))), CONFIDENCE_DECIMALS)


def _worked(expr: str, answer: str) -> str:
    return f"{expr} is {answer}" if answer in ("True", "False") else f"{expr} = {answer}"


def _critique(expr: str, gold: str, shown: str) -> str:
    if shown == gold:
        return f"Check: {_worked(expr, gold)} again, so the answer {shown} holds."
    return f"Check: {_worked(expr, gold)}, not {shown}, so the answer is wrong."


def sft_example(task: HonestTask, perturbed: bool, with_hindsight: bool, mode: str, rng: random.Random,
                slot_prompt: bool = False) -> Example:
    """One calibration SFT example of ``task`` (its ``solution`` is the protocol target, ``meta`` says what it holds).
    ``slot_prompt`` (legacy mode): its prompt offers the ``<hindsight>`` slot iff the target writes it
    (``meta[SFT_SYSTEM_PROMPT]``); else the run's system prompt."""
    from mmevo.honest.protocol import format_response, system_prompt

    expr = displayed_expression(task.question)
    shown = perturb_answer(task, rng) if perturbed else task.answer
    y = 0.0 if perturbed else 1.0
    c = _band(rng, PERTURBED_BAND if perturbed else CORRECT_BAND)
    slots: dict = {}
    if with_hindsight and mode == "legacy":
        slots["hindsight"] = y
    elif with_hindsight and abs(c - y) >= REFINE_MIN_GAP:
        slots["critique"] = _critique(expr, task.answer, shown)
        slots["refined_confidence"] = round(y + REFINE_KEEP * (c - y), CONFIDENCE_DECIMALS)
    solution = format_response(_worked(expr, shown), shown, c, **slots)
    meta = {**task.meta, "sft_perturbed": perturbed, "sft_answer": shown, "sft_confidence": c,
            "sft_hindsight": slots.get("hindsight"), "sft_refined_confidence": slots.get("refined_confidence")}
    if slot_prompt and mode == "legacy":
        meta[SFT_SYSTEM_PROMPT] = system_prompt("legacy", hindsight_slot="hindsight" in slots)
    return Example(id=f"{task.id}-sft", problem=task.question, answer=task.answer, choices=[], images=[],
                   solution=solution, meta=meta)


def _chosen(n: int, share: float, key: str) -> set[int]:
    """round(n * share) of the indices 0..n-1, picked by a shuffle seeded with ``key``."""
    return set(random.Random(key).sample(range(n), round(n * share)))


def calibration_sft_examples(cfg=None, **knobs) -> list[Example]:
    """The calibration SFT set of ``sft_plan(cfg, **knobs)`` (knobs: n, tier, seed, hindsight_share,
    perturbed_share, mode, domains, min_difficulty, max_difficulty, slot_prompts)."""
    plan = sft_plan(cfg, **knobs)
    tasks = generate_tasks(plan.n, plan.seed, plan.domains, plan.min_difficulty, plan.max_difficulty,
                           stream=SFT_STREAM)
    perturbed = _chosen(plan.n, plan.perturbed_share, f"honest-sft/{plan.seed}/perturbed")
    hindsight = _chosen(plan.n, plan.hindsight_share, f"honest-sft/{plan.seed}/hindsight")
    return [sft_example(t, i in perturbed, i in hindsight, plan.mode, random.Random(f"honest-sft/{plan.seed}/{i}"),
                        plan.slot_prompts) for i, t in enumerate(tasks)]


def load_calibration_sft(cfg, which: str) -> tuple[list[Example], dict]:
    """``data.train=honest_sft`` for ``recipes.load_examples``: the examples and their stats (plan, shares,
    the preset's recommended epochs). Needs the protocol's system prompt (``data.system_prompt=honest``)."""
    from mmevo.config import ConfigError
    from mmevo.honest.protocol import MODES, system_prompt

    if which != "train":
        raise ConfigError("data.heldout=honest_sft: calibration SFT targets are training data; evaluate on "
                          "data.heldout=honest_tasks")
    if cfg.data.system_prompt not in {system_prompt(m) for m in MODES}:
        raise ConfigError("data.train=honest_sft needs the HONEST protocol prompt: add data.system_prompt=honest "
                          f"(data.system_prompt is {cfg.data.system_prompt[:60]!r})")
    plan = sft_plan(cfg)
    rows = calibration_sft_examples(cfg)
    stats = {"rows": len(rows), "loaded": len(rows), "skipped": 0, "plan": plan.as_dict(),
             "perturbed": sum(ex.meta["sft_perturbed"] for ex in rows),
             "with_hindsight": sum(ex.meta["sft_hindsight"] is not None for ex in rows),
             "with_refinement": sum(ex.meta["sft_refined_confidence"] is not None for ex in rows),
             "prompted_without_slot": sum(ex.meta.get(SFT_SYSTEM_PROMPT) == system_prompt("legacy", False)
                                          for ex in rows),
             "preset_epochs": plan.preset.epochs, "recommended_hindsight_mode": plan.preset.hindsight_mode}
    return rows, stats
