"""render/: a thirty-fourth pass, against the thirty-third's new paths.

1. The rule that reads a library's ValueError / TypeError during the code's own draw as its figure's size
   (``invalid_size`` / ``too_large``) read every library error so while the current figure had such a size: a chart
   6000x4000 px whose ``plt.plot`` got mismatched shapes (or a bad colour, or ``json.loads`` of bad text) was
   ``too_large``, "figure of 6000x4000 px exceeds 4096 px (drawing it failed: ValueError: x and y must have same first
   dimension ...)", and a NaN-dpi figure turned any library error into ``invalid_size``. It was a ``crash`` before
   that pass, and is again: only an error raised where the Agg canvas sizes its renderer is the figure's size.
2. The file the worker chose, swapped by the job's threads for a socket or removed before the worker opened it,
   raised the worker's own OSError (``crash``, "No such device or address") where a FIFO, link or directory is
   ``no_output``, "'c.svgz' is no longer a regular file"."""

import os
import socket
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402

PLT = "import matplotlib.pyplot as plt\n"
BIG = PLT + "plt.figure(figsize=(60, 40))\n"  # 6000x4000 px at the default dpi: past max_side
NAN = PLT + "fig = plt.figure(figsize=(2, 2))\nfig.dpi = float('nan')\n"


@pytest.mark.parametrize("code, message", [
    (BIG + "plt.plot([1, 2], [1, 2, 3])\n",
     "job: ValueError: x and y must have same first dimension, but have shapes (2,) and (3,)"),
    (BIG + "plt.plot([1, 2], color='notacolor')\n", "job: ValueError: 'notacolor' is not a valid value for color"),
    (BIG + "plt.plot(None, 'x')\n", "job: ValueError: x, y, and format string must not be None"),
    (BIG + "import json\njson.loads('x')\n", "job: JSONDecodeError: Expecting value"),
    (NAN + "import json\njson.loads('x')\n", "job: JSONDecodeError: Expecting value"),
    (NAN + "int('seven')\n", "job: ValueError: invalid literal for int() with base 10: 'seven'"),
])
def test_a_library_error_unrelated_to_the_draw_stays_a_crash(render_pool, code, message):
    r = render_pool.render(RenderJob(code))
    assert (r.error_kind, r.message[:len(message)]) == ("crash", message), r


@pytest.mark.parametrize("code, kind, message", [
    # the canvas sizing its renderer, reached through the code's own draw, layout or save
    (NAN + "plt.plot([1])\nfig.canvas.draw()\n", "invalid_size",
     "job: figure size is not a finite number of pixels, one or more a side: nanxnan px (dpi nan) (drawing it failed: "
     "ValueError: cannot convert float NaN to integer)"),
    (NAN + "plt.plot([1])\nfig.tight_layout()\n", "invalid_size",
     "job: figure size is not a finite number of pixels, one or more a side: nanxnan px (dpi nan) (drawing it failed: "
     "ValueError: cannot convert float NaN to integer)"),
    (PLT + "fig = plt.figure(figsize=(2, 2), layout='constrained')\nplt.plot([1])\nfig.dpi = 1e300\nfig.canvas.draw()\n",
     "too_large", "job: figure of 2e+300x2e+300 px exceeds 4096 px (drawing it failed: TypeError: __init__(): "),
    (PLT + "fig = plt.figure(figsize=(2, 2))\nplt.plot([1])\nfig.dpi = -5\nfig.canvas.draw()\n", "invalid_size",
     "job: figure size is not a finite number of pixels, one or more a side: -10x-10 px (dpi -5) (drawing it failed: "
     "ValueError: dpi must be positive)"),
])
def test_the_canvas_sizing_a_figure_of_no_size_is_still_its_size(render_pool, code, kind, message):
    r = render_pool.render(RenderJob(code))
    assert (r.error_kind, r.message[:len(message)]) == (kind, message), r


@pytest.mark.parametrize("name", ["c.svg", "c.svgz", "c.png"])
@pytest.mark.parametrize("swap", ["socket", "removed"])
def test_a_chosen_file_swapped_for_a_socket_or_removed_is_no_output(tmp_path, monkeypatch, swap, name):
    # called as the job child calls it, on a real directory, after _last_png_written chose ``name``
    from render import RenderLimits, worker

    monkeypatch.setattr(worker, "_JOBDIR", str(tmp_path))
    path = tmp_path / name
    sock = socket.socket(socket.AF_UNIX)
    try:
        if swap == "socket":
            sock.bind(str(path))
        if name.endswith(".png"):
            got = worker._raster_to_png(str(path), str(tmp_path / "out.png"), RenderLimits())
        else:
            got = worker._svg_file_to_png(str(path), RenderLimits())
    finally:
        sock.close()
    assert got == ("no_output", f"{name!r} is no longer a regular file")
    assert not os.path.exists(tmp_path / "out.png")
