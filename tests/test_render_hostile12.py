"""render/: a twelfth red-team pass. What the seccomp filter still allowed, and one open item of the last pass:

1. ``listmount`` / ``statmount`` (Linux 6.8) gave the job the mount table that Landlock keeps it from reading in
   ``/proc/<pid>/mountinfo``: every bind's root in its source file system, the source device and the options.
2. ``seccomp`` / ``prctl(PR_SET_SECCOMP)``: every thread may stack filters of its own, each a BPF program and its JIT
   image in kernel memory outside RLIMIT_AS (200 threads held 600 filters of 4095 instructions, ~65 MiB of vmalloc).
3. ``cachestat`` (page-cache residency of a bound host file, what host processes read; refused by recent kernels
   only) and every call newer than the filter: each is now refused by the filter itself.
4. A read-only bind shares the host file's inode, and locks belong to the inode: a job's flock / lockf on a bound
   library held up a host process locking it until the job ended. Bound directories are now read-only overlays."""

import json
import platform
import struct
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render import sandbox as sb  # noqa: E402

# --- the filter's answers, read by a small classic-BPF interpreter -------------------------------------------------
ALLOW, KILL = sb.SECCOMP_RET_ALLOW, sb.SECCOMP_RET_KILL_PROCESS
EPERM, ENOSYS = sb.SECCOMP_RET_ERRNO | 1, sb.SECCOMP_RET_ERRNO | 38


def _run_filter(prog: bytes, nr: int, args=(0,) * 6, arch=None) -> int:
    """What the filter returns for one call: the opcodes the filter uses, evaluated over seccomp_data."""
    data = struct.pack("<iIQ6Q", nr, sb.AUDIT_ARCH if arch is None else arch, 0, *[a & (2**64 - 1) for a in args])
    insns = [struct.unpack_from("<HBBI", prog, i) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x54:  # and #k
            acc &= k
        elif code in (0x15, 0x25, 0x35):  # jeq / jgt / jge #k
            hit = {0x15: acc == k, 0x25: acc > k, 0x35: acc >= k}[code]
            pc += jt if hit else jf
        elif code == 0x06:  # ret #k
            return k
        else:
            raise AssertionError(f"opcode {code:#x} not understood by this test")


# syscall numbers of this machine for the calls checked below (the newer ones are the same on both)
_NRS = {"x86_64": dict(read=0, openat=257, prctl=157, fcntl=72, seccomp=317, clone3=435),
        "aarch64": dict(read=63, openat=56, prctl=167, fcntl=25, seccomp=277, clone3=435)}


def test_the_filter_answers_each_call_as_reviewed():
    nr = _NRS.get(platform.machine())
    if nr is None or sb.AUDIT_ARCH is None:
        pytest.skip("no seccomp filter for this architecture")
    prog = sb.build_seccomp_program()
    want = {
        # refused by the filter itself, whatever the kernel would answer
        451: EPERM,  # cachestat
        457: EPERM,  # statmount
        458: EPERM,  # listmount
        nr["seccomp"]: EPERM,
        467: KILL,  # open_tree_attr, as open_tree
        # newer than the filter: as on a kernel without them
        470: ENOSYS, 471: ENOSYS, 512: ENOSYS, 1000: ENOSYS, 0x3FFFFFFF: ENOSYS,
        nr["clone3"]: ENOSYS,
        # ordinary calls, and the newest reviewed one, still pass
        nr["read"]: ALLOW, nr["openat"]: ALLOW, 469: ALLOW,
    }
    got = {n: _run_filter(prog, n) for n in want}
    assert got == want
    # prctl: PR_SET_SECCOMP refused, PR_SET_NAME allowed; fcntl: F_NOTIFY refused, F_GETPIPE_SZ allowed
    assert _run_filter(prog, nr["prctl"], (22, 2, 0, 0, 0, 0)) == EPERM
    assert _run_filter(prog, nr["prctl"], (22, 1, 0, 0, 0, 0)) == EPERM  # strict mode too
    assert _run_filter(prog, nr["prctl"], (15, 0, 0, 0, 0, 0)) == ALLOW
    assert _run_filter(prog, nr["fcntl"], (3, 1026, 0, 0, 0, 0)) == EPERM  # F_NOTIFY
    assert _run_filter(prog, nr["fcntl"], (3, 1032, 0, 0, 0, 0)) == ALLOW  # F_GETPIPE_SZ
    assert _run_filter(prog, nr["read"], arch=0x40000003) == KILL  # another architecture's calls


# --- the same, in a job ------------------------------------------------------------------------------------------
MOUNT_TABLE_JOB = """
import ctypes, errno, json, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(nr, *args)
    return r if r >= 0 else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())
res = {}
# listmount(&{size, spare, LSMT_ROOT, last id}, ids, n, 0): the ids of every mount below the caller's root
req = ctypes.create_string_buffer(struct.pack("<IIQQ", 24, 0, 2**64 - 1, 0), 24)
ids = (ctypes.c_uint64 * 64)()
res["listmount"] = call(458, req, ids, 64, 0)
# statmount of the job's root mount (its id from statx STATX_MNT_ID_UNIQUE), asking for root, point, options, source
stx = ctypes.create_string_buffer(256)
call(332 if os.uname().machine == "x86_64" else 291, -100, b"/", 0, 0x4000, stx)
mnt_id = struct.unpack_from("<Q", stx.raw, 144)[0]
req = ctypes.create_string_buffer(struct.pack("<IIQQ", 24, 0, mnt_id, 0x8 | 0x10 | 0x80 | 0x200), 24)
buf = ctypes.create_string_buffer(1 << 16)
res["statmount"] = call(457, req, buf, 1 << 16, 0)
raise RuntimeError(json.dumps(res))
"""


def _job_json(r) -> dict:
    assert r.error_kind == "crash" and "RuntimeError: {" in r.message, r
    return json.loads(r.message[r.message.index("{"):])


def test_the_job_gets_no_mount_table_without_proc(render_pool):
    # before: listmount named 23 mounts, and statmount gave each one's root in its source file system, source device
    # ("/dev/vda") and options: what /proc/<pid>/mountinfo shows and Landlock refuses
    res = _job_json(render_pool.render(RenderJob(MOUNT_TABLE_JOB), timeout_s=20))
    assert res == {"listmount": "EPERM", "statmount": "EPERM"}


SECCOMP_JOB = """
import ctypes, errno, json, os, platform, struct
libc = ctypes.CDLL(None, use_errno=True)
allow = struct.pack("<HBBI", 0x06, 0, 0, 0x7FFF0000)  # ret ALLOW
prog = ctypes.create_string_buffer(allow * 8, 64)
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fp = Fprog(8, ctypes.cast(prog, ctypes.c_void_p))
res = {}
ctypes.set_errno(0)
rc = libc.prctl(22, 2, ctypes.byref(fp), 0, 0)  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
res["prctl"] = "OK" if rc == 0 else errno.errorcode.get(ctypes.get_errno())
nr = {"x86_64": 317, "aarch64": 277}[platform.machine()]
ctypes.set_errno(0)
rc = libc.syscall(nr, 1, 0, ctypes.byref(fp))  # SECCOMP_SET_MODE_FILTER
res["seccomp"] = "OK" if rc == 0 else errno.errorcode.get(ctypes.get_errno())
raise RuntimeError(json.dumps(res))
"""


def test_the_job_stacks_no_seccomp_filters(render_pool):
    if platform.machine() not in _NRS:
        pytest.skip("no seccomp filter for this architecture")
    # before: both "OK", and 200 threads stacked 600 filters of 4095 instructions (~65 MiB of kernel vmalloc)
    res = _job_json(render_pool.render(RenderJob(SECCOMP_JOB), timeout_s=20))
    assert res == {"prctl": "EPERM", "seccomp": "EPERM"}


def test_plots_and_svg_still_render(render_pool):
    plot = "import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\nplt.title('ok')\n"
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30">'
           '<rect width="40" height="30" fill="red"/></svg>')
    rs = render_pool.render_many([RenderJob(plot), RenderJob(svg, language="svg")], timeout_s=30)
    assert [r.ok for r in rs] == [True, True], rs
    assert (rs[1].width, rs[1].height) == (40, 30)


