"""The memory-saving paths are exact: gradient checkpointing (also with shared prompts), packed (padding-free)
forwards, chunked padding-free log-probs / entropy, and token-budget micro-batches, on the tiny VL and text models."""

import pytest
import torch

from conftest import randomize
from mmevo.grpo.trainer import sequence_logprobs, token_logprobs
from mmevo.models import attention
from mmevo.models.inputs import collate_for_training, encode_prompt, pack
from mmevo.models.loader import load_model


def _batch(lm, is_vl):
    from PIL import Image

    imgs = [Image.new("RGB", (56, 56), (200, 30, 30)), Image.new("RGB", (70, 42), (20, 90, 200))]
    proc = lm.processor
    texts = ["<image>Find angle C.", "In triangle ABC, angle A = 50. <image> Find x."]
    prompts = [encode_prompt(proc, is_vl, t, [im] if is_vl else []) for t, im in zip(texts, imgs)]
    ps = [prompts[0]] * 3 + [prompts[1]] * 2  # two groups sharing their prompt, as the trainer lays them out
    rs = [[105, 106, 107], [108], [109, 110, 111, 112, 113], [114, 115], [116, 117, 118]]
    return ps, rs


def _logprobs_and_grads(lm, ps, rs, **kw):
    lm.model.zero_grad(set_to_none=True)
    logp, ent, mask = sequence_logprobs(lm.model, ps, rs, lm.tokenizer.pad_token_id, 0.9, "cpu", with_entropy=True,
                                        **kw)
    ((logp * mask).sum() + 0.3 * (ent * mask).sum()).backward()
    grads = {n: p.grad.clone() for n, p in lm.model.named_parameters() if p.grad is not None}
    return (logp * mask).detach(), (ent * mask).detach(), grads


@pytest.mark.parametrize("which", ["vl", "text"])
def test_gradient_checkpointing_gives_the_same_logprobs_and_gradients(which, tiny_vl_path, tiny_text_path):
    lm = load_model(tiny_vl_path if which == "vl" else tiny_text_path)
    randomize(lm.model, std=0.2, seed=4)
    ps, rs = _batch(lm, which == "vl")
    lm.model.train()
    ref = _logprobs_and_grads(lm, ps, rs, share_prefix=False)  # no checkpointing, one full pass per sample
    shared = _logprobs_and_grads(lm, ps, rs)  # no checkpointing, one prompt pass per group (the default)
    lm.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    got = _logprobs_and_grads(lm, ps, rs)  # checkpointing: recomputed in backward, same numbers
    assert ref[2].keys() == got[2].keys() == shared[2].keys() and any("embed" in n for n in got[2])
    for other, tol in ((got, 1e-6), (shared, 2e-4)):  # the shared path sums in another order
        assert torch.allclose(ref[0], other[0], atol=tol) and torch.allclose(ref[1], other[1], atol=tol)
        for n in ref[2]:
            assert torch.allclose(ref[2][n], other[2][n], atol=tol, rtol=1e-4), n


@pytest.mark.parametrize("which", ["vl", "text"])
def test_packed_forward_gives_the_same_logprobs_and_gradients(which, tiny_vl_path, tiny_text_path):
    """The forwards over the real tokens only equal the padded one: unshared (one row, attention kept inside each
    sequence) and shared (each group's prompt once, every response attending to it), the latter also under
    checkpointing; the prompts differ in length and the responses in length, so both paddings are exercised, and
    the two VL images have different grids."""
    lm = load_model(tiny_vl_path if which == "vl" else tiny_text_path)
    randomize(lm.model, std=0.2, seed=4)
    ps, rs = _batch(lm, which == "vl")
    lm.model.train()
    ref = _logprobs_and_grads(lm, ps, rs, share_prefix=False)
    packed = _logprobs_and_grads(lm, ps, rs, share_prefix=False, padding_free=True)
    shared = _logprobs_and_grads(lm, ps, rs, padding_free=True)  # each group's prompt once, then its responses
    lm.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    shared_ckpt = _logprobs_and_grads(lm, ps, rs, padding_free=True)  # the same layout, recomputed in backward
    for other in (packed, shared, shared_ckpt):
        assert ref[2].keys() == other[2].keys()
        assert torch.allclose(ref[0], other[0], atol=1e-4) and torch.allclose(ref[1], other[1], atol=1e-4)
        for n in ref[2]:  # float32 sums in another order: within 1e-4 of each gradient's largest entry
            scale = ref[2][n].abs().max()
            assert (ref[2][n] - other[2][n]).abs().max() <= 1e-4 * scale + 1e-7, n
    assert (shared[0] - shared_ckpt[0]).abs().max() < 1e-6


