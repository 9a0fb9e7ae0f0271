"""render/: sandboxed matplotlib / SVG rendering, including a corpus of hostile jobs."""

import io
import os
import signal
import socket
import sys
import time
import uuid

import pytest

from conftest import job_processes as _job_processes, png_pixel as _pixel, start_render_pool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob, RenderLimits, RenderPool, RenderPoolError  # noqa: E402
from render.pool import _missing_layers  # noqa: E402
from render.worker import LAYERS, WORKER_LAYERS  # noqa: E402
from render.sandbox import build_seccomp_program  # noqa: E402
from render.svg import screen_svg  # noqa: E402

RED_RECT = """
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(2, 2), dpi=50)
ax.add_patch(plt.Rectangle((0, 0), 1, 1, color="red"))
ax.set_xlim(0, 1); ax.set_ylim(0, 1); ax.axis("off")
"""
BLUE_SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30">'
            '<rect x="0" y="0" width="40" height="30" fill="#0000ff"/></svg>')


@pytest.fixture(scope="module")
def pool(render_pool):
    return render_pool


def _tmp_marker():
    return f"/tmp/mmevo-render-test-{uuid.uuid4().hex}"


# --- normal rendering -------------------------------------------------------------------------------------
def test_isolation_fully_active(pool):
    assert _missing_layers(pool.isolation) == []
    assert pool.isolation["landlock"] >= 1 and pool.isolation["seccomp"] is True


def test_matplotlib_red_rectangle(pool):
    r = pool.render(RenderJob(RED_RECT), timeout_s=10)
    assert r.ok, r
    assert (r.width, r.height) == (100, 100) and r.error_kind is None
    assert _pixel(r.png, (50, 50)) == (255, 0, 0)
    assert r.elapsed_s < 5


def test_out_png_wins_over_current_figure(pool):
    code = RED_RECT + "\nfrom PIL import Image\nImage.new('RGB', (30, 20), (0, 255, 0)).save('out.png')\n"
    r = pool.render(RenderJob(code))
    assert r.ok and (r.width, r.height) == (30, 20)
    assert _pixel(r.png, (15, 10)) == (0, 255, 0)


def test_svg_renders(pool):
    r = pool.render(RenderJob(BLUE_SVG, language="svg"))
    assert r.ok, r
    assert (r.width, r.height) == (40, 30)
    assert _pixel(r.png, (20, 15)) == (0, 0, 255)


def test_render_many_keeps_order(pool):
    jobs = [RenderJob(BLUE_SVG, "svg"), RenderJob("x = ("), RenderJob(RED_RECT), RenderJob("y = 1")]
    kinds = [r.error_kind for r in pool.render_many(jobs, timeout_s=10)]
    assert kinds == [None, "syntax", None, "no_output"]


@pytest.mark.parametrize("svg", [
    '<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
    '<svg xmlns="http://www.w3.org/2000/svg">&x;</svg>',
    '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
    '<image xlink:href="file:///etc/passwd" width="9" height="9"/></svg>',
    '<svg xmlns="http://www.w3.org/2000/svg"><image href="http://example.invalid/a.png"/></svg>',
    '<svg xmlns="http://www.w3.org/2000/svg"><style>@import url(/etc/passwd);</style></svg>',
    '<svg xmlns="http://www.w3.org/2000/svg"><rect style="fill:url(file:///x)"/></svg>',
])
def test_svg_external_refs_refused(pool, svg):
    r = pool.render(RenderJob(svg, "svg"))
    assert not r.ok and r.error_kind == "forbidden"


def test_svg_internal_refs_allowed():
    assert screen_svg('<svg xmlns="http://www.w3.org/2000/svg"><use href="#a"/>'
                      '<image href="data:image/png;base64,AAAA"/></svg>') is None


def test_svg_parse_error_and_huge(pool):
    bad, huge = pool.render_many([
        RenderJob('<svg xmlns="http://www.w3.org/2000/svg"', "svg"),
        RenderJob('<svg xmlns="http://www.w3.org/2000/svg" width="100000" height="100000"/>', "svg"),
    ])
    assert bad.error_kind == "syntax"
    assert huge.error_kind in ("too_large", "memory")


def test_seccomp_program_is_well_formed():
    prog = build_seccomp_program()
    assert len(prog) % 8 == 0 and 10 < len(prog) // 8 < 4096


