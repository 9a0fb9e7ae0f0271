"""Equation vectors for the GRPO core (mmevo.grpo.algos) against plain-Python references written from the formulas
(verl's core_algos: GRPO outcome advantage with torch.std (Bessel), PPO clip with clip-higher and dual clip, the
four loss_agg modes, the k1 / abs / k2 / k3 KL estimators), plus hostile inputs that must be named, not read."""

import math
import random

import pytest
import torch

from mmevo.grpo import algos
from mmevo.grpo.algos import (agg_loss, entropy_from_logits, group_advantages, kl_penalty, logprobs_and_entropy,
                              logprobs_from_logits, masked_mean, policy_loss, reward_std)

N_VECTORS = 300


# --------------------------------------------------------------------------- plain-Python references
def ref_group_advantages(rewards, gids, scale="group", eps=1e-6):
    groups = {}
    for r, g in zip(rewards, gids):
        groups.setdefault(g, []).append(r)
    mean = {g: sum(v) / len(v) for g, v in groups.items()}
    std = {g: (math.sqrt(sum((x - mean[g]) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0)
           for g, v in groups.items()}
    n = len(rewards)
    mu_all = sum(rewards) / n
    std_all = math.sqrt(sum((x - mu_all) ** 2 for x in rewards) / (n - 1)) if n > 1 else 0.0
    out = []
    for r, g in zip(rewards, gids):
        c = r - mean[g]
        if scale == "none":
            out.append(c)
        elif abs(c) < 1e-12:  # a zero-signal sample (singleton / all-equal group)
            out.append(0.0)
        else:
            out.append(c / ((std[g] if scale == "group" else std_all) + eps))
    return out


def ref_token_loss(logp, old, adv, cl, ch, c):
    ratio = math.exp(max(-20.0, min(20.0, logp - old)))
    clipped = -adv * min(max(ratio, 1 - cl), 1 + ch)
    loss = max(-adv * ratio, clipped)
    if c is not None and adv < 0:
        loss = min(loss, -adv * c)
    return loss


def ref_agg(L, M, agg, lsf=None):
    T = len(L[0]) if L else 0
    if agg == "token-mean":
        n = sum(sum(row) for row in M)
        return sum(x * m for lr, mr in zip(L, M) for x, m in zip(lr, mr)) / max(n, 1)
    seqs = []
    for lr, mr in zip(L, M):
        s = sum(x * m for x, m in zip(lr, mr))
        if agg == "seq-mean-token-mean":
            s = s / max(sum(mr), 1)
        seqs.append(s)
    if agg == "seq-mean-token-sum-norm":
        return sum(seqs) / (T if lsf is None else lsf)
    return sum(seqs) / len(seqs) if seqs else 0.0


def ref_kl(lp, ref, kind):
    if kind in ("k1", "kl"):
        return lp - ref
    if kind == "abs":
        return abs(lp - ref)
    if kind in ("k2", "mse"):
        return 0.5 * (lp - ref) ** 2
    d = max(-20.0, min(20.0, ref - lp))
    return max(-10.0, min(10.0, math.exp(d) - d - 1))


def ref_entropy(z):
    finite = [x for x in z if x != -math.inf]
    m = max(finite)
    lse = m + math.log(sum(math.exp(x - m) for x in finite))
    return lse - sum(math.exp(x - lse) * x for x in finite)


def ref_logprob(z, y):
    finite = [x for x in z if x != -math.inf]
    m = max(finite)
    return z[y] - (m + math.log(sum(math.exp(x - m) for x in finite)))


def close(a, b, tol=1e-6):
    return a == b or abs(a - b) <= tol * max(1.0, abs(b))


# --------------------------------------------------------------------------- GRPO advantages
@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_group_advantages_match_the_reference_on_random_batches(scale):
    rng = random.Random(2401)
    for _ in range(N_VECTORS):
        B = rng.randint(1, 24)
        gids = [rng.choice([-3, 0, 2, 7, 11]) for _ in range(B)]
        kind = rng.random()
        if kind < 0.3:  # binary rewards (majority vote)
            rewards = [float(rng.random() < 0.5) for _ in range(B)]
        elif kind < 0.5:  # few distinct values (ties)
            rewards = [rng.choice([0.0, 0.25, 1.0]) for _ in range(B)]
        else:
            rewards = [rng.uniform(-3, 3) for _ in range(B)]
        eps = rng.choice([0.0, 1e-6, 1e-2])
        got = group_advantages(torch.tensor(rewards, dtype=torch.float64), torch.tensor(gids), scale, eps).tolist()
        want = ref_group_advantages(rewards, gids, scale, eps)
        for g, w in zip(got, want):
            assert close(g, w), (rewards, gids, scale, eps, got, want)


def test_group_advantages_hand_vectors():
    # [1, 0]: mean 0.5, Bessel std sqrt(0.5); eps after the std, not inside the sqrt
    a = group_advantages(torch.tensor([1.0, 0.0]), torch.tensor([4, 4])).tolist()
    assert a == pytest.approx([0.5 / (math.sqrt(0.5) + 1e-6), -0.5 / (math.sqrt(0.5) + 1e-6)], abs=1e-7)
    a = group_advantages(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 0, 0])).tolist()
    assert a == pytest.approx([-1 / (1 + 1e-6), 0.0, 1 / (1 + 1e-6)], abs=1e-7)
    # singleton group and all-equal group: exactly 0, with eps 0 too (never 0/0)
    for eps in (0.0, 1e-6):
        a = group_advantages(torch.tensor([5.0, 0.3, 0.3, 0.3]), torch.tensor([9, 1, 1, 1]), eps=eps)
        assert a.tolist() == [0.0, 0.0, 0.0, 0.0]
    # one correct answer among 8 (the long tail): centred 7/8, Bessel variance (49/64 + 7/64) / 7 = 1/8
    a = group_advantages(torch.tensor([1.0] + [0.0] * 7), torch.zeros(8, dtype=torch.long), eps=0.0)
    assert a.tolist() == pytest.approx([7 / math.sqrt(8)] + [-1 / math.sqrt(8)] * 7, rel=1e-6)
    # "none" (Dr.GRPO) is the plain centred reward; "batch" divides by the std of the whole batch
    assert group_advantages(torch.tensor([2.0, 0.0, 7.0]), torch.tensor([0, 0, 1]), "none").tolist() == [1, -1, 0]
    r = [2.0, 0.0, 7.0]
    mu = sum(r) / 3
    s = math.sqrt(sum((x - mu) ** 2 for x in r) / 2)
    got = group_advantages(torch.tensor(r), torch.tensor([0, 0, 1]), "batch").tolist()
    assert got == pytest.approx([1 / (s + 1e-6), -1 / (s + 1e-6), 0.0], rel=1e-6)
    assert reward_std(torch.tensor(r)).item() == pytest.approx(s, rel=1e-12)


