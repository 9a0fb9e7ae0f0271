"""Memory-planner vectors (review plan24): the planner's JSON for a grid of 7B settings against a reference written
here in plain arithmetic from Qwen2.5-VL-7B's published dimensions and DeepSpeed's allocation rules, parameter counts
against transformers' classes built on the meta device, and the CLI's edge inputs."""

import itertools
import json
import math
import re
from pathlib import Path

import pytest

from mmevo import memory_plan as mp
from mmevo.cli import main
from mmevo.config import load_config

ROOT = Path(__file__).resolve().parent.parent
CSRS_7B = ROOT / "configs/csrs_qwen2_5_vl_7b_geometry3k.yaml"
GiB = 1024 ** 3

# Qwen2.5-VL-7B: h 3584, i 18944, 28 layers, 28 heads / 4 KV heads of 128 (k*d 512), vocab 152064, untied;
# ViT 32 blocks of 1280 (MLP 3420), merger 5120 -> 3584, patch embedding 3*2*14*14 -> 1280
H, I, L, KD, V = 3584, 18944, 28, 512, 152064
LAYER = H * H + H + 2 * (H * KD + KD) + H * H + 3 * H * I + 2 * H
BLOCK = 1280 * 3840 + 3840 + 1280 * 1280 + 1280 + 2 * (1280 * 3420 + 3420) + 3420 * 1280 + 1280 + 2 * 1280
VISION = 1176 * 1280 + 32 * BLOCK + 1280 + 5120 * 5120 + 5120 + 5120 * H + H
P = L * LAYER + 2 * V * H + H + VISION
ACT = 8 * H + 2 * (4 * H + 2 * H + 2 * KD + 4 * I)  # bytes per token per layer kept for backward (bf16)


def lora_adapters(rank):
    """r * (in + out) for q, k, v, o, gate, up, down of every layer."""
    return L * rank * ((H + H) + 2 * (H + KD) + (H + H) + 2 * (H + I) + (I + H))


def reference(W, stage, offload, acc32, lora, freeze, ckpt, budget, chunk, kl, ref_offload, sleep, mem_gib=80.0):
    """Per-GPU bytes of each phase, by hand. stage None = no DeepSpeed; offload = optimizer offloaded to the CPU."""
    ds = stage is not None
    n_train = lora_adapters(lora) if lora else P - (VISION if freeze else 0)
    n_all = P + (lora_adapters(lora) if lora else 0)
    split = W if ds and stage >= 1 else 1
    ctx = int((1.5 if W > 1 else 1.0) * GiB)
    weights = math.ceil(n_all * 2 / W) if stage == 3 else n_all * 2
    master = 0 if (not ds or offload) else math.ceil(4 * n_train / split)
    adam = 4 * n_train if not ds else (0 if offload else math.ceil(8 * n_train / split))
    acc = 4 if acc32 else 2
    bucket = 12_845_056 if stage == 3 else 200_000_000  # the shipped zero3 / zero2 JSONs; zero1 as zero2's
    if not ds:
        grads = 2 * n_train
    elif stage == 1:  # bf16 .grad + the fp32 accumulation buffer
        grads = 2 * n_train + (4 * n_train if acc32 else 0)
    else:
        part = 0 if (stage == 3 and offload) else math.ceil(n_train * acc / W)
        grads = part + 2 * bucket * 2
    if stage == 3:
        resident_grads = (0 if offload else math.ceil(n_train * acc / W)) + bucket * 2
    elif stage == 1 and acc32 and not offload:  # BF16_Optimizer: whole-model fp32 gradient buffer for the run
        resident_grads = 4 * n_train
    else:
        resident_grads = 0
    ref = 2 * P if kl > 0 else 0
    R, Pr = 1536, 1024
    T = min(8 * (Pr + R), max(budget, Pr + R)) if budget else 8 * (Pr + R)
    resp = min(8 * R, max(budget, R)) if budget else 8 * R
    prompt = min(8 * Pr, max(budget, Pr)) if budget else 8 * Pr
    patches = 0 if (freeze or lora) else 4 * prompt
    if ckpt:
        lm_act = T * (L * 2 * H + 6 * H) + 2 * ACT * T
    else:
        lm_act = T * (L * ACT + 6 * H) + ACT * T
    vb = 8 * 1280 + 2 * (11 * 1280 + 4 * 3420)
    vis_saved = patches * (32 * (2 * 1280 if ckpt else vb) + 1176 * 2 + 8 * 80 + 6 * 1280 + 6 * 1280)
    vis_act = vis_saved + (2 if ckpt else 1) * vb * patches
    pos = min(chunk, resp) if chunk else resp
    logits, nograd_logits = pos * V * 16, pos * V * 8
    nograd = T * (2 * L * KD * 2 + ACT)
    gathered = (2 * V * H + 11_560_550) * 2 if stage == 3 else 0
    if not ds:
        opt = 2 * n_train
    elif offload:
        opt = 0
    elif stage == 3:
        opt = 8 * min(math.ceil(n_train / W), 1_000_000_000 + math.ceil(V * H / W))
    else:
        opt = 4 * math.ceil(n_train / split) * (1 if acc32 else 2)
    mem = int(mem_gib * GiB)
    awake = int(0.6 * mem)
    asleep = int(1.5 * GiB) if sleep else awake
    merge = 12 * H * I if lora else 0
    sync = (2 * (256 * 1024 ** 2 + V * H * 2) if stage == 3 else 0) + merge
    resident = ctx + weights + master + adam + resident_grads + (0 if ref_offload else ref)
    phases = {
        "rollout": resident + awake + sync,
        "logprob": resident + asleep + (ref if ref_offload else 0) + gathered + nograd + nograd_logits,
        "update": resident - resident_grads + grads + asleep + gathered + lm_act + vis_act + logits,
        "optimizer_step": resident - resident_grads + grads + asleep + opt,
    }
    return phases, mem


