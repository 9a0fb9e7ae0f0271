"""End-to-end GRPO on the tiny model: training steps, resume parity, divergence handling, SFT, config errors."""

import json

import pytest
import torch

from conftest import randomize
from mmevo.config import ConfigError, load_config
from mmevo.data.synthetic import split_train_heldout
from mmevo.grpo.checkpoint import latest_checkpoint, list_checkpoints
from mmevo.grpo.trainer import EpochSampler, GRPOTrainer, TrainingDiverged
from mmevo.models.loader import load_model
from mmevo.rollout.factory import build_engine


def _cfg(out, **over):
    base = {
        "data.prompt_template": "none", "rollout.n": 4, "rollout.max_tokens": 12, "rollout.temperature": 1.0,
        "trainer.prompts_per_step": 4, "trainer.mini_batch_prompts": 2, "trainer.micro_batch_seqs": 4,
        "trainer.lr": 1e-3, "trainer.steps": 2, "trainer.output_dir": str(out), "trainer.wandb_mode": "disabled",
        "trainer.progress": False, "trainer.save_every": 1, "algo.kl_coef": 0.01, "trainer.seed": 3,
        "reward.heads": "{accuracy: 1.0, format: 0.5}",
    }
    base.update(over)
    return load_config(None, [f"{k}={v}" for k, v in base.items()])


@pytest.fixture(scope="module")
def data():
    return split_train_heldout(24, 4, seed=5)


def _trainer(cfg, path, data, seed_weights=True):
    lm = load_model(path)
    if seed_weights:
        randomize(lm.model, std=0.15, seed=11)
    ref = load_model(path).model.eval() if cfg.algo.kl_coef > 0 else None
    if ref is not None and seed_weights:
        randomize(ref, std=0.15, seed=11)
    return GRPOTrainer(cfg, lm, build_engine(cfg, lm), data[0], data[1], ref_model=ref)


def test_two_grpo_steps_update_the_model_and_log(tiny_vl_path, tmp_path, data):
    cfg = _cfg(tmp_path / "run")
    tr = _trainer(cfg, tiny_vl_path, data)
    before = {k: v.clone() for k, v in tr.model.state_dict().items()}
    hist = tr.train()
    assert len(hist) == 2
    m = hist[-1]
    for key in ["reward/accuracy/mean", "reward/format/mean", "reward/total/std", "frac_reward_zero_std",
                "actor/entropy", "actor/kl", "actor/clip_frac_low", "actor/clip_frac_high", "actor/grad_norm",
                "response/length_mean", "time/gen", "time/reward", "time/ref", "time/update", "time/sync", "time/old",
                "throughput/tokens_per_s", "memory/peak_rss_mb", "response/no_answer_frac"]:
        assert key in m, key
        assert m[key] == m[key]  # not NaN
    # two mini-batches per step: the second is off-policy, so old log-probs were computed and ratios moved
    assert m["actor/ratio_max"] >= 1.0
    after = tr.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(l)["step"] for l in lines] == [1, 2]
    assert [p.name for p in list_checkpoints(tmp_path / "run")] == ["step_000001", "step_000002"]
    final = tr.export(tmp_path / "final")
    reloaded = load_model(final)
    assert all(torch.equal(reloaded.model.state_dict()[k], after[k]) for k in after)


def test_resume_gives_the_same_next_step_loss(tiny_vl_path, tmp_path, data):
    # uninterrupted: 3 steps
    cfg_a = _cfg(tmp_path / "a", **{"trainer.steps": 3})
    hist_a = _trainer(cfg_a, tiny_vl_path, data).train()
    # interrupted after 2 steps, then a fresh process-like trainer resumes from the checkpoint
    cfg_b = _cfg(tmp_path / "b", **{"trainer.steps": 2})
    _trainer(cfg_b, tiny_vl_path, data).train()
    assert latest_checkpoint(tmp_path / "b").name == "step_000002"
    cfg_b3 = _cfg(tmp_path / "b", **{"trainer.steps": 3})
    resumed = _trainer(cfg_b3, tiny_vl_path, data)  # weights are re-randomised, then overwritten by the resume
    hist_b = resumed.train()
    assert resumed.step_idx == 3 and len(hist_b) == 1
    for key in ["actor/loss", "actor/pg_loss", "actor/kl", "reward/total/mean", "response/length_mean"]:
        assert hist_b[0][key] == pytest.approx(hist_a[2][key], rel=1e-5, abs=1e-7), key
    steps = [json.loads(l)["step"] for l in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]


