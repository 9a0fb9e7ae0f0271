"""render/: a third red-team pass. Hostile programs and odd-but-valid ones not in the other render tests, each
ending in a clean, classified result with the pool unchanged; plus the caller-side holes it found (bad timeouts,
a failed exchange leaving a stale reply) and the fallback save drawing more than the figure it checked."""

import json
import sys
import time

import pytest

from conftest import job_processes as _job_processes, png_pixel as _pixel

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render.pool import _Worker  # noqa: E402

PLT = "import matplotlib.pyplot as plt\n"
RED = PLT + ("fig, ax = plt.subplots(figsize=(2, 2), dpi=50)\nax.add_patch(plt.Rectangle((0, 0), 1, 1, color='red'))\n"
             "ax.set_xlim(0, 1); ax.set_ylim(0, 1); ax.axis('off')\n")
SVG = ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="{w}" height="{h}">'
       '{body}</svg>')


@pytest.fixture(scope="module")
def pool(render_pool):
    return render_pool


def _assert_pool_unchanged(pool, pids, replaced):
    assert pool.replaced == replaced and pool.worker_pids() == pids
    assert _job_processes(pool) == []
    r = pool.render(RenderJob(RED))
    assert r.ok and (r.width, r.height) == (100, 100) and _pixel(r.png, (50, 50)) == (255, 0, 0), r


# --- hostile programs: each a clean, classified refusal ----------------------------------------------------
HOSTILE = {  # name: (code, language, timeout_s, accepted kinds)
    "stdout_flood": ("import sys\nwhile True:\n    sys.stdout.write('ok\\n' * 50000)\n", "python", 1.0, {"timeout"}),
    "stderr_flood": ("import os\nwhile True:\n    os.write(2, b'crash\\n' * 50000)\n", "python", 1.0, {"timeout"}),
    "thread_bomb": ("import threading, time\nfor _ in range(100000):\n"
                    "    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n", "python", 3.0,
                    {"crash", "memory", "forbidden"}),
    "c_stack_overflow": ("import sys\nsys.setrecursionlimit(10 ** 7)\nx = []\nfor _ in range(10 ** 6):\n    x = [x]\n"
                         "repr(x)\n", "python", 5.0, {"crash", "memory"}),
    "fd_exhaustion": ("fs = [open(f'f{i}', 'w') for i in range(1000)]\n", "python", 3.0, {"forbidden"}),
    "fifo_as_output": ("import os\nos.mkfifo('out.png')\n", "python", 3.0, {"invalid_image"}),
    "dir_as_output": ("import os\nos.mkdir('out.png')\n", "python", 3.0, {"invalid_image"}),
    "jpeg_named_png": (PLT + "plt.plot([1, 2])\nplt.savefig('out.png', format='jpg')\n", "python", 3.0,
                       {"invalid_image"}),
    "save_from_root": (PLT + "import os\nos.chdir('/')\nplt.plot([1])\nplt.savefig('out.png')\n", "python", 3.0,
                       {"forbidden"}),
    # a circular reference is not rendered, the rest drawn (review 20): `ok`; it recursed to a `crash` before
    "svg_self_use": (SVG.format(w=20, h=20, body='<g id="a"><use xlink:href="#a"/></g>'), "svg", 3.0, {"ok"}),
    "svg_use_cycle": (SVG.format(w=20, h=20, body='<use id="a" xlink:href="#b"/><use id="b" xlink:href="#a"/>'),
                      "svg", 3.0, {"ok"}),
    # 10^9 uses drawn: refused before drawing since review 22 (it ran to the timeout)
    "svg_use_laughs": (SVG.format(w=20, h=20, body='<defs><rect id="a0" width="1" height="1"/>' + "".join(
        f'<g id="a{i + 1}">' + f'<use xlink:href="#a{i}"/>' * 10 + "</g>" for i in range(9))
        + '</defs><use xlink:href="#a9"/>'), "svg", 1.0, {"too_large"}),
    "svg_deep_nesting": (SVG.format(w=20, h=20, body="<g>" * 20000 + "</g>" * 20000), "svg", 3.0, {"crash"}),
    "svg_huge_canvas": (SVG.format(w=100000, h=100000, body='<rect width="9" height="9"/>'), "svg", 3.0,
                        {"too_large", "memory"}),
    # a negative side is no size: `invalid_size` since test_render_hostile33
    "svg_negative_width": (SVG.format(w=-10, h=10, body=""), "svg", 3.0, {"invalid_size"}),
}


