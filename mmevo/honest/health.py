"""HONEST health detectors (seed section 9, "Failure modes & guardrails") and a monitor that runs them every step.

The seed's table (its ``server.health`` module; "All five detectors are wired into server.health (new module) and
emit W&B events"):

| Failure                                           | Detector                                             | Guardrail                                       |
| HCR collapses to all-0.5 retrospective confidence | `RewardHealthCallback` (existing)                    | Falls back to brier-only when reward_std<1e-4   |
| CPR replays the same 1-2 prompts forever          | `buffer.entropy_of_priorities()` < log(2)            | Auto-disable replay mix for next 50 steps       |
| SMC ceiling races up too fast (one lucky window)  | Cool-down identical to base controller (10 episodes) | + min_episodes_at_max = 20                      |
| SMC mutator produces unverifiable problems        | Verifier returns False on its own GT                 | Drop the mutated problem, retry up to 3 times   |
| GSS generator collapses to one trivial problem    | `len(set(generated_pids)) / n_steps < 0.1`           | Force re-seed of the stub generator             |

Four of them are here (the SMC ceiling's cool-down belongs to the curriculum itself). Each detector is a pure
function over recent values that returns a ``Detection`` (fired, the measured value, an event text);
``HealthMonitor.update(step_metrics)`` feeds them from one step's metrics and returns ``health/*`` metrics. The
monitor only *reports* a guardrail (``health/brier_only``, ``health/replay_mix_off``, ``health/generator_reseed``);
the strategy or loop that owns the replay buffer, the generator or the head weights acts on it
(``monitor.brier_only``, ``monitor.replay_enabled()``, ``monitor.reseed_generator``). ``retry_until_verified``
is the mutation guardrail itself.

Reward collapse fires on a step whose std is under the threshold, as the seed states it ("Falls back to brier-only
when reward_std<1e-4"); ``collapse_window`` > 1 (not in the seed) asks for that many consecutive such steps. The
hindsight head stays muted only while it lasts: its metrics are still computed, so one quiet step costs one step
(a silent hindsight channel, all rewards 0, has std 0 and counts as collapsed too: the seed's v1 failure). A step
whose prompts did not offer the hindsight slot (``honest/hindsight_offered`` 0, ``honest.hindsight_prob``) is not
judged on the hindsight head's std: that head pays 0 there by design; the window goes on over the offered steps.
Where the seed gives no number: generator collapse looks at the last
``generator_window`` (100) generated ids and needs at least 10 of them (the seed's ratio counts one problem a step).
"""

from __future__ import annotations

import collections
import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from mmevo.honest.strategy import OFFERED_METRIC
from mmevo.validation import is_integer_number, is_real_number

__all__ = ["LOG2", "REWARD_STD_MIN", "REPLAY_COOLDOWN_STEPS", "MIN_DISTINCT_SHARE", "MUTATION_RETRIES",
           "Detection", "reward_collapse", "priority_entropy", "replay_entropy_low", "unverifiable_mutations",
           "generator_collapse", "retry_until_verified", "HealthMonitor"]

LOG2 = math.log(2)  # replay priority entropy floor, nats (seed: < log(2))
REWARD_STD_MIN = 1e-4  # seed: "Falls back to brier-only when reward_std<1e-4"
REPLAY_COOLDOWN_STEPS = 50  # seed: "Auto-disable replay mix for next 50 steps"
MIN_DISTINCT_SHARE = 0.1  # seed: len(set(generated_pids)) / n_steps < 0.1
MUTATION_RETRIES = 3  # seed: "Drop the mutated problem, retry up to 3 times"
COLLAPSE_WINDOW = 1  # consecutive low-std steps before reward collapse fires (the seed: the step itself)
GENERATOR_WINDOW, GENERATOR_MIN_COUNT = 100, 10  # generated ids looked at / needed (not in the seed)
OFFERED_KEY = OFFERED_METRIC  # 0: the step's prompts offered no hindsight slot (one name, the strategy's)
HINDSIGHT_REWARD_PREFIX = "reward/honest_hindsight/"  # the hindsight head's metrics, not judged on such a step

