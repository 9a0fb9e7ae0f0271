"""HF rollout engine and model inputs, second review: sampling parameters the sampler would silently read as others,
prompts without tokens, KV reuse from a completion sampled under an image override, and greedy parity with
transformers' ``generate`` for prompts with several images.

Expected values come from transformers (``generate``, a plain forward of the whole sequence), never from the engine.
"""

import pytest
import torch
from PIL import Image

from conftest import hf_engine, hf_greedy as _hf_greedy, randomized_model
from mmevo.models.inputs import EncodedPrompt, collate, collate_for_training, encode_prompt, pack_shared
from mmevo.rollout.base import RolloutRequest, SamplingParams


@pytest.fixture(scope="module")
def text(tiny_text_path):
    return randomized_model(tiny_text_path, seed=4)


@pytest.fixture(scope="module")
def vl(tiny_vl_path):
    return randomized_model(tiny_vl_path, seed=2)


@pytest.mark.parametrize("params, field", [
    (SamplingParams(temperature=float("nan")), "temperature"),  # was sampled at temperature 1
    (SamplingParams(temperature=-0.5), "temperature"),  # was greedy
    (SamplingParams(temperature=float("inf")), "temperature"),  # was uniform sampling
    (SamplingParams(top_p=float("nan")), "top_p"),  # was no nucleus
    (SamplingParams(top_p=1.5), "top_p"),
    (SamplingParams(top_p=-0.1), "top_p"),  # was greedy
    (SamplingParams(max_tokens=-1), "max_tokens"),  # was an empty completion
])
def test_invalid_sampling_params_are_refused_naming_the_field(text, params, field):
    p = encode_prompt(text.processor, False, "Hi", [])
    with pytest.raises(ValueError, match=rf"SamplingParams\.{field}"):
        hf_engine(text).generate([RolloutRequest(p)], params)


def test_invalid_request_budget_refused_and_edge_values_accepted(text):
    p = encode_prompt(text.processor, False, "Hi", [])
    eng = hf_engine(text)
    with pytest.raises(ValueError, match=r"RolloutRequest\.max_tokens"):
        eng.generate([RolloutRequest(p, max_tokens=-3)], SamplingParams(max_tokens=4, seed=0))
    eng.stop_ids = torch.tensor([], dtype=torch.long)
    for params in (SamplingParams(temperature=0.0, top_p=0.0, max_tokens=3), SamplingParams(top_p=1.0, max_tokens=3,
                                                                                            seed=0),
                   SamplingParams(top_p=1e-9, max_tokens=3, seed=0)):
        assert len(eng.generate([RolloutRequest(p)], params)[0][0].token_ids) == 3
    # an empty nucleus while sampling: refused as transformers / vLLM refuse it (the HF engine took the argmax)
    with pytest.raises(ValueError, match=r"top_p = 0 with temperature > 0"):
        eng.generate([RolloutRequest(p)], SamplingParams(top_p=0.0, max_tokens=3, seed=0))
    assert eng.generate([RolloutRequest(p, n=2)], SamplingParams(max_tokens=0))[0][0].token_ids == []


def test_a_prompt_without_tokens_is_refused(text):
    """Nothing predicts the first token of an empty context: the engine sampled from a padding slot's logits when
    the empty prompt shared a batch (and crashed inside the model alone); training scored its response from a
    padding slot, or, packed with shared prompts, from the previous prompt's last token."""
    empty = EncodedPrompt("", [], [], [])
    p = encode_prompt(text.processor, False, "Hi", [])
    eng = hf_engine(text)
    params = SamplingParams(temperature=1.0, max_tokens=3, seed=0)
    for reqs in ([RolloutRequest(empty)], [RolloutRequest(p), RolloutRequest(empty, n=2)]):
        with pytest.raises(ValueError, match="RolloutRequest .*no tokens"):
            eng.generate(reqs, params)
    pad = text.tokenizer.pad_token_id
    with pytest.raises(ValueError, match="prompt 1 has no tokens"):
        collate_for_training(text.model, [p, empty], [[5], [6, 7]], pad)
    with pytest.raises(ValueError, match="prompt 1 has no tokens"):
        pack_shared(text.model, [p, empty, empty], [[5], [6, 7], [8]], pad)
    with pytest.raises(ValueError, match="no tokens"):
        collate(text.model, [p, empty], None, pad)
    # an empty prompt with a prefix has a context: the same greedy continuation as that prefix as the prompt
    eng.stop_ids = torch.tensor([], dtype=torch.long)
    greedy = SamplingParams(temperature=0.0, max_tokens=4)
    a = eng.generate([RolloutRequest(empty, prefix_ids=[300, 301])], greedy)[0][0]
    b = eng.generate([RolloutRequest(EncodedPrompt("", [], [300, 301], [0, 0]))], greedy)[0][0]
    assert a.token_ids == b.token_ids and a.prefix_ids == [300, 301]