def test_group_advantages_refuse_complex_rewards_and_boolean_group_ids():
    # bool rewards are binary correctness, read as 1 / 0 (tests/test_seed_vectors_edge.py pins it too)
    got = group_advantages(torch.tensor([True, False, True]), torch.tensor([0, 0, 0]))
    assert torch.equal(got, group_advantages(torch.tensor([1.0, 0.0, 1.0]), torch.tensor([0, 0, 0])))
    with pytest.raises(TypeError, match="rewards"):
        group_advantages(torch.tensor([1 + 0j, 0j]), torch.tensor([0, 0]))
    with pytest.raises(ValueError, match="group_ids"):
        group_advantages(torch.tensor([1.0, 0.0]), torch.tensor([True, True]))
    with pytest.raises(ValueError, match="rewards"):
        reward_std(torch.tensor([1j, 0j]))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_reward_std_names_a_non_finite_reward(bad):
    with pytest.raises(ValueError, match=r"rewards must be finite.*\[1\]"):
        reward_std(torch.tensor([1.0, bad, 0.0]))


# --------------------------------------------------------------------------- PPO clipped loss + aggregation
AGGS = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]


@pytest.mark.parametrize("agg", AGGS)
def test_policy_loss_matches_the_reference_on_random_ragged_batches(agg):
    rng = random.Random(hash(agg) % 1000)
    for _ in range(N_VECTORS):
        B, T = rng.randint(1, 5), rng.randint(1, 6)
        logp = [[rng.uniform(-4, 0) for _ in range(T)] for _ in range(B)]
        old = [[x + rng.choice([0.0, rng.uniform(-2.5, 2.5)]) for x in row] for row in logp]
        adv = [rng.choice([0.0, rng.uniform(-2, 2)]) for _ in range(B)]
        lens = [rng.randint(0, T) for _ in range(B)]  # ragged, all-zero rows included
        mask = [[1.0 if t < n else 0.0 for t in range(T)] for n in lens]
        cl, ch = rng.choice([0.2, 0.1]), rng.choice([0.2, 0.28])
        c = rng.choice([None, 3.0, 1.5])
        lsf = rng.choice([None, 7.0])
        L = [[ref_token_loss(logp[b][t], old[b][t], adv[b], cl, ch, c) for t in range(T)] for b in range(B)]
        want = ref_agg(L, mask, agg, lsf)
        loss, _ = policy_loss(torch.tensor(logp, dtype=torch.float64), torch.tensor(old, dtype=torch.float64),
                              torch.tensor(adv, dtype=torch.float64), torch.tensor(mask, dtype=torch.float64),
                              cl, ch, agg, loss_scale_factor=lsf, clip_ratio_c=c)
        assert close(loss.item(), want, 1e-9), (logp, old, adv, mask, cl, ch, c, agg, loss.item(), want)


