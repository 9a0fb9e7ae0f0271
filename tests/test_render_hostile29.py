"""render/: a twenty-ninth pass, on the scheduler's host-wide inputs and a fresh batch of hostile programs.

1. ``sched_setattr`` was allowed. It sets, with no privilege over the caller's own tasks, utilisation clamps
   (``SCHED_FLAG_UTIL_CLAMP_MIN / MAX``: a job asking ``uclamp.min`` 1024 has schedutil run its CPU at top frequency and
   capacity-aware placement move it to big cores, and the first use switches uclamp accounting on host-wide) and, on
   Linux 6.12+, an EEVDF custom slice (``sched_runtime`` of a ``SCHED_OTHER`` task, 0.1-100 ms), with which its
   wake-ups preempt the trainer's threads and the other jobs'. On this test machine's kernel (6.18, no
   ``CONFIG_UCLAMP_TASK``) the clamp was ``ENOTSUP`` and the slice was taken: a job read back ``sched_runtime``
   100000 (0.1 ms) from ``sched_getattr``. The attributes lie behind a pointer the filter cannot read, and nothing a
   plot or an SVG runs calls it: the call is now refused whole (``EPERM``). ``sched_setscheduler`` /
   ``sched_setparam`` (Python's ``os`` functions) are other calls and stay, bounded by ``RLIMIT_RTPRIO`` / ``NICE``.
1b, 1c. ``quotactl(Q_SYNC)`` (a host-wide disk flush, unprivileged), ``O_DIRECT`` and ``RWF_DONTCACHE`` (disk reads
   past the page cache) were allowed: all refused now (see each below).
2. A stat storm's negative dentries (host kernel memory): measured, and bounded by the memory cgroup (see below).
3. 32 hostile programs that test_render_hostile21's corpus lacks (threads' clones asking for namespaces, mremap past
   the address-space limit, epoll cycles / nesting / bombs, raised hard limits, fallocate and copy_file_range fills,
   the job dir's inodes exhausted, a 200 MiB environment, writes to /dev/urandom, TIOCSTI, leaving the process group
   the supervisor renices, signals init sends itself, exception chains with cycles and 100,000 links, the worker's own
   exit patched out, out.png a directory or a sparse file, negative / NaN / infinite dpi, PNG names that are not UTF-8
   or lie past PATH_MAX): every one was refused or contained, with the label README gives it, the workers unchanged.
"""

import json
import os
import platform
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render import sandbox as sb  # noqa: E402

from test_render_hostile12 import ALLOW, ENOSYS, EPERM, _run_filter  # noqa: E402

# sched_setattr, sched_getattr, sched_setscheduler, sched_setparam, sched_setaffinity of this machine
_SCHED_NRS = {"x86_64": (314, 315, 144, 142, 203), "aarch64": (274, 275, 119, 118, 122)}
SCHED_FLAG_UTIL_CLAMP_MIN, SCHED_FLAG_UTIL_CLAMP_MAX = 0x20, 0x40


def test_the_filter_refuses_sched_setattr_and_keeps_the_other_scheduler_calls():
    nrs = _SCHED_NRS.get(platform.machine())
    if nrs is None or sb.AUDIT_ARCH is None:
        pytest.skip("no seccomp filter for this architecture")
    setattr_nr, getattr_nr, setscheduler_nr, setparam_nr, setaffinity_nr = nrs
    prog = sb.build_seccomp_program()
    # whatever the attributes point at (the filter sees only the pointer), for its own thread or any pid
    for args in ((0, 0x7FFF0000, 0), (1, 0x7FFF0000, 0), (0, 0, 0), (2**32 + 5, 1, 1)):
        assert _run_filter(prog, setattr_nr, args + (0, 0, 0)) == EPERM, args
    assert [_run_filter(prog, nr, (0, 0x7FFF0000, 56, 0, 0, 0))
            for nr in (getattr_nr, setscheduler_nr, setparam_nr, setaffinity_nr)] == [ALLOW] * 4
    assert "sched_setattr" in sb.EPERM_CALLS and sb.NR["sched_setattr"] == setattr_nr


