"""render/: review of the SVG root sizing and the savefig-dpi reading (hostile35).

1. A savefig's dpi sized a figure it did not save: a ``draw_event`` callback of the saved figure drawing another
   figure of no size (its dpi NaN) was sized at the save's dpi, a good size, so the error stayed a ``crash`` where
   the same draw outside a save is ``invalid_size``.
2. ``nanrem`` / ``infrem`` (a length whose number cairosvg reads as nan / inf, in a unit it cannot read) were a
   ``crash`` where ``nan`` alone is ``invalid_size``.
3. One side of the root missing (or ``auto``) next to a viewBox took the viewBox's size for that side, not the
   viewBox's aspect ratio: ``width="30" viewBox="0 0 100 50"`` was a 30x50 image with the drawing letterboxed in
   it where a browser draws 30x15 (CSS's intrinsic ratio).
4. An empty CSS declaration on the root (``style="width:"``), which CSS drops, hid the width attribute: the image
   was the 300 px default wide.
"""

import io
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402

PLT = "import matplotlib.pyplot as plt\n"
NO_SIZE = "job: figure size is not a finite number of pixels, one or more a side: "
SVGNS = '<svg xmlns="http://www.w3.org/2000/svg" '
FILL = '<rect width="5000" height="5000" fill="red"/></svg>'


def _rgba(png, xy):
    from PIL import Image

    return Image.open(io.BytesIO(png)).convert("RGBA").getpixel(xy)


# -- 1. the dpi of a savefig sizes only the figure it saves ---------------------------------------------------------
def test_a_figure_drawn_inside_another_figures_save_is_sized_at_its_own_dpi(render_pool):
    code = (PLT + "saved = plt.figure(figsize=(2, 2))\nplt.plot([1, 2])\n"
            "other = plt.figure(figsize=(2, 2))\nother.dpi = float('nan')\n"
            "saved.canvas.mpl_connect('draw_event', lambda event: other.canvas.draw())\n"
            "saved.savefig('out.png', dpi=50)\n")
    r = render_pool.render(RenderJob(code))
    assert (r.error_kind, r.message.split(" (drawing")[0]) == ("invalid_size", NO_SIZE + "nanxnan px (dpi nan)"), r


def test_a_save_of_no_size_inside_another_figures_save_is_that_saves(render_pool):
    code = (PLT + "saved = plt.figure(figsize=(2, 2))\nplt.plot([1, 2])\nother = plt.figure(figsize=(3, 1))\n"
            "saved.canvas.mpl_connect('draw_event', lambda event: other.savefig('b.png', dpi=float('inf')))\n"
            "saved.savefig('out.png', dpi=50)\n")
    r = render_pool.render(RenderJob(code))
    assert (r.error_kind, r.message.split(" (drawing")[0]) == ("invalid_size", NO_SIZE + "infxinf px (dpi inf)"), r


# -- 2. nan / inf in a unit cairosvg cannot read ---------------------------------------------------------------------
@pytest.mark.parametrize("root, message", [
    # before: crash, "ValueError: could not convert string to float: 'nanr'"
    ('width="nanrem" height="10"', "job: The SVG size is undefined: nanx10 px"),
    ('width="10" height="NaNREM"', "job: The SVG size is undefined: 10xnan px"),
    # before: crash, "... 'infr'"
    ('width="infrem" height="10"', "job: The SVG size is infinite: infx10 px"),
    # before: a side of 0 (an unknown unit); now the number read as it is read bare
    ('width="-Infinityvw" height="10"', "job: The SVG size is infinite: -infx10 px"),
    ('width="nanQ" height="10"', "job: The SVG size is undefined: nanx10 px"),
])
def test_nan_or_inf_in_a_unit_is_no_size(render_pool, root, message):
    r = render_pool.render(RenderJob(SVGNS + root + ">" + FILL, "svg"))
    assert (r.error_kind, r.message) == ("invalid_size", message), r