def test_policy_loss_float32_vectors_within_1e_6():
    rng = random.Random(77)
    for _ in range(N_VECTORS):
        B, T = rng.randint(1, 4), rng.randint(1, 5)
        logp = torch.tensor([[rng.uniform(-3, 0) for _ in range(T)] for _ in range(B)])
        old = logp + torch.tensor([[rng.uniform(-1, 1) for _ in range(T)] for _ in range(B)])
        adv = torch.tensor([rng.uniform(-2, 2) for _ in range(B)])
        mask = torch.tensor([[float(rng.random() < 0.7) for _ in range(T)] for _ in range(B)])
        L = [[ref_token_loss(logp[b, t].item(), old[b, t].item(), adv[b].item(), 0.2, 0.28, 3.0)
              for t in range(T)] for b in range(B)]
        loss, _ = policy_loss(logp, old, adv, mask, 0.2, 0.28, "token-mean", clip_ratio_c=3.0)
        assert close(loss.item(), ref_agg(L, mask.tolist(), "token-mean"), 1e-6)


def test_dual_clip_hand_vectors():
    # one token each: ratio 4 with A = -1 -> PPO term 4, dual bound -A*c = 3 -> 3; A = +1 -> the upper clip, -1.2
    lp = torch.tensor([[math.log(4.0)], [math.log(4.0)], [math.log(0.5)], [math.log(0.5)]], dtype=torch.float64)
    old = torch.zeros_like(lp)
    adv = torch.tensor([-1.0, 1.0, -1.0, 1.0], dtype=torch.float64)
    mask = torch.ones_like(lp)
    per_token = []
    for b in range(4):
        loss, _ = policy_loss(lp[b:b + 1], old[b:b + 1], adv[b:b + 1], mask[b:b + 1], clip_ratio_c=3.0)
        per_token.append(loss.item())
    assert per_token == pytest.approx([3.0, -1.2, 0.8, -0.5], abs=1e-12)
    loss, m = policy_loss(lp, old, adv, mask, clip_ratio_c=3.0)
    assert loss.item() == pytest.approx((3.0 - 1.2 + 0.8 - 0.5) / 4, abs=1e-12)
    assert m["clip_frac_dual"] == 0.25 and m["clip_frac_low"] == 0.25 and m["clip_frac_high"] == 0.25
    # the dual clip never touches a positive advantage, however large the ratio; None disables it
    loss, _ = policy_loss(lp[:1], old[:1], adv[:1], mask[:1], clip_ratio_c=None)
    assert loss.item() == pytest.approx(4.0, abs=1e-12)
    # the log-ratio clamp at +-20: ratio e^20 for a log-ratio of 50
    loss, _ = policy_loss(torch.tensor([[50.0]], dtype=torch.float64), torch.zeros(1, 1, dtype=torch.float64),
                          torch.tensor([-1e-3], dtype=torch.float64), torch.ones(1, 1), clip_ratio_c=None)
    assert loss.item() == pytest.approx(1e-3 * math.exp(20.0), rel=1e-12)


def test_agg_modes_hand_vectors_with_an_all_zero_row():
    L = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    M = torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    assert agg_loss(L, M, "token-mean").item() == pytest.approx(27 / 5, abs=1e-6)
    assert agg_loss(L, M, "seq-mean-token-mean").item() == pytest.approx((1.5 + 0 + 8) / 3, abs=1e-6)
    assert agg_loss(L, M, "seq-mean-token-sum").item() == pytest.approx((3 + 0 + 24) / 3, abs=1e-6)
    assert agg_loss(L, M, "seq-mean-token-sum-norm").item() == pytest.approx(27 / 3, abs=1e-6)
    assert agg_loss(L, M, "seq-mean-token-sum-norm", loss_scale_factor=4).item() == pytest.approx(27 / 4, abs=1e-6)
    zero = torch.zeros_like(M)
    for agg in AGGS:
        assert agg_loss(L, zero, agg).item() == 0.0


