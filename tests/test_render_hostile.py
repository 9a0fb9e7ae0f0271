"""render/: hostile jobs of a second red-team pass, one test per hole (each fails on the sandbox before its fix).

Probing jobs report what each attempt returned as JSON in their exception message (``_report``).
"""

import errno
import json
import os
import platform
import resource
import select
import signal
import sys
import threading
import time

import pytest

from conftest import proc_status, start_render_pool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402

SQUARE = ("import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(2, 2), dpi=50)\n"
          "ax.add_patch(plt.Rectangle((0, 0), 1, 1, color='red'))\nax.axis('off')\n")


@pytest.fixture(scope="module")
def pool(render_pool):
    return render_pool


def _report(r) -> dict:
    """The JSON a probing job raised as ``RuntimeError(json.dumps(...))``."""
    assert r.error_kind == "crash" and "RuntimeError: {" in r.message, (r.error_kind, r.message)
    return json.loads(r.message[r.message.index("{"):])


# --- job text reaches terminals and logs: no control characters ---------------------------------------------
EVIL = "\x1b[2J\x1b]0;owned\x07\r\nmmevo render: ok\u202e\x00\x9b"


def test_job_text_is_made_printable(pool):
    raised = f"raise ValueError({EVIL!r})\n"
    framed = f"import os\nos.write(3, ('crash\\n' + {EVIL!r}).encode())\nos._exit(0)\n"
    for r in pool.render_many([RenderJob(raised), RenderJob(framed)]):
        assert r.error_kind == "crash" and r.message.startswith("job: "), r
        assert r.message.isprintable(), repr(r.message)  # no escape sequence, carriage return or line break
        assert "\\x1b[2J" in r.message and "\\r\\nmmevo render: ok\\u202e" in r.message, r.message


# --- host-wide kernel state: the AIO context pool, writeback of every file system ------------------------------
_HOST_WIDE = {"x86_64": {"io_setup": 206, "sync": 162, "syncfs": 306},
              "aarch64": {"io_setup": 0, "sync": 81, "syncfs": 267}}
HOST_WIDE_JOB = """
import ctypes, errno, json
libc = ctypes.CDLL(None, use_errno=True)
ctx = ctypes.c_ulong(0)
args = {{"io_setup": (65536, ctypes.byref(ctx)), "sync": (), "syncfs": (3,)}}
res = {{}}
for name, nr in {nrs!r}.items():
    rc = libc.syscall(nr, *args[name])
    res[name] = "OK" if rc >= 0 else errno.errorcode[ctypes.get_errno()]
raise RuntimeError(json.dumps(res))
"""


def test_host_wide_aio_and_sync_denied(pool):
    nrs = _HOST_WIDE.get(platform.machine())
    if nrs is None:
        pytest.skip("no syscall numbers for this architecture")
    # io_setup(65536) alone takes the whole default fs.aio-max-nr from every other process on the host
    res = _report(pool.render(RenderJob(HOST_WIDE_JOB.format(nrs=nrs))))
    assert res == {"io_setup": "EPERM", "sync": "EPERM", "syncfs": "EPERM"}, res


# --- a job outlives its worker ----------------------------------------------------------------------------------
ORPHAN_JOB = "import ctypes, time\nctypes.CDLL(None).prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG: none\ntime.sleep(30)\n"


def _live_pids_of_uid(uid: int) -> list[int]:
    return [pid for pid, f in proc_status()
            if int(f["Uid"].split()[0]) == uid and not f["State"].strip().startswith("Z")]


def test_job_dies_with_its_worker_even_if_it_clears_its_parent_death_signal():
    p = start_render_pool(workers=1, reply_grace_s=1.0)
    uid, results = p._uids[0], []
    t = threading.Thread(target=lambda: results.append(p.render(RenderJob(ORPHAN_JOB), timeout_s=30)), daemon=True)
    pidfds: list[int] = []
    try:
        t.start()
        deadline = time.monotonic() + 15
        while not pidfds and time.monotonic() < deadline:
            for pid in _live_pids_of_uid(uid):  # the job child (the only process of this slot's uid)
                try:
                    pidfds.append(os.pidfd_open(pid))
                except OSError:
                    pass
            time.sleep(0.05)
        assert pidfds, "the job never started"
        time.sleep(0.5)  # past its prctl, asleep
        p._workers[0].kill()  # supervisor and zygote SIGKILLed, as the pool does to a worker that stops answering
        alive = [fd for fd in pidfds if not select.select([fd], [], [], 3.0)[0]]
        assert not alive, "the job outlived its worker"
        t.join(20)
        assert results and results[0].error_kind == "crash", results
    finally:
        for fd in pidfds:  # never leave the job behind, even on the old sandbox
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                pass
            os.close(fd)
        t.join(20)
        p.close()


# --- scheduling priority inherited from whoever started the pool ------------------------------------------------
PRIO_JOB = """
import errno, json, os
res = {}
try:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    res["fifo"] = "OK"
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
except OSError as e:
    res["fifo"] = errno.errorcode[e.errno]
try:
    os.setpriority(os.PRIO_PROCESS, 0, -5)
    res["nice"] = "OK"
except OSError as e:
    res["nice"] = errno.errorcode[e.errno]
raise RuntimeError(json.dumps(res))
"""