def test_shared_packing_takes_groups_in_any_order(tiny_vl_path):
    """Samples of two groups interleaved (as a mini-batch may order them): each prompt is still packed once and each
    response attends to its own prompt."""
    lm = load_model(tiny_vl_path)
    randomize(lm.model, std=0.2, seed=4)
    ps, rs = _batch(lm, True)
    order = [0, 3, 1, 4, 2]
    ps, rs = [ps[i] for i in order], [rs[i] for i in order]
    lm.model.train()
    ref = _logprobs_and_grads(lm, ps, rs, share_prefix=False)
    got = _logprobs_and_grads(lm, ps, rs, padding_free=True)
    assert torch.allclose(ref[0], got[0], atol=1e-4)
    for n in ref[2]:
        assert (ref[2][n] - got[2][n]).abs().max() <= 1e-4 * ref[2][n].abs().max() + 1e-7, n


def test_packed_rows_that_attended_across_sequences_would_be_caught(tiny_vl_path, monkeypatch):
    """Guard for the test above: one causal attention over the whole packed row (the tokens of one sequence seeing
    the sequences before it) changes the log-probs far beyond its tolerance."""
    lm = load_model(tiny_vl_path)
    randomize(lm.model, std=0.2, seed=4)
    ps, rs = _batch(lm, True)
    ref = _logprobs_and_grads(lm, ps, rs, share_prefix=False)
    whole_row = torch.tensor([0, sum(len(p.input_ids) + len(r) for p, r in zip(ps, rs))], dtype=torch.int32)
    real = attention.packed_attention
    monkeypatch.setattr(attention, "packed_attention", lambda q, k, v, cu, scaling=None, kv=None: real(q, k, v, whole_row, scaling, kv))
    leaky = _logprobs_and_grads(lm, ps, rs, share_prefix=False, padding_free=True)
    assert (leaky[0] - ref[0]).abs().max() > 1e-2


def test_padding_free_keeps_the_padded_forward_under_other_attention_implementations(tiny_vl_path):
    """transformers' own functions ignore the packed rows' bounds: a model loaded with one of them is not packed."""
    lm = load_model(tiny_vl_path, attn_implementation="sdpa")
    randomize(lm.model, std=0.2, seed=4)
    assert not attention.supports_packing(lm.model)
    ps, rs = _batch(lm, True)
    ref = _logprobs_and_grads(lm, ps, rs, share_prefix=False)
    got = _logprobs_and_grads(lm, ps, rs, share_prefix=False, padding_free=True)
    assert torch.equal(ref[0], got[0])
    assert attention.supports_packing(load_model(tiny_vl_path).model)


def test_pack_keeps_each_sequence_its_tokens_positions_and_bounds(tiny_vl_path):
    lm = load_model(tiny_vl_path)
    ps, rs = _batch(lm, True)
    tb = collate_for_training(lm.model, ps, rs, lm.tokenizer.pad_token_id, "cpu")
    pk = pack(tb.batch)
    lengths = [len(p.input_ids) + len(r) for p, r in zip(ps, rs)]
    assert pk.cu_seqlens.tolist() == [0, *torch.tensor(lengths).cumsum(0).tolist()]
    assert pk.cu_seqlens.dtype == torch.int32 and pk.input_ids.shape == (1, sum(lengths))
    for i, (p, r) in enumerate(zip(ps, rs)):
        s, e = pk.cu_seqlens[i].item(), pk.cu_seqlens[i + 1].item()
        assert pk.input_ids[0, s:e].tolist() == list(p.input_ids) + list(r)
        real = tb.batch.attention_mask[i].bool()
        assert torch.equal(pk.position_ids[:, 0, s:e], tb.batch.position_ids[:, i, real])  # mrope rows kept
        assert pk.position_ids[0, 0, s].item() == 0  # each sequence starts at position 0
        assert pk.index[i, real].tolist() == list(range(s, e)) and (pk.index[i, ~real] == -1).all()
    assert torch.equal(pk.pixel_values, tb.batch.pixel_values)
    kw = pk.model_kwargs()
    assert kw["attention_mask"] == {"full_attention": None, "sliding_attention": None}  # no [N, N] mask is built
    assert kw[attention.PACKED_KWARG] is pk.cu_seqlens


