"""One live run per output directory, and ranks that end with their launcher.

``RunLock`` holds an exclusive ``flock`` on ``<output_dir>/.mmevo.lock`` for a whole run; the file records who holds it
(pid, host, start time, command), so a second run on the same directory fails at once with a message that names the
holder. ``output_dir_lock`` is the form the recipes use: rank 0 takes the lock and every rank learns the verdict.

``exit_with_parent`` makes a rank get SIGTERM when the process that started it (the ``torchrun`` / ``deepspeed``
agent) dies: the agent puts each rank in a session of its own, so a ``kill -9`` of the agent alone would otherwise leave
the ranks running, still writing checkpoints into the output directory.

Limits: ``flock`` is advisory and per open file. It is reliable on local filesystems; on NFS, Linux maps it onto NFS
byte-range locks (it then works across hosts only where the server's lock service does); some cluster filesystems
(Lustre mounted without ``flock``/with ``localflock``, some CIFS/FUSE mounts) refuse it or lock per node only. Where
``flock`` is refused the run goes on unlocked with a warning. A child that a rank forks (not exec) shares the locked
file and keeps the lock until it exits too.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import signal
import socket
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

LOCK_FILE = ".mmevo.lock"


class OutputDirBusy(ValueError):
    """Another live run holds the output directory (a ValueError, so the CLI reports it as a plain error, exit 2)."""


def _record(output_dir: Path) -> dict:
    argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "started_unix": time.time(), "command": shlex.join(argv), "output_dir": str(output_dir.resolve()),
            "world_size": int(os.environ.get("WORLD_SIZE", 1))}


def read_holder(output_dir: str | Path) -> dict | None:
    """The record in ``output_dir``'s lock file (the live holder's, or a dead run's that nobody took over), if any."""
    try:
        text = (Path(output_dir) / LOCK_FILE).read_text()
        record = json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None  # garbage that happens to parse ("[1]", "7") is no record


