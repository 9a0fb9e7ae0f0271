"""Bad configuration input is refused at load time, naming the field, the value and what would be accepted."""

import pytest

from mmevo.config import ConfigError, _get, load_config


def test_unknown_keys_suggest_the_close_match():
    with pytest.raises(ConfigError, match=r"'trainer\.lrr'; did you mean trainer\.lr\?"):
        load_config(None, ["trainer.lrr=1"])
    with pytest.raises(ConfigError, match=r"'trainr'; did you mean trainer\?"):
        load_config(None, ["trainr.lr=1"])


@pytest.mark.parametrize("override, allowed", [
    ("algo.loss_agg=tokenmean", "token-mean"), ("algo.kl_type=k4", "low_var_kl"), ("algo.adv_scale=grp", "group"),
    ("rollout.engine=sglang", "vllm"), ("model.dtype=fp16", "bfloat16"), ("trainer.lr_schedule=linear", "cosine"),
    ("trainer.wandb_mode=dryrun", "offline"), ("mmzero.code_language=c", "svg"), ("rollout.sleep_level=3", "1, 2"),
    ("prism.ema_mode=both", "per_question"),
])
def test_unknown_choice_is_refused_with_the_allowed_values(override, allowed):
    key, value = override.split("=")
    with pytest.raises(ConfigError, match=rf"{key}='?{value}'? not in \[.*{allowed}"):
        load_config(None, [override])


@pytest.mark.parametrize("override, bound", [
    ("trainer.lr=-1", ">= 0"), ("rollout.temperature=-1", ">= 0"), ("rollout.top_p=1.5", r"in \(0, 1\]"),
    ("rollout.top_p=0", r"in \(0, 1\]"),
    ("rollout.n=0", ">= 1"), ("rollout.max_tokens=0", ">= 1"), ("trainer.mini_batch_prompts=0", ">= 1"),
    ("trainer.micro_batch_seqs=0", ">= 1"), ("trainer.steps=-1", ">= 0"), ("trainer.max_grad_norm=0", "> 0"),
    ("data.max_prompt_length=0", ">= 1"), ("data.mc_fraction=2", r"in \[0, 1\]"), ("algo.kl_coef=-0.1", ">= 0"),
    ("algo.ppo_epochs=0", ">= 1"), ("model.lora.rank=-1", ">= 0"), ("model.lora.dropout=1", r"in \[0, 1\)"),
    ("sft.batch_size=0", ">= 1"), ("sft.epochs=0", "> 0"), ("eval.batch_size=0", ">= 1"),
    ("rollout.gpu_memory_utilization=0", r"in \(0, 1\]"),
])
def test_out_of_range_values_name_the_field_and_the_range(override, bound):
    key = override.split("=")[0]
    with pytest.raises(ConfigError, match=rf"{key}=\S+ must be {bound}"):
        load_config(None, [override])


def test_non_finite_numbers_and_booleans_for_numbers_are_refused():
    for override in ("trainer.lr=nan", "trainer.lr=.inf", "algo.clip_ratio_c=.inf"):
        with pytest.raises(ConfigError, match="expected a finite number"):
            load_config(None, [override])
    with pytest.raises(ConfigError, match="trainer.steps: expected int, got boolean true"):
        load_config(None, ["trainer.steps=true"])
    with pytest.raises(ConfigError, match="trainer.lr: expected float, got boolean"):
        load_config(None, ["trainer.lr=yes"])
    with pytest.raises(ConfigError, match="trainer.resume: expected true/false, got 2"):
        load_config(None, ["trainer.resume=2"])
    for spelling in ("yes", "True", "1", "on", "true"):
        assert load_config(None, [f"trainer.resume={spelling}"]).trainer.resume is True
    assert load_config(None, ["trainer.steps=1e3"]).trainer.steps == 1000


