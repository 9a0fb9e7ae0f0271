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
