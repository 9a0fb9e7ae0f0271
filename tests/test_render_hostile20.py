"""render/: a twentieth pass, on what the trainer spends in its own process on a job's output once the sandbox has
accepted it (``load_image`` -> ``to_rgb`` -> ``fit_pixels``), measured per image against a plain render of the same
size (a 4096 px square 8-bit RGBA PNG: ~0.7 s of CPU and ~210 MiB, nearly all of it decoding).

1. An EXIF orientation made ``to_rgb`` call ``ImageOps.exif_transpose``, which after turning the pixels rewrites the
   copy's metadata: it parses the block again and decodes and re-encodes every entry, for a copy whose metadata
   ``to_rgb`` then drops. A 64x64 PNG with a 64 KiB block of 5400 SHORT entries and orientation 6 (within round 19's
   ``MAX_EXIF_BYTES``) cost the trainer 216 ms of CPU per image (18 ms without the orientation). ``to_rgb`` now makes
   the turn itself: 18 ms, one entry decoded.
2. A malformed EXIF block makes PIL's parser warn once per IFD entry, each text naming the tag: 5400 entries whose
   data is "larger than file" printed 10,800 lines (1 MB) on the trainer's stderr and cost 131 ms per 64x64 image,
   and every distinct text stays in the module's warning registry for the life of the process (a "too many entries"
   count differs per image). The validator now reads the orientation as ``to_rgb`` does and refuses a PNG whose EXIF
   block makes PIL warn (``invalid_image``).
3. A 16-bit grey PNG (4096 px square: 32 MiB of scanlines, half the decode budget) went through float64 arithmetic in
   ``_wide_grey_to_8bit``: 1.05 s of CPU and 415 MiB in the trainer (an 8-bit grey image of that size: 0.31 s, 83
   MiB). A table lookup gives the same bytes: 0.50 s (0.2 s of it decoding twice the scanline bytes) and 111 MiB.

Measured and within the bound (no change): palette + tRNS, interlaced, 1-bit, 16-bit RGB(A) (decoding twice the bytes
of an 8-bit image of the same size, never more than the decode budget's plain render), 4096x205, 4000 tEXt chunks (8
MiB), 8 MiB of zTXt / iCCP (PIL's per-chunk cap is 1 MiB), a 1 MB XMP packet (PIL finds its orientation by a regular
expression with a literal prefix, linear; no XML parser): each within ~30 ms of CPU and ~10 MiB beyond its pixels."""

import io
import struct
import sys
import time
import tracemalloc
import warnings
import zlib

import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render import worker as wk  # noqa: E402
from render.types import RenderLimits  # noqa: E402

from mmevo.data import images  # noqa: E402
from mmevo.evolve.mmzero import load_image  # noqa: E402

ORIENTATION = 0x0112


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _grey_png(exif: bytes, w: int = 40, h: int = 20) -> bytes:
    """A white 8-bit grey PNG of ``w`` x ``h`` whose eXIf chunk holds ``exif`` (before IDAT)."""
    rows = (b"\0" + b"\xff" * w) * h
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + _chunk(b"eXIf", exif) + _chunk(b"IDAT", zlib.compress(rows)) + _chunk(b"IEND", b""))


# the same blocks as a job writes them (it has PIL and struct; the trainer imports neither of its results)
EXIF_SRC = r'''
import struct
def many_entries(n=5400, rot=6):
    """IFD0 of an orientation and n - 1 other SHORT entries held in place (4 bytes): a valid 64 KiB block."""
    tags = [0x0112] + [t for t in range(1000, 1000 + n) if t != 0x0112][:n - 1]
    ifd = b"".join(struct.pack(">HHIHH", t, 3, 1, rot if t == 0x0112 else 7, 0) for t in tags)
    return b"MM\0*" + struct.pack(">IH", 8, n) + ifd + b"\0\0\0\0"
def larger_than_file(n=5400):
    """IFD0 of n entries whose data (2 GiB, then 5 bytes each) is more than the block holds: PIL warns for each."""
    ifd = b"".join(struct.pack(">HHII", i + 1, 1, 0x7FFFFFFF if i == 0 else 5, 8) for i in range(n))
    return b"MM\0*" + struct.pack(">IH", 8, n) + ifd + b"\0\0\0\0"
def orientation_of(count):
    """IFD0 of one orientation of ``count`` SHORT values (the spec has one): PIL warns "too many entries: count"."""
    return b"MM\0*" + struct.pack(">IH", 8, 1) + struct.pack(">HHII", 0x0112, 3, count, 26) + b"\0\0\0\0" + (
        b"\0\6" * count)
'''
exec(EXIF_SRC)  # noqa: S102 - many_entries, larger_than_file, orientation_of

