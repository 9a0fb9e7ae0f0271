"""render/: a fifth red-team pass. A palette PNG whose tRNS holds more alpha values than its PLTE has entries was
returned as ok (decoders disagree on it, and past 256 values PIL's convert("RGBA") raised in the MM-Zero judge); the
caller's job lists, code types and pool timings that are not what render_many / RenderPool expect; a job message the
worker cannot unpickle (it killed the worker)."""

import struct
import sys
import zlib

import pytest

from conftest import png_pixel as _pixel

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob, RenderLimits  # noqa: E402
from render.worker import validate_png  # noqa: E402

PLOT = ("import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(1, 1), dpi=40)\n"
        "ax.add_patch(plt.Rectangle((0, 0), 1, 1, color='blue'))\n"
        "ax.set_xlim(0, 1); ax.set_ylim(0, 1); ax.axis('off')\n")


@pytest.fixture(scope="module")
def pool(render_pool):
    return render_pool


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def palette_png(entries: int, alphas: int, index: int = 0, trns_first: bool = False) -> bytes:
    """8x8, 8-bit indexed, every pixel ``index``; PLTE of ``entries`` red entries, tRNS of ``alphas`` values 128."""
    plte = _chunk(b"PLTE", b"\xff\x00\x00" * entries)
    trns = _chunk(b"tRNS", b"\x80" * alphas) if alphas else b""
    rows = b"".join(b"\x00" + bytes([index]) * 8 for _ in range(8))
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 3, 0, 0, 0))
            + (trns + plte if trns_first else plte + trns) + _chunk(b"IDAT", zlib.compress(rows))
            + _chunk(b"IEND", b""))


def _job_writing(png: bytes) -> RenderJob:
    return RenderJob(f"open('out.png', 'wb').write({png!r})\n")


# --- palette PNGs whose tRNS is longer than the palette ----------------------------------------------------------
@pytest.mark.parametrize("entries,alphas,first", [(1, 257, False), (2, 3, False), (1, 1, True), (256, 257, False)])
def test_palette_trns_longer_than_plte_is_invalid(entries, alphas, first):
    # before: ok. PNG rule: at most one alpha value per palette entry, after the PLTE; libpng drops such a tRNS (an
    # opaque image), PIL applies it, and with more than 256 values PIL's convert("RGBA") raises ValueError
    w, h, kind, msg = validate_png(palette_png(entries, alphas, trns_first=first), RenderLimits())
    assert (w, h, kind) == (8, 8, "invalid_image") and "tRNS" in msg, msg


@pytest.mark.parametrize("entries,alphas", [(1, 0), (1, 1), (2, 2), (256, 256)])
def test_palette_trns_within_plte_stays_valid(entries, alphas):
    assert validate_png(palette_png(entries, alphas), RenderLimits()) == (8, 8, None, "")


def test_job_png_that_breaks_the_consumer_is_not_ok(pool):
    from mmevo.evolve.mmzero import load_image

    bad = palette_png(1, 257)
    with pytest.raises(ValueError, match="palette index out of range"):  # what the judge met with the old "ok"
        load_image(bad, 16, 1 << 20)
    r = pool.render(_job_writing(bad), timeout_s=10)
    assert (r.ok, r.error_kind, r.png) == (False, "invalid_image", None), r
    assert "tRNS with 257 alpha values for a palette of 1 entries" in r.message, r.message
    good = pool.render(_job_writing(palette_png(2, 2)), timeout_s=10)  # same shape, inside the rules: still ok
    assert good.ok and (good.width, good.height) == (8, 8), good
    # red at alpha 128 on white, as the judge sees it
    assert load_image(good.png, 16, 1 << 20).getpixel((0, 0)) == (255, 127, 127)


# --- what the caller passes ----------------------------------------------------------------------------------------
def test_render_many_takes_any_iterable(pool):
    # before: a generator was used up by the language check: TypeError ("object of type 'generator' has no len()")
    for jobs in ((RenderJob(PLOT) for _ in range(3)), map(RenderJob, [PLOT, PLOT])):
        rs = pool.render_many(jobs, timeout_s=10)
        assert [r.ok for r in rs] == [True] * len(rs) and len(rs) in (2, 3), rs
        assert _pixel(rs[0].png, (20, 20)) == (0, 0, 255)


@pytest.mark.parametrize("code", [PLOT.encode(), None, 5, bytearray(b"pass")])
def test_code_that_is_not_a_str_is_refused_before_any_job(pool, code):
    # before: sent to a worker and reported as a too_large job ("source missing or too long")
    replaced = pool.replaced
    with pytest.raises(ValueError, match=r"job 1: code must be a str, got " + type(code).__name__):
        pool.render_many([RenderJob(PLOT), RenderJob(code)], timeout_s=5)
    assert pool.replaced == replaced


class _Code(str):  # defined here, so the worker (which cannot import this test module) cannot unpickle it
    pass


class _Limits(RenderLimits):
    pass


def test_str_subclass_code_renders_on_the_same_worker(pool):
    # before: the worker died unpickling the job (AttributeError: Can't get attribute '_Code'), the job was a crash
    # and the worker was replaced
    pids, replaced = pool.worker_pids(), pool.replaced
    r = pool.render(RenderJob(_Code(PLOT), _Code("python")), timeout_s=10)
    assert r.ok and _pixel(r.png, (20, 20)) == (0, 0, 255), r
    assert (pool.worker_pids(), pool.replaced) == (pids, replaced)


def test_unreadable_job_is_answered_and_the_worker_serves_on():
    from conftest import start_render_pool

    p = start_render_pool(workers=1, limits=_Limits())  # limits of a class the worker cannot import
    try:
        pid = p.worker_pids()[0]
        r = p.render(RenderJob(PLOT), timeout_s=10)
        assert (r.ok, r.error_kind) == (False, "crash") and "could not read the job" in r.message, r
        assert (p.worker_pids(), p.replaced) == ([pid], 0)  # before: "render worker exited", replaced 1
        p.limits = RenderLimits()
        r = p.render(RenderJob(PLOT), timeout_s=10)
        assert r.ok and _pixel(r.png, (20, 20)) == (0, 0, 255), r
        assert (p.worker_pids(), p.replaced) == ([pid], 0)
    finally:
        p.close()


@pytest.mark.parametrize("kw", [{"reply_grace_s": float("nan")}, {"reply_grace_s": -1.0},
                                {"reply_grace_s": float("inf")}, {"start_timeout_s": 0}, {"start_timeout_s": "5"}])
def test_unusable_pool_timings_are_refused_at_construction(kw):
    from render import RenderPool

    # before: the pool started, and with a NaN / negative grace every job came back "crash" and replaced its worker
    with pytest.raises(ValueError, match=next(iter(kw))):
        RenderPool(workers=1, **kw)
