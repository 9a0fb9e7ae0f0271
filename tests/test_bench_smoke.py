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


def _active_modes():
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return _get_current_dispatch_mode_stack()


def test_args_validate_micro_batch(bench):
    assert bench.parse_args(["--prompts", "2", "--group", "4", "--micro-batch", "16"]).micro_batch == 8  # clamped
    with pytest.raises(SystemExit):
        bench.parse_args(["--prompts", "2", "--group", "4", "--micro-batch", "3"])


def test_flop_counter_counts_the_cpu_attention_kernels(bench):
    """torch's table has no entry for the CPU flash-attention kernels: without the bench's additions this is 0."""
    import torch

    q = torch.randn(1, 2, 8, 4, requires_grad=True)  # [b, heads, s, d]
    k, v = torch.randn(1, 2, 8, 4, requires_grad=True), torch.randn(1, 2, 8, 4, requires_grad=True)
    counter = bench.flop_counter()
    with counter:
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    by_op = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    one_bmm = 2 * 2 * 8 * 8 * 4  # 2 FLOPs x heads x s_q x s_k x d
    assert by_op["aten._scaled_dot_product_flash_attention_for_cpu"] == 2 * one_bmm  # scores and output
    assert by_op["aten._scaled_dot_product_flash_attention_for_cpu_backward"] == 5 * one_bmm
    assert counter.get_total_flops() == 7 * one_bmm


def test_mmevo_half_runs_full_length(bench, cache_dir):
    res = bench.run_mmevo(bench.parse_args(TINY + ["--cache-dir", cache_dir]))
    assert res["step_s_median"] > 0
    assert res["gflop_per_step"] > 0
    assert res["gflop_per_s"] == pytest.approx(res["gflop_per_step"] / res["step_s_median"])
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
    assert res["gflop_per_step"] > 0
    from torch.utils.flop_counter import FlopCounterMode

    assert not any(isinstance(m, FlopCounterMode) for m in _active_modes())  # counting stopped with the warm-up
    # the count is one step's, whatever the number of timed steps that follow it
    two = bench.run_trl(bench.parse_args(TINY[:-1] + ["2", "--cache-dir", cache_dir]))
    assert len(two["step_s_all"]) == 2
    assert two["gflop_per_step"] == pytest.approx(res["gflop_per_step"], rel=1e-9)


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
    # TRL runs each completion's prompt (image included) in generation and training, mmevo each prompt once
    assert 0 < res["flop_ratio_mmevo_over_trl"] < 1
    assert res["flop_ratio_mmevo_over_trl"] == pytest.approx(res["mmevo"]["gflop_per_step"] /
                                                             res["trl"]["gflop_per_step"])


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
