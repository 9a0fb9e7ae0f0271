"""render/: a thirty-sixth pass, after review 20 (circular SVG references, CSS lengths inside the document, sizes
past the largest float).

Hostile programs written against what that review changed (reference cycles through every kind of SVG reference,
lengths and transforms of no size, a figure's size as exotic numbers, the recursion limit the SVG path raises) and
against walls not tried before (kernel log, Bluetooth sockets, numpy's loaders of host files), each pinned to its
label with test_render_hostile21's host checks; then legitimate programs that must render.

Found and fixed in this pass (each pinned in tests/test_render_review20.py, section 5):

1. A marker without a viewBox holding only content of no area (nothing, a horizontal tick, a ``<use>`` of the root)
   and a pattern in objectBoundingBox units on a horizontal line were a ``crash`` (cairosvg stores no bounding box of
   no area, then read the missing one as a tuple).
2. A ``stroke-dasharray`` with a negative item was a ``crash`` (cairo's ``INVALID_DASH``); text of ``font-size="1e300"``
   too (``INVALID_MATRIX``).
3. A thousand ``<use href="#root">`` timed out once review 20 stopped the recursion: each built the whole document's
   nodes before its cycle was found. A ``<use>`` naming an element being drawn is refused before it is built now.
4. (review 20's own) a python job at the largest recursion limit saving its chart as SVG was a ``crash``: the SVG
   path's doubled limit passed C's INT_MAX. It is capped there.
"""

import os
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from conftest import drawn_pixels, ink_spreads  # noqa: E402
from render import RenderJob  # noqa: E402

TOKEN = "hostile36canary"
PLT = "import matplotlib.pyplot as plt\n"
NP = PLT + "import numpy as np\n"
DRAW = PLT + "plt.figure(figsize=(1, 1), dpi=30)\nplt.plot([3, 1])\n"
SVGNS = '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
SVG = SVGNS + 'id="root" width="40" height="40">'
INK = '<rect width="10" height="10" fill="red"/>'


