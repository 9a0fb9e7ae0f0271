"""Scoring an answer through math-verify prints nothing to the user's log.

mmevo calls math-verify with no timeout on purpose and bounds the cost itself; math-verify's "Timeout is disabled ...
to prevent code getting stuck" warning appeared once in every `train` / `evolve` run that compared two answers."""
import logging

import math_verify.grader
import math_verify.parser

from mmevo.rewards import answers


def test_math_verify_comparison_logs_no_timeout_warning(monkeypatch, caplog):
    # as in a fresh process: math-verify not loaded by mmevo yet, its once-only warnings not shown yet
    monkeypatch.setattr(answers, "_MV", None)
    monkeypatch.setattr(math_verify.parser, "TIMEOUT_WARNING_SHOWN", False)
    monkeypatch.setattr(math_verify.grader, "TIMEOUT_WARNING_SHOWN", False)
    with caplog.at_level(logging.WARNING):
        assert answers.answers_equivalent("3+z", "z+3", None)
    assert answers._MV is not None  # the comparison went through math-verify
    assert [r.getMessage() for r in caplog.records if r.name.startswith("math_verify")] == []


def test_other_math_verify_warnings_still_reach_the_log(caplog):
    answers._mv()
    with caplog.at_level(logging.WARNING):
        logging.getLogger("math_verify.parser").warning("some other problem")
    assert [r.getMessage() for r in caplog.records] == ["some other problem"]
