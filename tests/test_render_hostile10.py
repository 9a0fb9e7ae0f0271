"""render/: a tenth red-team pass. ``/proc/self/mountinfo`` (and ``mounts``, and the same files of every thread:
``/proc/<tid>``, ``task/<tid>``) showed the job every bind's host source path and file-system options. Landlock now
grants the job nothing it can open below its procfs (directories can still be listed)."""

import json
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402

SIG = b"\x89PNG\r\n\x1a\n"


# -- 2. the job's procfs shows no mount table --------------------------------------------------------------------
PROC_READS = """
import errno, json, os, threading
res = {}
def read(path):
    try:
        with open(path) as f:
            return "OK " + f.read(200)
    except OSError as e:
        return errno.errorcode[e.errno]
def in_thread():
    tid = threading.get_native_id()
    for name in ("mountinfo", "mounts", "mountstats"):
        res[f"tid/{name}"] = read(f"/proc/{tid}/{name}")  # a thread's own /proc/<tid>, never listed
        res[f"task/{name}"] = read(f"/proc/1/task/{tid}/{name}")
        res[f"thread-self/{name}"] = read(f"/proc/thread-self/{name}")
t = threading.Thread(target=in_thread)
t.start()
t.join()
for name in ("mountinfo", "mounts", "mountstats", "maps", "status"):
    res[f"self/{name}"] = read(f"/proc/self/{name}")
res["ls_proc"] = sorted(d for d in os.listdir("/proc") if d.isdigit())
res["ls_fd"] = sorted(os.listdir("/proc/self/fd"))
res["cwd"] = os.readlink("/proc/self/cwd")
raise RuntimeError(json.dumps(res))
"""


def test_the_job_reads_no_mount_table_of_any_of_its_tasks(render_pool):
    r = render_pool.render(RenderJob(PROC_READS), timeout_s=30)
    assert r.error_kind == "crash" and "RuntimeError: {" in r.message, r
    res = json.loads(r.message[r.message.index("{"):])
    reads = {k: v for k, v in res.items() if "/" in k}
    assert len(reads) == 14 and set(reads.values()) <= {"EACCES", "ENOENT"}, json.dumps(reads)
    assert all(v == "EACCES" for k, v in reads.items() if "mountstats" not in k), reads  # task dirs have none
    # what stays: its procfs lists only itself, its descriptors, and links (readlink is not an open)
    assert res["ls_proc"] == ["1"] and "3" in res["ls_fd"] and res["cwd"] == "/job", res


def test_a_plot_with_threads_still_renders_without_proc(render_pool):
    code = ("import threading, numpy as np, matplotlib.pyplot as plt\nout = []\n"
            "t = threading.Thread(target=lambda: out.append(np.linalg.svd(np.ones((50, 50)))[1][0]))\n"
            "t.start(); t.join()\nplt.bar(range(3), [1, out[0] / 50, 2]); plt.savefig('out.png', dpi=40)\n")
    r = render_pool.render(RenderJob(code), timeout_s=30)
    assert r.ok and r.png.startswith(SIG), r