class RunLock:
    """Exclusive lock on ``<output_dir>/.mmevo.lock`` for one run; ``acquire`` raises ``OutputDirBusy`` when held.

    The kernel drops an ``flock`` when its holder dies (also on SIGKILL), so a lock file left by a dead run is simply
    taken over: no stale-pid detection is needed. The file is not deleted on release: a run that opened it just before
    a deletion would lock the deleted file while a third run locks a new one. The one exception is ``discard``: a run
    that created the directory and fails before anything else is written there removes both while it still holds the
    lock, so a failed start (no GPU, a bad data path) leaves no empty directory behind. A run starting beside it may
    have opened the file just before: after its ``flock`` it checks that it locked the file still at the path, and
    starts over (making the directory again) where it did not.
    """

    def __init__(self, output_dir: str | Path):
        self.dir = Path(output_dir)
        self.path = self.dir / LOCK_FILE
        self._fd: int | None = None
        self.previous: dict | None = None  # the record found on acquiring: a run that died without releasing
        self.created_dir = False  # whether acquiring made the directory (only then may ``discard`` remove it)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "RunLock":
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already held by this RunLock")
        import fcntl

        while True:  # again when a failed start's ``discard`` removed the file between our open and our flock
            self.created_dir = not self.dir.exists()
            self.dir.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except FileNotFoundError:  # the directory was discarded between our mkdir and our open
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise OutputDirBusy(busy_message(self.dir, read_holder(self.dir))) from None
                # ENOLCK / EOPNOTSUPP / ENOSYS: this filesystem does not do flock
                warnings.warn(f"cannot lock {self.path} ({e.strerror}): this filesystem does not support flock; the "
                              "run goes on without protection against a second run on the same output_dir",
                              stacklevel=2)
                return self
            if _same_file(fd, self.path):
                break
            os.close(fd)  # we locked an unlinked file: a third run would lock a new one beside us
        try:
            self.previous = read_holder(self.dir)
            data = json.dumps(_record(self.dir), indent=1).encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        except BaseException:  # e.g. a full disk: do not keep the lock through a leaked descriptor
            os.close(fd)
            raise
        self._fd = fd
        return self

    def release(self) -> None:
        """Give the lock up (emptying the record); a no-op when not held. Process exit releases it as well."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)  # an empty file: nobody holds it, and no run died holding it
        finally:
            os.close(fd)  # drops the flock

    def discard(self) -> bool:
        """While held: remove the lock file and the directory when this lock created the directory and nothing else
        was written there (a run that failed at its start); True when removed. Never touches a directory that held
        anything else, nor one that existed before."""
        if self._fd is None or not self.created_dir:
            return False
        try:
            if [p.name for p in self.dir.iterdir()] != [LOCK_FILE]:
                return False
            self.path.unlink()
            self.dir.rmdir()
        except OSError:  # something appeared meanwhile, or no permission: keep what is there
            return False
        return True

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``fd`` is still the file at ``path`` (not one unlinked since it was opened)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino)


def busy_message(output_dir: Path, holder: dict | None) -> str:
    where = f"output_dir {output_dir} is in use by another live mmevo run"
    if not holder:
        return f"{where} (it is starting and has not written {LOCK_FILE} yet); wait for it to finish or stop it"
    here = " (this host)" if holder.get("host") == socket.gethostname() else ""
    return (f"{where}: pid {holder.get('pid')} on host {holder.get('host')}{here}, started {holder.get('started')}, "
            f"command: {holder.get('command')}. Wait for it to finish, stop it (its launcher and ranks), or choose "
            f"another output_dir. The lock ({output_dir / LOCK_FILE}) is released when that process exits.")


@contextmanager
def output_dir_lock(output_dir: str | Path):
    """Hold ``output_dir`` for the run in the ``with`` block: rank 0 locks, every rank gets the verdict.

    Collective once the process group is joined (every rank must enter): rank 0's result is broadcast, so on a refusal
    every rank raises ``OutputDirBusy`` instead of waiting in a collective that rank 0 never joins. Without a process
    group only rank 0 (``RANK``, default 0) locks. Yields the ``RunLock`` on rank 0, None elsewhere.
    """
    from mmevo.grpo import distributed as D

    lock, error = None, None
    if D.is_main():
        try:
            lock = RunLock(output_dir).acquire()
        except Exception as e:  # busy, or the directory cannot be created: the other ranks must hear of it too
            error = e
        if lock is not None and lock.previous:
            p = lock.previous
            print(f"[mmevo] taking over {lock.path} from a run that died holding it (pid {p.get('pid')} on "
                  f"{p.get('host')}, started {p.get('started')})", file=sys.stderr)
    try:
        verdict = D.broadcast_from_main(None if error is None else str(error))
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    if error is not None:
        raise error
    if verdict:
        raise OutputDirBusy(f"(rank {D.rank()}, from rank 0) {verdict}")
    try:
        yield lock
    except BaseException:
        if lock is not None:
            lock.discard()  # a run that failed before writing anything leaves no empty output_dir behind
        raise
    finally:
        if lock is not None:
            lock.release()


# -- ranks that end with their launcher -----------------------------------------------------------------------------
_PR_SET_PDEATHSIG = 1
_armed: int | None = None  # the signal set, once set
_LAUNCHER_NAMES = ("torchrun", "deepspeed", "accelerate", "mpirun", "mpiexec", "srun", "orted", "hydra_pmi_proxy")


def _pid1_may_be_our_launcher() -> bool:
    """Whether PID 1 could be the launcher itself (``docker run ... torchrun ...``), not the reaper of orphans."""
    try:
        argv = Path("/proc/1/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # cannot tell: assume the harmless case
    names = [os.path.basename(a.decode(errors="replace")) for a in argv[:2] if a]
    return any(n.startswith(("python", *_LAUNCHER_NAMES)) for n in names)


def exit_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Have the kernel send ``sig`` to this process when its parent dies (Linux ``PR_SET_PDEATHSIG``); True if armed.

    Call it in the child itself (the setting is per process, kept across exec, cleared by fork): here, in each rank at
    start. The kernel fires it when the parent *thread* that forked this process exits; torchrun's agent starts its
    ranks from its main thread, so that is the agent's death. The rank must be the launcher's direct child (not behind
    a ``bash -c`` wrapper, whose own death nothing watches). If the parent died before the setting took effect no
    signal would ever come, so the parent is checked right after: re-parented (parent pid changed during the call, or
    now PID 1 where PID 1 is not itself a launcher) means the launcher is gone, and the signal is sent at once.
    Idempotent; False (and nothing done) off Linux or where prctl is refused.
    """
    global _armed
    if not sys.platform.startswith("linux"):
        return False
    if _armed == int(sig):
        return True
    import ctypes

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ok = libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(int(sig)), ctypes.c_ulong(0), ctypes.c_ulong(0),
                        ctypes.c_ulong(0)) == 0
    except (OSError, AttributeError):
        ok = False
    if not ok:
        warnings.warn("prctl(PR_SET_PDEATHSIG) failed: this rank will not exit by itself if its launcher dies",
                      stacklevel=2)
        return False
    _armed = int(sig)
    now = os.getppid()
    if now != parent or (now == 1 and os.getpid() != 1 and not _pid1_may_be_our_launcher()):
        os.kill(os.getpid(), sig)
    return True


def launched() -> bool:
    """Whether this process is a rank started by a launcher (torchrun, deepspeed, accelerate set these)."""
    return "LOCAL_RANK" in os.environ or int(os.environ.get("WORLD_SIZE", 1)) > 1


def exit_with_parent_if_launched() -> bool:
    """``exit_with_parent()`` for a rank under a launcher; nothing for a plain process (its parent is a shell)."""
    return exit_with_parent() if launched() else False
