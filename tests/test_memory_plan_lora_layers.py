"""The memory planner counts exactly the LoRA adapters the trainer's PEFT call adds: a layer-specific target
(``layers.0.self_attn.q_proj``) adapts one layer's linear, not every layer's."""

import pytest

from mmevo import memory_plan as mp
from mmevo.models.adapters import apply_lora
from mmevo.models.loader import load_model

TARGETS = [
    ["q_proj", "down_proj"],
    ["layers.0.self_attn.q_proj"],  # the old plan counted it in all 4 layers: 2,048 against PEFT's 512
    ["1.mlp.down_proj", "q_proj"],
    ["layers.2.mlp.gate_proj", "layers.3.self_attn.o_proj", "v_proj"],
    ["self_attn.q_proj", "q_proj"],
]


def _peft_trainable(path, targets):
    model = apply_lora(load_model(path).model, 2, 16.0, 0.0, targets)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("which", ["tiny_vl_path", "tiny_text_path"])
def test_planned_lora_parameters_equal_a_peft_wrapped_tiny_model(which, request):
    path = request.getfixturevalue(which)
    dims = mp.model_dims(str(path))
    planned = [mp.lora_params(dims, 2, t) for t in TARGETS]
    assert planned == [_peft_trainable(path, t) for t in TARGETS]
    per_layer_q = 2 * (dims.hidden + dims.q_dim)
    assert planned[1] == per_layer_q and dims.layers == 4  # one layer's q_proj, not four


@pytest.mark.parametrize("which, targets", [
    ("tiny_vl_path", ["model.layers.0.self_attn.q_proj"]),  # Qwen2.5-VL's decoder is model.language_model.layers
    ("tiny_text_path", ["language_model.layers.0.self_attn.q_proj"]),
    ("tiny_text_path", ["layers.9.self_attn.q_proj", "v_proj"]),  # the model has 4 layers
    # review: PEFT's "all-linear" shorthand is not taken (the target is a name); a vision-tower linear, by name or
    # by a name only the tower has (qkv), is no module of the language model to either
    ("tiny_vl_path", ["all-linear"]),
    ("tiny_vl_path", ["q_proj", "visual.blocks.0.mlp.gate_proj"]),
    ("tiny_vl_path", ["qkv"]),
])
def test_a_layer_target_the_model_lacks_is_refused_by_planner_and_trainer(which, targets, request):
    path = request.getfixturevalue(which)
    with pytest.raises(ValueError, match="matched no module of the language model"):
        mp.lora_params(mp.model_dims(str(path)), 2, targets)
    with pytest.raises(ValueError, match="matched no module of the language model"):
        _peft_trainable(path, targets)


def test_7b_plan_counts_a_one_layer_target_once():
    from pathlib import Path

    from mmevo.config import load_config

    cfg_path = Path(__file__).resolve().parent.parent / "configs/qwen2_5_vl_7b_geometry3k.yaml"
    cfg = load_config(cfg_path, ["model.lora.rank=16", "model.lora.target_modules=[layers.0.self_attn.q_proj]"])
    m = mp.model_dims("Qwen/Qwen2.5-VL-7B-Instruct")
    one_q = 16 * (3584 + 3584)  # A [16, 3584] + B [3584, 16]: 114,688
    assert mp.param_counts(cfg, m) == (mp.total_params(m) + one_q, one_q)  # was 28 * 114,688 = 3,211,264
    assert mp.lora_params(m, 16, ["q_proj"]) == 28 * one_q
    assert mp.plan(cfg, 8, 80.0, config_path=cfg_path)["fits"] is True
