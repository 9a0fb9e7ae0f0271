"""Round left13: what a rerun or a second run does to an earlier run's outputs, and where README's commands write."""

import json
import shutil
from pathlib import Path

import pytest

from mmevo.cli import main
from mmevo.config import load_config

ROOT = Path(__file__).resolve().parent.parent


# -- mmevo eval --calibration: its out_dir is held, a finished report is not overwritten unseen ------------------------
def _calibration(model, out, *extra) -> list[str]:
    return ["eval", "--calibration", "--model", str(model), "--out", str(out), "data.n_heldout=6",
            "trainer.progress=false", *extra]


def test_calibration_eval_keeps_a_report_of_other_settings(tiny_text_path, tmp_path, capsys):
    # the second of `mmevo eval --calibration ... --max-tokens 6` / `... --max-tokens 4` into one --out wrote its
    # report over the first one's without a word (and took no lock: two at once wrote their files over each other)
    out = tmp_path / "cal"
    assert main(_calibration(tiny_text_path, out, "--limit", "3", "--max-tokens", "6")) == 0
    first = json.loads(capsys.readouterr().out)
    report = (out / "calibration.json").read_text()
    assert first["reused"] is False and first["max_tokens"] == 6 and first["n"] == 3

    assert main(_calibration(tiny_text_path, out, "--limit", "2", "--max-tokens", "4")) == 2
    err = capsys.readouterr().err
    assert f"{out / 'calibration.json'} holds a finished calibration report of another evaluation" in err
    assert "tasks 3 -> 2" in err and "max_tokens 6 -> 4" in err and "eval.overwrite=true" in err
    assert (out / "calibration.json").read_text() == report

    # the same evaluation again: its report stands, nothing is generated
    responses = (out / "responses.jsonl").stat().st_mtime_ns
    assert main(_calibration(tiny_text_path, out, "--limit", "3", "--max-tokens", "6")) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["reused"] is True and again["n"] == 3 and again["ece"] == first["ece"]
    assert (out / "calibration.json").read_text() == report
    assert (out / "responses.jsonl").stat().st_mtime_ns == responses

    # new weights under the same path are another evaluation too
    model = tmp_path / "model"
    shutil.copytree(tiny_text_path, model)
    assert main(_calibration(model, out, "--limit", "3", "--max-tokens", "6")) == 2
    assert "model " in capsys.readouterr().err

    # eval.overwrite=true replaces it, saying what it replaces
    assert main(_calibration(tiny_text_path, out, "--limit", "2", "--max-tokens", "4", "eval.overwrite=true")) == 0
    captured = capsys.readouterr()
    assert "eval.overwrite=true: replacing" in captured.err and "max_tokens 6 -> 4" in captured.err
    replaced = json.loads((out / "calibration.json").read_text())
    assert replaced["n"] == 2 and replaced["max_tokens"] == 4 and replaced["identity"]["tasks"] == 2
    assert len((out / "responses.jsonl").read_text().splitlines()) == 2


def test_calibration_eval_refuses_a_report_that_records_no_identity(tmp_path, capsys):
    out = tmp_path / "cal"
    out.mkdir()
    (out / "calibration.json").write_text(json.dumps({"n": 6, "ece": 0.1}))  # an older mmevo's report
    model = tmp_path / "model"  # never loaded: the earlier report is checked first
    model.mkdir()
    assert main(_calibration(model, out, "--limit", "1")) == 2
    err = capsys.readouterr().err
    assert "it records no identity" in err and "eval.overwrite=true" in err
    assert json.loads((out / "calibration.json").read_text()) == {"n": 6, "ece": 0.1}


def test_calibration_eval_holds_its_out_dir(tmp_path, capsys):
    from mmevo.runlock import RunLock

    out = tmp_path / "cal"
    model = tmp_path / "model"
    model.mkdir()
    with RunLock(out):  # a live evaluation into it
        assert main(_calibration(model, out, "--limit", "1")) == 2
    err = capsys.readouterr().err
    assert f"output_dir {out} is in use by another live mmevo run" in err
    assert sorted(p.name for p in out.iterdir()) == [".mmevo.lock"]
