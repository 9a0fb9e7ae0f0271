"""render/: review 22, SVG lengths read as CSS reads them and dashes that ran to the timeout.

1. ``calc()`` was never evaluated: inside the document it was an invalid value (a rect of ``width="calc(10px +
   20px)"`` was not drawn), on the root ``invalid_size``. It is evaluated as CSS Values does (+ - * /, nested
   parentheses and calc(), mixed units resolved where they are read); what CSS makes invalid (a length times a
   length, a division by zero or by a length, ``1px+2px`` without spaces, a number where a length is wanted) is
   dropped as an invalid declaration is, and a result below 0 where no negative length is allowed is clamped to 0.
2. A circle of radius 8e6 px (inside cairo's range) dashed every fraction of a pixel ran to the timeout: a document
   whose strokes hold more than ``SVG_MAX_DASH_PERIODS`` dash periods is ``too_large`` at once.
3. A root ``width`` in ``em`` was 16 px an em whatever the root's font size.
"""

import io
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from conftest import ink_box, render_svg  # noqa: E402
from render.css_calc import CALC_MAX_CHARS, CALC_MAX_DEPTH, calc_terms  # noqa: E402

HEAD = '<svg xmlns="http://www.w3.org/2000/svg" width="60" height="60"'



# -- 1. calc() ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, terms", [
    ("calc(10px + 20px)", (("px", 30.0),)),
    ("CALC( 2 * (5px + 5px) )", (("px", 20.0),)),
    ("calc(50% - 2 * (1em + 3px))", (("%", 50.0), ("em", -2.0), ("px", -6.0))),
    ("calc(calc(1px + 1mm) / 2)", (("px", 0.5), ("mm", 0.5))),
    ("calc(1px - -2px)", (("px", 3.0),)),
    ("calc(2*3px)", (("px", 6.0),)),
    ("calc(1Q + 1REM)", (("q", 1.0), ("rem", 1.0))),
    ("calc(1e1px - 1px)", (("px", 9.0),)),
    ("calc(1px - 1px)", (("px", 0.0),)),
])
def test_calc_terms_by_hand(text, terms):
    assert calc_terms(text) == terms


@pytest.mark.parametrize("text", [
    "calc(1px+2px)", "calc(1px -2px)", "calc(1px+ 2px)",  # + / - need whitespace on both sides
    "calc(1px * 2px)", "calc(1px / 0)", "calc(0px / 0.0)", "calc(2 / 1px)",  # CSS's type and division rules
    "calc(10)", "calc(1px + 2)", "calc(1foo)", "calc(1px", "calc(1px) x", "calc()", "calc(1e300px * 1e300)",
    "calc(" * (CALC_MAX_DEPTH + 1) + "1px" + ")" * (CALC_MAX_DEPTH + 1),
    "calc(" + " + ".join(["1px"] * CALC_MAX_CHARS) + ")",
])
def test_calc_that_css_makes_invalid_is_none(text):
    assert calc_terms(text) is None


def test_calc_nested_to_the_limit_is_read():
    assert calc_terms("calc(" * CALC_MAX_DEPTH + "1px" + ")" * CALC_MAX_DEPTH) == (("px", 1.0),)


def test_calc_of_numbers_where_a_number_is_wanted():
    assert calc_terms("calc(1 / 4 + 0.25)", number=True) == (("", 0.5),)
    assert calc_terms("calc(1px)", number=True) is None


@pytest.mark.parametrize("width, box", [
    ("calc(10px + 20px)", (0, 0, 30, 10)),  # before: not drawn (an invalid value)
    ("CALC(2 * (5px + 5px))", (0, 0, 20, 10)),
    ("calc(50% - 10px)", (0, 0, 20, 10)),  # mixed units, resolved against the 60 px viewport
    ("calc(100% / 3 + 1px)", (0, 0, 21, 10)),
    ("calc(1em + 4px)", (0, 0, 20, 10)),  # cairosvg's default 12pt font
    ("calc(1rem + 0px)", (0, 0, 16, 10)),
    ("calc(5mm)", (0, 0, 19, 10)),
    ("calc(10px+20px)", None),  # invalid: dropped, a rect without a width is not drawn
    ("calc(10px * 2px)", None),
    ("calc(10px / 0)", None),
    ("calc(10)", None),
    ("calc(10px - 30px)", None),  # clamped to 0: not drawn
])
def test_calc_lengths_inside_the_document(render_pool, width, box):
    r = render_svg(render_pool, f'{HEAD}><rect width="{width}" height="10" fill="red"/></svg>')
    assert r.ok and ink_box(r.png) == box, (r.error_kind, r.message)


