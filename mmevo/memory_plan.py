"""Per-GPU memory plan of a GRPO run: ``mmevo plan-memory CONFIG [key=value ...] --gpus 8 --gpu-mem-gib 80``.

Each item is a small pure function of the model's dimensions and the run's settings that returns bytes on ONE GPU;
its docstring gives the formula and what it assumes. ``plan`` adds the items up for the three phases of a GRPO step
and reports the largest:

- ``rollout``: vLLM awake (its ``gpu_memory_utilization`` share of the GPU) + what the trainer keeps resident
  (CUDA context, weights or their ZeRO-3 shard, fp32 master + Adam moments unless offloaded, ZeRO-3's gradient
  partition and reduce bucket, the reference unless offloaded) + the weight sync's gathered ZeRO-3 buckets, still
  cached by the allocator when ``sync_weights`` wakes the KV cache (``weight_sync_bytes``). With ``rollout.engine=hf`` the
  policy generates itself: gathered weights, KV cache and prefill activations instead of vLLM.
- ``logprob``: the no-grad old-policy and reference log-prob passes: vLLM asleep, resident state, the ZeRO-3
  gathered working set, the reference's weights (brought onto the GPU for its pass with ``model.ref_offload``),
  no-grad activations (KV of all layers + one layer's temporaries) and the logits of one chunk.
- ``update``: vLLM asleep, resident state, gradients, ZeRO-3 gathered working set, activations and logits of one
  training micro-batch.
- ``optimizer_step``: vLLM asleep, resident state, gradients and the optimizer step's temporaries
  (``optimizer_step_bytes``; the micro-batch's activations are freed by then).

Byte counts are estimates for planning (right to about ten per cent), not measurements. The allocator's
fragmentation and library workspaces (cuBLAS, flash-attention, NCCL buffers beyond the context) are what the 8 %
headroom in ``fits`` is for. The planner assumes that the trainer returns its cached blocks
(``torch.cuda.empty_cache()``) after the update and before ``sync_weights`` wakes vLLM's pools (weights, then KV
cache), so that the update's activations and optimizer temporaries are not still reserved then (``VLLMEngine``
does so before every wake-up; ``tests/test_vllm_engine.py`` checks the order); the sync's own gathered buckets are
counted as if still cached when the KV cache wakes (an upper bound).

Shapes in comments use: h hidden, i MLP width, L layers, a heads, k KV heads, d head dim, V vocabulary, T tokens of a
micro-batch, W world size (GPUs), b bytes per element of the model dtype.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from mmevo.validation import is_integer_number, is_real_number

GiB = 1024 ** 3
HEADROOM = 0.08  # fits = peak <= gpu_mem * (1 - HEADROOM)
DTYPE_BYTES = {"float32": 4, "fp32": 4, "float": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2}


@dataclass(frozen=True)
class VisionDims:
    """A Qwen-VL vision tower (ViT + patch merger)."""

    hidden: int  # ViT width (Qwen2.5-VL: 1280)
    intermediate: int  # ViT MLP width (Qwen2.5-VL: 3420)
    depth: int  # ViT blocks (Qwen2.5-VL: 32)
    heads: int  # ViT heads (Qwen2.5-VL: 16)
    out_hidden: int  # merger output = the LM's hidden size
    patch: int = 14  # patch side in pixels
    temporal_patch: int = 2  # frames per patch (images are repeated)
    in_channels: int = 3
    merge: int = 2  # spatial merge: merge**2 patches become one LM token
    gated: bool = True  # Qwen2.5-VL: RMSNorm + SwiGLU MLP with biases; Qwen2-VL: LayerNorm + fc1/GELU/fc2


@dataclass(frozen=True)
class ModelDims:
    """A Qwen2-style decoder (Qwen2, Qwen2.5-VL's language model, Qwen3), optionally with a vision tower."""

    hidden: int  # h
    intermediate: int  # i (SwiGLU: gate, up [h -> i], down [i -> h])
    layers: int  # L
    heads: int  # a
    kv_heads: int  # k (GQA)
    vocab: int  # V
    head_dim: int = 0  # d; 0 = hidden // heads
    tie_embeddings: bool = False  # lm_head shares the embedding matrix
    qkv_bias: bool = True  # Qwen2: q/k/v projections have biases; Qwen3: none, but q/k RMSNorms
    qk_norm: bool = False  # Qwen3
    o_bias: bool = False  # Qwen3 with attention_bias: o_proj has one too (Qwen2's never does)
    vision: Optional[VisionDims] = None
    source: str = ""  # where the numbers came from

    @property
    def d(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_dim(self) -> int:  # a * d
        return self.heads * self.d

    @property
    def kv_dim(self) -> int:  # k * d
        return self.kv_heads * self.d


# Built-in dimensions for hub ids (offline), from the model cards' config.json (hub repos Qwen/Qwen2.5-VL-*-Instruct:
# text hidden_size / intermediate_size / num_hidden_layers / num_attention_heads / num_key_value_heads / vocab_size /
# tie_word_embeddings, and vision_config depth 32, hidden_size 1280, intermediate_size 3420, num_heads 16,
# patch_size 14, spatial_merge_size 2, temporal_patch_size 2, out_hidden_size = the LM's hidden size).
# 7B: 8.29e9 parameters in all (LM 7.62e9 with an untied lm_head, vision tower + merger 0.68e9).
_QWEN25_VIT = dict(hidden=1280, intermediate=3420, depth=32, heads=16)
BUILTIN_MODELS: dict[str, ModelDims] = {
    "Qwen/Qwen2.5-VL-3B-Instruct": ModelDims(2048, 11008, 36, 16, 2, 151936, tie_embeddings=True,
                                             vision=VisionDims(out_hidden=2048, **_QWEN25_VIT)),
    "Qwen/Qwen2.5-VL-7B-Instruct": ModelDims(3584, 18944, 28, 28, 4, 152064, tie_embeddings=False,
                                             vision=VisionDims(out_hidden=3584, **_QWEN25_VIT)),
    "Qwen/Qwen2.5-VL-32B-Instruct": ModelDims(5120, 27648, 64, 40, 8, 152064, tie_embeddings=False,
                                              vision=VisionDims(out_hidden=5120, **_QWEN25_VIT)),
    "Qwen/Qwen2.5-VL-72B-Instruct": ModelDims(8192, 29568, 80, 64, 8, 152064, tie_embeddings=False,
                                              vision=VisionDims(out_hidden=8192, **_QWEN25_VIT)),
    # the text models of the shipped Prism and HONEST GPU configs (their plan-memory needed a local download):
    # Qwen2.5-1.5B 1.54e9 parameters (tied embedding); Qwen3-4B 4.02e9 (head_dim 128, q/k norms, no biases, tied)
    "Qwen/Qwen2.5-1.5B-Instruct": ModelDims(1536, 8960, 28, 12, 2, 151936, tie_embeddings=True),
    "Qwen/Qwen3-4B-Base": ModelDims(2560, 9728, 36, 32, 8, 151936, head_dim=128, tie_embeddings=True,
                                    qkv_bias=False, qk_norm=True),
}


# ----------------------------------------------------------------------------------------------------------------
# model dimensions and parameter counts


def _positive_int(d: dict, key: str, source: str, where: str = "", default: Any = None) -> int:
    """``d[key]`` as an integer >= 1 (an integral JSON float too); a missing key (without ``default``), null, bool,
    fraction, string or value < 1 is an error naming the key."""
    value = d.get(key, default)
    if value is None:
        raise ValueError(f"{source}: no {where + key!r}; not a Qwen2-style decoder config")
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            or value != int(value) or value < 1):
        raise ValueError(f"{source}: {where + key}={value!r} must be an integer >= 1")
    return int(value)


PLANNED_MODEL_TYPES = ("qwen2", "qwen2_vl", "qwen2_5_vl", "qwen3")  # config.json model_type (a "_text" suffix too)
_ABSENT_KV_HEADS = {"qwen2": 32, "qwen3": 32, "qwen2_vl": 8, "qwen2_5_vl": 8}  # transformers' class defaults


def dims_from_config(config: dict, source: str = "config.json") -> ModelDims:
    """Dimensions from a transformers ``config.json`` (dict): Qwen2.5-VL / Qwen2-VL (``text_config`` or top-level
    text keys, ``vision_config``), Qwen2 and Qwen3 text models. A missing or non-positive size is a ValueError naming
    its key."""
    if not isinstance(config, dict) or not isinstance(config.get("text_config") or {}, dict):
        raise ValueError(f"{source}: not a transformers config (a JSON object, with text_config an object)")
    text = dict(config)
    text.update(config.get("text_config") or {})  # newer Qwen2.5-VL files nest the LM's keys
    hidden, heads = _positive_int(text, "hidden_size", source), _positive_int(text, "num_attention_heads", source)
    raw_type = text.get("model_type")
    if not isinstance(raw_type, str) or not raw_type:
        raise ValueError(f"{source}: no 'model_type' (one of {', '.join(PLANNED_MODEL_TYPES)}); the planner's formulas "
                         "are those of a Qwen2-style dense decoder")
    model_type = raw_type.removesuffix("_text")  # newer Qwen2.5-VL files: text_config's own "qwen2_5_vl_text"
    # a MoE (qwen2_moe, qwen3_moe), Llama (no q/k/v biases) or Gemma layer counts other parameters: refused, not
    # planned as a Qwen2 decoder (a Qwen3-30B-A3B counted as dense from intermediate_size is 3.3e9, not 30.5e9)
    if model_type not in PLANNED_MODEL_TYPES:
        raise ValueError(f"{source}: model_type={raw_type!r} is not one the planner models "
                         f"({', '.join(PLANNED_MODEL_TYPES)}: Qwen2-style dense decoders)")
    is_qwen3, is_qwen2 = model_type == "qwen3", model_type.startswith("qwen2")
    is_vl = model_type in ("qwen2_vl", "qwen2_5_vl")
    # as transformers' config classes: an absent key takes the class default, null means no GQA
    kv_heads = (heads if "num_key_value_heads" in text else _ABSENT_KV_HEADS.get(model_type, heads)) \
        if text.get("num_key_value_heads") is None else _positive_int(text, "num_key_value_heads", source)
    if is_vl and hidden % heads:  # their attention takes d = h / a and refuses the rest
        raise ValueError(f"{source}: hidden_size={hidden} is not a multiple of num_attention_heads={heads}")
    if is_vl:  # Qwen2-VL / Qwen2.5-VL's attention ignores a head_dim key
        head_dim = 0
    elif text.get("head_dim") is not None:
        head_dim = _positive_int(text, "head_dim", source)
    else:
        head_dim = 128 if is_qwen3 else 0  # Qwen3Config's default head_dim
    # Qwen2's q/k/v always have biases, whatever attention_bias says; Qwen3's attention_bias adds o_proj's too
    bias = bool(text.get("attention_bias", not is_qwen3))
    dims = ModelDims(
        hidden=hidden, intermediate=_positive_int(text, "intermediate_size", source),
        layers=_positive_int(text, "num_hidden_layers", source), heads=heads, kv_heads=kv_heads,
        vocab=_positive_int(text, "vocab_size", source), head_dim=head_dim,
        # tied if the top level or the nested text_config says so (transformers' rule for pre-v5 VL files)
        tie_embeddings=bool(config.get("tie_word_embeddings")) or bool(text.get("tie_word_embeddings")),
        qkv_bias=is_qwen2 or bias, o_bias=is_qwen3 and bias, qk_norm=is_qwen3, source=source)
    v = config.get("vision_config")
    if v:
        if not isinstance(v, dict):
            raise ValueError(f"{source}: vision_config={v!r} is not an object")

        def vint(key: str, default: Any = None) -> int:
            return _positive_int(v, key, source, "vision_config.", default)

        if "intermediate_size" in v and "depth" in v:  # Qwen2.5-VL
            vision = VisionDims(hidden=vint("hidden_size"), intermediate=vint("intermediate_size"),
                                depth=vint("depth"), heads=vint("num_heads"),
                                out_hidden=vint("out_hidden_size", hidden), gated=True)
        else:  # Qwen2-VL: embed_dim, mlp_ratio, hidden_size = merger output
            width = vint("embed_dim")
            ratio = v.get("mlp_ratio", 4)
            if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio < float("inf"):
                raise ValueError(f"{source}: vision_config.mlp_ratio={ratio!r} must be a finite number > 0")
            vision = VisionDims(hidden=width, intermediate=int(width * float(ratio)),
                                depth=vint("depth"), heads=vint("num_heads"),
                                out_hidden=vint("hidden_size", hidden), gated=False)
        vision = replace(vision, patch=vint("patch_size", 14), temporal_patch=vint("temporal_patch_size", 2),
                         in_channels=vint("in_channels", 3),  # transformers and vLLM ignore the hub's in_chans
                         merge=vint("spatial_merge_size", 2))
        dims = replace(dims, vision=vision)
    return dims


def model_dims(path: str) -> ModelDims:
    """A local directory's ``config.json``, else the built-in dimensions of a known hub id; anything else is an
    error (the planner never goes to the hub)."""
    p = Path(path).expanduser()
    if (p / "config.json").exists():
        try:
            config = json.loads((p / "config.json").read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"{p / 'config.json'}: not valid JSON ({e})") from None
        return dims_from_config(config, str(p / "config.json"))
    if path in BUILTIN_MODELS:
        return replace(BUILTIN_MODELS[path], source=f"built-in dimensions of {path} (its model card's config.json)")
    raise ValueError(f"model.path={path!r}: no local config.json there and no built-in dimensions for it "
                     f"(known hub ids: {', '.join(BUILTIN_MODELS)}); pass a local checkpoint directory")


def lm_layer_params(m: ModelDims) -> int:
    """One decoder layer: q [h -> a*d] (+bias), k, v [h -> k*d] (+bias), o [a*d -> h] (+bias), gate/up [h -> i],
    down [i -> h], two RMSNorms (h each), Qwen3's q/k RMSNorms (d each)."""
    attn = m.hidden * m.q_dim + 2 * m.hidden * m.kv_dim + m.q_dim * m.hidden
    if m.qkv_bias:
        attn += m.q_dim + 2 * m.kv_dim
    if m.o_bias:
        attn += m.hidden
    if m.qk_norm:
        attn += 2 * m.d
    return attn + 3 * m.hidden * m.intermediate + 2 * m.hidden


def lm_params(m: ModelDims) -> int:
    """Language model: L layers + embedding [V, h] + lm_head [V, h] unless tied + final norm [h]."""
    return m.layers * lm_layer_params(m) + m.vocab * m.hidden * (1 if m.tie_embeddings else 2) + m.hidden


def vision_block_params(v: VisionDims) -> int:
    """One ViT block: qkv [vh -> 3vh] + bias, proj [vh -> vh] + bias, MLP (Qwen2.5-VL: gate/up [vh -> vi] and down
    [vi -> vh], all with biases; Qwen2-VL: fc1/fc2 with biases), two norms (RMSNorm vh; LayerNorm 2vh)."""
    h, i = v.hidden, v.intermediate
    attn = 3 * h * h + 3 * h + h * h + h
    mlp = (3 * h * i + 2 * i + h) if v.gated else (2 * h * i + i + h)
    return attn + mlp + 2 * h * (1 if v.gated else 2)


def vision_merger_params(v: VisionDims) -> int:
    """Patch merger: norm (vh, or 2vh for LayerNorm), Linear [vh*m^2 -> vh*m^2] + bias, GELU,
    Linear [vh*m^2 -> out] + bias."""
    wide = v.hidden * v.merge ** 2
    return v.hidden * (1 if v.gated else 2) + wide * wide + wide + wide * v.out_hidden + v.out_hidden


def vision_params(v: Optional[VisionDims]) -> int:
    """Patch embedding (Conv3d without bias, [c * tp * p * p -> vh]) + depth blocks + merger."""
    if v is None:
        return 0
    patch_embed = v.in_channels * v.temporal_patch * v.patch * v.patch * v.hidden
    return patch_embed + v.depth * vision_block_params(v) + vision_merger_params(v)


def total_params(m: ModelDims) -> int:
    return lm_params(m) + vision_params(m.vision)


_LM_LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
               "mlp.up_proj", "mlp.down_proj")


