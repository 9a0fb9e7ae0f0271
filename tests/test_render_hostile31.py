"""render/: a thirty-first pass, hostile programs written against what the sandbox assumes: the job runs inside the
worker's own interpreter (its module globals, its ``__main__``, its exit), the result channel and its exit codes,
Python's start-up path (``.pth`` files, ``sitecustomize``, ``PYTHON*`` variables, the current directory on
``sys.path``, byte-code caches), matplotlib's config and font caches, fontconfig's, the locale, and the job's
timing; and legitimate programs that must render: scripts that use ``__file__``, pickle or copy their own classes,
resolve their own type hints or read their user name, heavy but allowed figures, math text and mixed scripts. Each is
pinned to its label with the host effects test_render_hostile21 checks (the same workers, no job process left,
nothing written outside the job dir, escaped job text, a clean render afterwards)."""

import json
import os
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402

TOKEN = "hostile31canary"
PLT = "import matplotlib.pyplot as plt\n"
DRAW = PLT + "plt.figure(figsize=(1, 1), dpi=50)\nplt.plot([1, 2])\n"
OUTSIDE = ("import os\nfor d in ('/tmp', '/dev/shm', '/root', '/'):\n    try:\n"
           f"        open(os.path.join(d, '{TOKEN}'), 'w').write('x')\n"
           "    except OSError as e:\n        err = e\nraise err\n")
FONTCONFIG = "import ctypes\nfc = ctypes.CDLL('libfontconfig.so.1')\n"

# The job's code runs as the module __main__ of a script in its job dir, as `python main.py` runs it (legitimate)
SCRIPT_NAMESPACE = {
    "dunder_file_dir": (PLT + "import os\nplt.figure(figsize=(1, 1), dpi=50)\nplt.plot([1, 2])\n"
                        "plt.savefig(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'out.png'))\n",
                        "python", 10.0, {"ok"}),
    "pickle_own_class": ("import pickle\nclass Point:\n    def __init__(self, x):\n        self.x = x\n"
                         "p = pickle.loads(pickle.dumps(Point(2)))\n" + DRAW + "plt.plot([0, p.x])\n",
                         "python", 10.0, {"ok"}),
    "enum_round_trip": ("import enum, pickle\nclass Colour(enum.Enum):\n    RED = 'r'\n"
                        "c = pickle.loads(pickle.dumps(Colour.RED))\n" + DRAW + "plt.plot([1, 2], color=c.value)\n",
                        "python", 10.0, {"ok"}),
    "type_hints_forward_ref": ("import typing\nclass Node:\n    nxt: 'Node'\n"
                               "assert typing.get_type_hints(Node)['nxt'] is Node\n" + DRAW, "python", 10.0, {"ok"}),
    "import_main_constant": ("import __main__\nN = 4\n" + DRAW + "plt.plot(range(__main__.N))\n", "python", 10.0,
                             {"ok"}),
    "getpass_user_title": ("import getpass\n" + DRAW + "plt.title(getpass.getuser())\n", "python", 10.0, {"ok"}),
}

# The job code shares the worker's interpreter until it exits: patching the worker's module reaches only this job
WORKER_INTERNALS = {
    # the job dir the worker saves into and scans for a PNG, moved to the tree's root: the read-only tree refuses
    "worker_jobdir_global_to_root": ("import render.worker as w\nw._JOBDIR = '/'\n" + DRAW,
                                     "python", 10.0, {"forbidden"}),
    # the name the worker saves the current figure under, pointed outside the job dir
    "worker_out_name_outside": ("import render.worker as w\nw.OUT_NAME = '../etc/" + TOKEN + ".png'\n" + DRAW,
                                "python", 10.0, {"forbidden"}),
    # the size check before drawing switched off: the figure is drawn (the job's own CPU), then refused by its header
    "worker_size_check_off": ("import render.worker as w\nw._oversized_figure = lambda *a: None\n" + PLT +
                              "plt.figure(figsize=(50, 50), dpi=100)\n", "python", 20.0,
                              {"too_large", "memory", "timeout"}),
    # the frame writer replaced by one that floods the result pipe
    "worker_frame_writer_floods": ("import os, render.worker as w\n"
                                   "w._write_all = lambda fd, d: os.write(fd, b'ok\\n' + b'A' * 60000)\n" + DRAW,
                                   "python", 10.0, {"protocol"}),
    # another module as __main__ (the worker's own script, then a non-module): the job still renders
    "main_module_replaced": ("import sys\nsys.modules['__main__'] = 42\n" + DRAW, "python", 10.0, {"ok"}),
}

