"""render/: a thirtieth pass, a fresh batch of hostile programs that the earlier corpora (test_render_hostile21's 307,
test_render_hostile29's 32) lack: resource exhaustion through matplotlib itself (a tight box padded by 1000 inches,
an explicit box of 600 inches, a million artists, a path of 10^8 vertices, a file-like object that writes outside),
formats other than PNG under the PNG's name, process creation through ``preexec_fn`` / ``vfork`` / ``forkpty``, raw
system calls with odd numbers (negative, past every table, the x32 bit), huge ``MAP_NORESERVE`` mappings,
``MADV_POPULATE_WRITE``, ``mlock2``, timerfd / eventfd / signalfd storms, ``splice``, sockets of every family,
``/proc/self`` links, device nodes and FIFOs in place of the PNG, thousands of output files, a renamed process, a
SIGPROF storm, a shared mapping of a sparse job file past the job dir's size, a name forging /proc status lines,
leases, priorities and timer slack, procfs writes, and SVGs of huge text, font sizes, strokes, filter regions and
nested canvases. Each is pinned to the label
render/README.md gives it, with the host effects checked as test_render_hostile21 checks them (the same workers,
no job process left, nothing written outside the job dir, escaped job text, a clean render afterwards)."""

import json
import os
import platform
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402

TOKEN = "hostile30canary"
PLT = "import matplotlib.pyplot as plt\n"
DRAW = PLT + "plt.figure(figsize=(1, 1), dpi=50)\nplt.plot([1, 2])\n"
LIBC = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"
RAISE_ERRNO = "if r == -1:\n    e = ctypes.get_errno()\n    raise OSError(e, os.strerror(e))\n"

