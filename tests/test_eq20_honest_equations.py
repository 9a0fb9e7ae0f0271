"""HONEST calibration rewards (seed 002) against independent plain-Python references.

2.1  R_B = -(c - y)^2;  R_H = -k (r - y)^2, k = 0.3
2.5  R_h = alpha [(c-y)^2 - (r-y)^2] 1[full] + beta 1[critique >= 16 chars] - gamma 1[|r - c| < 0.02]
           - delta 1[critique XOR refined], clipped to +-0.30; 0 with neither critique nor refined confidence
3.1  p_i = (|c_i - y_i| + eps)^alpha / sum_j (|c_j - y_j| + eps)^alpha   (alpha = 0.6, eps = 1e-3)
5.1  R_G(p) = |c_S(p) - y(p)|  (averaged over the solver's graded samples)
8    ECE = sum_b n_b / N |acc_b - conf_b| over equal-width bins"""

import math
import random
from fractions import Fraction

import pytest
import torch

from mmevo.honest.replay import ReplayBuffer
from mmevo.honest.selfplay import generator_reward
from mmevo.data.schema import Example
from mmevo.rewards.honest import (brier_reward, casr_reward, expected_calibration_error, hindsight_reward,
                                  replay_priorities)

TOL = 1e-12


def ref_casr(c, r, y, chars, has_r, alpha=1.0, beta=0.05, gamma=0.05, delta=0.05, clip=0.30, copy_tol=0.02):
    has_crit = chars > 0
    if not has_crit and not has_r:
        return 0.0
    full, partial = has_crit and has_r, has_crit != has_r
    total = 0.0
    if full:
        total += alpha * ((c - y) ** 2 - (r - y) ** 2)
    if chars >= 16:
        total += beta
    # |r - c| of the numbers as written (repr: the shortest decimal of a float64), so 0.3 - 0.25 is 0.05, not the
    # float 0.04999999999999999
    if has_r and abs(Fraction(repr(r)) - Fraction(repr(c))) < Fraction(repr(copy_tol)):
        total -= gamma
    if partial:
        total -= delta
    return max(-clip, min(clip, total))


def rand_conf(rng):
    return rng.choice([0.0, 1.0, 0.5, rng.random(), rng.randint(0, 100) / 100])


def test_brier_and_hindsight_match_the_reference_on_1000_values():
    rng = random.Random(0)
    c = [rand_conf(rng) for _ in range(1000)]
    y = [rng.randint(0, 1) for _ in c]
    k = 0.3
    got_b = brier_reward(torch.tensor(c, dtype=torch.float64), torch.tensor(y)).tolist()
    got_h = hindsight_reward(torch.tensor(c, dtype=torch.float64), torch.tensor(y, dtype=torch.bool), k).tolist()
    assert got_b == pytest.approx([-(ci - yi) ** 2 for ci, yi in zip(c, y)], abs=TOL)
    assert got_h == pytest.approx([-k * (ci - yi) ** 2 for ci, yi in zip(c, y)], abs=TOL)


@pytest.mark.parametrize("fn", [brier_reward, hindsight_reward, replay_priorities])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.01, 1.01])
def test_confidence_outside_0_1_is_named(fn, bad):
    with pytest.raises(ValueError, match="must lie in"):
        fn(torch.tensor([0.5, bad], dtype=torch.float64), torch.tensor([1, 0]))


def test_correctness_of_another_length_or_value_is_named():
    with pytest.raises(ValueError, match="correct has shape"):
        brier_reward(torch.tensor([0.5, 0.5]), torch.tensor([1]))
    with pytest.raises(ValueError, match="correct must hold only 0 and 1"):
        brier_reward(torch.tensor([0.5]), torch.tensor([0.5]))


