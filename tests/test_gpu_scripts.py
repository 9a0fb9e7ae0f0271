"""The one-GPU check scripts on CPU: scripts/rehearse_7b.py at toy shapes (the same code path as the 7B rehearsal)
and as a 7B dry run, and the CPU-safe parts of scripts/gpu_check.py (ZeRO-3 + vLLM through the CLI with resume, the
vLLM sleep -> train -> sync cycle, per-check error isolation). The GPU runs themselves are not covered here."""

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"


HAS_VLLM = importlib.util.find_spec("vllm") is not None  # not imported here: the scripts import it themselves
HAS_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None


@pytest.fixture()
def cache_dir(tiny_vl_path, tmp_path):
    """A cache dir whose tiny-qwen2.5-vl is the session's tiny model (no second build)."""
    d = tmp_path / "cache"
    d.mkdir()
    os.symlink(tiny_vl_path, d / "tiny-qwen2.5-vl")
    return str(d)


def _run(script: str, *args: str, timeout: float = 600) -> tuple[int, dict, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "2", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(SCRIPTS / script), *args], env=env, cwd=str(ROOT),
                          capture_output=True, text=True, timeout=timeout)
    try:
        out = json.loads(proc.stdout)  # stdout is the JSON object only
    except json.JSONDecodeError:
        raise AssertionError(f"no JSON on stdout (rc {proc.returncode}):\n{proc.stdout[-2000:]}\n"
                             f"{proc.stderr[-4000:]}") from None
    return proc.returncode, out, proc.stderr


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


