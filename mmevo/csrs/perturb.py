"""Visual Semantic Perturbation (VSP) of CSRS: Gaussian pixel noise on re-inference images (Eq. 9).

``I' = clip(round(I + eps), 0, 255)`` with ``eps ~ N(0, sigma^2)`` drawn independently for every
pixel and channel, in 0-255 pixel units, on the RGB image; the result is RGB uint8 again.

Implementation: plain numpy (``numpy.random.default_rng(seed)``) rather than albumentations'
``GaussNoise``. GaussNoise expresses the std as a fraction of the dtype maximum and draws it
from a range through its own Python RNG, so an exact sigma in pixel units and a seed that fully
determines the output take several indirections (``std_range=(s/255, s/255)``,
``noise_scale_factor=1``, a seeded ``Compose``); the four lines of numpy make both exact and
obvious, and the realised std is tested to match sigma.

Default strength: the paper gives no value for sigma. ``DEFAULT_VSP_SIGMA = 20.0`` (about 8% of
the 0-255 range, PSNR about 22 dB) visibly changes every pixel, so the model cannot rely on the
exact pixel values it saw in the maternal pass, while thin lines, labels and digits of geometry
diagrams stay readable (on a white background clipping keeps only the darkening half of the
noise, which is milder still).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PIL import Image

from mmevo.rewards.sfr import nonnegative_real

__all__ = ["DEFAULT_VSP_SIGMA", "derive_seed", "perturb_image", "perturb_images"]

DEFAULT_VSP_SIGMA = 20.0


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    return int(seed)


def _check_sigma(sigma: float) -> float:
    return nonnegative_real("sigma", sigma)


def derive_seed(seed: int, index: int) -> int:
    """A per-image seed from a base seed and the image's index (collision-free via SeedSequence)."""
    seed, index = _check_seed(seed), _check_seed(index)
    return int(np.random.SeedSequence([seed, index]).generate_state(1, dtype=np.uint64)[0])


def perturb_image(img: Image.Image, sigma: float, seed: int) -> Image.Image:
    """Return a new RGB image with N(0, sigma^2) pixel noise added (sigma in 0-255 units).

    Deterministic given ``seed``; ``sigma == 0`` returns an identical RGB copy. The input is
    converted to RGB first and is never modified.
    """
    if not isinstance(img, Image.Image):  # an array or a path failed on .convert, naming neither argument nor type
        raise ValueError(f"img must be a PIL image, got {type(img).__name__}")
    sigma = _check_sigma(sigma)
    seed = _check_seed(seed)
    rgb = img.convert("RGB")  # a new image even when already RGB
    if sigma == 0:
        return rgb
    arr = np.asarray(rgb, dtype=np.float64)
    noise = np.random.default_rng(seed).normal(0.0, sigma, size=arr.shape)
    out = np.clip(np.rint(arr + noise), 0, 255).astype(np.uint8)
    return Image.fromarray(out)


def perturb_images(images: Sequence[Image.Image], sigma: float = DEFAULT_VSP_SIGMA, seed: int = 0) -> list[Image.Image]:
    """Perturb each image with its own seed ``derive_seed(seed, i)``."""
    if isinstance(images, Image.Image) or not isinstance(images, Sequence):  # one image is no list of them
        raise ValueError(f"images must be a list of PIL images, got {type(images).__name__}")
    bad = next((i for i, im in enumerate(images) if not isinstance(im, Image.Image)), None)
    if bad is not None:
        raise ValueError(f"images[{bad}] must be a PIL image, got {type(images[bad]).__name__}")
    return [perturb_image(im, sigma, derive_seed(seed, i)) for i, im in enumerate(images)]
