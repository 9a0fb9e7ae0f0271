"""Shared input predicates: what counts as a number where a function takes a weight, share, count or size.

``bool`` is a subclass of ``int`` (so ``numbers.Real`` and ``numbers.Integral``), and ``True`` read as 1 turned a
flag passed in the wrong place into a weight of 1, silently. Each caller keeps its own range check and error message.
"""

from __future__ import annotations

import numbers


def is_real_number(x) -> bool:
    """``x`` is a real number (Python or numpy int / float, a Fraction), not a bool; NaN and inf are real numbers
    here (the caller's range check decides about them)."""
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def is_integer_number(x) -> bool:
    """``x`` is an integer (Python or numpy int), not a bool; an integral float such as 2.0 is not."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)
