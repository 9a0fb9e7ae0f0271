"""Options that repeat a text (["3", "3", "5"]): the official benchmarks have such rows (MathVista 587, 740, 781;
MATH-V 1843, 1893), which must load; the scorer and the vote read a repeated text as one option. They load in every
format, counted in the load stats (``repeated_choices``), and a numeric gold beside the repeated text maps to it."""

import json
from pathlib import Path

import pytest
from datapaths import SHARED, needs_shared

from mmevo.data.benchmarks import load_items
from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.majority import majority_vote_rewards



def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_training_rows_with_a_repeated_option_load_and_are_counted(tmp_path):
    path = _jsonl(tmp_path / "train.jsonl", [
        {"id": "a", "problem": "q", "answer": "B", "choices": ["3", "3", "5"]},
        {"id": "b", "problem": "q", "answer": "3.0", "choices": ["3", "3", "5"]},  # was "neither a letter nor ..."
        {"id": "c", "problem": "q", "answer": "5", "choices": ["3", "4", "5"]},
    ])
    items, stats = load_items("generic", path)
    assert [it.answer for it in items] == ["3", "3", "5"]
    assert stats["repeated_choices"] == 2 and stats["skipped"] == 0


def test_a_numeric_gold_matching_two_different_texts_stays_refused(tmp_path):
    path = _jsonl(tmp_path / "train.jsonl", [{"id": "a", "problem": "q", "answer": "3.00", "choices": ["3", "3.0"]}])
    with pytest.raises(ValueError, match=r"train.jsonl:1 \(row 0, id 'a'\): field 'answer': '3.00' is neither"):
        load_items("generic", path)


def test_either_letter_of_a_repeated_option_scores_and_votes_as_one():
    ch = ["3", "3", "5"]
    assert accuracy_rewards(["\\boxed{A}", "\\boxed{B}", "\\boxed{C}"], ["3"] * 3, [ch] * 3).tolist() == [1, 1, 0]
    rewards, metrics = majority_vote_rewards(["\\boxed{A}", "\\boxed{B}", "\\boxed{C}"], [0, 0, 0], [ch] * 3)
    assert rewards.tolist() == [1, 1, 0] and metrics["distinct_answers_mean"] == 2


@needs_shared("mathvision/testmini.jsonl", "MATH-V testmini (304 rows + images)")
def test_the_official_math_v_rows_with_a_repeated_option_load():
    items, stats = load_items("mathvision", SHARED / "mathvision", "testmini")
    assert stats["repeated_choices"] == 1 and stats["skipped"] == 0
    assert [it.choices for it in items if it.id == "1893"] == [["A", "C", "C", "D",
                                                                "it depends on the size of the rectangle"]]
