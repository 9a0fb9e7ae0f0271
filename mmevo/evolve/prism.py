"""Prism self-evolution (text only) on the GRPO core: a solver-initialised questioner rewarded for semantic coverage.

Iteration t (1-based; outputs in ``<out>/iter_<t>/``), with S_0 = ``model.path`` (or its warm-up):

1. questioner: GRPO from S_{t-1} for ``prism.questioner_steps`` on instruction prompts. Its strategy parses each
   sample's ``<question>``, asks a frozen solver on S_{t-1} ``prism.solver_samples`` times, p(q) = the modal
   answer's share; the ``prism_coverage`` head rewards zpd(p) * (1 + lam * exp(-n_c / mean n)) with the cluster
   counts carried over from the previous iteration's questioner.
2. pool: the trained questioner writes ``prism.pool_prompts`` x ``rollout.n`` questions; the same frozen solver
   scores them; those with p in ``prism.pool_band`` are kept, at most ``prism.max_per_cluster`` per cluster.
3. solver: GRPO from S_{t-1} on the pool with label-free rewards (majority vote by default; SFR by config), export
   S_t. An empty pool skips the phase (S_t = S_{t-1}) and says so in the report.
4. diversity: ``diversity_stats`` of the questions generated for the pool and of the kept pool, per iteration, in
   ``<out>/diversity.json``, ``diversity.png`` and ``report.md`` (the seed's diversity table).

A finished phase (``done.json``) is skipped on rerun; an unfinished one resumes from its checkpoints. Seeds are
offset per iteration and role.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Sequence

from mmevo.atomic import write_json_atomic
from mmevo.config import Config, set_dotted, to_dict, validate
from mmevo.data.prompts import EpochSampler
from mmevo.data.schema import Example
from mmevo.evolve.mmzero import _UNPRINTABLE, SPECIAL_TOKEN, FrozenRole, Recorder, content_id, step_means, substantive
from mmevo.evolve.rerun import (check_finished_steps, check_iterations_not_fewer, check_rerun_config, finished_phase,
                                 finished_steps_mismatches, say_reused_phases)
from mmevo.rewards.answers import extract_answer, group_answer_keys, single_tag
from mmevo.rewards.mmzero import modal_share
from mmevo.rollout.shared_vllm import for_roles
from mmevo.rollout.strategy import RolloutStrategy, sample_groups

PHASES = ("questioner", "pool", "solver")
QUESTIONER_INSTRUCTION = (
    "Write one new math question that has a single numerical answer. It must be self-contained and solvable. "
    "Reply with the question only, between <question> and </question>.")
MAX_QUESTION_CHARS = 1000


# -- parsing --------------------------------------------------------------------------------------------------------


def parse_question(text: str) -> tuple[str | None, str]:
    """(question, "") from a questioner output with exactly one non-empty ``<question>…</question>``; else
    (None, why): "no_tag", "several", "empty", "too_long", "special_token" (``<|im_end|>`` spelled out) or
    "unprintable" (a control character such as NUL, or a lone surrogate, which the solver's tokenizer cannot
    encode: a TypeError that ended the step)."""
    question, why = single_tag(text, "question", MAX_QUESTION_CHARS)
    if question is None:
        return None, why
    # a control token spelled out ("<|image_pad|>", "<|im_end|>"), as MM-Zero refuses in a proposal: the question is
    # re-encoded into the frozen solver's prompt, where the tokenizer reads it as that token (an image slot without an
    # image: the engine refuses the whole request batch, ending the step; an end of turn ends the user's message)
    if SPECIAL_TOKEN.search(question):
        return None, "special_token"
    if _UNPRINTABLE.search(question):
        return None, "unprintable"
    return question, ""


def question_example(question: str) -> Example:
    """The solver's example for a question. No gold (the loop is label-free): its answer is None, not "", which the
    majority head's pseudo-label accuracy read as a gold answer that no modal answer ever equals (a logged 0.0 in
    every solver phase) and an accuracy head as a label every answer misses (reward 0) instead of a clear error."""
    return Example(content_id("q", question), question, None, [], [])


def questioner_examples(n: int, seed: int) -> list[Example]:
    """``n`` copies of the instruction (distinct ids): the questions' diversity must come from the model."""
    return [Example(f"questioner-s{seed}-{k}", QUESTIONER_INSTRUCTION, "", [], []) for k in range(n)]


