"""Reward heads: named, weighted scorers of a rollout batch. Each may keep state that is checkpointed with the run."""

from __future__ import annotations

import importlib
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch

from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import comparisons_cut_short
from mmevo.rewards.format import format_rewards
from mmevo.rewards.honest import HonestBrierHead, HonestFormatHead, HonestHindsightHead
from mmevo.rewards.majority import majority_vote_rewards
from mmevo.rewards.mmzero import CoderHead, ProposerHead
from mmevo.rewards.prism import PrismCoverageHead
from mmevo.validation import as_index, is_bool


@dataclass
class ScoredSample:
    """What a reward head sees of one sample."""

    response: str  # decoded response text (the whole assistant turn)
    group_id: int  # samples of one prompt share it
    gold: str | None  # gold answer when known (None in label-free runs)
    choices: Sequence[str] | None  # multiple-choice options, [] / None for free form
    truncated: bool = False  # hit max_tokens without a stop token
    role: str = "maternal"  # "maternal" (trained on) or "reinference" (only feeds rewards); not a loop's agent role
    parent: int = -1  # reinference: index of its maternal sample in the batch
    eval_gold: str | None = None  # gold kept for logged diagnostics only, also in label-free runs; never a reward
    aux: dict = field(default_factory=dict)  # per-sample data from the rollout strategy (Rollout.aux)
    example: Any = None  # the sample's Example (its meta); answer/solution blanked in label-free runs


def group_of(sample: ScoredSample, i: int) -> int:
    """The sample's group id as a plain int: a tensor element hashes by identity, making each sample its own group."""
    try:  # a bool is refused (True would join group 1)
        return as_index(sample.group_id)
    except TypeError:
        raise ValueError(f"samples[{i}].group_id must be an integer, got {sample.group_id!r}") from None


SAMPLE_ROLES = ("maternal", "reinference")


def is_maternal(sample: ScoredSample, i: int) -> bool:
    """Whether the sample is trained on; a role other than the two the trainer writes is a ValueError naming it (a
    misspelt "Maternal" was silently a re-inference: SFR gave it 0 and counted its answer in f_r)."""
    if not (isinstance(sample.role, str) and sample.role in SAMPLE_ROLES):
        raise ValueError(f"samples[{i}].role must be one of {SAMPLE_ROLES}, got {sample.role!r:.60}")
    return sample.role == "maternal"


class RewardHead:
    """Base class: ``score`` returns rewards [B] and metrics; ``state_dict`` / ``load_state_dict`` for resume."""

    name = "base"

    def score(self, samples: Sequence[ScoredSample]) -> tuple[torch.Tensor, dict]:
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class AccuracyHead(RewardHead):
    """Verifiable accuracy against the gold answer (1/0)."""

    name = "accuracy"

    def score(self, samples):
        missing = sum(s.gold is None for s in samples)
        if samples and missing == len(samples):  # an empty batch (a rank without samples) is not a label-free run
            raise ValueError("reward head 'accuracy' needs gold answers, but this batch has none "
                             "(label-free run? use the 'majority' head)")
        r = accuracy_rewards([s.response for s in samples], [s.gold for s in samples], [s.choices for s in samples])
        return r, {"no_gold": missing}


class FormatHead(RewardHead):
    """``<think>…</think>`` then ``\\boxed{}`` (1/0)."""

    name = "format"

    def score(self, samples):
        return format_rewards([s.response for s in samples]), {}


class MajorityHead(RewardHead):
    """MM-UPT majority vote: 1 iff the answer equals the group's modal answer; no answer -> 0. Label-free."""

    name = "majority"

    def score(self, samples):
        r, info = majority_vote_rewards([s.response for s in samples], [s.group_id for s in samples],
                                        [s.choices for s in samples])
        metrics = {k: float(v) for k, v in info.items() if isinstance(v, (int, float))}
        golds = {group_of(s, i): s.eval_gold for i, s in enumerate(samples)}
        labels = info.get("pseudo_labels", {})
        if labels and all(g is not None for g in golds.values()):  # logged only, never used for training
            from mmevo.rewards.answers import answers_equivalent

            chs = {group_of(s, i): s.choices for i, s in enumerate(samples)}
            hits = [answers_equivalent(labels.get(g), golds[g], chs[g]) for g in golds]
            metrics["pseudo_label_acc"] = sum(hits) / len(hits)
        return r, metrics


