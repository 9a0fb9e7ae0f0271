"""Loader for Geometry3K-style training data: hub exports, local files and the synthetic generator's exports.

:func:`load_geometry3k` reads any layout :func:`mmevo.data.sources.iter_rows` knows (a ``.jsonl`` / ``.json`` /
``.parquet`` file; a directory with ``{split}.*`` files, hub shards ``data/{split}-*.parquet`` or ``data.*``; a
``{split}/`` sub-directory; a ``datasets.save_to_disk`` folder) with the ``geometry3k`` rules of
:mod:`mmevo.data.benchmarks` — the same rules ``mmevo eval`` reads Geometry3K with — and decodes every image to RGB
while loading, so a corrupt file fails here and not in the middle of training.

A row's images may be path strings (relative to the data file's directory), ``{"bytes": ..., "path": ...}`` dicts or
raw bytes, as a list or a single value.  A problem without an ``"<image>"`` placeholder gets one per image prepended;
a gold given as a letter ("B", "(B)", "B.") becomes the choice text.  Bad rows raise
:class:`~mmevo.data.schema.DataError` naming the file, the row and the field; with ``skip_bad=True`` they are skipped
and counted by reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .benchmarks import items_to_examples, load_items
from .schema import Example

__all__ = ["load_geometry3k"]


def load_geometry3k(
    source: str | Path,
    split: str | None = None,
    skip_bad: bool = False,
    image_key: str = "images",
    problem_key: str = "problem",
    answer_key: str = "answer",
    choices_key: str = "choices",
    min_pixels: int = 0,
    max_pixels: int = 0,
) -> tuple[list[Example], dict[str, Any]]:
    """Geometry3K-schema rows as Examples, and ``stats = {"rows", "loaded", "skipped", "skipped_by_reason",
    "files"}``.  Without ``skip_bad`` the first bad row (or undecodable image) raises :class:`DataError`.  Each image
    is scaled into ``min_pixels..max_pixels`` (0: no bound) as it is decoded."""
    src = Path(source)
    if not src.exists():
        raise FileNotFoundError(f"{src}: no such file or directory")
    fields = {"image": image_key, "problem": problem_key, "answer": answer_key, "choices": choices_key}
    items, stats = load_items("geometry3k", src, split, fields=fields, skip_bad=skip_bad)
    return items_to_examples(items, stats, skip_bad, min_pixels, max_pixels)
