"""Data-parallel GRPO with DeepSpeed ZeRO: process group, engine wrapping, gathered weights, metric reduction.

Launch with any launcher that sets RANK / WORLD_SIZE (``deepspeed``, ``torchrun``, ``accelerate launch``). Each rank
samples its own whole prompt groups, so group statistics never need other ranks; metrics are averaged across ranks
and only rank 0 writes logs, checkpoints and the final model.
"""

from __future__ import annotations

import json
import os
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


def launched_world_size() -> int:
    """Processes the launcher (torchrun / deepspeed) started, whether or not the group is joined yet."""
    return int(os.environ.get("WORLD_SIZE", 1))


def init_distributed(device: str) -> None:
    """Join the process group the launcher prepared (gloo on CPU, nccl on GPU); a no-op in a single process.

    On GPU each rank first selects its own device (``LOCAL_RANK``), so that ``model.device=cuda`` means this rank's GPU
    for everything loaded afterwards (policy, reference model, vLLM engine).
    """
    if launched_world_size() > 1 and not dist.is_initialized():
        on_gpu = str(device).startswith("cuda")
        if on_gpu:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        import deepspeed

        deepspeed.init_distributed(dist_backend="nccl" if on_gpu else "gloo")


def load_ds_config(path: str | Path, model: torch.nn.Module, max_grad_norm: float) -> dict:
    """Read a DeepSpeed JSON config and fill what mmevo owns: bf16 from the model dtype, clipping from the config."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"trainer.deepspeed={path}: file not found")
    cfg = json.loads(p.read_text())
    bf16 = cfg.setdefault("bf16", {})
    if bf16.get("enabled") == "auto":
        bf16["enabled"] = next(unwrap(model).parameters()).dtype == torch.bfloat16
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


def all_reduce_mean(metrics: dict) -> dict:
    """Average numeric metrics over ranks (every rank logs the same keys)."""
    if world_size() == 1 or not dist.is_initialized():
        return metrics
    keys = sorted(k for k, v in metrics.items() if isinstance(v, (int, float)))
    t = torch.tensor([float(metrics[k]) for k in keys], dtype=torch.float64)
    dist.all_reduce(t)
    t /= world_size()
    return {**metrics, **dict(zip(keys, t.tolist()))}
