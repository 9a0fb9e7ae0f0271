"""render/: the escape classes found by a red-team run (issue 12), one block per class.

Each job here tries an escape and, where that is the natural signal, draws a figure when the escape works
(so ``r.ok`` means "escaped"), or reports what each attempt returned as JSON in its exception message.
"""

import base64
import ctypes
import gzip
import json
import os
import sys
import time
import uuid

import pytest

from conftest import start_render_pool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob, RenderPool, RenderPoolError  # noqa: E402
from render.svg import screen_svg  # noqa: E402

PLOT = "import matplotlib.pyplot as plt\nplt.figure(figsize=(1, 1), dpi=40)\nplt.plot([0, 1])\n"
GREEN_PNG = "from PIL import Image\nImage.new('RGB', (20, 20), (0, 255, 0)).save('out.png')\n"


@pytest.fixture(scope="module")
def pool(render_pool):
    return render_pool


@pytest.fixture(scope="module")
def no_seccomp_pool():
    """Seccomp off: shows what the namespaces / root tree alone hold."""
    p = start_render_pool(workers=1, allow_reduced_isolation=True, _skip_layers=("seccomp",))
    yield p
    p.close()


def _report(r) -> dict:
    """The JSON a probing job raised as ``RuntimeError(json.dumps(...))``."""
    assert r.error_kind == "crash" and "RuntimeError: {" in r.message, (r.error_kind, r.message)
    return json.loads(r.message[r.message.index("{"):])


def _genuine(iso: dict) -> bool:
    return iso.get("seccomp") is True and iso.get("uid_drop") is True and "FORGED" not in repr(iso)


# --- 1. SysV IPC ----------------------------------------------------------------------------------------
_IPC_FILES = {"shm": "/proc/sysvipc/shm", "msg": "/proc/sysvipc/msg", "sem": "/proc/sysvipc/sem"}


def _host_ipc_ids(key: int) -> dict:
    out = {}
    for kind, path in _IPC_FILES.items():
        try:
            rows = open(path).read().splitlines()[1:]
        except OSError:
            continue
        out[kind] = [int(r.split()[1]) for r in rows if r.split() and int(r.split()[0]) == key]
    return out


def _remove_host_ipc(key: int) -> None:  # cleanup when an old sandbox let them through
    libc = ctypes.CDLL(None, use_errno=True)
    for kind, ids in _host_ipc_ids(key).items():
        for i in ids:
            {"shm": lambda x: libc.shmctl(x, 0, None), "msg": lambda x: libc.msgctl(x, 0, None),
             "sem": lambda x: libc.semctl(x, 0, 0)}[kind](i)


IPC_CREATE = """
import ctypes, errno, json
libc = ctypes.CDLL(None, use_errno=True)
res = {{}}
for name, call in (("shm", lambda: libc.shmget({key}, 4096, 0o1666)), ("msg", lambda: libc.msgget({key}, 0o1666)),
                   ("sem", lambda: libc.semget({key}, 1, 0o1666))):
    rc = call()
    res[name] = "OK" if rc >= 0 else errno.errorcode[ctypes.get_errno()]
if res["shm"] == "OK":
    libc.shmat.restype = ctypes.c_void_p
    addr = libc.shmat(libc.shmget({key}, 4096, 0), None, 0)
    if addr not in (None, ctypes.c_void_p(-1).value):
        ctypes.memmove(addr, b"left-by-job-a", 13)
raise RuntimeError(json.dumps(res))
"""
IPC_LOOK = """
import ctypes, errno, json
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.shmget({key}, 0, 0)
raise RuntimeError(json.dumps({{"shm": "OK" if rc >= 0 else errno.errorcode[ctypes.get_errno()]}}))
"""


def test_sysv_ipc_denied_and_never_on_the_host(pool):
    key = int(uuid.uuid4().int % 2_000_000_000) + 1
    try:
        res = _report(pool.render(RenderJob(IPC_CREATE.format(key=key))))
        assert res == {"shm": "EPERM", "msg": "EPERM", "sem": "EPERM"}, res
        assert not any(_host_ipc_ids(key).values())
    finally:
        _remove_host_ipc(key)


