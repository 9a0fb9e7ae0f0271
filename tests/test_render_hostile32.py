"""render/: a thirty-second pass. First the false refusals of legitimate code: the job's uid had no passwd entry, so
``pwd.getpwuid(os.getuid())`` and what is built on it (``expanduser("~")`` without HOME, ``Path.home()``,
``getpass.getuser()`` without USER / LOGNAME) failed; an SVG hyperlink (``<a href="https://...">``), which cairosvg
never fetches, was refused; and a corpus of ordinary plots and SVGs that must render. Then hostile programs written
against what this pass added and what the sandbox reads back: the job's account lookups and NSS, the image-choice rule
(file names, links, modes, timestamps), the result channel, and hyperlinks used to smuggle a fetch. Each is pinned to
its label with the host effects test_render_hostile21 checks (the same workers, no job process left, nothing written
outside the job dir, escaped job text, a clean render afterwards)."""

import json
import os
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402

TOKEN = "hostile32canary"
PLT = "import matplotlib.pyplot as plt\n"
NP = PLT + "import numpy as np\n"
DRAW = PLT + "plt.figure(figsize=(1, 1), dpi=50)\nplt.plot([1, 2])\n"
SVGH = '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="40" height="30">'
SVG_CHART = ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="200" '
             'height="120" viewBox="0 0 200 120">')
# a shared library the tree shows wherever numpy is installed (a C extension), copied into the job dir
COPY_LIB = "import shutil, numpy.core._multiarray_umath as m\nshutil.copy(m.__file__, {dst!r})\n"

# a GIF whose header says w x h pixels (its one frame is 10 px square)
GIF_HEADER = ("import io, struct\nfrom PIL import Image\nb = io.BytesIO()\nImage.new('P', (10, 10)).save(b, 'GIF')\n"
              "d = bytearray(b.getvalue())\nd[6:10] = struct.pack('<HH', {w}, {h})\nopen('a.gif', 'wb').write(bytes(d))\n")

