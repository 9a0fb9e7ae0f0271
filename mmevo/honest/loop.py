"""``mmevo evolve honest CONFIG``: the HONEST outer loop on the GRPO core (seed sections 1-9), every pillar toggled by
the ``honest`` section.

    <honest.output_dir>/
      warmup/solver/model       calibration SFT (honest.warmup_sft; data honest_sft, the sft section), cached
      warmup/generator/model    trainable GSS only: instruction -> <expression> SFT (honest.gss_warmup_problems)
      eval_before/, eval_after/ calibration reports (accuracy, abstain rate, ECE, Brier, reliability.png) on
                                data.n_heldout held-out honest_tasks (honest.eval_calibration), cached
      solver/                   ONE solver GRPO run over all blocks: metrics.jsonl, checkpoints/ (replay buffer,
                                curriculum, stub generator, health monitor in its plugin state), final/
      blocks/block_<b>/solver   trainable GSS: the solver after block b, frozen for generator block b
      generator/                trainable GSS: ONE generator GRPO run over all blocks, pool.jsonl (accepted problems)
      health_events.jsonl, summary.json (reports, hindsight audit, per-block means)

Block b = 1..honest.gss_blocks: the solver trains ``honest.gss_block_steps`` more steps (heads: honest_brier, +
honest_hindsight when ``hcr_enabled``, + honest_format at ``format_weight``; strategy and prompt source from
``build_honest_plugins``: CPR with ``replay_enabled``, SMC with ``smc_enabled``; GSS problems mixed in at
``gss_share``), then, in trainable mode, the generator trains ``gss_generator_steps`` steps against a frozen copy of
that solver. Both trainers persist across blocks (``trainer.train(steps=k)`` continues); a rerun resumes each from
its latest checkpoint and skips what is done (``pool.jsonl`` loses the rows of generator steps after its checkpoint:
they run again). Per-role overrides: ``honest.roles.{solver,generator}`` (dotted keys).
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

from mmevo.atomic import write_json_atomic
from mmevo.config import Config, ConfigError, set_dotted, to_dict, validate
from mmevo.evolve.rerun import check_rerun_config
from mmevo.honest.selfplay import GSS_MODES
from mmevo.rollout.shared_vllm import for_roles

__all__ = ["run_honest", "check_loop_config", "role_config", "solver_heads", "read_pool"]

ROLES = ("solver", "generator")
# what a rerun into a finished (or interrupted) run's output dir may change: more blocks extend the run (each run
# resumes from its checkpoint); the calibration reports are of the start and final models, whatever the blocks
_RERUN_FREE_KEYS = frozenset({"honest.output_dir", "honest.gss_blocks", "honest.eval_calibration"})


def check_loop_config(cfg: Config) -> None:
    """The loop's own keys, with the key to change."""
    h = cfg.honest
    if h.gss_mode not in GSS_MODES:
        raise ConfigError(f"honest.gss_mode={h.gss_mode!r} not in {list(GSS_MODES)}")
    for key in ("gss_blocks", "gss_block_steps", "gss_solver_samples", "gss_pool_size"):
        if getattr(h, key) < 1:
            raise ConfigError(f"honest.{key}={getattr(h, key)} must be >= 1")
    for key in ("gss_generator_steps", "gss_generator_samples", "gss_warmup_problems"):
        if getattr(h, key) < 0:
            raise ConfigError(f"honest.{key}={getattr(h, key)} must be >= 0")
    for key in ("gss_share", "gss_stub_mutate_share"):
        if not 0.0 <= getattr(h, key) <= 1.0:
            raise ConfigError(f"honest.{key}={getattr(h, key)} must be in [0, 1]")
    if h.format_weight < 0:
        raise ConfigError(f"honest.format_weight={h.format_weight} must be >= 0")
    stray = [r for r in h.roles if r not in ROLES]
    if stray:
        raise ConfigError(f"honest.roles has {stray}: the roles are {list(ROLES)}")
    if h.roles.get("generator") and h.gss_mode != "trainable":  # no generator trainer is built: it was ignored
        raise ConfigError(f"honest.roles.generator: the generator is a role only with honest.gss_mode=trainable "
                          f"(here {h.gss_mode!r}): set that, or remove the override")
    if not h.output_dir:
        raise ConfigError("honest.output_dir is empty: give the loop's output directory")


