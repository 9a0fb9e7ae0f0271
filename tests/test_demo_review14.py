"""Demo review 14: reruns after a kill, or with a changed knob, resume only what they would have produced."""

from __future__ import annotations

import pytest

TINY_SFT = ["data.n_train=48", "sft.batch_size=16", "sft.save_every=1", "data.n_heldout=2", "trainer.progress=false"]


def test_an_interrupted_sft_with_other_settings_is_refused_not_resumed(tiny_vl_path, tmp_path, capsys):
    """A kill during the demo's SFT, then a rerun with sft.lr=0.5: the rerun resumed the saved state (its optimizer
    and scheduler keeping lr 1e-3) and the finished SFT's summary said sft.lr 0.5. The state now holds its config."""
    from mmevo.demo import demo_config
    from mmevo.grpo.sft import STATE_FILE
    from mmevo.grpo.sft import run_sft as sft_loop
    from mmevo.recipes import load_examples, load_policy, run_sft

    def cfg(*extra):
        return demo_config([f"model.path={tiny_vl_path}", *TINY_SFT, *extra], str(tmp_path))

    train, _ = load_examples(cfg(), "train")
    sft_loop(cfg(), load_policy(cfg()), train, log=False)  # 3 steps, no export: the state of step 2 is what a kill
    state = tmp_path / "sft" / STATE_FILE  # after step 2 leaves
    assert state.exists()
    with pytest.raises(ValueError, match=r"interrupted SFT with other settings \(data.seed, sft.lr\): rerun with "
                                         r"its settings to resume it"):
        run_sft(cfg("sft.lr=0.5", "data.seed=9"))
    assert state.exists() and not (tmp_path / "sft" / "summary.json").exists()
    # the held-out set and where things are written are no SFT settings: it resumes
    capsys.readouterr()
    summary = run_sft(cfg("data.n_heldout=3", "trainer.threads=1"))
    assert "resuming at step 2/3" in capsys.readouterr().out
    assert summary["steps"] == 3 and summary["config"]["sft"]["lr"] == 1e-3 and not state.exists()


def test_an_sft_from_another_base_model_is_not_reused(tmp_path):
    """`mmevo demo model.path=tiny` into the --out of a tiny-wide demo reused its SFT (and so its runs) while the
    report named tiny as the base model: model.path was left out of the settings compared. A knob the SFT does not
    read (sft.save_every, the RL-only model.trainable) was refused."""
    import json
    import math

    from mmevo.config import to_dict
    from mmevo.demo import demo_config, run_demo, sft_changes

    cfg = demo_config(TINY_SFT, str(tmp_path))
    assert cfg.model.path == "tiny-wide"
    summary = {"steps": math.ceil(cfg.data.n_train * cfg.sft.epochs / cfg.sft.batch_size), "config": to_dict(cfg)}
    assert sft_changes(summary, demo_config(TINY_SFT + ["model.path=tiny"], str(tmp_path))) == ["model.path"]
    assert sft_changes(summary, demo_config(TINY_SFT + ["sft.save_every=7", "model.trainable=[]"],
                                            str(tmp_path))) == []
    (tmp_path / "sft").mkdir(parents=True)
    (tmp_path / "sft" / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ValueError, match=r"holds an SFT with other settings \(model.path\): use another --out"):
        run_demo(demo_config(TINY_SFT + ["model.path=tiny"], str(tmp_path)), str(tmp_path))


def _report_inputs(tmp_path):
    """A config, the run configs, a result and evaluations of the label-free demo, as run_demo passes them."""
    from mmevo.data.figures import FIGURE_KINDS
    from mmevo.demo import demo_config

    ev = {"real": {"by_kind": {k: {"pass1": 0.4, "maj": 0.5} for k in FIGURE_KINDS}},
          "blank": {"pass1": 0.09}, "shuffled": {"pass1": 0.1}}
    r = {"method": "csrs", "base_model": "tiny-wide", "threads": {"threads": 2, "parallel": True},
         "total_seconds": 600.0, "sft_seconds": 300.0, "runs_seconds": 300.0, "reused_phases": [],
         "heldout_problems": 400, "samples_per_problem": 8, "pass1_before": 0.458, "pass1_before_ci": [0.429, 0.488],
         "maj8_before": 0.6, "maj8_before_ci": [0.55, 0.65], "text_only_chance": 0.14, "sft_steps": 320}
    for n in ("csrs", "mv"):
        r.update({f"pass1_after_{n}": 0.46, f"pass1_after_{n}_ci": [0.43, 0.49], f"maj8_after_{n}": 0.6,
                  f"maj8_after_{n}_ci": [0.55, 0.65], f"pass1_lift_{n}": 0.002, f"pass1_lift_{n}_ci": [-0.01, 0.01]})
    cfg = demo_config(out_dir=str(tmp_path))
    return cfg, {"csrs": cfg, "mv": cfg}, r, {n: ev for n in ("sft", "csrs", "mv")}


