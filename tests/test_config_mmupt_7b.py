"""The shipped 7B MM-UPT config (configs/mmupt_qwen2_5_vl_7b_geometry3k.yaml): CSRS's baseline "post-trained using the
same Qwen2.5-VL-7B backbone under identical experimental settings" (CSRS §4.2). It must differ from the CSRS 7B config
only in what makes it majority vote, run plain groups with the majority head, fit 8 x 80 GiB, and be what
scripts/train_csrs_8gpu.sh launches with CONFIG=."""

import os
import subprocess
from pathlib import Path

import pytest

from mmevo import memory_plan
from mmevo.config import load_config, to_dict
from mmevo.grpo.trainer import default_strategy
from mmevo.rewards.heads import RewardMixer
from mmevo.rollout.strategy import PlainGroups

ROOT = Path(__file__).resolve().parent.parent
MMUPT = "configs/mmupt_qwen2_5_vl_7b_geometry3k.yaml"
CSRS = "configs/csrs_qwen2_5_vl_7b_geometry3k.yaml"


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and k != "heads":
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_mmupt_7b_differs_from_csrs_7b_only_in_the_method():
    mmupt, csrs = (_flat(to_dict(load_config(ROOT / p, []))) for p in (MMUPT, CSRS))
    assert mmupt.keys() == csrs.keys()
    differ = {k for k in mmupt if mmupt[k] != csrs[k]}
    assert differ == {"csrs.enabled", "reward.heads", "trainer.output_dir"}
    assert mmupt["csrs.enabled"] is False and mmupt["reward.heads"] == {"majority": 1.0}
    assert mmupt["data.hide_labels"] is True  # label-free, as CSRS
    assert mmupt["trainer.output_dir"] == "runs/mmupt_qwen2_5_vl_7b_geometry3k"


def test_mmupt_7b_runs_plain_groups_with_the_majority_head():
    cfg = load_config(ROOT / MMUPT, [])
    assert isinstance(default_strategy(cfg), PlainGroups)
    mixer = RewardMixer(cfg.reward.heads, {})
    assert mixer.weights == {"majority": 1.0} and mixer.labels == {"majority": "majority"}


def test_mmupt_7b_fits_8x80gib_with_headroom():
    p = memory_plan.plan(load_config(ROOT / MMUPT, []), 8, 80.0, config_path=ROOT / MMUPT)
    assert p["fits"] is True and p["headroom_frac"] >= 0.08, p["phases_gib"]


def _dry_run(**env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/train_csrs_8gpu.sh"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DRY_RUN": "1", **env})


@pytest.mark.parametrize("config, out_dir", [(None, "runs/csrs_qwen2_5_vl_7b_geometry3k"),
                                             (MMUPT, "runs/mmupt_qwen2_5_vl_7b_geometry3k")])
def test_the_8gpu_script_launches_the_given_config(config, out_dir):
    r = _dry_run(**({"CONFIG": config} if config else {}))
    assert r.returncode == 0, r.stderr
    words = (r.stdout + r.stderr).split()
    assert words[words.index("train") + 1] == (config or CSRS)
    assert f"trainer.output_dir={out_dir}" in words


def test_the_8gpu_script_refuses_a_missing_config():
    r = _dry_run(CONFIG="configs/nope.yaml")
    assert r.returncode == 2 and "CONFIG=configs/nope.yaml: no such file" in r.stderr
