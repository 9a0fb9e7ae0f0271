"""Review rev14: settings added to mmevo since a run was saved (today prism.init_counts) counted as changed
settings, so reruns a user does every day with the run's own settings were refused: ``mmevo train`` into a finished
run whose checkpoint an earlier build wrote ("has run all 1 of its trainer.steps=1 under other settings than this
rerun's: prism.init_counts None -> ''"), and a Prism loop resumed from a run_config.json an earlier build wrote."""

import json
import sys
from pathlib import Path

import pytest
import torch

from mmevo import recipes
from mmevo.config import ConfigError, load_config, to_dict
from mmevo.evolve.rerun import RUN_CONFIG, check_rerun_config
from mmevo.grpo.trainer import resume_config_changes

sys.path.insert(0, str(Path(__file__).parent))
from test_csrs14_review import _cfg  # noqa: E402  (the finished-run refusal's own tiny CSRS run)


def _without(config: dict, section: str, key: str) -> dict:
    """``config`` as a build from before ``section.key`` existed wrote it."""
    out = json.loads(json.dumps(config))
    del out[section][key]
    return out


def test_a_setting_added_since_at_its_default_is_no_change_but_set_it_is():
    now = to_dict(load_config(None, []))
    older = _without(now, "prism", "init_counts")
    assert resume_config_changes(older, now) == []
    assert resume_config_changes(older, to_dict(load_config(None, ["prism.init_counts=counts.npy"]))) == [
        "prism.init_counts"]
    # a key this mmevo does not know stays a change either way (no default to stand for the old behaviour)
    assert resume_config_changes({**older, "data": {**older["data"], "gone": 1}}, now) == ["data.gone"]
    assert resume_config_changes(older, {**now, "data": {**now["data"], "new": 1}}) == ["data.new"]


def test_a_loop_resumed_from_an_earlier_builds_run_config_is_not_refused(tmp_path):
    cfg = load_config(None, ["prism.iterations=2"])
    (tmp_path / RUN_CONFIG).write_text(json.dumps(_without(to_dict(cfg), "prism", "init_counts")))
    check_rerun_config(tmp_path, cfg, "prism", frozenset())  # used to raise: prism.init_counts='<unset>'
    with pytest.raises(ConfigError, match=r"prism\.init_counts='<unset>'"):
        check_rerun_config(tmp_path, load_config(None, ["prism.iterations=2", "prism.init_counts=c.npy"]), "prism",
                           frozenset())


def test_a_finished_run_from_an_earlier_build_reruns_with_its_own_settings(tiny_vl_path, tmp_path):
    out = tmp_path / "run"
    recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=1"))
    (state_file,) = out.rglob("trainer_state.pt")
    state = torch.load(state_file, weights_only=False)
    state["config"] = _without(state["config"], "prism", "init_counts")  # as yesterday's build saved it
    torch.save(state, state_file)
    # a rerun to re-export / re-evaluate after a crash: it was refused, naming "prism.init_counts None -> ''"
    again = recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=1"))
    assert "resumed_with_changes" not in again
    assert json.loads((out / "summary.json").read_text())["config"]["csrs"]["omega"] == 0.7
    # a real change is still refused
    with pytest.raises(ValueError, match=r"csrs\.omega 0\.7 -> 0\.5"):
        recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=1", "csrs.omega=0.5"))


def test_a_demo_rerun_over_an_earlier_builds_runs_and_sft_reuses_them(tmp_path):
    """`mmevo demo` into an --out an earlier build filled: its finished runs' summaries lack prism.init_counts (and
    an SFT summary a setting added since), which refused the rerun as "a finished run with other settings"."""
    import dataclasses

    from mmevo.demo import demo_config, finished_run_changes, sft_changes

    cfg = demo_config(["data.n_train=48", "data.n_heldout=2"], str(tmp_path))
    run = dataclasses.replace(cfg, trainer=dataclasses.replace(cfg.trainer, output_dir=str(tmp_path / "csrs")))
    (tmp_path / "csrs").mkdir()
    (tmp_path / "csrs" / "summary.json").write_text(json.dumps(
        {"config": _without(to_dict(run), "prism", "init_counts")}))
    assert finished_run_changes(run) == []  # was ["prism.init_counts"]
    older_sft = {"steps": 3, "config": _without(to_dict(cfg), "data", "skip_bad_rows")}
    assert sft_changes(older_sft, cfg) == []  # was ["data.skip_bad_rows"]
    # set away from its default, the new setting is a change the earlier run did not have
    set_it = demo_config(["data.n_train=48", "data.n_heldout=2", "data.skip_bad_rows=true"], str(tmp_path))
    assert sft_changes(older_sft, set_it) == ["data.skip_bad_rows"]


def test_a_finished_run_rerun_with_its_model_path_spelled_relative_is_not_refused(tiny_vl_path, tmp_path,
                                                                                  monkeypatch):
    """Killed during the final export / evaluation (its last checkpoint saved, no summary), rerun with the same
    model directory spelled relative: refused as "model.path '/.../tiny-vl' -> 'tiny-vl'"."""
    import os

    out = tmp_path / "run"
    recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=1"))
    (out / "summary.json").unlink()
    monkeypatch.chdir(Path(tiny_vl_path).parent)
    again = recipes.run_grpo(_cfg(os.path.relpath(tiny_vl_path), out, "trainer.steps=1"))
    assert "resumed_with_changes" not in again
    # another model directory is still a change
    from mmevo.grpo.trainer import resume_config_changes

    other = tmp_path / "other-model"
    other.mkdir()
    assert resume_config_changes({"model": {"path": str(tiny_vl_path)}}, {"model": {"path": str(other)}}) == [
        "model.path"]
    assert resume_config_changes({"model": {"path": "org/name"}}, {"model": {"path": "org/other"}}) == ["model.path"]
