"""Degenerate and edge-case equation vectors for the seed formulas (GRPO core, CSRS, MM-UPT, MM-Zero, HONEST, Prism).

Every expected value is worked out here in plain Python from the seed's equation (or the documented limit / refusal),
never by calling mmevo: groups of one and two, all-equal rewards, no-answer groups, ties, confidences at 0 and 1,
empty batches, length-0 responses, half-precision / integer / strided inputs, NaN and inf, and the seeds' own worked
examples. A bf16 / fp16 / float32 input to a formula that returns its dtype must give the correctly rounded value of
the equation at the input's value (one rounding, of the result), not one an ulp off from rounding every step.
"""

import math

import pytest
import torch

from mmevo.csrs.retrace import anchor_position, anchor_prefixes
from mmevo.grpo.algos import (agg_loss, entropy_from_logits, group_advantages, kl_penalty, logprobs_from_logits,
                              masked_mean, policy_loss)
from mmevo.honest.replay import ReplayBuffer
from mmevo.honest.tasks import generate_task
from mmevo.rewards.honest import (brier_reward, casr_reward, expected_calibration_error, hindsight_reward,
                                  replay_priorities)
from mmevo.rewards.majority import majority_vote_rewards
from mmevo.rewards.mmzero import (coder_reward, diversity_adjustment, easy_accuracy, easy_hard_penalty, modal_share,
                                  proposal_rewards, type_penalties)
from mmevo.rewards.prism import coverage_rewards, diversity_stats, ema_counts, zpd
from mmevo.rewards.sfr import softened_frequency_rewards

HALF = (torch.bfloat16, torch.float16)
FLOATS = HALF + (torch.float32, torch.float64)


def rounded(values, dtype):
    """The exact (float64) values rounded once to ``dtype``, as plain floats."""
    return torch.tensor(values, dtype=torch.float64).to(dtype).double().tolist()


def as_values(t):
    """The values a tensor really holds (a bf16 0.3 is 0.30078125), as plain floats."""
    return t.double().tolist()


# --------------------------------------------------------------------------------------------------- GRPO core
def ref_group_advantages(r, ids, eps=1e-6):
    """(r_i - mu_g) / (sigma_g + eps), Bessel-corrected sigma_g; a sample equal to its group's mean gets 0."""
    groups = {}
    for x, g in zip(r, ids):
        groups.setdefault(g, []).append(x)
    stats = {}
    for g, grp in groups.items():
        mu = math.fsum(grp) / len(grp)
        sd = math.sqrt(math.fsum((x - mu) ** 2 for x in grp) / (len(grp) - 1)) if len(grp) > 1 else 0.0
        stats[g] = (mu, sd)
    return [0.0 if x == stats[g][0] else (x - stats[g][0]) / (stats[g][1] + eps) for x, g in zip(r, ids)]


@pytest.mark.parametrize("case", ["single", "pair", "all_equal", "int", "bool", "bf16", "fp16", "long", "strided",
                                  "empty", "nan", "inf"])
def test_group_advantages_edges(case):
    r, ids, dtype = [0.3, 0.7, 0.1, 0.1, 0.1, 5.0], [0, 1, 1, 2, 2, 3], torch.float32
    if case == "single":
        r, ids = [4.0], [7]  # a lone sample has nobody to be compared with: 0 (never NaN)
    elif case == "pair":
        r, ids = [1.0, 0.0], [3, 3]  # +-(1/2) / (1/sqrt 2 + eps) = +-0.7071
    elif case == "all_equal":
        r, ids = [0.1] * 5, [1] * 5  # std 0: every advantage exactly 0
    elif case in ("int", "bool"):
        r, ids, dtype = [1, 0, 0, 1, 1], [0, 0, 0, 0, 1], (torch.int64 if case == "int" else torch.bool)
    elif case in ("bf16", "fp16"):
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[case]
    elif case == "long":
        r, ids = [float(i % 3) for i in range(30000)], [0] * 30000
    if case in ("nan", "inf"):
        bad = torch.tensor([0.0, float(case), 1.0])
        with pytest.raises(ValueError, match=r"rewards must be finite.*\[1\]"):
            group_advantages(bad, torch.tensor([0, 0, 0]))
        return
    if case == "empty":
        out = group_advantages(torch.zeros(0), torch.zeros(0, dtype=torch.long))
        assert out.shape == (0,) and out.dtype == torch.float32
        return
    rt = torch.tensor(r).to(dtype)
    it = torch.tensor(ids)
    if case == "strided":  # every other element of a [2, 6] tensor's transpose: non-contiguous rewards and ids
        rt = torch.stack([rt, torch.full_like(rt, 9.0)], dim=1)[:, 0]  # stride 2
        it = torch.stack([it, it], dim=1)[:, 0]
        assert not rt.is_contiguous()
    want = ref_group_advantages([float(x) for x in as_values(rt)], ids)
    got = group_advantages(rt, it)
    assert got.dtype == torch.float32
    assert got.tolist() == pytest.approx(want, abs=1e-6)
    if case in ("single", "all_equal"):
        assert got.tolist() == [0.0] * len(r)


