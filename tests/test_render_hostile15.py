"""render/: a fifteenth pass, on the leftovers of the fourteenth.

1. ``fcntl(F_SETPIPE_SZ)`` grew each pipe a job opened to ``fs.pipe-max-size`` (1 MiB): filled and kept, 57 pipes held
   57 MiB of pipe pages outside RLIMIT_AS. The filter now refuses a size above the default 64 KiB (``EPERM``); a pipe
   may still be shrunk and restored, and every pipe the job may open holds ~3.5 MiB in all.
2. Single files were bind mounts of the host's (``/etc/ld.so.cache``; ``/etc/localtime``, a bind of the zoneinfo file
   it names), and so were ``/dev/{null,zero,random,urandom}``: a lock belongs to the inode, so a job's ``flock`` /
   ``lockf`` on any of them held up a host process locking the same file until the job ended; so did a lock on its own
   stdin / stdout, the host's ``/dev/null`` opened before the tree existed. Files are now copies in the tree's
   skeleton, devices nodes of their own in a tmpfs on ``/dev``, and 0 / 1 / 2 the tree's ``/dev/null``.
3. The PNG validator child runs under the job's uid: nothing of the job is left when it starts (the zygote reports
   the job's exit once its whole thread group is gone), so no thread of the job can reach it (a disproof)."""

import hashlib
import json
import os
import platform
import struct
import sys
import threading
import time
import zlib

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render import sandbox as sb  # noqa: E402

from test_render_hostile12 import _NRS, ALLOW, EPERM, _host_lock_conflicts, _run_filter  # noqa: E402

F_SETLK, F_GETPIPE_SZ, F_SETPIPE_SZ, F_NOTIFY = 6, 1032, 1031, 1026


def _job_json(r) -> dict:
    assert r.error_kind == "crash" and "RuntimeError: {" in r.message, r
    return json.loads(r.message[r.message.index("{"):])


# -- 1. pipes grow no further than the default size ------------------------------------------------------------------
def test_the_filter_refuses_only_a_pipe_size_above_the_default():
    nr = _NRS.get(platform.machine())
    if nr is None or sb.AUDIT_ARCH is None:
        pytest.skip("no seccomp filter for this architecture")
    prog = sb.build_seccomp_program()

    def fcntl(cmd: int, arg: int) -> int:
        return _run_filter(prog, nr["fcntl"], (3, cmd, arg, 0, 0, 0))

    assert sb.PIPE_SIZE_MAX == 65536
    assert [fcntl(F_SETPIPE_SZ, size) for size in (4096, 65535, 65536)] == [ALLOW] * 3  # shrink, restore
    assert [fcntl(F_SETPIPE_SZ, size) for size in (65537, 1 << 20, 2**31, 2**32 - 1)] == [EPERM] * 4
    # a kernel that reads the size as an int sees 4096 in 2**32 + 4096; the filter refuses any high bit
    assert [fcntl(F_SETPIPE_SZ, size) for size in (2**32 + 4096, 2**63 + 4096)] == [EPERM] * 2
    # the command's high bits are not part of it (an unsigned int): F_SETPIPE_SZ still
    assert fcntl(2**32 + F_SETPIPE_SZ, 1 << 20) == EPERM
    # other commands whose argument is a pointer or a large number pass; F_NOTIFY is still refused
    assert [fcntl(cmd, 2**47 - 4096) for cmd in (F_SETLK, F_GETPIPE_SZ, 0)] == [ALLOW] * 3
    assert fcntl(F_NOTIFY, 0) == EPERM


PIPES_JOB = """
import errno, fcntl, json, os
res = {}
r, w = os.pipe()
for size in (1 << 20, 4096, 65536, 65537):
    try:
        res[str(size)] = fcntl.fcntl(w, 1031, size)  # F_SETPIPE_SZ
    except OSError as e:
        res[str(size)] = errno.errorcode[e.errno]
os.close(r); os.close(w)
held = 0
try:
    while True:  # fill every pipe it may open, growing it first where it can; keep only the read ends
        r, w = os.pipe()
        try:
            fcntl.fcntl(w, 1031, 1 << 20)
        except OSError:
            pass
        os.set_blocking(w, False)
        try:
            while True:
                held += os.write(w, bytes(65536))
        except BlockingIOError:
            pass
        os.close(w)
except OSError as e:
    res["stop"] = errno.errorcode[e.errno]
res["held_kib"] = held >> 10
raise RuntimeError(json.dumps(res))
"""


def test_a_job_cannot_grow_its_pipes(render_pool):
    # before: the first size was granted (1048576) and the filled pipes held 58,368 KiB
    res = _job_json(render_pool.render(RenderJob(PIPES_JOB), timeout_s=20))
    assert {k: res[k] for k in ("1048576", "4096", "65536", "65537", "stop")} == {
        "1048576": "EPERM", "4096": 4096, "65536": 65536, "65537": "EPERM", "stop": "EMFILE"}, res
    assert 2048 <= res["held_kib"] <= 4096, res  # ~57 pipes of 64 KiB