# -- legitimate programs a coder model plausibly writes: each must render, at the size given ----------------------
LEGIT_PYTHON = {  # name: (code, (width, height))
    "grid_subplots_shared": (NP + "fig, axs = plt.subplots(3, 3, figsize=(6, 6), sharex=True, sharey='row')\n"
                             "for k, a in enumerate(axs.flat):\n    a.plot(np.arange(10), np.arange(10) ** (k / 4))\n"
                             "    a.grid(True, ls=':')\nfig.suptitle('Powers')\nfig.tight_layout()\n", (600, 600)),
    "twin_and_secondary_axes": (NP + "fig, ax = plt.subplots()\nx = np.linspace(0, 10, 50)\nax.plot(x, np.sin(x), 'b-')\n"
                                "ax2 = ax.twinx()\nax2.plot(x, np.exp(x / 5), 'r--')\nax.set_ylabel('sin', color='b')\n"
                                "ax2.set_ylabel('exp', color='r')\n"
                                "ax.secondary_xaxis('top', functions=(lambda v: v * 2, lambda v: v / 2))\n", (640, 480)),
    "polar_rose_and_bars": (NP + "theta = np.linspace(0, 2 * np.pi, 400)\nax = plt.subplot(projection='polar')\n"
                            "ax.plot(theta, np.abs(np.cos(4 * theta)))\nax.set_rmax(1.2)\n"
                            "ax.bar(np.linspace(0, 2 * np.pi, 8, endpoint=False), np.arange(8) / 8, width=0.5, "
                            "alpha=0.4)\n", (640, 480)),
    "scatter_3d_seeded_generator": (NP + "from mpl_toolkits.mplot3d import Axes3D\nrng = np.random.default_rng(42)\n"
                                    "ax = plt.figure().add_subplot(111, projection='3d')\n"
                                    "ax.scatter(*rng.normal(size=(3, 200)), c=rng.random(200), cmap='plasma')\n"
                                    "ax.view_init(30, 60)\nax.set_zlabel('z')\n", (640, 480)),
    "annotations_with_arrows": (PLT + "fig, ax = plt.subplots()\nax.plot([0, 1, 2], [0, 2, 1])\n"
                                "ax.annotate('peak', xy=(1, 2), xytext=(1.5, 2.5), arrowprops=dict(arrowstyle='->', "
                                "connectionstyle='arc3,rad=.3'))\nax.annotate('', xy=(0, 0), xytext=(2, 1), "
                                "arrowprops=dict(facecolor='black', shrink=0.05))\nax.set_ylim(0, 3)\n"
                                "ax.arrow(0.2, 0.2, 0.5, 0.5, head_width=0.1)\n", (640, 480)),
    "mathtext_everywhere": (PLT + "plt.plot([1, 2, 3])\n"
                            "plt.title(r'$\\sum_{i=0}^{n} \\frac{x_i^2}{\\sigma}$ and $\\sqrt{2}$')\n"
                            "plt.xlabel(r'$\\theta$ (rad)')\nplt.ylabel(r'$\\mathrm{Area}\\ [m^2]$')\n"
                            "plt.text(1, 2, r'$\\alpha > \\beta$')\n", (640, 480)),
    "unicode_category_labels": (PLT + "plt.bar(['Äpfel', 'Birnen', 'Café', '面积', 'Ωmega'], [3, 5, 2, 4, 1])\n"
                                "plt.title('Früchte – Übersicht ≥ 2 → ∞ °C')\n", (640, 480)),
    "patch_zoo": (PLT + "import matplotlib.patches as mp\nfig, ax = plt.subplots()\n"
                  "ax.add_patch(mp.Circle((0.3, 0.3), 0.2, color='g'))\n"
                  "ax.add_patch(mp.Rectangle((0.5, 0.5), 0.3, 0.2, fill=False, hatch='//'))\n"
                  "ax.add_patch(mp.Polygon([[0.1, 0.8], [0.3, 0.95], [0.2, 0.6]], closed=True))\n"
                  "ax.add_patch(mp.Wedge((0.7, 0.2), 0.15, 30, 270))\n"
                  "ax.add_patch(mp.FancyBboxPatch((0.5, 0.8), 0.2, 0.1, boxstyle='round,pad=0.02'))\n"
                  "ax.add_patch(mp.Ellipse((0.8, 0.6), 0.2, 0.1, angle=30))\nax.set_aspect('equal')\n", (640, 480)),
    "line_and_patch_collections": (NP + "from matplotlib.collections import LineCollection, PatchCollection\n"
                                   "from matplotlib.patches import Circle\nfig, ax = plt.subplots()\n"
                                   "segs = [np.column_stack([np.linspace(0, 1, 10), np.random.rand(10)]) "
                                   "for _ in range(5)]\nax.add_collection(LineCollection(segs, colors=list('rgbkm')))\n"
                                   "ax.add_collection(PatchCollection([Circle((0.5, 0.5), 0.1)], alpha=0.3))\n"
                                   "ax.autoscale()\n", (640, 480)),
    "imshow_of_generated_field": (NP + "x, y = np.meshgrid(np.linspace(-2, 2, 200), np.linspace(-2, 2, 200))\n"
                                  "z = np.exp(-(x ** 2 + y ** 2)) * np.cos(3 * x)\n"
                                  "plt.imshow(z, cmap='RdBu', origin='lower', extent=[-2, 2, -2, 2], "
                                  "interpolation='bilinear')\nplt.colorbar(label='z')\n"
                                  "plt.contour(x, y, z, levels=8, colors='k', linewidths=0.5)\n", (640, 480)),
    "seeded_histogram": (NP + "np.random.seed(0)\ndata = np.random.randn(1000)\n"
                         "plt.hist(data, bins=30, density=True, alpha=0.6, edgecolor='k')\n"
                         "plt.axvline(data.mean(), color='r')\nplt.legend(['mean', 'data'])\n", (640, 480)),
    "savefig_dpi_tight_then_close": (PLT + "fig, ax = plt.subplots(figsize=(4, 3))\n"
                                     "ax.pie([30, 20, 50], labels=['A', 'B', 'C'], autopct='%1.1f%%', "
                                     "explode=[0, 0.1, 0])\nfig.savefig('chart.png', dpi=150, bbox_inches='tight', "
                                     "pad_inches=0.1, facecolor='white')\nplt.close(fig)\n", (376, 376)),
    "show_at_the_end": (PLT + "plt.figure(figsize=(5, 4))\n"
                        "plt.errorbar([1, 2, 3], [2, 3, 1], yerr=[0.2, 0.3, 0.1], fmt='o-', capsize=3)\n"
                        "plt.fill_between([1, 2, 3], [1, 2, 0], [3, 4, 2], alpha=0.2)\nplt.show()\n", (500, 400)),
    "gridspec_constrained_inset": (NP + "import matplotlib.gridspec as gs\n"
                                   "fig = plt.figure(figsize=(6, 4), constrained_layout=True)\n"
                                   "g = gs.GridSpec(2, 3, figure=fig)\nax = fig.add_subplot(g[0, :])\n"
                                   "ax.step(range(10), np.cumsum(np.ones(10)))\n"
                                   "fig.add_subplot(g[1, 0]).boxplot([np.arange(10), np.arange(5, 20)])\n"
                                   "fig.add_subplot(g[1, 1:]).violinplot([np.sin(np.arange(50)), "
                                   "np.cos(np.arange(50))])\nax.inset_axes([0.6, 0.1, 0.3, 0.3]).plot([1, 3, 2])\n",
                                   (600, 400)),
    "dates_and_log_scales": (NP + "import datetime as dt\nimport matplotlib.dates as md\n"
                             "days = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(60)]\n"
                             "fig, (a, b) = plt.subplots(2)\na.plot(days, np.arange(60))\n"
                             "a.xaxis.set_major_formatter(md.DateFormatter('%b %d'))\nfig.autofmt_xdate()\n"
                             "b.loglog(np.logspace(0, 3), np.logspace(0, 3) ** 2)\nb.set_xscale('symlog')\n",
                             (640, 480)),
    "stack_quiver_stream": (NP + "fig, (a, b, c) = plt.subplots(1, 3, figsize=(9, 3))\n"
                            "a.stackplot(range(5), [1, 2, 3, 2, 1], [2, 1, 2, 1, 2])\n"
                            "Y, X = np.mgrid[-2:2:20j, -2:2:20j]\nb.quiver(X, Y, -Y, X)\n"
                            "c.streamplot(X, Y, -Y, X, density=0.6)\n", (900, 300)),
    "table_and_boxed_text": (PLT + "fig, ax = plt.subplots()\nax.axis('off')\n"
                             "ax.table(cellText=[['1', '2'], ['3', '4']], colLabels=['a', 'b'], loc='center')\n"
                             "ax.text(0.5, 0.9, 'Table 1', ha='center', bbox=dict(boxstyle='round', fc='wheat'), "
                             "transform=ax.transAxes)\n", (640, 480)),
    "home_dir_user_and_passwd": (PLT + "import os, pathlib, getpass, pwd\nos.environ.pop('HOME', None)\n"
                                 "out = pathlib.Path.home() / 'figs'\nout.mkdir(exist_ok=True)\nplt.plot([1, 2])\n"
                                 "plt.title(getpass.getuser() + ' ' + pwd.getpwuid(os.getuid()).pw_dir)\n"
                                 "plt.savefig(os.path.expanduser('~/figs/result.png'))\nplt.close()\n", (640, 480)),
    "object_oriented_figure": ("from matplotlib.figure import Figure\n"
                               "from matplotlib.backends.backend_agg import FigureCanvasAgg\n"
                               "fig = Figure(figsize=(3, 2))\nFigureCanvasAgg(fig)\nax = fig.add_subplot()\n"
                               "ax.barh(['x', 'y'], [1, 2], color=['#1f77b4', 'tab:orange'])\nfig.savefig('out.png')\n",
                               (300, 200)),
    "style_context_legend": (NP + "with plt.style.context('ggplot'):\n"
                             "    plt.plot(np.arange(5), np.arange(5) ** 2, marker='s')\n"
                             "    plt.legend(['sq'], loc='upper left', frameon=True, shadow=True)\n", (640, 480)),
}

