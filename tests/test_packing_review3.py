"""Differential checks of the training forward's paths (padded, shared-prompt KV cache, padding-free packing with and
without shared prompts, chunked log-probs, checkpointing) against a plain transformers forward of each sample alone,
in float64; and the inputs these paths refuse."""

import copy

import pytest
import torch

from conftest import randomize
from mmevo.grpo.trainer import sequence_logprobs, token_logprobs
from mmevo.models import attention
from mmevo.models.inputs import EncodedPrompt, collate_for_training, encode_prompt, pack_shared
from mmevo.models.loader import load_model


def _float64_rms_norm(monkeypatch):
    """transformers' RMSNorm computes in float32 whatever the model's dtype: in a float64 model that rounding turns
    two summation orders' 1e-16 differences into 1e-7, so float64 parity needs the norm in float64."""
    import transformers.models.qwen2.modeling_qwen2 as q2
    import transformers.models.qwen2_5_vl.modeling_qwen2_5_vl as vl

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))

    monkeypatch.setattr(q2.Qwen2RMSNorm, "forward", forward)
    monkeypatch.setattr(vl.Qwen2_5_VLRMSNorm, "forward", forward)


def _plain(model, p, r, T):
    """log p and entropy of response ``r`` after prompt ``p``: one unpadded transformers forward of p + r."""
    ids = torch.tensor([list(p.input_ids) + list(r)])
    kw = dict(input_ids=ids, attention_mask=torch.ones_like(ids))
    if p.pixel_values is not None:
        kw.update(pixel_values=p.pixel_values.double(), image_grid_thw=p.image_grid_thw,
                  mm_token_type_ids=torch.tensor([list(p.mm_token_type_ids) + [0] * len(r)]))
    logits = model(**kw).logits[0, len(p.input_ids) - 1:len(p.input_ids) - 1 + len(r)].double() / T
    lsm = torch.log_softmax(logits, -1)
    return lsm[torch.arange(len(r)), torch.tensor(r)], -(lsm.exp() * lsm).sum(-1)


# (share_prefix, padding_free, logits_chunk, gradient checkpointing, temperature)
PATHS = [(False, False, 0, False, 1.0), (True, False, 3, False, 0.7), (False, True, 1, False, 1.3),
         (True, True, 1000, False, 0.05), (True, True, 3, True, 1.0), (False, True, 0, True, 0.7),
         (True, False, 1, True, 0.0)]


@pytest.mark.parametrize("kind", ["text", "vl"])
def test_every_path_equals_a_plain_forward_of_each_sample_in_float64(kind, tiny_text_path, tiny_vl_path,
                                                                    monkeypatch):
    """Log-probs, entropies and the gradients of a random weighted loss agree with one plain transformers forward per
    sample to float64 precision on every path: prompts repeated (groups) and interleaved, a length-1 prompt, 0 / 1 /
    2 images of different sizes, empty, length-1 and long responses in one micro-batch, temperatures 0 (read as 1),
    0.05 and others, chunk sizes 1, odd and > N, with and without checkpointing. (The LM head used to cast float64
    logits to float32: errors of 1e-6, 1e-4 at T = 0.05.)"""
    from PIL import Image

    _float64_rms_norm(monkeypatch)
    lm = load_model(tiny_vl_path if kind == "vl" else tiny_text_path)
    randomize(lm.model, std=0.2, seed=3)
    lm.model.double()
    ref = copy.deepcopy(lm.model).eval()
    ref.set_attn_implementation("sdpa")  # transformers' own attention
    is_vl = kind == "vl"
    imgs = [Image.new("RGB", (56, 28), (200, 30, 30)), Image.new("RGB", (28, 84), (20, 90, 200))]
    P = [encode_prompt(lm.processor, is_vl, "<image>Find the angle x of triangle ABC.", imgs[:1] if is_vl else []),
         EncodedPrompt("raw", [], [300], [0]),
         encode_prompt(lm.processor, is_vl, "<image> and <image>: area?", imgs if is_vl else [])]
    prompts = [P[0], P[1], P[0], P[2], P[0], P[2]]
    g = torch.Generator().manual_seed(0)
    responses = [torch.randint(20, 500, (n,), generator=g).tolist() for n in (1, 0, 23, 2, 5, 1)]
    responses[4][1] = lm.tokenizer.pad_token_id  # a pad id inside a response is a real token
    W = torch.randn(len(prompts), 23, generator=g, dtype=torch.float64)
    for share, padding_free, chunk, ckpt, T in (PATHS if kind == "text" else PATHS[1:5]):
        for m in (lm.model, ref):
            m.zero_grad(set_to_none=True)
        if ckpt:
            lm.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        else:
            lm.model.gradient_checkpointing_disable()
        lm.model.train(ckpt)
        logp, ent, mask = sequence_logprobs(lm.model, prompts, responses, lm.tokenizer.pad_token_id, T, "cpu",
                                            with_entropy=True, share_prefix=share, logits_chunk=chunk,
                                            padding_free=padding_free)
        assert logp.dtype == ent.dtype == torch.float64 and logp.shape == (6, 23)
        assert mask.sum(1).tolist() == [len(r) for r in responses]
        ((logp * W * mask).sum() + 0.3 * (ent * W * mask).sum()).backward()
        loss = 0
        for i, (p, r) in enumerate(zip(prompts, responses)):
            if not r:
                assert float(logp[i].detach().abs().max()) == 0 and float(ent[i].detach().abs().max()) == 0
                continue
            want_lp, want_ent = _plain(ref, p, r, T if T else 1.0)
            assert (logp[i, :len(r)] - want_lp).abs().max() < 1e-10, (share, padding_free, chunk, ckpt, T, i)
            assert (ent[i, :len(r)] - want_ent).abs().max() < 1e-10, (share, padding_free, chunk, ckpt, T, i)
            loss = loss + (want_lp * W[i, :len(r)]).sum() + 0.3 * (want_ent * W[i, :len(r)]).sum()
        loss.backward()
        want = dict(ref.named_parameters())
        for name, p in lm.model.named_parameters():
            assert (p.grad - want[name].grad).abs().max() < 1e-9, (name, share, padding_free, chunk, ckpt, T)
    lm.model.gradient_checkpointing_disable()