# Python's start-up path: none of it runs again in a job (no interpreter starts), and what the job runs itself stays in
STARTUP_PATH = {
    # a .pth file in the job dir, processed by site.addsitedir: its import line runs, its write outside fails, and
    # site reports the error and goes on (as at start-up), so the figure renders and nothing lands outside
    "pth_in_jobdir_addsitedir": ("import site\nopen('evil.pth', 'w').write(\"import os; open('/tmp/" + TOKEN +
                                 "', 'w')\\n\")\nsite.addsitedir('/job')\n" + DRAW, "python", 10.0, {"ok"}),
    "sitecustomize_in_jobdir": ("open('sitecustomize.py', 'w').write(" + repr(OUTSIDE) + ")\n"
                                "import sys\nsys.path.insert(0, '')\nimport sitecustomize\n", "python", 10.0,
                                {"forbidden"}),
    # PYTHONSTARTUP / PYTHONPATH / PYTHONINSPECT set, then a new interpreter: the exec is the filter's
    "python_env_then_exec": ("import os, sys\nopen('s.py', 'w').write(" + repr(OUTSIDE) + ")\n"
                             "os.environ.update(PYTHONSTARTUP='/job/s.py', PYTHONPATH='/job', PYTHONINSPECT='1')\n"
                             "os.execv(sys.executable, [sys.executable])\n", "python", 10.0, {"forbidden"}),
    # a module named as one already imported, in the current directory put first on sys.path: the loaded one stays
    "cwd_shadows_numpy": ("open('numpy.py', 'w').write(" + repr(OUTSIDE) + ")\nimport sys\nsys.path.insert(0, '')\n"
                          "import numpy\n" + DRAW + "plt.plot(numpy.arange(3))\n", "python", 10.0, {"ok"}),
    # ... and one not imported yet: the job's own code, with the job's rights
    "cwd_module_first_import": ("open('colorsys.py', 'w').write(" + repr(OUTSIDE) + ")\nimport sys\n"
                                "sys.modules.pop('colorsys', None)\nsys.path.insert(0, '/job')\nimport colorsys\n",
                                "python", 10.0, {"forbidden"}),
    # a byte-code cache written next to a bound stdlib module
    "pyc_into_stdlib": ("import os, py_compile\npy_compile.compile(os.__file__, cfile=os.path.join("
                        "os.path.dirname(os.__file__), '__pycache__', '" + TOKEN + ".pyc'), doraise=True)\n",
                        "python", 10.0, {"forbidden"}),
    # an import of a stdlib module the zygote never imported, with byte-code writing on: its cache is not written
    # into the read-only tree, the import works
    # MPLCONFIGDIR pointed at a read-only host directory, matplotlib re-imported: it takes a temp dir of the job's
    "mplconfigdir_etc_reload": ("import os, importlib, matplotlib\nos.environ['MPLCONFIGDIR'] = '/etc'\n"
                                "importlib.reload(matplotlib)\n" + DRAW, "python", 10.0, {"ok"}),
    # site's start-up run again, PYTHONHOME / PYTHONPATH set before a first import, an import hook that refuses
    # every path entry: what is imported already stays, nothing new reaches a later job
    "site_main_rerun": ("import site\nsite.main()\n" + DRAW, "python", 10.0, {"ok"}),
    "pythonhome_env_then_import": ("import os\nos.environ['PYTHONHOME'] = '/job'\nos.environ['PYTHONPATH'] = '/job'\n"
                                   "import xml.dom.minidom\n" + DRAW, "python", 10.0, {"ok"}),
    "path_hook_refuses_all": ("import sys\nclass Refuse:\n    def __init__(self, path):\n        raise ImportError\n"
                              "sys.path_hooks.insert(0, Refuse)\nsys.path_importer_cache.clear()\nimport json.tool\n" +
                              DRAW, "python", 10.0, {"ok"}),
    # a meta-path finder that writes into a bound library directory on every import
    "meta_path_finder_writes": ("import sys\nclass F:\n    def find_spec(self, name, path, target=None):\n"
                                f"        open('/usr/lib/{TOKEN}', 'w')\n"
                                "sys.meta_path.insert(0, F())\nimport zzz_not_a_module\n", "python", 10.0,
                                {"forbidden"}),
    "import_writes_no_bytecode": ("import sys\nsys.dont_write_bytecode = False\nimport wave, tabnanny\n" + DRAW,
                                  "python", 10.0, {"ok"}),
}