def lm_linear_shapes(m: ModelDims) -> dict[str, tuple[int, int]]:
    """(in, out) features of each language-model layer's linears, by their short name."""
    return {"q_proj": (m.hidden, m.q_dim), "k_proj": (m.hidden, m.kv_dim), "v_proj": (m.hidden, m.kv_dim),
            "o_proj": (m.q_dim, m.hidden), "gate_proj": (m.hidden, m.intermediate),
            "up_proj": (m.hidden, m.intermediate), "down_proj": (m.intermediate, m.hidden)}


def lm_linear_module_names(m: ModelDims) -> list[str]:
    """Full module names of the language model's linears as the loaded model has them (transformers 5: Qwen2.5-VL's
    decoder sits under ``model.language_model``, a text model's under ``model``), every layer's."""
    prefix = "model.language_model.layers" if m.vision is not None else "model.layers"
    return [f"{prefix}.{layer}.{linear}" for layer in range(m.layers) for linear in _LM_LINEARS]


def lora_adapted_linears(m: ModelDims, targets) -> list[str]:
    """The language-model linears that ``model.lora.target_modules`` adapts, matched as the trainer's PEFT call
    matches them: a layer-specific target (``layers.0.self_attn.q_proj``) adapts that layer's linear only. A target
    that adapts nothing is refused, as the trainer refuses it (``mmevo.models.adapters.apply_lora``), rather than
    planned as zero adapters."""
    from mmevo.models.lora_targets import adapted_module_names, unmatched_targets

    targets = [str(t) for t in targets]
    adapted = adapted_module_names(lm_linear_module_names(m), targets)
    unmatched = unmatched_targets(targets, adapted)
    if unmatched:
        raise ValueError(f"model.lora.target_modules={targets!r}: {unmatched} matched no module of the language model "
                         f"(its linears, in each of its {m.layers} layers: {', '.join(lm_linear_shapes(m))}; a "
                         "dotted suffix such as layers.0.self_attn.q_proj picks one layer's)")
    return adapted


