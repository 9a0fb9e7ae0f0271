"""Hindsight audit (HONEST seed 2.5, "How to verify hindsight is firing in any run"): the share of GRPO steps whose
hindsight reward was non-zero, read from a run's ``metrics.jsonl``. Prints one JSON object.

    python scripts/honest_audit.py runs/grpo                 # a run directory or its metrics.jsonl
    python scripts/honest_audit.py runs/grpo/metrics.jsonl --head honest_hindsight
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("metrics", help="a run's output directory or its metrics.jsonl")
    ap.add_argument("--head", default="honest_hindsight", help="metric label of the hindsight head")
    args = ap.parse_args(argv)
    from mmevo.honest.calibration import hindsight_audit

    try:
        result = hindsight_audit(args.metrics, args.head)
    except (FileNotFoundError, ValueError) as e:
        print(f"honest_audit: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