SCHED_SETATTR_JOB = r"""
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SETATTR, GETATTR = {nrs}
class Attr(ctypes.Structure):
    _fields_ = [("size", ctypes.c_uint32), ("policy", ctypes.c_uint32), ("flags", ctypes.c_uint64),
                ("nice", ctypes.c_int32), ("prio", ctypes.c_uint32), ("runtime", ctypes.c_uint64),
                ("deadline", ctypes.c_uint64), ("period", ctypes.c_uint64), ("util_min", ctypes.c_uint32),
                ("util_max", ctypes.c_uint32)]
def call(nr, *args):
    rc = libc.syscall(nr, *args)
    return "ok" if rc == 0 else errno.errorcode[ctypes.get_errno()]
res = {{}}
def slice_ns():
    now = Attr()
    res["getattr"] = call(GETATTR, 0, ctypes.byref(now), 56, 0)
    return now.runtime
before = slice_ns()
# uclamp.min = uclamp.max = 1024 (SCHED_FLAG_UTIL_CLAMP_MIN | MAX | KEEP_POLICY | KEEP_PARAMS)
res["util_clamp"] = call(SETATTR, 0, ctypes.byref(Attr(size=56, flags=0x20 | 0x40 | 0x08 | 0x10, util_min=1024,
                                                           util_max=1024)), 0)
res["custom_slice"] = call(SETATTR, 0, ctypes.byref(Attr(size=56, policy=0, runtime=100_000)), 0)  # 0.1 ms
res["slice_kept"] = slice_ns() == before != 100_000
res["policy"] = os.sched_getscheduler(0)
os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))  # the calls Python has stay: a lower class is fine
res["batch"] = os.sched_getscheduler(0) == os.SCHED_BATCH
raise RuntimeError(json.dumps(res))
"""


def test_a_job_cannot_set_its_utilisation_clamps_or_a_custom_slice(render_pool):
    nrs = _SCHED_NRS.get(platform.machine())
    if nrs is None:
        pytest.skip("no seccomp filter for this architecture")
    r = render_pool.render(RenderJob(SCHED_SETATTR_JOB.format(nrs=nrs[:2])), timeout_s=20)
    assert r.error_kind == "crash" and "RuntimeError: {" in r.message, r
    got = json.loads(r.message[r.message.index("{"):])
    # before: {"util_clamp": "ENOTSUP" (no CONFIG_UCLAMP_TASK here; "ok" where the kernel has it),
    # "custom_slice": "ok", "slice_kept": False (sched_getattr read 100000 ns back), ...}
    assert got == {"util_clamp": "EPERM", "custom_slice": "EPERM", "getattr": "ok", "slice_kept": True, "policy": 0,
                   "batch": True}, got



# -- 1b. quotactl(Q_SYNC): a host-wide disk flush without privilege ---------------------------------------------------
# quotactl(QCMD(Q_SYNC, USRQUOTA), NULL) needs no capability: it runs sync_fs on every superblock of the host that
# supports quotas (whatever mount namespace the caller is in), and ext4's is a journal commit and a disk cache flush.
# An unprivileged loop (uid 65534, on this VM's ext4 root) flushed the disk 3,834 times in 2 s, once per call, where
# the filter already refuses sync / syncfs and answers fsync without running it. quotactl_fd does the same for one
# file's file system. Both are now EPERM; a job's loop of them flushed the host's disk as fast as it called.
_QUOTACTL_NRS = {"x86_64": (179, 443), "aarch64": (60, 443)}
Q_SYNC_USR = 0x800001 << 8  # QCMD(Q_SYNC, USRQUOTA)


def test_the_filter_refuses_quotactl_and_quotactl_fd():
    nrs = _QUOTACTL_NRS.get(platform.machine())
    if nrs is None or sb.AUDIT_ARCH is None:
        pytest.skip("no seccomp filter for this architecture")
    prog = sb.build_seccomp_program()
    for nr in nrs:
        for args in ((Q_SYNC_USR, 0, 0, 0), (0x800002 << 8, 0, 0, 0), (0, 0, 0, 0)):
            assert _run_filter(prog, nr, args + (0, 0)) == EPERM, (nr, args)
    assert sb.NR["quotactl"] == nrs[0] and sb.NR["quotactl_fd"] == nrs[1]


QUOTA_SYNC_JOB = r"""
import ctypes, errno, json, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
answers, calls, t0 = set(), 0, time.monotonic()
while time.monotonic() - t0 < 1.0:
    rc = libc.syscall({nr}, {cmd}, None, 0, None)
    answers.add("ok" if rc == 0 else errno.errorcode[ctypes.get_errno()])
    calls += 1
raise RuntimeError(json.dumps({{"answers": sorted(answers), "calls": calls}}))
"""