def test_packed_attention_is_causal_within_each_sequence_only():
    g = torch.Generator().manual_seed(0)
    lengths = [3, 1, 5, 2]
    n = sum(lengths)
    q = torch.randn(1, 4, n, 8, generator=g)
    k, v = torch.randn(1, 2, n, 8, generator=g), torch.randn(1, 2, n, 8, generator=g)  # grouped-query: 2 KV heads
    cu = torch.tensor([0, 3, 4, 9, 11], dtype=torch.int32)
    out = attention.packed_attention(q, k, v, cu, scaling=0.3)  # [1, N, H, D]
    for s, e in zip(cu[:-1].tolist(), cu[1:].tolist()):
        kk, vv = k[:, :, s:e].repeat_interleave(2, 1), v[:, :, s:e].repeat_interleave(2, 1)
        scores = (q[:, :, s:e] @ kk.transpose(-1, -2)) * 0.3
        scores = scores.masked_fill(torch.ones(e - s, e - s).triu(1).bool(), float("-inf"))
        want = (scores.softmax(-1) @ vv).transpose(1, 2)
        assert torch.allclose(out[:, s:e], want, atol=1e-6)
    with pytest.raises(ValueError, match="do not cover"):
        attention.packed_attention(q, k, v, torch.tensor([0, 3, 10], dtype=torch.int32))
    with pytest.raises(ValueError, match="one row"):
        attention.packed_attention(q.expand(2, -1, -1, -1), k, v, cu)


def _causal_per_segment(q, k, v, bounds, k_bounds, scale):
    """Causal attention of each segment's queries over its keys, one segment at a time: q [H, N, D], k / v
    [KV, N_k, D] (grouped-query heads repeated), query bounds / key bounds [S + 1] -> [N, H, D]. Flash attention's
    causal mask: aligned at the bottom right where a segment has fewer queries than keys."""
    rep = q.shape[0] // k.shape[0]
    out = []
    for s, e, ks, ke in zip(bounds[:-1], bounds[1:], k_bounds[:-1], k_bounds[1:]):
        kk, vv = k[:, ks:ke].repeat_interleave(rep, 0), v[:, ks:ke].repeat_interleave(rep, 0)
        scores = (q[:, s:e] @ kk.transpose(-1, -2)) * scale
        scores = scores.masked_fill(torch.ones(e - s, ke - ks).triu(1 + (ke - ks) - (e - s)).bool(), float("-inf"))
        out.append((scores.softmax(-1) @ vv).transpose(0, 1))
    return torch.cat(out)


def _reference_varlen(with_gqa_arg: bool):
    """A pure-torch stand-in for torch.nn.attention.varlen.varlen_attn (CUDA only, so not runnable here), strict about
    the contract mmevo relies on; two variants: torch 2.13's signature (``enable_gqa``) and one without it."""
    calls = []

    def kernel(q, k, v, cu_seq_q, cu_seq_k, max_q, max_k, *, scale=None, window_size=(-1, -1), enable_gqa=False):
        assert q.dim() == k.dim() == v.dim() == 3 and q.is_contiguous() and k.is_contiguous() and v.is_contiguous()
        assert cu_seq_q.dtype == cu_seq_k.dtype == torch.int32 and cu_seq_q.shape == cu_seq_k.shape
        len_q, len_k = cu_seq_q[1:] - cu_seq_q[:-1], cu_seq_k[1:] - cu_seq_k[:-1]
        assert max_q == int(len_q.max()) and max_k == int(len_k.max()) and bool((len_q <= len_k).all())
        assert cu_seq_q[-1] == q.shape[0] and cu_seq_k[-1] == k.shape[0] == v.shape[0]
        assert window_size == (-1, 0)  # causal
        if q.shape[1] != k.shape[1] and not enable_gqa:
            raise ValueError("heads differ without enable_gqa")
        calls.append(q.shape)
        return _causal_per_segment(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), cu_seq_q.tolist(),
                                   cu_seq_k.tolist(), scale)

    if not with_gqa_arg:
        def kernel_without_gqa(q, k, v, cu_seq_q, cu_seq_k, max_q, max_k, *, scale=None, window_size=(-1, -1)):
            return kernel(q, k, v, cu_seq_q, cu_seq_k, max_q, max_k, scale=scale, window_size=window_size)
        return kernel_without_gqa, calls
    return kernel, calls


