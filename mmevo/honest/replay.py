"""CPR, calibration-prioritized replay (seed 3): a ring buffer of past prompts, re-sampled by calibration error.

Entry i holds a prompt (its ``Example``), its group's mean stated confidence c_i and majority correctness y_i (both
over the samples that stated a confidence). Sampling is PER's proportional rule with the calibration error as priority
(seed 3.1), computed lazily at ``sample`` time::

    p_i = (|c_i - y_i| + eps)^alpha / sum_j (|c_j - y_j| + eps)^alpha        (alpha = 0.6, eps = 1e-3)

so a perfectly calibrated prompt is replayed with weight eps^alpha and a maximally miscalibrated one at full weight.
Linear scan, no sum-tree (seed 3.3: < 1 ms for <= 10K entries). Draws are with replacement, as in PER.

- ``ReplayBuffer(capacity=4096)``: ``add(example, confidence, correct)`` (a prompt already in the buffer, same id and
  text, is updated in place: PER's priority update, so replays refresh rather than duplicate it; a new prompt takes
  the oldest slot once the ring is full), ``sample(n, alpha, eps, rng)``, ``probabilities``,
  ``entropy_of_priorities`` (nats; seed 9's detector: < log 2 means the replay is stuck on one or two prompts),
  ``snapshot()`` (JSON-able; logged as ``replay/<key>``, e.g. ``replay/priority_entropy``),
  ``state_dict`` / ``load_state_dict`` (a resume drops the checkpoint's entries this run cannot use and counts
  them, ``resume_dropped``; ``ReplayMixSource`` drops the held-out calibration tasks among them).
- ``ReplayMixSource(base, buffer, share=0.3, warmup_steps=100)``: a prompt source. For its first ``warmup_steps``
  takes it is ``base``; after that each prompt of a take comes from the buffer with probability ``share`` and from
  ``base`` otherwise (seed 3.4). ``enabled = False`` switches the mix off (the seed's entropy guardrail: the owner
  of a ``mmevo.honest.health.HealthMonitor`` sets it from ``monitor.replay_enabled()``). Replayed examples are
  shallow copies with ``meta["replay"] = True`` (the curriculum does not count them as its own episodes). Its state
  (base source's, RNG, counters, the buffer) is checkpointed.
- ``group_outcomes`` / ``replay_write_back``: per prompt group, mean confidence and majority correctness from the
  rollout's ``aux`` (``correct`` / ``confidence`` per sample, see ``mmevo.honest.strategy``), written into the buffer;
  the buffer's correctness is over the samples that stated a confidence, the curriculum's over all graded samples.
"""

from __future__ import annotations

import dataclasses
import math
import random
import sys
from dataclasses import dataclass
from collections.abc import Callable, Sequence

import torch

from mmevo.data.schema import Example
from mmevo.rewards.honest import is_outcome, replay_priorities
from mmevo.validation import is_integer_number, is_real_number

__all__ = ["ReplayEntry", "ReplayBuffer", "ReplayMixSource", "GroupOutcome", "group_outcomes", "replay_write_back",
           "REPLAY_FLAG"]

REPLAY_FLAG = "replay"  # meta key on the copies ReplayMixSource hands out


@dataclass
class ReplayEntry:
    example: Example  # the prompt (clean: no replay flag)
    confidence: float  # the group's mean stated confidence c, in [0, 1]
    correct: bool  # the group's majority correctness y, over the samples that stated a confidence
    writes: int = 1  # times written (first add + in-place updates)

    @property
    def error(self) -> float:
        """Calibration error |c - y|, the priority before eps and alpha."""
        return abs(self.confidence - float(self.correct))


def _key(ex: Example) -> tuple[str, str]:
    return (ex.id, ex.problem)


def _clean(ex: Example) -> Example:
    if REPLAY_FLAG in (ex.meta or {}):
        return dataclasses.replace(ex, meta={k: v for k, v in ex.meta.items() if k != REPLAY_FLAG})
    return ex


