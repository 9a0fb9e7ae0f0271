"""render/: review 23, path arcs of extreme numbers, patterns of many device tiles, inherited calc() font sizes.

1. A path arc whose radii cairosvg's arithmetic cannot hold (``A 1e308 1e308``, ``inf``, a radius of 1e-300 beside
   one of 8e6) was a ``crash`` (OverflowError / ZeroDivisionError). A radius under 2**-149 (0 where browsers read path
   numbers, as 32-bit floats) is a straight line (SVG's arc rules), radii past 1e13 (or 1e10 times the end point's
   coordinates) are scaled down together to that,
   a NaN or infinite number ends the path before its arc (drawn up to the error).
2. A 5 px pattern at ``patternTransform="scale(1e-6)"`` was ``memory``, at scale(0.03) a ``timeout``: cairo replays a
   tile scaled down under 2x2 px once per tile. More than ``SVG_MAX_SMALL_PATTERN_TILES`` such tiles for one shape
   are ``too_large`` at once.
3. An inherited relative font size (``2em``, ``%``, a ``calc()`` of them) was re-read in each child against its
   parent's size, and ``%`` against the viewport; CSS computes it where it is declared and the child inherits px.
4. A 200-byte style sheet (``h g g ... g rect``) made cssselect2 walk every ancestor path: a timeout; one of 100
   compound selectors was its SyntaxError (a ``crash``). The first is ``too_large`` at once, the second dropped.
5. A breadth corpus of hostile documents (filters of huge parameters, clip / mask / pattern cycles, nested SVG
   ``data:`` images, external entities, XInclude, ``@import``, text spacing of 1e308, ``<use>`` fan-out) and programs
   (usetex, deep mathtext, fork, sockets, subprocess, 50 GB arrays), each pinned to its kind.
"""

import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from conftest import ink_box, render_svg, start_render_pool  # noqa: E402

HEAD = '<svg xmlns="http://www.w3.org/2000/svg" width="60" height="60">'


@pytest.fixture(scope="module")
def pool():
    p = start_render_pool(workers=1)
    yield p
    p.close()


def _path(d: str) -> str:
    return HEAD + f'<path d="{d}" stroke="black" fill="none" stroke-width="2"/></svg>'


def _ok_box(pool, svg):
    r = render_svg(pool, svg)
    assert r.ok, (r.error_kind, r.message)
    return ink_box(r.png)


# -- 1. path arcs -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", [
    "M0 0 A 8000000 1e-300 0 0 1 50 50",  # a radius that is 0 as a 32-bit float: a line
    "M0 0 A 1e-300 8000000 0 0 1 50 50",
    "M0 0 A 1e-320 1e-320 0 0 1 50 50",  # denormals
    "M0 0 a 1e-320 5 0 0 1 50 50",
    "M0 0 A 0 10 0 0 1 50 50",
])
def test_arc_with_a_zero_radius_is_a_line(pool, d):
    line = _ok_box(pool, _path("M0 0 L 50 50"))
    assert _ok_box(pool, _path(d)) == line


@pytest.mark.parametrize("arc", [
    "A inf 10 0 0 1 50 50", "A 1e400 5 0 0 1 50 50", "A -inf 5 0 0 1 50 50", "A 10 10 1e400 0 1 50 50",
    "A 10 10 0 0 1 1e400 50", "A nan 10 0 0 1 50 50", "A 10 NaN 0 0 1 50 50", "A 10 10 -Infinity 0 1 50 50",
])
def test_arc_with_a_number_of_no_value_ends_the_path(pool, arc):
    # drawn up to the error: the line before the arc, nothing of it or after it
    before = _ok_box(pool, _path("M0 0 L 10 10"))
    assert _ok_box(pool, _path(f"M0 0 L 10 10 {arc} L 0 50")) == before


@pytest.mark.parametrize("arc", [
    "A 1e308 1e308 0 0 1 50 50", "A 1e200 1e300 0 0 1 50 50", "A 1.7e308 1.7e308 45 0 0 50 50",
])
def test_arc_of_huge_radii_between_near_points_is_its_chord(pool, arc):
    assert _ok_box(pool, _path(f"M0 0 {arc}")) == _ok_box(pool, _path("M0 0 L 50 50"))


def test_arc_of_huge_radii_the_long_way_round_is_too_large(pool):
    r = render_svg(pool, _path("M0 0 A 1e308 1e308 0 1 1 50 50"))
    assert r.error_kind == "too_large" and "SVG arc of radius" in r.message, (r.error_kind, r.message)


