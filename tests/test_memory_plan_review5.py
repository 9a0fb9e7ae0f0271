"""Review 5 of the 7B-scale items: the planner refuses a config.json of an architecture its formulas do not model
instead of planning it silently wrong."""

from pathlib import Path

import pytest

from mmevo import memory_plan as mp

ROOT = Path(__file__).resolve().parent.parent
CFG_7B = ROOT / "configs" / "qwen2_5_vl_7b_geometry3k.yaml"
TEXT = dict(hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=300)
# Qwen3-30B-A3B's config.json (its dims): 128 experts of width 768 per layer, 30.5e9 parameters in all
QWEN3_MOE = dict(model_type="qwen3_moe", hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768,
                 num_experts=128, num_experts_per_tok=8, num_hidden_layers=48, num_attention_heads=32,
                 num_key_value_heads=4, head_dim=128, vocab_size=151936, tie_word_embeddings=False)


@pytest.mark.parametrize("config, named", [
    (QWEN3_MOE, "model_type='qwen3_moe'"),  # planned as a dense Qwen3 it was 3.3e9 parameters, not 30.5e9
    ({"model_type": "qwen2_moe", **TEXT, "num_experts": 60}, "model_type='qwen2_moe'"),
    ({"model_type": "llama", **TEXT}, "model_type='llama'"),  # planned with Qwen2's q/k/v biases
    ({"model_type": "llava", "text_config": {"model_type": "mistral", **TEXT}}, "model_type='mistral'"),
    (TEXT, "no 'model_type'"),
])
def test_a_model_type_the_planner_does_not_model_is_refused_naming_it(config, named):
    with pytest.raises(ValueError, match=f"x/config.json: {named}"):
        mp.dims_from_config(config, "x/config.json")


@pytest.mark.parametrize("model_type", ["qwen2", "qwen2_vl", "qwen2_5_vl", "qwen3"])
def test_the_planned_model_types_still_plan(model_type):
    top = {"model_type": model_type, "text_config": {**TEXT, "model_type": f"{model_type}_text"}}
    assert mp.dims_from_config(top).layers == 2 and mp.dims_from_config({"model_type": model_type, **TEXT}).hidden == 64