def test_calc_em_is_the_elements_font_size(render_pool):
    r = render_svg(render_pool, f'{HEAD}><g font-size="20"><rect width="calc(1em + 4px)" height="10"/></g></svg>')
    assert r.ok and ink_box(r.png) == (0, 0, 24, 10), (r.error_kind, r.message)


def test_an_invalid_calc_stroke_width_inherits(render_pool):
    body = ('<g stroke-width="6"><line x1="0" y1="30" x2="60" y2="30" stroke="red" stroke-width="calc(2px * 2px)"/>'
            '</g><line x1="0" y1="50" x2="60" y2="50" stroke="red" stroke-width="calc(1px * 2)"/>')
    r = render_svg(render_pool, f"{HEAD}>{body}</svg>")
    assert r.ok and ink_box(r.png) == (0, 27, 60, 51), (r.error_kind, r.message)


def test_calc_in_a_dasharray_and_an_opacity(render_pool):
    body = ('<line x1="0" y1="5" x2="60" y2="5" stroke="red" stroke-width="2" '
            'stroke-dasharray="calc(5px + 5px), calc(50% - 50%)"/>'  # 10 on, 0 off: solid
            '<rect y="20" width="10" height="10" opacity="calc(0.25 * 2)"/>')
    r = render_svg(render_pool, f"{HEAD}>{body}</svg>")
    assert r.ok and ink_box(r.png) == (0, 4, 60, 30), (r.error_kind, r.message)
    from PIL import Image

    assert Image.open(io.BytesIO(r.png)).convert("RGBA").getpixel((5, 25))[3] == 128


@pytest.mark.parametrize("width, size", [
    ("calc(10px + 20px)", (30, 20)),  # before: invalid_size, "The SVG width is not a length"
    ("calc(2em + 2px)", (22, 20)),  # the root's font size: 10 px
    ("calc(50% + 10px)", (160, 20)),  # % of the default viewport's 300 px, as width="50%" is
])
def test_calc_root_sizes(render_pool, width, size):
    r = render_svg(render_pool, f'<svg xmlns="http://www.w3.org/2000/svg" font-size="10" width="{width}" height="20">'
                             '<rect width="10" height="10"/></svg>')
    assert r.ok and (r.width, r.height) == size, (r.error_kind, r.message)


@pytest.mark.parametrize("width, message", [
    ("calc(1px * 1px)", "job: The SVG width is not a length: 'calc(1px * 1px)'"),
    ("calc(10px - 30px)", "job: The SVG size is undefined: 0x20 px"),  # clamped to 0
])
def test_invalid_or_negative_calc_root_sizes(render_pool, width, message):
    r = render_svg(render_pool, f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20"/>')
    assert (r.error_kind, r.message) == ("invalid_size", message)


# -- 2. dash counts ---------------------------------------------------------------------------------------------------
def _dashed_circle(radius, dash, side=100):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{side}" height="{side}"><circle cx="50" cy="50" '
            f'r="{radius}" fill="none" stroke="red" stroke-dasharray="{dash}"/></svg>')


@pytest.mark.parametrize("svg, periods", [
    (_dashed_circle(8e6, 0.3), "8.38e+07"),  # before: ~4-10 s, to the timeout at smaller dashes
    (_dashed_circle(8e6, 0.04), "6.28e+08"),  # under cairo's tolerance: still stepped through (8 s before)
    ('<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"><path d="' + "M0 0 L100 100 " * 10000
     + '" stroke="red" stroke-dasharray="0.2"/></svg>', "3.54e+06"),
])
def test_an_absurd_dash_count_is_too_large_at_once(render_pool, svg, periods):
    r = render_svg(render_pool, svg)
    assert r.error_kind == "too_large", (r.error_kind, r.message)
    assert r.message.startswith(f"job: SVG dashes: {periods} dash periods to stroke"), r.message
    assert r.message.endswith("exceed the 2e+06 cairo draws in a document")
    assert r.elapsed_s < 5


