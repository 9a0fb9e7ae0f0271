"""Data loading against hostile input files, and the synthetic generators' golds, determinism and argument checks."""

from __future__ import annotations

import io
import json
import math
import re
from fractions import Fraction

import numpy as np
import pytest
from PIL import Image

from mmevo.data.figures import generate_figures, iter_figures, read_figure, split_figures
from mmevo.data.geometry3k import load_geometry3k
from mmevo.data.images import to_rgb
from mmevo.data.schema import DataError
from mmevo.data.synthetic import generate_geometry, iter_geometry, split_train_heldout
from mmevo.data.text_questions import generate_text_questions


def _png(tmp_path, name="a.png"):
    Image.new("RGB", (8, 8), (10, 20, 30)).save(tmp_path / name)
    return name


ROW = {"id": "a", "problem": "<image>Find x.", "answer": "3"}


# ---------------------------------------------------------------------------------------------------- text encodings
def test_jsonl_with_a_utf8_bom_loads(tmp_path):
    """RFC 8259 8.1: a parser may ignore a BOM. Windows tools write one; it made row 0 'invalid JSON'."""
    img = _png(tmp_path)
    lines = [json.dumps({**ROW, "images": [img]}), json.dumps({**ROW, "id": "b", "images": [img]})]
    (tmp_path / "d.jsonl").write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    exs, stats = load_geometry3k(tmp_path / "d.jsonl")
    assert [e.id for e in exs] == ["a", "b"] and stats["loaded"] == 2 and stats["skipped"] == 0
    assert exs[0].problem == "<image>Find x." and exs[0].answer == "3"


def test_json_with_a_utf8_bom_loads(tmp_path):
    (tmp_path / "d.json").write_bytes(b"\xef\xbb\xbf" + json.dumps([{**ROW, "problem": "Find x."}]).encode())
    exs, _ = load_geometry3k(tmp_path / "d.json")
    assert [(e.id, e.problem, e.answer) for e in exs] == [("a", "Find x.", "3")]


def test_non_utf8_and_truncated_lines_name_file_and_line(tmp_path):
    img = _png(tmp_path)
    good = json.dumps({**ROW, "images": [img]}).encode()
    (tmp_path / "d.jsonl").write_bytes(good + b"\n" + '{"id": "b", "problem": "caf\u00e9'.encode("latin-1") + b"\n"
                                       + good.replace(b'"a"', b'"c"')[:25])
    with pytest.raises(DataError, match=r"d\.jsonl:2 \(row 1\): invalid UTF-8"):
        load_geometry3k(tmp_path / "d.jsonl")
    exs, stats = load_geometry3k(tmp_path / "d.jsonl", skip_bad=True)
    assert [e.id for e in exs] == ["a"] and stats["skipped_by_reason"] == {"invalid_json": 2}


