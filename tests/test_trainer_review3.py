"""Trainer review 3: token-level update metrics do not depend on the micro-batch split under any loss_agg; torn
checkpoint dirs are not resumed from; a resume under other settings names them."""

import math
import warnings

import pytest
import torch

from conftest import randomize
from mmevo.config import load_config, to_dict
from mmevo.data.synthetic import split_train_heldout
from mmevo.grpo.checkpoint import latest_checkpoint, list_checkpoints
from mmevo.grpo import trainer as T
from mmevo.grpo.trainer import GRPOTrainer
from mmevo.models.loader import load_model
from mmevo.rollout.factory import build_engine


def _cfg(out, **over):
    base = {"data.prompt_template": "none", "rollout.n": 2, "rollout.max_tokens": 6, "rollout.temperature": 1.0,
            "trainer.prompts_per_step": 2, "trainer.mini_batch_prompts": 1, "trainer.micro_batch_seqs": 4,
            "trainer.lr": 1e-3, "trainer.steps": 1, "trainer.output_dir": str(out), "trainer.wandb_mode": "disabled",
            "trainer.progress": False, "trainer.save_every": 1, "algo.kl_coef": 0, "trainer.seed": 3,
            "reward.heads": "{accuracy: 1.0, format: 0.5}"}
    base.update(over)
    return load_config(None, [f"{k}={v}" for k, v in base.items()])


@pytest.fixture(scope="module")
def data():
    return split_train_heldout(8, 0, seed=5)


def _trainer(cfg, path, data):
    lm = load_model(path)
    randomize(lm.model, std=0.15, seed=11)
    return GRPOTrainer(cfg, lm, build_engine(cfg, lm), data[0], [], ref_model=None, log=False)


def _plain_logprobs(model, prompt, response):
    """log p(response | prompt) by one plain forward of the whole sequence (independent of sequence_logprobs)."""
    ids = torch.tensor([list(prompt.input_ids) + list(response)])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    P = len(prompt.input_ids)
    return torch.log_softmax(logits[P - 1:P - 1 + len(response)], -1).gather(-1, torch.tensor(response)[:, None])[:, 0]


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
@pytest.mark.parametrize("micro", [1, 2])
def test_token_level_metrics_are_means_over_the_mini_batch_tokens_whatever_the_split(tiny_text_path, tmp_path, data,
                                                                                      agg, micro):
    # sample 0: 1 token with ratio 2 and A = +1 (clipped above); sample 1: 3 tokens with ratio 1 and A = -1 (not
    # clipped). Over the mini-batch's 4 tokens: clip_frac 1/4, ratio_mean (2 + 3) / 4, approx_kl -ln 2 / 4. The old
    # code weighted these token means by sequences under seq-mean-*: with one sample per micro-batch 1/2, 3/2, -ln 2 / 2
    tr = _trainer(_cfg(tmp_path, **{"algo.loss_agg": agg, "trainer.micro_batch_seqs": micro}), tiny_text_path, data)
    prompt = tr.prompts(data[0][0])
    prompts, responses = [prompt, prompt], [[101], [102, 103, 104]]
    cur = [_plain_logprobs(tr.model, prompt, r) for r in responses]
    old = [cur[0] - math.log(2.0), cur[1]]
    adv = torch.tensor([1.0, -1.0])
    tr.backend.step = lambda: 1.0  # look at the metrics only; the weights stay as they are
    micros = tr._micro_batches([0, 1], prompts, responses)
    assert len(micros) == 2 // micro
    m = tr._update(prompts, responses, adv, [micros], [len(micros)], old, None)
    assert m["actor/clip_frac"] == pytest.approx(0.25, abs=1e-6)
    assert m["actor/clip_frac_high"] == pytest.approx(0.25, abs=1e-6)
    assert m["actor/clip_frac_low"] == m["actor/clip_frac_dual"] == 0.0
    assert m["actor/ratio_mean"] == pytest.approx(1.25, abs=1e-5)
    assert m["actor/approx_kl"] == pytest.approx(-0.17328679513998632, abs=1e-5)
    assert m["actor/ratio_max"] == pytest.approx(2.0, abs=1e-5)


