"""Data-parallel GRPO with DeepSpeed ZeRO: process group, engine wrapping, gathered weights, metric reduction.

Launch with any launcher that sets RANK / WORLD_SIZE (``deepspeed``, ``torchrun``, ``accelerate launch``). Each rank
samples its own whole prompt groups, so group statistics never need other ranks; metrics are reduced across ranks
(``all_reduce_mean``: averaged, summed, extremes, or pooled over the ranks' samples) and only rank 0 writes logs,
checkpoints and the final model.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.distributed as dist

from mmevo.models.inputs import unwrap


def world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else int(os.environ.get("WORLD_SIZE", 1))


def rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else int(os.environ.get("RANK", 0))


def is_main() -> bool:
    return rank() == 0


def broadcast_from_main(obj):
    """Rank 0's ``obj`` on every rank (picklable objects; identity in a single process)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def local_rank() -> int:
    """This process's rank on its node: the launcher's ``LOCAL_RANK``; the global rank where none is set."""
    return int(os.environ.get("LOCAL_RANK", rank()))


def launched_world_size() -> int:
    """Processes the launcher (torchrun / deepspeed) started, whether or not the group is joined yet."""
    return int(os.environ.get("WORLD_SIZE", 1))


def init_distributed(device: str) -> None:
    """Join the process group the launcher prepared (gloo on CPU, nccl on GPU); a no-op in a single process.

    On GPU each rank first selects its own device (``LOCAL_RANK``), so that ``model.device=cuda`` means this rank's GPU
    for everything loaded afterwards (policy, reference model, vLLM engine). A rank started by a launcher first arranges
    to get SIGTERM when the launcher dies (``mmevo.runlock.exit_with_parent``), so that a killed ``torchrun`` leaves no
    ranks behind.
    """
    from mmevo.runlock import exit_with_parent_if_launched

    exit_with_parent_if_launched()
    if launched_world_size() > 1 and not dist.is_initialized():
        on_gpu = str(device).startswith("cuda")
        if on_gpu:
            gpu = int(os.environ.get("LOCAL_RANK", 0))
            # torch.cuda.set_device on a machine without that GPU fails deep in torch (a CPU build: AttributeError
            # '_cuda_setDevice'), once per rank, naming no setting
            from mmevo.models.loader import check_device

            check_device("model.device", device)
            if gpu >= torch.cuda.device_count():
                raise ValueError(f"model.device={device}: this rank (LOCAL_RANK={gpu}) needs GPU {gpu}, and this "
                                 f"machine has {torch.cuda.device_count()} visible: start at most that many ranks "
                                 "per node (--nproc_per_node)")
            torch.cuda.set_device(gpu)
        import deepspeed

        if not on_gpu and int(os.environ.get("LOCAL_RANK", 0)) == 0:
            warn_stale_build_lock(SHM_COMM_EXTENSION)
        deepspeed.init_distributed(dist_backend="nccl" if on_gpu else "gloo")


SHM_COMM_EXTENSION = "deepspeed_shm_comm"  # the op DeepSpeed JIT-builds (torch cpp_extension) when it joins on CPU
STALE_BUILD_LOCK_S = 600.0  # the build takes about a minute on 2 cores: a lock this old is almost surely abandoned


def _build_lock_age(name: str) -> tuple[Path, float] | None:
    """The lock file of torch's JIT build of extension ``name`` and its age in seconds; None without one."""
    try:
        from torch.utils.cpp_extension import _get_build_directory

        lock = Path(_get_build_directory(name, verbose=False)) / "lock"
        return lock, time.time() - lock.stat().st_mtime
    except Exception:  # no lock (the usual case), or a torch without that helper: nothing to say
        return None


def stale_build_lock(name: str, older_than_s: float = STALE_BUILD_LOCK_S) -> Path | None:
    """The lock file of torch's JIT build of extension ``name`` when it is older than ``older_than_s``, else None.

    A build killed mid-way (Ctrl-C, a timeout) leaves that file behind, and every later process that loads the
    extension waits for it to vanish, with no timeout and no message."""
    found = _build_lock_age(name)
    return found[0] if found and found[1] > older_than_s else None


