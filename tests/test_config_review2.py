"""Review of configuration, CLI and recipes: every shipped config loads, the README's commands parse, and
combinations that cannot work are refused before any model is loaded (not minutes into a run)."""

import re
import shlex
from pathlib import Path

import pytest

from mmevo import recipes
from mmevo.cli import main
from mmevo.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


def _never(*args, **kwargs):
    raise AssertionError("the run started")


# -- shipped configs and README --------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_shipped_config_loads_and_its_command_accepts_it(path, no_runs):
    cfg = load_config(path)
    assert cfg.trainer.prompts_per_step % cfg.trainer.mini_batch_prompts == 0
    loop = next((name for name in ("mmzero", "prism", "honest") if path.name.startswith(name)), None)
    argv = ["evolve", loop, str(path)] if loop else ["train", str(path)]
    assert main(argv) == 0  # the command's own checks (roles of every phase, DeepSpeed file, heads) pass too
    assert no_runs == [loop or "train"]


def _readme_commands() -> list[list[str]]:
    """``mmevo ...`` command lines of README.md (code blocks and inline code), placeholders filled in."""
    text = (ROOT / "README.md").read_text()
    lines = re.findall(r"`(mmevo [^`]*)`", text)
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        block = block.replace("\\\n", " ")
        lines += [ln for ln in block.splitlines() if re.match(r"(mmevo |torchrun .*-m mmevo\.cli )", ln)]
    commands = []
    for line in lines:
        for part in line.split(" # ")[0].split("&&"):
            words = shlex.split(re.sub(r"\$\w+", "placeholder", part))
            words = words[words.index("mmevo.cli") + 1:] if "mmevo.cli" in words else words[1:]
            words = [w for w in words if w != "..."]
            if words and words[0] not in ("build-tiny", "render"):  # these two act at once: covered elsewhere
                commands.append(words)
    return commands


def test_readme_commands_use_flags_and_keys_that_exist(no_runs, capsys):
    commands = _readme_commands()
    assert len(commands) >= 20 and ["plan-memory", "configs/csrs_qwen2_5_vl_7b_geometry3k.yaml", "--gpus", "8",
                                    "--gpu-mem-gib", "80"] in commands
    for argv in commands:
        try:
            rc = main(argv)
        except SystemExit as e:  # --help
            rc = e.code
        assert rc == 0, (argv, capsys.readouterr().err)


def test_the_csrs_7b_config_evaluates_every_5_steps():
    # CSRS Appendix A.4: "We evaluated the model every 5 training steps" (it ran only before and after)
    cfg = load_config("configs/csrs_qwen2_5_vl_7b_geometry3k.yaml", [])
    assert cfg.trainer.eval_every == 5 and cfg.data.heldout


# -- CSRS ranges are checked whether or not csrs.enabled -------------------------------------------------------------
@pytest.mark.parametrize("override, message", [
    ("csrs.m=0", r"csrs\.m=0 must be >= 1"), ("csrs.omega=1.5", r"csrs\.omega=1\.5 must be in \(0, 1\)"),
    ("csrs.omega=-0.1", r"csrs\.omega=-0\.1 must be in \(0, 1\)"), ("csrs.sigma=-1", r"csrs\.sigma=-1\.0 must be >= 0"),
    ("csrs.gamma=-0.2", r"csrs\.gamma=-0\.2 must be in \[0, 1\]"), ("csrs.beta=-5", r"csrs\.beta=-5\.0 must be >= 0"),
])
def test_csrs_ranges_are_checked_even_while_csrs_is_off(override, message):
    # the demo (configs/demo_tiny.yaml: csrs off) switches CSRS on for its CSRS run after loading: a bad value used
    # to pass the load and fail (omega) or silently run without re-inferences (m = 0) after the SFT warm-up
    with pytest.raises(ConfigError, match=message):
        load_config(None, [override])
    with pytest.raises(ConfigError, match=message):
        load_config(None, ["csrs.enabled=true", "reward.heads={sfr: 1.0}", override])
    from mmevo.demo import demo_config

    with pytest.raises(ConfigError, match=message):
        demo_config([override])


def test_csrs_bounds_themselves_are_accepted():
    cfg = load_config(None, ["csrs.enabled=true", "reward.heads={sfr: 1.0}", "csrs.m=1", "csrs.omega=0.999",
                             "csrs.sigma=0", "csrs.gamma=0", "csrs.beta=0"])
    assert (cfg.csrs.m, cfg.csrs.omega, cfg.csrs.sigma, cfg.csrs.gamma, cfg.csrs.beta) == (1, 0.999, 0.0, 0.0, 0.0)
    assert load_config(None, ["csrs.gamma=0.35", "csrs.beta=8"]).csrs.gamma == 0.35  # Table 2's largest values


