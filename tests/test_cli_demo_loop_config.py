"""`mmevo demo CONFIG` with a self-evolution loop's config is refused before anything runs, as `train` / `sft` refuse
it: the demo ran its minutes-long SFT and then its runs without any of the loop's settings."""
from pathlib import Path

import pytest

from mmevo.cli import _check_no_loop_settings, main
from mmevo.demo import demo_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.parametrize("config, section", [("mmzero_tiny.yaml", "mmzero."), ("prism_tiny.yaml", "prism."),
                                             ("honest_tiny.yaml", "honest.")])
def test_demo_refuses_a_loop_config_before_writing_anything(config, section, tmp_path, capsys):
    out = tmp_path / "demo"
    # a model that is not there: the demo without the check stops at it (or trains for minutes, with a real one)
    assert main(["demo", "--out", str(out), str(CONFIGS / config), f"model.path={tmp_path / 'no_model'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mmevo demo: error: {section}") and "`mmevo demo` would run without them" in err
    assert not out.exists()


def test_the_demo_config_itself_passes(tmp_path):
    _check_no_loop_settings(demo_config([], str(tmp_path / "demo")), "demo")