DS = {  # name: (stage, offload, fp32 accumulation)
    "none": (None, False, False),
    "zero1": (1, False, True), "zero1_bf16acc": (1, False, False), "zero1_offload": (1, True, True),
    "zero2": (2, False, True), "zero2_offload": (2, True, True),
    "zero3": (3, False, True), "zero3_offload": (3, True, True),
}


def _ds_file(tmp_path, name):
    stage, offload, acc32 = DS[name]
    z = {"stage": stage, "overlap_comm": True, "contiguous_gradients": True,
         "reduce_bucket_size": 12_845_056 if stage == 3 else 200_000_000,
         "offload_optimizer": {"device": "cpu" if offload else "none"}}
    if stage == 3:
        z["stage3_prefetch_bucket_size"] = 11_560_550
    cfg = {"bf16": {"enabled": "auto"}, "zero_optimization": z, "zero_force_ds_cpu_optimizer": False}
    if acc32:
        cfg["data_types"] = {"grad_accum_dtype": "fp32"}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return path


GRID = [  # (W, ds, lora, freeze, ckpt, budget, chunk, kl, ref_offload, sleep)
    (W, ds, lora, freeze, ckpt, budget, chunk, kl, ref_offload, True)
    for (W, ds), (lora, freeze), ckpt, (budget, chunk), (kl, ref_offload) in itertools.product(
        [(1, "none"), (2, "zero1"), (8, "zero1_bf16acc"), (8, "zero1_offload"), (8, "zero2"), (64, "zero2_offload"),
         (8, "zero3"), (64, "zero3"), (2, "zero3_offload")],
        [(0, False), (16, False), (0, True)], [True, False], [(16384, 1024), (0, 0)], [(0.01, True), (0.0, False)])
] + [(8, "zero3", 64, False, True, 16384, 1024, 0.01, False, False), (1, "zero1", 0, False, False, 4096, 512, 0.1,
                                                                       False, True)]


def test_grid_has_enough_combinations():
    assert len(GRID) >= 50


