"""Review 16 of HONEST: rows of the GSS problem pool that the loop drops are counted, not silent (1)."""

from __future__ import annotations

import json

from mmevo.honest.loop import read_pool
from mmevo.honest.selfplay import GSSMixSource, PoolGenerator


def _row(i, expression, step=1):
    return json.dumps({"id": i, "answer": "0", "meta": {"expression": expression}, "step": step})


# -- 1. the pool file's dropped rows are counted -----------------------------------------------------------------------
def _bad_pool(tmp_path):
    path = tmp_path / "pool.jsonl"
    path.write_text("\n".join([
        _row("a", "2 + 3"),
        _row("b", "4 * 4")[:20],  # torn by a kill mid-write
        '["not", "a row"]',  # JSON, but no row
        json.dumps({"answer": "3", "meta": {"expression": "1 + 2"}}),  # no id
        json.dumps({"id": "c", "answer": "3"}),  # no meta.expression
        json.dumps({"id": "d", "meta": {"expression": 7}}),  # an expression that is no string
        _row("e", "1 / 0"),  # division is outside the task grammar: unverifiable
        _row("f", "not (3 < 4)"),
    ]) + "\n")
    return path


def test_read_pool_counts_each_dropped_rows_reason(tmp_path):
    skipped = {}
    pool = read_pool(_bad_pool(tmp_path), limit=10, skipped=skipped)
    assert [(ex.meta["expression"], ex.answer) for ex in pool] == [("2 + 3", "5"), ("not (3 < 4)", "False")]
    assert skipped == {"not_a_row": 3, "no_expression": 2, "unverifiable": 1}
    # without a dict to count into, the same problems
    assert [ex.id for ex in read_pool(_bad_pool(tmp_path), limit=10)] == [ex.id for ex in pool]


def test_a_clean_pool_counts_nothing(tmp_path):
    path = tmp_path / "pool.jsonl"
    path.write_text(_row("a", "2 + 3") + "\n" + _row("a", "2 + 3", step=2) + "\n" + _row("b", "5 % 3") + "\n")
    skipped = {}
    assert len(read_pool(path, limit=10, skipped=skipped)) == 2 and skipped == {}


def test_the_solvers_gss_metrics_show_the_dropped_rows(tmp_path, capsys):
    class Base:
        def take(self, k):
            return []

    from mmevo.honest.loop import load_pool

    generator = PoolGenerator(seed=0)
    path = _bad_pool(tmp_path)
    load_pool(generator, path, limit=10)
    assert len(generator.pool) == 2 and generator.pool_skipped == 6
    assert GSSMixSource(Base(), generator, share=1.0).metrics()["gss/pool_skipped"] == 6.0
    err = capsys.readouterr().err
    assert str(path) in err and "no_expression: 2, not_a_row: 3, unverifiable: 1" in err