@pytest.mark.parametrize("bad", [2.0, -1.0, 0.5, float("nan")])
def test_a_mask_entry_other_than_0_or_1_is_named(bad):
    mask = torch.ones(2, 3)
    mask[1, 2] = bad
    lp = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=r"mask must hold only 0 and 1.*\[1, 2\]"):
        policy_loss(lp, lp, torch.tensor([1.0, -1.0]), mask)
    with pytest.raises(ValueError, match="mask must hold only 0 and 1"):
        agg_loss(lp, mask, "seq-mean-token-sum")
    with pytest.raises(ValueError, match="mask must hold only 0 and 1"):
        masked_mean(lp, mask)


def test_masks_of_bools_and_integers_still_count_tokens():
    L = torch.tensor([[1.0, 3.0], [5.0, 7.0]])
    for mask in (torch.tensor([[1, 0], [1, 1]]), torch.tensor([[True, False], [True, True]])):
        assert agg_loss(L, mask, "token-mean").item() == pytest.approx(13 / 3)


def test_policy_loss_names_boolean_or_non_finite_advantages():
    lp, mask = torch.zeros(2, 3), torch.ones(2, 3)
    with pytest.raises(ValueError, match="advantages"):
        policy_loss(lp, lp, torch.tensor([True, False]), mask)
    with pytest.raises(ValueError, match="advantages must be finite.*sequence 1"):
        policy_loss(lp, lp, torch.tensor([1.0, float("nan")]), mask)
    # a non-finite advantage of a sequence without tokens is never read
    loss, _ = policy_loss(lp, lp, torch.tensor([1.0, float("inf")]), torch.tensor([[1.0, 1, 1], [0, 0, 0]]))
    assert loss.item() == -1.0
    with pytest.raises(ValueError, match="logp"):
        policy_loss(lp.bool(), lp.bool(), torch.tensor([1.0, 1.0]), mask)


# --------------------------------------------------------------------------- KL estimators
@pytest.mark.parametrize("kind", ["k1", "kl", "abs", "k2", "mse", "k3", "low_var_kl"])
def test_kl_estimators_match_the_reference_on_random_vectors(kind):
    rng = random.Random(len(kind) * 31 + ord(kind[-1]))
    lp = [rng.uniform(-30, 0) for _ in range(N_VECTORS)]
    ref = [x + rng.choice([0.0, rng.uniform(-0.01, 0.01), rng.uniform(-25, 25)]) for x in lp]
    got = kl_penalty(torch.tensor(lp, dtype=torch.float64), torch.tensor(ref, dtype=torch.float64), kind).tolist()
    for g, a, b in zip(got, lp, ref):
        assert close(g, ref_kl(a, b, kind), 1e-9), (kind, a, b, g)
    got32 = kl_penalty(torch.tensor(lp), torch.tensor(ref), kind)
    assert got32.dtype == torch.float32
    for g, a, b in zip(got32.tolist(), torch.tensor(lp).tolist(), torch.tensor(ref).tolist()):
        assert close(g, ref_kl(a, b, kind), 1e-6), (kind, a, b, g)


def test_k3_hand_vectors_and_its_clamp_at_10():
    lp = torch.tensor([-1.0, 0.0, 0.0, -15.0, -1.0], dtype=torch.float64)
    ref = torch.tensor([-2.0, 15.0, -15.0, 0.0, -1.0], dtype=torch.float64)
    got = kl_penalty(lp, ref, "k3").tolist()
    # d = ref - logp: -1 -> e^-1; 15 -> e^15 - 16 (clamped to 10); -15 -> 14 + e^-15 (clamped to 10)
    assert got == pytest.approx([math.exp(-1.0), 10.0, 10.0, 10.0, 0.0], abs=1e-15)
    assert kl_penalty(lp, ref, "k2").tolist() == pytest.approx([0.5, 112.5, 112.5, 112.5, 0.0])


def test_kl_penalty_names_boolean_log_probs():
    with pytest.raises(ValueError, match="logp"):
        kl_penalty(torch.zeros(3).bool(), torch.zeros(3), "k3")
    with pytest.raises(TypeError, match="ref_logp"):
        kl_penalty(torch.zeros(3), torch.zeros(3).bool(), "k1")


