"""Loop settings that ran nothing or were never read: mmzero.iterations=0 (as prism.iterations=0 already was) and
honest.gss_* values given with honest.gss_mode=off are refused before any model loads."""

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


@pytest.mark.parametrize("setting", ["honest.gss_share=0.5", "honest.gss_pool_size=64", "honest.gss_solver_samples=8",
                                     "honest.gss_generator_steps=3", "honest.gss_generator_samples=4",
                                     "honest.gss_stub_mutate_share=0.5", "honest.gss_warmup_problems=10"])
def test_gss_settings_with_gss_off_have_no_effect(setting):
    key = setting.partition("=")[0]
    assert key in settings_without_effect(load_config(None, ["honest.gss_mode=off", setting]))
    for mode in ("stub", "trainable"):  # read there (or, per mode, left to the loop)
        assert key not in settings_without_effect(load_config(None, [f"honest.gss_mode={mode}", setting]))


def test_gss_defaults_and_the_solver_blocks_are_not_refused_with_gss_off():
    assert settings_without_effect(load_config(None, ["honest.gss_mode=off"])) == {}
    # the solver trains gss_blocks x gss_block_steps steps whatever the mode
    assert settings_without_effect(load_config(None, ["honest.gss_mode=off", "honest.gss_blocks=3",
                                                      "honest.gss_block_steps=4"])) == {}
    # a default value written out is no setting
    assert settings_without_effect(load_config(None, ["honest.gss_mode=off", "honest.gss_share=0.3"])) == {}


def test_evolve_honest_refuses_a_gss_setting_with_gss_off(no_runs, tmp_path, capsys):
    out = tmp_path / "run"
    base = ["evolve", "honest", "model.path=tiny-text", f"honest.output_dir={out}", "honest.gss_mode=off"]
    assert main([*base, "honest.gss_share=0.5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mmevo evolve: error: honest.gss_share=0.5 has no effect in the honest loop's solver role: "
                          "honest.gss_mode=off builds no GSS generator")
    assert no_runs == []
    assert main(base) == 0 and no_runs == ["honest"]
