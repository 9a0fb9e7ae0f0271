"""One-shot accelerator check of mmevo on one GPU, without hub access; prints ONE JSON object on stdout.

Checks, each in its own try/except (a failure is recorded as {"error": ...} and the others still run), in this order:
  env              torch / transformers / deepspeed / vllm versions, the device
  hf_rollout       HF-engine rollout tokens/s in float32 and bfloat16 (forced length: no stop token),
                   greedy decoding over shared prefixes against repeated prefixes (same tokens, log-probs), and
                   seeded sampling with the lean decode step against the model's forward per step (identical)
  grpo_step        GRPO step time in one process (model.device=DEVICE, reference model + KL, format reward)
  packed_forward   padding-free (packed, and packed with shared prompts) against padded forward/backward on the tiny
                   model: log-prob and gradient differences, the kernel packed rows took (GPU bfloat16: torch's
                   varlen flash attention), times
  deepspeed_zero2  `python -m mmevo.cli train ... trainer.deepspeed=configs/deepspeed/zero2.json` as 1 process
                   under torchrun (nccl on GPU, gloo on CPU): exit code and step time (skipped without deepspeed)
  zero3_vllm       the same CLI with configs/deepspeed/zero3.json and rollout.engine=vllm (sleep mode level 2,
                   gradient checkpointing, reference offloaded): 2 steps with a checkpoint at step 2, then a second
                   run on the same output_dir with trainer.steps=3 that must resume and log step 3; its metrics lines
  rehearsal_7b     scripts/rehearse_7b.py in its own process: Qwen2.5-VL-7B shapes with random weights made on the
                   GPU, vLLM with load_format="dummy" built by mmevo's build_engine, one micro-batch forward/backward
                   with gradient checkpointing at the 7B config's token budget, a 7B weight sync; measured peak memory
                   per phase beside mmevo.memory_plan's estimate (toy shapes with --quick or on CPU)
  vllm             vLLM engine (skipped without vllm) on the tiny model: the model runner the build picked ("v1" /
                   "v2"), start time, tokens/s, greedy parity with the HF engine in float32 on the first K tokens
                   (token ids and log-probs), weight sync (the engine follows a changed model and back), sleep/wake on
                   GPU, and sleep -> one AdamW step -> (level 2: weights_stale, wake() refused) -> sync_weights ->
                   generate, which must follow the trained weights

The tiny model is built locally (no hub). `--device cpu --quick` runs every check on CPU at toy sizes. Time on one
GPU: see scripts/gpu_check.sh.

Time budget (``--budget-s``, default 480 s on a GPU, none on CPU): a check that would start with less time left than
it needs (CHECK_NEEDS_S) is skipped and recorded as such, and the subprocess checks' timeouts are cut to the time
left, so that the script ends inside a device lease's command limit. With ``--out`` the JSON is rewritten after
every check (``"complete": false`` until the last): a run killed from outside still leaves what it measured.

    python scripts/gpu_check.py --device cuda           # what scripts/gpu_check.sh runs on the GPU machine
    OMP_NUM_THREADS=1 python scripts/gpu_check.py --device cpu --quick
"""

from __future__ import annotations

import argparse
import atexit
import copy
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

import bench_engines as be  # noqa: E402  (shared timing helpers)


# in running order: the subprocess checks before vLLM in this process (it binds this process's threads on CPU and
# takes GPU memory), the 7B rehearsal before it too (it needs most of the GPU)
CHECKS = ("hf_rollout", "grpo_step", "packed_forward", "deepspeed_zero2", "zero3_vllm", "rehearsal_7b", "vllm")
# seconds a check needs at least on one GPU (the estimates in scripts/gpu_check.sh): with less left it is skipped
CHECK_NEEDS_S = {"hf_rollout": 20, "grpo_step": 20, "packed_forward": 10, "deepspeed_zero2": 40, "zero3_vllm": 120,
                 "rehearsal_7b": 90, "vllm": 90}
_DEADLINE: list[float] = []  # perf_counter() time at which the budget runs out (empty: no budget)


