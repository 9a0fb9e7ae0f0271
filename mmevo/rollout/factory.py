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
        from mmevo.rollout.vllm_engine import VLLMEngine

        r = cfg.rollout
        # vLLM loads the checkpoint the policy came from; the trainer pushes its weights in after every update
        return VLLMEngine(policy.path, policy.tokenizer, stop_token_ids(policy.tokenizer, policy.model),
                          banned_ids=vision_token_ids(policy.tokenizer), dtype=cfg.model.dtype,
                          gpu_memory_utilization=r.gpu_memory_utilization, tensor_parallel_size=r.tensor_parallel_size,
                          seed=cfg.trainer.seed, max_model_len=cfg.data.max_prompt_length + r.max_tokens,
                          kv_cache_gb=r.vllm_kv_cache_gb, enable_sleep_mode=r.enable_sleep_mode)
    raise ValueError(f"rollout.engine={name!r} not in ['hf', 'vllm']")
