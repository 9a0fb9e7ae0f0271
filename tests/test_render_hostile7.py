"""render/: an eighth red-team pass. An SVG declaring ``encoding="ISO-8859-1"`` rendered its text as mojibake and
was reported ``ok`` (the job's text was encoded as UTF-8 and then decoded by the declaration), a multi-byte
declaration was a ``crash``; PNGs that libpng refuses or decodes otherwise passed the checks (a second IHDR, a palette
image without PLTE, a grey tRNS of the wrong size: other pixels for the consumer than PIL checked); jobs saw the
host's home as matplotlib's config / cache directories; blank letters and stacked combining marks reached
``message`` unescaped."""

import io
import struct
import sys
import zlib

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render.svg import check_svg, svg_bytes  # noqa: E402
from render.types import RenderLimits  # noqa: E402
from render.worker import _printable, validate_png  # noqa: E402

BODY = ('<svg xmlns="http://www.w3.org/2000/svg" width="120" height="40"><rect width="120" height="40" '
        'fill="white"/><text x="5" y="30" font-size="24">90\u00b0 \u00e9\u00e8</text></svg>')


# -- 1. an SVG's declared encoding describes bytes the job's text no longer has ------------------------------------
def test_declared_encoding_is_rewritten_to_utf8():
    assert svg_bytes('<?xml version="1.0" encoding="ISO-8859-1"?><svg/>') == (
        b'<?xml version="1.0" encoding="UTF-8"?><svg/>')
    assert svg_bytes("\ufeff<?xml version='1.0' encoding='Shift_JIS' standalone='yes'?><svg/>") == (
        b"\xef\xbb\xbf<?xml version='1.0' encoding='UTF-8' standalone='yes'?><svg/>")
    # only the declaration: an attribute named encoding elsewhere, or text, is left alone
    assert svg_bytes('<svg encoding="latin1"><text>encoding="x"</text></svg>') == (
        b'<svg encoding="latin1"><text>encoding="x"</text></svg>')
    assert svg_bytes("<svg>\u00e9</svg>") == "<svg>\u00e9</svg>".encode()


@pytest.mark.parametrize("encoding", ["ISO-8859-1", "windows-1252", "Shift_JIS", "UTF-7", "UTF-16", "no-such-codec"])
def test_svg_text_renders_the_same_whatever_its_declaration(render_pool, encoding):
    plain = render_pool.render(RenderJob(BODY, "svg"), timeout_s=10)
    declared = render_pool.render(RenderJob(f'<?xml version="1.0" encoding="{encoding}"?>' + BODY, "svg"), timeout_s=10)
    assert plain.ok and declared.ok, (plain, declared)
    assert declared.png == plain.png  # "90\u00b0" stays "90\u00b0", not "90\u00c2\u00b0"


def test_bytes_declaring_an_encoding_expat_cannot_read_are_a_syntax_error():
    doc = b'<?xml version="1.0" encoding="Shift_JIS"?><svg xmlns="http://www.w3.org/2000/svg"/>'
    kind, reason = check_svg(doc)
    assert kind == "syntax" and "multi-byte" in reason, reason


# -- 2. PNG rules that decoders read differently ---------------------------------------------------------------------
def _chunk(ctype: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + ctype + data + struct.pack(">I", zlib.crc32(ctype + data) & 0xFFFFFFFF)


def _png(colour: int, chunks: list[tuple[bytes, bytes]], depth: int = 8, side: int = 64) -> bytes:
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colour]
    rows = b"".join(b"\x00" + bytes(side * channels * depth // 8) for _ in range(side))
    head = _chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, depth, colour, 0, 0, 0))
    body = b"".join(_chunk(t, d) if t != b"IDAT" else _chunk(b"IDAT", d or zlib.compress(rows)) for t, d in chunks)
    return b"\x89PNG\r\n\x1a\n" + head + body + _chunk(b"IEND", b"")


