"""The official MATH-V scorer in the state a whole-benchmark run is in, run in ``.venv-parity``: shared by the parity
tests that pin values and verdicts (tests/test_scoring_review11.py to tests/test_scoring_review14.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PARITY_PY = ROOT / ".venv-parity" / "bin" / "python"

# Run in .venv-parity: the official value of each answer and the official verdict of each response, after one parse
# of a differential ("dx"), which puts latex2sympy2 in the state an official run is in after its first such answer.
_OFFICIAL = r"""
import json, math, signal, sys
sys.path.insert(0, sys.argv[1])
from parity_mathvision import _load_reference
from loguru import logger
import latex2sympy2

logger.remove()
eval_utils, utils = _load_reference()
for name in dir(math):  # the official utils.py's ``from math import *``
    if not name.startswith("_"):
        eval_utils.__dict__.setdefault(name, getattr(math, name))
latex2sympy2.latex2sympy("dx")
assert not isinstance(latex2sympy2.var, dict)
cases = json.load(sys.stdin)

def on_alarm(signum, frame):
    raise TimeoutError

signal.signal(signal.SIGALRM, on_alarm)
values = []
for latex in cases["values"]:
    signal.alarm(20)
    try:
        v = round(eval(str(eval_utils.latex2sympy(latex)), eval_utils.__dict__), 2)
        values.append(None if isinstance(v, tuple) else v)
    except TimeoutError:
        values.append("timeout")
    except Exception:
        values.append(None)
    signal.alarm(0)
verdicts = [bool(utils.mathvision_process_results({"answer": gold, "options": []}, [response])
                 ["mathvision_standard_eval"]["scores"][0]) for response, gold in cases["verdicts"]]
print(json.dumps({"values": [v if v is None or isinstance(v, str) else repr(v) for v in values],
                  "verdicts": verdicts}))
"""


def assert_official_agrees(values: list[tuple[str, object]], verdicts: list[tuple[str, str, bool]]) -> None:
    """Each (answer, value) and (response, gold, verdict) as the official scorer gives them; skips without the venv."""
    if not PARITY_PY.exists():
        pytest.skip("the reference venv .venv-parity is missing: run `make parity-env`")
    cases = {"values": [v for v, _ in values], "verdicts": [[r, g] for r, g, _ in verdicts]}
    proc = subprocess.run([str(PARITY_PY), "-c", _OFFICIAL, str(ROOT / "scripts")], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for (latex, expected), got in zip(values, out["values"]):
        # repr keeps int vs float and the exact digits of a big factorial
        assert got == (None if expected is None else repr(expected)), latex
    assert out["verdicts"] == [official for _, _, official in verdicts]


def assert_value_is_official(latex: str, official) -> None:
    """Ours reads ``latex`` as the official value (None: no value), int vs float included."""
    from mmevo.eval.scoring import _latex_value

    value = _latex_value(latex)
    if official is None:
        assert value is None
    else:
        assert value is not None and round(value, 2) == official, value
        assert type(value) is type(official)


def assert_refused_quickly(latex: str) -> None:
    """The cost guard refuses ``latex`` before parsing (not a parse that happened to fail), within a CPU second."""
    import time

    from mmevo.eval.scoring import _too_costly_for_sympy, mathvision_is_equal

    t0 = time.process_time()
    assert _too_costly_for_sympy(latex)
    assert mathvision_is_equal(latex, "1") is False
    assert time.process_time() - t0 < 1.0


def assert_scored_in_bounded_time(answers: list[str], gold: str, cpu_s: float) -> None:
    """Each answer (at most 1,000 characters) scores False against ``gold``, all of them within ``cpu_s`` CPU seconds:
    answers whose every part is under the cost guard's bounds still cost a bounded verdict together."""
    import time

    from mmevo.eval.scoring import mathvision_is_equal

    t0 = time.process_time()
    for latex in answers:
        assert len(latex) <= 1000
        assert mathvision_is_equal(latex, gold) is False, latex
    assert time.process_time() - t0 < cpu_s


def parity_tests(values: list[tuple[str, object]], verdicts: list[tuple[str, str, bool]]):
    """The three parity tests of a MATH-V parity file, bound in it as ``(test_values_match_the_official_scorer,
    test_verdicts_match_the_official_scorer, test_the_official_scorer_agrees) = parity_tests(VALUES, VERDICTS)``: ours
    reads each answer as its official value and gives each response its official verdict, and the official scorer
    itself gives those values and verdicts (``assert_official_agrees``)."""

    @pytest.mark.parametrize("latex,official", values, ids=[v for v, _ in values])
    def test_values_match_the_official_scorer(latex, official):
        assert_value_is_official(latex, official)

    @pytest.mark.parametrize("response,gold,official", verdicts)
    def test_verdicts_match_the_official_scorer(response, gold, official):
        from mmevo.eval.scoring import score_mathvision

        assert score_mathvision(response, {"answer": gold, "options": []}) is official

    def test_the_official_scorer_agrees():
        assert_official_agrees(values, verdicts)

    return test_values_match_the_official_scorer, test_verdicts_match_the_official_scorer, test_the_official_scorer_agrees