def k3(d):
    """Schulman's k3 at d = log pi_ref - log pi, exactly: e^d - d - 1 = expm1(d) - d, clamped as documented."""
    d = min(max(d, -20.0), 20.0)
    return min(max(math.expm1(d) - d, -10.0), 10.0)


@pytest.mark.parametrize("dtype", FLOATS)
def test_kl_penalty_small_differences_in_every_dtype(dtype):
    # |d| near 1e-3: in bf16 / fp16, e^d rounds to 1, so e^d - d - 1 came out 0 (d = 1e-3) or |d| (d = -1e-3, 2000x
    # too large); in float32 the cancellation lost d = 1e-4 entirely. k3 >= 0 always, ~ d^2 / 2 near 0.
    logp = torch.tensor([0.0, 0.0, -1.0, -2.0, 0.0, -30.0], dtype=dtype)
    ref = torch.tensor([-0.001, 0.001, -1.0, -1.0, -0.0001, 0.0], dtype=dtype)
    lp, rp = as_values(logp), as_values(ref)
    got = kl_penalty(logp, ref, "k3")
    assert got.dtype == torch.promote_types(dtype, torch.float32)  # computed and returned in at least float32
    want = [k3(b - a) for a, b in zip(lp, rp)]
    assert got.double().tolist() == pytest.approx(want, rel=1e-5, abs=1e-12)
    assert (got >= 0).all()
    # k1 / k2 / abs of the input values, exact in float32 for half inputs
    assert kl_penalty(logp, ref, "k1").double().tolist() == pytest.approx([a - b for a, b in zip(lp, rp)], rel=1e-6)
    assert kl_penalty(logp, ref, "k2").double().tolist() == pytest.approx([0.5 * (a - b) ** 2 for a, b in zip(lp, rp)],
                                                                           rel=1e-6)
    # documented propagation: NaN stays NaN where it is, the other tokens are unaffected
    nan = kl_penalty(torch.tensor([float("nan"), -1.0], dtype=dtype), torch.tensor([0.0, -1.0], dtype=dtype), "k3")
    assert math.isnan(nan[0].item()) and nan[1].item() == 0.0


