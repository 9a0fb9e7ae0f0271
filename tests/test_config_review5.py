"""Config / CLI / recipes, round 5: seeds in range, YAML 1.2 exponent floats, dates and tags in text fields, YAML
limits, numpy / Decimal / tensor values, the loops' GRPO groups and embedder, devices and vLLM before the model."""

from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
import torch

from mmevo.config import Config, ConfigError, load_config, set_dotted


@pytest.mark.parametrize("override, says", [
    ("trainer.seed=-1", "trainer.seed=-1 must be in [0, 18446744073709551615]"),  # numpy refused it after the model
    ("trainer.seed=18446744073709551616", "trainer.seed=18446744073709551616 must be in"),  # torch.manual_seed overflow
    ("prism.seed=-1", "prism.seed=-1 must be in [0, 4294967295]"),  # KMeans' random_state, after the corpus embedded
    ("prism.seed=4294967296", "prism.seed=4294967296 must be in [0, 4294967295]"),
])
def test_seeds_outside_what_numpy_torch_and_kmeans_take_are_refused_at_load(override, says):
    with pytest.raises(ConfigError) as e:
        load_config(None, [override])
    assert says in str(e.value)


def test_seeds_at_the_bounds_load():
    cfg = load_config(None, ["trainer.seed=18446744073709551615", "prism.seed=4294967295", "data.seed=0"])
    assert (cfg.trainer.seed, cfg.prism.seed) == (18446744073709551615, 4294967295)


def test_exponent_floats_without_a_dot_are_numbers_in_mappings():
    # PyYAML reads 1e-1 as the string '1e-1': a head weight was refused as "not a finite number", a head argument
    # reached the SFR head as text after the model loaded
    cfg = load_config(None, ["csrs.enabled=true", "reward.heads={sfr: 1.0, format: 1e-1}",
                             "reward.head_args={sfr: {gamma: 2e-1, beta: 5.0E+0}}"])
    assert cfg.reward.heads == {"sfr": 1.0, "format": 0.1}
    assert cfg.reward.head_args == {"sfr": {"gamma": 0.2, "beta": 5.0}}
    assert type(cfg.reward.heads["format"]) is float and type(cfg.reward.head_args["sfr"]["gamma"]) is float
    cfg = load_config(None, ["trainer.output_dir=1e5", "data.system_prompt=1.0e5", "trainer.steps=1e3"])
    assert (cfg.trainer.output_dir, cfg.data.system_prompt, cfg.trainer.steps) == ("1e5", "1.0e5", 1000)
    with pytest.raises(ConfigError, match="reward.heads.accuracy=inf: a head's weight must be a finite number"):
        load_config(None, ["reward.heads.accuracy=1e400"])


def test_text_fields_keep_date_texts_and_refuse_binary_and_sets(tmp_path):
    cfg = load_config(None, ["trainer.output_dir=2024-01-01T10:00:00Z"])
    assert cfg.trainer.output_dir == "2024-01-01T10:00:00Z"  # was str(datetime): '2024-01-01 10:00:00+00:00'
    p = tmp_path / "c.yaml"
    p.write_text("trainer:\n  output_dir: !!binary aGk=\n")
    with pytest.raises(ConfigError, match=r"c\.yaml: trainer\.output_dir: expected a string, got b'hi'"):
        load_config(p)  # was the directory "b'hi'"
    with pytest.raises(ConfigError, match=r"data\.system_prompt: expected a string, got \{'a'\}"):
        load_config(None, ["data.system_prompt=!!set {a: null}"])


