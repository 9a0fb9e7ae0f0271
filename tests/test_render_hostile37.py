"""render/: a thirty-seventh pass, red-teaming afresh (C-extension allocations, huge figures, exceptions that cannot
be described, forged result frames, the job's own process exit, accidental programs a coder model writes).

Found and fixed in this pass:

1. A job that replaced ``os._exit`` (or ``posix._exit``) ran on past its own report: ``_child_main``'s closing
   ``os._exit(0)`` and the zygote's ``finally`` both called the job's replacement, so a no-op one let the job child
   return into the zygote's loop (its ``setns`` a blocked system call: a plot that rendered was ``forbidden``) and a
   raising one unwound the interpreter through its shutdown (atexit hooks, ``crash``: "job exited with code 1"). The
   exit is bound before job code runs now; the job's result stands.
"""

import os
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from conftest import png_pixel  # noqa: E402
from render import RenderJob  # noqa: E402

TOKEN = "hostile37canary"
PLT = "import matplotlib.pyplot as plt\n"
DRAW = PLT + "plt.figure(figsize=(2, 1), dpi=50)\nplt.plot([3, 1], color='red', linewidth=20)\n"


# -- 1. the job's own exit replaced: its result stands, nothing of the zygote runs in it ----------------------------
EXIT_REPLACED = {
    "a_no_op": "import os\nos._exit = lambda code: None\n",
    "one_that_raises": "import os\ndef refuse(code):\n    raise RuntimeError('no exit')\nos._exit = refuse\n",
    "posix_and_os_both": "import os, posix\nposix._exit = os._exit = lambda code: None\n",
    "with_an_atexit_hook_spoiling_out_png": ("import atexit, os\natexit.register(lambda: open(os.path.join("
                                             "os.getcwd(), 'out.png'), 'wb').write(b'spoilt'))\n"
                                             "def refuse(code):\n    raise SystemExit(3)\nos._exit = refuse\n"),
}


@pytest.mark.parametrize("name", list(EXIT_REPLACED))
def test_a_job_replacing_its_exit_keeps_its_own_result(render_pool, name):
    r = render_pool.render(RenderJob(EXIT_REPLACED[name] + DRAW), timeout_s=10.0)
    assert r.ok and r.message == "job: current figure", r
    assert (r.width, r.height) == (100, 50) and png_pixel(r.png, (50, 25))[:3] == (255, 0, 0), r


@pytest.mark.parametrize("name", ["a_no_op", "one_that_raises"])
def test_a_job_replacing_its_exit_keeps_its_own_failure(render_pool, name):
    r = render_pool.render(RenderJob(EXIT_REPLACED[name] + "raise ValueError('bad data')\n"), timeout_s=10.0)
    assert (r.error_kind, r.message) == ("crash", "job: ValueError: bad data"), r


