"""Answer-style parity sweep: every shipped benchmark row x the ways a real VLM writes its answer.

For each row of MATH-V ``test.jsonl`` (which holds every ``testmini.jsonl`` row unchanged) and of MathVista
``testmini.json``, writes the row's gold answer in many styles: bare, in ``\\boxed{}``, "The answer is X.", with
units / degrees / dollars, LaTeX fractions, roots and pi, letters and option texts of multiple choice, negative
numbers, thousands separators, percentages, scientific notation, two answers in one response (the right one
first or last), an empty response, a response longer than any truncation, full-width digits and the Unicode
minus (``--styles base``, review 25); and (``--styles new``, review 26) the answer in markdown bold / inline code /
a code fence / a table, after "Final answer:" / "Answer:" / "答案", an option's text in other case, without its
punctuation, with a trailing period or in LaTeX, trailing zeros, a leading "+", units glued on, degree variants,
"x=5", two answers, ranges, intervals, vectors, sets, yes / no for free-form rows, integers as floats and floats
rounded, and 25,000 characters after the answer stated first or before it stated last; and (``--styles third``,
review 27) Chinese markers ("答案是 B", "选 C"), full-width letters and digits, nested / repeated / framed boxes,
``\\text{}`` / ``\\mathrm{}``, HTML tags, "B. B", "[B]", "B)", "Option: B", "choice b", an explanation on the answer's
line, the answer inside or after a think block, scientific notation ("1.2e3", "\\cdot 10^{2}", an e-notation
mantissa), percents of fractions, negative zero, thousands points and apostrophes, mixed numbers, ``\\tfrac``,
whitespace-only and empty-box responses; and (``--styles fourth``, review 28) markdown italics / underscores / headings /
bullets, "Final Answer:" variants (the Minerva "The final answer is $X$. I hope it is correct."), quoted answers, a
closing "!", display math, units in LaTeX, degrees in math mode, number words, decimal commas, the rounding edges of a
float's precision (x.xx5), ``\left( \right)``, "= X" / "≈ X" / "about X", pi and root spellings, option sentences
("Option B is correct.", "\boxed{Answer: Option C}"), "None of the above", lists without brackets. ``--styles all``
(the default) writes all four. Each (row, response) is
judged by mmevo and by the official reference:

* MATH-V: lmms-eval's ``mathvision_process_results`` (through ``scripts/parity_mathvision.py``'s workers in
  ``.venv-parity``), so every pair has the official verdict;
* MathVista: the official verdict needs the GPT extraction. Where the official rule-based fast paths decide
  (the response is a choice text, parses as a number, or is ``The answer is "X".``) the reference
  ``extract_answer`` + ``normalize_extracted_answer`` + ``safe_equal`` decide; elsewhere the official
  normaliser + ``safe_equal`` judge the answer the response was written to state (what the GPT extraction
  returns for it).

Prints a JSON report: pair counts, disagreements per benchmark and per style (``disagree_undocumented``: less the
MathVista readings README documents, ``VISTA_DOCUMENTED``), and up to ``--show`` examples of each disagreeing style.

Usage (repo root, after ``make parity-env``)::

    OMP_NUM_THREADS=1 .venv/bin/python scripts/parity_styles.py --out runs/parity_styles.json
    OMP_NUM_THREADS=1 .venv/bin/python scripts/parity_styles.py --bench mathvision --row-stride 10
    OMP_NUM_THREADS=1 .venv/bin/python scripts/parity_styles.py --styles new --row-stride 20 --row-offset 10
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import re
import sys
import time
from collections import Counter, defaultdict
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("MMEVO_SHARED_DATA") or ROOT.parent / "shared" / "data")  # as tests/datapaths.py
SEED = 20261206
LONG_CHARS = 25_000  # past mmevo's 20,000-character response bound


def _script(name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


FILLER = ("we look at the figure and note that the two marked segments are equal so the triangle is isosceles and "
          "the remaining angle follows from the angle sum").split()


def _filler(rng: random.Random, n_chars: int) -> str:
    words, size = [], 0
    while size < n_chars:
        words.append(rng.choice(FILLER))
        size += len(words[-1]) + 1
    return " ".join(words)


def _fullwidth(s: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if c.isdigit() or c in ".ABCDE" else c for c in s)


def _unicode_minus(s: str) -> str:
    return s.replace("-", "\u2212")


def _number_styles(g: str) -> list[tuple[str, str]]:
    """Answer texts for a numeric gold ``g`` (plain decimal or integer text)."""
    v = float(g)
    out = [
        ("units_cm", f"{g} cm"),
        ("units_degree_sign", f"{g}°"),
        ("units_circ", f"{g}^\\circ"),
        ("dollars", f"${g}$"),
        ("percent_latex", f"{g}\\%"),
        ("percent_plain", f"{g}%"),
        ("sci_e", f"{v:e}"),
        ("sci_times", f"{v / 10:g} \\times 10^{{1}}" if v else "0 \\times 10^{1}"),
        ("fullwidth_digits", _fullwidth(g)),
        ("sci_upper", f"{v:.2E}"),
        ("half_frac_unbraced", "\\frac12" if v == 0.5 else g),
        ("trailing_zero", f"{g}.0" if "." not in g else f"{g}0"),
    ]
    if v < 0:
        out.append(("unicode_minus", _unicode_minus(g)))
    else:
        out.append(("negated", f"-{g}"))
    if v == int(v) and abs(v) >= 1000:
        out.append(("thousands_thin_space", f"{int(v):,}".replace(",", "\\,")))
        out.append(("thousands_space", f"{int(v):,}".replace(",", " ")))
        out.append(("thousands_comma", f"{int(v):,}"))
        out.append(("thousands_brace", f"{int(v):,}".replace(",", "{,}")))
    if v != int(v):
        fr = Fraction(g).limit_denominator(1000)
        if abs(float(fr) - v) < 1e-9:
            out += [("frac", f"\\frac{{{fr.numerator}}}{{{fr.denominator}}}"),
                    ("dfrac", f"\\dfrac{{{fr.numerator}}}{{{fr.denominator}}}"),
                    ("slash", f"{fr.numerator}/{fr.denominator}")]
    return out


def _latex_styles(g: str) -> list[tuple[str, str]]:
    out = [("dfrac", g.replace("\\frac", "\\dfrac")), ("dollars", f"${g}$"), ("nospace", g.replace(" ", ""))]
    m = re.fullmatch(r"\\frac\{(-?\d+)\}\{(\d+)\}", g)
    if m:
        v = int(m.group(1)) / int(m.group(2))
        out += [("slash", f"{m.group(1)}/{m.group(2)}"), ("decimal_2dp", f"{v:.2f}"), ("decimal", f"{v:g}")]
    if "\\pi" in g:
        out.append(("pi_unicode", g.replace("\\pi", "π")))
    if "\\sqrt" in g:
        out.append(("sqrt_unicode", re.sub(r"\\sqrt\{(\w+)\}", r"√\1", g)))
    return out


def _wrap(style: str, ans: str) -> list[tuple[str, str]]:
    return [(f"{style}|bare", ans), (f"{style}|boxed", f"So we get \\boxed{{{ans}}}."),
            (f"{style}|answer_is", f"The answer is {ans}.")]


def _mathvision_row(row: dict) -> tuple[str, list[str], str, str]:
    """A MATH-V row's gold, options, option letters and the gold option's text ("" for a free-form row, or a gold
    that is no option letter)."""
    gold = str(row["answer"]).strip()
    options = [str(o) for o in row.get("options") or []]
    letters = "ABCDE"[: len(options)]
    return gold, options, letters, options[letters.index(gold)] if options and gold in letters else ""


def mathvision_responses(row: dict, rng: random.Random) -> list[tuple[str, str]]:
    gold, options, letters, T = _mathvision_row(row)
    out: list[tuple[str, str]] = []
    if options:
        L = gold
        W = rng.choice([c for c in letters if c != L] or ["Z"])
        WT = options[letters.index(W)] if W in letters else "?"
        out += _wrap("mc_letter", L)
        out += _wrap("mc_paren_letter", f"({L})")
        out += _wrap("mc_letter_dot", f"{L}.")
        out += _wrap("mc_option_text", T)
        out += _wrap("mc_letter_text", f"{L}. {T}")
        out += _wrap("mc_paren_letter_text", f"({L}) {T}")
        out += _wrap("mc_lower_letter", L.lower())
        out += _wrap("mc_fullwidth_letter", _fullwidth(L))
        out += [
            ("mc_letter_newline_reason", f"{L}\nBecause the other options do not fit."),
            ("mc_option_is", f"The correct option is {L}."),
            ("mc_two_boxes_right_first", f"\\boxed{{{L}}} ... on reflection \\boxed{{{W}}}"),
            ("mc_two_boxes_right_last", f"\\boxed{{{W}}} ... on reflection \\boxed{{{L}}}"),
            ("mc_two_answer_is_right_first", f"The answer is {L}. Hmm, the answer is {W}."),
            ("mc_two_answer_is_right_last", f"The answer is {W}. Hmm, the answer is {L}."),
            ("mc_wrong_text_boxed", f"\\boxed{{{WT}}}"),
            ("mc_answer_colon_bold", f"**Answer:** **{L}**"),
            ("mc_answer_is_colon", f"The answer is: {L}"),
            ("mc_answer_is_nodot", f"The answer is {L}"),
            ("mc_letter_rparen_text", f"{L}) {T}"),
            ("mc_option_word", f"Option {L}"),
            ("mc_boxed_textbf_paren", f"\\boxed{{\\textbf{{({L})}}}}"),
            ("mc_boxed_text_letter", f"\\boxed{{\\text{{{L}}}}}"),
            ("mc_think_then_box", f"<think>Maybe {W}? No.</think> \\boxed{{{L}}}"),
            ("mc_nbsp_letter", f"The answer is\u00a0{L}."),
        ]
        # every option's text, right or wrong: the official scorer also compares values (an option "$2\\sqrt{3}$"
        # against another written "3.46")
        out += [(f"mc_each_option_text_boxed:{c}", f"\\boxed{{{o}}}") for c, o in zip(letters, options)]
    else:
        g = gold
        if g.startswith("$") and g.endswith("$") and len(g) > 1:
            g = g[1:-1].strip()
        out += _wrap("ff_gold", g)
        out.append(("ff_gold_raw_boxed", f"\\boxed{{{gold}}}"))
        if re.fullmatch(r"-?\d+(?:\.\d+)?", g):
            styles = _number_styles(g)
            v = float(g)
            w = f"{v + 1:g}"
        else:
            styles = _latex_styles(g)
            w = f"{g}+1"
            value = _script("parity_mathvision")._gold_value(g)
            if value is not None:  # a symbolic gold given as a decimal (the official scorer rounds to 2 places)
                styles += [(f"value_{k}dp", f"{value:.{k}f}") for k in (1, 2, 3)]
        for s, a in styles:
            out += _wrap(s, a)
        out += [
            ("ff_two_boxes_right_first", f"\\boxed{{{g}}} ... on reflection \\boxed{{{w}}}"),
            ("ff_two_boxes_right_last", f"\\boxed{{{w}}} ... on reflection \\boxed{{{g}}}"),
            ("ff_two_answer_is_right_first", f"The answer is {g}. Hmm, the answer is {w}."),
            ("ff_two_answer_is_right_last", f"The answer is {w}. Hmm, the answer is {g}."),
            ("ff_x_equals", f"Solving, x = {g}"),
            ("ff_boxed_x_equals", f"\\boxed{{x = {g}}}"),
            ("ff_boxed_text_unit", f"\\boxed{{{g}\\text{{ cm}}^2}}"),
            ("ff_nbsp_unit", f"The answer is {g}\u00a0cm."),
            ("ff_answer_is_colon", f"The answer is: {g}"),
            ("ff_bold", f"**Answer:** **{g}**"),
            ("ff_think_then_box", f"<think>Maybe {w}? No.</think> \\boxed{{{g}}}"),
            ("ff_boxed_two_values", f"\\boxed{{{g}, {w}}}"),
            ("ff_boxed_dollar_inside", f"\\boxed{{${g}$}}"),
            ("ff_approx", f"\\boxed{{\\approx {g}}}"),
        ]
    out += [
        ("empty", ""),
        ("long_answer_last", _filler(rng, LONG_CHARS) + f"\nThe answer is \\boxed{{{gold}}}"),
        ("long_answer_first", f"\\boxed{{{gold}}}\n" + _filler(rng, LONG_CHARS)),
    ]
    return out


# ------------------------------------------------------------------------------------- review 26 styles


def _md_wraps(style: str, ans: str) -> list[tuple[str, str]]:
    """The answer in markdown and after a conclusion marker: bold, inline code, a code fence, "Final answer:",
    "Answer:", "答案", a one-row table."""
    return [(f"{style}|md_bold", f"The answer is **{ans}**."), (f"{style}|md_bold_bare", f"**{ans}**"),
            (f"{style}|md_code", f"The answer is `{ans}`."), (f"{style}|md_code_bare", f"`{ans}`"),
            (f"{style}|code_fence", f"```\n{ans}\n```"),
            (f"{style}|final_answer_colon", f"Reasoning done.\nFinal answer: {ans}"),
            (f"{style}|answer_colon", f"Answer: {ans}"),
            (f"{style}|zh_answer_colon", f"答案：{ans}"), (f"{style}|zh_answer_is", f"所以答案是{ans}。"),
            (f"{style}|table", f"| Quantity | Value |\n|---|---|\n| Answer | {ans} |"),
            (f"{style}|long_start_bare", f"{ans}\n" + _filler(random.Random(style + ans), LONG_CHARS)),
            (f"{style}|long_start_answer_is", f"The answer is {ans}.\n" + _filler(random.Random(ans), LONG_CHARS)),
            (f"{style}|long_end_bare", _filler(random.Random(ans + style), LONG_CHARS) + f"\n{ans}")]


def _text_variants(t: str) -> list[tuple[str, str]]:
    """An option's text differing only by case, punctuation, a trailing period or LaTeX."""
    out = [("upper", t.upper()), ("lower", t.lower()), ("title", t.title()), ("period", t + "."),
           ("no_punct", re.sub(r"[^\w\s]", "", t)), ("latex_dollars", f"${t}$"), ("latex_text", f"\\text{{{t}}}"),
           ("latex_paren", f"\\({t}\\)"), ("spaced", f"  {t} ")]
    # (without its punctuation a number or a bracketed letter is another answer: "4.40" is not "440", "(b)" not "b")
    return [(k, v) for k, v in out if v.strip() and not (k == "no_punct" and (re.search(r"\d", t) or len(v.strip()) < 2))]


