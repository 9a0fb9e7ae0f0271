"""Plug-ins a self-play loop would write, used by tests/test_loop_hooks.py through the public hooks only.

- ``TaggingStrategy``: plain groups plus one ``aux`` dict per sample, a counter updated in ``after_rewards`` (its
  checkpointed state).
- ``AuxHead``: a reward head named by import path (``loop_plugins:AuxHead``) with arguments from config; its reward
  is built only from ``aux`` and the example's ``meta``.
- ``CountingSource``: a prompt source that makes new examples from its own seeded RNG (no fixed train set).
"""

from __future__ import annotations

import random

import torch

from mmevo.data.schema import Example
from mmevo.data.synthetic import generate_geometry
from mmevo.rewards.heads import RewardHead
from mmevo.rollout.strategy import RolloutStrategy, sample_groups


class TaggingStrategy(RolloutStrategy):
    name = "tagging"

    def __init__(self):
        self.rounds = 0  # after_rewards calls so far (checkpointed)
        self.reward_sum = 0.0
        self.seen_rewards: list[list[float]] = []  # not checkpointed: what this process saw

    def rollout(self, ctx, examples):
        ro = sample_groups(ctx, examples)
        # per-sample data for the heads: the sample's position in its group and the length of its response
        pos: dict[int, int] = {}
        ro.aux = []
        for g, c in zip(ro.group_ids.tolist(), ro.completions):
            ro.aux.append({"slot": pos.get(g, 0), "tokens": len(c.token_ids), "round": self.rounds})
            pos[g] = pos.get(g, 0) + 1
        return ro

    def after_rewards(self, rollout, rewards):
        self.rounds += 1
        self.reward_sum += float(rewards.sum())
        self.seen_rewards.append(rewards.tolist())
        return {"tagging/rounds": self.rounds}

    def state_dict(self):
        return {"rounds": self.rounds, "reward_sum": self.reward_sum}

    def load_state_dict(self, state):
        self.rounds, self.reward_sum = state["rounds"], state["reward_sum"]


class AuxHead(RewardHead):
    """reward = scale * slot + bonus * [meta.kind == kind]: a function of per-sample aux and meta only."""

    name = "aux_head"

    def __init__(self, scale: float = 1.0, bonus: float = 0.0, kind: str = ""):
        self.scale, self.bonus, self.kind = scale, bonus, kind
        self.calls = 0

    def score(self, samples):
        self.calls += 1
        r = torch.tensor([self.scale * s.aux["slot"] + self.bonus * (s.example.meta.get("kind") == self.kind)
                          for s in samples], dtype=torch.float32)
        gold_seen = sum(s.example.answer is not None for s in samples)
        return r, {"gold_seen": gold_seen, "calls": self.calls}

    def state_dict(self):
        return {"calls": self.calls}

    def load_state_dict(self, state):
        self.calls = state["calls"]


class CountingSource:
    """Generates k fresh synthetic problems per take from a seeded RNG; ids are unique per content."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.taken = 0
        self.history: list[list[str]] = []  # problems handed out in this process (not checkpointed)

    def take(self, k: int) -> list[Example]:
        seed = self.rng.randrange(2**31)
        exs = generate_geometry(k, seed=seed)
        for i, ex in enumerate(exs):
            ex.id = f"gen-{seed}-{i}"
        self.taken += k
        self.history.append([ex.problem for ex in exs])
        return exs

    def state_dict(self):
        return {"rng": self.rng.getstate(), "taken": self.taken}

    def load_state_dict(self, state):
        self.rng.setstate(state["rng"])
        self.taken = state["taken"]


class LengthHead(RewardHead):
    """reward = characters in the response / 100: varies within every group, with no gold (a signal for tests)."""

    name = "length_head"

    def score(self, samples):
        return torch.tensor([len(s.response) / 100 for s in samples], dtype=torch.float32), {}
