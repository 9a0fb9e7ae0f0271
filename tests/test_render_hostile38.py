"""render/: a thirty-eighth pass, red-teaming afresh (rcParams and backend abuse, the job's own descriptors, rlimits
and signals, memory maps, huge saves, source encodings, SVG text and reference fan-out).

Found and fixed in this pass:

1. The code's own ``savefig`` at a dpi or tight box past ``max_side`` that Agg could not allocate (``savefig("c.png",
   dpi=10000)``: a canvas of 64000x48000 px; ``bbox_inches="tight", pad_inches=2000``) was ``memory``
   (``MemoryError: std::bad_alloc``), while the same save that Agg refused by its size, or that fit in memory, was
   ``too_large``: only the current figure at its own dpi was checked. The canvas sized where it failed is now.
"""

import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402

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
