"""HONEST rewards (mmevo.rewards.honest): each function against numbers worked out by hand from the seed's formulas,
dtype / no-mutation contracts, and the three heads' rewards and bad-input counts."""

import math

import numpy as np
import pytest
import torch

from mmevo.rewards.heads import HEADS, RewardMixer, ScoredSample
from mmevo.rewards.honest import (HonestBrierHead, HonestFormatHead, HonestHindsightHead, brier_reward, casr_reward,
                                  copied_refinement, expected_calibration_error, hindsight_reward,
                                  replay_priorities)

NAN = float("nan")


def t(values, dtype=torch.float64):
    return torch.tensor(values, dtype=dtype)


# -- brier ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_brier_hand_values(dtype):
    conf = t([0.9, 0.9, 0.2, 0.0, 1.0, 0.5], dtype)
    correct = torch.tensor([True, False, True, False, False, True])
    # -(c - y)^2: -(0.1)^2, -(0.9)^2, -(0.8)^2, 0, -(1)^2, -(0.5)^2
    want = [-0.01, -0.81, -0.64, 0.0, -1.0, -0.25]
    got = brier_reward(conf, correct)
    assert got.dtype == dtype
    assert got.tolist() == pytest.approx(want, abs=1e-6)
    assert brier_reward(conf, correct.long()).tolist() == pytest.approx(want, abs=1e-6)  # 0/1 ints too


# -- hindsight -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_hindsight_hand_values_default_k(dtype):
    retro = t([0.8, 0.8, 0.0, 1.0], dtype)
    correct = t([1, 0, 1, 1])
    # -0.3 (r - y)^2: -0.3*0.04, -0.3*0.64, -0.3*1, 0
    got = hindsight_reward(retro, correct)
    assert got.dtype == dtype
    assert got.tolist() == pytest.approx([-0.012, -0.192, -0.3, 0.0], abs=1e-6)


def test_hindsight_k_scales():
    # -0.5 * (0.8 - 0)^2 = -0.32; k = 0 switches it off
    assert hindsight_reward(t([0.8]), t([0]), k=0.5).tolist() == pytest.approx([-0.32])
    assert hindsight_reward(t([0.8]), t([0]), k=0.0).tolist() == [0.0]
    with pytest.raises(ValueError, match="k must be"):
        hindsight_reward(t([0.8]), t([0]), k=-0.3)


# -- CASR ----------------------------------------------------------------------------------------------------------
# columns: conf c, refined r, y, critique chars, has_refined, expected (defaults alpha 1, beta/gamma/delta 0.05,
# clip 0.30, copy_tol 0.02)
CASR_CASES = [
    # full; (0.9-0)^2 - (0.6-0)^2 = 0.81 - 0.36 = 0.45, + beta = 0.50 -> clipped to 0.30
    (0.9, 0.6, 0, 20, True, 0.30),
    # full; (0.5-1)^2 - (0.6-1)^2 = 0.25 - 0.16 = 0.09, + beta = 0.14
    (0.5, 0.6, 1, 20, True, 0.14),
    # full, copy: 0.25 - 0.49^2 = 0.25 - 0.2401 = 0.0099, + beta - gamma (|0.51 - 0.5| = 0.01 < 0.02) = 0.0099
    (0.5, 0.51, 1, 20, True, 0.0099),
    # full, short critique (5 < 16): 0.09 - 0.49 = -0.40 -> clipped to -0.30
    (0.3, 0.7, 0, 5, True, -0.30),
    # full, critique of exactly 16 chars earns beta: 0.16 - 0.36 = -0.20, + 0.05 = -0.15
    (0.6, 0.4, 1, 16, True, -0.15),
    # full, critique of 15 chars does not: -0.20
    (0.6, 0.4, 1, 15, True, -0.20),
    # full, |r - c| = 0.02 is not < copy_tol: 0.25 - 0.48^2 = 0.25 - 0.2304 = 0.0196, + beta = 0.0696
    (0.5, 0.52, 1, 20, True, 0.0696),
    # full, exact copy r = c: 0 + beta - gamma = 0
    (0.8, 0.8, 1, 20, True, 0.0),
    # partial, critique only (10 chars, no bonus): -delta = -0.05 (refined is NaN: ignored)
    (0.7, NAN, 1, 10, False, -0.05),
    # partial, long critique only: beta - delta = 0
    (0.7, NAN, 0, 30, False, 0.0),
    # partial, refined only: -delta = -0.05
    (0.7, 0.9, 1, 0, True, -0.05),
    # neither: 0, whatever conf (NaN here) and refined (NaN)
    (NAN, NAN, 1, 0, False, 0.0),
]