T = TypeVar("T")


@dataclass(frozen=True)
class Detection:
    fired: bool
    value: float | None  # what was measured (None: nothing to measure yet)
    event: str | None = None  # what happened and the guardrail, when fired


# ---------------------------------------------------------------------------------------------------- detectors
def _measured(name: str, x) -> float:
    """A detector input as a finite float, else a ValueError naming it: a NaN std / entropy / count failed every
    comparison and never fired, silently; True was read as 1 and the text "0" as 0 by float()."""
    if not is_real_number(x) or not math.isfinite(x):
        raise ValueError(f"{name} must be a finite number, got {x!r}")
    return float(x)


def reward_collapse(stds: Sequence[float], threshold: float = REWARD_STD_MIN, window: int = COLLAPSE_WINDOW,
                    name: str = "reward") -> Detection:
    """Fires when the last ``window`` reward stds are all below ``threshold``; value = the latest std."""
    if not is_integer_number(window) or window < 1:
        raise ValueError(f"window must be an integer >= 1, got {window!r}")
    threshold = _measured("threshold", threshold)  # NaN: never fired
    recent = [_measured(f"{name} std", s) for s in list(stds)[-window:]]
    if not recent:
        return Detection(False, None)
    fired = len(recent) == window and all(s < threshold for s in recent)
    event = (f"reward collapse: {name} std < {threshold:g} for {window} step(s) (latest {recent[-1]:.3g}); "
             "guardrail: fall back to brier-only") if fired else None
    return Detection(fired, recent[-1], event)


def priority_entropy(priorities: Iterable[float]) -> float:
    """Shannon entropy (nats) of the sampling distribution p_i = priority_i / sum; 0 for one or no entry."""
    p = [_measured(f"priorities[{i}]", x) for i, x in enumerate(priorities)]
    if any(x < 0 for x in p):
        raise ValueError("priorities must be finite and >= 0")
    total = sum(p)
    if total <= 0:
        return 0.0
    return -sum(x / total * math.log(x / total) for x in p if x > 0)


def replay_entropy_low(entropy: float | None, threshold: float = LOG2,
                       cooldown: int = REPLAY_COOLDOWN_STEPS) -> Detection:
    """Fires when the replay buffer's priority entropy is below ``threshold`` (log 2: effectively one or two
    prompts carry the sampling mass). None (no buffer, or not logged this step) never fires."""
    if entropy is None:
        return Detection(False, None)
    entropy, threshold = _measured("replay priority entropy", entropy), _measured("threshold", threshold)
    fired = entropy < threshold
    event = (f"replay collapse: priority entropy {entropy:.3g} < {threshold:.3g} nats; guardrail: replay mix off "
             f"for {cooldown} steps") if fired else None
    return Detection(fired, entropy, event)


def unverifiable_mutations(n_unverifiable: float | None, n_mutations: float | None) -> Detection:
    """Fires when any mutated problem failed its own verifier this step; value = the unverifiable share."""
    if n_mutations is None:
        return Detection(False, None)
    total = _measured("n_mutations", n_mutations)
    if not total:
        return Detection(False, None)
    bad = 0.0 if n_unverifiable is None else _measured("n_unverifiable", n_unverifiable)
    if bad < 0 or bad > total:
        raise ValueError(f"unverifiable mutations {bad:g} not in [0, {total:g}]")
    rate = bad / total
    fired = bad > 0
    event = (f"unverifiable mutations: {bad:g} of {total:g} mutated problems fail their own verifier; guardrail: "
             f"drop them, retry up to {MUTATION_RETRIES} times") if fired else None
    return Detection(fired, rate, event)


