"""render/: a twenty-second pass, on the gaps the README admits and on the MM-Zero path end to end (coder output ->
``extract_code`` -> the pool -> ``load_image`` in the trainer's own process), each probed for what it does on the host.

Routes to the output file that go around the worker's own checks, all refused by the supervisor's, which reads
``out.png`` only once the job's whole thread group has exited (no fork is allowed, so nothing of the job is left):

1. The worker's save of the current figure (whose size the worker checked), patched in the job's interpreter to rename
   another file over ``out.png`` once it has written: a 9 MiB file is ``too_large`` by its size, a 40-byte PNG
   header of a 4096 px square 16-bit RGBA image (twice the decode budget) ``too_large`` by its scanline bytes: the file
   the supervisor reads is the one it checks. (A job thread renaming while the save writes gets the same answers.)
2. A hard link inside the job dir (tmpfs: the same file system, so ``link`` works there, unlike a link to a bound host
   file): ``out.png`` with a second name is ``invalid_image``, never returned.
3. ``preadv2(RWF_NOWAIT)``, which answers ``EAGAIN`` instead of reading a page that is not cached (and so tells a
   reader the page-cache residency that ``cachestat`` is refused for): through the tree's overlayfs views the kernel
   refuses the flag (``EOPNOTSUPP``, as on the job's tmpfs; a host ext4 file read directly takes it). render/README.md
   now states what stays: a timed read (or ``RWF_NOWAIT`` where a directory is bound) tells once per page whether it
   was cached, as for any reader, and that read starts reading the page in (a miss under ``RWF_NOWAIT`` too): no
   watching of host activity, which ``cachestat`` allowed.

MM-Zero end to end (``Judge`` with the real pool and a scripted solver): hostile coder outputs get the label each one
should, an image past the decode budget never reaches the trainer, and the costliest PNG the budget lets through
(a 4096 px square 8-bit RGBA render, the same cost as matplotlib's own at that size) costs the trainer's
``load_image`` ~0.6 s of CPU (measured on a 2-core VM; a figure for render/README.md, not asserted here); palette + tRNS, 1-bit + tRNS,
16-bit LA / RGB(A) and Adam7 variants were measured at or below it (0.35-0.6 s), and a fuzz of ~200,000 small PNGs
with random ancillary chunks (tRNS, iCCP, iTXt / zTXt, eXIf, text EXIF, sBIT, bKGD, ...) found none that passed
``validate_png`` and then raised in ``load_image``, caught or not.
"""

import os
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render import worker as wk  # noqa: E402

from test_render_hostile12 import _job_json  # noqa: E402

TIMEOUT_S = 20  # per render: CI machines are slower than the ~0.1-1 s these take here

# the worker's save of the current figure (whose size it checked), patched in the job's interpreter to rename another
# file over out.png once it has written: deterministic, where a thread racing the save could lose to the job's exit
RENAME_OVER_SAVE = r"""
import os
import matplotlib.figure
import matplotlib.pyplot as plt
plt.plot(range(2000), [i % 7 for i in range(2000)])
with open("/job/swap.tmp", "wb") as f:
    f.write(REPLACEMENT)
_save = matplotlib.figure.Figure.savefig
def savefig(self, *args, **kwargs):
    _save(self, *args, **kwargs)
    os.rename("/job/swap.tmp", "/job/out.png")
matplotlib.figure.Figure.savefig = savefig
"""

# IHDR of a 4096 px square 16-bit RGBA image: 128 MiB of scanlines, twice the budget of an 8-bit RGBA render
BOMB_HEADER = r"""(lambda struct, zlib: b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR"
    + struct.pack(">IIBBBBB", 4096, 4096, 16, 6, 0, 0, 0)
    + struct.pack(">I", zlib.crc32(b"IHDR" + struct.pack(">IIBBBBB", 4096, 4096, 16, 6, 0, 0, 0))))(
    __import__("struct"), __import__("zlib"))"""


def _rename_over_save(replacement: str) -> RenderJob:
    return RenderJob(RENAME_OVER_SAVE.replace("REPLACEMENT", replacement))


def test_a_file_renamed_over_the_workers_save_is_checked_by_its_size(render_pool):
    r = render_pool.render(_rename_over_save('b"\\x89PNG\\r\\n\\x1a\\n" + bytes(9 << 20)'), timeout_s=TIMEOUT_S)
    assert r.error_kind == "too_large" and not r.ok and r.png is None, r
    assert r.message == f"PNG of {(9 << 20) + 8} bytes exceeds {8 << 20}", r


def test_a_decode_bomb_renamed_over_the_workers_save_is_refused_before_inflating(render_pool):
    r = render_pool.render(_rename_over_save(BOMB_HEADER), timeout_s=TIMEOUT_S)
    assert r.error_kind == "too_large" and r.png is None, r
    budget = wk._png_decode_budget(render_pool.limits)
    assert r.message == (f"image 4096x4096 of 16-bit colour type 6 decodes to {4096 * (1 + 4096 * 8)} bytes, more "
                         f"than the {budget} of a 4096 px square 8-bit RGBA render"), r


