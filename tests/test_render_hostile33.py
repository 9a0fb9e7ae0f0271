"""render/: a thirty-third pass. First three gaps the last pass left:

1. A figure of no size was labelled by the path it took: a python job's figure at a NaN dpi was ``too_large``
   ("figure of nanxnan px exceeds 4096 px"), matplotlib's own refusal of a NaN / infinite figsize a ``crash``, a
   figure under one pixel a ``crash`` ("cannot write empty image"), an SVG's NaN / zero / negative size a ``crash``
   and its infinite one ``too_large``. One cause, one kind now: ``invalid_size`` (a new error kind), in both paths.
2. A chart saved only as ``.svgz`` (gzip SVG) was ``no_output``. It is drawn now as a ``.svg`` is: read whole (at
   most ``max_svg_bytes`` + 64 KiB), gunzipped in memory to at most ``max_svg_bytes`` + 1 bytes (a bomb is
   ``too_large``), then screened; cairosvg never reads gzip.
3. A chart saved only as PDF / EPS / PS stays refused (``no_output``: Ghostscript never runs), but the message said
   "the code drew no figure and wrote no out.png": it names the file now and says why it is not used; and an empty
   figure left after such a save (``savefig("c.eps"); plt.clf()``) was returned ``ok``, a blank canvas.

Then a corpus of ordinary plots and SVGs that must render, and hostile programs written against the svgz path, the
size checks and the document note, each pinned to its label with test_render_hostile21's host checks."""

import json
import os
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from conftest import drawn_pixels, ink_spreads, png_image  # noqa: E402
from render import RenderJob  # noqa: E402

TOKEN = "hostile33canary"
PLT = "import matplotlib.pyplot as plt\n"
NP = PLT + "import numpy as np\n"
DRAW = PLT + "plt.figure(figsize=(1, 1), dpi=50)\nplt.plot([1, 2])\n"
SVGV = '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
SVGH = SVGV + 'width="40" height="30">'
RECT_SVG = (SVGH + '<rect width="9" height="9"/></svg>').encode()
GZ = "import gzip\n"


def svgz(text, name="c.svgz"):
    """A python job writing the SVG ``text`` gzipped as ``name`` (and nothing else)."""
    return GZ + f"open({name!r}, 'wb').write(gzip.compress({text.encode()!r}))\n"


