"""Parity of ``mmevo.eval.scoring.score_mathvision`` with lmms-eval's port of the official MATH-V scorer.

Builds a large, varied, deterministic set of model responses against the MATH-V **test** answers (several
response shapes per row: right / wrong answers, letters, equivalent numeric forms, several boxes, unclosed
boxes, garbage, very long text, ...), scores every (row, response) pair with

* ours: ``score_mathvision`` (run here, in ``.venv``), and
* the reference: ``lmms_eval/tasks/mathvision/utils.py::mathvision_process_results`` of ``lmms-eval==0.7.3``
  (run in ``.venv-parity``, made by ``make parity-env``, by worker subprocesses: this same file with
  ``--worker``),

and writes a JSON report (stdout and ``--out FILE``): pairs, agreement, counts by shape, every disagreement
(with the answer each side extracted), and the official side's time-outs and crashes, reported apart.

The reference is loaded from the installed lmms-eval files: ``eval_utils.py`` then ``utils.py``, each under
its real module name. They are loaded by file because importing the package ``lmms_eval.tasks`` would import
all of lmms-eval's task machinery (and its huge dependency list); nothing is stubbed. The real
``mathvision_process_results`` runs; its ``is_equal`` global is wrapped by a recorder that calls the real
``is_equal`` and only notes its arguments (the official extracted answer).

The official MATH-V ``evaluation/utils.py`` has ``from math import *``, which lmms-eval's ``eval_utils.py``
dropped: in the port, ``eval(str(latex2sympy(x)))`` raises NameError for ``sqrt(3)``, ``pi``, ``log(2)``,
... and such answers are only ever matched as strings. Every disagreement is therefore re-scored by the
reference with the ``math`` names added to ``eval_utils``'s globals (= the official ``utils.py``); a
disagreement that this removes is classed ``port_missing_math_namespace`` (the official MATH-V script agrees
with ours there).

Usage (repo root)::

    make parity-env
    OMP_NUM_THREADS=1 .venv/bin/python scripts/parity_mathvision.py --out runs/parity_mathvision.json
    OMP_NUM_THREADS=1 .venv/bin/python scripts/parity_mathvision.py --rows 300 --per-row 6   # a subset
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "mathvision" / "test.jsonl"
PARITY_PY = ROOT / ".venv-parity" / "bin" / "python"
SEED = 20240611
RESP_TRUNC = 300

# ----------------------------------------------------------------------------------------------------------
# Worker side (runs in .venv-parity, imports nothing from mmevo)
# ----------------------------------------------------------------------------------------------------------


class _ItemTimeout(BaseException):
    # BaseException: the reference's own ``except Exception`` must not swallow it into a verdict.
    pass


def _load_reference():
    """The real lmms-eval ``eval_utils`` and ``utils`` modules, loaded under their real names."""
    import importlib.util

    import lmms_eval  # the package's __init__.py is empty

    base = Path(lmms_eval.__file__).resolve().parent / "tasks" / "mathvision"

    def load(name: str, path: Path):
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod

    eval_utils = load("lmms_eval.tasks.mathvision.eval_utils", base / "eval_utils.py")
    utils = load("lmms_eval.tasks.mathvision.utils", base / "utils.py")
    # utils.py swallows an ImportError of eval_utils: make sure it really bound the real functions.
    assert utils.is_equal is eval_utils.is_equal and utils.find_math_answer is eval_utils.find_math_answer
    return eval_utils, utils


def worker_main(in_file: str, start: int, item_timeout: float, math_namespace: bool) -> None:
    from loguru import logger

    logger.remove()  # utils.py logs through loguru; keep the worker's stdout/stderr for the protocol
    eval_utils, utils = _load_reference()
    real_is_equal = eval_utils.is_equal
    seen: list[str] = []

    def recording_is_equal(asw, gt_asw):
        seen.append(gt_asw)  # process_results calls is_equal(gt, model_answer)
        return real_is_equal(asw, gt_asw)

    utils.is_equal = recording_is_equal
    if math_namespace:
        # What the official MATH-V utils.py has and the lmms-eval port lacks: ``from math import *``.
        for name in dir(math):
            if not name.startswith("_"):
                eval_utils.__dict__.setdefault(name, getattr(math, name))

    def on_alarm(signum, frame):
        raise _ItemTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    with open(in_file, encoding="utf-8") as fh:
        pairs = json.load(fh)
    out = sys.stdout
    sys.stdout = sys.stderr  # anything the reference prints must not corrupt the protocol
    for i in range(start, len(pairs)):
        p = pairs[i]
        doc = {"answer": p["answer"], "options": p["options"]}
        seen.clear()
        rec = {"i": i}
        t0 = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, item_timeout)
        try:
            res = utils.mathvision_process_results(doc, [p["response"]])
            signal.setitimer(signal.ITIMER_REAL, 0)
            rec["ok"] = bool(res["mathvision_standard_eval"]["scores"][0])
            rec["status"] = "ok"
        except _ItemTimeout:
            rec["ok"], rec["status"] = None, "timeout"
        except BaseException as exc:  # noqa: BLE001 - an eval() may raise anything, even SystemExit
            signal.setitimer(signal.ITIMER_REAL, 0)
            rec["ok"], rec["status"] = None, f"error: {type(exc).__name__}: {str(exc)[:200]}"
        rec["ms"] = round((time.perf_counter() - t0) * 1000, 2)
        rec["extracted"] = seen[0] if seen else None
        out.write(json.dumps(rec) + "\n")
        out.flush()


# ----------------------------------------------------------------------------------------------------------
# Response generation (deterministic)
# ----------------------------------------------------------------------------------------------------------

FILLER_WORDS = (
    "we consider the figure and note that the angle at the vertex equals the sum of the two remote interior "
    "angles so the triangle is isosceles and therefore the segments are equal in length"
).split()


def _filler(rng: random.Random, n_chars: int) -> str:
    words, size = [], 0
    while size < n_chars:
        w = rng.choice(FILLER_WORDS)
        words.append(w)
        size += len(w) + 1
    return " ".join(words)


def _num_str(v: float) -> str:
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(round(v, 6))


def _clean_gold(g: str) -> str:
    g = g.strip()
    if g.startswith("$") and g.endswith("$") and len(g) >= 2:
        g = g[1:-1].strip()
    m = re.fullmatch(r"\\boxed\{(.*)\}", g)
    return m.group(1) if m else g


def _gold_value(g: str) -> float | None:
    """Numeric value of a (cleaned) gold answer, for generating equivalent forms; None if not numeric."""
    s = g.replace("{degrees}", "").replace("^{\\circ}", "").strip()
    try:
        return float(s)
    except ValueError:
        pass
    m = re.fullmatch(r"(-?\d+)\s*/\s*(\d+)", s)
    if m:
        return int(m.group(1)) / int(m.group(2))
    try:
        from latex2sympy2_extended import latex2sympy

        v = complex(latex2sympy(s).evalf())
        if v.imag == 0 and math.isfinite(v.real):
            return v.real
    except Exception:
        return None
    return None


def _wrong_value(rng: random.Random, v: float) -> str:
    return _num_str(v + rng.choice([1, -1, 2, 3, 10, 0.5]) if v == int(v) else round(v * 2 + 1, 3))


def _numeric_forms(rng: random.Random, v: float) -> list[tuple[str, str]]:
    """(shape, answer text) equivalent or near-equivalent forms of the value v."""
    n = _num_str(v)
    out = [
        ("num_decimal_point_zero", f"{n}.0" if "." not in n else f"{n}0"),
        ("num_units_cm", f"{n} cm"),
        ("num_text_units", f"{n}\\text{{ cm}}"),
        ("num_text_units_nospace", f"{n}\\text{{cm}}"),
        ("num_mbox_units", f"{n}\\mbox{{ m}}^2"),
        ("num_degrees_circ", f"{n}^\\circ"),
        ("num_degrees_braced", f"{n}^{{\\circ}}"),
        ("num_degrees_unicode", f"{n}°"),
        ("num_degrees_word", f"{n} degrees"),
        ("num_x_equals", f"x = {n}"),
        ("num_two_equals", f"x = y = {n}"),
        ("num_approx", f"\\approx {n}"),
        ("num_percent", f"{n}\\%"),
        ("num_percent_plain", f"{n}%"),
        ("num_spaces", f"  {n}  "),
        ("num_dollars", f"${n}$"),
        ("num_nested_braces", f"{{{{{n}}}}}"),
        ("num_text_wrapped", f"\\text{{{n}}}"),
        ("num_mathbf", f"\\mathbf{{{n}}}"),
        ("num_km", f"{n} km"),
        ("num_units_word", f"{n} units"),
        ("num_m3", f"{n} m^3"),
        ("num_plus_sign", f"+{n}"),
        ("num_words", f"{n} apples"),
        ("num_round_up", _num_str(round(v + 0.004, 3))),
        ("num_round_off", _num_str(round(v + 0.006, 3))),
        ("num_round_boundary", _num_str(round(v + 0.005, 3))),
        ("num_round_1dp", f"{v:.1f}"),
        ("num_round_2dp", f"{v:.2f}"),
        ("num_round_3dp", f"{v:.3f}"),
    ]
    if v == int(v):
        k = int(v)
        out += [
            ("num_frac_unreduced", f"\\frac{{{2 * k}}}{{2}}"),
            ("num_dfrac_unreduced", f"\\dfrac{{{3 * k}}}{{3}}"),
            ("num_slash_unreduced", f"{2 * k}/2"),
            ("num_sqrt_square", f"\\sqrt{{{k * k}}}" if k >= 0 else f"-\\sqrt{{{k * k}}}"),
            ("num_sum_expr", f"{k - 1} + 1"),
            ("num_times_expr", f"{k} \\times 1"),
        ]
        if abs(k) >= 1000:
            out += [
                ("num_thousands_comma", f"{k:,}"),
                ("num_thousands_brace_comma", f"{k:,}".replace(",", "{,}")),
                ("num_thousands_thin_space", f"{k:,}".replace(",", "\\,")),
            ]
        if k and k % 1000 == 0:
            out.append(("num_sci_times", f"{k // 1000} \\times 10^{{3}}"))
        if k < 0:
            out.append(("num_unicode_minus", f"\u2212{-k}"))
        if k == 0:
            out.append(("num_zero_decimal", "0.00"))
    else:
        fr = Fraction(v).limit_denominator(1000)
        if abs(float(fr) - v) < 1e-9:
            out += [
                ("num_as_frac", f"\\frac{{{fr.numerator}}}{{{fr.denominator}}}"),
                ("num_as_dfrac", f"\\dfrac{{{fr.numerator}}}{{{fr.denominator}}}"),
                ("num_as_slash", f"{fr.numerator}/{fr.denominator}"),
            ]
        if 0 < v < 1:
            out.append(("num_leading_dot", f"{v:.3f}".lstrip("0")))
            out.append(("num_as_percent", f"{v * 100:g}\\%"))
        if v < 0:
            out.append(("num_unicode_minus", f"\u2212{_num_str(-v)}"))
    return out


def _symbolic_forms(g: str, v: float | None) -> list[tuple[str, str]]:
    """Equivalent forms of a symbolic (LaTeX) gold answer."""
    out = [
        ("sym_no_spaces", g.replace(" ", "")),
        ("sym_dfrac", g.replace("\\frac", "\\dfrac")),
        ("sym_tfrac", g.replace("\\frac", "\\tfrac")),
        ("sym_dollars", f"${g}$"),
        ("sym_left_right", f"\\left({g}\\right)"),
        ("sym_x_equals", f"x = {g}"),
        ("sym_unbraced_sqrt", re.sub(r"\\sqrt\{(\d)\}", r"\\sqrt\1", g)),
        ("sym_unbraced_frac", re.sub(r"\\frac\{(\d)\}\{(\d)\}", r"\\frac\1\2", g)),
        ("sym_cdot_pi", g.replace("\\pi", "\\cdot \\pi")),
    ]
    if v is not None:
        out += [
            ("sym_approx_2dp", f"{v:.2f}"),
            ("sym_approx_3dp", f"{v:.3f}"),
            ("sym_approx_1dp", f"{v:.1f}"),
            ("sym_approx_sign", f"{g} \\approx {v:.2f}"),
            ("sym_approx_off", f"{v + 0.01:.2f}"),
        ]
    return out


MATH_NAMES = ["e", "\\pi", "\\tau", "e^{2}", "\\ln 2", "\\log_2 8", "\\sin 30", "\\cos(\\pi)", "\\sin(1)",
              "i", "2i", "\\sqrt{-1}", "x", "n", "\\infty", "-\\infty", "\\pi/2", "\\sqrt{2}", "\\exp(1)",
              "\\tan(\\pi/4)", "\\cot 1", "\\sec 0", "\\arcsin(1)", "|{-3}|", "\\lfloor 2.5 \\rfloor", "3!",
              "\\binom{5}{2}", "\\max(2,3)", "\\gcd(12, 18)", "10^{2}", "2^{10}", "\\frac{1}{0}", "0^0"]

GARBAGE = ["", " ", "\n\n", "\\boxed{}", "$$", "🙂🙂🙂", "答案是", "\x00\x01", "((((", "}}}}{", "\\boxed{",
           "oxed{", "is .", "The answer is", "the answer is .", "null", "None", "NaN", "inf", "-inf",
           "\\boxed{\\frac{", "\\boxed{nan}", "\\boxed{None}", "\ud800"]


def build_pairs(rows: list[dict], per_row: int, seed: int = SEED, include_slow: bool = True) -> list[dict]:
    """Responses for each row: a few fixed shapes plus ``per_row`` shapes drawn from the row's pool."""
    pairs = []
    for row in rows:
        rng = random.Random(f"{seed}:{row['id']}")
        gold = str(row["answer"])
        options = row.get("options") or []
        cands: list[tuple[str, str]] = []
        fixed: list[tuple[str, str]] = []
        if options:
            letters = "ABCDE"[: len(options)]
            L = gold.strip()
            wrong_l = rng.choice([c for c in letters if c != L] or ["Z"])
            text = str(options[ord(L) - ord("A")]) if L in letters else ""
            wrong_text = str(options[ord(wrong_l) - ord("A")]) if wrong_l in letters else "?"
            fixed += [
                ("mc_boxed_letter", f"Let me check each option.\nThe correct choice is therefore \\boxed{{{L}}}."),
                ("mc_boxed_wrong_letter", f"After computing, I get \\boxed{{{wrong_l}}}."),
            ]
            cands += [
                ("mc_bare_letter", L),
                ("mc_bare_lower", L.lower()),
                ("mc_paren_letter", f"({L})"),
                ("mc_answer_is", f"The answer is {L}."),
                ("mc_answer_is_paren", f"So the answer is ({L})."),
                ("mc_answer_is_paren_noperiod", f"The answer is ({L})"),
                ("mc_is_letter_sentence", f"Reasoning about the figure.\nThus the right option is {L}."),
                ("mc_letter_newline", f"{L}\nBecause the other options are impossible."),
                ("mc_paren_letter_newline", f"({L})\nexplanation follows"),
                ("mc_paren_letter_letter_newline", f"({L}) {L}\nexplanation"),
                ("mc_starts_with_wrong_newline", f"{wrong_l}\nHmm, actually \\boxed{{{L}}}"),
                ("mc_option_text_boxed", f"\\boxed{{{text}}}"),
                ("mc_option_text_answer_is", f"The answer is {text}"),
                ("mc_option_text_final", f"Computing...\nthe final answer is {text}. Done."),
                ("mc_wrong_option_text_boxed", f"\\boxed{{{wrong_text}}}"),
                ("mc_boxed_lower_letter", f"\\boxed{{{L.lower()}}}"),
                ("mc_boxed_paren_letter", f"\\boxed{{({L})}}"),
                ("mc_boxed_letter_dot_text", f"\\boxed{{{L}. {text}}}"),
                ("mc_boxed_text_letter", f"\\boxed{{\\text{{{L}}}}}"),
                ("mc_boxed_textbf_letter", f"\\boxed{{\\textbf{{{L}}}}}"),
                ("mc_answer_colon", f"Answer: {L}"),
                ("mc_markdown", f"**Answer:** **{L}**"),
                ("mc_two_boxes_last_right", f"\\boxed{{{wrong_l}}} no wait, \\boxed{{{L}}}"),
                ("mc_two_boxes_last_wrong", f"\\boxed{{{L}}} no wait, \\boxed{{{wrong_l}}}"),
                ("mc_option_text_with_letter", f"The answer is ({L}) {text}."),
                ("mc_letter_is_sentence_wrong", f"the answer is {wrong_l}. But maybe {L}."),
                ("mc_trailing_space_letter_dot", f"I pick {L}. "),
                ("mc_boxed_option_text_dollar", f"$\\boxed{{{text}}}$"),
            ]
        else:
            g = _clean_gold(gold)
            v = _gold_value(g)
            wrong = _wrong_value(rng, v) if v is not None else f"{g}+1"
            fixed += [
                ("ff_boxed_gold_raw", f"Step by step...\nSo the answer is $\\boxed{{{gold}}}$."),
                ("ff_boxed_wrong", f"Thus we get \\boxed{{{wrong}}}."),
            ]
            cands += [
                ("ff_boxed_gold_clean", f"\\boxed{{{g}}}"),
                ("ff_answer_is_gold", f"The answer is {g}."),
                ("ff_answer_is_gold_nodot", f"The answer is {g}"),
                ("ff_final_answer_no_box", f"Computing the area.\nthe final answer is {g}. Hope this helps."),
                ("ff_answer_should_be", f"So the answer should be {g}\nDone."),
                ("ff_is_number_sentence", f"Hence the total count is {g}."),
                ("ff_correct_answer_is", f"The correct answer is {g}. Other values fail."),
                ("ff_two_boxes_last_right", f"First \\boxed{{{wrong}}}, but rechecking: \\boxed{{{g}}}"),
                ("ff_two_boxes_last_wrong", f"First \\boxed{{{g}}}, but rechecking: \\boxed{{{wrong}}}"),
                ("ff_unclosed_box", f"So \\boxed{{{g}"),
                ("ff_box_then_braces", f"\\boxed{{{g}}} where {{x}} is the side"),
                ("ff_box_then_closing_brace", f"\\boxed{{{g}}} and then }} stray"),
                ("ff_fbox", f"\\fbox{{{g}}}"),
                ("ff_answer_colon", f"Answer: {g}"),
                ("ff_markdown_bold", f"**Final answer:** {g}"),
                ("ff_lower_boxed_wrong_text", f"\\boxed{{\\text{{{wrong}}}}}"),
                ("ff_letter_instead", f"\\boxed{{{rng.choice('ABCDE')}}}"),
                ("ff_tuple_of_gold", f"\\boxed{{({g}, {g})}}"),
                ("ff_interval", rng.choice(["\\boxed{(0, \\infty)}", "\\boxed{[1, 2)}", f"\\boxed{{(-\\infty, {g}]}}",
                                            "\\boxed{[0,1]}", "\\boxed{(1,2)}"])),
                ("ff_infinity", rng.choice(["\\boxed{\\infty}", "\\boxed{∞}", "\\boxed{+\\infty}", "\\infty"])),
                ("ff_math_names", f"\\boxed{{{rng.choice(MATH_NAMES)}}}"),
                ("ff_inline_parens", f"The answer is \\({g}\\)."),
                ("ff_display_brackets", f"\\[\\boxed{{{g}}}\\]"),
                ("ff_boxed_then_period_text", f"\\boxed{{{g}}}. This completes the proof."),
            ]
            if v is not None and re.fullmatch(r"-?\d+(\.\d+)?", g.strip()):
                cands += [(s, f"\\boxed{{{a}}}") for s, a in _numeric_forms(rng, v)]
                cands += [("num_answer_is_" + s, f"The answer is {a}.") for s, a in _numeric_forms(rng, v)[:6]]
            elif v is not None and re.fullmatch(r"-?\d+\s*/\s*\d+", g.strip()):
                cands += [(s, f"\\boxed{{{a}}}") for s, a in _numeric_forms(rng, v)]
                cands += [(s, f"\\boxed{{{a}}}") for s, a in _symbolic_forms(g, v)]
            elif re.fullmatch(r"\(\s*-?\d+\s*,\s*-?\d+\s*\)", g.strip()):
                a, b = [int(t) for t in re.findall(r"-?\d+", g)]
                cands += [
                    ("tuple_spaces", f"\\boxed{{({a}, {b})}}"),
                    ("tuple_left_right", f"\\boxed{{\\left({a},{b}\\right)}}"),
                    ("tuple_brackets", f"\\boxed{{[{a},{b}]}}"),
                    ("tuple_decimals", f"\\boxed{{({a}.0,{b}.00)}}"),
                    ("tuple_near", f"\\boxed{{({a},{b}.001)}}"),
                    ("tuple_swapped", f"\\boxed{{({b},{a})}}"),
                    ("tuple_xy", f"\\boxed{{x={a}, y={b}}}"),
                    ("tuple_answer_is", f"The answer is ({a}, {b})."),
                ]
            else:
                cands += [(s, f"\\boxed{{{a}}}") for s, a in _symbolic_forms(g, v)]
        cands += [
            ("garbage", rng.choice(GARBAGE)),
            ("garbage_random_unicode", "".join(chr(rng.randrange(32, 0x3000)) for _ in range(rng.randrange(1, 60)))),
            ("long_text_box_end", _filler(rng, 6000) + f"\nTherefore \\boxed{{{gold}}}"),
        ]
        if rng.random() < 0.1:
            cands.append(("very_long_box_start", f"\\boxed{{{gold}}} " + _filler(rng, 30000)))
            cands.append(("very_long_box_end", _filler(rng, 30000) + f" \\boxed{{{gold}}}"))
        # A few responses whose official evaluation hangs (9**387420489 computed by eval, in C: only
        # the worker kill ends it): they exercise the time-out guard.
        if rng.random() < 0.001 and include_slow:
            fixed.append(("hang_power_tower", "\\boxed{9^{9^{9}}}"))
        # de-duplicate shape names (keep first), then sample
        seen_shapes, uniq = set(), []
        for s, r in cands:
            if s not in seen_shapes:
                seen_shapes.add(s)
                uniq.append((s, r))
        picked = fixed + rng.sample(uniq, min(per_row, len(uniq)))
        for shape, response in picked:
            pairs.append({"id": str(row["id"]), "shape": shape, "response": response, "answer": gold,
                          "options": options})
    return pairs


