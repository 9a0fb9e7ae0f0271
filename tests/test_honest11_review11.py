"""Review 11 (honest11): the HONEST and Prism loops as the README runs them (MM-Zero's keys added after it).

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
    ("mmzero", "configs/mmzero_tiny.yaml", "trainer.steps=7", "trainer.steps=7", "mmzero.phase_steps"),
    ("mmzero", "configs/mmzero_tiny.yaml", "data.train=my.jsonl", "data.train='my.jsonl'", "nothing reads it"),
    ("mmzero", "configs/mmzero_tiny.yaml", "csrs.enabled=true", "csrs.enabled=True", "mmzero.roles.solver"),
])
def test_loop_refuses_base_keys_its_phases_overwrite(tmp_path, capsys, monkeypatch, loop, config, override, named,
                                                     instead):
    import mmevo.evolve.mmzero
    import mmevo.evolve.prism
    import mmevo.honest.loop

    def ran(cfg):  # the unrefused run would train for minutes: stop it at the loop's entry
        raise AssertionError(f"the loop started with {override}")

    monkeypatch.setattr(mmevo.honest.loop, "run_honest", ran)
    monkeypatch.setattr(mmevo.evolve.prism, "run_prism", ran)
    monkeypatch.setattr(mmevo.evolve.mmzero, "run_mmzero", ran)
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
    ("mmzero", "configs/mmzero_tiny.yaml"), ("mmzero", "configs/mmzero_qwen2_5_vl_7b.yaml"),
    ("mmzero", "configs/mmzero_tiny_csrs_solver.yaml"),
])
def test_shipped_loop_configs_set_none_of_them(loop, config):
    from mmevo.cli import loop_owned_settings
    from mmevo.config import load_config

    assert loop_owned_settings(loop, load_config(config)) == []
    # a role override still sets them for its own phase
    role = "solver"
    cfg = load_config(config, [f"{loop}.roles.{role}={{data.hide_labels: true}}"])
    assert loop_owned_settings(loop, cfg) == []


def test_resumed_trainable_run_keeps_each_blocks_pool_size(tiny_text_path, tmp_path):
    """A rerun that extends a trainable-GSS run (honest.gss_blocks 1 -> 2, documented as a resume) summarised the
    block finished before it without ``pool_size`` (the key was only set where the generator trained in that
    invocation); a kill -9 after a block's generator steps and a rerun did the same. It is now counted from the pool
    rows of the block's generator steps, as the run that trained it counted them."""
    from mmevo.config import load_config
    from mmevo.honest.loop import run_honest

    out = tmp_path / "gss"
    base = [f"model.path={tiny_text_path}", f"honest.output_dir={out}", "honest.gss_mode=trainable",
            "honest.warmup_sft=false", "honest.eval_calibration=false", "honest.gss_block_steps=1",
            "honest.gss_solver_samples=2", "data.n_train=16", "trainer.prompts_per_step=2",
            "trainer.mini_batch_prompts=2", "rollout.n=2", "rollout.max_tokens=12"]
    first = run_honest(load_config("configs/honest_tiny.yaml", [*base, "honest.gss_blocks=1"]))
    assert "pool_size" in first["blocks"][0]
    more = run_honest(load_config("configs/honest_tiny.yaml", [*base, "honest.gss_blocks=2"]))
    assert [b["block"] for b in more["blocks"]] == [1, 2]
    assert more["blocks"][0].get("pool_size") == first["blocks"][0]["pool_size"]
    assert "pool_size" in more["blocks"][1]


def test_read_pool_up_to_a_step(tmp_path):
    import json

    from mmevo.honest.loop import read_pool

    path = tmp_path / "pool.jsonl"
    rows = [{"id": f"p{i}", "meta": {"expression": f"{i} + 1"}, "step": s} for i, s in enumerate([1, 1, 2, 3])]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"id": "torn", "st')
    assert [len(read_pool(path, 10, last_step=s)) for s in (0, 1, 2, 3)] == [0, 2, 3, 4]
    assert len(read_pool(path, 10)) == 4