def lora_params(m: ModelDims, rank: int, targets) -> int:
    """LoRA adapters on the language model's linears that ``targets`` adapts: A [r, in] + B [out, r] = r * (in + out)
    per adapted linear (the vision tower gets none)."""
    shapes = lm_linear_shapes(m)
    return sum(rank * sum(shapes[name.rsplit(".", 1)[-1]]) for name in lora_adapted_linears(m, targets))


def trainable_params(m: ModelDims, lora_rank: int = 0, lora_targets=(), freeze_vision_tower: bool = False) -> int:
    """Parameters that get gradients and optimizer state: the LoRA adapters only when ``lora_rank > 0``; otherwise
    everything except, with ``freeze_vision_tower``, the whole vision tower: patch embedding, blocks and merger
    (``mmevo.models.adapters.freeze_vision_tower`` freezes every ``visual.*`` parameter)."""
    if lora_rank > 0:
        return lora_params(m, lora_rank, lora_targets)
    n = total_params(m)
    if freeze_vision_tower and m.vision is not None:
        n -= vision_params(m.vision)
    return n


def largest_param_numel(m: ModelDims) -> int:
    """Elements of the largest single parameter tensor: the embedding / lm_head [V, h], an MLP or attention
    projection, or a vision-tower matrix (patch embedding [vh, c*tp*p*p], fused qkv [3vh, vh], MLP [vi, vh], merger
    [vh*m^2, vh*m^2] and [out, vh*m^2])."""
    sizes = [m.vocab * m.hidden, m.hidden * m.intermediate, m.hidden * max(m.q_dim, m.hidden)]
    v = m.vision
    if v is not None:
        wide = v.hidden * v.merge ** 2
        sizes += [v.hidden * v.in_channels * v.temporal_patch * v.patch ** 2, 3 * v.hidden * v.hidden,
                  v.hidden * v.intermediate, wide * wide, wide * v.out_hidden]
    return max(sizes)


def largest_gathered_params(m: ModelDims) -> int:
    """The most parameters ZeRO-3 must gather at once: the embedding or lm_head [V, h], or one decoder layer."""
    return max(m.vocab * m.hidden, lm_layer_params(m), vision_block_params(m.vision) if m.vision else 0)


# ----------------------------------------------------------------------------------------------------------------
# DeepSpeed settings


@dataclass(frozen=True)
class ZeroSettings:
    """What the planner reads from a DeepSpeed JSON config (``enabled=False``: plain PyTorch, no DeepSpeed)."""

    enabled: bool = False
    stage: int = 0
    offload_optimizer: str = "none"  # none | cpu | nvme
    offload_param: str = "none"  # none | cpu | nvme (ZeRO-3 only)
    grad_accum_dtype: str = ""  # "" = the model dtype (DeepSpeed's default)
    overlap_comm: bool = False
    contiguous_gradients: bool = True  # DeepSpeed's default: ZeRO-3 then keeps one reduce bucket allocated for the run
    reduce_bucket_size: int = 500_000_000  # DeepSpeed's default
    prefetch_bucket_size: int = 50_000_000  # DeepSpeed's default (ZeRO-3)
    sub_group_size: int = 1_000_000_000  # DeepSpeed's default (ZeRO-3: the optimizer steps one sub-group at a time)
    force_ds_cpu_optimizer: bool = True  # DeepSpeed's default: a torch optimizer + CPU offload raises
    # DeepSpeed's mixed precision as the file sets it: "auto" (bf16 "auto": mmevo fills it from the model dtype),
    # "bf16" / "fp16" (enabled: true), "fp32" (neither enabled, or the section missing)
    precision: str = "auto"


# DeepSpeed's DtypeEnum names (deepspeed.runtime.config, 0.19: case-sensitive) of the gradient accumulation dtypes
# the planner costs, each to its canonical name; DeepSpeed's int8 is not a gradient accumulation dtype
_DS_DTYPES = {name: canonical for canonical, names in (
    ("fp16", ("torch.float16", "fp16", "float16", "half")),
    ("fp32", ("torch.float32", "fp32", "float32", "float")),
    ("bf16", ("torch.bfloat16", "bf16", "bfloat16"))) for name in names}


# pydantic's lax bool, which DeepSpeed's precision sections are read with ("enabled": "true" or 1 turns bf16 on)
_DS_TRUE = {"true", "1", "yes", "on", "t", "y"}
_DS_FALSE = {"false", "0", "no", "off", "f", "n"}


def deepspeed_bf16_key(cfg: dict) -> str:
    """The key of the bf16 section DeepSpeed reads: "bf16", else the legacy "bfloat16" (``get_bfloat16_config``)."""
    return "bfloat16" if cfg.get("bf16") is None and "bfloat16" in cfg else "bf16"


def ds_enabled(value: Any, where: str) -> bool | str:
    """A precision section's ``enabled`` as DeepSpeed reads it (True / False), or mmevo's own "auto"; a value
    DeepSpeed refuses (2, "maybe", null) is a ValueError naming ``where``."""
    if value == "auto" or isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.lower() in _DS_TRUE | _DS_FALSE:  # no strip: " true" is refused there
        return value.lower() in _DS_TRUE
    raise ValueError(f"{where}.enabled={value!r} must be true, false or \"auto\"")


def read_deepspeed(path: str | Path) -> ZeroSettings:
    """The memory-relevant keys of a DeepSpeed JSON config. "auto" / missing numbers keep DeepSpeed's defaults. A
    file that is not a JSON object, a ZeRO stage other than 0-3 (a bool or fraction included), a section that is not
    an object, a size that is not a number >= 0 or an unknown ``grad_accum_dtype`` is a ValueError naming the file and
    the key (they were planned as something else, or raised without naming them)."""
    try:
        cfg = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"trainer.deepspeed={path}: not valid JSON ({e})") from None

    def section(parent: Any, key: str, where: str) -> dict:
        # only a missing / null section is DeepSpeed's empty default: `"bf16": false` or `[]` is a TypeError there
        value = parent.get(key)
        value = {} if value is None else value
        if not isinstance(value, dict):
            raise ValueError(f"trainer.deepspeed={path}: {where}{key}={value!r} must be an object")
        return value

    if not isinstance(cfg, dict):
        raise ValueError(f"trainer.deepspeed={path}: not a DeepSpeed config (a JSON object)")
    if isinstance(cfg.get("zero_optimization"), bool):  # the deprecated form DeepSpeed still reads: true is stage 1
        cfg["zero_optimization"] = {"stage": int(cfg["zero_optimization"])}
    z = section(cfg, "zero_optimization", "")

    def num(key: str, default: int) -> int:
        value = z.get(key, default)
        if value == "auto" or value is None:
            return default
        try:
            number = float(value) if not isinstance(value, bool) else math.nan
        except (TypeError, ValueError):
            number = math.nan
        if not 0 <= number < math.inf:
            raise ValueError(f"trainer.deepspeed={path}: zero_optimization.{key}={value!r} must be a number >= 0")
        return int(number)

    def device(key: str) -> str:
        return str(section(z, key, "zero_optimization.").get("device") or "none").lower()

    stage = z.get("stage", 0)
    if isinstance(stage, str) and stage.strip().isdigit():
        stage = int(stage)
    if isinstance(stage, bool) or not isinstance(stage, (int, float)) or stage not in (0, 1, 2, 3):
        raise ValueError(f"trainer.deepspeed={path}: zero_optimization.stage={stage!r} must be 0, 1, 2 or 3")
    stage = int(stage)
    accum = str(section(cfg, "data_types", "").get("grad_accum_dtype") or "")
    if accum and accum not in _DS_DTYPES:
        raise ValueError(f"trainer.deepspeed={path}: data_types.grad_accum_dtype={accum!r} is not one of "
                         f"{', '.join(_DS_DTYPES)}")
    bf16_key = deepspeed_bf16_key(cfg)
    bf16_on, fp16_on = (ds_enabled(section(cfg, key, "").get("enabled", False), f"trainer.deepspeed={path}: {key}")
                        for key in (bf16_key, "fp16"))
    precision = "fp16" if fp16_on is True else "auto" if bf16_on == "auto" else "bf16" if bf16_on is True else "fp32"
    return ZeroSettings(
        precision=precision, enabled=True, stage=stage, offload_optimizer=device("offload_optimizer"),
        offload_param=device("offload_param") if stage == 3 else "none",
        grad_accum_dtype=_DS_DTYPES[accum] if accum else "",
        overlap_comm=bool(z.get("overlap_comm", stage == 3)),  # DeepSpeed turns it on by default for ZeRO-3 only
        contiguous_gradients=bool(z.get("contiguous_gradients", True)),
        reduce_bucket_size=num("reduce_bucket_size", 500_000_000),
        prefetch_bucket_size=num("stage3_prefetch_bucket_size", num("prefetch_bucket_size", 50_000_000)),
        sub_group_size=num("sub_group_size", 1_000_000_000),
        force_ds_cpu_optimizer=bool(cfg.get("zero_force_ds_cpu_optimizer", True)))


