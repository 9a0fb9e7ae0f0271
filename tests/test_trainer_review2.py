"""Trainer review: the logged lr is the one the step used, resume is exact (and follows an extended schedule), time/step
is the step's wall time, a torn metrics line does not break resume, an engine that drops requests is refused."""

import json
import math
import time

import pytest
import torch

from conftest import randomize
from mmevo.config import load_config
from mmevo.data.synthetic import split_train_heldout
from mmevo.grpo.trainer import GRPOTrainer
from mmevo.metrics import RunLogger
from mmevo.models.inputs import EncodedPrompt
from mmevo.models.loader import load_model
from mmevo.rollout.base import Completion, SamplingParams
from mmevo.rollout.factory import build_engine
from mmevo.rollout.strategy import RolloutContext, sample_groups

LR = 1e-3


def _cfg(out, **over):
    # 4 prompts per step, 2 per update: 2 optimizer updates per step (x ppo_epochs)
    base = {"data.prompt_template": "none", "rollout.n": 4, "rollout.max_tokens": 8, "rollout.temperature": 1.0,
            "trainer.prompts_per_step": 4, "trainer.mini_batch_prompts": 2, "trainer.micro_batch_seqs": 4,
            "trainer.lr": LR, "trainer.steps": 3, "trainer.output_dir": str(out), "trainer.wandb_mode": "disabled",
            "trainer.progress": False, "trainer.save_every": 1, "algo.kl_coef": 0, "trainer.seed": 3,
            "reward.heads": "{accuracy: 1.0, format: 0.5}"}
    base.update(over)
    return load_config(None, [f"{k}={v}" for k, v in base.items()])


@pytest.fixture(scope="module")
def data():
    return split_train_heldout(24, 0, seed=5)


def _trainer(cfg, path, data):
    lm = load_model(path)
    randomize(lm.model, std=0.15, seed=11)
    ref = None
    if cfg.algo.kl_coef > 0:
        ref = randomize(load_model(path).model, std=0.15, seed=11).eval()
    return GRPOTrainer(cfg, lm, build_engine(cfg, lm), data[0], [], ref_model=ref)


def _spy_lrs(tr) -> list[float]:
    """The lr of every optimizer update, read when the update happens."""
    used, step = [], tr.optimizer.step

    def spied(*a, **k):
        used.append(tr.optimizer.param_groups[0]["lr"])
        return step(*a, **k)

    tr.optimizer.step = spied
    return used


def test_logged_lr_is_the_lr_the_step_used(tiny_text_path, tmp_path, data):
    # linear warm-up over 3 updates: factors 1/3, 2/3, then 1; two updates per step
    cfg = _cfg(tmp_path, **{"trainer.warmup_steps": 3, "trainer.save_every": 0})
    tr = _trainer(cfg, tiny_text_path, data)
    used = _spy_lrs(tr)
    hist = tr.train()
    assert used == pytest.approx([LR / 3, 2 * LR / 3, LR, LR, LR, LR], rel=1e-12)
    # the lr of each step's first update (verl logs the lr before its scheduler steps), not the next step's
    assert [m["lr"] for m in hist] == pytest.approx([LR / 3, LR, LR], rel=1e-12)


