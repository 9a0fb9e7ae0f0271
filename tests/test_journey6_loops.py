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


@pytest.mark.parametrize("loop, config, role", [
    ("prism", "prism_tiny.yaml", "solver"),
    ("prism", "prism_tiny.yaml", "questioner"),
    ("mmzero", "mmzero_tiny.yaml", "solver"),
    ("mmzero", "mmzero_tiny.yaml", "proposer"),
    ("honest", "honest_tiny.yaml", "generator"),
])
def test_a_role_data_train_no_phase_reads_is_refused(loop, config, role, no_runs, tmp_path, capsys):
    # refused at the top level, but in <loop>.roles.<role> it was accepted and the run trained on what it always does
    # (Prism's solver on the pool), as if the user's file were in use
    data = tmp_path / "mine.jsonl"
    data.write_text('{"problem": "What is 2 + 2?", "answer": "4"}\n')
    extra = ["honest.gss_mode=trainable"] if role == "generator" else []
    assert main(["evolve", loop, str(CONFIGS / config), f"{loop}.output_dir={tmp_path / 'run'}", *extra,
                 f"{loop}.roles.{role}={{data.train: {data}}}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mmevo evolve: error: {loop}.roles.{role} sets data.train='{data}', which the {role} phase "
                          "never reads (it would be ignored): ")
    assert no_runs == [] and not (tmp_path / "run").exists()


def test_the_honest_solvers_task_file_in_its_role_is_still_taken(no_runs, tmp_path):
    data = tmp_path / "tasks.jsonl"
    data.write_text('{"id": "t1", "problem": "What is 2 + 3?", "answer": "5"}\n')
    assert main(["evolve", "honest", str(CONFIGS / "honest_tiny.yaml"), f"honest.output_dir={tmp_path / 'run'}",
                 f"honest.roles.solver={{data.train: {data}}}"]) == 0
    for loop, config in (("mmzero", "mmzero_tiny.yaml"), ("prism", "prism_tiny.yaml"),
                         ("mmzero", "mmzero_tiny_csrs_solver.yaml")):  # the shipped configs still run
        assert main(["evolve", loop, str(CONFIGS / config), f"{loop}.output_dir={tmp_path / loop}"]) == 0
    assert no_runs == ["honest", "mmzero", "prism", "mmzero"]


def test_the_loops_calibration_report_says_how_many_held_out_tasks_the_sft_set_took(tiny_text_path, tmp_path):
    # data.n_heldout=40 evaluated 38 tasks (2 were calibration SFT targets): calibration.json and summary.json said
    # n=38 and nothing of the other 2
    import json

    from mmevo.config import load_config
    from mmevo.honest.loop import _report_summary, calibration_eval

    cfg = load_config(CONFIGS / "honest_tiny.yaml", [f"honest.output_dir={tmp_path / 'run'}", "eval.max_tokens=2"])
    assert cfg.data.n_heldout == 40
    report = calibration_eval(cfg, str(tiny_text_path), tmp_path / "eval_before", "before RL")
    saved = json.loads((tmp_path / "eval_before" / "calibration.json").read_text())
    dropped = saved["data"]["dropped_in_sft_set"]
    assert dropped > 0 and saved["examples"] + dropped == 40 == saved["data"]["rows"]
    assert saved["data"]["evaluated"] == saved["examples"]
    brief = _report_summary(report)
    assert brief["dropped_in_sft_set"] == dropped and brief["n"] == saved["examples"]
