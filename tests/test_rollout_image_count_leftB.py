"""Both rollout engines refuse a prompt whose images and image placeholders disagree in number, naming the request
and the two counts: vLLM failed with its bare AssertionError, the HF engine sampled on ignoring the images (a prompt
without pixel values) or reading the placeholders as text. Text prompts without images still sample."""

import dataclasses

import pytest

import mmevo  # noqa: F401  (applies the torchvision shim before vLLM can import torchvision)
from conftest import hf_engine, noise_image, randomized_model, vllm_test_config
from mmevo.models.inputs import encode_prompt
from mmevo.rollout.base import RolloutRequest, SamplingParams, image_placeholder_count

GREEDY = SamplingParams(temperature=0, max_tokens=2)


def test_image_placeholder_count_counts_runs():
    assert image_placeholder_count([1, 9, 9, 9, 2, 9, 3], 9) == 2
    assert image_placeholder_count([9], 9) == 1 and image_placeholder_count([1, 2], 9) == 0
    assert image_placeholder_count([9, 9], None) == 0  # a model without an image token reads no slots


@pytest.fixture(scope="module")
def vl(tiny_vl_path):
    return randomized_model(tiny_vl_path, seed=7)


def _mismatched(lm):
    """(image prompt, text prompt, mismatched variants with the counts the refusal names)."""
    image = encode_prompt(lm.processor, True, "<image>Find angle C.", [noise_image(0)])
    text = encode_prompt(lm.processor, True, "What is 2 + 2?", [])
    two = encode_prompt(lm.processor, True, "<image><image>Compare.", [noise_image(1), noise_image(2)])
    cases = [
        # a text prompt given an image (no placeholder, no pixel values): the HF engine ignored it
        (dataclasses.replace(text, images=[noise_image(0)]), "prompt holds 1 image\\(s\\) but 0 image placeholder"),
        # two images, one placeholder run
        (dataclasses.replace(image, images=[noise_image(0), noise_image(1)]),
         "prompt holds 2 image\\(s\\) but 1 image placeholder"),
        # placeholders for two images, one image
        (dataclasses.replace(two, images=[noise_image(1)]), "prompt holds 1 image\\(s\\) but 2 image placeholder"),
        # placeholders without any image
        (dataclasses.replace(image, images=[]), "prompt holds 0 image\\(s\\) but 1 image placeholder"),
    ]
    return image, text, cases


def test_hf_engine_refuses_images_that_do_not_match_the_placeholders(vl):
    engine = hf_engine(vl)
    image, text, cases = _mismatched(vl)
    for bad, message in cases:
        with pytest.raises(ValueError, match=f"RolloutRequest 1: {message}"):
            engine.generate([RolloutRequest(text), RolloutRequest(bad)], GREEDY)
    override = dataclasses.replace(image, images=[])  # same ids, no image: refused naming the override
    with pytest.raises(ValueError, match="RolloutRequest 0: image_override holds 0 image\\(s\\) but 1 image"):
        engine.generate([RolloutRequest(image, image_override=override)], GREEDY)
    # an image and its placeholder without pixel values: the model would read the placeholders as text
    no_pixels = dataclasses.replace(image, pixel_values=None, image_grid_thw=None)
    with pytest.raises(ValueError, match="RolloutRequest 0: prompt holds 1 image\\(s\\) but pixel values for 0"):
        engine.generate([RolloutRequest(no_pixels)], GREEDY)
    out = engine.generate([RolloutRequest(text), RolloutRequest(image), RolloutRequest(two_images(vl))], GREEDY)
    assert [len(o[0].token_ids) for o in out] == [2, 2, 2]  # matching prompts sample


def two_images(lm):
    return encode_prompt(lm.processor, True, "<image><image>Compare.", [noise_image(1), noise_image(2)])


def test_hf_engine_on_a_text_model_refuses_an_image(tiny_text_path):
    lm = randomized_model(tiny_text_path, seed=7)
    engine = hf_engine(lm)
    text = encode_prompt(lm.tokenizer, False, "What is 2 + 2?", [])
    with pytest.raises(ValueError, match="RolloutRequest 0: prompt holds 1 image\\(s\\) but 0 image placeholder"):
        engine.generate([RolloutRequest(dataclasses.replace(text, images=[noise_image(0)]))], GREEDY)
    assert len(engine.generate([RolloutRequest(text)], GREEDY)[0][0].token_ids) == 2


# -- vLLM: one engine for these tests (start-up is the slow part) ---------------------------------------------------
@pytest.fixture(scope="module")
def vllm_policy(tiny_vl_path, tmp_path_factory):
    pytest.importorskip("vllm", reason="vLLM is not installed")
    return randomized_model(tiny_vl_path, seed=7, save_to=tmp_path_factory.mktemp("image_count") / "policy")


@pytest.fixture(scope="module")
def vllm_engine(vllm_policy):
    from mmevo.rollout.factory import build_engine

    eng = build_engine(vllm_test_config(max_images_per_prompt=2), vllm_policy)
    yield eng
    eng.close()


def test_vllm_engine_refuses_images_that_do_not_match_the_placeholders(vllm_engine, vllm_policy):
    image, text, cases = _mismatched(vllm_policy)
    for bad, message in cases:
        with pytest.raises(ValueError, match=f"RolloutRequest 1: {message}"):
            vllm_engine.generate([RolloutRequest(text), RolloutRequest(bad)], GREEDY)
    override = dataclasses.replace(image, images=[])
    with pytest.raises(ValueError, match="RolloutRequest 0: image_override holds 0 image\\(s\\) but 1 image"):
        vllm_engine.generate([RolloutRequest(image, image_override=override)], GREEDY)
    out = vllm_engine.generate([RolloutRequest(text), RolloutRequest(image), RolloutRequest(two_images(vllm_policy))],
                               GREEDY)
    assert [len(o[0].token_ids) for o in out] == [2, 2, 2]  # matching prompts, text-only among them, sample
