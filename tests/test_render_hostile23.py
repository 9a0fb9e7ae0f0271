"""render/: a twenty-third pass, on jobs against their neighbours and on the pool over a long run.

1. CPU. The timeout is wall clock (render/README.md), so the time a job waits for a CPU counts against it. The kernel
   weighs every runnable thread alike, unless autogroup applies (``kernel.sched_autogroup_enabled`` and the pool in the
   root cpu cgroup), which weighs each session (every job is one). In a cgroup of its own (a container's, a systemd
   service's; reproduced here with a child of the cgroup v1 cpu hierarchy) a job spinning threads starved the jobs of
   the other workers: 14 threads made a plot on the other worker take 3.4 s instead of 0.45 s, 60 threads 10 s, and
   200 (64 KiB stacks, one malloc arena, so that its address space allows them) made it a ``timeout`` at 10 s, its
   result changed by its neighbour's code. The supervisor now raises the nice level of a job's thread group as its
   thread count grows (``worker._fair_nice``: the threads together weigh at most one thread at nice 0, up to 68
   threads; nice 19 past that), and the job cannot lower it (``RLIMIT_NICE`` 0): the same plot took 0.27-0.48 s
   beside 8 to 200 spinning threads, and the heavier plot below (0.48 s alone) 0.9-2.1 s, a ``timeout`` at 20 s
   before.
2. State a job leaves for the next one on its worker (a fresh child of the zygote per job, a fresh tmpfs): rcParams,
   a matplotlibrc / font list / cache files in its HOME / MPLCONFIGDIR, monkeypatched matplotlib / numpy / PIL,
   ``sys.modules`` entries, atexit hooks, signal handlers, threads left running, a full job dir, memory just under
   the limit: none changes the next job's image bytes (pinned below; no defect found).
3. A long run of mixed hostile and benign jobs through one pool: 328 jobs (8 batches of 41) kept the pool's and the
   workers' descriptors, the workers' mount tables, the zygotes' memory, the temp dirs and the process list unchanged,
   no worker was replaced, no zombie was left, and the batch time stayed flat (5.6-6.9 s); a shorter mix is pinned
   below (no defect found).
"""

import os
import signal
import sys
import threading
import time

import pytest

from conftest import job_processes as _job_processes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render import worker as wk  # noqa: E402

from test_render_hostile12 import _job_json  # noqa: E402

TIMEOUT_S = 20  # per render: CI machines are slower than the ~0.2-1 s these take here

PLOT = """
import matplotlib.pyplot as plt
import numpy as np
x = np.linspace(0, 10, 500)
for k in range(6):
    plt.plot(x, np.sin(x + k), label=f"k={k}")
plt.legend()
plt.title("benign")
"""
SVG = ('<svg xmlns="http://www.w3.org/2000/svg" width="80" height="60"><rect x="5" y="5" width="40" height="30" '
       'fill="#3366cc"/><circle cx="60" cy="40" r="12" fill="orange"/></svg>')


@pytest.fixture(scope="module")
def reference(render_pool):
    """The benign plot's and SVG's bytes, rendered before anything hostile ran."""
    plot, svg = render_pool.render_many([RenderJob(PLOT), RenderJob(SVG, "svg")], timeout_s=TIMEOUT_S)
    assert plot.ok and svg.ok, (plot, svg)
    return {"python": plot.png, "svg": svg.png}


# ~0.5 s of CPU alone: starved to a 200th of the CPU, far past its timeout
HEAVY_PLOT = """
import matplotlib.pyplot as plt
import numpy as np
rng = np.random.default_rng(7)
fig, axes = plt.subplots(2, 2, figsize=(8, 6))
for ax in axes.flat:
    for k in range(30):
        ax.plot(np.cumsum(rng.standard_normal(3000)), lw=0.5)
    ax.set_title("walks")
"""


@pytest.fixture(scope="module")
def heavy_reference(render_pool):
    r = render_pool.render(RenderJob(HEAVY_PLOT), timeout_s=TIMEOUT_S)
    assert r.ok, r
    return r.png


def _svg_reference(pool) -> bytes:
    r = pool.render(RenderJob(SVG, "svg"), timeout_s=TIMEOUT_S)
    assert r.ok, r
    return r.png


