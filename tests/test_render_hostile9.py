"""render/: a ninth red-team pass. A job pinned gigabytes outside its RLIMIT_AS with vmsplice (a 1-byte splice of a
transparent huge page holds the whole 2 MiB page in the pipe after munmap, out of the job's RSS, so the OOM killer
would pick the trainer), and used hundreds of MiB of kernel memory in Landlock rulesets of its own."""

import json
import platform
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402

_NR = {"x86_64": {"vmsplice": 278, "splice": 275, "tee": 276, "landlock_create_ruleset": 444,
                  "landlock_add_rule": 445, "landlock_restrict_self": 446},
       "aarch64": {"vmsplice": 75, "splice": 76, "tee": 77, "landlock_create_ruleset": 444,
                   "landlock_add_rule": 445, "landlock_restrict_self": 446}}

PINNING_JOB = """
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
nr = {nrs!r}
res = {{}}
def call(name, *args):
    rc = libc.syscall(nr[name], *args)
    res[name] = "OK" if rc >= 0 else errno.errorcode[ctypes.get_errno()]
r, w = os.pipe()
r2, w2 = os.pipe()
buf = ctypes.create_string_buffer(b"x" * 4096)
iov = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 1)  # struct iovec {{base, len}}
call("vmsplice", w, iov, 1, 0)
os.write(w, b"y")
call("splice", r, None, w2, None, 1, 0)
call("tee", r, w2, 1, 0)
call("landlock_create_ruleset", None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION: the cheapest call
call("landlock_add_rule", 0, 1, None, 0)
call("landlock_restrict_self", 0, 0)
res["thp_disabled"] = libc.prctl(42, 0, 0, 0, 0)  # PR_GET_THP_DISABLE
res["thp_enable"] = "OK" if libc.prctl(41, 0, 0, 0, 0) == 0 else errno.errorcode[ctypes.get_errno()]
res["thp_disabled_after"] = libc.prctl(42, 0, 0, 0, 0)
raise RuntimeError(json.dumps(res))
"""


def test_page_pinning_and_landlock_rulesets_are_denied(render_pool):
    nrs = _NR.get(platform.machine())
    if nrs is None:
        pytest.skip("no syscall numbers for this architecture")
    r = render_pool.render(RenderJob(PINNING_JOB.format(nrs=nrs)), timeout_s=20)
    assert r.error_kind == "crash" and "RuntimeError: {" in r.message, r
    res = json.loads(r.message[r.message.index("{"):])
    assert res == {"vmsplice": "EPERM", "splice": "EPERM", "tee": "EPERM", "landlock_create_ruleset": "EPERM",
                   "landlock_add_rule": "EPERM", "landlock_restrict_self": "EPERM",
                   "thp_disabled": 1, "thp_enable": "EPERM", "thp_disabled_after": 1}, res


def test_plots_still_render_with_the_tighter_filter(render_pool):
    # numpy, matplotlib's Agg and PNG writing need none of the denied calls
    code = ("import numpy as np, matplotlib.pyplot as plt\nx = np.linspace(0, 6, 200)\nplt.plot(x, np.sin(x))\n"
            "plt.savefig('out.png', dpi=40)\n")
    r = render_pool.render(RenderJob(code), timeout_s=30)
    assert r.ok and r.png.startswith(b"\x89PNG"), r


# `width="1e400"` (infinity once parsed) is no size since test_render_hostile33: `invalid_size`, as a NaN one
@pytest.mark.parametrize("size", ['width="-10" height="1e308"', 'width="10" height="1e30"'])
def test_an_svg_size_past_any_surface_is_too_large_not_a_crash(render_pool, size):
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" {size}><rect width="5" height="5"/></svg>'
    r = render_pool.render(RenderJob(svg, "svg"), timeout_s=20)
    assert r.error_kind == "too_large" and "SVG size: OverflowError" in r.message, r


def test_python_code_with_a_byte_order_mark_runs_as_the_interpreter_runs_it(render_pool):
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.savefig('out.png', dpi=30)\n"
    plain = render_pool.render(RenderJob(code), timeout_s=30)
    marked = render_pool.render(RenderJob("\ufeff" + code), timeout_s=30)
    assert plain.ok and marked.ok and marked.png == plain.png, marked
    inner = render_pool.render(RenderJob("x = 1\n\ufeff" + code), timeout_s=30)  # only a leading one is a BOM
    assert inner.error_kind == "syntax", inner


SET_ORDER_JOB = ("import matplotlib.pyplot as plt\nlabels = {'alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta'}\n"
                 "for i, name in enumerate(labels):\n    plt.bar(i, i + 1, label=name)\nplt.legend()\n"
                 "plt.savefig('out.png', dpi=30)\nimport os\nos.write(3, ('ok\\n' + ','.join(labels)).encode())\n"
                 "os._exit(0)\n")


def test_the_order_of_a_set_of_strings_is_the_same_on_every_worker_and_pool():
    # str hashes were salted per worker start (-I ignores PYTHONHASHSEED): a legend built from a set came out in
    # another order, as another image, on another worker or run
    from render import RenderPool

    seen = set()
    for _ in range(2):
        with RenderPool(workers=2) as pool:
            for r in pool.render_many([RenderJob(SET_ORDER_JOB)] * 2, timeout_s=30):
                assert r.ok, r
                seen.add((r.message, r.png))
    assert len(seen) == 1, [m for m, _ in seen]