def test_arc_of_a_huge_and_a_tiny_radius_is_a_line(pool):
    assert _ok_box(pool, _path("M0 0 A 1e308 1e-308 45 0 1 50 50")) == _ok_box(pool, _path("M0 0 L 50 50"))


def test_arc_rotation_of_1e300_degrees_is_one_modulo_a_turn(pool):
    import math

    turned = math.fmod(1e300, 360.0)
    assert (_ok_box(pool, _path("M10 30 A 20 10 1e300 0 1 50 30"))
            == _ok_box(pool, _path(f"M10 30 A 20 10 {turned!r} 0 1 50 30")))


def test_arcs_within_range_draw_as_before(pool):
    # a semicircle over the diagonal: radii too small are scaled up (the same picture for 1e-30 as for 1)
    small = _ok_box(pool, _path("M10 10 A 1e-30 1e-30 0 0 1 50 50"))
    assert small == _ok_box(pool, _path("M10 10 A 1 1 0 0 1 50 50"))
    assert small[2] > 55  # the arc bulges past the chord's end
    # negative radii are their absolute values; flags written together; a rotation of whole turns is none
    assert _ok_box(pool, _path("M10 10 A -1 -1 0 0150 50")) == small
    assert _ok_box(pool, _path("M10 30 A 20 10 720 0 1 50 30")) == _ok_box(pool, _path("M10 30 A 20 10 0 0 1 50 30"))
    # several arcs in one segment, relative ones, and a zero-radius one among them
    two = _ok_box(pool, _path("M5 30 a 10 10 0 0 1 20 0 10 10 0 0 1 20 0"))
    assert two == _ok_box(pool, _path("M5 30 a 10 10 0 0 1 20 0 a 10 10 0 0 1 20 0"))
    assert (_ok_box(pool, _path("M5 30 a 0 10 0 0 1 20 0 a 10 10 0 0 1 20 0"))
            == _ok_box(pool, _path("M5 30 l 20 0 a 10 10 0 0 1 20 0")))


# -- 2. pattern tiles scaled down on the canvas -------------------------------------------------------------------
def _pattern(transform: str = "", tile: float = 5, size: int = 400, g: str = "") -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{size}" height="{size}"><defs><pattern id="p" '
            f'width="{tile}" height="{tile}" patternUnits="userSpaceOnUse" {transform}><rect width="{tile / 2}" '
            f'height="{tile / 2}"/></pattern></defs><g {g}><rect width="{size}" height="{size}" fill="url(#p)"/>'
            '</g></svg>')


@pytest.mark.parametrize("svg", [
    _pattern('patternTransform="scale(1e-6)"'),  # cairo ran out of memory: `memory`
    _pattern('patternTransform="scale(1, 1e-6)"'),
    _pattern('patternTransform="scale(0.03)"'),  # ran to the timeout
    _pattern('patternTransform="scale(0.1)"'),  # 640k tiles of 0.25 px2: 5.6 s
    _pattern(g='transform="scale(1e-6)"').replace('width="400" height="400" fill', 'width="4e8" height="4e8" fill'),
])
def test_pattern_of_many_shrunk_tiles_is_too_large_at_once(pool, svg):
    r = render_svg(pool, svg, timeout_s=10.0)
    assert r.error_kind == "too_large" and "SVG pattern:" in r.message, (r.error_kind, r.message)
    assert r.elapsed_s < 2.0


@pytest.mark.parametrize("svg", [
    _pattern(), _pattern('patternTransform="scale(0.5)"'), _pattern('patternTransform="rotate(30)"'),
    _pattern(tile=0.1),  # tiles drawn at their own size: drawn once, repeated
    _pattern('patternTransform="scale(0.5)"', size=2000),
    _pattern('patternTransform="scale(0.01)"', size=4),  # 6400 tiles of a shrunk pattern on a small shape
])
def test_ordinary_patterns_still_draw(pool, svg):
    r = render_svg(pool, svg)
    assert r.ok, (r.error_kind, r.message)
    assert ink_box(r.png) is not None


# -- 3. font sizes computed where they are declared ---------------------------------------------------------------
def _text(group: str, text_attrs: str = "", style: str = "", root: str = "") -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="200" height="200" {root}>{style}<g {group}><g>'
            f'<text x="10" y="150" {text_attrs}>H</text></g></g></svg>')


def _text_box(pool, svg):
    box = _ok_box(pool, svg)
    assert box is not None
    return box


