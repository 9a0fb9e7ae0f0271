#!/usr/bin/env python
"""HF-engine sampling with the fused and the lean decode steps against the model's own forward per decode step;
prints JSON.

The three variants sample the same P prompts x n completions of the tiny Qwen2.5-VL with one seed and no stop token,
so every completion decodes exactly --max-tokens tokens. They alternate in one process (--repeats calls each, after one
warm-up call of each), so a slow or fast phase of the machine reaches all alike; reported are the wall times of every
call, their medians, the ratios to the forward, whether lean and forward sampled the same tokens and log-probs (they
must: the lean step's logits are bit-identical, ``mmevo/rollout/lean_step.py``), and the share of tokens the fused
step (the engine's default on float32 CPU: logits equal to float32 rounding, ``mmevo/rollout/fused_decode.py``) drew
as the forward did before a draw first differed.

    OMP_NUM_THREADS=1 python scripts/bench_decode.py                  # P=8 n=8, 64 tokens, 8 calls each
    OMP_NUM_THREADS=1 python scripts/bench_decode.py --prompts 1 --n 4 --max-tokens 32
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
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=8, help="prompts per call (P)")
    ap.add_argument("--n", type=int, default=8, help="completions per prompt")
    ap.add_argument("--max-tokens", type=int, default=64, help="tokens per completion (forced: no stop token)")
    ap.add_argument("--repeats", type=int, default=8, help="timed calls of each variant")
    ap.add_argument("--cache-dir", default=".cache/mmevo", help="where the tiny model is built")
    ap.add_argument("--out", default="", help="also write the JSON here")
    a = ap.parse_args(argv)
    for name in ("prompts", "n", "max_tokens", "repeats"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    return a


def measure(a: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    from mmevo.data.synthetic import generate_geometry
    from mmevo.models.inputs import encode_prompt
    from mmevo.models.loader import load_model, vision_token_ids
    from mmevo.models.tiny import build_tiny_qwen2_5_vl
    from mmevo.rollout.base import RolloutRequest, SamplingParams
    from mmevo.rollout.hf import HFEngine

    lm = load_model(build_tiny_qwen2_5_vl(Path(a.cache_dir) / "tiny-qwen2.5-vl"))
    requests = [RolloutRequest(encode_prompt(lm.processor, True, ex.problem, ex.images), n=a.n)
                for ex in generate_geometry(a.prompts, seed=0)]
    params = SamplingParams(temperature=1.0, max_tokens=a.max_tokens, seed=0)
    engines = {name: HFEngine(lm.model, lm.tokenizer.pad_token_id, stop_ids=[], max_batch_seqs=a.prompts * a.n,
                              banned_ids=vision_token_ids(lm.tokenizer), lean_decode=name != "forward",
                              fused_decode=name == "fused")
               for name in ("fused", "lean", "forward")}
    times: dict[str, list[float]] = {name: [] for name in engines}
    samples = {}
    for i in range(1 + a.repeats):
        for name, engine in engines.items():
            t0 = time.perf_counter()
            out = engine.generate(requests, params)
            if i:
                times[name].append(time.perf_counter() - t0)
            samples[name] = [(c.token_ids, c.logprobs) for group in out for c in group]
    med = {name: statistics.median(ts) for name, ts in times.items()}
    return {"config": {"prompts": a.prompts, "n": a.n, "max_tokens": a.max_tokens, "repeats": a.repeats,
                       "threads": int(os.environ["OMP_NUM_THREADS"]), "model": "tiny Qwen2.5-VL, float32"},
            "lean_s_median": med["lean"], "forward_s_median": med["forward"], "lean_s_all": times["lean"],
            "forward_s_all": times["forward"], "ratio_lean_over_forward": med["lean"] / med["forward"],
            "identical_samples": samples["lean"] == samples["forward"],
            "fused_s_median": med["fused"], "fused_s_all": times["fused"],
            "ratio_fused_over_forward": med["fused"] / med["forward"],
            "fused_same_tokens_frac": _shared_prefix_frac(samples["fused"], samples["forward"])}


def _shared_prefix_frac(a, b) -> float:
    """Share of b's tokens that a drew identically before the first token where a completion's draws differed."""
    same = total = 0
    for (ta, _), (tb, _) in zip(a, b):
        n = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), min(len(ta), len(tb)))
        same, total = same + n, total + len(tb)
    return same / max(total, 1)


def main(argv=None) -> int:
    a = parse_args(argv)
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries only the JSON (library logs go to stderr)
        result = measure(a)
    text = json.dumps(result, indent=2)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0 if result["identical_samples"] else 1


if __name__ == "__main__":
    sys.exit(main())