def test_a_kill_before_the_plots_are_drawn_leaves_the_old_result(tmp_path, monkeypatch):
    """result.json was written before the report and plots: a kill between left the new figures in result.json beside
    the old plots, and the rerun (nothing to measure again, the same figures) kept those plots. It is written last."""
    import json

    from mmevo import demo

    cfg, configs, first, evals = _report_inputs(tmp_path)
    demo.publish(tmp_path, "csrs", cfg, configs, first, evals, all_reused=False)
    second = {**first, "pass1_after_csrs": 0.55, "pass1_after_csrs_ci": [0.52, 0.58]}  # an evaluation made again

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed while drawing")

    with monkeypatch.context() as m:
        m.setattr(demo, "_plot_accuracy", killed)
        with pytest.raises(KeyboardInterrupt):
            demo.publish(tmp_path, "csrs", cfg, configs, second, evals, all_reused=False)
    assert json.loads((tmp_path / "result.json").read_text())["pass1_after_csrs"] == 0.46  # the report's figures
    # the rerun measures nothing again: the figures differ from the saved ones, so everything is drawn for them
    kept = demo.publish(tmp_path, "csrs", cfg, configs, second, evals, all_reused=True)
    assert kept["pass1_after_csrs"] == 0.55
    assert "pass@1 0.458 -> 0.550 (above" in " ".join((tmp_path / "report.md").read_text().split())
    demo._plot_accuracy(tmp_path / "expected.png", second, ["csrs", "mv"])
    assert (tmp_path / "accuracy.png").read_bytes() == (tmp_path / "expected.png").read_bytes()
    # and once more: nothing changes, the report and the result are kept as they are
    report = (tmp_path / "report.md").read_bytes()
    again = demo.publish(tmp_path, "csrs", cfg, configs, {**second, "total_seconds": 1.0}, evals, all_reused=True)
    assert again["total_seconds"] == 600.0 and (tmp_path / "report.md").read_bytes() == report


def test_the_report_states_the_evaluation_token_budget(tmp_path):
    """A rerun with trainer.eval_max_tokens=24 keeps the finished runs (it trains nothing) and evaluates everything
    again under it, yet the report did not say so: it read like the earlier report of 48-token evaluations."""
    from types import SimpleNamespace

    from mmevo.demo import build_result, write_report

    cfg, configs, r, evals = _report_inputs(tmp_path)
    for ev in evals.values():  # what cached_eval records with an evaluation
        ev.update(max_tokens=24, per_problem={"pass1": [0.5, 0.25], "maj": [1.0, 0.0]})
        ev["real"].update(pass1=0.375, pass1_ci=[0.25, 0.5], maj=0.5, maj_ci=[0.0, 1.0])
    built = build_result(evals, ["csrs", "mv"], [], [SimpleNamespace(meta={})] * 2)
    assert built["eval_max_tokens"] == 24
    write_report(tmp_path, cfg, configs, {**r, **built}, evals)
    text = " ".join((tmp_path / "report.md").read_text().split())
    assert "## Held-out (2 problems, 8 samples each at temperature 1, at most 24 tokens; 95% bootstrap" in text


def test_a_kill_while_a_plot_is_drawn_leaves_no_torn_plot(tmp_path, monkeypatch):
    """A rerun that measures nothing again draws only the plots that are missing: one torn by a kill mid-write (the
    plots were written in place) was kept for good. They are written through a temporary file."""
    import matplotlib.figure

    from mmevo import demo

    cfg, configs, r, evals = _report_inputs(tmp_path)
    demo.publish(tmp_path, "csrs", cfg, configs, r, evals, all_reused=False)
    drawn = (tmp_path / "accuracy.png").read_bytes()
    (tmp_path / "accuracy.png").unlink()  # a plot lost: the next rerun draws it again
    real_savefig = matplotlib.figure.Figure.savefig

    def killed_mid_write(fig, fname, *args, **kwargs):
        real_savefig(fig, fname, *args, **kwargs)
        with open(fname, "r+b") as f:  # the first half of the file written, then the kill
            f.truncate(len(drawn) // 2)
        raise KeyboardInterrupt("killed while writing")

    with monkeypatch.context() as m:
        m.setattr(matplotlib.figure.Figure, "savefig", killed_mid_write)
        with pytest.raises(KeyboardInterrupt):
            demo.publish(tmp_path, "csrs", cfg, configs, r, evals, all_reused=True)
    assert not (tmp_path / "accuracy.png").exists()  # not a torn one the next rerun keeps
    demo.publish(tmp_path, "csrs", cfg, configs, r, evals, all_reused=True)
    assert (tmp_path / "accuracy.png").read_bytes() == drawn
