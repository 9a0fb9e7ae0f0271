"""Files a rerun reads back, written whole or not at all.

A kill -9 or a full disk mid-write left torn files (``done.json``, ``summary.json``, cached evaluations, records,
a cut ``metrics.jsonl``) that the next run failed decoding or reused. Each is written to a temporary name beside it
and renamed over it (atomic on one filesystem): a kill leaves the old file or none, and at most a ``.tmp``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["write_text_atomic", "write_json_atomic"]


def write_text_atomic(path: str | Path, text: str) -> None:
    """``text`` (UTF-8) into ``path`` through ``<path>.tmp`` and a rename."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_json_atomic(path: str | Path, obj, indent: int | None = 2) -> None:
    """``obj`` as JSON (``default=str``) into ``path``, atomically (``write_text_atomic``)."""
    write_text_atomic(path, json.dumps(obj, indent=indent, default=str))
