"""Float32 linear layers on CPU through torch's oneDNN kernel instead of its default BLAS (``model.cpu_linear``).

Why: a float32 ``F.linear`` / ``mm`` on an x86 CPU is MKL's sgemm in torch's wheels, and on AMD CPUs MKL takes its
AVX2 code path. On one core of the AMD EPYC (AVX-512) this was measured on, the training shapes of the tiny
models ([1200, 128] x [128, 384]) ran at ~100 GFLOP/s through MKL and ~230 through oneDNN (also in every x86 torch
build: ``torch.ops.mkldnn._linear_pointwise``, the linear torch.compile's CPU backend emits), which picks AVX-512
there; the input gradient ran at the same ~230 and the weight gradient at ~180. Matmuls are ~half of a CPU GRPO
update, so this is the largest single lever on CPU development runs.

Only linears over at least ``MIN_ROWS`` rows take it: a decode step's 64-row matmuls were slower through oneDNN
(its per-call setup is not amortised). Results agree with ``F.linear`` to float32 rounding, not bit for bit (another
summation order); everything else (other dtypes and devices, DeepSpeed-partitioned weights, fewer rows) keeps
F.linear's kernels. A linear that records a gradient goes through one autograd node whatever its rows, so the ranks
of a DeepSpeed run accumulate their gradients in one order.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

# rows (tokens) from which a linear takes oneDNN: the training passes' micro-batches have hundreds to thousands, a
# decode step one per live sequence
MIN_ROWS = 256
CHOICES = ("auto", "onednn", "torch")


def _kernel():
    return torch.ops.mkldnn._linear_pointwise


def _onednn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [m, k] @ weight[n, k].T (+ bias [n]) -> [m, n] by oneDNN (no activation fused: "none")."""
    return _kernel()(x, weight, bias, "none", [], "")


@functools.cache
def cpu_vendor() -> str:
    """The x86 vendor string of this CPU ("AuthenticAMD", "GenuineIntel"), or "" where it cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def resolve_cpu_linear(choice: str) -> str:
    """The kernel a ``model.cpu_linear`` choice runs: "onednn" or "torch". "auto" is oneDNN where it is available,
    except on Intel CPUs: MKL's sgemm (F.linear) takes its AVX-512 path there and was as fast as oneDNN on the training
    shapes and faster on the decode step's (Xeon, one core: ~165 against ~153 GFLOP/s at [1200, 128] x [128, 384],
    155 against 127 at 64 rows); the AVX2 path MKL takes on AMD CPUs is what oneDNN beats."""
    if choice not in CHOICES:
        raise ValueError(f"model.cpu_linear={choice!r} not in {list(CHOICES)}")
    if choice == "auto":
        return "onednn" if onednn_linear_available() and cpu_vendor() != "GenuineIntel" else "torch"
    return choice


@functools.cache
def onednn_linear_available() -> bool:
    """Whether this torch build has oneDNN's CPU linear and it agrees with ``F.linear`` on a small problem (a build
    without the op, or one whose kernel changed meaning, keeps ``F.linear``)."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(MIN_ROWS, 48, generator=gen)
        w, b = torch.randn(40, 48, generator=gen), torch.randn(40, generator=gen)
        out = _onednn(x, w, b)
        grad_w = _onednn(out.t(), x.t(), None)  # the weight gradient's transposed views, as backward passes them
    except (AttributeError, RuntimeError, NotImplementedError):
        return False
    return bool(torch.allclose(out, F.linear(x, w, b), rtol=1e-4, atol=1e-4)
                and torch.allclose(grad_w, out.t() @ x, rtol=1e-4, atol=1e-3))


