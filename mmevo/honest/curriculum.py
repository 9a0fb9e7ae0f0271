"""SMC, the self-mutating curriculum (seed 4): a difficulty ceiling per domain that rises when the model masters it,
and a prompt source that draws tasks up to the ceiling, mutating difficulty-5 tasks into 6, 7, 8.

``DifficultyController`` keeps, per domain, a ceiling (``max_unlocked_difficulty``) and, per (domain, difficulty),
a rolling window of episode outcomes (one episode = one prompt's group, correct by majority vote). After every
recorded outcome it checks the domain (seed 4.3):

- promote (ceiling + 1) when the window at the ceiling holds >= ``min_episodes`` (20) episodes with rolling accuracy
  > ``promote`` (0.75; seed 1: "When d=5 acc > τ", 4.1: "crosses an upper threshold", so 15 of 20 does not), up to
  ``cap`` (``MAX_DIFFICULTY_HARD`` = 8). The new ceiling's window starts empty: only
  episodes drawn while it is the ceiling count;
- demote (ceiling - 1) when the window at the ceiling holds >= ``min_episodes`` episodes with rolling accuracy
  < ``demote`` (0.20), never below the start ceiling (the generator's fixed ceiling, 5 by default: the seed demotes
  "at the mutated tier"). The lower tier's window starts empty too: its outcomes predate the failures at the higher
  tier, so promoting on them would re-promote a model that has regressed (seed 4.3: demotion "protects against the
  curriculum running away"); a new promotion needs ``min_episodes`` fresh episodes at that tier;
- never twice within ``cooldown`` (10) episodes of the domain (seed 9: "cool-down identical to base controller
  (10 episodes)"). As both changes clear the new ceiling's window, this only binds when ``cooldown`` >
  ``min_episodes``.

``CurriculumSource`` is a prompt source: domains in turn; for each draw the difficulty is the domain's ceiling with
probability ``ceiling_share`` (else uniform below it, down to ``min_difficulty``). Difficulties up to 5 come from the
base pool (the train set's HONEST tasks of that domain and difficulty whose answer the verifier re-derives: other
rows are left out and counted, ``pool_skipped``, as are rows of no domain of the curriculum, ``pool_other_domain``;
the generator where the pool has none);
difficulty d > 5 is a mutation of a difficulty d - 1 task (recursively: 8 = three mutations of a 5), the mutator
drawn from the registry. A mutation the verifier rejects is dropped and counted and the draw retried with a fresh
parent and mutator, at most ``max_retries`` (3) times; after that the draw gives up (counted) and hands out the
parent, whose recorded difficulty is its true one. Nothing here raises on a bad mutation.

Metrics (``metrics()``, logged through ``HonestStrategy.after_rewards``): ``difficulty/<domain>/ceiling``,
``difficulty/<domain>/ceiling_accuracy`` and ``.../ceiling_episodes`` (the window at the ceiling),
``difficulty/<domain>/accuracy`` (rolling over the domain's last ``window`` episodes at any difficulty),
``curriculum/promotions`` / ``demotions`` (cumulative), and the mutation counts of the last take
(``curriculum/mutations`` attempts, ``curriculum/unverifiable_mutations`` dropped, ``curriculum/mutation_gave_up``)
and their totals (``*_total``).
"""

from __future__ import annotations

import collections
import random
from collections.abc import Callable, Mapping, Sequence

from mmevo.data.schema import Example
from mmevo.honest.heldout import HeldoutGuard, draw_outside
from mmevo.honest.mutators import MUTATORS, MutatedTask, checked_mutation
from mmevo.honest.tasks import DOMAINS, MAX_DIFFICULTY, MIN_DIFFICULTY, HonestTask, generate_task, verify_task
from mmevo.rewards.honest import is_outcome
from mmevo.validation import is_integer_number, is_real_number

__all__ = ["MAX_DIFFICULTY_HARD", "DifficultyController", "CurriculumSource", "PROMOTE", "DEMOTE"]

MAX_DIFFICULTY_HARD = 8  # seed 4.1: the hard cap on mutator chains
PROMOTE, DEMOTE = "promote", "demote"


