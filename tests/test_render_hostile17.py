"""render/: a seventeenth pass, on interpreter-level tricks of python jobs, validator timing and concurrent jobs.

1. Page tables are kernel memory outside ``RLIMIT_AS``. A job that mapped one 4 KiB page per 1 GiB of address space
   (``mmap`` hints, ``MAP_FIXED_NOREPLACE``; 64969 mappings, as many as ``vm.max_map_count`` lets a process hold) and
   read each (the zero page: no memory of its own) held 508 MiB of page tables for 254 MiB of address space, in
   ~1.2 s, per job: the host's ``PageTables`` grew by that much, invisible to the job's limits and RSS. The
   supervisor now reads the child's ``VmPTE`` while it runs (every ``PAGE_TABLE_POLL_S``) and kills it past 1/64 of
   its address-space limit (dense use of all of it needs 1/512): ``memory``. That bounds how long, not the peak (a job
   faulting its pages from threads in C passes the cap further within one poll; see render/README.md).
2. ``prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, 2**24)`` (Linux 6.16) gave the job a private futex hash of 16M
   buckets: 1 GiB of kernel vmalloc outside ``RLIMIT_AS`` (the host's ``VmallocUsed`` grew by 1094 MiB) for as long
   as the job ran. The filter refuses the option (``EPERM``); a threaded job still gets the hash the kernel sizes
   by its thread count."""

import json
import platform
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render import sandbox as sb  # noqa: E402
from render import worker as wk  # noqa: E402

from test_render_hostile12 import _NRS, ALLOW, EPERM, _run_filter  # noqa: E402

# -- 1. page tables stay within a share of the address-space limit -----------------------------------------------------
SPARSE_MAPPINGS = r"""
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
MAP_PRIVATE, MAP_ANONYMOUS, MAP_FIXED_NOREPLACE, PROT_READ = 0x02, 0x20, 0x100000, 1
mapped = refused = 0
for i in range(1, 66000):  # one page at 16 TiB + i GiB: a page table and a page middle directory of its own
    p = libc.mmap((16 << 40) + (i << 30), 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0)
    if p is None or p == ctypes.c_void_p(-1).value:
        refused += 1
        if refused > 50:  # vm.max_map_count reached
            break
        continue
    ctypes.c_char.from_address(p).value  # a read fault maps the zero page: the tables, no memory of the job's
    mapped += 1
raise RuntimeError(json.dumps({"mapped": mapped, "refused": refused}))
"""


def test_sparse_mappings_cannot_hold_page_tables_past_a_share_of_the_address_space(render_pool):
    # before: crash, {"mapped": 64969, ...}: 508 MiB of page tables for 254 MiB of address space, in one job
    r = render_pool.render(RenderJob(SPARSE_MAPPINGS), timeout_s=20)
    assert r.error_kind == "memory" and r.message.startswith("killed for its page tables: "), r
    held_mib = int(r.message.split(": ")[1].split()[0])
    # past 1/64 of ~1.7 GiB of address space, killed within a poll or a few (the supervisor may wait for a busy CPU)
    assert 16 <= held_mib < 300, r.message


def test_dense_memory_use_stays_well_within_the_page_table_share(render_pool):
    # 900 MiB of numpy array, touched: ~2 MiB of page tables, far below the cap (~27 MiB for the default limits)
    code = ("import numpy as np\nimport matplotlib.pyplot as plt\na = np.ones(900 * 2**20 // 8)\n"
            "plt.figure(figsize=(1, 1), dpi=50)\nplt.plot(a[:10])\n")
    r = render_pool.render(RenderJob(code), timeout_s=20)
    assert r.ok, r


@pytest.mark.parametrize("address_space, cap", [(1 << 30, 16 << 20), (3 << 30, 48 << 20), (64 << 20, 1 << 20)])
def test_the_page_table_cap_is_a_share_of_the_address_space_limit(address_space, cap):
    assert wk._page_table_cap(address_space) == cap
    # densely used, an address space needs 1/512 of its size in page tables: the cap leaves 8 times that
    assert wk._page_table_cap(address_space) == 8 * address_space // 512


def test_page_table_bytes_are_read_from_an_open_status_file(tmp_path):
    status = tmp_path / "status"
    status.write_bytes(b"Name:\tpython\nVmPeak:\t  1000 kB\nVmPTE:\t     508 kB\nVmSwap:\t0 kB\n")
    import os

    fd = os.open(status, os.O_RDONLY)
    try:
        assert wk._page_table_bytes(fd) == 508 * 1024
        assert wk._page_table_bytes(fd) == 508 * 1024  # read afresh from the start each time
    finally:
        os.close(fd)
    (tmp_path / "zombie").write_bytes(b"Name:\tpython\nState:\tZ (zombie)\n")  # a zombie shows no memory
    fd = os.open(tmp_path / "zombie", os.O_RDONLY)
    try:
        assert wk._page_table_bytes(fd) == 0
    finally:
        os.close(fd)
    assert wk._page_table_bytes(-1) == 0  # a closed or bad descriptor reads as nothing


# -- 2. no futex hash of the job's own size ----------------------------------------------------------------------------
def test_the_filter_refuses_a_futex_hash_of_any_size():
    nr = _NRS.get(platform.machine())
    if nr is None or sb.AUDIT_ARCH is None:
        pytest.skip("no seccomp filter for this architecture")
    prog = sb.build_seccomp_program()

    def prctl(*args) -> int:
        return _run_filter(prog, nr["prctl"], args + (0,) * (6 - len(args)))

    assert [prctl(78, sub, 1 << 24) for sub in (1, 2, 3)] == [EPERM] * 3  # PR_FUTEX_HASH: set, get, get-immutable
    assert prctl(2**32 + 78, 1, 1 << 24) == EPERM  # the option is an int: its high bits are not part of it
    assert [prctl(option, 1) for option in (15, 16, 77, 79)] == [ALLOW] * 4  # PR_SET_NAME, ... pass as before
    assert sb.PR_FUTEX_HASH == 78


FUTEX_HASH_JOB = r"""
import ctypes, errno, json, threading
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.prctl(78, 1, ctypes.c_ulong(1 << 24), ctypes.c_ulong(0), ctypes.c_ulong(0))  # 16M buckets: 1 GiB
res = {"set_slots": rc if rc >= 0 else errno.errorcode[ctypes.get_errno()]}
done = []
threads = [threading.Thread(target=lambda: done.append(1)) for _ in range(8)]  # the kernel's own hash for threads
for t in threads:
    t.start()
for t in threads:
    t.join()
res["threads"] = len(done)
raise RuntimeError(json.dumps(res))
"""


def test_a_job_cannot_size_its_futex_hash(render_pool):
    # before: {"set_slots": 0} on Linux 6.16+, and the host's VmallocUsed grew by 1094 MiB until the job ended
    r = render_pool.render(RenderJob(FUTEX_HASH_JOB), timeout_s=20)
    assert r.error_kind == "crash" and "RuntimeError: {" in r.message, r
    assert json.loads(r.message[r.message.index("{"):]) == {"set_slots": "EPERM", "threads": 8}
