"""Isolation layers for the render sandbox (Linux only, ctypes, no third-party code).

Worker side (once per worker, ``build_root``): a private mount namespace holding a minimal root tree, a
read-only tmpfs skeleton with read-only views (overlayfs for directories where it can be mounted, so that a job's
file locks never reach the host's files; else bind mounts; copies of single files; device nodes of its own) of only
the interpreter's stdlib, its site-packages, shared libraries, fonts, a few ``/etc`` files and
``/dev/{null,zero,random,urandom}``, with empty read-only
tmpfs over ``masked`` directories (the base interpreter's own site-packages); a fresh size-capped tmpfs is
mounted on its ``/job`` for every job (``mount_job_tmpfs``) and unmounted afterwards.

Job side (in the forked job child, see ``worker._child_main``): new mount / network / IPC / UTS / cgroup
namespaces (``unshare``), ``enter_root`` (``pivot_root`` into the tree, the host tree detached), a fresh
procfs of the job's own pid namespace (``mount_proc``), uid drop, ``no_new_privs``, Landlock, seccomp.

* ``apply_landlock``: read + execute below ``read_paths`` (for a job: every top-level entry of the tree but
  ``/proc``, ``tree_read_paths``), read-write below ``write_paths``, write + truncate on the files ``write_files``
  (``/dev/null``: ``/dev/zero`` is only read, see ``MAP_SHARED``), listing only below ``list_paths`` (``/proc``);
  with the kernel
  ABI's help also denies every TCP bind/connect (ABI 4) and scopes abstract unix sockets / signals (ABI 6).
* ``apply_seccomp``: a BPF filter that kills the process (SIGSYS) on process creation / exec / ptrace / mount /
  namespace / bpf / io_uring / keyring / module / kexec / reboot system calls, answers EPERM to sockets, SysV IPC and
  POSIX message queues, inotify / fanotify and dnotify (``fcntl(F_NOTIFY)``), a pipe grown past the default size
  (``fcntl(F_SETPIPE_SZ)`` above ``PIPE_SIZE_MAX``: pipe pages are outside ``RLIMIT_AS``), ``memfd_create`` /
  ``memfd_secret`` (their pages would escape ``RLIMIT_AS``), ``kill``, ``syslog``, ``io_setup`` (host-wide AIO
  pool), ``sync`` / ``syncfs`` / ``quotactl`` / ``quotactl_fd`` (host-wide writeback; ``Q_SYNC``),
  ``vmsplice`` / ``splice`` / ``tee`` / ``sendfile`` (pinned pages outside ``RLIMIT_AS``), ``O_DIRECT`` in
  ``open`` / ``openat`` / ``fcntl(F_SETFL)`` (disk reads past the page cache; ``openat2``, whose flags it cannot read,
  is ENOSYS) and ``RWF_DONTCACHE`` in ``preadv2`` / ``pwritev2`` (the same reads, Linux 6.14), the Landlock and
  seccomp calls (rulesets and filters are kernel memory; ``prctl(PR_SET_SECCOMP)`` too), ``listmount`` /
  ``statmount`` (the mount table), ``cachestat`` (page-cache residency of host files),
  ``prctl(PR_SET_PDEATHSIG)`` (the signal that ends the job
  when its worker dies), ``prctl(PR_FUTEX_HASH)`` (a futex hash of any size: vmalloc outside ``RLIMIT_AS``), the
  ``setxattr`` family (POSIX ACLs are tmpfs kernel memory outside every cap), ``prctl(PR_SET_MEMORY_MERGE)`` and
  ``madvise(MADV_MERGEABLE)`` (KSM: a timing side channel where the host runs it), ``mmap(MAP_HUGETLB)`` (pages
  of the host's reserved hugetlb pool) and shared anonymous ``mmap`` (a shmem object that keeps its pages when
  mostly unmapped),
  ``sched_setattr`` (utilisation clamps and custom slices: host frequency and placement),
  ``prctl(PR_SET_THP_DISABLE)`` (huge pages stay off) and ``prctl(PR_SET_DUMPABLE)`` (a dumpable
  job's crash reaches the host's core handler), answers "done" without running them to ``fsync`` / ``fdatasync``
  / ``msync`` (a host file system's disk cache flush; the job's tmpfs has nothing to sync) and
  ``posix_fadvise(POSIX_FADV_DONTNEED)`` (it drops the host's page cache of a bound file), and ENOSYS to ``clone3``
  (so glibc falls back to ``clone``, which is allowed only with ``CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
  CLONE_THREAD``, as pthread_create sets them: threads sharing the job's fd table, no processes) and to every call
  numbered past ``LAST_REVIEWED_NR`` (added by a kernel newer than this filter).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import re
import resource
import stat
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int
_libc.unshare.restype = ctypes.c_int

MACHINE = platform.machine()

# --- syscall numbers -------------------------------------------------------------------------------------
if MACHINE == "x86_64":
    AUDIT_ARCH = 0xC000003E
    NR = dict(
        execve=59, execveat=322, fork=57, vfork=58, clone=56, clone3=435, ptrace=101, mount=165, umount2=166,
        unshare=272, setns=308, bpf=321, io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
        keyctl=250, add_key=248, request_key=249, kexec_load=246, kexec_file_load=320, reboot=169,
        init_module=175, finit_module=313, delete_module=176, socket=41, socketpair=53, process_vm_readv=310,
        process_vm_writev=311, perf_event_open=298, userfaultfd=323, pivot_root=155, chroot=161, swapon=167,
        swapoff=168, open_by_handle_at=304, name_to_handle_at=303, open_tree=428, move_mount=429, fsopen=430,
        fsconfig=431, fsmount=432, fspick=433, mount_setattr=442, seccomp=317,
        landlock_create_ruleset=444, landlock_add_rule=445, landlock_restrict_self=446,
        shmget=29, shmat=30, shmctl=31, shmdt=67, msgget=68, msgsnd=69, msgrcv=70, msgctl=71, semget=64,
        semop=65, semctl=66, semtimedop=220, mq_open=240, mq_unlink=241, mq_timedsend=242,
        mq_timedreceive=243, mq_notify=244, mq_getsetattr=245, inotify_init=253, inotify_add_watch=254,
        inotify_rm_watch=255, inotify_init1=294, fanotify_init=300, fanotify_mark=301, memfd_create=319,
        memfd_secret=447, kill=62, syslog=103, io_setup=206, sync=162, syncfs=306, prctl=157, fcntl=72,
        splice=275, tee=276, vmsplice=278, sendfile=40, setxattr=188, lsetxattr=189, fsetxattr=190, madvise=28,
        mmap=9, fadvise64=221, fsync=74, fdatasync=75, msync=26, sched_setattr=314, quotactl=179,
        open=2, openat=257, preadv2=327, pwritev2=328,
    )
    X32_BIT = 0x40000000
elif MACHINE == "aarch64":
    AUDIT_ARCH = 0xC00000B7
    NR = dict(
        execve=221, execveat=281, clone=220, clone3=435, ptrace=117, mount=40, umount2=39, unshare=97,
        setns=268, bpf=280, io_uring_setup=425, io_uring_enter=426, io_uring_register=427, keyctl=219,
        add_key=217, request_key=218, kexec_load=104, kexec_file_load=294, reboot=142, init_module=105,
        finit_module=273, delete_module=106, socket=198, socketpair=199, process_vm_readv=270,
        process_vm_writev=271, perf_event_open=241, userfaultfd=282, pivot_root=41, chroot=51, swapon=224,
        swapoff=225, open_by_handle_at=265, name_to_handle_at=264, open_tree=428, move_mount=429, fsopen=430,
        fsconfig=431, fsmount=432, fspick=433, mount_setattr=442, seccomp=277,
        landlock_create_ruleset=444, landlock_add_rule=445, landlock_restrict_self=446,
        shmget=194, shmat=196, shmctl=195, shmdt=197, msgget=186, msgsnd=189, msgrcv=188, msgctl=187,
        semget=190, semop=193, semctl=191, semtimedop=192, mq_open=180, mq_unlink=181, mq_timedsend=182,
        mq_timedreceive=183, mq_notify=184, mq_getsetattr=185, inotify_add_watch=27, inotify_rm_watch=28,
        inotify_init1=26, fanotify_init=262, fanotify_mark=263, memfd_create=279, memfd_secret=447, kill=129,
        syslog=116, io_setup=0, sync=81, syncfs=267, prctl=167, fcntl=25, vmsplice=75, splice=76, tee=77,
        sendfile=71, setxattr=5, lsetxattr=6, fsetxattr=7, madvise=233, mmap=222, fadvise64=223, fsync=82,
        fdatasync=83, msync=227, sched_setattr=274, quotactl=60,
        openat=56, preadv2=286, pwritev2=287,
    )
    X32_BIT = None
else:  # pragma: no cover - other architectures get no seccomp/landlock (reduced isolation)
    AUDIT_ARCH = None
    NR = {}
    X32_BIT = None
if NR:  # calls added since Linux 5.1 have one number on every architecture
    NR.update(quotactl_fd=443, openat2=437, cachestat=451, statmount=457, listmount=458, setxattrat=463,
              open_tree_attr=467)
# The newest call this filter was reviewed against (file_setattr, Linux 6.17). Every higher number is ENOSYS, as on a
# kernel without it (glibc and Python fall back): a call a later kernel adds is refused until someone has read it.
LAST_REVIEWED_NR = 469

KILLED = (
    "execve", "execveat", "fork", "vfork", "ptrace", "mount", "umount2", "unshare", "setns", "bpf",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key", "kexec_load",
    "kexec_file_load", "reboot", "init_module", "finit_module", "delete_module", "process_vm_readv",
    "process_vm_writev", "perf_event_open", "userfaultfd", "pivot_root", "chroot", "swapon", "swapoff",
    "open_by_handle_at", "name_to_handle_at", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr", "open_tree_attr",
)
EPERM_CALLS = (
    "socket", "socketpair",
    # SysV IPC and POSIX message queues (the job also gets its own IPC namespace)
    "shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semctl",
    "semtimedop", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    # file-system watches (bind-mounted host dirs would report host activity)
    "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch", "fanotify_init", "fanotify_mark",
    # memory outside RLIMIT_AS
    "memfd_create", "memfd_secret",
    # signals to other processes (the job is alone in its pid namespace; Landlock scopes signals too)
    "kill", "syslog",
    # host-wide: AIO contexts come from one pool for the whole host (fs.aio-max-nr), sync flushes every file system;
    # so does quotactl(Q_SYNC) with no device, which needs no privilege: it runs sync_fs on every superblock of the
    # host that supports quotas, each ext4 one a journal commit and a disk cache flush (an unprivileged loop: 3,834
    # flushes of the host's disk in 2 s); with a file (quotactl_fd) the file's own file system. Nothing a plot or an
    # SVG runs reads quotas
    "io_setup", "sync", "syncfs", "quotactl", "quotactl_fd",
    # page pinning: vmsplice hands the pipe a reference to the job's own pages (a 1-byte splice of a huge page pins
    # 2 MiB), splice / tee pin page-cache pages, and so does sendfile into a pipe (the kernel splices file pages into
    # it: a 1-byte send pins a whole page-cache folio of a bound library); pinned pages stay after munmap, outside
    # RLIMIT_AS and the job's RSS. shutil's copies fall back to read / write on the first refused sendfile.
    "vmsplice", "splice", "tee", "sendfile",
    # kernel memory: every Landlock ruleset / rule is kernel memory outside RLIMIT_AS (millions of rules over the
    # bound library trees: hundreds of MiB); the job's own Landlock layer is applied before this filter
    "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
    # the mount table without /proc (Linux 6.8): every bind's root in its source file system (a host path), its source
    # device and its options (an overlay's lowerdir / upperdir), as /proc/<pid>/mountinfo shows them (refused there)
    "statmount", "listmount",
    # page-cache residency of any file the job can open (Linux 6.5): of the bound host files, what host processes read
    # (which libraries the trainer loads, and when). Recent kernels refuse it, as mincore, on a file the caller could
    # not write; the first ones with it answer.
    "cachestat",
    # kernel memory: each filter a thread stacks on top of the job's is a BPF program and its JIT image, per thread
    # (200 threads stacked 600 filters of 4095 instructions: ~65 MiB of vmalloc outside RLIMIT_AS);
    # prctl(PR_SET_SECCOMP) too
    "seccomp",
    # kernel memory: an extended attribute is kept in kernel memory by the job tmpfs. user.* ones are charged to its
    # inode cap (~4 MiB), but a POSIX ACL (system.posix_acl_access / _default: 8,000 entries, 64 KiB) is not: 2,000
    # directories with both held 250 MiB of unreclaimable slab, and the 4,096 inodes of a job dir ~0.5 GiB, outside
    # RLIMIT_AS. Nothing a plot or an SVG runs sets one (shutil's copystat ignores EPERM).
    "setxattr", "lsetxattr", "fsetxattr", "setxattrat",
    # the scheduler's host-wide inputs: sched_setattr sets a task's utilisation clamps (SCHED_FLAG_UTIL_CLAMP_MIN /
    # MAX) with no privilege, up to the system's limit (1024 by default): a job asking uclamp.min 1024 has schedutil
    # run its CPU at top frequency and capacity-aware placement move it to big cores, whatever it does, and its first
    # use switches uclamp accounting on host-wide (a static key). It also sets an EEVDF custom slice (sched_runtime
    # for SCHED_OTHER, Linux 6.12), with which a job's wake-ups preempt the trainer's and the other jobs' threads.
    # The attributes are behind a pointer the filter cannot read: the call is refused whole. Nothing a plot or an
    # SVG runs calls it (Python's os.sched_setscheduler / sched_setparam are other calls, and stay: RLIMIT_RTPRIO and
    # RLIMIT_NICE bound them)
    "sched_setattr",
)
# Answered "done" without running them (ERRNO 0), as they have nothing to do for the job: everything it may write is
# on tmpfs, whose fsync is a no-op. On a host file system they are not: ext4 sends the disk a cache flush for every
# fsync, also of a clean file open only for reading through a read-only mount. A job's loop on a bound file (a
# directory shown as a bind where overlayfs cannot show it) flushed the host's disk ~390 times a second, its writes
# (the trainer's checkpoints) waiting behind them. (Through overlayfs a lower file's fsync is already a no-op.)
# msync(MS_SYNC) of a shared mapping runs the same fsync on the mapped file (a bound one may be mapped shared for
# reading): the same answer.
IGNORED_CALLS = ("fsync", "fdatasync", "msync")

CLONE_VM = 0x00000100
CLONE_FS = 0x00000200
CLONE_FILES = 0x00000400
CLONE_SIGHAND = 0x00000800
CLONE_THREAD = 0x00010000
# a thread as pthread_create makes one: one address space, fs info, fd table and signal handlers with the job. Any
# of them missing (a thread with its own fd table: RLIMIT_NOFILE holds per table, so 255 threads x 64 fds) is killed
THREAD_CLONE_FLAGS = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_THP_DISABLE = 41
F_NOTIFY = 1026  # dnotify
F_SETPIPE_SZ = 1031
# The most a job may set a pipe's buffer to: the kernel's default size (16 pages), so a program may shrink a pipe and
# restore it, but not grow one. Grown to fs.pipe-max-size (1 MiB), every pipe the job may open held ~57 MiB of pipe
# pages in all, outside RLIMIT_AS; at this size ~3.5 MiB.
PIPE_SIZE_MAX = 1 << 16
PR_SET_SECCOMP = 22
F_SETFL = 4
# Direct I/O reads a file from the disk on every call, past the page cache: a job reading a bound library with
# O_DIRECT made 3.3 GiB of disk reads in 2 s (the VM disk's full bandwidth, for the trainer's data and checkpoints
# too), where cached reads of it make none. Refused (EPERM) where its flags are in a register: open / openat's flags
# and fcntl(F_SETFL); openat2 carries them in a struct the filter cannot read, so it is ENOSYS, as on kernels before
# 5.6 (glibc's and Python's open use openat). Nothing a plot or an SVG opens with it.
O_DIRECT = getattr(os, "O_DIRECT", 0)
# The same past-the-cache reads without O_DIRECT (Linux 6.14): preadv2(RWF_DONTCACHE) reads into page-cache folios
# that it drops again once read, so every call reads the disk. The overlay views and tmpfs refuse it (EOPNOTSUPP),
# the host's ext4 takes it (a directory shown as a bind, where overlayfs cannot show it). Refused in preadv2 /
# pwritev2 (the flags are their sixth argument) whatever the file.
RWF_DONTCACHE = 0x80
# Linux 6.16: a process's own futex hash of N buckets (64 bytes each), kvzalloc'ed, kernel memory outside RLIMIT_AS:
# PR_FUTEX_HASH_SET_SLOTS of 2**24 took 1 GiB of vmalloc for one job. Without it a threaded process still gets a hash
# sized by its thread count, as before the call existed.
PR_FUTEX_HASH = 78
# Kernel same-page merging for the whole process (Linux 6.4) or a range: where an operator runs KSM, a job's pages
# merged with equal pages of other processes (other jobs' images, the trainer's) and the time a write then takes to
# unshare a page tells whether another process holds those bytes. Off for the job, as nothing it runs asks for it.
PR_SET_MEMORY_MERGE = 67
MADV_MERGEABLE = 12
# Core scheduling (Linux 5.14, CONFIG_SCHED_CORE, hosts with SMT): any process may give itself a "cookie", and no
# other task may then run on an SMT sibling of a core where one of its threads runs (the sibling is forced idle). The
# first cookie on the host switches core scheduling on host-wide (a static key patched on every CPU, an RCU grace
# period, every core's run-queue locks taken), and the last one dropped switches it off again: a job could idle the
# siblings of the cores its threads ran on, for the trainer and the other workers' jobs, and toggle the host's
# scheduler as often as it liked. Nothing a plot or an SVG runs asks for it.
PR_SCHED_CORE = 62
# posix_fadvise(POSIX_FADV_DONTNEED) drops a file's clean, unmapped page-cache pages, of the host's file behind a
# bound one too (overlayfs passes the advice to it): a job emptied the host's cache of torch's libraries, and a host
# process then read them from disk again. Advice may be ignored, so the filter answers it "done" without running it;
# the other advice (WILLNEED, SEQUENTIAL, ...) only adds pages or changes the job's own reading.
POSIX_FADV_DONTNEED = 4  # the same on x86_64 and aarch64 (s390 alone numbers it 6)
# hugetlb pages come from the host's reserved pool (vm.nr_hugepages, and surplus ones past it): pages that other
# programs reserved, never reclaimed, and not charged to a memory cgroup unless it is mounted with
# memory_hugetlb_accounting. RLIMIT_AS counts them, nothing else does: a job could take up to its whole limit from the
# pool. Nothing it runs asks for them (CPython's optional hugepage arenas fall back to plain pages).
MAP_HUGETLB = 0x40000
# Shared anonymous memory is a shmem object as large as the mapping, and the object keeps every page it was given
# when all of the mapping but a page is unmapped (munmap, mremap, MAP_FIXED over it): RLIMIT_AS then counts the page
# left, and a job that mapped, filled and unmapped 512 MiB six times held 3 GiB of shmem for 1 GiB of limit. Refused,
# as memfd and SysV / POSIX shared memory are (Python's mmap.mmap(-1, n) is shared: pass flags=mmap.MAP_PRIVATE). A
# shared mapping of /dev/zero is the same object: the job may open /dev/zero only for reading (Landlock), and the
# kernel makes a shared mapping of a file not open for writing a private one.
MAP_SHARED = 0x01  # also set in MAP_SHARED_VALIDATE (0x03)
MAP_ANONYMOUS = 0x20
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
EPERM, ENOSYS = 1, 38

# BPF opcodes
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_JGT_K = 0x25
_BPF_RET_K = 0x06
_BPF_ALU_AND_K = 0x54


class SandboxError(OSError):
    pass


def _check(rc: int, what: str) -> int:
    if rc < 0:
        err = ctypes.get_errno()
        raise SandboxError(err, f"{what}: {os.strerror(err)}")
    return rc


# --- rlimits / process ----------------------------------------------------------------------------------
# Queued signals and POSIX timers (each timer holds a preallocated signal) of the job uid. Inherited, the limit
# scales with the host's RAM (~96k on 23 GiB): timer_create alone then pinned ~36 MiB of unreclaimable kernel
# memory per job, outside RLIMIT_AS (hundreds of MiB to GiBs on a large host, unbounded where it is unlimited).
SIGPENDING = 256
# Locked memory (mlock, MAP_LOCKED) of the job: pages the kernel may never reclaim. Inherited, it is whatever the
# pool's caller had (8 MiB by default, unlimited in many GPU containers): nothing a plot or an SVG runs locks memory.
# POSIX message queues (refused by the filter) are charged to RLIMIT_MSGQUEUE: 0 too, should one ever pass.
MEMLOCK = 0
MSGQUEUE = 0


def set_rlimits(*, address_space: int, cpu_s: int, fsize: int, nofile: int = 64, nproc: int = 256) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    # inherited from whoever started the pool: a non-zero one would let the job take real-time / raised priority
    resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
    resource.setrlimit(resource.RLIMIT_NICE, (0, 0))
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (SIGPENDING, SIGPENDING))
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (MEMLOCK, MEMLOCK))
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (MSGQUEUE, MSGQUEUE))
    # counts every task (threads too) of the job uid; ignored for root, effective after the uid drop.
    # seccomp is the real fork barrier; this only caps thread bombs (RLIMIT_AS caps them as well).
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


_NS_NAMES = {CLONE_NEWNS: "mnt", CLONE_NEWNET: "net", CLONE_NEWIPC: "ipc", CLONE_NEWUTS: "uts",
             CLONE_NEWCGROUP: "cgroup", CLONE_NEWPID: "pid"}


def unshare(flag: int) -> None:
    """A new namespace of one kind for the caller (CLONE_NEWPID: for the caller's next children)."""
    _check(_libc.unshare(flag), f"unshare({_NS_NAMES.get(flag, hex(flag))})")


def setns(fd: int, flag: int) -> None:
    _check(_libc.setns(fd, flag), f"setns({_NS_NAMES.get(flag, hex(flag))})")


def sethostname(name: bytes) -> None:
    _check(_libc.sethostname(name, ctypes.c_size_t(len(name))), "sethostname")


def set_pdeathsig(sig: int) -> None:
    _check(_libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


def drop_privileges(uid: int = 65534, gid: int = 65534) -> None:
    if os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    if os.geteuid() == 0 or os.getuid() == 0:
        raise SandboxError(EPERM, "still root after the uid drop")


def no_new_privs() -> None:
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


M_ARENA_MAX = -8  # mallopt parameter (glibc's malloc.h)


def set_malloc_arenas(count: int) -> bool:
    """At most ``count`` malloc arenas for the threads this process starts from now on (glibc's ``mallopt``); False
    where the C library has no such call (musl) or refuses. glibc otherwise gives a thread that allocates an arena of
    its own, up to 8 per core, and each reserves 64 MiB of address space."""
    mallopt = getattr(_libc, "mallopt", None)
    return mallopt is not None and mallopt(M_ARENA_MAX, int(count)) == 1


def set_thp_disabled() -> None:
    """No transparent huge pages for the job: each page it can get pinned or locked is then 4 KiB, not 2 MiB (the
    filter keeps the job from turning them back on)."""
    _check(_libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0), "prctl(PR_SET_THP_DISABLE)")


def set_dumpable(flag: bool) -> None:
    """Not dumpable: the job's /proc/self files (environ, mem, ...) belong to root, not to the job uid."""
    _check(_libc.prctl(PR_SET_DUMPABLE, int(bool(flag)), 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


# --- seccomp --------------------------------------------------------------------------------------------
def build_seccomp_program() -> bytes:
    """Hand-assembled classic BPF; jumps are resolved from symbolic labels."""
    if AUDIT_ARCH is None:
        raise SandboxError(ENOSYS, f"no seccomp filter for {MACHINE}")
    prog: list[tuple] = []  # (code, jt, jf, k) where jt/jf may be label strings

    def ins(code, k=0, jt=0, jf=0):
        prog.append((code, jt, jf, k))

    ins(_BPF_LD_W_ABS, 4)  # seccomp_data.arch
    ins(_BPF_JEQ_K, AUDIT_ARCH, 1, 0)
    ins(_BPF_RET_K, SECCOMP_RET_KILL_PROCESS)
    ins(_BPF_LD_W_ABS, 0)  # seccomp_data.nr
    if X32_BIT is not None:
        ins(_BPF_JGE_K, X32_BIT, "kill", 0)
    ins(_BPF_JGT_K, LAST_REVIEWED_NR, "enosys", 0)
    for name in KILLED:
        if name in NR:
            ins(_BPF_JEQ_K, NR[name], "kill", 0)
    for name in EPERM_CALLS:
        if name in NR:
            ins(_BPF_JEQ_K, NR[name], "eperm", 0)
    for name in IGNORED_CALLS:
        if name in NR:
            ins(_BPF_JEQ_K, NR[name], "ignored", 0)
    ins(_BPF_JEQ_K, NR["clone3"], "enosys", 0)
    ins(_BPF_JEQ_K, NR["openat2"], "enosys", 0)
    if "open" in NR:
        ins(_BPF_JEQ_K, NR["open"], "open", 0)
    ins(_BPF_JEQ_K, NR["openat"], "openat", 0)
    ins(_BPF_JEQ_K, NR["preadv2"], "rwf", 0)
    ins(_BPF_JEQ_K, NR["pwritev2"], "rwf", 0)
    ins(_BPF_JEQ_K, NR["clone"], "clone", 0)
    ins(_BPF_JEQ_K, NR["prctl"], "prctl", 0)
    ins(_BPF_JEQ_K, NR["fcntl"], "fcntl", 0)
    ins(_BPF_JEQ_K, NR["madvise"], "madvise", 0)
    ins(_BPF_JEQ_K, NR["mmap"], "mmap", 0)
    ins(_BPF_JEQ_K, NR["fadvise64"], "fadvise", 0)
    ins(_BPF_RET_K, SECCOMP_RET_ALLOW)
    labels = {}
    labels["clone"] = len(prog)
    ins(_BPF_LD_W_ABS, 16)  # low 32 bits of args[0] (clone flags; little endian)
    ins(_BPF_ALU_AND_K, THREAD_CLONE_FLAGS)
    ins(_BPF_JEQ_K, THREAD_CLONE_FLAGS, "allow", "kill")
    # The parent-death signal is what ends a job whose worker is killed mid-job (the job left the worker's
    # process group with setsid): the job may not clear or change it. Nor may it make itself dumpable again:
    # a crash would then core-dump, and a pipe core_pattern (apport, systemd-coredump) runs the host's helper,
    # as root outside every namespace, on the job's memory (RLIMIT_CORE = 0 does not stop a pipe).
    labels["prctl"] = len(prog)
    ins(_BPF_LD_W_ABS, 16)  # args[0]: the prctl option
    ins(_BPF_JEQ_K, PR_SET_PDEATHSIG, "eperm", 0)
    ins(_BPF_JEQ_K, PR_SET_THP_DISABLE, "eperm", 0)  # huge pages stay off (see set_thp_disabled)
    ins(_BPF_JEQ_K, PR_SET_SECCOMP, "eperm", 0)  # as the seccomp call: filters are kernel memory per thread
    ins(_BPF_JEQ_K, PR_FUTEX_HASH, "eperm", 0)  # a futex hash of the job's chosen size: up to 1 GiB of vmalloc
    ins(_BPF_JEQ_K, PR_SET_MEMORY_MERGE, "eperm", 0)  # KSM for all its memory (see PR_SET_MEMORY_MERGE)
    ins(_BPF_JEQ_K, PR_SCHED_CORE, "eperm", 0)  # a core-scheduling cookie: siblings forced idle host-wide
    ins(_BPF_JEQ_K, PR_SET_DUMPABLE, "eperm", "allow")
    # dnotify, the watch that needs no inotify call: fcntl(dir, F_NOTIFY) on a bound host directory signals the job
    # on every read / write there by host processes (DN_ACCESS: which library the trainer just imported, ...)
    labels["fcntl"] = len(prog)
    ins(_BPF_LD_W_ABS, 24)  # low 32 bits of args[1]: the command (an unsigned int)
    ins(_BPF_JEQ_K, F_NOTIFY, "eperm", 0)
    ins(_BPF_JEQ_K, F_SETFL, "flags_arg2", 0)
    ins(_BPF_JEQ_K, F_SETPIPE_SZ, 0, "allow")
    # F_SETPIPE_SZ: the size (args[2]) at most PIPE_SIZE_MAX. Kernels read it as an unsigned int or long: a size with
    # any of its high 32 bits set is refused whatever its low ones
    ins(_BPF_LD_W_ABS, 36)  # high 32 bits of args[2]
    ins(_BPF_JEQ_K, 0, 0, "eperm")
    ins(_BPF_LD_W_ABS, 32)  # low 32 bits of args[2]
    ins(_BPF_JGT_K, PIPE_SIZE_MAX, "eperm", "allow")
    # O_DIRECT (see O_DIRECT above): the flags are an int, open's second argument and openat's / fcntl's third
    labels["open"] = len(prog)
    ins(_BPF_LD_W_ABS, 24)  # low 32 bits of args[1]
    ins(_BPF_ALU_AND_K, O_DIRECT)
    ins(_BPF_JEQ_K, 0, "allow", "eperm")
    labels["openat"] = labels["flags_arg2"] = len(prog)
    ins(_BPF_LD_W_ABS, 32)  # low 32 bits of args[2]
    ins(_BPF_ALU_AND_K, O_DIRECT)
    ins(_BPF_JEQ_K, 0, "allow", "eperm")
    labels["rwf"] = len(prog)
    ins(_BPF_LD_W_ABS, 56)  # low 32 bits of args[5]: the RWF_* flags (an int)
    ins(_BPF_ALU_AND_K, RWF_DONTCACHE)
    ins(_BPF_JEQ_K, 0, "allow", "eperm")
    labels["madvise"] = len(prog)
    ins(_BPF_LD_W_ABS, 32)  # low 32 bits of args[2]: the advice (an int)
    ins(_BPF_JEQ_K, MADV_MERGEABLE, "eperm", "allow")
    labels["mmap"] = len(prog)
    ins(_BPF_LD_W_ABS, 40)  # low 32 bits of args[3]: the flags (the kernel reads no higher ones)
    ins(_BPF_ALU_AND_K, MAP_HUGETLB)
    ins(_BPF_JEQ_K, 0, 0, "eperm")
    ins(_BPF_LD_W_ABS, 40)
    ins(_BPF_ALU_AND_K, MAP_SHARED | MAP_ANONYMOUS)
    ins(_BPF_JEQ_K, MAP_SHARED | MAP_ANONYMOUS, "eperm", "allow")
    labels["fadvise"] = len(prog)
    ins(_BPF_LD_W_ABS, 40)  # low 32 bits of args[3]: the advice (an int), last on both architectures
    ins(_BPF_JEQ_K, POSIX_FADV_DONTNEED, "ignored", "allow")
    labels["allow"] = len(prog)
    ins(_BPF_RET_K, SECCOMP_RET_ALLOW)
    labels["kill"] = len(prog)
    ins(_BPF_RET_K, SECCOMP_RET_KILL_PROCESS)
    labels["eperm"] = len(prog)
    ins(_BPF_RET_K, SECCOMP_RET_ERRNO | EPERM)
    labels["enosys"] = len(prog)
    ins(_BPF_RET_K, SECCOMP_RET_ERRNO | ENOSYS)
    labels["ignored"] = len(prog)
    ins(_BPF_RET_K, SECCOMP_RET_ERRNO | 0)  # the call returns 0 and does nothing

    out = bytearray()
    for i, (code, jt, jf, k) in enumerate(prog):
        jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise SandboxError(ENOSYS, "seccomp program jump out of range")
        out += struct.pack("<HBBI", code, jt, jf, k)
    return bytes(out)


_PROGRAM: bytes | None = None


def apply_seccomp() -> None:
    global _PROGRAM
    if _PROGRAM is None:  # built once (in the zygote's warm-up), reused by every job child
        _PROGRAM = build_seccomp_program()
    prog = _PROGRAM
    buf = ctypes.create_string_buffer(prog, len(prog))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp filter")


# --- landlock -------------------------------------------------------------------------------------------
LL_EXECUTE = 1 << 0
LL_WRITE_FILE = 1 << 1
LL_READ_FILE = 1 << 2
LL_READ_DIR = 1 << 3
LL_FS_V1 = (1 << 13) - 1
LL_REFER = 1 << 13  # ABI 2
LL_TRUNCATE = 1 << 14  # ABI 3
LL_IOCTL_DEV = 1 << 15  # ABI 5
LL_NET_BIND_TCP = 1
LL_NET_CONNECT_TCP = 2
LL_SCOPE_ABSTRACT_UNIX = 1
LL_SCOPE_SIGNAL = 2
LL_RULE_PATH_BENEATH = 1
LL_CREATE_RULESET_VERSION = 1
O_PATH = getattr(os, "O_PATH", 0o10000000)


def landlock_abi() -> int:
    if "landlock_create_ruleset" not in NR:
        return 0
    rc = _libc.syscall(NR["landlock_create_ruleset"], None, ctypes.c_size_t(0), LL_CREATE_RULESET_VERSION)
    return int(rc) if rc > 0 else 0


def apply_landlock(read_paths, write_paths, write_files=(), list_paths=()) -> int:
    """Restrict the calling process; returns the ABI used. Missing paths are skipped. ``write_files`` (files
    such as ``/dev/null``) get only the file rights write + truncate on top of what they have; ``list_paths``
    (directories) only the right to list directories below them: no file there can be opened."""
    abi = landlock_abi()
    if abi < 1:
        raise SandboxError(ENOSYS, "landlock unavailable")
    fs = LL_FS_V1
    if abi >= 2:
        fs |= LL_REFER
    if abi >= 3:
        fs |= LL_TRUNCATE
    if abi >= 5:
        fs |= LL_IOCTL_DEV
    net = (LL_NET_BIND_TCP | LL_NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL) if abi >= 6 else 0
    if abi >= 6:
        attr = struct.pack("<QQQ", fs, net, scoped)
    elif abi >= 4:
        attr = struct.pack("<QQ", fs, net)
    else:
        attr = struct.pack("<Q", fs)
    abuf = ctypes.create_string_buffer(attr, len(attr))
    rfd = _check(_libc.syscall(NR["landlock_create_ruleset"], abuf, ctypes.c_size_t(len(attr)), 0),
                 "landlock_create_ruleset")
    try:
        ro = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
        rw = fs & ~(LL_IOCTL_DEV)
        wf = (LL_WRITE_FILE | LL_TRUNCATE) & fs
        for paths, access in ((read_paths, ro), (write_paths, rw), (write_files, wf), (list_paths, LL_READ_DIR)):
            for p in paths:
                try:
                    pfd = os.open(p, O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    acc = access
                    if not os.path.isdir(p):  # file rules may only carry file rights
                        acc &= LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV
                    rule = ctypes.create_string_buffer(struct.pack("<Qi", acc, pfd), 12)
                    _check(_libc.syscall(NR["landlock_add_rule"], rfd, LL_RULE_PATH_BENEATH, rule, 0),
                           f"landlock_add_rule({p})")
                finally:
                    os.close(pfd)
        _check(_libc.syscall(NR["landlock_restrict_self"], rfd, 0), "landlock_restrict_self")
    finally:
        os.close(rfd)
    return abi


# --- mounts ---------------------------------------------------------------------------------------------
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC = 1, 2, 4, 8
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
_libc.mount.restype = ctypes.c_int
_libc.umount2.restype = ctypes.c_int


def mount(source, target: str, fstype, flags: int, data=None) -> None:
    enc = lambda x: None if x is None else (x if isinstance(x, bytes) else os.fsencode(x))  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount({target})")


def umount(path: str) -> None:
    _check(_libc.umount2(os.fsencode(path), MNT_DETACH), "umount2")


def make_private_mount_ns() -> None:
    """A private mount namespace for the caller: nothing mounted here reaches the host, and back."""
    unshare(CLONE_NEWNS)
    mount("none", "/", None, MS_REC | MS_PRIVATE)


def _readonly(path: str, attrs: int) -> None:
    """Set mount attributes on ``path`` and every mount below it (falls back to the top mount only)."""
    if "mount_setattr" in NR:
        buf = ctypes.create_string_buffer(struct.pack("<QQQQ", attrs, 0, 0, 0), 32)
        rc = _libc.syscall(NR["mount_setattr"], AT_FDCWD, os.fsencode(path), AT_RECURSIVE, buf,
                           ctypes.c_size_t(32))
        if rc == 0:
            return
    flags = MS_REMOUNT | MS_BIND | (MS_RDONLY if attrs & MOUNT_ATTR_RDONLY else 0) \
        | (MS_NOSUID if attrs & MOUNT_ATTR_NOSUID else 0) | (MS_NODEV if attrs & MOUNT_ATTR_NODEV else 0) \
        | (MS_NOEXEC if attrs & MOUNT_ATTR_NOEXEC else 0)
    mount(None, path, None, flags)


def _mkdirs(path: str, mode: int = 0o711) -> None:
    """mkdir -p with an explicit mode on every level it creates (traversable, not listable)."""
    missing = []
    p = path
    while not os.path.lexists(p):
        missing.append(p)
        p = os.path.dirname(p)
    for d in reversed(missing):
        os.mkdir(d)
        os.chmod(d, mode)


def _mount_points() -> list[str]:
    """Every mount point of the caller's mount namespace (``/proc/self/mountinfo``, octal escapes decoded)."""
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            rows = f.read().splitlines()
    except OSError:
        return []
    unescape = lambda b: os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), b))  # noqa: E731
    return [unescape(r.split()[4]) for r in rows if len(r.split()) > 4]


def _overlay_view(real: str, dst: str, empty: str, mount_points: list[str]) -> bool:
    """Show the directory ``real`` at ``dst`` through a read-only overlayfs (``empty`` as the second, empty layer:
    overlayfs wants two without an upper one) instead of a bind mount. A file opened through it is an overlay inode,
    and ``flock`` / ``fcntl`` locks belong to the inode: a job's lock then holds against other jobs of this worker
    only, never against a host process locking the real file (through a bind it did, for up to the job's timeout).
    False, and nothing mounted, where overlayfs cannot show it as a bind would: mounts below ``real`` (an overlay
    shows only its own file system), a path that the option string cannot carry, a kernel or file system that refuses
    (stacked too deep, no overlayfs); the caller binds it then."""
    below = real.rstrip("/") + "/"
    if any(c in real + empty for c in ",:\\") or any(m.startswith(below) for m in mount_points):
        return False
    try:
        mount("overlay", dst, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, f"lowerdir={real}:{empty}")
    except SandboxError:
        return False
    return True


def _copy_file(real: str, dst: str) -> bool:
    """Put a copy of the regular file ``real`` at ``dst`` (an empty file of the skeleton), with its owner and its
    permission bits less write, set-id and sticky ones. False, and nothing copied, for anything but a regular file."""
    try:  # no FIFO wait, no link followed
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return False
        with open(dst, "wb") as out:
            while chunk := os.read(fd, 1 << 20):
                out.write(chunk)
            os.fchown(out.fileno(), st.st_uid, st.st_gid)
            os.fchmod(out.fileno(), st.st_mode & 0o555)
        return True
    finally:
        os.close(fd)


def _device_node(real: str, dst: str) -> bool:
    """A device node of its own at ``dst`` for the character device ``real`` (its type and permission bits), that
    opens (a file system that ignores device nodes, or a kernel that refuses the ``mknod``, as in a user namespace:
    False, and nothing left at ``dst``)."""
    st = os.stat(real)
    if not stat.S_ISCHR(st.st_mode):
        return False
    try:
        os.mknod(dst, stat.S_IFCHR | stat.S_IMODE(st.st_mode), st.st_rdev)
    except OSError:
        return False
    try:
        os.chmod(dst, stat.S_IMODE(st.st_mode))  # mknod applied the umask
        os.close(os.open(dst, os.O_RDONLY | os.O_CLOEXEC))
    except OSError:
        os.unlink(dst)
        return False
    return True


def _regular_file_bytes(paths) -> int:
    """Bytes of tmpfs pages that copies of the regular files among ``paths`` take (each copied twice at most: at the
    path as given and at the path it resolves to)."""
    total = 0
    for p in paths:
        try:
            st = os.stat(p)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            total += 2 * -(-st.st_size // 4096) * 4096
    return total


def build_root(root: str, sources, devices=(), masked=()) -> list[str]:
    """Build the jobs' root tree at ``root`` (call inside a private mount namespace, as root).

    ``root`` becomes a small tmpfs whose directories are mode 0711 (traversable, not listable); every path
    of ``sources`` is shown read-only, nosuid, nodev at the same path inside it: a directory through a read-only
    overlayfs where it can be (``_overlay_view``), else a bind mount; a regular file as a copy in the skeleton. A file
    lock belongs to the inode and a bind shares the host's: a job's ``flock`` / ``lockf`` there held up host processes
    locking the file until the job ended. ``devices`` (character devices in ``/dev``) are device nodes of their own
    in a tmpfs on ``/dev`` that allows them (bound without nodev where the kernel refuses the ``mknod``, as in a user
    namespace); ``/proc``, ``/job`` and ``/tmp`` are empty mount points, ``/dev/shm``
    an empty read-only directory (``multiprocessing``'s POSIX semaphores then fail with EROFS, a refusal,
    instead of ENOENT). Each
    directory of ``masked`` that a bind shows gets an empty read-only tmpfs over it (the caller makes sure
    no source lies in it). The skeleton and ``/dev`` are then made read-only. Returns the paths shown. Sources that do
    not exist are skipped."""
    os.makedirs(root, exist_ok=True)
    # the overlays' empty lower layer: outside the tree, a read-only tmpfs of this mount namespace (nothing adds to it)
    empty = root.rstrip("/") + ".empty"
    os.makedirs(empty, exist_ok=True)
    mount("tmpfs", empty, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=2,mode=0555")
    mount_points = _mount_points()
    size = (1 << 20) + _regular_file_bytes(sources)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, f"size={size},nr_inodes=2048,mode=0711")
    dev_tmpfs = False
    if devices:
        _mkdirs(root + "/dev")
        try:  # without nodev: the device nodes made there must open
            mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=4k,nr_inodes=32,mode=0711")
            dev_tmpfs = True
        except SandboxError:
            pass
    bound: list[str] = []
    for src, is_dev in [(p, False) for p in sources] + [(p, True) for p in devices]:
        if not src or not os.path.isabs(src) or not os.path.exists(src):
            continue
        real = os.path.realpath(src)
        for target in dict.fromkeys((src, real)):  # the path as given and the path it resolves to
            if any(target == b or target.startswith(b.rstrip("/") + "/") for b in bound):
                continue  # already visible through an enclosing bind
            dst = root + target
            if os.path.isdir(real):
                _mkdirs(dst)
                shown = not is_dev and _overlay_view(real, dst, empty, mount_points)
            else:
                _mkdirs(os.path.dirname(dst))
                if is_dev:
                    shown = dev_tmpfs and os.path.dirname(target) == "/dev" and _device_node(real, dst)
                else:
                    if not os.path.lexists(dst):
                        os.close(os.open(dst, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
                    shown = _copy_file(real, dst)
            if not shown:
                if not os.path.lexists(dst):
                    os.close(os.open(dst, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
                mount(real, dst, None, MS_BIND | MS_REC)
                _readonly(dst, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | (0 if is_dev else MOUNT_ATTR_NODEV))
            bound.append(target)
    for m in masked:
        for target in dict.fromkeys((m, os.path.realpath(m))):
            dst = root + target
            if os.path.isdir(dst) and not os.path.islink(dst) and not os.path.ismount(dst):
                mount("tmpfs", dst, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                      "size=4k,nr_inodes=4,mode=0555")
    for d in ("/proc", "/job", "/tmp", "/dev/shm"):
        _mkdirs(root + d)
    if dev_tmpfs:
        mount(None, root + "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    return bound


def tree_read_paths(root: str, hidden=("proc",)) -> list[str]:
    """The paths a job may read in the tree built at ``root``: each of its top-level entries, as seen from inside
    it, but ``hidden``. Landlock grants rights below a path, so a rule on ``/`` would take in the job's procfs,
    whose ``mountinfo`` / ``mounts`` (of the job's own pid, its threads' ``/proc/<tid>`` and ``task/<tid>``, each a
    path of its own) show every bind's source path and file-system options on the host."""
    return ["/" + name for name in sorted(os.listdir(root)) if name not in hidden]


def mount_job_tmpfs(path: str, size_bytes: int, nr_inodes: int = 4096, uid: int = 65534, gid: int = 65534) -> None:
    """A fresh size- and inode-capped ``nosuid,nodev,noexec`` tmpfs owned by the job uid, mode 0700, on
    ``path``; removing it is one ``umount`` (no directory walk, whatever the job left in it)."""
    opts = f"size={int(size_bytes)},nr_inodes={int(nr_inodes)},mode=0700,uid={int(uid)},gid={int(gid)}"
    mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts)


def enter_root(root: str) -> None:
    """In the job's own mount namespace: make ``root`` the root directory and detach the whole host tree."""
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    os.chdir(root)
    _check(_libc.syscall(NR["pivot_root"], b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount2(old root)")
    os.chdir("/")


def mount_proc(path: str = "/proc") -> None:
    """A fresh, read-only procfs of the caller's pid namespace showing only its processes' directories."""
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    try:
        mount("proc", path, "proc", flags, "hidepid=invisible,subset=pid")
    except SandboxError:  # kernels before 5.8: no subset=pid
        mount("proc", path, "proc", flags, "hidepid=2")