def test_unknown_language_rejected(pool):
    with pytest.raises(ValueError):
        pool.render(RenderJob("x", language="latex"))


# --- hostile corpus -------------------------------------------------------------------------------------
HOSTILE = [
    ("busy_loop", "while True: pass", {"timeout"}),
    ("sleep", "import time\ntime.sleep(60)", {"timeout"}),
    ("alloc_10gb", "x = bytearray(10 * 1024**3)", {"memory"}),
    ("numpy_12gb", "import numpy as np\nx = np.ones((40000, 40000))", {"memory"}),
    ("os_system", "import os\nos.system('touch {marker}')", {"forbidden"}),
    ("subprocess", "import subprocess\nsubprocess.run(['touch', '{marker}'])", {"forbidden"}),
    ("fork_bomb", "import os\nwhile True:\n    os.fork()", {"forbidden"}),
    ("read_shadow", "open('/etc/shadow').read()", {"forbidden"}),
    ("list_root", "import os\nos.listdir('/root')", {"forbidden"}),
    ("proc_environ", "open('/proc/1/environ').read()", {"forbidden"}),
    ("write_tmp", "open('{marker}', 'w').write('x')", {"forbidden"}),
    ("ctypes_socket",
     "import ctypes\nl = ctypes.CDLL(None, use_errno=True)\nfd = l.syscall(41, 2, 1, 0)\n"
     "if fd < 0: raise PermissionError(ctypes.get_errno(), 'socket')\n", {"forbidden"}),
    ("kill_parent", "import os\nos.kill(os.getppid(), 9)", {"forbidden"}),
    ("huge_figure", "import matplotlib.pyplot as plt\nplt.figure(figsize=(1000, 1000), dpi=100)\nplt.plot([1, 2])",
     {"too_large", "memory"}),
    ("huge_file", "open('out.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(64 * 1024**2))", {"too_large"}),
    ("png_over_limit", "open('out.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(12 * 1024**2))", {"too_large"}),
    ("symlink_read", "import os\nos.symlink('/etc/passwd', 'l')\nprint(open('l').read())", {"forbidden"}),
    ("symlink_as_output", "import os\nos.symlink('/etc/shadow', 'out.png')", {"invalid_image", "forbidden"}),
    ("symlink_dir_write", "import os\nos.symlink('/tmp', 'd')\nopen('d/{name}', 'w').write('x')", {"forbidden"}),
    ("hardlink_output", "import os\nos.link('/etc/passwd', 'out.png')", {"forbidden", "invalid_image"}),
    ("disk_fill", "for i in range(1000):\n    open(f'f{i}', 'wb').write(bytes(8 * 1024**2))", {"too_large"}),
    ("inode_fill", "for i in range(100000):\n    open(f'f{i}', 'wb').close()", {"too_large"}),
    ("not_a_png", "open('out.png', 'wb').write(b'GIF89a' + bytes(100))", {"invalid_image"}),
    ("corrupt_png",
     "import struct\nopen('out.png','wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + struct.pack('>I', 13) + b'IHDR'"
     " + struct.pack('>II', 64, 64) + bytes(40))", {"invalid_image"}),
    ("tiny_image", "import matplotlib.pyplot as plt\nplt.figure(figsize=(0.02, 0.02))", {"invalid_image"}),
    ("extreme_aspect", "import matplotlib.pyplot as plt\nplt.figure(figsize=(30, 0.5))", {"invalid_image"}),
    ("raises", "raise ValueError('boom')", {"crash"}),
    ("syntax", "def f(:\n  pass", {"syntax"}),
]


@pytest.mark.parametrize("name,code,kinds", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile(pool, name, code, kinds):
    marker = _tmp_marker()
    code = code.replace("{marker}", marker).replace("{name}", os.path.basename(marker))
    t0 = time.monotonic()
    r = pool.render(RenderJob(code), timeout_s=1.5)
    assert not r.ok and r.png is None
    assert r.error_kind in kinds, (r.error_kind, r.message)
    assert time.monotonic() - t0 < 8
    assert not os.path.exists(marker), "the job left a file outside its dir / spawned a process"
    assert _job_processes(pool) == []


def test_loopback_connect_refused(pool):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.setblocking(False)
    try:
        port = srv.getsockname()[1]
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'x')"
        r = pool.render(RenderJob(code), timeout_s=3)
        assert not r.ok and r.error_kind == "forbidden", r
        with pytest.raises(BlockingIOError):
            srv.accept()
    finally:
        srv.close()


