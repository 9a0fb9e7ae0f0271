"""Answer extraction and equivalence for reward computation.

Everything here is a pure function of strings. The comparison ladder runs from cheap to
expensive (exact text, then numbers, then math-verify) because rewards are computed for
every sample of every step, and the same few strings repeat across a group.
"""

from __future__ import annotations

import decimal
import fractions
import collections
import functools
import itertools
import math
import numbers
import re
import signal
import threading
import time
import unicodedata
from collections.abc import Hashable, Sequence

from mmevo.validation import is_blank_text

__all__ = [
    "extract_boxed",
    "extract_answer",
    "normalize_choice",
    "answers_equivalent",
    "canonical_answer",
    "group_answer_keys",
]

# ----------------------------------------------------------------------------- extraction

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BOXED_ONLY_RE = re.compile(r"\\boxed\s*\{")


def _braced_from(text: str, start: int) -> str | None:
    """Content of the brace group opened just before `start`, or None if it never closes.

    Escaped braces (``\\{``) are literal set braces, not grouping, so they are skipped.
    """
    depth = 1
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2  # skip the escaped character (covers \{ and \})
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
        i += 1
    return None


def _last_command_arg(text: str, pattern: re.Pattern) -> str | None:
    last = None
    for m in pattern.finditer(text):  # linear; keeps the last opening
        last = m
    if last is None:
        return None
    # Only the last box counts: a truncated final box must not fall back to an
    # intermediate one, which would reward an answer the model moved away from.
    return _braced_from(text, last.end())


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces allowed), else None."""
    if not isinstance(text, str):
        return None
    return _last_command_arg(text, _BOX_RE)


def _extract_boxed_strict(text: str) -> str | None:
    """Like `extract_boxed` but only ``\\boxed``; the format reward asks for that command."""
    return _last_command_arg(text, _BOXED_ONLY_RE)


# a math-mode switch inside an answer: "\\(1\\) or \\(2\\)", "$1$ or $2$" (not "\\$", a dollar sign, nor the "\\[" of a
# line break's spacing "\\\\[2pt]": a doubled backslash is matched first and kept)
_INNER_MATH_SWITCH_RE = re.compile(r"\\\\|\\\$|\\[()\[\]]|\$")


def _drop_math_switch(m: re.Match) -> str:
    return m.group() if m.group() in ("\\\\", "\\$") else " "


def _clean(s: str | None) -> str | None:
    """Strip whitespace and math delimiters, at the ends and inside; empty becomes None (an empty box is no answer).
    Delimiters inside were left in the middle of a listed answer: the box "\\(1\\) or \\(2\\)" read "1\\) or \\(2",
    which math-verify read as 1."""
    if s is None:
        return None
    s = s.strip()
    if "$" in s or "\\(" in s or "\\[" in s:
        s = _INNER_MATH_SWITCH_RE.sub(_drop_math_switch, s).strip()
    for _ in range(3):
        prev = s
        s = s.strip("$").strip()
        if s.startswith("\\(") and s.endswith("\\)"):
            s = s[2:-2].strip()
        if s.startswith("\\[") and s.endswith("\\]"):
            s = s[2:-2].strip()
        if s.endswith("\\") and not s.endswith("\\\\"):  # what "\ " (a LaTeX space) leaves after strip()
            s = s[:-1].rstrip()
        if s == prev:
            break
    return s or None


# any case: "<ANSWER>4</ANSWER>" marks the answer as "<answer>" does (the eval scorer and the HONEST protocol read tags
# in any case too; nothing asks for one case)
_ANSWER_OPEN_RE = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_CLOSE_RE = re.compile(r"</answer>", re.IGNORECASE)


def _answer_tag(text: str) -> str | None:
    """The text between the last ``</answer>`` and the last ``<answer>`` before it (tags in any case), or None."""
    close = None
    for close in _ANSWER_CLOSE_RE.finditer(text):
        pass
    if close is None:
        return None
    start = None
    for start in _ANSWER_OPEN_RE.finditer(text, 0, close.start()):
        pass
    if start is None:
        return None
    return text[start.end():close.start()]


# "answer is (B)", "Answer: C", "the answer is option B" ... letter must be uppercase so
# that ordinary words ("answer is a number") are not read as choice A.
# "The correct option is D." / "the correct choice is (B)" name the answer as "answer is" does (Geometry3K: read as no
# answer, scored wrong)
_LETTER_PHRASE_RE = re.compile(
    r"(?i:answer|correct\s+option|correct\s+choice)\s*(?:(?i:is)\s*)?[:：]?\s*(?:(?i:option|choice)\s*)?\(?\s*([A-Z])"
    r"\s*\)?(?![A-Za-z0-9])"
)
_LETTER_ONLY_RE = re.compile(r"\s*(?:(?i:option|choice)\s*)?\(?\s*([A-Z])\s*\)?\s*[.):]?\s*")
_WS_RUN_RE = re.compile(r"\s+")


def _letter_answer(text: str, n_choices: int) -> str | None:
    # one space per whitespace run: the patterns' adjacent \s* runs backtrack quadratically over a long blank run
    text = _WS_RUN_RE.sub(" ", text)
    text = text.replace("*", "")  # markdown emphasis: "The answer is **B**", "**Answer:** C" hid the letter
    tail = text
    k = text.rfind("</think>")
    if k >= 0:
        tail = text[k + len("</think>"):]
    for candidate in (tail, text):
        m = _LETTER_ONLY_RE.fullmatch(candidate)
        if m and ord(m.group(1)) - 65 < n_choices:
            return m.group(1)
    found = None
    for m in _LETTER_PHRASE_RE.finditer(text):
        if ord(m.group(1)) - 65 < n_choices:
            found = m.group(1)
    return found


def extract_answer(text: str, choices: Sequence[str] | None = None) -> str | None:
    """The model's final answer: last box, else last ``<answer>`` tag, else a choice letter.

    Later occurrences win because models often revise; a source yielding an empty string
    falls through to the next one.
    """
    if not isinstance(text, str) or not text:
        return None
    ans = _clean(extract_boxed(text))
    if ans is not None:
        return ans
    ans = _clean(_answer_tag(text))
    if ans is not None:
        return ans
    if not _no_choices(choices):
        return _letter_answer(text, min(len(choices), 26))
    return None


# ----------------------------------------------------------------------------- choices

# (square brackets too: "[D]")
_CHOICE_LETTER_RE = re.compile(r"(?:(?:option|choice)\s*)?[(\[]?\s*([A-Z])\s*[)\]]?\s*[.):]?")
_CHOICE_LETTER_CI_RE = re.compile(
    r"(?:(?:option|choice)\s*\(?\s*([a-z])\s*\)?|\(\s*([a-z])\s*\))\s*[.):]?", re.IGNORECASE
)
_CHOICE_PREFIX_RE = re.compile(r"(?:\(\s*([A-Za-z])\s*\)|(?:(?i:option|choice)\s*)?([A-Z])[.):])\s+(\S.*)", re.DOTALL)
# a letter and its option's value with only a space, a comma or a dash between, or the value in brackets
# ("\\text{D}\\ 80", "D, 80", "D - 80", "D (80^\\circ)"): read only when the value agrees
_CHOICE_SPACED_RE = re.compile(r"([A-Z])\s*(?:\((.+)\)|,\s*(\S.*)|\s+[-\u2013\u2014]\s+(\S.*)|\s+(\S.*))", re.DOTALL)
# the value first, its option's letter after it: "80 (D)", "80^\circ \text{ (D)}", "80, option D". Glued to the value
# ("80(D)") only after a digit, brace or degree mark: "P(A)" is a probability, not option A named after "P"
_CHOICE_SUFFIX_RE = re.compile(
    r"(\S.*?)(?:\s*[,;]\s*|\s+|(?<=[\d}°]))(?:\(\s*(?:(?i:option|choice)\s*)?([A-Z])\s*\)|(?i:option|choice)\s*([A-Z]))"
    r"\s*\.?", re.DOTALL)


def _no_choices(choices) -> bool:
    """No options given: None or empty. ``len``, not truth: a numpy array of options has no truth value."""
    return choices is None or len(choices) == 0


def _choice_text_key(s: str) -> str:
    return re.sub(r"\s+", "", s.replace("$", "")).casefold()


def _option_spelling(text: str) -> str:
    """An answer or option without math delimiters, text wrappers and LaTeX spacing, one space per blank run; in
    NFKC (`_compatibility_form`): the full-width "Ｂ" and "（B）" name option B."""
    if not text.isascii():
        text = _compatibility_form(text)
    s = _drop_text_wrappers(text.strip().strip("$").strip()).strip()  # \text{B} is the letter B
    s = _SPACING_RE.sub(" ", s).strip()  # "(B)\ 40^\circ": LaTeX spacing separates a letter from its text too
    return _WS_RUN_RE.sub(" ", s)  # linear matching below (see _letter_answer)


def _option_key(option) -> str:
    return _option_text_key(str(option))


@functools.lru_cache(maxsize=4096)
def _option_text_key(text: str) -> str:
    # cached: every answer matched against a question's options re-spelled each option text, which made grouping a
    # multiple-choice group (72 answers, 5 options) 2.5x slower than comparing texts by value with a warm cache
    return _choice_text_key(_option_spelling(text))


# what `_choice_index` returns for an answer naming one option by its letter and another by its value ("(D) 30")
NAMES_TWO_OPTIONS = -1


# a boxed sentence naming the answer: "\\boxed{\\text{Answer: D}}", "\\boxed{\\text{The answer is D}}"
_ANSWER_LEAD_RE = re.compile(r"(?:the\s+)?(?:final\s+|correct\s+)?answer\s*(?:is\s*)?[:：]?\s*(?=\S)", re.IGNORECASE)


def _choice_index(ans, choices: Sequence[str] | None) -> int | None:
    """The index of the option ``ans`` names: a choice letter ("B", "(B)", "B.", "option B", "(B) text", "80 (D)") or
    a choice's text, also after "Answer:" / "The answer is"; None when it names none (or there are no options),
    `NAMES_TWO_OPTIONS` when its letter and its value name different options."""
    if _no_choices(choices) or not isinstance(ans, str):
        return None
    s = _option_spelling(ans)
    idx = _spelled_choice_index(s, choices)
    if idx is None and (lead := _ANSWER_LEAD_RE.match(s)):
        idx = _spelled_choice_index(s[lead.end():], choices)
    return idx


_MATH_CHAR_RE = re.compile(r"[\d\\]")


def _spelled_choice_index(s: str, choices: Sequence[str]) -> int | None:
    """`_choice_index` of an answer already in `_option_spelling`."""
    n = len(choices)

    def pick(letter: str | None) -> int | None:
        if letter:
            idx = ord(letter.upper()) - 65
            if 0 <= idx < n:
                return idx
        return None

    m = _CHOICE_LETTER_RE.fullmatch(s)
    if m and (hit := pick(m.group(1))) is not None:
        return hit
    key = _choice_text_key(s)
    for i, c in enumerate(choices):  # each option spelled as the answer is (no $, text wrappers, LaTeX spacing)
        if _option_key(c) == key:
            return i
    # a lower-case letter only after the texts: MathVista 168's options are "(c)", "(a)", "(e)", "(d)", "(b)", and
    # its gold "(b)" is the fifth option, not the second
    m = _CHOICE_LETTER_CI_RE.fullmatch(s)
    if m and (hit := pick(m.group(1) or m.group(2))) is not None:
        return hit
    m = _CHOICE_PREFIX_RE.fullmatch(s)
    if m and (hit := pick(m.group(1) or m.group(2))) is not None:
        return _letter_with_text(hit, m.group(3), choices)
    # the value before the letter must be that option's: any text then "(D)" was D ("A (D)", "A, B, C (D)", "between
    # 30 (A) and 80 (D)", "80 or 30 (D)" all scored right on the gold D)
    m = _CHOICE_SUFFIX_RE.fullmatch(s)
    if m and (hit := pick(m.group(2) or m.group(3))) is not None:
        return _letter_with_text(hit, m.group(1), choices, letter_decides=False)
    m = _CHOICE_SPACED_RE.fullmatch(s)
    if m and (hit := pick(m.group(1))) is not None:
        text = next(g for g in m.groups()[1:] if g is not None)
        # compared in full when the text is set off by brackets, a comma or a dash ("D (\\sqrt{75})") or is math (a
        # digit or a command: "C\\ \\sqrt{75}"); cheaply when it is words after a bare space: "A x" is any answer
        # starting with a capital, not worth a sympy call
        cheap = m.group(5) is not None and not _MATH_CHAR_RE.search(text)
        return _letter_with_text(hit, text, choices, letter_decides=False, cheap=cheap)
    return None


# another option's letter inside the text that follows or precedes a letter: "(A)", "[A]", "option A" (not "P(A)",
# a probability: a bracket glued to a name is no option), or the text being a letter alone ("D. A")
_LETTER_MENTION_RE = re.compile(
    r"(?<![A-Za-z0-9_\\])[(\[]\s*([A-Z])\s*[)\]]|(?i:\b(?:option|choice))\s*[(\[]?\s*([A-Z])(?![A-Za-z0-9])|"
    r"^\s*([A-Z])\s*[.):]?\s*$")


def _mentions_other_letter(idx: int, text: str, choices: Sequence[str]) -> bool:
    """Whether ``text`` names an option other than ``idx`` (and its duplicates) by its letter."""
    for m in _LETTER_MENTION_RE.finditer(text):
        j = ord(m.group(1) or m.group(2) or m.group(3)) - 65
        if j < len(choices) and not _same_option(idx, j, choices):
            return True
    return False


# the items of a listed text: "30 or 80", "30, 40, 60, 80", "30 and 80" (a comma before a blank only: "1,000" is a
# number)
_LIST_SEPARATOR_RE = re.compile(r"\s*(?:,\s|;|\bor\b|\band\b|\\(?:lor|vee)(?![A-Za-z]))\s*", re.IGNORECASE)


_MAX_LISTED = 64


def _lists_other_value(idx: int, text: str, choices: Sequence[str]) -> bool:
    """Whether ``text`` is a list one of whose items is the value or letter of an option other than ``idx``:
    "(D) 30 or 80", "(D) 30, 40, 60, 80" were D by their letter (no one option's value), right on the gold D = 80.
    Each distinct item is spelled once, and compared as `_cheaply_equivalent` does; a list of more than
    `_MAX_LISTED` distinct items restates far more than one option and is taken as naming others (spelling 4,000
    items took 0.1 s)."""
    listed = [t for t in _LIST_SEPARATOR_RE.split(text) if t]
    if len(listed) < 2:
        return False
    items = set(listed)
    if len(items) > _MAX_LISTED:
        return True
    others = [_value_key(str(c)) for j, c in enumerate(choices) if not _same_option(idx, j, choices)]
    for item in items:
        if (m := _CHOICE_LETTER_RE.fullmatch(item)) and (j := ord(m.group(1)) - 65) < len(choices) \
                and not _same_option(idx, j, choices):  # a listed letter: "(D) A or B"
            return True
        key = _value_key(item)
        if any(_value_keys_equal(key, other) for other in others):
            return True
    return False


def _value_key(text: str) -> tuple[str, float | None, int | None]:
    """(`_light` spelling, number, exact integer) of ``text``, what `_cheaply_equivalent` compares."""
    light = _light(text)
    num = _to_number(light)
    return light, num, _exact_integer(light) if num is not None else None


def _value_keys_equal(a: tuple, b: tuple) -> bool:
    """Two `_value_key`s name one value: both spelt, and equal numbers where both are numbers, else equal spellings."""
    (la, na, ea), (lb, nb, eb) = a, b
    if not la or not lb:
        return False
    if na is not None and nb is not None:
        return _numbers_close(na, nb, ea, eb)
    return la == lb


def _letter_with_text(idx: int, text: str, choices: Sequence[str], letter_decides: bool = True,
                      cheap: bool = False) -> int | None:
    """The option an answer naming both a letter and a text ("(D) 80", "80 (D)") names: the lettered one, unless
    the text names another option, by its value or its letter, or lists another's value: then it names two options,
    and is neither ("(D) 30" against 30 / 40 / 60 / 80 was option D, scored right when D was gold; "(D) (A)",
    "(D) 30 or 80" and the options restated, "(A) 30\\n(B) 40\\n...", were the first letter's). A text that is no
    option's value (a paraphrase, a working) leaves the letter to decide, or, without ``letter_decides``, names no
    option. ``cheap``: texts are compared without math-verify ("A x" is any answer starting with a capital, not worth
    a sympy call)."""
    # (unless the text is the option's own: "(D) E" where D's text is the letter "E", MATH-V 742)
    if _option_text_key(text) != _option_key(choices[idx]) and _mentions_other_letter(idx, text, choices):
        return NAMES_TWO_OPTIONS
    pairs = [(text, str(c)) for c in choices]
    named = [j for j, same in enumerate(map(_cheaply_equivalent, *zip(*pairs)) if cheap else _each_equivalent(pairs))
             if same]
    if any(_same_option(idx, j, choices) for j in named):
        return idx
    if named or _lists_other_value(idx, text, choices):
        return NAMES_TWO_OPTIONS
    return idx if letter_decides else None


def normalize_choice(ans: str, choices: Sequence[str] | None) -> str:
    """Map a choice letter ("B", "(B)", "B.", "option B", "(B) text") or a choice's text to
    that choice's text, so letters and texts compare equal; anything else is returned as is."""
    idx = _choice_index(ans, choices)
    return ans if idx is None or idx == NAMES_TWO_OPTIONS else str(choices[idx])


def _same_option(i: int, j: int, choices: Sequence[str]) -> bool:
    """Two named options are one answer when they are the same option or repeat one text (a duplicated option)."""
    return i == j or _option_key(choices[i]) == _option_key(choices[j])


# ----------------------------------------------------------------------------- normalisation

# \\underline{..} too: an underlined answer is that answer, and "\\underline{\\quad}" (a fill-in blank) is no answer
# the argument may hold two levels of braces ("\\text{\\frac{20}{3}}" is 20/3; it was left as text, no number); a wrapper
# inside a wrapper ("\\text{\\textbf{5}}") is dropped by the next pass of `_drop_text_wrappers`. One character per
# step of the repetition, so that a failed match backtracks linearly
_TEXT_WRAP_RE = re.compile(
    r"\\(?:text|textbf|textit|textrm|textsf|textnormal|mathrm|mathbf|mathit|mathsf|boldsymbol|bm|mbox|operatorname|"
    r"underline)\s*\{((?:[^{}]|\{(?:[^{}]|\{[^{}]*\})*\})*)\}")


def _drop_text_wrappers(s: str) -> str:
    for _ in range(4):  # nested wrappers, outermost first
        s, n = _TEXT_WRAP_RE.subn(r"\1", s)
        if not n:
            break
    return s


# (and the ASCII stand-in "120^o" / "120^{o}" after a number: Geometry3K's "\\boxed{120^o}" was no number, scored wrong)
_DEGREE_RE = re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|°|\\degree\b|\bdegrees?\b|"
                        r"(?<=[\d}])\s*\^\s*(?:o|\{\s*o\s*\})(?![A-Za-z])", re.IGNORECASE)
# "~" is LaTeX's tie (a non-breaking space): "12 \\mathrm{~cm}" is the usual spelling of a unit in GeoQA-style output
# the wide spaces too (\\quad, \\qquad, \\enspace, \\hspace{..}): a boxed blank "\\boxed{\\quad}" is no answer, as
# "\\boxed{\\,}" is; without them it voted as an answer and could win a group's majority. A command ends at a non-letter
_WIDE_SPACE = r"\\(?:q?quad|enspace|hfill)(?![A-Za-z])|\\hspace\*?\s*\{[^{}]*\}"
_SPACING_RE = re.compile(r"\\[,;:! ]|~|\\left\b|\\right\b|\\(?:thinspace|medspace|thickspace)(?![A-Za-z])|"
                         r"\\(?:display|text|script)style(?![A-Za-z])|" + _WIDE_SPACE)  # a style switch sets only size
# a wide space between two digits parts two numbers: "1 \\quad 2" is the list 1, 2 (math-verify: the set {1, 2}); dropped
# as a space it read as 12 (and math-verify reads "1 2" as 3), so a listed pair out-voted or matched a single number
_WIDE_GAP_RE = re.compile(r"(?<=\d)\s*(?:(?:" + _WIDE_SPACE + r")\s*)+(?=\d)")
# \\phantom{..} (\\hphantom, \\vphantom) typesets only blank space the size of its content: "\\boxed{\\phantom{0}}" is a
# blank to fill in, no answer (math-verify read it as 0); one level of nested braces inside
_PHANTOM_RE = re.compile(r"\\[hv]?phantom\s*\{(?:[^{}]|\{[^{}]*\})*\}")
# a boxed placeholder, nothing but question marks or underscores ("?", "\\_\\_"), after `_light`: no answer either
_PLACEHOLDER_RE = re.compile(r"(?:\?|\\?_)+")
# a length / area / volume unit after a number, squared or cubed or not ("5 cm^2", "5\\text{ cm}^{2}", "5 sq units"):
# math-verify already reads "5 cm" as 5 but not "5 cm^2", which split area answers from their bare numbers. The number
# may end in a digit, a brace (\\sqrt{3}, \\frac{1}{2}) or pi ("12\\pi cm^2"); a sentence period may follow the unit
_UNIT_TAIL_RE = re.compile(
    r"(?:(?<=[\d}π])|(?<=\\pi))\s*(?:sq\.?\s*|square\s+|cubic\s+)?(?P<unit>[kcm]?m|in|ft|yd|inch(?:es)?|feet|foot|units?|"
    r"(?:centi|milli|kilo)?met(?:er|re)s?)\s*(?:\^\s*\{?\s*[23]\s*\}?|[²³])?\s*\.?\s*$", re.IGNORECASE)


# "√3", "5√(2)", "√{x}" (and the cube and fourth roots "∛8", "∜16"): the Unicode radical, which math-verify reads as a
# symbol, over one number, letter or group
_RADICAL_RE = re.compile(r"([√∛∜])\s*(\d+(?:\.\d+)?|[A-Za-z]|\([^()]*\)|\{[^{}]*\})")


def _radical(m: re.Match) -> str:
    index, arg = {"√": "", "∛": "[3]", "∜": "[4]"}[m.group(1)], m.group(2)
    return "\\sqrt" + index + "{" + (arg[1:-1] if arg[0] in "({" else arg) + "}"


# logic connectives between candidates, spelled as the words math-verify reads as a list ("1 or 2" is the set {1, 2}):
# it read "1 \\lor 2" and "x=1 \\lor x=2" as 2 (the last number, the last equation's side), right on the gold 2
_CONNECTIVE_RE = re.compile(r"\\(?:(lor|vee|bigvee)|land|wedge|bigwedge)(?![A-Za-z])|\band/or\b")


# a line break outside an environment (a matrix's or cases' rows keep theirs) parts items too: "x = 1 \\\\ x = 2" read as
# 2, the last line's side
_LINE_BREAK_RE = re.compile(r"\\\\(?:\s*\[[^\[\]]*\])?|\\newline(?![A-Za-z])")


def _connective_word(m: re.Match) -> str:
    return " or " if m.group(1) or m.group().startswith("and/") else " and "


# a boxed "Answer: 80^\\circ" / "The final answer is 5" states its value after the lead; math-verify's anchored
# plain-expression reading found it, which `_mv_parse` now uses only for a LaTeX parse that fails
_VALUE_LEAD_RE = re.compile(r"^(?:the\s+)?(?:final\s+|correct\s+)?answer\b\s*(?:is\b\s*)?[:：]?\s*(?=\S)", re.IGNORECASE)


# Unicode math symbols as the LaTeX commands math-verify and the rules below read ("1 ∨ 2" is the list "1 \\lor 2",
# "x ≥ 2" a bound), full-width ASCII (U+FF01..U+FF5E: "１２" is 12) as ASCII, the ideographic space as a space. A command
# takes a space after it so that it does not run into a following letter ("πr" is "\\pi r", not the command "\\pir")
_VULGAR_FRACTIONS = {"½": (1, 2), "⅓": (1, 3), "⅔": (2, 3), "¼": (1, 4), "¾": (3, 4), "⅕": (1, 5), "⅖": (2, 5),
                     "⅗": (3, 5), "⅘": (4, 5), "⅙": (1, 6), "⅚": (5, 6), "⅛": (1, 8), "⅜": (3, 8), "⅝": (5, 8),
                     "⅞": (7, 8)}
_UNICODE_MATH = str.maketrans({
    "∨": " \\lor ", "∧": " \\land ", "∪": " \\cup ", "∩": " \\cap ", "≈": " \\approx ", "≥": " \\ge ", "≤": " \\le ",
    "≠": " \\neq ", "±": "\\pm ", "∓": "\\mp ", "π": "\\pi ", "×": " \\times ", "·": " \\cdot ", "÷": " \\div ",
    "∞": "\\infty ", "\u2212": "-", "\u3000": " ", "⩾": " \\ge ", "≧": " \\ge ", "⩽": " \\le ", "≦": " \\le ",
    "≃": " \\simeq ", "≒": " \\approx ", "≅": " \\cong ", "∶": ":", "⁄": "/", "∗": "*", "✕": " \\times ",
    "✖": " \\times ", **{chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)},
    **{f: "\\frac{%d}{%d}" % ratio for f, ratio in _VULGAR_FRACTIONS.items()}})

