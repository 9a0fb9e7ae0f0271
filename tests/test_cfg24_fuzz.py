"""Config fuzzing: every field of every section, fed values of the wrong kind and out of range through the paths a
user takes (``section.key=value`` overrides and a YAML file), must be refused by ``load_config`` with an error
naming the field as ``section.key``. The fields are enumerated from the dataclasses, so a new field is fuzzed too."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from mmevo.config import CHOICES, Config, ConfigError, load_config


def leaf_fields(cls: type = Config, prefix: str = "") -> list[tuple[str, typing.Any]]:
    """(dotted key, declared type) of every non-section field below ``cls``, nested sections (model.lora) included."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            out += leaf_fields(type(default), f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, hints[f.name]))
    return out


FIELDS = leaf_fields()
SECTIONS = sorted({key.split(".")[0] for key, _ in FIELDS})


def kind(typ) -> str:
    """The kind of value a field takes: int, float, bool, str, list or dict (Optional[float] counts as float)."""
    if typing.get_origin(typ) in (typing.Union,) or str(typing.get_origin(typ)) == "<class 'types.UnionType'>":
        typ = next(a for a in typing.get_args(typ) if a is not type(None))
    if typ in (list, tuple) or typing.get_origin(typ) in (list, tuple):
        return "list"
    if typ is dict or typing.get_origin(typ) is dict:
        return "dict"
    return typ.__name__


def keys_of(*kinds: str) -> list[str]:
    return [key for key, typ in FIELDS if kind(typ) in kinds]


LONG = "x" * 5000
# values of the wrong kind for each kind of field, as written on the command line (YAML)
WRONG_KIND = {
    "int": ["abc", "true", "no", "2.5", "nan", ".inf", "-.inf", "[1, 2]", "{a: 1}", "''", LONG, "é∂", "null"],
    "float": ["abc", "true", "off", "nan", ".NaN", ".inf", "-.inf", "1e400", "[1.0]", "{a: 1}", "''", LONG, "π",
              "1e-400"],
    "bool": ["abc", "2", "-1", "0.5", "nan", "[true]", "{a: 1}", "''", LONG, "ja", "null"],
    "str": ["[a, b]", "{a: 1}", "null", "!!binary aGk="],
    "list": ["abc", "1", "{a: 1}", "true", "null"],
    "dict": ["abc", "1", "[1, 2]", "true", "[]"],
}
CASES = [(key, value) for key, typ in FIELDS for value in WRONG_KIND[kind(typ)]]


def refused(overrides: list[str] | None = None, path=None) -> str:
    with pytest.raises(ConfigError) as e:
        load_config(path, overrides or [])
    return str(e.value)


def test_every_section_is_enumerated():
    # the brief's sections, and the nested LoRA one: a field added to any of them is fuzzed below
    assert {"model", "data", "rollout", "reward", "algo", "trainer", "sft", "csrs", "eval", "mmzero", "prism",
            "honest"} <= set(SECTIONS)
    assert "model.lora.rank" in dict(FIELDS) and len(FIELDS) > 200
    assert all(kind(typ) in WRONG_KIND for _, typ in FIELDS), [(k, t) for k, t in FIELDS if kind(t) not in WRONG_KIND]


@pytest.mark.parametrize("key, value", CASES, ids=[f"{k}={v[:12]}" for k, v in CASES])
def test_a_value_of_the_wrong_kind_is_refused_naming_the_field(key, value):
    assert key in refused([f"{key}={value}"])


# numbers that legitimately take a negative value (each field's doc): seeds any int, penalties and rewards of any
# sign, and sft_hindsight_frac, whose negative means the tier's share
NEGATIVE_OK = {"data.seed", "honest.seed", "honest.malformed_penalty", "honest.abstain_reward",
               "honest.sft_hindsight_frac"}
NUMBERS = keys_of("int", "float")


@pytest.mark.parametrize("key", [k for k in NUMBERS if k not in NEGATIVE_OK])
def test_a_negative_count_size_weight_or_rate_is_refused_naming_the_field(key):
    assert key in refused([f"{key}=-1"])


@pytest.mark.parametrize("key", sorted(NEGATIVE_OK))
def test_the_fields_whose_doc_allows_a_negative_take_it(key):
    assert load_config(None, [f"{key}=-1"]) is not None


