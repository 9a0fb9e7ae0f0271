"""mmevo's attention function: grouped-query attention under padding masks on CPU, and packed (padding-free)
sequences on every device.

Registered with transformers' ``AttentionInterface`` as "sdpa_gqa" and selected by the loader whenever the checkpoint
would use "sdpa":
- **CPU, padded batches.** transformers' "sdpa" path repeats the K/V heads (a full copy of the KV cache per layer and
  decode step) whenever an attention mask is present, because CUDA's fused kernels cannot take both. PyTorch's CPU
  kernel can (``enable_gqa=True`` with ``attn_mask``), which is about 3x faster on the rollout decode path.
- **CUDA, padded batches.** transformers' own "sdpa" function, unchanged.
- **Packed batches** (``PACKED_KWARG`` in the forward's kwargs, see ``mmevo.models.inputs.pack``): the real tokens of
  several sequences back to back in one row, each attending causally to its own sequence only. On CUDA in half
  precision this is PyTorch's variable-length flash attention (``torch.nn.attention.varlen.varlen_attn``): no padding
  and no [N, N] mask exist. Elsewhere the sequences are gathered into a few padded batches of similar shape
  (``_padded_layout``, built once per forward) with one masked SDPA call each: padding exists only inside attention,
  the projections and MLPs still run on the real tokens alone. One call per sequence instead costs a kernel launch,
  a mask and, in backward, a full-row gradient buffer per sequence (the CPU GRPO bench's update at 64
  sequences per micro-batch took 0.78-0.88 s that way, 0.51-0.55 s padded).
- **Packed batches with shared prompts** (also ``PACKED_KV_KWARG``, see ``mmevo.models.inputs.pack_shared``): each
  distinct prompt once, then every response, in one row; a response's segment attends to its prompt's keys followed
  by its own (gathered by index), causally aligned at the bottom right (query t of an r-token response over p + r
  keys sees keys 0 .. p + t). Flash attention's causal mask has exactly that alignment when a segment has fewer
  queries than keys (torch's own ``causal_lower_right`` dispatches to it for this reason).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from dataclasses import dataclass

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "sdpa_gqa"
# forward kwarg carrying a packed batch's sequence starts: int32 [S + 1] (cumulative lengths, 0 first), on the CPU
PACKED_KWARG = "mmevo_cu_seqlens"
# forward kwarg of a packed batch whose segments attend to keys elsewhere in the row (shared prompts): a pair
# (row position of each segment's keys, long [N_k] on the model's device; their segment starts, int32 [S + 1], CPU)
PACKED_KV_KWARG = "mmevo_packed_kv"
# forward kwarg of a decode step whose rows share prefixes: the ``mmevo.rollout.kv_cache.SharedPrefixCache``, which
# holds each distinct prefix's keys / values once
SHARED_PREFIX_KWARG = "mmevo_shared_prefix"


def sdpa_gqa_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                       attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                       is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """query [B, H, q, D], key/value [B, KV, k, D] -> output [B, q, H, D] (the layout transformers expects)."""
    cu_seqlens = kwargs.pop(PACKED_KWARG, None)
    packed_kv = kwargs.pop(PACKED_KV_KWARG, None)
    shared_prefix = kwargs.pop(SHARED_PREFIX_KWARG, None)
    if (cu_seqlens is not None or shared_prefix is not None) and kwargs.get("sliding_window") and getattr(
            module, "is_causal", False):
        raise NotImplementedError("packed rows and shared-prefix decoding have no sliding window (see "
                                  "supports_packing): this layer would attend past its window")
    if shared_prefix is not None and getattr(module, "is_causal", False):
        if attention_mask is not None:
            raise ValueError("shared-prefix decoding takes no attention mask (the prefix mask is in the cache)")
        return shared_prefix_attention(query, key, value, shared_prefix, module.layer_idx, scaling), None
    # transformers passes forward kwargs to every attention call, the vision encoder's too: packing describes the
    # language model's rows, whose (causal) self-attention is the only one it applies to
    if cu_seqlens is not None and getattr(module, "is_causal", False):
        if dropout and module.training:
            raise NotImplementedError("packed attention has no dropout; set trainer.padding_free=false")
        return packed_attention(query, key, value, cu_seqlens, scaling, packed_kv), None
    if query.is_cuda:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    groups = getattr(module, "num_key_value_groups", 1)
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    is_causal = bool(query.shape[2] > 1 and attention_mask is None and is_causal)
    mask = attention_mask[:, :, :, : key.shape[-2]] if attention_mask is not None else None
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, dropout_p=dropout if module.training else 0.0, scale=scaling,
        is_causal=is_causal, enable_gqa=groups > 1)
    return out.transpose(1, 2).contiguous(), None


def packed_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu_seqlens: torch.Tensor,
                     scaling: float | None = None,
                     packed_kv: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """Causal attention within each packed segment. query [1, H, N, D], key/value [1, KV, N, D], cu_seqlens [S + 1]
    (segment starts in the row) -> [1, N, H, D].

    Without ``packed_kv`` segment s attends to its own keys. With ``packed_kv = (kv_index, cu_k)`` its keys are
    ``key[..., kv_index[cu_k[s]:cu_k[s + 1]]]`` (at least as many as it has queries), and its last query sees all
    of them: causal aligned at the bottom right, as flash attention aligns a segment with fewer queries than keys."""
    if query.shape[0] != 1 or key.shape[2] != query.shape[2]:
        raise ValueError(f"packed attention takes one row of N queries over the same N keys (no KV cache); got query "
                         f"{tuple(query.shape)}, key {tuple(key.shape)}")
    n = query.shape[2]
    bounds = cu_seqlens.tolist()  # host ints (inputs.pack keeps the bounds on the CPU: no device sync per layer)
    if bounds[0] != 0 or bounds[-1] != n:
        raise ValueError(f"packed attention: sequence starts {bounds} do not cover the {n} tokens")
    k_bounds = bounds
    if packed_kv is not None:
        kv_index, cu_k = packed_kv
        k_bounds = cu_k.tolist()
        if len(k_bounds) != len(bounds) or k_bounds[0] != 0 or k_bounds[-1] != kv_index.numel():
            raise ValueError(f"packed attention: key segment starts {k_bounds} do not match {len(bounds) - 1} query "
                             f"segments over {kv_index.numel()} gathered keys")
    spans = [(s, e, ks, ke) for s, e, ks, ke in zip(bounds[:-1], bounds[1:], k_bounds[:-1], k_bounds[1:])]
    if any(e < s or ke < ks for s, e, ks, ke in spans):  # a decreasing start would leave some queries unattended
        raise ValueError(f"packed attention: segment starts must not decrease; got {bounds} (keys {k_bounds})")
    if any(e - s > ke - ks for s, e, ks, ke in spans):
        raise ValueError("packed attention: a segment has more queries than keys")
    if n == 0:  # no tokens: nothing to attend (the varlen kernel's max over no segments would raise)
        return query.transpose(1, 2)  # [1, 0, H, D]
    gqa = query.shape[1] != key.shape[1]
    varlen = _varlen_kernel() if _varlen_eligible(query) and _varlen_head_dim_ok(query.shape[-1]) else None
    if varlen is not None:
        if packed_kv is not None:
            key, value = key[:, :, packed_kv[0]], value[:, :, packed_kv[0]]  # [1, KV, N_k, D]
        cu_q = cu_seqlens.to(device=query.device, dtype=torch.int32)
        cu_k = cu_q if packed_kv is None else packed_kv[1].to(device=query.device, dtype=torch.int32)
        max_q = max(e - s for s, e, _, _ in spans)
        max_k = max(ke - ks for _, _, ks, ke in spans)
        if gqa and not _takes_gqa(varlen):  # builds without enable_gqa take as many K/V heads as query heads
            key, value = (t.repeat_interleave(query.shape[1] // key.shape[1], dim=1) for t in (key, value))
        q, k, v = (t[0].transpose(0, 1).contiguous() for t in (query, key, value))  # [N, heads, D]
        extra = {"enable_gqa": True} if gqa and _takes_gqa(varlen) else {}
        # (-1, 0): causal, bottom-right aligned where a segment has fewer queries than keys
        out = varlen(q, k, v, cu_q, cu_k, max_q, max_k, scale=scaling, window_size=(-1, 0), **extra)
        return out.unsqueeze(0)
    layout = _padded_layout(cu_seqlens, packed_kv, spans, query.device)
    q_rows = query[0].transpose(0, 1)  # [N, H, D]
    k_rows, v_rows = key[0].transpose(0, 1), value[0].transpose(0, 1)  # [N, KV, D] (ungathered: the layout indexes)
    outs = []
    for b in layout.buckets:
        segs, lq, lk = b.size
        # [segs, heads, L, D] views of one gather each: the backward is one index_add per tensor, not one per segment
        q = q_rows.index_select(0, b.q_index).view(segs, lq, -1, q_rows.shape[-1]).transpose(1, 2)
        k = k_rows.index_select(0, b.k_index).view(segs, lk, -1, k_rows.shape[-1]).transpose(1, 2)
        v = v_rows.index_select(0, b.k_index).view(segs, lk, -1, v_rows.shape[-1]).transpose(1, 2)
        # a bucket of self-attending segments is plain causal attention: is_causal skips the masked half
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=b.mask, scale=scaling, is_causal=b.mask is None, enable_gqa=gqa)  # [segs, H, lq, D]
        outs.append(out.transpose(1, 2).reshape(segs * lq, out.shape[1], out.shape[3]))  # [segs * lq, H, D]
    flat = outs[0] if len(outs) == 1 else torch.cat(outs)
    return flat.index_select(0, layout.out_index).unsqueeze(0)  # [1, N, H, D]


@dataclass(frozen=True)
class _Bucket:
    """Segments of a packed row as one padded batch (slots past a segment's end read some real row; masked out)."""

    size: tuple[int, int, int]  # (segments n, query slots lq, key slots lk)
    q_index: torch.Tensor  # [n * lq] row position of each query slot
    k_index: torch.Tensor  # [n * lk] row position of each key slot
    # [n, 1, lq, lk] bool: key j visible to query i (causal, aligned at the bottom right); None where every segment
    # attends to itself (as many keys as queries, padded at the end): then plain causal attention is the same, as a
    # real query never reaches its segment's padding and a padded query's output is never read
    mask: torch.Tensor | None


@dataclass(frozen=True)
class _PaddedLayout:
    buckets: tuple[_Bucket, ...]
    out_index: torch.Tensor  # [N] slot of each row position in the buckets' concatenated query slots


# The layout of the last packed row: every layer of a forward (and a checkpointed layer's recompute) gets the same
# bound tensors, so it is built once per forward, not once per layer. Keyed by the identity and in-place version of
# every tensor it is built from (the query starts, and with shared prompts the key index and the key starts); the
# entry holds them, so an id cannot be reused while it is cached.
_last_layout: list = []
# a bucket takes the next (shorter) shape's segments when that adds at most this many padded query x key slots over
# running them in a bucket of their own: attention on padding is wasted, but every extra bucket is another kernel call,
# gather and mask. ~8k slots is about one call's fixed cost at the tiny models' 4 x 32 heads (CPU GRPO bench: an
# absolute bound took the update from 0.38 s to 0.35 s; the relative one before it, padded area <= 1.5x the real
# area, padded a group's 64-token responses to their 94-token prompt's length)
_BUCKET_CALL_AREA = 8192


def _padded_layout(cu_seqlens: torch.Tensor, packed_kv, spans: list[tuple[int, int, int, int]],
                   device: torch.device) -> _PaddedLayout:
    """The segments of a packed row grouped into padded batches of similar shape (cached for the forward).

    ``spans``: (query start, end, key start, end) per segment; key positions are row positions, or positions in
    ``packed_kv``'s gathered key index. A segment with q queries over k keys lets query i see keys 0 .. k - q + i."""
    bound = (cu_seqlens,) if packed_kv is None else (cu_seqlens, *packed_kv)  # everything the layout is built from
    kv_index = None if packed_kv is None else packed_kv[0]
    key = (tuple((id(t), t._version) for t in bound), device)
    if _last_layout and _last_layout[0] == key:
        return _last_layout[2]
    # segments of one (keys, queries) shape always share a bucket (no padding); shapes are taken longest keys first
    # (a bucket's key width is its first segment's) and a shape's segments join the last bucket together when that
    # adds at most _BUCKET_CALL_AREA padded query x key slots over a bucket of their own
    shapes: dict[tuple[int, int], list] = {}
    for sp in spans:
        if sp[1] > sp[0]:
            shapes.setdefault((sp[3] - sp[2], sp[1] - sp[0]), []).append(sp)
    groups: list[list] = []  # [segments, widest query count, key width]
    for (k, q), members in sorted(shapes.items(), reverse=True):
        if groups:
            g = groups[-1]
            n, m, lq = len(g[0]), len(members), max(g[1], q)
            if (n + m) * lq * g[2] - n * g[1] * g[2] - m * q * k <= _BUCKET_CALL_AREA:
                g[0].extend(members)
                g[1] = lq
                continue
        groups.append([list(members), q, k])
    n_rows = spans[-1][1] if spans else 0
    rows_of_keys = torch.arange(n_rows) if kv_index is None else kv_index.cpu()
    out_index = torch.empty(n_rows, dtype=torch.long)
    buckets, base = [], 0
    for segments, lq, lk in groups:
        n = len(segments)
        s, e, ks, ke = (torch.tensor(col, dtype=torch.long) for col in zip(*segments))  # [n] each
        q_len, k_len = e - s, ke - ks
        tq, tk = torch.arange(lq)[None], torch.arange(lk)[None]
        q_real, k_real = tq < q_len[:, None], tk < k_len[:, None]  # [n, lq], [n, lk]
        # padded slots read some real row: a padded key is masked, a padded query's output is never read
        q_index = torch.where(q_real, s[:, None] + tq, 0)
        k_index = rows_of_keys[torch.where(k_real, ks[:, None] + tk, 0)]
        out_index[q_index[q_real]] = base + (torch.arange(n)[:, None] * lq + tq)[q_real]
        # query i of a q-query segment over k keys sees keys 0 .. k - q + i, which never reaches the key padding;
        # padded query slots (i >= q) see at least all their segment's keys, so no row is fully masked (their
        # outputs are never read)
        mask = None
        if not bool((q_len == k_len).all()):
            mask = tk[:, None] <= tq[..., None] + (k_len - q_len)[:, None, None]  # [n, lq, lk]
            mask = mask.unsqueeze(1).to(device)
        buckets.append(_Bucket((n, lq, lk), q_index.flatten().to(device), k_index.flatten().to(device), mask))
        base += n * lq
    layout = _PaddedLayout(tuple(buckets), out_index.to(device))
    _last_layout[:] = [key, bound, layout]
    return layout


def shared_prefix_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cache, layer_idx: int,
                            scaling: float | None = None) -> torch.Tensor:
    """Attention of N rows over their shared prefix's keys followed by their own. query [N, H, s, D]; key / value
    [N, KV, t, D], each row's own tokens (the last s are the queries'), causal; ``cache`` a ``SharedPrefixCache``
    (prefix keys / values [R, KV, W, D], ``prefix_mask`` [R, W], ``row_of`` [N]) -> [N, s, H, D].

    One softmax over [prefix | own] keys per row, but the prefix half of the scores and of the output is one matmul
    per distinct prefix, with the queries of all its rows side by side: each prefix's keys are read once, not once
    per row (cascade attention)."""
    N, H, s, D = query.shape
    prefix_k, prefix_v = cache.prefix_keys[layer_idx], cache.prefix_values[layer_idx]
    R, KV, W, _ = prefix_k.shape
    t, g, C = key.shape[2], H // KV, cache.width
    flat = cache.flat_slot  # None: rows already sit prefix by prefix, C each
    # head h reads K/V head h // g: each K/V head's queries (g heads x s positions) as one block of rows
    q = (query * (D ** -0.5 if scaling is None else scaling)).reshape(N, KV, g * s, D)

    def to_prefixes(x: torch.Tensor) -> torch.Tensor:  # [N, KV, g*s, X] -> [R, KV, C*g*s, X] (empty slots zero)
        if flat is not None:
            x = x.new_zeros((R * C,) + x.shape[1:]).index_copy_(0, flat, x)
        return x.reshape(R, C, KV, g * s, -1).transpose(1, 2).reshape(R, KV, C * g * s, x.shape[-1])

    def to_rows(x: torch.Tensor) -> torch.Tensor:  # [R, KV, C*g*s, X] -> [N, KV, g*s, X]
        x = x.view(R, KV, C, g * s, -1).transpose(1, 2).reshape(R * C, KV, g * s, x.shape[-1])
        return x if flat is None else x.index_select(0, flat)

    prefix_scores = to_rows(to_prefixes(q) @ prefix_k.transpose(-1, -2) + cache.prefix_bias)  # [N, KV, g*s, W]
    own_scores = q @ key.transpose(-1, -2)  # [N, KV, g*s, t]
    if s > 1:  # query i of the last s sees own keys 0 .. t - s + i
        causal = torch.ones(s, t, dtype=torch.bool, device=query.device).tril(t - s).repeat(g, 1)
        own_scores = own_scores.masked_fill(~causal, float("-inf"))
    # softmax in at least float32 (half-precision scores are upcast; float64 stays float64)
    scores = torch.cat([prefix_scores, own_scores], -1)
    probs = torch.softmax(scores.to(torch.promote_types(scores.dtype, torch.float32)), -1).to(query.dtype)
    out = to_rows(to_prefixes(probs[..., :W]) @ prefix_v) + probs[..., W:] @ value  # [N, KV, g*s, D]
    return out.reshape(N, H, s, D).transpose(1, 2).contiguous()


