"""Review 7 of the GPU-only paths, pinned on CPU against the signatures of the GPU builds' own source.

torch's ``torch.nn.attention.varlen.varlen_attn`` (CUDA only) changed its signature between releases:
  2.10: varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, is_causal=False, return_aux=None)
  2.11: ... max_k, *, return_aux=None, scale=None, window_size=(-1, -1)
  2.12-2.14: ... max_k, *, return_aux=None, scale=None, window_size=(-1, -1), enable_gqa=False, seqused_k=None,
        block_table=None, num_splits=None
``packed_attention`` calls it with ``scale=`` and ``window_size=(-1, 0)``; on torch 2.10 every packed (padding-free)
forward on a GPU raised a TypeError. The stand-ins below carry exactly those signatures.
"""

from __future__ import annotations


import pytest
import torch

from mmevo.models import attention


def varlen_2_10(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, is_causal=False, return_aux=None):
    raise TypeError("called with torch 2.10's signature")  # never reached once the build is refused


def varlen_2_11(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None,
                window_size=(-1, -1)):
    raise AssertionError("only the signature is inspected")


def varlen_2_14(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None,
                window_size=(-1, -1), enable_gqa=False, seqused_k=None, block_table=None, num_splits=None):
    raise AssertionError("only the signature is inspected")


@pytest.fixture
def installed_varlen(monkeypatch):
    """Install a stand-in as ``torch.nn.attention.varlen.varlen_attn`` and clear mmevo's cached lookups."""
    import torch.nn.attention.varlen as varlen_module

    def install(fn):
        monkeypatch.setattr(varlen_module, "varlen_attn", fn)
        attention._varlen_kernel.cache_clear()
        attention._takes_gqa.cache_clear()

    yield install
    attention._varlen_kernel.cache_clear()
    attention._takes_gqa.cache_clear()


def test_torch_2_10_varlen_is_refused_with_a_warning(installed_varlen):
    installed_varlen(varlen_2_10)
    with pytest.warns(UserWarning, match="no scale / window_size"):
        assert attention._varlen_kernel() is None


@pytest.mark.parametrize("kernel, gqa", [(varlen_2_11, False), (varlen_2_14, True)])
def test_torch_2_11_and_later_varlen_are_used(installed_varlen, kernel, gqa):
    installed_varlen(kernel)
    assert attention._varlen_kernel() is kernel
    assert attention._takes_gqa(kernel) is gqa  # 2.11: K/V heads repeated; 2.12+: enable_gqa=True


def test_packed_attention_on_torch_2_10_takes_the_padded_path(installed_varlen, monkeypatch):
    """With a CUDA bf16 tensor (eligibility faked on CPU) and torch 2.10's kernel, the packed forward falls back to
    the padded SDPA batches and gives the same output as they do, instead of raising a TypeError."""
    installed_varlen(varlen_2_10)
    g = torch.Generator().manual_seed(7)
    n = 9
    q = torch.randn(1, 4, n, 8, generator=g)
    k, v = torch.randn(1, 2, n, 8, generator=g), torch.randn(1, 2, n, 8, generator=g)
    cu = torch.tensor([0, 4, 5, 9], dtype=torch.int32)
    want = attention.packed_attention(q, k, v, cu, scaling=0.25)  # CPU: padded SDPA path
    monkeypatch.setattr(attention, "_varlen_eligible", lambda t: True)
    with pytest.warns(UserWarning, match="no scale / window_size"):
        got = attention.packed_attention(q, k, v, cu, scaling=0.25)
    assert got.shape == (1, n, 4, 8)
    assert torch.equal(got, want)
    assert attention.packed_kernel(q) == "padded_sdpa"


def test_the_installed_torch_varlen_binds_the_call_mmevo_makes():
    """Whatever torch is installed: where it has varlen_attn and mmevo uses it, mmevo's keywords bind."""
    import inspect

    kernel = attention._varlen_kernel()
    if kernel is None:
        pytest.skip(f"torch {torch.__version__} has no usable varlen_attn")
    extra = {"enable_gqa": True} if attention._takes_gqa(kernel) else {}
    t = torch.zeros(1)
    inspect.signature(kernel).bind(t, t, t, t, t, 1, 1, scale=0.5, window_size=(-1, 0), **extra)