def _time_left() -> float:
    """Seconds left of the run's budget (inf without one)."""
    return _DEADLINE[0] - time.perf_counter() if _DEADLINE else float("inf")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda | cpu")
    ap.add_argument("--quick", action="store_true", help="toy sizes (the CPU test of this script)")
    ap.add_argument("--cache-dir", default=".cache/mmevo", help="where the tiny model is built")
    ap.add_argument("--parity-tokens", type=int, default=32, help="K: greedy tokens compared between the engines")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.3, help="vLLM's share of the GPU")
    ap.add_argument("--train-lr", type=float, default=0.02, help="AdamW step of the sleep -> train -> sync check")
    ap.add_argument("--train-timeout", type=float, default=200, help="seconds per `mmevo train` subprocess")
    ap.add_argument("--zero3-cuda-graphs", action="store_true", help="zero3_vllm: vLLM with CUDA graphs")
    ap.add_argument("--rehearsal-scale", default="", help="7b | tiny (default: 7b on cuda, tiny with --quick/cpu)")
    ap.add_argument("--rehearsal-gpu-memory-utilization", type=float, default=0.0,
                    help="vLLM's share in the 7B rehearsal (default: the 7B config's, 0.6)")
    ap.add_argument("--rehearsal-timeout", type=float, default=300, help="seconds for scripts/rehearse_7b.py")
    ap.add_argument("--skip", default="", help="comma-separated checks to skip (" + ",".join(CHECKS) + ")")
    ap.add_argument("--out", default="", help="also write the JSON here (rewritten after every check)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="seconds for the whole run (default 480 with --device cuda, none on cpu; 0 = none)")
    args = ap.parse_args(argv)
    q = args.quick
    args.prompts, args.n, args.max_tokens, args.repeats, args.steps = (2, 2, 16, 1, 1) if q else (8, 8, 128, 3, 3)
    args.parity_tokens = min(args.parity_tokens, 8 if q else args.parity_tokens)
    if args.budget_s is None:
        args.budget_s = 480.0 if args.device.startswith("cuda") else 0.0
    return args


def randomize(model, std: float = 0.3, seed: int = 0):
    """Varied outputs for the freshly initialised tiny model (its default init makes every logit nearly equal, so
    greedy parity would hinge on ties)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.copy_((torch.randn(p.shape, generator=g) * std).to(p))
    return model


# -- checks -----------------------------------------------------------------------------------------------------------
def check_env(args) -> dict:
    import torch
    import transformers

    out = {"python": sys.version.split()[0], "torch": torch.__version__, "transformers": transformers.__version__,
           "cuda_available": torch.cuda.is_available(), "device": args.device,
           "threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        out.update(gpu=torch.cuda.get_device_name(0), gpu_count=torch.cuda.device_count(),
                   cuda=torch.version.cuda, bf16_supported=torch.cuda.is_bf16_supported())
    for mod in ("deepspeed", "vllm"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception as e:  # noqa: BLE001
            out[mod] = f"not importable: {type(e).__name__}: {e}"
    return out


def check_hf_rollout(args, path) -> dict:
    from mmevo.models.loader import load_model
    from mmevo.rollout.base import SamplingParams

    res = {}
    for dtype in ("float32", "bfloat16"):
        try:
            t0 = time.perf_counter()
            lm = load_model(path, dtype, args.device)
            lm.model.eval()
            load_s = time.perf_counter() - t0
            requests, _ = be.make_requests(lm, args.prompts, args.n)
            engine = be.hf_engine(lm, args.device, max_batch_seqs=args.prompts * args.n)
            params = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=args.max_tokens, seed=0)
            res[dtype] = {"load_s": load_s, **be.time_generate(engine, requests, params, args.repeats, args.device),
                          **_peak_mem(args.device)}
            res[dtype]["shared_prefix_decode"] = shared_prefix_parity(lm, requests, args, exact=dtype == "float32")
            res[dtype]["lean_decode"] = lean_decode_parity(lm, requests, args, params)
            del lm, engine
            _free(args.device)
        except Exception as e:  # noqa: BLE001
            res[dtype] = be.error_record(e)
    return res


def shared_prefix_parity(lm, requests, args, exact: bool) -> dict:
    """Greedy decoding over shared prefixes (mmevo's attention: each prompt's keys once, cascade attention) against
    each row's own copy of the prefix (transformers' sdpa): the share of greedy tokens on common prefixes and the
    largest log-prob difference there. In float32 a share below 1 or a difference above 1e-3 is an error. Both run
    without the fused decode step (CPU float32 only; its projections round differently): this compares attention."""
    from mmevo.models.attention import NAME
    from mmevo.rollout.base import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens)
    outs = {}
    try:
        for impl in ("sdpa", NAME):
            lm.model.set_attn_implementation(impl)
            engine = be.hf_engine(lm, args.device, max_batch_seqs=args.prompts * args.n, fused_decode=False)
            outs[impl] = [c for r in engine.generate(requests, params) for c in r]
    finally:
        lm.model.set_attn_implementation(NAME)
    ref, got = outs["sdpa"], outs[NAME]
    common = [_common_prefix(a.token_ids, b.token_ids) for a, b in zip(ref, got)]
    diff = max((abs(x - y) for a, b, k in zip(ref, got, common) for x, y in zip(a.logprobs[:k], b.logprobs[:k])),
               default=0.0)
    rec = {"token_share": sum(common) / max(1, sum(len(a.token_ids) for a in ref)), "max_abs_logp_diff": diff}
    if exact and (rec["token_share"] < 1.0 or diff > 1e-3):
        rec["error"] = "float32 shared-prefix decode differs from the repeated-prefix decode"
    return rec


def lean_decode_parity(lm, requests, args, params) -> dict:
    """The same seeded sampling call with the HF engine's lean decode step and with the model's forward at every
    decode step: the lean step's logits are bit-identical (``mmevo/rollout/lean_step.py``), so every token and
    log-prob must be equal, in every dtype; any difference is an error."""
    samples, rec = {}, {}
    for name in ("lean", "forward"):
        engine = be.hf_engine(lm, args.device, max_batch_seqs=args.prompts * args.n, lean_decode=name == "lean",
                              fused_decode=False)
        t0 = time.perf_counter()
        samples[name] = [(c.token_ids, c.logprobs) for r in engine.generate(requests, params) for c in r]
        rec[f"{name}_s"] = time.perf_counter() - t0
    rec["tokens"] = sum(len(ids) for ids, _ in samples["lean"])
    rec["identical"] = samples["lean"] == samples["forward"]
    if not rec["identical"]:
        rec["error"] = "the lean decode step sampled other tokens or log-probs than the model's forward"
    return rec


def check_grpo_step(args, path) -> dict:
    import torch

    from mmevo.config import load_config
    from mmevo.data.synthetic import split_train_heldout
    from mmevo.grpo.trainer import GRPOTrainer
    from mmevo.models.loader import load_model
    from mmevo.rollout.factory import build_engine

    dtype = "bfloat16" if args.device.startswith("cuda") else "float32"
    prompts = 2 if args.quick else 16
    cfg = load_config(None, [
        f"model.device={args.device}", f"model.dtype={dtype}", "data.prompt_template=none", f"rollout.n={args.n}",
        f"rollout.max_tokens={args.max_tokens}", f"rollout.max_batch_seqs={prompts * args.n}",
        f"trainer.prompts_per_step={prompts}", f"trainer.mini_batch_prompts={prompts}",
        f"trainer.micro_batch_seqs={prompts * args.n}", "trainer.wandb_mode=disabled", "trainer.progress=false",
        "trainer.save_every=0", "reward.heads={format: 1.0}", "algo.kl_coef=0.01",
    ])
    torch.manual_seed(0)
    lm = load_model(path, dtype, args.device)
    ref = load_model(path, dtype, args.device).model.eval().requires_grad_(False)
    # nudge the policy away from the reference: the KL term then gives real gradients (the format reward of a
    # random model is 0 everywhere, so advantages alone would leave the update a no-op)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in lm.model.parameters():
            if p.dim() > 1:
                p.add_((torch.randn(p.shape, generator=g) * 0.02).to(p))
    train, _ = split_train_heldout(64, 0, seed=3)
    with tempfile.TemporaryDirectory() as tmp:
        cfg.trainer.output_dir = tmp
        trainer = GRPOTrainer(cfg, lm, build_engine(cfg, lm), train, [], ref_model=ref, log=False)
        _reset_peak(args.device)
        trainer.step()  # warm-up
        runs = []
        for _ in range(args.steps):
            be.sync(args.device)
            t0 = time.perf_counter()
            m = trainer.step()
            be.sync(args.device)
            runs.append((time.perf_counter() - t0, m))
    last = runs[-1][1]
    out = {"dtype": dtype, "prompts": prompts, "n": args.n, "max_tokens": args.max_tokens,
           "step_s_median": statistics.median(r[0] for r in runs), "step_s_all": [r[0] for r in runs],
           "stages_s": {k[5:]: v for k, v in last.items() if k.startswith("time/") and k != "time/step"},
           "gen_tokens_per_s": last.get("throughput/gen_tokens_per_s"), "loss": last.get("actor/loss"),
           "grad_norm": last.get("actor/grad_norm"), "kl": last.get("actor/kl"), **_peak_mem(args.device)}
    del trainer, lm, ref
    _free(args.device)
    return out


def check_packed_forward(args, path) -> dict:
    """Padding-free forwards against the padded unshared forward/backward on the tiny VL model (prompts and responses
    of different lengths, each prompt shared by two samples): the unshared packed row ("packed") and the shared-prompt
    row ("packed_shared": each prompt once, responses attending to it; on a GPU, varlen flash attention with separate
    query / key bounds and its bottom-right causal alignment). Log-probs and gradients per dtype, the kernel packed
    rows took and the time of each. float32 must agree to 1e-4; bfloat16 within twice its own rounding noise (the
    padded bfloat16 pass against the padded float32 one)."""
    import torch

    from mmevo.grpo.trainer import sequence_logprobs
    from mmevo.models.attention import packed_kernel
    from mmevo.models.loader import load_model, vision_token_ids

    sequences = 4 if args.quick else 16
    variants = {"padded": dict(share_prefix=False, padding_free=False),
                "packed": dict(share_prefix=False, padding_free=True),
                "packed_shared": dict(padding_free=True)}
    res: dict = {"sequences": sequences, "samples_per_prompt": 2}
    padded_fp32 = None
    for dtype in ("float32", "bfloat16") if args.device.startswith("cuda") else ("float32",):
        lm = load_model(path, dtype, args.device)
        randomize(lm.model, std=0.2, seed=4)
        lm.model.train()
        requests, _ = be.make_requests(lm, sequences // 2, 1)
        banned = set(vision_token_ids(lm.tokenizer))
        g = torch.Generator().manual_seed(0)
        ok_ids = [i for i in range(lm.model.config.get_text_config().vocab_size) if i not in banned]
        rs = [[ok_ids[j] for j in torch.randint(len(ok_ids), (8 + 7 * k % args.max_tokens,), generator=g)]
              for k in range(sequences)]
        ps = [requests[k // 2].prompt for k in range(sequences)]  # the same object twice: one group of two
        out = {}
        for name, kw in variants.items():
            times = []
            for _ in range(1 + args.repeats):
                lm.model.zero_grad(set_to_none=True)
                be.sync(args.device)
                t0 = time.perf_counter()
                logp, _, mask = sequence_logprobs(lm.model, ps, rs, lm.tokenizer.pad_token_id, 1.0, args.device, **kw)
                (logp * mask).sum().backward()
                be.sync(args.device)
                times.append(time.perf_counter() - t0)
            grads = {n: p.grad.float() for n, p in lm.model.named_parameters() if p.grad is not None}
            out[name] = ((logp * mask).detach().float(), grads, statistics.median(times[1:]))
        lp0, g0, t_pad = out["padded"]
        rec = {"kernel": packed_kernel(next(lm.model.parameters())), "padded_s": t_pad}
        if dtype == "bfloat16":
            rec["bf16_noise_logp"] = float((lp0 - padded_fp32).abs().max())
        else:
            padded_fp32 = lp0
        tol = 1e-4 if dtype == "float32" else max(2 * rec["bf16_noise_logp"], 1e-3)
        for name in ("packed", "packed_shared"):
            lp1, g1, t1 = out[name]
            prefix = "" if name == "packed" else "shared_"
            rec.update({f"{name}_s": t1, f"{prefix}max_abs_logp_diff": float((lp0 - lp1).abs().max()),
                        f"{prefix}max_rel_grad_diff": max(
                            float((g0[n] - g1[n]).abs().max() / g0[n].abs().max().clamp(min=1e-12)) for n in g0),
                        f"{prefix}same_params_with_grads": g0.keys() == g1.keys()})
        rec["ok"] = all(rec[f"{p}same_params_with_grads"] and rec[f"{p}max_abs_logp_diff"] <= tol
                        for p in ("", "shared_"))
        if not rec["ok"]:
            rec["error"] = "packed and padded forwards disagree beyond tolerance"
        res[dtype] = rec
        del lm
        _free(args.device)
    return res


def _train_command(args, path, output_dir, overrides: list[str]) -> list[str]:
    """``python -m torch.distributed.run --nproc_per_node 1 -m mmevo.cli train configs/grpo_tiny.yaml ...``: the real
    CLI as one process (nccl on GPU, gloo on CPU) on the tiny model at ``path``."""
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1", "--master_port",
            str(29500 + os.getpid() % 2000), "-m", "mmevo.cli", "train", str(ROOT / "configs" / "grpo_tiny.yaml"),
            f"model.path={path}", f"model.device={args.device}",
            f"model.dtype={'bfloat16' if args.device.startswith('cuda') else 'float32'}",
            "reward.heads={format: 1.0}", "trainer.wandb_mode=disabled", "trainer.progress=false",
            f"trainer.output_dir={output_dir}", *overrides]


_TERM_GRACE_S = 20.0  # a timed-out run gets SIGTERM this long (at most half its timeout) before the hard kill
_TIMED_OUT_RC = (124, 137)  # coreutils timeout: the command got SIGTERM (124), or SIGKILL after it (128 + 9)


def _run_train(cmd: list[str], timeout: float) -> tuple[subprocess.CompletedProcess | None, float, str]:
    """Run ``cmd`` (an ``mmevo train`` run, or the rehearsal script) from the checkout: (the finished process or None
    on a timeout, wall seconds, the stderr tail of a timed-out run). ``timeout`` is cut to the run's time left.

    A timed-out run is sent SIGTERM first (coreutils ``timeout``), SIGKILL only after a grace period: torchrun starts
    its worker in a session of its own and stops it only when it is itself terminated, so a SIGKILL to torchrun alone
    (what ``subprocess.run``'s timeout sends) left the worker running on, holding the GPU, beside the later checks."""
    timeout = max(1.0, min(timeout, _time_left()))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(
        os.pathsep)}
    wrapper = shutil.which("timeout")
    grace = min(_TERM_GRACE_S, timeout / 2)
    if wrapper:
        cmd = [wrapper, "-s", "TERM", "-k", f"{grace / 2:.1f}", f"{timeout - grace:.1f}", *cmd]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, cwd=str(ROOT), capture_output=True, text=True, timeout=timeout)
        if wrapper and proc.returncode in _TIMED_OUT_RC:
            return None, time.perf_counter() - t0, (proc.stderr or "")[-3000:]
        return proc, time.perf_counter() - t0, ""
    except subprocess.TimeoutExpired as e:
        tail = (e.stderr or b"")[-3000:]
        return None, time.perf_counter() - t0, tail.decode(errors="replace") if isinstance(tail, bytes) else tail


