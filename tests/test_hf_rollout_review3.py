"""HF rollout engine, third review: randomised differential checks against plain transformers, and bad requests that
were sampled silently as something else (a NaN or fractional budget, an image override with other tokens, a kept KV
cache of another prompt, a negative banned id) or failed deep inside torch (a float n or seed, token ids outside the
vocabulary).

Expected values come from transformers (a plain unpadded forward of each whole sequence), never from the engine.
"""

import dataclasses
import random

import pytest
import torch
from PIL import Image

from conftest import hf_engine, randomized_model
from mmevo.models.inputs import EncodedPrompt, encode_prompt
from mmevo.rollout.base import RolloutRequest, SamplingParams, check_request_batch
from mmevo.rollout.hf import HFEngine


@pytest.fixture(scope="module")
def text(tiny_text_path):
    return randomized_model(tiny_text_path, seed=3)


@pytest.fixture(scope="module")
def vl(tiny_vl_path):
    return randomized_model(tiny_vl_path, seed=3)


def _vl_prompt(lm, size, colour, problem="<image>Find x."):
    return encode_prompt(lm.processor, True, problem, [Image.new("RGB", size, colour)])


@pytest.mark.parametrize("params, reqs_kw, field", [
    (SamplingParams(max_tokens=float("nan"), seed=0), {}, "SamplingParams.max_tokens"),  # was an empty completion
    (SamplingParams(max_tokens=2.5, seed=0), {}, "SamplingParams.max_tokens"),  # was 2 tokens
    (SamplingParams(max_tokens=True, seed=0), {}, "SamplingParams.max_tokens"),  # was 1 token
    (SamplingParams(max_tokens=3, seed=0), {"max_tokens": float("nan")}, "RolloutRequest.max_tokens"),
    (SamplingParams(max_tokens=3, seed=0), {"max_tokens": 1.5}, "RolloutRequest.max_tokens"),  # was 1 token
    (SamplingParams(max_tokens=3, seed=0), {"n": 2.0}, "RolloutRequest.n"),  # NotImplementedError inside torch
    (SamplingParams(max_tokens=3, seed=0), {"n": float("nan")}, "RolloutRequest.n"),
    (SamplingParams(max_tokens=3, seed=1.5), {}, "SamplingParams.seed"),  # RuntimeError inside manual_seed
    (SamplingParams(max_tokens=3, seed=2**70), {}, "SamplingParams.seed"),  # overflow inside manual_seed
    (SamplingParams(temperature="1", max_tokens=3, seed=0), {}, "SamplingParams.temperature"),  # TypeError
    (SamplingParams(temperature=None, max_tokens=3, seed=0), {}, "SamplingParams.temperature"),
    (SamplingParams(top_p=None, max_tokens=3, seed=0), {}, "SamplingParams.top_p"),
])
def test_non_integer_counts_and_non_numeric_parameters_are_refused_naming_the_field(text, params, reqs_kw, field):
    p = encode_prompt(text.processor, False, "Hi", [])
    with pytest.raises(ValueError, match=field):
        hf_engine(text).generate([RolloutRequest(p, **reqs_kw)], params)


def test_integer_like_counts_and_edge_seeds_are_accepted(text):
    import numpy as np

    p = encode_prompt(text.processor, False, "Hi", [])
    eng = hf_engine(text)
    eng.stop_ids = torch.tensor([], dtype=torch.long)
    out = eng.generate([RolloutRequest(p, n=np.int64(2), max_tokens=np.int32(2))],
                       SamplingParams(temperature=np.float32(1.0), top_p=0.9, max_tokens=np.int64(5), seed=2**64 - 1))
    assert [len(c.token_ids) for c in out[0]] == [2, 2]
    check_request_batch([RolloutRequest(p, n=0, max_tokens=0)], SamplingParams(max_tokens=0, seed=-1))


def test_an_image_override_with_other_tokens_than_the_prompt_is_refused(vl):
    """An override swaps pixels only (CSRS's perturbed image). One with another image size has other placeholder
    runs: the engine sampled a continuation of that other prompt under the request's prompt."""
    p = _vl_prompt(vl, (56, 56), "white")
    other_size = _vl_prompt(vl, (84, 56), "red")
    assert len(other_size.input_ids) != len(p.input_ids)
    params = SamplingParams(temperature=1.0, max_tokens=3, seed=0)
    for bad in (other_size, _vl_prompt(vl, (56, 56), "red", "<image>Find y, not x.")):
        with pytest.raises(ValueError, match="RolloutRequest 1: image_override has other token ids"):
            hf_engine(vl).generate([RolloutRequest(p), RolloutRequest(p, image_override=bad)], params)
    same_size = _vl_prompt(vl, (56, 56), "red")  # same tokens, other pixels: fine
    out = hf_engine(vl).generate([RolloutRequest(p, n=2, image_override=same_size)], params)
    assert len(out[0]) == 2