# --- 1. CPU: a job's threads weigh as one ------------------------------------------------------------------------
def test_a_thread_group_weighs_at_most_one_thread_at_nice_0():
    assert [wk._fair_nice(n) for n in (0, 1, 2, 3, 9, 14, 23, 62, 68, 69, 255)] == \
        [0, 0, 4, 5, 10, 12, 15, 19, 19, 19, 19]
    for n in range(2, 69):  # the lowest level that fits: one level less would weigh more than one thread
        nice = wk._fair_nice(n)
        assert n * wk.NICE_WEIGHTS[nice] <= wk.NICE_WEIGHTS[0] < n * wk.NICE_WEIGHTS[nice - 1], n


def test_the_thread_count_is_read_from_the_status_text():
    text = b"Name:\tpython\nVmPTE:\t     508 kB\nThreads:\t17\nSigQ:\t0/256\n"
    assert wk._status_threads(text) == 17
    assert wk._page_table_bytes(-1, text) == 508 * 1024
    assert wk._status_threads(b"") == 0  # a process gone: no count, nothing reniced
    assert wk._status_threads(b"Name:\tx\nThreads:\t1") == 0  # cut short: no count rather than an error


# the job's threads sleep (they count as soon as they exist), then it reads the nice level of each and tries to go back
NICE_JOB = """
import errno, json, os, threading, time
stop = threading.Event()
threads = [threading.Thread(target=stop.wait, daemon=True) for _ in range(THREADS)]
for t in threads:
    t.start()
want = WANT
deadline = time.monotonic() + 15
while os.getpriority(os.PRIO_PROCESS, 0) != want and time.monotonic() < deadline:
    time.sleep(0.05)
res = {"main": os.getpriority(os.PRIO_PROCESS, 0),
       "threads": sorted({os.getpriority(os.PRIO_PROCESS, t.native_id) for t in threads})}
late = threading.Thread(target=lambda: res.__setitem__("late", os.getpriority(os.PRIO_PROCESS, 0)))
late.start(); late.join()  # a thread started now inherits its creator's level
try:
    os.setpriority(os.PRIO_PROCESS, 0, 0)
    res["lower"] = "OK"
except OSError as e:
    res["lower"] = errno.errorcode[e.errno]
raise RuntimeError(json.dumps(res))
"""

SINGLE_THREAD_NICE_JOB = """
import json, os, time
time.sleep(0.5)  # ten of the supervisor's polls
raise RuntimeError(json.dumps({"nice": os.getpriority(os.PRIO_PROCESS, 0)}))
"""


def test_a_jobs_threads_are_reniced_as_they_grow_and_cannot_go_back(render_pool):
    # before: every thread stayed at nice 0, so 8 spinning threads weighed as 9 jobs against the other workers' jobs
    res = _job_json(render_pool.render(RenderJob(NICE_JOB.replace("THREADS", "8").replace("WANT", "10")),
                                       timeout_s=TIMEOUT_S))
    assert res == {"main": 10, "threads": [10], "late": 10, "lower": "EACCES"}, res
    # a single-threaded job (every plot and SVG) keeps nice 0, however long it runs
    res = _job_json(render_pool.render(RenderJob(SINGLE_THREAD_NICE_JOB), timeout_s=TIMEOUT_S))
    assert res == {"nice": 0}, res


# 200 threads spinning in C without the GIL (hashlib releases it for large inputs); 64 KiB stacks and one malloc
# arena, so that its address-space limit allows them (each thread's arena reserves 64 MiB: ~23 threads otherwise)
THREAD_HOG = """
import ctypes, hashlib, threading
ctypes.CDLL(None).mallopt(-8, 1)  # M_ARENA_MAX
threading.stack_size(1 << 16)
buf = b"x" * (1 << 22)
def spin():
    while True:
        hashlib.sha256(buf).digest()
for _ in range(200):
    threading.Thread(target=spin, daemon=True).start()
spin()
"""


def _cgroup_v1(controller: str, probe: str) -> str | None:
    """This process's cgroup in the cgroup v1 ``controller`` hierarchy (holding the file ``probe``), where it may make
    a child there (root), else None."""
    if os.geteuid() != 0:
        return None
    with open("/proc/self/cgroup") as f:
        rows = [line.rstrip("\n").split(":", 2) for line in f]
    for _, controllers, path in rows:
        if controller in controllers.split(","):
            here = os.path.join("/sys/fs/cgroup", controllers, path.lstrip("/"))
            if os.path.isfile(os.path.join(here, probe)) and os.access(here, os.W_OK):
                return here
    return None


