"""The memory planner (mmevo.memory_plan, `mmevo plan-memory`): hand-computed items, monotonicity, config.json
reading, the CLI, and the verdicts on HEAD's and the shipped 7B configs."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from mmevo import memory_plan as mp
from mmevo.cli import main
from mmevo.config import load_config

ROOT = Path(__file__).resolve().parent.parent
GiB = 1024 ** 3
SHIPPED_7B = ["configs/csrs_qwen2_5_vl_7b_geometry3k.yaml", "configs/qwen2_5_vl_7b_geometry3k.yaml",
              "configs/mmupt_qwen2_5_vl_7b_geometry3k.yaml"]

# h 8, i 16, L 2, a 2 heads of d 4, k 1 KV head (k*d = 4), V 10, untied lm_head, q/k/v biases, no vision tower
SMALL = mp.ModelDims(hidden=8, intermediate=16, layers=2, heads=2, kv_heads=1, vocab=10)


def _plan(cfg_path, *overrides, gpus=8, mem=80.0, dims=None):
    return mp.plan(load_config(ROOT / cfg_path if cfg_path else None, list(overrides)), gpus, mem,
                   config_path=ROOT / cfg_path if cfg_path else None, dims=dims)


def test_small_parameter_counts_by_hand():
    # q 8*8 + 8, k 8*4 + 4, v 8*4 + 4, o 8*8 = 208; MLP 3*8*16 = 384; norms 2*8 = 16 -> 608 per layer
    assert mp.lm_layer_params(SMALL) == 608
    # 2 layers 1216 + embedding 10*8 + lm_head 10*8 + final norm 8 = 1384
    assert mp.lm_params(SMALL) == 1384
    assert mp.total_params(SMALL) == 1384
    # LoRA r=2 on q (8 -> 8) and down (16 -> 8): 2*(8+8) + 2*(16+8) = 80 per layer, 2 layers
    assert mp.lora_params(SMALL, 2, ["q_proj", "down_proj"]) == 160
    assert mp.trainable_params(SMALL, 2, ["q_proj", "down_proj"]) == 160
    assert mp.largest_gathered_params(SMALL) == 608  # one layer > embedding 80


def test_small_activations_and_logits_by_hand():
    # per token per layer, bf16: 8h + 2*(6h + 2*(k*d) + 4i) = 64 + 2*(48 + 8 + 64) = 304 bytes
    assert mp.layer_activation_bytes(8, 16, 4, 2) == 304
    # no checkpointing, T = 10: 10 * (L*304 + 304 workspace + (4+2)*8 final norm) = 10 * (608 + 304 + 48) = 9600
    assert mp.lm_activation_bytes(SMALL, 10, 2, checkpointing=False) == 9600
    # checkpointing: 10 * (L*2*8 layer inputs + 304 recomputed layer + 304 workspace + 48) = 10 * 688 = 6880
    assert mp.lm_activation_bytes(SMALL, 10, 2, checkpointing=True) == 6880
    # no-grad pass: 10 * (KV 2*L*4*2 = 32 + one layer 304) = 3360
    assert mp.nograd_activation_bytes(SMALL, 10, 2) == 3360
    # fp32 logits: 5 positions * V 10 * 4 bytes * 4 copies = 800
    assert mp.logits_bytes(5, 10, 4) == 800
    # micro-batch tokens: 8 x 2560 = 20480; capped at 16384; a single 2560-token sequence beats a 1000 cap
    assert mp.tokens_per_micro_batch(8, 0, 2560) == 20480
    assert mp.tokens_per_micro_batch(8, 16384, 2560) == 16384
    assert mp.tokens_per_micro_batch(8, 1000, 2560) == 2560


def _saved_for_backward_bytes(module, forward) -> int:
    """Bytes of the tensors autograd keeps for backward while ``forward()`` runs, each storage once, the module's
    parameters left out (they are counted as weights)."""
    import torch

    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    sizes: dict[int, int] = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            sizes[s.data_ptr()] = max(sizes.get(s.data_ptr(), 0), s.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = forward()
    del out
    return sum(sizes.values())


def _qwen2_config_at_7b_proportions(vocab: int):
    """A 3-layer Qwen2 decoder config at Qwen2.5-VL-7B's proportions (i / h = 5.25, 7 query heads per KV head),
    attending through mmevo's attention."""
    from transformers import Qwen2Config

    import mmevo.models.attention  # noqa: F401  registers "sdpa_gqa"

    config = Qwen2Config(hidden_size=448, intermediate_size=2352, num_hidden_layers=3, num_attention_heads=7,
                         num_key_value_heads=1, vocab_size=vocab, max_position_embeddings=1024,
                         tie_word_embeddings=False)
    config._attn_implementation = "sdpa_gqa"
    return config