def test_sysv_ipc_namespace_is_per_job(no_seccomp_pool):
    """Even with seccomp off, IPC objects live in the job's own namespace: not on the host, not in the next job."""
    key = int(uuid.uuid4().int % 2_000_000_000) + 1
    try:
        res = _report(no_seccomp_pool.render(RenderJob(IPC_CREATE.format(key=key))))
        assert res["shm"] == "OK", res  # allowed without seccomp, inside the job's IPC namespace
        assert not any(_host_ipc_ids(key).values()), "SysV object created on the host"
        res = _report(no_seccomp_pool.render(RenderJob(IPC_LOOK.format(key=key))))
        assert res == {"shm": "ENOENT"}, "a later job sees an earlier job's SysV object"
    finally:
        _remove_host_ipc(key)


# --- 2. no earlier job's data in a job's memory --------------------------------------------------------
JOB_A = """
# {pad}
CODE_MARKER = "{x1}"
import matplotlib.pyplot as plt
P2 = "{x2b}"
P1 = "{x2a}"
fig = plt.figure(figsize=(2, 2), dpi=50)
plt.plot([0, 1], [0, 1])
fig.savefig("out.png", metadata={{"Description": P1 + P2}})
"""
# Searches its own memory for each marker as two halves that are never joined in this job (so the job's own
# code cannot match); a third marker is joined here on purpose and must be found (the scan works). Regions come
# from /proc/self/maps, or (where /proc is not readable) from probing pages with mincore() around seed
# addresses; memory is read through a pipe, so an unreadable page gives EFAULT instead of a crash.
JOB_B = """
import ctypes, fcntl, json, os
pairs = [("{x1b}", "{x1a}"), ("{x2b}", "{x2a}"), ("{x3b}", "{x3a}")]
halves = [(a.encode(), b.encode()) for b, a in pairs]
keep = "".join(reversed(pairs[2]))  # the control marker, alive in this job's memory
libc = ctypes.CDLL(None, use_errno=True)
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
libc.write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.write.restype = ctypes.c_ssize_t
libc.sbrk.restype = ctypes.c_void_p
libc.sbrk.argtypes = [ctypes.c_long]
PAGE = 4096
r, w = os.pipe()
try:
    CH = fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
except OSError:
    CH = 1 << 16
vec = ctypes.create_string_buffer(8)
def mapped(a):
    return a > 0 and libc.mincore(ctypes.c_void_p(a), PAGE, vec) == 0
try:
    regions, how = [], "maps"
    for line in open("/proc/self/maps"):
        f = line.split()
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        if f[1].startswith("rw") and (len(f) < 6 or f[5] in ("[heap]", "[stack]")):
            regions.append((lo, hi))
except OSError:
    regions, how = [], "probe"
    big = bytes(1 << 21)
    for seed in (libc.sbrk(0) - 1, id(keep), id(big), id(json), id(halves), ctypes.addressof(vec)):
        lo = seed & ~(PAGE - 1)
        if not mapped(lo) or any(a <= lo < b for a, b in regions):
            continue
        hi = lo + PAGE
        while mapped(lo - PAGE):
            lo -= PAGE
        while mapped(hi):
            hi += PAGE
        regions.append((lo, hi))
L = max(len(a) + len(b) for a, b in halves)
found, scanned = [0, 0, 0], 0
for lo, hi in regions:
    a, tail = lo, b""
    while a < hi:
        k = libc.write(w, ctypes.c_void_p(a), min(CH, hi - a))
        if k <= 0:
            a, tail = (a // PAGE + 1) * PAGE, b""
            continue
        data = tail + os.read(r, k)
        for j, (h1, h2) in enumerate(halves):
            i = data.find(h1)
            while i >= 0:
                if data[i + len(h1):i + len(h1) + len(h2)] == h2:
                    found[j] += 1
                i = data.find(h1, i + 1)
        tail, a, scanned = data[-L:], a + k, scanned + k
raise RuntimeError(json.dumps({{"found": found, "scanned": scanned, "how": how}}))
"""


