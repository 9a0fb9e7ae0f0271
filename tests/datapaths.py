"""Where the tests find benchmark data.

* ``FIXTURES``: small subsets of the real benchmark files, in the repository (``data/fixtures``, see
  ``data/README.md``); always present, so a fresh clone runs every test that does not need the full files.
* ``SHARED``: the full files (``$MMEVO_SHARED_DATA``, default ``../shared/data`` beside the repository). Tests that
  check every row of a full file (or run a parity subset of it) skip one by one when the file is missing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "data" / "fixtures"
SHARED = Path(os.environ.get("MMEVO_SHARED_DATA") or ROOT.parent / "shared" / "data")


def _missing_reason(path: Path, what: str) -> str:
    return (f"needs the full {what}: {path} not found (set MMEVO_SHARED_DATA to the full data, default "
            f"../shared/data; see data/README.md)")


def needs_shared(relpath: str, what: str):
    """A skipif mark for a test that needs the full file (or folder) ``SHARED/relpath``."""
    path = SHARED / relpath
    return pytest.mark.skipif(not path.exists(), reason=_missing_reason(path, what))


def shared(relpath: str, what: str) -> Path:
    """``SHARED/relpath``, or skip the calling test (or fixture) when it is missing."""
    path = SHARED / relpath
    if not path.exists():
        pytest.skip(_missing_reason(path, what))
    return path
