"""Mini Table 5 of the CSRS paper on the demo's figure tasks: 8 label-free rows x seeds from one SFT checkpoint.

Rows: reward in {majority vote, SFR} x retrace (RRM) on/off x visual perturbation (VSP) on/off, each trained with
``--seeds`` seeds from the same SFT model (the demo's: ``configs/demo_tiny.yaml``, values only in the image, so VSP
acts on what the model reads). Gold labels are hidden from training and used only for the held-out pass@1 (mean
correctness of 8 samples at temperature 1) and maj@8. Per row: mean +- sd over seeds, the lift over the SFT start,
and the difference to the MajorityVote row with a noise bound (2 x the standard error of the difference of the two
seed means); a row "beats MV beyond noise" when the difference exceeds that bound. Also per row: the mean training
reward and pseudo-label accuracy, which show whether RRM / VSP change what the reward sees.

Writes ``<out>/ablation.json``, ``<out>/ablation.md`` and ``<out>/ablation.png``; prints the JSON, alone on stdout
(progress goes to stderr). Resumable: runs whose evaluation exists are kept.

    python scripts/ablation_csrs.py --out runs/ablation_csrs --seeds 1,2,3 --jobs 2
    python scripts/ablation_csrs.py --sft-dir runs/demo/sft        # start from the demo's SFT model
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROWS = [  # (name as in Table 5, reward head, retrace, perturb)
    ("MajorityVote", "majority", False, False),
    ("+SFR", "sfr", False, False),
    ("+RRM", "majority", True, False),
    ("+VSP", "majority", False, True),
    ("+SFR+RRM", "sfr", True, False),
    ("+SFR+VSP", "sfr", False, True),
    ("+RRM+VSP", "majority", True, True),
    ("CSRS", "sfr", True, True),
]


def row_config(cfg, out: Path, sft_model: Path, name: str, head: str, retrace: bool, perturb: bool, seed: int,
               steps: int):
    import copy

    from mmevo.config import set_dotted

    c = copy.deepcopy(cfg)
    for key, value in {"model.path": str(sft_model), "trainer.output_dir": str(out / f"{name}_s{seed}"),
                       "reward.heads": {head: 1.0}, "csrs.enabled": True, "csrs.retrace": retrace,
                       "csrs.perturb": perturb, "data.hide_labels": True, "trainer.seed": seed,
                       "trainer.wandb_mode": "disabled", **({"trainer.steps": steps} if steps else {})}.items():
        set_dotted(c, key, value)
    return c


def _train_means(run_dir: Path) -> dict:
    from mmevo.metrics import read_jsonl

    rows = read_jsonl(run_dir / "metrics.jsonl") if (run_dir / "metrics.jsonl").exists() else []

    def mean(suffix):
        vals = [v for r in rows for k, v in r.items() if k.endswith(suffix) and isinstance(v, (int, float))]
        return statistics.fmean(vals) if vals else None

    return {"reward_mean": mean("reward/total/mean"), "pseudo_label_acc": mean("/pseudo_label_acc"),
            "modal_share": mean("/modal_share"), "step_seconds": mean("time/step")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/ablation_csrs", help="output directory")
    ap.add_argument("--config", default="", help="base config (default: the demo's configs/demo_tiny.yaml)")
    ap.add_argument("--sft-dir", default="", help="SFT output dir to start from (default <out>/sft, built if missing)")
    ap.add_argument("--steps", type=int, default=0, help="GRPO steps per run (default: the config's)")
    ap.add_argument("--seeds", default="1,2,3", help="comma-separated trainer seeds")
    ap.add_argument("--jobs", type=int, default=2, help="runs in parallel (one CPU thread each)")
    ap.add_argument("override", nargs="*", help="extra key=value overrides for the SFT and every run")
    args = ap.parse_args()

    import torch

    from mmevo.demo import cached_eval, demo_config, run_jobs
    from mmevo.eval.sampled import bootstrap_ci
    from mmevo.recipes import load_examples, run_sft

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sft_dir = Path(args.sft_dir) if args.sft_dir else out / "sft"
    cfg = demo_config(args.override + [f"sft.output_dir={sft_dir}", "trainer.progress=false"], str(out),
                      args.config or None)
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    torch.set_num_threads(max(1, len(os.sched_getaffinity(0))))
    t0 = time.time()
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries only the JSON (the runs' progress lines go to stderr)
        if not (sft_dir / "summary.json").exists():
            print("[ablation] SFT warm-up")
            run_sft(cfg)
        sft_model = sft_dir / "model"
        heldout, _ = load_examples(cfg, "heldout")
        start = cached_eval(out / "evals" / "sft.json", cfg, sft_model, heldout)

        jobs = {}
        for name, head, retrace, perturb in ROWS:
            for seed in seeds:
                c = row_config(cfg, out, sft_model, name, head, retrace, perturb, seed, args.steps)
                jobs[f"{name}_s{seed}"] = (c, out / "evals" / f"{name}_s{seed}.json")
        run_jobs(jobs, args.jobs, 1)

    table = []
    for name, head, retrace, perturb in ROWS:
        evs = [json.loads((out / "evals" / f"{name}_s{s}.json").read_text()) for s in seeds]
        p1 = [e["real"]["pass1"] for e in evs]
        mj = [e["real"]["maj"] for e in evs]
        train = [_train_means(out / f"{name}_s{s}") for s in seeds]
        table.append({"row": name, "reward": head, "retrace": retrace, "perturb": perturb, "pass1_by_seed": p1,
                      "pass1_mean": statistics.fmean(p1), "pass1_sd": statistics.stdev(p1) if len(p1) > 1 else 0.0,
                      "maj8_mean": statistics.fmean(mj), "pass1_ci_by_seed": [e["real"]["pass1_ci"] for e in evs],
                      **{f"train_{k}": statistics.fmean([t[k] for t in train if t[k] is not None])
                         if any(t[k] is not None for t in train) else None for k in train[0]}})
    mv = table[0]
    k = len(seeds)
    for r in table:
        r["lift_over_sft"] = r["pass1_mean"] - start["real"]["pass1"]
        r["minus_mv"] = r["pass1_mean"] - mv["pass1_mean"]
        r["noise_bound"] = 2 * math.sqrt((r["pass1_sd"] ** 2 + mv["pass1_sd"] ** 2) / k) if k > 1 else None
        r["beats_mv_beyond_noise"] = (r["noise_bound"] is not None and r is not mv and r["minus_mv"] > r["noise_bound"])
    report = {"sft_model": str(sft_model), "steps": cfg.trainer.steps if not args.steps else args.steps,
              "seeds": seeds, "heldout_n": len(heldout), "samples_per_problem": start["real"]["samples_per_problem"],
              "pass1_sft": start["real"]["pass1"], "pass1_sft_ci": bootstrap_ci(start["per_problem"]["pass1"]),
              "maj8_sft": start["real"]["maj"], "rows": table, "wall_seconds": time.time() - t0}
    (out / "ablation.json").write_text(json.dumps(report, indent=2))
    lines = [f"SFT start: pass@1 {report['pass1_sft']:.3f} {_ci(report['pass1_sft_ci'])}, maj@8 "
             f"{report['maj8_sft']:.3f}; {len(heldout)} held-out problems, {len(seeds)} seeds per row, "
             f"{report['steps']} steps per run.", "",
             "| row | reward | RRM | VSP | pass@1 mean +- sd | lift over SFT | - MV (noise bound) | beats MV | maj@8 | "
             "train reward | pseudo-label acc |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        bound = f"{r['noise_bound']:.3f}" if r["noise_bound"] is not None else "n/a"
        lines.append(f"| {r['row']} | {r['reward']} | {'on' if r['retrace'] else 'off'} | "
                     f"{'on' if r['perturb'] else 'off'} | {r['pass1_mean']:.3f} +- {r['pass1_sd']:.3f} | "
                     f"{r['lift_over_sft']:+.3f} | {r['minus_mv']:+.3f} ({bound}) | "
                     f"{'yes' if r['beats_mv_beyond_noise'] else 'no'} | {r['maj8_mean']:.3f} | "
                     f"{_num(r['train_reward_mean'])} | {_num(r['train_pseudo_label_acc'])} |")
    (out / "ablation.md").write_text("\n".join(lines) + "\n")
    _plot(out / "ablation.png", table, report["pass1_sft"])
    print(json.dumps(report, indent=2))
    return 0


def _ci(x) -> str:
    return f"[{x[0]:.3f}, {x[1]:.3f}]"


def _num(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _plot(path: Path, table: list[dict], sft: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.2))
    names = [r["row"] for r in table]
    ax.bar(names, [r["pass1_mean"] for r in table], yerr=[r["pass1_sd"] for r in table], capsize=3, color="#3a7")
    for i, r in enumerate(table):
        ax.scatter([i] * len(r["pass1_by_seed"]), r["pass1_by_seed"], color="k", s=8, zorder=3)
    ax.axhline(sft, color="#999", ls="--", label="SFT start")
    ax.set_ylabel("held-out pass@1 (mean +- sd over seeds)")
    ax.legend()
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
