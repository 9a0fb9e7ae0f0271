"""Build the configured rollout engine for a loaded policy."""

from __future__ import annotations

from mmevo.config import Config
from mmevo.models.loader import LoadedModel, stop_token_ids, vision_token_ids


def build_engine(cfg: Config, policy: LoadedModel):
    """``rollout.engine``: "hf" samples from the trained module itself; "vllm" runs a vLLM engine beside it."""
    name = cfg.rollout.engine
    if name == "hf":
        from mmevo.rollout.hf import HFEngine

        return HFEngine(policy.model, policy.tokenizer.pad_token_id, stop_token_ids(policy.tokenizer, policy.model),
                        max_batch_seqs=cfg.rollout.max_batch_seqs, device=cfg.model.device,
                        banned_ids=vision_token_ids(policy.tokenizer))
    if name == "vllm":
        raise NotImplementedError("rollout.engine=vllm is not available yet in this version; use rollout.engine=hf")
    raise ValueError(f"rollout.engine={name!r} not in ['hf', 'vllm']")
