"""Review 13 of HONEST: what a kill -9 leaves behind in the loop's cached outputs (the frozen block solver of the
trainable generator) and the rerun that must finish as the uninterrupted run did."""

import hashlib
import json
import shutil

from test_honest_loop import _rows, _tiny_cfg


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _text(path):
    return path.read_text() if path.exists() else None


def _gss_cfg(model, out):
    # the trainable generator without warm-ups or reports: the loop's block structure alone, fast on CPU
    return _tiny_cfg(model, out, "honest.gss_mode=trainable", "honest.gss_blocks=1", "honest.gss_block_steps=1",
                     "honest.warmup_sft=false", "honest.eval_calibration=false", "honest.gss_solver_samples=2",
                     "honest.roles={generator: {rollout.max_tokens: 16}}", "rollout.max_tokens=24")


def test_a_frozen_block_solver_torn_by_a_kill_mid_export_is_exported_again(tiny_text_path, tmp_path):
    from mmevo.honest.loop import run_honest

    ref = tmp_path / "uninterrupted"
    run_honest(_gss_cfg(tiny_text_path, ref))
    frozen = ref / "blocks" / "block_1" / "solver"
    assert (frozen / "model.safetensors").exists()

    # the state a kill -9 during the export of block 1's frozen solver leaves: the solver trained and checkpointed
    # its block, the export wrote config.json (transformers writes it first) but not the weights or the tokenizer,
    # and the generator never started its block
    out = tmp_path / "killed"
    shutil.copytree(ref, out)
    shutil.rmtree(out / "generator")
    shutil.rmtree(out / "solver" / "final")
    (out / "summary.json").unlink()
    torn = out / "blocks" / "block_1" / "solver"
    for f in torn.iterdir():
        if f.name != "config.json":
            f.unlink()
    # the rerun took config.json for a finished export and handed the generator a solver without weights (it
    # failed to load); it exports block 1's solver again and trains the generator as the uninterrupted run did
    summary = run_honest(_gss_cfg(tiny_text_path, out))
    assert _digest(torn / "model.safetensors") == _digest(frozen / "model.safetensors")
    assert {f.name for f in torn.iterdir()} == {f.name for f in frozen.iterdir()}
    assert _same_curves(_rows(out / "generator" / "metrics.jsonl"), _rows(ref / "generator" / "metrics.jsonl"))
    assert _text(out / "generator" / "pool.jsonl") == _text(ref / "generator" / "pool.jsonl")
    assert _digest(out / "generator" / "final" / "model.safetensors") == \
        _digest(ref / "generator" / "final" / "model.safetensors")
    assert summary["blocks"] == json.loads((ref / "summary.json").read_text())["blocks"]
    assert not list((out / "blocks" / "block_1").glob("*.partial"))  # no export left half-way beside it


def _same_curves(a, b):
    """Per-step metrics equal except wall-clock timings and memory."""
    def clean(rows):
        return [{k: v for k, v in r.items() if not k.startswith(("time/", "throughput/", "memory/"))} for r in rows]
    return clean(a) == clean(b)
