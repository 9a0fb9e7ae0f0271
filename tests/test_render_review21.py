"""render/: review 21, SVG defects that ran to the timeout or were mislabelled.

1. An arc whose radius on the canvas is past cairo's 24.8 fixed-point range (2**23 px): ``<circle r="1e308">``, an
   ellipse of 1e308, a circle of 10 under ``scale(1e150)`` ran until the job's timeout inside cairo (its search for
   a segment angle grows with the radius). Such an arc is ``too_large`` at once; one flat within cairo's tolerance
   (a path ``A`` of radius 1e150 between points 10 px apart) is drawn as its chord.
2. A ``data:`` PNG that does not decode was ``memory`` (cairo 1.16 reports libpng errors as ``NO_MEMORY``), a
   truncated one and a corrupt GIF / JPEG a ``crash``: each is ``syntax``, the document's malformed content.
3. ``rem`` was always 16 px: it is the root's font size (CSS Values), where the root sets one.
"""

import base64
import struct
import sys
import zlib

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from conftest import ink_box, render_svg  # noqa: E402

HEAD = '<svg xmlns="http://www.w3.org/2000/svg" width="60" height="60"'



# -- 1. arcs past cairo's range ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("body, radius", [
    ('<circle cx="30" cy="30" r="1e308" fill="red"/>', "inf"),  # before: timeout
    ('<circle cx="30" cy="30" r="1e38" fill="red"/>', "1e+38"),  # before: timeout
    ('<ellipse cx="30" cy="30" rx="1e308" ry="1e308" fill="red"/>', "inf"),  # before: timeout
    ('<ellipse cx="30" cy="30" rx="1e30" ry="1" fill="red"/>', "1e+30"),
    ('<g transform="scale(1e150)"><circle r="10" fill="red"/></g>', "1e+151"),  # before: timeout
    ('<path d="M0 0 A1e150 1e150 0 0 1 0 1e140" stroke="red"/>', "1e+150"),
])
def test_an_arc_past_cairos_range_is_too_large_at_once(render_pool, body, radius):
    r = render_svg(render_pool, f"{HEAD}>{body}</svg>")
    assert r.error_kind == "too_large", (r.error_kind, r.message)
    assert r.message == f"job: SVG arc of radius {radius} px on the canvas exceeds the 8.38861e+06 px cairo draws"
    assert r.elapsed_s < 5


def test_a_flat_arc_past_cairos_range_is_its_chord(render_pool):
    path = '<path d="M0 30 A1e150 1e150 0 0 1 60 30" stroke="red" stroke-width="2"/>'
    r = render_svg(render_pool, f"{HEAD}>{path}</svg>")
    assert r.ok and ink_box(r.png) == (0, 29, 60, 31), (r.error_kind, r.message)


def test_an_arc_within_cairos_range_is_drawn(render_pool):
    r = render_svg(render_pool, f'{HEAD}><circle cx="30" cy="30" r="1e6" fill="red"/></svg>')
    assert r.ok and ink_box(r.png) == (0, 0, 60, 60), (r.error_kind, r.message)


# -- 2. data: rasters that do not decode -------------------------------------------------------------------------------
def _chunk(ctype, body):
    return struct.pack(">I", len(body)) + ctype + body + struct.pack(">I", zlib.crc32(ctype + body))


_IHDR = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", 10, 10, 8, 2, 0, 0, 0))
_ROWS = b"".join(b"\0" + b"\xff\0\0" * 10 for _ in range(10))


def _image(data, mime="image/png"):
    href = f"data:{mime};base64,{base64.b64encode(data).decode()}"
    return f'{HEAD}><image width="10" height="10" href="{href}"/></svg>'


@pytest.mark.parametrize("data, mime, message", [
    # before: memory, 'job: MemoryError: ("cairo returned CAIRO_STATUS_NO_MEMORY: ...'
    (_IHDR + _chunk(b"IDAT", b"garbage!!") + _chunk(b"IEND", b""), "image/png",
     "job: SVG image is not a readable PNG: the IDAT zlib stream is corrupt (Error -3 while decompressing data: "
     "incorrect header check)"),
    (_IHDR + _chunk(b"IDAT", zlib.compress(b"\0" * 20)) + _chunk(b"IEND", b""), "image/png",
     "job: SVG image is not a readable PNG: IDAT data inflates to 20 of the image's 310 bytes"),
    # before: crash, "OSError: [Errno cairo returned CAIRO_STATUS_READ_ERROR: ..."
    (b"\x89PNG\r\n\x1a\n" + b"junk" * 10, "image/png", "job: SVG image is not a readable PNG: no PNG header"),
    # before: crash, "UnidentifiedImageError: cannot identify image file <_io.BytesIO object at 0x...>"
    (b"GIF89a" + bytes(30), "image/gif", "job: SVG image is in no format PIL reads"),
    (b"\xff\xd8\xff\xe0" + bytes(30), "image/jpeg", "job: SVG image is in no format PIL reads"),
])
def test_a_data_raster_that_does_not_decode_is_syntax(render_pool, data, mime, message):
    r = render_svg(render_pool, _image(data, mime))
    assert (r.error_kind, r.message) == ("syntax", message)


def test_a_well_formed_data_png_is_still_drawn(render_pool):
    r = render_svg(render_pool, _image(_IHDR + _chunk(b"IDAT", zlib.compress(_ROWS)) + _chunk(b"IEND", b"")))
    assert r.ok and ink_box(r.png) == (0, 0, 10, 10), (r.error_kind, r.message)


# -- 3. rem is the root's font size -----------------------------------------------------------------------------------
@pytest.mark.parametrize("root, body, box", [
    (' style="font-size:10px">', '<rect width="2rem" height="2rem"/>', (0, 0, 20, 20)),  # before: 32x32
    (' font-size="20px">', '<rect width="2rem" height="1rem"/>', (0, 0, 40, 20)),
    ('><style>svg { font-size: 5px }</style>', '<rect width="2rem" height="2rem"/>', (0, 0, 10, 10)),
    (' font-size="15pt">', '<rect width="2rem" height="2rem"/>', (0, 0, 40, 40)),
    (' font-size="10px"><g font-size="30px">', '<rect width="2rem" height="2rem"/></g>', (0, 0, 20, 20)),
    (' font-size="2rem">', '<rect width="1rem" height="1rem"/>', (0, 0, 32, 32)),  # a root's rem is the initial 16
    ('>', '<rect width="2rem" height="2rem"/>', (0, 0, 32, 32)),  # no root font size: CSS's initial 16 px
])
def test_rem_is_the_root_font_size(render_pool, root, body, box):
    r = render_svg(render_pool, f"{HEAD}{root}{body}</svg>")
    assert r.ok and ink_box(r.png) == box, (r.error_kind, r.message)


def test_a_root_size_in_rem_follows_the_root_font_size(render_pool):
    r = render_svg(render_pool, '<svg xmlns="http://www.w3.org/2000/svg" font-size="10px" width="5rem" height="3rem">'
                             '<rect width="100%" height="100%"/></svg>')
    assert r.ok and (r.width, r.height) == (50, 30), (r.error_kind, r.message)