LEGIT_SVG = {  # each 200 x 120
    "gradients_with_href_chain": SVG_CHART + '<defs><linearGradient id="g" x1="0" x2="1"><stop offset="0" '
                                 'stop-color="red"/><stop offset="1" stop-color="blue" stop-opacity="0.5"/>'
                                 '</linearGradient><radialGradient id="r" xlink:href="#g" cx="50%" cy="50%" r="50%"/>'
                                 '</defs><rect width="100" height="60" fill="url(#g)"/><circle cx="150" cy="60" r="40" '
                                 'fill="url(#r)"/></svg>',
    "hatch_pattern": SVG_CHART + '<defs><pattern id="p" width="10" height="10" patternUnits="userSpaceOnUse"><path '
                     'd="M0 0L10 10" stroke="black"/></pattern></defs><rect width="200" height="120" fill="url(#p)"/>'
                     '</svg>',
    "text_tspans_transforms": SVG_CHART + '<g transform="translate(10,20) rotate(5)"><text x="0" y="10" '
                              'font-family="DejaVu Sans" font-size="14">Area = πr² ≈ 3.14</text><text x="0" y="40" '
                              'transform="scale(1.2)"><tspan fill="red">red</tspan> and <tspan font-weight="bold">'
                              'bold</tspan></text></g></svg>',
    "paths_and_markers": SVG_CHART + '<defs><marker id="m" markerWidth="6" markerHeight="6" refX="3" refY="3" '
                         'orient="auto"><path d="M0,0 L6,3 L0,6 z"/></marker></defs><path d="M10 100 Q 60 10 110 100 '
                         'T 190 60" fill="none" stroke="#333" stroke-width="2" marker-end="url(#m)"/><polyline '
                         'points="10,10 40,30 70,10" fill="none" stroke="green"/></svg>',
    "css_style_block": SVG_CHART + '<style>/* chart */ .bar { fill: steelblue; } .bar:hover { fill: orange } text '
                       '{ font: 10px sans-serif; }</style><rect class="bar" x="10" y="20" width="20" height="80"/>'
                       '<rect class="bar" x="40" y="50" width="20" height="50"/><text x="10" y="115">Q1 Q2</text></svg>',
    "hyperlinks_external_internal_mail": SVG_CHART + '<a href="https://en.wikipedia.org/wiki/Triangle" target="_blank">'
                                         '<polygon points="10,110 60,10 110,110" fill="teal"/></a><a xlink:href="#c">'
                                         '<circle id="c" cx="150" cy="60" r="30"/></a><text x="120" y="110"><a '
                                         'href="mailto:a@b.org">mail</a></text></svg>',
    "use_clip_mask": SVG_CHART + '<defs><circle id="dot" r="5"/><clipPath id="cp"><rect width="100" height="60"/>'
                     '</clipPath><mask id="mk"><rect width="200" height="120" fill="white"/></mask></defs><g '
                     'clip-path="url(#cp)" mask="url(#mk)"><use href="#dot" x="20" y="20"/><use xlink:href="#dot" '
                     'x="40" y="40" fill="red"/></g></svg>',
}

# -- hostile programs ----------------------------------------------------------------------------------------------
# The job's account lookups (render.job_account: answered in the job's Python; the tree has no account files) and NSS
ACCOUNT = {
    # no /etc/passwd in the tree, and its /etc is the read-only skeleton: nothing to append to, nothing created
    "append_to_etc_passwd": ("open('/etc/passwd', 'a').write('evil::0:0::/:/bin/sh\\n')\n" + DRAW, "python", 10.0,
                             {"forbidden"}),
    # root's entry is the real lookup's: where the host's NSS config names systemd (loaded before the job's tree was
    # entered), its synthesized root with /root as home (not in the tree: forbidden), else KeyError / a '~root/...'
    # left as a relative path in the job dir, which holds no such file (crash)
    "root_home_from_passwd": ("import pwd, os\nh = pwd.getpwnam('root').pw_dir\n"
                              "open(os.path.join(h, '.ssh', 'id_rsa')).read()\n", "python", 10.0,
                              {"forbidden", "crash"}),
    "tilde_root_expanduser": ("import os\nopen(os.path.expanduser('~root/.bash_history')).read()\n", "python", 10.0,
                              {"forbidden", "crash"}),
    # an NSS service name with a slash makes glibc dlopen libnss_<name>.so.2 relative to the job dir: the job's
    # tmpfs is noexec, so no code of the job's is mapped, and the lookup finds nothing
    "nss_service_from_jobdir": ("import ctypes, os\nos.makedirs('libnss_/job', exist_ok=True)\n" +
                                COPY_LIB.format(dst="libnss_/job/x.so.2") +
                                "ctypes.CDLL(None).__nss_configure_lookup(b'passwd', b'/job/x')\n"
                                "import pwd\npwd.getpwnam('nobody-here')\n", "python", 10.0, {"crash"}),
    "dlopen_library_copied_to_jobdir": (COPY_LIB.format(dst="l.so") + "import ctypes\nctypes.CDLL('/job/l.so')\n",
                                        "python", 10.0, {"crash"}),
    # the name the lookups give grants nothing: the ids stay the job's
    "setuid_to_passwd_root": ("import os\nos.setuid(0)\n" + DRAW, "python", 10.0, {"forbidden"}),
    "initgroups_as_render": ("import os, pwd\nos.initgroups(pwd.getpwuid(os.getuid()).pw_name, 0)\n" + DRAW,
                             "python", 10.0, {"forbidden"}),
    # the job's group entry's member list is a fresh list: adding root to it makes no one a member of anything
    "group_members_edited_then_setgroups": ("import grp, os\ng = grp.getgrgid(os.getgid())\ng.gr_mem.append('root')\n"
                                            "os.setgroups([0])\n" + DRAW, "python", 10.0, {"forbidden"}),
    "home_env_pointed_at_etc": ("import os, pathlib\nos.environ['HOME'] = '/etc'\n"
                                "(pathlib.Path.home() / '" + TOKEN + ".png').write_bytes(b'x')\n", "python", 10.0,
                                {"forbidden"}),
    "passwd_lookup_with_nul": ("import pwd\npwd.getpwnam('render\\x00root')\n", "python", 10.0, {"crash"}),
    # the real lookups the wrappers hold answer as they would have: no entry for the job's uid
    "wrapped_lookup_called_directly": ("import os, pwd\npwd.getpwuid.__wrapped__(os.getuid())\n", "python", 10.0,
                                       {"crash"}),
    # a home read from the job's entry is the job dir: the canary lands there, never outside
    "write_under_entry_home": ("import os, pwd\nh = pwd.getpwnam('render').pw_dir\n"
                               "open(os.path.join(h, '..', 'tmp', '" + TOKEN + "'), 'w').write('x')\n", "python", 10.0,
                               {"forbidden"}),
}

