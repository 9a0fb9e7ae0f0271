"""Number fields and YAML 1.1's octal / base-60 forms: refused with the decimal value named, never read silently."""

import pytest

from mmevo.config import ConfigError, load_config


@pytest.mark.parametrize("override, says", [
    ("trainer.steps=010", "YAML 1.1 reads as octal (8); write 10"),      # was steps = 8
    ("trainer.steps=-010", "(-8); write -10"),
    ("trainer.lr=010", "(8); write 10"),                                 # a float field took 8.0
    ("trainer.steps=1:30", "base-60 number in YAML 1.1 (90)"),           # was steps = 90
    ("trainer.lr=1:30.5", "(90.5)"),
])
def test_yaml11_octal_and_base60_numbers_are_refused(override, says):
    with pytest.raises(ConfigError, match="trainer.(steps|lr)") as e:
        load_config(None, [override])
    assert says in str(e.value)


def test_yaml11_octal_in_a_file_names_the_file_and_field(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("trainer:\n  steps: 007\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: trainer\.steps: '007' has a leading zero.*write 7"):
        load_config(p)


@pytest.mark.parametrize("override, field, value", [
    ("trainer.steps=10", "steps", 10), ("trainer.steps=0", "steps", 0), ("trainer.steps=0x10", "steps", 16),
    ("trainer.steps=1_000", "steps", 1000), ("trainer.steps=09", "steps", 9), ("trainer.lr=00.5", "lr", 0.5),
    ("trainer.lr=0.000001", "lr", 1e-6), ("trainer.output_dir=0755", "output_dir", "0755"),
])
def test_unambiguous_numbers_and_texts_still_load(override, field, value):
    assert getattr(load_config(None, [override]).trainer, field) == value


def test_train_refuses_honest_loop_switches_it_would_ignore(no_runs, capsys):
    from mmevo.cli import main

    assert main(["train", "configs/honest_tiny.yaml"]) == 2  # the shipped HONEST config turns both on
    err = capsys.readouterr().err
    assert "honest.replay_enabled=true, honest.smc_enabled=true: CPR replay and the SMC curriculum run in " \
           "`mmevo evolve honest CONFIG`" in err
    assert main(["train", "honest.smc_enabled=true"]) == 2
    assert "honest.smc_enabled=true: " in capsys.readouterr().err
    assert no_runs == []
    assert main(["evolve", "honest", "configs/honest_tiny.yaml"]) == 0  # where they do apply
    assert main(["train", "honest.replay_enabled=false", "honest.smc_enabled=false"]) == 0
    assert no_runs == ["honest", "train"]


@pytest.mark.parametrize("name, ours", [("kl", "k1"), ("mse", "k2"), ("abs", None), ("low_var_kl", "k3")])
def test_verl_kl_type_names_load_and_train_as_their_estimator(name, ours):
    import torch

    from mmevo.grpo.algos import kl_penalty

    assert load_config(None, [f"algo.kl_type={name}"]).algo.kl_type == name  # was refused at load
    logp, ref = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.5, -1.0]])
    want = (logp - ref).abs() if ours is None else kl_penalty(logp, ref, ours)
    assert torch.equal(kl_penalty(logp, ref, name), want)
