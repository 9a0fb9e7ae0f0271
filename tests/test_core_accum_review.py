"""The accumulated gradient of an uneven micro-batch split with the KL and entropy terms equals one whole-batch loss."""

import math

import pytest
import torch

from mmevo.grpo import algos
from mmevo.grpo.trainer import sequence_logprobs
from test_trainer import _cfg, _fixed_batch, _trainer, data  # noqa: F401  (fixture)


def _grad_norm_diff(a: dict, b: dict) -> tuple[float, float]:
    norm = math.sqrt(sum(float((g ** 2).sum()) for g in b.values()))
    return norm, math.sqrt(sum(float(((a[n] - b[n]) ** 2).sum()) for n in b))


@pytest.mark.parametrize("kl_type", ["low_var_kl", "k2", "low_var_kl+"])
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_uneven_split_with_kl_and_entropy_equals_the_whole_batch_loss(tiny_vl_path, tmp_path, data, agg, kl_type):
    kl_coef, ent_coef, temp = 0.3, 0.05, 0.7
    cfg = _cfg(tmp_path / "run", **{"algo.loss_agg": agg, "algo.kl_coef": kl_coef, "algo.kl_type": kl_type,
                                    "algo.entropy_coef": ent_coef, "rollout.temperature": temp,
                                    "trainer.micro_batch_seqs": 4, "algo.clip_low": 0.05, "algo.clip_high": 0.08})
    tr = _trainer(cfg, tiny_vl_path, data)
    prompts, responses, adv = _fixed_batch(tr, (3, 2, 0, 4, 2, 1))  # one token-less response
    micro = [[0, 1, 2, 3], [4, 5]]  # uneven: 4 + 2 sequences, 9 + 3 tokens
    g = torch.Generator().manual_seed(1)
    cur = tr._logprobs_no_grad(tr.model, prompts, responses)
    old = [lp + 0.2 * torch.randn(lp.shape, generator=g) for lp in cur]
    ref = [lp + 0.5 * torch.randn(lp.shape, generator=g) for lp in cur]
    grads = {}

    def capture():
        grads.update({n: p.grad.clone() for n, p in tr.model.named_parameters() if p.grad is not None})
        return 0.0

    tr.backend.step = capture
    tr._update(prompts, responses, adv, [micro], [2], old, ref)

    tr.model.zero_grad(set_to_none=True)
    logp, ent, mask = sequence_logprobs(tr.model, prompts, responses, tr.pad_id, temp, "cpu", with_entropy=True,
                                        entropy_grad=True)
    R = logp.shape[1]
    pad = lambda xs: torch.stack([torch.cat([x, x.new_zeros(R - len(x))]) for x in xs])  # noqa: E731
    scale = cfg.rollout.max_tokens * 6 if agg == "seq-mean-token-sum-norm" else None
    loss, m = algos.policy_loss(logp, pad(old), adv, mask, 0.05, 0.08, agg, loss_scale_factor=scale)
    assert m["clip_frac"] > 0
    loss = loss + kl_coef * algos.agg_loss(algos.kl_penalty(logp, pad(ref), kl_type), mask, agg, scale)
    loss = loss - ent_coef * algos.agg_loss(ent, mask, agg, scale)
    loss.backward()
    want = {n: p.grad for n, p in tr.model.named_parameters() if p.grad is not None}
    assert set(want) == set(grads)
    norm, diff = _grad_norm_diff(grads, want)
    assert norm > 1e-4 and diff < 1e-5 * norm, (diff, norm)
