"""render/: a twenty-eighth pass, on what a job may still ask of the host's scheduler.

1. Core scheduling (``prctl(PR_SCHED_CORE)``, Linux 5.14, ``CONFIG_SCHED_CORE`` on a host with SMT) needs no privilege
   over the caller's own tasks: a job could give its threads a cookie of their own. No task of another cookie (the
   trainer's, the other workers' jobs) may then run on an SMT sibling of a core where one of those threads runs: the
   sibling is forced idle. The first cookie on the host also switches core scheduling on host-wide (a static key
   patched on every CPU, an RCU grace period, every core's run-queue locks), and the last one dropped switches it off,
   so a job creating and dropping cookies in a loop toggled the host's scheduler as fast as it could. The filter allowed
   the option; it is now refused (``EPERM``), whatever its sub-command. On this test machine's kernel (no SMT, no
   ``CONFIG_SCHED_CORE``) the call failed with ``EINVAL`` / ``ENODEV`` before, so the sandbox test reads the errno.
"""

import json
import platform
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render import sandbox as sb  # noqa: E402

from test_render_hostile12 import _NRS, ALLOW, EPERM, _run_filter  # noqa: E402

PR_SCHED_CORE = 62
SUBCOMMANDS = {"get": 0, "create": 1, "share_to": 2, "share_from": 3}
PIDTYPE_TGID = 1


def test_the_filter_refuses_core_scheduling_cookies():
    nr = _NRS.get(platform.machine())
    if nr is None or sb.AUDIT_ARCH is None:
        pytest.skip("no seccomp filter for this architecture")
    prog = sb.build_seccomp_program()

    def prctl(*args) -> int:
        return _run_filter(prog, nr["prctl"], args + (0,) * (6 - len(args)))

    assert [prctl(PR_SCHED_CORE, sub, 0, PIDTYPE_TGID) for sub in SUBCOMMANDS.values()] == [EPERM] * 4
    assert prctl(2**32 + PR_SCHED_CORE, 1, 0, PIDTYPE_TGID) == EPERM  # the option is an int: high bits are not part
    assert [prctl(option, 1) for option in (15, 16, 61, 63)] == [ALLOW] * 4  # PR_SET_NAME, ... pass as before
    assert sb.PR_SCHED_CORE == PR_SCHED_CORE


SCHED_CORE_JOB = r"""
import ctypes, errno, json, threading
libc = ctypes.CDLL(None, use_errno=True)
res = {}
for name, sub in (("create", 1), ("share_to", 2), ("get", 0)):
    cookie = ctypes.c_ulonglong(0)
    uaddr = ctypes.addressof(cookie) if sub == 0 else 0
    pidtype = 0 if sub == 0 else 1  # the calling thread for GET, its whole thread group otherwise
    rc = libc.prctl(62, ctypes.c_ulong(sub), ctypes.c_ulong(0), ctypes.c_ulong(pidtype), ctypes.c_ulong(uaddr))
    res[name] = "ok" if rc == 0 else errno.errorcode[ctypes.get_errno()]
done = []
threads = [threading.Thread(target=lambda: done.append(1)) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
res["threads"] = len(done)
raise RuntimeError(json.dumps(res))
"""


def test_a_job_cannot_take_a_core_scheduling_cookie(render_pool):
    # before: {"create": "ok", ...} on an SMT host whose kernel has CONFIG_SCHED_CORE; EINVAL (no such option) or
    # ENODEV (no SMT) elsewhere, as on the machine these tests were written on
    r = render_pool.render(RenderJob(SCHED_CORE_JOB), timeout_s=20)
    assert r.error_kind == "crash" and "RuntimeError: {" in r.message, r
    got = json.loads(r.message[r.message.index("{"):])
    assert got == {"create": "EPERM", "share_to": "EPERM", "get": "EPERM", "threads": 4}, got


