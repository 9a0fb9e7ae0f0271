"""HF rollout engine against the semantics of transformers' ``generate`` / logits warpers: nucleus at exact
thresholds and ties, bans under greedy decoding, stops, token budgets, batching, retrace conditioning, and seeded
draws with a generator of another device than the model's.

Expected values come from transformers itself (a warper, ``model.generate`` or a plain forward of the whole
sequence), never from the engine; the device test compares with the same draws from a plain CPU generator.
"""

import pytest
import torch

from conftest import hf_engine, hf_greedy as _hf_greedy, randomize, randomized_model, two_vl_prompts
from mmevo.models.inputs import collate, encode_prompt
from mmevo.models.loader import load_model
from mmevo.rollout.base import RolloutRequest, SamplingParams


def _nucleus_weights(monkeypatch):
    """Record the weights sample_next hands to the categorical draw (the nucleus, unnormalised)."""
    import mmevo.rollout.hf as hf

    seen = []
    real = hf.sample_categorical
    monkeypatch.setattr(hf, "sample_categorical", lambda w, g: seen.append(w.clone()) or real(w, g))
    return seen


def _hf_nucleus(logits: torch.Tensor, T: float, top_p: float, banned: torch.Tensor | None) -> torch.Tensor:
    """transformers' processed logits (bans as -inf, temperature, top-p) -> the tokens it may sample [B, V]."""
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

    x = logits.index_fill(-1, banned, -float("inf")) if banned is not None else logits.clone()
    x = TopPLogitsWarper(top_p)(None, TemperatureLogitsWarper(T)(None, x))
    return x > -float("inf")


def test_top_p_keeps_transformers_nucleus_at_exact_thresholds_and_ties(monkeypatch):
    """At a cumulative mass equal to top_p and at tied probabilities the nucleus is transformers' (and vLLM's), token
    for token. Summing from the likeliest token down kept an extra token where float32 rounded a mass that reaches
    top_p to just below it (probabilities 3:1:1 with top_p 0.6 kept two tokens, transformers and exact arithmetic
    one), and kept the other one of two tied tokens at the boundary."""
    from mmevo.rollout.hf import sample_next

    seen = _nucleus_weights(monkeypatch)
    g = torch.Generator().manual_seed(0)
    # 3:1:1, top_p 0.6: the likeliest token alone has mass 0.6 and reaches top_p
    logits = torch.tensor([[3.0, 1.0, 1.0]]).log()
    sample_next(logits, SamplingParams(temperature=1.0, top_p=0.6), g, None)
    assert (seen[-1] > 0).tolist() == _hf_nucleus(logits, 1.0, 0.6, None).tolist() == [[True, False, False]]
    # many rows of small integer weights (exact ties of masses and of cumulative masses), with and without bans
    for banned in (None, torch.tensor([1])):
        for T in (1.0, 0.5):
            for top_p in (0.05, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 0.95):
                w = torch.randint(0, 6, (400, 7), generator=g).float()
                logits = (w + 1).log() * T  # at temperature T: the policy's weights are w + 1
                seen.clear()
                sample_next(logits, SamplingParams(temperature=T, top_p=top_p), g, banned)
                assert torch.equal(seen[0] > 0, _hf_nucleus(logits, T, top_p, banned)), (T, top_p, banned)


def test_top_p_zero_and_tiny_keep_the_likeliest_allowed_token():
    from mmevo.rollout.hf import sample_next

    logits = torch.tensor([[0.1, 3.0, 2.0, 2.9], [1.0, 0.0, 4.0, 4.0]])
    for top_p in (0.0, 1e-9):
        tok, _ = sample_next(logits, SamplingParams(temperature=1.0, top_p=top_p), torch.Generator().manual_seed(1),
                             torch.tensor([1]))
        assert tok[0].item() == 3  # the likeliest token (1) is banned
        assert tok[1].item() in (2, 3)  # a tie: either (transformers keeps one of them)


# -- the engine on a real tiny model ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vl(tiny_vl_path):
    return randomized_model(tiny_vl_path, seed=2)