# -- scripts/rehearse_7b.py ------------------------------------------------------------------------------------------
def test_rehearsal_tiny_scale_runs_every_phase_on_cpu(cache_dir):
    args = ["--device", "cpu", "--scale", "tiny", "--cache-dir", cache_dir]
    if not HAS_VLLM:
        args += ["--skip", "vllm"]
    rc, out, err = _run("rehearse_7b.py", *args)
    assert rc == 0 and "error" not in out, err[-4000:]
    assert out["failed"] == [], {k: v.get("error") for k, v in out["phases"].items()}
    ph, shapes = out["phases"], out["shapes"]

    # the model is built at the requested dimensions; the planner's parameter formula counts exactly those
    assert ph["build"]["params"] == ph["build"]["params_planner"] > 0
    assert ph["build"]["vocab"] == out["setup"]["dims"]["vocab"] > ph["build"]["tokenizer_ids"]
    assert "config.json" in ph["build"]["files"] and not any(f.endswith(".safetensors") for f in ph["build"]["files"])

    # the trainer's split under the token budget, charged the packed forward's real tokens (the group's prompt once):
    # as many of the 8 samples as fit, where the padded count would have fitted fewer
    P, R, budget = shapes["prompt_tokens"], shapes["response_tokens"], shapes["max_tokens_per_micro_batch"]
    assert shapes["group_samples"] == 8 and shapes["micro_batch_seqs"] == min(8, (budget - P) // R)
    assert shapes["forward_tokens"] == P + shapes["micro_batch_seqs"] * R <= budget
    assert shapes["forward_prompts"] == 1 and shapes["padded_tokens"] == shapes["micro_batch_seqs"] * (P + R)
    assert shapes["prompt_tokens"] <= 256 and shapes["response_tokens"] == 384 and shapes["image_tokens"] > 0

    # one checkpointed micro-batch through sequence_logprobs (chunked) + policy_loss
    upd = ph["update"]
    assert upd["checkpointing"] is True and upd["chunks"] > 1
    assert _finite(upd["loss"]) and _finite(upd["grad_norm"]) and upd["grad_norm"] > 0
    assert upd["tokens"] == shapes["micro_batch_seqs"] * shapes["response_tokens"]
    # the no-grad eval-mode pass (shared prompt) and the checkpointed train-mode pass (unshared) agree (float32)
    assert upd["max_abs_logp_diff_vs_logprob_pass"] < 1e-4

    cmp = out["comparison"]
    assert cmp["policy_weights"]["measured_over_planner"] == pytest.approx(1.0, abs=1e-3)
    assert cmp["gradients"]["measured_over_planner"] == pytest.approx(1.0, abs=1e-3)
    for row in ("update_working_set", "logprob_working_set", "update_phase_peak"):
        assert cmp[row]["planner_gib"] > 0 and cmp[row]["measured_gib"] is None  # no allocator statistics on CPU
    assert {"per_gpu_gib", "phases_gib", "peak_gib", "fits"} <= set(out["planner"])
    assert out["planner"]["setup"]["gradient_checkpointing"] is True
    assert out["planner"]["setup"]["tokens_per_micro_batch"] == shapes["forward_tokens"]

    if HAS_VLLM:
        start = ph["vllm_start"]
        assert start["load_format"] == "dummy" and start["model_runner"] in ("v1", "v2")
        assert start["image_norm_modules_restored"] >= 0
        assert ph["rollout"]["tokens"] == ph["generate"]["tokens"] == 2 * 8
        assert ph["rollout"]["logprobs_finite"] and ph["generate"]["logprobs_finite"]
        # vLLM samples from its dummy weights before the sync and from the policy's afterwards
        assert ph["generate"]["logprob_max_abs_gap_vs_policy"] < 1e-3
        assert ph["rollout"]["logprob_max_abs_gap_vs_policy"] > 100 * ph["generate"]["logprob_max_abs_gap_vs_policy"]
        assert ph["sleep"]["sleep_enabled"] is False  # no sleep mode on CPU: a no-op there
        assert ph["weight_sync"]["weights_stale_after"] is False and ph["weight_sync"]["sync_s"] > 0


def test_rehearsal_7b_dry_run_has_the_7b_shapes(cache_dir):
    """The 7B config itself (no weights: the model lives on the meta device), the 7B batch and the planner."""
    rc, out, err = _run("rehearse_7b.py", "--device", "cpu", "--scale", "7b", "--dry-run", "--cache-dir", cache_dir)
    assert rc == 0 and "error" not in out and out["dry_run"] is True, err[-4000:]
    b, shapes = out["phases"]["build"], out["shapes"]
    assert b["params"] == b["params_planner"] == 8_292_166_656  # Qwen2.5-VL-7B-Instruct: 8.29e9
    assert b["vocab"] == 152064 and out["setup"]["dims"]["layers"] == 28 and out["setup"]["dims"]["hidden"] == 3584
    assert out["setup"]["dtype"] == "bfloat16"
    # 8 samples: the packed forward runs the prompt once + 8 x 1536 response tokens <= 16384 (padded: only 6 fit)
    assert shapes["micro_batch_seqs"] == 8 and shapes["response_tokens"] == 1536
    assert 900 <= shapes["prompt_tokens"] <= 1024 and shapes["image_tokens"] > 500
    assert shapes["forward_tokens"] == shapes["prompt_tokens"] + 8 * 1536 <= 16384
    assert shapes["logits_chunk_tokens"] == 1024
    assert shapes["max_model_len"] == 2560
    cmp = out["comparison"]
    assert cmp["policy_weights"]["planner_gib"] == pytest.approx(15.45, abs=0.01)
    assert 20 < cmp["update_working_set"]["planner_gib"] < 60  # grads 15.4 + activations + ViT + logits
    assert cmp["update_phase_peak"]["planner_gib"] < 80  # fits one 80 GiB GPU with vLLM asleep, no Adam state


def test_rehearsal_refuses_cuda_without_a_gpu(cache_dir):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    rc, out, _ = _run("rehearse_7b.py", "--device", "cuda", "--cache-dir", cache_dir, timeout=120)
    assert rc == 1 and "torch sees no GPU" in out["error"]


# -- scripts/gpu_check.py --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpu_check():
    return load_script("gpu_check")


@pytest.mark.parametrize("script", ["gpu_check.sh", "device_kit.sh"])
def test_device_shell_scripts_are_valid_bash(script):
    assert subprocess.run(["bash", "-n", str(SCRIPTS / script)]).returncode == 0


def test_gpu_check_each_check_keeps_its_own_error(gpu_check, cache_dir, monkeypatch):
    """A check that raises, and a CLI run that fails, are recorded; every other check still runs."""
    def boom(args, path):
        raise RuntimeError("boom")

    calls = []
    for name in ("hf_rollout", "grpo_step", "deepspeed_zero2", "vllm"):
        fn = {"hf_rollout": "check_hf_rollout", "grpo_step": "check_grpo_step", "deepspeed_zero2": "check_deepspeed",
              "vllm": "check_vllm"}[name]
        monkeypatch.setattr(gpu_check, fn, lambda args, path, _n=name: calls.append(_n) or {"ok": True})
    monkeypatch.setattr(gpu_check, "check_rehearsal", boom)

    class Failed:
        returncode, stdout, stderr = 1, "", "Traceback: simulated failure"

    monkeypatch.setattr(gpu_check, "_run_train", lambda cmd, timeout: (Failed(), 0.1, ""))
    out = gpu_check.run(gpu_check.parse_args(["--device", "cpu", "--quick", "--cache-dir", cache_dir]))
    assert calls == ["hf_rollout", "grpo_step", "deepspeed_zero2", "vllm"]
    assert out["rehearsal_7b"]["error"] == "RuntimeError: boom"
    if HAS_DEEPSPEED and HAS_VLLM:
        z3 = out["zero3_vllm"]
        assert z3["runs"][0]["rc"] == 1 and "simulated failure" in z3["runs"][0]["stderr_tail"]
        assert len(z3["runs"]) == 1 and z3["resumed_at_step_3"] is False and "error" in z3
        assert out["failed"] == ["zero3_vllm", "rehearsal_7b"]
    else:
        assert out["failed"] == ["rehearsal_7b"]
    assert out["total_s"] > 0


def test_gpu_check_keeps_to_its_time_budget_and_leaves_partial_json(gpu_check, cache_dir, tmp_path, monkeypatch):
    """With --budget-s a check that needs more than is left is skipped (and says so), a subprocess gets at most the
    time left, and --out holds the results so far after every check (complete: false until the end)."""
    out_file = tmp_path / "gpu_check.json"
    seen_on_disk, timeouts = [], []

    def quick_check(args, path):
        return {"ok": True}

    def reads_partial(args, path):  # the file as a run killed at this point would leave it
        seen_on_disk.append(json.loads(out_file.read_text()))
        return {"ok": True}

    class Done:
        returncode, stdout, stderr = 0, "{}", ""

    def fake_subprocess_run(cmd, timeout, **kw):
        timeouts.append(timeout)
        return Done()

    for fn in ("check_hf_rollout", "check_grpo_step", "check_packed_forward", "check_zero3_vllm", "check_vllm"):
        monkeypatch.setattr(gpu_check, fn, quick_check)
    monkeypatch.setattr(gpu_check, "check_deepspeed", reads_partial)
    monkeypatch.setattr(gpu_check.subprocess, "run", fake_subprocess_run)
    needs = dict.fromkeys(gpu_check.CHECKS, 1)
    needs["zero3_vllm"] = 10_000  # more than the budget: skipped; the cheaper checks after it still run
    monkeypatch.setattr(gpu_check, "CHECK_NEEDS_S", needs)
    args = gpu_check.parse_args(["--device", "cpu", "--quick", "--cache-dir", cache_dir, "--budget-s", "120",
                                 "--out", str(out_file), "--rehearsal-timeout", "300"])
    out = gpu_check.run(args)

    assert "time budget" in out["zero3_vllm"]["skipped"] and out["skipped"] == ["zero3_vllm"]
    assert out["vllm"] == {"ok": True, "check_s": out["vllm"]["check_s"]} and out["complete"] is True
    assert len(timeouts) == 1 and 100 < timeouts[0] <= 120  # the rehearsal's 300 s cut to what was left
    partial = seen_on_disk[0]
    assert partial["complete"] is False and partial["packed_forward"]["ok"] is True
    assert "deepspeed_zero2" not in partial and "vllm" not in partial
    # without a budget (the CPU default) nothing is skipped for time
    timeouts.clear()
    out = gpu_check.run(gpu_check.parse_args(["--device", "cpu", "--quick", "--cache-dir", cache_dir]))
    assert out["skipped"] == [] and timeouts == [300]


def test_gpu_check_rehearses_without_vllm_where_it_does_not_import(gpu_check, cache_dir, monkeypatch):
    """A GPU machine without vLLM (the lent image): the rehearsal runs its training phases with --skip vllm, and its
    record says why the engine phases are missing."""
    calls = []

    class Done:
        returncode, stdout, stderr = 0, json.dumps({"phases": {"update": {"ok": True}}}), ""

    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    monkeypatch.setattr(gpu_check, "_run_train", lambda cmd, timeout: calls.append(cmd) or (Done(), 1.0, ""))
    out = gpu_check.check_rehearsal(gpu_check.parse_args(["--device", "cpu", "--cache-dir", cache_dir]), None)
    assert calls[0][-2:] == ["--skip", "vllm"]
    assert out["vllm"]["skipped"].startswith("vllm not importable: ModuleNotFoundError") and not gpu_check._failed(out)


def test_gpu_check_counts_a_false_verdict_as_a_failed_check(gpu_check):
    """A GPU run whose frozen-role reload served the wrong weights lists the vllm check in "failed", as an
    exception would; a bf16 share (a float) or a verdict that does not apply (None) is not a failure."""
    wrong = {"vllm": {"checkpoint_reload": {"outputs_changed": True, "follows_checkpoint": False, "restored": True}}}
    assert gpu_check._failed(wrong["vllm"])
    assert gpu_check._failed({"sleep_train_sync": {"wake_refused_while_stale": False}})
    assert not gpu_check._failed({"checkpoint_reload": {"outputs_changed": True, "follows_checkpoint": 0.93,
                                                        "restored": True}})
    assert not gpu_check._failed({"sleep_train_sync": {"wake_refused_while_stale": None, "restored": True}})


def test_gpu_check_hf_rollout_compares_shared_and_repeated_prefix_decoding(gpu_check, cache_dir):
    """The hf_rollout check's parity part on CPU: greedy tokens equal, log-probs within float noise in float32."""
    args = gpu_check.parse_args(["--device", "cpu", "--quick", "--cache-dir", cache_dir])
    out = gpu_check.check_hf_rollout(args, gpu_check.be.tiny_model_path(cache_dir))
    assert not gpu_check._failed(out), out
    fp32 = out["float32"]["shared_prefix_decode"]
    assert fp32["token_share"] == 1.0 and fp32["max_abs_logp_diff"] < 1e-4
    assert out["bfloat16"]["shared_prefix_decode"]["token_share"] > 0.5
    for dtype in ("float32", "bfloat16"):
        lean = out[dtype]["lean_decode"]
        assert lean["identical"] is True and lean["tokens"] > 0 and "error" not in lean


def test_gpu_check_zero3_vllm_resume_and_sleep_train_sync_on_cpu(cache_dir, tmp_path):
    """The CPU variant of the one-GPU check, minus the parts other tests cover: the packed forward against the padded
    one, ZeRO-3 + vLLM through the CLI in one torchrun process (2 steps, then a resumed run to step 3), and the vLLM engine's checks incl. the model runner and
    sleep -> train -> sync -> generate."""
    if not (HAS_VLLM and HAS_DEEPSPEED):
        pytest.skip("needs vllm and deepspeed")
    rc, out, err = _run("gpu_check.py", "--device", "cpu", "--quick", "--cache-dir", cache_dir,
                        "--skip", "hf_rollout,grpo_step,deepspeed_zero2,rehearsal_7b", "--out",
                        str(tmp_path / "gpu_check.json"), timeout=900)
    assert rc == 0 and out["failed"] == [], json.dumps(out, indent=1, default=str)[-6000:]
    assert json.loads((tmp_path / "gpu_check.json").read_text())["failed"] == []
    for name in ("hf_rollout", "grpo_step", "deepspeed_zero2", "rehearsal_7b"):
        assert out[name]["skipped"] == "--skip"

    pf = out["packed_forward"]["float32"]  # CPU: one SDPA call per packed sequence, exact
    assert pf["ok"] is True and pf["kernel"] == "padded_sdpa" and pf["max_abs_logp_diff"] < 1e-4
    assert pf["shared_max_abs_logp_diff"] < 1e-4 and pf["shared_max_rel_grad_diff"] < 1e-3

    z3 = out["zero3_vllm"]
    assert z3["resumed_at_step_3"] is True and z3["exported"] is True
    first, second = z3["runs"]
    assert first["rc"] == second["rc"] == 0
    assert first["resumed"] is None and first["steps_logged"] == [1, 2] and first["checkpoints"] == ["step_000002"]
    assert second["resumed"] == "2" and second["steps_logged"] == [1, 2, 3]
    assert [m["step"] for m in z3["metrics"]] == [1, 2, 3]
    assert all(_finite(m["actor/grad_norm"]) and _finite(m["time/step"]) for m in z3["metrics"])

    v = out["vllm"]
    assert v["model_runner"] == "v1"  # the CPU build always runs V1 (V2 needs Triton)
    assert v["greedy_parity"]["all_match"] is True
    sts = v["sleep_train_sync"]
    assert sts["sleep_enabled"] is False and sts["weights_stale_after_sleep"] is False  # CPU: sleep is a no-op
    assert sts["outputs_changed_by_training"] is True
    assert sts["follows_trained_weights"] is True and sts["restored"] is True
    cr = v["checkpoint_reload"]  # a frozen role's turn on the loops' one engine: a saved model's files loaded
    assert cr["outputs_changed"] is True and cr["follows_checkpoint"] is True and cr["restored"] is True
    # the same through the loops' role views: a frozen role's turn on the awake engine, then after the policy's view
    # closed (a no-op sleep on CPU, so no second load there: one switch)
    assert cr["follows_checkpoint_as_role_awake"] is True and cr["follows_checkpoint_as_role_after_close"] is True
    assert cr["role_switches"] == 1 and cr["frozen_stale_after_close"] is False
