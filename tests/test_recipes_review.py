"""An empty or fully skipped data file is an error naming data.train / data.heldout and the skip counts (it used to
reach the first step as "the training set is empty", or skip the held-out evaluation without a word)."""

import json

import pytest

from mmevo.config import load_config
from mmevo.recipes import load_examples


def test_a_data_file_without_usable_rows_names_the_field_and_the_skips(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "1", "problem": "Q?"}) + "\n")  # no answer
    cfg = load_config(None, [f"data.train={empty}", f"data.heldout={bad}", "data.skip_bad_rows=true"])
    with pytest.raises(ValueError, match=r"data\.train=.*empty\.jsonl: no usable rows \(0 read\)"):
        load_examples(cfg, "train")
    with pytest.raises(ValueError, match=r"data\.heldout=.*bad\.jsonl: no usable rows \(1 read, skipped \{'missing_"):
        load_examples(cfg, "heldout")
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"id": "1", "problem": "1 + 1 = ?", "answer": "2"}) + "\n")
    cfg = load_config(None, [f"data.train={good}"])
    rows, stats = load_examples(cfg, "train")
    assert len(rows) == 1 and stats["loaded"] == 1