def test_kill_parent_leaves_worker_alive(pool):
    pids = pool.worker_pids()
    rs = pool.render_many([RenderJob("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")] * 2)
    assert all(r.error_kind == "forbidden" for r in rs)
    assert pool.worker_pids() == pids and all(os.path.exists(f"/proc/{p}") for p in pids)
    assert pool.render(RenderJob(RED_RECT)).ok


def test_background_thread_does_not_survive(pool):
    code = ("import threading, time, matplotlib.pyplot as plt\n"
            "def spin():\n    while True:\n        time.sleep(0.01)\n"
            "for _ in range(4): threading.Thread(target=spin).start()\n"
            "plt.plot([1, 2])\n")
    r = pool.render(RenderJob(code), timeout_s=5)
    assert r.ok, r  # non-daemon threads do not keep the job alive
    assert _job_processes(pool) == []


# --- pool lifecycle -------------------------------------------------------------------------------------
def test_dead_and_hung_workers_are_replaced_and_close_cleans_up(monkeypatch):
    monkeypatch.setenv("MMEVO_RENDER_TEST_SECRET", "hunter2")
    p = start_render_pool(workers=1, reply_grace_s=1.0, limits=RenderLimits())
    try:
        leak = ("import os, matplotlib.pyplot as plt\n"
                "if any('SECRET' in k or 'hunter2' in v for k, v in os.environ.items()):\n"
                "    raise RuntimeError('leak')\n"
                "plt.plot([1])\n")
        assert p.render(RenderJob(leak)).ok  # the caller's environment never reaches a job
        (pid,) = p.worker_pids()
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
        r = p.render(RenderJob(RED_RECT))
        assert r.ok and p.replaced == 1 and p.worker_pids() != [pid]

        (pid2,) = p.worker_pids()
        os.kill(pid2, signal.SIGSTOP)  # hung worker
        r = p.render(RenderJob(RED_RECT), timeout_s=0.5)
        assert not r.ok and r.error_kind == "crash"
        assert p.replaced == 2 and not os.path.exists(f"/proc/{pid2}")
        assert p.render(RenderJob(RED_RECT)).ok
        last = p.worker_pids()
        bases = [w.base for w in p._workers]
    finally:
        p.close()
    assert not any(os.path.exists(f"/proc/{q}") for q in last)
    assert not any(os.path.exists(b) for b in bases)
    with pytest.raises(RenderPoolError):
        p.render(RenderJob(RED_RECT))


def test_close_during_a_render_ends_the_job_and_starts_no_worker():
    import threading

    from render.pool import _uids_held

    p = start_render_pool(workers=1, reply_grace_s=1.0, limits=RenderLimits())
    (pid,) = p.worker_pids()
    uids = list(p._uids)
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", p.render(RenderJob("import time\ntime.sleep(20)"),
                                                                      timeout_s=20)))
    t.start()
    time.sleep(1.0)  # the job is running
    t0 = time.monotonic()
    p.close()
    t.join(15)
    assert not t.is_alive() and time.monotonic() - t0 < 10
    r = out["r"]
    assert not r.ok and r.error_kind == "crash" and "closed" in r.message
    # no replacement was started after the close, on a uid that close() had already released
    assert p.replaced == 0 and p.worker_pids() == [pid] and not os.path.exists(f"/proc/{pid}")
    assert not any(u in _uids_held for u in uids)


def test_missing_layer_detection():
    full = {**{k: True for k in LAYERS + WORKER_LAYERS}, "landlock": 7}
    assert {"pidns", "mntns", "minimal_root", "procfs", "ipcns", "utsns", "seccomp", "rlimits"} <= set(full)
    assert _missing_layers(full) == []
    assert _missing_layers({**full, "landlock": 0, "seccomp": False}) == ["landlock", "seccomp"]
    assert _missing_layers({**full, "ipcns": False, "minimal_root": False}) == ["minimal_root", "ipcns"]


def test_missing_layer_refused_unless_allowed(capsys):
    if os.geteuid() != 0:
        pytest.skip("needs the full sandbox")
    with pytest.raises(RenderPoolError, match="landlock"):
        RenderPool(workers=1, _skip_layers=("landlock",))
    assert "ISOLATION REDUCED" in capsys.readouterr().err
    with pytest.warns(RuntimeWarning, match="seccomp"):
        p = RenderPool(workers=1, allow_reduced_isolation=True, _skip_layers=("seccomp",))
    try:
        assert p.isolation["seccomp"] is False and p.isolation["landlock"]
        r = p.render(RenderJob(RED_RECT))
        assert r.ok and r.isolation["seccomp"] is False
    finally:
        p.close()


