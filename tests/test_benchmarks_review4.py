"""Fourth review of the benchmark loaders and the eval runner: parquet columns of other dtypes (half floats,
fixed-size lists, strings that are not UTF-8), JSON text that is not Unicode (lone surrogate escapes), MathVista rows
the official query builder has no hint for, and report breakdowns whose labels are unusual text.

Expected values are worked by hand: a float16 0.1 is the decimal 0.1 someone wrote (numpy prints it so), not
0.0999755859375; MathVista's build_query.py has hints for float answers of 1 or 2 decimal places only.
"""

import io
import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from datapaths import FIXTURES
from mmevo.data.benchmarks import BenchmarkItem, load_items, mathvista_query
from mmevo.data.schema import DataError
from mmevo.eval.runner import summarize, write_report

G3K = FIXTURES / "geometry3k_samples"


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (6, 4), (200, 10, 30)).save(buf, format="PNG")
    return buf.getvalue()


def _image_column(n):
    return pa.array([{"bytes": _png(), "path": None}] * n, pa.struct([("bytes", pa.binary()), ("path", pa.string())]))


# ------------------------------------------------------------------------------------------------ parquet dtypes


def test_half_float_gold_is_the_decimal_written(tmp_path):
    answers = pa.array(np.array([0.1, 0.0, 1.1], np.float16), mask=np.array([False, True, False]))
    pq.write_table(pa.table({"image": _image_column(3), "problem": ["a", "b", "c"], "answer": answers}),
                   tmp_path / "t.parquet")
    items, stats = load_items("geoqa", tmp_path / "t.parquet", skip_bad=True)
    assert [it.answer for it in items] == ["0.1", "1.1"]  # was "0.0999755859375", "1.099609375"
    assert stats["skipped_by_reason"] == {"missing_answer": 1}


def test_fixed_size_float32_options_are_the_decimals_written(tmp_path):
    pq.write_table(pa.table({"id": ["1"], "question": ["Which?"], "decoded_image": _image_column(1), "answer": ["B"],
                             "options": pa.array([[0.1, 0.2]], pa.list_(pa.float32(), 2))}), tmp_path / "t.parquet")
    item = load_items("mathvision", tmp_path / "t.parquet")[0][0]
    assert item.choices == ["0.1", "0.2"]  # was "0.10000000149011612", "0.20000000298023224"
    assert item.problem.endswith("Choices:\n(A) 0.1\n(B) 0.2")


def test_parquet_string_that_is_not_utf8_names_the_row_and_field(tmp_path):
    problems = pa.array([b"ok", b"\xff\xfebad", b"fine"], pa.binary()).view(pa.string())
    pq.write_table(pa.table({"image": _image_column(3), "problem": problems, "answer": ["1", "2", "3"]}),
                   tmp_path / "t.parquet")
    with pytest.raises(DataError, match=r"t\.parquet row 1: field 'problem': cannot read: 'utf-8' codec"):
        load_items("geoqa", tmp_path / "t.parquet")  # was a bare UnicodeDecodeError naming no file
    items, stats = load_items("geoqa", tmp_path / "t.parquet", skip_bad=True)
    assert [it.answer for it in items] == ["1", "3"]
    assert (stats["rows"], stats["skipped_by_reason"]) == (3, {"invalid_utf8": 1})


# ------------------------------------------------------------------------------------------------ lone surrogates


def _vista(**over):
    row = {"pid": "1", "question": "How many?", "image": "a.png", "choices": None, "unit": None, "precision": None,
           "answer": "3", "question_type": "free_form", "answer_type": "integer",
           "metadata": {"language": "english", "skills": ["arithmetic reasoning"]}}
    return {**row, **over}


@pytest.mark.parametrize("over, fld", [
    ({"question": "How many \ud83d?"}, "question"),  # half an emoji: the tokenizer raised a TypeError
    ({"metadata": {"skills": ["ok", "x\udc00"]}}, r"metadata\.skills\[1\]"),  # a label: responses.jsonl could not
    ({"metadata": json.dumps({"task": "\ud83d"})}, r"metadata\.task"),  # be written (UnicodeEncodeError)
])
def test_text_with_a_lone_surrogate_names_the_field(tmp_path, over, fld):
    (tmp_path / "a.png").write_bytes(_png())
    # json.dumps writes the surrogate as the escape "\ud83d", which json.loads reads back as a lone surrogate
    (tmp_path / "t.jsonl").write_text(json.dumps(_vista(**over)) + "\n" + json.dumps(_vista(pid="2")) + "\n")
    with pytest.raises(DataError, match=r"t\.jsonl:1 \(row 0, id '1'\): field '" + fld + "': text with a lone "
                                        r"surrogate"):
        load_items("mathvista", tmp_path / "t.jsonl")
    items, stats = load_items("mathvista", tmp_path / "t.jsonl", skip_bad=True)
    assert [it.id for it in items] == ["2"] and stats["skipped_by_reason"] == {"invalid_text": 1}


