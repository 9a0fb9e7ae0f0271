"""Render worker: a supervisor, a zygote, and one fresh sandboxed child per job.

``RenderPool`` starts the **supervisor** as ``python -I -B -c "...; from render.worker import main; main()"``
with a small environment. The supervisor (root, never runs or parses job code):

1. enters a private mount namespace and builds the jobs' root tree there (``sandbox.build_root``);
2. forks the **zygote** before it has seen any job. The zygote imports matplotlib / numpy / cairosvg and
   common modules, draws a warm-up figure, and then only ever receives ``spawn`` commands carrying three
   pipe ends (never job data): it forks a child into a new pid namespace, hands the supervisor a pidfd,
   waits for the child and reports its wait status and CPU time. Every job therefore starts from the same
   clean image: no earlier job's code, strings or PNG are in its memory;
3. serves the pool's requests (length-prefixed pickles over stdin / a private copy of stdout): per job it
   mounts a fresh size-capped tmpfs as the job dir, asks the zygote for a child, reads the child's setup
   report (written and closed before the child has received its job), checks it against ``/proc/<pid>``,
   sets the rlimits with ``prlimit``, sends the job, enforces the wall-clock timeout (pidfd + SIGKILL), reads
   the job's one result frame (at most ``FRAME_MAX`` bytes of ``kind\\nmessage``: anything else is
   ``protocol``), runs the cheap checks on ``out.png`` that never inflate nor import PIL (``png_precheck``: header,
   limits, chunk walk) and unmounts the job dir; then a **validator child**, forked and sandboxed as a job child on
   a fresh job dir, runs the rest on a copy of the bytes (``validate_png``: IDAT stream and filter bytes, compressed
   metadata, CRCs, PIL's chunk handlers on a one-pixel copy; never a decode of the pixels) and returns one verdict
   frame, which counts only from a clean exit in time (``_validator_verdict``).

The **job child** (pid 1 of its own pid namespace) sandboxes itself before it reads the job: ``setsid``, new
mount / net / IPC / UTS / cgroup namespaces, ``pivot_root`` into the read-only tree, a fresh procfs, its
worker's own uid/gid (``job_uid``), not dumpable, ``PR_SET_PDEATHSIG``, ``no_new_privs``, Landlock, seccomp.
Its only channels afterwards are fd 3 (the result frame, whose contents are the job's word) and the job dir.

Image choice for python jobs: if the code writes ``out.png`` into the job dir (its starting working
directory), that file wins; otherwise the current matplotlib figure (``plt.gcf()``, when any figure exists) is
saved there at the figure's own dpi, whatever the working directory is by then. With no figure open, or an empty
one, the code's last file under the job dir (regular files only, no link followed; last by mtime, then the order
its writes were audited, then path) stands in, in this order of kinds: a ``.png`` (renamed to ``out.png``), else a
JPEG / GIF / WebP / BMP / TIFF (``_raster_to_png``), else an ``.svg`` (``_svg_file_to_png``); all of it in the job,
and the supervisor checks ``out.png`` as any (render/README.md). SVG jobs are screened (``render.svg``) inside the
sandbox, then rasterised.
"""

from __future__ import annotations

import colorsys
import dataclasses
import errno
import itertools
import json
import math
import os
import pickle
import re
import select
import signal
import socket
import stat
import struct
import sys
import time
import zlib

from . import job_account
from . import sandbox as sb
from .css_calc import calc_terms, is_calc
from .svg import check_svg, svg_bytes
from .types import LANGUAGES, RenderLimits

JOB_UID = JOB_GID = 65534  # default; the pool gives each worker slot its own (``pool.job_uid_candidates``)
OUT_NAME = "out.png"
JOB_DIR = "/job"  # the job dir inside the job's root tree
SETUP_FAILED_EXIT = 121
FRAME_MAX = 16384  # bytes of the job's result frame
MESSAGE_MAX = 1000  # characters of a job's message that are kept
JOB_MESSAGE_PREFIX = "job: "  # marks text that comes from the job (untrusted once job code ran)
JOB_SOURCE_NAME = "<render>"  # the file name job code is compiled under (its frames in tracebacks)
JOB_SCRIPT_NAME = "main.py"  # the job's ``__file__``, in its job dir (no such file: the code is not written there)
JOB_USER = job_account.JOB_USER  # USER / LOGNAME, and the name pwd / grp give the job's ids (job_account.install)
JOB_MALLOC_ARENAS = 2  # glibc malloc arenas a job's threads share (``sb.set_malloc_arenas``)
JOB_RNG_SEED = 0  # every job's random and numpy.random start here: one program, one image, on any worker
SETUP_TIMEOUT_S = 10.0
FONT_PROBE_TIMEOUT_S = 30.0  # the zygote's font probe (``_fonts_missing_in_tree``): a stat per font of the host's list
# Page tables are kernel memory outside RLIMIT_AS: one 4 KiB page mapped per 1 GiB of address space (mmap hints, 64969
# mappings) held 508 MiB of page tables for 254 MiB of address space. Used densely, an address space needs 1/512 of its
# size in page tables (one 4 KiB table maps 2 MiB); a child's may reach 1/64 of its RLIMIT_AS (8 times that), checked
# every PAGE_TABLE_POLL_S while it runs, else it is killed (``memory``). This bounds how long a job holds them, not their
# peak: faulting its mappings from threads in C (readv into 1024 sparse pages a call) a job got to 66-105 MiB within
# one poll on a 2-core VM; only a memory cgroup, which page tables are charged to, bounds the peak.
PAGE_TABLE_SHARE = 64
PAGE_TABLE_POLL_S = 0.05
# CPU share: the kernel weighs every runnable thread alike (CFS), unless the pool runs where autogroup applies (the root
# cpu cgroup), which weighs each session. In a container's cgroup, a systemd service's, or with autogroup off, a job
# spinning 14 threads made a plot on another worker take 3.4 s instead of 0.45 s, its wall-clock timeout counting the
# wait. So the supervisor raises the nice level of a job's whole thread group (its process group: the job is its
# own session) as it sees the group's thread count grow, until the threads together weigh no more than one thread
# at nice 0; the job cannot lower it again (RLIMIT_NICE 0). Past 68 threads, nice 19 is as far as it goes.
NICE_WEIGHTS = (1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15)
# The output validator: a child forked from the zygote after the job has ended, with a job's layers and limits and a
# fresh job dir, that inflates and parses (PIL) a copy of the output so that the root supervisor never does. Its verdict
# frame (``ok\n`` or ``invalid_image\nmessage``, at most FRAME_MAX bytes) counts only from a clean exit in time.
VALIDATE_OP = "validate_png"
VALIDATOR_TIMEOUT_S = 5.0  # wall clock; the costliest PNGs known take ~0.3 s of CPU
# The OOM killer's preference (``/proc/<pid>/oom_score_adj``, set by the supervisor before the child has its job): a
# job first, then a validator, before any worker process. Under a memory cgroup limit filled by a job's tmpfs files,
# the killer chose by resident size alone and took a zygote (91 MiB, where a forked job child shows ~64 MiB): the
# neighbour's job became a `crash` ("zygote exited") and its worker was replaced, while the job that filled the
# cgroup went on.
JOB_OOM_SCORE_ADJ = 1000
VALIDATOR_OOM_SCORE_ADJ = 500
VERDICT_KINDS = ("invalid_image", "too_large")
VERDICT_MESSAGE_MAX = 2048  # characters of a verdict's message that are kept
# test hooks (``_skip_layers``): make the validator fail in one of these ways
VALIDATOR_FAULTS = ("validator_crash", "validator_hang", "validator_flood", "validator_exit1")
STATUS_FD, CTL_FD, JOB_FD = 3, 4, 5
_PNG_SIG = b"\x89PNG\r\n\x1a\n"
_PNG_CRITICAL = (b"IHDR", b"PLTE", b"IDAT", b"IEND")
_APNG_CHUNKS = (b"acTL", b"fcTL", b"fdAT")  # later frames are never decoded here: refused
# matplotlib (PIL) writes 64 KiB IDATs, cairo (libpng) 8 KiB ones: 1024 chunks for 8 MiB. The bound grows
# with max_png_bytes (one chunk per 2 KiB) so that normal output stays far below it.
MAX_PNG_CHUNKS = 4096
# The most bytes of EXIF a returned PNG may carry (an eXIf chunk, or a "Raw profile type exif" text chunk's hex), as
# much as a JPEG's APP1 segment holds (65,533 bytes): every block a camera or editor writes fits, and matplotlib and
# cairo write none. The trainer's to_rgb parses the block in its own process (getexif) and, for an orientation,
# decodes every entry (exif_transpose rewrites it): 7 MiB of one RATIONAL entry, written in 0.2 s by a job, took the
# trainer 3 s of CPU and ~175 MiB per image; 64 KiB of it takes ~20 ms.
MAX_EXIF_BYTES = 1 << 16
# The most bytes a PNG may have beyond its pixels stored uncompressed (its scanlines, plus 1/64 for deflate's stored
# blocks and chunk headers): metadata, EXIF included. A returned PNG is saved with the run's records (MM-Zero's
# images/), and a job padded a 64 px square to the 8 MiB max_png_bytes (one private chunk, or 100,000 empty deflate
# blocks in its IDAT) at no cost: every attempt of a step then wrote 8 MiB to the run's disk. matplotlib and cairo
# write a few hundred bytes of metadata.
PNG_SLACK_BYTES = 256 << 10
# per job child, recorded and checked by the supervisor
LAYERS = ("setsid", "pidns", "mntns", "minimal_root", "procfs", "netns", "ipcns", "utsns", "cgroupns",
          "uid_drop", "no_new_privs", "landlock", "seccomp", "rlimits")
WORKER_LAYERS = ("job_tmpfs",)  # set up by the supervisor
# a job may report
JOB_KINDS = ("ok", "memory", "forbidden", "crash", "syntax", "no_output", "too_large", "invalid_size")
_FORBIDDEN_ERRNOS = {errno.EPERM, errno.EACCES, errno.EROFS, errno.ENETUNREACH, errno.ENETDOWN,
                     errno.EXDEV, errno.ELOOP}
_NS = (("mnt", "mntns"), ("net", "netns"), ("ipc", "ipcns"), ("uts", "utsns"), ("cgroup", "cgroupns"),
       ("pid", "pidns"))

_PREIMPORT = (
    "math", "random", "json", "collections", "itertools", "functools", "re", "string", "datetime",
    "decimal", "fractions", "statistics", "textwrap", "colorsys", "io", "base64", "struct", "copy",
    "dataclasses", "typing", "enum", "operator", "heapq", "bisect", "calendar", "cmath", "numbers",
    "numpy", "numpy.random", "numpy.linalg", "numpy.fft", "numpy.ma",
    "matplotlib", "matplotlib.pyplot", "matplotlib.patches", "matplotlib.colors", "matplotlib.cm",
    "matplotlib.ticker", "matplotlib.gridspec", "matplotlib.lines", "matplotlib.path",
    "matplotlib.transforms", "matplotlib.collections", "matplotlib.dates", "matplotlib.text",
    "matplotlib.font_manager", "matplotlib.patheffects", "matplotlib.table", "matplotlib.markers",
    "matplotlib.image", "matplotlib.backends.backend_agg", "matplotlib.colorbar", "matplotlib.legend",
    "matplotlib.axes", "matplotlib.figure", "matplotlib.projections.polar", "matplotlib.tri",
    "matplotlib.sankey", "matplotlib.mathtext", "mpl_toolkits.mplot3d", "mpl_toolkits.axes_grid1",
    "PIL.Image", "PIL.PngImagePlugin", "cairosvg", "threading", "time", "warnings", "traceback", "pathlib",
    "csv", "hashlib", "zlib", "secrets", "inspect", "encodings.idna", "encodings.ascii", "encodings.latin_1",
    "encodings.utf_16", "encodings.unicode_escape", "socket", "xml.etree.ElementTree", "xml.parsers.expat",
    "tempfile", "fcntl",
)



# --- framing (pool <-> supervisor; both trusted) ---------------------------------------------------------
def _read_exact(fd: int, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def send_msg(fd: int, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    data = struct.pack("<Q", len(data)) + data
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class BadMessage(ValueError):
    """A whole frame arrived but does not unpickle: the stream is still in step."""


def recv_msg(fd: int):
    head = _read_exact(fd, 8)
    if head is None:
        return None
    body = _read_exact(fd, struct.unpack("<Q", head)[0])
    if body is None:
        return None
    try:
        return pickle.loads(body)
    except Exception as e:  # noqa: BLE001 - e.g. a class of the caller's __main__ that this process lacks
        raise BadMessage(f"{type(e).__name__}: {e}") from e


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_to_eof(fd: int, limit: int) -> bytes:
    buf = bytearray()
    while len(buf) <= limit:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


# --- warm-up (zygote) ------------------------------------------------------------------------------------
def warm_up() -> None:
    import importlib
    import io

    for name in _PREIMPORT:
        try:
            importlib.import_module(name)
        except Exception:  # optional module missing: jobs simply cannot use it
            pass
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 3, figsize=(3, 1))
    axes[0].plot([0, 1], [0, 1], label="a")
    axes[0].bar([0, 1], [1, 2])
    axes[0].scatter([0], [1])
    axes[0].legend()
    axes[0].set_title(r"$\alpha^2 \sum x$")
    axes[1].imshow(np.arange(4).reshape(2, 2))
    axes[2].pie([1, 2])
    fig.text(0.5, 0.5, "warm", fontweight="bold", fontstyle="italic")
    fig.tight_layout()
    fig.savefig(io.BytesIO(), format="png")
    fig3d = plt.figure(figsize=(1, 1))
    fig3d.add_subplot(projection="3d").plot([0, 1], [0, 1], [0, 1])
    fig3d.add_subplot(projection="polar")
    fig3d.savefig(io.BytesIO(), format="png")
    plt.close("all")
    try:
        import cairosvg

        cairosvg.svg2png(bytestring=b'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4">'
                         b'<rect width="4" height="4" fill="red"/><text y="3">a</text></svg>', unsafe=False)
    except Exception:
        pass
    import gc

    gc.collect()
    if hasattr(gc, "freeze"):
        gc.freeze()


def _vm_size(pid: int | str = "self") -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _read_paths(mpl_data: str) -> list[str]:
    """Landlock read-only paths for the fallback without a root tree (host paths)."""
    paths = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/etc/fonts", "/etc/ld.so.cache", "/etc/localtime",
             "/etc/matplotlibrc", "/dev/null", "/dev/urandom", "/dev/zero", sys.prefix, sys.base_prefix,
             sys.exec_prefix, mpl_data]
    out = []
    for p in paths:
        if p and p not in out and os.path.exists(p):
            out.append(p)
    return out


def _tree_sources() -> tuple[list[str], list[str], list[str]]:
    """What the jobs' root tree shows: the interpreter's stdlib and site-packages (never the repository),
    shared libraries, fonts and a few /etc files; the device nodes; and the directories to show empty."""
    import importlib.util
    import sysconfig

    paths = sysconfig.get_paths()
    src = [paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    src += [p for p in sys.path if p.endswith("lib-dynload")]
    for name in ("matplotlib", "mpl_toolkits", "numpy", "PIL", "cairosvg", "cairocffi", "cffi", "tinycss2",
                 "cssselect2", "defusedxml", "webencodings", "fontTools", "kiwisolver", "pyparsing", "cycler",
                 "dateutil", "packaging", "contourpy"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None:
            src += list(spec.submodule_search_locations or [os.path.dirname(spec.origin or "")])
    src += ["/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32", "/usr/share/fonts",
            "/usr/local/share/fonts", "/usr/share/fontconfig", "/usr/share/zoneinfo", "/etc/fonts",
            "/etc/ld.so.cache", "/etc/localtime", "/etc/matplotlibrc", "/var/cache/fontconfig"]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = []
    for p in src:
        if not p or not os.path.isabs(p) or p in out:
            continue
        if os.path.realpath(p) == os.path.realpath(repo):
            continue  # the repository's own source tree is never shown to jobs
        out.append(os.path.normpath(p))
    out.sort(key=len)
    # A venv's base interpreter keeps its own site-packages inside the bound stdlib: unrelated packages the
    # jobs never import. Shown empty, unless the jobs' interpreter imports from it or a source lies in it.
    used = [os.path.realpath(p) for p in sys.path + out if p]
    masked = []
    for lib in dict.fromkeys(paths.get(k) for k in ("stdlib", "platstdlib")):
        for name in ("site-packages", "dist-packages"):
            d = os.path.join(lib or "", name)
            real = os.path.realpath(d)
            if lib and os.path.isdir(d) and not any(u == real or u.startswith(real + "/") for u in used):
                masked.append(d)
    return out, ["/dev/null", "/dev/zero", "/dev/random", "/dev/urandom"], masked


# --- the job child -----------------------------------------------------------------------------------------
_JOBDIR = JOB_DIR


# sub-exceptions of an exception group that classification and the message look at (a TaskGroup's failures)
GROUP_MEMBERS_READ = 4


def _group_members(e: BaseException) -> list[BaseException]:
    """The first sub-exceptions of an exception group (errors the code gathered, what ``except*`` re-raises), else
    none: a traceback shows them, as it shows a cause."""
    members = e.exceptions if isinstance(e, BaseExceptionGroup) else ()
    # only the first are read: a group class of the job's may make ``exceptions`` an endless iterator
    return [x for x in itertools.islice(members, GROUP_MEMBERS_READ) if isinstance(x, BaseException)]


def _exc_text(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    members = _group_members(e)
    if members:  # "ExceptionGroup: g (2 sub-exceptions)" named none of the failures
        text += " [" + "; ".join(f"{type(x).__name__}: {x}"[:500] for x in members) + "]"
    return text[:2000]


def _outside_jobdir(filename) -> bool:
    if not isinstance(filename, (str, bytes)):
        return False
    try:
        p = os.path.realpath(os.fsdecode(filename))
    except (OSError, ValueError):
        return False
    return not (p == _JOBDIR or p.startswith(_JOBDIR.rstrip("/") + "/"))


def _classify_exception(e: BaseException) -> str:
    """The kind of the first exception that is more than a crash, from ``e`` along its chain as a traceback
    shows it (``__cause__``, else an unsuppressed ``__context__``), the exceptions among its first args and the
    first sub-exceptions of an exception group: network libraries (urllib, requests, httpx) wrap the sandbox's
    refusal in their own errors, and a group its members' (a refused read among gathered errors was a ``crash``)."""
    todo, seen = [e], set()
    while todo and len(seen) < 32:
        e = todo.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        kind = _classify_one(e)
        if kind != "crash":
            return kind
        chained = e.__cause__ if e.__cause__ is not None or e.__suppress_context__ else e.__context__
        todo += [x for x in (chained, *e.args[:4]) if isinstance(x, BaseException)] + _group_members(e)
    return "crash"


def _raised_by_job_code(e: BaseException) -> bool:
    """True when ``e`` was raised in the job's own source (its innermost frame), not inside a library it called."""
    tb = e.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename == JOB_SOURCE_NAME


_MPL_FIGURE_SIZE_REFUSAL = "figure size must be positive finite"


# PIL's refusal of the 0-pixel canvas Agg sized for a figure under one pixel at the dpi it was saved at
_EMPTY_IMAGE_REFUSAL = "cannot write empty image"


def _canvas_sized_at_failure(e: BaseException) -> tuple | None:
    """``(figure, dpi)`` where ``e`` came through an Agg canvas sizing its renderer (``get_renderer``), or writing
    the empty image it sized for a figure under one pixel (``_print_pil``, PIL's "cannot write empty image"): the
    canvas's figure and the dpi it was drawn at then, that of a ``savefig(dpi=...)`` of that figure (``print_figure``
    sets it on the figure only while it saves, so the figure's dpi afterwards says nothing of it: ``savefig(dpi=nan)``
    was a ``crash``), else the figure's. None where the traceback never passed there."""
    import numbers

    figure, saves = None, []  # saves: (figure, dpi) of each print_figure on the way, outermost first
    tb = e.__traceback__
    while tb is not None:
        frame, tb = tb.tb_frame, tb.tb_next
        name, module = frame.f_code.co_name, str(frame.f_globals.get("__name__", ""))
        if name == "print_figure" and module == "matplotlib.backend_bases":
            # its dpi after 'figure' / None were resolved to a number
            saves.append((getattr(frame.f_locals.get("self"), "figure", None), frame.f_locals.get("dpi")))
        sizing = name == "get_renderer" or name == "_print_pil" and str(e) == _EMPTY_IMAGE_REFUSAL
        if sizing and module.startswith("matplotlib.backends."):
            figure = getattr(frame.f_locals.get("self"), "figure", None)
    if figure is None or not hasattr(figure, "get_size_inches"):
        return None
    # only a save of this figure sets its dpi: another figure drawn while one is saved (a draw_event callback
    # drawing a second figure) is sized at its own
    save_dpi = next((dpi for saved, dpi in reversed(saves) if saved is figure), None)
    dpi = save_dpi if isinstance(save_dpi, numbers.Real) and not isinstance(save_dpi, bool) else figure.dpi
    return figure, float(dpi)


def _canvas_oversized_at_failure(e: BaseException, limits: RenderLimits) -> str | None:
    """Why the Agg canvas that ``e`` came through while sizing its renderer (``get_renderer``: the figure's box at the
    dpi of the save under way, a tight box included) is past ``max_side`` pixels a side, or None: within the limit, or
    the traceback never passed there."""
    import numbers

    tb, size = e.__traceback__, None
    while tb is not None:
        frame, tb = tb.tb_frame, tb.tb_next
        module = str(frame.f_globals.get("__name__", ""))
        if frame.f_code.co_name == "get_renderer" and module.startswith("matplotlib.backends."):
            w, h = frame.f_locals.get("w"), frame.f_locals.get("h")
            if all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in (w, h)):
                size = float(w), float(h)
    if size is None or not (size[0] > limits.max_side or size[1] > limits.max_side):
        return None
    return f"image of {_px(size[0])}x{_px(size[1])} px exceeds {limits.max_side} px"


# where matplotlib reads a figure's size or dpi as a float, and the names it holds the given values under
_FIGURE_SIZE_READERS = {("matplotlib.figure", "__init__"): ("figsize", "dpi"),
                        ("matplotlib.figure", "_set_dpi"): ("dpi",),
                        ("matplotlib.figure", "set_size_inches"): ("w", "h", "size")}
_FIGURE_SIZE_RCPARAMS = ("figure.dpi", "figure.figsize", "savefig.dpi")


def _int_past_float(value) -> int | None:
    """``value``, or the first of its items (a figsize), where it is an int no float holds (``10**400``), else None."""
    items = value if isinstance(value, (tuple, list)) or type(value).__name__ == "ndarray" else (value,)
    for v in list(items)[:4] if len(items) <= 4 else ():
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > sys.float_info.max:
            return v
    return None


def _figure_size_past_float(e: BaseException) -> str | None:
    """Why a figure has no size, where ``e`` came from matplotlib reading a figsize / dpi given as an int too large
    for a float (``savefig(dpi=10**400)``, ``set_dpi``, ``figsize=(10**400, 1)``, ``set_size_inches``, the rcParams
    ``figure.dpi`` / ``figure.figsize`` / ``savefig.dpi``): an ``OverflowError`` or numpy's ``TypeError`` there was a
    ``crash`` where ``dpi=inf`` is ``invalid_size``; no finite size is drawable either. None elsewhere."""
    tb = e.__traceback__
    while tb is not None:
        frame, tb = tb.tb_frame, tb.tb_next
        where = (str(frame.f_globals.get("__name__", "")), frame.f_code.co_name)
        names = _FIGURE_SIZE_READERS.get(where, ())
        if where == ("matplotlib", "__setitem__") and frame.f_locals.get("key") in _FIGURE_SIZE_RCPARAMS:
            names = ("val",)
        for name in names:
            huge = _int_past_float(frame.f_locals.get(name))
            if huge is not None:
                what = frame.f_locals["key"] if name == "val" else "dpi" if name == "dpi" else "size"
                return (f"figure {what} is {'a negative' if huge < 0 else 'an'} integer of {huge.bit_length()} bits, past the "
                        "largest float: no finite number of pixels")
    return None


def _classify_one(e: BaseException) -> str:
    if isinstance(e, MemoryError):
        return "memory"
    bomb = getattr(sys.modules.get("PIL.Image"), "DecompressionBombError", None)  # PIL's pixel-count refusal
    if bomb is not None and isinstance(e, bomb):
        return "too_large"
    if isinstance(e, (PermissionError, socket.gaierror, socket.herror)):  # no name service: no network
        return "forbidden"
    if isinstance(e, FileNotFoundError) and (_outside_jobdir(e.filename) or _outside_jobdir(e.filename2)):
        return "forbidden"  # a path outside the job dir: it does not exist in the sandbox
    if isinstance(e, OSError):
        if e.errno in _FORBIDDEN_ERRNOS:
            return "forbidden"
        if e.errno == errno.EFBIG or e.errno == errno.ENOSPC:
            return "too_large"
        if e.errno == errno.ENOMEM:
            return "memory"
        if e.errno == errno.EMFILE:
            return "forbidden"
    if type(e).__module__.startswith("defusedxml."):  # an entity / DTD / external reference refused by the parser
        return "forbidden"
    if isinstance(e, OverflowError) or _raised_by_job_code(e):
        return "crash"  # the message rules below read library refusals, not the job's own words or arithmetic
    text = str(e)
    if isinstance(e, ValueError) and text.startswith(_MPL_FIGURE_SIZE_REFUSAL):
        return "invalid_size"  # matplotlib's own check of figsize / set_size_inches: NaN, infinite, zero, negative
    if "NO_MEMORY" in text or "out of memory" in text.lower():
        return "memory"
    if "INVALID_SIZE" in text or "too large" in text.lower():
        return "too_large"
    return "crash"


def _describe(e: BaseException) -> tuple[str, str]:
    """(kind, text) of the job's exception. Its own code (``__str__``, a metaclass ``__name__``, ...) may raise
    or exhaust memory here: then it is still reported, as such, instead of ending the child without a report."""
    try:
        return _classify_exception(e), _exc_text(e)
    except BaseException as inner:  # noqa: BLE001
        return ("memory" if isinstance(inner, MemoryError) else "crash"), "exception that cannot be described"


def _place_fds(fds) -> None:
    """0/1/2 -> /dev/null, ``fds`` -> 3, 4, 5; every other descriptor closed."""
    import fcntl

    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64) for fd in fds]
    devnull = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
    dn = fcntl.fcntl(devnull, fcntl.F_DUPFD_CLOEXEC, 64)
    for target in (0, 1, 2):
        os.dup2(dn, target)
    for target, fd in zip((STATUS_FD, CTL_FD, JOB_FD), high):
        os.dup2(fd, target, inheritable=False)
    os.closerange(JOB_FD + 1, 1 << 20)


def _stdio_to_tree_null() -> None:
    """0/1/2 onto the tree's own ``/dev/null`` (in the root tree, after ``pivot_root``). ``_place_fds`` opened the
    host's, before the tree existed: a lock is the inode's, and a job's ``flock(0)`` held one on the host's node."""
    null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
    for target in (0, 1, 2):
        os.dup2(null, target)
    os.close(null)