def _casr_inputs(cases, dtype=torch.float64):
    c, r, y, chars, has, want = zip(*cases)
    return (t(c, dtype), t(r, dtype), t(y, dtype), torch.tensor(chars), torch.tensor(has)), list(want)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_casr_hand_values(dtype):
    args, want = _casr_inputs(CASR_CASES, dtype)  # incl. |0.52 - 0.5| = 0.02, 0.01999998 in float32: not a copy
    got = casr_reward(*args)
    assert got.dtype == dtype
    assert not torch.isnan(got).any()
    assert got.tolist() == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_casr_copy_tol_is_strict_on_two_decimal_confidences(dtype):
    # the seed's |r - c| < 0.02 on every two-decimal pair: r = c + 0.02 is never a copy, r = c + 0.01 always is
    # (y = 1, 20-char critique: reward 0.05 + (c - 1)^2 - (r - 1)^2, minus gamma 0.05 for a copy, all below the clip)
    c = [i / 100 for i in range(99)]  # 0.00 .. 0.98
    for step, gamma in ((0.02, 0.0), (0.01, 0.05)):
        r = [round(x + step, 2) for x in c]
        args = (t(c, dtype), t(r, dtype), t([1] * 99), torch.full((99,), 20), torch.ones(99, dtype=torch.bool))
        want = [0.05 + (x - 1) ** 2 - (y - 1) ** 2 - gamma for x, y in zip(c, r)]
        assert casr_reward(*args).tolist() == pytest.approx(want, abs=1e-6)
        assert copied_refinement(args[0], args[1], 0.02).sum().item() == (99 if gamma else 0)
    # the report's case: c = 0.50, r = 0.52, y = 1 -> 0.25 - 0.2304 + 0.05 = 0.0696 (was 0.0196 in float32)
    one = (t([0.5], dtype), t([0.52], dtype), t([1]), torch.tensor([20]), torch.tensor([True]))
    assert casr_reward(*one).item() == pytest.approx(0.0696, abs=1e-6)


def test_casr_copy_boundary_in_the_head_reward_and_metric():
    crit = "checked 2+2 again ok"  # 20 characters
    responses = [R(answer="4", conf=f"{c:.2f}", critique=crit, refined_confidence=f"{c + 0.02:.2f}")
                 for c in (0.09, 0.10, 0.11, 0.14, 0.50)]  # pairs that float32 used to round below 0.02
    r, m = HonestHindsightHead(mode="refined").score(samples_of(responses))
    want = [0.05 + (c - 1) ** 2 - (c + 0.02 - 1) ** 2 for c in (0.09, 0.10, 0.11, 0.14, 0.50)]
    assert r.tolist() == pytest.approx(want, abs=1e-6)  # e.g. 0.0696 for (0.50, 0.52)
    assert m["copy"] == 0 and m["full"] == 5
    copies = [R(answer="4", conf="0.50", critique=crit, refined_confidence="0.51")]
    r, m = HonestHindsightHead(mode="refined").score(samples_of(copies))
    assert r.tolist() == pytest.approx([0.25 - 0.49 ** 2], abs=1e-6) and m["copy"] == 1  # 0.0099 + beta - gamma