# matplotlib's and fontconfig's configuration and caches: the job's own, in its job dir
CONFIG_CACHES = {
    # a matplotlibrc in the job dir read as the rc file: its dpi makes the figure past max_side before drawing
    "matplotlibrc_huge_dpi": ("import matplotlib\nopen('matplotlibrc', 'w').write('figure.dpi: 100000\\n')\n"
                              "matplotlib.rc_file('matplotlibrc')\n" + PLT + "plt.plot([1, 2])\n",
                              "python", 10.0, {"too_large"}),
    # a matplotlibrc naming a GUI backend: pyplot cannot switch to it without a display or a toolkit
    "matplotlibrc_gui_backend": ("import matplotlib\nopen('matplotlibrc', 'w').write('backend: TkAgg\\n')\n"
                                 "matplotlib.rc_file('matplotlibrc')\n" + PLT + "plt.plot([1, 2])\n",
                                 "python", 10.0, {"ok", "crash"}),
    # a font list whose only font is a host secret: FreeType cannot open it (Landlock / absent)
    "fontlist_points_at_secret": (
        "import json, matplotlib.font_manager as fm\n"
        "fm.fontManager.ttflist = [fm.FontEntry(fname='/etc/shadow', name='Evil', style='normal', variant='normal',"
        " weight=400, stretch='normal', size='scalable')]\nfm.fontManager._findfont_cached.cache_clear()\n"
        "import matplotlib.pyplot as plt\nplt.rcParams['font.family'] = 'Evil'\nplt.title('x')\n"
        "plt.gcf().canvas.draw()\n", "python", 10.0, {"forbidden", "crash"}),
    # fontconfig re-read with a config of the job's that scans the whole tree and caches into the job dir
    "fontconfig_scans_tree": (
        "import os\nos.makedirs('fc', exist_ok=True)\nopen('fonts.conf', 'w').write('<fontconfig><dir>/usr/share/fonts"
        "</dir><dir>/etc</dir><cachedir>/job/fc</cachedir></fontconfig>')\nos.environ['FONTCONFIG_FILE'] = "
        "'/job/fonts.conf'\n" + FONTCONFIG + "fc.FcInitReinitialize()\nimport cairosvg\ncairosvg.svg2png("
        "bytestring=b'<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"60\" height=\"30\"><text y=\"20\">Hi</text>"
        "</svg>', write_to='out.png')\n", "python", 20.0, {"ok"}),
    # fontconfig told to cache into a host directory: it cannot write there and goes on
    "fontconfig_cache_outside": (
        "import os\nopen('fonts.conf', 'w').write('<fontconfig><dir>/usr/share/fonts</dir><cachedir>/tmp/" + TOKEN +
        "</cachedir></fontconfig>')\nos.environ['FONTCONFIG_FILE'] = '/job/fonts.conf'\n" + FONTCONFIG +
        "fc.FcInitReinitialize()\n" + DRAW, "python", 20.0, {"ok"}),
}

