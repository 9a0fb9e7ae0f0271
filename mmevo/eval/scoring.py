"""Rule-based answer scoring for the MATH-Vision (MATH-V) and MathVista benchmarks.

Both scorers are pure functions of ``(response, item)`` and never raise on a response: any failure
(garbage input, malformed item, parser error) scores ``False``, save one: a MathVista float row without a
whole-number precision raises :class:`MathVistaRowError` (naming its pid), as no verdict on it is the official one.

``score_mathvision`` re-implements the extraction and equality rules of MATH-V's
official evaluation script (``evaluation/evaluate.py`` + ``evaluation/utils.py``).
``score_mathvista`` re-implements the normalisation and comparison of MathVista's
``evaluation/calculate_score.py``; the official GPT-based answer extractor is replaced by
the rule-based :func:`extract_mathvista_answer`.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
import re
import unicodedata
from decimal import Decimal
from fractions import Fraction
from typing import Any, Union

__all__ = [
    "extract_mathvision_answer",
    "mathvision_is_equal",
    "score_mathvision",
    "extract_mathvista_answer",
    "normalize_mathvista_extraction",
    "mathvista_is_correct",
    "score_mathvista",
    "MathVistaRowError",
    "edit_distance",
]

# MathVista: a longer response is cut to its first _MAX_RESPONSE_HEAD_CHARS and last _MAX_RESPONSE_CHARS characters
# before extraction, which bounds the regex/parser work. The answer of a chain of thought is at its end; the head
# keeps an answer stated first ("C\n\n<long explanation>", "The answer is 4.\n...") readable in a response of any
# length, as the official GPT extraction, which sees the whole response, reads it.
_MAX_RESPONSE_CHARS = 20_000
_MAX_RESPONSE_HEAD_CHARS = 2_000
# the most characters of a response extraction reads (head, blank line, tail): the bound of what follows a box or a
# marked answer, which may stand in the head and be answered or taken back at the tail's end
_MAX_BOUNDED_CHARS = _MAX_RESPONSE_HEAD_CHARS + 2 + _MAX_RESPONSE_CHARS


def _bounded_response(response: str) -> str:
    """``response`` itself when short; else its first and last characters (see above), a blank line between."""
    if len(response) <= _MAX_BOUNDED_CHARS:
        return response
    return response[:_MAX_RESPONSE_HEAD_CHARS] + "\n\n" + response[-_MAX_RESPONSE_CHARS:]
# MathVista: only the last this many "answer is" markers of a response are considered, each with
# at most 2000 characters after it (a choice text has at most a few hundred).
_MAX_ANSWER_MARKERS = 50
# Strings longer than this (up to where latex2sympy2 stops reading) are never handed to the LaTeX/sympy
# parser. Its parse (SLL, see _latex2sympy2_like) is about linear in the length: 1000 characters of sums,
# products, fractions, roots, functions or text take at most about 0.6 s. (Both parsers overflow Python's
# recursion on a chain of about 970 terms; ours on about 480 factors, the official one on 980.)
_MAX_SYMPY_CHARS = 1000
# More absolute-value bars than this, or brackets nested deeper, are refused: the parser's first prediction
# of a new level of a function's argument or of a juxtaposed group ("\\sin(", "2(") costs 20-150 ms, more
# the more kinds of tokens are inside ("\\sin(" 7 times around 300 characters of fractions, roots, logs
# and trigonometry: 1.0 s; 30 times around 200: 2.8 s), of four "|" about as much (500 "|1|": 8 s), of other
# brackets 2-7 ms. Function levels + bars / 4 are at most _MAX_FUNCTION_DEPTH. (At 50 levels both parsers
# are still within Python's recursion limit: the official one reaches it at 54 levels of "(1+", ours at 87
# of "\\frac{1}{".)
_MAX_BARS = 16
_MAX_DEPTH = 50
_MAX_FUNCTION_DEPTH = 5
_BAR_RE = re.compile(r"\\[lr]?[vV]ert|\\\||\|")
# Floors and ceilings nested more deeply than this are refused: printing a sum that holds one has sympy evaluate each
# level again for each level around it, about ten times as long a level ("\\lfloor\\lfloor\\lfloor 2\\rfloor\\rfloor
# \\rfloor+1": 0.3 s; four levels 3 s, five 37 s, in either scorer). (\\llcorner / \\ulcorner are its lexer's floor /
# ceiling too.)
_MAX_FLOOR_DEPTH = 2
_FLOOR_BRACKET = re.compile(r"\\(?:[lr]floor|[lr]ceil|[lu][lr]corner)")
_FLOOR_OPENERS = ("\\lfloor", "\\lceil", "\\llcorner", "\\ulcorner")
# What makes the bracket after it a function's argument or a juxtaposed group: a command and its sub- and
# superscripts ("\\sin(", "\\log_{2}(", "\\cos^{2}(", "\\sin{"; not one of _CHEAP_COMMANDS), or, before a "(" or
# "[", a letter, digit or closing bracket ("2(", "f(", "(1)(").
_FUNCTION_BRACKET = re.compile(r"(?:\\([a-zA-Z]+)\s*(?:[_^]\s*(?:\{[^{}]*\}|\w)\s*)*|([\w)\]}!.']\s*))$")
_CHEAP_COMMANDS = {"frac", "dfrac", "tfrac", "sqrt", "binom", "dbinom", "tbinom", "overline", "mathrm", "mathbf",
                   "text"}


def _bracket_depth(s: str) -> tuple[int, int]:
    """The deepest nesting of brackets in ``s``, and of brackets that are function arguments or juxtaposed
    groups (see ``_FUNCTION_BRACKET``)."""
    s = s.replace("\\left", "").replace("\\right", "")
    stack: list[bool] = []
    deepest = deepest_fn = fn = 0
    for i, ch in enumerate(s):
        if ch in "([{":
            m = _FUNCTION_BRACKET.search(s[max(0, i - 40) : i])
            stack.append(bool(m) and (m.group(1) not in _CHEAP_COMMANDS if m.group(1) else ch != "{"))
            fn += stack[-1]
            deepest, deepest_fn = max(deepest, len(stack)), max(deepest_fn, fn)
        elif ch in ")]}" and stack:
            fn -= stack.pop()
    return deepest, deepest_fn


def _floor_depth(s: str) -> int:
    """The deepest nesting of floors and ceilings in ``s``."""
    depth = deepest = 0
    for m in _FLOOR_BRACKET.finditer(s):
        depth = depth + 1 if m.group(0) in _FLOOR_OPENERS else max(0, depth - 1)
        deepest = max(deepest, depth)
    return deepest


# What the parser skips like a space: "\\," "\\:" "\\;" "\\quad" "\\qquad" "\\thinspace" ...
_SKIPPED = r"(?:\s|\\[,:;]|\\q?quad(?![a-zA-Z])|\\(?:neg)?(?:thin|med|thick)space(?![a-zA-Z]))"


def _strip_outer_groups(s: str) -> str:
    """Drops the brackets around the whole answer ("((5))" -> "5", "[x+1]\\," -> "x+1"; a "{" there is a plain
    group too): a group reads as its content. Not a tuple or interval ("(1,2)", "(0,1]") nor unbalanced
    content ("(1]+[2)")."""
    s = re.sub(rf"^{_SKIPPED}+|{_SKIPPED}+$", "", s)
    while len(s) > 2 and s[0] in "([{" and _group_end(s, 0) == len(s) - 1:
        depth = 0
        for ch in s[1:-1]:
            depth += (ch in "([{") - (ch in ")]}")
            if depth < 0 or (depth == 0 and ch in ",;"):
                return s
        if depth or (s[0] == "{" and "\\choose" in s):  # "{4 \\choose 2}" is a binomial
            return s
        s = re.sub(rf"^{_SKIPPED}+|{_SKIPPED}+$", "", s[1:-1])
    return s


# ----------------------------------------------------------------------------------------
# Shared helpers
# ----------------------------------------------------------------------------------------


def _is_number(s: str) -> bool:
    # Official ``is_number``: anything ``float()`` accepts.
    try:
        float(s)
        return True
    except (ValueError, TypeError, OverflowError):
        return False


# Power towers and powers of powers whose base is no integer literal are parsed only while the exponents they multiply
# stay at most this; of an integer literal base, while the power has at most _MAX_LITERAL_POWER_BITS bits.
_MAX_TOWER_EXPONENT = 1000
# A power of an integer literal ("2^{10000}", "(2^{100})^{100}", "2^{2^{10}}") as big as this is cheap in integer
# arithmetic (see _plain_integer_arithmetic): Python computes it in microseconds. Not under a root, a logarithm or
# another function: sympy then evaluates what it can, and a root of a sum of such powers ("\\sqrt{9999^{999}-99^{32}}")
# has it factor the sum's 13,000-bit value (seconds; minutes at 28,000 bits). There the exponent bounds apply.
_MAX_LITERAL_POWER_BITS = 100_000
# A binomial (evaluated while parsing) of at most this many bits: sympy computes C(16384, 8192) (16,377 bits) in
# 20 ms, C(100000, 50000) in 0.6 s.
_MAX_BINOMIAL_BITS = 20_000


def _group_end(s: str, i: int) -> int:
    """Index of the bracket closing the one at ``s[i]`` (``len(s)`` if none)."""
    opener, closer = s[i], {"{": "}", "(": ")", "[": "]"}[s[i]]
    depth = 0
    for j in range(i, len(s)):
        depth += (s[j] == opener) - (s[j] == closer)
        if depth == 0:
            return j
    return len(s)


def _exponent_span(s: str, i: int) -> tuple[str, int]:
    """The exponent of the ``^`` at ``s[i]`` (a brace group's content, else the number or character after it) and the
    index just past it."""
    j = i + 1
    while j < len(s) and s[j].isspace():
        j += 1
    if s[j : j + 1] == "{":
        end = _group_end(s, j)
        return s[j + 1 : end], end + 1
    m = re.match(r"\d+|\\[a-zA-Z]+|.", s[j:], re.S)
    return (m.group(0), j + m.end()) if m else ("", j)


def _exponent_after(s: str, i: int) -> str:
    """The exponent of the ``^`` at ``s[i]``: a brace group's content, else the number or character after it."""
    return _exponent_span(s, i)[0]


def _literal_base(s: str, k: int) -> int | None:
    """The integer literal that is the whole base of the ``^`` at ``s[k]`` ("2^", "{2}^", "x 2^": the 2; not in
    "1.5^", "x_2^", "a^2^", "(1+2)^", "}2^"), else None."""
    m = re.search(r"(?:\{\s*(\d{1,20})\s*\}|(\d{1,20}))\s*$", s[:k])
    if not m or re.search(r"[\d.}\])_^]\s*$", s[: m.start()]):
        return None
    return int(m.group(1) or m.group(2))


def _literal_power_bits(s: str, k: int) -> float | None:
    """Bits of the power at the ``^`` at ``s[k]`` when it is an integer literal to an integer literal ("2^{10000}",
    "2^{-12345}", "{10}^3") and nothing raises it further; else None."""
    base = _literal_base(s, k)
    exponent, end = _exponent_span(s, k)
    if base is None or not re.fullmatch(r"\s*[-+]?\s*\d+\s*", exponent):
        return None
    if re.match(r"\s*\^", s[end:]):  # raised further: a chain, judged as one
        return None
    return _power_bits(base, int(re.sub(r"\s", "", exponent)))


# What integer arithmetic is made of: digits, + - * / ( ) [ ] { } ^ ! , . and the commands for products, quotients
# and binomials.
_PLAIN_ARITHMETIC = re.compile(
    r"(?:[\d\s+\-*/()\[\]{}^!,.]|\\(?:cdot|times|div|d?t?frac|d?t?binom|left|right)(?![a-zA-Z]))*")


def _plain_integer_arithmetic(s: str) -> bool:
    """Whether ``s`` is arithmetic on numbers with integer literal exponents only ("2^{10000} - 3 \\cdot 2^{2^{10}}",
    "\\binom{2^{14}}{2}"): no root, logarithm, function, symbol or fractional power, which sympy would evaluate."""
    return bool(_PLAIN_ARITHMETIC.fullmatch(s)) and all(
        re.fullmatch(r"[\s\d{}^+\-]*", _exponent_after(s, k)) for k, ch in enumerate(s) if ch == "^")


def _power_bits(base: int, exponent: int) -> float:
    """Bits of ``base ** |exponent|`` (0 for a base of 0 or +-1)."""
    return abs(exponent) * math.log2(abs(base)) if abs(base) > 1 else 0.0


def _literal_tower(s: str, cap: int = _MAX_TOWER_EXPONENT) -> int | None:
    """|value| of an integer literal or a tower of them ("2^{2^{2}}"), if at most ``cap``; else None (also for
    anything that is no such tower)."""
    m = re.fullmatch(r"\s*[-+]?(\d{1,4})\s*(?:\^\s*(?:\{(.*)\}|(\d))\s*)?", s, re.S)
    if not m:
        return None
    base = int(m.group(1))
    if m.group(2) is None and m.group(3) is None:
        exponent = 1
    else:
        exponent = _literal_tower(m.group(2) if m.group(2) is not None else m.group(3), cap)
        if exponent is None or (base > 1 and exponent > 64):
            return None
    value = base**exponent
    return value if value <= cap else None


def _small_literal_chain(s: str, k: int, plain: bool) -> bool:
    """Whether the power chain with a ``^`` at ``s[k]`` is a chain of integer literals ``a^b^c...`` of at most
    ``_MAX_LITERAL_POWER_BITS`` bits (not ``plain`` integer arithmetic: whose exponents multiply to at most
    ``_MAX_TOWER_EXPONENT``): latex2sympy2 nests a chain to the left (``2^3^2`` is (2^3)^2 = 64, ``9^9^9`` is 9^81), so
    the exponents' product is the one exponent computed; an exponent may be braced (``2^3^{2}`` is 64 too). Any
    other chain (a base that is no literal, or itself an
    exponent) is not judged here: False."""
    start = k
    while True:  # back to the chain's base: "9^9^9" seen from its second "^"
        m = re.search(r"(\d+)\s*$", s[:start])
        if not m:
            return False
        b = re.search(r"\^\s*$", s[: m.start()])
        if not b:
            break
        start = b.start()
    if re.search(r"[\d.}\])]\s*$", s[: m.start()]) or len(m.group(1)) > 4:
        return False
    chain = re.match(r"(?:\s*\^\s*(?:\d{1,4}(?!\d)|\{\s*\d{1,4}\s*\}))+", s[start:])  # "^3", "^{2}"
    product = 1
    for e in re.findall(r"\d+", chain.group(0)) if chain else []:
        product *= int(e)
        if (_power_bits(int(m.group(1)), product) > _MAX_LITERAL_POWER_BITS if plain
                else product > _MAX_TOWER_EXPONENT):
            return False
    return chain is not None and not re.match(r"\s*[\^_{]", s[start + chain.end():])


def _power_of_powers_too_big(s: str, k: int, plain: bool) -> bool:
    """For the ``^`` at ``s[k]`` applied to a group holding powers ((a^{b})^{c} = a^(b*c)): whether the numeric
    exponents multiply to more than ``_MAX_TOWER_EXPONENT``, unless in ``plain`` integer arithmetic the group is one
    power of an integer literal and the whole has at most ``_MAX_LITERAL_POWER_BITS`` bits."""
    base = s[:k].rstrip()
    opener = {"}": "{", ")": "(", "]": "["}.get(base[-1:])
    if not opener:
        return False
    start = next((j for j in range(len(base) - 1, -1, -1) if base[j] == opener and _group_end(base, j) == len(base) - 1), 0)
    inner = [_exponent_after(base, j) for j in range(start, len(base)) if base[j] == "^"]
    if not inner:
        return False
    product = 1
    for e in [_exponent_after(s, k), *inner]:
        if re.fullmatch(r"\s*[-+]?\d+(?:\.\d+)?\s*", e):
            product *= max(1, math.ceil(abs(float(e))))
    if product <= _MAX_TOWER_EXPONENT:
        return False
    if not plain:
        return True
    # a power of one literal power, (2^{100})^{100} = 2^10000: judged by its size
    literal = re.fullmatch(r"[({\[]\s*(\d{1,20})\s*\^\s*(?:\{\s*[-+]?\d+\s*\}|\d)\s*[)}\]]", base[start:])
    outer = re.fullmatch(r"\s*[-+]?\d+\s*", _exponent_after(s, k))
    return not (literal and outer and _power_bits(int(literal.group(1)), product) <= _MAX_LITERAL_POWER_BITS)


# Literal arithmetic as latex2sympy2 reads it (see _literal_number): numbers ("1,000", "0.5", ",500.5"), + - * / \cdot
# \times \div, brackets, \frac{a}{b}, \sqrt{x}, \sqrt[n]{x}, \lfloor \rfloor, \lceil \rceil, \pi, e, ^, ! and "#",
# which stands for a number too big to write out (see _factorial_too_big). Its lexer reads a command before an "e"
# as that command and e: "2\cdote^{2}" (what extraction, which drops spaces, makes of "2 \cdot e^{2}") is 2 e^2.
_LITERAL_TOKEN = re.compile(r"\s*(\d*(?:,\d{3})*\.\d+|\d+(?:,\d{3})*|#|e"
                            r"|\\(?:cdot|times|div|frac|sqrt|pi|[lr]floor|[lr]ceil|exp|ln|log|(?:arc)?(?:sin|cos|tan)"
                            r"|sinh|cosh|tanh|csc|sec|cot)(?![a-df-zA-Z])|[-+*/()\[\]{}^!_])")
_LITERAL_CLOSERS = {"(": ")", "[": "]", "{": "}", "\\lfloor": "\\rfloor", "\\lceil": "\\rceil"}
# The functions latex2sympy2 builds unevaluated (printed, then computed by the official eval's ``math``), as ``math``
# computes them: the guard only needs what their arguments cost. \\exp is sympy's exp, evaluated like e's power.
_LITERAL_FUNCTIONS = {"\\sin": math.sin, "\\cos": math.cos, "\\tan": math.tan, "\\arcsin": math.asin,
                      "\\arccos": math.acos, "\\arctan": math.atan, "\\sinh": math.sinh, "\\cosh": math.cosh,
                      "\\tanh": math.tanh, "\\csc": lambda x: 1 / math.sin(x), "\\sec": lambda x: 1 / math.cos(x),
                      "\\cot": lambda x: 1 / math.tan(x), "\\exp": math.exp, "\\ln": math.log,
                      "\\log": math.log10}
_LITERAL_ATOM_START = {"(", "[", "{", "#", "e", "\\pi", "\\frac", "\\sqrt", "\\lfloor", "\\lceil", *_LITERAL_FUNCTIONS}


def _is_number_token(tok: str | None) -> bool:
    return bool(tok) and (tok[0].isdigit() or tok[0] in ".,")


# An exact power in literal arithmetic with a floor, a ceiling or e, whose sympy functions may compute it exactly (see
# _LiteralReader), has the bound of an integer power elsewhere, _MAX_LITERAL_POWER_BITS: sympy's floor and exp of one of
# 100,000 bits take at most 0.05 s ("\\lfloor 2^{99999}\\rfloor", "e^{-(1.0001^{7500})}"), of 7,000,000 bits minutes
# ("e^{-(1.0000001^{300000})}"). And all of them together at most _MAX_EXACT_WORK_BITS: a sum of such powers costs
# each of them ("e^{1.0001^{7500}-1.0001^{7500}}": 0.5 s).
_MAX_EXACT_WORK_BITS = 4 * _MAX_LITERAL_POWER_BITS

# A value of literal arithmetic: an int, a Fraction (an exact rational: see _LiteralReader) or a float.
_Literal = Union[int, Fraction, float]


class _TooCostly(OverflowError):
    """Literal arithmetic whose evaluation would be too costly."""


def _exact_bits(v: int | Fraction) -> float:
    """Bits of an exact value: log2 of the larger of its numerator and denominator (0 for 0 and +-1)."""
    v = Fraction(v)
    return max(math.log2(abs(v.numerator)) if v.numerator else 0.0, math.log2(v.denominator))


def _literal_power(base: _Literal, exponent: _Literal, max_bits: float, exact: bool) -> _Literal:
    """``base ** exponent``: exact for an int base and an integer exponent of at least 0 (any integer exponent, and a
    Fraction base, where ``exact``), refused (_TooCostly) beyond ``max_bits`` bits; else as Python computes it (an int
    to a negative int is a float), which raises OverflowError for a float beyond its range; ValueError for a complex
    power."""
    if not isinstance(base, float) and not isinstance(exponent, float) and Fraction(exponent).denominator == 1 and (
            exact or exponent >= 0):
        n, bits = int(exponent), _exact_bits(base)
        if bits and abs(n) > max_bits / bits:
            raise _TooCostly("power too large")
        return base**n if n >= 0 else Fraction(base) ** n
    value = (float(base) if isinstance(base, Fraction) else base) ** (
        float(exponent) if isinstance(exponent, Fraction) else exponent)
    if isinstance(value, complex):
        raise ValueError("a complex power")
    return value


def _literal_factorial(v: _Literal) -> int:
    """``v!`` of an integer of at most _MAX_FACTORIAL (_TooCostly beyond; ValueError for a float, a Fraction or a
    negative integer: the official eval's math.factorial raises there)."""
    if not isinstance(v, int) or v < 0:
        raise ValueError("a factorial of no natural number")
    if v > _MAX_FACTORIAL:
        raise _TooCostly("factorial too large")
    return math.factorial(v)


def _literal_log(x: _Literal, base: _Literal) -> float:
    """log_base(x) of any size (a Fraction's numerator and denominator apart: its float may overflow)."""
    def ln(v: _Literal) -> float:
        return math.log(v.numerator) - math.log(v.denominator) if isinstance(v, Fraction) else math.log(v)

    return ln(x) / ln(base)


class _LiteralReader:
    """A recursive-descent reader of literal arithmetic (``_LITERAL_TOKEN``) with latex2sympy2's grammar:
    ``expr: mp (+|- mp)*; mp: unary (*|/ unary)*; unary: (+|-) unary | postfix+`` (juxtaposition, "2(3)", binds more
    tightly than "*" and "/": "2/3 4" is 2/12); ``postfix: power !*`` (a factorial takes the whole power before it:
    "2^{3}!" is 8!); ``power: atom (^ exponent)*`` nested to the left ("2^3^{2}" is (2^3)^2 = 64, "2^{3^{2}}" 2^9),
    an exponent being a braced expression, a number, \\pi or "#".

    Integer arithmetic is exact, with powers of up to _MAX_LITERAL_POWER_BITS bits, as in the official eval of the
    printed expression; decimals and quotients are floats there, cheap whatever the exponent ("0.5^{9^{9}}" is 0.0 at
    once, "1.5^{9999}" overflows). Where sympy may compute them exactly they are ``exact`` rationals (Fractions), each
    exact power bounded as an integer one and all of them together at most _MAX_EXACT_WORK_BITS: in an answer with a
    floor, a ceiling or an e, whose sympy functions evaluate their argument, exactly where floating point cannot decide
    ("\\lfloor 1.0000001^{7000000000} \\rfloor+1", "e^{-(1.0000001^{7000000000})}": minutes in either scorer). e, \\pi
    and roots are floats."""

    def __init__(self, tokens: list[str], exact: bool):
        self.tokens, self.i, self.exact = tokens, 0, exact
        self.work = 0.0  # bits of the exact powers computed so far

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise ValueError("not literal arithmetic")
        self.i += 1
        return tok

    def bounded(self, v: _Literal) -> _Literal:
        # sums and products of big powers stay cheap up to a few such powers
        if not isinstance(v, float) and _exact_bits(v) > 4 * _MAX_LITERAL_POWER_BITS:
            raise _TooCostly("number too large")
        return v

    def quotient(self, a: _Literal, b: _Literal) -> _Literal:
        exact = self.exact and not isinstance(a, float) and not isinstance(b, float)
        return Fraction(a) / b if exact else (float(a) if isinstance(a, Fraction) else a) / b

    def group(self, opener: str = "{") -> _Literal:
        self.take(opener)
        v = self.expr()
        self.take(_LITERAL_CLOSERS[opener])
        return v

    def expr(self) -> _Literal:
        v = self.mp()
        while self.peek() in ("+", "-"):
            v = self.bounded(v + self.mp() if self.take() == "+" else v - self.mp())
        return v

    def mp(self, argument: bool = False) -> _Literal:
        """A product or quotient; with ``argument``, a function's unbracketed argument (latex2sympy2's mp_nofunc)."""
        v = self.unary(argument)
        while self.peek() in ("*", "\\cdot", "\\times", "/", "\\div"):
            if self.take() in ("/", "\\div"):
                v = self.bounded(self.quotient(v, self.unary(argument)))
            else:
                v = self.bounded(v * self.unary(argument))
        return v

    def unary(self, argument: bool = False) -> _Literal:
        if self.peek() in ("+", "-"):
            return -self.unary(argument) if self.take() == "-" else self.unary(argument)
        v = self.postfix()
        # juxtaposed factors; in a function's unbracketed argument no function: "\\sin 2 \\cos 3" is sin(2) cos(3)
        while _is_number_token(self.peek()) or self.peek() in _LITERAL_ATOM_START and not (
                argument and self.peek() in _LITERAL_FUNCTIONS):
            v = self.bounded(v * self.postfix())
        return v

    def postfix(self) -> _Literal:
        v = self.power()
        while self.peek() == "!":
            self.take()
            v = self.bounded(_literal_factorial(v))
        return v

    def power(self) -> _Literal:
        v = self.atom()
        while self.peek() == "^":
            self.take()
            if self.peek() == "{":
                exponent = self.group()
            elif self.peek() in ("\\pi", "#") or _is_number_token(self.peek()):
                exponent = self.atom()
            else:
                raise ValueError("not literal arithmetic")
            v = self.exact_work(_literal_power(v, exponent, _MAX_LITERAL_POWER_BITS, self.exact))
        return v

    def exact_work(self, v: _Literal) -> _Literal:
        # where sympy computes powers exactly, all of them together are bounded too
        if self.exact and not isinstance(v, float):
            self.work += _exact_bits(v)
            if self.work > _MAX_EXACT_WORK_BITS:
                raise _TooCostly("exact powers too large")
        return v

    def function(self, name: str) -> float:
        """A function's value, ``\\log_{b}``'s base and a power ``\\sin^{2}`` included; its argument a parenthesised
        expression or, without brackets, a product or quotient of signed factors (latex2sympy2's
        func_single_arg_noparens: "\\log 2^{10000}", "\\tan{2}/3" is tan(2/3), "\\sin -1" sin(-1), "\\sin 1+1"
        sin(1)+1, and "\\sin 3!^{2}" sin(6), whose power then raises the function: sin(6)^2)."""
        base = power = None
        while self.peek() in ("_", "^"):
            if self.take() == "_":
                base = self.group() if self.peek() == "{" else self.atom()
            else:
                power = self.group() if self.peek() == "{" else self.atom()
        start, work = self.i, self.work
        arg = self.mp(argument=True)
        if self.tokens[start] == "(" and not (self.peek() == "^" and self.tokens[self.i - 1] == "!"):
            # a bracket group is the argument itself ("\\sin(3)/2" is sin(3)/2, "\\sin(3)!" (sin 3)!) unless
            # only the unbracketed reading goes on: a power after a factorial ("\\sin(1)!^{2}" is sin(1!)^2)
            self.i, self.work = start, work
            arg = self.group("(")
        if base is not None and name not in ("\\log", "\\ln"):
            raise ValueError("not literal arithmetic")
        value = _literal_log(arg, base) if base is not None else (
            _literal_log(arg, 10 if name == "\\log" else math.e) if name in ("\\log", "\\ln")
            else _LITERAL_FUNCTIONS[name](arg))
        return value if power is None else _literal_power(value, power, _MAX_LITERAL_POWER_BITS, self.exact)

    def atom(self) -> _Literal:
        tok = self.peek()
        if tok == "#":
            raise _TooCostly("number too large")
        if tok in _LITERAL_CLOSERS:
            v = self.group(tok)
            return (math.ceil(v) if tok == "\\lceil" else math.floor(v)) if tok in ("\\lfloor", "\\lceil") else v
        tok = self.take()
        if _is_number_token(tok):
            number = Fraction(tok.replace(",", ""))  # an exact rational there ("4.0" is 4); "1,000" is 1000
            return number.numerator if number.denominator == 1 else number if self.exact else float(number)
        if tok in ("e", "\\pi"):
            return math.e if tok == "e" else math.pi
        if tok == "\\frac":
            numerator = self.group()
            return self.quotient(numerator, self.group())
        if tok in _LITERAL_FUNCTIONS:
            return self.function(tok)
        if tok == "\\sqrt":  # a root: \\sqrt[n]{x} is the power 1/n
            degree = self.group("[") if self.peek() == "[" else 2
            return _literal_power(self.group(), 1 / float(degree), _MAX_LITERAL_POWER_BITS, self.exact)
        raise ValueError("not literal arithmetic")


def _literal_number(text: str) -> _Literal | None:
    """The value of ``text`` when it is literal arithmetic (see ``_LiteralReader``; its rationals exact where it has a
    floor, a ceiling or an e), computed with bounded cost. None for anything else (a letter, another command, "2^-1")
    and where it has no value (a division by 0, a complex power, a factorial of no natural number, a float beyond its
    range: the official eval has none either). Raises _TooCostly (an OverflowError) where it would be costly: an exact
    power of more bits than its bound (see ``_LiteralReader``), a factorial of more than _MAX_FACTORIAL, an exact sum
    or product of more than 4 times that bound, or a "#"."""
    tokens, pos = [], 0
    text = re.sub(r"\\(?:left|right)(?![a-zA-Z])", "", text).rstrip()
    while pos < len(text):
        m = _LITERAL_TOKEN.match(text, pos)
        if not m:
            return None
        tokens.append(m.group(1))
        pos = m.end()
    reader = _LiteralReader(tokens, exact=any(t in ("\\lfloor", "\\lceil", "e", "\\exp") for t in tokens))
    try:
        value = reader.expr()
    except _TooCostly:
        raise
    except (ValueError, ZeroDivisionError, OverflowError, TypeError, RecursionError):
        return None
    return value if reader.i == len(tokens) else None


def _literal_int(text: str) -> int | None:
    """The value of ``text`` when it is integer literal arithmetic (:func:`_literal_number` with only integers,
    integer exponents of at least 0 and factorials: "2^3^{2}" is 64, "2^{3}!" 8!), else None (a letter, a division, a
    decimal, a negative exponent). Raises OverflowError where :func:`_literal_number` does."""
    value = _literal_number(text)
    return value if type(value) is int else None


# A factorial's value is written out in the guard's text up to this many bits (1,234 digits, under Python's limit of
# 4,300 for reading one back): "(300!-300!)!" is 0!.
_EXACT_FACTORIAL_BITS = 4096
# A factorial's "!" ("!=" is its "not equal").
_FACTORIAL_SIGN = re.compile(r"!(?!=)")
# Commands that are operators, not functions taking the number or group after them as an argument.
_OPERATOR_COMMAND = re.compile(r"\\(?:cdot|times|div|leq?|geq?|leqslant|geqslant|neq?|pm|mp)\s*$")
# Functions whose unbracketed argument holds the factorial after them: "\\sin 3!" is sin(3!), "\\sin{3}!" too.
_FUNCTION_BEFORE_ARGUMENT = re.compile(r"\\(?:log|ln|exp|(?:arc?)?(?:sin|cos|tan)h?|(?:arc)?(?:csc|sec|cot))\s*$")


def _after_a_command(before: str) -> bool:
    """Whether ``before`` ends with a letter or a command that takes what follows as its argument or index (neither an
    operator nor a function whose unbracketed argument it starts)."""
    return bool(re.search(r"[a-zA-Z]$", before)) and not (
        _OPERATOR_COMMAND.search(before) or _FUNCTION_BEFORE_ARGUMENT.search(before))


def _factorial_operand_start(t: str, end: int) -> int | None:
    """Where the operand of the factorial whose "!" is at ``t[end]`` starts, as latex2sympy2 reads it: the whole power
    before it ("2^{3}!" is (2^3)!, "2^3^2!" is ((2^3)^2)!) of a number or a bracket group ("(1+2)!", "{2^{2}}!");
    None where it is anything else or not known here (a letter, an index, a command's argument, a decimal)."""
    j = end
    while True:
        while j > 0 and t[j - 1].isspace():
            j -= 1
        ch = t[j - 1] if j > 0 else ""
        if ch == "#":
            start = j - 1
        elif ch.isdigit():
            k = j
            while k > 0 and (t[k - 1].isdigit() or t[k - 1] == ","):
                k -= 1
            # its lexer's numbers take thousands separators ("1,000"); matched reversed, in linear time
            start = j - re.match(r"(?:\d{3},)*\d+", t[k:j][::-1]).end()
            before = t[:start].rstrip()
            if t[start - 1 : start] in (".", "_") or _after_a_command(before):
                return None  # a decimal, an index, or after a letter or command: "1.5!", "x_2!", "\\sqrt 4!"
        elif ch in (")", "]", "}"):
            opener, depth, start = {")": "(", "]": "[", "}": "{"}[ch], 0, j - 1
            while start >= 0:
                depth += (t[start] == ch) - (t[start] == opener)
                if depth == 0:
                    break
                start -= 1
            before = t[: max(start, 0)].rstrip()
            if start < 0 or before.endswith("_") or (ch == "}" and before.endswith(("}", "]"))) or _after_a_command(
                    before):
                return None  # an index, a call or a command's argument: "x_{5}!", "f(3)!", "\\frac{1}{5}!"
        else:
            return None
        k = start
        while k > 0 and t[k - 1].isspace():
            k -= 1
        if k > 0 and t[k - 1] == "^":  # an exponent: the operand is the power, from its base on
            j = k - 1
            continue
        return start


def _factorial_too_big(s: str) -> bool:
    """Whether a factorial (or \\prod, \\Gamma) in ``s`` could be of a number over ``_MAX_FACTORIAL``.

    The operand of each factorial (:func:`_factorial_operand_start`) is worked out where it is integer literal
    arithmetic (:func:`_literal_int`), innermost first, and the factorial replaced by its value: "3!!" is 720!,
    "(2^{2})!" 4!, "2^{3}!" 8!, "4^{1/2}<5!" holds 5!; "9!!" (362880!), "(10^{10})!" and "2^34!" are too big. In an
    exponent only the whole exponent of a literal / letter base is, at most 6! = 720 ("2^{3!}", "2^{(1+2)!}"; 99^{99!}
    is astronomic). Any other factorial (of a letter, a fraction, in an exponent) is refused next to a power, a 4-digit
    number or another factorial."""
    t = re.sub(r"(\d+)\.0+(?![\d.])", r"\1", s.replace("\\left", "").replace("\\right", ""))
    t = t.replace("\\{", "(").replace("\\}", ")")  # an escaped brace is a group there ("\\{5\\}!" is 120)

    def whole_small_exponent(start: int, end: int, n: int) -> bool:
        # "2^{3!}", "x^{6!}": the whole exponent of a literal / letter base, at most _MAX_TOWER_EXPONENT
        return (0 <= n <= 6 and re.match(r"\s*\}", t[end:]) is not None
                and re.search(r"(?:^|[^\d.}\])])(?:\d{1,4}|[a-zA-Z])\s*\^\s*\{\s*$", t[:start]) is not None)

    # Left to right, which is innermost first (an operand is before its "!"): "((3!)!)!" -> "(( 6 )!)!" -> "( 720 )!"
    # -> too big. A replacement changes nothing before it: one pass.
    pos = 0
    try:
        while m := _FACTORIAL_SIGN.search(t, pos):
            pos = m.end()
            start = _factorial_operand_start(t, m.start())
            n = None if start is None else _literal_int(t[start : m.start()])
            if n is None or n < 0:
                continue
            if re.search(r"\^\s*(?:\{[^{}]*)?$", t[:start]) and not whole_small_exponent(start, m.end(), n):
                continue  # in an exponent
            if n > _MAX_FACTORIAL:
                return True
            value = math.factorial(n)
            # a value too long to write out is "#", too big for any factorial it is in: "(1000!)!"
            replacement = f" {value} " if value.bit_length() <= _EXACT_FACTORIAL_BITS else " # "
            t = t[:start] + replacement + t[m.end() :]
            pos = start + len(replacement)
    except OverflowError:
        return True
    rest = re.findall(r"!|\\prod|\\gamma", t, flags=re.I)
    nested = len(rest) > 1 and re.search(r"[)}\]!]\s*!|\\prod|\\gamma", t, flags=re.I)
    return bool(rest and ("^" in t or re.search(r"\d{4,}", t) or nested))


_BIG_ARGUMENT = re.compile(r"[\^!]|\d{5,}")  # a power, a factorial or a 5-digit number


def _split_top_level(s: str) -> list[str]:
    """``s`` cut at the commas outside any bracket: the arguments of "\\gcd(2^{3}, 12)"."""
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(s):
        depth += (ch in "({[") - (ch in ")}]")
        if ch == "," and depth == 0:
            parts.append(s[start:k])
            start = k + 1
    return [*parts, s[start:]]


def _literal_argument_value(arg: str) -> int | None:
    """The value of ``arg`` when it is an integer literal expression ("2^{3}", "3!", "10^2 - 1", "20000"), else None.
    Bare chains ("2^3^2") and factorials of groups are not judged: None. A braced chain nests to the left, as
    latex2sympy2 reads it ("2^{2}^{9}" is 2^18, not Python's 2**(2**9))."""
    t = re.sub(r"\s+|\\left|\\right", "", arg)
    if re.search(r"\^\d+\^|[)}]!|[#\[\]]", t):
        return None
    try:
        return _literal_int(t)
    except OverflowError:
        return None


def _small_literal_argument(arg: str, limit: int) -> bool:
    """Whether ``arg`` is an integer literal expression (see ``_literal_argument_value``) of value at most ``limit``."""
    value = _literal_argument_value(arg)
    return value is not None and abs(value) <= limit


def _cheap_binomial(n_arg: str, k_arg: str) -> bool:
    """Whether C(n, k) of two integer literal expressions has at most ``_MAX_BINOMIAL_BITS`` bits
    ("\\binom{20000}{2}", "\\binom{2^{14}}{2}"; k < 0 or k > n give 0). A negative n is judged by the 4-digit rule."""
    n, k = _literal_argument_value(n_arg), _literal_argument_value(k_arg)
    if n is None or k is None or n < 0:
        return False
    if k < 0 or k > n:
        return True
    m = min(k, n - k)
    if m == 0:
        return True
    if n <= 2**50:  # (beyond, the log-gamma terms cancel in floating point)
        bits = (math.lgamma(n + 1) - math.lgamma(m + 1) - math.lgamma(n - m + 1)) / math.log(2)
    else:  # an upper bound: C(n, m) <= (e n / m)^m
        bits = m * (math.log2(n) - math.log2(m) + math.log2(math.e))
    return bits <= _MAX_BINOMIAL_BITS


def _cheap_chooses_as_values(s: str) -> str:
    """``s`` with each ``{n \\choose k}`` of a cheap binomial (:func:`_cheap_binomial`; its brace group holds the two
    arguments, as ``\\binom``'s two groups do) written as its value " 15 ", innermost first, for the guards to judge
    what the binomial is an operand of: "{6 \\choose 2}^2" is cheap, "{99 \\choose 50}!" is not."""
    pos = 0
    while m := re.compile(r"\\choose(?![a-zA-Z])").search(s, pos):
        pos = m.end()
        depth, j = 0, m.start() - 1
        while j >= 0 and not (depth == 0 and s[j] in "({["):  # the innermost bracket around it
            depth += (s[j] in ")}]") - (s[j] in "({[")
            j -= 1
        if j < 0 or s[j] != "{" or s[j - 1 : j] == "\\":
            continue
        end = _group_end(s, j)
        n_arg, k_arg = s[j + 1 : m.start()], s[m.end() : end]
        if end < len(s) and _cheap_binomial(n_arg, k_arg):
            n, k = _literal_argument_value(n_arg), _literal_argument_value(k_arg)
            value = f" {math.comb(n, k) if 0 <= k else 0} "  # judged as that literal would be
            s = s[:j] + value + s[end + 1 :]
            pos = j + len(value)
    return s


def _evaluated_call_too_big(s: str, plain: bool) -> bool:
    """Binomials / gcd / lcm are evaluated while parsing: refused when an argument holds a power, a
    factorial or a 5-digit number ("\\binom{10^{9}}{5}"), unless it is an integer literal expression of a cheap
    value: a binomial of two such arguments of at most ``_MAX_BINOMIAL_BITS`` bits in ``plain`` integer arithmetic
    ("\\binom{2^{14}}{2}"), else an argument of at most 9999 ("\\binom{x}{3!}", as big as a 4-digit literal); at most
    10^100 in a gcd / lcm of at most 4 arguments ("\\gcd(2^{3}, 12)", "\\gcd(10!, 3)"). "\\binom{5}{2}^2" and
    "\\gcd(12, 18)^2" are fine.
    "{n \\choose k}" (of arguments that are no cheap literals, see :func:`_cheap_chooses_as_values`) is refused next to
    any of them."""
    big = _BIG_ARGUMENT
    if "choose" in s and big.search(s):
        return True
    t = s.replace("\\left", "").replace("\\right", "")
    for m in re.finditer(r"binom|gcd|lcm", t):
        limit = 9999 if m.group(0) == "binom" else 10**100
        j = m.end()
        groups = []
        for _ in range(2):  # up to two argument groups
            while j < len(t) and (t[j].isspace() or t[j] == "}"):  # "\\operatorname{lcm}(4, 6)"
                j += 1
            if j >= len(t) or t[j] not in "({[":
                break
            end = _group_end(t, j)
            groups.append(_split_top_level(t[j + 1 : end]))
            j = end + 1
        if (plain and m.group(0) == "binom" and [len(g) for g in groups] == [1, 1]
                and _cheap_binomial(groups[0][0], groups[1][0])):
            continue
        for args in groups:
            # sympy's gcd / lcm of many unevaluated sums is slow (60 of "2^{13}-k": 8 s): few arguments only
            if any(big.search(a) and (len(args) > 4 or not _small_literal_argument(a, limit)) for a in args):
                return True
    return False


def _literal_arithmetic_too_costly(s: str) -> bool | None:
    """For an answer that is wholly literal arithmetic (numbers, decimals, signs, brackets, fractions, roots,
    factorials, floors, ceilings, e and \\pi: see :func:`_literal_number`): whether it is too costly, judged by the
    values its evaluation computes rather than by its shape (see ``_LiteralReader`` for the bounds): "0.5^2^2",
    "2^3^{-1}", "{8}^{3!}", "2^{2^{0.5}}", "e^{2^{1.5}}", "0.5^{9^{9}}" (0.0) pass; "2^{100001}", "2^{9^{9}}",
    "e^{2^{3!}^{3000}}", "\\lfloor 1.0000001^{7000000000} \\rfloor" do not. None for any other answer, and for one
    without a value (a float overflows: "1.5^{9999}\\cdot \\pi"): the shape rules of :func:`_too_costly_for_sympy`
    judge it."""
    try:
        value = _literal_number(s)
    except _TooCostly:
        return True
    return None if value is None else False


def _too_costly_for_sympy(s: str) -> bool:
    """Refuse inputs whose parse or printing could compute astronomically large numbers.

    The official script evaluates everything; these refusals change verdicts only on inputs no
    answer states in practice: over ``_MAX_SYMPY_CHARS`` characters, ``_MAX_BARS`` "|",
    ``_MAX_DEPTH`` levels of brackets inside those around the whole answer or
    ``_MAX_FUNCTION_DEPTH`` levels of function arguments, less one per 4 "|" (the parse time
    grows with each) or ``_MAX_FLOOR_DEPTH`` levels of floors and ceilings (their printing time), counted up to
    where latex2sympy2 stops reading ("5 triangles ..." is read as 5). An answer that is wholly literal arithmetic ("0.5^2^2", "{8}^{3!}", "e^{2^{1.5}}") is then judged by the
    values its evaluation computes (:func:`_literal_arithmetic_too_costly`); any other by these shape rules: in plain
    integer arithmetic (:func:`_plain_integer_arithmetic`), a power of an integer literal of more
    than ``_MAX_LITERAL_POWER_BITS`` bits, whether its exponent is a literal (``2^{100001}``; ``2^{10000}`` is fine),
    a left-nested chain (``9^9^9`` is 9^81 and ``9^99^99`` 9^9801, fine; ``2^9999^9999`` is not), a tower
    (``2^{2^{10}}`` is fine, ``9^{9^{9}}`` is not) or a power of one such power (``(2^{100})^{100}`` is fine);
    elsewhere or of any other base, an exponent of 5 or more digits, a chain, a tower with an exponent over
    ``_MAX_TOWER_EXPONENT`` or a power of powers whose exponents multiply to more (``x^9^9``, ``(x^{100})^{100}``,
    ``\\sqrt{2^{10000}}``); a big factorial (:func:`_factorial_too_big`; ``1000 \\cdot 3!`` is fine); binomials / gcd /
    lcm (evaluated while parsing) with a power, a factorial or a 5-digit number in an argument, unless cheap
    (:func:`_evaluated_call_too_big`)."""
    s = _scan_latex2sympy2(s, limit=_MAX_SYMPY_CHARS)[0]  # what latex2sympy2 reads
    if len(s) > _MAX_SYMPY_CHARS or "**" in s:
        return True
    depth, function_depth = _bracket_depth(_strip_outer_groups(s.replace("\\left", "").replace("\\right", "")))
    bars = len(_BAR_RE.findall(s))
    if bars > _MAX_BARS or depth > _MAX_DEPTH or function_depth + bars / 4 > _MAX_FUNCTION_DEPTH:
        return True
    if _floor_depth(s) > _MAX_FLOOR_DEPTH:
        return True
    s = _cheap_chooses_as_values(s)
    plain = _plain_integer_arithmetic(s)
    if (costly := _literal_arithmetic_too_costly(s)) is not None:
        return costly
    for m in re.finditer(r"\^\s*\{?\s*[-+]?\s*\d{5,}", s):  # 10^{12345}, unless of a literal and cheap (2^{10000})
        bits = _literal_power_bits(s, m.start()) if plain else None
        if bits is None or bits > _MAX_LITERAL_POWER_BITS:
            return True
    if any(not _small_literal_chain(s, m.start(), plain) for m in re.finditer(r"\^\s*\d+\s*\^", s)):  # 9^{9}^9^9
        return True
    for m in re.finditer(r"\^\s*\{[^{}]*\^", s):  # a tower: 9^{9^{9}}; 2^{2^{10}} (1025 bits) is cheap
        base = _literal_base(s, m.start()) if plain else None
        exponent = _literal_tower(_exponent_after(s, m.start()), _MAX_TOWER_EXPONENT if base is None
                                  else _MAX_LITERAL_POWER_BITS)
        if exponent is None or (base is not None and _power_bits(base, exponent) > _MAX_LITERAL_POWER_BITS):
            return True
    if any(_power_of_powers_too_big(s, k, plain) for k, ch in enumerate(s) if ch == "^"):
        return True
    if re.search(r"!|\\prod|\\gamma", s, flags=re.I) and _factorial_too_big(s):
        return True
    return _evaluated_call_too_big(s, plain)


# The names the official MATH-V ``utils.py`` evaluates printed sympy expressions with:
# ``from math import *`` (plus Python's ``True`` / ``False``). Any other name raises NameError
# there (``E``, ``I``, ``oo``, ``zoo``, ``Abs``, ``Max``, ``sec``, ``x``, ...).
_MATH_NAMES: dict[str, Any] = {k: getattr(math, k) for k in dir(math) if not k.startswith("_")}
_MATH_NAMES.update({"True": True, "False": False})
# Bounds of the expression interpreter: an integer power of more than _MAX_LITERAL_POWER_BITS bits or a factorial
# beyond this is refused (the official ``eval`` would compute it, for minutes or until memory runs out).
_MAX_FACTORIAL = 5_000


_COMPARISONS = {ast.Gt: operator.gt, ast.Lt: operator.lt, ast.GtE: operator.ge, ast.LtE: operator.le,
                ast.Eq: operator.eq, ast.NotEq: operator.ne}


def _py_eval(node: Any) -> Any:
    """Python/``math`` semantics of a printed sympy expression, for a whitelisted AST subset.

    Mirrors the official ``eval(str(expr))`` (under ``from math import *``) without executing
    code: numbers, names of ``math``, + - * / // % **, unary +/-, calls of ``math`` functions
    and tuples / lists (which make the official ``round`` raise). Raises on anything else,
    like ``eval`` would for an unknown name.
    """
    if isinstance(node, ast.Expression):
        return _py_eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name):
        return _MATH_NAMES[node.id]  # KeyError <=> NameError
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _py_eval(node.operand)
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.BinOp):
        a, b = _py_eval(node.left), _py_eval(node.right)
        op = node.op
        if isinstance(op, ast.Add):
            return a + b
        if isinstance(op, ast.Sub):
            return a - b
        if isinstance(op, ast.Mult):
            return a * b
        if isinstance(op, ast.Div):
            return a / b
        if isinstance(op, ast.FloorDiv):
            return a // b
        if isinstance(op, ast.Mod):
            return a % b
        if isinstance(op, ast.Pow):
            if isinstance(a, int) and isinstance(b, int) and b > 0 and _power_bits(a, b) > _MAX_LITERAL_POWER_BITS:
                raise OverflowError("power too large")
            return a**b
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        fn = _MATH_NAMES[node.func.id]
        args = [_py_eval(a) for a in node.args]
        if fn in (math.factorial, math.perm, math.comb) and any(abs(x) > _MAX_FACTORIAL for x in args):
            raise OverflowError("factorial too large")
        return fn(*args)
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_py_eval(e) for e in node.elts)
    if isinstance(node, ast.Compare):
        # A printed inequality ("1 > 0", from "\boxed{1>0}") is a bool there, which rounds as 1 / 0.
        left = _py_eval(node.left)
        for op, right_node in zip(node.ops, node.comparators):
            right = _py_eval(right_node)
            if not _COMPARISONS[type(op)](left, right):
                return False
            left = right
        return True
    raise ValueError(f"unsupported expression node {type(node).__name__}")