JOB = EXIF_SRC + r'''
import zlib
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
rows = (b"\0" + b"\xff" * 40) * 20
open("/job/out.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 40, 20, 8, 0, 0, 0, 0))
                                 + chunk(b"eXIf", BLOCK) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
'''


@pytest.fixture(scope="module")
def pool(render_pool):
    return render_pool


def _entries_decoded(monkeypatch) -> list:
    """Counts the EXIF entries PIL decodes (``ImageFileDirectory_v2.__getitem__``) from now on."""
    from PIL import TiffImagePlugin

    calls = []
    real = TiffImagePlugin.ImageFileDirectory_v2.__getitem__

    def counted(self, tag):
        calls.append(tag)
        return real(self, tag)

    monkeypatch.setattr(TiffImagePlugin.ImageFileDirectory_v2, "__getitem__", counted)
    return calls


# -- 1. an orientation costs the trainer the turn, not a rewrite of metadata it drops --------------------------------
def test_a_job_png_with_many_exif_entries_and_an_orientation_is_returned(pool):
    r = pool.render(RenderJob(JOB.replace("BLOCK", "many_entries()")), timeout_s=20)
    assert r.ok and (r.width, r.height) == (40, 20), r


def test_to_rgb_turns_without_decoding_every_exif_entry(monkeypatch):
    png = _grey_png(many_entries())
    assert len(many_entries()) == 64_814 and wk.validate_png(png, RenderLimits())[2] is None  # within MAX_EXIF_BYTES
    decoded = _entries_decoded(monkeypatch)
    out = load_image(png, 0, 0)
    assert out.size == (20, 40) and out.info == {}  # orientation 6: turned, metadata dropped
    # before: exif_transpose decoded and re-encoded all 5400 entries (216 ms of the trainer's CPU per 64x64 image)
    assert len(decoded) <= 2, len(decoded)


def test_to_rgb_with_many_exif_entries_costs_about_what_the_parse_does():
    png = _grey_png(many_entries())
    cost = []
    for _ in range(3):
        t0 = time.process_time()
        load_image(png, 0, 0)
        cost.append(time.process_time() - t0)
    assert min(cost) < 0.1, cost  # ~18 ms here; 216 ms before


@pytest.mark.parametrize("orientation,size", [(1, (40, 20)), (2, (40, 20)), (3, (40, 20)), (4, (40, 20)),
                                              (5, (20, 40)), (6, (20, 40)), (7, (20, 40)), (8, (20, 40)),
                                              (0, (40, 20)), (9, (40, 20))])
def test_to_rgb_turns_as_exif_transpose_does(orientation, size):
    from PIL import ImageOps

    src = Image.new("RGB", (40, 20), (255, 0, 0))
    src.putpixel((0, 0), (0, 0, 255))
    src.putpixel((39, 19), (0, 255, 0))
    src.putpixel((39, 0), (255, 255, 0))
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    buf = io.BytesIO()
    src.save(buf, "PNG", exif=exif)
    out = images.to_rgb(Image.open(io.BytesIO(buf.getvalue())))
    ref = ImageOps.exif_transpose(Image.open(io.BytesIO(buf.getvalue()))).convert("RGB")
    assert out.size == ref.size == size and np.array_equal(np.asarray(out), np.asarray(ref))


# -- 2. no EXIF block that makes PIL warn in the trainer ---------------------------------------------------------------
def test_the_trainer_would_print_a_warning_per_entry_of_a_malformed_block():
    # why: what to_rgb's getexif does with the block (each text names its tag, so none is printed only once)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        images.to_rgb(Image.open(io.BytesIO(_grey_png(larger_than_file()))))
    assert len(caught) == 5400 and len({str(w.message) for w in caught}) == 5400
    assert str(caught[0].message) == "Tag data larger than file. Skipping tag 1"


@pytest.mark.parametrize("block,warned,first", [
    ("larger_than_file()", 5400, "Tag data larger than file. Skipping tag 1"),
    ("orientation_of(6)", 1, "Metadata Warning, tag 274 had too many entries: 6, expected 1"),
])
def test_a_job_png_whose_exif_makes_pil_warn_is_refused(pool, block, warned, first):
    # before: ok, and each image printed up to 10,800 lines (1 MB) on the trainer's stderr in 131 ms of its CPU
    r = pool.render(RenderJob(JOB.replace("BLOCK", block)), timeout_s=20)
    assert not r.ok and r.error_kind == "invalid_image", r
    assert r.message == f"PNG refused: PIL gives {warned} warning(s) reading its EXIF block (first: {first})"


@pytest.mark.parametrize("block,warned", [(larger_than_file(), 5400), (larger_than_file(3), 3),
                                          (orientation_of(2), 1), (orientation_of(900), 1)],
                         ids=["larger_than_file_5400", "larger_than_file_3", "orientation_of_2", "orientation_of_900"])