# -- reference cycles through every kind of SVG reference: not rendered, the rest drawn ---------------------------
CYCLES = {
    "svg_use_of_root_a_thousand_times": (SVG + INK + '<use href="#root"/>' * 1000 + "</svg>", "svg", 10.0, {"ok"}),
    "svg_use_of_nested_svg_inside_it": (SVG + '<svg id="n" width="20" height="20">' + INK + '<use href="#n" x="3"/>'
                                        "</svg></svg>", "svg", 10.0, {"ok"}),
    "svg_mask_pair_naming_each_other": (SVG + '<defs><mask id="a"><rect width="40" height="40" fill="white" '
                                        'mask="url(#b)"/></mask><mask id="b"><rect width="40" height="40" fill="white" '
                                        'mask="url(#a)"/></mask></defs>' + INK + '<rect x="20" width="9" height="9" '
                                        'mask="url(#a)"/></svg>', "svg", 10.0, {"ok"}),
    "svg_marker_pair_naming_each_other": (SVG + '<defs><marker id="a" markerWidth="4" markerHeight="4"><path d="M0 0 '
                                          'L3 3" stroke="black" marker-end="url(#b)"/></marker><marker id="b" '
                                          'markerWidth="4" markerHeight="4"><path d="M0 0 L3 3" stroke="black" '
                                          'marker-end="url(#a)"/></marker></defs>' + INK + '<path d="M20 20 L30 30" '
                                          'stroke="blue" marker-end="url(#a)"/></svg>', "svg", 10.0, {"ok"}),
    "svg_pattern_chain_filling_with_its_head": (SVG + '<defs><pattern id="p1" href="#p2"/><pattern id="p2" width="4" '
                                                'height="4" patternUnits="userSpaceOnUse"><rect width="4" height="4" '
                                                'fill="url(#p1)"/></pattern></defs>' + INK + '<rect x="20" width="9" '
                                                'height="9" fill="url(#p1)"/></svg>', "svg", 10.0, {"ok"}),
    "svg_root_masked_by_a_use_of_itself": (SVG + '<defs><mask id="m"><use href="#root"/></mask></defs>'
                                           '<g mask="url(#m)">' + INK + "</g></svg>", "svg", 10.0, {"ok"}),
    "svg_clip_path_made_of_the_root": (SVG + '<defs><clipPath id="c"><use href="#root"/></clipPath></defs>' + INK +
                                       '<rect x="20" width="9" height="9" clip-path="url(#c)"/></svg>', "svg", 10.0,
                                       {"ok"}),
    "svg_marker_drawing_the_root": (SVG + '<defs><marker id="k" markerWidth="9" markerHeight="9"><use href="#root"/>'
                                    '</marker></defs>' + INK + '<path d="M20 20 L30 30" stroke="blue" '
                                    'marker-start="url(#k)"/></svg>', "svg", 10.0, {"ok"}),
    "svg_switch_choosing_a_use_of_root": (SVG + INK + '<switch><use href="#root"/><rect width="5" height="5"/></switch>'
                                          "</svg>", "svg", 10.0, {"ok"}),
    "svg_tref_ring_of_three_texts": (SVG + '<text id="a" y="10">a<tref href="#b"/></text><text id="b" y="20">b'
                                     '<tref href="#c"/></text><text id="c" y="30">c<tref href="#a"/></text></svg>',
                                     "svg", 10.0, {"ok"}),
    "svg_tref_of_root_inside_a_use_of_root": (SVG + INK + '<text y="30"><tref href="#root"/></text><use href="#root"/>'
                                              "</svg>", "svg", 10.0, {"ok"}),
    # no cycle, but a fan-out of 2^22 references: refused before drawing (review 22; was the job's clock)
    "svg_use_fan_out_doubling_22_levels": (SVG + '<defs><g id="u0">' + INK + "</g>" + "".join(
        f'<g id="u{i + 1}"><use href="#u{i}"/><use href="#u{i}" x="1"/></g>' for i in range(22)) +
        '</defs><use href="#u22"/></svg>', "svg", 3.0, {"too_large"}),
}

# -- lengths, numbers and transforms of no size inside the document and at its root ---------------------------------
LENGTHS = {
    "svg_calc_widths_from_a_style_sheet": (SVG + '<style>rect { width: calc(100% - 5px); height: calc(1em) }</style>'
                                           + INK + "</svg>", "svg", 10.0, {"ok"}),
    "svg_nested_svg_of_1e30_rem": (SVG + '<svg width="1e30rem" height="1e30rem">' + INK + "</svg></svg>", "svg", 10.0,
                                   {"ok"}),
    "svg_root_of_300_rem_past_max_side": (SVGNS + 'width="300rem" height="1rem">' + INK + "</svg>", "svg", 10.0,
                                          {"too_large"}),
    # calc() is evaluated (review 22): a 10 px wide root
    "svg_root_width_calc_in_style_sheet": (SVGNS + 'height="10"><style>svg { width: calc(5px + 5px) }</style>' + INK +
                                           "</svg>", "svg", 10.0, {"ok"}),
    "svg_root_width_invalid_calc_in_style_sheet": (SVGNS + 'height="10"><style>svg { width: calc(5px * 5px) }</style>'
                                                   + INK + "</svg>", "svg", 10.0, {"invalid_size"}),
    "svg_opacity_of_1e400_percent": (SVG + '<rect width="10" height="10" fill="red" opacity="1e400%" '
                                     'stroke-opacity="-1e400"/></svg>', "svg", 10.0, {"ok"}),
    "svg_dasharray_of_only_invalid_items": (SVG + '<path d="M0 5 H40" stroke="red" stroke-dasharray="xpx, --5, calc(1)"/>'
                                            + INK + "</svg>", "svg", 10.0, {"ok"}),
    "svg_font_size_1e300_text": (SVG + INK + '<text y="30" font-size="1e300">A</text></svg>', "svg", 10.0,
                                 {"ok", "crash"}),
    "svg_rotate_by_1e400_degrees": (SVG + INK + '<rect width="9" height="9" transform="rotate(1e400)"/></svg>', "svg",
                                    10.0, {"ok"}),
    "svg_pattern_transform_overflowing_twice": (SVG + '<defs><pattern id="p" width="4" height="4" patternUnits='
                                                '"userSpaceOnUse" patternTransform="matrix(1e300 0 0 1e300 0 0) '
                                                'matrix(1e300 0 0 1e300 0 0)"><rect width="2" height="2"/></pattern>'
                                                '</defs>' + INK + '<rect x="20" width="9" height="9" fill="url(#p)"/>'
                                                "</svg>", "svg", 10.0, {"ok"}),
    "svg_nested_viewbox_of_1e_minus_300_inside_scale": (SVG + '<g transform="scale(1e10)"><svg width="4" height="4" '
                                                        'viewBox="0 0 1e-300 1e-300">' + INK + "</svg></g></svg>",
                                                        "svg", 10.0, {"ok"}),
    # the screen still reads every attribute: a url() inside calc() is a fetch
    "svg_calc_holding_a_url_of_a_host_file": (SVG + '<rect width="calc(url(file:///etc/hostname))" height="9"/></svg>',
                                              "svg", 10.0, {"forbidden"}),
}

