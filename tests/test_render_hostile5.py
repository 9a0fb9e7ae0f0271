"""render/: a sixth red-team pass. A PNG whose compressed metadata (iCCP, zTXt, iTXt) inflates far beyond its size was
returned as ok (thousands of 1 KiB iCCP chunks: ~20 s of zlib in the root supervisor and ~10 s in every consumer per
open; 63 zTXt chunks: 66 MiB of text in each opened image); a job could pin unreclaimable kernel memory outside
RLIMIT_AS with POSIX timers / queued signals (the pending-signal limit was the host's); and dnotify
(``fcntl(F_NOTIFY)``), a watch outside inotify, reported host processes' file reads in the bound directories."""

import io
import struct
import sys
import time
import zlib

import pytest

from conftest import png_pixel as _pixel

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob, RenderLimits  # noqa: E402
from render.worker import validate_png  # noqa: E402
from test_render_hostile import _report  # noqa: E402  (the JSON a probing job raised as its exception message)

RED = ("import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(2, 2), dpi=50)\n"
       "ax.add_patch(plt.Rectangle((0, 0), 1, 1, color='red'))\nax.set_xlim(0, 1); ax.set_ylim(0, 1); ax.axis('off')\n")
MIB = 1 << 20


@pytest.fixture(scope="module")
def pool(render_pool):
    return render_pool


def _next_job_renders(pool):
    r = pool.render(RenderJob(RED))
    assert r.ok and (r.width, r.height) == (100, 100) and _pixel(r.png, (50, 50)) == (255, 0, 0), r


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _png_with(chunks: bytes) -> bytes:
    """An 8x8 grey PNG with ``chunks`` between IHDR and IDAT."""
    rows = b"".join(b"\x00" + b"\x80" * 8 for _ in range(8))
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 0, 0, 0, 0)) + chunks
            + _chunk(b"IDAT", zlib.compress(rows)) + _chunk(b"IEND", b""))


_ZEROS = zlib.compress(bytes(MIB - 64), 9)  # ~1 KiB that PIL inflates to just under its 1 MiB per-chunk cap


# --- compressed PNG metadata: bounded by one budget ------------------------------------------------------------
@pytest.mark.parametrize("chunks", [
    b"".join(_chunk(b"zTXt", b"k%d\0\0" % i + _ZEROS) for i in range(63)),  # 63 MiB of text, under PIL's 64
    b"".join(_chunk(b"iTXt", b"k%d\0\x01\0\0\0" % i + _ZEROS) for i in range(20)),
    _chunk(b"iCCP", b"p\0\0" + _ZEROS) * 40,  # PIL keeps no total for iCCP at all
], ids=["ztxt", "itxt", "iccp"])
def test_compressed_metadata_bomb_is_invalid(chunks):
    # before: ok, and each open of the returned PNG inflated it all again (text kept in im.info)
    png = _png_with(chunks)
    assert len(png) < 80 * 1024
    w, h, kind, msg = validate_png(png, RenderLimits())
    assert (w, h, kind) == (8, 8, "invalid_image") and "compressed metadata" in msg, msg


def test_ordinary_compressed_metadata_stays_valid():
    from PIL import Image, PngImagePlugin

    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "x" * 5000, zip=True)  # zTXt
    info.add_itxt("Title", "Ωμέγα " * 500, zip=True)  # compressed iTXt
    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (0, 255, 0)).save(buf, "PNG", pnginfo=info, icc_profile=b"\0" * 200_000)
    assert validate_png(buf.getvalue(), RenderLimits()) == (16, 16, None, "")


ICCP_JOB = """
import io, struct, zlib
from PIL import Image
def chunk(k, d):
    return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d))
buf = io.BytesIO()
Image.new("RGB", (64, 64), (0, 0, 255)).save(buf, "PNG")
png = buf.getvalue()
profile = chunk(b"iCCP", b"p\\0\\0" + zlib.compress(bytes((1 << 20) - 64), 9))
open("out.png", "wb").write(png[:33] + profile * 600 + png[33:])
"""


def test_iccp_bomb_from_a_job_is_refused_quickly(pool):
    # before: ok after ~3 s of zlib in the root supervisor (600 MiB; ~20 s for the 4000 chunks that fit in 4 MiB)
    pids, replaced = pool.worker_pids(), pool.replaced
    t0 = time.monotonic()
    r = pool.render(RenderJob(ICCP_JOB), timeout_s=10)
    assert not r.ok and r.png is None and r.error_kind == "invalid_image", r
    assert "compressed metadata" in r.message and time.monotonic() - t0 < 2.0, r
    assert pool.worker_pids() == pids and pool.replaced == replaced
    _next_job_renders(pool)


