"""A string switch whose documented choice is `off` (honest.gss_mode) takes it unquoted: YAML 1.1 reads `off` as a
boolean, and the config refused the documented spelling (`expected a string, got false`)."""

import pytest

from mmevo.config import ConfigError, load_config


def test_gss_mode_off_unquoted_in_a_file_and_an_override(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("honest:\n  gss_mode: off\n")
    assert load_config(f).honest.gss_mode == "off"
    assert load_config(None, ["honest.gss_mode=off"]).honest.gss_mode == "off"
    assert load_config(None, ["honest.gss_mode=trainable"]).honest.gss_mode == "trainable"


def test_a_boolean_for_a_switch_without_that_word_is_still_refused(tmp_path):
    with pytest.raises(ConfigError, match="honest.gss_mode=.*on.*not in|honest.gss_mode"):
        load_config(None, ["honest.gss_mode=on"])  # no `on` choice: a boolean is no gss mode
    with pytest.raises(ConfigError, match="rollout.engine"):
        load_config(None, ["rollout.engine=off"])
