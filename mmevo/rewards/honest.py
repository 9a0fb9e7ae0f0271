"""HONEST calibration rewards (seed: "HONEST · Self-Learning Calibration", sections 2-3) and their reward heads.

Pure tensor functions first (y = correctness in {0, 1}, c = stated confidence, r = retrospective / refined
confidence; every output keeps the confidence's float dtype and no input is modified):

    brier_reward                R_B = -(c - y)^2                                       (section 2.1)
    hindsight_reward            R_H = -k (r - y)^2,  k = 0.3                           (section 2.1, HCR)
    casr_reward                 R_h = alpha [(c-y)^2 - (r-y)^2] 1[full] + beta 1[critique >= 16 chars]
                                      - gamma 1[r present, |r - c| < copy_tol] - delta 1[partial], clipped to +-clip;
                                      0 when neither critique nor refined confidence is present  (section 2.5, CASR)
    expected_calibration_error  sum_b n_b / N |mean_b(y) - mean_b(c)| over equal-width bins    (section 8)
    replay_priorities           (|c - y| + eps)^alpha                                  (section 3.1, CPR)

then the three heads (``honest_brier``, ``honest_hindsight``, ``honest_format``) that parse responses with the strict
protocol parser (``mmevo.honest.protocol``), grade answers with the core's ``answers_equivalent`` and count every
malformed input in their metrics.

Rules for bad input, where the seed gives none (conservative: no malformed or evasive output may out-earn an honest
answer):

- a response the strict parser rejects, or one without a valid confidence, earns ``malformed_penalty`` (-1.0, the
  Brier floor) from ``honest_brier`` and ``honest_format``;
- an abstain earns ``abstain_reward`` (-0.25, the Brier reward of the uninformative c = 0.5, which an answer at
  c = 0.5 earns whatever its correctness: abstaining never beats answering honestly); ``honest_format`` counts a
  clean abstain as well formed;
- the hindsight head pays only after a real answer (seed 2.2: "HCR is only active after a real AnswerAction"): 0 for
  abstains, unanswered and rejected responses. CASR additionally needs a valid confidence c (its Delta-Brier
  compares r with c), else 0; an empty ``<critique>`` counts as absent and an invalid ``<refined_confidence>`` as
  absent, so either alone with the other present is a partial refinement (-delta).
- the hindsight head pays 0 for a sample whose prompt did not offer the hindsight slot (``aux["hindsight_offered"]``
  False: a step drawn out by ``honest.hindsight_prob``; seed 2.4: 0 for "every completion that is not a
  HindsightAction"), also when the response writes the slot anyway: it is neither rewarded (the step asked for no
  hindsight) nor penalised (the slot stays part of the protocol, taught on the other steps). Such responses are
  counted (``unoffered_slot``); ``honest_brier`` and ``honest_format`` score them like any other response. A sample
  without that aux key counts as offered (the legacy prompt offers the slot on every step).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import torch
from torch import Tensor

from mmevo.validation import is_blank_text, is_real_number

__all__ = ["has_gold_answer", "brier_reward", "hindsight_reward", "casr_reward", "copied_refinement", "expected_calibration_error",
           "replay_priorities", "CRITIQUE_MIN_CHARS", "HonestBrierHead", "HonestHindsightHead",
           "HonestFormatHead"]

CRITIQUE_MIN_CHARS = 16  # CASR: a critique this long earns the format bonus beta (seed 2.5)


# ---------------------------------------------------------------------------------------------------- validation
def _float_tensor(name: str, x) -> Tensor:
    if not torch.is_tensor(x) or not x.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got "
                         f"{x.dtype if torch.is_tensor(x) else type(x).__name__}")
    return x


def _check_probability(name: str, x: Tensor, where: Tensor | None = None) -> None:
    """x in [0, 1] (finite) at every position, or where ``where`` is True."""
    x = x.detach() if where is None else x.detach()[where]
    if x.numel() and not ((x >= 0) & (x <= 1)).all():  # NaN fails both comparisons
        bad = x[~((x >= 0) & (x <= 1))][0].item()
        raise ValueError(f"{name} must lie in [0, 1], got {bad}")


def _work(x: Tensor) -> Tensor:
    """``x`` in float64: a bf16 / fp16 / float32 formula evaluated in its own dtype rounds after every operation and
    misses the correctly rounded value by an ulp (bf16 -(0.3 - 1)^2); the caller rounds the result once."""
    return x.to(torch.float64)


def _correctness(correct, like: Tensor) -> Tensor:
    """``correct`` (bool / int / float tensor of 0 and 1) as a tensor of ``like``'s dtype and device."""
    if not torch.is_tensor(correct):
        raise ValueError(f"correct must be a tensor of 0/1, got {type(correct).__name__}")
    if correct.shape != like.shape:
        raise ValueError(f"correct has shape {tuple(correct.shape)}, the confidences {tuple(like.shape)}")
    y = correct.detach()  # checked before the cast: a float32 / bf16 conf would round 1 + 1e-12 or 1.001 to 1
    if y.numel() and not ((y == 0) | (y == 1)).all():
        raise ValueError("correct must hold only 0 and 1 (or False / True)")
    return y.to(like.dtype).to(like.device)


