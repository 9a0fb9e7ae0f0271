"""HONEST review 3 (differential): the strict parser on numbers padded with the \\s that float() rejects, 0/1 checks
before the cast to the confidence dtype, the Brier head's ECE binned as the seed's reference compute_ece bins the
parsed confidences, numpy integer bin counts, and the hindsight audit on bad logged values. Expected values by hand
(comments) from the seed's equations: R_B = -(c - y)^2 (2.1), R_H = -k (r - y)^2 with k = 0.3, ECE over 10
equal-width bins with the reference's np.linspace edges (8)."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mmevo.honest.calibration import calibration_report, hindsight_audit, reliability_bins
from mmevo.honest.protocol import parse_lenient, parse_strict
from mmevo.rewards.honest import (HonestBrierHead, HonestFormatHead, HonestHindsightHead, brier_reward,
                                  expected_calibration_error, hindsight_reward)


def sample(response, gold="4"):
    return SimpleNamespace(response=response, gold=gold, choices=[], aux={})


def answer(a, c):
    return f"<reasoning>x</reasoning><answer>{a}</answer><confidence>{c}</confidence>"


# -- strict numbers: \x1c-\x1f are \s to the pattern (and to str.strip) but float() rejects them -------------------
@pytest.mark.parametrize("pad", ["\x1c", "\x1d", "\x1e", "\x1f"])
def test_strict_parser_reads_a_number_padded_with_ascii_separators_instead_of_crashing(pad):
    text = answer("4", f"{pad}0.5{pad}") + f"<hindsight>{pad}0.25</hindsight>"
    p = parse_strict(text)
    assert (p.confidence, p.hindsight, p.malformed) == (0.5, 0.25, ())
    assert parse_lenient(text).confidence == 0.5  # the lenient parser already read it
    s = [sample(text)]
    # correct answer: R_B = -(0.5 - 1)^2 = -0.25; R_H = -0.3 (0.25 - 1)^2 = -0.16875; well formed: 0
    assert HonestBrierHead().score(s)[0].tolist() == pytest.approx([-0.25])
    assert HonestHindsightHead("legacy").score(s)[0].tolist() == pytest.approx([-0.16875])
    assert HonestFormatHead().score(s)[0].tolist() == [0.0]
    # still a plain decimal only: the separator inside the number is not a number
    assert parse_strict(answer("4", f"0{pad}5")).confidence is None


# -- 0/1 correctness is checked on the given values, not after rounding them to the confidence's dtype ------------
@pytest.mark.parametrize("conf_dtype, y", [(torch.bfloat16, torch.tensor([1.001])),  # bf16(1.001) == 1
                                           (torch.float32, torch.tensor([1 + 1e-12], dtype=torch.float64)),
                                           (torch.float32, torch.tensor([1e-60], dtype=torch.float64))])  # -> 0
def test_a_correctness_that_is_not_0_or_1_is_rejected_whatever_the_confidence_dtype(conf_dtype, y):
    c = torch.tensor([0.5], dtype=conf_dtype)
    with pytest.raises(ValueError, match="correct must hold only 0 and 1"):
        brier_reward(c, y)
    with pytest.raises(ValueError, match="correct must hold only 0 and 1"):
        hindsight_reward(c, y)


def test_exact_0_1_correctness_of_any_dtype_still_scores():
    c = torch.tensor([0.25, 0.75], dtype=torch.float32)
    for y in (torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([True, False]), torch.tensor([1, 0])):
        # -(0.25 - 1)^2 = -0.5625, -(0.75 - 0)^2 = -0.5625; k = 0.3: -0.16875 each
        assert brier_reward(c, y).tolist() == [-0.5625, -0.5625]
        assert hindsight_reward(c, y).tolist() == pytest.approx([-0.16875, -0.16875])


# -- the Brier head's ECE: the parsed confidences binned as the reference compute_ece bins them -------------------
@pytest.mark.parametrize("confs, want", [
    # reference edges np.linspace(0, 1, 11): 0.3 < 0.30000000000000004 -> bin 2, 0.35 -> bin 3 (float32 0.3 is
    # 0.30000001 -> bin 3 with 0.35): (|1 - 0.3| + |0 - 0.35|) / 2 = 0.525 (float32 gave |1 - 0.65| / 2 = 0.175)
    ((0.3, 0.35), 0.525),
    # 0.9 >= the 0.9 edge -> bin 9 with 0.95: |1 - 1.85| / 2 = 0.425 (float32 0.9 is 0.89999998 -> bin 8: 0.525)
    ((0.9, 0.95), 0.425),
    # 0.6 < 0.6000000000000001 -> bin 5, 0.65 -> bin 6: (0.4 + 0.65) / 2 = 0.525 (float32: one bin, 0.125)
    ((0.6, 0.65), 0.525),
])
def test_brier_head_ece_agrees_with_the_reference_and_the_calibration_report(confs, want):
    responses = [answer("4", confs[0]), answer("5", confs[1])]  # gold 4: the first right, the second wrong
    _, m = HonestBrierHead().score([sample(r) for r in responses])
    assert m["ece"] == pytest.approx(want, abs=1e-12)
    report = calibration_report([{"response": r, "gold": "4"} for r in responses])
    assert report["ece"] == pytest.approx(want, abs=1e-12)


# -- bin counts: a numpy integer is an integer --------------------------------------------------------------------
def test_numpy_integer_bin_counts_are_accepted_and_reported_as_int():
    c, y = torch.tensor([0.7, 0.8, 0.6], dtype=torch.float64), torch.tensor([1, 1, 0])
    # one bin: |2 - 2.1| / 3 = 0.0333...
    assert expected_calibration_error(c, y, np.int64(1)) == pytest.approx(0.1 / 3, abs=1e-12)
    bins = reliability_bins([0.25, 0.75], [True, False], np.int32(2))
    assert [b["count"] for b in bins] == [1, 1] and [b["accuracy"] for b in bins] == [1.0, 0.0]
    report = calibration_report([{"response": answer("4", 0.9), "gold": "4"}], bins=np.int64(5))
    assert report["n_bins"] == 5 and type(report["n_bins"]) is int
    assert report["ece"] == pytest.approx(0.1, abs=1e-12)  # one sample: |1 - 0.9|
    json.dumps(report)
    for bad in (True, 10.0, np.float64(10), "10", 0, -1, None):
        with pytest.raises(ValueError, match="bins must be a positive integer"):
            expected_calibration_error(c, y, bad)
        with pytest.raises(ValueError, match="bins must be a positive integer"):
            reliability_bins([0.5], [True], bad)


# -- hindsight audit: a logged share must be a share ---------------------------------------------------------------
KEY, FIRED = "reward/honest_hindsight/nonzero_frac", "reward/honest_hindsight/fired"


@pytest.mark.parametrize("line, field", [
    ('{"step": 2, "%s": NaN}' % KEY, KEY),  # NaN > 0 is False: read as a silent step, and the mean turned NaN
    ('{"step": 2, "%s": Infinity}' % KEY, KEY),
    ('{"step": 2, "%s": -0.5}' % KEY, KEY),
    ('{"step": 2, "%s": 1.5}' % KEY, KEY),
    ('{"step": 2, "%s": true}' % KEY, KEY),  # float(True) = 1.0: read as every sample non-zero
    ('{"step": 2, "%s": "0.5"}' % KEY, KEY),
    ('{"step": 2, "%s": 0.5, "%s": "x"}' % (KEY, FIRED), FIRED),  # was a bare ValueError without file or line
    ('{"step": 2, "%s": 0.5, "%s": NaN}' % (KEY, FIRED), FIRED),
    ('{"step": [2], "%s": 0.5}' % KEY, "step"),  # was a TypeError (unhashable list)
])
def test_hindsight_audit_names_file_and_line_of_a_bad_logged_value(tmp_path, line, field):
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 1, KEY: 0.25, FIRED: 1.0}) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=rf"metrics.jsonl:2: field '{field}'"):
        hindsight_audit(path)


def test_hindsight_audit_still_takes_integer_shares_and_missing_fired_counts(tmp_path):
    path = tmp_path / "metrics.jsonl"
    rows = [{"step": 1, KEY: 0}, {"step": 2, KEY: 1, FIRED: None}, {"step": 3, KEY: 0.5, FIRED: 2}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    a = hindsight_audit(path)
    # non-zero on steps 2 and 3 of 3; fired (a count > 0) only on step 3; mean share (0 + 1 + 0.5) / 3
    assert (a["steps"], a["nonzero_steps"], a["fired_steps"]) == (3, 2, 1)
    assert a["mean_nonzero_frac"] == pytest.approx(0.5)
