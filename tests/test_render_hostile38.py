"""render/: a thirty-eighth pass, red-teaming afresh (rcParams and backend abuse, the job's own descriptors, rlimits
and signals, memory maps, huge saves, source encodings, SVG text and reference fan-out).

Found and fixed in this pass:

1. The code's own ``savefig`` at a dpi or tight box past ``max_side`` that Agg could not allocate (``savefig("c.png",
   dpi=10000)``: a canvas of 64000x48000 px; ``bbox_inches="tight", pad_inches=2000``) was ``memory``
   (``MemoryError: std::bad_alloc``), while the same save that Agg refused by its size, or that fit in memory, was
   ``too_large``: only the current figure at its own dpi was checked. The canvas sized where it failed is now.
2. ``RenderPool`` took any ``RenderLimits`` (only ``disk_bytes`` was checked) and ``workers`` of any type: each bad
   field failed every job of the pool in its own way (``max_side`` NaN: every plot ``too_large``, "exceeds nan px";
   ``max_code_chars="10"``: the worker's ``TypeError``, a ``crash``; ``memory_bytes`` -1 or 2**70, ``nofile`` 0:
   "sandbox setup failed"; ``nproc`` 0 and ``max_side=True`` ran), ``workers=2.5`` failed in ``range()``. Each is a
   ``ValueError`` naming the field now, before any worker starts.
"""

import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob, RenderLimits, RenderPool  # noqa: E402

TOKEN = "hostile38canary"
PLT = "import matplotlib.pyplot as plt\n"
DRAW = PLT + "plt.figure(figsize=(2, 1), dpi=50)\nplt.plot([3, 1], color='red', linewidth=20)\n"


# -- 1. a save past max_side that Agg cannot allocate is too_large, naming the canvas ------------------------------
HUGE_SAVES = {
    "dpi_ten_thousand_on_the_default_figure": (PLT + "plt.plot([1, 2])\nplt.savefig('c.png', dpi=10000)\n",
                                               "image of 64000x48000 px exceeds 4096 px"),
    "dpi_a_hundred_thousand": (DRAW + "plt.savefig('c.png', dpi=1e5)\n", "image of 200000x100000 px exceeds 4096 px"),
    "tight_box_padded_by_two_thousand_inches": (DRAW + "plt.savefig('c.png', bbox_inches='tight', pad_inches=2000)\n",
                                                "image of 200087x200051 px exceeds 4096 px"),
    "rcparams_tight_padding": (DRAW + "plt.rcParams['savefig.bbox'] = 'tight'\nplt.rcParams['savefig.pad_inches'] = "
                               "2000\nplt.savefig('c.png')\n", "image of 200087x200051 px exceeds 4096 px"),
    "a_figure_not_current_drawn": (PLT + "big = plt.figure(figsize=(1000, 1000))\n" + DRAW + "big.canvas.draw()\n",
                                   "image of 100000x100000 px exceeds 4096 px"),
}


@pytest.mark.parametrize("name", list(HUGE_SAVES))
def test_a_save_past_max_side_out_of_memory_is_too_large(render_pool, name):
    code, message = HUGE_SAVES[name]
    r = render_pool.render(RenderJob(code), timeout_s=10.0)
    assert r.error_kind == "too_large" and r.message.startswith("job: " + message), r
    assert "out of memory drawing it: MemoryError" in r.message, r


def test_an_allocation_failure_within_max_side_stays_memory(render_pool):
    code = DRAW + "import numpy as np\nnp.ones((1 << 36,), dtype=np.uint8)\n"
    r = render_pool.render(RenderJob(code), timeout_s=10.0)
    assert r.error_kind == "memory" and "MemoryError" in r.message, r


# -- 2. a pool's limits and worker count checked before any worker starts ------------------------------------------
BAD_LIMITS = [("max_side", float("nan")), ("max_side", True), ("max_side", 0), ("max_code_chars", "10"),
              ("memory_bytes", -1), ("memory_bytes", 2 ** 70), ("nofile", 0), ("nofile", 7), ("nproc", 0),
              ("max_png_bytes", 1.5), ("max_file_bytes", None), ("max_svg_bytes", 0), ("disk_bytes", 0),
              ("min_side", 5000), ("max_aspect", float("inf")), ("max_aspect", 0.5), ("max_aspect", "20")]


@pytest.mark.parametrize("field,value", BAD_LIMITS)
def test_a_limit_no_job_can_run_under_is_refused_naming_it(field, value):
    with pytest.raises(ValueError, match=f"limits.{field} "):
        RenderPool(workers=1, limits=RenderLimits(**{field: value})).close()


@pytest.mark.parametrize("workers", [0, 2.5, True, "2", None])
def test_a_worker_count_that_is_no_positive_int_is_refused(workers):
    with pytest.raises(ValueError, match="workers must be an int >= 1"):
        RenderPool(workers=workers).close()