# -- a figure's size as numbers no float holds, in every way matplotlib takes one -----------------------------------
FIGURE_SIZES = {
    "figure_constructor_direct_huge_int_size": ("from matplotlib.figure import Figure\n"
                                                "from matplotlib.backends.backend_agg import FigureCanvasAgg\n"
                                                "fig = Figure(figsize=(10**400, 2))\nFigureCanvasAgg(fig).print_png("
                                                "'out.png')\n", "python", 10.0, {"invalid_size"}),
    "savefig_svg_at_huge_int_dpi": (DRAW + "plt.savefig('c.svg', dpi=10**400)\n", "python", 10.0, {"invalid_size"}),
    "savefig_to_bytesio_at_huge_int_dpi": (DRAW + "import io\nplt.savefig(io.BytesIO(), format='png', dpi=-10**999)\n",
                                           "python", 10.0, {"invalid_size"}),
    "figsize_object_array_of_huge_ints": (NP + "plt.figure(figsize=np.array([3, 10**400], dtype=object))\n",
                                          "python", 10.0, {"invalid_size"}),
    "dpi_int_subclass_past_float": (PLT + "class Big(int):\n    pass\nplt.figure(dpi=Big(10**500))\n", "python", 10.0,
                                    {"invalid_size"}),
    # x87's long double holds 1e400; matplotlib's float64 transform does not (an infinity, then NaN pixels)
    "dpi_long_double_1e400": (DRAW + "import numpy as np\nplt.savefig('out.png', dpi=np.longdouble('1e400'))\n",
                              "python", 10.0, {"invalid_size"}),
    # a Decimal dpi is no size matplotlib takes (its transform multiplies a float by it): the job's error, any size
    "dpi_decimal_of_any_size": (DRAW + "from decimal import Decimal\nplt.savefig('out.png', dpi=Decimal('1e400'))\n",
                                "python", 10.0, {"crash"}),
    "recursion_limit_int_max_then_chart_saved_as_svg": (DRAW + "import sys\nsys.setrecursionlimit(2**31 - 1)\n"
                                                        "plt.savefig('c.svg')\nplt.close()\n", "python", 10.0, {"ok"}),
}

