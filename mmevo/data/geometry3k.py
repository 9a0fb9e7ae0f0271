"""Loader for Geometry3K-style data: hub exports, local files and synthetic data.

One function, :func:`load_geometry3k`, turns any of the supported layouts into
a list of :class:`~mmevo.data.schema.Example`:

* a ``.jsonl`` file (one row per line), a ``.json`` file (a list of rows),
  a ``.parquet`` file (e.g. a Hugging Face hub shard);
* a directory holding ``data.jsonl`` / ``data.parquet`` / ``data.json``, or
  ``{split}.jsonl`` / ``{split}.parquet`` / ``{split}.json``, or hub shards
  ``data/{split}-*.parquet``, or a ``{split}/`` sub-directory;
* a directory written by ``datasets.Dataset.save_to_disk`` (or a
  ``DatasetDict``; then ``split`` picks the split).

A row's images may be path strings (relative to the data file's directory),
``{"bytes": ..., "path": ...}`` dicts, raw bytes, PIL images, or a single such
value instead of a list.  Every image is fully decoded and converted to RGB
while loading, so a corrupt file fails here and not in the middle of training.

Bad rows raise :class:`~mmevo.data.schema.DataError` naming the file, the row
and the field; with ``skip_bad=True`` they are skipped and counted instead.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from PIL import Image

from .schema import IMAGE_PLACEHOLDER, DataError, Example
from .sources import is_saved_dataset, iter_rows

__all__ = ["load_geometry3k"]

_LETTER_RE = re.compile(r"^\(?([A-Za-z])\)?[.):]?$")


# --------------------------------------------------------------------------
# Row -> Example
# --------------------------------------------------------------------------


class _Ctx:
    def __init__(self, label: str, base: Path, idx: int, line: int | None, row_id: str | None) -> None:
        self.label, self.base, self.idx, self.line, self.row_id = label, base, idx, line, row_id

    def err(self, field: str, detail: str, reason: str) -> DataError:
        return DataError.for_row(
            self.label, self.idx, field, detail, reason=reason, row_id=self.row_id, line=self.line
        )


def _decode_image_bytes(data: bytes, ctx: _Ctx, field: str, k: int, what: str) -> Image.Image:
    if not data:
        raise ctx.err(field, f"image {k}: empty image bytes{what}", "image_corrupt")
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            return im.convert("RGB")
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise ctx.err(field, f"image {k}: cannot decode image bytes{what}: {e}", "image_corrupt") from e


def _open_image_path(p: str, ctx: _Ctx, field: str, k: int) -> Image.Image:
    if not p:
        raise ctx.err(field, f"image {k}: empty path", "image_missing")
    full = Path(p)
    if not full.is_absolute():
        full = ctx.base / full
    if not full.is_file():
        raise ctx.err(field, f"file {p} not found", "image_missing")
    try:
        data = full.read_bytes()
    except OSError as e:
        raise ctx.err(field, f"file {p} unreadable: {e}", "image_missing") from e
    return _decode_image_bytes(data, ctx, field, k, f" of file {p}")


def _load_image(value: Any, ctx: _Ctx, field: str, k: int) -> Image.Image:
    if isinstance(value, Image.Image):
        try:
            value.load()
            return value.convert("RGB")
        except (OSError, SyntaxError, ValueError) as e:
            raise ctx.err(field, f"image {k}: cannot decode PIL image: {e}", "image_corrupt") from e
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _decode_image_bytes(bytes(value), ctx, field, k, "")
    if isinstance(value, str):
        return _open_image_path(value, ctx, field, k)
    if isinstance(value, dict):
        data = value.get("bytes")
        path = value.get("path")
        if data is not None:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise ctx.err(
                    field, f"image {k}: 'bytes' must be bytes, got {type(data).__name__}", "bad_type"
                )
            return _decode_image_bytes(bytes(data), ctx, field, k, "")
        if isinstance(path, str) and path:
            return _open_image_path(path, ctx, field, k)
        raise ctx.err(field, f"image {k}: dict has neither 'bytes' nor 'path'", "image_missing")
    raise ctx.err(field, f"image {k}: unsupported type {type(value).__name__}", "bad_type")


def _text_field(row: dict, key: str, ctx: _Ctx, *, allow_number: bool) -> str:
    if key not in row or row[key] is None:
        raise ctx.err(key, "missing", f"missing_{key}")
    v = row[key]
    if allow_number and isinstance(v, (int, float)) and not isinstance(v, bool):
        v = str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)
    if not isinstance(v, str):
        raise ctx.err(key, f"expected a string, got {type(v).__name__}", "bad_type")
    v = v.strip()
    if not v:
        raise ctx.err(key, "empty", f"missing_{key}")
    return v


def _row_to_example(
    row: Any, ctx: _Ctx, image_key: str, problem_key: str, answer_key: str, choices_key: str
) -> Example:
    if not isinstance(row, dict):
        raise ctx.err("<row>", f"expected an object, got {type(row).__name__}", "bad_type")

    raw_id = row.get("id")
    if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) and str(raw_id):
        ex_id = str(raw_id)
        ctx.row_id = ex_id
    else:
        ex_id = f"{Path(ctx.label).stem}-{ctx.idx}"

    problem = _text_field(row, problem_key, ctx, allow_number=False)
    answer = _text_field(row, answer_key, ctx, allow_number=True)

    raw_choices = row.get(choices_key)
    if raw_choices is None:
        choices: list[str] = []
    elif isinstance(raw_choices, (list, tuple)):
        choices = []
        for c in raw_choices:
            if isinstance(c, bool) or not isinstance(c, (str, int, float)):
                raise ctx.err(choices_key, f"choice of type {type(c).__name__}", "bad_type")
            choices.append(str(c).strip())
    else:
        raise ctx.err(choices_key, f"expected a list, got {type(raw_choices).__name__}", "bad_type")

    # Gold given as a letter: convert to the choice text (one convention).
    if choices and answer not in choices:
        m = _LETTER_RE.match(answer)
        if m:
            j = ord(m.group(1).upper()) - ord("A")
            if 0 <= j < len(choices):
                answer = choices[j]
            else:
                raise ctx.err(
                    answer_key, f"letter {answer!r} out of range for {len(choices)} choices", "bad_answer"
                )

    raw_images = row.get(image_key)
    if raw_images is None:
        values: list[Any] = []
    elif isinstance(raw_images, (list, tuple)):
        values = list(raw_images)
    else:
        values = [raw_images]
    images = [_load_image(v, ctx, image_key, k) for k, v in enumerate(values)]

    n_ph = problem.count(IMAGE_PLACEHOLDER)
    if images and n_ph == 0:
        problem = IMAGE_PLACEHOLDER * len(images) + problem
    elif n_ph != len(images):
        raise ctx.err(
            problem_key if images else image_key,
            f"problem has {n_ph} {IMAGE_PLACEHOLDER} placeholder(s) but the row has {len(images)} image(s)",
            "placeholder_mismatch",
        )

    solution = row.get("solution")
    if solution is not None and not isinstance(solution, str):
        raise ctx.err("solution", f"expected a string, got {type(solution).__name__}", "bad_type")

    meta: dict[str, Any] = {}
    raw_meta = row.get("meta")
    if isinstance(raw_meta, dict):
        meta = dict(raw_meta)
    elif isinstance(raw_meta, str) and raw_meta:
        try:
            parsed = json.loads(raw_meta)
        except json.JSONDecodeError as e:
            raise ctx.err("meta", f"invalid JSON string: {e.msg}", "bad_type") from e
        if not isinstance(parsed, dict):
            raise ctx.err("meta", f"expected an object, got {type(parsed).__name__}", "bad_type")
        meta = parsed
    elif raw_meta is not None:
        raise ctx.err("meta", f"expected an object, got {type(raw_meta).__name__}", "bad_type")

    return Example(
        id=ex_id,
        problem=problem,
        answer=answer,
        choices=choices,
        images=images,
        solution=solution,
        meta=meta,
    )


# --------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------


def load_geometry3k(
    source: str | Path,
    split: str | None = None,
    skip_bad: bool = False,
    image_key: str = "images",
    problem_key: str = "problem",
    answer_key: str = "answer",
    choices_key: str = "choices",
) -> tuple[list[Example], dict[str, Any]]:
    """Load Geometry3K-schema rows from a file or directory.

    Returns ``(examples, stats)`` with ``stats = {"rows", "loaded",
    "skipped", "skipped_by_reason", "files"}``.  Without ``skip_bad`` the
    first bad row raises :class:`DataError`; with it, bad rows (including
    invalid JSON lines) are skipped and counted by reason.  Problems that
    reference their image without an ``"<image>"`` placeholder get one
    prepended; a letter gold answer is replaced by the choice text.
    """
    src = Path(source)
    if not src.exists():
        raise FileNotFoundError(f"{src}: no such file or directory")
    if src.is_dir() and not is_saved_dataset(src) and split is not None and (src / split).is_dir() and not any(
        (src / n).is_file() for n in (f"{split}.jsonl", f"{split}.parquet", f"{split}.json")
    ):
        return load_geometry3k(src / split, None, skip_bad, image_key, problem_key, answer_key, choices_key)

    examples: list[Example] = []
    labels: list[str] = []
    n_rows = 0
    reasons: Counter[str] = Counter()
    for ref in iter_rows(src, split):
        if not labels or labels[-1] != ref.label:
            labels.append(ref.label)
        n_rows += 1
        try:
            if isinstance(ref.row, DataError):
                raise ref.row
            ctx = _Ctx(ref.label, ref.base, ref.index, ref.line, None)
            examples.append(_row_to_example(ref.row, ctx, image_key, problem_key, answer_key, choices_key))
        except DataError as e:
            if not skip_bad:
                raise
            reasons[e.reason or "other"] += 1

    stats = {
        "rows": n_rows,
        "loaded": len(examples),
        "skipped": sum(reasons.values()),
        "skipped_by_reason": dict(sorted(reasons.items())),
        "files": labels,
    }
    return examples, stats
