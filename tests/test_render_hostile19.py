"""render/: a nineteenth pass, on a job's reach into the host beside it (the trainer's machine), into other jobs, and
into the PNG validator.

1. ``posix_fadvise(POSIX_FADV_DONTNEED)`` on a bound file dropped the host's page cache of it: overlayfs passes the
   advice to the host file behind the view. A job that opened torch's ``libc10.so`` (1.5 MiB, fully cached on the
   host) and advised it left none of it cached (host ``mincore``: 100 % resident before, 0 % after), so a host
   process read it from disk again; a loop over the bound trees (~9 GiB here) empties the host's cache of every
   library the trainer has not mapped. The filter now answers that advice "done" without running it (advice may be
   ignored: a program that gives it goes on); other advice only adds pages to the cache or shapes the job's own reads.
2. ``fsync`` / ``fdatasync`` of a file on a host ext4 file system sends the disk a cache flush, also for a clean file
   opened only for reading through a read-only bind: as the job uid, ~390 flushes a second in a loop, every other
   writer on the disk (the trainer's checkpoints) waiting behind them. Through the tree's overlayfs views a lower
   file's fsync is already a no-op, but a directory shown as a bind (where overlayfs cannot show it) reached the host
   file system. All the job may write is tmpfs, whose fsync does nothing, so the filter answers both "done" without
   running them."""

import ctypes
import json
import mmap
import os
import platform
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render import sandbox as sb  # noqa: E402
from render import worker as wk  # noqa: E402

from test_render_hostile12 import ALLOW, _job_json, _run_filter  # noqa: E402

DONE = sb.SECCOMP_RET_ERRNO | 0  # the call returns 0 without running
# syscall numbers of this machine for the calls checked below
_NRS = {"x86_64": dict(fadvise64=221, fsync=74, fdatasync=75, msync=26, sync_file_range=277, readahead=187),
        "aarch64": dict(fadvise64=223, fsync=82, fdatasync=83, msync=227, sync_file_range=84, readahead=213)}


def _filter_and_numbers():
    nr = _NRS.get(platform.machine())
    if nr is None or sb.AUDIT_ARCH is None:
        pytest.skip("no seccomp filter for this architecture")
    return sb.build_seccomp_program(), nr


def _host_residency(path: str) -> float:
    """The share of ``path``'s pages in the host's page cache, as ``mincore`` reports them to root (a private mapping
    that is never touched: it reads the cache, faults nothing in)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    size = os.path.getsize(path)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), size, flags=mmap.MAP_PRIVATE,
                                          prot=mmap.PROT_READ | mmap.PROT_WRITE) as m:
        vec = ctypes.create_string_buffer(-(-size // 4096))
        view = ctypes.c_char.from_buffer(m)
        try:
            assert libc.mincore(ctypes.addressof(view), size, vec) == 0, os.strerror(ctypes.get_errno())
        finally:
            del view
    return sum(b & 1 for b in vec.raw) / len(vec.raw)


# -- 1. no eviction of the host's page cache of the bound files -------------------------------------------------------
def test_the_filter_ignores_page_cache_drop_advice():
    prog, nr = _filter_and_numbers()
    fadvise = lambda advice: _run_filter(prog, nr["fadvise64"], (3, 0, 0, advice, 0, 0))  # noqa: E731
    assert fadvise(4) == DONE  # POSIX_FADV_DONTNEED
    assert fadvise((1 << 32) + 4) == DONE  # the advice is an int: its high bits are not part of it
    # NORMAL, RANDOM, SEQUENTIAL, WILLNEED, NOREUSE: the job's own reads, or pages added to the cache
    assert [fadvise(a) for a in (0, 1, 2, 3, 5)] == [ALLOW] * 5
    assert _run_filter(prog, nr["readahead"], (3, 0, 1 << 20, 0, 0, 0)) == ALLOW
    assert sb.POSIX_FADV_DONTNEED == 4


FADVISE_JOB = r"""
import json, os
fd = os.open(PATH, os.O_RDONLY)
res = {"willneed": os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED), "read": len(os.read(fd, 10)),
       "dontneed": os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)}
raise RuntimeError(json.dumps(res))
"""


def test_a_job_cannot_drop_the_host_page_cache_of_a_bound_file(render_pool):
    # a stdlib file of the interpreter the workers run (bound into the tree at its host path), that no process maps
    path = os.path.join(os.path.dirname(os.__file__), "pydoc_data", "topics.py")
    if not os.path.isfile(path):
        pytest.skip("no pydoc_data/topics.py in this interpreter's stdlib")
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
    assert _host_residency(path) > 0.99
    res = _job_json(render_pool.render(RenderJob(FADVISE_JOB.replace("PATH", repr(path))), timeout_s=20))
    assert res == {"dontneed": None, "willneed": None, "read": 10}
    # before: 0.0 (every page dropped; the host's next read of it went to the disk)
    assert _host_residency(path) > 0.99


# -- 2. no disk cache flushes: fsync of anything the job may open has nothing to write --------------------------------
def test_the_filter_answers_fsync_without_running_it():
    prog, nr = _filter_and_numbers()
    assert [_run_filter(prog, nr[c], (3, 0, 0, 0, 0, 0)) for c in ("fsync", "fdatasync")] == [DONE] * 2
    # msync(MS_SYNC = 4) of a shared mapping of a file is an fsync of that file
    assert _run_filter(prog, nr["msync"], (0x7F0000000000, 4096, 4, 0, 0, 0)) == DONE
    assert _run_filter(prog, nr["sync_file_range"], (3, 0, 0, 7, 0, 0)) == ALLOW  # starts writeback, no flush


FSYNC_JOB = r"""
import json, os, sqlite3
res = {}
for path in ("/dev/null", os.__file__, "/job"):
    fd = os.open(path, os.O_RDONLY)
    res[path] = [os.fsync(fd), os.fdatasync(fd)]
    if path == os.__file__:  # msync(MS_SYNC) of a shared mapping of a bound file: that file's fsync
        import mmap
        m = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        m.flush()
        m.close()