# -- walls not tried before --------------------------------------------------------------------------------------
WALLS = {
    "kernel_log_read": ("open('/dev/kmsg', 'rb').read(4096)\n" + DRAW, "python", 10.0, {"forbidden"}),
    "bluetooth_rfcomm_socket": ("import socket\nsocket.socket(31, socket.SOCK_STREAM, 3)\n" + DRAW,
                         "python", 10.0, {"forbidden"}),
    "numpy_load_host_file": (NP + "np.load('/etc/hostname', allow_pickle=True)\n", "python", 10.0, {"forbidden"}),
    "numpy_memmap_host_file": (NP + "np.memmap('/etc/os-release', mode='r')\n", "python", 10.0, {"forbidden"}),
    "cairosvg_url_of_host_file_from_python": ("import cairosvg\ncairosvg.svg2png(url='/etc/hostname', "
                                              "write_to='out.png')\n", "python", 10.0, {"forbidden"}),
    "cairosvg_unsafe_entity_from_python": ("import cairosvg\ncairosvg.svg2png(bytestring=b'<!DOCTYPE s [<!ENTITY x "
                                           "SYSTEM \"file:///etc/hostname\">]><svg xmlns=\"http://www.w3.org/2000/svg\" "
                                           "width=\"9\" height=\"9\"><text>&x;</text></svg>', unsafe=True, "
                                           "write_to='out.png')\n", "python", 10.0, {"crash"}),
    "svg_written_by_python_naming_a_host_image": ("open('c.svg', 'w').write('" + SVG.replace("'", '"') +
                                                  '<image width="9" height="9" href="file:///etc/hostname"/></svg>'
                                                  "')\n", "python", 10.0, {"forbidden"}),
    "svg_written_by_python_with_a_use_of_root": ("open('c.svg', 'w').write('" + SVG.replace("'", '"') + INK +
                                                 '<use href="#root"/></svg>' + "')\n", "python", 10.0, {"ok"}),
    "xattrs_of_etc": ("import os\nraise RuntimeError(os.listxattr('/etc'))\n", "python", 10.0, {"crash"}),
    "write_into_bound_cairosvg_package": ("import cairosvg, os\nopen(os.path.join(os.path.dirname(cairosvg.__file__), "
                                          f"'{TOKEN}.py'), 'w').write('x')\n", "python", 10.0, {"forbidden"}),
}

GROUPS = {"cycles": CYCLES, "lengths": LENGTHS, "figure_sizes": FIGURE_SIZES, "walls": WALLS}


def test_the_batch_is_new_and_large():
    from test_render_hostile21 import check_batch_is_new
    from test_render_hostile29 import GROUPS as GROUPS29
    from test_render_hostile30 import GROUPS as GROUPS30
    from test_render_hostile31 import GROUPS as GROUPS31
    from test_render_hostile32 import GROUPS as GROUPS32
    from test_render_hostile33 import GROUPS as GROUPS33
    from test_render_hostile35 import GROUPS as GROUPS35

    check_batch_is_new(GROUPS, GROUPS29, GROUPS30, GROUPS31, GROUPS32, GROUPS33, GROUPS35)
    assert sum(map(len, GROUPS.values())) >= 30


@pytest.mark.parametrize("group", list(GROUPS))
def test_batch_outcomes(render_pool, group):
    from test_render_hostile21 import check_batch_in_time

    got = check_batch_in_time(render_pool, GROUPS[group], TOKEN)
    if group == "walls":
        # expat leaves an external entity unread (no file is opened), and /etc in the tree has no extended attributes
        assert got["cairosvg_unsafe_entity_from_python"][1].startswith("job: ParseError: undefined entity &x;"), got
        assert got["xattrs_of_etc"][1] == "job: RuntimeError: []", got


