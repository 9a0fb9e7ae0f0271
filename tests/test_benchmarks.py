"""Benchmark / dataset adapters on real benchmark rows, plus hub-schema and error cases.

Real rows come from the small fixtures in data/fixtures (always present); the every-row checks also run over the
full files (``SHARED``: $MMEVO_SHARED_DATA or ../shared/data) and skip one by one when those are missing.
"""

import io
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from PIL import Image

from datapaths import FIXTURES, SHARED, needs_shared
from mmevo.data.benchmarks import load_items, mathvista_query
from mmevo.data.schema import DataError

MATHV = FIXTURES / "mathvision"  # 17 testmini rows (+ their images), 9 test rows
MATHVISTA = FIXTURES / "mathvista_testmini"  # 11 testmini rows + their query.json entries
G3K = FIXTURES / "geometry3k_samples"  # InterGPS problems 11, 12, 13, 20

FULL_MATHV_MINI = needs_shared("mathvision/testmini.jsonl", "MATH-V testmini (304 rows + images)")
FULL_MATHV_TEST = needs_shared("mathvision/test.jsonl", "MATH-V test.jsonl (3,040 rows)")
FULL_MATHVISTA = needs_shared("mathvista_testmini/testmini.json", "MathVista testmini (1,000 rows + query.json)")
FULL_G3K = needs_shared("geometry3k_samples/20/data.json", "Geometry3K samples (InterGPS problems 11-20)")


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _stand_in_images(root: Path, names, size=(24, 16)) -> Path:
    """Small distinct images under root/<name> (the real MathVista / MATH-V test images are not shipped)."""
    for i, name in enumerate(names):
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", size, ((i * 37) % 256, (i * 11) % 256, 90)).save(p)
    return root


def _png_bytes(color=(10, 200, 30), size=(20, 12)):
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


# ------------------------------------------------------------------------------------------------ MATH-Vision


@pytest.mark.parametrize("root, n_rows, n_choice, n_repeated", [
    pytest.param(MATHV, 17, 4, 0, id="fixture"),
    pytest.param(SHARED / "mathvision", 304, 190, 1, id="full", marks=FULL_MATHV_MINI),  # 1893: "C" twice
])
def test_mathvision_testmini_every_row(root, n_rows, n_choice, n_repeated):
    rows = _jsonl(root / "testmini.jsonl")
    items, stats = load_items("mathvision", root, "testmini")
    assert stats == {"rows": n_rows, "loaded": n_rows, "skipped": 0, "skipped_by_reason": {},
                     "files": [str(root / "testmini.jsonl")], "cut_by_limit": False, "repeated_choices": n_repeated}
    assert [it.id for it in items] == [str(r["id"]) for r in rows]
    assert sum(bool(it.choices) for it in items) == n_choice
    assert Counter(it.categories["subject"][0] for it in items) == Counter(r["subject"] for r in rows)
    assert Counter(it.categories["level"][0] for it in items) == Counter(str(r["level"]) for r in rows)
    for it, row in zip(items, rows):
        assert it.problem.count("<image>") == 1
        if row["question"].count("<image") == 1:  # the image goes where its only marker was
            assert it.problem.startswith(row["question"].replace("<image1>", "<image>"))
        else:  # several markers name parts of the one composite image: image first, markers kept
            assert it.problem.startswith("<image>" + row["question"])
        assert it.row == row  # the scorer sees the row exactly as in the file
        assert it.answer == row["answer"] and it.images[0].is_file()
        if row["options"]:
            assert it.problem.endswith("\n".join(f"({'ABCDE'[i]}) {o}" for i, o in enumerate(row["options"])))
    ex = items[2].to_example()  # id 6: multiple choice, gold letter D -> option text
    assert ex.answer == "D" and ex.choices == ["A", "B", "C", "D", "E"] and ex.images[0].mode == "RGB"


@pytest.mark.parametrize("root, n_rows, n_choice, n_subjects, pick", [
    pytest.param(MATHV, 9, 3, 6, 7, id="fixture"),
    pytest.param(SHARED / "mathvision", 3040, 1532, 16, 100, id="full", marks=FULL_MATHV_TEST),
])
def test_mathvision_test_every_row_with_stand_in_images(tmp_path, root, n_rows, n_choice, n_subjects, pick):
    rows = _jsonl(root / "test.jsonl")
    image_root = _stand_in_images(tmp_path, {r["image"] for r in rows})
    items, stats = load_items("mathvision", root / "test.jsonl", "test", image_root=image_root)
    assert stats["loaded"] == n_rows and stats["skipped"] == 0
    assert sum(bool(it.choices) for it in items) == n_choice
    assert len(Counter(it.categories["subject"][0] for it in items)) == n_subjects
    assert items[pick].load_images()[0].size == (24, 16)