class _SLLSyntaxError(Exception):
    """A syntax error of the SLL parse (see :func:`_latex2sympy2_like`)."""


class _ParseError(Exception):
    """An error of the full LL parse at character ``offset`` of its input (-1: at the end)."""

    def __init__(self, msg: str, offset: int):
        super().__init__(msg)
        self.offset = offset


class _LLSyntaxError(_ParseError):
    """A syntax error of the parser, at the token it was found at."""


class _LexerError(_ParseError):
    """A character the lexer has no token for."""


# Full LL prediction costs about 1.5 ms per character per level of brackets around it (a "|" counted as
# a level): it is tried only while length * (1 + depth + bars) is at most this (about 1 s).
_MAX_LL_COST = 600


def _too_costly_for_full_ll(s: str) -> bool:
    return len(s) * (1 + _bracket_depth(s)[0] + len(_BAR_RE.findall(s))) > _MAX_LL_COST


_L2S_CONFIGS: tuple | None = None
_L2S_CONVERTER: Any = None


def _l2s_configs() -> tuple:
    # latex2sympy2_extended with its normalisation off: the original latex2sympy2 (which the
    # official script uses) knows no \boxed / \text / unit stripping and no mixed fractions.
    global _L2S_CONFIGS
    if _L2S_CONFIGS is None:
        from latex2sympy2_extended.latex2sympy2 import ConversionConfig, NormalizationConfig

        _L2S_CONFIGS = (
            NormalizationConfig(basic_latex=False, units=False, malformed_operators=False, nits=False,
                                boxed="none", equations=False),
            ConversionConfig(interpret_as_mixed_fractions=False, interpret_simple_eq_as_assignment=False,
                             interpret_contains_as_eq=False, lowercase_symbols=False),
        )
    return _L2S_CONFIGS


