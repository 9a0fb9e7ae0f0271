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


def test_categorical_chi_square_and_huge_vocabulary():
    from scipy.stats import chisquare

    g = torch.Generator().manual_seed(3)
    w = torch.rand(64, generator=g) ** 3  # uneven weights, some zeros
    w[torch.tensor([0, 5, 17, 63])] = 0.0
    rows = 400_000
    tok = sample_categorical(w.expand(rows, -1).contiguous(), g)
    counts = torch.bincount(tok, minlength=64).double()
    assert counts[w == 0].sum() == 0
    pos = w > 0
    expected = (w[pos].double() / w[pos].double().sum() * rows).numpy()
    assert chisquare(counts[pos].numpy(), expected).pvalue > 1e-3
    # Qwen's vocabulary: draws grouped into 16 bins of the vocabulary (contiguous ids)
    V, B, calls = 151_936, 50, 300
    probs = torch.softmax(torch.randn(V, generator=g) * 2, -1)
    draws = torch.cat([sample_categorical(probs.expand(B, -1), g) for _ in range(calls)])
    bins = torch.arange(V) * 16 // V
    counts = torch.bincount(bins[draws], minlength=16).double().numpy()
    expected = (torch.zeros(16, dtype=torch.float64).index_add_(0, bins, probs.double()) * B * calls).numpy()
    assert chisquare(counts, expected * counts.sum() / expected.sum()).pvalue > 1e-3


def test_categorical_subnormal_and_overflowing_totals():
    """A row whose total is subnormal or overflows float32 is drawn as its weights say (was 25 / 75 and 0 / 100)."""
    rows = 100_000
    g = torch.Generator().manual_seed(0)
    for pair in ([1e-45, 1e-45], [3e38, 3e38], [1e-42, 3e-42]):
        w = torch.tensor([pair]).expand(rows, -1).contiguous()
        freq = _freqs(sample_categorical(w, g), 2)
        p1 = pair[1] / sum(pair)
        assert abs(freq[1].item() - p1) <= 5 * (p1 * (1 - p1) / rows) ** 0.5, (pair, freq)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite"):  # was a draw past the row's end (nan) or the inf entry
            sample_categorical(torch.tensor([[1.0, bad, 0.5]]), g)


@pytest.mark.xfail(strict=True, reason="precision limit, left as is (a fix changes every run's random stream): "
                   "float32 running sums and a 24-bit uniform resolve a token's chance only to ~2^-24 of its row; "
                   "a token under that share is never drawn or drawn with a multiple of 2^-24 (TV distance from the "
                   "policy about 1.3e-3 for Qwen's V=151,936, 1e-5 for V=1024)")
def test_categorical_resolves_a_probability_below_two_to_the_minus_24(monkeypatch):
    # token 1 has probability 1e-8 / (1 + 1e-8): it owns the top 1e-8 of the uniform's range, so the largest
    # uniform the sampler can draw (1 - 2^-24 for float32, 1 - 2^-53 for float64) must land on it; with float32
    # running sums its interval is empty (1 + 1e-8 == 1) and no uniform reaches it
    def top(shape, dtype=torch.float32, **kw):  # the largest value torch.rand returns in ``dtype``
        return torch.ones(shape, dtype=dtype).nextafter(torch.zeros((), dtype=dtype))

    monkeypatch.setattr(torch, "rand", top)
    assert sample_categorical(torch.tensor([[1.0, 1e-8]]), None).tolist() == [1]


def test_sample_next_row_whose_allowed_tokens_underflow_samples_them_renormalised():
    # the banned token 0 holds all the float32 probability mass: the allowed ones are exp(-200) = 0 (row 0) or
    # subnormal (row 1: exp(-95) ...); they are still drawn from softmax over the allowed tokens, not the likeliest
    rows = 60_000
    logits = torch.tensor([[200.0, 0.0, 3.0, 1.0], [95.0, 0.0, 3.0, 1.0]]).repeat(rows, 1)
    tok, lp = sample_next(logits, SamplingParams(temperature=1.0), torch.Generator().manual_seed(0), torch.tensor([0]))
    assert torch.allclose(lp, torch.log_softmax(logits, -1).gather(-1, tok[:, None]).squeeze(-1))
    p = torch.softmax(torch.tensor([-float("inf"), 0.0, 3.0, 1.0], dtype=torch.float64), -1)
    for r in (0, 1):
        freq = _freqs(tok[r::2], 4)
        assert freq[0] == 0
        assert torch.all((freq - p).abs() <= 5 * (p * (1 - p) / rows).sqrt() + 1e-12), (r, freq, p)