# The locale and the text encodings the job sees
LOCALE = {
    # TZ naming a path out of the zone directory (glibc reads TZ files as the job: what the tree has), a zoneinfo
    # key that climbs out of it (refused by zoneinfo itself)
    "tz_env_path_escape": ("import os, time\nos.environ['TZ'] = '../../../../etc/passwd'\ntime.tzset()\n" + DRAW +
                           "plt.title(time.strftime('%Z'))\n", "python", 10.0, {"ok"}),
    "zoneinfo_key_escape": ("import zoneinfo\nzoneinfo.ZoneInfo('../../../etc/passwd')\n", "python", 10.0, {"crash"}),
    # fontconfig re-read with its cache home pointed at the host's temp dir
    "xdg_cache_home_outside": ("import os\nos.environ['XDG_CACHE_HOME'] = '/tmp'\n" + FONTCONFIG +
                               "fc.FcInitReinitialize()\n" + DRAW, "python", 10.0, {"ok"}),
    "locale_from_env_missing": ("import os, locale\nos.environ['LC_ALL'] = 'tr_TR.UTF-8'\n"
                                "locale.setlocale(locale.LC_ALL, '')\n" + DRAW, "python", 10.0, {"crash"}),
    "locale_c_with_unicode_title": ("import locale\nlocale.setlocale(locale.LC_ALL, 'C')\n" + DRAW +
                                    "plt.title('Ωμέγα ∑ 数学')\n", "python", 10.0, {"ok"}),
    "locale_env_default_works": ("import locale\nlocale.setlocale(locale.LC_ALL, '')\n" + DRAW +
                                 "plt.title(locale.getlocale()[1] or '')\n", "python", 10.0, {"ok"}),
    "stdout_ascii_strict": ("import sys\nsys.stdout.reconfigure(encoding='ascii')\nprint('数学')\n", "python", 10.0,
                            {"crash"}),
}

# The result channel, the exit status and the clock
CHANNEL = {
    # the result pipe closed and its number reused for a job-dir file: the worker's frame lands in the file, the
    # supervisor sees no frame and reads out.png as any
    "status_fd_reused_by_file": ("import os\nos.close(3)\nf = open('frame.txt', 'w')\nassert f.fileno() == 3\n" +
                                 DRAW, "python", 10.0, {"ok"}),
    "frame_kind_with_cr": ("import os\nos.write(3, b'ok\\r\\nforged')\nos._exit(0)\n", "python", 10.0,
                           {"protocol"}),
    "frame_kind_with_bom": ("import os\nos.write(3, '\\ufeffok\\nforged'.encode())\nos._exit(0)\n", "python",
                            10.0, {"protocol"}),
    "exit_code_of_setup_failure": (DRAW + "plt.savefig('out.png')\nimport os\nos._exit(121)\n", "python", 10.0,
                                   {"crash"}),
    "exit_code_255_with_frame": ("import os\nos.write(3, b'ok\\nfine')\nos._exit(255)\n", "python", 10.0,
                                 {"crash"}),
    "exception_str_sleeps": ("import time\nclass Slow(Exception):\n    def __str__(self):\n        time.sleep(60)\n"
                             "        return 'x'\nraise Slow()\n", "python", 2.0, {"timeout"}),
    "finally_sleeps_past_clock": ("import time\ntry:\n    raise ValueError('x')\nfinally:\n    time.sleep(60)\n",
                                  "python", 2.0, {"timeout"}),
    "atexit_write_outside": ("import atexit\natexit.register(lambda: exec(" + repr(OUTSIDE) + "))\n" + DRAW,
                             "python", 10.0, {"ok"}),
}