@pytest.mark.parametrize("group", [
    'font-size="2em"', 'font-size="200%"', 'font-size="calc(2em)"', 'font-size="calc(1em + 16px)"',
    'font-size="calc(100% + 1em)"', 'font-size="calc(50% + 1.5em)"', 'style="font-size: calc(2em)"',
])
def test_inherited_relative_font_size_is_the_parents_computed_px(pool, group):
    # 2em of the initial 16 px is 32 px, inherited as 32 px (cairosvg re-read "2em" at each level: 64, then 128 px;
    # and read % against the viewport)
    assert _text_box(pool, _text(group)) == _text_box(pool, _text('font-size="32px"'))


def test_declared_relative_font_sizes_below_an_inherited_one(pool):
    px16 = _text_box(pool, _text('font-size="16px"'))
    assert _text_box(pool, _text('font-size="2em"', 'font-size="0.5em"')) == px16
    assert _text_box(pool, _text('font-size="calc(2em)"', 'font-size="50%"')) == px16
    assert _text_box(pool, _text('font-size="2em"', 'font-size="inherit"')) == _text_box(pool, _text('font-size="32px"'))
    # rem is the root's size wherever it is read; one style rule matching the group and the text applies to each
    assert _text_box(pool, _text('font-size="3em"', 'font-size="1rem"', root='font-size="16px"')) == px16
    sheet = "<style>g, text { font-size: 2em }</style>"
    assert _text_box(pool, _text("", style=sheet)) == _text_box(pool, _text('font-size="128px"'))  # 32, 64, 128 px


# -- 4. style sheet selectors ------------------------------------------------------------------------------------
def _styled(sheet: str, depth: int) -> str:
    return (HEAD + f"<style>{sheet}</style>" + "<g>" * depth + '<rect width="50" height="50"/>' + "</g>" * depth
            + "</svg>")


@pytest.mark.parametrize("k, depth", [(12, 24), (16, 32), (48, 60)])
def test_a_selector_of_exponential_matching_is_too_large_at_once(pool, k, depth):
    # `h g g ... g rect`: cssselect2 tries every ancestor for each descendant combinator and h never matches (k=12:
    # 3.1 s; k=16: a timeout)
    r = render_svg(pool, _styled("h " + " g" * k + " rect { fill: red }", depth), timeout_s=10.0)
    assert r.error_kind == "too_large" and "ancestor paths" in r.message, (r.error_kind, r.message)
    assert r.elapsed_s < 2.0


@pytest.mark.parametrize("sheet", [
    " ".join(["g"] * 100) + " rect { fill: red }",  # 100 compounds: cssselect2's SyntaxError, a crash
    " ".join(["g"] * 2000) + " rect { fill: red }",  # its RecursionError, a crash after 4 s
])
def test_a_selector_cssselect2_cannot_compile_is_dropped(pool, sheet):
    plain = _ok_box(pool, _styled("", 10))
    r = render_svg(pool, _styled(sheet, 200))
    assert r.ok and ink_box(r.png) == plain, (r.error_kind, r.message)
    assert r.elapsed_s < 2.0


def test_ordinary_selectors_still_apply(pool):
    from conftest import png_pixel

    # a selector whose subject matches nothing walks no paths; a deep chain that matches is applied
    for sheet in ("g g g g g g g g g g x { fill: blue } rect { fill: red }", "g g g rect { fill: red }",
                  "g > g > g rect, h g rect { fill: red }"):
        r = render_svg(pool, _styled(sheet, 30))
        assert r.ok and png_pixel(r.png, (10, 10)) == (255, 0, 0), (sheet, r.error_kind, r.message)


# -- 5. a breadth corpus of hostile documents and programs, each with the kind it gets -----------------------------
def _doc(body: str) -> str:
    return ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="100" '
            f'height="100">{body}</svg>')


