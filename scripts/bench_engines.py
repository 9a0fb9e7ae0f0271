"""Rollout throughput of the vLLM engine against the HF engine on the same requests, and the CSRS / majority-vote
rollout time ratio on the vLLM engine; prints JSON.

Both engines get the same P prompts x n samples with no stop token (``stop_ids`` empty), so every completion decodes
exactly --max-tokens tokens and both sides do the same work. Reported per engine: start time (model load, for vLLM
the whole engine start), the median wall time of --repeats generate() calls after one warm-up, and generated
tokens/s. The HF engine is timed first: vLLM's CPU backend binds this process's threads when it starts.

The CSRS part mirrors ``scripts/bench_csrs.py`` on the vLLM engine: a GRPOTrainer around the engine, ``PlainGroups``
(n samples per prompt, the majority-vote rollout) against ``CSRSStrategy`` (n maternal + m re-inferences from each
anchor at omega, VSP images). Decode-token bound of the ratio: (n + n*m*(1-omega)) / n = 2.5 for n=8, m=5,
omega=0.7; target <= 2.6.

Float32 by default (the tiny model is randomly initialised: bf16 sampling drifts away from it). Without vLLM the
output holds ``{"vllm": {"error": ...}}`` and the HF engine is still timed.

    OMP_NUM_THREADS=1 python scripts/bench_engines.py --prompts 4 --max-tokens 64 --repeats 2
    python scripts/bench_engines.py --device cuda --prompts 32 --max-tokens 256 --out bench_engines.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=8, help="prompts per rollout (P)")
    ap.add_argument("--n", type=int, default=8, help="samples per prompt (maternal responses for CSRS)")
    ap.add_argument("--m", type=int, default=5, help="CSRS re-inferences per maternal response")
    ap.add_argument("--omega", type=float, default=0.7, help="CSRS retracing rate")
    ap.add_argument("--max-tokens", type=int, default=128, help="response length (forced: no stop token)")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats (after one warm-up)")
    ap.add_argument("--device", default="cpu", help="cpu | cuda")
    ap.add_argument("--dtype", default="float32", help="float32 | bfloat16 (both engines)")
    ap.add_argument("--cache-dir", default=".cache/mmevo", help="where the tiny model is built")
    ap.add_argument("--kv-cache-gb", type=int, default=1, help="vLLM on CPU: KV cache size in GiB")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.3, help="vLLM on GPU: memory share")
    ap.add_argument("--csrs", type=int, default=1, help="1: also time CSRS vs majority vote on the vLLM engine")
    ap.add_argument("--out", default="", help="also write the JSON here")
    return ap.parse_args(argv)


# -- shared pieces (scripts/gpu_check.py imports them) ---------------------------------------------------------------
def sync(device) -> None:
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        torch.cuda.synchronize()


def tiny_model_path(cache_dir: str | Path) -> Path:
    """The embedded tiny Qwen2.5-VL, built locally once (no hub)."""
    from mmevo.models.tiny import build_tiny_qwen2_5_vl

    return build_tiny_qwen2_5_vl(Path(cache_dir) / "tiny-qwen2.5-vl")


def make_requests(lm, prompts: int, n: int, seed: int = 0):
    """P synthetic geometry prompts (encoded once), each asking for n samples; returns (requests, examples)."""
    from mmevo.data.synthetic import generate_geometry
    from mmevo.grpo.trainer import PromptCache
    from mmevo.rollout.base import RolloutRequest

    examples = generate_geometry(prompts, seed=seed)
    cache = PromptCache(lm.processor, lm.is_vl, "none")
    return [RolloutRequest(cache(ex), n=n) for ex in examples], examples


def hf_engine(lm, device: str, max_batch_seqs: int, stop_ids=(), lean_decode: bool = True, fused_decode: bool = True):
    from mmevo.models.loader import vision_token_ids
    from mmevo.rollout.hf import HFEngine

    return HFEngine(lm.model, lm.tokenizer.pad_token_id, stop_ids=list(stop_ids), max_batch_seqs=max_batch_seqs,
                    device=device, banned_ids=vision_token_ids(lm.tokenizer), lean_decode=lean_decode,
                    fused_decode=fused_decode)


def vllm_engine(path, lm, dtype: str, max_model_len: int, kv_cache_gb: int = 1, gpu_memory_utilization: float = 0.3,
                stop_ids=(), seed: int = 0, **kwargs):
    """(engine, start seconds). Raises whatever vLLM raises (the caller records it)."""
    import mmevo  # noqa: F401  (torchvision shim before vLLM imports torchvision)
    from mmevo.models.loader import vision_token_ids
    from mmevo.rollout.vllm_engine import VLLMEngine

    t0 = time.perf_counter()
    engine = VLLMEngine(path, lm.tokenizer, list(stop_ids), banned_ids=vision_token_ids(lm.tokenizer), dtype=dtype,
                        gpu_memory_utilization=gpu_memory_utilization, seed=seed, max_model_len=max_model_len,
                        kv_cache_gb=kv_cache_gb, **kwargs)
    return engine, time.perf_counter() - t0


def max_model_len(requests, max_tokens: int) -> int:
    longest = max(len(r.prompt.input_ids) for r in requests)
    return ((longest + max_tokens + 64) // 64) * 64


def time_generate(engine, requests, params, repeats: int, device="cpu") -> dict:
    """One warm-up generate(), then ``repeats`` timed ones: median seconds and generated tokens/s."""
    engine.generate(requests, params)
    runs = []
    for _ in range(max(1, repeats)):
        sync(device)
        t0 = time.perf_counter()
        outs = engine.generate(requests, params)
        sync(device)
        dt = time.perf_counter() - t0
        lengths = [len(c.token_ids) for o in outs for c in o]
        runs.append((dt, sum(lengths), lengths))
    med = statistics.median(r[0] for r in runs)
    tokens = runs[-1][1]
    lengths = runs[-1][2]
    return {"s_median": med, "s_all": [r[0] for r in runs], "sequences": len(lengths), "gen_tokens": tokens,
            "tokens_per_s": tokens / med if med > 0 else None,
            "all_full_length": all(n == params.max_tokens for n in lengths)}


def csrs_ratio(lm, engine, examples, args, device: str) -> dict:
    """Majority-vote (plain groups) vs CSRS rollout wall time on ``engine`` (median of --repeats after a warm-up)."""
    from mmevo.config import load_config
    from mmevo.csrs.strategy import CSRSStrategy
    from mmevo.grpo.trainer import GRPOTrainer
    from mmevo.rollout.strategy import PlainGroups

    cfg = load_config(None, [
        "data.prompt_template=none", f"rollout.n={args.n}", f"rollout.max_tokens={args.max_tokens}",
        f"trainer.prompts_per_step={len(examples)}", f"trainer.mini_batch_prompts={len(examples)}",
        "trainer.wandb_mode=disabled", "trainer.progress=false", "algo.kl_coef=0", "csrs.enabled=true",
        f"csrs.m={args.m}", f"csrs.omega={args.omega}", "reward.heads={sfr: 1.0}", f"model.device={device}",
    ])
    trainer = GRPOTrainer(cfg, lm, engine, examples, [], log=False)

    def timed(strategy) -> tuple[float, dict]:
        engine.stats = {"prefill_tokens": 0, "generated_tokens": 0}
        sync(device)
        t0 = time.perf_counter()
        strategy.rollout(trainer.rollout_context(), examples)
        sync(device)
        return time.perf_counter() - t0, dict(engine.stats)

    res = {}
    for name, fn in (("majority_vote", PlainGroups()), ("csrs", CSRSStrategy(cfg.csrs))):
        timed(fn)  # warm-up
        runs = [timed(fn) for _ in range(max(1, args.repeats))]
        res[name] = {"rollout_s_median": statistics.median(r[0] for r in runs), "rollout_s_all": [r[0] for r in runs],
                     **runs[-1][1]}
    mv, cs = res["majority_vote"], res["csrs"]
    out = {**res, "ratio_csrs_over_mv": cs["rollout_s_median"] / mv["rollout_s_median"],
           "decode_token_bound": (args.n + args.n * args.m * (1 - args.omega)) / args.n,
           "generated_token_ratio": cs["generated_tokens"] / max(1, mv["generated_tokens"]), "target_ratio": 2.6}
    out["meets_target"] = out["ratio_csrs_over_mv"] <= out["target_ratio"]
    return out


class StdoutToStderr:
    """Send everything written to stdout (vLLM's and DeepSpeed's logs, at the file-descriptor level) to stderr while
    active; ``emit`` writes to the real stdout, so stdout carries only the JSON result."""

    def __enter__(self):
        sys.stdout.flush()
        self._saved = os.dup(1)
        os.dup2(2, 1)
        return self

    def emit(self, text: str) -> None:
        sys.stdout.flush()
        os.write(self._saved, (text + "\n").encode())

    def __exit__(self, *exc):
        sys.stdout.flush()
        os.dup2(self._saved, 1)
        os.close(self._saved)


def error_record(e: BaseException) -> dict:
    return {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-4000:]}


# -- the benchmark ----------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with StdoutToStderr() as stdout:
        out = run(args)
        if out is None:
            return 2
        text = json.dumps(out, indent=2)
        stdout.emit(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


def run(args: argparse.Namespace) -> dict | None:
    import torch

    threads = int(os.environ["OMP_NUM_THREADS"])
    torch.set_num_threads(threads)
    import mmevo  # noqa: F401
    from mmevo.models.loader import load_model
    from mmevo.rollout.base import SamplingParams

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_engines: --device cuda but torch sees no GPU", file=sys.stderr)
        return None
    path = tiny_model_path(args.cache_dir)
    t0 = time.perf_counter()
    lm = load_model(path, args.dtype, args.device)
    lm.model.eval()
    load_s = time.perf_counter() - t0
    requests, examples = make_requests(lm, args.prompts, args.n)
    params = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=args.max_tokens, seed=0)
    out: dict = {"config": {"prompts": args.prompts, "n": args.n, "m": args.m, "omega": args.omega,
                            "max_tokens": args.max_tokens, "repeats": args.repeats, "device": args.device,
                            "dtype": args.dtype, "threads": threads,
                            "prompt_tokens": [len(r.prompt.input_ids) for r in requests]}}

    # HF engine first (vLLM's CPU backend rebinds the process's threads when it starts)
    try:
        hf = hf_engine(lm, args.device, max_batch_seqs=args.prompts * args.n * max(1, args.m))
        out["hf"] = {"start_s": load_s, **time_generate(hf, requests, params, args.repeats, args.device)}
        print(f"[bench_engines] hf: {out['hf']['tokens_per_s']:.0f} tok/s", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 - recorded, the vLLM half still runs
        out["hf"] = error_record(e)

    try:
        import vllm  # noqa: F401
    except Exception as e:  # noqa: BLE001
        out["vllm"] = {"error": f"vllm not importable: {type(e).__name__}: {e}"}
    else:
        try:
            engine, start_s = vllm_engine(path, lm, args.dtype, max_model_len(requests, args.max_tokens),
                                          args.kv_cache_gb, args.gpu_memory_utilization)
            out["vllm"] = {"version": vllm.__version__, "start_s": start_s,
                           "torch_threads_after_start": torch.get_num_threads(),
                           **time_generate(engine, requests, params, args.repeats, args.device)}
            print(f"[bench_engines] vllm: {out['vllm']['tokens_per_s']:.0f} tok/s", file=sys.stderr)
            if "tokens_per_s" in out.get("hf", {}):
                out["speedup_vllm_over_hf"] = out["vllm"]["tokens_per_s"] / out["hf"]["tokens_per_s"]
            if args.csrs:
                try:
                    out["csrs_vllm"] = csrs_ratio(lm, engine, examples, args, args.device)
                    print(f"[bench_engines] csrs/mv on vllm: {out['csrs_vllm']['ratio_csrs_over_mv']:.2f}",
                          file=sys.stderr)
                except Exception as e:  # noqa: BLE001
                    out["csrs_vllm"] = error_record(e)
        except Exception as e:  # noqa: BLE001
            out["vllm"] = error_record(e)
    return out


if __name__ == "__main__":
    sys.exit(main())
