"""render/: review 20b, defects left by the SVG patches of review 20 (each was a ``crash``).

1. A marker of markerWidth or markerHeight 0 failed scaling its content (ZeroDivisionError; with content of no area
   the new stand-in box is that size), and a marker property naming no marker (``url(#missing)``) failed on None
   (AttributeError). SVG: a zero size disables the marker's rendering, a reference to no marker draws none; the
   path itself is drawn.
"""

import io
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402

SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="60" height="60">'
RED, BLUE = (255, 0, 0, 255), (0, 0, 255, 255)
PATH = '<path d="M10 30 H50" stroke="red" stroke-width="4" marker-end="url(#m)" marker-start="url(#m)"/>'


def _rgba(png, xy):
    from PIL import Image

    return Image.open(io.BytesIO(png)).convert("RGBA").getpixel(xy)


def _render(pool, body):
    return pool.render(RenderJob(SVG + body + "</svg>", "svg"))


# -- 1. markers that cannot render -----------------------------------------------------------------------------------
@pytest.mark.parametrize("marker", [
    # before: crash, "ZeroDivisionError: float division by zero"
    '<marker id="m" markerWidth="0" markerHeight="0"><path d="M0 0 H5" stroke="blue"/></marker>',
    '<marker id="m" markerWidth="0" markerHeight="5"/>',
    '<marker id="m" markerWidth="5" markerHeight="0mm" viewBox="0 0 10 10"><rect width="10" height="10" fill="blue"/>'
    '</marker>',
    '<marker id="m" markerWidth="0" viewBox="0 0 10 10" refX="5" refY="5"><rect width="10" height="10" fill="blue"/>'
    '</marker>',
    # before: crash, "AttributeError: 'NoneType' object has no attribute 'get'"
    '<marker id="other"/>',
    '<rect id="m" width="5" height="5" fill="blue"/>',  # not a marker
])
def test_a_marker_of_zero_size_or_none_is_not_drawn_and_the_path_is(render_pool, marker):
    r = _render(render_pool, f"<defs>{marker}</defs>{PATH}")
    assert r.ok, (r.error_kind, r.message)
    assert _rgba(r.png, (30, 30)) == RED and _rgba(r.png, (10, 30)) == RED and _rgba(r.png, (49, 29)) == RED


def test_a_marker_that_renders_is_still_drawn(render_pool):
    marker = '<marker id="m" markerWidth="4" markerHeight="4" markerUnits="userSpaceOnUse"><rect width="4" height="4"' \
             ' fill="blue"/></marker>'
    r = _render(render_pool, f"<defs>{marker}</defs>{PATH}")
    assert r.ok and _rgba(r.png, (52, 32)) == BLUE and _rgba(r.png, (30, 30)) == RED, (r.error_kind, r.message)
