"""GSS, generator/solver self-play (seed section 5): a generator proposes problems, rewarded by the solver's
calibration error on them, R_G(p) = |c_S(p) - y(p)|.

Two generators, picked by ``honest.gss_mode``:

- ``stub`` (the seed's v1): ``StubGenerator`` samples a task of a random domain and difficulty from the task generator
  and applies one of the SMC mutators (seed 5.2: "generator policy = identity + random-mutator"); deterministic per
  seed and draw, every problem verified. It is not trained; the solver loop logs the reward it would get
  (``gss/generator_reward``: the mean |c - y| of the solver's own samples on its problems).
- ``trainable`` (the seed's v2): a second GRPO policy writes a problem as one expression in the task grammar,
  ``<expression>…</expression>`` (``GENERATOR_INSTRUCTION``). ``parse_generated`` evaluates it with the task
  verifier (``tasks.evaluate_expression``: an ``ast`` whitelist, never ``eval``); the solver's question is rendered
  from the expression and the answer is *computed*, never read from the generator's text (anything outside the tag
  is ignored). ``GeneratorStrategy`` samples a frozen copy of the current solver ``k`` times on every valid problem,
  grades each sample with the strict protocol parser and answer equivalence (``strategy.honest_aux``) and puts the
  outcomes in ``aux``; the ``honest_generator`` head rewards ``generator_reward``: the mean |c - y| over the
  solver's graded samples (an answer with a confidence). An unparseable or unverifiable problem, or one on which no
  solver sample is graded, earns 0 and is counted (``reward/honest_generator/invalid``, ``…/no_graded``). Accepted
  problems (verifiable, at least one graded solver sample) go into a pool that the solver trains on.

The solver side: ``GSSMixSource`` hands out each solver prompt from the generator with probability
``honest.gss_share``, else from the run's HONEST source (curriculum / replay / epochs). Generated examples have
``meta["domain"] = "gss"`` (the task's own domain in ``task_domain``): the curriculum does not count them as its
draws, the replay buffer takes them like any prompt. ``SolverStrategy`` (an ``HonestStrategy``) adds the GSS metrics
and runs the ``HealthMonitor`` every step: reward collapse mutes the hindsight head (brier-only), low replay entropy
switches the replay mix off, a collapsed stub generator is re-seeded.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from mmevo.data.schema import Example
from mmevo.honest.replay import REPLAY_FLAG
from mmevo.honest.strategy import HonestStrategy, honest_aux
from mmevo.honest.tasks import (
    _QUESTION,
    DOMAINS,
    MAX_DIFFICULTY,
    MIN_DIFFICULTY,
    _render,
    evaluate_expression,
    format_answer,
    generate_task,
    generated_problem_id,
)
from mmevo.rewards.answers import single_tag
from mmevo.rewards.honest import is_outcome
from mmevo.rollout.strategy import RolloutStrategy, sample_groups

__all__ = ["GSS_MODES", "GENERATOR_SYSTEM_PROMPT", "GENERATOR_INSTRUCTION", "GeneratedProblem", "parse_generated",
           "problem_from_expression", "generator_reward", "StubGenerator", "PoolGenerator", "GSSMixSource",
           "HonestGeneratorHead", "GeneratorStrategy", "SolverStrategy", "RewardTap", "generator_examples",
           "generator_sft_examples", "GSS_DOMAIN"]

GSS_MODES = ("off", "stub", "trainable")
GSS_DOMAIN = "gss"  # meta["domain"] of generated problems (not a curriculum domain)
MAX_GENERATED_CHARS = 300  # a longer expression is rejected ("too_long")

GENERATOR_SYSTEM_PROMPT = "You write practice problems for a student. You never give the answer."
GENERATOR_INSTRUCTION = (
    "Write one new problem as a single expression in Python syntax using only integers, + - * % **, pow(a, e, m), "
    "one comparison < > <= >= == != at a time, and and / or / not. Make it hard enough that the student is unsure. "
    "Reply with the expression only, between <expression> and </expression>.")


# -- parsing and verifying a generated problem ---------------------------------------------------------------------
@dataclass(frozen=True)
class GeneratedProblem:
    expression: str  # the generator's expression, whitespace-normalised (what the verifier evaluated)
    answer: str  # computed by the verifier from the expression
    question: str  # the solver's question, rendered from the expression
    task_domain: str  # arithmetic | modular | logic, from the expression's value and top operator

    @property
    def id(self) -> str:
        # the problem the solver is shown: "2+3", "(2 + 3)" and "2 + 3  # again" are one problem, not three (the
        # expression's text made the generator's copies count as distinct problems)
        return generated_problem_id(self.question)

    def to_example(self, source: str) -> Example:
        """The solver's example; ``source``: stub | trainable (``meta["gss"]``)."""
        return Example(id=self.id, problem=self.question, answer=self.answer, choices=[], images=[], solution=None,
                       meta={"domain": GSS_DOMAIN, "task_domain": self.task_domain, "expression": self.expression,
                             "gss": source})


