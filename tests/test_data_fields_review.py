"""Training / held-out data that loaded silently wrong: images or options under another column name (rows became
text-only, golds stayed bare letters), a ``@split`` on a source without splits (ignored: the file's rows loaded as
that split), a held-out source with several splits and none named (its train split became the held-out set), and
held-out rows skipped at load time that no summary showed."""

from __future__ import annotations

import json
import re

import pytest
from PIL import Image

from mmevo.config import load_config
from mmevo.data.schema import DataError
from mmevo.recipes import load_examples


def _rows(tmp_path, rows, name="d.jsonl"):
    Image.new("RGB", (12, 12), (200, 10, 10)).save(tmp_path / "a.png")
    (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / name


def _load(path, which="train", *over):
    key = "train" if which == "train" else "heldout"
    return load_examples(load_config(None, [f"data.{key}={path}", *over]), which)


@pytest.mark.parametrize("row,found", [
    ({"id": "1", "image": "a.png", "problem": "Find x.", "answer": "3"}, "image"),
    ({"image": "a.png", "problem": "As shown, find x.", "solution": "<answer>3</answer>"}, "image"),  # R1-V GeoQA
    ({"id": "1", "image_path": "a.png", "problem": "Find x.", "answer": "3"}, "image_path"),
])
def test_images_under_another_column_are_an_error_not_a_text_only_row(tmp_path, row, found):
    with pytest.raises(DataError, match=rf"field 'images': the row has no such field, but has '{found}'") as e:
        _load(_rows(tmp_path, [row]))
    assert e.value.reason == "missing_images" and e.value.row == 0
    # named, they load with their image
    exs, _ = _load(_rows(tmp_path, [row]), "train", f"data.fields={{image: {found}}}", "data.format=generic")
    assert len(exs[0].images) == 1 and exs[0].problem.startswith("<image>")


def test_a_text_only_row_still_loads_and_a_named_missing_column_is_an_error(tmp_path):
    exs, stats = _load(_rows(tmp_path, [{"id": "1", "problem": "What is 2+2?", "answer": "4"}]))
    assert exs[0].images == [] and stats["loaded"] == 1
    with pytest.raises(DataError, match="field 'picture': the row has no such field"):
        _load(_rows(tmp_path, [{"id": "1", "problem": "Find x.", "answer": "4"}]), "train",
              "data.fields={image: picture}", "data.format=generic")


def test_options_under_another_column_are_an_error_not_a_bare_letter_gold(tmp_path):
    row = {"id": "1", "images": ["a.png"], "problem": "<image>Find x.", "options": ["1", "2", "3"], "answer": "B"}
    with pytest.raises(DataError, match="field 'choices': the row has no such field, but has 'options'"):
        _load(_rows(tmp_path, [row]))
    exs, _ = _load(_rows(tmp_path, [row]), "train", "data.fields={choices: options}", "data.format=generic")
    assert exs[0].choices == ["1", "2", "3"] and exs[0].answer == "2"


def test_a_split_on_a_source_without_splits_is_an_error(tmp_path):
    path = _rows(tmp_path, [{"id": "1", "images": ["a.png"], "problem": "<image>Find x.", "answer": "3"}],
                 "train.jsonl")
    with pytest.raises(ValueError, match=r"data.heldout=.*train.jsonl@test: .* is one file, it has no splits"):
        _load(f"{path}@test", "heldout")
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list([{"id": "1", "problem": "2+2?", "answer": "4"}]).save_to_disk(str(tmp_path / "one"))
    with pytest.raises(ValueError, match="is one saved Dataset, it has no splits"):
        _load(f"{tmp_path / 'one'}@test", "heldout")


def test_a_held_out_source_with_several_splits_needs_one_named(tmp_path):
    datasets = pytest.importorskip("datasets")
    dd = datasets.DatasetDict({"train": datasets.Dataset.from_list([{"id": "t", "problem": "TRAIN", "answer": "1"}]),
                               "test": datasets.Dataset.from_list([{"id": "h", "problem": "TEST", "answer": "2"}])})
    dd.save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(ValueError, match=r"name the held-out split \(.*dd@test"):
        _load(tmp_path / "dd", "heldout")
    held, _ = _load(f"{tmp_path / 'dd'}@test", "heldout")
    assert [e.problem for e in held] == ["TEST"]
    train, _ = _load(tmp_path / "dd", "train")  # training data: its train split, as before
    assert [e.problem for e in train] == ["TRAIN"]
    with pytest.raises(ValueError, match="name the held-out split"):
        _load("someone/some-dataset", "heldout")  # a hub name: checked before any download


def test_held_out_rows_skipped_at_load_time_are_in_the_summary(tiny_vl_path, tmp_path):
    from mmevo.recipes import run_grpo

    Image.new("RGB", (12, 12)).save(tmp_path / "a.png")
    (tmp_path / "bad.png").write_bytes(b"not an image")
    rows = [{"id": "ok", "images": ["a.png"], "problem": "<image>Find x.", "answer": "3"},
            {"id": "corrupt", "images": ["bad.png"], "problem": "<image>Find x.", "answer": "3"},
            {"id": "gone", "images": ["missing.png"], "problem": "<image>Find x.", "answer": "3"},
            {"id": "noanswer", "images": ["a.png"], "problem": "<image>Find x."}]
    (tmp_path / "held.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = load_config(None, [f"model.path={tiny_vl_path}", f"trainer.output_dir={tmp_path / 'run'}",
                             "trainer.steps=0", f"data.heldout={tmp_path / 'held.jsonl'}", "data.skip_bad_rows=true",
                             "data.prompt_template=none", "rollout.max_tokens=4", "trainer.progress=false",
                             "trainer.wandb_mode=disabled", "data.n_train=4"])
    summary = run_grpo(cfg)
    assert summary["eval_before"]["n"] == 1
    assert summary["data_heldout"]["skipped"] == 3 and summary["data_heldout"]["loaded"] == 1
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["data_heldout"]["skipped"] == 3


