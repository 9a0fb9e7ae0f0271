"""Softened Frequency Reward (SFR) of CSRS, Eq. 7-8 of the CSRS paper.

A group has ``n`` maternal trajectories (the normal rollouts of GRPO) and a set of
re-inference trajectories (``m`` continuations from each maternal anchor point, ``m*n`` in
all). Every maternal trajectory gets a continuous reward from how often its answer occurs:

* Eq. 7: ``R_base(a) = f_base(a) = Count(a, A_all) / ((m + 1) n)`` where ``A_all`` is the union
  (multiset) of maternal and re-inference answers;
* Eq. 8: ``R_final = (gamma * tanh(beta * (f_r / (f_base + eps) - 1)) + 1) * R_base`` with
  ``f_r = Count(a, A_m) / (m n)`` the answer's frequency among the re-inference answers.

An answer whose share grows under re-inference (``f_r > f_base``) is boosted by at most a factor
``1 + gamma``; one whose share shrinks is damped by at most ``1 - gamma``.

Answers are given as canonical keys (equal keys = the same answer; see
``mmevo.rewards.answers.group_answer_keys``). ``None`` means "no answer": it counts in the
denominators (the trajectory exists) but never matches anything, not even another ``None``,
and a maternal trajectory without an answer gets reward 0.

The denominators are the actual set sizes, ``len(maternal) + len(reinference)`` and
``len(reinference)``, which equal ``(m+1)n`` and ``mn`` when every anchor got its ``m``
continuations. Algorithm 1 of the paper writes the base reward as ``A_n(a_i) / A_all``; we follow
the text's Eq. 7 (count over ``A_all``), which is also what Eq. 8's ``f_base`` refers to.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence, Set

import numpy as np
import torch

__all__ = ["frequency_counts", "softened_frequency_rewards"]


def frequency_counts(keys: Iterable[Hashable | None]) -> Counter:
    """Count answer keys, skipping ``None`` (no answer never forms a class of its own)."""
    return Counter(k for k in keys if k is not None)


def answer_keys(keys) -> list:
    """The keys as a plain list; tensor / array keys become Python scalars (a tensor hashes by identity, so equal
    answers given as tensor elements would never be counted together)."""
    if hasattr(keys, "tolist"):  # torch tensor / numpy array of keys
        keys = keys.tolist()
    # numpy scalars / 0-d arrays too: a 0-d array is unhashable, and Decimal(2) == np.int64(2) raises
    return [k.item() if isinstance(k, (torch.Tensor, np.ndarray, np.generic)) else k for k in keys]


def nonnegative_real(name: str, value: float) -> float:
    """``value`` as a float, or a ValueError naming ``name`` when it is not a finite number >= 0."""
    if (isinstance(value, (bool, np.bool_, str, bytes))  # float() reads True as 1 and "0.2" as 0.2: neither is a number
            or (isinstance(value, torch.Tensor) and value.dtype == torch.bool)):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number, got {value!r}") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    return v


def softened_frequency_rewards(
    maternal: Sequence[Hashable | None],
    reinference: Sequence[Hashable | None],
    gamma: float = 0.2,
    beta: float = 5.0,
    eps: float = 1e-6,
) -> torch.Tensor:
    """SFR reward (Eq. 7-8 of the CSRS paper) of each maternal answer of one group.

    Args:
        maternal: answer keys of the ``n`` maternal trajectories (``None`` = no answer).
        reinference: answer keys of all re-inference trajectories of the group (``m*n`` of them
            normally; ``None`` = no answer).
        gamma: modulation depth; the reward stays within ``[(1-gamma) R_base, (1+gamma) R_base]``.
            The paper uses 0.2; values in ``[0, 1)`` keep the reward positive.
        beta: tanh slope (paper: 5.0).
        eps: stabiliser in ``f_r / (f_base + eps)``.

    Raises:
        ValueError: a NaN key (it equals nothing, not even itself, so Eq. 7's Count is undefined for it), or a bool
            key (``True == 1``: it was counted as the answer 1).

    Returns:
        float64 tensor of shape ``[len(maternal)]``. ``R = R_base`` when ``reinference`` is empty
        (there is no re-inference frequency to calibrate with).
    """
    gamma = nonnegative_real("gamma", gamma)
    beta = nonnegative_real("beta", beta)
    eps = nonnegative_real("eps", eps)

    for name, keys in (("maternal", maternal), ("reinference", reinference)):
        if not hasattr(keys, "__iter__"):  # None / a number: a TypeError from iter() named neither argument
            raise ValueError(f"{name} must be a list with one answer key per trajectory, got {keys!r}")
        if isinstance(keys, (str, bytes)):  # its characters would be counted as the answers of one trajectory each
            raise ValueError(f"{name} must be a list with one answer key per trajectory, got the text {keys[:60]!r}")
        if isinstance(keys, (Set, Mapping)):  # holds each answer once: the counts of Eq. 7 were silently all 1
            raise ValueError(f"{name} must be a list with one answer key per trajectory, got a "
                             f"{type(keys).__name__} (each answer at most once): {keys!r:.60}")
    maternal = answer_keys(maternal)
    reinference = answer_keys(reinference)
    for name, keys in (("maternal", maternal), ("reinference", reinference)):
        for i, k in enumerate(keys):
            # Count(a, A) needs a key equal to itself: NaN never is, so its count depended on object identity (the
            # same NaN object twice counted 2, two NaNs from a tensor 1 each)
            if isinstance(k, (bool, np.bool_)):  # True == 1 == 1.0 in a Counter: a bool joined the class of answer 1
                raise ValueError(f"{name}[{i}] is the bool {k!r}: an answer key must be an answer (it was counted as "
                                 f"the number {int(k)})")
            if k is not None and k != k:
                raise ValueError(f"{name}[{i}] is NaN: an answer key must equal itself to be counted (Eq. 7)")
            try:
                hash(k)
            except TypeError:  # raised from inside the counter, naming neither the list nor the trajectory
                raise ValueError(f"{name}[{i}] is an unhashable {type(k).__name__} ({k!r:.60}): an answer key must "
                                 "be hashable to be counted (Eq. 7); use a canonical key such as "
                                 "mmevo.rewards.answers.group_answer_keys gives") from None
    n = len(maternal)
    if n == 0:
        return torch.zeros(0, dtype=torch.float64)
    n_re = len(reinference)
    total = n + n_re

    c_mat = frequency_counts(maternal)
    c_re = frequency_counts(reinference)

    rewards = []
    for a in maternal:
        if a is None:
            rewards.append(0.0)
            continue
        r_base = (c_mat[a] + c_re[a]) / total  # >= 1/total > 0: a counts itself
        if n_re == 0:
            rewards.append(r_base)
            continue
        f_r = c_re[a] / n_re
        rewards.append((gamma * math.tanh(beta * (f_r / (r_base + eps) - 1.0)) + 1.0) * r_base)
    return torch.tensor(rewards, dtype=torch.float64)