MATPLOTLIB = {
    # a tight box padded by 1000 inches: 100,000 px a side at the default dpi, saved by the job's own savefig
    "tight_bbox_pad_1000in": (PLT + "plt.plot([1, 2])\nplt.savefig('out.png', bbox_inches='tight', pad_inches=1000)\n",
                              "python", 5.0, {"too_large", "memory"}),
    # an explicit box of 600 inches square around a small figure
    "explicit_bbox_600in": (PLT + "from matplotlib.transforms import Bbox\nplt.plot([1, 2])\n"
                            "plt.savefig('out.png', bbox_inches=Bbox([[-300, -300], [300, 300]]))\n", "python",
                            5.0, {"too_large", "memory"}),
    # a figure of 10^5 dpi asked for a layout (a renderer of its full size) before the worker's check: Agg's allocation
    # of 640,000 x 480,000 px fails at once; the figure is past max_side, as without the layout
    "dpi_1e5_tight_layout": (PLT + "plt.figure(dpi=1e5)\nplt.plot([1, 2])\nplt.tight_layout()\n", "python", 5.0,
                             {"too_large"}),
    # a title of 10^7 characters: laid out past the 3 s budget on a loaded machine, within it (2.45 s seen) on a
    # quiet one; either way bounded, and the batch checks leave no process or stray file
    "title_1e7_chars": (DRAW + "plt.title('x' * 10 ** 7)\n", "python", 3.0, {"timeout", "ok"}),
    # a million artists: the clock ends it (or the memory limit, whichever comes first)
    "million_artists": (PLT + "fig, ax = plt.subplots()\nfor i in range(10 ** 6):\n"
                        "    ax.add_patch(plt.Rectangle((i, i), 1, 1))\n", "python", 3.0, {"timeout", "memory"}),
    # a path of 10^8 vertices: 800 MB per coordinate array, past the job's address space
    "path_1e8_vertices": (PLT + "import numpy as np\nx = np.arange(10 ** 8, dtype=float)\nplt.plot(x, x)\n",
                          "python", 10.0, {"memory"}),
    # savefig into a file-like object whose write() appends to a file of the host's temp dir
    "savefig_filelike_writes_outside": (DRAW + "class Out:\n    def write(self, b):\n"
                                        "        for d in ('/tmp', '/dev/shm', '/root'):\n"
                                        "            try:\n"
                                        f"                open(d + '/{TOKEN}', 'ab').write(b)\n"
                                        "            except OSError as e:\n                err = e\n"
                                        "        raise err\n"
                                        "plt.savefig(Out(), format='png')\n", "python", 5.0, {"forbidden"}),
    # savefig into an in-memory buffer, the bytes then written as out.png: an ordinary PNG
    "savefig_bytesio_then_write": (DRAW + "import io\nb = io.BytesIO()\nplt.savefig(b, format='png')\n"
                                   "open('out.png', 'wb').write(b.getvalue())\n", "python", 5.0, {"ok"}),
    # a 7 MiB text chunk in the figure's own PNG: far more than its pixels stored uncompressed
    "savefig_metadata_7mib": (DRAW + "plt.savefig('out.png', metadata={'Comment': 'x' * (7 << 20)})\n", "python",
                              5.0, {"too_large"}),
    # the figure's PNG written to the job's stdout (a device of the tree, not a path into it) and to fd 1
    "savefig_dev_stdout": (DRAW + "plt.savefig('/dev/stdout', format='png')\n", "python", 5.0, {"forbidden"}),
    "savefig_fd_1": (DRAW + "import os\nplt.savefig(os.fdopen(1, 'wb', closefd=False), format='png')\n", "python",
                     5.0, {"ok"}),
    # a line 10^7 points wide, a marker of 10^14 points^2, 1000 hatch strokes per cell, 10^6 contour levels
    "line_width_1e7": (DRAW + "plt.plot([0, 1], [0, 1], lw=1e7)\n", "python", 5.0, {"ok"}),
    "marker_area_1e14": (DRAW + "plt.scatter([0], [0], s=1e14)\n", "python", 5.0, {"ok"}),
    "hatch_1000_strokes": (DRAW + "plt.bar([0], [1], hatch='/' * 1000)\n", "python", 5.0, {"ok", "timeout"}),
    "contour_million_levels": (PLT + "import numpy as np\nplt.figure(figsize=(1, 1), dpi=50)\n"
                               "plt.contour(np.random.rand(50, 50), levels=10 ** 6)\n", "python", 3.0,
                               {"timeout", "memory"}),
    # raw RGBA bytes and a TIFF under the PNG's name
    "savefig_raw_named_png": (DRAW + "plt.savefig('out.png', format='raw')\n", "python", 5.0, {"invalid_image"}),
    "savefig_tiff_named_png": (DRAW + "plt.savefig('out.png', format='tiff')\n", "python", 5.0, {"invalid_image"}),
    # an image of 5000 px written by imsave, no figure: past max_side
    "imsave_5000px": ("import matplotlib.pyplot as plt, numpy as np\n"
                      "plt.imsave('out.png', np.zeros((5000, 100, 3), dtype=np.uint8))\n", "python", 5.0,
                      {"too_large"}),
    # 3,000 PNG files, no out.png, no figure: the one written last becomes out.png
    "three_thousand_pngs": ("from PIL import Image\nfor i in range(3000):\n"
                            "    Image.new('RGB', (8, 8), 'blue' if i < 2999 else 'red').save(f'p{i}.png')\n",
                            "python", 15.0, {"ok"}),
}
PROCESSES = {
    # subprocess with a preexec_fn: _posixsubprocess forks (no vfork): the fork is killed by the filter
    "subprocess_preexec_fn": ("import subprocess\nsubprocess.Popen(['true'], preexec_fn=lambda: None).wait()\n",
                              "python", 5.0, {"forbidden"}),
    # libc's vfork, called through ctypes
    "ctypes_vfork": ("import ctypes\nctypes.CDLL(None).vfork()\n", "python", 5.0, {"forbidden"}),
    # a pty and a fork in one call
    "os_forkpty": ("import os\nos.forkpty()\n", "python", 5.0, {"crash"}),
    # a process renamed (comm and its thread name) as the worker's own: nothing trusts the name; the plot is drawn
    # a pidfd of the job itself (pid 1 of its namespace) and a SIGKILL through it: init ignores it, the plot is drawn
    "pidfd_sigkill_self": (LIBC + "fd = libc.syscall(434, os.getpid(), 0)\n"
                           "r = -1 if fd < 0 else libc.syscall(424, fd, 9, None, 0)\n" + RAISE_ERRNO + DRAW, "python",
                           5.0, {"ok"}),
    # root and a negative nice: neither is the job's to take
    "setuid_root": ("import os\nos.setuid(0)\n", "python", 5.0, {"forbidden"}),
    "nice_minus_20": ("import os\nos.nice(-20)\n", "python", 5.0, {"forbidden"}),
    # threads of 512 MiB stacks each: the address-space limit ends them ("can't start new thread")
    "thread_stacks_512mib": ("import threading, time\nthreading.stack_size(512 << 20)\n"
                             "ts = [threading.Thread(target=time.sleep, args=(1,)) for _ in range(8)]\n"
                             "for t in ts:\n    t.start()\n", "python", 5.0, {"crash"}),  # as a thread bomb: no errno
    "rename_as_worker": ("import ctypes\nctypes.CDLL(None).prctl(15, b'python3', 0, 0, 0)\n"
                         "import threading\nthreading.current_thread().name = 'zygote'\n" + DRAW, "python", 5.0,
                         {"ok"}),
}
RAW_CALLS = {
    # odd system call numbers: negative, past every table, the x32 bit on getpid
    "syscall_minus_one": (LIBC + "r = libc.syscall(-1)\n" + RAISE_ERRNO, "python", 5.0, {"forbidden", "crash"}),
    "syscall_past_every_table": (LIBC + "r = libc.syscall(100000)\n" + RAISE_ERRNO, "python", 5.0,
                                 {"forbidden", "crash"}),
    "syscall_x32_getpid": (LIBC + "r = libc.syscall(0x40000000 | 39)\n" + RAISE_ERRNO, "python", 5.0,
                           {"forbidden", "crash"}),
    # 1 TiB of address space with MAP_NORESERVE: RLIMIT_AS holds it all the same (ENOMEM)
    "mmap_noreserve_1tib": (LIBC + "libc.mmap.restype = ctypes.c_void_p\n"
                            "p = libc.mmap(None, ctypes.c_size_t(1 << 40), 3, 0x22 | 0x4000, -1, 0)\n"
                            "r = -1 if p in (None, 2 ** 64 - 1) else 0\n" + RAISE_ERRNO, "python", 5.0, {"memory"}),
    # 256 MiB faulted in at once (MADV_POPULATE_WRITE), within the limit: the plot is drawn
    "madvise_populate_write": (LIBC + "import mmap\nm = mmap.mmap(-1, 256 << 20, flags=mmap.MAP_PRIVATE)\n"
                               "buf = (ctypes.c_char * (256 << 20)).from_buffer(m)\n"
                               "r = libc.madvise(ctypes.c_void_p(ctypes.addressof(buf)), ctypes.c_size_t(256 << 20), 23)\n"
                               + RAISE_ERRNO + "del buf\n" + DRAW, "python", 5.0, {"ok"}),
    # mlock2 with MLOCK_ONFAULT on 64 MiB: no lockable memory (RLIMIT_MEMLOCK)
    "mlock2_onfault": (LIBC + "import mmap\nm = mmap.mmap(-1, 64 << 20, flags=mmap.MAP_PRIVATE)\n"
                       "buf = (ctypes.c_char * (64 << 20)).from_buffer(m)\n"
                       "r = libc.syscall(325, ctypes.c_void_p(ctypes.addressof(buf)), ctypes.c_size_t(64 << 20), 1)\n"
                       + RAISE_ERRNO, "python", 5.0, {"forbidden", "memory"}),
    # tee between two pipes (the raw call: Python has no os.tee)
    "tee_pipes": (LIBC + "r1, w1 = os.pipe()\nr2, w2 = os.pipe()\nos.write(w1, b'x')\n"
                  "r = libc.syscall(276, r1, w2, ctypes.c_size_t(1), 0)\n" + RAISE_ERRNO, "python", 5.0, {"forbidden"}),
    # half a GiB to stdout in one write (the tree's /dev/null), then the plot
    "stdout_half_gib_one_write": ("import os\nos.write(1, bytes(512 << 20))\n" + DRAW, "python", 10.0, {"ok"}),
    # splice between two pipes
    "splice_pipes": ("import os\nr1, w1 = os.pipe()\nr2, w2 = os.pipe()\nos.write(w1, b'x')\n"
                     "while True:\n    os.splice(r1, w2, 1)\n", "python", 5.0, {"forbidden"}),
}
FDS = {
    # 64 timerfds firing every microsecond, read for a second: bounded by the fd limit; then a plot
    "timerfd_storm": (LIBC + "import time\nspec = (ctypes.c_long * 4)(0, 1000, 0, 1000)\nfds = []\n"
                      "while True:\n        fd = libc.timerfd_create(1, 0o4000)\n        if fd < 0:\n"
                      "            break\n        libc.timerfd_settime(fd, 0, spec, None)\n        fds.append(fd)\n"
                      "if len(fds) < 20:\n    raise RuntimeError(f'only {len(fds)} timerfds')\nend = time.monotonic() + 1\nwhile time.monotonic() < end:\n"
                      "    for fd in fds:\n        try:\n            os.read(fd, 8)\n"
                      "        except BlockingIOError:\n            pass\nfor fd in fds:\n    os.close(fd)\n" + DRAW,
                      "python", 10.0, {"ok"}),
    # eventfds until the descriptor limit: EMFILE
    "eventfd_fill": ("import os\nwhile True:\n    os.eventfd(0)\n", "python", 5.0, {"forbidden"}),
    # signalfds until the descriptor limit
    "signalfd_fill": (LIBC + "import signal\nmask = (ctypes.c_ulong * 16)(1 << (signal.SIGUSR1 - 1))\n"
                      "while True:\n    r = libc.signalfd(-1, mask, 0)\n" + "    if r == -1:\n"
                      "        e = ctypes.get_errno()\n        raise OSError(e, os.strerror(e))\n", "python", 5.0,
                      {"forbidden"}),
    # the result pipe reopened through /proc/self/fd (procfs lists, never opens)
    "proc_self_fd_3_reopen": ("open('/proc/self/fd/3', 'wb').write(b'\\x00' * 64)\n", "python", 5.0,
                              {"forbidden"}),
    # the working directory's parent reached through /proc/self/cwd
    "proc_self_cwd_dotdot": ("open('/proc/self/cwd/../etc/passwd').read()\n", "python", 5.0, {"forbidden"}),
    # the root of pid 1 (the job itself) listed through procfs
    "proc_1_root_listing": ("import os\nraise RuntimeError(os.listdir('/proc/1/root/'))\n", "python", 5.0,
                            {"forbidden"}),
    # /dev/tty: no terminal in the tree
    "dev_tty": ("open('/dev/tty', 'w').write('x')\n", "python", 5.0, {"forbidden"}),
}
SOCKETS = {
    # every address family and type: none opens (EPERM)
    "every_family": ("import socket\nopened = []\nlast = None\nfor fam in range(46):\n"
                     "    for typ in (1, 2, 3, 5):\n        try:\n            socket.socket(fam, typ).close()\n"
                     "            opened.append((fam, typ))\n        except OSError as e:\n            last = e\n"
                     "if opened:\n    raise RuntimeError(f'OPENED {opened}')\nraise last\n", "python", 5.0,
                     {"forbidden"}),
    # a socket object made around the result pipe: not a socket (ENOTSOCK) but nothing is written to it
    "socket_fromfd_result_pipe": ("import socket\ns = socket.socket(fileno=3)\ns.getsockname()\n", "python", 5.0,
                                  {"crash"}),
}
OUTPUT_TRICKS = {
    # out.png a character device node (/dev/null's numbers): mknod is refused to the job
    "out_png_char_device": ("import os, stat\nos.mknod('out.png', stat.S_IFCHR | 0o666, os.makedev(1, 3))\n",
                            "python", 5.0, {"forbidden"}),
    # out.png a FIFO made by mknod, the figure still open: no regular file to read
    "out_png_mknod_fifo": ("import os, stat\nos.mknod('out.png', stat.S_IFIFO | 0o666)\n" + DRAW, "python", 5.0,
                           {"invalid_image", "crash"}),
    # out.png written, then made unreadable to everyone: the supervisor reads it all the same (it is the job's)
    "out_png_mode_000": (DRAW + "import os\nplt.savefig('out.png')\nos.chmod('out.png', 0)\n", "python", 5.0, {"ok"}),
    # the job dir's own mount point renamed / removed
    "rename_job_dir": ("import os\nos.rename('/job', '/job2')\n", "python", 5.0, {"forbidden", "crash"}),
    # a SIGPROF every 10 microseconds of CPU while the plot is drawn
    "sigprof_storm": ("import signal\nsignal.signal(signal.SIGPROF, lambda *a: None)\n"
                      "signal.setitimer(signal.ITIMER_PROF, 1e-5, 1e-5)\n" + DRAW, "python", 15.0, {"ok"}),
    # a sparse job-dir file larger than the job dir, mapped shared and written page by page: the tmpfs runs out
    "mmap_sparse_file_past_job_dir": ("import mmap, os\nfd = os.open('sparse', os.O_CREAT | os.O_RDWR)\n"
                                      "os.ftruncate(fd, 30 << 20)\nfds = [fd]\nfor i in range(3):\n"
                                      "    f = os.open(f's{i}', os.O_CREAT | os.O_RDWR)\n"
                                      "    os.ftruncate(f, 30 << 20)\n    fds.append(f)\n"
                                      "for f in fds:\n    m = mmap.mmap(f, 30 << 20)\n"
                                      "    for off in range(0, 30 << 20, 4096):\n        m[off] = 1\n",
                                      "python", 10.0, {"too_large"}),
    # a mapped file truncated under its mapping, then touched: SIGBUS with room left on the job dir
    "mmap_truncated_under_mapping": ("import mmap, os\nfd = os.open('f', os.O_CREAT | os.O_RDWR)\n"
                                     "os.ftruncate(fd, 1 << 20)\nm = mmap.mmap(fd, 1 << 20)\nos.ftruncate(fd, 0)\n"
                                     "m[4096] = 1\n", "python", 5.0, {"crash"}),
    # a PNG in an unnamed O_TMPFILE, linked in as out.png by os.link, which links the /proc/self/fd link itself
    # (link() follows no link): across file systems, EXDEV
    "o_tmpfile_linked_as_out": (DRAW + "import os\nfd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o644)\n"
                                "plt.savefig(os.fdopen(fd, 'wb', closefd=False), format='png')\n"
                                "os.link(f'/proc/self/fd/{fd}', 'out.png')\n", "python", 5.0, {"forbidden"}),
    # the same, linked by linkat(AT_SYMLINK_FOLLOW): the job's own file, one link, checked as any out.png
    "o_tmpfile_linkat_follow": (DRAW + "import ctypes, os\nfd = os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o644)\n"
                                "plt.savefig(os.fdopen(fd, 'wb', closefd=False), format='png')\nplt.close()\n"
                                "libc = ctypes.CDLL(None, use_errno=True)\n"
                                "if libc.linkat(-100, f'/proc/self/fd/{fd}'.encode(), -100, b'out.png', 0x400):\n"
                                "    raise OSError(ctypes.get_errno(), 'linkat')\n", "python", 5.0, {"ok"}),
    # stdout never flushed: 100 MiB in a buffer of its own size, then the plot
    "stdout_never_flushed": ("import io, os, sys\nsys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, 'w'),"
                             " buffer_size=200 << 20))\nprint('x' * (100 << 20))\n" + DRAW, "python", 10.0, {"ok"}),
}
KERNEL_KNOBS = {
    # a name forging status lines ("\nThreads:\t1"): procfs escapes it, the supervisor's thread count holds; 6 spinning
    # threads for a second, then the plot
    "comm_forges_status_lines": ("import ctypes, threading, time\n"
                                 "ctypes.CDLL(None).prctl(15, b'x\\nThreads:\\t1\\n', 0, 0, 0)\n"
                                 "end = time.monotonic() + 1\ndef spin():\n    while time.monotonic() < end:\n"
                                 "        pass\nts = [threading.Thread(target=spin) for _ in range(6)]\n"
                                 "for t in ts:\n    t.start()\nfor t in ts:\n    t.join()\n" + DRAW, "python", 15.0,
                                 {"ok"}),
    # a write lease on out.png: released with the job's exit, before the supervisor opens it
    "write_lease_on_out_png": (DRAW + "import fcntl, os\nplt.savefig('out.png')\nfd = os.open('out.png', os.O_RDONLY)\n"
                               "fcntl.fcntl(fd, 1024, fcntl.F_WRLCK)\n", "python", 5.0, {"ok"}),
    # the lowest priority for every process of the job's uid, an idle I/O class, one CPU, a timer slack of 1 s
    "own_uid_priority_19": ("import os\nos.setpriority(os.PRIO_USER, 0, 19)\n" + DRAW, "python", 5.0, {"ok"}),
    "ioprio_idle_affinity_one_cpu": (LIBC + "r = libc.syscall(251, 1, 0, 3 << 13)\n" + RAISE_ERRNO
                                     + "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n" + DRAW, "python",
                                     5.0, {"ok"}),
    "timer_slack_1s": ("import ctypes, time\nctypes.CDLL(None).prctl(29, 10 ** 9, 0, 0, 0)\ntime.sleep(0.01)\n" + DRAW,
                       "python", 10.0, {"ok"}),
    # the entropy count of the host's pool raised through an ioctl on /dev/urandom: CAP_SYS_ADMIN's (EPERM)
    "urandom_add_entropy_count": ("import fcntl, struct\nfd = open('/dev/urandom', 'rb')\n"
                                  "fcntl.ioctl(fd, 0x40045201, struct.pack('i', 4096))\n", "python", 5.0,
                                  {"forbidden"}),
    # membarrier's global command (an RCU grace period per call) in a loop for a second, then the plot
    "membarrier_global_loop": (LIBC + "import time\nend = time.monotonic() + 1\nn = 0\n"
                               "while time.monotonic() < end:\n    libc.syscall(324, 1, 0, 0)\n    n += 1\n" + DRAW,
                               "python", 10.0, {"ok"}),
    # procfs files of its own that write kernel state: refused (procfs opens nothing)
    "proc_self_attr_current": ("open('/proc/self/attr/current', 'w').write('unconfined')\n", "python", 5.0,
                               {"forbidden"}),
    "proc_self_clear_refs": ("open('/proc/self/clear_refs', 'w').write('5')\n", "python", 5.0, {"forbidden"}),
}
SVGS = {
    # 190,000 characters of text (just under max_code_chars) at a font size of 10^4: the clock ends it, or on a quiet
    # machine it is drawn within the budget (2.76 s seen in an idle CI run): ok or timeout, both
    # bounded (the batch check times every program and keeps the workers)
    "svg_text_190k_chars": ('<svg xmlns="http://www.w3.org/2000/svg" width="50" height="50"><text font-size="10000">'
                          + "W" * 190_000 + "</text></svg>", "svg", 3.0, {"timeout", "ok"}),
    # a font size of 10^9 (past FreeType's 65535 px: since review 22 that text is left out and the rest drawn, it was
    # cairo's FREETYPE_ERROR, a crash) and a stroke of 10^30
    "svg_font_size_1e9": ('<svg xmlns="http://www.w3.org/2000/svg" width="50" height="50"><text font-size="1e9">W'
                          "</text></svg>", "svg", 5.0, {"ok"}),
    "svg_stroke_1e30": ('<svg xmlns="http://www.w3.org/2000/svg" width="50" height="50"><line x2="50" y2="50" '
                        'stroke="red" stroke-width="1e30"/></svg>', "svg", 5.0, {"ok"}),
    # a filter region of a million percent blurred over a small image
    "svg_filter_region_1e6_percent": ('<svg xmlns="http://www.w3.org/2000/svg" width="50" height="50"><filter id="f" '
                                      'x="-1e6%" y="-1e6%" width="2e6%" height="2e6%"><feGaussianBlur stdDeviation="5"'
                                      '/></filter><rect width="10" height="10" filter="url(#f)"/></svg>', "svg", 5.0,
                                      {"ok"}),  # cairosvg clips the region to the surface
    # a nested svg of 10^9 px inside a 50 px one
    "svg_nested_1e9_px": ('<svg xmlns="http://www.w3.org/2000/svg" width="50" height="50"><svg width="1e9" '
                          'height="1e9"><rect width="1e9" height="1e9" fill="red"/></svg></svg>', "svg", 5.0,
                          {"ok"}),  # clipped to the 50 px surface
}
GROUPS = {"matplotlib": MATPLOTLIB, "processes": PROCESSES, "raw_calls": RAW_CALLS, "fds": FDS, "sockets": SOCKETS,
          "output_tricks": OUTPUT_TRICKS, "kernel_knobs": KERNEL_KNOBS, "svg": SVGS}


