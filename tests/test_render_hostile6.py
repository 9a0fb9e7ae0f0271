"""render/: a seventh red-team pass. An SVG ``href`` the screen read as a ``#fragment`` made cairosvg load a nested,
never-screened SVG document (cairosvg takes ``url(...)`` out of any href with its own pattern: ``#a URL('#b
url(data:image/svg+xml;...)``); a job flooding its result pipe kept the root supervisor reading it for the job's whole
time (~0.4 CPU-seconds per second, outside the job's CPU limit); and a job's own exception text decided its
error kind (``float(10**400)``'s "int too large to convert" was ``too_large``, a job's "out of memory" ``memory``)."""

import base64
import os
import re
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render.svg import _cairosvg_url, check_svg  # noqa: E402
from test_render_hostile5 import RED, _next_job_renders  # noqa: E402

NESTED = base64.b64encode(b'<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40">'
                          b'<rect width="40" height="40" fill="red"/></svg>').decode()
OUTER = ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="40" height="40">'
         '<rect width="40" height="40" fill="blue"/>{}</svg>')
BYPASSES = {
    "use_uppercase_URL": f'<use href="#a URL(\'#b url(data:image/svg+xml;base64,{NESTED})"/>',
    "use_space_before_paren": f'<use href="#a url (\'#b url(data:image/svg+xml;base64,{NESTED})"/>',
    "image_xlink_untyped_data": f'<image width="40" height="40" xlink:href="#a URL(\'#b url(data:;base64,{NESTED})"/>',
    "use_fragment_then_url": f'<use href="#a url(data:image/svg+xml;base64,{NESTED})"/>',
}


@pytest.fixture(scope="module")
def pool(render_pool):
    return render_pool


# -- 1. the SVG screen reads an href as cairosvg does ------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(BYPASSES))
def test_url_inside_an_href_is_screened_as_cairosvg_extracts_it(name):
    kind, reason = check_svg(OUTER.format(BYPASSES[name]))
    assert kind == "forbidden" and "url() inside the reference" in reason, reason


def test_nested_document_behind_a_fragment_href_is_not_rendered(pool):
    r = pool.render(RenderJob(OUTER.format(BYPASSES["use_uppercase_URL"]), "svg"), timeout_s=10)
    assert not r.ok and r.error_kind == "forbidden", r
    # fragments and url(#id) paint references still render
    ok = OUTER.format('<defs><linearGradient id="g"><stop offset="0" stop-color="red"/></linearGradient></defs>'
                      '<rect id="r" width="10" height="10" fill="url(#g)"/><use href="#r" x="20"/>')
    assert check_svg(ok) is None and pool.render(RenderJob(ok, "svg"), timeout_s=10).ok


def test_extraction_matches_cairosvgs_own_pattern():
    import random

    from cairosvg.url import URL  # the pattern parse_url searches every href with

    rng = random.Random(7)
    parts = ["url(", "URL(", "url (", ")", "'", '"', "#a", " ", "\n", "data:", "x", "(", "rl("]
    for _ in range(20000):
        v = "".join(rng.choice(parts) for _ in range(rng.randint(0, 9)))
        m = URL.search(v)
        assert _cairosvg_url(v) == (m.group(1).strip("'\"") if m else None), repr(v)


def test_extraction_is_linear():
    # the regex itself is quadratic on many "url(" without a ")" on one line; the screen must not be
    v = "#" + "url(" * 250_000
    t0 = time.perf_counter()
    assert _cairosvg_url(v) is None and _cairosvg_url(v + ")") == v[5:]
    assert time.perf_counter() - t0 < 1.0


# -- 2. a flooded result pipe costs the supervisor nothing -------------------------------------------------------------
def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


# F_SETPIPE_SZ past the default size is refused since the fifteenth pass (hostile15): the flood goes on without it
FLOOD = ("import fcntl, os\n{prelude}try:\n    fcntl.fcntl(3, 1031, 1 << 20)  # F_SETPIPE_SZ\nexcept OSError:\n"
         "    pass\nb = b'x' * (1 << 20)\nwhile True:\n{body}")


@pytest.mark.parametrize("name,prelude,body,kind", [
    ("write_until_error", "", "    os.write(3, b)\n", "protocol"),
    ("sigpipe_default", "import signal\nsignal.signal(signal.SIGPIPE, signal.SIG_DFL)\n", "    os.write(3, b)\n",
     "protocol"),
    ("ignore_epipe", "", "    try:\n        os.write(3, b)\n    except OSError:\n        pass\n", "timeout"),
])
def test_result_pipe_flood_ends_the_supervisors_reading(pool, name, prelude, body, kind):
    (pid,) = pool.worker_pids()[:1]
    before, t0 = _cpu_s(pid), time.monotonic()
    r = pool.render(RenderJob(FLOOD.format(prelude=prelude, body=body)), timeout_s=4)
    assert r.error_kind == kind, r
    if kind == "protocol":  # its writes fail at once: no waiting for the deadline (the old code drained to it)
        assert time.monotonic() - t0 < 3.5
    # before: ~0.4 CPU-seconds of the root supervisor per second of flooding
    assert _cpu_s(pid) - before < 0.5
    _next_job_renders(pool)