def solver_heads(h) -> dict[str, float]:
    """The solver's reward heads from the pillar toggles: Brier always, HCR's hindsight head, the format head."""
    heads = {"honest_brier": 1.0}
    if h.hcr_enabled:
        heads["honest_hindsight"] = 1.0
    if h.format_weight > 0:
        heads["honest_format"] = float(h.format_weight)
    return heads


def role_config(cfg: Config, role: str, out_dir: Path, model_path: str) -> Config:
    """The base config with the role's defaults and ``honest.roles.<role>`` overrides (dotted keys) applied."""
    from mmevo.honest import resolve_honest_config
    from mmevo.honest.protocol import system_prompt
    from mmevo.honest.selfplay import GENERATOR_SYSTEM_PROMPT

    h = cfg.honest
    rc = copy.deepcopy(cfg)
    if role == "solver":
        defaults = {"reward.heads": solver_heads(h), "reward.head_args": {}, "data.train": "honest_tasks",
                    "data.hide_labels": False, "data.system_prompt": system_prompt(h.hindsight_mode),
                    "trainer.steps": h.gss_blocks * h.gss_block_steps}
    elif role == "generator":
        defaults = {"reward.heads": {"honest_generator": 1.0}, "reward.head_args": {}, "data.hide_labels": False,
                    "data.system_prompt": GENERATOR_SYSTEM_PROMPT, "data.prompt_template": "none",
                    "trainer.steps": h.gss_blocks * (h.gss_generator_steps or h.gss_block_steps),
                    "rollout.n": h.gss_generator_samples or cfg.rollout.n, "csrs.enabled": False}
    else:
        raise ValueError(f"unknown HONEST role {role!r}; roles: {list(ROLES)}")
    for key, value in {**defaults, **(h.roles.get(role) or {})}.items():
        set_dotted(rc, key, value)
    rc.model.path = model_path
    rc.trainer.output_dir = str(out_dir)
    if role == "solver" and rc.data.prompt_template == "r1v":
        rc.data.prompt_template = "none"  # the r1v <think> + \boxed{} instruction contradicts the protocol
    resolve_honest_config(rc)
    validate(rc)
    return rc


# -- warm-up and evaluation ---------------------------------------------------------------------------------------
def _sft(cfg: Config, base_path: str, examples, out: Path) -> str:
    from mmevo.grpo.sft import sft_and_export
    from mmevo.recipes import load_policy

    target = out / "model"
    if (target / "config.json").exists():
        return str(target)
    rc = copy.deepcopy(cfg)
    rc.sft.output_dir = str(out)
    sft_and_export(rc, load_policy(rc, base_path), examples, target)
    return str(target)


def warm_up_solver(cfg: Config, base_path: str, out: Path) -> str:
    """Calibration SFT (seed 2.6: format, correctness-conditioned confidence, hindsight tag); cached in ``out``."""
    from mmevo.honest.sft import load_calibration_sft

    rc = role_config(cfg, "solver", out, base_path)
    rc.data.train = "honest_sft"
    examples, _ = load_calibration_sft(rc, "train")
    return _sft(rc, base_path, examples, out)


def warm_up_generator(cfg: Config, base_path: str, out: Path) -> str:
    """A tiny generator learns to write ``<expression>…</expression>`` first (a real model is only prompted)."""
    from mmevo.honest.selfplay import generator_sft_examples

    h = cfg.honest
    rc = role_config(cfg, "generator", out, base_path)
    examples = generator_sft_examples(h.gss_warmup_problems, seed=h.seed + 1, domains=h.domains,
                                      max_difficulty=min(3, h.max_difficulty))
    return _sft(rc, base_path, examples, out)


