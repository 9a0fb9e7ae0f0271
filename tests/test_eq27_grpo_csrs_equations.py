"""Round-27 equation vectors: the GRPO core's GRADIENTS and invariances, and CSRS (seed 003) pieces not yet pinned.

Earlier rounds compared the values of the core functions with plain-Python references; the update is driven by
their gradients, so here the autograd gradient of each function is compared with the closed form derived by hand:

* PPO clip with clip-higher and dual clip (verl's ``compute_policy_loss``): per token, d L / d logp is
  ``-A rho`` where the unclipped term is the active one and 0 where a clip (or the dual clip) holds it, times the
  aggregation weight of the token (token-mean 1/N, seq-mean-token-mean 1/(B n_b), seq-mean-token-sum 1/B,
  seq-mean-token-sum-norm 1/S);
* KL estimators: k1 -> 1, abs -> sign, k2 -> logp - ref, k3 / low_var_kl -> 1 - e^(ref - logp) inside its clamps and
  0 outside; the "+" kinds (verl's straight-through) -> k2's gradient whatever their value;
* entropy: dH/dz_j = -p_j (z_j - E_p[z]); log-prob: d log p_y / dz_j = [j = y] - p_j.

GRPO advantages (scale "group", Bessel std, eps added to the std): invariant to a positive affine map of a group's
rewards (up to eps), to a relabelling / reordering of the groups, and sum to 0 in every group; each group's
advantages have unbiased std sigma / (sigma + eps).

CSRS: Eq. 7-8 written with the paper's n and m (denominators (m+1) n and m n), the paper's n = 8, m = 5 worked
by hand; Eq. 6 anchors over TOKENS (trailing stop tokens excluded); Eq. 9 noise in 0-255 pixel units, clamped
to the pixel range, deterministic per seed.
"""

import math
import random

import numpy as np
import pytest
import torch
from PIL import Image

from mmevo.csrs.perturb import derive_seed, perturb_image, perturb_images
from mmevo.csrs.retrace import anchor_position, anchor_prefixes
from mmevo.grpo.algos import (entropy_from_logits, group_advantages, kl_penalty, logprobs_and_entropy,
                              logprobs_from_logits, policy_loss)
from mmevo.rewards.majority import majority_vote_rewards
from mmevo.rewards.sfr import softened_frequency_rewards

AGGS = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]


# --------------------------------------------------------------------------- closed-form gradients (references)
def ref_token_grad(logp, old, adv, cl, ch, c):
    """d/dlogp of one token's clipped-surrogate loss, away from the kinks (derived by hand, not from the code)."""
    rho = math.exp(max(-20.0, min(20.0, logp - old)))
    if adv > 0:
        return -adv * rho if rho < 1 + ch else 0.0  # above 1 + eps_high the clipped constant is the larger loss
    if adv < 0:
        if rho < 1 - cl:  # below 1 - eps_low the clipped constant -A (1 - eps_low) is the larger loss
            return 0.0
        if c is not None and rho > c:  # dual clip: the loss is the constant -A c
            return 0.0
        return -adv * rho
    return 0.0


def ref_token_weights(mask, agg, scale=None):
    """The weight of each token in the aggregated loss (the loss is sum_bt w_bt L_bt)."""
    B, T = len(mask), len(mask[0]) if mask else 0
    n_all = sum(sum(r) for r in mask)
    out = []
    for row in mask:
        n_b = sum(row)
        if agg == "token-mean":
            w = 1.0 / max(n_all, 1)
        elif agg == "seq-mean-token-mean":
            w = 1.0 / (B * max(n_b, 1))
        elif agg == "seq-mean-token-sum":
            w = 1.0 / B
        else:
            w = 1.0 / (T if scale is None else scale)
        out.append([w * m for m in row])
    return out


def _random_batch(rng, B, T, empty_rows=True):
    """Log-probs, old log-probs (ratios spread over both clip bounds and past c = 3), advantages, a ragged mask."""
    mask = []
    for b in range(B):
        n = rng.randint(0 if empty_rows else 1, T)
        mask.append([1] * n + [0] * (T - n))
    old = [[rng.uniform(-4.0, -0.1) for _ in range(T)] for _ in range(B)]
    logp = [[o + rng.choice([rng.uniform(-0.6, 0.6), rng.uniform(-2.0, 2.0)]) for o in row] for row in old]
    adv = [rng.choice([0.0, rng.uniform(-2.0, 2.0), rng.uniform(-2.0, 2.0)]) for _ in range(B)]
    return logp, old, adv, mask


