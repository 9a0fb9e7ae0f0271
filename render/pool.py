"""RenderPool: a fixed set of render workers (``render.worker``), one job at a time each.

Workers are separate interpreters started with ``subprocess`` (never a fork of the caller, which may hold
threads / CUDA state) and a minimal environment; each is a supervisor plus a pre-warmed zygote that forks
one sandboxed child per job. A worker that dies or stops answering is killed and replaced; the job it held
gets ``error_kind="crash"``. ``close()`` (or leaving the ``with`` block) ends every worker and waits for it.
"""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import math
import os
import pickle
import queue
import select
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import replace

from .types import LANGUAGES, RenderJob, RenderLimits, RenderResult
from .worker import LAYERS, VALIDATOR_TIMEOUT_S, WORKER_LAYERS, send_msg

log = logging.getLogger(__name__)

_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from render.worker import main; main()"
_WORKER_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MPLBACKEND": "Agg",
}


# Job uid/gid per worker slot: RLIMIT_NPROC counts the tasks of a uid host-wide, so slots that shared one
# uid would share that budget (one job's threads starving a concurrent job). 65520..65533 lie between
# systemd's DynamicUser range and nobody, are unused by convention, and are mapped in the usual 65536-id
# user namespace of a container; where the user namespace maps them (a host, or a container without uid
# remapping), 256 more far above any allocator's range follow. A uid is handed out host-wide, not per process:
# its slot holds an exclusive flock on a lock file in the temp directory, released when the pool closes or its
# process dies, so the ranks of a distributed run (a pool each) never share one. Further slots share nobody's 65534.
LOW_JOB_UIDS = tuple(range(65533, 65519, -1))
HIGH_JOB_UIDS = tuple(range(2_147_480_000, 2_147_480_256))
SHARED_UID = 65534
# A day: far beyond any render, and every deadline, select timeout and RLIMIT_CPU derived from it stays
# representable (select refuses ~1e10 s and infinity; the worker's ceil() refuses infinity and NaN).
MAX_TIMEOUT_S = 86400.0
_uids_lock = threading.Lock()
_uids_held: dict[int, int] = {}  # uid -> fd of its lock file


def _mapped(uids: tuple) -> bool:
    """Whether this process's user namespace maps every uid in ``uids`` (a setresuid to an unmapped uid fails)."""
    try:
        with open("/proc/self/uid_map") as f:
            ranges = [tuple(map(int, line.split())) for line in f if line.strip()]
    except (OSError, ValueError):
        return False
    return any(inner <= min(uids) and max(uids) < inner + count for inner, _outer, count in ranges)


def job_uid_candidates() -> tuple:
    return LOW_JOB_UIDS + (HIGH_JOB_UIDS if _mapped(HIGH_JOB_UIDS) else ())


def uid_lock_path(uid: int) -> str:
    return os.path.join(tempfile.gettempdir(), f"mmevo-render-uid-{int(uid)}.lock")


def _lock_uid(uid: int) -> int | None:
    """An fd holding the exclusive lock of ``uid``, or None when another slot (any process) holds it."""
    # read-only and no symlink following: the file is only a lock, whoever created it. Non-blocking: a FIFO that a
    # local user put in its place (the temp directory is world-writable) blocked this open, and the pool, forever
    flags = os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(uid_lock_path(uid), flags, 0o644)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _take_uid() -> int:
    with _uids_lock:
        for uid in job_uid_candidates():
            if uid not in _uids_held:
                fd = _lock_uid(uid)
                if fd is not None:
                    _uids_held[uid] = fd
                    return uid
    log.warning("more render worker slots on this host than job uids: the extra slots share uid %d", SHARED_UID)
    return SHARED_UID


def _release_uids(uids) -> None:
    with _uids_lock:
        for uid in uids:
            fd = _uids_held.pop(uid, None)
            if fd is not None:
                os.close(fd)


# RenderLimits' integer fields and the least each may be: a bad one failed every job of the pool, each in its own way
# (max_side NaN: "exceeds nan px"; max_code_chars "10": the worker's TypeError, a crash; memory_bytes -1 or 2**70,
# nofile under 8, which the job child's own setup needs: "sandbox setup failed"). disk_bytes 0 would mount a tmpfs
# of no size limit at all.
LIMIT_FLOORS = {"memory_bytes": 1, "max_file_bytes": 1, "disk_bytes": 1, "max_png_bytes": 1, "max_side": 1,
                "min_side": 1, "max_code_chars": 1, "max_svg_bytes": 1, "nofile": 8, "nproc": 1}
LIMIT_INT_MAX = 1 << 62  # below what setrlimit takes once the worker's own address space is added to memory_bytes


