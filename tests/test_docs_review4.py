"""Review 4 of the user-facing documents: the documented commands run as a new user would run them. What failed there
is pinned here: a launched rank on a machine without its GPU, a hub model that cannot be reached, `plan-memory` on
the shipped Prism / HONEST GPU configs, and what README says a training run writes and logs."""

import json
import re
from pathlib import Path

import pytest
import torch

from mmevo import memory_plan
from mmevo.cli import main

ROOT = Path(__file__).resolve().parent.parent
README = " ".join((ROOT / "README.md").read_text().split())


# -- `torchrun ... mmevo.cli train ... model.device=cuda` (scripts/train_csrs_8gpu.sh) where the GPUs are missing ----
@pytest.fixture
def launched_rank(monkeypatch):
    """This process as rank LOCAL_RANK=5 of 8 under torchrun (no process group is joined: the check comes first)."""
    import mmevo.runlock

    monkeypatch.setattr(mmevo.runlock, "exit_with_parent_if_launched", lambda: False)
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "5")
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: False)


def test_a_launched_rank_without_gpus_names_model_device(launched_rank, monkeypatch):
    from mmevo.grpo.distributed import init_distributed

    # was AttributeError: module 'torch._C' has no attribute '_cuda_setDevice' (a CPU build), printed by every rank
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"model\.device=cuda: this machine has 0 visible CUDA device\(s\)"):
        init_distributed("cuda")


def test_a_rank_past_the_nodes_gpus_says_which_rank(launched_rank, monkeypatch):
    from mmevo.grpo.distributed import init_distributed

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)

    def set_device(i):  # what torch does for an index past the visible GPUs, without the setting's name
        raise RuntimeError("CUDA error: invalid device ordinal")
    monkeypatch.setattr(torch.cuda, "set_device", set_device)
    with pytest.raises(ValueError, match=r"model\.device=cuda: this rank \(LOCAL_RANK=5\) needs GPU 5, and this "
                                         r"machine has 4 visible"):
        init_distributed("cuda")


