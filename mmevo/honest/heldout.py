"""Keeping the calibration report's held-out tasks out of training.

The solver's prompts come from several producers: the train set (``split_honest_tasks`` keeps it apart already),
the SMC curriculum's generated and mutated tasks, the GSS stub generator and the trainable generator's pool. The
last three draw from the same grammar as the held-out tasks and reproduced some of them (an unmutated stub draw, a
curriculum cell without train tasks), so ``eval_after`` was partly measured on trained tasks.

``HeldoutGuard`` holds the held-out questions (compared as the held-out split compares them: the question text, here
with runs of whitespace collapsed) and counts each draw it turns away; each producer asks it and draws again.
``HeldoutGuardSource`` is the solver's outermost prompt source: it checkpoints that count, exposes it to the trainer
(``data/heldout_overlap_skipped``) and refuses a held-out prompt that reached it anyway (a producer left unguarded).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

__all__ = ["question_key", "HeldoutGuard", "HeldoutGuardSource", "draw_outside", "MAX_REDRAWS"]

MAX_REDRAWS = 1000  # consecutive held-out draws before a producer gives up (its grammar is nearly all held out)


def question_key(question: str) -> str:
    return " ".join(str(question).split())


class HeldoutGuard:
    """The held-out questions training must not draw, and how many draws it turned away (``skipped``)."""

    def __init__(self, questions: Iterable[str] = ()):
        self.keys = frozenset(question_key(q) for q in questions)
        self.skipped = 0

    def holds(self, question: str) -> bool:
        return bool(self.keys) and question_key(question) in self.keys

    def turns_away(self, question: str) -> bool:
        """Whether ``question`` is held out; counted when it is (the caller draws again or leaves it out)."""
        hit = self.holds(question)
        self.skipped += hit
        return hit

    def give_up(self, what: str) -> ValueError:
        return ValueError(f"{what}: {MAX_REDRAWS} draws in a row were held-out tasks (data.n_heldout covers almost "
                          "all of this domain and difficulty): lower data.n_heldout or widen the difficulty range")


def draw_outside(guard: HeldoutGuard | None, draw: Callable[[], T], question: Callable[[T], str], what: str) -> T:
    """``draw()`` again while its question is held out (each such draw counted); no guard: the first draw."""
    item = draw()
    tries = 0
    while guard is not None and guard.turns_away(question(item)):
        tries += 1
        if tries >= MAX_REDRAWS:
            raise guard.give_up(what)
        item = draw()
    return item


class HeldoutGuardSource:
    """Prompt source around the solver's (curriculum / replay / GSS mix): the guard's count in its checkpoint and as
    ``heldout_overlap_skipped``; everything else is the wrapped source's."""

    def __init__(self, base, guard: HeldoutGuard):
        if not callable(getattr(base, "take", None)):
            raise TypeError(f"base source {base!r} has no take(k)")
        self.base, self.guard = base, guard

    @property
    def heldout_overlap_skipped(self) -> int:
        return self.guard.skipped

    def take(self, k: int):
        out = self.base.take(k)
        leaked = [ex.id for ex in out if self.guard.holds(ex.problem)]
        if leaked:  # every producer draws again on a held-out task: one that does not is a bug, never trained on
            raise ValueError(f"prompts {leaked} are held-out calibration tasks, drawn by a source that does not ask "
                             "the held-out guard (mmevo.honest.heldout)")
        return out

    def metrics(self) -> dict[str, float]:
        return self.base.metrics() if hasattr(self.base, "metrics") else {}

    def __getattr__(self, name):  # epoch, generator, enabled ... of the wrapped source
        if name in ("base", "guard"):
            raise AttributeError(name)
        return getattr(self.base, name)

    def state_dict(self) -> dict:
        return {"base": self.base.state_dict(), "heldout_skipped": self.guard.skipped}

    def load_state_dict(self, state: dict) -> None:
        if "heldout_skipped" not in state:  # a checkpoint from before the guard: the source's own state
            self.base.load_state_dict(state)
            return
        self.base.load_state_dict(state["base"])
        self.guard.skipped = int(state["heldout_skipped"])