def check_limits(limits) -> RenderLimits:
    """``limits`` where every field is one a job can run under, else a ``ValueError`` naming the field."""
    if not isinstance(limits, RenderLimits):
        raise ValueError(f"limits must be a RenderLimits, got {type(limits).__name__}")
    for name, floor in LIMIT_FLOORS.items():
        v = getattr(limits, name)
        if not isinstance(v, int) or isinstance(v, bool) or not floor <= v <= LIMIT_INT_MAX:
            raise ValueError(f"limits.{name} must be an int in [{floor}, 2**62], got {v!r}")
    if limits.min_side > limits.max_side:
        raise ValueError(f"limits.min_side ({limits.min_side}) must not exceed limits.max_side ({limits.max_side})")
    a = limits.max_aspect
    if isinstance(a, (bool, str, bytes)) or not isinstance(a, (int, float)) or not 1.0 <= a < math.inf:
        raise ValueError(f"limits.max_aspect must be a finite number >= 1, got {a!r}")
    return limits


class RenderPoolError(RuntimeError):
    pass


def _private_mpl_dir(base: str) -> str:
    """``base/mpl`` with a copy of this process's matplotlib font list cache (so that the worker need not scan the
    system's fonts again, ~0.5 s); without one the worker builds its own there."""
    import glob
    import shutil

    mpl = os.path.join(base, "mpl")
    os.mkdir(mpl, 0o755)
    try:
        import matplotlib

        for src in glob.glob(os.path.join(matplotlib.get_cachedir(), "fontlist-*.json")):
            shutil.copyfile(src, os.path.join(mpl, os.path.basename(src)))
    except Exception:  # no readable cache: the worker scans the fonts itself
        pass
    return mpl


class _Worker:
    def __init__(self, disk_bytes: int, skip_layers: tuple = (), uid: int = 65534) -> None:
        self.base = tempfile.mkdtemp(prefix="mmevo-render-")
        os.chmod(self.base, 0o711)
        env = dict(_WORKER_ENV)
        # matplotlib's config / cache dir: the worker's own, seeded with the caller's font list, not the caller's
        # HOME (its environment strings stay in every job's memory: a job read them there with ctypes)
        env["MPLCONFIGDIR"] = _private_mpl_dir(self.base)
        # A fixed hash seed: str / bytes hashes, and with them the order of a set of strings that a job iterates
        # (labels, legend entries), are the same on every worker and run, as the seeded RNGs are. -I would ignore
        # it (-I is -E -s -P): -E is left out, so the interpreter reads PYTHON* variables, but only from this
        # environment, built here. -s: no user site; -P (3.11+): no cwd on sys.path, on 3.10 the cwd is the
        # worker's own root-owned dir instead; -B: the root worker never writes .pyc files into the repository.
        env["PYTHONHASHSEED"] = "0"
        flags = ["-s", "-B"] + (["-P"] if sys.version_info >= (3, 11) else [])
        self.proc = subprocess.Popen(
            [sys.executable, *flags, "-c", _BOOT, _PKG_PARENT, self.base, str(int(disk_bytes)),
             ",".join(skip_layers), str(int(uid))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True, cwd=self.base,
            start_new_session=True,
        )
        self.isolation: dict = {}
        self.zygote_pid = 0
        self._buf = b""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout_s: float) -> dict:
        msg = self.recv(timeout_s)
        if not isinstance(msg, dict) or not msg.get("ready"):
            raise RenderPoolError(f"render worker failed to start: {msg!r}")
        self.isolation = msg["isolation"]
        self.zygote_pid = int(msg.get("zygote_pid", 0))
        return self.isolation

    def send(self, obj) -> None:
        send_msg(self.proc.stdin.fileno(), obj)

    def recv(self, timeout_s: float):
        """Read one framed reply within ``timeout_s``; raises TimeoutError / EOFError."""
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s

        def read_n(n: int) -> bytes:
            while len(self._buf) < n:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([fd], [], [], left)[0]:
                    raise TimeoutError("render worker did not answer")
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    raise EOFError("render worker exited")
                self._buf += chunk
            out, self._buf = self._buf[:n], self._buf[n:]
            return out

        n = struct.unpack("<Q", read_n(8))[0]
        return pickle.loads(read_n(n))  # the worker is trusted; job children never write here

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                try:
                    self.proc.kill()
                except OSError:
                    pass
        self._reap(5.0)

    def stop(self, timeout_s: float = 3.0) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # EOF -> the worker leaves its loop and cleans its temp dir
            except OSError:
                pass
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def _reap(self, timeout_s: float) -> None:
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f:
                    f.close()
            except OSError:
                pass
        shutil.rmtree(self.base, ignore_errors=True)


