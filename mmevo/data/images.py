"""Image size policy applied before the processor (as EasyR1's dataset does): bound the pixel count, keep the aspect."""

from __future__ import annotations

import math

import numpy as np
from PIL import Image

_SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N")
# what a data set's image may be: raster formats Pillow decodes itself. Pillow would otherwise also open EPS / PS by
# running Ghostscript on the file, a program a hostile data set should never reach
RASTER_FORMATS = ("PNG", "JPEG", "GIF", "BMP", "WEBP", "TIFF", "PPM")  # JPEG opens MPO files too


def to_rgb(image: Image.Image) -> Image.Image:
    """A new RGB copy of a decoded image, with the two conversions ``image.convert("RGB")`` gets silently wrong.

    Transparency (RGBA, LA, PA, a palette or grey image with a transparent colour) is composited on white, as
    qwen_vl_utils' ``to_rgb`` does for RGBA: ``convert`` drops the alpha and shows transparent pixels in their stored
    colour, usually black, so black lines on a transparent background vanish. 16-bit grey is scaled to 0-255
    (v / 257): ``convert`` clips it at 255, so a 16-bit scan turns almost white.
    """
    if image.mode in _SIXTEEN_BIT:
        grey = np.asarray(image, dtype=np.float64) / 257.0  # 65535 -> 255
        return Image.fromarray(np.rint(grey).astype(np.uint8), mode="L").convert("RGB")
    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        out = Image.new("RGB", image.size, (255, 255, 255))
        out.paste(rgba, mask=rgba.getchannel("A"))
        return out
    return image.convert("RGB")


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