def _metrics_rows(output_dir: Path) -> list[dict]:
    metrics = output_dir / "metrics.jsonl"
    if not metrics.exists():
        return []
    return [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]


METRIC_KEYS = ("step", "time/step", "actor/loss", "actor/grad_norm", "actor/kl", "reward/total/mean",
               "response/length_mean", "throughput/gen_tokens_per_s")


def check_deepspeed(args, path) -> dict:
    try:
        import deepspeed  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return {"skipped": f"deepspeed not importable: {type(e).__name__}: {e}"}
    prompts = 2 if args.quick else 8
    steps = 2
    with tempfile.TemporaryDirectory() as tmp:
        cmd = _train_command(args, path, tmp, [
            f"trainer.deepspeed={ROOT / 'configs' / 'deepspeed' / 'zero2.json'}", f"trainer.steps={steps}",
            f"trainer.prompts_per_step={prompts}", f"trainer.mini_batch_prompts={prompts}", f"rollout.n={args.n}",
            f"rollout.max_tokens={args.max_tokens}", "data.n_train=32", "data.heldout=", "trainer.save_every=0"])
        proc, wall, timeout_tail = _run_train(cmd, args.train_timeout)
        out = {"rc": None if proc is None else proc.returncode, "wall_s": wall,
               "backend": "nccl" if args.device.startswith("cuda") else "gloo",
               "config": "configs/deepspeed/zero2.json", "processes": 1}
        rows = _metrics_rows(Path(tmp))
        out["steps_logged"] = len(rows)
        if rows:
            out["step_s_last"] = rows[-1].get("time/step")
            out["stages_s_last"] = {k[5:]: v for k, v in rows[-1].items()
                                    if k.startswith("time/") and k != "time/step"}
            out["grad_norm_last"] = rows[-1].get("actor/grad_norm")
        out["exported"] = (Path(tmp) / "final" / "config.json").exists()
        if proc is None:
            out.update(error=f"timed out after {wall:.0f}s", stderr_tail=timeout_tail)
        elif proc.returncode != 0:
            out["error"] = f"exit code {proc.returncode}"
            out["stderr_tail"] = proc.stderr[-3000:]
    return out