# What the worker reads back from the job dir: the PNG it picks, and the name it reports
IMAGE_CHOICE = {
    # the chosen file's name is job text: escaped, cut
    "png_name_with_escapes": (DRAW + "n = '\\x1b[2J\\u202e' + 'A' * 200 + '\\n.png'\nplt.savefig(n)\nplt.close()\n",
                              "python", 10.0, {"ok"}),
    "png_at_path_max_depth": (DRAW + "import os\np = '/'.join(['d' * 200] * 18)\nos.makedirs(p)\n"
                              "plt.savefig(p + '/x.png')\nplt.close()\n", "python", 10.0, {"ok"}),
    # its own directory made unreadable by the code: nothing found, nothing crashes
    "png_in_dir_made_unreadable": (DRAW + "import os\nos.mkdir('locked')\nplt.savefig('locked/a.png')\nplt.close()\n"
                                   "os.chmod('locked', 0)\n", "python", 10.0, {"no_output"}),
    # the newest by mtime is chosen, whatever it holds: a text file dated 2100 is that image, refused
    "text_png_dated_in_future": (DRAW + "import os\nplt.savefig('a.png')\nplt.close()\n"
                                 "open('b.png', 'w').write('not a png')\nos.utime('b.png', (4102444800, 4102444800))\n",
                                 "python", 10.0, {"invalid_image"}),
    # a link named .png is never followed nor chosen
    "png_symlink_to_tree_file": (DRAW + "import os\nplt.savefig('a.png')\nplt.close()\n"
                                 "os.symlink('/etc/passwd', 'z.png')\n", "python", 10.0, {"ok"}),
    # a sparse out.png of 30 MiB (no block written): refused by its size, before anything of it is read
    "out_png_sparse_30_mib": (DRAW + "plt.savefig('out.png')\nopen('out.png', 'r+b').truncate(30 << 20)\n", "python",
                              10.0, {"too_large"}),
    "out_png_links_to_passwd": ("import os\nos.symlink('/etc/passwd', 'out.png')\n" + DRAW + "plt.close()\n",
                                "python", 10.0, {"invalid_image"}),
    # raster files other than PNG, chosen only where no PNG was written: written as a PNG in the job, or refused
    "jpg_that_is_text": ("open('a.jpg', 'w').write('hello')\n", "python", 10.0, {"invalid_image"}),
    "gif_header_5000_px": (GIF_HEADER.format(w=5000, h=5000), "python", 10.0, {"too_large"}),
    "gif_header_decompression_bomb": (GIF_HEADER.format(w=60000, h=60000), "python", 10.0, {"too_large"}),
    "jpg_named_link_to_tree_dir": ("import os\nos.symlink('/usr/share/fonts', 'a.jpg')\n", "python", 10.0,
                                   {"no_output"}),
    "truncated_jpeg": (DRAW + "plt.savefig('a.jpg')\nplt.close()\nd = open('a.jpg', 'rb').read()\n"
                       "open('a.jpg', 'wb').write(d[:len(d) // 2])\n", "python", 10.0, {"invalid_image"}),
    # PIL sniffs content: an EPS named .jpg would run Ghostscript (a fork); only the raster formats are opened, so it
    # is moved to out.png as it is and refused as no PNG
    "eps_named_jpg": ("open('a.jpg', 'w').write('%!PS-Adobe-3.0 EPSF-3.0\\n%%BoundingBox: 0 0 10 10\\nshowpage\\n')\n",
                      "python", 10.0, {"invalid_image"}),
    # a PNG named .gif: PIL's raster formats refuse it, the supervisor checks it as the PNG it is
    "png_named_gif": (DRAW + "plt.savefig('a.gif', format='png')\nplt.close()\n", "python", 10.0, {"ok"}),
    # an SVG file as the stand-in is screened and fetched as an SVG job is
    "svg_file_with_host_image": ("open('x.svg', 'w').write('" + SVGH + "<image href=\"file:///etc/shadow\" width=\"9\" "
                                 "height=\"9\"/></svg>')\n", "python", 10.0, {"forbidden"}),
    "svg_file_past_size_cap": ("open('x.svg', 'w').write('<svg>' + ' ' * (2 << 20) + '</svg>')\n", "python", 10.0,
                               {"too_large"}),
    "svg_file_with_entity_declaration": ("open('x.svg', 'w').write('<!DOCTYPE svg [<!ENTITY a \"b\">]>" + SVGH +
                                         "<text>&a;</text></svg>')\n", "python", 10.0, {"forbidden"}),
    "figure_dpi_nan": (PLT + "fig = plt.figure(figsize=(2, 2))\nfig.dpi = float('nan')\n", "python", 10.0,
                       {"invalid_size"}),
    # review of the raster stand-in: a second hard link to the chart is the chart (converted in the job, out.png is a
    # fresh file of one link); a 200-page TIFF gives its first page; 2000 px of noise as JPEG is past max_png_bytes as
    # a PNG, refused by the supervisor's size check, not written as a smaller image
    "jpg_with_a_second_hard_link": (DRAW + "plt.savefig('a.jpg')\nplt.close()\nimport os\nos.link('a.jpg', 'b.jpg')\n",
                                    "python", 10.0, {"ok"}),
    "tiff_of_200_pages": ("from PIL import Image\nims = [Image.new('RGB', (50, 50), (i, 0, 0)) for i in range(200)]\n"
                          "ims[0].save('a.tif', save_all=True, append_images=ims[1:])\n", "python", 10.0, {"ok"}),
    "jpg_of_noise_past_png_bytes": ("import numpy as np\nfrom PIL import Image\nrng = np.random.default_rng(0)\n"
                                    "Image.fromarray(rng.integers(0, 256, (2000, 2000, 3), dtype=np.uint8))"
                                    ".save('a.jpg', quality=95)\n", "python", 10.0, {"too_large"}),
    "fifo_named_jpg_and_svg": ("import os\nos.mkfifo('a.jpg')\nos.mkfifo('b.svg')\n", "python", 10.0, {"no_output"}),
}

