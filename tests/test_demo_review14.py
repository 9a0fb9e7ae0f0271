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
