"""The aggregated evaluation report against the official aggregation of the same per-item verdicts.

The reference functions below restate, in a few lines each, how the official scripts count:

* MathVista ``evaluation/calculate_score.py``: the average over every pid; then, for each of question_type,
  answer_type and the metadata fields language, source, category, task, context, grade, skills, every distinct value
  with the items whose field equals it (skills, a list: the items with ``value in skills``); groups are only the values
  that occur.
* MATH-Vision ``evaluation/evaluate.py`` (``math_level_subject_acc``): one count per answer line under ``-all``,
  ``-level{level}`` and ``{subject}``, written ``"{correct}/{total}={round(correct / total * 100, 2)}%"``.
"""

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image

from datapaths import FIXTURES, SHARED, needs_shared
from mmevo.config import load_config
from mmevo.data.benchmarks import load_items
from mmevo.eval import runner
from mmevo.eval.runner import resolve, run_benchmark, summarize, write_report

MATHV = FIXTURES / "mathvision"
MATHVISTA = FIXTURES / "mathvista_testmini"
FULL_MATHVISTA = needs_shared("mathvista_testmini/testmini.json", "MathVista testmini (1,000 rows)")
FULL_MATHV_TEST = needs_shared("mathvision/test.jsonl", "MATH-V test.jsonl (3,040 rows)")

MATHVISTA_KEYS = ("question_type", "answer_type", "language", "source", "category", "task", "context", "grade",
                  "skills")


def _stand_ins(root: Path, names) -> Path:
    for name in names:
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (8, 8), (30, 60, 90)).save(p)
    return root


def _verdict(item_id: str) -> bool:
    """Synthetic per-item verdicts, uneven across categories."""
    n = int(re.sub(r"\D", "", item_id) or 0)
    return n % 3 == 0 or n % 7 == 1


def official_mathvista(rows: dict[str, dict], verdicts: dict[str, bool]) -> dict:
    """calculate_score.py's counts: {"average": (correct, total), key: {value: (correct, total)}}."""
    def field(pid, key):
        return rows[pid][key] if key in ("question_type", "answer_type") else rows[pid]["metadata"][key]

    scores: dict = {"average": (sum(verdicts.values()), len(verdicts))}
    for key in MATHVISTA_KEYS:
        values = {v for pid in verdicts for v in field(pid, key)} if key == "skills" else \
            {field(pid, key) for pid in verdicts}
        scores[key] = {}
        for value in values:
            members = [pid for pid in verdicts
                       if (value in field(pid, key) if key == "skills" else field(pid, key) == value)]
            if members:
                scores[key][value] = (sum(verdicts[p] for p in members), len(members))
    return scores


def official_mathvision(rows: dict[str, dict], verdicts: dict[str, bool]) -> dict[str, str]:
    """math_level_subject_acc's entries: '-all', '-level{N}', '{subject}', '{subject}_level{N}' (and its
    '-level{N}_{subject}', the same counts under another name)."""
    counts: dict[str, list[int]] = {}
    for rid, ok in verdicts.items():
        level, subject = rows[rid]["level"], rows[rid]["subject"]
        for key in ("-all", f"-level{level}", subject, f"{subject}_level{level}", f"-level{level}_{subject}"):
            c = counts.setdefault(key, [0, 0])
            c[0] += bool(ok)
            c[1] += 1
    return {k: f"{c}/{n}={round(c / max(n, 1) * 100, 2)}%" for k, (c, n) in counts.items()}


def ours(summary: dict) -> dict:
    out: dict = {"average": (summary["correct"], summary["n"])}
    for key, groups in summary["by"].items():
        out[key] = {v: (g["correct"], g["n"]) for v, g in groups.items()}
    return out


def _records(items, verdicts):
    return {it.id: {"correct": verdicts[it.id], "finish_reason": "stop"} for it in items}


# ------------------------------------------------------------------------------------------------- MathVista


