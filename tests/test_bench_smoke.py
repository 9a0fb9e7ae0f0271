"""Smoke test of scripts/bench_grpo_step.py at toy sizes: both halves run one warm-up and one timed step."""

import os

import pytest

from conftest import load_script

TINY = ["--prompts", "2", "--group", "2", "--max-tokens", "4", "--micro-batch", "2", "--steps", "1"]


@pytest.fixture(scope="module")
def bench():
    return load_script("bench_grpo_step")


@pytest.fixture()
def cache_dir(tiny_vl_path, tmp_path):
    """A cache dir whose tiny-qwen2.5-vl is the session's tiny model (no second build)."""
    os.symlink(tiny_vl_path, tmp_path / "tiny-qwen2.5-vl")
    return str(tmp_path)


def test_args_validate_micro_batch(bench):
    assert bench.parse_args(["--prompts", "2", "--group", "4", "--micro-batch", "16"]).micro_batch == 8  # clamped
    with pytest.raises(SystemExit):
        bench.parse_args(["--prompts", "2", "--group", "4", "--micro-batch", "3"])


def test_mmevo_half_runs_full_length(bench, cache_dir):
    res = bench.run_mmevo(bench.parse_args(TINY + ["--cache-dir", cache_dir]))
    assert res["step_s_median"] > 0
    assert res["completion_length_mean"] == 4  # stop_ids=[]: every completion runs to --max-tokens
    assert res["gen_tokens"] == 2 * 2 * 4
    assert {"gen", "reward", "update"} <= set(res["stages_s"])
    assert res["peak_rss_mb"] > 0


def test_trl_half_runs_full_length(bench, cache_dir):
    pytest.importorskip("trl")
    res = bench.run_trl(bench.parse_args(TINY + ["--cache-dir", cache_dir]))
    assert "error" not in res, res
    assert res["step_s_median"] > 0
    assert res["completion_length_mean"] == 4  # min_new_tokens=T: EOS is never sampled
    assert res["gen_tokens"] == 2 * 2 * 4


def test_stdout_is_one_json_object_when_the_model_is_built_first(tmp_path):
    """The whole script on a fresh cache dir: the parent builds the tiny model, which imports DeepSpeed, whose
    logger writes "Setting accelerator to CPU" to stdout; that line made the first run's output unparseable."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "bench_grpo_step.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(script), *TINY, "--cache-dir", str(tmp_path)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout)  # the whole of stdout
    assert res["mmevo"]["step_s_median"] > 0 and res["config"]["prompts"] == 2


def test_bench_csrs_stdout_is_one_json_object_on_a_fresh_cache_dir(tmp_path):
    """scripts/bench_csrs.py builds the tiny model in-process: the same DeepSpeed line reached its stdout."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts" / "bench_csrs.py"
    proc = subprocess.run([sys.executable, str(script), "--prompts", "1", "--n", "2", "--m", "1", "--max-tokens", "4",
                           "--repeats", "1", "--cache-dir", str(tmp_path)], env={**os.environ, "OMP_NUM_THREADS": "1"},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout)
    assert res["csrs"]["generated_tokens"] > res["majority_vote"]["generated_tokens"] > 0