def calibration_eval(cfg: Config, model_path: str, out: Path, title: str) -> dict | None:
    """The calibration report of ``model_path`` on held-out honest_tasks (cached in ``out/calibration.json`` for
    these weights and this ``eval`` section); None when ``honest.eval_calibration`` is off or ``data.n_heldout`` is
    0."""
    from mmevo.eval.runner import weights_fingerprint
    from mmevo.honest.calibration import calibration_heldout, evaluate_calibration

    if not cfg.honest.eval_calibration or cfg.data.n_heldout < 1:
        return None
    done = out / "calibration.json"
    weights = weights_fingerprint(model_path)
    # eval.max_tokens / eval.limit shape the report, and a rerun may change them (the rerun check, as a resume,
    # leaves the eval section out): a report of 64 tokens was kept under a summary whose config said 8
    settings = json.loads(json.dumps(to_dict(cfg)["eval"], default=str))
    if done.exists():  # a rerun that trained on (honest.gss_blocks raised) exports new weights to the same path
        cached = json.loads(done.read_text())
        if weights is not None and cached.get("weights") == weights and cached.get("eval_settings") == settings:
            return cached
    rc = copy.deepcopy(cfg)
    rc.data.heldout = "honest_tasks"
    if cfg.honest.warmup_sft:
        rc.data.train = "honest_sft"  # held-out questions that were SFT targets are left out
    # the held-out counts (tasks left out as calibration SFT targets) go into the report: without them its n fell
    # short of data.n_heldout with no word why
    held, held_stats = calibration_heldout(rc)
    if not held:
        return None
    return evaluate_calibration(rc, model_path, held, out, max_tokens=rc.eval.max_tokens or None, title=title,
                                extra={"weights": weights, "eval_settings": settings, "data": held_stats})


def _report_summary(report: dict | None) -> dict | None:
    if report is None:
        return None
    keys = ("n", "accuracy", "abstain_rate", "malformed_rate", "strict_well_formed_rate", "ece", "brier",
            "mean_confidence", "graded")
    return {**{k: report.get(k) for k in keys}, "dropped_in_sft_set": (report.get("data") or {}).get("dropped_in_sft_set")}


# -- the generator pool -------------------------------------------------------------------------------------------
def read_pool(path: Path, limit: int, last_step: int | None = None, skipped: dict | None = None) -> list:
    """The latest ``limit`` distinct accepted problems of ``pool.jsonl`` as solver examples; each is re-verified
    (its answer and id recomputed from the expression), never trusted from the file. A line that is no JSON row with an
    id (torn by a run killed mid-write; the next append continues it) is dropped like an unverifiable row.
    ``last_step``: only the rows of generator steps up to it (the pool as it was after that step).

    ``skipped``: a dict that receives the count of each dropped row's reason (``not_a_row``: not a JSON object with
    an ``id``, a torn line included; ``no_expression``: no ``meta.expression``; ``unverifiable``: an expression the
    verifier rejects), so the caller can show them (``gss/pool_skipped``): a dropped row is never silent."""
    from mmevo.honest.selfplay import problem_from_expression

    skipped = {} if skipped is None else skipped

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    if not path.exists():
        return []
    latest: dict[str, dict] = {}
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            key = str(row["id"])
            later = last_step is not None and int(row.get("step") or 0) > last_step
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            skip("not_a_row")
            continue
        if later:
            continue
        latest.pop(key, None)
        latest[key] = row
    # newest first, each problem once by its recomputed id: a row's stored id is not trusted either (a pool an older
    # mmevo wrote named a problem by its expression's text, so "2+3" and "(2 + 3)" were two ids of one problem)
    out: dict[str, object] = {}
    taken = 0  # rows that fill one of the ``limit`` places: a distinct problem, or a dropped row as before
    for row in reversed(list(latest.values())):
        if taken >= limit:
            break
        meta = row.get("meta")
        expression = meta.get("expression") if isinstance(meta, dict) else None
        if not isinstance(expression, str):
            skip("no_expression")
            taken += 1
            continue
        try:
            ex = problem_from_expression(expression).to_example("trainable")
        except (ValueError, TypeError):
            skip("unverifiable")
            taken += 1
            continue
        if ex.id not in out:
            out[ex.id] = ex
            taken += 1
    return list(reversed(out.values()))