def _disk_flushes() -> int:
    """Flush requests completed by every disk of the host (/proc/diskstats field 16, Linux 5.5+)."""
    total = 0
    with open("/proc/diskstats") as f:
        for row in f:
            fields = row.split()
            if len(fields) >= 20:
                total += int(fields[18])
    return total


def test_a_job_cannot_flush_the_hosts_disks_with_quotactl(render_pool):
    nrs = _QUOTACTL_NRS.get(platform.machine())
    if nrs is None:
        pytest.skip("no seccomp filter for this architecture")
    before = _disk_flushes()
    r = render_pool.render(RenderJob(QUOTA_SYNC_JOB.format(nr=nrs[0], cmd=Q_SYNC_USR)), timeout_s=20)
    flushes = _disk_flushes() - before
    assert r.error_kind == "crash" and "RuntimeError: {" in r.message, r
    got = json.loads(r.message[r.message.index("{"):])
    # before: {"answers": ["ok"], "calls": 239}: each call waited for its flush of this VM's disk (ext4 root)
    assert got["answers"] == ["EPERM"] and got["calls"] > 100, got
    assert flushes < got["calls"] // 4, (flushes, got)  # the host's own writeback flushes a few times a second



# -- 1c. O_DIRECT: disk reads past the page cache ----------------------------------------------------------------------
# A job reading a bound library (numpy's extension, through the overlay view) with O_DIRECT, 1 MiB a call, made 3.3
# GiB of reads of the host's disk in 2 s (/proc/diskstats: the VM disk's full bandwidth, taken from the trainer's data
# loading and checkpoints), where the same reads through the page cache make none. The flag is now refused (EPERM)
# in open / openat / fcntl(F_SETFL); openat2 carries it in a struct the filter cannot read: ENOSYS, as before 5.6.
_OPEN_NRS = {"x86_64": dict(open=2, openat=257, openat2=437, fcntl=72), "aarch64": dict(openat=56, openat2=437,
                                                                                         fcntl=25)}


def test_the_filter_refuses_direct_io_and_openat2():
    nrs = _OPEN_NRS.get(platform.machine())
    if nrs is None or sb.AUDIT_ARCH is None or not getattr(os, "O_DIRECT", 0):
        pytest.skip("no seccomp filter for this architecture")
    prog = sb.build_seccomp_program()
    direct, plain = os.O_DIRECT | os.O_RDONLY | os.O_CLOEXEC, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK
    at = -100 & (2**64 - 1)  # AT_FDCWD
    if "open" in nrs:
        assert _run_filter(prog, nrs["open"], (0x1000, direct, 0, 0, 0, 0)) == EPERM
        assert _run_filter(prog, nrs["open"], (0x1000, plain | os.O_CREAT, 0o600, 0, 0, 0)) == ALLOW
    assert _run_filter(prog, nrs["openat"], (at, 0x1000, direct, 0, 0, 0)) == EPERM
    assert _run_filter(prog, nrs["openat"], (at, 0x1000, direct | (1 << 40), 0, 0, 0)) == EPERM
    assert _run_filter(prog, nrs["openat"], (at, 0x1000, plain | os.O_DIRECTORY, 0, 0, 0)) == ALLOW
    assert _run_filter(prog, nrs["openat2"], (at, 0x1000, 0x2000, 24, 0, 0)) == ENOSYS
    F_SETFL, F_GETFL, F_NOTIFY = 4, 3, 1026
    assert _run_filter(prog, nrs["fcntl"], (3, F_SETFL, os.O_DIRECT | os.O_NONBLOCK, 0, 0, 0)) == EPERM
    assert _run_filter(prog, nrs["fcntl"], (3, F_SETFL, os.O_NONBLOCK | os.O_APPEND, 0, 0, 0)) == ALLOW
    assert _run_filter(prog, nrs["fcntl"], (3, F_GETFL, os.O_DIRECT, 0, 0, 0)) == ALLOW
    assert _run_filter(prog, nrs["fcntl"], (3, F_NOTIFY, 0, 0, 0, 0)) == EPERM  # the fcntl checks before stay


_RWF_NRS = {"x86_64": (327, 328, 295, 296), "aarch64": (286, 287, 69, 70)}  # preadv2, pwritev2, preadv, pwritev
RWF_DONTCACHE, RWF_NOWAIT, RWF_HIPRI, RWF_APPEND = 0x80, 0x08, 0x01, 0x10