class SFRHead(RewardHead):
    """CSRS softened frequency reward (Eq. 7-8) for maternal samples; re-inferences get 0 (never trained on).

    Also logs the collapse diagnostics of CSRS: modal-answer share and distinct answers per group (maternal),
    the share of groups where SFR and majority vote pick different best responses, and pseudo-label accuracy
    when gold labels exist (logged only).
    """

    name = "sfr"

    def __init__(self, gamma: float = 0.2, beta: float = 5.0):
        from mmevo.rewards.sfr import nonnegative_real

        # checked here, when the trainer (and the CLI's up-front check) builds the head, not at the first reward
        self.gamma, self.beta = nonnegative_real("sfr gamma", gamma), nonnegative_real("sfr beta", beta)
        if self.gamma > 1:
            from mmevo.config import SFR_GAMMA_ABOVE_ONE

            raise ValueError(f"sfr gamma must be in [0, 1], got {gamma!r} ({SFR_GAMMA_ABOVE_ONE})")

    def score(self, samples):
        from mmevo.rewards.answers import answers_equivalent, extract_answer, group_answer_keys
        from mmevo.rewards.sfr import softened_frequency_rewards

        rewards = torch.zeros(len(samples), dtype=torch.float32)
        groups: dict[int, list[int]] = {}
        for i, s in enumerate(samples):
            groups.setdefault(group_of(s, i), []).append(i)
        modal, distinct, disagree, label_hits, labelled = [], [], 0, 0, 0
        for idx in groups.values():
            choices = samples[idx[0]].choices
            answers = [extract_answer(samples[i].response, choices) for i in idx]
            keys = dict(zip(idx, group_answer_keys(answers, choices)))
            mat = [i for i in idx if is_maternal(samples[i], i)]
            rein = [i for i in idx if not is_maternal(samples[i], i)]
            r = softened_frequency_rewards([keys[i] for i in mat], [keys[i] for i in rein], self.gamma, self.beta)
            rewards[mat] = r.float()
            mkeys = [keys[i] for i in mat if keys[i] is not None]
            counts = {k: mkeys.count(k) for k in mkeys}
            modal.append(max(counts.values()) / len(mat) if counts else 0.0)
            distinct.append(len(counts))
            if counts:  # majority vote's best set vs SFR's best set among maternal responses
                mode = max(counts, key=lambda k: (counts[k], -mkeys.index(k)))
                mv_best = {i for i in mat if keys[i] == mode}
                sfr_best = {i for i, v in zip(mat, r.tolist()) if v > 0 and v == r.max().item()}
                disagree += mv_best != sfr_best
            gold = samples[idx[0]].eval_gold
            if gold is not None:
                labelled += 1
                best = int(r.argmax()) if r.numel() and r.max() > 0 else None
                label_hits += best is not None and answers_equivalent(answers[idx.index(mat[best])], gold, choices)
        if not groups:  # an empty batch (a rank without samples): no rewards, no group statistics
            return rewards, {}
        metrics = {"modal_share": sum(modal) / len(modal), "distinct_answers": sum(distinct) / len(distinct),
                   "sfr_mv_disagree_frac": disagree / len(groups)}
        if labelled:
            metrics["pseudo_label_acc"] = label_hits / labelled
        return rewards, metrics


HEADS: dict[str, Callable[..., RewardHead]] = {"accuracy": AccuracyHead, "format": FormatHead,
                                               "majority": MajorityHead, "sfr": SFRHead,
                                               "mmzero_proposer": ProposerHead, "mmzero_coder": CoderHead,
                                               "prism_coverage": PrismCoverageHead}
HEADS.update({"honest_brier": HonestBrierHead, "honest_hindsight": HonestHindsightHead,
              "honest_format": HonestFormatHead})  # HONEST calibration heads (mmevo.rewards.honest)


def _honest_generator_head(**kwargs) -> RewardHead:
    """``honest_generator``: GSS generator reward, mean |c - y| of the frozen solver (mmevo.honest.selfplay)."""
    from mmevo.honest.selfplay import HonestGeneratorHead

    return HonestGeneratorHead(**kwargs)


