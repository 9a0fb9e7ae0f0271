"""render/: a twenty-fourth pass, on jobs that meet the memory limit of the cgroup the pool runs in, and on a renice
the supervisor could not apply.

1. Memory. Each job has its own limits (address space, page tables, job tmpfs); a pool run for long should sit in a
   cgroup with ``memory.max`` (render/README.md), which may be below the sum of those limits. Measured with a child of
   the cgroup v1 memory hierarchy holding the workers and zygotes: jobs that each hold 400 MiB of resident memory under
   a 900 MiB cgroup limit (three workers) got one job killed by the OOM killer, labelled ``memory`` ("killed by SIGKILL
   below its CPU limit"), the others ``ok``, nothing replaced: right before and after this pass. But jobs whose charge
   is their tmpfs files (two jobs writing 62 MiB each under a 90 MiB limit) made the killer choose by resident size
   alone, and a zygote (~91 MiB resident) outweighs a job child forked from it (~64 MiB: fork copies no page table
   entries of the file mappings): a zygote was killed in 3 runs of 3, its worker's job became a ``crash`` ("render
   worker failed: zygote exited") and the worker was replaced (both, once), while the job that filled the cgroup went
   on to its end. The supervisor now sets each child's ``oom_score_adj`` before sending it the job (a job 1000, a
   validator 500, the worker processes keep theirs), so the killer takes a job first: ``memory``, no worker lost, in 3
   runs of 3.
2. A renice the supervisor could not apply (``worker._renice_group``: ``setpriority`` of the job's process group) was
   silent. In a reduced sandbox without ``setsid`` the job's pid is no process group (``ESRCH``), so a job's 8 threads
   kept nice 0, uncounted. It is now counted per job (``RenderPool.renice_failed``, beside ``replaced``, and a warning
   the first time), and not retried at every poll.
3. Could a job take item 1's preference back (lower its own ``oom_score_adj``)? No: checked, nothing changed.
"""

import json
import os
import sys
import threading
import time

import pytest

from conftest import job_processes as _job_processes
from conftest import start_render_pool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob, RenderLimits  # noqa: E402
from render import worker as wk  # noqa: E402

from test_render_hostile12 import _job_json  # noqa: E402
from test_render_hostile23 import _cgroup_v1, _counts, _move, _remove_cgroup  # noqa: E402

TIMEOUT_S = 20

PLOT = "import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\n"


def _memory_cgroup_v1() -> str | None:
    return _cgroup_v1("memory", "memory.limit_in_bytes")


def _worker_processes(pool) -> list[int]:
    return pool.worker_pids() + [w.zygote_pid for w in pool._workers]


# its charge is its tmpfs files (62 MiB, 1 MiB at a time, so that both jobs grow together), not its resident memory;
# then a figure, which the job that survives returns
TMPFS_FILLER = """
import time
for i in range(62):
    with open(f"/job/fill{i // 16}", "ab") as f:  # files under the job's 32 MiB file-size limit
        f.write(b"\\1" * (1 << 20))
    time.sleep(0.03)
time.sleep(1.0)
import matplotlib.pyplot as plt
plt.plot([0, 1], [1, 0])
"""


@pytest.fixture
def memory_cgroup():
    base = _memory_cgroup_v1()
    if base is None:
        pytest.skip("no writable cgroup v1 memory hierarchy here (not root, or cgroup v2 only)")
    child = os.path.join(base, f"mmevo-render-test24-{os.getpid()}")
    try:
        os.mkdir(child)
    except OSError as e:
        pytest.skip(f"cannot make a memory cgroup here: {e}")
    yield base, child
    _remove_cgroup(child, base)


def _oom_kills(cgroup: str) -> int:
    with open(os.path.join(cgroup, "memory.oom_control")) as f:
        fields = dict(line.split() for line in f if line.strip())
    return int(fields.get("oom_kill", 0))


def _run_under_limit(pool, base: str, child: str, limit: int, jobs) -> tuple[list[int], list, list[str]]:
    """Run ``jobs`` with the pool's workers and zygotes moved into ``child`` at ``limit`` bytes (charges made before
    the move stay behind), then moved back: (their pids before, the results, the sorted result kinds); skips where
    the kernel made no OOM kill in the cgroup (it charged the memory elsewhere: nothing to check)."""
    procs = _worker_processes(pool)
    with open(os.path.join(child, "memory.limit_in_bytes"), "w") as f:
        f.write(str(limit))
    try:
        _move(procs, child)
        results = pool.render_many(jobs, timeout_s=TIMEOUT_S)
        kills = _oom_kills(child)
    finally:
        _move(procs, base)
    kinds = sorted("ok" if r.ok else r.error_kind for r in results)
    if kills == 0:
        pytest.skip(f"no OOM kill in the cgroup ({kinds})")
    return procs, results, kinds


