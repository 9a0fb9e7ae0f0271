"""HONEST calibration on the embedded tiny text model (CPU): calibration SFT warm-up, then a few GRPO steps with the
HONEST heads, with ECE / Brier / accuracy / abstain / well-formed rates before and after each phase, reliability
diagrams and the hindsight audit of the GRPO run.

Phases (each resumes: a finished phase is read back from ``--out``):

1. build tiny-text (``mmevo.models.tiny.build_tiny``) and evaluate it on held-out ``honest_tasks``;
2. calibration SFT (``data.train=honest_sft``, the seed's tiny tier: 1500 examples, 2 epochs, difficulty 1-2,
   hindsight share 0.5, legacy mode) and evaluate;
3. GRPO with ``honest_brier`` + ``honest_hindsight`` + ``honest_format`` on ``honest_tasks`` (difficulty 1-2) and
   evaluate; the ``<hindsight>`` slot is offered on ``honest.hindsight_prob`` (default 0.3) of the steps (the others
   prompt without it); the hindsight audit and the health monitor read the run's ``metrics.jsonl``.

Held-out tasks: the difficulty range of the SFT tier, disjoint from the SFT set and the GRPO train tasks; greedy
decoding (``rollout.eval_temperature`` 0) and ``--samples`` samples at temperature 1 (greedy decoding shows only the
modal confidence, sampling the distribution the policy actually states). Writes ``<out>/result.json`` and ``<out>/eval_<phase>[_sampled]/reliability.png``;
prints the result JSON.

    OMP_NUM_THREADS=1 python scripts/honest_calibration_demo.py --out runs/honest_calibration_demo
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

HEADS = {"honest_brier": 1.0, "honest_hindsight": 1.0, "honest_format": 0.25}
KEYS = ("accuracy", "abstain_rate", "well_formed_rate", "strict_well_formed_rate", "hindsight_rate",
        "mean_confidence", "confidence_sd", "confidence_gap", "ece", "brier", "graded", "n")


def base_overrides(args, base_model: Path) -> list[str]:
    return [f"model.path={base_model}", "data.train=honest_sft", "data.heldout=honest_tasks",
            "data.system_prompt=honest", f"data.n_train={args.grpo_tasks}", f"data.n_heldout={args.heldout}",
            "honest.sft_tier=tiny", "honest.max_difficulty=2", "honest.hindsight_mode=legacy",
            f"sft.epochs={args.sft_epochs}", f"sft.batch_size={args.sft_batch}", f"sft.lr={args.sft_lr}",
            "sft.warmup_steps=10", f"sft.output_dir={args.out / 'sft'}", "sft.save_every=50",
            f"trainer.eval_max_tokens={args.max_tokens}", "trainer.progress=false", "trainer.wandb_mode=disabled",
            f"trainer.seed={args.seed}"]


def grpo_overrides(args, sft_model: Path) -> list[str]:
    return [f"model.path={sft_model}", "data.train=honest_tasks", f"reward.heads={json.dumps(HEADS)}",
            f"rollout.n={args.group}", f"rollout.max_tokens={args.max_tokens}", "rollout.max_batch_seqs=64",
            f"trainer.steps={args.grpo_steps}", f"trainer.prompts_per_step={args.prompts}",
            f"trainer.mini_batch_prompts={args.prompts}", "trainer.micro_batch_seqs=32",
            f"trainer.lr={args.grpo_lr}", f"trainer.output_dir={args.out / 'grpo'}", "trainer.save_every=0",
            "algo.kl_coef=0.01", "data.max_prompt_length=512"]


def evaluate(cfg, model: Path, held, out: Path, title: str, samples: int = 1, temperature: float = 0.0) -> dict:
    from mmevo.honest.calibration import evaluate_calibration

    done = out / "calibration.json"
    if done.exists():
        old = json.loads(done.read_text())
        if (old.get("model"), old.get("samples"), old.get("temperature")) == (str(model), samples, temperature):
            return old
    return evaluate_calibration(cfg, model, held, out, samples=samples, temperature=temperature, title=title)


def health_replay(metrics_path: Path, cfg) -> dict:
    """The health monitor run over the GRPO metrics, step by step, as a loop would call it."""
    from mmevo.honest.health import HealthMonitor
    from mmevo.metrics import read_jsonl

    monitor = HealthMonitor.from_config(cfg, reward_std_keys=("reward/honest_hindsight/std", "reward/total/std"))
    fired: dict[str, int] = {}
    for row in read_jsonl(metrics_path):
        out = monitor.update(row, step=int(row.get("step", monitor.step + 1)))
        for k, v in out.items():
            if k in ("health/reward_collapse", "health/replay_mix_off", "health/generator_reseed") and v:
                fired[k] = fired.get(k, 0) + 1
    return {"steps": monitor.step, "steps_flagged": fired, "events": monitor.events[-10:]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("runs/honest_calibration_demo"))
    ap.add_argument("--heldout", type=int, default=200, help="held-out honest_tasks evaluated after each phase")
    ap.add_argument("--sft-epochs", type=float, default=2.0, help="the tiny tier's epochs (seed 2.6)")
    ap.add_argument("--sft-batch", type=int, default=16)
    ap.add_argument("--sft-lr", type=float, default=4e-3)
    ap.add_argument("--grpo-steps", type=int, default=20)
    ap.add_argument("--grpo-tasks", type=int, default=400, help="honest_tasks train set of the GRPO phase")
    ap.add_argument("--prompts", type=int, default=8, help="prompts per GRPO step")
    ap.add_argument("--group", type=int, default=8, help="samples per prompt (GRPO group size)")
    ap.add_argument("--grpo-lr", type=float, default=1e-4)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--samples", type=int, default=4, help="samples per held-out task in the T=1 evaluation (0: none)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-grpo", action="store_true")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from mmevo.config import load_config
    from mmevo.honest.calibration import calibration_heldout, hindsight_audit
    from mmevo.models.tiny import build_tiny
    from mmevo.recipes import run_grpo, run_sft

    t0 = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    base_model = build_tiny("tiny-text", args.out / "tiny-text")
    cfg = load_config(None, base_overrides(args, base_model))
    held, held_stats = calibration_heldout(cfg)
    result: dict = {"heldout": held_stats, "heads": HEADS, "phases": {}, "seconds": {}}

    def record(phase: str, model: Path, title: str, seconds: float | None = None) -> None:
        """Greedy and sampled (``--samples`` at temperature 1) reports of one phase."""
        runs = {phase: evaluate(cfg, model, held, args.out / f"eval_{phase}", f"{title}, greedy")}
        if args.samples:
            runs[f"{phase}_sampled"] = evaluate(cfg, model, held, args.out / f"eval_{phase}_sampled",
                                                f"{title}, {args.samples} samples at T=1", args.samples, 1.0)
        for name, report in runs.items():
            result["phases"][name] = {k: report.get(k) for k in KEYS}
            print(f"[honest demo] {name}: " + ", ".join(f"{k} {report.get(k)!r:.6}" for k in KEYS), flush=True)
        if seconds is not None:
            result["seconds"][phase] = round(seconds, 1)

    record("base", base_model, "tiny-text (untrained)")

    sft_model = args.out / "sft" / "model"
    t = time.time()
    if not (args.out / "sft" / "summary.json").exists():
        summary = run_sft(cfg)
        result["sft"] = {k: summary[k] for k in ("steps", "final_loss", "seconds")}
        result["sft"]["data"] = {k: v for k, v in summary["data"].items() if k != "plan"}
    else:
        result["sft"] = json.loads((args.out / "sft" / "summary.json").read_text())
        result["sft"].pop("model", None)
    record("after_sft", sft_model, "after calibration SFT", time.time() - t)

    if not args.skip_grpo:
        gcfg = load_config(None, base_overrides(args, base_model) + grpo_overrides(args, sft_model))
        t = time.time()
        final = args.out / "grpo" / "final"
        if not (args.out / "grpo" / "summary.json").exists():
            run_grpo(gcfg, evaluate_before_after=False)
        record("after_grpo", final, f"after calibration SFT + {args.grpo_steps} GRPO steps", time.time() - t)
        result["hindsight_audit"] = hindsight_audit(args.out / "grpo" / "metrics.jsonl")
        result["health"] = health_replay(args.out / "grpo" / "metrics.jsonl", gcfg)
        from mmevo.metrics import read_jsonl

        rows = read_jsonl(args.out / "grpo" / "metrics.jsonl")
        curve_keys = ("reward/honest_brier/mean", "reward/honest_hindsight/mean", "reward/honest_format/mean",
                      "reward/honest_format/well_formed_frac", "frac_reward_zero_std")
        result["grpo_curve"] = {k: [round(r[k], 4) for r in rows if k in r] for k in curve_keys}
    result["seconds"]["total"] = round(time.time() - t0, 1)
    result["reliability_diagrams"] = sorted(str(p) for p in args.out.glob("eval_*/reliability.png"))
    (args.out / "result.json").write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
