"""Round-3 equation vectors for HONEST's rewards (seed 002), re-derived from the seed:

    R_B = -(c - y)^2;  R_H = -k (r - y)^2, k = 0.3;  R_G = |c - y|;  p_i ∝ (|c_i - y_i| + eps)^alpha
    R_h = alpha [(c-y)^2 - (r-y)^2] + beta 1[critique >= 16 chars] - gamma 1[|r-c| < 0.02] - delta 1[partial],
          clipped to +-0.30

Beyond rounds eq20 / eq22: numpy-built and half-precision tensors, -0.0 and subnormal confidences, int 0 / 1
confidences, one ulp either side of every CASR boundary (copy tolerance, clip), 10,000-sample groups and buffers,
confidences given as tuples / generators / numpy arrays, unorderable confidences named, determinism.
"""

import math
import random

import numpy as np
import pytest
import torch

from mmevo.honest.seed_api import CalibrationPrioritizedReplay
from mmevo.honest.selfplay import generator_reward
from mmevo.rewards.honest import brier_reward, casr_reward, hindsight_reward, replay_priorities

nx = math.nextafter


def ref_casr(c, r, y, chars, has_r, alpha=1.0, beta=0.05, gamma=0.05, delta=0.05, clip=0.30, tol=0.02):
    """The seed's four terms (alpha gated on full structure, anti-copy whenever r is present), clipped."""
    crit = chars > 0
    out = 0.0
    if crit and has_r:
        out += alpha * ((c - y) ** 2 - (r - y) ** 2)
    if chars >= 16:
        out += beta
    if has_r and abs(r - c) < tol:
        out -= gamma
    if crit != has_r:
        out -= delta
    return max(-clip, min(clip, out))


def casr1(c, r, y, chars, has_r, **kw):
    T = lambda v: torch.tensor([v], dtype=torch.float64)  # noqa: E731
    return casr_reward(T(c), T(r), torch.tensor([y]), torch.tensor([chars]), torch.tensor([has_r]), **kw).item()


def test_brier_and_hindsight_from_numpy_on_300_vectors_and_half_precision_rounds_once():
    rng = np.random.default_rng(2602)
    for _ in range(300):
        n = int(rng.integers(1, 9))
        c = rng.choice([0.0, -0.0, 1.0, 0.5, 5e-324, rng.uniform()], size=n)
        y = rng.integers(0, 2, size=n)
        k = float(rng.choice([0.3, 0.0, rng.uniform(0, 2)]))
        b = brier_reward(torch.from_numpy(c), torch.from_numpy(y))
        h = hindsight_reward(torch.from_numpy(c), torch.from_numpy(y), np.float64(k))
        assert b.tolist() == pytest.approx([-(ci - yi) ** 2 for ci, yi in zip(c, y)], abs=1e-15)
        assert h.tolist() == pytest.approx([-k * (ci - yi) ** 2 for ci, yi in zip(c, y)], abs=1e-15)
        for dtype in (torch.float16, torch.bfloat16):
            cd = torch.from_numpy(c).to(dtype)
            want = torch.tensor([-(ci - yi) ** 2 for ci, yi in zip(cd.double().tolist(), y)]).to(dtype)
            assert torch.equal(brier_reward(cd, torch.from_numpy(y)), want)


def test_confidence_one_ulp_outside_the_unit_interval_is_named():
    for bad in (nx(1.0, 2.0), nx(-0.0, -1.0)):
        with pytest.raises(ValueError, match="conf"):
            brier_reward(torch.tensor([bad], dtype=torch.float64), torch.tensor([1]))
        with pytest.raises(ValueError, match="retro"):
            hindsight_reward(torch.tensor([bad], dtype=torch.float64), torch.tensor([1]))
    assert brier_reward(torch.tensor([-0.0, 1.0], dtype=torch.float64), torch.tensor([0, 1])).tolist() == [0.0, 0.0]