def test_job_memory_holds_no_earlier_job_data(pool):
    m = [uuid.uuid4().hex for _ in range(6)]
    x1, x2a, x2b, x3a, x3b = "MK1" + m[0] + m[1], "MK2" + m[2], m[3], "MK3" + m[4], m[5]
    a = pool.render(RenderJob(JOB_A.format(pad="p" * 3000, x1=x1, x2a=x2a, x2b=x2b)))
    assert a.ok, a
    assert (x2a + x2b).encode() in a.png  # the marker is in the PNG the worker handled
    for _ in range(2):  # the same worker (slot 0) runs the next jobs
        r = pool.render(RenderJob(JOB_B.format(x1a=x1[:20], x1b=x1[20:], x2a=x2a, x2b=x2b, x3a=x3a, x3b=x3b)),
                        timeout_s=30)
        res = _report(r)
        assert res["scanned"] > 8 << 20 and res["found"][2] >= 1, res  # the scan covered memory and works
        assert res["found"][:2] == [0, 0], f"earlier job's data found in a later job's memory: {res}"


# --- 3. host metadata writes ------------------------------------------------------------------------------
META = """
import errno, json, os
res = {{}}
def attempt(name, fn):
    try:
        fn()
        res[name] = "OK"
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e.errno))
attempt("utime_host", lambda: os.utime({f!r}))
attempt("setxattr_host", lambda: os.setxattr({f!r}, "user.render_test", b"1"))
attempt("chmod_host", lambda: os.chmod({f!r}, 0o600))
attempt("utime_tree", lambda: os.utime("/dev/null"))
attempt("utime_lib", lambda: os.utime(os.__file__))
raise RuntimeError(json.dumps(res))
"""


def test_host_metadata_writes_fail(pool, tmp_path):
    f = f"/tmp/mmevo-render-meta-{uuid.uuid4().hex}"
    with open(f, "w") as fh:
        fh.write("x")
    try:
        os.chmod(f, 0o666)
        os.utime(f, (1_000_000_000, 1_000_000_000))
        res = _report(pool.render(RenderJob(META.format(f=f))))
        assert "OK" not in res.values(), res
        assert res["utime_host"] == res["chmod_host"] == "ENOENT", res  # not even there
        assert res["setxattr_host"] == "EPERM", res  # the filter refuses setxattr before any lookup
        assert res["utime_tree"] == "EROFS" and res["utime_lib"] == "EROFS", res  # the tree is read-only
        st = os.stat(f)
        assert st.st_mtime == 1_000_000_000 and (st.st_mode & 0o777) == 0o666
        assert "user.render_test" not in os.listxattr(f)
    finally:
        os.unlink(f)


# --- 4. host information ----------------------------------------------------------------------------------
INFO = """
import ctypes, errno, json, os, socket
res = {{}}
for name, p in {paths!r}.items():
    try:
        os.stat(p)
        res[name] = "OK"
    except OSError as e:
        res[name] = errno.errorcode[e.errno]
try:
    res["proc_pids"] = sorted(d for d in os.listdir("/proc") if d.isdigit())
except OSError as e:
    res["proc_pids"] = errno.errorcode[e.errno]
libc = ctypes.CDLL(None, use_errno=True)
for name, call in (("inotify", lambda: libc.inotify_init1(0)), ("fanotify", lambda: libc.fanotify_init(0, 0))):
    res[name] = "OK" if call() >= 0 else errno.errorcode[ctypes.get_errno()]
res["hostname"] = socket.gethostname()
raise RuntimeError(json.dumps(res))
"""


def test_host_paths_processes_and_watches_invisible(pool):
    here = os.path.abspath(__file__)
    paths = {"this_test": here, "repo_pkg": os.path.join(os.path.dirname(here), "..", "render"),
             "shadow": "/etc/shadow", "worker_proc": f"/proc/{pool.worker_pids()[0]}"}
    res = _report(pool.render(RenderJob(INFO.format(paths=paths))))
    for name in ("this_test", "repo_pkg", "shadow", "worker_proc"):
        assert res[name] == "ENOENT", (name, res)
    assert res["proc_pids"] == ["1"], res  # a fresh procfs of the job's own pid namespace
    assert res["inotify"] == "EPERM" and res["fanotify"] == "EPERM", res
    assert res["hostname"] == "render" and res["hostname"] != os.uname().nodename


