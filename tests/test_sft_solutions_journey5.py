"""`mmevo sft` on data without worked solutions (a Geometry3K-schema file: images, problem, answer) fails before the
model loads, naming data.train and how many examples lack one (journey5); the SFT loop found the first only after
the model was read, naming its id and no data file."""

import json

import pytest
from PIL import Image

from mmevo.config import load_config
from mmevo.recipes import run_sft


def test_sft_without_solutions_names_the_data_before_the_model_loads(tmp_path):
    Image.new("RGB", (28, 28), (200, 10, 10)).save(tmp_path / "a.png")
    rows = [{"images": ["a.png"], "problem": "<image>What is 1+1?", "answer": "2", "choices": [],
             "solution": "<think>1+1</think> \\boxed{2}"},
            {"images": ["a.png"], "problem": "<image>What is 2+2?", "answer": "4", "choices": []}]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # a model path that does not exist: the data error must come first
    cfg = load_config("configs/grpo_tiny.yaml", [f"data.train={data}", "data.heldout=",
                                                 f"model.path={tmp_path / 'no-model'}",
                                                 f"sft.output_dir={tmp_path / 'sft'}"])
    with pytest.raises(ValueError, match=r"data\.train=.*train\.jsonl'?: 1 of 2 examples have no 'solution' field "
                                         r"\(the first: id "):
        run_sft(cfg)
    assert not (tmp_path / "sft" / "model").exists()