# ----------------------------------------------------------------------------------------------------------
# Scoring: ours (in-process pool) and the reference (worker subprocesses)
# ----------------------------------------------------------------------------------------------------------


def _ours_chunk(chunk: list[dict]) -> list[dict]:
    sys.path.insert(0, str(ROOT))
    from mmevo.eval.scoring import extract_mathvision_answer, score_mathvision

    out = []
    for p in chunk:
        item = {"id": p["id"], "answer": p["answer"], "options": p["options"]}
        t0 = time.perf_counter()
        ok = score_mathvision(p["response"], item)
        ms = (time.perf_counter() - t0) * 1000
        out.append({"ok": bool(ok), "extracted": extract_mathvision_answer(p["response"]), "ms": round(ms, 2)})
    return out


def score_ours(pairs: list[dict], jobs: int) -> list[dict]:
    if jobs <= 1 or len(pairs) < 200:
        return _ours_chunk(pairs)
    from concurrent.futures import ProcessPoolExecutor

    size = max(1, len(pairs) // (jobs * 8))
    chunks = [pairs[i : i + size] for i in range(0, len(pairs), size)]
    with ProcessPoolExecutor(max_workers=jobs) as ex:
        return [r for part in ex.map(_ours_chunk, chunks) for r in part]


def _run_reference_chunk(pairs: list[dict], item_timeout: float, math_namespace: bool, tmpdir: str,
                         tag: str) -> list[dict]:
    """Scores ``pairs`` with a worker; a worker silent past the hard limit is killed (this item: timeout)
    and restarted on the next item."""
    path = os.path.join(tmpdir, f"pairs_{tag}.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(pairs, fh)
    results: list[dict | None] = [None] * len(pairs)
    hard_limit = item_timeout + 15.0  # startup (imports) + the item itself
    start = 0
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    while start < len(pairs):
        cmd = [str(PARITY_PY), os.path.abspath(__file__), "--worker", path, "--start", str(start),
               "--item-timeout", str(item_timeout)] + (["--math-namespace"] if math_namespace else [])
        errf = tempfile.TemporaryFile()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errf, env=env)
        buf, next_i, killed = b"", start, False
        fd = proc.stdout.fileno()
        last = time.monotonic()
        while True:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    rec = json.loads(line)
                    results[rec["i"]] = rec
                    next_i = rec["i"] + 1
                last = time.monotonic()
            elif time.monotonic() - last > hard_limit:
                proc.kill()  # the worker we started: hung in C code (e.g. a huge integer power)
                killed = True
                break
        proc.wait()
        proc.stdout.close()
        errf.seek(0)
        err = errf.read()[-5000:].decode("utf-8", "replace")
        errf.close()
        if killed:
            results[next_i] = {"i": next_i, "ok": None, "status": "timeout (killed)", "ms": hard_limit * 1000,
                               "extracted": None}
            start = next_i + 1
        elif next_i < len(pairs):
            if next_i == start and proc.returncode != 0 and "Traceback" in err and start == 0 and not any(results):
                raise RuntimeError(f"reference worker failed to start:\n{err[-3000:]}")
            # The worker died on this item (e.g. sys.exit from an eval): record and go on.
            results[next_i] = {"i": next_i, "ok": None, "status": f"crash (rc={proc.returncode})",
                               "ms": None, "extracted": None}
            start = next_i + 1
        else:
            start = len(pairs)
    return results  # type: ignore[return-value]


def score_reference(pairs: list[dict], jobs: int, item_timeout: float, math_namespace: bool = False) -> list[dict]:
    if not PARITY_PY.exists():
        raise SystemExit(f"{PARITY_PY.relative_to(ROOT)} not found: run `make parity-env` first")
    jobs = max(1, min(jobs, 2, len(pairs)))
    parts = [pairs[k::jobs] for k in range(jobs)]
    outs: list[list[dict] | None] = [None] * jobs
    errors: list[BaseException] = []
    with tempfile.TemporaryDirectory(prefix="parity_mathv_") as tmpdir:

        def run(k: int) -> None:
            try:
                outs[k] = _run_reference_chunk(parts[k], item_timeout, math_namespace, tmpdir, f"{k}")
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(k,)) for k in range(jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
    merged: list[dict | None] = [None] * len(pairs)
    for k in range(jobs):
        for j, rec in enumerate(outs[k]):
            merged[k + j * jobs] = rec
    return merged  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------------------


def classify(ours: dict, ref: dict, ref_math: dict | None) -> str:
    if ref_math is not None and ref_math.get("status") == "ok" and ref_math["ok"] == ours["ok"]:
        return "port_missing_math_namespace"
    if ours["extracted"] != ref.get("extracted"):
        return "extraction_differs"
    return "equality_differs"


def run_parity(data: Path, rows_limit: int | None, per_row: int, jobs: int, item_timeout: float,
               include_slow: bool = True, row_stride: int = 1) -> dict:
    t_start = time.time()
    with open(data, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    rows = rows[::row_stride]
    if rows_limit:
        rows = rows[:rows_limit]
    pairs = build_pairs(rows, per_row, include_slow=include_slow)
    t0 = time.time()
    ref = score_reference(pairs, jobs, item_timeout)
    t_ref = time.time() - t0
    t0 = time.time()
    ours = score_ours(pairs, jobs)
    t_ours = time.time() - t0

    cmp_idx = [i for i, r in enumerate(ref) if r["status"] == "ok"]
    dis_idx = [i for i in cmp_idx if ours[i]["ok"] != ref[i]["ok"]]
    ref_math: dict[int, dict] = {}
    if dis_idx:
        rm = score_reference([pairs[i] for i in dis_idx], min(jobs, 2), item_timeout, math_namespace=True)
        ref_math = dict(zip(dis_idx, rm))

    by_shape: dict[str, Counter] = defaultdict(Counter)
    for i, p in enumerate(pairs):
        c = by_shape[p["shape"]]
        c["pairs"] += 1
        c["ours_true"] += ours[i]["ok"]
        if ref[i]["status"] != "ok":
            c["official_not_ok"] += 1
        elif ours[i]["ok"] == ref[i]["ok"]:
            c["agree"] += 1
        else:
            c["disagree"] += 1
        c["official_true"] += bool(ref[i]["ok"])

    def rec(i: int) -> dict:
        p = pairs[i]
        gold_value = ""
        if p["options"]:
            k = ord(p["answer"].strip()[:1] or "?") - ord("A")
            gold_value = str(p["options"][k]) if 0 <= k < len(p["options"]) else ""
        r = p["response"]
        d = {
            "id": p["id"],
            "shape": p["shape"],
            "response": r if len(r) <= RESP_TRUNC else r[:150] + f" ...[{len(r)} chars]... " + r[-150:],
            "gold": p["answer"],
            "gold_option_text": gold_value,
            "ours": ours[i]["ok"],
            "official": ref[i]["ok"],
            "ours_extracted": ours[i]["extracted"],
            "official_extracted": ref[i].get("extracted"),
            "official_status": ref[i]["status"],
        }
        if i in ref_math:
            d["official_with_math_namespace"] = ref_math[i]["ok"]
            d["class"] = classify(ours[i], ref[i], ref_math[i])
        return d

    disagreements = [rec(i) for i in dis_idx]
    not_ok = [rec(i) for i, r in enumerate(ref) if r["status"] != "ok"]
    n_cmp = len(cmp_idx)
    agree = n_cmp - len(dis_idx)
    slow_ours = sorted(range(len(pairs)), key=lambda i: -ours[i]["ms"])[:5]
    report = {
        "data": str(data.relative_to(ROOT.parent)) if data.is_relative_to(ROOT.parent) else data.name,
        "rows": len(rows),
        "pairs": len(pairs),
        "compared": n_cmp,
        "agree": agree,
        "agreement_pct": round(100.0 * agree / max(n_cmp, 1), 4),
        "disagree": len(dis_idx),
        "disagreement_classes": dict(Counter(d["class"] for d in disagreements)),
        # agreement with the official MATH-V script proper (= the reference with ``from math import *``)
        "agree_with_math_namespace_restored": agree + sum(d["class"] == "port_missing_math_namespace"
                                                          for d in disagreements),
        "official_timed_out": sum(1 for r in ref if r["status"].startswith("timeout")),
        "official_errors": sum(1 for r in ref if r["status"] != "ok" and not r["status"].startswith("timeout")),
        "official_true": sum(1 for r in ref if r["ok"]),
        "ours_true": sum(1 for o in ours if o["ok"]),
        "seconds": {"total": round(time.time() - t_start, 1), "official": round(t_ref, 1),
                    "ours": round(t_ours, 1)},
        "ours_slowest_ms": [{"id": pairs[i]["id"], "shape": pairs[i]["shape"], "ms": ours[i]["ms"]}
                            for i in slow_ours],
        "by_shape": {s: dict(c) for s, c in sorted(by_shape.items())},
        "official_not_ok": not_ok,
        "disagreements": disagreements,
    }
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="MATH-V jsonl (default: test.jsonl)")
    ap.add_argument("--rows", type=int, default=None, help="only the first N rows (after --row-stride)")
    ap.add_argument("--row-stride", type=int, default=1, help="every k-th row")
    ap.add_argument("--per-row", type=int, default=8, help="sampled shapes per row, on top of 2 fixed ones")
    ap.add_argument("--jobs", type=int, default=2, help="processes per side (at most 2)")
    ap.add_argument("--item-timeout", type=float, default=5.0, help="seconds per pair on the official side")
    ap.add_argument("--no-slow", action="store_true", help="leave out the shapes that hang the official side")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON report here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--math-namespace", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker_main(args.worker, args.start, args.item_timeout, args.math_namespace)
        return 0
    if not args.data.is_file():  # a fresh clone has no ../shared/data: say where the file comes from
        raise SystemExit(f"--data {args.data}: no such file; give MATH-V's test.jsonl or testmini.jsonl "
                         "(the mathllm/MATH-V repository's; default: the copy in shared/data beside this checkout)")
    report = run_parity(args.data, args.rows, args.per_row, min(args.jobs, 2), args.item_timeout,
                        include_slow=not args.no_slow, row_stride=args.row_stride)
    text = json.dumps(report, indent=1, ensure_ascii=False)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