HEADS["honest_generator"] = _honest_generator_head


def register_head(name: str, factory: Callable[..., RewardHead]) -> None:
    """Plug-in point for other reward heads (MM-Zero roles, Prism, HONEST); or name one by import path."""
    HEADS[name] = factory


def resolve_head(name: str) -> Callable[..., RewardHead]:
    """A registered head name, or a dotted import path ``package.module:Class`` (``package.module.Class`` too)."""
    if name in HEADS:
        return HEADS[name]
    if ":" in name or "." in name:
        module, _, attr = name.partition(":") if ":" in name else name.rpartition(".")
        try:
            obj = importlib.import_module(module)
        except ImportError as e:
            raise ValueError(f"reward head {name!r}: cannot import module {module!r} ({e})") from None
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise ValueError(f"reward head {name!r}: module {module!r} has no attribute {attr!r}")
            obj = getattr(obj, part)
        if not callable(obj):
            raise ValueError(f"reward head {name!r} is not a class or factory")
        return obj
    raise ValueError(f"unknown reward head {name!r}; known: {sorted(HEADS)}, or give an import path "
                     "'package.module:Class'")


def head_metric_name(name: str) -> str:
    """Metric prefix of a head: its registered name, or the class part of an import path."""
    return name.rpartition(":")[2].rpartition(".")[2] if name not in HEADS else name


class RewardMixer:
    """Weighted sum of heads; logs each head's mean/std and counts empty / unparseable responses.

    ``weights`` maps head names (registered, or import paths) to weights; ``head_kwargs`` maps the same names to the
    keyword arguments each head is built with (``reward.head_args``).
    """

    def __init__(self, weights: dict[str, float], head_kwargs: dict[str, dict] | None = None):
        kw = head_kwargs or {}
        stray = [n for n in kw if n not in weights]
        if stray:
            raise ValueError(f"reward.head_args has arguments for {stray}, which are not in reward.heads "
                             f"{sorted(weights)}")
        if not weights:  # no head: every reward 0, every advantage 0, a run that silently learns nothing
            raise ValueError("reward heads are empty: give at least one head and its weight, e.g. {'accuracy': 1.0}")
        self.weights, self.heads, self.labels = {}, {}, {}
        for name, w in weights.items():
            try:  # float() reads True as 1 and "0.5" as 0.5: a flag or a text in the wrong place became a weight
                w = math.nan if is_bool(w) or isinstance(w, (str, bytes)) else float(w)
            except (TypeError, ValueError):
                w = math.nan
            if not math.isfinite(w):  # a NaN / inf weight makes every total reward non-finite
                raise ValueError(f"reward head {name!r}: weight must be a finite number, got {weights[name]!r}")
            factory = resolve_head(name)
            args = dict(kw.get(name) or {})
            try:
                head = factory(**args)
            except TypeError as e:
                raise ValueError(f"reward head {name!r} rejected its arguments {args} ({e}); it takes "
                                 f"{_signature(factory)}") from None
            if not callable(getattr(head, "score", None)):
                raise ValueError(f"reward head {name!r} has no score(samples) method")
            label = head_metric_name(name)
            if label in self.labels.values():
                raise ValueError(f"two reward heads would log as {label!r}: {sorted(weights)}")
            self.weights[name], self.heads[name], self.labels[name] = float(w), head, label

    def __call__(self, samples: Sequence[ScoredSample]) -> tuple[torch.Tensor, dict]:
        """Weighted total [B]; metrics are over maternal samples (the ones trained on)."""
        total = torch.zeros(len(samples), dtype=torch.float32)
        metrics: dict[str, float] = {}
        cut_short = comparisons_cut_short()
        mat = torch.tensor([is_maternal(s, i) for i, s in enumerate(samples)], dtype=torch.bool)
        for name, head in self.heads.items():
            try:
                out = head.score(samples)
            except Exception as e:  # a user head's KeyError / IndexError says nothing of which head raised it
                if hasattr(e, "add_note"):  # Python >= 3.11
                    e.add_note(f"raised by reward head {name!r}")
                raise
            r, m = head_output(name, out, len(samples))
            total += self.weights[name] * r
            label = self.labels[name]
            if mat.any():
                metrics[f"reward/{label}/mean"] = r[mat].mean().item()
                metrics[f"reward/{label}/std"] = r[mat].std(unbiased=False).item()
            for k, v in m.items():
                metrics[f"reward/{label}/{k}"] = v
        if mat.any():
            metrics["reward/total/mean"] = total[mat].mean().item()
            metrics["reward/total/std"] = total[mat].std(unbiased=False).item()
        # over the trained samples like the other response/* metrics: a CSRS re-inference's text holds its maternal
        # prefix, so counting it diluted the share of empty maternal responses by a factor m + 1
        trained = [s for s, keep in zip(samples, mat.tolist()) if keep]
        metrics["response/empty_frac"] = sum(not s.response.strip() for s in trained) / max(1, len(trained))
        # answer comparisons the heads' calls cut short (math-verify's deadline) or made only cheaply (a group's or
        # an option list's time bound): their verdicts may differ from a full comparison's
        metrics["reward/comparisons_cut_short"] = float(comparisons_cut_short() - cut_short)
        return total, metrics

    def empty_step(self) -> None:
        """A step where this rank has no samples: heads marked ``collective`` (one collective call per step, e.g. an
        all-reduce of their state) score an empty batch so that every rank makes the same calls."""
        for head in self.heads.values():
            if getattr(head, "collective", False):
                head.score([])

    def state_dict(self) -> dict:
        return {n: h.state_dict() for n, h in self.heads.items() if hasattr(h, "state_dict")}

    def load_state_dict(self, state: dict) -> None:
        """Each head's saved state; a checkpoint holding state for a head this run lacks, or lacking a stateful
        head's state, is an error (a resume with other reward.heads would silently drop or restart that state)."""
        stateful = {n for n, h in self.heads.items() if getattr(h, "state_dict", dict)()}  # heads by import path
        saved = {n for n, s in state.items() if s}
        if saved - set(self.heads) or stateful - saved:
            raise ValueError(f"reward head state: the checkpoint has state for {sorted(saved)}, this run's heads "
                             f"keep state in {sorted(stateful)}; resume with the reward.heads it was saved with")
        for n, s in state.items():
            if n in self.heads and hasattr(self.heads[n], "load_state_dict"):
                self.heads[n].load_state_dict(s)