@pytest.mark.parametrize("root, n_with_image, n_without", [
    pytest.param(MATHV, 3, 6, id="fixture"),  # test rows 4, 5, 6 are testmini rows: their images are there
    pytest.param(SHARED / "mathvision", 304, 2736, id="full", marks=FULL_MATHV_TEST),
])
def test_mathvision_missing_image_names_the_id(tmp_path, root, n_with_image, n_without):
    with pytest.raises(DataError) as e:
        load_items("mathvision", root / "test.jsonl", "test")
    msg = str(e.value)
    assert "test.jsonl:1 (row 0, id '1'): field 'image'" in msg and "images/1.jpg not found" in msg and e.value.row_id == "1"
    items, stats = load_items("mathvision", root / "test.jsonl", "test", skip_bad=True)
    assert stats["loaded"] == n_with_image and stats["skipped_by_reason"] == {"image_missing": n_without}


def test_mathvision_malformed_rows_name_file_and_line(tmp_path):
    good = _jsonl(MATHV / "testmini.jsonl")[:2]
    f = tmp_path / "testmini.jsonl"
    (tmp_path / "images").symlink_to(MATHV / "images")
    bad_answer = dict(good[1], answer="F", options=["1", "2", "3", "4", "5"])
    f.write_text(json.dumps(good[0]) + "\n" + "{not json\n" + json.dumps(bad_answer) + "\n")
    with pytest.raises(DataError, match=r"testmini.jsonl:2 \(row 1\): invalid JSON"):
        load_items("mathvision", f)
    items, stats = load_items("mathvision", f, skip_bad=True)
    assert stats["loaded"] == 1 and stats["skipped_by_reason"] == {"bad_answer": 1, "invalid_json": 1}
    lines = f.read_text().splitlines()
    f.write_text("\n".join([lines[0], "", lines[2]]) + "\n")  # blank line 2 keeps the line numbers
    with pytest.raises(DataError, match=r"testmini.jsonl:3 \(row 1, id '5'\): field 'answer': 'F' is not a letter"):
        load_items("mathvision", f)
    dup = tmp_path / "dup.jsonl"
    dup.write_text(json.dumps(good[0]) + "\n" + json.dumps(good[0]) + "\n")
    with pytest.raises(DataError, match=r"dup.jsonl:2 \(row 1, id '4'\): field 'id': '4' repeats .*dup.jsonl:1 \(row 0"):
        load_items("mathvision", dup)


def test_mathvision_hub_schema_saved_dataset(tmp_path):
    datasets = pytest.importorskip("datasets")
    rows = _jsonl(MATHV / "testmini.jsonl")[:3]
    feats = datasets.Features({"id": datasets.Value("string"), "question": datasets.Value("string"),
                               "options": datasets.Sequence(datasets.Value("string")),
                               "image": datasets.Value("string"), "decoded_image": datasets.Image(),
                               "answer": datasets.Value("string"), "solution": datasets.Value("string"),
                               "level": datasets.Value("int64"), "subject": datasets.Value("string")})
    ds = datasets.Dataset.from_list([dict(r, decoded_image={"bytes": _png_bytes((i, 0, 0)), "path": None})
                                     for i, r in enumerate(rows)], features=feats)
    datasets.DatasetDict({"testmini": ds}).save_to_disk(str(tmp_path / "hub"))
    items, stats = load_items("mathvision", tmp_path / "hub", "testmini")
    assert [it.id for it in items] == [r["id"] for r in rows]
    assert isinstance(items[0].images[0], bytes) and "decoded_image" not in items[0].row
    assert items[1].load_images()[0].getpixel((0, 0)) == (1, 0, 0)


def test_unreachable_hub_name_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="not a local file or directory, and loading it from the hub failed"):
        load_items("mathvision", "NoSuchOwner/no-such-dataset-mmevo", "testmini")


# ------------------------------------------------------------------------------------------------ MathVista