# -- legitimate programs a coder model plausibly writes: each must render, at the size given -----------------------
LEGIT_PYTHON = {
    "constrained_layout_subplots": (NP + "fig, axs = plt.subplots(2, 2, figsize=(6, 4), constrained_layout=True)\n"
        "for i, a in enumerate(axs.flat):\n    a.plot(np.arange(5), np.arange(5) * i)\n    a.set_title(f'Panel {i}')\n", (600, 400)),
    "tight_layout_fill_between": (NP + "x = np.linspace(0, 2 * np.pi, 100)\nfig, ax = plt.subplots(figsize=(5, 3))\n"
        "ax.fill_between(x, np.sin(x), np.cos(x), where=np.sin(x) > np.cos(x), color='orange', alpha=0.5, interpolate=True)\n"
        "ax.plot(x, np.sin(x), x, np.cos(x))\nfig.tight_layout()\n", (500, 300)),
    "table_of_values_axis_off": (PLT + "fig, ax = plt.subplots(figsize=(4, 2))\nax.axis('off')\n"
        "t = ax.table(cellText=[['x', 'f(x)'], ['1', '2'], ['2', '4']], cellLoc='center', loc='center')\n"
        "t.auto_set_font_size(False)\nt.set_fontsize(12)\nt.scale(1, 1.5)\n", (400, 200)),
    "hist_with_numpy_and_log_y": (NP + "rng = np.random.default_rng(7)\nvals = rng.exponential(2.0, 500)\n"
        "counts, edges, _ = plt.hist(vals, bins=np.arange(0, 15, 1), edgecolor='black')\nplt.yscale('log')\n"
        "plt.xlabel('value')\nplt.ylabel('count')\n", (640, 480)),
    "loglog_with_minor_grid": (NP + "x = np.logspace(-2, 2, 50)\nplt.loglog(x, 3 * x ** 1.5, 'o-')\n"
        "plt.grid(True, which='both', ls='--', lw=0.5)\nplt.semilogx()\n", (640, 480)),
    "geometry_triangle_angle_mathtext": (PLT + "from matplotlib.patches import Polygon, Arc\nfig, ax = plt.subplots(figsize=(4, 4))\n"
        "A, B, C = (0, 0), (4, 0), (1, 3)\nax.add_patch(Polygon([A, B, C], closed=True, fill=False, lw=2))\n"
        "ax.add_patch(Arc(B, 1.2, 1.2, angle=0, theta1=135, theta2=180, color='r'))\n"
        "for p, n in zip((A, B, C), 'ABC'):\n    ax.text(p[0], p[1] - 0.3, n, ha='center')\n"
        "ax.text(3.0, 0.3, r'$\\angle ABC = 45^\\circ$')\nax.set_aspect('equal')\nax.axis('off')\n"
        "ax.set_xlim(-1, 5)\nax.set_ylim(-1, 4)\n", (400, 400)),
    "circle_wedge_arrow_patches": (PLT + "import matplotlib.patches as mpatches\nfig, ax = plt.subplots(figsize=(5, 5))\n"
        "ax.add_patch(mpatches.Circle((0, 0), 1, fill=False))\n"
        "ax.add_patch(mpatches.Wedge((0, 0), 1, 0, 60, color='skyblue'))\n"
        "ax.add_patch(mpatches.FancyArrowPatch((0, 0), (0.5, 0.866), arrowstyle='-|>', mutation_scale=15))\n"
        "ax.plot([0, 1], [0, 0], 'k-')\nax.text(0.3, 0.1, r'$\\theta=60^\\circ$')\nax.set_xlim(-1.2, 1.2)\n"
        "ax.set_ylim(-1.2, 1.2)\nax.set_aspect('equal')\n", (500, 500)),
    "savefig_out_png_then_close": (NP + "plt.figure(figsize=(3, 3))\nplt.scatter([1, 2, 3], [3, 1, 2], s=[20, 50, 80])\n"
        "plt.savefig('out.png')\nplt.close()\n", (300, 300)),
    "savefig_bytesio_written_to_file": (PLT + "import io\nfig, ax = plt.subplots(figsize=(2, 2), dpi=100)\nax.bar([1, 2], [3, 4])\n"
        "buf = io.BytesIO()\nfig.savefig(buf, format='png')\nplt.close(fig)\nwith open('figure.png', 'wb') as f:\n"
        "    f.write(buf.getvalue())\n", (200, 200)),
    "use_agg_before_pyplot": ("import matplotlib\nmatplotlib.use('Agg')\n" + PLT +
        "plt.figure(figsize=(4, 2))\nplt.step([0, 1, 2, 3], [1, 3, 2, 4], where='mid')\n", (400, 200)),
    "stdlib_math_random_itertools_fractions": (PLT + "import math, random, itertools, fractions, decimal\n"
        "random.seed(3)\npts = [(random.random(), random.random()) for _ in range(20)]\n"
        "pairs = list(itertools.combinations(range(4), 2))\nf = fractions.Fraction(3, 4) + fractions.Fraction(1, 6)\n"
        "d = decimal.Decimal('1.1') * 3\nplt.figure(figsize=(4, 3))\nplt.scatter(*zip(*pts))\n"
        "plt.title(f'{f} {d} {len(pairs)} {math.comb(5, 2)} {math.pi:.3f}')\n", (400, 300)),
    "numpy_linalg_regression_line": (NP + "A = np.array([[1, 1], [1, 2], [1, 3], [1, 4]], float)\nb = np.array([1.1, 1.9, 3.2, 3.9])\n"
        "coef, *_ = np.linalg.lstsq(A, b, rcond=None)\nev = np.linalg.eigvals(np.array([[2, 1], [1, 2]]))\n"
        "det = np.linalg.det(A.T @ A)\nplt.figure(figsize=(4, 3))\nplt.plot(A[:, 1], b, 'o')\n"
        "plt.plot(A[:, 1], A @ coef, 'r-')\nplt.title(f'det={det:.1f} ev={sorted(ev.round(2))}')\n", (400, 300)),
    "unit_circle_axes_through_origin": (NP + "fig, ax = plt.subplots(figsize=(4, 4))\nt = np.linspace(0, 2 * np.pi, 200)\n"
        "ax.plot(np.cos(t), np.sin(t))\nfor s in ('left', 'bottom'):\n    ax.spines[s].set_position('zero')\n"
        "for s in ('right', 'top'):\n    ax.spines[s].set_visible(False)\nax.set_aspect('equal')\n", (400, 400)),
    "function_plot_with_annotated_root": (NP + "f = lambda x: x ** 3 - 2 * x - 5\nx = np.linspace(-3, 3, 300)\n"
        "fig, ax = plt.subplots()\nax.plot(x, f(x), label=r'$f(x)=x^3-2x-5$')\nax.axhline(0, color='gray', lw=0.8)\n"
        "r = np.roots([1, 0, -2, -5]).real.max()\nax.plot(r, 0, 'ro')\nax.annotate(f'x={r:.3f}', (r, 0), (r - 2, 10), "
        "arrowprops={'arrowstyle': '->'})\nax.legend()\n", (640, 480)),
    "bar_chart_value_labels": (PLT + "fig, ax = plt.subplots(figsize=(5, 3))\nbars = ax.bar(['Mon', 'Tue', 'Wed'], [12, 7, 15], "
        "color=['#4c72b0', '#dd8452', '#55a868'])\nax.bar_label(bars, padding=2)\nax.set_ylim(0, 18)\n"
        "ax.spines[['top', 'right']].set_visible(False)\nfig.tight_layout()\nplt.savefig('bars.png', dpi=100)\n", (500, 300)),
    "pie_with_percentages_equal_axis": (PLT + "plt.figure(figsize=(4, 4))\nplt.pie([1, 2, 3, 4], labels=list('ABCD'), "
        "autopct='%.0f%%', startangle=90, wedgeprops={'edgecolor': 'w'})\nplt.axis('equal')\n", (400, 400)),
    "number_line_with_intervals": (PLT + "fig, ax = plt.subplots(figsize=(6, 1.5))\nax.hlines(0, -5, 5)\n"
        "ax.set_xticks(range(-5, 6))\nax.plot([-2], [0], 'o', mfc='white', mec='b', ms=10)\nax.plot([3], [0], 'bo', ms=10)\n"
        "ax.hlines(0, -2, 3, colors='b', lw=4)\nax.set_yticks([])\nfor s in ('left', 'right', 'top'):\n"
        "    ax.spines[s].set_visible(False)\nplt.tight_layout()\n", (600, 150)),
    "coordinate_grid_with_polygon_vertices": (NP + "from matplotlib.patches import Polygon\nfig, ax = plt.subplots(figsize=(5, 5))\n"
        "pts = np.array([[1, 1], [5, 2], [4, 5], [2, 4]])\nax.add_patch(Polygon(pts, alpha=0.3, ec='k'))\n"
        "for (x, y) in pts:\n    ax.annotate(f'({x}, {y})', (x, y), textcoords='offset points', xytext=(5, 5))\n"
        "ax.set_xticks(range(7))\nax.set_yticks(range(7))\nax.grid(True)\nax.set_xlim(0, 6)\nax.set_ylim(0, 6)\n"
        "ax.set_aspect('equal', adjustable='box')\n", (500, 500)),
}
SV = SVGV + 'width="200" height="120" viewBox="0 0 200 120">'
LEGIT_SVG = {  # name: (text, (width, height))
    "marker_arrowheads_in_defs": (SV + '<defs><marker id="arrow" viewBox="0 0 10 10" refX="5" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="black"/></marker></defs>'
        '<line x1="10" y1="100" x2="180" y2="100" stroke="black" marker-end="url(#arrow)" marker-start="url(#arrow)"/>'
        '<line x1="20" y1="110" x2="20" y2="10" stroke="black" marker-end="url(#arrow)"/></svg>', (200, 120)),
    "dots_pattern_fill": (SV + '<defs><pattern id="dots" x="0" y="0" width="8" height="8" patternUnits="userSpaceOnUse">'
        '<circle cx="4" cy="4" r="2" fill="#888"/></pattern></defs><rect x="10" y="10" width="180" height="100" '
        'fill="url(#dots)" stroke="black"/></svg>', (200, 120)),
    "clip_path_circle_on_rects": (SV + '<defs><clipPath id="clip"><circle cx="100" cy="60" r="50"/></clipPath></defs>'
        '<g clip-path="url(#clip)"><rect width="100" height="120" fill="tomato"/><rect x="100" width="100" height="120" '
        'fill="teal"/></g></svg>', (200, 120)),
    "text_with_tspans_subscripts": (SV + '<text x="10" y="40" font-family="sans-serif" font-size="16">x<tspan '
        'baseline-shift="super" font-size="10">2</tspan> + y<tspan dy="4" font-size="10">1</tspan><tspan dy="-4"> = '
        'r</tspan></text><text x="10" y="80"><tspan x="10" dy="0">line one</tspan><tspan x="10" dy="1.2em">line two'
        '</tspan></text></svg>', (200, 120)),
    "viewbox_only_no_size": (SVGV + 'viewBox="0 0 300 150"><rect x="10" y="10" width="280" height="130" fill="none" '
        'stroke="navy"/><circle cx="150" cy="75" r="40" fill="gold"/></svg>', None),
    "percent_sizes_inside": (SV + '<rect x="10%" y="10%" width="80%" height="80%" fill="#eef" stroke="#00f"/>'
        '<circle cx="50%" cy="50%" r="20%" fill="none" stroke="red"/><line x1="0" y1="50%" x2="100%" y2="50%" '
        'stroke="gray" stroke-dasharray="4 2"/></svg>', (200, 120)),
    "style_classes_for_chart": (SV + '<style>.axis { stroke: #000; stroke-width: 1 } .bar { fill: #69b3a2 } '
        '.bar.hi { fill: #e15759 } .label { font-family: sans-serif; font-size: 9px; text-anchor: middle }</style>'
        '<line class="axis" x1="20" y1="100" x2="190" y2="100"/><line class="axis" x1="20" y1="100" x2="20" y2="10"/>'
        '<rect class="bar" x="30" y="40" width="30" height="60"/><rect class="bar hi" x="80" y="20" width="30" '
        'height="80"/><rect class="bar" x="130" y="70" width="30" height="30"/><text class="label" x="45" y="112">A'
        '</text><text class="label" x="95" y="112">B</text><text class="label" x="145" y="112">C</text></svg>',
        (200, 120)),
    "geometry_with_right_angle_mark": (SV + '<polygon points="20,100 180,100 20,20" fill="none" stroke="black" '
        'stroke-width="2"/><polyline points="20,90 30,90 30,100" fill="none" stroke="black"/><path d="M 160 100 A 20 20 '
        '0 0 0 162 92" fill="none" stroke="blue"/><text x="8" y="112" font-size="10">A</text><text x="182" y="112" '
        'font-size="10">B</text><text x="8" y="18" font-size="10">C</text><text x="140" y="95" font-size="9">'
        '&#952;</text></svg>', (200, 120)),
    "xml_declaration_and_comment": ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n<!-- made by a script -->\n'
        + SV + '<g transform="translate(100 60)"><circle r="30" fill="none" stroke="purple" stroke-width="3"/></g>'
        '</svg>', (200, 120)),
}

