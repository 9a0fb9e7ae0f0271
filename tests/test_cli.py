"""The command line and the shipped configs, run for real on the tiny model."""

import json
from pathlib import Path

import pytest

from mmevo.cli import main
from mmevo.config import load_config

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("cfg", sorted((ROOT / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_load(cfg):
    c = load_config(cfg)
    assert c.trainer.prompts_per_step % c.trainer.mini_batch_prompts == 0


def test_help_lists_commands_and_keys(capsys):
    assert main(["--help"]) == 0
    assert "demo" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["train", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "trainer.lr = 1e-06" in out and "algo.kl_type = 'low_var_kl'" in out


def test_bad_override_is_a_clear_error(capsys):
    assert main(["train", "trainer.nope=1"]) == 2
    assert "trainer.nope" in capsys.readouterr().err


def test_sft_then_train_then_eval(tmp_path, tiny_vl_path, capsys):
    common = ["data.prompt_template=none", "data.n_train=16", "data.n_heldout=4", "trainer.progress=false",
              "rollout.max_tokens=8", "trainer.wandb_mode=disabled"]
    assert main(["sft", f"model.path={tiny_vl_path}", f"sft.output_dir={tmp_path}/sft", "sft.epochs=1",
                 "sft.batch_size=8"] + common) == 0
    sft_model = tmp_path / "sft" / "model"
    assert (sft_model / "config.json").exists()
    out = tmp_path / "grpo"
    assert main(["train", f"model.path={sft_model}", f"trainer.output_dir={out}", "trainer.steps=2",
                 "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2", "rollout.n=2", "trainer.save_every=1",
                 "algo.kl_coef=0.01"] + common) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert 0.0 <= summary["eval_before"]["accuracy"] <= 1.0 and "eval_after" in summary
    assert (out / "final" / "model.safetensors").exists() and (out / "curves.png").exists()
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
    # a rerun of the finished run resumes at its last step: its summary keeps the accuracy measured before training
    assert main(["train", f"model.path={sft_model}", f"trainer.output_dir={out}", "trainer.steps=2",
                 "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2", "rollout.n=2", "trainer.save_every=1",
                 "algo.kl_coef=0.01"] + common) == 0
    again = json.loads((out / "summary.json").read_text())
    assert again["eval_before"] == summary["eval_before"] and again["eval_after"] == summary["eval_after"]
    capsys.readouterr()
    assert main(["eval", f"model.path={out / 'final'}"] + common) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n"] == 4 and 0.0 <= result["accuracy"] <= 1.0


def test_synthetic_heldout_never_repeats_a_train_problem():
    from mmevo.recipes import load_examples

    cfg = load_config(None, ["data.n_train=600", "data.n_heldout=150"])
    train, _ = load_examples(cfg, "train")
    held, _ = load_examples(cfg, "heldout")
    assert len(train) == 600 and len(held) == 150
    assert not {e.problem for e in train} & {e.problem for e in held}


def test_checkpoints_of_an_abandoned_run_and_partial_saves_are_cleared(tmp_path, tiny_vl_path):
    from mmevo.grpo.checkpoint import list_checkpoints

    out = tmp_path / "grpo"
    common = [f"model.path={tiny_vl_path}", f"trainer.output_dir={out}", "data.prompt_template=none",
              "data.n_train=16", "data.heldout=", "trainer.progress=false", "rollout.max_tokens=4",
              "trainer.wandb_mode=disabled", "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2",
              "rollout.n=2", "algo.kl_coef=0", "trainer.save_every=2"]
    assert main(["train", "trainer.steps=3"] + common) == 0
    names = [p.name for p in list_checkpoints(out)]
    assert names == ["step_000002", "step_000003"]  # the periodic save, then the final one
    # rerunning the finished run resumes at step 3 and leaves its checkpoint untouched
    mtime = (out / "checkpoints" / "step_000003" / "trainer_state.pt").stat().st_mtime_ns
    assert main(["train", "trainer.steps=3"] + common) == 0
    assert (out / "checkpoints" / "step_000003" / "trainer_state.pt").stat().st_mtime_ns == mtime
    # a fresh run in the same directory: the old run's later checkpoints and a crashed save's temp dir go
    (out / "checkpoints" / ".step_000009.tmpabc").mkdir()
    assert main(["train", "trainer.steps=2", "trainer.resume=false"] + common) == 0
    assert [p.name for p in list_checkpoints(out)] == ["step_000002"]
    assert not list((out / "checkpoints").glob(".step_*"))
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2


def test_subcommand_help_says_what_the_command_does(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--help"])
    assert e.value.code == 0
    assert "GRPO training of model.path" in capsys.readouterr().out
    assert main(["evolve", "--help"]) == 0
    out = capsys.readouterr().out
    assert "mmzero" in out and "prism" in out and "honest" in out


def test_wrong_command_words_are_named_with_a_close_match(capsys):
    assert main(["trian"]) == 2
    assert "unknown command 'trian'; did you mean 'train'?" in capsys.readouterr().err
    assert main(["evolve", "mmzro", "x.yaml"]) == 2
    assert "unknown loop 'mmzro'; did you mean 'mmzero'?" in capsys.readouterr().err
    assert main(["prism", "build"]) == 2
    assert "unknown prism command 'build'" in capsys.readouterr().err
    assert main(["build-tiny", "--text"]) == 2  # no directory: was an IndexError traceback
    assert "usage: mmevo build-tiny DIR" in capsys.readouterr().err


def test_train_refuses_what_it_would_find_only_after_loading_the_model(capsys, monkeypatch):
    from mmevo import recipes

    def never(cfg):
        raise AssertionError("the run started")

    monkeypatch.setattr(recipes, "run_grpo", never)
    assert main(["train", "rollout.n=1", "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2"]) == 2
    assert "rollout.n=1: GRPO needs a group of >= 2" in capsys.readouterr().err
    assert main(["train", "reward.heads={acuracy: 1.0}"]) == 2
    assert "unknown reward head 'acuracy'" in capsys.readouterr().err
