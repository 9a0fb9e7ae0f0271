"""Round docs12: README.md's commands, run as written. What they showed that was wrong is pinned here."""

import re
from pathlib import Path

import pytest

import mmevo.demo
from conftest import randomized_model
from mmevo.data.figures import FIGURE_KINDS
from mmevo.demo import demo_config, write_report


def _result(names, parallel: bool) -> tuple[dict, dict]:
    """A result and evaluations of the shape run_demo hands write_report (numbers arbitrary)."""
    ev = {"real": {"pass1": 0.5, "maj": 0.5, "by_kind": {k: {"pass1": 0.5, "maj": 0.5} for k in FIGURE_KINDS}},
          "blank": {"pass1": 0.1}, "shuffled": {"pass1": 0.1}}
    r = {"base_model": "tiny-wide", "threads": {"threads": 2, "parallel": parallel}, "total_seconds": 60.0,
         "sft_seconds": 30.0, "runs_seconds": 30.0, "reused_phases": [], "heldout_problems": 8,
         "samples_per_problem": 8, "pass1_before": 0.4, "pass1_before_ci": [0.3, 0.5], "maj8_before": 0.5,
         "maj8_before_ci": [0.4, 0.6], "text_only_chance": 0.14, "sft_steps": 2}
    for n in names:
        r.update({f"pass1_after_{n}": 0.5, f"pass1_after_{n}_ci": [0.4, 0.6], f"maj8_after_{n}": 0.5,
                  f"maj8_after_{n}_ci": [0.4, 0.6], f"pass1_lift_{n}": 0.1, f"pass1_lift_{n}_ci": [0.0, 0.2],
                  f"{n}_beyond_interval": False})
    return r, {n: ev for n in ["sft", *names]}


@pytest.mark.parametrize("names,parallel", [(["grpo"], False), (["csrs", "mv"], False), (["csrs", "mv"], True)])
def test_demo_report_describes_the_figures_and_has_no_stray_line(names, parallel, tmp_path, monkeypatch):
    # `mmevo demo --method grpo` (one run) wrote "CPU, 2 thread(s)\n. Total time 0.8 min": a line that begins with the
    # full stop, rendered "thread(s) . Total"; and it described the tasks as "digit tables, bar charts", a layout the
    # generator left (mmevo/data/figures.py: seven-segment digits, dot counts or bars, a colour per random quadrant)
    monkeypatch.setattr(mmevo.demo, "_plot_runs", lambda path, out, names: path)
    monkeypatch.setattr(mmevo.demo, "_plot_accuracy", lambda path, r, names: None)
    cfg = demo_config(out_dir=str(tmp_path))
    r, evals = _result(names, parallel)
    write_report(tmp_path, cfg, {n: cfg for n in names}, r, evals)
    text = (tmp_path / "report.md").read_text()
    assert not re.search(r"^\s*\.", text, re.M), text[:400]
    intro = text.split("\n\n")[1]
    assert "digit tables" not in intro
    for style in ("bar heights", "seven-segment digits", "dot counts"):
        assert style in intro.replace("\n", " ")
    assert ("(two runs at once)" in intro) == (parallel and len(names) > 1)
    assert "thread(s). Total time" in intro.replace("\n", " ") or "(two runs at once). Total time" in intro.replace(
        "\n", " ")


def test_honest_rerun_with_more_blocks_reports_the_new_final_model(tiny_text_path, tmp_path):
    # `mmevo evolve honest configs/honest_tiny.yaml`, then the same with honest.gss_blocks=3 ("more blocks extend the
    # run"): block 3 trained and solver/final was exported anew, but eval_after/calibration.json (and summary.json's
    # calibration_after) stayed the report of the 2-block model: the cache was kept whatever weights it described
    import shutil

    from mmevo.config import load_config
    from mmevo.honest.loop import calibration_eval

    root = Path(__file__).resolve().parent.parent
    cfg = load_config(root / "configs" / "honest_tiny.yaml", ["data.n_heldout=3", "eval.max_tokens=12"])
    model = tmp_path / "final"
    shutil.copytree(tiny_text_path, model)
    out = tmp_path / "eval_after"
    first = calibration_eval(cfg, str(model), out, "after RL")
    responses = out / "responses.jsonl"
    kept = responses.stat().st_mtime_ns
    assert calibration_eval(cfg, str(model), out, "after RL") == first
    assert responses.stat().st_mtime_ns == kept  # same weights: the report is reused, nothing generated

    randomized_model(tiny_text_path, seed=3).model.save_pretrained(model)  # the run trained on: new final weights
    second = calibration_eval(cfg, str(model), out, "after RL")
    fresh = calibration_eval(cfg, str(model), tmp_path / "fresh", "after RL")
    assert responses.read_text() == (tmp_path / "fresh" / "responses.jsonl").read_text() != ""
    assert second["n"] == fresh["n"] == 3 and second.get("weights") == fresh.get("weights") != first.get("weights")