def test_yaml_beyond_the_parsers_limits_is_a_config_error(tmp_path):
    p = tmp_path / "big.yaml"
    p.write_text("trainer:\n  steps: " + "9" * 5000 + "\n")  # int() refuses > 4300 digits: a raw ValueError
    with pytest.raises(ConfigError, match=r"big\.yaml: unusable YAML \(ValueError: Exceeds the limit"):
        load_config(p)
    with pytest.raises(ConfigError, match=r"override 'trainer\.betas': not a usable YAML value \(RecursionError"):
        load_config(None, ["trainer.betas=" + "[" * 3000 + "]" * 3000])  # was a RecursionError traceback
    with pytest.raises(ConfigError, match=r"reward\.heads: not a usable YAML value \(ValueError"):
        set_dotted(Config(), "reward.heads", "{accuracy: " + "9" * 5000 + "}")


@pytest.mark.parametrize("value", [np.float32(2.5), Decimal("2.5"), Fraction(5, 2), torch.tensor(2.5),
                                   np.bool_(True), torch.tensor(True), np.array([3])])
def test_int_fields_refuse_what_int_would_truncate(value):
    cfg = Config()
    with pytest.raises(ConfigError, match="rollout.n: expected int"):
        set_dotted(cfg, "rollout.n", value)  # was 2 (or 1 for the booleans, 3 for the array)
    assert cfg.rollout.n == 8


def test_numeric_values_of_other_types_are_read_by_value():
    cfg = Config()
    for value, want in ((np.float32(4.0), 4), (Decimal("4"), 4), (torch.tensor(4), 4), (np.int64(3), 3)):
        set_dotted(cfg, "rollout.n", value)
        assert cfg.rollout.n == want and type(cfg.rollout.n) is int
    with pytest.raises(ConfigError, match="trainer.lr: expected float, got boolean"):
        set_dotted(cfg, "trainer.lr", np.bool_(True))  # was 1.0
    set_dotted(cfg, "trainer.output_dir", np.int64(7))
    assert cfg.trainer.output_dir == "7"


def test_override_before_the_config_file_says_where_the_file_goes():
    with pytest.raises(ConfigError, match=r"the config file comes before the overrides"):
        load_config(None, ["trainer.lr=1e-6", "configs/grpo_tiny.yaml"])


# -- CLI: checks before anything loads -------------------------------------------------------------------------------
def test_evolve_loops_refuse_a_group_of_one(no_runs, capsys, tmp_path):
    from mmevo.cli import main

    # each loop's own output dir: another loop's key on the command line is refused (it would be ignored)
    out, honest_out = [f"mmzero.output_dir={tmp_path / 'mz'}"], [f"honest.output_dir={tmp_path / 'ho'}"]
    assert main(["evolve", "mmzero", *out, "rollout.n=1"]) == 2  # every role trained on advantage 0, silently
    assert "mmzero.roles.proposer: the proposer phase's config: rollout.n=1: GRPO needs a group of >= 2" in \
        capsys.readouterr().err
    assert main(["evolve", "mmzero", *out, "mmzero.roles.coder={rollout.n: 1}"]) == 2
    assert "mmzero.roles.coder: " in capsys.readouterr().err
    assert main(["evolve", "honest", *honest_out, "honest.gss_mode=trainable", "honest.gss_generator_samples=1"]) == 2
    assert "honest.roles.generator: the generator phase's config: rollout.n=1" in capsys.readouterr().err
    assert no_runs == []
    assert main(["evolve", "mmzero", *out, "rollout.n=1", "mmzero.phase_steps=0"]) == 0  # no GRPO step at all
    assert no_runs == ["mmzero"]


def test_mmzero_embedder_directory_checked_before_the_loop(no_runs, capsys, tmp_path):
    from mmevo.cli import main

    missing = tmp_path / "no_embedder"
    assert main(["evolve", "mmzero", f"mmzero.output_dir={tmp_path / 'mz'}", f"mmzero.embedder={missing}"]) == 2
    assert f"mmzero.embedder={missing}: no config.json there" in capsys.readouterr().err  # was mid-phase
    assert no_runs == []


