"""render/: an eighteenth pass, an inventory of the kernel memory a job can hold outside ``RLIMIT_AS``.

Measured on the real sandbox as the host's ``/proc/meminfo`` deltas while a job ran and after it ended (the bounded
ones are listed in render/README.md); five were bounded by nothing of the job's but (at most) ``RLIMIT_AS``:

1. POSIX ACLs on the job tmpfs. A tmpfs keeps ``system.posix_acl_access`` / ``_default`` in kernel memory and, unlike
   ``user.*`` attributes, charges them to none of its caps: an ACL of 8,100 named users is 64 KiB, two per directory.
   A job that made 4,095 directories (its inode cap) with both held 514 MiB of unreclaimable slab for as long as it
   ran, in ~3.5 s. The filter now refuses the ``setxattr`` family (``EPERM``: ``forbidden``).
2. ``RLIMIT_MEMLOCK`` was inherited from the pool's caller (8 MiB here, unlimited in many GPU containers): a job
   locked that much memory that the kernel may never reclaim. It is 0 now (``RLIMIT_MSGQUEUE`` too), checked
   against ``/proc/<pid>/limits`` like the other limits.
3. Kernel same-page merging: ``prctl(PR_SET_MEMORY_MERGE)`` and ``madvise(MADV_MERGEABLE)`` succeeded; where an
   operator runs KSM, merged pages are a timing side channel on other processes' memory. Both are ``EPERM`` now.
4. ``mmap(MAP_HUGETLB)`` reached the host's hugetlb pool (reserved pages, or surplus ones past it, that no memory
   cgroup is charged for by default): a job could take up to its address-space limit of them. Not measured here (the
   host has no pool: ``ENOMEM``); the filter now answers ``EPERM``.
5. Shared anonymous memory (``MAP_SHARED | MAP_ANONYMOUS``, or a shared mapping of ``/dev/zero`` opened read-write)
   is a shmem object that keeps every page it was given when all of the mapping but one page is unmapped: a job with
   1 GiB of memory limit mapped, filled and unmapped 512 MiB six times and held 3 GiB of the host's ``Shmem`` (as far
   as the host's RAM goes, in seconds). The filter refuses shared anonymous mappings (``EPERM``) and ``/dev/zero`` is
   read-only for the job (a shared mapping of a file open only for reading is a private one)."""

import json
import platform
import resource
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render import sandbox as sb  # noqa: E402

from conftest import start_render_pool  # noqa: E402
from test_render_hostile12 import ALLOW, EPERM, _job_json, _run_filter  # noqa: E402

# syscall numbers of this machine for the calls checked below (setxattrat, Linux 6.13, is the same on both)
_NRS = {"x86_64": dict(setxattr=188, lsetxattr=189, fsetxattr=190, getxattr=191, listxattr=194, removexattr=197,
                       madvise=28, prctl=157, mmap=9),
        "aarch64": dict(setxattr=5, lsetxattr=6, fsetxattr=7, getxattr=8, listxattr=11, removexattr=14,
                        madvise=233, prctl=167, mmap=222)}


def _filter_and_numbers():
    nr = _NRS.get(platform.machine())
    if nr is None or sb.AUDIT_ARCH is None:
        pytest.skip("no seccomp filter for this architecture")
    return sb.build_seccomp_program(), nr


# -- 1. no extended attributes: POSIX ACLs are tmpfs kernel memory outside every cap -----------------------------------
def test_the_filter_refuses_setting_extended_attributes():
    prog, nr = _filter_and_numbers()
    assert [_run_filter(prog, nr[c]) for c in ("setxattr", "lsetxattr", "fsetxattr")] == [EPERM] * 3
    assert _run_filter(prog, 463) == EPERM  # setxattrat
    # reading them, and removing one (which frees memory), stay allowed
    assert [_run_filter(prog, nr[c]) for c in ("getxattr", "listxattr", "removexattr")] == [ALLOW] * 3


ACL_JOB = r"""
import errno, json, os, struct
def acl(users):  # POSIX ACL xattr v2: (tag, perm, id) entries in tag order, a mask for the named users
    ent = lambda tag, qid=0xFFFFFFFF: struct.pack("<HHI", tag, 7, qid)
    return struct.pack("<I", 2) + b"".join([ent(1)] + [ent(2, 100000 + u) for u in range(users)]
                                           + [ent(4), ent(0x10), ent(0x20)])
res = {}
os.mkdir("/job/d")
for name in ("system.posix_acl_access", "system.posix_acl_default", "user.note"):
    try:  # 8,100 named users: 64 KiB of kernel memory per ACL, two per directory
        os.setxattr("/job/d", name, acl(8100) if name.startswith("system.") else b"x")
        res[name] = "set"
    except OSError as e:
        res[name] = errno.errorcode[e.errno]
res["listed"] = os.listxattr("/job/d")
raise RuntimeError(json.dumps(res))
"""


