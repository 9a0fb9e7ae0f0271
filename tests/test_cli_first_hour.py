"""A new user's typical mistakes on the CLI fail fast, naming the setting, before any data is read or written."""

import json

from PIL import Image

from mmevo.cli import main


def _mathvision_dir(root):
    (root / "images").mkdir(parents=True)
    Image.new("RGB", (32, 32), "white").save(root / "images" / "1.jpg")
    row = {"id": "1", "question": "How many sides?\n<image1>", "options": [], "answer": "4", "solution": None,
           "level": 1, "subject": "metric geometry - length", "image": "images/1.jpg"}
    (root / "testmini.jsonl").write_text(json.dumps(row) + "\n")
    return root


def test_eval_refuses_a_model_path_that_is_no_checkpoint_before_reading_the_benchmark(tmp_path, capsys):
    """It read the whole benchmark (without --data: downloaded it from the hub), wrote run.json into --out, then
    failed in the loader's words: "model path ... exists but has no config.json" naming no setting."""
    not_a_model = tmp_path / "notmodel"
    not_a_model.mkdir()
    (not_a_model / "readme.txt").write_text("weights elsewhere")
    out = tmp_path / "eval"
    argv = ["eval", "--model", str(not_a_model), "--benchmark", "mathvision_testmini", "--out", str(out)]
    assert main(argv + ["--data", str(_mathvision_dir(tmp_path / "mathv"))]) == 2
    err = capsys.readouterr().err
    assert f"model.path={not_a_model}" in err and "no config.json" in err
    assert not out.exists()  # no run.json of a run that could never start
    # the model is checked first: a data path that is also wrong is not what the user hears about
    assert main(argv + ["--data", str(tmp_path / "missing")]) == 2
    assert f"model.path={not_a_model}" in capsys.readouterr().err


def test_eval_calibration_names_model_path_when_it_is_no_checkpoint(tmp_path, capsys):
    """It said "model path X exists but has no config.json", naming no setting."""
    not_a_model = tmp_path / "notmodel"
    not_a_model.mkdir()
    out = tmp_path / "cal"
    assert main(["eval", "--calibration", "--model", str(not_a_model), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mmevo eval: error: model.path={not_a_model}: ") and "no config.json" in err
    assert not out.exists()