def agreement(texts: Sequence[str]) -> dict:
    """p(q) from one question's solver samples: the modal answer's share, math-equivalent answers agreeing as in the
    majority-vote head; answerless samples count in the denominator; nobody answers (or no sample) -> p = 0 and
    silver None. A non-answer ("None", "N/A", "unknown", in any LaTeX spelling) is an answerless sample, as in
    MM-Zero: a solver agreeing that it cannot answer is no solvability, and "None" no silver label. Also the modal
    answer (``silver``) and how many samples answered."""
    answers = [substantive(extract_answer(t, None)) for t in texts]
    keys = group_answer_keys(answers)
    mode, p = modal_share(keys) if keys else (None, 0.0)
    silver = None if mode is None else answers[keys.index(mode)]
    return {"p": float(p), "silver": silver, "answered": sum(k is not None for k in keys), "samples": len(texts)}


def solver_agreement(solver: FrozenRole, questions: Sequence[str], n: int, seed: int) -> list[dict]:
    """``agreement`` of ``n`` frozen-solver samples for each question."""
    if not questions:
        return []
    return [agreement(texts) for texts in solver.sample([question_example(q) for q in questions], n, seed)]


class ClusterAssigner:
    """Nearest centroid of questions in the fixed cluster space (``prism.centroids`` with ``prism.embedder``)."""

    def __init__(self, centroids: str, embedder: str = "", batch_size: int = 64, device: str = "cpu", k: int = 0):
        from mmevo.prism.clusters import embedder_id, load_centroids

        self.centroids, _ = load_centroids(centroids, embedder_id(embedder))
        self.k = int(self.centroids.shape[0])
        if k and k != self.k:  # else prism.k would be ignored without a word
            raise ValueError(f"prism.k={k}, but {centroids} holds {self.k} centroids: set prism.k={self.k}, or rebuild "
                             f"the clusters with `mmevo prism build-clusters` at prism.k={k}")
        self.embedder_name, self.batch_size, self.device, self._embedder = embedder, batch_size, device, None

    def __call__(self, questions: Sequence[str]) -> list[int]:
        from mmevo.prism.clusters import assign_texts, get_sentence_embedder

        if not questions:
            return []
        if self._embedder is None:
            self._embedder = get_sentence_embedder(self.embedder_name, self.device, self.batch_size)
        return assign_texts(self._embedder, questions, self.centroids)


# -- the questioner's strategy ----------------------------------------------------------------------------------------
class QuestionerStrategy(RolloutStrategy):
    """Questioner samples -> strict parse -> frozen solver agreement p(q) -> ``aux`` for ``prism_coverage``."""

    name = "prism_questioner"

    def __init__(self, solver: FrozenRole, solver_samples: int, assign: ClusterAssigner, recorder: Recorder):
        self.solver, self.solver_samples, self.assign, self.recorder = solver, solver_samples, assign, recorder

    def rollout(self, ctx, examples):
        ro = sample_groups(ctx, examples)
        parsed = [parse_question(t) for t in ro.texts]
        valid = [i for i, (q, _) in enumerate(parsed) if q is not None]
        questions = [parsed[i][0] for i in valid]
        scores = solver_agreement(self.solver, questions, self.solver_samples, ctx.seed + 17)
        for s, c in zip(scores, self.assign(questions)):
            s["cluster"] = c
        by_index = dict(zip(valid, scores))
        ro.aux, rows = [], []
        for i, (q, why) in enumerate(parsed):
            if q is None:
                ro.aux.append({"question": None, "valid": False, "reason": why})
                rows.append({"valid": False, "reason": why, "text": ro.texts[i][:2000]})
            else:
                s = by_index[i]
                ro.aux.append({"question": q, "valid": True, "p": s["p"], "cluster": s["cluster"]})
                rows.append({"valid": True, "question": q, **s})
        n = max(1, len(ro))
        reasons = [why for q, why in parsed if q is None]
        ro.extra_metrics.update({"prism/valid_frac": len(valid) / n,
                                 "prism/p_mean": sum(s["p"] for s in scores) / max(1, len(scores)),
                                 "prism/unanswered_frac": sum(s["answered"] == 0 for s in scores) / max(1, len(scores)),
                                 # the frozen solver got no sample (prompt over its data.max_prompt_length): p = 0
                                 # like an unanswered question, so counted apart, as MM-Zero's "unjudged"
                                 "prism/unsampled": sum(s["samples"] == 0 for s in scores)})
        for why in sorted(set(reasons)):
            ro.extra_metrics[f"prism/invalid/{why}"] = reasons.count(why)
        self._rows, self._step = rows, ctx.step
        return ro

    def after_rewards(self, rollout, rewards):
        for row, r in zip(self._rows, rewards.tolist()):
            row["reward"] = r
        self.recorder.write(self._step, self._rows)
        return None