# The result channel and the job's own signals / process group
CHANNEL = {
    # an "ok" frame of the job's own without any image: no image is no image
    "forged_ok_frame_no_png": ("import os\nos.write(3, b'ok\\ncurrent figure')\nos._exit(0)\n", "python", 10.0,
                               {"no_output"}),
    # stdout pointed at the result pipe: a print lands in the frame before the worker's own
    "stdout_onto_result_pipe": ("import os\nos.dup2(3, 1)\nprint('ok')\n" + DRAW, "python", 10.0, {"ok", "protocol"}),
    # SIGSTOP to its main thread from another: the pid namespace's init ignores it, the job renders
    "stop_signal_from_a_thread": ("import signal, threading\nt = threading.Thread(target=signal.pthread_kill, "
                                  "args=(threading.main_thread().ident, signal.SIGSTOP))\nt.start()\nt.join()\n" + DRAW,
                                  "python", 5.0, {"ok"}),
    # a process group of its own would escape the supervisor's renice of the job's group: a session leader may not
    "setpgid_out_of_session": ("import os\nos.setpgid(0, 0)\n" + DRAW, "python", 10.0, {"forbidden"}),
}

# Hyperlinks used to smuggle a fetch: only an <a>'s own href is free, and only if no url() hides in it
SVG_LINKS = {
    "link_to_javascript_url": (SVGH + '<a href="javascript:alert(1)"><rect width="9" height="9"/></a></svg>', "svg",
                               10.0, {"ok"}),
    "link_url_split_by_tab": (SVGH + '<a href="u&#9;rl(file:///etc/passwd)"><rect width="9" height="9"/></a></svg>',
                              "svg", 10.0, {"forbidden"}),
    # cairosvg's tag of an element in another namespace is "{ns}a", and parse_def matches "image" in it
    "link_in_image_namespace": ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:i="http://image.example/" width="9" '
                                'height="9"><i:a href="http://x/"/></svg>', "svg", 10.0, {"forbidden"}),
    "link_uppercase_tag": (SVGH + '<A href="http://x/"><rect width="9" height="9"/></A></svg>', "svg", 10.0,
                           {"forbidden"}),
    "link_around_external_image": (SVGH + '<a href="https://x/"><image href="file:///etc/passwd" width="9" '
                                   'height="9"/></a></svg>', "svg", 10.0, {"forbidden"}),
    "link_around_external_textpath": (SVGH + '<a href="#p"><text><textPath href="https://x/doc.svg#p">t</textPath>'
                                      '</text></a></svg>', "svg", 10.0, {"forbidden"}),
    "link_with_xml_base": (SVGH + '<a xml:base="file:///etc/" href="passwd"><rect width="9" height="9"/></a></svg>',
                           "svg", 10.0, {"forbidden"}),
    # a <use> of a link element draws its content; the link's href is still not fetched (the fetcher would refuse)
    "use_of_link_to_host_file": (SVGH + '<defs><a id="l" href="file:///etc/passwd"><rect width="9" height="9"/></a>'
                                 '</defs><use href="#l"/></svg>', "svg", 10.0, {"ok"}),
    "link_href_in_other_namespace": ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:e="http://e/" width="9" '
                                     'height="9"><a e:href="file:///etc/passwd"><image width="9" height="9"/></a>'
                                     '</svg>', "svg", 10.0, {"forbidden"}),
    "link_href_as_css_property": (SVGH + '<a href="#x" style="href: file:///etc/passwd"><rect width="9" height="9"/>'
                                  '</a></svg>', "svg", 10.0, {"forbidden"}),
    # review: what cairosvg does read under a link. A <tref> child's own href is screened as any href; a <textPath>
    # child reads its parent link's href for a #fragment lookup among the document's paths only; an XHTML <a> outside
    # a <foreignObject> hands no href to an <image> inside it (hrefs are not inherited); a link's id as a pattern's
    # parent in an href chain copies attributes, never fetches
    "link_wrapping_tref_to_host_file": (SVGH + '<text><a href="https://x/"><tref xlink:href="file:///etc/shadow#t"/>'
                                        '</a></text></svg>', "svg", 10.0, {"forbidden"}),
    "link_wrapping_local_tref": (SVGH + '<defs><text id="t">hi</text></defs><text y="20"><a href="file:///etc/shadow#t">'
                                 '<tref xlink:href="#t"/></a></text></svg>', "svg", 10.0, {"ok"}),
    "link_fragment_read_by_textpath_child": (SVGH + '<defs><path id="p" d="M0 10 L40 10"/></defs><text><a href="file:'
                                             '///etc/shadow#p"><textPath>hi</textPath></a></text></svg>', "svg", 10.0,
                                             {"ok"}),
    "xhtml_link_outside_foreign_object_around_image": ('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30">'
                                                       '<h:a xmlns:h="http://www.w3.org/1999/xhtml" href="file:///etc/'
                                                       'shadow"><image width="9" height="9"/></h:a></svg>', "svg",
                                                       10.0, {"ok"}),
    "link_as_pattern_href_parent": (SVGH + '<defs><a id="p" href="file:///etc/shadow"/><pattern id="q" href="#p" '
                                    'width="9" height="9"/></defs><rect width="9" height="9" fill="url(#q)"/></svg>',
                                    "svg", 10.0, {"ok"}),
}

