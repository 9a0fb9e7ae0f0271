"""Retracing Re-inference Mechanism (RRM) of CSRS: where to cut a maternal response (Eq. 6).

Each maternal response ``R_p = (y_1, ..., y_L)`` is cut at its retracing anchor point
``floor(omega * L)`` and the prefix ``(y_1, ..., y_floor(omega L))`` is appended to the prompt; the
model then re-generates ``m`` continuations from there. ``L`` is the length of the response's
OWN tokens, never the padded width of a batch.

``omega`` is fixed (paper default 0.7) or, for the random-anchor variant of Appendix A.5, drawn
from ``U(0, 1)``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Iterable, Sequence
from fractions import Fraction
from numbers import Rational, Real

import numpy as np
import torch

from mmevo.validation import as_index

__all__ = ["anchor_position", "sample_omegas", "anchor_prefixes"]


def _as_fraction(omega: Real) -> Fraction:
    """The rate as an exact rational, read from its shortest decimal spelling.

    ``0.7`` becomes exactly 7/10 (not the binary double just below it), so that
    ``floor(0.7 * 10)`` is 7 as written in the paper, not 6.
    """
    if _is_bool(omega) or isinstance(omega, (str, bytes)):  # float() would read "0.7" as a rate
        raise ValueError(f"omega must be a number in [0, 1], got {omega!r}")
    if isinstance(omega, Rational):
        return Fraction(omega)
    try:
        w = float(omega)
    except (TypeError, ValueError):
        raise ValueError(f"omega must be a number in [0, 1], got {omega!r}") from None
    if not math.isfinite(w):
        raise ValueError(f"omega must be finite, got {omega!r}")
    if isinstance(omega, (np.float16, np.float32)):  # shortest spelling in its own precision: float32 0.7 is "0.7"
        return Fraction(str(omega))
    if isinstance(omega, torch.Tensor) and omega.dtype in (torch.float16, torch.bfloat16, torch.float32):
        return Fraction(_shortest_spelling(w, lambda x: torch.tensor(x, dtype=omega.dtype).item() == w))
    return Fraction(repr(w))


def _is_bool(v) -> bool:
    """Python, numpy and torch booleans: ``float(np.True_)`` is 1.0 and ``int`` of it 1; neither is a rate or length."""
    return isinstance(v, (bool, np.bool_)) or (isinstance(v, torch.Tensor) and v.dtype == torch.bool)


def _shortest_spelling(w: float, same) -> str:
    """The shortest decimal that ``same`` reads back as ``w`` (a torch float32 0.7 is 0.699999988..., spelled "0.7")."""
    for digits in range(1, 18):
        s = f"{w:.{digits}g}"
        if same(float(s)):
            return s
    return repr(w)


def anchor_position(response_len: int, omega: float) -> int:
    """``floor(omega * response_len)``: how many response tokens the re-inference prefix keeps.

    Computed in exact rational arithmetic on the decimal value of ``omega`` (see
    ``_as_fraction``). 0 for an empty response; ``response_len`` for ``omega == 1``.
    """
    if _is_bool(response_len):  # int(True) == 1 would pass the check below
        raise ValueError(f"response_len must be a non-negative int, got {response_len!r}")
    if not isinstance(response_len, int):
        try:
            as_int = int(response_len)
        except (TypeError, ValueError):
            raise ValueError(f"response_len must be a non-negative int, got {response_len!r}") from None
        if as_int != response_len:
            raise ValueError(f"response_len must be a non-negative int, got {response_len!r}")
        response_len = as_int
    if response_len < 0:
        raise ValueError(f"response_len must be >= 0, got {response_len}")
    w = _as_fraction(omega)
    if not 0 <= w <= 1:
        raise ValueError(f"omega must be in [0, 1], got {omega!r}")
    return math.floor(w * response_len)


def sample_omegas(n: int, omega: float, random_anchor: bool, rng: random.Random) -> list[float]:
    """The retracing rate of each of ``n`` maternal responses.

    Fixed anchors: ``n`` copies of ``omega``. Random anchors (Appendix A.5): ``n`` independent
    draws from the open interval ``(0, 1)`` using ``rng`` (``omega`` is then only validated). The
    paper says omega is drawn "at each step"; we draw one per maternal response, and a caller that
    wants one rate shared by the whole step can use ``sample_omegas(1, ...) * n``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    w = _as_fraction(omega)
    if not 0 <= w <= 1:
        raise ValueError(f"omega must be in [0, 1], got {omega!r}")
    if not random_anchor:
        return [float(w)] * n  # the decimal rate (float32 0.7 -> 0.7), which anchor_position reads back exactly
    out = []
    for _ in range(n):
        x = rng.random()  # [0, 1)
        while x == 0.0:
            x = rng.random()
        out.append(x)
    return out


def _token_list(resp, name: str) -> list[int]:
    if resp is None or isinstance(resp, (str, bytes)):  # iter(None) raised a TypeError naming no response
        raise ValueError(f"{name} must be a sequence of integer token ids, got {resp!r:.60}")
    if hasattr(resp, "tolist"):  # torch tensor / numpy array
        resp = resp.tolist()
    try:  # plain ints: a list of 0-d tensors hashes by identity, so a trailing stop id was never stripped;
        return [as_index(t) for t in resp]  # a bool is refused, as the engines refuse it: True was token 1
    except TypeError:
        shown = list(resp)[:8] if isinstance(resp, Iterable) else resp  # list() of a number raised a bare TypeError
        raise ValueError(f"{name} must hold integer token ids, got {shown!r:.120}") from None


def anchor_prefixes(
    responses: Sequence[Sequence[int]],
    omegas: Sequence[float],
    strip_ids: Collection[int] = (),
) -> list[list[int]]:
    """Cut each response at its own anchor: ``resp[:anchor_position(len(resp), omega)]``.

    ``responses`` must hold only each response's own tokens (no padding). Trailing tokens whose
    id is in ``strip_ids`` (e.g. end-of-turn / EOS / pad ids) are removed first, so the length is
    that of the content and an anchor never lands after the stop token. With the default empty
    ``strip_ids`` a trailing stop token counts in the length (and is dropped by any cut with
    ``omega < 1`` anyway unless the response is very short).
    """
    if len(responses) != len(omegas):
        raise ValueError(f"length mismatch: {len(responses)} responses, {len(omegas)} omegas")
    strip = set(_token_list(strip_ids, "strip_ids"))
    out = []
    for i, (resp, w) in enumerate(zip(responses, omegas)):
        toks = _token_list(resp, f"responses[{i}]")
        end = len(toks)
        while end > 0 and toks[end - 1] in strip:
            end -= 1
        out.append(toks[: anchor_position(end, w)])
    return out