# Heavy but allowed: these must render
HEAVY_LEGIT = {
    "subplots_6x6_tight": (PLT + "import numpy as np\nfig, axs = plt.subplots(6, 6, figsize=(9, 9), dpi=60)\n"
                           "for i, a in enumerate(axs.flat):\n    a.plot(np.sin(np.linspace(0, i, 40)))\n"
                           "    a.set_title(f'$\\\\alpha_{{{i}}}$')\nfig.tight_layout()\n", "python", 30.0, {"ok"}),
    "math_text_heavy": (PLT + "plt.figure(figsize=(4, 3), dpi=60)\nplt.title(r'$\\sum_{i=0}^{\\infty}\\frac{1}{i^2}="
                        r"\frac{\pi^2}{6}\quad\int_0^1\sqrt{x}\,dx\quad\mathbb{R}^n\ \mathcal{L}\ \hat{\beta}$')" + "\n"
                        "plt.xlabel(r'$\\alpha\\beta\\gamma\\ \\overline{xy}\\ \\sqrt[3]{z}$')\n", "python", 30.0,
                        {"ok"}),
    "mixed_scripts_text": (PLT + "plt.figure(figsize=(3, 2), dpi=60)\nplt.title('数学 グラフ Ωμέγα مرحبا Привет')\n"
                           "plt.plot([1, 2])\n", "python", 30.0, {"ok"}),
    "annotated_heatmap": (PLT + "import numpy as np\na = np.random.rand(20, 20)\n"
                          "fig, ax = plt.subplots(figsize=(8, 8), dpi=60)\nax.imshow(a)\nfor i in range(20):\n    for j in range(20):\n"
                          "        ax.text(j, i, f'{a[i, j]:.1f}', ha='center', va='center', fontsize=6)\n", "python",
                          30.0, {"ok"}),
    "pcolormesh_500": (PLT + "import numpy as np\nplt.figure(figsize=(4, 3), dpi=60)\n"
                       "plt.pcolormesh(np.random.rand(500, 500))\nplt.colorbar()\n", "python", 30.0, {"ok"}),
    "surface_3d_100": (PLT + "import numpy as np\n"
                       "ax = plt.figure(figsize=(4, 3), dpi=60).add_subplot(projection='3d')\n"
                       "X, Y = np.meshgrid(np.linspace(-3, 3, 100), np.linspace(-3, 3, 100))\n"
                       "ax.plot_surface(X, Y, np.sin(X) * np.cos(Y), cmap='viridis')\n", "python", 30.0, {"ok"}),
    "figure_at_max_side": (PLT + "plt.figure(figsize=(40.96, 5.12), dpi=100)\nplt.plot([1, 2])\n", "python", 30.0,
                           {"ok"}),
}

SVGS = {
    # a hyperlink to a host file: only a link, drawn as its content (cairosvg never fetches an <a> href, and the
    # fetcher would refuse it: `ok` proves nothing was asked for; test_render_hostile32 made links pass the screen)
    "svg_anchor_file_href": ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
                             'width="20" height="20"><a xlink:href="file:///etc/passwd"><rect width="9" height="9"/>'
                             '</a></svg>', "svg", 10.0, {"ok"}),
    # a public DOCTYPE naming the SVG 1.1 DTD (not fetched) and character references: an ordinary document
    "svg_public_doctype_charrefs": ('<?xml version="1.0" standalone="no"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1'
                                    '//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n<svg xmlns="http://ww'
                                    'w.w3.org/2000/svg" width="40" height="20"><text y="15">&#x3A9; &amp;</text>'
                                    '</svg>', "svg", 10.0, {"ok"}),
}

SVGS["svg_3000_circles"] = ('<svg xmlns="http://www.w3.org/2000/svg" width="400" height="300">' + "".join(
    f'<circle cx="{i * 37 % 400}" cy="{i * 91 % 300}" r="3" fill="#{i % 4096:03x}"/>' for i in range(3000)) + "</svg>",
    "svg", 30.0, {"ok"})