def _read_n(fd: int, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf


def _child_sandbox(env: dict, pidns_err: str | None) -> tuple[dict, list[str], str]:
    """Apply every layer (as root until ``uid_drop``); returns (layers, errors, job dir)."""
    # the limits message (length-prefixed, from the supervisor, before the job)
    rl = json.loads(_read_n(JOB_FD, struct.unpack("<I", _read_n(JOB_FD, 4))[0]))
    layers: dict = {}
    errors: list[str] = []
    skip = env.get("skip", ())

    def step(name, fn, *, needs=()):
        if name in skip:  # test hook: simulate a kernel without this layer
            layers[name] = False
            errors.append(f"{name}: skipped on request")
            return
        missing = [n for n in needs if not layers.get(n)]
        if missing:
            layers[name] = False
            errors.append(f"{name}: needs {', '.join(missing)}")
            return
        try:
            r = fn()
            layers[name] = True if r is None else r
        except Exception as e:  # noqa: BLE001 - every failure is reported
            layers[name] = False
            errors.append(f"{name}: {e}")

    if pidns_err is None:
        layers["pidns"] = os.getpid() == 1
        if not layers["pidns"]:
            errors.append("pidns: the job is not pid 1 of a new pid namespace")
    else:
        layers["pidns"] = False
        errors.append(f"pidns: {pidns_err}")
    step("setsid", os.setsid)
    step("rlimits", lambda: sb.set_rlimits(address_space=_vm_size() + int(rl["memory_bytes"]),
                                           cpu_s=int(rl["cpu_s"]), fsize=int(rl["fsize"]),
                                           nofile=int(rl["nofile"]), nproc=int(rl["nproc"])))
    step("mntns", lambda: sb.unshare(sb.CLONE_NEWNS))
    step("netns", lambda: sb.unshare(sb.CLONE_NEWNET))
    step("ipcns", lambda: sb.unshare(sb.CLONE_NEWIPC))
    step("utsns", lambda: (sb.unshare(sb.CLONE_NEWUTS), sb.sethostname(b"render"))[-1])
    step("cgroupns", lambda: sb.unshare(sb.CLONE_NEWCGROUP))
    if env.get("root"):
        step("minimal_root", lambda: (sb.enter_root(env["root"]), _stdio_to_tree_null())[0], needs=("mntns",))
    else:
        layers["minimal_root"] = False
        errors.append("minimal_root: no root tree (see the worker's errors)")
    step("procfs", lambda: sb.mount_proc("/proc"), needs=("minimal_root", "pidns"))
    jobdir = JOB_DIR if layers.get("minimal_root") else env["jobdir_host"]
    os.chdir(jobdir)
    step("uid_drop", lambda: sb.drop_privileges(env["uid"], env["uid"]))
    try:
        sb.set_pdeathsig(signal.SIGKILL)  # cleared by the uid change, so set it afterwards
        sb.set_dumpable(False)
    except Exception:  # noqa: BLE001 - both are belt and braces; the supervisor checks what matters
        pass
    try:
        sb.set_thp_disabled()
    except Exception:  # noqa: BLE001 - a kernel without the option: vmsplice / splice are denied anyway
        pass
    # RLIMIT_AS counts every arena's 64 MiB reserve: with glibc's 8 per core, ~12 threads (2 cores) or ~14 (16 cores)
    # that allocate started before "can't start new thread", so ThreadPoolExecutor()'s default pool of
    # min(32, cores + 4) threads was a crash on a 16-core host. With a few arenas, stacks (8 MiB each) bound them.
    sb.set_malloc_arenas(JOB_MALLOC_ARENAS)
    step("no_new_privs", sb.no_new_privs)
    # writable, as anywhere: `open(os.devnull, "w")` is a common idiom. /dev/zero is only read: opened read-write, a
    # shared mapping of it is a shmem object whose pages stay when most of it is unmapped, outside RLIMIT_AS
    sinks = ("/dev/null",)
    if layers.get("minimal_root"):
        # the whole tree but its procfs, where only directories may be listed (``sb.tree_read_paths``)
        step("landlock", lambda: sb.apply_landlock(env["tree_read"], [JOB_DIR], sinks, list_paths=["/proc"]))
    else:
        step("landlock", lambda: sb.apply_landlock(env["read_paths"], [jobdir], sinks))
    step("seccomp", sb.apply_seccomp)
    return layers, errors, jobdir


def _matplotlib_dirs_to(jobdir: str) -> None:
    """Point matplotlib's config / cache directories at the job's directory, as MPLCONFIGDIR says. The zygote
    imported matplotlib with the worker's MPLCONFIGDIR (a dir of the pool's), and matplotlib keeps the directories it
    found then (its getters memoise, TexManager's cache path is a class attribute): left so, a job would see the
    pool's dir in them, and a usetex figure would fail writing there as ``forbidden`` instead of failing for want of LaTeX."""
    import matplotlib

    def job_dir() -> str:
        return jobdir

    matplotlib.get_configdir = matplotlib.get_cachedir = job_dir
    texmanager = sys.modules.get("matplotlib.texmanager")
    if texmanager is not None and hasattr(texmanager.TexManager, "_cache_dir"):
        from pathlib import Path

        texmanager.TexManager._cache_dir = Path(jobdir, "tex.cache")


def _fonts_missing_in_tree(root: str, fnames: list[str]) -> list[str]:
    """Which of ``fnames`` (host paths) the jobs' tree at ``root`` does not show as files, as a job would find them:
    a child of the caller enters the tree (its own mount namespace, as a job child does) and looks. A probe that
    fails, or gives no answer within ``FONT_PROBE_TIMEOUT_S`` (then it is killed), finds none missing."""
    r, w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the probe child
        try:
            os.close(r)
            sb.set_pdeathsig(signal.SIGKILL)  # a zygote gone (its supervisor's end) takes a stuck probe along
            sb.unshare(sb.CLONE_NEWNS)
            sb.enter_root(root)
            _write_all(w, json.dumps([f for f in fnames if not os.path.isfile(f)]).encode())
        finally:
            os._exit(0)
    os.close(w)
    raw = None
    try:
        raw = _read_until(r, 64 << 20, time.monotonic() + FONT_PROBE_TIMEOUT_S)
    finally:
        os.close(r)
        if raw is None:  # stuck (a stat on a hung mount): the zygote, and the pool's start, would wait forever
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if raw is None:
        return []
    try:
        missing = json.loads(raw)
    except ValueError:  # the probe failed: keep the list as it is
        return []
    return missing if isinstance(missing, list) else []


def _read_until(fd: int, limit: int, deadline: float) -> bytes | None:
    """What ``fd`` gives up to EOF (at most ``limit`` + 1 MiB bytes), or None where EOF did not come by ``deadline``
    (``time.monotonic``)."""
    buf = bytearray()
    while len(buf) <= limit:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def _fonts_in_tree(root: str) -> int:
    """Drop from matplotlib's font list the fonts whose files the jobs' tree does not show, and return how many (in the
    zygote, before its warm-up, so every job inherits the list). The list is the host's (the caller's cache, or the
    worker's scan through fc-list), and the tree shows only some font directories (not a home's ``~/.fonts``, TeX
    Live's, /opt): matplotlib's ``findfont``, asked for such a family, finds its file missing and rebuilds the list by
    running ``fc-list``, whose fork the filter kills, so a plot naming an installed font was ``forbidden``. Without the
    entry it falls back to the default font, as on a host without it."""
    import matplotlib.font_manager as fm

    manager = getattr(fm, "fontManager", None)
    lists = {a: getattr(manager, a, None) for a in ("ttflist", "afmlist")}
    lists = {a: fonts for a, fonts in lists.items() if isinstance(fonts, list)}
    fnames = sorted({str(getattr(f, "fname", "")) for fonts in lists.values() for f in fonts})
    missing = set(_fonts_missing_in_tree(root, fnames)) if fnames else set()
    if not missing:
        return 0
    for attr, fonts in lists.items():
        setattr(manager, attr, [f for f in fonts if str(getattr(f, "fname", "")) not in missing])
    clear = getattr(getattr(manager, "_findfont_cached", None), "cache_clear", None)
    if clear is not None:
        clear()
    return sum(len(fonts) for fonts in lists.values()) - sum(len(getattr(manager, a)) for a in lists)


def _child_main(fds, env: dict, pidns_err: str | None) -> None:
    global _JOBDIR
    # bound before job code runs, which may replace ``os._exit`` / ``posix._exit`` (a no-op, one that raises): this
    # process then ran on past its report into the zygote's loop, a blocked system call (``forbidden``) or a non-zero
    # exit (``crash``) in place of its own result, and the interpreter's shutdown ran its atexit hooks
    exit_now = os._exit
    _place_fds(fds)
    os.environ.clear()
    layers, errors, jobdir = _child_sandbox(env, pidns_err)
    _JOBDIR = jobdir
    os.environ.update({"PATH": "/usr/bin:/bin", "HOME": jobdir, "TMPDIR": jobdir, "MPLCONFIGDIR": jobdir,
                       "LANG": "C.UTF-8", "MPLBACKEND": "Agg", "USER": JOB_USER, "LOGNAME": JOB_USER})
    # the tree has no account files (reading /etc/passwd stays forbidden): pwd / grp answer for the job's ids here
    job_account.install(int(env["uid"]), int(env["uid"]), jobdir)
    import tempfile

    tempfile.tempdir = jobdir
    _matplotlib_dirs_to(jobdir)
    sys.argv = ["render"]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:] = [p for p in sys.path if p and os.path.abspath(p) != repo]
    # The setup report goes out and its pipe is closed before this process has even received the job.
    try:
        _write_all(CTL_FD, json.dumps({"layers": layers, "errors": errors}).encode())
    finally:
        os.close(CTL_FD)
    raw = _read_to_eof(JOB_FD, 64 << 20)
    os.close(JOB_FD)
    if not raw:  # the supervisor refused to run a job in this sandbox
        os._exit(0)
    head, _, blob = raw.partition(b"\0")  # JSON, then the validator's PNG (json.dumps writes no NUL byte)
    del raw
    job = json.loads(head)
    limits = RenderLimits(**job["limits"])
    if job.get("op") == VALIDATE_OP:
        _validator_main(blob, limits, env.get("skip", ()))
    _seed_job_rngs()
    try:
        if job["language"] == "python":
            kind, msg = _run_python(job["code"], limits)
        else:
            kind, msg = _run_svg(job["code"], limits)
    except BaseException as e:  # noqa: BLE001 - classified, never re-raised
        kind, msg = _describe(e)
    try:
        _write_all(STATUS_FD, (kind + "\n" + str(msg)[:MESSAGE_MAX]).encode("utf-8", "replace"))
    except Exception:  # noqa: BLE001
        pass
    exit_now(0)


def _validator_main(data: bytes, limits: RenderLimits, faults=()) -> None:
    """The validator child (sandboxed as a job child is, after its job has ended): ``validate_png`` on the bytes the
    supervisor read, one verdict frame on STATUS_FD, exit. Never returns."""
    _validator_fault(faults)
    try:
        kind, msg = validate_png(data, limits)[2:]
        frame = "ok\n" if kind is None else f"{kind}\n{msg}"
    except BaseException as e:  # noqa: BLE001 - e.g. MemoryError: reported, and not ok
        frame = f"invalid_image\nPNG validator error: {_describe(e)[1]}"
    try:
        _write_all(STATUS_FD, frame.encode("utf-8", "replace"))
    except Exception:  # noqa: BLE001 - no verdict is invalid_image
        pass
    os._exit(0)


def _validator_fault(faults) -> None:
    """Test hooks only (``RenderPool(_skip_layers=...)``): a validator that crashes, hangs, floods its verdict pipe or
    says ``ok`` but exits with an error, so that tests can show none of these is taken for ``ok``."""
    if "validator_crash" in faults:
        import ctypes

        ctypes.string_at(0)  # SIGSEGV from the kernel: a fault kills even a pid namespace's init
    if "validator_hang" in faults:
        while True:
            pass
    if "validator_flood" in faults:
        _write_all(STATUS_FD, b"ok\n" + b"x" * (4 * FRAME_MAX))
        os._exit(0)
    if "validator_exit1" in faults:
        _write_all(STATUS_FD, b"ok\n")
        os._exit(1)


def _seed_job_rngs(seed: int = JOB_RNG_SEED) -> None:
    """Python's ``random`` and numpy's global RNG set to ``seed`` in the job child. Left alone, numpy's state is the
    zygote's (drawn from the OS when it imported numpy: one per worker, so per worker start) and ``random`` reseeds
    itself from the OS after every fork, so a program using either drew another image on each worker or each run."""
    import random

    random.seed(seed)
    np_random = sys.modules.get("numpy.random")  # imported by the zygote when numpy is installed
    if np_random is not None:
        np_random.seed(seed)


def _run_python(code: str, limits: RenderLimits) -> tuple[str, str]:
    import builtins
    import linecache
    import types

    import matplotlib.pyplot as plt

    if not code.removeprefix("\ufeff").strip():  # said as such: "drew no figure" read as a plot that failed
        return "no_output", "the code is empty (only whitespace)" if code else "the code is empty"
    try:
        # a leading byte-order mark, as an editor may write it: `python file.py` reads past it, compile() of text not
        compiled = compile(code.removeprefix("\ufeff"), JOB_SOURCE_NAME, "exec")
    except (SyntaxError, ValueError) as e:
        return "syntax", _exc_text(e)
    except (MemoryError, RecursionError) as e:
        return "syntax", "source too complex to compile: " + _exc_text(e)
    # its lines where inspect.getsource and tracebacks look for those of a file that does not exist (no mtime: kept)
    source = code.removeprefix("\ufeff")
    linecache.cache[JOB_SOURCE_NAME] = (len(source), None, source.splitlines(True), JOB_SOURCE_NAME)
    # the code's namespace is the module ``__main__``, as under ``python main.py``: pickle, enum, copy and
    # typing.get_type_hints look classes up there by name, and scripts build paths from ``__file__``
    main = types.ModuleType("__main__")
    main.__file__, main.__builtins__ = os.path.join(_JOBDIR, JOB_SCRIPT_NAME), builtins
    sys.modules["__main__"] = main
    _JOB_CWD[0] = _JOBDIR  # where it starts (_child_sandbox)
    sys.addaudithook(_note_png_write)  # the order of its PNG writes: a tie of timestamps is no order (_last_png_written)
    _record_png_saves()
    try:
        exec(compiled, main.__dict__)
    except SystemExit:
        pass
    except MemoryError as e:
        # a layout or draw of the current figure (tight_layout, canvas.draw) asks Agg for a canvas of its full size:
        # past max_side it fails there (std::bad_alloc) before the check below; the figure is too large all the same
        # so does the code's own save at a dpi or tight box past max_side (`savefig("c.png", dpi=10000)`: Agg's
        # canvas of 64000x48000 px, std::bad_alloc), whatever the figure's own size: it was `memory`
        oversized = _oversized_figure(plt, limits) or _canvas_oversized_at_failure(e, limits)
        if oversized is None:
            raise
        return "too_large", f"{oversized} (out of memory drawing it: {_exc_text(e)})"
    except (ValueError, TypeError, OverflowError) as e:
        # the code's own draw / layout / save of a figure of no size (`fig.dpi = float('nan'); fig.canvas.draw()`,
        # `plt.savefig("out.png", dpi=float("nan"))`: "cannot convert float NaN to integer"; dpi 0 or negative: "dpi
        # must be positive"; under one pixel: "cannot write empty image") or past max_side (dpi 1e300: Agg's
        # constructor refuses the size) is that figure's size at the dpi it was drawn at, as the worker's check would
        # have said: it was a `crash`. Only an error raised where the canvas sizes its renderer: any other (a plot's
        # mismatched shapes, a bad colour, json's) stays what it is, whatever the size of the figure open at the time.
        past_float = None if _raised_by_job_code(e) else _figure_size_past_float(e)
        if past_float is not None:
            return "invalid_size", f"{past_float} (setting it failed: {_exc_text(e)})"
        sized = None if _raised_by_job_code(e) else _canvas_sized_at_failure(e)
        if sized is None:
            raise
        refused = _figure_size_invalid(*sized)
        kind = "invalid_size" if refused else "too_large"
        refused = refused or _figure_oversized(*sized, limits)
        if refused is None:
            raise
        return kind, f"{refused} (drawing it failed: {_exc_text(e)})"
    out = os.path.join(_JOBDIR, OUT_NAME)  # absolute: the code may have changed the working directory
    if os.path.lexists(out):
        return "ok", "out.png written by the code"
    # no figure open, or an empty one (what `plt.clf()` or a bare `plt.figure()` leaves after the code saved its chart
    # under another name): the PNG the code wrote last is its image, not a blank canvas
    blank = bool(plt.get_fignums()) and _drew_nothing(plt.gcf())
    if not plt.get_fignums() or blank:
        why = "the current figure is empty" if blank else "no open figure"
        saved = _last_png_written()
        if saved is not None:
            os.rename(saved, out)  # the supervisor checks it as any out.png
            return "ok", f"{os.path.relpath(saved, _JOBDIR)!r} written by the code (no out.png, {why})"
        # no PNG either: a chart saved as JPEG / GIF / WebP / BMP / TIFF (`plt.savefig("chart.jpg"); plt.close()`)
        # is the code's image too, written as a PNG here (it was `no_output`)
        saved = _last_png_written(suffixes=RASTER_SUFFIXES)
        if saved is not None:
            refused = _raster_to_png(saved, out, limits)
            if isinstance(refused, tuple):
                return refused
            how = "as it is: not an image PIL reads as its format" if refused else "as PNG"
            return "ok", f"{os.path.relpath(saved, _JOBDIR)!r} written by the code, {how} (no out.png, {why})"
        # nor any raster: a chart saved as SVG (`plt.savefig("chart.svg"); plt.close()`) is drawn as an SVG job is,
        # its screen and fetcher included
        # its gzip form (`plt.savefig("chart.svgz")`) too, decompressed to at most max_svg_bytes first
        saved = _last_png_written(suffixes=SVG_SUFFIXES)
        if saved is not None:
            kind, msg = _svg_file_to_png(saved, limits)
            if kind != "ok":
                return kind, msg
            return "ok", f"{os.path.relpath(saved, _JOBDIR)!r} written by the code, drawn as SVG (no out.png, {why})"
        # a PDF / EPS it wrote is its chart, not the empty canvas left after it (`savefig("c.eps"); plt.clf()`)
        undrawn = _undrawn_documents_note()
        if not blank or undrawn:
            drew = "the current figure is empty, and the code" if blank else "the code drew no figure and"
            return "no_output", f"{drew} wrote no out.png{undrawn}"
    saved = _png_save_of_unchanged_figure(plt.gcf(), limits)
    if saved is not None:
        os.rename(saved, out)  # the supervisor checks it as any out.png
        return "ok", f"{os.path.relpath(saved, _JOBDIR)!r} saved by the code from the current figure, unchanged since"
    fig = plt.gcf()
    invalid = _invalid_figure_size(plt)
    if invalid is not None:
        return "invalid_size", invalid
    oversized = _oversized_figure(plt, limits)
    if oversized is not None:
        return "too_large", oversized
    # the size checked above, whatever rcParams say: savefig.dpi, and savefig.bbox = "tight", whose box (plus
    # savefig.pad_inches) spans every artist, however far outside the figure
    with plt.rc_context({"savefig.bbox": "standard"}):
        fig.savefig(out, format="png", dpi=fig.dpi)
    return "ok", "current figure"


# The code's last savefig to a PNG file: (the figure, its absolute path, _FIGURE_CHANGES[0] after the save), and how
# often a Figure was marked stale (an artist of it changed) since the job began. Its commonest ending is
# `plt.savefig("chart.png", dpi=..., bbox_inches="tight")` with the figure left open (or `plt.show()`, which Agg
# ignores): the worker re-saved that figure at its own dpi, without the code's options, and a legend or label placed
# outside the axes, which the tight box was there to keep, was cut off the image.
_LAST_PNG_SAVE: list = [None]
_FIGURE_CHANGES = [0]
_FIGURE_DRAWING = [0]  # how many Figure.draw / savefig calls are running


def _record_png_saves() -> None:
    """In the job child: note each ``Figure.savefig`` to a PNG file and each change of a figure after it."""
    import functools
    import weakref

    from matplotlib.artist import Artist
    from matplotlib.figure import Figure

    stale = Artist.stale

    def set_stale(fig, value):
        stale.fset(fig, value)
        # any artist's change reaches its figure as stale = True; a save or draw (pyplot's draw_idle after a save, a
        # layout engine's) marks some itself, and changes nothing the code asked for
        if value and not _FIGURE_DRAWING[0]:
            _FIGURE_CHANGES[0] += 1

    draw = Figure.draw

    @functools.wraps(draw)
    def counted_draw(fig, *args, **kwargs):
        _FIGURE_DRAWING[0] += 1
        try:
            return draw(fig, *args, **kwargs)
        finally:
            _FIGURE_DRAWING[0] -= 1

    savefig = Figure.savefig

    @functools.wraps(savefig)
    def recorded_savefig(fig, fname, *args, **kwargs):
        _FIGURE_DRAWING[0] += 1  # a save sets and restores the figure's dpi, colours, layout: no change of the code's
        try:
            result = savefig(fig, fname, *args, **kwargs)
        except BaseException:
            _LAST_PNG_SAVE[0] = None  # a file it may have left half written
            raise
        finally:
            _FIGURE_DRAWING[0] -= 1
        try:
            path = _png_path_saved(fig, fname, kwargs.get("format"))
        except Exception:  # noqa: BLE001 - a name it cannot resolve: the figure is saved by the worker, as before
            path = None
        if path is not None:
            _LAST_PNG_SAVE[0] = (weakref.ref(fig), path, _FIGURE_CHANGES[0])
        _note_saved_format(fname, kwargs.get("format"))
        return result

    Figure.stale = property(stale.fget, set_stale, doc=stale.__doc__)
    Figure.savefig, Figure.draw = recorded_savefig, counted_draw


# absolute path -> the suffix of the format a ``savefig(fname, format=...)`` wrote there, where the name says none
# (``savefig("chart", format="png")``): the file is then chosen as one of that suffix (``_named_as``)
_SAVED_FORMATS: dict[str, str] = {}


def _note_saved_format(fname, fmt) -> None:
    """Note the format a ``savefig`` to a path was told to write, where its name ends with no suffix the worker reads
    (``chart``, ``chart.out``); nothing for a file object or a name that says a format."""
    if not isinstance(fname, (str, os.PathLike)) or not isinstance(fmt, str) or not fmt:
        return
    try:
        path = os.path.normpath(os.path.abspath(os.fsdecode(os.fspath(fname))))
    except (OSError, ValueError):  # a name it cannot resolve: its suffix alone counts, as before
        return
    suffix = "." + fmt.lower()
    if path.lower().endswith(_NOTED_SUFFIXES):  # a name that says a format is read by it (a PNG named 'a.pdf' stays
        _SAVED_FORMATS.pop(path, None)          # a document, tests/test_render_hostile33.py)
    else:
        _SAVED_FORMATS[path] = suffix
        _PNG_WRITE_ORDER[path] = next(_PNG_WRITE_COUNTER)  # the audit hook notes only names of those suffixes


def _named_as(path: str, suffixes: tuple) -> bool:
    """True where a file of the job dir is read as one of ``suffixes``: the format the code's ``savefig`` wrote it
    in, else what its name ends with."""
    saved = _SAVED_FORMATS.get(os.path.normpath(path))
    return saved in suffixes if saved is not None else os.path.basename(path).lower().endswith(suffixes)


def _png_path_saved(fig, fname, fmt) -> str | None:
    """The absolute path a ``savefig(fname, format=fmt)`` just wrote a PNG to, as matplotlib names it (a name
    without a suffix gets the default format's), or None: a file object, another format."""
    if not isinstance(fname, (str, os.PathLike)):
        return None
    path = os.fsdecode(os.fspath(fname))
    if fmt is None:
        fmt = os.path.splitext(path)[1][1:] or fig.canvas.get_default_filetype()
        if not os.path.splitext(path)[1][1:]:
            path = path.rstrip(".") + "." + fmt
    return os.path.abspath(path) if str(fmt).lower() == "png" else None


def _png_save_of_unchanged_figure(fig, limits: RenderLimits) -> str | None:
    """The PNG the code's last ``savefig`` wrote of ``fig`` (the current figure) when nothing of any figure changed
    since and it is still a regular file in the job dir within ``max_side`` / ``max_png_bytes`` by its header, or
    None: the worker saves ``fig`` at its own dpi, as before (a save past the limits stays no refusal)."""
    record = _LAST_PNG_SAVE[0]
    if record is None or record[0]() is not fig or record[2] != _FIGURE_CHANGES[0] or _outside_jobdir(record[1]):
        return None
    fd = _open_chosen_file(record[1])
    if fd is None:
        return None
    try:
        head, st = _read_exact(fd, 24), os.fstat(fd)
    finally:
        os.close(fd)
    # a second name (a hard link) makes out.png invalid_image; the figure saved afresh has none
    if head is None or head[:8] != _PNG_SIG or head[12:16] != b"IHDR" or st.st_size > limits.max_png_bytes \
            or st.st_nlink != 1:
        return None
    w, h = struct.unpack(">II", head[16:24])
    if not limits.min_side <= min(w, h) <= max(w, h) <= limits.max_side or max(w, h) > limits.max_aspect * min(w, h):
        return None
    return record[1]


def _drew_nothing(fig) -> bool:
    """True for a figure that holds no artist but its background patch: no axes, text, image, line, patch, legend."""
    return all(child is fig.patch for child in fig.get_children())


def _image_size_invalid(w: float, h: float) -> bool:
    """True for an image size that is no size: a side NaN, infinite, zero or negative (as pixels, before rounding
    for a figure; an SVG's after cairosvg's rounding). Not ``too_large``: no limit would make it drawable."""
    return not (math.isfinite(w) and math.isfinite(h)) or w <= 0 or h <= 0


def _invalid_figure_size(plt) -> str | None:
    """Why the current figure has no size in pixels at its own dpi, or None (no figure open, or one of a size)."""
    return _figure_size_invalid(plt.gcf(), plt.gcf().dpi) if plt.get_fignums() else None


def _figure_size_invalid(fig, dpi: float) -> str | None:
    """Why ``fig`` has no size in pixels at ``dpi``, or None: a side NaN, infinite, or under one pixel (Agg's canvas
    truncates it to zero: "cannot write empty image"), as an SVG's that rounds to zero. A NaN dpi made it
    ``too_large`` ("figure of nanxnan px exceeds 4096 px") where a NaN ``width`` of an SVG was a ``crash``, and a
    figure of 1e-9 inches a ``crash``."""
    w_in, h_in = fig.get_size_inches()
    w, h = w_in * dpi, h_in * dpi
    if not _image_size_invalid(w, h) and min(w, h) >= 1:
        return None
    return f"figure size is not a finite number of pixels, one or more a side: {w:g}x{h:g} px (dpi {dpi:g})"


def _oversized_figure(plt, limits: RenderLimits) -> str | None:
    """Why the current figure is past ``max_side`` pixels a side at its own dpi (NaN counts), or None: no figure open,
    or one within the limit."""
    return _figure_oversized(plt.gcf(), plt.gcf().dpi, limits) if plt.get_fignums() else None