def check_zero3_vllm(args, path) -> dict:
    """ZeRO-3 in ONE torchrun process with ``rollout.engine=vllm`` through the real CLI: 2 GRPO steps (checkpoint at
    step 2), then a second run on the same output_dir with ``trainer.steps=3`` that must resume from step 2 and log
    step 3. The vLLM engine runs as the 7B config runs it (sleep mode level 2 on GPU, gradient checkpointing, the
    reference offloaded), eager by default (``--zero3-cuda-graphs`` for CUDA graphs: ~+30 s per run for compile and
    capture)."""
    try:
        import deepspeed  # noqa: F401
        import vllm  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return {"skipped": f"deepspeed / vllm not importable: {type(e).__name__}: {e}"}
    on_gpu = args.device.startswith("cuda")
    prompts = 2 if args.quick else 4
    n = 2 if args.quick else 4
    max_tokens = 16 if args.quick else 64
    common = [f"trainer.deepspeed={ROOT / 'configs' / 'deepspeed' / 'zero3.json'}", "rollout.engine=vllm",
              f"rollout.gpu_memory_utilization={args.gpu_memory_utilization}", "rollout.enable_sleep_mode=true",
              "rollout.sleep_level=2", f"rollout.enforce_eager={'false' if args.zero3_cuda_graphs else 'true'}",
              "model.gradient_checkpointing=true", "algo.kl_coef=0.01", "model.ref_offload=true",
              "data.train=synthetic", "data.n_train=32", "data.heldout=", f"trainer.prompts_per_step={prompts}",
              f"trainer.mini_batch_prompts={prompts}", f"rollout.n={n}", f"rollout.max_tokens={max_tokens}",
              f"rollout.max_batch_seqs={prompts * n}", "trainer.save_every=2"]
    out: dict = {"config": "configs/deepspeed/zero3.json", "processes": 1, "engine": "vllm",
                 "backend": "nccl" if on_gpu else "gloo", "sleep_level": 2 if on_gpu else None,
                 "cuda_graphs": bool(args.zero3_cuda_graphs and on_gpu), "prompts": prompts, "n": n,
                 "max_tokens": max_tokens, "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        for steps in (2, 3):  # the second run resumes the first's step-2 checkpoint
            proc, wall, timeout_tail = _run_train(_train_command(args, path, tmp, common + [f"trainer.steps={steps}"]),
                                                  args.train_timeout)
            run = {"steps": steps, "rc": None if proc is None else proc.returncode, "wall_s": wall}
            if proc is None:
                run.update(error=f"timed out after {wall:.0f}s", stderr_tail=timeout_tail)
            else:
                resumed = [line for line in proc.stdout.splitlines() if line.startswith("[mmevo] resumed from")]
                run["resumed"] = resumed[-1].rsplit("(step ", 1)[-1].rstrip(")") if resumed else None
                if proc.returncode != 0:
                    run.update(error=f"exit code {proc.returncode}", stderr_tail=proc.stderr[-3000:])
            rows = _metrics_rows(Path(tmp))
            run["steps_logged"] = [r.get("step") for r in rows]
            run["checkpoints"] = sorted(p.name for p in (Path(tmp) / "checkpoints").glob("step_*"))
            out["runs"].append(run)
            if "error" in run:
                break
        rows = _metrics_rows(Path(tmp))
        out["metrics"] = [{k: r.get(k) for k in METRIC_KEYS if k in r} for r in rows]
        out["exported"] = (Path(tmp) / "final" / "config.json").exists()
    runs = out["runs"]
    out["resumed_at_step_3"] = (len(runs) == 2 and runs[1].get("resumed") == "2"
                                and runs[1]["steps_logged"] == [1, 2, 3])
    failed = [r for r in runs if "error" in r]
    if failed:
        out["error"] = f"the run with trainer.steps={failed[0]['steps']} failed: {failed[0]['error']}"
    elif not out["resumed_at_step_3"]:
        out["error"] = "the second run did not continue at step 3 from the step-2 checkpoint"
    return out


def check_rehearsal(args, path) -> dict:
    """``scripts/rehearse_7b.py`` in its own process (a clean GPU for its memory figures): 7B shapes on a GPU,
    ``--scale tiny`` with ``--quick`` or on CPU."""
    scale = args.rehearsal_scale or ("tiny" if args.quick or not args.device.startswith("cuda") else "7b")
    cmd = [sys.executable, str(ROOT / "scripts" / "rehearse_7b.py"), "--device", args.device, "--scale", scale,
           "--cache-dir", args.cache_dir]
    if scale == "7b" and args.rehearsal_gpu_memory_utilization:
        cmd += ["--gpu-memory-utilization", str(args.rehearsal_gpu_memory_utilization)]
    no_vllm = ""  # e.g. a lent GPU machine whose image has no vLLM: the rehearsal's training phases still run
    try:
        import vllm  # noqa: F401  (check_env has imported it already where it imports)
    except Exception as e:  # noqa: BLE001
        no_vllm = f"{type(e).__name__}: {e}"
    if no_vllm:
        cmd += ["--skip", "vllm"]
    proc, wall, timeout_tail = _run_train(cmd, args.rehearsal_timeout)
    if proc is None:
        return {"scale": scale, "error": f"timed out after {wall:.0f}s", "stderr_tail": timeout_tail}
    try:
        out = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"scale": scale, "rc": proc.returncode, "error": "no JSON on stdout",
                "stderr_tail": proc.stderr[-3000:]}
    out.pop("args", None)
    if no_vllm:
        out["vllm"] = {"skipped": f"vllm not importable: {no_vllm} (engine phases: vllm_start, rollout, sleep, "
                                  f"weight_sync not run)"}
    out["rc"], out["wall_s"] = proc.returncode, wall
    if proc.returncode != 0 and "error" not in out:
        out["error"] = f"exit code {proc.returncode}"
    for name, phase in out.get("phases", {}).items():  # keep the JSON readable: tracebacks only where they matter
        if "traceback" in phase:
            phase["traceback"] = phase["traceback"][-1500:]
    return out


