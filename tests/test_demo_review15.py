"""Demo review 15: a rerun with another held-out set evaluates every model on it; a refused rerun changes nothing."""

from __future__ import annotations

import json

import pytest

SMALL = ["data.n_train=64", "data.n_heldout=3", "sft.batch_size=16", "trainer.steps=1", "trainer.prompts_per_step=2",
         "trainer.mini_batch_prompts=2", "rollout.n=4", "csrs.m=2", "rollout.max_tokens=12", "trainer.threads=2",
         "trainer.progress=false"]


def test_the_evaluations_of_one_report_are_of_one_heldout_set():
    from mmevo.demo import build_result

    ev = {"real": {"pass1": 0.5, "pass1_ci": [0.0, 1.0], "maj": 0.5, "maj_ci": [0.0, 1.0]},
          "per_problem": {"pass1": [0.5, 0.5], "maj": [1.0, 0.0]}}
    evals = {"sft": {**ev, "problems": "a"}, "csrs": {**ev, "problems": "a"}, "mv": {**ev, "problems": "b"}}
    with pytest.raises(ValueError, match="different held-out sets"):
        build_result(evals, ["csrs", "mv"], [], [])


def test_a_rerun_with_another_heldout_set_evaluates_every_model_on_it(tiny_vl_path, tmp_path, capsys):
    """`data.n_heldout=4` on a rerun into the --out of a finished n_heldout=3 demo: the start was evaluated on the 4
    problems and written over its evaluation, then the runs were refused ("finished run with other settings
    (data.n_heldout)"), leaving evals/sft.json of another set than result.json's. The held-out set trains nothing:
    every model is evaluated on the new set (the runs are not trained again) and the report states its size."""
    from mmevo.demo import demo_config, model_stamp, run_demo

    out = tmp_path / "demo"
    overrides = [f"model.path={tiny_vl_path}", *SMALL]
    first = run_demo(demo_config(overrides, str(out)), str(out))
    assert first["heldout_problems"] == 3
    trained = {n: model_stamp(out / n / "final") for n in ("csrs", "mv")}
    start_eval = (out / "evals" / "sft.json").read_bytes()

    # a change a finished run is refused for, and that the start's evaluation reads: refused before anything
    with pytest.raises(ValueError, match=r"finished run with other settings \(rollout.max_tokens\)"):
        run_demo(demo_config(overrides + ["rollout.max_tokens=10"], str(out)), str(out))
    assert (out / "evals" / "sft.json").read_bytes() == start_eval

    capsys.readouterr()
    r = run_demo(demo_config(overrides + ["data.n_heldout=4"], str(out)), str(out))
    printed = capsys.readouterr().out
    for label in ("CSRS (label-free)", "majority vote (label-free)"):
        assert f"{label}: trained earlier, evaluating its final model again" in printed
    assert {n: model_stamp(out / n / "final") for n in ("csrs", "mv")} == trained  # not trained again
    evals = {n: json.loads((out / "evals" / f"{n}.json").read_text()) for n in ("sft", "csrs", "mv")}
    assert {ev["n"] for ev in evals.values()} == {4} and len({ev["problems"] for ev in evals.values()}) == 1
    assert all(len(ev["per_problem"]["pass1"]) == 4 for ev in evals.values())
    saved = json.loads((out / "result.json").read_text())
    assert saved["heldout_problems"] == 4 and saved["reevaluated_runs"] == ["csrs", "mv"]
    for n in ("csrs", "mv"):  # the paired lift is of the new set's problems, start and run alike
        diffs = [a - b for a, b in zip(evals[n]["per_problem"]["pass1"], evals["sft"]["per_problem"]["pass1"])]
        assert saved[f"pass1_lift_{n}"] == pytest.approx(sum(diffs) / 4)
        assert saved[f"pass1_after_{n}"] == evals[n]["real"]["pass1"]
    assert saved["pass1_before"] == evals["sft"]["real"]["pass1"] == r["pass1_before"]
    report = " ".join((out / "report.md").read_text().split())
    assert "## Held-out (4 problems, 8 samples each" in report
    # the total is its parts: the start's evaluation (all of this rerun but the runs') was in neither "SFT" nor "runs"
    for res in (first, saved):
        parts = res["sft_seconds"] + res["start_eval_seconds"] + res["runs_seconds"]
        assert parts == pytest.approx(res["total_seconds"], abs=1e-6)
    assert (f"Total time {saved['total_seconds'] / 60:.1f} min (SFT {saved['sft_seconds'] / 60:.1f} min, evaluation "
            f"of the start {saved['start_eval_seconds'] / 60:.1f} min, runs {saved['runs_seconds'] / 60:.1f} min; "
            "reused from an earlier invocation") in report
    assert "only evaluated again in this one: CSRS (label-free), majority vote (label-free))" in report