def _away_from_kinks(logp, old, cl, ch, c, tol=1e-6):
    for lr, orow in zip(logp, old):
        for x, o in zip(lr, orow):
            rho = math.exp(x - o)
            for k in (1 - cl, 1 + ch) + ((c,) if c is not None else ()):
                if abs(rho - k) < tol:
                    return False
    return True


@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("clip_c", [3.0, None])
def test_policy_loss_gradient_is_the_hand_derived_clip_gradient(agg, clip_c):
    rng = random.Random(2701)
    checked = 0
    for case in range(80):
        B, T = rng.randint(1, 5), rng.randint(1, 7)
        cl, ch = rng.choice([(0.2, 0.2), (0.2, 0.28), (0.1, 0.4), (0.0, 0.0)])
        logp, old, adv, mask = _random_batch(rng, B, T)
        if not _away_from_kinks(logp, old, cl, ch, clip_c):
            continue
        scale = rng.choice([None, 7.5]) if agg == "seq-mean-token-sum-norm" else None
        lp = torch.tensor(logp, dtype=torch.float64, requires_grad=True)
        loss, _ = policy_loss(lp, torch.tensor(old, dtype=torch.float64), torch.tensor(adv, dtype=torch.float64),
                              torch.tensor(mask), cl, ch, agg, loss_scale_factor=scale, clip_ratio_c=clip_c)
        (grad,) = torch.autograd.grad(loss, lp)
        w = ref_token_weights(mask, agg, scale)
        want = [[w[b][t] * ref_token_grad(logp[b][t], old[b][t], adv[b], cl, ch, clip_c) if mask[b][t] else 0.0
                 for t in range(T)] for b in range(B)]
        assert grad.flatten().tolist() == pytest.approx([x for row in want for x in row], rel=1e-12, abs=1e-15), (
            case, agg, adv, mask)
        checked += 1
    assert checked >= 60


def test_policy_loss_gradient_hand_vector_all_regions():
    # one sequence, three tokens: A = +1 below / inside / above the range; old = 0, so rho = e^logp
    rho = [0.5, 1.0, 1.5]
    lp = torch.tensor([[math.log(r) for r in rho]], dtype=torch.float64, requires_grad=True)
    loss, m = policy_loss(lp, torch.zeros(1, 3, dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64),
                          torch.ones(1, 3), 0.2, 0.2, "seq-mean-token-sum")
    loss.backward()
    # A > 0: 0.5 and 1.0 are unclipped (-rho), 1.5 > 1.2 is held at -1.2 (no gradient); loss -(0.5 + 1.0 + 1.2)
    assert loss.item() == pytest.approx(-2.7, abs=1e-12)
    assert lp.grad[0].tolist() == pytest.approx([-0.5, -1.0, 0.0], abs=1e-12)
    assert m["clip_frac_high"] == pytest.approx(1 / 3) and m["clip_frac_low"] == 0.0
    # A = -2: rho 0.5 < 0.8 is held at 2 * 0.8 (no gradient), 1.0 unclipped (2 rho), 4.0 > c = 3 held at 2 * 3 (dual)
    rho = [0.5, 1.0, 4.0]
    lp = torch.tensor([[math.log(r) for r in rho]], dtype=torch.float64, requires_grad=True)
    loss, m = policy_loss(lp, torch.zeros(1, 3, dtype=torch.float64), torch.tensor([-2.0], dtype=torch.float64),
                          torch.ones(1, 3), 0.2, 0.2, "seq-mean-token-sum", clip_ratio_c=3.0)
    loss.backward()
    assert loss.item() == pytest.approx(1.6 + 2.0 + 6.0, abs=1e-12)
    assert lp.grad[0].tolist() == pytest.approx([0.0, 2.0, 0.0], abs=1e-12)
    assert m["clip_frac_low"] == pytest.approx(1 / 3) and m["clip_frac_dual"] == pytest.approx(1 / 3)
    # without the dual clip the 4.0 token is the unclipped 2 * 4 with gradient 2 * 4
    lp.grad = None
    loss, _ = policy_loss(lp, torch.zeros(1, 3, dtype=torch.float64), torch.tensor([-2.0], dtype=torch.float64),
                          torch.ones(1, 3), 0.2, 0.2, "seq-mean-token-sum", clip_ratio_c=None)
    loss.backward()
    assert loss.item() == pytest.approx(1.6 + 2.0 + 8.0, abs=1e-12)
    assert lp.grad[0].tolist() == pytest.approx([0.0, 2.0, 8.0], abs=1e-12)