# what a coder writes around the plot itself: a main guard, argparse, images drawn without pyplot, SVG text written
# from Python, a temporary file copied into place
X = 'xmlns="http://www.w3.org/2000/svg"'
LEGIT_PYTHON.update({
    "main_guard_savefig": (PLT + "def main():\n    plt.plot([1, 2])\n    plt.savefig('plot.png')\n\n\n"
                           "if __name__ == '__main__':\n    main()\n", (640, 480)),
    "argparse_default_output": (PLT + "import argparse\np = argparse.ArgumentParser()\n"
                                "p.add_argument('--out', default='out.png')\na = p.parse_args()\nplt.plot([1, 2])\n"
                                "plt.savefig(a.out)\n", (640, 480)),
    "cairosvg_called_by_the_code": ("import cairosvg\nsvg = '<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"200\" "
                                    "height=\"100\"><rect width=\"100\" height=\"50\" fill=\"red\"/></svg>'\n"
                                    "cairosvg.svg2png(bytestring=svg.encode(), write_to='out.png')\n", (200, 100)),
    "pil_imagedraw_diagram": ("from PIL import Image, ImageDraw, ImageFont\nimg = Image.new('RGB', (400, 300), 'white')\n"
                              "d = ImageDraw.Draw(img)\nd.line([(10, 290), (390, 10)], fill='black', width=3)\n"
                              "d.ellipse([100, 100, 200, 200], outline='blue')\n"
                              "d.text((10, 10), 'Triangle ABC', fill='black', font=ImageFont.load_default())\n"
                              "img.save('diagram.png')\n", (400, 300)),
    "imsave_of_an_array": (NP + "plt.imsave('out.png', np.random.rand(50, 80), cmap='gray')\n", (80, 50)),
    "svg_text_written_from_python": ("svg = \"\"\"<svg " + X + " width='120' height='80'><line x1='0' y1='0' x2='120' "
                                     "y2='80' stroke='black'/></svg>\"\"\"\nwith open('diagram.svg', 'w') as f:\n"
                                     "    f.write(svg)\n", (120, 80)),
    "tempfile_copied_into_place": (PLT + "import tempfile, shutil, os\nplt.plot([1, 2])\n"
                                   "with tempfile.NamedTemporaryFile(suffix='.png', delete=False) as t:\n"
                                   "    plt.savefig(t.name)\nshutil.copy(t.name, 'result.png')\nos.unlink(t.name)\n"
                                   "plt.close()\n", (640, 480)),
    "show_nonblocking_and_pause": (PLT + "plt.plot([1, 2])\nplt.pause(0.1)\nplt.show(block=False)\n", (640, 480)),
})
LEGIT_SVG.update({
    "no_namespace_declared": ('<svg width="200" height="100"><rect width="100" height="50" fill="blue"/></svg>',
                              (200, 100)),
    "public_doctype_svg11": ('<?xml version="1.0" standalone="no"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
                             '"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n<svg ' + X + ' version="1.1" '
                             'width="100" height="100"><rect width="50" height="50"/></svg>', (100, 100)),
    "foreign_object_beside_shapes": ('<svg ' + X + ' width="200" height="100"><foreignObject width="100" height="50">'
                                     '<div xmlns="http://www.w3.org/1999/xhtml">Hi</div></foreignObject><rect x="120" '
                                     'width="50" height="50"/></svg>', (200, 100)),
    "title_desc_rdf_metadata": ('<svg ' + X + ' xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
                                'xmlns:dc="http://purl.org/dc/elements/1.1/" width="100" height="100"><title>t</title>'
                                '<desc>d</desc><metadata><rdf:RDF><rdf:Description dc:creator="x"/></rdf:RDF>'
                                '</metadata><rect width="50" height="50"/></svg>', (100, 100)),
    "animate_element_ignored": ('<svg ' + X + ' width="100" height="100"><circle cx="50" cy="50" r="20"><animate '
                                'attributeName="r" from="20" to="40" dur="2s" repeatCount="indefinite"/></circle></svg>',
                                (100, 100)),
    "centimetre_units": ('<svg ' + X + ' width="5cm" height="3cm"><rect width="50" height="50" fill="blue"/></svg>',
                         (189, 113)),
    "numeric_character_references": ('<svg ' + X + ' width="100" height="100"><text x="10" y="50">&#x2220;ABC = 90&#176;'
                                     ' &amp; &lt;3</text></svg>', (100, 100)),
    "embedded_data_png": ('<svg ' + X + ' width="100" height="100"><image width="50" height="50" href="data:image/png;'
                          'base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E'
                          'rkJggg=="/></svg>', (100, 100)),
    "no_size_at_all": ('<svg ' + X + '><circle cx="50" cy="50" r="40" fill="red"/></svg>', (300, 150)),
})

