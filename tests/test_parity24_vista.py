"""An adversarial parity set for MathVista: every row of testmini.json, >= 40 predictions each, scored by ours and by
a plain-Python re-statement of the official rules written here (lupantech/MathVista evaluation/calculate_score.py:
``normalize_extracted_answer`` + ``safe_equal`` with ``get_most_similar``; extract_answer.py: the rule-based fast
paths that run before its GPT call). Nothing of mmevo is imported by the reference below.

* Every prediction (letters, "(B)", option text in other case / spacing / with a unicode minus, numbers with commas,
  units, percent, exponents, fractions, precision edge cases, negative zero, whitespace, \\boxed{}, "", None, long
  strings, two answers, non-strings) is normalised and judged by both: normalised value and verdict must be equal.
* Where an official fast path reads a response (exactly a choice text, ``int(response)``, ``float(response)``),
  ``score_mathvista`` must give the official verdict. Elsewhere the official pipeline asks GPT: ours may extract
  more (documented in ``extract_mathvista_answer``), so those responses are not compared. So are the responses the
  optional quick regex ``The answer is "(.*)"\\.`` reads (``--quick_extract``, off by default): see
  tests/test_parity_mathvista.py for its documented classes.
"""

from __future__ import annotations

import json
import re

import pytest

from datapaths import SHARED, needs_shared

DATA = SHARED / "mathvista_testmini" / "testmini.json"
pytestmark = needs_shared("mathvista_testmini/testmini.json", "MathVista testmini.json (1,000 rows)")


# ---------------------------------------------------------------------------------------------------------------
# The official rules, re-stated
# ---------------------------------------------------------------------------------------------------------------