IDAT = (b"IDAT", b"")
PLTE = (b"PLTE", bytes(range(6)))  # two entries
REFUSED = {
    "second IHDR": (_png(2, [(b"IHDR", struct.pack(">IIBBBBB", 64, 64, 8, 0, 0, 0, 0)), IDAT]), "a second IHDR"),
    "palette without PLTE": (_png(3, [IDAT]), "without PLTE"),
    "grey tRNS of 7 bytes": (_png(0, [(b"tRNS", bytes(7)), IDAT]), "tRNS of 7 bytes for colour type 0"),
    "RGB tRNS of 2 bytes": (_png(2, [(b"tRNS", bytes(2)), IDAT]), "tRNS of 2 bytes for colour type 2"),
    "tRNS with alpha": (_png(6, [(b"tRNS", bytes(6)), IDAT]), "alpha channel"),
    "palette tRNS longer than PLTE": (_png(3, [PLTE, (b"tRNS", bytes(3)), IDAT]), "3 alpha values for a palette of 2"),
    "PLTE in grey": (_png(0, [(b"PLTE", bytes(30000)), IDAT]), "PLTE in a greyscale image"),
    "PLTE after IDAT": (_png(2, [IDAT, PLTE]), "PLTE after IDAT"),
    "two PLTE": (_png(3, [PLTE, PLTE, IDAT]), "a second PLTE"),
    "PLTE of 257 entries": (_png(3, [(b"PLTE", bytes(771)), IDAT]), "PLTE of 771 bytes"),
    "PLTE not whole entries": (_png(2, [(b"PLTE", bytes(4)), IDAT]), "PLTE of 4 bytes"),
    "tRNS after IDAT": (_png(0, [IDAT, (b"tRNS", bytes(2))]), "tRNS after IDAT"),
    "IDAT split by a chunk": (_png(0, [(b"IDAT", zlib.compress(bytes(65 * 64))[:20]), (b"tEXt", b"a\x00b"),
                                       (b"IDAT", zlib.compress(bytes(65 * 64))[20:])]), "not consecutive"),
    "no IDAT": (_png(0, []), "no IDAT"),
    "bit depth 16 palette": (_png(3, [PLTE, IDAT], depth=16), "colour type 3 with bit depth 16"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_png_breaking_the_rules_decoders_disagree_on_is_refused(name):
    data, reason = REFUSED[name]
    w, h, kind, msg = validate_png(data, RenderLimits())
    assert kind == "invalid_image" and reason in msg, msg


@pytest.mark.parametrize("colour,chunks", [
    (0, [(b"tRNS", bytes(2)), IDAT]),  # grey with its one transparent level
    (2, [(b"PLTE", bytes(range(30))), (b"tRNS", bytes(6)), IDAT]),  # RGB with a suggested palette and a colour key
    (3, [PLTE, (b"tRNS", b"\x00"), IDAT]),  # palette, fewer alpha values than entries
    (3, [(b"PLTE", bytes(768)), (b"tRNS", bytes(256)), IDAT]),  # 256 entries, all with alpha
    (4, [IDAT]), (6, [(b"tEXt", b"k\x00v"), IDAT]),
    (0, [(b"IDAT", zlib.compress(bytes(65 * 64))[:20]), (b"IDAT", zlib.compress(bytes(65 * 64))[20:])]),
])
def test_png_within_the_rules_still_passes(colour, chunks):
    from PIL import Image

    data = _png(colour, chunks)
    assert validate_png(data, RenderLimits())[2:] == (None, ""), validate_png(data, RenderLimits())
    with Image.open(io.BytesIO(data)) as im:
        im.load()


def test_a_job_writing_a_palette_png_without_plte_is_invalid(render_pool):
    code = ("import struct, zlib\n"
            "def ch(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d))\n"
            "rows = b''.join(b'\\x00' + bytes(64) for _ in range(64))\n"
            "open('out.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + ch(b'IHDR', struct.pack('>IIBBBBB', 64, 64, 8, 3, "
            "0, 0, 0)) + ch(b'IDAT', zlib.compress(rows)) + ch(b'IEND', b''))\n")
    r = render_pool.render(RenderJob(code, "python"), timeout_s=10)
    assert not r.ok and r.error_kind == "invalid_image" and "without PLTE" in r.message, r


# -- 3. matplotlib's directories are the job's ----------------------------------------------------------------------
def test_matplotlib_config_and_cache_directories_are_the_jobs(render_pool):
    code = ("import matplotlib, matplotlib.texmanager as t\n"
            "raise RuntimeError(repr((matplotlib.get_configdir(), matplotlib.get_cachedir(), "
            "str(t.TexManager._cache_dir))))\n")
    r = render_pool.render(RenderJob(code, "python"), timeout_s=10)
    assert r.error_kind == "crash" and "('/job', '/job', '/job/tex.cache')" in r.message, r


def test_a_usetex_figure_does_not_fail_on_the_hosts_home(render_pool):
    import os

    code = ("import matplotlib.pyplot as plt\nplt.rc('text', usetex=True)\nplt.plot([1, 2])\n"
            "plt.xlabel(r'$\\alpha$')\n")
    r = render_pool.render(RenderJob(code, "python"), timeout_s=20)
    assert not r.ok, r  # no LaTeX can run in the sandbox (no exec)
    assert "Read-only file system" not in r.message and os.path.expanduser("~") not in r.message, r


# -- 4. messages: blank letters and stacked combining marks are escaped ---------------------------------------------
def test_blank_letters_and_stacked_combining_marks_are_escaped():
    assert _printable("ok\u3164\u115f\u1160\uffa0\u2800x") == "ok\\u3164\\u115f\\u1160\\uffa0\\u2800x"
    assert _printable("x" + "\u0301" * 5) == "x\u0301\u0301" + "\\u0301" * 3
    # what real text needs stays: accented letters, composed or not, and two marks on one letter (Vietnamese)
    assert _printable("caf\u00e9 cafe\u0301 \u1ec7 e\u0323\u0302 \u03b1\u03b2") == (
        "caf\u00e9 cafe\u0301 \u1ec7 e\u0323\u0302 \u03b1\u03b2")
    assert _printable("\x1b[31m\n") == "\\x1b[31m\\n"


def test_a_jobs_invisible_message_is_escaped_end_to_end(render_pool):
    code = "raise RuntimeError('a\\u3164b' + 'c' + '\\u0301' * 50)\n"
    r = render_pool.render(RenderJob(code, "python"), timeout_s=10)
    assert r.error_kind == "crash" and "a\\u3164b" in r.message and r.message.count("\u0301") == 2, r


# -- 5. a figure saved under another name and closed is still the job's image -----------------------------------------
def _blue_figure(save: str) -> str:
    return ("import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(1, 1), dpi=40)\n"
            "fig.patches.append(plt.Rectangle((0, 0), 1, 1, color='blue', transform=fig.transFigure))\n" + save)


def test_a_png_saved_under_another_name_and_closed_is_rendered(render_pool):
    from conftest import png_pixel

    code = _blue_figure("fig.savefig('chart.png'); plt.close('all')\n")
    r = render_pool.render(RenderJob(code, "python"), timeout_s=10)
    assert r.ok and "'chart.png' written by the code" in r.message and (r.width, r.height) == (40, 40), r
    assert png_pixel(r.png, (20, 20)) == (0, 0, 255)
    # the last one written wins, in a subdirectory too
    code = _blue_figure("import os, time\nplt.figure(figsize=(2, 1), dpi=40).savefig('first.png')\ntime.sleep(0.02)\n"
                        "os.makedirs('sub'); fig.savefig('sub/final.PNG'); plt.close('all')\n")
    r = render_pool.render(RenderJob(code, "python"), timeout_s=10)
    assert r.ok and "'sub/final.PNG'" in r.message and (r.width, r.height) == (40, 40), r


def test_without_a_png_file_or_a_figure_there_is_still_no_output(render_pool):
    for code in ["open('notes.txt', 'w').write('x')\n",
                 "import os\nos.symlink('/usr/lib/python3/x.png', 'link.png')\n",  # a link is never followed
                 "import io, matplotlib.pyplot as plt\nplt.plot([1]); plt.savefig(io.BytesIO()); plt.close()\n"]:
        r = render_pool.render(RenderJob(code, "python"), timeout_s=10)
        assert r.error_kind == "no_output", (code, r)
    # a file named .png that is not one is checked like any out.png
    r = render_pool.render(RenderJob("open('fake.png', 'wb').write(b'not a png')\n", "python"), timeout_s=10)
    assert r.error_kind == "invalid_image", r