def test_demo_out_must_be_a_directory(no_runs, capsys, tmp_path):
    from mmevo.cli import main

    assert main(["demo", "--out", ""]) == 2  # Path('') is the current directory
    assert "--out '': give the demo's output directory" in capsys.readouterr().err
    f = tmp_path / "f"
    f.write_text("x")
    assert main(["demo", "--out", str(f)]) == 2
    assert "(that path is a file)" in capsys.readouterr().err
    assert no_runs == []


class _Loaded(Exception):
    pass


def _never(*args, **kwargs):
    raise _Loaded


def test_an_absent_device_is_refused_before_the_checkpoint_is_read(monkeypatch, capsys, no_runs):
    from mmevo import recipes
    from mmevo.cli import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(recipes, "load_model", _never)
    for device, says in (("cuda", "model.device=cuda: this machine has 0 visible CUDA device(s)"),
                         ("cuda:1", "model.device=cuda:1: this machine has 0"),
                         ("mps", "model.device=mps: MPS is not available")):
        with pytest.raises(ValueError) as e:  # was torch's AssertionError at model.to(device), after the read
            recipes.load_policy(load_config(None, [f"model.device={device}"]), "unused")
        assert says in str(e.value)
    with pytest.raises(_Loaded):
        recipes.load_policy(load_config(None, ["model.device=cpu"]), "unused")
    assert main(["prism", "build-clusters", "prism.embed_device=cuda"]) == 2
    assert "prism.embed_device=cuda: this machine has 0 visible CUDA device(s)" in capsys.readouterr().err
    assert no_runs == []


def test_a_missing_vllm_is_refused_before_the_model_loads(monkeypatch, tmp_path):
    import mmevo.rollout.vllm_engine as V
    from mmevo import recipes

    def no_vllm():
        raise ModuleNotFoundError("No module named 'vllm'")

    monkeypatch.setattr(V, "check_vllm_version", no_vllm)
    monkeypatch.setattr(recipes, "load_policy", _never)
    cfg = load_config(None, ["rollout.engine=vllm", "data.n_train=4", "data.n_heldout=2", "data.heldout=''",
                             "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2",
                             f"trainer.output_dir={tmp_path / 'g'}"])
    with pytest.raises(ValueError, match=r"rollout\.engine=vllm: vLLM is not installed \(No module named 'vllm'\)"):
        recipes.run_grpo(cfg)  # was a ModuleNotFoundError traceback once the policy and reference were loaded
    cfg.data.heldout = "synthetic"
    with pytest.raises(ValueError, match=r"rollout\.engine=vllm: vLLM is not installed"):
        recipes.run_eval(cfg)


@pytest.mark.parametrize("override", ["algo.kl_coef=1e-400", "algo.kl_coef='1e-400'", "csrs.enabled=1e-400",
                                      "trainer.lr=2e-324", "algo.clip_ratio_c=1e-400"])
def test_numbers_that_underflow_to_zero_are_refused(override):
    # 1e-400 read as 0.0: kl_coef=0 skips the reference model, a boolean switch read false
    with pytest.raises(ConfigError, match=r"is too small for a float \(it reads as 0\); write 0 if you mean zero"):
        load_config(None, [override])


def test_zero_and_the_smallest_subnormal_still_load():
    cfg = load_config(None, ["algo.kl_coef=0.0e5", "trainer.lr=5e-324", "trainer.output_dir=1e-400"])
    assert (cfg.algo.kl_coef, cfg.trainer.lr, cfg.trainer.output_dir) == (0.0, 5e-324, "1e-400")


def test_eval_calibration_with_a_benchmark_is_refused_not_dropped(no_runs, capsys):
    from mmevo.cli import main

    assert main(["eval", "--calibration", "--benchmark", "mathvista_testmini"]) == 2  # the benchmark ran alone
    assert "--calibration and eval.benchmark='mathvista_testmini'" in capsys.readouterr().err
    assert main(["eval", "--calibration", "eval.format=generic"]) == 2
    assert no_runs == []
    assert main(["eval", "--calibration"]) == 0 and main(["eval", "--benchmark", "mathvista_testmini"]) == 0
    assert no_runs == ["calibration", "benchmark"]