HARD_LINK = r"""
import os
import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
plt.savefig("/job/a.png")
plt.close()
os.link("/job/a.png", "/job/out.png")
"""


def test_a_hard_link_inside_the_job_dir_is_not_returned(render_pool):
    r = render_pool.render(RenderJob(HARD_LINK), timeout_s=TIMEOUT_S)
    assert (r.ok, r.error_kind, r.message) == (False, "invalid_image", "out.png is not a plain file"), r
    # the same PNG under one name is a plain render
    r = render_pool.render(RenderJob(HARD_LINK.replace('os.link("/job/a.png", ', 'os.rename("/job/a.png", ')),
                           timeout_s=TIMEOUT_S)
    assert r.ok and r.width == 640 and r.height == 480, r


NOWAIT_READ = r"""
import json, os
res = {}
for name, path in (("bound", PATH), ("job", "/job/f")):
    if name == "job":
        open(path, "wb").write(b"x" * 8192)
    fd = os.open(path, os.O_RDONLY)
    try:
        res[name] = os.preadv(fd, [bytearray(4096)], 0, os.RWF_NOWAIT)
    except OSError as e:
        res[name] = e.errno
raise RuntimeError(json.dumps(res))
"""


def test_a_nowait_read_of_a_bound_file_tells_nothing_of_the_host_page_cache(render_pool):
    path = os.__file__  # the stdlib, bound into the tree at its host path through an overlayfs view
    with open(path, "rb") as f:  # cached on the host now: a reader that could ask would learn it
        f.read()
    res = _job_json(render_pool.render(RenderJob(NOWAIT_READ.replace("PATH", repr(path))), timeout_s=TIMEOUT_S))
    import errno

    # the kernel's answer, not the filter's (which has no rule for the flag): overlayfs and tmpfs files do not take
    # it on the kernels measured; a host ext4 file read directly does (a directory shown as a bind would: see the
    # README). A kernel whose overlayfs takes it answers once per page as a timed read does: not a sandbox defect,
    # but render/README.md's statement is then to be rechecked
    if res["bound"] != errno.EOPNOTSUPP:
        pytest.skip(f"this kernel takes RWF_NOWAIT through overlayfs ({res}): recheck render/README.md's page-cache "
                    f"statement")
    assert res == {"bound": errno.EOPNOTSUPP, "job": errno.EOPNOTSUPP}, res


# -- MM-Zero end to end: coder output -> extract_code -> pool -> load_image in this (the trainer's) process ---------
RGBA_RENDER = r"""
import struct, zlib
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
W = H = SIDE
z = zlib.compressobj(9)
row = b"\0" + bytes(range(256)) * (W * 4 // 256)
idat = b"".join(z.compress(row) for _ in range(H)) + z.flush()
open("/job/out.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 6, 0, 0, 0))
                                 + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
"""


class _Solver:
    """A frozen solver that answers every question "1" and records the image sizes it was shown."""

    def __init__(self):
        self.sizes = []

    def sample(self, examples, n, seed):
        self.sizes += [ex.images[0].size for ex in examples]
        return [["\\boxed{1}"] * n for _ in examples]


def test_hostile_coder_outputs_through_the_mmzero_judge(render_pool):
    from mmevo.evolve.mmzero import Judge, Proposal

    fence = "Here is the code:\n```python\n{}\n```\nDone."
    outputs = {
        "rgba_4096": fence.format(RGBA_RENDER.replace("SIDE", "4096")),
        "bomb_over_save": fence.format(RENAME_OVER_SAVE.replace("REPLACEMENT", BOMB_HEADER)),
        "host_file": fence.format("raise RuntimeError(open('/etc/passwd').read())"),
        "svg_entity": "```svg\n<!DOCTYPE svg [<!ENTITY x SYSTEM 'file:///etc/passwd'>]>"
                      "<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'><text>&x;</text></svg>\n```",
        "prose": "I cannot draw that.",
        "hard_link": fence.format(HARD_LINK),
    }
    proposal = Proposal("chart", "a chart", "How many bars?", "1", "Which is tallest?", "1")
    solver = _Solver()
    judge = Judge(render_pool, solver, 2, float(TIMEOUT_S), min_pixels=0, max_pixels=4194304)
    out = dict(zip(outputs, judge(list(outputs.values()), [proposal] * len(outputs), seed=0)))
    assert {k: (r.ok, r.error_kind) for k, r in out.items()} == {
        "rgba_4096": (True, None), "bomb_over_save": (False, "too_large"), "host_file": (False, "forbidden"),
        "svg_entity": (False, "forbidden"), "prose": (False, "no_code"), "hard_link": (False, "invalid_image")}
    assert "root:" not in out["host_file"].message
    # the one accepted image: scaled into max_pixels before the solver saw it (both questions), and judged
    assert solver.sizes == [(2048, 2048)] * 2
    assert out["rgba_4096"].easy == 1.0 and out["rgba_4096"].silver == "1"
