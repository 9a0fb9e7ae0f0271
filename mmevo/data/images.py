"""Image size policy applied before the processor (as EasyR1's dataset does): bound the pixel count, keep the aspect."""

from __future__ import annotations

import math

import numpy as np
from PIL import Image

_SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N")
_EXIF_ORIENTATION = 0x0112  # the tag ImageOps.exif_transpose applies (also read from XMP / PNG text)
# the turn or flip of each EXIF orientation, as ImageOps.exif_transpose maps them (1 and any other value: none)
_ORIENTATION_TURNS = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
                      4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270,
                      7: Image.Transpose.TRANSVERSE, 8: Image.Transpose.ROTATE_90}
# uint16 -> uint8 as rint(v / 257): v / 257 is never a half (257 is odd), so (v + 128) // 257 rounds the same
_SIXTEEN_TO_8 = ((np.arange(65536, dtype=np.uint32) + 128) // 257).astype(np.uint8)
# what a data set's image may be: raster formats Pillow decodes itself. Pillow would otherwise also open EPS / PS by
# running Ghostscript on the file, a program a hostile data set should never reach
RASTER_FORMATS = ("PNG", "JPEG", "GIF", "BMP", "WEBP", "TIFF", "PPM")  # JPEG opens MPO files too
# Qwen2-VL's smart_resize (transformers' image processor and vLLM's) refuses an image whose longer side is more than
# this many times its shorter one, with an error that names no example, at the first step that encodes it
MAX_ASPECT_RATIO = 200


def aspect_problem(image: Image.Image) -> str | None:
    """Why the vision processors would refuse ``image`` (its aspect ratio), or None when they take it."""
    w, h = image.size
    ratio = max(w, h) / max(1, min(w, h))
    if min(w, h) == 0 or ratio > MAX_ASPECT_RATIO:
        return (f"image of {w}x{h} pixels has an aspect ratio of {ratio:.1f}:1; Qwen2-VL's image processor refuses "
                f"more than {MAX_ASPECT_RATIO}:1")
    return None


def to_rgb(image: Image.Image) -> Image.Image:
    """A new RGB copy of a decoded image, with the two conversions ``image.convert("RGB")`` gets silently wrong.

    Transparency (RGBA, LA, PA, a palette or grey image with a transparent colour) is composited on white, as
    qwen_vl_utils' ``to_rgb`` does for RGBA: ``convert`` drops the alpha and shows transparent pixels in their stored
    colour, usually black, so black lines on a transparent background vanish. Wide grey (modes ``I;16*``, ``I``,
    ``F``) is scaled to 0-255 by :func:`_wide_grey_to_8bit`: ``convert`` clips it at 255, so a 16-bit scan turns
    almost white.

    An EXIF orientation (an EXIF block, or PNG text / XMP holding one) is applied, as image viewers and vLLM's input
    processing (``normalize_image``) apply it, and the copy carries no metadata: otherwise vLLM would rotate the
    image while the HF processor (training, log-probs, the HF engine) reads the stored pixels, so the rollout and the
    update would see different images.
    """
    try:
        turn = _ORIENTATION_TURNS.get(image.getexif().get(_EXIF_ORIENTATION, 1))
    except Exception:  # noqa: BLE001 - a malformed EXIF block: the stored orientation, as vLLM leaves it then
        turn = None
    if turn is not None:
        # the turn exif_transpose makes, without its metadata rewrite (a second parse of the block and a decode and
        # re-encode of every entry), which the copy returned here drops anyway: a 64 KiB block of 5400 entries and
        # an orientation cost that rewrite ~200 ms of CPU per image, the turn itself nothing in proportion
        image = image.transpose(turn)
    if image.mode in _SIXTEEN_BIT or image.mode in ("I", "F"):
        out = Image.fromarray(_wide_grey_to_8bit(image), mode="L").convert("RGB")
    elif image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        out = Image.new("RGB", image.size, (255, 255, 255))
        out.paste(rgba, mask=rgba.getchannel("A"))
    else:
        out = image.convert("RGB")
    out.info = {}  # no EXIF / XMP left for a consumer to apply a second time
    return out


def _wide_grey_to_8bit(image: Image.Image) -> np.ndarray:
    """A 16-bit, 32-bit integer or float grey image as uint8, scaled by the full scale its values have.

    * ``I;16*``: unsigned 16-bit, full scale 65535 (v / 257).
    * ``I`` (32-bit signed): Pillow decodes 16-bit PGM / PPM into it (rescaled to full scale 65535 whatever the
      file's maxval), and signed 16-bit or 32-bit TIFF. Values within 0..65535 are read as 16-bit (v / 257); others
      (negative, or past 16 bits) have no known full scale, so their [min, max] is stretched to 0..255.
    * ``F`` (float32): values within [0, 1] are read as the usual 0 = black, 1 = white (x 255), so a dark image
      stays dark; any other range has no known full scale and its [min, max] is stretched to 0..255. NaN is black,
      +-inf take the ends of the finite range.

    A constant image outside those ranges (nothing to stretch) keeps its value clipped to 0..255, never a division
    by zero.
    """
    if image.mode in _SIXTEEN_BIT:
        # a table lookup, not float64 arithmetic: a 4096 px square 16-bit PNG took ~1 s and ~400 MiB of float64
        # temporaries (four times an 8-bit grey image of that size); the table reads the uint16 pixels once
        return _SIXTEEN_TO_8[np.asarray(image)]
    a = np.asarray(image, dtype=np.float64)
    finite = a[np.isfinite(a)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    if image.mode == "I" and lo >= 0 and hi <= 65535:
        return np.rint(a / 257.0).astype(np.uint8)  # 65535 -> 255
    if image.mode == "F" and lo >= 0 and hi <= 1:
        out = a * 255.0
    elif hi > lo:
        out = (np.clip(a, lo, hi) - lo) * (255.0 / (hi - lo))
    else:
        out = np.clip(a, lo, hi)  # constant (lo == hi): nothing to stretch, the value itself (NaN stays NaN)
    return np.rint(np.clip(np.nan_to_num(out, nan=0.0), 0, 255)).astype(np.uint8)


def fit_pixels(image: Image.Image, min_pixels: int = 0, max_pixels: int = 0) -> Image.Image:
    """``image`` scaled so that ``min_pixels <= width * height <= max_pixels`` (0 disables a bound).

    Qwen2.5-VL spends one token per 28x28 pixels, so the bound caps a prompt's visual tokens (4,194,304 pixels is about
    5,350 tokens). Images already inside the bounds are returned unchanged (same object).

    Both sides are scaled and floored as EasyR1 does (so an upscaled image may end a few pixels short of
    ``min_pixels``). Flooring the short side loses it a larger share, so an image just inside Qwen2-VL's 200:1
    (``MAX_ASPECT_RATIO``) could come out past it (20000x100 at 1,000,000 pixels was 14142x70, 202:1), refused by the
    processor at the step that encoded it: there, and only there, the longer side is shortened to the original ratio.
    """
    area = image.width * image.height
    if max_pixels and area > max_pixels:
        factor = math.sqrt(max_pixels / area)
    elif min_pixels and area < min_pixels:
        factor = math.sqrt(min_pixels / area)
    else:
        return image
    return image.resize(_scaled_size(image.width, image.height, factor), Image.BICUBIC)


def _scaled_size(width: int, height: int, factor: float) -> tuple[int, int]:
    """(width, height) times ``factor``, floored (at least 1) as EasyR1 does; only where that comes out past
    ``MAX_ASPECT_RATIO`` is the longer side shortened to the original aspect ratio (which the loader kept within it)."""
    w, h = max(1, int(width * factor)), max(1, int(height * factor))
    if max(w, h) <= MAX_ASPECT_RATIO * min(w, h):
        return w, h
    if width >= height:
        w = max(1, min(w, width * h // height))
    else:
        h = max(1, min(h, height * w // width))
    return w, h