def test_cli_renders_a_file_and_reports_refusals(tmp_path, capsys):
    from PIL import Image

    from mmevo.cli import main

    good = tmp_path / "plot.py"
    good.write_text("import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 2))\nplt.fill([0, 1, 1, 0], [0, 0, 1, 1], 'r')\n"
                    "plt.xlim(0, 1); plt.ylim(0, 1); plt.axis('off')\n")
    out = tmp_path / "out.png"
    assert main(["render", str(good), "-o", str(out)]) == 0
    img = Image.open(out).convert("RGB")
    r, g, b = img.getpixel((img.width // 2, img.height // 2))
    assert r > 200 and g < 60 and b < 60
    bad = tmp_path / "bad.py"
    bad.write_text("open('/etc/shadow').read()\n")
    assert main(["render", str(bad), "-o", str(tmp_path / "no.png")]) == 1
    assert "forbidden" in capsys.readouterr().err
    assert not (tmp_path / "no.png").exists()
    for t in ("nan", "inf", "0", "-1"):  # refused by argparse (exit 2) with the flag named, before any pool starts
        with pytest.raises(SystemExit) as e:
            main(["render", str(good), "-o", str(out), "--timeout", t])
        assert e.value.code == 2 and "--timeout must be in (0, 86400] seconds" in capsys.readouterr().err


# --- PNG checks bounded and complete ---------------------------------------------------------------------
def _chunk(ctype: bytes, data: bytes = b"") -> bytes:
    import struct
    import zlib

    return struct.pack(">I", len(data)) + ctype + data + struct.pack(">I", zlib.crc32(ctype + data))


def _png(before_idat=b"", after_idat=b"", tail=b"", w=32, h=32) -> bytes:
    import struct
    import zlib

    raw = b"".join(b"\0" + bytes([0, 255, 0]) * w for _ in range(h))
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + before_idat
            + _chunk(b"IDAT", zlib.compress(raw)) + after_idat + _chunk(b"IEND") + tail)


def test_png_chunk_walk_bounds_and_completes_validation():
    import struct

    from render.worker import validate_png

    limits = RenderLimits()
    assert validate_png(_png(), limits) == (32, 32, None, "")
    many = _png(before_idat=_chunk(b"abCd") * 3000, after_idat=_chunk(b"tEXt", b"a\0b"))
    assert validate_png(many, limits)[2] is None
    # ~700k empty chunks in 8 MiB: seconds of PIL's Python per job in the root supervisor before the walk
    flood = _png(before_idat=_chunk(b"abCd") * ((limits.max_png_bytes - 200) // 12))
    assert len(flood) <= limits.max_png_bytes
    t0 = time.perf_counter()
    _, _, kind, msg = validate_png(flood, limits)
    assert kind == "invalid_image" and "chunks" in msg, msg
    assert time.perf_counter() - t0 < 0.5
    apng = _png(before_idat=_chunk(b"acTL", struct.pack(">II", 2, 0)))
    for bad, why in [(_png(tail=b"PK\x03\x04<html>" + bytes(1000)), "after IEND"), (apng, "APNG"),
                     (_png(after_idat=_chunk(b"fdAT", bytes(8))), "APNG"),
                     (_png(before_idat=_chunk(b"ABCD")), "critical"),
                     (_png()[:-12], "no IEND"), (_png()[:-2], "past the end")]:
        _, _, kind, msg = validate_png(bad, limits)
        assert kind == "invalid_image" and why in msg, (why, msg)


def test_png_chunk_limits_in_the_sandbox(pool):
    import base64

    import numpy as np
    from PIL import Image

    flood = ("import struct, zlib\n"
             "def chunk(t, d=b''):\n"
             "    return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))\n"
             "raw = b''.join(b'\\0' + bytes(96) for _ in range(32))\n"
             "png = (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', 32, 32, 8, 2, 0, 0, 0))"
             " + chunk(b'abCd') * {n} + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND'){tail})\n"
             "open('out.png', 'wb').write(png)\n")
    # large, barely compressible normal output: matplotlib (PIL) writes 64 KiB IDATs, cairo 8 KiB ones
    mpl = ("import numpy as np, matplotlib.pyplot as plt\n"
           "fig = plt.figure(figsize=(14, 14), dpi=100)\nfig.figimage(np.random.rand(1400, 1400, 3))\n")
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (160, 160, 3), dtype=np.uint8)).save(buf, "PNG")
    data = base64.b64encode(buf.getvalue()).decode()
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="1400" height="1400">'
           f'<image width="1400" height="1400" href="data:image/png;base64,{data}"/></svg>')
    t0 = time.monotonic()
    many, tail, ok, big, big_svg = pool.render_many([
        RenderJob(flood.format(n=100_000, tail="")), RenderJob(flood.format(n=0, tail=" + bytes(1 << 20)")),
        RenderJob(flood.format(n=0, tail="")), RenderJob(mpl), RenderJob(svg, "svg")], timeout_s=10)
    assert many.error_kind == "invalid_image" and "chunks" in many.message, many
    assert tail.error_kind == "invalid_image" and "after IEND" in tail.message, tail
    assert ok.ok and big.ok and big_svg.ok, (ok, big, big_svg)
    assert (big.width, big.height) == (big_svg.width, big_svg.height) == (1400, 1400)
    assert _chunk_count(big.png) > 50 and _chunk_count(big_svg.png) > 300  # and far below MAX_PNG_CHUNKS
    assert time.monotonic() - t0 < 15


