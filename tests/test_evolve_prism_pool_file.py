"""Prism's solver phase reads the pool phase's pool.jsonl back. A damaged line (hand-edited, or torn by a crash before
the pool's done.json) raised a bare JSONDecodeError / KeyError naming neither the file nor the line."""

import json

import pytest


def _row(question="What is 2 + 3?"):
    return json.dumps({"question": question, "cluster": 4, "p": 0.75, "silver": "5"})


@pytest.mark.parametrize("bad, why", [
    ('{"question": "What is 1 + 1?", "clus', "not a pool row"),          # torn mid-line
    (json.dumps({"question": "What is 1 + 1?", "p": 0.5, "silver": "2"}), "no field 'cluster'"),
    (json.dumps({"question": None, "cluster": 1, "p": 0.5, "silver": "2"}), "not a pool row"),
    (json.dumps(["What is 1 + 1?"]), "not a pool row"),
])
def test_a_damaged_pool_line_is_an_error_naming_the_file_and_line(tmp_path, bad, why):
    from mmevo.evolve.prism import read_pool

    path = tmp_path / "iter_1" / "pool" / "pool.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(_row() + "\n" + bad + "\n")
    with pytest.raises(ValueError, match=rf"pool\.jsonl:2: {why}.*delete its done\.json"):
        read_pool(path)


def test_an_intact_pool_reads_every_row(tmp_path):
    from mmevo.evolve.prism import read_pool

    path = tmp_path / "pool.jsonl"
    path.write_text(_row() + "\n" + _row("Ünïcode: what is 7 · 6?") + "\n")
    assert [ex.problem for ex in read_pool(path)] == ["What is 2 + 3?", "Ünïcode: what is 7 · 6?"]