GROUPS = {"account": ACCOUNT, "image_choice": IMAGE_CHOICE, "channel": CHANNEL, "svg_links": SVG_LINKS}


def test_the_batch_is_new_and_large():
    from test_render_hostile21 import check_batch_is_new
    from test_render_hostile29 import GROUPS as GROUPS29
    from test_render_hostile30 import GROUPS as GROUPS30
    from test_render_hostile31 import GROUPS as GROUPS31

    check_batch_is_new(GROUPS, GROUPS29, GROUPS30, GROUPS31)


@pytest.mark.parametrize("group", list(GROUPS))
def test_batch_outcomes(render_pool, group):
    from test_render_hostile21 import HOST_TMP, check_batch

    got = check_batch(render_pool, GROUPS[group],
                      stray_dirs=[(d, TOKEN) for d in (HOST_TMP, "/dev/shm", os.path.expanduser("~"), "/")])
    print(json.dumps({n: got[n] for n in GROUPS[group]}, indent=0))
    assert not os.path.exists(os.path.join(HOST_TMP, TOKEN))
    for name, (kind, message, elapsed_s) in got.items():
        assert elapsed_s < GROUPS[group][name][2] + 6, (name, elapsed_s)


def test_a_chosen_png_name_is_escaped_job_text(render_pool):
    r = render_pool.render(RenderJob(IMAGE_CHOICE["png_name_with_escapes"][0]))
    assert r.ok and r.message.startswith("job: '\\x1b[2J\\u202eAAAA"), r.message[:80]
    assert "\x1b" not in r.message and "\u202e" not in r.message and len(r.message) <= 1010


# -- the fixes this pass made ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("ext, size", [("jpg", (200, 150)), ("jpeg", (200, 150)), ("webp", (200, 150)),
                                       ("tif", (200, 150)), ("gif", (200, 150))])
def test_a_chart_saved_in_another_raster_format_renders(render_pool, ext, size):
    # before: `no_output`, "the code drew no figure and wrote no out.png": only a .png the code wrote was its image
    code = (PLT + "import os\nos.mkdir('figs')\nplt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 2], color='red')\n"
            f"plt.savefig('figs/chart.{ext}')\nplt.close()\n")
    r = render_pool.render(RenderJob(code))
    assert r.ok and (r.width, r.height) == size, (r.error_kind, r.message)
    assert r.message == f"job: 'figs/chart.{ext}' written by the code, as PNG (no out.png, no open figure)"


def test_a_chart_saved_as_svg_renders(render_pool):
    # before: `no_output`: plt.savefig('chart.svg'); plt.close() left no PNG; now drawn as an SVG job (points: 4 x 3 in
    # is 288 x 216 pt, 384 x 288 px at cairosvg's 96 dpi)
    code = (PLT + "plt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 2], color='red')\nplt.title('$x^2$')\n"
            "plt.savefig('chart.svg')\nplt.close()\n")
    r = render_pool.render(RenderJob(code))
    assert r.ok and (r.width, r.height) == (384, 288), (r.error_kind, r.message)
    assert r.message == "job: 'chart.svg' written by the code, drawn as SVG (no out.png, no open figure)"


def test_a_png_is_chosen_before_any_other_raster(render_pool):
    code = (PLT + "plt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 2])\nplt.savefig('b.jpg', dpi=20)\n"
            "plt.savefig('a.png')\nplt.savefig('c.webp', dpi=20)\nplt.savefig('d.svg')\nplt.close()\n")
    r = render_pool.render(RenderJob(code))
    assert r.ok and (r.width, r.height) == (200, 150) and "'a.png'" in r.message, r