class DifficultyController:
    """Per-domain difficulty ceilings from rolling accuracy (see the module docstring for the rules)."""

    def __init__(self, domains: Sequence[str], start: int = MAX_DIFFICULTY, cap: int = MAX_DIFFICULTY_HARD,
                 window: int = 20, promote: float = 0.75, demote: float = 0.20, min_episodes: int = 20,
                 cooldown: int = 10):
        if isinstance(domains, (str, bytes)) or not all(isinstance(d, str) for d in domains):
            # a plain "arithmetic" was read as the domains "a", "r", "i", ...
            raise ValueError(f"the difficulty controller's domains must be a list of domain names, got {domains!r}")
        if not domains:
            raise ValueError("the difficulty controller needs at least one domain")
        self._check_rules(start, cap, window, promote, demote, min_episodes, cooldown)
        self.domains = list(dict.fromkeys(domains))
        self.start, self.cap, self.window = int(start), int(cap), int(window)
        self.promote_at, self.demote_below = float(promote), float(demote)
        self.min_episodes, self.cooldown = int(min_episodes), int(cooldown)
        self.ceilings = {d: self.start for d in self.domains}
        self.since_change = {d: self.cooldown for d in self.domains}  # no cool-down before the first change
        self.outcomes: dict[tuple[str, int], collections.deque] = {}  # (domain, difficulty) -> deque of 0/1
        self.recent = {d: collections.deque(maxlen=self.window) for d in self.domains}  # any difficulty
        self.promotions = self.demotions = 0

    @staticmethod
    def _check_rules(start, cap, window, promote, demote, min_episodes, cooldown) -> None:
        counts = {"start": start, "cap": cap, "window": window, "min_episodes": min_episodes, "cooldown": cooldown}
        odd = {k: v for k, v in counts.items() if not is_integer_number(v)}
        if odd:  # int() cut a window of 2.5 to 2 and read True as 1
            raise ValueError(f"curriculum {', '.join(odd)} must be integers, got {odd}")
        odd = {k: v for k, v in (("promote", promote), ("demote", demote)) if not is_real_number(v)}
        if odd:  # True passed as a threshold of 1
            raise ValueError(f"curriculum thresholds must be numbers, got {odd}")
        if not 1 <= start <= cap:
            raise ValueError(f"need 1 <= start ceiling <= cap, got start={start}, cap={cap}")
        if not 1 <= min_episodes <= window:
            raise ValueError(f"need 1 <= min_episodes <= window (the window must hold the episodes promotion needs), "
                             f"got min_episodes={min_episodes}, window={window}")
        if not 0.0 <= demote < promote <= 1.0:
            raise ValueError(f"need 0 <= demote < promote <= 1, got demote={demote}, promote={promote}")
        if cooldown < 0:
            raise ValueError(f"cooldown must be >= 0 episodes, got {cooldown}")

    def retune(self, cap: int, promote: float, demote: float, min_episodes: int) -> None:
        """Replace the promotion rules (the seed's SMC parameters) under the same checks as the constructor. The
        window grows to hold ``min_episodes`` if it must, keeping the outcomes recorded so far."""
        window = max(self.window, int(min_episodes))
        self._check_rules(self.start, cap, window, promote, demote, min_episodes, self.cooldown)
        above = {d: c for d, c in self.ceilings.items() if c > cap}
        if above:
            raise ValueError(f"cap {cap} is below the ceilings already reached: {above}")
        self.cap, self.promote_at, self.demote_below = int(cap), float(promote), float(demote)
        self.min_episodes = int(min_episodes)
        if window != self.window:
            self.window = window
            self.recent = {d: collections.deque(q, maxlen=window) for d, q in self.recent.items()}
            self.outcomes = {k: collections.deque(q, maxlen=window) for k, q in self.outcomes.items()}

    def maybe_change(self, domain: str) -> str | None:
        """Apply the promotion / demotion rules to ``domain`` now: PROMOTE / DEMOTE when its ceiling changed, else
        None (``record`` already does this after every outcome)."""
        self._check_domain(domain)
        return self._maybe_change(domain)

    def _check_domain(self, domain: str) -> None:
        if domain not in self.ceilings:
            raise ValueError(f"unknown curriculum domain {domain!r}; this controller has {self.domains}")

    def ceiling(self, domain: str) -> int:
        self._check_domain(domain)
        return self.ceilings[domain]

    def _window(self, domain: str, difficulty: int) -> collections.deque:
        return self.outcomes.setdefault((domain, difficulty), collections.deque(maxlen=self.window))

    def rolling_accuracy(self, domain: str, difficulty: int | None = None) -> float | None:
        """Accuracy over the window at ``difficulty`` (default: the ceiling); None when it is empty."""
        self._check_domain(domain)
        w = self._window(domain, self.ceilings[domain] if difficulty is None else difficulty)
        return sum(w) / len(w) if w else None

    def episodes_at_ceiling(self, domain: str) -> int:
        self._check_domain(domain)
        return len(self._window(domain, self.ceilings[domain]))

    def record(self, domain: str, difficulty: int, correct: bool) -> str | None:
        """One episode's outcome; returns PROMOTE / DEMOTE when the domain's ceiling changed, else None."""
        self._check_domain(domain)
        if not is_outcome(correct):  # "False" / None would count as 1 / 0
            raise ValueError(f"curriculum outcome 'correct' must be True / False (or 0 / 1), got {correct!r}")
        if not is_integer_number(difficulty) or difficulty < 1:
            raise ValueError(f"curriculum outcome 'difficulty' must be an integer >= 1, got {difficulty!r}")
        y = 1 if correct else 0
        self._window(domain, int(difficulty)).append(y)
        self.recent[domain].append(y)
        self.since_change[domain] += 1
        return self._maybe_change(domain)

    def _maybe_change(self, domain: str) -> str | None:
        if self.since_change[domain] < self.cooldown:
            return None
        c = self.ceilings[domain]
        w = self._window(domain, c)
        if len(w) < self.min_episodes:
            return None
        acc = sum(w) / len(w)
        if acc > self.promote_at and c < self.cap:  # strictly above tau (seed: "acc > τ")
            self.ceilings[domain] = c + 1
            self._window(domain, c + 1).clear()  # only episodes at the new ceiling count toward its next change
            self.promotions += 1
        elif acc < self.demote_below and c > self.start:
            self.ceilings[domain] = c - 1
            self._window(domain, c - 1).clear()  # its old outcomes predate the regression seen at c
            self.demotions += 1
        else:
            return None
        self.since_change[domain] = 0
        return PROMOTE if self.ceilings[domain] > c else DEMOTE

    def snapshot(self) -> dict:
        """Per domain: ``max_unlocked_difficulty`` (seed 4.4), rolling accuracy at the ceiling and its episodes,
        episodes since the last change; JSON-able."""
        return {d: {"max_unlocked_difficulty": self.ceilings[d], "ceiling_accuracy": self.rolling_accuracy(d),
                    "ceiling_episodes": self.episodes_at_ceiling(d), "since_change": self.since_change[d]}
                for d in self.domains}

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for d in self.domains:
            out[f"difficulty/{d}/ceiling"] = float(self.ceilings[d])
            out[f"difficulty/{d}/ceiling_episodes"] = float(self.episodes_at_ceiling(d))
            acc = self.rolling_accuracy(d)
            if acc is not None:
                out[f"difficulty/{d}/ceiling_accuracy"] = acc
            if self.recent[d]:
                out[f"difficulty/{d}/accuracy"] = sum(self.recent[d]) / len(self.recent[d])
        out["curriculum/promotions"] = float(self.promotions)
        out["curriculum/demotions"] = float(self.demotions)
        return out

    def state_dict(self) -> dict:
        return {"domains": list(self.domains), "ceilings": dict(self.ceilings), "since_change": dict(self.since_change),
                "outcomes": [[d, k, list(w)] for (d, k), w in self.outcomes.items()],
                "recent": {d: list(w) for d, w in self.recent.items()},
                "promotions": self.promotions, "demotions": self.demotions}

    def load_state_dict(self, state: dict) -> None:
        """Restore in place (the strategy holds this object too)."""
        if list(state["domains"]) != self.domains:
            raise ValueError(f"checkpoint's curriculum domains {state['domains']} differ from this run's "
                             f"{self.domains}")
        self.ceilings = {d: int(c) for d, c in state["ceilings"].items()}
        self.since_change = {d: int(n) for d, n in state["since_change"].items()}
        self.outcomes = {(d, int(k)): collections.deque(w, maxlen=self.window) for d, k, w in state["outcomes"]}
        self.recent = {d: collections.deque(state["recent"].get(d, []), maxlen=self.window) for d in self.domains}
        self.promotions, self.demotions = int(state["promotions"]), int(state["demotions"])


