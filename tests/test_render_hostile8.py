"""render/: a ninth red-team pass. PNGs that libpng refuses were returned ``ok``: an IHDR compression / filter
method other than 0 or an interlace method past 1 (PIL ignores the first two and reads any interlace as Adam7), and
an IDAT zlib stream cut before its checksum (PIL stops once the last row is filled); a 24- or 25-byte ``out.png``
was a ``crash`` (IndexError in the chunk walk) instead of ``invalid_image``.

libpng (OpenCV's ``imdecode``, installed with albumentations) is the second decoder: what ``validate_png`` accepts it
must decode, and the IDAT size rule must accept every colour type, bit depth and Adam7 pass layout it reads."""

import struct
import sys
import time
import zlib

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render.types import RenderLimits  # noqa: E402
from render.worker import _png_raw_size, validate_png  # noqa: E402

SIG = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))


def _chunk(ctype: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + ctype + data + struct.pack(">I", zlib.crc32(ctype + data) & 0xFFFFFFFF)


def _scanlines(w: int, h: int, depth: int, colour: int, interlace: int) -> bytes:
    """Filter byte 0 and a byte pattern per row, for each pass (Adam7) or the whole image; palette indices stay
    0 (one PLTE entry), so every sample is valid. Computed pass by pass here, independently of ``_png_raw_size``."""
    row_bytes = lambda cols: (cols * CHANNELS[colour] * depth + 7) // 8  # noqa: E731
    passes = [(w, h)] if not interlace else [
        (len(range(x0, w, dx)), len(range(y0, h, dy))) for x0, y0, dx, dy in ADAM7]
    out = bytearray()
    for cols, rows in passes:
        if not cols or not rows:
            continue
        for r in range(rows):
            fill = 0 if colour == 3 else (r * 37) & 0xFF
            out += b"\x00" + bytes([fill]) * row_bytes(cols)
    return bytes(out)


def _png(w=32, h=32, depth=8, colour=2, compression=0, filtering=0, interlace=0, idat=None, split=1) -> bytes:
    ihdr = struct.pack(">IIBBBBB", w, h, depth, colour, compression, filtering, interlace)
    if idat is None:
        idat = zlib.compress(_scanlines(w, h, depth, colour, interlace))
    step = -(-len(idat) // split)
    body = b"".join(_chunk(b"IDAT", idat[i:i + step]) for i in range(0, len(idat), step))
    plte = _chunk(b"PLTE", b"\x10\x20\x30") if colour == 3 else b""
    return SIG + _chunk(b"IHDR", ihdr) + plte + body + _chunk(b"IEND", b"")


def _libpng_decodes(data: bytes) -> bool:
    cv2 = pytest.importorskip("cv2")
    np = pytest.importorskip("numpy")
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED) is not None


def _verdict(data: bytes) -> tuple[str | None, str]:
    return validate_png(data, RenderLimits())[2:]


# -- 1. the layouts that exist are accepted, and libpng reads them -------------------------------------------------
@pytest.mark.parametrize("colour,depth", [(c, d) for c, ds in {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8),
                                                               4: (8, 16), 6: (8, 16)}.items() for d in ds])
@pytest.mark.parametrize("interlace", [0, 1])
def test_every_colour_type_depth_and_interlace_is_accepted_and_libpng_agrees(colour, depth, interlace):
    for w, h in ((33, 17), (4, 5), (9, 4)):  # odd sizes: partial bytes per row, Adam7 passes with no columns / rows
        data = _png(w, h, depth, colour, interlace=interlace, split=3)
        assert _verdict(data) == (None, ""), (w, h, _verdict(data))
        assert _libpng_decodes(data), (w, h)


def test_raw_size_matches_hand_counts():
    assert _png_raw_size(32, 32, 8, 2, False) == 32 * (1 + 96)
    assert _png_raw_size(33, 17, 1, 0, False) == 17 * (1 + 5)  # 33 bits -> 5 bytes a row
    # 4x5 Adam7: pass columns 1,0,1,1,2,2,4 and rows 1,1,1,2,1,3,2; pass 2 has no column, so no rows at all
    assert _png_raw_size(4, 5, 8, 6, True) == sum(r * (1 + c * 4) for c, r in
                                                   ((1, 1), (1, 1), (1, 2), (2, 1), (2, 3), (4, 2)))
    assert _png_raw_size(4, 5, 8, 6, True) == len(_scanlines(4, 5, 8, 6, 1))