def _chunk_count(png: bytes) -> int:
    import struct

    pos, n = 8, 0
    while pos < len(png):
        pos, n = pos + 12 + struct.unpack_from(">I", png, pos)[0], n + 1
    return n


# --- working directory, bytecode, /dev/null, site-packages, SIGKILL, thread budget ---------------------
def test_current_figure_saved_whatever_the_working_directory(pool):
    sub = "import os\nos.makedirs('work')\nos.chdir('work')\nopen('data.csv', 'w').write('1,2')\n" + RED_RECT
    tmp = "import os, tempfile\nos.chdir(tempfile.mkdtemp())\n" + RED_RECT
    root = "import os\nos.chdir('/')\n" + RED_RECT
    for r in pool.render_many([RenderJob(sub), RenderJob(tmp), RenderJob(root)]):
        assert r.ok and _pixel(r.png, (50, 50)) == (255, 0, 0), r


def test_workers_write_no_bytecode(pool):
    # -I ignores PYTHONDONTWRITEBYTECODE: without -B the root worker writes .pyc files into the repository
    r = pool.render(RenderJob("import sys\nassert sys.flags.dont_write_bytecode and sys.dont_write_bytecode\n"
                              + RED_RECT))
    assert r.ok, r


def test_writes_to_dev_null_allowed(pool):
    code = ("import contextlib, os\nwith open(os.devnull, 'w') as f, contextlib.redirect_stdout(f):\n"
            "    print('noise')\nopen(os.devnull, 'wb').write(b'x')\n" + RED_RECT)
    r = pool.render(RenderJob(code))
    assert r.ok, r
    r = pool.render(RenderJob("open('/dev/random', 'wb').write(b'x')\n"))
    assert r.error_kind == "forbidden", r  # other device nodes stay read-only
    # /dev/zero too: opened read-write, a shared mapping of it kept pages outside RLIMIT_AS (test_render_hostile18.py)
    r = pool.render(RenderJob("open('/dev/zero', 'wb').write(b'x')\n"))
    assert r.error_kind == "forbidden", r


def test_base_interpreter_site_packages_hidden(pool):
    import sysconfig

    base = os.path.join(sysconfig.get_paths()["stdlib"], "site-packages")
    if not os.path.isdir(base) or not os.listdir(base) \
            or any(os.path.realpath(p) == os.path.realpath(base) for p in sys.path if p):
        pytest.skip("no separate, non-empty base interpreter site-packages here")
    code = f"import json, os, numpy, matplotlib\nraise RuntimeError(json.dumps(os.listdir({base!r})))\n"
    r = pool.render(RenderJob(code))
    assert r.error_kind == "crash" and r.message.endswith("RuntimeError: []"), r


def test_sigkill_at_a_lowered_cpu_limit_is_a_timeout(pool):
    code = ("import resource, signal\nresource.setrlimit(resource.RLIMIT_CPU, (1, 1))\n"
            "signal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass\n")
    # one CPU-second ends it; the wall-clock limit is far off so that a loaded machine cannot reach it first
    r = pool.render(RenderJob(code), timeout_s=30)
    assert r.error_kind == "timeout" and "CPU time limit" in r.message, r


