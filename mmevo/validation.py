"""Shared input predicates: what counts as a number where a function takes a weight, share, count or size.

``bool`` is a subclass of ``int`` (so ``numbers.Real`` and ``numbers.Integral``), and ``True`` read as 1 turned a
flag passed in the wrong place into a weight of 1, silently. Each caller keeps its own range check and error message.
"""

from __future__ import annotations

import numbers
import operator
import unicodedata


def is_real_number(x) -> bool:
    """``x`` is a real number (Python or numpy int / float, a Fraction), not a bool; NaN and inf are real numbers
    here (the caller's range check decides about them)."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def is_integer_number(x) -> bool:
    """``x`` is an integer (Python or numpy int), not a bool; an integral float such as 2.0 is not."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def is_bool(x) -> bool:
    """A Python, numpy or torch boolean (a 0-d bool tensor passes ``operator.index`` as 1, a numpy bool's dtype is
    named "bool"), checked without importing numpy or torch."""
    return isinstance(x, bool) or str(getattr(x, "dtype", "")) in ("bool", "torch.bool")


def as_index(x) -> int:
    """``x`` as a plain int (Python / numpy ints, integer 0-d tensors: ``operator.index``); TypeError for a boolean,
    which ``operator.index`` reads as 0 / 1, and for anything that is not an integer."""
    if is_bool(x):
        raise TypeError(f"a boolean is not an integer here, got {x!r}")
    return operator.index(x)


def is_blank_text(text: str) -> bool:
    """``text`` shows nothing: only whitespace and Unicode format characters (category Cf: zero-width space / joiners,
    word joiner, BOM, soft hyphen, bidi marks), which ``str.strip`` keeps, so a question of U+200B alone read as one."""
    return all(ch.isspace() or unicodedata.category(ch) == "Cf" for ch in text)
