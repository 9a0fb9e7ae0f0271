"""A new user's first hour with the self-play loops (journey 6): mistakes refused before minutes of work are spent."""

from pathlib import Path

import pytest

from mmevo.cli import main

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


@pytest.mark.parametrize("task_file", ["missing", "empty"])
def test_honest_solver_task_file_is_checked_before_the_warm_up(task_file, tiny_text_path, tmp_path, capsys):
    # the file was read only when the solver was built: after the calibration SFT and the report before RL (minutes
    # on the shipped config), then "…: no such file or directory", naming no key
    path = tmp_path / "tasks.jsonl"
    if task_file == "empty":
        path.write_text("")
    out = tmp_path / "run"
    rc = main(["evolve", "honest", str(CONFIGS / "honest_tiny.yaml"), f"honest.output_dir={out}",
               f"model.path={tiny_text_path}", f"honest.roles.solver={{data.train: {path}}}",
               # small enough that the old code reaches the solver (and fails) in seconds
               "honest.sft_n=8", "sft.epochs=1", "data.n_heldout=2", "eval.max_tokens=8"])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"mmevo evolve: error: honest.roles.solver.data.train={path}: " in err
    assert ("no such file or directory" if task_file == "missing" else "no usable rows (0 read)") in err
    assert not (out / "warmup").exists() and not (out / "eval_before").exists()


def test_honest_solver_task_file_that_loads_runs_past_the_check(tiny_text_path, tmp_path):
    import json

    from mmevo.honest.loop import check_solver_data
    from mmevo.config import load_config

    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"id": "t1", "problem": "What is 2 + 3?", "answer": "5",
                                "meta": {"domain": "arithmetic", "difficulty": 1, "expression": "2 + 3"}}) + "\n")
    cfg = load_config(CONFIGS / "honest_tiny.yaml", [f"honest.output_dir={tmp_path / 'run'}",
                                                     f"honest.roles.solver={{data.train: {path}}}"])
    check_solver_data(cfg, str(tiny_text_path), tmp_path / "run")  # no error: a usable file
