"""Tests for the embedded synthetic geometry data and the Geometry3K loader."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from PIL import Image

from mmevo.data.geometry3k import load_geometry3k
from mmevo.data.schema import DataError, Example
from mmevo.data.synthetic import (
    KINDS,
    image_to_png_bytes,
    generate_geometry,
    split_train_heldout,
    write_hub_jsonl,
    write_hub_parquet,
)

BOXED = re.compile(r"^<think>(.+)</think> \\boxed\{([^{}]+)\}$")


def _png_bytes(ex: Example) -> list[bytes]:
    return [image_to_png_bytes(im) for im in ex.images]


def _same(a: Example, b: Example) -> bool:
    return (
        a.id == b.id
        and a.problem == b.problem
        and a.answer == b.answer
        and a.choices == b.choices
        and a.solution == b.solution
        and a.meta == b.meta
        and len(a.images) == len(b.images)
        and all(x.size == y.size and x.tobytes() == y.tobytes() for x, y in zip(a.images, b.images))
    )


@pytest.fixture(scope="module")
def many() -> list[Example]:
    return generate_geometry(600, seed=123)


# --------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------


def test_deterministic_same_seed_and_different_seed():
    a = generate_geometry(40, seed=7)
    b = generate_geometry(40, seed=7)
    assert all(_same(x, y) for x, y in zip(a, b))
    assert [_png_bytes(x) for x in a] == [_png_bytes(y) for y in b]
    c = generate_geometry(40, seed=8)
    assert [x.problem for x in a] != [x.problem for x in c]
    # a shorter run is a prefix of a longer one
    assert all(_same(x, y) for x, y in zip(generate_geometry(10, seed=7), a))


def test_basic_shape_of_examples(many):
    kinds = {ex.meta["kind"] for ex in many}
    assert kinds == set(KINDS)
    assert len({ex.id for ex in many}) == len(many)
    for ex in many:
        assert ex.problem.startswith("<image>") and ex.problem.count("<image>") == 1
        assert re.fullmatch(r"\d+", ex.answer) and int(ex.answer) > 0
        assert len(ex.images) == 1
        im = ex.images[0]
        assert im.mode == "RGB" and im.size == (56, 56)
        assert len(ex.problem) < 140
        m = BOXED.match(ex.solution)
        assert m, ex.solution
        assert m.group(2) == ex.answer
        assert ex.answer in m.group(1)  # the reasoning ends in the answer


# Hand-known formulas, recomputed from the numbers in the problem text.
FORMULAS = {
    "triangle_angle": (r"angle A = (\d+) and angle B = (\d+)\. Find angle C", lambda a, b: 180 - a - b),
    "supplementary_angle": (r"straight line\. Angle 1 = (\d+)", lambda a: 180 - a),
    "vertical_angles": (r"cross\. Angle 1 = (\d+)", lambda a: a),
    "complementary_angle": (r"complementary\. Angle 1 = (\d+)", lambda a: 90 - a),
    "isosceles_base_angle": (r"AB = AC\. Angle A = (\d+)", lambda a: (180 - a) // 2),
    "right_triangle_angle": (r"angle C = 90 and angle A = (\d+)", lambda a: 90 - a),
    "rectangle_perimeter": (r"width (\d+) and height (\d+)\. Find its perimeter", lambda w, h: 2 * (w + h)),
    "rectangle_area": (r"width (\d+) and height (\d+)\. Find its area", lambda w, h: w * h),
    "circle_central_angle": (r"inscribed angle ACB = (\d+)", lambda a: 2 * a),
    "circle_radius": (r"diameter (\d+)\. Find its radius", lambda d: d // 2),
    "square_side": (r"perimeter (\d+)\. Find its side", lambda p: p // 4),
}


def test_gold_answers_recomputed_from_text(many):
    checked = {k: 0 for k in KINDS}
    for ex in many:
        kind = ex.meta["kind"]
        if kind == "parallel_lines":
            a = int(re.search(r"Angle 1 = (\d+)", ex.problem).group(1))
            want = 180 - a if "co-interior" in ex.problem else a
        else:
            pattern, f = FORMULAS[kind]
            m = re.search(pattern, ex.problem)
            assert m, (kind, ex.problem)
            want = f(*map(int, m.groups()))
        assert ex.answer == str(want), ex.problem
        checked[kind] += 1
    assert all(v > 0 for v in checked.values())


ANGLE_KINDS = {
    "triangle_angle",
    "supplementary_angle",
    "vertical_angles",
    "complementary_angle",
    "parallel_lines",
    "isosceles_base_angle",
    "right_triangle_angle",
    "circle_central_angle",
}


def test_angles_are_multiples_of_five_and_sensible(many):
    for ex in many:
        if ex.meta["kind"] in ANGLE_KINDS:
            nums = [int(x) for x in re.findall(r"= (\d+)", ex.problem)]
            assert nums and all(n % 5 == 0 and 0 < n < 180 for n in nums), ex.problem
            assert int(ex.answer) % 5 == 0 and 0 < int(ex.answer) < 180


def test_multiple_choice_rows(many):
    mc = [ex for ex in many if ex.choices]
    free = [ex for ex in many if not ex.choices]
    assert 0.35 < len(mc) / len(many) < 0.65
    positions = set()
    for ex in mc:
        assert len(ex.choices) == 4 and len(set(ex.choices)) == 4
        assert ex.answer in ex.choices
        assert all(re.fullmatch(r"\d+", c) and int(c) > 0 for c in ex.choices)
        tail = " Choices: " + " ".join(f"{L}. {c}" for L, c in zip("ABCD", ex.choices))
        assert ex.problem.endswith(tail)
        letter = ex.meta["answer_letter"]
        assert ex.choices["ABCD".index(letter)] == ex.answer
        positions.add(letter)
    assert positions == set("ABCD")
    for ex in free:
        assert "Choices:" not in ex.problem and "answer_letter" not in ex.meta

    assert all(not ex.choices for ex in generate_geometry(30, seed=1, mc_fraction=0.0))
    assert all(len(ex.choices) == 4 for ex in generate_geometry(30, seed=1, mc_fraction=1.0))


def test_image_size_and_nonblank():
    for size in (24, 56, 112):
        for ex in generate_geometry(12, seed=5, image_size=size):
            im = ex.images[0]
            assert im.size == (size, size) and im.mode == "RGB"
            assert im.getextrema() != ((255, 255), (255, 255), (255, 255))  # something was drawn
            assert im.getpixel((0, 0)) == (255, 255, 255) or size < 40


def test_split_train_heldout_disjoint_and_deterministic():
    train, held = split_train_heldout(400, 120, seed=3)
    assert len(train) == 400 and len(held) == 120
    assert not {e.problem for e in train} & {e.problem for e in held}
    assert not {e.id for e in train} & {e.id for e in held}
    train2, held2 = split_train_heldout(400, 120, seed=3)
    assert all(_same(a, b) for a, b in zip(train + held, train2 + held2))
    # different derived seeds: the held-out stream is not the train stream
    assert [e.problem for e in held[:20]] != [e.problem for e in train[:20]]


def test_generation_validates_arguments():
    with pytest.raises(ValueError):
        generate_geometry(-1, seed=0)
    with pytest.raises(ValueError):
        generate_geometry(1, seed=0, mc_fraction=1.5)


# --------------------------------------------------------------------------
# Writers + loader round trips
# --------------------------------------------------------------------------


def test_jsonl_round_trip(tmp_path):
    exs = generate_geometry(30, seed=11)
    path = write_hub_jsonl(exs, tmp_path / "syn")
    assert path == tmp_path / "syn" / "data.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert set(rows[0]) >= {"id", "images", "problem", "answer", "choices", "solution"}
    assert rows[0]["images"] == [f"images/{exs[0].id}_0.png"]
    assert not [p for p in (tmp_path / "syn").rglob("*.tmp")]

    got, stats = load_geometry3k(tmp_path / "syn")
    assert stats["rows"] == stats["loaded"] == 30 and stats["skipped"] == 0
    assert all(_same(a, b) for a, b in zip(exs, got))
    # the file itself also works as the source
    got2, _ = load_geometry3k(path)
    assert all(_same(a, b) for a, b in zip(exs, got2))


def test_parquet_round_trip(tmp_path):
    exs = generate_geometry(25, seed=12)
    p = write_hub_parquet(exs, tmp_path / "hub" / "data" / "test-00000-of-00001.parquet")
    import pyarrow.parquet as pq

    row = pq.read_table(p).slice(0, 1).to_pylist()[0]
    assert row["images"][0]["path"] is None and row["images"][0]["bytes"][:8] == b"\x89PNG\r\n\x1a\n"

    got, stats = load_geometry3k(p)
    assert stats["loaded"] == 25
    assert all(_same(a, b) for a, b in zip(exs, got))
    # hub directory layout with split
    got2, _ = load_geometry3k(tmp_path / "hub", split="test")
    assert all(_same(a, b) for a, b in zip(exs, got2))


def test_saved_datasets_dir(tmp_path):
    datasets = pytest.importorskip("datasets")
    exs = generate_geometry(8, seed=13)
    ds = datasets.Dataset.from_list(
        [
            {"images": [ex.images[0]], "problem": ex.problem.replace("<image>", ""), "answer": ex.answer}
            for ex in exs
        ],
        features=datasets.Features(
            {
                "images": datasets.Sequence(datasets.Image()),
                "problem": datasets.Value("string"),
                "answer": datasets.Value("string"),
            }
        ),
    )
    datasets.DatasetDict({"train": ds}).save_to_disk(str(tmp_path / "saved"))
    got, stats = load_geometry3k(tmp_path / "saved", split="train")
    assert stats["loaded"] == 8
    for a, b in zip(exs, got):
        assert b.problem == a.problem and b.answer == a.answer and b.choices == []
        assert b.images[0].tobytes() == a.images[0].tobytes()


def _png(color=(10, 20, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(buf, format="PNG")
    return buf.getvalue()


def test_loader_normalisation(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.png").write_bytes(_png())
    Image.new("L", (5, 4), 128).save(tmp_path / "img" / "gray.png")
    rows = [
        # single path instead of a list, no placeholder, letter answer
        {"problem": "Find x.", "images": "img/a.png", "answer": "B", "choices": ["3", "4", "5", "6"]},
        # absolute path, gray image, numeric answer, no choices key
        {"problem": "<image>Find y.", "images": [str(tmp_path / "img" / "gray.png")], "answer": 7},
        # {"bytes", "path"} dict
        {"problem": "Find z.", "images": [{"bytes": _png((1, 2, 3)), "path": None}], "answer": "2"},
    ]
    # bytes are not JSON: write the dict row via a parquet file, the rest as JSON
    (tmp_path / "rows.json").write_text(json.dumps(rows[:2]))
    got, stats = load_geometry3k(tmp_path / "rows.json")
    assert stats["loaded"] == 2
    assert got[0].problem == "<image>Find x." and got[0].answer == "4"
    assert got[0].images[0].mode == "RGB" and got[0].images[0].getpixel((0, 0)) == (10, 20, 30)
    assert got[1].problem == "<image>Find y." and got[1].answer == "7" and got[1].choices == []
    assert got[1].images[0].mode == "RGB" and got[1].images[0].size == (5, 4)

    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([rows[2]]), tmp_path / "rows.parquet")
    got, _ = load_geometry3k(tmp_path / "rows.parquet")
    assert got[0].problem == "<image>Find z." and got[0].images[0].getpixel((0, 0)) == (1, 2, 3)


# --------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------


def _bad_dir(tmp_path: Path) -> Path:
    d = tmp_path / "bad"
    (d / "images").mkdir(parents=True)
    (d / "images" / "ok.png").write_bytes(_png())
    (d / "images" / "corrupt.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 10)
    good = {"id": "g", "problem": "<image>Find x.", "answer": "3", "images": ["images/ok.png"]}
    lines = [
        json.dumps(good),  # row 0
        json.dumps({**good, "id": "m", "images": ["images/missing.png"]}),  # row 1: missing file
        json.dumps({**good, "id": "c", "images": ["images/corrupt.png"]}),  # row 2: corrupt png
        json.dumps({k: v for k, v in good.items() if k != "answer"} | {"id": "n"}),  # row 3: no answer
        '{"id": "j", "problem": "<image>oops", ',  # row 4 (line 5): invalid JSON
        json.dumps({**good, "id": "t", "choices": "A B C"}),  # row 5: wrong type
        json.dumps({**good, "id": "g2"}),  # row 6
    ]
    (d / "train.jsonl").write_text("\n".join(lines) + "\n")
    return d


@pytest.mark.parametrize(
    "keep,field,needle",
    [
        (1, "images", "images/missing.png not found"),
        (2, "images", "cannot decode"),
        (3, "answer", "missing"),
        (5, "choices", "expected a list"),
    ],
)
def test_bad_rows_raise_data_error(tmp_path, keep, field, needle):
    d = _bad_dir(tmp_path)
    lines = (d / "train.jsonl").read_text().splitlines()
    # keep the good first row and the one bad row, so the bad row is row 1
    (d / "one.jsonl").write_text(lines[0] + "\n" + lines[keep] + "\n")
    with pytest.raises(DataError) as ei:
        load_geometry3k(d / "one.jsonl")
    msg = str(ei.value)
    assert "one.jsonl" in msg and "row 1" in msg and f"field '{field}'" in msg and needle in msg
    assert ei.value.row == 1 and ei.value.field == field


def test_invalid_json_line_names_file_and_line(tmp_path):
    d = _bad_dir(tmp_path)
    lines = (d / "train.jsonl").read_text().splitlines()
    (d / "j.jsonl").write_text(lines[0] + "\n\n" + lines[4] + "\n")
    with pytest.raises(DataError) as ei:
        load_geometry3k(d / "j.jsonl")
    assert "j.jsonl:3" in str(ei.value) and "row 1" in str(ei.value) and "invalid JSON" in str(ei.value)


def test_corrupt_bytes_in_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {"problem": "Find x.", "answer": "1", "images": [{"bytes": _png(), "path": None}]},
        {"problem": "Find x.", "answer": "1", "images": [{"bytes": b"not a png at all", "path": None}]},
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "c.parquet")
    with pytest.raises(DataError, match=r"c\.parquet row 1: field 'images': image 0: cannot decode"):
        load_geometry3k(tmp_path / "c.parquet")
    got, stats = load_geometry3k(tmp_path / "c.parquet", skip_bad=True)
    assert len(got) == 1 and stats["skipped_by_reason"] == {"image_corrupt": 1}


def test_skip_bad_counts(tmp_path):
    d = _bad_dir(tmp_path)
    with pytest.raises(DataError):
        load_geometry3k(d, split="train")
    got, stats = load_geometry3k(d, split="train", skip_bad=True)
    assert [e.id for e in got] == ["g", "g2"]
    assert stats["rows"] == 7 and stats["loaded"] == 2 and stats["skipped"] == 5
    assert stats["skipped_by_reason"] == {
        "bad_type": 1,
        "image_corrupt": 1,
        "image_missing": 1,
        "invalid_json": 1,
        "missing_answer": 1,
    }


def test_missing_source_and_split(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_geometry3k(tmp_path / "nope.jsonl")
    (tmp_path / "d").mkdir()
    with pytest.raises(FileNotFoundError, match="split 'train'"):
        load_geometry3k(tmp_path / "d", split="train")


def test_teacher_noise_changes_only_solutions():
    from mmevo.data.synthetic import generate_geometry, teacher_mistake, with_teacher_noise
    from mmevo.rewards.answers import extract_boxed

    clean = generate_geometry(400, seed=9)
    noisy = with_teacher_noise(clean, 0.6, seed=9)
    assert noisy == with_teacher_noise(clean, 0.6, seed=9)  # seeded
    wrong = [n for n in noisy if n.meta.get("teacher_wrong")]
    assert 0.5 < len(wrong) / len(clean) < 0.7
    for c, n in zip(clean, noisy):
        assert (c.id, c.problem, c.answer, c.choices) == (n.id, n.problem, n.answer, n.choices)
        boxed = extract_boxed(n.solution)
        if n.meta.get("teacher_wrong"):
            assert boxed != n.answer  # every mistake rule gives a wrong value
            assert boxed == str(teacher_mistake(n.meta["kind"], n.meta["params"])[1])
        else:
            assert n.solution == c.solution and boxed == c.answer
    assert with_teacher_noise(clean, 0.0, seed=9) == clean


def test_fit_pixels_bounds_area_and_keeps_aspect():
    from PIL import Image

    from mmevo.data.images import fit_pixels

    big = Image.new("RGB", (4000, 1000))
    out = fit_pixels(big, 0, 1_000_000)
    assert out.width * out.height <= 1_000_000 and out.width * out.height > 0.99 * 1_000_000
    assert abs(out.width / out.height - 4.0) < 0.01
    small = Image.new("RGB", (56, 28))
    up = fit_pixels(small, 262144, 4194304)
    assert up.width * up.height >= 0.99 * 262144 and abs(up.width / up.height - 2.0) < 0.02
    assert fit_pixels(small, 0, 4194304) is small and fit_pixels(big, 0, 0) is big  # inside bounds / bounds off


# --------------------------------------------------------------------------
# Hostile input: JSON Python cannot hold, NaN, broken parquet / saved datasets
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name,text,needle", [
    ("big.jsonl", '{"problem": "p", "answer": ' + "9" * 5000 + "}", r"big\.jsonl:2 \(row 1\): invalid JSON: Exceeds"),
    ("deep.jsonl", '{"problem": ' + "[" * 100000 + "]" * 100000 + "}", r"deep\.jsonl:2 \(row 1\): invalid JSON: maximum"),
    ("big.json", '[{"problem": "p", "answer": ' + "9" * 5000 + "}]", r"big\.json: invalid JSON: Exceeds"),
    ("deep.json", "[" * 100000 + "]" * 100000, r"deep\.json: invalid JSON: maximum recursion"),
])
def test_json_python_cannot_hold_is_invalid_json(tmp_path, name, text, needle):
    good = json.dumps({"problem": "Find x.", "answer": "1"})
    (tmp_path / name).write_text(good + "\n" + text + "\n" if name.endswith("l") else text)
    with pytest.raises(DataError, match=needle) as ei:
        load_geometry3k(tmp_path / name)
    assert ei.value.reason == "invalid_json"
    if name.endswith(".jsonl"):  # one bad line of a jsonl file is a counted skip
        got, stats = load_geometry3k(tmp_path / name, skip_bad=True)
        assert len(got) == 1 and stats["skipped_by_reason"] == {"invalid_json": 1}


def test_nan_is_missing_and_infinity_is_no_answer(tmp_path):
    # json.loads reads NaN / Infinity; pandas exports write NaN for a missing value: neither is the text "nan"
    rows = ['{"id": "a", "problem": "Find x.", "answer": NaN}',
            '{"id": "b", "problem": "Find x.", "answer": Infinity}',
            '{"id": "c", "problem": "Find x.", "answer": "1", "choices": [NaN, "1"]}',
            '{"id": "d", "problem": "Find x.", "answer": "1", "solution": NaN}']
    for row, needle in zip(rows[:3], ["field 'answer': missing", "field 'answer': expected a finite number, got inf",
                                      "field 'choices': choice nan is not a finite number"]):
        (tmp_path / "n.jsonl").write_text(row + "\n")
        with pytest.raises(DataError, match=re.escape(needle)):
            load_geometry3k(tmp_path / "n.jsonl")
    (tmp_path / "n.jsonl").write_text("\n".join(rows) + "\n")
    got, stats = load_geometry3k(tmp_path / "n.jsonl", skip_bad=True)
    assert [e.id for e in got] == ["d"] and got[0].solution is None
    assert stats["skipped_by_reason"] == {"bad_type": 2, "missing_answer": 1}


@pytest.mark.parametrize("rid", [1.5, [1], {"k": 1}, True])
def test_an_id_that_is_there_but_unusable_is_an_error(tmp_path, rid):
    # it used to be dropped silently for an id made from the row's position
    (tmp_path / "i.jsonl").write_text(json.dumps({"id": rid, "problem": "Find x.", "answer": "1"}) + "\n")
    with pytest.raises(DataError, match=r"i\.jsonl:1 \(row 0\): field 'id': expected a string or an integer") as ei:
        load_geometry3k(tmp_path / "i.jsonl")
    assert ei.value.reason == "bad_type"


def test_image_path_the_os_refuses_names_the_row(tmp_path):
    (tmp_path / "ok.png").write_bytes(_png())
    rows = [{"id": "a", "problem": "Find x.", "answer": "1", "images": ["ok.png"]},
            {"id": "b", "problem": "Find x.", "answer": "1", "images": ["x" * 300 + ".png"]}]
    (tmp_path / "l.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(DataError, match=r"l\.jsonl:2 \(row 1, id 'b'\): field 'images': image file x{200}\.\.\.: File name"):
        load_geometry3k(tmp_path / "l.jsonl")
    got, stats = load_geometry3k(tmp_path / "l.jsonl", skip_bad=True)
    assert [e.id for e in got] == ["a"] and stats["skipped_by_reason"] == {"image_missing": 1}


def test_corrupt_parquet_page_names_the_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"problem": f"Find x{i}.", "answer": str(i)} for i in range(600)]
    p = tmp_path / "c.parquet"
    pq.write_table(pa.Table.from_pylist(rows), p, row_group_size=100, compression="NONE")
    offset = pq.ParquetFile(p).metadata.row_group(4).column(0).data_page_offset  # rows 400-499
    data = bytearray(p.read_bytes())
    data[offset:offset + 40] = b"\xff" * 40  # the footer stays readable: the file opens, then fails mid-way
    p.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"c\.parquet: cannot read parquet from row 256 on: ") as ei:
        load_geometry3k(p, skip_bad=True)
    assert ei.value.reason == "unreadable_file"


def test_broken_saved_dataset_names_the_folder(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list([{"problem": "Find x.", "answer": "1"}]).save_to_disk(str(tmp_path / "saved"))
    (tmp_path / "saved" / "state.json").write_text("{oops")
    with pytest.raises(DataError, match=r"saved: cannot load the saved dataset: JSONDecodeError"):
        load_geometry3k(tmp_path / "saved")
    datasets.Dataset.from_list([{"problem": "Find x.", "answer": "1"}]).save_to_disk(str(tmp_path / "saved2"))
    for f in (tmp_path / "saved2").glob("*.arrow"):
        f.write_bytes(f.read_bytes()[:200])  # truncated
    with pytest.raises(DataError, match=r"saved2: cannot load the saved dataset: "):
        load_geometry3k(tmp_path / "saved2")


@pytest.mark.parametrize("kwargs,needle", [
    ({"n": 2.5}, "n must be an integer >= 0, got 2.5"),  # used to give 3 questions
    ({"n": 3, "kinds": "gcd"}, "kinds must be a list of kind names, got the string 'gcd'"),
])
def test_text_questions_refuse_wrong_argument_types(kwargs, needle):
    from mmevo.data.text_questions import generate_text_questions

    with pytest.raises(ValueError, match=re.escape(needle)):
        generate_text_questions(**kwargs)


@pytest.mark.parametrize("fields", [None, {"problem": "question"}])
def test_training_rows_with_an_undecodable_image_are_counted_under_skip_bad_rows(tmp_path, fields):
    """Every train-set format (not only plain geometry3k) skips and counts a row whose image does not decode when
    ``data.skip_bad_rows`` is on, and raises naming the file otherwise."""
    from mmevo.config import load_config
    from mmevo.recipes import load_examples

    d = _bad_dir(tmp_path)
    lines = (d / "train.jsonl").read_text().splitlines()
    key = (fields or {}).get("problem", "problem")
    rows = [json.loads(lines[i]) for i in (0, 2, 6)]  # good, corrupt png, good
    rows = [{key: r.pop("problem"), **r} for r in rows]
    (d / "mixed.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    fmt = ["data.format=generic"] + ([f"data.fields={json.dumps(fields)}"] if fields else [])
    cfg = load_config(None, [f"data.train={d / 'mixed.jsonl'}", "data.skip_bad_rows=true"] + fmt)
    examples, stats = load_examples(cfg, "train")
    assert [e.id for e in examples] == ["g", "g2"]
    assert stats["loaded"] == 2 and stats["skipped"] == 1 and stats["skipped_by_reason"] == {"image_corrupt": 1}
    cfg.data.skip_bad_rows = False
    with pytest.raises(DataError, match="mixed.jsonl.*row 1"):
        load_examples(cfg, "train")


@pytest.mark.parametrize("fmt", ["geometry3k", "generic"])
def test_source_at_split_reads_that_split_of_a_hub_snapshot(tmp_path, fmt):
    """EasyR1's ``data.train_files=hiyouga/geometry3k@train``: ``DIR@SPLIT`` picks the split's shards of a hub
    snapshot (data/<split>-*.parquet); the bare directory has no split to read."""
    from mmevo.config import load_config
    from mmevo.recipes import load_examples

    train, test = generate_geometry(6, seed=21), generate_geometry(4, seed=22)
    hub = tmp_path / "geometry3k"
    write_hub_parquet(train, hub / "data" / "train-00000-of-00001.parquet")
    write_hub_parquet(test, hub / "data" / "test-00000-of-00001.parquet")
    cfg = load_config(None, [f"data.train={hub}@train", f"data.heldout={hub}@test", f"data.format={fmt}"])
    got_train, stats = load_examples(cfg, "train")
    got_test, _ = load_examples(cfg, "heldout")
    assert [e.id for e in got_train] == [e.id for e in train] and stats["loaded"] == 6
    assert [e.id for e in got_test] == [e.id for e in test]
    cfg.data.train = str(hub)
    with pytest.raises(FileNotFoundError, match="no data file found"):
        load_examples(cfg, "train")
    # a path that exists as written is read as it is, even with an @ in it
    odd = tmp_path / "set@v2.parquet"
    write_hub_parquet(test, odd)
    cfg.data.train = str(odd)
    assert [e.id for e in load_examples(cfg, "train")[0]] == [e.id for e in test]
