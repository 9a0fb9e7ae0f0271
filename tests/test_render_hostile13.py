"""render/: a thirteenth red-team pass, above the syscall filter (the SVG path, matplotlib, the result path).

1. ``xml:base``: cairosvg resolves an ``<image>`` href against it, so ``<image xml:base="/etc/ld.so.cache" href="#a">``
   passed the screen (whose references were only ``href``s) and cairosvg asked its fetcher for
   ``file:///etc/ld.so.cache#a`` (``http://...`` for an http base). Only the raster-only fetcher stood in the way; the
   screen now reads ``xml:base`` as the reference it is.
2. An SVG whose size is past ``max_side`` was drawn in full before the supervisor refused it: ``width="100in"`` (9600 px
   square) cost the job 5 s and ~350 MiB for an image that could never be returned. It is now refused when cairosvg
   sizes its surface, before anything is allocated or drawn, as a python job's figure is."""

import os
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render.svg import check_svg  # noqa: E402

SVG_HEAD = ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
            'width="40" height="30">')
# a 1x1 red PNG
RED_PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")


def _image_with_base(base: str, href: str = "#a") -> str:
    return SVG_HEAD + f'<image xml:base="{base}" href="{href}" width="10" height="10"/></svg>'


# --- 1. xml:base ---------------------------------------------------------------------------------------------------
def test_cairosvg_resolves_an_image_href_against_xml_base():
    # why the screen must read xml:base: with a bare-fragment href, cairosvg fetches the base itself
    from cairosvg.surface import PNGSurface

    asked = []

    def recorder(url, resource_type):
        asked.append((url, resource_type))
        return b""

    host_file = os.path.realpath(os.__file__)  # a file that exists here (cairosvg checks the base with isfile)
    for base in (host_file, "http://example.com/a/"):
        PNGSurface.convert(bytestring=_image_with_base(base).encode(), write_to=None, unsafe=False,
                           url_fetcher=recorder)
    assert asked == [(f"file://{host_file}#a", "image/*"), ("http://example.com/a/#a", "image/*")]


@pytest.mark.parametrize("base", ["/etc/ld.so.cache", "file:///etc/", "http://example.com/a/", "fonts/",
                                  "  /etc/x", "data:image/svg+xml;base64,PHN2Zy8+"])
def test_an_external_xml_base_is_forbidden(base):
    # before: None (the screen checked href only), and cairosvg fetched the base
    refused = check_svg(_image_with_base(base))
    assert refused is not None and refused[0] == "forbidden" and "attribute base" in refused[1], refused


@pytest.mark.parametrize("base", ["", "#x", "data:image/png;base64," + RED_PNG])
def test_an_internal_or_raster_xml_base_is_still_allowed(base):
    assert check_svg(_image_with_base(base)) is None


def test_an_xml_base_job_is_forbidden_in_the_sandbox(render_pool):
    # before: ok (a blank 40x30 image: the fetcher answered the file: URL with nothing)
    r = render_pool.render(RenderJob(_image_with_base("/etc/ld.so.cache"), "svg"), timeout_s=20)
    assert not r.ok and r.error_kind == "forbidden", r
    assert "attribute base: reference to an external resource" in r.message, r


# --- 2. an SVG past max_side is refused before drawing -------------------------------------------------------------
@pytest.mark.parametrize("size, px", [('width="100in" height="100in"', "9600x9600"),
                                      ('width="4097" height="4096"', "4097x4096"),
                                      ('viewBox="0 0 10 10" width="10" height="5000"', "10x5000")])
def test_an_svg_past_max_side_is_refused_before_it_is_drawn(render_pool, size, px):
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" {size}><rect width="5" height="5" fill="red"/></svg>'
    r = render_pool.render(RenderJob(svg, "svg"), timeout_s=20)
    # before: the job drew the whole image and the supervisor refused it by its header ("image 9600x9600 exceeds")
    assert not r.ok and r.error_kind == "too_large", r
    assert r.message == f"job: SVG of {px} px exceeds 4096 px", r


def test_svgs_up_to_max_side_still_render(render_pool):
    jobs = [RenderJob('<svg xmlns="http://www.w3.org/2000/svg" width="4096" height="300">'
                      '<rect width="4096" height="300" fill="blue"/></svg>', "svg"),
            RenderJob(SVG_HEAD + f'<image href="data:image/png;base64,{RED_PNG}" width="10" height="10"/></svg>',
                      "svg"),
            RenderJob(SVG_HEAD + '<rect width="40" height="30" fill="red"/></svg>', "svg")]
    rs = render_pool.render_many(jobs, timeout_s=30)
    assert [(r.ok, r.width, r.height) for r in rs] == [(True, 4096, 300), (True, 40, 30), (True, 40, 30)], rs