def check_vllm(args, path) -> dict:
    try:
        import mmevo  # noqa: F401  (torchvision shim first)
        import vllm
    except Exception as e:  # noqa: BLE001
        return {"skipped": f"vllm not importable: {type(e).__name__}: {e}"}
    from mmevo.models.loader import load_model

    res: dict = {"version": vllm.__version__}
    on_gpu = args.device.startswith("cuda")
    tmp = tempfile.mkdtemp(prefix="mmevo-gpu-check-")
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    # a randomised float32 policy, saved: vLLM starts from this checkpoint
    lm = load_model(path, "float32", args.device)
    randomize(lm.model)
    lm.model.save_pretrained(tmp)
    lm.processor.save_pretrained(tmp)
    lm = load_model(tmp, "float32", args.device)
    lm.model.eval()
    requests, _ = be.make_requests(lm, args.prompts, args.n)
    hf = be.hf_engine(lm, args.device, max_batch_seqs=args.prompts * args.n)
    engine = None
    for dtype in ("float32", "bfloat16") if on_gpu else ("float32",):
        try:
            engine, start_s = be.vllm_engine(tmp, lm, dtype, be.max_model_len(requests, args.max_tokens),
                                             gpu_memory_utilization=args.gpu_memory_utilization,
                                             enable_sleep_mode=on_gpu)
            res.update(dtype=dtype, start_s=start_s)
            break
        except Exception as e:  # noqa: BLE001  (e.g. no float32 attention backend on this GPU): try bf16
            res[f"start_error_{dtype}"] = be.error_record(e)
            _free(args.device)
    if engine is None:
        res["error"] = "the vLLM engine did not start"
        return res
    # which model runner this build picked by default (GPU 0.33: "v2" when Triton is present; CPU: "v1")
    res.update(model_runner=engine.model_runner, v2_runner_env=os.environ.get("VLLM_USE_V2_MODEL_RUNNER"),
               cuda_graphs=on_gpu)
    try:
        return _vllm_checks(args, res, engine, lm, hf, requests, on_gpu)
    finally:
        try:
            engine.close()
        except Exception as e:  # noqa: BLE001
            res["close"] = be.error_record(e)