def test_the_batch_is_new_and_large():
    from test_render_hostile21 import check_batch_is_new
    from test_render_hostile29 import GROUPS as GROUPS29

    check_batch_is_new(GROUPS, GROUPS29)


@pytest.mark.parametrize("group", list(GROUPS))
def test_batch_outcomes(render_pool, group):
    from test_render_hostile21 import HOST_TMP, check_batch

    if group == "raw_calls" and platform.machine() != "x86_64":
        pytest.skip("raw system call numbers are x86_64's")
    got = check_batch(render_pool, GROUPS[group],
                      stray_dirs=[(d, TOKEN) for d in (HOST_TMP, "/dev/shm", os.path.expanduser("~"))])
    print(json.dumps({n: got[n] for n in GROUPS[group]}, indent=0))


# -- the fix this pass made ------------------------------------------------------------------------------------------
def test_a_sigbus_from_a_full_job_dir_is_too_large_and_any_other_stays_a_crash(render_pool):
    # before: "crash", "job killed by SIGBUS": a job filling its job dir through a shared mapping of a sparse file
    # (the tmpfs has no block for the faulting page) was a crash, where the same fill by write() (ENOSPC) is too_large
    r = render_pool.render(RenderJob(OUTPUT_TRICKS["mmap_sparse_file_past_job_dir"][0]), timeout_s=15)
    assert r.error_kind == "too_large" and r.message == (
        f"job killed by SIGBUS writing a mapped file: its job dir is full ({render_pool.limits.disk_bytes} bytes)"), r
    # a mapping touched past its file's end, with the job dir nearly empty: the program's own fault
    r = render_pool.render(RenderJob(OUTPUT_TRICKS["mmap_truncated_under_mapping"][0]), timeout_s=15)
    assert r.error_kind == "crash" and r.message == "job killed by SIGBUS", r
    # the disk filled by write(): too_large as before, by the job's ENOSPC
    r = render_pool.render(RenderJob("open('fill', 'wb').write(b'x' * (30 << 20))\n"
                                     "open('fill2', 'wb').write(b'x' * (30 << 20))\n"
                                     "open('fill3', 'wb').write(b'x' * (30 << 20))\n"), timeout_s=15)
    assert r.error_kind == "too_large" and "No space left on device" in r.message, r