# --- 5. memory outside RLIMIT_AS ----------------------------------------------------------------------------
def test_memfd_denied(pool):
    code = "import os\nfd = os.memfd_create('x')\nos.write(fd, b'x' * (1 << 20))\n" + PLOT
    r = pool.render(RenderJob(code))
    assert not r.ok and r.error_kind == "forbidden", r
    code = "import ctypes\nassert ctypes.CDLL(None).syscall(447, 0) < 0\n" + PLOT  # memfd_secret fails too
    r = pool.render(RenderJob(code))
    assert r.ok, r


# --- 6. forged results ----------------------------------------------------------------------------------------
def test_forged_old_style_frame_is_not_believed(pool):
    code = GREEN_PNG + (
        "import json, os\n"
        "layers = {k: 'FORGED' for k in ('setsid', 'rlimits', 'netns', 'uid_drop', 'no_new_privs', 'landlock',"
        " 'seccomp', 'pidns', 'mntns', 'ipcns')}\n"
        "os.write(3, json.dumps({'kind': 'ok', 'msg': 'FORGED', 'layers': layers}).encode())\nos._exit(0)\n")
    r = pool.render(RenderJob(code))
    assert _genuine(r.isolation), r.isolation  # isolation facts are the worker's, never the job's
    assert r.message != "FORGED" and r.error_kind == "protocol", r


def test_job_message_is_marked_and_isolation_is_the_workers(pool):
    code = GREEN_PNG + "import os\nos.write(3, b'ok\\nFORGED')\nos._exit(0)\n"
    r = pool.render(RenderJob(code))
    assert r.ok and r.message == "job: FORGED", r
    assert _genuine(r.isolation) and r.isolation == {**pool.isolation, "errors": []}
    r = pool.render(RenderJob("import os\nos.write(3, ('crash\\n' + 'y' * 5000).encode())\nos._exit(0)\n"))
    assert r.error_kind == "crash" and r.message.startswith("job: ") and len(r.message) <= 1005, r


@pytest.mark.parametrize("frame", [
    "b'[' * 20000", "b'x' * (8 << 20)", "b'\\xff\\xfe\\n'", "b'owned\\nhello'", "b'ok'", "b'{\"kind\": \"ok\"}'",
], ids=["brackets", "8MiB", "bad_utf8", "unknown_kind", "no_newline", "json"])
def test_malformed_frames_are_protocol_errors(pool, frame):
    code = GREEN_PNG + f"import os\nv = memoryview({frame})\nwhile v:\n    v = v[os.write(3, v):]\nos._exit(0)\n"
    t0 = time.monotonic()
    r = pool.render(RenderJob(code), timeout_s=5)
    assert not r.ok and r.error_kind == "protocol", r
    assert time.monotonic() - t0 < 4


# --- 7. no job input crashes its worker -----------------------------------------------------------------------
DEEP_TREE = ("import os\ntop = os.getcwd()\n" + PLOT + "plt.savefig('out.png')\n"
             "for i in range(1500):\n    os.mkdir('d')\n    os.chdir('d')\nos.chdir(top)\n")


@pytest.mark.parametrize("name,code,kind", [
    ("brackets_frame", "import os\nos.write(3, b'[' * 20000)\n", "protocol"),
    ("deep_tree", DEEP_TREE, None),
])
def test_job_input_never_crashes_the_worker(pool, name, code, kind):
    pids, replaced = pool.worker_pids(), pool.replaced
    r = pool.render(RenderJob(code), timeout_s=10)
    assert r.error_kind == kind, r
    assert pool.replaced == replaced and pool.worker_pids() == pids
    assert pool.render(RenderJob(PLOT)).ok


# --- 8. SVG screening: linear, after parsing, inside the sandbox ---------------------------------------------
SVG = ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="20" height="20">'
       '{}</svg>')


