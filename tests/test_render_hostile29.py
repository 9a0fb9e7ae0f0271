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
"""

import json
import os
import platform
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render import sandbox as sb  # noqa: E402

from test_render_hostile12 import ALLOW, EPERM, _run_filter  # noqa: E402

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
import json, os, resource, time
name = {tag!r} + "x" * 200
n = 0
t0 = time.monotonic()
while time.monotonic() - t0 < {secs}:
    for i in range(200):
        try:
            os.stat(f"/usr/lib/{{name}}{{n}}_{{i}}")
        except OSError:
            pass
    n += 1
raise RuntimeError(json.dumps({{"misses": n * 200}}))
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


def _storm_in_cgroup(limit_bytes: int | None, secs: float) -> dict:
    from conftest import start_render_pool
    from test_render_hostile23 import _move, _remove_cgroup

    base, child = _memory_cgroup_child(f"hostile29-{os.getpid()}-{limit_bytes}", limit_bytes)
    pool = start_render_pool(workers=1)
    try:
        # the supervisor and its zygote: every job child is forked by the zygote, in its cgroup
        _move(pool.worker_pids() + [w.zygote_pid for w in pool._workers], child)
        r = pool.render(RenderJob(STAT_STORM_JOB.format(tag=os.urandom(6).hex(), secs=secs)), timeout_s=secs + 10)
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
    free = _storm_in_cgroup(None, 3.0)
    held = _storm_in_cgroup(limit, 3.0)
    # unbounded, every miss costs the cgroup two dentries and their names (~900 bytes measured; 600 asserted)
    assert free["kmem_peak"] > 600 * free["misses"] > 0, free
    # in a cgroup of 48 MiB as many misses as would have charged more than the limit, held at the limit by reclaim
    assert held["kmem_peak"] <= limit < 600 * held["misses"], held