def test_a_job_cannot_hold_acls_in_kernel_memory(render_pool):
    # before: all three "set"; 4,095 directories with both ACLs held 514 MiB of unreclaimable slab for one job
    res = _job_json(render_pool.render(RenderJob(ACL_JOB), timeout_s=20))
    assert res == {"system.posix_acl_access": "EPERM", "system.posix_acl_default": "EPERM", "user.note": "EPERM",
                   "listed": []}


def test_a_refused_extended_attribute_is_forbidden(render_pool):
    r = render_pool.render(RenderJob("import os\nos.setxattr('/job', 'user.a', b'1')\n"), timeout_s=20)
    assert r.error_kind == "forbidden" and "PermissionError" in r.message, r


def test_shutil_copy2_still_copies_a_file_with_its_metadata(render_pool):
    code = ("import os, shutil\nimport matplotlib.pyplot as plt\n"
            "open('a.txt', 'w').write('hi')\nos.chmod('a.txt', 0o640)\n"
            "shutil.copy2('a.txt', 'b.txt')\nassert open('b.txt').read() == 'hi'\n"
            "assert os.stat('b.txt').st_mode & 0o777 == 0o640\nplt.figure(figsize=(1, 1), dpi=50)\nplt.plot([1, 2])\n")
    r = render_pool.render(RenderJob(code), timeout_s=20)
    assert r.ok, r


# -- 2. no locked memory, whatever the pool's caller may lock ----------------------------------------------------------
MLOCK_JOB = r"""
import ctypes, errno, json, mmap, resource
libc = ctypes.CDLL(None, use_errno=True)
libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
buf = mmap.mmap(-1, 1 << 20, flags=mmap.MAP_PRIVATE)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
rc = libc.mlock(ctypes.c_void_p(addr), 1 << 20)
res = {"mlock": rc if rc == 0 else errno.errorcode[ctypes.get_errno()],
       "memlock": list(resource.getrlimit(resource.RLIMIT_MEMLOCK)),
       "msgqueue": list(resource.getrlimit(resource.RLIMIT_MSGQUEUE))}
raise RuntimeError(json.dumps(res))
"""


@pytest.fixture(scope="module")
def pool_of_a_caller_without_memlock_limit():
    """A pool started by a caller whose RLIMIT_MEMLOCK is unlimited (as in many GPU containers), where root may raise
    it; the workers inherit it."""
    saved = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    try:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        pass  # not allowed: the caller's own limit, whatever it is
    try:
        pool = start_render_pool(workers=1)
    finally:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, saved)
    yield pool
    pool.close()


def test_a_job_can_lock_no_memory(pool_of_a_caller_without_memlock_limit):
    # before: {"mlock": 0, "memlock": [-1, -1], ...}: the caller's limit, here unlimited (8 MiB by default)
    res = _job_json(pool_of_a_caller_without_memlock_limit.render(RenderJob(MLOCK_JOB), timeout_s=20))
    assert res == {"mlock": "EPERM", "memlock": [0, 0], "msgqueue": [0, 0]}
    assert (sb.MEMLOCK, sb.MSGQUEUE) == (0, 0)


# -- 3. no kernel same-page merging ------------------------------------------------------------------------------------
def test_the_filter_refuses_same_page_merging():
    prog, nr = _filter_and_numbers()
    assert _run_filter(prog, nr["prctl"], (67, 1, 0, 0, 0, 0)) == EPERM  # PR_SET_MEMORY_MERGE
    assert _run_filter(prog, nr["prctl"], (68, 0, 0, 0, 0, 0)) == ALLOW  # PR_GET_MEMORY_MERGE
    madvise = lambda advice: _run_filter(prog, nr["madvise"], (1 << 30, 4096, advice, 0, 0, 0))  # noqa: E731
    assert madvise(12) == EPERM  # MADV_MERGEABLE
    assert madvise((1 << 32) + 12) == EPERM  # the advice is an int: its high bits are not part of it
    # DONTNEED, FREE, UNMERGEABLE, HUGEPAGE (ignored: huge pages are off), POPULATE_WRITE: as before
    assert [madvise(a) for a in (4, 8, 13, 14, 23)] == [ALLOW] * 5
    assert (sb.PR_SET_MEMORY_MERGE, sb.MADV_MERGEABLE) == (67, 12)


KSM_JOB = r"""
import ctypes, errno, json, mmap
libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
buf = mmap.mmap(-1, 1 << 20, flags=mmap.MAP_PRIVATE)
addr = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
answer = lambda rc: rc if rc == 0 else errno.errorcode[ctypes.get_errno()]
res = {"process": answer(libc.prctl(67, 1, 0, 0, 0)), "range": answer(libc.madvise(addr, 1 << 20, 12)),
       "dontneed": answer(libc.madvise(addr, 1 << 20, 4))}
raise RuntimeError(json.dumps(res))
"""


def test_a_job_cannot_ask_for_same_page_merging(render_pool):
    # before: {"process": 0, "range": 0, ...}: its pages merged with other processes' where the host runs KSM
    res = _job_json(render_pool.render(RenderJob(KSM_JOB), timeout_s=20))
    assert res == {"process": "EPERM", "range": "EPERM", "dontneed": 0}