# ---------------------------------------------------------------------------------------------------- parquet floats
def test_float32_parquet_answers_and_choices_keep_their_decimal(tmp_path):
    """pyarrow widens float32 0.1 to 0.10000000149011612; that text became the gold and a choice."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    t = pa.table({"id": ["p", "q"], "problem": ["Find x.", "Find y."],
                  "answer": pa.array([0.1, 2.5], pa.float32()),
                  "choices": pa.array([[0.3, 0.1], [1.0, 2.5]], pa.list_(pa.float32()))})
    pq.write_table(t, tmp_path / "d.parquet")
    exs, _ = load_geometry3k(tmp_path / "d.parquet")
    assert [(e.answer, e.choices) for e in exs] == [("0.1", ["0.3", "0.1"]), ("2.5", ["1", "2.5"])]


def test_float32_letter_gold_maps_to_the_short_choice_text(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    t = pa.table({"problem": ["Find x."], "answer": ["B"],
                  "choices": pa.array([[0.7, 1.2]], pa.list_(pa.float32()))})
    pq.write_table(t, tmp_path / "d.parquet")
    (ex,), _ = load_geometry3k(tmp_path / "d.parquet")
    assert ex.answer == "1.2" and ex.choices == ["0.7", "1.2"]


def test_parquet_of_wrong_types_names_row_and_field(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"problem": ["a", "b"], "answer": pa.array([["1"], ["2"]])}), tmp_path / "d.parquet")
    with pytest.raises(DataError, match=r"d\.parquet row 0: field 'answer': expected a string, got list") as ei:
        load_geometry3k(tmp_path / "d.parquet")
    assert (ei.value.row, ei.value.field, ei.value.reason) == (0, "answer", "bad_type")
    (tmp_path / "e.parquet").write_bytes(b"PAR1" + bytes(64) + b"PAR1")
    with pytest.raises(DataError, match=r"e\.parquet: cannot read parquet"):
        load_geometry3k(tmp_path / "e.parquet")


# ---------------------------------------------------------------------------------------------------- hostile images
@pytest.mark.parametrize("make", ["zero", "corrupt", "directory", "loop"])
def test_unusable_image_files_are_errors_or_counted_skips(tmp_path, make):
    target = "img.png"
    if make == "zero":
        (tmp_path / target).write_bytes(b"")
    elif make == "corrupt":
        (tmp_path / target).write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(200)))
    elif make == "directory":
        (tmp_path / target).mkdir()
    else:
        (tmp_path / "x").symlink_to(tmp_path / target)
        (tmp_path / target).symlink_to(tmp_path / "x")
    ok = _png(tmp_path, "ok.png")
    rows = [{**ROW, "id": "bad", "images": [target]}, {**ROW, "id": "good", "images": [ok]}]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"d\.jsonl:1 \(row 0, id 'bad'\): field 'images'") as ei:
        load_geometry3k(tmp_path / "d.jsonl")
    assert ei.value.field == "images"
    exs, stats = load_geometry3k(tmp_path / "d.jsonl", skip_bad=True)
    assert [e.id for e in exs] == ["good"] and stats["skipped"] == 1


def test_placeholder_count_mismatch_is_an_error(tmp_path):
    img = _png(tmp_path)
    (tmp_path / "d.jsonl").write_text(json.dumps({**ROW, "problem": "<image><image>x", "images": [img]}) + "\n")
    with pytest.raises(DataError, match=r"field 'problem': problem has 2 <image> placeholder\(s\) but the row has 1"):
        load_geometry3k(tmp_path / "d.jsonl")


def _png_bytes(im: Image.Image) -> Image.Image:
    buf = io.BytesIO()
    im.save(buf, "PNG")
    out = Image.open(io.BytesIO(buf.getvalue()))
    out.load()
    return out


def test_to_rgb_scales_16_bit_grey():
    """convert("RGB") clips 16-bit grey at 255 (257 and 32896 both became 255)."""
    im = _png_bytes(Image.fromarray(np.array([[0, 257, 32896, 65535]], dtype=np.uint16)))
    assert im.mode == "I;16"
    out = to_rgb(im)
    assert out.mode == "RGB" and np.array(out)[0, :, 0].tolist() == [0, 1, 128, 255]  # v / 257


def test_to_rgb_composites_transparency_on_white():
    """convert("RGB") shows transparent pixels in their stored colour (black): black lines vanished."""
    rgba = Image.new("RGBA", (3, 1), (0, 0, 0, 0))
    rgba.putpixel((1, 0), (0, 0, 0, 255))
    rgba.putpixel((2, 0), (0, 0, 0, 128))
    px = np.array(to_rgb(rgba))[0]
    assert px[0].tolist() == [255, 255, 255] and px[1].tolist() == [0, 0, 0]
    assert abs(int(px[2, 0]) - 255 * (1 - 128 / 255)) <= 1  # 127
    assert np.array(to_rgb(Image.new("LA", (1, 1), (0, 0))))[0, 0].tolist() == [255, 255, 255]
    pal = Image.new("P", (2, 1))
    pal.putpalette([0, 0, 0, 255, 0, 0])
    pal.putpixel((1, 0), 1)
    pal.info["transparency"] = 0
    assert np.array(to_rgb(_png_bytes(pal)))[0].tolist() == [[255, 255, 255], [255, 0, 0]]
    cmyk = Image.new("CMYK", (1, 1), (0, 0, 0, 0))
    assert to_rgb(cmyk).getpixel((0, 0)) == (255, 255, 255)


# ---------------------------------------------------------------------------------------------------- generators
@pytest.mark.parametrize("call", [
    lambda: split_train_heldout(2, 1.5, 0), lambda: split_train_heldout(2, float("nan"), 0),
    lambda: split_train_heldout(2.5, 1, 0), lambda: generate_geometry(True, 0),
    lambda: split_figures(2, 1.5, 0), lambda: split_figures(2, float("nan"), 0), lambda: generate_figures(True, 0),
])
def test_generators_refuse_counts_that_are_not_whole_numbers(call):
    # split_train_heldout(2, 1.5) gave 2 held-out problems and n_heldout=NaN none
    with pytest.raises(ValueError, match=r"must be an integer >= 0"):
        call()


@pytest.mark.parametrize("call", [lambda: generate_geometry(2, None), lambda: generate_figures(2, None),
                                  lambda: next(iter_geometry(None)), lambda: next(iter_figures(None))])
def test_generators_refuse_seed_none(call):
    # random.Random(None) seeds from the clock: a different "deterministic" data set on every run
    with pytest.raises(ValueError, match="seed"):
        call()


def test_generators_refuse_fractional_image_size():
    with pytest.raises(ValueError, match="image_size must be an integer >= 8"):
        generate_geometry(1, 0, image_size=56.5)
    with pytest.raises(ValueError, match="image_size must be an integer >= 28"):
        generate_figures(1, 0, image_size=40.5)


def _geometry_gold(text: str) -> int:
    """The answer recomputed from the problem text alone (independent of the generator)."""
    stem = re.sub(r"[Aa]ngles? [12]( and 2)?|angle C = 90", "", text.split("Choices:")[0])  # names, not values
    n = [int(v) for v in re.findall(r"\d+", stem)]
    rules = [("square has perimeter", lambda: n[0] // 4), ("In triangle ABC, angle A", lambda: 180 - n[0] - n[1]),
             ("straight line", lambda: 180 - n[0]), ("vertical angle", lambda: n[0]),
             ("complementary", lambda: 90 - n[0]), ("corresponding angle", lambda: n[0]),
             ("alternate interior", lambda: n[0]), ("co-interior", lambda: 180 - n[0]),
             ("isosceles", lambda: (180 - n[0]) // 2), ("right triangle", lambda: 90 - n[0]),
             ("perimeter.", lambda: 2 * (n[0] + n[1])), ("area.", lambda: n[0] * n[1]),
             ("central angle", lambda: 2 * n[0]), ("diameter", lambda: n[0] // 2)]
    for key, rule in rules:
        if key in text:
            return rule()
    raise AssertionError(f"unknown problem text {text!r}")


def test_synthetic_geometry_golds_choices_and_determinism():
    exs = generate_geometry(300, seed=7)
    assert {e.meta["kind"] for e in exs} >= {"triangle_angle", "parallel_lines", "square_side", "circle_radius"}
    for e in exs:
        gold = _geometry_gold(e.problem)
        assert e.answer == str(gold) and gold > 0, e.problem
        if e.choices:
            assert len(set(e.choices)) == 4 and e.choices.count(e.answer) == 1
            assert e.choices["ABCD".index(e.meta["answer_letter"])] == e.answer
            assert e.problem.endswith(" Choices: " + " ".join(f"{L}. {c}" for L, c in zip("ABCD", e.choices)))
        assert e.solution.endswith(f"\\boxed{{{gold}}}")
    again = generate_geometry(120, seed=7)
    assert [(e.problem, e.answer, e.images[0].tobytes()) for e in again] == \
        [(e.problem, e.answer, e.images[0].tobytes()) for e in exs[:120]]
    assert [e.problem for e in generate_geometry(50, seed=8)] != [e.problem for e in exs[:50]]


def test_figure_golds_read_back_from_pixels():
    for e in generate_figures(60, seed=3):
        marks = read_figure(e.images[0], e.meta["style"])
        r, b = marks["red"][1], marks["blue"][1]
        q = e.problem
        if "plus" in q or "in all" in q or "total height" in q:
            want = r + b
        elif "minus" in q or "shorter" in q:
            want = abs(r - b)
        elif "area" in q:
            want = r * b
        else:
            want = r if "red" in q.split(". ", 1)[1] else b
        assert e.answer == str(want), (q, marks)


def test_text_question_golds_for_a_sample_of_kinds():
    qs = generate_text_questions(640, seed=11)
    assert [q.id for q in qs[:40]] == [q.id for q in generate_text_questions(40, seed=11)]
    seen = 0
    for q in qs:
        n = [int(v) for v in re.findall(r"-?\d+", q.question)]
        want = None
        if q.kind == "linear_equation":  # a x +- b = c
            a, b, c = n[0], n[1] * (-1 if " - " in q.question else 1), n[2]
            want = str(Fraction(c - b, a))
        elif q.kind == "inequality":  # smallest integer x with a x - b > c
            a, b, c = n[0], n[1], n[2]
            want = str(next(x for x in range(-1000, 1000) if a * x - b > c))
        elif q.kind == "clock_angle":
            h, m = n[0], n[1]
            d = abs((30 * (h % 12) + 0.5 * m) - 6 * m)
            want = f"{min(d, 360 - d):g}"
        elif q.kind == "prime_count":
            want = str(sum(all(k % d for d in range(2, k)) for k in range(2, n[0])))
        elif q.kind == "weekday":
            days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
            start = next(d for d in days if d in q.question)
            want = days[(days.index(start) + n[0]) % 7]
        elif q.kind == "coin_flips":
            want = str(Fraction(math.comb(n[0], n[1]), 2 ** n[0]))
        if want is not None:
            seen += 1
            assert q.answer == want, q
    assert seen >= 40