def test_kl_penalty_k3_of_float64_differences_far_below_float32s_reach():
    # float64 log-probs can differ by 1e-9: e^d - d - 1 is then float64 rounding noise (~1e-16, or 0), expm1(d) - d
    # its true ~d^2 / 2 = 5e-19
    logp = torch.tensor([0.0, 0.0, -1.5], dtype=torch.float64)
    ref = torch.tensor([1e-9, -1e-9, -1.5 + 3e-8], dtype=torch.float64)
    want = [k3(b - a) for a, b in zip(logp.tolist(), ref.tolist())]
    assert kl_penalty(logp, ref, "k3").tolist() == pytest.approx(want, rel=1e-6, abs=0.0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("adv", [0.0, 1.0, -1.0])
def test_policy_loss_huge_ratio_every_dtype(dtype, adv):
    # log-ratio 15 (clamped at 20 only above): rho = e^15 = 3.27e6 overflows fp16 (max 65504). The equation at A = 0 is
    # 0 (an all-equal group); with A = +1 the clipped term -1.2 wins (bf16 takes the ratio and its clip bound 1.2 in
    # bf16, 1.203125, as verl); with A = -1 the dual clip caps it at 3. Token 2 has ratio 1 (-A). token-mean.
    logp = torch.tensor([[0.0, -1.0]], dtype=dtype)
    old = torch.tensor([[-15.0, -1.0]], dtype=dtype)
    hi = 1.203125 if dtype == torch.bfloat16 else 1.2
    lo = -adv * hi if adv > 0 else (3.0 * -adv if adv < 0 else 0.0)
    want = (lo + (-adv * 1.0)) / 2
    loss, m = policy_loss(logp, old, torch.tensor([adv]), torch.ones(1, 2))
    assert math.isfinite(loss.item()) and loss.item() == pytest.approx(want, abs=1e-6)
    assert math.isfinite(m["ratio_max"])
    # no dual clip: A = -1 pays the full ratio e^15 (finite in float32)
    loss, _ = policy_loss(logp, old, torch.tensor([adv]), torch.ones(1, 2), clip_ratio_c=None)
    want = (max(-adv * math.exp(15.0), -adv * hi) + (-adv)) / 2
    assert loss.item() == pytest.approx(want, rel=1e-2 if dtype == torch.bfloat16 else 1e-5, abs=1e-6)


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_agg_loss_empty_and_length_zero_rows(agg):
    # B = 0 and a batch whose every response has length 0: loss 0 in every mode (no 0 / 0); a length-0 row among real
    # ones counts in B for seq-mean-* (documented), adds 0 to the numerators
    assert agg_loss(torch.zeros(0, 3), torch.zeros(0, 3), agg).item() == 0.0
    nan_rows = agg_loss(torch.full((2, 3), float("nan")), torch.zeros(2, 3), agg).item()
    if agg == "seq-mean-token-sum-norm":  # documented: a NaN anywhere propagates in this mode, as in verl
        assert math.isnan(nan_rows)
    else:  # the others never read a masked-out value
        assert nan_rows == 0.0
    L = torch.tensor([[1.0, 7.0], [2.0, 7.0], [3.0, 7.0]]).t()  # a transposed view: a non-contiguous [2, 3]
    assert not L.is_contiguous()
    M = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    want = {"token-mean": 3.0 / 2, "seq-mean-token-mean": (3.0 / 2 + 0) / 2, "seq-mean-token-sum": (3.0 + 0) / 2,
            "seq-mean-token-sum-norm": 3.0 / 3}[agg]
    assert agg_loss(L, M, agg).item() == pytest.approx(want)
    assert masked_mean(L, M).item() == pytest.approx(1.5)


# ------------------------------------------------------------------------------------------------- CSRS (SFR, RRM)
def ref_sfr(mat, re, gamma=0.2, beta=5.0, eps=1e-6):
    """Eq. 7-8: R_base = Count(a, A_all) / |A_all|, f_r = Count(a, A_m) / |A_m|; no answer never matches."""
    out = []
    for a in mat:
        if a is None:
            out.append(0.0)
            continue
        base = (sum(x == a for x in mat) + sum(x == a for x in re)) / (len(mat) + len(re))
        if not re:
            out.append(base)
            continue
        f_r = sum(x == a for x in re) / len(re)
        out.append((gamma * math.tanh(beta * (f_r / (base + eps) - 1)) + 1) * base)
    return out


@pytest.mark.parametrize("mat, re", [
    (["7"], []),  # n = 1, m = 0: the answer is all of A_all, no re-inference to calibrate with: R = R_base = 1
    (["7"], ["7"]),  # R_base = f_r = 1: R = gamma tanh(beta (1 / (1 + eps) - 1)) + 1, just under 1
    (["7", "9"], ["7", "7", "9", "9"]),  # a tie: both answers 1/2 everywhere, R = R_base (up to eps)
    ([None, None], [None, None, "3", None]),  # a no-answer group: 0 for every maternal
    (["a", None], [None, None]),  # re-inference found no answer: f_r = 0, R = (1 - gamma tanh(beta)) R_base
    (["47", "47", "47", "12"], ["12"] * 6 + ["47"] * 6),  # the case study's shape: the rare answer grows under RRM
    ([str(i % 7) for i in range(64)], [str(i % 5) for i in range(320)]),  # a long group, n = 64, m = 5
])
def test_sfr_edges(mat, re):
    got = softened_frequency_rewards(mat, re)
    assert got.dtype == torch.float64
    assert got.tolist() == pytest.approx(ref_sfr(mat, re), rel=1e-12, abs=1e-15)


def test_sfr_empty_and_eps_zero():
    assert softened_frequency_rewards([], ["1"]).shape == (0,)
    # eps = 0: f_r / f_base exactly; the tied case is R_base exactly
    assert softened_frequency_rewards(["7", "9"], ["7", "9"], eps=0.0).tolist() == [0.5, 0.5]
    for bad in (float("nan"), float("inf"), -0.1):
        with pytest.raises(ValueError, match="gamma"):
            softened_frequency_rewards(["7"], ["7"], gamma=bad)


@pytest.mark.parametrize("length, omega, want", [(0, 0.7, 0), (0, 1.0, 0), (10, 1.0, 10), (10, 0.0, 0), (10, 0.7, 7),
                                                 (1, 0.7, 0), (3, 0.7, 2), (100000, 0.7, 70000)])
def test_anchor_position_edges(length, omega, want):
    # Eq. 6: floor(omega * L); 0.7 read as the decimal 7/10, so floor(0.7 * 10) = 7 (the double 0.7 * 10 is 7.0 too,
    # but 0.7 * 3 = 2.0999..: floor 2 either way)
    assert anchor_position(length, omega) == want
    assert anchor_prefixes([list(range(length))], [omega]) == [list(range(want))]


# ---------------------------------------------------------------------------------------------- MM-UPT majority
@pytest.mark.parametrize("answers, want", [
    (["\\boxed{3}"], [1.0]),  # a group of one is its own mode
    (["\\boxed{3}", "\\boxed{4}"], [1.0, 0.0]),  # a 1-1 tie goes to the answer seen first
    (["\\boxed{4}", "\\boxed{3}", "\\boxed{3}", "\\boxed{4}"], [1.0, 0.0, 0.0, 1.0]),  # 2-2 tie: first seen, 4
    (["no answer", "none here"], [0.0, 0.0]),  # no answer never votes nor scores
    (["nothing", "\\boxed{5}"], [0.0, 1.0]),  # the only answer is the mode (share 1/2)
])
def test_majority_vote_edges(answers, want):
    got, metrics = majority_vote_rewards(answers, [0] * len(answers))
    assert got.tolist() == want
    answered = sum(w for w in want)
    assert metrics["modal_share"] == pytest.approx(answered / len(answers) if answered else 0.0)


# ----------------------------------------------------------------------------------------------------- MM-Zero
def test_proposal_rewards_seed_example_and_edges():
    # seed: "With one success in two attempts, easy=1 and c=0.5 yield base reward 0.5" (the failed attempt's values
    # are placeholders, NaN included); invalid format overrides everything with -1; c = 0 and 1 score 0 balance
    ex = torch.tensor([[True, False], [True, True], [True, True]])
    s = torch.tensor([[1.0, float("nan")], [0.0, 1.0], [0.3, 0.6]], dtype=torch.float64)
    c = torch.tensor([[0.5, float("nan")], [0.0, 1.0], [0.2, 0.9]], dtype=torch.float64)
    adj = torch.tensor([[0.0, 0.0, 0.0], [-0.3, -0.15, 0.1], [float("nan"), 0.0, 0.0]], dtype=torch.float64)
    valid = torch.tensor([True, True, False])
    got = proposal_rewards(ex, s, c, adj, valid)
    assert got.tolist() == pytest.approx([0.5, (0.0 + 0.0 + 0.5 + 0.0) / 2 - 0.35, -1.0])
    with pytest.raises(ValueError, match=r"consistency\[0, 0\]"):
        proposal_rewards(ex[:1], s[:1], torch.tensor([[float("nan"), 0.5]], dtype=torch.float64), adj[:1], valid[:1])


@pytest.mark.parametrize("dtype", FLOATS)
def test_mmzero_half_precision_rounds_once(dtype):
    # diversity: -clip(dot(shares - 1/M, w) * M * strength, -strength, strength), w = (.45, .20, .35)
    shares = torch.tensor([[0.3, 0.6, 0.1], [1.0, 1.0, 1.0], [1 / 3, 1 / 3, 1 / 3], [0.07, 0.91, 0.53],
                           [0.0, 0.0, 0.0]], dtype=dtype)
    for M in (1, 3, 7):
        want = [-max(-0.5, min(0.5, sum((x - 1 / M) * w for x, w in zip(row, (0.45, 0.20, 0.35))) * M * 0.5))
                for row in as_values(shares)]
        got = diversity_adjustment(shares, M)
        assert got.dtype == dtype and as_values(got) == rounded(want, dtype)
    # proposal reward of easy / consistency held in dtype
    s = torch.tensor([[0.3, 0.7, 0.45]], dtype=dtype)
    c = torch.tensor([[0.3, 0.6, 0.9]], dtype=dtype)
    adj = torch.tensor([[-0.3, -0.03, 0.1]], dtype=dtype)
    sv, cv, av = as_values(s)[0], as_values(c)[0], as_values(adj)[0]
    want = sum(min(a, 0.5) + min(b, 1 - b) for a, b in zip(sv, cv)) / 3 + sum(av)
    got = proposal_rewards(torch.ones(1, 3, dtype=torch.bool), s, c, adj, torch.tensor([True]))
    assert got.dtype == dtype and as_values(got) == rounded([want], dtype)


@pytest.mark.parametrize("answers, answered_only, want", [
    ([], False, (None, 0.0)), ([None, None], True, (None, 0.0)), (["a", "b"], False, ("a", 0.5)),
    (["b", "a", "a", "b", None], False, ("b", 0.4)), (["b", "a", "a", "b", None], True, ("b", 0.5)),
    (["x"], False, ("x", 1.0))])
def test_modal_share_ties_and_no_answers(answers, answered_only, want):
    assert modal_share(answers, answered_only) == want


# ------------------------------------------------------------------------------------------------------ HONEST
def _next(x, toward):
    return math.nextafter(x, toward)


@pytest.mark.parametrize("dtype", FLOATS)
def test_honest_rewards_edges_every_dtype(dtype):
    # R_B = -(c - y)^2, R_H = -0.3 (r - y)^2, priority (|c - y| + 1e-3)^0.6 at c = 0, 1 and just inside, and a grid:
    # one rounding of the exact value at the input's value (bf16 -(0.3 - 1)^2 was an ulp off)
    grid = [0.0, 1.0, _next(0.0, 1.0), _next(1.0, 0.0), 1e-30, 0.3, 0.55, 0.7, 0.9, 0.99] + [i / 37 for i in range(37)]
    conf = torch.tensor(grid, dtype=torch.float64).to(dtype)
    for y_val in (0, 1):
        y = torch.full((len(grid),), y_val)
        cv = as_values(conf)
        assert as_values(brier_reward(conf, y)) == rounded([-(c - y_val) ** 2 for c in cv], dtype)
        assert as_values(hindsight_reward(conf, y)) == rounded([-0.3 * (c - y_val) ** 2 for c in cv], dtype)
        assert as_values(replay_priorities(conf, y)) == pytest.approx(
            rounded([(abs(c - y_val) + 1e-3) ** 0.6 for c in cv], dtype), rel=1e-6)
        assert brier_reward(conf, y).dtype == dtype
    # alpha = 0: every priority (x)^0 = 1, also 0^0 with eps = 0 at c = y
    assert replay_priorities(torch.tensor([1.0, 0.0], dtype=dtype), torch.tensor([1, 1]), alpha=0.0,
                             eps=0.0).tolist() == [1.0, 1.0]
    for bad in (float("nan"), float("inf"), -2.0 ** -10, 1.0 + 2.0 ** -7):  # the last two exact in every dtype
        with pytest.raises(ValueError, match="conf must lie in"):
            brier_reward(torch.tensor([0.5, bad], dtype=torch.float64).to(dtype), torch.tensor([1, 0]))
        with pytest.raises(ValueError, match="retro must lie in"):
            hindsight_reward(torch.tensor([bad], dtype=torch.float64).to(dtype), torch.tensor([1]))


@pytest.mark.parametrize("dtype", FLOATS)
def test_casr_edges_every_dtype(dtype):
    # alpha [(c-y)^2 - (r-y)^2] 1[full] + beta 1[chars >= 16] - gamma 1[|r-c| < 0.02] - delta 1[partial], clip 0.3;
    # confidences at 0 / 1, a critique of exactly 15 / 16 chars, a refined value left NaN where it is absent
    rows = [(0.3, 0.4, 1, 16, True), (0.3, 0.4, 1, 15, True), (1.0, 0.0, 1, 40, True), (0.0, 1.0, 1, 40, True),
            (0.7, 0.71, 0, 20, True), (0.7, float("nan"), 0, 20, False), (0.7, float("nan"), 1, 0, False),
            (0.55, 0.45, 0, 0, True)]
    c = torch.tensor([r[0] for r in rows], dtype=torch.float64).to(dtype)
    r = torch.tensor([r[1] for r in rows], dtype=torch.float64).to(dtype)
    want = []
    for cv, rv, (_, _, y, n, h) in zip(as_values(c), as_values(r), rows):
        if not n and not h:
            want.append(0.0)
            continue
        full, partial = n > 0 and h, (n > 0) != h
        v = ((cv - y) ** 2 - (rv - y) ** 2 if full else 0.0) + (0.05 if n >= 16 else 0.0) \
            - (0.05 if h and abs(rv - cv) < 0.02 - 1e-6 else 0.0) - (0.05 if partial else 0.0)
        want.append(min(0.3, max(-0.3, v)))
    got = casr_reward(c, r, torch.tensor([x[2] for x in rows]), torch.tensor([x[3] for x in rows]),
                      torch.tensor([x[4] for x in rows]))
    assert got.dtype == dtype
    assert as_values(got) == pytest.approx(rounded(want, dtype), abs=1e-12)


@pytest.mark.parametrize("conf, correct, bins, want", [
    ([0.0], [0], 10, 0.0), ([1.0], [1], 10, 0.0), ([1.0], [0], 10, 1.0), ([0.0], [1], 10, 1.0),
    ([0.0, 1.0], [0, 1], 1, 0.0),  # one bin: |mean y - mean c| = |1/2 - 1/2|
    ([0.2, 0.8], [1, 1], 1, 0.5), ([0.5] * 4, [1, 0, 1, 0], 10, 0.0)])
def test_ece_edges(conf, correct, bins, want):
    got = expected_calibration_error(torch.tensor(conf, dtype=torch.float64), torch.tensor(correct), bins)
    assert got == pytest.approx(want, abs=1e-15)


# ------------------------------------------------------------------------------------------------------- Prism
def ref_zpd(p):
    return max(0.0, 1 - abs(p - 0.75) / 0.4) if 0.5 <= p <= 0.9 else 0.0


@pytest.mark.parametrize("dtype", FLOATS)
def test_zpd_band_edges_every_dtype(dtype):
    ps = [0.5, 0.9, 0.75, _next(0.5, 0.0), _next(0.9, 1.0), 0.0, 1.0, 0.62, 0.88] + [0.5 + i / 400 for i in range(161)]
    p = torch.tensor(ps, dtype=torch.float64).to(dtype)
    got = zpd(p)
    assert got.dtype == dtype
    assert as_values(got) == rounded([ref_zpd(x) for x in as_values(p)], dtype)
    # +-inf p score 0 (outside the band); a NaN p is no agreement at all: a ValueError naming it
    assert zpd(torch.tensor([float("inf"), -float("inf")], dtype=dtype)).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match=r"p\[0\] is NaN"):
        zpd(torch.tensor([float("nan")], dtype=dtype))