# -- legitimate programs a coder model plausibly writes: each must render, at the size given -----------------------
LEGIT_PYTHON = {  # name: (code, (width, height))
    "subplot_mosaic_three_panels": (NP + "fig, axd = plt.subplot_mosaic([['a', 'b'], ['c', 'c']], figsize=(5, 4))\n"
                                    "axd['a'].bar([1, 2, 3], [3, 1, 2])\naxd['b'].scatter([1, 2], [2, 1])\n"
                                    "axd['c'].plot(np.linspace(0, 1, 9) ** 2)\n", (500, 400)),
    "mathtext_integral_title": (NP + "x = np.linspace(0, 2, 50)\nplt.figure(figsize=(4, 3))\nplt.plot(x, x ** 2)\n"
                                "plt.title(r'$\\int_0^2 x^2\\,dx = \\frac{8}{3}$')\nplt.xlabel(r'$x$ (m)')\n",
                                (400, 300)),
    "polar_rose_curve": (NP + "t = np.linspace(0, 2 * np.pi, 400)\nax = plt.figure(figsize=(4, 4)).add_subplot("
                         "projection='polar')\nax.plot(t, np.abs(np.cos(3 * t)))\n", (400, 400)),
    "surface_plot_3d_axes": (NP + "fig = plt.figure(figsize=(4, 4))\nax = fig.add_subplot(projection='3d')\n"
                             "X, Y = np.meshgrid(np.linspace(-2, 2, 20), np.linspace(-2, 2, 20))\n"
                             "ax.plot_surface(X, Y, np.exp(-X ** 2 - Y ** 2), cmap='viridis')\n", (400, 400)),
    "annotated_maximum_with_arrow": (NP + "x = np.linspace(0, 3, 60)\ny = x * np.exp(-x)\nplt.figure(figsize=(4, 3))\n"
                                     "plt.plot(x, y)\nplt.annotate('max at x = 1', xy=(1, np.exp(-1)), xytext=(1.8, 0.2),"
                                     " arrowprops=dict(arrowstyle='->'))\n", (400, 300)),
    "table_below_bar_chart": (PLT + "fig, ax = plt.subplots(figsize=(4, 3))\nax.bar(['Q1', 'Q2', 'Q3'], [5, 7, 4])\n"
                              "ax.table(cellText=[['5', '7', '4']], rowLabels=['sales'], colLabels=['Q1', 'Q2', 'Q3'],"
                              " loc='bottom', bbox=[0, -0.35, 1, 0.2])\nfig.subplots_adjust(bottom=0.3)\n", (400, 300)),
    "contourf_with_colorbar": (NP + "X, Y = np.meshgrid(np.linspace(-1, 1, 40), np.linspace(-1, 1, 40))\n"
                               "plt.figure(figsize=(4, 3))\ncs = plt.contourf(X, Y, X ** 2 - Y ** 2, 12)\n"
                               "plt.colorbar(cs)\n", (400, 300)),
    "twin_axes_two_units": (NP + "fig, ax = plt.subplots(figsize=(4, 3))\nax.plot([0, 1, 2], [1, 4, 9], 'b-')\n"
                            "ax2 = ax.twinx()\nax2.plot([0, 1, 2], [30, 20, 10], 'r--')\nax.set_ylabel('m')\n"
                            "ax2.set_ylabel('s')\n", (400, 300)),
}
SVG_ROOT = SVGNS + 'width="200" height="120">'
LEGIT_SVG = {  # name: (text, (width, height))
    "css_classes_and_ids_styled": (SVG_ROOT + '<style>.bar { fill: steelblue } #hi { fill: orange }</style>'
                                   '<rect class="bar" x="10" y="40" width="30" height="70"/><rect id="hi" x="50" y="20" '
                                   'width="30" height="90"/></svg>', (200, 120)),
    "linear_and_radial_gradients": (SVG_ROOT + '<defs><linearGradient id="g"><stop offset="0" stop-color="red"/>'
                                    '<stop offset="100%" stop-color="blue"/></linearGradient><radialGradient id="r">'
                                    '<stop offset="0" stop-color="white"/><stop offset="1" stop-color="green"/>'
                                    '</radialGradient></defs><rect width="100" height="120" fill="url(#g)"/>'
                                    '<circle cx="150" cy="60" r="40" fill="url(#r)"/></svg>', (200, 120)),
    "arrowhead_markers_on_axes": (SVG_ROOT + '<defs><marker id="ah" markerWidth="8" markerHeight="8" refX="6" '
                                  'refY="3" orient="auto"><path d="M0,0 L6,3 L0,6 z" fill="black"/></marker></defs>'
                                  '<line x1="10" y1="110" x2="190" y2="110" stroke="black" marker-end="url(#ah)"/>'
                                  '<line x1="10" y1="110" x2="10" y2="10" stroke="black" marker-end="url(#ah)"/>'
                                  '</svg>', (200, 120)),
    "text_along_a_curve": (SVG_ROOT + '<path id="arc" d="M20 100 Q100 10 180 100" fill="none" stroke="#ccc"/>'
                           '<text font-size="14"><textPath href="#arc">radius of the circle</textPath></text></svg>',
                           (200, 120)),
    "hatched_pattern_fill": (SVG_ROOT + '<defs><pattern id="h" width="8" height="8" patternUnits="userSpaceOnUse">'
                             '<path d="M0 8 L8 0" stroke="black"/></pattern></defs><rect x="20" y="20" width="160" '
                             'height="80" fill="url(#h)" stroke="black"/></svg>', (200, 120)),
    "clip_path_circle_over_grid": (SVG_ROOT + '<defs><clipPath id="c"><circle cx="100" cy="60" r="50"/></clipPath>'
                                   '</defs><g clip-path="url(#c)"><rect width="200" height="120" fill="gold"/>'
                                   '<path d="M0 60 H200 M100 0 V120" stroke="black"/></g></svg>', (200, 120)),
    "symbol_reused_with_rem_sizes": (SVG_ROOT + '<symbol id="dot" viewBox="0 0 10 10"><circle cx="5" cy="5" r="4" '
                                     'fill="purple"/></symbol><use href="#dot" x="10" y="10" width="2rem" height="2rem"/>'
                                     '<use href="#dot" x="80" y="40" width="3rem" height="3rem"/></svg>', (200, 120)),
}


