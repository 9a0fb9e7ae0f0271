"""render/: sandboxed matplotlib / SVG rendering, including a corpus of hostile jobs."""

import io
import os
import signal
import socket
import sys
import time
import uuid

import pytest

from conftest import start_render_pool

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


def _pixel(png: bytes, xy):
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        return im.convert("RGB").getpixel(xy)


def _children_of(pids):
    """Live processes whose parent is one of ``pids`` (the job children of the workers)."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if int(fields["PPid"].strip()) in pids:
            found.append(int(d))
    return found


def _job_processes(pool):
    """Live processes started for jobs: children of the workers or of their zygotes, other than the zygotes."""
    zygotes = {w.zygote_pid for w in pool._workers}
    return [p for p in _children_of(set(pool.worker_pids()) | zygotes) if p not in zygotes]


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