def _numeric_variants(g: str, v: float) -> list[tuple[str, str]]:
    n = g
    out = [("trailing_zeros_2", f"{v:.2f}" if v == int(v) else (g + "00" if "." in g else f"{g}.00")),
           ("leading_plus", f"+{n}" if v >= 0 else n), ("unit_glued_cm", f"{n}cm"), ("unit_glued_m2", f"{n}m^2"),
           ("deg_word", f"{n} degrees"), ("deg_latex_degree", f"{n}\\degree"), ("deg_braced_circ", f"{n}^{{\\circ}}"),
           ("deg_space_sign", f"{n} °"), ("deg_circ_text", f"{n}^\\circ\\text{{C}}"),
           ("x_equals_nospace", f"x={n}"), ("two_or", f"{n} or {f'{v + 1:g}'}"), ("two_or_wrong_first", f"{v + 1:g} or {n}"),
           ("range_dash", f"{n}-{v + 1:g}"), ("range_to", f"{n} to {v + 1:g}"),
           ("interval_closed", f"[{n}, {v + 1:g}]"), ("interval_open", f"({n}, {v + 1:g})"),
           ("vector", f"({n}, {n})"), ("set", f"\\{{{n}\\}}"), ("list_brackets", f"[{n}]"),
           ("yes", "Yes"), ("true", "True"), ("no", "No")]
    if v == int(v):
        out += [("int_as_float", f"{int(v)}.0"), ("int_as_float_3", f"{int(v)}.000")]
    else:
        out += [("float_as_int_round", f"{round(v):d}"), ("float_as_int_trunc", f"{int(v):d}"),
                ("float_1dp", f"{v:.1f}"), ("float_3dp", f"{v:.3f}"), ("float_4dp", f"{v:.4f}"),
                ("float_plus_0049", f"{v + 0.0049:.4f}"), ("float_plus_006", f"{v + 0.006:.3f}")]
    return out


