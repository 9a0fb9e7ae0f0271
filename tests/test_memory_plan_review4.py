"""Review 4 of the memory planner (mmevo.memory_plan): config.json fields read as transformers' Qwen classes read
them (attention biases, absent num_key_value_heads / head_dim, a VL model's head_dim, tied embeddings in
text_config, in_chans), the layer activation formula for a query width other than the hidden size and for Qwen3's
q/k norms, and GPU memory sizes whose byte count is 0 or overflows. Expected counts are by hand, checked against
transformers models built on the meta device."""

import json

import numpy as np
import pytest

from mmevo import memory_plan as mp
from mmevo.config import load_config

# h 64, i 64, 2 layers, 4 heads (d 16) / 2 KV heads, vocab 300, untied. Qwen2 layer: q/o 2 * 64*64, k/v 2 * 64*32,
# q/k/v biases 64 + 2*32, MLP 3 * 64*64, norms 2*64 = 24,832; model 2 layers + 2 * 300*64 + 64 = 88,128
TEXT = dict(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=300)
VISION = dict(depth=1, hidden_size=32, intermediate_size=40, num_heads=2, out_hidden_size=64, patch_size=14,
              spatial_merge_size=2, temporal_patch_size=2, in_channels=3)
# Qwen2.5-VL tower above: patch 3*2*14*14*32 = 37,632; block qkv 32*96+96, proj 32*32+32, gate/up/down
# 3*32*40 + 2*40 + 32, norms 64 = 8,240; merger norm 32 + 128*128+128 + 128*64+64 = 24,800 -> 70,496
VISION_PARAMS = 37_632 + 8_240 + 24_800


def _no(key):
    return {k: v for k, v in TEXT.items() if k != key}


@pytest.mark.parametrize("config, expected", [
    # Qwen2 (and Qwen2-VL / Qwen2.5-VL) always give q/k/v biases: attention_bias false changes nothing
    ({"model_type": "qwen2", **TEXT, "attention_bias": False}, 88_128),
    ({"model_type": "qwen2_5_vl", **TEXT, "attention_bias": False, "vision_config": VISION}, 88_128 + VISION_PARAMS),
    # Qwen3's attention_bias puts biases on q, k, v AND o (64 + 32 + 32 + 64), q/k norms 2*16: 24,928 a layer
    ({"model_type": "qwen3", **TEXT, "head_dim": 16, "attention_bias": True}, 2 * 24_928 + 38_400 + 64),
    # no num_key_value_heads: Qwen2Config's default 32 KV heads (k*d = 512): k/v 2 * 64*512, biases 64 + 1024
    ({"model_type": "qwen2", **_no("num_key_value_heads")}, 2 * (4096 + 65_536 + 4096 + 1088 + 12_288 + 128)
     + 38_400 + 64),
    # Qwen2.5-VL's text default is 8 KV heads (k*d = 128): k/v 2 * 64*128, biases 64 + 256 -> 37,312 a layer
    ({"model_type": "qwen2_5_vl", **_no("num_key_value_heads"), "vision_config": VISION},
     2 * 37_312 + 38_400 + 64 + VISION_PARAMS),
    # null num_key_value_heads: no GQA (4 KV heads, k*d = 64): 4 * 4096 + 64 + 128 + MLP + norms = 28,992 a layer
    ({"model_type": "qwen2", **TEXT, "num_key_value_heads": None}, 2 * 28_992 + 38_400 + 64),
    # no head_dim in a Qwen3 config: Qwen3Config's 128 (q 512, k/v 256 wide), q/k norms 2*128, no biases
    ({"model_type": "qwen3", **TEXT}, 2 * (3 * 32_768 + 256 + 12_288 + 128) + 38_400 + 64),
    # Qwen2.5-VL / Qwen2-VL's attention ignores head_dim (d = h / a = 16): same as without it
    ({"model_type": "qwen2_5_vl", **TEXT, "head_dim": 32, "vision_config": VISION}, 88_128 + VISION_PARAMS),
    # Qwen2's attention takes it: d 32 -> q/o 2 * 64*128, k/v 2 * 64*64, biases 128 + 128 = 37,248 a layer
    ({"model_type": "qwen2", **TEXT, "head_dim": 32}, 2 * (16_384 + 8_192 + 256 + 12_288 + 128) + 38_400 + 64),
    # pre-v5 VL files keep tie_word_embeddings in text_config; a top-level false does not untie it (-300*64)
    ({"model_type": "qwen2_5_vl", "tie_word_embeddings": False, "text_config": {**TEXT, "tie_word_embeddings": True},
      "vision_config": VISION}, 88_128 - 19_200 + VISION_PARAMS),
    # the hub's in_chans is read by neither transformers nor vLLM: the patch embedding has in_channels' 3
    ({"model_type": "qwen2_5_vl", **TEXT,
      "vision_config": {**{k: v for k, v in VISION.items() if k != "in_channels"}, "in_chans": 1}},
     88_128 + VISION_PARAMS),
])
def test_config_json_fields_are_read_as_transformers_reads_them(config, expected):
    assert mp.total_params(mp.dims_from_config(json.loads(json.dumps(config)))) == expected