@pytest.mark.parametrize("counts", [[0.0, 0.0, 0.0], [1e-310, 2e-310, 0.0], [1e300, 1e300, 3e300], [1.0], [5.0, 0.0]])
def test_coverage_rewards_degenerate_counts(counts):
    # zpd(p) (1 + 5 exp(-n_c / mean n)); all-zero counts: every cluster unvisited, exp(0) = 1; the ratio n_c / mean
    # does not depend on the counts' scale (subnormal or near-overflow counts give the same rewards)
    K = len(counts)
    p = [0.75, 0.5, 0.95]
    cl = [0, K - 1, 0]
    mean = sum(c / max(counts) for c in counts) / K if max(counts) > 0 else 0.0
    rar = [math.exp(-(counts[k] / max(counts)) / mean) if max(counts) > 0 else 1.0 for k in cl]
    want = [ref_zpd(x) * (1 + 5.0 * q) for x, q in zip(p, rar)]
    got = coverage_rewards(torch.tensor(p, dtype=torch.float64), torch.tensor(cl), torch.tensor(counts,
                                                                                              dtype=torch.float64))
    assert got.tolist() == pytest.approx(want, rel=1e-12)
    assert coverage_rewards(torch.zeros(0, dtype=torch.float64), torch.zeros(0, dtype=torch.long),
                            torch.tensor(counts, dtype=torch.float64)).shape == (0,)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a non-default device")
