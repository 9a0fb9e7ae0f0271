"""Where rows come from: a local file, a local directory, a ``datasets`` folder or a hub dataset name.

:func:`iter_rows` hides the storage layout from the adapters in :mod:`mmevo.data.benchmarks`: each yields
``RowRef(label, base, index, line, row)`` where ``row`` is a plain dict (or a :class:`DataError` for a line that is
not valid JSON), ``label`` names the file for error messages and ``base`` is the directory relative image paths are
resolved against.  Local paths always work; a name that is not a local path is loaded with
``datasets.load_dataset`` (which needs the hub, or its cache).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .schema import DataError

__all__ = ["RowRef", "iter_rows", "is_saved_dataset", "looks_like_hub_name", "open_regular", "read_json_bytes",
           "special_file_kind", "MAX_JSONL_LINE_BYTES", "MAX_JSON_FILE_BYTES"]

# A jsonl line is one row: 64 MiB holds a row with several base64-encoded images. A longer "line" is no row (a
# file without newlines, a binary dump) and was read whole into memory before any error (2.3 GB for a 1 GiB line).
MAX_JSONL_LINE_BYTES = 64 << 20
# A .json file is parsed whole (json reads all of it): larger data belongs in .jsonl or .parquet, read row by row.
MAX_JSON_FILE_BYTES = 512 << 20
_SKIP_CHUNK_BYTES = 1 << 20  # the rest of an over-long line is read past in chunks of this size, never held


# --------------------------------------------------------------------------
# Files that are not regular files
# --------------------------------------------------------------------------

_SPECIAL_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind_of_mode(mode: int) -> str | None:
    return next((name for test, name in _SPECIAL_KINDS if test(mode)), None)


def special_file_kind(path: Path) -> str | None:
    """What ``path`` is when it exists and is neither a regular file nor a directory ("a FIFO (named pipe)", "a
    character device", ...), else None: reading a FIFO blocks until some writer appears, a device never ends."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return _kind_of_mode(mode)


def open_regular(path: Path, label: str):
    """``path`` opened for binary reading, refused (a DataError naming ``label``) unless it is a regular file.

    Opened without blocking and checked on the open handle: a FIFO put at the path after any earlier check would
    otherwise block the open (and the read) until a writer came."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise DataError(f"{label}: cannot open: {e}", file=label, reason="unreadable_file") from e
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = "a directory" if stat.S_ISDIR(mode) else _kind_of_mode(mode) or "not a regular file"
        raise DataError(f"{label}: is {what}, not a regular file", file=label, reason="not_a_file")
    return os.fdopen(fd, "rb")


def read_json_bytes(path: Path, label: str) -> bytes:
    """The bytes of the .json file ``path``, refused above ``MAX_JSON_FILE_BYTES`` before they are read."""
    def too_large(size: int) -> DataError:
        return DataError(f"{label}: {size} bytes, over the {MAX_JSON_FILE_BYTES >> 20} MiB a .json file may have (it "
                         "is parsed whole); write the rows as .jsonl (one a line) or .parquet", file=label,
                         reason="file_too_large")

    with open_regular(path, label) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_JSON_FILE_BYTES:
            raise too_large(size)
        try:
            raw = fh.read(MAX_JSON_FILE_BYTES + 1)  # bounded even if the file grew since its size was read
        except OSError as e:
            raise DataError(f"{label}: cannot read: {e}", file=label, reason="unreadable_file") from e
    if len(raw) > MAX_JSON_FILE_BYTES:
        raise too_large(len(raw))
    return raw


# --------------------------------------------------------------------------
# Layouts
# --------------------------------------------------------------------------


def is_saved_dataset(d: Path) -> bool:
    return (d / "dataset_dict.json").is_file() or (
        (d / "state.json").is_file() and (d / "dataset_info.json").is_file()
    )


def _resolve_files(src: Path, split: str | None) -> list[Path]:
    """Data files for a directory source (not a saved ``datasets`` folder)."""
    tried: list[str] = []

    def first(names: list[str]) -> list[Path]:
        for name in names:
            tried.append(name)
            p = src / name
            if p.is_file():
                return [p]
            if (kind := special_file_kind(p)) is not None:  # "not found" sent one looking for a file that is there
                raise DataError(f"{p}: is {kind}, not a regular data file", file=str(p), reason="not_a_file")
        return []

    if split is not None:
        found = first([f"{split}.jsonl", f"{split}.parquet", f"{split}.json"])
        if found:
            return found
        for pattern in (f"data/{split}-*.parquet", f"{split}-*.parquet"):
            tried.append(pattern)
            shards = sorted(src.glob(pattern))
            if shards:
                return shards
    found = first(["data.jsonl", "data.parquet", "data.json"])
    if found and split is None:
        return found
    if found:
        # A flat data.* file without split information; only accept it when
        # the caller asked for no particular split.
        tried.append("(data.* ignored because split was given)")
    # what the directory does hold: a data file under another name is named, so is a folder of images alone
    entries = list(src.iterdir())
    here = sorted(p.name for p in entries if p.suffix.lower() in (".jsonl", ".json", ".parquet"))
    if here:
        hint = (f"; it holds {', '.join(here[:6])}{' ...' if len(here) > 6 else ''}: name the file, or DIR@SPLIT "
                "for SPLIT.jsonl / .parquet / .json")
    elif any((p / "data.json").is_file() for p in entries if p.is_dir()):
        hint = "; its sub-folders hold data.json: Geometry3K's InterGPS layout is read with data.format=intergps"
    elif any(p.suffix.lower() in (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp") for p in entries):
        hint = ("; it holds images but no .jsonl / .json / .parquet file (a folder of images alone is no data: "
                "list each image with its problem and answer in a .jsonl)")
    else:
        hint = "; it holds no .jsonl / .json / .parquet file"
    what = f" for split {split!r}" if split is not None else ""  # not "for split None"
    raise FileNotFoundError(f"{src}: no data file found{what} (tried: {', '.join(tried)}){hint}")


# --------------------------------------------------------------------------
# Readers: each yields (row_index, line_number_or_None, row_or_DataError)
# --------------------------------------------------------------------------

_Row = tuple[int, "int | None", Any]


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    """A JSON object whose keys are unique: ``json`` would keep the last of two "answer" fields, or of two rows
    under one id in an id -> row file, without a word."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"duplicate key {dup!r}")
    return obj


# leading bytes of binary files that are no JSON text: a compressed export keeping its .jsonl / .json name was read as
# text, one undecodable "row" per stretch between newline bytes (each a counted invalid_json skip under skip_bad_rows)
_BINARY_MAGIC = ((b"\x1f\x8b", "gzip-compressed"), (b"(\xb5/\xfd", "zstd-compressed"), (b"BZh", "bzip2-compressed"),
                 (b"\xfd7zXZ\x00", "xz-compressed"), (b"PK\x03\x04", "a zip archive"), (b"PAR1", "a parquet file"))


def _refuse_binary(head: bytes, label: str) -> None:
    """A DataError naming what ``label`` is when its first bytes are a compressed / binary format's, not JSON."""
    what = next((name for magic, name in _BINARY_MAGIC if head.startswith(magic)), None)
    if what is not None:
        fix = "name it .parquet" if what == "a parquet file" else "decompress it"
        raise DataError(f"{label}: the file is {what}, not JSON text; {fix}", file=label, reason="unsupported_file")


def _bounded_lines(fh) -> Iterator[bytes | None]:
    """The lines of ``fh``, each None when longer than ``MAX_JSONL_LINE_BYTES`` (its rest is read past in chunks):
    memory stays bounded by the cap, whatever the file holds."""
    cap = MAX_JSONL_LINE_BYTES
    while raw := fh.readline(cap + 1):
        if len(raw) <= cap or raw.endswith(b"\n"):  # cap bytes and their newline is a line within the cap
            yield raw
            continue
        while raw and not raw.endswith(b"\n"):
            raw = fh.readline(_SKIP_CHUNK_BYTES)
        yield None


def _read_jsonl(path: Path, label: str) -> Iterator[_Row]:
    fh = open_regular(path, label)
    idx = 0
    with fh:
        _refuse_binary(fh.read(8), label)
        fh.seek(0)
        for lineno, raw in enumerate(_bounded_lines(fh), start=1):
            if raw is None:  # a row of its own: counted under skip_bad_rows as an unparsable line is
                yield idx, lineno, DataError(
                    f"{label}:{lineno} (row {idx}): line longer than {MAX_JSONL_LINE_BYTES >> 20} MiB: not one row "
                    "(a file without newlines?)", file=label, row=idx, reason="line_too_long")
                idx += 1
                continue
            if not raw.strip():
                continue
            row: Any
            try:
                # a leading BOM is allowed (RFC 8259, section 8.1)
                row = json.loads(raw.decode("utf-8-sig"), object_pairs_hook=_unique_keys)
            except UnicodeDecodeError as e:
                row = DataError(
                    f"{label}:{lineno} (row {idx}): invalid UTF-8: {e.reason}",
                    file=label, row=idx, reason="invalid_json",
                )
            except json.JSONDecodeError as e:
                row = DataError(
                    f"{label}:{lineno} (row {idx}): invalid JSON: {e.msg} at column {e.colno}",
                    file=label, row=idx, reason="invalid_json",
                )
            except (ValueError, RecursionError) as e:  # a repeated key, an integer of over 4300 digits, deep nesting
                row = DataError(f"{label}:{lineno} (row {idx}): invalid JSON: {e}", file=label, row=idx,
                                reason="invalid_json")
            yield idx, lineno, row
            idx += 1


def _read_json(path: Path, label: str, split: str | None, id_key: str | None) -> Iterator[_Row]:
    """A JSON list of rows, ``{split: [rows]}`` / ``{"data": [rows]}``, or (with ``id_key``) a mapping
    ``id -> row`` whose key becomes the row's ``id_key`` (MathVista's testmini.json)."""
    raw = read_json_bytes(path, label)
    _refuse_binary(raw[:8], label)
    try:
        # a leading BOM is allowed (RFC 8259, section 8.1)
        data = json.loads(raw.decode("utf-8-sig"), object_pairs_hook=_unique_keys)
    except UnicodeDecodeError as e:
        raise DataError(f"{label}: cannot read: {e}", file=label, reason="unreadable_file") from e
    except json.JSONDecodeError as e:
        raise DataError(f"{label}:{e.lineno}: invalid JSON: {e.msg} at column {e.colno}", file=label,
                        reason="invalid_json") from e
    except (ValueError, RecursionError) as e:  # a repeated key, an integer of over 4300 digits, deep nesting
        raise DataError(f"{label}: invalid JSON: {e}", file=label, reason="invalid_json") from e
    if isinstance(data, dict):
        key = split if split is not None and split in data else ("data" if "data" in data else None)
        if key is not None and isinstance(data[key], list):
            data = data[key]
        elif key is None and id_key and data and all(isinstance(v, dict) for v in data.values()):
            for k, v in data.items():  # else the row would take another row's id (and MathVista's prompt by id)
                if id_key in v and str(v[id_key]) != k:
                    raise DataError(f"{label}: the row under key {k!r} has {id_key} {v[id_key]!r}", file=label,
                                    field=id_key, reason="bad_value", row_id=k)
            data = [{id_key: k, **v} if id_key not in v else v for k, v in data.items()]
        else:
            raise DataError(f"{label}: expected a JSON list of rows (or an object with a {split or 'data'!r} list), "
                            f"got an object with keys {sorted(data)[:8]}", file=label, reason="bad_type")
    if not isinstance(data, list):
        raise DataError(f"{label}: expected a JSON list of rows, got {type(data).__name__}", file=label,
                        reason="bad_type")
    for i, row in enumerate(data):
        yield i, None, row


def _read_parquet(path: Path, label: str) -> Iterator[_Row]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as e:  # pyarrow raises several types for corrupt files
        raise DataError(f"{label}: cannot read parquet: {e}", file=label, reason="unreadable_file") from e
    yield from _batched_rows(pf.iter_batches(batch_size=256), label, "parquet")


def _batched_rows(batches, label: str, what: str) -> Iterator[_Row]:
    """Rows of arrow record batches / tables; a batch that fails to read (a corrupt page in the middle of a file)
    raises a DataError naming the file and the first row it holds."""
    idx = 0
    while True:
        try:
            batch = next(batches, None)
        except Exception as e:
            raise DataError(f"{label}: cannot read {what} from row {idx} on: {e}", file=label, row=idx,
                            reason="unreadable_file") from e
        if batch is None:
            return
        try:
            batch = _exact_floats(batch)
        except Exception as e:
            raise DataError(f"{label}: cannot read {what} from row {idx} on: {e}", file=label, row=idx,
                            reason="unreadable_file") from e
        try:
            rows = batch.to_pylist()
        except Exception:  # e.g. a string column holding bytes that are not UTF-8: found row by row
            rows = [_row_or_error(batch, i, idx + i, label) for i in range(batch.num_rows)]
        for row in rows:
            yield idx, None, row
            idx += 1


def _row_or_error(batch, i: int, idx: int, label: str) -> dict | DataError:
    """Row ``i`` of ``batch``, or a DataError naming the first column whose value does not convert."""
    row = {}
    for name, col in zip(batch.schema.names, batch.columns):
        try:
            row[name] = col.slice(i, 1).to_pylist()[0]
        except Exception as e:
            return DataError(f"{label} row {idx}: field {name!r}: cannot read: {e}", file=label, row=idx, field=name,
                             reason="invalid_utf8" if isinstance(e, UnicodeDecodeError) else "unreadable_row")
    return row


def _float32_as(t, to):
    """``t`` with every float32 replaced by ``to`` (inside lists and structs too); None when ``t`` holds none."""
    import pyarrow as pa

    if pa.types.is_float32(t):
        return to
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        inner = _float32_as(t.value_type, to)
        return None if inner is None else (pa.list_ if pa.types.is_list(t) else pa.large_list)(inner)
    if pa.types.is_fixed_size_list(t):  # numpy-shaped exports write fixed-size lists
        inner = _float32_as(t.value_type, to)
        return None if inner is None else pa.list_(inner, t.list_size)
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        inner = [_float32_as(f.type, to) for f in fields]
        if all(x is None for x in inner):
            return None
        return pa.struct([f.with_type(x if x is not None else f.type) for f, x in zip(fields, inner)])
    return None


def _exact_floats(batch):
    """float32 columns as the float64 of their shortest decimal: ``to_pylist`` widens a float32 0.1 to
    0.10000000149011612, which would become the gold (or choice) text "0.10000000149011612"."""
    import pyarrow as pa

    arrays, changed = [], False
    for col in batch.columns:
        as_text = _float32_as(col.type, pa.string())  # arrow writes a float32 as its shortest round-trip decimal
        if as_text is not None:
            col, changed = col.cast(as_text).cast(_float32_as(col.type, pa.float64())), True
        elif pa.types.is_float16(col.type):  # arrow writes a half float with float64's digits (0.0999755859375)
            import numpy as np

            col = pa.array([None if v is None else float(str(np.float16(v))) for v in col.to_pylist()], pa.float64())
            changed = True
        arrays.append(col)
    return type(batch).from_arrays(arrays, names=batch.schema.names) if changed else batch


def _arrow_rows(ds, label: str) -> Iterator[_Row]:
    # Arrow format keeps images as raw {"bytes", "path"} structs: decoding (and its errors) stays with the
    # adapters, row by row.
    yield from _batched_rows(iter(ds.with_format("arrow").iter(batch_size=256)), label, "dataset")


def _read_saved_dataset(path: Path, label: str, split: str | None) -> tuple[Iterator[_Row], str]:
    import datasets

    try:
        ds = datasets.load_from_disk(str(path))
    except Exception as e:  # a broken state.json / dataset_info.json, a missing or truncated .arrow file
        raise DataError(f"{label}: cannot load the saved dataset: {type(e).__name__}: {e}", file=label,
                        reason="unreadable_file") from e
    if isinstance(ds, datasets.DatasetDict):
        if split is None:
            if len(ds) == 1:
                split = next(iter(ds))
            elif "train" in ds:
                split = "train"
            else:
                raise DataError(
                    f"{label}: DatasetDict with splits {sorted(ds)}; pass split=", file=label, reason="bad_split"
                )
        if split not in ds:
            raise DataError(f"{label}: no split {split!r} (have {sorted(ds)})", file=label, reason="bad_split")
        ds = ds[split]
        label = f"{label}[{split}]"
    return _arrow_rows(ds, label), label


def _read_hub(name: str, split: str | None) -> tuple[Iterator[_Row], str]:
    try:
        import datasets

        ds = datasets.load_dataset(name, split=split or "train")
    except Exception as e:  # offline, unknown name, missing split: all mean "not loadable from the hub"
        raise FileNotFoundError(
            f"{name!r} is not a local file or directory, and loading it from the hub failed "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); pass a local path instead") from e
    label = f"{name}[{split or 'train'}]"
    return _arrow_rows(ds, label), label


# --------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------


@dataclass
class RowRef:
    label: str  # file (or dataset) name used in error messages
    base: Path  # directory relative image paths are resolved against
    index: int  # 0-based row index within ``label``
    line: int | None  # 1-based line number for jsonl files
    row: Any  # the row (a dict when well formed) or a DataError for an unparsable line


def looks_like_hub_name(source: str) -> bool:
    """``owner/name`` with no local file or directory of that name."""
    parts = str(source).split("/")
    return len(parts) == 2 and all(parts) and not Path(source).exists() and not str(source).startswith(".")


def _file_rows(path: Path, split: str | None, id_key: str | None) -> Iterator[_Row]:
    label = str(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _read_jsonl(path, label)
    if suffix == ".json":
        return _read_json(path, label, split, id_key)
    if suffix == ".parquet":
        return _read_parquet(path, label)
    raise DataError(f"{label}: unsupported file type {path.suffix!r} (expected .jsonl, .json or .parquet)",
                    file=label, reason="unsupported_file")


def iter_rows(source: str | Path, split: str | None = None, names: tuple[str, ...] = (), id_key: str | None = None,
              opened: list[str] | None = None) -> Iterator[RowRef]:
    """Rows of ``source``: a .jsonl / .json / .parquet file; a directory (``names`` are tried first, then
    ``{split}.jsonl|parquet|json``, hub shards ``data/{split}-*.parquet``, ``data.*``); a ``save_to_disk``
    folder; or a hub dataset name.  Each file (or dataset) read is appended to ``opened`` when given."""
    src = Path(source)
    sources: list[tuple[Iterator[_Row], str, Path]] = []
    if not src.exists():
        if not looks_like_hub_name(str(source)):
            raise FileNotFoundError(f"{src}: no such file or directory")
        it, label = _read_hub(str(source), split)
        sources.append((it, label, Path(".")))
    elif src.is_file():
        sources.append((_file_rows(src, split, id_key), str(src), src.parent))
    elif (kind := special_file_kind(src)) is not None:  # was read as a directory: "no data file found (tried ...)"
        raise DataError(f"{src}: is {kind}, not a data file or directory", file=str(src), reason="not_a_file")
    elif is_saved_dataset(src):
        it, label = _read_saved_dataset(src, str(src), split)
        sources.append((it, label, src))
    else:
        files = [src / n for n in names if (src / n).is_file()][:1] or _resolve_files(src, split)
        sources += [(_file_rows(f, split, id_key), str(f), f.parent) for f in files]
    for it, label, base in sources:
        if opened is not None:
            opened.append(label)
        for idx, line, row in it:
            yield RowRef(label, base, idx, line, row)