def test_concurrent_jobs_have_separate_thread_budgets(pool):
    # RLIMIT_NPROC counts a uid's tasks host-wide: each worker slot runs its jobs under its own uid
    hog = ("import os, threading, time\nthreading.stack_size(1 << 16)\nev = threading.Event()\nn = 0\n"
           "for i in range(300):\n    try:\n        threading.Thread(target=ev.wait, daemon=True).start(); n += 1\n"
           "    except RuntimeError:\n        break\ntime.sleep(1.5)\n"
           "from PIL import Image\nImage.new('RGB', (20, 20)).save('out.png')\n"
           "os.write(3, f'ok\\n{n} {os.getuid()}'.encode())\nos._exit(0)\n")
    victim = ("import os, threading, time\ntime.sleep(0.5)\n"
              "for i in range(4):\n    threading.Thread(target=time.sleep, args=(0.1,)).start()\n"
              + RED_RECT + "plt.savefig('out.png')\nos.write(3, f'ok\\n{os.getuid()}'.encode())\nos._exit(0)\n")
    a, b = pool.render_many([RenderJob(hog), RenderJob(victim)], timeout_s=5)
    assert a.ok and b.ok, (a, b)
    n, uid_a = map(int, a.message.removeprefix("job: ").split())
    assert n > pool.limits.nproc - 10 and uid_a != int(b.message.removeprefix("job: ")), (a.message, b.message)


_HOLD_UIDS = ("import sys; sys.path.insert(0, sys.argv[1])\nfrom render.pool import _take_uid\n"
              "print(' '.join(str(_take_uid()) for _ in range(int(sys.argv[2]))), flush=True)\nsys.stdin.read()\n")


def _hold_uids(n: int):
    """A separate process holding ``n`` job uids (as another rank's pool would): (process, its uids)."""
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", _HOLD_UIDS, os.path.dirname(os.path.dirname(os.path.abspath(
        __file__))), str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return proc, [int(u) for u in proc.stdout.readline().split()]


def test_job_uids_are_handed_out_host_wide():
    """Each rank of a distributed run has its own pool: a uid held by another process is not handed out again (its
    jobs would share one RLIMIT_NPROC budget), and it is free again once that process is gone."""
    import fcntl

    from render.pool import LOW_JOB_UIDS, SHARED_UID, _release_uids, _take_uid, uid_lock_path

    other, theirs = _hold_uids(3)
    try:
        assert len(set(theirs)) == 3 and SHARED_UID not in theirs
        mine = [_take_uid() for _ in range(3)]
        try:
            assert not set(mine) & set(theirs) and SHARED_UID not in mine
        finally:
            _release_uids(mine)
    finally:
        other.kill()
        other.wait()
    for uid in theirs:  # the dead holder's locks went with it
        fd = os.open(uid_lock_path(uid), os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert theirs[0] in LOW_JOB_UIDS


def test_slots_beyond_the_container_uids_render_under_a_high_uid():
    from render.pool import HIGH_JOB_UIDS, LOW_JOB_UIDS, _lock_uid, _uids_held, job_uid_candidates

    if HIGH_JOB_UIDS[0] not in job_uid_candidates():
        pytest.skip("this user namespace maps only the low job uids")
    other, theirs = _hold_uids(len(LOW_JOB_UIDS))  # every container-range uid is taken by "another rank"
    try:
        # (this process's module pool holds some; under pytest-xdist another worker's pools may hold others)
        free = [u for u in LOW_JOB_UIDS if u not in _uids_held and (fd := _lock_uid(u)) is not None and not os.close(fd)]
        assert not free and theirs
        with start_render_pool(workers=1) as p:
            r = p.render(RenderJob("import os\n" + RED_RECT + "plt.savefig('out.png')\n"
                                   "os.write(3, f'ok\\n{os.getuid()} {os.getgid()}'.encode())\nos._exit(0)\n"),
                         timeout_s=20)
            assert r.ok, r
            uid, gid = map(int, r.message.removeprefix("job: ").split())
            assert uid == gid and uid in HIGH_JOB_UIDS and _pixel(r.png, (40, 40))[:3] == (255, 0, 0)
    finally:
        other.kill()
        other.wait()
