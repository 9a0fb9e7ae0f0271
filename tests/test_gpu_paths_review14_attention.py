"""Review 14 of the packed-attention kernel choice, pinned on CPU against torch 2.14's flash kernel limits.

``torch.nn.attention.varlen.varlen_attn`` (torch 2.14) calls ``aten._flash_attention_forward`` / ``_backward``
directly. Those refuse GPUs outside sm80 .. sm121 ("Flash attention only supports gpu architectures in the range
[sm80, sm121]", "FlashAttention only supports Ampere GPUs or newer.") and head sizes that are not a multiple of 8
("head_size_og should be a multiple of 8, this is ensured by padding!": the padding is done by
scaled_dot_product_attention's front end, which varlen_attn bypasses) or above 256. mmevo took the varlen path on
any CUDA half-precision tensor, so packed (padding-free) training on a T4 / V100 in float16, or with a head size such
as 36, raised in every forward or backward instead of taking the exact padded SDPA batches.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from mmevo.models import attention


def _cuda_like(dtype=torch.bfloat16):
    """Stands in for a CUDA tensor in the eligibility check (no GPU here)."""
    return SimpleNamespace(is_cuda=True, dtype=dtype, device=torch.device("cuda", 0))


@pytest.mark.parametrize("capability, eligible", [((7, 0), False), ((7, 5), False), ((8, 0), True), ((8, 6), True),
                                                  ((9, 0), True), ((10, 0), True), ((12, 1), True), ((13, 0), False)])
def test_varlen_is_taken_only_on_the_gpus_torchs_flash_kernel_supports(monkeypatch, capability, eligible):
    seen = []
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: seen.append(device) or capability)
    assert attention._varlen_eligible(_cuda_like()) is eligible
    assert seen == [torch.device("cuda", 0)]  # the tensor's own GPU
    assert attention._varlen_eligible(_cuda_like(torch.float32)) is False  # flash: half precision only


@pytest.mark.parametrize("head_dim, ok", [(8, True), (32, True), (36, False), (128, True), (256, True), (264, False)])
def test_varlen_head_sizes(head_dim, ok):
    assert attention._varlen_head_dim_ok(head_dim) is ok


def test_a_head_size_flash_refuses_takes_the_padded_path(monkeypatch):
    """A kernel that enforces flash's head-size rule (as aten's does) is never reached with 36-wide heads; the packed
    forward equals the padded SDPA batches. With 32-wide heads the kernel is called."""
    calls = []

    def varlen(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None,
               window_size=(-1, -1), enable_gqa=False, seqused_k=None, block_table=None, num_splits=None):
        calls.append(query.shape[-1])
        if query.shape[-1] % 8 or query.shape[-1] > 256:
            raise RuntimeError("head_size_og should be a multiple of 8, this is ensured by padding!")
        return torch.zeros_like(query)

    monkeypatch.setattr(attention, "_varlen_kernel", lambda: varlen)
    g = torch.Generator().manual_seed(3)
    n = 9
    cu = torch.tensor([0, 4, 5, 9], dtype=torch.int32)
    q = torch.randn(1, 4, n, 36, generator=g)
    k, v = torch.randn(1, 2, n, 36, generator=g), torch.randn(1, 2, n, 36, generator=g)
    want = attention.packed_attention(q, k, v, cu, scaling=0.25)  # CPU: padded SDPA batches
    monkeypatch.setattr(attention, "_varlen_eligible", lambda t: True)  # as on an H100 in bfloat16
    got = attention.packed_attention(q, k, v, cu, scaling=0.25)
    assert calls == [] and torch.equal(got, want)
    q32, k32, v32 = q[..., :32].contiguous(), k[..., :32].contiguous(), v[..., :32].contiguous()
    assert attention.packed_attention(q32, k32, v32, cu, scaling=0.25).shape == (1, n, 4, 32)
    assert calls == [32]


def test_an_empty_packed_row_returns_before_the_varlen_kernel(monkeypatch):
    """A row of no tokens (no segments with any): the GPU path took max() over its empty spans and raised."""
    monkeypatch.setattr(attention, "_varlen_kernel", lambda: (lambda *a, **k: pytest.fail("kernel called")))
    monkeypatch.setattr(attention, "_varlen_eligible", lambda t: True)  # as on an H100 in bfloat16
    q, k = torch.zeros(1, 4, 0, 32), torch.zeros(1, 2, 0, 32)
    for cu in (torch.tensor([0], dtype=torch.int32), torch.tensor([0, 0, 0], dtype=torch.int32)):
        assert attention.packed_attention(q, k, k, cu).shape == (1, 0, 4, 32)
