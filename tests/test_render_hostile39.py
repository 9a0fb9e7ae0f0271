"""render/: a thirty-ninth pass, red-teaming afresh (exception groups, exit paths, the job's result channel, its
own messages, raster images inside SVG, libraries beyond matplotlib).

Found and fixed in this pass:

1. An exception group (``ExceptionGroup(...)`` of errors a job gathered, what ``except*`` re-raises; asyncio's
   ``TaskGroup`` cannot run here: its loop's ``socketpair`` is refused) hid its members from the classification:
   a refused read of a host file or socket (a ``PermissionError`` inside the group) or a ``MemoryError`` was a
   ``crash``, and the message (``ExceptionGroup: g (2 sub-exceptions)``) named none of them. The first
   ``worker.GROUP_MEMBERS_READ`` members are read as a cause is, and named in the message.
2. A chart saved with ``format=`` under a name without that format's suffix (``plt.savefig("chart", format="png");
   plt.close()``: matplotlib appends no suffix when a format is given; ``"chart.out"``, ``format="jpg"`` /
   ``"svg"`` / ``"svgz"``) was ``no_output``, "the code drew no figure", as only names were looked at. A save's
   format is now noted by path and the file chosen as one of that format (a PDF so is named as one), where its
   name ends with no suffix the worker reads (a PNG saved as ``a.pdf`` stays a document: hostile33).
"""

import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render import worker  # noqa: E402

PLT = "import matplotlib.pyplot as plt\n"
DRAW = PLT + "plt.figure(figsize=(2, 1), dpi=50)\nplt.plot([3, 1], color='red', linewidth=20)\n"


# -- 1. exception groups: members classified as a cause is --------------------------------------------------------
def test_group_members_classified_in_process():
    assert worker._classify_exception(ExceptionGroup("g", [ValueError("v"), PermissionError("p")])) == "forbidden"
    assert worker._classify_exception(BaseExceptionGroup("g", [KeyboardInterrupt(), MemoryError()])) == "memory"
    # nested groups and a member's own cause
    inner = ValueError("wrapped")
    inner.__cause__ = MemoryError()
    assert worker._classify_exception(ExceptionGroup("o", [ExceptionGroup("i", [inner])])) == "memory"
    assert worker._classify_exception(ExceptionGroup("g", [ValueError("a"), TypeError("b")])) == "crash"
    # only the first members are read: a group of many crashes holding a refusal last stays a crash, in bounded time
    many = [ValueError(str(i)) for i in range(10_000)] + [PermissionError("late")]
    assert worker._classify_exception(ExceptionGroup("g", many)) == "crash"
    text = worker._exc_text(ExceptionGroup("g", [ValueError("v"), PermissionError("p")]))
    assert text == "ExceptionGroup: g (2 sub-exceptions) [ValueError: v; PermissionError: p]", text


GROUP_JOBS = {
    # errors gathered while trying sources, raised together: the refused read of a host file among them
    "gathered_outside_read": ("errors = []\nfor path in ('/etc/passwd', 'data.csv'):\n    try:\n"
                              "        open(path).read()\n    except OSError as e:\n        errors.append(e)\n"
                              "raise ExceptionGroup('no data', errors)\n", "forbidden", "'/etc/passwd'"),
    "gathered_socket": ("import socket\ntry:\n    socket.create_connection(('example.com', 80))\n"
                        "except OSError as e:\n    raise ExceptionGroup('fetch', [ValueError('no table'), e])\n",
                        "forbidden", "gaierror"),
    "group_memory": ("import numpy as np\ntry:\n    np.ones(1 << 40)\nexcept MemoryError as e:\n"
                     "    raise ExceptionGroup('alloc', [e])\n", "memory", "MemoryError"),
    "except_star_reraised": ("try:\n    raise ExceptionGroup('g', [PermissionError('p'), ValueError('v')])\n"
                             "except* ValueError:\n    pass\n", "forbidden", "PermissionError: p"),
    "group_of_crashes": ("raise ExceptionGroup('g', [ValueError('a'), KeyError('b')])\n", "crash", "ValueError: a"),
}


