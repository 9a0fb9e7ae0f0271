"""Review of the memory planner (mmevo.memory_plan): the frozen vision tower includes its merger, vLLM under tensor
parallelism, LoRA's vLLM copy, bad inputs (GPU count / memory, config.json keys) as clear errors. Expected numbers
are by hand from Qwen2.5-VL's published dimensions."""

import json
import math
from pathlib import Path

import pytest

from mmevo import memory_plan as mp
from mmevo.cli import main
from mmevo.config import load_config

ROOT = Path(__file__).resolve().parent.parent
GiB = 1024 ** 3
CSRS_7B = "configs/csrs_qwen2_5_vl_7b_geometry3k.yaml"

# Qwen2.5-VL-7B by hand (hidden 3584, 28 layers, 28 heads / 4 KV heads of 128, MLP 18944, vocab 152064, untied;
# ViT 32 blocks of 1280, MLP 3420, merger 5120 -> 3584)
LAYER_7B = 3584 * 3584 + 3584 + 2 * (3584 * 512 + 512) + 3584 * 3584 + 3 * 3584 * 18944 + 2 * 3584
BLOCK_7B = 1280 * 3840 + 3840 + 1280 * 1280 + 1280 + 2 * (1280 * 3420 + 3420) + 3420 * 1280 + 1280 + 2 * 1280
VISION_7B = 3 * 2 * 14 * 14 * 1280 + 32 * BLOCK_7B + 1280 + 5120 * 5120 + 5120 + 5120 * 3584 + 3584
P_7B = 28 * LAYER_7B + 2 * 152064 * 3584 + 3584 + VISION_7B
# 72B: hidden 8192, 80 layers, 64 heads / 8 KV heads of 128, MLP 29568, vocab 152064, untied; same ViT, merger -> 8192
LAYER_72B = 8192 * 8192 + 8192 + 2 * (8192 * 1024 + 1024) + 8192 * 8192 + 3 * 8192 * 29568 + 2 * 8192
VISION_72B = 3 * 2 * 14 * 14 * 1280 + 32 * BLOCK_7B + 1280 + 5120 * 5120 + 5120 + 5120 * 8192 + 8192
P_72B = 80 * LAYER_72B + 2 * 152064 * 8192 + 8192 + VISION_72B


def _plan(cfg_path, *overrides, gpus=8, mem=80.0):
    return mp.plan(load_config(ROOT / cfg_path, list(overrides)), gpus, mem, config_path=ROOT / cfg_path)


def test_hand_counts_match_the_published_parameter_totals():
    assert P_7B == 8_292_166_656 and P_72B == 73_406_351_360
    assert mp.total_params(mp.model_dims("Qwen/Qwen2.5-VL-72B-Instruct")) == P_72B


# -- freeze_vision_tower freezes the merger too ------------------------------------------------------------------------
def test_frozen_vision_tower_includes_its_merger_by_hand():
    """mmevo.models.adapters.freeze_vision_tower freezes every visual.* parameter (ViT blocks AND merger; the config
    says "the vision encoder (ViT and its merger) stays fixed"): only the LM's 7,615,616,512 parameters train."""
    m = mp.model_dims("Qwen/Qwen2.5-VL-7B-Instruct")
    assert mp.trainable_params(m, freeze_vision_tower=True) == P_7B - VISION_7B == 7_615_616_512
    p = _plan(CSRS_7B, "model.freeze_vision_tower=true")
    n = P_7B - VISION_7B
    assert p["model"]["trainable_params_b"] == 7.616
    # ZeRO-3 over 8 GPUs: fp32 master 4 B, Adam m + v 8 B, fp32 gradient partition 4 B per trainable parameter / 8
    assert p["per_gpu_gib"]["master_weights_fp32"] == round(4 * n / 8 / GiB, 2) == 3.55
    assert p["per_gpu_gib"]["adam_moments"] == round(8 * n / 8 / GiB, 2) == 7.09
    # + the contiguous-gradients reduce bucket ZeRO-3 keeps for the run (configs/deepspeed/zero3.json: 12,845,056 bf16)
    assert p["per_gpu_gib"]["gradients_resident"] == round((4 * n / 8 + 12_845_056 * 2) / GiB, 2)


def test_frozen_vision_tower_count_matches_the_real_model(tiny_vl_path):
    """Independent of the planner's formulas: the tiny Qwen2.5-VL's requires_grad parameters after the trainer's
    own freeze_vision_tower."""
    from mmevo.models.adapters import freeze_vision_tower
    from mmevo.models.loader import load_model

    model = load_model(tiny_vl_path).model
    freeze_vision_tower(model)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert mp.trainable_params(mp.model_dims(str(tiny_vl_path)), freeze_vision_tower=True) == trainable