def load_pool(generator, path: Path, limit: int) -> None:
    """Give the solver's ``PoolGenerator`` the pool file's problems (``read_pool``) and the count of the rows it
    dropped (``gss/pool_skipped``); stderr names the file and the reasons."""
    import sys

    skipped: dict = {}
    generator.pool = read_pool(path, limit, skipped=skipped)
    generator.pool_skipped = sum(skipped.values())
    if skipped:
        print(f"[mmevo] {path}: dropped {generator.pool_skipped} rows of the GSS problem pool "
              f"({', '.join(f'{k}: {v}' for k, v in sorted(skipped.items()))}); counted as gss/pool_skipped",
              file=sys.stderr)


class PoolWriter:
    """Appends the generator's accepted problems to ``pool.jsonl``, each with ``step``: the generator step that
    accepted it (the loop sets it to the step about to run), so a resumed run can drop the steps it runs again."""

    def __init__(self, path: Path):
        self.path, self.step = path, 0

    def __call__(self, rows: list[dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({**r, "step": self.step}) + "\n")


def _means(history: list[dict], prefixes: tuple[str, ...]) -> dict:
    keys = sorted({k for h in history for k in h if k.startswith(prefixes)})
    return {k: sum(h[k] for h in history if k in h) / max(1, sum(k in h for h in history)) for k in keys}


# -- the loop -----------------------------------------------------------------------------------------------------
def heldout_guard(cfg: Config):
    """The ``data.n_heldout`` held-out honest_tasks of the calibration reports, whose questions the solver never
    trains on (all of them, whatever ``eval.limit`` evaluates: a rerun may evaluate more)."""
    from mmevo.honest.heldout import HeldoutGuard
    from mmevo.recipes import load_examples

    if cfg.data.n_heldout < 1:
        return HeldoutGuard()
    rc = copy.deepcopy(cfg)
    rc.data.heldout = "honest_tasks"
    held, _ = load_examples(rc, "heldout")
    return HeldoutGuard(ex.problem for ex in held)


def solver_sources(cfg: Config, rc: Config, out: Path, stats: dict | None = None):
    """(HonestStrategy, the solver's prompt source or None, its GSS mix or None, train set) of the solver config
    ``rc``: CPR / SMC / GSS per the config, every producer drawing around the held-out tasks (``heldout_guard``).

    ``stats``: a dict that receives the train set's load counts (``load_examples``: rows, loaded, skipped and
    ``skipped_by_reason`` where ``data.skip_bad_rows`` left rows of a task file out), ``heldout_dropped``, the
    train rows that were held-out calibration tasks, and with SMC ``curriculum_pool``: its size, the rows of its
    domains it left out (``skipped``: no difficulty 1..5, or an answer the verifier does not re-derive) and the rows
    of no domain of ``honest.domains`` (``other_domain``), both never drawn; without SMC ``gold_contradicts_expression``:
    the task rows trained on with a gold their expression does not give. The loop reports them in ``summary.json``
    (``data``)."""
    from mmevo.honest import build_honest_plugins
    from mmevo.honest.heldout import HeldoutGuardSource
    from mmevo.honest.plugins import TaskSampler
    from mmevo.honest.selfplay import GSSMixSource, PoolGenerator, StubGenerator
    from mmevo.recipes import load_examples

    h = cfg.honest
    guard = heldout_guard(rc)
    loaded, load_stats = load_examples(rc, "train")
    train = [ex for ex in loaded if not guard.turns_away(ex.problem)]
    if stats is not None:
        stats.update(load_stats, heldout_dropped=len(loaded) - len(train))
    honest_strategy, source = build_honest_plugins(rc, train, guard)
    curriculum = _curriculum_of(source)
    if curriculum is not None:  # train rows the curriculum never draws are counted in the summary, not only a curve
        if stats is not None:
            stats["curriculum_pool"] = {"size": curriculum.pool_size, "skipped": curriculum.pool_skipped,
                                        "other_domain": curriculum.pool_other_domain}
        if curriculum.pool_other_domain:
            import sys

            print(f"[mmevo] data.train={rc.data.train}: {curriculum.pool_other_domain} rows are of no domain of "
                  f"honest.domains={list(h.domains)} (the first: {curriculum.first_other_domain}); the curriculum "
                  "never draws them (counted as curriculum/pool_other_domain)", file=sys.stderr)
    sampler = _source_in_chain(source, TaskSampler)
    if sampler is not None:  # without SMC, rows whose gold contradicts their expression are trained on: counted
        if stats is not None:
            stats["gold_contradicts_expression"] = sampler.gold_contradicts_expression
        if sampler.gold_contradicts_expression:
            import sys

            print(f"[mmevo] data.train={rc.data.train}: {sampler.gold_contradicts_expression} task rows state an answer "
                  f"their expression does not give (the first: {sampler.first_gold_contradiction}); without "
                  "honest.smc_enabled they are trained on with that gold (counted as "
                  "honest/gold_contradicts_expression)", file=sys.stderr)
    gss_source = None
    if h.gss_mode != "off":
        seed = rc.trainer.seed * 1_000_003 + h.seed + 7
        if h.gss_mode == "stub":
            generator = StubGenerator(h.domains, h.min_difficulty, h.max_difficulty, seed=seed,
                                      mutators=list(h.smc_mutators), mutate_share=h.gss_stub_mutate_share,
                                      heldout=guard)
        else:
            generator = PoolGenerator(seed=seed, heldout=guard)
            load_pool(generator, out / "generator" / "pool.jsonl", h.gss_pool_size)
        if source is None:
            raise ValueError("honest.gss_mode needs fresh prompts to mix with: give data.n_train > 0")
        gss_source = source = GSSMixSource(source, generator, h.gss_share, seed=seed)
    if source is not None:
        source = HeldoutGuardSource(source, guard)
    return honest_strategy, source, gss_source, train


def _source_in_chain(source, kind: type):
    """The prompt source of type ``kind`` in a chain of prompt sources (each wrapper's ``base``), or None."""
    while source is not None and not isinstance(source, kind):
        source = getattr(source, "base", None)
    return source


def _curriculum_of(source):
    """The SMC ``CurriculumSource`` in a chain of prompt sources, or None."""
    from mmevo.honest.curriculum import CurriculumSource

    return _source_in_chain(source, CurriculumSource)


def check_solver_data(cfg: Config, base: str, out: Path) -> None:
    """A task file of the solver's (``honest.roles.solver.data.train``) that is missing or has no usable row is refused
    before the calibration SFT and the calibration report are run: it was read only when the solver was built, after
    minutes of warm-up, and the error named no key. Generated sets (``honest_tasks``, the default) cannot fail so."""
    from mmevo.recipes import GENERATED_SETS, load_examples

    rc = role_config(cfg, "solver", out / "solver", base)
    if rc.data.train in (*GENERATED_SETS, "honest_sft"):
        return
    try:
        load_examples(rc, "train")
    except (OSError, ValueError) as e:  # DataError is a ValueError: a torn row names its file and line
        raise ConfigError(f"honest.roles.solver.data.train={rc.data.train}: {e}") from None


def build_solver(cfg: Config, start: str, out: Path, data_stats: dict | None = None):
    """(solver trainer, SolverStrategy, GSS source or None) with CPR / SMC / GSS / health per the config;
    ``data_stats`` receives the train set's load counts (``solver_sources``)."""
    from mmevo.honest.health import HealthMonitor
    from mmevo.honest.selfplay import RewardTap, SolverStrategy
    from mmevo.recipes import build_trainer, load_policy

    rc = role_config(cfg, "solver", out / "solver", start)
    honest_strategy, source, gss_source, train = solver_sources(cfg, rc, out, data_stats)
    std_keys = ("reward/honest_hindsight/std",) if "honest_hindsight" in rc.reward.heads else ()
    monitor = HealthMonitor.from_config(rc, reward_std_keys=std_keys, events_path=out / "health_events.jsonl")
    strategy = SolverStrategy(honest_strategy, monitor, None, gss_source)
    trainer = build_trainer(rc, load_policy(rc), train, strategy=strategy, prompt_source=source)
    strategy.tap = trainer.rewards = RewardTap(trainer.rewards)
    return trainer, strategy, gss_source


def build_generator(cfg: Config, start: str, out: Path, pool_writer: PoolWriter):
    """(generator trainer, GeneratorStrategy); the strategy's frozen solver is set per block."""
    from mmevo.data.prompts import EpochSampler
    from mmevo.honest.selfplay import GeneratorStrategy, generator_examples
    from mmevo.recipes import build_trainer, load_policy

    h = cfg.honest
    gc = role_config(cfg, "generator", out / "generator", start)
    examples = generator_examples(max(gc.trainer.prompts_per_step, 8), seed=h.seed)
    strategy = GeneratorStrategy(None, h.gss_solver_samples, on_accept=pool_writer)
    trainer = build_trainer(gc, load_policy(gc), examples, strategy=strategy,
                            prompt_source=EpochSampler(examples, gc.trainer.seed + 1))
    trainer.seed_offset = 1
    return trainer, strategy


def _check_blocks_not_fewer(cfg: Config, solver_steps: int, out: Path) -> None:
    """A rerun may add blocks, not drop them: with fewer, the solver resumed past the last one trains nothing, and
    the summary listed the fewer blocks beside the final model (and its calibration report) of all the trained."""
    h = cfg.honest
    trained = -(-solver_steps // h.gss_block_steps)  # blocks begun: a block cut short by a kill counts
    if trained > h.gss_blocks:
        raise ConfigError(f"honest.gss_blocks={h.gss_blocks}: honest.output_dir={out} holds a solver trained "
                          f"{solver_steps} steps ({trained} blocks of honest.gss_block_steps={h.gss_block_steps}); "
                          f"rerun with honest.gss_blocks>={trained}, or use another honest.output_dir")


def _save_if_needed(trainer) -> None:
    every = trainer.cfg.trainer.save_every
    if trainer.step_idx and (not every or trainer.step_idx % every):
        trainer.save()


def run_honest(cfg: Config) -> dict:
    """``mmevo evolve honest``: warm-up, calibration before, blocks of solver (+ generator) GRPO, calibration after,
    hindsight audit; returns the summary (also ``<honest.output_dir>/summary.json``)."""
    from mmevo.evolve.mmzero import FrozenRole
    from mmevo.grpo.checkpoint import export_atomically
    from mmevo.metrics import truncate_rows_after
    from mmevo.recipes import resolve_model_path

    h = cfg.honest
    check_loop_config(cfg)
    if cfg.trainer.deepspeed:
        raise ValueError("mmevo evolve honest runs one process: leave trainer.deepspeed empty (multi-GPU HONEST is "
                         "not implemented yet)")
    out = Path(h.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    # a rerun skips the finished warm-up, reports and blocks: with other settings they would be summarised as its own
    check_rerun_config(out, cfg, "honest", _RERUN_FREE_KEYS)
    t0 = time.time()
    base = resolve_model_path(cfg)
    check_solver_data(cfg, base, out)
    start = warm_up_solver(cfg, base, out / "warmup" / "solver") if h.warmup_sft else base
    summary: dict = {"config": to_dict(cfg), "base_model": base, "start_model": start,
                     "pillars": {"hcr": h.hcr_enabled, "cpr": h.replay_enabled, "smc": h.smc_enabled,
                                 "gss": h.gss_mode}, "blocks": []}
    summary["calibration_before"] = _report_summary(calibration_eval(cfg, start, out / "eval_before", "before RL"))

    # one vLLM engine in this process serves the solver, the generator and the frozen solver in turn (vLLM's sleep
    # mode serves one engine per process); a no-op on the HF engine
    roles = ROLES if h.gss_mode == "trainable" else ("solver",)
    with for_roles([role_config(cfg, r, out, start) for r in roles]):
        # the solver's train set as loaded: rows of a task file that data.skip_bad_rows left out are counted here
        summary["data"] = {}
        solver, solver_strategy, _ = build_solver(cfg, start, out, summary["data"])
        generator = gstrategy = None
        pool_writer = PoolWriter(out / "generator" / "pool.jsonl")
        if h.gss_mode == "trainable":
            warm = h.warmup_sft and h.gss_warmup_problems > 0
            gstart = warm_up_generator(cfg, base, out / "warmup" / "generator") if warm else base
            generator, gstrategy = build_generator(cfg, gstart, out, pool_writer)
        for trainer in (solver, generator):  # a rerun's more blocks / other reports are no change of a role's settings
            if trainer is not None:
                trainer.resume_free_keys = _RERUN_FREE_KEYS
        try:
            solver.train(steps=0)  # resume (or start a fresh curve) before the first block
            _check_blocks_not_fewer(cfg, solver.step_idx, out)
            if solver_strategy.monitor is not None:  # the steps that run again log their health events again
                solver_strategy.monitor.truncate_events_after(solver.step_idx)
            if generator is not None:
                generator.train(steps=0)
                # problems of generator steps after its checkpoint: those steps run again and accept their own
                truncate_rows_after(pool_writer.path, generator.step_idx)
                # the solver's source read the pool when it was built, before the cut: read it again
                load_pool(solver.prompt_source.generator, pool_writer.path, h.gss_pool_size)
            g_steps = h.gss_generator_steps or h.gss_block_steps
            for b in range(1, h.gss_blocks + 1):
                block: dict = {"block": b}
                solver.train(steps=max(0, b * h.gss_block_steps - solver.step_idx))
                _save_if_needed(solver)
                # the block's steps from the run's curve: a resumed block (or one finished before a rerun) counts them all
                hist = solver.logged_history((b - 1) * h.gss_block_steps + 1, b * h.gss_block_steps)
                block["solver_steps"], block["solver"] = len(hist), _means(hist, ("reward/", "gss/", "difficulty/"))
                if generator is not None and generator.step_idx < b * g_steps:
                    frozen_path = out / "blocks" / f"block_{b}" / "solver"
                    # the solver holds block b's weights until the generator's block b is done: exported anew, through
                    # a sibling directory (a kill mid-export left config.json without weights, taken for an export)
                    if solver.step_idx == b * h.gss_block_steps or not (frozen_path / "config.json").exists():
                        export_atomically(frozen_path, solver.export)
                    frozen = FrozenRole(role_config(cfg, "solver", frozen_path.parent, str(frozen_path)),
                                        str(frozen_path))
                    try:
                        gstrategy.solver = frozen
                        pool_writer.step = generator.step_idx + 1
                        generator.train(steps=b * g_steps - generator.step_idx,
                                        on_step=lambda step, _m: setattr(pool_writer, "step", step + 1))
                        _save_if_needed(generator)
                    finally:
                        frozen.close()
                        gstrategy.solver = None
                    load_pool(solver.prompt_source.generator, pool_writer.path, h.gss_pool_size)
                if generator is not None:  # from the generator's curve and pool rows, as the solver's above: a block
                    # finished before a rerun is summarised as the run that trained it did
                    block["pool_size"] = len(read_pool(pool_writer.path, h.gss_pool_size, last_step=b * g_steps))
                    ghist = generator.logged_history((b - 1) * g_steps + 1, b * g_steps)
                    block["generator_steps"], block["generator"] = len(ghist), _means(ghist, ("reward/", "gss/"))
                summary["blocks"].append(block)
            final = solver.export(out / "solver" / "final")
            if generator is not None:
                summary["generator_model"] = str(generator.export(out / "generator" / "final"))
        finally:
            solver.close()
            if generator is not None:
                generator.close()
    summary["final_model"] = str(final)
    # training prompts that were held-out tasks, drawn again (their count survives a resume: it is checkpointed)
    summary["heldout_overlap_skipped"] = getattr(solver.prompt_source, "heldout_overlap_skipped", 0)
    if h.replay_enabled:  # checkpoint replay entries a resume could not use and dropped (ReplayBuffer.load_state_dict)
        summary["replay_resume_dropped"] = solver.prompt_source.buffer.resume_dropped
    summary["calibration_after"] = _report_summary(calibration_eval(cfg, str(final), out / "eval_after", "after RL"))
    if h.hcr_enabled:
        from mmevo.honest.calibration import hindsight_audit

        summary["hindsight_audit"] = hindsight_audit(out / "solver" / "metrics.jsonl")
    summary["seconds"] = time.time() - t0
    write_json_atomic(out / "summary.json", summary)
    return summary
