"""Parity of ``mmevo.eval.scoring``'s MathVista scorer with lmms-eval's port of the official MathVista scoring.

Two comparisons over all rows of MathVista ``testmini.json``:

1. **Normalisation + verdict.** A large, varied, deterministic set of *extractions* (what the official GPT
   extractor could output: the exact gold, reformatted numbers, rounding edge cases at the row's precision,
   letters, choice texts with case / space / typo variants, wrong choices, lists, empty, ``None``, garbage,
   non-string values, ...), each normalised and judged by

   * ours: ``normalize_mathvista_extraction(extraction, item)`` and ``mathvista_is_correct(extraction, item)``
     (the final comparison ``score_mathvista`` uses), run here in ``.venv``, and
   * the reference: ``MathVistaEvaluator.normalize_extracted_answer`` + ``safe_equal`` of
     ``lmms_eval/tasks/mathvista/mathvista_evals.py`` (``lmms-eval==0.7.3``), run in ``.venv-parity``
     (``make parity-env``) by a worker subprocess (this same file with ``--worker``).

   The normalised values are compared as JSON (``"1.2"`` vs ``null`` ...) and so are the verdicts.

2. **Rule-based extraction.** Full *responses* (bare answers, ``The answer is "X".``, chains of thought ending
   in an answer in various phrasings, ...) are extracted by ours (``extract_mathvista_answer``) and by the
   reference ``MathVistaEvaluator.extract_answer(response, problem, quick_extract=True)`` with its GPT call
   stubbed to return ``""``: what remains are the official rule-based fast paths (the response is a choice
   text / parses as ``int`` / as ``float``, and the ``The answer is "(.*)"\\.`` quick regex). Where those rules
   fire, both sides' final predictions (extraction then normalisation) and verdicts must agree; where they
   do not fire (the official pipeline would ask GPT), ours may extract more: those pairs are only counted
   (and checked against the answer each response was written to state).

The reference module is loaded from the installed lmms-eval file under its real module name (importing the
package ``lmms_eval.tasks`` would import all of lmms-eval's task machinery). Its one import that is not
installed in ``.venv-parity`` is ``lmms_eval.llm_judge`` (the GPT judge client: openai, httpx, ...): the worker
puts a stub module under that name, with just the three names ``mathvista_evals.py`` imports
(``Request``, ``ServerConfig``, ``get_server``; the class body builds a ``ServerConfig`` and calls
``get_server``). Nothing else is stubbed: the real ``normalize_extracted_answer``, ``safe_equal``,
``get_most_similar`` (``Levenshtein.distance``) and ``extract_answer`` run; only the evaluator's
``get_chat_response`` (the GPT request) is replaced by one returning ``""`` and recording that it was called.

Where lmms-eval and the official repository (``evaluation/calculate_score.py``, ``evaluation/extract_answer.py``
of lupantech/MathVista) differ, the official one is right; the worker also computes the official
``safe_equal`` (``prediction == answer``; lmms-eval compares ``str(.).strip()``) so that such disagreements are
classified. Every disagreement gets a class (see ``classify_*``); ``tests/test_parity_mathvista.py``
allow-lists the documented ones.

Usage (repo root)::

    make parity-env
    OMP_NUM_THREADS=1 .venv/bin/python scripts/parity_mathvista.py --out runs/parity_mathvista.json
    OMP_NUM_THREADS=1 .venv/bin/python scripts/parity_mathvista.py --row-stride 4   # a subset
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "mathvista_testmini" / "testmini.json"
PARITY_PY = ROOT / ".venv-parity" / "bin" / "python"
SEED = 20240612
TRUNC = 300

# ----------------------------------------------------------------------------------------------------------
# Worker side (runs in .venv-parity, imports nothing from mmevo)
# ----------------------------------------------------------------------------------------------------------


def _install_llm_judge_stub() -> None:
    """A stand-in for ``lmms_eval.llm_judge`` (the GPT judge client, whose dependencies are not installed):
    only the names ``mathvista_evals.py`` imports. Nothing of it is used by the code under comparison."""
    import types

    stub = types.ModuleType("lmms_eval.llm_judge")

    class ServerConfig:  # noqa: D401 - plain record
        def __init__(self, **kwargs):
            self.__dict__.update(kwargs)

    class Request:
        def __init__(self, **kwargs):
            self.__dict__.update(kwargs)

    def get_server(server_name=None, config=None):
        return None  # never used: get_chat_response is replaced

    stub.ServerConfig, stub.Request, stub.get_server = ServerConfig, Request, get_server
    sys.modules["lmms_eval.llm_judge"] = stub


def _load_reference():
    import importlib.util

    import lmms_eval  # the package's __init__.py is empty

    _install_llm_judge_stub()
    path = Path(lmms_eval.__file__).resolve().parent / "tasks" / "mathvista" / "mathvista_evals.py"
    name = "lmms_eval.tasks.mathvista.mathvista_evals"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    import Levenshtein

    assert mod.distance is Levenshtein.distance  # the real edit distance
    return mod


def worker_main(in_file: str, out_file: str) -> None:
    from loguru import logger

    logger.remove()  # extract_answer logs through loguru
    mod = _load_reference()
    ev = mod.MathVistaEvaluator()
    gpt_calls: list[int] = []

    def no_gpt(prompt, *args, **kwargs):  # the GPT request: disabled
        gpt_calls.append(1)
        return ""

    ev.get_chat_response = no_gpt
    with open(in_file, encoding="utf-8") as fh:
        job = json.load(fh)
    items = job["items"]

    def normalise(extraction, item):
        try:
            pred = ev.normalize_extracted_answer(extraction, item["choices"], item["question_type"],
                                                 item["answer_type"], item["precision"])
            return {"pred": pred, "status": "ok", "lmms_equal": bool(ev.safe_equal(pred, item["answer"])),
                    # official calculate_score.py safe_equal: ``prediction == answer``
                    "official_equal": bool(pred == item["answer"])}
        except Exception as exc:  # noqa: BLE001 - e.g. the AssertionError of an empty choice list
            return {"pred": None, "status": f"error: {type(exc).__name__}: {str(exc)[:200]}",
                    "lmms_equal": False, "official_equal": False}

    norm_out = []
    for p in job["norm"]:
        norm_out.append(normalise(p["extraction"], items[p["pid"]]))
    ext_out = []
    for p in job["ext"]:
        item = items[p["pid"]]
        problem = dict(item, query=item["question"])  # lmms-eval reads "query"; the official, "question"
        gpt_calls.clear()
        try:
            extraction = ev.extract_answer(p["response"], problem, quick_extract=True)
            status = "ok"
        except Exception as exc:  # noqa: BLE001
            extraction, status = "", f"error: {type(exc).__name__}: {str(exc)[:200]}"
        rec = {"extraction": extraction, "rules_fired": not gpt_calls and status == "ok", "status": status}
        rec.update(normalise(extraction, item))
        ext_out.append(rec)
    with open(out_file, "w", encoding="utf-8") as fh:
        json.dump({"norm": norm_out, "ext": ext_out}, fh)


# ----------------------------------------------------------------------------------------------------------
# Extraction generation (deterministic)
# ----------------------------------------------------------------------------------------------------------

GARBAGE = ["", " ", "\n", "None", "null", "N/A", "nan", "inf", "-inf", "🙂", "答案", "\x00", "((", ")(", "[]",
           "[", "{}", "The answer is", "I cannot determine the answer.", "\\boxed{}", "$$", "\ud800", "0x1A",
           "1_000", "١٢", "٣"]
FILLER = ("we look at the figure carefully and compare the quantities shown before choosing the final "
          "value for the question").split()


def _filler(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(FILLER) for _ in range(n_words))


def _typo(rng: random.Random, s: str) -> str:
    """One random edit (drop / duplicate / swap / replace a character)."""
    if not s:
        return "x"
    i = rng.randrange(len(s))
    op = rng.randrange(4)
    if op == 0:
        return s[:i] + s[i + 1 :]
    if op == 1:
        return s[:i] + s[i] + s[i:]
    if op == 2 and i + 1 < len(s):
        return s[:i] + s[i + 1] + s[i] + s[i + 2 :]
    return s[:i] + rng.choice("abcxyz019 ") + s[i + 1 :]


def _mc_extractions(rng: random.Random, item: dict) -> list[tuple[str, object]]:
    choices = [str(c) for c in item["choices"]]
    gold = item["answer"]
    k = choices.index(gold) if gold in choices else 0
    L = chr(ord("A") + k)
    others = [i for i in range(len(choices)) if choices[i] != gold] or [k]
    w = rng.choice(others)
    W, wtext = chr(ord("A") + w), choices[w]
    beyond = chr(ord("A") + len(choices))
    out = [
        ("mc_gold_text", gold),
        ("mc_gold_letter", L),
        ("mc_gold_letter_paren", f"({L})"),
        ("mc_gold_letter_paren_lower", f"({L.lower()})"),
        ("mc_gold_letter_lower", L.lower()),
        ("mc_gold_letter_dot", f"{L}."),
        ("mc_gold_letter_rparen", f"{L})"),
        ("mc_gold_letter_colon_text", f"{L}: {gold}"),
        ("mc_gold_paren_letter_text", f"({L}) {gold}"),
        ("mc_gold_text_paren_letter", f"{gold} ({L})"),
        ("mc_gold_option_word", f"Option {L}"),
        ("mc_gold_text_upper", gold.upper()),
        ("mc_gold_text_lower", gold.lower()),
        ("mc_gold_text_spaces", f"  {gold}\n"),
        ("mc_gold_text_inner_spaces", gold.replace(" ", "  ")),
        ("mc_gold_text_typo", _typo(rng, gold)),
        ("mc_gold_text_typo2", _typo(rng, _typo(rng, gold))),
        ("mc_gold_text_period", gold + "."),
        ("mc_gold_text_quoted", f'"{gold}"'),
        ("mc_gold_text_dollars", f"${gold}$"),
        ("mc_gold_text_sentence", f"The answer is {gold}"),
        ("mc_gold_text_no_degree", gold.replace("°", "")),
        ("mc_wrong_letter", W),
        ("mc_wrong_letter_paren", f"({W})"),
        ("mc_wrong_text", wtext),
        ("mc_wrong_text_typo", _typo(rng, wtext)),
        ("mc_two_letters_paren", f"({W}) or ({L})"),
        ("mc_letter_beyond", beyond),
        ("mc_letter_beyond_paren", f"({beyond})"),
        ("mc_letter_z", "Z"),
        ("mc_empty", ""),
        ("mc_none", None),
        ("mc_int_value", rng.choice([0, 1, 2, 45, 145])),
        ("mc_float_value", 1.5),
        ("mc_list_value", [L]),
        ("mc_bool_value", True),
        ("mc_garbage", rng.choice(GARBAGE)),
        ("mc_long_text", _filler(rng, 300) + " " + gold),
        ("mc_very_long_text", _filler(rng, 1500) + " " + gold),
        ("mc_number_in_text", f"{rng.randrange(0, 200)}"),
    ]
    return out


def _fmt_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(x)


def _int_extractions(rng: random.Random, item: dict) -> list[tuple[str, object]]:
    g = item["answer"]
    v = int(g)
    return [
        ("int_gold", g),
        ("int_gold_spaces", f" {g} "),
        ("int_gold_newline", f"{g}\n"),
        ("int_gold_point_zero", f"{g}.0"),
        ("int_gold_point", f"{g}."),
        ("int_gold_two_decimals", f"{g}.00"),
        ("int_gold_plus_frac", f"{g}.7"),  # int(float(.)) truncates
        ("int_gold_minus_frac", f"{v - 1}.9999"),
        ("int_gold_nearly", f"{v}.99999999999999999"),  # float rounds up to v+1
        ("int_gold_plus_sign", f"+{g}"),
        ("int_negative", f"-{abs(v)}"),
        ("int_negative_zero", "-0"),
        ("int_gold_units", f"{g} cm"),
        ("int_gold_dollars", f"${g}$"),
        ("int_gold_sci", f"{v}e0"),
        ("int_gold_sci_exp", f"{v / 10}e1" if v else "0e5"),
        ("int_gold_thousands", f"{v:,}"),
        ("int_gold_underscore", f"{v:_}"),
        ("int_wrong", str(v + rng.choice([1, -1, 2, 10]))),
        ("int_gold_leading_zeros", f"00{g}"),
        ("int_gold_int_value", v),
        ("int_gold_float_value", float(v)),
        ("int_gold_float_value_frac", v + 0.5),
        ("int_gold_list_value", [v]),
        ("int_bool_value", rng.choice([True, False])),
        ("int_huge", "1e400"),
        ("int_huge_digits", "9" * 40),
        ("int_empty", ""),
        ("int_none", None),
        ("int_garbage", rng.choice(GARBAGE)),
        ("int_fraction", f"{2 * v}/2"),
        ("int_unicode_minus", f"\u2212{abs(v)}"),
        ("int_fullwidth", "".join(chr(ord(c) + 0xFEE0) if c.isdigit() else c for c in g)),
    ]


def _float_extractions(rng: random.Random, item: dict) -> list[tuple[str, object]]:
    g = item["answer"]
    p = int(item["precision"])
    v = float(g)
    step = 10.0**-p
    return [
        ("float_gold", g),
        ("float_gold_trailing_zero", f"{v:.{p + 1}f}"),
        ("float_gold_more_digits", f"{v:.{p + 3}f}"),
        ("float_gold_plus_small", f"{v + 0.4 * step:.{p + 2}f}"),
        ("float_gold_minus_small", f"{v - 0.4 * step:.{p + 2}f}"),
        ("float_half_up", f"{v + 0.5 * step:.{p + 1}f}"),  # round-half-even on a binary float
        ("float_half_down", f"{v - 0.5 * step:.{p + 1}f}"),
        ("float_half_up_long", f"{v + 0.5 * step:.{p + 4}f}"),
        ("float_just_over_half", f"{v + 0.51 * step:.{p + 3}f}"),
        ("float_less_precision", f"{v:.{max(p - 1, 0)}f}"),
        ("float_as_int", str(int(v))),
        ("float_gold_spaces", f" {g} "),
        ("float_gold_units", f"{g} cm"),
        ("float_gold_dollars", f"${g}$"),
        ("float_gold_sci", f"{v:e}"),
        ("float_gold_sci_upper", f"{v:E}"),
        ("float_negative", f"-{g}"),
        ("float_plus_sign", f"+{g}"),
        ("float_thousands", f"{v * 1000:,.{p}f}"),
        ("float_percent", f"{g}%"),
        ("float_wrong", f"{v + step:.{p}f}"),
        ("float_gold_float_value", v),
        ("float_gold_float_value_more", v + 0.3 * step),
        ("float_int_value", int(v)),
        ("float_leading_dot", f".{g.split('.')[-1]}" if v < 1 else f"{g}"),
        ("float_nan", rng.choice(["nan", "NaN", "-nan"])),
        ("float_inf", rng.choice(["inf", "-inf", "Infinity", "1e400"])),
        ("float_empty", ""),
        ("float_none", None),
        ("float_garbage", rng.choice(GARBAGE)),
        ("float_fraction", "1/2"),
        ("float_underscore", f"1_0{g}"),
    ]


def _list_extractions(rng: random.Random, item: dict) -> list[tuple[str, object]]:
    g = item["answer"]
    vals = json.loads(g)
    return [
        ("list_gold", g),
        ("list_gold_no_spaces", g.replace(" ", "")),
        ("list_gold_extra_spaces", g.replace(", ", " , ")),
        ("list_gold_outer_spaces", f" {g} "),
        ("list_gold_parens", "(" + g[1:-1] + ")"),
        ("list_gold_floats", str([float(x) for x in vals])),
        ("list_gold_value", vals),
        ("list_gold_tuple_str", str(tuple(vals))),
        ("list_reversed", str(vals[::-1])),
        ("list_first_only", str(vals[:1])),
        ("list_bare", ", ".join(str(x) for x in vals)),
        ("list_empty", ""),
        ("list_none", None),
        ("list_empty_list", []),
        ("list_garbage", rng.choice(GARBAGE)),
    ]


def build_extractions(items: dict[str, dict], pids: list[str], per_row: int, seed: int = SEED) -> list[dict]:
    """``per_row`` extractions per row, sampled from the row's pool (the exact gold always included)."""
    out = []
    for pid in pids:
        item = items[pid]
        rng = random.Random(f"{seed}:norm:{pid}")
        if item["question_type"] == "multi_choice":
            pool = _mc_extractions(rng, item)
        elif item["answer_type"] == "integer":
            pool = _int_extractions(rng, item)
        elif item["answer_type"] == "float":
            pool = _float_extractions(rng, item)
        else:
            pool = _list_extractions(rng, item)
        picked = pool[:1] + rng.sample(pool[1:], min(per_row - 1, len(pool) - 1))
        for shape, extraction in picked:
            out.append({"pid": pid, "shape": shape, "extraction": extraction})
    return out