def _offloaded(device: str) -> bool:
    return device in ("cpu", "nvme")


def deepspeed_dtype(zero: ZeroSettings, model_dtype: str) -> str:
    """The dtype DeepSpeed's engine takes the model to be in (``get_data_types``): fp16 / bf16 when the file enables
    it ("auto" follows ``model.dtype``, as ``load_ds_config`` fills it), else fp32, even for bf16 weights."""
    if zero.precision == "auto":
        return "bf16" if model_dtype in ("bfloat16", "bf16") else "fp32"
    return zero.precision


def resolve_deepspeed(zero: ZeroSettings, model_dtype: str, where: str) -> tuple[ZeroSettings, list[str]]:
    """``zero`` as DeepSpeed runs it with a ``model_dtype`` model, and what the plan should warn about:

    - the gradient accumulation dtype made explicit (DeepSpeed's default is its model dtype, ``deepspeed_dtype``);
    - without ZeRO (stage 0) DeepSpeed supports only an accumulation dtype equal to that model dtype
      (``_do_optimizer_sanity_check`` raises NotImplementedError for another): a ValueError naming ``where``;
    - ZeRO-1 with bf16 and fp32 accumulation runs ``BF16_Optimizer`` unless the optimizer is offloaded to the CPU
      (``zero_cpu_offload`` is CPU only); that optimizer offloads nothing, so ``offload_optimizer: nvme`` leaves the
      fp32 master weights, the Adam moments and the step on the GPU: planned as not offloaded."""
    if not zero.enabled:
        return zero, []
    notes = []
    ds_dtype = deepspeed_dtype(zero, model_dtype)
    accum = zero.grad_accum_dtype or ds_dtype
    model_short = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(model_dtype, model_dtype)
    if ds_dtype != model_short:
        notes.append(f"{where}: DeepSpeed runs this {model_dtype} model as {ds_dtype} (its bf16 / fp16 sections"
                     + (f"; the weights are cast to {ds_dtype}" if ds_dtype != "fp32" else
                        ", not enabled: no mixed precision, fp32 master weights only in the ZeRO optimizer")
                     + "); planned with model.dtype's weights. \"bf16\": {\"enabled\": \"auto\"} follows model.dtype")
    if zero.stage == 0 and accum != ds_dtype:
        raise ValueError(f"{where}: zero_optimization.stage=0 with data_types.grad_accum_dtype={accum} and a "
                         f"{ds_dtype} model: DeepSpeed supports no such mix without ZeRO (deepspeed.initialize "
                         "raises NotImplementedError); use ZeRO stage 1-3 or drop grad_accum_dtype")
    zero = replace(zero, grad_accum_dtype=accum, precision=ds_dtype)
    if uses_bf16_optimizer(zero, model_dtype) and zero.offload_optimizer == "nvme":
        notes.append(f"{where}: ZeRO-1 with bf16 and fp32 gradient accumulation runs DeepSpeed's BF16_Optimizer, "
                     "which ignores offload_optimizer.device=nvme: the optimizer state is planned on the GPU (use "
                     "ZeRO-2/3 to offload it, or device cpu)")
        zero = replace(zero, offload_optimizer="none")
    return zero, notes


# ----------------------------------------------------------------------------------------------------------------
# items, bytes per GPU


def cuda_context_bytes(world: int) -> int:
    """CUDA context, cuBLAS handles and kernels (~1 GiB) + NCCL communicators and their buffers (~0.5 GiB, only with
    more than one GPU)."""
    return int((1.0 + (0.5 if world > 1 else 0.0)) * GiB)


def policy_weight_bytes(n_params: int, dtype_bytes: int, zero: ZeroSettings, world: int) -> int:
    """Policy weights in the model dtype: P * b on every GPU (plain PyTorch, ZeRO-0/1/2), P * b / W under ZeRO-3
    (its shard), 0 with ZeRO-3 ``offload_param`` (shards in host memory, fetched layer by layer: see
    ``zero3_gathered_bytes``)."""
    if zero.enabled and zero.stage == 3:
        return 0 if _offloaded(zero.offload_param) else math.ceil(n_params * dtype_bytes / world)
    return n_params * dtype_bytes


def master_weight_bytes(n_trainable: int, dtype_bytes: int, zero: ZeroSettings, world: int) -> int:
    """fp32 master weights of the trainable parameters, kept by DeepSpeed when the model runs in bf16/fp16:
    4 * P_train, / W under ZeRO-1/2/3, 0 on the GPU with ``offload_optimizer`` (they live with the optimizer in host
    memory). 0 for an fp32 model (its weights are the master) and without DeepSpeed (mmevo's torch AdamW then updates
    the model-dtype weights in place)."""
    if not zero.enabled or dtype_bytes == 4 or _offloaded(zero.offload_optimizer):
        return 0
    return math.ceil(4 * n_trainable / (world if zero.stage >= 1 else 1))


def adam_moment_bytes(n_trainable: int, dtype_bytes: int, zero: ZeroSettings, world: int) -> int:
    """AdamW's exp_avg and exp_avg_sq (allocated at the first step, kept from then on): under DeepSpeed 2 * 4 bytes
    per trainable parameter (they follow the fp32 master), / W under ZeRO-1/2/3, 0 on the GPU when offloaded; plain
    PyTorch 2 * b per trainable parameter (they follow the parameter's dtype)."""
    if not zero.enabled:
        return 2 * dtype_bytes * n_trainable
    if _offloaded(zero.offload_optimizer):
        return 0
    return math.ceil(8 * n_trainable / (world if zero.stage >= 1 else 1))


def grad_accum_bytes(dtype_bytes: int, zero: ZeroSettings) -> int:
    """Bytes per element of DeepSpeed's gradient accumulation (``data_types.grad_accum_dtype``; model dtype if
    unset)."""
    return DTYPE_BYTES.get(zero.grad_accum_dtype.lower(), dtype_bytes) if zero.grad_accum_dtype else dtype_bytes


def gradient_bytes(n_trainable: int, dtype_bytes: int, zero: ZeroSettings, world: int) -> int:
    """Gradients during the update.

    - plain PyTorch: ``.grad`` of every trainable parameter, P_train * b.
    - ZeRO-0/1: the full ``.grad`` (P_train * b) plus, when the accumulation dtype differs (bf16 + fp32), a full
      fp32 accumulation copy (P_train * 4: DeepSpeed's BF16_Optimizer / ``grad_accum`` attribute).
    - ZeRO-2: this rank's reduced partition in the accumulation dtype, P_train * acc / W (on the GPU even with
      ``offload_optimizer``; copied to the host at the boundary), plus the reduce buckets.
    - ZeRO-3: the same partition (a flat buffer allocated at start-up, in host memory with ``offload_optimizer``),
      plus the reduce buckets.
    Reduce buckets: ``reduce_bucket_size`` * b, twice with ``overlap_comm`` (one reducing while the next fills).
    """
    acc = grad_accum_bytes(dtype_bytes, zero)
    if not zero.enabled:
        return n_trainable * dtype_bytes
    if zero.stage <= 1:
        return n_trainable * dtype_bytes + (n_trainable * acc if acc != dtype_bytes else 0)
    buckets = zero.reduce_bucket_size * dtype_bytes * (2 if zero.overlap_comm else 1)
    if zero.stage == 3 and _offloaded(zero.offload_optimizer):
        return buckets
    return math.ceil(n_trainable * acc / world) + buckets


def uses_bf16_optimizer(zero: ZeroSettings, model_dtype: str) -> bool:
    """DeepSpeed runs ZeRO-1 with a bf16 model and fp32 gradient accumulation, optimizer not offloaded to the CPU,
    through its ``BF16_Optimizer`` (``DeepSpeedEngine._do_optimizer_sanity_check``), not the ZeRO optimizer."""
    return (zero.enabled and zero.stage == 1 and deepspeed_dtype(zero, model_dtype) == "bf16"
            and grad_accum_bytes(2, zero) == 4 and zero.offload_optimizer != "cpu")