def n_bins(bins) -> int:
    """``bins`` as a positive int (a numpy integer too); a bool, float or anything else is a ValueError."""
    try:
        n = operator.index(bins) if not isinstance(bins, bool) else 0
    except TypeError:
        n = 0
    if n < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    return int(n)


def is_outcome(x) -> bool:
    """Whether a single correctness value is 0 / 1 (or False / True): ``bool()`` would read None as a miss and 0.5,
    NaN or "False" as a hit."""
    return not isinstance(x, (str, bytes)) and x in (0, 1)


# ------------------------------------------------------------------------------------------------ pure functions
_NUMPY_FLOATS = {torch.float64: np.float64, torch.float32: np.float32, torch.float16: np.float16}


def _decimal(x: float, dtype: torch.dtype) -> Fraction:
    """The shortest decimal that ``dtype`` reads back as ``x``, exactly: the number the confidence was written as
    (float32 0.52 is 0.519999980926..., spelled "0.52"; a float64 keeps every digit it needs)."""
    if dtype in _NUMPY_FLOATS:  # numpy spells a float by its shortest round trip in its own precision
        return Fraction(str(_NUMPY_FLOATS[dtype](x)))
    for digits in range(1, 18):  # bfloat16: numpy has none
        text = f"{x:.{digits}g}"
        if torch.tensor(float(text), dtype=dtype).item() == x:
            return Fraction(text)
    return Fraction(x)


def copied_refinement(conf: Tensor, refined: Tensor, copy_tol: float) -> Tensor:
    """CASR's anti-copy test |r - c| < copy_tol (seed 2.5, strict), float [B] x2 -> bool [B].

    Decided on the decimal values the confidences were written as (see ``_decimal``), as the seed states it: a gap of
    exactly copy_tol is no copy (0.52 - 0.50 is 0.01999998 in float32 and 0.09 - 0.07 is 0.01999999999999999 in
    float64) and any smaller gap is one (0.0199995 was not, under the old margin of 1e-6 below copy_tol). Only gaps
    within a few ulps of copy_tol need the exact test; the rest are decided in float64."""
    gap = (refined.detach().double() - conf.detach().double()).abs()  # [B]
    copied = gap < copy_tol
    ulp = max(torch.finfo(conf.dtype).eps, torch.finfo(refined.dtype).eps)
    near = (gap - copy_tol).abs() <= 16 * ulp  # [B] where the rounding of c or r could decide
    if near.any():
        tol = _decimal(float(copy_tol), torch.float64)
        idx = near.nonzero().reshape(-1).tolist()
        pairs = zip(conf.detach()[idx].tolist(), refined.detach()[idx].tolist())
        seen: dict[tuple[float, float], bool] = {}  # confidences repeat (two-decimal values): decide each pair once
        for i, pair in zip(idx, pairs):
            if pair not in seen:
                seen[pair] = abs(_decimal(pair[1], refined.dtype) - _decimal(pair[0], conf.dtype)) < tol
            copied[i] = seen[pair]
    return copied