# -- combinations refused at load time -------------------------------------------------------------------------------
def test_lora_and_trainable_patterns_together_are_refused_at_load():
    with pytest.raises(ConfigError, match=r"model\.trainable=\['norm'\] and model\.lora\.rank=4 both choose what "
                                          r"trains: set one of them"):
        load_config(None, ["model.lora.rank=4", "model.trainable=[norm]"])
    assert load_config(None, ["model.lora.rank=4"]).model.trainable == []
    assert load_config(None, ["model.trainable=[norm]"]).model.lora.rank == 0


def test_tensor_parallelism_needs_the_vllm_engine():
    with pytest.raises(ConfigError, match=r"rollout\.tensor_parallel_size=2 needs rollout\.engine=vllm"):
        load_config(None, ["rollout.tensor_parallel_size=2"])
    assert load_config(None, ["rollout.engine=vllm", "rollout.tensor_parallel_size=2"]).rollout.tensor_parallel_size == 2


def test_mmzero_render_settings_are_checked_before_the_pool_starts():
    from render.pool import MAX_TIMEOUT_S

    from mmevo.config import MAX_RENDER_TIMEOUT_S

    assert MAX_RENDER_TIMEOUT_S == MAX_TIMEOUT_S == 86400.0
    with pytest.raises(ConfigError, match=r"mmzero\.render_workers=0 must be >= 1"):
        load_config(None, ["mmzero.render_workers=0"])
    for bad in ("0", "-1", "86401"):
        with pytest.raises(ConfigError, match=r"mmzero\.render_timeout_s=\S+ must be in \(0, 86400\] seconds"):
            load_config(None, [f"mmzero.render_timeout_s={bad}"])
    assert load_config(None, ["mmzero.render_timeout_s=86400"]).mmzero.render_timeout_s == 86400.0


def test_an_unreadable_config_file_is_a_config_error(tmp_path, monkeypatch):
    p = tmp_path / "c.yaml"
    p.write_text("trainer:\n  lr: 1.0e-6\n")

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "open", denied)
    with pytest.raises(ConfigError, match=r"config file .*c\.yaml cannot be read \(Permission denied\)"):
        load_config(p)


