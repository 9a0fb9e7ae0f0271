"""render/: a seventeenth pass, on interpreter-level tricks of python jobs, validator timing and concurrent jobs.

1. Page tables are kernel memory outside ``RLIMIT_AS``. A job that mapped one 4 KiB page per 1 GiB of address space
   (``mmap`` hints, ``MAP_FIXED_NOREPLACE``; 64969 mappings, as many as ``vm.max_map_count`` lets a process hold) and
   read each (the zero page: no memory of its own) held 508 MiB of page tables for 254 MiB of address space, in
   ~1.2 s, per job: the host's ``PageTables`` grew by that much, invisible to the job's limits and RSS. The
   supervisor now reads the child's ``VmPTE`` while it runs (every ``PAGE_TABLE_POLL_S``) and kills it past 1/64 of
   its address-space limit (dense use of all of it needs 1/512): ``memory``."""

import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render import worker as wk  # noqa: E402

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
    assert 16 <= held_mib < 128, r.message  # past 1/64 of ~1.7 GiB of address space, killed within a poll or two


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