# a repeating decimal, exact: "6.\\overline{6}" is 20/3, "1.2\\overline{34}", "0.\\bar{3}", "0.1\\dot{6}",
# "0.\\dot{1}4\\dot{2}" (dots over the first and last digit of the repeating block); math-verify reads none of them, and
# a truncated "6.66" stays another value
_REPEATING_RE = re.compile(
    r"(?<![\d.])(\d{0,20})\.(\d{0,20})(?:\\(?:overline|bar)\s*(?:\{\s*(\d{1,20})\s*\}|(\d))|"
    r"\\dot\s*(?:\{\s*(\d)\s*\}|(\d))(?:(\d{0,20})\\dot\s*(?:\{\s*(\d)\s*\}|(\d)))?)(?![\d.])")


def _repeating_as_fraction(m: re.Match) -> str:
    whole, fixed = m.group(1) or "0", m.group(2)
    if m.group(3) or m.group(4):
        block = m.group(3) or m.group(4)
    else:  # dots: the first dotted digit, the digits between, the last dotted digit
        block = (m.group(5) or m.group(6)) + (m.group(7) or "") + (m.group(8) or m.group(9) or "")
    scale = 10 ** len(fixed) * (10 ** len(block) - 1)
    value = fractions.Fraction(int(whole + fixed + block) - int(whole + fixed), scale)
    return str(value.numerator) if value.denominator == 1 else f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


