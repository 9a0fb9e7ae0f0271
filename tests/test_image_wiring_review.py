"""Decoded images reach the model composited on white (qwen_vl_utils' to_rgb), not with convert("RGB"), which shows a
transparent background in its stored colour (black for cairosvg and matplotlib's transparent saves)."""

import io
import json

import numpy as np
from PIL import Image

from mmevo.data.benchmarks import load_items
from mmevo.evolve.mmzero import _rasterise, load_image

BLACK_LINE_SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40">'
                  '<line x1="0" y1="20" x2="40" y2="20" stroke="black" stroke-width="4"/></svg>')


def test_mmzero_svg_render_keeps_black_strokes_on_a_white_background():
    import cairosvg

    png = cairosvg.svg2png(bytestring=BLACK_LINE_SVG.encode())
    assert Image.open(io.BytesIO(png)).mode == "RGBA"  # cairosvg leaves the background transparent
    for img in (load_image(png, 0, 0), _rasterise(BLACK_LINE_SVG)):
        a = np.asarray(img)
        assert img.mode == "RGB" and a.shape == (40, 40, 3)
        assert (a[2, 2] == 255).all() and (a[38, 38] == 255).all()  # background: white (convert gave 0, 0, 0)
        assert (a[20, 20] == 0).all()  # the stroke: black


def test_benchmark_rgba_image_is_composited_on_white(tmp_path):
    rgba = np.zeros((8, 8, 4), dtype=np.uint8)  # transparent black ...
    rgba[4, :, 3] = 255  # ... except one opaque black row
    Image.fromarray(rgba, mode="RGBA").save(tmp_path / "fig.png")
    (tmp_path / "test.jsonl").write_text(json.dumps({"id": "1", "problem": "<image>How many lines?", "answer": "1",
                                                     "images": ["fig.png"]}) + "\n")
    items, _ = load_items("geometry3k", tmp_path / "test.jsonl", None)
    a = np.asarray(items[0].load_images()[0])
    assert (a[0] == 255).all() and (a[4] == 0).all()


def test_benchmark_images_must_be_raster_formats(tmp_path, monkeypatch):
    import pytest
    from PIL import EpsImagePlugin

    opened = []
    monkeypatch.setattr(EpsImagePlugin.EpsImageFile, "_open", lambda self: opened.append(1))

    from mmevo.data.schema import DataError

    eps = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nnewpath 0 0 moveto 10 10 lineto stroke\nshowpage\n"
    (tmp_path / "fig.eps").write_bytes(eps)
    (tmp_path / "test.jsonl").write_text(json.dumps({"id": "1", "problem": "<image>Q?", "answer": "1",
                                                     "images": ["fig.eps"]}) + "\n")
    items, _ = load_items("geometry3k", tmp_path / "test.jsonl", None)
    with pytest.raises(DataError, match="cannot decode image"):  # never handed to Ghostscript
        items[0].load_images()
    assert opened == []  # Pillow's EPS reader (which runs Ghostscript to decode) never saw the file
    for fmt in ("PNG", "JPEG", "GIF", "BMP", "WEBP", "TIFF"):  # what data sets hold still decodes
        buf = io.BytesIO()
        Image.new("RGB", (4, 4), (10, 200, 30)).save(buf, format=fmt)
        items[0].images[0] = buf.getvalue()  # raw bytes, as a row's {"bytes": ...} image becomes
        assert np.asarray(items[0].load_images()[0]).shape == (4, 4, 3), fmt