# --------------------------------------------------------------------------- KL estimator gradients
def ref_kl_grad(lp, ref, kind):
    base = kind.rstrip("+")
    if kind.endswith("+"):
        return lp - ref  # straight-through: k2's gradient whatever the value
    if base in ("k1", "kl"):
        return 1.0
    if base == "abs":
        return math.copysign(1.0, lp - ref)
    if base in ("k2", "mse"):
        return lp - ref
    d = ref - lp
    if abs(d) > 20.0:
        return 0.0
    if math.exp(d) - d - 1.0 > 10.0:  # the output clamp holds the value: no gradient
        return 0.0
    return 1.0 - math.exp(d)


def ref_kl_value(lp, ref, kind):
    base = kind.rstrip("+")
    if base in ("k1", "kl"):
        return lp - ref
    if base == "abs":
        return abs(lp - ref)
    if base in ("k2", "mse"):
        return 0.5 * (lp - ref) ** 2
    d = max(-20.0, min(20.0, ref - lp))
    return min(10.0, math.exp(d) - d - 1.0)


@pytest.mark.parametrize("kind", ["k1", "kl", "abs", "k2", "mse", "k3", "low_var_kl",
                                  "k1+", "kl+", "abs+", "k3+", "low_var_kl+"])
def test_kl_estimator_values_and_gradients_on_random_vectors(kind):
    rng = random.Random(2702)
    for case in range(40):
        shape = rng.choice([(7,), (3, 5), (2, 3, 4)])
        n = math.prod(shape)
        lp_l = [rng.uniform(-8.0, -0.01) for _ in range(n)]
        # differences from tiny to past both k3 clamps (|d| > 20, e^d - d - 1 > 10)
        ref_l = [x + rng.choice([rng.uniform(-1e-3, 1e-3), rng.uniform(-3.0, 3.0), rng.uniform(-30.0, 30.0)])
                 for x in lp_l]
        ref_l = [r if abs((r - x) - 20.0) > 1e-6 and abs((r - x) + 20.0) > 1e-6 else r + 0.5
                 for r, x in zip(ref_l, lp_l)]
        lp = torch.tensor(lp_l, dtype=torch.float64).reshape(shape).requires_grad_(True)
        ref = torch.tensor(ref_l, dtype=torch.float64).reshape(shape)
        val = kl_penalty(lp, ref, kind)
        (grad,) = torch.autograd.grad(val.sum(), lp)
        want_v = [ref_kl_value(x, r, kind) for x, r in zip(lp_l, ref_l)]
        want_g = [ref_kl_grad(x, r, kind) for x, r in zip(lp_l, ref_l)]
        assert val.flatten().tolist() == pytest.approx(want_v, rel=1e-12, abs=1e-15), (case, kind)
        assert grad.flatten().tolist() == pytest.approx(want_g, rel=1e-9, abs=1e-12), (case, kind)


