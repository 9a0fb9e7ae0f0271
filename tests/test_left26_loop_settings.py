"""mmzero.iterations=0 ran nothing and is refused before any model loads (as prism.iterations=0 already was); the
without-GSS ablation of a shipped HONEST config (honest.gss_mode=off) stays accepted."""

from pathlib import Path

import pytest

from mmevo.cli import main
from mmevo.config import ConfigError, load_config, settings_without_effect, validate

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


@pytest.mark.parametrize("loop", ["mmzero", "prism"])
def test_zero_iterations_is_refused_by_both_loops(loop):
    with pytest.raises(ConfigError, match=rf"{loop}.iterations=0 must be >= 1"):
        validate(load_config(None, [f"{loop}.iterations=0"]))
    validate(load_config(None, [f"{loop}.iterations=1"]))


def test_mmzero_zero_iterations_is_refused_by_the_command(no_runs, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["evolve", "mmzero", str(CONFIGS / "mmzero_tiny.yaml"), "mmzero.iterations=0",
                 f"mmzero.output_dir={out}"]) == 2
    assert capsys.readouterr().err == "mmevo evolve: error: mmzero.iterations=0 must be >= 1\n"
    assert no_runs == [] and not out.exists()


@pytest.mark.parametrize("config", ["honest_tiny.yaml", "honest_qwen2_5_1_5b.yaml"])
def test_gss_off_on_a_shipped_honest_config_is_accepted(config):
    """The without-GSS ablation of a shipped config (which sets gss_share, gss_warmup_problems, ...) must run as
    given: an earlier check refused every gss_* value away from its default under gss_mode=off."""
    cfg = load_config(CONFIGS / config, ["honest.gss_mode=off"])
    validate(cfg)
    assert settings_without_effect(cfg) == {}


def test_evolve_honest_runs_the_gss_off_ablation_of_the_shipped_config(no_runs, tmp_path):
    out = tmp_path / "run"
    assert main(["evolve", "honest", str(CONFIGS / "honest_tiny.yaml"), f"honest.output_dir={out}",
                 "honest.gss_mode=off"]) == 0
    assert no_runs == ["honest"]