class ReplayBuffer:
    """Ring buffer of ``capacity`` prompts with their calibration stats (see the module docstring)."""

    def __init__(self, capacity: int = 4096, alpha: float = 0.6, eps: float = 1e-3):
        if not is_integer_number(capacity) or capacity < 1:
            raise ValueError(f"replay capacity must be a positive integer, got {capacity!r}")
        _check_alpha_eps(alpha, eps)
        self.capacity, self.alpha, self.eps = int(capacity), float(alpha), float(eps)
        self.slots: list[ReplayEntry | None] = [None] * capacity
        self.next_slot = 0  # where the next new prompt goes (the oldest once full)
        self.index: dict[tuple[str, str], int] = {}  # prompt key -> slot
        self.added = self.updated = self.overwritten = 0
        self.resume_dropped = 0  # checkpoint entries a resume could not use (``load_state_dict``)

    def __len__(self) -> int:
        return len(self.index)

    def entries(self) -> list[ReplayEntry]:
        """Live entries in slot order (the order of ``probabilities``)."""
        return [e for e in self.slots if e is not None]

    def add(self, example: Example, confidence: float, correct: bool) -> None:
        """Write one prompt's group stats: update it in place when present, else take the next ring slot."""
        c = _number(confidence)
        if not 0.0 <= c <= 1.0:  # also rejects NaN
            raise ValueError(f"replay confidence must be in [0, 1], got {confidence!r}")
        if not is_outcome(correct):  # bool(None) / bool(0.5) would store a y
            raise ValueError(f"replay correct must be True / False (or 0 / 1), got {correct!r}")
        example = _clean(example)
        key = _key(example)
        slot = self.index.get(key)
        if slot is not None:
            e = self.slots[slot]
            e.example, e.confidence, e.correct, e.writes = example, c, bool(correct), e.writes + 1
            self.updated += 1
            return
        slot = self.next_slot
        old = self.slots[slot]
        if old is not None:
            del self.index[_key(old.example)]
            self.overwritten += 1
        self.slots[slot] = ReplayEntry(example, c, bool(correct))
        self.index[key] = slot
        self.next_slot = (slot + 1) % self.capacity
        self.added += 1

    def _alpha_eps(self, alpha, eps) -> tuple[float, float]:
        alpha = self.alpha if alpha is None else alpha
        eps = self.eps if eps is None else eps
        _check_alpha_eps(alpha, eps)  # before float(), which read True as 1
        return float(alpha), float(eps)

    def probabilities(self, alpha: float | None = None, eps: float | None = None) -> torch.Tensor:
        """p_i over the live entries (slot order), float64 [S]; uniform when every priority is 0 (eps = 0)."""
        alpha, eps = self._alpha_eps(alpha, eps)
        live = self.entries()
        if not live:
            return torch.zeros(0, dtype=torch.float64)
        conf = torch.tensor([e.confidence for e in live], dtype=torch.float64)  # [S]
        correct = torch.tensor([e.correct for e in live])  # [S] bool
        prio = replay_priorities(conf, correct, alpha, eps)  # [S] (|c - y| + eps)^alpha
        total = prio.sum()
        if math.isfinite(total) and total > 0:
            return prio / total
        # a large alpha overflows the powers (1.001^alpha = inf: inf / inf is NaN) or underflows them all to 0: the
        # same ratios in log space, alpha * log(|c - y| + eps) (-inf where the base is 0)
        base = (conf - correct.to(conf.dtype)).abs() + eps  # [S]
        if alpha > 0 and (base > 0).any():
            return torch.softmax(alpha * base.log(), 0)
        return torch.full_like(prio, 1.0 / len(live))  # every priority is 0 (eps = 0, all calibrated)

    def sample(self, n: int, alpha: float | None = None, eps: float | None = None,
               rng: random.Random | None = None) -> list[ReplayEntry]:
        """``n`` entries drawn with replacement with probability ``probabilities(alpha, eps)`` (seeded by ``rng``)."""
        if not is_integer_number(n) or n < 0:  # True drew one entry, 1.5 / "2" raised a TypeError inside random
            raise ValueError(f"replay sample size n must be an integer >= 0, got {n!r}")
        if n == 0:
            return []
        if not len(self):
            raise ValueError("cannot sample from an empty replay buffer")
        live = self.entries()
        p = self.probabilities(alpha, eps).tolist()
        rng = rng if rng is not None else random.Random()
        return [live[i] for i in rng.choices(range(len(live)), weights=p, k=n)]

    def entropy_of_priorities(self, alpha: float | None = None, eps: float | None = None) -> float:
        """Shannon entropy -sum p_i log p_i (nats) of the sampling distribution; 0 for an empty buffer."""
        p = self.probabilities(alpha, eps)
        p = p[p > 0]
        return float(-(p * p.log()).sum()) if len(p) else 0.0

    def snapshot(self) -> dict:
        """Buffer health for logging (JSON-able): size, counters, mean error / confidence / accuracy, entropy."""
        live = self.entries()
        out = {"size": len(live), "capacity": self.capacity, "added": self.added, "updated": self.updated,
               "overwritten": self.overwritten, "resume_dropped": self.resume_dropped,
               "priority_entropy": self.entropy_of_priorities(),
               "priority_entropy_max": math.log(len(live)) if live else 0.0}
        if live:
            out.update({"error_mean": sum(e.error for e in live) / len(live),
                        "confidence_mean": sum(e.confidence for e in live) / len(live),
                        "accuracy": sum(e.correct for e in live) / len(live)})
        return out

    def state_dict(self) -> dict:
        return {"capacity": self.capacity, "next_slot": self.next_slot, "added": self.added, "updated": self.updated,
                "overwritten": self.overwritten, "resume_dropped": self.resume_dropped,
                "slots": [None if e is None else {"example": e.example, "confidence": e.confidence,
                                                  "correct": e.correct, "writes": e.writes} for e in self.slots]}

    def load_state_dict(self, state: dict, unusable: Callable[[Example], str | None] | None = None) -> None:
        """Restore in place (the strategy that writes into this buffer holds the same object).

        An entry this run cannot use is dropped, not restored (``entry_problem``: a slot an older mmevo wrote with a
        correctness other than 0 / 1 or a confidence outside [0, 1], no prompt; ``unusable(example)``: the caller's
        reason, e.g. a held-out calibration task). Losing a few replay candidates only changes which past prompts
        are revisited, where refusing would leave no way to continue the run; the resume is then not exact, so the
        drops are counted (``resume_dropped``, cumulative and checkpointed: ``replay/resume_dropped``) and stderr
        names the first of them."""
        if state["capacity"] != self.capacity:
            raise ValueError(f"checkpoint's replay buffer has capacity {state['capacity']}, this run's "
                             f"{self.capacity} (honest.replay_capacity)")
        slots: list[ReplayEntry | None] = []
        dropped: list[str] = []
        for i, s in enumerate(state["slots"]):
            why = None if s is None else entry_problem(s) or (unusable(s["example"]) if unusable else None)
            if why is not None:
                ex = s.get("example") if isinstance(s, dict) else None
                dropped.append(f"slot {i}" + (f" (id {ex.id!r})" if isinstance(ex, Example) else "") + f": {why}")
            slots.append(None if s is None or why is not None else
                         ReplayEntry(_current_id(s["example"]), float(s["confidence"]), bool(s["correct"]),
                                     int(s["writes"])))
        # one slot per prompt: generated problems an older mmevo keyed by their expression's spelling may now share a
        # key; the later slot stays (a shared key left in two slots made ``add`` drop the survivor's index entry, and
        # then a KeyError when the ring came round to it)
        index: dict[tuple[str, str], int] = {}
        for i, e in enumerate(slots):
            if e is None:
                continue
            earlier = index.get(_key(e.example))
            if earlier is not None:
                dropped.append(f"slot {earlier} (id {slots[earlier].example.id!r}): the same generated problem as "
                               f"slot {i}")
                slots[earlier] = None
            index[_key(e.example)] = i
        self.slots, self.index = slots, index
        self.next_slot = int(state["next_slot"])
        self.added, self.updated = int(state["added"]), int(state["updated"])
        self.overwritten = int(state["overwritten"])
        self.resume_dropped = int(state.get("resume_dropped", 0)) + len(dropped)
        if dropped:
            print(f"[mmevo] resume: dropped {len(dropped)} of the checkpoint's replay entries that this run cannot "
                  f"use (they will not be replayed, so the resume is not exact; counted as replay/resume_dropped): "
                  f"{'; '.join(dropped[:3])}{' ...' if len(dropped) > 3 else ''}", file=sys.stderr)