@pytest.mark.parametrize("case", GRID, ids=lambda c: "-".join(map(str, c)))
def test_plan_matches_the_reference_arithmetic(tmp_path, case):
    W, ds, lora, freeze, ckpt, budget, chunk, kl, ref_offload, sleep = case
    overrides = [f"model.lora.rank={lora}", f"model.freeze_vision_tower={str(freeze).lower()}",
                 f"model.gradient_checkpointing={str(ckpt).lower()}", f"trainer.max_tokens_per_micro_batch={budget}",
                 f"trainer.logits_chunk_tokens={chunk}", f"algo.kl_coef={kl}",
                 f"model.ref_offload={str(ref_offload).lower()}", f"rollout.enable_sleep_mode={str(sleep).lower()}",
                 f"trainer.deepspeed={_ds_file(tmp_path, ds) if ds != 'none' else ''}"]
    p = mp.plan(load_config(CSRS_7B, overrides), W, 80)
    stage, offload, acc32 = DS[ds]
    phases, mem = reference(W, stage, offload, acc32, lora, freeze, ckpt, budget, chunk, kl, ref_offload, sleep)
    for name, total in phases.items():
        assert abs(p["phases_gib"][name]["total"] - total / GiB) <= 0.006, (name, p["phases_gib"][name])
    peak = max(phases.values())
    assert p["peak_phase"] == max(phases, key=phases.get)
    assert abs(p["peak_gib"] - peak / GiB) <= 0.006
    # the verdict and the headroom follow from the peak: fits <=> peak <= 92 % of the GPU
    assert p["fits"] == (peak <= 0.92 * mem)
    assert p["headroom_frac"] == round(1 - peak / mem, 3)
    assert p["limit_gib"] == 73.6
    assert p["peak_gib"] == max(ph["total"] for ph in p["phases_gib"].values())


def test_zero1_bf16_optimizer_keeps_its_fp32_gradient_buffer_in_every_phase(tmp_path):
    """ZeRO-1 with bf16 weights and fp32 accumulation runs DeepSpeed's BF16_Optimizer, which allocates a fp32 gradient
    buffer of the whole model (4 * P, 30.9 GiB for 7B) in its constructor and only zeroes it after each step: it is on
    the GPU while vLLM is awake too. Without it the 7B rollout below was planned at 76.53 GiB instead of 107.42, and
    the 3B's (peak) at 61.74 GiB, "fits": true, instead of 75.73 GiB over the 73.6 limit."""
    cfg = load_config(CSRS_7B, [f"trainer.deepspeed={_ds_file(tmp_path, 'zero1')}"])
    p = mp.plan(cfg, 8, 80)
    assert p["per_gpu_gib"]["gradients_resident"] == round(4 * P / GiB, 2) == 30.89
    assert p["phases_gib"]["rollout"]["gradients"] == 30.89
    assert p["phases_gib"]["logprob"]["gradients"] == 30.89
    rollout = 1.5 * GiB + 2 * P + math.ceil(4 * P / 8) + math.ceil(8 * P / 8) + 4 * P + int(0.6 * 80 * GiB)
    assert p["phases_gib"]["rollout"]["total"] == round(rollout / GiB, 2) == 107.42
    small = mp.plan(load_config(CSRS_7B, [f"trainer.deepspeed={_ds_file(tmp_path, 'zero1')}",
                                          "model.path=Qwen/Qwen2.5-VL-3B-Instruct"]), 8, 80)
    p3 = mp.total_params(mp.BUILTIN_MODELS["Qwen/Qwen2.5-VL-3B-Instruct"])
    rollout3 = 1.5 * GiB + 2 * p3 + math.ceil(4 * p3 / 8) + math.ceil(8 * p3 / 8) + 4 * p3 + int(0.6 * 80 * GiB)
    assert small["peak_phase"] == "rollout" and small["peak_gib"] == round(rollout3 / GiB, 2) == 75.73
    assert not small["fits"]
    # bf16 accumulation or an offloaded optimizer use the ZeRO optimizer: nothing kept between steps
    for other in ("zero1_bf16acc", "zero1_offload"):
        q = mp.plan(load_config(CSRS_7B, [f"trainer.deepspeed={_ds_file(tmp_path, other)}"]), 8, 80)
        assert q["per_gpu_gib"]["gradients_resident"] == 0


def test_largest_parameter_includes_the_patch_embedding():
    """A vision tower whose patch embedding [vh, 3*2*14*14] is its largest tensor (the tiny Qwen2.5-VL: 64 * 1176 =
    75,264 elements, over the embedding's 509 * 128 = 65,152 and the merger's 256 * 256): ZeRO-3's weight-sync bucket
    and optimizer sub-group close after it, so the largest tensor must count it."""
    m = mp.dims_from_config({"model_type": "qwen2_5_vl", "hidden_size": 128, "intermediate_size": 384,
                             "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
                             "vocab_size": 509, "tie_word_embeddings": True,
                             "vision_config": {"depth": 2, "hidden_size": 64, "intermediate_size": 128,
                                               "num_heads": 2, "out_hidden_size": 128}})
    assert mp.largest_param_numel(m) == 75_264


