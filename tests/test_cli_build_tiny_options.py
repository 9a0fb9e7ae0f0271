"""`mmevo build-tiny DIR --txt` names the option it does not know (it printed the usage line alone) and builds nothing."""
from mmevo.cli import main


def test_unknown_build_tiny_option_is_named_with_a_suggestion(tmp_path, capsys):
    assert main(["build-tiny", str(tmp_path / "m"), "--txt"]) == 2
    err = capsys.readouterr().err
    assert "unknown option '--txt'; did you mean '--text'?" in err
    assert "usage: mmevo build-tiny DIR [--text]" in err
    assert not (tmp_path / "m").exists()


def test_build_tiny_usage_errors_and_help_are_unchanged(tmp_path, capsys):
    assert main(["build-tiny", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: mmevo build-tiny DIR [--text]")
    assert main(["build-tiny"]) == 2
    assert main(["build-tiny", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    assert "unknown" not in capsys.readouterr().err
