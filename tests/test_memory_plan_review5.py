"""Review 5 of the 7B-scale items: the planner refuses what its formulas do not model (a config.json of another
architecture, LoRA targets that name no linear) instead of planning it silently wrong, and the trainer's LoRA
refuses a misspelt target that PEFT let through beside good ones."""

from pathlib import Path

import pytest

from mmevo import memory_plan as mp
from mmevo.config import load_config

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


def _plan(*over):
    return mp.plan(load_config(CFG_7B, ["model.lora.rank=16", *over]), 8, 80.0, config_path=CFG_7B)


@pytest.mark.parametrize("targets, unknown", [("[q_prj,v_proj]", "['q_prj']"), ("[qkv]", "['qkv']"),
                                              ("[lm_head]", "['lm_head']")])
def test_lora_targets_that_name_no_linear_are_refused_by_the_planner(targets, unknown):
    """They were planned as zero adapters (``[qkv]``: 0.0e9 trainable parameters, peak 53.98 GiB)."""
    with pytest.raises(ValueError, match=r"model\.lora\.target_modules=.*" + __import__("re").escape(unknown)):
        _plan(f"model.lora.target_modules={targets}")


def test_dotted_lora_targets_are_planned_as_their_linear():
    m = mp.model_dims("Qwen/Qwen2.5-VL-7B-Instruct")
    gate = 28 * 16 * (3584 + 18944)  # A [16, 3584] + B [18944, 16] in each of 28 layers
    assert mp.lora_params(m, 16, ["mlp.gate_proj"]) == mp.lora_params(m, 16, ["gate_proj", "mlp.gate_proj"]) == gate
    assert _plan("model.lora.target_modules=[mlp.gate_proj]")["model"]["trainable_params_b"] == round(gate / 1e9, 3)


def test_trainer_lora_refuses_a_misspelt_target_beside_good_ones(tiny_text_path):
    """PEFT raises only when the whole pattern matches nothing: ``[q_prj, v_proj]`` trained v_proj alone."""
    from mmevo.models.adapters import apply_lora, lora_scalings
    from mmevo.models.loader import load_model

    with pytest.raises(ValueError, match=r"\['q_prj'\] matched no module of the language model"):
        apply_lora(load_model(tiny_text_path).model, 4, 8.0, 0.0, ["q_prj", "v_proj"])
    model = apply_lora(load_model(tiny_text_path).model, 4, 8.0, 0.0, ["self_attn.q_proj", "v_proj"])
    adapted = sorted({n.rsplit(".", 1)[-1] for n in lora_scalings(model)})
    assert adapted == ["q_proj", "v_proj"]


class _Prompt:  # what split_micro_batches / forward_tokens read of an encoded prompt
    def __init__(self, n: int):
        self.input_ids = [0] * n


@pytest.mark.parametrize("packs", [False, True])
def test_planned_micro_batch_holds_the_most_prompt_and_response_tokens_the_trainer_packs(packs):
    """The plan took T * P / S image tokens and T * R / S response positions for a budgeted micro-batch of T tokens
    (6,553 and 9,830 for the 7B config), as if every sequence had a full prompt and a full response. The trainer's
    split puts 8 sequences of full prompts and short responses (or short prompts and full responses) into one
    16,384-token micro-batch: 8,192 prompt tokens (32,768 patches, not 26,212: +1.41 GiB of ViT activations) or 12,288
    response positions (27.84 GiB of whole logits, not 22.27)."""
    from mmevo.grpo.trainer import forward_tokens, split_micro_batches

    p = _plan("model.lora.rank=0", "trainer.logits_chunk_tokens=0")
    budget, P, R = 16384, 1024, 1536
    assert (p["setup"]["tokens_per_micro_batch"], p["setup"]["logits_positions"]) == (budget, 8 * R)
    for prompt_len, response_len in ((P, 1024), (12, R)):
        prompts = [_Prompt(prompt_len) for _ in range(16)]  # a prompt each: nothing shared
        responses = [[1] * response_len] * 16
        for micro in split_micro_batches(list(range(16)), prompts, responses, 8, budget, packs):
            assert forward_tokens(micro, prompts, responses, packs) <= budget and len(micro) == 8
            assert sum(len(prompts[i].input_ids) for i in micro) * 4 <= p["setup"]["image_patches_per_micro_batch"]
            assert sum(len(responses[i]) for i in micro) <= p["setup"]["logits_positions"]
    assert p["setup"]["image_patches_per_micro_batch"] == 4 * 8 * P
    assert p["per_gpu_gib"]["activations_vision"] == 7.07 and p["per_gpu_gib"]["logits"] == 27.84
    # without a budget the worst case was already every sequence at full length: unchanged
    q = _plan("model.lora.rank=0", "trainer.logits_chunk_tokens=0", "trainer.max_tokens_per_micro_batch=0")
    assert (q["setup"]["logits_positions"], q["setup"]["image_patches_per_micro_batch"]) == (8 * R, 4 * 8 * P)


