"""The demo end to end at toy size: SFT, the two label-free runs side by side, sampled evaluations, report, resume."""

from __future__ import annotations

import json

import pytest


def test_demo_runs_reports_and_resumes(tiny_vl_path, tmp_path, capsys):
    from mmevo.demo import demo_config, run_demo

    out = tmp_path / "demo"
    overrides = [f"model.path={tiny_vl_path}", "data.n_train=64", "data.n_heldout=12", "sft.batch_size=16",
                 "trainer.steps=2", "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2",
                 "rollout.n=4", "csrs.m=2", "rollout.max_tokens=12", "trainer.save_every=1", "trainer.threads=2",
                 "trainer.progress=false"]
    r = run_demo(demo_config(overrides, str(out)), str(out))
    saved = json.loads((out / "result.json").read_text())
    for key in ("pass1_before", "maj8_before", "pass1_after_csrs", "pass1_after_mv", "total_seconds"):
        assert key in saved and saved[key] == r[key]
    for key in ("pass1_before", "maj8_before", "pass1_after_csrs", "pass1_after_mv"):
        lo, hi = saved[f"{key}_ci"]
        assert 0.0 <= lo <= saved[key] <= hi <= 1.0
    assert 0.0 <= saved["text_only_chance"] < 0.5
    # both runs trained from the SFT model, label-free, and were evaluated with the image controls
    for name, head in (("csrs", "sfr"), ("mv", "majority")):
        summary = json.loads((out / name / "summary.json").read_text())
        assert summary["config"]["data"]["hide_labels"] is True
        assert list(summary["config"]["reward"]["heads"]) == [head]
        assert summary["config"]["model"]["path"] == str(out / "sft" / "model")
        ev = json.loads((out / "evals" / f"{name}.json").read_text())
        assert {"real", "blank", "shuffled", "per_problem"} <= set(ev) and len(ev["per_problem"]["pass1"]) == 12
    assert json.loads((out / "csrs" / "summary.json").read_text())["config"]["csrs"]["enabled"] is True
    report = (out / "report.md").read_text()
    assert "pass@1" in report and "blank image" in report and "curves.png" in report
    assert "model.trainable" in report  # the demo config trains only the final norm: the report says so
    assert (out / "curves.png").exists() and (out / "accuracy.png").exists()

    # a rerun reuses every finished phase: nothing is trained again
    measured = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}  # report, result, plots
    capsys.readouterr()
    again = run_demo(demo_config(overrides, str(out)), str(out))
    printed = capsys.readouterr().out
    assert "reusing the SFT model" in printed and printed.count("finished earlier") == 2
    # nothing was measured again: report and result keep the times of the invocation that measured them (the
    # rerun rewrote report.md with its own seconds of reuse, "Total time 0.1 min")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == measured
    assert again == json.loads(json.dumps(r)) and again["reused_phases"] == []

    # a rerun that evaluates one run again: its times are its own, and the phases it reused are named
    (out / "evals" / "mv.json").unlink()
    capsys.readouterr()
    part = run_demo(demo_config(overrides, str(out)), str(out))
    assert part["reused_phases"] == ["sft", "csrs"] and part["pass1_after_mv"] == r["pass1_after_mv"]
    assert json.loads((out / "result.json").read_text())["reused_phases"] == ["sft", "csrs"]
    # majority vote was trained by the first invocation and only evaluated in this one: it said "2 steps, log in"
    # and the report's "runs ... min" read as its training
    printed = capsys.readouterr().out
    assert "majority vote (label-free): trained earlier, evaluating its final model again, log in" in printed
    assert "steps, log in" not in printed
    assert part["reevaluated_runs"] == ["mv"]
    assert ("reused from an earlier invocation, so not in these times: SFT (start), CSRS (label-free); trained by "
            "an earlier invocation and only evaluated again in this one: majority vote (label-free))"
            in " ".join((out / "report.md").read_text().split()))

    # --method grpo into the same --out trains from the same SFT and keeps the label-free results: it wrote its
    # report.md and result.json over theirs
    label_free = {n: (out / n).read_bytes() for n in ("report.md", "result.json", "accuracy.png", "curves.png")}
    grpo = run_demo(demo_config(overrides, str(out)), str(out), method="grpo")
    assert {n: (out / n).read_bytes() for n in label_free} == label_free
    saved_grpo = json.loads((out / "result_grpo.json").read_text())
    assert saved_grpo["method"] == "grpo" and saved_grpo["pass1_after_grpo"] == grpo["pass1_after_grpo"]
    assert saved_grpo["pass1_before"] == r["pass1_before"] and "pass1_after_csrs" not in saved_grpo
    grpo_report = (out / "report_grpo.md").read_text()
    assert "GRPO (verifiable reward)" in grpo_report and "CSRS (label-free)" not in grpo_report
    assert "](accuracy_grpo.png)" in grpo_report and "](curves_grpo.png)" in grpo_report
    assert (out / "accuracy_grpo.png").exists() and (out / "curves_grpo.png").exists()
    # a result.json an earlier build wrote for another method is refused, not written over
    (out / "result.json").write_text(json.dumps({**saved_grpo, "method": "grpo"}))
    with pytest.raises(ValueError, match=r"result.json holds the results of --method grpo, not csrs"):
        run_demo(demo_config(overrides, str(out)), str(out))

    # a changed SFT budget is refused instead of silently reusing the old model
    with pytest.raises(ValueError, match="another --out"):
        run_demo(demo_config(overrides + ["data.n_train=96"], str(out)), str(out))