def test_svg_screen_is_linear_and_runs_in_the_sandbox(pool):
    for body in ("<style>" + "url(" * 49_000 + "</style>", '<rect style="' + "url(#a)" * 28_000 + '"/>',
                 "<style>" + "url   " * 32_000 + "</style>", "<style>" + "/*\\u" * 49_000 + "</style>"):
        t0 = time.perf_counter()
        screen_svg(SVG.format(body))
        assert time.perf_counter() - t0 < 0.5
    t0 = time.monotonic()
    r = pool.render(RenderJob(SVG.format("<style>" + "url(" * 49_000 + "</style>"), "svg"), timeout_s=5)
    assert r.error_kind == "forbidden" and time.monotonic() - t0 < 3, r
    assert _genuine(r.isolation), "the screen must run inside the sandboxed child"


_NESTED = base64.b64encode(b'<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"/>').decode()
_IMPORT = "@import url(data:text/css,rect%7Bfill:red%7D);"


@pytest.mark.parametrize("body", [
    '<rect width="9" height="9" fill="&#117;rl(file:///etc/passwd)"/>',
    '<rect width="9" height="9" style="fill:u\\72l(file:///etc/passwd)"/>',
    '<style>rect {{ fill: u\\72 l(file:///etc/passwd) }}</style><rect width="9" height="9"/>',
    '<style>rect {{ fill: ur/**/l(file:///etc/passwd) }}</style>',
    '<style>@\\69mport "x.css";</style>',
    '<image width="9" height="9" href="&#102;ile:///etc/passwd"/>',
    '<image width="9" height="9" xlink:href=" fi&#10;le:///etc/passwd"/>',
    '<image width="9" height="9" href="data:image/svg+xml;base64,PHN2Zy8+"/>',
    '<use href="http://example.invalid/x.svg#a"/>',
    # cairosvg sniffs a data: payload (b"<svg" anywhere, gzip) whatever its declared type
    f'<image width="9" height="9" href="data:image/png;base64,{_NESTED}"/>',
    f'<image width="9" height="9" href="data:;BASE64,{_NESTED}"/>',
    '<image width="9" height="9" href="data:image/png,%3Csvg%20xmlns=%22http://www.w3.org/2000/svg%22/%3E"/>',
    f'<image width="9" height="9" href="data:image/png;base64,{base64.b64encode(gzip.compress(b"<svg/>")).decode()}"/>',
    # cairosvg copies every CSS declaration onto the element, href included
    f'<image width="9" height="9" style="href:\'data:image/svg+xml;base64,{_NESTED}\'"/>',
    f'<style>image {{{{ xlink:href: "data:image/png;base64,{_NESTED}" }}}}</style><image width="9" height="9"/>',
    '<image width="9" height="9" style="h\\72 ef/**/ : \'#a\'"/>',
    # "/*" inside a string, or inside an unquoted url(...), starts no comment
    '<style>a {{ content: "/*" }} ' + _IMPORT + ' b {{ content: "*/" }}</style>',
    "<style>a {{ content: '/*' }} rect {{ fill: url(file:///etc/passwd) }} b {{ content: '*/' }}</style>",
    '<style>a {{ b: \\75rl(/*) }} ' + _IMPORT + ' c {{ d: \\75rl(*/) }}</style>',
], ids=["charref_url", "css_escape_attr", "css_escape_space", "css_comment", "import_escape", "charref_href",
        "newline_href", "nested_svg", "remote_use", "nested_svg_as_png", "nested_svg_no_type", "nested_svg_percent",
        "nested_svgz", "css_href_attr", "css_href_sheet", "css_href_escaped", "comment_in_strings_import",
        "comment_in_strings_url", "comment_in_url_token"])
def test_svg_reference_tricks_refused(pool, body):
    r = pool.render(RenderJob(SVG.format(body), "svg"))
    assert r.error_kind == "forbidden", (r.error_kind, r.message)