# a number with thousands commas in a list parted by ", ", "and" or "or": "1,000, 2" is 1000 and 2 (math-verify read
# three items); alone, "(1,234)" may be a point
_LISTED_RE = re.compile(r", |\s(?:and|or)\s")
_LISTED_THOUSANDS_RE = re.compile(r"(?<![\d,.])\d{1,3}(?:,\d{3})+(?!\d|,\d)")


# one-digit arguments without braces: "\\sqrt3" is "\\sqrt{3}", "\\frac12" "\\frac{1}{2}" (TeX reads one token per
# argument), so that a value without braces meets an option's text by spelling: "(C) 5\\sqrt3 or 5\\sqrt2" lists two
# options' values (it was read by its letter alone)
_SHORT_SQRT_RE = re.compile(r"\\sqrt\s*(\d)(?!\d)")
_SHORT_FRAC_RE = re.compile(r"\\frac\s*(\d)\s*(\d)(?!\d)")


# "about 2", "approximately 2", "roughly 2": the value, approximated (math-verify read the words as a product of
# symbols, a·b·o·u·t·2); not "nearly" / "almost", which say a little less
_ABOUT_LEAD_RE = re.compile(r"^(?:about|approximately|approx\.?|around|roughly)\s*(?=[-\d.\\])", re.IGNORECASE)


# an en or em dash before a number where a sign belongs ("–5", "x = —5"), not between two numbers ("2–3", a range)
_DASH_SIGN_RE = re.compile(r"(?:^|(?<=[(\[{=,:;]))\s*[–—](?=\s*\d)")
# hyphens NFKC keeps apart from "-" (U+2010 hyphen, U+2011 non-breaking hyphen, U+2012 figure dash), as ASCII's "-"
# serves both as hyphen and minus; and the degree look-alikes "º" (ordinal) and "˚" (ring above), which NFKC turns into
# "o" and a combining ring
_HYPHENS_AND_DEGREES = str.maketrans({"\u2010": "-", "\u2011": "-", "\u2012": "-", "º": "°", "˚": "°"})


@functools.lru_cache(maxsize=4096)
def _compatibility_spelling(c: str) -> tuple[str, str]:
    """(script, text) of one character: its compatibility decomposition (NFKD) with a superscript / subscript form
    ("²", "ⁿ", "₁") marked as script "^" / "_" instead of flattened, so that "x²" stays x^{2} and never meets "x2";
    format characters (zero-width space, soft hyphen, BOM, bidi marks) are invisible and spell nothing."""
    if unicodedata.category(c) == "Cf":
        return "", ""
    parts = unicodedata.decomposition(c).split()
    if not parts:
        return "", c
    tag = parts[0] if parts[0].startswith("<") else ""
    text = "".join(_compatibility_spelling(chr(int(h, 16)))[1] for h in parts[1 if tag else 0:])
    return {"<super>": "^", "<sub>": "_"}.get(tag, ""), text


def _compatibility_form(s: str) -> str:
    """``s`` in NFKC, except that each run of superscript / subscript characters becomes a LaTeX script ("10⁻³" is
    "10^{-3}", "x₁₂" "x_{12}"): NFKC alone reads "x²" as "x2". Compatibility characters then read as what they stand
    for: "①" is 1, "Ⅳ" is IV, "﹣5" is -5, "5㎝" is 5 cm, "ﬁ" is fi; a decomposed accent meets its composed letter."""
    out = []
    for script, run in itertools.groupby(map(_compatibility_spelling, s), key=lambda p: p[0]):
        text = "".join(t for _, t in run)
        out.append(f"{script}{{{text}}}" if script else text)
    return unicodedata.normalize("NFC", "".join(out))


def _unicode_math(s: str) -> str:
    """``s`` with the Unicode math above spelt as LaTeX / ASCII, and other compatibility characters as NFKC spells
    them (`_compatibility_form`). The symbols are spelt first: NFKC reads "3½" as "31⁄2"."""
    s = _DASH_SIGN_RE.sub("-", s).translate(_HYPHENS_AND_DEGREES).translate(_UNICODE_MATH)
    return s if s.isascii() else _compatibility_form(s).translate(_UNICODE_MATH)


def _unwrap(s: str) -> str:
    """Drop presentation-only markup (text wrappers, spacing, degree marks, a unit after a number) but keep spaces."""
    return _UNIT_TAIL_RE.sub("", _unwrap_keeping_unit(s)).strip()


# each spelling of a length unit `_UNIT_TAIL_RE` drops, by its one name; "unit(s)" names none
_UNIT_NAMES = {"centimeter": "cm", "centimetre": "cm", "millimeter": "mm", "millimetre": "mm", "kilometer": "km",
               "kilometre": "km", "meter": "m", "metre": "m", "inch": "in", "inche": "in", "feet": "ft", "foot": "ft"}


@functools.lru_cache(maxsize=65536)
def _unit_of(s: str) -> str | None:
    """The length unit named after the number ``s`` ends with ("5 cm", "5\\text{ meters}^2" are cm and m), else None;
    squared or cubed alike (an area written "cm" is a sloppy spelling of the same answer)."""
    m = _UNIT_TAIL_RE.search(_unwrap_keeping_unit(s))
    if m is None:
        return None
    name = m.group("unit").casefold()
    name = name[:-1] if name.endswith("s") and len(name) > 2 else name
    return None if name == "unit" else _UNIT_NAMES.get(name, name)


def _units_differ(pred: str, gold: str) -> bool:
    """Both answers name a length unit and not the same one: "5 m" is not "5 cm" (nor, converted, "500 cm": answers
    are compared as spelled, without unit conversion). A vote's cheap key (`canonical_answer`) reads a number with its
    unit as the number; `group_answer_keys` splits it by unit, so a vote counts "5 m" and "5 cm" apart too."""
    up, ug = _unit_of(pred), _unit_of(gold)
    return up is not None and ug is not None and up != ug


def _unwrap_keeping_unit(s: str) -> str:
    s = _clean(s) or ""
    if not s.isascii():
        s = _unicode_math(s)
    s = _CONNECTIVE_RE.sub(_connective_word, s)
    if "\\begin" not in s:
        s = _LINE_BREAK_RE.sub(", ", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    if "\\sqrt" in s or "\\frac" in s:
        s = _SHORT_FRAC_RE.sub(r"\\frac{\1}{\2}", _SHORT_SQRT_RE.sub(r"\\sqrt{\1}", s))
    if "," in s and _LISTED_RE.search(s) and "," in s.replace(", ", ""):
        s = _LISTED_THOUSANDS_RE.sub(lambda m: m.group().replace(",", ""), s)
    if "." in s and ("\\overline" in s or "\\bar" in s or "\\dot" in s):
        s = _REPEATING_RE.sub(_repeating_as_fraction, s)
    s = _RADICAL_RE.sub(_radical, s)
    s = _PHANTOM_RE.sub(" ", s)
    s = _WIDE_GAP_RE.sub(", ", s)
    s = _SPACING_RE.sub(" ", s)
    s = _clean(_drop_text_wrappers(s)) or ""  # math inside the wrapper: "\\text{\\(\\frac{20}{3}\\)}"
    s = _VALUE_LEAD_RE.sub("", s, count=1)
    s = _ABOUT_LEAD_RE.sub("", s, count=1)
    s = _DEGREE_RE.sub("", s)
    s = _WS_RUN_RE.sub(" ", s)  # one space per run keeps the unit pattern's \s* runs linear on long blank runs
    return s.strip()


_LIGHT_WS_RE = re.compile(r"(?<=\d,)(\s+)(?=\d)|\s+")


@functools.lru_cache(maxsize=65536)
def _light(s: str) -> str:
    """Key for exact comparison: unwrapped, no whitespace, no trailing period, casefolded. A space after a comma
    between digits stays: "1,000" is a thousand but "1, 000" is a list, as math-verify reads them."""
    s = _LIGHT_WS_RE.sub(lambda m: " " if m.group(1) else "", _unwrap(s))
    s = s.rstrip(".").strip("$").casefold()
    return "" if _PLACEHOLDER_RE.fullmatch(s) else s


_THOUSANDS_RE = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_FLOAT_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?")
_SLASH_RE = re.compile(r"([+-]?\d+(?:\.\d+)?)/([+-]?\d+(?:\.\d+)?)")
_FRAC_RE = re.compile(r"([+-]?)\\frac\{([+-]?\d+(?:\.\d+)?)\}\{([+-]?\d+(?:\.\d+)?)\}")
_FRAC_SHORT_RE = re.compile(r"([+-]?)\\frac(\d)(\d)")


@functools.lru_cache(maxsize=65536)
def _to_number(light: str) -> float | None:
    """Float value of a plain number / simple fraction (input already `_light`), else None."""
    if not light or len(light) > 64:
        return None
    s = light
    if _THOUSANDS_RE.fullmatch(s):
        s = s.replace(",", "")
    val: float | None = None
    if _FLOAT_RE.fullmatch(s):
        val = float(s)
    elif m := _SLASH_RE.fullmatch(s):
        den = float(m.group(2))
        val = float(m.group(1)) / den if den != 0 else None
    elif m := (_FRAC_RE.fullmatch(s) or _FRAC_SHORT_RE.fullmatch(s)):
        den = float(m.group(3))
        if den != 0:
            val = float(m.group(2)) / den
            if m.group(1) == "-":
                val = -val
    if val is None or not math.isfinite(val):
        return None
    return val + 0.0  # folds -0.0 into 0.0


def _exact_integer(light: str) -> int | None:
    """The integer a plain decimal spelling (``12,345``, ``-3.0``, ``1e20``; input already `_light`) stands for,
    exactly, else None (a fraction, a non-integer, or out of a double's range). A double cannot hold every integer
    above 2**53: 100000000000000001 and 100000000000000000 are one float."""
    s = light.replace(",", "") if _THOUSANDS_RE.fullmatch(light) else light
    if len(s) > 64 or not _FLOAT_RE.fullmatch(s):
        return None
    d = decimal.Decimal(s)
    if not math.isfinite(float(d)) or d != d.to_integral_value():  # the range check first: int() of 1e99999 is huge
        return None
    return int(d)


def _numbers_close(a: float, b: float, exact_a: int | None = None, exact_b: int | None = None) -> bool:
    """Integers compare exactly (10000 is not 10001; ``exact_*``: the `_exact_integer` of each spelling, which
    keeps integers above 2**53 apart); other values within a relative 1e-4, which absorbs a rounded decimal spelling
    of a fraction (0.3333 for 1/3) but keeps 0.5 and 0.54 apart."""
    if exact_a is not None and exact_b is not None:
        return exact_a == exact_b
    if a.is_integer() and b.is_integer():
        return a == b
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-9)


# ----------------------------------------------------------------------------- math-verify

# math-verify is called with its timeouts disabled so it works off the main thread; these
# static limits stand in for the timeout by refusing inputs that make sympy hang (towers
# like 2^{2^{40}}, factorials of huge numbers) or parse slowly (very long strings).
_MV_MAX_LEN = 200
_BIG_INT_RE = re.compile(r"\d{6,}")
_HEAVY_OPS = ("!", "\\binom", "\\choose", "\\prod", "\\sum", "\\Gamma", "**")
_WORDY_RE = re.compile(r"[A-Za-z]{2,}")


