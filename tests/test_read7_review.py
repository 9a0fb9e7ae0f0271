"""Read-through of round 27 (part 2): a GSS pool file written before a generated problem's id became its question
(the id was the expression's text) is read as one problem per question on resume, not one per spelling (1)."""

from __future__ import annotations

import hashlib
import json

from mmevo.honest.loop import read_pool
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
