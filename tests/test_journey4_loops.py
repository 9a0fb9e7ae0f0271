"""A new user's mistakes with the self-evolution loop commands (journey 4): each refused before any model loads."""

from pathlib import Path

import pytest

from mmevo.cli import main

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


@pytest.mark.parametrize("loop, config, section", [
    ("mmzero", "honest_tiny.yaml", "honest"),
    ("prism", "mmzero_tiny.yaml", "mmzero"),
    ("honest", "prism_tiny.yaml", "prism"),
    ("mmzero", "prism_tiny.yaml", "prism"),
])
def test_another_loops_config_with_an_output_dir_override_is_refused(loop, config, section, no_runs, tmp_path,
                                                                      capsys):
    # the override set this loop's own section, so the check on the merged config let it through: the run went on
    # all defaults (MM-Zero: 3 iterations of 10 steps of the text model, every phase skipped) and summarised it
    out = tmp_path / "run"
    assert main(["evolve", loop, str(CONFIGS / config), f"{loop}.output_dir={out}"]) == 2
    err = capsys.readouterr().err
    assert err == (f"mmevo evolve: error: {CONFIGS / config}: a config of `mmevo evolve {section}` (`{section}:` "
                   f"section, no `{loop}:` section): `mmevo evolve {loop}` would ignore it and run on its own "
                   f"defaults: run `mmevo evolve {section} {CONFIGS / config}`, or add a `{loop}:` section\n")
    assert no_runs == [] and not out.exists()


def test_a_file_with_this_loops_section_or_none_still_runs(no_runs, tmp_path):
    both = tmp_path / "both.yaml"  # one file may hold several loops' sections
    both.write_text((CONFIGS / "honest_tiny.yaml").read_text() + "mmzero:\n  iterations: 1\n")
    assert main(["evolve", "mmzero", str(both), f"mmzero.output_dir={tmp_path / 'a'}", "model.path=tiny"]) == 0
    plain = tmp_path / "plain.yaml"
    plain.write_text("model:\n  path: tiny\n")
    assert main(["evolve", "mmzero", str(plain), f"mmzero.output_dir={tmp_path / 'b'}"]) == 0
    assert main(["evolve", "mmzero", str(CONFIGS / "mmzero_tiny.yaml"), f"mmzero.output_dir={tmp_path / 'c'}"]) == 0
    assert no_runs == ["mmzero"] * 3


@pytest.mark.parametrize("path", ["tiny-text", "local"])
def test_mmzero_refuses_a_text_only_model(path, no_runs, tmp_path, capsys):
    # the solver's prompts dropped every rendered image: a whole run of blind answers, summarised as a normal one
    if path == "local":
        path = tmp_path / "qwen2"
        path.mkdir()
        (path / "config.json").write_text('{"model_type": "qwen2", "hidden_size": 64}')
        (path / "model.safetensors").write_bytes(b"")  # only named: nothing loads before the check
    out = tmp_path / "run"
    assert main(["evolve", "mmzero", str(CONFIGS / "mmzero_tiny.yaml"), f"model.path={path}",
                 f"mmzero.output_dir={out}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mmevo evolve: error: model.path={path}: a text-only model, but MM-Zero's solver ")
    assert no_runs == [] and not out.exists()


def test_mmzero_takes_a_vision_language_checkpoint(no_runs, tmp_path):
    vl = tmp_path / "vl"
    vl.mkdir()
    (vl / "config.json").write_text('{"model_type": "qwen2_5_vl", "vision_config": {"depth": 2}}')
    (vl / "model.safetensors").write_bytes(b"")
    assert main(["evolve", "mmzero", str(CONFIGS / "mmzero_tiny.yaml"), f"model.path={vl}",
                 f"mmzero.output_dir={tmp_path / 'run'}"]) == 0
    assert no_runs == ["mmzero"]


def test_honest_generator_override_needs_the_trainable_generator(no_runs, tmp_path, capsys):
    base = ["evolve", "honest", str(CONFIGS / "honest_tiny.yaml"), f"honest.output_dir={tmp_path / 'run'}",
            "honest.roles.generator={rollout.n: 2}"]
    assert main(base) == 2  # gss_mode=stub builds no generator trainer: the override was ignored
    assert capsys.readouterr().err == ("mmevo evolve: error: honest.roles.generator: the generator is a role only "
                                       "with honest.gss_mode=trainable (here 'stub'): set that, or remove the "
                                       "override\n")
    assert main([*base, "honest.gss_mode=trainable"]) == 0
    assert no_runs == ["honest"]