def test_float64_logits_give_float64_logprobs_and_entropy():
    """logits [0, 1e-8, 2]: log p(1) = 1e-8 - log(1 + e^1e-8 + e^2) = -2.2395447572869545, entropy
    0.6655726835750779 (Python's float64 math); at T = 0.5, log p(1) = -4.035976280101561. Float32 logits round
    them at 1e-7, and the 1e-8 logit away."""
    head = torch.nn.Linear(1, 3, bias=False).double()
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[0.0], [1e-8], [2.0]], dtype=torch.float64))
    head.requires_grad_(False)
    hidden = torch.ones(1, 2, 1, dtype=torch.float64)
    labels, mask = torch.tensor([[1, 1]]), torch.tensor([[1, 0]])
    for chunk in (0, 1):
        logp, ent = token_logprobs(head, hidden, labels, mask, 1.0, chunk, with_entropy=True)
        assert logp.dtype == ent.dtype == torch.float64
        assert abs(float(logp[0, 0]) - -2.2395447572869545) < 1e-15 and float(logp[0, 1]) == 0.0
        assert abs(float(ent[0, 0]) - 0.6655726835750779) < 1e-15 and float(ent[0, 1]) == 0.0
    logp, _ = token_logprobs(head, hidden, labels, mask, 0.5)
    assert abs(float(logp[0, 0]) - -4.035976280101561) < 1e-15
    empty, _ = token_logprobs(head, hidden, labels, torch.zeros_like(mask), 1.0)  # nothing to score
    assert empty.dtype == torch.float64 and float(empty.abs().max()) == 0
    # half precision is still scored in float32
    logp, _ = token_logprobs(head.to(torch.bfloat16), hidden.to(torch.bfloat16), labels, mask, 1.0)
    assert logp.dtype == torch.float32


def _sliding_window_model(tiny_text_path):
    from transformers import AutoConfig, Qwen2ForCausalLM

    config = AutoConfig.from_pretrained(tiny_text_path)
    config.use_sliding_window, config.sliding_window, config.max_window_layers = True, 4, 0
    config.layer_types = ["sliding_attention"] * config.num_hidden_layers
    model = Qwen2ForCausalLM(config)
    model.set_attn_implementation(attention.NAME)  # what the loader picks for an "sdpa" checkpoint
    return randomize(model, std=0.2, seed=3).eval()


