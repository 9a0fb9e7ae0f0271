#!/usr/bin/env python
"""Benchmark one GRPO step of mmevo against TRL's ``GRPOTrainer`` on the same model, batch and lengths.

Both sides train the embedded tiny Qwen2.5-VL (built once in ``--cache-dir``) on the same P synthetic geometry prompts
(with their images), G completions each, exactly T generated tokens per completion (end-of-sequence is never sampled,
so every completion runs to ``--max-tokens``), one optimizer step per GRPO step over all P*G completions, micro-batches
of M sequences, token-mean loss, group-normalised rewards, lr 1e-6, fp32, and the same thread count.

Each half runs in its own subprocess (``--only mmevo`` / ``--only trl``), so the peak RSS of one never includes the
other; the default mode runs both and prints ONE JSON object on stdout (progress goes to stderr):

    {"config": {...}, "mmevo": {"step_s_median": ..., "stages_s": {...}, "gflop_per_step": ..., ...}, "trl": {...},
     "ratio_mmevo_over_trl": ..., "flop_ratio_mmevo_over_trl": ..., "target_ratio": 0.33, "meets_target": ...}

``ratio_mmevo_over_trl`` is mmevo's median step time over TRL's (lower is better for mmevo); the target is <= 0.33
(it was <= 0.67 before the padding-free / token-budget / chunked paths). ``flop_ratio_mmevo_over_trl`` is the ratio of
the work the two steps ask for: ``gflop_per_step`` counts the warm-up step's matmul, convolution and attention FLOPs
(torch's ``FlopCounterMode``, plus the CPU flash-attention and oneDNN linear kernels its table lacks; attention is
counted whole, causal masks not discounted, as torch counts it), and ``gflop_per_s`` is that over the median step
time: how fast each side runs the work it does. The time ratio is the FLOP ratio times the inverse speed ratio. At
the defaults mmevo's step asks for 38.1 GFLOP and TRL's for 81.7, a FLOP ratio of 0.47 (TRL runs every completion's
prompt, image included, in generation and in training; mmevo each prompt once per group, and its packed attention
pads little). A time ratio of 0.33 therefore needs mmevo to run its FLOPs ~1.42x as fast as TRL runs its own. On
F.linear's kernels (``--cpu-linear torch``) both ran at about the same rate; mmevo's default ``model.cpu_linear``
puts its training passes' matmuls on oneDNN (MKL's sgemm takes its AVX2 path on AMD CPUs), its HF engine's fused
decode step puts sampling's there too: ~1.3-1.4x TRL's rate on the AMD EPYC this was measured on (README,
Benchmarks). On Intel CPUs MKL runs both sides' matmuls at full speed (its default ``auto`` is F.linear there), so the
ratio is about the FLOP ratio there (0.41-0.49 on a Xeon).

Timing: one warm-up step, then ``--steps`` timed steps; medians are reported. mmevo's step is timed around
``GRPOTrainer.step()``; TRL's from ``on_step_begin`` to ``on_step_end`` of a ``TrainerCallback`` (that span covers
generation, rewards, the forward/backward micro-steps and the optimizer step, but not the dataloader prefetch nor the
logging that follow; ``step_wall_s_median`` is the end-to-end time between consecutive ``on_step_end`` calls).

Differences that remain by design of each library (reported, not hidden): TRL generates each of the G copies of a
prompt with its own prefill (HF ``generate`` over P*G rows), mmevo prefills each prompt once and shares the KV cache;
TRL's KL (``--kl``) is k3, mmevo's default is low_var_kl (a clipped k3). TRL's default gradient checkpointing is turned
off so that neither side recomputes activations.

Usage (``--threads`` sets OMP/MKL threads and ``torch.set_num_threads`` in both halves, default 1):

    OMP_NUM_THREADS=1 python scripts/bench_grpo_step.py                      # P=8 G=8 T=64 M=16, 3 timed steps
    OMP_NUM_THREADS=1 python scripts/bench_grpo_step.py --prompts 2 --group 4 --max-tokens 16 --steps 1
    python scripts/bench_grpo_step.py --only mmevo                          # one half only (JSON of that half)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_RATIO = 0.33


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", type=int, default=8, help="P: prompts per GRPO step (default 8)")
    p.add_argument("--group", type=int, default=8, help="G: completions per prompt (default 8)")
    p.add_argument("--max-tokens", type=int, default=64,
                   help="T: generated tokens per completion; EOS is never sampled, so every completion has T (default 64)")
    p.add_argument("--micro-batch", type=int, default=16,
                   help="M: sequences per forward/backward (gradient accumulation over P*G/M micro-batches; default 16)")
    p.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up step (default 3)")
    p.add_argument("--kl", type=float, default=0.0,
                   help="KL coefficient (0 = no reference model; >0 loads one on both sides)")
    p.add_argument("--threads", type=int, default=1,
                   help="CPU threads for both halves: sets OMP_NUM_THREADS/MKL_NUM_THREADS and torch.set_num_threads "
                        "(default 1, for a comparable, low-noise measurement on a shared machine)")
    p.add_argument("--cpu-linear", default="auto", choices=["auto", "onednn", "torch"],
                   help="mmevo's model.cpu_linear (default auto: its training passes' and sampling's float32 linears "
                        "on oneDNN where available, F.linear on Intel CPUs; torch: F.linear, the BLAS TRL's model runs on)")
    p.add_argument("--only", choices=["mmevo", "trl"], help="run one half in this process and print its JSON")
    p.add_argument("--cache-dir", default=".cache/mmevo", help="where the tiny model is built once (default .cache/mmevo)")
    p.add_argument("--seed", type=int, default=0, help="data / sampling seed (default 0)")
    p.add_argument("--out", help="also write the JSON to this file")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds allowed per half (default 3600)")
    a = p.parse_args(argv)
    for name in ("prompts", "group", "max_tokens", "micro_batch", "steps", "threads"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if a.group < 2:
        p.error("--group must be >= 2 (TRL's GRPO needs at least 2 completions per prompt)")
    n = a.prompts * a.group
    a.micro_batch = min(a.micro_batch, n)
    if n % a.micro_batch:
        p.error(f"--micro-batch {a.micro_batch} must divide prompts*group = {n} (same micro-batching on both sides)")
    return a


def set_threads(n: int) -> None:
    """Must run before torch is imported (the OpenMP pool reads the environment once)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("WANDB_MODE", "disabled")


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def median(xs):
    return statistics.median(xs) if xs else None


