"""CSRS review 12: a CSRS run resumed under other settings (a documented knob changed between reruns into one
trainer.output_dir) warns, and its summary.json names each change with the step it took effect, its old and new
value; summary["config"] alone holds the last run's values, as if every step had run under them."""

import json

import pytest

from mmevo import recipes
from mmevo.config import load_config


def _cfg(model, out, *over):
    return load_config(None, [
        f"model.path={model}", "data.train=synthetic", "data.n_train=8", "data.n_heldout=2",
        "data.prompt_template=none", "data.hide_labels=true", "csrs.enabled=true", "csrs.m=1", "csrs.omega=0.7",
        "reward.heads={sfr: 1.0}", "rollout.n=2", "rollout.max_tokens=4", "trainer.prompts_per_step=2",
        "trainer.mini_batch_prompts=2", "trainer.save_every=1", "trainer.wandb_mode=disabled",
        "trainer.progress=false", f"trainer.output_dir={out}", *over])


def test_resume_config_diff_names_old_and_new_values():
    from mmevo.grpo.trainer import resume_config_diff

    saved = {"csrs": {"omega": 0.7, "m": 5}, "trainer": {"steps": 2, "lr": 1.0}, "reward": {"heads": {"sfr": 1.0}}}
    now = {"csrs": {"omega": 0.5, "m": 5}, "trainer": {"steps": 4, "lr": 0.5}, "reward": {"heads": {"majority": 1.0}}}
    assert resume_config_diff(saved, now, 2) == [
        {"step": 2, "key": "csrs.omega", "was": 0.7, "now": 0.5},
        {"step": 2, "key": "reward.heads", "was": {"sfr": 1.0}, "now": {"majority": 1.0}},
        # the loaded optimizer state keeps its lr: the record must not claim 0.5 applied
        {"step": 2, "key": "trainer.lr", "was": 1.0, "now": 0.5, "applied": False}]
    assert resume_config_diff(saved, saved, 2) == [] and resume_config_diff(None, now, 2) == []


def test_a_csrs_run_resumed_with_another_omega_says_so_in_its_summary(tiny_vl_path, tmp_path):
    out = tmp_path / "run"
    first = recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=1"))
    assert "resumed_with_changes" not in first  # nothing changed: the key set of a plain run stays as it was
    with pytest.warns(UserWarning, match=r"csrs\.omega \(this run's values apply.*csrs\.omega 0\.7 -> 0\.5"):
        second = recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=2", "csrs.omega=0.5"))
    change = {"step": 1, "key": "csrs.omega", "was": 0.7, "now": 0.5}
    assert second["config"]["csrs"]["omega"] == 0.5 and second["resumed_with_changes"] == [change]
    assert json.loads((out / "summary.json").read_text())["resumed_with_changes"] == [change]
    # a later rerun that changes nothing more still names it: the change is kept in the checkpoints
    third = recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=3", "csrs.omega=0.5"))
    assert third["resumed_with_changes"] == [change]
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]


def _reduce_on_rank(rank: int, init_file: str, results) -> None:
    import torch.distributed as dist

    from mmevo.grpo.distributed import all_reduce_mean
    from mmevo.grpo.trainer import SUMMED_STEP_METRICS

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:  # each rank's share of one step: 4 prompts x (2 maternal + 2 x 5 re-inferences), its own token counts
        mine = {"csrs/reinference_tokens": [1254.0, 1340.0][rank], "data/samples": 192.0,
                "csrs/anchor_mean": [15.0, 16.0][rank], "csrs/reinference_frac": 5 / 6}
        results[rank] = all_reduce_mean(mine, sum_keys=SUMMED_STEP_METRICS)
    finally:
        dist.destroy_process_group()