def test_the_job_uid_has_an_account_with_the_job_dir_as_home(render_pool):
    # before (no account anywhere): `crash`, "KeyError: 'getpwuid(): uid not found: 65533'" (pwd, getpass without USER /
    # LOGNAME), "KeyError: 'getgrgid(): gid not found'", "RuntimeError: Could not determine home directory."
    # (Path.home() without HOME), and expanduser('~') without HOME gave '~' back. With the tree's own account files
    # (reverted), /etc/passwd existed.
    code = ("import getpass, grp, os, pathlib, pwd\nfor k in ('HOME', 'USER', 'LOGNAME', 'LNAME', 'USERNAME'):\n"
            "    os.environ.pop(k, None)\np = pwd.getpwuid(os.getuid())\ng = grp.getgrgid(os.getgid())\n"
            "assert type(p) is pwd.struct_passwd and type(g) is grp.struct_group\n"
            "assert (p.pw_uid, p.pw_gid, p[2], p[3], g.gr_gid, g[2]) == (os.getuid(), os.getgid()) * 3\n"
            "assert pwd.getpwnam('render') == p and grp.getgrnam('render') == g and g.gr_mem == []\n"
            "assert [e for e in pwd.getpwall() if e.pw_name == 'render'] == [p]\n"
            "assert [e for e in grp.getgrall() if e.gr_name == 'render'] == [g]\n"
            "assert not any(os.path.lexists(f) for f in ('/etc/passwd', '/etc/group', '/etc/nsswitch.conf'))\n"
            "raise RuntimeError(' '.join([p[0], p.pw_dir, p.pw_shell, p.pw_passwd, g.gr_name, getpass.getuser(), "
            "os.path.expanduser('~'), str(pathlib.Path.home()), os.path.expanduser('~render/x')]))\n")
    r = render_pool.render(RenderJob(code))
    assert (r.error_kind, r.message) == (
        "crash", "job: RuntimeError: render /job /usr/sbin/nologin x render render /job /job /job/x"), r


def test_other_ids_and_names_keep_the_real_lookups_answer(render_pool):
    # only the job's own ids and the name `render` are answered; ids and names no NSS module of any host synthesizes
    # (systemd's root and nobody are host-dependent) stay the real lookup's own KeyError
    code = ("import grp, os, pwd\nout = []\nu = os.getuid()\n"
            "for f, k in ((pwd.getpwuid, 1), (pwd.getpwuid, u - 1), (pwd.getpwnam, 'daemon'), (pwd.getpwnam, 'Render'), "
            "(pwd.getpwnam, 'render '), (grp.getgrgid, 1), (grp.getgrgid, u - 1), (grp.getgrnam, 'daemon')):\n"
            "    try:\n        out.append(repr(f(k)))\n    except KeyError as e:\n        out.append(repr(e))\n"
            "raise RuntimeError(' | '.join(out))\n")
    r = render_pool.render(RenderJob(code))
    assert r.error_kind == "crash" and r.message.startswith("job: RuntimeError: KeyError("), r
    uid = int(r.message.split("uid not found: ")[2].split("'")[0]) + 1
    assert r.message.removeprefix("job: RuntimeError: ").split(" | ") == [
        "KeyError('getpwuid(): uid not found: 1')", f"KeyError('getpwuid(): uid not found: {uid - 1}')",
        "KeyError(\"getpwnam(): name not found: 'daemon'\")", "KeyError(\"getpwnam(): name not found: 'Render'\")",
        "KeyError(\"getpwnam(): name not found: 'render '\")", "KeyError('getgrgid(): gid not found: 1')",
        f"KeyError('getgrgid(): gid not found: {uid - 1}')", "KeyError(\"getgrnam(): name not found: 'daemon'\")"], r
    r = render_pool.render(RenderJob("import pwd\npwd.getpwnam('nobody-here')\n"))
    assert (r.error_kind, r.message) == ("crash", "job: KeyError: \"getpwnam(): name not found: 'nobody-here'\""), r


def test_etc_passwd_is_forbidden_and_a_job_drawing_it_is_not_ok(render_pool):
    # with the tree's own /etc/passwd (reverted): the read was `no_output`, and a job that drew what it read was `ok`
    r = render_pool.render(RenderJob("open('/etc/passwd').read()\n"))
    assert r.error_kind == "forbidden" and "/etc/passwd" in r.message, r
    drawn = (DRAW + "plt.title(open('/etc/passwd').read()[:200])\nplt.text(1, 1.5, open('/etc/group').read()[:200])\n")
    r = render_pool.render(RenderJob(drawn))
    assert not r.ok and r.png is None and r.error_kind == "forbidden" and "/etc/passwd" in r.message, r
    for path in ("/etc/group", "/etc/nsswitch.conf"):
        r = render_pool.render(RenderJob(f"open({path!r}).read()\n"))
        assert r.error_kind == "forbidden" and path in r.message, (path, r)


def test_job_lookups_answer_for_the_job_only():
    import grp
    import pwd

    import numpy as np

    from render.job_account import job_lookups

    # ids this host has no entry for: the job's, and another
    taken = {e.pw_uid for e in pwd.getpwall()} | {e.gr_gid for e in grp.getgrall()}
    uid, gid, other = [i for i in range(65533, 60000, -1) if i not in taken][:3]
    f = {name: fn for (_, name), fn in job_lookups(uid, gid, "/job").items()}
    entry = f["getpwuid"](uid)
    assert type(entry) is pwd.struct_passwd
    assert tuple(entry) == ("render", "x", uid, gid, "render", "/job", "/usr/sbin/nologin")
    assert f["getpwnam"]("render") == entry and entry[5] == entry.pw_dir == "/job"
    assert f["getpwuid"](np.int64(uid)) == entry  # any integer the real lookup takes
    group = f["getgrgid"](gid)
    assert type(group) is grp.struct_group and tuple(group) == ("render", "x", gid, [])
    assert f["getgrnam"]("render") == group
    group.gr_mem.append("root")  # each answer is fresh, as grp's are
    assert f["getgrnam"]("render").gr_mem == [] and f["getgrgid"](gid).gr_mem == []
    # every other key keeps the real answer: an entry, or the same KeyError
    assert f["getpwuid"](0) == pwd.getpwuid(0) and f["getgrgid"](0) == grp.getgrgid(0)
    assert f["getpwnam"]("root") == pwd.getpwnam("root")
    for name, key, real in (("getpwuid", other, pwd.getpwuid), ("getpwuid", gid, pwd.getpwuid),
                            ("getgrgid", other, grp.getgrgid), ("getgrgid", uid, grp.getgrgid),
                            ("getpwnam", "Render", pwd.getpwnam), ("getgrnam", "render ", grp.getgrnam)):
        with pytest.raises(KeyError) as expected:
            real(key)
        with pytest.raises(KeyError) as got:
            f[name](key)
        assert got.value.args == expected.value.args, (name, key)
    for bad, error in (("render\x00", ValueError), (b"render", TypeError)):
        with pytest.raises(error):
            f["getpwnam"](bad)
    with pytest.raises(TypeError):
        f["getpwuid"](float(uid))
    # getpwall / getgrall: the real entries, plus the job's where its id has none
    assert f["getpwall"]() == pwd.getpwall() + [entry]
    assert f["getgrall"]() == grp.getgrall() + [grp.struct_group(("render", "x", gid, []))]
    root = {n: fn() for (_, n), fn in job_lookups(0, 0, "/job").items() if n.endswith("all")}
    assert root == {"getpwall": pwd.getpwall(), "getgrall": grp.getgrall()}  # ids with a real entry add none