def config_dict(a: argparse.Namespace) -> dict:
    n = a.prompts * a.group
    return {"prompts": a.prompts, "group": a.group, "max_tokens": a.max_tokens, "micro_batch": a.micro_batch,
            "completions_per_step": n, "grad_accum_micro_batches": n // a.micro_batch, "timed_steps": a.steps,
            "warmup_steps": 1, "kl": a.kl, "mmevo_cpu_linear": a.cpu_linear, "threads": a.threads, "seed": a.seed, "dtype": "float32", "device": "cpu",
            "lr": 1e-6, "temperature": 1.0}


def flop_counter():
    """torch's ``FlopCounterMode`` (no printing) that also counts the CPU flash-attention kernels, forward and
    backward, and oneDNN's linear, which its table lacks. As torch's own SDPA formulas, they count the whole [q, k]
    score matrix."""
    import torch
    from torch.utils import flop_counter as fc

    def forward(query, key, value, *_, out_shape=None, **__):
        return fc.sdpa_flop_count(query, key, value)

    def backward(grad_out, query, key, value, *_, out_shape=None, **__):
        return fc.sdpa_backward_flop_count(grad_out, query, key, value)

    def onednn_linear(x, weight, *_, out_shape=None, **__):  # x [..., k] @ weight [n, k].T
        rows = 1
        for d in x[:-1]:
            rows *= d
        return 2 * rows * x[-1] * weight[0]

    extra = {}
    for name, formula in (("_scaled_dot_product_flash_attention_for_cpu", forward),
                          ("_scaled_dot_product_flash_attention_for_cpu_backward", backward)):
        if hasattr(torch.ops.aten, name):
            extra[getattr(torch.ops.aten, name)] = formula
    if hasattr(torch.ops.mkldnn, "_linear_pointwise"):  # mmevo's model.cpu_linear=onednn matmuls
        extra[torch.ops.mkldnn._linear_pointwise] = onednn_linear
    return fc.FlopCounterMode(display=False, custom_mapping=extra)