def _task_domain(value, expression: str) -> str:
    if isinstance(value, bool):
        return "logic"
    try:
        from mmevo.honest.mutators import expression_tree

        tree = expression_tree(expression)
    except ValueError:
        return "arithmetic"
    return "modular" if isinstance(tree, tuple) and tree[0] in ("%", "pow3") else "arithmetic"


def render_question(expression: str, task_domain: str) -> str:
    """The question text of an expression in the task generator's wording (× mod ^ AND OR NOT)."""
    from mmevo.honest.mutators import expression_tree

    try:
        shown = _render(expression_tree(expression), python=False)
    except ValueError:
        shown = expression
    return _QUESTION[task_domain].format(expr=shown)


def problem_from_expression(expression: str) -> GeneratedProblem:
    """The verified problem of an expression; ValueError (naming why) when the verifier cannot evaluate it."""
    expr = " ".join(str(expression).split())
    value = evaluate_expression(expr)  # the whitelist verifier: raises ValueError on anything outside the grammar
    try:  # the tree walks recurse deeper per level than the verifier: what it just took may still be too deep
        domain = _task_domain(value, expr)
        question = render_question(expr, domain)
    except RecursionError:
        raise ValueError(f"expression {expr[:40]!r}... is nested too deeply to render") from None
    return GeneratedProblem(expression=expr, answer=format_answer(value), question=question, task_domain=domain)


def parse_generated(text: str) -> tuple[GeneratedProblem | None, str]:
    """(problem, "") from a generator output with exactly one ``<expression>…</expression>`` the verifier can
    evaluate; else (None, why): no_tag, several, empty, too_long, unverifiable. Any answer the generator wrote
    anywhere is ignored: the answer is always the verifier's."""
    expr, why = single_tag(text, "expression", MAX_GENERATED_CHARS)
    if expr is None:
        return None, why
    try:
        return problem_from_expression(expr), ""
    except ValueError:
        return None, "unverifiable"


def generator_reward(confidences: Sequence[float | None], correct: Sequence[bool | None]) -> tuple[float, int]:
    """(mean |c - y| over the graded solver samples, how many were graded); (0.0, 0) when none was. A sample is
    graded when it has a confidence and a correctness (an answer with a valid probability, checked against gold)."""
    confidences, correct = list(confidences), list(correct)
    if len(confidences) != len(correct):  # zip(strict=True) said only "argument 2 is longer than argument 1"
        raise ValueError(f"confidences has {len(confidences)} solver samples, correct {len(correct)}")
    errors = []
    for i, (c, y) in enumerate(zip(confidences, correct)):
        if c is None or y is None:
            continue
        # a NaN or out-of-range c, or a y of 0.5, would be a reward no calibration error can give (NaN poisons GRPO)
        if isinstance(c, (bool, str, bytes)) or getattr(c, "dtype", None) in (bool, torch.bool) \
                or not _in_unit_interval(c) or not is_outcome(y):  # numpy / torch booleans are no confidence either
            raise ValueError(f"solver sample {i}: confidence must be a number in [0, 1] and correct True / False, "
                             f"got {c!r}, {y!r}")
        errors.append(abs(float(c) - float(y)))
    # fsum: the correctly rounded mean (a plain sum of 10,000 errors of 0.7 drifted to 0.6999999999998807)
    return (math.fsum(errors) / len(errors) if errors else 0.0), len(errors)