# -- 4. no pages of the host's hugetlb pool ---------------------------------------------------------------------------
def test_the_filter_refuses_hugetlb_mappings():
    prog, nr = _filter_and_numbers()
    mmap = lambda flags: _run_filter(prog, nr["mmap"], (0, 2 << 20, 3, flags, -1, 0))  # noqa: E731
    assert mmap(0x22 | 0x40000) == EPERM  # MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB
    assert mmap(0x22 | 0x40000 | (21 << 26)) == EPERM  # with MAP_HUGE_2MB
    assert mmap((1 << 32) | 0x22) == ALLOW  # the flags the kernel reads are the low 32 bits
    # what glibc, numpy and cairo map: private anonymous or file, shared file, fixed, populate, stack, noreserve
    assert [mmap(f) for f in (0x22, 0x02, 0x01, 0x03, 0x32, 0x8022, 0x20022, 0x4022, 0x100022)] == [ALLOW] * 9
    assert sb.MAP_HUGETLB == 0x40000


HUGETLB_JOB = r"""
import ctypes, errno, json
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
def answer(flags):
    p = libc.mmap(None, 2 << 20, 3, flags, -1, 0)
    return "mapped" if p not in (None, ctypes.c_void_p(-1).value) else errno.errorcode[ctypes.get_errno()]
raise RuntimeError(json.dumps({"hugetlb": answer(0x22 | 0x40000), "plain": answer(0x22)}))
"""


def test_a_job_cannot_map_hugetlb_pages(render_pool):
    # before: "ENOMEM" on a host without a pool, "mapped" where one has pages free
    res = _job_json(render_pool.render(RenderJob(HUGETLB_JOB), timeout_s=20))
    assert res == {"hugetlb": "EPERM", "plain": "mapped"}


# -- 5. no shared anonymous memory: its pages outlive the part of the mapping that RLIMIT_AS counts --------------------
def test_the_filter_refuses_shared_anonymous_mappings():
    prog, nr = _filter_and_numbers()
    mmap = lambda flags: _run_filter(prog, nr["mmap"], (0, 1 << 20, 3, flags, -1, 0))  # noqa: E731
    assert [mmap(f) for f in (0x21, 0x23, 0x21 | 0x8000, 0x21 | 0x10)] == [EPERM] * 4  # shared / shared-validate
    assert [mmap(f) for f in (0x22, 0x01, 0x03)] == [ALLOW] * 3  # private anonymous; shared files (fonts' caches)
    assert (sb.MAP_SHARED, sb.MAP_ANONYMOUS) == (0x01, 0x20)


SHMEM_JOB = r"""
import ctypes, errno, json, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
SZ = 64 << 20
def held(flags, fd=-1):  # map, fill, unmap all but one page: the pages of a shmem object stay with it
    p = libc.mmap(None, SZ, 3, flags, fd, 0)
    if p in (None, ctypes.c_void_p(-1).value):
        return errno.errorcode[ctypes.get_errno()]
    libc.madvise(p, SZ, 23)  # MADV_POPULATE_WRITE
    libc.munmap(p + 4096, SZ - 4096)
    return "held"
res = {"anon_shared": held(0x21), "anon_private": held(0x22)}
try:
    res["zero_rdwr"] = held(0x01, os.open("/dev/zero", os.O_RDWR))
except OSError as e:
    res["zero_rdwr"] = errno.errorcode[e.errno]
res["zero_read"] = open("/dev/zero", "rb").read(3).hex()
try:
    res["module"] = len(mmap.mmap(-1, 4096))  # Python's default for an anonymous map is MAP_SHARED
except OSError as e:
    res["module"] = errno.errorcode[e.errno]
res["module_private"] = len(mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE))
raise RuntimeError(json.dumps(res))
"""


def test_a_job_cannot_keep_shared_pages_outside_its_address_space(render_pool):
    # before: {"anon_shared": "held", "zero_rdwr": "held", "module": 4096, ...}: six rounds of 512 MiB held 3 GiB of
    # shmem for a job of 1 GiB of memory limit, and as much more as the host's RAM allowed
    res = _job_json(render_pool.render(RenderJob(SHMEM_JOB), timeout_s=20))
    assert res == {"anon_shared": "EPERM", "anon_private": "held", "zero_rdwr": "EACCES", "zero_read": "000000",
                   "module": "EPERM", "module_private": 4096}


def test_a_refused_shared_mapping_is_forbidden(render_pool):
    r = render_pool.render(RenderJob("import mmap\nmmap.mmap(-1, 4096)\n"), timeout_s=20)
    assert r.error_kind == "forbidden" and "PermissionError" in r.message, r
    r = render_pool.render(RenderJob("open('/dev/zero', 'wb').write(b'x')\n"), timeout_s=20)
    assert r.error_kind == "forbidden" and "PermissionError" in r.message, r