def _l2s_converter() -> Any:
    """A subclass of latex2sympy2_extended's converter that reads two things as latex2sympy2 does.

    It is a private subclass, not a patch: the library's own class, which math-verify uses
    (with mixed fractions on), is left as it is."""
    global _L2S_CONVERTER
    if _L2S_CONVERTER is None:
        import sympy
        from antlr4.atn.ParserATNSimulator import ParserATNSimulator
        from antlr4.atn.PredictionMode import PredictionMode
        from antlr4.dfa.DFA import DFA
        from antlr4.PredictionContext import PredictionContextCache
        from antlr4.error.ErrorListener import ErrorListener
        from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy

        class _SLLErrorListener(ErrorListener):
            def syntaxError(self, recognizer, offendingSymbol, line, column, msg, e):
                raise _SLLSyntaxError(msg)

        class _LLErrorListener(ErrorListener):
            def syntaxError(self, recognizer, offendingSymbol, line, column, msg, e):
                if offendingSymbol is None:  # the lexer's
                    raise _LexerError(msg, recognizer._tokenStartCharIndex)
                raise _LLSyntaxError(msg, -1 if offendingSymbol.type == -1 else offendingSymbol.start)  # -1: EOF

        def _unevaluated_division(lh: Any, rh: Any) -> Any:
            return sympy.Mul(lh, sympy.Pow(rh, -1, evaluate=False), evaluate=False)

        class Converter(_Latex2Sympy):
            sll = False  # parse with ANTLR's SLL prediction (see _latex2sympy2_like)
            sll_cache: tuple | None = None

            def create_parser(self, latex_str):
                parser = super().create_parser(latex_str)
                if self.sll:
                    # Its own prediction cache: the shared one of the grammar (math-verify's) is left alone.
                    if Converter.sll_cache is None:
                        Converter.sll_cache = ([DFA(d, i) for i, d in enumerate(parser.atn.decisionToState)],
                                               PredictionContextCache())
                    parser._interp = ParserATNSimulator(parser, parser.atn, *Converter.sll_cache)
                    parser._interp.predictionMode = PredictionMode.SLL
                    for recognizer in (parser, parser._input.tokenSource):  # the parser and its lexer
                        recognizer.removeErrorListeners()
                        recognizer.addErrorListener(_SLLErrorListener())
                else:
                    for recognizer in (parser, parser._input.tokenSource):  # the parser and its lexer
                        recognizer.removeErrorListeners()
                        recognizer.addErrorListener(_LLErrorListener())
                return parser

            def convert_func(self, func):
                # latex2sympy2 builds \exp(x) evaluated, as sympy.exp(x) ("\exp(\ln(5))" is 5, "\exp(1)" is E, a
                # NameError for the official eval); the base class as exp(x, evaluate=False). Only that call is
                # evaluated: an exp that sympy.exp itself leaves unevaluated ("e^{\lfloor 0\rfloor+1}" is
                # exp(1, evaluate=False), printed "exp(1)", which the official eval computes with math.exp) stays so.
                res = super().convert_func(func)
                single = func.func_normal_single_arg()
                if single is None or single.start.text[1:] not in ("exp", "exponentialE"):
                    return res
                if isinstance(res, sympy.exp):
                    return sympy.exp(*res.args)
                if isinstance(res, sympy.Pow) and isinstance(res.base, sympy.exp):  # "\exp^{2}(1)"
                    return sympy.Pow(sympy.exp(*res.base.args), res.exp, evaluate=False)
                return res

            def convert_postfix_list(self, arr, i=0):
                # The base class reads an Integer juxtaposed with any positive Rational as a mixed
                # number ("4(3)" -> 4+3), whatever interpret_as_mixed_fractions says; latex2sympy2
                # multiplies ("4(3)" -> 12).
                res = self.convert_postfix(arr[i])
                if isinstance(res, list) and len(res) == 1:  # d/dx: the base class's rule
                    return super().convert_postfix_list(arr, i)
                if i == len(arr) - 1 or not isinstance(res, (sympy.Expr, sympy.MatrixBase)):
                    return res
                rh = self.convert_postfix_list(arr, i + 1)
                if getattr(res, "is_Matrix", False) or getattr(rh, "is_Matrix", False):
                    return self.mat_mul_flat(res, rh)
                return self.mul_flat(res, rh)

            def parse_number(self, text):
                # latex2sympy2 reads a decimal as an exact Rational ("0.5" -> 1/2), the base class as a Float:
                # the printed expression differs ("-1/0.5" prints "-1/1/2" there, which Python evaluates to -0.5).
                try:
                    return sympy.Rational(text.replace(",", ""))
                except (TypeError, ValueError):
                    return super().parse_number(text)

            def convert_atom_expr(self, atom_expr):
                # In the state an official run is in (see mathvision_is_equal: its global ``var`` rebound by a
                # differential), latex2sympy2 raises on every letter, Greek letter, other symbol command and accent
                # it reads as an atom: "\\tau" has no value there (a fresh process would give math's tau, 6.28),
                # nor "\\binom{x}{0}" (else 1). Its \\pi is a token of its own, and "I" is returned before that
                # check: both are read as before.
                greek = atom_expr.GREEK_CMD()
                letter = atom_expr.LETTER_NO_E()
                if not ((greek is not None and greek.getText().strip() == "\\pi")
                        or (letter is not None and letter.getText() == "I")):
                    raise ValueError("latex2sympy2 raises on a letter here")
                return super().convert_atom_expr(atom_expr)

            def convert_atom(self, atom):
                # latex2sympy2's percent is the Rational number/100 ("100\\%" is the integer 1, not 1.0).
                if atom.PERCENT_NUMBER():
                    text = atom.PERCENT_NUMBER().getText().replace("\\%", "").replace("%", "")
                    return sympy.Rational(self.parse_number(text), 100)
                return super().convert_atom(atom)

            # The base class folds integer/integer into a Rational ("6/2" -> the Integer 3);
            # latex2sympy2 keeps the division, which Python's "/" makes a float (3.0): the
            # official eval_tuple prints "(3.0,-4)", not "(3,-4)". So for 0/0 (the base class's nan, whose
            # power 0 is 1): "0/0" raises ZeroDivisionError in the official eval.
            def convert_frac(self, frac):
                res = super().convert_frac(frac)
                if isinstance(res, sympy.Rational) or res is sympy.nan:
                    return _unevaluated_division(self.convert_expr(frac.upper), self.convert_expr(frac.lower))
                return res

            def convert_relation(self, rel):
                # latex2sympy2 nests a chain of inequalities to the left ("1<3<2" is (1 < 3) < 2, which Python
                # evaluates to True); the base class makes it an And of each pair (no value for the official eval).
                if rel.expr():  # a plain expression, not a comparison
                    return super().convert_relation(rel)
                ops = ((rel.LT, sympy.StrictLessThan), (rel.LTE, sympy.LessThan), (rel.GT, sympy.StrictGreaterThan),
                       (rel.GTE, sympy.GreaterThan))
                relation = next((r for token, r in ops if token()), None)
                if relation is None:  # "=" and the rest: the base class's handling
                    return super().convert_relation(rel)
                lh, rh = self.convert_relation(rel.relation(0)), self.convert_relation(rel.relation(1))
                return relation(lh, rh, evaluate=False)

            def convert_mp(self, mp):
                res = super().convert_mp(mp)
                if (isinstance(res, sympy.Rational) or res is sympy.nan) and (mp.DIV() or mp.CMD_DIV() or mp.COLON()):
                    left, right = (mp.mp(0), mp.mp(1)) if hasattr(mp, "mp") else (mp.mp_nofunc(0), mp.mp_nofunc(1))
                    return _unevaluated_division(self.convert_mp(left), self.convert_mp(right))
                return res

        _L2S_CONVERTER = Converter
    return _L2S_CONVERTER


# Constructs the original latex2sympy2 grammar rejects but latex2sympy2_extended accepts.
_L2S_REJECT = ("\\(", "\\)", "\\[", "\\]", "\\boxed", "\\fbox", "\\circ", "\\text", "\\mbox", "\\!", "=", '"', "{,}",
               "\\cfrac", "\\;", "\\:",
               # commands its lexer has no token for ("1\\approx 2", "1\\lt 2", "1\\thinspace 000", "\\phantom{0}5"),
               # and \\gamma / \\Gamma, which it reads as the symbol "gamma" (the math function there: never a number)
               "\\approx", "\\lt", "\\gt", "\\thinspace", "\\medspace", "\\thickspace", "\\negthinspace",
               "\\negmedspace", "\\negthickspace", "\\phantom", "\\hphantom", "\\vphantom", "\\gamma", "\\Gamma",
               # latex2sympy2_extended's lexer skips ("2\\vspace3" -> 6) or reads as a degree sign ("30^\\degree",
               # "30^{\\degree}" -> 30) what is a lexer error there
               "\\degree", "\\vspace", "\\vskip", "\\vrule", "\\vcenter", "\\vbox", "\\hfil")
# Commands whose next brace group(s) are arguments (not a plain grouping ``{...}``); the constants \\pi and \\infty
# take none ("\\pi{2}" is pi*2).
_ARG_COMMAND = re.compile(r"\\(?!(?:pi|infty)\s*$)([a-zA-Z]+)\s*$|\\sqrt\s*\[[^\[\]]*\]\s*$")
# A function name with scripts before a "{": "\\log_{2}{8}/2" is log_2 of what follows (its func_arg_noparens,
# "{8}/2" -> 4, as after "\\log_2 "), not of a group "(8)" that ends its argument (log_2(8) / 2).
_SCRIPTED_COMMAND = re.compile(r"\\(?!(?:pi|infty)(?![a-zA-Z]))[a-zA-Z]+\s*(?:[_^]\s*(?:\{[^{}]*\}|\w)\s*)+$")
_TWO_ARG_COMMANDS = ("frac", "dfrac", "tfrac", "cfrac", "binom", "dbinom", "tbinom")


def _group_braces(s: str) -> str:
    """A ``{...}`` that is not the argument of a command / ``^`` / ``_`` is a plain group in
    latex2sympy2 (``{4}`` -> 4, ``{2}{3}`` -> 2*3): rewrite it ``(...)``, which
    latex2sympy2_extended reads the same way (it reads a bare ``{4}`` as a set). One holding a ``\\choose``
    is a binomial there (``{4 \\choose 2}`` -> 6), in both: kept. An escaped ``\\{ ... \\}`` is a group in
    latex2sympy2 too (``\\{5\\}+1`` -> 6): written ``\\lbrace ... \\rbrace``, which both read the same way."""
    out: list[str] = []
    stack: list[tuple[bool, int, int]] = []  # per open brace: (plain group?, argument groups owed after it, index)
    expect = 0  # argument groups still owed at this point (after "\frac{a}": 1)
    escaped = False  # the last character is a backslash that escapes the next one
    for ch in s:
        if escaped and ch in "{}":
            out[-1] = "\\lbrace " if ch == "{" else "\\rbrace "
            escaped, expect = False, 0
            continue
        escaped = ch == "\\" and not escaped
        if ch == "{":
            prefix = "".join(out).rstrip()
            m = _ARG_COMMAND.search(prefix)
            if expect > 0:
                stack.append((False, expect - 1, len(out)))
            elif m:
                n_args = 2 if m.group(1) in _TWO_ARG_COMMANDS else 1
                stack.append((False, n_args - 1, len(out)))
            elif prefix.endswith(("^", "_")) or _SCRIPTED_COMMAND.search(prefix):
                stack.append((False, 0, len(out)))
            else:
                stack.append((True, 0, len(out)))
            expect = 0
            out.append("(" if stack[-1][0] else "{")
        elif ch == "}":
            plain, owed, start = stack.pop() if stack else (False, 0, 0)
            inner = re.sub(r"\([^()]*\)|\{[^{}]*\}", "", "".join(out[start + 1 :]))  # its own level
            if plain and re.search(r"\\choose(?![a-zA-Z])", inner):
                plain, out[start] = False, "{"
            expect = owed
            out.append(")" if plain else "}")
        else:
            if not ch.isspace():
                expect = 0
            out.append(ch)
    return "".join(out)


# Bare words that latex2sympy2's lexer reads as function names (its FUNC_*_NAME tokens).
_L2S2_WORD = re.compile(r"ar(?:c)?(?:sinh|cosh|tanh)|gcd|lcm|floor|ceil|eye|zeros|ones|cols|rows|diag|norm|rank"
                        r"|tr|rref|[hv]stack|orth|nullspace|eigen|svd|[pbv]?matrix")