@pytest.mark.parametrize("root, n_rows", [
    pytest.param(MATHVISTA, 11, id="fixture"),  # every hint: multi choice, integer (with a unit), float 1 / 2, list
    pytest.param(SHARED / "mathvista_testmini", 1000, id="full", marks=FULL_MATHVISTA),
])
def test_mathvista_query_builder_reproduces_every_official_query(root, n_rows):
    rows = json.loads((root / "testmini.json").read_text())
    queries = json.loads((root / "query.json").read_text())
    assert len(rows) == n_rows
    assert [pid for pid, row in rows.items() if mathvista_query(row) != queries[pid]] == []


@pytest.mark.parametrize("data, n_rows, n_choice, n_geometry, n_statistical", [
    pytest.param(MATHVISTA, 11, 5, 2, 3, id="fixture"),
    pytest.param(SHARED / "mathvista_testmini", 1000, 540, 208, 301, id="full", marks=FULL_MATHVISTA),
])
def test_mathvista_testmini_every_row_with_stand_in_images(tmp_path, data, n_rows, n_choice, n_geometry,
                                                           n_statistical):
    rows = json.loads((data / "testmini.json").read_text())
    queries = json.loads((data / "query.json").read_text())
    root = _stand_in_images(tmp_path, {r["image"] for r in rows.values()})
    items, stats = load_items("mathvista", data, "testmini", image_root=root)
    assert stats["loaded"] == n_rows and stats["skipped"] == 0
    assert [it.id for it in items] == list(rows)
    for it in items:
        assert it.problem == "<image>" + queries[it.id]
        assert it.row["answer"] == rows[it.id]["answer"] and it.row["metadata"] == rows[it.id]["metadata"]
    assert Counter(it.categories["question_type"][0] for it in items) == {"multi_choice": n_choice,
                                                                            "free_form": n_rows - n_choice}
    assert Counter(it.categories["task"][0] for it in items)["geometry problem solving"] == n_geometry
    assert sum("statistical reasoning" in it.categories["skills"] for it in items) == n_statistical
    # images/<name> under image_root, or the images folder itself
    items2, _ = load_items("mathvista", data / "testmini.json", image_root=root / "images", limit=5)
    assert [it.images for it in items2] == [it.images for it in items[:5]]


def test_mathvista_missing_image_names_the_id():
    with pytest.raises(DataError, match=r"testmini.json row 0 \(id '1'\): field 'image': image file images/1.jpg "
                                        r"not found"):
        load_items("mathvista", MATHVISTA, "testmini")


def test_mathvista_hub_schema_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = json.loads((MATHVISTA / "testmini.json").read_text())
    picked = [rows["2"], rows["5"]]
    table = pa.Table.from_pylist([dict(r, decoded_image={"bytes": _png_bytes(), "path": r["image"]},
                                       query="CUSTOM " + r["pid"]) for r in picked])
    (tmp_path / "data").mkdir()
    pq.write_table(table, tmp_path / "data" / "testmini-00000-of-00001.parquet")
    items, stats = load_items("mathvista", tmp_path, "testmini")
    assert [it.problem for it in items] == ["<image>CUSTOM 2", "<image>CUSTOM 5"]  # the row's own query
    assert items[1].choices == rows["5"]["choices"] and items[1].answer == rows["5"]["answer"]


# ------------------------------------------------------------------------------------------------ Geometry3K


@pytest.mark.parametrize("root, ids", [
    pytest.param(G3K, ["11", "12", "13", "20"], id="fixture"),
    pytest.param(SHARED / "geometry3k_samples", [str(i) for i in range(11, 21)], id="full", marks=FULL_G3K),
])
def test_intergps_raw_layout_every_sample(root, ids):
    items, stats = load_items("intergps", root)
    assert stats["loaded"] == len(ids) and [it.id for it in items] == ids
    for it in items:
        data = json.loads((root / it.id / "data.json").read_text())
        assert it.answer == data["choices"]["ABCD".index(data["answer"])]
        assert it.problem.startswith("<image>" + data["problem_text"]) and " Choices: A. " in it.problem
        assert it.images == [root / it.id / "img_diagram.png"]
        assert it.categories["graph"] == data["problem_type_graph"]
    assert items[0].answer == "80"  # id 11: answer D of [30, 40, 60, 80]
    ex = items[0].to_example()
    assert ex.answer == "80" and ex.images[0].size == (250, 251)


