"""render/: a corpus of legitimate programs of the kind MM-Zero's coder writes (matplotlib and SVG math figures),
each rendered once and checked for the picture it must give, not only for ``ok``: colours where the coordinates
put them, areas in the ratio the data says, text where its anchor says, glyphs the fonts hold.

The sandbox's failures on such programs are false refusals (a bound too tight, a wrong kind) or wrong pictures;
both cost MM-Zero's coder reward it earned. Hostile programs are pinned elsewhere (tests/test_render_hostile*.py)."""

import statistics
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from conftest import png_image, start_render_pool  # noqa: E402
from render import RenderJob  # noqa: E402

PLT = "import matplotlib.pyplot as plt\n"
NP = PLT + "import numpy as np\n"
# a 400x400 px figure whose one axes fills it, data 0..10 on both sides: data (x, y) is pixel (40x, 400 - 40y)
FULL = NP + ("fig = plt.figure(figsize=(4, 4), dpi=100)\nax = fig.add_axes([0, 0, 1, 1])\n"
             "ax.set_xlim(0, 10)\nax.set_ylim(0, 10)\nax.axis('off')\n")
WARN_AS_ERROR = "import warnings\nwarnings.simplefilter('error')\n"  # a missing glyph is a UserWarning: fail on it
SV = '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '


# -- pixel checks ----------------------------------------------------------------------------------------------------
def rgb(png):
    """The picture as an H x W x 3 int array, composited on white (an SVG / transparent figure is RGBA)."""
    im = png_image(png).convert("RGBA")
    a = np.asarray(im).astype(int)
    alpha = a[..., 3:4] / 255.0
    return (a[..., :3] * alpha + 255 * (1 - alpha)).round().astype(int)


def near(px, colour, tol=40):
    """Mask of pixels within ``tol`` (per channel) of ``colour``."""
    return (np.abs(px - np.array(colour)) <= tol).all(axis=-1)


def box(mask):
    """(left, top, right, bottom) of a mask's true pixels (right / bottom inclusive), None for none."""
    ys, xs = np.nonzero(mask)
    return None if len(xs) == 0 else (int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max()))


def close_box(got, want, tol=6):
    assert got is not None and all(abs(g - w) <= tol for g, w in zip(got, want)), (got, want)


def count(px, colour, tol=40):
    return int(near(px, colour, tol).sum())


RED, GREEN, BLUE, BLACK, WHITE = (255, 0, 0), (0, 128, 0), (0, 0, 255), (0, 0, 0), (255, 255, 255)


def dark(px):
    return near(px, BLACK, 100)


# -- matplotlib ------------------------------------------------------------------------------------------------------
def _triangle(px):
    close_box(box(near(px, RED)), (40, 40, 360, 360))  # (1,1), (9,1), (5,9) in data units
    assert count(px, RED) > 0.4 * 320 * 320 / 2  # filled, not only an outline


def _circle(px):
    close_box(box(near(px, BLUE)), (100, 100, 300, 300), 3)  # radius 2.5 at (5, 5)
    assert abs(count(px, BLUE) - np.pi * 100 ** 2) < 0.03 * np.pi * 100 ** 2