# -- the solver's records -------------------------------------------------------------------------------------------
def solver_records(rollout, rewards) -> list[dict]:
    """One record per pool question of a solver step: the question, its cluster and pool scores (``pool_p``,
    ``pool_silver``), the majority-vote ``pseudo_label`` of its trained samples, and each sample's ``text``,
    ``answer``, ``reward`` (the step's total reward, as the advantages read it) and ``trainable`` (False for CSRS
    re-inferences, which feed the rewards only)."""
    from mmevo.rewards.majority import majority_vote_rewards

    keep = rollout.trainable_mask().tolist()
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(rollout.group_ids.tolist()):
        groups.setdefault(g, []).append(i)
    rows = []
    for g, idx in groups.items():
        ex = rollout.examples[idx[0]]
        trained = [i for i in idx if keep[i]]
        _, info = majority_vote_rewards([rollout.texts[i] for i in trained], [0] * len(trained),
                                        [ex.choices] * len(trained))
        rows.append({"id": ex.id, "question": ex.problem, "cluster": ex.meta.get("cluster"),
                     "pool_p": ex.meta.get("p"), "pool_silver": ex.meta.get("silver"),
                     "pseudo_label": info["pseudo_labels"].get(0),
                     "samples": [{"text": rollout.texts[i], "answer": extract_answer(rollout.texts[i], ex.choices),
                                  "reward": float(rewards[i]), "trainable": bool(keep[i])} for i in idx]})
    return rows


class SolverRecords(RolloutStrategy):
    """The solver's strategy (plain groups, or CSRS by ``prism.roles.solver``) with per-step records: after each
    step's rewards, ``records/step_<k>.jsonl`` (``solver_records``) as the questioner's strategy writes its own, so
    that what the solver trained on can be audited. Sampling, state and metrics are the wrapped strategy's."""

    name = "prism_solver"

    def __init__(self, inner: RolloutStrategy, recorder: Recorder):
        self.inner, self.recorder = inner, recorder

    def rollout(self, ctx, examples):
        self._step = ctx.step
        return self.inner.rollout(ctx, examples)

    def after_rewards(self, rollout, rewards):
        metrics = self.inner.after_rewards(rollout, rewards)
        self.recorder.write(self._step, solver_records(rollout, rewards))
        return metrics

    def state_dict(self) -> dict:
        return self.inner.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state)


# -- configs of the phases ------------------------------------------------------------------------------------------
def role_config(cfg: Config, role: str, phase_dir: Path, model_path: str) -> Config:
    """The base config with the role's defaults and ``prism.roles.<role>`` overrides (dotted keys) applied."""
    p = cfg.prism
    rc = copy.deepcopy(cfg)
    head_args = {"centroids": p.centroids, "embedder": p.embedder, "lam": p.lam, "gamma": p.gamma,
                 "ema_mode": p.ema_mode, "init_count": p.init_count, "init_counts": p.init_counts,
                 "visit": p.visit}
    defaults = {
        "questioner": {"reward.heads": {"prism_coverage": 1.0}, "reward.head_args": {"prism_coverage": head_args},
                       "data.hide_labels": False, "data.prompt_template": "none", "trainer.steps": p.questioner_steps},
        "solver": {"reward.heads": {"majority": 1.0}, "reward.head_args": {}, "data.hide_labels": True,
                   "trainer.steps": p.solver_steps},
    }[role]
    rc.csrs.enabled = False
    for key, value in {**defaults, **(p.roles.get(role) or {})}.items():
        set_dotted(rc, key, value)
    rc.model.path = model_path
    rc.trainer.output_dir = str(phase_dir)
    if role == "questioner" and rc.csrs.enabled:
        raise ValueError("prism.roles.questioner: CSRS does not apply to the questioner")
    validate(rc)
    return rc


def check_loop_config(cfg: Config) -> None:
    """The loop's own keys, with the key to change."""
    from mmevo.config import ConfigError
    from mmevo.prism.clusters import check_prism_config

    check_prism_config(cfg)
    p = cfg.prism
    lo, hi = (list(p.pool_band) + [None, None])[:2]
    if len(p.pool_band) != 2 or not 0.0 <= lo <= hi <= 1.0:
        raise ConfigError(f"prism.pool_band={list(p.pool_band)} must be [low, high] with 0 <= low <= high <= 1")
    if p.visit not in ("band", "valid"):
        raise ConfigError(f"prism.visit={p.visit!r} not in ['band', 'valid']")
    for key in ("iterations", "questioner_steps", "solver_samples", "max_per_cluster", "questioner_prompts",
                "pool_prompts"):
        if getattr(p, key) < 1:
            raise ConfigError(f"prism.{key}={getattr(p, key)} must be >= 1")
    stray = [r for r in p.roles if r not in ("questioner", "solver")]
    if stray:
        raise ConfigError(f"prism.roles has {stray}: the roles are questioner and solver")


