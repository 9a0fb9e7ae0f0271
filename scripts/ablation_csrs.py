"""Mini Table 5 of the CSRS paper on the embedded task: 8 label-free GRPO runs from one SFT warm-up checkpoint.

Rows: reward in {majority vote, SFR} x retrace (RRM) on/off x perturbation (VSP) on/off. Gold labels are hidden
from training (``data.hide_labels=true``) and used only for the held-out evaluation. Writes
``<out>/ablation.json``, ``<out>/ablation.md`` and ``<out>/ablation.png``; prints the JSON.

    OMP_NUM_THREADS=1 python scripts/ablation_csrs.py --out runs/ablation_csrs --steps 40 --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

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
DEMO_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "csrs_tiny.yaml"


def row_overrides(out: Path, name: str, head: str, retrace: bool, perturb: bool, args) -> list[str]:
    return [
        f"model.path={args.sft_model}", f"trainer.output_dir={out / name}", f"trainer.steps={args.steps}",
        f"reward.heads={{{head}: 1.0}}", f"csrs.retrace={str(retrace).lower()}",
        f"csrs.perturb={str(perturb).lower()}", "data.hide_labels=true", "csrs.enabled=true",
        "trainer.progress=false", "trainer.wandb_mode=disabled", f"trainer.seed={args.seed}",
    ] + args.override


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/ablation_csrs", help="output directory")
    ap.add_argument("--config", default=str(DEMO_CONFIG), help="base config (tiny CSRS)")
    ap.add_argument("--sft-model", default="", help="SFT checkpoint to start every row from (built if empty)")
    ap.add_argument("--steps", type=int, default=40, help="GRPO steps per row")
    ap.add_argument("--jobs", type=int, default=2, help="rows run in parallel (one CPU thread each)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("override", nargs="*", help="extra key=value overrides for every row")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    mmevo = [sys.executable, "-m", "mmevo.cli"]

    if not args.sft_model:  # one shared warm-up checkpoint
        args.sft_model = str(out / "sft" / "model")
        if not (Path(args.sft_model) / "config.json").exists():
            print("[ablation] SFT warm-up", file=sys.stderr)
            subprocess.run(mmevo + ["sft", args.config, f"sft.output_dir={out / 'sft'}", "trainer.progress=false"],
                           check=True, env=env, stdout=subprocess.DEVNULL)

    t0 = time.time()
    procs: list[tuple[str, subprocess.Popen]] = []
    pending = list(ROWS)
    results: dict[str, dict] = {}
    while pending or procs:
        while pending and len(procs) < args.jobs:
            name, head, retrace, perturb = pending.pop(0)
            summary = out / name / "summary.json"
            if summary.exists():  # resumable: finished rows are kept
                results[name] = json.loads(summary.read_text())
                continue
            log = open(out / f"{name}.log", "w")
            cmd = mmevo + ["train", args.config] + row_overrides(out, name, head, retrace, perturb, args)
            print(f"[ablation] start {name}", file=sys.stderr)
            procs.append((name, subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)))
        time.sleep(2)
        for name, p in list(procs):
            if p.poll() is not None:
                procs.remove((name, p))
                if p.returncode != 0:
                    raise SystemExit(f"row {name} failed (exit {p.returncode}); see {out / (name + '.log')}")
                results[name] = json.loads((out / name / "summary.json").read_text())
                print(f"[ablation] done {name}", file=sys.stderr)

    table = []
    for name, head, retrace, perturb in ROWS:
        s = results[name]
        table.append({"row": name, "reward": head, "retrace": retrace, "perturb": perturb,
                      "heldout_acc_before": s["eval_before"]["accuracy"], "heldout_acc_after": s["eval_after"]["accuracy"],
                      "train_seconds": s["train_seconds"]})
    report = {"sft_model": args.sft_model, "steps": args.steps, "rows": table, "wall_seconds": time.time() - t0,
              "heldout_n": results[ROWS[0][0]]["eval_after"]["n"]}
    (out / "ablation.json").write_text(json.dumps(report, indent=2))
    lines = ["| row | reward | RRM | VSP | held-out acc before | after |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['row']} | {r['reward']} | {'on' if r['retrace'] else 'off'} | {'on' if r['perturb'] else 'off'} | "
              f"{r['heldout_acc_before']:.3f} | {r['heldout_acc_after']:.3f} |" for r in table]
    (out / "ablation.md").write_text("\n".join(lines) + "\n")
    _plot(out / "ablation.png", table)
    print(json.dumps(report, indent=2))
    return 0


def _plot(path: Path, table: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.2))
    names = [r["row"] for r in table]
    ax.bar(names, [r["heldout_acc_after"] for r in table], color="#3a7")
    ax.axhline(table[0]["heldout_acc_before"], color="#999", ls="--", label="after SFT")
    ax.set_ylabel("held-out accuracy")
    ax.legend()
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
