"""Fork-server render worker.

Started by ``RenderPool`` as ``python -I -c "...; from render.worker import main; main()"`` with a small
environment. It imports matplotlib (Agg), numpy, cairosvg and a set of common modules once, draws a
warm-up figure (which builds / loads the font cache), then serves requests over its stdin / a private
copy of its stdout: length-prefixed pickles from the trusted pool. For every job it forks a child which
sandboxes itself (see ``render.sandbox``) and runs the job; the worker enforces the wall-clock timeout,
classifies the exit, validates the PNG and removes the job dir. Nothing a job writes is ever unpickled.

Image choice for python jobs: if the code writes ``out.png`` into its working directory (the job dir),
that file wins; otherwise the current matplotlib figure (``plt.gcf()``, when any figure exists) is saved
at the figure's own dpi.
"""

from __future__ import annotations

import errno
import json
import math
import os
import pickle
import select
import shutil
import signal
import stat
import struct
import sys
import tempfile
import time

from .sandbox import (
    apply_landlock,
    apply_seccomp,
    drop_privileges,
    no_new_privs,
    set_pdeathsig,
    mount_job_tmpfs,
    set_rlimits,
    umount,
    unshare_net,
)
from .svg import screen_svg
from .types import ERROR_KINDS, LANGUAGES, RenderLimits

JOB_UID = JOB_GID = 65534
OUT_NAME = "out.png"
SETUP_FAILED_EXIT = 121
_STATUS_MAX = 8192
_PNG_SIG = b"\x89PNG\r\n\x1a\n"
LAYERS = ("setsid", "rlimits", "netns", "uid_drop", "no_new_privs", "landlock", "seccomp")  # per job child
WORKER_LAYERS = ("job_tmpfs",)  # set up once by the worker
_FORBIDDEN_ERRNOS = {errno.EPERM, errno.EACCES, errno.EROFS, errno.ENETUNREACH, errno.ENETDOWN,
                     errno.EXDEV, errno.ELOOP}

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
    "encodings.utf_16", "encodings.unicode_escape", "socket", "xml.etree.ElementTree",
)


# --- framing --------------------------------------------------------------------------------------------
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


def recv_msg(fd: int):
    head = _read_exact(fd, 8)
    if head is None:
        return None
    body = _read_exact(fd, struct.unpack("<Q", head)[0])
    return None if body is None else pickle.loads(body)


# --- warm-up --------------------------------------------------------------------------------------------
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


def _vm_size() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _read_paths(mpl_data: str) -> list[str]:
    paths = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/etc/fonts", "/etc/ld.so.cache", "/etc/localtime",
             "/etc/matplotlibrc", "/dev/null", "/dev/urandom", "/dev/zero", sys.prefix, sys.base_prefix,
             sys.exec_prefix, mpl_data]
    out = []
    for p in paths:
        if p and p not in out and os.path.exists(p):
            out.append(p)
    return out


# --- the job child --------------------------------------------------------------------------------------
def _write_status(fd: int, status: dict) -> None:
    try:
        data = json.dumps(status)[:_STATUS_MAX].encode()
        while data:
            data = data[os.write(fd, data):]
    except Exception:
        pass


def _exc_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:2000]


def _classify_exception(e: BaseException) -> str:
    if isinstance(e, MemoryError):
        return "memory"
    if isinstance(e, PermissionError):
        return "forbidden"
    if isinstance(e, OSError):
        if e.errno in _FORBIDDEN_ERRNOS:
            return "forbidden"
        if e.errno == errno.EFBIG or e.errno == errno.ENOSPC:
            return "too_large"
        if e.errno == errno.ENOMEM:
            return "memory"
        if e.errno == errno.EMFILE:
            return "forbidden"
    text = str(e)
    if "NO_MEMORY" in text or "out of memory" in text.lower():
        return "memory"
    if "INVALID_SIZE" in text or "too large" in text.lower():
        return "too_large"
    return "crash"