def test_the_filter_refuses_uncached_reads_and_writes():
    # RWF_DONTCACHE (Linux 6.14): buffered I/O whose page-cache folios are dropped once done, so that every read of a
    # host file goes to its disk, as O_DIRECT's; the host's ext4 takes it (as root here, preadv2 of libc: 4096 bytes),
    # the overlay views and tmpfs answer EOPNOTSUPP, but a directory shown as a bind is the host's file system
    nrs = _RWF_NRS.get(platform.machine())
    if nrs is None or sb.AUDIT_ARCH is None:
        pytest.skip("no seccomp filter for this architecture")
    preadv2, pwritev2, preadv, pwritev = nrs
    prog = sb.build_seccomp_program()
    for nr in (preadv2, pwritev2):
        assert _run_filter(prog, nr, (3, 0x1000, 1, 0, 0, RWF_DONTCACHE)) == EPERM
        assert _run_filter(prog, nr, (3, 0x1000, 1, 0, 0, RWF_DONTCACHE | RWF_NOWAIT | (1 << 40))) == EPERM
        assert _run_filter(prog, nr, (3, 0x1000, 1, 0, 0, RWF_NOWAIT | RWF_HIPRI | RWF_APPEND)) == ALLOW
        assert _run_filter(prog, nr, (3, 0x1000, 1, 0, 0, 0)) == ALLOW
    # the flags are preadv2's sixth argument only: preadv's high offset word may hold any bits
    assert [_run_filter(prog, nr, (3, 0x1000, 1, 0, RWF_DONTCACHE, 0)) for nr in (preadv, pwritev)] == [ALLOW] * 2


UNCACHED_READ_JOB = r"""
import errno, json, mmap, os
buf = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE)
res = {}
for name, path in (("stdlib", os.__file__), ("job_dir", "/job/f")):
    if name == "job_dir":
        with open(path, "wb") as f:
            f.write(b"x" * 4096)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.preadv(fd, [buf], 0, 0x80)  # RWF_DONTCACHE
        res[name] = "ok"
    except OSError as e:
        res[name] = errno.errorcode[e.errno]
    res[name + "_plain"] = os.preadv(fd, [buf], 0, 0)  # RWF flags of 0 still read
raise RuntimeError(json.dumps(res))
"""


def test_a_job_cannot_read_uncached(render_pool):
    if platform.machine() not in _RWF_NRS:
        pytest.skip("no seccomp filter for this architecture")
    r = render_pool.render(RenderJob(UNCACHED_READ_JOB), timeout_s=20)
    got = json.loads(r.message[r.message.index("{"):])
    # before: "ENOTSUP" (EOPNOTSUPP) from the overlay view and the job tmpfs here, the file system's own answer
    assert got == {"stdlib": "EPERM", "stdlib_plain": 4096, "job_dir": "EPERM", "job_dir_plain": 4096}, got


DIRECT_IO_JOB = r"""
import fcntl, json, mmap, os, time
import numpy._core._multiarray_umath as m
res = {}
try:
    fd = os.open(m.__file__, os.O_RDONLY | os.O_DIRECT)
    res["open_direct"] = "ok"
except OSError as e:
    res["open_direct"] = e.__class__.__name__
    fd = os.open(m.__file__, os.O_RDONLY)
try:
    fcntl.fcntl(fd, fcntl.F_SETFL, os.O_DIRECT)
    res["setfl_direct"] = "ok"
except OSError as e:
    res["setfl_direct"] = e.__class__.__name__
fcntl.fcntl(fd, fcntl.F_SETFL, os.O_NONBLOCK)  # other flags still set
buf = mmap.mmap(-1, 1 << 20, flags=mmap.MAP_PRIVATE)
span = max(os.fstat(fd).st_size - (1 << 20), 1) // 4096
n, t0 = 0, time.monotonic()
while time.monotonic() - t0 < 1.0:
    os.preadv(fd, [buf], (n * 256) % span * 4096)
    n += 1
res["reads"] = n
raise RuntimeError(json.dumps(res))
"""


def _disk_bytes_read() -> int:
    total = 0
    with open("/proc/diskstats") as f:
        for row in f:
            fields = row.split()
            if len(fields) >= 14 and not fields[2].startswith(("loop", "ram", "zram", "dm-", "md")):
                total += int(fields[5]) * 512
    return total