def levenshtein(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def official_normalize(extraction, item: dict):
    choices, qtype, atype = item["choices"], item["question_type"], item["answer_type"]
    if qtype == "multi_choice":
        extraction = extraction.strip() if isinstance(extraction, str) else str(extraction)
        found = re.findall(r"\(([a-zA-Z])\)", extraction)
        if found:
            extraction = found[0].upper()
        letters = [chr(ord("A") + i) for i in range(len(choices))]
        if extraction in letters:
            return choices[letters.index(extraction)]
        distances = [levenshtein(extraction, c) for c in choices]
        return choices[distances.index(min(distances))]  # first of the nearest
    try:
        if atype == "integer":
            return str(int(float(extraction)))
        if atype == "float":
            return str(round(float(extraction), item["precision"]))
        if atype == "list":
            return str(extraction)
    except Exception:
        return None
    return extraction


def official_verdict(extraction, item: dict) -> bool:
    return official_normalize(extraction, item) == item["answer"]  # safe_equal: plain ==


NEEDS_GPT = object()


def official_fast_extraction(response: str, item: dict):
    """What extract_answer.py returns before its GPT call (quick_extract off), else NEEDS_GPT."""
    if response == "":
        return ""
    if item["question_type"] == "multi_choice" and response in item["choices"]:
        return response
    if item["answer_type"] == "integer":
        try:
            return str(int(response))
        except Exception:
            pass
    if item["answer_type"] == "float":
        try:
            return str(float(response))
        except Exception:
            pass
    return NEEDS_GPT


# ---------------------------------------------------------------------------------------------------------------
# The adversarial predictions
# ---------------------------------------------------------------------------------------------------------------

DIGITS_FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
DIGITS_ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")


def choice_predictions(item: dict) -> list:
    choices, gold = item["choices"], item["answer"]
    i = choices.index(gold)
    letter, other = chr(65 + i), chr(65 + (i + 1) % len(choices))
    wrong = choices[(i + 1) % len(choices)]
    return [letter, f"({letter})", f"{letter}.", f"The answer is {letter}", letter.lower(), f"({letter.lower()})",
            f" {letter} ", f"{letter}\n", gold, gold.upper(), gold.lower(), f" {gold} ", gold.replace(" ", "  "),
            gold.replace("-", "\u2212"), f"({letter}) {gold}", f"{letter}. {gold}", f"{letter}: {gold}",
            f"\\boxed{{{letter}}}", f"\\boxed{{{gold}}}", "", None, 0, 1.0, True, wrong, other, f"({other}) {gold}",
            f"{letter} or {other}", gold * 30, f"{gold}\n\n", "(Z)", "Z", letter * 2, gold + ".", "\t" + gold,
            f"{gold}\u00a0", "\u200b" + gold, gold.translate(DIGITS_FULLWIDTH)]


def number_predictions(item: dict) -> list:
    gold = item["answer"]
    out = [gold, f" {gold} ", gold + "\n", "+" + gold, gold + ".", gold + ".0", gold + ".00", "-" + gold,
           "\u2212" + gold, gold + " cm", gold + "%", gold + "°", "$" + gold, f"\\boxed{{{gold}}}", f"{gold} {gold}",
           f"{gold}, {gold}", "", None, "None", "nan", "inf", "-inf", "-0", "-0.0", "0", "1e3", "1E-2", "1_000",
           "1,000", "2/3", "\\frac{2}{3}", "x" * 5000, gold.translate(DIGITS_FULLWIDTH),
           gold.translate(DIGITS_ARABIC_INDIC), "0x10", "True", True, False, 3, 2.5, float("nan"), [1, 2],
           f"[{gold}]", gold.replace(", ", ","), "0" + gold, f"{gold}e0", f"{gold}_0", f"{gold}j"]
    try:
        v = float(gold)
    except ValueError:
        return out
    out += [repr(v), f"{v:.1f}", f"{v:.2f}", f"{v:.3f}", f"{v:.0f}", f"{v:e}", f"{v:,}", f"{v + 0.004:.3f}",
            f"{v + 0.005:.3f}", f"{v - 0.005:.3f}", f"{v + 0.05:.2f}", f"{v - 0.05:.2f}", f"{v + 0.049:.3f}",
            f"{v + 0.5}", f"{v + 0.9}", f"{v - 0.5}", f"{v:.10f}", f"{v / 100}", f"{v * 100}", f"  {v}\n",
            f"{v:+}", f"{v:.1e}", f"{v}0000001", v, int(v), v + 0.004, v - 0.004, -v]
    return out


def predictions(item: dict) -> list:
    return choice_predictions(item) if item["question_type"] == "multi_choice" else number_predictions(item)


@pytest.fixture(scope="module")
def items() -> list[dict]:
    rows = json.loads(DATA.read_text(encoding="utf-8"))
    return [dict(row, pid=pid) for pid, row in rows.items()]


def test_every_row_gets_at_least_20_predictions(items):
    assert len(items) == 1000
    assert min(len(predictions(item)) for item in items) >= 20


def test_normalisation_and_verdict_match_the_official_rules(items):
    from mmevo.eval.scoring import mathvista_is_correct, normalize_mathvista_extraction

    disagreements, n_right = [], 0
    for item in items:
        for p in predictions(item):
            official = official_normalize(p, item)
            verdict = official_verdict(p, item)
            n_right += verdict
            ours = (normalize_mathvista_extraction(p, item), mathvista_is_correct(p, item))
            if ours != (official, verdict):
                disagreements.append((item["pid"], repr(p)[:60], ours, (official, verdict)))
    assert not disagreements, disagreements[:20]
    assert n_right > 5000  # not vacuous: many predictions are right


def test_responses_the_official_fast_paths_read_score_officially(items):
    from mmevo.eval.scoring import score_mathvista

    disagreements, n_compared = [], 0
    for item in items:
        for p in predictions(item):
            if not isinstance(p, str) or (extraction := official_fast_extraction(p, item)) is NEEDS_GPT:
                continue
            n_compared += 1
            if score_mathvista(p, item) != official_verdict(extraction, item):
                disagreements.append((item["pid"], repr(p)[:60], official_verdict(extraction, item)))
    assert not disagreements, disagreements[:20]
    assert n_compared > 10000