def gradient_resident_bytes(n_trainable: int, dtype_bytes: int, zero: ZeroSettings, world: int,
                            model_dtype: str = "bfloat16") -> int:
    """Gradient memory held in every phase (allocated at start-up, kept for the run):
    - ZeRO-3: the flat partition buffer, P_train * acc / W (in host memory with ``offload_optimizer``), and with
      ``contiguous_gradients`` (DeepSpeed's default) the reduce bucket that gradients are copied into,
      ``reduce_bucket_size`` * b, on the GPU even with ``offload_optimizer`` (stage 3's ``ipg_buckets`` buffer; ZeRO-2
      frees its buckets after every step).
    - ZeRO-1 through ``BF16_Optimizer`` (``uses_bf16_optimizer``): its fp32 gradient buffer of the WHOLE model,
      4 * P_train (``fp32_groups_gradients_flat``, allocated in its constructor and only zeroed after each step).
    Everything else is freed after each optimizer step. At most ``gradient_bytes``: the update phase's gradients
    include these."""
    if uses_bf16_optimizer(zero, model_dtype):
        return 4 * n_trainable
    if not (zero.enabled and zero.stage == 3):
        return 0
    bucket = zero.reduce_bucket_size * dtype_bytes if zero.contiguous_gradients else 0
    if _offloaded(zero.offload_optimizer):
        return bucket
    return math.ceil(n_trainable * grad_accum_bytes(dtype_bytes, zero) / world) + bucket


def optimizer_step_bytes(n_trainable: int, dtype_bytes: int, zero: ZeroSettings, world: int,
                         largest_param: int = 0) -> int:
    """Temporaries of the optimizer step on the GPU, beyond the gradients and the optimizer states.

    torch's AdamW (foreach, mmevo's optimizer; DeepSpeed runs it too) forms sqrt(exp_avg_sq) as a new tensor for
    every parameter it steps at once (the other updates are in place):
    - plain PyTorch: all trainable parameters in one step, moments in the model dtype: P_train * b.
    - ZeRO-1/2: one parameter group at a time, over the rank's fp32 partition: 4 * P_train / W, plus the fp32
      copy of the gradient partition when the accumulation dtype is not fp32 (another 4 * P_train / W).
    - ZeRO-3: one sub-group of the rank's partition at a time; a sub-group closes once it reaches
      ``sub_group_size`` elements (DeepSpeed's default 1e9), so it holds up to that + one parameter's partition
      (``largest_param`` / W): the flattened fp32 gradient copy (``_prepare_fp32_grad_for_sub_group``) + the sqrt
      temporary, 8 * min(P_train / W, sub_group_size + largest_param / W).
    - offloaded optimizer: 0 (the step runs in host memory)."""
    if not zero.enabled:
        return n_trainable * dtype_bytes
    if _offloaded(zero.offload_optimizer):
        return 0
    part = math.ceil(n_trainable / (world if zero.stage >= 1 else 1))
    if zero.stage == 3:
        return 8 * min(part, zero.sub_group_size + math.ceil(largest_param / world))
    return 4 * part * (1 if grad_accum_bytes(dtype_bytes, zero) == 4 else 2)


def zero3_gathered_bytes(m: ModelDims, dtype_bytes: int, zero: ZeroSettings) -> int:
    """ZeRO-3's gathered working set in a forward/backward: the largest module gathered whole (embedding or lm_head
    [V, h], or one layer) plus its full gradient before the reduce-scatter, plus the prefetch bucket:
    (2 * largest + stage3_prefetch_bucket_size) * b. 0 without ZeRO-3 (the weights are already whole)."""
    if not (zero.enabled and zero.stage == 3):
        return 0
    return (2 * largest_gathered_params(m) + zero.prefetch_bucket_size) * dtype_bytes


def reference_bytes(n_params: int, dtype_bytes: int, kl_coef: float) -> int:
    """The reference (KL) model: a full replica of the policy in the model dtype, P * b (mmevo does not wrap it with
    DeepSpeed, so it is never ZeRO-sharded); absent when ``algo.kl_coef == 0``. Where it sits is the plan's business:
    on the GPU in every phase, or with ``model.ref_offload`` in host memory and on the GPU for its log-prob pass
    only."""
    return n_params * dtype_bytes if kl_coef > 0 else 0


def tokens_per_micro_batch(micro_batch_seqs: int, max_tokens_per_micro_batch: int, seq_len: int) -> int:
    """Tokens of the largest micro-batch: ``micro_batch_seqs`` sequences of ``seq_len`` = max prompt + max response
    tokens, capped by ``max_tokens_per_micro_batch`` when that is > 0 (a single longer sequence still forms its own
    micro-batch, hence max(cap, seq_len)). The cap bounds what the forward runs either way: the trainer charges a
    packed micro-batch its real tokens (a shared prompt once) and a padded one its padded tokens. Where packing puts
    a group's prompt in once, the uncapped worst case (``micro_batch_seqs * seq_len``) over-counts: conservative.
    With ``seq_len`` = R (P) the same bound is the most response positions (prompt tokens) a micro-batch holds."""
    tokens = micro_batch_seqs * seq_len
    if max_tokens_per_micro_batch > 0:
        tokens = min(tokens, max(max_tokens_per_micro_batch, seq_len))
    return tokens


def layer_activation_bytes(hidden: int, intermediate: int, kv_dim: int, dtype_bytes: int, q_dim: int = 0,
                           qk_norm: bool = False) -> int:
    """Activation bytes kept for backward per token by one pre-norm transformer layer with RMSNorm, GQA attention
    (flash / memory-efficient SDPA) and a SwiGLU MLP, without recomputation.

    Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models", Eq. 1) count
    s*b*h*(34 + 5*a*s/h) bytes per layer for a 16-bit GPT layer (LayerNorm, 4h GeLU MLP, dropout). Flash attention
    drops the 5*a*s/h term (no s x s scores are stored); Qwen has no dropout (no masks); the 4h GeLU MLP (19 h) becomes
    a SwiGLU MLP of width i; K and V are k*d wide. Per token:

      2 RMSNorms    2 * (4h fp32 input, kept by the fp32 upcast  + b*h normalised input of the weight multiply)
      attention     b*h q/k/v input + b*h rotated Q + 2*b*(k*d) K and V + b*h attention output (o_proj input)
      MLP           b*h gate/up input + 4*b*i (gate output for SiLU, SiLU output, up output, down_proj input)

    = 8h + b * (6h + 2*(k*d) + 4i); bf16 = 20h + 4*(k*d) + 8i. Qwen2.5-VL-7B: 225,280 B/token/layer, 28 layers
    = 6.3 MB per token (plain Korthikanti with a 4h MLP would give 34h = 0.12 MB per layer).

    Where the query width ``q_dim`` = a*d is not h (a config's own head_dim, as Qwen3-0.6B's 16 x 128 over h 1024),
    the rotated Q and the attention output are a*d wide: b * 2 * (a*d - h) more. Qwen3's q/k RMSNorms
    (``qk_norm``) keep their fp32 input and normalised output, (4 + b) * (a*d + k*d) more.

    The attention output is kept once: SDPA and flash attention return it in the [T, a, d] layout o_proj reads.
    Checked against the bytes autograd saves for one sequence, on CPU, in ``tests/test_memory_plan.py``. Not counted:
    where responses attend to a shared prompt packed once (``trainer.padding_free``), the attention kernel keeps
    each response's gathered copy of its prompt's K and V, 2*b*(k*d) per prompt token per response per layer (one
    layer's worth under checkpointing); on CPU, packed rows also keep the padded copies of Q, K, V and the attention
    output that their attention buckets gather, and each bucket's mask (with the gathered K / V, 7 % over this formula
    for the 7B-proportioned micro-batch of ``tests/test_memory_plan.py``).
    """
    q_dim = q_dim or hidden
    norms = (4 + dtype_bytes) * (q_dim + kv_dim) if qk_norm else 0
    return 8 * hidden + dtype_bytes * (4 * hidden + 2 * q_dim + 2 * kv_dim + 4 * intermediate) + norms


def _layer_act(m: ModelDims, dtype_bytes: int) -> int:
    """``layer_activation_bytes`` of one of ``m``'s decoder layers."""
    return layer_activation_bytes(m.hidden, m.intermediate, m.kv_dim, dtype_bytes, m.q_dim, m.qk_norm)


def lm_saved_activation_bytes(m: ModelDims, tokens: int, dtype_bytes: int, checkpointing: bool) -> int:
    """What the language model's forward over ``tokens`` tokens keeps for backward: every layer's
    ``layer_activation_bytes`` per token (L * act * T), or with ``model.gradient_checkpointing`` only each layer's
    input (L * b*h * T); plus the final norm's fp32 input and its normalised output ((4 + b) * h * T)."""
    act = _layer_act(m, dtype_bytes)
    per_layer = dtype_bytes * m.hidden if checkpointing else act
    return tokens * (m.layers * per_layer + (4 + dtype_bytes) * m.hidden)


def lm_activation_bytes(m: ModelDims, tokens: int, dtype_bytes: int, checkpointing: bool) -> int:
    """Language-model activations of one training micro-batch of ``tokens`` tokens at their peak in backward:
    ``lm_saved_activation_bytes``, plus one layer's activations recomputed at a time under checkpointing, plus the
    gradient workspace of the layer being back-propagated (about one layer's activations); act * T each."""
    act = _layer_act(m, dtype_bytes)
    backward = (2 if checkpointing else 1) * act * tokens
    return lm_saved_activation_bytes(m, tokens, dtype_bytes, checkpointing) + backward