def test_formulas_on_a_non_default_device():
    dev = torch.device("cuda")
    r, ids = torch.tensor([1.0, 0.0, 0.5, 0.5], device=dev), torch.tensor([0, 0, 1, 1], device=dev)
    assert group_advantages(r, ids).cpu().tolist() == pytest.approx([0.7071061, -0.7071061, 0.0, 0.0], abs=1e-6)
    assert brier_reward(torch.tensor([0.3], device=dev), torch.tensor([1])).cpu().tolist() == pytest.approx([-0.49])
    assert zpd(torch.tensor([0.5], device=dev, dtype=torch.bfloat16)).cpu().tolist() == [0.375]
    k = kl_penalty(torch.tensor([0.0], device=dev, dtype=torch.bfloat16),
                   torch.tensor([0.0625], device=dev, dtype=torch.bfloat16), "k3")
    assert k.device.type == "cuda" and k.item() == pytest.approx(k3(0.0625), rel=1e-6)


def test_logits_helpers_degenerate_rows():
    # H = logsumexp(z) - sum softmax(z) z: uniform over V gives log V; a one-token row (other logits -inf) gives 0;
    # documented NaN for rows with no distribution (all -inf) or a NaN / +inf logit
    inf = float("inf")
    z = torch.tensor([[0.0, 0.0, 0.0, 0.0], [3.0, -inf, -inf, -inf], [-inf] * 4, [0.0, inf, 0.0, 0.0],
                      [0.0, float("nan"), 0.0, 0.0]])
    for dtype in FLOATS:
        h = entropy_from_logits(z.to(dtype))
        assert h[:2].tolist() == pytest.approx([math.log(4), 0.0], abs=1e-6)
        assert all(math.isnan(x) for x in h[2:].tolist())
        lp = logprobs_from_logits(z.to(dtype)[None, :2], torch.tensor([[1, 0]]))
        assert lp[0].tolist() == pytest.approx([-math.log(4), 0.0], abs=1e-6)
    assert logprobs_from_logits(z[None, 1:2], torch.tensor([[2]])).tolist() == [[-inf]]


