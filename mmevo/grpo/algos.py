"""Core GRPO algorithm pieces: advantages, KL penalties, clipped policy loss.

Every function here is a small, pure tensor function (no I/O, no state).
Shape conventions used in the comments:

    B  number of sequences (rollouts) in the batch
    T  (padded) response length
    V  vocabulary size

``mask`` tensors are 1 on response tokens that contribute to the loss and 0 on
padding / prompt tokens.
"""

from __future__ import annotations

import math
import numbers
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

__all__ = [
    "ADV_SCALES",
    "KL_KINDS",
    "AGG_MODES",
    "group_advantages",
    "reward_std",
    "kl_penalty",
    "masked_mean",
    "agg_loss",
    "policy_loss",
    "entropy_from_logits",
    "logprobs_from_logits",
]

ADV_SCALES = ("group", "batch", "none")
# "kl", "mse", "abs": verl's names; a "+" kind is verl's straight-through variant (its value, k2's gradient)
KL_KINDS = ("k1", "k2", "k3", "low_var_kl", "kl", "mse", "abs", "k1+", "k3+", "low_var_kl+", "kl+", "abs+")
AGG_MODES = (
    "token-mean",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
)

_LOG_RATIO_CLAMP = 20.0
_K3_DIFF_CLAMP = 20.0
_K3_OUT_CLAMP = 10.0


# --------------------------------------------------------------------------- #
# Advantages
# --------------------------------------------------------------------------- #
def reward_std(rewards: Tensor) -> Tensor:
    r"""Unbiased (Bessel-corrected) std of ``rewards`` [B] in float64, 0 for B <= 1: ``group_advantages``'
    :math:`\sigma_{all}`. Equal rewards give exactly 0, and the std of rewards near the ends of the float64 range is
    finite and correct (see ``_group_spread``). -> scalar float64 tensor."""
    _require_tensors(rewards=rewards)
    _require_real_dtype(rewards=rewards, allow_bool=True)
    r = rewards.detach().to(torch.float64).flatten()
    _require_finite_rewards(r)
    std_scaled, exponent = _scaled_std(r)
    return _ldexp(std_scaled, exponent)


def _scaled_std(r: Tensor) -> Tuple[Tensor, Tensor]:
    """``(s, e)`` with ``s * 2**e`` the unbiased std of ``r`` [B] (float64), 0 for B <= 1; scalars."""
    n = r.numel()
    if n <= 1:
        return torch.zeros((), dtype=torch.float64, device=r.device), torch.zeros((), dtype=torch.long, device=r.device)
    # _group_spread's steps for one group, by whole-tensor reductions: its scatters into a single slot made the
    # "batch" scale 2.8x slower than unscaled arithmetic at B = 8192
    exponent = torch.frexp(r.abs().amax())[1].to(torch.long).clamp(min=-1000)  # scalar
    rs = _ldexp(r, -exponent)  # [B], |rs| < 1
    d = rs - rs.amin()  # [B], equal rewards: exact zeros
    centered = d - d.sum() / n
    return ((centered * centered).sum() / (n - 1)).sqrt(), exponent


def _ldexp(x: Tensor, exponent: Tensor, index: Optional[Tensor] = None) -> Tensor:
    """``x * 2**exponent[index]`` (``index`` None: ``2**exponent``) with one rounding at most: ``torch.ldexp`` forms
    ``2**exponent`` first, which is inf above 2^1023 and 0 below 2^-1074; two half steps stay in range (each exact
    unless the result itself over/underflows). The powers are formed per entry of ``exponent`` (a group's) and then
    gathered: forming them per sample made group_advantages 2.7-3.6x slower than unscaled arithmetic at B = 8192."""
    half = torch.div(exponent, 2, rounding_mode="floor")
    two = torch.tensor(2.0, dtype=x.dtype, device=x.device)
    low, high = two.pow(half), two.pow(exponent - half)
    if index is not None:
        low, high = low[index], high[index]
    return x * low * high


def _group_spread(r: Tensor, inv: Tensor, num_groups: int, with_sq: bool = True) -> Tuple[Tensor, Tensor, Tensor]:
    """Centered rewards and sums of squares of each group, computed on rewards scaled by a power of two.

    Returns ``(centered [B], exponent [G], sq [G])``: ``centered * 2**exponent[inv]`` is ``r - mean_g`` and
    ``sqrt(sq) * 2**exponent`` the group's root sum of squares (``with_sq`` False: ``sq`` is left zeros, unsummed).
    Scaling each group so that its largest reward is below 1 in magnitude is exact (a power of two), so for ordinary
    rewards every result has the bits of the unscaled arithmetic; it keeps ``r - min`` and the squares in range where
    the plain float64 sums broke: rewards of 1e200 squared to inf (std inf, every advantage 0), rewards of 1e-200
    squared to 0 (std 0, advantages +-inf with eps = 0) and ``1e308 - (-1e308)`` overflowed (advantages NaN).
    """
    max_abs = torch.zeros(num_groups, dtype=torch.float64, device=r.device)  # [G]
    max_abs.scatter_reduce_(0, inv, r.abs(), "amax", include_self=True)
    # max_abs = m * 2^e with 0.5 <= m < 1; the floor keeps 2^-e finite for a group of subnormal rewards
    exponent = torch.frexp(max_abs)[1].to(torch.long).clamp(min=-1000)  # [G]
    rs = _ldexp(r, -exponent, inv)  # [B], |rs| < 1
    # rewards relative to their group's minimum: an all-equal group then sums exact zeros and is centred to exactly
    # 0 (a float64 mean such as (0.1 + 0.1 + 0.1) / 3 misses 0.1 by an ulp, which the std division blows up)
    low = torch.zeros(num_groups, dtype=torch.float64, device=r.device)  # [G]
    low.scatter_reduce_(0, inv, rs, "amin", include_self=False)
    d = rs - low[inv]  # [B], in [0, 2)
    count = torch.zeros(num_groups, dtype=torch.float64, device=r.device)  # [G]
    count.index_add_(0, inv, torch.ones_like(d))
    total = torch.zeros(num_groups, dtype=torch.float64, device=r.device)  # [G]
    total.index_add_(0, inv, d)
    centered = d - (total / count)[inv]  # [B], count >= 1 for every present group
    sq = torch.zeros(num_groups, dtype=torch.float64, device=r.device)  # [G]
    if with_sq:
        sq.index_add_(0, inv, centered * centered)
    return centered, exponent, sq