# -- 3. error kinds come from library refusals, not from the job's own words ----------------------------------------
@pytest.mark.parametrize("name,code,kind", [
    ("float_overflow", "import matplotlib.pyplot as plt\nplt.plot([float(10**400)])\n", "crash"),
    ("own_out_of_memory_text", "raise ValueError('solver ran out of memory budget')\n", "crash"),
    ("own_too_large_text", "raise RuntimeError('this number is too large')\n", "crash"),
    ("real_memory_error", "x = bytearray(1 << 40)\n", "memory"),
    ("matplotlib_image_too_large", "import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(100000, 1), dpi=100)\n"
     "fig.savefig('out.png')\n", "too_large"),
])
def test_error_kind_of_the_jobs_own_exceptions(pool, name, code, kind):
    r = pool.render(RenderJob(code), timeout_s=10)
    assert not r.ok and r.error_kind == kind, r


# -- 4. more screen / cairosvg differences, and a fetcher that never returns a document --------------------------------
# cairosvg runs parse_url up to three times over a <use> / <tref> href (its url\((.+)\) search, a quote strip and
# urlsplit, which deletes tabs and line breaks), cuts the #fragment before fetching, and turns ids into "#" + id URLs.
NEST_PADLESS = base64.b64encode(b'<svg xmlns="http://www.w3.org/2000/svg" id="A" width="40" height="40">'
                                b'<rect width="40" height="40" fill="red"/></svg> ').decode()  # 3k bytes: no "="
D_SVG = "data:image/svg+xml;base64," + NEST_PADLESS
PAT = '<defs><pattern id="q" patternUnits="userSpaceOnUse" width="40" height="40"/>'
PID = f"p url(data:image/png;base64,) {NEST_PADLESS})"
BYPASSES_2 = {
    "two_level_url": f'<use href="#a url(#b url({D_SVG}))"/>',
    "tab_inside_url": f'<use href="#a u&#9;rl({D_SVG})"/>',
    "newline_inside_url": f'<use href="#a u&#10;rl({D_SVG})"/>',
    "tab_inside_url_in_a_data_url": f'<use href="data:image/png,u&#9;rl({D_SVG})"/>',
    "base64_then_fragment": f'<use href="data:image/png;base64,{NEST_PADLESS}#A"/>',
    "pattern_id_attribute": f'{PAT}<pattern id="{PID}" href="#q"><rect width="1" height="1"/></pattern></defs>'
                            f'<rect width="40" height="40" fill="url(#{PID})"/>',
    "pattern_id_from_css": f'{PAT}<pattern style="id: {PID}" href="#q"><rect width="1" height="1"/></pattern></defs>'
                           f'<rect width="40" height="40" fill="url(#{PID})"/>',
}
PNG_1PX = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c4944415408d763f8cf"
    "c000000301010018dd8db00000000049454e44ae426082")).decode()


@pytest.mark.parametrize("name", sorted(BYPASSES_2))
def test_second_round_bypasses_are_refused_by_the_screen(name):
    kind, reason = check_svg(OUTER.format(BYPASSES_2[name]))
    assert kind == "forbidden", reason


@pytest.mark.parametrize("name", sorted({**BYPASSES, **BYPASSES_2}))
def test_the_fetcher_alone_refuses_every_nested_document(name):
    # defence in depth, without the screen: cairosvg may fetch only raster images from data: URLs
    from cairosvg.surface import PNGSurface

    from render.worker import _raster_only_fetch

    doc = OUTER.format({**BYPASSES, **BYPASSES_2}[name]).encode()
    with pytest.raises(PermissionError):
        PNGSurface.convert(bytestring=doc, unsafe=False, url_fetcher=_raster_only_fetch)


def test_raster_images_and_internal_references_still_render(pool):
    ok = OUTER.format(
        '<defs><linearGradient id="g1"><stop offset="0" stop-color="red"/></linearGradient>'
        '<linearGradient id="g2" href="#g1"/><pattern id="p" width="5" height="5" patternUnits="userSpaceOnUse">'
        '<rect width="2" height="2"/></pattern><pattern id="p2" href="#p"/></defs>'
        '<rect id="r" width="10" height="10" fill="url(#g2)"/><use href="#r" x="20"/>'
        '<rect x="30" width="9" height="9" fill="url(#p2)"/><image width="5" height="5" href="#nothing"/>'
        f'<image x="20" y="20" width="10" height="10" href="data:image/png;base64,{PNG_1PX}"/>'
        '<text y="35"><tref href="#t"/></text><text id="t">x</text>')
    assert check_svg(ok) is None
    r = pool.render(RenderJob(ok, "svg"), timeout_s=10)
    assert r.ok, r
    from conftest import png_pixel

    assert png_pixel(r.png, (25, 25))[:3] != (0, 0, 255)  # the embedded PNG is drawn over the blue background


def test_a_non_raster_data_image_is_refused_in_the_sandbox(pool):
    svg = OUTER.format('<image width="10" height="10" href="data:image/png;base64,'
                       + base64.b64encode(b"GIF88a not an image").decode() + '"/>')
    assert check_svg(svg) is None  # no document, no gzip: the screen lets it through
    r = pool.render(RenderJob(svg, "svg"), timeout_s=10)
    assert not r.ok and r.error_kind == "forbidden" and "not a PNG" in r.message, r