def test_sample_next_with_no_allowed_token_raises():
    # every token banned, or every allowed token of probability 0: no valid pick (was a banned token 0)
    everything = torch.arange(6)
    only_banned_finite = torch.tensor([[2.0, -float("inf"), -float("inf")]])
    for T in (0.0, 1.0):
        with pytest.raises(ValueError, match="no token"):
            sample_next(torch.randn(2, 6), SamplingParams(temperature=T), torch.Generator().manual_seed(0), everything)
        with pytest.raises(ValueError, match="no token"):
            sample_next(only_banned_finite, SamplingParams(temperature=T), None, torch.tensor([0]))
    with pytest.raises(FloatingPointError, match="temperature"):  # finite logits; logits / T overflows
        sample_next(torch.tensor([[1.0, 2.0]]), SamplingParams(temperature=1e-39), None, None)


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


def test_sample_next_top_p_keeps_the_tokens_transformers_keeps(monkeypatch):
    """Same nucleus as transformers' TopPLogitsWarper (and vLLM: both drop a token once the mass of the likelier
    ones reaches top_p), after temperature and the bans (applied as -inf logits first, as a bad-words processor)."""
    import mmevo.rollout.hf as hf
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

    seen = []
    real = hf.sample_categorical
    monkeypatch.setattr(hf, "sample_categorical", lambda w, g: seen.append(w.clone()) or real(w, g))
    g = torch.Generator().manual_seed(4)
    banned = torch.tensor([3, 40])
    for T, top_p in ((1.0, 0.9), (0.6, 0.5), (1.4, 0.95), (1.0, 0.3)):
        logits = torch.randn(16, 200, generator=g) * 2
        seen.clear()
        sample_next(logits, SamplingParams(temperature=T, top_p=top_p), g, banned)
        ref = TemperatureLogitsWarper(T)(None, logits.index_fill(-1, banned, -float("inf")))
        ref = TopPLogitsWarper(top_p)(None, ref)
        kept = ref > -float("inf")
        assert torch.equal(seen[0] > 0, kept), (T, top_p)
        want = torch.softmax(ref, -1)  # the sampling distribution: the nucleus renormalised
        got = seen[0] / seen[0].sum(-1, keepdim=True)
        assert torch.allclose(got, want, atol=1e-6)
    # an exact boundary: [.5, .3, .2] with top_p .8 keeps the first two (the mass before the third reaches .8)
    seen.clear()
    sample_next(torch.tensor([[0.5, 0.3, 0.2]]).log(), SamplingParams(top_p=0.8), g, None)
    ref = TopPLogitsWarper(0.8)(None, torch.tensor([[0.5, 0.3, 0.2]]).log())
    assert (seen[0] > 0).tolist() == (ref > -float("inf")).tolist() == [[True, True, False]]


def test_sample_next_temperature_distribution_and_logprobs():
    from scipy.stats import chisquare

    g = torch.Generator().manual_seed(5)
    logits = torch.randn(12, generator=g) * 2
    rows = 200_000
    for T in (0.5, 1.0, 2.0):
        tok, lp = sample_next(logits.expand(rows, -1), SamplingParams(temperature=T), g, None)
        policy = torch.log_softmax(logits.double() / T, -1)
        assert torch.allclose(lp.double(), policy[tok], atol=1e-5)  # what the trainer recomputes at T
        counts = torch.bincount(tok, minlength=12).double()
        assert chisquare(counts.numpy(), (policy.exp() * rows).numpy()).pvalue > 1e-3, T
    # greedy: the likeliest allowed token, log-prob at temperature 1 (the trainer scores T=0 at 1)
    tok, lp = sample_next(torch.tensor([[1.0, 5.0, 4.0]]), SamplingParams(temperature=0.0), None, torch.tensor([1]))
    assert tok.tolist() == [2] and torch.allclose(lp, torch.log_softmax(torch.tensor([1.0, 5.0, 4.0]), -1)[2:])