def test_torn_checkpoint_dirs_are_not_listed(tmp_path):
    root = tmp_path / "checkpoints"
    for name, files in {"step_000001": ["trainer_state.pt", "model/config.json", "model/model.safetensors"],
                        "step_000002": ["model/config.json"],  # no trainer state
                        "step_000003": ["trainer_state.pt"],  # no model
                        "step_000004": []}.items():
        (root / name).mkdir(parents=True)
        for f in files:
            (root / name / f).parent.mkdir(parents=True, exist_ok=True)
            (root / name / f).write_bytes(b"x")
    (root / "step_000005").write_bytes(b"not a dir")
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_000001"]
    assert latest_checkpoint(tmp_path).name == "step_000001"


def test_resume_skips_a_torn_newer_checkpoint(tiny_text_path, tmp_path, data):
    _trainer(_cfg(tmp_path), tiny_text_path, data).train()
    torn = tmp_path / "checkpoints" / "step_000002"
    (torn / "model").mkdir(parents=True)  # e.g. an interrupted copy: the model dir began, nothing else
    tr = _trainer(_cfg(tmp_path, **{"trainer.steps": 2}), tiny_text_path, data)
    assert tr.maybe_resume() and tr.step_idx == 1
    tr.train()  # step 2 is saved over the torn dir
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_000001", "step_000002"]
    assert (torn / "trainer_state.pt").is_file()


def test_resume_config_changes_names_the_keys_that_matter():
    saved = {"algo": {"clip_high": 0.2, "loss_agg": "token-mean"}, "trainer": {"steps": 10, "output_dir": "a", "lr": 1.0},
             "reward": {"heads": {"accuracy": 1.0}}, "data": {"hide_labels": False}, "eval": {"benchmark": ""}}
    now = {"algo": {"clip_high": 0.28, "loss_agg": "token-mean"}, "trainer": {"steps": 20, "output_dir": "b", "lr": 1.0},
           "reward": {"heads": {"accuracy": 1.0, "format": 0.5}}, "data": {"hide_labels": True, "new": 1},
           "eval": {"benchmark": "mathvista_testmini"}}
    assert T.resume_config_changes(saved, now) == ["algo.clip_high", "data.hide_labels", "data.new", "reward.heads"]
    assert T.resume_config_changes(saved, saved) == []
    assert T.resume_config_changes(None, now) == []  # a checkpoint without a config


def test_a_resume_under_other_settings_warns_naming_them(tiny_text_path, tmp_path, data):
    _trainer(_cfg(tmp_path), tiny_text_path, data).train()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _trainer(_cfg(tmp_path, **{"trainer.steps": 2}), tiny_text_path, data).maybe_resume()
    assert not [w for w in caught if "resuming" in str(w.message)]  # a longer run only: nothing to say
    changed = _cfg(tmp_path, **{"trainer.steps": 2, "algo.clip_high": 0.28, "reward.heads": "{format: 1.0}"})
    assert T.resume_config_changes(to_dict(_cfg(tmp_path)), to_dict(changed)) == ["algo.clip_high", "reward.heads"]
    with pytest.warns(UserWarning, match=r"saved with: algo\.clip_high, reward\.heads \(this run's values apply;"):
        assert _trainer(changed, tiny_text_path, data).maybe_resume()
    # the loaded optimizer state keeps its lr (as verl / TRL): the warning says so rather than "this run's values"
    tr = _trainer(_cfg(tmp_path, **{"trainer.lr": 0.5}), tiny_text_path, data)
    with pytest.warns(UserWarning, match=r"saved with: trainer\.lr \(this run's values apply, except trainer\.lr: "):
        assert tr.maybe_resume()
    assert [g["lr"] for g in tr.optimizer.param_groups] == [1e-3, 1e-3]
