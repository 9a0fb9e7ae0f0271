"""The planner and the trainer read a DeepSpeed file's precision as DeepSpeed does (review plan26): the model dtype
DeepSpeed assumes comes from the file's bf16 / fp16 sections, not from model.dtype; ZeRO-1's BF16_Optimizer ignores
an NVMe optimizer offload; stage 0 refuses an accumulation dtype other than the model's."""

import json
import math
import warnings

import pytest
import torch

from mmevo import memory_plan as mp
from mmevo.config import load_config
from mmevo.grpo.distributed import load_ds_config
from tests.test_plan24_vectors import CSRS_7B, GiB, P

BUCKET = 200_000_000


def _ds(tmp_path, stage, offload="none", accum="fp32", bf16="auto", name="ds"):
    cfg = {"zero_optimization": {"stage": stage, "offload_optimizer": {"device": offload},
                                 "reduce_bucket_size": BUCKET, "overlap_comm": False},
           "zero_force_ds_cpu_optimizer": False}
    if bf16 is not None:
        cfg["bf16"] = {"enabled": bf16}
    if accum:
        cfg["data_types"] = {"grad_accum_dtype": accum}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return path


def _plan(path, *more):
    return mp.plan(load_config(CSRS_7B, [f"trainer.deepspeed={path}", *more]), 8, 80)


def test_zero1_bf16_optimizer_keeps_the_optimizer_on_the_gpu_under_nvme_offload(tmp_path):
    """DeepSpeed's zero_cpu_offload is CPU only, so ZeRO-1 + bf16 + fp32 accumulation with device nvme takes the
    BF16_Optimizer path, which offloads nothing: fp32 master (4 P / 8), Adam moments (8 P / 8) and the step's
    temporaries stay on the GPU. It was planned at 0 GiB for all three."""
    nvme = _plan(_ds(tmp_path, 1, "nvme", name="nvme"))
    gpu = _plan(_ds(tmp_path, 1, "none", name="gpu"))
    g = nvme["per_gpu_gib"]
    assert g["master_weights_fp32"] == round(math.ceil(4 * P / 8) / GiB, 2) > 0
    assert g["adam_moments"] == round(math.ceil(8 * P / 8) / GiB, 2) > 0
    assert g["optimizer_step"] > 0 and g["gradients_resident"] == round(4 * P / GiB, 2)
    assert nvme["peak_gib"] == gpu["peak_gib"] and nvme["per_gpu_gib"] == gpu["per_gpu_gib"]
    assert any("BF16_Optimizer" in w and "nvme" in w for w in nvme["warnings"])
    assert "optimizer_offload" not in nvme["host_gib_per_gpu"]
    # ZeRO-2's optimizer honours nvme (stage_1_and_2 offloads for any device but none), and CPU offload avoids
    # BF16_Optimizer: both still plan the optimizer off the GPU
    for stage, device in ((2, "nvme"), (1, "cpu")):
        q = _plan(_ds(tmp_path, stage, device, name=f"s{stage}{device}"))
        assert q["per_gpu_gib"]["adam_moments"] == 0 and q["per_gpu_gib"]["master_weights_fp32"] == 0
        assert not any("BF16_Optimizer" in w for w in q["warnings"])


def test_stage0_with_another_accumulation_dtype_is_refused_naming_the_file(tmp_path):
    """DeepSpeed without ZeRO raises NotImplementedError for bf16 weights with fp32 accumulation; the planner planned
    it as if it ran."""
    path = _ds(tmp_path, 0, accum="fp32")
    with pytest.raises(ValueError, match=r"trainer\.deepspeed=.*ds\.json.*stage=0.*grad_accum_dtype=fp32.*bf16"):
        _plan(path)
    # the same dtype as the model's runs (DeepSpeed's DDP_BFLOAT16 path), and so does no grad_accum_dtype
    for name, accum in (("same", "bf16"), ("unset", "")):
        p = _plan(_ds(tmp_path, 0, accum=accum, name=name))
        assert p["setup"]["grad_accum_dtype"] == "bf16"


def test_a_file_without_bf16_runs_bf16_weights_as_fp32_and_accumulates_in_fp32(tmp_path):
    """With no bf16 section (or enabled false) DeepSpeed's model dtype is fp32, so its default accumulation dtype is
    fp32: ZeRO-2's gradient partition is 4 P / W bytes, not 2 P / W as planned from model.dtype."""
    auto = _plan(_ds(tmp_path, 2, accum="", name="auto"))
    for bf16 in (None, False):
        plain = _plan(_ds(tmp_path, 2, accum="", bf16=bf16, name=f"plain{bf16}"))
        assert plain["setup"]["grad_accum_dtype"] == "fp32"
        assert plain["per_gpu_gib"]["gradients"] == round((math.ceil(4 * P / 8) + 2 * BUCKET) / GiB, 2)
        assert any("as fp32" in w for w in plain["warnings"])
    assert auto["setup"]["grad_accum_dtype"] == "bf16"
    assert auto["per_gpu_gib"]["gradients"] == round((math.ceil(2 * P / 8) + 2 * BUCKET) / GiB, 2)
    assert not any("DeepSpeed runs this" in w for w in auto["warnings"])


def test_trainer_reads_the_file_the_same_way(tmp_path):
    """load_ds_config (the trainer's reading, before deepspeed.initialize) refuses stage 0's mix naming the file,
    warns about nvme under BF16_Optimizer, and fills bf16 "auto" from the weights."""
    model = torch.nn.Linear(2, 2).to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"trainer\.deepspeed=.*s0\.json.*stage=0"):
        load_ds_config(_ds(tmp_path, 0, name="s0"), model, 1.0)
    with pytest.warns(UserWarning, match="BF16_Optimizer"):
        cfg = load_ds_config(_ds(tmp_path, 1, "nvme", name="s1"), model, 1.0)
    assert cfg["bf16"]["enabled"] is True and cfg["gradient_clipping"] == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fp32 = load_ds_config(_ds(tmp_path, 0, accum="", name="fp32"), torch.nn.Linear(2, 2), 1.0)
    assert fp32["bf16"]["enabled"] is False
