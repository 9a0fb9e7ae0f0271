"""Settings that change the cost of a GRPO update, never its mathematics: one real ``GRPOTrainer.step`` on a fixed
rollout (tests/invar27_harness.py: unequal lengths, EOS-ended and truncated responses, a zero-advantage group, an
empty response) gives the same gradients of every update, post-step weights and logged metrics under each of them.

Tolerance 1e-5 relative (fp32; the sums run in another order per micro-batch / chunk / kernel); 3e-5 for the four
chained updates of ``ppo2``, whose later gradients carry the earlier updates' noise through the weights."""

import pytest

from invar27_harness import assert_same_step, run_step
from mmevo.grpo.algos import AGG_MODES, KL_KINDS

# settings whose loss normaliser and terms differ (the normaliser must be the whole mini-batch's)
BASES = {
    **{f"agg={a}": {"algo.loss_agg": a} for a in AGG_MODES},
    "kl+entropy": {"algo.kl_coef": 0.2, "algo.kl_type": "low_var_kl", "algo.entropy_coef": 0.03,
                   "algo.loss_agg": "seq-mean-token-mean"},
    # two epochs over two mini-batches of two prompts: old log-probs, ratios away from 1 (up to ~4.6), clipping
    # (a fifth of the tokens); the smaller lr keeps SGD from multiplying fp32 noise through four chained updates
    # (with lr 0.05 the ratios reach 200 and the last update's 5e-6 noise grows to 1e-4, in every setting alike)
    "ppo2": {"algo.ppo_epochs": 2, "trainer.mini_batch_prompts": 2, "algo.kl_coef": 0.1, "algo.entropy_coef": 0.02,
             "algo.loss_agg": "token-mean", "trainer.lr": 0.0005},
}
# the reference: every sample in one micro-batch, one LM-head call, padded forward, no checkpointing, plain linears
REFERENCE = {"trainer.micro_batch_seqs": 64, "trainer.max_tokens_per_micro_batch": 0, "trainer.logits_chunk_tokens": 0,
             "trainer.padding_free": False, "model.gradient_checkpointing": False, "model.cpu_linear": "torch"}
VARIANTS = {
    "micro1": {"trainer.micro_batch_seqs": 1},
    "micro3": {"trainer.micro_batch_seqs": 3},
    "tokens_tight": {"trainer.max_tokens_per_micro_batch": 120, "trainer.padding_free": True},
    "tokens_one_seq": {"trainer.max_tokens_per_micro_batch": 1},
    "padding_free": {"trainer.padding_free": True},
    "chunk1": {"trainer.logits_chunk_tokens": 1},
    "chunk7": {"trainer.logits_chunk_tokens": 7, "trainer.micro_batch_seqs": 5},
    "chunk1024": {"trainer.logits_chunk_tokens": 1024},
    "checkpointing": {"model.gradient_checkpointing": True, "trainer.micro_batch_seqs": 3},
    "onednn": {"model.cpu_linear": "onednn", "trainer.padding_free": True},
    "all_at_once": {"trainer.micro_batch_seqs": 3, "trainer.logits_chunk_tokens": 7, "trainer.padding_free": True,
                    "model.gradient_checkpointing": True, "model.cpu_linear": "onednn",
                    "trainer.max_tokens_per_micro_batch": 90},
}

_cache: dict = {}


def _reference(path, tmp_path_factory, which, base):
    key = (which, base)
    if key not in _cache:
        _cache[key] = run_step(path, tmp_path_factory.mktemp("ref"), **{**REFERENCE, **BASES[base]})
    return _cache[key]


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("base", list(BASES))
def test_vl_step_is_invariant(tiny_vl_path, tmp_path_factory, base, variant):
    ref = _reference(tiny_vl_path, tmp_path_factory, "vl", base)
    got = run_step(tiny_vl_path, tmp_path_factory.mktemp("var"), **{**REFERENCE, **BASES[base], **VARIANTS[variant]})
    assert_same_step(got, ref, rtol=3e-5 if base == "ppo2" else 1e-5, what=(base, variant))


@pytest.mark.parametrize("variant", ["micro1", "micro3", "tokens_tight", "padding_free", "chunk7", "checkpointing",
                                     "all_at_once"])
@pytest.mark.parametrize("base", ["agg=seq-mean-token-sum-norm", "kl+entropy", "ppo2"])
def test_text_step_is_invariant(tiny_text_path, tmp_path_factory, base, variant):
    ref = _reference(tiny_text_path, tmp_path_factory, "text", base)
    got = run_step(tiny_text_path, tmp_path_factory.mktemp("var"), **{**REFERENCE, **BASES[base], **VARIANTS[variant]})
    assert_same_step(got, ref, rtol=3e-5 if base == "ppo2" else 1e-5, what=(base, variant))


@pytest.mark.parametrize("kl_type", KL_KINDS)
def test_every_kl_type_is_invariant_to_micro_batching_and_ref_offload(tiny_vl_path, tmp_path_factory, kl_type):
    base = {**REFERENCE, "algo.kl_coef": 0.3, "algo.kl_type": kl_type, "algo.loss_agg": "seq-mean-token-sum"}
    ref = run_step(tiny_vl_path, tmp_path_factory.mktemp("ref"), **base)
    got = run_step(tiny_vl_path, tmp_path_factory.mktemp("var"), **{**base, "trainer.micro_batch_seqs": 3,
                                                                      "trainer.logits_chunk_tokens": 7,
                                                                      "trainer.padding_free": True,
                                                                      "model.ref_offload": True})
    assert got["metrics"]["actor/kl"] > 0
    assert_same_step(got, ref, what=kl_type)