GROUPS = {"script_namespace": SCRIPT_NAMESPACE, "worker_internals": WORKER_INTERNALS, "startup_path": STARTUP_PATH,
          "config_caches": CONFIG_CACHES, "locale": LOCALE, "channel": CHANNEL, "heavy_legit": HEAVY_LEGIT,
          "svg": SVGS}


def test_the_batch_is_new_and_large():
    from test_render_hostile21 import check_batch_is_new
    from test_render_hostile29 import GROUPS as GROUPS29
    from test_render_hostile30 import GROUPS as GROUPS30

    check_batch_is_new(GROUPS, GROUPS29, GROUPS30)


@pytest.mark.parametrize("group", list(GROUPS))
def test_batch_outcomes(render_pool, group):
    from test_render_hostile21 import HOST_TMP, check_batch

    got = check_batch(render_pool, GROUPS[group],
                      stray_dirs=[(d, TOKEN) for d in (HOST_TMP, "/dev/shm", os.path.expanduser("~"), "/")])
    print(json.dumps({n: got[n] for n in GROUPS[group]}, indent=0))
    assert not os.path.exists(os.path.join(HOST_TMP, TOKEN))


# -- the fixes this pass made ----------------------------------------------------------------------------------------
def test_the_code_runs_as_the_main_module_of_a_script_in_its_job_dir(render_pool):
    # before: the code ran in a bare dict that sys.modules did not know as __main__, without __file__: pickle / enum /
    # typing.get_type_hints of its own classes, `import __main__` and os.path.dirname(__file__) were a `crash`
    # (PicklingError: attribute lookup Point on __main__ failed; NameError: name '__file__' is not defined)
    code = ("import __main__, pickle, sys, typing\nclass Point:\n    nxt: 'Point'\n"
            "assert pickle.loads(pickle.dumps(Point())).__class__ is Point\n"
            "assert typing.get_type_hints(Point)['nxt'] is Point\n"
            "assert sys.modules['__main__'] is __main__ and __main__.Point is Point\n"
            "raise RuntimeError(__file__ + ' ' + __name__)\n")
    r = render_pool.render(RenderJob(code))
    assert (r.error_kind, r.message) == ("crash", "job: RuntimeError: /job/main.py __main__"), r


def test_the_job_has_a_user_name(render_pool):
    # before: `crash`, "KeyError: 'getpwuid(): uid not found: 65533'": the job uid has no passwd entry in the tree and
    # the environment named no user, so getpass.getuser() failed
    r = render_pool.render(RenderJob("import getpass, os\nraise RuntimeError(getpass.getuser() + ' ' + "
                                     "os.environ['LOGNAME'])\n"))
    assert (r.error_kind, r.message) == ("crash", "job: RuntimeError: render render"), r


def test_a_font_of_the_hosts_list_outside_the_tree_falls_back_instead_of_running_fc_list(tmp_path, monkeypatch):
    # before: `forbidden`, "blocked system call (seccomp)": the worker's font list is the caller's, whose fonts may
    # lie where the tree shows nothing (a home's ~/.fonts, TeX Live's, /opt); findfont, asked for such a family, found
    # the file missing and rebuilt the list by running fc-list, whose fork the filter kills
    import glob
    import shutil

    import matplotlib
    import matplotlib.font_manager as fm
    from conftest import start_render_pool

    real = glob.glob(os.path.join(matplotlib.get_cachedir(), "fontlist-*.json"))
    if not real:
        pytest.skip("no matplotlib font list cache to seed the workers with")
    font = tmp_path / "HostOnly.ttf"  # a host file under the host's temp dir: the tree's /tmp is empty
    shutil.copyfile(fm.findfont("DejaVu Sans"), font)
    cache = tmp_path / "cache"
    cache.mkdir()
    for path in real:
        listing = json.load(open(path))
        listing["ttflist"].append({**listing["ttflist"][0], "fname": str(font), "name": "HostOnlyFont"})
        json.dump(listing, open(cache / os.path.basename(path), "w"))
    monkeypatch.setattr(matplotlib, "get_cachedir", lambda: str(cache))
    pool = start_render_pool(workers=1)
    try:
        code = (PLT + "import matplotlib.font_manager as fm\nplt.figure(figsize=(2, 1), dpi=50)\n"
                "plt.title('Hi', family='HostOnlyFont')\nplt.gcf().canvas.draw()\n"
                "assert not [f for f in fm.fontManager.ttflist if f.name == 'HostOnlyFont']\n")
        r = pool.render(RenderJob(code))
        assert r.ok and (r.width, r.height) == (100, 50), r
        r = pool.render(RenderJob(PLT + "plt.figure(figsize=(2, 1), dpi=50)\nplt.title('Hi', family='DejaVu Serif')\n"))
        assert r.ok, r
    finally:
        pool.close()


