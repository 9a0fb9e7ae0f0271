"""Parity of ``score_mathvision`` with lmms-eval's port of the official MATH-V scorer.

Runs ``scripts/parity_mathvision.py`` on a deterministic subset of MATH-V test (every 5th row of the full
test.jsonl, skipped when that file is missing; and every row of the small fixtures in data/fixtures; 10
responses each, the responses that hang the official side left out) and asserts that ours and the
reference agree on every pair, except the allow-listed classes below, where the reference is wrong
w.r.t. the official MATH-V script. Needs ``.venv-parity`` (``make parity-env``; ``make test`` makes it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from datapaths import FIXTURES, SHARED, needs_shared

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "parity_mathvision.py"
PARITY_PY = ROOT / ".venv-parity" / "bin" / "python"

# (data file, row stride, rows compared): every 5th row of the full test.jsonl (3,040 rows), or every row of a
# fixture file
SUBSETS = [
    pytest.param(SHARED / "mathvision" / "test.jsonl", 5, 608, id="full",
                 marks=needs_shared("mathvision/test.jsonl", "MATH-V test.jsonl (3,040 rows; the parity subset is "
                                                             "every 5th row)")),
    pytest.param(FIXTURES / "mathvision" / "test.jsonl", 1, 9, id="fixture-test"),
    pytest.param(FIXTURES / "mathvision" / "testmini.jsonl", 1, 17, id="fixture-testmini"),
]

# Known disagreements where the reference (lmms-eval 0.7.3) is wrong, by class (the script assigns
# the class; a disagreement of any other class fails the test).
ALLOWED = {
    # The official MATH-V evaluation/utils.py has ``from math import *``; lmms-eval's copy of it
    # (lmms_eval/tasks/mathvision/eval_utils.py) dropped that import, so its
    # ``eval(str(latex2sympy(x)))`` raises NameError on sqrt(3), pi, log(2), ... and such answers
    # only ever match as strings there ("\boxed{3.46}" for 2\sqrt{3}, "\boxed{\sqrt{441}}" for 21, an
    # option text "$8 \sqrt{3}$" written "8\sqrt{3}"). The script re-scores each disagreement with
    # the reference given back the ``math`` names (= the official utils.py): this class is exactly
    # the disagreements that the official script decides like ours.
    "port_missing_math_namespace": "lmms-eval's eval_utils.py lacks the official `from math import *`",
}


@pytest.mark.parametrize("data, stride, n_rows", SUBSETS)
def test_parity_with_lmms_eval(tmp_path, data, stride, n_rows):
    if not PARITY_PY.exists():
        pytest.skip("the reference venv .venv-parity is missing: run `make parity-env`")
    out = tmp_path / "parity.json"
    cmd = [sys.executable, str(SCRIPT), "--data", str(data), "--row-stride", str(stride), "--per-row", "8",
           "--no-slow", "--jobs", "2", "--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text(encoding="utf-8"))

    assert report["rows"] == n_rows and report["pairs"] == n_rows * 10
    # Every pair got an official verdict (no time-out / crash among these shapes).
    assert report["official_timed_out"] == 0 and report["official_errors"] == 0, report["official_not_ok"][:5]
    assert report["compared"] == report["pairs"]

    unexplained = [d for d in report["disagreements"] if d.get("class") not in ALLOWED]
    assert not unexplained, json.dumps(unexplained[:10], indent=1, ensure_ascii=False)
    for d in report["disagreements"]:
        # the allow-listed class: the official script (math names restored) decides like ours
        assert d["official_with_math_namespace"] == d["ours"]
    allowed = sum(1 for d in report["disagreements"] if d["class"] in ALLOWED)
    assert report["agree"] + allowed == report["compared"]
