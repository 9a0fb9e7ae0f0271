"""HONEST review 4: the lenient confidence phrase reads exponents as the tag does, CASR's anti-copy test with a
copy_tol at or below its float slack, the hindsight audit's null / NaN / bool steps, the report's malformed rate
as a count, and reliability_bins' refusal of bool / text confidences. Expected values are worked by hand."""

import json

import pytest
import torch

from mmevo.honest.calibration import calibration_report, hindsight_audit, reliability_bins
from mmevo.honest.protocol import parse_lenient
from mmevo.rewards.honest import HonestHindsightHead, casr_reward

KEY = "reward/honest_hindsight/nonzero_frac"


def t(x):
    return torch.tensor(x, dtype=torch.float64)


# ------------------------------------------------------------------------------------ lenient confidence phrase
@pytest.mark.parametrize("text, conf, reasons", [
    ("The answer is \\boxed{4}. Confidence: 1e-1", 0.1, ()),  # was 1.0: the phrase stopped before the exponent
    ("\\boxed{4} confidence 1E-2", 0.01, ()),  # was 1.0
    ("\\boxed{4} Confidence = 8e-1.", 0.8, ()),  # was out of range (8)
    ("\\boxed{4} confidence:0.5e1", None, ("confidence_out_of_range",)),  # 5: was read as 0.5
    ("\\boxed{4} confidence: 0.8", 0.8, ()),  # unchanged
    ("\\boxed{4} confidence is 85 %", 0.85, ()),  # unchanged
    ("\\boxed{4} confidence: 0.5e", 0.5, ()),  # an 'e' without digits is no exponent
])
def test_lenient_confidence_phrase_reads_exponents(text, conf, reasons):
    p = parse_lenient(text)
    assert (p.answer, p.confidence, p.malformed) == ("4", conf, reasons)


def test_report_of_an_exponent_phrase():
    rep = calibration_report([{"response": "The answer is \\boxed{4}. Confidence: 1e-1", "gold": "4"}])
    # c = 0.1, y = 1: Brier (0.1 - 1)^2 = 0.81, ECE |1 - 0.1| = 0.9 (was 0 and 0 with c read as 1.0)
    assert rep["brier"] == pytest.approx(0.81) and rep["ece"] == pytest.approx(0.9)


# ------------------------------------------------------------------------------------------------ CASR copy_tol
def test_casr_tiny_copy_tol_still_catches_an_exact_copy():
    c, r, y = t([0.5, 0.5, 0.5]), t([0.5, 0.5000004, 0.500002]), t([1.0, 1.0, 1.0])
    chars, has = torch.tensor([20, 20, 20]), torch.tensor([True, True, True])
    got = casr_reward(c, r, y, chars, has, copy_tol=1e-6).tolist()
    # |r - c| = 0 and 4e-7 are < 1e-6: beta - gamma + dBrier (0 and 0.25 - 0.4999996^2 = 4e-7);
    # 2e-6 is not: beta + dBrier (0.25 - 0.499998^2 = 2.0e-6)
    assert got == pytest.approx([0.0, 4e-7, 0.05 + 2e-6], abs=1e-9)
    assert casr_reward(c[:1], r[:1], y[:1], chars[:1], has[:1], copy_tol=0.0).tolist() == pytest.approx([0.05])


def test_casr_default_copy_tol_unchanged():
    c, r, y = t([0.5, 0.5, 0.07, 0.5]), t([0.52, 0.51, 0.09, 0.519]), t([1.0, 1.0, 1.0, 1.0])
    got = casr_reward(c, r, y, torch.tensor([20] * 4), torch.tensor([True] * 4)).tolist()
    # dBrier = (1 - c)^2 - (1 - r)^2 = 0.0196, 0.0099, 0.0368, 0.018639, + beta 0.05; |r - c| = 0.02 exactly
    # (0.52 - 0.5, 0.09 - 0.07) is no copy, 0.01 and 0.019 are (- gamma 0.05)
    assert got == pytest.approx([0.0696, 0.0099, 0.0868, 0.018639], abs=1e-9)


def test_refined_head_with_tiny_copy_tol():
    resp = ("<reasoning>2 + 2 = 4</reasoning><answer>4</answer><confidence>0.7</confidence>"
            "<critique>checked the sum once more</critique><refined_confidence>0.7</refined_confidence>")
    sample = type("S", (), {"response": resp, "gold": "4", "choices": [], "aux": {}})()
    rewards, m = HonestHindsightHead("refined", copy_tol=1e-6).score([sample])
    assert rewards.tolist() == [0.0] and m["copy"] == 1.0  # beta - gamma (was +0.05, copy 0)


# ------------------------------------------------------------------------------------------------ audit steps
def _audit(tmp_path, rows):
    p = tmp_path / "metrics.jsonl"
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return hindsight_audit(p)


def test_audit_null_steps_are_not_one_step(tmp_path):
    a = _audit(tmp_path, [{"step": None, KEY: 0.5}, {"step": None, KEY: 0.0}, {"step": None, KEY: 0.25}])
    assert (a["steps"], a["nonzero_steps"]) == (3, 2) and a["mean_nonzero_frac"] == pytest.approx(0.25)


@pytest.mark.parametrize("step", ["NaN", "Infinity", "-Infinity", "true"])
def test_audit_refuses_non_finite_and_bool_steps(tmp_path, step):
    with pytest.raises(ValueError, match=r"metrics.jsonl:2: field 'step'"):
        _audit(tmp_path, [{"step": 1, KEY: 0.0}, '{"step": %s, "%s": 0.5}' % (step, KEY)])


# ------------------------------------------------------------------------------------------------ report / bins
def test_report_malformed_rate_is_a_count():
    good = "<reasoning>x</reasoning><answer>4</answer><confidence>0.5</confidence>"
    rep = calibration_report([{"response": good, "gold": "4"}] * 7 + [{"response": "no idea", "gold": "4"}] * 3)
    assert rep["malformed_rate"] == 0.3 and rep["well_formed_rate"] == 0.7  # was 1 - 0.7 = 0.30000000000000004


@pytest.mark.parametrize("conf", [[True], ["0.5"], [None]])
def test_reliability_bins_refuses_bool_and_text_confidence(conf):
    with pytest.raises(ValueError, match="conf must hold numbers"):
        reliability_bins(conf, [True], 2)
    assert reliability_bins(torch.tensor([0.25]), [True], 2)[0]["count"] == 1  # a tensor of confidences still works
