"""One-shot accelerator check of mmevo on the embedded tiny Qwen2.5-VL; prints ONE JSON object on stdout.

Checks, each in its own try/except (a failure is recorded as {"error": ...} and the others still run):
  env              torch / transformers / deepspeed / vllm versions, the device
  hf_rollout       HF-engine rollout tokens/s in float32 and bfloat16 (forced length: no stop token)
  grpo_step        GRPO step time in one process (model.device=DEVICE, reference model + KL, format reward)
  deepspeed_zero2  `python -m mmevo.cli train ... trainer.deepspeed=configs/deepspeed/zero2.json` as 1 process
                   under torchrun (nccl on GPU, gloo on CPU): exit code and step time (skipped without deepspeed)
  vllm             vLLM engine (skipped without vllm): start time, tokens/s, greedy parity with the HF engine in
                   float32 on the first K tokens (token ids and log-probs), weight sync (the engine follows a changed
                   model and back), sleep/wake on GPU

The tiny model is built locally (no hub). `--device cpu --quick` runs every check on CPU at toy sizes.

    python scripts/gpu_check.py --device cuda           # what scripts/gpu_check.sh runs on the GPU machine
    OMP_NUM_THREADS=1 python scripts/gpu_check.py --device cpu --quick
"""

from __future__ import annotations

import argparse
import copy
import json
import os
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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda | cpu")
    ap.add_argument("--quick", action="store_true", help="toy sizes (the CPU test of this script)")
    ap.add_argument("--cache-dir", default=".cache/mmevo", help="where the tiny model is built")
    ap.add_argument("--parity-tokens", type=int, default=32, help="K: greedy tokens compared between the engines")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.3, help="vLLM's share of the GPU")
    ap.add_argument("--skip", default="", help="comma-separated checks to skip (hf_rollout,grpo_step,...)")
    ap.add_argument("--out", default="", help="also write the JSON here")
    args = ap.parse_args(argv)
    q = args.quick
    args.prompts, args.n, args.max_tokens, args.repeats, args.steps = (2, 2, 16, 1, 1) if q else (8, 8, 128, 3, 3)
    args.parity_tokens = min(args.parity_tokens, 8 if q else args.parity_tokens)
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
            del lm, engine
            _free(args.device)
        except Exception as e:  # noqa: BLE001
            res[dtype] = be.error_record(e)
    return res


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


def check_deepspeed(args, path) -> dict:
    try:
        import deepspeed  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return {"skipped": f"deepspeed not importable: {type(e).__name__}: {e}"}
    prompts = 2 if args.quick else 8
    steps = 2
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1", "--master_port",
               str(29500 + os.getpid() % 2000), "-m", "mmevo.cli", "train", str(ROOT / "configs" / "grpo_tiny.yaml"),
               f"model.path={path}", f"model.device={args.device}",
               f"model.dtype={'bfloat16' if args.device.startswith('cuda') else 'float32'}",
               f"trainer.deepspeed={ROOT / 'configs' / 'deepspeed' / 'zero2.json'}", f"trainer.steps={steps}",
               f"trainer.prompts_per_step={prompts}", f"trainer.mini_batch_prompts={prompts}",
               f"rollout.n={args.n}", f"rollout.max_tokens={args.max_tokens}", "data.n_train=32", "data.heldout=",
               "reward.heads={format: 1.0}", "trainer.save_every=0", "trainer.wandb_mode=disabled",
               "trainer.progress=false", f"trainer.output_dir={tmp}"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep)}
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, cwd=str(ROOT), capture_output=True, text=True, timeout=540)
        wall = time.perf_counter() - t0
        out = {"rc": proc.returncode, "wall_s": wall, "backend": "nccl" if args.device.startswith("cuda") else "gloo",
               "config": "configs/deepspeed/zero2.json", "processes": 1}
        metrics = Path(tmp) / "metrics.jsonl"
        if metrics.exists():
            rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
            out["steps_logged"] = len(rows)
            if rows:
                out["step_s_last"] = rows[-1].get("time/step")
                out["stages_s_last"] = {k[5:]: v for k, v in rows[-1].items()
                                        if k.startswith("time/") and k != "time/step"}
                out["grad_norm_last"] = rows[-1].get("actor/grad_norm")
        out["exported"] = (Path(tmp) / "final" / "config.json").exists()
        if proc.returncode != 0:
            out["error"] = f"exit code {proc.returncode}"
            out["stderr_tail"] = proc.stderr[-3000:]
    return out