# One token of its lexer: "\\left", "\\right", an arrow, a bracket or "\\choose", also before other letters (its lexer
# has no rule for a whole unknown command: "\\rightx" is "\\right" "x", "\\toa" "\\to" "a", "\\rvertx" "\\rvert"
# "x", "\\lfloore^2" "\\lfloor" "e" "^" "2"; but "\\rightarrow" is an arrow), a matrix's "\\begin{pmatrix}", another
# command ("\\frac", "\\{"), a number ("1,000.5", "3E2", "5\\%"), a character.
_L2S2_TOKEN = re.compile(r"\\(?:m?left(?!rightarrow)|m?right(?!arrow)|(?:[lL]ong)?[rR]ightarrow|to"
                         r"|[lr](?:vert|brace|brack|floor|ceil|group)|[ul][lr]corner|x[rR]ightarrow|choose)"
                         r"|\\(?:begin|end)\{[pbv]?matrix\}|\\(?:[a-zA-Z]+|[{}\\])"
                         r"|(?:\d*(?:,\d{3})*\.\d+|\d+(?:,\d{3})*)(?:E[-+]?\d+|\\%)?|<->|<=>|.", re.S)
# Each group rule pairs an opener with its own closer: "{5)" and "(5}" are errors, not 5.
_BRACKETS = {"(": ")", "[": "]", "{": "}", "\\{": "\\}", "\\lbrace": "\\rbrace", "\\lbrack": "\\rbrack",
             "\\lgroup": "\\rgroup", "\\lvert": "\\rvert", "\\lfloor": "\\rfloor", "\\lceil": "\\rceil",
             "\\llcorner": "\\lrcorner", "\\ulcorner": "\\urcorner"}
_CLOSERS = set(_BRACKETS.values())
_BARS = ("|", "\\vert", "\\|")
_AFTER_LEFT = (*_BRACKETS, *_BARS)
# Where it stops after a complete expression outside brackets (and fails after another): "&", a line break,
# an arrow, "\\choose" (only a "{...}" holds one).
_STOPS = ("&", "\\\\", "\\to", "\\rightarrow", "\\Rightarrow", "\\longrightarrow", "\\Longrightarrow",
          "\\xrightarrow", "\\xRightarrow", "\\leftrightarrow", "\\Leftrightarrow", "<->", "<=>", "\\choose")
# Accents: "\\mathrm{5}" takes a subscript like a letter.
_ACCENT = re.compile(r"\\(?:acute|bar|overline|breve|check|widecheck|dot|ddot|grave|hat|tilde|widetilde|vec"
                     r"|overrightarrow|bm|boldsymbol|text|textit|math[a-z]+)\s*$")
# A letter or command with its scripts before a "(" / "[": a function's argument ("f(x]", "\\sin\\left(x)").
_CALL = re.compile(r"[a-zA-Z]\s*(?:[_^]\s*(?:\{[^{}]*\}|\w)\s*)*$")


# Its functions of one argument (func_normal_single_arg), whose argument may be unbracketed ("\\sin 2 \\cdot 3" is
# sin(6)): a "^" after a factorial that ends such an argument raises the function ("\\sin 3!^{2}" is sin(6)^2).
_L2S2_SINGLE_ARG_FUNCTION = re.compile(r"\\(?:log|ln|exp|(?:arc?)?(?:sin|cos|tan)h?|(?:arc)?(?:csc|sec|cot))")
# The tokens that end an operand, after which a "+" or "-" is a sum (not a sign: "\\sin -3!^{2}"), which ends a
# function's unbracketed argument: a number, a letter, a closer, a factorial or prime, \\pi, \\infty, a bar.
_L2S2_OPERAND_END = re.compile(r"[\w.].*|[)\]}!'|]|\\(?:pi|infty|r[a-z]+|\}|\|)")


def _scan_latex2sympy2(s: str, limit: int | None = None) -> tuple[str, bool]:
    """What latex2sympy2 reads of ``s``, and whether it raises there for a token that cannot be where it is. With a
    ``limit``, the scan ends once it has read more than ``limit`` characters, returning all of ``s`` (then only that
    length is told): each bracket looks back over what came before it, so a scan of 100 KB of "(" took 25 s.

    Its top rule has no EOF, so it returns what it parsed before a token that cannot continue the
    expression: a closer or "\\right" that closes nothing ("5)" -> 5, "\\frac{1}{2}]" -> 1/2, "5\\right+1"
    -> 5); outside brackets, a bare function-name word ("5triangles" -> 5: "tr" is a token), a "." that starts
    no number ("18.because..." -> 18: what follows is never read, however long), one of ``_STOPS`` ("6&" -> 6,
    "12\\to a" -> 12), a "_" after what takes no subscript (a number, \\pi, \\infty, a closed group or fraction,
    "!" or "'": "3_", "\\pi_1" and "\\sin 0_" are 3, pi and 0; a letter, an accent or a power takes one) or a "^"
    after "!" or "'" ("3!^2" is 6; "^T" is a transpose), unless that ends a function's unbracketed argument, whose
    power it is then ("\\sin 3!^{2}" is sin(6)^2, "\\sin 2 \\cdot 3!^2" sin(12)^2; not "\\sin 3 + 2!^2": a sum
    ends the argument). Such a "_" or "^" inside brackets is an error, as is a bracket closed by another kind
    ("{5)", "(5}"), by a "\\right" the opener had no "\\left" for or the other way round ("\\left(5)"), a "\\left"
    before no bracket and a bracket never closed; a function's argument may end in ")" or "]" and take "\\left" /
    "\\right" or not ("f(x]")."""
    stack: list[tuple[str, bool, bool, str]] = []  # per open bracket: (closer, after \\left, function argument, kind)
    last = ""  # what the last token ended: "atom" (a number, \\pi, \\infty), "closed", "postfix" ("!", "'")
    caret = left = right = False  # the last token was "^" / "\\left" / "\\right"
    # per bracket level: how many functions' unbracketed arguments are open in it, and whether a function's name (and
    # its scripts) was the last thing in it; and the last token
    open_arguments, after_name, prev = [0], [False], ""
    i = 0
    while i < len(s):
        if limit is not None and i > limit:
            return s, True
        m = _L2S2_TOKEN.match(s, i)
        tok = m.group(0)
        if tok.isspace():
            i += len(tok)
            continue
        if left and tok not in _AFTER_LEFT or right and tok not in _CLOSERS and tok not in _BARS:
            return s[:i], True
        if tok in _BARS:
            if right and stack and stack[-1][0] == "|":  # "\\left| ... \\right|"
                stack.pop()
            elif left:
                stack.append(("|", True, False, ""))
            last, caret, left, right = "", False, False, False
            i += len(tok)
            continue
        top = not stack
        raises_function = tok == "^" and last == "postfix" and open_arguments[-1] > 0
        stop = (tok == "_" and last in ("atom", "closed", "postfix")) or (
            tok == "^" and last == "postfix" and not raises_function
            and not re.match(r"\^(?:T|\{T\}|\{\\top\})", s[i:]))
        if stop:
            return s[:i], not top
        if raises_function:  # the function, its argument closed, is the base of this power
            open_arguments[-1], after_name[-1] = open_arguments[-1] - 1, False
        elif _L2S2_SINGLE_ARG_FUNCTION.fullmatch(tok):
            open_arguments[-1], after_name[-1] = open_arguments[-1] + 1, True
        elif not (after_name[-1] and (tok in ("^", "_") or prev in ("^", "_"))):  # not its scripts ("\\sin^{2} -1")
            if (tok in ("+", "-") and not after_name[-1] and _L2S2_OPERAND_END.fullmatch(prev)
                    or tok == "," or _L2S2_RELATION.fullmatch(tok)):
                open_arguments[-1] = 0  # a sum, a list or a relation ends every argument of this level
            after_name[-1] = False
        prev = tok
        if top and (re.fullmatch(r"\\m?right", tok) or tok in _STOPS
                    or (len(tok) == 1 and (_L2S2_WORD.match(s, i) or (tok == "." and not s[i + 1 : i + 2].isdigit())))):
            return s[:i], False
        kind = "sup" if caret else ""
        if tok.startswith("\\begin{"):  # a matrix: its "&" and "\\\\" are no stops
            stack.append(("\\end", False, True, ""))
            open_arguments.append(0)
            after_name.append(False)
            last = ""
        elif tok in _BRACKETS:
            prefix = re.sub(r"\\m?left\s*$", "", s[:i])
            call = tok in "([" and bool(_CALL.search(prefix))
            if tok == "{" and _ACCENT.search(prefix):
                kind = "accent"
            stack.append((_BRACKETS[tok], left, call, kind))
            open_arguments.append(0)
            after_name.append(False)
            last = ""
        elif tok in _CLOSERS or tok.startswith("\\end{"):
            if top:
                return s[:i], False
            closer, opened_left, call, kind = stack.pop()
            open_arguments.pop()
            after_name.pop()
            if closer == "\\end":
                ok = tok.startswith("\\end{")
            elif call:
                ok = tok in ")]"
            else:
                ok = tok == closer and opened_left == right
            if not ok:
                return s[:i], True
            last = "" if kind else "closed"
        elif tok[0].isdigit() or tok[0] == "." and len(tok) > 1 or tok in ("\\pi", "\\infty"):
            last = "" if caret else "atom"
        elif tok in ("!", "'"):
            last = "postfix" if s[i : i + 2] != "!=" else ""
        else:
            last = ""
        caret, left, right = tok == "^", bool(re.fullmatch(r"\\m?left", tok)), bool(re.fullmatch(r"\\m?right", tok))
        i += len(tok)
    return s, left or right or any(not call for _, _, call, _ in stack)


# Its relation tokens (LT, LTE, GT, GTE, UNEQUAL, ASSIGNMENT, EQUAL); "\\left" is gone by the time this is used.
_L2S2_RELATION = re.compile(r"[<>=]|!=|\\(?:leq?|geq?|leqslant|geqslant|neq?|equiv)(?![a-zA-Z])")
# latex2sympy2's ``(a)_{b}`` permutation rewrite, as its ``latex2sympy`` writes it.
_L2S2_PERMUTATION = re.compile(r"\(([a-zA-Z0-9+\-*/\\ ]+?)\)_{([a-zA-Z0-9+\-*/\\ ]+?)}")


def _latex2sympy2_text_rewrites(s: str) -> str:
    """The plain text replacements latex2sympy2 1.9.1's ``latex2sympy`` makes before lexing, in its order:
    ``\\dfrac`` / ``\\tfrac`` -> ``\\frac``, ``\\mathrm{T}`` -> T, ``\\mathrm{d}`` / ``{\\rm d}`` -> d, a
    ``\\left[\\begin{matrix}`` ... ``\\end{matrix}\\right]`` -> bmatrix, ``(a)_{b}`` -> ``\\frac{(a)!}{((a)-(b))!}``
    (``(5)_{2}`` is 20), and ``\\displaystyle``, ``\\quad``, ``\\qquad``, ``~``, ``\\,``, ``$`` -> a space
    (``\\frac \\quad {5}{3}`` is 5/3; ``1\\\\,`` leaves ``1\\ ``, an error)."""
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = s.replace("\\mathrm{T}", "T").replace("\\mathrm{d}", "d").replace("{\\rm d}", "d")
    s = s.replace("\\left[\\begin{matrix}", "\\begin{bmatrix}").replace("\\end{matrix}\\right]", "\\end{bmatrix}")
    s = _L2S2_PERMUTATION.sub(r"\\frac{(\1)!}{((\1)-(\2))!}", s)
    s = s.replace("\\displaystyle", " ")
    s = s.replace("\\quad", " ").replace("\\qquad", " ").replace("~", " ").replace("\\,", " ")
    return s.replace("$", " ")


def _latex2sympy2_like(s: str) -> Any:
    """Parse ``s`` (already through :func:`_latex2sympy2_text_rewrites`) as the official script's
    ``latex2sympy`` (latex2sympy2 1.9.1) would, using latex2sympy2_extended plus rewrites for the
    differences that matter on MATH-V answers. Raises where latex2sympy2 raises."""
    from latex2sympy2_extended.latex2sympy2 import normalize_latex

    # What follows where it stops reading is never looked at: "5}^{\\circ" is 5, and so is "5 & \\circ" (at
    # "&", a line break or an arrow it stops after a complete expression, and fails after another).
    s, error = _scan_latex2sympy2(s)
    if error:
        raise ValueError("latex2sympy2 raises at a bracket, \"_\" or \"^\" here")
    s = re.sub(r"\\m?(?:left(?!rightarrow)|right(?!arrow))", "", s)
    # Its \\pi / \\infty take no exponent of their own: "2^\\pi^2" is (2^pi)^2; "^{\\top}" is a transpose.
    s = re.sub(r"\^\s*(\\(?:pi|infty))(?![a-zA-Z])", r"^{\1}", s).replace("^{\\top}", "'")
    # Its \\pi with an exponent then a subscript is one atom whose subscript it drops ("\\pi^2_1" is pi^2; the
    # base class would make a symbol pi_1); "\\pi_1^2" is not (a subscript first ends the parse at "_").
    s = re.sub(r"(\\pi\s*\^\s*(?:\{[^{}]*\}|\w))\s*_\s*(?:\{[^{}]*\}|\w)", r"\1", s)
    # where it stops reading ("&", a line break, an arrow), not counting a matrix's own "&" and "\\\\"
    outside = re.sub(r"\\begin\{[pbv]?matrix\}.*?\\end\{[pbv]?matrix\}", lambda m: " " * len(m.group()), s, flags=re.S)
    m = re.search(r"&|\\\\|\\(?:to|rightarrow|Rightarrow|longrightarrow)(?![a-zA-Z])", outside)
    read = s[: m.start()] if m else s
    if (
        any(t in read for t in _L2S_REJECT)
        or not read.isascii()
        or re.search(r"(?<!\\)%|\s\\%", read)  # "%" alone, or "\%" after a space
    ):
        raise ValueError("latex2sympy2 rejects this")
    s = s.strip().rstrip(".")  # "6." -> 6 ("." ends the parse)
    # Its numbers (longest match) take thousands separators, greedily: "100,100" -> 100100, and "1047,1047" -> the
    # number 1047104 then the number 7, i.e. 1047104*7. A decimal's leading digits may be absent ("DIGIT* (','
    # DIGIT DIGIT DIGIT)* '.' DIGIT+"): ",500.5" is 500.5 and "1.5,100.5" the juxtaposed numbers 1.5 and 100.5.
    # Not in a decimal's fraction: ".51,000" is 0.51 then ",000" (a list).
    s = re.sub(
        r"\d*(?:,\d{3})*\.\d+|\d+(?:,\d{3})*",
        lambda m: (" " if m.group(0)[0] == "," else "") + m.group(0).replace(",", "")
        + (" " if m.string[m.end() : m.end() + 1].isdigit() else ""),
        s,
    )
    # Its decimals are exact rationals: "4.0" is the integer 4 (printed "4", not "4.0", by the
    # official eval_tuple; see also the converter's parse_number). Not before ",ddd", which would make it a
    # thousands separator: "1.0,250" is 1.0 then ",", a list.
    s = re.sub(r"(?<![\d.])(\d+)\.0+(?![\d.]|,\d)", r"\1", s)
    s = _group_braces(s)
    # Its \\pi (and power) before a bracket is a factor ("\\pi(2)" is 2*pi); latex2sympy2_extended reads a function.
    s = re.sub(r"(?<!\\frac)(?<!\\sqrt)(\\pi(?:\s*\^\s*(?:\{[^{}]*\}|\w))?)(?=\s*[(\[])", r"\1\\cdot ", s)
    # Juxtaposed numbers multiply, more tightly than "/" ("1 010" -> 1*10, "12\frac{1}{2}" -> 12*1/2, not 12.5;
    # "2/1 010" -> 2/(1*10)): the converter's convert_postfix_list; no "\cdot" is written in between.
    nc, cc = _l2s_configs()
    stripped = _strip_outer_groups(s)
    in_group = stripped != s.strip()  # "(5. x)": inside brackets nothing ends the parse early (an error)
    if in_group and _L2S2_RELATION.search(stripped):  # its relations are top-level only: "(0<1)" is an error
        raise ValueError("latex2sympy2 reads no comparison inside brackets")
    s = normalize_latex(stripped, nc)
    # ANTLR's SLL prediction first: where it parses without a syntax error its tree is the one of the
    # default (full LL) prediction, at a fraction of the cost (full-context prediction rescans a leading
    # group for each level: "((((1+...))))" of 400 characters takes seconds). It reports a syntax error on
    # some valid input ("\\pi^2", "x^2"): full LL then decides, where that is cheap enough.
    converter = _l2s_converter()(config=cc)
    converter.sll = True
    try:
        return converter.parse(s)
    except _SLLSyntaxError:
        pass
    if _too_costly_for_full_ll(s):
        raise ValueError("too costly to parse")
    return _parse_until_stop(s, cc, early_stop=not in_group)


# Tokens at which latex2sympy2 stops reading after a complete expression (no other token can follow
# one there): a "." that starts no number, "&", "\\\\", "'", "_" and the arrows "\\to", "\\rightarrow", ...
# Most others make it fail ("5,", "5\\approx") or continue the expression ("\\{5\\}(x)" is 5x).
_L2S2_STOP = re.compile(r"\.(?!\d)|&|\\\\|'|_|\\(?:to|rightarrow|Rightarrow|longrightarrow)(?![a-zA-Z])")


def _parse_until_stop(s: str, cc: Any, early_stop: bool) -> Any:
    """Full LL parse of ``s``, stopping where latex2sympy2 stops.

    Its top rule has no EOF: at a token of ``_L2S2_STOP`` after a complete expression it returns what it
    read before ("18. Because ..." -> 18, "6&" -> 6, "24\\to" -> 24); here that is a full LL error at such
    a token where what precedes it parses on its own. Its lexer reads a token only when the parser asks
    for it: a character it has no token for ("5@") fails, unless the parse stopped before it ("24.\\")."""
    parse = _l2s_converter()(config=cc).parse

    def stop_at(offset: int) -> bool:
        return early_stop and offset > 0 and bool(s[:offset].strip()) and bool(_L2S2_STOP.match(s, offset))

    try:
        return parse(s)
    except _LLSyntaxError as exc:
        if not stop_at(exc.offset):
            raise
        return parse(s[: exc.offset].rstrip())
    except _LexerError as exc:
        if exc.offset <= 0:
            raise
        try:
            parse(s[: exc.offset])
        except _LLSyntaxError as inner:
            if 0 < inner.offset < exc.offset and stop_at(inner.offset):
                return parse(s[: inner.offset].rstrip())
        raise


# Memoised: score_mathvision compares the model answer twice (with the letter and the option text).
@functools.lru_cache(maxsize=256)
def _latex_value(s: str) -> Any:
    """The official ``eval(str(latex2sympy(s)))`` (MATH-V ``utils.py``, ``from math import *``),
    or ``None`` where it raises.

    Parsing emulates latex2sympy2 (:func:`_latex2sympy2_like`); the printed sympy expression
    is then interpreted with Python/``math`` semantics by :func:`_py_eval` instead of being
    ``eval``-ed: same value and type (``int`` / ``float``), no code execution. A result that is
    symbolic (unknown name), complex, a tuple or that overflows is ``None``.
    """
    if not isinstance(s, str):
        return None
    s = _latex2sympy2_text_rewrites(s)  # first, as latex2sympy2 does: the guards judge what it lexes
    if not s.strip() or _too_costly_for_sympy(s):
        return None
    try:
        printed = str(_latex2sympy2_like(s))
        value = _py_eval(ast.parse(printed, mode="eval"))
    except Exception:
        return None
    if isinstance(value, bool):
        return int(value)
    if not isinstance(value, (int, float)):
        return None
    return value


# ----------------------------------------------------------------------------------------
# MATH-Vision
# ----------------------------------------------------------------------------------------

_MATHV_FLAGS = ["the final answer is", "the answer is", "the correct answer is", "the answer should be"]


def _fix_fracs(string: str) -> str:
    # Official ``_fix_fracs``: ``\frac12`` -> ``\frac{1}{2}``, ``\frac1{2}`` -> ``\frac{1}{2}``.
    substrs = string.split("\\frac")
    new_str = substrs[0]
    for substr in substrs[1:]:
        new_str += "\\frac"
        if substr[:1] == "{":
            new_str += substr
            continue
        if len(substr) < 2:
            return string
        a, b, post = substr[0], substr[1], substr[2:]
        if b != "{":
            new_str += "{" + a + "}{" + b + "}" + post
        else:
            new_str += "{" + a + "}" + b + post
    return new_str


def _fix_a_slash_b(string: str) -> str:
    # Official ``_fix_a_slash_b``: an exact ``int/int`` becomes ``\frac{int}{int}``.
    parts = string.split("/")
    if len(parts) != 2:
        return string
    try:
        a, b = int(parts[0]), int(parts[1])
    except ValueError:
        return string
    if string != f"{a}/{b}":
        return string
    return "\\frac{" + str(a) + "}{" + str(b) + "}"


def _fix_sqrt(string: str) -> str:
    # Official ``_fix_sqrt``: ``\sqrt3`` -> ``\sqrt{3}`` (one-character argument).
    if "\\sqrt" not in string:
        return string
    splits = string.split("\\sqrt")
    new_string = splits[0]
    for split in splits[1:]:
        if split and split[0] != "{":
            new_string += "\\sqrt{" + split[0] + "}" + split[1:]
        else:
            new_string += "\\sqrt" + split
    return new_string