def _figure_oversized(fig, dpi: float, limits: RenderLimits) -> str | None:
    """Why ``fig`` is past ``max_side`` pixels a side at ``dpi`` (NaN counts), or None."""
    w_in, h_in = fig.get_size_inches()
    w, h = w_in * dpi, h_in * dpi
    if w <= limits.max_side and h <= limits.max_side:
        return None
    return f"figure of {_px(w)}x{_px(h)} px exceeds {limits.max_side} px"


def _px(v: float) -> str:
    """A figure side in pixels as a message says it: whole pixels, or an exponent past 1e15 (a dpi of 1e300 wrote
    its 300 digits)."""
    return f"{v:.0f}" if abs(v) < 1e15 else f"{v:g}"


# absolute path -> when the code last opened it for writing or renamed a file to it, counted in audit events (a
# ``.png`` name only): the job's own record, in its own process
_PNG_WRITE_ORDER: dict[str, int] = {}
_PNG_WRITE_COUNTER = itertools.count()
# the code's working directory as its os.chdir calls moved it (None: unknown, after an fchdir or past the cap):
# os.getcwd in the hook walks up the tree when the path is past PATH_MAX, seconds for a deep one
_JOB_CWD: list[str | None] = [None]
_JOB_CWD_MAX = 4 * 4096


def _note_png_write(event: str, args: tuple) -> None:
    """Audit hook of a python job: note each ``.png`` path it opens for writing (``open``, ``os.open``: the file
    objects matplotlib, PIL and ``open`` write through) or renames a file to (``os.rename`` / ``os.replace``); no
    system call, only string work on the paths it is given."""
    try:
        if event == "os.chdir":
            cwd, path = _JOB_CWD[0], args[0]
            path = None if isinstance(path, int) else os.fsdecode(path)
            cwd = None if path is None or cwd is None and not path.startswith("/") else os.path.join(cwd or "/", path)
            _JOB_CWD[0] = cwd if cwd is None or len(cwd) <= _JOB_CWD_MAX else None
            return
        if event == "open":
            path, flags = args[0], args[2]
            if not isinstance(flags, int) or not flags & (os.O_WRONLY | os.O_RDWR):
                return
        elif event == "os.rename":
            path = args[1]
        else:
            return
        if isinstance(path, int) or not os.fsdecode(path).lower().endswith(_NOTED_SUFFIXES):
            return
        path = os.fsdecode(path)
        if not path.startswith("/"):
            if _JOB_CWD[0] is None:
                return
            path = os.path.join(_JOB_CWD[0], path)
        _PNG_WRITE_ORDER[os.path.normpath(path)] = next(_PNG_WRITE_COUNTER)
    except Exception:  # noqa: BLE001 - a path it cannot name: the file's timestamp alone orders it
        pass


# raster formats a python job may save its chart in, besides PNG (matplotlib writes them through PIL)
RASTER_SUFFIXES = (".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tif", ".tiff")
RASTER_FORMATS = ("JPEG", "MPO", "GIF", "WEBP", "BMP", "TIFF")  # PIL's names of those formats


def _raster_to_png(path: str, out: str, limits: RenderLimits) -> tuple[str, str] | bool:
    """Write the code's raster image ``path`` as the PNG ``out`` (its first frame; modes PNG cannot hold as RGB /
    RGBA), or the refusal: past ``max_side`` by its header, before any pixel is decoded (``too_large``). A file PIL
    cannot read or convert is moved to ``out`` as it is (True), for the supervisor to check (``invalid_image`` unless
    it is a PNG); False: converted. PIL's decompression-bomb refusal stays ``too_large``. Runs in the job: its cost is
    the job's, and the supervisor checks ``out`` as any out.png."""
    from PIL import Image, UnidentifiedImageError

    name = os.path.relpath(path, _JOBDIR)
    fd = _open_chosen_file(path)
    if fd is None:
        return _no_longer_a_file(path)
    try:
        # only the formats named by these suffixes: PIL sniffs the content, and an EPS (Ghostscript, a fork the
        # filter kills) or any other plugin's file named .jpg is no chart of the code's
        Image.init()  # every plugin registered (MPO is not after PIL's preinit), then only those formats used
        formats = [fmt for fmt in RASTER_FORMATS if fmt in Image.OPEN]
        with os.fdopen(fd, "rb") as f, Image.open(f, formats=formats) as im:
            w, h = im.size
            if w > limits.max_side or h > limits.max_side:
                return "too_large", f"{name!r} of {w}x{h} px exceeds {limits.max_side} px"
            im.seek(0)
            if im.mode not in ("1", "L", "LA", "P", "RGB", "RGBA", "I;16"):  # CMYK, YCbCr, F, ...: as RGB(A)
                im = im.convert("RGBA" if im.mode in ("PA", "RGBa") or "transparency" in im.info else "RGB")
            im.save(out, format="PNG")
    except (UnidentifiedImageError, SyntaxError, ValueError, OSError) as e:
        if isinstance(e, OSError) and not isinstance(e, UnidentifiedImageError) and e.errno is not None:
            raise  # a system call's error (a full job dir, a refusal): classified as any
        # PIL's "not an image", a corrupt header, a truncated stream, a mode it cannot convert: the file itself is the
        # output, which the supervisor refuses as any out.png that is no PNG (`invalid_image`; a job may not say so)
        os.replace(path, out)
        return True
    return False


SVG_SUFFIXES = (".svg", ".svgz")
# documents a python job may save its chart as that the sandbox does not draw: PDF and PostScript need Ghostscript or
# a PDF renderer, programs the filter would kill (and whose parsers are a large attack surface)
UNDRAWN_SUFFIXES = (".pdf", ".eps", ".ps")


