"""Core review 5: the GRPO update's metrics under what an untrained or collapsing model emits (EOS-first, token-less
and budget-long responses in zero-signal groups), checked by hand against an independent forward of the model."""

import pytest
import torch

from conftest import randomize
from mmevo.config import load_config
from mmevo.data.synthetic import split_train_heldout
from mmevo.grpo.trainer import GRPOTrainer
from mmevo.models.loader import load_model
from mmevo.rollout.base import Completion
from mmevo.rollout.factory import build_engine

MAX_TOKENS = 6


class Scripted:
    """The real HF engine, except that every group gets the same fixed responses (and the prompts are recorded)."""

    def __init__(self, engine, script):
        self.engine, self.script, self.prompts = engine, script, []

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def generate(self, requests, params):
        self.prompts += [r.prompt for r in requests]
        return [[Completion(list(ids), [0.0] * len(ids), why) for ids, why in self.script[:r.n]] for r in requests]


def _model(path, seed):
    lm = load_model(path)
    randomize(lm.model, std=0.15, seed=seed)
    return lm


def _per_token(model, ref, prompt, response):
    """(entropy [R], k1 KL [R]) at the response's tokens by one plain forward of prompt + response (temperature 1)."""
    ids = torch.tensor([list(prompt.input_ids) + list(response)])
    P, R = len(prompt.input_ids), len(response)
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=ids).logits[0, P - 1:P - 1 + R].float(), -1)
        lp_ref = torch.log_softmax(ref(input_ids=ids).logits[0, P - 1:P - 1 + R].float(), -1)
    at = torch.tensor(response)[:, None]
    return -(lp.exp() * lp).sum(-1), (lp.gather(-1, at) - lp_ref.gather(-1, at))[:, 0]


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_entropy_and_kl_are_logged_per_response_token_whatever_loss_agg(tiny_text_path, tmp_path, agg):
    # a collapsing model: per group an EOS-first response, a token-less one, one cut at the budget and a short one;
    # no answers, so every group has equal rewards (zero advantage) and the loss is the KL term alone. The logged
    # entropy / KL are means over the 1 + 0 + 6 + 3 = 10 response tokens of each group; before the fix they were
    # aggregated like the loss: seq-mean-token-sum-norm divided their sums by max_tokens x samples (24, not 10) and
    # seq-mean-token-mean averaged 4 per-sample means, the token-less sample's 0 among them
    base = {"data.prompt_template": "none", "rollout.n": 4, "rollout.max_tokens": MAX_TOKENS, "rollout.temperature": 1.0,
            "trainer.prompts_per_step": 2, "trainer.mini_batch_prompts": 2, "trainer.micro_batch_seqs": 3,
            "trainer.lr": 1e-3, "trainer.steps": 1, "trainer.output_dir": str(tmp_path),
            "trainer.wandb_mode": "disabled", "trainer.progress": False, "trainer.save_every": 0,
            "algo.kl_coef": 0.5, "algo.kl_type": "k1", "algo.loss_agg": agg, "trainer.seed": 3,
            "reward.heads": "{accuracy: 1.0, format: 0.5}"}
    cfg = load_config(None, [f"{k}={v}" for k, v in base.items()])
    lm, ref, start = _model(tiny_text_path, 11), _model(tiny_text_path, 12), _model(tiny_text_path, 11)
    engine = build_engine(cfg, lm)
    stop = int(engine.stop_ids[0])
    script = [([stop], "stop"), ([], "stop"), ([11] * MAX_TOKENS, "length"), ([20, 21, stop], "stop")]
    scripted = Scripted(engine, script)
    tr = GRPOTrainer(cfg, lm, scripted, split_train_heldout(8, 0, seed=5)[0], [], ref_model=ref.model, log=False)
    m = tr.step()

    assert m["frac_reward_zero_std"] == 1.0 and m["advantage/abs_mean"] == 0.0
    assert m["actor/pg_loss"] == 0.0 and m["actor/clip_frac"] == 0.0 and m["actor/ratio_mean"] == 1.0
    assert m["response/length_mean"] == pytest.approx(10 / 4) and m["response/length_min"] == 0.0
    assert m["response/truncated_frac"] == 0.25 and m["response/no_answer_frac"] == 1.0
    ent, kl, per_seq = [], [], []
    for prompt in scripted.prompts:
        for ids, _ in script:
            if ids:
                e, k = _per_token(start.model, ref.model, prompt, ids)
                ent.append(e), kl.append(k)
                per_seq.append((float(k.sum()), len(ids)))
            else:
                per_seq.append((0.0, 0))
    ent, kl = torch.cat(ent), torch.cat(kl)
    assert len(ent) == 20
    assert m["actor/entropy"] == pytest.approx(float(ent.mean()), rel=1e-4)
    assert m["actor/kl"] == pytest.approx(float(kl.mean()), rel=1e-3, abs=1e-6)
    # the loss itself still aggregates the KL term as loss_agg says (README: Algorithm notes)
    kl_loss = {"token-mean": float(kl.sum()) / 20,
               "seq-mean-token-mean": sum(s / max(n, 1) for s, n in per_seq) / 8,
               "seq-mean-token-sum-norm": float(kl.sum()) / (MAX_TOKENS * 8)}[agg]
    assert m["actor/loss"] == pytest.approx(0.5 * kl_loss, rel=1e-3, abs=1e-6)