def _child_sandbox(status_fd: int, jobdir: str, job: dict, env: dict) -> dict:
    """Apply every layer; returns {layer: True/False or detail}. Runs as root until ``uid_drop``."""
    layers: dict = {}
    errors: list[str] = []

    def step(name, fn):
        if name in env.get("skip_layers", ()):  # test hook: simulate a kernel without this layer
            layers[name] = False
            errors.append(f"{name}: skipped on request")
            return
        try:
            r = fn()
            layers[name] = True if r is None else r
        except Exception as e:  # noqa: BLE001 - every failure is reported
            layers[name] = False
            errors.append(f"{name}: {e}")

    step("setsid", os.setsid)
    limits: RenderLimits = job["limits"]
    step("rlimits", lambda: set_rlimits(
        address_space=env["vm_base"] + limits.memory_bytes,
        cpu_s=int(math.ceil(job["timeout_s"])) + 1,
        fsize=limits.max_file_bytes,
        nofile=limits.nofile,
        nproc=limits.nproc,
    ))
    step("netns", unshare_net)
    os.chdir(jobdir)
    step("uid_drop", lambda: drop_privileges(JOB_UID, JOB_GID))
    try:
        set_pdeathsig(signal.SIGKILL)  # cleared by the uid change, so set it afterwards
    except Exception:
        pass
    step("no_new_privs", no_new_privs)
    step("landlock", lambda: apply_landlock(env["read_paths"], [jobdir]))
    step("seccomp", apply_seccomp)
    layers["errors"] = errors
    return layers


def _child_main(status_fd: int, jobdir: str, job: dict, env: dict) -> None:
    # file descriptors: 0/1/2 -> /dev/null, status pipe -> 3, nothing else survives
    devnull = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if status_fd != 3:
        os.dup2(status_fd, 3, inheritable=False)
        os.close(status_fd)
    status_fd = 3
    os.closerange(4, 1 << 16)  # also closes the worker's protocol fds and the /dev/null fd

    os.environ.clear()
    os.environ.update({"PATH": "/usr/bin:/bin", "HOME": jobdir, "TMPDIR": jobdir, "MPLCONFIGDIR": jobdir,
                       "LANG": "C.UTF-8", "MPLBACKEND": "Agg"})
    tempfile.tempdir = jobdir

    layers = _child_sandbox(status_fd, jobdir, job, env)
    failed = [k for k in LAYERS if not layers.get(k)]
    if failed and job["strict"]:
        _write_status(status_fd, {"kind": "crash", "msg": "sandbox setup failed: " + "; ".join(layers["errors"]),
                                  "layers": layers})
        os._exit(SETUP_FAILED_EXIT)

    status = {"kind": "ok", "msg": "", "layers": layers}
    limits: RenderLimits = job["limits"]
    try:
        if job["language"] == "python":
            status.update(_run_python(job["code"], limits))
        else:
            status.update(_run_svg(job["code"]))
    except BaseException as e:  # noqa: BLE001 - classified, never re-raised
        status.update(kind=_classify_exception(e), msg=_exc_text(e))
    _write_status(status_fd, status)
    os._exit(0)


def _run_python(code: str, limits: RenderLimits) -> dict:
    import builtins

    import matplotlib.pyplot as plt

    try:
        compiled = compile(code, "<render>", "exec")
    except (SyntaxError, ValueError) as e:
        return {"kind": "syntax", "msg": _exc_text(e)}
    except (MemoryError, RecursionError) as e:
        return {"kind": "syntax", "msg": "source too complex to compile: " + _exc_text(e)}
    g = {"__name__": "__main__", "__builtins__": builtins}
    try:
        exec(compiled, g)
    except SystemExit:
        pass
    if os.path.lexists(OUT_NAME):
        return {"kind": "ok", "msg": "out.png written by the code"}
    if not plt.get_fignums():
        return {"kind": "no_output", "msg": "the code drew no figure and wrote no out.png"}
    fig = plt.gcf()
    w_in, h_in = fig.get_size_inches()
    w, h = w_in * fig.dpi, h_in * fig.dpi
    if not (w <= limits.max_side and h <= limits.max_side):
        return {"kind": "too_large", "msg": f"figure of {w:.0f}x{h:.0f} px exceeds {limits.max_side} px"}
    fig.savefig(OUT_NAME, format="png")
    return {"kind": "ok", "msg": "current figure"}