# -- 2. what libpng refuses is refused -----------------------------------------------------------------------------
RAW = _scanlines(32, 32, 8, 2, 0)
REFUSED = {
    "compression method 1": (_png(compression=1), "compression method 1"),
    "filter method 1": (_png(filtering=1), "filter method 1"),
    "interlace method 2": (_png(interlace=2, idat=zlib.compress(_scanlines(32, 32, 8, 2, 1))), "interlace method 2"),
    "no checksum": (_png(idat=zlib.compress(RAW)[:-4]), "cut short"),
    "bad checksum": (_png(idat=zlib.compress(RAW)[:-1] + bytes([zlib.compress(RAW)[-1] ^ 1])), "corrupt"),
    "a row short": (_png(idat=zlib.compress(RAW[:-97])), "inflates to 3007 of the image's 3104 bytes"),
    "a row too many": (_png(idat=zlib.compress(RAW + RAW[:97])), "more than the image's 3104 bytes"),
    "bytes after the stream": (_png(idat=zlib.compress(RAW) + b"\x00\x01"), "after the end of the IDAT zlib stream"),
    "an IDAT after the stream": (_png(idat=zlib.compress(RAW) + zlib.compress(b""), split=1)[:-12]
                                 + _chunk(b"IDAT", b"\x78\x9c") + _chunk(b"IEND", b""), "after the end"),
    "not zlib": (_png(idat=b"\x00" * 64), "corrupt"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_png_libpng_refuses_is_refused(name):
    data, reason = REFUSED[name]
    kind, msg = _verdict(data)
    assert kind == "invalid_image" and reason in msg, msg


def test_refused_cases_really_are_refused_by_libpng():
    # the rule is libpng's: each IHDR / stream case above fails there (a row too many / trailing bytes are only
    # warnings in libpng; they are refused as bytes nothing checks)
    for name in ("compression method 1", "filter method 1", "interlace method 2", "no checksum", "bad checksum",
                 "a row short", "not zlib"):
        assert not _libpng_decodes(REFUSED[name][0]), name


def test_a_zlib_bomb_in_idat_costs_no_more_than_the_image():
    bomb = zlib.compress(bytes(1 << 30), 9)  # 1 GiB of zeros in ~1 MiB
    t0 = time.perf_counter()
    kind, msg = _verdict(_png(idat=bomb))
    assert kind == "invalid_image" and "more than the image's 3104 bytes" in msg
    assert time.perf_counter() - t0 < 2.0  # it stops after the image's size, not after a GiB


@pytest.mark.parametrize("n", range(8, 33))
def test_a_file_shorter_than_a_whole_ihdr_is_not_a_png(n):
    full = _png()
    assert _verdict(full[:n]) == ("invalid_image", "not a PNG file")


# -- 3. end to end: the job's own out.png -------------------------------------------------------------------------
JOB = """import struct, zlib
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
raw = b"".join(b"\\0" + bytes([255, 0, 0]) * 32 for _ in range(32))
ihdr = struct.pack(">IIBBBBB", 32, 32, 8, 2, {comp}, 0, 0)
data = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw){cut}) + chunk(b"IEND", b"")
open("out.png", "wb").write(data{short})
"""


@pytest.mark.parametrize("comp,cut,short,reason", [
    (0, "", "", None),
    (1, "", "", "compression method 1"),
    (0, "[:-4]", "", "cut short"),
    (0, "", "[:24]", "not a PNG file"),
    (0, "", "[:25]", "not a PNG file"),
])
def test_job_written_png_through_the_sandbox(render_pool, comp, cut, short, reason):
    res = render_pool.render(RenderJob(JOB.format(comp=comp, cut=cut, short=short), "python"), timeout_s=10)
    if reason is None:
        assert res.ok and (res.width, res.height) == (32, 32), res
        assert _libpng_decodes(res.png)
    else:
        assert not res.ok and res.error_kind == "invalid_image" and reason in res.message, res
