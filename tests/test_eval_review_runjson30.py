"""``mmevo eval --benchmark`` resume: responses whose run.json is gone or unreadable are not reused."""

from __future__ import annotations

import json
import shutil

import pytest

from datapaths import FIXTURES
from mmevo.config import load_config
from mmevo.eval.runner import run_benchmark

MATHV = FIXTURES / "mathvision"


def _cfg(model, out, **over):
    args = [f"model.path={model}", "eval.benchmark=mathvision_testmini", f"eval.data={MATHV}", f"eval.out_dir={out}",
            "eval.max_tokens=4", "eval.limit=3", "trainer.progress=false"]
    return load_config(None, args + [f"{k}={v}" for k, v in over.items()])


def test_responses_without_a_readable_run_json_are_refused(tiny_vl_path, tmp_path):
    other = tmp_path / "other-model"
    shutil.copytree(tiny_vl_path, other)
    out = tmp_path / "ev"
    run_benchmark(_cfg(tiny_vl_path, out))
    run_file = out / "run.json"
    identity = run_file.read_text()

    # deleted: another model's evaluation took the 3 responses as its own (resumed_items 3, nothing generated)
    run_file.unlink()
    with pytest.raises(ValueError, match=r"responses.jsonl but no run.json.*eval.overwrite=true"):
        run_benchmark(_cfg(other, out))
    # cut short (a kill while it was written): a bare JSONDecodeError that named no file
    run_file.write_text(identity[:20])
    with pytest.raises(ValueError, match=r"run.json: not readable as the earlier run's identity"):
        run_benchmark(_cfg(other, out))
    run_file.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"run.json: expected a JSON object"):
        run_benchmark(_cfg(other, out))

    s = run_benchmark(_cfg(other, out, **{"eval.overwrite": "true"}))
    assert (s["generated_items"], s["resumed_items"]) == (3, 0)
    assert json.loads(run_file.read_text())["model"] == str(other)
    assert not (out / "run.json.tmp").exists()
    # the same run again resumes as before
    assert run_benchmark(_cfg(other, out))["resumed_items"] == 3


def test_an_empty_responses_file_needs_no_run_json(tiny_vl_path, tmp_path):
    out = tmp_path / "ev"
    out.mkdir()
    (out / "responses.jsonl").write_text("\n")
    s = run_benchmark(_cfg(tiny_vl_path, out))
    assert (s["generated_items"], s["resumed_items"]) == (3, 0)


def test_the_callers_config_keeps_its_budgets(tiny_vl_path, tmp_path):
    """run_benchmark(cfg, policy, engine) is for a process that goes on with its model: the evaluation set the
    caller's rollout.max_tokens and trainer.eval_max_tokens to eval.max_tokens (1536 -> 4) and raised
    data.max_prompt_length to the eval limit (1024 -> 2044), so a run trained after it with 4-token responses."""
    cfg = _cfg(tiny_vl_path, tmp_path / "ev", **{"rollout.max_tokens": 1536, "data.max_prompt_length": 1024})
    before = (cfg.rollout.max_tokens, cfg.trainer.eval_max_tokens, cfg.data.max_prompt_length)
    s = run_benchmark(cfg)
    assert s["max_tokens"] == 4 and s["generated_items"] == 3
    after = (cfg.rollout.max_tokens, cfg.trainer.eval_max_tokens, cfg.data.max_prompt_length)
    assert after == before == (1536, 0, 1024)


def _ids(out):
    return [json.loads(x)["id"] for x in (out / "responses.jsonl").read_text().splitlines()]


def test_responses_jsonl_keeps_the_benchmarks_order(tiny_vl_path, tmp_path):
    """Items left out of a batch's generation (a prompt over eval.max_prompt_length) were written before the
    batch's answers ("6", "8", "10", "11", then "4", ...)."""
    out = tmp_path / "ev"
    order = ["4", "5", "6", "7", "8", "10", "11", "16"]
    short = {"eval.limit": 8, "eval.batch_size": 8, "eval.max_prompt_length": 200}
    s = run_benchmark(_cfg(tiny_vl_path, out, **short))
    assert s["prompt_too_long"] == 4 and _ids(out) == order
    # a larger limit regenerates the four too long prompts (appended), then rewrites the file, still in order
    s = run_benchmark(_cfg(tiny_vl_path, out, **{**short, "eval.max_prompt_length": 400}))
    assert (s["prompt_too_long"], s["generated_items"], s["resumed_items"]) == (0, 4, 4)
    assert _ids(out) == order


def test_a_too_long_prompt_records_its_length_and_stays_done(tiny_vl_path, tmp_path):
    """responses.jsonl holds every item's prompt tokens: a too long prompt's were missing."""
    out = tmp_path / "ev"
    short = {"eval.limit": 8, "eval.batch_size": 8, "eval.max_prompt_length": 200}
    run_benchmark(_cfg(tiny_vl_path, out, **short))
    lines = [json.loads(x) for x in (out / "responses.jsonl").read_text().splitlines()]
    too_long = [r for r in lines if r["finish_reason"] == "prompt_too_long"]
    assert len(too_long) == 4 and all(r["prompt_tokens"] > 200 and r["max_prompt_length"] == 200 for r in too_long)
    assert all(0 < r["prompt_tokens"] <= 200 for r in lines if r not in too_long)
    s = run_benchmark(_cfg(tiny_vl_path, out, **short))  # the same limit: nothing is generated again
    assert (s["resumed_items"], s["generated_items"], s["prompt_too_long"]) == (8, 0, 4)


def test_sampled_answers_of_separate_batches_are_drawn_independently(tiny_vl_path, tmp_path):
    """At eval temperature > 0 every batch was sampled with trainer.seed itself: the k-th item of each batch drew the
    same uniforms, so four copies of one problem, one per batch, were answered identically, token for token."""
    row = json.loads((MATHV / "testmini.jsonl").read_text().splitlines()[0])
    data = tmp_path / "copies"
    (data / "images").mkdir(parents=True)
    shutil.copy(MATHV / row["image"], data / row["image"])
    (data / "testmini.jsonl").write_text("".join(json.dumps({**row, "id": f"copy{k}"}) + "\n" for k in range(4)))

    def responses(batch_size, out):
        cfg = _cfg(tiny_vl_path, out, **{"eval.data": data, "eval.batch_size": batch_size, "eval.max_tokens": 6,
                                         "eval.limit": 4, "rollout.eval_temperature": 1.0})
        run_benchmark(cfg)
        return [json.loads(x)["response"] for x in (out / "responses.jsonl").read_text().splitlines()]

    one_per_batch = responses(1, tmp_path / "b1")
    assert len(one_per_batch) == 4 and len(set(one_per_batch)) == 4
    assert len(set(responses(2, tmp_path / "b2"))) == 4
    assert responses(1, tmp_path / "again") == one_per_batch  # still reproducible from the seed
