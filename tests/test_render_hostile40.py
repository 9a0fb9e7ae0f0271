"""render/: a fortieth pass (SVG prologues, style-sheet splitting and the pool under mixed hostile load).

Nothing broke in this pass; these pin what was checked so that a later change cannot regress it unseen:

1. SVG prologues and style text: a DOCTYPE naming an external DTD (public or ``file://`` system id) is never loaded
   (drawn, nothing fetched); an entity that DTD would declare is refused in text; ``@import`` split across CDATA
   sections or around a child element of ``<style>`` is seen joined; a character reference or a tab inside a URL
   scheme is read as the parser decodes it; a root of a foreign default namespace is refused.
2. The pool: jobs of distinct sizes interleaved with hostile ones (killing themselves, init, every process, flooding
   the result channel, exhausting memory, faulting, sleeping past the timeout) on two workers: every result is its
   own job's, no worker is replaced, and a clean job renders after.
"""

import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render.svg import check_svg  # noqa: E402

S = '<svg xmlns="http://www.w3.org/2000/svg" width="40" height="30">'
R = '<rect width="20" height="20" fill="red"/>'
DTD = '<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">'

SCREENED = {
    "doctype_public": ('<?xml version="1.0" standalone="no"?>' + DTD + S + R + "</svg>", None, ""),
    "doctype_system_file": ('<!DOCTYPE svg SYSTEM "file:///etc/passwd">' + S + R + "</svg>", None, ""),
    "dtd_entity_in_text": (DTD + S + "<text y='9'>&nbsp;a</text></svg>", "forbidden", "'nbsp'"),
    "import_across_cdata": (S + '<style><![CDATA[@imp]]><![CDATA[ort "x.css";]]></style>' + R + "</svg>",
                            "forbidden", "@import"),
    "import_around_child": (S + '<style>@imp<g/>ort "x.css";</style>' + R + "</svg>", "forbidden", "@import"),
    "charref_scheme": (S + '<image href="&#x66;ile:///etc/passwd" width="9" height="9"/></svg>', "forbidden",
                       "file:///etc/passwd"),
    "tab_in_data_scheme": (S + '<image href=" d&#x09;ata:image/svg+xml,&lt;svg/&gt;" width="9" height="9"/></svg>',
                           "forbidden", "nested SVG/XML"),
    "foreign_default_ns": ('<svg xmlns="http://example.com/x" width="40" height="30">' + R + "</svg>", "forbidden",
                           "no <svg> root"),
}


@pytest.mark.parametrize("name", list(SCREENED))
def test_screen_reads_prologues_and_style_text_as_parsed(name):
    text, kind, needle = SCREENED[name]
    got = check_svg(text)
    if kind is None:
        assert got is None, got
    else:
        assert got is not None and got[0] == kind and needle in got[1], got


@pytest.mark.parametrize("name", ["doctype_public", "doctype_system_file", "dtd_entity_in_text",
                                  "import_around_child"])
def test_prologues_end_to_end(render_pool, name):
    text, kind, needle = SCREENED[name]
    r = render_pool.render(RenderJob(text, language="svg"), timeout_s=10.0)
    if kind is None:
        assert r.ok and (r.width, r.height) == (40, 30), r
    else:
        assert r.error_kind == kind and needle in r.message, r


HOSTILE = [
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", {"forbidden", "crash"}),
    ("import os\nos.kill(1, 9)\n", {"forbidden", "crash"}),
    ("import os\nos.kill(-1, 9)\n", {"forbidden", "crash"}),
    ("import os\nos.write(3, b'x' * 100000)\n", {"protocol"}),
    ("b = bytearray(1 << 40)\n", {"memory"}),
    ("import ctypes\nctypes.string_at(0)\n", {"crash"}),
    ("import time\ntime.sleep(30)\n", {"timeout"}),
]


def test_results_stay_with_their_jobs_under_mixed_hostile_load(render_pool):
    jobs, want = [], []
    for i, (code, kinds) in enumerate(HOSTILE):
        w = 21 + 2 * i
        jobs.append(RenderJob(f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="7">{R}</svg>',
                              language="svg"))
        want.append((w, 7))
        jobs.append(RenderJob(code))
        want.append(kinds)
        jobs.append(RenderJob(f"import matplotlib.pyplot as plt\nplt.figure(figsize=({(w + 1) / 10}, 0.5), dpi=10)\n"
                              "plt.plot([1, 2])\n"))
        want.append((w + 1, 5))
    replaced = render_pool.replaced
    results = render_pool.render_many(jobs, timeout_s=2.0)
    for i, (r, w) in enumerate(zip(results, want)):
        if isinstance(w, tuple):
            assert r.ok and (r.width, r.height) == w, (i, r)
        else:
            assert not r.ok and r.error_kind in w, (i, r)
    assert render_pool.replaced == replaced
    assert render_pool.render(RenderJob(S + R + "</svg>", language="svg"), timeout_s=10.0).ok