def _left_red_right_blue(px):
    w = px.shape[1]
    assert count(px[:, : w // 2], RED) > 200 and count(px[:, w // 2:], RED) == 0
    assert count(px[:, w // 2:], BLUE) > 200 and count(px[:, : w // 2], BLUE) == 0


def _pie_shares(px):
    r, g, b = (count(px, c, 30) for c in (RED, (0, 255, 0), BLUE))
    total = r + g + b
    assert total > 0.6 * np.pi * 150 ** 2
    assert abs(r / total - 0.25) < 0.02 and abs(g / total - 0.25) < 0.02 and abs(b / total - 0.5) < 0.02


def _fill_lower_half(px):
    orange = near(px, (255, 165, 0), 30)
    close_box(box(orange), (0, 200, 399, 399), 3)
    assert orange[210:390, 10:390].all()


def _quadrants(px):
    # imshow [[red, green], [blue, white]] nearest, no axes: the array's top-left is the picture's top-left
    assert tuple(px[50, 50]) == RED and tuple(px[50, 350]) == (0, 255, 0)
    assert tuple(px[350, 50]) == BLUE and tuple(px[350, 350]) == WHITE


def _scatter_points(px):
    # green squares of side ~20 px centred at data (2, 2) and (8, 6): pixels (80, 320) and (320, 160)
    m = near(px, (0, 255, 0), 30)
    assert m[315:326, 75:86].all() and m[155:166, 315:326].all()
    assert m.sum() < 3 * 25 * 25


def _text_in_yellow_box(px):
    yellow = near(px, (255, 255, 0), 30)
    b = box(yellow)
    assert b is not None and b[0] < 200 < b[2] and b[1] < 200 < b[3]  # the box around the centred text
    inner = px[b[1]:b[3], b[0]:b[2]]
    assert dark(inner).sum() > 50  # the text inside it


def _has(*colours, least=100, tol=40):
    def check(px):
        for c in colours:
            assert count(px, c, tol) >= least, (c, count(px, c, tol))
    return check


def _ink(least=500):
    def check(px):
        assert dark(px).sum() >= least, dark(px).sum()
    return check


def _bars_heights(px):
    # bars of heights 2, 4, 8 (data) at x = 1, 4, 7 with width 2 on a 0..10 axes: tops at 400 - 40h
    m = near(px, BLUE)
    tops = [box(m[:, 40 * x + 10: 40 * (x + 2) - 10])[1] for x in (1, 4, 7)]
    assert all(abs(t - (400 - 40 * h)) <= 2 for t, h in zip(tops, (2, 4, 8))), tops


def _line_through(px):
    # a red line from data (0, 0) to (10, 10): the picture's diagonal, bottom-left to top-right
    m = near(px, RED)
    for x in (50, 200, 350):
        ys = np.nonzero(m[:, x])[0]
        assert len(ys) and abs(ys.mean() - (399 - x)) <= 3, (x, ys)


LEGIT_PY = {  # name: (code, (width, height), check of the picture)
    "polygon_triangle": (FULL + "from matplotlib.patches import Polygon\n"
                         "ax.add_patch(Polygon([(1, 1), (9, 1), (5, 9)], closed=True, color='red'))\n",
                         (400, 400), _triangle),
    "circle_patch_equal_aspect": (FULL + "ax.set_aspect('equal')\nax.add_patch(plt.Circle((5, 5), 2.5, color='blue'))\n",
                                  (400, 400), _circle),
    "line_diagonal": (FULL + "ax.plot([0, 10], [0, 10], color='red', lw=2)\n", (400, 400), _line_through),
    "bar_heights": (FULL + "ax.bar([2, 5, 8], [2, 4, 8], width=2, color='blue')\n", (400, 400), _bars_heights),
    "fill_between_lower_half": (FULL + "ax.fill_between([0, 10], [0, 0], [5, 5], color='orange')\n", (400, 400),
                                _fill_lower_half),
    "imshow_quadrants": ("import matplotlib.pyplot as plt\nimport numpy as np\n"
                         "fig = plt.figure(figsize=(4, 4), dpi=100)\nax = fig.add_axes([0, 0, 1, 1])\nax.axis('off')\n"
                         "a = np.array([[[255, 0, 0], [0, 255, 0]], [[0, 0, 255], [255, 255, 255]]], dtype=np.uint8)\n"
                         "ax.imshow(a, interpolation='nearest', aspect='auto')\n", (400, 400), _quadrants),
    "scatter_squares": (FULL + "ax.scatter([2, 8], [2, 6], s=400, marker='s', color='lime', linewidths=0)\n",
                        (400, 400), _scatter_points),
    "pie_shares": ("import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(4, 4), dpi=100)\n"
                   "ax = fig.add_axes([0, 0, 1, 1])\nax.pie([1, 1, 2], colors=['red', 'lime', 'blue'], startangle=90)\n"
                   "ax.axis('equal')\n", (400, 400), _pie_shares),
    "text_with_bbox": (FULL + "ax.text(5, 5, 'x = 3', ha='center', va='center', fontsize=20, "
                       "bbox=dict(boxstyle='round', facecolor='yellow', edgecolor='black'))\n", (400, 400),
                       _text_in_yellow_box),
    "subplots_left_right": (NP + "fig, (a, b) = plt.subplots(1, 2, figsize=(8, 3))\n"
                            "a.plot([0, 1], [0, 1], color='red')\nb.plot([0, 1], [1, 0], color='blue')\n"
                            "a.set_title('left')\nb.set_title('right')\nfig.tight_layout()\n", (800, 300),
                            _left_red_right_blue),
    "angle_arc_mathtext": (PLT + "from matplotlib.patches import Arc, Polygon\nfig, ax = plt.subplots(figsize=(5, 4))\n"
                           "A, B, C = (0, 0), (4, 0), (1, 2.5)\nax.add_patch(Polygon([A, B, C], fill=False, ec='k'))\n"
                           "ax.add_patch(Arc(A, 1.2, 1.2, theta1=0, theta2=68.2, color='red', lw=2))\n"
                           "ax.text(0.7, 0.25, r'$\\angle BAC = 68.2^\\circ$', fontsize=12)\n"
                           "for name, (x, y) in zip('ABC', (A, B, C)):\n    ax.text(x, y - 0.3, name, ha='center')\n"
                           "ax.axis('equal')\nax.axis('off')\n", (500, 400), _has(RED, least=40)),
    "mathtext_frac_sqrt": (PLT + "plt.figure(figsize=(4, 2))\nplt.axis('off')\n"
                           "plt.text(0.1, 0.5, r'$x = \\frac{1}{2}\\sqrt{3} + \\pi r^2 \\leq \\alpha_{i}$', "
                           "fontsize=18)\n", (400, 200), _ink(300)),
    "annotate_arrow": (PLT + "fig, ax = plt.subplots(figsize=(4, 3))\nax.plot([0, 1, 2, 3], [0, 3, 1, 2], 'k-')\n"
                       "ax.annotate('maximum', xy=(1, 3), xytext=(2, 3.5), "
                       "arrowprops=dict(arrowstyle='->', color='green', lw=2))\nax.set_ylim(0, 4)\n", (400, 300),
                       _has(GREEN, least=30)),
    "bar_chart_two_series_legend": (NP + "x = np.arange(4)\nfig, ax = plt.subplots(figsize=(6, 4))\n"
                                    "ax.bar(x - 0.2, [3, 5, 2, 6], 0.4, label='2023', color='tab:blue')\n"
                                    "ax.bar(x + 0.2, [4, 4, 3, 5], 0.4, label='2024', color='tab:orange')\n"
                                    "ax.set_xticks(x)\nax.set_xticklabels(['Q1', 'Q2', 'Q3', 'Q4'])\nax.legend()\n"
                                    "ax.set_ylabel('Sales (k$)')\nax.set_title('Quarterly sales')\n", (600, 400),
                                    _has((31, 119, 180), (255, 127, 14), least=2000, tol=10)),
    "histogram_seeded": (NP + "data = np.random.normal(0, 1, 1000)\nplt.hist(data, bins=20, color='purple', "
                         "edgecolor='black')\nplt.xlabel('value')\nplt.ylabel('count')\n", (640, 480),
                         _has((128, 0, 128), least=5000, tol=20)),
    "line_chart_legend_grid": (NP + "x = np.linspace(0, 2 * np.pi, 100)\nplt.plot(x, np.sin(x), 'r-', label='sin')\n"
                               "plt.plot(x, np.cos(x), 'b--', label='cos')\nplt.legend(loc='upper right')\n"
                               "plt.grid(True)\nplt.title('Trig functions')\n", (640, 480),
                               _has(RED, BLUE, least=300)),
    "table_axis_off": (PLT + "fig, ax = plt.subplots(figsize=(4, 2))\nax.axis('off')\n"
                       "t = ax.table(cellText=[['1', '2'], ['3', '4']], colLabels=['a', 'b'], rowLabels=['x', 'y'], "
                       "loc='center', cellColours=[['#ff0000', 'w'], ['w', 'w']])\nt.set_fontsize(14)\n", (400, 200),
                       _has(RED, least=200)),
    "polar_circle": (NP + "fig = plt.figure(figsize=(4, 4))\nax = fig.add_subplot(projection='polar')\n"
                     "t = np.linspace(0, 2 * np.pi, 200)\nax.plot(t, np.ones_like(t), color='red', lw=3)\n"
                     "ax.set_rmax(1.5)\n", (400, 400), _has(RED, least=500)),
    "surface_3d": (NP + "from mpl_toolkits.mplot3d import Axes3D\nfig = plt.figure(figsize=(5, 4))\n"
                   "ax = fig.add_subplot(111, projection='3d')\nX, Y = np.meshgrid(np.linspace(-2, 2, 30), "
                   "np.linspace(-2, 2, 30))\nax.plot_surface(X, Y, np.exp(-X ** 2 - Y ** 2), cmap='viridis')\n"
                   "ax.set_xlabel('x')\nax.set_ylabel('y')\nax.set_zlabel('z')\n", (500, 400), _ink(300)),
    "gridspec_layout": (NP + "import matplotlib.gridspec as gridspec\nfig = plt.figure(figsize=(6, 4))\n"
                        "gs = gridspec.GridSpec(2, 2, figure=fig)\nax1 = fig.add_subplot(gs[0, :])\n"
                        "ax1.plot([1, 2, 3], color='red')\nax2 = fig.add_subplot(gs[1, 0])\n"
                        "ax2.bar([1, 2], [3, 1], color='blue')\nax3 = fig.add_subplot(gs[1, 1])\n"
                        "ax3.scatter([1, 2], [2, 1], color='green')\n", (600, 400), _has(RED, BLUE, GREEN, least=20)),
    "imshow_colorbar": (NP + "a = np.arange(25).reshape(5, 5)\nplt.imshow(a, cmap='viridis')\nplt.colorbar(label='v')\n"
                        "plt.title('heat map')\n", (640, 480), _has((68, 1, 84), (253, 231, 37), least=1000, tol=15)),
    "large_figure_high_dpi": (NP + "fig, ax = plt.subplots(figsize=(12, 8), dpi=200)\n"
                              "x = np.linspace(0, 10, 500)\nax.plot(x, np.sin(x), color='red', lw=3)\n"
                              "ax.set_title('big')\n", (2400, 1600), _has(RED, least=5000)),
    "savefig_tight_then_close": (NP + "plt.figure(figsize=(3, 2))\nplt.bar(['a', 'b'], [1, 2], color='blue')\n"
                                 "plt.savefig('chart.png', bbox_inches='tight')\nplt.close()\n", None,
                                 _has(BLUE, least=1000)),
    "show_only": (NP + "plt.figure(figsize=(3, 2))\nplt.plot([0, 1], [1, 0], color='blue')\nplt.show()\n",
                  (300, 200), _has(BLUE, least=100)),
    "savefig_out_png_transparent": (PLT + "plt.figure(figsize=(2, 2))\nplt.plot([0, 1], color='red')\n"
                                    "plt.savefig('out.png', transparent=True)\nplt.close('all')\n", (200, 200),
                                    _has(RED, least=50)),
    "unicode_labels_in_dejavu": (WARN_AS_ERROR + PLT + "plt.figure(figsize=(4, 3))\n"
                                 "plt.title('Angle θ = 30°, π ≈ 3.14, x ≤ 5, √2, ∠ABC, △')\n"
                                 "plt.xlabel('Température (°C)', fontweight='bold')\n"
                                 "plt.ylabel('Höhe', fontstyle='italic')\nplt.plot([1, 2])\n", (400, 300), _ink(300)),
    "bold_italic_serif_mono": (WARN_AS_ERROR + PLT + "plt.figure(figsize=(4, 2))\nplt.axis('off')\n"
                               "plt.text(0, 0.7, 'Bold', fontweight='bold', fontsize=16)\n"
                               "plt.text(0, 0.4, 'Italic serif', fontstyle='italic', family='serif', fontsize=16)\n"
                               "plt.text(0, 0.1, 'mono 123', family='monospace', fontsize=16)\n", (400, 200), _ink(300)),
    "style_ggplot_and_rcparams": (NP + "plt.style.use('ggplot')\nplt.rcParams.update({'font.size': 12, "
                                  "'axes.titleweight': 'bold'})\nplt.plot([1, 3, 2], color='red')\nplt.title('t')\n",
                                  (640, 480), _has(RED, least=200)),
    "style_seaborn_v0_8_whitegrid": (NP + "plt.style.use('seaborn-v0_8-whitegrid')\nplt.bar(['a', 'b'], [1, 2], "
                                     "color='blue')\n", (640, 480), _has(BLUE, least=2000)),
    "contour_with_labels": (NP + "x, y = np.meshgrid(np.linspace(-3, 3, 60), np.linspace(-3, 3, 60))\n"
                            "cs = plt.contour(x, y, x ** 2 + y ** 2, levels=[1, 4, 9], colors='red')\n"
                            "plt.clabel(cs, inline=True, fontsize=8)\nplt.gca().set_aspect('equal')\n", (640, 480),
                            _has(RED, least=300)),
    "errorbar_step_stem": (NP + "fig, axs = plt.subplots(1, 3, figsize=(9, 3))\n"
                           "axs[0].errorbar([1, 2, 3], [2, 3, 1], yerr=[0.2, 0.4, 0.1], fmt='o', color='red', "
                           "capsize=4)\naxs[1].step([1, 2, 3, 4], [1, 3, 2, 4], color='blue')\n"
                           "axs[2].stem([1, 2, 3], [3, 1, 2])\n", (900, 300), _has(RED, BLUE, least=50)),
    "quiver_vector_field": (NP + "x, y = np.meshgrid(np.arange(-2, 3), np.arange(-2, 3))\n"
                            "plt.quiver(x, y, -y, x, color='green')\nplt.axis('equal')\n", (640, 480),
                            _has(GREEN, least=300)),
    "timeline_dates": (PLT + "import datetime as dt\nimport matplotlib.dates as mdates\n"
                       "days = [dt.date(2024, 1, d) for d in (1, 8, 15, 22)]\nfig, ax = plt.subplots(figsize=(6, 2))\n"
                       "ax.plot(days, [0, 0, 0, 0], 'o-', color='red')\n"
                       "for d, s in zip(days, 'ABCD'):\n    ax.annotate(s, (d, 0), xytext=(0, 10), "
                       "textcoords='offset points', ha='center')\n"
                       "ax.xaxis.set_major_formatter(mdates.DateFormatter('%b %d'))\nax.get_yaxis().set_visible(False)\n",
                       (600, 200), _has(RED, least=100)),
    "twinx_axes": (NP + "fig, ax = plt.subplots()\nax.plot([1, 2, 3], [1, 4, 9], color='red')\nax2 = ax.twinx()\n"
                   "ax2.plot([1, 2, 3], [3, 2, 1], color='blue')\n", (640, 480), _has(RED, BLUE, least=100)),
    "patches_shapes_equal": (PLT + "import matplotlib.patches as mp\nfig, ax = plt.subplots(figsize=(5, 5))\n"
                             "ax.add_patch(mp.Rectangle((0, 0), 2, 1, fc='red'))\n"
                             "ax.add_patch(mp.Ellipse((4, 1), 2, 1, fc='blue'))\n"
                             "ax.add_patch(mp.RegularPolygon((2, 4), 6, radius=1, fc='green'))\n"
                             "ax.add_patch(mp.FancyArrowPatch((0, 3), (4, 3), arrowstyle='-|>', mutation_scale=20))\n"
                             "ax.set_xlim(-1, 6)\nax.set_ylim(-1, 6)\nax.set_aspect('equal')\nax.grid(True)\n",
                             (500, 500), _has(RED, BLUE, GREEN, least=1000)),
    "pandas_dataframe_plot": (PLT + "import pandas as pd\ndf = pd.DataFrame({'year': [2020, 2021, 2022], "
                              "'sales': [3, 5, 4]})\nax = df.plot(x='year', y='sales', kind='bar', color='red', "
                              "legend=False)\nax.set_ylabel('sales')\n", (640, 480), _has(RED, least=2000)),
    "networkx_graph": (PLT + "import networkx as nx\nG = nx.Graph([(1, 2), (2, 3), (3, 1), (3, 4)])\n"
                       "pos = {1: (0, 0), 2: (1, 0), 3: (0.5, 1), 4: (1.5, 1.2)}\nplt.figure(figsize=(4, 4))\n"
                       "nx.draw(G, pos, with_labels=True, node_color='red', node_size=500)\n", (400, 400),
                       _has(RED, least=1000)),
    "xkcd_style_font_fallback": (NP + "with plt.xkcd():\n    plt.figure(figsize=(4, 3))\n"
                                 "    plt.plot([1, 2, 3], [1, 3, 2], color='red')\n    plt.title('sketch')\n",
                                 (400, 300), _has(RED, least=100)),
    "axes_through_origin_spines": (NP + "fig, ax = plt.subplots(figsize=(4, 4))\nx = np.linspace(-2, 2, 100)\n"
                                   "ax.plot(x, x ** 2 - 1, color='red')\nax.spines['left'].set_position('zero')\n"
                                   "ax.spines['bottom'].set_position('zero')\nax.spines['right'].set_visible(False)\n"
                                   "ax.spines['top'].set_visible(False)\nax.set_xlabel('$x$', loc='right')\n",
                                   (400, 400), _has(RED, least=200)),
    "cjk_labels_no_font": (PLT + "plt.figure(figsize=(3, 2))\nplt.title('面积 三角形')\nplt.plot([1, 2])\n",
                           (300, 200), _ink(100)),
    "sympy_numbers_to_plot": (NP + "import sympy as sp\nx = sp.symbols('x')\nf = sp.lambdify(x, sp.sin(x) * x, 'numpy')\n"
                              "xs = np.linspace(0, 6, 100)\nplt.plot(xs, f(xs), color='red')\n"
                              "plt.title('$' + sp.latex(sp.sin(x) * x) + '$')\n", (640, 480), _has(RED, least=200)),
}



# -- the code's own savefig of the figure it leaves open --------------------------------------------------------------
# The commonest ending of a coder's program is ``plt.savefig('chart.png', dpi=..., bbox_inches='tight')`` with the
# figure left open (or ``plt.show()``, which Agg ignores). The worker re-saved the open figure at its own dpi without
# the code's options: a legend or note placed outside the axes, which the tight box was there to keep, was cut off.
def _legend_outside_kept(px):
    swatch = box(near(px, (0, 255, 0), 30))  # the legend's, right of the axes
    assert swatch is not None and count(px, RED) > 100
    label = dark(px[swatch[1] - 6: swatch[3] + 6, swatch[2] + 3:])  # "growth rate", right of the swatch
    assert label.sum() > 100 and label.any(axis=0).sum() > 50, (label.sum(), label.any(axis=0).sum())


LEGEND_OUT = (PLT + "from matplotlib.patches import Patch\nfig, ax = plt.subplots(figsize=(4, 3))\n"
              "ax.plot([0, 1], [0, 1], color='red')\n"
              "ax.legend(handles=[Patch(color='lime', label='growth rate')], bbox_to_anchor=(1.02, 1), "
              "loc='upper left')\n")
SAVED_PY = {  # name: (code, (width, height) or None: not the figure's, check)
    "tight_legend_outside_left_open": (LEGEND_OUT + "plt.savefig('chart.png', bbox_inches='tight')\n", None,
                                       _legend_outside_kept),
    "tight_legend_outside_then_show": (LEGEND_OUT + "plt.savefig('chart.png', bbox_inches='tight', dpi=120)\n"
                                       "plt.show()\n", None, _legend_outside_kept),
    "dpi_of_the_save": (NP + "plt.figure(figsize=(3, 2))\nplt.plot([0, 1], [0, 1], color='red')\n"
                        "plt.savefig('figure.png', dpi=150)\nplt.show()\n", (450, 300), _has(RED, least=100)),
    "name_without_suffix": (NP + "plt.figure(figsize=(3, 2))\nplt.plot([0, 1], color='red')\n"
                            "plt.savefig('figure', dpi=50)\n", (150, 100), _has(RED, least=20)),
    "pathlib_path_in_subdir": (NP + "import pathlib\np = pathlib.Path('figs')\np.mkdir()\n"
                               "plt.figure(figsize=(3, 2))\nplt.plot([0, 1], color='red')\n"
                               "plt.savefig(p / 'a.png', dpi=50)\n", (150, 100), _has(RED, least=20)),
    "then_svg_copy_too": (NP + "plt.figure(figsize=(3, 2))\nplt.plot([0, 1], color='red')\n"
                          "plt.savefig('a.png', dpi=50)\nplt.savefig('a.svg')\n", (150, 100), _has(RED, least=20)),
    # changed after its save: the figure as it is now, at its own dpi (the title drawn)
    "changed_after_save": (NP + "plt.figure(figsize=(3, 2))\nplt.plot([0, 1], color='red')\n"
                           "plt.savefig('a.png', dpi=50)\nplt.plot([1, 0], color='blue')\n", (300, 200),
                           _has(RED, BLUE, least=50)),
    "changed_and_drawn_after_save": (NP + "fig = plt.figure(figsize=(3, 2))\nplt.plot([0, 1], color='red')\n"
                                     "plt.savefig('a.png', dpi=50)\nplt.plot([1, 0], color='blue')\n"
                                     "fig.canvas.draw()\n", (300, 200), _has(RED, BLUE, least=50)),
    "changed_then_saved_as_svg": (NP + "plt.figure(figsize=(3, 2))\nplt.plot([0, 1], color='red')\n"
                                  "plt.savefig('a.png', dpi=50)\nplt.plot([1, 0], color='blue')\n"
                                  "plt.savefig('a.svg')\n", (300, 200), _has(RED, BLUE, least=50)),
    # another figure current: that one
    "other_figure_current": (NP + "plt.figure(figsize=(3, 2))\nplt.plot([0, 1], color='red')\n"
                             "plt.savefig('a.png', dpi=50)\nplt.figure(figsize=(2, 2))\n"
                             "plt.plot([1, 0], color='blue')\n", (200, 200), _has(BLUE, least=50)),
    # a save past max_side falls back to the figure at its own dpi, as before (not a refusal)
    "save_past_max_side_open": (NP + "plt.figure(figsize=(16, 10))\nplt.plot([0, 1], color='red')\n"
                                "plt.savefig('big.png', dpi=300)\n", (1600, 1000), _has(RED, least=200)),
    "save_to_bytesio": (NP + "import io\nplt.figure(figsize=(3, 2))\nplt.plot([0, 1], color='red')\n"
                        "plt.savefig(io.BytesIO(), format='png', dpi=50)\n", (300, 200), _has(RED, least=50)),
}


# -- SVG -------------------------------------------------------------------------------------------------------------
def _svg_triangle(px):
    close_box(box(near(px, RED)), (20, 20, 180, 180), 2)  # points 20,180 180,180 100,20


def _half_disc(px):
    # path M 50 100 A 50 50 0 0 1 150 100 Z: the upper half of a disc of radius 50 at (100, 100)
    close_box(box(near(px, BLUE)), (50, 50, 150, 100), 2)
    assert abs(count(px, BLUE) - np.pi * 50 ** 2 / 2) < 0.04 * np.pi * 50 ** 2 / 2


def _viewbox_scaled(px):
    # viewBox 0 0 100 50 drawn at 400 x 200: rect 10,10 20x10 -> 40,40 80x40
    close_box(box(near(px, RED)), (40, 40, 119, 79), 1)


def _gradient_ends(px):
    # left-to-right red -> blue over a 200 px wide rect
    left, mid, right = px[50, 2], px[50, 100], px[50, 197]
    assert left[0] > 240 and left[2] < 15 and right[2] > 240 and right[0] < 15, (left, right)
    assert 100 < mid[0] < 155 and 100 < mid[2] < 155, mid


def _css_classes(px):
    close_box(box(near(px, RED)), (10, 10, 59, 59), 1)
    close_box(box(near(px, BLUE)), (70, 10, 119, 59), 1)


def _transform_group(px):
    # translate(100, 50) rotate(90) on a 40 x 10 rect at the origin: x 90..100, y 50..90
    close_box(box(near(px, GREEN, 30)), (90, 50, 99, 89), 1)


def _use_symbol(px):
    # a symbol of viewBox 0 0 10 10 (a red square 0..10) used at (20, 20) 40x40 and (120, 20) 40x40
    m = near(px, RED)
    close_box(box(m[:, :100]), (20, 20, 59, 59), 1)
    close_box(box(m[:, 100:]), (20, 20, 59, 59), 1)


def _em_units(px):
    # font-size 20 on the group: a rect 2em x 1em at 1em, 1em -> 20..60 x 20..40
    close_box(box(near(px, BLUE)), (20, 20, 59, 39), 1)


def _percent(px):
    close_box(box(near(px, RED)), (20, 10, 179, 89), 1)  # 10%..90% of 200 x 100


def _dashes(px):
    # a 200 px line with dasharray 10 10: ten dashes
    row = near(px, BLACK, 60)[50]
    runs = np.count_nonzero(np.diff(row.astype(int)) == 1) + int(row[0])
    assert runs == 10, runs


def _opacity(px):
    r, g, b = px[50, 50]  # red at opacity 0.5 on white
    assert r > 245 and 120 < g < 135 and 120 < b < 135, (r, g, b)
    r, g, b = px[50, 150]  # blue at fill-opacity 0.25 over red: 0.25 blue + 0.75 red
    assert 185 < r < 196 and g < 5 and 59 < b < 70, (r, g, b)


def _clip_circle(px):
    # a 200 x 200 red rect clipped to the circle r=50 at (100, 100)
    close_box(box(near(px, RED)), (50, 50, 150, 150), 2)
    assert abs(count(px, RED) - np.pi * 2500) < 0.04 * np.pi * 2500


def _text_anchor_middle(px):
    # text-anchor middle at x=100: the ink is centred on it
    b = box(dark(px))
    assert b is not None and abs((b[0] + b[2]) / 2 - 100) <= 4 and b[2] - b[0] > 60, b


def _text_anchor_end(px):
    b = box(dark(px))
    assert b is not None and abs(b[2] - 190) <= 4 and b[0] > 60, b


def _radial(px):
    centre, edge = px[100, 100], px[100, 15]  # white at the centre, near blue by the rim (r 85 of 90)
    assert centre.min() > 245 and edge[2] > 240 and edge[0] < 60, (centre, edge)


def _pattern_stripes(px):
    m = near(px, RED)
    assert 0.4 < m[0:100, 0:100].mean() < 0.6  # stripes of 5 px every 10 px
    assert np.count_nonzero(np.diff(m[50, :100].astype(int)) == 1) >= 9


def _marker_end(px):
    # a line 20,50 -> 150,50 with a red triangular marker at its end: red ink right of 140
    b = box(near(px, RED))
    assert b is not None and b[0] >= 140 and b[2] <= 175 and b[1] < 50 < b[3], b


def _aspect_meet(px):
    # viewBox 0 0 100 100 into 300 x 100, xMidYMid meet: a 100 px square centred: x 100..200
    close_box(box(near(px, RED)), (100, 0, 199, 99), 1)


def _nested_svg(px):
    # an inner svg at x=100 y=0 size 100x100 with viewBox 0 0 10 10: its rect 0..5 -> 100..150
    close_box(box(near(px, BLUE)), (100, 0, 149, 49), 1)


def _colours(px):
    for x, c in ((10, (255, 0, 0)), (30, (0, 128, 0)), (50, (0, 0, 255)), (70, (255, 170, 0)), (90, (128, 0, 128))):
        assert tuple(px[10, x]) == c, (x, tuple(px[10, x]), c)


def _css4_colours(px):
    # what a browser draws on white: hsl() was black, rgb() with spaces a crash, #rrggbbaa / #rgba opaque
    want = ((255, 0, 0), (0, 128, 0), (0, 0, 255), (127, 127, 255), (255, 127, 127), (255, 119, 119), (0, 255, 255),
            (38, 128, 217))
    got = [tuple(int(v) for v in px[10, 10 + 20 * i]) for i in range(len(want))]
    assert all(abs(g - w) <= 2 for gc, wc in zip(got, want) for g, w in zip(gc, wc)), got


def _current_color(px):
    close_box(box(near(px, RED)), (10, 10, 49, 49), 1)


def _units_pt_in(px):
    # 1in = 96 px, 72pt = 96 px: width 1in = 96, a rect of 36pt = 48 px
    close_box(box(near(px, BLUE)), (0, 0, 47, 47), 1)


S200 = SV + 'width="200" height="200">'
S100 = SV + 'width="200" height="100">'
LEGIT_SVG = {  # name: (text, (width, height), check)
    "polygon_triangle": (S200 + '<polygon points="20,180 180,180 100,20" fill="red"/></svg>', (200, 200),
                         _svg_triangle),
    "path_arc_half_disc": (S200 + '<path d="M 50 100 A 50 50 0 0 1 150 100 Z" fill="blue"/></svg>', (200, 200),
                           _half_disc),
    "path_curves": (S200 + '<path d="M10 180 C 40 10, 65 10, 95 180 S 150 350, 180 80 Q 190 40 195 10" '
                    'stroke="red" stroke-width="3" fill="none"/></svg>', (200, 200), _has(RED, least=300)),
    "viewbox_scaled": (SV + 'width="400" height="200" viewBox="0 0 100 50"><rect x="10" y="10" width="20" '
                       'height="10" fill="red"/></svg>', (400, 200), _viewbox_scaled),
    "linear_gradient": (S100 + '<defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="0"><stop offset="0" '
                        'stop-color="red"/><stop offset="1" stop-color="blue"/></linearGradient></defs>'
                        '<rect width="200" height="100" fill="url(#g)"/></svg>', (200, 100), _gradient_ends),
    "radial_gradient": (S200 + '<defs><radialGradient id="r" cx="50%" cy="50%" r="50%"><stop offset="0%" '
                        'stop-color="#fff"/><stop offset="100%" stop-color="#00f"/></radialGradient></defs>'
                        '<circle cx="100" cy="100" r="90" fill="url(#r)"/></svg>', (200, 200),
                        _radial),
    "pattern_stripes": (S100 + '<defs><pattern id="p" width="10" height="10" patternUnits="userSpaceOnUse">'
                        '<rect width="5" height="10" fill="red"/></pattern></defs><rect width="200" height="100" '
                        'fill="url(#p)"/></svg>', (200, 100), _pattern_stripes),
    "marker_end_arrow": (S100 + '<defs><marker id="a" markerWidth="10" markerHeight="10" refX="0" refY="5" '
                         'orient="auto" markerUnits="userSpaceOnUse"><path d="M0,0 L10,5 L0,10 z" fill="red"/>'
                         '</marker></defs><line x1="20" y1="50" x2="150" y2="50" stroke="black" stroke-width="2" '
                         'marker-end="url(#a)"/></svg>', (200, 100), _marker_end),
    "use_symbol_viewbox": (S100 + '<defs><symbol id="s" viewBox="0 0 10 10"><rect width="10" height="10" '
                           'fill="red"/></symbol></defs><use href="#s" x="20" y="20" width="40" height="40"/>'
                           '<use xlink:href="#s" x="120" y="20" width="40" height="40"/></svg>', (200, 100),
                           _use_symbol),
    "group_transform": (S200 + '<g transform="translate(100, 50) rotate(90)"><rect width="40" height="10" '
                        'fill="green"/></g></svg>', (200, 200), _transform_group),
    "css_style_classes": (S100 + '<style>.a { fill: red; } .b { fill: blue; stroke: none }</style>'
                          '<rect class="a" x="10" y="10" width="50" height="50"/>'
                          '<rect class="b" x="70" y="10" width="50" height="50"/></svg>', (200, 100), _css_classes),
    "em_units": (S100 + '<g font-size="20"><rect x="1em" y="1em" width="2em" height="1em" fill="blue"/></g></svg>',
                 (200, 100), _em_units),
    "percent_lengths": (S100 + '<rect x="10%" y="10%" width="80%" height="80%" fill="red"/></svg>', (200, 100),
                        _percent),
    "stroke_dasharray": (S100 + '<line x1="0" y1="50" x2="200" y2="50" stroke="black" stroke-width="4" '
                         'stroke-dasharray="10 10"/></svg>', (200, 100), _dashes),
    "opacity_blending": (S100 + '<rect x="0" y="0" width="100" height="100" fill="red" opacity="0.5"/>'
                         '<rect x="100" y="0" width="100" height="100" fill="red"/>'
                         '<rect x="100" y="0" width="100" height="100" fill="blue" fill-opacity="0.25"/></svg>',
                         (200, 100), _opacity),
    "clip_path_circle": (S200 + '<defs><clipPath id="c"><circle cx="100" cy="100" r="50"/></clipPath></defs>'
                         '<rect width="200" height="200" fill="red" clip-path="url(#c)"/></svg>', (200, 200),
                         _clip_circle),
    "text_anchor_middle": (S100 + '<text x="100" y="60" text-anchor="middle" font-family="DejaVu Sans" '
                                  'font-size="20">x2 + y = 10</text></svg>', (200, 100), _text_anchor_middle),
    "text_anchor_end_bold": (S100 + '<text x="190" y="60" text-anchor="end" font-weight="bold" '
                             'font-size="20">Total: 42</text></svg>', (200, 100), _text_anchor_end),
    "text_unicode_math": (S100 + '<text x="10" y="60" font-size="18" font-style="italic">∠ABC = 30°, π ≤ 4</text>'
                          '</svg>', (200, 100), _ink(150)),
    "preserve_aspect_meet": (SV + 'width="300" height="100" viewBox="0 0 100 100" '
                             'preserveAspectRatio="xMidYMid meet"><rect width="100" height="100" fill="red"/></svg>',
                             (300, 100), _aspect_meet),
    "nested_svg_viewport": (S100 + '<svg x="100" y="0" width="100" height="100" viewBox="0 0 10 10">'
                            '<rect width="5" height="5" fill="blue"/></svg></svg>', (200, 100), _nested_svg),
    "colour_syntaxes": (S100 + '<rect x="0" width="20" height="20" fill="#f00"/><rect x="20" width="20" height="20" '
                        'fill="rgb(0,128,0)"/><rect x="40" width="20" height="20" style="fill: blue"/>'
                        '<rect x="60" width="20" height="20" fill="#ffaa00"/><rect x="80" width="20" height="20" '
                        'fill="purple"/></svg>', (200, 100), _colours),
    "css4_colour_forms": (SV + 'width="200" height="100">' + "".join(
        f'<rect x="{20 * i}" width="20" height="20" fill="{c}"/>' for i, c in enumerate((
            "hsl(0, 100%, 50%)", "hsl(120deg 100% 25%)", "rgb(0 0 255)", "hsla(240, 100%, 50%, 0.5)", "#ff000080",
            "#f008", "hsl(0.5turn 100 50)", "hsl(210, 70%, 50%)"))) + "</svg>", (200, 100), _css4_colours),
    "current_color": (S100 + '<g color="red"><rect x="10" y="10" width="40" height="40" fill="currentColor"/></g>'
                      '</svg>', (200, 100), _current_color),
    "units_pt_in": (SV + 'width="1in" height="72pt"><rect width="36pt" height="0.5in" fill="blue"/></svg>', (96, 96),
                    _units_pt_in),
    "chart_axes_polyline_labels": (SV + 'width="300" height="200" viewBox="0 0 300 200"><rect width="300" '
                                   'height="200" fill="white"/><line x1="40" y1="170" x2="280" y2="170" '
                                   'stroke="black"/><line x1="40" y1="170" x2="40" y2="20" stroke="black"/>'
                                   '<polyline points="40,150 100,100 160,120 220,60 280,40" fill="none" stroke="red" '
                                   'stroke-width="2"/><g font-size="12" text-anchor="middle"><text x="100" y="185">1'
                                   '</text><text x="160" y="185">2</text><text x="220" y="185">3</text></g>'
                                   '<text x="150" y="15" text-anchor="middle" font-size="14">Growth</text></svg>',
                                   (300, 200), _has(RED, least=200)),
    "ellipse_line_circle_stroke": (S200 + '<ellipse cx="100" cy="100" rx="80" ry="40" fill="none" stroke="blue" '
                                   'stroke-width="3"/><circle cx="100" cy="100" r="5" fill="red"/>'
                                   '<line x1="20" y1="100" x2="180" y2="100" stroke="black"/></svg>', (200, 200),
                                   lambda px: close_box(box(near(px, BLUE)), (18, 58, 181, 141), 2)),
    "text_path": (S100 + '<defs><path id="curve" d="M 10 80 Q 100 10 190 80"/></defs><text font-size="14">'
                  '<textPath href="#curve">along the curve</textPath></text></svg>', (200, 100), _ink(100)),
    "mask_luminance": (S100 + '<defs><mask id="m"><rect width="100" height="100" fill="white"/></mask></defs>'
                       '<rect width="200" height="100" fill="red" mask="url(#m)"/></svg>', (200, 100),
                       lambda px: close_box(box(near(px, RED)), (0, 0, 99, 99), 1)),
}


# -- rendering once, checking each -----------------------------------------------------------------------------------
CASES = {**{f"py_{n}": ("python", c, s, f) for n, (c, s, f) in LEGIT_PY.items()},
         **{f"saved_{n}": ("python", c, s, f) for n, (c, s, f) in SAVED_PY.items()},
         **{f"svg_{n}": ("svg", c, s, f) for n, (c, s, f) in LEGIT_SVG.items()}}


@pytest.fixture(scope="module")
def rendered():
    pool = start_render_pool(workers=2)
    try:
        results = pool.render_many([RenderJob(c, lang) for lang, c, _, _ in CASES.values()], timeout_s=30.0)
    finally:
        pool.close()
    got = dict(zip(CASES, results))
    times = sorted(r.elapsed_s for r in results)
    print(f"legit corpus: {len(times)} renders, median {statistics.median(times):.2f} s, max {times[-1]:.2f} s "
          f"({max(got, key=lambda n: got[n].elapsed_s)})")
    return got


def test_the_corpus_is_large():
    assert len(LEGIT_PY) >= 20 and len(LEGIT_SVG) >= 20


@pytest.mark.parametrize("name", list(CASES))
def test_a_legitimate_program_renders_the_right_picture(rendered, name):
    _, _, size, check = CASES[name]
    r = rendered[name]
    assert r.ok, (r.error_kind, r.message)
    if size is not None:
        assert (r.width, r.height) == size
    check(rgb(r.png))


# -- source sizes: an SVG job is bounded by max_svg_bytes, as documented, not by the python code's character cap ------
MANY_SHAPES = ('<svg xmlns="http://www.w3.org/2000/svg" width="800" height="400"><rect width="800" height="400" '
               'fill="white"/>' + "".join(f'<circle cx="{4 + 8 * (i % 100)}" cy="{4 + 8 * (i // 100)}" r="3" '
                                          'fill="red" stroke="none"/>' for i in range(5000)) + "</svg>")


def test_an_svg_past_the_code_char_cap_but_within_max_svg_bytes_renders():
    from render.types import RenderLimits

    limits = RenderLimits()
    assert limits.max_code_chars < len(MANY_SHAPES) < limits.max_svg_bytes  # ~330,000 characters
    pool = start_render_pool(workers=1)
    try:
        r = pool.render(RenderJob(MANY_SHAPES, "svg"), timeout_s=30.0)
        past_svg = pool.render(RenderJob(MANY_SHAPES[:-6] + " " * limits.max_svg_bytes + "</svg>", "svg"), timeout_s=30)
        past_code = pool.render(RenderJob("x = 1\n" * (limits.max_code_chars // 6 + 1)), timeout_s=30.0)
    finally:
        pool.close()
    assert r.ok and (r.width, r.height) == (800, 400), (r.error_kind, r.message)
    px = rgb(r.png)
    assert count(px, RED) > 5000 * 20 and near(px, RED)[4, 4] and near(px, RED)[396, 796]  # 5000 dots, the last too
    assert (past_svg.error_kind, past_code.error_kind) == ("too_large", "too_large")
    assert "max_svg_bytes (1048576)" in past_svg.message and "max_code_chars (200000)" in past_code.message


# -- hostile programs against the code's-own-save path: each falls back to the figure saved by the worker ------------
SAVE = PLT + "import os\nfig = plt.figure(figsize=(3, 2))\nplt.plot([0, 1], color='red')\nplt.savefig('c.png', dpi=50)\n"
HOSTILE_SAVES = {  # name: code; each must end ok, the figure at its own dpi (300 x 200), not the file the code left
    "swapped_for_a_link_to_a_tree_file": SAVE + "os.remove('c.png')\nos.symlink('/etc/hostname', 'c.png')\n",
    "swapped_for_a_fifo": SAVE + "os.remove('c.png')\nos.mkfifo('c.png')\n",
    "given_a_second_name": SAVE + "os.link('c.png', 'd.png')\n",
    "header_past_max_side": SAVE + "import struct, zlib\nihdr = struct.pack('>IIBBBBB', 100000, 100000, 8, 6, 0, 0, 0)\n"
                                   "open('c.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + struct.pack('>I', 13) + b'IHDR' + "
                                   "ihdr + struct.pack('>I', zlib.crc32(b'IHDR' + ihdr)))\n",
    "truncated_to_nothing": SAVE + "open('c.png', 'wb').close()\n",
    "removed": SAVE + "os.remove('c.png')\n",
    "replaced_by_a_directory": SAVE + "os.remove('c.png')\nos.mkdir('c.png')\n",
    "saved_then_figure_resized": SAVE + "fig.set_size_inches(3, 2)\nfig.set_dpi(100)\n",
}


def test_a_file_the_code_swapped_after_its_save_is_not_the_image():
    pool = start_render_pool(workers=1)
    try:
        rs = pool.render_many([RenderJob(c) for c in HOSTILE_SAVES.values()], timeout_s=30.0)
    finally:
        pool.close()
    got = {n: (r.ok, r.width, r.height, r.error_kind, r.message) for n, r in zip(HOSTILE_SAVES, rs)}
    assert all(g[:3] == (True, 300, 200) for g in got.values()), got
    assert all(count(rgb(r.png), RED) > 100 for r in rs)