def _cpu_cgroup_v1() -> str | None:
    return _cgroup_v1("cpu", "cgroup.procs")


def _move(pids, cgroup: str) -> None:
    for pid in pids:
        try:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write(str(pid))
        except OSError:
            pass


def _remove_cgroup(child: str, base: str) -> None:
    """Move whatever still runs in ``child`` (a job or validator the pool started meanwhile) back to ``base`` and
    remove ``child``; a cgroup that stays busy is left behind rather than failing the test on a loaded machine."""
    deadline = time.monotonic() + 10
    while True:
        try:
            with open(os.path.join(child, "cgroup.procs")) as f:
                _move([int(p) for p in f.read().split()], base)
            os.rmdir(child)
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)


def _hog_job_threads(pool) -> int:
    """The most threads any live job process of ``pool`` has."""
    counts = [0]
    for pid in _job_processes(pool):
        try:
            with open(f"/proc/{pid}/status") as f:
                counts += [int(line.split()[1]) for line in f if line.startswith("Threads:")]
        except OSError:
            pass
    return max(counts)


def test_a_thread_bomb_leaves_its_neighbours_labels_and_bytes_alone(render_pool, heavy_reference):
    # Where autogroup applies (the pool in the root cpu cgroup), each job's session gets a fair share anyway: the
    # workers are moved into a cpu cgroup of their own where one can be made, as in a container, where it does not.
    base = _cpu_cgroup_v1()
    workers = render_pool.worker_pids() + [w.zygote_pid for w in render_pool._workers]
    child = None
    if base is not None:
        child = os.path.join(base, f"mmevo-render-test-{os.getpid()}")
        try:
            os.mkdir(child)
        except OSError:
            child = None
    hog: list = []
    try:
        if child:
            _move(workers, child)
        with render_pool._lock:
            # the hog on one worker, with time and CPU limit to outlast its neighbour's whole timeout (on a machine of
            # few cores), then the neighbour's jobs on the other, once the hog's threads exist
            t = threading.Thread(target=lambda: hog.append(render_pool._run_on(0, RenderJob(THREAD_HOG), 120)))
            t.start()
            deadline = time.monotonic() + 30
            while _hog_job_threads(render_pool) < 100 and time.monotonic() < deadline:
                time.sleep(0.05)
            plot = render_pool._run_on(1, RenderJob(HEAVY_PLOT), TIMEOUT_S)
            svg = render_pool._run_on(1, RenderJob(SVG, "svg"), TIMEOUT_S)
            for pid in _job_processes(render_pool):  # end the hog now rather than at its limits
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            t.join(60)
    finally:
        if child:
            _move(workers, base)
            _remove_cgroup(child, base)
    assert hog and not hog[0].ok, hog
    # before: the plot was a `timeout`, starved by the neighbour's 200 threads (in the cgroup, on 2 cores)
    assert plot.ok and plot.png == heavy_reference, plot
    assert svg.ok and svg.png == _svg_reference(render_pool), svg


# --- 2. state a job leaves for the next job on its worker ---------------------------------------------------------
POISON = r"""
import atexit, os, signal, sys, threading, time
import matplotlib, matplotlib.pyplot as plt, matplotlib.figure, numpy as np
import PIL.Image
matplotlib.rcParams.update({"lines.linewidth": 40, "figure.facecolor": "red", "axes.prop_cycle":
                            matplotlib.cycler(color=["black"])})
for name in ("matplotlibrc", "fontlist-v390.json", "fontlist-v330.json"):
    with open(os.path.join(os.environ["MPLCONFIGDIR"], name), "w") as f:
        f.write("lines.linewidth: 40\n" if name == "matplotlibrc" else "{}")
os.makedirs(os.path.expanduser("~/.cache/matplotlib"), exist_ok=True)
open(os.path.expanduser("~/.cache/matplotlib/fontlist-v390.json"), "w").write("{}")
for path in ("/tmp/matplotlibrc", "/dev/shm/x", "/etc/matplotlibrc"):
    try:
        open(path, "w").write("lines.linewidth: 40\n")
    except OSError:
        pass
np.sin = np.cos
np.linspace = lambda *a, **k: np.zeros(3)
matplotlib.figure.Figure.savefig = lambda self, *a, **k: None
PIL.Image.Image.save = lambda self, *a, **k: None
sys.modules["matplotlib.pyplot"] = None
atexit.register(lambda: open("/job/out.png", "wb").write(b"atexit"))
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGALRM, lambda *a: None)
signal.setitimer(signal.ITIMER_REAL, 0.01, 0.01)
for _ in range(4):
    threading.Thread(target=time.sleep, args=(600,)).start()  # not daemons: left running
with open("/job/fill", "wb") as f:  # the job dir full
    try:
        while True:
            f.write(b"\0" * (1 << 20))
    except OSError:
        pass
ballast = bytearray(b"\1") * (600 << 20)  # with the threads' stacks and arenas: near the limit, pages touched
plt.plot([0, 1], [1, 0])
"""


