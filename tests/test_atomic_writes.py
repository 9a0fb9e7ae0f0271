"""``mmevo.atomic``: the files a rerun reads back (phase records, summaries, cached evaluations, cut metrics) appear
whole or not at all when the writer is killed mid-write."""

import json
from pathlib import Path

import pytest

from mmevo.atomic import write_json_atomic, write_text_atomic


def _kill_mid_write(monkeypatch, target_name: str):
    real = Path.write_text

    def killed(self, data, *a, **k):
        if self.name.startswith(target_name):
            real(self, data[:5], *a, **k)  # its first bytes on disk
            raise KeyboardInterrupt  # stands for the SIGKILL: nothing after this line runs
        return real(self, data, *a, **k)

    monkeypatch.setattr(Path, "write_text", killed)
    return real


def test_a_kill_mid_write_leaves_the_old_file_whole(monkeypatch, tmp_path):
    path = tmp_path / "done.json"
    write_json_atomic(path, {"steps": 2})
    real = _kill_mid_write(monkeypatch, "done.json")
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(path, {"steps": 3, "pad": "x" * 100})
    monkeypatch.setattr(Path, "write_text", real)
    assert json.loads(path.read_text()) == {"steps": 2}
    write_json_atomic(path, {"steps": 3})  # the next write replaces the leftover temporary file too
    assert json.loads(path.read_text()) == {"steps": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done.json"]


def test_a_kill_mid_first_write_leaves_no_file(monkeypatch, tmp_path):
    path = tmp_path / "summary.json"
    _kill_mid_write(monkeypatch, "summary.json")
    with pytest.raises(KeyboardInterrupt):
        write_json_atomic(path, {"a": 1})
    assert not path.exists()


def test_text_and_json_round_trip(tmp_path):
    write_text_atomic(tmp_path / "r.jsonl", "é\n")
    assert (tmp_path / "r.jsonl").read_text(encoding="utf-8") == "é\n"
    write_json_atomic(tmp_path / "c.json", {"p": Path("x")}, indent=None)
    assert (tmp_path / "c.json").read_text() == '{"p": "x"}'
