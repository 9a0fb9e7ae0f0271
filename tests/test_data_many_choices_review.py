"""Data review: a row with more than 26 choices crashed every lettering adapter with a bare ``IndexError`` (the
prompt builders letter choices A-Z), naming no file, row or field, and ``skip_bad`` could not skip it."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from mmevo.data.benchmarks import load_items
from mmevo.data.schema import DataError


def _mathvision(tmp_path, options):
    rows = [{"id": "1", "question": "<image1>Which?", "options": options, "answer": "B", "image": "a.png"}]
    path = tmp_path / "testmini.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _mathvista(tmp_path, choices):
    rows = {"1": {"question": "Which?", "image": "a.png", "choices": choices, "answer": choices[1],
                  "question_type": "multi_choice", "answer_type": "text"}}
    path = tmp_path / "testmini.json"
    path.write_text(json.dumps(rows))
    return path


def _intergps(tmp_path, choices):
    folder = tmp_path / "ig" / "5"
    folder.mkdir(parents=True)
    Image.new("RGB", (9, 9)).save(folder / "img_diagram.png")
    (folder / "data.json").write_text(json.dumps({"id": 5, "problem_text": "Find x.", "choices": choices,
                                                  "answer": "B"}))
    return tmp_path / "ig"


def _generic(tmp_path, choices):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"id": "1", "images": ["a.png"], "problem": "<image>Which?", "choices": choices,
                                "answer": "B"}) + "\n")
    return path


CASES = [("mathvision", _mathvision, "options", r"testmini\.jsonl:1 \(row 0, id '1'\)"),
         ("mathvista", _mathvista, "choices", r"testmini\.json row 0 \(id '1'\)"),
         ("intergps", _intergps, "choices", r"5/data\.json row 0 \(id '5'\)"),
         ("geometry3k", _generic, "choices", r"d\.jsonl:1 \(row 0, id '1'\)")]


@pytest.mark.parametrize("fmt,write,field,where", CASES)
def test_twenty_seven_choices_are_a_named_error(tmp_path, fmt, write, field, where):
    Image.new("RGB", (9, 9)).save(tmp_path / "a.png")
    path = write(tmp_path, [str(k) for k in range(27)])
    with pytest.raises(DataError, match=rf"{where}: field '{field}': 27 choices; at most 26 can be lettered A-Z") as e:
        load_items(fmt, path)
    assert (e.value.field, e.value.reason) == (field, "bad_value")
    items, stats = load_items(fmt, path, skip_bad=True)
    assert items == [] and stats["skipped_by_reason"] == {"bad_value": 1}


@pytest.mark.parametrize("fmt,write,field,where", CASES[:3])
def test_twenty_six_choices_are_lettered_to_z(tmp_path, fmt, write, field, where):
    Image.new("RGB", (9, 9)).save(tmp_path / "a.png")
    items, _ = load_items(fmt, write(tmp_path, [str(k) for k in range(26)]))
    assert len(items[0].choices) == 26 and items[0].to_example().answer == "1"
    assert "Z" in items[0].problem.rsplit("25", 1)[0][-4:]  # the 26th choice, "25", is lettered Z
