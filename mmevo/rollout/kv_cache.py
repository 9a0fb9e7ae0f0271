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