# counts and sizes whose doc gives 0 no meaning ("0 = ..." is documented for the others)
ZERO_REFUSED = [
    "trainer.prompts_per_step", "trainer.mini_batch_prompts", "trainer.micro_batch_seqs", "trainer.max_grad_norm",
    "rollout.n", "rollout.top_p", "rollout.max_tokens", "rollout.max_batch_seqs", "rollout.gpu_memory_utilization",
    "rollout.tensor_parallel_size", "rollout.vllm_kv_cache_gb", "rollout.max_images_per_prompt",
    "rollout.sleep_level", "data.image_size", "data.max_prompt_length", "algo.ppo_epochs", "algo.clip_ratio_c",
    "model.lora.alpha", "sft.epochs", "sft.batch_size", "sft.max_grad_norm", "csrs.m", "csrs.omega",
    "eval.batch_size", "eval.max_prompt_length", "mmzero.proposer_prompts", "mmzero.code_samples",
    "mmzero.solver_samples", "mmzero.render_workers", "mmzero.render_timeout_s", "prism.embed_batch", "prism.k",
    "prism.init_count", "prism.corpus_size", "prism.kmeans_n_init", "prism.questioner_steps", "prism.solver_samples",
    "prism.max_per_cluster", "prism.iterations", "prism.questioner_prompts", "prism.pool_prompts",
    "honest.min_difficulty", "honest.max_difficulty", "honest.replay_capacity", "honest.smc_window",
    "honest.smc_min_episodes", "honest.smc_cap", "honest.health_collapse_window", "honest.gss_blocks",
    "honest.gss_block_steps", "honest.gss_solver_samples", "honest.gss_pool_size",
]


@pytest.mark.parametrize("key", ZERO_REFUSED)
def test_zero_where_only_a_positive_value_makes_sense_is_refused(key):
    assert key in refused([f"{key}=0"])


# shares, fractions, probabilities and rates: above 1 is no share
SHARES = [k for k in NUMBERS if any(w in k.rpartition(".")[2] for w in ("share", "frac", "prob", "fraction"))]


@pytest.mark.parametrize("key", SHARES)
def test_a_share_above_one_is_refused(key):
    assert key in refused([f"{key}=1.5"])


def test_the_shares_are_found():
    assert {"honest.hindsight_prob", "honest.sft_hindsight_frac", "honest.gss_share", "data.mc_fraction"} <= set(SHARES)


# switches of a fixed set of words; CHOICES holds the ones config.py checks itself
CHOICE_KEYS = sorted(set(CHOICES) | {"data.format", "eval.format", "honest.hindsight_mode", "honest.sft_tier"})


@pytest.mark.parametrize("key", CHOICE_KEYS)
@pytest.mark.parametrize("value", ["no_such_choice", "'é∂'", LONG[:300]])
def test_an_unknown_choice_is_refused_naming_the_field(key, value):
    assert key in refused([f"{key}={value}"])


# settings naming a file or directory: a NUL byte or an over-long name failed at the first open, naming no key
PATH_KEYS = ["model.path", "model.cache_dir", "data.train", "data.heldout", "trainer.output_dir", "trainer.deepspeed",
             "sft.output_dir", "eval.data", "eval.image_root", "eval.out_dir", "mmzero.output_dir", "mmzero.embedder",
             "prism.embedder", "prism.init_counts", "prism.centroids", "prism.corpus", "prism.output_dir",
             "honest.output_dir"]


@pytest.mark.parametrize("key", PATH_KEYS)
@pytest.mark.parametrize("value", ['"a\\0b"', "y" * 256, "/".join(["d" * 200] * 21)])
def test_a_path_no_file_system_opens_is_refused_naming_the_field(key, value):
    message = refused([f"{key}={value}"])
    assert key in message and len(message) < 600  # the 4000-character value is cut in the message


@pytest.mark.parametrize("key", ["trainer.output_dir", "data.train", "model.cache_dir"])
def test_a_long_unicode_path_within_the_limits_is_taken(key):
    value = "/".join(["é" * 120] * 3)  # 240 bytes a name
    assert load_config(None, [f"{key}={value}"]) is not None


@pytest.mark.parametrize("key", [k for k, _ in FIELDS])
def test_a_misspelt_key_is_refused_with_a_did_you_mean_hint(key):
    section, _, name = key.rpartition(".")
    message = refused([f"{section}.{name}{name[-1]}=1"])
    assert f"did you mean {key}?" in message


# -- the same through a YAML file ------------------------------------------------------------------------------------
def yaml_text(key: str, value: str) -> str:
    """``key: value`` nested under its sections, as a config file writes it."""
    parts = key.split(".")
    lines = [f"{'  ' * i}{p}:" for i, p in enumerate(parts[:-1])]
    return "\n".join(lines + [f"{'  ' * (len(parts) - 1)}{parts[-1]}: {value}"]) + "\n"