def _strip_string(string: str) -> str:
    """Official ``_strip_string`` (MATH-style normalisation), rule by rule."""
    string = string.replace("\n", "")  # line breaks
    string = string.replace("\\!", "")  # negative thin space
    string = string.replace("\\\\", "\\")  # double backslashes
    string = string.replace("tfrac", "frac").replace("dfrac", "frac")
    string = string.replace("\\left", "").replace("\\right", "")
    string = string.replace("^{\\circ}", "").replace("^\\circ", "")  # degrees
    string = string.replace("\\$", "").replace("$", "")  # dollar signs
    string = string.split("\\text{ ")[0]  # units written as "\text{ cm}" on the right
    string = string.replace("\\%", "")  # percent
    string = string.replace(" .", " 0.").replace("{.", "{0.")  # ".5" -> "0.5"
    if not string:
        return string
    if string[0] == ".":
        string = "0" + string
    # Keep only the right side of a single "=" or "\approx".
    if len(string.split("=")) == 2:
        string = string.split("=")[-1]
    if len(string.split("\\approx")) == 2:
        string = string.split("\\approx")[-1]
    if "sqrt" in string:
        string = _fix_sqrt(string)
    string = string.replace(" ", "")
    # The official script only fixes fractions when "sqrt" occurs; kept as is.
    if "sqrt" in string:
        string = _fix_fracs(string)
    if string == "0.5":
        string = "\\frac{1}{2}"
    return _fix_a_slash_b(string)


def _find_math_answer(s: str) -> str:
    """Official ``find_math_answer``: content of the last ``oxed{...}``, then cleaning."""
    s = s.lower()
    s = s.replace("{}", "")
    # ``re.findall("oxed{(.*)}", s, re.S)[-1]``, in linear time: the greedy pattern matches
    # once, from the first "oxed{" up to the LAST "}" of the text (if that "}" comes after it).
    # (The regex itself backtracks quadratically on texts with many "oxed{" and no "}".)
    start, last_close = s.find("oxed{"), s.rfind("}")
    ans = s[start + 5 : last_close] if start != -1 and last_close >= start + 5 else s
    # A "}" before any "{" closes the box: cut there.
    close, open_ = ans.find("}"), ans.find("{")
    if close != -1 and (open_ == -1 or close < open_):
        ans = ans.split("}")[0]
    # The value after the last "=" / "\approx".
    ans = ans.split("=")[-1]
    ans = ans.split("\\approx")[-1]
    # LaTeX spacing/formatting and a few unit words.
    ans = ans.replace(" ", "").replace("\\,", "").replace("∞", "\\infty")
    ans = ans.replace("+\\infty", "\\infty").replace("\\\\", "\\").replace("\n", "")
    ans = ans.replace("\\text", "").replace("\\mbox", "").replace("bmatrix", "pmatrix")
    ans = ans.replace("\\left", "").replace("\\right", "").replace("^{\\circ}", "")
    ans = ans.replace("^\\circ", "").replace("{m}^3", "").replace("m^3", "")
    ans = ans.replace("{units}", "").replace("units", "").replace("{km}", "").replace("km", "")
    return _strip_string(ans)


def extract_mathvision_answer(response: str) -> str:
    """The model answer, extracted exactly in the order of the official ``evaluate()``."""
    # The whole response, however long (every step below is linear in its length): the
    # official script reads a \\boxed{} anywhere in it.
    model_answer = str(response).strip()
    # 1. A trailing " C." / " (C)." or a leading "C\n" / "(C)\n" / "(C) C\n" is the letter C.
    for c in "ABCDE":
        if (
            model_answer.endswith(f" {c}.")
            or model_answer.endswith(f" ({c}).")
            or model_answer.startswith(f"{c}\n")
            or model_answer.startswith(f"({c})\n")
            or model_answer.startswith(f"({c}) {c}\n")
        ):
            model_answer = c
    # 2. "... is 12." -> "12" when what follows the last "is " is a number.
    tail = model_answer.split("is ")[-1].rstrip(".")
    if _is_number(tail):
        model_answer = tail
    if "oxed{" not in model_answer:
        # 3. No box: keep what follows the last answer flag (lower case, then capitalised),
        #    up to the end of its line / first ". ".
        for flag in _MATHV_FLAGS:
            for f in (flag, flag.replace("the", "The")):
                raw = model_answer
                model_answer = model_answer.split(f)[-1].strip()
                if f in raw:
                    model_answer = model_answer.split("\n")[0].split(". ")[0]
    elif model_answer.count("oxed{") > 1:
        # 4. Several boxes: keep only the last one.
        model_answer = "\\boxed{" + model_answer.split("oxed{")[-1]
    # 5. Box content + normalisation; "(a)"/"{a}" -> "a"; trailing "." / leading ":".
    model_answer = _find_math_answer(model_answer)
    for c in "abcde":
        model_answer = model_answer.replace(f"({c})", c)
    for c in "abcde":
        model_answer = model_answer.replace("{" + c + "}", c)
    return model_answer.rstrip(".").lstrip(":").strip()


# A tuple with more elements than this, or longer than ``_MAX_SYMPY_CHARS`` in all (a bound on
# the parser's work), is left unevaluated: it could only equal a ground truth as long (none has
# more than a few elements), so no verdict changes.
_MAX_TUPLE_ELEMENTS = 64


def _eval_tuple(s: str) -> str:
    """Official ``eval_tuple``: "(a,b,...)" / "[a,b,...]" with each element replaced by
    ``str(round(eval(str(latex2sympy(a))), 2))`` ("3" for an int, "3.0" for a float), except
    elements containing "infty" and "a" / "-a"; the input unchanged if any element fails."""
    if len(s) < 2:
        return s
    sl = s[1:-1].split(",")
    if len(sl) <= 1 or (s[0], s[-1]) not in (("(", ")"), ("[", "]")) or len(sl) > _MAX_TUPLE_ELEMENTS:
        return s
    if len(s) > _MAX_SYMPY_CHARS:
        return s
    parts = []
    for sub in sl:
        if "infty" in sub or sub in ("a", "-a"):
            parts.append(sub)
            continue
        value = _latex_value(sub)
        if value is None:
            return s
        try:
            parts.append(str(round(value, 2)))
        except (OverflowError, ValueError):
            return s
    return s[0] + ",".join(parts) + s[-1]


def mathvision_is_equal(asw: str, gt_asw: str) -> bool:
    """Official ``is_equal``: case-insensitive string match, tuple match, then equality of the
    values (``eval(str(latex2sympy(.)))``, see :func:`_latex_value`) rounded to 2 decimals.
    Infinity (``oo``) and anything symbolic has no value there: never equal.

    An equation has no value here (``"x=6"`` is not 6). latex2sympy2 1.9.1 reads ``symbol = value`` as an assignment
    and returns the value, but only in a fresh process: the first differential it parses (``dx``, or the "d" of any
    word such as "degrees") rebinds its global ``var`` to a Symbol, after which every letter it reads raises, for the
    rest of the process. The official script scores a whole benchmark in one process, where an early extracted answer
    such as "30 degrees" does that: this follows the state such a run is in. (Through :func:`score_mathvision` no
    answer has an "=": extraction keeps what follows the last one.)"""
    try:
        asw, gt_asw = str(asw).lower(), str(gt_asw).lower()
        if not asw.replace(" ", "") or not gt_asw.replace(" ", ""):
            return False
        if gt_asw.strip() == asw.strip():
            return True
        asw, gt_asw = _eval_tuple(asw), _eval_tuple(gt_asw)
        if gt_asw == asw:
            return True
        g = _latex_value(gt_asw)
        if g is None:
            return False
        a = _latex_value(asw)
        if a is None:
            return False
        return bool(round(g, 2) == round(a, 2))
    except Exception:
        return False


def score_mathvision(response: str, item: dict) -> bool:
    """True when ``response`` answers the MATH-V row ``item`` correctly (official rules).

    Correct when the extracted answer equals the ground truth (the letter for multiple
    choice) or, for multiple choice, the text of the correct option.
    """
    try:
        if not isinstance(response, str):
            return False
        gt_answer = str(item["answer"])
        options = item.get("options") or []
        gt_value = ""
        if options:
            idx = ord(gt_answer.strip()[:1] or "?") - ord("A")
            if 0 <= idx < len(options):
                gt_value = str(options[idx])
        model_answer = extract_mathvision_answer(response)
        return bool(mathvision_is_equal(gt_answer, model_answer) or mathvision_is_equal(gt_value, model_answer))
    except Exception:
        return False