# --- kernel memory outside RLIMIT_AS: POSIX timers and queued signals --------------------------------------------
TIMERS_JOB = """
import ctypes, errno, json, resource, signal
libc = ctypes.CDLL(None, use_errno=True)
class SigEvent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_long), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("pad", ctypes.c_char * 48)]
ev, tid = SigEvent(0, 0, 1, b""), ctypes.c_long()  # SIGEV_NONE
res = {"limit": list(resource.getrlimit(resource.RLIMIT_SIGPENDING)), "queued": 0}
ids = []
while len(ids) < 200000 and libc.timer_create(1, ctypes.byref(ev), ctypes.byref(tid)) == 0:
    ids.append(tid.value)
res["timers"], res["timer_errno"] = len(ids), errno.errorcode.get(ctypes.get_errno())
for i in ids:  # give the budget back, then queue real-time signals to this process (blocked: they stay queued)
    libc.timer_delete(ctypes.c_void_p(i))
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
info = (ctypes.c_int * 32)(signal.SIGRTMIN, 0, -1)  # si_signo, si_errno, si_code = SI_QUEUE
while res["queued"] < 200000 and libc.syscall(129, 1, signal.SIGRTMIN, info) == 0:  # rt_sigqueueinfo(1, ...)
    res["queued"] += 1
res["queue_errno"] = errno.errorcode.get(ctypes.get_errno())
raise RuntimeError(json.dumps(res))
"""


def test_timers_and_queued_signals_are_capped(pool):
    # before: the host's limit (~96k here, scaling with RAM): ~36 MiB of unreclaimable slab per job on this box,
    # outside RLIMIT_AS; GiBs on a large host
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("rt_sigqueueinfo number is for x86_64")
    res = _report(pool.render(RenderJob(TIMERS_JOB), timeout_s=10))
    cap = res["limit"][0]
    assert res["limit"] == [cap, cap] and 0 < cap <= 1024, res  # a few hundred KiB of kernel memory at most
    assert 0 < res["timers"] <= cap and res["timer_errno"] == "EAGAIN", res
    assert 0 < res["queued"] <= cap and res["queue_errno"] == "EAGAIN", res
    _next_job_renders(pool)


# --- dnotify: fcntl(F_NOTIFY) on a bound host directory ------------------------------------------------------------
DNOTIFY_JOB = """
import fcntl, json, os, signal, time
res, seen = {}, []
signal.signal(signal.SIGRTMIN + 1, lambda *a: seen.append(1))
for name, d in (("stdlib", os.path.dirname(os.__file__)), ("jobdir", "/job")):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGRTMIN + 1)
        fcntl.fcntl(fd, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MODIFY | fcntl.DN_MULTISHOT)
        res[name] = "OK"
    except OSError as e:
        res[name] = os.strerror(e.errno)
t = time.monotonic()
while time.monotonic() - t < 1.5:
    time.sleep(0.02)
res["events"] = len(seen)
# ordinary fcntl use still works: flags, descriptor flags, record locks on the job's own files
f = open("data.bin", "wb+")
fcntl.fcntl(f, fcntl.F_SETFL, fcntl.fcntl(f, fcntl.F_GETFL) | os.O_APPEND)
fcntl.lockf(f, fcntl.LOCK_EX)
res["fcntl_ok"] = fcntl.fcntl(f, fcntl.F_GETFD) & fcntl.FD_CLOEXEC == fcntl.FD_CLOEXEC
raise RuntimeError(json.dumps(res))
"""


def test_dnotify_denied(pool):
    # before: "OK", and the job counted the host's reads of files in the stdlib directory (here: os.py, every 50 ms)
    import os
    import threading

    stop = threading.Event()

    def host_reads():
        while not stop.is_set():
            with open(os.__file__, "rb") as f:
                f.read(16)
            stop.wait(0.05)

    t = threading.Thread(target=host_reads, daemon=True)
    t.start()
    try:
        res = _report(pool.render(RenderJob(DNOTIFY_JOB), timeout_s=10))
    finally:
        stop.set()
        t.join()
    assert res == {"stdlib": "Operation not permitted", "jobdir": "Operation not permitted", "events": 0,
                   "fcntl_ok": True}, res
    _next_job_renders(pool)


# --- the host-wide uid lock files: a FIFO in place of one -------------------------------------------------------------
def test_fifo_in_place_of_a_uid_lock_file_is_skipped(tmp_path, monkeypatch):
    # before: the pool's open of the lock file blocked until someone opened the FIFO for writing (a local user can
    # create it in the world-writable temp directory, where fs.protected_fifos is 0): RenderPool() hung at start
    import os
    import threading

    from render import pool as pool_mod

    monkeypatch.setattr(pool_mod, "uid_lock_path", lambda uid: str(tmp_path / f"uid-{uid}.lock"))
    fifo = tmp_path / "uid-65533.lock"
    os.mkfifo(fifo)
    got = []
    t = threading.Thread(target=lambda: got.append(pool_mod._lock_uid(65533)), daemon=True)
    t.start()
    t.join(3)
    if t.is_alive():  # release the blocked open (old code), then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        t.join(3)
        pytest.fail("opening a FIFO lock file blocked")
    assert got == [None]
    fd = pool_mod._lock_uid(65532)  # a plain lock file still works, and is exclusive
    try:
        assert fd is not None and pool_mod._lock_uid(65532) is None
    finally:
        os.close(fd)