def test_state_a_job_leaves_never_reaches_the_next_job_on_its_worker(render_pool, reference):
    for slot in range(len(render_pool._workers)):  # each worker: the poisoning job, then a benign plot and SVG
        with render_pool._lock:
            poison = render_pool._run_on(slot, RenderJob(POISON), TIMEOUT_S)
            plot = render_pool._run_on(slot, RenderJob(PLOT), TIMEOUT_S)
            svg = render_pool._run_on(slot, RenderJob(SVG, "svg"), TIMEOUT_S)
        assert poison.error_kind == "no_output", poison  # its code ran to the end, its own save patched away
        assert plot.ok and plot.png == reference["python"], plot
        assert svg.ok and svg.png == reference["svg"], svg
    assert render_pool.replaced == 0
    assert _job_processes(render_pool) == []


# --- 3. the pool over a long run -----------------------------------------------------------------------------------
MIX = [
    ("crash", "raise ValueError('x')"),
    ("syntax", "def ("),
    ("forbidden", "import os; os.fork()"),
    ("forbidden", "import subprocess; subprocess.run(['ls'])"),
    ("memory", "x = bytearray(3 << 30)"),
    ("memory", "l = []\nwhile True: l.append(bytearray(b'1') * (16 << 20))"),
    ("crash", "import ctypes; ctypes.string_at(0)"),
    ("crash", "import os; os._exit(3)"),
    ("too_large", "import matplotlib.pyplot as plt; plt.figure(figsize=(100, 100), dpi=100)"),
    ("too_large", "open('/job/big', 'wb').write(b'x' * (100 << 20))"),
    ("forbidden", "open('/tmp/x', 'w')"),
    ("forbidden", "open('/dev/shm/x', 'w')"),
    ("invalid_image", "open('/job/out.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(100))"),
    ("protocol", "import os\nwhile True: os.write(3, b'x' * 65536)"),
    ("no_output", "import threading, time\n"
                  "for _ in range(4):\n    threading.Thread(target=time.sleep, args=(600,)).start()"),
    ("ok", "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.rcParams['lines.linewidth'] = 50"),
]


def _counts(pool) -> dict:
    out = {"pool_fds": len(os.listdir("/proc/self/fd")), "replaced": pool.replaced}
    for i, w in enumerate(pool._workers):
        out[f"worker{i}_dir"] = sorted(os.listdir(w.base))
        out[f"worker{i}_fds"] = len(os.listdir(f"/proc/{w.pid}/fd"))
        with open(f"/proc/{w.pid}/mountinfo") as f:
            out[f"worker{i}_mounts"] = len(f.read().splitlines())
        out[f"zygote{i}_fds"] = len(os.listdir(f"/proc/{w.zygote_pid}/fd"))
        out[f"zygote{i}_threads"] = len(os.listdir(f"/proc/{w.zygote_pid}/task"))
    return out


def test_a_long_mixed_run_leaves_the_pool_as_it_found_it(render_pool, reference):
    before = _counts(render_pool)
    jobs, want = [], []
    for batch in range(2):
        for k, (kind, code) in enumerate(MIX):
            jobs.append(RenderJob(code))
            want.append(kind)
            benign = (k + batch) % 2
            jobs.append(RenderJob(PLOT) if benign else RenderJob(SVG, "svg"))
            want.append("python" if benign else "svg")
    results = render_pool.render_many(jobs, timeout_s=TIMEOUT_S)
    for kind, job, r in zip(want, jobs, results):
        if kind in reference:
            assert r.ok and r.png == reference[kind], (job.code[:60], r)
        else:
            assert ("ok" if r.ok else r.error_kind) == kind, (job.code[:60], r)
    assert _counts(render_pool) == before
    assert _job_processes(render_pool) == []