def test_limits_must_be_render_limits():
    with pytest.raises(ValueError, match="limits must be a RenderLimits, got dict"):
        RenderPool(workers=1, limits={"max_side": 64}).close()


def test_the_limits_the_tests_use_are_accepted():
    from render.pool import check_limits

    for limits in (RenderLimits(), RenderLimits(max_side=32), RenderLimits(memory_bytes=512 << 20, nofile=8),
                   RenderLimits(max_aspect=1, min_side=4096, max_side=4096)):
        assert check_limits(limits) is limits


# -- a breadth batch: each outcome bounded and labelled, the pool unharmed ------------------------------------------
PNG_HEADER_ONLY = ("import struct, zlib\ndef chunk(t, d):\n    return struct.pack('>I', len(d)) + t + d + struct.pack("
                   "'>I', zlib.crc32(t + d))\nopen('b.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', "
                   "struct.pack('>IIBBBBB', 60000, 60000, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(b'')) + "
                   "chunk(b'IEND', b''))\n")
RESOURCES = {  # name: (code, language, timeout_s, expected kinds)
    "memmap_of_a_tebibyte": ("import numpy as np\nm = np.memmap('big.dat', mode='w+', dtype=np.uint8, shape=(1 << 40,))"
                             "\nm[::4096] = 1\n", "python", 10.0, {"too_large"}),
    "tofile_of_two_gibibytes": ("import numpy as np\nnp.ones(1 << 31, dtype=np.uint8).tofile('a.bin')\n", "python",
                                10.0, {"memory"}),
    "decimal_precision_past_memory": ("import decimal\ndecimal.getcontext().prec = 10 ** 17\n"
                                      "decimal.Decimal(1) / decimal.Decimal(3)\n", "python", 10.0, {"memory"}),
    "format_width_of_ten_billion": ("s = f\"{1:{10 ** 10}}\"\n", "python", 10.0, {"memory"}),
    "tick_locator_of_a_billion_ticks": (PLT + "from matplotlib.ticker import MultipleLocator\nax = plt.gca()\n"
                                        "ax.plot([0, 1])\nax.xaxis.set_major_locator(MultipleLocator(1e-9))\n", "python",
                                        10.0, {"memory"}),
    "histogram_of_a_billion_bins": ("import numpy as np\n" + PLT + "plt.hist(np.random.rand(10), bins=10 ** 9)\n",
                                    "python", 10.0, {"memory"}),
    "imread_of_a_png_declaring_sixty_thousand_square": (PNG_HEADER_ONLY + PLT + "plt.imshow(plt.imread('b.png'))\n",
                                                        "python", 10.0, {"memory", "too_large"}),
    "c_recursion_past_a_raised_limit": ("import sys\nsys.setrecursionlimit(10 ** 9)\nl = []\nfor _ in range(10 ** 7):"
                                        "\n    l = [l]\nrepr(l)\n", "python", 10.0, {"crash"}),
    "five_thousand_data_files_then_a_chart": ("for i in range(5000):\n    open(f'd{i}.csv', 'w').write('1')\n" + DRAW
                                              + "plt.savefig('chart.png')\nplt.close()\n", "python", 10.0,
                                              {"too_large"}),
    "two_million_source_lines": ("x = 1\n" * 2_000_000, "python", 5.0, {"too_large"}),
    "rcparams_pad_of_a_hundred_inches": (DRAW + "plt.savefig('c.png', bbox_inches='tight', pad_inches=100)\n"
                                         "plt.close()\n", "python", 10.0, {"too_large"}),
}
SELF_HARM = {
    "every_descriptor_closed": ("import os\nos.closerange(0, 1000)\n" + DRAW, "python", 5.0, {"ok"}),
    "every_descriptor_non_blocking": ("import os\nfor fd in range(20):\n    try:\n        os.set_blocking(fd, False)\n"
                                      "    except OSError:\n        pass\n" + DRAW, "python", 5.0, {"ok"}),
    "stdout_duplicated_over_the_result_pipe": ("import os\nfor fd in range(3, 20):\n    try:\n        os.dup2(1, fd)\n"
                                               "    except OSError:\n        pass\n" + DRAW, "python", 5.0, {"ok"}),
    "sigstop_to_itself": ("import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n", "python", 3.0,
                          {"forbidden"}),
    "sigkill_to_its_process_group": ("import os, signal\nos.killpg(0, signal.SIGKILL)\n", "python", 5.0,
                                     {"forbidden"}),
    "file_size_limit_lowered_to_zero": ("import resource\nresource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))\n" + DRAW,
                                        "python", 5.0, {"too_large"}),
    "cpu_limit_lowered_to_one_second": ("import resource\nresource.setrlimit(resource.RLIMIT_CPU, (1, 1))\nwhile True:"
                                        "\n    pass\n", "python", 5.0, {"timeout"}),
    "address_space_lowered_to_fifty_mib": ("import resource\nresource.setrlimit(resource.RLIMIT_AS, (50 << 20, 50 << "
                                           "20))\n" + DRAW, "python", 5.0, {"memory"}),
    "profiling_timer_of_ten_ms": ("import signal\nsignal.setitimer(signal.ITIMER_PROF, 0.01, 0.01)\nwhile True:\n"
                                  "    pass\n", "python", 2.0, {"timeout"}),
    "alarm_raising_in_the_workers_save": ("import signal\ndef stop(*a):\n    raise KeyboardInterrupt\nsignal.signal("
                                          "signal.SIGALRM, stop)\nsignal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)\n"
                                          + DRAW, "python", 5.0, {"crash"}),
    "backend_switched_to_pdf": ("import matplotlib\nmatplotlib.use('pdf')\n" + DRAW, "python", 5.0, {"ok"}),
    "backend_switched_to_tk": ("import matplotlib\nmatplotlib.use('TkAgg')\n" + DRAW, "python", 5.0, {"crash"}),
    "style_sheet_from_a_url": (PLT + "plt.style.use('https://example.com/" + TOKEN + ".mplstyle')\n", "python", 5.0,
                               {"forbidden"}),
    "svg_saved_under_a_png_name": (DRAW + "plt.savefig('chart.png', format='svg')\nplt.close()\n", "python", 5.0,
                                   {"invalid_image"}),
    "out_png_made_a_fifo": ("import os\nos.mkfifo('out.png')\n" + DRAW, "python", 5.0, {"invalid_image"}),
    "notebook_magic_line": ("%matplotlib inline\n" + DRAW, "python", 5.0, {"syntax"}),
}
SVG_OPEN = '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="50" height="50">'
SVGS = {
    "svg_text_path_of_900000_glyphs": (SVG_OPEN + '<defs><path id="p" d="M0 10 H 100000"/></defs><text font-size="1">'
                                       '<textPath xlink:href="#p">' + "x" * 900000 + "</textPath></text></svg>", "svg",
                                       3.0, {"timeout", "ok"}),
    "svg_tref_fan_out": (SVG_OPEN + '<defs><text id="t">' + "y" * 100000 + "</text></defs><text>"
                         + '<tref xlink:href="#t"/>' * 5000 + "</text></svg>", "svg", 3.0, {"timeout", "too_large"}),
    "svg_marker_of_a_group_on_every_vertex": (SVG_OPEN + '<defs><g id="g">' + '<rect width="1" height="1"/>' * 2000
                                              + '</g><marker id="m" markerWidth="3" markerHeight="3"><use xlink:href='
                                              '"#g"/></marker></defs><path marker-mid="url(#m)" d="M0 0'
                                              + " l1 0" * 50000 + '"/></svg>', "svg", 5.0, {"too_large", "timeout"}),
    "svg_foreign_object_naming_a_host_file": (SVG_OPEN + '<foreignObject width="50" height="50"><div xmlns="http://www'
                                              '.w3.org/1999/xhtml"><img src="file:///etc/hostname"/></div>'
                                              "</foreignObject></svg>", "svg", 5.0, {"ok"}),
    "svg_a_hundred_thousand_nested_groups": (SVG_OPEN + "<g>" * 100000 + "</g>" * 100000 + "</svg>", "svg", 5.0,
                                             {"crash"}),
    "svg_standard_doctype_with_crlf": (('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE svg PUBLIC "-//W3C//DTD '
                                        'SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n' + SVG_OPEN
                                        + '<rect width="40" height="40" fill="red"/>\n</svg>').replace("\n", "\r\n"),
                                       "svg", 5.0, {"ok"}),
    "svg_comment_of_900000_chars": (SVG_OPEN + "<!--" + "z" * 900000 + "--></svg>", "svg", 5.0, {"ok"}),
}
GROUPS = {"resources": RESOURCES, "self_harm": SELF_HARM, "svgs": SVGS}


def test_the_batch_is_new_and_large():
    from test_render_hostile21 import check_batch_is_new
    from test_render_hostile29 import GROUPS as GROUPS29
    from test_render_hostile30 import GROUPS as GROUPS30
    from test_render_hostile31 import GROUPS as GROUPS31
    from test_render_hostile32 import GROUPS as GROUPS32
    from test_render_hostile33 import GROUPS as GROUPS33
    from test_render_hostile35 import GROUPS as GROUPS35
    from test_render_hostile36 import GROUPS as GROUPS36
    from test_render_hostile37 import GROUPS as GROUPS37

    check_batch_is_new(GROUPS, GROUPS29, GROUPS30, GROUPS31, GROUPS32, GROUPS33, GROUPS35, GROUPS36, GROUPS37)


@pytest.mark.parametrize("group", list(GROUPS))
def test_batch_outcomes(render_pool, group):
    from test_render_hostile21 import check_batch_in_time

    got = check_batch_in_time(render_pool, GROUPS[group], TOKEN)
    if group == "resources":  # the save past max_side that fit in memory is refused by its header, as before
        assert got["rcparams_pad_of_a_hundred_inches"][1] == "image 10087x10051 exceeds 4096 px", got