def test_the_oom_killer_takes_a_job_not_a_zygote_under_a_pool_cgroup_limit(memory_cgroup):
    base, child = memory_cgroup
    pool = start_render_pool(workers=2, limits=RenderLimits(memory_bytes=512 << 20, disk_bytes=80 << 20))
    try:
        before = _counts(pool)
        # 90 MiB: below the two jobs' 124 MiB of files
        procs, results, kinds = _run_under_limit(pool, base, child, 90 << 20, [RenderJob(TMPFS_FILLER)] * 2)
        # before: a zygote was killed, its job a `crash` ("render worker failed: zygote exited"), its worker replaced
        assert all(p == q for p, q in zip(procs, _worker_processes(pool))), (procs, _worker_processes(pool))
        assert all(r.ok or r.error_kind == "memory" for r in results), results
        assert "memory" in kinds, results
        for r in results:
            if not r.ok:
                assert r.message.startswith("killed by SIGKILL below its CPU limit"), r
        # the pool goes on with the same workers, and the kill left no process, dir, mount or descriptor behind
        after = pool.render_many([RenderJob(PLOT)] * 2, timeout_s=TIMEOUT_S)
        assert all(r.ok for r in after), after
        assert _counts(pool) == before
        assert _job_processes(pool) == []
    finally:
        pool.close()


# Each job holds 400 MiB resident (its own limit: 512 MiB over the zygote's size); three at once under 900 MiB.
RESIDENT_HOG = """
import time
chunks = []
for _ in range(25):
    chunks.append(bytearray(b"\\1") * (16 << 20))
    time.sleep(0.02)
time.sleep(1.0)
import matplotlib.pyplot as plt
plt.plot([0, 1], [1, 0])
"""


def test_jobs_near_their_own_limit_under_a_smaller_pool_limit(memory_cgroup):
    base, child = memory_cgroup
    pool = start_render_pool(workers=3, limits=RenderLimits(memory_bytes=512 << 20))
    try:
        before = _counts(pool)
        procs, results, kinds = _run_under_limit(pool, base, child, 900 << 20, [RenderJob(RESIDENT_HOG)] * 3)
        assert all(r.ok or r.error_kind == "memory" for r in results), results
        assert "ok" in kinds and "memory" in kinds, results
        assert _worker_processes(pool) == procs
        assert all(r.ok for r in pool.render_many([RenderJob(PLOT)] * 3, timeout_s=TIMEOUT_S))
        assert _counts(pool) == before
        assert _job_processes(pool) == []
    finally:
        pool.close()


OOM_ADJ_JOB = """
import os, time
time.sleep(0.5)
"""


def test_job_and_validator_children_are_the_oom_killers_first_choice(render_pool):
    # read from /proc while the job runs: the job child 1000, the worker processes unchanged
    seen: dict = {}
    own = {p: open(f"/proc/{p}/oom_score_adj").read().strip() for p in _worker_processes(render_pool)}

    def watch():
        # a child read just after its fork still has the worker's value: read again until every job child seen has
        # the job's value (a child that never gets it keeps its last value and fails the check below)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (seen and set(seen.values()) == {wk.JOB_OOM_SCORE_ADJ}):
            for pid in _job_processes(render_pool):
                try:
                    seen[pid] = int(open(f"/proc/{pid}/oom_score_adj").read())
                except (OSError, ValueError):
                    pass
            time.sleep(0.02)

    t = threading.Thread(target=watch)
    t.start()
    r = render_pool.render(RenderJob(OOM_ADJ_JOB), timeout_s=TIMEOUT_S)
    t.join()
    assert r.error_kind == "no_output", r
    assert seen and set(seen.values()) == {wk.JOB_OOM_SCORE_ADJ}, seen
    assert {p: open(f"/proc/{p}/oom_score_adj").read().strip() for p in _worker_processes(render_pool)} == own
    assert not any("oom_score_adj" in e for e in r.isolation.get("errors", [])), r.isolation
    assert wk.JOB_OOM_SCORE_ADJ > wk.VALIDATOR_OOM_SCORE_ADJ > 0


def test_set_oom_score_adj_reports_what_it_could_not_do():
    assert wk._set_oom_score_adj(2 ** 22 + 12345, 1000).startswith("oom_score_adj: ")  # no such process


# --- 2. a renice that fails is counted ------------------------------------------------------------------------------
THREADS_JOB = """
import json, os, threading, time
stop = threading.Event()
threads = [threading.Thread(target=stop.wait) for _ in range(8)]
for t in threads:
    t.start()
time.sleep(0.5)  # ten of the supervisor's polls
nice = os.getpriority(os.PRIO_PROCESS, 0)
stop.set()
raise RuntimeError(json.dumps({"nice": nice}))
"""


