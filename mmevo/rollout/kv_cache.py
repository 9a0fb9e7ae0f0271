"""A KV cache for decoding that appends in place instead of re-concatenating the whole cache every step.

transformers' DynamicLayer grows with ``torch.cat`` on every decode step: each step copies the entire cache, so
decoding is quadratic in length and, with the hundreds of rows of a CSRS re-inference batch, that copy dominated
rollout time on CPU. This layer keeps a buffer with spare capacity (grown geometrically) and writes new K/V into it;
the attention reads a view of the filled part.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class GrowableLayer(DynamicLayer):
    """DynamicLayer with a preallocated buffer: ``keys`` / ``values`` are views of its first ``length`` positions."""

    min_capacity = 64

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._kbuf = self._vbuf = None
        self._len = 0

    def _ensure(self, key_states: torch.Tensor, value_states: torch.Tensor, needed: int) -> None:
        if self._kbuf is not None and self._kbuf.shape[-2] >= needed:
            return
        cap = max(self.min_capacity, needed, 2 * (self._kbuf.shape[-2] if self._kbuf is not None else 0))
        kbuf = key_states.new_empty(*key_states.shape[:-2], cap, key_states.shape[-1])
        vbuf = value_states.new_empty(*value_states.shape[:-2], cap, value_states.shape[-1])
        if self._len:
            kbuf[..., : self._len, :] = self._kbuf[..., : self._len, :]
            vbuf[..., : self._len, :] = self._vbuf[..., : self._len, :]
        self._kbuf, self._vbuf = kbuf, vbuf

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = self._len + key_states.shape[-2]
        self._ensure(key_states, value_states, n)
        self._kbuf[..., self._len:n, :] = key_states
        self._vbuf[..., self._len:n, :] = value_states
        self._len = n
        self.keys, self.values = self._kbuf[..., :n, :], self._vbuf[..., :n, :]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self._len if self.is_initialized else 0

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.get_seq_length() > 0:
            self._kbuf, self._vbuf = self._kbuf[indices], self._vbuf[indices]
            self.keys, self.values = self._kbuf[..., : self._len, :], self._vbuf[..., : self._len, :]

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.get_seq_length() > 0:
            self.batch_select_indices(torch.arange(self._kbuf.shape[0], device=self._kbuf.device).repeat_interleave(repeats))

    def reorder_cache(self, beam_idx: torch.Tensor) -> None:
        # the inherited one reorders the views only: the next update would write into the buffer's old row order
        self.batch_select_indices(beam_idx)

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("GrowableLayer is for rollout decoding only")

    def reset(self) -> None:
        self._kbuf = self._vbuf = None
        self._len = 0
        super().reset()


class DecodeCache(DynamicCache):
    """DynamicCache made of GrowableLayers (no gradients: rollout decoding only)."""

    def __init__(self):
        super().__init__()
        self.layers = []
        self.layer_class_to_replicate = GrowableLayer


class SharedPrefixCache(DecodeCache):
    """Decode cache for rows that share prefixes (a prompt's n samples, an anchor's m re-inferences).

    Each distinct prefix's keys / values are kept once (``[R, KV, W, D]`` per layer, left padded, ``prefix_mask``
    [R, W] marks real tokens) and each row's own decoded tokens in a growing layer (``[N, KV, t, D]``, no padding:
    every live row has decoded the same number of tokens, finished rows leave the batch). ``row_of`` [N] maps rows
    to prefixes. Repeating the prefix for each row instead would have every decode step read it n times: the decode
    attention is bound by memory traffic, and on CPU that read was the largest single cost of sampling.

    The attention reads the prefix through ``mmevo.models.attention.shared_prefix_attention`` (the cache itself goes
    into the forward's kwargs); ``get_seq_length`` counts the rows' own tokens only, so no attention mask may be
    passed to the forward.
    """

    def __init__(self, prefill: DynamicCache, prefix_mask: torch.Tensor, row_of: torch.Tensor):
        super().__init__()
        self.prefix_keys = [layer.keys.contiguous() for layer in prefill.layers]  # [R, KV, W, D] per layer
        self.prefix_values = [layer.values.contiguous() for layer in prefill.layers]
        self.prefix_mask = prefix_mask.bool()  # [R, W]
        keys = self.prefix_keys[0]
        # [R, 1, 1, W] added to each prefix's scores: 0 on its real tokens, -inf on padding
        self.prefix_bias = torch.zeros(self.prefix_mask.shape, dtype=keys.dtype, device=keys.device).masked_fill(
            ~self.prefix_mask, float("-inf"))[:, None, None, :]
        self._set_rows(row_of)

    def _set_rows(self, row_of: torch.Tensor) -> None:
        """Index the rows by prefix: row i is slot ``slot[i]`` of the ``width`` slots of prefix ``row_of[i]``, so
        that the queries of one prefix's rows can sit side by side in one matmul against its keys. ``flat_slot``
        (row -> prefix * width + slot) is None when that is the identity (every prefix has ``width`` rows, in order,
        as before any row finishes)."""
        n_prefixes = self.prefix_mask.shape[0]
        counts = torch.bincount(row_of, minlength=n_prefixes)
        order = torch.argsort(row_of, stable=True)
        slot = torch.empty_like(row_of)
        slot[order] = torch.arange(row_of.numel(), device=row_of.device) - (counts.cumsum(0) - counts)[row_of[order]]
        self.row_of = row_of  # [N]
        self.width = int(counts.max()) if row_of.numel() else 0  # most rows on one prefix
        flat = row_of * self.width + slot
        identity = flat.numel() == n_prefixes * self.width and bool(
            (flat == torch.arange(flat.numel(), device=flat.device)).all())
        self.flat_slot = None if identity else flat

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        super().batch_select_indices(indices)  # the rows' own tokens
        self._set_rows(self.row_of[indices])

    # the other row selections of transformers' Cache go through batch_select_indices: rows keep their prefixes
    def batch_repeat_interleave(self, repeats: int) -> None:
        rows = torch.arange(self.row_of.numel(), device=self.row_of.device)
        self.batch_select_indices(rows.repeat_interleave(repeats))

    def reorder_cache(self, beam_idx: torch.Tensor) -> None:
        self.batch_select_indices(beam_idx.to(self.row_of.device))

    def row_kv(self, layer_idx: int, row: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Row ``row``'s real keys / values in order, prefix then own tokens: ([KV, n, D], [KV, n, D])."""
        p = int(self.row_of[row])
        real = self.prefix_mask[p]
        keys = [self.prefix_keys[layer_idx][p][:, real]]
        values = [self.prefix_values[layer_idx][p][:, real]]
        if layer_idx < len(self.layers) and self.layers[layer_idx].get_seq_length() > 0:
            keys.append(self.layers[layer_idx].keys[row])
            values.append(self.layers[layer_idx].values[row])
        return torch.cat(keys, 1), torch.cat(values, 1)
