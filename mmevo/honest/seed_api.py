"""The HONEST seed's own interfaces (sections 2.3, 3.3 and 4.3), as thin adapters over mmevo's implementation.

The seed describes its pillars through the API of its reference code; mmevo implements them under its own names
(``mmevo.honest.replay``, ``mmevo.honest.curriculum``, ``mmevo.honest.protocol``). These adapters take and return
what the seed's snippets show, so code written against the seed runs on mmevo's implementation unchanged:

- ``parse_hindsight(text)``: the retrospective confidence r of a response's ``<hindsight>`` slot, or None (seed 2.3:
  a response without one, or with a malformed one, is silently skipped).
- ``CalibrationPrioritizedReplay``: ``add(prompt, gt, domain, difficulty, conf, correct)``,
  ``sample(n, alpha=0.6, eps=1e-3) -> list[dict]``, ``snapshot() -> dict`` (seed 3.3) and
  ``entropy_of_priorities()`` (seed 9's replay-collapse detector) over ``ReplayBuffer``.
  As there, priorities are (|c - y| + eps)^alpha, computed at sample time; as in mmevo, a prompt written again
  (same domain, difficulty and text) is updated in place rather than stored twice.
- ``SelfMutatingCurriculum(controller, max_hard_difficulty=8, promote_threshold=0.75, min_episodes_at_max=20)``:
  ``record_outcome``, ``maybe_promote(domain)`` (after every outcome) and ``sample(domain, rng)`` (seed 4.3) over
  a ``DifficultyController`` and a ``CurriculumSource``; demotion below ``demote_threshold`` (0.20) as there.

The seed's flags need no adapter: ``--hindsight-prob`` (2.3, 7) is ``honest.hindsight_prob``, the share of GRPO steps
whose prompt offers the hindsight slot (``mmevo.honest.strategy.HindsightSlotDraw``); ``parse_hindsight`` reads the
slot whether or not the step offered it (the reward head pays 0 on a step that did not).
"""

from __future__ import annotations

import random

from mmevo.data.schema import Example
from mmevo.honest.curriculum import CurriculumSource, DifficultyController
from mmevo.honest.protocol import parse_lenient, parse_strict
from mmevo.honest.replay import ReplayBuffer
from mmevo.honest.tasks import HonestTask
from mmevo.validation import is_blank_text, is_integer_number

__all__ = ["parse_hindsight", "CalibrationPrioritizedReplay", "SelfMutatingCurriculum"]


def parse_hindsight(text: str, strict: bool = False) -> float | None:
    """r in [0, 1] from ``<hindsight>r</hindsight>``, else None (no slot, a non-number or out of [0, 1]).

    ``strict`` reads the response with the training parser (the whole response must follow the protocol); by default
    the evaluation parser, which finds the slot wherever it is."""
    if not isinstance(text, str):
        return None
    return (parse_strict if strict else parse_lenient)(text).hindsight


class CalibrationPrioritizedReplay:
    """The seed's replay buffer (3.3) over ``mmevo.honest.replay.ReplayBuffer``."""

    def __init__(self, capacity: int = 4096, alpha: float = 0.6, eps: float = 1e-3, seed: int | None = None):
        self.buffer = ReplayBuffer(capacity, alpha, eps)
        self.rng = random.Random(seed)

    def __len__(self) -> int:
        return len(self.buffer)

    def add(self, prompt: str, gt, domain: str, difficulty: int, conf: float, correct: bool) -> None:
        """One prompt group's mean confidence ``conf`` and (majority) correctness ``correct``."""
        if not isinstance(prompt, str):
            raise ValueError(f"replay prompt must be a string, got {type(prompt).__name__}")
        # True was stored as the difficulty (id "math-dTrue") and a None domain as "None"
        if not isinstance(domain, str) or is_blank_text(domain):
            raise ValueError(f"replay domain must be a domain name, got {domain!r}")
        if not is_integer_number(difficulty) or difficulty < 1:
            raise ValueError(f"replay difficulty must be an integer >= 1, got {difficulty!r}")
        ex = Example(id=f"{domain}-d{difficulty}", problem=prompt, answer=str(gt), choices=[], images=[],
                     meta={"domain": domain, "difficulty": difficulty})
        self.buffer.add(ex, conf, correct)

    def sample(self, n: int, alpha: float | None = None, eps: float | None = None) -> list[dict]:
        """``n`` entries drawn with replacement, each with probability proportional to (|conf - correct| + eps)^alpha:
        dicts with the fields ``add`` took and the entry's ``priority``. alpha / eps default to the buffer's (the
        seed's 0.6 / 1e-3 unless built with others): fixed defaults of 0.6 / 1e-3 here ignored a buffer built with
        alpha=1, which then sampled at 0.6 while ``entropy_of_priorities`` and ``snapshot`` reported at 1."""
        alpha = self.buffer.alpha if alpha is None else alpha
        eps = self.buffer.eps if eps is None else eps
        out = []
        for e in self.buffer.sample(n, alpha, eps, self.rng):
            out.append({"prompt": e.example.problem, "gt": e.example.answer, "domain": e.example.meta["domain"],
                        "difficulty": e.example.meta["difficulty"], "conf": e.confidence, "correct": e.correct,
                        "priority": (e.error + eps) ** alpha})
        return out

    def entropy_of_priorities(self, alpha: float | None = None, eps: float | None = None) -> float:
        """Shannon entropy (nats) of the priority sampling distribution, by default at the alpha / eps this buffer
        was built with (as ``snapshot()["priority_entropy"]``): the seed's replay-collapse detector (section 9) calls
        ``buffer.entropy_of_priorities()`` and fires below log(2)."""
        return self.buffer.entropy_of_priorities(alpha, eps)

    def snapshot(self) -> dict:
        return self.buffer.snapshot()


class SelfMutatingCurriculum:
    """The seed's SMC (4.3) over a ``DifficultyController``: its ceiling per domain rises past difficulty 5 (up to
    ``max_hard_difficulty``) when the rolling accuracy at the ceiling is above ``promote_threshold`` over at least
    ``min_episodes_at_max`` episodes, and falls back below ``demote_threshold``; ``sample`` draws a task at or under
    the ceiling, mutated past 5."""

    def __init__(self, controller: DifficultyController, max_hard_difficulty: int = 8,
                 promote_threshold: float = 0.75, min_episodes_at_max: int = 20, demote_threshold: float = 0.20,
                 seed: int = 0, pool=()):
        controller.retune(max_hard_difficulty, promote_threshold, demote_threshold, min_episodes_at_max)
        self.controller = controller
        self.source = CurriculumSource(controller, pool, seed=seed)

    def record_outcome(self, domain: str, difficulty: int, correct: bool) -> None:
        """One episode's outcome (the controller's feedback path); ``maybe_promote`` then applies the rules."""
        # record() applies the rules itself; maybe_promote after it finds nothing more to change
        self.controller.record(domain, difficulty, correct)

    def maybe_promote(self, domain: str) -> str | None:
        """Raise (or lower) ``domain``'s ceiling when the rules say so: "promote" / "demote", else None."""
        return self.controller.maybe_change(domain)

    def ceiling(self, domain: str) -> int:
        return self.controller.ceiling(domain)

    def sample(self, domain: str, rng: random.Random | None = None) -> HonestTask:
        """A task of ``domain`` at a difficulty up to its ceiling: a base task up to 5, a verified mutation above."""
        self.controller.ceiling(domain)  # an unknown domain fails before the rng is swapped
        if rng is not None:
            self.source.rng = rng
        return self.source.draw(domain)

    def snapshot(self) -> dict:
        return self.controller.snapshot()
