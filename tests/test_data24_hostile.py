"""Data loading under hostile files (data24): each bad input is a clear DataError naming the file, the row and the
field (or a counted skip), and loading a set keeps memory bounded."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from PIL import Image

from mmevo.data.geometry3k import load_geometry3k
from mmevo.data.schema import DataError

REPO = Path(__file__).resolve().parents[1]


def _rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_training_images_are_fitted_as_they_decode_so_memory_holds_no_full_size_set(tmp_path):
    # 24 PNGs of 2500x2500 decode to ~450 MB of RGB at full size; max_pixels=65536 keeps each under 200 kB. Fitted
    # only after the whole set was decoded, peak memory grew by the full-size set.
    for k in range(24):
        Image.new("RGB", (2500, 2500), (k, 0, 0)).save(tmp_path / f"{k}.png")
    _rows(tmp_path / "train.jsonl", [{"id": k, "problem": "<image>How many?", "answer": "3", "images": [f"{k}.png"]}
                                     for k in range(24)])
    script = textwrap.dedent(f"""
        import json, resource
        from mmevo.config import load_config
        from mmevo.recipes import load_examples
        cfg = load_config(None, ["data.train={tmp_path / 'train.jsonl'}", "data.max_pixels=65536"])
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rows, _ = load_examples(cfg, "train")
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(json.dumps([len(rows), sorted({{im.size for ex in rows for im in ex.images}}), grown // 1024]))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                         env={"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    n, sizes, grown_mib = json.loads(out.stdout.splitlines()[-1])
    assert n == 24 and sizes == [[256, 256]]
    assert grown_mib < 150, f"peak memory grew by {grown_mib} MiB while loading (full-size set ~450 MiB)"


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_a_gzip_file_under_a_json_name_is_named_as_gzip_even_when_skipping_bad_rows(tmp_path, suffix):
    # before: jsonl read the compressed bytes as lines ("invalid UTF-8" at line 1; under skip_bad one counted
    # invalid_json skip per stretch between newline bytes), json said "'utf-8' codec can't decode byte 0x8b"
    import gzip

    row = {"id": 1, "problem": "q", "answer": "3"}
    path = tmp_path / f"train{suffix}"
    path.write_bytes(gzip.compress(json.dumps(row if suffix == ".jsonl" else [row]).encode() * 50))
    for skip in (False, True):
        with pytest.raises(DataError, match=rf"train{suffix}: the file is gzip-compressed, not JSON text") as e:
            load_geometry3k(path, skip_bad=skip)
        assert e.value.file == str(path) and e.value.reason == "unsupported_file"


@pytest.mark.parametrize("content, cause", [(b"", r"empty \(0 bytes\)"),
                                            (b"%!PS-Adobe-3.0 EPSF-3.0\n", r"not an image in a format read here "
                                             r"\(PNG, JPEG, .*\); it starts with b'%!PS-Adobe")])
def test_an_empty_or_unknown_image_file_says_what_it_is(tmp_path, content, cause):
    # before: "cannot identify image file <_io.BytesIO object at 0x7f...>" for both, a memory address, no cause
    (tmp_path / "fig.png").write_bytes(content)
    _rows(tmp_path / "d.jsonl", [{"id": "a", "problem": "<image>q", "answer": "3", "images": ["fig.png"]}])
    with pytest.raises(DataError, match=r"d\.jsonl:1 \(row 0, id 'a'\): field 'images': image 0: cannot decode image "
                       rf"bytes of file .*fig\.png: {cause}") as e:
        load_geometry3k(tmp_path / "d.jsonl")
    assert "BytesIO" not in str(e.value) and e.value.reason == "image_corrupt"
    exs, stats = load_geometry3k(tmp_path / "d.jsonl", skip_bad=True)
    assert exs == [] and stats["skipped_by_reason"] == {"image_corrupt": 1}


def _mathvision_dir(tmp_path: Path, **change) -> Path:
    (tmp_path / "images").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "images" / "1.jpg")
    row = {"id": "1", "question": "<image1> Which?", "options": ["a", "b"], "answer": "A", "image": "images/1.jpg",
           "subject": "algebra", "level": 1, **change}
    return _rows(tmp_path / "testmini.jsonl", [row]).parent


def _mathvista_dir(tmp_path: Path, **change) -> Path:
    row = {"question": "How many?", "image": "1.jpg", "choices": None, "unit": None, "precision": None,
           "answer": "3", "question_type": "free_form", "answer_type": "integer", "metadata": {}, **change}
    Image.new("RGB", (8, 8)).save(tmp_path / "1.jpg")
    (tmp_path / "testmini.json").write_text(json.dumps({"1": row}))
    return tmp_path


@pytest.mark.parametrize("make, fmt, where", [(_mathvision_dir, "mathvision", r"testmini\.jsonl:1 \(row 0, id '1'\)"),
                                              (_mathvista_dir, "mathvista", r"testmini\.json row 0 \(id '1'\)")])
@pytest.mark.parametrize("question", ["", "   "])
def test_an_empty_benchmark_question_is_an_error_or_a_counted_skip(tmp_path, make, fmt, where, question):
    # before: loaded; MATH-V asked about the image and its options alone, MathVista asked "Question: " of the model
    from mmevo.data.benchmarks import load_items

    src = make(tmp_path, question=question)
    with pytest.raises(DataError, match=rf"{where}: field 'question': empty") as e:
        load_items(fmt, src, "testmini")
    assert e.value.field == "question" and e.value.row_id == "1"
    items, stats = load_items(fmt, src, "testmini", skip_bad=True)
    assert items == [] and stats["skipped_by_reason"] == {"missing_question": 1}


@pytest.mark.parametrize("unit", [["cm"], {"u": "cm"}, True])
def test_a_mathvista_unit_that_is_no_text_is_an_error(tmp_path, unit):
    # before: the prompt read "Question: How many? (Unit: ['cm'])"
    from mmevo.data.benchmarks import load_items

    with pytest.raises(DataError, match=r"testmini\.json row 0 \(id '1'\): field 'unit': expected a string, got"):
        load_items("mathvista", _mathvista_dir(tmp_path, unit=unit), "testmini")
    (tmp_path / "ok").mkdir()
    items, _ = load_items("mathvista", _mathvista_dir(tmp_path / "ok", unit=2), "testmini")  # a number is a unit
    assert "Question: How many? (Unit: 2)" in items[0].problem


def test_a_huge_file_named_as_an_image_is_refused_without_reading_it_whole(tmp_path):
    # a 1 GiB sparse file (no disk used) holding a PNG signature: before, the loader read all of it into memory
    # before Pillow looked at its header (peak memory +1 GiB); decoded from the file handle, only the header is read
    with open(tmp_path / "fig.png", "wb") as fh:
        fh.write(b"\x89PNG\r\n\x1a\n")
        fh.truncate(1 << 30)
    _rows(tmp_path / "d.jsonl", [{"id": "a", "problem": "<image>q", "answer": "3", "images": ["fig.png"]}])
    script = textwrap.dedent(f"""
        import json, resource
        from mmevo.data.geometry3k import load_geometry3k
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            load_geometry3k({str(tmp_path / 'd.jsonl')!r})
        except ValueError as e:
            err = str(e)
        print(json.dumps([err, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024]))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                         env={"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    err, grown_mib = json.loads(out.stdout.splitlines()[-1])
    assert "d.jsonl:1 (row 0, id 'a'): field 'images': image 0: cannot decode image bytes of file" in err
    assert grown_mib < 100, f"peak memory grew by {grown_mib} MiB refusing a 1 GiB non-image"


@pytest.mark.parametrize("problem", [5, 2.5])
def test_a_problem_that_is_a_number_is_an_error_naming_the_field(tmp_path, problem):
    # before: loaded as the problem text "5" (numbers are accepted where a gold is read, not where a question is)
    from mmevo.data.benchmarks import load_items

    _rows(tmp_path / "d.jsonl", [{"id": "a", "problem": problem, "answer": "3"}])
    with pytest.raises(DataError, match=r"d\.jsonl:1 \(row 0, id 'a'\): field 'problem': expected a string, got"):
        load_geometry3k(tmp_path / "d.jsonl")
    assert load_geometry3k(tmp_path / "d.jsonl", skip_bad=True)[1]["skipped_by_reason"] == {"bad_type": 1}
    (tmp_path / "mv").mkdir()
    with pytest.raises(DataError, match=r"field 'question': expected a string, got"):
        load_items("mathvision", _mathvision_dir(tmp_path / "mv", question=problem), "testmini")
