"""run_benchmark(cfg, policy, engine) on a caller's engine whose context (max_model_len) cannot hold a benchmark
prompt: since the HF engine got vLLM's context length, the whole generate call was refused (a ValueError out of
run_benchmark); such prompts are now scored prompt_too_long under the engine's limit, and answered by a later run
that builds its own engine."""

from __future__ import annotations

import json

import pytest

from datapaths import FIXTURES
from mmevo.config import load_config
from mmevo.eval.runner import engine_prompt_limit, run_benchmark


def _cfg(model, out, **over):
    args = [f"model.path={model}", "eval.benchmark=mathvision_testmini", f"eval.data={FIXTURES / 'mathvision'}",
            f"eval.out_dir={out}", "eval.max_tokens=8", "eval.limit=3", "trainer.progress=false",
            "data.max_prompt_length=64", "rollout.max_tokens=4"]
    return load_config(None, args + [f"{k}={v}" for k, v in over.items()])


def test_a_callers_small_context_engine_scores_overlong_prompts_instead_of_failing(tiny_vl_path, tmp_path):
    from mmevo.recipes import load_policy
    from mmevo.rollout.factory import build_engine

    out = tmp_path / "ev"
    cfg = _cfg(tiny_vl_path, out)
    policy = load_policy(cfg)
    engine = build_engine(cfg, policy)  # a training run's engine: 64 + max(4, 0) tokens
    assert engine.max_model_len == 68
    s = run_benchmark(cfg, policy=policy, engine=engine)
    assert (s["n"], s["generated_items"], s["prompt_too_long"]) == (3, 3, 3)
    recs = [json.loads(x) for x in (out / "responses.jsonl").read_text().splitlines()]
    # refused under the engine's limit (68 - 8 new tokens), not eval.max_prompt_length's 8192
    assert [(r["finish_reason"], r["max_prompt_length"]) for r in recs] == [("prompt_too_long", 60)] * 3
    assert all(r["prompt_tokens"] > 60 for r in recs)
    # a later run on its own engine (context sized to eval.max_prompt_length) answers them
    s2 = run_benchmark(_cfg(tiny_vl_path, out))
    assert (s2["resumed_items"], s2["generated_items"], s2["prompt_too_long"]) == (0, 3, 0)


class _Context:
    def __init__(self, n):
        self.max_model_len = n


def test_engine_prompt_limit():
    assert engine_prompt_limit(object(), 100, 8) == 100  # no context known: unchanged
    assert engine_prompt_limit(_Context(None), 100, 8) == 100
    assert engine_prompt_limit(_Context(68), 100, 8) == 60
    assert engine_prompt_limit(_Context(500), 100, 8) == 100
    with pytest.raises(ValueError, match="eval.max_tokens=8 leaves no room.*context length of 8"):
        engine_prompt_limit(_Context(8), 100, 8)