# --------------------------------------------------------------------------- entropy / log-probs
def test_entropy_and_logprobs_match_the_reference_with_minus_inf_logits():
    rng = random.Random(9)
    for _ in range(N_VECTORS):
        V = rng.randint(1, 9)
        z = [rng.choice([-math.inf, rng.uniform(-8, 8)]) if v else rng.uniform(-8, 8) for v in range(V)]
        rng.shuffle(z)
        y = rng.randrange(V)
        zt = torch.tensor([z])
        assert close(entropy_from_logits(zt).item(), ref_entropy(z), 1e-5)
        lp = logprobs_from_logits(zt, torch.tensor([y])).item()
        want = ref_logprob(z, y)
        assert lp == want if want == -math.inf else close(lp, want, 1e-6)
        lp2, ent2 = logprobs_and_entropy(zt, torch.tensor([y]), "grad")
        assert (lp2.item() == want) if want == -math.inf else close(lp2.item(), want, 1e-6)
        assert close(ent2.item(), ref_entropy(z), 1e-5)


def test_entropy_hand_vectors():
    assert entropy_from_logits(torch.tensor([[0.0, -math.inf, 0.0]])).item() == pytest.approx(math.log(2))
    assert entropy_from_logits(torch.tensor([[3.0, 3.0, 3.0, 3.0]])).item() == pytest.approx(math.log(4))
    assert entropy_from_logits(torch.tensor([[5.0, -math.inf]])).item() == 0.0
    assert math.isnan(entropy_from_logits(torch.tensor([[-math.inf, -math.inf]])).item())


def test_integer_logits_read_as_numbers_in_both_functions():
    z = torch.tensor([[1, 2, 4]])
    assert entropy_from_logits(z).item() == pytest.approx(entropy_from_logits(z.float()).item())
    assert logprobs_from_logits(z, torch.tensor([2])).item() == pytest.approx(ref_logprob([1, 2, 4], 2))


def test_boolean_logits_and_out_of_range_labels_are_named():
    with pytest.raises(ValueError, match="logits"):
        entropy_from_logits(torch.ones(2, 3).bool())
    for bad in (-1, 3):
        for fn in (logprobs_from_logits, lambda z, y: logprobs_and_entropy(z, y, "nograd")):
            with pytest.raises(ValueError, match=rf"labels must be token ids in \[0, 3\).*{bad}"):
                fn(torch.zeros(2, 3), torch.tensor([0, bad]))


def test_the_dtype_error_is_both_a_type_and_a_value_error():
    assert issubclass(algos.TensorArgumentError, TypeError) and issubclass(algos.TensorArgumentError, ValueError)


def test_policy_loss_names_a_non_finite_advantage_for_one_sequence_and_for_three_dim_log_probs():
    # logp [T] (one sequence, a scalar advantage) and [B, T, 1]: the message names the token, not an unpacking error
    lp = torch.zeros(3)
    with pytest.raises(ValueError, match=r"advantages must be finite.*token 0 has nan \(3 such tokens\)"):
        policy_loss(lp, lp, torch.tensor(float("nan")), torch.ones(3))
    lp3 = torch.zeros(2, 3, 1)
    with pytest.raises(ValueError, match=r"advantages must be finite.*sequence 1 \(token 0, 0\) has inf"):
        policy_loss(lp3, lp3, torch.tensor([[1.0, 1, 1], [float("inf"), 1, 1]]), torch.ones(2, 3, 1))


def test_token_logprobs_checks_the_labels_once_not_per_chunk_and_recompute(monkeypatch):
    # each check waits for the device on a GPU: the trainer checks a micro-batch's labels once, before its chunks
    from mmevo.grpo import algos
    from mmevo.grpo.trainer import token_logprobs

    calls = []
    real = algos.check_label_range
    monkeypatch.setattr(algos, "check_label_range", lambda labels, vocab: (calls.append(labels.numel()),
                                                                           real(labels, vocab)))
    torch.manual_seed(0)
    head = torch.nn.Linear(8, 11, bias=False)
    hidden = torch.randn(2, 5, 8, requires_grad=True)
    labels = torch.randint(0, 11, (2, 5))
    mask = torch.ones(2, 5)
    logp, _ = token_logprobs(head, hidden, labels, mask, 1.0, chunk=3, with_entropy=True)
    logp.sum().backward()  # each of the 4 chunks is recomputed in backward
    assert calls == [10]
    chunked = logp.detach()
    whole, _ = token_logprobs(head, hidden.detach(), labels, mask, 1.0)
    assert torch.allclose(chunked, whole, atol=1e-6)
    with pytest.raises(ValueError, match=r"labels must be token ids in \[0, 11\).*got 11"):
        token_logprobs(head, hidden, torch.full((2, 5), 11), mask, 1.0, chunk=3)