def test_casr_matches_the_reference_on_1000_random_samples():
    rng = random.Random(1)
    rows = []
    for _ in range(1000):
        c = rand_conf(rng)
        r = rng.choice([rand_conf(rng), c, min(1.0, c + 0.01), max(0.0, c - 0.019), min(1.0, c + 0.05)])
        rows.append((c, r, rng.randint(0, 1), rng.choice([0, 0, 1, 15, 16, 17, 200]), rng.random() < 0.7))
    for weights in ({}, {"alpha": 2.0, "beta": 0.1, "gamma": 0.2, "delta": 0.0, "clip": 1.0, "copy_tol": 0.05}):
        got = casr_reward(torch.tensor([x[0] for x in rows], dtype=torch.float64),
                          torch.tensor([x[1] for x in rows], dtype=torch.float64),
                          torch.tensor([x[2] for x in rows]), torch.tensor([x[3] for x in rows]),
                          torch.tensor([x[4] for x in rows]), **weights).tolist()
        for g, row in zip(got, rows):
            assert abs(g - ref_casr(*row, **weights)) <= TOL, (row, g)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_casr_anti_copy_is_strict_below_the_tolerance(dtype):
    # the seed's anti-copy term is |r - c| < 0.02: a gap of 0.0199995 is a copy (it was not: the test kept a margin
    # of 1e-6 below 0.02), a gap of exactly 0.02 between the written decimals is not
    c = [0.5, 0.5, 0.5, 0.25, 0.07, 0.5]
    r = [0.5199995, 0.52, 0.48, 0.27, 0.09, 0.4800004]
    y = [1, 1, 1, 0, 1, 0]
    got = casr_reward(torch.tensor(c, dtype=dtype), torch.tensor(r, dtype=dtype), torch.tensor(y),
                      torch.full((6,), 20), torch.ones(6, dtype=torch.bool)).tolist()
    copy = [True, False, False, False, False, True]
    want = [0.05 + (ci - yi) ** 2 - (ri - yi) ** 2 - 0.05 * k for ci, ri, yi, k in zip(c, r, y, copy)]
    assert got == pytest.approx(want, abs=TOL if dtype == torch.float64 else 1e-6)


def test_casr_is_zero_without_structure_and_ignores_r_when_absent():
    got = casr_reward(torch.tensor([0.3, 0.3]), torch.tensor([float("nan"), 0.9]), torch.tensor([1, 0]),
                      torch.tensor([0, 0]), torch.tensor([False, False]))
    assert got.tolist() == [0.0, 0.0]


def ref_ece(c, y, bins):
    total = 0.0
    for b in range(bins):
        idx = [i for i, ci in enumerate(c) if min(int(ci * bins), bins - 1) == b]
        if idx:
            total += len(idx) / len(c) * abs(sum(y[i] for i in idx) / len(idx) - sum(c[i] for i in idx) / len(idx))
    return total


def test_ece_matches_the_reference_on_500_random_sets():
    rng = random.Random(2)
    for case in range(500):
        bins = rng.choice([1, 2, 10, 15, 100])
        # away from the bin edges, where float binning conventions differ by design (see ece_bins)
        c = [x for x in (rng.random() for _ in range(rng.randint(1, 40))) if abs(x * bins - round(x * bins)) > 1e-9]
        if not c:
            continue
        y = [rng.randint(0, 1) for _ in c]
        got = expected_calibration_error(torch.tensor(c, dtype=torch.float64), torch.tensor(y), bins)
        assert abs(got - ref_ece(c, y, bins)) <= 1e-12, case
    assert expected_calibration_error(torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([1, 0])) == 0.0


def test_replay_probabilities_match_the_reference_on_500_random_buffers():
    rng = random.Random(3)
    for case in range(500):
        buf = ReplayBuffer(capacity=64)
        entries = []
        for i in range(rng.randint(1, 30)):
            c, y = rand_conf(rng), rng.random() < 0.5
            buf.add(Example(id=str(i), problem=f"q{i}", answer="1", choices=[], images=[],
                            meta={"domain": "math", "difficulty": 1}), c, y)
            entries.append((c, y))
        alpha, eps = rng.choice([0.6, 0.0, 1.0, 3 * rng.random()]), rng.choice([1e-3, 0.1, 1e-6])
        prio = [(abs(c - float(y)) + eps) ** alpha for c, y in entries]
        want = [p / sum(prio) for p in prio]
        assert buf.probabilities(alpha, eps).tolist() == pytest.approx(want, abs=1e-12), case
        got_prio = replay_priorities(torch.tensor([c for c, _ in entries], dtype=torch.float64),
                                     torch.tensor([y for _, y in entries]), alpha, eps).tolist()
        assert got_prio == pytest.approx(prio, rel=1e-12)


def test_generator_reward_is_the_mean_calibration_error_of_the_graded_samples():
    rng = random.Random(4)
    for _ in range(500):
        conf = [None if rng.random() < 0.2 else rand_conf(rng) for _ in range(rng.randint(0, 9))]
        corr = [None if rng.random() < 0.1 else rng.random() < 0.5 for _ in conf]
        graded = [(c, y) for c, y in zip(conf, corr) if c is not None and y is not None]
        want = sum(abs(c - float(y)) for c, y in graded) / len(graded) if graded else 0.0
        got, n = generator_reward(conf, corr)
        assert n == len(graded) and abs(got - want) <= TOL


