"""Demo review 14: reruns after a kill, or with a changed knob, resume only what they would have produced."""

from __future__ import annotations

import pytest

TINY_SFT = ["data.n_train=48", "sft.batch_size=16", "sft.save_every=1", "data.n_heldout=2", "trainer.progress=false"]


def test_an_interrupted_sft_with_other_settings_is_refused_not_resumed(tiny_vl_path, tmp_path, capsys):
    """A kill during the demo's SFT, then a rerun with sft.lr=0.5: the rerun resumed the saved state (its optimizer
    and scheduler keeping lr 1e-3) and the finished SFT's summary said sft.lr 0.5. The state now holds its config."""
    from mmevo.demo import demo_config
    from mmevo.grpo.sft import STATE_FILE
    from mmevo.grpo.sft import run_sft as sft_loop
    from mmevo.recipes import load_examples, load_policy, run_sft

    def cfg(*extra):
        return demo_config([f"model.path={tiny_vl_path}", *TINY_SFT, *extra], str(tmp_path))

    train, _ = load_examples(cfg(), "train")
    sft_loop(cfg(), load_policy(cfg()), train, log=False)  # 3 steps, no export: the state of step 2 is what a kill
    state = tmp_path / "sft" / STATE_FILE  # after step 2 leaves
    assert state.exists()
    with pytest.raises(ValueError, match=r"interrupted SFT with other settings \(data.seed, sft.lr\): rerun with "
                                         r"its settings to resume it"):
        run_sft(cfg("sft.lr=0.5", "data.seed=9"))
    assert state.exists() and not (tmp_path / "sft" / "summary.json").exists()
    # the held-out set and where things are written are no SFT settings: it resumes
    capsys.readouterr()
    summary = run_sft(cfg("data.n_heldout=3", "trainer.threads=1"))
    assert "resuming at step 2/3" in capsys.readouterr().out
    assert summary["steps"] == 3 and summary["config"]["sft"]["lr"] == 1e-3 and not state.exists()


def test_an_sft_from_another_base_model_is_not_reused(tmp_path):
    """`mmevo demo model.path=tiny` into the --out of a tiny-wide demo reused its SFT (and so its runs) while the
    report named tiny as the base model: model.path was left out of the settings compared. A knob the SFT does not
    read (sft.save_every, the RL-only model.trainable) was refused."""
    import json
    import math

    from mmevo.config import to_dict
    from mmevo.demo import demo_config, run_demo, sft_changes

    cfg = demo_config(TINY_SFT, str(tmp_path))
    assert cfg.model.path == "tiny-wide"
    summary = {"steps": math.ceil(cfg.data.n_train * cfg.sft.epochs / cfg.sft.batch_size), "config": to_dict(cfg)}
    assert sft_changes(summary, demo_config(TINY_SFT + ["model.path=tiny"], str(tmp_path))) == ["model.path"]
    assert sft_changes(summary, demo_config(TINY_SFT + ["sft.save_every=7", "model.trainable=[]"],
                                            str(tmp_path))) == []
    (tmp_path / "sft").mkdir(parents=True)
    (tmp_path / "sft" / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(ValueError, match=r"holds an SFT with other settings \(model.path\): use another --out"):
        run_demo(demo_config(TINY_SFT + ["model.path=tiny"], str(tmp_path)), str(tmp_path))
