"""Review csrs22 (second pass): the shipped 7B CSRS config against the seed's training length, and the sample roles
that decide which samples SFR rewards and which feed its re-inference frequency.

Training length: Table 6 gives 15 epochs of Geometry3K (2101 training problems) at batch 256 on veRL, whose training
loader drops the last partial batch, so an epoch is 2101 // 256 = 8 steps and the run 15 x 8 = 120 steps; Table 8's
step-120 row is, digit for digit, Table 1's CSRS / Geometry3K result.
"""

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from mmevo.config import ConfigError, CSRSConfig, load_config
from mmevo.csrs.perturb import perturb_image, perturb_images
from mmevo.csrs.strategy import CSRSStrategy
from mmevo.rewards.heads import RewardMixer, ScoredSample, SFRHead

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


# -- a sample's role decides whether SFR rewards it or counts it in f_r ----------------------------------------------
def _group(second_role):
    return [ScoredSample("\\boxed{1}", 0, None, None), ScoredSample("\\boxed{2}", 0, None, None, role=second_role),
            ScoredSample("\\boxed{2}", 0, None, None, role="reinference", parent=0)]


@pytest.mark.parametrize("role", ["Maternal", "reinferences", "", None, 1, True])
def test_sfr_and_the_mixer_refuse_a_role_they_do_not_know(role):
    # "Maternal" was read as a re-inference: the maternal \boxed{2} scored 0 and \boxed{1} 0.2667, the damped share of
    # an answer that is 1 of 3 in A_all and absent from A_m = [2, 2] (test below: 0.2667 / 0.7982 with the role right)
    with pytest.raises(ValueError, match=r"samples\[1\]\.role"):
        SFRHead().score(_group(role))
    with pytest.raises(ValueError, match=r"samples\[1\]\.role"):
        RewardMixer({"majority": 1.0})(_group(role))


def test_known_roles_score_by_eq_7_8():
    # maternal [1, 2], A_m [2]: Eq. 7 R_base(1) = 1/3, R_base(2) = 2/3; Eq. 8 f_r(1) = 0, f_r(2) = 1
    #   R(1) = (1 + 0.2 tanh(5 (0 / (1/3 + 1e-6) - 1))) / 3 = (1 - 0.2 * 0.999909204262595) / 3 = 0.266672719715827
    #   R(2) = (1 + 0.2 tanh(5 (1 / (2/3 + 1e-6) - 1))) * 2/3: 1 / 0.666667666667 = 1.49999775, 5 * 0.49999775
    #        = 2.49998875, tanh = 0.986614000 -> (1 + 0.197322800) * 2/3 = 0.798215200
    r, _ = SFRHead().score(_group("maternal"))
    assert r.tolist() == pytest.approx([0.266672719715827, 0.798215200, 0.0], abs=1e-6)
    total, metrics = RewardMixer({"sfr": 1.0})(_group("maternal"))
    assert metrics["reward/sfr/mean"] == pytest.approx((0.266672719715827 + 0.798215200) / 2, abs=1e-6)


# -- Eq. 6: "omega in (0, 1) denotes the retracing rate" -------------------------------------------------------------
def test_a_retracing_rate_of_1_is_refused_naming_eq_6():
    # omega = 1 was accepted: the anchor kept the whole response, answer included, and each re-inference continued a
    # finished response (its answer the maternal one unless it boxed again): RRM's local exploration did not happen
    with pytest.raises(ConfigError, match=r"csrs\.omega=1\.0 must be in \(0, 1\) \(Eq\. 6\)"):
        load_config(ROOT / "configs/csrs_tiny.yaml", ["csrs.omega=1"])
    for w in (0.1, 0.7, 0.9, 0.999):  # Table 4's rates, and one just below the bound
        assert load_config(ROOT / "configs/csrs_tiny.yaml", [f"csrs.omega={w}"]).csrs.omega == w


@pytest.mark.parametrize("omega", [1, 1.0, 0, 1.5, float("nan"), True, "0.7"])
def test_the_strategy_built_directly_refuses_a_rate_outside_the_open_interval(omega):
    with pytest.raises(ValueError, match=r"csrs\.omega must be in \(0, 1\)"):
        CSRSStrategy(CSRSConfig(enabled=True, omega=omega))


def test_the_strategy_ignores_the_rate_where_it_cuts_no_fixed_anchor():
    # csrs.retrace=false re-infers from scratch; random anchors draw their own rate from U(0, 1)
    CSRSStrategy(CSRSConfig(enabled=True, omega=1, retrace=False))
    CSRSStrategy(CSRSConfig(enabled=True, omega=1, random_anchor=True))
    assert CSRSStrategy(CSRSConfig(enabled=True, omega=0.7)).c.omega == 0.7


# -- a head's weight is a number, not a flag or a text ---------------------------------------------------------------
@pytest.mark.parametrize("weight", [True, False, np.True_, torch.tensor(True), "0.5", b"1"])
def test_the_mixer_refuses_a_weight_that_is_a_bool_or_a_text(weight):
    # float() read True as a weight of 1 and "0.5" as 0.5 (load_config refuses both for reward.heads; a mixer built
    # directly, by a loop or a plug-in, took them)
    with pytest.raises(ValueError, match=r"reward head 'sfr': weight must be a finite number"):
        RewardMixer({"sfr": weight})


def test_the_mixer_keeps_numeric_weights_of_every_kind():
    for w in (1, 0.5, -0.25, np.float32(0.5), np.int64(2), torch.tensor(0.5)):
        assert RewardMixer({"sfr": w}).weights == {"sfr": float(w)}


# -- VSP names what it cannot perturb --------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [np.zeros((4, 4, 3), np.uint8), None, "figure.png"])
def test_vsp_names_an_image_that_is_no_pil_image(bad):
    # each failed on img.convert with an AttributeError naming neither the argument nor what it should be
    with pytest.raises(ValueError, match=r"img must be a PIL image, got " + type(bad).__name__):
        perturb_image(bad, 20.0, 0)
    with pytest.raises(ValueError, match=r"images\[1\] must be a PIL image"):
        perturb_images([Image.new("RGB", (2, 2)), bad], 20.0, 0)


@pytest.mark.parametrize("bad", [None, Image.new("RGB", (2, 2))])
def test_vsp_names_an_image_list_that_is_no_list(bad):
    # None: "'NoneType' object is not iterable"; one image: "'Image' object is not iterable"
    with pytest.raises(ValueError, match=r"images must be a list of PIL images"):
        perturb_images(bad, 20.0, 0)


def test_vsp_of_a_grey_image_keeps_sigma_in_pixel_units():
    # Eq. 9 on 0-255 values: mid-grey 128 plus N(0, 20^2) noise, rounded; far from 0 and 255 clipping never bites
    out = np.asarray(perturb_image(Image.new("RGB", (200, 200), (128, 128, 128)), 20.0, 7), dtype=np.float64)
    assert abs(out.mean() - 128) < 0.3 and abs(out.std() - 20) < 0.3
    assert perturb_images((Image.new("L", (2, 2), 9),), 0.0, 0)[0].getpixel((0, 0)) == (9, 9, 9)  # a tuple is a list