ONE = (torch.tensor([0.3], dtype=torch.float64), torch.tensor([1]))
CASR_ONE = (torch.tensor([0.3], dtype=torch.float64), torch.tensor([0.3], dtype=torch.float64), torch.tensor([1]),
            torch.tensor([20]), torch.tensor([True]))


@pytest.mark.parametrize("call, name", [
    (lambda v: hindsight_reward(*ONE, k=v), "k"),
    (lambda v: replay_priorities(*ONE, alpha=v), "alpha"),
    (lambda v: replay_priorities(*ONE, eps=v), "eps"),
    (lambda v: casr_reward(*CASR_ONE, alpha=v), "alpha"),
    (lambda v: casr_reward(*CASR_ONE, gamma=v), "gamma"),
    (lambda v: casr_reward(*CASR_ONE, clip=v), "clip"),
    (lambda v: casr_reward(*CASR_ONE, copy_tol=v), "copy_tol"),
])
@pytest.mark.parametrize("bad", [True, None, "0.3", float("nan")])
def test_a_hyperparameter_that_is_no_number_is_named(call, name, bad):
    # True was read as 1 (k = True gave -(0.3 - 1)^2 = -0.49), None failed with a TypeError from a comparison
    with pytest.raises(ValueError, match=name):
        call(bad)


def ref_curriculum(events, start=5, cap=8, window=20, promote=0.75, demote=0.20, min_episodes=20, cooldown=10):
    """Seed 4.1 / 4.3 (+ section 9's 10-episode cool-down): the ceiling after each (difficulty, correct) episode."""
    ceiling, since, windows, out = start, cooldown, {}, []
    for difficulty, correct in events:
        windows[difficulty] = (windows.get(difficulty, []) + [int(correct)])[-window:]
        since += 1
        w = windows.get(ceiling, [])
        if since >= cooldown and len(w) >= min_episodes:
            acc = sum(w) / len(w)
            if acc > promote and ceiling < cap:  # "acc > tau", strictly
                ceiling, since = ceiling + 1, 0
                windows[ceiling] = []  # only episodes at the new ceiling count
            elif acc < demote and ceiling > start:  # "drops below demote_threshold", at a mutated tier only
                ceiling, since = ceiling - 1, 0
                windows[ceiling] = []
        out.append(ceiling)
    return out


def test_curriculum_ceiling_follows_the_promotion_rules_on_500_random_runs():
    from mmevo.honest.curriculum import DifficultyController

    rng = random.Random(5)
    for case in range(500):
        rules = rng.choice([{}, {"min_episodes": 5, "window": 8, "cooldown": 3}, {"promote": 0.5, "demote": 0.4,
                                                                                  "min_episodes": 4, "window": 4,
                                                                                  "cooldown": 0}])
        ctl = DifficultyController(["math"], **rules)
        skill = rng.random()
        events, got = [], []
        for _ in range(rng.randint(1, 150)):
            ceiling = ctl.ceiling("math")
            d = ceiling if rng.random() < 0.8 else rng.randint(1, ceiling)
            y = rng.random() < (skill if rng.random() < 0.9 else 1 - skill)
            events.append((d, y))
            ctl.record("math", d, y)
            got.append(ctl.ceiling("math"))
        assert got == ref_curriculum(events, **rules), case


def test_curriculum_fifteen_of_twenty_does_not_promote_sixteen_does():
    from mmevo.honest.curriculum import DifficultyController

    for hits, want in ((15, 5), (16, 6)):
        ctl = DifficultyController(["math"])
        for i in range(20):
            ctl.record("math", 5, i < hits)
        assert ctl.ceiling("math") == want


@pytest.mark.parametrize("kwargs", [{"alpha": True}, {"eps": True}, {"alpha": "0.6"}, {"alpha": float("inf")}])
def test_replay_buffer_names_an_alpha_or_eps_that_is_no_number(kwargs):
    # True was read as 1 by float() before the range check; "0.6" as 0.6
    with pytest.raises(ValueError, match="replay alpha and eps"):
        ReplayBuffer(capacity=4, **kwargs)
    buf = ReplayBuffer(capacity=4)
    buf.add(Example(id="0", problem="q", answer="1", choices=[], images=[], meta={"domain": "math", "difficulty": 1}),
            0.5, True)
    with pytest.raises(ValueError, match="replay alpha and eps"):
        buf.probabilities(**kwargs)
