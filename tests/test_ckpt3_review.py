"""Reviewed defects: an SFT rerun leaves no finished marker while it runs; a LoRA resume onto another model is refused
naming the checkpoint and both models."""

import json

import pytest

from mmevo import recipes


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