def _scripts(s: str):
    """(kind, argument, chained) of each ``^`` / ``_`` in ``s``; chained when the previous script's argument ends
    right before it (``x^a_b`` chains ``_b`` to ``^a``)."""
    prev_end = -1
    for i, c in enumerate(s):
        if c not in "^_":
            continue
        j = i + 1
        while j < len(s) and s[j] == " ":
            j += 1
        if j < len(s) and s[j] == "{":
            body = _braced_from(s, j + 1)
            end = len(s) if body is None else j + 2 + len(body)
            body = s[j + 1:] if body is None else body
        else:
            m = re.match(r"\\[A-Za-z]+|.?", s[j:], re.DOTALL)
            body, end = m.group(), j + m.end()
        yield c, body, 0 <= prev_end <= i and not s[prev_end:i].strip()
        prev_end = end


def _scripts_ok(s: str) -> bool:
    """No towers (an exponent holding a ``^``, or one with a 7-digit number) and no script runs beyond one ``^``
    and one ``_`` on a base: math-verify's parser takes seconds on ``x^x^x^...`` or ``x^x_x^x_x...`` (a LaTeX error
    anyway), and sympy hangs evaluating towers."""
    run: list[str] = []
    for kind, body, chained in _scripts(s):
        run = run + [kind] if chained else [kind]
        if len(run) > 2 or run.count(kind) > 1:
            return False
        if kind == "^" and ("^" in body or re.search(r"\d{7,}", body)):
            return False
    return True


# math-verify's LaTeX parser (ANTLR) predicts each nested group with a full-context search whose cost multiplies per
# level: "{{{{{{{{{{x}}}}}}}}}}" (10 levels) took 3 s to parse, 16 levels 11 s, 20 levels minutes
_MV_MAX_NEST = 6


def _nest_depth(s: str) -> int:
    depth = deepest = 0
    for c in s:
        if c in "{([":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "})]":
            depth = max(depth - 1, 0)
    return deepest


# Evaluated while math-verify parses, before `_mv_bounded` can look: a binomial of a power (\\binom{2^{99}}{49999});
# or slow in sympy whatever their size: a sum / product of powers (\\sum_{k=1}^{99}k^{99}: seconds even numerically),
# an integral of a high power (\\int_0^1 x^{99999} dx integrates a dense polynomial)
_BINOM_RE = re.compile(r"\\[dt]?binom(?![A-Za-z])")
_BIG_ARGUMENT_RE = re.compile(r"[\^!]|\d{5,}")  # a power, a factorial or a 5-digit number


def _costly_operators(s: str) -> bool:
    for m in _BINOM_RE.finditer(s):
        j = m.end()
        for _ in range(2):  # its two argument groups ("\\binom52" has no braces: digits only)
            while j < len(s) and s[j] == " ":
                j += 1
            if j >= len(s) or s[j] != "{":
                break
            arg = _braced_from(s, j + 1)
            if arg is None or _BIG_ARGUMENT_RE.search(arg):
                return True
            j += len(arg) + 2
    if "\\choose" in s and _BIG_ARGUMENT_RE.search(s):
        return True
    if re.search(r"\\(?:sum|prod)(?![A-Za-z])", s) and s.count("^") > len(re.findall(r"\\(?:sum|prod)\s*_", s)):
        return True  # more powers than the sums' upper limits: a power in a summand
    return bool(re.search(r"\\i+nt(?![A-Za-z])", s) and re.search(r"\^\s*\{?\s*[-+]?\d{3,}", s))


def _mv_safe(s: str) -> bool:
    if len(s) > _MV_MAX_LEN or _nest_depth(s) > _MV_MAX_NEST:
        return False
    if any(op in s for op in _HEAVY_OPS) and _BIG_INT_RE.search(s):
        return False
    return not _costly_operators(s) and _scripts_ok(s)


# sympy evaluates a parsed answer in full (verify, evalf), which cannot be interrupted off the main thread; an answer
# whose value may have more digits than this (towers, factorials or exponentials of computed numbers), or whose
# expansion may have more terms ((x+1)^{1000}), is not compared
_MV_MAX_DIGITS = 1e5
_MV_MAX_TERMS = 100


def _log10_bound(x) -> float:
    """Upper bound on log10 of the size of any number sympy may compute from ``x`` (a symbol counts as 10)."""
    from sympy import Product, Sum, binomial, cosh, csch, exp, factorial, factorial2, gamma, sech, sinh, subfactorial

    if getattr(x, "is_Rational", False):
        return math.log10(max(abs(int(x.p)), abs(int(x.q)), 1))
    if getattr(x, "is_Float", False):
        return abs(math.log10(abs(float(x)))) if x else 0.0
    args = getattr(x, "args", ())
    if not args:
        return 1.0
    if isinstance(x, (Sum, Product)):  # up to n terms, each at most the term's bound with the index at n
        n = max(_log10_bound(a) for lim in args[1:] for a in lim.args[1:])
        return _pow10(n) * (_log10_bound(args[0]) + n)
    ls = [_log10_bound(a) for a in args]
    if getattr(x, "is_Pow", False):
        return ls[0] * _pow10(ls[1])
    if isinstance(x, (exp, sinh, cosh, csch, sech)):  # e^x in size (csch / sech: its reciprocal's digits)
        return _pow10(ls[0])
    if isinstance(x, (factorial, factorial2, subfactorial, gamma, binomial)):
        return _pow10(max(ls)) * max(max(ls), 1.0)  # n! < n^n
    if getattr(x, "is_Mul", False):
        return sum(ls)
    return max(ls) + math.log10(len(ls))


def _pow10(v: float) -> float:
    return 10.0**v if v < 300 else math.inf


def _terms_bound(x) -> float:
    """Upper bound on the number of terms of ``x`` expanded (powers of sums of symbols multiply out)."""
    args = getattr(x, "args", ())
    if (getattr(x, "is_Pow", False) and args[1].is_Rational and abs(args[1].p) > _MV_MAX_TERMS
            and not args[0].is_Rational and not args[0].free_symbols):
        # a high power of an irrational number (\\sqrt{2}^{999}, (1+\\sqrt{2})^{9999}): simplify takes its minimal
        # polynomial by resultants whose degree is the exponent (5 s and 23 s against an equal spelling)
        return math.inf
    if not getattr(x, "free_symbols", None):
        return 1.0
    if getattr(x, "is_Matrix", False):  # its power multiplies out every entry (args hold only its shape and entries)
        return float(sum(_terms_bound(e) for e in x))
    if getattr(x, "is_Add", False):
        return sum(_terms_bound(a) for a in args)
    if getattr(x, "is_Pow", False) and args[1].is_Integer:
        n, m = abs(int(args[1])) if abs(args[1]) <= _MV_MAX_TERMS else math.inf, _terms_bound(args[0])
        if m <= 1:
            return 1.0
        return math.inf if n == math.inf or m > _MV_MAX_TERMS else float(math.comb(n + int(m) - 1, n))
    return math.prod(_terms_bound(a) for a in args) if args else 1.0


# sympy's evalf and simplify take time exponential in nesting: "\\cos(\\cos(...(x)))" with 8 levels against its tan
# twin took 10 s, 13 chained divisions "1/2/2/.../2" 2 s; real answers nest far less (benchmark golds: depth <= 7)
_MV_MAX_DEPTH = 10
_MV_MAX_CALL_DEPTH = 3  # applications of functions (sin, log, exp...) inside one another


def _nesting_ok(x, depth: int = 1, calls: int = 0) -> bool:
    from sympy import Function

    calls += isinstance(x, Function)
    if depth > _MV_MAX_DEPTH or calls > _MV_MAX_CALL_DEPTH:
        return False
    return all(isinstance(a, str) or _nesting_ok(a, depth + 1, calls) for a in getattr(x, "args", ()))


# math-verify compares relations also by sympy's simplify / trigsimp and as_set, whose time grows steeply with the
# degree of a power of a symbol in them ("y=\\sec(x)^{99}" vs "y=1": 12 s; "x^{999}=\\sinh(9)" vs an interval:
# minutes); answers that are relations keep low degrees
_MV_MAX_RELATION_DEGREE = 8


def _relations_ok(x) -> bool:
    from sympy import Pow
    from sympy.core.relational import Relational

    rels = [x] if isinstance(x, Relational) else list(x.atoms(Relational)) if hasattr(x, "atoms") else []
    return not any(p.exp.is_Number and abs(p.exp) > _MV_MAX_RELATION_DEGREE and p.base.free_symbols
                   for r in rels for p in r.atoms(Pow))


# sympy's simplify (math-verify's symbolic check) rewrites powers of trigonometric and hyperbolic functions of a
# symbol term by term, in time that grows steeply with their degree: "\\sec(k)^{99}" against "2" took over 12 s,
# "\\sinh(k)^{99}" 6 s, "(\\sin(k)+\\cos(k))^{99}" 10 s, "\\sin(k)^{40}\\cos(k)^{40}" 3 s, "(k+\\sin(k))^{32}" 1 s (degree 32: 0.2 s)
_MV_MAX_TRIG_DEGREE = 32


def _trig_degree(x) -> float:
    """Degree of ``x`` in the trigonometric / hyperbolic functions of its symbols: a product adds its factors'
    degrees, a power multiplies its base's by the exponent's size (and, raising a sum, by the number of terms it
    multiplies out to), a sum or any other node takes its largest."""
    from sympy.functions.elementary.hyperbolic import HyperbolicFunction
    from sympy.functions.elementary.trigonometric import TrigonometricFunction

    if not getattr(x, "free_symbols", None):
        return 0.0
    if isinstance(x, (TrigonometricFunction, HyperbolicFunction)):
        return max(1.0, _trig_degree(x.args[0]))
    args = getattr(x, "args", ())
    if getattr(x, "is_Pow", False):
        base = _trig_degree(args[0])
        if not base:
            return 0.0
        e = args[1]
        if not e.is_Number:  # sin(k)^k: no bound on the degree
            return math.inf
        n = abs(float(e))
        if getattr(args[0], "is_Add", False) and n > 1:  # a power of a sum multiplies out: degree times its terms
            n *= math.comb(int(n) + len(args[0].args) - 1, int(n)) if n <= _MV_MAX_TRIG_DEGREE else math.inf
        return base * n
    degrees = [_trig_degree(a) for a in args if not isinstance(a, str)]
    if not degrees:
        return 0.0
    return sum(degrees) if getattr(x, "is_Mul", False) else max(degrees)


def _mv_bounded(exprs: tuple) -> bool:
    try:
        return all(isinstance(x, str) or (_nesting_ok(x) and _log10_bound(x) <= _MV_MAX_DIGITS
                                          and _terms_bound(x) <= _MV_MAX_TERMS and _relations_ok(x)
                                          and _trig_degree(x) <= _MV_MAX_TRIG_DEGREE) for x in exprs)
    except Exception:
        return False


def _wordlike(s: str) -> bool:
    """Plain words ("yes", "cat"): math-verify reads them as products of symbols, so "yes"
    and "sey" would compare equal; such answers are compared as text only."""
    return "\\" not in s and not any(ch.isdigit() for ch in s) and bool(_WORDY_RE.search(s))


# math-verify tells two relations of different form apart by sympy's solve (after its cheap checks: same text, equal
# lhs - rhs, flipped sides), whose time explodes with the degree ("x^{30}+x=1" vs "x=1": over 20 s; from degree 5 it
# isolates CRootOf roots), with parameters in a cubic's formula, with radicals in inequalities, and with a symbol
# inside a function and outside it or inside two functions ("\\tan(x)=2x": 6 s, "y=\\tan(x)+x": 10 s,
# "3y^{2}=-e^{x}-\\sin(x)": 3 s). During our comparisons a relation is solved only within the bounds below (an
# equation in one symbol up to degree 4, else up to degree 2 in every symbol, each symbol bare or inside one
# function); otherwise the solve fails, which math-verify counts as not equal
_MV_MAX_SOLVE_DEGREE = 4
_MV_MAX_SOLVE_DEGREE_OTHER = 2
_SOLVE_GUARD = threading.local()  # .on: a comparison of ours is running in this thread
_SYMPY_SOLVE = None


def _solve_degree(x, s) -> tuple[float, int, bool, frozenset]:
    """(degree, radical index, ``s`` occurs bare, the functions of ``s``) of ``x`` in ``s``: x^{p/q} has degree p/q
    and index q (solve clears radicals by raising to the q-th power, so the polynomial it solves has degree
    degree · index), x^{-n} one more than n (it clears denominators); a function of ``s`` (``s`` in an exponent
    too) counts as a new unknown of degree 1."""
    if s not in getattr(x, "free_symbols", ()):
        return 0.0, 1, False, frozenset()
    if x == s:
        return 1.0, 1, True, frozenset()
    args = x.args
    if getattr(x, "is_Add", False) or getattr(x, "is_Mul", False):
        parts = [_solve_degree(a, s) for a in args]
        degree = (max if x.is_Add else sum)(p[0] for p in parts)
        return (degree, math.lcm(*(p[1] for p in parts)), any(p[2] for p in parts),
                frozenset().union(*(p[3] for p in parts)))
    if getattr(x, "is_Pow", False) and args[1].is_Rational:
        d, q, bare, funcs = _solve_degree(args[0], s)
        e = args[1]
        return d * abs(float(e)) + (1.0 if e.is_negative else 0.0), q * int(e.q), bare, funcs
    return 1.0, 1, False, frozenset([x])