# -- hostile programs ----------------------------------------------------------------------------------------------
# The svgz path: what it reads (bounded before and after gunzip), what it screens, what it skips
SVGZ = {
    # gzip members of 8 MiB of spaces each, ~1 MiB on disk: 8 GiB of SVG; at most max_svg_bytes + 1 are inflated
    "svgz_members_bomb_in_1_mib": (GZ + "m = gzip.compress(b' ' * (8 << 20))\n"
                                   "open('b.svgz', 'wb').write(gzip.compress(b'<svg ') + m * (1000000 // len(m)))\n",
                                   "python", 10.0, {"too_large"}),
    # a file past the compressed cap is refused by its size, unread
    "svgz_past_its_compressed_cap": (GZ + "import os\nopen('b.svgz', 'wb').write(gzip.compress(b'<svg/>') + "
                                     "os.urandom(2 << 20))\n", "python", 10.0, {"too_large"}),
    # a 20 MiB file name in the gzip header (read a byte at a time by the gzip module): refused by the file's size
    "svgz_huge_fname_header": ("open('b.svgz', 'wb').write(b'\\x1f\\x8b\\x08\\x08' + b'\\0' * 6 + b'A' * (20 << 20) + "
                               "b'\\0')\n", "python", 10.0, {"too_large"}),
    # ~50000 empty gzip members before the document, 150000 empty deflate blocks in one, a 64 KiB FEXTRA field: all
    # within the cap, read in well under a second
    "svgz_empty_members_flood": (GZ + "e = gzip.compress(b'')\nopen('b.svgz', 'wb').write(e * (1000000 // len(e)) + "
                                 f"gzip.compress({RECT_SVG!r}))\n", "python", 10.0, {"ok"}),
    "svgz_of_empty_deflate_blocks": ("import zlib\nc = zlib.compressobj(9, zlib.DEFLATED, 31)\nparts = [c.compress(b'')]\n"
                                     "for _ in range(150000):\n    parts.append(c.flush(zlib.Z_FULL_FLUSH))\n"
                                     f"parts += [c.compress({RECT_SVG!r}), c.flush()]\n"
                                     "open('b.svgz', 'wb').write(b''.join(parts))\n", "python", 10.0, {"ok"}),
    "svgz_fextra_64k": ("import struct, zlib\nc = zlib.compressobj(9, zlib.DEFLATED, -15)\n"
                        f"body = c.compress({RECT_SVG!r}) + c.flush()\n"
                        "h = b'\\x1f\\x8b\\x08\\x04' + b'\\0' * 6 + struct.pack('<H', 65535) + b'E' * 65535\n"
                        f"open('b.svgz', 'wb').write(h + body + struct.pack('<II', zlib.crc32({RECT_SVG!r}), "
                        f"{len(RECT_SVG)}))\n", "python", 10.0, {"ok"}),
    # the decompressed text is screened as an SVG job's is
    "svgz_entity_declaration": (svgz('<!DOCTYPE svg [<!ENTITY a "b">]>' + SVGH + '<text>&a;</text></svg>'), "python",
                                10.0, {"forbidden"}),
    "svgz_style_import": (svgz(SVGH + '<style>@import url(file:///etc/passwd);</style></svg>'), "python", 10.0,
                          {"forbidden"}),
    "svgz_image_of_host_file": (svgz(SVGH + '<image href="file:///etc/shadow" width="9" height="9"/></svg>'), "python",
                                10.0, {"forbidden"}),
    # a gzipped SVG inside as a data: image (cairosvg sniffs gzip): refused by the screen
    "svgz_data_image_svgz": (svgz(SVGH + '<image width="9" height="9" href="data:image/svg+xml;base64,H4sIAAAAAAAAA7Mp'
                                  'LkvTs+MCAIaeZVgIAAAA"/></svg>'), "python", 10.0, {"forbidden"}),
    # gzip inside gzip is no XML to the screen; cairosvg never sees it
    "svgz_double_gzipped": (GZ + f"open('b.svgz', 'wb').write(gzip.compress(gzip.compress({RECT_SVG!r})))\n", "python",
                            10.0, {"syntax"}),
    "svgz_not_utf8_payload": (GZ + "open('b.svgz', 'wb').write(gzip.compress(b'\\xff\\xfe<\\x00s\\x00v\\x00g\\x00'))\n",
                              "python", 10.0, {"syntax"}),
    "svgz_wrong_crc": (GZ + f"d = bytearray(gzip.compress({RECT_SVG!r}))\nd[-8] ^= 0xff\n"
                       "open('b.svgz', 'wb').write(bytes(d))\n", "python", 10.0, {"syntax"}),
    "svgz_not_gzip": ("open('b.svgz', 'w').write('<svg/>')\n", "python", 10.0, {"syntax"}),
    # links and directories named .svgz are never chosen
    "svgz_links_to_tree_files": ("import os\nos.symlink('/usr/share/fonts', 'b.svgz')\n"
                                 "os.symlink('/etc/ld.so.cache', 'c.svgz')\n", "python", 10.0, {"no_output"}),
    "svgz_directory": ("import os\nos.makedirs('b.svgz/c')\n", "python", 10.0, {"no_output"}),
    "svgz_upper_suffix_nested_dir": ("import gzip, os\nos.makedirs('a/b')\n"
                                     f"open('a/b/C.SVGZ', 'wb').write(gzip.compress({RECT_SVG!r}))\n", "python", 10.0,
                                     {"ok"}),
}