YAML_CASES = {"int": ["true", "2.5", ".nan", "[1]", "{a: 1}", "''", "abc"],
              "float": ["yes", ".inf", ".nan", "[1.0]", "{a: 1}", "''", "abc"],
              "bool": ["2", "[true]", "abc", "''"],
              "str": ["[a]", "{a: 1}", "null"],
              "list": ["abc", "1", "{a: 1}"],
              "dict": ["abc", "1", "[1]"]}


@pytest.mark.parametrize("key, value", [(k, v) for k, t in FIELDS for v in YAML_CASES[kind(t)]])
def test_a_yaml_file_value_of_the_wrong_kind_is_refused_naming_the_field(key, value, tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(yaml_text(key, value))
    message = refused(path=p)
    assert key in message and str(p) in message


@pytest.mark.parametrize("key", [k for k, _ in FIELDS if "." in k and k.count(".") == 1])
def test_a_key_given_twice_in_a_yaml_file_is_refused_naming_its_dotted_path(key, tmp_path):
    section, _, name = key.partition(".")
    p = tmp_path / "dup.yaml"
    value = {"str": "a", "bool": "true", "list": "[]", "dict": "{}"}.get(kind(dict(FIELDS)[key]), "1")
    p.write_text(f"{section}:\n  {name}: {value}\n  {name}: {value}\n")  # even the same value twice
    message = refused(path=p)
    assert f"duplicate key '{key}' (first on line 2" in message and "line 3" in message


def test_a_section_given_twice_in_a_yaml_file_is_refused(tmp_path):
    p = tmp_path / "dup.yaml"
    p.write_text("trainer:\n  steps: 3\nrollout:\n  n: 2\ntrainer:\n  lr: 1.0e-5\n")
    assert "duplicate key 'trainer' (first on line 1" in refused(path=p)


def test_a_key_given_twice_inside_a_mapping_value_names_its_path(tmp_path):
    p = tmp_path / "dup.yaml"
    p.write_text("reward:\n  heads: {accuracy: 1.0, format: 0.1, accuracy: 2.0}\n")
    assert "duplicate key 'reward.heads.accuracy'" in refused(path=p)
    message = refused(["mmzero.roles={solver: {rollout.n: 2, rollout.n: 3}}"])
    assert "duplicate key 'solver.rollout.n'" in message and "quote it" not in message  # quoting would not help


# -- values below a loop's roles, and empty values that meant the current directory or no layout ---------------------
@pytest.mark.parametrize("loop, role", [("mmzero", "solver"), ("prism", "questioner"), ("honest", "solver")])
@pytest.mark.parametrize("override, named", [("{trainer.micro_batch_seqs: -1}", "trainer.micro_batch_seqs=-1"),
                                             ("{rollout.top_p: 5}", "rollout.top_p=5.0"),
                                             ("{algo.loss_agg: bogus}", "algo.loss_agg='bogus'"),
                                             ("{model.cache_dir: \"a\\0b\"}", "model.cache_dir=")])
def test_a_roles_override_out_of_range_is_refused_at_load(loop, role, override, named):
    # load_config took these: only `mmevo evolve`'s phase check refused them, a direct run_<loop>(cfg) not before the
    # role's phase started
    assert f"{loop}.roles.{role}: {named}" in refused([f"{loop}.roles={{{role}: {override}}}"])


@pytest.mark.parametrize("override, message", [
    ("data.format=''", "data.format='' not in"),  # was 'unknown data format' when the data loaded, naming no key
    ("model.cache_dir=''", "model.cache_dir is empty"),  # the tiny models were built into the current directory
    ("model.cache_dir='  '", "model.cache_dir is empty"),
])
def test_an_empty_value_that_means_nothing_is_refused(override, message):
    assert message in refused([override])


def test_eval_format_may_stay_empty():
    assert load_config(None, ["eval.format=''"]).eval.format == ""


def test_an_empty_cache_dir_is_fine_beside_a_checkpoint_or_hub_id(tmp_path):
    # only the embedded tiny models read model.cache_dir: a real checkpoint with an empty one loaded (and a saved
    # run_config.json holding it resumed) before the empty-value check, and still must
    for path in (str(tmp_path), "Qwen/Qwen2.5-VL-7B-Instruct"):
        assert load_config(None, [f"model.path={path}", "model.cache_dir=''"]).model.cache_dir == ""
    assert "model.cache_dir is empty" in refused(["model.path=tiny-text", "model.cache_dir=''"])