def _meta_model(config: dict, tmp_path):
    import torch

    from mmevo.models import loader  # noqa: F401  the CPU processor shim, before transformers' VL modules
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    (tmp_path / "config.json").write_text(json.dumps(config))
    auto = AutoModelForImageTextToText if "vision_config" in config else AutoModelForCausalLM
    with torch.device("meta"):
        return auto.from_config(AutoConfig.from_pretrained(tmp_path))


VIT = {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "patch_size": 14,
       "spatial_merge_size": 2, "temporal_patch_size": 2}


def _vl(h, i, layers, heads, kv, tied):
    return {"model_type": "qwen2_5_vl", "hidden_size": h, "intermediate_size": i, "num_hidden_layers": layers,
            "num_attention_heads": heads, "num_key_value_heads": kv, "vocab_size": 151936 if tied else 152064,
            "tie_word_embeddings": tied, "vision_config": {**VIT, "out_hidden_size": h}}


@pytest.mark.parametrize("name, config", [
    ("3B", _vl(2048, 11008, 36, 16, 2, True)), ("7B", _vl(3584, 18944, 28, 28, 4, False)),
    ("32B", _vl(5120, 27648, 64, 40, 8, False)), ("72B", _vl(8192, 29568, 80, 64, 8, False)),
    ("qwen2-1.5B", {"model_type": "qwen2", "hidden_size": 1536, "intermediate_size": 8960, "num_hidden_layers": 28,
                    "num_attention_heads": 12, "num_key_value_heads": 2, "vocab_size": 151936,
                    "tie_word_embeddings": True}),
])
def test_counts_equal_transformers_on_the_meta_device(tmp_path, name, config):
    """Total, vision, language model, embedding and the largest tensor, exactly, from a config.json the planner
    reads; the built-in dimensions of the same hub id give the same counts."""
    model = _meta_model(config, tmp_path)
    named = dict(model.named_parameters())  # tied lm_head is the embedding: listed once
    m = mp.model_dims(str(tmp_path))
    total = sum(p.numel() for p in named.values())
    vision = sum(p.numel() for n, p in named.items() if ".visual." in f".{n}")
    assert mp.total_params(m) == total
    assert mp.vision_params(m.vision) == vision
    assert mp.lm_params(m) == total - vision
    assert (model.lm_head.weight is model.get_input_embeddings().weight) == m.tie_embeddings
    assert mp.largest_param_numel(m) == max(p.numel() for p in named.values())
    builtin = {"3B": "Qwen/Qwen2.5-VL-3B-Instruct", "7B": "Qwen/Qwen2.5-VL-7B-Instruct",
               "32B": "Qwen/Qwen2.5-VL-32B-Instruct", "72B": "Qwen/Qwen2.5-VL-72B-Instruct",
               "qwen2-1.5B": "Qwen/Qwen2.5-1.5B-Instruct"}[name]
    assert mp.total_params(mp.BUILTIN_MODELS[builtin]) == total
    if name == "7B":
        assert total == P


@pytest.mark.parametrize("argv, fragment", [
    (["--gpus", "0"], "--gpus"), (["--gpus", "-1"], "--gpus"), (["--gpu-mem-gib", "0"], "--gpu-mem-gib"),
    (["--gpu-mem-gib", "nan"], "--gpu-mem-gib"), (["--gpu-mem-gib", "inf"], "--gpu-mem-gib"),
])
def test_cli_refuses_bad_gpu_arguments_naming_them(capsys, argv, fragment):
    with pytest.raises(SystemExit) as e:
        main(["plan-memory", str(CSRS_7B), *argv])
    assert e.value.code != 0
    out = capsys.readouterr()
    assert out.out == "" and fragment in out.err