def _run_svg(text: str) -> dict:
    import cairosvg

    try:
        cairosvg.svg2png(bytestring=text.encode("utf-8"), write_to=OUT_NAME, unsafe=False)
    except Exception as e:  # noqa: BLE001
        if type(e).__name__ in ("ParseError", "ExpatError"):
            return {"kind": "syntax", "msg": _exc_text(e)}
        raise
    return {"kind": "ok", "msg": "svg"}


# --- the worker side of one job -------------------------------------------------------------------------
def _png_size(data: bytes) -> tuple[int, int] | None:
    if len(data) < 24 or not data.startswith(_PNG_SIG) or data[12:16] != b"IHDR":
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


def validate_png(data: bytes, limits: RenderLimits) -> tuple[int, int, str | None, str]:
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
    try:
        import io

        from PIL import Image

        with Image.open(io.BytesIO(data)) as im:
            im.verify()
    except Exception as e:  # noqa: BLE001
        return w, h, "invalid_image", f"PNG does not decode: {_exc_text(e)}"
    return w, h, None, ""


def _result(ok=False, png=None, width=0, height=0, kind=None, msg="", t0=0.0, layers=None) -> dict:
    return dict(ok=ok, png=png, width=width, height=height, error_kind=kind, message=msg,
                elapsed_s=time.monotonic() - t0, isolation=layers or {})


def run_job(job: dict, env: dict) -> dict:
    t0 = time.monotonic()
    limits: RenderLimits = job["limits"]
    code = job["code"]
    if job["language"] not in LANGUAGES:
        return _result(kind="crash", msg=f"unknown language {job['language']!r}", t0=t0)
    if not isinstance(code, str) or len(code) > limits.max_code_chars:
        return _result(kind="too_large", msg="source missing or too long", t0=t0)
    if job["language"] == "svg":
        reason = screen_svg(code)
        if reason:
            return _result(kind="forbidden", msg=reason, t0=t0)

    jobdir = tempfile.mkdtemp(prefix="job-", dir=env["base"])
    os.chown(jobdir, JOB_UID, JOB_GID)
    os.chmod(jobdir, 0o700)
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(rfd)
            _child_main(wfd, jobdir, job, env)
        finally:
            os._exit(SETUP_FAILED_EXIT + 1)
    os.close(wfd)
    timed_out = False
    try:
        pidfd = os.pidfd_open(pid)
        try:
            ready, _, _ = select.select([pidfd], [], [], job["timeout_s"])
        finally:
            os.close(pidfd)
        if not ready:
            timed_out = True
    except OSError:  # no pidfd support: poll without reaping
        deadline = t0 + job["timeout_s"]
        while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            if time.monotonic() > deadline:
                timed_out = True
                break
            time.sleep(0.002)
    if timed_out:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except OSError:
                pass
    _, wstatus, rusage = os.wait4(pid, 0)
    try:  # the child cannot fork (seccomp), but make sure nothing of its group survives
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    os.set_blocking(rfd, False)
    raw = b""
    try:
        while len(raw) < _STATUS_MAX * 2:
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            raw += chunk
    except BlockingIOError:
        pass
    os.close(rfd)
    try:
        status = json.loads(raw.decode("utf-8", "replace")) if raw else None
        if not isinstance(status, dict):
            status = None
    except ValueError:
        status = None
    layers = status.get("layers") if status and isinstance(status.get("layers"), dict) else {}
    try:
        return _classify(job, jobdir, wstatus, rusage, timed_out, status, layers, t0)
    finally:
        shutil.rmtree(jobdir, ignore_errors=True)