def supports_packing(model: torch.nn.Module) -> bool:
    """Whether ``model``'s language model attends through this module (only then are packed rows kept apart; another
    attention function would let every token of a packed row see the sequences before it)."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    if getattr(config, "_attn_implementation", None) != NAME:
        return False
    # packed rows and shared prefixes attend to every earlier key of their sequence: a sliding-window layer (which
    # transformers' masks restrict to its last ``sliding_window`` keys) keeps the padded forward and repeated caches
    return not any(getattr(m, "sliding_window", None) for m in model.modules() if getattr(m, "is_causal", False))


def packed_kernel(like: torch.Tensor) -> str:
    """Which kernel packed rows of ``like``'s device and dtype take: "varlen_attn" or "padded_sdpa"."""
    return "varlen_attn" if _varlen_eligible(like) and _varlen_kernel() is not None else "padded_sdpa"


# torch's flash kernel (``aten._flash_attention_forward`` / ``_backward``, which ``varlen_attn`` calls directly): GPUs
# sm80 .. sm121 (torch 2.14: "Flash attention only supports gpu architectures in the range [sm80, sm121]",
# "FlashAttention only supports Ampere GPUs or newer."), and a head size that is a multiple of 8, at most 256 -- the
# padding to a multiple of 8 is done by scaled_dot_product_attention's front end, which varlen_attn bypasses
_FLASH_ARCHS = ((8, 0), (12, 1))
_FLASH_MAX_HEAD_DIM = 256