def test_resume_is_bitwise_the_uninterrupted_run(tiny_text_path, tmp_path, data):
    # cosine after warm-up, two PPO epochs (old log-probs), KL to a reference: 3 steps straight vs 2, stop, resume 1
    over = {"trainer.warmup_steps": 2, "trainer.lr_schedule": "cosine", "algo.ppo_epochs": 2, "algo.kl_coef": 0.01,
            "rollout.temperature": 0.9}
    a = _trainer(_cfg(tmp_path / "a", **over), tiny_text_path, data)
    hist_a = a.train()
    _trainer(_cfg(tmp_path / "b", **over), tiny_text_path, data).train(steps=2)
    b = _trainer(_cfg(tmp_path / "b", **over), tiny_text_path, data)  # re-randomised, then overwritten by the resume
    hist_b = b.train()
    assert b.step_idx == 3 and len(hist_b) == 1
    sa, sb = a.model.state_dict(), b.model.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    oa, ob = a.optimizer.state_dict()["state"], b.optimizer.state_dict()["state"]
    assert all(torch.equal(oa[i][k], ob[i][k]) for i in oa for k in oa[i])
    assert a.scheduler.last_epoch == b.scheduler.last_epoch == 3 * 2 * 2
    for key in ("actor/loss", "actor/kl", "actor/entropy", "actor/grad_norm", "actor/ratio_max", "reward/total/mean",
                "response/length_mean", "lr"):
        assert hist_b[0][key] == hist_a[2][key], key
    steps = [json.loads(l)["step"] for l in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]


def test_resume_with_more_steps_uses_the_new_schedule_from_its_first_update(tiny_text_path, tmp_path, data):
    over = {"trainer.warmup_steps": 2, "trainer.lr_schedule": "cosine"}
    _trainer(_cfg(tmp_path, **{**over, "trainer.steps": 2}), tiny_text_path, data).train()  # 4 updates: ends at lr 0
    tr = _trainer(_cfg(tmp_path, **{**over, "trainer.steps": 3}), tiny_text_path, data)  # extended to 6 updates
    used = _spy_lrs(tr)
    hist = tr.train()
    # update i >= warm-up: lr * 0.5 * (1 + cos(pi * (i - 2) / (6 - 2))); i = 4, 5
    expected = [LR * 0.5 * (1 + math.cos(math.pi * 2 / 4)), LR * 0.5 * (1 + math.cos(math.pi * 3 / 4))]
    assert expected == pytest.approx([5e-4, 1.4644660940672625e-4])
    assert used == pytest.approx(expected, rel=1e-12)
    assert hist[0]["lr"] == pytest.approx(expected[0], rel=1e-12)


def test_time_step_is_the_wall_time_of_the_whole_step(tiny_text_path, tmp_path, data):
    cfg = _cfg(tmp_path, **{"trainer.save_every": 0})
    tr = _trainer(cfg, tiny_text_path, data)
    metrics_of = tr._response_metrics

    def slow(*a, **k):  # work outside the named stages still belongs to the step
        time.sleep(0.3)
        return metrics_of(*a, **k)

    tr._response_metrics = slow
    m = tr.step()
    stages = sum(v for k, v in m.items() if k.startswith("time/") and k != "time/step")
    assert m["time/step"] >= stages + 0.3


def test_a_torn_last_metrics_line_does_not_break_resume(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "a": 1.0}\n{"step": 2, "a": 2.0}\n{"step": 3, "a"')  # killed mid-write
    logger = RunLogger(tmp_path, wandb_mode="disabled")
    logger.truncate_after(2)
    assert path.read_text() == '{"step": 1, "a": 1.0}\n{"step": 2, "a": 2.0}\n'
    logger.log(3, {"a": 3.0})
    assert [json.loads(l)["step"] for l in path.read_text().splitlines()] == [1, 2, 3]


class _DroppingEngine:
    """Answers only the first request (a broken engine)."""

    def generate(self, requests, params):
        return [[Completion([5, 6], [0.0, 0.0], "stop")]]


class _Tok:
    def decode(self, ids, skip_special_tokens=True):
        return " ".join(map(str, ids))


def test_sample_groups_refuses_an_engine_that_drops_requests(data):
    prompt = EncodedPrompt("p", [], [1, 2, 3], [0, 0, 0])
    ctx = RolloutContext(_DroppingEngine(), None, _Tok(), lambda ex: prompt, SamplingParams(1.0, 1.0, 4, seed=0), 2,
                         100, 0, 0)
    with pytest.raises(ValueError, match="returned 1 completion lists for 2 requests"):
        sample_groups(ctx, data[0][:2])