def test_sliding_window_layers_keep_the_padded_forward(tiny_text_path):
    """A layer with a sliding window attends to its last ``sliding_window`` keys only (transformers' mask); packed
    rows and shared prefixes attended to every earlier key: padding-free log-probs were off by up to ~9 nats. Such a
    model now takes the padded forward (and repeated decode caches), and a packed forward is refused."""
    model = _sliding_window_model(tiny_text_path)
    assert not attention.supports_packing(model)
    p = EncodedPrompt("x", [], list(range(30, 42)), [0] * 12)
    rs = [list(range(50, 60)), list(range(70, 75))]
    with torch.no_grad():
        ids = torch.tensor([p.input_ids + rs[0]])
        want = torch.log_softmax(model(input_ids=ids).logits[0, 11:21], -1)[range(10), rs[0]]
        for share in (True, False):
            logp, _, _ = sequence_logprobs(model, [p, p], rs, 0, 1.0, "cpu", share_prefix=share, padding_free=True)
            assert (logp[0] - want).abs().max() < 1e-4
        with pytest.raises(NotImplementedError, match="sliding window"):
            model.model(**pack_shared(model, [p, p], rs, 0).model_kwargs(), use_cache=False)


@pytest.mark.parametrize("n_prompts,n_responses", [(3, 2), (2, 3), (0, 0), (1, 0)])
def test_prompts_and_responses_must_pair_up(n_prompts, n_responses, tiny_text_path):
    """One response per prompt: a missing or extra response used to be dropped silently (zip) or lent to another
    sample's prompt, giving log-probs of another shape."""
    lm = load_model(tiny_text_path)
    p, q = EncodedPrompt("x", [], [30, 31, 32], [0] * 3), EncodedPrompt("y", [], [5, 6], [0, 0])
    prompts = [p, p, q][:n_prompts]
    responses = [[50, 51], [52], [53]][:n_responses]
    match = "no samples" if n_prompts == n_responses else f"{n_prompts} prompts but {n_responses} responses"
    for share in (True, False):
        for padding_free in (True, False):
            with pytest.raises(ValueError, match=match), torch.no_grad():
                sequence_logprobs(lm.model, prompts, responses, 0, 1.0, "cpu", share_prefix=share,
                                  padding_free=padding_free)
    with pytest.raises(ValueError, match=match):
        collate_for_training(lm.model, prompts, responses, 0)
    with pytest.raises(ValueError, match=match):
        pack_shared(lm.model, prompts, responses, 0)


def test_packed_attention_refuses_decreasing_segment_starts():
    """Starts [0, 5, 3, 8] cover the row end to end but segment 2 runs backwards: its queries were never attended
    (their outputs uninitialised memory)."""
    q = torch.randn(1, 2, 8, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="must not decrease"):
        attention.packed_attention(q, q, q, torch.tensor([0, 5, 3, 8], dtype=torch.int32))


def test_self_attending_buckets_run_as_plain_causal_attention_and_equal_per_segment_attention():
    """Segments that attend to themselves (q == k, padded at the end of their bucket) need no mask: a real query never
    reaches its segment's padding under plain causal attention, which skips the masked half of the work. Segments
    over more keys than queries (shared prompts) keep their bottom-right mask. Values and gradients equal one causal
    attention per segment, in float64, with grouped K/V heads."""
    torch.manual_seed(0)
    lengths = [9, 7, 7, 4, 1]  # one bucket (within the waste factor) holding uneven lengths
    cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    n = int(cu[-1])
    q = torch.randn(1, 4, n, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 2, n, 8, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 2, n, 8, dtype=torch.float64, requires_grad=True)
    spans = [(s, e, s, e) for s, e in zip(cu[:-1].tolist(), cu[1:].tolist())]
    layout = attention._padded_layout(cu, None, spans, q.device)
    assert [b.mask for b in layout.buckets] == [None] * len(layout.buckets)
    assert any(len({*lengths}) > 1 and b.size[0] > 1 for b in layout.buckets)  # padding inside a bucket
    out = attention.packed_attention(q, k, v, cu)  # [1, N, H, D]
    want = torch.cat([torch.nn.functional.scaled_dot_product_attention(
        q[:, :, s:e], k[:, :, s:e], v[:, :, s:e], is_causal=True, enable_gqa=True) for s, e, _, _ in spans], 2)
    assert torch.allclose(out, want.transpose(1, 2), atol=1e-12)
    w = torch.randn_like(out)
    got = torch.autograd.grad((out * w).sum(), (q, k, v))
    ref = torch.autograd.grad((want.transpose(1, 2) * w).sum(), (q, k, v))
    assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(got, ref))
    # a prompt's responses attend over more keys than they have queries: those buckets keep their mask
    kv_index = torch.arange(n)
    shared = attention._padded_layout(torch.tensor([0, 4, 9], dtype=torch.int32), (kv_index, torch.tensor(
        [0, 4, 4 + 9], dtype=torch.int32)), [(0, 4, 0, 4), (4, 9, 4, 13)], q.device)
    assert any(b.mask is not None for b in shared.buckets)
