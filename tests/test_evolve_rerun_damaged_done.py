"""A damaged phase record (done.json) is refused naming it, as the phase loop refuses it, by the rerun checks that
count finished phases: they took its mere presence for a finished phase (said "reused", or counted the iteration)."""

import pytest

from mmevo.config import ConfigError
from mmevo.evolve.rerun import check_iterations_not_fewer, say_reused_phases


def _phase(out, name, text):
    d = out / name
    d.mkdir(parents=True)
    (d / "done.json").write_text(text)


def test_reused_phases_read_their_records(tmp_path, capsys):
    _phase(tmp_path, "iter_1/solver", '{"step": 3}')
    assert say_reused_phases(tmp_path, ["iter_1/solver"], "prism") == ["iter_1/solver"]
    assert "1 of 1 phases finished before" in capsys.readouterr().err
    _phase(tmp_path, "iter_2/solver", '{"step": ')  # torn
    with pytest.raises(ConfigError, match=r"iter_2/solver/done.json: not a readable phase record"):
        say_reused_phases(tmp_path, ["iter_1/solver", "iter_2/solver"], "prism")


def test_fewer_iterations_check_reads_the_records(tmp_path):
    _phase(tmp_path, "iter_1/questioner", "{}")
    check_iterations_not_fewer(tmp_path, 1, 1, "prism")  # iteration 1 is planned
    _phase(tmp_path, "iter_2/questioner", "\xff not json")
    with pytest.raises(ConfigError, match=r"iter_2/questioner/done.json: not a readable phase record"):
        check_iterations_not_fewer(tmp_path, 1, 1, "prism")