def test_a_job_cannot_read_the_hosts_disk_past_the_page_cache(render_pool):
    if platform.machine() not in _OPEN_NRS or not getattr(os, "O_DIRECT", 0):
        pytest.skip("no seccomp filter for this architecture")
    before = _disk_bytes_read()
    r = render_pool.render(RenderJob(DIRECT_IO_JOB), timeout_s=20)
    read = _disk_bytes_read() - before
    assert "RuntimeError: {" in r.message, r
    got = json.loads(r.message[r.message.index("{"):])
    # before: {"open_direct": "ok", "setfl_direct": "ok", ...} and ~1.6 GiB of disk reads in the second
    assert got["open_direct"] == got["setfl_direct"] == "PermissionError" and got["reads"] > 10, got
    assert read < 256 << 20, read  # cached reads: the library once at most, and the host's own


# -- 2. negative dentries of a stat storm ----------------------------------------------------------------------------
# A job stat()-ing missing names in a bound host directory leaves two negative dentries per name: the overlay view's
# and the host file system's below it (the job tmpfs and the tree's skeleton keep none: 312,200 misses in /job, none
# added). Measured on a loaded 2-core VM, 200-character names under /usr/lib, a 10 s storm (4.2 s of CPU): 414,000
# misses, 829,000 negative dentries, 367 MiB of kernel memory charged to the worker's memory cgroup, still held after
# the job (the host's half outlives the pool); ~90 MiB per CPU second, so about 1 GiB for the trainer's 10 s timeout
# (11 s of CPU limit) on an idle core. Nothing in the pool bounds it but that CPU limit; it is reclaimable and charged
# to the memory cgroup, whose limit bounds it: the same storm in a 128 MiB cgroup made as many misses, kmem peaked at
# 124 MiB (127 reclaim failures), the job ran to its end and the next job rendered. README says so.
STAT_STORM_JOB = r"""
import json, os
name = {tag!r} + "x" * 200
for n in range({misses}):
    try:
        os.stat(f"/usr/lib/{{name}}{{n}}")
    except OSError:
        pass
raise RuntimeError(json.dumps({{"misses": {misses}}}))
"""


def _memory_cgroup_child(name: str, limit_bytes: int | None):
    from test_render_hostile23 import _cgroup_v1

    base = _cgroup_v1("memory", "memory.kmem.max_usage_in_bytes")
    if base is None:
        pytest.skip("no writable cgroup v1 memory hierarchy with kmem accounting here")
    child = os.path.join(base, name)
    os.makedirs(child, exist_ok=True)
    if limit_bytes is not None:
        with open(os.path.join(child, "memory.limit_in_bytes"), "w") as f:
            f.write(str(limit_bytes))
    return base, child


def _storm_in_cgroup(limit_bytes: int | None, misses: int) -> dict:
    from conftest import start_render_pool
    from test_render_hostile23 import _move, _remove_cgroup

    base, child = _memory_cgroup_child(f"hostile29-{os.getpid()}-{limit_bytes}", limit_bytes)
    pool = start_render_pool(workers=1)
    try:
        # the supervisor and its zygote: every job child is forked by the zygote, in its cgroup
        _move(pool.worker_pids() + [w.zygote_pid for w in pool._workers], child)
        # a count, not a time: on a loaded machine the job gets less CPU, never fewer misses (~1.5 s of CPU here)
        r = pool.render(RenderJob(STAT_STORM_JOB.format(tag=os.urandom(6).hex(), misses=misses)), timeout_s=120)
        with open(os.path.join(child, "memory.kmem.max_usage_in_bytes")) as f:
            kmem_peak = int(f.read())
        after = pool.render(RenderJob("import matplotlib.pyplot as plt\nplt.plot([1, 2])\n"), timeout_s=20)
        replaced = pool.replaced
    finally:
        pool.close()
        _remove_cgroup(child, base)
    assert r.error_kind == "crash" and "RuntimeError: {" in r.message, r  # the storm ran to its end, not killed
    assert after.ok and replaced == 0, after
    return {"misses": json.loads(r.message[r.message.index("{"):])["misses"], "kmem_peak": kmem_peak}


def test_a_stat_storms_negative_dentries_are_the_memory_cgroups_to_bound():
    limit = 48 << 20
    free = _storm_in_cgroup(None, 150_000)
    held = _storm_in_cgroup(limit, 150_000)
    # unbounded, every miss costs the cgroup two dentries and their names (~900 bytes measured; 600 asserted)
    assert free["kmem_peak"] > 600 * free["misses"] > 0, free
    # in a cgroup of 48 MiB as many misses as would have charged more than the limit, held at the limit by reclaim
    assert held["kmem_peak"] <= limit < 600 * held["misses"], held


