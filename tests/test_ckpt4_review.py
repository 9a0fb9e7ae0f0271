"""Reviewed defects: a LoRA resume onto other base weights of the same shapes is refused naming both models; the SFT
export is written whole or not at all; an unreachable hub fails fast."""

import pytest
import torch

from test_trainer import _cfg, _trainer, data  # noqa: F401 (data: the fixture)

_LORA = {"algo.kl_coef": 0, "trainer.steps": 2, "model.lora.rank": 4, "model.lora.alpha": 8}


def test_a_lora_resume_onto_other_base_weights_of_the_same_shapes_is_refused(tiny_vl_path, tmp_path, data):
    """The run trained on randomised weights; the resume loads the model.path's own (a rebuilt model there): every
    shape and config key matches, and the adapters went onto the other base without a word."""
    out = tmp_path / "run"
    _trainer(_cfg(out, **_LORA), tiny_vl_path, data).train(steps=1)
    ckpt = out / "checkpoints" / "step_000001"
    with pytest.raises(ValueError, match=rf"cannot resume {ckpt}: its weights are another model's than this run's "
                                         r"\(checkpoint: qwen2_5_vl, 4 layers, hidden 128; this run: qwen2_5_vl, 4 "
                                         r"layers, hidden 128; its LoRA adapters were trained on other base weights: "
                                         r"the sampled values of model\.language_model\.embed_tokens\.weight, .*"
                                         r"differ\): resume with the model.path it was trained from"):
        _trainer(_cfg(out, **_LORA), tiny_vl_path, data, seed_weights=False).train(steps=0)
    resumed = _trainer(_cfg(out, **_LORA), tiny_vl_path, data)  # its own base still resumes
    resumed.train(steps=0)
    assert resumed.step_idx == 1


def test_a_lora_checkpoint_without_a_base_fingerprint_still_resumes(tiny_vl_path, tmp_path, data):
    """Checkpoints written before the fingerprint was kept hold none: nothing to check, the resume goes on."""
    out = tmp_path / "run"
    _trainer(_cfg(out, **_LORA), tiny_vl_path, data).train(steps=1)
    path = out / "checkpoints" / "step_000001" / "trainer_state.pt"
    state = torch.load(path, weights_only=False)
    assert set(state["lora_base"]) and all(r["values"].dtype == torch.float32 for r in state["lora_base"].values())
    del state["lora_base"]
    torch.save(state, path)
    resumed = _trainer(_cfg(out, **_LORA), tiny_vl_path, data, seed_weights=False)
    resumed.train(steps=0)
    assert resumed.step_idx == 1


@pytest.mark.parametrize("edit", [{"x": 3}, {}, [1, 2], {"w": {"dtype": "float32", "values": [1.0]}}],
                         ids=["not-a-record", "empty", "a-list", "values-not-a-tensor"])
def test_a_lora_checkpoint_with_a_damaged_base_fingerprint_is_refused_naming_it(tiny_vl_path, tmp_path, data, edit):
    """A fingerprint that is not one (a hand edit) was a KeyError / TypeError mid-resume, or skipped the check."""
    from mmevo.grpo.checkpoint import DamagedCheckpointError

    out = tmp_path / "run"
    _trainer(_cfg(out, **_LORA), tiny_vl_path, data).train(steps=1)
    path = out / "checkpoints" / "step_000001" / "trainer_state.pt"
    torch.save({**torch.load(path, weights_only=False), "lora_base": edit}, path)
    with pytest.raises(DamagedCheckpointError, match=rf"checkpoint file {path} cannot be read \(its 'lora_base' is "
                                                     r"not a base-weights fingerprint\)"):
        _trainer(_cfg(out, **_LORA), tiny_vl_path, data).train(steps=0)


def test_the_base_fingerprint_names_plain_weights_and_tolerates_a_cast_not_a_change(tiny_vl_path):
    from mmevo.models.adapters import apply_lora, base_fingerprint, base_fingerprint_differences
    from mmevo.models.loader import load_model

    plain = base_fingerprint(load_model(tiny_vl_path).model)
    adapted = base_fingerprint(apply_lora(load_model(tiny_vl_path).model, 4, 8, 0.0, ["q_proj", "v_proj"]))
    assert len(plain) == 8 and plain.keys() == adapted.keys()  # PEFT's .base_layer names map to the plain ones
    assert not any(".base_layer." in n for n in adapted)
    assert base_fingerprint_differences(plain, adapted) == []
    bf16 = base_fingerprint(load_model(tiny_vl_path, "bfloat16").model)  # model.dtype changed on resume: a cast
    assert {r["dtype"] for r in bf16.values()} == {"bfloat16"}
    assert base_fingerprint_differences(plain, bf16) == [] and base_fingerprint_differences(bf16, plain) == []
    other = load_model(tiny_vl_path).model
    name = sorted(plain)[3]
    with torch.no_grad():  # one weight nudged by 1e-3 of itself, less than bfloat16's rounding but a real change
        dict(other.named_parameters())[name].mul_(1.001)
    assert base_fingerprint_differences(plain, base_fingerprint(other)) == [name]
    assert base_fingerprint_differences(plain, None) == []


