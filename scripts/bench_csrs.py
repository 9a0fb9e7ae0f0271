"""Rollout cost of CSRS vs a plain majority-vote rollout on the same engine and model; prints JSON.

CSRS (n maternal + m re-inferences from each anchor at omega) against plain n-sample groups. Responses are forced
to run to --max-tokens (no stop token) so both sides decode known lengths. Reported: wall time of each rollout
(median of --repeats), generated and prefilled token counts, and the ratio. Decode-token bound of the ratio:
(n + n*m*(1-omega)) / n = 2.5 for n=8, m=5, omega=0.7; re-prefilling every re-inference instead of sharing one
prefill per anchor would push it towards 6.

    OMP_NUM_THREADS=1 python scripts/bench_csrs.py --out bench_csrs.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")


def measure(args: argparse.Namespace) -> dict:
    """Median rollout times and token counts of the majority-vote and CSRS rollouts."""
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    from mmevo.config import load_config
    from mmevo.csrs.strategy import CSRSStrategy
    from mmevo.data.synthetic import generate_geometry
    from mmevo.grpo.trainer import GRPOTrainer
    from mmevo.rollout.strategy import PlainGroups
    from mmevo.models.loader import load_model, vision_token_ids
    from mmevo.models.tiny import build_tiny_qwen2_5_vl
    from mmevo.rollout.hf import HFEngine

    path = build_tiny_qwen2_5_vl(Path(args.cache_dir) / "tiny-qwen2.5-vl")
    lm = load_model(path)
    cfg = load_config(None, [
        "data.prompt_template=none", f"rollout.n={args.n}", f"rollout.max_tokens={args.max_tokens}",
        f"trainer.prompts_per_step={args.prompts}", f"trainer.mini_batch_prompts={args.prompts}",
        "trainer.wandb_mode=disabled", "trainer.progress=false", "algo.kl_coef=0", "csrs.enabled=true",
        f"csrs.m={args.m}", f"csrs.omega={args.omega}", f"csrs.perturb={bool(args.perturb)}",
        f"rollout.max_batch_seqs={args.prompts * args.n * args.m}", "reward.heads={sfr: 1.0}",
    ])
    # no stop ids: every response decodes exactly max_tokens, so both sides do known work
    engine = HFEngine(lm.model, lm.tokenizer.pad_token_id, stop_ids=[], max_batch_seqs=cfg.rollout.max_batch_seqs,
                      banned_ids=vision_token_ids(lm.tokenizer))
    examples = generate_geometry(args.prompts, seed=0)
    trainer = GRPOTrainer(cfg, lm, engine, examples, [], log=False)

    def timed(strategy) -> tuple[float, dict]:
        engine.stats = {"prefill_tokens": 0, "generated_tokens": 0, "prefill_s": 0.0}
        t0 = time.perf_counter()
        strategy.rollout(trainer.rollout_context(), examples)
        return time.perf_counter() - t0, dict(engine.stats)

    results = {}
    for name, fn in (("majority_vote", PlainGroups()), ("csrs", CSRSStrategy(cfg.csrs))):
        timed(fn)  # warm-up
        runs = [timed(fn) for _ in range(args.repeats)]
        results[name] = {"rollout_s_median": statistics.median(r[0] for r in runs),
                         "rollout_s_all": [r[0] for r in runs], **runs[-1][1],
                         "prefill_s_median": statistics.median(r[1]["prefill_s"] for r in runs)}
        print(f"[bench_csrs] {name}: {results[name]['rollout_s_median']:.3f}s", file=sys.stderr)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=8, help="prompts per rollout")
    ap.add_argument("--n", type=int, default=8, help="maternal responses per prompt")
    ap.add_argument("--m", type=int, default=5, help="re-inferences per maternal response")
    ap.add_argument("--omega", type=float, default=0.7, help="retracing rate")
    ap.add_argument("--max-tokens", type=int, default=128, help="response length (forced)")
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats (after one warm-up)")
    ap.add_argument("--cache-dir", default=".cache/mmevo", help="where the tiny model is built")
    ap.add_argument("--perturb", type=int, default=1, help="1: VSP images for re-inferences (as in CSRS)")
    ap.add_argument("--out", default="", help="also write the JSON here")
    args = ap.parse_args()

    # stdout carries only the JSON: transformers imports DeepSpeed, whose logger writes to stdout (on a first run,
    # "Setting accelerator to CPU" while the tiny model is built)
    with contextlib.redirect_stdout(sys.stderr):
        results = measure(args)
    mv, cs = results["majority_vote"], results["csrs"]
    anchor = int(args.omega * args.max_tokens)
    out = {
        "config": {"prompts": args.prompts, "n": args.n, "m": args.m, "omega": args.omega,
                   "max_tokens": args.max_tokens, "perturb": bool(args.perturb), "engine": "hf",
                   "threads": int(os.environ["OMP_NUM_THREADS"])},
        "majority_vote": mv,
        "csrs": cs,
        "ratio_csrs_over_mv": cs["rollout_s_median"] / mv["rollout_s_median"],
        "decode_token_bound": (args.n + args.n * args.m * (1 - args.omega)) / args.n,
        "generated_token_ratio": cs["generated_tokens"] / mv["generated_tokens"],
        # what re-prefilling every re-inference (no prefix sharing) would have prefilled
        "naive_reprefill_tokens": mv["prefill_tokens"] + args.prompts * args.n * args.m * (
            mv["prefill_tokens"] / args.prompts + anchor),
        "target_ratio": 2.6,
        # the re-inferences' own prefills (prompt with its perturbed image + anchor prefix, one per anchor): what the
        # ratio would be without them, i.e. decode alone
        "csrs_extra_prefill_s": cs["prefill_s_median"] - mv["prefill_s_median"],
        "ratio_without_extra_prefill": (cs["rollout_s_median"] - (cs["prefill_s_median"] - mv["prefill_s_median"]))
        / mv["rollout_s_median"],
    }
    out["meets_target"] = out["ratio_csrs_over_mv"] <= out["target_ratio"]
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
