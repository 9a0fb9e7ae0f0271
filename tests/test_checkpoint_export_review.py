"""Checkpoint / export review: an export (``final/``) and a run's ``summary.json`` / ``eval_before.json`` are written
whole or not at all, so a kill while a finished run is rerun (it exports and summarises again) leaves the earlier
ones readable; an export never replaces a directory that is not an earlier export; the export loads with plain
transformers and gives the trainer's logits."""

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from mmevo import recipes
from test_csrs12_review12 import _cfg as _run_cfg  # the tiny CSRS run (sfr head, m = 1) the earlier reviews used
from test_trainer import _cfg, _trainer, data  # noqa: F401 (data: the fixture)


def _kill_weights_write(monkeypatch):
    """transformers' safetensors write dies after its first bytes reached the disk (a kill -9 or a full disk)."""
    from transformers import modeling_utils

    def killed(tensors, filename, *a, **k):
        Path(filename).write_bytes(b"\x00" * 5)
        raise KeyboardInterrupt

    monkeypatch.setattr(modeling_utils, "safe_save_file", killed)


def test_a_kill_mid_export_leaves_the_earlier_export_whole(tiny_vl_path, tmp_path, data, monkeypatch):
    from transformers import AutoModelForImageTextToText

    tr = _trainer(_cfg(tmp_path / "run", **{"algo.kl_coef": 0, "trainer.steps": 2}), tiny_vl_path, data)
    tr.train(steps=1)
    final = tr.export(tmp_path / "final")
    first = load_file(final / "model.safetensors")
    # the export loads with plain transformers and gives the trainer's logits
    plain = AutoModelForImageTextToText.from_pretrained(str(final)).eval()
    ids = torch.tensor([[1, 5, 9, 33, 70, 2, 11]])
    tr.model.eval()
    with torch.no_grad():
        assert torch.equal(plain(input_ids=ids).logits, tr.model(input_ids=ids).logits)
    tr.train(steps=1)
    with monkeypatch.context() as m:
        _kill_weights_write(m)
        with pytest.raises(KeyboardInterrupt):
            tr.export(tmp_path / "final")
    # it used to write over final/ in place: a 5-byte model.safetensors beside the new config.json
    kept = load_file(final / "model.safetensors")
    assert kept.keys() == first.keys() and all(torch.equal(kept[k], first[k]) for k in first)
    tr.export(tmp_path / "final")  # the next export replaces it, and the leftover of the killed one
    now = {k: v for k, v in tr.model.state_dict().items()}
    again = load_file(final / "model.safetensors")
    assert any(not torch.equal(again[k], first[k]) for k in first)
    assert all(torch.equal(again[k], now[k]) for k in again if k in now)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("final")) == ["final"]


def test_an_export_never_replaces_a_directory_that_is_not_an_export(tiny_vl_path, tmp_path, data):
    out = tmp_path / "run"
    tr = _trainer(_cfg(out, **{"algo.kl_coef": 0, "trainer.steps": 1}), tiny_vl_path, data)
    tr.train()
    with pytest.raises(ValueError, match=rf"cannot export the model to {out}: .*no config\.json"):
        tr.export(out)  # the run's own directory: replacing it whole would delete its checkpoints and curve
    assert (out / "metrics.jsonl").is_file() and (out / "checkpoints" / "step_000001").is_dir()
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(ValueError, match="a file or a link"):
        tr.export(tmp_path / "a_file")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (tr.export(empty) / "model.safetensors").is_file()  # an empty directory is fine


def _kill_json_write(monkeypatch, name: str):
    real = Path.write_text

    def killed(self, text, *a, **k):
        if self.name.startswith(name):
            real(self, text[:5], *a, **k)
            raise KeyboardInterrupt
        return real(self, text, *a, **k)

    monkeypatch.setattr(Path, "write_text", killed)


def test_a_kill_while_a_finished_run_rewrites_its_summary_keeps_the_summary_whole(tiny_vl_path, tmp_path,
                                                                                    monkeypatch):
    out = tmp_path / "run"
    recipes.run_grpo(_run_cfg(tiny_vl_path, out, "trainer.steps=1"))
    summary = (out / "summary.json").read_text()
    with monkeypatch.context() as m:  # a rerun of the finished run exports, evaluates and summarises it again
        _kill_json_write(m, "summary.json")
        with pytest.raises(KeyboardInterrupt):
            recipes.run_grpo(_run_cfg(tiny_vl_path, out, "trainer.steps=1"))
    # it used to be written in place: 5 bytes, which the demo takes for a finished run and fails decoding
    assert (out / "summary.json").read_text() == summary


def test_a_kill_mid_eval_before_write_leaves_the_resumed_run_readable(tiny_vl_path, tmp_path, monkeypatch):
    out = tmp_path / "run"
    recipes.run_grpo(_run_cfg(tiny_vl_path, out, "trainer.steps=1"))
    before = json.loads((out / "eval_before.json").read_text())
    with monkeypatch.context() as m:  # a fresh start over it, killed as it records its accuracy before training
        _kill_json_write(m, "eval_before.json")
        with pytest.raises(KeyboardInterrupt):
            recipes.run_grpo(_run_cfg(tiny_vl_path, out, "trainer.steps=1", "trainer.resume=false"))
    # the rerun resumes the checkpoint still there and reads the file back: it used to fail on the torn one
    again = recipes.run_grpo(_run_cfg(tiny_vl_path, out, "trainer.steps=1"))
    assert again["eval_before"] == before


