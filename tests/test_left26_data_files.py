"""Data files read with bounded memory, and paths that are no regular file refused before anything blocks on them."""

import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from mmevo.data import sources
from mmevo.data.benchmarks import load_items
from mmevo.data.schema import DataError

ROOT = Path(__file__).resolve().parent.parent
CAP = 64 << 20  # the documented per-line cap


def _row(i: int) -> bytes:
    return (json.dumps({"id": f"r{i}", "problem": "1 + 1?", "answer": "2"}) + "\n").encode()


def _with_long_line(path: Path, length: int) -> Path:
    """Row r0, a newline-free run of ``length`` NUL bytes (sparse: no disk), its newline, then row r1."""
    with open(path, "wb") as f:
        f.write(_row(0))
        f.seek(length, os.SEEK_CUR)
        f.write(b"\n" + _row(1))
    return path


def test_a_line_over_the_cap_is_an_error_naming_the_file_and_line(tmp_path):
    path = _with_long_line(tmp_path / "train.jsonl", CAP + 1)
    with pytest.raises(DataError, match=rf"train.jsonl:2 \(row 1\): line longer than 64 MiB") as e:
        load_items("generic", path)
    assert e.value.reason == "line_too_long" and e.value.row == 1


def test_a_line_over_the_cap_is_a_counted_skip_and_the_rows_after_it_load(tmp_path):
    items, stats = load_items("generic", _with_long_line(tmp_path / "train.jsonl", CAP + 1), skip_bad=True)
    assert [it.id for it in items] == ["r0", "r1"] and [it.line for it in items] == [1, 3]
    assert stats["skipped_by_reason"] == {"line_too_long": 1} and stats["rows"] == 3


def test_a_line_of_exactly_the_cap_is_read(tmp_path):
    path = tmp_path / "train.jsonl"
    row = json.dumps({"id": "big", "problem": "q", "answer": "2"}).encode()
    with open(path, "wb") as f:  # the row, then blanks up to the cap, then its newline: one line of cap bytes
        f.write(row + b" " * (CAP - len(row)) + b"\n" + _row(1))
    items, _ = load_items("generic", path)
    assert [it.id for it in items] == ["big", "r1"]


def test_a_newline_free_jsonl_is_refused_with_bounded_memory(tmp_path):
    path = tmp_path / "dump.jsonl"
    with open(path, "wb") as f:
        f.truncate(4 * CAP)  # 256 MiB, no newline (sparse)
    code = ("import resource, sys\nfrom mmevo.data.benchmarks import load_items\n"
            "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "try:\n    load_items('generic', sys.argv[1])\nexcept ValueError as e:\n    print(e)\n"
            "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.splitlines()
    assert out[0].endswith("dump.jsonl:1 (row 0): line longer than 64 MiB: not one row (a file without newlines?)")
    assert int(out[1]) < 3 * (CAP >> 20)  # MiB grown: the cap and a copy, not the 256 MiB line (read whole: > 512)


def test_a_json_file_over_its_cap_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "train.json"
    with open(path, "wb") as f:
        f.truncate((512 << 20) + 1)  # the documented .json cap, plus one byte
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(DataError, match=r"train.json: 536870913 bytes, over the 512 MiB a .json file may have") as e:
        load_items("generic", path)
    assert e.value.reason == "file_too_large"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 << 10  # KiB: nothing was read


@pytest.mark.parametrize("make", ["fifo", "device"])
def test_a_data_path_that_is_a_fifo_or_device_is_refused_by_name(tmp_path, make):
    if make == "fifo":
        path = tmp_path / "train.jsonl"
        os.mkfifo(path)
        kind = "a FIFO (named pipe)"
    else:
        path, kind = Path(os.devnull), "a character device"
    with pytest.raises(DataError, match=f"^{re.escape(f'{path}: is {kind}, not a data file or directory')}$") as e:
        load_items("generic", path)
    assert e.value.reason == "not_a_file"


def test_a_fifo_named_as_a_directorys_split_file_is_refused_by_name(tmp_path):
    os.mkfifo(tmp_path / "train.jsonl")
    where = re.escape(str(tmp_path / "train.jsonl"))
    with pytest.raises(DataError, match=rf"^{where}: is a FIFO \(named pipe\), not a regular data file$"):
        load_items("generic", tmp_path, "train")


def test_open_regular_refuses_a_fifo_without_blocking(tmp_path):
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)  # no writer: a plain open() would wait for one forever
    with pytest.raises(DataError, match=r"rows.jsonl: is a FIFO \(named pipe\), not a regular file"):
        sources.open_regular(fifo, str(fifo))
    with pytest.raises(DataError, match=r"is a directory, not a regular file"):
        sources.open_regular(tmp_path, str(tmp_path))


def test_an_image_path_that_is_a_fifo_is_refused_by_name(tmp_path):
    os.mkfifo(tmp_path / "fig.png")
    (tmp_path / "train.jsonl").write_text(json.dumps({"id": "a", "problem": "q", "answer": "1",
                                                      "images": ["fig.png"]}) + "\n")
    with pytest.raises(DataError, match=r"train.jsonl:1 \(row 0, id 'a'\): field 'images': image file fig.png is a "
                                        r"FIFO \(named pipe\) \(.*fig.png\), not a regular file"):
        load_items("generic", tmp_path / "train.jsonl")
    _, stats = load_items("generic", tmp_path / "train.jsonl", skip_bad=True)
    assert stats["skipped_by_reason"] == {"image_missing": 1}


def test_an_image_replaced_by_a_fifo_after_loading_is_refused_when_decoded(tmp_path):
    Image.new("RGB", (32, 32)).save(tmp_path / "fig.png")
    (tmp_path / "train.jsonl").write_text(json.dumps({"id": "a", "problem": "q", "answer": "1",
                                                      "images": ["fig.png"]}) + "\n")
    items, _ = load_items("generic", tmp_path / "train.jsonl")
    (tmp_path / "fig.png").unlink()
    os.mkfifo(tmp_path / "fig.png")
    with pytest.raises(DataError, match=r"image 0: cannot decode image bytes of file .*fig.png: .*is a FIFO"):
        items[0].load_images()