def vision_block_activation_bytes(v: VisionDims, dtype_bytes: int) -> int:
    """Activation bytes one ViT block keeps for backward per patch, without recomputation (vh ViT width, vi its MLP
    width, b bytes of the model dtype):

      attention     b*vh qkv input + 3*b*vh fused qkv output (V is a view of it, so all of it stays) + 2*b*vh
                    rotated Q and K (the rotation runs in fp32 and is cast back: new tensors) + 2*b*vh attention
                    output (the kernel's own, and the windows concatenated for the output projection)
      Qwen2.5-VL    2 RMSNorms 2 * (4*vh fp32 input + b*vh normalised input of the weight multiply);
                    SwiGLU MLP b*vh input + 4*b*vi            -> 8*vh + b * (11*vh + 4*vi)
      Qwen2-VL      2 LayerNorms 2 * (b*vh input + 8 fp32 mean / rstd);
                    fc1 / QuickGELU / fc2 b*vh input + 3*b*vi -> b * (11*vh + 3*vi) + 16

    The attention terms differ from the language model's layer (``layer_activation_bytes``), whose separate q/k/v
    projections leave no fused output behind. Checked against the bytes autograd saves, on CPU, in
    ``tests/test_memory_plan.py``."""
    h, i, b = v.hidden, v.intermediate, dtype_bytes
    if v.gated:
        return 8 * h + b * (11 * h + 4 * i)
    return b * (11 * h + 3 * i) + 16