def test_a_plot_with_threads_still_renders(render_pool):
    code = ("import threading\nimport matplotlib.pyplot as plt\nt = threading.Thread(target=lambda: None)\n"
            "t.start(); t.join()\nplt.plot([1, 3, 2])\n")
    r = render_pool.render(RenderJob(code), timeout_s=20)
    assert r.ok and (r.width, r.height) == (640, 480), r


def _sigkill_kind(cpu_s: float, cpu_hard, oom_kills) -> tuple[str, str]:
    """What the supervisor calls a job SIGKILLed after ``cpu_s`` of CPU, at that hard limit and OOM-kill count."""
    import signal
    import time

    from render.types import RenderLimits
    from render.worker import Supervisor

    info = {"pid": 1, "status": signal.SIGKILL, "cpu_s": cpu_s, "cpu_hard": cpu_hard, "oom_kills": oom_kills}
    r = Supervisor._classify(None, info, False, None, False, RenderLimits(), 20.0, time.monotonic(), {})
    return r["error_kind"], r["message"]


def test_a_sigkill_at_the_hard_cpu_limit_is_a_timeout_though_wait4_reports_less():
    # measured on a loaded 2-core VM: a job at a 1 s hard RLIMIT_CPU was SIGKILLed with 0.88 s of precise CPU time
    # (the kernel checks the limit on its tick-sampled clock); it was called `memory` ("below its CPU limit")
    assert _sigkill_kind(0.88, 1, 0) == ("timeout", "CPU time limit (SIGKILL)")
    assert _sigkill_kind(16.0, 22, 0)[0] == "timeout"
    # an OOM kill during its life, or no count to tell: below the limit it stays `memory`
    assert _sigkill_kind(0.88, 1, 1)[0] == "memory"
    assert _sigkill_kind(0.88, 1, None)[0] == "memory"
    assert _sigkill_kind(3.0, 22, 0)[0] == "memory"  # far below: no sampling error comes near half the limit
    assert _sigkill_kind(0.999, 1, None) == ("timeout", "CPU time limit (SIGKILL)")


def test_the_oom_kill_count_is_read_from_vmstat():
    from render.worker import _oom_kills

    with open("/proc/vmstat") as f:  # Linux 4.13+
        want = next(int(line.split()[1]) for line in f if line.startswith("oom_kill "))
    assert _oom_kills() == want


_READ_OWN_ARGV_AND_ENV = (
    "import ctypes, os\n"
    "from PIL import Image\n"
    "Image.new('RGB', (4, 4)).save('out.png')\n"
    "libc = ctypes.CDLL(None)\n"
    # program_invocation_name points at argv[0] on the stack; the exec'd environment strings follow the argv ones
    "import sys\n"
    "p = ctypes.c_void_p.in_dll(libc, 'program_invocation_name').value\n"
    "p += sum(len(a.encode()) + 1 for a in sys.orig_argv)\n"
    "found = []\n"
    "for _ in range(200):\n"  # string by string (each read stops at its NUL): the stack ends a few bytes after
    "    s = ctypes.string_at(p)\n"
    "    if not s:\n"
    "        break\n"
    "    found.append(s)\n"
    "    p += len(s) + 1\n"
    "os.write(3, b'ok\\n' + b'\\n'.join(found))\n"
    "os._exit(0)\n")


def test_a_job_does_not_find_the_callers_home_in_its_memory(monkeypatch):
    # the worker was started with the caller's HOME (for matplotlib's font cache); its environment strings stay on
    # the stack of every job forked from it, and a job read them there with ctypes
    from conftest import start_render_pool

    marker = "/home/mmevo-caller-home-marker"
    monkeypatch.setenv("HOME", marker)
    pool = start_render_pool(workers=1)
    try:
        r = pool.render(RenderJob(_READ_OWN_ARGV_AND_ENV), timeout_s=20)
    finally:
        pool.close()
    assert r.ok, r
    assert "MPLBACKEND=Agg" in r.message, r.message[:400]  # the block read is the worker's environment
    assert marker not in r.message, [line for line in r.message.splitlines() if marker in line]