def group_advantages(
    rewards: Tensor,
    group_ids: Tensor,
    scale: str = "group",
    eps: float = 1e-6,
    std_all: float | Tensor | None = None,
) -> Tensor:
    r"""Group-relative (GRPO) outcome advantages.

    For sample ``i`` belonging to group ``g = group_ids[i]`` with ``n_g``
    members:

    .. math::
        \mu_g = \frac{1}{n_g}\sum_{j \in g} r_j,\qquad
        \sigma_g = \sqrt{\frac{1}{n_g - 1}\sum_{j \in g}(r_j - \mu_g)^2}

    and

    * ``"group"``: :math:`A_i = (r_i - \mu_g) / (\sigma_g + \epsilon)`
      (the original GRPO normalisation, unbiased / Bessel-corrected std);
    * ``"batch"``: :math:`A_i = (r_i - \mu_g) / (\sigma_{all} + \epsilon)`
      with :math:`\sigma_{all}` the unbiased std of all ``B`` rewards (or
      ``std_all``: the trainer passes the std of the global batch, all ranks);
    * ``"none"``: :math:`A_i = r_i - \mu_g` (Dr.GRPO, no std scaling).

    A group with a single member has :math:`r_i - \mu_g = 0`, hence advantage
    exactly 0 (its std is taken as 0, never NaN). Likewise a batch of size 1
    has :math:`\sigma_{all} = 0`. This differs on purpose from verl's GRPO
    estimator, which gives a singleton group mean 0 and std 1, i.e. the raw
    reward :math:`r_i / (1 + \epsilon)` as advantage: a lone sample has no
    group to be compared with, so mmevo gives it no signal. ``"batch"`` is
    mmevo's own option (verl has no such GRPO mode). Name mapping: ``"group"``
    / ``"none"`` are verl's GRPO estimator with ``norm_adv_by_std_in_grpo``
    True / False (``eps`` = verl's ``epsilon``); all three match TRL's
    ``scale_rewards`` values, whose singleton groups also get advantage 0.

    Args:
        rewards: ``[B]`` scalar reward per sequence, finite (else ``ValueError``).
        group_ids: ``[B]`` integer group id per sequence. Ids may be arbitrary
            integers (non-contiguous, unsorted, negative).
        scale: one of ``"group"``, ``"batch"``, ``"none"``.
        eps: added to the std in the denominator.
        std_all: for ``"batch"`` only: :math:`\sigma_{all}` given instead of
            computed from ``rewards`` -- when the batch is spread over ranks,
            ``reward_std`` of the whole batch's rewards (all ranks), so that each
            rank's share gets the advantages one process would give it. Must
            be finite and >= 0; ignored by the other scales.

    Returns:
        ``[B]`` float32 advantages.
    """
    if scale not in ADV_SCALES:
        raise ValueError(
            f"unknown advantage scale {scale!r}; valid choices: {', '.join(ADV_SCALES)}"
        )
    _require_tensors(rewards=rewards, group_ids=group_ids)
    _require_real_dtype(rewards=rewards, allow_bool=True)  # bool rewards: correct / wrong as 1 / 0
    _require_real_dtype(group_ids=group_ids)  # a bool tensor here is a mask passed as ids, not two groups
    if rewards.dim() != 1 or group_ids.dim() != 1 or rewards.shape != group_ids.shape:
        raise ValueError(
            "rewards and group_ids must be 1-D tensors of the same shape, got "
            f"{tuple(rewards.shape)} and {tuple(group_ids.shape)}"
        )

    eps = _real("eps", eps)
    if std_all is not None and not isinstance(std_all, Tensor):
        _real("std_all", std_all)
    elif std_all is not None and std_all.dtype == torch.bool:
        raise TypeError(f"std_all must be a real number, got a bool tensor {std_all!r}")
    if not (math.isfinite(eps) and eps >= 0.0):  # NaN gave all-NaN advantages; eps < 0 can cancel the std
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    if group_ids.is_floating_point() and not bool(torch.isfinite(group_ids).all()):
        raise ValueError("group_ids must be finite; a NaN id made its sample a group of its own (advantage 0)")

    r = rewards.detach().to(torch.float64)  # [B]
    _require_finite_rewards(r)
    if r.numel() == 0:
        return torch.zeros(0, dtype=torch.float32, device=rewards.device)

    # Map arbitrary ids to contiguous 0..G-1.
    _, inv = torch.unique(group_ids, return_inverse=True)  # inv: [B]
    num_groups = int(inv.max().item()) + 1

    # centered: [B], scaled by 2^-exponent[inv]; the sums of squares only where they are read
    centered, exponent, sq = _group_spread(r, inv, num_groups, with_sq=scale == "group")

    if scale == "none":
        adv = _ldexp(centered, exponent, inv)  # [B], r - mean_g
    elif scale == "group":
        count = torch.zeros(num_groups, dtype=torch.float64, device=r.device)  # [G]
        count.index_add_(0, inv, torch.ones_like(r))
        # Bessel correction; singleton groups have sq == 0 -> var == 0. Numerator and denominator share the scale.
        std_g = (sq / (count - 1.0).clamp(min=1.0)).sqrt()  # [G], scaled
        eps_g = _ldexp(torch.full_like(std_g, float(eps)), -exponent)  # [G], eps on the group's scale
        adv = centered / (std_g + eps_g)[inv]
    else:  # "batch": (r - mean_g) / (sigma + eps), numerator and denominator scaled by 2^-sigma_exp
        if std_all is None:
            sigma, sigma_exp = _scaled_std(r)  # the std of [1.7e308, -1.7e308] is finite only scaled
        else:
            sigma = torch.as_tensor(std_all, dtype=torch.float64, device=r.device)
            if sigma.numel() != 1 or not bool(torch.isfinite(sigma).all()) or float(sigma) < 0:
                # a NaN here is a non-finite reward on another rank: every rank fails, none trains on NaN
                raise ValueError(f"std_all must be one finite number >= 0, got {std_all!r}")
            sigma, sigma_exp = sigma.reshape(()), torch.zeros((), dtype=torch.long, device=r.device)
        eps_scaled = _ldexp(torch.tensor(float(eps), dtype=torch.float64, device=r.device), -sigma_exp)
        adv = _ldexp(centered, exponent - sigma_exp, inv) / (sigma + eps_scaled)
    if scale != "none":  # a zero-signal sample (singleton / all-equal group) is 0, not 0/0 = NaN when eps is 0
        adv = torch.where(centered == 0, torch.zeros((), dtype=adv.dtype, device=adv.device), adv)

    out = adv.to(torch.float32)
    bad = (~torch.isfinite(out)).nonzero().flatten()
    if bad.numel():  # |r - mean| beyond float32 ("none"), or "batch" with std_all = 0 = eps for a spread batch
        raise ValueError(f"advantages are not finite in float32 at indices {bad[:8].tolist()} (scale={scale!r}, "
                         f"rewards {r[bad[:8]].tolist()})")
    return out