def brier_reward(conf: Tensor, correct: Tensor) -> Tensor:
    """Brier reward R_B = -(c - y)^2 (seed 2.1). conf float [B] in [0, 1], correct [B] 0/1 -> [B], conf's dtype."""
    c = _float_tensor("conf", conf).detach()  # [B]
    _check_probability("conf", c)
    y = _correctness(correct, c)  # [B]
    return (-(_work(c) - _work(y)) ** 2).to(c.dtype)


def hindsight_reward(retro: Tensor, correct: Tensor, k: float = 0.3) -> Tensor:
    """Hindsight calibration reward R_H = -k (r - y)^2 (seed 2.1, k = 0.3). retro float [B] in [0, 1] -> [B].

    Only meaningful after a real answer; the ``honest_hindsight`` head gives 0 to every other sample."""
    r = _float_tensor("retro", retro).detach()  # [B]
    _check_probability("retro", r)
    # NaN fails too; True was read as k = 1; k = inf makes a perfect r = y earn NaN
    if not is_real_number(k) or not 0 <= k < math.inf:
        raise ValueError(f"k must be finite and >= 0 (a negative k rewards miscalibration), got {k}")
    y = _correctness(correct, r)  # [B]
    return (-k * (_work(r) - _work(y)) ** 2).to(r.dtype)


def casr_reward(conf: Tensor, refined: Tensor, correct: Tensor, critique_chars: Tensor, has_refined: Tensor,
                alpha: float = 1.0, beta: float = 0.05, gamma: float = 0.05, delta: float = 0.05, clip: float = 0.30,
                copy_tol: float = 0.02) -> Tensor:
    """Calibration-Aware Self-Refinement reward (seed 2.5), [B] in conf's dtype, clipped to [-clip, clip].

    conf float [B] (c, used where r is present), refined float [B] (r, read only where ``has_refined``;
    elsewhere it may be NaN), correct [B] 0/1, critique_chars int [B] (critique length; > 0 means present),
    has_refined bool [B]. full = critique and refined present; partial = exactly one of them:

        alpha [(c - y)^2 - (r - y)^2] 1[full] + beta 1[critique_chars >= 16] - gamma 1[r present, |r - c| < copy_tol]
        - delta 1[partial];  0 where neither is present.

    The seed's table gates only alpha on "full structure"; the anti-copy term triggers whenever "|r-c| < 0.02", so a
    copied r without a critique pays gamma + delta.
    """
    c = _float_tensor("conf", conf).detach()  # [B]
    r = _float_tensor("refined", refined).detach()  # [B]
    if r.shape != c.shape or not torch.is_tensor(critique_chars) or critique_chars.shape != c.shape \
            or not torch.is_tensor(has_refined) or has_refined.shape != c.shape:
        raise ValueError(f"conf, refined, critique_chars and has_refined must all have shape {tuple(c.shape)}")
    if has_refined.dtype != torch.bool:
        raise ValueError(f"has_refined must be a bool tensor, got {has_refined.dtype}")
    if critique_chars.is_floating_point() or critique_chars.dtype == torch.bool or (critique_chars < 0).any():
        raise ValueError("critique_chars must be a non-negative integer tensor")
    for name, v in (("clip", clip), ("copy_tol", copy_tol)):
        if not is_real_number(v) or not v >= 0:  # True read as 1, None failed inside the comparison
            raise ValueError(f"{name} must be a number >= 0, got {v!r}")
    bad = {n: w for n, w in (("alpha", alpha), ("beta", beta), ("gamma", gamma), ("delta", delta))
           if not is_real_number(w) or not math.isfinite(w)}
    if bad:  # a NaN weight survives the clamp and turns every reward NaN
        raise ValueError(f"CASR weights must be finite numbers, got {bad}")
    y = _correctness(correct, c)  # [B]
    has_refined = has_refined.to(c.device)
    has_critique = critique_chars.to(c.device) > 0  # [B]
    full = has_critique & has_refined  # [B]
    partial = has_critique ^ has_refined  # [B]
    _check_probability("refined", r, has_refined)
    _check_probability("conf", c, has_refined)
    out_dtype = c.dtype
    # in the confidences' own dtypes: the copy test reads the decimals they were written as
    copied = has_refined & copied_refinement(torch.where(has_refined, c, torch.zeros_like(c)),
                                             torch.where(has_refined, r, torch.zeros_like(r)), copy_tol)  # [B]
    c, r, y = _work(c), _work(r), _work(y)
    zero = torch.zeros_like(c)
    c_r = torch.where(has_refined, c, zero)  # [B] unused values (maybe NaN) replaced before any arithmetic
    r_r = torch.where(has_refined, r, zero)  # [B]
    delta_brier = (c_r - y) ** 2 - (r_r - y) ** 2  # [B] > 0 iff the refinement moved toward y; used where full
    reward = (alpha * delta_brier * full.to(c.dtype)
              + beta * (critique_chars.to(c.device) >= CRITIQUE_MIN_CHARS).to(c.dtype)
              - gamma * copied.to(c.dtype)
              - delta * partial.to(c.dtype))  # [B]; every term is 0 where neither is present
    return reward.clamp(-clip, clip).to(out_dtype)