def mathvision_new_responses(row: dict, rng: random.Random) -> list[tuple[str, str]]:
    gold, options, letters, T = _mathvision_row(row)
    out: list[tuple[str, str]] = []
    if options:
        L = gold
        out += _md_wraps("n_mc_letter", L)
        out += _md_wraps("n_mc_letter_paren", f"({L})")
        for k, t in _text_variants(T):
            out += [(f"n_mc_text_{k}|bare", t), (f"n_mc_text_{k}|boxed", f"\\boxed{{{t}}}"),
                    (f"n_mc_text_{k}|answer_is", f"The answer is {t}")]
        out += _md_wraps("n_mc_text", T)
        out += [("n_mc_letter_bold_in_box", f"\\boxed{{\\textbf{{{L}}}}}"), ("n_mc_boxed_bold_md", f"\\boxed{{**{L}**}}"),
                ("n_mc_yes", "Yes"), ("n_mc_lower_answer_is", f"the answer is {L.lower()}.")]
    else:
        g = gold[1:-1].strip() if gold.startswith("$") and gold.endswith("$") and len(gold) > 1 else gold
        out += _md_wraps("n_ff_gold", g)
        if re.fullmatch(r"-?\d+(?:\.\d+)?", g):
            for k, a in _numeric_variants(g, float(g)):
                out += [(f"n_num_{k}|bare", a), (f"n_num_{k}|boxed", f"\\boxed{{{a}}}"),
                        (f"n_num_{k}|answer_is", f"The answer is {a}.")]
        else:
            for k, t in _text_variants(g):
                out += [(f"n_sym_{k}|bare", t), (f"n_sym_{k}|boxed", f"\\boxed{{{t}}}")]
            out += [("n_sym_yes|boxed", "\\boxed{Yes}"), ("n_sym_vector|boxed", f"\\boxed{{({g}, {g})}}")]
    return out


def mathvista_new_responses(item: dict, rng: random.Random) -> list[tuple[str, str, object]]:
    """(style, response, the answer it states). Where a style states two answers or a range, what it states is
    the whole text (a GPT extraction of "5 or 6" is not one answer)."""
    gold = str(item["answer"])
    out: list[tuple[str, str, object]] = []

    def wraps(style, ans, stated):
        return [(s, r, stated) for s, r in _md_wraps(style, ans)]

    if item["question_type"] == "multi_choice":
        choices = [str(c) for c in item["choices"]]
        L = chr(ord("A") + choices.index(gold))
        out += wraps("n_mc_letter", L, L)
        out += wraps("n_mc_text", gold, gold)
        for k, t in _text_variants(gold):
            # (a GPT extraction drops the LaTeX around a text and a sentence's closing full stop)
            stated = gold if k.startswith("latex_") or k == "period" else t
            out += [(f"n_mc_text_{k}|bare", t, stated), (f"n_mc_text_{k}|boxed", f"\\boxed{{{t}}}", stated),
                    (f"n_mc_text_{k}|answer_is", f"The answer is {t}", stated)]
    else:
        out += wraps("n_ff_gold", gold, gold)
        if item["answer_type"] in ("integer", "float"):
            v = float(gold)
            for k, a in _numeric_variants(gold, v):
                stated = a
                if k.startswith(("unit_glued", "deg_", "x_equals")):
                    stated = gold
                out += [(f"n_num_{k}|bare", a, stated), (f"n_num_{k}|boxed", f"\\boxed{{{a}}}", stated),
                        (f"n_num_{k}|answer_is", f"The answer is {a}.", stated)]
    return out


# ------------------------------------------------------------------------------------- review 27 styles

ALL_FULLWIDTH = {c: chr(ord(c) + 0xFEE0) for c in "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz.()"}


def _fullwidth_all(s: str) -> str:
    """Every ASCII digit, letter, point and parenthesis as its full-width form (ＡＢ１２)."""
    return "".join(ALL_FULLWIDTH.get(c, c) for c in s)


def _third_wraps(style: str, ans: str, wrong: str) -> list[tuple[str, str]]:
    """The answer in other languages, nested / repeated / framed boxes, ``\\text{}``, HTML, after an explanation on
    the same line, inside or after a think block."""
    return [(f"{style}|zh_answer_is_space", f"答案是 {ans}"), (f"{style}|zh_pick", f"选 {ans}"),
            (f"{style}|zh_so_pick", f"所以选{ans}。"), (f"{style}|zh_boxed", f"因此答案为 $\\boxed{{{ans}}}$。"),
            (f"{style}|fullwidth_boxed", f"\\boxed{{{_fullwidth_all(ans)}}}"),
            (f"{style}|fullwidth_answer_is", f"The answer is {_fullwidth_all(ans)}."),
            (f"{style}|boxed_nested", f"\\boxed{{\\boxed{{{ans}}}}}"),
            (f"{style}|boxed_twice_same", f"\\boxed{{{ans}}} and again \\boxed{{{ans}}}"),
            (f"{style}|fbox", f"\\fbox{{{ans}}}"), (f"{style}|answer_is_fbox", f"The answer is \\fbox{{{ans}}}."),
            (f"{style}|text_wrapped", f"\\text{{{ans}}}"), (f"{style}|boxed_text", f"\\boxed{{\\text{{{ans}}}}}"),
            (f"{style}|boxed_mathrm", f"\\boxed{{\\mathrm{{{ans}}}}}"),
            (f"{style}|answer_is_text", f"The answer is \\text{{{ans}}}."),
            (f"{style}|html_bold", f"The answer is <b>{ans}</b>."), (f"{style}|html_p", f"<p>{ans}</p>"),
            (f"{style}|html_strong_br", f"Reasoning.<br>Answer: <strong>{ans}</strong>"),
            (f"{style}|answer_is_because", f"The answer is {ans} because the triangle is isosceles."),
            (f"{style}|answer_is_comma_since", f"The answer is {ans}, since the two sides are equal."),
            (f"{style}|boxed_since", f"\\boxed{{{ans}}} since the two sides are equal"),
            (f"{style}|think_only", f"<think>The answer is {ans}.</think>"),
            (f"{style}|think_boxed_only", f"<think>So \\boxed{{{ans}}}</think>"),
            (f"{style}|think_right_after_wrong", f"<think>The answer is {ans}.</think>\nThe answer is {wrong}."),
            (f"{style}|think_wrong_after_right", f"<think>The answer is {wrong}.</think>\nThe answer is {ans}."),
            (f"{style}|think_box_wrong_after_box_right",
             f"<think>\\boxed{{{wrong}}}</think>\n\\boxed{{{ans}}}")]


