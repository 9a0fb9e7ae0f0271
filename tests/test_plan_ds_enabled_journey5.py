"""A DeepSpeed file's bf16 / fp16 ``enabled`` is read as DeepSpeed's pydantic config reads it (journey5): "true" or 1
turn bf16 on, a legacy "bfloat16" section counts when "bf16" is absent. The planner read only a JSON ``true`` and
the "bf16" key, so such a file was planned (and warned about) as fp32 weights: 96.03 GiB against DeepSpeed's 107.42
on the CSRS 7B config at ZeRO-1; and the trainer added an empty "bf16" beside a "bfloat16" section, which turned
bf16 off in DeepSpeed."""

import json
import warnings

import pytest
import torch
from deepspeed.runtime.precision_config import get_bfloat16_config, get_float16_config

from mmevo import memory_plan as mp
from mmevo.grpo.distributed import load_ds_config
from tests.test_plan26_precision import _plan


def _file(tmp_path, name, **sections):
    cfg = {"zero_optimization": {"stage": 1}, "zero_force_ds_cpu_optimizer": False, **sections}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return path


# (sections, DeepSpeed's precision for them): checked against DeepSpeed's own reading below
CASES = [
    ({"bf16": {"enabled": True}}, "bf16"),
    ({"bf16": {"enabled": "true"}}, "bf16"),
    ({"bf16": {"enabled": "TRUE"}}, "bf16"),
    ({"bf16": {"enabled": 1}}, "bf16"),
    ({"bf16": {"enabled": "yes"}}, "bf16"),
    ({"bf16": {"enabled": "false"}}, "fp32"),
    ({"bf16": {"enabled": 0}}, "fp32"),
    ({"bfloat16": {"enabled": True}}, "bf16"),
    ({"bf16": None, "bfloat16": {"enabled": "on"}}, "bf16"),
    ({"bf16": {}, "bfloat16": {"enabled": True}}, "fp32"),  # DeepSpeed reads the (empty) bf16 section
    ({"fp16": {"enabled": "true"}}, "fp16"),
    ({}, "fp32"),
]


@pytest.mark.parametrize("sections,precision", CASES)
def test_planner_reads_enabled_as_deepspeed_does(tmp_path, sections, precision):
    cfg = json.loads(_file(tmp_path, "ds", **sections).read_text())
    bf16, fp16 = get_bfloat16_config(cfg).enabled, get_float16_config(cfg).enabled
    assert ("fp16" if fp16 else "bf16" if bf16 else "fp32") == precision  # the expectation is DeepSpeed's
    assert mp.read_deepspeed(tmp_path / "ds.json").precision == precision


@pytest.mark.parametrize("value", [2, 0.5, "maybe", " true", None])
def test_a_value_deepspeed_refuses_is_an_error_naming_the_key(tmp_path, value):
    path = _file(tmp_path, "bad", bf16={"enabled": value})
    with pytest.raises(ValueError, match=r"bad\.json: bf16\.enabled="):
        mp.read_deepspeed(path)


def test_a_string_true_plans_as_a_json_true(tmp_path):
    """Same DeepSpeed run, same plan, and no warning that it runs as fp32."""
    want = _plan(_file(tmp_path, "bool", bf16={"enabled": True}))
    assert want["peak_gib"] != _plan(_file(tmp_path, "fp32", bf16={"enabled": False}))["peak_gib"]
    for name, sections in (("str", {"bf16": {"enabled": "true"}}), ("one", {"bf16": {"enabled": 1}}),
                           ("legacy", {"bfloat16": {"enabled": True}})):
        got = _plan(_file(tmp_path, name, **sections))
        assert got["peak_gib"] == want["peak_gib"] and got["per_gpu_gib"] == want["per_gpu_gib"]
        assert not any("DeepSpeed runs this" in w for w in got["warnings"])


def test_trainer_fills_auto_in_a_legacy_bfloat16_section(tmp_path):
    model = torch.nn.Linear(2, 2).to(torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "runs this bfloat16 model as fp32"
        cfg = load_ds_config(_file(tmp_path, "legacy", bfloat16={"enabled": "auto"}), model, 1.0)
    assert get_bfloat16_config(cfg).enabled is True
    cfg = load_ds_config(_file(tmp_path, "legacy_true", bfloat16={"enabled": True}), model, 1.0)
    assert get_bfloat16_config(cfg).enabled is True
    fp32 = load_ds_config(_file(tmp_path, "legacy_fp32", bfloat16={"enabled": "auto"}), torch.nn.Linear(2, 2), 1.0)
    assert get_bfloat16_config(fp32).enabled is False