@pytest.mark.parametrize("clusters, k, want", [
    ([], 5, (0, 0, 0.0, 0.0, 0.0)),  # no questions: every statistic 0
    ([0, 0, 0], 1, (3, 1, 0.0, 0.0, 1.0)),  # k = 1: entropy / log k undefined, 0 by convention; one cluster is all
    ([2, 2], 4, (2, 1, 0.0, 0.75, 1.0)),  # all in one of four: gini (k - 1) / k, top ceil(4/10) = 1 cluster holds all
    ([0, 1, 2, 3], 4, (4, 4, 1.0, 0.0, 0.25)),  # uniform: entropy log k / log k = 1, gini 0
    ([0, 0, 1, 5, 5, 5, 5, 9, 9, 9, 9, 9], 12, None),  # a tie for the largest cluster among 12 (top 2 clusters)
])
def test_prism_diversity_stats_edges(clusters, k, want):
    got = diversity_stats(clusters, k)
    if want is None:
        n = len(clusters)
        x = [clusters.count(j) for j in range(k)]
        ent = -sum(c / n * math.log(c / n) for c in x if c) / math.log(k)
        gini = sum(abs(a - b) for a in x for b in x) / (2 * k * n)
        want = (n, sum(c > 0 for c in x), ent, gini, sum(sorted(x, reverse=True)[:math.ceil(k / 10)]) / n)
    assert (got["questions"], got["active_clusters"]) == want[:2]
    assert [got["normalized_entropy"], got["gini"], got["top10_share"]] == pytest.approx(list(want[2:]), abs=1e-12)