class _OneDNNLinearFunction(torch.autograd.Function):
    """y = x W^T + b, x [m, k] (any strides), W [n, k], b [n] or None: oneDNN in forward and backward from
    ``MIN_ROWS`` rows, F.linear's matmuls below. One autograd node whichever kernel runs: DeepSpeed ZeRO-1/2 lay
    the gradients into its reduce buckets in the order their hooks fire, and ranks whose micro-batches fell on either
    side of ``MIN_ROWS`` (F.linear's addmm node on one, this node on the other) summed one parameter's gradient with
    another's."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        ctx.onednn = x.shape[0] >= MIN_ROWS
        return _onednn(x, weight, bias) if ctx.onednn else F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx, grad):  # grad [m, n]
        x, weight = ctx.saved_tensors
        # create_graph=True: the oneDNN op has no derivative (second derivatives would silently be 0), so autograd's
        # own matmuls; and below MIN_ROWS the same matmuls as F.linear's backward
        if torch.is_grad_enabled() or not ctx.onednn:
            return _matmul_grads(ctx, grad, x, weight)
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:  # [m, n] @ W [n, k]: a linear with weight W^T [k, n]
            grad_x = _onednn(grad, weight.t().contiguous(), None)
        if ctx.needs_input_grad[1]:  # grad^T [n, m] @ x [m, k]
            # oneDNN copies its strided input (the transposed grad or x) and reorders its weight anyway: copying the
            # smaller one is faster (n=384, k=128, m=1188: 0.52 ms against 0.62), the result transposed when n > k
            if weight.shape[0] > weight.shape[1]:  # (x^T [k, m] as input, grad^T [n, m] as weight)^T
                grad_w = _onednn(x.t(), grad.t(), None).t()
            else:  # grad^T [n, m] as input, x^T [k, m] as weight
                grad_w = _onednn(grad.t(), x.t(), None)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad.sum(0)
        return grad_x, grad_w, grad_b


def _matmul_grads(ctx, grad, x, weight):
    """The backward's gradients by torch's matmuls (the weight's as grad^T x: contiguous, no copy into .grad), and
    differentiable again (double backward, e.g. a gradient penalty)."""
    grad_x = grad @ weight if ctx.needs_input_grad[0] else None
    grad_w = grad.t() @ x if ctx.needs_input_grad[1] else None
    grad_b = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
    return grad_x, grad_w, grad_b


def _bias_fits(bias: torch.Tensor | None, weight: torch.Tensor) -> bool:
    """oneDNN needs a float32 bias of exactly [n] (F.linear also broadcasts [1] or [1, n])."""
    return bias is None or (bias.dtype == torch.float32 and bias.shape == weight.shape[:1])


def _kernel_fits(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether oneDNN could run this linear at all (rows aside): the same answer on every rank of a run."""
    return (x.device.type == "cpu" and x.dtype == torch.float32 and weight.dtype == torch.float32
            and weight.device.type == "cpu" and weight.dim() == 2 and x.dim() >= 1
            and weight.numel() > 0  # no input or output features: oneDNN has no primitive for it (F.linear: zeros)
            and not hasattr(weight, "ds_id"))  # a ZeRO-3 parameter: DeepSpeed's own linear must handle it


def _rows(x: torch.Tensor) -> int:
    return math.prod(x.shape[:-1])


def takes_onednn(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether a linear of input ``x`` and ``weight`` runs on oneDNN (else F.linear's kernels)."""
    return _kernel_fits(x, weight) and _rows(x) >= MIN_ROWS


def _records_graph(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)``, through oneDNN where ``takes_onednn`` says so. x [..., k] -> [..., n].

    Where a gradient is recorded, every linear oneDNN could run goes through the one autograd node, fewer rows
    too (then on F.linear's kernels): the graph, and the order of the gradients' hooks, must not depend on how many
    rows a rank's micro-batch has."""
    if not _kernel_fits(x, weight) or not _bias_fits(bias, weight):
        return F.linear(x, weight, bias)
    if _rows(x) < MIN_ROWS and not _records_graph(x, weight, bias):  # a decode step: no node needed
        return F.linear(x, weight, bias)
    lead = x.shape[:-1]
    rows = x.reshape(_rows(x), x.shape[-1])  # a view where the strides allow; oneDNN reads strided rows as they are
    if bias is not None:  # but reads the bias as dense: a strided or expanded one gave wrong sums (or unowned memory)
        bias = bias.contiguous()
    return _OneDNNLinearFunction.apply(rows, weight, bias).view(*lead, weight.shape[0])


class OneDNNLinear(torch.nn.Linear):
    """``torch.nn.Linear`` whose float32 CPU forward over many rows runs on oneDNN (same parameters and state dict:
    ``use_cpu_linear`` swaps the class of existing layers in place)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


def use_cpu_linear(model: torch.nn.Module, choice: str) -> int:
    """Route ``model``'s plain ``nn.Linear`` layers through oneDNN (``choice`` "onednn", or "auto" where the kernel
    is available and the CPU is not Intel's: ``resolve_cpu_linear``) or back to ``F.linear`` ("torch"); returns how
    many layers take oneDNN. Only layers of exactly ``nn.Linear`` change (subclasses such as PEFT's or quantised
    layers keep their forward; a LoRA layer's base and adapter linears are plain ones and do change)."""
    if choice == "onednn" and not onednn_linear_available():
        raise ValueError("model.cpu_linear=onednn: this torch build has no working oneDNN linear "
                         "(torch.ops.mkldnn._linear_pointwise); use auto or torch")
    enable = resolve_cpu_linear(choice) == "onednn"
    n = 0
    for m in model.modules():
        if enable and type(m) is torch.nn.Linear:
            m.__class__ = OneDNNLinear
        elif not enable and type(m) is OneDNNLinear:
            m.__class__ = torch.nn.Linear
        n += type(m) is OneDNNLinear
    return n