def ece_edges(bins: int) -> list[float]:
    """The ``bins + 1`` edges of the equal-width ECE bins, ``numpy.linspace(0, 1, bins + 1)`` as floats: the values
    ``ece_bins`` compares with, so also the labels of the reliability bins (b / bins is another float at 1051 of the
    edges of 1..100 bins: 3 / 10 is 0.3, the edge 0.30000000000000004)."""
    return [float(e) for e in np.linspace(0.0, 1.0, n_bins(bins) + 1)]


def ece_bins(conf: Tensor, bins: int) -> Tensor:
    """The ECE bin of each confidence, as the seed's reference ``compute_ece`` bins them: float64 confidences against
    ``numpy.linspace(0, 1, bins + 1)``, lo <= c < hi, c = 1.0 in the last bin. conf [N] in [0, 1] -> long [N].

    linspace's edges are not the decimals: 0.30000000000000004, 0.6000000000000001 and 0.7000000000000001 (at 10 bins)
    leave c = 0.3, 0.6, 0.7 in the bin below, so the reference does too. A float32 c is binned as its own value: 0.3
    and 0.6 round up past those edges and 0.9 down below its exact edge, so confidences read from text are binned in
    float64 (as the heads and ``calibration_report`` do) to agree with the reference on the same responses."""
    edges = torch.tensor(ece_edges(bins)[1:-1], dtype=torch.float64, device=conf.device)  # [bins - 1]
    return torch.bucketize(conf.double(), edges, right=True)  # number of interior edges <= c, in 0 .. bins - 1


def expected_calibration_error(conf: Tensor, correct: Tensor, bins: int = 10) -> float:
    """ECE = sum_b (n_b / N) |mean_b(y) - mean_b(c)| over ``bins`` equal-width bins of [0, 1] (seed 8).

    Bin b holds lo_b <= c < hi_b (see ``ece_bins``); c = 1.0 falls in the last bin; empty bins add 0. conf float [N],
    N >= 1."""
    c = _float_tensor("conf", conf).detach().reshape(-1)  # [N]
    _check_probability("conf", c)
    if c.numel() == 0:
        raise ValueError("expected_calibration_error needs at least one confidence")
    bins = n_bins(bins)
    y = _correctness(correct.reshape(-1) if torch.is_tensor(correct) else correct, c)  # [N]
    idx = ece_bins(c, bins)  # [N]
    conf_sum = torch.zeros(bins, dtype=torch.float64, device=c.device).index_add_(0, idx, c.double())  # [bins]
    hit_sum = torch.zeros(bins, dtype=torch.float64, device=c.device).index_add_(0, idx, y.double())  # [bins]
    # n_b / N * |hits_b / n_b - conf_b / n_b| = |hits_b - conf_b| / N; an empty bin has both sums 0
    return float((hit_sum - conf_sum).abs().sum().item() / c.numel())