def test_the_lookups_reach_nothing_of_the_worker():
    # the wrappers' module imports nothing of the worker, and their closures hold only the real lookups and the
    # job's constant fields: a job walking __globals__ / __closure__ finds no worker state there
    import types

    import render.job_account as ja

    names = {n for n in vars(ja) if not n.startswith("__")}
    assert names == {"functools", "grp", "operator", "pwd", "JOB_USER", "JOB_SHELL", "job_passwd_entry",
                     "job_group_entry", "_or_job_entry", "_all_with_job_entry", "job_lookups", "install"}
    seen, todo = set(), list(ja.job_lookups(65533, 65533, "/job").values())
    leaves = set()
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        assert fn.__globals__ is vars(ja), fn
        for cell in fn.__closure__ or ():
            value = cell.cell_contents
            if isinstance(value, types.FunctionType):
                todo.append(value)
            else:
                leaves.add(type(value).__name__)
    assert leaves <= {"builtin_function_or_method", "int", "str", "struct_passwd"}, leaves


def test_install_replaces_the_module_functions_only(tmp_path):
    # in a child interpreter (the test process keeps its lookups): after install, the job's uid is answered through
    # the module attributes that getpass / expanduser / Path.home read
    import subprocess

    code = ("import getpass, grp, os, pathlib, pwd\nfrom render import job_account\n"
            "uid = next(u for u in range(65533, 60000, -1) if u not in {e.pw_uid for e in pwd.getpwall()})\n"
            "os.environ.pop('HOME', None)\nos.environ.pop('USER', None)\nos.environ.pop('LOGNAME', None)\n"
            "os.environ.pop('LNAME', None)\nos.environ.pop('USERNAME', None)\n"
            "os.getuid = lambda: uid\njob_account.install(uid, uid, '/job')\n"
            "print(getpass.getuser(), os.path.expanduser('~'), pathlib.Path.home(), pwd.getpwuid(uid).pw_shell)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0 and out.stdout == "render /job /job /usr/sbin/nologin\n", out.stderr


def test_svg_hyperlinks_pass_the_screen_and_render(render_pool):
    # before: `forbidden`, "SVG attribute href: reference to an external resource is not allowed: 'https://...'":
    # cairosvg never fetches an <a> href (it draws <a> as text and reads the href for a #fragment path lookup only)
    from render.svg import check_svg

    links = [SVGH + '<a href="https://example.org/report?id=3#fig2"><rect width="9" height="9"/></a></svg>',
             SVGH + '<a xlink:href="file:///etc/passwd"><rect width="9" height="9"/></a></svg>',
             '<s:svg xmlns:s="http://www.w3.org/2000/svg" width="40" height="30"><s:a href="mailto:x@y.org">'
             '<s:rect width="9" height="9"/></s:a></s:svg>',
             SVGH + '<foreignObject width="40" height="20"><div xmlns="http://www.w3.org/1999/xhtml">See <a '
             'href="https://example.org/">the source</a></div></foreignObject><rect width="9" height="9"/></svg>']
    for svg in links:
        assert check_svg(svg) is None, svg
    rs = render_pool.render_many([RenderJob(svg, "svg") for svg in links], timeout_s=10.0)
    assert [(r.ok, r.width, r.height) for r in rs] == [(True, 40, 30)] * len(links), rs


def test_what_cairosvg_fetches_stays_refused():
    from render.svg import check_svg

    fetched = ['<image href="https://x/a.png" width="9" height="9"/>', '<image xlink:href="/etc/passwd"/>',
               '<use href="other.svg#a"/>', '<use xlink:href="file:///etc/x.svg#a"/>',
               '<text><tref xlink:href="https://x/t.svg#t"/></text>', '<text><textPath href="https://x/p.svg#p">t'
               '</textPath></text>', '<style>@import "https://x/s.css";</style>',
               '<rect width="9" height="9" fill="url(https://x/p.svg#g)"/>', '<linearGradient id="g" '
               'xlink:href="https://x/g.svg#g"/>', '<a href="#a url(file:///etc/passwd)"/>']
    for body in fetched:
        assert check_svg(SVGH + body + "</svg>")[0] == "forbidden", body


@pytest.mark.parametrize("name", list(LEGIT_PYTHON))
def test_legitimate_python_renders(render_pool, name):
    code, size = LEGIT_PYTHON[name]
    r = render_pool.render(RenderJob(code), timeout_s=30.0)
    assert r.ok and (r.width, r.height) == size, (name, r.error_kind, r.message)


def test_legitimate_svg_renders(render_pool):
    rs = render_pool.render_many([RenderJob(s, "svg") for s in LEGIT_SVG.values()], timeout_s=30.0)
    got = {n: (r.ok, r.width, r.height, r.error_kind, r.message) for n, r in zip(LEGIT_SVG, rs)}
    assert all(v[:3] == (True, 200, 120) for v in got.values()), got