def head_output(name: str, out, n: int) -> tuple[torch.Tensor, dict[str, float]]:
    """A head's ``score`` result checked: (rewards as finite float32 [n] on the CPU, detached; metrics as numbers).

    Anything else is an error naming the head: a bare tensor, a list / array that is no [n] of numbers, a NaN / inf
    reward, a metric that is no number, or one named ``mean`` / ``std`` (the mixer logs those itself; a head's own
    would silently replace them)."""
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TypeError(f"reward head {name!r}: score(samples) must return (rewards [B], metrics dict), got "
                        f"{type(out).__name__}")
    r, m = out
    try:  # a list or numpy array of numbers is taken as given; strings, None, nested objects are not
        r = torch.as_tensor(r).detach().to("cpu", torch.float32)
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(f"reward head {name!r} returned rewards of type {type(r).__name__} that are not numbers "
                        f"({e})") from None
    if r.shape != (n,):
        raise ValueError(f"reward head {name!r} returned {tuple(r.shape)} rewards for {n} samples")
    bad = (~torch.isfinite(r)).nonzero().flatten().tolist()
    if bad:
        raise FloatingPointError(f"reward head {name!r} returned non-finite rewards for {len(bad)} of {n} samples "
                                 f"(first: sample {bad[0]}, {r[bad[0]].item()})")
    if not isinstance(m, dict):
        raise TypeError(f"reward head {name!r}: its metrics must be a dict of numbers, got {type(m).__name__}")
    metrics = {}
    for k, v in m.items():
        if k in ("mean", "std"):
            raise ValueError(f"reward head {name!r} returned a metric named {k!r}: the mixer logs each head's "
                             f"maternal mean and std under that name; call it something else")
        try:
            if isinstance(v, str):  # float("1.5") would pass
                raise TypeError("text")
            metrics[k] = float(v)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"reward head {name!r}: metric {k!r} must be a number, got {type(v).__name__}") from None
    return r, metrics


def _signature(factory) -> str:
    try:
        return str(inspect.signature(factory))
    except (TypeError, ValueError):
        return "(unknown signature)"