def test_casr_weights_and_clip_are_used():
    args, _ = _casr_inputs([(0.5, 0.6, 1, 20, True, None), (0.9, 0.6, 0, 20, True, None),
                            (0.7, NAN, 1, 10, False, None), (0.8, 0.8, 1, 20, True, None)])
    got = casr_reward(*args, alpha=2.0, beta=0.1, gamma=0.2, delta=0.3, clip=1.0)
    # 2*0.09 + 0.1 = 0.28;  2*0.45 + 0.1 = 1.0 (clip 1.0 leaves it);  -0.3;  0 + 0.1 - 0.2 = -0.1
    assert got.tolist() == pytest.approx([0.28, 1.0, -0.3, -0.1], abs=1e-9)
    got = casr_reward(*args, copy_tol=0.0)  # nothing counts as a copy: the last becomes 0 + beta = 0.05
    assert got[3].item() == pytest.approx(0.05)


def test_casr_rejects_bad_inputs():
    args, _ = _casr_inputs([(0.5, 0.6, 1, 20, True, None)])
    c, r, y, chars, has = args
    with pytest.raises(ValueError, match="refined"):
        casr_reward(c, t([1.2]), y, chars, has)
    with pytest.raises(ValueError, match="conf"):
        casr_reward(t([-0.1]), r, y, chars, has)
    with pytest.raises(ValueError, match="bool"):
        casr_reward(c, r, y, chars, has.long())
    with pytest.raises(ValueError, match="critique_chars"):
        casr_reward(c, r, y, torch.tensor([-1]), has)
    with pytest.raises(ValueError, match="shape"):
        casr_reward(c, r, y, torch.tensor([1, 2]), has)


# -- ECE -----------------------------------------------------------------------------------------------------------
def test_ece_hand_value():
    conf = t([0.05, 0.15, 0.15, 0.95, 1.0, 0.7])
    correct = t([0, 0, 1, 1, 1, 0])
    # bin 0: {0.05 | 0}: |0 - 0.05| * 1/6;  bin 1: {0.15, 0.15 | 0, 1}: |0.5 - 0.15| * 2/6
    # bin 7: {0.7 | 0}: 0.7 * 1/6;         bin 9: {0.95, 1.0 | 1, 1}: |1 - 0.975| * 2/6
    # (0.05 + 0.70 + 0.70 + 0.05) / 6 = 0.25; the six empty bins add 0
    assert expected_calibration_error(conf, correct) == pytest.approx(0.25, abs=1e-12)


def test_ece_puts_one_in_the_last_bin():
    # last bin {1.0 | 0, 0.95 | 1}: |1 - 1.95| = 0.95; bin 0 {0.05 | 0}: 0.05 -> (0.95 + 0.05) / 3
    # (1.0 in bin 0 would give |0 - 1.05| + |1 - 0.95| = 1.10 -> 0.3667)
    assert expected_calibration_error(t([1.0, 0.95, 0.05]), t([0, 1, 0])) == pytest.approx(1.0 / 3, abs=1e-12)


def test_ece_interior_edges_are_the_reference_linspace_edges():
    # the seed's reference compute_ece bins against np.linspace(0, 1, 11): its 0.7 edge is 0.7000000000000001, so
    # c = 0.7 and 0.65 share bin 6: |1 - 1.35| / 2 = 0.175 (decimal edges put 0.7 in bin 7: 0.95 / 2 = 0.475)
    for dtype in (torch.float32, torch.float64):
        assert expected_calibration_error(t([0.7, 0.65], dtype), t([1, 0], dtype)) == pytest.approx(0.175, abs=1e-6)
    # 0.4 and 0.8 are linspace edges exactly: they start their bins. 0.8 in bin 8, 0.75 in bin 7: (0.8 + 0.25) / 2
    assert expected_calibration_error(t([0.8, 0.75], torch.float64), t([0, 1], torch.float64)) == pytest.approx(0.525)
    from mmevo.honest.calibration import reliability_bins  # the report's bins are the same

    assert [b["count"] for b in reliability_bins([0.7, 0.65, 0.8, 0.3], [1, 0, 0, 1])] == [0, 0, 1, 0, 0, 0, 2, 0, 1, 0]