def test_casr_on_300_random_samples_with_boundary_values():
    rng = random.Random(2603)
    for _ in range(300):
        c = rng.choice([0.0, 1.0, 0.5, rng.random()])
        r = rng.choice([c, c + 0.02, c - 0.02, nx(c + 0.02, 0), 1.0 - c, rng.random()])
        r = min(1.0, max(0.0, r))
        y = rng.randint(0, 1)
        chars = rng.choice([0, 1, 15, 16, 17, 400])
        has_r = rng.random() < 0.7
        w = {k: rng.choice([v, rng.uniform(0, 0.2)]) for k, v in
             (("beta", 0.05), ("gamma", 0.05), ("delta", 0.05))}
        got = casr1(c, r, y, chars, has_r, **w)
        # the copy test reads the decimals written: compare on values whose gap is not within an ulp of 0.02
        if has_r and abs(abs(r - c) - 0.02) < 1e-12:
            continue
        assert got == pytest.approx(ref_casr(c, r, y, chars, has_r, **w), abs=1e-12)


def test_casr_boundaries_one_ulp_either_side():
    # critique length: 15 chars no bonus, 16 the bonus
    assert casr1(0.5, 0.9, 1, 15, True) == pytest.approx(0.25 - 0.01)
    assert casr1(0.5, 0.9, 1, 16, True) == pytest.approx(0.25 - 0.01 + 0.05)
    # the clip: an alpha term of exactly 0.3 stays 0.3; the float above clips back to 0.3, the float below stays
    # (c = 0.5, y = 1 -> (c-y)^2 = 0.25; r = 1 -> 0: delta Brier 0.25; with beta = 0.05: 0.3)
    assert casr1(0.5, 1.0, 1, 16, True, clip=0.3) == pytest.approx(0.3, abs=1e-15)
    assert casr1(0.5, 1.0, 1, 16, True, beta=nx(0.05, 1.0), clip=0.3) == 0.3
    assert casr1(0.5, 1.0, 1, 16, True, beta=0.049, clip=0.3) == pytest.approx(0.299)
    assert casr1(0.0, 1.0, 0, 16, True) == -0.3  # refined away from y: -1 + 0.05, clipped
    # anti-copy: |r - c| one ulp under the tolerance copies, the tolerance itself does not
    assert casr1(0.25, 0.25, 1, 0, True) == pytest.approx(-0.05 - 0.05)  # copied, partial
    base = casr1(0.5, 0.52, 1, 16, True)
    assert base == pytest.approx(0.25 - 0.48 ** 2 + 0.05)
    assert casr1(0.5, 0.52, 1, 16, True, copy_tol=nx(0.02, 1.0)) == pytest.approx(base - 0.05)


def test_generator_reward_from_tuples_generators_and_numpy_on_300_groups():
    rng = random.Random(2604)
    for _ in range(300):
        n = rng.randint(0, 8)
        c = [rng.choice([None, 0, 1, 0.0, -0.0, 1.0, 5e-324, rng.random()]) for _ in range(n)]
        y = [rng.choice([None, True, False, 0, 1]) for _ in range(n)]
        graded = [(ci, yi) for ci, yi in zip(c, y) if ci is not None and yi is not None]
        want = (math.fsum(abs(ci - yi) for ci, yi in graded) / len(graded) if graded else 0.0, len(graded))
        for wrap in (list, tuple, lambda v: (x for x in v)):
            got = generator_reward(wrap(c), wrap(y))
            assert got[1] == want[1] and got[0] == pytest.approx(want[0], abs=1e-15)
            assert type(got[0]) is float
    got = generator_reward(np.array([0.8, 0.2]), np.array([True, False]))
    assert got[0] == pytest.approx(0.2) and got[1] == 2


def test_generator_reward_mean_of_10000_equal_errors_is_that_error():
    # a plain running sum drifted: 10,000 errors of 0.7 averaged to 0.6999999999998807
    assert generator_reward([0.3] * 10_000, [True] * 10_000) == (1.0 - 0.3, 10_000)
    assert generator_reward([0.1] * 10_000, [False] * 10_000) == (0.1, 10_000)


@pytest.mark.parametrize("bad", [complex(0.3, 0.0), torch.tensor([0.3, 0.4]), "80%", float("nan"), nx(1.0, 2.0)])
def test_generator_reward_names_a_confidence_that_is_no_probability(bad):
    # a complex 0.3+0j raised "'<=' not supported ...", a two-element tensor "Boolean value ... ambiguous"
    with pytest.raises(ValueError, match="solver sample 0"):
        generator_reward([bad], [True])