def _solve_ok(rel) -> bool:
    """Whether sympy's solve of ``rel`` stays cheap (see the bounds above)."""
    sides = (rel.lhs, rel.rhs) if hasattr(rel, "lhs") else (rel,)
    symbols = rel.free_symbols
    one_equation = len(symbols) == 1 and getattr(rel, "rel_op", "==") == "=="
    for s in symbols:
        parts = [_solve_degree(side, s) for side in sides]
        funcs = frozenset().union(*(p[3] for p in parts))
        if len(funcs) > 1 or (funcs and any(p[2] for p in parts)):
            return False
        degree = max(p[0] for p in parts) * math.lcm(*(p[1] for p in parts))
        if degree > (_MV_MAX_SOLVE_DEGREE if one_equation else _MV_MAX_SOLVE_DEGREE_OTHER):
            return False
    return True


def _guarded_solve(f, *symbols, **flags):
    if getattr(_SOLVE_GUARD, "on", False) and not _solve_ok(f):
        raise ValueError("relation too costly to solve")
    return _SYMPY_SOLVE(f, *symbols, **flags)


# The static limits above catch the shapes known to make sympy slow, not every one: a fuzz of short answers still found
# comparisons of 12-20 s ("\\binom{99}{x}" vs "\\theta/3+7/99", "\\int_0^1 99\\cdot\\frac{e}{y}dx" vs itself with dy,
# "{\\sinh(-1-i)}^{9}" vs "\\pi-1"). So every math-verify call also runs under a wall-clock deadline, where a timer
# can interrupt it: in the main thread (where rewards are computed), with no other interval timer running. An answer
# that runs past it is not equal (and a parse that does, no parse). Off the main thread only the static limits hold.
_MV_DEADLINE_S = 1.0


class _MvOverrun(BaseException):
    """Raised by the deadline's timer inside sympy; a BaseException, so that the ``except Exception`` blocks in
    math-verify and sympy (which try the next rule) do not swallow it."""


_DEADLINE = threading.local()  # .armed: a deadline is running in this thread (nested calls keep the outer one)


# math-verify calls the deadline stopped and comparisons made only cheaply (`_GroupMatcher`, `_each_equivalent`):
# verdicts that may differ from a full comparison's, so the reward mixer logs how many each step had
_CUT_SHORT = [0]


def comparisons_cut_short() -> int:
    """How many answer comparisons / parses in this process so far were cut short (deadline) or made cheaply."""
    return _CUT_SHORT[0]


_MV_OVERRUNS = 0  # deadlines run out so far: a result computed while one ran out is load-dependent, not cached


def _on_overrun(signum, frame):
    # a SIGALRM already on its way when the block ends (the timer ran out as it was stopped) is handled after the
    # block, at the latest when signal.signal restores the previous handler: there it must do nothing
    if getattr(_DEADLINE, "armed", False):
        global _MV_OVERRUNS
        _MV_OVERRUNS += 1
        _CUT_SHORT[0] += 1
        raise _MvOverrun()


class _Uncached(BaseException):
    def __init__(self, result):
        self.result = result


# how many times one input may run out of its deadline before that result is cached after all: a retry for a busy
# second, but no 1 s per call for ever (a vote calls the parse of one answer many times; a CI run under load took
# 167 s for one group of 15 slow answers when no overrun was ever cached)
_OVERRUN_RETRIES = 2


def _cached_unless_overrun(maxsize: int):
    """``functools.lru_cache`` that keeps no result computed while a math-verify deadline ran out (in the call or a
    call it made), until the same input has run out ``_OVERRUN_RETRIES`` times: how far sympy gets in 1 s depends on
    the machine's load, so an answer that once ran out on a busy machine would otherwise read as unparsable, or
    unequal to its gold, for the rest of the process; one that keeps running out is as costly as it looks."""

    def wrap(f):
        overran: collections.OrderedDict = collections.OrderedDict()  # args -> overruns so far (bounded, oldest out)

        @functools.lru_cache(maxsize=maxsize)
        def cached(*args):
            before = _MV_OVERRUNS
            result = f(*args)
            if _MV_OVERRUNS != before:
                count = overran.pop(args, 0) + 1
                if count < _OVERRUN_RETRIES:
                    overran[args] = count
                    if len(overran) > maxsize:
                        overran.popitem(last=False)
                    raise _Uncached(result)  # lru_cache keeps no exception
            return result

        @functools.wraps(f)
        def call(*args):
            try:
                return cached(*args)
            except _Uncached as e:
                return e.result

        call.cache_clear, call.cache_info = cached.cache_clear, cached.cache_info
        return call

    return wrap


class _mv_deadline:
    """Context manager: raise ``_MvOverrun`` in the block after ``_MV_DEADLINE_S`` seconds, where a timer can."""

    def __enter__(self):
        self.armed = False
        if getattr(_DEADLINE, "armed", False) or threading.current_thread() is not threading.main_thread():
            return self
        try:
            # someone else's timer, or a handler installed outside Python (getsignal None: it could not be put back)
            if signal.getitimer(signal.ITIMER_REAL)[0] > 0 or signal.getsignal(signal.SIGALRM) is None:
                return self
            self.previous = signal.signal(signal.SIGALRM, _on_overrun)
        except (ValueError, OSError, AttributeError):  # no SIGALRM (Windows), or not settable here
            return self
        self.armed = _DEADLINE.armed = True
        try:
            signal.setitimer(signal.ITIMER_REAL, _MV_DEADLINE_S)
        except _MvOverrun:  # ran out before the block began, where no __exit__ would restore the handler
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        if self.armed:
            _DEADLINE.armed = False  # first: from here the handler does nothing (see _on_overrun)
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False


_MV = None


class _DropNoTimeoutWarning:
    """Drops math-verify's "Timeout is disabled ... to prevent code getting stuck" warning. mmevo calls it with no
    timeout on purpose (its signal timer only works in the main thread) and bounds the cost itself (`_mv_safe`,
    `_mv_bounded`, the solve guard), so the warning told every user of `train` / `evolve` of a risk that is handled."""

    @staticmethod
    def filter(record) -> bool:
        return not str(record.msg).startswith("Timeout is disabled")


def _quiet_no_timeout_warning() -> None:
    import logging

    for name in ("math_verify.parser", "math_verify.grader"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropNoTimeoutWarning) for f in logger.filters):
            logger.addFilter(_DropNoTimeoutWarning())


def _mv():
    global _MV, _SYMPY_SOLVE
    if _MV is None:
        import math_verify
        import math_verify.grader as grader
        import sympy

        _quiet_no_timeout_warning()

        # only our own calls (the flag set in _mv_equal) are guarded; other users of math-verify see sympy's solve
        if getattr(grader, "solve", None) is sympy.solve:
            _SYMPY_SOLVE = sympy.solve
            grader.solve = _guarded_solve
        # a first parse and comparison import and build what they need (the LaTeX grammar, sympy's simplify): seconds
        # that must not count against the first answer's deadline
        math_verify.verify(math_verify.parse("$\\frac{x^2}{2}$", parsing_timeout=None),
                           math_verify.parse("$x^2/2$", parsing_timeout=None), timeout_seconds=None)
        _MV = math_verify
    return _MV


@functools.lru_cache(maxsize=1)
def _latex_only() -> tuple:
    from math_verify import LatexExtractionConfig

    return (LatexExtractionConfig(),)


# a number in an answer, counted to decide whether math-verify's plain-expression reading may stand in for a failed
# LaTeX parse (`_mv_parse`)
_NUMBER_RUN_RE = re.compile(r"\d+(?:\.\d+)?")
# ... nor for one bounding a range or excluded: "\\ge 2", "\\neq 2", "2 \\text{ or more}", "2+" were read as 2
_BOUND_RE = re.compile(r"[<>≤≥≠±∓]|\+\s*\}?\s*$|\\(?:[lg]eq?(?:slant)?|[lg]t|neq?|pm|mp|ll|gg)(?![A-Za-z])|"
                       r"\b(?:more|less|least|most|fewer|greater|smaller|larger|above|below|over|under|up\s+to)\b",
                       re.IGNORECASE)


# an answer that leads with its value, bare or as "x = value", maybe with a unit, then justifies it in an aside: a
# parenthesis holding a word, an equation or a condition ("x = 2 (x > 0)"), or a "since" / "because" clause
# ("5 \\text{ (since } 2+3=5)", "x=3 (since x>0)", "48 m^2 (approx.)"); not "1|2", whose plain-expression reading is its
# first number
_LEADING_VALUE_RE = re.compile(
    r"\s*(?:[A-Za-z](?:_\{?\w+\}?)?\s*=\s*)?(-?\d+(?:\.\d+)?)\s*(?:[A-Za-z]+\s*(?:\^\s*\{?\s*\d\s*\}?)?\s*)?"
    r"(?P<aside>\((?=[^()]*(?:[A-Za-z]{2}|=|[<>]|\\(?:[lg]e|neq?)(?![A-Za-z])))(?:[^()]|\([^()]*\))*\)\s*\.?\s*$|"
    r"(?:since|because)\b)", re.IGNORECASE)
# ... or closes a derivation with it, its last line continuing the one before: "A &= 3 \\cdot 4 \\\\ &= 12" (`_unwrap`
# leaves "\\ &= 12" in an environment, ", = 12" outside one), not "x &= 1 \\\\ x &= 2", two lines of candidates
_CLOSING_VALUE_RE = re.compile(r"(?:\\|,)\s*&?\s*=\s*(-?\d+(?:\.\d+)?)\s*(?:\\end\s*\{\w+\*?\}\s*)*\.?\s*$")
# words offering another candidate: "2 (1 or 2)" leads and ends with 2 but names 1 too
_HEDGE_WORD_RE = re.compile(r"\b(?:or|either|maybe|perhaps|possibly|between|vs)\b", re.IGNORECASE)
# a relation whose left side is a variable states a condition ("since x>0", "n \\neq 0"), not a bound of the answer
_CONDITION_RE = re.compile(r"[A-Za-z}]\s*(?:[<>≤≥≠]|\\(?:[lg]eq?(?:slant)?|[lg]t|neq?)(?![A-Za-z]))")


_RESULT_RE = re.compile(r"=\s*(-?\d+(?:\.\d+)?)")
# a condition on a variable with its bound ("x > 0", "n \\neq 3"): its number is no candidate
_CONDITION_BOUND_RE = re.compile(
    r"[A-Za-z}]\s*(?:[<>]=?|\\(?:[lg]eq?(?:slant)?|[lg]t|neq?)(?![A-Za-z]))\s*-?\d+(?:\.\d+)?")


# sums, differences, products and quotients of plain numbers ("2 + 3", "3 \\times 4"): a derivation when they come to
# the stated value; no powers, which would have to be evaluated
_ARITHMETIC_RE = re.compile(
    r"-?\d+(?:\.\d+)?(?:\s*(?:[-+*/]|\\(?:times|cdot|div)(?![A-Za-z]))\s*-?\d+(?:\.\d+)?)+")
_ARITHMETIC_TOKEN_RE = re.compile(r"(\d+(?:\.\d+)?)|([-+*/]|\\times|\\cdot|\\div)")


def _arithmetic_value(run: str) -> fractions.Fraction | None:
    """Exact value of an `_ARITHMETIC_RE` run, products and quotients before sums; None on a division by zero."""
    total, sign, term, op, negate, expect_number = fractions.Fraction(0), 1, None, None, False, True
    for number, operator in _ARITHMETIC_TOKEN_RE.findall(run):
        if number:
            x = -fractions.Fraction(number) if negate else fractions.Fraction(number)
            if term is None:
                term = x
            elif op == "*":
                term *= x
            elif x == 0:
                return None
            else:
                term /= x
            negate, expect_number = False, False
        elif expect_number:  # a sign before a number: "2 - -3"
            negate ^= operator == "-"
        elif operator in "+-":
            total, sign, term, expect_number = total + sign * term, (1 if operator == "+" else -1), None, True
        else:
            op, expect_number = ("/" if operator in ("/", "\\div") else "*"), True
    return None if term is None else total + sign * term


# a name's index ("x_1", "x_{12}"), no value; a small factorial ("3!"), a value
_SUBSCRIPT_RE = re.compile(r"(?<=[A-Za-z}])_\s*(?:\{\s*\w+\s*\}|\w)")
_FACTORIAL_RE = re.compile(r"(?<![\d.])(\d{1,2})\s*!")