@pytest.mark.parametrize("gamma", [0.0, 0.99, 1.0])
def test_prism_ema_counts_edges(gamma):
    # n_k <- gamma n_k + (1 - gamma) 1[k visited]; no visits (M = 0): pure decay; duplicates add once (indicator)
    counts = [1.0, 0.0, 2.5]
    for visited in ([], [2, 2, 2], [0, 1, 2]):
        want = [gamma * c + (1 - gamma) * (k in visited) for k, c in enumerate(counts)]
        got = ema_counts(torch.tensor(counts, dtype=torch.float64), torch.tensor(visited, dtype=torch.long), gamma)
        assert got.tolist() == pytest.approx(want, abs=1e-15)


@pytest.mark.parametrize("consistencies, want", [([], 0.0), ([0.0, 1.0], -0.3), ([0.15, 0.85], 0.0), ([0.8, 0.5], 0.0),
                                                 ([0.1, 0.9, 0.2], -0.3)])
def test_mmzero_upstream_pieces_edges(consistencies, want):
    # easy-hard penalty: -0.3 when mean min(c, 1 - c) < 0.15 (exactly 0.15 is not below; no executed render: 0)
    assert easy_hard_penalty(consistencies) == want
    # type penalty -0.15 max(0, f - 0.5) / 0.5: one type only -> 0; 3 of 4 -> -0.15 * 0.5; a half share -> 0
    assert type_penalties(["chart", "chart"]) == [0.0, 0.0]
    assert type_penalties(["a", "a", "a", "b"]) == pytest.approx([-0.075, -0.075, -0.075, 0.0])
    assert type_penalties(["a", "b"]) == [0.0, 0.0]
    # coder: 1 + s + min(c, 1 - c) + penalties when rendered, else 0
    assert coder_reward(False, 1.0, 0.5, -0.3) == 0.0
    assert coder_reward(True, 0.0, 1.0, 0.0) == 1.0 and coder_reward(True, 1.0, 0.5, -0.3) == pytest.approx(2.2)
    assert easy_accuracy([], "7") == 0.0 and easy_accuracy([None, "7", "7.0", "8"], "7") == 0.5