@pytest.mark.parametrize("data, n_rows", [
    pytest.param(MATHVISTA, 11, id="fixture"),
    pytest.param(SHARED / "mathvista_testmini", 1000, id="full", marks=FULL_MATHVISTA),
])
def test_mathvista_report_has_every_official_breakdown(tmp_path, data, n_rows):
    # used to report only task / skills / question_type: answer_type, language, source, category, context and grade
    # (all in the official scores file) were missing
    rows = json.loads((data / "testmini.json").read_text())
    items, _ = load_items("mathvista", data, "testmini", image_root=_stand_ins(tmp_path, {r["image"] for r in
                                                                                          rows.values()}))
    assert len(items) == n_rows
    cfg = load_config(None, ["eval.benchmark=mathvista_testmini", f"eval.data={data}"])
    categories = resolve(cfg)[3]
    assert categories == MATHVISTA_KEYS
    verdicts = {it.id: _verdict(it.id) for it in items}
    s = summarize(items, _records(items, verdicts), categories)
    assert ours(s) == official_mathvista(rows, verdicts)
    assert s["accuracy"] == sum(verdicts.values()) / n_rows


def test_mathvista_skills_count_an_item_once_per_distinct_skill(tmp_path):
    # calculate_score.py counts an item in a skill when ``skill in skills``: a repeated skill counts once, an empty
    # list in no skill (there is no 'unknown' group); used to count pid 1 twice under 'x' and pid 2 under 'unknown'
    rows = json.loads((MATHVISTA / "testmini.json").read_text())
    picked = {pid: rows[pid] for pid in ("1", "2", "3")}
    for pid, skills in zip(picked, (["x", "x", "y"], [], ["y"])):
        picked[pid] = {**picked[pid], "metadata": {**picked[pid]["metadata"], "skills": skills}}
    (tmp_path / "testmini.json").write_text(json.dumps(picked))
    _stand_ins(tmp_path, {r["image"] for r in picked.values()})
    items, _ = load_items("mathvista", tmp_path, "testmini")
    verdicts = {"1": True, "2": True, "3": False}
    s = summarize(items, _records(items, verdicts), MATHVISTA_KEYS)
    official = official_mathvista(picked, verdicts)
    assert official["skills"] == {"x": (1, 1), "y": (1, 2)}
    assert ours(s)["skills"] == official["skills"]
    assert ours(s) == official


# ------------------------------------------------------------------------------------------------- MATH-Vision


@pytest.mark.parametrize("name, n_rows", [
    pytest.param("testmini", 17, id="fixture"),
    pytest.param("test", 3040, id="full", marks=FULL_MATHV_TEST),
])
def test_mathvision_subject_and_level_match_the_official_result_file(tmp_path, name, n_rows):
    root = MATHV if name == "testmini" else SHARED / "mathvision"
    rows = {r["id"]: r for r in map(json.loads, (root / f"{name}.jsonl").read_text().splitlines())}
    image_root = None if name == "testmini" else _stand_ins(tmp_path, {r["image"] for r in rows.values()})
    items, _ = load_items("mathvision", root, name, image_root=image_root)
    assert len(items) == n_rows == len(rows)
    verdicts = {it.id: _verdict(it.id) for it in items}
    s = summarize(items, _records(items, verdicts), resolve(load_config(None, [
        "eval.benchmark=mathvision_test"]))[3])
    fmt = lambda g: f"{g['correct']}/{g['n']}={round(g['accuracy'] * 100, 2)}%"  # noqa: E731
    mine = {"-all": fmt(s), **{f"-level{v}": fmt(g) for v, g in s["by"]["level"].items()},
            **{v: fmt(g) for v, g in s["by"]["subject"].items()},
            **{v: fmt(g) for v, g in s["by"]["subject_level"].items()}}
    for v, g in s["by"]["subject_level"].items():  # the official reversed name of each cross entry
        subject, level = v.rsplit("_level", 1)
        mine[f"-level{level}_{subject}"] = fmt(g)
    assert mine == official_mathvision(rows, verdicts)


# ------------------------------------------------------------------------------------------------- report