@pytest.mark.parametrize("override, says", [
    ("mmzero.roles.solver={trainer.steps: 3}", "mmzero.roles.solver sets trainer.steps, which the loop sets for every "
                                               "phase (it would be ignored): set mmzero.phase_steps"),
    ("mmzero.roles={coder: {trainer: {steps: 100}}}", "mmzero.roles.coder sets trainer.steps"),  # the default's value
    ("mmzero.roles.proposer={model.path: other}", "mmzero.roles.proposer sets model.path"),
    ("prism.roles.solver={trainer.output_dir: x}", "prism.roles.solver sets trainer.output_dir"),
    ("honest.roles.generator={model.path: other}", "honest.roles.generator sets model.path"),
])
def test_role_overrides_the_loop_overwrites_are_refused(override, says):
    with pytest.raises(ConfigError) as e:  # role_config set them after the overrides: silently ignored
        load_config(None, [override])
    assert says in str(e.value)


def test_role_overrides_the_loop_reads_still_load():
    cfg = load_config(None, ["prism.roles.solver={trainer.steps: 3}", "honest.roles.solver={trainer.steps: 4}",
                             "mmzero.roles.solver={trainer: {lr: 1.0e-5}}"])
    assert cfg.prism.roles["solver"] == {"trainer.steps": 3} and cfg.mmzero.roles["solver"] == {"trainer": {"lr": 1e-5}}


@pytest.mark.parametrize("heads, head, loop", [("{mmzero_coder: 1.0}", "mmzero_coder", "mmzero"),
                                               ("{accuracy: 1.0, prism_coverage: 1.0}", "prism_coverage", "prism"),
                                               ("{honest_generator: 1.0}", "honest_generator", "honest")])
def test_train_refuses_heads_only_a_loop_feeds(no_runs, capsys, heads, head, loop):
    from mmevo.cli import main

    # mmzero_coder read aux['rendered'] (a KeyError after the first rollout); the others scored every sample invalid
    assert main(["train", f"reward.heads={heads}"]) == 2
    assert f"reward.heads: {head} scores what `mmevo evolve {loop}` computes" in capsys.readouterr().err
    assert no_runs == []


def test_an_output_dir_that_is_a_file_is_named(tmp_path, monkeypatch):
    from mmevo import recipes

    monkeypatch.setattr(recipes, "load_policy", _never)
    f = tmp_path / "f"
    f.write_text("x")
    for key, run in (("trainer.output_dir", recipes.run_grpo), ("sft.output_dir", recipes.run_sft)):
        for path, why in ((f, "File exists"), (f / "sub", "Not a directory")):
            cfg = load_config(None, [f"{key}={path}"])
            with pytest.raises(ValueError) as e:  # was "[Errno 17] File exists: '...'" naming no setting
                run(cfg)
            assert str(e.value) == f"{key}={path}: cannot be the run's output directory ({why})"


def test_every_model_load_refuses_an_absent_device_before_the_read(monkeypatch, tmp_path):
    """MM-Zero's frozen roles, the demo's and the calibration demo's evaluations load through ``load_model`` directly,
    not ``load_policy``: they reached torch's AssertionError at ``model.to(device)`` after the whole checkpoint was read.
    ``load_model`` itself now checks first: a directory that is not even a checkpoint is never looked at."""
    from mmevo.models.loader import load_model

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    for weights in (True, False):
        with pytest.raises(ValueError, match=r"model\.device=cuda: this machine has 0 visible CUDA device\(s\)"):
            load_model(tmp_path, "float32", "cuda", weights=weights)
    with pytest.raises(FileNotFoundError, match="no config.json"):  # cpu passes the check and reaches the read
        load_model(tmp_path, "float32", "cpu")
