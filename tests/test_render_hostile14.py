"""render/: a fourteenth pass, on where a job's output PNG is parsed.

The root supervisor validated each ``out.png`` itself: a pure-Python chunk walk, then an inflate of the IDAT stream (up
to 64 MiB, ~0.15 s of root CPU for a 75 KB compression bomb) and of compressed metadata, PIL's chunk handlers on a
one-pixel copy and PIL's CRC checks. So attacker-written bytes were parsed by zlib and PIL in a root process, outside
every sandbox layer. Now the supervisor keeps only the cheap checks that never inflate nor import PIL
(``png_precheck``: header, side / aspect / decode-budget arithmetic, the chunk walk), and the rest runs in a validator
child forked from the zygote after the job has ended, on a fresh job dir, with a job's layers and limits, given a copy
of the bytes; its verdict counts only from a clean ``ok`` frame within its timeout, anything else is
``invalid_image``."""

import os
import struct
import sys
import time
import zlib

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render import worker as W  # noqa: E402
from render.types import RenderLimits  # noqa: E402

from conftest import start_render_pool  # noqa: E402

SIG = b"\x89PNG\r\n\x1a\n"


def _chunk(ctype: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + ctype + data + struct.pack(">I", zlib.crc32(ctype + data) & 0xFFFFFFFF)


def _png(w, h, raw: bytes, before_idat=b"", after_idat=b"", colour=2) -> bytes:
    ihdr = struct.pack(">IIBBBBB", w, h, 8, colour, 0, 0, 0)
    return SIG + _chunk(b"IHDR", ihdr) + before_idat + _chunk(b"IDAT", zlib.compress(raw)) + after_idat \
        + _chunk(b"IEND", b"")


def _rgb(w, h, filter_type=0) -> bytes:
    return b"".join(bytes([filter_type]) + bytes([(x * 7 + y) % 256 for x in range(3 * w)]) for y in range(h))


def _paeth_bomb(side=4096) -> bytes:
    """8-bit RGBA of zeros, every row Paeth-filtered: 64 MiB of scanlines in ~75 KB."""
    stride = 1 + side * 4
    z = zlib.compressobj(9)
    row = b"\x04" + bytes(stride - 1)
    idat = b"".join([z.compress(row * 64) for _ in range(side // 64)] + [z.flush()])
    ihdr = struct.pack(">IIBBBBB", side, side, 8, 6, 0, 0, 0)
    return SIG + _chunk(b"IHDR", ihdr) + b"".join(_chunk(b"IDAT", idat[i:i + 65536])
                                                  for i in range(0, len(idat), 65536)) + _chunk(b"IEND", b"")


GOOD = _png(32, 32, _rgb(32, 32))
ICCP_BOMB = _png(32, 32, _rgb(32, 32), before_idat=b"".join(
    _chunk(b"iCCP", b"p%d\0\0" % i + zlib.compress(bytes(1 << 20), 9)) for i in range(9)))
CORPUS = {  # name -> PNG; each verdict (kind and message) must be the same end to end as in process
    "good": GOOD,
    "bad_filter_byte": _png(32, 32, _rgb(32, 32, filter_type=7)),
    "corrupt_zlib": GOOD.replace(zlib.compress(_rgb(32, 32))[2:12], b"\xff" * 10),
    "short_stream": _png(32, 32, _rgb(32, 31)),
    "truncated_phys_after_idat": _png(32, 32, _rgb(32, 32), after_idat=_chunk(b"pHYs", b"\x01")),
    "iccp_bomb": ICCP_BOMB,
    "bad_crc": GOOD[:-5] + b"\x00" + GOOD[-4:],  # IEND's CRC
    "second_ihdr": _png(32, 32, _rgb(32, 32), before_idat=_chunk(b"IHDR", GOOD[16:29])),
}


def _writer(png: bytes) -> str:
    return f"open('out.png', 'wb').write(bytes.fromhex('{png.hex()}'))\n"


def _cpu_s(pid: int) -> float:
    """Time on CPU of every thread of ``pid`` (schedstat: nanoseconds, finer than the 10 ms clock ticks of stat)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            total += int(f.read().split()[0])
    return total / 1e9


# -- 1. the root supervisor's part never inflates and never touches PIL ------------------------------------------------
@pytest.fixture
def no_inflate_no_pil(monkeypatch):
    """zlib's decompressors and PIL made unusable in this process: any use raises."""
    def refuse(*a, **k):
        raise AssertionError("zlib decompression in the supervisor")

    for name in ("decompress", "decompressobj"):
        monkeypatch.setattr(zlib, name, refuse)
    for name in [m for m in sys.modules if m == "PIL" or m.startswith("PIL.")] + ["PIL", "PIL.Image"]:
        monkeypatch.setitem(sys.modules, name, None)  # ``import PIL...`` raises ImportError


def test_the_supervisors_output_check_runs_without_zlib_decompression_or_pil(no_inflate_no_pil, tmp_path):
    # Supervisor._classify is what the root process runs on a finished job's output: with the decompressors and PIL
    # unusable it still passes a bomb on to validation, and refuses what the cheap checks refuse
    sup = W.Supervisor.__new__(W.Supervisor)
    sup.jobdir = str(tmp_path)
    done = {"status": 0, "cpu_s": 0.1, "cpu_hard": 31}

    def classify(png: bytes, limits=RenderLimits()) -> dict:
        (tmp_path / W.OUT_NAME).write_bytes(png)
        return sup._classify(done, False, b"", False, limits, 30.0, time.monotonic(), {})

    r = classify(_paeth_bomb())
    assert r["ok"] and (r["width"], r["height"]) == (4096, 4096) and r["png"] == _paeth_bomb(), r["message"]
    r = classify(ICCP_BOMB)  # only the validator inflates metadata
    assert r["ok"], r["message"]
    r = classify(CORPUS["second_ihdr"])
    assert r["error_kind"] == "invalid_image" and r["message"] == "PNG refused: a second IHDR chunk", r
    r = classify(_paeth_bomb(64), RenderLimits(max_side=32))
    assert r["error_kind"] == "too_large" and r["message"] == "image 64x64 exceeds 32 px", r
    assert W.png_precheck(GOOD, RenderLimits()) == (32, 32, None, "")


def test_the_root_supervisor_never_loads_pil(render_pool):
    for code in ("import matplotlib.pyplot as plt\nplt.plot([1, 2])\n", _writer(GOOD)):
        assert render_pool.render(RenderJob(code), timeout_s=30).ok
    for pid in render_pool.worker_pids():  # the supervisors (their zygotes, which import PIL, are children)
        with open(f"/proc/{pid}/maps") as f:
            maps = f.read()
        assert "/PIL/" not in maps and "_imaging" not in maps, [x for x in maps.splitlines() if "PIL" in x][:3]


def test_a_compression_bomb_costs_the_root_supervisor_no_inflate(render_pool):
    bomb = _paeth_bomb()
    z, view, t = zlib.decompressobj(), b"".join(bomb[p + 8:p + 8 + struct.unpack_from(">I", bomb, p)[0]]
                                                for p in _idat_offsets(bomb)), time.process_time()
    while view:  # one inflate of it here, 1 MiB at a time: what the supervisor spent before, and more
        z.decompress(view, 1 << 20)
        view = z.unconsumed_tail
    inflate = time.process_time() - t
    code = _writer(bomb)
    best = None
    for _ in range(2):
        pids = render_pool.worker_pids()
        before = {p: _cpu_s(p) for p in pids}
        r = render_pool.render(RenderJob(code), timeout_s=60)
        spent = sum(_cpu_s(p) - before[p] for p in pids)
        best = spent if best is None else min(best, spent)
        assert r.ok and (r.width, r.height) == (4096, 4096) and r.png == bomb, r
    # the old supervisor spent ~1.5 inflates on it (0.16 s); now its share is the chunk walk and the child's plumbing
    assert best < max(0.25 * inflate, 0.02), (best, inflate)
    r = render_pool.render(RenderJob(_writer(ICCP_BOMB)), timeout_s=60)
    assert r.error_kind == "invalid_image" and "compressed metadata inflating to more than" in r.message, r


def _idat_offsets(png: bytes) -> list[int]:
    pos, out = len(SIG), []
    while pos < len(png):
        length, ctype = struct.unpack_from(">I4s", png, pos)
        if ctype == b"IDAT":
            out.append(pos)
        pos += 12 + length
    return out


# -- 2. the verdicts are those of the whole check, end to end --------------------------------------------------------
def test_every_verdict_through_the_validator_is_the_in_process_one(render_pool):
    want = {name: W.validate_png(png, RenderLimits()) for name, png in CORPUS.items()}
    assert want["good"] == (32, 32, None, "")
    assert sum(v[2] == "invalid_image" for v in want.values()) == len(CORPUS) - 1, want
    results = render_pool.render_many([RenderJob(_writer(png)) for png in CORPUS.values()], timeout_s=30)
    for (name, png), r in zip(CORPUS.items(), results):
        w, h, kind, msg = want[name]
        msg = msg or "job: out.png written by the code"  # an ok result carries the job's own report
        assert (r.error_kind, r.message) == (kind, msg) and (r.width, r.height) == (w, h), (name, r)
        assert r.ok == (kind is None) and (r.png == png if r.ok else r.png is None), name
    assert "IDAT row 0 has filter type 7" in want["bad_filter_byte"][3]
    assert "Truncated pHYs chunk" in want["truncated_phys_after_idat"][3]


# -- 3. a failing validator never passes an output --------------------------------------------------------------------
@pytest.mark.parametrize("fault,message", [
    ("validator_crash", "PNG validator killed by SIGSEGV"),
    ("validator_hang", f"PNG validator timed out after {W.VALIDATOR_TIMEOUT_S} s"),
    ("validator_flood", f"PNG validator verdict larger than {W.FRAME_MAX} bytes"),
    ("validator_exit1", "PNG validator exited with status 256"),
])
def test_a_validator_that_fails_makes_the_output_invalid(fault, message):
    p = start_render_pool(workers=1, _skip_layers=(fault,))
    try:
        assert all(p.isolation[k] for k in W.LAYERS + W.WORKER_LAYERS), p.isolation  # a test fault is no layer
        t = time.monotonic()
        r = p.render(RenderJob(_writer(GOOD)), timeout_s=20)
        assert not r.ok and r.png is None and r.error_kind == "invalid_image" and r.message == message, r
        assert (r.width, r.height) == (32, 32) and time.monotonic() - t < W.VALIDATOR_TIMEOUT_S + 10
        assert r.isolation["seccomp"] and r.isolation["landlock"]  # the job's own layers, as for any result
        r = p.render(RenderJob("import matplotlib.pyplot as plt\nplt.plot([1, 2])\n"), timeout_s=20)
        assert r.error_kind == "invalid_image" and r.message == message, r  # the same worker serves on
    finally:
        p.close()


def _exited(code=0) -> dict:
    return {"status": code << 8, "cpu_s": 0.01, "cpu_hard": 6}


@pytest.mark.parametrize("exit_info,timed_out,frame,overflow,want", [
    (_exited(), False, b"ok\n", False, (None, "")),
    (_exited(), False, b"invalid_image\nPNG refused: x", False, ("invalid_image", "PNG refused: x")),
    (_exited(), False, b"too_large\nimage 9x9 exceeds 4 px", False, ("too_large", "image 9x9 exceeds 4 px")),
    (_exited(), True, b"ok\n", False, ("invalid_image", f"PNG validator timed out after {W.VALIDATOR_TIMEOUT_S} s")),
    ({"status": 11, "cpu_s": 0.0}, False, b"ok\n", False, ("invalid_image", "PNG validator killed by SIGSEGV")),
    ({"status": 9, "cpu_s": 0.0}, False, b"", False, ("invalid_image", "PNG validator killed by SIGKILL")),
    (_exited(1), False, b"ok\n", False, ("invalid_image", "PNG validator exited with status 256")),
    ({}, False, b"ok\n", False, ("invalid_image", "PNG validator: no exit status")),
    ({"status": "0"}, False, b"ok\n", False, ("invalid_image", "PNG validator: no exit status")),
    (_exited(), False, b"", True, ("invalid_image", f"PNG validator verdict larger than {W.FRAME_MAX} bytes")),
    (_exited(), False, b"", False, ("invalid_image", "malformed PNG validator verdict (0 bytes)")),
    (_exited(), False, b"ok", False, ("invalid_image", "malformed PNG validator verdict (2 bytes)")),
    (_exited(), False, b"ok\nbut", False, ("invalid_image", "malformed PNG validator verdict (6 bytes)")),
    (_exited(), False, b"OK\n", False, ("invalid_image", "malformed PNG validator verdict (3 bytes)")),
    (_exited(), False, b"crash\nboom", False, ("invalid_image", "malformed PNG validator verdict (10 bytes)")),
    (_exited(), False, b"invalid_image\n", False, ("invalid_image", "malformed PNG validator verdict (14 bytes)")),
    (_exited(), False, b"ok\n\xff", False, ("invalid_image", "malformed PNG validator verdict (4 bytes)")),
])
def test_only_a_clean_ok_verdict_passes(exit_info, timed_out, frame, overflow, want):
    assert W._validator_verdict(exit_info, timed_out, frame, overflow) == want


def test_a_verdicts_message_is_bounded_and_printable():
    kind, msg = W._validator_verdict(_exited(), False, b"invalid_image\n\x1b[2J" + b"y" * 9000, False)
    assert kind == "invalid_image" and msg.startswith("\\x1b[2J") and len(msg) == W.VERDICT_MESSAGE_MAX
