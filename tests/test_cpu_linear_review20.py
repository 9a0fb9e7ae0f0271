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


class _Attention(torch.nn.Module):
    """Three biased projections of one input, like q/k/v, and an output projection."""

    def __init__(self):
        super().__init__()
        gen = torch.Generator().manual_seed(4)
        self.q, self.k, self.v = (torch.nn.Linear(32, 32) for _ in range(3))
        self.o = torch.nn.Linear(32, 32, bias=False)
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.2)

    def forward(self, x):
        return self.o(torch.tanh(self.q(x)) * self.k(x) + self.v(x))


def _gradient_hook_order(model, rows):
    """Parameter names in the order their gradients are accumulated (DeepSpeed ZeRO-1/2 fill their reduce buckets
    in this order, and every rank must fill them alike)."""
    order = []
    handles = [p.register_post_accumulate_grad_hook(lambda p, name=name: order.append(name))
               for name, p in model.named_parameters()]
    model(torch.randn(rows, 32, generator=torch.Generator().manual_seed(rows))).square().sum().backward()
    for h in handles:
        h.remove()
    model.zero_grad(set_to_none=True)
    return order


def test_gradient_hooks_fire_in_one_order_whatever_the_rows():
    """Two DeepSpeed ZeRO-2 ranks, one with a micro-batch of 300 rows (oneDNN), one with 100 (F.linear's kernels),
    must accumulate their gradients in the same order. They did not (F.linear's addmm node on one, the oneDNN
    node on the other): a 2-process ZeRO-2 update on the tiny VL model, 4 samples of 90 response tokens on one rank
    and 2 on the other, had q/k/v gradients off by up to 0.077 (largest gradient 0.085); 1e-7 with model.cpu_linear=
    torch, or with every rank on oneDNN."""
    model = _Attention()
    cl.use_cpu_linear(model, "onednn")
    few, many = _gradient_hook_order(model, cl.MIN_ROWS - 156), _gradient_hook_order(model, cl.MIN_ROWS + 44)
    assert sorted(few) == sorted(name for name, _ in model.named_parameters())
    assert few == many


@pytest.mark.parametrize("rows", [0, 1, cl.MIN_ROWS - 1])
def test_few_rows_with_a_gradient_match_f_linear(rows):
    """Below MIN_ROWS the shared autograd node runs F.linear's kernels: the same forward and gradients."""
    gen = torch.Generator().manual_seed(5)
    shape = (rows, 24) if rows != 1 else (24,)  # 1: a 1-D input
    x, w, b = torch.randn(shape, generator=gen), torch.randn(12, 24, generator=gen), torch.randn(12, generator=gen)
    x, w, b = x.requires_grad_(), w.requires_grad_(), b.requires_grad_()
    assert not cl.takes_onednn(x, w)
    g = torch.randn((*shape[:-1], 12), generator=gen)
    got_y = cl.linear(x, w, b)
    got = torch.autograd.grad(got_y, (x, w, b), g)
    want_y = F.linear(x, w, b)
    want = torch.autograd.grad(want_y, (x, w, b), g)
    assert got_y.shape == want_y.shape and torch.equal(got_y, want_y)
    for a, e in zip(got, want):
        torch.testing.assert_close(a, e, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n, k", [(0, 24), (12, 0)])
def test_a_linear_without_input_or_output_features_gives_f_linears_result(n, k):
    """oneDNN has no primitive for a weight without rows or columns ('could not create a primitive descriptor'):
    such a linear keeps F.linear, which gives zeros (and zero gradients) over any number of rows."""
    gen = torch.Generator().manual_seed(6)
    x = torch.randn(cl.MIN_ROWS + 44, k, generator=gen).requires_grad_()
    w = torch.randn(n, k, generator=gen).requires_grad_()
    b = torch.randn(n, generator=gen).requires_grad_()
    y = cl.linear(x, w, b)
    assert torch.equal(y, F.linear(x, w, b)) and y.shape == (cl.MIN_ROWS + 44, n)
    grads = torch.autograd.grad(y.sum(), (x, w, b))
    assert [tuple(g.shape) for g in grads] == [(cl.MIN_ROWS + 44, k), (n, k), (n,)]
    assert all(bool((g == 0).all()) for g in grads[:2])