def _varlen_eligible(t: torch.Tensor) -> bool:
    """Flash attention's varlen kernel runs on CUDA in half precision only, on the GPUs it was built for (Ampere
    to Blackwell); elsewhere (a T4 or V100 in float16) packed rows take the padded SDPA batches."""
    if not (t.is_cuda and t.dtype in (torch.float16, torch.bfloat16)):
        return False
    return _FLASH_ARCHS[0] <= tuple(torch.cuda.get_device_capability(t.device)) <= _FLASH_ARCHS[1]


def _varlen_head_dim_ok(head_dim: int) -> bool:
    """Whether flash attention takes heads of ``head_dim`` without padding (a multiple of 8, at most 256)."""
    return head_dim % 8 == 0 and head_dim <= _FLASH_MAX_HEAD_DIM


@functools.cache
def _varlen_kernel():
    """PyTorch's variable-length flash attention (``torch.nn.attention.varlen``, CUDA, half precision), or None on
    builds without it (packed rows then take the padded SDPA batches)."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        warnings.warn("this torch build has no torch.nn.attention.varlen: packed sequences are attended as padded "
                      "SDPA batches (exact, slower); trainer.padding_free=false keeps padded batches")
        return None
    if not _takes_scale_and_window(varlen_attn):
        # torch 2.10's varlen_attn(..., is_causal, return_aux) has neither: the call below would raise a TypeError
        # in every packed forward on a GPU
        warnings.warn("this torch build's varlen_attn takes no scale / window_size (torch < 2.11): packed sequences "
                      "are attended as padded SDPA batches (exact, slower)")
        return None
    return varlen_attn


def _takes_scale_and_window(kernel) -> bool:
    """Whether ``kernel`` takes the ``scale`` and ``window_size`` keywords ``packed_attention`` passes (torch >= 2.11;
    torch 2.11-2.14 read causality from ``window_size == (-1, 0)``, so the tuple matters, not only the keyword)."""
    params = inspect.signature(kernel).parameters
    return "scale" in params and "window_size" in params


@functools.cache
def _takes_gqa(kernel) -> bool:
    """torch 2.12+'s varlen_attn takes ``enable_gqa``; 2.11's does not (K/V heads are then repeated)."""
    return "enable_gqa" in inspect.signature(kernel).parameters


AttentionInterface.register(NAME, sdpa_gqa_attention)
AttentionMaskInterface.register(NAME, sdpa_mask)  # same (boolean, causal-skip) masks as "sdpa"