def test_freezing_the_vision_tower_of_a_text_model_is_refused_as_the_trainer_does(tiny_text_path):
    """The plan of Qwen2.5-1.5B with model.freeze_vision_tower=true came out (54.13 GiB, 1.544e9 trainable) for a
    run that configure_training refuses; with LoRA the trainer never freezes, so neither does the plan."""
    from mmevo.grpo.trainer import configure_training
    from mmevo.models.loader import load_model

    with pytest.raises(ValueError, match="no vision tower"):
        configure_training(load_model(tiny_text_path).model, load_config(None, ["model.freeze_vision_tower=true"]).model,
                           seed=0)
    text = "model.path=Qwen/Qwen2.5-1.5B-Instruct"
    with pytest.raises(ValueError, match=r"model\.freeze_vision_tower=true, but Qwen/Qwen2\.5-1\.5B-Instruct has no "
                                         r"vision tower"):
        mp.plan(load_config(CFG_7B, [text, "model.freeze_vision_tower=true"]), 8, 80.0, config_path=CFG_7B)
    lora = mp.plan(load_config(CFG_7B, [text, "model.freeze_vision_tower=true", "model.lora.rank=8"]), 8, 80.0,
                   config_path=CFG_7B)
    assert lora["model"]["vision_params_b"] == 0 and 0 < lora["model"]["trainable_params_b"] < 0.1


def test_lora_weight_sync_counts_the_merge_temporaries_measured_on_cpu():
    """Merging an adapted linear for the vLLM sync / export allocates fp32 temporaries of the whole weight; the plan
    left them out (weight_sync_buffers 2.53 GiB with or without LoRA; 0 under ZeRO-2, where the merge is all there
    is). Measured here on one linear of n elements: a peak of 12 * n bytes."""
    import torch

    from mmevo.models.adapters import merge_lora_items
    from test_memory_plan import _peak_allocated_bytes

    out_f, in_f, r = 1024, 512, 8
    g = torch.Generator().manual_seed(0)
    w, a, b = (torch.randn(shape, generator=g).to(torch.bfloat16) for shape in ((out_f, in_f), (r, in_f), (out_f, r)))
    merged = []
    items = [("x.base_layer.weight", w), ("x.lora_A.default.weight", a), ("x.lora_B.default.weight", b)]
    peak = _peak_allocated_bytes(lambda: merged.extend(merge_lora_items(items, {"x": 2.0})))
    assert peak == 12 * out_f * in_f and merged[0][0] == "x.weight"

    mlp = 12 * 3584 * 18944  # the 7B's largest adapted linear with the default targets (all seven)
    plain, lora = _plan("model.lora.rank=0"), _plan()
    assert lora["per_gpu_gib"]["weight_sync_buffers"] == round(2.53 + mlp / 2 ** 30, 2) == 3.29
    assert plain["per_gpu_gib"]["weight_sync_buffers"] == 2.53
    attn = _plan("model.lora.target_modules=[q_proj,o_proj]")
    assert mp.lora_merge_bytes(mp.model_dims("Qwen/Qwen2.5-VL-7B-Instruct"), ["q_proj", "o_proj"]) == 12 * 3584 * 3584
    assert attn["per_gpu_gib"]["weight_sync_buffers"] == round((2.53 * 2 ** 30 + 12 * 3584 ** 2) / 2 ** 30, 2)
    zero2 = _plan("trainer.deepspeed=configs/deepspeed/zero2.json")
    assert zero2["per_gpu_gib"]["weight_sync_buffers"] == round(mlp / 2 ** 30, 2) == 0.76
