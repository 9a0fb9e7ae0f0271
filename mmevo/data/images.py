"""Image size policy applied before the processor (as EasyR1's dataset does): bound the pixel count, keep the aspect."""

from __future__ import annotations

import math

from PIL import Image


def fit_pixels(image: Image.Image, min_pixels: int = 0, max_pixels: int = 0) -> Image.Image:
    """``image`` scaled so that ``min_pixels <= width * height <= max_pixels`` (0 disables a bound).

    Qwen2.5-VL spends one token per 28x28 pixels, so the bound caps a prompt's visual tokens (4,194,304 pixels is about
    5,350 tokens). Images already inside the bounds are returned unchanged (same object).
    """
    area = image.width * image.height
    if max_pixels and area > max_pixels:
        factor = math.sqrt(max_pixels / area)
    elif min_pixels and area < min_pixels:
        factor = math.sqrt(min_pixels / area)
    else:
        return image
    size = (max(1, int(image.width * factor)), max(1, int(image.height * factor)))
    return image.resize(size, Image.BICUBIC)
