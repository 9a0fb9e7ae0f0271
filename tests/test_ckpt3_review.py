"""Reviewed defects: an SFT rerun leaves no finished marker while it runs; a LoRA resume onto another model is refused
naming the checkpoint and both models."""

import json

import pytest

from mmevo import recipes
from test_trainer import _cfg, _trainer, data  # noqa: F401 (data: the fixture)


def _sft_cfg(model, out, *extra):
    from mmevo.config import load_config

    return load_config(None, [f"model.path={model}", "data.prompt_template=none", "data.n_train=4", "sft.epochs=1",
                              "sft.batch_size=2", f"sft.output_dir={out}", "trainer.progress=false", *extra])


@pytest.mark.parametrize("save_every", [0, 1])
def test_an_sft_rerun_killed_over_a_finished_sft_leaves_no_finished_marker(tiny_text_path, tmp_path, monkeypatch,
                                                                             save_every):
    from mmevo.grpo import sft

    out = tmp_path / "sft"
    recipes.run_sft(_sft_cfg(tiny_text_path, out, f"sft.save_every={save_every}"))
    assert (out / "summary.json").is_file() and (out / "model" / "config.json").is_file()
    real = sft.sequence_logprobs

    def killed(*a, **k):  # the rerun dies in its first step (a kill)
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(sft, "sequence_logprobs", killed)
        with pytest.raises(KeyboardInterrupt):
            recipes.run_sft(_sft_cfg(tiny_text_path, out, f"sft.save_every={save_every}", "sft.lr=1e-4"))
    # they used to stay: the demo reused the killed SFT as the earlier, finished one
    assert not (out / "summary.json").exists() and not (out / "model").exists()
    assert sft.sequence_logprobs is real
    summary = recipes.run_sft(_sft_cfg(tiny_text_path, out, f"sft.save_every={save_every}", "sft.lr=1e-4"))
    assert json.loads((out / "summary.json").read_text())["config"]["sft"]["lr"] == 1e-4
    assert (out / "model" / "config.json").is_file() and summary["model"] == str(out / "model")


@pytest.mark.parametrize("spec, why", [
    ({"num_hidden_layers": 2}, r"config text_config.num_hidden_layers 4 -> 2"),  # was "does not match this model's adapters
    # (missing [], extra [...]): resume with the same model.lora settings", naming no model
    ({"intermediate_size": 192}, r"config text_config.intermediate_size 384 -> 192"),  # was torch's "The size of tensor a ..."
], ids=["fewer-layers", "narrower-mlp"])
def test_a_lora_resume_onto_another_model_is_refused_naming_both(tiny_vl_path, tmp_path, data, spec, why):
    from mmevo.models.tiny import TinyVLSpec, build_tiny_qwen2_5_vl

    out = tmp_path / "run"
    over = {"algo.kl_coef": 0, "trainer.steps": 2, "model.lora.rank": 4, "model.lora.alpha": 8}
    _trainer(_cfg(out, **over), tiny_vl_path, data).train(steps=1)
    ckpt = out / "checkpoints" / "step_000001"
    other = build_tiny_qwen2_5_vl(tmp_path / "other", TinyVLSpec(**spec))
    with pytest.raises(ValueError, match=rf"cannot resume {ckpt}: its weights are another model's than this run's "
                                         r"\(checkpoint: qwen2_5_vl, 4 layers, hidden 128; this run: qwen2_5_vl, "
                                         rf".*{why}.*\): resume with the model.path it was trained from"):
        _trainer(_cfg(out, **over), other, data, seed_weights=False).train(steps=0)
    resumed = _trainer(_cfg(out, **over), tiny_vl_path, data)  # its own model still resumes
    resumed.train(steps=0)
    assert resumed.step_idx == 1


def test_lora_adapters_of_another_rank_are_refused_not_broadcast(tiny_vl_path):
    """copy_ broadcast rank-1 adapters (1 x in, out x 1) over rank-4 ones: a resume with model.lora.rank raised from 1
    to 4 went on with every adapter row a copy of the saved one."""
    from mmevo.models.adapters import apply_lora, load_lora_state_dict, lora_state_dict
    from mmevo.models.loader import load_model

    one = apply_lora(load_model(tiny_vl_path).model, 1, 2, 0.0, ["q_proj"])
    four = apply_lora(load_model(tiny_vl_path).model, 4, 8, 0.0, ["q_proj"])
    with pytest.raises(ValueError, match=r"adapters have other shapes than this model's \(.*lora_A.*\(1, 128\) -> "
                                         r"\(4, 128\).*resume with the same model.lora settings"):
        load_lora_state_dict(four, lora_state_dict(one))


def test_a_deepspeed_resume_onto_another_model_is_refused_naming_both(tmp_path):
    """One DeepSpeed process (ZeRO-2, gloo on CPU): the same model.path rebuilt with 2 layers, so no setting differs;
    the resume failed with DeepSpeed's own size-mismatch message, naming neither model."""
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("deepspeed", reason="DeepSpeed is not installed")
    root = Path(__file__).resolve().parent.parent
    with socket.socket() as s:  # a free port for the one-process group
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root), "RANK": "0", "LOCAL_RANK": "0",
           "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    out = tmp_path / "result.json"
    proc = subprocess.run([sys.executable, str(root / "tests" / "dist" / "zero_other_model_worker.py"),
                           str(root / "configs" / "deepspeed" / "zero2.json"), str(out), str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    r = json.loads(out.read_text())
    assert r["error"].startswith(f"ValueError: cannot resume {r['ckpt']}: its weights are another model's than this "
                                 "run's (checkpoint: qwen2_5_vl, 4 layers, hidden 128; this run: qwen2_5_vl, 2 "
                                 "layers, hidden 128; config text_config.num_hidden_layers 4 -> 2"), r["error"]