# The image size checks: one kind for a size that is no size, the job's own words are its own
SIZES = {
    "figure_bbox_points_nan": (PLT + "fig = plt.figure(figsize=(2, 2))\nplt.plot([1])\n"
                               "fig.bbox_inches._points[1, 0] = float('nan')\n", "python", 10.0, {"invalid_size"}),
    "figure_tiny_positive_size": (PLT + "plt.figure(figsize=(1e-9, 1e-9))\nplt.plot([1])\n", "python", 10.0,
                                  {"invalid_size"}),
    "figure_dpi_tiny": (PLT + "fig = plt.figure(figsize=(2, 2))\nplt.plot([1])\nfig.dpi = 1e-300\n", "python", 10.0,
                        {"invalid_size"}),
    "figure_dpi_negative": (PLT + "fig = plt.figure(figsize=(2, 2))\nfig.dpi = -5\nplt.plot([1])\n", "python", 10.0,
                            {"invalid_size"}),
    # its own PNG saved first does not make the current figure's size valid: the figure is the image
    "figure_dpi_nan_after_own_savefig": (DRAW + "plt.savefig('a.png')\nplt.gcf().dpi = float('nan')\n", "python",
                                         10.0, {"invalid_size"}),
    "figure_size_nan_caught_by_job": (PLT + "try:\n    plt.figure(figsize=(float('nan'), 1))\nexcept ValueError:\n"
                                      "    pass\nplt.figure(figsize=(1, 1), dpi=50)\nplt.plot([1, 2])\n", "python", 10.0,
                                      {"ok"}),
    # matplotlib's words raised by the job's own code are a crash, as every other message rule reads only libraries
    "job_raises_mpl_size_text": ("raise ValueError('figure size must be positive finite not (1, 1)')\n", "python",
                                 10.0, {"crash"}),
    "svg_width_tiny_exponent": ('<svg xmlns="http://www.w3.org/2000/svg" width="1e-400" height="10"/>', "svg", 10.0,
                                {"invalid_size"}),
    "svg_viewbox_inf_only": ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 inf 10"/>', "svg", 10.0,
                             {"invalid_size"}),
    "svg_size_nan_em": ('<svg xmlns="http://www.w3.org/2000/svg" width="nanem" height="10"/>', "svg", 10.0,
                        {"invalid_size"}),
    "svg_negative_zero_width": ('<svg xmlns="http://www.w3.org/2000/svg" width="-0" height="10"/>', "svg", 10.0,
                                {"invalid_size"}),
    "svg_viewbox_zero_with_size": ('<svg xmlns="http://www.w3.org/2000/svg" width="50" height="50" viewBox="0 0 0 0">'
                                   '<rect width="9" height="9"/></svg>', "svg", 10.0, {"ok"}),
    # the default viewport (300x150) for a root without size or viewBox: a percentage of it past max_side is too large
    "svg_percent_past_max_side_of_default_viewport": ('<svg xmlns="http://www.w3.org/2000/svg" width="100000%" '
                                                      'height="10%"/>', "svg", 10.0, {"too_large"}),
    "svg_no_size_root_huge_content": ('<svg xmlns="http://www.w3.org/2000/svg"><rect width="1e9" height="1e9"/></svg>',
                                      "svg", 10.0, {"ok"}),
    # matplotlib puts the figure's dpi back before the error of the code's own savefig reaches the worker: the dpi
    # the canvas was sized at is savefig's own (test_render_hostile35; this was a crash)
    "own_savefig_at_nan_dpi": (DRAW + "plt.savefig('a.png', dpi=float('nan'))\n", "python", 10.0, {"invalid_size"}),
    "svg_nan_size_as_file_of_python_job": ("open('x.svg', 'w').write('<svg xmlns=\"http://www.w3.org/2000/svg\" "
                                           "width=\"nan\" height=\"9\"/>')\n", "python", 10.0, {"invalid_size"}),
}

