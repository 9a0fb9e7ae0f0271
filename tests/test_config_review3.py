"""Review 3 of configuration, CLI and recipes: malformed values that were accepted as something else, crashed with a
raw traceback, or failed only once a model was loaded."""

import json

import pytest

from mmevo import recipes
from mmevo.cli import main
from mmevo.config import ConfigError, load_config, to_dict


def _never(*args, **kwargs):
    raise AssertionError("the model was loaded / the run started")


# -- YAML numbers in string fields keep the text as written ------------------------------------------------------------
@pytest.mark.parametrize("override, key, text", [
    ("trainer.output_dir=010", "trainer.output_dir", "010"),  # YAML 1.1 octal: was '8'
    ("trainer.output_dir=0x1F", "trainer.output_dir", "0x1F"),  # was '31'
    ("trainer.wandb_project=1_000", "trainer.wandb_project", "1_000"),  # was '1000'
    ("eval.split=1.10", "eval.split", "1.10"),  # was '1.1'
    ("model.cache_dir=12:30", "model.cache_dir", "12:30"),  # sexagesimal: was '750'
    ("data.train=.inf", "data.train", ".inf"),  # was 'inf'
])
def test_a_number_written_into_a_string_field_keeps_its_text(override, key, text):
    section, name = key.split(".")
    assert getattr(getattr(load_config(None, [override]), section), name) == text


