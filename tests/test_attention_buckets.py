"""How CPU packed attention groups a packed row's segments into padded SDPA batches (``attention._padded_layout``).

A bucket is one SDPA call over ``n`` segments padded to its widest query count and its first segment's key count.
Padding costs attention on slots nobody reads, a bucket costs one call: a segment joins the last bucket only when that
adds at most ``_BUCKET_CALL_AREA`` padded query x key slots over running it alone."""

import pytest
import torch

from mmevo.models import attention


def _shared_layout(prompt_lens, group, response_len):
    """The packed row of ``pack_shared``: every prompt once, then ``group`` responses of ``response_len`` tokens per
    prompt, each attending to its prompt's keys and its own. Returns the layout's buckets as (n, lq, lk) sizes."""
    starts, pos = [], 0
    for p in prompt_lens:
        starts.append(pos)
        pos += p
    keys = [torch.arange(s, s + p) for p, s in zip(prompt_lens, starts)]  # a prompt attends to itself
    bounds = [0] + [sum(prompt_lens[:i + 1]) for i in range(len(prompt_lens))]
    for p, s in zip(prompt_lens, starts):
        for _ in range(group):
            keys.append(torch.cat([torch.arange(s, s + p), torch.arange(pos, pos + response_len)]))
            pos += response_len
            bounds.append(pos)
    kv_index = torch.cat(keys)
    cu_k = torch.tensor([0, *torch.tensor([len(k) for k in keys]).cumsum(0).tolist()], dtype=torch.int32)
    cu = torch.tensor(bounds, dtype=torch.int32)
    spans = list(zip(bounds[:-1], bounds[1:], cu_k.tolist()[:-1], cu_k.tolist()[1:]))
    layout = attention._padded_layout(cu, (kv_index, cu_k), spans, torch.device("cpu"))
    return sorted(b.size for b in layout.buckets)


@pytest.mark.parametrize("prompts, want", [([94, 92], [(2, 94, 94), (16, 64, 158)]),
                                           ([74, 71], [(2, 74, 74), (16, 64, 138)])])
def test_a_prompt_is_not_padded_into_its_responses_bucket(prompts, want):
    """Two of the CPU GRPO bench's micro-batches: two prompts, 8 responses of 64 tokens each. The old relative rule
    (padded area <= 1.5x real) put a prompt into the responses' bucket ((17, 94, 158) and (18, 74, 138)), padding all
    16 responses from 64 queries to the prompt's length (a third of that call's attention on padding). Now the prompts
    run as one causal bucket and the responses as another (their key widths differ by 2 or 3: 1,024 / 1,536 padded
    slots)."""
    assert _shared_layout(prompts, 8, 64) == want


def test_far_apart_key_widths_get_their_own_buckets():
    """Responses over 94 + 64 and 20 + 64 keys: padding the second group's keys to 158 would add 8 x 64 x 74 slots,
    more than a call costs, so the groups stay apart; so do the 94-token prompt and the 84-key responses (padding
    them to 94 x 94 would add 27,680 slots). The 20-token prompt joins the 84-key responses (4,976 slots)."""
    assert _shared_layout([94, 20], 8, 64) == [(1, 94, 94), (8, 64, 158), (9, 64, 84)]


@pytest.mark.parametrize("call_area", [0, float("inf")])
def test_call_area_bounds_pick_one_bucket_per_shape_or_one_in_all(call_area, monkeypatch):
    monkeypatch.setattr(attention, "_BUCKET_CALL_AREA", call_area)
    sizes = _shared_layout([94, 84, 84], 2, 64)
    if call_area == 0:  # only equal shapes merge: prompts of 94 / 84 and responses over 158 / 148 keys
        assert sizes == [(1, 94, 94), (2, 64, 158), (2, 84, 84), (4, 64, 148)]
    else:
        assert sizes == [(9, 94, 158)]


def _per_segment_attention(q, k, v, bounds, kv_index, k_bounds):
    """One bottom-right-aligned causal SDPA per segment over its gathered keys: [1, N, H, D]."""
    outs = []
    for s, e, ks, ke in zip(bounds[:-1], bounds[1:], k_bounds[:-1], k_bounds[1:]):
        idx = kv_index[ks:ke]
        mask = torch.ones(e - s, ke - ks, dtype=torch.bool).tril(ke - ks - (e - s))
        outs.append(torch.nn.functional.scaled_dot_product_attention(q[:, :, s:e], k[:, :, idx], v[:, :, idx],
                                                                     attn_mask=mask).transpose(1, 2))
    return torch.cat(outs, 1)


