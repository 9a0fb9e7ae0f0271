"""A sampled benchmark run records its rollout engine in run.json, and a resume on the other engine is refused
(journey5): HF and vLLM draw other samples from the same per-item seed, so a run resumed on vLLM after HF mixed the
two, while README promised a resume draws what an uninterrupted run draws."""

import json

import pytest

from mmevo.eval.runner import run_benchmark
from tests.test_eval_runner import _cfg

SAMPLED = {"eval.limit": 2, "rollout.eval_temperature": 1.0}


def test_a_sampled_run_on_another_engine_is_a_different_run(tiny_vl_path, tmp_path):
    out = tmp_path / "ev"
    run_benchmark(_cfg(tiny_vl_path, out, **SAMPLED))
    assert json.loads((out / "run.json").read_text())["engine"] == "hf"
    # every item is done: nothing would be generated, so no vLLM engine starts either way
    with pytest.raises(ValueError, match=r"different run \(engine: 'hf' -> 'vllm'\)"):
        run_benchmark(_cfg(tiny_vl_path, out, **{**SAMPLED, "rollout.engine": "vllm"}))


def test_an_earlier_run_json_without_the_engine_still_resumes(tiny_vl_path, tmp_path):
    out = tmp_path / "ev"
    run_benchmark(_cfg(tiny_vl_path, out, **SAMPLED))
    run = json.loads((out / "run.json").read_text())
    run.pop("engine")
    (out / "run.json").write_text(json.dumps(run))
    assert run_benchmark(_cfg(tiny_vl_path, out, **SAMPLED))["resumed_items"] == 2


def test_greedy_runs_carry_no_engine(tiny_vl_path, tmp_path):
    out = tmp_path / "greedy"
    run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 2}))
    assert "engine" not in json.loads((out / "run.json").read_text())
