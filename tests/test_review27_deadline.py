"""Review of round 27's math-verify deadline (SIGALRM around sympy): a result computed while the deadline ran out
depends on the machine's load, so it is not cached; the handler does nothing once its block has ended."""

import signal
import time

import pytest

from mmevo.rewards import answers as A


@pytest.fixture(autouse=True)
def warm():
    A.answers_equivalent("\\frac{1}{2}", "x")  # imports math-verify and sympy outside any short deadline


def test_an_answer_that_ran_out_once_is_read_again(monkeypatch):
    pred, gold = "\\frac{y^2-361}{y-19}", "y+19"  # 0.03 s of sympy here
    monkeypatch.setattr(A, "_MV_DEADLINE_S", 1e-6)  # a machine so busy that every deadline runs out
    assert A.answers_equivalent(pred, gold) is False
    assert A._mv_parse("\\frac{z^2-529}{z-23}") == ()
    assert A._mv_values("\\sqrt{361}+\\frac{17}{19}") is None
    monkeypatch.setattr(A, "_MV_DEADLINE_S", 1.0)
    # the load is gone: the same answers are read and compared (they were cached as unparsable / unequal)
    assert A.answers_equivalent(pred, gold) is True
    assert A._mv_parse("\\frac{z^2-529}{z-23}") != ()
    assert A._mv_values("\\sqrt{361}+\\frac{17}{19}") is not None
    # and a result computed within the deadline is cached as before
    hits = A._equivalent.cache_info().hits
    assert A.answers_equivalent(pred, gold) is True
    assert A._equivalent.cache_info().hits > hits


def test_a_late_alarm_after_the_block_does_nothing():
    if signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        pytest.skip("an interval timer is running (pytest-timeout?): the deadline leaves it alone")
    before = signal.getsignal(signal.SIGALRM)
    with A._mv_deadline() as d:
        handler = signal.getsignal(signal.SIGALRM)
    assert d.armed and handler is not before
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    # a SIGALRM already on its way as the block ended is handled after it, possibly by this handler (signal.signal
    # runs pending handlers before it swaps them): raising there would leave the deadline's handler installed
    handler(signal.SIGALRM, None)
    assert not getattr(A._DEADLINE, "armed", False)
    with A._mv_deadline() as d:  # later deadlines still arm
        assert d.armed and signal.getitimer(signal.ITIMER_REAL)[0] > 0
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0


def test_an_overrun_inside_the_block_still_raises(monkeypatch):
    monkeypatch.setattr(A, "_MV_DEADLINE_S", 1e-3)
    if signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        pytest.skip("an interval timer is running")
    before = signal.getsignal(signal.SIGALRM)
    end = time.monotonic() + 10
    with pytest.raises(A._MvOverrun):
        with A._mv_deadline():
            while time.monotonic() < end:  # bounded, so that a deadline that never fires fails the test
                pass
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0 and not A._DEADLINE.armed
    assert signal.getsignal(signal.SIGALRM) is before


def test_a_deadline_that_runs_out_as_it_is_armed_leaves_nothing_behind(monkeypatch):
    """A timer that fires inside __enter__ (a 1 us deadline here; a thread descheduled for a second on a loaded
    machine) raised before the block began, where no __exit__ ran: the handler stayed installed and the thread stayed
    marked armed, so no later math-verify call had a deadline."""
    if signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        pytest.skip("an interval timer is running")
    before = signal.getsignal(signal.SIGALRM)
    monkeypatch.setattr(A, "_MV_DEADLINE_S", 1e-6)
    for _ in range(20):
        assert A._mv_parse("\\frac{w^2-%d}{w-%d}" % (_ * _, _)) == ()
        assert signal.getsignal(signal.SIGALRM) is before and not A._DEADLINE.armed
    monkeypatch.setattr(A, "_MV_DEADLINE_S", 1.0)
    with A._mv_deadline() as d:
        assert d.armed and signal.getitimer(signal.ITIMER_REAL)[0] > 0


def test_an_answer_that_keeps_running_out_is_cached_after_the_retries(monkeypatch):
    """One overrun is retried (a busy second), but an input that runs out _OVERRUN_RETRIES times keeps that verdict:
    re-parsing it at 1 s a call made one vote of 15 slow answers take 167 s on a loaded machine."""
    text = "\\frac{w^2-841}{w-29}"
    monkeypatch.setattr(A, "_MV_DEADLINE_S", 1e-6)
    for _ in range(A._OVERRUN_RETRIES):
        assert A._mv_parse(text) == ()
    monkeypatch.setattr(A, "_MV_DEADLINE_S", 1.0)
    hits = A._mv_parse.cache_info().hits
    assert A._mv_parse(text) == ()  # the kept verdict, not a new parse
    assert A._mv_parse.cache_info().hits == hits + 1
