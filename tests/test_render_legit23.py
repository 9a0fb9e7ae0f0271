"""render/: three wrong pictures of legitimate SVG, drawn as a browser draws them now (worker.py's job-child patches):
text chunks anchored as a whole (``_svg_text_chunks_anchored``), CSS custom properties and var()
(``_svg_properties_computed_as_css``; its hostile side: cycles, deep nesting, huge values, end fast) and
``currentcolor`` in any case, inherited as the keyword."""

import sys
import time

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from conftest import render_svg  # noqa: E402
from test_render_legit22 import BLUE, GREEN, RED, box, near, rgb  # noqa: E402

SV = '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '


def picture(pool, svg):
    r = render_svg(pool, svg)
    assert r.ok, (r.error_kind, r.message)
    return rgb(r.png)


# -- 2. CSS custom properties and var() ------------------------------------------------------------------------------
SQ = SV + 'width="100" height="100">'
RECT = '<rect width="50" height="50" '


def colour_at(pool, body, xy=(10, 10)):
    px = picture(pool, SQ + body + "</svg>")
    return tuple(int(v) for v in px[xy[1], xy[0]])


BLACK = (0, 0, 0)
VARS = {  # name: (body, the colour a browser draws at (10, 10))
    "attribute": ('<g style="--c: red">' + RECT + 'fill="var(--c)"/></g>', RED),
    "style_fallback": (RECT + 'style="fill: var(--c, blue)"/>', BLUE),
    "style_sheet": ('<style>g { --c: #00f } .r { fill: var(--c) }</style><g>' + RECT + 'class="r"/></g>', BLUE),
    "root_rule": ('<style>svg { --main: green }</style>' + RECT + 'fill="var(--main)"/>', GREEN),
    "inherited_two_levels": ('<g style="--c: red"><g>' + RECT + 'style="fill: var(--c)"/></g></g>', RED),
    "nearest_wins": ('<g style="--c: red"><g style="--c: blue">' + RECT + 'fill="var(--c)"/></g></g>', BLUE),
    "substituted_where_declared": ('<g style="--a: red; --b: var(--a)"><g style="--a: blue">' + RECT
                                   + 'fill="var(--b)"/></g></g>', RED),
    "same_element_chain": ('<g style="--b: var(--a); --a: green">' + RECT + 'fill="var(--b)"/></g>', GREEN),
    "nested_fallback": (RECT + 'fill="var(--x, var(--y, blue))"/>', BLUE),
    "names_are_case_sensitive": ('<g style="--C: red; --c: blue">' + RECT + 'fill="var(--C)"/></g>', RED),
    "function_name_any_case": ('<g style="--c: red">' + RECT + 'fill="VAR(--c)"/></g>', RED),
    "in_a_stroke": ('<g style="--s: red"><rect x="10" y="10" width="30" height="30" fill="none" '
                    'stroke="var(--s)" stroke-width="8"/></g>', RED),
    "important_rule": ('<style>g { --c: red !important }</style><g style="--c: blue">' + RECT + 'fill="var(--c)"/>'
                       '</g>', RED),
    # invalid at computed-value time: as unset, fill's inherited value (black at the root)
    "missing_no_fallback_inherits": ('<g fill="blue">' + RECT + 'fill="var(--nope)"/></g>', BLUE),
    "missing_no_fallback_root": (RECT + 'fill="var(--nope)"/>', BLACK),
    "cycle": ('<g fill="blue" style="--a: var(--b); --b: var(--a)">' + RECT + 'fill="var(--a)"/></g>', BLUE),
    "cycle_member_takes_fallback": ('<g style="--a: var(--a)">' + RECT + 'fill="var(--a, red)"/></g>', RED),
    "self_reference_with_fallback_is_a_cycle": ('<g style="--a: var(--a, red)">' + RECT + 'fill="var(--a, blue)"/>'
                                                 '</g>', BLUE),
}


@pytest.mark.parametrize("name", list(VARS))
def test_var_is_resolved_as_css_resolves_it(render_pool, name):
    body, want = VARS[name]
    got = colour_at(render_pool, body)
    assert all(abs(g - w) <= 2 for g, w in zip(got, want)), (got, want)


def test_a_var_length_is_read_as_a_length(render_pool):
    px = picture(render_pool, SQ + '<g style="--w: 20px"><rect width="var(--w)" height="50" fill="red"/></g></svg>')
    assert box(near(px, RED)) == (0, 0, 19, 49)


