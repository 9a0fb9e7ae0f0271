"""Images whose aspect ratio Qwen2-VL's processor refuses (longer side over 200x the shorter): before this check a
data set row of 4096x20 reached the prompt encoder, whose ``ValueError: absolute aspect ratio must be smaller than
200`` named no example and failed the whole step.
Now a data row is a DataError naming file / row / field (reason ``image_aspect``, a counted skip with
``data.skip_bad_rows``). MM-Zero's renders are refused by the sandbox already past 20:1 (``RenderLimits.max_aspect``,
``invalid_image``); its ``load_image`` refuses the processor's bound too, so a render reaching the solver by another
way (records of another run, a pool with other limits) is a failed attempt, not a failed step."""

import io
import json

import pytest
from PIL import Image

from mmevo.data.benchmarks import items_to_examples, load_items
from mmevo.data.images import MAX_ASPECT_RATIO, aspect_problem
from mmevo.data.schema import DataError
from mmevo.evolve.mmzero import load_image


def _png(size) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, "white").save(buf, format="PNG")
    return buf.getvalue()


@pytest.mark.parametrize("size, refused", [((4096, 20), True), ((20, 4096), True), ((4000, 20), False),
                                           ((201, 1), True), ((200, 1), False), ((640, 480), False)])
def test_the_bound_is_the_processors(size, refused, tiny_vl_processor):
    from mmevo.models.inputs import encode_prompt

    assert (aspect_problem(Image.new("RGB", size)) is not None) == refused
    try:  # the processor itself draws the line at the same ratio
        encode_prompt(tiny_vl_processor, True, "<image> What?", [Image.new("RGB", size, "white")])
        processor_refused = False
    except ValueError as e:
        assert "aspect ratio" in str(e)
        processor_refused = True
    assert processor_refused == refused
    assert MAX_ASPECT_RATIO == 200


@pytest.fixture(scope="module")
def tiny_vl_processor(tmp_path_factory):
    from mmevo.models.loader import load_model
    from mmevo.models.tiny import build_tiny_qwen2_5_vl

    return load_model(build_tiny_qwen2_5_vl(tmp_path_factory.mktemp("m") / "tiny")).processor


def _dataset(tmp_path, sizes) -> str:
    rows = []
    for i, size in enumerate(sizes):
        (tmp_path / f"{i}.png").write_bytes(_png(size))
        rows.append({"id": f"r{i}", "problem": "<image> How long?", "answer": "3", "images": [f"{i}.png"]})
    f = tmp_path / "train.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(f)


def test_a_data_row_with_a_refused_aspect_names_the_row(tmp_path):
    f = _dataset(tmp_path, [(640, 480), (4096, 20), (30, 30)])
    items, stats = load_items("generic", f)
    with pytest.raises(DataError) as e:
        items_to_examples(items, stats)
    assert e.value.reason == "image_aspect" and e.value.row == 1 and e.value.row_id == "r1"
    assert "train.jsonl:2" in str(e.value) and "4096x20" in str(e.value) and "200:1" in str(e.value)
    examples, stats = items_to_examples(items, stats, skip_bad=True)
    assert [ex.id for ex in examples] == ["r0", "r2"]
    assert stats["skipped_by_reason"] == {"image_aspect": 1} and stats["loaded"] == 2


def test_an_mmzero_render_with_a_refused_aspect_does_not_load():
    with pytest.raises(ValueError, match="aspect ratio of 204.8:1"):
        load_image(_png((4096, 20)), 0, 4194304)
    assert load_image(_png((4000, 20)), 0, 4194304).size == (4000, 20)


def test_eval_records_a_refused_aspect_under_its_own_reason(tiny_vl_path, tmp_path):
    """An eval item whose image the processor refuses is left out as ``image_aspect`` (not ``image_corrupt``: the
    file decodes), counted by reason beside an undecodable one, and not retried on resume."""
    from pathlib import Path

    from mmevo.config import load_config
    from mmevo.eval.runner import run_benchmark

    mathv = Path(__file__).resolve().parents[2] / "shared" / "data" / "mathvision"
    rows = [json.loads(x) for x in (mathv / "testmini.jsonl").read_text().splitlines()[:3]]
    (tmp_path / "images").mkdir()
    for r in rows:
        (tmp_path / r["image"]).write_bytes((mathv / r["image"]).read_bytes())
    (tmp_path / rows[1]["image"]).write_bytes(_png((4096, 20)))
    (tmp_path / rows[2]["image"]).write_bytes(b"not an image")
    (tmp_path / "testmini.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = [f"model.path={tiny_vl_path}", "eval.benchmark=mathvision_testmini", f"eval.data={tmp_path}",
            f"eval.out_dir={tmp_path / 'ev'}", "eval.max_tokens=4", "trainer.progress=false",
            "data.skip_bad_rows=true"]
    s = run_benchmark(load_config(None, args))
    assert s["n"] == 1 and s["data"]["skipped_at_generation"] == {"image_aspect": 1, "image_corrupt": 1}
    assert s["all_rows"]["n"] == 3
    recs = {json.loads(x)["id"]: json.loads(x) for x in (tmp_path / "ev" / "responses.jsonl").read_text().splitlines()}
    reasons = {k: v["finish_reason"] for k, v in recs.items()}
    assert sorted(reasons.values()) == sorted([reasons[rows[0]["id"]], "image_aspect", "image_corrupt"])
    assert "aspect ratio" in recs[str(rows[1]["id"])]["response"]
    s = run_benchmark(load_config(None, args))
    assert (s["generated_items"], s["n"]) == (0, 1)  # both stand: neither image became usable
    assert s["data"]["skipped_at_generation"] == {"image_aspect": 1, "image_corrupt": 1}