def _open_chosen_file(path: str) -> int | None:
    """A read descriptor of the file the worker chose as the code's image, or None where it is no longer a regular
    file: the job's threads run on while the worker reads, and may swap it for a link (followed, its target was read)
    or a FIFO (whose open waited for a writer until the job's timeout) after ``_last_png_written`` chose it, or a
    socket (ENXIO), or remove it (ENOENT): each of those was the worker's own OSError, a ``crash``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENXIO, errno.ENOENT):
            return None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def _no_longer_a_file(path: str) -> tuple[str, str]:
    return "no_output", f"{os.path.relpath(path, _JOBDIR)!r} is no longer a regular file"


def _svg_file_to_png(path: str, limits: RenderLimits) -> tuple[str, str]:
    """Draw the code's SVG file ``path`` into out.png as an SVG job's text is drawn (``_run_svg``: size cap, screen,
    cairosvg with the raster-only fetcher). A file past ``max_svg_bytes`` is ``too_large`` unread; bytes that are not
    UTF-8 are replaced, as the screen reads them. A ``.svgz`` (gzip) is read whole first, at most ``max_svg_bytes`` +
    ``SVGZ_SLACK_BYTES`` (what gzip adds to text it cannot compress; a larger file is ``too_large`` unread), and
    gunzipped in memory to at most ``max_svg_bytes`` + 1 bytes (a bomb is ``too_large`` having cost that much; a
    file that is no complete gzip stream is ``syntax``, as an SVG that is no XML): cairosvg never sees gzip, the
    screen reads the text. The file is opened without following a link or waiting on a FIFO, and its size is the
    open file's, so a thread of the job that swaps it after it was chosen changes nothing of these bounds. The
    job's code ran in this interpreter before and may have patched any of it: it could call cairosvg itself all the
    same, with the same rights."""
    gzipped = _named_as(path, (".svgz",))
    cap = limits.max_svg_bytes + (SVGZ_SLACK_BYTES if gzipped else 0)
    fd = _open_chosen_file(path)
    if fd is None:
        return _no_longer_a_file(path)
    st = os.fstat(fd)
    with os.fdopen(fd, "rb") as f:
        if st.st_size > cap:
            return "too_large", f"SVG{'Z' if gzipped else ''} of {st.st_size} bytes exceeds {cap}"
        data = f.read(cap + 1)
    if len(data) > cap:  # grown since
        return "too_large", f"SVG{'Z' if gzipped else ''} of more than {cap} bytes"
    if gzipped:
        data = _gunzip_bounded(data, limits.max_svg_bytes, os.path.relpath(path, _JOBDIR))
        if isinstance(data, tuple):
            return data
    return _run_svg(data.decode("utf-8", "replace"), limits)


# what gzip may add to a text it cannot compress (header, stored blocks' 5 bytes per 64 KiB, trailer), and more
SVGZ_SLACK_BYTES = 64 << 10


def _gunzip_bounded(data: bytes, max_bytes: int, name: str) -> bytes | tuple[str, str]:
    """``data`` (gzip, one member or several) decompressed, or the refusal: more than ``max_bytes`` once
    decompressed (``too_large``; never more than ``max_bytes`` + 1 bytes are produced), not a gzip stream or a
    truncated one (``syntax``)."""
    import gzip
    import io

    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as f:
            out = f.read(max_bytes + 1)
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        return "syntax", f"{name!r} is not a complete gzip stream: {_exc_text(e)}"
    if len(out) > max_bytes:
        return "too_large", f"{name!r} decompresses to more than {max_bytes} bytes of SVG"
    return out


# the files whose writes the audit hook orders (_note_png_write): every kind the worker may choose or name
_NOTED_SUFFIXES = (".png",) + SVG_SUFFIXES + RASTER_SUFFIXES + UNDRAWN_SUFFIXES


def _undrawn_documents_note() -> str:
    """For a job without an image: the PDF / PostScript file it wrote last, named, and why it is not used (so its
    author can save the chart as PNG instead), or an empty string."""
    saved = _last_png_written(suffixes=UNDRAWN_SUFFIXES)
    if saved is None:
        return ""
    return (f"; it wrote {os.path.relpath(saved, _JOBDIR)!r}, a PDF / PostScript document, which the sandbox does not "
            "draw (no Ghostscript or PDF renderer runs there): save the chart as PNG, SVG or JPEG instead")


def _last_png_written(max_entries: int = 4096, suffixes: tuple = (".png",)) -> str | None:
    """The file named with one of ``suffixes`` (``.png``: default) the code wrote last anywhere under the job
    directory (regular files only, no link followed; the first ``max_entries`` entries looked at), or None. Code
    that saves its figure under another name and closes it (``plt.savefig("chart.png"); plt.close()``) still has its
    image rendered.

    Last by modification time, then, among files of one timestamp, by the order the code opened them for writing
    (``_note_png_write``), then by path: a file the kernel stamps with its coarse clock (created and written without
    a ``stat``, as ``os.open`` / ``os.write`` or a C library's ``fopen`` do) shares its timestamp with every file
    written in the same few milliseconds, and by path alone the first of two such files could win."""
    best, seen, stack = None, 0, [_JOBDIR]
    while stack and seen < max_entries:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries[:max_entries - seen]:
            seen += 1
            if e.is_dir(follow_symlinks=False):
                stack.append(e.path)
            elif _named_as(e.path, suffixes) and e.is_file(follow_symlinks=False):
                key = (e.stat(follow_symlinks=False).st_mtime_ns, _PNG_WRITE_ORDER.get(os.path.normpath(e.path), -1), e.path)
                best = max(best, key) if best else key
    return best[2] if best else None


# What cairosvg may fetch for a job: only raster images from data: URLs (PNG, JPEG, GIF, WebP by their magic bytes)
_RASTER_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a")


def _raster_only_fetch(url: str, resource_type: str) -> bytes:
    """cairosvg's ``url_fetcher`` for jobs, behind the screen: every fetch of every nested tree comes here, so no
    difference between how the screen and cairosvg read a document can make cairosvg load an SVG, a style sheet or
    gzip the screen did not see. A refusal is a ``PermissionError`` (``forbidden``)."""
    if not url.startswith("data:"):
        if resource_type == "image/*":
            return b""  # an <image> with no href or a bare #fragment: cairosvg draws nothing
        raise PermissionError(f"SVG fetch of {resource_type} {url[:80]!r} refused")
    if resource_type != "image/*":
        raise PermissionError(f"SVG fetch of {resource_type} from a data: URL refused")
    from urllib.request import urlopen

    with urlopen(url) as f:  # urllib's data: handler (the scheme is checked above): decoded as cairosvg would
        data = f.read()
    if not (data.startswith(_RASTER_MAGIC) or (data[:4] == b"RIFF" and data[8:12] == b"WEBP")):
        raise PermissionError(f"SVG data: image that is not a PNG / JPEG / GIF / WebP refused: {data[:16]!r}")
    _png_bomb_check(data)
    return data


def _png_bomb_check(data: bytes) -> None:
    """PIL's decompression-bomb refusal (``too_large``) for a PNG too: cairosvg decodes a PNG with cairo itself and
    every other format with PIL, so a 100000 px square data: PNG was cairo's ``NO_MEMORY`` (``memory``) where the same
    image as a GIF was PIL's ``DecompressionBombError``. Same limit as PIL's: twice ``Image.MAX_IMAGE_PIXELS``."""
    from PIL import Image

    limit = Image.MAX_IMAGE_PIXELS
    if not (limit and len(data) >= 24 and data.startswith(_RASTER_MAGIC[0]) and data[12:16] == b"IHDR"):
        return
    w, h = struct.unpack(">II", data[16:24])
    if w * h > 2 * limit:
        raise Image.DecompressionBombError(f"SVG data: PNG of {w}x{h} pixels exceeds the limit of {2 * limit} "
                                           "pixels (could be a decompression bomb)")


_C_INT_MAX = 2**31 - 1


class _SvgTooLarge(Exception):
    """The raster an SVG asks for is past ``max_side``: refused before cairo allocates or draws it."""


class _SvgInvalidSize(Exception):
    """The raster an SVG asks for has no size (a side NaN, infinite, zero or negative): ``invalid_size``, as a python
    job's figure of such a size is."""


def _side_checked_png_surface(max_side: int):
    """cairosvg's ``PNGSurface``, refusing an image larger than ``max_side`` pixels a side before its surface exists.
    cairosvg sizes the surface from the parsed document (width / height / viewBox / units) and only then draws: a
    ``width="100in"`` SVG (9600 px square) otherwise took 5 s and 350 MiB to draw an image the supervisor refuses."""
    from cairosvg.surface import PNGSurface

    class SideCheckedPNGSurface(PNGSurface):
        def _create_surface(self, width, height):
            # Only here is an OverflowError the SVG's size (``too_large``, "SVG size: ..."): raised while drawing (an
            # arc of radius 1e308 squared) it is arithmetic like any other, a ``crash``.
            if not (math.isfinite(width) and math.isfinite(height)):  # NaN / infinity: no size, not a large one
                what = "undefined" if math.isnan(width) or math.isnan(height) else "infinite"
                raise _SvgInvalidSize(f"The SVG size is {what}: {width:g}x{height:g} px")
            w, h = int(round(width)), int(round(height))  # the size PNGSurface gives its image
            # past a C int, cairo's own OverflowError says so without allocating
            if max_side < max(w, h) <= _C_INT_MAX:
                raise _SvgTooLarge(f"SVG of {w}x{h} px exceeds {max_side} px")
            if max(w, h) <= _C_INT_MAX and _image_size_invalid(w, h):  # cairo's INVALID_SIZE would read as too large
                raise _SvgInvalidSize(f"The SVG size is {'negative' if min(w, h) < 0 else 'undefined'}: {w}x{h} px")
            try:
                return super()._create_surface(width, height)
            except OverflowError as e:
                raise _SvgTooLarge("SVG size: " + _exc_text(e)) from None

    return SideCheckedPNGSurface


# the address of each pattern / mask cairo surface of this job -> its size (cairocffi's SVGSurface has no getter)
_TILE_SIZES: dict[int, tuple[float, float]] = {}


def _surface_key(surface) -> int:
    """The address of a cairocffi ``surface``'s cairo surface (cairocffi wraps one in a new object at each getter)."""
    import cairocffi

    return int(cairocffi.ffi.cast("uintptr_t", surface._pointer))


def _check_tile_sizes() -> None:
    """cairosvg draws a pattern tile or a mask on a ``SVGSurface`` of the size the document gives it, and refuses only
    a zero one: a negative size reached cairo, whose ``NO_MEMORY`` made ``<pattern width="-5">`` in a 20 px SVG a
    ``memory`` error. It is the document's error, a ``crash``, as the SVG's own negative size is. Job child only
    (``cairosvg.defs`` imports the class from ``cairosvg.surface`` at every pattern and mask)."""
    import cairosvg.surface

    class SizeCheckedSVGSurface(cairosvg.surface.SVGSurface):
        def _create_surface(self, width, height):
            if width < 0 or height < 0:
                raise ValueError(f"The SVG pattern / mask size is negative: {width:g}x{height:g}")
            made = super()._create_surface(width, height)
            _TILE_SIZES[_surface_key(made[0])] = (made[1], made[2])  # cairo's SVG surface tells no size: read for pattern tiles
            return made

    cairosvg.surface.SVGSurface = SizeCheckedSVGSurface


# the size a browser gives an SVG that states none (CSS's default object size): width / height missing, `auto` or a
# percentage, and no viewBox to take one from
SVG_DEFAULT_VIEWPORT = (300, 150)

# a CSS length as SVG 2 reads a root's width / height: a number (sign, fraction, exponent) and a unit in any case
# (and nan / inf, which cairosvg's float() reads as they are read bare: `nanrem` was a crash where `nan` is no size)
_SVG_LENGTH = re.compile(r"([+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:nan|inf(?:inity)?)))"
                         r"([A-Za-z]*|%)")
# CSS units cairosvg reads no other way, as one it does read: rem (the root's font size, 16 px by default, as
# cairosvg's 1em at the root) and Q (a quarter millimetre); viewport units of the default viewport, in px
_SVG_UNIT_AS = {"rem": (1, "em"), "q": (0.25, "mm"),
                "vw": (SVG_DEFAULT_VIEWPORT[0] / 100, ""), "vh": (SVG_DEFAULT_VIEWPORT[1] / 100, ""),
                "vmin": (min(SVG_DEFAULT_VIEWPORT) / 100, ""), "vmax": (max(SVG_DEFAULT_VIEWPORT) / 100, "")}


def _svg_root_length(value: str, rem_px: float = 16.0, side: str = "width") -> str | None:
    """A root ``width`` / ``height`` as cairosvg reads it right, or None for no size (missing, empty, ``auto``: SVG 2's
    initial value, which sizes the outermost svg as 100% does). cairosvg read ``auto``, a unit in capitals (``100PX``:
    CSS units are case-insensitive), ``Q`` and the viewport units as 0 (``invalid_size``, "The SVG size is undefined")
    and ``rem`` as a number it failed to parse (``crash``). Anything else is left as written: cairosvg's word on
    it stands (``nan`` / ``inf`` / an unknown unit are ``invalid_size``). ``rem`` and ``em`` are ``rem_px``, the root's
    font size (``_root_rem_px``; cairosvg read ``em`` as 16 px whatever the root's font size), ``ex`` / ``ch`` half of
    it (cairosvg's reading). A ``calc()`` (``side``: what its ``%`` is of) is evaluated to px, clamped at 0 as CSS
    clamps it to the range of a size; an invalid one is left as written (cairosvg fails on it: ``invalid_size``)."""
    text = value.strip()
    if not text or text.lower() == "auto":
        return None
    if is_calc(text):
        terms = calc_terms(text)
        if terms is None:
            return text
        px = _root_calc_px(terms, rem_px, side)
        return f"{px if px > 0 else 0.0!r}px"
    m = _SVG_LENGTH.fullmatch(text)
    if m is None:
        return text
    number, unit = m.group(1), m.group(2).lower()
    if unit in _FONT_RELATIVE_UNITS and math.isfinite(float(number)):
        return f"{float(number) * rem_px * _FONT_RELATIVE_UNITS[unit]!r}px"
    if unit in _SVG_UNIT_AS:
        factor, unit = _SVG_UNIT_AS[unit]
        return f"{float(number) * factor!r}{unit}"
    return number + unit


# a root's font-relative units in its own font size (cairosvg: 1ex = 1ch = 0.5em)
_FONT_RELATIVE_UNITS = {"em": 1.0, "rem": 1.0, "ex": 0.5, "ch": 0.5}


def _terms_px(terms, font_px: float, rem_px: float, percent_px: float) -> float:
    """CSS length terms (``(unit, coefficient)``, as ``css_calc.calc_terms`` gives them) summed in px: em / ex / ch of
    ``font_px`` (cairosvg's 1ex = 1ch = 0.5em), rem of ``rem_px``, % of ``percent_px``, absolute and viewport units as
    cairosvg reads them."""
    import types

    import cairosvg.helpers

    size = getattr(cairosvg.helpers.size, "__wrapped__", cairosvg.helpers.size)  # cairosvg's, not the lenient one
    stand_in = types.SimpleNamespace(font_size=font_px, dpi=96, context_width=0, context_height=0)
    total = 0.0
    for unit, coef in terms:
        if unit == "%":
            total += coef * percent_px / 100
        elif unit == "rem":
            total += coef * rem_px
        elif unit in _FONT_RELATIVE_UNITS:
            total += coef * font_px * _FONT_RELATIVE_UNITS[unit]
        else:
            total += size(stand_in, _css_length(f"{coef!r}{unit}", rem_px) or "0", "x")
    return total


def _root_calc_px(terms, rem_px: float, side: str) -> float:
    """A root width / height ``calc()`` (``css_calc.calc_terms``) in px: em / rem of the root's font size, ``%`` of the
    default viewport's side (what a percentage side of the root is drawn in)."""
    return _terms_px(terms, rem_px, rem_px, SVG_DEFAULT_VIEWPORT[0 if side == "width" else 1])


# units a length may carry as cairosvg reads them (helpers.UNITS, em / ex / ch, %), with those rewritten above
_SVG_KNOWN_UNITS = frozenset(("", "px", "mm", "cm", "in", "pt", "pc", "em", "ex", "ch", "%", *_SVG_UNIT_AS))
# CSS's initial font size: ``rem`` where the document's root sets no font size it reads (``_root_rem_px``)
_CSS_REM_PX = 16.0
# one rem of the document being drawn (its root's font size): what the length reader reads ``rem`` as while drawing
_SVG_REM_PX = [_CSS_REM_PX]


def _font_size_px(value, parent_px: float = _CSS_REM_PX, rem_px: float = _CSS_REM_PX) -> float | None:
    """A ``font-size`` in px as CSS computes it: a length or ``calc()``, its em / ex / ch / ``%`` of the parent's font
    size ``parent_px``, rem of ``rem_px`` (both the initial 16 px at the root); a calc() below 0 is 0, as CSS clamps
    it. None where it is no length (missing, a keyword, negative, past a float)."""
    text = str(value or "").strip()
    if is_calc(text):
        terms = calc_terms(text)
        if terms is None:
            return None
        px = max(_terms_px(terms, parent_px, rem_px, parent_px), 0.0)
    else:
        m = _SVG_LENGTH.fullmatch(text)
        if m is None or not math.isfinite(float(m.group(1))) or m.group(2).lower() not in _SVG_KNOWN_UNITS:
            return None
        px = _terms_px(((m.group(2).lower(), float(m.group(1))),), parent_px, rem_px, parent_px)
    return px if math.isfinite(px) and px >= 0 else None


def _root_rem_px(node) -> float:
    """One ``rem`` for the cairosvg ``node``: its document root's font size (CSS Values: the root element's), read
    once per root (its attributes are set, style sheets applied, before any child node is built)."""
    root = node
    while getattr(root, "parent", None) is not None:
        root = root.parent
    rem = getattr(root, "_rem_px", None)
    if rem is None:
        rem = _font_size_px(root.get("font-size"))
        rem = root._rem_px = rem if rem else _CSS_REM_PX  # none, or 0: the initial 16 px
    return rem

# attributes holding one length (or `auto`) on every element where cairosvg reads them with its ``size``; x / y / dx / dy
# of text are lists, and refX / refY take keywords: those are left to the length reader (cairosvg's ``size``, made
# lenient by ``_svg_values_read_as_css``)
_SVG_LENGTH_ATTRS = frozenset((
    "width", "height", "x", "y", "rx", "ry", "r", "cx", "cy", "fx", "fy", "fr", "x1", "y1", "x2", "y2",
    "stroke-width", "stroke-dashoffset", "markerWidth", "markerHeight", "offset"))
# of those, the ones that take no negative length: a calc() below 0 is clamped to 0 there (CSS Values)
_SVG_NON_NEGATIVE_ATTRS = frozenset(("width", "height", "rx", "ry", "r", "fr", "stroke-width", "markerWidth",
                                     "markerHeight"))
_SVG_TEXT_LISTS = frozenset(("x", "y", "dx", "dy"))
_SVG_TEXT_TAGS = frozenset(("text", "tspan", "tref", "textPath", "a"))
# attributes holding one number (a percentage allowed: CSS Color 4's opacities) that cairosvg reads with float()
_SVG_NUMBER_ATTRS = frozenset(("opacity", "fill-opacity", "stroke-opacity", "stop-opacity", "flood-opacity",
                               "stroke-miterlimit"))
_SVG_CHECKED_ATTRS = _SVG_LENGTH_ATTRS | _SVG_NUMBER_ATTRS | {"viewBox", "stroke-dasharray", "preserveAspectRatio",
                                                               "d"}

# the smallest radius browsers (Blink, Gecko) read from path data, which they hold as 32-bit floats: one below it is
# 0 there, a straight line
_PATH_MIN_RADIUS = 2.0 ** -149
# radii past these are scaled down together to them: cairosvg squares them (1e308 was an OverflowError), and the angles
# it gives cairo place an arc's ends no better than a 1e-16th of its radius (a radius of 1e150 drew a chord from (0, 0)
# to (50, 50) along the canvas's top edge, and the long way round as that chord). Past 1e13, or 1e10 times the end
# point's largest coordinate, the short way round bulges by under 0.01 of a unit between points a million units apart,
# and the long way round is past cairo's range (``too_large``) at either radius
SVG_MAX_SHORT_ARC_RADIUS = 1e13
SVG_MAX_PATH_ARC_RADIUS = 1e150
_PATH_LETTERS = "achlmqstvzACHLMQSTVZ"
_PATH_SEGMENT = re.compile(f"([{_PATH_LETTERS}])([^{_PATH_LETTERS}]*)")
# one arc's seven arguments as cairosvg reads them from its normalised text (a flag is one character, spaces optional)
_PATH_ARC_ARGS = re.compile(r"(\S+) (\S+) (\S+) ([01]) ?([01]) ?(\S+) (\S+)(?: |$)")


def _arc_radii(rx: float, ry: float, end: float) -> tuple[float, float] | None:
    """An arc's radii as cairosvg can draw them: absolute values (SVG's arc rules), both scaled down together to
    ``SVG_MAX_SHORT_ARC_RADIUS`` or 1e10 times ``end`` (its end point's largest coordinate), at most
    ``SVG_MAX_PATH_ARC_RADIUS``, where one is past it; None where one is then under ``_PATH_MIN_RADIUS`` (a line)."""
    rx, ry = abs(rx), abs(ry)
    cap = min(SVG_MAX_PATH_ARC_RADIUS, max(SVG_MAX_SHORT_ARC_RADIUS, 1e10 * end))
    if max(rx, ry) > cap:
        shrink = cap / max(rx, ry)
        rx, ry = rx * shrink, ry * shrink
    return None if min(rx, ry) < _PATH_MIN_RADIUS else (rx, ry)


def _path_arc_args(args: str) -> tuple[list[str], str | None]:
    """The arcs of one ``A`` / ``a`` segment's normalised ``args`` as SVG's arc rules read them, each as the text of
    its seven arguments, or (for a zero radius) the two of a line marked ``"L"``; and the text left unread, None where
    the path errs there (not seven numbers, one NaN or infinite, ``1e400``: the path is drawn up to it, as SVG draws
    a path in error)."""
    arcs, pos = [], 0
    while pos < len(args):  # matched in place: slicing off each arc made a long path of arcs quadratic
        m = _PATH_ARC_ARGS.match(args, pos)
        if m is None:  # not seven arguments (`-Infinity`, split at its path letters, left cairosvg a ValueError)
            return arcs, None
        try:
            rx, ry, rotation, x, y = (float(m.group(i)) for i in (1, 2, 3, 6, 7))
        except ValueError:  # a unit or no number
            return arcs, None
        if not all(math.isfinite(v) for v in (rx, ry, rotation, x, y)):
            return arcs, None
        radii = _arc_radii(rx, ry, max(abs(x), abs(y)))
        if radii is None:  # a zero radius is a straight line to the end point (SVG's arc rules)
            arcs.append(f"L {m.group(6)} {m.group(7)}")
        else:  # a rotation is one modulo a turn (cairosvg's radians of 1e300 degrees lost all precision)
            arcs.append(f"{radii[0]!r} {radii[1]!r} {math.fmod(rotation, 360.0)!r} {m.group(4)} {m.group(5)} "
                        f"{m.group(6)} {m.group(7)}")
        pos = m.end()
        while pos < len(args) and args[pos].isspace():
            pos += 1
    return arcs, ""


def _svg_path_data(d: str) -> str:
    """Path data ``d`` with its arcs as SVG's arc rules read them: cairosvg squared radii of 1e308 (an
    ``OverflowError``), divided by an infinite one and by a radius under 1e-300 (``ZeroDivisionError``): a ``crash``.
    A radius that browsers read as 0 draws a line, radii past ``SVG_MAX_PATH_ARC_RADIUS`` are scaled down to it, a
    NaN or infinite number ends the path before its arc. Data without arcs is returned as it is."""
    if "a" not in d.lower():
        return d
    import cairosvg.helpers

    text = d
    for letter in _PATH_LETTERS:  # as cairosvg's path() splits it
        text = text.replace(letter, f" {letter} ")
    out = []
    for letter, args in _PATH_SEGMENT.findall(cairosvg.helpers.normalize(text)):
        if letter not in "aA":
            out.append(f"{letter} {args.strip()}")
            continue
        arcs, rest = _path_arc_args(args.strip())
        out.extend(f"{'l' if letter == 'a' else 'L'}{arc[1:]}" if arc.startswith("L") else f"{letter} {arc}"
                   for arc in arcs)
        if rest is None:
            break
        if rest:
            out.append(f"{letter} {rest}")
    return " ".join(out)


def _css_length(text: str, rem_px: float | None = None, non_negative: bool = False) -> str | None:
    """A CSS length written as cairosvg reads it right (units in lower case; ``rem``, ``Q`` and the viewport units
    in units it reads), or None where ``text`` is no length: not a number and a unit cairosvg knows, or a number
    no float holds (``1e400``, ``nan``). ``rem`` is ``rem_px`` px, by default the document's (``_SVG_REM_PX``).
    A ``calc()`` is evaluated (``css_calc``; None where CSS makes it invalid): one of a single unit to that length,
    one mixing units (``50% - 1em``) to a stand-in that the length reader resolves where it knows what ``%`` and
    ``em`` are (``_calc_stand_in``). ``non_negative``: the property takes no negative length, and a calc() below 0
    is clamped to 0, as CSS clamps it (a negative length written as such is left to the caller)."""
    if is_calc(text):
        terms = calc_terms(text)
        if terms is None:
            return None
        if len(terms) == 1:
            unit, coef = terms[0]
            return _css_length(f"{coef if coef > 0 or not non_negative else 0.0!r}{unit}", rem_px)
        return _calc_stand_in(terms, rem_px, non_negative)
    m = _SVG_LENGTH.fullmatch(text.strip())
    if m is None or not math.isfinite(float(m.group(1))) or m.group(2).lower() not in _SVG_KNOWN_UNITS:
        return None
    number, unit = m.group(1), m.group(2).lower()
    if unit == "rem":
        return f"{float(number) * (_SVG_REM_PX[0] if rem_px is None else rem_px)!r}px"
    if unit in _SVG_UNIT_AS:
        factor, unit = _SVG_UNIT_AS[unit]
        return f"{float(number) * factor!r}{unit}"
    return number + unit


# calc() lengths of more than one unit read in this job (``_css_length``): (terms, rem px, clamped at 0) by the index
# that their stand-in text names. A job child draws one document, so the list lives as long as that drawing
_CALC_LENGTHS: list[tuple] = []
_CALC_INDEX: dict[tuple, int] = {}
# the stand-in's text: \x01 is no XML character, so no document can write it; no space, "-", "," or "e" either, so
# cairosvg's ``normalize`` (which splits dash arrays and lists there) leaves it whole
_CALC_STAND_IN = re.compile(r"calc\(\x01([0-9]+)\)")


def _calc_stand_in(terms, rem_px: float | None, non_negative: bool) -> str:
    """The text standing for a calc() of several units until the length reader resolves it (``_calc_px``)."""
    key = (terms, rem_px, non_negative)
    index = _CALC_INDEX.get(key)
    if index is None:
        index = _CALC_INDEX[key] = len(_CALC_LENGTHS)
        _CALC_LENGTHS.append(key)
    return f"calc(\x01{index})"


def _calc_px(surface, stand_in: str, reference, size) -> float | None:
    """The px of the calc() that ``stand_in`` names, each unit read by cairosvg's length reader ``size`` on
    ``surface`` (its font size for em, its viewport for %); None where ``stand_in`` names none."""
    m = _CALC_STAND_IN.fullmatch(stand_in)
    if m is None or int(m.group(1)) >= len(_CALC_LENGTHS):
        return None
    terms, rem_px, non_negative = _CALC_LENGTHS[int(m.group(1))]
    px = sum(size(surface, _css_length(f"{coef!r}{unit}", rem_px) or "0", reference) for unit, coef in terms)
    return px if px > 0 or not non_negative else 0.0


def _css_number(text: str) -> str | None:
    """A number (or a percentage, as a fraction) as cairosvg's float() reads it, or None where ``text`` is none. A
    ``calc()`` of numbers is evaluated (one of a length is none)."""
    if is_calc(text):
        terms = calc_terms(text, number=True)
        return None if terms is None else repr(terms[0][1])
    m = _SVG_LENGTH.fullmatch(text.strip())
    if m is None or not math.isfinite(float(m.group(1))) or m.group(2) not in ("", "%"):
        return None
    return m.group(1) if m.group(2) == "" else repr(float(m.group(1)) / 100)


def _css_viewbox(text: str) -> bool:
    """Whether a viewBox is one: four finite numbers, width and height not negative (SVG: an error otherwise)."""
    try:
        parts = [float(v) for v in re.sub("[ \n\r\t,]+", " ", text).split()]
    except ValueError:
        return False
    return len(parts) == 4 and all(math.isfinite(v) for v in parts) and min(parts[2:]) >= 0


def _list_items(text: str) -> list[str]:
    """The items of a list of lengths (``stroke-dasharray``), split at whitespace and commas outside parentheses: a
    ``calc(1px + 2px)`` is one item."""
    items, depth, current = [], 0, []
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth <= 0 and ch in " \t\n\r\f,":
            items.append("".join(current))
            current = []
        else:
            current.append(ch)
    items.append("".join(current))
    return [item for item in items if item]


def _css_dasharray(text: str, rem_px: float | None = None) -> str | None:
    """A ``stroke-dasharray`` as cairosvg reads it right (``none``, or lengths / percentages, none negative), or None
    where it is invalid: SVG makes the whole list invalid for one item that is not a length or is negative (cairo
    refused a negative dash, ``INVALID_DASH``: a ``crash``)."""
    if text.strip().lower() == "none":
        return "none"
    items = [_css_length(item, rem_px, non_negative=True) for item in _list_items(text)]
    if not items or any(i is None or i.startswith("-") for i in items):
        return None
    return " ".join(items)


def _read_svg_value(node, name: str, value) -> str | None:
    """The value of attribute ``name`` of a cairosvg ``node`` as cairosvg reads it right, or None where it is invalid.
    Values of other attributes, and those that are not strings, are returned as they are."""
    if not isinstance(value, str):
        return value
    if name == "viewBox":
        return value if _css_viewbox(value) else None
    if name in _SVG_NUMBER_ATTRS:
        return _css_number(value)
    if name == "stroke-dasharray":
        return _css_dasharray(value, _root_rem_px(node))
    if name == "d":
        return _svg_path_data(value)
    if name == "preserveAspectRatio":  # an empty one was cairosvg's IndexError (its align is the first word)
        return value if value.split() else None
    if name in _SVG_LENGTH_ATTRS and not (name in _SVG_TEXT_LISTS and node.tag in _SVG_TEXT_TAGS):
        if value.strip().lower() == "auto":
            return None
        return _css_length(value, _root_rem_px(node), non_negative=name in _SVG_NON_NEGATIVE_ATTRS)
    return value


# id() of the XML elements whose cairosvg nodes are being built: a node is built inside another's only for its
# children and for the text a <tref> names, so one built again inside its own building is a <tref> cycle
_SVG_ELEMENTS_BUILDING: set[int] = set()


class _SvgCircularReference(TypeError):
    """A reference to an element whose node is being built (a ``<tref>`` naming its own ancestor, or a cycle of trefs)
    or drawn (a ``<use>`` of its ancestor). A ``TypeError``: what cairosvg raises for a ``<use>`` naming no element,
    which it draws as nothing."""


def _tref_tree_class(tree_class):
    """cairosvg's ``Tree`` as ``text_children`` builds the one a ``<tref>`` names: where that element's node is being
    built already (``<text id="t"><tref href="#t"/></text>``, two texts naming each other), the reference is circular,
    an error SVG does not render: the tref is read as empty text instead of recursing to Python's limit (a
    RecursionError, a ``crash``); so is one naming no element (cairosvg's TypeError, a ``crash``)."""
    from xml.etree.ElementTree import Element

    import cssselect2

    class TrefTree(tree_class):
        def __init__(self, **kwargs):
            parent = kwargs.get("parent")
            try:
                super().__init__(**kwargs)
            except (_SvgCircularReference, TypeError) as e:
                # cairosvg's own "No tag with id=..." for a tref naming no element (a <use> of none draws nothing)
                missing = isinstance(e, TypeError) and str(e).startswith("No tag with id=")
                if parent is None or not (missing or isinstance(e, _SvgCircularReference)):
                    raise
                self.clear()
                self.xml_tree = Element("{http://www.w3.org/2000/svg}tspan")
                self.element, self.tag, self.text = cssselect2.ElementWrapper.from_xml_root(self.xml_tree), "tspan", ""
                self.style, self.url_fetcher, self.unsafe = parent.style, parent.url_fetcher, parent.unsafe
                self.url, self.parent, self.children, self.root = parent.url, parent, [], True

    return TrefTree


def _lenient_length_reader(size):
    """cairosvg's length reader ``size`` reading lengths as CSS does (``_css_length``: units in any case, ``rem``,
    ``Q``, viewport units), a value that is none as 0 (a list item of one: cairosvg's reading of an unknown unit)."""

    def lenient_size(surface, string, reference="xy"):
        if isinstance(string, str) and string.strip():
            try:
                # a bare number, most values of an exported chart: cairosvg's own first reading, which the CSS
                # rewrite leaves as it is (its regex on each made drawing a matplotlib SVG ~15% slower)
                return float(string)
            except ValueError:
                string = _css_length(string) or string
            if string.startswith("calc(\x01"):  # a calc() of several units: each read here
                px = _calc_px(surface, string, reference, size)
                if px is not None:
                    return px
        try:
            return size(surface, string, reference)
        except ValueError:  # not a length (a list item of one): read as 0, as cairosvg reads an unknown unit
            return 0

    lenient_size.__wrapped__ = size
    return lenient_size


def _relative_font_size(value) -> bool:
    """Whether a ``font-size`` computes from the parent's size (em / ex / ch / ``%`` / calc()): only such a value
    differs inherited (the parent's computed px) from declared again (of the parent's px)."""
    text = str(value).strip()
    if is_calc(text):
        return True
    m = _SVG_LENGTH.fullmatch(text)
    return m is not None and m.group(2).lower() in ("em", "ex", "ch", "%")


def _declares_font_size(node, element) -> bool:
    """Whether ``element`` declares its own ``font-size`` other than ``inherit`` (an attribute, its style attribute,
    a style sheet rule), where its cairosvg ``node`` holds its parent's very value (one declaration of a rule
    matching both is one string object)."""
    import cairosvg.css

    own = element.etree_element
    declared = [("font-size", own.get("font-size"))] if own.get("font-size") is not None else []
    if own.get("style"):
        for declarations in cairosvg.css.parse_declarations(own.get("style")):
            declared += declarations
    for matcher in node.style:
        for rule in matcher.match(element):
            declared += rule[-1]
    return any(name == "font-size" and str(value).strip() != "inherit" for name, value in declared)


def _svg_font_sizes_computed() -> None:
    """cairosvg's ``Surface.draw`` with each element's ``font-size`` computed as CSS computes it (job child only,
    once): em / ex / ch / ``%`` / calc() of the parent's computed size, an inherited one the parent's computed size in
    px. cairosvg re-read an inherited ``2em`` against the parent's own size (twice as large at each level below a
    ``<g font-size="2em">``) and read ``%`` against the viewport (``font-size="200%"`` drew 150 px letters)."""
    import cairosvg.surface

    surface_class = cairosvg.surface.Surface
    if getattr(surface_class, "_font_sizes_computed", False):
        return
    draw = surface_class.draw

    def draw_with_computed_font_size(self, node):
        if isinstance(node, dict) and "font-size" in node:
            parent_px = getattr(self, "font_size", _CSS_REM_PX)  # the parent's computed size while it draws
            if getattr(node, "_font_size_inherited", False):
                node["font-size"] = f"{parent_px!r}px"
            else:
                px = _font_size_px(node["font-size"], parent_px, _SVG_REM_PX[0])
                if px is not None:
                    node["font-size"] = f"{px!r}px"
        return draw(self, node)

    surface_class.draw = draw_with_computed_font_size
    surface_class._font_sizes_computed = True


def _select_text_font(context, node, font_px: float) -> None:
    """The font cairosvg's ``text`` selects for ``node`` (its first family, slant, weight), at ``font_px``."""
    from cairosvg.surface import cairo  # cairocffi, as cairosvg imports it

    family = (node.get("font-family") or "sans-serif").split(",")[0].strip("\"' ")
    slant = getattr(cairo, f'font_slant_{node.get("font-style")}'.upper(), cairo.FONT_SLANT_NORMAL)
    weight = node.get("font-weight")
    if weight and weight.isdigit() and int(weight) >= 550:
        weight = "bold"
    context.select_font_face(family, slant, getattr(cairo, f"font_weight_{weight}".upper(), cairo.FONT_WEIGHT_NORMAL))
    context.set_font_size(font_px)


def _text_font_px(surface, node, parent_px: float) -> float:
    """``node``'s font size in px as ``Surface.draw`` computes it once ``_svg_font_sizes_computed`` has run (a text
    node's children are laid out before they are drawn)."""
    import cairosvg.text

    if getattr(node, "_font_size_inherited", False):
        return parent_px
    value = _with_font_shorthand(node).get("font-size", "12pt")
    px = _font_size_px(value, parent_px, _SVG_REM_PX[0])
    if px is None:
        saved, surface.font_size = surface.font_size, parent_px
        try:
            px = cairosvg.text.size(surface, value)
        finally:
            surface.font_size = saved
    return px


def _with_font_shorthand(node):
    """``node``'s properties with its ``font`` shorthand's parts it lacks, as ``Surface.draw`` adds them when it draws
    the node (a text's children are laid out before that)."""
    if "font" not in node:
        return node
    import cairosvg.surface

    return {**cairosvg.surface.parse_font(node["font"]), **node}


def _text_lists(surface, node) -> tuple[list, list, list]:
    """``node``'s x / y / dx lists read as cairosvg's ``text`` reads them (with ``surface.font_size`` its own)."""
    import cairosvg.helpers
    import cairosvg.text

    def read(name, reference):
        if name not in node:
            return []
        return [cairosvg.text.size(surface, v, reference)
                for v in cairosvg.helpers.normalize(node[name]).strip().split(" ")]

    return read("x", "x"), read("y", "y"), read("dx", "x")


def _text_letters(surface, root) -> list[tuple]:
    """Each letter of the ``<text>`` ``root`` as cairosvg lays it out with every anchor ``start``, in drawing order:
    (node, index in its text, x drawn at, advance, starts a chunk). A chunk (SVG 2 text.html#TextAnchoringProperties)
    starts at the first letter and at each letter with an absolute x or y (the letter's own, or of a text-less
    element just before it)."""
    import cairosvg.text

    letters, cursor, shift, origin = [], 0.0, 0.0, True
    todo = [(root, surface.font_size)]
    context, font_px = surface.context, surface.font_size
    while todo:
        node, parent_px = todo.pop()
        px = font_px if node is root else _text_font_px(surface, node, parent_px)
        context.save()
        saved, surface.font_size = surface.font_size, px
        try:
            _select_text_font(context, _with_font_shorthand(node), px)
            spacing = cairosvg.text.size(surface, node.get("letter-spacing"))
            xs, ys, dxs = _text_lists(surface, node)
            if node.text:
                advances = {}  # one font per node: each distinct letter measured once (a cairo call costs ~10 us)
                for i, letter in enumerate(node.text):
                    x, y, dx = (lst.pop(0) if lst else None for lst in (xs, ys, dxs))
                    if x:  # cairosvg's own test: an absolute x of 0 keeps the dx before it
                        shift = 0.0
                    shift += dx or 0
                    at = (cursor if x is None else x) + (spacing if i else 0)
                    advance = advances.get(letter)
                    if advance is None:
                        advance = advances[letter] = context.text_extents(letter)[4]
                    letters.append((node, i, at + shift, advance, origin or x is not None or y is not None))
                    origin, cursor = False, at + advance
            else:
                cursor = (xs[0] if xs else cursor) + (dxs[0] if dxs else 0)
                origin = origin or bool(xs) or bool(ys)
        finally:
            surface.font_size = saved
            context.restore()
        if node.get("display", "inline") != "none":  # cairosvg draws no child of an undisplayed element
            todo.extend((child, px) for child in reversed(node.children) if child.tag in _SVG_TEXT_TAGS)
    return letters


def _chunk_shifts(letters: list[tuple]) -> dict[int, list[float]]:
    """id() of each text node -> the shift along x of each of its letters that anchors its chunk as SVG 2 does: the
    chunk's ink advance from its leftmost to its rightmost edge centred on (``middle``) or ending at (``end``) its
    first letter's position, by the ``text-anchor`` of the element holding that letter."""
    shifts: dict[int, list[float]] = {}
    starts = [k for k, letter in enumerate(letters) if letter[4]] + [len(letters)]
    for a, b in zip(starts, starts[1:]):
        chunk = letters[a:b]
        anchor = str(chunk[0][0].get("text-anchor", "start")).strip().lower()
        edges = [e for _, _, at, advance, _ in chunk for e in (at, at + advance)]
        move = {"middle": chunk[0][2] - (min(edges) + max(edges)) / 2, "end": chunk[0][2] - max(edges)}.get(anchor, 0.0)
        for node, i, *_ in chunk:
            if id(node) not in shifts:
                shifts[id(node)] = [0.0] * len(node.text)
            shifts[id(node)][i] = move
    return shifts


class _ShiftedMoves:
    """A cairo context whose n-th ``move_to`` lands ``shifts[n]`` further along x (cairosvg's ``text`` moves to each
    letter's position once); all else is the context's own."""

    def __init__(self, context, shifts: list[float]):
        self._context, self._shifts, self._moves = context, shifts, 0

    def move_to(self, x, y):
        shift = self._shifts[self._moves] if self._moves < len(self._shifts) else 0.0
        self._moves += 1
        return self._context.move_to(x + shift, y)

    def __getattr__(self, name):
        value = getattr(self._context, name)
        setattr(self, name, value)  # looked up once: text() calls ~10 of them per letter
        return value


def _has_text_path(node) -> bool:
    todo = [node]
    while todo:
        node = todo.pop()
        if node.tag == "textPath":
            return True
        todo.extend(node.children)
    return False


# id() of each text node being drawn -> its letters' anchoring shifts, set when its <text> is laid out
_TEXT_SHIFTS: dict[int, list[float]] = {}
_TEXT_ROOT = [0]  # id() of the <text> node they belong to


def _svg_text_chunks_anchored() -> None:
    """cairosvg's ``text`` anchoring each text chunk as a whole, as SVG 2 and browsers do (job child only, once).

    cairosvg anchored each element's own text by its own width: ``<text x="100" text-anchor="middle">x<tspan>2
    </tspan><tspan> + y</tspan></text>`` centred "x" on 100, then drew "2" and " + y" each pulled back by half its
    width (ink 82-167 px); ``end`` likewise. Now each ``<text>`` (without a ``<textPath>``: cairosvg's own) is laid
    out first (``_text_letters``), every element's letters are drawn with anchor ``start`` and each shifted by its
    chunk's anchoring (``_chunk_shifts``): tspans with their own x / dx / font size / anchor, nested ones, x lists."""
    import cairosvg.surface
    import cairosvg.text

    text = cairosvg.text.text
    if getattr(text, "_chunks_anchored", False):
        return

    def anchored_text(surface, node, draw_as_text=False):
        if node.tag == "text" and (not draw_as_text or _TEXT_ROOT[0] != id(node)):
            # laid out at its first call in Surface.draw (its path); its fill, right after, reuses that layout
            _TEXT_SHIFTS.clear()
            _TEXT_ROOT[0] = id(node)
            if not _has_text_path(node):
                _TEXT_SHIFTS.update(_chunk_shifts(_text_letters(surface, node)))
        shifts = _TEXT_SHIFTS.get(id(node))
        if shifts is None:
            return text(surface, node, draw_as_text)
        anchor, context = node.get("text-anchor"), surface.context
        node["text-anchor"], surface.context = "start", _ShiftedMoves(context, shifts)
        try:
            return text(surface, node, draw_as_text)
        finally:
            surface.context = context
            if anchor is None:
                node.pop("text-anchor", None)
            else:
                node["text-anchor"] = anchor
            box = node.get("text_bounding_box")
            if box is not None and shifts:
                node["text_bounding_box"] = (box[0] + min(shifts), box[1], box[2] + max(shifts) - min(shifts), box[3])

    anchored_text._chunks_anchored = True
    cairosvg.text.text = anchored_text
    cairosvg.surface.text = anchored_text  # Surface.draw tests `TAGS[node.tag] == text` against this name
    for tag, drawer in list(cairosvg.surface.TAGS.items()):
        if drawer is text:
            cairosvg.surface.TAGS[tag] = anchored_text


# CSS Color 4 forms cairosvg (2.9) misreads: hsl() / hsla() (drawn black: every `fill="hsl(210, 70%, 50%)"` of a chart),
# rgb() / rgba() with spaces, a slash or four arguments (`rgb(255 0 0)`: a `crash`), #rrggbbaa / #rgba (alpha dropped)
_CSS_COLOUR_FUNCTION = re.compile(r"(rgba?|hsla?)\(([^()]*)\)")
_CSS_NUMBER = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)(%|deg|grad|rad|turn)?")  # unambiguous: linear
_HUE_TURNS = {None: 1 / 360, "deg": 1 / 360, "grad": 1 / 400, "rad": 1 / (2 * math.pi), "turn": 1.0}


def _css_colour_rgba(string: str) -> tuple[float, float, float, float] | None:
    """(r, g, b, alpha), each in [0, 1], of a CSS colour in one of the forms cairosvg misreads, else None (its own
    reading stands). Linear: one anchored match without nested repetition, then a split of its arguments."""
    text = string.strip().lower()
    if text.startswith("#") and len(text) in (5, 9) and all(c in "0123456789abcdef" for c in text[1:]):
        digits = [text[i] * 2 for i in range(1, 5)] if len(text) == 5 else [text[i:i + 2] for i in range(1, 9, 2)]
        return tuple(int(d, 16) / 255 for d in digits)
    m = _CSS_COLOUR_FUNCTION.fullmatch(text)
    if m is None:
        return None
    main, slash, alpha = m.group(2).partition("/")
    args = [a.strip() for a in main.split(",")] if "," in main else main.split()
    if slash:
        if "," in main:
            return None  # the slash belongs to the space-separated syntax only
        args.append(alpha.strip())
    if len(args) not in (3, 4):
        return None
    parsed = [_CSS_NUMBER.fullmatch(a) for a in args]
    if None in parsed:
        return None
    values = [(float(p.group(1)), p.group(2)) for p in parsed]
    if not all(math.isfinite(v) for v, _ in values):
        return None
    a = 1.0
    if len(values) == 4:
        v, unit = values[3]
        a = v / 100 if unit == "%" else v if unit is None else None
        if a is None:
            return None
    if m.group(1).startswith("hsl"):
        (h, h_unit), (sat, s_unit), (light, l_unit) = values[:3]
        if h_unit == "%" or s_unit not in (None, "%") or l_unit not in (None, "%"):  # CSS 4: `hsl(0 100 50)` too
            return None
        rgb = colorsys.hls_to_rgb((h * _HUE_TURNS[h_unit]) % 1.0, min(max(light / 100, 0.0), 1.0),
                                  min(max(sat / 100, 0.0), 1.0))
    else:
        if any(unit not in (None, "%") for _, unit in values[:3]):
            return None
        rgb = tuple(v / 100 if unit == "%" else v / 255 for v, unit in values[:3])
    return tuple(min(max(c, 0.0), 1.0) for c in (*rgb, a))


def _svg_colours_read_as_css() -> None:
    """cairosvg's colour reader (``surface.color``, behind every fill, stroke, stop and flood colour) taking the CSS
    Color 4 forms it misread (``_css_colour_rgba``) first (job child only, once)."""
    import cairosvg.surface

    read = cairosvg.surface.color
    if getattr(read, "_css_forms", False):
        return

    def color(string, opacity=1):
        rgba = _css_colour_rgba(string) if isinstance(string, str) else None
        if rgba is None:
            return read(string, opacity)
        return (*rgba[:3], rgba[3] * opacity)

    color._css_forms = True
    cairosvg.surface.color = color


# CSS custom properties (`--name: value`, css-variables-1) and var(): cairosvg dropped the declarations and drew each
# `fill="var(--c)"` black. A substitution whose result passes this many characters is invalid at computed-value time,
# as css-variables-1 section 3 lets a UA bound it (`--b: var(--a) var(--a)` doubled per level: 30 levels are 2^30)
CSS_VAR_MAX_CHARS = 65_536
_CSS_VAR_OPEN = re.compile(r"(?<![\w-])var\(", re.IGNORECASE)
_CSS_IDENT_CHARS = re.compile(r"\s*(--[\w-]*)\s*([,)]?)")
# id() of a property value -> (that value, whether it holds a var()): a value one style rule gives every element is one
# object, scanned once (a 1 MB custom property on `*` was otherwise read again at each element)
_CSS_VAR_SCANS: dict[int, tuple[str, bool]] = {}