db = sqlite3.connect("/job/a.db")  # sqlite syncs its journal: still works
db.execute("create table t (x)")
db.execute("insert into t values (7)")
db.commit()
res["sqlite"] = sqlite3.connect("/job/a.db").execute("select x from t").fetchall()
raise RuntimeError(json.dumps(res))
"""


def test_a_job_fsync_is_answered_by_the_filter(render_pool):
    # the kernel refuses an fsync of /dev/null (EINVAL): answered without it, it returns. Before: OSError EINVAL;
    # an fsync of a file behind a bind of a host ext4 directory flushed the host's disk
    res = _job_json(render_pool.render(RenderJob(FSYNC_JOB), timeout_s=20))
    assert res == {"/dev/null": [None, None], os.__file__.replace(os.sep, "/"): [None, None], "/job": [None, None],
                   "sqlite": [[7]]}


# -- 3. no EXIF block that costs the trainer more than the job spent writing it ---------------------------------------
EXIF_JOB = r"""
import io, struct, zlib
from PIL import Image
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
def exif(n):  # big-endian TIFF: IFD0 of an orientation (6: turned 90 degrees) and one tag of n SRATIONAL values
    return (b"MM\0*" + struct.pack(">IH", 8, 2) + struct.pack(">HHIHH", 0x0112, 3, 1, 6, 0)
            + struct.pack(">HHII", 0xC000, 10, n, 38) + b"\0\0\0\0" + b"\0\0\0\1\0\0\0\3" * n)
buf = io.BytesIO()
Image.new("RGB", (40, 20), "white").save(buf, "PNG")
png = buf.getvalue()
idat, iend = png.index(b"IDAT") - 4, png.index(b"IEND") - 4
block = exif(N)
if WHERE == "before":
    png = png[:idat] + chunk(b"eXIf", block) + png[idat:]
elif WHERE == "after":
    png = png[:iend] + chunk(b"eXIf", block) + png[iend:]
else:  # ImageMagick's text form, which PIL's getexif reads too: a zTXt of hex lines
    hexed = block.hex().encode()
    text = b"\nexif\n%8d\n" % len(block) + b"\n".join(hexed[i:i + 72] for i in range(0, len(hexed), 72))
    png = png[:idat] + chunk(b"zTXt", b"Raw profile type exif\0\0" + zlib.compress(text)) + png[idat:]
open("/job/out.png", "wb").write(png)
"""


def _exif_job(n: int, where: str) -> RenderJob:
    return RenderJob(EXIF_JOB.replace("N)", f"{n})").replace("WHERE ==", f"{where!r} =="))


@pytest.mark.parametrize("where", ["before", "after", "text"])
def test_a_png_with_an_oversized_exif_block_is_refused(render_pool, where):
    # before: ok, and the trainer's load_image of the 7 MiB block (an orientation and 917,000 SRATIONALs) took 3 s of
    # CPU and ~175 MiB in the trainer's own process, for a PNG written in 0.2 s
    r = render_pool.render(_exif_job(50_000 if where == "text" else 917_000, where), timeout_s=20)
    assert r.error_kind == "too_large" and "PNG refused: an EXIF block of " in r.message, r
    assert f"(at most {wk.MAX_EXIF_BYTES})" in r.message


def test_a_png_with_exif_within_the_bound_is_returned_and_turned(render_pool):
    from mmevo.evolve.mmzero import load_image

    for where in ("before", "text"):
        r = render_pool.render(_exif_job(8000, where), timeout_s=20)  # 64,038 bytes of EXIF
        assert r.ok, r
        assert load_image(r.png, 0, 0).size == (20, 40)  # the orientation still applies


def test_exif_block_bytes_counts_what_getexif_parses():
    assert wk._exif_block_bytes({}) == 0
    assert wk._exif_block_bytes({"exif": b"Exif\0\0" + b"x" * 10}) == 16
    raw = "\nexif\n      4\nde ad\nbe\tef\n"
    assert wk._exif_block_bytes({"Raw profile type exif": raw}) == 4
    assert wk._exif_block_bytes({"exif": b"ab", "Raw profile type exif": raw}) == 2  # the eXIf chunk wins, as in PIL