def test_the_cli_under_a_launcher_fails_with_the_setting_named(launched_rank, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.chdir(ROOT)  # the config names configs/deepspeed/zero2.json from the repository root
    assert main(["train", "configs/grpo_tiny.yaml", "trainer.deepspeed=configs/deepspeed/zero2.json",
                 "model.device=cuda", f"trainer.output_dir={tmp_path / 'run'}"]) == 2
    assert "mmevo train: error: model.device=cuda: this machine has 0 visible CUDA device(s)" in capsys.readouterr().err


# -- `mmevo eval --model Qwen/Qwen2.5-VL-7B-Instruct ...` without the hub ---------------------------------------------
def test_an_unreachable_hub_model_is_named_in_the_error(monkeypatch, tmp_path, capsys):
    import transformers

    from local_hub import reachable_hub
    from mmevo.models.loader import load_model

    def offline(name, *args, **kwargs):  # transformers' own text when the hub cannot be reached: a URL, no model
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in "
                      "the cached files.\nCheck your internet connection or see how to run the library in offline "
                      "mode at 'https://huggingface.co/docs/transformers/installation#offline-mode'.")
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", offline)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with reachable_hub(monkeypatch), \
            pytest.raises(OSError, match=r"model 'Qwen/Qwen2\.5-VL-7B-Instruct' is not a local directory, and loading "
                                         r"it from the hub failed \(We couldn't connect .*cached files\.\); pass a "
                                         r"local"):
        load_model("Qwen/Qwen2.5-VL-7B-Instruct")  # the hub answered mmevo's check; transformers' fetch then failed
    # through the CLI: one line naming the model, after the benchmark's rows loaded
    data = ROOT / "data" / "fixtures"
    mathv = next((p for p in data.rglob("testmini.jsonl")), None)
    if mathv is None:
        pytest.skip("no MATH-V fixture")
    assert main(["eval", "--model", "Qwen/Qwen2.5-VL-7B-Instruct", "--benchmark", "mathvision_testmini",
                 "--data", str(mathv.parent), "--limit", "1", "--out", str(tmp_path / "ev")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("mmevo eval: error: model 'Qwen/Qwen2.5-VL-7B-Instruct' is not a local directory")


# -- `mmevo plan-memory` on every shipped GPU config ------------------------------------------------------------------
GPU_CONFIGS = sorted(p for p in (ROOT / "configs").glob("*.yaml") if "tiny" not in p.name)


@pytest.mark.parametrize("path", GPU_CONFIGS, ids=lambda p: p.name)
def test_plan_memory_runs_on_every_shipped_gpu_config(path, monkeypatch, capsys):
    # prism_qwen3_4b.yaml / honest_qwen2_5_1_5b.yaml stopped with "no local config.json there and no built-in
    # dimensions": their plans needed the checkpoint downloaded first
    monkeypatch.chdir(ROOT)
    gpus = "1" if "honest" in path.name else "8"  # the HONEST config is a one-GPU run
    assert main(["plan-memory", str(path.relative_to(ROOT)), "--gpus", gpus, "--gpu-mem-gib", "80"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["fits"] and 0 < plan["peak_gib"] < 80 * 0.92
    assert f"`mmevo plan-memory configs/{path.name} --gpus {gpus} --gpu-mem-gib 80`" in " ".join(
        ln.lstrip("#").strip() for ln in path.read_text().splitlines() if ln.startswith("#"))


@pytest.mark.parametrize("hub_id, params", [("Qwen/Qwen2.5-1.5B-Instruct", 1.54e9), ("Qwen/Qwen3-4B-Base", 4.02e9)])
def test_builtin_text_model_dimensions_give_the_model_cards_parameter_counts(hub_id, params):
    m = memory_plan.model_dims(hub_id)
    assert m.vision is None and m.tie_embeddings
    assert memory_plan.total_params(m) == pytest.approx(params, rel=3e-3)
    assert f"`{hub_id}`" in README


# -- README "What a run writes": files and metric names of a real (tiny) run -----------------------------------------
def test_a_tiny_run_writes_what_the_readme_says(tiny_vl_path, tmp_path):
    out = tmp_path / "grpo"
    # two prompts in mini-batches of one: an off-policy update, so the old log-prob pass runs and is timed
    assert main(["train", f"model.path={tiny_vl_path}", f"trainer.output_dir={out}", "data.prompt_template=none",
                 "data.n_train=8", "data.n_heldout=2", "trainer.progress=false", "rollout.max_tokens=4",
                 "trainer.wandb_mode=disabled", "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=1",
                 "rollout.n=2", "algo.kl_coef=0.01", "trainer.steps=2", "trainer.save_every=5"]) == 0
    section = README[README.index("### What a run writes"):README.index("## CSRS")]
    # save_every=5 > steps: the run still leaves a resumable checkpoint at its last step, as the README now says
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["step_000002"]
    assert "every `trainer.save_every` steps and after the last step (none with `save_every: 0`)" in section
    for name in ("metrics.jsonl", "final", "curves.png", "summary.json", "eval_before.json"):
        assert f"`{name}" in section and (out / name).exists(), name
    rows = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    stages = re.search(r"stage times \((.*?)\), tokens/s", section).group(1)
    named = set(re.findall(r"`(time/\w+)`", stages))
    assert named == {"time/gen", "time/reward", "time/old", "time/ref", "time/update", "time/sync"}
    assert named <= set(rows[-1]), named - set(rows[-1])
    assert {"frac_reward_zero_std", "actor/entropy", "actor/kl", "actor/clip_frac_low", "actor/clip_frac_high",
            "actor/approx_kl", "actor/grad_norm", "response/truncated_frac", "response/no_answer_frac",
            "throughput/tokens_per_s", "memory/peak_rss_mb", "reward/accuracy/mean", "reward/accuracy/std"} <= set(
        rows[-1])
    summary = json.loads((out / "summary.json").read_text())
    assert {"eval_before", "eval_after", "final_model"} <= set(summary)