def test_hostile_programs_end_cleanly(pool):
    pids, replaced = pool.worker_pids(), pool.replaced
    got = {}
    for name, (code, lang, timeout_s, _) in HOSTILE.items():
        t0 = time.monotonic()
        r = pool.render(RenderJob(code, lang), timeout_s=timeout_s)
        got[name] = (r.error_kind or "ok", r.message[:120], round(time.monotonic() - t0, 2))
        assert r.ok == (HOSTILE[name][3] == {"ok"}) and (r.png is None) == (not r.ok), (name, r)
        assert time.monotonic() - t0 < timeout_s + 4, (name, got[name])
    bad = {k: v for k, v in got.items() if v[0] not in HOSTILE[k][3]}
    assert not bad, bad
    _assert_pool_unchanged(pool, pids, replaced)


PROBE = """
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
res = {}
def t(name, f):
    try:
        out = f()
        res[name] = errno.errorcode.get(ctypes.get_errno(), "?") if out == -1 else "OK"
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e.errno))
t("netlink_socket", lambda: libc.syscall(SOCKET, 16, 3, 0))
t("unix_socket", lambda: libc.syscall(SOCKET, 1, 1, 0))
t("pidfd_of_pid_2", lambda: libc.syscall(PIDFD_OPEN, 2, 0))
t("setuid_0", lambda: os.setuid(0))
t("chown_jobdir_to_root", lambda: os.chown("/job", 0, 0))
t("mknod_mem", lambda: os.mknod("/job/mem", 0o600 | 0o020000, os.makedev(1, 1)))
t("list_root", lambda: os.listdir("/"))
t("read_own_exe", lambda: open("/proc/self/exe", "rb").read(4))
t("sysfs", lambda: os.listdir("/sys"))
t("rename_jobdir", lambda: os.rename("/job", "/job2"))
res["procs"] = sorted(p for p in os.listdir("/proc") if p.isdigit())
raise RuntimeError(json.dumps(res))
"""
_NR = {"x86_64": {"socket": 41, "pidfd_open": 434}, "aarch64": {"socket": 198, "pidfd_open": 434}}


def test_escape_probes_refused(pool):
    import platform

    nrs = _NR.get(platform.machine())
    if nrs is None:
        pytest.skip("no syscall numbers for this architecture")
    r = pool.render(RenderJob(PROBE.replace("SOCKET", str(nrs["socket"])).replace("PIDFD_OPEN", str(nrs["pidfd_open"]))))
    assert r.error_kind == "crash" and "RuntimeError: {" in r.message, r
    res = json.loads(r.message[r.message.index("{"):])
    assert res == {"netlink_socket": "EPERM", "unix_socket": "EPERM", "pidfd_of_pid_2": "ESRCH",
                   "setuid_0": "EPERM", "chown_jobdir_to_root": "EPERM", "mknod_mem": "EPERM",
                   "list_root": "EACCES", "read_own_exe": "EACCES", "sysfs": "ENOENT", "rename_jobdir": "EROFS",
                   "procs": ["1"]}, res


# --- odd but valid programs: each renders ---------------------------------------------------------------------
VALID = {
    "unicode": PLT + "plt.title('中文 Ωμέγα ∑ ✓ עברית')\nplt.plot([1, 2])\n",
    "mathtext": PLT + "plt.title(r'$\\frac{\\alpha}{\\beta}\\sqrt{x^2}\\int_0^\\infty e^{-x}\\,dx$')\nplt.plot([1])\n",
    "savefig_pdf_svg_eps_jpg": PLT + "plt.plot([1, 2])\nfor ext in ('pdf', 'svg', 'eps', 'jpg'):\n"
                                     "    plt.savefig('chart.' + ext)\n",
    "show": PLT + "plt.plot([1, 2])\nplt.show()\nplt.show(block=True)\n",
    "figures_never_closed": PLT + "for i in range(20):\n    plt.figure()\n    plt.plot([i, 0])\n",
    "sys_exit_1_after_plot": PLT + "import sys\nplt.plot([1, 2])\nsys.exit(1)\n",
    "exit_builtin": PLT + "plt.plot([1, 2])\nexit()\n",
    "out_png_never_closed": PLT + "def draw():\n    plt.plot([1, 2])\nf = open('out.png', 'wb')\ndraw()\n"
                                  "plt.savefig(f, format='png')\n",
    "plot_in_a_thread": PLT + "import threading\nt = threading.Thread(target=lambda: plt.plot([1, 2]))\n"
                              "t.start()\nt.join()\n",
    "tempfiles": PLT + "import tempfile\nwith tempfile.NamedTemporaryFile(suffix='.png') as f:\n"
                       "    plt.plot([1])\n    plt.savefig(f.name)\n",
    "gif_animation": PLT + "from matplotlib import animation\nfig, ax = plt.subplots()\nl, = ax.plot([0, 1])\n"
                           "animation.FuncAnimation(fig, lambda i: l.set_ydata([0, i]), frames=3)"
                           ".save('a.gif', writer='pillow')\n",
    "result_fd_closed": PLT + "import os\nos.close(3)\nplt.plot([1])\n",
    "result_fd_replaced": PLT + "import os\nos.dup2(os.open('x', os.O_WRONLY | os.O_CREAT), 3)\nplt.plot([1])\n",
    "svg_viewbox_only": '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 50"><rect width="9" height="9"/></svg>',
    "svg_unicode": SVG.format(w=200, h=50, body='<text x="5" y="30">中文 Ω ∑</text>'),
}