def test_the_cached_layout_follows_the_key_starts_too():
    """The layout is cached per forward and depends on the key segment starts as much as on the key index: the same
    key index split at other starts (a new tensor, or the same one edited in place) attends over the new segments.
    Keyed by the query starts and key index alone, the second call reused the first layout (off by up to 0.9)."""
    torch.manual_seed(0)
    # two prompts (3 and 2 tokens), then one 2-token response to each
    cu = torch.tensor([0, 3, 5, 7, 9], dtype=torch.int32)
    q, k, v = (torch.randn(1, 2, 9, 4, dtype=torch.float64) for _ in range(3))
    kv_index = torch.tensor([0, 1, 2, 3, 4, 0, 1, 2, 5, 6, 3, 4, 7, 8])
    first = torch.tensor([0, 3, 5, 10, 14], dtype=torch.int32)  # response 1 over prompt 1, response 2 over prompt 2
    other = torch.tensor([0, 3, 5, 9, 14], dtype=torch.int32)  # the same index split one key earlier
    attention.packed_attention(q, k, v, cu, None, (kv_index, first))
    got = attention.packed_attention(q, k, v, cu, None, (kv_index, other))
    assert torch.allclose(got, _per_segment_attention(q, k, v, cu.tolist(), kv_index, other.tolist()), atol=1e-12)
    first[3] = 9  # in place: now the same starts as ``other``
    got = attention.packed_attention(q, k, v, cu, None, (kv_index, first))
    assert torch.allclose(got, _per_segment_attention(q, k, v, cu.tolist(), kv_index, first.tolist()), atol=1e-12)


def _random_row(gen):
    """A packed row of random segment lengths (empty and one-token ones included), self-attending or as
    ``pack_shared`` lays it out (prompts, then responses over their prompt's keys and their own). Returns the query
    starts, the key index and the key starts (lists)."""
    pick = lambda options: options[int(torch.randint(len(options), (1,), generator=gen))]  # noqa: E731
    if int(torch.randint(2, (1,), generator=gen)):
        lengths = [pick([0, 1, 2, 5, 17, 40, 90]) for _ in range(pick([1, 3, 8]))]
        bounds = [0, *torch.tensor(lengths).cumsum(0).tolist()]
        return bounds, list(range(bounds[-1])), bounds
    prompts = [pick([1, 3, 30, 70]) for _ in range(pick([1, 2, 3]))]
    starts = [0, *torch.tensor(prompts).cumsum(0).tolist()]
    bounds, keys = list(starts), [list(range(s, e)) for s, e in zip(starts[:-1], starts[1:])]
    for _ in range(pick([1, 4, 8])):
        p, r = pick(range(len(prompts))), pick([0, 1, 2, 9, 40])
        keys.append(list(range(starts[p], starts[p + 1])) + list(range(bounds[-1], bounds[-1] + r)))
        bounds.append(bounds[-1] + r)
    return bounds, [i for k in keys for i in k], [0, *torch.tensor([len(k) for k in keys]).cumsum(0).tolist()]


def test_random_segment_mixes_equal_per_segment_attention_in_values_and_gradients():
    """Packed rows of random mixes (empty and one-token segments, shared prompts with more keys than queries, with
    and without grouped K/V heads, several buckets or one) against one causal SDPA per segment, float64: outputs and
    the gradients of q, k and v agree to 1e-12."""
    gen = torch.Generator().manual_seed(0)
    for trial in range(40):
        bounds, kv_index, k_bounds = _random_row(gen)
        heads, kv_heads = [(4, 4), (4, 2), (6, 1)][trial % 3]
        n = bounds[-1]
        q = torch.randn(1, heads, n, 8, dtype=torch.float64, generator=gen).requires_grad_()
        k, v = (torch.randn(1, kv_heads, n, 8, dtype=torch.float64, generator=gen).requires_grad_() for _ in range(2))
        index = torch.tensor(kv_index, dtype=torch.long)
        packed_kv = None if k_bounds is bounds else (index, torch.tensor(k_bounds, dtype=torch.int32))
        got = attention.packed_attention(q, k, v, torch.tensor(bounds, dtype=torch.int32), None, packed_kv)
        if not n:
            assert got.shape == (1, 0, heads, 8)
            continue
        g = kv_heads != heads and heads // kv_heads
        kk, vv = (t.repeat_interleave(g, 1) if g else t for t in (k, v))
        want = _per_segment_attention(q, kk, vv, bounds, index, k_bounds)
        assert torch.allclose(got, want, atol=1e-12), (trial, bounds, k_bounds)
        w = torch.randn(got.shape, dtype=torch.float64, generator=gen)
        grads = zip(torch.autograd.grad((got * w).sum(), (q, k, v)), torch.autograd.grad((want * w).sum(), (q, k, v)))
        assert all(torch.allclose(a, b, atol=1e-12) for a, b in grads), (trial, bounds, k_bounds)