@pytest.mark.parametrize("errors, alpha, eps", [
    ([0.2, 0.1], 1000.0, 0.0),  # both priorities underflow to 0 in float64: the ratios 1 : 2^-1000 still hold
    ([0.0, 0.0, 0.0], 500.0, 1e-3),  # all calibrated: eps^alpha underflows for all, equal ratios -> uniform
    ([1.0, 0.0], 2000.0, 1e-3),  # (1.001)^2000 = 7.4 beside an underflowing eps^2000
    ([0.0, 0.0], 0.6, 0.0),  # every priority 0 (eps = 0): uniform, not 0 / 0
    ([0.5], 0.6, 1e-3),  # one entry: probability 1
])
def test_replay_probabilities_underflow(errors, alpha, eps):
    # p_i = (|c_i - y_i| + eps)^alpha / sum_j (...), taken in log space here so that the reference never underflows
    buf = ReplayBuffer()
    for i, e in enumerate(errors):
        buf.add(generate_task("arithmetic", 1, seed=0, index=i).to_example(), 1.0 - e, True)
    logs = [alpha * math.log(e + eps) if e + eps > 0 else -math.inf for e in errors]
    if all(x == -math.inf for x in logs):
        want = [1 / len(errors)] * len(errors)
    else:
        top = max(logs)
        w = [math.exp(x - top) for x in logs]
        want = [x / sum(w) for x in w]
    got = buf.probabilities(alpha, eps).tolist()
    assert got == pytest.approx(want, rel=1e-12, abs=1e-300)
    assert sum(got) == pytest.approx(1.0)


def test_coverage_rewards_float32_subnormal_counts():
    # counts that underflow float32's normal range (subnormal 1e-40): n_c / mean n is still 1 / (mean of 1, 2, 0 over
    # the largest) -> the same rewards as counts 1, 2, 0
    sub = torch.tensor([1e-40, 2e-40, 0.0], dtype=torch.float32)
    assert sub[0].item() != 0.0
    x = [v / 2e-40 for v in sub.double().tolist()]  # the stored values' ratios to the largest
    mean = sum(x) / 3
    want = [1.0 * (1 + 5 * math.exp(-x[k] / mean)) for k in (0, 1, 2)]
    got = coverage_rewards(torch.tensor([0.75, 0.75, 0.75], dtype=torch.float32), torch.tensor([0, 1, 2]), sub)
    assert got.tolist() == pytest.approx(want, rel=1e-6)