# the hostile side: each ends fast with its documented outcome
def test_ten_thousand_custom_properties_in_a_chain_resolve(render_pool):
    chain = "; ".join(f"--v{i}: var(--v{i + 1})" for i in range(10_000)) + "; --v10000: red"
    t0 = time.monotonic()
    got = colour_at(render_pool, f'<g style="{chain}">' + RECT + 'fill="var(--v0)"/></g>')
    assert got == RED and time.monotonic() - t0 < 10


@pytest.mark.parametrize("depth, want", [(5_000, RED), (10_000, BLACK)])
def test_deeply_nested_fallbacks_end_fast(render_pool, depth, want):
    # 5,000 nested var()s are substituted in one pass; 10,000 are 90 KB, past CSS_VAR_MAX_CHARS: invalid (unset)
    value = "var(--x, " * depth + "red" + ")" * depth
    t0 = time.monotonic()
    got = colour_at(render_pool, RECT + f'fill="{value}"/>')
    assert got == want and time.monotonic() - t0 < 10


def test_a_doubling_chain_past_the_substitution_cap_is_invalid(render_pool):
    # --aN is 2^N copies of "red ": 2^40 characters if substituted; past CSS_VAR_MAX_CHARS it is invalid -> fallback
    laughs = "--a0: red; " + "; ".join(f"--a{i + 1}: var(--a{i}) var(--a{i})" for i in range(40))
    t0 = time.monotonic()
    got = colour_at(render_pool, f'<g style="{laughs}">' + RECT + 'fill="var(--a40, blue)"/></g>')
    assert got == BLUE and time.monotonic() - t0 < 10


@pytest.mark.parametrize("tail, want", [("", BLACK), (" var(--q)", RED)])
def test_a_custom_property_of_a_megabyte_on_every_element_ends_fast(render_pool, tail, want):
    # 1 MB is no colour: fill unset (black); holding a var() it is too long to substitute: invalid, the fallback
    big = "x" * ((1 << 20) - 12_000)  # ~1 MB: the whole document stays within max_svg_bytes
    nest = 200
    svg = (SQ + f"<style>* {{ --big: {big}{tail} }}</style>" + "<g>" * nest + RECT + 'fill="var(--big, red)"/>'
           + "</g>" * nest + "</svg>")
    t0 = time.monotonic()
    r = render_svg(render_pool, svg, timeout_s=30)
    assert r.ok, (r.error_kind, r.message)
    assert tuple(int(v) for v in rgb(r.png)[10, 10]) == want and time.monotonic() - t0 < 10


# -- 3. currentcolor in any case, inherited as the keyword -----------------------------------------------------------
CURRENT = {
    "lowercase": ('<g color="red">' + RECT + 'fill="currentcolor"/></g>', RED),
    "mixed_case": ('<g color="red">' + RECT + 'fill="CurrentColor"/></g>', RED),
    "style": ('<g style="color: blue">' + RECT + 'style="fill: currentcolor"/></g>', BLUE),
    "keyword_inherits": ('<g color="red" fill="currentColor">' + RECT + 'color="blue"/></g>', BLUE),
    "lowercase_keyword_inherits": ('<g color="red" fill="currentcolor"><g color="green">' + RECT + '/></g></g>',
                                   GREEN),
    "from_a_var": ('<g style="--c: currentcolor" color="green">' + RECT + 'fill="var(--c)"/></g>', GREEN),
    "stroke": ('<g color="red"><rect x="10" y="10" width="30" height="30" fill="none" stroke="currentcolor" '
               'stroke-width="8"/></g>', RED),
    "no_color_is_black": (RECT + 'fill="currentcolor"/>', BLACK),
}


@pytest.mark.parametrize("name", list(CURRENT))
def test_currentcolor_in_any_case(render_pool, name):
    body, want = CURRENT[name]
    got = colour_at(render_pool, body)
    assert all(abs(g - w) <= 2 for g, w in zip(got, want)), (got, want)


def test_currentcolor_on_a_gradient_stop(render_pool):
    body = ('<defs><linearGradient id="g"><stop offset="0" stop-color="currentcolor" color="blue"/>'
            '<stop offset="1" stop-color="currentcolor" color="blue"/></linearGradient></defs>'
            '<rect width="50" height="50" fill="url(#g)"/>')
    assert colour_at(render_pool, body) == BLUE
