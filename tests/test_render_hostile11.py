"""render/: an eleventh red-team pass. sendfile into a pipe pinned page-cache folios of the bound libraries outside
RLIMIT_AS (the kernel splices file pages into the pipe, as splice does), and clone with CLONE_THREAD but without
CLONE_FILES gave each thread its own fd table, so RLIMIT_NOFILE no longer bounded the job's pipes (100 threads held
3,000 pipes under a limit of 64 fds)."""

import json
import platform
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402

SENDFILE_JOB = """
import errno, json, os, shutil
src = os.__file__  # a bound, read-only library file
fd = os.open(src, os.O_RDONLY)
r, w = os.pipe()
try:
    os.sendfile(w, fd, 0, 1)
    res = "OK"
except OSError as e:
    res = errno.errorcode[e.errno]
shutil.copy(src, "copy.py")  # shutil's sendfile fast path gives up on the first refusal and reads / writes
same = open("copy.py", "rb").read() == open(src, "rb").read()
raise RuntimeError(json.dumps({"sendfile": res, "copy_same": same}))
"""


def test_sendfile_is_refused_and_shutil_copies_still_work(render_pool):
    r = render_pool.render(RenderJob(SENDFILE_JOB), timeout_s=20)
    assert r.error_kind == "crash" and "RuntimeError: {" in r.message, r
    assert json.loads(r.message[r.message.index("{"):]) == {"sendfile": "EPERM", "copy_same": True}


# clone(flags, stack) with a thread's flags minus one shared resource. The child (if the filter lets it exist) has
# no code to run on its fresh stack and faults, which takes the whole thread group down as a plain crash; a refused
# clone kills the job with SIGSYS instead, which the pool reports as "forbidden".
CLONE_JOB = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
stack = ctypes.create_string_buffer(1 << 16)
top = ctypes.addressof(stack) + (1 << 16) - 64
libc.syscall({nr}, {flags}, ctypes.c_void_p(top), None, None, None)
import time
time.sleep(2)
raise RuntimeError("clone returned")
"""
_CLONE_NR = {"x86_64": 56, "aarch64": 220}
CLONE_VM, CLONE_FS, CLONE_FILES, CLONE_SIGHAND, CLONE_THREAD = 0x100, 0x200, 0x400, 0x800, 0x10000
THREAD = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD


@pytest.mark.parametrize("missing", ["CLONE_FILES", "CLONE_FS", "CLONE_VM"])
def test_a_thread_clone_that_does_not_share_everything_is_killed(render_pool, missing):
    nr = _CLONE_NR.get(platform.machine())
    if nr is None:
        pytest.skip("no syscall number for this architecture")
    flags = THREAD & ~globals()[missing]
    r = render_pool.render(RenderJob(CLONE_JOB.format(nr=nr, flags=flags)), timeout_s=20)
    assert r.error_kind == "forbidden", (missing, r)


def test_threads_still_run_and_render(render_pool):
    code = ("from concurrent.futures import ThreadPoolExecutor\nimport numpy as np, matplotlib.pyplot as plt\n"
            "with ThreadPoolExecutor(4) as ex:\n    ys = list(ex.map(lambda k: np.sin(np.linspace(0, k, 50)), range(1, 5)))\n"
            "for y in ys:\n    plt.plot(y)\nplt.savefig('out.png')\n")
    r = render_pool.render(RenderJob(code), timeout_s=60)
    assert r.ok, r
