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
