"""``model.cpu_malloc``: freed tensor memory stays in the heap on CPU runs (glibc's mallopt), so the next round of
same-sized tensors reuses it instead of faulting in fresh zero-filled pages.

The allocator settings are process-wide and one-way, so each measurement runs in its own interpreter."""

import subprocess
import sys
import textwrap

import pytest

from mmevo.config import load_config
from mmevo.models import cpu_malloc

# rounds of six live 24 MiB tensors, written and then all freed. Kept, the rounds from the third on reuse the heap
# pages of the first ones: 0 page faults (measured, every run). With glibc's defaults the count depends on where its
# adaptive thresholds settle: 12,000 - 37,000 faults per round for the first rounds, in some runs down to 0 later
_ROUNDS = textwrap.dedent("""
    import resource, sys
    import torch
    from mmevo.models.cpu_malloc import use_cpu_malloc
    applied = use_cpu_malloc(sys.argv[1], on_cpu=True)
    def round_():
        live = [torch.empty(6 << 20).fill_(1.0) for _ in range(6)]
        del live
    for _ in range(3):  # the heap grows to its size (the first rounds fault in pages either way)
        round_()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(6):
        round_()
    print(applied, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def _faults(choice: str) -> tuple[bool, int]:
    out = subprocess.run([sys.executable, "-c", _ROUNDS, choice], capture_output=True, text=True, check=True)
    applied, faults = out.stdout.split()
    return applied == "True", int(faults)


@pytest.mark.skipif(cpu_malloc._glibc() is None, reason="needs glibc")
@pytest.mark.parametrize("choice", ["keep", "auto"])
def test_kept_memory_is_reused_without_page_faults(choice):
    applied, faults = _faults(choice)
    assert applied and faults < 1000, faults


def test_thresholds_set_and_where(monkeypatch):
    """keep / auto on a CPU run raise glibc's mmap threshold to its 32 MiB maximum and the trim threshold to 1 GiB;
    system, or a run whose model is not on the CPU, calls nothing."""
    calls = []

    class FakeLibc:
        @staticmethod
        def mallopt(param, value):
            calls.append((param, value))
            return 1

    monkeypatch.setattr(cpu_malloc, "_glibc", lambda: FakeLibc)
    assert cpu_malloc.use_cpu_malloc("system", on_cpu=True) is False
    assert cpu_malloc.use_cpu_malloc("auto", on_cpu=False) is False
    assert calls == []
    assert cpu_malloc.use_cpu_malloc("auto", on_cpu=True) is True
    assert calls == [(-3, 32 << 20), (-1, 1 << 30)]
    FakeLibc.mallopt = staticmethod(lambda param, value: 0)  # glibc refuses a value
    assert cpu_malloc.use_cpu_malloc("auto", on_cpu=True) is False
    with pytest.raises(RuntimeError, match="refused"):
        cpu_malloc.use_cpu_malloc("keep", on_cpu=True)


def test_bad_choice_is_named_and_config_refuses_it():
    with pytest.raises(ValueError, match="model.cpu_malloc must be one of auto, keep, system"):
        cpu_malloc.use_cpu_malloc("jemalloc", on_cpu=True)
    with pytest.raises(ValueError, match="cpu_malloc"):
        load_config(None, ["model.cpu_malloc=jemalloc"])


def test_keep_without_glibc_is_an_error_and_auto_skips(monkeypatch):
    monkeypatch.setattr(cpu_malloc, "_glibc", lambda: None)
    with pytest.raises(RuntimeError, match="needs glibc"):
        cpu_malloc.use_cpu_malloc("keep", on_cpu=True)
    assert cpu_malloc.use_cpu_malloc("auto", on_cpu=True) is False