def _engine(lm, **kw):
    return hf_engine(lm, **kw)


def _prompts(lm):
    return two_vl_prompts(lm) + [encode_prompt(lm.processor, True, "What is 2 + 3?", [])]


def test_greedy_batch_equals_transformers_generate_with_bans_stops_and_prefixes(vl, monkeypatch):
    """Greedy, with the vision tokens made the policy's favourites: every completion equals transformers' generate
    with those tokens suppressed (stops included, exactly max_tokens otherwise), batched across prompt lengths,
    images, n > 1, retrace prefixes and max_batch_seqs splits."""
    handle = vl.model.lm_head.register_forward_hook(
        lambda m, i, out: out.index_add(-1, torch.tensor([9, 10, 11]), torch.full(out.shape[:-1] + (3,), 30.0)))
    try:
        prompts = _prompts(vl)
        reqs = [RolloutRequest(prompts[0], n=2), RolloutRequest(prompts[1], n=1, prefix_ids=[105, 106]),
                RolloutRequest(prompts[2], n=2), RolloutRequest(prompts[0], n=1, prefix_ids=[300])]
        params = SamplingParams(temperature=0.0, max_tokens=14)
        runs = [_engine(vl, max_batch_seqs=m).generate(reqs, params) for m in (64, 2)]
        eng = _engine(vl)
        stops, banned = eng.stop_ids.tolist(), eng.banned_ids.tolist()
        assert set(banned) >= {9, 10, 11}
        for r, a, b in zip(reqs, *runs):
            ref = _hf_greedy(vl, r.prompt, 14, stops, banned, r.prefix_ids)
            assert len(a) == len(b) == r.n
            for c in a + b:
                assert c.token_ids == ref
                assert len(c.logprobs) == len(ref)
                assert c.finish_reason == ("stop" if ref[-1] in stops else "length")
                assert len(ref) == 14 or ref[-1] in stops
    finally:
        handle.remove()


def test_stop_at_the_first_step_and_stop_given_as_the_pad_id(vl):
    prompts = _prompts(vl)
    eng = _engine(vl)
    first = eng.generate([RolloutRequest(prompts[0])], SamplingParams(temperature=0.0, max_tokens=5))[0][0]
    eng.stop_ids = torch.tensor([first.token_ids[0]])
    out = eng.generate([RolloutRequest(prompts[0], n=2), RolloutRequest(prompts[1])],
                       SamplingParams(temperature=0.0, max_tokens=5))
    for c in out[0]:
        assert c.token_ids == first.token_ids[:1] and c.finish_reason == "stop" and len(c.logprobs) == 1
    assert len(out[1][0].token_ids) == 5 or out[1][0].token_ids[-1] == first.token_ids[0]
    # the pad id as the only stop: a sampled pad ends the row and is returned
    pad = vl.tokenizer.pad_token_id
    eng.stop_ids = torch.tensor([pad])
    handle = vl.model.lm_head.register_forward_hook(lambda m, i, out: out.index_add(
        -1, torch.tensor([pad]), torch.full(out.shape[:-1] + (1,), 100.0)))
    try:
        out = eng.generate([RolloutRequest(prompts[1], n=2)], SamplingParams(temperature=1.0, max_tokens=5, seed=0))
    finally:
        handle.remove()
    assert all(c.token_ids == [pad] and c.finish_reason == "stop" for c in out[0])