def test_disk_full_reads_the_free_space_of_the_file_system(tmp_path):
    from render import worker as wk

    assert wk._disk_full(str(tmp_path)) is (os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
                                              < wk.DISK_FULL_SLACK_BYTES)
    assert wk._disk_full(str(tmp_path / "missing")) is False


# -- bad jobs: each error names the job ------------------------------------------------------------------------------
def test_a_bad_job_is_refused_naming_its_index(render_pool):
    good = RenderJob("import matplotlib.pyplot as plt\nplt.plot([1])\n")
    # before: AttributeError: 'str' object has no attribute 'language' (no job named), and a language error
    # without the job's index
    for bad, text in (("plot()", "job 1: must be a RenderJob, got str"),
                      ({"code": "x"}, "job 1: must be a RenderJob, got dict"),
                      (RenderJob("x", language=None), "job 1: language must be one of ('python', 'svg'), got None"),
                      (RenderJob(b"x"), "job 1: code must be a str, got bytes")):
        with pytest.raises(ValueError) as e:
            render_pool.render_many([good, bad])
        assert str(e.value) == text, e.value
    # empty code and code that is not UTF-8 (lone surrogates, as a surrogateescape decoding leaves) are jobs: results
    results = render_pool.render_many([RenderJob(""), RenderJob(" \n\t"), RenderJob("\ufeff"),
                                       RenderJob("x = '\udcff'\n"), RenderJob("", "svg")], timeout_s=15)
    got = [(r.error_kind, r.message) for r in results]
    assert got[:3] == [("no_output", "job: the code is empty"), ("no_output", "job: the code is empty (only whitespace)"),
                       ("no_output", "job: the code is empty (only whitespace)")], got
    assert got[3][0] == "syntax" and "surrogates not allowed" in got[3][1], got
    assert got[4] == ("syntax", "job: SVG is not well-formed XML: no element found: line 1, column 0"), got