def generator_collapse(generated_ids: Sequence, threshold: float = MIN_DISTINCT_SHARE,
                       min_count: int = GENERATOR_MIN_COUNT) -> Detection:
    """Fires when distinct ids / generated ids < ``threshold`` over at least ``min_count`` generated problems."""
    threshold = _measured("threshold", threshold)  # NaN: never fired
    if not is_integer_number(min_count) or min_count < 0:
        raise ValueError(f"min_count must be an integer >= 0, got {min_count!r}")
    ids = list(generated_ids)
    if not ids:
        return Detection(False, None)
    share = len(set(ids)) / len(ids)
    fired = len(ids) >= min_count and share < threshold
    event = (f"generator collapse: {len(set(ids))} distinct of {len(ids)} generated problems (share {share:.3g} < "
             f"{threshold:g}); guardrail: force re-seed of the generator") if fired else None
    return Detection(fired, share, event)


def retry_until_verified(propose: Callable[[int], T], verify: Callable[[T], bool],
                         retries: int = MUTATION_RETRIES) -> tuple[T | None, int]:
    """The mutation guardrail: ``propose(attempt)`` (attempt 0, 1, ...) until ``verify`` accepts, at most
    1 + ``retries`` attempts. Returns (the accepted item or None when every attempt failed, failed attempts).
    A proposal or verifier that raises counts as a failed attempt."""
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries}")
    failed = 0
    for attempt in range(retries + 1):
        try:
            item = propose(attempt)
            ok = bool(verify(item))
        except Exception:  # noqa: BLE001 - an unverifiable mutation is dropped, not a crash
            ok = False
        if ok:
            return item, failed
        failed += 1
    return None, failed