def _third_number_forms(g: str) -> list[tuple[str, str]]:
    """A numeric gold written with separators, scientific notation, as a percent, as negative zero, as a mixed
    number."""
    v = float(g)
    def show(x: float) -> str:  # every digit of the gold kept (":g" rounds 131253.5 / 10 to 13125.4)
        return f"{x:.12g}"

    out = [("sci_short", f"{show(v / 1000)}e3" if v and abs(v) >= 1000 else f"{show(v * 10)}e-1"),
           ("sci_cdot", f"{show(v / 100)} \\cdot 10^{{2}}" if v else "0 \\cdot 10^{2}"),
           ("sci_times_unbraced", f"{show(v / 10)} \\times 10^1" if v else "0 \\times 10^1"),
           ("sci_e_mantissa_times", f"{v / 100:.6e} \\times 10^{{2}}" if v else "0e0 \\times 10^{2}"),
           ("percent_of_fraction", f"{show(v * 100)}%"), ("percent_of_fraction_latex", f"{show(v * 100)}\\%"),
           ("fraction_of_percent", show(v / 100))]
    if v == 0:
        out += [("negative_zero", "-0"), ("negative_zero_float", "-0.0")]
    if v == int(v) and abs(v) >= 1000:
        out += [("thousands_dot", f"{int(v):,}".replace(",", ".")),
                ("thousands_apostrophe", f"{int(v):,}".replace(",", "'"))]
    if v != int(v):
        fr = Fraction(g).limit_denominator(1000)
        if abs(float(fr) - v) < 1e-9 and abs(fr) > 1:
            whole, rest = divmod(abs(fr.numerator), fr.denominator)
            sign = "-" if fr < 0 else ""
            out += [("mixed_latex", f"{sign}{whole}\\frac{{{rest}}}{{{fr.denominator}}}"),
                    ("mixed_space", f"{sign}{whole} {rest}/{fr.denominator}")]
        if abs(float(fr) - v) < 1e-9:
            out.append(("tfrac", f"\\tfrac{{{fr.numerator}}}{{{fr.denominator}}}"))
    return out


def _third_letter_forms(L: str, T: str) -> list[tuple[str, str]]:
    return [("letter_repeated", f"{L}. {L}"), ("letter_bracket", f"[{L}]"), ("letter_rparen", f"{L})"),
            ("option_word", f"Option {L}"), ("choice_lower", f"choice {L.lower()}"), ("choice_paren", f"Choice ({L})"),
            ("option_colon", f"Option: {L}"), ("letter_colon_text", f"{L}: {T}"), ("text_then_letter", f"{T} ({L})"),
            ("letter_fullwidth_paren", f"（{L}）")]


def mathvision_third_responses(row: dict, rng: random.Random) -> list[tuple[str, str]]:
    gold, options, letters, T = _mathvision_row(row)
    out: list[tuple[str, str]] = []
    if options:
        L = gold
        W = rng.choice([c for c in letters if c != L] or ["Z"])
        out += _third_wraps("t_mc_letter", L, W)
        out += _third_wraps("t_mc_text", T, options[letters.index(W)] if W in letters else "?")
        for k, a in _third_letter_forms(L, T):
            out += [(f"t_mc_{k}|bare", a), (f"t_mc_{k}|boxed", f"\\boxed{{{a}}}"),
                    (f"t_mc_{k}|answer_is", f"The answer is {a}."), (f"t_mc_{k}|zh", f"答案是{a}")]
    else:
        g = gold[1:-1].strip() if gold.startswith("$") and gold.endswith("$") and len(gold) > 1 else gold
        w = f"{float(g) + 1:g}" if re.fullmatch(r"-?\d+(?:\.\d+)?", g) else f"{g}+1"
        out += _third_wraps("t_ff_gold", g, w)
        if re.fullmatch(r"-?\d+(?:\.\d+)?", g):
            for k, a in _third_number_forms(g):
                out += [(f"t_num_{k}|bare", a), (f"t_num_{k}|boxed", f"\\boxed{{{a}}}"),
                        (f"t_num_{k}|answer_is", f"The answer is {a}.")]
    out += [("t_whitespace_spaces", "   "), ("t_whitespace_newlines", "\n\n\t\n"), ("t_empty_box", "\\boxed{}"),
            ("t_html_only", "<p></p>")]
    return out


def _mc_gold_and_wrong(item: dict, rng: random.Random) -> tuple[list[str], str, int, str]:
    """A MathVista multiple-choice row's choices, the gold's letter, and a wrong choice drawn from ``rng`` (its index
    and letter; the gold itself where there is no other)."""
    choices = [str(c) for c in item["choices"]]
    k = choices.index(str(item["answer"]))
    w = rng.choice([i for i in range(len(choices)) if i != k] or [k])
    return choices, chr(ord("A") + k), w, chr(ord("A") + w)


def mathvista_third_responses(item: dict, rng: random.Random) -> list[tuple[str, str, object]]:
    """(style, response, the answer it states: what a GPT extraction returns for it)."""
    gold = str(item["answer"])
    out: list[tuple[str, str, object]] = []
    if item["question_type"] == "multi_choice":
        choices, L, w, W = _mc_gold_and_wrong(item, rng)
        for s, r in _third_wraps("t_mc_letter", L, W):
            # a think block holding the only answer still states it; after one, the answer after it is the one stated
            stated = W if s.endswith("think_right_after_wrong") else L
            out.append((s, r, stated))
        for k2, a in _third_letter_forms(L, gold):
            stated = L
            out += [(f"t_mc_{k2}|bare", a, stated), (f"t_mc_{k2}|boxed", f"\\boxed{{{a}}}", stated),
                    (f"t_mc_{k2}|answer_is", f"The answer is {a}.", stated), (f"t_mc_{k2}|zh", f"答案是{a}", stated)]
    else:
        w = f"{float(gold) + 1:g}" if item["answer_type"] in ("integer", "float") else \
            "[0, 0]" if item["answer_type"] == "list" else gold + "x"
        for s, r in _third_wraps("t_ff_gold", gold, w):
            stated = w if s.endswith("think_right_after_wrong") else gold
            out.append((s, r, stated))
        if item["answer_type"] in ("integer", "float"):
            for k2, a in _third_number_forms(gold):
                # what a GPT extraction returns: the value of a LaTeX product / fraction / mixed number (as for
                # "\\frac" above), the number of a percent, else the text as written (the official normaliser judges it)
                # (a number with two or more thousands points, "100.000.000", is one number; "1.000" may be 1)
                stated = gold if k2.startswith(("sci_cdot", "sci_times", "sci_e_mantissa", "tfrac", "mixed")) or \
                    k2 == "thousands_dot" and a.count(".") > 1 else \
                    a.replace("\\%", "").rstrip("%") if k2.startswith("percent") else a
                out += [(f"t_num_{k2}|bare", a, stated), (f"t_num_{k2}|boxed", f"\\boxed{{{a}}}", stated),
                        (f"t_num_{k2}|answer_is", f"The answer is {a}.", stated)]
    out += [("t_whitespace_spaces", "   ", ""), ("t_whitespace_newlines", "\n\n\t\n", ""),
            ("t_empty_box", "\\boxed{}", ""),
            ("t_html_only", "<p></p>", "")]
    return out