def test_k3_hand_vector_with_its_gradient():
    # d = ref - logp = ln 2: k3 = 2 - ln 2 - 1, gradient 1 - 2 = -1; d = -ln 2: 0.5 + ln 2 - 1, gradient 0.5
    lp = torch.tensor([0.0, 0.0], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([math.log(2.0), -math.log(2.0)], dtype=torch.float64)
    val = kl_penalty(lp, ref, "low_var_kl")
    val.sum().backward()
    assert val.tolist() == pytest.approx([1 - math.log(2.0), math.log(2.0) - 0.5], abs=1e-15)
    assert lp.grad.tolist() == pytest.approx([-1.0, 0.5], abs=1e-15)


# --------------------------------------------------------------------------- entropy / log-prob gradients
def test_entropy_and_logprob_gradients_match_the_closed_forms():
    rng = random.Random(2703)
    for case in range(30):
        V = rng.randint(1, 9)
        z_l = [[rng.uniform(-6.0, 6.0) if rng.random() > 0.2 else -math.inf for _ in range(V)] for _ in range(3)]
        for row in z_l:
            if all(x == -math.inf for x in row):
                row[0] = 0.0
        labels_l = [rng.choice([j for j, x in enumerate(row) if x != -math.inf]) for row in z_l]
        z = torch.tensor(z_l, dtype=torch.float64, requires_grad=True)
        labels = torch.tensor(labels_l)
        (g_h,) = torch.autograd.grad(entropy_from_logits(z).sum(), z)
        (g_lp,) = torch.autograd.grad(logprobs_from_logits(z, labels).sum(), z)
        lp2, ent2 = logprobs_and_entropy(z, labels, "grad")
        g_lp2, g_h2 = (torch.autograd.grad(x.sum(), z, retain_graph=True)[0] for x in (lp2, ent2))
        for row, y, gh, gl, gh2, gl2 in zip(z_l, labels_l, g_h.tolist(), g_lp.tolist(), g_h2.tolist(),
                                            g_lp2.tolist()):
            m = max(x for x in row if x != -math.inf)
            e = [math.exp(x - m) if x != -math.inf else 0.0 for x in row]
            p = [x / sum(e) for x in e]
            mean_z = sum(pj * zj for pj, zj in zip(p, row) if pj > 0)
            want_h = [-pj * (zj - mean_z) if pj > 0 else 0.0 for pj, zj in zip(p, row)]
            want_lp = [(1.0 if j == y else 0.0) - p[j] for j in range(V)]
            for got in (gh, gh2):
                assert got == pytest.approx(want_h, abs=1e-12), (case, row)
            for got in (gl, gl2):
                assert got == pytest.approx(want_lp, abs=1e-12), (case, row)


# --------------------------------------------------------------------------- advantage invariances
def test_group_advantages_invariances_and_per_group_moments():
    rng = random.Random(2704)
    for case in range(150):
        sizes = [rng.randint(1, 8) for _ in range(rng.randint(1, 5))]
        ids = [g for g, s in enumerate(sizes) for _ in range(s)]
        r = [rng.choice([rng.random(), float(rng.randint(0, 1)), 0.5]) for _ in ids]
        base = group_advantages(torch.tensor(r, dtype=torch.float64), torch.tensor(ids), "group", eps=0.0)
        base = base.tolist()
        for g, s in enumerate(sizes):  # zero mean; unbiased std 1 (eps 0) unless the group carries no signal
            a = [x for x, i in zip(base, ids) if i == g]
            vals = [x for x, i in zip(r, ids) if i == g]
            assert sum(a) == pytest.approx(0.0, abs=1e-5)
            if s > 1 and max(vals) != min(vals):
                mu = sum(a) / s
                assert math.sqrt(sum((x - mu) ** 2 for x in a) / (s - 1)) == pytest.approx(1.0, rel=1e-6)
            else:
                assert a == [0.0] * s
        # a positive affine map per group, relabelled ids and a shuffled order leave every advantage unchanged
        coef = {g: (rng.uniform(0.1, 10.0), rng.uniform(-5.0, 5.0)) for g in range(len(sizes))}
        label = {g: rng.randint(-10**9, 10**9) for g in range(len(sizes))}
        order = list(range(len(ids)))
        rng.shuffle(order)
        r2 = [coef[ids[i]][0] * r[i] + coef[ids[i]][1] for i in order]
        ids2 = [label[ids[i]] for i in order]
        if len(set(ids2)) != len(sizes):
            continue
        got = group_advantages(torch.tensor(r2, dtype=torch.float64), torch.tensor(ids2), "group", eps=0.0)
        assert got.tolist() == pytest.approx([base[i] for i in order], rel=1e-5, abs=1e-6), case


def test_group_advantages_eps_is_added_to_the_std_not_the_variance():
    # rewards (0, 1): mean 0.5, unbiased std sqrt(0.5); eps = 0.1 gives +-0.5 / (sqrt(0.5) + 0.1)
    a = group_advantages(torch.tensor([0.0, 1.0]), torch.tensor([7, 7]), "group", eps=0.1)
    want = 0.5 / (math.sqrt(0.5) + 0.1)
    assert a.tolist() == pytest.approx([-want, want], rel=1e-6)
    assert want != pytest.approx(0.5 / math.sqrt(0.5 + 0.1), rel=1e-3)  # the other placement is a different number


# --------------------------------------------------------------------------- CSRS: SFR with the paper's n and m
def ref_sfr_nm(maternal, reinference_by_anchor, gamma=0.2, beta=5.0, eps=1e-6):
    """Eq. 7-8 written with n and m: reinference_by_anchor[i] holds the m answers re-inferred from maternal i."""
    n = len(maternal)
    m = len(reinference_by_anchor[0]) if reinference_by_anchor else 0
    assert all(len(x) == m for x in reinference_by_anchor)
    a_m = [a for xs in reinference_by_anchor for a in xs]
    a_all = list(maternal) + a_m
    out = []
    for a in maternal:
        if a is None:
            out.append(0.0)
            continue
        f_base = sum(x == a for x in a_all) / ((m + 1) * n)
        if m == 0:
            out.append(f_base)
            continue
        f_r = sum(x == a for x in a_m) / (m * n)
        out.append((gamma * math.tanh(beta * (f_r / (f_base + eps) - 1.0)) + 1.0) * f_base)
    return out


def test_sfr_matches_eq_7_8_written_with_n_and_m_on_random_groups():
    rng = random.Random(2705)
    for case in range(400):
        n, m = rng.randint(1, 9), rng.randint(0, 6)
        pool = [str(i) for i in range(rng.randint(1, 5))] + [None]
        mat = [rng.choice(pool) for _ in range(n)]
        re = [[rng.choice(pool) for _ in range(m)] for _ in range(n)]
        gamma, beta = rng.choice([(0.2, 5.0), (0.05, 3.5), (0.35, 8.0), (1.0, 0.5)])
        got = softened_frequency_rewards(mat, [a for xs in re for a in xs], gamma, beta)
        assert got.tolist() == pytest.approx(ref_sfr_nm(mat, re, gamma, beta), rel=1e-12, abs=0), case
        # Eq. 8 keeps every answered reward within (1 -+ gamma) R_base
        for a, r in zip(mat, got.tolist()):
            if a is not None:
                rb = sum(x == a for x in mat + [y for xs in re for y in xs]) / ((m + 1) * n)
                assert (1 - gamma) * rb - 1e-15 <= r <= (1 + gamma) * rb + 1e-15


def test_sfr_the_papers_long_tail_case_by_hand():
    # n = 8, m = 5 (the paper's setting): 7 maternal "47", 1 maternal "30"; the 5 re-inferences of the "30" path all
    # give "30", those of the "47" paths give 3 x "47" and 2 x "30" each.  A_all has 48 answers, A_m 40.
    mat = ["47"] * 7 + ["30"]
    re = [["47", "47", "47", "30", "30"]] * 7 + [["30"] * 5]
    got = softened_frequency_rewards(mat, [a for xs in re for a in xs]).tolist()
    fb47, fr47 = (7 + 21) / 48, 21 / 40
    fb30, fr30 = (1 + 14 + 5) / 48, 19 / 40
    r47 = (0.2 * math.tanh(5.0 * (fr47 / (fb47 + 1e-6) - 1.0)) + 1.0) * fb47
    r30 = (0.2 * math.tanh(5.0 * (fr30 / (fb30 + 1e-6) - 1.0)) + 1.0) * fb30
    assert got == pytest.approx([r47] * 7 + [r30], rel=1e-12)
    # the long-tail answer's share grows under re-inference (19/40 > 20/48): boosted above R_base; "47" damped
    assert r30 > fb30 and r47 < fb47
    # majority vote gives the same group 1 for "47" and 0 for "30" (no signal for the long tail)
    mv, _ = majority_vote_rewards([f"\\boxed{{{a}}}" for a in mat], [0] * 8)
    assert mv.tolist() == [1.0] * 7 + [0.0]


def test_sfr_single_response_and_all_distinct_answers():
    # n = 1, m = 5, every re-inference agrees: f_base = 6/6, f_r = 5/5 -> ratio 1/(1 + eps) -> almost exactly R_base
    got = softened_frequency_rewards(["a"], ["a"] * 5).item()
    assert got == pytest.approx((0.2 * math.tanh(5.0 * (1.0 / (1.0 + 1e-6) - 1.0)) + 1.0) * 1.0, rel=1e-15)
    # n = 4, m = 2, all twelve answers different: f_base = 1/12, f_r = 0 -> (1 - 0.2 tanh 5) / 12
    mat = ["a", "b", "c", "d"]
    got = softened_frequency_rewards(mat, [f"r{i}" for i in range(8)]).tolist()
    assert got == pytest.approx([(1 - 0.2 * math.tanh(5.0)) / 12] * 4, rel=1e-12)
    # unparseable answers (None) count in both denominators, score 0 and never match each other
    got = softened_frequency_rewards(["a", None], ["a", None, None, None]).tolist()
    fb, fr = 2 / 6, 1 / 4
    assert got == pytest.approx([(0.2 * math.tanh(5.0 * (fr / (fb + 1e-6) - 1.0)) + 1.0) * fb, 0.0], rel=1e-12)


# --------------------------------------------------------------------------- CSRS: anchors over tokens
def test_anchor_counts_tokens_not_characters_and_excludes_trailing_stop_tokens():
    # a response of 10 tokens (ids of any size: a multi-digit id is one token) and a trailing stop id 2
    toks = [1001, 5, 77777, 3, 9, 12, 600, 4, 8, 15, 2]
    (cut,) = anchor_prefixes([toks], [0.7], strip_ids={2})
    assert cut == toks[:7]  # floor(0.7 * 10) = 7 tokens of content, the stop token not counted
    (cut,) = anchor_prefixes([toks], [0.7])
    assert cut == toks[:7]  # floor(0.7 * 11) = 7 as well
    (cut,) = anchor_prefixes([toks[:3] + [2, 2]], [0.9], strip_ids={2})
    assert cut == toks[:2]  # floor(0.9 * 3) = 2
    for length, omega, want in [(0, 0.7, 0), (1, 0.7, 0), (2, 0.7, 1), (10, 0.0, 0), (10, 1.0, 10),
                                (100, 0.7, 70), (3, 0.3333333333, 0), (1000, 0.001, 1), (7, 0.5, 3)]:
        assert anchor_position(length, omega) == want, (length, omega)


# --------------------------------------------------------------------------- CSRS: visual semantic perturbation
def test_vsp_noise_is_in_pixel_units_clamped_and_deterministic():
    gray = Image.fromarray(np.full((80, 80, 3), 128, dtype=np.uint8))
    a = np.asarray(perturb_image(gray, 20.0, seed=5), dtype=np.float64)
    b = np.asarray(perturb_image(gray, 20.0, seed=5), dtype=np.float64)
    c = np.asarray(perturb_image(gray, 20.0, seed=6), dtype=np.float64)
    assert np.array_equal(a, b) and not np.array_equal(a, c)  # a seed fixes the noise; another seed changes it
    d = a - 128.0
    assert abs(d.mean()) < 0.3 and abs(d.std() - math.sqrt(400 + 1 / 12)) < 0.3  # sigma in 0-255 units
    # channels get independent noise (not one draw per pixel shared by R, G, B)
    assert abs(np.corrcoef(d[..., 0].ravel(), d[..., 1].ravel())[0, 1]) < 0.05
    # on white every pixel stays <= 255: clamping keeps only the darkening half, mean shift -sigma / sqrt(2 pi)
    white = Image.fromarray(np.full((100, 100, 3), 255, dtype=np.uint8))
    w = np.asarray(perturb_image(white, 20.0, seed=1), dtype=np.float64)
    assert w.max() == 255 and w.min() >= 0
    assert (w - 255.0).mean() == pytest.approx(-20.0 / math.sqrt(2 * math.pi), abs=0.3)
    # a grayscale / RGBA input gives an RGB image of the same size; the input is untouched
    la = Image.fromarray(np.full((8, 9), 40, dtype=np.uint8), mode="L")
    out = perturb_image(la, 5.0, seed=0)
    assert out.mode == "RGB" and out.size == (9, 8) and np.asarray(la).max() == 40
    # perturb_images gives each image its own seed derive_seed(seed, i)
    ims = perturb_images([gray, gray], 20.0, seed=3)
    assert np.array_equal(np.asarray(ims[1]), np.asarray(perturb_image(gray, 20.0, derive_seed(3, 1))))
    assert not np.array_equal(np.asarray(ims[0]), np.asarray(ims[1]))