def test_geometry3k_hub_schema_and_generic_field_mapping(tmp_path):
    img = tmp_path / "a.png"
    img.write_bytes(_png_bytes())
    (tmp_path / "test.jsonl").write_text(json.dumps({"images": ["a.png"], "problem": "<image>Find x.",
                                                      "answer": "3"}) + "\n")
    items, _ = load_items("geometry3k", tmp_path, "test")
    assert items[0].problem == "<image>Find x." and items[0].answer == "3" and items[0].id == "test-0"
    (tmp_path / "mine.jsonl").write_text(json.dumps({"qid": 7, "pic": "a.png", "q": "How many?", "gold": "B",
                                                      "opts": ["1", "2"]}) + "\n")
    fields = {"id": "qid", "image": "pic", "problem": "q", "answer": "gold", "choices": "opts"}
    items, _ = load_items("generic", tmp_path / "mine.jsonl", fields=fields)
    assert (items[0].id, items[0].problem, items[0].answer) == ("7", "<image>How many?", "2")
    with pytest.raises(DataError, match=r"mine.jsonl:1 \(row 0, id '7'\): field 'question': missing"):
        load_items("generic", tmp_path / "mine.jsonl", fields={**fields, "problem": "question"})


def test_geoqa_r1v_rows(tmp_path):
    (tmp_path / "img.png").write_bytes(_png_bytes())
    rows = [{"image": "img.png", "problem": "As shown in the figure, find the angle. Choices: A:40° B:50°",
             "solution": "<answer>40°</answer>"},
            {"image": "img.png", "problem": "Find AB.", "solution": "no tag here"}]
    f = tmp_path / "geoqa.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"geoqa.jsonl:2 \(row 1\): field 'solution': has no <answer>"):
        load_items("geoqa", f)
    items, stats = load_items("geoqa", f, skip_bad=True)
    assert items[0].answer == "40°" and items[0].problem.startswith("<image>As shown")
    assert stats["skipped_by_reason"] == {"missing_answer": 1}
    assert items[0].to_example().images[0].size == (20, 12)


def test_geometry3k_hub_parquet_reads_the_same_for_training_and_eval(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from mmevo.data.geometry3k import load_geometry3k

    rows = [{"images": [{"bytes": _png_bytes(), "path": None}], "problem": "<image>Find x.", "answer": "B.",
             "choices": [" 3", "4 "], "solution": "<think>x = 4</think> \\boxed{4}", "meta": '{"kind": "k"}'},
            {"images": [{"bytes": None, "path": "a.png"}], "problem": "Find y.", "answer": "7", "choices": [],
             "solution": None, "meta": None}]
    (tmp_path / "a.png").write_bytes(_png_bytes((1, 2, 3)))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "test.parquet")
    items, stats = load_items("geometry3k", tmp_path, "test")
    examples, stats2 = load_geometry3k(tmp_path, "test")
    assert stats["files"] == stats2["files"] == [str(tmp_path / "test.parquet")]
    for it, ex in zip(items, examples):
        assert (it.id, it.problem, it.answer, it.choices) == (ex.id, ex.problem, ex.answer, ex.choices)
    assert (items[0].answer, items[0].choices) == ("4", ["3", "4"])  # letter gold -> stripped choice text
    assert examples[0].solution.endswith("\\boxed{4}") and examples[0].meta == {"kind": "k"}
    assert (items[1].problem, items[1].answer) == ("<image>Find y.", "7")
    assert examples[1].images[0].getpixel((0, 0)) == (1, 2, 3)  # path-only image struct