def _current_id(ex: Example) -> Example:
    """``ex`` with the id this mmevo gives it: a GSS-generated problem is named by its question
    (``generated_problem_id``); an older mmevo named it by its expression's text, so the same problem drawn again
    after a resume took a second slot instead of updating its entry."""
    from mmevo.honest.tasks import generated_problem_id

    meta = ex.meta if isinstance(ex.meta, dict) else {}
    if meta.get("domain") == "gss" and isinstance(ex.id, str) and ex.id.startswith("gss-") \
            and "expression" in meta:
        new_id = generated_problem_id(ex.problem)
        if new_id != ex.id:
            return dataclasses.replace(ex, id=new_id)
    return ex


def entry_problem(slot) -> str | None:
    """Why a checkpoint's replay slot cannot be restored as an entry (None: it can). Older mmevo versions stored a
    group's y as None, 0.5 or "False" (``bool("False")`` is True) and did not check the confidence."""
    if not isinstance(slot, dict):
        return f"not a replay entry ({type(slot).__name__})"
    ex = slot.get("example")
    if not isinstance(ex, Example) or not isinstance(ex.id, str) or not isinstance(ex.problem, str) \
            or not ex.problem:
        return f"no prompt (example {type(ex).__name__})"
    if ex.answer is None:
        return "no gold answer"
    if not 0.0 <= _number(slot.get("confidence")) <= 1.0:
        return f"confidence {slot.get('confidence')!r} is not a number in [0, 1]"
    if not is_outcome(slot.get("correct")):
        return f"correct {slot.get('correct')!r} is not True / False"
    writes = slot.get("writes")
    if not is_integer_number(writes) or writes < 1:
        return f"writes {writes!r} is not a count >= 1"
    return None