# -- vLLM under tensor parallelism ------------------------------------------------------------------------------------
def test_vllm_weights_and_kv_cache_are_per_gpu_under_tensor_parallelism():
    """rollout.tensor_parallel_size=tp (one trainer process, vLLM's mp executor): each GPU holds P * b / tp of the
    weights and max(1, k // tp) of the k KV heads (vLLM's get_num_kv_heads); the budget is still
    gpu_memory_utilization x the GPU's total memory."""
    budget = int(0.6 * 80 * GiB)
    for tp, kv_heads in ((1, 4), (2, 2), (8, 1)):  # 7B: 4 KV heads; at tp 8 each GPU keeps one (replicated)
        p = _plan(CSRS_7B, "trainer.deepspeed=", f"rollout.tensor_parallel_size={tp}", gpus=1)
        weights = math.ceil(P_7B * 2 / tp)
        per_token = 2 * 28 * kv_heads * 128 * 2
        assert p["per_gpu_gib"]["vllm_weights"] == round(weights / GiB, 2)
        assert p["setup"]["vllm_kv_cache_max_tokens"] == (budget - weights - GiB) // per_token
        assert p["per_gpu_gib"]["vllm_awake"] == 48.0
    # 72B on one 80 GiB GPU per shard, tp 4: 73.4e9 * 2 / 4 = 34.18 GiB of weights leave 12.8 GiB of KV cache, so
    # vLLM starts; with the whole model counted on every GPU (136.7 GiB) it was said to refuse
    p = _plan(CSRS_7B, "trainer.deepspeed=", "model.path=Qwen/Qwen2.5-VL-72B-Instruct",
              "rollout.tensor_parallel_size=4", gpus=1)
    weights = math.ceil(P_72B * 2 / 4)
    assert p["per_gpu_gib"]["vllm_weights"] == round(weights / GiB, 2) == 34.18
    assert p["setup"]["vllm_kv_cache_max_tokens"] == (budget - weights - GiB) // (2 * 80 * 2 * 128 * 2)
    assert not any("vLLM refuses to start" in w for w in p["warnings"])


def test_tensor_parallel_under_deepspeed_is_flagged():
    """vllm_engine refuses tensor_parallel_size > 1 under DeepSpeed: the plan says so rather than planning it."""
    p = _plan(CSRS_7B, "rollout.tensor_parallel_size=2")
    assert any("tensor_parallel_size=2" in w and "refuses to start" in w for w in p["warnings"])


def test_sleep_level_1_host_copy_is_the_merged_base_model_with_lora():
    """vLLM holds merged weights (W + alpha/r B A): its level-1 host copy is the base model's P * b, not the
    policy's parameters with the adapters (7B, rank 64 on the LM's 7 linears: 161,480,704 more)."""
    p = _plan(CSRS_7B, "model.lora.rank=64", "rollout.sleep_level=1")
    lora = 28 * 64 * (2 * (3584 + 3584) + 2 * (3584 + 512) + 3 * (3584 + 18944))
    assert lora == 161_480_704 and p["model"]["params_b"] == round((P_7B + lora) / 1e9, 3)
    assert p["host_gib_per_gpu"]["vllm_sleep_level1_weights"] == round(P_7B * 2 / GiB, 2) == 15.45


def test_lora_target_named_twice_is_one_adapter():
    m = mp.model_dims("Qwen/Qwen2.5-VL-7B-Instruct")
    # one q_proj adapter per layer: r * (3584 + 3584), 28 layers
    assert mp.lora_params(m, 8, ["q_proj", "q_proj"]) == 28 * 8 * 7168 == 1_605_632


# -- bad inputs -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gpus, mem, field", [
    (0, 80.0, "--gpus"), (2.5, 80.0, "--gpus"), (True, 80.0, "--gpus"), (float("nan"), 80.0, "--gpus"),
    (8, float("nan"), "--gpu-mem-gib"), (8, float("inf"), "--gpu-mem-gib"), (8, -1.0, "--gpu-mem-gib"),
    (8, 0.0, "--gpu-mem-gib")])
def test_plan_refuses_bad_gpu_count_and_memory(gpus, mem, field):
    cfg = load_config(ROOT / CSRS_7B, [])
    with pytest.raises(ValueError, match=f"^{field} must be .*, got "):
        mp.plan(cfg, gpus, mem, config_path=ROOT / CSRS_7B)


QWEN25_VL = {"model_type": "qwen2_5_vl", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
             "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
             "tie_word_embeddings": False,
             "vision_config": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                               "in_chans": 3, "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2,
                               "temporal_patch_size": 2}}