# PDF / PostScript output: never drawn, named in the message (job text: escaped, cut)
DOCUMENTS = {
    "pdf_named_with_escapes": (PLT + "plt.plot([1])\nplt.savefig('\\x1b[31m\\u202e' + 'x' * 200 + '.pdf')\n"
                               "plt.close()\n", "python", 10.0, {"no_output"}),
    "pdf_holding_a_png": (DRAW + "plt.savefig('a.pdf', format='png')\nplt.close()\n", "python", 10.0, {"no_output"}),
    "eps_then_clf_blank": (DRAW + "plt.savefig('a.eps')\nplt.clf()\n", "python", 10.0, {"no_output"}),
    "ps_link_to_tree_file": ("import os\nos.symlink('/etc/ld.so.cache', 'a.ps')\n", "python", 10.0, {"no_output"}),
    "svgz_beside_a_pdf": (PLT + "import gzip\nplt.plot([1, 2])\nplt.savefig('c.pdf')\nplt.close()\n"
                          f"open('b.svgz', 'wb').write(gzip.compress({RECT_SVG!r}))\n", "python", 10.0, {"ok"}),
}

GROUPS = {"svgz": SVGZ, "sizes": SIZES, "documents": DOCUMENTS}


def test_the_batch_is_new_and_large():
    from test_render_hostile21 import check_batch_is_new
    from test_render_hostile29 import GROUPS as GROUPS29
    from test_render_hostile30 import GROUPS as GROUPS30
    from test_render_hostile31 import GROUPS as GROUPS31
    from test_render_hostile32 import GROUPS as GROUPS32

    check_batch_is_new(GROUPS, GROUPS29, GROUPS30, GROUPS31, GROUPS32)


@pytest.mark.parametrize("group", list(GROUPS))
def test_batch_outcomes(render_pool, group):
    from test_render_hostile21 import HOST_TMP, check_batch

    got = check_batch(render_pool, GROUPS[group],
                      stray_dirs=[(d, TOKEN) for d in (HOST_TMP, "/dev/shm", os.path.expanduser("~"), "/")])
    print(json.dumps({n: got[n] for n in GROUPS[group]}, indent=0))
    for name, (kind, message, elapsed_s) in got.items():
        assert elapsed_s < GROUPS[group][name][2] + 6, (name, elapsed_s)


# -- legitimate programs ---------------------------------------------------------------------------------------------
_image = png_image


@pytest.mark.parametrize("name", list(LEGIT_PYTHON))
def test_a_legitimate_plot_renders(render_pool, name):
    code, size = LEGIT_PYTHON[name]
    r = render_pool.render(RenderJob(code), timeout_s=20)
    assert r.ok and (r.width, r.height) == size, (r.error_kind, r.message)
    spreads = ink_spreads(r.png)
    assert max(spreads) > 50, spreads  # ink on a background (or on transparency), not a blank canvas


