"""CSRS review 14: a rerun into the output dir of a run that has already run all its steps, with a knob changed
(``csrs.omega=0.5`` after a run at 0.7), trains nothing, so it must not be reported as a run under the new value."""

import json

import pytest
import torch
from safetensors.torch import load_file

from mmevo import recipes
from mmevo.config import load_config


def _cfg(model, out, *over):
    return load_config(None, [
        f"model.path={model}", "data.train=synthetic", "data.n_train=8", "data.n_heldout=2",
        "data.prompt_template=none", "data.hide_labels=true", "csrs.enabled=true", "csrs.m=1", "csrs.omega=0.7",
        "reward.heads={sfr: 1.0}", "rollout.n=2", "rollout.max_tokens=4", "trainer.prompts_per_step=2",
        "trainer.mini_batch_prompts=2", "trainer.save_every=1", "trainer.wandb_mode=disabled",
        "trainer.progress=false", f"trainer.output_dir={out}", *over])


def test_a_finished_run_rerun_with_a_changed_knob_is_refused_not_reported_as_applied(tiny_vl_path, tmp_path):
    out = tmp_path / "run"
    recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=1"))
    summary_before = (out / "summary.json").read_text()
    weights_before = load_file(out / "final" / "model.safetensors")
    # it used to resume at step 1 of 1, warn "this run's values apply", run no step, re-export the same weights and
    # write a summary whose config said omega 0.5 with resumed_with_changes [{step 1, csrs.omega, 0.7 -> 0.5}]:
    # a model trained wholly at 0.7 recorded as a run at 0.5
    with pytest.raises(ValueError, match=r"(?s)all 1 of its trainer\.steps=1.*csrs\.omega 0\.7 -> 0\.5.*"
                                         r"trainer\.steps.*trainer\.resume=false"):
        recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=1", "csrs.omega=0.5"))
    assert (out / "summary.json").read_text() == summary_before  # nothing rewritten
    assert json.loads(summary_before)["config"]["csrs"]["omega"] == 0.7
    weights_after = load_file(out / "final" / "model.safetensors")
    assert all(torch.equal(weights_before[k], weights_after[k]) for k in weights_before)

    # the same rerun with the run's own settings still re-exports and re-evaluates (nothing to refuse) ...
    again = recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=1"))
    assert "resumed_with_changes" not in again
    # ... and raising trainer.steps continues the run under the new value, which then applies to step 2
    more = recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=2", "csrs.omega=0.5"))
    assert more["resumed_with_changes"] == [{"step": 1, "key": "csrs.omega", "was": 0.7, "now": 0.5}]
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]
