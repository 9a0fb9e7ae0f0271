"""Review 11 (honest11): the HONEST and Prism loops as the README runs them.

A base-config key that every phase of a loop overwrites (``trainer.steps``, ``reward.heads``, ``data.train``, ...)
was accepted by ``mmevo evolve honest|prism`` and ignored: ``trainer.steps=10`` on configs/honest_tiny.yaml ran
gss_blocks x gss_block_steps = 6 solver steps, ``data.train=FILE`` trained on generated honest_tasks. The command now
refuses them before anything loads, naming the key and where to set it instead."""

import pytest

from mmevo.cli import main


@pytest.mark.parametrize("loop, config, override, named, instead", [
    ("honest", "configs/honest_tiny.yaml", "trainer.steps=10", "trainer.steps=10", "honest.gss_block_steps"),
    ("honest", "configs/honest_tiny.yaml", "data.train=my_tasks.jsonl", "data.train='my_tasks.jsonl'",
     "honest.roles.solver"),
    ("honest", "configs/honest_tiny.yaml", "reward.heads={honest_brier: 1.0}", "reward.heads=", "honest.hcr_enabled"),
    ("honest", "configs/honest_tiny.yaml", "data.hide_labels=true", "data.hide_labels=True", "honest.roles"),
    ("prism", "configs/prism_tiny.yaml", "trainer.steps=5", "trainer.steps=5", "prism.questioner_steps"),
    ("prism", "configs/prism_tiny.yaml", "reward.heads={majority: 1.0}", "reward.heads=", "prism.roles"),
])
def test_loop_refuses_base_keys_its_phases_overwrite(tmp_path, capsys, monkeypatch, loop, config, override, named,
                                                     instead):
    import mmevo.evolve.prism
    import mmevo.honest.loop

    def ran(cfg):  # the unrefused run would train for minutes: stop it at the loop's entry
        raise AssertionError(f"the loop started with {override}")

    monkeypatch.setattr(mmevo.honest.loop, "run_honest", ran)
    monkeypatch.setattr(mmevo.evolve.prism, "run_prism", ran)
    out = tmp_path / "run"
    rc = main(["evolve", loop, config, override, f"{loop}.output_dir={out}"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert f"mmevo evolve {loop}` sets these for each of its phases and would ignore them" in err
    assert named in err and instead in err
    assert not out.exists()  # refused before the loop made its output dir (or loaded a model)


@pytest.mark.parametrize("loop, config", [
    ("honest", "configs/honest_tiny.yaml"), ("honest", "configs/honest_qwen2_5_1_5b.yaml"),
    ("prism", "configs/prism_tiny.yaml"), ("prism", "configs/prism_qwen3_4b.yaml"),
])
def test_shipped_loop_configs_set_none_of_them(loop, config):
    from mmevo.cli import loop_owned_settings
    from mmevo.config import load_config

    assert loop_owned_settings(loop, load_config(config)) == []
    # a role override still sets them for its own phase
    role = "solver"
    cfg = load_config(config, [f"{loop}.roles.{role}={{data.hide_labels: true}}"])
    assert loop_owned_settings(loop, cfg) == []