def build_model(cache_dir: str) -> Path:
    from mmevo.models.tiny import build_tiny_qwen2_5_vl

    return build_tiny_qwen2_5_vl(Path(cache_dir) / "tiny-qwen2.5-vl")


def make_examples(a: argparse.Namespace):
    """Exactly P examples: every step of both trainers sees the same P prompts (each side's sampler covers them all)."""
    from mmevo.data.synthetic import generate_geometry

    return generate_geometry(a.prompts, seed=a.seed)


# -- mmevo --------------------------------------------------------------------------------------------------------------
def run_mmevo(a: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(a.threads)
    from mmevo.config import load_config
    from mmevo.grpo.trainer import GRPOTrainer, seed_everything
    from mmevo.models.loader import load_model, vision_token_ids
    from mmevo.rollout.hf import HFEngine

    path = build_model(a.cache_dir)
    examples = make_examples(a)
    P, G, T, M = a.prompts, a.group, a.max_tokens, a.micro_batch
    with tempfile.TemporaryDirectory(prefix="bench-mmevo-") as out:
        overrides = {
            "data.prompt_template": "none", "rollout.n": G, "rollout.max_tokens": T, "rollout.temperature": 1.0,
            "rollout.top_p": 1.0, "rollout.max_batch_seqs": P * G,
            "trainer.prompts_per_step": P, "trainer.mini_batch_prompts": P, "trainer.micro_batch_seqs": M,
            "trainer.steps": 1 + a.steps, "trainer.lr": 1e-6, "trainer.seed": a.seed + 1,
            "model.cpu_linear": a.cpu_linear, "algo.kl_coef": a.kl, "algo.loss_agg": "token-mean", "algo.adv_scale": "group", "algo.ppo_epochs": 1,
            "trainer.wandb_mode": "disabled", "trainer.progress": False, "trainer.save_every": 0,
            "trainer.resume": False, "trainer.output_dir": out, "reward.heads": "{accuracy: 1.0}",
        }
        cfg = load_config(None, [f"{k}={v}" for k, v in overrides.items()])
        seed_everything(a.seed)
        lm = load_model(path)
        ref = load_model(path).model.eval() if a.kl > 0 else None
        engine = HFEngine(lm.model, lm.tokenizer.pad_token_id, stop_ids=[], max_batch_seqs=P * G,
                          banned_ids=vision_token_ids(lm.tokenizer), decode_linear=a.cpu_linear)
        tr = GRPOTrainer(cfg, lm, engine, examples, [], ref_model=ref, log=False)
        prompt_lens = [len(tr.prompts(ex).input_ids) for ex in examples]
        log(f"mmevo: P={P} G={G} T={T} M={M} prompt lengths {prompt_lens}")
        walls, per_step, gflop = [], [], None
        for i in range(1 + a.steps):
            gen_before = engine.stats["generated_tokens"]
            counter = flop_counter() if i == 0 else contextlib.nullcontext()  # the untimed warm-up step's FLOPs
            t0 = time.perf_counter()
            with counter:
                m = tr.step()
            wall = time.perf_counter() - t0
            if i == 0:
                gflop = counter.get_total_flops() / 1e9
            m["_gen_tokens"] = engine.stats["generated_tokens"] - gen_before
            log(f"mmevo step {i}{' (warm-up)' if i == 0 else ''}: {wall:.3f} s, gen {m['time/gen']:.3f} s, "
                f"update {m['time/update']:.3f} s, mean length {m['response/length_mean']:.1f}")
            if i > 0:
                walls.append(wall)
                per_step.append(m)
    stage_keys = sorted({k for m in per_step for k in m if k.startswith("time/") and k != "time/step"})
    stages = {k.split("/", 1)[1]: median([m[k] for m in per_step if k in m]) for k in stage_keys}
    lengths = [m["response/length_mean"] for m in per_step]
    return {
        "step_s_median": median(walls),
        "step_s_all": walls,
        "time_step_metric_s_median": median([m["time/step"] for m in per_step]),
        "stages_s": stages,
        "tokens_per_s": median([m["throughput/tokens_per_s"] for m in per_step]),
        "gen_tokens_per_s": median([m["throughput/gen_tokens_per_s"] for m in per_step]),
        "gen_tokens": int(median([m["_gen_tokens"] for m in per_step])),
        "completion_length_mean": median(lengths),
        "prompt_lengths": prompt_lens,
        "gflop_per_step": gflop,
        "gflop_per_s": gflop / median(walls),
        "peak_rss_mb": peak_rss_mb(),
    }


# -- TRL ----------------------------------------------------------------------------------------------------------------
def trl_prompt(problem: str, n_images: int) -> list[dict]:
    """The same user turn mmevo builds (text and image parts in ``<image>`` order, default system prompt)."""
    from mmevo.models.inputs import chat_messages

    messages = chat_messages(problem, None, n_images)
    # image parts stay bare placeholders ({"type": "image"}): TRL fills them from the dataset's "image" column
    return [{"role": m["role"], "content": [{"type": c["type"], "text": c.get("text", "")} if c["type"] == "text"
                                            else {"type": "image"} for c in m["content"]]} for m in messages]


def run_trl(a: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(a.threads)
    import mmevo  # noqa: F401  (its torchvision shim must run before trl imports transformers' processors)

    try:
        import trl  # noqa: F401
    except ImportError as e:
        return {"error": f"trl is not importable: {e} (pip install -e '.[bench]')"}
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer as TRLGRPOTrainer

    from mmevo.models.loader import load_model, vision_token_ids
    from mmevo.rewards.accuracy import accuracy_rewards

    path = build_model(a.cache_dir)
    examples = make_examples(a)
    P, G, T, M = a.prompts, a.group, a.max_tokens, a.micro_batch
    if any(len(ex.images) != 1 for ex in examples):
        raise ValueError("the TRL half expects exactly one image per example (dataset column 'image')")
    ds = Dataset.from_list([{"prompt": trl_prompt(ex.problem, len(ex.images)), "image": ex.images[0],
                             "answer": ex.answer, "choices": list(ex.choices or [])} for ex in examples])

    def accuracy_reward(completions, answer, choices, **_):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return accuracy_rewards(texts, list(answer), [list(c) or None for c in choices]).tolist()

    lm = load_model(path)
    model, processor = lm.model, lm.processor
    banned = vision_token_ids(lm.tokenizer)
    accum = (P * G) // M
    with tempfile.TemporaryDirectory(prefix="bench-trl-") as out:
        args = GRPOConfig(
            output_dir=out,
            num_generations=G,
            per_device_train_batch_size=M,  # completions per micro-batch
            gradient_accumulation_steps=accum,  # P*G completions per optimizer step ...
            steps_per_generation=accum,  # ... all generated in one round (generation_batch_size = P*G)
            num_iterations=1,
            max_completion_length=T,
            temperature=1.0, top_p=1.0, top_k=0,
            # Force exactly T tokens: min_new_tokens masks every EOS id until T tokens exist and max_new_tokens stops
            # there. suppress_tokens bans all vision placeholders like mmevo's engine (TRL alone bans only
            # <|image_pad|>).
            generation_kwargs={"min_new_tokens": T, "suppress_tokens": banned},
            beta=a.kl,
            loss_type="dapo",  # token-level normalisation over the whole generation batch == mmevo token-mean
            scale_rewards="group",
            epsilon=0.2,
            learning_rate=1e-6, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.01, max_grad_norm=1.0,
            adam_beta1=0.9, adam_beta2=0.999,
            gradient_checkpointing=False,  # GRPOConfig defaults to True; mmevo does not recompute activations
            bf16=False, fp16=False, use_cpu=True,
            max_steps=1 + a.steps, logging_steps=1, save_strategy="no", report_to="none",
            disable_tqdm=True, dataloader_num_workers=0, seed=a.seed, shuffle_dataset=True,
        )

        class Timer(TrainerCallback):
            def __init__(self):
                self.t0 = None
                self.counter = None  # counts the untimed warm-up step's FLOPs
                self.gflop = None
                self.last_end = None
                self.steps: list[float] = []
                self.walls: list[float] = []
                self.logs: list[dict] = []

            def on_train_begin(self, args, state, control, **kw):
                self.last_end = time.perf_counter()

            def on_step_begin(self, args, state, control, **kw):
                if not self.steps:
                    self.counter = flop_counter()
                    self.counter.__enter__()
                self.t0 = time.perf_counter()

            def on_step_end(self, args, state, control, **kw):
                now = time.perf_counter()
                if self.counter is not None:
                    self.stop_counting()
                self.steps.append(now - self.t0)
                self.walls.append(now - self.last_end)
                self.last_end = now
                log(f"trl step {len(self.steps) - 1}{' (warm-up)' if len(self.steps) == 1 else ''}: "
                    f"{self.steps[-1]:.3f} s")

            def stop_counting(self):
                self.counter.__exit__(None, None, None)
                self.gflop = self.counter.get_total_flops() / 1e9
                self.counter = None

            def on_log(self, args, state, control, logs=None, **kw):
                if logs:
                    self.logs.append(dict(logs))

        timer = Timer()
        stage = {"gen": [], "reward": [], "score": []}

        class TimedGRPOTrainer(TRLGRPOTrainer):
            """Adds per-stage wall times (generation, reward, whole generate-and-score) without changing behaviour."""

            def _generate_single_turn(self, *args, **kwargs):
                t0 = time.perf_counter()
                try:
                    return super()._generate_single_turn(*args, **kwargs)
                finally:
                    stage["gen"].append(time.perf_counter() - t0)

            def _calculate_rewards(self, *args, **kwargs):
                t0 = time.perf_counter()
                try:
                    return super()._calculate_rewards(*args, **kwargs)
                finally:
                    stage["reward"].append(time.perf_counter() - t0)

            def _generate_and_score_completions(self, *args, **kwargs):
                t0 = time.perf_counter()
                try:
                    return super()._generate_and_score_completions(*args, **kwargs)
                finally:
                    stage["score"].append(time.perf_counter() - t0)

        trainer = TimedGRPOTrainer(model=model, reward_funcs=accuracy_reward, args=args, train_dataset=ds,
                                   processing_class=processor, callbacks=[timer])
        log(f"trl: P={P} G={G} T={T} M={M} grad_accum={accum} generation_batch_size={args.generation_batch_size} "
            f"eos_ids={trainer.eos_token_ids}")
        try:
            trainer.train()
        finally:
            if timer.counter is not None:  # a failed warm-up step must not leave the counting mode on
                timer.stop_counting()

    steps = timer.steps[1:]
    n_timed = len(steps)
    if n_timed != a.steps:
        raise RuntimeError(f"TRL ran {len(timer.steps)} optimizer steps, expected {1 + a.steps}")
    if len(stage["score"]) != 1 + a.steps:
        raise RuntimeError(f"TRL generated {len(stage['score'])} times for {1 + a.steps} optimizer steps "
                           "(expected one generation round per step)")
    step_logs = [lg for lg in timer.logs if "completions/mean_length" in lg][1:]
    gen_s = median(stage["gen"][1:])
    reward_s = median(stage["reward"][1:])
    score_s = median(stage["score"][1:])
    step_s = median(steps)
    return {
        "step_s_median": step_s,
        "step_s_all": steps,
        "step_wall_s_median": median(timer.walls[1:]),
        "stages_s": {
            "gen": gen_s,
            "reward": reward_s,
            # tokenisation, image processing, advantages (+ ref log-probs when --kl > 0), outside gen and reward
            "prep_other": score_s - gen_s - reward_s,
            # micro-batched forward/backward + optimizer step
            "update": step_s - score_s,
        },
        "completion_length_mean": median([lg["completions/mean_length"] for lg in step_logs]),
        "gen_tokens": P * G * int(round(median([lg["completions/mean_length"] for lg in step_logs]) or 0)),
        "gflop_per_step": timer.gflop,
        "gflop_per_s": timer.gflop / step_s,
        "peak_rss_mb": peak_rss_mb(),
        "trl_version": __import__("trl").__version__,
    }


# -- driver -------------------------------------------------------------------------------------------------------------
def run_half(which: str, a: argparse.Namespace) -> dict:
    """Run one half in a fresh interpreter so that its peak RSS is its own."""
    cmd = [sys.executable, os.path.abspath(__file__), "--only", which, "--prompts", str(a.prompts), "--group",
           str(a.group), "--max-tokens", str(a.max_tokens), "--micro-batch", str(a.micro_batch), "--steps",
           str(a.steps), "--kl", str(a.kl), "--threads", str(a.threads), "--cache-dir", a.cache_dir, "--seed",
           str(a.seed), "--cpu-linear", a.cpu_linear]
    log(f"running the {which} half")
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None, text=True, timeout=a.timeout, env=os.environ)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {a.timeout:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.strip().startswith("{")]
    if not lines:
        return {"error": f"exit code {proc.returncode}, no JSON on stdout (see stderr above)"}
    return json.loads(lines[-1])


def main(argv=None) -> int:
    a = parse_args(argv)
    set_threads(a.threads)
    if a.only:
        try:
            with contextlib.redirect_stdout(sys.stderr):  # stdout carries only the JSON (TRL prints its logs)
                res = run_mmevo(a) if a.only == "mmevo" else run_trl(a)
        except Exception as e:  # report the exact error in the JSON (the traceback goes to stderr)
            import traceback

            traceback.print_exc()
            res = {"error": f"{type(e).__name__}: {e}"}
        text = json.dumps(res)
        print(text, flush=True)
        if a.out:
            Path(a.out).write_text(text + "\n")
        return 1 if "error" in res else 0

    # stdout carries only the JSON: building the model imports DeepSpeed, whose logger writes to stdout
    with contextlib.redirect_stdout(sys.stderr):
        path = build_model(a.cache_dir)  # built once here, so the two halves never race to build it
    log(f"tiny model at {path}")
    mm = run_half("mmevo", a)
    tr = run_half("trl", a)
    ratio = None
    if mm.get("step_s_median") and tr.get("step_s_median"):
        ratio = mm["step_s_median"] / tr["step_s_median"]
    flop_ratio = None
    if mm.get("gflop_per_step") and tr.get("gflop_per_step"):
        flop_ratio = mm["gflop_per_step"] / tr["gflop_per_step"]
    result = {"config": config_dict(a), "mmevo": mm, "trl": tr, "ratio_mmevo_over_trl": ratio,
              "flop_ratio_mmevo_over_trl": flop_ratio,
              "target_ratio": TARGET_RATIO, "meets_target": bool(ratio is not None and ratio <= TARGET_RATIO)}
    text = json.dumps(result, indent=2)
    print(text, flush=True)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0 if ratio is not None else 1


if __name__ == "__main__":
    sys.exit(main())