@pytest.mark.parametrize("with_gqa_arg", [True, False])
def test_packed_attention_feeds_the_varlen_kernel_its_layout(with_gqa_arg, monkeypatch):
    """The CUDA branch (varlen flash attention) against a stand-in kernel with the documented contract: [N, heads, D]
    contiguous inputs, int32 cumulative bounds, the longest sequence, causal window; grouped-query K/V heads are
    passed with ``enable_gqa`` where the signature takes it and repeated where it does not. GPU check:
    scripts/gpu_check.py packed_forward."""
    kernel, calls = _reference_varlen(with_gqa_arg)
    monkeypatch.setattr(attention, "_varlen_eligible", lambda t: True)
    monkeypatch.setattr(attention, "_varlen_kernel", lambda: kernel)
    g = torch.Generator().manual_seed(1)
    n = 11
    q = torch.randn(1, 4, n, 8, generator=g)
    k, v = torch.randn(1, 2, n, 8, generator=g), torch.randn(1, 2, n, 8, generator=g)
    cu = torch.tensor([0, 3, 4, 9, 11], dtype=torch.long)  # int64 from the caller: converted
    got = attention.packed_attention(q, k, v, cu, scaling=0.3)
    monkeypatch.undo()
    want = attention.packed_attention(q, k, v, cu.int(), scaling=0.3)  # the padded CPU path
    assert calls == [(n, 4, 8)] and got.shape == (1, n, 4, 8)
    assert torch.allclose(got, want, atol=1e-6)
    assert attention.packed_kernel(q) == "padded_sdpa"


def _shared_layout():
    """Two prompts (3 and 2 tokens) and three responses (2 and 1 tokens of prompt 0, 3 of prompt 1) in one row."""
    segments = {"p0": (0, 3), "p1": (3, 5), "r0": (5, 7), "r1": (7, 8), "r2": (8, 11)}
    owner = {"r0": "p0", "r1": "p0", "r2": "p1"}
    keys = [torch.arange(*segments["p0"]), torch.arange(*segments["p1"])]
    keys += [torch.cat([torch.arange(*segments[owner[r]]), torch.arange(*segments[r])]) for r in ("r0", "r1", "r2")]
    cu = torch.tensor([0, 3, 5, 7, 8, 11], dtype=torch.int32)
    cu_k = torch.tensor([0, *torch.tensor([len(k) for k in keys]).cumsum(0).tolist()], dtype=torch.int32)
    return segments, owner, (torch.cat(keys), cu_k), cu


def test_packed_attention_with_shared_prompts_equals_causal_attention_over_prompt_then_response():
    """A response segment's output equals plain causal attention over its [prompt | response] sequence, read at the
    response's rows; a prompt segment's equals causal attention over the prompt."""
    g = torch.Generator().manual_seed(2)
    n = 11
    q = torch.randn(1, 4, n, 8, generator=g)
    k, v = torch.randn(1, 2, n, 8, generator=g), torch.randn(1, 2, n, 8, generator=g)
    segments, owner, packed_kv, cu = _shared_layout()
    out = attention.packed_attention(q, k, v, cu, 0.3, packed_kv)  # [1, N, H, D]
    for name, (s, e) in segments.items():
        rows = torch.arange(s, e) if name in ("p0", "p1") else torch.cat([torch.arange(*segments[owner[name]]),
                                                                          torch.arange(s, e)])
        want = torch.nn.functional.scaled_dot_product_attention(
            q[:, :, rows], k[:, :, rows], v[:, :, rows], scale=0.3, is_causal=True, enable_gqa=True)
        assert torch.allclose(out[0, s:e], want[0, :, -(e - s):].transpose(0, 1), atol=1e-6), name
    kv_index, cu_k = packed_kv
    with pytest.raises(ValueError, match="key segment starts"):
        attention.packed_attention(q, k, v, cu, 0.3, (kv_index[:-1], cu_k))
    with pytest.raises(ValueError, match="more queries than keys"):
        attention.packed_attention(q, k, v, torch.tensor([0, 3, 5, 8, 8, 11], dtype=torch.int32), 0.3,
                                   (kv_index, torch.tensor([0, 3, 5, 7, 11, 19], dtype=torch.int32)))