def _missing_layers(iso: dict) -> list[str]:
    return [k for k in LAYERS + WORKER_LAYERS if not iso.get(k)]


class RenderPool:
    """Sandboxed renderer for model-written matplotlib code and SVG.

    ``RenderPool(workers=2)`` starts the workers and checks that every isolation layer (``worker.LAYERS``:
    setsid, pid / mount / network / IPC / UTS / cgroup namespaces, the minimal read-only root, a fresh
    procfs, uid drop, no_new_privs, Landlock, seccomp, rlimits; and the per-job tmpfs) can be applied; if
    one cannot, ``isolation`` names it, the pool logs loudly and raises unless ``allow_reduced_isolation=True``.
    Calls from several threads are serialised.
    """

    def __init__(self, workers: int = 2, *, limits: RenderLimits | None = None,
                 allow_reduced_isolation: bool = False, start_timeout_s: float = 120.0,
                 reply_grace_s: float = 10.0, _skip_layers: tuple = ()) -> None:
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:  # 2.5 failed in range()
            raise ValueError(f"workers must be an int >= 1, got {workers!r}")
        # NaN or a negative grace failed every reply wait after the job was sent (each job a crash, its worker replaced)
        for name, v, low in (("reply_grace_s", reply_grace_s, 0.0), ("start_timeout_s", start_timeout_s, 1e-9)):
            if isinstance(v, (str, bytes)) or not low <= float(v) <= MAX_TIMEOUT_S:
                raise ValueError(f"{name} must be in [{low:g}, {MAX_TIMEOUT_S:g}] seconds, got {v!r}")
        # a copy: a caller changing its RenderLimits object later would skip the check
        self.limits = dataclasses.replace(check_limits(RenderLimits() if limits is None else limits))
        self.allow_reduced_isolation = allow_reduced_isolation
        self.start_timeout_s = start_timeout_s
        self.reply_grace_s = reply_grace_s  # extra wait for a worker's answer beyond the job timeout and its validator
        self._skip_layers = tuple(_skip_layers)  # tests only: missing layers, validator faults
        self._lock = threading.Lock()  # one render_many at a time
        # workers and uids change only under this lock: a close() during a render must not race a replacement
        # (which would start a worker after close, on a uid already released)
        self._state_lock = threading.Lock()
        self._workers: list[_Worker] = []
        self._slot_locks = [threading.Lock() for _ in range(workers)]  # held for each send / reply exchange
        self.replaced = 0
        # jobs whose threads multiplied but could not be reniced (``worker._renice_group`` failed on the live job: a
        # reduced sandbox without setsid, a supervisor without CAP_SYS_NICE); their threads kept their full weight
        # against the other workers' jobs
        self.renice_failed = 0
        self._count_lock = threading.Lock()  # serve threads count concurrently
        self.closed = False
        self._uids = [_take_uid() for _ in range(workers)]  # slot -> job uid, kept by replacements
        try:
            self._workers = [_Worker(self.limits.disk_bytes, self._skip_layers, uid) for uid in self._uids]
            for w in self._workers:
                w.wait_ready(start_timeout_s)
        except BaseException:
            self.close()
            raise
        self.isolation = dict(self._workers[0].isolation)
        missing = _missing_layers(self.isolation)
        if missing:
            text = (f"RENDER SANDBOX ISOLATION REDUCED: layers unavailable: {', '.join(missing)} "
                    f"({'; '.join(self.isolation.get('errors', []))})")
            log.error(text)
            print(text, file=sys.stderr, flush=True)
            if not allow_reduced_isolation:
                self.close()
                raise RenderPoolError(text + " -- pass allow_reduced_isolation=True to run anyway")
            warnings.warn(text, RuntimeWarning, stacklevel=2)

    # -- lifecycle --
    def __enter__(self) -> RenderPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        with self._state_lock:
            self.closed = True
            for w in self._workers:
                w.stop()
            _release_uids(self._uids)  # the workers, and with them their jobs, are gone
            self._uids = []

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            if not self.closed:
                self.close()
        except Exception:
            pass

    def worker_pids(self) -> list[int]:
        return [w.pid for w in self._workers]

    # -- rendering --
    def render(self, job: RenderJob, timeout_s: float = 10.0) -> RenderResult:
        return self.render_many([job], timeout_s=timeout_s)[0]

    def render_many(self, jobs: list[RenderJob], timeout_s: float = 10.0) -> list[RenderResult]:
        if self.closed:
            raise RenderPoolError("pool is closed")
        try:  # a number, as one plain float from here on: a str, Decimal or numpy float32 broke the reply wait
            # (after the job was sent), so every worker that ran a job was replaced
            seconds = math.nan if isinstance(timeout_s, (str, bytes)) else float(timeout_s)
        except (TypeError, ValueError):
            seconds = math.nan
        if not 0 < seconds <= MAX_TIMEOUT_S:  # NaN and infinity fail too
            raise ValueError(f"timeout_s must be in (0, {MAX_TIMEOUT_S:g}] seconds, got {timeout_s!r}")
        jobs = list(jobs)  # any iterable: a generator was used up by the checks below
        for k, j in enumerate(jobs):
            if not isinstance(j, RenderJob):  # a bare str or dict was an AttributeError naming no job
                raise ValueError(f"job {k}: must be a RenderJob, got {type(j).__name__}")
            if not isinstance(j.language, str) or j.language not in LANGUAGES:
                raise ValueError(f"job {k}: language must be one of {LANGUAGES}, got {j.language!r}")
            if not isinstance(j.code, str):  # bytes / None were reported as a too_large job
                raise ValueError(f"job {k}: code must be a str, got {type(j.code).__name__}")
        with self._lock:
            return self._render_many(jobs, seconds)

    def _render_many(self, jobs: list[RenderJob], timeout_s: float) -> list[RenderResult]:
        results: list[RenderResult | None] = [None] * len(jobs)
        todo: queue.Queue = queue.Queue()
        for i, j in enumerate(jobs):
            todo.put((i, j))

        def serve(slot: int) -> None:
            while True:
                try:
                    i, j = todo.get_nowait()
                except queue.Empty:
                    return
                with self._slot_locks[slot]:  # one exchange per worker at a time (see below)
                    results[i] = self._run_on(slot, j, timeout_s)

        threads = [threading.Thread(target=serve, args=(s,), daemon=True)
                   for s in range(min(len(self._workers), len(jobs)))]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except BaseException:
            # The caller was interrupted (KeyboardInterrupt, an alarm handler's exception): its threads still
            # hold one exchange each. No further job is started, and the slot locks keep the next call off those
            # workers until their replies are read (before, it read them as its own jobs' results).
            while True:
                try:
                    todo.get_nowait()
                except queue.Empty:
                    break
            raise
        return results  # type: ignore[return-value]

    def _replace(self, slot: int) -> _Worker:
        with self._state_lock:
            if self.closed:
                raise RenderPoolError("pool is closed")
            old = self._workers[slot]
            old.kill()
            new = _Worker(self.limits.disk_bytes, self._skip_layers, self._uids[slot])
            self._workers[slot] = new  # in the list before it is ready: a close() now stops it too
            new.wait_ready(self.start_timeout_s)
            self.replaced += 1
            return new

    def _run_on(self, slot: int, job: RenderJob, timeout_s: float) -> RenderResult:
        t0 = time.monotonic()
        w = self._workers[slot]
        if not w.alive():
            try:
                w = self._replace(slot)
            except Exception as e:  # noqa: BLE001 - a closed pool or a worker that cannot start: this job fails
                return RenderResult(ok=False, error_kind="crash", message=f"no render worker: {e}",
                                    elapsed_s=time.monotonic() - t0)
        # plain str copies: a str subclass the worker cannot import would not unpickle there
        msg = {"code": str.__str__(job.code), "language": str.__str__(job.language), "timeout_s": float(timeout_s),
               "limits": replace(self.limits), "strict": not self.allow_reduced_isolation}
        try:
            w.send(msg)
            reply = w.recv(timeout_s + VALIDATOR_TIMEOUT_S + self.reply_grace_s)  # the job, then its output's validator
        except Exception as e:  # noqa: BLE001 - any failed exchange leaves the worker out of step: its late reply
            # would be read as the next job's result, so the worker is replaced whatever the error
            if self.closed:  # the pool was closed under this job: its worker is gone, not broken
                return RenderResult(ok=False, error_kind="crash", message="render pool closed during the job",
                                    elapsed_s=time.monotonic() - t0)
            log.warning("render worker %d failed (%s); replacing it", w.pid, e)
            try:
                self._replace(slot)
            except Exception as e2:  # noqa: BLE001
                log.error("could not replace render worker: %s", e2)
            return RenderResult(ok=False, error_kind="crash", message=f"render worker failed: {e}",
                                elapsed_s=time.monotonic() - t0)
        if reply.pop("renice_failed", False):
            with self._count_lock:
                self.renice_failed += 1
                first = self.renice_failed == 1
            (log.warning if first else log.debug)(
                "render worker %d could not renice a job's threads (%d job(s) so far): they weigh as many threads "
                "against the other workers' jobs", w.pid, self.renice_failed)
        return RenderResult(**reply)


__all__ = ["RenderPool", "RenderPoolError", "RenderJob", "RenderResult", "RenderLimits"]