def test_yaml_booleans_are_not_turned_into_text(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("trainer:\n  wandb_mode: off\n")  # YAML 1.1 reads off as false; str(False) was 'False'
    with pytest.raises(ConfigError, match=r"c\.yaml: trainer\.wandb_mode: expected a string, got false .*quote"):
        load_config(p)
    p.write_text("trainer:\n  wandb_mode: 'off'\n")
    with pytest.raises(ConfigError, match=r"trainer\.wandb_mode='off' not in"):
        load_config(p)
    p.write_text("trainer:\n  steps: '1.5'\n")  # quoted: a string, once truncated to 1
    with pytest.raises(ConfigError, match=r"trainer\.steps: expected int, got '1\.5'"):
        load_config(p)


def test_lists_and_pairs_are_not_split_into_letters():
    for override in ("trainer.betas=abc", "trainer.betas=0.9", "model.lora.target_modules=q_proj",
                     "honest.domains=arithmetic"):
        with pytest.raises(ConfigError, match=r"expected a list, e\.g\. '\[a, b\]'"):
            load_config(None, [override])
    with pytest.raises(ConfigError, match=r"trainer\.betas=\[0\.9\] must be \[beta1, beta2\]"):
        load_config(None, ["trainer.betas=[0.9]"])
    with pytest.raises(ConfigError, match="trainer.betas"):
        load_config(None, ["trainer.betas=[0.9, 1.5]"])
    cfg = load_config(None, ["trainer.betas=[0.9, 0.95]", "model.lora.target_modules=[q_proj, v_proj]"])
    assert cfg.trainer.betas == (0.9, 0.95) and cfg.model.lora.target_modules == ["q_proj", "v_proj"]


def test_yaml_file_problems_name_the_file_and_line(tmp_path):
    p = tmp_path / "dup.yaml"
    p.write_text("trainer:\n  lr: 1.0e-6\n  steps: 3\n  lr: 2.0e-6\n")  # PyYAML keeps the last lr silently
    with pytest.raises(ConfigError, match=rf"duplicate key 'trainer\.lr' \(first on line 2.*\n.*\"{p}\", line 4"):
        load_config(p)
    p.write_text("trainer:\n  lr: 1.0e-6\n  steps: [1\nrollout:\n  n: 2\n")
    with pytest.raises(ConfigError, match=rf"invalid YAML(.|\n)*in \"{p}\", line 3"):
        load_config(p)
    p.write_text("defaults: [grpo_tiny]\n")
    with pytest.raises(ConfigError, match="cannot include or extend another one"):
        load_config(p)
    p.write_text("trainer:\n  # lr: 1.0e-6\nrollout:\n  n: 4\n")  # a section whose keys are all commented out
    assert load_config(p).rollout.n == 4
    with pytest.raises(ConfigError, match=r"trainer\.lr not found \(an override needs the form section\.key=value\)"):
        load_config("trainer.lr")


def test_dotted_keys_below_a_mapping_set_one_entry():
    cfg = load_config(None, ["reward.heads.format=0.1"])
    assert cfg.reward.heads == {"accuracy": 1.0, "format": 0.1}
    cfg = load_config(None, ["reward.heads='{majority: 1.0}'"])
    assert cfg.reward.heads == {"majority": 1.0}  # a whole mapping still replaces
    with pytest.raises(ConfigError, match=r"trainer\.lr is a single value \(1e-06\), not a section or mapping"):
        load_config(None, ["trainer.lr.x=1"])
    with pytest.raises(ConfigError, match=r"reward\.heads\.accuracy='abc': a head's weight must be a finite number"):
        load_config(None, ["reward.heads={accuracy: abc}"])


def test_loop_roles_are_checked_at_load_time(tmp_path):
    with pytest.raises(ConfigError, match=r"mmzero\.roles: unknown role 'slover'"):
        load_config(None, ["mmzero.roles={slover: {rollout.max_tokens: 8}}"])
    with pytest.raises(ConfigError, match=r"prism\.roles\.solver: unknown config key 'rollout\.max_tokns'; did you"):
        load_config(None, ["prism.roles={solver: {rollout.max_tokns: 8}}"])
    with pytest.raises(ConfigError, match=r"mmzero\.roles\.coder: rollout\.n: expected int"):
        load_config(None, ["mmzero.roles={coder: {rollout.n: abc}}"])


def test_csrs_combinations_name_the_field():
    with pytest.raises(ConfigError, match=r"csrs\.enabled needs rollout\.n >= 2.*rollout\.n=1"):
        load_config(None, ["csrs.enabled=true", "rollout.n=1"])
    with pytest.raises(ConfigError, match=r"csrs\.omega=1\.5 must be in \(0, 1\)"):
        load_config(None, ["csrs.enabled=true", "csrs.omega=1.5"])
    # anchor 0 re-infers from scratch: that is csrs.retrace=false, one name for one thing (Eq. 6: omega in (0, 1))
    with pytest.raises(ConfigError, match=r"csrs\.omega=0 must be in \(0, 1\).*csrs\.retrace=false"):
        load_config(None, ["csrs.enabled=true", "csrs.omega=0"])


def test_choices_and_roles_match_the_code_that_reads_them():
    from mmevo.config import CHOICES, LOOP_ROLES
    from mmevo.evolve import mmzero
    from mmevo.grpo import algos
    from mmevo.honest import loop, selfplay
    from mmevo.models.loader import DTYPES
    from mmevo.rewards.prism import EMA_MODES

    assert CHOICES["algo.adv_scale"] == algos.ADV_SCALES and CHOICES["algo.kl_type"] == algos.KL_KINDS
    assert CHOICES["algo.loss_agg"] == algos.AGG_MODES and CHOICES["prism.ema_mode"] == EMA_MODES
    assert set(CHOICES["model.dtype"]) == set(DTYPES) and CHOICES["honest.gss_mode"] == selfplay.GSS_MODES
    assert LOOP_ROLES["mmzero"] == mmzero.ROLES and LOOP_ROLES["honest"] == loop.ROLES


@pytest.mark.parametrize("key", ["rollout.temperature", "rollout.eval_temperature"])
def test_a_temperature_vllm_would_decode_greedily_is_refused(key):
    # 0 < T < 1e-5: vLLM decodes greedily while the trainer scores log-probs of logits / T
    with pytest.raises(ConfigError, match=rf"{key}=1e-06 is below 1e-05.*use 0 for greedy"):
        load_config(None, [f"{key}=1e-6"])
    assert _get(load_config(None, [f"{key}=0"]), key) == 0
    assert _get(load_config(None, [f"{key}=1e-5"]), key) == 1e-5