# --------------------------------------------------------------------------- #
# KL penalty
# --------------------------------------------------------------------------- #
def kl_penalty(logp: Tensor, ref_logp: Tensor, kind: str) -> Tensor:
    r"""Per-token KL estimator between the policy and the reference policy.

    With :math:`\log\pi` = ``logp`` and :math:`\log\pi_{ref}` = ``ref_logp``
    (samples drawn from :math:`\pi`), see Schulman, "Approximating KL
    Divergence":

    * ``"k1"``: :math:`\log\pi - \log\pi_{ref}`
    * ``"k2"``: :math:`\tfrac12 (\log\pi - \log\pi_{ref})^2`
    * ``"k3"`` / ``"low_var_kl"``: with
      :math:`d = \mathrm{clamp}(\log\pi_{ref} - \log\pi, -20, 20)`,
      :math:`\mathrm{clamp}(e^{d} - d - 1, -10, 10)`.

    verl's ``kl_penalty`` names are accepted as well: ``"kl"`` (= ``"k1"``),
    ``"mse"`` (= ``"k2"``) and ``"abs"`` (:math:`|\log\pi - \log\pi_{ref}|`),
    and verl's straight-through kinds ``"k1+"``, ``"kl+"``, ``"abs+"``,
    ``"k3+"``, ``"low_var_kl+"``: the value of the kind without ``+``, the
    gradient of k2, :math:`\log\pi - \log\pi_{ref}` (k1's and k3's
    expectations are the KL, their expected gradients are not; k2's is). A
    token whose difference is not finite gets gradient 0 there (in ``"k2"`` /
    ``"mse"`` too, whose value there stays inf / NaN).

    Args:
        logp: ``[...]`` log-probs of the sampled tokens under the policy.
        ref_logp: ``[...]`` log-probs under the reference model (same shape).
        kind: one of :data:`KL_KINDS` (verl's ``"kl"`` = k1, ``"mse"`` = k2, ``"abs"`` = |logp - ref|; ``"+"``:
            straight-through k2 gradient).

    Returns:
        ``[...]`` elementwise KL estimate, computed and returned in at least
        float32 (bf16 / fp16 inputs give float32, as ``logprobs_from_logits``).
        A NaN input propagates to NaN at its position (so does k3 of two
        ``-inf`` log-probs, whose difference is undefined).
    """
    _require_tensors(logp=logp, ref_logp=ref_logp)
    _require_real_dtype(logp=logp, ref_logp=ref_logp)
    if ref_logp.shape != logp.shape:  # a [B, 1] or [T] ref_logp would broadcast silently over the tokens
        raise ValueError(f"ref_logp must have the shape of logp, got {tuple(ref_logp.shape)} and {tuple(logp.shape)}")
    if kind not in KL_KINDS:
        raise ValueError(f"unknown kl kind {kind!r}; valid choices: {', '.join(KL_KINDS)}")
    if kind.endswith("+"):
        value = _kl_estimate(logp, ref_logp, kind[:-1]).detach()
        return value + _straight_through_k2(logp, ref_logp).to(value.dtype)
    return _kl_estimate(logp, ref_logp, kind)


