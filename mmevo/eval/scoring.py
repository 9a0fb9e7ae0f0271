"""Rule-based answer scoring for the MATH-Vision (MATH-V) and MathVista benchmarks.

Both scorers are pure functions of ``(response, item)`` and never raise: any failure
(garbage input, malformed item, parser error) scores ``False``.

``score_mathvision`` re-implements the extraction and equality rules of MATH-V's
official evaluation script (``evaluation/evaluate.py`` + ``evaluation/utils.py``).
``score_mathvista`` re-implements the normalisation and comparison of MathVista's
``evaluation/calculate_score.py``; the official GPT-based answer extractor is replaced by
the rule-based :func:`extract_mathvista_answer`.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = [
    "extract_mathvision_answer",
    "mathvision_is_equal",
    "score_mathvision",
    "extract_mathvista_answer",
    "normalize_mathvista_extraction",
    "score_mathvista",
    "edit_distance",
]

# Responses longer than this are cut to their last characters before extraction: the
# answer of a chain of thought is at its end, and this bounds the regex/parser work.
_MAX_RESPONSE_CHARS = 20_000
# Strings longer than this are never handed to the LaTeX/sympy parser.
_MAX_SYMPY_CHARS = 200


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


def _too_costly_for_sympy(s: str) -> bool:
    """Reject inputs whose parse would auto-evaluate astronomically large numbers."""
    if len(s) > _MAX_SYMPY_CHARS:
        return True
    if s.count("^") > 4 or "**" in s:
        return True
    # Huge exponents (``10^{12345}``), power towers (``9^{9^{9}}``), big factorials.
    if re.search(r"\^\s*\{?\s*[-+]?\s*\d{5,}", s) or re.search(r"\^\s*(?:\{[^{}]*|\d+\s*)\^", s):
        return True
    if ("!" in s or "\\prod" in s) and ("^" in s or re.search(r"\d{4,}", s)):
        return True
    return False


def _latex_to_float(s: str) -> float | None:
    """LaTeX -> sympy -> real float, or ``None``.

    The official script does ``eval(str(latex2sympy(s)))`` under ``from math import *``; a
    result that is symbolic, complex, a set or an interval makes it raise. Here the sympy
    expression is evaluated numerically instead of ``eval``-ing its string (no code
    execution), with the same outcome for numeric expressions.
    """
    if not isinstance(s, str) or not s.strip() or _too_costly_for_sympy(s):
        return None
    try:
        from latex2sympy2_extended import latex2sympy

        expr = latex2sympy(s)
        value = float(expr.evalf())
    except Exception:
        return None
    if math.isnan(value):
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
    # Greedy "oxed{(.*)}" over the whole text (DOTALL): from the first "oxed{" that
    # leads to a match up to the LAST "}" of the text; findall()[-1] of that one match.
    matches = re.findall(r"oxed{(.*)}", s, flags=re.S)
    ans = matches[-1] if matches else s
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
    model_answer = str(response)[-_MAX_RESPONSE_CHARS:].strip()
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


def _round2_str(sub: str) -> str:
    # One tuple/list element of the official ``eval_tuple``: numeric value rounded to 2
    # decimals. Interpretation: integral values print without ".0" (the official
    # ``str(round(eval(...), 2))`` prints "3" for an sympy Integer but "3.0" for a Float).
    value = _latex_to_float(sub)
    if value is None or math.isinf(value):
        raise ValueError(sub)
    r = round(value, 2)
    return str(int(r)) if r == int(r) else str(r)


def _eval_tuple(s: str) -> str:
    """Official ``eval_tuple``: evaluate each element of "(a,b,...)" / "[a,b,...]"."""
    if len(s) < 2:
        return s
    sl = s[1:-1].split(",")
    if len(sl) <= 1 or (s[0], s[-1]) not in (("(", ")"), ("[", "]")):
        return s
    try:
        parts = [sub if ("infty" in sub or sub in ("a", "-a")) else _round2_str(sub) for sub in sl]
    except Exception:
        return s
    return s[0] + ",".join(parts) + s[-1]


def mathvision_is_equal(asw: str, gt_asw: str) -> bool:
    """Official ``is_equal``: case-insensitive string match, tuple match, then sympy value
    equality after rounding both sides to 2 decimals."""
    try:
        asw, gt_asw = str(asw).lower(), str(gt_asw).lower()
        if not asw.replace(" ", "") or not gt_asw.replace(" ", ""):
            return False
        if gt_asw.strip() == asw.strip():
            return True
        asw, gt_asw = _eval_tuple(asw), _eval_tuple(gt_asw)
        if gt_asw == asw:
            return True
        a, g = _latex_to_float(asw), _latex_to_float(gt_asw)
        if a is None or g is None:
            return False
        if math.isinf(a) or math.isinf(g):
            return a == g
        return round(g, 2) == round(a, 2)
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
    """Levenshtein distance (insert/delete/substitute, unit costs)."""
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _most_similar(prediction: str, choices: list[str]) -> str:
    # Official ``get_most_similar``: smallest edit distance, first choice on ties.
    # The prediction is cut to 1000 characters to bound the O(n*m) cost.
    prediction = prediction[:1000]
    distances = [edit_distance(prediction, c) for c in choices]
    return choices[distances.index(min(distances))]


_NUM_RE = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+"


def _numbers(text: str) -> list[str]:
    return [m.replace(",", "") for m in re.findall(_NUM_RE, text)]


def _last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (balanced braces), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
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


_ANSWER_IS_RE = re.compile(
    r"(?:final\s+answer|correct\s+answer|answer|correct\s+option|correct\s+choice)"
    r"\s*(?:is|should\s+be|would\s+be|will\s+be|=|:)\s*:?\s*([^\n]*)",
    re.I,
)


def _clean_candidate(s: str) -> str:
    s = s.strip()
    s = re.sub(r"^\$+|\$+$", "", s).strip()
    s = re.sub(r"\\text\{([^{}]*)\}", r"\1", s)
    s = s.strip().rstrip(".").strip()
    return s.strip("*").strip()


def _letter_of(text: str, n_options: int) -> str | None:
    """A choice letter written alone: "B", "(B)", "B.", "B)", "B:", "(B) text", "Option B"."""
    letters = "".join(chr(ord("A") + i) for i in range(n_options))
    if not letters:
        return None
    t = text.strip()
    m = re.fullmatch(rf"(?:option|choice)?\s*\(?([{letters}])\)?[.:)]?", t, flags=re.I)
    if m:
        return m.group(1).upper()
    m = re.match(rf"(?:option|choice)?\s*\(([{letters}])\)", t, flags=re.I) or re.match(
        rf"([{letters}])[.:)]\s", t
    )
    if m:
        return m.group(1).upper()
    return None


def extract_mathvista_answer(response: str, item: dict) -> str:
    """Rule-based stand-in for MathVista's GPT answer extractor.

    Rules, first that applies:
      1. the content of the last ``\\boxed{...}``;
      2. else the text after the last "answer is / answer: / correct option is ..." (to the
         end of that line);
      3. else the whole response.
    Then by item type:
      * multi_choice: a choice text equal (case-insensitively) to the candidate; else a
        letter written alone ("B", "(B)", "B.", "Option B", "(B) text") -> returned as the
        letter; else, when the candidate is the whole response, the last "(X)" letter in
        it, else the choice text occurring last in it; else the candidate itself (which the
        official normaliser maps to the nearest choice text by edit distance);
      * integer / float: the last number in the candidate (thousands commas dropped);
      * list: the numbers of the last "[...]" in the candidate (else all its numbers),
        printed as a Python list "[a, b]".
    Returns "" when nothing is found.
    """
    try:
        text = str(response)[-_MAX_RESPONSE_CHARS:].strip()
        if not text:
            return ""
        qtype = item.get("question_type")
        atype = item.get("answer_type")
        choices = [str(c) for c in (item.get("choices") or [])]

        boxed = _last_boxed(text)
        whole = False
        if boxed is not None:
            cand = boxed
        else:
            found = _ANSWER_IS_RE.findall(text)
            found = [f for f in found if f.strip()]
            if found:
                cand = found[-1]
            else:
                cand, whole = text, True
        cand = _clean_candidate(cand)

        if qtype == "multi_choice":
            lowered = {c.strip().lower(): c for c in choices}
            if cand.lower() in lowered:
                return lowered[cand.lower()]
            letter = _letter_of(cand, len(choices))
            if letter:
                return letter
            if whole:
                letters = "".join(chr(ord("A") + i) for i in range(len(choices)))
                hits = re.findall(rf"\(([{letters}])\)", text) if letters else []
                if hits:
                    return hits[-1]
                pos = {c: text.lower().rfind(c.strip().lower()) for c in choices if c.strip()}
                pos = {c: p for c, p in pos.items() if p >= 0}
                if pos:
                    # latest occurrence; on equal position the longer choice text
                    return max(pos, key=lambda c: (pos[c], len(c)))
                # Unmarked text with no letter and no choice text: no answer (the nearest-
                # choice rule is applied only to an explicitly marked answer).
                return ""
            return cand

        if atype in ("integer", "float"):
            nums = _numbers(cand)
            return nums[-1] if nums else ""

        if atype == "list":
            brackets = re.findall(r"\[([^\[\]]*)\]", cand)
            nums = _numbers(brackets[-1]) if brackets else _numbers(cand)
            if not nums:
                return ""
            values = [int(float(x)) if float(x).is_integer() and "." not in x else float(x) for x in nums]
            return str(values)

        return cand
    except Exception:
        return ""


def normalize_mathvista_extraction(extraction: Any, item: dict) -> str | None:
    """Official ``normalize_extracted_answer`` (calculate_score.py)."""
    qtype = item.get("question_type")
    atype = item.get("answer_type")
    choices = [str(c) for c in (item.get("choices") or [])]
    precision = item.get("precision")
    if qtype == "multi_choice":
        extraction = extraction.strip() if isinstance(extraction, str) else str(extraction)
        # Interpretation (not in the official script): an extraction that IS a choice text
        # is kept. Otherwise choices written "(a)".."(e)" in shuffled order (pids 168, 849)
        # are misread by the letter rule below ("(b)" -> "B" -> the 2nd choice).
        if extraction in choices:
            return extraction
        # "(A) text" -> "A" (first parenthesised letter).
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
        try:
            return str(round(float(extraction), int(precision)))
        except Exception:
            return None
    if atype == "list":
        try:
            return str(extraction)
        except Exception:
            return None
    return extraction


def score_mathvista(response: str, item: dict) -> bool:
    """True when ``response`` answers the MathVista item correctly.

    Rule-based extraction (:func:`extract_mathvista_answer`), the official normalisation,
    then exact equality with ``item['answer']`` (official ``safe_equal``).
    """
    try:
        if not isinstance(response, str):
            return False
        extraction = extract_mathvista_answer(response, item)
        if extraction == "":
            return False
        prediction = normalize_mathvista_extraction(extraction, item)
        return prediction is not None and prediction == item["answer"]
    except Exception:
        return False
