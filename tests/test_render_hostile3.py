"""render/: a fourth red-team pass. A job that makes itself dumpable again (its crash would reach the host's core
handler), a caller interrupted during render_many (the next call got the interrupted call's results), timeouts that
are not plain floats (every worker replaced) and a job tmpfs of size 0 (which tmpfs reads as unlimited)."""

import decimal
import json
import signal
import sys
import threading
import time

import pytest

from conftest import png_pixel as _pixel

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob, RenderLimits, RenderPool  # noqa: E402

SQUARE = ("import matplotlib.pyplot as plt, time\ntime.sleep({sleep})\n"
          "fig, ax = plt.subplots(figsize=(2, 2), dpi=50)\n"
          "ax.add_patch(plt.Rectangle((0, 0), 1, 1, color='{color}'))\n"
          "ax.set_xlim(0, 1); ax.set_ylim(0, 1); ax.axis('off')\n")
RGB = {"red": (255, 0, 0), "blue": (0, 0, 255), "green": (0, 128, 0)}


def square(color: str, sleep: float = 0) -> RenderJob:
    return RenderJob(SQUARE.format(color=color, sleep=sleep))


@pytest.fixture(scope="module")
def pool(render_pool):
    return render_pool


def _assert_colors(results, colors):
    for r, c in zip(results, colors):
        assert r.ok and (r.width, r.height) == (100, 100), r
        assert _pixel(r.png, (50, 50)) == RGB[c], (c, _pixel(r.png, (50, 50)))


# --- the job stays undumpable -------------------------------------------------------------------------------
DUMPABLE_JOB = """
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE = 1
err = ctypes.get_errno()
raise RuntimeError(json.dumps({"set": [rc, err], "dumpable": libc.prctl(3, 0, 0, 0, 0)}))  # PR_GET_DUMPABLE
"""


def test_job_cannot_make_itself_dumpable(pool):
    # before: prctl succeeded ({"set": [0, 0], "dumpable": 1}), so a crash (SIGSEGV) would core-dump; with a pipe
    # core_pattern (apport, systemd-coredump) the kernel runs that host helper as root on the job's memory
    r = pool.render(RenderJob(DUMPABLE_JOB))
    assert r.error_kind == "crash" and "RuntimeError: {" in r.message, r
    assert json.loads(r.message[r.message.index("{"):]) == {"set": [-1, 1], "dumpable": 0}  # EPERM, still 0


# --- a caller interrupted during render_many --------------------------------------------------------------------
class _Interrupted(Exception):
    pass


def test_interrupted_render_many_leaves_no_reply_for_the_next_call(pool):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach only the main thread")
    replaced = pool.replaced

    def interrupt(*_):
        raise _Interrupted()

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(_Interrupted):  # both workers hold a slow blue job when the caller is interrupted
            pool.render_many([square("blue", 1.5)] * 4, timeout_s=10)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    # before: this call read the interrupted call's blue reply as its own result (and the old threads went on
    # with the other blue jobs)
    t0 = time.monotonic()
    _assert_colors(pool.render_many([square("red")], timeout_s=10), ["red"])
    _assert_colors(pool.render_many([square("green"), square("red")], timeout_s=10), ["green", "red"])
    assert time.monotonic() - t0 < 8 and pool.replaced == replaced


# --- timeouts: numbers only, each used as a plain float -------------------------------------------------------
@pytest.mark.parametrize("timeout_s", ["5", b"5", None, object()], ids=["str", "bytes", "None", "object"])
def test_non_numeric_timeouts_are_refused(pool, timeout_s):
    pids, replaced = pool.worker_pids(), pool.replaced
    # before: "5" passed the check, broke the reply wait after the job was sent: a crash and a replaced worker;
    # None / object() raised TypeError from float()
    with pytest.raises(ValueError, match="timeout_s"):
        pool.render_many([square("red")], timeout_s=timeout_s)
    assert pool.worker_pids() == pids and pool.replaced == replaced


def test_numeric_timeouts_of_other_types_work(pool):
    np = pytest.importorskip("numpy")
    pids, replaced = pool.worker_pids(), pool.replaced
    for t in (decimal.Decimal("5"), np.float32(5), np.int64(5)):  # before: Decimal and float32 replaced the worker
        _assert_colors(pool.render_many([square("red")], timeout_s=t), ["red"])
    assert pool.worker_pids() == pids and pool.replaced == replaced


# --- a job tmpfs without a size limit --------------------------------------------------------------------------
@pytest.mark.parametrize("disk_bytes", [0, -1])
def test_job_dir_size_must_be_positive(disk_bytes):
    # before: disk_bytes=0 started a pool whose job dirs were tmpfs with size=0, i.e. unlimited (a job wrote
    # 180 MiB of host memory there; up to 4096 files of RLIMIT_FSIZE 32 MiB)
    with pytest.raises(ValueError, match="disk_bytes"):
        p = RenderPool(workers=1, limits=RenderLimits(disk_bytes=disk_bytes))
        p.close()