def _reference_ece(conf, correct, n_bins=10):
    """The seed's reference compute_ece, restated: float64, np.linspace edges, lo <= c < hi, last bin closed."""
    c, o = np.asarray(conf, dtype=float), np.asarray(correct, dtype=float)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    ece = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (c >= lo) & ((c <= hi) if hi == 1.0 else (c < hi))
        if m.sum():
            ece += (m.sum() / len(c)) * abs(o[m].mean() - c[m].mean())
    return float(ece)


@pytest.mark.parametrize("bins", [1, 3, 7, 10, 15])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ece_matches_the_reference_on_every_two_decimal_confidence(bins, dtype):
    # "0.XX" confidences (what the protocol asks for): every one of them, alone with y = 1 and y = 0 and all together
    grid = [k / 100 for k in range(101)]
    rng = np.random.default_rng(0)
    ys = rng.integers(0, 2, len(grid)).tolist()
    conf = t(grid, dtype)
    as_read = conf.double().tolist()  # what the reference sees of a float32 confidence
    assert expected_calibration_error(conf, t(ys, dtype), bins) == pytest.approx(_reference_ece(as_read, ys, bins),
                                                                                abs=1e-12)
    for c in as_read:
        for y in (0, 1):
            pair = t([c, 0.5], torch.float64)
            assert expected_calibration_error(pair, t([y, 1], torch.float64), bins) == pytest.approx(
                _reference_ece([c, 0.5], [y, 1], bins), abs=1e-12), (c, y)


def test_ece_bins_argument_and_errors():
    conf, correct = t([0.05, 0.15, 0.15, 0.95, 1.0, 0.7]), t([0, 0, 1, 1, 1, 0])
    # one bin: |mean y - mean c| = |3/6 - 3.0/6| = 0
    assert expected_calibration_error(conf, correct, bins=1) == pytest.approx(0.0, abs=1e-12)
    # two bins [0, .5) {0.05, 0.15, 0.15 | 0, 0, 1}: |1 - 0.35| = 0.65; [.5, 1] {0.95, 1.0, 0.7 | 1, 1, 0}:
    # |2 - 2.65| = 0.65 -> 1.3 / 6
    assert expected_calibration_error(conf, correct, bins=2) == pytest.approx(1.3 / 6, abs=1e-12)
    assert isinstance(expected_calibration_error(conf, correct), float)
    with pytest.raises(ValueError):
        expected_calibration_error(t([]), t([]))
    with pytest.raises(ValueError):
        expected_calibration_error(conf, correct, bins=0)
    with pytest.raises(ValueError):
        expected_calibration_error(t([1.5]), t([1]))


# -- replay priorities ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_replay_priorities_hand_values(dtype):
    conf, correct = t([1.0, 0.0, 0.5, 0.3], dtype), t([0, 0, 1, 1], dtype)
    # (|c - y| + 0.001)^0.6: 1.001^0.6, 0.001^0.6 = 10^-1.8, 0.501^0.6, 0.701^0.6
    want = [1.00059988, 0.01584893, 0.66054534, 0.80803619]
    got = replay_priorities(conf, correct)
    assert got.dtype == dtype
    assert got.tolist() == pytest.approx(want, rel=1e-6)
    # alpha 1, eps 0: |c - y| itself
    assert replay_priorities(conf, correct, alpha=1.0, eps=0.0).tolist() == pytest.approx([1.0, 0.0, 0.5, 0.7])


