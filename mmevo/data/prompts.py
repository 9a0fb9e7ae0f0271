"""Prompt sources: where the examples of each GRPO step come from.

The trainer asks its source for ``take(k)`` examples per step and saves ``state_dict()`` in every checkpoint, so a
resumed run continues with exactly the prompts it would have seen. ``EpochSampler`` (seeded shuffled epochs over a
fixed train set) is the default; a loop passes its own (replay mix, curriculum, generated prompts).
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from mmevo.data.schema import Example


@runtime_checkable
class PromptSource(Protocol):
    def take(self, k: int) -> list[Example]:
        """The next ``k`` examples (the global batch: under data parallelism every rank takes the same ones)."""

    def state_dict(self) -> dict:
        """Everything needed to continue exactly (checkpointed with the run)."""

    def load_state_dict(self, state: dict) -> None:
        """Restore what ``state_dict`` returned."""


class EpochSampler:
    """Seeded shuffled pass over ``examples``, epoch after epoch; its position is part of the checkpoint."""

    def __init__(self, examples: Sequence[Example], seed: int):
        if len(examples) == 0:
            raise ValueError("the training set is empty (give data.train, or pass a prompt source)")
        self.examples = list(examples)
        self.n, self.seed, self.epoch, self.pos = len(self.examples), seed, 0, 0
        self._perm = self._make_perm()

    def _make_perm(self) -> list[int]:
        return np.random.default_rng([self.seed, self.epoch]).permutation(self.n).tolist()

    def take_indices(self, k: int) -> list[int]:
        out = []
        while len(out) < k:
            if self.pos == self.n:
                self.epoch, self.pos = self.epoch + 1, 0
                self._perm = self._make_perm()
            out.append(self._perm[self.pos])
            self.pos += 1
        return out

    def take(self, k: int) -> list[Example]:
        return [self.examples[i] for i in self.take_indices(k)]

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos, "n": self.n, "seed": self.seed}

    def load_state_dict(self, s: dict) -> None:
        if s["n"] != self.n:
            raise ValueError(f"checkpoint was made with {s['n']} training rows, this run has {self.n}")
        self.epoch, self.pos = s["epoch"], s["pos"]
        self._perm = self._make_perm()