def _aside_derives(s: str, m: re.Match) -> bool:
    """Whether the aside of a `_LEADING_VALUE_RE` match ``m`` gives no result but the value ("= 3") and each of its
    numbers sits in a condition ("x > 0"), a name's index ("x_1"), a derivation of the value ("since 2 + 3 = 5",
    "3 \\times 4", "3! = 6") or is the value again ("Mg^{2+}"): not "2 (and 3)", "2 (another root: 3)",
    "2 (x > 0; else 3)", "2 (also 3; 1+1=2)", which name a second value in words."""
    value, tail = fractions.Fraction(m.group(1)), _CONDITION_BOUND_RE.sub(" ", s[m.end(1):])
    if any(fractions.Fraction(r) != value for r in _RESULT_RE.findall(tail)):
        return False
    aside = _SUBSCRIPT_RE.sub(" ", _CONDITION_BOUND_RE.sub(" ", s[m.start("aside"):]))
    aside = _FACTORIAL_RE.sub(lambda f: str(math.factorial(int(f.group(1)))), aside)
    aside = _ARITHMETIC_RE.sub(lambda r: " " if _arithmetic_value(r.group()) == value else r.group(), aside)
    # left: the results (each the value, checked above) and restatements ("Mg^{2+}", "approx. 6.0")
    return all(fractions.Fraction(x) == value for x in _NUMBER_RUN_RE.findall(aside))


def _restates_one_value(s: str, value) -> bool:
    """True when the number math-verify's plain-expression reading took from ``s`` is the value ``s`` states before
    an aside justifying it or closes its derivation with, and ``s`` names no bound nor other candidate: the other
    numbers then justify that value ("12 (3 \\times 4 = 12)") instead of offering others ("1 (or 2)", "1 \\dots 2",
    "2 (1 or 2)")."""
    try:
        v = float(value)
    except Exception:
        return False
    if _BOUND_RE.search(_CONDITION_RE.sub(" ", s)) or _HEDGE_WORD_RE.search(s):
        return False
    lead = _LEADING_VALUE_RE.match(s)
    stated = [m.group(1) for m in (lead if lead and _aside_derives(s, lead) else None, _CLOSING_VALUE_RE.search(s)) if m]
    return any(math.isclose(float(x), v, rel_tol=1e-9, abs_tol=1e-12) for x in stated)


def _stated_lead(s: str) -> str | None:
    """The value ``s`` leads with before an aside (`_LEADING_VALUE_RE`) that derives it (`_aside_derives`) when ``s``
    offers no bound nor other candidate (`_restates_one_value`), else None."""
    m = _LEADING_VALUE_RE.match(s)
    return m.group(1) if m is not None and _restates_one_value(s, m.group(1)) else None


# a number in scientific notation ("1e4", "2.5e-3", "1E6"), as `_to_number` reads it: math-verify reads a lower-case
# "e" as Euler's number ("1e4" was 4e, "2.5e-3" was 2.5e - 3, so "1e4" matched 10000 but not "10^4"), and an upper-case
# one as the exponent. Not "3e", "e^2" or "2e^{3}" (no exponent digits: Euler's e), nor inside a name ("x_1e5", "a1e3");
# exponents up to 4 digits (sympy computes 10^{k} in full as it parses)
_SCIENTIFIC_RE = re.compile(r"(?<![\w.\\])(\d+\.?\d*|\.\d+)[eE]([+-]?\d{1,4})(?![\w.])")


def _scientific_as_latex(s: str) -> str:
    """``s`` with each number in scientific notation spelt as LaTeX: "2.5e-3" is "2.5\\times10^{-3}"."""
    return _SCIENTIFIC_RE.sub(lambda m: f"{m.group(1)}\\times10^{{{int(m.group(2))}}}", s) if "e" in s.lower() else s


@_cached_unless_overrun(maxsize=65536)
def _mv_parse(s: str) -> tuple:
    """math-verify parse of ``$s$``; wrapping in ``$`` is what makes it parse reliably. Empty when it fails or
    its value is too big to evaluate (`_MV_MAX_DIGITS`).

    When the LaTeX does not parse, math-verify's default falls back to the last number it finds in the text, a
    reading meant for whole responses: in one answer it read the hedges "1 \\lor 2", "1 \\text{ (or } 2)",
    "1 \\dots 2" and "1 \\text{ and/or } 2" as 2. That fallback is kept only for an answer holding one number,
    where it cannot pick among candidates ("Answer: 80^\\circ", "5 (approx.)", "\\approx 3.14"), or for one whose other
    numbers restate the value it reads (`_restates_one_value`): right answers with their working, which it read right
    before this rule ("5 \\text{ (since } 2+3=5)", "A &= 3 \\cdot 4 \\\\ &= 12")."""
    mv = _mv()
    s = _scientific_as_latex(s)
    try:
        with _mv_deadline():
            return _mv_parse_within_deadline(mv, s)
    except _MvOverrun:
        return ()


def _mv_parse_within_deadline(mv, s: str) -> tuple:
    try:
        lead = _stated_lead(s)
        # a value then its aside in words: the words, unwrapped from their \\text, parse as a product of symbols
        # ("4 (n is a positive integer)" was 4·a·e·g·i·...), so the value is read alone
        parsed = tuple(mv.parse(f"${s if lead is None else lead}$", extraction_config=_latex_only(),
                                parsing_timeout=None))
        if all(isinstance(x, str) for x in parsed):
            numbers = len(_NUMBER_RUN_RE.findall(s))
            if numbers == 1 and not _BOUND_RE.search(s):
                parsed = tuple(mv.parse(f"${s}$", parsing_timeout=None))
            elif numbers > 1:
                full = tuple(mv.parse(f"${s}$", parsing_timeout=None))
                if full and not isinstance(full[0], str) and _restates_one_value(s, full[0]):
                    parsed = full
    except Exception:
        return ()
    return parsed if _mv_bounded(parsed) else ()  # parsing does not evaluate; later steps would


# math-verify finds two closed-form numbers equal only when their values agree to within its float rounding (6
# decimals) or its 15-digit numeric check; values further apart than this cannot match, so verify is not called
_VALUE_ABS_TOL = 1e-5
_VALUE_REL_TOL = 1e-9


@_cached_unless_overrun(maxsize=65536)
def _mv_values(s: str) -> tuple | None:
    """The numeric value (an mpmath complex) of each sympy object in math-verify's parse of ``s``, when every one is
    a closed-form number; None when any is of another kind (free symbols, relations, sets, tuples, matrices,
    percentages, which math-verify compares by other rules ("50\\%" = "50"), or a value that does not evaluate to
    a finite number). mpmath, not a Python complex: values past 1e308 ((1+\\sqrt{2})^{9999}) overflowed to inf and
    were sent to sympy, whose comparison of such powers takes seconds."""
    import mpmath
    from sympy import Expr, Float, UnevaluatedExpr
    from sympy.matrices.expressions import MatrixExpr

    values = []
    for x in _mv_parse(s):
        if isinstance(x, str):
            continue
        if not isinstance(x, Expr) or isinstance(x, MatrixExpr) or x.free_symbols or x.has(UnevaluatedExpr):
            return None
        try:
            with _mv_deadline():
                v = mpmath.mpc(*(mpmath.mpf(Float(part, 20)._mpf_) for part in x.evalf(20).as_real_imag()))
        except (Exception, _MvOverrun):
            return None
        if not mpmath.isfinite(v):
            return None
        values.append(v)
    return tuple(values) if values else None


def _values_apart(gold: str, pred: str) -> bool:
    """True when math-verify cannot find ``gold`` and ``pred`` equal: both parse to closed-form numbers only and
    every pair of their values differs by more than the tolerances above (equal parsed strings, which math-verify
    also accepts, parse to equal values). Lets a group of many distinct answers skip most sympy comparisons."""
    vg, vp = _mv_values(gold), _mv_values(pred)
    if vg is None or vp is None:
        return False
    return all(abs(a - b) > _VALUE_ABS_TOL + _VALUE_REL_TOL * max(abs(a), abs(b)) for a in vg for b in vp)


def _is_interval_set(x) -> bool:
    """Whether a parsed gold is unmistakably a set of reals: a union, or an interval with a closed or infinite end.
    A finite open "(1, 2)" is not: it is also how a point is written, and "1 < x < 2" is no answer for a point."""
    from sympy import Interval, Union

    if isinstance(x, Union):
        return all(isinstance(a, Interval) for a in x.args)
    if isinstance(x, Interval):
        return not (x.left_open and x.right_open and x.start.is_finite and x.end.is_finite)
    return False


_OR_WORD_RE = re.compile(r"\bor\b", re.IGNORECASE)
# sympy's as_set of an inequality solves it: a degree-8 polynomial or |x^8 - ...| took 1-2 s per comparison
_MV_MAX_SET_DEGREE = 4


def _is_inequality(x) -> bool:
    """An inequality or a chain of them ("1 < x < 2" is an And), what math-verify may read as its solution set."""
    from sympy import And
    from sympy.core.relational import Equality, Relational

    if isinstance(x, And):
        return all(_is_inequality(a) for a in x.args)
    return isinstance(x, Relational) and not isinstance(x, Equality)


def _cheap_as_set(rel) -> bool:
    """Whether the solution set of an inequality (or a chain of them) in one variable is cheap to take: polynomial
    sides up to `_MV_MAX_SET_DEGREE` (radicals counted as `_solve_ok` counts them: the degree once they are cleared),
    or the absolute value of a polynomial up to degree 2."""
    from sympy import Abs, And

    if isinstance(rel, And):
        return all(_cheap_as_set(r) for r in rel.args)
    symbols = getattr(rel, "free_symbols", set())
    if len(symbols) != 1 or not hasattr(rel, "lhs"):
        return False
    (x,) = symbols

    def degree_of(e) -> float:  # as _solve_ok counts it: x^{1/3} + x^{1/5} is solved at degree 1/3 * lcm(3, 5) = 5
        degree, index, _, funcs = _solve_degree(e, x)
        return math.inf if funcs else degree * index

    sides = [_solve_degree(side, x) for side in (rel.lhs, rel.rhs)]
    degree = max(p[0] for p in sides) * math.lcm(*(p[1] for p in sides))  # radicals of both sides cleared together
    funcs = frozenset().union(*(p[3] for p in sides))
    return degree <= _MV_MAX_SET_DEGREE and all(isinstance(f, Abs) and degree_of(f.args[0]) <= 2 for f in funcs)


def _or_inequalities_as_set(text: str, parsed: tuple) -> tuple:
    """``parsed`` with inequalities in one variable joined by "or" ("x < 1 or x > 2", `_unwrap`'s spelling of
    "\\lor" / "\\text{ or }") read as the union of their solution sets, which math-verify left a list of relations that
    matched no interval. Not with a comma (a comma list may be a system, whose set is the intersection), nor with an
    equation among them ("x = 1 or x = 2" lists values, as math-verify compares them)."""
    from sympy import FiniteSet, Union

    if not parsed or "," in text or not _OR_WORD_RE.search(text) or not isinstance(parsed[0], FiniteSet):
        return parsed
    parts = list(parsed[0].args)
    symbols = set().union(*(getattr(r, "free_symbols", set()) for r in parts))
    if len(parts) < 2 or len(symbols) != 1 or not all(_is_inequality(r) and _cheap_as_set(r) for r in parts):
        return parsed
    try:
        return (Union(*(r.as_set() for r in parts)),) + parsed[1:]
    except Exception:
        return parsed


def _mv_equal(pred: str, gold: str) -> bool:
    if not (_mv_safe(pred) and _mv_safe(gold)):
        return False
    g = _or_inequalities_as_set(gold, _mv_parse(gold))
    p = _or_inequalities_as_set(pred, _mv_parse(pred))
    if not g or not p:
        return False
    if _values_apart(gold, pred):
        return False
    # math-verify reads a predicted inequality as its solution set only for a gold inequality: the gold "x > 3"
    # accepted "(3, \\infty)" but the gold "[2, 5)" refused "2 \\le x < 5" (and scored it 0); allowed here for a gold
    # that is unmistakably an interval or a union of them
    as_set = any(_is_interval_set(x) for x in g) and all(_cheap_as_set(x) for x in p if _is_inequality(x))
    _SOLVE_GUARD.on = True
    try:
        with _mv_deadline():
            return bool(_mv().verify(list(g), list(p), timeout_seconds=None, allow_set_relation_comp=as_set))
    except (Exception, _MvOverrun):
        return False
    finally:
        _SOLVE_GUARD.on = False


# ----------------------------------------------------------------------------- equivalence