def test_svg_screen_limits_and_allowed_refs():
    from render.svg import check_svg

    ok = SVG.format('<defs><linearGradient id="g"/></defs><rect id="r" fill="url(#g)" style="fill:url(\'#g\')"/>'
                    '<use xlink:href="#r"/><image href="data:image/png;base64,AAAA"/>')
    assert check_svg(ok) is None
    doctype = ('<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
               '"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">')
    assert check_svg(doctype + ok) is None  # an external DTD id is fine: it is never read
    assert check_svg(ok, max_bytes=100)[0] == "too_large"
    assert check_svg("<svg")[0] == "syntax"
    assert check_svg('<svg xmlns="http://www.w3.org/2000/svg">&ent;</svg>')[0] == "syntax"
    assert check_svg(doctype + '<svg xmlns="http://www.w3.org/2000/svg">&ent;</svg>')[0] == "forbidden"
    assert check_svg('<?xml-stylesheet href="a.css"?><svg/>')[0] == "forbidden"
    assert check_svg('<html/>')[0] == "forbidden"


def test_svg_screen_keeps_ordinary_css_and_images(pool):
    import io

    from PIL import Image

    from render.svg import check_svg

    buf = io.BytesIO()
    Image.new("RGB", (20, 20), (0, 255, 0)).save(buf, "PNG")
    png = base64.b64encode(buf.getvalue()).decode()
    ok = SVG.format('<style>text {{ font-family: "DejaVu Sans", \'a/*b*/\' }} /* note */ '
                    'a[href]:hover, image:not([href]) {{ opacity: .5 }}</style>'
                    '<rect width="20" height="20" style="fill:#f00; stroke: url(\'#g\'); --href: 1"/>'
                    f'<image width="20" height="20" xlink:href="data:image/png;base64,{png}"/>'
                    '<text style="font-family:\'x/*\'" aria-label="href: none">t</text>')
    assert check_svg(ok) is None
    r = pool.render(RenderJob(ok, "svg"))
    assert r.ok and (r.width, r.height) == (20, 20), r
    with Image.open(io.BytesIO(r.png)) as im:
        assert im.convert("RGB").getpixel((3, 3)) == (0, 255, 0)  # the embedded PNG was drawn


# --- 9. PNG accepted only after a full decode -----------------------------------------------------------------
PNG_JOB = """
import struct, zlib
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
ihdr = struct.pack(">IIBBBBB", 64, 64, 8, 2, 0, 0, 0)
idat = {idat}
png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
open("out.png", "wb").write(png)
"""


@pytest.mark.parametrize("idat", ["bytes(range(256)) * 8", "zlib.compress(bytes(500))"], ids=["garbage", "short"])
def test_png_must_fully_decode(pool, idat):
    r = pool.render(RenderJob(PNG_JOB.format(idat=idat)))
    assert not r.ok and r.error_kind == "invalid_image", r
    good = PNG_JOB.format(idat="zlib.compress(b''.join(b'\\0' + bytes(192) for _ in range(64)))")
    assert pool.render(RenderJob(good)).ok


# --- missing layers are named and refused ---------------------------------------------------------------------
def test_new_layers_reported_and_refused(no_seccomp_pool):
    if os.geteuid() != 0:
        pytest.skip("needs the full sandbox")
    with pytest.raises(RenderPoolError, match="ipcns"):
        RenderPool(workers=1, _skip_layers=("ipcns",))
    with pytest.warns(RuntimeWarning, match="minimal_root"):
        p = RenderPool(workers=1, allow_reduced_isolation=True, _skip_layers=("pidns", "minimal_root", "job_tmpfs"))
    try:
        assert p.isolation["pidns"] is False and p.isolation["procfs"] is False
        assert p.isolation["minimal_root"] is False and p.isolation["job_tmpfs"] is False and p.isolation["landlock"]
        r = p.render(RenderJob(PLOT))
        assert r.ok and r.isolation["minimal_root"] is False, r
        r = p.render(RenderJob("open('/etc/shadow').read()"))
        assert r.error_kind == "forbidden", r  # Landlock on host paths still holds
        r = p.render(RenderJob(DEEP_TREE), timeout_s=10)  # a plain job dir: removed iteratively
        assert r.ok and p.replaced == 0, r
        assert p.render(RenderJob(PLOT)).ok
    finally:
        p.close()
