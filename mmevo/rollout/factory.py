"""Build the configured rollout engine for a loaded policy."""

from __future__ import annotations

from mmevo.config import Config
from mmevo.models.loader import LoadedModel, stop_token_ids, vision_token_ids


def max_model_len(cfg: Config) -> int:
    """vLLM's context length: the longest prompt kept (``data.max_prompt_length``) plus the larger response budget,
    training's (``rollout.max_tokens``) or held-out evaluation's (``trainer.eval_max_tokens``); a smaller one would
    cut evaluation responses short."""
    return cfg.data.max_prompt_length + max(cfg.rollout.max_tokens, cfg.trainer.eval_max_tokens)


def fit_context_to_prompts(cfg: Config, prompt_lengths) -> None:
    """Raise ``cfg.data.max_prompt_length`` (in place, on a caller's copy) to the longest of ``prompt_lengths``: an
    evaluation that samples every prompt it is given, with no training filter before it (HONEST's calibration records
    under the long protocol prompt, the demo's sampled evaluation), sizes its engine's context to them."""
    cfg.data.max_prompt_length = max([cfg.data.max_prompt_length, *prompt_lengths])


def build_engine(cfg: Config, policy: LoadedModel, **vllm_kwargs):
    """``rollout.engine``: "hf" samples from the trained module itself; "vllm" runs a vLLM engine beside it.

    ``vllm_kwargs`` go to vLLM's ``LLM`` on top of the config's settings (e.g. ``load_format="dummy"`` in
    scripts/rehearse_7b.py); the HF engine takes none.
    """
    name = cfg.rollout.engine
    if name == "hf":
        if vllm_kwargs:
            raise ValueError(f"rollout.engine=hf takes no vLLM arguments, got {sorted(vllm_kwargs)}")
        from mmevo.rollout.hf import HFEngine

        return HFEngine(policy.model, policy.tokenizer.pad_token_id, stop_token_ids(policy.tokenizer, policy.model),
                        max_batch_seqs=cfg.rollout.max_batch_seqs, device=cfg.model.device,
                        banned_ids=vision_token_ids(policy.tokenizer),
                        # the fused step's projections take the training passes' kernel (model.cpu_linear=torch:
                        # F.linear there too, no oneDNN)
                        decode_linear=cfg.model.cpu_linear,
                        # the vLLM engine's context length: both engines refuse the same overlong requests
                        max_model_len=max_model_len(cfg))
    if name == "vllm":
        from mmevo.rollout import shared_vllm
        from mmevo.rollout.vllm_engine import VLLMEngine, image_processor_kwargs

        r = cfg.rollout
        # vLLM loads the checkpoint the policy came from; the trainer pushes its weights in after every update.
        # Images reach it already capped at data.max_pixels: vLLM profiles memory for that size, not the checkpoint's
        # 12.8 MP bound (the trainer's own processor sets the rounding and the upper limit, see image_processor_kwargs)
        processor = policy.processor if policy.is_vl else None

        def start(context_len: int) -> VLLMEngine:
            return VLLMEngine(policy.path, policy.tokenizer, stop_token_ids(policy.tokenizer, policy.model),
                              banned_ids=vision_token_ids(policy.tokenizer), dtype=cfg.model.dtype,
                              gpu_memory_utilization=r.gpu_memory_utilization,
                              tensor_parallel_size=r.tensor_parallel_size, seed=cfg.trainer.seed,
                              max_model_len=context_len, kv_cache_gb=r.vllm_kv_cache_gb,
                              enable_sleep_mode=r.enable_sleep_mode, sleep_level=r.sleep_level,
                              enforce_eager=r.enforce_eager,
                              mm_processor_kwargs=image_processor_kwargs(cfg.data.max_pixels, processor),
                              max_images_per_prompt=r.max_images_per_prompt, **vllm_kwargs)

        shared = shared_vllm.active()
        if shared is not None:  # a self-play loop's roles: views of the process's one engine
            if vllm_kwargs:
                raise ValueError("build_engine: vLLM arguments cannot be given to a view of the shared engine "
                                 f"(shared_vllm is active), got {sorted(vllm_kwargs)}")
            return shared.view(cfg, policy, start)
        return start(max_model_len(cfg))
    raise ValueError(f"rollout.engine={name!r} not in ['hf', 'vllm']")