# a count written with an explicit sign ("+2", "2+", "2^{+}", "-2", "2-", "2^{-}"; `_light` spellings): an ion's charge
# spells it any of these ways, and two spellings of one signed count are one answer. Against a bare number, a sign in a
# superscript is a charge ("2^{+}" is +2, so 2; "2^{-}" is -2), never written for a bound, while a trailing plain sign
# is the bound "2 or more" / "2 or less" (`_BOUND_RE`) and matches no bare number
_SIGNED_COUNT_RE = re.compile(r"([+-])(\d+(?:\.\d+)?)|(\d+(?:\.\d+)?)(?:\^\{?([+-])\}?|([+-]))")


def _signed_count(light: str) -> tuple[float, str] | None:
    """(signed count, where its sign is: "before", "superscript" or "after") of a signed-count spelling, else None."""
    m = _SIGNED_COUNT_RE.fullmatch(light)
    if m is None:
        return None
    if m.group(1):
        return float(m.group(1) + m.group(2)), "before"
    return float((m.group(4) or m.group(5)) + m.group(3)), "superscript" if m.group(4) else "after"


def _signed_counts_equal(lp: str, lg: str) -> bool | None:
    """Verdict on two `_light` spellings when either is a count with its sign after it ("2+", "2^{-}"), else None
    (ordinary numbers, "+2" among them, are compared as numbers)."""
    cp, cg = _signed_count(lp), _signed_count(lg)
    if not any(c is not None and c[1] != "before" for c in (cp, cg)):
        return None
    if cp is not None and cg is not None:
        return cp[0] == cg[0]
    count, sign_at = cp or cg
    number = _to_number(lg if cp is not None else lp)
    return sign_at == "superscript" and number is not None and number == count


# a list of counts some of which carry a sign after them ("2^{+}, 3^{+}", "\\{2+, 3-\\}"; `_light` spellings)
_SIGNED_LIST_RE = re.compile(r"(?:\\\{)?([^{}]*(?:\{[+-]\}[^{}]*)*)(?:\\\})?")


def _marked_items(light: str) -> list[tuple[float, bool]] | None:
    """(count, whether a sign follows it) of each item of a comma list of numbers and signed counts, else None."""
    m = _SIGNED_LIST_RE.fullmatch(light)
    items = m.group(1).split(",") if m else []
    if len(items) < 2:
        return None
    read = []
    for item in items:
        count = _signed_count(item)
        if count is not None:
            read.append((count[0], count[1] != "before"))
        elif (number := _to_number(item)) is not None:
            read.append((number, False))
        else:
            return None
    return read


def _signed_lists_equal(lp: str, lg: str) -> bool | None:
    """Verdict on two `_light` spellings when either is a list holding a count with its sign after it ("2^{+}, 3^{+}"),
    else None. Such a list matches only the same counts, each marked alike, in any order and spelling ("3+, 2^+"); not
    the bare numbers "2, 3": a list of marked values reads as one-sided limit points or a set of charges, not numbers
    (math-verify reads no "2^{+}", so a spelling or an order of one list did not match another). A lone "2^{+}" is
    still the charge +2, which is 2 (`_signed_counts_equal`)."""
    ip, ig = _marked_items(lp), _marked_items(lg)
    if not any(items is not None and any(marked for _, marked in items) for items in (ip, ig)):
        return None
    return ip is not None and ig is not None and sorted(ip) == sorted(ig)


# "a \\approx b": a value with its approximation ("\\frac{20}{3} \\approx 6.67", "x \\approx 2", "\\approx 3.14"). Its
# sides name one answer only when they agree to the approximation's last digit: "1 \\approx 2" is a hedge between two
# values (math-verify read its left side, right on the gold 1)
_APPROX_RE = re.compile(r"\\(?:approx(?:eq)?|simeq)(?![A-Za-z])")
# a name before the first "\\approx" or "=": "x", "AB", "m\\angle ABC", "x_{1}"
# (longest first: "m" alone would end the name of "m\\angle A = ...")
_NAMED_SIDE_RE = re.compile(r"\s*(?:m\s*\\angle\s*[A-Za-z]+|\\angle\s*[A-Za-z]+|[A-Za-z]+)(?:_\{?\w+\}?)?\s*=?\s*")
_DECIMALS_RE = re.compile(r"-?\d*\.?(\d*)")


_MAX_APPROX_SIDES = 4


def _approximate_sides(u: str) -> tuple[str, ...] | None:
    """The sides of an `_unwrap`ped answer "a \\approx b" that state its value, each alone a reading of it: both when
    they agree; none (a hedge) when two numbers disagree, a number stands beside a side that is none ("1 \\approx
    2x") or more than `_MAX_APPROX_SIDES` sides are chained; None when ``u`` has no "\\approx", a side is a list ("1
    \\approx 1.0, 2"), no side is a number or a side is one math-verify should not parse (`_mv_safe`)."""
    if not _APPROX_RE.search(u):
        return None
    sides = [t.strip() for t in _APPROX_RE.split(u)]
    if len(sides) > _MAX_APPROX_SIDES:  # read whole, math-verify took the first of "1 \\approx 2 \\approx 3 ..."
        return ()
    if not all(_mv_safe(t) for t in sides):  # parsed alone below: same guards
        return None
    if not sides[0] or (_NAMED_SIDE_RE.fullmatch(sides[0]) and _mv_values(sides[0]) is None):  # not "e", "\\pi"
        sides = sides[1:]
    elif "=" in sides[0] and not _BOUND_RE.search(sides[0]):  # "\\overline{AB} = 5\\sqrt{3}": the value after "="
        sides[0] = sides[0].rsplit("=", 1)[1].strip()
    sides = [t for t in sides if t]
    if len(sides) < 2:
        return tuple(sides)
    if any(_LIST_SEPARATOR_RE.search(t) for t in sides):  # "1 \\approx 1.0, 2": a list, compared whole
        return None
    readings = [_side_reading(t) for t in sides]
    numeric = [v is not None and len(v) == 1 for v, _ in readings]
    if not all(numeric):  # a number beside no number cannot be checked: whole, "1 \\approx 2x" was read as 1
        return () if any(numeric) else None
    # every pair, not only neighbours: rounding twice drifts ("1.45 \\approx 1.5 \\approx 2", and 1.45 is not about 2)
    for (va, a), (vb, b) in itertools.combinations(readings, 2):
        if not _approximates(va[0], vb[0], a, b):
            return ()
    return tuple(sides)


_PERCENT_SIDE_RE = re.compile(r"(.*?)\s*\\?%")
_BRACED_SIDE_RE = re.compile(r"\{([^{}]*)\}")
_PLAIN_DECIMAL_RE = re.compile(r"-?(?:\d+\.?\d*|\.\d+)")


def _side_reading(side: str) -> tuple[tuple | None, str]:
    """(`_mv_values`, spelling whose decimals `_approximates` counts) of one side of an approximation: a percentage
    is its fraction ("33.3\\%" is 0.333, which math-verify leaves unvalued), a braced group its content ("{2}", which
    it reads as a set)."""
    if m := _BRACED_SIDE_RE.fullmatch(side):
        side = m.group(1).strip()
    if (m := _PERCENT_SIDE_RE.fullmatch(side)) and (values := _mv_values(m.group(1))) is not None:
        number = m.group(1).strip()
        spelled = str(decimal.Decimal(number).scaleb(-2)) if _PLAIN_DECIMAL_RE.fullmatch(number) else side
        return tuple(v / 100 for v in values), spelled
    return _mv_values(side), side


def _approximates(va, vb, a: str, b: str) -> bool:
    """Whether two values agree as a value and its decimal (the right side first) rounded half up to its last digit,
    or truncated to a decimal place: 8.66 and 9 both approximate 5\\sqrt{3}, a truncated 6.66 approximates 20/3; 4
    does not approximate \\pi, 2 does not approximate 2.5, nor 1 approximate 2. A complex value is compared whole (the
    rounding below compares magnitudes: "i \\approx 1" and "\\sqrt{-4} \\approx 2" agreed)."""
    import mpmath

    if va.imag or vb.imag:
        return abs(va - vb) <= 1e-4 * max(abs(va), abs(vb))
    for exact, value, approx in ((va, vb, b), (vb, va, a)):
        if m := _DECIMALS_RE.fullmatch(approx):
            if (exact.real < 0) != (value.real < 0) and value != 0:
                return False
            places = len(m.group(1))
            unit, excess = mpmath.mpf(10) ** -places, abs(value) - abs(exact)
            rounded = -unit / 2 < excess <= unit / 2 * (1 + 1e-9)  # half up: 2.5 is 3, not 2
            return rounded or (places > 0 and -unit < excess <= 0)  # or truncated to a decimal place
    return abs(va - vb) <= 1e-4 * max(abs(va), abs(vb))


# an angle in radians may name its unit: "\\frac{\\pi}{6} \\text{ rad}", "\\pi/6 radians"
_RADIAN_TAIL_RE = re.compile(r"\s*\b(?:rad|radians?)\s*\.?\s*$", re.IGNORECASE)


def _degrees_stated(raw: str) -> float | None:
    """The number of degrees an answer states with a degree mark ("30^\\circ", "30°", "30 degrees"), else None."""
    if not _DEGREE_RE.search(raw):
        return None
    return _to_number(_light(raw))  # cached, unlike a light spelling of ``unwrapped``


def _radians_of_pi(raw: str, unwrapped: str) -> float | None:
    """The angle in radians of an answer spelled with pi and no degree mark ("\\frac{\\pi}{6}", "2\\pi/3 rad"),
    else None."""
    if "\\pi" not in unwrapped or _DEGREE_RE.search(raw):
        return None
    values = _mv_values(_RADIAN_TAIL_RE.sub("", unwrapped)) if _mv_safe(unwrapped) else None
    if values is None or len(values) != 1 or values[0].imag:
        return None
    return float(values[0].real)


def _degrees_equal_radians(pred: str, gold: str, up: str, ug: str) -> bool:
    """A gold angle with a degree mark and a predicted multiple of pi are one angle when they agree (the gold 30° takes
    pi/6). Only where the gold states degrees: a bare 30 against pi/6 stays apart (the unit is not known here, and a
    false match rewards a wrong answer), as does a predicted 45° against the gold pi/4, whose question may ask for
    radians or for no angle at all. A vote compares both ways, so there "30°" and "pi/6" are one answer."""
    degrees = _degrees_stated(gold)
    radians = None if degrees is None else _radians_of_pi(pred, up)
    return radians is not None and math.isclose(degrees, math.degrees(radians), rel_tol=1e-9, abs_tol=1e-9)


@_cached_unless_overrun(maxsize=65536)
def _equivalent(pred: str, gold: str) -> bool:
    lp, lg = _light(pred), _light(gold)
    if not lp or not lg or _units_differ(pred, gold):
        return False
    if lp == lg:
        return True
    if (signed := _signed_counts_equal(lp, lg)) is not None:
        return signed
    if (signed := _signed_lists_equal(lp, lg)) is not None:
        return signed
    np_, ng = _to_number(lp), _to_number(lg)
    if np_ is not None and ng is not None:
        return _numbers_close(np_, ng, _exact_integer(lp), _exact_integer(lg))
    up, ug = _unwrap(pred), _unwrap(gold)
    sides_p, sides_g = _approximate_sides(up), _approximate_sides(ug)
    if sides_p is not None or sides_g is not None:
        return any(_equivalent(p, g) for p in (sides_p if sides_p is not None else (pred,))
                   for g in (sides_g if sides_g is not None else (gold,)))
    if _wordlike(up) or _wordlike(ug):
        return False
    return _mv_equal(up, ug) or _degrees_equal_radians(pred, gold, up, ug)


def _each_equivalent(pairs: Sequence[tuple[str, str]]):
    """`_equivalent` of each (pred, gold) pair in turn, lazily; once one took `_SLOW_COMPARISON_S` or more, the rest
    are compared cheaply. One answer against each option: a costly text ("(A) \\binom{99}{x}") is as slow against
    the next option, and 5 options made one comparison take 5 s."""
    slow = False
    for pred, gold in pairs:
        if slow:
            _CUT_SHORT[0] += 1
            yield _cheaply_equivalent(pred, gold)
            continue
        start = time.monotonic()
        equal = _equivalent(pred, gold)
        slow = time.monotonic() - start >= _SLOW_COMPARISON_S
        yield equal


def _cheaply_equivalent(pred: str, gold: str) -> bool:
    """`_equivalent`'s steps before math-verify: equal light spellings or equal numbers."""
    return _value_keys_equal(_value_key(pred), _value_key(gold))


def _answer_text(x, name: str) -> str:
    """``x`` as answer text: a string, or a finite real number (numpy / torch scalars and 0-d arrays too) in its
    decimal spelling. Anything else is refused: its str() would be graded as text (a gold ``['4']`` matched "4", a
    tensor read "tensor(4)", ``True`` matched nothing, a NaN gold (an empty table cell) matched "nan")."""
    if isinstance(x, str):
        return x
    if getattr(x, "ndim", None) == 0 and hasattr(x, "item"):
        x = x.item()
    if isinstance(x, (numbers.Real, decimal.Decimal)) and not isinstance(x, bool):
        if isinstance(x, numbers.Rational) or (x.is_finite() if isinstance(x, decimal.Decimal) else math.isfinite(x)):
            return str(x)
        raise ValueError(f"{name} must be a finite number, got {x!r}")
    raise TypeError(f"{name} must be answer text or a real number, got {type(x).__name__} {repr(x)[:60]}")