def _vllm_checks(args, res, engine, lm, hf, requests, on_gpu) -> dict:
    import torch

    from mmevo.rollout.base import RolloutRequest, SamplingParams

    exact = res["dtype"] == "float32"

    try:
        params = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=args.max_tokens, seed=0)
        res["rollout"] = be.time_generate(engine, requests, params, args.repeats, args.device)
    except Exception as e:  # noqa: BLE001
        res["rollout"] = be.error_record(e)

    greedy = SamplingParams(temperature=0.0, max_tokens=args.parity_tokens)
    single = [RolloutRequest(r.prompt) for r in requests]

    def greedy_ids(eng):
        return [o[0].token_ids for o in eng.generate(single, greedy)]

    try:
        ref = hf.generate(single, greedy)
        got = engine.generate(single, greedy)
        agree = [_common_prefix(r[0].token_ids, g[0].token_ids) for r, g in zip(ref, got)]
        lp_diff = max((abs(a - b) for r, g, k in zip(ref, got, agree)
                       for a, b in zip(r[0].logprobs[:k], g[0].logprobs[:k])), default=0.0)
        res["greedy_parity"] = {"k": args.parity_tokens, "dtype": res["dtype"], "prompts": len(single),
                                "matching_prefix_tokens": agree, "all_match": all(a == args.parity_tokens
                                                                                  for a in agree),
                                "logprob_max_abs_diff": lp_diff, "expected_exact": exact}
    except Exception as e:  # noqa: BLE001
        res["greedy_parity"] = be.error_record(e)

    try:
        before = greedy_ids(engine)
        trained = copy.deepcopy(lm.model)
        randomize(trained, seed=11)  # stands in for an optimizer update (vision tower included)
        expected, after, back, sync_s = _sync_round_trip(engine, lm, trained, greedy_ids, args)
        res["weight_sync"] = {"sync_s": sync_s, "outputs_changed": expected != before,
                              "follows_new_weights": _follows(after, expected, exact), "restored": back == before}
        del trained
    except Exception as e:  # noqa: BLE001
        res["weight_sync"] = be.error_record(e)

    if on_gpu:
        try:
            before = greedy_ids(engine)
            free0 = torch.cuda.mem_get_info()[0]
            engine.sleep()
            freed = torch.cuda.mem_get_info()[0] - free0
            stale = engine.weights_stale
            if stale:  # level 2 dropped the weights: the trainer reloads them (weights -> sync -> KV cache)
                engine.sync_weights(lm.model)
            else:
                engine.wake()
            res["sleep_wake"] = {"enabled": engine.sleep_enabled, "level": engine.sleep_level,
                                 "runner": engine.model_runner, "freed_gib": freed / 2**30,
                                 "weights_stale_after_sleep": stale,
                                 "same_outputs_after_wake": greedy_ids(engine) == before}
        except Exception as e:  # noqa: BLE001
            res["sleep_wake"] = be.error_record(e)

    try:
        res["sleep_train_sync"] = sleep_train_sync(args, engine, lm, single, greedy_ids, exact, on_gpu)
    except Exception as e:  # noqa: BLE001
        res["sleep_train_sync"] = be.error_record(e)
    try:
        res["checkpoint_reload"] = checkpoint_reload(args, engine, lm, greedy_ids, exact)
    except Exception as e:  # noqa: BLE001
        res["checkpoint_reload"] = be.error_record(e)
    return res


