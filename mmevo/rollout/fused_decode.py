"""A decode step of Qwen2-family decoders on CPU with fused projections on oneDNN (the HF engine's sampling path).

``LeanDecodeStep`` calls the model's own decoder layers: per layer and decode step that is seven linears through
``F.linear`` (MKL's sgemm, on AMD CPUs its AVX2 path: ~100 GFLOP/s on a 64-row decode step of the tiny models) and
about forty small tensor ops. ``FusedDecodeStep`` computes the same layer from the same weights with

- q / k / v as one matmul and gate / up as one (weights concatenated once per sampling call),
- every matmul, the LM head's included, through oneDNN with weights reordered once per sampling call into its
  blocked layout (``mkldnn._reorder_linear_weight``, what torch.compile's CPU backend does for frozen weights), or
  through F.linear (``kernel="torch"``: ``model.cpu_linear`` resolved, see ``resolve_cpu_linear``; on Intel CPUs
  MKL's sgemm is the faster of the two),
- RMSNorm as ``F.rms_norm`` and the rotary embedding of q and k in one pass (``roll`` with a signed sine),

and the same KV cache and shared-prefix attention. It samples from the same distribution up to float32 rounding, not
bit for bit (another summation order); the trainer recomputes every log-prob it trains on, so rollouts only need the
policy's distribution. It applies to float32 models on CPU whose layers are exactly Qwen2 / Qwen2.5-VL text layers
(plain linears, SiLU MLP, RMSNorm, no q / k norm; no hooks or ``forward`` set on an instance on any module it computes
instead of calling) and small enough that a second copy of their weights is cheap (``MAX_COPY_BYTES``); anything else
keeps ``LeanDecodeStep``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from mmevo.models import attention  # looked up per call (as the model's attention function does)
from mmevo.models.cpu_linear import OneDNNLinear, onednn_linear_available
from mmevo.rollout.lean_step import LeanDecodeStep, is_hooked

_LAYERS = {"Qwen2DecoderLayer", "Qwen2_5_VLDecoderLayer"}
_ATTENTIONS = {"Qwen2Attention", "Qwen2_5_VLAttention"}
_MLPS = {"Qwen2MLP"}  # Qwen2.5-VL's text MLP is a class of that name too
_NORMS = {"Qwen2RMSNorm", "Qwen2_5_VLRMSNorm"}
_ACTS = {"SiLU", "SiLUActivation"}
_LINEARS = (torch.nn.Linear, OneDNNLinear)
# the fused, reordered weights are a second copy of the decoder's and the LM head's for the sampling call: above this
# many bytes (a model of ~250M float32 parameters) the lean step runs instead of doubling a large CPU model's memory
MAX_COPY_BYTES = 1 << 30


def _plain_linear(m) -> bool:
    """An ``nn.Linear`` (or mmevo's oneDNN subclass of it) with no hooks: a LoRA wrapper, a quantised layer or a
    DeepSpeed / PEFT hook would change what the module computes."""
    return type(m) in _LINEARS and not is_hooked(m)


def _plain_module(m, names: set[str]) -> bool:
    """A module of one of the classes ``names`` whose call runs that class's forward alone (the fused step computes
    it instead of calling it)."""
    return type(m).__name__ in names and not is_hooked(m)


def _packed(weight: torch.Tensor, rows: int, kernel: str = "onednn") -> torch.Tensor:
    """``weight`` [n, k] for ``kernel``: oneDNN's blocked layout for ~``rows``-row inputs (a hint: other row counts
    are exact), or a plain contiguous copy for F.linear ("torch")."""
    weight = weight.detach().contiguous()
    return torch.ops.mkldnn._reorder_linear_weight(weight, rows) if kernel == "onednn" else weight


def _onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


_KERNELS = {"onednn": _onednn_linear, "torch": F.linear}


@dataclass
class _Layer:
    qkv: torch.Tensor  # packed [(H + 2 KV) * D, hidden]
    qkv_bias: torch.Tensor | None
    o: torch.Tensor  # packed [hidden, H * D]
    gate_up: torch.Tensor  # packed [2 I, hidden]
    down: torch.Tensor  # packed [hidden, I]
    ln1: torch.Tensor
    ln1_eps: float
    ln2: torch.Tensor
    ln2_eps: float


class FusedDecodeStep(LeanDecodeStep):
    """``step(tokens [N], positions [N], cache) -> logits [N, V]``, as ``LeanDecodeStep`` (a ``SharedPrefixCache``)."""

    def __init__(self, model, decoder, multimodal: bool, rows: int, kernel: str = "onednn"):
        super().__init__(model, decoder, multimodal)
        if kernel not in _KERNELS:
            raise ValueError(f"fused decode kernel {kernel!r} not in {sorted(_KERNELS)}")
        # the projections' matmuls: oneDNN (on AMD CPUs ~2x MKL's AVX2 sgemm), or F.linear (as fast on Intel's)
        self.kernel, self.linear = kernel, _KERNELS[kernel]
        attn = decoder.layers[0].self_attn
        self.heads = model.config.get_text_config().num_attention_heads if hasattr(model.config, "get_text_config") \
            else model.config.num_attention_heads
        self.kv_heads = self.heads // attn.num_key_value_groups
        self.head_dim = attn.head_dim
        self.scaling = attn.scaling
        self.layers: list[_Layer] = []
        with torch.no_grad():
            for layer in decoder.layers:
                a, mlp = layer.self_attn, layer.mlp
                biases = [p.bias for p in (a.q_proj, a.k_proj, a.v_proj)]
                qkv_bias = None
                if any(b is not None for b in biases):
                    qkv_bias = torch.cat([b.detach() if b is not None else torch.zeros(p.out_features)
                                          for b, p in zip(biases, (a.q_proj, a.k_proj, a.v_proj))])
                self.layers.append(_Layer(
                    qkv=_packed(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]), rows, kernel),
                    qkv_bias=qkv_bias,
                    o=_packed(a.o_proj.weight, rows, kernel),
                    gate_up=_packed(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]), rows, kernel),
                    down=_packed(mlp.down_proj.weight, rows, kernel),
                    ln1=layer.input_layernorm.weight.detach(), ln1_eps=layer.input_layernorm.variance_epsilon,
                    ln2=layer.post_attention_layernorm.weight.detach(),
                    ln2_eps=layer.post_attention_layernorm.variance_epsilon))
            self.intermediate = decoder.layers[0].mlp.gate_proj.out_features
            self.norm, self.norm_eps = decoder.norm.weight.detach(), decoder.norm.variance_epsilon
            head = model.lm_head
            self.head = _packed(head.weight, rows, kernel)
            self.head_bias = None if head.bias is None else head.bias.detach()

    @classmethod
    def build(cls, model: torch.nn.Module, rows: int = 64, kernel: str = "onednn") -> "FusedDecodeStep | None":
        """The fused step for ``model`` (``rows``: the decode batch, a hint for the weights' layout; ``kernel``: the
        projections' matmuls, "onednn" or "torch") when the lean step applies and every layer qualifies (see the
        module doc), else None."""
        return cls.from_lean(LeanDecodeStep.build(model), rows, kernel)

    @classmethod
    def from_lean(cls, lean: LeanDecodeStep | None, rows: int = 64,
                  kernel: str = "onednn") -> "FusedDecodeStep | None":
        """The fused form of an already built lean step, or None where its model does not qualify."""
        if lean is None or not cls.eligible(lean.model, lean.decoder, kernel):
            return None
        return cls(lean.model, lean.decoder, lean.multimodal, max(1, int(rows)), kernel)

    @staticmethod
    def eligible(model, decoder, kernel: str = "onednn") -> bool:
        params = list(model.parameters())
        if not params or any(p.device.type != "cpu" or p.dtype != torch.float32 for p in params):
            return False
        if (kernel == "onednn" and not onednn_linear_available()) or not _plain_linear(model.lm_head):
            return False
        copied = model.lm_head.weight.numel() + sum(m.weight.numel() for layer in decoder.layers
                                                    for m in layer.modules() if isinstance(m, torch.nn.Linear))
        if copied * 4 > MAX_COPY_BYTES:
            return False
        if not _plain_module(decoder.norm, _NORMS) or not isinstance(decoder.embed_tokens, torch.nn.Embedding):
            return False
        for layer in decoder.layers:
            a, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
            if not (_plain_module(layer, _LAYERS) and _plain_module(a, _ATTENTIONS) and _plain_module(mlp, _MLPS)):
                return False
            if hasattr(a, "q_norm") or hasattr(a, "k_norm") or getattr(a, "sliding_window", None):
                return False
            if not all(_plain_linear(getattr(a, n, None)) for n in ("q_proj", "k_proj", "v_proj", "o_proj")):
                return False
            if a.o_proj.bias is not None:
                return False
            if not all(_plain_linear(getattr(mlp, n, None)) and getattr(mlp, n).bias is None
                       for n in ("gate_proj", "up_proj", "down_proj")):
                return False
            if not _plain_module(getattr(mlp, "act_fn", None), _ACTS):
                return False
            if not all(_plain_module(getattr(layer, n, None), _NORMS)
                       for n in ("input_layernorm", "post_attention_layernorm")):
                return False
        return True

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor, cache) -> torch.Tensor:
        N, H, KV, D, I = tokens.shape[0], self.heads, self.kv_heads, self.head_dim, self.intermediate
        hidden = self.decoder.embed_tokens(tokens)  # [N, hidden]
        cos, sin = self._rope(hidden[:, None], positions)  # [N, 1, D]
        half = D // 2
        # rotate_half(x) * sin == roll(x, D/2) * (sin with its first half negated): q and k in one pass
        signed_sin = torch.cat([-sin[..., :half], sin[..., half:]], -1)
        linear = self.linear
        for li, L in enumerate(self.layers):
            x = F.rms_norm(hidden, hidden.shape[-1:], L.ln1, L.ln1_eps)
            qkv = linear(x, L.qkv, L.qkv_bias)  # [N, (H + 2 KV) * D]
            qk = qkv[:, :(H + KV) * D].view(N, H + KV, D)
            qk = qk * cos + qk.roll(half, -1) * signed_sin
            q = qk[:, :H, None]  # [N, H, 1, D]
            k = qk[:, H:, None]  # [N, KV, 1, D]
            v = qkv[:, (H + KV) * D:].view(N, KV, 1, D)
            keys, values = cache.update(k, v, li)
            attn = attention.shared_prefix_attention(q, keys, values, cache, li, self.scaling)  # [N, 1, H, D]
            hidden = hidden + linear(attn.reshape(N, H * D), L.o)
            x = F.rms_norm(hidden, hidden.shape[-1:], L.ln2, L.ln2_eps)
            gate_up = linear(x, L.gate_up)  # [N, 2 I]
            hidden = hidden + linear(F.silu(gate_up[:, :I]) * gate_up[:, I:], L.down)
        x = F.rms_norm(hidden, hidden.shape[-1:], self.norm, self.norm_eps)
        return linear(x, self.head, self.head_bias)