def replay_priorities(conf: Tensor, correct: Tensor, alpha: float = 0.6, eps: float = 1e-3) -> Tensor:
    """Calibration-prioritized replay priority (|c - y| + eps)^alpha (seed 3.1, alpha = 0.6), [B] in conf's dtype.

    Unnormalised; the sampling probability is priority / sum of priorities."""
    c = _float_tensor("conf", conf).detach()  # [B]
    _check_probability("conf", c)
    # inf gives 0 or inf priorities, NaN probabilities; True was read as 1
    if not (is_real_number(alpha) and is_real_number(eps)) or not 0 <= alpha < math.inf or not 0 <= eps < math.inf:
        raise ValueError(f"alpha and eps must be finite and >= 0, got {alpha}, {eps}")
    y = _correctness(correct, c)  # [B]
    return (((_work(c) - _work(y)).abs() + eps) ** alpha).to(c.dtype)


# --------------------------------------------------------------------------------------------------------- heads
def _parse_all(samples) -> list:
    from mmevo.honest.protocol import parse_strict

    return [parse_strict(s.response if isinstance(s.response, str) else "") for s in samples]


def has_gold_answer(gold) -> bool:
    """A gold answer to grade against: not None and not blank ("", whitespace, zero-width characters), which no
    answer ever equals (every sample graded wrong); a blank gold is no gold, skipped and counted as None is."""
    return gold is not None and not (isinstance(gold, str) and is_blank_text(gold))


def _grade(samples, parsed, head: str) -> tuple[list[bool], list[bool]]:
    """(has_gold, correct) per sample; correct uses the core's answer equivalence. No gold at all is an error."""
    from mmevo.rewards.answers import answers_equivalent

    has_gold = [has_gold_answer(s.gold) for s in samples]
    if samples and not any(has_gold):
        raise ValueError(f"reward head {head!r} needs gold answers to grade confidence, but this batch has none "
                         "(label-free run?)")
    correct = [g and p.answered and answers_equivalent(p.answer, s.gold, s.choices)
               for s, p, g in zip(samples, parsed, has_gold)]
    return has_gold, correct


def _offered(samples, head: str) -> list[bool]:
    """Per sample, whether its prompt offered the hindsight slot (``aux["hindsight_offered"]``; absent: offered)."""
    out = []
    for i, s in enumerate(samples):
        flag = (getattr(s, "aux", None) or {}).get("hindsight_offered", True)
        if not isinstance(flag, bool):
            raise ValueError(f"reward head {head!r}: samples[{i}].aux['hindsight_offered'] must be True or False, "
                             f"got {flag!r}")
        out.append(flag)
    return out


def _reason_counts(parsed, reasons: Sequence[str]) -> dict[str, float]:
    return {f"bad/{r}": float(sum(r in p.malformed for p in parsed)) for r in reasons}


def _head_number(head: str, name: str, value) -> float:
    """A head argument (``reward.head_args``) as a float, else a ValueError naming it: ``float()`` read a YAML yes / on
    (True) as 1.0, so ``malformed_penalty: yes`` paid a malformed response +1, and a NaN made every reward NaN."""
    if not is_real_number(value) or not math.isfinite(value):
        raise ValueError(f"{head}: {name} must be a finite number, got {value!r}")
    return float(value)