def check_vllm(args, path) -> dict:
    try:
        import mmevo  # noqa: F401  (torchvision shim first)
        import vllm
    except Exception as e:  # noqa: BLE001
        return {"skipped": f"vllm not importable: {type(e).__name__}: {e}"}
    import torch

    from mmevo.models.loader import load_model
    from mmevo.rollout.base import RolloutRequest, SamplingParams

    res: dict = {"version": vllm.__version__}
    on_gpu = args.device.startswith("cuda")
    tmp = tempfile.mkdtemp(prefix="mmevo-gpu-check-")
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
        expected = greedy_ids(be.hf_engine(type(lm)(trained, lm.processor, lm.tokenizer, True, ""), args.device,
                                           max_batch_seqs=args.prompts))
        be.sync(args.device)
        t0 = time.perf_counter()
        engine.sync_weights(trained)
        be.sync(args.device)
        sync_s = time.perf_counter() - t0
        after = greedy_ids(engine)
        engine.sync_weights(lm.model)
        back = greedy_ids(engine)
        res["weight_sync"] = {"sync_s": sync_s, "outputs_changed": expected != before,
                              "follows_new_weights": after == expected if exact else
                              sum(map(_common_prefix, after, expected)) / max(1, sum(map(len, expected))),
                              "restored": back == before}
        del trained
    except Exception as e:  # noqa: BLE001
        res["weight_sync"] = be.error_record(e)

    if on_gpu:
        try:
            before = greedy_ids(engine)
            free0 = torch.cuda.mem_get_info()[0]
            engine.sleep()
            freed = torch.cuda.mem_get_info()[0] - free0
            stale = bool(getattr(engine, "weights_stale", False))
            if stale:  # level 2 dropped the weights: the trainer reloads them (weights -> sync -> KV cache)
                engine.sync_weights(lm.model)
            else:
                engine.wake()
            res["sleep_wake"] = {"enabled": engine.sleep_enabled, "level": getattr(engine, "sleep_level", None),
                                 "runner": getattr(engine, "model_runner", None), "freed_gib": freed / 2**30,
                                 "weights_stale_after_sleep": stale,
                                 "same_outputs_after_wake": greedy_ids(engine) == before}
        except Exception as e:  # noqa: BLE001
            res["sleep_wake"] = be.error_record(e)
    return res


# -- helpers ----------------------------------------------------------------------------------------------------------
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


CHECKS = ("hf_rollout", "grpo_step", "deepspeed_zero2", "vllm")


def run(args) -> dict:
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    t_start = time.perf_counter()
    out: dict = {"args": {"device": args.device, "quick": args.quick, "prompts": args.prompts, "n": args.n,
                          "max_tokens": args.max_tokens, "repeats": args.repeats}}
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
    funcs = {"hf_rollout": check_hf_rollout, "grpo_step": check_grpo_step, "deepspeed_zero2": check_deepspeed,
             "vllm": check_vllm}
    for name in CHECKS:  # vLLM last: it binds this process's threads on CPU and takes GPU memory
        if name in skip:
            out[name] = {"skipped": "--skip"}
            continue
        t0 = time.perf_counter()
        try:
            out[name] = funcs[name](args, path)
        except Exception as e:  # noqa: BLE001
            out[name] = be.error_record(e)
        out[name]["check_s"] = time.perf_counter() - t0
        print(f"[gpu_check] {name}: {'error' if _failed(out[name]) else 'ok'} "
              f"({out[name]['check_s']:.1f}s)", file=sys.stderr)
    out["failed"] = [k for k in CHECKS if _failed(out.get(k, {}))]
    out["total_s"] = time.perf_counter() - t_start
    return out


def _failed(rec) -> bool:
    """A check failed when it, or one of its parts, recorded an error."""
    if not isinstance(rec, dict):
        return False
    return "error" in rec or any(_failed(v) for k, v in rec.items() if not k.startswith("start_error"))


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