def test_retrace_continuations_are_conditioned_on_prompt_plus_prefix(vl):
    """Sampled continuations' log-probs equal a teacher-forced forward of prompt + prefix + tokens at the sampling
    temperature, for an empty prefix, a partial one and the whole response, prefilled or continued from kept KV."""
    prompts = _prompts(vl)
    eng = _engine(vl)
    T = 0.8
    src = eng.generate([RolloutRequest(p, keep_kv=True) for p in prompts[:2]],
                       SamplingParams(temperature=T, max_tokens=10, seed=3))
    reqs = []
    for p, (c,) in zip(prompts, src):
        for cut in (0, len(c.full_ids) // 2, len(c.full_ids)):
            for reuse in (False, True):
                reqs.append(RolloutRequest(p, n=2, prefix_ids=c.full_ids[:cut], max_tokens=6,
                                           continue_from=c if reuse else None))
    out = eng.generate(reqs, SamplingParams(temperature=T, max_tokens=10, seed=4))
    for r, comps in zip(reqs, out):
        for c in comps:
            assert c.prefix_ids == list(r.prefix_ids) and c.full_ids[:len(r.prefix_ids)] == list(r.prefix_ids)
            b = collate(vl.model, [r.prompt], [c.full_ids], vl.tokenizer.pad_token_id)
            with torch.no_grad():
                ref = vl.model(**b.model_kwargs()).logits[0].double()
            start = len(r.prompt.input_ids) + len(r.prefix_ids) - 1
            n = len(c.token_ids)
            want = torch.log_softmax(ref[start:start + n] / T, -1)[range(n), c.token_ids]
            assert torch.allclose(torch.tensor(c.logprobs, dtype=torch.float64), want, atol=1e-4)


class _OtherDeviceGenerator:
    """Stands for a seeded generator of another device than the weights (generate's CPU generator with a model on
    CUDA): reports that device, draws from a CPU stream."""

    device = torch.device("meta")

    def __init__(self, seed: int):
        self.cpu = torch.Generator().manual_seed(seed)


def test_seeded_draws_come_from_the_generators_device(monkeypatch):
    """torch.rand refuses a generator of another device than the tensor it fills ("Expected a 'cuda' device type for
    generator but found 'cpu'"), so every seeded sampling call of an engine on a GPU raised at its first draw (the
    generator is made on the CPU). Emulated with torch.rand as strict as on CUDA: the uniforms must be drawn on the
    generator's device and give the same tokens as the plain CPU generator."""
    from mmevo.rollout.hf import sample_categorical, sample_next

    real = torch.rand

    def strict_rand(shape, *, generator=None, dtype=None, device=None):
        device = torch.device("cpu" if device is None else device)
        if isinstance(generator, _OtherDeviceGenerator):
            if device != generator.device:
                raise RuntimeError(f"Expected a '{device.type}' device type for generator but found "
                                   f"'{generator.device.type}'")
            return real(shape, generator=generator.cpu, dtype=dtype)
        return real(shape, generator=generator, dtype=dtype, device=device)

    logits = torch.randn(32, 50, generator=torch.Generator().manual_seed(0)) * 2
    want = sample_categorical(torch.softmax(logits, -1), torch.Generator().manual_seed(7))
    want_next = sample_next(logits, SamplingParams(temperature=0.9, top_p=0.8), torch.Generator().manual_seed(8),
                            torch.tensor([3]))
    monkeypatch.setattr(torch, "rand", strict_rand)
    assert torch.equal(sample_categorical(torch.softmax(logits, -1), _OtherDeviceGenerator(7)), want)
    got = sample_next(logits, SamplingParams(temperature=0.9, top_p=0.8), _OtherDeviceGenerator(8), torch.tensor([3]))
    assert torch.equal(got[0], want_next[0]) and torch.equal(got[1], want_next[1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_seeded_sampling_on_cuda_runs_and_reproduces(tiny_vl_path):
    lm = load_model(tiny_vl_path, device="cuda")
    randomize(lm.model, seed=2)
    lm.model.eval()
    eng = _engine(lm, device="cuda")
    reqs = [RolloutRequest(p, n=3) for p in _prompts(lm)]
    params = SamplingParams(temperature=1.0, top_p=0.9, max_tokens=12, seed=5)
    a, b = eng.generate(reqs, params), eng.generate(reqs, params)
    ids = lambda out: [[c.token_ids for c in r] for r in out]
    assert ids(a) == ids(b)
    banned = set(eng.banned_ids.tolist())
    assert all(len(c.token_ids) > 0 and not set(c.token_ids) & banned for r in a for c in r)