_FILTERED = '<rect width="50" height="50" filter="url(#f)"/>'
SVG_CORPUS = [
    (_doc(f'<filter id="f"><feGaussianBlur stdDeviation="1e9"/></filter>{_FILTERED}'), None),
    (_doc(f'<filter id="f"><feTurbulence baseFrequency="0.05" numOctaves="1000000"/></filter>{_FILTERED}'), None),
    (_doc(f'<filter id="f"><feMorphology radius="1e9"/></filter>{_FILTERED}'), None),
    (_doc(f'<filter id="f"><feConvolveMatrix order="1000" kernelMatrix="1"/></filter>{_FILTERED}'), None),
    (_doc(f'<filter id="f"><feOffset dx="1e308" dy="nan"/></filter>{_FILTERED}'), None),
    (_doc('<clipPath id="c" clip-path="url(#c)"><rect width="50" height="50"/></clipPath>'
          '<rect width="50" height="50" clip-path="url(#c)"/>'), None),
    (_doc('<clipPath id="a" clip-path="url(#b)"><rect width="5" height="5"/></clipPath><clipPath id="b" '
          'clip-path="url(#a)"><rect width="5" height="5"/></clipPath><rect width="50" height="50" '
          'clip-path="url(#a)"/>'), None),
    (_doc('<mask id="m"><rect width="50" height="50" fill="white" mask="url(#m)"/></mask>'
          '<rect width="50" height="50" mask="url(#m)"/>'), None),
    (_doc('<mask id="a"><rect width="50" height="50" fill="white" clip-path="url(#b)"/></mask><clipPath id="b">'
          '<rect width="50" height="50" mask="url(#a)"/></clipPath><rect width="50" height="50" mask="url(#a)"/>'),
     None),
    (_doc('<pattern id="p" width="10" height="10" patternUnits="userSpaceOnUse"><rect width="5" height="5" '
          'fill="url(#p)"/></pattern><rect width="50" height="50" fill="url(#p)"/>'), None),
    (_doc('<image width="50" height="50" href="data:image/svg+xml;base64,'
          'PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4="/>'), "forbidden"),
    ('<!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]>' + _doc('<text y="20">&x;</text>'), "forbidden"),
    (_doc('<xi:include xmlns:xi="http://www.w3.org/2001/XInclude" href="file:///etc/passwd" parse="text"/>'),
     "forbidden"),
    (_doc('<style>@import url("file:///etc/passwd");</style><rect width="5" height="5"/>'), "forbidden"),
    (_doc('<style>@\\69mport "x.css";</style><rect width="5" height="5"/>'), "forbidden"),
    (_doc('<text y="20" textLength="1e9" lengthAdjust="spacingAndGlyphs">Hello</text>'), None),
    (_doc('<text y="20" letter-spacing="1e308" word-spacing="-1e308">Hello world</text>'), None),
    (_doc('<path id="p" d="M0 50 L 100 50"/><text><textPath href="#p" startOffset="1e308">Hi</textPath></text>'),
     None),
    (_doc('<g font-size="1e300em"><g font-size="1e300em"><text y="20">H</text></g></g>'), None),
    (_doc('<radialGradient id="g" r="1e308" fr="1e308" fx="nan"><stop offset="0" stop-color="red"/>'
          '</radialGradient><rect width="50" height="50" fill="url(#g)"/>'), None),
    (_doc('<rect id="a0" width="1" height="1"/>' + "".join(
        f'<g id="a{i}"><use href="#a{i - 1}"/><use href="#a{i - 1}"/></g>' for i in range(1, 30))), "too_large"),
]


@pytest.mark.parametrize("svg, kind", SVG_CORPUS)
def test_hostile_svg_corpus(pool, svg, kind):
    r = render_svg(pool, svg, timeout_s=10.0)
    assert r.error_kind == kind, (r.error_kind, r.message)
    assert r.elapsed_s < 3.0


_PLT = "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
PY_CORPUS = [
    ("plt.rcParams['text.usetex'] = True\nplt.plot([1, 2]); plt.title('$x^2$')\nplt.savefig('out.png')",
     "forbidden"),  # LaTeX runs through subprocess: its fork is refused
    ("plt.title('$' + '{' * 10000 + 'x' + '}' * 10000 + '$')\nplt.savefig('out.png')", "crash"),  # RecursionError
    ("import ctypes\nctypes.CDLL(None).fork()", "forbidden"),
    ("import os\nos.fork()", "forbidden"),
    ("import socket\nsocket.socket().connect(('192.0.2.1', 80))", "forbidden"),
    ("import subprocess\nsubprocess.run(['ls', '/'])", "forbidden"),
    ("import numpy as np\na = np.ones(50 * 2**30 // 8)", "memory"),
    ("import numpy as np\na = np.empty(50 * 2**30, dtype=np.uint8)\na[::4096] = 1", "memory"),
]


@pytest.mark.parametrize("code, kind", PY_CORPUS)
def test_hostile_python_corpus(pool, code, kind):
    from render import RenderJob

    r = pool.render(RenderJob(_PLT + code, "python"), timeout_s=10.0)
    assert r.error_kind == kind, (r.error_kind, r.message)
    assert r.elapsed_s < 3.0