# -- 3. one side from the viewBox's aspect ratio ---------------------------------------------------------------------
@pytest.mark.parametrize("root, size", [
    # before: 30x50 / 100x15 / 38x50 / 100x32 / 60x... , the drawing letterboxed in the viewBox-sized side
    ('width="30" viewBox="0 0 100 50"', (30, 15)),
    ('width="auto" height="15" viewBox="0 0 100 50"', (30, 15)),
    ('height="15" viewBox="0,0,100,50"', (30, 15)),
    ('width="10mm" viewBox="0 0 100 50"', (38, 19)),
    ('height="2rem" viewBox="0 0 100 50"', (64, 32)),
    ('width="10vw" viewBox="0 0 100 50"', (30, 15)),
    ('height="30" viewBox="0 0 100 50"><style>svg { width: auto }</style', (60, 30)),
    ('width="auto" height="auto" viewBox="0 0 100 50"', (100, 50)),  # unchanged: both from the viewBox
])
def test_one_side_next_to_a_viewbox_follows_its_aspect_ratio(render_pool, root, size):
    r = render_pool.render(RenderJob(SVGNS + root + ">" + FILL, "svg"))
    assert r.ok and (r.width, r.height) == size, (r.error_kind, r.message)
    # the drawing fills the image: no letterbox band left empty (a side of 18.9 px leaves its last row part-covered)
    assert _rgba(r.png, (size[0] // 2, 1)) == _rgba(r.png, (size[0] // 2, size[1] - 2)) == (255, 0, 0, 255)
    assert _rgba(r.png, (1, size[1] // 2)) == _rgba(r.png, (size[0] - 2, size[1] // 2)) == (255, 0, 0, 255)


@pytest.mark.parametrize("root, size", [
    # unchanged: both sides given (the drawing letterboxed in them, as a browser does), a percentage (no length to
    # scale: cairosvg's 0, the viewBox's side), a viewBox of no ratio
    ('width="30" height="50" viewBox="0 0 100 50"', (30, 50)),
    ('width="50%" viewBox="0 0 100 50"', (100, 50)),
    ('width="30" viewBox="0 0 0 50"', (30, 50)),
    ('width="30" viewBox="0 0 100 nan"', None),
])
def test_a_viewbox_next_to_both_sides_or_no_length_sizes_as_before(render_pool, root, size):
    r = render_pool.render(RenderJob(SVGNS + root + ">" + FILL, "svg"))
    if size is None:
        assert (r.error_kind, r.message) == ("invalid_size", "job: The SVG size is undefined: 30xnan px"), r
    else:
        assert r.ok and (r.width, r.height) == size, (r.error_kind, r.message)


# -- 4. an empty CSS declaration is dropped, as CSS drops it ---------------------------------------------------------
@pytest.mark.parametrize("root, size", [
    # before (hostile35): 300x10 / 300x150 / 300x20, the empty value read as no width
    ('width="10" height="10" style="width:"', (10, 10)),
    ('width="40" height="30" style="width: ; height:"', (40, 30)),
    ('width="40" height="20"><style>svg { width: }</style', (40, 20)),
    # no attribute under it: a missing side, as before
    ('height="20" style="width:"', (300, 20)),
])
def test_an_empty_css_declaration_leaves_the_attribute(render_pool, root, size):
    r = render_pool.render(RenderJob(SVGNS + root + ">" + FILL, "svg"))
    assert r.ok and (r.width, r.height) == size, (r.error_kind, r.message)


@pytest.mark.parametrize("root, kind, message", [
    # a ratio that overflows is no size (it was a ZeroDivisionError as the inverse of a ratio that underflowed)
    ('width="30" viewBox="0 0 1e-300 1e300"', "invalid_size", "job: The SVG size is infinite: 30xinf px"),
    ('width="nan" viewBox="0 0 100 50"', "invalid_size", "job: The SVG size is undefined: nanxnan px"),
    ('width="5000" viewBox="0 0 100 50"', "too_large", "job: SVG of 5000x2500 px exceeds 4096 px"),
    ('height="3000" viewBox="0 0 100 50"', "too_large", "job: SVG of 6000x3000 px exceeds 4096 px"),
])
def test_a_side_from_the_ratio_of_no_size_or_too_large_is_refused(render_pool, root, kind, message):
    r = render_pool.render(RenderJob(SVGNS + root + ">" + FILL, "svg"))
    assert (r.error_kind, r.message) == (kind, message), r