# -- shared contracts ----------------------------------------------------------------------------------------------
def test_inputs_are_not_mutated_and_outputs_detached():
    conf = t([0.9, 0.2, 0.5]).requires_grad_()
    correct = t([1, 0, 1])
    refined = t([0.95, NAN, 0.5])
    chars = torch.tensor([20, 3, 0])
    has = torch.tensor([True, False, True])
    before = [x.detach().clone() for x in (conf, correct, refined, chars, has)]
    outs = [brier_reward(conf, correct), hindsight_reward(conf, correct), replay_priorities(conf, correct),
            casr_reward(conf, refined, correct, chars, has)]
    expected_calibration_error(conf, correct)
    for x, b in zip((conf, correct, refined, chars, has), before):
        assert torch.equal(x.detach(), b) or torch.allclose(x.detach(), b, equal_nan=True)
    assert all(not o.requires_grad for o in outs)


@pytest.mark.parametrize("fn", [brier_reward, hindsight_reward, replay_priorities])
def test_bad_tensors_are_rejected(fn):
    with pytest.raises(ValueError, match="floating"):
        fn(torch.tensor([1, 0]), t([1, 0]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fn(t([1.2, 0.5]), t([1, 0]))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fn(t([NAN, 0.5]), t([1, 0]))
    with pytest.raises(ValueError, match="0 and 1"):
        fn(t([0.2, 0.5]), t([2, 0]))
    with pytest.raises(ValueError, match="shape"):
        fn(t([0.2, 0.5]), t([1, 0, 1]))


# -- heads ---------------------------------------------------------------------------------------------------------
def R(reasoning="2 + 2 = 4", answer=None, conf=None, abstain=False, tail="", head="", **slots):
    body = f"<reasoning>{reasoning}</reasoning>"
    body += "<abstain/>" if abstain else ""
    body += f"<answer>{answer}</answer>" if answer is not None else ""
    body += f"<confidence>{conf}</confidence>" if conf is not None else ""
    for name in ("hindsight", "critique", "refined_confidence"):
        if name in slots:
            body += f"<{name}>{slots[name]}</{name}>"
    return head + body + tail


def samples_of(responses, gold="4"):
    return [ScoredSample(response=r, group_id=0, gold=gold, choices=None) for r in responses]


BRIER_BATCH = [
    (R(answer="4", conf="0.9"), -0.01, None),  # right, -(0.9 - 1)^2
    (R(answer="5", conf="0.3"), -0.09, None),  # wrong, -(0.3 - 0)^2
    (R(answer="4.0", conf="1"), 0.0, None),  # right by the core's equivalence, -(1 - 1)^2
    (R(answer="4"), -1.0, "no_confidence"),
    (R(answer="4", conf="high"), -1.0, "non_numeric_confidence"),
    (R(answer="4", conf="1.2"), -1.0, "confidence_out_of_range"),
    (R(answer="4", conf="-0.1"), -1.0, "confidence_out_of_range"),
    (R(conf="0.5"), -1.0, "no_answer"),
    (R(answer="  ", conf="0.5"), -1.0, "empty_answer"),
    (R(abstain=True), -0.25, None),
    (R(answer="4", conf="0.9", head="Sure! "), -1.0, "extra_text"),
    ("", -1.0, "empty"),
]


def test_brier_head_rewards_and_bad_input_counts():
    responses, want, _ = zip(*BRIER_BATCH)
    r, m = HonestBrierHead().score(samples_of(responses))
    assert r.tolist() == pytest.approx(list(want), abs=1e-6)
    assert m["graded"] == 3 and m["abstain"] == 1 and m["malformed"] == 8 and m["no_gold"] == 0
    assert m["bad/no_confidence"] == 1 and m["bad/non_numeric_confidence"] == 1
    assert m["bad/confidence_out_of_range"] == 2 and m["bad/no_answer"] == 1 and m["bad/empty_answer"] == 1
    assert m["bad/extra_text"] == 1 and m["bad/empty"] == 1
    # graded: c = (0.9, 0.3, 1.0), y = (1, 0, 1): accuracy 2/3, mean c 2.2/3, Brier (0.01 + 0.09 + 0) / 3,
    # ECE: bins 9 {0.9|1}, 3 {0.3|0}, 9 {1.0|1} -> bin 9 |2 - 1.9| + bin 3 |0 - 0.3| = 0.4 -> / 3
    assert m["accuracy"] == pytest.approx(2 / 3)
    assert m["mean_confidence"] == pytest.approx(2.2 / 3)
    assert m["brier"] == pytest.approx(0.1 / 3)
    assert m["ece"] == pytest.approx(0.4 / 3, abs=1e-6)


def test_brier_head_penalties_are_arguments():
    r, _ = HonestBrierHead(malformed_penalty=-2.0, abstain_reward=-0.5).score(
        samples_of([R(answer="4"), R(abstain=True), R(answer="4", conf="0.9")]))
    assert r.tolist() == pytest.approx([-2.0, -0.5, -0.01])


def test_brier_head_gold():
    with pytest.raises(ValueError, match="gold"):
        HonestBrierHead().score(samples_of([R(answer="4", conf="0.9")], gold=None))
    s = samples_of([R(answer="4", conf="0.9"), R(answer="4", conf="0.9")])
    s[1].gold = None  # a graded sample without gold: 0 and counted
    r, m = HonestBrierHead().score(s)
    assert r.tolist() == pytest.approx([-0.01, 0.0]) and m["no_gold"] == 1 and m["graded"] == 1


def test_format_head():
    responses = [b[0] for b in BRIER_BATCH]
    r, m = HonestFormatHead().score(samples_of(responses))
    # graded answers and the clean abstain are well formed (0); the eight others get the floor
    assert r.tolist() == [0.0, 0.0, 0.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 0.0, -1.0, -1.0]
    assert m["malformed"] == 8 and m["abstain"] == 1 and m["well_formed_frac"] == pytest.approx(4 / 12)
    # the optional slots do not count: a bad hindsight value leaves the format intact
    r, _ = HonestFormatHead(malformed_penalty=-0.5).score(samples_of([R(answer="4", conf="0.9", hindsight="x"),
                                                                      R(answer="4")]))
    assert r.tolist() == [0.0, -0.5]


def test_hindsight_head_legacy():
    batch = [
        (R(answer="4", conf="0.9", hindsight="0.5"), -0.075),  # -0.3 (0.5 - 1)^2
        (R(answer="5", conf="0.9", hindsight="0.2"), -0.012),  # -0.3 (0.2 - 0)^2
        (R(abstain=True, hindsight="0.9"), 0.0),  # no real answer: silent
        (R(answer="4", hindsight="0"), -0.3),  # a real answer (its missing confidence is Brier's business)
        (R(answer="4", conf="0.9", hindsight="maybe"), 0.0),  # non-numeric
        (R(answer="4", conf="0.9", hindsight="1.3"), 0.0),  # out of range
        (R(answer="4", conf="0.9"), 0.0),  # no hindsight slot
        (R(answer="4", conf="0.9", hindsight="0.5", tail=" done"), 0.0),  # rejected by the strict parser
    ]
    responses, want = zip(*batch)
    r, m = HonestHindsightHead().score(samples_of(responses))
    assert r.tolist() == pytest.approx(list(want), abs=1e-6)
    assert m["fired"] == 3 and m["skipped_no_answer"] == 1
    assert m["bad/non_numeric_hindsight"] == 1 and m["bad/hindsight_out_of_range"] == 1
    assert m["nonzero_frac"] == pytest.approx(3 / 8)
    r, _ = HonestHindsightHead(k=0.5).score(samples_of(responses[:1]))
    assert r.tolist() == pytest.approx([-0.125])  # -0.5 (0.5 - 1)^2


def test_hindsight_head_refined_casr():
    crit = "checked 2+2 again ok"  # 20 characters
    assert len(crit) == 20
    batch = [
        (R(answer="4", conf="0.5", critique=crit, refined_confidence="0.9"), 0.29),  # 0.25 - 0.01 + 0.05
        (R(answer="5", conf="0.9", critique=crit, refined_confidence="0.9"), 0.0),  # copy: 0 + 0.05 - 0.05
        (R(answer="4", conf="0.5", critique="too short"), -0.05),  # partial, 9 chars: -delta
        (R(answer="4", conf="0.5", refined_confidence="0.4"), -0.05),  # partial: -delta
        (R(answer="4", conf="0.5", critique=crit, refined_confidence="n/a"), 0.0),  # invalid r: partial, beta-delta
        (R(abstain=True, critique=crit, refined_confidence="0.3"), 0.0),  # no real answer: silent
        (R(answer="4", conf="0.5"), 0.0),  # no refinement: silent
        (R(answer="4", conf="lots", critique=crit, refined_confidence="0.9"), 0.0),  # no valid c: silent
        (R(answer="5", conf="0.8", critique=crit, refined_confidence="0.2"), 0.30),  # 0.64 - 0.04 + 0.05 -> clip
        (R(answer="4", conf="0.5", critique="", refined_confidence="0.7"), -0.05),  # empty critique = absent
    ]
    responses, want = zip(*batch)
    r, m = HonestHindsightHead(mode="refined").score(samples_of(responses))
    assert r.tolist() == pytest.approx(list(want), abs=1e-6)
    assert m["fired"] == 7 and m["full"] == 3 and m["partial"] == 4 and m["copy"] == 1
    assert m["critique_ok"] == 4 and m["clipped"] == 1 and m["skipped_no_answer"] == 2
    assert m["bad/non_numeric_refined_confidence"] == 1 and m["bad/partial_refinement"] == 4
    # legacy mode ignores the refinement slots entirely
    r, _ = HonestHindsightHead(mode="legacy").score(samples_of(responses))
    assert r.tolist() == [0.0] * len(batch)


def test_hindsight_head_arguments():
    with pytest.raises(ValueError, match="mode"):
        HonestHindsightHead(mode="retro")
    head = HonestHindsightHead(mode="refined", alpha=2.0, clip=1.0, beta=0.0, gamma=0.0)
    r, _ = head.score(samples_of([R(answer="4", conf="0.5", critique="checked 2+2 again ok",
                                    refined_confidence="0.9")]))
    assert r.tolist() == pytest.approx([0.48])  # 2 * (0.25 - 0.01)


def test_heads_are_registered_and_mix_with_weights():
    assert {"honest_brier", "honest_hindsight", "honest_format"} <= set(HEADS)
    mixer = RewardMixer({"honest_brier": 1.0, "honest_hindsight": 0.5, "honest_format": 0.1},
                        {"honest_hindsight": {"mode": "legacy", "k": 0.3}})
    s = samples_of([R(answer="4", conf="0.9", hindsight="0.5"), R(answer="4")])
    total, m = mixer(s)
    # 1.0 * -0.01 + 0.5 * -0.075 + 0.1 * 0 = -0.0475;  1.0 * -1 + 0.5 * 0 + 0.1 * -1 = -1.1
    assert total.tolist() == pytest.approx([-0.0475, -1.1], abs=1e-6)
    assert m["reward/honest_brier/bad/no_confidence"] == 1.0
    assert m["reward/honest_hindsight/fired"] == 1.0 and m["reward/honest_format/malformed"] == 1.0
    assert all(math.isfinite(v) for v in m.values())


def test_heads_never_crash_on_odd_responses():
    odd = ["", "   ", "<answer>", "</answer></answer>", "<reasoning><reasoning></reasoning>", "<abstain/>" * 3,
           "<confidence>0.5</confidence>" * 2, "\x00\uffff<answer>4</answer>", "<answer>4</answer>" + "x" * 10000]
    for head in (HonestBrierHead(), HonestHindsightHead(), HonestHindsightHead(mode="refined"), HonestFormatHead()):
        r, m = head.score(samples_of(odd))
        assert r.shape == (len(odd),) and torch.isfinite(r).all()
        assert all(math.isfinite(v) for v in m.values())
        r, m = head.score([])  # an empty batch (a rank with nothing to score)
        assert r.shape == (0,) and all(math.isfinite(v) for v in m.values())
