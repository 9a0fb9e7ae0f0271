"""render/: a sixteenth pass, on SVG resource attacks and how their errors are labelled.

Run against the real sandbox: reference recursion and fan-out (``<use>`` / ``<pattern>`` / ``<mask>`` / ``<marker>`` /
``<clipPath>`` / ``<tref>``), huge blur radii, stroke widths, dash arrays, gradients, fonts and glyph counts, NaN / inf /
negative / 1e308 sizes and viewBoxes, entities, XInclude, DOCTYPEs, CSS ``@import`` / ``url()``, declared encodings.
Every one ended within the job's limits (a recursion as ``crash``, a fan-out as ``timeout``, a tile past the memory
limit as ``memory``). Two were labelled wrongly:

1. Any ``OverflowError`` out of cairosvg was ``too_large`` with "SVG size: ...", also one raised while drawing: an arc
   of radius 1e308 (``(rx ** 2 - ...)``) in a 100 px SVG read as an image too large. Only the surface's own sizing
   is the SVG's size now; an overflow while drawing is arithmetic, a ``crash`` as in a python job.
2. A negative width / height (``width="-100"``, ``viewBox="0 0 -10 10"`` alone) reached cairo, whose
   ``INVALID_SIZE`` ("typically too big") made it ``too_large``. It is now ``invalid_size`` (a ``crash`` until
   test_render_hostile33), "The SVG size is negative", as a zero or NaN size is "The SVG size is undefined".
3. ``mmevo render FILE`` read an SVG's encoding from its XML declaration only: a UTF-16 / UTF-32 file, which XML
   marks with a byte order mark, was "cannot be decoded" (its bytes taken as UTF-8), and ASCII bytes declaring
   ``UTF-16`` were decoded into CJK mojibake and sent as a job (a ``syntax`` error for a file error). A codec that
   fails with a plain ``UnicodeError`` (``undefined``, ``punycode``; also as a Python coding cookie) escaped the
   decoding error to ``main``'s catch-all, whose message does not name the file. The byte order mark now decides, a
   declaration must decode to itself, and every ``UnicodeError`` is the decoding error that names the file."""

import sys
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from mmevo.cli import _source_text, main  # noqa: E402
from render import RenderJob  # noqa: E402

SVG_HEAD = ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
            'width="100" height="100">')


def _svg(body: str) -> RenderJob:
    return RenderJob(SVG_HEAD + body + "</svg>", language="svg")


def _sized(attrs: str) -> RenderJob:
    return RenderJob(f'<svg xmlns="http://www.w3.org/2000/svg" {attrs}><rect width="5" height="5"/></svg>',
                     language="svg")


# -- 1. an overflow while drawing is no SVG size ----------------------------------------------------------------------
@pytest.mark.parametrize("body, kind", [
    ('<path d="M0 0 A 1e308 1e308 0 1 1 50 50" stroke="red"/>', "too_large"),  # the long way round: past cairo's range
    ('<path d="M0 0 a 1e300 1e300 0 0 0 10 10" fill="red"/>', None),  # the short way round: its chord
])
def test_an_arc_of_radius_1e308_is_no_svg_size(render_pool, body, kind):
    # before: too_large, "SVG size: OverflowError: (34, 'Numerical result out of range')" for a 100x100 SVG; then a
    # crash (cairosvg squared the radius); radii past 1e150 are scaled down now (review 23)
    r = render_pool.render(_svg(body), timeout_s=20)
    assert r.error_kind == kind and "SVG size" not in r.message, r


@pytest.mark.parametrize("attrs, message", [
    ('width="1e308" height="1e308"', "job: SVG size: OverflowError: int too big to convert"),
    ('viewBox="0 0 1e308 1e308"', "job: SVG size: OverflowError: int too big to convert"),
    ('width="-10" height="1e308"', "job: SVG size: OverflowError: int too big to convert"),  # too large one way
    ('width="5000" height="-5"', "job: SVG of 5000x-5 px exceeds 4096 px"),
])
def test_a_size_past_max_side_or_any_surface_is_still_too_large(render_pool, attrs, message):
    r = render_pool.render(_sized(attrs), timeout_s=20)
    assert r.error_kind == "too_large" and r.message == message, r