def _holds_var(value: str) -> bool:
    known = _CSS_VAR_SCANS.get(id(value))
    if known is None or known[0] is not value:
        known = _CSS_VAR_SCANS[id(value)] = (value, _CSS_VAR_OPEN.search(value) is not None)
    return known[1]


def _closing_parens(text: str) -> dict[int, int]:
    """Index of each ``(`` -> index of its ``)`` (``len(text)`` where the value ends first: CSS closes open blocks
    there). One pass; quoted strings are not told apart (a ``)`` inside quotes in a var() fallback is misread)."""
    closes, opened = {}, []
    for i, c in enumerate(text):
        if c == "(":
            opened.append(i)
        elif c == ")" and opened:
            closes[opened.pop()] = i
    for i in opened:
        closes[i] = len(text)
    return closes


def _substitute_vars(text: str, lookup) -> str | None:
    """``text`` with each ``var(--name)`` / ``var(--name, fallback)`` replaced by ``lookup(name)`` (a str, or None for
    a property with no value), else by its fallback, itself substituted; None where a var() names nothing and has no
    fallback, is not ``var(<custom property name> ...)`` or the result passes ``CSS_VAR_MAX_CHARS``: the declaration
    is then invalid at computed-value time. Iterative and linear in ``text``: 10,000 nested fallbacks cost one pass."""
    if len(text) > CSS_VAR_MAX_CHARS:
        return None
    closes = _closing_parens(text)
    out, size, todo = [], 0, [(0, len(text))]
    while todo:
        pos, end = todo.pop()
        m = _CSS_VAR_OPEN.search(text, pos, end)
        piece = text[pos:end] if m is None else text[pos:m.start()]
        out.append(piece)
        size += len(piece)
        if m is None:
            continue
        close = min(closes[m.end() - 1], end)
        todo.append((close + 1, end))  # what follows this var(), after its value or fallback
        name = _CSS_IDENT_CHARS.match(text, m.end(), close + 1 if close < len(text) else close)
        if name is None or len(name.group(1)) < 3 or (name.end() < close and not name.group(2)):
            return None  # not a custom property's name (`--` alone is reserved), or junk after it
        value = lookup(name.group(1))
        if value is not None:
            out.append(value)
            size += len(value)
        elif name.group(2) == ",":
            todo.append((name.end(), close))  # the fallback: everything up to the var()'s `)`
        else:
            return None
        if size > CSS_VAR_MAX_CHARS:
            return None
    return "".join(out).strip()


def _resolve_custom_properties(node, parent) -> None:
    """``node``'s own custom properties (those not its parent's very value) with their var()s substituted, each
    against the element's other custom properties (in a cycle, every member is invalid) and the inherited ones.
    An invalid one takes the guaranteed-invalid value, CSS's initial value: it is removed, and its children inherit
    none."""
    own = {n for n in node if n.startswith("--") and (parent is None or node[n] is not parent.get(n))
           and _holds_var(node[n])}
    state: dict[str, str | None] = {}  # name -> its value resolved (None: invalid); _RESOLVING while on the stack
    cyclic = set()

    def lookup(ref):
        return state.get(ref) if ref in own else node.get(ref)

    for start in own:
        if start in state:
            continue
        state[start] = _RESOLVING
        stack = [(start, iter(_var_refs(node[start])))]
        while stack:  # depth first without recursion: a chain of 10,000 custom properties on one element
            name, refs = stack[-1]
            ref = next((r for r in refs if r in own and (r not in state or state[r] is _RESOLVING)), None)
            if ref is not None and ref in state:  # back up the stack: each name on it since then is in a cycle
                names = [n for n, _ in stack]
                cyclic.update(names[names.index(ref):])
                continue
            if ref is not None:
                state[ref] = _RESOLVING
                stack.append((ref, iter(_var_refs(node[ref]))))
                continue
            stack.pop()
            state[name] = None if name in cyclic else _substitute_vars(node[name], lookup)
    for name in own:
        if state[name] is None:
            del node[name]
        else:
            node[name] = state[name]


def _var_refs(value: str) -> list[str]:
    """The custom property names ``value``'s var()s name; none for a value too long to substitute (it is invalid)."""
    return [] if len(value) > CSS_VAR_MAX_CHARS else _CSS_VAR_REFS.findall(value)


_RESOLVING = object()
_CSS_VAR_REFS = re.compile(r"(?i:var)\(\s*(--[\w-]*)")


def _current_colour(node, parent, name: str) -> str:
    """What ``currentcolor`` is on ``node``: its ``color`` (itself ``currentcolor``: the parent's), black initially."""
    colour = node.get("color", "black")
    if colour.strip().lower() == "currentcolor":
        colour = parent.get("color", "black") if parent is not None else "black"
    return colour


def _compute_properties(node, parent) -> None:
    """``node``'s properties computed as CSS computes them, where cairosvg left them as declared (job child only;
    called once per node, before its children are built, as they copy what they inherit from it):
    custom properties and var() substituted (an invalid result: the property as if not declared, its inherited value
    for an inherited property, else none), ``currentcolor`` in any case read as ``color`` (cairosvg knew only
    ``currentColor``), and inherited as the keyword, as CSS Color 4 does: a child's own ``color`` recolours it."""
    import cairosvg.parser

    _resolve_custom_properties(node, parent)
    for name in [n for n in node if not n.startswith("--")]:
        value = node[name]
        if not isinstance(value, str) or (parent is not None and value is parent.get(name)) or not _holds_var(value):
            continue
        value = _substitute_vars(value, node.get)
        if value is not None and value.lower() == "inherit":
            value = parent.get(name) if parent is not None else None
        if value is not None:
            node[name] = value
        elif parent is not None and name in parent and name not in cairosvg.parser.NOT_INHERITED_ATTRIBUTES:
            node[name] = parent[name]  # invalid at computed-value time: unset, an inherited property's parent value
        else:
            del node[name]
    keyword = set()
    for name in _CSS_COLOUR_PROPERTIES:
        value = node.get(name)
        inherited_keyword = (parent is not None and name in getattr(parent, "_current_colour", ())
                             and value is parent.get(name))
        if isinstance(value, str) and (inherited_keyword or value.strip().lower() == "currentcolor"):
            node[name] = _current_colour(node, parent, name)
            keyword.add(name)
    if node.get("color", "").strip().lower() == "currentcolor":  # `color: currentcolor` is `inherit`
        node["color"] = _current_colour(node, parent, "color")
    node._current_colour = frozenset(keyword)
    node._computed = True


_CSS_COLOUR_PROPERTIES = ("fill", "stroke", "stop-color", "flood-color", "lighting-color")


def _custom_property_declarations(parse):
    """cairosvg's ``css.parse_declarations`` keeping custom property declarations (cairosvg dropped each name
    starting with ``-``), under their case-sensitive names, as CSS keeps them."""
    import tinycss2

    def parse_declarations(input):
        normal, important = parse(input)
        for declaration in tinycss2.parse_declaration_list(input):
            if declaration.type == "declaration" and declaration.name.startswith("--"):
                value = tinycss2.serialize(declaration.value).strip()
                (important if declaration.important else normal).append((declaration.name, value))
        return normal, important

    parse_declarations._custom = True
    return parse_declarations


def _svg_properties_computed_as_css() -> None:
    """cairosvg's nodes with custom properties, var() and ``currentcolor`` computed as CSS does (``_compute_properties``,
    which ``_svg_values_read_as_css``'s reading of each node calls, in the frame it already adds per level of nesting,
    so a length from a var() is read as any length is; job child only, once): here custom property declarations are
    kept and cairosvg's own ``currentColor`` replacement is left to it."""
    import cairosvg.css
    import cairosvg.parser

    if getattr(cairosvg.css.parse_declarations, "_custom", False):
        return
    cairosvg.css.parse_declarations = _custom_property_declarations(cairosvg.css.parse_declarations)
    cairosvg.parser.COLOR_ATTRIBUTES = frozenset()  # currentColor: computed there, in any case, inherited as a keyword


def _svg_values_read_as_css() -> None:
    """cairosvg's nodes with each length, number and viewBox read as SVG 2 reads them (job child only, once).

    A value that is not one (``width="calc(10px * 5px)"``, ``"xpx"``, ``"--5"``, ``"1e400"``, ``opacity="x"``, a viewBox of
    three numbers) was a ``crash`` (cairosvg's float() failing, or cairo's invalid matrix for an infinite one); SVG 2
    treats an invalid value as if the attribute were not specified, and so it is now: the element's inherited value
    where the property is inherited, else cairosvg's default for a missing one (a nested svg's 100%, a rect's
    0: not drawn). ``calc()`` is evaluated (``_css_length``); an invalid one is such a value. The root's width / height are the canvas:
    ``_normalise_root_size`` reads them, and one that is no length is ``invalid_size``. Units in any case, ``rem`` (16
    px: CSS's initial font size), ``Q`` and the viewport units are read as lengths everywhere (``1rem`` on a rect was a
    ``crash``); the length reader does the same for lengths inside lists (``stroke-dasharray``, text's x / y,
    ``points``), reading one that is none as 0 (cairosvg's reading of an unknown unit)."""
    import cairosvg.helpers
    import cairosvg.parser

    node_class = cairosvg.parser.Node
    if getattr(node_class, "_read_as_css", False):
        return
    init = node_class.__init__

    def __init__(self, element, style, url_fetcher, parent=None, *args, **kwargs):
        key = id(element.etree_element)
        # a <tref> naming an element whose node is being built, a <use> naming one being drawn: circular, refused
        # before its subtree is built (a <use> of the root built the whole document each time). Only a <use>'s own
        # target: a pattern's href chain builds nodes of elements being drawn (its children), and is no cycle
        used = parent is not None and getattr(parent, "tag", None) == "use"
        if key in _SVG_ELEMENTS_BUILDING or (used and key in _SVG_ELEMENTS_DRAWING):
            raise _SvgCircularReference
        _SVG_ELEMENTS_BUILDING.add(key)
        if parent is not None and not getattr(parent, "_computed", True):
            _compute_properties(parent, getattr(parent, "parent", None))  # its first child: it is complete now
        self._computed = False
        try:
            init(self, element, style, url_fetcher, parent, *args, **kwargs)
        finally:
            _SVG_ELEMENTS_BUILDING.discard(key)
        if not self._computed:
            _compute_properties(self, parent)  # before its values are read below: a var() may give a length
        if (parent is not None and "font-size" in self and self["font-size"] is parent.get("font-size")
                and _relative_font_size(self["font-size"])):  # an absolute size is the same inherited or declared
            self._font_size_inherited = not _declares_font_size(self, element)
        canvas = parent is None  # the document's root: its width / height / viewBox are read by _normalise_root_size
        for name in [n for n in self if n in _SVG_CHECKED_ATTRS]:
            if canvas and name in ("width", "height", "viewBox"):
                continue
            value = _read_svg_value(self, name, self[name])
            if value is not None:
                self[name] = value
            elif parent is not None and name in parent and name not in cairosvg.parser.NOT_INHERITED_ATTRIBUTES:
                self[name] = parent[name]  # an invalid declaration is dropped: the inherited value stands
            else:
                del self[name]

    node_class.__init__ = __init__
    node_class._read_as_css = True
    cairosvg.parser.Tree = _tref_tree_class(cairosvg.parser.Tree)  # the name text_children builds a <tref>'s with
    size = cairosvg.helpers.size
    lenient_size = _lenient_length_reader(size)
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("cairosvg.") and getattr(module, "size", None) is size:
            module.size = lenient_size


# id() of the XML elements whose drawing is under way, across every cairosvg surface of the job (patterns, masks and
# markers are drawn on surfaces of their own): an element drawn again inside its own drawing is a circular reference
_SVG_ELEMENTS_DRAWING: set[int] = set()


def _svg_circular_references_not_drawn() -> None:
    """cairosvg's ``Surface.draw`` skipping an element already being drawn further up (job child only, once).

    A ``<use>`` of its own ancestor (the root ``<svg>``, its parent ``<g>``, itself) or two ``<use>`` naming each
    other, a marker / mask / clip path / pattern whose content references itself: cairosvg recursed until Python's
    limit, a ``crash`` (RecursionError). SVG 2 makes such a reference an error and the element in error is not
    rendered (struct.html#UseElement: a reference to an ancestor is an invalid circular reference); so it is
    now, the rest of the document drawn as it is."""
    import cairosvg.surface

    surface_class = cairosvg.surface.Surface
    if getattr(surface_class, "_draws_acyclic", False):
        return
    draw = surface_class.draw

    def draw_unless_circular(self, node):
        element = getattr(getattr(node, "element", None), "etree_element", None)
        key = id(element) if element is not None else None
        if key in _SVG_ELEMENTS_DRAWING:
            return None  # circular: in error, not rendered
        if key is not None:
            _SVG_ELEMENTS_DRAWING.add(key)
        try:
            return draw(self, node)
        finally:
            _SVG_ELEMENTS_DRAWING.discard(key)

    surface_class.draw = draw_unless_circular
    surface_class._draws_acyclic = True
    # this wrapper is one more Python frame per level of nesting: as deep a document as before still draws (400
    # nested <g> did, then failed at Python's recursion limit); Python-to-Python calls take no C stack here
    sys.setrecursionlimit(min(2 * sys.getrecursionlimit(), _C_INT_MAX))  # a python job may have set it to INT_MAX


def _svg_bounding_boxes_never_missing() -> None:
    """cairosvg's bounding boxes where a marker or a pattern reads one (job child only, once).

    cairosvg stores no box for an element of no area (a horizontal line, a marker holding only a tick or nothing) and
    read the missing box as a tuple: a marker without a viewBox around such content, and a pattern in
    objectBoundingBox units painting a horizontal line, were a ``crash`` (``TypeError: 'NoneType' object is not
    subscriptable``). The marker's content is now drawn at its own scale (a box of markerWidth x markerHeight, what a
    browser does without a viewBox), the pattern is not painted (a box of no size, as cairosvg already treats a
    gradient: SVG ignores an objectBoundingBox effect on an element of no width or height). The box of a ``<use>`` of
    an element being drawn (a circular reference, not rendered) is empty."""
    import cairosvg.bounding_box
    import cairosvg.defs
    import cairosvg.path

    methods = cairosvg.bounding_box.BOUNDING_BOX_METHODS
    if getattr(cairosvg.path.calculate_bounding_box, "_never_missing", False):
        return
    calculate, use_box = cairosvg.bounding_box.calculate_bounding_box, methods["use"]

    def box_or_stand_in(surface, node):
        box = calculate(surface, node)
        if box is not None:
            return box
        if node.tag == "marker":
            return (0, 0, cairosvg.path.size(surface, node.get("markerWidth", "3"), "x"),
                    cairosvg.path.size(surface, node.get("markerHeight", "3"), "y"))
        return (0, 0, 0, 0)

    def box_of_use(surface, node):
        try:
            return use_box(surface, node)
        except _SvgCircularReference:
            return cairosvg.bounding_box.EMPTY_BOUNDING_BOX

    box_or_stand_in._never_missing = True
    cairosvg.path.calculate_bounding_box = cairosvg.defs.calculate_bounding_box = box_or_stand_in
    methods["use"] = box_of_use


_SVG_MARKER_PROPERTIES = ("marker", "marker-start", "marker-mid", "marker-end")


def _marker_renders(surface, reference: str) -> bool:
    """Whether the marker property value ``reference`` names a marker that draws: one that exists, its markerWidth and
    markerHeight not zero (SVG: a zero size disables its rendering; no reference is none's, nothing to skip)."""
    import cairosvg.helpers
    import cairosvg.url

    fragment = cairosvg.url.parse_url(reference).fragment
    if not fragment:
        return True
    marker = surface.markers.get(fragment)
    if marker is None:
        return False
    size = cairosvg.helpers.size
    return (size(surface, marker.get("markerWidth", "3"), "x") != 0
            and size(surface, marker.get("markerHeight", "3"), "y") != 0)


def _svg_markers_that_cannot_render_not_drawn() -> None:
    """cairosvg's markers drawn only where they render (job child only, once): a marker reference naming no marker
    (``marker-end="url(#missing)"``) was a ``crash`` (AttributeError on None), a marker of markerWidth or
    markerHeight 0 one too (ZeroDivisionError scaling it; with content of no area, the stand-in box of
    ``_svg_bounding_boxes_never_missing`` is that size). SVG: such a marker is not rendered; the path is."""
    import cairosvg.surface

    draw_markers = cairosvg.surface.draw_markers
    if getattr(draw_markers, "_renderable_only", False):
        return

    def draw_renderable_markers(surface, node):
        for name in _SVG_MARKER_PROPERTIES:
            if isinstance(node.get(name), str) and not _marker_renders(surface, node[name]):
                node[name] = "none"
        return draw_markers(surface, node)

    draw_renderable_markers._renderable_only = True
    cairosvg.surface.draw_markers = draw_renderable_markers


def _drawable_matrix(matrix) -> bool:
    """Whether cairo accepts ``matrix`` as a context's transformation: finite, its determinant finite and not zero
    (cairo's own test: otherwise ``INVALID_MATRIX``, which also leaves the context unusable)."""
    xx, yx, xy, yy, x0, y0 = matrix.as_tuple()
    det = xx * yy - yx * xy
    return all(math.isfinite(v) for v in (xx, yx, xy, yy, x0, y0)) and math.isfinite(det) and det != 0


# FreeType sizes a glyph in 16.16 fixed point: a font of 65536 px or more on the canvas is its error, and that error
# stays with the font face for the rest of the process (every later text of the document failed too)
FREETYPE_MAX_FONT_PX = 65535.0


def _font_matrix_drawable(matrix) -> bool:
    """Whether cairo can draw text under the font matrix times the context's, ``matrix``: a matrix it accepts
    (``_drawable_matrix``) and a font size on the canvas (its larger axis) FreeType can take (``font-size="1e5"``,
    or 1000 under ``scale(100)``, was cairo's ``FREETYPE_ERROR``, a ``crash``, where a browser draws a glyph larger
    than the image)."""
    return _drawable_matrix(matrix) and _device_radius(matrix, 1.0) <= FREETYPE_MAX_FONT_PX


def _svg_transforms_of_no_size_not_drawn() -> None:
    """cairo contexts that draw nothing more, instead of failing, under a transformation that would leave them none
    (job child only, once): ``transform="scale(1e300)"`` inside a scaled SVG overflows to a matrix cairo refuses
    (``CAIRO_STATUS_INVALID_MATRIX``), a ``crash``. CSS Transforms: an element whose transformation is not invertible
    is not displayed; cairosvg does so for a non-invertible ``transform`` attribute alone (an empty clip), and
    so the context now does for the product with its current one, and for scale / translate / rotate."""
    import cairocffi

    context_class = cairocffi.Context
    if getattr(context_class, "_refuses_no_size", False):
        return

    def checked(operation, trial, drawable=_drawable_matrix):
        def apply(self, *args, **kwargs):
            if drawable(trial(self.get_matrix(), *args, **kwargs)):
                return operation(self, *args, **kwargs)
            path = self.copy_path()  # the empty clip hides what follows; the path being built is kept
            self.new_path()
            self.clip()
            self.append_path(path)
            return None
        return apply

    def moved(name):
        def trial(matrix, *args, **kwargs):
            getattr(matrix, name)(*args, **kwargs)
            return matrix
        return trial

    context_class.transform = checked(context_class.transform, lambda current, m: m.multiply(current))
    # a font of 1e300 px is a font matrix cairo refuses the same way (INVALID_MATRIX): its text is not drawn; so is
    # one past FreeType's size on the canvas (``_font_matrix_drawable``)
    context_class.set_font_size = checked(context_class.set_font_size,
                                          lambda current, px: cairocffi.Matrix(px, 0, 0, px, 0, 0).multiply(current),
                                          _font_matrix_drawable)
    for name in ("scale", "translate", "rotate"):
        setattr(context_class, name, checked(getattr(context_class, name), moved(name)))
    context_class._refuses_no_size = True

    import cairosvg.helpers

    transform = cairosvg.helpers.transform

    def transform_or_hide(surface, *args, **kwargs):
        # cairosvg inverts a transform attribute's matrix twice: one that overflows to infinity inverts to 0 and
        # then fails (``matrix(1e300 0 0 1e300 0 0) matrix(1e300 0 0 1e300 0 0)``); it is one of no size too
        try:
            return transform(surface, *args, **kwargs)
        except cairocffi.CairoError as e:
            if getattr(e, "status", None) != cairocffi.STATUS_INVALID_MATRIX:
                raise
            surface.context.new_path()
            surface.context.clip()
            return None

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("cairosvg") and getattr(module, "transform", None) is transform:
            module.transform = transform_or_hide


# cairo's device space is 24.8 fixed point: a point past 2**23 px is clamped, and an arc whose radius on the canvas
# is past that costs cairo more the larger it is (its search for a segment angle takes ~(radius / tolerance) ** (1/6)
# steps per arc: 0.003 ms at 8e6 px, 1 ms at 1e8, 15 ms at 1e12, no end at 1e38, so `<circle r="1e308">` ran to the
# timeout)
SVG_MAX_ARC_RADIUS_PX = float(2 ** 23)


def _device_radius(matrix, radius: float) -> float:
    """The largest radius on the device of a circle of ``radius`` under ``matrix`` (its larger singular value, in
    a form that overflows to infinity, never to NaN)."""
    xx, yx, xy, yy, _, _ = matrix.as_tuple()
    return abs(radius) * (math.hypot(xx + yy, yx - xy) + math.hypot(xx - yy, yx + xy)) / 2


def _arc_sweep(angle1: float, angle2: float) -> float:
    """The angle an arc from ``angle1`` to ``angle2`` sweeps as cairo draws it (``angle2`` raised by whole turns
    until it is not below ``angle1``)."""
    sweep = angle2 - angle1
    return sweep if sweep >= 0 else sweep % (2 * math.pi)


def _svg_arcs_past_cairo_range_refused() -> None:
    """cairo arcs of a radius past ``SVG_MAX_ARC_RADIUS_PX`` on the device refused (job child only, once): a circle,
    ellipse or path arc of radius 1e308 (or 10 under ``scale(1e150)``) ran to the job's timeout inside cairo. One
    that is flat within cairo's tolerance (a path ``A`` of radius 1e20 between points 10 px apart) is its chord, as
    cairo draws it; any other is ``too_large``: cairo can place none of its far points."""
    import cairocffi

    context_class = cairocffi.Context
    if getattr(context_class, "_arcs_in_range", False):
        return

    def checked(draw, sweep_of):
        def arc(self, xc, yc, radius, angle1, angle2):
            device = _device_radius(self.get_matrix(), radius)
            if not device <= SVG_MAX_ARC_RADIUS_PX:
                sweep = sweep_of(angle1, angle2)
                sagitta = 2 * device * math.sin(min(sweep, math.pi) / 4) ** 2
                if not sagitta <= self.get_tolerance():
                    raise _SvgTooLarge(f"SVG arc of radius {device:g} px on the canvas exceeds the "
                                       f"{SVG_MAX_ARC_RADIUS_PX:g} px cairo draws")
                end = angle1 + (sweep if sweep_of is _arc_sweep else -sweep)
                self.line_to(xc + radius * math.cos(angle1), yc + radius * math.sin(angle1))
                self.line_to(xc + radius * math.cos(end), yc + radius * math.sin(end))
                return None
            return draw(self, xc, yc, radius, angle1, angle2)
        return arc

    context_class.arc = checked(context_class.arc, _arc_sweep)
    context_class.arc_negative = checked(context_class.arc_negative, lambda a1, a2: _arc_sweep(a2, a1))
    context_class._arcs_in_range = True


# pattern tiles cairo paints for one painted shape where a tile is scaled down to under 2x2 px on the canvas: cairo
# replays such a tile's drawing per tile (~7 us each at 1 px, more the more it is scaled down; a 5 px pattern at patternTransform
# scale(0.1) on a 400 px square, 640k tiles, took 5.6 s, at scale(0.03) it ran to the timeout, at scale(1e-6) cairo ran
# out of memory). Tiles of 2 px and more, or drawn at their own size, are drawn once and repeated: 640k of them took
# 0.24 s
SVG_MAX_SMALL_PATTERN_TILES = 100_000
SVG_SMALL_TILE_PX2 = 4.0


def _device_area(context, x1: float, y1: float, x2: float, y2: float) -> float:
    """The area on the canvas of the bounding box of user-space rectangle (x1, y1)-(x2, y2) under ``context``."""
    corners = [context.user_to_device(x, y) for x in (x1, x2) for y in (y1, y2)]
    xs, ys = [c[0] for c in corners], [c[1] for c in corners]
    return (max(xs) - min(xs)) * (max(ys) - min(ys))


def _pattern_tiles(context) -> tuple[float, float, float]:
    """(tiles, px2, surface_px2): how many tiles of ``context``'s pattern source cover its path's box within the
    clip, one tile's area on the canvas and its surface's own. The pattern matrix maps user space to the tile's
    surface, the CTM user space to the canvas: a tile's canvas area is its surface area over the one's determinant
    and times the other's."""
    source = context.get_source()
    width, height = _TILE_SIZES.get(_surface_key(source.get_surface()), (0.0, 0.0))
    xx, yx, xy, yy, _, _ = source.get_matrix().as_tuple()
    cxx, cyx, cxy, cyy, _, _ = context.get_matrix().as_tuple()
    surface_px2 = abs(width * height)
    px2 = surface_px2 * abs(cxx * cyy - cyx * cxy) / abs(xx * yy - yx * xy)
    half = context.get_line_width() / 2
    x1, y1, x2, y2 = context.path_extents()
    cx1, cy1, cx2, cy2 = context.clip_extents()
    box = (max(x1 - half, cx1), max(y1 - half, cy1), min(x2 + half, cx2), min(y2 + half, cy2))
    if box[2] <= box[0] or box[3] <= box[1]:
        return 0.0, px2, surface_px2
    return _device_area(context, *box) / px2, px2, surface_px2


def _svg_pattern_tiles_bounded() -> None:
    """cairosvg's patterns refused where cairo would paint more than ``SVG_MAX_SMALL_PATTERN_TILES`` tiles scaled
    down to under ``SVG_SMALL_TILE_PX2`` px2 for one shape (job child only, once): ``too_large`` at once, as an arc past cairo's
    range is. A 5 px pattern under patternTransform="scale(1e-6)" was ``memory``, at scale(0.03) a ``timeout``."""
    import cairosvg.defs

    draw_pattern = cairosvg.defs.draw_pattern
    if getattr(draw_pattern, "_tiles_bounded", False):
        return

    def bounded(surface, node, name, opacity):
        drawn = draw_pattern(surface, node, name, opacity)
        if drawn:
            tiles, px2, surface_px2 = _pattern_tiles(surface.context)
            shrunk = not px2 >= min(SVG_SMALL_TILE_PX2, surface_px2)  # a tile drawn at its size is drawn once
            if shrunk and not tiles <= SVG_MAX_SMALL_PATTERN_TILES:
                raise _SvgTooLarge(f"SVG pattern: {tiles:.3g} tiles of {px2:.3g} px2 on the canvas exceed the "
                                   f"{SVG_MAX_SMALL_PATTERN_TILES:g} cairo draws in time")
        return drawn

    bounded._tiles_bounded = True
    cairosvg.defs.draw_pattern = bounded