# -- the loop -------------------------------------------------------------------------------------------------------
# settings a rerun into the same output dir may change: where it writes, and its length in iterations (a rerun may add
# iterations) and phase steps (as a resumed trainer's trainer.steps)
_RERUN_FREE_KEYS = frozenset({"prism.output_dir", "prism.iterations", "prism.questioner_steps", "prism.solver_steps"})


CENTROIDS_RECORD = "centroids_used.json"
INIT_COUNTS_RECORD = "init_counts_used.json"


def file_sha256(path: str | Path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def recorded_input(out: Path, record_name: str, digest: str, entry: dict, write: bool = True) -> dict | None:
    """The record ``out/<record_name>`` of an input file the run in ``out`` was started with, when its SHA-256 differs
    from ``digest`` (else None). Without a record, the first run (``write``: the main rank) writes ``entry`` (with
    ``sha256``) there: a run directory from before the record is recorded, not checked. An unreadable record is a
    ``ConfigError`` naming it."""
    from mmevo.config import ConfigError

    record = out / record_name
    if record.exists():
        try:
            saved = json.loads(record.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            saved = repr(e)
        if not isinstance(saved, dict) or not isinstance(saved.get("sha256"), str):
            raise ConfigError(f"{record}: not a readable record of the run's input file (its SHA-256 under "
                              f"\"sha256\"; got {saved!r:.200}); restore it, or use another prism.output_dir")
        return None if saved["sha256"] == digest else saved
    if write:
        write_json_atomic(record, {**entry, "sha256": digest})
    return None


def check_rerun_centroids(out: Path, centroids: str, write: bool = True) -> None:
    """Refuse a rerun into ``out`` whose ``prism.centroids`` file holds other centroids than the first run's (its
    SHA-256, recorded in ``centroids_used.json``). ``run_config.json`` holds the path only: a ``build-clusters``
    into the same path (another seed, corpus or K) between a kill and the rerun went unnoticed, and the finished
    iterations' cluster ids, coverage counts and diversity tables were carried into phases that assign questions
    in another partition. A run directory from before the record is recorded, not checked."""
    from mmevo.config import ConfigError
    from mmevo.prism.clusters import sidecar_path

    try:
        meta = {k: v for k, v in json.loads(sidecar_path(centroids).read_text()).items()
                if k in ("embedder", "k", "dim", "seed", "corpus", "corpus_size")}
    except (OSError, ValueError):
        meta = {}
    digest = file_sha256(centroids)
    saved = recorded_input(out, CENTROIDS_RECORD, digest, {"path": str(centroids), "meta": meta}, write)
    if saved is not None:
        raise ConfigError(f"prism.centroids={centroids} holds other centroids (sha256 {digest[:12]}) than those "
                          f"the run in prism.output_dir={out} was started with (sha256 {saved['sha256'][:12]}, "
                          f"{CENTROIDS_RECORD}: {saved.get('meta')}): its finished phases' cluster ids and "
                          "coverage counts belong to that partition; restore that file, or use another "
                          "prism.output_dir")


def check_rerun_init_counts(out: Path, init_counts: str, write: bool = True) -> None:
    """Refuse a rerun into ``out`` whose ``prism.init_counts`` file holds other bytes than the first run's (its
    SHA-256, recorded in ``init_counts_used.json``), as for ``prism.centroids``: ``run_config.json`` holds the path
    only, so a file rewritten between a kill and the rerun warm-started an unfinished first questioner from other
    counts than the finished phases were (or the summary said they were) trained with. No file, nothing recorded."""
    from mmevo.config import ConfigError

    if not init_counts:
        return
    digest = file_sha256(init_counts)
    saved = recorded_input(out, INIT_COUNTS_RECORD, digest, {"path": str(init_counts)}, write)
    if saved is not None:
        raise ConfigError(f"prism.init_counts={init_counts} holds other counts (sha256 {digest[:12]}) than the file "
                          f"the run in prism.output_dir={out} was started with (sha256 {saved['sha256'][:12]}, "
                          f"{INIT_COUNTS_RECORD}): its first questioner's coverage counts were warm-started from "
                          "that file; restore it, or use another prism.output_dir")


def run_prism(cfg: Config) -> dict:
    """``mmevo evolve prism``: ``prism.iterations`` x (questioner, pool, solver); returns the summary."""
    from mmevo.grpo.distributed import barrier, init_distributed, is_main
    from mmevo.prism.clusters import BUILD_HINT
    from mmevo.recipes import resolve_model_path

    p = cfg.prism
    check_loop_config(cfg)
    if not Path(p.centroids).exists():
        raise FileNotFoundError(f"prism.centroids: {p.centroids} does not exist: {BUILD_HINT}")
    if p.init_counts:  # a bad warm-start file fails before any model loads, not at the first questioner phase
        from mmevo.prism.clusters import load_centroids
        from mmevo.rewards.prism import load_init_counts

        load_init_counts(p.init_counts, load_centroids(p.centroids)[0].shape[0])
    if cfg.trainer.deepspeed:
        init_distributed(cfg.model.device)
    out = Path(p.output_dir)
    solver_path = resolve_model_path(cfg)
    out.mkdir(parents=True, exist_ok=True)
    check_rerun_config(out, cfg, "prism", _RERUN_FREE_KEYS, write=is_main())
    check_rerun_centroids(out, p.centroids, write=is_main())
    check_rerun_init_counts(out, p.init_counts, write=is_main())
    planned = [(f"iter_{t}/{phase}", f"prism.{phase}_steps", getattr(p, f"{phase}_steps"))
               for t in range(1, p.iterations + 1) for phase in ("questioner", "solver")]
    check_finished_steps(out, planned, "prism", say=is_main())
    check_iterations_not_fewer(out, p.iterations, 1, "prism")
    if is_main():
        phase_dirs = [f"iter_{t}/{phase}" for t in range(1, p.iterations + 1) for phase in PHASES]
        say_reused_phases(out, phase_dirs, "prism")
    if p.warmup_questions > 0:
        solver_path = warm_up(cfg, solver_path, out / "warmup")
        barrier()  # the main rank exports the warm-up (sft_and_export): in place before any rank loads it
    counts_state: dict = {}
    summary: dict = {"config": to_dict(cfg), "start_model": solver_path, "iterations": []}
    # one vLLM engine in this process serves the questioner and the solver, trained or frozen, in turn (vLLM's
    # sleep mode serves one engine per process); a no-op on the HF engine
    with for_roles([role_config(cfg, r, out, solver_path) for r in ("questioner", "solver")]):
        for t in range(1, p.iterations + 1):
            it_dir = out / f"iter_{t}"
            it: dict = {"iteration": t, "solver_in": solver_path}
            for role_index, phase in enumerate(PHASES):
                phase_dir = it_dir / phase
                done = phase_dir / "done.json"
                result = finished_phase(phase_dir)
                if result is None:
                    phase_dir.mkdir(parents=True, exist_ok=True)
                    if phase == "questioner":
                        result = run_questioner(cfg, t, role_index, phase_dir, solver_path, counts_state)
                    elif phase == "pool":
                        start_shared_engine(role_config(cfg, "questioner", phase_dir, it["questioner"]["model"]),
                                            it["questioner"]["model"])
                        result = build_pool(cfg, t, phase_dir, it["questioner"]["model"], solver_path) if is_main() else {}
                    else:
                        result = run_solver(cfg, t, role_index, phase_dir, solver_path, it_dir / "pool" / "pool.jsonl")
                    if is_main():
                        write_json_atomic(done, result)  # a rerun reads it back: a kill mid-write left it torn
                    barrier()
                    if not is_main():
                        result = json.loads(done.read_text())
                it[phase] = result
            counts_state = it["questioner"].get("head_state", {})
            if it["solver"].get("model"):
                solver_path = it["solver"]["model"]
            it["solver_out"] = solver_path
            summary["iterations"].append(it)
    summary["steps_mismatch"] = finished_steps_mismatches(out, planned)  # also a phase resumed past lowered steps
    if is_main():
        write_diversity(out, summary)
        write_json_atomic(out / "summary.json", summary)
    return summary


def _means(history: list[dict], prefixes: tuple[str, ...]) -> dict:
    """Phase means; ``prism/invalid/<why>`` is a count logged only by the steps that had it, so it is averaged over
    every step (over those steps alone, one bad sample in one step of ten read as one per step)."""
    return step_means(history, prefixes, ("prism/invalid/",))


def run_questioner(cfg: Config, t: int, role_index: int, phase_dir: Path, solver_path: str,
                   counts_state: dict) -> dict:
    """Questioner GRPO from S_{t-1} (resumable); its coverage counts start from the previous iteration's."""
    from mmevo.grpo.distributed import barrier, is_main, world_size
    from mmevo.recipes import build_trainer, load_policy

    p = cfg.prism
    rc = role_config(cfg, "questioner", phase_dir, solver_path)
    t0 = time.time()
    solver = FrozenRole(role_config(cfg, "solver", phase_dir, solver_path), solver_path)
    try:
        assign = ClusterAssigner(p.centroids, p.embedder, p.embed_batch, p.embed_device, p.k)
        strategy = QuestionerStrategy(solver, p.solver_samples, assign, Recorder(phase_dir))
        examples = questioner_examples(max(p.questioner_prompts, 1), seed=t)
        policy = load_policy(rc)
        trainer = build_trainer(rc, policy, examples, strategy=strategy, prompt_source=EpochSampler(examples, t))
        if counts_state:  # the previous iteration's counts; a resumed checkpoint overrides them with its own
            trainer.rewards.heads["prism_coverage"].load_state_dict(counts_state)
        trainer.seed_offset = len(PHASES) * t + role_index  # 2t + role gave solver t and questioner t + 1 one seed
        trainer.resume_free_keys = _RERUN_FREE_KEYS  # a rerun's iterations / phase steps: not a changed setting
        trainer.train()
        history = trainer.logged_history()  # all the phase's steps, those before a resume too
        head_state = trainer.rewards.heads["prism_coverage"].state_dict()
        final = trainer.export(phase_dir / "final")
        steps = trainer.step_idx
        trainer.close()
    finally:
        solver.close()
    # the records of steps this phase did not finish with (an attempt killed past a checkpoint that a rerun with
    # fewer prism.questioner_steps resumed from; another world size's names), as MM-Zero's finished phases
    barrier()  # every rank's records are written before the stale ones are read off the directory
    stale = strategy.recorder.remove_stale_records(steps, world_size()) if is_main() else 0
    return {"model": str(final), "steps": len(history), "seconds": time.time() - t0, "head_state": head_state,
            "metrics": _means(history, ("prism/", "reward/")), "stale_records_removed": stale}


def start_shared_engine(rc: Config, model_path: str) -> None:
    """Start the loop's shared vLLM engine on every rank before a phase that samples on the main rank alone (the
    pool): under torchrun each rank's engine joins the trainer's process group, and vLLM creates its groups
    collectively, so an engine started by rank 0 alone waited for the other ranks forever. A fresh run starts it in
    the questioner phase, on every rank; a rerun whose first unfinished phase is a pool reached the pool first. A
    no-op in one process, on the HF engine, or once the engine runs."""
    from mmevo.grpo.distributed import world_size
    from mmevo.rollout import shared_vllm

    shared = shared_vllm.active()
    if world_size() > 1 and shared is not None and shared.engine is None and rc.rollout.engine == "vllm":
        FrozenRole(rc, model_path).close()  # its view starts the engine, then it sleeps until rank 0 samples


def build_pool(cfg: Config, t: int, phase_dir: Path, questioner_path: str, solver_path: str) -> dict:
    """Questions from the trained questioner, scored by the frozen S_{t-1}, kept in the band, balanced by cluster."""
    from mmevo.rewards.prism import diversity_stats

    p = cfg.prism
    t0 = time.time()
    qc = role_config(cfg, "questioner", phase_dir, questioner_path)
    questioner = FrozenRole(qc, questioner_path)
    try:
        texts = questioner.sample(questioner_examples(p.pool_prompts, seed=1000 + t), qc.rollout.n, seed=7919 * t)
    finally:
        questioner.close()
    flat = [x for group in texts for x in group]
    parsed = [parse_question(x) for x in flat]
    reasons: dict[str, int] = {}
    questions, seen = [], set()
    for q, why in parsed:
        if q is None:
            reasons[why] = reasons.get(why, 0) + 1
        elif q in seen:
            reasons["duplicate"] = reasons.get("duplicate", 0) + 1
        else:
            seen.add(q)
            questions.append(q)
    assign = ClusterAssigner(p.centroids, p.embedder, p.embed_batch, p.embed_device, p.k)
    k, clusters = assign.k, assign(questions)
    solver = FrozenRole(role_config(cfg, "solver", phase_dir, solver_path), solver_path)
    try:
        scores = solver_agreement(solver, questions, p.solver_samples, seed=104729 * t)
    finally:
        solver.close()
    rows = [{"question": q, "cluster": c, **s} for q, c, s in zip(questions, clusters, scores)]
    kept = balance_pool(rows, p.pool_band, p.max_per_cluster)
    with open(phase_dir / "pool.jsonl", "w") as f:
        for r in kept:
            f.write(json.dumps(r) + "\n")
    with open(phase_dir / "generated.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return {"generated": len(flat), "valid_distinct": len(questions), "invalid": reasons,
            "unsampled": sum(r["samples"] == 0 for r in rows),  # no solver sample: prompt over max_prompt_length
            "in_band": sum(r["in_band"] for r in rows), "kept": len(kept),
            "capped": sum(r["in_band"] and not r["kept"] for r in rows), "k": k,
            "diversity_generated": diversity_stats(clusters, k) if clusters else None,
            "diversity_pool": diversity_stats([r["cluster"] for r in kept], k) if kept else None,
            "seconds": time.time() - t0}


def balance_pool(rows: list[dict], band: Sequence[float], max_per_cluster: int) -> list[dict]:
    """The pool: rows (question, cluster, p, silver) with p in ``band`` and a modal answer, at most
    ``max_per_cluster`` per cluster in their order; marks every row with ``in_band`` and ``kept``."""
    lo, hi = band
    per_cluster: dict[int, int] = {}
    kept = []
    for r in rows:
        r["in_band"] = lo <= r["p"] <= hi and r["silver"] is not None
        r["kept"] = r["in_band"] and per_cluster.get(r["cluster"], 0) < max_per_cluster
        if r["kept"]:
            per_cluster[r["cluster"]] = per_cluster.get(r["cluster"], 0) + 1
            kept.append({k: r[k] for k in ("question", "cluster", "p", "silver")})
    return kept


def read_pool(path: Path) -> list[Example]:
    """The solver's examples from a pool file (label-free: the silver answer stays in ``meta`` for diagnostics). A
    damaged line (hand-edited, or torn by a crash before the pool's done.json was written) is an error naming the file
    and line: it raised a bare JSON / key error, naming neither."""
    exs = []
    if not path.exists():
        return exs
    for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        try:
            r = json.loads(line)
            if not isinstance(r, dict) or not isinstance(r.get("question"), str):
                raise TypeError("no question text")
            ex = question_example(r["question"])
            ex.meta = {"kind": f"cluster_{r['cluster']}", "cluster": r["cluster"], "p": r["p"], "silver": r["silver"]}
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            why = f"no field {e}" if isinstance(e, KeyError) else f"not a pool row ({e})"
            raise ValueError(f"{path}:{n}: {why}; the pool is damaged: restore it, or delete its done.json "
                             f"({path.parent / 'done.json'}) to build the pool again") from None
        exs.append(ex)
    return exs


def run_solver(cfg: Config, t: int, role_index: int, phase_dir: Path, solver_path: str, pool_path: Path) -> dict:
    """Solver GRPO from S_{t-1} on the pool (resumable), its per-step records in ``records/``; an empty pool skips
    it."""
    from mmevo.grpo.distributed import barrier, is_main, world_size
    from mmevo.grpo.trainer import default_strategy
    from mmevo.recipes import build_trainer, load_policy

    examples = read_pool(pool_path)
    if not examples:
        return {"skipped": "empty question pool (no question with p in prism.pool_band)", "model": None}
    t0 = time.time()
    rc = role_config(cfg, "solver", phase_dir, solver_path)
    policy = load_policy(rc)
    strategy = SolverRecords(default_strategy(rc), Recorder(phase_dir))
    trainer = build_trainer(rc, policy, examples, strategy=strategy, prompt_source=EpochSampler(examples, t))
    trainer.seed_offset = len(PHASES) * t + role_index  # 2t + role gave solver t and questioner t + 1 one seed
    trainer.resume_free_keys = _RERUN_FREE_KEYS  # a rerun's iterations / phase steps: not a changed setting
    trainer.train()
    history = trainer.logged_history()  # all the phase's steps, those before a resume too
    final = trainer.export(phase_dir / "final")
    steps = trainer.step_idx
    trainer.close()
    barrier()  # every rank's records are written before the stale ones are read off the directory
    stale = strategy.recorder.remove_stale_records(steps, world_size()) if is_main() else 0
    return {"model": str(final), "steps": len(history), "examples": len(examples), "seconds": time.time() - t0,
            "metrics": _means(history, ("reward/",)), "stale_records_removed": stale}


# -- warm-up of tiny models -----------------------------------------------------------------------------------------
def warm_up(cfg: Config, base_path: str, out: Path) -> str:
    """SFT a tiny model on embedded questions, both roles in one model (the questioner starts from the solver):
    instruction -> ``<question>q</question>`` and q -> ``<think>…</think> \\boxed{a}``; cached in ``out``."""
    from mmevo.data.text_questions import generate_text_questions
    from mmevo.grpo.sft import sft_and_export
    from mmevo.recipes import load_policy

    target = out / "model"
    if (target / "config.json").exists():
        return str(target)
    qs = generate_text_questions(cfg.prism.warmup_questions, seed=cfg.prism.seed + 1)
    exs = []
    for k, q in enumerate(qs):
        exs.append(Example(f"warm-q-{k}", QUESTIONER_INSTRUCTION, "", [], [], solution=f"<question>{q.question}</question>"))
        exs.append(Example(f"warm-s-{k}", q.question, q.answer, [], [],
                           solution=f"<think>I solve it step by step.</think> \\boxed{{{q.answer}}}"))
    rc = copy.deepcopy(cfg)
    rc.data.prompt_template = "none"
    rc.sft.output_dir = str(out)
    sft_and_export(rc, load_policy(rc, base_path), exs, target)
    return str(target)


# -- report ---------------------------------------------------------------------------------------------------------
DIVERSITY_KEYS = ("active_clusters", "normalized_entropy", "gini", "top10_share")


def write_diversity(out: Path, summary: dict) -> None:
    """``diversity.json`` (per iteration: generated questions and kept pool), ``diversity.png`` and ``report.md``."""
    table = []
    for it in summary["iterations"]:
        pool = it.get("pool", {})
        table.append({"iteration": it["iteration"], "generated": pool.get("generated", 0),
                      "valid_distinct": pool.get("valid_distinct", 0), "kept": pool.get("kept", 0),
                      "diversity_generated": pool.get("diversity_generated"),
                      "diversity_pool": pool.get("diversity_pool"),
                      "questioner_reward": it.get("questioner", {}).get("metrics", {}).get(
                          "reward/prism_coverage/mean"),
                      "solver": it.get("solver", {}).get("skipped") or "trained"})
    (out / "diversity.json").write_text(json.dumps(table, indent=2))
    _plot_diversity(out / "diversity.png", table)
    k = next((it["pool"].get("k") for it in summary["iterations"] if it.get("pool", {}).get("k")), None)
    lines = ["# Prism run", "",
             f"{len(table)} iteration(s); K = {k} clusters. Diversity of the questions the trained questioner wrote "
             "for the pool (all valid distinct ones, and the kept pool with p in the band), as in the seed's table.", "",
             "| iteration | questions | valid distinct | kept | active clusters | norm. entropy | Gini | top-10% share | "
             "solver |", "|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        d = r["diversity_generated"] or {}
        lines.append(f"| {r['iteration']} | {r['generated']} | {r['valid_distinct']} | {r['kept']} | "
                     f"{d.get('active_clusters', '-')} | {_fmt(d.get('normalized_entropy'))} | {_fmt(d.get('gini'))} | "
                     f"{_fmt(d.get('top10_share'))} | {r['solver']} |")
    lines += ["", "Kept pool:", "", "| iteration | active clusters | norm. entropy | Gini | top-10% share |",
              "|---|---|---|---|---|"]
    for r in table:
        d = r["diversity_pool"] or {}
        lines.append(f"| {r['iteration']} | {d.get('active_clusters', '-')} | {_fmt(d.get('normalized_entropy'))} | "
                     f"{_fmt(d.get('gini'))} | {_fmt(d.get('top10_share'))} |")
    lines += ["", "![diversity](diversity.png)", ""]
    (out / "report.md").write_text("\n".join(lines))


def _fmt(x) -> str:
    return "-" if x is None else f"{round(x, 3) + 0.0:.3f}"  # + 0.0: no "-0.000"


def _plot_diversity(path: Path, table: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(DIVERSITY_KEYS), figsize=(3.2 * len(DIVERSITY_KEYS), 2.8))
    its = [r["iteration"] for r in table]
    for ax, key in zip(axes, DIVERSITY_KEYS):
        for which, style in (("diversity_generated", "o-"), ("diversity_pool", "s--")):
            ys = [(r[which] or {}).get(key) for r in table]
            pts = [(i, y) for i, y in zip(its, ys) if y is not None]
            if pts:
                ax.plot([a for a, _ in pts], [b for _, b in pts], style, label=which.split("_")[1])
        ax.set_title(key.replace("_", " "))
        ax.set_xlabel("iteration")
        ax.set_xticks(its)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