# -- 2. a negative or undefined size is no size too large -------------------------------------------------------------
@pytest.mark.parametrize("attrs, message", [
    ('width="-100" height="100"', "job: The SVG size is negative: -100x100 px"),
    ('width="100" height="-1"', "job: The SVG size is negative: 100x-1 px"),
    ('viewBox="0 0 -10 10"', "job: The SVG size is negative: -10x10 px"),
    ('width="-10" height="-1e10"', "job: The SVG size is negative: -10x-10000000000 px"),
    ('width="nan" height="100"', "job: The SVG size is undefined: nanx100 px"),
    ('viewBox="0 0 nan nan"', "job: The SVG size is undefined: nanxnan px"),
    ('width="0" height="100"', "job: The SVG size is undefined: 0x100 px"),
    ('width="1e400" height="10"', "job: The SVG size is infinite: infx10 px"),  # was too_large, "SVG size: ..."
])
def test_a_negative_or_undefined_svg_size_is_invalid_size_not_too_large(render_pool, attrs, message):
    # before: a negative side was too_large ("CAIRO_STATUS_INVALID_SIZE: invalid value (typically too big) ..."),
    # a NaN one "ValueError: cannot convert float NaN to integer"; then a `crash` (test_render_hostile33: one kind,
    # `invalid_size`, for a size that is no size, in SVG and python jobs alike)
    r = render_pool.render(_sized(attrs), timeout_s=20)
    assert r.error_kind == "invalid_size" and r.message == message, r


# -- the guarantees this pass relied on, cheaply -----------------------------------------------------------------------
SELF_REFERENCES = {
    "use": '<g id="a"><use xlink:href="#b"/></g><g id="b"><use xlink:href="#a"/></g>',
    "pattern": ('<defs><pattern id="p" width="10" height="10" patternUnits="userSpaceOnUse"><rect width="10" '
                'height="10" fill="url(#p)"/></pattern></defs><rect width="100" height="100" fill="url(#p)"/>'),
    "mask": ('<defs><mask id="m"><rect width="100" height="100" fill="white" mask="url(#m)"/></mask></defs>'
             '<rect width="100" height="100" fill="red" mask="url(#m)"/>'),
    "marker": ('<defs><marker id="k" markerWidth="10" markerHeight="10"><path d="M0 0 L5 5" stroke="red" '
               'marker-start="url(#k)"/></marker></defs><path d="M0 0 L50 50" stroke="red" marker-start="url(#k)"/>'),
    "clip_path": ('<defs><clipPath id="c"><rect width="10" height="10" clip-path="url(#c)"/></clipPath></defs>'
                  '<rect width="100" height="100" clip-path="url(#c)"/>'),
    "tref": '<text id="t"><tref xlink:href="#u"/></text><text id="u"><tref xlink:href="#t"/></text>',
}


def test_self_referencing_svg_elements_end_quickly(render_pool):
    # review 20: a circular reference is not rendered (SVG 2), the rest is drawn: `ok` (a <tref> cycle's tref is
    # read as empty text); each ended in a RecursionError (`crash`) before
    t = time.monotonic()
    results = render_pool.render_many([_svg(body) for body in SELF_REFERENCES.values()], timeout_s=20)
    took = time.monotonic() - t
    got = {name: (r.error_kind, r.message.startswith("job: RecursionError: maximum recursion depth exceeded"))
           for name, r in zip(SELF_REFERENCES, results)}
    assert got == {name: (None, False) for name in SELF_REFERENCES}
    assert took < 10, took