def test_empty_files_are_listed_and_json_objects_need_a_list(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    items, stats = load_items("geometry3k", tmp_path / "empty.jsonl")
    assert items == [] and stats["files"] == [str(tmp_path / "empty.jsonl")]
    (tmp_path / "d.json").write_text(json.dumps({"7": {"problem": "p", "answer": "1"}}))
    with pytest.raises(DataError, match=r"expected a JSON list of rows .* got an object with keys \['7'\]"):
        load_items("geometry3k", tmp_path / "d.json")
    (tmp_path / "s.json").write_text(json.dumps({"data": [{"problem": "p", "answer": "1"}], "test": "oops"}))
    with pytest.raises(DataError, match="keys"):
        load_items("geometry3k", tmp_path / "s.json", "test")


def test_mathvista_bad_metadata_and_empty_decoded_image(tmp_path):
    rows = json.loads((MATHVISTA / "testmini.json").read_text())
    row = dict(rows["2"], metadata=["not", "an", "object"])
    (tmp_path / "images").mkdir()
    Image.new("RGB", (5, 5)).save(tmp_path / "images" / "2.jpg")
    (tmp_path / "testmini.json").write_text(json.dumps({"2": row}))
    with pytest.raises(DataError, match=r"row 0 \(id '2'\): field 'metadata': expected an object, got list"):
        load_items("mathvista", tmp_path, "testmini")
    # a hub row whose decoded_image struct is empty falls back to the image path
    (tmp_path / "testmini.json").write_text(json.dumps({"2": dict(rows["2"], decoded_image={"bytes": None,
                                                                                              "path": None})}))
    items, _ = load_items("mathvista", tmp_path, "testmini")
    assert items[0].images == [tmp_path / "images" / "2.jpg"]


def test_mathvista_query_json_wins_over_the_rows_own_query(tmp_path):
    rows = json.loads((MATHVISTA / "testmini.json").read_text())
    (tmp_path / "images").mkdir()
    Image.new("RGB", (5, 5)).save(tmp_path / "images" / "2.jpg")
    q = rows["2"]["question"]
    (tmp_path / "testmini.json").write_text(json.dumps({"2": dict(rows["2"], query=f"ROW QUERY {q}")}))
    assert load_items("mathvista", tmp_path, "testmini")[0][0].problem == f"<image>ROW QUERY {q}"
    (tmp_path / "query.json").write_text(json.dumps({"2": f"FILE QUERY\n{q}"}))
    assert load_items("mathvista", tmp_path, "testmini")[0][0].problem == f"<image>FILE QUERY\n{q}"


def test_a_query_json_out_of_step_with_the_annotations_is_refused(tmp_path):
    """Every official query holds its row's question: another pid's query (a swapped or stale query.json) would
    ask one question and score another's gold."""
    rows = json.loads((MATHVISTA / "testmini.json").read_text())
    queries = json.loads((MATHVISTA / "query.json").read_text())
    (tmp_path / "images").mkdir()
    for pid in ("1", "2"):
        Image.new("RGB", (5, 5)).save(tmp_path / "images" / f"{pid}.jpg")
    (tmp_path / "testmini.json").write_text(json.dumps({pid: rows[pid] for pid in ("1", "2")}))
    (tmp_path / "query.json").write_text(json.dumps({"1": queries["1"], "2": queries["2"]}))
    assert len(load_items("mathvista", tmp_path, "testmini")[0]) == 2
    (tmp_path / "query.json").write_text(json.dumps({"1": queries["2"], "2": queries["1"]}))
    with pytest.raises(DataError, match=r"field 'query': query.json's query does not hold the row's question"):
        load_items("mathvista", tmp_path, "testmini")
    items, stats = load_items("mathvista", tmp_path, "testmini", skip_bad=True)
    assert items == [] and stats["skipped_by_reason"] == {"bad_value": 2}


def test_intergps_split_folders(tmp_path):
    for pid in ("11", "12"):
        (tmp_path / "test").mkdir(exist_ok=True)
        (tmp_path / "test" / pid).symlink_to(G3K / pid)
    items, stats = load_items("intergps", tmp_path, "test")
    assert [it.id for it in items] == ["11", "12"] and stats["files"] == [str(tmp_path / "test" / p / "data.json")
                                                                          for p in ("11", "12")]
    single, _ = load_items("intergps", G3K / "13")  # one problem folder
    assert [it.id for it in single] == ["13"]


# ------------------------------------------------------------------------------------------------ hostile input


def _one_mathvista_row(tmp_path, pid, **changes):
    rows = json.loads((MATHVISTA / "testmini.json").read_text())
    (tmp_path / "images").mkdir(exist_ok=True)
    Image.new("RGB", (5, 5)).save(tmp_path / rows[pid]["image"])
    (tmp_path / "testmini.json").write_text(json.dumps({pid: dict(rows[pid], **changes)}))


@pytest.mark.parametrize("pid, changes, needle", [
    # the hint and the official scorer branch on these: an unknown value used to score every answer wrong, silently
    ("2", {"question_type": "multiple_choice"},
     "field 'question_type': 'multiple_choice' is not one of multi_choice, free_form"),
    ("1", {"answer_type": "floating"}, "field 'answer_type': 'floating' is not one of text, integer, float, list"),
    # used to become the choice "None" / the categories of every character of the string
    ("2", {"choices": [None, "1", "2"]}, "field 'choices': choice of type NoneType"),
    ("2", {"metadata": {"skills": "arithmetic reasoning"}}, "field 'metadata.skills': expected a list of labels, got 'arithmetic reasoning'"),
    ("2", {"query": ["not", "text"]}, "field 'query': expected a string, got list"),  # was a TypeError
])
def test_mathvista_bad_values_name_the_row_and_field(tmp_path, pid, changes, needle):
    _one_mathvista_row(tmp_path, pid, **changes)
    with pytest.raises(DataError, match=rf"testmini\.json row 0 \(id '{pid}'\): " + re.escape(needle)):
        load_items("mathvista", tmp_path, "testmini")
    items, stats = load_items("mathvista", tmp_path, "testmini", skip_bad=True)
    assert items == [] and stats["skipped"] == 1


def test_mathvista_float_answer_needs_a_whole_precision(tmp_path):
    # the official scorer rounds to int(precision): None or "2.0" used to score every answer wrong, silently
    for bad in (None, "2.0", 1.5):
        _one_mathvista_row(tmp_path, "1", precision=bad)
        with pytest.raises(DataError, match=r"row 0 \(id '1'\): field 'precision': expected a whole number of "
                                            r"decimal places for a float answer, got " + re.escape(repr(bad))):
            load_items("mathvista", tmp_path, "testmini")
    _one_mathvista_row(tmp_path, "1", precision=1.0)  # hub parquet stores precision as a float column
    assert load_items("mathvista", tmp_path, "testmini")[0][0].row["precision"] == 1.0


@pytest.mark.parametrize("content, needle", [
    (b"{not json", r"query\.json: cannot read: Expecting property name"),  # was a bare JSONDecodeError
    (b'{"2": "\xff"}', r"query\.json: cannot read: 'utf-8' codec"),  # was a bare UnicodeDecodeError
    (b"[1, 2]", r"query\.json: expected an object pid -> query, got list"),  # was an AttributeError
    (b'{"2": 5}', r"query\.json: pid '2': expected a string query, got int"),  # was a TypeError
])
def test_mathvista_broken_query_json_names_the_file(tmp_path, content, needle):
    _one_mathvista_row(tmp_path, "2")
    (tmp_path / "query.json").write_bytes(content)
    with pytest.raises(DataError, match=needle):
        load_items("mathvista", tmp_path, "testmini")


@pytest.mark.parametrize("field, value, needle", [
    ("choices", ["30", None, "60", "80"], "field 'choices': choice of type NoneType"),  # was the choice "None"
    ("problem_type_graph", "Circle", "field 'problem_type_graph': expected a list of labels"),  # was C, i, r, ...
])
def test_intergps_bad_choice_and_label_lists(tmp_path, field, value, needle):
    d = tmp_path / "11"
    d.mkdir()
    (d / "img_diagram.png").symlink_to(G3K / "11" / "img_diagram.png")
    (d / "data.json").write_text(json.dumps(dict(json.loads((G3K / "11" / "data.json").read_text()), **{field: value})))
    with pytest.raises(DataError, match=r"11/data\.json row 0 \(id '11'\): " + re.escape(needle)):
        load_items("intergps", tmp_path)


def test_intergps_json_python_cannot_hold_is_a_counted_skip(tmp_path):
    (tmp_path / "12").symlink_to(G3K / "12")
    (tmp_path / "13").mkdir()
    (tmp_path / "13" / "data.json").write_text('{"id": ' + "9" * 5000 + "}")  # was a bare ValueError
    with pytest.raises(DataError, match=r"13/data\.json: invalid JSON: Exceeds the limit"):
        load_items("intergps", tmp_path)
    items, stats = load_items("intergps", tmp_path, skip_bad=True)
    assert [it.id for it in items] == ["12"] and stats["skipped_by_reason"] == {"invalid_json": 1}


def test_mathvision_option_that_is_null_is_an_error(tmp_path):
    row = next(r for r in _jsonl(MATHV / "testmini.jsonl") if r["options"])
    (tmp_path / "images").symlink_to(MATHV / "images")
    (tmp_path / "m.jsonl").write_text(json.dumps(dict(row, options=[None] + row["options"][1:])) + "\n")
    with pytest.raises(DataError, match=r"m\.jsonl:1 \(row 0, id '\d+'\): field 'options': choice of type NoneType"):
        load_items("mathvision", tmp_path / "m.jsonl")