def test_a_yaml_file_keeps_the_text_of_numbers_in_string_fields_and_numbers_stay_plain(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("trainer:\n  output_dir: 0755\n  steps: 0x10\n  lr: 1.0e-6\nsft:\n  output_dir: 2.50\n"
                 "reward:\n  heads: {accuracy: 0.9, format: 1}\nmmzero:\n  coder_success_range: [0.2, 0.8]\n")
    cfg = load_config(p)
    assert (cfg.trainer.output_dir, cfg.sft.output_dir) == ("0755", "2.50")  # were '493' and '2.5'
    assert cfg.trainer.steps == 16 and type(cfg.trainer.steps) is int
    assert cfg.trainer.lr == 1e-6 and type(cfg.trainer.lr) is float
    assert [type(w) for w in cfg.reward.heads.values()] == [float, int]  # plain numbers in mappings and lists
    assert [type(x) for x in cfg.mmzero.coder_success_range] == [float, float]
    assert json.loads(json.dumps(to_dict(cfg)))["trainer"]["output_dir"] == "0755"


# -- names the model code reads only after loading the model -------------------------------------------------------
@pytest.mark.parametrize("override, message", [
    ("model.device=gpu", r"model\.device='gpu' is not a torch device"),  # torch's RuntimeError traceback at load
    ("model.device=cuda:x", r"model\.device='cuda:x' is not a torch device"),
    ("prism.embed_device=GPU", r"prism\.embed_device='GPU' is not a torch device"),
    ("model.trainable=[1]", r"model\.trainable=\[1\]: each entry must be a non-empty string, got 1"),  # TypeError
    ("model.trainable=['(norm']", r"model\.trainable: '\(norm' is not a regular expression"),  # re.error traceback
    ("model.lora.target_modules=[q_proj, 3]", r"model\.lora\.target_modules=\['q_proj', 3\]: each entry"),
])
def test_devices_regexes_and_module_names_are_checked_at_load(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_lora_without_target_modules_is_refused_at_load():
    with pytest.raises(ConfigError, match=r"model\.lora\.target_modules is empty with model\.lora\.rank=4"):
        load_config(None, ["model.lora.rank=4", "model.lora.target_modules=[]"])
    cfg = load_config(None, ["model.device=cuda:1", "model.trainable=['norm$', 'visual\\.merger']",
                             "model.lora.target_modules=[]"])  # rank 0: the list is unused
    assert cfg.model.device == "cuda:1" and cfg.model.trainable == ["norm$", "visual\\.merger"]


def test_a_reward_head_name_must_be_text(monkeypatch, capsys):
    with pytest.raises(ConfigError, match=r"reward\.heads: a head's name is text .*got 1$"):
        load_config(None, ["reward.heads={1: 1.0}"])
    monkeypatch.setattr(recipes, "run_grpo", _never)  # was a TypeError traceback from resolve_head
    assert main(["train", "reward.heads={1: 1.0}"]) == 2
    assert "a head's name is text" in capsys.readouterr().err


def test_prism_pool_band_of_words_is_a_config_error(monkeypatch, capsys):
    with pytest.raises(ConfigError, match=r"prism\.pool_band=\['a', 'b'\] must be \[low, high\] with 0 <= low <= high"):
        load_config(None, ["prism.pool_band=[a, b]"])
    with pytest.raises(ConfigError, match=r"prism\.pool_band=\[0\.9, 0\.5\] must be"):
        load_config(None, ["prism.pool_band=[0.9, 0.5]"])
    assert load_config(None, ["prism.pool_band=[0.4, 0.8]"]).prism.pool_band == (0.4, 0.8)
    monkeypatch.setattr("mmevo.evolve.prism.run_prism", _never)
    assert main(["evolve", "prism", "prism.pool_band=[a, b]"]) == 2  # was a TypeError traceback


@pytest.mark.parametrize("key", ["trainer.output_dir", "sft.output_dir", "mmzero.output_dir", "prism.output_dir"])
def test_an_empty_output_dir_is_refused(key):
    # Path("") is the current directory: checkpoints, metrics and the run lock landed wherever the command ran
    with pytest.raises(ConfigError, match=rf"{key} is empty: give the run's output directory"):
        load_config(None, [f"{key}=''"])


@pytest.mark.parametrize("override, message", [
    ("mmzero.iterations=-1", r"mmzero\.iterations=-1 must be >= 1"),  # ran nothing and exited 0 (0 as well)
    ("mmzero.proposer_prompts=0", r"mmzero\.proposer_prompts=0 must be >= 1"),  # 'no prompts' after loading
    ("mmzero.warmup_demos=-3", r"mmzero\.warmup_demos=-3 must be >= 0"),
    ("prism.corpus_size=0", r"prism\.corpus_size=0 must be >= 1"),
    ("honest.health_collapse_window=0", r"honest\.health_collapse_window=0 must be >= 1"),
    ("honest.health_min_distinct_share=1.5", r"honest\.health_min_distinct_share=1\.5 must be in \[0, 1\]"),
    ("honest.replay_share=2", r"honest\.replay_share=2\.0 must be in \[0, 1\]"),
    ("honest.smc_mutators=[numerik]", r"honest\.smc_mutators=\['numerik'\]: give one or more of"),
    ("honest.smc_demote=0.9", r"honest\.smc_demote=0\.9 and honest\.smc_promote=0\.75: need 0 <= smc_demote < smc_promote <= 1"),
    ("honest.smc_mutators=[[numeric]]", r"honest\.smc_mutators=\[\['numeric'\]\]: each entry is a mutator's name"),
])
def test_loop_settings_are_checked_at_load(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])


def test_evolve_honest_checks_cpr_and_smc_before_any_model(monkeypatch, capsys):
    # the loop built its CPR / SMC plug-ins only after the warm-up and the first calibration evaluation
    monkeypatch.setattr("mmevo.honest.loop.run_honest", _never)
    assert main(["evolve", "honest", "honest.replay_share=2"]) == 2
    assert "honest.replay_share=2.0 must be in [0, 1]" in capsys.readouterr().err


# -- recipes: an empty training set before the model ------------------------------------------------------------------
@pytest.mark.parametrize("run", ["run_grpo", "run_sft"])
@pytest.mark.parametrize("train", ["synthetic", "honest_tasks"])
def test_no_training_examples_is_refused_before_the_model_loads(run, train, tmp_path, monkeypatch):
    monkeypatch.setattr(recipes, "load_policy", _never)  # was 'no prompts' / 'SFT needs at least one example' after it
    cfg = load_config(None, [f"data.train={train}", "data.n_train=0", "data.heldout=''",
                             f"trainer.output_dir={tmp_path}/g", f"sft.output_dir={tmp_path}/s"])
    with pytest.raises(ValueError, match=rf"data\.train='{train}' with data\.n_train=0 gives no training examples"):
        getattr(recipes, run)(cfg)


# -- the CLI: the demo's runs and reward weights --------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["demo", "rollout.n=1"], "the demo's csrs run: csrs.enabled needs rollout.n >= 2"),
    (["demo", "--method", "grpo", "rollout.n=1"], "the demo's grpo run: rollout.n=1: GRPO needs a group of >= 2"),
])
def test_demo_checks_its_runs_before_the_sft_warm_up(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("mmevo.demo.run_demo", _never)  # the CSRS run failed (or MV learned nothing) after SFT
    assert main(argv + ["--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_train_refuses_reward_heads_that_are_all_zero(monkeypatch, capsys):
    monkeypatch.setattr(recipes, "run_grpo", _never)
    assert main(["train", "reward.heads={accuracy: 0, format: 0.0}"]) == 2
    assert "every weight is 0" in capsys.readouterr().err