def test_token_ids_outside_the_vocabulary_are_refused_naming_the_request(text):
    p = encode_prompt(text.processor, False, "Hi", [])
    V = text.model.get_input_embeddings().num_embeddings
    eng = hf_engine(text)
    params = SamplingParams(temperature=1.0, max_tokens=2, seed=0)
    for pre in ([V], [-1], [5, V + 7]):  # IndexError inside the embedding (a device-side assert on CUDA)
        with pytest.raises(ValueError, match="RolloutRequest 1: prefix_ids holds token"):
            eng.generate([RolloutRequest(p), RolloutRequest(p, prefix_ids=pre)], params)
    bad_prompt = dataclasses.replace(p, input_ids=list(p.input_ids[:-1]) + [V])
    with pytest.raises(ValueError, match="RolloutRequest 0: prompt.input_ids holds token"):
        eng.generate([RolloutRequest(bad_prompt)], params)
    with pytest.raises(ValueError, match="banned_ids: token"):  # IndexError at the first draw
        HFEngine(text.model, 0, [], banned_ids=[V]).generate([RolloutRequest(p)], params)
    # a banned -1 silently banned the vocabulary's last token (index_fill wraps negative indices); a stop -1 never
    # matched
    for kw in ({"banned_ids": [-1]}, {"stop_ids": [-1]}):
        with pytest.raises(ValueError, match="must be token ids >= 0"):
            HFEngine(text.model, 0, **{"stop_ids": [], **kw})


def test_continuing_from_the_kept_cache_of_another_prompt_is_refused(text, vl):
    """Only the prompt length was checked: another prompt of the same length (or the same tokens with other
    pixels) continued from the source prompt's keys / values and sampled as if conditioned on it."""
    a = encode_prompt(text.processor, False, "What is two plus three?", [])
    b = encode_prompt(text.processor, False, "What is two minus three?", [])
    assert len(a.input_ids) == len(b.input_ids) and a.input_ids != b.input_ids
    params = SamplingParams(temperature=1.0, max_tokens=4, seed=0)
    eng = hf_engine(text)
    eng.stop_ids = torch.tensor([], dtype=torch.long)
    src = eng.generate([RolloutRequest(a, keep_kv=True)], params)[0][0]
    with pytest.raises(ValueError, match="another prompt"):
        eng.generate([RolloutRequest(b, prefix_ids=src.full_ids[:2], continue_from=src)], params)
    # the source's own prompt (an equal copy too) continues as before: the same greedy tokens as a prefill
    greedy = SamplingParams(temperature=0.0, max_tokens=3)
    copy = dataclasses.replace(a, input_ids=list(a.input_ids))
    kv = eng.generate([RolloutRequest(copy, prefix_ids=src.full_ids[:2], continue_from=src)], greedy)[0][0]
    fresh = eng.generate([RolloutRequest(a, prefix_ids=src.full_ids[:2])], greedy)[0][0]
    assert kv.token_ids == fresh.token_ids and eng.stats["kv_reused_tokens"] > 0

    white, red = _vl_prompt(vl, (56, 56), "white"), _vl_prompt(vl, (56, 56), "red")
    assert white.input_ids == red.input_ids
    veng = hf_engine(vl)
    src = veng.generate([RolloutRequest(white, keep_kv=True)], params)[0][0]
    with pytest.raises(ValueError, match="another prompt"):
        veng.generate([RolloutRequest(red, prefix_ids=src.full_ids[:1], continue_from=src)], params)


# -- randomised differential check against a plain forward --------------------------------------------------------


def _ref_logits(lm, prompt, cont):
    """transformers' logits predicting each token of ``cont`` (one unpadded forward of prompt + cont)."""
    if prompt.images:
        enc = lm.processor(text=[prompt.text], images=prompt.images, return_tensors="pt")
    else:
        enc = lm.tokenizer([prompt.text], return_tensors="pt", add_special_tokens=False)
    L = enc["input_ids"].shape[1]
    enc["input_ids"] = torch.cat([enc["input_ids"], torch.tensor([list(cont)], dtype=torch.long)], 1)
    enc["attention_mask"] = torch.ones_like(enc["input_ids"])
    if "mm_token_type_ids" in enc:
        enc["mm_token_type_ids"] = torch.cat([enc["mm_token_type_ids"], torch.zeros(1, len(cont), dtype=torch.long)], 1)
    with torch.no_grad():
        return lm.model(**enc).logits[0, L - 1:-1].float()


def _nucleus(z, T, top_p, banned):
    """transformers' TopPLogitsWarper support after the bans, written out."""
    s = (z / T).index_fill(-1, torch.tensor(banned, dtype=torch.long), float("-inf"))
    sl, idx = s.sort()
    drop = sl.softmax(-1).cumsum(-1) <= 1 - top_p
    drop[-1] = False
    keep = torch.ones_like(s, dtype=torch.bool)
    keep[idx[drop]] = False
    return keep & (s > float("-inf"))