@pytest.mark.parametrize("name", list(GROUP_JOBS))
def test_exception_group_jobs(render_pool, name):
    code, kind, needle = GROUP_JOBS[name]
    r = render_pool.render(RenderJob(DRAW + code), timeout_s=10.0)
    assert r.error_kind == kind and needle in r.message and r.message.startswith("job: "), r


def test_a_group_with_hostile_members_is_still_reported(render_pool):
    # a group whose exceptions property raises, or whose members' str() loops into memory: still one report
    code = DRAW + ("class G(ExceptionGroup):\n    @property\n    def exceptions(self):\n        raise RuntimeError('no')\n"
                   "raise G('g', [ValueError('v')])\n")
    r = render_pool.render(RenderJob(code), timeout_s=10.0)
    assert r.error_kind == "crash" and r.message == "job: exception that cannot be described", r


# -- 2. a savefig told its format, under a name without that suffix -----------------------------------------------
FORMAT_SAVES = {
    "png_no_suffix": ("plt.savefig('chart', format='png', dpi=40)\nplt.close()\n", (80, 40), "'chart' written"),
    "png_other_suffix": ("plt.savefig('chart.out', format='png', dpi=40)\nplt.close()\n", (80, 40), "'chart.out'"),
    "png_in_a_subdir": ("import os\nos.mkdir('figs')\nplt.savefig('figs/c', format='PNG', dpi=40)\nplt.close()\n",
                        (80, 40), "'figs/c' written"),
    "jpg_no_suffix": ("plt.savefig('chart', format='jpg', dpi=40)\nplt.close()\n", (80, 40), "as PNG"),
    "svg_no_suffix": ("plt.savefig('chart', format='svg')\nplt.close()\n", (192, 96), "drawn as SVG"),
    "svgz_no_suffix": ("plt.savefig('chart', format='svgz')\nplt.close()\n", (192, 96), "drawn as SVG"),
    # the last save counts, whichever way each was named
    "named_png_after_format_save": ("plt.savefig('chart', format='png')\nplt.savefig('b.png', dpi=20)\nplt.close()\n",
                                    (40, 20), "'b.png' written"),
    "format_save_after_named_png": ("plt.savefig('b.png', dpi=20)\nplt.savefig('chart', format='png', dpi=40)\n"
                                    "plt.close()\n", (80, 40), "'chart' written"),
}


@pytest.mark.parametrize("name", list(FORMAT_SAVES))
def test_a_save_in_a_named_format_is_the_image(render_pool, name):
    code, size, needle = FORMAT_SAVES[name]
    r = render_pool.render(RenderJob(DRAW + code), timeout_s=10.0)
    assert r.ok and (r.width, r.height) == size and needle in r.message, r


FORMAT_REFUSALS = {
    "pdf_no_suffix": ("plt.savefig('chart', format='pdf')\nplt.close()\n", "no_output", "'chart', a PDF / PostScript"),
    "png_under_a_document_name": ("plt.savefig('a.pdf', format='png')\nplt.close()\n", "no_output", "'a.pdf', a PDF"),
    # the format noted is the save's word only: what the file holds then is checked as any
    "png_save_overwritten_with_text": ("plt.savefig('chart', format='png')\nplt.close()\n"
                                       "open('chart', 'w').write('not a png')\n", "invalid_image", "not a PNG"),
    "png_save_swapped_for_a_link": ("import os\nplt.savefig('chart', format='png')\nplt.close()\nos.remove('chart')\n"
                                    "os.symlink('/etc/ld.so.cache', 'chart')\n", "no_output", "drew no figure"),
    "svg_save_overwritten_with_an_entity": ("plt.savefig('chart', format='svg')\nplt.close()\nopen('chart', 'w').write("
                                            "'<!DOCTYPE svg [<!ENTITY x SYSTEM \"file:///etc/ld.so.cache\">]><svg>&x;</svg>')\n",
                                            "forbidden", ""),
}


@pytest.mark.parametrize("name", list(FORMAT_REFUSALS))
def test_a_save_in_a_named_format_is_checked_as_any(render_pool, name):
    code, kind, needle = FORMAT_REFUSALS[name]
    r = render_pool.render(RenderJob(DRAW + code), timeout_s=10.0)
    assert r.error_kind == kind and needle in r.message, r
