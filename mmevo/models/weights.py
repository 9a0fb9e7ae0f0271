"""Full weights of a model, also when DeepSpeed ZeRO-3 has partitioned them across ranks (for export and sync)."""

from __future__ import annotations

from typing import Iterator

import torch

from mmevo.models.inputs import unwrap


def is_zero3(model) -> bool:
    return any(hasattr(p, "ds_id") for p in model.parameters())


def partitioned(model) -> bool:
    """Whether ZeRO-3 really split the weights: this rank holds only a shard of every parameter it does not keep
    whole (persistence threshold); ``ds_id`` alone is set on every parameter, split or not."""
    params = [p for p in model.parameters() if hasattr(p, "ds_tensor") and p.ds_numel > 1]
    return bool(params) and all(p.ds_tensor.numel() < p.ds_numel for p in params)


def full_state_items(model: torch.nn.Module, bucket_bytes: int = 256 << 20,
                     device: str | torch.device | None = None) -> Iterator[tuple[str, torch.Tensor]]:
    """Like ``raw_state_items``; a LoRA-injected model yields its merged weights under the plain model's names."""
    from mmevo.models.adapters import lora_scalings, merge_lora_items

    items = raw_state_items(model, bucket_bytes, device)
    scalings = lora_scalings(model)  # empty without LoRA
    yield from merge_lora_items(items, scalings) if scalings else items


def raw_state_items(model: torch.nn.Module, bucket_bytes: int = 256 << 20,
                    device: str | torch.device | None = None) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, full tensor) for every parameter and buffer; under ZeRO-3 gathered bucket by bucket, never all at once.

    Names are those of ``state_dict()`` of the unwrapped transformers model. ``device="cpu"``: every tensor is copied
    to host memory as it is produced (saves and exports collect the whole model: never a second copy on the GPU).
    """
    base = unwrap(model)
    if not is_zero3(base):
        for name, t in base.state_dict().items():
            yield name, (t.detach().to(device, copy=True) if device is not None else t)
        return
    import deepspeed

    bucket: list[tuple[str, torch.nn.Parameter]] = []
    size = 0

    def flush():
        with deepspeed.zero.GatheredParameters([p for _, p in bucket], modifier_rank=None):
            for name, p in bucket:
                yield name, p.data.detach().to(device, copy=True) if device is not None else p.data.detach().clone()

    for name, p in base.named_parameters():
        bucket.append((name, p))
        size += p.ds_numel * p.element_size()
        if size >= bucket_bytes:
            yield from flush()
            bucket, size = [], 0
    if bucket:
        yield from flush()
    persistent = set(base.state_dict().keys())  # non-persistent buffers (rotary inv_freq) are not weights
    for name, b in base.named_buffers():
        if name in persistent:
            yield name, b.detach().to(device, copy=True) if device is not None else b.detach().clone()
