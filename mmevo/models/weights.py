"""Full weights of a model, also when DeepSpeed ZeRO-3 has partitioned them across ranks (for export and sync)."""

from __future__ import annotations

from typing import Iterator

import torch

from mmevo.models.inputs import unwrap


def is_zero3(model) -> bool:
    return any(hasattr(p, "ds_id") for p in model.parameters())


def full_state_items(model: torch.nn.Module, bucket_bytes: int = 256 << 20) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, full tensor) for every parameter and buffer; under ZeRO-3 gathered bucket by bucket, never all at once.

    Names are those of ``state_dict()`` of the unwrapped transformers model.
    """
    base = unwrap(model)
    if not is_zero3(base):
        yield from base.state_dict().items()
        return
    import deepspeed

    bucket: list[tuple[str, torch.nn.Parameter]] = []
    size = 0

    def flush():
        with deepspeed.zero.GatheredParameters([p for _, p in bucket], modifier_rank=None):
            for name, p in bucket:
                yield name, p.data.detach().clone()

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
            yield name, b.detach().clone()