class HonestBrierHead:
    """Brier reward -(c - y)^2 of strictly parsed responses; abstain -> ``abstain_reward``; a rejected response or
    a missing / non-numeric / out-of-range confidence -> ``malformed_penalty``; a graded sample without gold -> 0.

    Metrics: counts of graded / abstain / malformed / no_gold samples and of each malformation reason
    (``bad/<reason>``), accuracy, mean confidence, Brier score and ECE of the graded samples."""

    name = "honest_brier"

    def __init__(self, malformed_penalty: float = -1.0, abstain_reward: float = -0.25):
        self.malformed_penalty = _head_number(self.name, "malformed_penalty", malformed_penalty)
        self.abstain_reward = _head_number(self.name, "abstain_reward", abstain_reward)

    def score(self, samples):
        from mmevo.honest.protocol import CORE_REASONS

        parsed = _parse_all(samples)
        has_gold, correct = _grade(samples, parsed, self.name)
        rewards = torch.zeros(len(samples), dtype=torch.float32)
        graded = [i for i, p in enumerate(parsed) if p.graded and has_gold[i]]
        for i, p in enumerate(parsed):
            if p.abstain:
                rewards[i] = self.abstain_reward
            elif not p.well_formed:
                rewards[i] = self.malformed_penalty
        metrics = {"graded": float(len(graded)), "abstain": float(sum(p.abstain for p in parsed)),
                   "malformed": float(sum(not p.well_formed for p in parsed)),
                   "no_gold": float(sum(p.graded and not g for p, g in zip(parsed, has_gold))),
                   **_reason_counts(parsed, CORE_REASONS)}
        if graded:
            # the parsed float64 values: a float32 c (0.05 -> 0.0500000007) moves -(c - y)^2 off the correctly
            # rounded reward by an ulp, and 0.3, 0.6, 0.9 across the ECE's bin edges; the reward is rounded once
            c = torch.tensor([parsed[i].confidence for i in graded], dtype=torch.float64)  # [G]
            y = torch.tensor([correct[i] for i in graded], dtype=torch.float64)  # [G]
            r = brier_reward(c, y)
            rewards[graded] = r.to(rewards.dtype)
            metrics.update({"accuracy": y.mean().item(), "mean_confidence": c.mean().item(),
                            "brier": (-r).mean().item(), "ece": expected_calibration_error(c, y)})
        return rewards, metrics