def _pool_task(ex: Example) -> HonestTask | None:
    """The HONEST task behind a train example (its meta has domain, difficulty, expression), else None."""
    m = ex.meta or {}
    if not all(k in m for k in ("domain", "difficulty", "expression")) or m["domain"] not in DOMAINS:
        return None
    return HonestTask(id=ex.id, question=ex.problem, answer=ex.answer, domain=m["domain"],
                      difficulty=m["difficulty"], expression=m["expression"])


def _usable(task: HonestTask) -> bool:
    """A pool task the curriculum may hand out: a generator difficulty (an integer in 1..5) and a gold answer that
    the verifier re-derives from its expression (a wrong or unverifiable answer in the train file is never gold)."""
    d = task.difficulty
    return (is_integer_number(d) and MIN_DIFFICULTY <= d <= MAX_DIFFICULTY
            and verify_task(task))


class CurriculumSource:
    """Prompt source of the SMC curriculum over ``controller``'s domains (see the module docstring).

    ``pool``: train examples whose HONEST tasks are the base draws at difficulty <= 5 (cells without any come from
    ``generate_task(..., stream="smc")``); ``mutators``: name -> mutator (default: the three of the seed);
    ``heldout``: a draw whose question is a held-out task is drawn again (counted by the guard)."""

    def __init__(self, controller: DifficultyController, pool: Sequence[Example] = (), seed: int = 0,
                 min_difficulty: int = 1, ceiling_share: float = 0.5, max_retries: int = 3,
                 mutators: Mapping[str, Callable] | Sequence[str] | None = None, heldout: HeldoutGuard | None = None):
        if not is_real_number(ceiling_share) or not 0.0 <= ceiling_share <= 1.0:  # True compared as 1
            raise ValueError(f"ceiling_share must be a number in [0, 1], got {ceiling_share!r}")
        if not is_integer_number(max_retries) or max_retries < 0:  # 1.5 failed at the first draw above 5
            raise ValueError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        if not is_integer_number(min_difficulty) or not 1 <= min_difficulty <= controller.start:
            raise ValueError(f"need 1 <= min_difficulty <= the start ceiling {controller.start}, got {min_difficulty}")
        unknown = [d for d in controller.domains if d not in DOMAINS]
        if unknown:
            raise ValueError(f"unknown HONEST domains {unknown}; known: {list(DOMAINS)}")
        if mutators is None:
            mutators = dict(MUTATORS)
        elif not isinstance(mutators, Mapping):
            bad = [m for m in mutators if m not in MUTATORS]
            if bad:
                raise ValueError(f"unknown mutators {bad}; known: {list(MUTATORS)}")
            mutators = {m: MUTATORS[m] for m in mutators}
        if not mutators:
            raise ValueError("the curriculum needs at least one mutator")
        self.controller, self.seed, self.heldout = controller, seed, heldout
        self.min_difficulty, self.ceiling_share, self.max_retries = min_difficulty, ceiling_share, max_retries
        self.mutators = dict(mutators)
        self.pool: dict[tuple[str, int], list[HonestTask]] = collections.defaultdict(list)
        self.pool_skipped = 0  # rows of its domains left out: no difficulty / expression, difficulty not 1..5, or an
        # answer not the verifier's
        # rows of no domain of this curriculum (a misspelt domain, one left out of honest.domains): never drawn, so
        # counted (else a task file of "Arithmetic" rows trained on generated tasks alone, and nothing said so)
        self.pool_other_domain = 0
        self.first_other_domain: str | None = None  # the first such row, for the loop's message
        for ex in pool:
            domain = (ex.meta or {}).get("domain")
            if not isinstance(domain, str) or domain not in controller.ceilings:
                self.pool_other_domain += 1
                if self.first_other_domain is None:
                    self.first_other_domain = f"id {ex.id!r}, domain {domain!r}"
                continue
            t = _pool_task(ex)
            if t is None or not _usable(t):  # of this curriculum's domains, but no difficulty or expression to verify
                self.pool_skipped += 1
                continue
            self.pool[(t.domain, int(t.difficulty))].append(t)
        self.pool_size = sum(len(v) for v in self.pool.values())
        self.rng = random.Random(f"smc/{seed}")
        self.cursor = 0  # domain turn
        self.draws = 0  # examples handed out (ids)
        self.generated = collections.Counter()  # (domain, difficulty) -> generator index
        self.counts = collections.Counter()  # mutations, mutation_dropped, mutation_gave_up (cumulative)
        self.last_counts = collections.Counter()  # the same, in the last take
        self.last_error: str | None = None  # why the last dropped mutation failed (for debugging a mutator)

    # -- drawing -------------------------------------------------------------------------------------------------
    def _difficulty(self, domain: str) -> int:
        c = self.controller.ceiling(domain)  # >= start >= min_difficulty
        if c == self.min_difficulty or self.rng.random() < self.ceiling_share:
            return c
        return self.rng.randint(self.min_difficulty, c - 1)

    def _base(self, domain: str, difficulty: int) -> HonestTask:
        cell = self.pool.get((domain, difficulty))
        if cell:
            return cell[self.rng.randrange(len(cell))]
        i = self.generated[(domain, difficulty)]
        self.generated[(domain, difficulty)] += 1
        return generate_task(domain, difficulty, seed=self.seed, index=i, stream="smc")

    def task(self, domain: str, difficulty: int) -> HonestTask:
        """A task of ``domain`` at ``difficulty`` (a lower one only when a mutation chain gave up)."""
        if difficulty <= MAX_DIFFICULTY:
            return self._base(domain, difficulty)
        names = sorted(self.mutators)
        parent = None
        for _ in range(1 + self.max_retries):
            parent = self.task(domain, difficulty - 1)
            if parent.difficulty != difficulty - 1:  # the tier below gave up already: hand out what exists
                return parent
            name = self.rng.choice(names)
            child, why = checked_mutation(self.mutators[name], parent, self.rng,
                                          partner=lambda: self.task(domain, difficulty - 1))
            if child is not None:
                self._count("mutations")
                return child
            self._count("mutation_dropped")
            self.last_error = f"{name}: {why}"
        self._count("mutation_gave_up")
        return parent

    def draw(self, domain: str) -> HonestTask:
        """A task of ``domain`` at a difficulty drawn up to its ceiling (``ceiling_share`` of draws at the ceiling)."""
        self.controller.ceiling(domain)  # an unknown domain is an error here, not a KeyError deeper down
        return self.task(domain, self._difficulty(domain))

    def _count(self, key: str) -> None:
        self.counts[key] += 1
        self.last_counts[key] += 1

    def _example(self, task: HonestTask) -> Example:
        ex = task.to_example()
        if isinstance(task, MutatedTask):  # a fresh id per draw (the chain's id grows with every mutation)
            ex.id = f"smc-{self.seed}-{task.domain}-d{task.difficulty}-{self.draws}"
            ex.meta["mutations"] = list(task.mutations)
        return ex

    def take(self, k: int) -> list[Example]:
        self.last_counts = collections.Counter()
        out = []
        for _ in range(k):
            domain = self.controller.domains[self.cursor % len(self.controller.domains)]
            self.cursor += 1
            task = draw_outside(self.heldout, lambda: self.draw(domain), lambda t: t.question,
                                f"curriculum draws of domain {domain!r}")
            out.append(self._example(task))
            self.draws += 1
        return out

    # -- metrics, state ------------------------------------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """The controller's metrics and the mutation counts: of the last take (what ``HealthMonitor`` reads:
        ``curriculum/mutations`` = mutation attempts, ``curriculum/unverifiable_mutations`` = dropped ones) and
        cumulative (``*_total``)."""
        last, tot = self.last_counts, self.counts
        return {**self.controller.metrics(),
                "curriculum/mutations": float(last["mutations"] + last["mutation_dropped"]),
                "curriculum/unverifiable_mutations": float(last["mutation_dropped"]),
                "curriculum/mutation_gave_up": float(last["mutation_gave_up"]),
                "curriculum/mutations_total": float(tot["mutations"]),
                "curriculum/mutation_dropped_total": float(tot["mutation_dropped"]),
                "curriculum/mutation_gave_up_total": float(tot["mutation_gave_up"]),
                "curriculum/pool_skipped": float(self.pool_skipped),
                "curriculum/pool_other_domain": float(self.pool_other_domain)}

    def state_dict(self) -> dict:
        """Sampling position, counters and the controller (checkpointed with the source)."""
        return {"rng": self.rng.getstate(), "cursor": self.cursor, "draws": self.draws, "seed": self.seed,
                "pool_size": self.pool_size, "generated": [[d, k, n] for (d, k), n in self.generated.items()],
                "counts": dict(self.counts), "last_counts": dict(self.last_counts),
                "controller": self.controller.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        if state["pool_size"] != self.pool_size:
            raise ValueError(f"checkpoint's curriculum pool had {state['pool_size']} HONEST tasks, this run's has "
                             f"{self.pool_size} (pass the same train set)")
        self.rng.setstate(_as_rng_state(state["rng"]))
        self.cursor, self.draws, self.seed = int(state["cursor"]), int(state["draws"]), state["seed"]
        self.generated = collections.Counter({(d, int(k)): int(n) for d, k, n in state["generated"]})
        self.counts = collections.Counter(state["counts"])
        self.last_counts = collections.Counter(state.get("last_counts", {}))
        self.controller.load_state_dict(state["controller"])


def _as_rng_state(s):
    """``random.Random.getstate()`` after a round trip through lists (JSON) is tuples again."""
    return (s[0], tuple(s[1]), s[2]) if isinstance(s, (list, tuple)) else s