def test_odd_but_valid_programs_render(pool):
    pids, replaced = pool.worker_pids(), pool.replaced
    jobs = [RenderJob(code, "svg" if name.startswith("svg") else "python") for name, code in VALID.items()]
    results = pool.render_many(jobs, timeout_s=10)
    bad = {name: (r.error_kind, r.message[:160]) for name, r in zip(VALID, results) if not r.ok}
    assert not bad, bad
    _assert_pool_unchanged(pool, pids, replaced)


# --- the fallback save draws the figure whose size was checked, whatever savefig.bbox says ----------------------
@pytest.mark.parametrize("setup", [
    "f.text(-30, -30, 'x')\nf.text(30, 30, 'y')\n",  # tight box 60 figures wide: 6014 x 6016 px drawn, then refused
    "f.text(-300, -300, 'x')\nf.text(300, 300, 'y')\n",  # 60000 px square: MemoryError, reported as "memory"
    "plt.rcParams['savefig.pad_inches'] = 500\n",  # 1000 in of padding around the tight box
], ids=["far_artists", "very_far_artists", "huge_padding"])
def test_current_figure_ignores_a_tight_savefig_bbox(pool, setup):
    code = RED.replace("fig, ax", "f, ax") + "plt.rcParams['savefig.bbox'] = 'tight'\n" + setup
    t0 = time.monotonic()
    r = pool.render(RenderJob(code), timeout_s=10)
    # the 2 in x 2 in figure at 50 dpi that was checked against max_side: red axes inside a white margin
    assert r.ok and (r.width, r.height) == (100, 100), r
    assert _pixel(r.png, (50, 50)) == (255, 0, 0) and _pixel(r.png, (1, 98)) == (255, 255, 255)
    assert time.monotonic() - t0 < 5


# --- caller side: timeouts that cannot be honoured, an exchange that fails half-way ------------------------------
@pytest.mark.parametrize("timeout_s", [float("nan"), float("inf"), -float("inf"), 1e300, 1e12, 86400.5, 0, -1.0])
def test_unusable_timeouts_are_refused(pool, timeout_s):
    pids, replaced = pool.worker_pids(), pool.replaced
    # before: NaN replaced a worker; inf / 1e12 / 1e300 left a None result and the worker's late reply in its pipe,
    # where the next job read it as its own result
    with pytest.raises(ValueError, match="timeout_s"):
        pool.render_many([RenderJob(RED)], timeout_s=timeout_s)
    _assert_pool_unchanged(pool, pids, replaced)


def test_a_failed_exchange_replaces_the_worker(pool, monkeypatch):
    real_recv, calls = _Worker.recv, []

    def failing_recv(self, timeout_s):
        if not calls:  # the job was sent; the reply stays unread, as after any unexpected error here
            calls.append(1)
            raise RuntimeError("unexpected")
        return real_recv(self, timeout_s)

    monkeypatch.setattr(_Worker, "recv", failing_recv)
    blue = RED.replace("color='red'", "color='blue'")
    replaced = pool.replaced
    (r,) = pool.render_many([RenderJob(blue)], timeout_s=5)
    assert r is not None and not r.ok and r.error_kind == "crash" and "unexpected" in r.message, r
    assert pool.replaced == replaced + 1
    monkeypatch.setattr(_Worker, "recv", real_recv)
    for _ in range(len(pool.worker_pids())):  # every slot answers for its own job, none with the blue one
        r = pool.render(RenderJob(RED))
        assert r.ok and _pixel(r.png, (50, 50)) == (255, 0, 0), r