def checkpoint_reload(args, engine, lm, greedy_ids, exact: bool) -> dict:
    """How a frozen role samples on the self-play loops' one engine per process (mmevo.rollout.shared_vllm): sleep
    (level 2 drops the weights), ``load_checkpoint`` of another saved model's safetensors into the woken engine, whose
    greedy ids must follow the HF engine on that model; then the policy is synced back."""
    before = greedy_ids(engine)
    other = copy.deepcopy(lm.model)
    randomize(other, seed=23)  # another role's weights
    saved = tempfile.mkdtemp(prefix="mmevo-gpu-check-role-")
    atexit.register(shutil.rmtree, saved, ignore_errors=True)
    other.save_pretrained(saved)
    engine.sleep()
    stale = bool(engine.weights_stale)
    expected, after, back, load_s = _sync_round_trip(engine, lm, other, greedy_ids, args,
                                                     load=lambda: engine.load_checkpoint(saved))
    res = {"weights_stale_after_sleep": stale, "load_s": load_s, "outputs_changed": expected != before,
           "follows_checkpoint": _follows(after, expected, exact), "restored": back == before}
    res.update(role_views(engine, saved, expected, greedy_ids, exact))
    return res


def role_views(engine, saved, expected, greedy_ids, exact: bool) -> dict:
    """The loops' role views (``mmevo.rollout.shared_vllm.RoleEngine``) on this engine, which holds the policy's
    weights: the frozen role saved at ``saved`` samples while the engine is awake (only the load's own cache resets
    stand between it and the policy's cached prefixes and image embeddings), then the policy's view closes (the
    engine sleeps: level 2 drops the weights) and the frozen role samples again (its files loaded into the woken
    engine). Both must give ``expected``, the HF engine's greedy ids on the saved model. Leaves the engine holding
    the saved model's weights, awake."""
    from mmevo.rollout.shared_vllm import RoleEngine, SharedVLLM

    shared = SharedVLLM(engine.max_model_len or 0)
    shared.engine = engine  # this check's engine, closed by check_vllm, not by the views
    policy_view, frozen_view = RoleEngine(shared, None), RoleEngine(shared, saved)
    shared.owner = policy_view
    try:
        awake = greedy_ids(frozen_view)
        policy_view.close()
        stale_after_close = bool(frozen_view.weights_stale)
        after_close = greedy_ids(frozen_view)
    finally:
        shared.engine = None
    return {"role_switches": shared.role_switches, "frozen_stale_after_close": stale_after_close,
            "follows_checkpoint_as_role_awake": _follows(awake, expected, exact),
            "follows_checkpoint_as_role_after_close": _follows(after_close, expected, exact)}


def sleep_train_sync(args, engine, lm, single, greedy_ids, exact: bool, on_gpu: bool) -> dict:
    """The trainer's cycle around an update: sleep -> one optimizer step while vLLM sleeps -> (level 2:
    ``weights_stale``, ``wake()`` refused) -> ``sync_weights`` (weights woken, loaded, then the KV cache) -> generate,
    which must follow the trained weights; then the original weights are synced back. On CPU sleep is a no-op and the
    rest runs as on GPU."""
    import torch

    from mmevo.grpo import algos
    from mmevo.grpo.trainer import sequence_logprobs

    before = greedy_ids(engine)
    free0 = torch.cuda.mem_get_info()[0] if on_gpu else 0
    engine.sleep()
    freed = (torch.cuda.mem_get_info()[0] - free0) if on_gpu else 0
    stale = bool(engine.weights_stale)
    wake_refused = None
    if stale:
        try:
            engine.wake()
            wake_refused = False
        except RuntimeError:
            wake_refused = True
    # one training step while vLLM sleeps: push the greedy outputs down (advantage -1), AdamW
    trained = copy.deepcopy(lm.model).train()
    opt = torch.optim.AdamW(trained.parameters(), lr=args.train_lr)
    logp, _, mask = sequence_logprobs(trained, [r.prompt for r in single], before, lm.tokenizer.pad_token_id, 1.0,
                                      args.device)
    adv = -torch.ones(len(single)).to(logp)
    loss, _ = algos.policy_loss(logp, logp.detach(), adv, mask)
    loss.backward()
    opt.step()
    trained.eval()
    del opt
    _free(args.device)
    expected, after, back, sync_s = _sync_round_trip(engine, lm, trained, greedy_ids, args)
    restored = back == before
    del trained
    return {"sleep_enabled": engine.sleep_enabled, "level": engine.sleep_level, "freed_gib": freed / 2**30,
            "weights_stale_after_sleep": stale, "wake_refused_while_stale": wake_refused,
            "train_loss": float(loss.detach()), "sync_s": sync_s, "outputs_changed_by_training": expected != before,
            "follows_trained_weights": _follows(after, expected, exact), "restored": restored}


