"""Benchmark the sandboxed render pool against a naive per-job ``python -c`` subprocess.

    python scripts/bench_render.py [--workers 2] [--jobs 40] [--baseline-jobs 10] [--out bench.json]

Prints JSON: pool start time, per-job latency of a trivial job (pure sandbox overhead), latency and
throughput of a typical plot through the pool, and the same plot through one unsandboxed subprocess per job.
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
        t = time.perf_counter()
        rs = pool.render_many([RenderJob(TYPICAL)] * args.jobs)
        dt = time.perf_counter() - t
        assert all(r.ok for r in rs)
        out["typical_plot_throughput_jobs_per_s"] = args.jobs / dt

    lat = [_baseline_one(TYPICAL) for _ in range(args.baseline_jobs)]
    out["baseline_subprocess_typical_sequential"] = _stats(lat)
    t = time.perf_counter()
    with ThreadPoolExecutor(args.workers) as ex:
        list(ex.map(_baseline_one, [TYPICAL] * args.baseline_jobs))
    out["baseline_subprocess_throughput_jobs_per_s"] = args.baseline_jobs / (time.perf_counter() - t)
    out["speedup_throughput"] = (out["typical_plot_throughput_jobs_per_s"]
                                 / out["baseline_subprocess_throughput_jobs_per_s"])
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