def _number(x) -> float:
    """``x`` as a float; NaN for what is not a number (a string "0.5" is not a confidence, nor is a correctness
    True / False: float() would read it as 1.0 / 0.0, numpy and torch booleans included)."""
    if isinstance(x, (str, bytes, bool)) or getattr(x, "dtype", None) in (bool, torch.bool):
        return math.nan
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _check_alpha_eps(alpha, eps) -> None:
    # a number first: None failed inside ``>=`` with a TypeError, True was read as alpha = 1
    if not (is_real_number(alpha) and is_real_number(eps) and alpha >= 0 and eps >= 0 and math.isfinite(alpha)
            and math.isfinite(eps)):
        raise ValueError(f"replay alpha and eps must be finite and >= 0, got alpha={alpha}, eps={eps}")


class ReplayMixSource:
    """Prompt source: ``base`` for ``warmup_steps`` takes, then a ``share`` of replayed prompts (module docstring)."""

    def __init__(self, base, buffer: ReplayBuffer, share: float = 0.3, warmup_steps: int = 100,
                 alpha: float = 0.6, eps: float = 1e-3, seed: int = 0, heldout=None):
        if not callable(getattr(base, "take", None)):
            raise TypeError(f"base source {base!r} has no take(k)")
        if not is_real_number(share) or not 0.0 <= share <= 1.0:  # True was a share of 1, "0.3" a TypeError
            raise ValueError(f"replay share must be a number in [0, 1], got {share!r}")
        if not is_integer_number(warmup_steps) or warmup_steps < 0:  # int() cut 2.5 steps to 2
            raise ValueError(f"replay warm-up must be an integer >= 0 steps, got {warmup_steps!r}")
        _check_alpha_eps(alpha, eps)
        self.base, self.buffer = base, buffer
        self.heldout = heldout  # a HeldoutGuard: a resumed buffer's held-out tasks are dropped (``load_state_dict``)
        self.share, self.warmup_steps, self.alpha, self.eps = float(share), int(warmup_steps), float(alpha), float(eps)
        self.seed = seed
        self.rng = random.Random(f"cpr/{seed}")
        self.takes = 0  # take() calls so far (= trainer steps)
        self.replayed = 0  # replayed prompts handed out so far
        self.last_replayed = 0  # in the last take
        self.last_active = False  # whether the last take mixed in replays
        self.enabled = True  # a guardrail may switch the mix off (seed 9: 50 steps after low priority entropy)

    @property
    def epoch(self):  # the trainer logs data/epoch when the source has one (EpochSampler as base)
        return self.base.epoch

    def active(self) -> bool:
        """Whether the next take mixes in replays: enabled, past the warm-up, with something in the buffer."""
        return self.enabled and self.takes >= self.warmup_steps and len(self.buffer) > 0

    def take(self, k: int) -> list[Example]:
        self.last_active = self.active()
        from_replay = [self.rng.random() < self.share for _ in range(k)] if self.last_active else [False] * k
        n_replay = sum(from_replay)
        fresh = iter(self.base.take(k - n_replay))  # even 0: the curriculum's metrics are of this take
        replays = iter(dataclasses.replace(e.example, meta={**(e.example.meta or {}), REPLAY_FLAG: True})
                       for e in self.buffer.sample(n_replay, self.alpha, self.eps, self.rng))
        out = [next(replays) if r else next(fresh) for r in from_replay]
        self.takes += 1
        self.replayed += n_replay
        self.last_replayed = n_replay
        return out

    def metrics(self) -> dict[str, float]:
        snap = self.buffer.snapshot()
        out = {f"replay/{k}": float(v) for k, v in snap.items() if k != "capacity"}
        out.update({"replay/active": float(self.last_active), "replay/batch_replayed": float(self.last_replayed),
                    "replay/replayed_total": float(self.replayed)})
        if hasattr(self.base, "metrics"):
            out.update(self.base.metrics())
        return out

    def state_dict(self) -> dict:
        """The base source's state, the mixing RNG and counters, and the buffer (it lives in this checkpoint)."""
        return {"base": self.base.state_dict(), "rng": self.rng.getstate(), "takes": self.takes,
                "replayed": self.replayed, "last_replayed": self.last_replayed, "last_active": self.last_active,
                "enabled": self.enabled, "buffer": self.buffer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.base.load_state_dict(state["base"])
        s = state["rng"]
        self.rng.setstate((s[0], tuple(s[1]), s[2]))
        self.takes, self.replayed = int(state["takes"]), int(state["replayed"])
        self.last_replayed, self.last_active = int(state["last_replayed"]), bool(state["last_active"])
        self.enabled = bool(state.get("enabled", True))
        self.buffer.load_state_dict(state["buffer"], self._unusable)

    def _unusable(self, example: Example) -> str | None:
        """A checkpoint's entry this run must not replay: a held-out calibration task (a checkpoint written before
        the held-out guard, or under another held-out set, trained and stored some; replaying one would put it into
        training, and the guard around the solver's source stops the run at the first)."""
        if self.heldout is not None and self.heldout.holds(example.problem):
            return "a held-out calibration task of this run"
        return None


# ------------------------------------------------------------------------------------------------- write-back
@dataclass(frozen=True)
class GroupOutcome:
    """One prompt group's aggregate (seed 3.4: majority-vote correctness, mean confidence)."""

    first: int  # index of the group's first sample (its example is the group's prompt)
    n: int  # samples aggregated (trainable ones)
    n_graded: int  # of them with a correctness (correct is not None)
    n_correct: int
    correct: bool | None  # n_correct > n_graded / 2 (a tie is not a majority); None when nothing is graded
    confidence: float | None  # mean of the stated confidences; None when no sample stated one
    # majority correctness of the graded samples that stated a confidence (the replay's y); None when there are none.
    # Gold is per prompt, so in a graded group these are exactly the samples behind ``confidence``
    confident_correct: bool | None = None


def group_outcomes(group_ids: torch.Tensor, aux: Sequence[dict], mask: torch.Tensor | None = None
                   ) -> list[GroupOutcome]:
    """Per group (in order of first appearance) majority correctness and mean confidence, and the majority
    correctness of the samples that stated a confidence (``confident_correct``).

    ``correct`` counts every graded sample (an abstain or malformed answer has not solved the task: the curriculum's
    label). The replay's priority |c - y| needs c and y from the same samples, else a group with one right answer
    at 0.9 and three abstains would store y = 0, c = 0.9 and look maximally miscalibrated. The seed's write-back is
    "majority-vote correctness, mean confidence" (3.4), an entry with one (c, y) pair whose |c - y| is the priority
    (3.1); the majority over the confident samples keeps that form (a per-sample mean of |c_i - y_i| would not).

    group_ids long [B]; aux: B dicts with ``correct`` (bool | None) and ``confidence`` (float | None);
    mask bool [B] (default all): samples left out (CSRS re-inferences) do not count."""
    gids = group_ids.tolist()
    if len(aux) != len(gids):
        raise ValueError(f"{len(gids)} group ids but {len(aux)} aux dicts")
    for i, a in enumerate(aux):
        _check_sample_aux(i, a)
    keep = [True] * len(gids) if mask is None else [bool(m) for m in mask.tolist()]
    members: dict[int, list[int]] = {}
    for i, (g, k) in enumerate(zip(gids, keep)):
        if k:
            members.setdefault(g, []).append(i)
    out = []
    for idx in members.values():
        marks = [aux[i].get("correct") for i in idx]
        graded = [m for m in marks if m is not None]
        confs = [aux[i]["confidence"] for i in idx if aux[i].get("confidence") is not None]
        confident = [bool(aux[i]["correct"]) for i in idx
                     if aux[i].get("confidence") is not None and aux[i].get("correct") is not None]
        n_correct = sum(bool(m) for m in graded)
        out.append(GroupOutcome(first=idx[0], n=len(idx), n_graded=len(graded), n_correct=n_correct,
                                correct=(n_correct > len(graded) / 2) if graded else None,
                                confidence=sum(confs) / len(confs) if confs else None,
                                confident_correct=(sum(confident) > len(confident) / 2) if confident else None))
    return out


def _check_sample_aux(i: int, aux: dict) -> None:
    """A sample's ``correct`` (None or 0 / 1) and ``confidence`` (None or a number in [0, 1]), else a ValueError
    naming the sample and field: ``bool("False")`` and ``bool(0.5)`` counted as a hit, a True confidence as 1.0, and
    a NaN one made the group's mean NaN."""
    correct, conf = aux.get("correct"), aux.get("confidence")
    if correct is not None and not is_outcome(correct):
        raise ValueError(f"sample {i}: aux 'correct' must be True / False (or 0 / 1) or None, got {correct!r}")
    if conf is not None and not 0.0 <= _number(conf) <= 1.0:  # NaN, bools and text fail too
        raise ValueError(f"sample {i}: aux 'confidence' must be a number in [0, 1] or None, got {conf!r}")


def replay_write_back(buffer: ReplayBuffer, rollout, outcomes: list[GroupOutcome] | None = None) -> dict:
    """Write each group's (mean confidence, majority correctness of the same confident samples) into ``buffer``;
    groups without gold or without any stated confidence are skipped and counted. ``outcomes`` defaults to
    ``group_outcomes`` of the rollout."""
    if outcomes is None:
        outcomes = group_outcomes(rollout.group_ids, [rollout.aux_of(i) for i in range(len(rollout))],
                                  rollout.trainable_mask())
    written = no_gold = no_conf = 0
    for o in outcomes:
        if o.correct is None:
            no_gold += 1
        elif o.confidence is None or o.confident_correct is None:
            no_conf += 1
        else:
            buffer.add(rollout.examples[o.first], o.confidence, o.confident_correct)
            written += 1
    return {"replay/written": float(written), "replay/skipped_no_gold": float(no_gold),
            "replay/skipped_no_confidence": float(no_conf)}