def warn_stale_build_lock(name: str) -> None:
    found = _build_lock_age(name)  # one stat: a build finishing now removes the file between two
    if found and found[1] > STALE_BUILD_LOCK_S:
        lock, age_min = found[0], found[1] / 60
        warnings.warn(f"{lock} is {age_min:.0f} min old: DeepSpeed waits for it before loading its CPU communication "
                      f"op ({name}), without a timeout. Unless another process is building that op right now, a build "
                      "killed earlier left it: delete that file, or this run hangs here", stacklevel=2)


def load_ds_config(path: str | Path, model: torch.nn.Module, max_grad_norm: float) -> dict:
    """Read a DeepSpeed JSON config and fill what mmevo owns: bf16 from the model dtype, clipping from the config."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"trainer.deepspeed={path}: file not found")
    from mmevo.memory_plan import deepspeed_bf16_key, read_deepspeed, resolve_deepspeed

    param_dtype = str(next(unwrap(model).parameters()).dtype).removeprefix("torch.")
    # the planner's reading of the file: a stage it cannot be, or a dtype mix DeepSpeed refuses, named up front
    for note in resolve_deepspeed(read_deepspeed(p), param_dtype, f"trainer.deepspeed={path}")[1]:
        warnings.warn(note, stacklevel=2)
    cfg = json.loads(p.read_text())
    # the section DeepSpeed reads (a legacy "bfloat16" one too): an empty "bf16" added beside it would turn bf16 off
    bf16 = cfg.get(deepspeed_bf16_key(cfg))
    if isinstance(bf16, dict) and bf16.get("enabled") == "auto":
        bf16["enabled"] = param_dtype == "bfloat16"
    cfg["gradient_clipping"] = max_grad_norm
    # mmevo does its own micro-batching and marks accumulation boundaries itself
    cfg["train_micro_batch_size_per_gpu"] = 1
    cfg["gradient_accumulation_steps"] = 1
    cfg.pop("train_batch_size", None)
    return cfg


def wrap_deepspeed(model: torch.nn.Module, optimizer, scheduler, ds_config: dict):
    """DeepSpeed engine around the model with mmevo's torch optimizer (no DeepSpeed optimizer op to compile)."""
    import deepspeed

    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, lr_scheduler=scheduler, config=ds_config)
    return engine


@contextmanager
def zero3_full_weights(ds_engine):
    """Full (gathered) weights on every rank with DeepSpeed's ZeRO-3 module hooks off, for sampling with the module.

    With the hooks on, every forward is a collective (parameter all-gathers, and trace checks at the start of each
    forward), so ranks that decode different numbers of steps, or have nothing to decode, would hang. Entering and
    leaving are collective: every rank must enter. DeepSpeed's own ``unwrap_model_for_generation`` leaves the
    start-of-forward hook on (its trace check is a collective), hence this version.
    """
    import deepspeed

    opt = ds_engine.optimizer
    offload = getattr(opt, "parameter_offload", None) or opt
    with deepspeed.zero.GatheredParameters(list(ds_engine.module.parameters()), modifier_rank=None):
        for hook in [*offload.forward_hooks, *offload.backward_hooks, offload.fwd_pre_hook]:
            hook.remove()
        offload.forward_hooks, offload.backward_hooks = [], []
        try:
            yield
        finally:
            offload._register_deepspeed_module(offload.module)  # also invalidates the recorded fetch trace
            coordinator = offload.get_param_coordinator
            offload.fwd_pre_hook = offload.module.register_forward_pre_hook(
                lambda module, *args: coordinator().reset_step())


def all_gather_objects(obj) -> list:
    """Every rank's ``obj`` (picklable), in rank order; ``[obj]`` in a single process."""
    if world_size() == 1 or not dist.is_initialized():
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def is_max_metric(key: str) -> bool:
    """A metric named as a maximum (``*_max``, ``peak*``): combined by max, over micro-batches and over ranks."""
    leaf = key.rsplit("/", 1)[-1]
    return leaf.endswith("_max") or leaf.startswith("peak")