# -- 3. a fresh batch of hostile programs, none of them in test_render_hostile21's corpus ----------------------------
PLT = "import matplotlib.pyplot as plt\n"
DRAW = PLT + "plt.figure(figsize=(1, 1), dpi=50)\nplt.plot([1, 2])\n"
# a raw system call whose -1 is raised as the OSError it stands for, then a plot
RAW = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"
       "r = libc.syscall({call})\nif r == -1:\n    e = ctypes.get_errno()\n    raise OSError(e, os.strerror(e))\n")
# x86_64 numbers (the raw group is skipped elsewhere)
CLONE_THREAD_FLAGS = "0x00010000 | 0x800 | 0x400 | 0x200 | 0x100"  # CLONE_THREAD | SIGHAND | FILES | FS | VM
RAW_CALLS = {  # name: (code, language, timeout_s, accepted kinds)
    # a thread's clone asking for a namespace of its own: the kernel wants CAP_SYS_ADMIN (EPERM), or refuses the
    # combination (EINVAL for a user / pid namespace with CLONE_THREAD)
    "clone_thread_newnet": (RAW.format(call=f"56, {CLONE_THREAD_FLAGS} | 0x40000000, 0, 0, 0, 0") + DRAW, "python",
                            5.0, {"forbidden"}),
    "clone_thread_newuser": (RAW.format(call=f"56, {CLONE_THREAD_FLAGS} | 0x10000000, 0, 0, 0, 0") + DRAW, "python",
                             5.0, {"crash"}),
    "clone_thread_parent": (RAW.format(call=f"56, {CLONE_THREAD_FLAGS} | 0x8000, 0, 0, 0, 0") + DRAW, "python",
                            5.0, {"crash"}),  # EINVAL: a pid namespace's init may not give itself a sibling
    # mremap of a small private mapping to 64 GiB, past RLIMIT_AS: ENOMEM
    "mremap_grow": ("import ctypes, mmap, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                    "libc.mmap.restype = libc.mremap.restype = ctypes.c_void_p\n"
                    "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,"
                    " ctypes.c_long]\n"
                    "libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int]\n"
                    "p = libc.mmap(None, 1 << 20, 3, 0x22, -1, 0)\n"
                    "q = libc.mremap(p, 1 << 20, 64 << 30, 1)\n"
                    "if q in (None, 2**64 - 1):\n    e = ctypes.get_errno()\n    raise OSError(e, os.strerror(e))\n",
                    "python", 5.0, {"memory"}),
    # PR_SET_MM (moving its own brk start): CAP_SYS_RESOURCE
    "prctl_set_mm": (RAW.format(call="157, 35, 6, 0x10000, 0, 0") + DRAW, "python", 5.0, {"forbidden"}),
}
RESOURCES = {
    # an epoll watching an epoll watching it: the kernel's ELOOP, read as a refusal (as for a link not followed)
    "epoll_cycle": ("import select\na, b = select.epoll(), select.epoll()\na.register(b.fileno())\n"
                    "b.register(a.fileno())\n", "python", 5.0, {"forbidden"}),
    # epolls nested deeper than the kernel's limit (4 levels): ELOOP from the fifth
    "epoll_deep_nesting": ("import select\neps = [select.epoll() for _ in range(8)]\n"
                           "for outer, inner in zip(eps[1:], eps):\n    outer.register(inner.fileno())\n",
                           "python", 5.0, {"forbidden"}),
    # epoll instances watching every eventfd until descriptors run out: EMFILE at the 64-fd limit
    "epoll_bomb": ("import os, select\neps, fds = [], []\nwhile True:\n    ep = select.epoll(); eps.append(ep)\n"
                   "    fds.append(os.eventfd(0))\n    for e in eps:\n        for fd in fds:\n"
                   "            try:\n                e.register(fd)\n            except FileExistsError:\n"
                   "                pass\n", "python", 5.0, {"forbidden"}),
    # raising every hard limit (and the soft ones past it): ValueError from Python, EPERM from the kernel
    "raise_hard_limits": ("import resource\nraised = []\n"
                          "for name in ('RLIMIT_AS', 'RLIMIT_CPU', 'RLIMIT_NOFILE', 'RLIMIT_NPROC', 'RLIMIT_FSIZE',"
                          " 'RLIMIT_MEMLOCK', 'RLIMIT_SIGPENDING', 'RLIMIT_RTPRIO', 'RLIMIT_NICE', 'RLIMIT_CORE'):\n"
                          "    lim = getattr(resource, name)\n    soft, hard = resource.getrlimit(lim)\n"
                          "    for new in ((hard, resource.RLIM_INFINITY), (resource.RLIM_INFINITY,) * 2):\n"
                          "        try:\n            resource.prlimit(0, lim, new)\n"
                          "            raised.append(name)\n        except (ValueError, OSError):\n            pass\n"
                          "if raised:\n    raise RuntimeError(f'RAISED {raised}')\n" + DRAW, "python", 5.0, {"ok"}),
    # 10 GiB preallocated in the job dir: its tmpfs size (ENOSPC) or RLIMIT_FSIZE (EFBIG)
    "fallocate_huge": ("import os\nfd = os.open('big', os.O_CREAT | os.O_WRONLY)\n"
                       "os.posix_fallocate(fd, 0, 10 << 30)\n", "python", 5.0, {"too_large"}),
    # a bound library copied in the kernel (copy_file_range) into the job dir: across file systems, EXDEV
    "copy_file_range_cross_fs": ("import os, numpy\nsrc = os.open(numpy.__file__, os.O_RDONLY)\n"
                                 "dst = os.open('copy', os.O_CREAT | os.O_WRONLY)\n"
                                 "os.copy_file_range(src, dst, 1 << 30, 0)\n", "python", 5.0, {"forbidden"}),
    # a job-dir file doubled by copy_file_range onto its own end until the tmpfs or RLIMIT_FSIZE stops it
    "copy_file_range_doubling": ("import os\nfd = os.open('grow', os.O_CREAT | os.O_RDWR)\nos.write(fd, b'x' * 4096)\n"
                                 "while True:\n    size = os.fstat(fd).st_size\n"
                                 "    os.copy_file_range(fd, fd, size, 0, size)\n", "python", 15.0, {"too_large"}),
    # the job dir's 4,096 inodes taken before the figure is saved: out.png cannot be created (ENOSPC)
    "inodes_exhausted": (DRAW + "import os\ni = 0\nwhile True:\n    try:\n"
                         "        os.close(os.open(f'f{i}', os.O_CREAT))\n"
                         "    except OSError:\n        break\n    i += 1\n", "python", 15.0, {"too_large"}),
    # a 200 MiB environment variable and argv: the job's own memory, within its address-space limit
    "huge_env_argv": ("import os, sys\nos.environ['BIG'] = 'a' * (200 << 20)\nsys.argv = ['b' * (200 << 20)]\n" + DRAW,
                      "python", 5.0, {"ok"}),
    # 64 MiB written to /dev/urandom (the host's entropy pool): the tree's device is read-only to the job
    "write_dev_urandom": ("open('/dev/urandom', 'wb').write(b'x' * (64 << 20))\n", "python", 5.0, {"forbidden"}),
    # a character pushed into the terminal's input: the job's stdin is /dev/null, not a tty (ENOTTY)
    "tiocsti_stdin": ("import fcntl, termios\nfcntl.ioctl(0, termios.TIOCSTI, b'x')\n", "python", 5.0, {"crash"}),
    # leaving its process group (the supervisor renices the group): a session leader may not (EPERM)
    "setpgid_leave_group": ("import os\nos.setpgid(0, 0)\n", "python", 5.0, {"forbidden"}),
}
SIGNALS = {
    # signals a pid namespace's init sends its own threads with the default action: ignored, the plot is drawn
    "tgkill_self_sigstop": ("import signal, threading\nsignal.pthread_kill(threading.get_ident(), signal.SIGSTOP)\n"
                            + DRAW, "python", 5.0, {"ok"}),
    "tgkill_self_sigkill": ("import signal, threading\nsignal.pthread_kill(threading.get_ident(), signal.SIGKILL)\n"
                            + DRAW, "python", 5.0, {"ok"}),
    "thread_sigterms_main": ("import signal, threading\nmain = threading.get_ident()\n"
                             "t = threading.Thread(target=lambda: signal.pthread_kill(main, signal.SIGTERM))\n"
                             "t.start(); t.join()\n" + DRAW, "python", 5.0, {"ok"}),
}
EXCEPTIONS = {
    # exception chains the classifier walks: a cycle, an exception among its own args, 100,000 links
    "cause_cycle": ("a, b = ValueError('a'), KeyError('b')\na.__cause__ = b\nb.__cause__ = a\nraise a\n", "python", 5.0,
                    {"crash"}),
    "self_in_args": ("e = RuntimeError()\ne.args = (e, e, e)\nraise e\n", "python", 5.0, {"crash"}),
    "chain_100k": ("e = RuntimeError(0)\nfor i in range(100000):\n    n = RuntimeError(i)\n    n.__cause__ = e\n"
                   "    e = n\nraise e\n", "python", 5.0, {"crash"}),
    # an OSError whose errno is a property that raises: still reported, as an exception that cannot be described
    "errno_property_raises": ("class E(OSError):\n    @property\n    def errno(self):\n        raise SystemExit\n"
                              "raise E(1, 'x')\n", "python", 5.0, {"crash"}),
    # the worker's own exit patched out: after its report the child runs on into the zygote's loop, whose setns is
    # killed by the filter (SIGSYS)
    "os_exit_patched_noop": ("import os\nos._exit = lambda *a: None\n" + DRAW, "python", 5.0, {"forbidden", "ok"}),
}
OUTPUT_TRICKS = {
    # out.png a directory: no regular file to read
    "out_png_is_a_directory": ("import os\nos.mkdir('out.png')\n" + DRAW, "python", 5.0,
                               {"no_output", "invalid_image"}),
    # a figure at a negative, NaN or infinite dpi: no size, `invalid_size` since test_render_hostile33
    "negative_dpi": (PLT + "fig = plt.figure(figsize=(2, 2))\nfig.set_dpi(-100)\nplt.plot([1, 2])\n", "python", 5.0,
                     {"invalid_size"}),
    "nan_dpi": (PLT + "fig = plt.figure(figsize=(2, 2))\nfig.set_dpi(float('nan'))\nplt.plot([1, 2])\n", "python",
                5.0, {"invalid_size"}),
    "inf_dpi": (PLT + "fig = plt.figure(figsize=(2, 2))\nfig.set_dpi(float('inf'))\nplt.plot([1, 2])\n", "python",
                5.0, {"invalid_size"}),
    # the only PNG under a name that is not UTF-8 and holds a terminal escape, at the bottom of 100 directories
    "png_name_bytes_deep": ("import os\nfrom PIL import Image\nfor _ in range(100):\n    os.mkdir('d'); os.chdir('d')\n"
                            "Image.new('RGB', (8, 8), 'red').save(b'\\xff\\x1b[2J.png', format='PNG')\n", "python",
                            5.0, {"ok"}),
    # 2,000 nested directories of 60-character names, a PNG at the bottom: past PATH_MAX from the job dir
    "png_past_path_max": ("import os\nfrom PIL import Image\nfor _ in range(2000):\n    os.mkdir('d' * 60); "
                          "os.chdir('d' * 60)\nImage.new('RGB', (8, 8)).save('deep.png')\n", "python", 15.0,
                          {"no_output"}),
    # out.png a PNG signature stretched to 8 MiB of holes: read in full by the supervisor, refused by the chunk walk
    "sparse_out_png": ("import os\nwith open('out.png', 'wb') as f:\n    f.write(b'\\x89PNG\\r\\n\\x1a\\n')\n"
                       "os.truncate('out.png', (8 << 20) - 1)\n", "python", 5.0, {"invalid_image"}),
}
GROUPS = {"raw_calls": RAW_CALLS, "resources": RESOURCES, "signals": SIGNALS, "exceptions": EXCEPTIONS,
          "output_tricks": OUTPUT_TRICKS}


def test_the_batch_is_new_and_large():
    from test_render_hostile21 import CORPUS, SYSCALLS

    mine = {n: p for g in GROUPS.values() for n, p in g.items()}
    assert len(mine) >= 20 and not set(mine) & (set(CORPUS) | set(SYSCALLS))
    assert not {p[0] for p in mine.values()} & {p[0] for p in {**CORPUS, **SYSCALLS}.values()}


@pytest.mark.parametrize("group", list(GROUPS))
def test_batch_outcomes(render_pool, group):
    from test_render_hostile21 import check_batch

    if group == "raw_calls" and platform.machine() != "x86_64":
        pytest.skip("raw system call numbers are x86_64's")
    got = check_batch(render_pool, GROUPS[group])
    print(json.dumps({n: got[n][:2] for n in GROUPS[group]}, indent=0))