def test_validate_png_counts_the_warnings_of_the_orientation_read(block, warned):
    w, h, kind, msg = wk.validate_png(_grey_png(block), RenderLimits())
    assert (w, h, kind) == (40, 20, "invalid_image") and f"PIL gives {warned} warning(s)" in msg, msg


def test_well_formed_exif_passes_and_is_applied():
    exif = Image.Exif()
    exif[ORIENTATION] = 8
    exif[0x010F] = "maker"
    exif[0x0110] = "model"
    buf = io.BytesIO()
    Image.new("RGB", (40, 20), "white").save(buf, "PNG", exif=exif)
    assert wk.validate_png(buf.getvalue(), RenderLimits()) == (40, 20, None, "")
    assert wk.validate_png(_grey_png(orientation_of(1)), RenderLimits()) == (40, 20, None, "")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and the trainer prints nothing
        assert load_image(buf.getvalue(), 0, 0).size == (20, 40)


# -- 3. 16-bit grey: a table lookup, not float64 temporaries ----------------------------------------------------------
def test_sixteen_bit_grey_is_scaled_exactly_as_before():
    values = np.arange(65536, dtype=np.uint16).reshape(256, 256)
    for mode, dtype in (("I;16", "<u2"), ("I;16B", ">u2")):
        im = Image.frombytes(mode, (256, 256), values.astype(dtype).tobytes())
        out = images._wide_grey_to_8bit(im)
        assert out.dtype == np.uint8 and np.array_equal(out, np.rint(values / 257.0).astype(np.uint8)), mode


def test_sixteen_bit_grey_costs_no_float64_copies():
    im = Image.frombytes("I;16", (4096, 4096), np.full((4096, 4096), 40000, dtype="<u2").tobytes())
    tracemalloc.start()
    try:
        out = images._wide_grey_to_8bit(im)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out.shape == (4096, 4096) and int(out[0, 0]) == 156  # rint(40000 / 257)
    # before: ~384 MiB of float64 arrays (three of 128 MiB); now the uint16 pixels (32 MiB) and the result (16 MiB)
    assert peak < 80 << 20, peak >> 20


def test_a_job_sixteen_bit_grey_png_reaches_the_trainer_scaled(pool):
    job = ("import numpy as np\nfrom PIL import Image\n"
           "a = np.repeat(np.arange(256, dtype='<u2') * 257, 256)\n"
           "Image.frombytes('I;16', (256, 256), a.tobytes())"
           ".save('/job/out.png')\n")
    r = pool.render(RenderJob(job), timeout_s=20)
    assert r.ok and (r.width, r.height) == (256, 256), r
    assert Image.open(io.BytesIO(r.png)).mode == "I;16"
    out = np.asarray(load_image(r.png, 0, 0))
    assert out.shape == (256, 256, 3) and np.array_equal(out[:, 0, 0], np.arange(256))  # row y is grey level y


# -- 4. a PNG no larger than its pixels plus some metadata: the run's records keep every returned PNG -------------------
PADDED_SRC = r'''
import io, struct, zlib
from PIL import Image
buf = io.BytesIO()
Image.new("RGBA", (64, 64), "white").save(buf, "PNG")
png = buf.getvalue()
end = png.index(b"IEND") - 4
pad = b"\0" * PAD
png = png[:end] + struct.pack(">I", len(pad)) + b"prVt" + pad + struct.pack(">I", zlib.crc32(b"prVt" + pad)) + png[end:]
open("/job/out.png", "wb").write(png)
'''


@pytest.mark.parametrize("pad,ok", [((8 << 20) - 4096, False), (200 << 10, True)])
def test_a_job_png_padded_past_its_pixels_is_refused(pool, pad, ok):
    # before: 8 MiB of one private chunk around a 64 px square came back ok, and MM-Zero's recorder saved all of it
    # for every such attempt (a step of attempts x max_png_bytes on the run's disk)
    res = pool.render(RenderJob(PADDED_SRC.replace("PAD", str(pad))), timeout_s=20)
    assert res.ok is ok, (res.error_kind, res.message)
    if not ok:
        raw = 64 * (1 + 64 * 4)
        assert res.error_kind == "too_large"
        assert f"whose pixels take {raw} bytes uncompressed: at most {raw + raw // 64 + wk.PNG_SLACK_BYTES}" in \
            res.message


def test_incompressible_pixels_still_fit_the_bound():
    # noise stores as deflate's stored blocks: its file is its scanlines plus a few bytes per block, well inside
    arr = np.random.default_rng(0).integers(0, 256, (700, 700, 4), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr, "RGBA").save(buf, "PNG", compress_level=0)  # all stored blocks: the largest an encoder writes
    assert wk.validate_png(buf.getvalue(), RenderLimits())[2:] == (None, "")