@pytest.mark.parametrize("name", list(LEGIT_SVG))
def test_a_legitimate_svg_renders(render_pool, name):
    text, size = LEGIT_SVG[name]
    r = render_pool.render(RenderJob(text, "svg"), timeout_s=20)
    assert r.ok and (r.width, r.height) == (size or (300, 150)), (r.error_kind, r.message)
    drawn = drawn_pixels(r.png)
    assert 0 < drawn < r.width * r.height * 0.95 or name == "clip_path_circle_on_rects" and drawn, drawn


# -- the fixes this pass made ----------------------------------------------------------------------------------------
SVG_OF = '<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}"><rect width="5" height="5"/></svg>'


@pytest.mark.parametrize("code, language, message", [
    # before: too_large, "figure of nanxnan px exceeds 4096 px"
    (PLT + "fig = plt.figure(figsize=(2, 2))\nfig.dpi = float('nan')\n", "python",
     "job: figure size is not a finite number of pixels, one or more a side: nanxnan px (dpi nan)"),
    # before: too_large, "figure of infxinf px exceeds 4096 px"
    (PLT + "fig = plt.figure(figsize=(2, 2))\nplt.plot([1])\nfig.dpi = float('inf')\n", "python",
     "job: figure size is not a finite number of pixels, one or more a side: infxinf px (dpi inf)"),
    # before: crash (matplotlib's own refusal, raised inside matplotlib)
    (PLT + "plt.figure(figsize=(float('nan'), 3))\n", "python",
     "job: ValueError: figure size must be positive finite not (nan, 3)"),
    (PLT + "plt.figure(figsize=(2, 2)).set_size_inches(float('inf'), 2)\n", "python",
     "job: ValueError: figure size must be positive finite not [inf  2.]"),
    # before: crash, "ValueError: cannot write empty image"
    (PLT + "plt.figure(figsize=(0.001, 2))\nplt.plot([1])\n", "python",
     "job: figure size is not a finite number of pixels, one or more a side: 0.1x200 px (dpi 100)"),
    # before: crash, "ValueError: The SVG size is undefined: nanx10 px"
    (SVG_OF.format(w="nan", h="10"), "svg", "job: The SVG size is undefined: nanx10 px"),
    # before: too_large, "SVG size: OverflowError: cannot convert float infinity to integer"
    (SVG_OF.format(w="inf", h="10"), "svg", "job: The SVG size is infinite: infx10 px"),
    # before: crash, "ValueError: The SVG size is undefined"
    (SVG_OF.format(w="0.3", h="10"), "svg", "job: The SVG size is undefined: 0x10 px"),
])
def test_a_size_that_is_no_size_is_invalid_size_in_both_paths(render_pool, code, language, message):
    r = render_pool.render(RenderJob(code, language))
    assert (r.error_kind, r.message) == ("invalid_size", message), r


def test_invalid_size_is_a_kind_of_the_result_and_of_the_job_frame():
    from render import ERROR_KINDS, worker

    assert "invalid_size" in ERROR_KINDS and "invalid_size" in worker.JOB_KINDS


CHART = PLT + "plt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 2], color='red')\nplt.title('$x^2$')\n"


def test_a_chart_saved_as_svgz_renders_as_its_svg_does(render_pool):
    # before: no_output, "the code drew no figure and wrote no out.png"
    rz = render_pool.render(RenderJob(CHART + "plt.savefig('figs.svgz')\nplt.close()\n"))
    assert rz.ok and (rz.width, rz.height) == (384, 288), (rz.error_kind, rz.message)
    assert rz.message == "job: 'figs.svgz' written by the code, drawn as SVG (no out.png, no open figure)"
    r = render_pool.render(RenderJob(CHART + "plt.savefig('figs.svg')\nplt.close()\n"))
    assert r.ok and _image(r.png).tobytes() == _image(rz.png).tobytes()


def test_an_svgz_bomb_is_refused_having_inflated_at_most_the_cap(render_pool):
    # 1 GiB of SVG in ~1 MiB of gzip: 128 gzip members of 8 MiB of spaces each after the opening tag
    code = ("import gzip, os\nm = gzip.compress(b' ' * (8 << 20))\n"
            "open('b.svgz', 'wb').write(gzip.compress(b'<svg') + m * 128)\n"
            "assert os.path.getsize('b.svgz') < (1 << 20) + (64 << 10), os.path.getsize('b.svgz')\n")
    r = render_pool.render(RenderJob(code), timeout_s=20)
    assert (r.error_kind, r.message) == ("too_large", "job: 'b.svgz' decompresses to more than 1048576 bytes of SVG"), r


@pytest.mark.parametrize("ext", ["pdf", "eps", "ps"])
def test_a_document_only_output_is_refused_and_named(render_pool, ext):
    # before: no_output, "job: the code drew no figure and wrote no out.png" (nothing about the file it wrote)
    r = render_pool.render(RenderJob(CHART + f"plt.savefig('figs.{ext}')\nplt.close()\n"))
    assert (r.error_kind, r.message) == ("no_output", (
        f"job: the code drew no figure and wrote no out.png; it wrote 'figs.{ext}', a PDF / PostScript document, which "
        "the sandbox does not draw (no Ghostscript or PDF renderer runs there): save the chart as PNG, SVG or JPEG "
        "instead")), r