def test_reinference_tokens_are_summed_over_ranks_as_the_step_total(tmp_path):
    # csrs/reinference_tokens is the step's total (one process: every prompt's re-inference tokens); a 2-process
    # CSRS run logged the mean of the ranks' totals, 1254 where one process logs about 2594 for the same step
    import torch.multiprocessing as mp

    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_reduce_on_rank, args=(str(tmp_path / "init"), results), nprocs=2, join=True)
        got = dict(results)
    assert got[0] == got[1]
    assert got[0]["csrs/reinference_tokens"] == 2594.0 and got[0]["data/samples"] == 384.0
    assert got[0]["csrs/anchor_mean"] == 15.5 and got[0]["csrs/reinference_frac"] == 5 / 6  # means stay means


def test_a_failed_rewrite_of_the_curve_on_resume_keeps_its_rows(tmp_path, monkeypatch):
    # the resume truncates metrics.jsonl to the checkpoint's step; a full disk (or a kill) mid-rewrite lost every row,
    # and the steps up to the checkpoint are never run again
    from pathlib import Path

    from mmevo.metrics import read_curve, truncate_rows_after

    curve = tmp_path / "metrics.jsonl"
    curve.write_text("".join(json.dumps({"step": s, "reward/sfr/mean": s / 10}) + "\n" for s in (1, 2, 3)))
    real_write = Path.write_text

    def disk_full(self, text, *a, **k):  # opens (truncating) and writes part, as a write hitting ENOSPC does
        real_write(self, text[:5], *a, **k)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    with pytest.raises(OSError):
        truncate_rows_after(curve, 2)
    monkeypatch.undo()
    assert [r["step"] for r in read_curve(curve)] == [1, 2, 3]  # untouched: the rerun truncates it again
    truncate_rows_after(curve, 2)
    assert [r["step"] for r in read_curve(curve)] == [1, 2] and not (tmp_path / "metrics.jsonl.tmp").exists()



def test_a_geoqa_row_with_an_empty_answer_tag_is_named_as_such(tmp_path):
    # an R1-V row whose solution is "<answer></answer>" was reported as having no <answer> tag at all
    from PIL import Image

    from mmevo.data.benchmarks import load_items
    from mmevo.data.schema import DataError

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    rows = [{"image": "a.png", "problem": "<image>Find x.", "solution": s}
            for s in ("<answer>3</answer>", "<answer> </answer>", "x is 3")]
    (tmp_path / "g.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"g\.jsonl:2 \(row 1\): field 'solution': has an empty <answer></answer>"):
        load_items("geoqa", tmp_path / "g.jsonl")
    (tmp_path / "g.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[::2]))
    with pytest.raises(DataError, match=r"g\.jsonl:2 \(row 1\): field 'solution': has no <answer>\.\.\.</answer>"):
        load_items("geoqa", tmp_path / "g.jsonl")


@pytest.mark.parametrize("command", ["train", "sft"])
def test_a_missing_model_path_is_named_by_its_setting(tmp_path, capsys, command):
    # "mmevo train: error: model path '...' does not exist" named no setting (the loops' own check names model.path)
    from mmevo.cli import main

    missing = tmp_path / "no_such_model"
    out = "trainer.output_dir" if command == "train" else "sft.output_dir"
    assert main([command, "configs/csrs_tiny.yaml", f"model.path={missing}", "data.n_train=8", "data.n_heldout=2",
                 f"{out}={tmp_path / 'run'}"]) == 2
    assert f"model.path={missing}: model path" in capsys.readouterr().err


def test_a_resume_onto_another_train_set_is_refused_naming_the_setting(tiny_vl_path, tmp_path):
    # was: the warning "this run's values apply" for data.n_train, then a bare "checkpoint was made with 8 training
    # rows, this run has 6" naming neither the checkpoint nor the setting
    import warnings

    out = tmp_path / "run"
    recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=1", "data.n_heldout=0"))
    with warnings.catch_warnings(record=True) as caught, pytest.raises(
            ValueError, match=r"cannot resume \S*step_000001: its data position / plug-in state do not fit this run, "
                              r"whose settings differ from the checkpoint's in data\.n_train \(ValueError: checkpoint "
                              r"was made with 8 training rows, this run has 6\)"):
        warnings.simplefilter("always")
        recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=2", "data.n_heldout=0", "data.n_train=6"))
    assert not [w for w in caught if "values apply" in str(w.message)]
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 1