# --- locks on bound host files -------------------------------------------------------------------------------------
LOCK_JOB = """
import fcntl, json, os, time
res = {}
lib = os.open(os.__file__, os.O_RDONLY)  # a bound host file (the stdlib's os.py)
fcntl.flock(lib, fcntl.LOCK_EX | fcntl.LOCK_NB)
res["flock"] = "OK"
fcntl.lockf(lib, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a POSIX read lock: a host writer's F_SETLKW would wait on it
res["lockf"] = "OK"
st = os.statvfs(os.path.dirname(os.__file__))
res["read_only"] = bool(st.f_flag & os.ST_RDONLY)
time.sleep(4)
raise RuntimeError(json.dumps(res))
"""


def _host_lock_conflicts(path: str) -> dict:
    """Would a host process wait on ``path``: an exclusive flock, and a POSIX write lock (asked with F_GETLK)."""
    import fcntl
    import os

    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            flock = False
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            flock = True
        query = struct.pack("hh4xqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0)
        posix = struct.unpack("hh4xqqi4x", fcntl.fcntl(fd, fcntl.F_GETLK, query))[0] != fcntl.F_UNLCK
        return {"flock": flock, "posix": posix}
    finally:
        os.close(fd)


def _has_overlayfs() -> bool:
    try:
        with open("/proc/filesystems") as f:
            return any(line.split()[-1] == "overlay" for line in f if line.strip())
    except OSError:
        return False


@pytest.mark.skipif(not _has_overlayfs(), reason="no overlayfs in this kernel: bound directories stay plain binds "
                                                 "(render/README.md, limits)")
def test_a_job_lock_on_a_bound_host_file_never_holds_up_the_host(render_pool):
    # before: the job's flock and POSIX read lock were on the host file's own inode (a read-only bind shares it), so a
    # host process locking the stdlib's os.py waited for them until the job ended (up to its timeout)
    import os
    import threading
    import time

    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", render_pool.render(RenderJob(LOCK_JOB), timeout_s=30)))
    t.start()
    seen = {"flock": False, "posix": False}
    while t.is_alive():
        for k, v in _host_lock_conflicts(os.__file__).items():
            seen[k] = seen[k] or v
        time.sleep(0.05)
    t.join()
    assert _job_json(out["r"]) == {"flock": "OK", "lockf": "OK", "read_only": True}
    assert seen == {"flock": False, "posix": False}