def _per_segment_reference(q, k, v, cu, scaling, packed_kv=None):
    """``packed_attention``'s contract written out per segment: [1, N, H, D]."""
    bounds = cu.tolist()
    if packed_kv is None:
        return _causal_per_segment(q[0], k[0], v[0], bounds, bounds, scaling).unsqueeze(0)
    kv_index, cu_k = packed_kv
    return _causal_per_segment(q[0], k[0][:, kv_index], v[0][:, kv_index], bounds, cu_k.tolist(), scaling).unsqueeze(0)


@pytest.mark.parametrize("waste", [0, 8, float("inf")])
@pytest.mark.parametrize("shared", [False, True])
def test_padded_cpu_attention_equals_per_segment_attention_with_gradients(waste, shared, monkeypatch):
    """The CPU path gathers segments into padded batches (one per bucket of similar shapes; ``waste``, the padded
    slots a merge may add, 0 makes a bucket per shape, inf one bucket for all): outputs and the gradients of query, key
    and value equal per-segment attention, also for 1-query segments padded to long ones (their padded slots must not
    leak NaN into backward)."""
    monkeypatch.setattr(attention, "_BUCKET_CALL_AREA", waste)
    g = torch.Generator().manual_seed(5)
    if shared:  # prompts of 9 and 2 tokens; responses of 1, 6, 1 on prompt 0 and 4 on prompt 1
        p_lens, owners, r_lens = [9, 2], [0, 0, 0, 1], [1, 6, 1, 4]
        p_start = [0, 9]
        r_start = [11, 12, 18, 19]
        keys = [torch.arange(0, 9), torch.arange(9, 11)]
        keys += [torch.cat([torch.arange(p_start[o], p_start[o] + p_lens[o]), torch.arange(r, r + n)])
                 for o, r, n in zip(owners, r_start, r_lens)]
        cu = torch.tensor([0, 9, 11, 12, 18, 19, 23], dtype=torch.int32)
        packed_kv = (torch.cat(keys), torch.tensor([0, *torch.tensor([len(x) for x in keys]).cumsum(0).tolist()],
                                                  dtype=torch.int32))
    else:
        cu, packed_kv = torch.tensor([0, 1, 13, 15, 16, 23], dtype=torch.int32), None
    n = int(cu[-1])
    q = torch.randn(1, 4, n, 8, generator=g, requires_grad=True)
    k = torch.randn(1, 2, n, 8, generator=g, requires_grad=True)
    v = torch.randn(1, 2, n, 8, generator=g, requires_grad=True)
    w = torch.randn(1, n, 4, 8, generator=g)
    got = attention.packed_attention(q, k, v, cu, 0.3, packed_kv)
    got_grads = torch.autograd.grad((got * w).sum(), (q, k, v))
    want = _per_segment_reference(q, k, v, cu, 0.3, packed_kv)
    want_grads = torch.autograd.grad((want * w).sum(), (q, k, v))
    assert got.shape == (1, n, 4, 8) and got.is_contiguous()
    assert torch.allclose(got, want, atol=1e-6)
    for a, b in zip(got_grads, want_grads):
        assert torch.isfinite(a).all() and torch.allclose(a, b, atol=1e-5)
    layout = attention._last_layout[2]
    n_buckets = len(layout.buckets)
    assert (n_buckets == 1) if waste == float("inf") else (n_buckets > 1 or waste > 0)
    if waste == 0:  # no padding at all: a bucket per (queries, keys) shape
        qb = cu.tolist()
        kb = packed_kv[1].tolist() if shared else qb
        shapes = {(qb[i + 1] - qb[i], kb[i + 1] - kb[i]) for i in range(len(qb) - 1) if qb[i + 1] > qb[i]}
        assert n_buckets == len(shapes)