def test_the_codes_own_source_can_be_read_back(render_pool):
    # before: `crash`, "OSError: could not get source code": inspect.getsource of a function of the code found no file
    # and no lines for it (`python main.py` reads them from the file)
    code = ("import inspect, traceback\ndef double(x):\n    return 2 * x\n"
            "try:\n    1 / 0\nexcept ZeroDivisionError:\n    tb = traceback.format_exc()\n"
            "raise RuntimeError(repr(inspect.getsource(double)) + ' ' + repr('    1 / 0' in tb.splitlines()))\n")
    r = render_pool.render(RenderJob(code))
    assert (r.error_kind, r.message) == (
        "crash", "job: RuntimeError: 'def double(x):\\n    return 2 * x\\n' True"), r


def test_a_job_starts_as_many_threads_as_their_stacks_allow_not_malloc_arenas(render_pool):
    # before: `crash`, "RuntimeError: can't start new thread" from the 13th-15th thread on this 2-core VM: glibc gave
    # each thread that allocated a malloc arena of its own (up to 8 per core), each reserving 64 MiB of the job's
    # address space, so ThreadPoolExecutor()'s default pool (min(32, cores + 4) threads) failed on a 16-core host.
    # 64 threads that all allocate at once (a barrier) need 64 stacks of 8 MiB and the few arenas the job is given.
    code = ("import threading\nfrom concurrent.futures import ThreadPoolExecutor\nN = 64\n"
            "gate = threading.Barrier(N)\ndef work(i):\n    block = bytearray(4096 + i)\n    gate.wait(timeout=20)\n"
            "    return len(block)\nwith ThreadPoolExecutor(N) as ex:\n    sizes = list(ex.map(work, range(N)))\n"
            "assert sizes == [4096 + i for i in range(N)]\n" + DRAW)
    r = render_pool.render(RenderJob(code), timeout_s=30.0)
    assert r.ok and (r.width, r.height) == (50, 50), r


def test_a_chart_saved_under_another_name_before_its_figure_was_cleared_is_the_image(render_pool):
    # before: `ok`, "current figure", a blank white canvas: the code saved its chart as chart.png and cleared the figure
    # (plt.clf(), as a loop that saves one chart per pass does) or opened a new one, and the worker saved that empty
    # current figure instead of the PNG the code wrote
    from conftest import png_pixel

    red = (PLT + "fig = plt.figure(figsize=(1, 1), dpi=40)\n"
           "fig.patches.append(plt.Rectangle((0, 0), 1, 1, color='red', transform=fig.transFigure))\n"
           "fig.savefig('chart.png')\n")
    for after in ("plt.clf()\n", "plt.figure(figsize=(2, 2), dpi=40)\n"):
        r = render_pool.render(RenderJob(red + after))
        assert r.ok and (r.width, r.height) == (40, 40) and png_pixel(r.png, (20, 20)) == (255, 0, 0), (after, r)
        assert r.message == "job: 'chart.png' written by the code (no out.png, the current figure is empty)", r
    # an empty figure is still the image where the code wrote no PNG, and a drawn one wins over a PNG written before
    r = render_pool.render(RenderJob(PLT + "plt.figure(figsize=(1, 1), dpi=40, facecolor='blue')\n"))
    assert r.ok and png_pixel(r.png, (20, 20)) == (0, 0, 255), r
    r = render_pool.render(RenderJob(red + "plt.figure(figsize=(2, 2), dpi=40)\nplt.plot([1, 2])\n"))
    assert r.ok and (r.width, r.height) == (80, 80) and r.message == "job: current figure", r