# ----------------------------------------------------------------------------------------------------------
# Response generation (deterministic)
# ----------------------------------------------------------------------------------------------------------


def _gold_forms(item: dict) -> tuple[str, str, str | None, str]:
    """(gold text, a wrong answer text, the gold letter or None, a wrong letter)."""
    g = item["answer"]
    if item["question_type"] == "multi_choice":
        choices = [str(c) for c in item["choices"]]
        k = choices.index(g)
        w = next((i for i in range(len(choices)) if choices[i] != g), k)
        return g, choices[w], chr(ord("A") + k), chr(ord("A") + w)
    if item["answer_type"] == "integer":
        return g, str(int(g) + 1), None, "A"
    if item["answer_type"] == "float":
        p = int(item["precision"])
        return g, f"{float(g) + 10.0**-p:.{p}f}", None, "A"
    vals = json.loads(g)
    return g, str(vals[::-1] if len(vals) > 1 else [vals[0] + 1]), None, "A"


def build_responses(items: dict[str, dict], pids: list[str], per_row: int, seed: int = SEED) -> list[dict]:
    """Full responses: ``intended`` is True / False when the response states the gold / a wrong answer (None
    when it states nothing usable)."""
    out = []
    for pid in pids:
        item = items[pid]
        rng = random.Random(f"{seed}:resp:{pid}")
        g, wrong, L, W = _gold_forms(item)
        mc = item["question_type"] == "multi_choice"
        cot = _filler(rng, rng.randrange(10, 60))
        rule_pool: list[tuple[str, str, bool | None]] = [
            ("bare_gold", g, True),
            ("bare_gold_spaces", f" {g} ", True),
            ("bare_gold_newline", f"{g}\n", True),
            ("bare_wrong", wrong, False),
            ("empty", "", None),
            ("quick_quoted_gold", f'The answer is "{g}".', True),
            ("quick_quoted_wrong", f'The answer is "{wrong}".', False),
            ("quick_cot_quoted_gold", f'{cot}.\nThe answer is "{g}".', True),
            ("quick_quoted_twice", f'The answer is "{wrong}". Wait, no. The answer is "{g}".', True),
            ("quick_quoted_no_period", f'The answer is "{g}"', True),
        ]
        if mc:
            rule_pool += [
                ("quick_quoted_letter", f'The answer is "{L}".', True),
                # "(B)" is the option letter B where the choice texts are "(a)".."(e)" (pids 168, 849)
                ("bare_gold_upper", g.upper(), None if re.fullmatch(r"\(?[a-z]\)?", g) else True),
                ("bare_letter", L, True),
                ("bare_letter_paren", f"({L})", True),
            ]
        elif item["answer_type"] in ("integer", "float"):
            v = float(g)
            rule_pool += [
                ("bare_plus", f"+{g}", True),
                ("bare_point_zero", f"{g}.0" if "." not in g else f"{g}0", True),
                ("bare_sci", f"{v:e}", True),
                ("bare_underscore", f"1_{g.lstrip('-')}", False),  # int("1_5") == 15
                ("bare_nan", rng.choice(["nan", "inf", "-inf", "NaN"]), False),
                ("bare_unicode_digits", "".join(chr(ord(c) - 48 + 0x660) if c.isdigit() else c for c in g), True),
                ("bare_negative", f"-{g}" if v > 0 else str(1 - v), False),
                ("bare_units", f"{g} cm", True),
            ]
        if mc:
            ans_pool = [
                ("cot_answer_is_letter", f"{cot}. So the answer is {L}.", True),
                ("cot_answer_is_paren_letter", f"{cot}.\nThe correct option is ({L}).", True),
                ("cot_answer_text", f"{cot}.\nTherefore, the answer is {g}.", True),
                ("cot_boxed_letter", f"{cot}. \\boxed{{{L}}}", True),
                ("cot_boxed_text", f"{cot}. \\boxed{{{g}}}", True),
                ("cot_answer_colon_letter_text", f"{cot}\nAnswer: ({L}) {g}", True),
                ("cot_bold_answer", f"{cot}\n**Answer:** {L}", True),
                ("cot_final_answer_wrong", f"{cot}\nFinal answer: {W}", False),
                ("cot_letter_at_end", f"{cot}, which matches option ({L})", True),
                ("cot_no_answer", f"{cot}.", None),
            ]
        else:
            ans_pool = [
                ("cot_answer_is", f"{cot}. So the answer is {g}.", True),
                ("cot_answer_is_units", f"{cot}.\nThe answer is {g} units.", True),
                ("cot_boxed", f"{cot}. \\boxed{{{g}}}", True),
                ("cot_answer_colon", f"{cot}\nAnswer: {g}", True),
                ("cot_bold_answer", f"{cot}\n**Final Answer:** {g}", True),
                ("cot_answer_wrong", f"{cot}. The final answer is {wrong}.", False),
                ("cot_equation_end", f"{cot}: x = {g}", True),
                ("cot_dollars", f"{cot}. The answer is ${g}$.", True),
                ("cot_no_answer", f"{cot}.", None),
            ]
        picked = rule_pool[:1] + rng.sample(rule_pool[1:], min(per_row // 2, len(rule_pool) - 1))
        picked += rng.sample(ans_pool, min(per_row - len(picked), len(ans_pool)))
        for shape, response, intended in picked:
            out.append({"pid": pid, "shape": shape, "response": response, "intended": intended})
    return out


# ----------------------------------------------------------------------------------------------------------
# Scoring: ours (here) and the reference (worker subprocess)
# ----------------------------------------------------------------------------------------------------------


def _jsonable(x):
    try:
        json.dumps(x)
        return x
    except (TypeError, ValueError):
        return repr(x)


def score_ours(items: dict[str, dict], norm: list[dict], ext: list[dict]) -> tuple[list[dict], list[dict]]:
    sys.path.insert(0, str(ROOT))
    from mmevo.eval.scoring import (
        extract_mathvista_answer,
        mathvista_is_correct,
        normalize_mathvista_extraction,
        score_mathvista,
    )

    norm_out = []
    for p in norm:
        item = items[p["pid"]]
        try:
            pred = normalize_mathvista_extraction(p["extraction"], item)
            status = "ok"
        except Exception as exc:  # noqa: BLE001 - a raise is a finding (ours must never raise)
            pred, status = None, f"error: {type(exc).__name__}: {exc}"
        norm_out.append({"pred": pred, "ok": bool(mathvista_is_correct(p["extraction"], item)), "status": status})
    ext_out = []
    for p in ext:
        item = items[p["pid"]]
        extraction = extract_mathvista_answer(p["response"], item)
        # as score_mathvista: nothing read from a non-empty response has no normalised value (scored wrong)
        pred = normalize_mathvista_extraction(extraction, item) if extraction != "" or not p["response"].strip() else None
        ext_out.append({"extraction": extraction, "pred": pred, "ok": bool(score_mathvista(p["response"], item))})
    return norm_out, ext_out


def score_reference(items: dict[str, dict], norm: list[dict], ext: list[dict]) -> tuple[list[dict], list[dict]]:
    if not PARITY_PY.exists():
        raise SystemExit(f"{PARITY_PY.relative_to(ROOT)} not found: run `make parity-env` first")
    with tempfile.TemporaryDirectory(prefix="parity_mathvista_") as tmp:
        in_file, out_file = os.path.join(tmp, "in.json"), os.path.join(tmp, "out.json")
        with open(in_file, "w", encoding="utf-8") as fh:
            json.dump({"items": {pid: items[pid] for pid in {p["pid"] for p in norm + ext}},
                       "norm": norm, "ext": ext}, fh)
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
        proc = subprocess.run([str(PARITY_PY), os.path.abspath(__file__), "--worker", in_file, out_file],
                              capture_output=True, text=True, env=env, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"reference worker failed (rc={proc.returncode}):\n{proc.stderr[-3000:]}")
        with open(out_file, encoding="utf-8") as fh:
            res = json.load(fh)
    return res["norm"], res["ext"]


# ----------------------------------------------------------------------------------------------------------
# Classification of disagreements
# ----------------------------------------------------------------------------------------------------------

# The classes a disagreement may get other than "unexplained" / "reference_error", and which side is right
# w.r.t. the official MathVista scripts (tests/test_parity_mathvista.py allow-lists exactly these).
DOCUMENTED = {
    "lmms_safe_equal_strips": "lmms-eval's safe_equal compares str(.).strip(); the official one `prediction "
                              "== answer` (a list extraction ' [1, 2] ' is wrong there): ours = official",
    "quick_regex_greedy": "the official quick-extract regex `The answer is \"(.*)\"\\.` is greedy and spans "
                          "several quoted answers on one line; ours takes the last stated answer",
    "empty_extraction_nearest_choice": "nothing extracted from a NON-empty response: the official normaliser "
                                       "maps '' to the nearest = shortest choice, which may be the gold; there "
                                       "the official GPT extractor would have read some answer, so "
                                       "score_mathvista scores it wrong (an empty response follows the official "
                                       "rule)",
}


def classify_norm(p: dict, item: dict, ours: dict, ref: dict) -> str:
    if ref["status"] != "ok":
        return "reference_error"
    if ours["ok"] == ref["official_equal"] and ours["ok"] != ref["lmms_equal"] and ours["pred"] == ref["pred"]:
        # same normalised value; lmms-eval's safe_equal compares str(.).strip(), the official one ``==``
        return "lmms_safe_equal_strips"
    # (pids 168 / 849, choices "(c)", "(a)", ... shuffled: the official letter rule reads the exact choice text
    # "(b)" as option B, another choice; ours now does the same, so that is no longer a disagreement)
    return "unexplained"


def classify_ext(p: dict, item: dict, ours: dict, ref: dict) -> str:
    if ref["status"] != "ok":
        return "reference_error"
    if ref["extraction"] == "" and ours["extraction"] == "":
        # nothing extracted on either side; the official normaliser maps "" to the nearest (= shortest)
        # choice, which can be the gold; ours scores an empty extraction wrong
        return "empty_extraction_nearest_choice"
    if '"' in ref["extraction"] and p["shape"].startswith("quick_"):
        # the greedy quick regex ``The answer is "(.*)"\.`` spans several quoted answers
        return "quick_regex_greedy"
    return "unexplained"


# ----------------------------------------------------------------------------------------------------------
# Report
# ----------------------------------------------------------------------------------------------------------


def _short(x):
    if isinstance(x, str) and len(x) > TRUNC:
        return x[:150] + f" ...[{len(x)} chars]... " + x[-150:]
    return _jsonable(x)


def run_parity(data: Path, row_stride: int, rows_limit: int | None, per_row: int, resp_per_row: int) -> dict:
    t_start = time.time()
    with open(data, encoding="utf-8") as fh:
        items = json.load(fh)
    pids = list(items)[::row_stride]
    if rows_limit:
        pids = pids[:rows_limit]
    norm = build_extractions(items, pids, per_row)
    ext = build_responses(items, pids, resp_per_row)
    t0 = time.time()
    ref_norm, ref_ext = score_reference(items, norm, ext)
    t_ref = time.time() - t0
    t0 = time.time()
    ours_norm, ours_ext = score_ours(items, norm, ext)
    t_ours = time.time() - t0

    # 1. normalisation + verdict
    by_shape: dict[str, Counter] = defaultdict(Counter)
    norm_dis = []
    n_agree = n_pred_agree = n_verdict_agree = 0
    for p, o, r in zip(norm, ours_norm, ref_norm):
        c = by_shape[p["shape"]]
        c["pairs"] += 1
        same_pred = json.dumps(o["pred"]) == json.dumps(r["pred"])
        same_verdict = o["ok"] == r["lmms_equal"]
        n_pred_agree += same_pred
        n_verdict_agree += same_verdict
        c["ours_true"] += o["ok"]
        c["reference_true"] += r["lmms_equal"]
        if same_pred and same_verdict and r["status"] == "ok" and o["status"] == "ok":
            n_agree += 1
            c["agree"] += 1
            continue
        c["disagree"] += 1
        item = items[p["pid"]]
        norm_dis.append({
            "pid": p["pid"], "shape": p["shape"], "extraction": _short(p["extraction"]),
            "question_type": item["question_type"], "answer_type": item["answer_type"],
            "precision": item["precision"], "choices": item["choices"], "answer": item["answer"],
            "ours_normalised": _short(o["pred"]), "reference_normalised": _short(r["pred"]),
            "ours_verdict": o["ok"], "reference_verdict": r["lmms_equal"], "official_verdict": r["official_equal"],
            "ours_status": o["status"], "reference_status": r["status"],
            "class": classify_norm(p, item, o, r),
        })

    # 2. extraction rules
    ext_shape: dict[str, Counter] = defaultdict(Counter)
    ext_dis, fired = [], 0
    ext_agree = ours_more = 0
    intended_n = intended_ok = 0
    for p, o, r in zip(ext, ours_ext, ref_ext):
        c = ext_shape[p["shape"]]
        c["pairs"] += 1
        c["ours_true"] += o["ok"]
        if p["intended"] is not None and not r["rules_fired"]:
            intended_n += 1
            intended_ok += o["ok"] == p["intended"]
            c["ours_as_intended"] += o["ok"] == p["intended"]
        if not r["rules_fired"]:
            c["reference_needs_gpt"] += 1
            ours_more += o["extraction"] != ""
            continue
        fired += 1
        c["reference_rules_fired"] += 1
        c["reference_true"] += r["lmms_equal"]
        if json.dumps(o["pred"]) == json.dumps(r["pred"]) and o["ok"] == r["lmms_equal"]:
            ext_agree += 1
            c["agree"] += 1
            continue
        c["disagree"] += 1
        item = items[p["pid"]]
        ext_dis.append({
            "pid": p["pid"], "shape": p["shape"], "response": _short(p["response"]),
            "question_type": item["question_type"], "answer_type": item["answer_type"],
            "choices": item["choices"], "answer": item["answer"],
            "ours_extraction": _short(o["extraction"]), "reference_extraction": _short(r["extraction"]),
            "ours_normalised": _short(o["pred"]), "reference_normalised": _short(r["pred"]),
            "ours_verdict": o["ok"], "reference_verdict": r["lmms_equal"], "official_verdict": r["official_equal"],
            "intended_verdict": p["intended"],
            "class": classify_ext(p, item, o, r),
        })

    n = len(norm)
    report = {
        "data": str(data.relative_to(ROOT.parent)) if data.is_relative_to(ROOT.parent) else data.name,
        "rows": len(pids),
        "normalisation": {
            "pairs": n,
            "agree": n_agree,
            "agreement_pct": round(100.0 * n_agree / max(n, 1), 4),
            "normalised_value_agreement_pct": round(100.0 * n_pred_agree / max(n, 1), 4),
            "verdict_agreement_pct": round(100.0 * n_verdict_agree / max(n, 1), 4),
            "disagree": len(norm_dis),
            "disagreement_classes": dict(Counter(d["class"] for d in norm_dis)),
            "agreement_pct_counting_documented": round(
                100.0 * (n_agree + sum(d["class"] in DOCUMENTED for d in norm_dis)) / max(n, 1), 4),
            "ours_true": sum(o["ok"] for o in ours_norm),
            "reference_true": sum(r["lmms_equal"] for r in ref_norm),
            "reference_errors": sum(r["status"] != "ok" for r in ref_norm),
        },
        "extraction": {
            "pairs": len(ext),
            "reference_call": "extract_answer(response, problem, quick_extract=True), GPT call stubbed to return ''",
            "reference_rules_fired": fired,
            "agree_where_rules_fired": ext_agree,
            "agreement_pct_where_rules_fired": round(100.0 * ext_agree / max(fired, 1), 4),
            "disagree": len(ext_dis),
            "disagreement_classes": dict(Counter(d["class"] for d in ext_dis)),
            "agreement_pct_where_rules_fired_counting_documented": round(
                100.0 * (ext_agree + sum(d["class"] in DOCUMENTED for d in ext_dis)) / max(fired, 1), 4),
            "reference_needs_gpt": len(ext) - fired,
            "ours_extracts_where_reference_needs_gpt": ours_more,
            # where the official pipeline would ask GPT: how often our verdict is the one the response was
            # written to get (True for a stated gold answer, False for a stated wrong one)
            "ours_as_intended_where_reference_needs_gpt": f"{intended_ok}/{intended_n}",
        },
        "documented_classes": DOCUMENTED,
        "seconds": {"total": round(time.time() - t_start, 1), "reference": round(t_ref, 1),
                    "ours": round(t_ours, 1)},
        "normalisation_by_shape": {s: dict(c) for s, c in sorted(by_shape.items())},
        "extraction_by_shape": {s: dict(c) for s, c in sorted(ext_shape.items())},
        "normalisation_disagreements": norm_dis,
        "extraction_disagreements": ext_dis,
    }
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="MathVista testmini.json")
    ap.add_argument("--row-stride", type=int, default=1, help="every k-th row")
    ap.add_argument("--rows", type=int, default=None, help="only the first N rows (after --row-stride)")
    ap.add_argument("--per-row", type=int, default=16, help="extractions per row (normalisation parity)")
    ap.add_argument("--responses-per-row", type=int, default=8, help="responses per row (extraction parity)")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON report here")
    ap.add_argument("--worker", nargs=2, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker_main(*args.worker)
        return 0
    if not args.data.is_file():  # a fresh clone has no ../shared/data: say where the file comes from
        raise SystemExit(f"--data {args.data}: no such file; give MathVista's testmini.json "
                         "(the lupantech/MathVista repository's; default: the copy in shared/data beside this "
                         "checkout)")
    report = run_parity(args.data, args.row_stride, args.rows, args.per_row, args.responses_per_row)
    # lone surrogates (a garbage shape) are written as JSON escapes
    text = json.dumps(report, indent=1, ensure_ascii=False).encode("utf-8", "backslashreplace").decode("utf-8")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