def _vl_prompt(lm, color):
    return encode_prompt(lm.processor, True, "<image>Find angle C.", [Image.new("RGB", (56, 56), color)])


def test_continue_from_a_completion_sampled_under_an_image_override_uses_the_prompts_image(vl):
    """A completion sampled with ``image_override`` kept the override's keys / values; continuing it for the
    prompt's own image reused them, so the continuation was conditioned on the other image. Its log-probs must be
    those of a plain forward over prompt (own image) + prefix + tokens."""
    prompt, other = _vl_prompt(vl, "white"), _vl_prompt(vl, (10, 200, 40))
    assert prompt.input_ids == other.input_ids and not torch.equal(prompt.pixel_values, other.pixel_values)
    eng = hf_engine(vl)
    eng.stop_ids = torch.tensor([], dtype=torch.long)
    T = 1.0
    src = eng.generate([RolloutRequest(prompt, image_override=other, keep_kv=True)],
                       SamplingParams(temperature=T, max_tokens=6, seed=1))[0][0]
    for cut in (0, 3):
        req = RolloutRequest(prompt, n=2, prefix_ids=src.full_ids[:cut], continue_from=src)
        for c in eng.generate([req], SamplingParams(temperature=T, max_tokens=4, seed=2))[0]:
            b = collate(vl.model, [prompt], [c.full_ids], vl.tokenizer.pad_token_id)
            with torch.no_grad():
                ref = vl.model(**b.model_kwargs()).logits[0].double()
            start = len(prompt.input_ids) + cut - 1
            want = torch.log_softmax(ref[start:start + 4] / T, -1)[range(4), c.token_ids]
            assert torch.allclose(torch.tensor(c.logprobs, dtype=torch.float64), want, atol=1e-4)


def test_greedy_with_several_images_per_prompt_equals_transformers_generate(vl):
    """Prompts with two and three images of different grids next to a text-only one and a one-image one, left
    padded in one batch (mrope positions of every image), n > 1: each completion equals transformers' greedy."""
    imgs = [Image.new("RGB", (56, 56), "white"), Image.new("RGB", (70, 42), (200, 30, 30)),
            Image.new("RGB", (42, 84), (0, 90, 30))]
    prompts = [encode_prompt(vl.processor, True, "<image> and <image>: which is larger?", imgs[:2]),
               encode_prompt(vl.processor, True, "Find x.", []),
               encode_prompt(vl.processor, True, "<image>Angle?<image> ok <image>", [imgs[2], imgs[0], imgs[1]]),
               encode_prompt(vl.processor, True, "<image>Find angle C in the triangle drawn here.", [imgs[1]])]
    assert [len(p.images) for p in prompts] == [2, 0, 3, 1]
    eng = hf_engine(vl)
    stops, banned = eng.stop_ids.tolist(), eng.banned_ids.tolist()
    reqs = [RolloutRequest(prompts[0], n=2), RolloutRequest(prompts[1]), RolloutRequest(prompts[2], n=2),
            RolloutRequest(prompts[3])]
    out = eng.generate(reqs, SamplingParams(temperature=0.0, max_tokens=8))
    for r, comps in zip(reqs, out):
        ref = _hf_greedy(vl, r.prompt, 8, stops, banned)
        assert len(comps) == r.n and all(c.token_ids == ref for c in comps)


def test_both_engines_check_a_generate_call_with_the_same_rules(vl):
    # both engines refuse a bad call before any work; the vLLM engine is never started here (its generate must refuse
    # before it would open vLLM, so an engine without one shows it)
    from mmevo.rollout.base import RolloutRequest, SamplingParams, check_request_batch
    from mmevo.rollout.vllm_engine import VLLMEngine

    unopened = VLLMEngine.__new__(VLLMEngine)  # no LLM: reaching _open_llm would raise AttributeError, not ValueError
    for engine in (hf_engine(vl), unopened):
        with pytest.raises(ValueError, match="SamplingParams.temperature"):
            engine.generate([RolloutRequest(prompt=None)], SamplingParams(temperature=float("nan")))
        with pytest.raises(ValueError, match="RolloutRequest.n"):
            engine.generate([RolloutRequest(prompt=None, n=-1)], SamplingParams())
    ok = [RolloutRequest(prompt=None, n=2, max_tokens=0)]
    check_request_batch(ok, SamplingParams(temperature=0.0, top_p=0.0, max_tokens=0))
    for params, reqs, field_name in [
            (SamplingParams(temperature=float("nan")), ok, "temperature"),
            (SamplingParams(top_p=1.5), ok, "top_p"),
            (SamplingParams(max_tokens=-1), ok, "max_tokens"),
            (SamplingParams(), [RolloutRequest(prompt=None, n=-1)], "RolloutRequest.n"),
            (SamplingParams(), [RolloutRequest(prompt=None, n=1, max_tokens=-2)], "RolloutRequest.max_tokens")]:
        with pytest.raises(ValueError, match=field_name):
            check_request_batch(reqs, params)
