"""Isolation layers applied inside a forked job child (Linux only, ctypes, no third-party code).

Order used by the worker (see ``worker._child_main``): ``setsid`` -> rlimits -> network namespace ->
chdir into the job dir -> drop to an unprivileged uid/gid -> ``PR_SET_NO_NEW_PRIVS`` -> Landlock -> seccomp.

* ``unshare_net``: a fresh, empty network namespace (only a down loopback): no route anywhere.
* ``drop_privileges``: setgroups([]) / setgid / setuid to ``nobody`` (65534); with it all capabilities go.
* ``apply_landlock``: file system read-only (read + execute) below a short list of system / Python paths,
  read-write only below the job dir; when the kernel ABI allows it also denies every TCP bind/connect (ABI 4)
  and scopes abstract unix sockets and signals to the sandbox (ABI 6).
* ``apply_seccomp``: a BPF filter that kills the process (SIGSYS) on process creation / exec / ptrace /
  mount / namespace / bpf / io_uring / keyring / module / kexec / reboot system calls, answers EPERM to every
  ``socket``/``socketpair``, and ENOSYS to ``clone3`` (so glibc falls back to ``clone``, which is allowed only
  with ``CLONE_THREAD``, i.e. threads but no processes).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import resource
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
    )
    X32_BIT = None
else:  # pragma: no cover - other architectures get no seccomp/landlock (reduced isolation)
    AUDIT_ARCH = None
    NR = {}
    X32_BIT = None

KILLED = (
    "execve", "execveat", "fork", "vfork", "ptrace", "mount", "umount2", "unshare", "setns", "bpf",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "keyctl", "add_key", "request_key", "kexec_load",
    "kexec_file_load", "reboot", "init_module", "finit_module", "delete_module", "process_vm_readv",
    "process_vm_writev", "perf_event_open", "userfaultfd", "pivot_root", "chroot", "swapon", "swapoff",
    "open_by_handle_at", "name_to_handle_at", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr",
)
EPERM_CALLS = ("socket", "socketpair")

CLONE_THREAD = 0x00010000
CLONE_NEWNET = 0x40000000
PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
EPERM, ENOSYS = 1, 38

# BPF opcodes
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_JSET_K = 0x45
_BPF_RET_K = 0x06


class SandboxError(OSError):
    pass


def _check(rc: int, what: str) -> int:
    if rc < 0:
        err = ctypes.get_errno()
        raise SandboxError(err, f"{what}: {os.strerror(err)}")
    return rc


# --- rlimits / process ----------------------------------------------------------------------------------
def set_rlimits(*, address_space: int, cpu_s: int, fsize: int, nofile: int = 64, nproc: int = 256) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    # counts every task (threads too) of the job uid; ignored for root, effective after the uid drop.
    # seccomp is the real fork barrier; this only caps thread bombs (RLIMIT_AS caps them as well).
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def unshare_net() -> None:
    _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")


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
    for name in KILLED:
        if name in NR:
            ins(_BPF_JEQ_K, NR[name], "kill", 0)
    for name in EPERM_CALLS:
        ins(_BPF_JEQ_K, NR[name], "eperm", 0)
    ins(_BPF_JEQ_K, NR["clone3"], "enosys", 0)
    ins(_BPF_JEQ_K, NR["clone"], "clone", 0)
    ins(_BPF_RET_K, SECCOMP_RET_ALLOW)
    labels = {}
    labels["clone"] = len(prog)
    ins(_BPF_LD_W_ABS, 16)  # low 32 bits of args[0] (clone flags; little endian)
    ins(_BPF_JSET_K, CLONE_THREAD, "allow", "kill")
    labels["allow"] = len(prog)
    ins(_BPF_RET_K, SECCOMP_RET_ALLOW)
    labels["kill"] = len(prog)
    ins(_BPF_RET_K, SECCOMP_RET_KILL_PROCESS)
    labels["eperm"] = len(prog)
    ins(_BPF_RET_K, SECCOMP_RET_ERRNO | EPERM)
    labels["enosys"] = len(prog)
    ins(_BPF_RET_K, SECCOMP_RET_ERRNO | ENOSYS)

    out = bytearray()
    for i, (code, jt, jf, k) in enumerate(prog):
        jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise SandboxError(ENOSYS, "seccomp program jump out of range")
        out += struct.pack("<HBBI", code, jt, jf, k)
    return bytes(out)


def apply_seccomp() -> None:
    prog = build_seccomp_program()
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


def apply_landlock(read_paths, write_paths) -> int:
    """Restrict the calling process; returns the ABI used. Missing paths are skipped."""
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
        for paths, access in ((read_paths, ro), (write_paths, rw)):
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


# --- job file system (worker side) ----------------------------------------------------------------------
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 16384, 1 << 18
MNT_DETACH = 2
_libc.mount.restype = ctypes.c_int
_libc.umount2.restype = ctypes.c_int


def mount_job_tmpfs(path: str, size_bytes: int, nr_inodes: int = 4096) -> None:
    """In a private mount namespace of the calling (worker) process, mount a size- and inode-capped
    ``nosuid,nodev,noexec`` tmpfs on ``path``: the job dirs live there, so a job cannot fill the host's
    disk or map code it wrote. Job children inherit the namespace; the host never sees the mount."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount(MS_PRIVATE)")
    opts = f"size={int(size_bytes)},nr_inodes={int(nr_inodes)},mode=0711".encode()
    _check(_libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts),
           "mount(tmpfs)")


def umount(path: str) -> None:
    _check(_libc.umount2(os.fsencode(path), MNT_DETACH), "umount2")
