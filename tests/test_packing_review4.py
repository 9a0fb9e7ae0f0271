"""Packing review 4: chunked LM-head log-probs keep one chunk of logits when only the head trains; the training
forward's paths (padded, shared-prompt KV cache, padding-free with and without shared prompts, checkpointing) equal a
plain transformers forward of each sample under LoRA adapters and with only the head (and final norm) trained;
non-integer response ids are refused; the decode caches keep transformers' row reorders and repeats."""

import copy

import pytest
import torch

from conftest import randomize
from mmevo.grpo.trainer import sequence_logprobs, token_logprobs
from mmevo.models.inputs import EncodedPrompt
from mmevo.models.loader import load_model


def _vocab_sized_saved(head, hidden, labels, mask, chunk):
    """Shapes of the tensors autograd keeps for backward whose last dimension is the vocabulary (logits, softmax)."""
    saved = []

    def keep(t):
        saved.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        logp, ent = token_logprobs(head, hidden, labels, mask, 0.5, chunk, with_entropy=True)
    return logp, ent, [s for s in saved if s and s[-1] == head.out_features]


def test_trained_head_over_a_frozen_body_keeps_one_chunk_of_logits():
    """With ``model.trainable: [lm_head]`` the hidden states need no gradient, but the head's weight does: every
    chunk's [chunk, V] logits were kept for backward (18 tensors here, the whole [N, V] the chunking exists to avoid).
    Each chunk is now recomputed in backward, and the gradient is still that of log_softmax(h W^T / T)."""
    head = torch.nn.Linear(2, 5, bias=False).double()
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.5], [0.0, 0.0]]))
    hidden = torch.tensor([[[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]], [[0.0, 0.0], [2.0, 2.0], [-1.0, 1.0]]],
                          dtype=torch.float64)  # a frozen body: no gradient
    labels = torch.tensor([[0, 2, 4], [1, 3, 0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    logp, ent, saved = _vocab_sized_saved(head, hidden, labels, mask, chunk=2)
    assert saved == []
    (logp.sum() + ent.sum()).backward()
    # reference: log_softmax(h W^T / 0.5) written out here (W above), the five real tokens
    w = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.5], [0.0, 0.0]], dtype=torch.float64,
                     requires_grad=True)
    h = torch.tensor([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0], [0.0, 0.0], [2.0, 2.0]], dtype=torch.float64)
    lsm = torch.log_softmax(h @ w.T / 0.5, -1)
    want_lp = lsm[torch.arange(5), torch.tensor([0, 2, 4, 1, 3])]
    (want_lp.sum() - (lsm.exp() * lsm).sum()).backward()
    got = torch.cat([logp[0], logp[1, :2]]).detach()
    assert (got - want_lp.detach()).abs().max() < 1e-12
    assert abs(float(got[0]) - -4.147219652637435) < 1e-12  # logits [2, 4, 6, 0, 0]: 2 - log(e^2 + e^4 + e^6 + 2)
    assert (head.weight.grad - w.grad).abs().max() < 1e-12
    # a trainable body (hidden with gradient) was already recomputed per chunk; without any gradient nothing is kept
    _, _, saved = _vocab_sized_saved(head, hidden.clone().requires_grad_(True), labels, mask, chunk=2)
    assert saved == []
    with torch.no_grad():
        _, _, saved = _vocab_sized_saved(head, hidden, labels, mask, chunk=2)
    assert saved == []


def _plain(model, p, r, T):
    ids = torch.tensor([list(p.input_ids) + list(r)])
    logits = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0].double()
    lsm = torch.log_softmax(logits[len(p.input_ids) - 1:len(p.input_ids) - 1 + len(r)] / T, -1)
    return lsm[torch.arange(len(r)), torch.tensor(r)], -(lsm.exp() * lsm).sum(-1)


def _float64_rms_norm(monkeypatch):
    import transformers.models.qwen2.modeling_qwen2 as q2

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    monkeypatch.setattr(q2.Qwen2RMSNorm, "forward", forward)