@pytest.mark.parametrize("kind", ["text", "vl"])
def test_random_batches_match_a_plain_forward(kind, text, vl):
    """Random batches (prompt lengths, images, n, budgets, prefixes, overrides, stops that are likely or also banned):
    every token's log-prob is log_softmax(z / T) of a plain forward, lies in the nucleus, is never banned; stops end a
    completion; greedy is the argmax of the allowed logits."""
    from mmevo.models.loader import vision_token_ids

    lm = text if kind == "text" else vl
    rng = random.Random(7)
    V = lm.model.get_input_embeddings().num_embeddings
    vis = vision_token_ids(lm.tokenizer) if kind == "vl" else []
    words = "find the angle x of triangle ABC area is 3 4 5".split()
    for trial in range(6):
        prompts = []
        for _ in range(rng.randint(1, 3)):
            n_img = rng.choice([0, 1]) if kind == "vl" else 0
            imgs = [Image.new("RGB", (rng.choice([28, 56]), 28), (rng.randrange(256), 0, 0)) for _ in range(n_img)]
            prob = "<image>" * n_img + " ".join(rng.choice(words) for _ in range(rng.randint(0, 12)))
            prompts.append(encode_prompt(lm.processor, kind == "vl", prob, imgs))
        T = [0.0, 1e-3, 0.5, 1.0, 2.0, 1.0][trial]
        top_p = [1.0, 0.95, 0.5, 1e-6, 1.0, 0.95][trial]
        z0 = _ref_logits(lm, prompts[0], [0])[0]
        top = z0.argsort(descending=True)[:4].tolist()
        stops = {top[0], top[2]}  # the step-0 argmax of the first prompt is a stop
        banned = sorted(set(vis) | {top[2], rng.randrange(V)})  # ... and one stop is also banned
        eng = HFEngine(lm.model, lm.tokenizer.pad_token_id, sorted(stops), max_batch_seqs=rng.choice([2, 64]),
                       banned_ids=banned)
        reqs = []
        for p in prompts:
            over = None
            if p.images:
                im = [Image.new("RGB", p.images[0].size, (0, 0, 255))]
                over = dataclasses.replace(p, images=im,
                                           pixel_values=lm.processor.image_processor(images=im, return_tensors="pt")[
                                               "pixel_values"])
            pre = [rng.choice([t for t in range(V) if t not in vis]) for _ in range(rng.randint(0, 3))]
            reqs.append(RolloutRequest(p, n=rng.randint(1, 3), prefix_ids=pre, image_override=over,
                                       max_tokens=rng.choice([None, 0, 5])))
        params = SamplingParams(temperature=T, top_p=top_p, max_tokens=8, seed=trial)
        outs = eng.generate(reqs, params)
        assert outs == eng.generate(reqs, params)  # the same seed, the same samples
        for r, comps in zip(reqs, outs):
            assert len(comps) == r.n
            budget = 8 if r.max_tokens is None else r.max_tokens
            for c in comps:
                assert c.prefix_ids == list(r.prefix_ids) and len(c.logprobs) == len(c.token_ids) <= budget
                hit = [i for i, t in enumerate(c.token_ids) if t in stops]
                assert hit in ([], [len(c.token_ids) - 1])
                assert c.finish_reason == ("stop" if hit else "length")
                assert hit or len(c.token_ids) == budget
                if not c.token_ids:
                    continue
                z = _ref_logits(lm, r.image_override or r.prompt, list(r.prefix_ids) + c.token_ids)[len(r.prefix_ids):]
                for zi, t, lp in zip(z, c.token_ids, c.logprobs):
                    assert t not in banned
                    s = zi / T if T > 0 else zi
                    tol = 2e-4 if T == 0 else 1e-4 + 5e-5 / min(T, 1)  # logit rounding is scaled by 1 / T
                    assert lp == pytest.approx((s - s.logsumexp(-1))[t].item(), abs=tol)
                    if T == 0:
                        assert t == zi.index_fill(-1, torch.tensor(banned), float("-inf")).argmax().item()
                    else:
                        assert _nucleus(zi, T, top_p, banned)[t]


def test_sample_groups_refuses_a_group_with_fewer_samples_than_asked():
    """A group of fewer than n samples was kept silently: GRPO normalised it over fewer samples than rollout.n."""
    from types import SimpleNamespace

    from mmevo.rollout.base import Completion
    from mmevo.rollout.strategy import RolloutContext, sample_groups

    class ShortEngine:  # the second request gets one completion too few
        def generate(self, requests, params):
            return [[Completion([5, 6], [0.0, 0.0], "stop") for _ in range(r.n - (i == 1))]
                    for i, r in enumerate(requests)]

    tok = SimpleNamespace(decode=lambda ids, skip_special_tokens=True: " ".join(map(str, ids)))
    prompt = EncodedPrompt("p", [], [1, 2, 3], [0, 0, 0])
    examples = [SimpleNamespace(id=str(i)) for i in range(3)]
    ctx = RolloutContext(ShortEngine(), None, tok, lambda ex: prompt, SamplingParams(1.0, 1.0, 4, seed=0), 3, 100, 0, 0)
    with pytest.raises(ValueError, match="returned 2 completions for request 1, 3 were asked for"):
        sample_groups(ctx, examples)
    ro = sample_groups(ctx, examples[:1])  # a full group is fine
    assert ro.group_ids.tolist() == [0, 0, 0] and ro.texts == ["5 6"] * 3
