"""Reviewed defects: a fresh run over a finished one leaves no finished marker while it runs; SFT seeds the global
RNG (LoRA dropout) from trainer.seed. (A split held-out evaluation's seeds: tests/test_eval_item_seeds.py.)"""

import json

import pytest

from mmevo import recipes
from mmevo.grpo.trainer import GRPOTrainer
from test_csrs12_review12 import _cfg as _run_cfg  # the tiny CSRS run (sfr head, m = 1) the earlier reviews used


def _killed_after_first_step(monkeypatch):
    """The run dies (a kill) right after its first step."""
    real = GRPOTrainer.step

    def step_then_die(self, *a, **k):
        real(self, *a, **k)
        raise KeyboardInterrupt

    monkeypatch.setattr(GRPOTrainer, "step", step_then_die)


@pytest.mark.parametrize("fresh", [["trainer.resume=false"], ["trainer.save_every=0"]],
                         ids=["resume-false", "no-checkpoint"])
def test_a_fresh_run_killed_over_a_finished_run_leaves_no_finished_marker(tiny_vl_path, tmp_path, monkeypatch,
                                                                           fresh):
    out = tmp_path / "run"
    recipes.run_grpo(_run_cfg(tiny_vl_path, out, "trainer.steps=1", *fresh))
    assert (out / "summary.json").is_file() and (out / "final" / "config.json").is_file()
    with monkeypatch.context() as m:  # a start afresh: asked for, or nothing to resume
        _killed_after_first_step(m)
        with pytest.raises(KeyboardInterrupt):
            recipes.run_grpo(_run_cfg(tiny_vl_path, out, "trainer.steps=2", *fresh))
    # they used to stay until the new run finished: the demo took the killed run for the earlier, finished one
    assert not (out / "summary.json").exists() and not (out / "final").exists()
    summary = recipes.run_grpo(_run_cfg(tiny_vl_path, out, "trainer.steps=2", *fresh))
    assert json.loads((out / "summary.json").read_text())["config"]["trainer"]["steps"] == 2
    assert (out / "final" / "config.json").is_file() and summary["final_model"] == str(out / "final")


def test_a_resumed_finished_run_keeps_its_markers_until_it_rewrites_them(tiny_vl_path, tmp_path, monkeypatch):
    out = tmp_path / "run"
    recipes.run_grpo(_run_cfg(tiny_vl_path, out, "trainer.steps=1"))
    summary = (out / "summary.json").read_text()
    with monkeypatch.context() as m:  # a resume that continues to step 2, killed there: step 1's run stays finished
        _killed_after_first_step(m)
        with pytest.raises(KeyboardInterrupt):
            recipes.run_grpo(_run_cfg(tiny_vl_path, out, "trainer.steps=2"))
    assert (out / "summary.json").read_text() == summary and (out / "final" / "config.json").is_file()


def test_sft_dropout_draws_from_the_runs_seed_not_what_the_process_drew_before(tiny_text_path, tmp_path):
    import torch

    from mmevo.data.schema import Example
    from mmevo.data.text_questions import generate_text_questions
    from mmevo.grpo.sft import run_sft
    from mmevo.models.loader import load_model
    from test_sft_model_settings import _cfg

    qs = generate_text_questions(8, seed=3)
    ex = [Example(f"q{i}", q.question, q.answer, [], [], solution=f"\\boxed{{{q.answer}}}") for i, q in enumerate(qs)]
    over = {"model.lora.rank": 4, "model.lora.alpha": 8, "model.lora.dropout": 0.5}
    losses = []
    for before in (1, 2):  # the process drew other numbers before each SFT
        torch.manual_seed(before)
        hist = run_sft(_cfg(tiny_text_path, tmp_path / f"sft{before}", **over), load_model(tiny_text_path), ex,
                       log=False)
        losses.append([h["sft/loss"] for h in hist])
    assert losses[0] == losses[1]  # the same LoRA-dropout masks: they used to follow the global generator's state