def test_the_dash_count_adds_up_over_the_document(render_pool):
    # each circle alone is within the bound (1.57e6 periods), the two together are not
    circle = '<circle cx="50" cy="50" r="1e5" fill="none" stroke="red" stroke-dasharray="0.2"/>'
    r = render_svg(render_pool, f'<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100">{circle}</svg>')
    assert r.ok, (r.error_kind, r.message)
    r = render_svg(render_pool, f'<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100">{circle * 2}</svg>')
    assert r.error_kind == "too_large" and r.message.startswith("job: SVG dashes: 3.14e+06"), r.message


def test_ordinary_dashes_are_drawn(render_pool):
    r = render_svg(render_pool, '<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"><line x1="0" y1="50" '
                             'x2="100" y2="50" stroke="red" stroke-dasharray="5 5"/></svg>')
    assert r.ok and ink_box(r.png) == (0, 49, 95, 51), (r.error_kind, r.message)


# -- 3. a root size in em ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("root, size", [
    ('font-size="10" width="5em" height="3em"', (50, 30)),  # before: 80x48
    ('style="font-size: 10px" width="3em" height="2ex"', (30, 10)),  # cairosvg's ex: half an em
    ('font-size="calc(5px + 5px)" width="3em" height="20"', (30, 20)),
    ('width="2em" height="1em"', (32, 16)),  # no font size: CSS's initial 16 px
])
def test_a_root_size_in_em_follows_the_root_font_size(render_pool, root, size):
    r = render_svg(render_pool, f'<svg xmlns="http://www.w3.org/2000/svg" {root}><rect width="5" height="5"/></svg>')
    assert r.ok and (r.width, r.height) == size, (r.error_kind, r.message)


# -- 4. <use> fan-out, refused before drawing -------------------------------------------------------------------------
def _fan_out(depth, attr="href"):
    """``a{i}`` uses ``a{i-1}`` ten times: 10 ** depth rects, 1.1 * 10 ** depth uses drawn."""
    levels = "".join(f'<g id="a{i}">' + f'<use {attr}="#a{i - 1}"/>' * 10 + "</g>" for i in range(1, depth + 1))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="100" '
            f'height="100"><defs><rect id="a0" width="1" height="1"/>{levels}</defs><use {attr}="#a{depth}"/></svg>')


@pytest.mark.parametrize("svg", [_fan_out(8), _fan_out(8, "xlink:href"), _fan_out(5)])
def test_a_use_fan_out_past_cairosvgs_bound_is_too_large_at_once(render_pool, svg):
    # before: a timeout (10 ** 8), or cairosvg's own refusal after drawing 100000 uses (~20 s), a crash
    r = render_svg(render_pool, svg)
    assert (r.error_kind, r.message) == (
        "too_large", "job: SVG <use> elements fan out to more than 100000 drawn (cairosvg's bound)")
    assert r.elapsed_s < 5


def _in_marker_or_pattern(how):
    """Two levels of ten uses (111 drawn) in a marker on 1500 vertices, or a pattern filling 1000 rects."""
    levels = '<rect id="a0" width="1" height="1"/>' + "".join(
        f'<g id="a{i}">' + f'<use href="#a{i - 1}"/>' * 10 + "</g>" for i in (1, 2)) + '<use href="#a2"/>'
    head = '<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"><defs>'
    if how == "marker":
        return (head + f'<marker id="m" markerWidth="5" markerHeight="5">{levels}</marker></defs>'
                '<path d="M0 0' + " L50 50" * 1500 + '" marker-mid="url(#m)" stroke="red"/></svg>')
    return (head + f'<pattern id="p" width="5" height="5" patternUnits="userSpaceOnUse">{levels}</pattern></defs>'
            '<g fill="url(#p)">' + '<rect width="5" height="5"/>' * 1000 + "</g></svg>")


