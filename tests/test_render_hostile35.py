"""render/: a thirty-fifth pass. An SVG whose root's width / height cairosvg cannot read was refused, where the SVG
spec (and a browser) draws it: ``width="auto"`` (SVG 2's initial value, sized as 100% is) and ``width=""`` were
``invalid_size`` ("The SVG size is undefined: 0x150 px"), as were a unit in capitals (``100PX``: CSS units are
case-insensitive), ``Q`` (a quarter millimetre) and the viewport units (``vw`` / ``vh`` / ``vmin`` / ``vmax``); ``rem``
was a ``crash`` ("could not convert string to float: '10r'"). The root's sides are read right now, after the document's
CSS is applied: one of no size is taken as missing (the 300x150 default viewport without a viewBox, the viewBox's size
with one)."""

import io
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402

TOKEN = "hostile35canary"
PLT = "import matplotlib.pyplot as plt\n"
NP = PLT + "import numpy as np\n"
DRAW = PLT + "plt.figure(figsize=(1, 1), dpi=40)\nplt.plot([2, 1])\n"
SVGNS = '<svg xmlns="http://www.w3.org/2000/svg" '
SVG = SVGNS + 'xmlns:xlink="http://www.w3.org/1999/xlink" width="30" height="20">'
CIRCLE = '<circle cx="50" cy="50" r="40" fill="red"/></svg>'
FILL = '<rect width="5000" height="5000" fill="red"/></svg>'  # every pixel of any size drawn


def _image(png):
    from PIL import Image

    return Image.open(io.BytesIO(png))


# -- 1. an SVG root's size in the forms the spec allows ----------------------------------------------------------
@pytest.mark.parametrize("root, size", [
    # before: invalid_size, "The SVG size is undefined: 0x0 px" / "0x150 px" / "300x0 px" / "0x100 px"
    ('width="auto" height="auto"', (300, 150)),
    ('width="auto"', (300, 150)),
    ('height="AUTO"', (300, 150)),
    ('width=" auto " height="100"', (300, 100)),
    ('width="" height=""', (300, 150)),
    ('style="width: auto; height: auto"', (300, 150)),
    ('width="100PX" height="50Px"', (100, 50)),
    ('width="50vw" height="50vh"', (150, 75)),
    ('width="10vmin" height="10vmax"', (15, 30)),
    ('width="40Q" height="80q"', (38, 76)),
    # before: crash, "ValueError: could not convert string to float: '10r'"
    ('width="10rem" height="5REM"', (160, 80)),
    # unchanged: these were read right already
    ('width="auto" viewBox="0 0 200 100"', (200, 100)),
    ('width="100mm" height="50mm"', (378, 189)),
    ('width="10em" height="5em"', (160, 80)),
    ('width=" 120 " height="&#10;80&#9;"', (120, 80)),
    ('width="+1e2" height="+5E1"', (100, 50)),
    ('width="1E2px" height=".5e2PX"', (100, 50)),
])
def test_an_svg_root_size_the_spec_allows_is_drawn(render_pool, root, size):
    r = render_pool.render(RenderJob(SVGNS + root + ">" + FILL, "svg"))
    assert r.ok and (r.width, r.height) == size, (r.error_kind, r.message)
    assert _image(r.png).convert("RGBA").getpixel((size[0] - 2, size[1] - 2)) == (255, 0, 0, 255)


@pytest.mark.parametrize("root, kind, message", [
    # what still is no size, or too large, stays so in the forms that now read
    ('width="0rem" height="auto"', "invalid_size", "job: The SVG size is undefined: 0x150 px"),
    ('width="-3Q"', "invalid_size", "job: The SVG size is negative: -3x150 px"),
    ('width="1e400Q" height="10"', "invalid_size", "job: The SVG size is infinite: infx10 px"),
    ('width="nan" height="auto"', "invalid_size", "job: The SVG size is undefined: nanx150 px"),
    ('width="100000vmax" height="10"', "too_large", "job: SVG of 300000x10 px exceeds 4096 px"),
    ('width="auto" viewBox="0 0 9000 10"', "too_large", "job: SVG of 9000x10 px exceeds 4096 px"),
    ('width="300PC" height="10"', "too_large", "job: SVG of 4800x10 px exceeds 4096 px"),
    # not a CSS length: cairosvg's word (a side of 0) stands
    ('width="100furlongs" height="10"', "invalid_size", "job: The SVG size is undefined: 0x10 px"),
    ('width="100 %" height="10"', "invalid_size", "job: The SVG size is undefined: 0x10 px"),
])
def test_an_svg_root_size_that_is_no_size_or_too_large_stays_refused(render_pool, root, kind, message):
    r = render_pool.render(RenderJob(SVGNS + root + ">" + CIRCLE, "svg"))
    assert (r.error_kind, r.message) == (kind, message), r


def test_an_svg_saved_by_a_python_job_with_an_auto_size_is_drawn(render_pool):
    # the python path draws a chart's .svg as an SVG job: same reading of its root
    code = f"open('c.svg', 'w').write({SVGNS + 'width=' + chr(34) + 'auto' + chr(34) + ' height=' + chr(34) + '80' + chr(34) + '>' + CIRCLE!r})\n"
    r = render_pool.render(RenderJob(code))
    assert r.ok and (r.width, r.height) == (300, 80), (r.error_kind, r.message)