# ------------------------------------------------------------------------------------------------------ monitor
class HealthMonitor:
    """Runs the detectors on every step's metrics; ``update`` returns ``health/*`` metrics (floats).

    Inputs read from ``step_metrics`` (absent keys are skipped, so one monitor serves runs without replay or
    mutations): the reward stds in ``reward_std_keys`` (default: the hindsight head's, the seed's HCR row),
    ``replay_entropy_key`` (judged only while ``replay_active_key`` is not 0 and ``replay_size_key`` not 0: a buffer
    in warm-up or switched off is not replaying), ``mutations_key`` / ``unverifiable_key`` (the names
    ``mmevo.honest.replay`` / ``curriculum`` log); generated problem ids come as
    ``update(..., generated_ids=[...])``. On a step with ``offered_key`` at 0 the reward stds under
    ``reward/honest_hindsight/`` are skipped (the slot was not offered: its head paid 0). Events (fired detectors,
    recoveries) are in ``last_events`` after each update, in ``events`` (the latest ``max_events``) and, with
    ``events_path``, appended there as JSON lines (the file is created empty when the monitor is).
    """

    def __init__(self, reward_std_keys: Sequence[str] = ("reward/honest_hindsight/std",),
                 reward_std_min: float = REWARD_STD_MIN, collapse_window: int = COLLAPSE_WINDOW,
                 replay_entropy_key: str = "replay/priority_entropy", replay_entropy_min: float = LOG2,
                 replay_active_key: str = "replay/active", replay_size_key: str = "replay/size",
                 replay_cooldown: int = REPLAY_COOLDOWN_STEPS, mutations_key: str = "curriculum/mutations",
                 unverifiable_key: str = "curriculum/unverifiable_mutations",
                 min_distinct_share: float = MIN_DISTINCT_SHARE, generator_window: int = GENERATOR_WINDOW,
                 generator_min_count: int = GENERATOR_MIN_COUNT, events_path: str | Path | None = None,
                 max_events: int = 1000, offered_key: str = OFFERED_KEY):
        # a NaN threshold failed every comparison (its detector never fired), int() cut a window of 2.5 to 2 and
        # float() / int() read True as 1: each is named (the config checks its own keys; this is the direct API)
        for name, v, lowest in (("collapse_window", collapse_window, 1), ("replay_cooldown", replay_cooldown, 0),
                                ("generator_window", generator_window, 1), ("generator_min_count", generator_min_count, 0),
                                ("max_events", max_events, 0)):
            if not is_integer_number(v) or v < lowest:
                raise ValueError(f"health monitor: {name} must be an integer >= {lowest}, got {v!r}")
        for name, v in (("reward_std_min", reward_std_min), ("replay_entropy_min", replay_entropy_min),
                        ("min_distinct_share", min_distinct_share)):
            if not is_real_number(v) or not 0 <= v < math.inf:
                raise ValueError(f"health monitor: {name} must be a finite number >= 0, got {v!r}")
        self.reward_std_keys = list(reward_std_keys)
        self.reward_std_min, self.collapse_window = float(reward_std_min), int(collapse_window)
        self.replay_entropy_key, self.replay_entropy_min = replay_entropy_key, float(replay_entropy_min)
        self.replay_cooldown = int(replay_cooldown)
        self.replay_active_key, self.replay_size_key = replay_active_key, replay_size_key
        self.mutations_key, self.unverifiable_key = mutations_key, unverifiable_key
        self.min_distinct_share, self.generator_min_count = float(min_distinct_share), int(generator_min_count)
        self.generator_window = int(generator_window)
        self.offered_key = offered_key
        self.events_path = Path(events_path) if events_path else None
        if self.events_path is not None:  # created empty: a run whose detectors never fired still has the file
            self.events_path.parent.mkdir(parents=True, exist_ok=True)
            self.events_path.touch(exist_ok=True)
        self.max_events = int(max_events)
        self.step = 0
        self.std_history: dict[str, collections.deque] = {k: collections.deque(maxlen=self.collapse_window)
                                                          for k in self.reward_std_keys}
        self.collapsed: dict[str, bool] = {k: False for k in self.reward_std_keys}
        self.replay_off_until = 0  # the replay mix is off while step < this
        self.generated: collections.deque = collections.deque(maxlen=self.generator_window)
        self.reseed_generator = False  # set by the step whose ids collapsed; the loop re-seeds and goes on
        self.counts = {"reward_collapse": 0, "replay_collapse": 0, "unverifiable_mutations": 0,
                       "mutations": 0, "generator_reseeds": 0}
        self.events: list[dict] = []
        self.last_events: list[str] = []

    @classmethod
    def from_config(cls, cfg, **kwargs) -> HealthMonitor:
        """Thresholds from the ``honest`` section (``health_*``); keyword arguments win."""
        h = cfg.honest
        return cls(**{"reward_std_min": h.health_reward_std_min, "collapse_window": h.health_collapse_window,
                      "replay_cooldown": h.health_replay_cooldown, "min_distinct_share": h.health_min_distinct_share,
                      **kwargs})

    # -- guardrails the owner acts on --------------------------------------------------------------------------
    @property
    def brier_only(self) -> bool:
        """Reward collapse on a watched head: train on the Brier reward alone (seed's HCR guardrail)."""
        return any(self.collapsed.values())

    def replay_enabled(self, step: int | None = None) -> bool:
        """False during the cool-down after low replay priority entropy."""
        return (self.step if step is None else step) >= self.replay_off_until

    # -- one step ---------------------------------------------------------------------------------------------
    def update(self, step_metrics: dict, generated_ids: Sequence = (), step: int | None = None) -> dict[str, float]:
        """Run every detector on this step's metrics (and generated ids); returns ``health/*`` metrics."""
        self.step = int(step) if step is not None else self.step + 1
        self.last_events = []
        out: dict[str, float] = {}
        out.update(self._rewards(step_metrics))
        out.update(self._replay(step_metrics))
        out.update(self._mutations(step_metrics))
        out.update(self._generator(generated_ids))
        out["health/events"] = float(len(self.last_events))
        return out

    def _rewards(self, m: dict) -> dict[str, float]:
        lows = []
        unoffered = m.get(self.offered_key) == 0
        for key in self.reward_std_keys:
            if unoffered and key.startswith(HINDSIGHT_REWARD_PREFIX):
                continue  # no slot offered this step: the head's 0 rewards say nothing about collapse
            if key in m and m[key] is not None:
                self.std_history[key].append(_measured(key, m[key]))  # float() read True as 1
            d = reward_collapse(self.std_history[key], self.reward_std_min, self.collapse_window, key)
            if d.fired and not self.collapsed[key]:
                self.counts["reward_collapse"] += 1
                self._event("reward_collapse", d.event)
            elif self.collapsed[key] and not d.fired:
                self._event("reward_collapse", f"reward recovered: {key} std {d.value:.3g} >= "
                                               f"{self.reward_std_min:g}; hindsight head back on")
            self.collapsed[key] = d.fired
            if d.value is not None:
                lows.append(d.value)
        out = {"health/reward_collapse": float(self.brier_only), "health/brier_only": float(self.brier_only)}
        if lows:
            out["health/reward_std"] = min(lows)
        return out

    def _replay(self, m: dict) -> dict[str, float]:
        entropy = m.get(self.replay_entropy_key)
        if m.get(self.replay_active_key) == 0 or m.get(self.replay_size_key) == 0:
            entropy = None  # no replay this step (warm-up, switched off) or an empty buffer: nothing to judge
        d = replay_entropy_low(entropy, self.replay_entropy_min, self.replay_cooldown)
        out = {}
        if d.value is not None:
            out["health/replay_entropy"] = d.value
        if d.fired and self.replay_enabled():  # a new cool-down starts; a low value during one does not extend it
            self.counts["replay_collapse"] += 1
            self.replay_off_until = self.step + 1 + self.replay_cooldown
            self._event("replay_collapse", d.event)
        out["health/replay_mix_off"] = float(not self.replay_enabled(self.step + 1))  # for the next step's prompts
        return out

    def _mutations(self, m: dict) -> dict[str, float]:
        d = unverifiable_mutations(m.get(self.unverifiable_key), m.get(self.mutations_key))
        if d.value is None:
            return {}
        self.counts["mutations"] += int(m[self.mutations_key])
        self.counts["unverifiable_mutations"] += int(m.get(self.unverifiable_key) or 0)
        if d.fired:
            self._event("unverifiable_mutations", d.event)
        return {"health/unverifiable_mutation_rate": d.value,
                "health/unverifiable_mutations_total": float(self.counts["unverifiable_mutations"])}

    def _generator(self, ids: Sequence) -> dict[str, float]:
        self.reseed_generator = False
        if not ids and not self.generated:
            return {}
        self.generated.extend(ids)
        d = generator_collapse(self.generated, self.min_distinct_share, self.generator_min_count)
        out = {"health/generator_distinct_share": d.value}
        if d.fired:
            self.counts["generator_reseeds"] += 1
            self.reseed_generator = True
            self.generated.clear()  # the re-seeded generator starts a fresh window
            self._event("generator_collapse", d.event)
        out["health/generator_reseed"] = float(self.reseed_generator)
        return out

    def _event(self, detector: str, message: str) -> None:
        self.last_events.append(message)
        record = {"step": self.step, "detector": detector, "message": message}
        self.events = (self.events + [record])[-self.max_events:]
        if self.events_path is not None:
            self.events_path.parent.mkdir(parents=True, exist_ok=True)
            with self.events_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")

    def truncate_events_after(self, step: int) -> None:
        """Drop the events file's rows of steps after ``step`` (the step a run resumed at, 0 for a fresh start):
        those steps run again and log their events again, as ``RunLogger.truncate_after`` does for the curve."""
        if self.events_path is not None:
            from mmevo.metrics import truncate_rows_after

            truncate_rows_after(self.events_path, step)

    # -- checkpointing ----------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"step": self.step, "std_history": {k: list(v) for k, v in self.std_history.items()},
                "collapsed": dict(self.collapsed), "replay_off_until": self.replay_off_until,
                "generated": list(self.generated), "counts": dict(self.counts), "events": list(self.events)}

    def load_state_dict(self, state: dict) -> None:
        self.step = int(state["step"])
        for k, values in state["std_history"].items():
            self.std_history[k] = collections.deque(values, maxlen=self.collapse_window)
            self.collapsed[k] = bool(state["collapsed"].get(k, False))
        self.replay_off_until = int(state["replay_off_until"])
        self.generated = collections.deque(state["generated"], maxlen=self.generator_window)
        self.counts.update(state["counts"])
        self.events = list(state["events"])