def test_a_renice_that_fails_is_counted_by_the_pool():
    # without setsid the job's pid names no process group: setpriority(PRIO_PGRP) fails (ESRCH) for real
    with pytest.warns(RuntimeWarning, match="setsid"):
        pool = start_render_pool(workers=1, allow_reduced_isolation=True, _skip_layers=("setsid",))
    try:
        assert pool.renice_failed == 0
        res = _job_json(pool.render(RenderJob(THREADS_JOB), timeout_s=TIMEOUT_S))
        assert res == {"nice": 0}, res  # not reniced: its threads kept their weight
        assert pool.renice_failed == 1  # before: no count anywhere
        # a single-threaded job needs no renice: nothing counted
        assert pool.render(RenderJob(PLOT), timeout_s=TIMEOUT_S).ok
        assert pool.renice_failed == 1
        assert pool.replaced == 0
    finally:
        pool.close()


def test_a_renice_that_succeeds_is_not_counted(render_pool):
    res = _job_json(render_pool.render(RenderJob(THREADS_JOB), timeout_s=TIMEOUT_S))
    assert res == {"nice": wk._fair_nice(9)}, res
    assert render_pool.renice_failed == 0


def test_renice_group_tells_a_failure_from_an_exited_job():
    r, w = os.pipe()  # a pidfd stand-in: readable means exited
    try:
        assert wk._renice_group(2 ** 22 + 12345, r, 5) is False  # live, no such group: ESRCH
        os.write(w, b"x")
        assert wk._renice_group(2 ** 22 + 12345, r, 5) is None  # exited: nothing to weigh
    finally:
        os.close(r)
        os.close(w)


LOWER_OOM_ADJ_JOB = """
with open("/proc/self/oom_score_adj", "w") as f:  # back to the worker's 0: the killer would weigh it by size alone
    f.write("0")
"""


def test_a_job_cannot_lower_its_oom_score_adj(render_pool):
    # its /proc files are closed to it (Landlock), and lowering would need CAP_SYS_RESOURCE
    r = render_pool.render(RenderJob(LOWER_OOM_ADJ_JOB), timeout_s=TIMEOUT_S)
    assert r.error_kind == "forbidden", r


def test_a_cgroup_that_never_oom_kills_stalls_jobs_into_their_timeout_only(memory_cgroup):
    # an operator's `memory.oom_control` = 1 (cgroup v1): jobs at the limit sleep in the kernel until memory is freed;
    # the supervisor's wall clock still ends them (SIGKILL wakes them), or a tmpfs write fails with ENOMEM (`memory`),
    # and the worker serves on (measured: both `timeout` at 5.0 s, or one `memory`; nothing replaced; no defect found)
    base, child = memory_cgroup
    pool = start_render_pool(workers=2, limits=RenderLimits(memory_bytes=512 << 20, disk_bytes=80 << 20))
    try:
        procs = _worker_processes(pool)
        with open(os.path.join(child, "memory.limit_in_bytes"), "w") as f:
            f.write(str(90 << 20))
        try:
            with open(os.path.join(child, "memory.oom_control"), "w") as f:
                f.write("1")
        except OSError as e:
            pytest.skip(f"cannot disable the OOM killer here: {e}")
        try:
            _move(procs, child)
            results = pool.render_many([RenderJob(TMPFS_FILLER)] * 2, timeout_s=5)
        finally:
            _move(procs, base)
        assert all(r.ok or r.error_kind in ("timeout", "memory") for r in results), results
        assert all(r.ok for r in pool.render_many([RenderJob(PLOT)] * 2, timeout_s=TIMEOUT_S))
        assert _worker_processes(pool) == procs and pool.replaced == 0
        assert _job_processes(pool) == []
    finally:
        pool.close()


OOM_ADJ_LOWERING = """
import json, os
res = {}
for path in ("/proc/self/oom_score_adj", f"/proc/{os.getpid()}/oom_score_adj", "/proc/self/oom_adj"):
    for value in ("0", "-1000"):
        try:
            with open(path, "w") as f:
                f.write(value)
            res[f"{path}={value}"] = "written"
        except OSError as e:
            res[f"{path}={value}"] = e.errno
raise RuntimeError(json.dumps(res))
"""


def test_a_job_cannot_lower_the_oom_score_adj_it_was_given(render_pool):
    """The supervisor raises a job's ``oom_score_adj`` as root; a process without CAP_SYS_RESOURCE may lower its own
    back to the minimum its last privileged writer set (the kernel keeps ``oom_score_adj_min`` only for such writers),
    so under a non-root supervisor a job could take back the preference of item 1. It cannot open the file for writing
    at all: its procfs is mounted read-only (EROFS). Beneath that, measured by removing the layers one by one: Landlock
    gives it no write access below ``/proc``, and its ``/proc/<pid>`` files belong to root (a job is not dumpable) while
    it runs under another uid (EACCES, also with the read-only mount and the Landlock rule removed and no adj set)."""
    import errno

    res = _job_json(render_pool.render(RenderJob(OOM_ADJ_LOWERING), timeout_s=TIMEOUT_S))
    assert len(res) == 6 and set(res.values()) == {errno.EROFS}, res
