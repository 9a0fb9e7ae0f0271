"""A rerun of MM-Zero / Prism with fewer iterations than its output dir holds finished phases of.

`mmevo evolve prism configs/prism_tiny.yaml prism.iterations=1` into a finished two-iteration run trained nothing and
rewrote summary.json, diversity.json and report.md with iteration 1 alone, without a word, while iter_2's trained
questioner and solver stayed on disk (HONEST refuses fewer honest.gss_blocks for the same reason). Such a rerun is
refused, naming the key and the iterations to give. The phases here are finished ones written by hand (done.json),
so nothing loads a model."""

import json

import numpy as np
import pytest

from mmevo.config import ConfigError, load_config


def _done(phase_dir, record):
    phase_dir.mkdir(parents=True)
    (phase_dir / "done.json").write_text(json.dumps(record))


def _prism_cfg(tiny_text_path, out, iterations):
    np.save(out.parent / "centroids.npy", np.eye(4, dtype=np.float32))  # hashed by the rerun check, never loaded
    return load_config("configs/prism_tiny.yaml", [
        f"model.path={tiny_text_path}", f"prism.output_dir={out}", f"prism.centroids={out.parent}/centroids.npy",
        "prism.k=4", "prism.warmup_questions=0", f"prism.iterations={iterations}", "trainer.progress=false"])


def _finished_prism_iteration(out, t):
    steps = {"questioner": 2, "solver": 2}  # prism_tiny's questioner_steps / solver_steps
    _done(out / f"iter_{t}" / "questioner", {"model": "m", "steps": steps["questioner"], "head_state": {}})
    _done(out / f"iter_{t}" / "pool", {"generated": 8, "valid_distinct": 0, "kept": 0, "k": 4})
    _done(out / f"iter_{t}" / "solver", {"skipped": "empty pool", "model": None})


def test_prism_rerun_with_fewer_iterations_than_finished_is_refused(tiny_text_path, tmp_path):
    from mmevo.evolve.prism import run_prism

    out = tmp_path / "run"
    _finished_prism_iteration(out, 1)
    _finished_prism_iteration(out, 2)
    with pytest.raises(ConfigError, match=r"prism\.iterations=1: .* 2 iterations \(up to iter_2\).*"
                                          r"prism\.iterations>=2"):
        run_prism(_prism_cfg(tiny_text_path, out, 1))
    assert not (out / "summary.json").exists()  # nothing rewritten


def test_prism_rerun_over_an_iteration_that_finished_no_phase_may_leave_it_out(tiny_text_path, tmp_path):
    # killed in iteration 2's first phase (a checkpoint, no done.json): not a round yet, so iterations=1 runs and
    # summarises the finished iteration 1
    from mmevo.evolve.prism import run_prism

    out = tmp_path / "run"
    _finished_prism_iteration(out, 1)
    (out / "iter_2" / "questioner" / "checkpoints" / "step_000001").mkdir(parents=True)
    summary = run_prism(_prism_cfg(tiny_text_path, out, 1))
    assert [it["iteration"] for it in summary["iterations"]] == [1]


def test_mmzero_rerun_with_fewer_iterations_than_finished_is_refused(tiny_vl_path, tmp_path):
    from mmevo.evolve.mmzero import ROLES, run_mmzero

    out = tmp_path / "run"
    for role in ROLES:  # iteration 0 finished (every phase skipped for want of data), iteration 1's proposer too
        _done(out / "iter_0" / role, {"skipped": "no data", "model": None})
    _done(out / "iter_1" / "proposer", {"model": "m", "steps": 2, "examples": 8, "metrics": {}})
    cfg = load_config("configs/mmzero_tiny.yaml", [
        f"model.path={tiny_vl_path}", f"mmzero.output_dir={out}", "mmzero.warmup_demos=0", "mmzero.iterations=1",
        "trainer.progress=false"])
    with pytest.raises(ConfigError, match=r"mmzero\.iterations=1: .* 2 iterations \(up to iter_1\).*"
                                          r"mmzero\.iterations>=2"):
        run_mmzero(cfg)
    assert not (out / "summary.json").exists()


def test_as_many_or_more_iterations_pass(tmp_path):
    from mmevo.evolve.rerun import check_iterations_not_fewer

    _done(tmp_path / "iter_2" / "pool", {"kept": 0})
    (tmp_path / "iter_x").mkdir()  # not an iteration directory
    for iterations in (2, 3):
        check_iterations_not_fewer(tmp_path, iterations, 1, "prism")
    check_iterations_not_fewer(tmp_path, 3, 0, "mmzero")
    with pytest.raises(ConfigError, match=r"mmzero\.iterations=2: .* 3 iterations \(up to iter_2\)"):
        check_iterations_not_fewer(tmp_path, 2, 0, "mmzero")


def test_a_rerun_names_the_finished_phases_it_reuses(tiny_text_path, tmp_path, capsys):
    # a finished run's rerun took seconds and said nothing: it read as a run that had trained
    from mmevo.evolve.prism import run_prism

    out = tmp_path / "run"
    _finished_prism_iteration(out, 1)
    capsys.readouterr()
    run_prism(_prism_cfg(tiny_text_path, out, 1))
    err = capsys.readouterr().err
    assert (f"prism.output_dir={out}: 3 of 3 phases finished before and are reused, not trained again "
            "(iter_1/questioner, iter_1/pool, iter_1/solver)") in err


def test_a_first_run_names_no_reused_phase(tmp_path, capsys):
    from mmevo.evolve.rerun import say_reused_phases

    _done(tmp_path / "iter_0" / "proposer", {"steps": 2})
    assert say_reused_phases(tmp_path, ["iter_0/proposer", "iter_0/coder"], "mmzero") == ["iter_0/proposer"]
    assert "1 of 2 phases finished before" in capsys.readouterr().err
    assert say_reused_phases(tmp_path / "fresh", ["iter_0/proposer"], "mmzero") == []
    assert capsys.readouterr().err == ""


def test_an_mmzero_rerun_names_the_finished_phases_it_reuses(tiny_vl_path, tmp_path, capsys):
    from mmevo.evolve.mmzero import ROLES, run_mmzero

    out = tmp_path / "run"
    for role in ROLES:
        _done(out / "iter_0" / role, {"skipped": "no data", "model": None})
    cfg = load_config("configs/mmzero_tiny.yaml", [
        f"model.path={tiny_vl_path}", f"mmzero.output_dir={out}", "mmzero.warmup_demos=0", "mmzero.iterations=1",
        "trainer.progress=false"])
    capsys.readouterr()
    run_mmzero(cfg)
    assert ("3 of 3 phases finished before and are reused, not trained again (iter_0/proposer, iter_0/coder, "
            "iter_0/solver)") in capsys.readouterr().err
