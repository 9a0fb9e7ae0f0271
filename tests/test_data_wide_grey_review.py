"""Grey images wider than 8 bits (Pillow modes ``I`` and ``F``: a 16-bit PGM, a float TIFF) reach the model scaled
by their full scale, not through ``convert("RGB")``, which clips them at 255 (a 16-bit PGM turned almost white)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from mmevo.data.benchmarks import load_items
from mmevo.data.images import to_rgb

RAMP16 = np.array([[0, 257, 1000, 32896], [40000, 60000, 65534, 65535]], dtype=np.uint16)


def _reopened(path):
    im = Image.open(path)
    im.load()
    return im


def _grey(img):
    a = np.asarray(img)
    assert img.mode == "RGB" and (a[..., 0] == a[..., 1]).all() and (a[..., 0] == a[..., 2]).all()
    return a[..., 0]


def _load_image_through_data(tmp_path, name):
    (tmp_path / "d.jsonl").write_text(json.dumps({"id": "1", "images": [name], "problem": "<image>x?",
                                                  "answer": "1"}) + "\n")
    items, _ = load_items("generic", tmp_path / "d.jsonl")
    (img,) = items[0].load_images()
    return img


def test_16_bit_pgm_is_scaled_by_its_full_scale_not_clipped(tmp_path):
    Image.fromarray(RAMP16).save(tmp_path / "a.pgm")
    assert _reopened(tmp_path / "a.pgm").mode == "I"  # Pillow decodes a 16-bit PGM as 32-bit ints
    want = np.rint(RAMP16 / 257.0).astype(np.uint8)  # 65535 -> 255
    assert (_grey(to_rgb(_reopened(tmp_path / "a.pgm"))) == want).all()  # convert("RGB") gave 0, 255, 255, ...
    assert (_grey(_load_image_through_data(tmp_path, "a.pgm")) == want).all()


def test_16_bit_png_is_scaled_through_the_data_loader(tmp_path):
    Image.fromarray(RAMP16).save(tmp_path / "a.png")
    assert _reopened(tmp_path / "a.png").mode.startswith("I")
    assert (_grey(_load_image_through_data(tmp_path, "a.png")) == np.rint(RAMP16 / 257.0)).all()


def test_pgm_with_a_12_bit_maxval_keeps_its_own_full_scale(tmp_path):
    # a file's maxval is its white: Pillow rescales 0..4095 to 0..65535, and 4095 must come out white, not 16
    body = np.array([[0, 2048, 4095]], dtype=">u2").tobytes()
    (tmp_path / "a.pgm").write_bytes(b"P5\n3 1\n4095\n" + body)
    assert _grey(to_rgb(_reopened(tmp_path / "a.pgm"))).tolist() == [[0, 128, 255]]


def test_float_tiff_in_unit_range_is_scaled_by_255(tmp_path):
    f = np.array([[0.0, 0.25, 0.5, 1.0], [0.1, 0.2, 0.3, 0.4]], dtype=np.float32)
    Image.fromarray(f).save(tmp_path / "a.tif")
    assert _reopened(tmp_path / "a.tif").mode == "F"
    want = np.rint(f.astype(np.float64) * 255).astype(np.uint8)
    assert (_grey(to_rgb(_reopened(tmp_path / "a.tif"))) == want).all()  # convert("RGB") gave 0 and 1s: black
    # a dark [0, 0.4] image stays dark: [0, 1] is its scale, not its own min / max
    assert (_grey(_load_image_through_data(tmp_path, "a.tif")) == want).all()


def test_float_tiff_outside_unit_range_stretches_its_min_max(tmp_path):
    f = np.array([[-5.0, 0.0, 10.0, 20.0]], dtype=np.float32)
    Image.fromarray(f).save(tmp_path / "a.tif")
    assert _grey(to_rgb(_reopened(tmp_path / "a.tif"))).tolist() == [[0, 51, 153, 255]]  # (v + 5) / 25 * 255


@pytest.mark.parametrize("value,want", [(0.0, 0), (0.5, 128), (1.0, 255), (7.0, 7), (1e6, 255), (-3.0, 0)])
def test_constant_float_images_do_not_divide_by_zero(tmp_path, value, want):
    Image.fromarray(np.full((3, 4), value, dtype=np.float32)).save(tmp_path / "a.tif")
    with np.errstate(all="raise"):  # a 0 / 0 would raise here instead of leaving NaN pixels
        out = _grey(to_rgb(_reopened(tmp_path / "a.tif")))
    assert (out == want).all()


def test_non_finite_float_pixels_are_defined():
    f = np.array([[np.nan, -np.inf, 0.0, 2.0, np.inf]], dtype=np.float32)
    assert _grey(to_rgb(Image.fromarray(f))).tolist() == [[0, 0, 0, 255, 255]]
    assert _grey(to_rgb(Image.fromarray(np.full((2, 2), np.nan, dtype=np.float32)))).tolist() == [[0, 0], [0, 0]]


def test_32_bit_integer_images_past_16_bits_stretch_and_constants_stay_finite(tmp_path):
    a = np.array([[-1000, 0, 79000, 199000]], dtype=np.int32)
    Image.fromarray(a).save(tmp_path / "a.tif")
    im = _reopened(tmp_path / "a.tif")
    assert im.mode == "I"
    assert _grey(to_rgb(im)).tolist() == [[0, 1, 102, 255]]  # (v + 1000) / 200000 * 255
    for v, want in ((70000, 255), (-7, 0), (300, 1)):  # 300 is 16-bit data: 300 / 257
        with np.errstate(all="raise"):
            assert (_grey(to_rgb(Image.fromarray(np.full((2, 2), v, dtype=np.int32)))) == want).all()