def test_a_pattern_tile_past_the_memory_limit_is_refused_at_allocation(render_pool):
    # a 100000 px square tile would take 40 GB: cairo's allocation fails under RLIMIT_AS, nothing is drawn
    body = ('<defs><pattern id="p" width="100000" height="100000" patternUnits="userSpaceOnUse"><rect width="10" '
            'height="10" fill="red"/></pattern></defs><rect width="100" height="100" fill="url(#p)"/>')
    r = render_pool.render(_svg(body), timeout_s=20)
    assert r.error_kind == "memory" and "CAIRO_STATUS_NO_MEMORY" in r.message and r.elapsed_s < 5, r


def test_ordinary_svgs_still_render(render_pool):
    ok = [_svg('<path d="M10 10 A 30 20 0 1 1 60 60" stroke="red" fill="none"/>'),
          _sized('width="40" height="30" viewBox="0 0 4 3"'), _sized('viewBox="0 0 64 48"')]
    assert [(r.ok, r.width, r.height) for r in render_pool.render_many(ok, timeout_s=20)] == [
        (True, 100, 100), (True, 40, 30), (True, 64, 48)]


# -- 3. mmevo render FILE: the byte order mark decides, a declaration must decode to itself ---------------------------
GREEN = ('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40"><title>caf\u00e9</title>'
         '<rect width="40" height="40" fill="#00ff00"/></svg>\n')


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be", "utf-8"])
@pytest.mark.parametrize("declared", ["", '<?xml version="1.0" encoding="UTF-16"?>\n'])
def test_an_svg_file_with_a_byte_order_mark_is_read_in_its_encoding(encoding, declared):
    # before: a UTF-16 / UTF-32 file was UnicodeDecodeError ("'utf-8' codec can't decode byte 0xff"); a UTF-8 BOM
    # before a UTF-16 declaration decoded the UTF-8 bytes as UTF-16
    raw = "\ufeff".encode(encoding) + (declared + GREEN).encode(encoding)
    assert _source_text(raw, "svg") == declared + GREEN


def test_a_utf16_svg_file_renders(render_pool):
    text = _source_text(b"\xff\xfe" + GREEN.encode("utf-16-le"), "svg")
    r = render_pool.render(RenderJob(text, language="svg"), timeout_s=20)
    assert r.ok and (r.width, r.height) == (40, 40), r


@pytest.mark.parametrize("name, raw, error", [
    ("undefined.svg", b'<?xml version="1.0" encoding="undefined"?>' + GREEN.encode(),
     "decoding with 'undefined' codec failed (UnicodeError: undefined encoding)"),
    ("puny.svg", b'<?xml version="1.0" encoding="punycode"?>' + GREEN.replace("\u00e9", "e").encode(),
     "decoding with 'punycode' codec failed"),
    ("undefined.py", b"# -*- coding: undefined -*-\nimport matplotlib\n",
     "decoding with 'undefined' codec failed (UnicodeError: undefined encoding)"),
    ("ascii16.svg", b'<?xml version="1.0" encoding="UTF-16"?>' + GREEN.encode(),
     "its bytes are not in the encoding it declares ('UTF-16': the declaration does not decode to itself)"),
    ("ebcdic.svg", b'<?xml version="1.0" encoding="cp500"?>' + GREEN.encode(),
     "its bytes are not in the encoding it declares ('cp500'"),
])
def test_a_source_its_codec_cannot_read_is_a_named_error(tmp_path, capsys, name, raw, error):
    # before: the first three were "mmevo render: error: decoding with ..." (main's catch-all: no file named),
    # the last two a job sent in mojibake (exit 1, a syntax error)
    src = tmp_path / name
    src.write_bytes(raw)
    assert main(["render", str(src), "-o", str(tmp_path / "no.png")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mmevo render: error: {src} cannot be decoded as text (") and error in err, err
    assert not (tmp_path / "no.png").exists()