def test_published_style_config_json_gives_the_7b_count():
    assert mp.total_params(mp.dims_from_config(QWEN25_VL)) == P_7B


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["vision_config"].pop("num_heads"), r"no 'vision_config\.num_heads'"),
    (lambda c: c["vision_config"].pop("hidden_size"), r"no 'vision_config\.hidden_size'"),
    (lambda c: c.update(vision_config={"depth": 32, "num_heads": 16}), r"no 'vision_config\.embed_dim'"),
    (lambda c: c.update(hidden_size=None), r"no 'hidden_size'"),
    (lambda c: c.update(num_attention_heads=0), r"num_attention_heads=0 must be an integer >= 1"),
    (lambda c: c.update(num_hidden_layers=-2), r"num_hidden_layers=-2 must be an integer >= 1"),
    (lambda c: c.update(hidden_size=3584.5), r"hidden_size=3584.5 must be an integer"),
    (lambda c: c.update(vocab_size="big"), r"vocab_size='big' must be an integer"),
    (lambda c: c.update(vocab_size=float("nan")), r"vocab_size=nan must be an integer"),
    (lambda c: c["vision_config"].update(num_heads=0), r"vision_config\.num_heads=0 must be"),
    (lambda c: c.update(vision_config=[1]), r"vision_config=\[1\] is not an object"),
])
def test_bad_config_json_is_a_clear_error(edit, message):
    cfg = json.loads(json.dumps(QWEN25_VL))
    edit(cfg)
    with pytest.raises(ValueError, match=message):
        mp.dims_from_config(cfg)


def test_cli_on_a_broken_local_config_is_an_exit_code(tmp_path, capsys):
    cfg = json.loads(json.dumps(QWEN25_VL))
    del cfg["vision_config"]["num_heads"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert main(["plan-memory", f"model.path={tmp_path}", "--gpus", "1"]) == 2
    assert "vision_config.num_heads" in capsys.readouterr().err
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json: not valid JSON"):
        mp.model_dims(str(tmp_path))


# -- checked by hand, not changed -------------------------------------------------------------------------------------
def test_zero2_7b_items_by_hand():
    """configs/deepspeed/zero2.json (fp32 accumulation, 2e8-element buckets, overlap_comm) on 8 x 80 GiB: full bf16
    weights, fp32 master / Adam / gradient partition over 8, two bf16 reduce buckets."""
    p = _plan(CSRS_7B, "trainer.deepspeed=configs/deepspeed/zero2.json")
    g = p["per_gpu_gib"]
    assert g["policy_weights"] == round(P_7B * 2 / GiB, 2) == 15.45
    assert g["master_weights_fp32"] == round(P_7B * 4 / 8 / GiB, 2) == 3.86
    assert g["adam_moments"] == round(P_7B * 8 / 8 / GiB, 2) == 7.72
    assert g["gradients"] == round((P_7B * 4 / 8 + 2 * 200_000_000 * 2) / GiB, 2)
    assert g["gradients_resident"] == 0 and g["weight_sync_buffers"] == 0
    rollout = 1.5 * GiB + P_7B * 2 + P_7B * 4 // 8 + P_7B * 8 // 8 + int(0.6 * 80 * GiB)
    assert p["phases_gib"]["rollout"]["total"] == round(rollout / GiB, 2)


def test_trainable_regexes_are_flagged_as_not_modelled():
    """model.trainable (e.g. [norm]) trains a subset the planner cannot name from dimensions: the plan keeps every
    parameter trainable (an upper bound) and says so instead of silently planning full fine-tuning."""
    p = _plan(CSRS_7B, "model.trainable=[norm]")
    assert p["model"]["trainable_params_b"] == 8.292
    assert any(w.startswith("model.trainable=['norm'] is not modelled") for w in p["warnings"])


def test_vllm_start_check_counts_the_held_out_budget_in_its_context():
    """vLLM's max_model_len is data.max_prompt_length + max(rollout.max_tokens, trainer.eval_max_tokens)
    (rollout.factory.max_model_len); a KV cache between 2560 tokens (1024 + 1536) and 9216 (1024 + 8192) holds a
    training sequence but not the context vLLM is started with, so it refuses to start."""
    from mmevo.rollout.factory import max_model_len

    base = _plan(CSRS_7B, "rollout.gpu_memory_utilization=0.209")
    kv_tokens = base["setup"]["vllm_kv_cache_max_tokens"]
    assert 2560 < kv_tokens < 9216
    assert not any("vLLM refuses to start" in w for w in base["warnings"])
    long_eval = _plan(CSRS_7B, "rollout.gpu_memory_utilization=0.209", "trainer.eval_max_tokens=8192")
    assert max_model_len(load_config(ROOT / CSRS_7B, ["trainer.eval_max_tokens=8192"])) == 9216
    assert any("vLLM refuses to start" in w and "9216" in w for w in long_eval["warnings"])
