"""Benchmark the sandboxed render pool against a naive per-job ``python -c`` subprocess.

    python scripts/bench_render.py [--workers 2] [--jobs 40] [--baseline-jobs 10] [--out bench.json]

Prints JSON: pool start time, per-job latency of a trivial job (pure sandbox overhead), latency and
throughput of a two-panel plot ("typical") and a one-line plot ("simple") through the pool, against two per-job
baselines: a fresh sandboxed worker per job (the same isolation, paid per job: what a per-job subprocess sandbox
costs) and, as a lower bound, one unsandboxed ``python -c`` per job.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from render import RenderJob, RenderPool  # noqa: E402

TRIVIAL = "x = 1\n"
TYPICAL = """
import matplotlib.pyplot as plt
import numpy as np
x = np.linspace(0, 10, 200)
fig, (a, b) = plt.subplots(1, 2, figsize=(6, 3), dpi=100)
a.plot(x, np.sin(x), label="sin"); a.plot(x, np.cos(x), label="cos"); a.legend(); a.set_title("waves")
b.bar(["a", "b", "c", "d"], [3, 5, 2, 4], color="tab:orange"); b.set_ylabel("count")
fig.tight_layout()
"""


SIMPLE = """
import matplotlib.pyplot as plt
plt.figure(figsize=(3, 2), dpi=80)
plt.plot([0, 1, 2, 3], [1, 3, 2, 4], marker="o")
plt.title("simple")
"""


def _stats(xs):
    xs = sorted(xs)
    return {"mean_ms": 1000 * statistics.fmean(xs), "p50_ms": 1000 * xs[len(xs) // 2],
            "p90_ms": 1000 * xs[int(0.9 * (len(xs) - 1))], "n": len(xs)}


def _baseline_one(code: str) -> float:
    with tempfile.TemporaryDirectory() as d:
        src = "import matplotlib\nmatplotlib.use('Agg')\n" + code + "\nimport matplotlib.pyplot as plt\n" \
              "plt.gcf().savefig('out.png')\n"
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", src], cwd=d, check=True, capture_output=True, timeout=60)
        dt = time.perf_counter() - t0
        assert os.path.getsize(os.path.join(d, "out.png")) > 0
    return dt


def _fresh_sandbox_one(code: str) -> float:
    """One job in a sandboxed worker started for it alone (pre-warm import and isolation setup paid per job)."""
    t0 = time.perf_counter()
    with RenderPool(workers=1) as pool:
        r = pool.render(RenderJob(code))
    assert r.ok, r
    return time.perf_counter() - t0


def _throughput(fn, code: str, jobs: int, workers: int) -> float:
    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(fn, [code] * jobs))
    return jobs / (time.perf_counter() - t)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--baseline-jobs", type=int, default=10)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    out: dict = {"workers": args.workers, "cpu_count": os.cpu_count()}
    t0 = time.perf_counter()
    with RenderPool(workers=args.workers) as pool:
        out["pool_start_s"] = time.perf_counter() - t0
        out["isolation"] = {k: v for k, v in pool.isolation.items() if k != "errors"}
        lat = []
        for _ in range(args.jobs):
            t = time.perf_counter()
            r = pool.render(RenderJob(TRIVIAL))
            lat.append(time.perf_counter() - t)
            assert r.error_kind == "no_output", r
        out["trivial_job_sequential"] = _stats(lat)
        lat = []
        for _ in range(args.jobs // 2):
            t = time.perf_counter()
            r = pool.render(RenderJob(TYPICAL))
            lat.append(time.perf_counter() - t)
            assert r.ok, r
        out["typical_plot_sequential"] = _stats(lat)
        for name, code in (("typical", TYPICAL), ("simple", SIMPLE)):
            t = time.perf_counter()
            rs = pool.render_many([RenderJob(code)] * args.jobs)
            dt = time.perf_counter() - t
            assert all(r.ok for r in rs)
            out[f"{name}_plot_throughput_jobs_per_s"] = args.jobs / dt

    for name, code in (("typical", TYPICAL), ("simple", SIMPLE)):
        fresh = _throughput(_fresh_sandbox_one, code, args.baseline_jobs, args.workers)
        bare = _throughput(_baseline_one, code, args.baseline_jobs, args.workers)
        out[f"baseline_fresh_sandbox_{name}_jobs_per_s"] = fresh
        out[f"baseline_bare_subprocess_{name}_jobs_per_s"] = bare
        pool_tp = out[f"{name}_plot_throughput_jobs_per_s"]
        out[f"speedup_{name}_vs_fresh_sandbox"] = pool_tp / fresh
        out[f"speedup_{name}_vs_bare_subprocess"] = pool_tp / bare
    out["baseline_subprocess_typical_sequential"] = _stats([_baseline_one(TYPICAL) for _ in range(args.baseline_jobs)])
    out["targets"] = {"trivial_overhead_ms": 25, "speedup": 20}
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