def refuse_text_for_list(name: str, value) -> None:
    """A ValueError naming ``name`` when one text is given where a list of per-sample values belongs: a str is a
    sequence of its characters, so "\\boxed{12}" for ``responses`` became nine one-character responses (and a gold
    "12" the golds "1" and "2"), each scored without complaint."""
    if isinstance(value, (str, bytes)):
        raise ValueError(f"{name} must be a list with one entry per sample, got the text {value[:60]!r}")


def refuse_text_for_choices(name: str, choices) -> None:
    """A ValueError naming ``name`` when one text is given for a question's list of options: its characters became
    the options ("10 12" read "B" as the option "0"), so a right letter scored 0 and a wrong one 1."""
    if isinstance(choices, (str, bytes)):
        raise ValueError(f"{name} must be a list of options or None, got the text {choices[:60]!r}")


# an option's label before a value: "(A) 2\\sqrt{3}", "\\text{(A) } 2\\sqrt{3}", "A. 5", "Option B: 5"
_OPTION_LABEL_RE = re.compile(
    r"\s*(?:(?i:option|choice)\s*)?(?:\(\s*[A-Z]\s*\)\s*[.:]?\s*|[A-Z](?:[.)]|\s*:)\s+)(?=\S)")


def _without_option_label(text: str) -> str:
    """``text`` without an option's label before its value, on a question without options: the label names nothing
    there, and the value decides. A label alone ("(A)") is left, no value; so is a text naming another label after it
    ("(A) 2 (B) 3", two options' values)."""
    s = _drop_text_wrappers(text)
    m = _OPTION_LABEL_RE.match(s)
    if m is None:
        return text
    rest = s[m.end():]
    return text if _OPTION_LABEL_RE.search(rest) or _LETTER_MENTION_RE.search(rest) else rest


def answers_equivalent(pred: str | None, gold: str | None, choices: Sequence[str] | None = None) -> bool:
    """True iff `pred` and `gold` denote the same answer (None: no answer, never equivalent). Never raises on text or
    numbers (errors while comparing count as False); a `pred` or `gold` of another type (list, bool, bytes, NaN) is
    a TypeError / ValueError naming it."""
    if pred is None or gold is None:
        return False
    pred, gold = _answer_text(pred, "pred"), _answer_text(gold, "gold")
    refuse_text_for_choices("choices", choices)  # before the try below, which reads any failure as "not equal"
    try:
        if _no_choices(choices):
            pred, gold = _without_option_label(pred), _without_option_label(gold)
        pi, gi = _choice_index(pred, choices), _choice_index(gold, choices)
        if NAMES_TWO_OPTIONS in (pi, gi):  # not read as its value either: "A. 80" matched the gold 80 by value
            return False
        if pi is not None and gi is not None:
            # two options are told apart by which they are, not by the value of their texts: the ranges "0.2 - 0.4"
            # and "0.0 - 0.2" (MathVista 288) both evaluate to -0.2, the orders "5-4-3-2-1" and "5-2-3-1-4" to -5
            return _same_option(pi, gi, choices)
        p = pred if pi is None else str(choices[pi])  # normalize_choice, without finding the options again
        g = gold if gi is None else str(choices[gi])
        if not _equivalent(p, g):
            return False
        if (pi is None) == (gi is None):
            return True
        # one side names an option, the other is a value: that value must single the option out. "0-0.2" equals
        # the range "0.0 - 0.2" by value, and "0.2 - 0.4", "0.6 - 0.8" too (MathVista 288): it names no one option
        named = pi if pi is not None else gi
        return not any(_each_equivalent([(p, str(c)) if pi is None else (str(c), g)
                                         for j, c in enumerate(choices) if not _same_option(j, named, choices)]))
    except Exception:
        return False


def canonical_answer(ans: str | None, choices: Sequence[str] | None = None) -> Hashable | None:
    """Cheap grouping key: equal for answers that differ only in spelling of a number,
    choice letter vs text, or whitespace/markup. Empty answers map to None; a boxed "None" or "N/A" is an answer
    like any other text (majority vote and SFR count it: the seeds count every extracted answer, and "None" can be
    the right option), which only MM-Zero's proposer scoring drops, as its released solver server does."""
    if ans is None:
        return None
    ans = _answer_text(ans, "answer")
    refuse_text_for_choices("choices", choices)
    try:
        light = _light(normalize_choice(ans, choices))
        if not light:
            return None
        num = _to_number(light)
        if num is not None:  # 12 significant digits: spellings of one value meet, 1e-7 and 0 stay apart;
            exact = _exact_integer(light)  # integers by their exact value, as `_numbers_close` compares them
            return ("num", exact if exact is not None else float(f"{num:.12g}") + 0.0)
        return ("str", light)
    except Exception:
        return ("str", str(ans))


def group_answer_keys(answers: Sequence[str | None], choices: Sequence[str] | None = None) -> list[Hashable | None]:
    """Keys for one group where math-equivalent answers (``\\sqrt{8}`` / ``2\\sqrt{2}``) share
    a key. Only one representative per distinct cheap key is compared, so the cost grows
    with the number of distinct answers, not the group size; two closed-form numbers whose
    values are apart are told apart without sympy (``_values_apart``).

    Equivalence is not transitive ("50\\%" matches both "0.5" and "50"; with a tolerance, 10000.5 is near 10000 and
    10001 though they are not near each other), so classes are not closed under chains of matches: each distinct
    answer joins the first class whose first member it matches, else starts a class, taking the distinct answers
    most frequent first (ties by key), not in order of appearance, so that the same multiset of answers in any order
    gets the same classes and counts (in order of appearance, [50, 50\\%, 0.5] gave {50, 50\\%} {0.5} but
    [50\\%, 50, 0.5] one class of three). A class's key is that of its earliest member in ``answers``. A match is
    checked both ways, as math-verify is not symmetric (gold "\\{1,2\\}" accepts "(1,2)" but not the reverse). A key
    spelled several ways is compared through its most frequent spelling (ties by text), whatever the order."""
    refuse_text_for_list("answers", answers)
    refuse_text_for_choices("choices", choices)
    base = [canonical_answer(a, choices) for a in answers]
    # the cheap key reads "5 m" and "5 cm" as 5, which `answers_equivalent` tells apart: a named length unit splits
    # a key (a bare "5" then joins a class by the match below, as equivalence lets it join either)
    keys = [k if k is None else _with_unit(k, _answer_text(a, "answer"), choices) for a, k in zip(answers, base)]
    spellings: dict[Hashable, dict[str, int]] = {}  # each cheap key's spellings and their counts, keys as they appear
    for a, k in zip(answers, keys):
        if k is not None:
            texts = spellings.setdefault(k, {})
            text = _answer_text(a, "answer")
            texts[text] = texts.get(text, 0) + 1
    # a key's representative is its most frequent spelling (ties by text), not the one seen first: spellings of one
    # key can compare differently with a third answer (10,000 and 1e4 share a key, and only the first equals 10^4), so
    # the first one seen made the classes depend on the order of the samples
    reps = {k: min(texts, key=lambda t: (-texts[t], t)) for k, texts in spellings.items()}
    counts = {k: sum(texts.values()) for k, texts in spellings.items()}
    heads: list[Hashable] = []  # first cheap key of each class, in the order above
    head_of: dict[Hashable, Hashable] = {}
    units: dict[Hashable, set[str]] = {}  # the named units of each class: a bare "5" heading one took "5 m", "5 cm"
    match = _GroupMatcher(reps, choices)
    for k in sorted(reps, key=lambda k: (-counts[k], repr(k))):
        unit = _unit_part(k)
        head_of[k] = next((h for h in heads if (not unit or units[h] <= {unit}) and match(k, h)), k)
        if head_of[k] == k:
            heads.append(k)
            units[k] = set()
        units[head_of[k]] |= {unit} - {""}
    members: dict[Hashable, list[Hashable]] = {}  # each class's keys, in order of appearance
    for k in reps:
        members.setdefault(head_of[k], []).append(k)
    # a class is named by the cheap key of its member seen first, as without units; a second class under the same
    # cheap key ("5 m" beside "5 cm") by that key and its units, which no other class holds
    label: dict[Hashable, Hashable] = {}
    for head, ks in members.items():
        name = _without_unit(ks[0])
        if name in label.values():
            name = ("units", name, tuple(sorted(_unit_part(k) for k in ks)))
        label[head] = name
    return [None if k is None else label[head_of[k]] for k in keys]


# A group compares each distinct answer with every class before it, both ways, and one comparison may take up to the
# math-verify deadline: 48 distinct answers such as "\\binom{99}{x}", "\\binom{98}{x}", ... (CSRS's 8 maternal and 40
# re-inference answers of one group) took 0.3-1 s a pair, about 15 minutes for the group. So a group's comparisons are
# bounded: an answer in `_COSTLY_STRIKES` slow comparisons (`_SLOW_COMPARISON_S` or more: a slow one may be its
# partner's fault, so one alone does not mark it) is compared only cheaply from then on, and once the group has spent
# `_GROUP_BUDGET_S` comparing, every answer is. Ordinary answers compare in well under 0.2 s: a group of them is
# compared exactly as before unless it has spent that long (a few hundred distinct symbolic answers).
_SLOW_COMPARISON_S = 0.5
_COSTLY_STRIKES = 2
_GROUP_BUDGET_S = 10.0


class _GroupMatcher:
    """`group_answer_keys`'s test of whether two cheap keys are one answer (either way round), bounded as above."""

    def __init__(self, reps: dict, choices: Sequence[str] | None):
        self.reps, self.choices = reps, choices
        self.strikes: dict[Hashable, int] = {}
        self.spent = 0.0

    def __call__(self, k: Hashable, h: Hashable) -> bool:
        a, b = self.reps[k], self.reps[h]
        if (self.spent >= _GROUP_BUDGET_S
                or max(self.strikes.get(k, 0), self.strikes.get(h, 0)) >= _COSTLY_STRIKES):
            return self._cheaply(a, b)
        for pred, gold in ((a, b), (b, a)):
            start = time.monotonic()
            equal = answers_equivalent(pred, gold, self.choices)
            took = time.monotonic() - start
            self.spent += took
            if equal:
                return True
            if took >= _SLOW_COMPARISON_S:  # the other way round is as slow: not tried
                for key in (k, h):
                    self.strikes[key] = self.strikes.get(key, 0) + 1
                return False
        return False

    def _cheaply(self, a: str, b: str) -> bool:
        _CUT_SHORT[0] += 1
        try:  # as canonical_answer reads them (a letter as its option's text), without math-verify
            return _cheaply_equivalent(normalize_choice(a, self.choices), normalize_choice(b, self.choices))
        except Exception:
            return False


def _with_unit(key: Hashable, text: str, choices: Sequence[str] | None) -> Hashable:
    """``key`` with the length unit ``text`` names (through the option a letter names), if any."""
    try:
        unit = _unit_of(normalize_choice(text, choices))
    except Exception:  # as canonical_answer: text it cannot read keeps its key
        unit = None
    return key if unit is None else _UnitKey(key, unit)


class _UnitKey(tuple):
    """A cheap key with the length unit its answer names (a class of its own, never a public key)."""

    def __new__(cls, key: Hashable, unit: str):
        return super().__new__(cls, (key, unit))


def _without_unit(key: Hashable) -> Hashable:
    return key[0] if isinstance(key, _UnitKey) else key


def _unit_part(key: Hashable) -> str:
    return key[1] if isinstance(key, _UnitKey) else ""


def single_tag(text: str, tag: str, max_chars: int) -> tuple[str | None, str]:
    """(content, "") of exactly one non-empty ``<tag>…</tag>`` in ``text``, whitespace runs collapsed; else
    (None, why): "no_tag", "several", "empty" or "too_long" (more than ``max_chars`` characters)."""
    text, opening, closing = text or "", f"<{tag}>", f"</{tag}>"
    found, pos = [], 0
    while (i := text.find(opening, pos)) >= 0:  # str.find, not a lazy regex: many unclosed tags made that quadratic
        j = text.find(closing, i + len(opening))
        if j < 0:
            break
        found.append(text[i + len(opening):j])
        pos = j + len(closing)
    if not found:
        return None, "no_tag"
    if len(found) > 1:
        return None, "several"
    content = " ".join(found[0].split())
    if is_blank_text(content):  # zero-width / format characters only: nothing to read, as an empty tag
        return None, "empty"
    if len(content) > max_chars:
        return None, "too_long"
    return content, ""
