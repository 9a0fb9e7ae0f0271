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
