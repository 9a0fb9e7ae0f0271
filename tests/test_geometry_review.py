"""Geometry3K / GeoQA data path against the datasets' real layouts and InterGPS's official per-type table.

Expected values come from:

* InterGPS ``symbolic_solver/sub_acc.py`` (lupantech/InterGPS, commit 99e6b52): ``build_dict`` maps Rectangle,
  Rhombus, Parallelogram, Trapezoid and Square to "Quad" (``quad_alias``) and appends a problem id once per label,
  repeats included; ``correct_goal_type`` drops one "Other" from a goal list that has another goal; the table prints
  Angle, Length, Area, Ratio, then Line, Triangle, Quad, Circle, Other. The numbers below are worked out by hand
  from those rules.
* the real InterGPS problem folders (data/fixtures/geometry3k_samples: 11, 12, 13, 20; the full 11-20 under SHARED).
* R1-V's GeoQA evaluation rows (``src/eval/test_qwen2vl_geoqa.py`` reads ``image_path``, ``question`` and
  ``ground_truth``).
"""

import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from datapaths import FIXTURES, SHARED, needs_shared
from mmevo.config import load_config
from mmevo.data.benchmarks import load_items
from mmevo.data.schema import DataError
from mmevo.eval.runner import resolve, summarize

G3K = FIXTURES / "geometry3k_samples"  # InterGPS problems 11, 12, 13, 20
FULL_G3K = needs_shared("geometry3k_samples/20/data.json", "Geometry3K samples (InterGPS problems 11-20)")


def _problem(root: Path, pid: int, **changes) -> None:
    """InterGPS folder ``root/<pid>``: problem 11's real data.json and diagram with ``changes`` applied."""
    d = root / str(pid)
    d.mkdir(parents=True)
    shutil.copy(G3K / "11" / "img_diagram.png", d / "img_diagram.png")
    row = json.loads((G3K / "11" / "data.json").read_text())
    (d / "data.json").write_text(json.dumps({**row, "id": pid, **changes}))


def _acc(n, correct):
    return {"n": n, "correct": correct, "accuracy": correct / n}


def test_geometry3k_report_has_intergps_official_per_type_table(tmp_path):
    # (graph, goal, correct): one case per rule of sub_acc.py
    cases = {
        2401: (["Rectangle", "Square"], ["Length"], True),  # two quads: counted twice under Quad
        2402: (["Parallelogram"], ["Angle", "Other"], False),  # "Other" dropped beside another goal
        2403: (["Other"], ["Other"], True),  # a lone "Other" goal stays
        2404: (["Line", "Triangle"], ["Area"], False),  # one problem in two shapes
        2405: (["Circle"], [], True),  # no goal: in no goal row
        2406: (["Trapezoid"], ["Ratio"], True),
    }
    root = tmp_path / "test"
    for pid, (graph, goal, _) in cases.items():
        _problem(root, pid, problem_type_graph=graph, problem_type_goal=goal)
    cfg = load_config(None, ["eval.benchmark=geometry3k_test", f"eval.data={tmp_path}"])
    fmt, split, source, categories = resolve(cfg)
    assert (fmt, split) == ("intergps", "test")
    items, _ = load_items(fmt, source, split)
    records = {str(pid): {"correct": ok, "finish_reason": "stop"} for pid, (_, _, ok) in cases.items()}
    by = summarize(items, records, categories)["by"]
    # sub_acc.py: Quad = 2401 twice (right), 2402 (wrong), 2406 (right) -> 3/4
    assert by["official_graph"] == {"Line": _acc(1, 0), "Triangle": _acc(1, 0), "Quad": _acc(4, 3),
                                    "Circle": _acc(1, 1), "Other": _acc(1, 1)}
    assert list(by["official_graph"]) == ["Line", "Triangle", "Quad", "Circle", "Other"]  # the table's columns
    assert by["official_goal"] == {"Angle": _acc(1, 0), "Length": _acc(1, 1), "Area": _acc(1, 0),
                                   "Ratio": _acc(1, 1), "Other": _acc(1, 1)}
    assert list(by["official_goal"]) == ["Angle", "Length", "Area", "Ratio", "Other"]
    # the raw labels stay available, each problem once per distinct label
    assert by["graph"]["Rectangle"] == by["graph"]["Square"] == _acc(1, 1) and "Quad" not in by["graph"]
    assert by["goal"]["Other"] == _acc(2, 1) and by["goal"]["unknown"] == _acc(1, 1)  # 2402 keeps its raw "Other"