def _in_unit_interval(c) -> bool:
    """0 <= c <= 1 for a real number; False for NaN and for what cannot be ordered (a complex 0.3+0j raised
    TypeError from the comparison, naming no sample)."""
    try:
        return bool(0.0 <= c <= 1.0)
    except (TypeError, ValueError, RuntimeError):
        return False


# -- generators --------------------------------------------------------------------------------------------------
class StubGenerator:
    """The seed's v1 generator (5.2: it "samples from the existing unified sampler + applies a pillar-3 mutator"):
    a task of a random (domain, difficulty) from the task generator, passed through one random SMC mutator with
    probability ``mutate_share`` (default 1: every draw, as the seed says; lower it to keep some tasks unmutated).
    Every problem is verified; a mutation that fails verification keeps the parent and is counted
    (``gss/stub_mutation_failed``). The mutator applied is in the example's ``meta["stub_mutator"]`` (None when the
    task is the unmutated parent). Deterministic: draw ``i`` of generation ``g`` depends only on (seed, g, i).
    ``reseed()`` starts a new generation (the health monitor's generator-collapse guardrail)."""

    def __init__(self, domains: Sequence[str] = DOMAINS, min_difficulty: int = MIN_DIFFICULTY,
                 max_difficulty: int = MAX_DIFFICULTY, seed: int = 0, mutators: Sequence[str] | None = None,
                 mutate_share: float = 1.0, heldout=None):
        from mmevo.honest.mutators import MUTATORS

        if not domains or any(d not in DOMAINS for d in domains):
            raise ValueError(f"stub generator domains {list(domains)!r}: give one or more of {list(DOMAINS)}")
        if not MIN_DIFFICULTY <= min_difficulty <= max_difficulty <= MAX_DIFFICULTY:
            raise ValueError(f"stub generator: need {MIN_DIFFICULTY} <= min_difficulty <= max_difficulty <= "
                             f"{MAX_DIFFICULTY}, got {min_difficulty}, {max_difficulty}")
        names = list(MUTATORS) if mutators is None else list(mutators)
        bad = [m for m in names if m not in MUTATORS]
        if bad:
            raise ValueError(f"stub generator mutators {bad} unknown; known: {list(MUTATORS)}")
        if not 0.0 <= mutate_share <= 1.0:
            raise ValueError(f"stub generator mutate_share={mutate_share} must be in [0, 1]")
        self.domains, self.min_d, self.max_d = list(domains), int(min_difficulty), int(max_difficulty)
        self.seed, self.mutators, self.mutate_share = seed, {m: MUTATORS[m] for m in names}, float(mutate_share)
        self.heldout = heldout  # a HeldoutGuard: a held-out task is drawn again (the next index)
        self.generation = 0
        self.draws = 0
        self.reseeds = 0
        self.mutated = self.mutation_failed = 0  # draws that went through a mutator / whose mutation failed
        self.last_ids: list[str] = []

    def _draw(self, i: int) -> Example:
        from mmevo.honest.mutators import checked_mutation

        rng = random.Random(f"gss-stub/{self.seed}/{self.generation}/{i}")
        domain, d = rng.choice(self.domains), rng.randint(self.min_d, self.max_d)
        stream = f"gss{self.generation}"
        task = generate_task(domain, d, seed=self.seed, index=i, stream=stream)
        applied = None
        if self.mutators and rng.random() < self.mutate_share:
            name = rng.choice(sorted(self.mutators))
            partner = generate_task(domain, d, seed=self.seed, index=i, stream=stream + "p")
            child, _ = checked_mutation(self.mutators[name], task, rng, partner=lambda: partner)
            if child is None:
                self.mutation_failed += 1
            else:
                task, applied = child, name
                self.mutated += 1
        p = problem_from_expression(task.expression)  # the verifier again: the answer is recomputed
        if p.answer != task.answer:
            raise AssertionError(f"stub task {task.id}: verifier {p.answer!r} != generator {task.answer!r}")
        ex = p.to_example("stub")
        ex.problem, ex.meta["task_domain"], ex.meta["difficulty_hint"] = task.question, task.domain, task.difficulty
        ex.meta["stub_mutator"] = applied
        return ex

    def _next(self) -> Example:
        self.draws += 1
        return self._draw(self.draws - 1)

    def propose(self, k: int) -> list[Example]:
        from mmevo.honest.heldout import draw_outside

        out = [draw_outside(self.heldout, self._next, lambda ex: ex.problem, "GSS stub generator") for _ in range(k)]
        self.last_ids = [ex.id for ex in out]
        return out

    def reseed(self) -> None:
        self.generation += 1
        self.reseeds += 1

    def metrics(self) -> dict[str, float]:
        return {"gss/stub_reseeds": float(self.reseeds), "gss/stub_draws": float(self.draws),
                "gss/stub_mutated": float(self.mutated), "gss/stub_mutation_failed": float(self.mutation_failed)}

    def state_dict(self) -> dict:
        return {"generation": self.generation, "draws": self.draws, "reseeds": self.reseeds, "seed": self.seed,
                "mutated": self.mutated, "mutation_failed": self.mutation_failed}

    def load_state_dict(self, state: dict) -> None:
        _check_generator_state(state, "stub")
        self.generation, self.draws = int(state["generation"]), int(state["draws"])
        self.reseeds, self.seed = int(state.get("reseeds", 0)), state.get("seed", self.seed)
        # counters of a checkpoint written before they existed restart at 0
        self.mutated, self.mutation_failed = int(state.get("mutated", 0)), int(state.get("mutation_failed", 0))