@pytest.mark.parametrize("name", list(LEGIT_PYTHON))
def test_a_legitimate_plot_renders(render_pool, name):
    code, size = LEGIT_PYTHON[name]
    r = render_pool.render(RenderJob(code), timeout_s=20)
    assert r.ok and (r.width, r.height) == size, (r.error_kind, r.message, r.width, r.height)
    grey, _ = ink_spreads(r.png)
    assert grey > 50, grey  # ink on a background, not a blank canvas


@pytest.mark.parametrize("name", list(LEGIT_SVG))
def test_a_legitimate_svg_renders(render_pool, name):
    text, size = LEGIT_SVG[name]
    r = render_pool.render(RenderJob(text, "svg"), timeout_s=20)
    assert r.ok and (r.width, r.height) == size, (r.error_kind, r.message)
    assert 0 < drawn_pixels(r.png) < r.width * r.height * 0.95 or name in (
        "linear_and_radial_gradients", "clip_path_circle_over_grid")


def test_the_legitimate_programs_are_new_and_enough():
    from test_render_hostile32 import LEGIT_PYTHON as PY32, LEGIT_SVG as SVG32
    from test_render_hostile33 import LEGIT_PYTHON as PY33, LEGIT_SVG as SVG33
    from test_render_hostile35 import LEGIT_PYTHON as PY35, LEGIT_SVG as SVG35

    mine = {**LEGIT_PYTHON, **LEGIT_SVG}
    earlier = {**PY32, **SVG32, **PY33, **SVG33, **PY35, **SVG35}
    assert len(mine) >= 15 and not set(mine) & set(earlier)
    assert not {v[0] for v in mine.values()} & {v[0] for v in earlier.values()}