def test_padded_layout_is_built_once_per_forward_and_rebuilt_for_new_bounds(monkeypatch):
    """Every layer of a forward passes the same bound tensors: the layout is built on the first and reused; other
    bounds (or the same tensor changed in place) get a new one."""
    built = []
    g = torch.Generator().manual_seed(6)
    q, k, v = torch.randn(1, 4, 11, 8, generator=g), torch.randn(1, 2, 11, 8, generator=g), torch.randn(1, 2, 11, 8, generator=g)
    cu = torch.tensor([0, 3, 4, 9, 11], dtype=torch.int32)
    orig_bucket = attention._Bucket

    def counting_bucket(*args, **kw):
        built.append(args[0])
        return orig_bucket(*args, **kw)

    monkeypatch.setattr(attention, "_Bucket", counting_bucket)
    attention._last_layout.clear()
    first = attention.packed_attention(q, k, v, cu, 0.3)
    n_first = len(built)
    for _ in range(3):  # the other "layers"
        assert torch.equal(attention.packed_attention(q, k, v, cu, 0.3), first)
    assert n_first >= 1 and len(built) == n_first
    cu[1] = 2  # in place: a new version of the same tensor
    moved = attention.packed_attention(q, k, v, cu, 0.3)
    assert len(built) > n_first
    assert torch.allclose(moved, _per_segment_reference(q, k, v, cu, 0.3), atol=1e-6)


@pytest.mark.parametrize("with_gqa_arg", [True, False])
def test_packed_attention_feeds_the_varlen_kernel_the_shared_prompt_layout(with_gqa_arg, monkeypatch):
    """The CUDA branch with shared prompts: query and key bounds differ, the keys are gathered, and the stand-in
    applies flash attention's bottom-right causal alignment. GPU check: scripts/gpu_check.py packed_forward."""
    kernel, calls = _reference_varlen(with_gqa_arg)
    g = torch.Generator().manual_seed(3)
    n = 11
    q = torch.randn(1, 4, n, 8, generator=g)
    k, v = torch.randn(1, 2, n, 8, generator=g), torch.randn(1, 2, n, 8, generator=g)
    _, _, packed_kv, cu = _shared_layout()
    want = attention.packed_attention(q, k, v, cu, 0.3, packed_kv)  # the padded CPU path
    monkeypatch.setattr(attention, "_varlen_eligible", lambda t: True)
    monkeypatch.setattr(attention, "_varlen_kernel", lambda: kernel)
    got = attention.packed_attention(q, k, v, cu, 0.3, packed_kv)
    assert calls == [(n, 4, 8)] and torch.allclose(got, want, atol=1e-6)