def test_nonfinite_loss_stops_and_keeps_last_checkpoint(tiny_vl_path, tmp_path, data):
    cfg = _cfg(tmp_path / "run", **{"trainer.steps": 2})
    tr = _trainer(cfg, tiny_vl_path, data)
    tr.train(steps=1)
    assert latest_checkpoint(tmp_path / "run").name == "step_000001"
    with torch.no_grad():
        next(tr.model.parameters()).fill_(float("nan"))
    with pytest.raises(TrainingDiverged, match="last good checkpoint"):
        tr.train()
    assert latest_checkpoint(tmp_path / "run").name == "step_000001"


def test_sft_teaches_the_format(tiny_vl_path, tmp_path):
    from mmevo.grpo.sft import run_sft

    cfg = load_config(None, ["data.prompt_template=none", "sft.epochs=6", "sft.batch_size=8", "sft.lr=3e-3",
                             "sft.warmup_steps=2", f"sft.output_dir={tmp_path}", "trainer.progress=false"])
    lm = load_model(tiny_vl_path)
    train, _ = split_train_heldout(16, 0, seed=1)
    hist = run_sft(cfg, lm, train)
    assert hist[-1]["sft/loss"] < 0.5 * hist[0]["sft/loss"]
    assert (tmp_path / "sft_metrics.jsonl").exists()


def test_epoch_sampler_state_roundtrip():
    a = EpochSampler(5, seed=2)
    first = a.take(7)
    assert sorted(first[:5]) == list(range(5))  # one full epoch, then the next begins
    b = EpochSampler(5, seed=2)
    b.load_state_dict(a.state_dict())
    assert a.take(6) == b.take(6)
    with pytest.raises(ValueError, match="training rows"):
        EpochSampler(6, seed=2).load_state_dict(a.state_dict())


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="trainer.lrr"):
        load_config(None, ["trainer.lrr=1"])
    with pytest.raises(ConfigError, match="trainer.steps"):
        load_config(None, ["trainer.steps=abc"])
    with pytest.raises(ConfigError, match="multiple of"):
        load_config(None, ["trainer.prompts_per_step=10", "trainer.mini_batch_prompts=4"])
    bad = tmp_path / "c.yaml"
    bad.write_text("algo:\n  kl_typo: 1\n")
    with pytest.raises(ConfigError, match=r"c.yaml.*algo.kl_typo"):
        load_config(bad)
    cfg = load_config(None, ["reward.heads={majority: 1.0}", "algo.clip_high=0.28", "data.hide_labels=true"])
    assert cfg.reward.heads == {"majority": 1.0} and cfg.algo.clip_high == 0.28 and cfg.data.hide_labels is True


def test_label_free_run_with_majority_vote(tiny_vl_path, tmp_path, data):
    cfg = _cfg(tmp_path / "mv", **{"reward.heads": "{majority: 1.0}", "data.hide_labels": True, "trainer.steps": 1,
                                   "algo.kl_coef": 0})
    hist = _trainer(cfg, tiny_vl_path, data).train()
    assert "reward/majority/modal_share" in hist[0]
    cfg = _cfg(tmp_path / "acc", **{"data.hide_labels": True, "trainer.steps": 1, "algo.kl_coef": 0})
    with pytest.raises(ValueError, match="needs gold answers"):
        _trainer(cfg, tiny_vl_path, data).train()


def test_a_deepspeed_checkpoint_is_not_resumed_without_deepspeed(tiny_vl_path, tmp_path, data):
    cfg = _cfg(tmp_path / "run", **{"trainer.steps": 1})
    tr = _trainer(cfg, tiny_vl_path, data)
    tr.train()
    ckpt = latest_checkpoint(tmp_path / "run")
    state = torch.load(ckpt / "trainer_state.pt", weights_only=False)
    for key in ("optimizer", "scheduler"):  # what a DeepSpeed checkpoint keeps in deepspeed/ instead
        state.pop(key)
    torch.save({**state, "world_size": 2}, ckpt / "trainer_state.pt")
    with pytest.raises(ValueError, match="written by a DeepSpeed run: resume it with the same trainer.deepspeed"):
        _trainer(_cfg(tmp_path / "run", **{"trainer.steps": 2}), tiny_vl_path, data).train()