@pytest.mark.parametrize("checkpointing", [False, True], ids=["full", "checkpointed"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_lm_activation_formula_matches_what_autograd_saves(dtype, checkpointing):
    """The planner's per-token layer formula (and the checkpointed one: each layer's input) against the bytes a real
    transformers Qwen2 decoder keeps for backward on one sequence, at Qwen2.5-VL-7B's proportions (i / h = 5.25,
    7 query heads per KV head), through mmevo's attention."""
    import torch
    from transformers import Qwen2Model

    torch.manual_seed(0)
    config = _qwen2_config_at_7b_proportions(vocab=512)
    model = Qwen2Model(config).to(getattr(torch, dtype)).train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    tokens = 200
    ids = torch.randint(0, 512, (1, tokens))
    measured = _saved_for_backward_bytes(model, lambda: model(input_ids=ids, use_cache=False).last_hidden_state)
    dims = mp.dims_from_config(config.to_dict())
    planned = mp.lm_saved_activation_bytes(dims, tokens, mp.DTYPE_BYTES[dtype], checkpointing)
    # what the planner leaves out: the shared rotary cos / sin, the token ids (< 1 %)
    assert planned * 0.99 <= measured <= planned * 1.01, (measured / tokens, planned / tokens)


@pytest.mark.parametrize("tower", ["qwen2_5_vl", "qwen2_vl"])
@pytest.mark.parametrize("checkpointing", [False, True], ids=["full", "checkpointed"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_vision_activation_formula_matches_what_autograd_saves(tower, dtype, checkpointing):
    """The ViT formulas (blocks with their fused qkv and fp32 rotation, patch embedding, rotary tables, merger)
    against the bytes transformers' Qwen2.5-VL and Qwen2-VL vision towers keep for backward, on two images of
    different grids (Qwen2.5-VL: windowed and full-attention blocks)."""
    import torch

    import mmevo.models.attention  # noqa: F401
    from mmevo.models import loader  # noqa: F401  the CPU processor shim, before transformers' vision modules

    if tower == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig
        from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
            Qwen2_5_VisionTransformerPretrainedModel as Tower)

        config = Qwen2_5_VLConfig(text_config=dict(hidden_size=96, num_attention_heads=2),
                                  vision_config=dict(hidden_size=128, intermediate_size=342, depth=3, num_heads=4,
                                                     out_hidden_size=96, window_size=56, fullatt_block_indexes=[1]))
    else:
        from transformers import Qwen2VLConfig
        from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel as Tower

        config = Qwen2VLConfig(text_config=dict(hidden_size=96, num_attention_heads=2),
                               vision_config=dict(embed_dim=128, mlp_ratio=3, depth=3, num_heads=4, hidden_size=96))
    config.vision_config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = Tower(config.vision_config).to(getattr(torch, dtype)).train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    grid = torch.tensor([[1, 16, 12], [1, 8, 8]])
    patches = int(grid.prod(-1).sum())
    pixels = torch.randn(patches, 3 * 2 * 14 * 14, dtype=getattr(torch, dtype))
    measured = _saved_for_backward_bytes(model, lambda: model(pixels, grid_thw=grid))
    vision = mp.dims_from_config(config.to_dict()).vision
    assert vision.gated == (tower == "qwen2_5_vl")
    planned = mp.vision_saved_activation_bytes(vision, patches, mp.DTYPE_BYTES[dtype], checkpointing)
    # what the planner leaves out: window / position indices (< 1 %). Under checkpointing the rotary tables reach the
    # blocks as arguments that the checkpoint frames hold for recomputation, not as saved tensors: alive, not seen here
    unseen = 8 * (vision.hidden // vision.heads) * patches if checkpointing else 0
    assert (planned - unseen) * 0.99 <= measured <= planned * 1.01, (measured / patches, planned / patches)


def _peak_allocated_bytes(run) -> int:
    """Peak of the bytes allocated (net of frees) while ``run()`` runs on CPU, from the profiler's memory records:
    each op's own allocations at its start, allocations outside ops as they come."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    deltas = sorted((e.time_range.start, e.cpu_memory_usage if e.name == "[memory]" else e.self_cpu_memory_usage)
                    for e in prof.events())
    live = peak = 0
    for _, d in deltas:
        live += d
        peak = max(peak, live)
    return peak


def _grpo_micro_batch_at_7b_proportions(checkpointing: bool):
    """A Qwen2 decoder at Qwen2.5-VL-7B's proportions (i / h = 5.25, 7 query heads per KV head, V / h = 42) in bf16,
    and a micro-batch of two GRPO groups (prompts of 100 and 60 tokens, 4 responses each)."""
    import torch
    from transformers import Qwen2ForCausalLM

    from mmevo.models.inputs import EncodedPrompt

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(_qwen2_config_at_7b_proportions(vocab=19008)).to(torch.bfloat16).train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    gen = torch.Generator().manual_seed(0)

    def prompt(n):
        return EncodedPrompt(text="", images=[], input_ids=torch.randint(3, 19008, (n,), generator=gen).tolist(),
                             mm_token_type_ids=[0] * n)

    prompts = [prompt(100)] * 4 + [prompt(60)] * 4
    responses = [torch.randint(3, 19008, (n,), generator=gen).tolist() for n in (50, 64, 30, 64, 64, 10, 40, 64)]
    tokens = 100 + 60 + sum(map(len, responses))  # the packed row: each prompt once
    return model, prompts, responses, tokens


@pytest.mark.parametrize("chunk", [0, 64], ids=["whole-logits", "chunked-logits"])
@pytest.mark.parametrize("checkpointing", [False, True], ids=["full", "checkpointed"])
def test_update_peak_on_cpu_stays_under_the_planners_estimate(checkpointing, chunk):
    """One training micro-batch the way the trainer runs it (each group's prompt packed once, log-probs and entropy
    through ``sequence_logprobs``, backward) does not allocate more than the planner's activations + logits for its
    tokens. Gradients are allocated before, so the peak is the micro-batch's own. Measured (MiB, peak / planned):
    full 133.7 / 171.7 and 81.8 / 78.3 chunked; checkpointed 88.3 / 143.9 and 36.3 / 50.6 chunked. A training path
    that kept what the planner assumes it frees goes over: every chunk's logits (104.9 / 78.3), entropy gradients
    when the bonus is 0 (137.7 / 78.3), no checkpointing (81.8 / 50.6)."""
    from mmevo.grpo.trainer import sequence_logprobs

    model, prompts, responses, tokens = _grpo_micro_batch_at_7b_proportions(checkpointing)

    def micro_batch():
        logp, ent, mask = sequence_logprobs(model, prompts, responses, 0, 1.0, "cpu", with_entropy=True,
                                            logits_chunk=chunk, entropy_grad=False, padding_free=True)
        (logp * mask).sum().backward()

    micro_batch()  # allocates the gradients; they are zeroed, not freed, before the measured pass
    model.zero_grad(set_to_none=False)
    peak = _peak_allocated_bytes(micro_batch)
    dims = mp.dims_from_config(model.config.to_dict())
    positions = mp.logits_positions(chunk, sum(map(len, responses)))
    planned = (mp.lm_activation_bytes(dims, tokens, 2, checkpointing)
               + mp.logits_bytes(positions, dims.vocab, mp.LOGITS_COPIES_TRAIN))
    saved = mp.lm_saved_activation_bytes(dims, tokens, 2, checkpointing)
    # 5 %: what only CPU's packed attention keeps (the padded Q / K / V / output copies of its buckets and their
    # masks; 4.5 % over with chunked logits here), including each response's gathered copy of its prompt's K / V,
    # which the planner leaves out (see layer_activation_bytes)
    assert saved < peak <= planned * 1.05, (peak / 2 ** 20, saved / 2 ** 20, planned / 2 ** 20)


@pytest.mark.parametrize("chunk", [0, 64], ids=["whole-logits", "chunked-logits"])
def test_logprob_pass_peak_on_cpu_stays_under_the_planners_estimate(chunk):
    """The no-grad old-policy / reference pass (eval mode, ``torch.no_grad``, the trainer's packed forward) does not
    allocate more than the planner's ``nograd_activations`` + ``nograd_logits``. Measured (MiB, peak / planned):
    43.2 / 71.0 with whole logits, 9.4 / 24.3 chunked (whole logits there: 43.2); the planner also counts the KV cache
    of every layer, which the packed forward does not keep."""
    import torch

    from mmevo.grpo.trainer import sequence_logprobs

    model, prompts, responses, tokens = _grpo_micro_batch_at_7b_proportions(checkpointing=True)
    model.eval()

    def logprob_pass():
        with torch.no_grad():
            sequence_logprobs(model, prompts, responses, 0, 1.0, "cpu", logits_chunk=chunk, padding_free=True)

    peak = _peak_allocated_bytes(logprob_pass)
    dims = mp.dims_from_config(model.config.to_dict())
    positions = mp.logits_positions(chunk, sum(map(len, responses)))
    planned = (mp.nograd_activation_bytes(dims, tokens, 2)
               + mp.logits_bytes(positions, dims.vocab, mp.LOGITS_COPIES_NO_GRAD))
    assert peak <= planned, (peak / 2 ** 20, planned / 2 ** 20)


def test_small_optimizer_state_by_hand():
    z3 = mp.ZeroSettings(enabled=True, stage=3, grad_accum_dtype="fp32", overlap_comm=True, reduce_bucket_size=10,
                         prefetch_bucket_size=6)
    n, b, W = 1000, 2, 4
    assert mp.policy_weight_bytes(n, b, z3, W) == 500  # 1000 * 2 / 4
    assert mp.master_weight_bytes(n, b, z3, W) == 1000  # 4 * 1000 / 4
    assert mp.adam_moment_bytes(n, b, z3, W) == 2000  # 8 * 1000 / 4
    assert mp.gradient_bytes(n, b, z3, W) == 1040  # fp32 partition 4 * 1000 / 4 + 2 buckets * 10 * 2
    # the fp32 partition + ZeRO-3's contiguous-gradients bucket (10 * 2), allocated at start-up and kept
    assert mp.gradient_resident_bytes(n, b, z3, W) == 1020
    assert mp.gradient_resident_bytes(n, b, replace(z3, contiguous_gradients=False), W) == 1000
    assert mp.zero3_gathered_bytes(SMALL, b, z3) == (2 * 608 + 6) * 2  # largest module + its grad + prefetch
    z2 = mp.ZeroSettings(enabled=True, stage=2, reduce_bucket_size=10)  # bf16 accumulation, one bucket
    assert mp.policy_weight_bytes(n, b, z2, W) == 2000
    assert mp.gradient_bytes(n, b, z2, W) == 520  # 2 * 1000 / 4 + 10 * 2
    assert mp.gradient_resident_bytes(n, b, z2, W) == 0
    off = mp.ZeroSettings(enabled=True, stage=3, offload_optimizer="cpu", offload_param="cpu", reduce_bucket_size=10)
    assert mp.master_weight_bytes(n, b, off, W) == mp.adam_moment_bytes(n, b, off, W) == 0
    # the partition lives in host memory; the bucket stays on the GPU
    assert mp.policy_weight_bytes(n, b, off, W) == 0 and mp.gradient_resident_bytes(n, b, off, W) == 20
    plain = mp.ZeroSettings()  # torch AdamW on bf16 weights: no master, bf16 moments and grads
    assert mp.master_weight_bytes(n, b, plain, 1) == 0
    assert mp.adam_moment_bytes(n, b, plain, 1) == 4000 and mp.gradient_bytes(n, b, plain, 1) == 2000
    assert mp.reference_bytes(n, b, 0.01) == 2000 and mp.reference_bytes(n, b, 0.0) == 0


def test_vllm_phases():
    mem = 80 * GiB
    assert mp.vllm_bytes(True, 0.5, mem, True, 2, False) == 40 * GiB
    assert mp.vllm_bytes(False, 0.5, mem, True, 2, False) == int(1.5 * GiB)  # pools freed, CUDA graphs kept
    assert mp.vllm_bytes(False, 0.5, mem, True, 1, True) == int(0.5 * GiB)  # level 1 frees the GPU too (host copy)
    assert mp.vllm_bytes(False, 0.5, mem, False, 2, False) == 40 * GiB  # no sleep mode: the whole share, always


def test_qwen2_5_vl_7b_builtin_dimensions():
    m = mp.model_dims("Qwen/Qwen2.5-VL-7B-Instruct")
    assert (m.hidden, m.intermediate, m.layers, m.heads, m.kv_heads, m.vocab) == (3584, 18944, 28, 28, 4, 152064)
    assert mp.total_params(m) == pytest.approx(8.29e9, rel=2e-3)  # the model card's 8.29B
    assert mp.vision_params(m.vision) == pytest.approx(0.677e9, rel=2e-3)
    # 7B activations without checkpointing: 20h + 4*512 + 8i = 225,280 B per token per layer, 6.3 MB over 28 layers
    assert mp.layer_activation_bytes(3584, 18944, 512, 2) == 225_280
    # its ViT block: 8*1280 + 2*(11*1280 + 4*3420) = 65,760 B per patch (the fused qkv output, fp32-rotated Q/K and
    # the two attention-output copies are what the LM layer formula would miss: 58,080)
    assert mp.vision_block_activation_bytes(m.vision, 2) == 65_760
    with pytest.raises(ValueError, match="no built-in dimensions"):
        mp.model_dims("Someone/Unknown-Model-7B")


def test_local_config_json_matches_the_real_model(tiny_vl_path, tiny_text_path):
    from mmevo.models.loader import load_model

    for path in (tiny_vl_path, tiny_text_path):
        dims = mp.model_dims(str(path))
        assert dims.source.endswith("config.json")
        model = load_model(path).model
        assert mp.total_params(dims) == sum(p.numel() for p in model.parameters())
        visual = sum(p.numel() for n, p in model.named_parameters() if ".visual." in f".{n}")
        assert mp.vision_params(dims.vision) == visual
    assert mp.model_dims(str(tiny_vl_path)).vision is not None and mp.model_dims(str(tiny_text_path)).vision is None


def test_tiny_alias_is_planned_from_the_built_model(tmp_path, capsys):
    assert main(["plan-memory", "model.path=tiny", f"model.cache_dir={tmp_path}"]) == 0
    out = json.loads(capsys.readouterr().out)  # stdout holds nothing but the JSON
    assert out["model"]["dims_from"] == str(tmp_path / "tiny-qwen2.5-vl" / "config.json") and out["fits"] is True


def test_qwen3_style_config():
    cfg = {"model_type": "qwen3", "hidden_size": 8, "intermediate_size": 16, "num_hidden_layers": 1,
           "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 6, "vocab_size": 10,
           "tie_word_embeddings": True}
    m = mp.dims_from_config(cfg)
    assert (m.d, m.q_dim, m.kv_dim, m.qkv_bias, m.qk_norm) == (6, 12, 6, False, True)
    # q 8*12, k 8*6, v 8*6, o 12*8 = 288; q/k norms 2*6 = 12; MLP 384; norms 16 -> 700; + tied embedding 80 + norm 8
    assert mp.lm_layer_params(m) == 700 and mp.lm_params(m) == 788


def test_monotonic_in_the_memory_settings():
    cfg = "configs/csrs_qwen2_5_vl_7b_geometry3k.yaml"
    base = _plan(cfg)
    no_ckpt = _plan(cfg, "model.gradient_checkpointing=false")
    assert base["per_gpu_gib"]["activations"] < no_ckpt["per_gpu_gib"]["activations"] / 5
    assert base["phases_gib"]["update"]["total"] < no_ckpt["phases_gib"]["update"]["total"]
    ref_on_gpu = _plan(cfg, "model.ref_offload=false")
    assert base["phases_gib"]["rollout"]["total"] < ref_on_gpu["phases_gib"]["rollout"]["total"]
    opt_off = _plan(cfg, "trainer.deepspeed=configs/deepspeed/zero3_offload.json")
    assert opt_off["phases_gib"]["rollout"]["total"] < base["phases_gib"]["rollout"]["total"]
    assert opt_off["host_gib_per_gpu"]["optimizer_offload"] > 0 and not opt_off["warnings"]
    more = _plan(cfg, gpus=16)
    for item in ("policy_weights", "master_weights_fp32", "adam_moments", "gradients_resident"):
        assert more["per_gpu_gib"][item] < base["per_gpu_gib"][item]
    chunked = _plan(cfg, "trainer.logits_chunk_tokens=0")
    assert base["per_gpu_gib"]["logits"] < chunked["per_gpu_gib"]["logits"]
    frozen = _plan(cfg, "model.freeze_vision_tower=true")
    assert frozen["model"]["trainable_params_b"] < base["model"]["trainable_params_b"]
    assert frozen["per_gpu_gib"]["activations_vision"] == 0
    no_kl = _plan(cfg, "algo.kl_coef=0", "model.ref_offload=false")
    assert no_kl["per_gpu_gib"]["reference"] == 0


def test_offload_without_the_deepspeed_flag_is_flagged(tmp_path):
    ds = json.loads((ROOT / "configs/deepspeed/zero3_offload.json").read_text())
    del ds["zero_force_ds_cpu_optimizer"]
    (tmp_path / "ds.json").write_text(json.dumps(ds))
    p = _plan("configs/csrs_qwen2_5_vl_7b_geometry3k.yaml", f"trainer.deepspeed={tmp_path / 'ds.json'}")
    assert any("zero_force_ds_cpu_optimizer" in w for w in p["warnings"])


# configs/csrs_qwen2_5_vl_7b_geometry3k.yaml and configs/deepspeed/zero3.json as they were before the memory work
# (memory-relevant keys), run as scripts/train_csrs_8gpu.sh ran them: vLLM at 0.6, sleeping at level 1 (then
# hard-wired), whole-micro-batch logits (chunking not wired then), no checkpointing, a resident reference replica.
HEAD_CSRS_7B = """
model: {path: Qwen/Qwen2.5-VL-7B-Instruct, dtype: bfloat16, device: cuda}
data: {max_prompt_length: 1024, min_pixels: 262144, hide_labels: true}
csrs: {enabled: true, m: 5}
rollout: {engine: vllm, gpu_memory_utilization: 0.6, enable_sleep_mode: true, n: 8, max_tokens: 1536}
reward: {heads: {sfr: 1.0}}
algo: {kl_coef: 0.01, kl_type: low_var_kl}
trainer: {prompts_per_step: 256, mini_batch_prompts: 64, micro_batch_seqs: 8, lr: 1.0e-6}
"""
HEAD_ZERO3 = {"bf16": {"enabled": "auto"}, "zero_optimization": {
    "stage": 3, "overlap_comm": False, "contiguous_gradients": True, "reduce_bucket_size": 50000000,
    "stage3_prefetch_bucket_size": 50000000, "stage3_param_persistence_threshold": 0,
    "offload_optimizer": {"device": "none"}, "offload_param": {"device": "none"}}}


def test_head_csrs_7b_settings_do_not_fit(tmp_path):
    (tmp_path / "csrs.yaml").write_text(HEAD_CSRS_7B)
    (tmp_path / "zero3.json").write_text(json.dumps(HEAD_ZERO3))
    cfg = load_config(tmp_path / "csrs.yaml", [f"trainer.deepspeed={tmp_path / 'zero3.json'}",
                                               "rollout.sleep_level=1", "trainer.logits_chunk_tokens=0"])
    p = mp.plan(cfg, 8, 80.0)
    assert p["fits"] is False and p["headroom_frac"] < 0
    assert p["setup"]["tokens_per_micro_batch"] == 8 * (1024 + 1536)
    # fp32 logits of 8 x 1536 positions: 8 * 1536 * 152064 * 4 bytes = 6.96 GiB a copy, 4 copies
    assert p["per_gpu_gib"]["logits"] == pytest.approx(4 * 8 * 1536 * 152064 * 4 / GiB, abs=0.01)
    assert p["phases_gib"]["update"]["total"] > 80  # ~6.3 MB per token of activations over 20480 tokens
    # even the rollout phase alone is over the limit: 0.6 x 80 GiB of vLLM + 15.4 GiB reference + ZeRO-3 states
    assert p["phases_gib"]["rollout"]["total"] > p["limit_gib"]
    assert p["host_gib_per_gpu"]["vllm_sleep_level1_weights"] == pytest.approx(15.45, abs=0.01)


@pytest.mark.parametrize("cfg", SHIPPED_7B)
def test_shipped_7b_configs_fit_8x80gib(cfg):
    p = _plan(cfg)
    assert p["setup"]["zero_stage"] == 3 and p["setup"]["grad_accum_dtype"] == "fp32"
    assert p["fits"] is True and p["headroom_frac"] >= 0.08, p["phases_gib"]
    assert p["peak_gib"] == max(phase["total"] for phase in p["phases_gib"].values())
    assert p["phases_gib"][p["peak_phase"]]["total"] == p["peak_gib"]
    assert not p["warnings"]


def test_cli_prints_one_json_object(capsys):
    cfg = str(ROOT / SHIPPED_7B[0])
    assert main(["plan-memory", cfg, "--gpus", "8", "--gpu-mem-gib", "80", "rollout.gpu_memory_utilization=0.5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["setup"]["gpus"] == 8 and out["setup"]["gpu_memory_utilization"] == 0.5
    assert isinstance(out["fits"], bool) and {"peak_gib", "headroom_frac", "phases_gib"} <= set(out)
    assert set(out["phases_gib"]) == {"rollout", "logprob", "update", "optimizer_step"}
    assert main(["plan-memory", cfg, "model.path=Someone/Unknown-Model", "--gpus", "8"]) == 2
    assert "no built-in dimensions" in capsys.readouterr().err


# -- Qwen2.5-VL-7B on 8 x 80 GiB under configs/deepspeed/zero3.json, by hand ------------------------------------------
# LM layer: q 3584*3584 + 3584, k and v 3584*512 + 512 each, o 3584*3584, MLP 3 * 3584*18944, norms 2*3584
LAYER_7B = 3584 * 3584 + 3584 + 2 * (3584 * 512 + 512) + 3584 * 3584 + 3 * 3584 * 18944 + 2 * 3584
# ViT block: qkv 1280*3840 + 3840, proj 1280*1280 + 1280, gate/up 2 * (1280*3420 + 3420), down 3420*1280 + 1280,
# two RMSNorms; merger: RMSNorm 1280, 5120*5120 + 5120, 5120*3584 + 3584; patch embedding 3*2*14*14 * 1280
BLOCK_7B = 1280 * 3840 + 3840 + 1280 * 1280 + 1280 + 2 * (1280 * 3420 + 3420) + 3420 * 1280 + 1280 + 2 * 1280
VISION_7B = 3 * 2 * 14 * 14 * 1280 + 32 * BLOCK_7B + 1280 + 5120 * 5120 + 5120 + 5120 * 3584 + 3584
P_7B = 28 * LAYER_7B + 2 * 152064 * 3584 + 3584 + VISION_7B  # untied embedding and lm_head, final norm
# per GPU in bytes, W = 8: CUDA context + NCCL 1.5 GiB, bf16 shard, fp32 master, Adam m + v, fp32 gradient partition,
# and the contiguous-gradients reduce bucket of configs/deepspeed/zero3.json (12,845,056 bf16 elements)
RESIDENT_7B = int(1.5 * GiB) + P_7B * 2 // 8 + P_7B * 4 // 8 + P_7B * 8 // 8 + P_7B * 4 // 8 + 12_845_056 * 2


def test_qwen2_5_vl_7b_parameter_count_by_hand():
    assert LAYER_7B == 233_057_792 and VISION_7B == 676_550_144
    assert P_7B == 8_292_166_656  # the checkpoint's safetensors hold exactly this many
    m = mp.model_dims("Qwen/Qwen2.5-VL-7B-Instruct")
    assert mp.total_params(m) == P_7B and mp.vision_params(m.vision) == VISION_7B


@pytest.mark.parametrize("cfg", SHIPPED_7B)
def test_weight_sync_buffers_are_a_gathered_bucket_and_its_clones(cfg):
    """ZeRO-3 weight sync (mmevo.models.weights.raw_state_items): a bucket closes once it reaches 256 MiB, so it holds
    up to 256 MiB + the embedding / lm_head (152064 x 3584 bf16), and every gathered tensor is cloned while the bucket
    stays gathered; the allocator still holds both when sync_weights wakes the KV cache. Was a flat 256 MiB."""
    sync = 2 * (256 * 2 ** 20 + 152064 * 3584 * 2)
    assert sync == 2_716_860_416
    p = _plan(cfg)
    assert p["per_gpu_gib"]["weight_sync_buffers"] == round(sync / GiB, 2) == 2.53
    rollout = RESIDENT_7B + int(0.6 * 80 * GiB) + sync  # vLLM awake at 0.6 of 80 GiB, reference in host memory
    assert p["phases_gib"]["rollout"]["total"] == round(rollout / GiB, 2) == 69.43
    assert p["peak_phase"] == "rollout" and p["peak_gib"] == 69.43
    assert p["fits"] is True and rollout <= 0.92 * 80 * GiB and p["headroom_frac"] == round(1 - rollout / (80 * GiB), 3)
    # without ZeRO-3 the live tensors are streamed as they are: nothing gathered, nothing cloned
    z2 = _plan(cfg, "trainer.deepspeed=configs/deepspeed/zero2.json")
    assert z2["per_gpu_gib"]["weight_sync_buffers"] == 0 and "weight_sync_buffers" not in z2["phases_gib"]["rollout"]


def test_optimizer_step_temporaries_by_hand():
    n, b, W = 1000, 2, 4
    z3 = mp.ZeroSettings(enabled=True, stage=3, grad_accum_dtype="fp32", sub_group_size=100)
    # a sub-group closes at >= 100 elements: up to 100 + one parameter's partition (52 / 4 = 13); fp32 grad copy +
    # AdamW's sqrt(v), 4 + 4 bytes each
    assert mp.optimizer_step_bytes(n, b, z3, W, largest_param=52) == 8 * 113
    assert mp.optimizer_step_bytes(n, b, mp.ZeroSettings(enabled=True, stage=3), W) == 8 * 250  # 1e9 > 250
    z2 = mp.ZeroSettings(enabled=True, stage=2, grad_accum_dtype="fp32")
    assert mp.optimizer_step_bytes(n, b, z2, W) == 4 * 250  # sqrt(v) over the fp32 partition
    assert mp.optimizer_step_bytes(n, b, mp.ZeroSettings(enabled=True, stage=2), W) == 8 * 250  # + fp32 grad copy
    assert mp.optimizer_step_bytes(n, b, mp.ZeroSettings(), 1) == 2000  # torch AdamW: sqrt of bf16 v, all at once
    off = mp.ZeroSettings(enabled=True, stage=3, offload_optimizer="cpu")
    assert mp.optimizer_step_bytes(n, b, off, W) == 0


def test_optimizer_step_phase_of_the_shipped_7b_config():
    p = _plan(SHIPPED_7B[0])
    # the rank's partition 8,292,166,656 / 8 = 1,036,520,832 < 1e9 + the lm_head's partition (152064*3584 / 8):
    # one sub-group; fp32 grad copy + sqrt(v) = 8 bytes per element
    step = 8 * (P_7B // 8)
    assert p["per_gpu_gib"]["optimizer_step"] == round(step / GiB, 2) == 7.72
    buckets = 2 * 12845056 * 2  # zero3.json's reduce bucket, bf16, twice with overlap_comm
    # the update's gradients (partition + both buckets) replace the resident ones (partition + the kept bucket)
    total = RESIDENT_7B - 12845056 * 2 + buckets + int(1.5 * GiB) + step  # + vLLM asleep (pools freed, graphs kept)
    assert p["phases_gib"]["optimizer_step"]["total"] == round(total / GiB, 2) == 28.15


def test_vllm_weights_and_kv_cache_by_hand():
    p = _plan(SHIPPED_7B[0])
    weights = P_7B * 2
    kv_per_token = 2 * 28 * 4 * 128 * 2  # K and V, 28 layers, 4 KV heads of 128, bf16
    kv = int(0.6 * 80 * GiB) - weights - GiB  # vLLM's budget - its weights - CUDA graphs
    assert kv_per_token == 57_344 and p["per_gpu_gib"]["vllm_weights"] == round(weights / GiB, 2) == 15.45
    assert p["per_gpu_gib"]["vllm_kv_cache_max"] == round(kv / GiB, 2)
    assert p["setup"]["vllm_kv_cache_max_tokens"] == kv // kv_per_token == 590_847
    # 0.2 x 80 GiB = 16 GiB cannot hold 15.45 GiB of weights + 1 GiB of CUDA graphs + one 2560-token sequence
    small = _plan(SHIPPED_7B[0], "rollout.gpu_memory_utilization=0.2")
    assert small["setup"]["vllm_kv_cache_max_tokens"] == 0
    assert any("vLLM refuses to start" in w for w in small["warnings"])


def test_mmzero_config_says_how_the_frozen_roles_are_planned():
    """On vLLM the frozen roles sample through the trained role's engine and hold no weights (mmevo.rollout.shared_vllm):
    nothing to add. On the HF engine each keeps its model on the device, which the plan leaves out and says so."""
    p = _plan("configs/mmzero_qwen2_5_vl_7b.yaml")
    [w] = [w for w in p["warnings"] if w.startswith("mmzero:")]
    assert "same vLLM engine" in w and "add nothing" in w
    hf = _plan("configs/mmzero_qwen2_5_vl_7b.yaml", "rollout.engine=hf")
    [w] = [w for w in hf["warnings"] if w.startswith("mmzero:")]
    assert "not in it" in w and "15.45 GiB" in w



def test_zero3_keeps_its_contiguous_gradients_bucket_in_every_phase(tmp_path):
    """DeepSpeed's stage 3 allocates its reduce bucket (``ipg_buckets``) at start-up when ``contiguous_gradients`` is on
    (its default) and keeps it for the run, so the rollout and log-prob phases hold it too; the plan left it out of
    them (0.93 GiB per GPU at DeepSpeed's default bucket of 5e8 bf16 elements)."""
    ds = json.loads((ROOT / "configs/deepspeed/zero3.json").read_text())
    del ds["zero_optimization"]["reduce_bucket_size"], ds["zero_optimization"]["contiguous_gradients"]
    (tmp_path / "default.json").write_text(json.dumps(ds))
    assert mp.read_deepspeed(tmp_path / "default.json").contiguous_gradients is True  # DeepSpeed's default
    ds["zero_optimization"]["contiguous_gradients"] = False
    (tmp_path / "off.json").write_text(json.dumps(ds))
    assert mp.read_deepspeed(tmp_path / "off.json").contiguous_gradients is False
    cfg = "configs/csrs_qwen2_5_vl_7b_geometry3k.yaml"
    with_bucket = _plan(cfg, f"trainer.deepspeed={tmp_path / 'default.json'}")
    without = _plan(cfg, f"trainer.deepspeed={tmp_path / 'off.json'}")
    bucket_gib = 500_000_000 * 2 / GiB
    for phase in ("rollout", "logprob"):
        diff = with_bucket["phases_gib"][phase]["total"] - without["phases_gib"][phase]["total"]
        assert diff == pytest.approx(bucket_gib, abs=0.011), phase
    # the update already counted the buckets with the gradients: the same with or without the flag
    assert with_bucket["phases_gib"]["update"]["total"] == without["phases_gib"]["update"]["total"]
