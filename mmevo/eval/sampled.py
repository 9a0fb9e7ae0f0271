"""Sampled held-out evaluation: pass@1 (mean correctness of n samples) and maj@n (the modal answer's correctness),
with 95% bootstrap intervals over problems.

Label-free RL (majority vote / MM-UPT, TTRL, CSRS) can only lift pass@1 towards maj@n: the gap between the two at the
start is the signal it has. Both are reported per problem kind; the modal answer uses the same extraction and
equivalence classes as the majority-vote reward.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral

import numpy as np

from mmevo.data.schema import Example
from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import answers_equivalent
from mmevo.rewards.majority import majority_vote_rewards
from mmevo.rollout.base import RolloutRequest, SamplingParams, item_seeds
from mmevo.rollout.strategy import decode

__all__ = ["sampled_records", "summarize_sampled", "bootstrap_ci", "paired_diff_ci"]


def sampled_records(engine, prompts, examples: Sequence[Example], tokenizer, n: int, max_tokens: int,
                    temperature: float = 1.0, seed: int = 0) -> list[dict]:
    """One record per example: ``correct`` (n values in {0, 1}), ``pass1`` (their mean), ``maj`` (1 when the modal
    answer of the n samples equals the gold answer; ties go to the answer sampled first), ``modal_share``. A problem
    without a gold answer, or an engine returning other than n samples per problem, is an error. Sampled, problem i's
    request is seeded ``item_seed(seed, i)``: its samples are the same whatever the engine's batching."""
    if isinstance(n, bool) or not isinstance(n, Integral) or n < 1:  # True ran as n=1; 2.5 failed in the engine
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not examples:
        return []
    for ex in examples:  # a missing gold would score every sample 0 and silently pull pass@1 / maj@n down
        if ex.answer is None or not str(ex.answer).strip():
            raise ValueError(f"example {ex.id!r}: field 'answer' holds no gold answer ({ex.answer!r}); sampled "
                             "evaluation needs one for every problem (label-hidden copies cannot be scored)")
    from mmevo.grpo.trainer import eval_kind  # the held-out evaluation's kinds: one key per kind, sortable

    params = SamplingParams(temperature=temperature, top_p=1.0, max_tokens=max_tokens, seed=seed)
    # each problem seeded by (seed, its place in examples): its n samples do not depend on the engine's batching
    seeds = item_seeds(seed, range(len(examples)), temperature)
    outs = engine.generate([RolloutRequest(prompts(ex), n=n, seed=s) for ex, s in zip(examples, seeds)], params)
    if len(outs) != len(examples):  # zip would silently drop problems
        raise ValueError(f"the engine returned {len(outs)} groups for {len(examples)} problems")
    records = []
    for ex, group in zip(examples, outs):
        if len(group) != n:  # pass@1 over fewer samples (or none) would not be the mean of n
            raise ValueError(f"example {ex.id!r}: the engine returned {len(group)} samples, {n} were asked for")
        texts = [decode(tokenizer, o.full_ids) for o in group]
        choices = [ex.choices] * len(texts)
        correct = accuracy_rewards(texts, [ex.answer] * len(texts), choices).tolist()
        _, info = majority_vote_rewards(texts, [0] * len(texts), choices)
        mode = info["pseudo_labels"][0]
        records.append({"id": ex.id, "kind": eval_kind(ex), "gold": ex.answer,
                        "correct": [int(c) for c in correct], "pass1": sum(correct) / len(correct),
                        "maj": int(mode is not None and answers_equivalent(mode, ex.answer, ex.choices or None)),
                        "modal_share": info["modal_share"], "sample": texts[0]})
    return records


def bootstrap_ci(values: Sequence[float], n_boot: int = 2000, seed: int = 0, level: float = 0.95) -> list[float]:
    """Percentile bootstrap interval of the mean of ``values`` (problems resampled with replacement)."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, Integral) or n_boot < 1 or not 0 < level < 1:
        raise ValueError(f"bootstrap_ci needs an integer n_boot >= 1 and 0 < level < 1, got n_boot={n_boot!r}, "
                         f"level={level!r}")
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:  # a scalar or a table (samples per problem) failed as an IndexError naming nothing
        raise ValueError(f"bootstrap_ci needs one value per problem (a flat list), got an array of shape {x.shape}")
    if x.size == 0:
        return [float("nan"), float("nan")]
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return [float(lo), float(hi)]


def summarize_sampled(records: list[dict], n_boot: int = 2000, seed: int = 0) -> dict:
    """pass@1 and maj@n with bootstrap intervals, the modal share, and both per kind."""
    if not records:
        return {}
    p1 = [r["pass1"] for r in records]
    mj = [r["maj"] for r in records]
    kinds: dict[str, list[dict]] = {}
    for r in records:
        kinds.setdefault(r["kind"], []).append(r)
    return {"n": len(records), "samples_per_problem": len(records[0]["correct"]),
            "pass1": float(np.mean(p1)), "pass1_ci": bootstrap_ci(p1, n_boot, seed),
            "maj": float(np.mean(mj)), "maj_ci": bootstrap_ci(mj, n_boot, seed),
            "modal_share": float(np.mean([r["modal_share"] for r in records])),
            "by_kind": {k: {"n": len(v), "pass1": float(np.mean([r["pass1"] for r in v])),
                            "maj": float(np.mean([r["maj"] for r in v]))} for k, v in sorted(kinds.items())}}


def paired_diff_ci(after: Sequence[float], before: Sequence[float], n_boot: int = 2000, seed: int = 0) -> dict:
    """Mean of ``after - before`` over the same problems and its bootstrap interval (problems resampled in pairs)."""
    if len(after) != len(before):
        raise ValueError(f"paired values differ in length: {len(after)} vs {len(before)}")
    d = np.asarray(after, dtype=np.float64) - np.asarray(before, dtype=np.float64)
    return {"mean": float(d.mean()) if d.size else float("nan"), "ci": bootstrap_ci(d, n_boot, seed)}