# -- 2. no lock of a job reaches a host file ------------------------------------------------------------------------
LOCK_JOB = """
import fcntl, hashlib, json, os, time
res = {}
# read first: closing any descriptor of a file drops every POSIX lock the process holds on it
res["sha256"] = {p: hashlib.sha256(open(p, "rb").read()).hexdigest() for p in FILES}
res["devices"] = [open("/dev/null").read(), open("/dev/zero", "rb").read(3).hex(),
                  len(open("/dev/urandom", "rb").read(5)), open("/dev/null", "w").write("x")]
for path in PATHS:
    fd = path if isinstance(path, int) else os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a POSIX read lock: a host writer's F_SETLKW would wait on it
    res[str(path)] = "locked"
time.sleep(4)
raise RuntimeError(json.dumps(res))
"""
FILES = [p for p in ("/etc/ld.so.cache", "/etc/localtime") if os.path.isfile(p)]
DEVICES = ["/dev/null", "/dev/zero", "/dev/urandom"]


def _device_nodes_possible(tmp_path) -> bool:
    """Whether this process may make a device node that opens (not in a user namespace's container)."""
    node = str(tmp_path / "null")
    try:
        os.mknod(node, 0o600 | 0o020000, os.stat("/dev/null").st_rdev)
        os.close(os.open(node, os.O_RDONLY))
        return True
    except OSError:
        return False


def test_a_job_lock_on_a_single_file_device_or_its_stdio_never_holds_up_the_host(render_pool, tmp_path):
    # before: every path below showed (True, True) on the host while the job held its locks; the job's fd 0 was
    # the host's /dev/null
    devices = DEVICES if _device_nodes_possible(tmp_path) else []
    paths = FILES + [p for p in devices if p != "/dev/null"] + ([0] if devices else [])  # fd 0: its /dev/null
    if not paths:
        pytest.skip("no single file or device node to check here")
    code = f"PATHS = {paths!r}\nFILES = {FILES!r}\n" + LOCK_JOB
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", render_pool.render(RenderJob(code), timeout_s=30)))
    t.start()
    host = [os.path.realpath(p) for p in FILES] + devices
    seen = {p: {"flock": False, "posix": False} for p in host}
    while t.is_alive():
        for p in host:
            for k, v in _host_lock_conflicts(p).items():
                seen[p][k] = seen[p][k] or v
        time.sleep(0.05)
    t.join()
    res = _job_json(out["r"])
    assert {str(p): res[str(p)] for p in paths} == {str(p): "locked" for p in paths}
    assert seen == {p: {"flock": False, "posix": False} for p in host}
    # the copies are the host files' bytes, the device nodes behave as the host's
    assert res["sha256"] == {p: hashlib.sha256(open(p, "rb").read()).hexdigest() for p in FILES}
    assert res["devices"] == ["", "000000", 5, 1]


def test_plots_and_a_library_loaded_through_the_copied_cache_still_work(render_pool):
    code = ("import ctypes, time\nctypes.CDLL('libz.so.1')\nimport matplotlib.pyplot as plt\n"
            "plt.plot([0, 1], [1, 0])\nplt.title(time.strftime('%Z'))\n")
    r = render_pool.render(RenderJob(code), timeout_s=30)
    assert r.ok, r


# -- 3. nothing of a job is left when its PNG's validator runs --------------------------------------------------------
def _chunk(ctype: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + ctype + data + struct.pack(">I", zlib.crc32(ctype + data))


GOOD = (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", 16, 16, 8, 0, 0, 0, 0))
        + _chunk(b"IDAT", zlib.compress(bytes(17 * 16))) + _chunk(b"IEND", b""))
_IDAT_END = GOOD.index(b"IEND") - 4  # the IDAT chunk's CRC ends here
BAD_CRC = GOOD[:_IDAT_END - 4] + b"\0\0\0\0" + GOOD[_IDAT_END:]  # only the validator's PIL check reads CRCs

LINGER_JOB = f"""
import os, threading, time
open("out.png", "wb").write(bytes.fromhex("{BAD_CRC.hex()}"))

def linger():  # once the job has reported, would put a good file under the validator and signal what it sees
    time.sleep(0.5)
    end = time.monotonic() + 20
    while time.monotonic() < end:
        try:
            open("/job/out.png", "wb").write(bytes.fromhex("{GOOD.hex()}"))
            os.setpriority(os.PRIO_USER, 0, 19)
            os.kill(-1, 9)
        except OSError:
            pass
        time.sleep(0.001)

threading.Thread(target=linger).start()  # not a daemon: left running when the job's code returns
"""


def _tasks_of(uids) -> list[str]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                uid = next(int(line.split()[1]) for line in f if line.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        if uid in uids:
            out.append(pid)
    return out


def test_a_job_thread_left_running_never_meets_the_validator(render_pool):
    uids = set(render_pool._uids)
    assert not _tasks_of(uids)
    t = time.monotonic()
    r = render_pool.render(RenderJob(LINGER_JOB), timeout_s=30)
    took = time.monotonic() - t
    # the verdict is the validator's on the bytes the job left (the bad CRC), not the lingering thread's good file
    assert r.error_kind == "invalid_image" and r.message.endswith("(bad header checksum in b'IDAT')"), r
    assert took < 10, took  # the thread ended with the job, long before its 20 s
    assert not _tasks_of(uids)  # no task under a job uid anywhere on the host
    assert render_pool.render(RenderJob(f"open('out.png', 'wb').write(bytes.fromhex('{GOOD.hex()}'))\n"),
                              timeout_s=30).ok
