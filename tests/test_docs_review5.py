"""Review 5 of the user-facing documents: every documented command run at tiny scale and what it wrote compared with
README.md. What differed in code is pinned here: the self-play loops' SFT warm-ups left their resumable SFT state
(model + optimizer, about three times the model) beside the exported warm-up model, which `mmevo sft` removes; and
`scripts/ablation_csrs.py`, which prints its JSON, printed the runs' progress lines before it on stdout."""

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import load_script

import mmevo.demo
import mmevo.grpo.checkpoint
import mmevo.grpo.sft
import mmevo.recipes
from mmevo.config import load_config
from mmevo.grpo.sft import STATE_FILE

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def sft_stub(monkeypatch):
    """SFT without a model: each run leaves a mid-run state file in its sft.output_dir, as an SFT longer than
    sft.save_every does, and the export writes the model's config.json; returns the SFT output dirs in order."""
    runs = []

    def run_sft(cfg, policy, examples, log=True):
        assert examples
        out = Path(cfg.sft.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / STATE_FILE).write_bytes(b"state at step 50 of 120")
        runs.append(out)
        return [{"sft/loss": 1.0}]

    def save_model(target, model, processor):
        Path(target).mkdir(parents=True, exist_ok=True)
        (Path(target) / "config.json").write_text("{}")
        return Path(target)

    monkeypatch.setattr(mmevo.grpo.sft, "run_sft", run_sft)
    monkeypatch.setattr(mmevo.grpo.checkpoint, "save_model", save_model)
    monkeypatch.setattr(mmevo.recipes, "load_policy", lambda *a, **k: SimpleNamespace(model=None, processor=None))
    return runs


def _assert_exported_without_state(runs, n):
    assert len(runs) == n
    for out in runs:
        assert (out / "model" / "config.json").exists()
        assert not (out / STATE_FILE).exists(), f"{out / STATE_FILE} left beside the exported warm-up model"


def test_prism_warm_up_keeps_the_model_and_not_its_sft_state(sft_stub, tmp_path):
    from mmevo.evolve.prism import warm_up

    cfg = load_config(ROOT / "configs" / "prism_tiny.yaml", ["prism.warmup_questions=4"])
    assert warm_up(cfg, "tiny-text", tmp_path / "warmup") == str(tmp_path / "warmup" / "model")
    _assert_exported_without_state(sft_stub, 1)


def test_honest_warm_up_keeps_the_model_and_not_its_sft_state(sft_stub, tmp_path):
    from mmevo.honest.loop import warm_up_solver

    cfg = load_config(ROOT / "configs" / "honest_tiny.yaml", ["honest.sft_n=8"])
    warm_up_solver(cfg, "tiny-text", tmp_path / "warmup" / "solver")
    _assert_exported_without_state(sft_stub, 1)


def test_mmzero_warm_up_keeps_each_roles_model_and_not_its_sft_state(sft_stub, tmp_path):
    from mmevo.evolve.mmzero import ROLES, warm_up

    cfg = load_config(ROOT / "configs" / "mmzero_tiny.yaml", ["mmzero.warmup_demos=2"])
    paths = warm_up(cfg, {role: "tiny" for role in ROLES}, tmp_path / "warmup")
    assert paths == {role: str(tmp_path / "warmup" / role / "model") for role in ROLES}
    _assert_exported_without_state(sft_stub, len(ROLES))


# -- README "What a run writes": how many checkpoints a run keeps --------------------------------------------------
def test_a_run_keeps_the_newest_checkpoints_the_readme_names(tiny_vl_path, tmp_path):
    from mmevo.cli import main
    from mmevo.config import Config

    readme = " ".join((ROOT / "README.md").read_text().split())
    section = readme[readme.index("### What a run writes"):readme.index("## CSRS")]
    assert "the newest `trainer.keep_checkpoints` kept (2; 0 keeps all)" in section
    assert Config().trainer.keep_checkpoints == 2
    out = tmp_path / "grpo"
    assert main(["train", f"model.path={tiny_vl_path}", f"trainer.output_dir={out}", "data.prompt_template=none",
                 "data.n_train=4", "data.n_heldout=1", "trainer.progress=false", "rollout.max_tokens=2",
                 "trainer.wandb_mode=disabled", "trainer.prompts_per_step=1", "trainer.mini_batch_prompts=1",
                 "rollout.n=2", "algo.kl_coef=0", "trainer.steps=3", "trainer.save_every=1"]) == 0
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_000002", "step_000003"]


# -- scripts/ablation_csrs.py: "prints the JSON" ------------------------------------------------------------------
def test_ablation_script_stdout_is_its_json_alone(monkeypatch, tmp_path, capsys):
    """The runs' progress lines ("[mmevo] CSRS_s1: 1 steps, log in ...", printed by the demo's job runner) reached
    stdout before the JSON, so `python scripts/ablation_csrs.py ... > table.json` was no JSON file."""
    ablation = load_script("ablation_csrs")
    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "summary.json").write_text("{}")  # the SFT is done: no warm-up

    def cached_eval(path, cfg, model, heldout, controls=False):
        print(f"[mmevo demo] evaluating {model}")
        return {"real": {"pass1": 0.25, "maj": 0.5, "samples_per_problem": 8}, "per_problem": {"pass1": [0.25, 0.25]}}

    def run_jobs(jobs, parallel, threads, labels=None):
        for name, (_cfg, eval_path) in jobs.items():
            print(f"[mmevo] {name}: 1 steps, log in {eval_path.parent}")  # what the real runner prints
            eval_path.parent.mkdir(parents=True, exist_ok=True)
            eval_path.write_text(json.dumps({"real": {"pass1": 0.5, "maj": 0.5, "pass1_ci": [0.25, 0.75]}}))

    monkeypatch.setattr(mmevo.demo, "cached_eval", cached_eval)
    monkeypatch.setattr(mmevo.demo, "run_jobs", run_jobs)
    monkeypatch.setattr(mmevo.recipes, "load_examples", lambda cfg, split: ([None, None], {}))
    monkeypatch.setattr(ablation, "_plot", lambda *a, **k: None)
    monkeypatch.setattr(sys, "argv", ["ablation_csrs.py", "--out", str(tmp_path), "--sft-dir", str(tmp_path / "sft"),
                                      "--steps", "1", "--seeds", "1,2", "--jobs", "1"])
    assert ablation.main() == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)  # the whole of stdout
    assert [r["row"] for r in report["rows"]][:2] == ["MajorityVote", "+SFR"]
    assert report["pass1_sft"] == 0.25 and report["rows"][1]["lift_over_sft"] == 0.25
    assert "[mmevo] CSRS_s2: 1 steps" in captured.err and "[mmevo demo] evaluating" in captured.err


def test_build_tiny_stdout_is_the_path_alone(tmp_path):
    """DeepSpeed's logger writes to the stdout of its making: its "Setting accelerator to CPU" line (a CPU machine)
    came before the path, so ``DIR=$(mmevo build-tiny X)`` captured it too, as it led ``mmevo eval``'s JSON."""
    import os
    import subprocess

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)}
    out = tmp_path / "tiny"
    done = subprocess.run([sys.executable, "-m", "mmevo.cli", "build-tiny", str(out)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == f"{out}\n"
    assert (out / "config.json").is_file()