# ancestor paths cssselect2 may walk for one document's style sheets: its compiled selector tries every ancestor for
# each descendant combinator, so `h g g ... g rect` (13 combinators) against a rect 24 deep walked C(24, 13) = 2.5M
# paths, 3.1 s (1.2 us each); 16 combinators 32 deep ran to the timeout
SVG_MAX_SELECTOR_PATHS = 2_000_000
# elements of the document whose style sheets are being compiled, by local name (None: all), then by depth (set
# while cairosvg parses them)
_SVG_DEPTH_COUNTS: list[dict] = [{}]


def _depth_counts(root) -> dict:
    """How many elements of the XML tree ``root`` lie at each depth (the root at 0), by local name and (under None)
    all together, walked without recursion."""
    counts: dict = {None: {}}
    stack = [(root, 0)]
    while stack:
        element, depth = stack.pop()
        name = element.tag.rpartition("}")[2] if isinstance(element.tag, str) else ""
        for key in (None, name):
            by_depth = counts.setdefault(key, {})
            by_depth[depth] = by_depth.get(depth, 0) + 1
        stack.extend((child, depth + 1) for child in element)
    return counts


def _subject_name(parsed_tree) -> str | None:
    """The element name a parsed selector's subject (its right-most compound) requires, None where it names none."""
    compound = getattr(parsed_tree, "right", parsed_tree)
    for simple in getattr(compound, "simple_selectors", ()):
        if hasattr(simple, "local_name"):
            return simple.local_name
    return None


# combinators in one selector past which cssselect2's compiled test nests past Python's parser (99 raised its
# SyntaxError, after ~0.7 s of RecursionErrors for 2000)
_SELECTOR_MAX_COMBINATORS = 90


def _most_combinator_tokens(prelude) -> int:
    """The most whitespace and combinator tokens in one comma-separated part of a selector list (a string or tinycss2
    tokens): at least the combinators of its selector, counted before cssselect2 parses it recursively."""
    import tinycss2

    tokens = tinycss2.parse_component_value_list(prelude) if isinstance(prelude, str) else prelude
    most = count = 0
    for token in tokens:
        if token.type == "literal" and token.value == ",":
            count = 0
        elif token.type == "whitespace" or (token.type == "literal" and token.value in (">", "+", "~")):
            count += 1
            most = max(most, count)
    return most


def _ancestor_combinators(parsed_tree, kinds=(" ", "~")) -> int:
    """The combinators of ``kinds`` along a parsed selector's chain: a descendant (`` ``) or following-sibling
    (``~``) one is an ``any()`` over every ancestor (or earlier sibling) in cssselect2's compiled test."""
    count, node = 0, parsed_tree
    while hasattr(node, "combinator"):
        count += node.combinator in kinds
        node = node.left
    return count


def _selector_paths(combinators: int, depth_counts: dict[int, int]) -> int:
    """The most ancestor paths a selector of ``combinators`` descendant combinators walks over the elements its
    subject may match, ``depth_counts`` of them by depth (each at depth d: the ways to pick that many of its d
    ancestors)."""
    if not combinators:
        return 0
    return sum(n * math.comb(depth, combinators) for depth, n in depth_counts.items())


def _svg_selectors_bounded() -> None:
    """cssselect2's selectors as cairosvg compiles them, bounded (job child only, once). A selector whose matching
    may walk more than ``SVG_MAX_SELECTOR_PATHS`` ancestor paths in this document is ``too_large`` at once (a 200-byte
    SVG ran to the timeout); one cssselect2 cannot compile (100 compound selectors nest its generated test past
    Python's parser: a ``SyntaxError``, a ``crash``) is dropped, as an invalid rule is."""
    import cairosvg.css
    import cssselect2

    if getattr(cairosvg.css.parse_stylesheets, "_bounded", False):
        return
    parse_stylesheets = cairosvg.css.parse_stylesheets

    def compile_bounded(input, namespaces=None):
        if _most_combinator_tokens(input) > _SELECTOR_MAX_COMBINATORS:
            return []  # parsed, let alone compiled, it nests past Python's recursion (2 s of RecursionErrors)
        try:
            parsed = list(cssselect2.parser.parse(input, namespaces))
            if any(_ancestor_combinators(p.parsed_tree, (" ", ">", "+", "~")) > _SELECTOR_MAX_COMBINATORS
                   for p in parsed):
                return []  # its compiled test would nest past Python's parser
            counts = _SVG_DEPTH_COUNTS[0]
            paths = max((_selector_paths(_ancestor_combinators(p.parsed_tree),
                                         counts.get(_subject_name(p.parsed_tree), {}))
                         for p in parsed), default=0)
            if paths > SVG_MAX_SELECTOR_PATHS:
                raise _SvgTooLarge(f"SVG <style>: a selector walks up to {paths:.3g} ancestor paths in this document, "
                                   f"past the {SVG_MAX_SELECTOR_PATHS:g} matched in time")
            return [cssselect2.compiler.CompiledSelector(p) for p in parsed]  # compile_selector_list without a 2nd parse
        except (SyntaxError, RecursionError, MemoryError):
            return []  # cssselect2 could not compile it: dropped

    def bounded(tree, url):
        _SVG_DEPTH_COUNTS[0] = _depth_counts(tree.xml_tree)
        return parse_stylesheets(tree, url)

    bounded._bounded = True
    cairosvg.css.parse_stylesheets = bounded
    cssselect2.compile_selector_list = compile_bounded


# dash periods cairo strokes for one document, all its strokes together: each costs cairo ~35 ns off the canvas and
# 0.4-1.7 us on it (wider lines cost more), so 2e6 is a few seconds at worst; a chart's dashed grid holds ~1e4. A
# circle of radius 8e6 px dashed every 0.6 px holds 8e7 (it ran to the timeout)
SVG_MAX_DASH_PERIODS = 2_000_000
_SVG_DASH_PERIODS = [0.0]  # counted so far in this job's document


def _flat_path_length(path) -> float:
    """The length of a flattened cairo path (``copy_path_flat``: moves, lines, closes), in its user units."""
    length, x, y, x0, y0 = 0.0, 0.0, 0.0, 0.0, 0.0
    for operation, points in path:
        if operation == 0:  # MOVE_TO
            x = x0 = points[0]
            y = y0 = points[1]
        elif operation == 1:  # LINE_TO
            length += math.hypot(points[0] - x, points[1] - y)
            x, y = points[0], points[1]
        elif operation == 3:  # CLOSE_PATH
            length += math.hypot(x0 - x, y0 - y)
            x, y = x0, y0
    return length


def _dash_periods(context) -> tuple[float, float]:
    """How many dash periods cairo steps through to stroke ``context``'s path with its dash, and the period (user
    units); 0 periods where it is not dashed. A period under cairo's tolerance on the device counts too: cairo then
    strokes two dashes of the same coverage a period, still every period (one of 0.08 px on a circle of radius 8e6 px
    took 8 s)."""
    dashes, _ = context.get_dash()
    if not dashes:
        return 0.0, 0.0
    period = sum(dashes) * (1 if len(dashes) % 2 == 0 else 2)  # an odd list is repeated once more
    if not period > 0:  # all zero: cairo refuses it (cairosvg sets no such dash)
        return 0.0, period
    return _flat_path_length(context.copy_path_flat()) / period, period


def _svg_dash_counts_bounded() -> None:
    """cairo strokes of more dash periods than ``SVG_MAX_DASH_PERIODS`` in one document refused before cairo steps
    through them (job child only, once): a circle of radius 8e6 px (within cairo's range) dashed every 0.6 px is 8e7
    periods, a 200-byte SVG that ran to the job's timeout. ``too_large`` at once, as an arc past cairo's range is."""
    import cairocffi

    context_class = cairocffi.Context
    if getattr(context_class, "_dashes_bounded", False):
        return

    def checked(stroke):
        def bounded_stroke(self):
            periods, period = _dash_periods(self)
            if periods:
                _SVG_DASH_PERIODS[0] += periods
                if not _SVG_DASH_PERIODS[0] <= SVG_MAX_DASH_PERIODS:
                    raise _SvgTooLarge(
                        f"SVG dashes: {_SVG_DASH_PERIODS[0]:.3g} dash periods to stroke (this path: {periods:.3g}, "
                        f"{periods * period:g} long, dashed every {period:g}) exceed the {SVG_MAX_DASH_PERIODS:g} "
                        "cairo draws in a document")
            return stroke(self)
        return bounded_stroke

    context_class.stroke = checked(context_class.stroke)
    context_class.stroke_preserve = checked(context_class.stroke_preserve)
    context_class._dashes_bounded = True


class _SvgUnreadableImage(Exception):
    """A ``data:`` raster of an SVG ``<image>`` that does not decode: the document's malformed content, ``syntax``, as
    an SVG that is no XML or an ``.svgz`` that is no gzip stream is."""


# what PIL raises for image bytes it cannot read (``UnidentifiedImageError`` is an OSError; its plugins raise
# SyntaxError for a malformed header, EOFError / struct.error for one cut short)
_RASTER_DECODE_ERRORS = (OSError, SyntaxError, EOFError, struct.error, ValueError)


def _png_decode_problem(data: bytes) -> str | None:
    """What makes ``data`` no readable PNG (the output checks' walk of its chunks and its IDAT stream), or None."""
    if len(data) < 33 or not data.startswith(_PNG_SIG) or data[12:16] != b"IHDR":
        return "no PNG header"
    return _png_chunk_problem(data, max(MAX_PNG_CHUNKS, len(data) >> 11))


def _svg_unreadable_images_refused() -> None:
    """An SVG ``<image>`` whose ``data:`` raster does not decode is ``syntax`` (job child only, once). cairo 1.16
    reports every libpng error as ``NO_MEMORY``, so a corrupt PNG was ``memory`` (a truncated one cairo's
    ``READ_ERROR``, and a corrupt GIF / JPEG PIL's ``OSError``: each a ``crash``). cairo's refusal of a PNG counts as
    the image's fault only where the PNG itself is broken (``_png_decode_problem``): a well-formed one that cairo
    has no memory for stays ``memory``. PIL's decompression-bomb refusal stays ``too_large``."""
    import io
    import types

    import cairocffi
    import cairosvg.image
    from PIL import Image

    surface_class = cairocffi.ImageSurface
    if getattr(surface_class, "_unreadable_refused", False):
        return
    from_png = surface_class.create_from_png

    def create_from_png(source):
        data = source.getvalue() if isinstance(source, io.BytesIO) else None
        try:
            return from_png(source)
        except (MemoryError, OSError, cairocffi.CairoError):  # NO_MEMORY, READ_ERROR (a file cut short), ...
            problem = _png_decode_problem(data) if data is not None else None
            if problem is None:
                raise
            raise _SvgUnreadableImage(f"SVG image is not a readable PNG: {problem}") from None

    def open_decoded(fp, *args, **kwargs):
        try:
            image = Image.open(fp, *args, **kwargs)
            image.load()
        except Image.DecompressionBombError:
            raise
        except Image.UnidentifiedImageError:  # its text names the BytesIO object's address
            raise _SvgUnreadableImage("SVG image is in no format PIL reads") from None
        except _RASTER_DECODE_ERRORS as e:
            raise _SvgUnreadableImage(f"SVG image does not decode: {_exc_text(e)}") from None
        return image

    surface_class.create_from_png = staticmethod(create_from_png)
    surface_class._unreadable_refused = True
    # cairosvg.image's name for PIL's Image: its open() now decodes, so a raster that does not is refused there
    cairosvg.image.Image = types.SimpleNamespace(**{**vars(Image), "open": open_decoded})


def _cairosvg_fails_on_length(text: str) -> bool:
    """Whether cairosvg's own length reader raises on ``text`` (its float() of what it took for the number)."""
    import types

    import cairosvg.helpers

    size = getattr(cairosvg.helpers.size, "__wrapped__", cairosvg.helpers.size)  # cairosvg's, not the lenient one
    try:
        size(types.SimpleNamespace(font_size=16.0, dpi=96, context_width=0, context_height=0), text, "x")
    except ValueError:
        return True
    return False


def _root_viewbox_fault(viewbox: str) -> str | None:
    """What makes cairosvg fail on a root's viewBox (split as it splits it), or None: a value that is no number (a
    crash), fewer than four (an IndexError, a crash), an infinite one (``0 0 1e400 1`` beside a width and height: a
    ZeroDivisionError scaling by its inverse, a crash). NaN, zero or negative sizes are cairosvg's, as before."""
    try:
        numbers = [float(v) for v in re.sub("[ \n\r\t,]+", " ", viewbox).split()]
    except ValueError:
        return "is not four numbers"
    if len(numbers) < 4:
        return "is not four numbers"
    return "is infinite" if any(math.isinf(v) for v in numbers[:4]) else None


def _viewbox_size(viewbox) -> tuple[float, float] | None:
    """Width and height of an SVG ``viewBox`` (split as cairosvg splits it), or None where they give no ratio."""
    try:
        parts = [float(v) for v in re.sub("[ \n\r\t,]+", " ", str(viewbox)).split()]
    except ValueError:
        return None
    if len(parts) != 4 or not all(math.isfinite(v) and v > 0 for v in parts[2:]):
        return None
    return parts[2], parts[3]


def _normalise_root_size(tree) -> None:
    """The root of cairosvg's parsed ``tree`` (its attributes with the document's CSS applied, as cairosvg sizes it
    from them) with its width / height rewritten by ``_svg_root_length``: one of no size is removed, so that
    cairosvg takes it as missing (100% of the parent viewport, else the viewBox's). cairosvg keeps an empty CSS
    declaration (``style="width:"``), which CSS drops: the attribute's value is read instead (it was the 300 px
    default, where a browser draws the attribute's). One side missing next to a
    viewBox and a length on the other is that length times the viewBox's aspect ratio, as CSS sizes an ``auto``
    side from the intrinsic ratio: cairosvg took the viewBox's own size for it, so ``width="30" viewBox="0 0 100
    50"`` was a 30x50 image with the drawing letterboxed in it where a browser draws 30x15."""
    for side in ("width", "height"):
        if side in tree:
            value = str(tree[side])
            if not value.strip():  # an empty CSS declaration is invalid, dropped by CSS: the attribute stands
                value = tree.xml_tree.get(side) or ""
            length = _svg_root_length(value, _root_rem_px(tree), side)
            if length is not None and _cairosvg_fails_on_length(length):
                # the canvas has no size: cairosvg failed on it (`calc(10px + 5px)`, `xpx`: a crash); what it reads as
                # 0 (`--5`, `100 %`, an unknown unit) it says so itself ("The SVG size is undefined: 0x10 px")
                raise _SvgInvalidSize(f"The SVG {side} is not a length: {value[:80]!r}")
            if length is None:
                del tree[side]
            else:
                tree[side] = length
    fault = _root_viewbox_fault(str(tree["viewBox"])) if tree.get("viewBox") else None
    if fault is not None:
        raise _SvgInvalidSize(f"The SVG viewBox {fault}: {str(tree['viewBox'])[:80]!r}")
    box = _viewbox_size(tree.get("viewBox")) if tree.get("viewBox") else None
    missing = [side for side in ("width", "height") if side not in tree]
    if box is None or len(missing) != 1:
        return
    other = tree["height" if missing[0] == "width" else "width"]
    m = _SVG_LENGTH.fullmatch(other.strip())
    if m is None or m.group(2) == "%":  # a percentage has no length to scale without a parent
        return
    box_missing, box_other = box if missing[0] == "width" else box[::-1]
    # multiplied first: a ratio of 1e-300 / 1e300 is 0.0, and its inverse a ZeroDivisionError
    tree[missing[0]] = f"{float(m.group(1)) * box_missing / box_other!r}{m.group(2)}"


# cairosvg's own bound on the <use> elements one document draws (``defs.use``: a ValueError, "Abort rendering"), which
# a fan-out reached only after drawing 100000 of them, ~23 s (each finds its target by a walk of the whole document)
SVG_MAX_USE_DRAWS = 100_000
_SVG_USE_TAGS = ("use", "{http://www.w3.org/2000/svg}use")
# elements drawn only where something references them (a <use> of a symbol, a fill of a pattern, ...), not in place
_SVG_UNDRAWN_IN_PLACE = frozenset(("defs", "symbol", "marker", "pattern", "mask", "clipPath", "linearGradient",
                                   "radialGradient", "filter", "style", "title", "desc", "metadata"))


# properties whose url(#id) draws the content of the element it names where they are painted: once for a paint
# server, mask or clip path, at every vertex for a marker
_SVG_CONTENT_REFERENCES = ("fill", "stroke", "mask", "clip-path")
_SVG_URL_FRAGMENT = re.compile(r"url\(\s*['\"]?#([^)'\"\s]+)")
_SVG_NUMBER_IN_DATA = re.compile(r"[0-9.]+(?:[eE][+-]?[0-9]+)?")


def _vertex_bound(element) -> int:
    """At most how many vertices cairosvg places markers on for the XML ``element``: a number of its path data or
    points (each command takes at least one, a closing ``z`` none, one vertex), 2 for a line, 0 for other shapes."""
    tag = str(element.tag).rpartition("}")[2]
    if tag == "path":
        d = element.get("d") or ""
        return len(_SVG_NUMBER_IN_DATA.findall(d)) + d.count("z") + d.count("Z") + 1
    if tag in ("polyline", "polygon"):
        return len(_SVG_NUMBER_IN_DATA.findall(element.get("points") or "")) // 2 + 2
    return 2 if tag == "line" else 0


def _use_draws(root, limit: int = SVG_MAX_USE_DRAWS, nodes: dict | None = None) -> int:
    """How many ``<use>`` elements drawing the XML element ``root`` draws, each use of a use counted again (``a1``
    using ``a0`` ten times, ``a2`` using ``a1`` ten times, ...: 10 ** depth), capped at ``limit`` + 1. A use of an
    element it is inside draws nothing (a circular reference, not rendered); ``<defs>``, symbols, markers, patterns,
    ... are counted where they are drawn, not in place: for a ``<use>``, and, given ``nodes`` (cairosvg's node of
    each XML element by its id(), holding the properties as cairosvg computes them: style sheets, inheritance), for
    a fill, stroke, mask or clip path naming one, and for a marker at every vertex of its path (``_vertex_bound``).
    Linear in the document: each element's count is taken once (an explicit stack, so nesting deeper than Python's
    recursion limit is counted too)."""
    first_by_id: dict[str, object] = {}
    for element in root.iter():
        first_by_id.setdefault(element.get("id"), element)  # cairosvg takes the first element of an id

    def references(element) -> list[tuple[object, int]]:
        """(element drawn, times) for each reference ``element`` draws; the target of a ``<use>`` first."""
        out = []
        if element.tag in _SVG_USE_TAGS:
            href = element.get("{http://www.w3.org/1999/xlink}href", element.get("href")) or ""
            out.append((first_by_id.get(href.partition("#")[2]) if "#" in href else None, 1))
        node = nodes.get(id(element)) if nodes else None
        if node is not None:
            named = [(name, 1) for name in _SVG_CONTENT_REFERENCES]
            vertices = _vertex_bound(element)
            named += [(name, vertices) for name in _SVG_MARKER_PROPERTIES] if vertices else []
            for name, times in named:
                value = node.get(name)
                m = _SVG_URL_FRAGMENT.search(value) if isinstance(value, str) else None
                if m is not None and m.group(1) in first_by_id:
                    out.append((first_by_id[m.group(1)], times))
        return out

    counts: dict[int, int] = {}
    open_elements: set[int] = set()
    stack = [(root, False)]
    while stack:
        element, closing = stack.pop()
        key = id(element)
        if closing:
            open_elements.discard(key)
            total = sum(counts.get(id(child), 0) for child in element
                        if str(child.tag).rpartition("}")[2] not in _SVG_UNDRAWN_IN_PLACE)
            if element.tag in _SVG_USE_TAGS:
                total += 1  # the use itself, drawn or not
            # an element still open here is circular (not rendered): 0
            total += sum(times * counts.get(id(used), 0) for used, times in references(element) if used is not None)
            counts[key] = min(total, limit + 1)
            continue
        if key in counts or key in open_elements:
            continue
        open_elements.add(key)
        stack.append((element, True))
        stack.extend((child, False) for child in element)
        stack.extend((used, False) for used, _ in references(element) if used is not None)
    return counts[id(root)]


def _nodes_by_element(tree) -> dict:
    """cairosvg's node of each XML element of the parsed ``tree``, by the element's id() (an explicit stack)."""
    nodes, stack = {}, [tree]
    while stack:
        node = stack.pop()
        element = getattr(getattr(node, "element", None), "etree_element", None)
        if element is not None:
            nodes[id(element)] = node
        stack.extend(getattr(node, "children", ()))
    return nodes


def _default_viewport(tree) -> dict:
    """cairosvg's ``parent_width`` / ``parent_height`` for the parsed SVG ``tree`` (its root normalised): the
    default viewport where its root has no viewBox and a width or height missing or in percent, else nothing.
    cairosvg resolves both against no parent, to zero: ``<svg xmlns=...><circle .../></svg>`` was refused (the size
    undefined: 0x0 px) where a browser draws it 300x150. Absolute sizes and a viewBox are left to cairosvg as they
    were (a parent size would override a viewBox-only SVG's own size)."""
    if tree.get("viewBox"):
        return {}
    sides = [str(tree.get(a, "")).strip() for a in ("width", "height")]
    if all(v and not v.endswith("%") for v in sides):
        return {}
    return {"parent_width": SVG_DEFAULT_VIEWPORT[0], "parent_height": SVG_DEFAULT_VIEWPORT[1]}


def _run_svg(text: str, limits: RenderLimits) -> tuple[str, str]:
    data = svg_bytes(text)  # the bytes both the screen and cairosvg parse
    refused = check_svg(data, limits.max_svg_bytes)  # inside the sandbox, before cairosvg sees it
    if refused:
        return refused
    surface = _side_checked_png_surface(limits.max_side)  # svg2png does not pass a url_fetcher on
    _check_tile_sizes()
    _svg_properties_computed_as_css()
    _svg_values_read_as_css()
    _svg_circular_references_not_drawn()
    _svg_font_sizes_computed()
    _svg_text_chunks_anchored()
    _svg_transforms_of_no_size_not_drawn()
    _svg_bounding_boxes_never_missing()
    _svg_markers_that_cannot_render_not_drawn()
    _svg_arcs_past_cairo_range_refused()
    _svg_dash_counts_bounded()
    _svg_pattern_tiles_bounded()
    _svg_selectors_bounded()
    _svg_unreadable_images_refused()
    _svg_colours_read_as_css()

    try:
        # as surface.convert does, with the root's size read right between parsing and sizing
        from cairosvg.parser import Tree

        tree = Tree(bytestring=data, unsafe=False, url_fetcher=_raster_only_fetch)
        _SVG_REM_PX[0] = _root_rem_px(tree)  # what rem is in lengths read while drawing (text x / y lists, points)
        _normalise_root_size(tree)
        if _use_draws(tree.xml_tree, nodes=_nodes_by_element(tree)) > SVG_MAX_USE_DRAWS:
            raise _SvgTooLarge(f"SVG <use> elements fan out to more than {SVG_MAX_USE_DRAWS} drawn (cairosvg's bound)")
        surface(tree, os.path.join(_JOBDIR, OUT_NAME), 96, **_default_viewport(tree)).finish()
    except _SvgTooLarge as e:
        return "too_large", str(e)
    except _SvgInvalidSize as e:
        return "invalid_size", str(e)
    except _SvgUnreadableImage as e:
        return "syntax", str(e)
    except Exception as e:  # noqa: BLE001
        if type(e).__name__ in ("ParseError", "ExpatError"):
            return "syntax", _exc_text(e)
        raise
    return "ok", "svg"


# --- the zygote --------------------------------------------------------------------------------------------
def _zygote_main(sock: socket.socket, env: dict, parent: int) -> None:
    """Never returns. Receives only ``spawn`` commands with three descriptors; never reads job data."""
    try:
        sb.set_pdeathsig(signal.SIGKILL)  # the supervisor is single-threaded
    except OSError:
        pass
    if os.getppid() != parent:
        os._exit(1)
    if env.get("root"):  # host paths are what matplotlib's font list names: only the tree hides some of them
        try:
            _fonts_in_tree(env["root"])
        except Exception:  # noqa: BLE001 - no matplotlib, a probe that failed: the list stays the host's
            pass
    warm_up()
    import matplotlib

    try:
        sb._PROGRAM = sb.build_seccomp_program()
    except OSError:
        pass  # reported per job by the seccomp layer
    env["read_paths"] = _read_paths(matplotlib.get_data_path())
    own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    sock.send(json.dumps({"ready": True, "pid": os.getpid()}).encode())
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 64, 4)
        except OSError:
            os._exit(1)
        if not msg:
            os._exit(0)
        if msg != b"spawn" or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            continue
        pidns_err = None
        if "pidns" in env.get("skip", ()):
            pidns_err = "skipped on request"
        else:
            try:
                sb.unshare(sb.CLONE_NEWPID)
            except OSError as e:
                pidns_err = str(e)
        oom_before = _oom_kills()
        try:
            pid = os.fork()
        except OSError as e:
            pid, fork_err = -1, e
        if pid == 0:  # pragma: no cover - the job child
            exit_now = os._exit  # a local: job code that replaces os._exit cannot reach it (see _child_main)
            try:
                _child_main(fds, env, pidns_err)
            finally:
                exit_now(SETUP_FAILED_EXIT + 1)
        if pidns_err is None:
            try:  # back to our own pid namespace for the next child
                sb.setns(own_pidns, sb.CLONE_NEWPID)
            except OSError:
                os._exit(1)
        for fd in fds:
            os.close(fd)
        if pid < 0:
            sock.send(json.dumps({"error": f"fork: {fork_err}"}).encode())
            continue
        pidfd = os.pidfd_open(pid)
        socket.send_fds(sock, [b"%d" % pid], [pidfd])
        os.close(pidfd)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        cpu_hard = _cpu_hard_limit(pid)  # the job may have lowered it: read it from the zombie
        oom_after = _oom_kills()
        _, wstatus, ru = os.wait4(pid, 0)
        sock.send(json.dumps({"pid": pid, "status": wstatus, "cpu_s": ru.ru_utime + ru.ru_stime,
                              "cpu_hard": cpu_hard, "oom_kills": None if None in (oom_before, oom_after)
                              else oom_after - oom_before}).encode())


