"""render/: review of the SVG root sizing and the savefig-dpi reading (hostile35).

1. A savefig's dpi sized a figure it did not save: a ``draw_event`` callback of the saved figure drawing another
   figure of no size (its dpi NaN) was sized at the save's dpi, a good size, so the error stayed a ``crash`` where
   the same draw outside a save is ``invalid_size``.
"""

import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402

PLT = "import matplotlib.pyplot as plt\n"
NO_SIZE = "job: figure size is not a finite number of pixels, one or more a side: "


# -- 1. the dpi of a savefig sizes only the figure it saves ---------------------------------------------------------
def test_a_figure_drawn_inside_another_figures_save_is_sized_at_its_own_dpi(render_pool):
    code = (PLT + "saved = plt.figure(figsize=(2, 2))\nplt.plot([1, 2])\n"
            "other = plt.figure(figsize=(2, 2))\nother.dpi = float('nan')\n"
            "saved.canvas.mpl_connect('draw_event', lambda event: other.canvas.draw())\n"
            "saved.savefig('out.png', dpi=50)\n")
    r = render_pool.render(RenderJob(code))
    assert (r.error_kind, r.message.split(" (drawing")[0]) == ("invalid_size", NO_SIZE + "nanxnan px (dpi nan)"), r


def test_a_save_of_no_size_inside_another_figures_save_is_that_saves(render_pool):
    code = (PLT + "saved = plt.figure(figsize=(2, 2))\nplt.plot([1, 2])\nother = plt.figure(figsize=(3, 1))\n"
            "saved.canvas.mpl_connect('draw_event', lambda event: other.savefig('b.png', dpi=float('inf')))\n"
            "saved.savefig('out.png', dpi=50)\n")
    r = render_pool.render(RenderJob(code))
    assert (r.error_kind, r.message.split(" (drawing")[0]) == ("invalid_size", NO_SIZE + "infxinf px (dpi inf)"), r