# -- helpers ----------------------------------------------------------------------------------------------------------
def _sync_round_trip(engine, lm, trained, greedy_ids, args, load=None):
    """Greedy ids the HF engine gives with ``trained``; the vLLM engine's after loading ``trained`` (timed; ``load()``,
    by default ``sync_weights(trained)``) and after syncing the original weights back: (expected, after, back,
    sync_s)."""
    expected = greedy_ids(be.hf_engine(type(lm)(trained, lm.processor, lm.tokenizer, True, ""), args.device,
                                       max_batch_seqs=args.prompts))
    be.sync(args.device)
    t0 = time.perf_counter()
    if load is None:
        engine.sync_weights(trained)
    else:
        load()
    be.sync(args.device)
    sync_s = time.perf_counter() - t0
    after = greedy_ids(engine)
    engine.sync_weights(lm.model)
    return expected, after, greedy_ids(engine), sync_s


def _follows(after, expected, exact: bool):
    """Whether the engine's greedy ids equal the expected ones (float32: exactly), else the share of expected tokens
    on the common prefixes (bf16 drifts)."""
    if exact:
        return after == expected
    return sum(map(_common_prefix, after, expected)) / max(1, sum(map(len, expected)))


def _common_prefix(a, b) -> int:
    k = 0
    for x, y in zip(a, b):
        if x != y:
            break
        k += 1
    return k


def _peak_mem(device) -> dict:
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        return {"peak_gpu_mem_mib": torch.cuda.max_memory_allocated() / 2**20}
    return {}


def _reset_peak(device) -> None:
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def _free(device) -> None:
    import gc

    import torch

    gc.collect()
    if str(device).startswith("cuda") and torch.cuda.is_available():
        torch.cuda.empty_cache()


def run(args) -> dict:
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    t_start = time.perf_counter()
    # the budget covers the whole gpu_check.sh run: its wheel install and this interpreter's start count too
    _DEADLINE[:] = [t_start + args.budget_s - _seconds_since_launch()] if args.budget_s > 0 else []
    out: dict = {"args": {"device": args.device, "quick": args.quick, "prompts": args.prompts, "n": args.n,
                          "max_tokens": args.max_tokens, "repeats": args.repeats, "skip": args.skip,
                          "rehearsal_scale": args.rehearsal_scale or None, "budget_s": args.budget_s or None},
                 "complete": False}
    try:
        out["env"] = check_env(args)
    except Exception as e:  # noqa: BLE001
        out["env"] = be.error_record(e)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        out["error"] = "--device cuda, but torch sees no GPU (use --device cpu for the CPU variant)"
        return out
    try:
        path = be.tiny_model_path(args.cache_dir)  # built locally: no hub
    except Exception as e:  # noqa: BLE001
        out["error"] = "could not build the tiny model"
        out["tiny_model"] = be.error_record(e)
        return out
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    funcs = {"hf_rollout": check_hf_rollout, "grpo_step": check_grpo_step, "packed_forward": check_packed_forward,
             "deepspeed_zero2": check_deepspeed,
             "zero3_vllm": check_zero3_vllm, "rehearsal_7b": check_rehearsal, "vllm": check_vllm}
    for name in CHECKS:
        if name in skip:
            out[name] = {"skipped": "--skip"}
            continue
        if _time_left() < CHECK_NEEDS_S[name]:
            out[name] = {"skipped": f"time budget: {max(0.0, _time_left()):.0f}s of {args.budget_s:.0f}s left, the "
                                    f"check needs ~{CHECK_NEEDS_S[name]}s"}
            print(f"[gpu_check] {name}: skipped ({out[name]['skipped']})", file=sys.stderr)
            _write_partial(args, out)
            continue
        t0 = time.perf_counter()
        try:
            out[name] = funcs[name](args, path)
        except Exception as e:  # noqa: BLE001
            out[name] = be.error_record(e)
        out[name]["check_s"] = time.perf_counter() - t0
        print(f"[gpu_check] {name}: {'error' if _failed(out[name]) else 'ok'} "
              f"({out[name]['check_s']:.1f}s)", file=sys.stderr)
        _write_partial(args, out)
    out["failed"] = [k for k in CHECKS if _failed(out.get(k, {}))]
    out["skipped"] = [k for k in CHECKS if isinstance(out.get(k), dict) and "skipped" in out[k]]
    out["total_s"] = time.perf_counter() - t_start
    out["complete"] = True
    return out


def _seconds_since_launch() -> float:
    """Seconds since scripts/gpu_check.sh started (``GPU_CHECK_STARTED``, Unix time it exports); 0 without it."""
    try:
        return max(0.0, time.time() - float(os.environ.get("GPU_CHECK_STARTED", "")))
    except ValueError:
        return 0.0


def _write_partial(args, out: dict) -> None:
    """The JSON so far to ``--out`` (replaced whole: a reader never sees half a file)."""
    if not args.out:
        return
    tmp = Path(args.out + ".tmp")
    tmp.write_text(json.dumps(out, indent=2, default=str) + "\n")
    os.replace(tmp, args.out)


# the verdicts of the engine checks: False means the engine served wrong weights or outputs (or, for the
# "outputs_changed" ones, that the check could not tell), a failure as much as an exception is
VERDICTS = ("follows_checkpoint", "follows_checkpoint_as_role_awake", "follows_checkpoint_as_role_after_close",
            "follows_new_weights", "follows_trained_weights", "restored", "same_outputs_after_wake", "outputs_changed",
            "outputs_changed_by_training", "wake_refused_while_stale")


def _failed(rec) -> bool:
    """A check failed when it, or one of its parts, recorded an error or a verdict that is False."""
    if not isinstance(rec, dict):
        return False
    if "error" in rec or any(rec.get(k) is False for k in VERDICTS):
        return True
    return any(_failed(v) for k, v in rec.items() if not k.startswith("start_error"))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with be.StdoutToStderr() as stdout:
        out = run(args)
        text = json.dumps(out, indent=2, default=str)
        stdout.emit(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