def test_the_cli_names_the_file_of_a_refused_job(tmp_path, capsys):
    from mmevo.cli import main

    empty = tmp_path / "empty.py"
    empty.write_bytes(b"")
    assert main(["render", str(empty), "-o", str(tmp_path / "o.png")]) == 1
    # before: "mmevo render: no_output: job: the code drew no figure and wrote no out.png" (no file named)
    assert capsys.readouterr().err == f"mmevo render: {empty}: no_output: job: the code is empty\n"
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"x = '\xff'\n")
    assert main(["render", str(bad), "-o", str(tmp_path / "o.png")]) == 2
    assert capsys.readouterr().err.startswith(f"mmevo render: error: {bad} cannot be decoded as text (")
    assert main(["render", str(tmp_path / "missing.py"), "-o", str(tmp_path / "o.png")]) == 2
    assert capsys.readouterr().err == f"mmevo render: error: {tmp_path / 'missing.py'} not found\n"
    assert not (tmp_path / "o.png").exists()


def test_an_oversized_figure_that_runs_out_of_memory_in_its_layout_is_too_large(render_pool):
    # before: memory, "job: MemoryError: std::bad_alloc": tight_layout / canvas.draw ask Agg for a canvas of the
    # figure's full size before the worker's size check could refuse it (too_large without the layout call)
    jobs = [MATPLOTLIB["dpi_1e5_tight_layout"][0],
            PLT + "fig = plt.figure(figsize=(100, 100), dpi=300)\nplt.plot([1, 2])\nfig.canvas.draw()\n",
            PLT + "plt.figure(figsize=(100, 100), dpi=300)\nplt.plot([1, 2])\n",
            # a MemoryError of the job's own with a small figure open stays memory
            DRAW + "x = bytearray(1 << 40)\n"]
    got = [(r.error_kind, r.message) for r in render_pool.render_many([RenderJob(c) for c in jobs], timeout_s=15)]
    assert got[0] == ("too_large", "job: figure of 640000x480000 px exceeds 4096 px (out of memory drawing it: "
                      "MemoryError: std::bad_alloc)"), got
    assert got[1] == ("too_large", "job: figure of 30000x30000 px exceeds 4096 px (out of memory drawing it: "
                      "MemoryError: std::bad_alloc)"), got
    assert got[2] == ("too_large", "job: figure of 30000x30000 px exceeds 4096 px"), got
    assert got[3] == ("memory", "job: MemoryError: "), got


