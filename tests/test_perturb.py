"""Tests for mmevo.csrs.perturb: Visual Semantic Perturbation (Gaussian pixel noise, Eq. 9)."""

import numpy as np
import pytest
from PIL import Image

from mmevo.config import CSRSConfig
from mmevo.csrs.perturb import DEFAULT_VSP_SIGMA, derive_seed, perturb_image, perturb_images


def grey(size=(128, 96), value=128):
    return Image.new("RGB", size, (value, value, value))


def diff(a, b):
    return np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)


def test_pixels_really_change():
    img = grey()
    out = perturb_image(img, 20.0, seed=0)
    assert np.abs(diff(out, img)).mean() > 0.5 * 20.0


def test_realised_std_matches_sigma_on_mid_grey():
    img = grey((256, 256))
    for sigma in (5.0, 20.0):
        d = diff(perturb_image(img, sigma, seed=1), img)
        assert abs(d.std() - sigma) < 0.05 * sigma
        assert abs(d.mean()) < 0.05 * sigma
    # channels get independent noise
    d = diff(perturb_image(img, 20.0, seed=2), img).reshape(-1, 3)
    assert abs(np.corrcoef(d[:, 0], d[:, 1])[0, 1]) < 0.05


def test_deterministic_given_seed():
    img = grey()
    assert perturb_image(img, 20.0, 7).tobytes() == perturb_image(img, 20.0, 7).tobytes()
    assert perturb_image(img, 20.0, 7).tobytes() != perturb_image(img, 20.0, 8).tobytes()


def test_clipping_keeps_uint8_range():
    arr = np.zeros((32, 32, 3), dtype=np.uint8)
    arr[:, 16:] = 255
    img = Image.fromarray(arr)
    out = np.asarray(perturb_image(img, 80.0, seed=0))
    assert out.dtype == np.uint8
    # black only gets brighter, white only darker (values were clipped, not wrapped)
    assert out[:, :16].min() == 0 and out[:, :16].max() > 0
    assert out[:, 16:].max() == 255 and out[:, 16:].min() < 255
    # about half the noise draws are negative on black / positive on white and get clipped there
    assert 0.45 < (out[:, :16] == 0).mean() < 0.6 and 0.45 < (out[:, 16:] == 255).mean() < 0.6
    # wrapping would put black pixels near 255: clipped ones stay within a few sigma of 0
    assert np.percentile(out[:, :16], 99) < 255 and np.percentile(out[:, 16:], 1) > 0


def test_sigma_zero_is_identical_copy():
    img = grey()
    out = perturb_image(img, 0.0, seed=3)
    assert out is not img and out.tobytes() == img.tobytes()


def test_size_and_mode_and_input_untouched():
    img = grey((50, 30))
    before = img.tobytes()
    out = perturb_image(img, DEFAULT_VSP_SIGMA, seed=0)
    assert out.size == (50, 30) and out.mode == "RGB"
    assert img.tobytes() == before
    # non-RGB input is converted to RGB
    out_l = perturb_image(Image.new("L", (20, 10), 100), 10.0, seed=0)
    assert out_l.mode == "RGB" and out_l.size == (20, 10)
    out_rgba = perturb_image(Image.new("RGBA", (20, 10), (1, 2, 3, 4)), 10.0, seed=0)
    assert out_rgba.mode == "RGB"


def test_perturb_images_per_image_seeds():
    imgs = [grey(), grey()]
    outs = perturb_images(imgs, 20.0, seed=5)
    assert len(outs) == 2
    assert outs[0].tobytes() != outs[1].tobytes()  # same input, different derived seeds
    assert outs[1].tobytes() == perturb_image(imgs[1], 20.0, derive_seed(5, 1)).tobytes()
    assert [o.tobytes() for o in perturb_images(imgs, 20.0, seed=5)] == [o.tobytes() for o in outs]
    assert perturb_images([], 20.0, seed=5) == []


def test_derive_seed_distinct():
    seeds = {derive_seed(s, i) for s in range(5) for i in range(2000)}
    assert len(seeds) == 5 * 2000


@pytest.mark.parametrize("sigma, seed", [(-1.0, 0), (float("nan"), 0), (float("inf"), 0), (10.0, -1), (10.0, 1.5)])
def test_bad_args_raise(sigma, seed):
    with pytest.raises(ValueError):
        perturb_image(grey((4, 4)), sigma, seed)


def test_config_default_sigma_is_the_module_default_and_is_realised():
    # the CSRS config and perturb_images' default must not drift apart
    sigma = CSRSConfig().sigma
    assert sigma == DEFAULT_VSP_SIGMA
    img = grey((256, 256))
    # perturb_images without a sigma and with the config's sigma give the same images ...
    (default_out,) = perturb_images([img], seed=4)
    (config_out,) = perturb_images([img], sigma, seed=4)
    assert default_out.tobytes() == config_out.tobytes()
    # ... whose realised noise std is that sigma (mid-grey: clipping is > 6 sigma away)
    d = diff(config_out, img)
    assert abs(d.std() - sigma) < 0.05 * sigma
    assert abs(d.mean()) < 0.05 * sigma
