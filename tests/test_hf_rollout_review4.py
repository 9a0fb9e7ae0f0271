"""HF rollout engine, fourth review: values that ``check_request_batch`` accepts as valid but the engine then failed on
deep inside torch (a Fraction temperature / top_p, numpy seeds, n and budgets) or read as something else (a float
token id 5.5 as token 5, True as token 1), and the request-level properties round 4 fuzzed (a shared prompt object vs
equal copies, prompts differing only in pixels, max_batch_seqs below n, stops inside prefix_ids, greedy with top_p).

Expected values come from transformers (``hf_greedy``) or by hand, never from the engine.
"""

import copy
import dataclasses
from fractions import Fraction

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import hf_greedy, randomized_model
from mmevo.models.inputs import encode_prompt
from mmevo.rollout.base import RolloutRequest, SamplingParams, check_request_batch
from mmevo.rollout.hf import HFEngine, sample_next


@pytest.fixture(scope="module")
def text(tiny_text_path):
    return randomized_model(tiny_text_path, seed=5)


@pytest.fixture(scope="module")
def vl(tiny_vl_path):
    return randomized_model(tiny_vl_path, seed=5)


def _engine(lm, stops=(2,), **kw):
    return HFEngine(lm.model, lm.tokenizer.pad_token_id, list(stops), **kw)


def test_a_fraction_temperature_and_top_p_sample_as_their_float_values():
    # a Fraction is a numbers.Real (check_request_batch accepts it); logits / Fraction raised TypeError inside torch
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    want = torch.log_softmax(logits / 0.5, -1)  # T = 1/2
    for params in (SamplingParams(temperature=Fraction(1, 2), top_p=Fraction(1, 1)),
                   SamplingParams(temperature=Fraction(1, 2), top_p=Fraction(999, 1000))):
        tok, lp = sample_next(logits, params, torch.Generator().manual_seed(0))
        assert lp.item() == pytest.approx(want[0, tok.item()].item(), abs=1e-6)
    # top_p 1/2 at T 1/2: p = softmax([0, 2, 4, 6]) = (0.0021, 0.0158, 0.1171, 0.8650): only token 3 is kept
    for s in range(20):
        tok, lp = sample_next(logits, SamplingParams(temperature=Fraction(1, 2), top_p=Fraction(1, 2)),
                              torch.Generator().manual_seed(s))
        assert tok.item() == 3 and lp.item() == pytest.approx(-0.14507, abs=1e-4)


def test_numpy_seed_n_and_budgets_are_accepted(text):
    p = encode_prompt(text.processor, False, "find the angle x", [])
    eng = _engine(text)
    want = eng.generate([RolloutRequest(p, n=2, max_tokens=3)], SamplingParams(temperature=1.0, max_tokens=4, seed=7))
    for seed in (np.int64(7), np.uint64(7), np.int32(7)):  # manual_seed raised "an integer is required"
        got = eng.generate([RolloutRequest(p, n=np.uint64(2), max_tokens=np.uint64(3))],
                           SamplingParams(temperature=1.0, max_tokens=np.uint64(4), seed=seed))
        assert got == want and [len(c.token_ids) for c in got[0]] == [3, 3]


@pytest.mark.parametrize("prefix", [[5.5], [5.0], [True], [7, np.float64(3.0)], [torch.tensor(5.5)],
                                    [torch.tensor(True)], ["a"], [None], None, "ab"])
def test_a_prefix_id_that_is_not_an_integer_is_refused_naming_the_request(text, prefix):
    # 5.5 was continued as token 5 and True as token 1, silently (collate's torch.tensor / vLLM's int() truncate)
    p = encode_prompt(text.processor, False, "find the angle x", [])
    reqs = [RolloutRequest(p), RolloutRequest(p, prefix_ids=prefix)]
    with pytest.raises(ValueError, match="RolloutRequest 1: prefix_ids must be (a sequence of )?integer token ids"):
        check_request_batch(reqs, SamplingParams(temperature=0.0, max_tokens=2))
    with pytest.raises(ValueError, match="RolloutRequest 1: prefix_ids must be (a sequence of )?integer token ids"):
        _engine(text).generate(reqs, SamplingParams(temperature=0.0, max_tokens=2))


def test_integer_prefix_ids_of_every_kind_continue_the_same_tokens(text):
    p = encode_prompt(text.processor, False, "find the angle x", [])
    want = hf_greedy(text, p, 4, [2], [], prefix=[5, 6])
    eng = _engine(text)
    for prefix in ([5, 6], np.array([5, 6]), torch.tensor([5, 6]), [np.int64(5), torch.tensor(6, dtype=torch.int32)]):
        out = eng.generate([RolloutRequest(p, prefix_ids=prefix)], SamplingParams(temperature=0.0, max_tokens=4))
        c = out[0][0]
        assert c.token_ids == want
        assert c.prefix_ids == [5, 6] and all(type(t) is int for t in c.prefix_ids)  # plain ints (full_ids decodes)


@pytest.mark.parametrize("kw", [{"banned_ids": [5.5]}, {"banned_ids": [True]}, {"stop_ids": [2.5]},
                                {"stop_ids": [torch.tensor(2.0)]}, {"banned_ids": torch.tensor([[5, 6]])}])
def test_banned_and_stop_ids_that_are_not_integers_are_refused(text, kw):
    # banned 5.5 banned token 5 instead (torch.tensor(..., dtype=long) truncates), True banned token 1
    kw = {"stop_ids": [2], **kw}
    name = "banned_ids" if "banned_ids" in kw else "stop_ids"
    with pytest.raises(ValueError, match=f"HFEngine {name} must be integer token ids"):
        HFEngine(text.model, text.tokenizer.pad_token_id, kw.pop("stop_ids"), **kw)


def test_one_prompt_object_copies_and_small_chunks_give_the_same_greedy_as_transformers(vl):
    """A prompt object shared by several requests, its deep copies, a copy with other pixels only (same ids), a stop
    inside prefix_ids, temperature 0 with top_p < 1 and max_batch_seqs below a request's n: every completion equals
    transformers' greedy of its own prompt + prefix."""
    base = encode_prompt(vl.processor, True, "<image>Find x in triangle ABC.", [Image.new("RGB", (56, 56), "white")])
    imgs = [Image.new("RGB", (56, 56), (200, 30, 30))]
    other = dataclasses.replace(base, images=imgs, pixel_values=vl.processor.image_processor(
        images=imgs, return_tensors="pt")["pixel_values"])
    stop = hf_greedy(vl, base, 1, [], [])[0]  # the step-0 argmax of base is a stop
    stops = [2, stop]
    reqs = [RolloutRequest(base, n=3), RolloutRequest(base, n=1, prefix_ids=[stop, 7]),
            RolloutRequest(copy.deepcopy(base), n=2), RolloutRequest(other, n=2), RolloutRequest(base, n=1)]
    want = [hf_greedy(vl, r.prompt, 6, stops, [], prefix=list(r.prefix_ids)) for r in reqs]
    assert want[0] == [stop] and want[3] != [stop]  # the test reaches both outcomes
    for mbs in (1, 2, 64):
        out = _engine(vl, stops, max_batch_seqs=mbs).generate(reqs, SamplingParams(temperature=0.0, top_p=0.5,
                                                                                  max_tokens=6))
        for r, w, comps in zip(reqs, want, out):
            assert [c.token_ids for c in comps] == [w] * r.n
            assert [c.finish_reason for c in comps] == ["stop" if w[-1] in stops else "length"] * r.n
