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
   ``max_side``), as the same dpi set on the figure was; a genuine crash inside ``savefig`` stays a ``crash``.

Then hostile programs (ctypes, /proc, signals, threads outliving the job, odd output formats, links on the output,
SVG entities / XInclude / CSS imports / data: URIs, fonts, rcParams naming host files, saves outside the job dir,
the environment), each pinned to its label with test_render_hostile21's host checks, and legitimate programs that
must render."""

import json
import os
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from conftest import drawn_pixels, ink_spreads, png_image  # noqa: E402
from render import RenderJob  # noqa: E402

TOKEN = "hostile35canary"
PLT = "import matplotlib.pyplot as plt\n"
NP = PLT + "import numpy as np\n"
DRAW = PLT + "plt.figure(figsize=(1, 1), dpi=40)\nplt.plot([2, 1])\n"
SVGNS = '<svg xmlns="http://www.w3.org/2000/svg" '
SVG = SVGNS + 'xmlns:xlink="http://www.w3.org/1999/xlink" width="30" height="20">'
CIRCLE = '<circle cx="50" cy="50" r="40" fill="red"/></svg>'
FILL = '<rect width="5000" height="5000" fill="red"/></svg>'  # every pixel of any size drawn


_image = png_image


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


# -- hostile programs ----------------------------------------------------------------------------------------------
HOST_TMP_TOKEN = "/tmp/" + TOKEN  # where a write outside the job dir would land (check_batch looks there)
FAIL_IF_OPENED = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                  "fd = libc.open({path!r}.encode(), {flags})\n"
                  "if fd < 0:\n    e = ctypes.get_errno()\n    raise OSError(e, os.strerror(e), {path!r})\n")

# C-level access through ctypes and raw system calls: the same walls as Python's own calls
NATIVE = {
    "ctypes_libc_open_host_file": (FAIL_IF_OPENED.format(path="/etc/hostname", flags=0) + DRAW, "python", 10.0,
                                   {"forbidden"}),
    "ctypes_libc_creat_in_host_tmp": (FAIL_IF_OPENED.format(path=HOST_TMP_TOKEN, flags=0o101) + DRAW, "python", 10.0,
                                      {"forbidden"}),
    "ctypes_libc_open_proc_kcore": (FAIL_IF_OPENED.format(path="/proc/kcore", flags=0) + DRAW, "python", 10.0,
                                    {"forbidden"}),
    # io_uring would run file operations in kernel threads, outside the filter's view of each call
    "ctypes_io_uring_setup": ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                              "p = ctypes.create_string_buffer(120)\nfd = libc.syscall(425, 8, p)\n"
                              "if fd < 0:\n    e = ctypes.get_errno()\n    raise OSError(e, os.strerror(e))\n" + DRAW,
                              "python", 10.0, {"forbidden"}),
    "ctypes_vfork_child": ("import ctypes\nlibc = ctypes.CDLL(None)\npid = libc.vfork()\nif pid == 0:\n"
                           "    libc._exit(0)\n" + DRAW, "python", 10.0, {"forbidden"}),
    # clone3 answers ENOSYS (its flags are in memory the filter cannot read), so libc falls back to clone: a crash
    "ctypes_clone3_thread_less": ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                                  "args = (ctypes.c_uint64 * 11)()\nr = libc.syscall(435, args, 88)\n"
                                  "if r == 0:\n    os._exit(0)\nif r < 0:\n    e = ctypes.get_errno()\n"
                                  "    raise OSError(e, os.strerror(e))\n" + DRAW, "python", 10.0, {"crash"}),
    "ctypes_keyctl_read_session_keyring": ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                                           "buf = ctypes.create_string_buffer(4096)\n"
                                           "n = libc.syscall(250, 11, ctypes.c_long(-3), buf, 4096)\n"
                                           "if n < 0:\n    e = ctypes.get_errno()\n    raise OSError(e, os.strerror(e))\n"
                                           "raise RuntimeError(buf.raw[:n])\n", "python", 10.0, {"forbidden"}),
    # a mapping of the job's own memory file, and one of a host file: nothing to map from outside the job
    "mmap_proc_self_mem": ("import mmap\nf = open('/proc/self/mem', 'rb')\nmmap.mmap(f.fileno(), 4096, "
                           "prot=mmap.PROT_READ)\n" + DRAW, "python", 10.0, {"forbidden"}),
    "mmap_proc_self_environ_of_pid_1": ("import mmap\nf = open('/proc/1/environ', 'rb')\nm = mmap.mmap(f.fileno(), 0, "
                                        "prot=mmap.PROT_READ)\n" + DRAW, "python", 10.0, {"forbidden"}),
}

# Watching and exhausting: no view of host file activity, no resource past the job's limits
LIBC = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
RAISE_ERRNO = "if {r} < 0:\n    e = ctypes.get_errno()\n    raise OSError(e, os.strerror(e))\n"
RESOURCES = {
    # a watch on a bound host directory would see host processes open its files (bind mounts share inodes)
    "inotify_on_bound_site_packages": (LIBC + "fd = libc.inotify_init1(0)\n" + RAISE_ERRNO.format(r="fd") +
                                       "import matplotlib\nw = libc.inotify_add_watch(fd, matplotlib.get_data_path()"
                                       ".encode(), 0xfff)\n" + RAISE_ERRNO.format(r="w") + DRAW, "python", 10.0,
                                       {"forbidden"}),
    "fanotify_mark_whole_mount": (LIBC + "fd = libc.fanotify_init(0, 0)\n" + RAISE_ERRNO.format(r="fd") + DRAW,
                                  "python", 10.0, {"forbidden"}),
    "eventfds_until_the_table_is_full": ("import os\nfds = []\nwhile True:\n    fds.append(os.eventfd(0))\n",
                                         "python", 10.0, {"forbidden"}),
    # memfd_create is refused (a memory file outside the job's tmpfs and its size limit)
    "memfd_grown_and_touched_past_memory": ("import os, mmap\nfd = os.memfd_create('m')\nos.ftruncate(fd, 8 << 30)\n"
                                            "m = mmap.mmap(fd, 8 << 30)\nfor i in range(0, 8 << 30, 1 << 20):\n"
                                            "    m[i] = 1\n", "python", 20.0, {"forbidden"}),
    "fork_from_many_threads": ("import os, threading\nts = [threading.Thread(target=os.fork) for _ in range(8)]\n"
                               "[t.start() for t in ts]\n[t.join() for t in ts]\n" + DRAW, "python", 10.0,
                               {"forbidden"}),
}

# Signals and threads: nothing reaches past the job, nothing of the job outlives it
SIGNALS = {
    # kill(-1) from the pid namespace's init reaches only the namespace (the job itself is spared)
    "kill_every_process_it_can": ("import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n"
                                  "    pass\n" + DRAW, "python", 10.0, {"ok"}),
    # its parent is outside its pid namespace: getppid() is 0, and kill(0) (its own process group) is refused
    "kill_parent_by_getppid": ("import os, signal\nos.kill(os.getppid(), signal.SIGTERM)\n" + DRAW, "python", 10.0,
                               {"forbidden"}),
    # SIGXCPU ignored and SIGALRM caught: the wall clock ends it all the same
    "cpu_and_alarm_signals_ignored_while_spinning": ("import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\n"
                                                     "signal.signal(signal.SIGALRM, lambda *a: None)\nsignal.alarm(1)\n"
                                                     "while True:\n    pass\n", "python", 3.0, {"timeout"}),
    "thread_writes_outside_after_main_ends": ("import threading, time\ndef late():\n    time.sleep(1.5)\n"
                                              f"    open({HOST_TMP_TOKEN + '.late'!r}, 'w').write('x')\n"
                                              "threading.Thread(target=late, daemon=False).start()\n" + DRAW,
                                              "python", 10.0, {"ok"}),
    "thread_overwrites_out_png_after_main_ends": ("import threading, time\ndef late():\n    time.sleep(1.0)\n"
                                                  "    open('/job/out.png', 'wb').write(b'not a png')\n"
                                                  "threading.Thread(target=late).start()\n" + DRAW +
                                                  "plt.savefig('out.png')\n", "python", 10.0, {"ok"}),
    "atexit_and_signal_handler_write_outside": ("import atexit, signal, os\n"
                                                f"w = lambda *a: open({HOST_TMP_TOKEN + '.exit'!r}, 'w').write('x')\n"
                                                "atexit.register(w)\nsignal.signal(signal.SIGTERM, w)\n"
                                                "signal.signal(signal.SIGHUP, w)\n" + DRAW, "python", 10.0, {"ok"}),
}

# Output in odd formats, and links on the output file
OUTPUT = {
    "bmp_header_of_60000_px": ("import struct\nhdr = b'BM' + struct.pack('<IHHI', 54, 0, 0, 54) + "
                               "struct.pack('<IiiHHIIiiII', 40, 60000, 60000, 1, 24, 0, 0, 0, 0, 0, 0)\n"
                               "open('a.bmp', 'wb').write(hdr + b'\\0' * 64)\n", "python", 10.0, {"too_large"}),
    "webp_of_16000_px_canvas": ("from PIL import Image\nImage.new('L', (16000, 4), 0).save('a.webp', lossless=True)\n",
                                "python", 10.0, {"too_large"}),
    "tiff_header_past_max_side_sparse": ("from PIL import Image\nImage.new('1', (9000, 9000)).save('a.tif')\n",
                                         "python", 10.0, {"too_large"}),
    "out_png_dangling_link_outside_with_open_figure": (f"import os\nos.symlink({HOST_TMP_TOKEN + '.png'!r}, 'out.png')\n"
                                                       + DRAW, "python", 10.0, {"invalid_image"}),
    "savefig_through_dir_link_to_host_tmp": (f"import os\nos.symlink('/tmp', 'd')\n" + DRAW +
                                             f"plt.savefig('d/{TOKEN}.png')\n", "python", 10.0, {"forbidden"}),
    "hard_link_of_host_font_as_out_png": ("import os, matplotlib\nf = os.path.join(matplotlib.get_data_path(), "
                                          "'images', 'home.png')\nos.link(f, 'out.png')\n", "python", 10.0,
                                          {"forbidden"}),
    "savefig_to_result_pipe_by_proc_fd": (DRAW + "plt.savefig('/proc/self/fd/3', format='png')\n", "python", 10.0,
                                          {"forbidden", "protocol"}),
    "savefig_to_dev_shm": (DRAW + f"plt.savefig('/dev/shm/{TOKEN}.png')\n", "python", 10.0, {"forbidden"}),
    "savefig_via_proc_cwd_dotdot": (DRAW + f"plt.savefig('/proc/self/cwd/../tmp/{TOKEN}.png')\n", "python", 10.0,
                                    {"forbidden"}),
}

# matplotlib's own files: fonts, styles and rc files named by host paths
MPL = {
    "addfont_of_host_secret": ("from matplotlib import font_manager\nfont_manager.fontManager.addfont('/etc/shadow')\n"
                               + DRAW, "python", 10.0, {"forbidden"}),
    "font_file_crafted_in_job_dir": ("open('f.ttf', 'wb').write(b'\\0\\1\\0\\0' + b'\\xff' * 4096)\n"
                                     "from matplotlib import font_manager\nfont_manager.fontManager.addfont('f.ttf')\n"
                                     + DRAW, "python", 10.0, {"crash"}),
    "fontproperties_fname_in_root_home": (DRAW + "from matplotlib.font_manager import FontProperties\n"
                                          "plt.title('x', fontproperties=FontProperties(fname='/root/.fonts/a.ttf'))\n"
                                          "plt.gcf().canvas.draw()\n", "python", 10.0, {"forbidden"}),
    "style_use_host_file": ("import matplotlib.pyplot as plt\nplt.style.use('/etc/passwd')\n" + DRAW, "python", 10.0,
                            {"forbidden"}),
    "rc_file_from_host_home": ("import matplotlib\nmatplotlib.rc_file('/root/.config/matplotlib/matplotlibrc')\n"
                               + DRAW, "python", 10.0, {"forbidden"}),
    "rcparams_ffmpeg_path_to_shell": (DRAW + "import matplotlib.animation as an\n"
                                      "plt.rcParams['animation.ffmpeg_path'] = '/bin/sh'\n"
                                      "a = an.FuncAnimation(plt.gcf(), lambda i: None, frames=2)\n"
                                      "a.save('a.mp4', writer=an.FFMpegWriter())\n", "python", 10.0, {"forbidden"}),
    "rcparams_savefig_directory_host": (DRAW + "plt.rcParams['savefig.directory'] = '/tmp'\n"
                                        f"plt.savefig('{TOKEN}.png')\nplt.close()\n", "python", 10.0, {"ok"}),
}

# The environment: the job's is set afresh, nothing of the pool's caller in it
SECRETS = {
    "environ_secret_scan": ("import os, json\nraise RuntimeError(json.dumps(sorted(k for k in os.environ if k not in "
                            "('HOME', 'TMPDIR', 'MPLCONFIGDIR', 'USER', 'LOGNAME', 'PATH', 'LANG', 'LC_ALL', "
                            "'PYTHONHASHSEED', 'MPLBACKEND', 'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', "
                            "'MKL_NUM_THREADS'))))\n", "python", 10.0, {"crash"}),
    "environ_of_every_visible_pid": ("import os, json\nfound = {}\nfor p in os.listdir('/proc'):\n    if p.isdigit():\n"
                                     "        try:\n            found[p] = len(open(f'/proc/{p}/environ', 'rb').read())\n"
                                     "        except OSError as e:\n            found[p] = e.errno\n"
                                     "raise RuntimeError(json.dumps(sorted(found)))\n", "python", 10.0, {"crash"}),
}

# SVG: entities, XInclude, CSS imports, data: URIs, fonts
SVG_FETCH = {
    "svg_parameter_entity_from_host": ('<!DOCTYPE svg [<!ENTITY % p SYSTEM "file:///etc/hostname"> %p;]>' + SVG +
                                       '</svg>', "svg", 10.0, {"forbidden"}),
    "svg_external_doctype_subset": ('<!DOCTYPE svg SYSTEM "file:///etc/hostname">' + SVG + '<text>&x;</text></svg>',
                                    "svg", 10.0, {"forbidden"}),
    "svg_xinclude_text_of_host_file": (SVG + '<text><xi:include xmlns:xi="http://www.w3.org/2001/XInclude" '
                                       'href="/etc/hostname" parse="text"/></text></svg>', "svg", 10.0, {"forbidden"}),
    "svg_css_import_escaped_at_rule": (SVG + '<style>@\\69mport url(file:///etc/hostname);</style></svg>', "svg", 10.0,
                                       {"forbidden"}),
    "svg_css_import_string_form": (SVG + '<style>@import "file:///etc/hostname";</style></svg>', "svg", 10.0,
                                   {"forbidden"}),
    "svg_font_face_src_host_font": (SVG + '<style>@font-face { font-family: h; src: url(file:///usr/share/fonts/a.ttf) }'
                                    '</style><text font-family="h">x</text></svg>', "svg", 10.0, {"forbidden"}),
    "svg_data_uri_png_type_holding_svg": (SVG + '<image width="9" height="9" href="data:image/png;base64,'
                                          'PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4="/></svg>', "svg",
                                          10.0, {"forbidden"}),
    "svg_data_uri_percent_encoded_document": (SVG + '<image width="9" height="9" href="data:,%3Csvg%20xmlns%3D%22http'
                                              '%3A%2F%2Fwww.w3.org%2F2000%2Fsvg%22%2F%3E"/></svg>', "svg", 10.0,
                                              {"forbidden"}),
    "svg_fe_image_of_host_file": (SVG + '<filter id="f"><feImage href="file:///etc/hostname"/></filter>'
                                  '<rect width="9" height="9" filter="url(#f)"/></svg>', "svg", 10.0, {"forbidden"}),
    "svg_cursor_url_attribute": (SVG + '<rect width="9" height="9" cursor="url(file:///etc/hostname), auto"/></svg>',
                                 "svg", 10.0, {"forbidden"}),
    "svg_stylesheet_processing_instruction": ('<?xml-stylesheet type="text/css" href="file:///etc/hostname"?>' + SVG +
                                              '</svg>', "svg", 10.0, {"forbidden"}),
    # the root's size forms this pass reads: large ones stay refused before drawing
    "svg_auto_width_huge_viewbox": (SVGNS + 'width="auto" height="auto" viewBox="0 0 100000 100000"></svg>', "svg",
                                    10.0, {"too_large"}),
    "svg_viewport_unit_width_past_max_side": (SVGNS + 'width="2000vw" height="1vh"></svg>', "svg", 10.0,
                                              {"too_large"}),
    "svg_style_rule_sizes_root_huge": (SVGNS + '><style>svg { width: 90000PX; height: 10REM }</style></svg>', "svg",
                                       10.0, {"too_large"}),
}

GROUPS = {"native": NATIVE, "resources": RESOURCES, "signals": SIGNALS, "output": OUTPUT, "mpl": MPL, "secrets": SECRETS,
          "svg_fetch": SVG_FETCH}


def test_the_batch_is_new_and_large():
    from test_render_hostile21 import check_batch_is_new
    from test_render_hostile29 import GROUPS as GROUPS29
    from test_render_hostile30 import GROUPS as GROUPS30
    from test_render_hostile31 import GROUPS as GROUPS31
    from test_render_hostile32 import GROUPS as GROUPS32
    from test_render_hostile33 import GROUPS as GROUPS33

    check_batch_is_new(GROUPS, GROUPS29, GROUPS30, GROUPS31, GROUPS32, GROUPS33)
    assert sum(map(len, GROUPS.values())) >= 30


@pytest.mark.parametrize("group", list(GROUPS))
def test_batch_outcomes(render_pool, group):
    from test_render_hostile21 import check_batch_in_time

    got = check_batch_in_time(render_pool, GROUPS[group], TOKEN)
    if group == "secrets":  # the job's environment is the worker's fresh one: nothing of the caller's
        assert got["environ_secret_scan"][1] == "job: RuntimeError: []", got["environ_secret_scan"]
        assert got["environ_of_every_visible_pid"][1] == 'job: RuntimeError: ["1"]', got["environ_of_every_visible_pid"]


# -- legitimate programs a coder model plausibly writes: each must render, at the size given -----------------------
LEGIT_PYTHON = {  # name: (code, (width, height))
    "savefig_dpi_figure_string": (NP + "x = np.linspace(0, 1, 20)\nplt.figure(figsize=(3, 2), dpi=80)\n"
                                  "plt.plot(x, x ** 2)\nplt.savefig('out.png', dpi='figure')\n", (240, 160)),
    "savefig_explicit_dpi_and_facecolor": (PLT + "fig, ax = plt.subplots(figsize=(2, 2))\nax.barh(['a', 'b'], [3, 5])\n"
                                           "fig.savefig('out.png', dpi=150, facecolor='lightyellow')\n", (300, 300)),
    "savefig_to_open_binary_file": (PLT + "fig = plt.figure(figsize=(3, 3))\nplt.scatter([1, 2, 3], [2, 3, 1], c='g')\n"
                                    "with open('out.png', 'wb') as f:\n    fig.savefig(f, format='png')\n", (300, 300)),
    "rc_context_and_style": (NP + "with plt.style.context('ggplot'), plt.rc_context({'lines.linewidth': 3}):\n"
                             "    fig, ax = plt.subplots(figsize=(4, 3))\n    ax.plot(np.arange(6), np.arange(6) ** 0.5)\n",
                             (400, 300)),
    "threads_computing_then_plotting": (NP + "from concurrent.futures import ThreadPoolExecutor\n"
                                        "with ThreadPoolExecutor(4) as ex:\n    ys = list(ex.map(lambda k: k * k, range(10)))\n"
                                        "plt.figure(figsize=(3, 2))\nplt.plot(ys, 'o-')\n", (300, 200)),
    "signal_timeout_guard_around_drawing": (PLT + "import signal\nsignal.signal(signal.SIGALRM, lambda *a: None)\n"
                                            "signal.alarm(5)\nplt.figure(figsize=(3, 2))\nplt.plot([3, 1, 2])\n"
                                            "signal.alarm(0)\n", (300, 200)),
    "tempfile_then_copy_to_out": (PLT + "import tempfile, shutil, os\nplt.figure(figsize=(2, 2))\nplt.plot([1, 3])\n"
                                  "d = tempfile.mkdtemp()\np = os.path.join(d, 'c.png')\nplt.savefig(p)\nplt.close()\n"
                                  "shutil.copy(p, 'out.png')\n", (200, 200)),
    "text_with_font_family_fallbacks": (PLT + "plt.figure(figsize=(4, 2))\nplt.text(0.1, 0.5, 'Area = 12 cm²', "
                                        "fontfamily=['Arial', 'Helvetica', 'DejaVu Sans'], fontsize=14)\nplt.axis('off')\n",
                                        (400, 200)),
    "environ_read_with_defaults": (PLT + "import os\nw = float(os.environ.get('FIG_W', '3'))\n"
                                   "plt.figure(figsize=(w, 2))\nplt.plot([0, 1], [1, 0])\nplt.title(os.environ.get('USER', '?'))\n",
                                   (300, 200)),
    "bbox_inches_tight_savefig_png": (NP + "fig, ax = plt.subplots(figsize=(3, 3))\nax.imshow(np.eye(4), cmap='gray')\n"
                                      "fig.savefig('grid.png', bbox_inches='tight', pad_inches=0)\nplt.close(fig)\n",
                                      None),
}
SVG_ROOT = SVGNS + 'xmlns:xlink="http://www.w3.org/1999/xlink" '
LEGIT_SVG = {  # name: (text, (width, height))
    "auto_sizes_with_viewbox_chart": (SVG_ROOT + 'width="auto" height="auto" viewBox="0 0 240 120"><polyline '
        'points="10,110 60,40 110,70 160,20 230,60" fill="none" stroke="steelblue" stroke-width="2"/></svg>', (240, 120)),
    "auto_sizes_no_viewbox_triangle": (SVG_ROOT + 'width="auto" height="auto"><polygon points="20,130 150,20 280,130" '
        'fill="#cde" stroke="black"/></svg>', (300, 150)),
    "sizes_in_uppercase_px": (SVG_ROOT + 'width="200PX" height="100PX"><rect x="20" y="20" width="160" height="60" '
        'fill="orange"/></svg>', (200, 100)),
    "sizes_in_rem": (SVG_ROOT + 'width="12rem" height="6rem"><circle cx="96" cy="48" r="40" fill="purple"/></svg>',
                     (192, 96)),
    "sizes_in_css_rule": (SVG_ROOT + '><style>svg { width: 180px; height: 90px } .c { fill: teal }</style>'
                          '<rect class="c" x="10" y="10" width="100" height="50"/></svg>', (180, 90)),
    "data_uri_png_image_inline": (SVG_ROOT + 'width="40" height="40"><image width="20" height="20" href="data:image/png;'
        'base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="/>'
        '<rect x="22" y="22" width="15" height="15" fill="black"/></svg>', (40, 40)),
}


@pytest.mark.parametrize("name", list(LEGIT_PYTHON))
def test_a_legitimate_plot_renders(render_pool, name):
    code, size = LEGIT_PYTHON[name]
    r = render_pool.render(RenderJob(code), timeout_s=20)
    assert r.ok and (size is None or (r.width, r.height) == size), (r.error_kind, r.message, r.width, r.height)
    spreads = ink_spreads(r.png)
    assert max(spreads) > 50, spreads  # ink on a background, not a blank canvas


@pytest.mark.parametrize("name", list(LEGIT_SVG))
def test_a_legitimate_svg_renders(render_pool, name):
    text, size = LEGIT_SVG[name]
    r = render_pool.render(RenderJob(text, "svg"), timeout_s=20)
    assert r.ok and (r.width, r.height) == size, (r.error_kind, r.message)
    assert 0 < drawn_pixels(r.png) < r.width * r.height * 0.95


def test_the_legitimate_programs_are_new_and_enough():
    from test_render_hostile32 import LEGIT_PYTHON as PY32, LEGIT_SVG as SVG32
    from test_render_hostile33 import LEGIT_PYTHON as PY33, LEGIT_SVG as SVG33

    mine = {**LEGIT_PYTHON, **LEGIT_SVG}
    earlier = {**PY32, **SVG32, **PY33, **SVG33}
    assert len(mine) >= 15 and not set(mine) & set(earlier)
    assert not {v[0] for v in mine.values()} & {v[0] for v in earlier.values()}
