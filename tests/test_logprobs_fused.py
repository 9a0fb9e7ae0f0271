"""``algos.logprobs_and_entropy`` (one log_softmax pass: the trainer's log-prob / entropy hot path) against the two
reference functions it replaces there, ``logprobs_from_logits`` and ``entropy_from_logits``: values and gradients."""

import pytest
import torch

from mmevo.grpo import algos


def _logits(dtype=torch.float32, neg_inf=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    z = (torch.randn(3, 5, 37, generator=g) * 4).to(dtype)
    if neg_inf:  # banned tokens: probability 0, including one label
        z[..., 3] = float("-inf")
        z[0, 0, 11] = float("-inf")
    return z


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("neg_inf", [False, True])
def test_values_equal_the_reference_functions(dtype, neg_inf):
    z = _logits(dtype, neg_inf)
    y = torch.randint(0, 37, (3, 5), generator=torch.Generator().manual_seed(1))
    y[0, 0] = 11  # a -inf label when neg_inf
    lp, ent = algos.logprobs_and_entropy(z, y, "nograd")
    want_lp, want_ent = algos.logprobs_from_logits(z, y), algos.entropy_from_logits(z)
    assert lp.dtype == want_lp.dtype == torch.promote_types(dtype, torch.float32)
    finite = torch.isfinite(want_lp)
    assert torch.equal(finite, torch.isfinite(lp)) and (lp[~finite] == float("-inf")).all()
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    assert torch.allclose(lp[finite], want_lp[finite], atol=tol, rtol=tol)
    assert torch.isfinite(ent).all() and torch.allclose(ent, want_ent, atol=tol, rtol=tol)
    assert not neg_inf or bool(~finite[0, 0])


@pytest.mark.parametrize("neg_inf", [False, True])
def test_gradients_equal_the_reference_functions(neg_inf):
    """Log-prob and a differentiable entropy (entropy bonus): d/dlogits of a weighted sum of both, also with -inf
    logits (probability-0 tokens must get gradient 0, not NaN)."""
    base = _logits(torch.float64, neg_inf)
    y = torch.randint(4, 37, (3, 5), generator=torch.Generator().manual_seed(2))  # no -inf label (loss -inf)
    wl, we = torch.randn(3, 5, dtype=torch.float64), torch.randn(3, 5, dtype=torch.float64)
    z1 = base.clone().requires_grad_()
    lp, ent = algos.logprobs_and_entropy(z1, y, "grad")
    (lp * wl + ent * we).sum().backward()
    z2 = base.clone().requires_grad_()
    (algos.logprobs_from_logits(z2, y) * wl + algos.entropy_from_logits(z2) * we).sum().backward()
    assert torch.isfinite(z1.grad).all()
    assert torch.allclose(z1.grad, z2.grad, atol=1e-12)
    if neg_inf:
        assert (z1.grad[..., 3] == 0).all()


def test_nograd_entropy_is_detached_and_none_gives_none():
    z = _logits().requires_grad_()
    y = torch.zeros(3, 5, dtype=torch.long)
    lp, ent = algos.logprobs_and_entropy(z, y, "nograd")
    assert lp.requires_grad and not ent.requires_grad
    lp, ent = algos.logprobs_and_entropy(z, y, "none")
    assert ent is None
    with pytest.raises(ValueError, match="entropy must be"):
        algos.logprobs_and_entropy(z, y, "yes")


def test_bad_rows_and_labels_keep_the_reference_conventions():
    z = _logits()
    z[1, 2, 0] = float("nan")
    z[2, 1, :] = float("-inf")  # no distribution
    y = torch.ones(3, 5, dtype=torch.long)
    lp, ent = algos.logprobs_and_entropy(z, y, "nograd")
    assert torch.isnan(ent[1, 2]) and torch.isnan(ent[2, 1]) and torch.isnan(lp[1, 2])
    assert torch.isfinite(ent[0]).all()
    with pytest.raises(ValueError, match="integer token ids"):
        algos.logprobs_and_entropy(z, y.float())
    with pytest.raises(ValueError, match="labels must have shape"):
        algos.logprobs_and_entropy(z, y[:, :1])
    with pytest.raises(ValueError, match="non-empty last"):
        algos.logprobs_and_entropy(z[..., :0], y)
