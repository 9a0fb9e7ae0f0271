"""Run logging: jsonl always, wandb (offline by default), matplotlib curves, stage timers."""

from __future__ import annotations

import json
import math
import os
import resource
import time
from contextlib import contextmanager
from pathlib import Path

import torch

from mmevo.atomic import write_text_atomic


class StageTimer:
    """Accumulates wall time per named stage (gen, reward, old, ref, update, sync)."""

    def __init__(self):
        self.times: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.times[name] = self.times.get(name, 0.0) + time.perf_counter() - t0

    def metrics(self) -> dict[str, float]:
        return {f"time/{k}": v for k, v in self.times.items()}


def peak_memory_mb() -> dict[str, float]:
    """Peak RSS of this process (and peak CUDA memory when on GPU)."""
    out = {"memory/peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}
    if torch.cuda.is_available():
        out["memory/peak_cuda_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


class RunLogger:
    """Writes one JSON object per step to ``metrics.jsonl``; mirrors to wandb when enabled.

    Each logger owns its own wandb run (``reinit="create_new"``): several loggers may live in one
    process (e.g. a self-play loop with one logger per phase), and starting or closing one never
    ends another's run. Logging and finishing go through the logger's own run object, never the
    global ``wandb.run``. If the run fails to start, the logger still writes ``metrics.jsonl``.

    The run starts at construction, or with ``defer_wandb=True`` at ``begin`` (the trainer's choice: only once it
    knows whether it resumes a checkpoint, whose wandb run the logger then continues rather than opening another).
    """

    def __init__(self, output_dir: str | Path, config: dict | None = None, wandb_mode: str = "offline",
                 project: str = "mmevo", enabled: bool = True, filename: str = "metrics.jsonl",
                 defer_wandb: bool = False):
        self.dir = Path(output_dir)
        self.enabled = enabled
        self.path = self.dir / filename
        self._wandb = None
        self._wandb_args = {"project": project, "dir": str(self.dir), "mode": wandb_mode, "config": config or {},
                            "reinit": "create_new"}
        self._wandb_first_step = 0  # steps below it are already in the wandb run (a resumed one): never sent again
        if not enabled:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        if not defer_wandb:
            self.start_wandb()

    @property
    def wandb_run_id(self) -> str | None:
        """The id of this logger's wandb run (None without one): a checkpoint keeps it so that a resume continues it."""
        return self._wandb.id if self._wandb is not None else None

    def start_wandb(self, run_id: str | None = None, step: int = 0) -> None:
        """Open this logger's wandb run (once): a new one, or the run ``run_id`` continued after ``step``.

        Continuing rewinds the run to ``step`` (``resume_from="<id>?_step=<step>"``), so the steps logged after a
        checkpoint and run again after the resume replace the old ones instead of appearing twice. Offline, wandb
        only records the rewind in the new run segment; ``wandb sync`` replays the segments in start order and the
        server rewinds there. Online, a server that refuses the rewind gets the run resumed instead
        (``resume="allow"``), and the steps it already has are not sent again."""
        mode = self._wandb_args["mode"]
        if not self.enabled or mode == "disabled" or self._wandb is not None:
            return
        try:
            import wandb

            os.environ.setdefault("WANDB_SILENT", "true")
            self._wandb = _open_wandb_run(wandb, self._wandb_args, run_id, step)
            self._wandb_first_step = self._wandb.starting_step
        except Exception as e:  # logging must never kill a run
            self._wandb = None
            print(f"[mmevo] wandb disabled: {e}")

    def begin(self, step: int, wandb_run_id: str | None = None) -> None:
        """A trainer starts (``step`` 0) or resumes at ``step``: drop the curve's lines after it and open the wandb
        run, the checkpoint's own (``wandb_run_id``) continued after ``step`` when it has one."""
        self.truncate_after(step)
        self.start_wandb(wandb_run_id, step)

    def log(self, step: int, metrics: dict) -> None:
        if not self.enabled:
            return
        clean = {k: (float(v) if isinstance(v, (int, float)) and math.isfinite(float(v)) else v) for k, v in metrics.items()}
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, **clean}, default=str) + "\n")
        if self._wandb is not None and step >= self._wandb_first_step:
            self._wandb.log({k: v for k, v in clean.items() if isinstance(v, (int, float))}, step=step)

    def truncate_after(self, step: int) -> None:
        """On resume, drop lines logged after the checkpoint so the curve has no duplicates (writing rank only)."""
        if self.enabled:
            truncate_rows_after(self.path, step)

    def close(self) -> None:
        """Finish this logger's own wandb run (idempotent); metrics.jsonl needs no closing."""
        run, self._wandb = self._wandb, None
        if run is not None:
            run.finish()


def _open_wandb_run(wandb, args: dict, run_id: str | None, step: int):
    """A new wandb run, or run ``run_id`` rewound to ``step``; online, resumed where rewinding fails."""
    if run_id is None:
        return wandb.init(**args)
    try:
        return wandb.init(resume_from=f"{run_id}?_step={step}", **args)
    except Exception as e:
        if args["mode"] == "offline":  # offline nothing is asked of a server: this failure is not about rewinding
            raise
        print(f"[mmevo] wandb could not rewind run {run_id} to step {step} ({e}); resuming it instead: the steps "
              "it already has are not logged again")
        return wandb.init(id=run_id, resume="allow", **args)


def _row(line: str) -> dict | None:
    """One metrics line, or None for a blank one or the torn last line of a run killed (or out of disk) mid-write:
    resume drops it rather than failing on it."""
    try:
        row = json.loads(line) if line.strip() else None
    except json.JSONDecodeError:
        return None
    return row if isinstance(row, dict) else None


def truncate_rows_after(path: str | Path, step: int) -> None:
    """Keep the rows of a per-step jsonl (a curve, an event log) up to ``step``; the torn last line of a run killed
    mid-write goes too. A missing file is left missing."""
    p = Path(path)
    if p.exists():
        keep = [line for line in p.read_text().splitlines() if (row := _row(line)) is not None
                and row.get("step", 0) <= step]
        # through a temp file and a rename: written in place, a kill or a full disk mid-write left the curve empty or
        # torn, and the rows up to the checkpoint are never logged again
        write_text_atomic(p, "".join(line + "\n" for line in keep))


def read_curve(path: str | Path) -> list[dict]:
    """A run's metrics.jsonl rows, without blank lines or the torn last line of a run killed mid-write."""
    p = Path(path)
    return [row for line in p.read_text().splitlines() if (row := _row(line)) is not None] if p.exists() else []


def read_jsonl(path: str | Path) -> list[dict]:
    p = Path(path)
    return [json.loads(l) for l in p.read_text().splitlines() if l.strip()] if p.exists() else []


def plot_curves(jsonl: str | Path, out_png: str | Path, keys: list[str], title: str = "") -> Path | None:
    """One subplot per metric key present in the jsonl, x = step."""
    rows = read_jsonl(jsonl)
    keys = [k for k in keys if any(k in r for r in rows)]
    if not rows or not keys:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(keys), 1, figsize=(6, 2.2 * len(keys)), squeeze=False)
    for ax, k in zip(axes[:, 0], keys):
        pts = [(r["step"], r[k]) for r in rows if k in r and isinstance(r[k], (int, float))]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".")
        ax.set_ylabel(k.split("/")[-2] + "/" + k.split("/")[-1] if "/" in k else k, fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("step")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out_png, dpi=90)
    plt.close(fig)
    return Path(out_png)