def test_a_kill_while_a_step_is_saved_again_keeps_its_checkpoint(tiny_vl_path, tmp_path, data, monkeypatch):
    """A loop's rerun saves the step it resumed again (HONEST's block ends with trainer.save_every=0): the old
    checkpoint is moved aside and the new one renamed into place; a kill between the two renames left no step_2, and
    the next resume deleted the one moved aside: with trainer.keep_checkpoints=1 the run started again from step 0."""
    import os

    from mmevo.grpo import checkpoint
    from mmevo.grpo.checkpoint import list_checkpoints

    out = tmp_path / "run"
    over = {"algo.kl_coef": 0, "trainer.steps": 2, "trainer.keep_checkpoints": 1}
    _trainer(_cfg(out, **over), tiny_vl_path, data).train()
    rerun = _trainer(_cfg(out, **over), tiny_vl_path, data)
    rerun.train(steps=0)
    real_replace = os.replace

    def killed_at_commit(src, dst):
        if Path(src).name.startswith(".step_000002.tmp") and Path(dst).name == "step_000002":
            raise KeyboardInterrupt  # after the old step_000002 was moved aside, before the new one took its name
        return real_replace(src, dst)

    with monkeypatch.context() as m:
        m.setattr(checkpoint.os, "replace", killed_at_commit)
        with pytest.raises(KeyboardInterrupt):
            rerun.save()
    assert list_checkpoints(out) == []  # until the next start puts it back
    resumed = _trainer(_cfg(out, **over), tiny_vl_path, data)
    resumed.train(steps=0)
    assert resumed.step_idx == 2
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_000002"]
    resumed.save()  # saving the step again still replaces it, leaving no temp dir
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_000002"]


@pytest.mark.parametrize("edit, why", [
    (lambda s: s.pop("step"), "it lacks 'step'"),
    (lambda s: (s.pop("rng"), s.pop("rewards")), "it lacks 'rng', 'rewards'"),
    (lambda s: s.update(step="2"), "its step is '2', not a step count"),
    (lambda s: s.update(step=True), "its step is True, not a step count"),
    (lambda s: s.update(step=5), "it holds step 5, not the step 2 its directory names"),
])
def test_a_trainer_state_without_what_a_save_writes_is_refused_naming_it(tiny_vl_path, tmp_path, data, edit, why):
    from mmevo.grpo.checkpoint import DamagedCheckpointError

    out = tmp_path / "run"
    over = {"algo.kl_coef": 0, "trainer.steps": 2}
    _trainer(_cfg(out, **over), tiny_vl_path, data).train()
    path = out / "checkpoints" / "step_000002" / "trainer_state.pt"
    state = torch.load(path, weights_only=False)
    edit(state)
    torch.save(state, path)
    with pytest.raises(DamagedCheckpointError) as e:  # was a bare KeyError: 'step', or a resume at step 5 / 1
        _trainer(_cfg(out, **over), tiny_vl_path, data).train(steps=0)
    msg = str(e.value)
    assert f"checkpoint file {path} cannot be read ({why})" in msg and "delete" in msg and "step_000001" in msg


def test_an_sft_state_without_what_a_save_writes_is_refused_naming_it(tiny_vl_path, tmp_path):
    from mmevo.config import load_config
    from mmevo.data.synthetic import split_train_heldout
    from mmevo.grpo.checkpoint import DamagedCheckpointError
    from mmevo.grpo.sft import STATE_FILE, run_sft
    from mmevo.models.loader import load_model

    cfg = load_config(None, ["data.prompt_template=none", "sft.epochs=1", "sft.batch_size=4", "sft.save_every=1",
                             f"sft.output_dir={tmp_path}", "trainer.progress=false"])
    train, _ = split_train_heldout(8, 0, seed=1)
    torch.save({"model": {}, "step": 1}, tmp_path / STATE_FILE)  # another tool's file under the SFT's name
    with pytest.raises(DamagedCheckpointError, match=rf"SFT state {tmp_path / STATE_FILE} lacks 'optimizer', "
                                                     r"'scheduler', .*'n_steps', 'n_examples'.*delete it"):
        run_sft(cfg, load_model(tiny_vl_path), train)  # was a bare KeyError: 'n_steps'


def test_a_checkpoint_of_another_model_is_refused_naming_both(tiny_vl_path, tiny_text_path, tmp_path, data):
    """The run's model.path unchanged (so no setting differs) but another model behind it (rebuilt, re-downloaded):
    the resume failed with transformers' "Unrecognized configuration class ... AutoModelForCausalLM" or torch's size
    mismatches, naming neither the checkpoint nor the cause."""
    from mmevo.models.tiny import TinyVLSpec, build_tiny_qwen2_5_vl

    out = tmp_path / "run"
    over = {"algo.kl_coef": 0, "trainer.steps": 2}
    _trainer(_cfg(out, **over), tiny_vl_path, data).train(steps=1)
    ckpt = out / "checkpoints" / "step_000001"
    with pytest.raises(ValueError, match=rf"cannot resume {ckpt}: its weights are another model's than this run's "
                                         r"\(checkpoint: qwen2_5_vl, 4 layers, hidden 128; this run: qwen2, .*"
                                         r"Unrecognized configuration class.*resume with the model.path it was "
                                         r"trained from.*trainer.resume=false"):
        _trainer(_cfg(out, **over), tiny_text_path, data, seed_weights=False).train(steps=0)
    shallow = build_tiny_qwen2_5_vl(tmp_path / "shallow", TinyVLSpec(num_hidden_layers=2))
    with pytest.raises(ValueError, match=r"checkpoint: qwen2_5_vl, 4 layers, hidden 128; this run: qwen2_5_vl, 2 "
                                         r"layers, hidden 128; RuntimeError: Error\(s\) in loading state_dict"):
        _trainer(_cfg(out, **over), shallow, data, seed_weights=False).train(steps=0)
    resumed = _trainer(_cfg(out, **over), tiny_vl_path, data)  # its own model still resumes
    resumed.train(steps=0)
    assert resumed.step_idx == 1