def test_lora_and_head_only_training_equal_a_plain_forward_on_every_path(tiny_text_path, monkeypatch):
    """LoRA adapters (injected in place) and a head + final-norm-only trainable subset: log-probs, entropies and the
    gradients of a weighted loss agree with one plain transformers forward per sample (float64) on the padded, the
    shared-prompt KV, the padding-free and the padding-free shared paths, chunked, with and without checkpointing."""
    from mmevo.models.adapters import apply_lora

    _float64_rms_norm(monkeypatch)
    prompts_of = [EncodedPrompt("a", [], [0, 0, 31, 32, 33, 34], [0] * 6), EncodedPrompt("b", [], [300], [0])]
    prompts = [prompts_of[0], prompts_of[1], prompts_of[0], prompts_of[0]]
    responses = [[40, 41, 42, 43, 44, 45, 46], [0], [], [400, 2]]
    W = torch.linspace(-1.0, 1.0, 28, dtype=torch.float64).view(4, 7)
    for mode in ("lora", "head"):
        lm = load_model(tiny_text_path)
        randomize(lm.model, std=0.2, seed=3)
        if mode == "lora":
            apply_lora(lm.model, 2, 4.0, 0.0, ["q_proj", "v_proj", "down_proj"])
            with torch.no_grad():
                for n, p in lm.model.named_parameters():
                    if "lora_B" in n:
                        p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) * 0.1)
        else:
            for n, p in lm.model.named_parameters():
                p.requires_grad_(n in ("lm_head.weight", "model.norm.weight"))
        lm.model.double()
        ref = copy.deepcopy(lm.model).eval()
        ref.set_attn_implementation("sdpa")
        ref.zero_grad(set_to_none=True)
        loss = 0
        for i, (p, r) in enumerate(zip(prompts, responses)):
            if r:
                lp, en = _plain(ref, p, r, 0.7)
                loss = loss + (lp * W[i, :len(r)]).sum() + 0.3 * (en * W[i, :len(r)]).sum()
        loss.backward()
        want = {n: p.grad for n, p in ref.named_parameters() if p.requires_grad}
        assert want and all(g is not None for g in want.values())
        for share, padding_free, chunk, ckpt in [(False, False, 0, False), (True, False, 3, False),
                                                 (False, True, 1, True), (True, True, 2, True)]:
            lm.model.zero_grad(set_to_none=True)
            if ckpt:
                lm.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            else:
                lm.model.gradient_checkpointing_disable()
            lm.model.train(ckpt)
            logp, ent, mask = sequence_logprobs(lm.model, prompts, responses, 0, 0.7, "cpu", with_entropy=True,
                                                share_prefix=share, logits_chunk=chunk, padding_free=padding_free)
            ((logp * W * mask).sum() + 0.3 * (ent * W * mask).sum()).backward()
            with torch.no_grad():
                for i, (p, r) in enumerate(zip(prompts, responses)):
                    if r:
                        lp, en = _plain(ref, p, r, 0.7)
                        assert (logp[i, :len(r)] - lp).abs().max() < 1e-10, (mode, share, padding_free, i)
                        assert (ent[i, :len(r)] - en).abs().max() < 1e-10, (mode, share, padding_free, i)
            got = {n: p.grad for n, p in lm.model.named_parameters() if p.requires_grad}
            assert got.keys() == want.keys()
            for n, g in got.items():
                assert (g - want[n]).abs().max() < 1e-9, (mode, n, share, padding_free, chunk, ckpt)
        lm.model.gradient_checkpointing_disable()


def test_non_integer_response_ids_are_refused_on_every_path(tiny_text_path):
    """Token ids go into long tensors: 41.7 was scored as token 41 and a list of booleans as tokens 1 / 0, silently
    (a plain transformers forward refuses float and bool ids in its embedding). Integer lists, tuples, numpy and
    torch integer arrays and empty responses are still taken."""
    import numpy as np

    lm = load_model(tiny_text_path)
    p = EncodedPrompt("x", [], [30, 31, 32], [0] * 3)
    good = [[40, 41], (42,), np.array([43, 44]), torch.tensor([45]), []]
    with torch.no_grad():
        ok, _, mask = sequence_logprobs(lm.model, [p] * 5, good, 0, 1.0, "cpu")
    assert mask.sum(1).tolist() == [2, 1, 2, 1, 0]
    bad = [[40.0, 41.7], [True, False], torch.tensor([40.0]), np.array([[40, 41]])]
    for r in bad:
        for share in (True, False):
            for padding_free in (True, False):
                with pytest.raises(ValueError, match="response 1: token ids must be a flat sequence of integers"), \
                        torch.no_grad():
                    sequence_logprobs(lm.model, [p, p], [[40], r], 0, 1.0, "cpu", share_prefix=share,
                                      padding_free=padding_free)