def test_an_empty_figure_left_after_a_document_save_is_not_the_image(render_pool):
    # before: ok, a blank 200x150 canvas (the empty figure `plt.clf()` left)
    r = render_pool.render(RenderJob(CHART + "plt.savefig('figs.pdf')\nplt.clf()\n"))
    assert r.error_kind == "no_output" and r.message.startswith(
        "job: the current figure is empty, and the code wrote no out.png; it wrote 'figs.pdf'"), r


CIRCLE = '<circle cx="50" cy="50" r="40" fill="red"/></svg>'


@pytest.mark.parametrize("root, size", [
    ('<svg xmlns="http://www.w3.org/2000/svg">', (300, 150)),  # no size, no viewBox
    ('<svg xmlns="http://www.w3.org/2000/svg" width="100%" height="100%">', (300, 150)),
    ('<svg xmlns="http://www.w3.org/2000/svg" width="50%" height="50%">', (150, 75)),
    ('<svg xmlns="http://www.w3.org/2000/svg" width="200">', (200, 150)),
    # unchanged: a viewBox gives the size, absolute sizes are their own
    ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 400 200">', (400, 200)),
    ('<svg xmlns="http://www.w3.org/2000/svg" width="100%" viewBox="0 0 400 200">', (400, 200)),
    ('<svg xmlns="http://www.w3.org/2000/svg" width="120" height="80">', (120, 80)),
])
def test_an_svg_that_states_no_size_is_drawn_at_the_default_viewport(render_pool, root, size):
    # before: invalid_size (a crash before this pass), "The SVG size is undefined: 0x0 px", for the first four: cairosvg
    # resolves a missing or percent size against no parent; a browser draws such an SVG 300x150
    r = render_pool.render(RenderJob(root + CIRCLE, "svg"))
    assert r.ok and (r.width, r.height) == size, (r.error_kind, r.message)
    assert _image(r.png).convert("RGBA").getpixel((50, 50)) == (255, 0, 0, 255)


def test_an_explicit_zero_or_nan_side_stays_invalid_size_with_the_default_viewport(render_pool):
    for root, message in (('width="0" height="100"', "job: The SVG size is undefined: 0x100 px"),
                          ('width="nan"', "job: The SVG size is undefined: nanx150 px")):
        r = render_pool.render(RenderJob(f'<svg xmlns="http://www.w3.org/2000/svg" {root}>' + CIRCLE, "svg"))
        assert (r.error_kind, r.message) == ("invalid_size", message), r


@pytest.mark.parametrize("code, kind, message", [
    # before: crash, "ValueError: cannot convert float NaN to integer" (the code's own draw of the figure)
    (PLT + "fig = plt.figure(figsize=(2, 2))\nplt.plot([1])\nfig.dpi = float('nan')\nfig.canvas.draw()\n", "invalid_size",
     "job: figure size is not a finite number of pixels, one or more a side: nanxnan px (dpi nan) (drawing it failed: "
     "ValueError: cannot convert float NaN to integer)"),
    (PLT + "fig = plt.figure(figsize=(2, 2))\nplt.plot([1])\nfig.dpi = float('nan')\nfig.tight_layout()\n",
     "invalid_size", "job: figure size is not a finite number of pixels, one or more a side: nanxnan px (dpi nan) "
     "(drawing it failed: ValueError: cannot convert float NaN to integer)"),
    # before: crash, "TypeError: __init__(): incompatible constructor arguments ..." (Agg refusing 2e300 px)
    (PLT + "fig = plt.figure(figsize=(2, 2))\nplt.plot([1])\nfig.dpi = 1e300\nfig.canvas.draw()\n", "too_large",
     "job: figure of 2e+300x2e+300 px exceeds 4096 px (drawing it failed: TypeError: __init__(): incompatible "),
    # the job's own ValueError stays its own, whatever the figure's size
    (PLT + "fig = plt.figure(figsize=(2, 2))\nfig.dpi = float('nan')\nraise ValueError('mine')\n", "crash",
     "job: ValueError: mine"),
])
def test_the_codes_own_draw_of_a_figure_of_no_size_is_that_size(render_pool, code, kind, message):
    r = render_pool.render(RenderJob(code))
    assert r.error_kind == kind and r.message.startswith(message), r


@pytest.mark.parametrize("name", ["c.svg", "c.svgz", "c.jpg"])
@pytest.mark.parametrize("swap", ["fifo", "symlink", "directory"])
def test_a_file_swapped_after_it_was_chosen_is_not_read(tmp_path, monkeypatch, swap, name):
    # the job's threads run on while the worker reads the file it chose: swapped for a FIFO, the worker's open waited
    # for a writer until the job's timeout; swapped for a link, it read the link's target. Called here as the job
    # child calls it, on a real directory.
    import threading

    from render import RenderLimits, worker

    monkeypatch.setattr(worker, "_JOBDIR", str(tmp_path))
    (tmp_path / "target").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"/>')
    path = tmp_path / name
    if swap == "fifo":
        os.mkfifo(path)
    elif swap == "symlink":
        path.symlink_to(tmp_path / "target")
    else:
        path.mkdir()
    got = []
    if name.endswith(".jpg"):
        def convert():
            return worker._raster_to_png(str(path), str(tmp_path / "out.png"), RenderLimits())
    else:
        def convert():
            return worker._svg_file_to_png(str(path), RenderLimits())
    t = threading.Thread(target=lambda: got.append(convert()), daemon=True)
    t.start()
    t.join(5)
    if swap == "fifo" and t.is_alive():  # the old reader: release it
        with open(path, "wb"):
            pass
        t.join(5)
    assert got == [("no_output", f"{name!r} is no longer a regular file")]
