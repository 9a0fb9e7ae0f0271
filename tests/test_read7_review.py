"""Read-through of round 27 (part 2): a GSS pool file written before a generated problem's id became its question
(the id was the expression's text) is read as one problem per question on resume, not one per spelling (1); a
checkpoint's replay slots of such problems are re-keyed by their question, one slot per problem (2)."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json

from mmevo.data.schema import Example
from mmevo.honest.loop import read_pool
from mmevo.honest.replay import ReplayBuffer
from mmevo.honest.selfplay import problem_from_expression


def _old_id(expression: str) -> str:  # the id an older mmevo gave a generated problem: its expression's text
    return "gss-" + hashlib.sha1(" ".join(expression.split()).encode()).hexdigest()[:16]


def _row(expression, row_id, step=1):
    return json.dumps({"id": row_id, "answer": "?", "meta": {"expression": expression}, "step": step})


# -- 1. a pool of old ids is one problem per question ------------------------------------------------------------------
def test_read_pool_counts_an_older_runs_spellings_of_one_problem_once(tmp_path):
    same = ["2 + 3", "(2 + 3)", "((2)+3)"]
    assert len({problem_from_expression(e).id for e in same}) == 1  # one question
    path = tmp_path / "pool.jsonl"
    rows = [_row(e, _old_id(e)) for e in same] + [_row("5 % 3", _old_id("5 % 3"))]
    rows.append(_row("2+3", problem_from_expression("2+3").id, step=2))  # the resumed run's row of the same problem
    path.write_text("\n".join(rows) + "\n")
    skipped: dict = {}
    pool = read_pool(path, limit=10, skipped=skipped)
    assert [(ex.problem, ex.answer) for ex in pool] == [
        (problem_from_expression("5 % 3").question, "2"), (problem_from_expression("2 + 3").question, "5")]
    assert len({ex.id for ex in pool}) == len(pool) and skipped == {}
    # the limit counts problems: the latest two are both problems, not two spellings of one
    assert len(read_pool(path, limit=2)) == 2
    assert [ex.answer for ex in read_pool(path, limit=1)] == ["5"]


def test_read_pool_limit_still_counts_a_dropped_row_as_before(tmp_path):
    path = tmp_path / "pool.jsonl"
    path.write_text("\n".join([_row("2 + 3", "a"), _row("1 / 0", "b"), _row("4 * 4", "c")]) + "\n")
    skipped: dict = {}
    assert [ex.answer for ex in read_pool(path, limit=2, skipped=skipped)] == ["16"]
    assert skipped == {"unverifiable": 1}


# -- 2. a checkpoint's replay slots of generated problems are re-keyed by their question -----------------------------
def _old_example(expression):
    ex = problem_from_expression(expression).to_example("trainable")
    return dataclasses.replace(ex, id=_old_id(expression))


def test_replay_resume_rekeys_an_older_runs_generated_problems():
    old = ReplayBuffer(capacity=3)
    old.add(_old_example("2 + 3"), 0.9, False)
    old.add(_old_example("(2 + 3)"), 0.8, False)  # another spelling: a second slot in the older run
    old.add(_old_example("5 % 3"), 0.5, True)
    state = copy.deepcopy(old.state_dict())
    buf = ReplayBuffer(capacity=3)
    buf.load_state_dict(state)
    assert [e.example.id for e in buf.entries()] == [problem_from_expression(e).id for e in ("2 + 3", "5 % 3")]
    assert buf.resume_dropped == 1 and buf.entries()[0].confidence == 0.8  # the later slot of the problem stays
    # the same problem drawn again after the resume updates its entry instead of taking a slot
    buf.add(problem_from_expression("2+3").to_example("trainable"), 0.1, True)
    assert (buf.added, buf.updated, len(buf.entries())) == (3, 1, 2)
    # the ring comes round over every slot without losing an index entry (a KeyError before)
    for k in range(7):
        buf.add(problem_from_expression(f"{k} * 7").to_example("trainable"), 0.5, True)
    assert len(buf.entries()) == 3 and len(buf.index) == 3
    # a prompt that is no generated problem keeps its id
    plain = ReplayBuffer(capacity=2)
    plain.add(Example(id="gss-kept", problem="What is 1+1?", answer="2", choices=[], images=[]), 0.5, True)
    again = ReplayBuffer(capacity=2)
    again.load_state_dict(copy.deepcopy(plain.state_dict()))
    assert [e.example.id for e in again.entries()] == ["gss-kept"]


# -- 3. an exception group's members are read only as far as needed -----------------------------------------------------
def test_exception_group_members_read_no_further_than_the_first_few():
    from render import worker

    class EndlessGroup(ExceptionGroup):  # a job's class: its members an endless iterator
        @property
        def exceptions(self):
            def members():
                yield PermissionError(13, "refused", "passwd")
                yield from (ValueError("again") for _ in range(worker.GROUP_MEMBERS_READ - 1))
                raise AssertionError("read past the first members")  # stands in for an endless stream
            return members()

    g = EndlessGroup("g", [ValueError("x")])
    assert len(worker._group_members(g)) == worker.GROUP_MEMBERS_READ
    assert worker._classify_exception(g) == "forbidden"
    assert "PermissionError" in worker._exc_text(g)