# -- the command line: bad paths and late failures, caught before anything loads ---------------------------------------
def test_train_checks_the_deepspeed_file_before_loading_the_model(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(recipes, "run_grpo", _never)
    base = ["train", "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2"]
    missing = tmp_path / "zero9.json"
    assert main(base + [f"trainer.deepspeed={missing}"]) == 2
    assert f"trainer.deepspeed={missing}: file not found" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{'stage': 3")
    assert main(base + [f"trainer.deepspeed={broken}"]) == 2
    assert "not a readable JSON file" in capsys.readouterr().err
    assert main(base + [f"trainer.deepspeed={tmp_path}"]) == 2  # a directory
    assert "file not found" in capsys.readouterr().err
    monkeypatch.setattr("mmevo.evolve.mmzero.run_mmzero", _never)
    assert main(["evolve", "mmzero", f"trainer.deepspeed={missing}"]) == 2
    assert f"trainer.deepspeed={missing}: file not found" in capsys.readouterr().err


def test_train_checks_reward_head_arguments_before_loading_the_model(monkeypatch, capsys):
    monkeypatch.setattr(recipes, "run_grpo", _never)
    argv = ["train", "csrs.enabled=true", "reward.heads={sfr: 1.0}", "trainer.prompts_per_step=2",
            "trainer.mini_batch_prompts=2"]
    assert main(argv + ["reward.head_args={sfr: {gama: 0.3}}"]) == 2
    err = capsys.readouterr().err
    assert "reward.head_args.sfr={'gama': 0.3}" in err and "gama" in err and "(gamma" in err


@pytest.mark.parametrize("loop, override, message", [
    ("mmzero", "mmzero.roles={solver: {rollout.top_p: 5}}", r"mmzero\.roles\.solver: .*rollout\.top_p=5\.0 must be"),
    ("mmzero", "mmzero.roles={coder: {csrs.enabled: true}}", r"mmzero\.roles\.coder: .*CSRS applies to the solver"),
    ("prism", "prism.roles={solver: {trainer.mini_batch_prompts: 3}}",
     r"prism\.roles\.solver: .*trainer\.prompts_per_step=256 must be a multiple of trainer\.mini_batch_prompts=3"),
    ("honest", "honest.roles={solver: {rollout.temperature: -1}}", r"honest\.roles\.solver: .*rollout\.temperature"),
])
def test_evolve_checks_every_role_phase_config_before_the_loop_starts(loop, override, message, monkeypatch,
                                                                       capsys):
    # a role's phase config used to be validated only when that phase began (after the earlier roles' phases)
    monkeypatch.setattr(f"mmevo.evolve.{loop}.run_{loop}" if loop != "honest" else "mmevo.honest.loop.run_honest",
                        _never)
    assert main(["evolve", loop, override]) == 2
    assert re.search(message, capsys.readouterr().err)


def test_render_of_a_directory_is_an_error_not_a_traceback(tmp_path, capsys):
    assert main(["render", str(tmp_path), "-o", str(tmp_path / "o.png")]) == 2
    assert f"mmevo render: error: {tmp_path} is not a file" in capsys.readouterr().err
    assert main(["render", str(tmp_path / "none.py"), "-o", str(tmp_path / "o.png")]) == 2
    assert "not found" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["inf", "nan", "1e400"])
def test_plan_memory_refuses_a_non_finite_gpu_memory(value, capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan-memory", "--gpus", "8", "--gpu-mem-gib", value])
    assert e.value.code == 2
    assert "--gpu-mem-gib a finite number > 0" in capsys.readouterr().err


def test_an_os_error_is_an_exit_code_not_a_traceback(tmp_path, monkeypatch, capsys):
    def denied(cfg):
        raise PermissionError(13, "Permission denied", "runs/grpo")

    monkeypatch.setattr(recipes, "run_grpo", denied)
    assert main(["train", "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2"]) == 2
    assert "mmevo train: error: [Errno 13] Permission denied" in capsys.readouterr().err


# -- recipes: data before the model --------------------------------------------------------------------------------
@pytest.mark.parametrize("run, key", [("run_grpo", "data.train"), ("run_grpo", "data.heldout"),
                                      ("run_sft", "data.train"), ("run_eval", "data.heldout")])
def test_a_bad_data_path_fails_before_the_model_loads(run, key, tmp_path, monkeypatch):
    monkeypatch.setattr(recipes, "load_policy", _never)
    missing = tmp_path / "no_such_split.parquet"
    cfg = load_config(None, [f"{key}={missing}", f"trainer.output_dir={tmp_path}/grpo",
                             f"sft.output_dir={tmp_path}/sft", "data.n_train=4", "data.n_heldout=2"])
    with pytest.raises(FileNotFoundError, match="no_such_split.parquet: no such file"):
        getattr(recipes, run)(cfg)


def test_sft_teacher_noise_on_real_data_is_refused_before_the_model_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(recipes, "load_policy", _never)
    cfg = load_config(None, ["data.train=figures", "sft.teacher_noise=0.5", f"sft.output_dir={tmp_path}"])
    with pytest.raises(ValueError, match="sft.teacher_noise only applies to data.train=synthetic"):
        recipes.run_sft(cfg)


def test_help_documents_every_config_key(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--help"])
    assert e.value.code == 0
    keys = [ln for ln in capsys.readouterr().out.splitlines() if re.match(r"  [a-z_]+\.[a-z_.]+ = ", ln)]
    assert len(keys) > 200
    undocumented = [ln.split(" = ")[0].strip() for ln in keys if not ln.split("  # ", 1)[-1].strip()]
    assert undocumented == []  # were sft.weight_decay, sft.warmup_steps, sft.max_grad_norm
    assert "  sft.warmup_steps = 20  # linear warm-up optimizer steps (then cosine decay)" in keys


@pytest.mark.parametrize("section", ["data", "eval"])
def test_field_mappings_name_known_fields(section):
    # the generic reader looks up id / image / problem / answer / choices only: a misspelt name was ignored and the
    # default column read instead
    with pytest.raises(ConfigError, match=rf"unknown config key '{section}\.fields\.question'.*valid keys here: "
                                          r"answer, choices, id, image, problem"):
        load_config(None, [f"{section}.fields={{question: q}}"])
    with pytest.raises(ConfigError, match=rf"unknown config key '{section}\.fields\.idd'; did you mean "
                                          rf"{section}\.fields\.id\?"):
        load_config(None, [f"{section}.fields={{idd: qid}}"])
    with pytest.raises(ConfigError, match=rf"{section}\.fields\.answer=3: give the column name"):
        load_config(None, [f"{section}.fields={{answer: 3}}"])
    cfg = load_config(None, [f"{section}.fields={{problem: question, answer: gt, image: image_path}}"])
    assert getattr(cfg, section).fields == {"problem": "question", "answer": "gt", "image": "image_path"}