# ----------------------------------------------------------------------------------------
# MathVista
# ----------------------------------------------------------------------------------------


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insert/delete/substitute, unit costs) over code points, as
    ``Levenshtein.distance``.

    Bit-parallel (Hyyro 2003, Myers' algorithm for the edit distance) with Python integers as
    bit vectors of the shorter string's length: O(len(longer)) big-integer operations, so long
    model outputs are compared in full (the official ``get_most_similar`` does not cut them).
    """
    if a == b:
        return 0
    if len(a) < len(b):
        a, b = b, a
    m = len(b)
    if m == 0:
        return len(a)
    peq: dict[str, int] = {}
    for i, ch in enumerate(b):
        peq[ch] = peq.get(ch, 0) | (1 << i)
    full = (1 << m) - 1
    top = 1 << (m - 1)
    pv, mv, score = full, 0, m
    for ch in a:
        eq = peq.get(ch, 0)
        xv = eq | mv
        xh = ((((eq & pv) + pv) & full) ^ pv) | eq
        ph = (mv | ~(xh | pv)) & full
        mh = pv & xh
        if ph & top:
            score += 1
        elif mh & top:
            score -= 1
        ph = ((ph << 1) | 1) & full
        mh = (mh << 1) & full
        pv = (mh | ~(xv | ph)) & full
        mv = ph & xv
    return score


def _most_similar(prediction: str, choices: list[str]) -> str:
    # Official ``get_most_similar``: smallest edit distance, first choice on ties.
    distances = [edit_distance(prediction, c) for c in choices]
    return choices[distances.index(min(distances))]


_NUM_RE = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+"


# Thousands written with spaces: "1 000", "12 345" (a plain space after a group of 1-2 digits, so that
# "120 150" stays two numbers) or a thin / no-break space or "\\," after a group of 1-3 digits ("1\\,000").
_SPACED_THOUSANDS = re.compile(
    r"(?<![\d.,])(?:\d{1,2}(?: \d{3}(?!\d))+|\d{1,3}(?:(?:[\u00a0\u2009\u202f]|\\,)\d{3}(?!\d))+)"
)


# Full-width digits and decimal point ("１８．２７"); superscript digits and signs ("10³", "cm²").
_FULLWIDTH_NUM = str.maketrans("０１２３４５６７８９．", "0123456789.")
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")


def _plain_digits(text: str) -> str:
    """Numbers in ASCII: full-width digits and point as ASCII, a LaTeX thousands separator "{,}" as ","
    ("1{,}020")."""
    return re.sub(r"(?<=\d)\{,\}(?=\d{3})", ",", text.translate(_FULLWIDTH_NUM))


# A sign in words before a number in digits, read as before a number in words (``_signed_in_words``): "negative 5" is
# -5, "is minus 3" is -3; "10 minus 3" keeps the operator
_SIGN_WORD_BEFORE_DIGITS_RE = re.compile(r"\b(?:negative|minus)[ \t]+(?=\.?\d)", re.I)


def _sign_words_as_minus(text: str) -> str:
    return _SIGN_WORD_BEFORE_DIGITS_RE.sub(
        lambda m: "-" if _signed_in_words(text[max(0, m.start() - 40): m.end()]) else m.group(0), text)


def _numbers(text: str) -> list[str]:
    text = _sign_words_as_minus(_plain_digits(text))
    # A minus written U+2212 / U+2013 / U+FF0D or as a hyphen (U+2010-2012, U+FE63: "‑3"), or "- 4.3" where it cannot be
    # a binary minus (not after a digit or a closer), is the sign of the number.
    text = re.sub("[\u2010\u2011\u2012\u2212\u2013\ufe63\uff0d]", "-", text)
    text = re.sub(r"(^|[^\d)}\]\s])(\s*)-\s+(?=\.?\d)", r"\1\2-", text)
    text = _SPACED_THOUSANDS.sub(lambda m: re.sub(r"\D", "", m.group(0)), text)
    # Thousands separated by points, as in German: "100.000.000" (two or more groups: no decimal; "1.200" stays 1.2)
    text = re.sub(r"(?<![\d.,])\d{1,3}(?:\.\d{3}){2,}(?![\d.])", lambda m: m.group(0).replace(".", ""), text)
    return [m.replace(",", "") for m in re.findall(_NUM_RE, text)]


_PLAIN_NUM = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)"


def _show(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _coefficient(text: str) -> float:
    """The number written before a root or pi ("5" in "5\\sqrt{3}", "-" in "-\\pi" stays a sign: 1.0 here)."""
    text = text.strip()
    return float(text) if text else 1.0


def _root(radicand: float, index: int) -> float:
    """The real ``index``-th root; NaN for an even root of a negative number or a zero index (no number in digits,
    so that "\\sqrt{-4}" is never read as its radicand -4)."""
    if index <= 0 or (radicand < 0 and index % 2 == 0):
        return math.nan
    if index == 2:
        return math.sqrt(radicand)
    value = math.copysign(abs(radicand) ** (1.0 / index), radicand)
    # a perfect power's root is that whole number ("\\sqrt[3]{64}" is 4, not 3.9999999999999996, which int() truncates)
    whole = round(value)
    return float(whole) if whole ** index == radicand else value


def _latex_numbers_as_decimals(text: str, integer: bool = False) -> str:
    """Writes a LaTeX number as a decimal ("\\frac{6}{5}" -> "1.2", "1\\frac{1}{5}" -> "1.2", "10^{3}" -> "1000",
    "1.2 \\times 10^{3}" -> "1200") and drops the exponents left, of units and symbols
    ("1000 cm^2" -> "1000 cm"), so that no exponent or denominator is read as the answer. For an ``integer``
    answer a slash fraction is a number only when it is a whole one ("14/2"; "7/10" reads as 7 out of 10)."""

    def power(base: str, m: re.Match, factor: str = "1") -> float:
        # the exponent: braced, a decimal or a fraction too ("2^{1/2}", "2^{0.5}" are 1.414..., not 2^1 or 2^0); else
        # one whole number ("10^3")
        num, _, den = re.sub(r"\s", "", m.group("braced") or m.group("bare")).partition("/")
        exponent = Fraction(num) / Fraction(den or 1)
        if abs(exponent) > 300:
            raise OverflowError
        if exponent.denominator != 1:
            value = float(factor) * float(base) ** float(exponent)
            if isinstance(value, complex):
                raise ValueError("no real power")
        else:
            # In decimal: "20.06 \\times 10^{2}" is 2006, not 2005.9999999999998 (which an integer answer truncates).
            value = float(Decimal(factor) * (Decimal(base) ** int(exponent) if exponent else 1))  # 0^0 = 1, as Python
        if math.isinf(value):
            raise OverflowError
        return value

    def sub(pattern: str, fn: Any, s: str, pad: str = "") -> str:
        def one(m: re.Match) -> str:
            try:
                return pad + _show(fn(m)) + pad
            except (ArithmeticError, ValueError):  # also decimal's InvalidOperation: 0^0
                return m.group(0)

        return re.sub(pattern, one, s)

    text = _plain_digits(text)
    # Superscript digits are an exponent: "1.2 × 10³" -> "1.2 × 10^{3}", "5 cm²" -> "5 cm^{2}".
    text = re.sub("\\^?([⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)", lambda m: "^{%s}" % m.group(1).translate(_SUPERSCRIPTS), text)
    exp = (rf"\^\s*(?:\{{\s*(?P<braced>[-+]?\s*{_PLAIN_NUM.replace('[-+]?', '', 1)}(?:\s*/\s*\d+(?:\.\d+)?)?)\s*\}}"
           r"|(?P<bare>[-+]?\d+))")
    # (Each pattern starts only where a number starts: a long run of digits is scanned once, not once per digit.)
    # (a mantissa in e-notation keeps its exponent: "1.5e3 \\times 10^2" is 150000, not its "3" read as the mantissa,
    # 1.5e300; nor is the exponent's sign the mantissa's: "1e+06 \\cdot 10^{2}" is 1e8)
    text = sub(rf"(?<![\d.])(?<![\d.][eE])(?<![\d.][eE][-+])({_PLAIN_NUM}(?:[eE][-+]?\d+)?)\s*(?:\\times|\\cdot|×|\*)\s*10\s*{exp}",
               lambda m: power("10", m, m.group(1)), text)
    # Roots and pi are their values, with a coefficient before them: "\\sqrt{2}" is 1.414..., "5\\sqrt{3}" 8.66...,
    # "4\\pi" 12.566... (first, so that "\\frac{\\sqrt{2}}{2}" is a fraction of numbers). Neither is a number in digits
    # the official normaliser reads, so a stated "\\sqrt{2}" is never the answer 2 (its radicand): the GPT extraction,
    # asked for an integer or a decimal, returns the value or the LaTeX (which no int() / float() reads).
    coef = rf"(?:(?<![\w.]){_PLAIN_NUM}\s*)?"
    radicand = rf"(?:\{{\s*({_PLAIN_NUM})\s*\}}|\(\s*({_PLAIN_NUM})\s*\)|(\d+(?:\.\d+)?))"
    text = sub(rf"({coef})(?:\\sqrt\s*(?:\[\s*(\d+)\s*\])?|√)\s*{radicand}",
               lambda m: _coefficient(m.group(1)) * _root(float(m.group(3) or m.group(4) or m.group(5)),
                                                          int(m.group(2) or 2)), text, pad=" ")
    text = sub(rf"({coef})(?:\\pi(?![a-zA-Z])|π)", lambda m: _coefficient(m.group(1)) * math.pi, text, pad=" ")
    # A digit argument may go without braces ("\\frac65"); a whole number before it makes a mixed number
    # ("1\\frac{1}{5}" -> 1.2, not "10.2"); spaces keep the decimal apart from what is next to it ("\\frac{1}{2}3").
    arg = rf"(?:\{{\s*({_PLAIN_NUM})\s*\}}|(\d))"
    text = sub(rf"(?:(?<![\w.])(\d+)\s*)?\\[dt]?frac\s*{arg}\s*{arg}",
               lambda m: int(m.group(1) or 0) + float(m.group(2) or m.group(3)) / float(m.group(4) or m.group(5)),
               text, pad=" ")
    # Fractions written with a slash, "14/2" -> 7, and mixed numbers "4 1/2" / "1½" -> 4.5 (a whole number and a
    # proper fraction); not a date or path ("3/4/2020") and no slash between other things than numbers ("km/h").
    frac = r"(\d+(?:\.\d+)?)[ \t]*/[ \t]*(\d+(?:\.\d+)?)(?![\w/]|[.,]\d)"

    def mixed(m: re.Match) -> float:
        num, den = float(m.group(2)), float(m.group(3))
        if num >= den:
            raise ValueError("not a mixed number")
        return int(m.group(1)) + num / den

    text = sub(rf"(?<![\w.,/])(\d+)[ \t]+{frac}", mixed, text, pad=" ")
    def quotient(m: re.Match) -> float:
        value = float(m.group(1)) / float(m.group(2))
        if integer and not value.is_integer():
            raise ValueError("not a whole number")
        return value

    text = sub(rf"(?<![\w.,/]){frac}", quotient, text, pad=" ")
    text = sub(r"(?:(?<![\w.,/])(\d+)[ \t]?)?([½⅓⅔¼¾⅕⅖⅗⅘⅙⅚⅛⅜⅝⅞])",
               lambda m: int(m.group(1) or 0) + unicodedata.numeric(m.group(2)), text, pad=" ")
    text = sub(rf"(?<![\w.])(\d+(?:\.\d+)?)\s*{exp}", lambda m: power(m.group(1), m), text)
    return re.sub(r"\^\s*(?:\{[^{}]*\}|[-+]?\d+)", "", text)


def _boxed_at(text: str, start: int) -> str:
    """Content of the ``\\boxed{...}`` opening at ``start`` (balanced braces; to the end when unclosed)."""
    i, depth = start + len("\\boxed{"), 1
    for j in range(i, len(text)):
        ch = text[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[i:j]
    return text[i:]


def _last_boxed(text: str) -> str | None:
    """Content of the last non-empty ``\\boxed{...}``, or None. An empty box ("\\boxed{}", a template the model
    did not fill) states nothing: the answer is the one stated elsewhere ("The answer is B.\n\n\\boxed{}")."""
    span = _last_boxed_span(text)
    return None if span is None else span[0]


def _last_boxed_span(text: str) -> tuple[str, int] | None:
    """(content, where the box ends in ``text``) of the last non-empty ``\\boxed{...}`` (see :func:`_last_boxed`)."""
    start = text.rfind("\\boxed{")
    while start >= 0:
        content = _boxed_at(text, start)
        if content.strip():
            return content, min(len(text), start + len("\\boxed{") + len(content) + 1)
        start = text.rfind("\\boxed{", 0, start)
    return None


# Tags that hold the answer: the r1 format's <answer>, and those other prompts ask for ("<final>B</final>",
# "<final_answer>12</final_answer>", "<output>12</output>", "<result>B</result>")
_ANSWER_TAG_RE = re.compile(r"<(answer|final_answer|final|output|result)>(.*?)(?:</\1>|$)", re.I | re.S)


def _last_answer_tag(text: str) -> str | None:
    """Content of the last non-empty answer tag, ``<answer>...</answer>`` (the r1 format) or one of the others of
    ``_ANSWER_TAG_RE`` (to the end when unclosed), or None."""
    # (a tag nested in the answer tag is markup, not the answer: "<answer><answer>C</answer></answer>" is C)
    tagged = [re.sub(r"</?(?:answer|final_answer|final|output|result)>", "", m.group(2), flags=re.I)
              for m in _ANSWER_TAG_RE.finditer(text)]
    tagged = [t for t in tagged if t.strip()]
    return tagged[-1] if tagged else None


_ANSWER_IS_RE = re.compile(
    # (Markdown emphasis may close around the noun: "**Answer**: 19".)
    # (A JSON or YAML key too: '{"answer": "B"}', '{"final_answer": 12}', "answer: B".)
    r"(?:(?:final\s+answer|correct\s+answer|answer|correct\s+option|correct\s+choice)[*_]*[\"']?"
    # ("Answer - 5.": a dash set off by spaces separates, it is no minus sign)
    r"\s*(?:is|should\s+be|would\s+be|will\s+be|=|:|(?<=\s)[-\u2013\u2014](?=\s))"
    # Other languages: "La respuesta es B", "La réponse est 12", "Die Antwort ist C" / "lautet C", "A resposta é
    # B", "La risposta è B", "Ответ: 12", "Итак, ответ C", "答えは B です", "正解は12", "정답은 B입니다", "답: 12"
    r"|(?:respuesta|r[ée]ponse|antwort|resposta|risposta)(?:\s+(?:correcta|correcte|finale?|correta|corretta))?"
    r"[*_]*\s*(?:(?:es|est|ist|lautet|é|è|sería|serait|wäre|seria|sarebbe)(?!\w)|:)"
    r"|ответ[*_]*\s*(?:[:=\u2014\u2013]|-(?=\s))"
    r"|(?:итак|значит|поэтому|следовательно),?\s+(?:правильный\s+)?ответ(?=\s)"
    r"|(?:答え|正解)\s*(?:は|:|：)|(?:정답|답)\s*(?:은|는|:)"
    # A table row labelled as the answer: "| **Final answer** | **C** |" (the row's closing "|" is cleaned off)
    r"|^[ \t]*\|[ \t]*[*_]*(?:final[ \t]+|correct[ \t]+)?answer[*_]*[ \t]*[*_]*[ \t]*\|"
    # A heading line with the answer on the next one: "### Answer", "**Final Answer**"
    r"|^[ \t]*(?:#+[ \t]*)?(?:[*_]+[ \t]*)?(?:final[ \t]+)?answer[ \t]*(?:[*_]+[ \t]*)?(?=\r?\n)"
    # Chinese: "答案是 C", "答案：5", "正确答案为 B", "正确选项是 (C)"
    r"|(?:答案|选项)\s*(?:应该是|应为|是|为|=|:|：)"
    # "故选 C", "所以选C", "因此选择 B", "答案选B" (not "所以选项 ...": the option named next, see below)
    r"|(?:故|所以|因此|因而|则|应|答案)\s*选(?:择)?(?!项)"
    # an option said to be right: "选项B正确", "所以选项 B 是正确的" (the verdict is cleaned off the candidate)
    r"|选项(?=\s*[（(]?[A-Za-zＡ-Ｚ][)）]?\s*(?:是|为)?\s*正确))"
    # The rest of the line is captured in a lookahead: a later marker on the same line ("The
    # answer is A. Wait, no. The answer is B.") is found too.
    r"\s*[:：]?\s*(?=([^\n]{0,2000}))",
    re.I | re.M,
)


# a text or font command around an answer: the answer ("\\textrm{C}", "\\textit{C}", "\\boldsymbol{12}" were read as
# they stand, a text that names no option, so the nearest choice text)
_FONT_WRAPPER_RE = re.compile(r"\\(?:text|textbf|textit|textrm|textsf|textnormal|mathbf|mathrm|mathit|mathsf|boldsymbol|"
                              r"bm|mbox)\{([^{}]*)\}")


def _drop_font_wrappers(s: str) -> str:
    """``s`` without its font wrappers, nested ones too ("\\text{\\textbf{C}}" was "\\text{C}"): innermost first."""
    for _ in range(4):
        s, n = _FONT_WRAPPER_RE.subn(r"\1", s)
        if not n:
            break
    return s


def _clean_candidate(s: str) -> str:
    # Markdown bold anywhere in the candidate ("** **B**" after "**Answer:**", "B**, because ...", "B**: text")
    s = s.replace("**", "").strip()
    # the closing "|" of a table cell ("C |" from "| Answer | C |"), not the bar of an absolute value ("|x|")
    s = re.sub(r"^([^|]*?)\s*\|$", r"\1", s)
    # LaTeX math delimiters, inline or display: "\\(5\\)", "\\[ x = 30 \\]" (not a line break's "\\\\[2pt]")
    s = re.sub(r"(?<!\\)\\[()\[\]]", " ", s).strip()
    # (also before a closing full stop: "The answer is $A$." is "A", not "A$")
    s = re.sub(r"^\$+|\$+(?=\s*[.。]?$)", "", s).strip()
    # (and the math that opens a sentence going on, as a quoted answer below: "The final answer is $B$. I hope it is
    # correct." states B, not "B$. I hope it is correct"; "$6$. I hope ..." the choice 6, not a numbered line)
    s = re.sub(r"^([^$\n]+?)\$+[.,;:!。，]\s.*", r"\1", s, flags=re.S).strip() if s.count("$") == 1 else s
    # Markdown inline code around the answer: "The answer is `C`.", a whole response "`A`" (what a GPT extraction
    # returns is the C / A inside)
    s = re.sub(r"^`+([^`\n]+)`+(?=\s*[.。]?$)", r"\1", s).strip()
    s = _drop_font_wrappers(s)
    s = s.strip().rstrip(".。").strip()
    # Markdown emphasis with underscores around the whole answer: "__B__", "_B_", "___12___" (not a LaTeX subscript:
    # no answer opens with "_"); and an exclamation mark after a word or letter, also emphasised or quoted, "B!",
    # "***B***!" (not a factorial: "5!")
    s = re.sub(r"(?<=[^\W\d]|[*\"'`\u201d\u2019])!+$", "", s).strip()
    s = re.sub(r"^(_{1,3})([^_\s](?:[^_\n]*[^_\s])?)\1$", r"\2", s)
    # a Japanese / Korean copula after the answer: "B です", "12입니다", "B이다"
    s = re.sub(r"\s*(?:です|である|だ|입니다|이다|이에요|예요|임)[.!。]?$", "", s).strip()
    # a Chinese verdict after the option: "B 是正确的", "B正确。"
    s = re.sub(r"\s*(?:是|为)?\s*正确的?(?:选项|答案)?[.!。]?$", "", s).strip()
    s = s.strip("*").strip()
    # A quoted answer, 'The answer is "B".' (the official quick-extract form) or "The answer is 'decrease'.": the
    # quoted text, also when the sentence goes on after it ('"D". I am confident.', '"21.6", since ...'), or a JSON
    # value ('"B"}' of '{"final_answer": "B"}')
    m = re.match(r'(?:"([^"]*)"|\u201c([^\u201c\u201d]*)\u201d|\'([^\']*)\'|\u2018([^\u2018\u2019]*)\u2019)'
                 r'(?:$|[.,;:!}\u3002\uff0c])', s)
    if m:
        s = next(g for g in m.groups() if g is not None).strip().rstrip(".").strip()
    return s


# (full-width letters too: "（Ｂ）" is the option B; and the Greek capitals alpha, beta, epsilon and the Cyrillic
# capital a, which look like A, B, E, A and stand where those stand in their alphabets: "Answer: (Β)". Not the
# Cyrillic В / С / Е, the third / 18th / sixth letters: "Ответ: В" may be the third option.)
_FULLWIDTH = str.maketrans("（）：，。；" + "".join(map(chr, range(0xFF21, 0xFF3B))) + "".join(map(chr, range(0xFF41, 0xFF5B)))
                           + "\u0391\u0392\u0395\u0410",
                           "():,.;ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" + "ABEA")


def _drop_negated(cand: str) -> str:
    """The answer a marked text commits to when it negates one: "not B but D" / "not A; it is C" ->
    "D" / "C", "C, not A" / "C and not A" -> "C"; a bare "not A" commits to nothing: ""."""
    m = re.match(r"not\s+(.*)", cand, flags=re.I | re.S)
    if not m:
        return re.split(r"\s*(?:[,;(]|\s(?:and|but)\s)\s*not\b", cand, maxsplit=1, flags=re.I)[0].strip()
    parts = re.split(r"\s*(?:[;,.]\s|\bbut\b|\brather\b|\binstead\b)\s*", m.group(1), maxsplit=1, flags=re.I)
    if len(parts) < 2:
        return ""
    rest = re.sub(r"^(?:(?:but|rather|instead)\b\s*)?(?:it\s+is|it's|it\s+should\s+be|the\s+answer\s+is)?\s*:?\s*",
                  "", parts[1], flags=re.I)
    return _clean_candidate(rest)


def _option_letters(n: int) -> str:
    """The letters of ``n`` options: "ABCD" for 4."""
    return "".join(chr(ord("A") + i) for i in range(n))


# The word "option" before a letter, also in other languages and with an article: "the option B", "la opción B",
# "l'option B", "a alternativa B", "вариант B", "選択肢B", "보기 B"
_OPTION_WORD = (r"(?:(?:the|la|a|die|l['\u2019])\s*)?"
                r"(?:option|choice|opci[óo]n|op[çc][ãa]o|opzione|alternativa|вариант|選択肢|선택지|보기)")


# A connective that opens the reason after an answer ("B because ...", "B porque ...", "B, weil ...", "B, потому что
# ..."); never a noun
_BECAUSE = (r"(?i:because|since|as|which|given|due|porque|ya\s+que|parce\s+que|puisque|weil|perché|poiché|потому|"
            r"так\s+как|поскольку)")
# ... and those that are English words too ("a car", "da", "pues"): a connective only after a comma ("B, car ...")
_BECAUSE_AFTER_COMMA = r"(?i:car|da|denn|pues|pois)"


def _lone_letter(t: str, letters: str) -> str | None:
    """The letter of ``t`` when ``t`` is one option's letter and nothing else: "B", "(B)", "[B]", "B.", "B)", "Option B",
    "Option: B"."""
    # (a square-bracketed letter too, "[B]", and a colon after the word, "Option: B": a GPT extraction returns B)
    m = re.fullmatch(rf"{_OPTION_WORD}?\s*(?:(?<=[^\W\d_])\s*[:\uff1a])?\s*(?:\[([{letters}])\]|\(?([{letters}])\)?)[.:)]?",
                     t, flags=re.I) if letters else None
    return (m.group(1) or m.group(2)).upper() if m else None


def _letter_of(text: str, n_options: int, dash: bool = True) -> str | None:
    """A choice letter written alone: "B", "(B)", "B.", "B)", "B:", "(B) text", "Option B" (also "la opción B",
    "вариант B", "選択肢B"), and "B because ..." / "B, since ..." (the English of "B，因为"; "B, porque ...", "B, weil
    ..."); with ``dash`` (a marked answer), also "B - text" / "B – text" / "B — text" (not "A - B": a difference of
    points) and "B です。..." / "B 입니다"."""
    letters = _option_letters(n_options)
    if not letters:
        return None
    t = text.strip().translate(_FULLWIDTH)
    if lone := _lone_letter(t, letters):
        return lone
    m = re.match(rf"{_OPTION_WORD}?\s*\(([{letters}])\)", t, flags=re.I) or re.match(
        # "Option B. It fits ..." as "B. It fits ..."; "C，因为 ..." as "C,因为 ..."
        rf"(?:(?i:{_OPTION_WORD})\s*)?([{letters}])(?:[.:)]\s|[.:),]?(?=[\u3000-\u9fff\uac00-\ud7af])"
        # a reason after the letter: a connective, never a noun ("A square" stays a text for the nearest choice)
        rf"|[.:),;]?\s+(?={_BECAUSE}\b)|[,;]\s*(?={_BECAUSE_AFTER_COMMA}\b)"
        # "C - 5", "C — 145°" (a dash set off by spaces, or an unspaced em dash), unless a lone capital follows; and
        # a Japanese or Korean copula or sentence after the letter, "B です。なぜなら ...", "B 입니다"
        + (r"|(?:\s+[-\u2013\u2014]\s+|\s*\u2014\s*)(?![A-Z](?![A-Za-z]))|\s+(?=[\u3040-\u30ff\uac00-\ud7af])"
           if dash else "") + ")", t
    )
    if m:
        return m.group(1).upper()
    return None


def _degrees_as_symbol(text: str) -> str:
    """Angles written as the choices write them: "$145^\\circ$", "145^{\\circ}", "145 degrees", "145 °" -> "145°"."""
    text = re.sub(r"(\d)\s*(?:\^\s*\{?\s*\\circ\s*\}?|°|\s+degrees?\b)", r"\1°", text)
    return re.sub(r"\$", "", text)


def _choice_key(s: str) -> str:
    """A choice text compared up to case, spaces and how an angle is written (the choices' LaTeX is spaced out,
    "\\frac { 20 } { 3 }", "6 \\sqrt 2", which a model writes "\\frac{20}{3}", "6\\sqrt2"), and how a square root or
    pi is written: the choices "2√{3}", "5√{3}m", "10 \\sqrt { 3 }", "3π" are "2√3", "5\\sqrt{3} m", "10√3", "3\\pi";
    and a fraction of plain terms as a slash: the choices "\\frac{20}{3}", "\\frac { 40 } { 3 }" are "20/3", "40/3"."""
    s = re.sub(r"\\sqrt(?![a-zA-Z])", "√", _degrees_as_symbol(s))
    s = re.sub(r"√\s*\{\s*([\w.]+)\s*\}", r"√\1", s)  # a root of one number or letter, braced or not
    s = re.sub(r"\\pi(?![a-zA-Z])", "π", s)
    s = re.sub(r"\\[dt]?frac\s*\{\s*([\w.√π]+)\s*\}\s*\{\s*([\w.√π]+)\s*\}", r"\1/\2", s)
    return re.sub(r"\s+", "", s).lower()


def _words_key(s: str) -> str:
    """A text's letters and digits, lower case, without its punctuation and spaces: "Linda's snowboard?" ->
    "lindassnowboard", "PDE-Refiner" -> "pderefiner"."""
    return "".join(re.findall(r"[^\W_]+", s.lower()))


def _letter_with_its_text(cand: str, choices: list[str], dash: bool = True) -> str | None:
    """The letter of a candidate that is a letter with its own option's text in brackets, after a comma or a spaced
    dash, "C (5)", "B ($145^\\circ$)", "C, 5", "E - (b)", or the option's text with its letter named in brackets,
    "quarter (option B)", "(b) (choice E)", "(b) (E)"."""
    letters = _option_letters(len(choices))
    if not letters:
        return None
    # (``dash``: also a response that is just "E - (b)", where the texts are bracketed letters (pids 168 / 849): it
    # restates option E with its own text; read as the text, "(b)" was the letter of the 2nd option. Not the first
    # line of a longer response, which may restate the options: "A - 135°\nB - 140°\n...")
    # (and, with ``dash`` too, only a space, LaTeX's too: "C 5", "\\text{C}\\ 5" (review 29; the nearest text to "C 5"
    # was "3" of the choices 3, 4.5, 5, 6 on pid 271)
    dashed = r"|\s+[-\u2013\u2014]\s+(.+)|(?:\s|\\ )+(.+)" if dash else ""
    m = re.fullmatch(rf"([{letters}])\s*(?:\((.+)\)|,\s*(.+){dashed})", cand.strip())
    if m:
        own = _choice_key(choices[ord(m.group(1)) - ord("A")])
        text = next(g for g in m.groups()[1:] if g is not None)
        # (the whole rest when it is bracketed: "E (b)", E's text "(b)" on pids 168 / 849)
        if own in (_choice_key(text), _choice_key(cand.strip()[1:]) if dash else None):
            return m.group(1)
    # (the word may go: "(b) (E)", with the choice texts "(c)", "(a)", ..., "(b)" of pids 168 / 849, is option E, whose
    # text "(b)" it restates; a capital letter then, since "(D) (b)" is the letter D with its text "(b)")
    # (or after a comma, "(b), option E" (review 29): the letter where the option's text reads as another letter, "(b)"
    # of pid 168; else the text, "145°, option C" is "145°")
    named = re.fullmatch(rf"(.+?)(?:\s*\((?:(?i:option|choice)\s+([{letters}{letters.lower()}])|([{letters}]))\)|"
                         rf",\s*(?i:option|choice)\s+([{letters}{letters.lower()}]))", cand.strip())
    if named:
        letter = (named.group(2) or named.group(3) or named.group(4)).upper()
        own = choices[ord(letter) - ord("A")]
        if _choice_key(named.group(1)) == _choice_key(own):
            return own if named.group(4) and not _letter_of(own, len(choices)) else letter
    return None


def _bare_choice(cand: str, choices: list[str]) -> str | None:
    """A candidate that is a choice and nothing else: its letter ("B", "(B)", "B.", "Option B") or its text (up to
    case; angles as the choices write them)."""
    lone = _lone_letter(cand.strip(), _option_letters(len(choices))) or _letter_with_its_text(cand, choices, dash=False)
    if lone:
        return lone
    key = _choice_key(cand)
    same = [c for c in choices if c.strip() and _choice_key(c) == key]
    return same[0] if len(same) == 1 else _choice_of_number(cand, choices)


# A unit after a number: an angle or percent sign, or one to three lower-case words ("cm", "cm^2", "square units",
# "objects"; not a title: "2015 Sales Report")
_UNIT = r"(?:°|%|[a-z][a-zA-Z]*(?:\^\{?[23]\}?|[²³])?(?:[ \t]+[a-z][a-zA-Z]*(?:\^\{?[23]\}?|[²³])?){0,2})"


def _number_and_unit(text: str) -> float | None:
    """The value of a text that is one number and at most a unit ("70", "145.0", "6 degrees", "$11^{\\circ}$",
    "4 cm", "47.6\\%", "400 square units"), else None."""
    t = re.sub(r"\\(?:text|mathrm|mbox)\{\s*~?([^{}]*)\}", r"\1", text)
    t = _degrees_as_symbol(re.sub(r"\\[,;!]|~|\\(?=%)", " ", t)).strip()
    # "about 5", "\\approx 13.8", "5 (rounded)": an approximation is its number
    t = re.sub(r"^(?:(?:about|approximately|approx\.|roughly|around|nearly)\s+|(?:\\approx|\u2248)\s*)", "", t,
               flags=re.I)
    t = _sign_words_as_minus(re.sub(r"\s*\([^()]*[A-Za-z]{2}[^()]*\)$", "", t))
    # a minus written U+2212 / U+2013 / U+FF0D and full-width digits, as _numbers reads them ("−2", "－２" are
    # the choice "-2"; they were "2", the other sign's choice)
    t = re.sub(r"[\u2010\u2011\u2012\u2212\u2013\ufe63\uff0d]\s*(?=\.?\d)", "-", _plain_digits(t))
    m = re.fullmatch(rf"({_PLAIN_NUM})\s*{_UNIT}?", t)
    return float(m.group(1)) if m else None


def _lone_number(line: str, integer: bool) -> str | None:
    """The number of a line that states one number and nothing else but a unit, a currency sign or the name it is
    given ("400 units", "$1.2^\\circ$", "\\$16", "15,017", "x = 18", "\\frac{14}{2}"), else None."""
    t = _latex_numbers_as_decimals(line, integer=integer)
    t = re.sub(r"^\s*(?:[a-zA-Z]\w*\s*=\s*)?(?:\\?\$\s*)*", "", t)
    t = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", t).replace("\\$", "").replace("$", "")
    if _number_and_unit(t) is None:
        return None
    return re.search(_PLAIN_NUM, t).group(0)


def _choice_of_number(cand: str, choices: list[str]) -> str | None:
    """The one choice that is a number (and a unit) equal to a candidate that is a number (and a unit): "70" or
    "70.0" is the choice "70°", "6 degrees" the choice "6", "4" the choice "4cm". The official GPT extractor returns
    the number, which the normaliser maps to the nearest choice text, that one."""
    value = _number_and_unit(cand)
    if value is None:
        return None
    equal = [c for c in choices if _number_and_unit(c) == value]
    return equal[0] if len(equal) == 1 else None


def _resolve_choice(cand: str, choices: list[str], followed: bool = True) -> str | None:
    """A candidate that names a choice: the choice text written exactly, else a letter written
    alone (returned as the letter, see :func:`_letter_of`), else the choice text up to case and
    surrounding spaces, else the one choice that is a number equal to the candidate number, else (``followed``) the
    choice text followed by a clause. The exact text comes first and the letter before the case-insensitive text:
    with choices "(c)", "(d)", "(a)", "(b)" (pid 849), "(d)" is a choice text and "(D)" the 4th option, "(b)".
    ``followed`` is for a marked answer or a last line; a whole unmarked response may open with a choice's word
    ("Yes, let's look at the chart. ... so no.")."""
    if cand in choices:
        return cand
    # (before a letter written alone: "(b) (option E)" with the choice texts "(a)" ... names option E)
    if (lettered := _letter_with_its_text(cand, choices)) is not None:
        return lettered
    # (not in a whole unmarked response: its first line may restate an option, "A - 135°")
    letter = _letter_of(cand, len(choices), dash=followed)
    if letter:
        return letter
    lowered = {c.strip().lower(): c for c in choices}
    if cand.lower() in lowered:
        return lowered[cand.lower()]
    degrees = {_choice_key(c): c for c in choices}
    if _choice_key(cand) in degrees:  # "145^\\circ", "145 degrees" -> the choice "145°"
        return degrees[_choice_key(cand)]
    # A worded choice up to its punctuation: "The population would decrease" is the choice "The population would
    # decrease.", "Does Lindas snowboard ... wax" the choice "Does Linda's snowboard ... wax?", "PDERefiner" the choice
    # "PDE-Refiner", "k p s" the choice "k + p + s" (what a GPT extraction
    # returns is that text, which the official nearest-choice rule maps to the choice). Words only: "-2" is not "2".
    if len(re.findall(r"[^\W\d_]", cand)) >= 2:
        worded = [c for c in choices if _words_key(c) == _words_key(cand)]
        if len(worded) == 1:
            return worded[0]
    # A number equal to exactly one choice that is a number: "12.00" or "12.0" is the choice "12" (the nearest
    # text by edit distance could be "10", or "20" for "2.0").
    if re.fullmatch(_PLAIN_NUM, cand.strip()):
        equal = [c for c in choices if re.fullmatch(_PLAIN_NUM, c.strip()) and float(c) == float(cand)]
        if len(equal) == 1:
            return equal[0]
    if (numbered := _choice_of_number(cand, choices)) is not None:
        return numbered
    # A choice text followed by a clause: "No, because ...", "No. The bar is shorter", "No, which corresponds to
    # option B" (the longest choice that fits: "quarter to, since" is "quarter to", not "quarter"; a number
    # followed by ". " is a numbered line, "1. The area ...", not the choice "1")
    for c in sorted((c for c in choices if c.strip() and followed), key=len, reverse=True):
        # (a number that opens a list of numbers is no answer: "5, 6 and 8 are too large; the total is 10.")
        sep = r"(?:,(?!\s*[-+]?\.?\d)|[;:])" if re.fullmatch(_PLAIN_NUM, c.strip()) else r"[.,;:]"
        if re.match(re.escape(c.strip()) + r"\$?\s*(?:" + sep + r"\s+|\s+(?=" + _BECAUSE + r"\b))",
                    cand, flags=re.I):
            return c
    # A choice text called "the ... one / option / choice": "the blue one", "the quarter option" (not "the second
    # option": which option a model counts as second is not stated)
    called = re.fullmatch(r"(?:the|a|an)\s+(\S.*?)\s+(?:one|option|choice)", cand.strip(), flags=re.I | re.S)
    if called:
        key = _choice_key(called.group(1))
        same = [c for c in choices if c.strip() and _choice_key(c) == key]
        if len(same) == 1:
            return same[0]
    # An approximated choice text: "approximately May" is the choice "May" (as "about 5" is the choice "5" above)
    approx = re.match(r"(?:about|approximately|approx\.|roughly|around|nearly)\s+(\S.*)", cand, flags=re.I | re.S)
    if approx and (named := _resolve_choice(approx.group(1), choices, followed)) is not None:
        return named
    # Any other answer followed by such a clause: "6.0, as shown in the figure", "C (6), which ..."
    head = re.match(r"(.+?)(?:,\s*(?=" + _BECAUSE_AFTER_COMMA + r"\b)|(?:,\s*|\s+)(?=" + _BECAUSE + r"\b))",
                    cand) if followed else None
    return _resolve_choice(_clean_candidate(head.group(1)), choices, False) if head else None


def _drop_restated_options(text: str, choices: list[str]) -> str:
    """An unmarked response less the options it restates, which name every option and not the answer: a run of
    lines ("A. 135°", "(B) 140°", "Option C: 145° - too big", "- D: 150°", "| A | 135° |") restating two or more
    different options, each by its letter and its text, and a line echoing several options ("Choices: (A) 135°
    (B) 140° (C) 145°")."""
    options = [(letter, c.strip()) for letter, c in zip(_option_letters(len(choices)), choices) if c.strip()]

    def label(ln: str) -> str | None:
        for letter, c in options:
            if re.match(rf"\s*(?:[-*|]\s*)?(?:\*\*)?(?:(?:option|choice)\s*)?\(?{letter}\)?(?:\*\*)?\s*"
                        rf"[.:)|]?\s*(?:\*\*)?\s*{re.escape(c)}(?!\w)", ln, flags=re.I):
                return letter
        return None

    def echoed(ln: str) -> int:
        return sum(1 for letter, c in options
                   if re.search(rf"(?:\({letter}\)|(?<!\w){letter}[.:)])\s*{re.escape(c)}(?!\w)", ln))

    lines = text.splitlines()
    drop: set[int] = set()
    run: dict[str, int] = {}  # option letter -> line, of the run of restating lines being read
    for k, ln in enumerate(lines):
        lab = label(ln)
        if lab is not None and lab not in run:
            run[lab] = k
        elif ln.strip():  # (blank lines continue a run) another line, or an option restated again, ends it
            drop.update(run.values() if len(run) >= 2 else ())
            run = {lab: k} if lab is not None else {}
    drop.update(run.values() if len(run) >= 2 else ())
    drop.update(k for k, ln in enumerate(lines) if echoed(ln) >= min(3, len(choices)) >= 2)
    return "\n".join(ln for k, ln in enumerate(lines) if k not in drop).strip() if drop else text


def _last_occurrence(text: str, choice: str) -> int:
    """Where ``choice`` last occurs in ``text`` as a text of its own, -1 if nowhere: an edge of it that is a
    letter or digit must not continue a word or number there, nor be an exponent (the choice "5" does not occur
    in "45", "2.5", "5th" or "x^5"; "2" not in "1,200")."""
    before = r"(?<![\w^])(?<!\d[.,])" if re.match(r"\w", choice) else ""
    after = r"(?!\w)(?![.,]\d)" if re.search(r"\w$", choice) else ""
    hits = [m.start() for m in re.finditer(before + re.escape(choice) + after, text)]
    return hits[-1] if hits else -1


# A closing line that is no answer: "Let me know if you need anything else!" (with the choice "Know"), "Yes, feel
# free to ask ..." (with the choice "Yes").
_PLEASANTRY_RE = re.compile(r"(?:\n[ \t]*(?:(?:yes|no|sure|ok(?:ay)?)\b[,!.]?[ \t]*)?"
                            r"(?:let me know|i hope (?:this|that) helps|hope (?:this|that) helps|feel free to|"
                            r"happy to help|if you have any)[^\n]*)+\s*$", re.I)


# A response that takes back what it said first ("12\n\nWait, let me recount. ... Actually, there are 13.")
_CORRECTION_RE = re.compile(r"\b(?:wait|actually|correction|re-?check|recount|on second thought|mistake)\b", re.I)


# A marked answer taken back after it, with no new marker: "The answer is C. Wait, actually it is D.", "... it's 6.",
# "The answer is C.\n\nCorrection: D." (the restatement must open with the answer: "it is consistent with 2 + 3" is no
# answer)
_TAKEN_BACK_RE = re.compile(r"(?:\b(?:wait|actually|hmm+|no|on second thought)\b[^.\n]{0,80}?\b(?:it|this|that)"
                            r"(?:'s|\u2019s|\s+(?:is|should\s+be|must\s+be))|\bcorrection\s*:)\s+([^\n]+)", re.I)


def _taken_back(tail: str, item: dict, choices: list[str]) -> str | None:
    """The answer a correction after a marked answer states instead (see ``_TAKEN_BACK_RE``), if it reads as one."""
    for m in reversed(list(_TAKEN_BACK_RE.finditer(tail[:_MAX_BOUNDED_CHARS]))):
        cand = _drop_negated(_clean_candidate(m.group(1)))
        if not cand:
            continue
        if item.get("question_type") == "multi_choice":
            if _resolve_choice(cand, choices) is not None:
                return cand
        elif item.get("answer_type") in ("integer", "float", "list"):
            if re.match(r"[$\\(\[]*\s*[-+\u2212]?\.?\d", cand):
                return cand
        # (a free-text answer is not re-read: any clause would do)
    return None


# A hedged answer and the one it leans to: "either A or C, but most likely C", "5 or 6, more likely 6" (alternatives
# first), "between 10 and 12, most likely 11" (a range first), "probably C"
_HEDGE_PICK_RE = re.compile(r"\b(?:most|more)\s+likely(?:\s+(?:it\s+is|it's|is))?[\s:,]+(\S.*)$"
                            r"|^(?:probably|likely|possibly|presumably)\s+(\S.*)$", re.I | re.S)


def _hedge_pick(cand: str, item: dict, choices: list[str]) -> str | None:
    """What a hedged marked answer leans to (see ``_HEDGE_PICK_RE``), if the whole does not read as a choice and the
    pick reads as an answer."""
    m = _HEDGE_PICK_RE.search(cand)
    if not m or (item.get("question_type") == "multi_choice" and _resolve_choice(cand, choices) is not None):
        return None
    # (alternatives or a range first: "5 or 6, more likely 6", "between 10 and 12, most likely 11"; not "6 because it
    # is more likely")
    if m.group(1) is not None and not re.search(r"\bor\b|\bbetween\b", cand[: m.start()], re.I):
        return None
    pick = _clean_candidate(m.group(1) or m.group(2))
    return pick if pick and _usable_candidate(pick, item, choices) else None


def _judged_options(text: str, choices: list[str]) -> str | None:
    """The one option judged right when the response judges several, one per line or sentence ("- A: incorrect\n-
    B: correct", "(A) 3 - wrong", "A is incorrect. B is correct.", "A: False\nB: True"); not by a word that is a
    choice's text ("Option A: True - does not match" restates choice A)."""
    letters = _option_letters(len(choices))
    words = [w for w in ("correct", "incorrect", "wrong", "right", "true", "false")
             if w not in {c.strip().lower() for c in choices}]
    if not letters or not words:
        return None
    verdicts: dict[str, bool] = {}
    for m in re.finditer(rf"(?:^|\n|[.;]\s+)[ \t]*(?:[-*\u2022][ \t]*)?[*_]*(?:option[ \t]+)?\(?([{letters}])\)?[*_]*"
                         rf"(?:[.:)]?[ \t]+[^\n:;]{{0,80}}?)?[ \t]*(?::|-|\u2013|\u2014|\bis\b)[ \t]*[*_]*"
                         rf"({'|'.join(words)})\b", text, flags=re.I):
        verdicts[m.group(1).upper()] = m.group(2).lower() in ("correct", "right", "true")
    right = [k for k, v in verdicts.items() if v]
    return right[0] if len(verdicts) > 1 and len(right) == 1 else None


_UNIT_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
               "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS_WORDS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_NUMBER_WORDS = {w: v for v, w in enumerate(_UNIT_WORDS)} | {w: 20 + 10 * k for k, w in enumerate(_TENS_WORDS)}
_NW = "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))
# "six", "twenty-one", "twenty one", "three hundred (and) five", "a hundred", "two thousand", "one point two"; not
# part of a hyphenated word ("one-to-one") and not the pronoun "one" ("no one", "the one on the left", "one of them")
_NUMBER_PHRASE_RE = re.compile(
    rf"(?<![\w-])(?:(?:{_NW}|a(?=[ \t]+(?:hundred|thousand)\b))"
    rf"(?:(?:[ \t]+|-|(?:(?<=hundred)|(?<=thousand))[ \t]+and[ \t]+)(?:{_NW}|hundred|thousand)(?![\w-]))*"
    rf"(?:[ \t]+point(?:[ \t]+(?:{'|'.join(_UNIT_WORDS[:10])})(?![\w-]))+)?)(?![\w-])", re.I)
# "one" after a determiner, also with a word between ("the only one", "the first one"), is the pronoun
_PRONOUN_ONE_RE = re.compile(r"\b(?:no|any|some|every|each|the|this|that|which|a|an|another|such)\s+(?:[a-z]+\s+)?$",
                             re.I)


# A sign in words right before a number in words: "negative five", "is minus three"
_SIGN_WORD_RE = re.compile(r"(?:^|(\S+)\s+)(negative|minus)\s+$", re.I)


def _signed_in_words(before: str) -> bool:
    """Whether the text ``before`` a number in words ends with its sign in words: "negative", or "minus" unless a
    number or a closing bracket precedes it ("ten minus three", "(a + b) minus two": the operator)."""
    m = _SIGN_WORD_RE.search(before)
    if not m:
        return False
    prev = (m.group(1) or "").lower()
    return m.group(2).lower() == "negative" or not (re.search(r"[\d)\]}]$", prev) or prev in _NUMBER_WORDS)


def _number_word_value(phrase: str) -> float | int | None:
    """The value of a number written in words ("twenty-one" -> 21, "a hundred" -> 100, "one point two" -> 1.2),
    None when the words do not make one number ("two three", a lone "a")."""
    whole, _, frac = re.sub(r"\s+", " ", phrase.lower()).partition(" point ")
    toks = [t for t in re.split(r"[ -]", whole) if t != "and"]
    total = current = 0
    prev = None
    for k, t in enumerate(toks):
        if t == "a":
            if k != 0 or len(toks) < 2 or toks[1] not in ("hundred", "thousand"):
                return None
            current = 1
        elif t == "hundred":
            if prev in (None, "hundred", "thousand") or not 1 <= current % 1000 <= 9:
                return None
            current *= 100
        elif t == "thousand":
            if prev in (None, "thousand") or not current:
                return None
            total, current = total + current * 1000, 0
        else:
            v = _NUMBER_WORDS[t]
            # a unit follows only a tens word or a hundred ("twenty one", "two hundred five"; not "two three")
            if prev is not None and prev not in ("hundred", "thousand") and not (prev in _TENS_WORDS and v < 10):
                return None
            if v == 0 and prev is not None:
                return None
            current += v
        prev = t
    value = total + current
    if frac:
        return float(f"{value}." + "".join(str(_NUMBER_WORDS[d]) for d in frac.split()))
    return value


def _number_words(text: str, atype: str) -> list[str]:
    """The numbers written in words in ``text`` (see ``_NUMBER_PHRASE_RE``), as digits; a decimal ("one point two")
    only for a float answer; a half ("three and a half" 3.5, "one half" 0.5) and "a dozen" (12) for any."""
    found = []
    for m in _NUMBER_PHRASE_RE.finditer(text):
        phrase = m.group(0)
        if atype != "float" and re.search(r"\spoint\s", phrase, re.I):
            continue
        after = text[m.end():]
        half = re.match(r"\s+and\s+a\s+half\b", after, re.I)
        one_half = phrase.lower() == "one" and re.match(r"[ \t-]+half\b", after, re.I)
        if phrase.lower() == "one" and not one_half and (
                _PRONOUN_ONE_RE.search(text[max(0, m.start() - 40): m.start()])
                or re.match(r"\s+(?:of|another|by|or|else|dozen)\b", after, re.I)):
            continue
        value = 0.5 if one_half else _number_word_value(phrase)
        if value is None:
            continue
        if half:
            value += 0.5
        # "negative five", "minus three": a sign in words (not the operator of "ten minus three")
        if _signed_in_words(text[max(0, m.start() - 40): m.start()]):
            value = -value
        found.append((m.start(), _show(float(value)) if isinstance(value, float) else str(value)))
    found += [(m.start(), "12") for m in re.finditer(r"(?<![\w-])(?:a|one)\s+dozen\b", text, re.I)]
    return [v for _, v in sorted(found)]


def _options_said_right(text: str, letters: str) -> str | None:
    """The letter of the last option ``text`` says is the answer, else None: "Option **B** is correct.", "Hence, option
    A is the correct answer.", "Option C is the answer." (not a check: "To see whether option A is correct, ...",
    "Let's test if option B is correct."), and a bare capital letter of an option where a sentence or clause opens:
    "C is correct.", "So C is the correct answer.", "Therefore, A is the answer." Only the verdict itself ends the
    clause, so that a statement about a point stays one ("In triangle ABC, A is the right angle.")."""
    if not letters:
        return None
    said = [(m.start(2), m.group(2)) for m in re.finditer(
        rf"\b(whether\s+|if\s+)?(?:option|choice)\s*\(?\**([{letters}])\**\)?\s+is\s+(?:the\s+)?"
        rf"(?:correct|right|best|answer)\b", text, flags=re.I) if not m.group(1)]
    said += [(m.start(1), m.group(1)) for m in re.finditer(
        rf"(?:^|(?<=[.!?:;,])\s+|\b(?i:so|thus|therefore|hence|then|clearly)\s+)[*(]*([{letters}])[*)]*"
        rf"\s+is\s+(?:the\s+)?(?i:(?:correct|right|best)(?:\s+(?:answer|option|choice))?|answer)"
        rf"(?=\s*(?:[.!,;)]|$)|\s+(?i:because|since|as)\b)", text, flags=re.M)]
    return max(said)[1].upper() if said else None


def _choice_named_inside(cand: str, choices: list[str]) -> str | None:
    """The choice a boxed / marked answer written as a sentence names: "\\boxed{Answer: Option C}" by its answer
    marker, "\\boxed{Option C is correct.}" / "\\boxed{C is the correct answer.}" by its verdict (what a GPT
    extraction returns is C); else None (the text goes to the official nearest-choice rule as it is)."""
    found = list(_ANSWER_IS_RE.finditer(cand))[-_MAX_ANSWER_MARKERS:]
    for m in reversed(found):
        if (named := _resolve_choice(_clean_candidate(m.group(1)), choices)) is not None:
            return named
    return _options_said_right(cand, _option_letters(len(choices)))


def _final_statement(text: str) -> str:
    """The last sentence of a response, less a closing pleasantry."""
    text = _PLEASANTRY_RE.sub("", text).strip() or text
    # (a line that only opens or closes display math, "$$" or "\\]", is no statement)
    parts = [p for p in re.split(r"(?<=[.!?\u3002])\s+|\n+", text) if p.strip() and not re.fullmatch(
        r"\s*(?:\$\$|\\[\[\]])\s*[.,]?\s*", p)]
    return parts[-1] if parts else ""


def _display_math_on_one_line(text: str) -> str:
    """Display math written over several lines as one line ("\\[\n\\text{B}\n\\]" -> "\\[ \\text{B} \\]", so too
    "$$"), so that the line read after "The answer is:", or as the last line, is the math, not its "\\["."""
    for opener, closer in ((r"\\\[", r"\\\]"), (r"\$\$", r"\$\$")):
        text = re.sub(rf"({opener})[ \t]*\n\s*((?:(?!{opener}|{closer})[^\n]){{1,500}}(?:\n(?:(?!{opener}|{closer})"
                      rf"[^\n]){{1,500}}){{0,5}}?)\n\s*({closer})",
                      lambda m: f"{m.group(1)} {' '.join(m.group(2).split())} {m.group(3)}", text)
    return text


# The words before an answer marker that make it the object of a check: "Let me verify the answer: ...", "To
# double-check the final answer: ..."
_CHECKED_ANSWER_RE = re.compile(r"\b(?:verify(?:ing)?|(?:double-?|re-?)?check(?:ing)?|confirm(?:ing)?|validat(?:e|ing))"
                                r"\s+(?:(?:the|our|my|this|that)\s+)?$", re.I)


# A last line that closes a markdown code block
_CLOSING_FENCE_RE = re.compile(r"\n[ \t]*```[ \t]*$")


def _usable_candidate(cand: str, item: dict, choices: list[str]) -> bool:
    """Whether a marked answer reads as an answer of the item's type."""
    if item.get("question_type") == "multi_choice":
        return _resolve_choice(cand, choices) is not None
    if item.get("answer_type") in ("integer", "float", "list"):
        return bool(_numbers(cand))
    return True


def _marked_after(tail: str, item: dict, choices: list[str]) -> str | None:
    """The last answer marked in ``tail`` (the text after a box) that is an answer and nothing else: a choice (its
    letter or text, see :func:`_resolve_choice`), or a number with at most a unit; not the heading of a check ("Let
    me verify the answer: 3 + 4 = 7") nor a remark on the boxed answer ("The answer is reasonable since 12 < 20")."""
    qtype, atype = item.get("question_type"), item.get("answer_type")
    for m in reversed(list(_ANSWER_IS_RE.finditer(tail[:_MAX_BOUNDED_CHARS]))[-_MAX_ANSWER_MARKERS:]):
        if _CHECKED_ANSWER_RE.search(tail[max(0, m.start() - 40): m.start()]):
            continue
        cand = _drop_negated(_clean_candidate(m.group(1)))
        if not cand or "\\boxed" in cand:
            continue
        if qtype == "multi_choice":
            if _resolve_choice(cand, choices) is not None:
                return cand
        elif atype in ("integer", "float") and _lone_number(cand, integer=atype == "integer") is not None:
            return cand
        elif atype == "list" and re.fullmatch(r"\[[^\[\]]*\d[^\[\]]*\]", cand):
            return cand
    return None


# Inline HTML a model may wrap its answer in (line breaks and paragraphs end a line); not the answer tags
# (``_ANSWER_TAG_RE``), which mark the answer
_HTML_INLINE_RE = re.compile(r"</?(?:b|strong|i|em|u|mark|span|font|code|sup|sub)(?:\s[^<>]*)?>", re.I)
_HTML_BREAK_RE = re.compile(r"<br\s*/?>|</?(?:p|div|h[1-6]|li|ul|ol)(?:\s[^<>]*)?>", re.I)


def _html_and_frames_as_text(text: str) -> str:
    """``text`` less inline HTML tags, its line / paragraph tags as line breaks, ``\\fbox{`` / ``\\framebox{`` as
    ``\\boxed{``."""
    text = _HTML_BREAK_RE.sub("\n", _HTML_INLINE_RE.sub("", text))
    return re.sub(r"\\(?:fbox|framebox)\{", r"\\boxed{", text)


def extract_mathvista_answer(response: str, item: dict) -> str:
    """Rule-based stand-in for MathVista's GPT answer extractor.

    First the official rule-based fast paths of ``extract_answer`` (extract_answer.py), on the
    response as given: a multi_choice response that is exactly a choice text is returned as is;
    an integer response that ``int()`` parses is returned as ``str(int(response))`` ("1_000" ->
    "1000"); a float response that ``float()`` parses, as ``str(float(response))``.

    Then (in place of the official GPT extractor) rules, first that applies (in the r1 format, to the answer part
    after the last ``</think>``, and to the whole response, think tags as line breaks, when that part states none):
      1. the content of the last non-empty ``\\boxed{...}`` (unless an answer marked after it is a choice, a
         number with at most a unit or a list: "The total is $\\boxed{7}$ units. Therefore, the answer is C.");
      (else, in the r1 format, steps 2-3 read the last non-empty ``<answer>...</answer>`` as a marked answer, so
      too ``<final>``, ``<final_answer>``, ``<output>``, ``<result>``;)
      2. else the text after the last "answer is / answer: / **Answer**: / correct option is ..." or Chinese
         "答案是 / 答案：/ 正确选项为 ..." or a JSON key '"answer": ' or another language's marker ("la respuesta
         es", "la réponse est", "die Antwort lautet", "Ответ:", "答えは", "정답은"; a Japanese / Korean copula after
         the answer dropped) (to the end of that line; after a heading line "### Answer" /
         "**Final Answer**", the next non-empty line; a quoted '"text"' or "'text'" -> text; a
         negated answer dropped: "not B but D" -> D, "C, not A" -> C, a bare "not 999" is none; the heading of a
         check, "Let me verify the answer: ...", only when no other marker is left)
         that reads as an answer of the item's type (names a choice / has a number), else after
         the last such marker; an answer it takes back with no new marker ("The answer is C. Wait, actually it is
         D.", "... Correction: D.") is replaced by the correction when that opens with an answer, and a hedged
         one by the answer it leans to ("either A or C, but most likely C", "between 4 and 6, most likely 5",
         "probably C");
      3. else the whole response.
    (Display math over several lines is read as one line first: "The answer is:\n\\[\n\\text{B}\n\\]". Nested answer
    tags are one, "<answer><answer>C</answer></answer>"; Chinese option verdicts are markers: "选项B正确", "答案选B".)
    Then by item type:
      * multi_choice: of a whole response that judges several options, the one judged right ("- A: incorrect\n- B:
        correct"); else the choice text equal to the candidate; else a letter written alone
        ("B", "(B)", "B.", "Option B", "(B) text", "B - text", "B，因为", "B because ...") -> returned as the letter
        (the dash not in a whole unmarked response); else the
        choice text equal to it up to case / spaces ("\\frac{20}{3}" is the choice "\\frac { 20 } { 3 }"); else the
        one choice that is a number equal to it ("12.00" ->
        "12"), also up to a unit or an approximation ("70" -> "70°", "6 degrees" -> "6", "4" -> "4cm", "about 5" ->
        "5", "\u22122" or "negative 2" -> "-2"), or a letter with its option's text in brackets ("C (5)", or "C, 5"),
        also before a clause ("6.0, as shown in the figure"); else, when the candidate is the whole response, a last
        line that is a number alone (returned as it is, for the official nearest-choice rule), else
        an option said to be the answer ("Option B is correct.", "So B is the correct answer."), else
        a choice named at the end of its final statement ("So the result is 130.0.", "Therefore, $x = 30$.",
        "\\[ x = 30 \\]", "- **Result: 30**"), else
        the last "(X)" letter in it, else the choice text occurring last in it (as a text of its own: "5" does not
        occur in "45", "no" not in "not"), else a letter
        alone at its end ("I think it's C."); else the candidate itself (which the official
        normaliser maps to the nearest choice text by edit distance);
      * integer / float: LaTeX numbers written as decimals ("\\frac{6}{5}" -> 1.2, "10^{3}" ->
        1000, "1.2 \\times 10^3" -> 1200, exactly), so are "14/2", "4 1/2", "4½", "1{,}020", full-width digits and
        superscript exponents ("10³"), and exponents of units dropped ("1000 cm^2" -> 1000);
        then, of a boxed / marked candidate, the first number after its last "=" or else its
        first number ("1000, not 999" -> 1000); of an unmarked response, the number it states first, alone on its
        line (with at most a unit, a currency sign, an approximation or a name: "400 units\n\nExplanation: ...",
        "x = 18\n\n...", "about 18\n\n..."), else its last number not
        after a "not" and not in a closing remark in brackets ("1000 g in total. (2 weights, 3 marks.)" -> 1000);
        with no digits there, a number in words ("six", "twenty-one", "three and a half", "a dozen", "one point
        two" for a float) of that marked answer (or an earlier one), or of an unmarked response's final sentence (the
        pronoun "one" is none)
        (thousands commas dropped, and thousands spaces: "1 000", "12 345",
        "1\\,000"; a minus written "\u2212" or "- 4.3" is kept, and a sign in words before digits: "negative 3");
      * list: the numbers of the last "[...]" in the candidate (else all its numbers, of an unmarked response those of
        its last line with numbers; in
        "[120,150]" the commas separate elements), printed as a Python list "[a, b]".
    Returns "" when nothing is found.
    """
    try:
        response = str(response)
        qtype = item.get("question_type")
        atype = item.get("answer_type")
        choices = [str(c) for c in (item.get("choices") or [])]
        # The official fast paths (before its GPT call), in its order.
        if qtype == "multi_choice" and response in choices:
            return response
        if atype == "integer":
            try:
                return str(int(response))
            except (ValueError, TypeError):
                pass
        if atype == "float":
            try:
                return str(float(response))
            except (ValueError, TypeError, OverflowError):
                pass

        # The r1 format: the answer part after a closed think block states the answer, the think block only
        # reasons toward it ("<think>... \\boxed{7}? ... the answer is 8.</think>\n<answer>12</answer>",
        # "...</think>\n\n12"); the whole response when the answer part states none ("<think>... 12</think>",
        # "...</think>\nassistant")
        bounded = _bounded_response(response)
        closes = list(re.finditer(r"</think\s*>", bounded, flags=re.I))
        if closes and (answer_part := bounded[closes[-1].end():]).strip():
            stated = extract_mathvista_answer(answer_part, item)
            if stated:
                return stated

        text = _display_math_on_one_line(bounded).strip()
        # (a think tag ends the line before it: "... So the answer is B.</think>" states B, not "B.</think>")
        text = re.sub(r"</?think\s*>", "\n", text, flags=re.I).strip()
        # HTML around the answer is markup, as is a framed box a boxed one: "The answer is <b>B</b>.", "<p>B</p>",
        # "Answer: <strong>12</strong>", "\\fbox{B}" state B / 12 (what a GPT extraction returns)
        text = _html_and_frames_as_text(text).strip()
        # (a closing code fence states nothing: "...\n\n```\nB\n```" ends with "B"; an opening one is kept, so that
        # the first line of the code, "width = 3", is not read as an answer stated first)
        text = _CLOSING_FENCE_RE.sub("", text).strip()
        if not text:
            return ""

        boxed_span = _last_boxed_span(text)
        boxed = None if boxed_span is None else boxed_span[0]
        whole = False
        marks: list[tuple[str, int]] = []
        # (a boxed answer first, also inside answer tags: "<answer>\\boxed{B}</answer>"; the reasoning in the think
        # block before an answer tag is no answer)
        tagged = _last_answer_tag(text) if boxed is None else None
        scope = text if tagged is None else tagged
        if boxed is not None:
            cand = _clean_candidate(boxed)
            # a box in the reasoning, then the answer marked after it: "The total is $\\boxed{7}$ units. ... Therefore,
            # the answer is C." is C
            cand = _marked_after(text[boxed_span[1]:], item, choices) or cand
        else:
            found = list(_ANSWER_IS_RE.finditer(scope))[-_MAX_ANSWER_MARKERS:]
            # (the heading of a check, "Let me verify the answer: 3 + 4 = 7", states no answer when another marker is
            # left; "I can confirm the answer is 12" does)
            found = [m for m in found if not (re.search(r"[:\uff1a]\s*$", m.group(0)) and _CHECKED_ANSWER_RE.search(
                scope[max(0, m.start() - 40): m.start()]))] or found
            marks = [(_clean_candidate(m.group(1)), m.end()) for m in found]
            # "The answer is not B but D" -> "D"; a choice text is kept ("Not possible"), and so is any text
            # of a multi_choice item that negates without naming another answer ("not A" names no choice).
            if qtype == "multi_choice":
                marks = [(f if _resolve_choice(f, choices) is not None else _drop_negated(f) or f, e) for f, e in marks]
            else:
                marks = [(_drop_negated(f), e) for f, e in marks]
            marks = [(f, e) for f, e in marks if f]
            if marks:
                # The last marked answer that reads as one ("The answer is 5. This answer is
                # correct." -> "5. This answer ..."), else the last marked text.
                cand, end = next(((f, e) for f, e in reversed(marks) if _usable_candidate(f, item, choices)),
                                 marks[-1])
                cand = _taken_back(scope[end:], item, choices) or _hedge_pick(cand, item, choices) or cand
            elif tagged is not None:
                cand = _clean_candidate(tagged)
            else:
                cand, whole = _clean_candidate(text), True

        if qtype == "multi_choice":
            if whole:  # less closing pleasantries and restated options ("A. 135°\nB. 140°\n...\n\nIt is 145°.")
                text = _PLEASANTRY_RE.sub("", text).strip() or text
                # (before restated options are dropped: "- (A) 3: wrong\n- (B) 4: correct" restates them)
                judged = _judged_options(text, choices)
                if judged:
                    return judged
                text = _drop_restated_options(text, choices)
                if not text:
                    return ""
                cand = _clean_candidate(text)
            resolved = _resolve_choice(cand, choices, followed=not whole)
            if resolved is None and not whole:
                resolved = _choice_named_inside(cand, choices)
            if resolved is not None:
                return resolved
            # A Greek or Cyrillic letter alone that does not read as a Latin one ("Ответ: В": the look says B, the
            # Russian order C): which option it names is not stated, and its nearest choice text would be a guess
            if not whole and re.fullmatch(r"\(?[\u0370-\u03ff\u0400-\u04ff]\)?", cand.strip()):
                return ""
            if whole:
                letters = _option_letters(len(choices))
                # A last line that is an answer ("...\n\n**B**", "...\nNo, because ..."), else a first line that
                # is an answer alone (stated first: "B\n\nExplanation: ..."; "Yes, let's look." is an opener)
                lines = [ln for ln in text.splitlines() if ln.strip()]
                if len(lines) > 1:
                    resolved = _resolve_choice(_clean_candidate(lines[-1]), choices)
                    if resolved is None and not _CORRECTION_RE.search(text):
                        resolved = _bare_choice(_clean_candidate(lines[0]), choices)
                    if resolved is not None:
                        return resolved
                # A last line that is a number alone and names no choice ("...\n\n**0.4**" against "0.38", "0.42"):
                # the answer, which the official extractor returns and its normaliser maps to the nearest choice text
                if lines and _number_and_unit(last := _clean_candidate(lines[-1])) is not None:
                    return last
                # "Option **B** is correct.", "Hence, option A is the correct answer.", "Option C is the answer."
                # (not a check: "To see whether option A is correct, ...", "Let's test if option B is correct.")
                said = _options_said_right(text, letters)
                if said:
                    return said
                # Else a final statement that ends by naming a choice: "So the result is 130.0." (the choice
                # "130°"), "So the result is **B**.", "Therefore, $x = 30$.", "\\[ x = 30 \\]", "- **Result: 30**"
                named = re.match(r".*(?:\b(?:is|are|equals)\s+|=\s*|:\s+)(\S.*)$", _final_statement(text),
                                 flags=re.I | re.S)
                if named and (resolved := _resolve_choice(_clean_candidate(named.group(1)), choices, False)):
                    return resolved
                hits = re.findall(rf"\(([{letters}])\)", text) if letters else []
                if hits:
                    return hits[-1]
                # (angles compared as the choices write them: "is $145^\\circ$." names the choice "145°")
                canon = _degrees_as_symbol(text).lower()
                pos = {c: _last_occurrence(canon, _degrees_as_symbol(c).strip().lower()) for c in choices if c.strip()}
                pos = {c: p for c, p in pos.items() if p >= 0}
                if pos:
                    # the latest to end ("-5" over the "5" in it, "quarter to" over "quarter"); on a tie the longer
                    return max(pos, key=lambda c: (pos[c] + len(c.strip()), len(c)))
                # "I think it's C.": a letter alone at the very end.
                # (also in bold / quotes / with a parenthesis: "... is **A**.", "... is \"A\".", "... is B).")
                m = re.search(rf"\b([{letters}])\b[*\"')]*[.)]?[*\"]*\s*$", text) if letters else None
                if m:
                    return m.group(1)
                # Unmarked text with no letter and no choice text: no answer (the nearest-
                # choice rule is applied only to an explicitly marked answer).
                return ""
            return cand

        if atype in ("integer", "float"):
            # A decimal comma in a boxed / marked float answer: "1,2" is 1.2 (one or two digits after the comma: no
            # thousands separator; "1,200" stays 1200)
            if atype == "float" and not whole:
                cand = re.sub(r"(?<![\d,.])(\d+),(\d{1,2})(?![\d,.])", r"\1.\2", cand)
            cand = _latex_numbers_as_decimals(cand, integer=atype == "integer")
            lines = [ln for ln in text.splitlines() if ln.strip()]
            first = _clean_candidate(lines[0]) if whole and len(lines) > 1 and not _CORRECTION_RE.search(text) else ""
            if re.match(r"\s*(?:\\\[|\$\$)", lines[0] if lines else ""):  # display math opens a derivation
                first = ""
            # (not the number of a numbered list: "1.\nIdentify the parts.\n2.\nCount them: 7.")
            if re.fullmatch(r"\s*\d+\s*[.)]\s*", lines[0] if lines else "") and any(
                    re.match(r"\s*\d+\s*[.)](?:\s|$)", ln) for ln in lines[1:]):
                first = ""
            # the answer stated first: "1.2\n\nExplanation: ... 6 to 5.", "400 units\n\n...", "x = 18\n\n..."
            if (stated_first := _lone_number(first, integer=atype == "integer")) is not None:
                return stated_first
            if whole:  # an unmarked response ends with its conclusion, less the numbers it negates ("12, not 13")
                def stated(t: str) -> list[str]:
                    return _numbers(re.sub(rf"\bnot\s+(?:{_NUM_RE})", " ", _SPACED_THOUSANDS.sub(
                        lambda m: re.sub(r"\D", "", m.group(0)), t), flags=re.I))

                # less a closing remark in brackets when the conclusion before it has a number ("There are 1000 g in
                # total. (2 weights, 3 marks.)"); a bracketed value stays ("6 (3 + 3)", "3:2 (1.5)")
                remark = re.search(r"\([^()]*[A-Za-z]{2}[^()]*\)[.!]?\s*$", cand)
                nums = (stated(cand[: remark.start()]) if remark else []) or stated(cand)
                if nums:
                    return nums[-1]
                # No digits: a number in words in the final statement ("There are three cars.")
                words = _number_words(_final_statement(text), atype)
                return words[-1] if words else ""
            # A boxed / marked answer states its value first ("1000, not 999"), or after its
            # last "=" ("x = 2 \\cdot 500 = 1000").
            # Its first sentence when that states the value ("1000. To verify: 2 + 3 = 5" is 1000).
            head = re.split(r"\.\s+(?=[A-Z])", cand, maxsplit=1)[0]
            if "=" not in head and _numbers(head):
                cand = head
            nums = _numbers(cand.rsplit("=", 1)[-1])
            if nums:
                return nums[0]
            # No digits: a number in words, in this marked answer ("The answer is six.", "\\boxed{three}") or else
            # in the last earlier marked one that has one (never over a marked answer with digits)
            for f in [cand] + ([] if boxed is not None else [f for f, _ in reversed(marks)]):
                words = _number_words(f.rsplit("=", 1)[-1], atype)
                if words:
                    return words[0]
            return ""

        if atype == "list":
            brackets = re.findall(r"\[([^\[\]]*)\]", cand)
            # In "[120,150]" the commas separate elements (not thousands: 120150), unless some comma is followed
            # by a space: "[1,000, 2,000]".
            if brackets and not re.search(r",\s", brackets[-1]):
                brackets[-1] = brackets[-1].replace(",", ", ")
            if whole and not brackets:  # an unmarked response ends with its list: its last line with numbers
                cand = next((ln for ln in reversed(cand.splitlines()) if _numbers(ln)), cand)
            nums = _numbers(brackets[-1]) if brackets else _numbers(cand)
            if not nums:
                return ""
            values = [int(float(x)) if float(x).is_integer() and "." not in x else float(x) for x in nums]
            return str(values)

        return cand
    except Exception:
        return ""


class MathVistaRowError(ValueError):
    """A MathVista row that no answer can be scored against as the official scorer would."""


def _float_precision(item: dict) -> int:
    """Decimal places of a float row: the official ``int(precision)`` (calculate_score.py at the data's commit).
    Where that fails (a precision missing, None, NaN, "2.0") the official scorer normalises no answer and scores
    every one wrong, and its build_query.py has no hint for the row: no verdict on it would be the official one
    (lmms-eval's port rounds with ``round(x, None)`` instead, to an integer), so the row is refused by name."""
    precision = item.get("precision")
    try:
        return int(precision)
    except (TypeError, ValueError, OverflowError):
        raise MathVistaRowError(
            f"MathVista pid {item.get('pid')!r}: field 'precision': expected a whole number of decimal places for a "
            f"float answer, got {precision!r} (the official round(x, int(precision)) fails on it and scores every "
            f"answer wrong)") from None


def normalize_mathvista_extraction(extraction: Any, item: dict) -> str | None:
    """Official ``normalize_extracted_answer`` (calculate_score.py); ``None`` where it fails
    (and for a malformed item; a float row without a precision raises :class:`MathVistaRowError`).
    Checked against lmms-eval's copy of it by ``scripts/parity_mathvista.py``."""
    try:
        return _normalize_mathvista(extraction, item)
    except MathVistaRowError:
        raise
    except Exception:
        return None


def _normalize_mathvista(extraction: Any, item: dict) -> str | None:
    qtype = item.get("question_type")
    atype = item.get("answer_type")
    choices = [str(c) for c in (item.get("choices") or [])]
    if qtype == "multi_choice":
        extraction = extraction.strip() if isinstance(extraction, str) else str(extraction)
        # "(A) text" -> "A" (first parenthesised letter). As in the official script this comes
        # first even for an extraction that is a choice text: with the choices "(c)", "(a)", ...
        # of pids 168 / 849 the exact gold text "(b)" is read as the letter B, the 2nd choice,
        # and scored wrong there.
        letter = re.findall(r"\(([a-zA-Z])\)", extraction)
        if letter:
            extraction = letter[0].upper()
        options = [chr(ord("A") + i) for i in range(len(choices))]
        if extraction in options:
            return choices[options.index(extraction)]  # letter -> its choice text
        if not choices:
            return None
        return _most_similar(extraction, choices)  # nearest choice text
    if atype == "integer":
        try:
            return str(int(float(extraction)))  # official: int(float(x)), truncates
        except Exception:
            return None
    if atype == "float":
        digits = _float_precision(item)  # (outside the try: a row without one is refused, not scored wrong)
        try:
            return str(round(float(extraction), digits))
        except Exception:
            return None
    if atype == "list":
        try:
            return str(extraction)
        except Exception:
            return None
    return extraction


def mathvista_is_correct(extraction: Any, item: dict) -> bool:
    """Official verdict of an extracted answer: ``safe_equal(normalize_extracted_answer(...), answer)``
    (calculate_score.py), i.e. the normalised extraction ``==`` ``item['answer']``. Raises only
    :class:`MathVistaRowError`, for a float row without a precision."""
    try:
        prediction = normalize_mathvista_extraction(extraction, item)
        return bool(prediction is not None and prediction == item["answer"])
    except MathVistaRowError:
        raise
    except Exception:
        return False


def score_mathvista(response: str, item: dict) -> bool:
    """True when ``response`` answers the MathVista item correctly.

    Rule-based extraction (:func:`extract_mathvista_answer`), the official normalisation,
    then exact equality with ``item['answer']`` (official ``safe_equal``).

    An empty response is scored as the official pipeline scores it (its extraction is "",
    which the normaliser maps to the nearest, i.e. shortest, choice). A non-empty response
    from which no answer can be read scores wrong: there the official GPT extractor would
    have returned some answer, and guessing the shortest choice for it would bias the score.
    """
    try:
        if not isinstance(response, str):
            return False
        extraction = extract_mathvista_answer(response, item)
        if extraction == "" and response.strip():
            if item.get("question_type") != "multi_choice" and item.get("answer_type") == "float":
                _float_precision(item)  # a row without a precision is refused whatever the response
            return False
        return mathvista_is_correct(extraction, item)
    except MathVistaRowError:
        raise
    except Exception:
        return False