@pytest.mark.parametrize("how", ["marker", "pattern"])
def test_uses_repeated_by_markers_and_patterns_count_too(render_pool, how):
    # before: cairosvg drew 100000 uses (~18 s) and refused the rest, a crash ("Abort rendering: ...")
    r = render_svg(render_pool, _in_marker_or_pattern(how), timeout_s=60)
    assert (r.error_kind, r.message) == (
        "too_large", "job: SVG <use> elements fan out to more than 100000 drawn (cairosvg's bound)")
    assert r.elapsed_s < 5


def test_a_marker_on_every_vertex_is_still_drawn(render_pool):
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"><defs><marker id="m" markerWidth="4" '
           'markerHeight="4" markerUnits="userSpaceOnUse"><use href="#dot"/></marker><rect id="dot" width="2" '
           'height="2" fill="red"/></defs><path d="M10 10' + " L90 90 L10 10" * 200 + '" marker-mid="url(#m)" '
           'stroke="none" fill="none"/></svg>')
    r = render_svg(render_pool, svg)
    assert r.ok and ink_box(r.png) == (10, 10, 94, 94), (r.error_kind, r.message)  # cairosvg scales it to 4 px


def test_use_draws_counted_by_hand():
    from xml.etree.ElementTree import fromstring

    from render.worker import _use_draws

    assert _use_draws(fromstring(_fan_out(3))) == 1 + 10 + 100 + 1000
    assert _use_draws(fromstring(_fan_out(8)), limit=500) == 501  # capped
    # a use of its own ancestor adds nothing more (circular, not rendered), one naming no element only itself: the
    # count ends, near the 7 uses cairosvg draws here (how many of a cycle's are tried depends on where it is entered)
    cyclic = ('<svg xmlns="http://www.w3.org/2000/svg"><g id="a"><use href="#a"/><use href="#b"/></g>'
              '<g id="b"><use href="#a"/></g><use href="#missing"/></svg>')
    assert _use_draws(fromstring(cyclic)) == 6
    # definitions are counted where they are used, not in place
    defs = '<svg xmlns="http://www.w3.org/2000/svg"><defs><g id="d"><use href="#x"/></g></defs><use href="#d"/></svg>'
    assert _use_draws(fromstring(defs)) == 2


def test_a_use_fan_out_within_the_bound_is_drawn(render_pool):
    r = render_svg(render_pool, _fan_out(2))
    assert r.ok and ink_box(r.png) == (0, 0, 1, 1), (r.error_kind, r.message)


# -- 5. text past FreeType's size --------------------------------------------------------------------------------------
@pytest.mark.parametrize("huge", [
    '<text y="50" font-size="1e5">W</text>',  # before: crash, cairo's FREETYPE_ERROR
    '<g transform="scale(100)"><text y="0.5" font-size="1000">W</text></g>',  # 1e5 px on the canvas
    '<text y="50"><tspan font-size="1e6">A</tspan></text>',
])
def test_text_past_freetypes_size_is_not_drawn_and_the_rest_is(render_pool, huge):
    svg = f'{HEAD.replace("60", "100")}>{huge}<rect x="80" y="80" width="10" height="10"/></svg>'
    r = render_svg(render_pool, svg)
    assert r.ok and ink_box(r.png) == (80, 80, 90, 90), (r.error_kind, r.message)
    # FreeType's error stayed with the font face: later text failed too; it is drawn now
    r = render_svg(render_pool, f'{HEAD.replace("60", "100")}>{huge}<text y="90" font-size="20">ok</text></svg>')
    assert r.ok and ink_box(r.png) is not None and ink_box(r.png)[1] >= 70, (r.error_kind, r.message)


def test_freetypes_size_is_the_larger_axis_on_the_canvas():
    import cairocffi

    from render.worker import _font_matrix_drawable

    assert _font_matrix_drawable(cairocffi.Matrix(65535, 0, 0, 65535))
    assert not _font_matrix_drawable(cairocffi.Matrix(65536, 0, 0, 65536))
    assert not _font_matrix_drawable(cairocffi.Matrix(40000, 0, 0, 80000))  # cairo's error for 40000 px at scale(1, 2)
    assert _font_matrix_drawable(cairocffi.Matrix(1e-3, 0, 0, 1e-3).multiply(cairocffi.Matrix(6e7, 0, 0, 6e7)))