def test_decode_caches_keep_row_reorders_and_repeats():
    """transformers' ``Cache.reorder_cache`` (beam search) reordered a GrowableLayer's views only: the next update
    wrote into the buffer's old row order, so rows got their keys back unordered. On a SharedPrefixCache it (and
    ``batch_repeat_interleave``) left ``row_of`` behind, so rows read another row's prefix or failed on shapes."""
    from mmevo.rollout.kv_cache import DecodeCache, SharedPrefixCache

    k = torch.arange(12.0).view(3, 1, 2, 2)  # rows 0, 1, 2: [KV 1, 2 positions, D 2]
    cache = DecodeCache()
    cache.update(k, -k, 0)
    cache.reorder_cache(torch.tensor([2, 0, 1]))
    new = torch.full((3, 1, 1, 2), 100.0)
    keys, values = cache.update(new, -new, 0)
    assert keys[:, 0, :2].flatten(1).tolist() == [[8.0, 9.0, 10.0, 11.0], [0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]
    assert (values[:, 0, :2] == -keys[:, 0, :2]).all() and (keys[:, 0, 2] == 100.0).all()
    cache.batch_repeat_interleave(2)
    assert cache.layers[0].keys[:, 0, 0, 0].tolist() == [8.0, 8.0, 0.0, 0.0, 4.0, 4.0]

    prefill = DecodeCache()
    prefill.update(torch.arange(8.0).view(2, 1, 2, 2), torch.zeros(2, 1, 2, 2), 0)  # two prefixes
    shared = SharedPrefixCache(prefill, torch.ones(2, 2), torch.tensor([0, 0, 1]))
    shared.update(torch.tensor([10.0, 11.0, 12.0]).view(3, 1, 1, 1).expand(3, 1, 1, 2), torch.zeros(3, 1, 1, 2), 0)
    shared.reorder_cache(torch.tensor([2, 1, 0]))
    assert shared.row_of.tolist() == [1, 0, 0]
    assert shared.row_kv(0, 0)[0][0].tolist() == [[4.0, 5.0], [6.0, 7.0], [12.0, 12.0]]  # prefix 1, then its own
    shared.batch_repeat_interleave(2)
    assert shared.row_of.tolist() == [1, 1, 0, 0, 0, 0]
    assert shared.row_kv(0, 1)[0][0].tolist() == [[4.0, 5.0], [6.0, 7.0], [12.0, 12.0]]
    assert shared.row_kv(0, 5)[0][0].tolist() == [[0.0, 1.0], [2.0, 3.0], [10.0, 10.0]]


@pytest.mark.parametrize("padding_free", [False, True])
def test_a_micro_batch_without_response_tokens_reaches_a_head_trained_over_a_frozen_body(tiny_text_path,
                                                                                        padding_free):
    """``model.trainable: [lm_head]`` and a micro-batch whose responses are all empty: the log-probs are zeros, but
    they must still lead to the head (its backward raised 'element 0 of tensors does not require grad', and a ZeRO
    rank would skip the head's gradient hook). The head's gradient is then exactly zero."""
    model = load_model(tiny_text_path).model
    model.requires_grad_(False)
    # an untied head (as in the larger checkpoints): the tiny model's tied one would make the embeddings train too
    head = model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone())
    prompts = [EncodedPrompt("a", [], [31, 32, 33], [0] * 3), EncodedPrompt("b", [], [300, 301], [0] * 2)]
    logp, ent, mask = sequence_logprobs(model, prompts, [[], []], 0, 1.0, torch.device("cpu"), with_entropy=True,
                                        padding_free=padding_free)
    assert mask.sum() == 0 and (logp == 0).all() and (ent == 0).all()
    (logp * mask).sum().backward()
    assert head.grad is not None and (head.grad == 0).all()