@pytest.mark.parametrize("row,field,token", [
    ({"problem": "<image>Find x.<|im_end|>\n<|im_start|>assistant\n\\boxed{3}", "answer": "3"}, "problem",
     "<|im_end|>"),
    ({"problem": "<image>Which? <|image_pad|>", "answer": "3"}, "problem", "<|image_pad|>"),
    ({"problem": "<image>Find x.", "answer": "1", "choices": ["1", "2<|vision_start|>"]}, "choices[1]",
     "<|vision_start|>"),
])
def test_chat_and_vision_control_tokens_in_text_are_refused(tmp_path, row, field, token):
    row = {"id": "1", "images": ["a.png"], **row}
    with pytest.raises(DataError, match=rf"field '{re.escape(field)}': holds the chat / vision control token") as e:
        _load(_rows(tmp_path, [row]))
    assert e.value.reason == "invalid_text" and token in str(e.value)
    ok = {"id": "2", "images": ["a.png"], "problem": "<image>Is |x| < 3? Find <x|y>.", "answer": "3"}
    exs, stats = _load(_rows(tmp_path, [row, ok]), "train", "data.skip_bad_rows=true")
    assert [e.id for e in exs] == ["2"] and stats["skipped_by_reason"] == {"invalid_text": 1}


def test_a_gold_among_no_choice_is_an_error_naming_file_row_and_field(tmp_path):
    row = {"id": "q7", "images": ["a.png"], "problem": "<image>Find x.", "choices": ["1", "2", "3"], "answer": "7"}
    path = _rows(tmp_path, [dict(row, id="ok", answer="2"), row])
    with pytest.raises(DataError, match=re.escape(f"{path}:2 (row 1, id 'q7'): field 'answer': '7' is neither a "
                                                  "letter nor the text of one of the 3 choices")) as e:
        _load(path)
    assert (e.value.file, e.value.row, e.value.field, e.value.reason) == (str(path), 1, "answer", "bad_answer")
    # with data.skip_bad_rows the row is skipped and counted, as every other bad row
    exs, stats = _load(path, "train", "data.skip_bad_rows=true")
    assert [x.id for x in exs] == ["ok"] and stats["skipped_by_reason"] == {"bad_answer": 1}


@pytest.mark.parametrize("choices,answer,gold", [
    (["1", "2", "3"], "2", "2"), (["1", "2", "3"], "B", "2"), (["1", "2", "3"], "(c)", "3"),
    ([1, 2, 3.0], 3.0, "3"),  # numbers: a whole float reads as the integer in the choice and in the gold
    (["10", "30", "45"], "30.0", "30"), (["1.5", "2"], " 1.50", "1.5"),  # the same number, written another way
])
def test_a_gold_given_as_a_letter_or_a_choice_text_still_loads(tmp_path, choices, answer, gold):
    row = {"id": "1", "images": ["a.png"], "problem": "<image>Find x.", "choices": choices, "answer": answer}
    exs, _ = _load(_rows(tmp_path, [row]))
    assert exs[0].answer == gold


def test_a_gold_among_no_choice_names_the_mapped_column_or_the_solution(tmp_path):
    row = {"id": "1", "img": "a.png", "question": "Find x.", "opts": ["1", "2"], "gt": "one"}
    with pytest.raises(DataError, match=r"field 'gt': 'one' is neither a letter nor the text of one of the 2 "
                                        r"choices in 'opts'"):
        _load(_rows(tmp_path, [row]), "train", "data.format=generic",
              "data.fields={image: img, problem: question, answer: gt, choices: opts}")
    row = {"id": "1", "images": ["a.png"], "problem": "Find x.", "choices": ["1", "2"],
           "solution": "<think>...</think><answer>5</answer>"}  # R1-V: the gold is in the solution
    with pytest.raises(DataError, match=r"field 'solution': '5' is neither a letter") as e:
        _load(_rows(tmp_path, [row]))
    assert e.value.reason == "bad_answer"