def test_a_kill_mid_sft_export_leaves_no_model_to_be_taken_for_the_finished_one(tiny_text_path, tmp_path,
                                                                                 monkeypatch):
    """The SFT wrote ``model/`` in place (config.json first): a kill while its weights were written left a model/
    that a GRPO run with model.path at it, or the demo, took for the finished SFT's model."""
    from mmevo import recipes
    from mmevo.config import ConfigError, load_config
    from test_checkpoint_export_review import _kill_weights_write
    from test_ckpt3_review import _sft_cfg

    out = tmp_path / "sft"
    with monkeypatch.context() as m:
        _kill_weights_write(m)
        with pytest.raises(KeyboardInterrupt):
            recipes.run_sft(_sft_cfg(tiny_text_path, out))
    assert not (out / "model").exists() and not (out / "summary.json").exists()
    grpo = load_config(None, [f"model.path={out / 'model'}"])
    with pytest.raises(ConfigError, match=rf"model.path={out / 'model'}: .*does not exist"):
        recipes.check_start_model(grpo)
    summary = recipes.run_sft(_sft_cfg(tiny_text_path, out))  # the rerun exports whole, the killed one's leftover gone
    assert summary["model"] == str(out / "model") and (out / "model" / "model.safetensors").stat().st_size > 1000
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("model")) == ["model"]
    recipes.check_start_model(grpo)


def _load_in_a_fresh_process(tmp_path, endpoint: str, model: str):
    """``load_model(model)`` in a new interpreter whose hub is ``endpoint`` (huggingface_hub reads HF_ENDPOINT at
    import), online, with an empty hub cache; returns (what it printed, its stderr)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=endpoint, HF_HOME=str(tmp_path / "hf"), PYTHONPATH=str(root), OMP_NUM_THREADS="1")
    code = ("from mmevo.models.loader import load_model\n"
            f"try:\n    load_model({model!r})\n"
            "except OSError as e:\n    print('ERROR', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, proc.stderr


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_uncached_hub_id_with_the_hub_unreachable_fails_without_retries(tmp_path):
    """``model.path=Qwen/Qwen2.5-VL-7B-Instruc`` (a typo) without HF_HUB_OFFLINE on a machine without internet: the hub
    client asked once, then 6 times more with backoff ("Retrying in 1s ... 8s", ~30 s) before transformers' error,
    which named neither the endpoint nor the cause. Now one request, and the error says the hub cannot be reached."""
    endpoint = f"http://127.0.0.1:{_free_port()}"  # nothing listens there: every connection is refused
    out, err = _load_in_a_fresh_process(tmp_path, endpoint, "Qwen/Qwen2.5-VL-7B-Instruc")
    assert out.startswith(f"ERROR model 'Qwen/Qwen2.5-VL-7B-Instruc' is not a local directory, and loading it from "
                          f"the hub failed (the hub at {endpoint} cannot be reached: ConnectError: "), out
    assert out.rstrip().endswith("pass a local checkpoint directory (a one-slash name is taken for a hub repository "
                                 "id)"), out
    assert "Retrying in" not in err and "thrown while requesting" not in err, err[-2000:]


def test_a_reachable_hub_is_still_asked_for_the_model(tmp_path):
    """The check lets any answer through: a hub that answers (here 404, a repository it does not have) gets the
    fetch, and the error is the fetch's own, not "cannot be reached"."""
    from local_hub import hub_without_the_repo

    with hub_without_the_repo() as (url, asked):
        out, _ = _load_in_a_fresh_process(tmp_path, url, "someone/no-such-model")
    assert out.startswith("ERROR model 'someone/no-such-model' is not a local directory, and loading it from the hub "
                          "failed (") and "cannot be reached" not in out, out
    heads = [a for a in asked if a == "HEAD /someone/no-such-model/resolve/main/config.json"]
    assert len(heads) >= 2, asked  # mmevo's check, then transformers' fetch


@pytest.mark.parametrize("kind", ["file", "link"])
def test_an_sft_export_over_a_file_or_link_is_refused_before_training(tiny_text_path, tmp_path, kind):
    """The export is replaced whole, so a file or a link at ``model/`` is refused (a link was written through, a file
    failed with the bare FileExistsError), and before the SFT trains, not after."""
    from mmevo import recipes
    from test_ckpt3_review import _sft_cfg

    out = tmp_path / "sft"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if kind == "file":
        (out / "model").write_text("mine")
    else:
        (out / "model").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ValueError, match=rf"cannot export the model to {out / 'model'}: it is a file or a link"):
        recipes.run_sft(_sft_cfg(tiny_text_path, out))
    assert not (out / "sft_metrics.jsonl").exists() and not any(elsewhere.iterdir())