def test_report_md_shows_the_official_two_decimal_percentages(tmp_path):
    # the official scripts print (correct / total) * 100 with two decimals (MathVista '{acc * 100:.2f}%', MATH-V
    # round(..., 2)); report.md used to print fractions with 3 decimals per group (1/3 -> 0.333, official 33.33%)
    items, _ = load_items("mathvision", MATHV, "testmini", limit=9)
    verdicts = {it.id: i % 3 == 0 for i, it in enumerate(items)}  # 3 of 9
    records = {it.id: {"correct": verdicts[it.id], "finish_reason": "stop", "response": "r", "gold": it.answer,
                       "extracted": None} for it in items}
    s = summarize(items, records, ("subject", "level"))
    s.update(benchmark="b", model="m", template="none", max_tokens=4, temperature=0.0,
             data={"skipped": 0, "skipped_by_reason": {}})
    write_report(tmp_path, s, records, items)
    report = (tmp_path / "report.md").read_text()
    assert "Accuracy **33.33%** (3/9)" in report
    for v, g in s["by"]["level"].items():
        assert f"| {v} | {g['n']} | {g['correct']} | {g['correct'] / g['n'] * 100:.2f}% |" in report


# ------------------------------------------------------------------------------------------------- runner


def test_data_given_with_a_format_gets_that_formats_breakdowns():
    # the same rows gave no breakdown at all when named by eval.format instead of eval.benchmark
    for fmt, data, keys in (("mathvision", MATHV, ("subject", "level", "subject_level")),
                            ("mathvista", MATHVISTA, MATHVISTA_KEYS)):
        cfg = load_config(None, [f"eval.data={data}", f"eval.format={fmt}", "eval.split=testmini"])
        assert resolve(cfg)[3] == keys


def test_records_alone_recompute_the_official_report(tiny_vl_path, tmp_path, monkeypatch):
    # a stub scorer sets the per-item verdicts; scores.json must equal the official aggregation of them, and
    # responses.jsonl must hold what recomputes it (categories were missing from the records)
    rows = json.loads((MATHVISTA / "testmini.json").read_text())
    for pid in list(rows)[6:]:
        del rows[pid]
    data = tmp_path / "data"
    data.mkdir()
    (data / "testmini.json").write_text(json.dumps(rows))
    shutil.copy(MATHVISTA / "query.json", data / "query.json")
    _stand_ins(data, {r["image"] for r in rows.values()})
    monkeypatch.setitem(runner.SCORERS, "mathvista", lambda response, item: ("x", _verdict(item.id)))
    out = tmp_path / "ev"
    cfg = load_config(None, [f"model.path={tiny_vl_path}", "eval.benchmark=mathvista_testmini", f"eval.data={data}",
                             "eval.max_tokens=2", f"eval.out_dir={out}", "trainer.progress=false"])
    run_benchmark(cfg)
    scores = json.loads((out / "scores.json").read_text())
    verdicts = {pid: _verdict(pid) for pid in rows}
    assert ours(scores) == official_mathvista(rows, verdicts)

    def recompute():
        recs = [json.loads(x) for x in (out / "responses.jsonl").read_text().splitlines()]
        kept = [r for r in recs if r["finish_reason"] != "image_corrupt"]
        by: dict = {}
        for key in MATHVISTA_KEYS:
            by[key] = dict(Counter(v for r in kept for v in set(r["categories"][key])))
        return sum(r["correct"] for r in kept), len(kept), by

    expect = (scores["correct"], scores["n"], {k: {v: g["n"] for v, g in groups.items()}
                                                for k, groups in scores["by"].items()})
    assert recompute() == expect
    # records of an earlier version (no categories) get them on a resume, without generating again
    recs = [json.loads(x) for x in (out / "responses.jsonl").read_text().splitlines()]
    (out / "responses.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "categories"}) + "\n"
                                                 for r in recs))
    s = run_benchmark(cfg)
    assert s["generated_items"] == 0 and recompute() == expect