def _reduce(values: list[float], key: str, sum_keys: tuple[str, ...]) -> float:
    """Sum for ``sum_keys``; a maximum / minimum for a metric named as one (``*_max``, ``peak*``, ``*_min``), the
    mean of the ranks' values otherwise."""
    leaf = key.rsplit("/", 1)[-1]
    if key in sum_keys:
        return sum(values)
    if is_max_metric(key):
        return max(values)
    if leaf.endswith("_min"):
        return min(values)
    return sum(values) / len(values)


def numeric_metrics(metrics: dict) -> dict[str, float]:
    """The metrics that are real numbers, as floats: Python and numpy numbers (a numpy float32 is no ``float``, and
    left out it would stay rank-local), not bools."""
    return {k: float(v) for k, v in metrics.items() if isinstance(v, numbers.Real) and not isinstance(v, bool)}


def pooled_mean_std(counts: list[float], means: list[float], stds: list[float]) -> tuple[float, float]:
    """Mean and population std of the union of the ranks' samples, from each rank's (count, mean, population std):
    the mean of the ranks' stds is not the std of their samples (two ranks with rewards all 0 and all 1 have std 0
    each, and 0.5 together). Without any count: the plain means of the ranks' values."""
    total = sum(counts)
    if total <= 0:
        return sum(means) / len(means), sum(stds) / len(stds)
    mean = sum(n * m for n, m in zip(counts, means)) / total
    var = sum(n * (s * s + (m - mean) ** 2) for n, m, s in zip(counts, means, stds)) / total
    return mean, math.sqrt(max(var, 0.0))


def all_reduce_mean(metrics: dict, sum_keys: tuple[str, ...] = (), pooled: tuple[str, ...] = (),
                    count: int | None = None, weights: dict[str, float] | None = None) -> dict:
    """Numeric metrics averaged over the ranks that logged them (``sum_keys``: summed, e.g. per-rank counts; a
    metric named as a maximum or minimum, e.g. ``actor/ratio_max``, ``memory/peak_rss_mb``: the ranks' extreme).

    ``pooled``: key prefixes of per-sample statistics ``<x>/mean`` and ``<x>/std`` (population std) over ``count``
    samples of this rank: they become the mean and std over all ranks' samples (``pooled_mean_std``), what one process
    over the global batch logs, not the mean of the ranks' values. ``weights``: key -> how many items (samples,
    groups) this rank's value averages: the mean over the ranks weighs each by it (a rank that lost prompts counts
    less), again what one process logs.

    Ranks may log different keys (a rank whose prompts were all dropped has no reward metrics): each key is reduced
    over the ranks that have it, and every rank returns the same dict.
    """
    if world_size() == 1 or not dist.is_initialized():
        return metrics
    gathered = all_gather_objects((numeric_metrics(metrics), count, dict(weights or {})))
    out = dict(metrics)
    for k in sorted(set().union(*(g for g, _, _ in gathered))):
        out[k] = _reduce([g[k] for g, _, _ in gathered if k in g], k, sum_keys)
        ranks = [(w[k], g[k]) for g, _, w in gathered if k in g and k in w]
        if ranks and len(ranks) == sum(k in g for g, _, _ in gathered) and sum(n for n, _ in ranks) > 0:
            out[k] = sum(n * v for n, v in ranks) / sum(n for n, _ in ranks)
    for k in sorted(out):
        stem = k[:-len("/mean")]
        if not (k.endswith("/mean") and k.startswith(pooled)):
            continue
        ranks = [(n, g[k], g[stem + "/std"]) for g, n, _ in gathered
                 if k in g and stem + "/std" in g and n is not None]
        if ranks and len(ranks) == sum(k in g for g, _, _ in gathered):  # every rank that logged the mean gave its std
            out[k], out[stem + "/std"] = pooled_mean_std(*map(list, zip(*ranks)))
    return out