class HonestHindsightHead:
    """The hindsight channel, ``mode`` legacy or refined (``honest.hindsight_mode``; the system prompt follows it).

    legacy (HCR): -k (r - y)^2 for a real answer with a valid ``<hindsight>``; 0 otherwise.
    refined (CASR): ``casr_reward`` for a real answer with a valid confidence; 0 otherwise (and for responses with
    neither critique nor refined confidence).

    Either mode pays 0 to a sample whose prompt did not offer the slot (``aux["hindsight_offered"]`` False; see the
    module docstring).

    Metrics: nonzero_frac (the seed's "is hindsight firing" audit), per mode the counts of firing samples, of slots
    skipped because there was no real answer, and of each malformation reason of the mode's slots; not_offered (the
    samples whose prompt did not offer the slot) and unoffered_slot (those of them that wrote it anyway)."""

    name = "honest_hindsight"

    def __init__(self, mode: str = "legacy", k: float = 0.3, alpha: float = 1.0, beta: float = 0.05,
                 gamma: float = 0.05, delta: float = 0.05, clip: float = 0.30, copy_tol: float = 0.02):
        from mmevo.honest.protocol import MODES

        if mode not in MODES:
            raise ValueError(f"honest_hindsight: mode {mode!r} not in {list(MODES)}")
        k = _head_number(self.name, "k", k)
        if not k >= 0:
            raise ValueError(f"honest_hindsight: k must be >= 0, got {k}")
        self.mode, self.k = mode, k
        self.casr = {key: _head_number(self.name, key, v) for key, v in (
            ("alpha", alpha), ("beta", beta), ("gamma", gamma), ("delta", delta), ("clip", clip), ("copy_tol", copy_tol))}

    def score(self, samples):
        parsed = _parse_all(samples)
        has_gold, correct = _grade(samples, parsed, self.name)
        offered = _offered(samples, self.name)
        rewards = torch.zeros(len(samples), dtype=torch.float32)
        # a sample whose prompt offered no slot takes no part: as if it had no gold to grade against
        live = [g and o for g, o in zip(has_gold, offered)]
        metrics = self._legacy(parsed, live, correct, rewards) if self.mode == "legacy" else \
            self._refined(parsed, live, correct, rewards)
        metrics["not_offered"] = float(sum(not o for o in offered))
        metrics["unoffered_slot"] = float(sum(self._wrote_slot(p) and not o for p, o in zip(parsed, offered)))
        metrics["nonzero_frac"] = float((rewards != 0).float().mean().item()) if len(samples) else 0.0
        return rewards, metrics

    def _wrote_slot(self, p) -> bool:
        """The response has the mode's slot, valid or not (a bad value empties the slot but leaves its reason)."""
        from mmevo.honest.protocol import HINDSIGHT_REASONS, REFINEMENT_REASONS

        if self.mode == "legacy":
            return p.hindsight is not None or any(r in p.malformed for r in HINDSIGHT_REASONS)
        return p.critique is not None or p.refined_confidence is not None or \
            any(r in p.malformed for r in REFINEMENT_REASONS)

    def _legacy(self, parsed, has_gold, correct, rewards) -> dict:
        from mmevo.honest.protocol import HINDSIGHT_REASONS

        fire = [i for i, p in enumerate(parsed) if p.answered and p.hindsight is not None and has_gold[i]]
        if fire:
            r = torch.tensor([parsed[i].hindsight for i in fire], dtype=torch.float64)  # [F] parsed values (as brier)
            y = torch.tensor([correct[i] for i in fire], dtype=torch.float64)  # [F]
            rewards[fire] = hindsight_reward(r, y, self.k).to(rewards.dtype)
        return {"fired": float(len(fire)),
                "skipped_no_answer": float(sum(p.hindsight is not None and not p.answered for p in parsed)),
                **_reason_counts(parsed, HINDSIGHT_REASONS)}

    def _refined(self, parsed, has_gold, correct, rewards) -> dict:
        from mmevo.honest.protocol import REFINEMENT_REASONS

        def attempted(p) -> bool:
            return p.critique_chars > 0 or p.refined_confidence is not None

        fire = [i for i, p in enumerate(parsed) if p.graded and has_gold[i] and attempted(p)]
        metrics = {"fired": float(len(fire)),
                   "skipped_no_answer": float(sum(attempted(p) and not p.graded for p in parsed)),
                   **_reason_counts(parsed, REFINEMENT_REASONS)}
        full = partial = critique_ok = copied = clipped = 0
        if fire:
            P = [parsed[i] for i in fire]
            c = torch.tensor([p.confidence for p in P], dtype=torch.float64)  # [F] parsed values (as brier)
            r = torch.tensor([p.refined_confidence if p.refined_confidence is not None else float("nan") for p in P],
                             dtype=torch.float64)  # [F]
            y = torch.tensor([correct[i] for i in fire], dtype=torch.float64)  # [F]
            chars = torch.tensor([p.critique_chars for p in P], dtype=torch.long)  # [F]
            has_r = torch.tensor([p.refined_confidence is not None for p in P], dtype=torch.bool)  # [F]
            out = casr_reward(c, r, y, chars, has_r, **self.casr)
            rewards[fire] = out.to(rewards.dtype)
            is_full = (chars > 0) & has_r
            full, partial = int(is_full.sum()), int(((chars > 0) ^ has_r).sum())
            critique_ok = int((chars >= CRITIQUE_MIN_CHARS).sum())
            copied = int((has_r & copied_refinement(c, torch.where(has_r, r, c), self.casr["copy_tol"])).sum())
            clipped = int((out.abs() >= self.casr["clip"] - 1e-7).sum())
        metrics.update({"full": float(full), "partial": float(partial), "critique_ok": float(critique_ok),
                        "copy": float(copied), "clipped": float(clipped)})
        return metrics


class HonestFormatHead:
    """0 for a strictly well-formed response (a graded answer or a clean abstain), ``malformed_penalty`` otherwise.
    The optional hindsight / refinement slots are left to ``honest_hindsight``. Metrics: the well-formed share, the
    malformed and abstain counts (``honest_brier`` counts each malformation reason)."""

    name = "honest_format"

    def __init__(self, malformed_penalty: float = -1.0):
        self.malformed_penalty = _head_number(self.name, "malformed_penalty", malformed_penalty)

    def score(self, samples):
        parsed = _parse_all(samples)
        ok = torch.tensor([p.well_formed for p in parsed], dtype=torch.bool)  # [B]
        rewards = torch.where(ok, torch.zeros(len(samples)), torch.full((len(samples),), self.malformed_penalty))
        return rewards, {"well_formed_frac": float(ok.float().mean().item()) if len(samples) else 0.0,
                         "malformed": float((~ok).sum().item()),
                         "abstain": float(sum(p.abstain for p in parsed))}