# ------------------------------------------------------------------------------------- review 28 styles

NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
                "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
TENS_WORDS = {20: "twenty", 30: "thirty", 40: "forty", 50: "fifty", 60: "sixty", 70: "seventy", 80: "eighty",
              90: "ninety"}


def _number_word(n: int) -> str | None:
    """English words for 0 <= n < 1000 ("two hundred five"), else None."""
    if not 0 <= n < 1000:
        return None
    if n < 20:
        return NUMBER_WORDS[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return TENS_WORDS[tens * 10] + (f"-{NUMBER_WORDS[ones]}" if ones else "")
    hundreds, rest = divmod(n, 100)
    return f"{NUMBER_WORDS[hundreds]} hundred" + (f" {_number_word(rest)}" if rest else "")


def _fourth_wraps(style: str, ans: str) -> list[tuple[str, str]]:
    """The answer in markdown italics / headings / bullets, after "Final Answer:" variants, quoted, with a closing
    mark, in display math, in a sentence."""
    return [(f"{style}|md_italic_star", f"The answer is *{ans}*."), (f"{style}|md_italic_underscore", f"The answer is _{ans}_."),
            (f"{style}|md_bold_italic", f"***{ans}***"), (f"{style}|md_bold_underscore", f"__{ans}__"),
            (f"{style}|md_heading", f"### Answer\n{ans}"), (f"{style}|md_heading_final", f"## Final Answer: {ans}"),
            (f"{style}|md_bullet", f"- Answer: {ans}"),
            (f"{style}|final_answer_title", f"Final Answer: {ans}"),
            (f"{style}|final_answer_minerva", f"Final Answer: The final answer is ${ans}$. I hope it is correct."),
            (f"{style}|bold_answer_colon_inside", f"**Answer:** {ans}"), (f"{style}|bold_answer_colon_outside", f"**Answer**: {ans}"),
            (f"{style}|answer_is_colon_bold", f"the answer is: **{ans}**"), (f"{style}|answer_upper", f"ANSWER: {ans}"),
            (f"{style}|answer_dash", f"Answer - {ans}"), (f"{style}|final_answer_is", f"The final answer is {ans}"),
            (f"{style}|therefore", f"Therefore, the answer is {ans}."),
            (f"{style}|double_quoted", f'The answer is "{ans}".'), (f"{style}|single_quoted", f"The answer is '{ans}'."),
            (f"{style}|smart_quoted", f"The answer is \u201c{ans}\u201d."), (f"{style}|bare_quoted", f'"{ans}"'),
            (f"{style}|bare_period", f"{ans}."), (f"{style}|bare_exclaim", f"{ans}!"),
            (f"{style}|display_bracket", f"\\[{ans}\\]"), (f"{style}|display_dollars", f"$${ans}$$"),
            (f"{style}|boxed_display", f"$$\\boxed{{{ans}}}$$"), (f"{style}|boxed_quoted", f'"\\boxed{{{ans}}}"'),
            (f"{style}|then_explanation", f"{ans}\n\nExplanation: the two marked sides are equal."),
            (f"{style}|in_sentence", f"So {ans} is the answer."), (f"{style}|is_correct", f"{ans} is correct.")]


def _fourth_number_forms(g: str) -> list[tuple[str, str]]:
    """A numeric gold with a unit in LaTeX, in math mode with degrees, in words, with a decimal comma, in
    \\left( \\right), after "=" / "≈" / "about", over 1, and at the rounding edges of its precision."""
    v = float(g)
    out = [("unit_text_cm", f"{g} \\text{{cm}}"), ("unit_thin_mathrm_m2", f"{g}\\,\\mathrm{{m}}^2"),
           ("dollar_circ", f"${g}^\\circ$"), ("dollar_circ_braced", f"${g}^{{\\circ}}$"),
           ("left_right", f"\\left({g}\\right)"), ("equals_prefix", f"= {g}"), ("approx_unicode", f"\u2248 {g}"),
           ("about", f"about {g}"), ("over_one", f"\\frac{{{g}}}{{1}}"), ("tilde", f"~{g}")]
    if v == int(v):
        word = _number_word(abs(int(v)))
        if word:
            out += [("word", word if v >= 0 else f"minus {word}"), ("word_title", word.capitalize())]
    else:
        decimals = len(g.split(".")[1])
        out += [("comma_decimal", g.replace(".", ",")), ("edge_plus_5", g + "5"), ("edge_plus_49", g + "49"),
                ("edge_minus_half", f"{v - 0.5 * 10 ** -decimals:.{decimals + 1}f}"),
                ("edge_plus_half", f"{v + 0.5 * 10 ** -decimals:.{decimals + 1}f}")]
    return out


def _fourth_symbolic_forms(g: str) -> list[tuple[str, str]]:
    """A LaTeX gold with pi and roots spelled otherwise, in \\left( \\right)."""
    out = [("left_right", f"\\left({g}\\right)")]
    if "\\pi" in g:
        out += [("pi_word", g.replace("\\pi", "pi")), ("pi_spaced", g.replace("\\pi", " \\pi "))]
    if "\\sqrt" in g:
        out += [("sqrt_unbraced", re.sub(r"\\sqrt\{(\d)\}", r"\\sqrt \1", g)),
                ("sqrt_call", re.sub(r"\\sqrt\{(\w+)\}", r"sqrt(\1)", g)),
                ("sqrt_power", re.sub(r"\\sqrt\{(\d+)\}", r"\1^{1/2}", g))]
    m = re.fullmatch(r"\\frac\{([^{}]+)\}\{([^{}]+)\}", g)
    if m:
        out.append(("frac_slash_parens", f"({m.group(1)})/({m.group(2)})"))
    return out


def _fourth_letter_forms(L: str, T: str) -> list[tuple[str, str]]:
    return [("option_is_correct", f"Option {L} is correct."), ("letter_is_correct_answer", f"{L} is the correct answer."),
            ("correct_choice_paren", f"The correct choice is ({L})."), ("answer_is_option_paren", f"The answer is option ({L})"),
            ("answer_colon_option", f"Answer: Option {L}"), ("lower_paren", f"({L.lower()})"), ("bold_paren", f"**({L})**"),
            ("textbf_paren", f"\\textbf{{({L})}}"), ("letter_dash_text", f"{L} - {T}"), ("letter_comma_text", f"{L}, {T}"),
            ("none_of_the_above", "None of the above")]


def mathvision_fourth_responses(row: dict, rng: random.Random) -> list[tuple[str, str]]:
    gold, options, letters, T = _mathvision_row(row)
    out: list[tuple[str, str]] = []
    if options:
        L = gold
        out += _fourth_wraps("f_mc_letter", L)
        out += _fourth_wraps("f_mc_text", T)
        for k, a in _fourth_letter_forms(L, T):
            out += [(f"f_mc_{k}|bare", a), (f"f_mc_{k}|boxed", f"\\boxed{{{a}}}")]
    else:
        g = gold[1:-1].strip() if gold.startswith("$") and gold.endswith("$") and len(gold) > 1 else gold
        out += _fourth_wraps("f_ff_gold", g)
        forms = _fourth_number_forms(g) if re.fullmatch(r"-?\d+(?:\.\d+)?", g) else _fourth_symbolic_forms(g)
        for k, a in forms:
            out += [(f"f_num_{k}|bare", a), (f"f_num_{k}|boxed", f"\\boxed{{{a}}}"),
                    (f"f_num_{k}|answer_is", f"The answer is {a}.")]
    return out


def mathvista_fourth_responses(item: dict, rng: random.Random) -> list[tuple[str, str, object]]:
    """(style, response, the answer it states: what a GPT extraction returns for it). Words and decimal commas are
    left out here: what a GPT extraction makes of "five" or "3,5" is not known."""
    gold = str(item["answer"])
    out: list[tuple[str, str, object]] = []
    if item["question_type"] == "multi_choice":
        choices, L, w, W = _mc_gold_and_wrong(item, rng)
        out += [(s, r, L) for s, r in _fourth_wraps("f_mc_letter", L)]
        out += [(s, r, gold) for s, r in _fourth_wraps("f_mc_text", gold)]
        for k, a in _fourth_letter_forms(L, gold):
            stated = a if k == "none_of_the_above" else L
            out += [(f"f_mc_{k}|bare", a, stated), (f"f_mc_{k}|boxed", f"\\boxed{{{a}}}", stated)]
    else:
        out += [(s, r, gold) for s, r in _fourth_wraps("f_ff_gold", gold)]
        if item["answer_type"] in ("integer", "float"):
            for k, a in _fourth_number_forms(gold):
                if k.startswith(("word", "comma_decimal")):
                    continue
                stated = a if k.startswith("edge_") else gold  # a unit, "=", "about", \\left( \\right), /1 dropped
                out += [(f"f_num_{k}|bare", a, stated), (f"f_num_{k}|boxed", f"\\boxed{{{a}}}", stated),
                        (f"f_num_{k}|answer_is", f"The answer is {a}.", stated)]
        elif item["answer_type"] == "list":
            items = json.loads(gold)
            # (the official extraction prompt's list example returns a Python list: what a GPT extraction returns for
            # "2014, 2016" or "(2014, 2016)" is the gold's "[2014, 2016]")
            for k, a in [("list_no_brackets", ", ".join(map(str, items))), ("list_no_spaces", "[" + ",".join(map(str, items)) + "]"),
                         ("list_parens", "(" + ", ".join(map(str, items)) + ")")]:
                out += [(f"f_list_{k}|bare", a, gold), (f"f_list_{k}|boxed", f"\\boxed{{{a}}}", gold)]
    return out


# ------------------------------------------------------------------------------------- review 29 styles


def _fifth_wraps(style: str, ans: str) -> list[tuple[str, str]]:
    return [(f"{style}|bare", ans), (f"{style}|boxed", f"\\boxed{{{ans}}}"), (f"{style}|answer_is", f"The answer is {ans}."),
            (f"{style}|answer_tag_boxed", f"<answer>\\boxed{{{ans}}}</answer>"), (f"{style}|dollar_boxed", f"$\\boxed{{{ans}}}$")]


_NUMBER = r"-?\d+(?:\.\d+)?"


def _fifth_letter_value_forms(L: str, T: str, W: str, WT: str) -> list[tuple[str, str, bool]]:
    """(style, answer, whether it names the gold only) for a gold letter ``L`` with text ``T`` and a wrong letter ``W``
    with text ``WT``: a letter and a value in either order, in text wrappers, agreeing or not."""
    forms = [("value_paren_letter", "{t} ({l})"), ("value_text_paren_letter", "{t} \\text{{ ({l})}}"),
             ("value_circ_text_letter", "{t}^\\circ \\text{{ ({l})}}"), ("value_comma_option", "{t}, option {l}"),
             ("text_paren_letter_value", "\\text{{({l}) }} {t}"), ("letter_colon_value", "{l}: {t}"),
             ("text_option_colon_value", "\\text{{Option {l}: }} {t}"), ("textbf_letter_value", "\\textbf{{({l})}} {t}"),
             ("text_letter_space_value", "\\text{{{l}}}\\ {t}"), ("nested_text_letter", "\\text{{\\textbf{{{l}}}}}"),
             ("mathrm_paren_letter", "\\mathrm{{({l})}}"), ("textrm_letter", "\\textrm{{{l}}}")]
    out = []
    for k, f in forms:
        if "circ" in k and not (re.fullmatch(_NUMBER, T) and re.fullmatch(_NUMBER, WT)):
            continue  # an angle only of a number
        out.append((k, f.format(l=L, t=T), True))
        if "{t}" in f:
            out += [(f"{k}_wrong_value", f.format(l=L, t=WT), False), (f"{k}_wrong_letter", f.format(l=W, t=T), False)]
        else:
            out.append((f"{k}_wrong", f.format(l=W, t=T), False))
    return out


def _fifth_wrapped_value_forms(g: str) -> list[tuple[str, str]]:
    """A free-form gold inside text / font wrappers (nested, around math, with a style switch)."""
    out = [("text", f"\\text{{{g}}}"), ("mathrm", f"\\mathrm{{{g}}}"), ("textbf", f"\\textbf{{{g}}}"),
           ("mathbf", f"\\mathbf{{{g}}}"), ("textrm", f"\\textrm{{{g}}}"), ("boldsymbol", f"\\boldsymbol{{{g}}}"),
           ("text_textbf", f"\\text{{\\textbf{{{g}}}}}"), ("text_dollars", f"\\text{{${g}$}}"),
           ("displaystyle", f"\\displaystyle {g}"), ("textstyle", f"\\textstyle {g}")]
    m = re.fullmatch(r"-?\d+\.\d+", g)
    if m:
        fr = Fraction(g).limit_denominator(100)
        if abs(float(fr) - float(g)) < 1e-9 and fr.denominator > 1:
            out += [("text_frac", f"\\text{{\\frac{{{fr.numerator}}}{{{fr.denominator}}}}}"),
                    ("mathrm_dfrac", f"\\mathrm{{\\dfrac{{{fr.numerator}}}{{{fr.denominator}}}}}")]
    return out


def mathvision_fifth_responses(row: dict, rng: random.Random) -> list[tuple[str, str]]:
    gold, options, letters, T = _mathvision_row(row)
    out: list[tuple[str, str]] = []
    if options:
        W = rng.choice([c for c in letters if c != gold] or [gold])
        WT = options[letters.index(W)]
        for k, a, _ in _fifth_letter_value_forms(gold, T, W, WT):
            out += _fifth_wraps(f"v_mc_{k}", a)
        for c, o in zip(letters, options):  # every option's text and letter (rows whose options are letters: 654, 742)
            out += _fifth_wraps(f"v_mc_each_letter:{c}", c) + _fifth_wraps(f"v_mc_each_text:{c}", f"\\text{{{o}}}")
    else:
        g = gold[1:-1].strip() if gold.startswith("$") and gold.endswith("$") and len(gold) > 1 else gold
        for k, a in _fifth_wrapped_value_forms(g):
            out += _fifth_wraps(f"v_ff_{k}", a)
    return out


def mathvista_fifth_responses(item: dict, rng: random.Random) -> list[tuple[str, str, object]]:
    """(style, response, the answer it states). A letter with another option's value states no one answer: left out
    (what a GPT extraction returns for it is not known)."""
    gold = str(item["answer"])
    out: list[tuple[str, str, object]] = []
    if item["question_type"] == "multi_choice":
        choices, L, w, W = _mc_gold_and_wrong(item, rng)
        for k, a, agrees in _fifth_letter_value_forms(L, gold, W, choices[w]):
            if agrees or k.endswith("_wrong"):
                out += [(s, r, L if agrees else W) for s, r in _fifth_wraps(f"v_mc_{k}", a)]
    elif item["answer_type"] in ("integer", "float"):
        out += [(s, r, gold) for k, a in _fifth_wrapped_value_forms(gold) for s, r in _fifth_wraps(f"v_ff_{k}", a)]
    return out


PREFIXES = ["", "Let me think step by step.\n", "<think>The sides are 3 and 4, so 7 in all.</think>\n",
            "Step 1: the area is 12.\nStep 2: halve it.\n", "From the figure, (A) and (C) are too small. ",
            "答案是 ", "We have $x^2 = 9$.\n\n"]
MARKERS = ["{a}", "\\boxed{{{a}}}", "$\\boxed{{{a}}}$", "The answer is {a}", "the final answer is {a}",
           "Answer: {a}", "**Answer:** {a}", "The correct answer is {a}", "So the answer should be {a}",
           "\\[\\boxed{{{a}}}\\]", "<answer>{a}</answer>", "Final answer: $\\boxed{{{a}}}$",
           "Therefore, the answer is $\\boxed{{{a}}}$.", "the answer is \\({a}\\)", "**{a}**"]
SUFFIXES = ["", ".", "\n", " ", ". Done.", "\nHope this helps.", " (approximately)",
            ".\n\nThe other options are wrong.",
            " because the triangle is isosceles."]


def composed_responses(row: dict, rng: random.Random, n: int) -> list[tuple[str, str]]:
    """``n`` random compositions of a reasoning prefix, an answer marker, an answer form and a suffix."""
    forms = [(s, a) for s, a in mathvision_responses(row, rng)
             if s.endswith("|bare") or s in ("ff_x_equals",)]
    out = []
    for _ in range(n):
        fs, form = rng.choice(forms)
        k = rng.randrange(len(MARKERS))
        resp = rng.choice(PREFIXES) + MARKERS[k].format(a=form) + rng.choice(SUFFIXES)
        out.append((f"composed:{fs.split('|')[0]}:m{k}", resp))
    return out


def run_mathvision(row_stride: int, jobs: int, composed: int = 0, styles: str = "all", row_offset: int = 0,
                   ids: frozenset = frozenset()) -> tuple[list[dict], list[dict], list[dict]]:
    pm = _script("parity_mathvision")
    rows = [json.loads(line) for line in open(DATA / "mathvision" / "test.jsonl", encoding="utf-8") if line.strip()]
    rows = [r for r in rows if str(r["id"]) in ids] if ids else rows[row_offset::row_stride]
    pairs = []
    for row in rows:
        rng = random.Random(f"{SEED}:{row['id']}")
        if composed:
            written = composed_responses(row, rng, composed)
        else:
            written = (mathvision_responses(row, rng) if styles in ("all", "base") else []) + \
                (mathvision_new_responses(row, rng) if styles in ("all", "new") else []) + \
                (mathvision_third_responses(row, rng) if styles in ("all", "third") else []) + \
                (mathvision_fourth_responses(row, rng) if styles in ("all", "fourth") else []) + \
                (mathvision_fifth_responses(row, rng) if styles in ("all", "fifth") else [])
        for style, resp in written:
            pairs.append({"id": str(row["id"]), "shape": style, "response": resp, "answer": str(row["answer"]),
                          "options": row.get("options") or []})
    ref = pm.score_reference(pairs, jobs, 5.0)
    ours = pm.score_ours(pairs, jobs)
    # lmms-eval's port lacks the official utils.py's ``from math import *`` (see parity_mathvision.py): where
    # the port disagrees, the official script's verdict is the port's with the math names restored.
    dis = [i for i, (o, r) in enumerate(zip(ours, ref)) if r["status"] == "ok" and o["ok"] != r["ok"]]
    if dis:
        for i, rm in zip(dis, pm.score_reference([pairs[i] for i in dis], jobs, 5.0, math_namespace=True)):
            ref[i] = dict(ref[i], port_ok=ref[i]["ok"], ok=rm["ok"], status=rm["status"])
    return pairs, ours, ref


# ---------------------------------------------------------------------------------------------- MathVista


def mathvista_responses(item: dict, rng: random.Random) -> list[tuple[str, str, object]]:
    """(style, response, what the response states: the extraction a GPT extractor returns)."""
    gold = str(item["answer"])
    out: list[tuple[str, str, object]] = []
    if item["question_type"] == "multi_choice":
        choices, L, w, W = _mc_gold_and_wrong(item, rng)
        WT = choices[w]
        for s, a, x in [("mc_letter", L, L), ("mc_paren_letter", f"({L})", L), ("mc_letter_dot", f"{L}.", L),
                        ("mc_option_text", gold, gold), ("mc_letter_text", f"{L}. {gold}", L),
                        ("mc_paren_letter_text", f"({L}) {gold}", L), ("mc_fullwidth_letter", _fullwidth(L), L)]:
            out += [(f"{s}|bare", a, x), (f"{s}|boxed", f"So we get \\boxed{{{a}}}.", x),
                    (f"{s}|answer_is", f"The answer is {a}.", x)]
        out += [("mc_quoted_letter", f'The answer is "{L}".', L),
                ("mc_two_answer_is_right_last", f"The answer is {W}. Hmm, the answer is {L}.", L),
                ("mc_two_boxes_right_last", f"\\boxed{{{W}}} ... on reflection \\boxed{{{L}}}", L),
                ("mc_wrong_text", WT, WT),
                ("mc_answer_is_nodot", f"The answer is {L}", L),
                ("mc_bold_letter", f"**{L}**", L),
                ("mc_answer_colon_paren_text", f"Answer: ({L}) {gold}", L),
                ("mc_letter_rparen_text", f"{L}) {gold}", L),
                ("mc_option_word", f"Option {L}", L),
                ("mc_boxed_text_letter", f"\\boxed{{\\text{{{L}}}}}", L),
                ("mc_think_then_box", f"<think>Maybe {W}? No.</think> \\boxed{{{L}}}", L),
                ("mc_two_answer_is_right_first", f"The answer is {L}. Hmm, the answer is {W}.", W)]
    else:
        forms = [("gold", gold, gold)]
        if item["answer_type"] in ("integer", "float"):
            v = float(gold)
            forms += [("units_cm", f"{gold} cm", gold), ("degree_sign", f"{gold}°", gold),
                      ("dollars", f"${gold}$", gold), ("fullwidth_digits", _fullwidth(gold), gold),
                      ("sci_e", f"{v:e}", f"{v:e}"), ("trailing_zero", f"{gold}.0" if "." not in gold else gold + "0",
                                                       f"{gold}.0" if "." not in gold else gold + "0")]
            if v < 0:
                forms.append(("unicode_minus", _unicode_minus(gold), gold))
            if abs(v) >= 1000 and v == int(v):
                # what GPT extracts from "1,000" is the number: the official normaliser's int() fails on the comma
                forms.append(("thousands_comma", f"{int(v):,}", gold))
            if v != int(v):
                fr = Fraction(gold).limit_denominator(100)
                if abs(float(fr) - v) < 1e-9:
                    forms.append(("frac", f"\\frac{{{fr.numerator}}}{{{fr.denominator}}}", gold))
            forms.append(("percent", f"{gold}%", gold))
        for s, a, x in forms:
            out += [(f"{s}|bare", a, x), (f"{s}|boxed", f"So we get \\boxed{{{a}}}.", x),
                    (f"{s}|answer_is", f"The answer is {a}.", x)]
        out += [("ff_quoted", f'The answer is "{gold}".', gold),
                ("ff_answer_is_nodot", f"The answer is {gold}", gold),
                ("ff_bold", f"**Answer:** **{gold}**", gold),
                ("ff_think_then_box", f"<think>Maybe 7? No.</think> \\boxed{{{gold}}}", gold),
                ("ff_x_equals", f"Solving, x = {gold}", gold)]
    out += [("empty", "", ""),
            ("long_answer_last", _filler(rng, LONG_CHARS) + f"\nThe answer is \\boxed{{{gold}}}", gold)]
    return out


def run_mathvista(row_stride: int, styles: str = "all", row_offset: int = 0) -> list[dict]:
    pv = _script("parity_mathvista")
    items = json.loads((DATA / "mathvista_testmini" / "testmini.json").read_text(encoding="utf-8"))
    pids = sorted(items, key=int)[row_offset::row_stride]
    items = {pid: dict(items[pid], pid=pid) for pid in pids}
    ext, norm = [], []
    for pid in pids:
        rng = random.Random(f"{SEED}:{pid}")
        written = (mathvista_responses(items[pid], rng) if styles in ("all", "base") else []) + \
            (mathvista_new_responses(items[pid], rng) if styles in ("all", "new") else []) + \
            (mathvista_third_responses(items[pid], rng) if styles in ("all", "third") else []) + \
            (mathvista_fourth_responses(items[pid], rng) if styles in ("all", "fourth") else []) + \
            (mathvista_fifth_responses(items[pid], rng) if styles in ("all", "fifth") else [])
        for style, resp, stated in written:
            ext.append({"pid": pid, "shape": style, "response": resp})
            norm.append({"pid": pid, "shape": style, "extraction": stated})
    ref_norm, ref_ext = pv.score_reference(items, norm, ext)
    sys.path.insert(0, str(ROOT))
    from mmevo.eval.scoring import extract_mathvista_answer, score_mathvista

    out = []
    for p, rn, re_ in zip(ext, ref_norm, ref_ext):
        item = items[p["pid"]]
        official = re_["official_equal"] if re_["rules_fired"] else rn["official_equal"]
        out.append({"bench": "mathvista", "id": p["pid"], "style": p["shape"], "response": p["response"],
                    "gold": item["answer"], "ours": bool(score_mathvista(p["response"], item)),
                    "official": bool(official), "official_rules_fired": re_["rules_fired"],
                    "ours_extracted": extract_mathvista_answer(p["response"], item),
                    "official_extracted": re_["extraction"] if re_["rules_fired"] else None})
    return out


# MathVista styles where mmevo's rule-based extractor deliberately reads otherwise than a GPT extraction is taken to
# (README, review 26): a marked / boxed answer stating several numbers ("5 or 6", "5-6", "[5, 6]", "(5, 5)",
# "\\{5\\}", "[5]") is read as its first number (an unmarked one as its last), where the GPT extraction returns the
# whole text, which the official integer / float normaliser scores wrong; an option's text in other case ("QUARTER")
# is that option, where the official nearest-choice rule compares case-sensitively.
# Review 27: a non-empty response that states no answer ("\\boxed{}", "<p></p>") scores wrong (``score_mathvista``),
# where a GPT extraction of "" would be mapped by the official normaliser to the nearest (shortest) choice.
# Review 28: a whole response "None of the above" on a row with no such option states no choice and scores wrong (an
# unmarked text naming no option is no answer, README), where a GPT extraction of it would be mapped by the official
# normaliser to the nearest choice text.
VISTA_DOCUMENTED = ("f_mc_none_of_the_above|bare", "t_empty_box", "t_html_only", "n_num_two_or", "n_num_range_", "n_num_interval_", "n_num_vector", "n_num_set",
                    "n_num_list_brackets", "n_mc_text_upper", "n_mc_text_lower", "n_mc_text_title")


def documented(record: dict) -> bool:
    return record["bench"] == "mathvista" and record["style"].startswith(VISTA_DOCUMENTED)


def report(records: list[dict], show: int) -> dict:
    by_bench: dict[str, Counter] = defaultdict(Counter)
    by_style: dict[str, Counter] = defaultdict(Counter)
    examples: dict[str, list] = defaultdict(list)
    for r in records:
        key = f"{r['bench']}:{r['style']}"
        agree = r["ours"] == r["official"]
        for c in (by_bench[r["bench"]], by_style[key]):
            c["pairs"] += 1
            c["disagree"] += not agree
            c["disagree_undocumented"] += not agree and not documented(r)
            c["official_true"] += r["official"]
            c["ours_true"] += r["ours"]
            c["disagree_lmms_port"] += r.get("lmms_port", r["official"]) != r["ours"]
        if not agree and len(examples[key]) < show:
            resp = r["response"]
            examples[key].append({k: v for k, v in r.items() if k not in ("bench", "style", "response")}
                                 | {"response": resp if len(resp) < 300 else resp[:100] + " ... " + resp[-100:]})
    return {"by_bench": {k: dict(v) for k, v in by_bench.items()},
            "disagreeing_styles": {k: dict(v) for k, v in sorted(by_style.items()) if v["disagree"]},
            "by_style": {k: dict(v) for k, v in sorted(by_style.items())},
            "examples": examples}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", choices=["all", "mathvision", "mathvista"], default="all")
    ap.add_argument("--row-stride", type=int, default=1, help="every k-th row")
    ap.add_argument("--row-offset", type=int, default=0, help="starting at this row (another subset of a stride)")
    ap.add_argument("--jobs", type=int, default=1, help="processes per side (at most 2)")
    ap.add_argument("--show", type=int, default=3, help="examples kept per disagreeing style")
    ap.add_argument("--composed", type=int, default=0,
                    help="MATH-V: this many random prefix x marker x answer x suffix compositions per row instead")
    ap.add_argument("--styles", choices=["all", "base", "new", "third", "fourth", "fifth"], default="all",
                    help="base: review 25's styles; new: review 26's (markdown, markers, tables, option-text variants, "
                         "trailing zeros, glued units, ranges, intervals, vectors, yes/no, precision); third: review "
                         "27's (Chinese, full width, boxes, HTML, bracketed letters, think blocks, scientific notation, "
                         "percents, mixed numbers); fourth: review 28's (markdown italics / headings, \"Final Answer:\" variants, "
                         "quotes, display math, units in LaTeX, number words, decimal commas, rounding edges, "
                         "\\left( \\right), pi / root spellings, option sentences, lists); fifth: review 29's (a letter and "
                         "a value in either order, agreeing or not, text / font wrappers around math, every option of "
                         "rows whose options are letters); all: the five")
    ap.add_argument("--ids", default="", help="MATH-V: only these comma-separated row ids (instead of a stride)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    t0 = time.time()
    records: list[dict] = []
    if args.bench in ("all", "mathvision"):
        pairs, ours, ref = run_mathvision(args.row_stride, min(args.jobs, 2), args.composed, args.styles,
                                          args.row_offset, frozenset(filter(None, args.ids.split(","))))
        for p, o, r in zip(pairs, ours, ref):
            if r["status"] != "ok":
                continue  # the official scorer timed out or crashed: no verdict to compare
            records.append({"bench": "mathvision", "id": p["id"], "style": p["shape"], "response": p["response"],
                            "gold": p["answer"], "ours": o["ok"], "official": bool(r["ok"]),
                            "ours_extracted": o["extracted"], "official_extracted": r.get("extracted"),
                            "lmms_port": r.get("port_ok", r["ok"])})
    if args.bench in ("all", "mathvista"):
        records += run_mathvista(args.row_stride, args.styles, args.row_offset)
    rep = report(records, args.show)
    rep["seconds"] = round(time.time() - t0, 1)
    text = json.dumps(rep, indent=1, ensure_ascii=False)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    print(json.dumps({"by_bench": rep["by_bench"], "disagreeing_styles": rep["disagreeing_styles"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
