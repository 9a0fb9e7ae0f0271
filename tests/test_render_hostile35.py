"""render/: a thirty-fifth pass. First two misclassifications the last review left:

1. An SVG whose root's width / height cairosvg cannot read was refused, where the SVG spec (and a browser) draws it:
   ``width="auto"`` (SVG 2's initial value, sized as 100% is) and ``width=""`` were ``invalid_size`` ("The SVG size is
   undefined: 0x150 px"), as were a unit in capitals (``100PX``: CSS units are case-insensitive), ``Q`` (a quarter
   millimetre) and the viewport units (``vw`` / ``vh`` / ``vmin`` / ``vmax``); ``rem`` was a ``crash`` ("could not
   convert string to float: '10r'"). The root's sides are read right now, after the document's CSS is applied: one of
   no size is taken as missing (the 300x150 default viewport without a viewBox, the viewBox's size with one).
2. ``plt.savefig("out.png", dpi=float("nan"))`` (and ``inf``, 0, negative, one under a pixel) was a ``crash``:
   ``savefig`` sets its dpi on the figure only while it saves, so the figure's size afterwards said nothing of it. The
   dpi the canvas was sized at is read from ``savefig``'s own frame now: ``invalid_size`` (``too_large`` past
   ``max_side``), as the same dpi set on the figure was; a genuine crash inside ``savefig`` stays a ``crash``."""

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


# -- 2. savefig's own dpi ------------------------------------------------------------------------------------------
CHART = PLT + "plt.figure(figsize=(2, 1.5))\nplt.plot([1, 2])\n"
NO_SIZE = "job: figure size is not a finite number of pixels, one or more a side: "


@pytest.mark.parametrize("save, kind, message", [
    # before: crash, "job: ValueError: cannot convert float NaN to integer"
    ("plt.savefig('out.png', dpi=float('nan'))", "invalid_size",
     NO_SIZE + "nanxnan px (dpi nan) (drawing it failed: ValueError: cannot convert float NaN to integer)"),
    ("plt.savefig('out.png', dpi=float('inf'))", "invalid_size",
     NO_SIZE + "infxinf px (dpi inf) (drawing it failed: ValueError: cannot convert float NaN to integer)"),
    ("plt.savefig('chart.jpg', dpi=float('nan'))", "invalid_size", NO_SIZE + "nanxnan px (dpi nan)"),
    ("plt.savefig('out.png', dpi=float('nan'), bbox_inches='tight')", "invalid_size", NO_SIZE + "nanxnan px (dpi nan)"),
    ("plt.gcf().savefig(open('out.png', 'wb'), dpi=float('-inf'))", "invalid_size", NO_SIZE + "-infx-inf px (dpi -inf)"),
    # before: crash, "job: ValueError: dpi must be positive"
    ("plt.savefig('out.png', dpi=0)", "invalid_size",
     NO_SIZE + "0x0 px (dpi 0) (drawing it failed: ValueError: dpi must be positive)"),
    ("plt.savefig('out.png', dpi=-50)", "invalid_size",
     NO_SIZE + "-100x-75 px (dpi -50) (drawing it failed: ValueError: dpi must be positive)"),
    # before: crash, "job: ValueError: cannot write empty image" (a canvas of 0 px)
    ("plt.savefig('out.png', dpi=1e-9)", "invalid_size",
     NO_SIZE + "2e-09x1.5e-09 px (dpi 1e-09) (drawing it failed: ValueError: cannot write empty image)"),
    # before: crash, "job: TypeError: __init__(): incompatible constructor arguments" (Agg refusing the size)
    ("plt.savefig('out.png', dpi=1e300)", "too_large", "job: figure of 2e+300x1.5e+300 px exceeds 4096 px"),
    # before: crash, "job: OverflowError: cannot convert float infinity to integer" (2 in at 1e308 dpi: no finite size)
    ("plt.savefig('out.png', dpi=1e308)", "invalid_size", NO_SIZE + "infx1.5e+308 px (dpi 1e+308) (drawing it failed: "
     "OverflowError: cannot convert float infinity to integer)"),
])
def test_a_savefig_at_a_dpi_of_no_size_is_invalid_size(render_pool, save, kind, message):
    r = render_pool.render(RenderJob(CHART + save + "\n"))
    assert r.error_kind == kind and r.message.startswith(message), r


@pytest.mark.parametrize("code, message", [
    # errors of savefig that are no size stay crashes, whatever its dpi
    (CHART + "plt.savefig('out.png', format='nope', dpi=float('nan'))\n", "job: ValueError: Format 'nope' is not "),
    (CHART + "plt.gca().plot([1, 2], [1, 2, 3])\nplt.savefig('out.png', dpi=float('nan'))\n",
     "job: ValueError: x and y must have same first dimension"),
    # a canvas sizing patched by the code raises the code's own error
    (CHART + "from matplotlib.backends.backend_agg import FigureCanvasAgg as C\n"
     "def bad(self):\n    raise ValueError('mine')\nC.get_renderer = bad\nplt.savefig('out.png', dpi=float('nan'))\n",
     "job: ValueError: mine"),
    # a savefig of a good size whose canvas fails for another reason is not the figure's size
    (CHART + "import matplotlib.backends.backend_agg as a\n"
     "a.RendererAgg = lambda *args: int('x')\nplt.savefig('out.png', dpi=80)\n",
     "job: ValueError: invalid literal for int()"),
])
def test_a_genuine_crash_in_savefig_stays_a_crash(render_pool, code, message):
    r = render_pool.render(RenderJob(code))
    assert r.error_kind == "crash" and r.message.startswith(message), r


def test_a_savefig_dpi_of_no_size_on_a_figure_not_current_is_that_figures(render_pool):
    # the canvas's own figure is sized, not the current one (a 1x1 in figure open after it)
    code = (PLT + "f = plt.figure(figsize=(3, 2))\nplt.plot([1])\nplt.figure(figsize=(1, 1))\n"
            "f.savefig('out.png', dpi=float('nan'))\n")
    r = render_pool.render(RenderJob(code))
    assert (r.error_kind, r.message.split(" (drawing")[0]) == ("invalid_size", NO_SIZE + "nanxnan px (dpi nan)"), r
    code = (PLT + "f = plt.figure(figsize=(30, 20))\nplt.plot([1])\nplt.figure(figsize=(1, 1))\n"
            "f.savefig('out.png', dpi=1e300)\n")
    r = render_pool.render(RenderJob(code))
    assert (r.error_kind, r.message.split(" (drawing")[0]) == ("too_large", "job: figure of 3e+301x2e+301 px exceeds "
                                                                "4096 px"), r