def test_cli_huge_gpu_and_one_gpu_give_json_only_on_stdout(capsys):
    assert main(["plan-memory", str(CSRS_7B), "--gpus", "1", "--gpu-mem-gib", "1e6"]) == 0
    p = json.loads(capsys.readouterr().out)
    assert p["fits"] and p["setup"]["gpus"] == 1 and p["per_gpu_gib"]["cuda_context_nccl"] == 1.0


def test_unknown_model_path_is_a_clear_error():
    with pytest.raises(ValueError, match="model.path='nobody/no-such-model'"):
        mp.plan(load_config(CSRS_7B, ["model.path=nobody/no-such-model"]), 8, 80)


@pytest.mark.parametrize("text, message", [
    ('{"zero_optimization": {"stage": 4}}', "zero_optimization.stage=4 must be 0, 1, 2 or 3"),
    ('{"zero_optimization": {"stage": true}}', "zero_optimization.stage=True must be"),  # was planned as ZeRO-1
    ('{"zero_optimization": {"stage": 2.5}}', "zero_optimization.stage=2.5 must be"),  # was planned as ZeRO-2
    ('{"zero_optimization": {"stage": "auto"}}', "zero_optimization.stage='auto' must be"),
    ('{not json', "not valid JSON"), ('[]', "not a DeepSpeed config"),
    ('{"zero_optimization": {"stage": 3, "offload_optimizer": "cpu"}}', "zero_optimization.offload_optimizer='cpu'"),
    ('{"zero_optimization": {"stage": 3, "reduce_bucket_size": "x"}}', "zero_optimization.reduce_bucket_size='x'"),
    ('{"zero_optimization": {"stage": 3, "sub_group_size": -1}}', "zero_optimization.sub_group_size=-1"),
    ('{"zero_optimization": {"stage": 3}, "data_types": {"grad_accum_dtype": "fp8"}}',
     "data_types.grad_accum_dtype='fp8'"),
])
def test_bad_deepspeed_config_is_a_clear_error_naming_file_and_key(tmp_path, text, message):
    path = tmp_path / "ds.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="trainer.deepspeed=.*ds.json") as e:
        mp.read_deepspeed(path)
    assert message in str(e.value)


def test_deepspeed_dtype_names_and_numeric_strings_are_read_as_deepspeed_reads_them(tmp_path):
    """"torch.float32" is DeepSpeed's fp32 accumulation: it was planned as the model's bf16 (1.93 GiB less on 8 GPUs
    for 7B); a stage written "3" or 3.0 is ZeRO-3."""
    path = tmp_path / "ds.json"
    path.write_text('{"zero_optimization": {"stage": "3"}, "data_types": {"grad_accum_dtype": "torch.float32"}}')
    z = mp.read_deepspeed(path)
    assert z.stage == 3 and mp.grad_accum_bytes(2, z) == 4
    path.write_text('{"zero_optimization": {"stage": 3.0, "reduce_bucket_size": "5e8"}}')
    z = mp.read_deepspeed(path)
    assert z.stage == 3 and z.reduce_bucket_size == 500_000_000 and mp.grad_accum_bytes(2, z) == 2


@pytest.mark.parametrize("name, nbytes", [("half", 2), ("float", 4), ("torch.bfloat16", 2), ("torch.float16", 2),
                                          ("fp32", 4), ("bfloat16", 2)])
def test_grad_accum_dtype_takes_deepspeeds_own_names(tmp_path, name, nbytes):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"zero_optimization": {"stage": 3}, "data_types": {"grad_accum_dtype": name}}))
    assert mp.grad_accum_bytes(2, mp.read_deepspeed(path)) == nbytes


@pytest.mark.parametrize("name", ["bfloat", "FP32", "Float32", "torch.fp32", "torch.half", "int8", "torch.int8"])
def test_grad_accum_dtype_refuses_what_deepspeed_refuses_or_cannot_accumulate_in(tmp_path, name):
    # DeepSpeed's DtypeEnum is case-sensitive and knows no "bfloat" / "torch.fp32" / "torch.half"; its int8 is no
    # gradient accumulation dtype: each was planned (as bf16 / fp32 / fp16) or would have been
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"zero_optimization": {"stage": 3}, "data_types": {"grad_accum_dtype": name}}))
    with pytest.raises(ValueError, match=rf"data_types.grad_accum_dtype='{re.escape(name)}' is not one of"):
        mp.read_deepspeed(path)
