"""Review of model.cpu_linear: a bias oneDNN cannot read as it is, second derivatives, and the layers too narrow for
oneDNN to pay off."""

import pytest
import torch
import torch.nn.functional as F

from mmevo.models import cpu_linear as cl

pytestmark = pytest.mark.skipif(not cl.onednn_linear_available(), reason="this torch build has no oneDNN linear")


def _problem(rows=300, k=48, n=40, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(rows, k, generator=gen), torch.randn(n, k, generator=gen)


@pytest.mark.parametrize("layout", ["strided", "expanded", "broadcast_1", "broadcast_1n"])
def test_a_bias_of_any_layout_or_broadcast_shape_gives_f_linears_result(layout):
    x, w = _problem()
    gen = torch.Generator().manual_seed(1)
    bias = {"strided": lambda: torch.randn(80, generator=gen)[::2],  # oneDNN read 40 dense floats: wrong sums
            "expanded": lambda: torch.randn(1, generator=gen).expand(40),  # stride 0: memory past the tensor
            "broadcast_1": lambda: torch.randn(1, generator=gen),  # F.linear broadcasts; oneDNN raised
            "broadcast_1n": lambda: torch.randn(1, 40, generator=gen)}[layout]()
    bias.requires_grad_()
    got = cl.linear(x, w, bias)
    (grad_got,) = torch.autograd.grad(got.square().sum(), bias)
    want = F.linear(x, w, bias)
    (grad_want,) = torch.autograd.grad(want.square().sum(), bias)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(grad_got, grad_want, rtol=1e-5, atol=1e-2)


def _gradient_penalty_grads(fn):
    """d/d(x, w, b) of |d(sum y^2)/dx|^2: needs the linear's backward to be differentiable (create_graph=True)."""
    x, w = _problem(seed=2)
    x, w = x.requires_grad_(), (w * 0.1).requires_grad_()
    b = torch.randn(40, generator=torch.Generator().manual_seed(3)).requires_grad_()
    (gx,) = torch.autograd.grad(fn(x, w, b).square().sum(), x, create_graph=True)
    return torch.autograd.grad(gx.square().sum(), (x, w, b))


def test_double_backward_matches_f_linear():
    got, want = _gradient_penalty_grads(cl.linear), _gradient_penalty_grads(F.linear)
    assert float(want[1].abs().max()) > 1.0  # a real second derivative, which the oneDNN op alone left at 0
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-3)