class PoolGenerator:
    """The trainable generator's accepted problems (expressions), drawn uniformly with a seeded RNG; the loop
    replaces ``pool`` after every generator block (the pool lives in a file, not in this checkpoint)."""

    def __init__(self, pool: Sequence[Example] = (), seed: int = 0, heldout=None):
        self.pool, self.seed = list(pool), seed
        self.heldout = heldout  # a HeldoutGuard: a held-out problem is drawn again
        self.rng = random.Random(f"gss-pool/{seed}")
        self.draws = 0
        self.last_ids: list[str] = []
        self.pool_skipped = 0  # rows of the pool file the loop's ``read_pool`` dropped when it last read it

    def propose(self, k: int) -> list[Example]:
        from mmevo.honest.heldout import draw_outside

        guard = self.heldout
        # nothing to give when every problem is held out (the mix takes the whole batch from its base then)
        if not self.pool or (guard is not None and all(guard.holds(ex.problem) for ex in self.pool)):
            self.last_ids = []
            return []
        out = [dataclasses.replace(draw_outside(guard, lambda: self.pool[self.rng.randrange(len(self.pool))],
                                                lambda ex: ex.problem, "GSS problem pool")) for _ in range(k)]
        for ex in out:
            ex.meta = dict(ex.meta)
        self.draws += k
        self.last_ids = [ex.id for ex in out]
        return out

    def reseed(self) -> None:  # a pool is not re-seeded: the generator policy is what collapsed
        pass

    def metrics(self) -> dict[str, float]:
        return {"gss/pool_size": float(len(self.pool)), "gss/pool_skipped": float(self.pool_skipped)}

    def state_dict(self) -> dict:
        s = self.rng.getstate()
        return {"rng": [s[0], list(s[1]), s[2]], "draws": self.draws}

    def load_state_dict(self, state: dict) -> None:
        _check_generator_state(state, "trainable")
        s = state["rng"]
        self.rng.setstate((s[0], tuple(s[1]), s[2]))
        self.draws = int(state["draws"])