def test_counts_match_transformers_models_on_the_meta_device(tmp_path):
    """The same configs through transformers' own config classes and models (no weights allocated)."""
    import torch

    from mmevo.models import loader  # noqa: F401  the CPU processor shim, before transformers' VL modules
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    for i, config in enumerate([{"model_type": "qwen3", **TEXT, "attention_bias": True},
                                {"model_type": "qwen2", **_no("num_key_value_heads"), "attention_bias": False},
                                {"model_type": "qwen2_vl", **TEXT, "head_dim": 32, "vision_config": {
                                    "depth": 1, "embed_dim": 32, "hidden_size": 64, "num_heads": 2, "in_chans": 1}}]):
        d = tmp_path / str(i)
        d.mkdir()
        (d / "config.json").write_text(json.dumps(config))
        auto = AutoModelForImageTextToText if "vision_config" in config else AutoModelForCausalLM
        with torch.device("meta"):
            model = auto.from_config(AutoConfig.from_pretrained(d))
        assert mp.total_params(mp.model_dims(str(d))) == sum(p.numel() for p in model.parameters()), config


def test_vl_config_whose_heads_do_not_divide_the_hidden_size_is_a_clear_error():
    """Qwen2.5-VL's attention takes d = h / a and refuses a remainder (a head_dim key does not help)."""
    with pytest.raises(ValueError, match="hidden_size=96 is not a multiple of num_attention_heads=7"):
        mp.dims_from_config({"model_type": "qwen2_5_vl", **TEXT, "hidden_size": 96, "num_attention_heads": 7,
                             "num_key_value_heads": 1, "head_dim": 16})


def test_layer_activations_with_a_query_width_other_than_hidden_and_qk_norms_by_hand():
    """Qwen3-0.6B: h 1024, i 3072, 16 heads of 128 (a*d = 2048), 8 KV heads (k*d = 1024), bf16. Rotated Q and the
    attention output are 2048 wide and the q/k norms keep (4 + 2) * (2048 + 1024): 8*1024 + 2 * (4*1024 + 2*2048 +
    2*1024 + 4*3072) + 6 * 3072 = 71,680 bytes per token per layer (was 49,152, as if a*d were h and no norms)."""
    m = mp.dims_from_config({"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
                             "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
                             "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": True})
    assert mp.layer_activation_bytes(1024, 3072, 1024, 2, q_dim=2048, qk_norm=True) == 71_680
    # saved for backward over 10 tokens, no checkpointing: 10 * (28 * 71,680 + (4 + 2) * 1024 final norm)
    assert mp.lm_saved_activation_bytes(m, 10, 2, False) == 10 * (28 * 71_680 + 6_144)
    # no-grad pass: 10 * (KV 2 * 28 * 1024 * 2 + one layer 71,680)
    assert mp.nograd_activation_bytes(m, 10, 2) == 10 * (114_688 + 71_680)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_qwen3_layer_formula_matches_what_autograd_saves(dtype):
    """A 2-layer Qwen3 decoder with 8 heads of 64 over h 256 (a*d = 2h, as Qwen3-0.6B) and q/k norms: the bytes
    autograd keeps for backward are within 2 % of the planner's (the shared rotary tables are left out); the
    formula that took a*d = h and no norms was 27-31 % under."""
    import torch
    from transformers import Qwen3Config, Qwen3Model

    import mmevo.models.attention  # noqa: F401  registers "sdpa_gqa"
    from test_memory_plan import _saved_for_backward_bytes

    torch.manual_seed(0)
    config = Qwen3Config(hidden_size=256, intermediate_size=768, num_hidden_layers=2, num_attention_heads=8,
                         num_key_value_heads=4, head_dim=64, vocab_size=128, max_position_embeddings=256,
                         tie_word_embeddings=False)
    config._attn_implementation = "sdpa_gqa"
    model = Qwen3Model(config).to(getattr(torch, dtype)).train()
    tokens = 64
    ids = torch.randint(0, 128, (1, tokens))
    measured = _saved_for_backward_bytes(model, lambda: model(input_ids=ids, use_cache=False).last_hidden_state)
    planned = mp.lm_saved_activation_bytes(mp.dims_from_config(config.to_dict()), tokens, mp.DTYPE_BYTES[dtype],
                                           False)
    assert planned <= measured <= planned * 1.02, (measured / tokens, planned / tokens)


CSRS_7B = "configs/csrs_qwen2_5_vl_7b_geometry3k.yaml"


@pytest.mark.parametrize("mem", [1e-300, 5e-324, 1e300, 1.7e308])
def test_gpu_memory_whose_byte_count_is_zero_or_overflows_is_a_clear_error(mem):
    """1e-300 GiB is 0 bytes (the headroom divided by zero); 1e300 GiB overflows to an infinite byte count."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    with pytest.raises(ValueError, match="^--gpu-mem-gib must be a finite number > 0"):
        mp.plan(load_config(root / CSRS_7B, []), 8, mem, config_path=root / CSRS_7B)


def test_numpy_gpu_memory_gives_a_json_plan():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    p = mp.plan(load_config(root / CSRS_7B, []), np.int64(8), np.float32(80), config_path=root / CSRS_7B)
    assert json.loads(json.dumps(p))["setup"]["gpu_mem_gib"] == 80.0 and p["limit_gib"] == 73.6