def vision_saved_activation_bytes(v: Optional[VisionDims], patches: int, dtype_bytes: int,
                                  checkpointing: bool) -> int:
    """What the ViT's forward over ``patches`` patches keeps for backward: every block's
    ``vision_block_activation_bytes`` per patch (each block's input, b*vh, under checkpointing), plus per patch the
    patch embedding's input (c * tp * p * p * b), the fp32 rotary cos and sin (8 * d, d = vh / heads) and the merger
    (norm: 4*vh fp32 input + b*vh for RMSNorm, b*vh + 8 for LayerNorm; then the first linear's input and the GELU's
    input and output, 3*b*vh per patch)."""
    if v is None or patches <= 0:
        return 0
    b = dtype_bytes
    per_block = b * v.hidden if checkpointing else vision_block_activation_bytes(v, b)
    patch_input = v.in_channels * v.temporal_patch * v.patch * v.patch * b
    rotary = 8 * (v.hidden // v.heads)
    merger = (4 * v.hidden + b * v.hidden if v.gated else b * v.hidden + 8) + 3 * b * v.hidden
    return patches * (v.depth * per_block + patch_input + rotary + merger)


def vision_activation_bytes(v: Optional[VisionDims], patches: int, dtype_bytes: int, checkpointing: bool,
                            frozen: bool) -> int:
    """ViT activations for ``patches`` patches at their peak in backward: ``vision_saved_activation_bytes``, plus one
    block recomputed at a time under checkpointing, plus one block's gradient workspace. 0 when the tower is frozen
    (nothing upstream needs gradients, so autograd keeps nothing)."""
    if v is None or frozen or patches <= 0:
        return 0
    act = vision_block_activation_bytes(v, dtype_bytes)
    backward = (2 if checkpointing else 1) * act * patches
    return vision_saved_activation_bytes(v, patches, dtype_bytes, checkpointing) + backward


def image_patches_per_micro_batch(v: Optional[VisionDims], prompt_tokens: int) -> int:
    """Worst case: every prompt token of the micro-batch is an image token (prompts up to ``data.max_prompt_length``
    pass the filter) and each sequence runs its own image (the unshared forward used under gradient checkpointing):
    merge^2 patches per image token. ``prompt_tokens``: the most prompt tokens one micro-batch can hold,
    ``tokens_per_micro_batch(micro_batch_seqs, budget, P)`` (not T * P / (P + R): under a token budget, sequences
    with full prompts and short responses fit more prompt tokens into it)."""
    if v is None:
        return 0
    return v.merge ** 2 * prompt_tokens


def nograd_activation_bytes(m: ModelDims, tokens: int, dtype_bytes: int) -> int:
    """A no-grad log-prob forward (eval mode): the KV cache of all layers for the micro-batch (the shared-prompt path
    keeps it, 2 * L * (k*d) * b per token) plus one layer's temporaries at a time (bounded by
    ``layer_activation_bytes`` per token)."""
    return tokens * (2 * m.layers * m.kv_dim * dtype_bytes
                     + _layer_act(m, dtype_bytes))


LOGITS_COPIES_TRAIN = 4.0  # fp32 logits, log-softmax kept for backward, softmax (entropy), the logits' gradient
LOGITS_COPIES_NO_GRAD = 2.0  # fp32 logits and the log-softmax / softmax being formed


def logits_bytes(positions: int, vocab: int, copies: float) -> int:
    """fp32 logits [positions, V] * 4 bytes * ``copies`` (the bf16 head output and small temporaries are within the
    factor's rounding). ``positions`` = ``trainer.logits_chunk_tokens`` when > 0 (one chunk alive at a time, recomputed
    in backward), else every response token of the micro-batch (only response positions go through the head)."""
    return int(positions * vocab * 4 * copies)


VLLM_ASLEEP_BASE_GIB = 0.5  # what a sleeping vLLM keeps outside its pools (allocator leftovers, small buffers)
VLLM_CUDA_GRAPHS_GIB = 1.0  # CUDA-graph pools (rollout.enforce_eager=false); not part of the sleep pools


def vllm_bytes(awake: bool, gpu_memory_utilization: float, gpu_mem_bytes: int, enable_sleep_mode: bool,
               sleep_level: int, enforce_eager: bool) -> int:
    """A colocated vLLM engine on this GPU.

    Awake: ``gpu_memory_utilization`` * GPU memory (weights, activation workspace, CUDA graphs and the KV cache are
    all sized inside that budget). Asleep with ``rollout.enable_sleep_mode``: vLLM's CuMem pools are unmapped: level 1
    copies the weights to pinned host memory first (see ``host`` in the plan) and drops the KV cache, level 2 drops
    both, so either level frees both pools on the GPU (vLLM's ``CuMemAllocator.sleep``); what stays is the memory
    outside the pools: ~0.5 GiB, + ~1 GiB of CUDA-graph pools unless ``enforce_eager``. Without sleep mode the engine
    keeps its whole budget in every phase."""
    budget = int(gpu_memory_utilization * gpu_mem_bytes)
    if awake or not enable_sleep_mode:
        return budget
    return int((VLLM_ASLEEP_BASE_GIB + (0 if enforce_eager else VLLM_CUDA_GRAPHS_GIB)) * GiB)


def vllm_weight_bytes(n_params: int, dtype_bytes: int, tensor_parallel_size: int = 1) -> int:
    """vLLM's own copy of the weights inside its budget on one GPU: P * b / tp (its linears, embedding and lm_head
    are split over the ``tensor_parallel_size`` GPUs; the few replicated norms are left out). P counts the base
    model only: LoRA adapters are merged into the base weights before the sync. Asleep: in pinned host memory at
    level 1, discarded at level 2."""
    return math.ceil(n_params * dtype_bytes / tensor_parallel_size)


def vllm_kv_bytes_per_token(m: ModelDims, dtype_bytes: int, tensor_parallel_size: int = 1) -> int:
    """K and V of every layer for one token on one GPU: 2 * L * (k*d) * b (Qwen2.5-VL-7B: 57,344 B); with tensor
    parallelism each GPU holds max(1, k // tp) KV heads (vLLM's ``get_num_kv_heads``: replicated below one a GPU)."""
    return 2 * m.layers * max(1, m.kv_heads // tensor_parallel_size) * m.d * dtype_bytes


def vllm_kv_cache_max_bytes(gpu_memory_utilization: float, gpu_mem_bytes: int, weight_bytes: int,
                            enforce_eager: bool) -> int:
    """The most vLLM can give its KV cache: its budget minus its weights and CUDA graphs (vLLM also subtracts the
    peak activations of its profiling run, which the planner does not know: the real cache is smaller)."""
    graphs = 0 if enforce_eager else int(VLLM_CUDA_GRAPHS_GIB * GiB)
    return max(0, int(gpu_memory_utilization * gpu_mem_bytes) - weight_bytes - graphs)


def hf_rollout_bytes(m: ModelDims, batch_seqs: int, prompt_len: int, response_len: int, dtype_bytes: int) -> int:
    """Sampling with the HF engine (``rollout.engine=hf``): KV cache of ``rollout.max_batch_seqs`` sequences at full
    length, 2 * L * (k*d) * b per token, + the prefill's per-layer temporaries for all prompt tokens at once
    (``layer_activation_bytes`` per prompt token) + one decoding step's fp32 logits (2 copies of [batch, V]).
    An upper bound where rows share prefixes: with mmevo's attention the engine keeps each distinct prefix's KV once
    (``mmevo.rollout.kv_cache.SharedPrefixCache``), not once per row."""
    kv = batch_seqs * (prompt_len + response_len) * 2 * m.layers * m.kv_dim * dtype_bytes
    prefill = batch_seqs * prompt_len * _layer_act(m, dtype_bytes)
    return kv + prefill + logits_bytes(batch_seqs, m.vocab, 2)


WEIGHT_SYNC_BUCKET = 256 * 1024 ** 2  # gathered ZeRO-3 weights are streamed into vLLM 256 MiB at a time


def weight_sync_bytes(m: ModelDims, dtype_bytes: int, zero: ZeroSettings, lora_targets=()) -> int:
    """The trainer's side of ``VLLMEngine.sync_weights``. Under ZeRO-3 (``mmevo.models.weights.raw_state_items``)
    parameters are gathered in buckets that close once they reach ``WEIGHT_SYNC_BUCKET``, so a bucket holds up to
    256 MiB + the largest parameter (the embedding or lm_head [V, h], 1.02 GiB for Qwen2.5-VL-7B), and each gathered
    tensor is cloned before it is yielded, while the bucket stays gathered: 2 * (256 MiB + largest * b), 2.53 GiB
    for 7B. Without ZeRO-3 the live tensors are streamed as they are (same dtype): 0. With LoRA, plus the merge's
    temporaries (``lora_merge_bytes``)."""
    merge = lora_merge_bytes(m, lora_targets)
    if not (zero.enabled and zero.stage == 3):
        return merge
    return 2 * (WEIGHT_SYNC_BUCKET + largest_param_numel(m) * dtype_bytes) + merge


def lora_merge_bytes(m: ModelDims, lora_targets=()) -> int:
    """With LoRA adapters on ``lora_targets`` (empty: none), the sync and the export merge each adapted linear out of
    place (``mmevo.models.adapters.merge_lora_items``): the fp32 delta s * B @ A, the fp32 base weight and their fp32
    sum are alive at once, 12 * n bytes for the largest adapted linear of n elements (the cast back to the model dtype
    comes after the upcast weight is freed; Qwen2.5-VL-7B's MLP [18944, 3584]: 0.76 GiB; q_proj / o_proj only:
    0.14 GiB). The merged tensor itself is the clone the bucket accounting already counts."""
    if not lora_targets:
        return 0
    shapes = lm_linear_shapes(m)
    adapted = {name.rsplit(".", 1)[-1] for name in lora_adapted_linears(m, lora_targets)}
    return 12 * max(shapes[t][0] * shapes[t][1] for t in adapted)


# ----------------------------------------------------------------------------------------------------------------
# the plan


def _resolve_file(path: str, config_path: str | Path | None) -> Path:
    """A relative path as given (from the working directory), else from the repository the config file sits in
    (configs/x.yaml -> its parent's parent), else from mmevo's source tree."""
    p = Path(path).expanduser()
    if p.is_absolute() or p.exists():
        return p
    roots = [Path(config_path).resolve().parent.parent] if config_path else []
    roots.append(Path(__file__).resolve().parent.parent)
    for root in roots:
        if (root / p).exists():
            return root / p
    raise FileNotFoundError(f"trainer.deepspeed={path}: file not found")


def _model_path(cfg) -> str:
    """The embedded models (``mmevo.config.TINY_ALIASES``) are built once into ``model.cache_dir`` (as for
    training); anything else as given."""
    from mmevo.config import TINY_ALIASES

    if cfg.model.path in TINY_ALIASES:
        out = Path(cfg.model.cache_dir) / TINY_ALIASES[cfg.model.path]
        if not (out / "config.json").exists():
            import contextlib
            import sys

            with contextlib.redirect_stdout(sys.stderr):  # the build's imports log to stdout, where the JSON goes
                from mmevo.models.tiny import build_tiny

                build_tiny(cfg.model.path, out)
        return str(out)
    return cfg.model.path


def _gib(x: float) -> float:
    return round(x / GiB, 2)


def _dtype_bytes(dtype: str) -> int:
    b = DTYPE_BYTES.get(dtype)
    if b is None:
        raise ValueError(f"model.dtype={dtype!r} not in {sorted(DTYPE_BYTES)}")
    return b


def _vision_frozen(cfg) -> bool:
    """The ViT gets no gradients: ``model.freeze_vision_tower``, or LoRA (adapters on the language model only)."""
    return cfg.model.freeze_vision_tower or cfg.model.lora.rank > 0


def param_counts(cfg, m: ModelDims) -> tuple[int, int]:
    """(all parameters, LoRA adapters included; trainable parameters) of ``cfg``'s model with dimensions ``m``."""
    lora = cfg.model.lora
    n_total = total_params(m) + (lora_params(m, lora.rank, lora.target_modules) if lora.rank > 0 else 0)
    return n_total, trainable_params(m, lora.rank, lora.target_modules, cfg.model.freeze_vision_tower)


def logits_positions(chunk_tokens: int, response_positions: int) -> int:
    """Positions whose logits are alive at once: one ``trainer.logits_chunk_tokens`` chunk when > 0, else every
    response position of the micro-batch."""
    return min(chunk_tokens, response_positions) if chunk_tokens > 0 else response_positions


def item_bytes(cfg, m: ModelDims, zero: ZeroSettings, world: int, gpu_mem_bytes: int, tokens: int,
               response_positions: int, patches: int) -> dict[str, int]:
    """Every item of the plan, in bytes on one GPU, for training micro-batches whose forward runs ``tokens`` tokens with
    ``response_positions`` response positions and ``patches`` image patches: ``plan`` passes the worst case that the
    settings allow, scripts/rehearse_7b.py the micro-batch it ran."""
    b = _dtype_bytes(cfg.model.dtype)
    n_total, n_train = param_counts(cfg, m)
    ckpt = cfg.model.gradient_checkpointing
    positions = logits_positions(cfg.trainer.logits_chunk_tokens, response_positions)
    items = {
        "cuda_context_nccl": cuda_context_bytes(world),
        "policy_weights": policy_weight_bytes(n_total, b, zero, world),
        "master_weights_fp32": master_weight_bytes(n_train, b, zero, world),
        "adam_moments": adam_moment_bytes(n_train, b, zero, world),
        "gradients": gradient_bytes(n_train, b, zero, world),
        "gradients_resident": gradient_resident_bytes(n_train, b, zero, world, cfg.model.dtype),
        "zero3_gathered_params": zero3_gathered_bytes(m, b, zero),
        "reference": reference_bytes(total_params(m), b, cfg.algo.kl_coef),
        "activations": lm_activation_bytes(m, tokens, b, ckpt),
        "activations_vision": vision_activation_bytes(m.vision, patches, b, ckpt, _vision_frozen(cfg)),
        "logits": logits_bytes(positions, m.vocab, LOGITS_COPIES_TRAIN),
        "nograd_activations": nograd_activation_bytes(m, tokens, b),
        "nograd_logits": logits_bytes(positions, m.vocab, LOGITS_COPIES_NO_GRAD),
        "optimizer_step": optimizer_step_bytes(n_train, b, zero, world, largest_param_numel(m)),
    }
    r = cfg.rollout
    if r.engine == "vllm":
        for key, awake in (("vllm_awake", True), ("vllm_asleep", False)):
            items[key] = vllm_bytes(awake, r.gpu_memory_utilization, gpu_mem_bytes, r.enable_sleep_mode,
                                    r.sleep_level, r.enforce_eager)
        # the parts of vllm_awake (not added again): its weights and the most its KV cache can get
        items["vllm_weights"] = vllm_weight_bytes(total_params(m), b, r.tensor_parallel_size)
        items["vllm_kv_cache_max"] = vllm_kv_cache_max_bytes(r.gpu_memory_utilization, gpu_mem_bytes,
                                                             items["vllm_weights"], r.enforce_eager)
        items["weight_sync_buffers"] = weight_sync_bytes(
            m, b, zero, cfg.model.lora.target_modules if cfg.model.lora.rank > 0 else ())
    else:
        items["hf_rollout"] = hf_rollout_bytes(m, r.max_batch_seqs, cfg.data.max_prompt_length, r.max_tokens, b)
        # ZeRO-3 HF sampling gathers the whole model on every rank (mmevo.grpo.distributed.zero3_full_weights)
        items["hf_gathered_weights"] = n_total * b if zero.enabled and zero.stage == 3 else 0
    return items


def plan(cfg, gpus: int = 1, gpu_mem_gib: float = 80.0, config_path: str | Path | None = None,
         dims: ModelDims | None = None) -> dict[str, Any]:
    """The per-GPU memory plan of ``cfg`` (an ``mmevo.config.Config``) on ``gpus`` GPUs of ``gpu_mem_gib`` GiB."""
    if not is_integer_number(gpus) or gpus < 1:
        raise ValueError(f"--gpus must be an integer >= 1, got gpus={gpus!r}")
    # NaN too; at least one byte (the headroom divides by it) and a finite byte count (1e300 GiB overflowed)
    if (not is_real_number(gpu_mem_gib)
            or not 1 <= float(gpu_mem_gib) * GiB < math.inf):
        raise ValueError(f"--gpu-mem-gib must be a finite number > 0 (at least one byte), "
                         f"got gpu_mem_gib={gpu_mem_gib!r}")
    gpu_mem_gib = float(gpu_mem_gib)  # a numpy scalar would not go into the JSON
    m = dims or model_dims(_model_path(cfg))
    b = _dtype_bytes(cfg.model.dtype)
    zero = ZeroSettings()
    if cfg.trainer.deepspeed:
        zero = read_deepspeed(_resolve_file(cfg.trainer.deepspeed, config_path))
    W = int(gpus)
    mem = int(gpu_mem_gib * GiB)
    t, r = cfg.trainer, cfg.rollout
    warnings = []
    if W > 1 and not zero.enabled:
        warnings.append("more than one GPU without trainer.deepspeed: every GPU is planned to hold everything")
    if zero.enabled and _offloaded(zero.offload_optimizer) and zero.force_ds_cpu_optimizer:
        warnings.append("offload_optimizer with mmevo's torch AdamW needs \"zero_force_ds_cpu_optimizer\": false in "
                        "the DeepSpeed config, else deepspeed.initialize raises")
    if zero.enabled:
        zero, notes = resolve_deepspeed(zero, cfg.model.dtype, f"trainer.deepspeed={cfg.trainer.deepspeed}")
        warnings += notes
    if zero.enabled and r.engine == "vllm" and r.tensor_parallel_size != 1:
        warnings.append(f"rollout.tensor_parallel_size={r.tensor_parallel_size} with trainer.deepspeed: the vLLM "
                        "engine refuses to start (under DeepSpeed every rank runs its own engine on its own GPU, "
                        "tensor_parallel_size=1)")
    if cfg.model.trainable:
        warnings.append(f"model.trainable={list(cfg.model.trainable)!r} is not modelled: every parameter is planned as "
                        "trainable (gradients and optimizer state are an upper bound)")

    if cfg.model.freeze_vision_tower and m.vision is None and cfg.model.lora.rank == 0:  # as configure_training
        raise ValueError(f"model.freeze_vision_tower=true, but {cfg.model.path} has no vision tower (a text-only "
                         "model): the trainer refuses it")
    n_total, n_train = param_counts(cfg, m)
    P, R = cfg.data.max_prompt_length, r.max_tokens
    from mmevo.config import MMZeroConfig

    if cfg.mmzero != MMZeroConfig():
        if r.engine == "vllm":  # mmevo.rollout.shared_vllm: the frozen roles' modules hold no weights
            warnings.append("mmzero: this is the plan of one role's GRPO run with the base config's lengths; the frozen "
                            "roles sample through the same vLLM engine (one per process, its context sized for the "
                            "longest role) and hold no weights of their own on the GPU, so they add nothing to it")
        else:
            warnings.append("mmzero: this is the plan of one role's GRPO run; the frozen roles are not in it (with "
                            f"rollout.engine=hf each keeps its model on {cfg.model.device} "
                            f"({_gib(total_params(m) * b)} GiB) and its own KV cache while it samples)")
    S = P + R
    T = tokens_per_micro_batch(t.micro_batch_seqs, t.max_tokens_per_micro_batch, S)
    # each at its own worst: a budgeted micro-batch of short prompts holds more response positions than T * R / S,
    # one of full prompts and short responses more prompt (image) tokens than T * P / S; without a budget the same
    response_positions = tokens_per_micro_batch(t.micro_batch_seqs, t.max_tokens_per_micro_batch, R)
    patches = image_patches_per_micro_batch(
        m.vision, tokens_per_micro_batch(t.micro_batch_seqs, t.max_tokens_per_micro_batch, P))
    items = item_bytes(cfg, m, zero, W, mem, T, response_positions, patches)
    vllm = r.engine == "vllm"
    kv_tokens = items["vllm_kv_cache_max"] // vllm_kv_bytes_per_token(m, b, r.tensor_parallel_size) if vllm else 0
    context = P + max(R, t.eval_max_tokens)  # vLLM's max_model_len (rollout.factory): held-out budgets count too
    if vllm and kv_tokens < context:
        warnings.append(f"vLLM's budget (rollout.gpu_memory_utilization={r.gpu_memory_utilization}) leaves a KV cache "
                        f"for at most {kv_tokens} tokens after its weights and CUDA graphs, under one sequence of "
                        f"{context} (its max_model_len: data.max_prompt_length + the larger of rollout.max_tokens and "
                        "trainer.eval_max_tokens): vLLM refuses to start")

    ref_offload = cfg.model.ref_offload
    resident = {k: items[k] for k in ("cuda_context_nccl", "policy_weights", "master_weights_fp32", "adam_moments")}
    resident["gradients"] = items["gradients_resident"]
    resident["reference"] = 0 if ref_offload else items["reference"]
    asleep = {"vllm_asleep": items["vllm_asleep"]} if vllm else {}
    phases = {
        "rollout": {**resident, **({"vllm_awake": items["vllm_awake"],
                                    "weight_sync_buffers": items["weight_sync_buffers"]}
                                   if vllm else {"hf_rollout": items["hf_rollout"],
                                                 "hf_gathered_weights": items["hf_gathered_weights"]})},
        "logprob": {**resident, **asleep, "reference": items["reference"] if ref_offload else resident["reference"],
                    "zero3_gathered_params": items["zero3_gathered_params"],
                    "nograd_activations": items["nograd_activations"], "nograd_logits": items["nograd_logits"]},
        "update": {**resident, **asleep, "gradients": items["gradients"],
                   "zero3_gathered_params": items["zero3_gathered_params"], "activations": items["activations"],
                   "activations_vision": items["activations_vision"], "logits": items["logits"]},
        "optimizer_step": {**resident, **asleep, "gradients": items["gradients"],
                           "optimizer_step": items["optimizer_step"]},
    }
    totals = {name: sum(parts.values()) for name, parts in phases.items()}
    peak_phase = max(totals, key=totals.get)
    peak = totals[peak_phase]

    host = {  # host memory per GPU (rank) that these settings imply, for the node's RAM
        # fp32 master / optimizer params (4) + Adam moments (8) + the host-side fp32 (ZeRO-3: accumulation-dtype) grads
        "optimizer_offload": math.ceil(n_train * (12 + (grad_accum_bytes(b, zero) if zero.stage == 3 else 4))
                                       / (W if zero.stage >= 1 else 1))
        if zero.enabled and _offloaded(zero.offload_optimizer) else 0,
        "param_offload": math.ceil(n_total * b / W) if _offloaded(zero.offload_param) else 0,
        "reference_offload": items["reference"] if ref_offload else 0,
        # vLLM's (merged, this GPU's share of the) weights, not the policy's with its LoRA adapters
        "vllm_sleep_level1_weights": items["vllm_weights"] if vllm and r.enable_sleep_mode and r.sleep_level == 1
        else 0,
    }
    return {
        "config": str(config_path) if config_path else None,
        "model": {"path": cfg.model.path, "dims_from": m.source, "dtype": cfg.model.dtype,
                  "params_b": round(n_total / 1e9, 3), "trainable_params_b": round(n_train / 1e9, 3),
                  "vision_params_b": round(vision_params(m.vision) / 1e9, 3), "hidden": m.hidden, "layers": m.layers,
                  "vocab": m.vocab},
        "setup": {"gpus": W, "gpu_mem_gib": gpu_mem_gib,
                  "deepspeed": cfg.trainer.deepspeed or None, "zero_stage": zero.stage if zero.enabled else None,
                  "offload_optimizer": zero.offload_optimizer, "offload_param": zero.offload_param,
                  "grad_accum_dtype": zero.grad_accum_dtype or (cfg.model.dtype if zero.enabled else None),
                  "gradient_checkpointing": cfg.model.gradient_checkpointing, "tokens_per_micro_batch": T,
                  "logits_positions": logits_positions(t.logits_chunk_tokens, response_positions),
                  "image_patches_per_micro_batch": patches if not _vision_frozen(cfg) else 0,
                  "ref_offload": ref_offload, "kl_coef": cfg.algo.kl_coef, "rollout_engine": r.engine,
                  **({"gpu_memory_utilization": r.gpu_memory_utilization, "sleep_mode": r.enable_sleep_mode,
                      "sleep_level": r.sleep_level, "cuda_graphs": not r.enforce_eager,
                      "vllm_kv_cache_max_tokens": kv_tokens}
                     if vllm else {})},
        "per_gpu_gib": {k: _gib(v) for k, v in items.items()},
        "phases_gib": {name: {**{k: _gib(v) for k, v in parts.items() if v}, "total": _gib(totals[name])}
                       for name, parts in phases.items()},
        "peak_phase": peak_phase,
        "peak_gib": _gib(peak),
        "limit_gib": round(gpu_mem_gib * (1 - HEADROOM), 2),
        "headroom_frac": round(1 - peak / mem, 3),
        "fits": peak <= mem * (1 - HEADROOM),
        "host_gib_per_gpu": {k: _gib(v) for k, v in host.items() if v},
        "warnings": warnings,
    }