def test_replay_priorities_for_int_and_negative_zero_confidences():
    got = replay_priorities(torch.tensor([0.0, -0.0, 1.0, 0.5], dtype=torch.float64), torch.tensor([0, 0, 0, 1]))
    assert got.tolist() == pytest.approx([1e-3 ** 0.6, 1e-3 ** 0.6, 1.001 ** 0.6, 0.501 ** 0.6], abs=1e-15)


def test_seed_replay_of_10000_prompts_matches_the_reference_and_is_deterministic():
    rng = random.Random(2605)
    buf = CalibrationPrioritizedReplay(capacity=10_000, seed=7)
    conf, corr = [], []
    for i in range(10_000):
        c = rng.choice([0, 1, 0.5, np.float64(rng.random()), rng.random()])
        y = rng.random() < 0.5
        buf.add(f"q{i}", i, "arithmetic", 1 + i % 8, c, y)
        conf.append(float(c))
        corr.append(y)
    prio = [(abs(c - y) + 1e-3) ** 0.6 for c, y in zip(conf, corr)]
    total = math.fsum(prio)
    got = buf.buffer.probabilities().tolist()
    assert got == pytest.approx([p / total for p in prio], rel=1e-12, abs=0)
    assert math.fsum(got) == pytest.approx(1.0, abs=1e-12)
    want_h = -math.fsum((p / total) * math.log(p / total) for p in prio)
    assert buf.entropy_of_priorities() == pytest.approx(want_h, rel=1e-12)
    draws = buf.sample(50)
    for d in draws:
        assert d["priority"] == pytest.approx((abs(d["conf"] - d["correct"]) + 1e-3) ** 0.6, rel=1e-15)
    # the same seed and the same adds draw the same prompts
    again = CalibrationPrioritizedReplay(capacity=10_000, seed=7)
    for e in buf.buffer.entries():
        again.add(e.example.problem, e.example.answer, "arithmetic", e.example.meta["difficulty"], e.confidence,
                  e.correct)
    assert [d["prompt"] for d in again.sample(50)] == [d["prompt"] for d in draws]


@pytest.mark.parametrize("invisible", ["\u200b" * 20, "\u200d\ufeff" * 10, " \u2060 " * 8])
def test_casr_head_pays_no_format_bonus_for_an_invisible_critique(invisible):
    # seed 2.5: beta is for "a non-trivial critique present (>= 16 chars)". 16 zero-width spaces (or joiners, BOMs,
    # word joiners) show nothing: they used to count as a 16+ char critique and earn beta (the reward of a full,
    # well-refined response); now they are no critique, so the refined confidence alone is partial (-delta)
    from types import SimpleNamespace

    from mmevo.honest.protocol import format_response, parse_lenient, parse_strict
    from mmevo.rewards.honest import HonestHindsightHead

    text = format_response("2 + 2 = 4", "4", 0.6, critique=invisible, refined_confidence=0.9)
    for parse in (parse_strict, parse_lenient):
        p = parse(text)
        assert p.critique == "" and p.critique_chars == 0 and "partial_refinement" in p.malformed
    sample = SimpleNamespace(response=text, gold="4", choices=[], aux={})
    rewards, m = HonestHindsightHead(mode="refined").score([sample])
    assert rewards.tolist() == pytest.approx([-0.05], abs=1e-7) and m["critique_ok"] == 0 and m["partial"] == 1
    # visible text padded with invisible characters counts only its visible characters
    padded = format_response("2 + 2 = 4", "4", 0.6, critique="ok" + "\u200b" * 14, refined_confidence=0.9)
    assert parse_strict(padded).critique_chars == 2
    visible = format_response("2 + 2 = 4", "4", 0.6, critique="re-checked 2 + 2", refined_confidence=0.9)
    rewards, m = HonestHindsightHead(mode="refined").score([SimpleNamespace(response=visible, gold="4", choices=[],
                                                                            aux={})])
    assert m["critique_ok"] == 1  # 16 visible characters: the bonus
    assert rewards.tolist() == pytest.approx([0.16 - 0.01 + 0.05], abs=1e-7)  # (0.6-1)^2 - (0.9-1)^2 + beta