def _oom_kills() -> int | None:
    """The kernel's count of OOM kills since boot (``oom_kill`` in ``/proc/vmstat``: global and cgroup ones), None
    if unknown. A SIGKILLed job with no OOM kill during its life met its hard CPU limit, whatever its CPU time says:
    the kernel checks that limit against tick-sampled time, which on a loaded machine runs ahead of the precise time
    ``wait4`` reports (killed at 1 s of the former, a job showed 0.88 s of the latter)."""
    try:
        with open("/proc/vmstat", "rb") as f:
            for line in f:
                if line.startswith(b"oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cpu_hard_limit(pid: int) -> int | None:
    """The hard RLIMIT_CPU (seconds) of ``pid`` (an unreaped zombie still shows it), None if unknown."""
    try:
        with open(f"/proc/{pid}/limits") as f:
            for line in f:
                if line.startswith("Max cpu time"):
                    hard = re.split(r"\s{2,}", line.strip())[2]
                    return None if hard == "unlimited" else int(hard)
    except (OSError, ValueError, IndexError):
        pass
    return None


# --- the supervisor ------------------------------------------------------------------------------------------
def _page_table_cap(address_space: int) -> int:
    """The page-table bytes a child with this RLIMIT_AS may hold: PAGE_TABLE_SHARE-th of it."""
    return address_space // PAGE_TABLE_SHARE


def _read_status(status_fd: int) -> bytes:
    """The text of the ``/proc/<pid>/status`` open as ``status_fd`` (empty if it cannot be read)."""
    try:
        return os.pread(status_fd, 8192, 0)  # procfs writes it afresh on every read
    except OSError:
        return b""


def _page_table_bytes(status_fd: int, text: bytes | None = None) -> int:
    """``VmPTE`` (page tables of every level) of the process whose ``/proc/<pid>/status`` is open as ``status_fd`` (or
    whose status ``text`` was read); 0 once it has exited or left its memory (a zombie shows none)."""
    text = _read_status(status_fd) if text is None else text
    k = text.find(b"\nVmPTE:")
    if k < 0:
        return 0
    return int(text[k + 8:text.index(b"kB", k)]) * 1024


def _status_threads(text: bytes) -> int:
    """The ``Threads:`` count of a ``/proc/<pid>/status`` text (0 if absent)."""
    k = text.find(b"\nThreads:")
    end = text.find(b"\n", k + 9)
    try:
        return int(text[k + 9:end]) if 0 <= k < end else 0
    except ValueError:
        return 0


# a tmpfs with less than this left cannot give a faulting page a block (a huge folio at most): it is full
DISK_FULL_SLACK_BYTES = 2 << 20


def _disk_full(path: str) -> bool:
    """True when the file system at ``path`` has less than ``DISK_FULL_SLACK_BYTES`` free (False if unreadable)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < DISK_FULL_SLACK_BYTES


def _fair_nice(threads: int) -> int:
    """The lowest nice level at which ``threads`` runnable threads weigh together no more than one thread at nice 0
    (19 where none does)."""
    for nice, weight in enumerate(NICE_WEIGHTS):
        if threads * weight <= NICE_WEIGHTS[0]:
            return nice
    return len(NICE_WEIGHTS) - 1


def _renice_group(pgid: int, pidfd: int, nice: int) -> bool | None:
    """Set every thread of the process group ``pgid`` (a job: its own session) to ``nice``, while the job whose pidfd
    this is still runs (a process group id outlives no member: once the job has exited, its id may name another's).
    True when set, None when the job has exited (nothing to weigh), False when ``setpriority`` failed on a live job
    (no session of its own in a reduced sandbox, ``ESRCH``; a supervisor without ``CAP_SYS_NICE`` over the job uid,
    ``EPERM``): the job's threads then keep their weight, which the caller counts."""
    if select.select([pidfd], [], [], 0)[0]:
        return None
    try:
        os.setpriority(os.PRIO_PGRP, pgid, nice)
    except OSError:
        return None if select.select([pidfd], [], [], 0)[0] else False
    return True


def _set_oom_score_adj(pid: int, adj: int) -> str | None:
    """Raise the OOM killer's preference for child ``pid`` (no privilege needed to raise it; the job cannot open its
    /proc files to lower it, and lowering needs ``CAP_SYS_RESOURCE``); None when set and read back, else why not."""
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w") as f:
            f.write(str(adj))
        with open(f"/proc/{pid}/oom_score_adj") as f:
            got = int(f.read())
    except (OSError, ValueError) as e:
        return f"oom_score_adj: {e}"
    return None if got == adj else f"oom_score_adj: {got}, not {adj}"


def _png_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a file that starts with the signature and a whole IHDR chunk (33 bytes), else None."""
    if len(data) < 33 or not data.startswith(_PNG_SIG) or data[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", data[16:24])


def _read_output(jobdir: str, limits: RenderLimits) -> tuple[bytes | None, str | None, str]:
    """Read out.png without following links; returns (data, error_kind, message)."""
    path = os.path.join(jobdir, OUT_NAME)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, "no_output", "no out.png produced"
    except OSError as e:
        return None, "invalid_image", f"out.png is not a plain file ({e.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return None, "invalid_image", "out.png is not a plain file"
        if st.st_size > limits.max_png_bytes:
            return None, "too_large", f"PNG of {st.st_size} bytes exceeds {limits.max_png_bytes}"
        data = b""
        while len(data) <= limits.max_png_bytes:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            data += chunk
        if len(data) > limits.max_png_bytes:
            return None, "too_large", f"PNG exceeds {limits.max_png_bytes} bytes"
        return data, None, ""
    finally:
        os.close(fd)


def _inflated_size(ctype: bytes, body: bytes, cap: int) -> int:
    """Bytes PIL inflates from a zTXt / compressed iTXt / iCCP chunk body (counted up to ``cap + 1``)."""
    k = body.find(b"\0")
    if k < 0:
        return 0
    if ctype == b"iTXt":  # keyword NUL, flag, method, language NUL, translated keyword NUL, text
        parts = body[k + 3:].split(b"\0", 2)
        if body[k + 1:k + 2] != b"\x01" or len(parts) < 3:
            return 0
        packed = parts[2]
    else:  # keyword / profile name NUL, method, data
        packed = body[k + 2:]
    try:
        return len(zlib.decompressobj().decompress(packed, cap + 1))
    except zlib.error:
        return 0


# bit depths each colour type allows (PNG spec, IHDR)
_PNG_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
# Adam7 passes: (first column, first row, column step, row step)
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))


def _png_scanlines(width: int, height: int, depth: int, colour: int, interlaced: bool) -> list[tuple[int, int]]:
    """(bytes per row with its filter type byte, rows) of each pass that has rows, in stream order: the whole image,
    or Adam7's seven passes (a pass with no column or no row has no rows at all)."""
    bits = _PNG_CHANNELS[colour] * depth  # per pixel
    sizes = [(width, height)] if not interlaced else [
        (len(range(x0, width, dx)), len(range(y0, height, dy))) for x0, y0, dx, dy in _ADAM7]
    return [(1 + (w * bits + 7) // 8, h) for w, h in sizes if w and h]


def _png_raw_size(width: int, height: int, depth: int, colour: int, interlaced: bool) -> int:
    """Bytes of filtered scanlines (a filter byte per row) the IDAT stream of this image inflates to."""
    return sum(stride * rows for stride, rows in _png_scanlines(width, height, depth, colour, interlaced))


def _png_decode_budget(limits: RenderLimits) -> int:
    """Most bytes of scanlines an accepted PNG may inflate to: those of the largest image a renderer writes, 8-bit
    RGBA (matplotlib, cairo) of ``max_side`` square, Adam7's extra filter bytes included. Every 8-bit image within the
    side limits fits; a 16-bit one fits up to about 70 % of ``max_side`` a side. What the supervisor inflates, and
    what a consumer decodes, is then never more than a legitimate render's."""
    return _png_raw_size(limits.max_side, limits.max_side, 8, 6, True)


_PNG_FILTER_TYPES = bytes(range(5))  # None, Sub, Up, Average, Paeth


def _bad_filter_row(out: bytes, base: int, passes: list[tuple[int, int, int, int]]) -> tuple[int, int] | None:
    """(row, filter type) of the first row whose filter type byte lies in ``out`` (inflated scanline bytes from
    offset ``base`` of the stream) and is none of the five that exist, else None. ``passes``: (offset of its first
    row, bytes per row, rows, rows of the passes before it) of each pass."""
    end = base + len(out)
    for start, stride, rows, before in passes:
        lo, hi = max(base, start), min(end, start + stride * rows)
        if lo >= hi:
            continue
        first = start + -(-(lo - start) // stride) * stride  # the first filter byte at or after lo
        types = out[first - base:hi - base:stride]
        if types.translate(None, _PNG_FILTER_TYPES):  # C speed: what is left is not a filter type
            j = next(i for i, t in enumerate(types) if t > 4)
            return before + (first - start) // stride + j, types[j]
    return None


def _idat_problem(data: bytes, spans: list[tuple[int, int]], scanlines: list[tuple[int, int]]) -> str | None:
    """The IDAT chunks' zlib stream (``spans``: (offset, length) of each body) must end, with its checksum, after
    exactly the bytes of ``scanlines`` (``_png_scanlines``), every row must start with a filter type that exists, and
    nothing may follow the stream. PIL stops inflating once the last row is filled and never reads the checksum,
    libpng refuses a stream that ends early ("Not enough image data"); one that inflates to more than the image, or
    holds bytes past its end, carries bytes no decoder checks; PIL and libpng refuse a row of another filter type.
    With these the stream is known to decode without decoding it (the supervisor never unfilters pixels). Output is
    inflated 1 MiB at a time and dropped, and never past the image's size + 1 byte: a zlib bomb costs at most that."""
    passes, offset, rows_before = [], 0, 0
    for stride, rows in scanlines:
        passes.append((offset, stride, rows, rows_before))
        offset, rows_before = offset + stride * rows, rows_before + rows
    expected = offset
    z = zlib.decompressobj()
    got = 0
    view = memoryview(data)
    try:
        for start, length in spans:
            if z.eof:
                return "data after the end of the IDAT zlib stream"
            piece = view[start:start + length]
            while piece:
                out = z.decompress(piece, min(1 << 20, expected + 1 - got))
                bad = _bad_filter_row(out, got, passes)
                if bad is not None:
                    return f"IDAT row {bad[0]} has filter type {bad[1]} (0 to 4 exist)"
                got += len(out)
                if got > expected:
                    return f"IDAT data inflates to more than the image's {expected} bytes"
                piece = z.unconsumed_tail
                if z.eof:
                    break
            if z.unused_data:
                return "data after the end of the IDAT zlib stream"
    except zlib.error as e:
        return f"the IDAT zlib stream is corrupt ({e})"
    if not z.eof:
        return "the IDAT zlib stream is cut short (no end / checksum)"
    if got < expected:
        return f"IDAT data inflates to {got} of the image's {expected} bytes"
    return None


# tRNS length for the colour types that take one without a palette: one grey / one RGB sample of 2 bytes each
_PNG_TRNS_LEN = {0: 2, 2: 6}


def _png_chunk_walk(data: bytes, max_chunks: int, idat_spans: list[tuple[int, int]],
                    packed: list[tuple[int, int]]) -> str | None:
    """Walk the chunk list (lengths, types, order; PIL checks the CRCs) without inflating anything: cheap pure Python,
    so the root supervisor runs it on every output before any validator sees the file. Appends (offset, length) of
    each IDAT body to ``idat_spans`` and of each zTXt / iTXt / iCCP chunk body to ``packed``. PIL spends ~10 us of
    Python per chunk and stops at IEND, so refuse what would cost unbounded time or be returned unchecked: too many
    chunks, bytes after IEND, unknown critical chunks, APNG frames; and what breaks the PNG rules that decoders handle
    differently (libpng refuses the file or drops a chunk, PIL reads it, so the consumer could see other pixels than
    PIL checked): a colour type / bit depth pair that does not exist, a second IHDR (PIL decodes by the last), a
    palette image without PLTE (PIL makes one up), a PLTE in a grey image, after IDAT, twice or of a size no palette
    has, a tRNS of the wrong size for its colour type or in an image with an alpha channel, after IDAT, IDAT chunks
    that are not consecutive, and no IDAT at all; an IHDR compression / filter / interlace method that does not
    exist."""
    pos, n, end = len(_PNG_SIG), 0, len(data)
    # the IHDR fields (``_png_size`` checked that a whole IHDR comes first)
    depth, colour, compression, filtering, interlace = data[24:29]
    if depth not in _PNG_DEPTHS.get(colour, ()):
        return f"colour type {colour} with bit depth {depth} does not exist"
    # libpng refuses any other method; PIL ignores the compression / filter fields and reads any interlace as Adam7
    if compression or filtering or interlace > 1:
        return (f"IHDR compression method {compression}, filter method {filtering}, interlace method {interlace} "
                "(0, 0 and 0 or 1 exist)")
    palette = None  # entries of the PLTE, once seen
    idat = "none"  # none / in (the last chunk was IDAT) / done (IDATs seen and ended)
    while pos + 8 <= end:
        length, ctype = struct.unpack_from(">I4s", data, pos)
        n += 1
        if n > max_chunks:
            return f"more than {max_chunks} chunks"
        if length > 0x7FFFFFFF or pos + 12 + length > end:
            return f"chunk {n} runs past the end of the file"
        if not ctype.isalpha():  # bytes.isalpha: ASCII letters only
            return f"chunk {n} has an invalid type {ctype!r}"
        if ctype in _APNG_CHUNKS:
            return "animated PNG (APNG) chunks are not allowed"
        if ctype[:1].isupper() and ctype not in _PNG_CRITICAL:  # upper-case first letter: critical
            return f"unknown critical chunk {ctype.decode()!r}"
        if ctype == b"IHDR" and (n > 1 or length != 13):
            return "a second IHDR chunk" if n > 1 else f"IHDR of {length} bytes (13 expected)"
        if ctype == b"PLTE":
            if colour in (0, 4):
                return f"PLTE in a greyscale image (colour type {colour})"
            if palette is not None or idat != "none":
                return "a second PLTE chunk" if palette is not None else "PLTE after IDAT"
            if length % 3 or not 3 <= length <= 768:
                return f"PLTE of {length} bytes (1 to 256 entries of 3 bytes)"
            palette = length // 3
        if ctype == b"tRNS":
            if idat != "none":
                return "tRNS after IDAT"
            if colour in (4, 6):
                return f"tRNS in an image with an alpha channel (colour type {colour})"
            # more alpha values than palette entries (or none before it): libpng drops the chunk (opaque image),
            # PIL applies it, and past 256 values PIL's convert("RGBA") raises in the consumer
            if colour == 3 and length > (palette or 0):
                return f"tRNS with {length} alpha values for a palette of {palette or 0} entries"
            if colour in _PNG_TRNS_LEN and length != _PNG_TRNS_LEN[colour]:
                return f"tRNS of {length} bytes for colour type {colour} ({_PNG_TRNS_LEN[colour]} expected)"
        if ctype == b"IDAT":
            if idat == "done":
                return "IDAT chunks are not consecutive"
            if colour == 3 and palette is None:
                return "a palette image (colour type 3) without PLTE before its IDAT"
            idat = "in"
            idat_spans.append((pos + 8, length))
        elif idat == "in":
            idat = "done"
        if ctype in (b"zTXt", b"iTXt", b"iCCP"):
            packed.append((pos + 8, length))
        pos += 12 + length
        if ctype == b"IEND":
            if idat == "none":
                return "no IDAT chunk"
            if pos != end:
                return f"{end - pos} bytes after IEND"
            return None
    return "no IEND chunk"


def _png_chunk_problem(data: bytes, max_chunks: int, max_inflated: int = 8 << 20) -> str | None:
    """The chunk walk (``_png_chunk_walk``), then what needs inflating (the sandboxed validator's part, never the root
    supervisor's): compressed metadata (zTXt, compressed iTXt, iCCP) inflating to more than ``max_inflated`` bytes in
    all, and an IDAT zlib stream that is corrupt, ends early or without its checksum, inflates to more or fewer bytes
    than the image's rows, has a row of a filter type that does not exist or has bytes after its end
    (``_idat_problem``)."""
    idat_spans: list[tuple[int, int]] = []
    packed: list[tuple[int, int]] = []
    problem = _png_chunk_walk(data, max_chunks, idat_spans, packed)
    if problem:
        return problem
    # PIL inflates every zTXt / iTXt / iCCP on every open, up to 1 MiB each (only text has a 64 MiB total, iCCP
    # none): 1 KiB chunks of zeros cost the validator, and every consumer of the PNG, seconds of zlib and up to
    # 64 MiB of metadata per open. Inflated here against one budget, so that cost stays file-sized.
    inflated = 0
    for start, length in packed:
        inflated += _inflated_size(data[start - 4:start], data[start:start + length], max_inflated - inflated)
        if inflated > max_inflated:
            return f"compressed metadata inflating to more than {max_inflated} bytes"
    (width, height), (depth, colour, interlace) = struct.unpack_from(">II", data, 16), (data[24], data[25], data[28])
    return _idat_problem(data, idat_spans, _png_scanlines(width, height, depth, colour, interlace == 1))


def _png_chunk(ctype: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + ctype + body + struct.pack(">I", zlib.crc32(ctype + body))


def _one_pixel_probe(data: bytes) -> bytes:
    """``data`` (a PNG that passed ``_png_chunk_problem``) with its image cut to one pixel: the same chunks in the same
    order, but IHDR says 1x1 and one IDAT holding a single zero pixel stands for the IDAT chunks. PIL's full ``load()``
    of it runs every chunk handler the file's own load would (those of chunks after IDAT run only there: a truncated
    ``pHYs`` after IDAT raises in the consumer's load), at a cost set by the file's bytes, not its pixel count."""
    depth, colour, interlace = data[24], data[25], data[28]
    stand_ins = {b"IHDR": struct.pack(">II", 1, 1) + data[24:29],  # palette index 0 exists: PLTE has an entry
                 b"IDAT": zlib.compress(bytes(_png_raw_size(1, 1, depth, colour, interlace == 1)))}
    out, pos = [_PNG_SIG], len(_PNG_SIG)
    while pos < len(data):
        length, ctype = struct.unpack_from(">I4s", data, pos)
        if ctype not in stand_ins:
            out.append(data[pos:pos + 12 + length])
        elif out[-1][4:8] != b"IDAT":  # the IDAT chunks are consecutive: the first one's stand-in is for them all
            out.append(_png_chunk(ctype, stand_ins[ctype]))
        pos += 12 + length
    return b"".join(out)


def png_precheck(data: bytes, limits: RenderLimits) -> tuple[int, int, str | None, str]:
    """The root supervisor's part of the output check: cheap pure Python that never inflates and never imports PIL.
    Header, size limits, decode budget (``_png_decode_budget``) and the chunk walk (``_png_chunk_walk``); returns
    (width, height, error kind or None, message). What needs zlib or PIL runs in a sandboxed validator child
    (``validate_png`` there, ``Supervisor._validated`` here), on a file that passed this."""
    size = _png_size(data)
    if size is None:
        return 0, 0, "invalid_image", "not a PNG file"
    w, h = size
    if w > limits.max_side or h > limits.max_side:
        return w, h, "too_large", f"image {w}x{h} exceeds {limits.max_side} px"
    if w < limits.min_side or h < limits.min_side:
        return w, h, "invalid_image", f"image {w}x{h} is smaller than {limits.min_side} px"
    if max(w, h) / min(w, h) > limits.max_aspect:
        return w, h, "invalid_image", f"aspect ratio of {w}x{h} exceeds {limits.max_aspect}"
    depth, colour, interlace = data[24], data[25], data[28]
    if depth in _PNG_DEPTHS.get(colour, ()):  # any other pair is refused by the chunk walk
        raw, budget = _png_raw_size(w, h, depth, colour, interlace == 1), _png_decode_budget(limits)
        if raw > budget:
            return w, h, "too_large", (f"image {w}x{h} of {depth}-bit colour type {colour} decodes to {raw} bytes, "
                                       f"more than the {budget} of a {limits.max_side} px square 8-bit RGBA render")
    problem = _png_chunk_walk(data, _png_max_chunks(limits), [], [])
    if problem:
        return w, h, "invalid_image", f"PNG refused: {problem}"
    return w, h, None, ""


def _png_max_chunks(limits: RenderLimits) -> int:
    return max(MAX_PNG_CHUNKS, limits.max_png_bytes >> 11)


def validate_png(data: bytes, limits: RenderLimits) -> tuple[int, int, str | None, str]:
    """The whole output check: ``png_precheck``, the inflating checks (``_png_chunk_problem``: compressed metadata,
    the IDAT stream), then PIL: every chunk's CRC (``verify``) and a full ``load`` of the one-pixel probe
    (``_one_pixel_probe``). Runs in the sandboxed validator child, never in the root supervisor. The pixels are never
    unfiltered: the stream checks prove they decode, and the check spends per output at most one inflate of a
    legitimate render's size plus work in proportion to the file's bytes (a 4096 px square RGBA PNG with Paeth rows
    took 0.7 s of PIL decoding, 16-bit 1.3 s)."""
    w, h, kind, msg = png_precheck(data, limits)
    if kind:
        return w, h, kind, msg
    problem = _png_chunk_problem(data, _png_max_chunks(limits), limits.max_png_bytes)
    if problem:
        return w, h, "invalid_image", f"PNG refused: {problem}"
    try:
        import io

        from PIL import Image, ImageFile

        ImageFile.LOAD_TRUNCATED_IMAGES = False
        with Image.open(io.BytesIO(data), formats=["PNG"]) as im:
            if im.size != (w, h):
                raise ValueError(f"decoded size {im.size} differs from the header")
            im.verify()
        with Image.open(io.BytesIO(_one_pixel_probe(data)), formats=["PNG"]) as im:
            im.load()
            exif_bytes = _exif_block_bytes(im.info)
            exif_warnings = _exif_warnings(im) if exif_bytes <= MAX_EXIF_BYTES else []
    except Exception as e:  # noqa: BLE001
        return w, h, "invalid_image", f"PNG does not decode: {_exc_text(e)}"
    if exif_bytes > MAX_EXIF_BYTES:
        return w, h, "too_large", f"PNG refused: an EXIF block of {exif_bytes} bytes (at most {MAX_EXIF_BYTES})"
    if exif_warnings:
        return w, h, "invalid_image", (f"PNG refused: PIL gives {len(exif_warnings)} warning(s) reading its EXIF block "
                                       f"(first: {exif_warnings[0]})")
    # last, so that a file refused for what it holds is labelled by that (a bomb, a bad stream, a large EXIF block)
    raw = _png_raw_size(w, h, data[24], data[25], data[28] == 1)
    most = raw + raw // 64 + PNG_SLACK_BYTES
    if len(data) > most:
        return w, h, "too_large", (f"PNG of {len(data)} bytes for an image {w}x{h} whose pixels take {raw} bytes "
                                   f"uncompressed: at most {most} (those, plus {PNG_SLACK_BYTES >> 10} KiB of metadata)")
    return w, h, None, ""


_EXIF_ORIENTATION = 0x0112


def _exif_warnings(image) -> list[str]:
    """What PIL warns while it reads the orientation of ``image`` (a PNG opened and loaded) as the trainer's ``to_rgb``
    does (``getexif().get(0x0112)``), in order. Each warning names the tag and sizes it is about, so a malformed
    block makes up to one new line of the trainer's stderr per IFD entry (~5400 entries fit the EXIF limit: a 64x64
    PNG cost the trainer 1 MB of stderr and 130 ms of CPU per image) and one new entry of Python's per-module
    warning registry, which keeps every distinct text for the life of the process."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            image.getexif().get(_EXIF_ORIENTATION)
        except Exception:  # noqa: BLE001 - to_rgb reads a block that fails to parse as no orientation
            pass
    return [str(w.message) for w in caught]


def _exif_block_bytes(info: dict) -> int:
    """Bytes of the EXIF block that PIL's ``getexif`` parses for a PNG whose chunks gave ``info``: its eXIf chunk (the
    last one; PIL prefixes ``Exif\\0\\0``), else the hex of a "Raw profile type exif" text chunk past its three header
    lines (zTXt and iTXt ones come here inflated)."""
    exif = info.get("exif")
    if isinstance(exif, bytes):
        return len(exif)
    raw = info.get("Raw profile type exif")
    if isinstance(raw, str):
        return len("".join("".join(raw.split("\n")[3:]).split())) // 2  # bytes.fromhex skips the whitespace
    return 0


def _result(ok=False, png=None, width=0, height=0, kind=None, msg="", t0=0.0, layers=None) -> dict:
    return dict(ok=ok, png=png, width=width, height=height, error_kind=kind, message=msg,
                elapsed_s=time.monotonic() - t0, isolation=layers or {})


# letters that Python calls printable but that draw nothing (Hangul fillers, the braille blank): they could hide text
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
# combining marks stacked on one character beyond this many are escaped: a long stack draws over the lines around it
_MAX_COMBINING = 2


def _printable(text: str) -> str:
    """Job text with control, bidi and other unprintable characters escaped as ``repr`` writes them: the message
    reaches terminals and logs, where escape sequences, carriage returns or line breaks could forge lines. Blank
    letters (``_BLANK_LETTERS``) and combining marks past ``_MAX_COMBINING`` in a row are escaped too."""
    import unicodedata

    out, run = [], 0
    for c in text:
        run = run + 1 if unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me") else 0
        keep = c.isprintable() and c not in _BLANK_LETTERS and run <= _MAX_COMBINING
        out.append(c if keep else c.encode("unicode_escape").decode("ascii"))  # as repr writes it: \x1b, \u3164
    return "".join(out)


def _parse_verdict(raw: bytes) -> tuple[str | None, str] | None:
    """The validator's frame: ``ok`` and a newline alone -> (None, ""); a kind of VERDICT_KINDS, a newline and a
    message (made printable, cut to VERDICT_MESSAGE_MAX characters) -> (kind, message); anything else None."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    kind, sep, msg = text.partition("\n")
    if not sep:
        return None
    if kind == "ok":
        return (None, "") if not msg else None
    if kind not in VERDICT_KINDS or not msg:
        return None
    return kind, _printable(msg[:VERDICT_MESSAGE_MAX])[:VERDICT_MESSAGE_MAX]


def _signal_name(sig: int) -> str:
    """"SIGSEGV" for 11; the number itself for a signal this Python has no name for."""
    try:
        return signal.Signals(sig).name
    except ValueError:
        return str(sig)


def _validator_verdict(exit_info: dict, timed_out: bool, frame: bytes, overflow: bool) -> tuple[str | None, str]:
    """(error kind, message) of the output from its validator child: (None, "") only for a child that exited with 0
    in time after writing exactly ``ok`` and a newline; else its own kind and message, or ``invalid_image`` saying
    what failed."""
    if timed_out:
        return "invalid_image", f"PNG validator timed out after {VALIDATOR_TIMEOUT_S} s"
    if overflow:  # its further writes failed (EPIPE): whatever it exited with, this is why
        return "invalid_image", f"PNG validator verdict larger than {FRAME_MAX} bytes"
    wstatus = exit_info.get("status") if isinstance(exit_info, dict) else None
    if not isinstance(wstatus, int):
        return "invalid_image", "PNG validator: no exit status"
    if os.WIFSIGNALED(wstatus):
        return "invalid_image", f"PNG validator killed by {_signal_name(os.WTERMSIG(wstatus))}"
    if not os.WIFEXITED(wstatus) or os.WEXITSTATUS(wstatus) != 0:
        return "invalid_image", f"PNG validator exited with status {wstatus}"
    verdict = _parse_verdict(frame)
    if verdict is None:
        return "invalid_image", f"malformed PNG validator verdict ({len(frame)} bytes)"
    return verdict


def _parse_frame(raw: bytes) -> tuple[str, str] | None:
    """The job's result frame: ``kind`` (one of JOB_KINDS), a newline, a UTF-8 message (made printable, cut to
    MESSAGE_MAX characters). None if malformed."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    kind, sep, msg = text.partition("\n")
    if not sep or kind not in JOB_KINDS:
        return None
    return kind, _printable(msg[:MESSAGE_MAX])[:MESSAGE_MAX]


def _remove_tree(path: str) -> None:
    """Remove a directory tree iteratively (no recursion, one descriptor at a time, no symlink followed)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        cur = os.open(path, flags)
    except FileNotFoundError:
        return
    except OSError:
        os.unlink(path)
        return
    names: list[str] = []
    try:
        while True:
            sub = None
            with os.scandir(cur) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        sub = sub or entry.name
                    else:
                        os.unlink(entry.name, dir_fd=cur)
            if sub is not None:
                nxt = os.open(sub, flags, dir_fd=cur)
                os.close(cur)
                cur, _ = nxt, names.append(sub)
                continue
            if not names:
                break
            parent = os.open("..", flags, dir_fd=cur)
            os.close(cur)
            cur = parent
            os.rmdir(names.pop(), dir_fd=cur)
    finally:
        os.close(cur)
    os.rmdir(path)


class _ZygoteGone(RuntimeError):
    pass


class _SetupFailed(Exception):
    """A child's sandbox could not be set up as asked (its errors as the message); it has been killed."""

    def __init__(self, message: str, layers: dict) -> None:
        super().__init__(message)
        self.layers = layers


def _kill(pidfd: int) -> None:
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:  # already gone
        pass


class Supervisor:
    def __init__(self, base: str, disk_bytes: int, skip: tuple = (), uid: int = JOB_UID) -> None:
        self.base, self.disk_bytes, self.skip, self.uid = base, disk_bytes, tuple(skip), int(uid)
        self.errors: list[str] = []
        self.root: str | None = None
        self.tree_read: list[str] = []  # what a job may read in the tree (``sb.tree_read_paths``)
        self.private_ns = False
        self.tmpfs_ok = False
        self.zygote_pid = 0
        self.zsock: socket.socket | None = None
        self.root_id: tuple | None = None
        self.own_ns: dict = {}
        self.isolation: dict = {}
        self.broken = False  # the zygote channel is out of step: answer, then let the pool replace us
        self.renice_failed = False  # the last job's threads multiplied and could not be reniced (``_wait``)

    # -- start-up --
    def start(self, close_in_zygote=()) -> None:
        root = os.path.join(self.base, "root")
        try:
            sb.make_private_mount_ns()
            self.private_ns = True
        except OSError as e:
            self.errors.append(f"minimal_root: private mount namespace: {e}")
        if self.private_ns and "minimal_root" not in self.skip:
            try:
                sources, devices, masked = _tree_sources()
                sb.build_root(root, sources, devices, masked)
                self.tree_read = sb.tree_read_paths(root)
                self.root = root
                st = os.stat(root)
                self.root_id = (st.st_dev, st.st_ino)
            except OSError as e:
                self.errors.append(f"minimal_root: {e}")
        self.jobdir = os.path.join(self.root, "job") if self.root else os.path.join(self.base, "job")
        if self.private_ns and "job_tmpfs" not in self.skip:
            try:
                os.makedirs(self.jobdir, exist_ok=True)
                sb.mount_job_tmpfs(self.jobdir, self.disk_bytes)
                sb.umount(self.jobdir)
                self.tmpfs_ok = True
            except OSError as e:
                self.errors.append(f"job_tmpfs: {e}")
        for ns, _ in _NS:
            try:
                self.own_ns[ns] = os.stat(f"/proc/self/ns/{ns}").st_ino
            except OSError:
                pass
        env = {"root": self.root, "tree_read": self.tree_read, "jobdir_host": self.jobdir, "skip": self.skip,
               "read_paths": [], "uid": self.uid}
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        me = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the zygote
            try:
                a.close()
                devnull = os.open("/dev/null", os.O_RDONLY)
                os.dup2(devnull, 0)
                os.close(devnull)
                for fd in close_in_zygote:
                    os.close(fd)
                _zygote_main(b, env, me)
            finally:
                os._exit(1)
        b.close()
        self.zygote_pid, self.zsock = pid, a
        ready = self._zrecv(None)
        if not ready.get("ready"):
            raise RuntimeError(f"zygote failed to start: {ready!r}")
        self.isolation = self.probe()

    def probe(self) -> dict:
        """Run an empty job without strict mode and record which layers could be applied."""
        job = {"code": "pass", "language": "python", "timeout_s": 20.0, "limits": RenderLimits(), "strict": False}
        res = self.run(job)
        iso = dict(res["isolation"])
        errors = list(iso.pop("errors", []))
        out = {k: iso.get(k, False) for k in LAYERS + WORKER_LAYERS}
        out["errors"] = self.errors + errors + ([] if res["isolation"] else [res["message"]])
        return out

    def close(self) -> None:
        if self.zsock is not None:
            self.zsock.close()
            self.zsock = None
        if self.zygote_pid:
            try:
                os.kill(self.zygote_pid, signal.SIGKILL)
                os.waitpid(self.zygote_pid, 0)
            except OSError:
                pass
            self.zygote_pid = 0

    # -- zygote channel --
    def _zrecv(self, timeout: float | None, with_fd: bool = False):
        self.zsock.settimeout(timeout)
        try:
            msg, fds, _, _ = socket.recv_fds(self.zsock, 4096, 1)
        except (socket.timeout, OSError) as e:
            raise _ZygoteGone(f"zygote did not answer: {e}") from e
        if not msg:
            raise _ZygoteGone("zygote exited")
        if with_fd:
            if len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                raise _ZygoteGone(f"zygote could not start a job: {msg[:200]!r}")
            return int(msg), fds[0]
        for fd in fds:
            os.close(fd)
        return json.loads(msg)

    # -- one job --
    def run(self, job: dict) -> dict:
        t0 = time.monotonic()
        self.renice_failed = False
        try:
            return self._run(job, t0)
        except _ZygoteGone:
            raise
        except Exception as e:  # noqa: BLE001 - a job never takes its worker down
            print(f"render worker: internal error: {e!r}", file=sys.stderr, flush=True)
            return _result(kind="crash", msg=f"render worker error: {_exc_text(e)}"[:500], t0=t0)

    def _new_jobdir(self) -> None:
        if self.tmpfs_ok:
            sb.mount_job_tmpfs(self.jobdir, self.disk_bytes, uid=self.uid, gid=self.uid)
        else:
            _remove_tree(self.jobdir)
            os.mkdir(self.jobdir, 0o700)
            os.chown(self.jobdir, self.uid, self.uid)

    def _drop_jobdir(self) -> None:
        if self.tmpfs_ok:
            try:
                sb.umount(self.jobdir)  # one call, however deep the job's tree
            except OSError:
                pass
        else:
            _remove_tree(self.jobdir)

    def _verify(self, pid: int, layers: dict, errors: list[str]) -> int:
        """Check the child's own report against what /proc shows; returns its VmSize."""
        facts: dict = {}
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        ids = fields.get("Uid", "").split() + fields.get("Gid", "").split()
        facts["uid_drop"] = len(ids) == 8 and all(x == str(self.uid) for x in ids) \
            and fields.get("Groups", "").strip() == ""
        facts["no_new_privs"] = fields.get("NoNewPrivs", "").strip() == "1"
        facts["seccomp"] = fields.get("Seccomp", "").strip() == "2"
        nspid = fields.get("NSpid", "").split()
        facts["pidns"] = len(nspid) >= 2 and nspid[-1] == "1"
        for ns, layer in _NS:
            try:
                theirs = os.stat(f"/proc/{pid}/ns/{ns}").st_ino
                facts[layer] = facts.get(layer, True) and ns in self.own_ns and theirs != self.own_ns[ns]
            except OSError:
                facts[layer] = False
        with open(f"/proc/{pid}/stat") as f:
            after = f.read().rpartition(")")[2].split()
        facts["setsid"] = len(after) > 4 and after[3] == str(pid)
        if self.root_id is not None:
            st = os.stat(f"/proc/{pid}/root")
            facts["minimal_root"] = (st.st_dev, st.st_ino) == self.root_id
        for k, ok in facts.items():
            if layers.get(k) and not ok:
                layers[k] = False
                errors.append(f"{k}: not confirmed by /proc/<pid>")
        return int(fields.get("VmSize", "0 kB").split()[0]) * 1024

    @staticmethod
    def _limits_msg(limits: RenderLimits, timeout_s: float) -> bytes:
        data = json.dumps({"memory_bytes": limits.memory_bytes, "cpu_s": int(math.ceil(timeout_s)) + 1,
                           "fsize": limits.max_file_bytes, "nofile": limits.nofile, "nproc": limits.nproc}).encode()
        return struct.pack("<I", len(data)) + data

    @staticmethod
    def _check_limits(pid: int, vm: int, limits: RenderLimits, timeout_s: float) -> str | None:
        """None when /proc/<pid>/limits shows (at most) the limits asked for, else what is wrong."""
        cpu = int(math.ceil(timeout_s)) + 1
        want = {"Max cpu time": (cpu, cpu + 1), "Max file size": (limits.max_file_bytes,) * 2,
                "Max open files": (limits.nofile,) * 2, "Max processes": (limits.nproc,) * 2,
                "Max core file size": (0, 0), "Max address space": (vm + limits.memory_bytes,) * 2,
                "Max realtime priority": (0, 0), "Max nice priority": (0, 0),
                "Max pending signals": (sb.SIGPENDING,) * 2, "Max locked memory": (sb.MEMLOCK,) * 2,
                "Max msgqueue size": (sb.MSGQUEUE,) * 2}
        with open(f"/proc/{pid}/limits") as f:
            rows = [re.split(r"\s{2,}", line.strip()) for line in f.read().splitlines()[1:]]
        have = {r[0]: r[1:3] for r in rows if len(r) >= 3}
        for name, (soft, hard) in want.items():
            got = have.get(name)
            if not got or "unlimited" in got or int(got[0]) > soft or int(got[1]) > hard:
                return f"{name}: {got} (wanted at most {soft} / {hard})"
        return None

    def _run(self, job: dict, t0: float) -> dict:
        limits: RenderLimits = job["limits"]
        code, language = job["code"], job["language"]
        if language not in LANGUAGES:
            return _result(kind="crash", msg=f"unknown language {language!r}", t0=t0)
        if not isinstance(code, str):
            return _result(kind="too_large", msg="source missing", t0=t0)
        # an SVG is bounded by max_svg_bytes (its UTF-8 size, checked in the sandbox): max_code_chars (200,000) refused
        # an SVG of 5000 small shapes (~350 KB, within the documented 1 MiB) as "source missing or too long"
        field, cap = ("max_code_chars", limits.max_code_chars) if language == "python" else \
            ("max_svg_bytes", limits.max_svg_bytes)
        if len(code) > cap:
            return _result(kind="too_large", msg=f"the {language} source of {len(code)} characters exceeds "
                                                 f"{field} ({cap})", t0=t0)
        timeout_s = float(job["timeout_s"])
        strict = job.get("strict", True)
        payload = json.dumps({"code": code, "language": language, "limits": dataclasses.asdict(limits)}).encode()

        def classify(exit_info, timed_out, frame, overflow, layers, page_tables) -> dict:  # reads out.png: mounted
            return self._classify(exit_info, timed_out, frame, overflow, limits, timeout_s, t0, layers, page_tables)

        try:
            res = self._in_sandbox(payload, limits, timeout_s, strict, classify, oom_adj=JOB_OOM_SCORE_ADJ)
        except _SetupFailed as e:
            return _result(kind="crash", msg="sandbox setup failed: " + str(e)[:1500], t0=t0, layers=e.layers)
        return self._validated(res, limits, strict, t0) if res["ok"] else res

    def _validated(self, res: dict, limits: RenderLimits, strict: bool, t0: float) -> dict:
        """``res``, an ``ok`` result whose PNG passed ``png_precheck``, once a validator child has run ``validate_png``
        on a copy of its bytes: forked from the zygote after the job has ended (the job dir unmounted), on a fresh job
        dir, under a job's layers and limits, so that zlib and PIL parse the job's bytes only there. Anything but a
        clean ``ok`` verdict within VALIDATOR_TIMEOUT_S (a crash, a timeout, a malformed or oversized frame, a failed
        sandbox) makes the output ``invalid_image``."""
        payload = json.dumps({"op": VALIDATE_OP, "limits": dataclasses.asdict(limits)}).encode() + b"\0" + res["png"]

        def verdict(exit_info, timed_out, frame, overflow, layers, page_tables) -> tuple[str | None, str]:
            return _validator_verdict(exit_info, timed_out, frame, overflow)  # killed for its page tables: SIGKILL

        try:
            kind, msg = self._in_sandbox(payload, limits, VALIDATOR_TIMEOUT_S, strict, verdict,
                                         oom_adj=VALIDATOR_OOM_SCORE_ADJ)
        except _SetupFailed as e:
            kind, msg = "invalid_image", "PNG validator sandbox setup failed: " + str(e)[:1500]
        if kind:
            return _result(kind=kind, msg=msg, width=res["width"], height=res["height"], t0=t0,
                           layers=res["isolation"])
        return {**res, "elapsed_s": time.monotonic() - t0}

    def _in_sandbox(self, payload: bytes, limits: RenderLimits, timeout_s: float, strict: bool, on_exit,
                    oom_adj: int = JOB_OOM_SCORE_ADJ):
        """One child from the zygote on a fresh job dir: its limits, its setup report checked against /proc (a missing
        layer in strict mode ends it: ``_SetupFailed``), its ``oom_score_adj``, then ``payload``; waits for its exit or
        ``timeout_s``, reading its result frame, and returns ``on_exit(exit_info, timed_out, frame, overflow, layers,
        page_tables)``, called while the job dir is still mounted."""
        pid = pidfd = -1
        exit_info = None
        own: list[int] = []
        mounted = False
        try:
            self._new_jobdir()
            mounted = True
            st_r, st_w = os.pipe2(os.O_CLOEXEC)
            own += [st_r, st_w]
            ctl_r, ctl_w = os.pipe2(os.O_CLOEXEC)
            own += [ctl_r, ctl_w]
            job_r, job_w = os.pipe2(os.O_CLOEXEC)
            own += [job_r, job_w]
            try:
                socket.send_fds(self.zsock, [b"spawn"], [st_w, ctl_w, job_r])
            finally:
                for fd in (st_w, ctl_w, job_r):  # the child's ends: only the child keeps them
                    own.remove(fd)
                    os.close(fd)
            pid, pidfd = self._zrecv(SETUP_TIMEOUT_S, with_fd=True)
            own.append(pidfd)
            _write_all(job_w, self._limits_msg(limits, timeout_s))  # small: fits the pipe

            # 1. the child's setup report, written before it has the job; checked against /proc
            layers: dict = {}
            errors: list[str] = []
            vm = 0
            report = self._read_report(ctl_r, pidfd)
            if report is None:
                errors.append("sandbox setup: no report from the job child")
            else:
                layers.update({k: report["layers"].get(k, False) for k in LAYERS})
                errors.extend(str(x)[:300] for x in report.get("errors", [])[:50])
                try:
                    vm = self._verify(pid, layers, errors)
                    bad = self._check_limits(pid, vm, limits, timeout_s)
                except (OSError, ValueError) as e:
                    bad = f"cannot read /proc/{pid}: {e}"
                    for k in ("uid_drop", "no_new_privs", "seccomp", "pidns", "setsid"):
                        layers[k] = False
                if bad and layers.get("rlimits"):
                    layers["rlimits"] = False
                    errors.append(f"rlimits: {bad}")
                oom = _set_oom_score_adj(pid, oom_adj)
                if oom:  # reported with the layers' errors; the job still runs (no isolation layer is missing)
                    errors.append(oom)
            layers["job_tmpfs"] = self.tmpfs_ok
            layers["errors"] = errors
            missing = [k for k in LAYERS + WORKER_LAYERS if not layers.get(k)]
            if report is None or (missing and strict):
                _kill(pidfd)
                exit_info = self._zrecv(SETUP_TIMEOUT_S)
                raise _SetupFailed("; ".join(errors), layers)

            # 2. the job (its /proc status opened before: that of this child, whatever pid is reused later; a child
            # already gone has no page tables to watch)
            try:
                proc_status = os.open(f"/proc/{pid}/status", os.O_RDONLY | os.O_CLOEXEC)
                own.append(proc_status)
            except OSError:
                proc_status = -1
            own.remove(job_w)
            self._send_job(job_w, payload)
            timed_out, frame, overflow, page_tables, renice_failed = self._wait(
                pidfd, st_r, timeout_s, proc_status, _page_table_cap(vm + limits.memory_bytes), pgid=pid)
            self.renice_failed = self.renice_failed or renice_failed
            exit_info = self._zrecv(SETUP_TIMEOUT_S)
            return on_exit(exit_info, timed_out, frame, overflow, layers, page_tables)
        finally:
            if pidfd >= 0 and exit_info is None:  # something went wrong half-way: end the child
                try:
                    _kill(pidfd)
                    self._zrecv(SETUP_TIMEOUT_S)  # its exit report, so the channel stays in step
                except (OSError, _ZygoteGone, ValueError):
                    self.broken = True
            for fd in own:
                try:
                    os.close(fd)
                except OSError:
                    pass
            if mounted:
                self._drop_jobdir()

    @staticmethod
    def _read_report(ctl_r: int, pidfd: int) -> dict | None:
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        buf = b""
        while len(buf) <= 65536:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([ctl_r], [], [], left)[0]:
                return None
            chunk = os.read(ctl_r, 65536)
            if not chunk:
                break
            buf += chunk
        try:
            report = json.loads(buf)
        except ValueError:
            return None
        if not isinstance(report, dict) or not isinstance(report.get("layers"), dict):
            return None
        return report

    @staticmethod
    def _send_job(job_w: int, payload: bytes) -> None:
        os.set_blocking(job_w, False)
        view = memoryview(payload)
        deadline = time.monotonic() + SETUP_TIMEOUT_S
        try:
            while view:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([], [job_w], [], left)[1]:
                    break
                try:
                    view = view[os.write(job_w, view):]
                except BlockingIOError:
                    continue
        except BrokenPipeError:
            pass
        finally:
            os.close(job_w)

    @staticmethod
    def _wait(pidfd: int, st_r: int, timeout_s: float, proc_status: int = -1,
              max_page_tables: int = 0, pgid: int = 0) -> tuple[bool, bytes, bool, int, bool]:
        """Wait for the child's exit or the deadline, reading its result frame meanwhile (capped). With ``proc_status``
        (its ``/proc/<pid>/status``, open) the child is killed once its page tables pass ``max_page_tables`` bytes;
        what they held then is returned with the result (0 if never seen past the cap); and with ``pgid`` (its process
        group: its pid, as it is a session of its own) its threads are reniced as their number grows
        (``_fair_nice``); whether a renice failed on the live job comes last (it is not tried again)."""
        deadline = time.monotonic() + timeout_s
        frame = bytearray()
        overflow = False
        reading = True
        timed_out = False
        exited = False
        page_tables = 0
        nice = 0
        renice_failed = False
        while not exited:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            if proc_status >= 0:
                status = _read_status(proc_status)
                fair = _fair_nice(_status_threads(status))
                if pgid > 0 and fair > nice and not renice_failed:
                    done = _renice_group(pgid, pidfd, fair)
                    nice = fair if done else nice
                    renice_failed = done is False
                seen = _page_table_bytes(proc_status, status)
                if seen > max_page_tables:
                    page_tables = seen
                    _kill(pidfd)
                    select.select([pidfd], [], [], SETUP_TIMEOUT_S)
                    break
                left = min(left, PAGE_TABLE_POLL_S)
            ready = select.select([pidfd] + ([st_r] if reading else []), [], [], left)[0]
            if st_r in ready and reading:
                chunk = os.read(st_r, 65536)
                if not chunk:
                    reading = False
                elif len(frame) + len(chunk) > FRAME_MAX:
                    # the result is `protocol` already: swap the pipe's read end for /dev/null, so that the job's
                    # further writes fail (EPIPE) instead of keeping this root process reading for the job's time
                    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
                    os.dup2(null, st_r, inheritable=False)
                    os.close(null)
                    overflow, frame, reading = True, bytearray(), False
                else:
                    frame += chunk
            exited = pidfd in ready
        if timed_out:
            _kill(pidfd)
            select.select([pidfd], [], [], SETUP_TIMEOUT_S)
        if reading:  # the child is gone: what is left in the pipe, up to the cap
            os.set_blocking(st_r, False)
            try:
                while True:
                    chunk = os.read(st_r, 65536)
                    if not chunk:
                        break
                    if overflow or len(frame) + len(chunk) > FRAME_MAX:
                        overflow, frame = True, bytearray()
                        break
                    frame += chunk
            except BlockingIOError:
                pass
        return timed_out, bytes(frame), overflow, page_tables, renice_failed

    def _classify(self, exit_info, timed_out, frame, overflow, limits, timeout_s, t0, layers, page_tables=0) -> dict:
        wstatus, cpu = int(exit_info.get("status", 0)), float(exit_info.get("cpu_s", 0.0))
        if timed_out:
            return _result(kind="timeout", msg=f"wall-clock timeout after {timeout_s} s", t0=t0, layers=layers)
        if page_tables:
            return _result(kind="memory", msg=f"killed for its page tables: {page_tables >> 20} MiB, past 1/"
                           f"{PAGE_TABLE_SHARE} of its address-space limit", t0=t0, layers=layers)
        if os.WIFSIGNALED(wstatus):
            sig = os.WTERMSIG(wstatus)
            name = _signal_name(sig)
            if sig == signal.SIGSYS:
                return _result(kind="forbidden", msg="blocked system call (seccomp)", t0=t0, layers=layers)
            if sig == signal.SIGPIPE and overflow:  # its result pipe was closed on it for an oversized frame
                return _result(kind="protocol", msg=f"job result frame larger than {FRAME_MAX} bytes", t0=t0,
                               layers=layers)
            if sig == signal.SIGXCPU:
                return _result(kind="timeout", msg="CPU time limit", t0=t0, layers=layers)
            if sig == signal.SIGXFSZ:
                return _result(kind="too_large", msg="file size limit", t0=t0, layers=layers)
            if sig == signal.SIGBUS and self.tmpfs_ok and _disk_full(self.jobdir):
                # a page of a shared mapping of a job-dir file that the full tmpfs had no block for: the job dir's
                # size, as ENOSPC from write() is (a SIGBUS with room left, a mapping past its file's end, stays a crash)
                return _result(kind="too_large", msg=f"job killed by SIGBUS writing a mapped file: its job dir is full "
                               f"({limits.disk_bytes} bytes)", t0=t0, layers=layers)
            if sig == signal.SIGKILL:  # the kernel's answer to the hard CPU limit, or the OOM killer
                hard, oom_kills = exit_info.get("cpu_hard"), exit_info.get("oom_kills")
                # no OOM kill anywhere while it ran: the kernel's hard limit, met on its tick-sampled clock (see
                # _oom_kills; half the limit at least, as no sampling error comes near that)
                if isinstance(hard, int) and (cpu >= hard - 0.05 or (oom_kills == 0 and cpu >= hard / 2)):
                    return _result(kind="timeout", msg="CPU time limit (SIGKILL)", t0=t0, layers=layers)
                if hard is None and cpu >= math.ceil(timeout_s) + 1:  # past its soft limit: likely the hard
                    return _result(kind="timeout", msg="CPU time limit (SIGKILL?)", t0=t0, layers=layers)
                why = "below its CPU limit (out of memory?)" if isinstance(hard, int) else "(memory or CPU limit)"
                return _result(kind="memory", msg=f"killed by SIGKILL {why}", t0=t0, layers=layers)
            return _result(kind="crash", msg=f"job killed by {name}", t0=t0, layers=layers)
        code = os.WEXITSTATUS(wstatus)
        if overflow:
            return _result(kind="protocol", msg=f"job result frame larger than {FRAME_MAX} bytes", t0=t0,
                           layers=layers)
        parsed = _parse_frame(frame) if frame else None
        if frame and parsed is None:
            return _result(kind="protocol", msg=f"malformed job result frame ({len(frame)} bytes)", t0=t0,
                           layers=layers)
        if code != 0:
            extra = f": {JOB_MESSAGE_PREFIX}{parsed[1]}" if parsed else " without a report"
            return _result(kind="crash", msg=f"job exited with code {code}{extra}", t0=t0, layers=layers)
        if parsed is None:
            if not os.path.lexists(os.path.join(self.jobdir, OUT_NAME)):
                return _result(kind="no_output", msg="job exited without output", t0=t0, layers=layers)
            parsed = ("ok", "")
        kind, jmsg = parsed
        msg = JOB_MESSAGE_PREFIX + jmsg if jmsg else ""
        if kind != "ok":
            return _result(kind=kind, msg=msg, t0=t0, layers=layers)
        data, err, emsg = _read_output(self.jobdir, limits)
        if err:
            return _result(kind=err, msg=emsg, t0=t0, layers=layers)
        w, h, err, emsg = png_precheck(data, limits)  # the rest in a sandboxed validator (``_validated``)
        if err:
            return _result(kind=err, msg=emsg, width=w, height=h, t0=t0, layers=layers)
        return _result(ok=True, png=data, width=w, height=h, msg=msg, t0=t0, layers=layers)


# --- main loop ------------------------------------------------------------------------------------------
def main() -> None:
    """argv: [pkg_parent, base_dir, disk_bytes, skip_layers, job_uid]; ``base_dir`` is made and removed by
    the pool; ``skip_layers`` (comma list, normally empty) exists only so tests can simulate a missing layer;
    ``job_uid`` (uid and gid of this worker's jobs) defaults to ``JOB_UID``."""
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints cannot corrupt the protocol
    in_fd = 0
    # No PR_SET_PDEATHSIG here: it fires when the *thread* that spawned us exits, and the pool may spawn
    # replacements from short-lived threads. A dead pool closes our stdin instead: EOF ends the loop.
    base, disk_bytes = sys.argv[2], int(sys.argv[3])
    skip = tuple(x for x in (sys.argv[4] if len(sys.argv) > 4 else "").split(",") if x)
    uid = int(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] else JOB_UID
    sup = Supervisor(base, disk_bytes, skip, uid)
    try:
        sup.start(close_in_zygote=(out_fd,))
        send_msg(out_fd, {"ready": True, "pid": os.getpid(), "zygote_pid": sup.zygote_pid,
                          "isolation": sup.isolation})
        while True:
            try:
                msg = recv_msg(in_fd)
            except BadMessage as e:  # answered like any failed job; this worker stays in step and serves on
                send_msg(out_fd, _result(kind="crash", msg=f"render worker could not read the job: {e}"[:500],
                                         t0=time.monotonic()))
                continue
            if msg is None or msg.get("op") == "exit":
                break
            t0 = time.monotonic()
            try:
                reply = sup.run(msg)
            except _ZygoteGone as e:  # answer, then end: the pool replaces this worker
                send_msg(out_fd, _result(kind="crash", msg=f"render worker failed: {e}", t0=t0))
                break
            reply["renice_failed"] = sup.renice_failed  # counted by the pool (``RenderPool.renice_failed``)
            send_msg(out_fd, reply)
            if sup.broken:
                break
    finally:
        sup.close()


if __name__ == "__main__":  # pragma: no cover
    main()