# -- a breadth batch: each outcome bounded and labelled, the pool unharmed ------------------------------------------
RESOURCES = {  # name: (code, language, timeout_s, expected kinds)
    "numpy_eight_tebibytes": ("import numpy as np\na = np.zeros((1 << 40,))\na[:] = 1\n", "python", 5.0, {"memory"}),
    "numpy_ones_eight_gib": ("import numpy as np\nnp.ones((1 << 33,), dtype=np.uint8)\n", "python", 5.0, {"memory"}),
    "string_times_ten_billion": ("s = 'ab' * int(1e10)\n", "python", 5.0, {"memory"}),
    "power_tower_int": ("x = 10 ** 10 ** 8\n", "python", 2.0, {"timeout"}),
    "nested_regex_backtrack": ("import re\nre.fullmatch(r'(x+x+)+y', 'x' * 60)\n", "python", 2.0, {"timeout"}),
    "repr_of_a_million_nested_lists": ("l = []\nfor _ in range(10 ** 6):\n    l = [l]\nrepr(l)\n", "python", 5.0,
                                       {"crash"}),
    "a_gib_to_stdout_and_stderr": ("import os\nb = b'x' * (1 << 20)\nfor _ in range(512):\n    os.write(1, b)\n"
                                   "    os.write(2, b)\n" + DRAW, "python", 10.0, {"ok"}),
    "hundred_thousand_empty_files": ("for i in range(100000):\n    open(f'{i}.txt', 'w').close()\n" + DRAW, "python",
                                     10.0, {"too_large"}),
    "set_dpi_a_million": (PLT + "plt.plot([1, 2])\nplt.gcf().set_dpi(1e6)\n", "python", 5.0, {"too_large"}),
    "figsize_thousand_inches": (PLT + "plt.figure(figsize=(1000, 1000))\nplt.plot([1, 2])\n", "python", 5.0,
                                {"too_large"}),
    "two_hundred_thousand_lines": (PLT + "for i in range(200000):\n    plt.plot([i, i + 1], [0, 1])\n", "python",
                                   2.0, {"timeout", "ok"}),
}
ESCAPES = {
    "raise_rlimit_as": ("import resource\nr = resource.RLIM_INFINITY\nresource.setrlimit(resource.RLIMIT_AS, (r, r))\n",
                        "python", 5.0, {"crash"}),
    "posix_spawn_a_shell": ("import os\nos.posix_spawn('/bin/sh', ['sh', '-c', 'touch /tmp/" + TOKEN + "'], {})\n",
                            "python", 5.0, {"forbidden"}),
    "environ_of_self": ("print(open('/proc/self/environ').read())\n", "python", 5.0, {"forbidden"}),
    "savefig_into_host_tmp": (PLT + "plt.plot([1])\nplt.savefig('/tmp/" + TOKEN + ".png')\n", "python", 5.0,
                              {"forbidden"}),
    "forged_frame_of_an_unknown_kind": ("import os\nfor fd in range(3, 10):\n    try:\n        os.write(fd, "
                                        "b'pwned\\nx')\n    except OSError:\n        pass\nos._exit(0)\n", "python", 5.0,
                                        {"protocol"}),
    "forged_frame_past_its_cap": ("import os\nfor fd in range(3, 10):\n    try:\n        os.write(fd, b'ok\\n' + "
                                  "b'y' * (1 << 20))\n    except OSError:\n        pass\nos._exit(0)\n", "python", 5.0,
                                  {"protocol"}),
    "exception_whose_args_hold_itself": ("e = ValueError()\ne.args = (e,)\nraise e\n", "python", 5.0, {"crash"}),
    "exception_cause_ring": ("a, b = ValueError('a'), TypeError('b')\na.__cause__ = b\nb.__cause__ = a\nraise a\n",
                             "python", 5.0, {"crash"}),
    "worker_module_limits_patched": ("import sys\nw = sys.modules['render.worker']\nw.MESSAGE_MAX = 10 ** 9\n"
                                     "w.JOB_KINDS = ('pwned',)\nraise ValueError('v' * 100000)\n", "python", 5.0,
                                     {"crash"}),
    "multiprocessing_pool_map_of_abs": ("from multiprocessing import Pool\nwith Pool(2) as p:\n    p.map(abs, [1, -2])\n",
                             "python", 5.0, {"forbidden"}),
}
SVGS = {
    "svg_viewbox_huge_on_one_pixel": ('<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1" '
                                      'viewBox="0 0 1e300 1e300"><rect width="1e300" height="1e300"/></svg>', "svg",
                                      5.0, {"invalid_image"}),
    "svg_path_to_the_largest_floats": ('<svg xmlns="http://www.w3.org/2000/svg" width="50" height="50"><path '
                                       'd="M0 0 L1e308 1e308 L-1e308 1e308 Z"/></svg>', "svg", 5.0, {"ok"}),
    "svg_blur_of_a_billion": ('<svg xmlns="http://www.w3.org/2000/svg" width="50" height="50"><filter id="f">'
                              '<feGaussianBlur stdDeviation="1e9"/></filter><rect width="40" height="40" '
                              'filter="url(#f)"/></svg>', "svg", 5.0, {"ok"}),
    "svg_radial_gradient_of_nan": ('<svg xmlns="http://www.w3.org/2000/svg" width="50" height="50"><radialGradient '
                                   'id="g" r="nan" fx="inf"><stop offset="0" stop-color="red"/><stop offset="1"/>'
                                   '</radialGradient><rect width="40" height="40" fill="url(#g)"/></svg>', "svg", 5.0,
                                   {"ok"}),
    "svg_text_length_past_floats": ('<svg xmlns="http://www.w3.org/2000/svg" width="50" height="50"><text y="20" '
                                    'textLength="1e300" lengthAdjust="spacingAndGlyphs">hi</text></svg>', "svg", 5.0,
                                    {"ok"}),
    "svg_font_face_of_a_host_file": ('<svg xmlns="http://www.w3.org/2000/svg" width="50" height="50"><style>'
                                     '@font-face{font-family:x;src:url(file:///usr/share/fonts/x.ttf)}</style>'
                                     '<text style="font-family:x" y="20">hi</text></svg>', "svg", 5.0, {"forbidden"}),
}
GROUPS = {"resources": RESOURCES, "escapes": ESCAPES, "svgs": SVGS}


def test_the_batch_is_new_and_large():
    from test_render_hostile21 import check_batch_is_new
    from test_render_hostile29 import GROUPS as GROUPS29
    from test_render_hostile30 import GROUPS as GROUPS30
    from test_render_hostile31 import GROUPS as GROUPS31
    from test_render_hostile32 import GROUPS as GROUPS32
    from test_render_hostile33 import GROUPS as GROUPS33
    from test_render_hostile35 import GROUPS as GROUPS35
    from test_render_hostile36 import GROUPS as GROUPS36

    check_batch_is_new(GROUPS, GROUPS29, GROUPS30, GROUPS31, GROUPS32, GROUPS33, GROUPS35, GROUPS36)


@pytest.mark.parametrize("group", list(GROUPS))
def test_batch_outcomes(render_pool, group):
    from test_render_hostile21 import check_batch_in_time

    got = check_batch_in_time(render_pool, GROUPS[group], TOKEN)
    if group == "escapes":  # the job's text stays cut to its cap, whatever it set in the worker module
        assert len(got["worker_module_limits_patched"][1]) <= 1000 + len("job: "), got