@pytest.mark.parametrize("root, expected", [
    pytest.param(G3K, {"11": ["Circle"], "12": ["Circle"], "13": ["Quad"], "20": ["Quad"]}, id="fixture"),
    pytest.param(SHARED / "geometry3k_samples",
                 {"11": ["Circle"], "12": ["Circle"], "13": ["Quad"], "14": ["Line"], "15": ["Triangle"],
                  "16": ["Line", "Triangle"], "17": ["Quad"], "18": ["Quad"], "19": ["Triangle"], "20": ["Quad"]},
                 id="full", marks=FULL_G3K),
])
def test_real_problems_official_shape_rows(root, expected):
    # real data.json files: 13, 17, 20 are Parallelogram, 18 is Rectangle; every goal is a single Angle / Length
    items, _ = load_items("intergps", root)
    assert {it.id: it.categories["official_graph"] for it in items} == expected
    for it in items:
        data = json.loads((root / it.id / "data.json").read_text())
        assert it.categories["graph"] == data["problem_type_graph"]
        assert it.categories["official_goal"] == data["problem_type_goal"]


def test_geoqa_row_without_its_figure_is_an_error_not_a_text_problem(tmp_path):
    Image.new("RGB", (6, 4)).save(tmp_path / "fig.png")
    rows = [{"image": "fig.png", "problem": "Find the angle.", "solution": "<answer>40°</answer>"},
            {"problem": "Find AB.", "solution": "<answer>3</answer>"},  # no image field at all
            {"image": None, "problem": "Find CD.", "solution": "<answer>5</answer>"}]
    f = tmp_path / "geoqa.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"geoqa\.jsonl:2 \(row 1\): field 'image': missing") as ei:
        load_items("geoqa", f)  # used to load as a text-only problem with no image
    assert ei.value.field == "image" and ei.value.reason == "image_missing"
    items, stats = load_items("geoqa", f, skip_bad=True)
    assert [it.answer for it in items] == ["40°"] and stats["skipped_by_reason"] == {"image_missing": 2}


def test_geoqa_r1v_evaluation_rows(tmp_path):
    # R1-V's geoqa_test_prompts.jsonl rows: image_path relative to the image root, question, numeric ground_truth
    (tmp_path / "Geo170K" / "images" / "test").mkdir(parents=True)
    Image.new("RGB", (6, 4)).save(tmp_path / "Geo170K" / "images" / "test" / "0.png")
    row = {"image_path": "./Geo170K/images/test/0.png", "question": "As shown in the figure, find x.",
           "ground_truth": 145.0}
    (tmp_path / "geoqa_test.jsonl").write_text(json.dumps(row) + "\n")
    items, _ = load_items("geoqa", tmp_path / "geoqa_test.jsonl")  # used to fail: field 'problem': missing
    assert (items[0].problem, items[0].answer) == ("<image>As shown in the figure, find x.", "145")
    assert items[0].images == [tmp_path / "Geo170K/images/test/0.png"]


def test_empty_choice_is_an_error_not_an_empty_gold(tmp_path):
    rows = [{"id": "a", "problem": "Find x. Choices: A. 3 B. ", "answer": "B", "choices": ["3", " "]}]
    (tmp_path / "e.jsonl").write_text(json.dumps(rows[0]) + "\n")
    with pytest.raises(DataError, match=r"e\.jsonl:1 \(row 0, id 'a'\): field 'choices': choice 1 is empty"):
        load_items("geometry3k", tmp_path / "e.jsonl")  # the gold used to be ""
    _problem(tmp_path / "ig", 11, choices=["30", "", "60", "80"], answer="B")
    with pytest.raises(DataError, match=r"11/data\.json row 0 \(id '11'\): field 'choices': choice 1 is empty"):
        load_items("intergps", tmp_path / "ig")


def test_intergps_empty_choices_names_the_choices_field(tmp_path):
    _problem(tmp_path, 11, choices=[])
    with pytest.raises(DataError, match=r"11/data\.json row 0 \(id '11'\): field 'choices': empty") as ei:
        load_items("intergps", tmp_path)  # used to blame field 'answer'
    assert ei.value.field == "choices"
    items, stats = load_items("intergps", tmp_path, skip_bad=True)
    assert items == [] and stats["skipped"] == 1


def test_whole_number_choices_read_as_the_answer_reads(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    Image.new("RGB", (6, 4)).save(tmp_path / "a.png")
    # a pandas export stores numbers as float64: the answer 30.0 reads "30", so must the choice 30.0
    rows = [{"images": ["a.png"], "problem": "<image>Find x.", "answer": 30.0, "choices": [30.0, 40.0, 52.5]},
            {"images": ["a.png"], "problem": "<image>Find y.", "answer": 52.5, "choices": [30.0, 40.0, 52.5]}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "test.parquet")
    items, _ = load_items("geometry3k", tmp_path / "test.parquet")
    assert items[0].choices == ["30", "40", "52.5"] and items[0].answer == "30"  # was ["30.0", "40.0", "52.5"]
    assert items[1].answer == "52.5" and items[1].answer in items[1].choices
    (tmp_path / "l.jsonl").write_text(json.dumps({"problem": "Find z.", "answer": "B", "choices": [30.0, 40.0]}) + "\n")
    assert load_items("geometry3k", tmp_path / "l.jsonl")[0][0].answer == "40"  # a gold letter: the choice text
