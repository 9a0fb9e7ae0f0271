"""CSS ``calc()`` of lengths, read as CSS Values reads it (pure functions, no cairosvg).

``calc_terms("calc(50% - 2 * (1em + 3px))")`` is ``(("%", 50.0), ("em", -2.0), ("px", -6.0))``: the expression as a
sum of one coefficient per unit, which the caller turns into pixels once it knows what an ``em`` or a ``%`` is there.
``None`` where CSS makes the expression invalid, and so drops the declaration: a syntax error, ``+`` / ``-`` without
whitespace on both sides (``1px+2px`` is two numbers), an unknown unit, a sum of a number and a length, a product of
two lengths, a division by a length or by zero, a result past the largest float, a number where a length is wanted,
more than ``CALC_MAX_CHARS`` characters or parentheses nested deeper than ``CALC_MAX_DEPTH``. Linear in the text.
"""

from __future__ import annotations

import math
import re

CALC_MAX_CHARS = 1000  # longer expressions are refused unread (each length read while drawing re-reads its value)
CALC_MAX_DEPTH = 32  # calc() and parentheses nested deeper than this (the outermost calc( is 1) are refused
# units a length inside calc() may carry (any case): cairosvg's, and those the worker rewrites into them
CALC_UNITS = frozenset(("px", "mm", "cm", "in", "pt", "pc", "q", "em", "rem", "ex", "ch", "%",
                        "vw", "vh", "vmin", "vmax"))

_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
# a CSS token as the tokenizer cuts it: a number with its unit (an identifier, or %), a function opening, a
# parenthesis, an operator; a "+" / "-" followed by a digit is the sign of a number, as in CSS
_TOKEN = re.compile(r"(?P<ws>[ \t\n\r\f]+)|(?P<num>" + _NUMBER + r")(?P<unit>%|-?[A-Za-z_][A-Za-z0-9_-]*)?"
                    r"|(?P<fn>(?i:calc)\()|(?P<op>[()*/+-])")


class _Invalid(Exception):
    pass


def _tokens(text: str) -> list[tuple[str, object, bool]]:
    """``(kind, value, spaced_before)`` tokens of ``text``; kinds ``num`` (value: (number, unit)), ``(`` (also a
    nested ``calc(``), ``)``, ``*``, ``/``, ``+``, ``-``."""
    out, pos, spaced = [], 0, False
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _Invalid
        pos = m.end()
        if m.group("ws"):
            spaced = True
            continue
        if m.group("num") is not None:
            out.append(("num", (float(m.group("num")), (m.group("unit") or "").lower()), spaced))
        else:
            out.append(("(" if m.group("fn") else m.group("op"), None, spaced))
        spaced = False
    out.append(("end", None, spaced))
    return out


class _Parser:
    """Recursive descent over CSS's calc grammar: sum = product (("+" | "-") product)*, product = value (("*" |
    "/") value)*, value = number | dimension | percentage | "(" sum ")". A value is ``(is_number, {unit: coef})``."""

    def __init__(self, tokens):
        self.tokens, self.i, self.depth = tokens, 0, 1  # inside the outermost calc(

    def peek(self):
        return self.tokens[self.i]

    def take(self):
        token = self.tokens[self.i]
        self.i += 1
        return token

    def sum(self):
        left = self.product()
        while self.peek()[0] in ("+", "-"):
            op, _, spaced_before = self.take()
            if not spaced_before or not self.peek()[2]:  # CSS: whitespace on both sides of + and -
                raise _Invalid
            right = self.product()
            if left[0] != right[0]:  # a number plus a length
                raise _Invalid
            sign = 1.0 if op == "+" else -1.0
            terms = dict(left[1])
            for unit, coef in right[1].items():
                terms[unit] = terms.get(unit, 0.0) + sign * coef
            left = (left[0], terms)
        return left

    def product(self):
        left = self.value()
        while self.peek()[0] in ("*", "/"):
            op = self.take()[0]
            right = self.value()
            if op == "*":
                if not (left[0] or right[0]):  # length * length
                    raise _Invalid
                factor, other = (left, right) if left[0] else (right, left)
                k = factor[1][""]
                left = (other[0], {u: c * k for u, c in other[1].items()})
            else:
                if not right[0] or right[1][""] == 0:  # divided by a length, or by zero
                    raise _Invalid
                k = right[1][""]
                left = (left[0], {u: c / k for u, c in left[1].items()})
        return left

    def value(self):
        kind, value, _ = self.take()
        if kind == "num":
            number, unit = value
            if unit == "":
                return True, {"": number}
            if unit not in CALC_UNITS:
                raise _Invalid
            return False, {unit: number}
        if kind == "(":
            self.depth += 1
            if self.depth > CALC_MAX_DEPTH:
                raise _Invalid
            inner = self.sum()
            if self.take()[0] != ")":
                raise _Invalid
            self.depth -= 1
            return inner
        raise _Invalid


def is_calc(text: str) -> bool:
    """Whether ``text`` (stripped) is a ``calc()`` expression: the function name in any case."""
    return text.strip()[:5].lower() == "calc("


def calc_terms(text: str, number: bool = False) -> tuple[tuple[str, float], ...] | None:
    """The ``calc()`` expression ``text`` as ``((unit, coefficient), ...)``, units in lower case, in the order they
    first appear, terms whose coefficient is 0 kept (their unit is still the expression's type), or None where CSS
    makes it invalid (see the module's doc). ``number``: a number is wanted (a unit-less result, unit ``""``),
    else a length (or percentage)."""
    text = text.strip()
    if not is_calc(text) or len(text) > CALC_MAX_CHARS:
        return None
    try:
        tokens = _tokens(text[5:])
        parser = _Parser(tokens)
        is_number, terms = parser.sum()
        if parser.take()[0] != ")" or parser.peek()[0] != "end":
            return None
    except (_Invalid, RecursionError, OverflowError):
        return None
    if is_number != number or not all(math.isfinite(c) for c in terms.values()):
        return None
    return tuple(terms.items())
