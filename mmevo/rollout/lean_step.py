"""One decode step of a Qwen decoder without transformers' model-level wrappers, for the HF engine's shared-prefix path.

A decode step runs one token per row through the model. transformers' forward wraps the decoder layers in work a
decode step over a ``SharedPrefixCache`` does not need: argument and position checks, rope-index bookkeeping, causal
mask construction (the prefix mask is in the cache), the multimodal rotary recomposition (a decode token's three mrope
positions are equal) and output dataclasses. On CPU at the tiny models' sizes they take about a tenth of a sampling
call at 64 rows and a sixth at 4 rows (``scripts/bench_decode.py``). ``LeanDecodeStep`` calls the same modules
(embedding, each decoder layer, final norm, LM head) with the same arguments and computes the rotary cos / sin with the
same operations, so its logits are bit-identical to the model's forward (tested per architecture); anything it does
not recognise keeps the model's forward.
"""

from __future__ import annotations

import torch

from mmevo.models.attention import SHARED_PREFIX_KWARG

# the model classes whose forward is embedding -> decoder layers -> norm -> lm_head, and their decoder classes
_MODELS = {"Qwen2ForCausalLM": "Qwen2Model", "Qwen3ForCausalLM": "Qwen3Model",
           "Qwen2_5_VLForConditionalGeneration": "Qwen2_5_VLTextModel"}
# rotary classes computing cos / sin of (position * inv_freq) concatenated twice, times attention_scaling; for the
# multimodal one the three position rows of a decode token are equal, so its section recomposition is the identity
_ROTARY = {"Qwen2RotaryEmbedding", "Qwen3RotaryEmbedding", "Qwen2_5_VLRotaryEmbedding"}


# where transformers' output-capturing hook lives: the first forward asked for hidden states or attentions installs
# one on every decoder layer and attention for good, and it records only inside such a forward (never in a decode step)
_CAPTURING_HOOKS = "transformers.utils.output_capturing"


def is_hooked(m: torch.nn.Module) -> bool:
    """Whether calling ``m`` runs more than its class's forward: forward (pre-)hooks other than transformers' inert
    output-capturing ones, or a ``forward`` set on the instance (accelerate's hooks replace it). A step that skips or
    replaces such a module's call would skip them."""
    hooks = [h for h in m._forward_hooks.values() if getattr(h, "__module__", None) != _CAPTURING_HOOKS]
    return bool(hooks or m._forward_pre_hooks) or "forward" in vars(m)


class LeanDecodeStep:
    """``step(tokens [N], positions [N], cache) -> logits [N, V]`` for a model ``build`` recognises."""

    def __init__(self, model: torch.nn.Module, decoder: torch.nn.Module, multimodal: bool):
        self.model, self.decoder, self.multimodal = model, decoder, multimodal
        rotary = decoder.rotary_emb
        # local cos / sin only for the plain rotary; another rope type (or a hooked module) goes through the module
        self.local_rope = (type(rotary).__name__ in _ROTARY and getattr(rotary, "rope_type", None) == "default"
                           and not is_hooked(rotary))

    @classmethod
    def build(cls, model: torch.nn.Module) -> "LeanDecodeStep | None":
        """The lean step for ``model`` (the unwrapped transformers model), or None where the model's own forward must
        run: an architecture not listed above, sliding-window or non-full-attention layers, ZeRO-3 partitioned
        parameters (DeepSpeed's per-module fetch hooks trace the model's own call order), hub kernels, or hooks on the
        decoder (or the multimodal model around it), whose forward the step does not call. The top-level model's hooks
        are not looked at: DeepSpeed's engine hooks it in every run (timers, profiling), and its prefill runs them."""
        decoder_class = _MODELS.get(type(model).__name__)
        if decoder_class is None or getattr(model, "use_kernels", False):
            return None
        inner = getattr(model, "model", None)
        multimodal = decoder_class == "Qwen2_5_VLTextModel"
        decoder = getattr(inner, "language_model", None) if multimodal else inner
        if decoder is None or type(decoder).__name__ != decoder_class or not hasattr(decoder, "rotary_emb"):
            return None
        if any(is_hooked(m) for m in (inner, decoder)):
            return None
        layer_types = getattr(decoder.config, "layer_types", None) or []
        if any(t != "full_attention" for t in layer_types) or len(layer_types) != len(decoder.layers):
            return None
        if any(hasattr(p, "ds_id") for p in model.parameters()):
            return None
        if not isinstance(getattr(model, "lm_head", None), torch.nn.Module):
            return None
        return cls(model, decoder, multimodal)

    def _rope(self, hidden: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos / sin [N, 1, D] of each row's position, as the model's rotary module computes them."""
        rotary = self.decoder.rotary_emb
        if not self.local_rope:
            pos = positions[:, None]
            return rotary(hidden, pos[None].expand(3, -1, -1) if self.multimodal else pos)
        freqs = positions[:, None, None].float() * rotary.inv_freq.to(device=hidden.device, dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)  # [N, 1, D]
        cos = emb.cos() * rotary.attention_scaling
        sin = emb.sin() * rotary.attention_scaling
        return cos.to(dtype=hidden.dtype), sin.to(dtype=hidden.dtype)

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor, cache) -> torch.Tensor:
        """tokens / positions [N] (a decode token's mrope rows are equal: one position per row), ``cache`` a
        ``SharedPrefixCache`` -> logits [N, V] of the next token."""
        dec = self.decoder
        hidden = dec.embed_tokens(tokens[:, None])  # [N, 1, H]
        rope = self._rope(hidden, positions)
        # transformers hands the layers text position ids only for packed multimodal rows; plain ones for text models
        layer_positions = None if self.multimodal else positions[:, None]
        shared = {SHARED_PREFIX_KWARG: cache}
        for layer in dec.layers:
            hidden = layer(hidden, attention_mask=None, position_ids=layer_positions, past_key_values=cache,
                           use_cache=True, position_embeddings=rope, **shared)
        return self.model.lm_head(dec.norm(hidden))[:, -1]
