"""Review csrs22 (second pass): the shipped 7B CSRS config against the seed's training length, and the sample roles
that decide which samples SFR rewards and which feed its re-inference frequency.

Training length: Table 6 gives 15 epochs of Geometry3K (2101 training problems) at batch 256 on veRL, whose training
loader drops the last partial batch, so an epoch is 2101 // 256 = 8 steps and the run 15 x 8 = 120 steps; Table 8's
step-120 row is, digit for digit, Table 1's CSRS / Geometry3K result.
"""

from pathlib import Path

import pytest

from mmevo.config import load_config

ROOT = Path(__file__).resolve().parent.parent
GEOMETRY3K_TRAIN, BATCH, EPOCHS = 2101, 256, 15


@pytest.mark.parametrize("path", ["configs/csrs_qwen2_5_vl_7b_geometry3k.yaml",
                                  "configs/mmupt_qwen2_5_vl_7b_geometry3k.yaml"])
def test_the_7b_configs_train_the_papers_120_steps(path):
    cfg = load_config(ROOT / path, [])
    assert cfg.trainer.prompts_per_step == BATCH
    # 123 (15 x 2101 / 256, rounded down) trained 3 updates past the reported checkpoint
    assert cfg.trainer.steps == EPOCHS * (GEOMETRY3K_TRAIN // BATCH) == 120
    assert cfg.trainer.steps % cfg.trainer.save_every == 0  # Table 6 saves every 20 steps: the last one is step 120