def test_query_json_with_a_lone_surrogate_is_an_error(tmp_path):
    (tmp_path / "a.png").write_bytes(_png())
    (tmp_path / "testmini.json").write_text(json.dumps({"1": _vista()}))
    (tmp_path / "query.json").write_text(json.dumps({"1": "Question: \ud83d"}))
    with pytest.raises(DataError, match=r"query\.json: pid '1': query with a lone surrogate"):
        load_items("mathvista", tmp_path, "testmini")


# ------------------------------------------------------------------------------------------------ MathVista query


@pytest.mark.parametrize("over, needle", [
    ({"answer_type": "float", "precision": 3, "answer": "1.235"},
     r"field 'precision': the official query has hints for 1 or 2 decimal places, not 3"),
    ({"answer_type": "float", "precision": 0, "answer": "2.0"},
     r"field 'precision': the official query has hints for 1 or 2 decimal places, not 0"),
    ({"answer_type": "text", "answer": "red"},
     r"field 'answer_type': the official query has no hint for a free-form text answer"),
])
def test_mathvista_row_without_an_official_hint_needs_its_query(tmp_path, over, needle):
    # these got the one-decimal / integer hint: the prompt asked for another answer than the scorer checks
    (tmp_path / "a.png").write_bytes(_png())
    (tmp_path / "t.jsonl").write_text(json.dumps(_vista(**over)) + "\n")
    with pytest.raises(DataError, match=r"t\.jsonl:1 \(row 0, id '1'\): " + needle):
        load_items("mathvista", tmp_path / "t.jsonl")
    (tmp_path / "t.jsonl").write_text(json.dumps(_vista(**over, query="Q?")) + "\n")  # its own query: fine
    assert load_items("mathvista", tmp_path / "t.jsonl")[0][0].problem == "<image>Q?"
    with pytest.raises(ValueError):
        mathvista_query(_vista(**over))


def test_mathvista_query_hints_for_one_and_two_decimals_unchanged():
    one = mathvista_query(_vista(answer_type="float", precision=1.0, answer="1.2"))
    two = mathvista_query(_vista(answer_type="float", precision=2, answer="1.23"))
    assert one.startswith("Hint: Please answer the question requiring a floating-point number with one decimal place")
    assert two.startswith("Hint: Please answer the question requiring a floating-point number with two decimal places")


# ------------------------------------------------------------------------------------------------ InterGPS folders


def test_intergps_folder_named_with_a_non_decimal_digit_loads(tmp_path):
    shutil.copytree(G3K / "11", tmp_path / "\u00b2")  # "²".isdigit() is True but int("²") raised ValueError
    shutil.copytree(G3K / "12", tmp_path / "12")
    items, stats = load_items("intergps", tmp_path)
    assert [it.id for it in items] == ["12", "11"] and stats["loaded"] == 2  # numbered folders first
    assert items[1].answer == "80"  # problem 11: gold D of ["30", "40", "60", "80"]


# ------------------------------------------------------------------------------------------------ eval report


def _summary_of(labels_correct):
    items = [BenchmarkItem(str(i), "p", "a", [], [], {}, {"level": [lab]}) for i, (lab, _) in enumerate(labels_correct)]
    recs = {str(i): {"id": str(i), "response": "r", "extracted": "a", "correct": ok, "gold": "a",
                     "finish_reason": "stop"} for i, (_, ok) in enumerate(labels_correct)}
    return items, recs, summarize(items, recs, ("level",))


def test_breakdown_sorts_labels_int_cannot_read():
    labels = [("\u00b2", True), ("10", True), ("3", False), ("\u0663", True), ("9" * 5000, False), ("b", True)]
    _, _, s = _summary_of(labels)  # "²" and a 5000-digit level raised ValueError in the sort
    by = s["by"]["level"]
    assert list(by)[:3] == ["3", "\u0663", "10"]  # ٣ is the Arabic-Indic 3
    assert sorted(list(by)[3:]) == sorted(["\u00b2", "9" * 5000, "b"])
    assert (by["\u00b2"]["n"], by["\u00b2"]["correct"], s["n"], s["correct"]) == (1, 1, 6, 4)


def test_report_with_mathtext_and_table_breaking_labels(tmp_path):
    items, recs, s = _summary_of([("$\\frac$", True), ("a|b", False), ("two\nlines", True)])
    s.update(benchmark="b", model="m", template="t", max_tokens=4, temperature=0.0,
             data={"skipped": 0, "skipped_by_reason": {}})
    write_report(tmp_path, s, recs, items)  # matplotlib read "$\frac$" as mathtext and raised ValueError
    assert (tmp_path / "report.png").stat().st_size > 0
    rows = [line for line in (tmp_path / "report.md").read_text().splitlines() if line.startswith("| ")]
    assert rows[1:] == ["| $\\frac$ | 1 | 1 | 100.00% |", "| a\\|b | 1 | 0 | 0.00% |", "| two lines | 1 | 1 | 100.00% |"]
