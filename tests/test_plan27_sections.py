"""The planner reads a DeepSpeed file's sections as the installed DeepSpeed does: only a missing or null section is
the empty default (``"bf16": false`` is a TypeError inside DeepSpeed, it was planned as fp32 and passed on), and the
deprecated ``"zero_optimization": true / false`` is ZeRO stage 1 / 0 (it was refused as "must be an object")."""

import json

import pytest

from mmevo import memory_plan as mp


def _write(tmp_path, cfg):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("key", ["bf16", "fp16", "data_types"])
@pytest.mark.parametrize("value", [False, 0, [], ""])
def test_a_falsy_non_object_section_is_refused_as_deepspeed_refuses_it(tmp_path, key, value):
    from deepspeed.runtime.config import get_data_types_params
    from deepspeed.runtime.precision_config import get_bfloat16_config, get_float16_config

    cfg = {"zero_optimization": {"stage": 2}, key: value}
    reader = {"bf16": get_bfloat16_config, "fp16": get_float16_config,
              "data_types": lambda c: get_data_types_params(c).get("grad_accum_dtype")}[key]
    with pytest.raises((TypeError, AttributeError)):  # DeepSpeed's own reading of the same dict
        reader(cfg)
    with pytest.raises(ValueError, match=rf"ds\.json.*{key}=.*must be an object"):
        mp.read_deepspeed(_write(tmp_path, cfg))


@pytest.mark.parametrize("key", ["bf16", "fp16", "data_types", "zero_optimization"])
def test_a_null_section_is_the_empty_default(tmp_path, key):
    plain = mp.read_deepspeed(_write(tmp_path, {"zero_optimization": {"stage": 0}}))
    cfg = {"zero_optimization": {"stage": 0}, key: None}
    assert mp.read_deepspeed(_write(tmp_path, cfg)) == plain


@pytest.mark.parametrize("legacy", [True, False])
def test_the_deprecated_boolean_zero_section_is_stage_one_or_zero(tmp_path, legacy):
    from deepspeed.runtime.zero.config import get_zero_config

    cfg = {"zero_optimization": legacy, "bf16": {"enabled": True}}
    expected = int(get_zero_config(dict(cfg)).stage)
    assert expected == int(legacy)
    got = mp.read_deepspeed(_write(tmp_path, cfg))
    assert got.stage == expected and got.precision == "bf16"