def _straight_through_k2(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """``b - b.detach()`` with ``b`` = k2: exactly 0 in value, k2's gradient ``logp - ref_logp`` in backward. A
    non-finite difference is replaced by 0 first: its square's backward, 0 * inf, would be NaN even where the loss
    never reads the token (padding)."""
    diff = logp.to(_acc_dtype(logp.dtype)) - ref_logp.to(_acc_dtype(ref_logp.dtype))
    diff = torch.where(torch.isfinite(diff), diff, torch.zeros((), dtype=diff.dtype, device=diff.device))
    k2 = 0.5 * diff.square()
    return k2 - k2.detach()


def _kl_estimate(logp: Tensor, ref_logp: Tensor, kind: str) -> Tensor:
    """The value of :func:`kl_penalty` for a kind without ``+``."""
    # at least float32 (k3: float64 inside): in bf16 / fp16 exp(d) rounds to 1 for |d| < ~4e-3, so k3 of d = -0.001
    # came out 1e-3 (true 5e-7) and that of d = 0.001 as 0
    work = torch.promote_types(_acc_dtype(logp.dtype), _acc_dtype(ref_logp.dtype))
    logp, ref_logp = logp.to(work), ref_logp.to(work)
    if kind in ("k1", "kl"):
        return logp - ref_logp
    if kind == "abs":
        return (logp - ref_logp).abs()
    if kind in ("k2", "mse"):
        diff = logp - ref_logp
        finite = torch.isfinite(diff)
        # a square's backward at an inf difference is 0 * inf = NaN even where the loss masks the token out (a -inf
        # log-prob at padding): such tokens keep their value (inf, NaN) and get gradient 0, as in the "+" kinds
        safe = torch.where(finite, diff, torch.zeros((), dtype=diff.dtype, device=diff.device))
        return torch.where(finite, 0.5 * safe.square(), 0.5 * diff.detach().square())
    if kind in ("k3", "low_var_kl"):
        # float64: near d = 0, e^d - d - 1 ~ d^2 / 2 cancels ~|d| away (float32 gave 0 for d = 1e-4, bf16 |d| for
        # d = -1e-3); expm1 drops the "- 1" and float64 the ulp of d, so the float32 result is correctly rounded
        d = torch.clamp(ref_logp.double() - logp.double(), min=-_K3_DIFF_CLAMP, max=_K3_DIFF_CLAMP)
        kl = torch.expm1(d) - d
        return torch.clamp(kl, min=-_K3_OUT_CLAMP, max=_K3_OUT_CLAMP).to(work)
    raise ValueError(f"unknown kl kind {kind!r}; valid choices: {', '.join(KL_KINDS)}")


# --------------------------------------------------------------------------- #
# Aggregation
# --------------------------------------------------------------------------- #
def masked_mean(x: Tensor, mask: Tensor, dim: Optional[int] = None) -> Tensor:
    r"""Masked mean :math:`\sum x M / \max(\sum M, 1)`.

    Args:
        x: ``[...]`` values.
        mask: same shape as ``x``, entries 0 / 1 only (bool, integer or float; else ``ValueError``).
        dim: reduce over this dimension; ``None`` reduces over all elements.

    Returns:
        Scalar if ``dim`` is None, else ``x`` reduced along ``dim``. Entries
        with an all-zero mask give 0 (no NaN). Values outside the mask are
        never read, so a NaN / inf there (e.g. a log-prob of -inf at padding)
        does not leak into the mean (as verl's ``masked_sum``). Computed in at
        least float32: bf16 / fp16 ``x`` gives a float32 mean (as verl's
        with a float mask), so the token count stays exact above 256.
    """
    _require_tensors(x=x, mask=mask)
    _check_mask_shape(x, mask, "x")
    return _masked_mean(x, mask, dim)


def _masked_mean(x: Tensor, mask: Tensor, dim: Optional[int] = None) -> Tensor:
    """:func:`masked_mean` of a mask already checked (``policy_loss``'s metrics: one check, not one per metric)."""
    x = _masked_zero(x, mask)
    x = x.to(_acc_dtype(x.dtype))
    mask = mask.to(x.dtype)
    if dim is None:
        return (x * mask).sum() / mask.sum().clamp(min=1.0)
    return (x * mask).sum(dim=dim) / mask.sum(dim=dim).clamp(min=1.0)


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """Accumulation dtype: at least float32 (a bf16 sum of 0/1 mask entries is inexact above 256: 301 -> 300)."""
    return torch.promote_types(dtype, torch.float32)


def _check_mask_shape(x: Tensor, mask: Tensor, name: str) -> None:
    """A mask of another shape would broadcast silently and count the tokens wrongly (e.g. a [T] mask over [B, T]);
    one with an entry other than 0 / 1 weighted its tokens silently: -1 flipped the loss's sign, 2 doubled a
    token-sum, NaN made the loss NaN."""
    if mask.shape != x.shape:
        raise ValueError(f"mask must have the shape of {name}, got {tuple(mask.shape)} and {tuple(x.shape)}")
    if mask.dtype == torch.bool:
        return
    if mask.is_complex():
        raise TensorArgumentError(f"mask must hold 0 / 1, got a {mask.dtype} tensor")
    bad = ((mask != 0) & (mask != 1)).nonzero()  # [k, ndim]; NaN is neither
    if bad.shape[0]:
        at = tuple(bad[0].tolist())
        raise ValueError(f"mask must hold only 0 and 1, got {mask[at].item()!r} at index {list(at)} "
                         f"({bad.shape[0]} such entries)")


class TensorArgumentError(TypeError, ValueError):
    """A tensor argument holding the wrong kind of numbers (a bool or complex dtype): both a TypeError (its kind)
    and a ValueError (as this module's other input checks), so that a caller catching either sees it."""


def _require_real_dtype(allow_bool: bool = False, **args: Tensor) -> None:
    """``TensorArgumentError`` naming the tensor whose dtype is complex (its imaginary part was dropped silently) or,
    unless ``allow_bool``, bool (read silently as 0 / 1: bool log-probs gave a KL of 0, a bool advantage 1 / 0)."""
    for name, value in args.items():
        if (value.dtype == torch.bool and not allow_bool) or value.is_complex():
            raise TensorArgumentError(f"{name} must hold real numbers, got a {value.dtype} tensor")


def _require_finite_rewards(r: Tensor) -> None:
    """ValueError naming the rewards that are NaN / inf: one would make every advantage of its group (of the batch
    for "batch") NaN, and the std of the batch NaN."""
    bad = (~torch.isfinite(r)).nonzero().flatten()
    if bad.numel():
        raise ValueError(f"rewards must be finite; non-finite at indices {bad[:8].tolist()}")


def _require_tensors(**args) -> None:
    """TypeError naming the argument that is not a tensor (None, a list, a float): an AttributeError on ``.dim`` /
    ``.shape`` deep inside named no argument."""
    for name, value in args.items():
        if not isinstance(value, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")


def _real(name: str, value) -> float:
    """``value`` as a float, else TypeError naming it: a bool read silently as 0 / 1 (``eps=True`` as 1.0,
    ``clip_high=False`` as no clip), a string such as ``"0.2"`` passed one check and failed later as ``1.0 - str``."""
    if isinstance(value, Tensor) and value.numel() == 1 and not (value.dtype == torch.bool or value.is_complex()):
        return float(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    return float(value)


def _masked_zero(x: Tensor, mask: Tensor) -> Tensor:
    """``x`` with 0 where ``mask`` is 0: ``0 * nan`` is nan, so multiplying by the mask alone is not enough."""
    return torch.where(mask.bool(), x, torch.zeros((), dtype=x.dtype, device=x.device))


def agg_loss(
    loss_mat: Tensor,
    mask: Tensor,
    agg: str,
    loss_scale_factor: Optional[float] = None,
) -> Tensor:
    r"""Aggregate a per-token loss matrix ``L[B, T]`` with mask ``M[B, T]``.

    * ``"token-mean"``: :math:`\sum_{b,t} L M / \max(\sum_{b,t} M, 1)`
    * ``"seq-mean-token-mean"``:
      :math:`\frac1B \sum_b \sum_t L_{bt} M_{bt} / \max(\sum_t M_{bt}, 1)`
    * ``"seq-mean-token-sum"``: :math:`\frac1B \sum_b \sum_t L_{bt} M_{bt}`
    * ``"seq-mean-token-sum-norm"`` (Dr.GRPO, as in verl):
      :math:`\sum_{b,t} L M / S` where ``S = loss_scale_factor`` and defaults
      to ``T = M.shape[-1]`` (a constant "max response length" normaliser).
      Note there is *no* division by ``B``: the value scales with batch size,
      which is the intended behaviour of this mode.

    Sequences whose mask is all zero contribute 0 to every numerator. In the
    ``seq-mean-*`` modes they still count in ``B`` (the number of sequences);
    they never produce NaN (nor does an empty batch, ``B = 0``: the loss is
    0 in every mode). As in verl, ``token-mean`` never reads values
    outside the mask and the ``seq-mean-token-*`` modes drop whole masked-out
    rows (NaN / inf there give 0); a NaN outside the mask of a row that has
    tokens, or anywhere in ``seq-mean-token-sum-norm``, propagates as in
    verl. ``loss_scale_factor`` is ignored by the other modes. Two
    deliberate differences from verl's ``agg_loss``: verl leaves
    all-masked sequences out of ``B`` in ``seq-mean-token-mean`` /
    ``seq-mean-token-sum`` (mmevo counts them, so that the trainer's
    micro-batch weights ``len(micro) / len(mini)`` add up to the full-batch
    loss), and verl's ``token-mean`` of an all-zero mask is 0/0 = NaN (here 0).
    Both match TRL, whose ``loss_type`` ``"bnpo"`` / ``"grpo"`` /
    ``"dr_grpo"`` are ``token-mean`` / ``seq-mean-token-mean`` /
    ``seq-mean-token-sum-norm`` with ``loss_scale_factor = B * max_len``.

    Args:
        loss_mat: ``[B, T]`` per-token loss.
        mask: ``[B, T]`` 0/1 mask (the same shape and only 0 / 1 entries, else ``ValueError``).
        agg: aggregation mode, one of :data:`AGG_MODES`.
        loss_scale_factor: normaliser for ``"seq-mean-token-sum-norm"``, finite and > 0.

    Returns:
        Scalar loss, in at least float32 (a bf16 ``loss_mat`` is summed in
        float32 and gives a float32 loss, as verl's with a float mask).
    """
    _require_tensors(loss_mat=loss_mat, mask=mask)
    _check_mask_shape(loss_mat, mask, "loss_mat")
    loss_mat = loss_mat.to(_acc_dtype(loss_mat.dtype))
    mask = mask.to(loss_mat.dtype)
    if agg == "token-mean":
        return masked_mean(loss_mat, mask)
    if agg in ("seq-mean-token-mean", "seq-mean-token-sum"):
        n_tok = mask.sum(dim=-1)  # [B]
        seq = (loss_mat * mask).sum(dim=-1)  # [B]
        if agg == "seq-mean-token-mean":
            seq = seq / n_tok.clamp(min=1.0)
        seq = _masked_zero(seq, n_tok > 0)  # a masked-out row adds 0 even if it holds NaN (verl)
        return seq.mean() if seq.numel() else seq.sum()  # no sequences: 0 like an empty token-mean, not 0/0 = NaN
    if agg == "seq-mean-token-sum-norm":
        scale = float(mask.shape[-1]) if loss_scale_factor is None else _real("loss_scale_factor", loss_scale_factor)
        if not (math.isfinite(scale) and scale > 0):  # 0 / inf / NaN would give a silent inf, 0 or NaN loss
            if loss_scale_factor is None:  # the default, T, is 0: "got None" named no cause
                raise ValueError(f"seq-mean-token-sum-norm divides by loss_scale_factor, by default the mask's "
                                 f"length T, which is 0 (mask {tuple(mask.shape)}): pass a loss_scale_factor > 0")
            raise ValueError(f"loss_scale_factor must be a finite number > 0, got {loss_scale_factor!r}")
        # rows first, then the batch: verl's summation order, so the float32 result is the same to the last bit
        return (loss_mat * mask).sum(dim=-1).sum() / scale
    raise ValueError(f"unknown loss agg mode {agg!r}; valid choices: {', '.join(AGG_MODES)}")


# --------------------------------------------------------------------------- #
# Policy loss
# --------------------------------------------------------------------------- #
def policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    agg: str = "token-mean",
    loss_scale_factor: Optional[float] = None,
    clip_ratio_c: Optional[float] = 3.0,
) -> Tuple[Tensor, Dict[str, float]]:
    r"""PPO clipped surrogate with decoupled clip range (clip-higher, DAPO)
    and dual clip (Ye et al. 2020, arXiv:1912.09729, as in verl).

    .. math::
        \rho = \exp(\mathrm{clamp}(\log\pi - \log\pi_{old}, -20, 20))

        L^{clip}_{bt} = \max\big(-A_b \rho_{bt},\;
                          -A_b\,\mathrm{clip}(\rho_{bt}, 1-\epsilon_{low}, 1+\epsilon_{high})\big)

        L_{bt} = \begin{cases}
                   \min\big(L^{clip}_{bt},\; -A_b\,c\big) & A_b < 0 \\
                   L^{clip}_{bt} & A_b \ge 0
                 \end{cases}

    The dual clip bounds the loss of a token with negative advantage whose
    ratio has grown far above 1 (a large off-policy step) by :math:`-A c`; such
    a token then gets no gradient (half of it at the tie :math:`L^{clip} = -A c`,
    as verl's ``torch.min``). ``clip_ratio_c=None`` disables it (exactly
    :math:`L = L^{clip}`). The result is aggregated with :func:`agg_loss`
    (``agg``, ``loss_scale_factor``).

    Metrics (python floats, computed without grad, over masked tokens; 0 when
    the mask is empty):

    * ``clip_frac``: share of tokens whose clipped term is the larger loss,
      :math:`-A\,\mathrm{clip}(\rho) > -A\rho` (verl's ``pg_clipfrac``);
    * ``clip_frac_low``: the part of it with :math:`A<0`
      (:math:`\rho < 1-\epsilon_{low}`, lower clip active);
    * ``clip_frac_high``: the part with :math:`A>0`
      (:math:`\rho > 1+\epsilon_{high}`, upper clip active);
    * ``clip_frac_dual``: share of tokens with :math:`A<0` and
      :math:`-A c < L^{clip}` (dual clip active, verl's ``pg_clipfrac_lower``;
      0 when disabled);
    * ``approx_kl``: masked mean of
      :math:`-\mathrm{clamp}(\log\pi - \log\pi_{old}, -20, 20)` (verl's
      ``ppo_kl``; the clamp keeps it finite for infinite log-probs);
    * ``ratio_mean``, ``ratio_max``: masked mean / max of :math:`\rho`.

    Args:
        logp: ``[B, T]`` current policy log-probs (with grad).
        old_logp: ``[B, T]`` behaviour-policy log-probs.
        advantages: ``[B]`` per-sequence advantage (broadcast over T);
            ``[B, 1]`` and ``[B, T]`` are also accepted.
        mask: ``[B, T]`` response mask.
        clip_low: :math:`\epsilon_{low} \ge 0` (verl's ``clip_ratio_low``).
        clip_high: :math:`\epsilon_{high} \ge 0` (verl's ``clip_ratio_high``).
        agg: see :func:`agg_loss`.
        loss_scale_factor: see :func:`agg_loss`.
        clip_ratio_c: dual-clip constant :math:`c > 1` (verl's default 3.0);
            ``None`` disables the dual clip.

    The arithmetic follows torch type promotion as in verl: ``advantages`` are
    never rounded to the dtype of ``logp`` (float32 advantages with bf16
    log-probs give a float32 loss), and the aggregation runs in at least
    float32 (see :func:`agg_loss`). The ratio is taken in the dtype of
    ``logp`` (bf16 as in verl), except fp16, whose range ends below
    :math:`e^{20}`: there it is taken in float32, so that a clamped ratio stays
    finite and a zero advantage gives a zero loss, not ``0 * inf = NaN``.

    Returns:
        ``(loss, metrics)`` with ``loss`` a scalar tensor.
    """
    if agg not in AGG_MODES:
        raise ValueError(f"unknown loss agg mode {agg!r}; valid choices: {', '.join(AGG_MODES)}")
    clip_low, clip_high = _real("clip_low", clip_low), _real("clip_high", clip_high)
    clip_ratio_c = None if clip_ratio_c is None else _real("clip_ratio_c", clip_ratio_c)
    if loss_scale_factor is not None:
        _real("loss_scale_factor", loss_scale_factor)
    if clip_ratio_c is not None and not clip_ratio_c > 1.0:
        raise ValueError(f"clip_ratio_c must be > 1.0 (or None to disable the dual clip), got {clip_ratio_c!r}")
    for name, eps in (("clip_low", clip_low), ("clip_high", clip_high)):
        if not float(eps) >= 0.0:  # NaN gave a silent NaN loss, a negative value an inverted (meaningless) clip range
            raise ValueError(f"{name} must be a number >= 0, got {eps!r}")
    _require_tensors(logp=logp, old_logp=old_logp, advantages=advantages, mask=mask)
    if old_logp.shape != logp.shape:
        raise ValueError(f"old_logp must have the shape of logp, got {tuple(old_logp.shape)} and {tuple(logp.shape)}")
    _require_real_dtype(logp=logp, old_logp=old_logp, advantages=advantages)
    _check_mask_shape(logp, mask, "logp")
    if advantages.shape not in (logp.shape[:-1], logp.shape[:-1] + (1,), logp.shape):
        raise ValueError(f"advantages must have shape [B], [B, 1] or [B, T] for logp {tuple(logp.shape)}, "
                         f"got {tuple(advantages.shape)}")

    adv = advantages.to(torch.promote_types(logp.dtype, advantages.dtype))  # no rounding of fp32 A to bf16
    if adv.dim() == logp.dim() - 1:
        adv = adv.unsqueeze(-1)  # [B, 1]
    mask_f = mask.to(logp.dtype)  # [B, T]
    live_bad = ~torch.isfinite(adv) & mask.bool()  # a NaN / inf advantage of a live token: a NaN / inf loss
    bad = live_bad.nonzero()  # [k, logp.dim()]: logp may be [T], [B, T] or more
    if bad.shape[0]:
        at = tuple(bad[0].tolist())
        value = torch.broadcast_to(adv, live_bad.shape)[at].item()
        where = f"token {at[0]}" if len(at) == 1 else f"sequence {at[0]} (token {', '.join(map(str, at[1:]))})"
        raise ValueError(f"advantages must be finite on the tokens the mask keeps (entries 1); {where} has "
                         f"{value!r} ({bad.shape[0]} such tokens)")

    log_ratio = torch.clamp(logp - old_logp, min=-_LOG_RATIO_CLAMP, max=_LOG_RATIO_CLAMP)
    if log_ratio.dtype == torch.float16:  # fp16 tops out at 65504 < e^20: an inf ratio made A = 0 tokens 0 * inf = NaN
        log_ratio = log_ratio.float()
    ratio = torch.exp(log_ratio)  # [B, T]

    pg_unclipped = -adv * ratio  # [B, T]
    pg_clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)  # [B, T]
    loss_mat = torch.maximum(pg_unclipped, pg_clipped)  # [B, T]
    if clip_ratio_c is not None:
        neg = (adv < 0).expand_as(loss_mat)  # [B, T]
        pg_dual = -adv * float(clip_ratio_c)  # [B, 1] or [B, T]; constant in logp -> zero gradient
        dual_active = neg & (pg_dual < loss_mat)  # [B, T]
        # min, not a select on dual_active: at a tie (ratio == c) torch.minimum splits the gradient as verl's does
        loss_mat = torch.where(neg, torch.minimum(pg_dual, loss_mat), loss_mat)  # [B, T]

    loss = agg_loss(loss_mat, mask_f, agg, loss_scale_factor=loss_scale_factor)

    with torch.no_grad():
        r = ratio.detach()
        a = adv.detach().expand_as(r)
        m = mask_f.detach() > 0
        mdt = torch.promote_types(r.dtype, torch.float32)  # bf16 -> fp32: a bf16 sum of 0/1 is inexact above 256
        mask_m = mask.detach().to(mdt)
        # clipped where the clipped term is the larger loss, as verl's pg_clipfrac: comparing the ratio with the bounds
        # instead counts tokens whose products -A*r and -A*clip(r) round to the same float (tiny A, r next to a bound)
        clipped = (pg_clipped > pg_unclipped).detach()  # [B, T]
        clip_frac = _masked_mean(clipped.to(mdt), mask_m).item()
        clip_frac_low = _masked_mean((clipped & (a < 0)).to(mdt), mask_m).item()
        clip_frac_high = _masked_mean((clipped & (a > 0)).to(mdt), mask_m).item()
        if clip_ratio_c is not None:
            clip_frac_dual = _masked_mean(dual_active.to(mdt), mask_m).item()
        else:
            clip_frac_dual = 0.0
        approx_kl = _masked_mean(-log_ratio.detach().to(mdt), mask_m).item()
        ratio_mean = _masked_mean(r.to(mdt), mask_m).item()
        ratio_max = r[m].max().item() if bool(m.any()) else 0.0

    metrics = {
        "clip_frac_low": float(clip_frac_low),
        "clip_frac_high": float(clip_frac_high),
        "clip_frac": float(clip_frac),
        "clip_frac_dual": float(clip_frac_dual),
        "approx_kl": float(approx_kl),
        "ratio_mean": float(ratio_mean),
        "ratio_max": float(ratio_max),
    }
    return loss, metrics


# --------------------------------------------------------------------------- #
# Logits helpers
# --------------------------------------------------------------------------- #
def entropy_from_logits(logits: Tensor) -> Tensor:
    r"""Entropy of the categorical distribution given by ``logits``.

    .. math::
        H = \log\sum_v e^{z_v} - \sum_v \mathrm{softmax}(z)_v z_v

    Args:
        logits: ``[..., V]``.

    Returns:
        ``[...]`` entropy (computed in at least float32); ``-inf`` logits (tokens with probability 0) are allowed.
        A row with a NaN or ``+inf`` logit, or with every logit ``-inf`` (no distribution), gives NaN there.
        An empty vocabulary (``V = 0``) is a ``ValueError``: there is no distribution (its entropy came out -inf).
    """
    _check_vocab(logits)
    z = logits.to(_acc_dtype(logits.dtype))  # integer logits as float32, as logprobs_from_logits reads them
    lse = torch.logsumexp(z, dim=-1)  # [...]
    p = torch.softmax(z, dim=-1)  # [..., V]
    # a -inf logit (masked-out token) has p = 0 and adds p*z = 0 (lim p log p = 0), not 0 * -inf = NaN; zeroing z
    # (not p*z) keeps its gradient finite as well. Only then: no extra [..., V] copy in the trainer's hot path
    neg_inf = torch.isneginf(z)
    if bool(neg_inf.any()):
        z = torch.where(neg_inf, torch.zeros((), dtype=z.dtype, device=z.device), z)
    return lse - (p * z).sum(dim=-1)


def _check_vocab(logits: Tensor) -> None:
    """Logits need a last (vocabulary) dimension with at least one entry: over none, logsumexp is -inf."""
    _require_tensors(logits=logits)
    _require_real_dtype(logits=logits)
    if logits.dim() == 0 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have a non-empty last (vocabulary) dimension, got shape {tuple(logits.shape)}")


def logprobs_and_entropy(logits: Tensor, labels: Tensor, entropy: str = "none", *,
                         labels_in_range: bool = False) -> tuple[Tensor, Tensor | None]:
    r"""``logprobs_from_logits(logits, labels)`` and, if asked, ``entropy_from_logits(logits)`` from one
    ``log_softmax`` pass (the trainer's hot path: one fused kernel forward and one backward over ``[..., V]``
    instead of logsumexp's max / subtract / exp / sum passes, again in backward, and softmax again for the entropy).

    Args:
        logits: ``[..., V]``.
        labels: ``[...]`` integer token ids.
        entropy: ``"none"`` (returns None), ``"grad"`` (differentiable) or ``"nograd"`` (a metric: detached).
        labels_in_range: the caller has checked every label against the vocabulary (``check_label_range``): the
            check is skipped here (on a GPU it waits for the device, once per call: the trainer checks a micro-batch's
            labels once, not once per logits chunk and again in each chunk's recompute).

    Returns:
        (log-probs, entropy), equal to the two reference functions up to float rounding, with their conventions: at
        least float32, a ``-inf`` logit is a token of probability 0 (``-inf`` log-prob if it is the label, no NaN in
        the entropy or its gradient), a NaN or ``+inf`` logit makes its row NaN.
    """
    if entropy not in ("none", "grad", "nograd"):
        raise ValueError(f"entropy must be 'none', 'grad' or 'nograd', got {entropy!r}")
    _check_labels(logits, labels, in_range=not labels_in_range)
    log_p = torch.log_softmax(logits.to(_acc_dtype(logits.dtype)), dim=-1)  # [..., V]
    # log_softmax keeps its output, not its input, for backward: a caller that passed its logits without keeping
    # them (the trainer) frees them here, one [..., V] fewer while the entropy is formed
    del logits
    lp = torch.gather(log_p, dim=-1, index=labels.long().unsqueeze(-1)).squeeze(-1)
    if entropy == "none":
        return lp, None
    # a -inf log-prob (a token of probability 0) must add p * finite = 0, not 0 * -inf = NaN; NaN stays NaN
    if entropy == "grad":
        # zeroed, so that its gradient is 0 too (clamped to the most negative float instead, the backward overflowed
        # to -inf * 0 = NaN once the upstream gradient exceeded 1)
        return lp, -_row_dot(log_p.exp(), log_p.masked_fill(torch.isneginf(log_p), 0.0))
    with torch.no_grad():  # a metric
        log_p = log_p.detach()
        if log_p.device.type != "cpu":  # clamping is one pass fewer than finding and zeroing the -inf entries
            return lp, -log_p.clamp(min=torch.finfo(log_p.dtype).min).mul_(log_p.exp()).sum(dim=-1)
        ent = -_row_dot(log_p.exp(), log_p)
        # only a row with a -inf log-prob (0 * -inf) or a NaN / +inf logit is NaN: such rows (rare: banned tokens)
        # again with -inf clamped to the most negative float, which leaves the NaN rows NaN
        bad = torch.isnan(ent)
        if bool(bad.any()):
            rows = log_p[bad]
            ent[bad] = -(rows.clamp(min=torch.finfo(rows.dtype).min) * rows.exp()).sum(dim=-1)
        return lp, ent


def _row_dot(a: Tensor, b: Tensor) -> Tensor:
    """``(a * b).sum(-1)`` of two ``[..., V]`` tensors. On CPU one batched matrix product ([M, 1, V] @ [M, V, 1]): it
    reads each once and writes no [..., V] product (over the trainer's [1024, 509] chunks, one core: 0.8 ms against
    2.1 for multiply-and-sum). Other devices keep the elementwise product and reduction (not measured there)."""
    if a.device.type != "cpu" or a.dim() == 0:
        return (a * b).sum(dim=-1)
    V = a.shape[-1]
    return torch.bmm(a.reshape(-1, 1, V), b.reshape(-1, V, 1)).view(a.shape[:-1])


def _check_labels(logits: Tensor, labels: Tensor, in_range: bool = True) -> None:
    _check_vocab(logits)
    _require_tensors(labels=labels)
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        # .long() would truncate a float id (2.7 read as token 2) and read booleans as tokens 0 / 1
        raise ValueError(f"labels must be integer token ids, got dtype {labels.dtype}")
    if labels.shape != logits.shape[:-1]:  # gather accepts a smaller index: [B, 1] labels broadcast to a wrong [B, T]
        raise ValueError(f"labels must have shape {tuple(logits.shape[:-1])} for logits {tuple(logits.shape)}, "
                         f"got {tuple(labels.shape)}")
    if in_range:
        check_label_range(labels, logits.shape[-1])


def check_label_range(labels: Tensor, vocab: int) -> None:
    """ValueError naming the first label outside ``[0, vocab)``: gather's own error named no argument, and on a GPU
    an out-of-range index is a device-side assert."""
    outside = ((labels < 0) | (labels >= vocab)).nonzero()
    if outside.shape[0]:
        at = tuple(outside[0].tolist())
        raise ValueError(f"labels must be token ids in [0, {vocab}) (the vocabulary of logits), got "
                         f"{labels[at].item()} at index {list(at)} ({outside.shape[0]} such labels)")


def logprobs_from_logits(logits: Tensor, labels: Tensor) -> Tensor:
    r"""Log-probability of ``labels`` under ``logits``.

    .. math::
        \log p(y_t) = z_{t, y_t} - \log\sum_v e^{z_{t,v}}

    Implemented as a gather of the label logit minus ``logsumexp`` (avoids
    materialising a full ``log_softmax`` tensor).

    Args:
        logits: ``[B, T, V]``.
        labels: ``[B, T]`` integer token ids.

    Returns:
        ``[B, T]`` log-probs in at least float32 (bf16 / fp16 logits give
        float32, float64 logits stay float64 as in verl). A label whose logit
        is ``-inf`` gets ``-inf``; a row with a NaN or ``+inf`` logit gives NaN.
        An empty vocabulary (``V = 0``) is a ``ValueError``.
    """
    _check_labels(logits, labels)
    z = logits.to(_acc_dtype(logits.dtype))  # [B, T, V]
    label_logit = torch.gather(z, dim=-1, index=labels.long().unsqueeze(-1)).squeeze(-1)  # [B, T]
    return label_logit - torch.logsumexp(z, dim=-1)
