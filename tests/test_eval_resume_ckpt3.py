"""Benchmark evaluation resume: responses.jsonl read once; a record answers its item (id and question, not the gold
alone); a resumed sampled evaluation draws the samples the uninterrupted one drew."""

import json
import shutil
from pathlib import Path

from mmevo.eval import runner
from mmevo.eval.runner import run_benchmark
from test_eval_runner import MATHV, _cfg, _lines


def test_two_items_sharing_a_gold_do_not_take_each_others_records(tiny_vl_path, tmp_path):
    data = tmp_path / "mathv"
    shutil.copytree(MATHV, data)
    out = tmp_path / "ev"
    over = {"eval.data": str(data), "eval.limit": 4}
    run_benchmark(_cfg(tiny_vl_path, out, **over))
    first = {r["id"]: r for r in _lines(out)}
    rows = [json.loads(x) for x in (data / "testmini.jsonl").read_text().splitlines()]
    assert (rows[0]["id"], rows[3]["id"], rows[0]["answer"], rows[3]["answer"]) == ("4", "7", "6", "6")
    rows[0]["id"], rows[3]["id"] = "7", "4"  # the same path, the file rewritten: ids 4 and 7 swap questions
    (data / "testmini.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = run_benchmark(_cfg(tiny_vl_path, out, **over))
    # both were kept (the gold matched), each answering the other's question
    assert (s["generated_items"], s["resumed_items"]) == (2, 2)
    after = {r["id"]: r for r in _lines(out)}
    assert after["4"]["question"] == first["7"]["question"] and after["7"]["question"] == first["4"]["question"]
    assert after["5"] == first["5"] and after["6"] == first["6"]


def test_a_resumed_sampled_eval_draws_what_the_uninterrupted_one_drew(tiny_vl_path, tmp_path):
    over = {"eval.limit": 9, "eval.batch_size": 4, "rollout.eval_temperature": 1.0, "eval.max_tokens": 8}
    run_benchmark(_cfg(tiny_vl_path, tmp_path / "whole", **over))
    whole = _lines(tmp_path / "whole")
    out = tmp_path / "killed"
    run_benchmark(_cfg(tiny_vl_path, out, **over))
    lines = (out / "responses.jsonl").read_text().splitlines(keepends=True)
    (out / "responses.jsonl").write_text("".join(lines[:5]) + lines[5][:20])  # killed mid-write of the 2nd batch
    s = run_benchmark(_cfg(tiny_vl_path, out, **over))
    # each item is seeded from its place in the benchmark: the pending items, batched anew, draw what they drew
    assert [(r["id"], r["response"]) for r in _lines(out)] == [(r["id"], r["response"]) for r in whole]
    assert (s["dropped_corrupt_lines"], s["resumed_items"], s["generated_items"]) == (1, 5, 4)


def test_responses_are_read_once_at_the_start(tiny_vl_path, tmp_path, monkeypatch):
    out = tmp_path / "ev"
    run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 2}))
    reads = []
    for name in ("read_text", "read_bytes"):
        real = getattr(Path, name)

        def spy(self, *a, _real=real, **k):
            if self.name == "responses.jsonl":
                reads.append(self.name)
            return _real(self, *a, **k)

        monkeypatch.setattr(Path, name, spy)
    records, dropped = runner._prepare_out_dir(out, json.loads((out / "run.json").read_text()), overwrite=False)
    assert sorted(records) == ["4", "5"] and dropped == 0
    assert reads == ["responses.jsonl"]  # it was read twice: checked for content, then parsed


def test_undecodable_and_line_separator_records_at_the_start(tmp_path):
    """Bytes that are not UTF-8 (a disk error, another tool) failed the start with a UnicodeDecodeError naming no file;
    a response holding U+2028 (written raw: ensure_ascii=False) was split there, dropped as two bad lines and
    regenerated on every resume."""
    out = tmp_path / "ev"
    out.mkdir()
    identity = {"benchmark": "b", "model": "m"}
    (out / "run.json").write_text(json.dumps(identity))
    rec = {"id": "1", "response": "a\u2028b", "extracted": None, "correct": False, "gold": "3", "finish_reason": "stop"}
    (out / "responses.jsonl").write_bytes(json.dumps(rec, ensure_ascii=False).encode() + b"\n"
                                          + b'{"id": "2", "response": "\xff\xfe"}\n')
    records, dropped = runner._prepare_out_dir(out, identity, overwrite=False)
    assert records == {"1": rec} and dropped == 1
    lines = (out / "responses.jsonl").read_bytes().split(b"\n")
    assert [json.loads(x) for x in lines if x] == [rec]  # rewritten to the records that stand


def test_a_sampled_eval_written_before_per_item_seeds_is_not_resumed(tiny_vl_path, tmp_path):
    """Sampled responses from before per-item seeds (their run.json has no `sample_seeds`) were drawn under batch
    seeds: a resume mixed them with per-item draws without a word. Now refused like any other change of run."""
    import pytest

    over = {"eval.limit": 2, "rollout.eval_temperature": 1.0, "eval.max_tokens": 4}
    out = tmp_path / "ev"
    run_benchmark(_cfg(tiny_vl_path, out, **over))
    run = json.loads((out / "run.json").read_text())
    assert run["sample_seeds"] == "per item"
    del run["sample_seeds"]
    (out / "run.json").write_text(json.dumps(run))
    with pytest.raises(ValueError, match=r"different run \(sample_seeds: None -> 'per item'\)"):
        run_benchmark(_cfg(tiny_vl_path, out, **{**over, "eval.limit": 3}))
    greedy = tmp_path / "greedy"  # greedy runs carry no such key: an older one still resumes
    run_benchmark(_cfg(tiny_vl_path, greedy, **{"eval.limit": 2}))
    assert "sample_seeds" not in json.loads((greedy / "run.json").read_text())
    assert run_benchmark(_cfg(tiny_vl_path, greedy, **{"eval.limit": 2}))["resumed_items"] == 2