def _classify(job, jobdir, wstatus, rusage, timed_out, status, layers, t0) -> dict:
    limits: RenderLimits = job["limits"]
    if timed_out:
        return _result(kind="timeout", msg=f"wall-clock timeout after {job['timeout_s']} s", t0=t0, layers=layers)
    if os.WIFSIGNALED(wstatus):
        sig = os.WTERMSIG(wstatus)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGSYS:
            return _result(kind="forbidden", msg="blocked system call (seccomp)", t0=t0, layers=layers)
        if sig == signal.SIGXCPU:
            return _result(kind="timeout", msg="CPU time limit", t0=t0, layers=layers)
        if sig == signal.SIGXFSZ:
            return _result(kind="too_large", msg="file size limit", t0=t0, layers=layers)
        if sig == signal.SIGKILL:
            cpu = rusage.ru_utime + rusage.ru_stime
            if cpu >= math.ceil(job["timeout_s"]) + 1:
                return _result(kind="timeout", msg="CPU time limit (SIGKILL)", t0=t0, layers=layers)
            return _result(kind="memory", msg="killed (out of memory?)", t0=t0, layers=layers)
        return _result(kind="crash", msg=f"job killed by {name}", t0=t0, layers=layers)
    code = os.WEXITSTATUS(wstatus)
    if status is None:
        if code == 0 and os.path.lexists(os.path.join(jobdir, OUT_NAME)):
            status = {"kind": "ok", "msg": ""}
        elif code == 0:
            return _result(kind="no_output", msg="job exited without output", t0=t0, layers=layers)
        else:
            return _result(kind="crash", msg=f"job exited with code {code} without a report", t0=t0, layers=layers)
    kind, msg = status.get("kind"), str(status.get("msg", ""))[:2000]
    if kind != "ok":
        if kind not in ERROR_KINDS:
            kind = "crash"
        return _result(kind=kind, msg=msg, t0=t0, layers=layers)
    data, err, emsg = _read_output(jobdir, limits)
    if err:
        return _result(kind=err, msg=emsg, t0=t0, layers=layers)
    w, h, err, emsg = validate_png(data, limits)
    if err:
        return _result(kind=err, msg=emsg, width=w, height=h, t0=t0, layers=layers)
    return _result(ok=True, png=data, width=w, height=h, msg=msg, t0=t0, layers=layers)


# --- main loop ------------------------------------------------------------------------------------------
def probe_isolation(env: dict) -> dict:
    """Run an empty job without strict mode and report which layers could be applied."""
    job = {"code": "pass", "language": "python", "timeout_s": 20.0, "limits": RenderLimits(), "strict": False}
    res = run_job(job, env)
    layers = dict(res["isolation"])
    layers.pop("errors", None)
    out = {k: layers.get(k, False) for k in LAYERS}
    out["errors"] = res["isolation"].get("errors", []) or ([] if layers else [res["message"]])
    return out


def main() -> None:
    """argv: [pkg_parent, base_dir, disk_bytes, skip_layers]; ``base_dir`` is made and removed by the pool;
    ``skip_layers`` (comma list, normally empty) exists only so tests can simulate a missing layer."""
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints cannot corrupt the protocol
    in_fd = 0
    # No PR_SET_PDEATHSIG here: it fires when the *thread* that spawned us exits, and the pool may spawn
    # replacements from short-lived threads. A dead pool closes our stdin instead: EOF ends the loop.
    base, disk_bytes = sys.argv[2], int(sys.argv[3])
    skip_layers = tuple(x for x in (sys.argv[4] if len(sys.argv) > 4 else "").split(",") if x)
    worker_layers, errors = {"job_tmpfs": False}, []
    try:
        mount_job_tmpfs(base, disk_bytes)
        worker_layers["job_tmpfs"] = True
    except OSError as e:
        errors.append(f"job_tmpfs: {e}")
    try:
        warm_up()
        import matplotlib

        env = {"base": base, "vm_base": _vm_size(), "read_paths": _read_paths(matplotlib.get_data_path()),
               "skip_layers": skip_layers}
        iso = probe_isolation(env)
        iso.update(worker_layers)
        iso["errors"] = errors + iso["errors"]
        send_msg(out_fd, {"ready": True, "pid": os.getpid(), "isolation": iso})
        while True:
            msg = recv_msg(in_fd)
            if msg is None or msg.get("op") == "exit":
                break
            send_msg(out_fd, run_job(msg, env))
    finally:
        if worker_layers["job_tmpfs"]:
            try:
                umount(base)
            except OSError:
                pass


if __name__ == "__main__":  # pragma: no cover
    main()