def test_pack_shared_lays_out_each_prompt_once_with_the_padded_positions(tiny_vl_path):
    """Every token of the shared row has the (m)rope position the padded [prompt | response] sequence gives it; each
    prompt appears once; each response's keys are its prompt then itself; predictors point at the state before each
    response token."""
    from mmevo.models.inputs import pack_shared

    lm = load_model(tiny_vl_path)
    ps, rs = _batch(lm, True)
    rs = rs[:3] + [[]] + rs[4:]  # an empty response: no segment, no predictors
    pad = lm.tokenizer.pad_token_id
    sp = pack_shared(lm.model, ps, rs, pad, "cpu")
    tb = collate_for_training(lm.model, ps, rs, pad, "cpu")
    row = sp.packed.input_ids[0]
    p_lens = [len(ps[0].input_ids), len(ps[3].input_ids)]
    n_prompt = sum(p_lens)
    assert row.shape[0] == n_prompt + sum(len(r) for r in rs)
    assert row[:p_lens[0]].tolist() == ps[0].input_ids and row[p_lens[0]:n_prompt].tolist() == ps[3].input_ids
    kv_index, cu_k = sp.kv_index.tolist(), sp.cu_k.tolist()
    cu = sp.packed.cu_seqlens.tolist()
    assert cu == [0, p_lens[0], n_prompt, *[n_prompt + x for x in torch.tensor([3, 1, 5, 3]).cumsum(0).tolist()]]
    start = n_prompt
    seg = 2
    for i, (p, r) in enumerate(zip(ps, rs)):
        real = tb.batch.attention_mask[i].bool()
        padded_pos = tb.batch.position_ids[:, i, real]  # [3, len(prompt) + len(response)]
        p_at = 0 if p is ps[0] else p_lens[0]
        assert torch.equal(sp.packed.position_ids[:, 0, p_at:p_at + len(p.input_ids)], padded_pos[:, :len(p.input_ids)])
        if not r:
            assert (sp.predictors[i] == -1).all()
            continue
        assert row[start:start + len(r)].tolist() == r
        assert torch.equal(sp.packed.position_ids[:, 0, start:start + len(r)], padded_pos[:, len(p.input_ids):])
        assert kv_index[cu_k[seg]:cu_k[seg + 1]] == [*range(p_at, p_at + len(p.input_ids)), *range(start, start + len(r))]
        assert sp.predictors[i, :len(r)].tolist() == [p_at + len(p.input_ids) - 1, *range(start, start + len(r) - 1)]
        assert (sp.predictors[i, len(r):] == -1).all()
        start += len(r)
        seg += 1
    assert torch.equal(sp.packed.pixel_values, torch.cat([ps[0].pixel_values, ps[3].pixel_values]))
    kw = sp.model_kwargs()
    assert kw[attention.PACKED_KV_KWARG][1] is sp.cu_k and kw[attention.PACKED_KWARG] is sp.packed.cu_seqlens


def test_checkpointing_would_break_the_shared_prompt_path(tiny_vl_path):
    """The trap the fallback avoids: transformers drops the prompt's KV cache under checkpointing in train mode."""
    import mmevo.grpo.trainer as T

    lm = load_model(tiny_vl_path)
    randomize(lm.model, std=0.2, seed=4)
    ps, rs = _batch(lm, True)
    lm.model.train()
    ref = _logprobs_and_grads(lm, ps, rs)
    lm.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    hidden, ids, mask = T._shared_prefix_hidden(lm.model, ps, rs, lm.tokenizer.pad_token_id, "cpu")
    broken, _ = token_logprobs(lm.model.lm_head, hidden, ids, mask, 0.9)
    assert (broken * mask - ref[0]).abs().max() > 1e-2  # scored without the prompt: wrong


@pytest.mark.parametrize("chunk", [1, 3, 7])
def test_chunked_logprobs_entropy_and_gradients_equal_the_full_computation(chunk):
    g = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(16, 50, bias=False)
    hidden = torch.randn(3, 5, 16, generator=g, requires_grad=True)
    labels = torch.randint(0, 50, (3, 5), generator=g)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    out = []
    for c in (0, chunk):
        head.zero_grad()
        hidden.grad = None
        lp, en = token_logprobs(head, hidden, labels, mask, 0.7, c, with_entropy=True)
        ((lp * 1.3).sum() + (en * 0.4).sum()).backward()
        out.append((lp.detach(), en.detach(), hidden.grad.clone(), head.weight.grad.clone()))
    for a, b in zip(*out):
        assert torch.allclose(a, b, atol=1e-6)
    lp = out[0][0]
    assert (lp[mask == 0] == 0).all() and (lp[mask == 1] < 0).all()
    # the entropy as a metric only: same values, no gradient path
    lp2, en2 = token_logprobs(head, hidden, labels, mask, 0.7, chunk, with_entropy=True, entropy_grad=False)
    assert torch.allclose(en2, out[0][1], atol=1e-6) and not en2.requires_grad and lp2.requires_grad


def test_empty_responses_still_give_a_graph():
    head = torch.nn.Linear(4, 9)
    hidden = torch.randn(2, 1, 4, requires_grad=True)
    lp, en = token_logprobs(head, hidden, torch.zeros(2, 1, dtype=torch.long), torch.zeros(2, 1), 1.0, 2, True)
    assert lp.abs().sum() == 0 and lp.requires_grad
    (lp.sum() + 0).backward()  # no "does not require grad" error