def test_of_pngs_written_in_one_clock_tick_the_last_written_is_the_image(render_pool):
    # before: `ok` with z.png (red), the first of the two: a file created and written without a stat (os.open and
    # os.write, or a C library's fopen) gets the kernel's coarse timestamp, so two PNGs written within a few
    # milliseconds tie on st_mtime_ns and the path broke the tie; one program's image hung on its file names and, by
    # whether its writes straddled a clock tick, on timing. The os.utime below makes the tie certain on any kernel.
    from conftest import png_pixel

    make = ("import io, os\nfrom PIL import Image\n"
            "def png(c):\n    b = io.BytesIO()\n    Image.new('RGB', (8, 8), c).save(b, 'PNG')\n    return b.getvalue()\n"
            "def write(name, data):\n    fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644)\n    os.write(fd, data)\n"
            "    os.close(fd)\n")
    tie = "t = os.stat('{0}').st_mtime_ns\nfor n in ('{0}', '{1}'):\n    os.utime(n, ns=(t, t))\n"
    cases = {  # code -> (the file that is the image, its colour)
        make + "write('z.png', png('red'))\nwrite('a.png', png('blue'))\n" + tie.format("z.png", "a.png"):
            ("a.png", (0, 0, 255)),
        make + "write('a.png', png('blue'))\nwrite('z.png', png('red'))\n" + tie.format("a.png", "z.png"):
            ("z.png", (255, 0, 0)),
        # written to a temporary name and renamed into place (an atomic save), after the other was written
        make + "write('z.png', png('red'))\nwrite('tmp', png('blue'))\nos.replace('tmp', 'a.png')\n"
        + tie.format("z.png", "a.png"): ("a.png", (0, 0, 255)),
        # through file objects (matplotlib's and PIL's savefig / save), in a directory the code changed to
        make + "os.mkdir('s')\nos.chdir('s')\nopen('z.png', 'wb').write(png('red'))\n"
        "open('a.png', 'wb').write(png('blue'))\n" + tie.format("z.png", "a.png"): ("s/a.png", (0, 0, 255)),
    }
    for code, (name, colour) in cases.items():
        r = render_pool.render(RenderJob(code))
        assert r.ok and png_pixel(r.png, (4, 4)) == colour, (name, r)
        assert r.message == f"job: '{name}' written by the code (no out.png, no open figure)", r


def test_a_font_probe_that_hangs_is_killed_and_the_font_list_stays(tmp_path, monkeypatch):
    # before: the zygote waited for its font probe child without a deadline: a probe stuck in the tree (a stat on a
    # hung mount, here a sleep where it enters the tree) kept the zygote from ever answering, and the pool's start,
    # which waits for the zygote without a timeout, hung with no error
    import signal
    import time

    import render.worker as w

    pid_file = tmp_path / "probe.pid"

    def stuck(*_):
        pid_file.write_text(str(os.getpid()))
        time.sleep(30)

    monkeypatch.setattr(w.sb, "unshare", stuck)
    monkeypatch.setattr(w, "FONT_PROBE_TIMEOUT_S", 1.0, raising=False)  # absent before

    def hung(*_):
        raise TimeoutError("the font probe was waited for without a deadline")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        t0 = time.monotonic()
        assert w._fonts_missing_in_tree(str(tmp_path), ["/no/such/font.ttf"]) == []
        assert time.monotonic() - t0 < 5
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left sleeping
        os.kill(int(pid_file.read_text()), 0)