PAGEOUT_JOB = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
fd = os.open({path!r}, os.O_RDONLY)
n = os.fstat(fd).st_size
p = libc.mmap(None, n, 1, 2, fd, 0)
for i in range(0, n, 4096):  # every page mapped, then paged out and marked cold
    ctypes.c_ubyte.from_address(p + i).value
res = [libc.madvise(p, n, advice) for advice in (21, 20, 4)]  # MADV_PAGEOUT, MADV_COLD, MADV_DONTNEED
raise RuntimeError(f"ADVICE {{res}}")
"""


def _resident_pages(path):
    """(pages of ``path`` in the host's page cache, pages of the file), by mincore of a shared read-only map (root)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        pages = (size + 4095) // 4096
        vec = (ctypes.c_ubyte * pages)()
        p = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
        assert libc.mincore(p, size, vec) == 0
        libc.munmap(p, size)
        return sum(v & 1 for v in vec), pages
    finally:
        os.close(fd)


def test_a_job_cannot_page_out_the_hosts_cache_of_a_bound_library(render_pool):
    # a job maps the largest shared library of numpy (bound into its tree, shared with the trainer's page cache) and
    # asks the kernel to page it out: the kernel takes MADV_PAGEOUT on a file mapping only from a caller who could write
    # the file, so the call succeeds and drops nothing; the host's cached pages stay
    import glob

    import numpy

    libs = glob.glob(os.path.join(os.path.dirname(numpy.__file__), "**", "*.so*"), recursive=True)
    libs += glob.glob(os.path.join(os.path.dirname(numpy.__file__) + ".libs", "*.so*"))
    path = os.path.realpath(max(libs, key=os.path.getsize))
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
    before, pages = _resident_pages(path)
    assert pages > 256 and before >= pages * 0.95, (before, pages)
    r = render_pool.render(RenderJob(PAGEOUT_JOB.format(path=path)), timeout_s=15)
    assert r.error_kind == "crash" and "ADVICE [0, 0, 0]" in r.message, r
    after, _ = _resident_pages(path)
    assert after >= before * 0.95, (before, after, pages)