def test_job_gets_no_realtime_or_raised_priority():
    if os.geteuid() != 0:
        pytest.skip("raising the limits the workers inherit needs root")
    limits = (resource.RLIMIT_RTPRIO, resource.RLIMIT_NICE)
    saved = {lim: resource.getrlimit(lim) for lim in limits}
    try:  # a caller with real-time / nice limits (limits.conf, container options): its workers inherit them
        try:
            resource.setrlimit(resource.RLIMIT_RTPRIO, (10, 10))
            resource.setrlimit(resource.RLIMIT_NICE, (30, 30))
        except (ValueError, OSError):
            pytest.skip("this process may not raise its RLIMIT_RTPRIO / RLIMIT_NICE (no CAP_SYS_RESOURCE)")
        p = start_render_pool(workers=1)
    finally:
        for lim, value in saved.items():
            resource.setrlimit(lim, value)
    try:
        res = _report(p.render(RenderJob(PRIO_JOB)))
        assert res == {"fifo": errno.errorcode[errno.EPERM], "nice": errno.errorcode[errno.EACCES]}, res
    finally:
        p.close()


# --- the current figure is saved at the dpi whose size was checked ---------------------------------------------
def test_current_figure_saved_at_the_checked_dpi(pool):
    code = "import matplotlib.pyplot as plt\nplt.rcParams['savefig.dpi'] = 3000\n" + SQUARE
    t0 = time.monotonic()
    r = pool.render(RenderJob(code), timeout_s=10)
    assert r.ok and (r.width, r.height) == (100, 100), r  # not 6000 x 6000 drawn before the supervisor refuses it
    assert time.monotonic() - t0 < 5


# --- refusals wrapped by libraries are still refusals ----------------------------------------------------------
WRAPPED_REFUSALS = {
    "urlopen": "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9/', timeout=1)\n",
    "urlopen_dns": "import urllib.request\nurllib.request.urlopen('http://example.invalid/', timeout=1)\n",
    "getaddrinfo": "import socket\nsocket.getaddrinfo('example.invalid', 80)\n",
    "wrapped_by_arg": "class E(Exception): pass\ntry:\n    open('/etc/shadow')\nexcept OSError as e:\n"
                      "    err = E(e)\nraise err\n",
    "mp_pool": "import multiprocessing\nmultiprocessing.Pool(4)\n",
    "process_pool": "from concurrent.futures import ProcessPoolExecutor\n"
                    "with ProcessPoolExecutor(2) as ex:\n    list(ex.map(abs, [1, 2]))\n",
    "posix_shm": "from multiprocessing import shared_memory\nshared_memory.SharedMemory(create=True, size=1 << 20)\n",
}
PLAIN_ERRORS = {  # a plain error, and one whose context the job suppressed, stay crashes
    "plain": "raise ValueError('boom')\n",
    "suppressed": "try:\n    open('/etc/shadow')\nexcept OSError:\n    raise ValueError('boom') from None\n",
}


def test_wrapped_refusals_are_forbidden(pool):
    jobs = {**WRAPPED_REFUSALS, **PLAIN_ERRORS}
    results = pool.render_many([RenderJob(code) for code in jobs.values()], timeout_s=5)
    kinds = {name: r.error_kind for name, r in zip(jobs, results)}
    assert kinds == {**{k: "forbidden" for k in WRAPPED_REFUSALS}, **{k: "crash" for k in PLAIN_ERRORS}}, \
        [(name, r.error_kind, r.message) for name, r in zip(jobs, results)]


# --- an image too large to open is too large, not a crash -------------------------------------------------------
BOMB = """
import struct, zlib
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
w = h = 60000  # 3.6 G pixels of 1 bit in a few kB
c = zlib.compressobj(9)
idat = b"".join(c.compress(bytes(1 + w // 8)) for _ in range(h)) + c.flush()
open("bomb.png", "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 1, 0, 0, 0, 0))
                             + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
from PIL import Image
Image.open("bomb.png").load()
"""


def test_pil_decompression_bomb_is_too_large(pool):
    r = pool.render(RenderJob(BOMB), timeout_s=8)
    assert r.error_kind == "too_large" and "DecompressionBombError" in r.message, r


# --- an exception whose own code fails is still reported --------------------------------------------------------
UNDESCRIBABLE = {
    "str_raises": ("class E(Exception):\n    def __str__(self):\n        raise ValueError('no')\nraise E()\n", "crash"),
    "name_raises": ("class M(type):\n    @property\n    def __name__(cls):\n        raise RuntimeError\n"
                    "class E(Exception, metaclass=M): pass\nraise E()\n", "crash"),
    "str_huge": ("class E(Exception):\n    def __str__(self):\n        return 'x' * (600 << 20)\nraise E()\n", "memory"),
}


def test_undescribable_exceptions_are_reported(pool):
    results = pool.render_many([RenderJob(code) for code, _ in UNDESCRIBABLE.values()], timeout_s=5)
    for (name, (_, kind)), r in zip(UNDESCRIBABLE.items(), results):
        # before: "job exited with code 122 without a report", as if the sandbox itself had failed
        assert r.error_kind == kind and r.message == "job: exception that cannot be described", (name, r)
