"""Helpers for driving the MM-Zero strategies with forced outputs: a frozen role whose samples a script decides, and
the rollout a proposer / coder step starts from."""

from types import SimpleNamespace

import torch

from mmevo.rollout.base import Completion
from mmevo.rollout.strategy import Rollout


class Scripted:
    """A frozen role whose samples ``script(example)`` forces."""

    def __init__(self, script):
        self.script = script

    def sample(self, exs, n, seed):
        return [self.script(ex) for ex in exs]


def scripted_rollout(texts) -> Rollout:
    """One-token completions carrying ``texts``, one group per text."""
    n = len(texts)
    return Rollout([None] * n, [Completion([1], [0.0], "stop") for _ in texts], list(texts),
                   torch.tensor(list(range(n)), dtype=torch.long),
                   [SimpleNamespace(id=f"e{i}", meta={}, choices=None) for i in range(n)])
