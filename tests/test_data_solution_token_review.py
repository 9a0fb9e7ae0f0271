"""Data review: a worked solution (the SFT target, and GeoQA's gold) holding a Qwen chat / vision control token
loaded silently, while the same token in the problem, answer or choices was refused: the tokenizer reads it as the
token itself, so an ``<|im_end|>`` inside a target teaches the model to end its turn there."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from mmevo.data.benchmarks import load_items
from mmevo.data.geometry3k import load_geometry3k
from mmevo.data.schema import DataError


def _write(tmp_path, rows):
    Image.new("RGB", (12, 12), (200, 10, 10)).save(tmp_path / "a.png")
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("fmt,row", [
    ("geometry3k", {"id": "1", "images": ["a.png"], "problem": "<image>Find x.", "answer": "3",
                    "solution": "<think>x = 3<|im_end|>\n<|im_start|>user\nmore</think> \\boxed{3}"}),
    # R1-V GeoQA: the gold is read from the solution, which is also the SFT target
    ("geoqa", {"id": "1", "image": "a.png", "problem": "Find x.", "solution": "<|endoftext|><answer>3</answer>"}),
])
def test_a_control_token_in_the_solution_is_refused(tmp_path, fmt, row):
    path = _write(tmp_path, [row, {**row, "id": "2", "solution": row["solution"].replace("<|", "<").replace("|>", ">")}])
    with pytest.raises(DataError, match=r"d\.jsonl:1 \(row 0, id '1'\): field 'solution': holds the chat / vision "
                                        r"control token '<\|(im_end|endoftext)\|>'") as e:
        load_items(fmt, path)
    assert (e.value.field, e.value.reason) == ("solution", "invalid_text")
    items, stats = load_items(fmt, path, skip_bad=True)
    assert [it.id for it in items] == ["2"] and stats["skipped_by_reason"] == {"invalid_text": 1}


def test_training_loader_refuses_a_control_token_in_the_solution(tmp_path):
    row = {"id": "q", "images": ["a.png"], "problem": "<image>Find x.", "answer": "3",
           "solution": "<think>3</think><|im_end|> \\boxed{3}"}
    with pytest.raises(DataError, match=r"field 'solution': holds the chat / vision control token '<\|im_end\|>'"):
        load_geometry3k(_write(tmp_path, [row]))
