"""render/: review 20b, defects left by the SVG patches of review 20 (each was a ``crash``).

1. A marker of markerWidth or markerHeight 0 failed scaling its content (ZeroDivisionError; with content of no area
   the new stand-in box is that size), and a marker property naming no marker (``url(#missing)``) failed on None
   (AttributeError). SVG: a zero size disables the marker's rendering, a reference to no marker draws none; the
   path itself is drawn.
2. The lenient length reader ran its CSS regex on every value cairosvg's size() reads, bare numbers included (most
   of an exported chart's): drawing 10 matplotlib SVGs took ~19% longer than cairosvg alone, ~4% now.
3. An empty ``preserveAspectRatio`` (root, nested svg, marker) failed in cairosvg (IndexError): it is ignored as SVG 2
   ignores an invalid value. A root viewBox holding an infinite number beside a width and height failed too
   (ZeroDivisionError): it is ``invalid_size``, as a root viewBox of three numbers is.
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


# -- 2. the lenient length reader's cost -----------------------------------------------------------------------------
def test_the_lenient_length_reader_reads_a_bare_number_without_the_css_rewrite(monkeypatch):
    # a matplotlib SVG asks cairosvg's size() for thousands of bare numbers; the CSS regex on each made drawing one
    # ~15% slower (1079 -> 948 ms over 10 exported charts once bare numbers skip it)
    import types

    import cairosvg.helpers

    from render import worker

    surface = types.SimpleNamespace(font_size=10.0, dpi=96, context_width=200.0, context_height=100.0)
    reader = worker._lenient_length_reader(cairosvg.helpers.size)
    rewritten = []
    css_length = worker._css_length
    monkeypatch.setattr(worker, "_css_length", lambda text: rewritten.append(text) or css_length(text))
    numbers = ["12.5", " 3 ", "+1e2", "-.5", "0", "nan"]
    read = [reader(surface, n, "x") for n in numbers]
    assert read[:5] == [12.5, 3.0, 100.0, -0.5, 0.0] and read[5] != read[5] and rewritten == []
    # lengths with units still go through the CSS reading: rem is 16 px, capitals and Q are read, junk is 0
    assert [reader(surface, v, "x") for v in ("1rem", "2PX", "4Q", "50%", "1em", "xpx")] == pytest.approx(
        [16.0, 2.0, 96 / 25.4, 100.0, 10.0, 0])
    assert rewritten == ["1rem", "2PX", "4Q", "50%", "1em", "xpx"]


# -- 3. preserveAspectRatio and the root viewBox ---------------------------------------------------------------------
@pytest.mark.parametrize("document", [
    # before: crash, "IndexError: list index out of range"
    '<svg xmlns="http://www.w3.org/2000/svg" width="60" height="30" viewBox="0 0 10 10" preserveAspectRatio="">'
    '<rect width="10" height="10" fill="red"/></svg>',
    '<svg xmlns="http://www.w3.org/2000/svg" width="60" height="30"><svg viewBox="0 0 10 10" preserveAspectRatio=" ">'
    '<rect width="10" height="10" fill="red"/></svg></svg>',
])
def test_an_empty_preserve_aspect_ratio_is_read_as_unspecified(render_pool, document):
    r = render_pool.render(RenderJob(document, "svg"))
    unspecified = render_pool.render(RenderJob(document.replace('preserveAspectRatio=""', "").replace(
        'preserveAspectRatio=" "', ""), "svg"))
    assert r.ok and unspecified.ok, (r.error_kind, r.message)
    assert r.png == unspecified.png and _rgba(r.png, (30, 15)) == RED and _rgba(r.png, (5, 15)) == (0, 0, 0, 0)


def test_an_empty_preserve_aspect_ratio_on_a_marker_draws_it(render_pool):
    marker = ('<marker id="m" viewBox="0 0 10 10" markerWidth="4" markerHeight="4" markerUnits="userSpaceOnUse" '
              'preserveAspectRatio=""><rect width="10" height="10" fill="blue"/></marker>')
    r = _render(render_pool, f"<defs>{marker}</defs>{PATH}")
    assert r.ok and _rgba(r.png, (52, 32)) == BLUE, (r.error_kind, r.message)


@pytest.mark.parametrize("viewbox", ["0 0 1e400 1", "0 0 1 inf", "-inf 0 10 10"])
def test_a_root_viewbox_of_an_infinite_number_is_invalid_size(render_pool, viewbox):
    # before: crash, "ZeroDivisionError: float division by zero"
    r = render_pool.render(RenderJob(f'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" '
                                     f'viewBox="{viewbox}"><rect width="5" height="5"/></svg>', "svg"))
    assert (r.error_kind, r.message) == ("invalid_size", f"job: The SVG viewBox is infinite: {viewbox!r}")


def test_a_corner_radius_of_auto_is_the_other_radius(render_pool):
    # SVG 2: rx="auto" is ry's value (cairosvg read "auto" as 0 and drew square corners: a picture the patches change)
    auto = _render(render_pool, '<rect x="10" y="10" width="40" height="40" rx="auto" ry="10" fill="red"/>')
    given = _render(render_pool, '<rect x="10" y="10" width="40" height="40" rx="10" ry="10" fill="red"/>')
    assert auto.ok and auto.png == given.png and _rgba(auto.png, (11, 11)) == (0, 0, 0, 0)


# -- 4. nesting past the doubled recursion limit (pins: checked, no defect) ------------------------------------------
DEPTH = 1900
NESTED = {
    "g": "<g>" * DEPTH + '<rect width="10" height="10"/>' + "</g>" * DEPTH,
    "svg": "<svg>" * DEPTH + '<rect width="10" height="10"/>' + "</svg>" * DEPTH,
    "a": "<a>" * DEPTH + '<rect width="10" height="10"/>' + "</a>" * DEPTH,
    "switch": "<switch>" * DEPTH + '<rect width="10" height="10"/>' + "</switch>" * DEPTH,
    "tspan": '<text y="20">' + "<tspan>" * DEPTH + "A" + "</tspan>" * DEPTH + "</text>",
    "symbol": "<defs>" + "".join(f'<symbol id="s{i}"><use href="#s{i + 1}"/></symbol>' for i in range(DEPTH))
              + f'<symbol id="s{DEPTH}"><rect width="10" height="10"/></symbol></defs><use href="#s0"/>',
    "use": "<defs>" + "".join(f'<g id="g{i}"><use href="#g{i + 1}"/></g>' for i in range(DEPTH))
           + f'<g id="g{DEPTH}"><rect width="10" height="10"/></g></defs><use href="#g0"/>',
}


@pytest.mark.parametrize("kind", sorted(NESTED))
def test_nesting_past_the_recursion_limit_is_a_crash_and_the_pool_serves_on(render_pool, kind):
    r = render_pool.render(RenderJob(SVG + NESTED[kind] + "</svg>", "svg"), timeout_s=30)
    assert (r.error_kind, r.message.split(":")[:2]) == ("crash", ["job", " RecursionError"]), (r.error_kind, r.message)
    after = _render(render_pool, '<rect width="10" height="10" fill="red"/>')
    assert after.ok and _rgba(after.png, (5, 5)) == RED


def test_a_c_stack_overflow_drawing_a_python_jobs_svg_is_a_crash_and_the_pool_serves_on(render_pool):
    # the job raised Python's limit past what the C stack holds; the SVG path doubles it again: a segfault in the job
    code = ("import sys\nsys.setrecursionlimit(100000)\nopen('c.svg', 'w').write('<svg xmlns=\"http://www.w3.org/2000/"
            "svg\" width=\"9\" height=\"9\">' + '<g>' * 40000 + '</g>' * 40000 + '</svg>')\n")
    r = render_pool.render(RenderJob(code), timeout_s=30)
    assert (r.error_kind, r.message) == ("crash", "job killed by SIGSEGV"), (r.error_kind, r.message)
    after = _render(render_pool, '<rect width="10" height="10" fill="red"/>')
    assert after.ok and _rgba(after.png, (5, 5)) == RED
