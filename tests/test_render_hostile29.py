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