def _check_generator_state(state: dict, mode: str) -> None:
    """A checkpoint of the other GSS generator (a run resumed with another ``honest.gss_mode``) is a clear error, not
    a KeyError deep in the resume. The stub's state holds its "generation", the pool's its "rng"."""
    saved = "stub" if "generation" in state else "trainable" if "rng" in state else None
    if saved != mode:
        raise ValueError(f"the checkpoint's GSS generator state is {'the ' + saved + ' one' if saved else 'unknown'} "
                         f"(honest.gss_mode={saved}), this run has honest.gss_mode={mode}: resume with the same "
                         "honest.gss_mode, or give the run another honest.output_dir")


class GSSMixSource:
    """Prompt source: each prompt from ``generator`` with probability ``share``, else from ``base`` (a generator
    with nothing to give, e.g. an empty pool, leaves the whole take to ``base``). Checkpointed: base, RNG, generator."""

    def __init__(self, base, generator, share: float = 0.3, seed: int = 0):
        if not callable(getattr(base, "take", None)):
            raise TypeError(f"base source {base!r} has no take(k)")
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"honest.gss_share={share} must be in [0, 1]")
        self.base, self.generator, self.share = base, generator, float(share)
        self.rng = random.Random(f"gss-mix/{seed}")
        self.last_generated = 0
        self.generated_total = 0
        self.last_ids: list[str] = []

    def take(self, k: int) -> list[Example]:
        picks = [self.rng.random() < self.share for _ in range(k)]
        gen = self.generator.propose(sum(picks)) if any(picks) else []
        n_gen = len(gen)
        # asked even for 0 prompts: a replay mix counts its warm-up in steps and reports this step's replays (and
        # its curriculum this step's mutations), not the step before's
        fresh = iter(self.base.take(k - n_gen))
        it = iter(gen)
        out, used = [], 0
        for p in picks:
            if p and used < n_gen:
                out.append(next(it))
                used += 1
            else:
                out.append(next(fresh))
        self.last_generated, self.generated_total = n_gen, self.generated_total + n_gen
        self.last_ids = [ex.id for ex in gen]
        return out

    def metrics(self) -> dict[str, float]:
        out = {"gss/batch_generated": float(self.last_generated), "gss/generated_total": float(self.generated_total)}
        out.update(self.generator.metrics())
        if hasattr(self.base, "metrics"):
            out.update(self.base.metrics())
        return out

    def __getattr__(self, name):  # epoch, enabled, buffer ... of the wrapped source
        if name in ("base", "generator"):
            raise AttributeError(name)
        return getattr(self.base, name)

    def state_dict(self) -> dict:
        s = self.rng.getstate()
        return {"base": self.base.state_dict(), "rng": [s[0], list(s[1]), s[2]],
                "generated_total": self.generated_total, "generator": self.generator.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.base.load_state_dict(state["base"])
        s = state["rng"]
        self.rng.setstate((s[0], tuple(s[1]), s[2]))
        self.generated_total = int(state["generated_total"])
        self.generator.load_state_dict(state["generator"])


# -- the trainable generator: strategy and head --------------------------------------------------------------------
def generator_examples(n: int, seed: int) -> list[Example]:
    """``n`` copies of the generator instruction (distinct ids): the problems' diversity must come from the model."""
    return [Example(f"gss-gen-s{seed}-{k}", GENERATOR_INSTRUCTION, "", [], []) for k in range(n)]


def generator_sft_examples(n: int, seed: int, domains: Sequence[str] = DOMAINS, max_difficulty: int = 3
                           ) -> list[Example]:
    """Warm-up targets for a tiny generator: the instruction -> ``<expression>e</expression>`` of a generated task."""
    from mmevo.honest.tasks import generate_tasks

    tasks = generate_tasks(n, seed, domains, MIN_DIFFICULTY, max_difficulty, stream="gss-warmup")
    return [Example(f"gss-warm-{k}", GENERATOR_INSTRUCTION, "", [], [],
                    solution=f"<expression>{t.expression}</expression>") for k, t in enumerate(tasks)]


class GeneratorStrategy(RolloutStrategy):
    """Generator samples -> ``parse_generated`` -> ``k`` frozen-solver samples per valid problem, graded -> ``aux``
    (``valid``, ``reason``, ``solver_confidence``, ``solver_correct``, ``problem_id``) for ``honest_generator``.
    ``solver``: anything with ``sample(examples, n, seed) -> list[list[str]]`` (a ``FrozenRole``);
    ``on_accept(rows)``: called after the rewards with the accepted problems of the step (dicts with the example's
    fields and its reward)."""

    name = "honest_generator"

    def __init__(self, solver, solver_samples: int, on_accept: Callable[[list[dict]], None] | None = None):
        if solver_samples < 1:
            raise ValueError(f"honest.gss_solver_samples={solver_samples} must be >= 1")
        self.solver, self.solver_samples, self.on_accept = solver, int(solver_samples), on_accept
        self._accepted: list[tuple[int, Example]] = []

    def rollout(self, ctx, examples):
        ro = sample_groups(ctx, examples)
        parsed = [parse_generated(t) for t in ro.texts]
        valid = [i for i, (p, _) in enumerate(parsed) if p is not None]
        problems = [parsed[i][0].to_example("trainable") for i in valid]
        answers = self.solver.sample(problems, self.solver_samples, ctx.seed + 17) if problems else []
        ro.aux, self._accepted = [], []
        by_index = dict(zip(valid, zip(problems, answers)))
        for i, (p, why) in enumerate(parsed):
            if p is None:
                ro.aux.append({"valid": False, "reason": why})
                continue
            ex, texts = by_index[i]
            graded = [honest_aux(t, ex) for t in texts]
            conf = [g["confidence"] for g in graded]
            corr = [g["correct"] if g["confidence"] is not None else None for g in graded]
            ro.aux.append({"valid": True, "reason": "", "problem_id": ex.id, "expression": p.expression,
                           "solver_confidence": conf, "solver_correct": corr})
            if any(c is not None for c in conf):
                self._accepted.append((i, ex))
        n = max(1, len(ro))
        ro.extra_metrics.update({"gss/valid_frac": len(valid) / n,
                                 "gss/distinct_problems": float(len({ex.id for ex in problems})),
                                 # valid problems the frozen solver sampled nothing for (its prompt over
                                 # data.max_prompt_length): reward 0 like an ungraded one, counted apart from those
                                 "gss/unsampled": float(sum(not texts for texts in answers))})
        return ro

    def after_rewards(self, rollout, rewards):
        if self.on_accept is not None and self._accepted:
            rows = [{"id": ex.id, "question": ex.problem, "answer": ex.answer, "meta": ex.meta,
                     "reward": float(rewards[i])} for i, ex in self._accepted]
            self.on_accept(rows)
        return {"gss/accepted": float(len(self._accepted))}


class HonestGeneratorHead:
    """``honest_generator``: the generator's reward ``generator_reward`` from its sample's ``aux`` (filled by
    ``GeneratorStrategy``); 0 for an invalid problem or one without a graded solver sample, both counted."""

    name = "honest_generator"

    def score(self, samples):
        rewards = torch.zeros(len(samples), dtype=torch.float32)
        reasons: dict[str, int] = {}
        no_graded = graded_total = solver_total = 0
        for i, s in enumerate(samples):
            aux = s.aux or {}
            if not aux.get("valid"):
                why = aux.get("reason") or "no_aux"
                reasons[why] = reasons.get(why, 0) + 1
                continue
            r, n = generator_reward(aux["solver_confidence"], aux["solver_correct"])
            rewards[i] = r
            graded_total += n
            solver_total += len(aux["solver_confidence"])
            no_graded += n == 0
        metrics = {"invalid": float(sum(reasons.values())), "no_graded": float(no_graded),
                   "solver_graded_frac": graded_total / solver_total if solver_total else 0.0}
        metrics.update({f"invalid/{k}": float(v) for k, v in sorted(reasons.items())})
        return rewards, metrics


# -- the solver side: reward tap, health, GSS metrics --------------------------------------------------------------
class RewardTap:
    """Wraps a trainer's ``RewardMixer``: keeps the last step's reward metrics (the health monitor reads them) and
    mutes the heads in ``muted`` (weight 0 in the total; their metrics are still computed, so recovery shows)."""

    def __init__(self, mixer):
        self.mixer = mixer
        self.last_metrics: dict = {}
        self.muted: set[str] = set()

    def __call__(self, samples):
        saved = dict(self.mixer.weights)
        try:
            for name in self.muted & set(saved):
                self.mixer.weights[name] = 0.0
            total, metrics = self.mixer(samples)
        finally:
            self.mixer.weights.update(saved)
        self.last_metrics = dict(metrics)
        return total, metrics

    def __getattr__(self, name):
        if name == "mixer":
            raise AttributeError(name)
        return getattr(self.mixer, name)


class SolverStrategy(HonestStrategy):
    """``HonestStrategy`` + GSS metrics (the stub generator's reward |c - y| on its problems) + the health monitor
    (``monitor``, may be None) acting on its guardrails through ``tap`` (a ``RewardTap``), the replay mix
    (``source.enabled``) and the generator (``reseed``)."""

    def __init__(self, inner_honest: HonestStrategy, monitor=None, tap: RewardTap | None = None,
                 gss_source: GSSMixSource | None = None, hindsight_head: str = "honest_hindsight"):
        super().__init__(inner_honest.inner, inner_honest.buffer, inner_honest.controller,
                         gss_source if gss_source is not None else inner_honest.metrics_from, inner_honest.use_gold)
        self.monitor, self.tap, self.gss_source, self.hindsight_head = monitor, tap, gss_source, hindsight_head

    def after_rewards(self, rollout, rewards):
        metrics = super().after_rewards(rollout, rewards)
        ids: list[str] = []
        if self.gss_source is not None:
            metrics.update(gss_outcome_metrics(rollout))
            ids = list(self.gss_source.last_ids)
        if self.monitor is not None:
            # the rollout's own metrics too: whether the step offered the hindsight slot (HindsightSlotDraw)
            step_metrics = {**rollout.extra_metrics, **(self.tap.last_metrics if self.tap is not None else {}),
                            **metrics}
            metrics.update(self.monitor.update(step_metrics, generated_ids=ids))
            self._act_on_guardrails()
        return metrics

    def _act_on_guardrails(self) -> None:
        m = self.monitor
        if self.tap is not None:
            self.tap.muted = {self.hindsight_head} if m.brier_only else set()
        source = self.metrics_from
        while source is not None:  # the replay mix may sit under the GSS mix
            if hasattr(type(source), "active") and hasattr(source, "enabled"):
                source.enabled = m.replay_enabled(m.step + 1)
                break
            source = getattr(source, "__dict__", {}).get("base")
        if m.reseed_generator and self.gss_source is not None:
            self.gss_source.generator.reseed()

    def state_dict(self) -> dict:
        return {**super().state_dict(), "monitor": self.monitor.state_dict() if self.monitor is not None else None}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if self.monitor is not None and state.get("monitor"):
            self.monitor.load_state_dict(state["monitor"])
            self._act_on_guardrails()


def gss_outcome_metrics(rollout) -> dict[str, float]:
    """The generator's reward on this step's generated problems: per problem group, the mean |c - y| of the
    solver's graded samples (``generator_reward``), averaged over the generated groups that had one. A generated
    problem the replay mix hands out again (``meta["replay"]``) is CPR's prompt, not this step's proposal."""
    groups: dict[int, tuple[list, list]] = {}
    trainable = rollout.trainable_mask()
    for i in range(len(rollout)):
        meta = rollout.examples[i].meta or {}
        if meta.get("domain") != GSS_DOMAIN or meta.get(REPLAY_FLAG) or not trainable[i]:
            continue
        aux = rollout.aux_of(i)
        c, y = groups.setdefault(int(rollout.group_ids[i]), ([], []))
        c.append(aux.get("confidence"))
        y.append(aux.get("correct"))
    rewards = [r for r, n in (generator_reward(c, y) for c, y in groups.values()) if n]
    out = {"gss/problems": float(len(groups))}
    if rewards:
        out["gss/generator_reward"] = sum(rewards) / len(rewards)
    return out
