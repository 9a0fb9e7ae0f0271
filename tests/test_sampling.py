"""The HF engine's per-step sampler: right distribution, bans, nucleus, log-probs, seeding, bad logits."""

import pytest
import torch

from mmevo.rollout.base import SamplingParams
from mmevo.rollout.hf import sample_categorical, sample_next


def _freqs(tokens: torch.Tensor, vocab: int) -> torch.Tensor:
    return torch.bincount(tokens, minlength=vocab).double() / tokens.numel()


def test_categorical_draws_follow_the_weights_and_never_pick_zero_weights():
    w = torch.tensor([0.0, 1.0, 0.0, 2.0, 3.0, 0.0, 4.0, 0.0])  # unnormalised; zeros at both ends and inside
    rows = 200_000
    g = torch.Generator().manual_seed(0)
    tok = sample_categorical(w.expand(rows, -1).contiguous(), g)
    freq = _freqs(tok, w.numel())
    p = (w / w.sum()).double()
    assert freq[p == 0].sum() == 0
    sigma = (p * (1 - p) / rows).sqrt()
    assert torch.all((freq - p).abs() <= 5 * sigma + 1e-12), (freq, p)


def test_categorical_uniform_at_the_top_of_its_range_stays_on_a_positive_weight(monkeypatch):
    # torch.rand returning the largest value makes u * total round up to the total: the search would run past the
    # last entry (or onto a trailing zero) without the clamp
    w = torch.tensor([[0.25, 0.0, 0.5, 0.0, 0.0], [1e-3, 3.0, 0.0, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0, 1.0]])
    monkeypatch.setattr(torch, "rand", lambda shape, **kw: torch.ones(shape, dtype=kw.get("dtype")))
    assert sample_categorical(w, None).tolist() == [2, 1, 4]
    monkeypatch.setattr(torch, "rand", lambda shape, **kw: torch.zeros(shape, dtype=kw.get("dtype")))
    assert sample_categorical(w, None).tolist() == [0, 0, 2]  # a uniform of 0 skips leading zeros


def test_categorical_row_without_candidates_gets_minus_one():
    assert sample_categorical(torch.tensor([[0.0, 0.5], [0.0, 0.0]]), None).tolist() == [1, -1]


def test_sample_next_row_whose_allowed_tokens_underflow_takes_the_likeliest_allowed_one():
    # token 0 (banned) holds all the float32 probability mass: the allowed ones are exp(-200) = 0
    logits = torch.tensor([[200.0, 0.0, 3.0, 1.0], [0.0, 1.0, 2.0, 3.0]])
    tok, lp = sample_next(logits, SamplingParams(temperature=1.0), torch.Generator().manual_seed(0), torch.tensor([0]))
    assert tok[0].item() == 2 and tok[1].item() in (1, 2, 3)
    assert torch.allclose(lp, torch.log_softmax(logits, -1).gather(-1, tok[:, None]).squeeze(-1))


def test_sample_next_distribution_logprobs_and_bans():
    torch.manual_seed(0)
    logits = torch.randn(6) * 2
    logits[4] = 5.0  # the most likely token is banned
    banned = torch.tensor([4, 1])
    rows, T = 100_000, 1.3
    params = SamplingParams(temperature=T, seed=1)
    g = torch.Generator().manual_seed(1)
    tok, lp = sample_next(logits.expand(rows, -1), params, g, banned)
    policy = torch.log_softmax(logits / T, -1)
    # returned log-probs are the unmodified policy's (bans do not renormalise them)
    assert torch.allclose(lp, policy[tok], atol=1e-6)
    freq = _freqs(tok, 6)
    allowed = policy.exp().double().index_fill(0, banned, 0.0)
    p = allowed / allowed.sum()
    assert freq[banned].sum() == 0
    assert torch.all((freq - p).abs() <= 5 * (p * (1 - p) / rows).sqrt() + 1e-12), (freq, p)


def test_sample_next_top_p_keeps_the_nucleus_of_the_allowed_tokens():
    probs = torch.tensor([0.40, 0.30, 0.15, 0.10, 0.05])
    logits = probs.log()
    rows = 50_000
    g = torch.Generator().manual_seed(2)
    # banned token 0: allowed mass 0.6 renormalises to [.5, .25, .1667, .0833]; top_p 0.7 keeps tokens 1 and 2
    tok, _ = sample_next(logits.expand(rows, -1), SamplingParams(temperature=1.0, top_p=0.7), g, torch.tensor([0]))
    freq = _freqs(tok, 5)
    assert freq[0] == 0 and freq[3] == 0 and freq[4] == 0
    assert abs(freq[1].item() - 2 / 3) < 0.01
    # the most likely allowed token is always kept, even when top_p is below its probability
    tok, _ = sample_next(logits.expand(100, -1), SamplingParams(temperature=1.0, top_p=0.01), g, None)
    assert tok.unique().tolist() == [0]


def test_sample_next_greedy_seeding_and_non_finite_logits():
    logits = torch.tensor([[0.1, 3.0, 2.0], [1.0, 0.0, 4.0]])
    tok, lp = sample_next(logits, SamplingParams(temperature=0.0), None, torch.tensor([1]))
    assert tok.tolist() == [2, 2]
    assert torch.allclose(lp, torch.log_softmax(logits, -1)[[0, 1], [2, 2]])
    big = torch.randn(64, 509)
    draws = [sample_next(big, SamplingParams(), torch.Generator().manual_seed(s), None)[0] for s in (5, 5, 6)]
    assert torch.equal(draws[0], draws[1]) and not torch.equal(draws[0], draws[2])
    for bad in (float("nan"), float("inf")):
        x = logits.clone()
        x[1, 0] = bad
        with pytest.raises(FloatingPointError):
            sample_next(x, SamplingParams(), None, None)
