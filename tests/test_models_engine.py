"""Tiny model building/loading and the HF rollout engine (parity with transformers' generate, retrace, log-probs)."""

import json

import pytest
import torch
from PIL import Image

from conftest import hf_engine, randomize, two_vl_prompts
from mmevo.grpo.trainer import sequence_logprobs
from mmevo.models.inputs import encode_prompt
from mmevo.models.loader import load_model, stop_token_ids, vision_token_ids
from mmevo.models.processor import ImageOnlyQwen2_5_VLProcessor
from mmevo.models.tiny import QWEN_SPECIAL_TOKENS
from mmevo.rollout.base import RolloutRequest, SamplingParams


@pytest.fixture(scope="module")
def vl(tiny_vl_path):
    lm = load_model(tiny_vl_path)
    randomize(lm.model)
    lm.model.eval()
    return lm


def _engine(lm, **kw):
    return hf_engine(lm, **kw)


def _prompts(lm):
    return two_vl_prompts(lm)


def test_tiny_vl_reloads_through_auto_classes(tiny_vl_path, vl):
    assert isinstance(vl.processor, ImageOnlyQwen2_5_VLProcessor)
    assert vl.is_vl
    tok = vl.tokenizer
    assert tok.padding_side == "left"  # survived save/load
    # Qwen's special tokens keep their order and are single tokens
    ids = [tok.convert_tokens_to_ids(t) for t in QWEN_SPECIAL_TOKENS]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    cfg = vl.model.config
    assert cfg.image_token_id == tok.convert_tokens_to_ids("<|image_pad|>")
    assert cfg.vision_start_token_id == tok.convert_tokens_to_ids("<|vision_start|>")
    assert cfg.vision_config.out_hidden_size == cfg.text_config.hidden_size
    head_dim = cfg.text_config.hidden_size // cfg.text_config.num_attention_heads
    assert sum(cfg.text_config.rope_parameters["mrope_section"]) == head_dim // 2
    n = sum(p.numel() for p in vl.model.parameters())
    assert 1e6 <= n <= 10e6
    spec = json.loads((tiny_vl_path / "mmevo_tiny_spec.json").read_text())
    assert spec["vocab_size"] == 1024


def test_tiny_vl_loads_its_processor_where_torchvision_works(tiny_vl_path, monkeypatch):
    """On a machine with a working torchvision (every GPU machine) nothing registers the image-only processor with
    AutoProcessor, which then cannot resolve the saved ``processor_class`` by name and returns the bare tokenizer:
    the loader must build the saved class itself."""
    import mmevo.models.processor as proc

    monkeypatch.setattr(proc, "torchvision_available", lambda: True)
    lm = load_model(tiny_vl_path)
    assert isinstance(lm.processor, ImageOnlyQwen2_5_VLProcessor)
    assert lm.tokenizer is lm.processor.tokenizer and lm.processor.image_processor is not None
    out = lm.processor(text=["<|vision_start|><|image_pad|><|vision_end|>hi"], images=[Image.new("RGB", (56, 56))],
                       return_tensors="pt")
    assert int((out["input_ids"] == lm.model.config.image_token_id).sum()) == 4  # 56x56 px: 2x2 merged patches


def test_a_processor_without_tokenizer_is_a_clear_error(tiny_vl_path, tmp_path, monkeypatch):
    """A VL checkpoint whose processor AutoProcessor cannot build (it falls back to the tokenizer alone) is refused
    at load time, naming the path and the saved class, not at the first ``processor.tokenizer``."""
    import shutil

    import mmevo.models.processor as proc

    ckpt = tmp_path / "ckpt"
    shutil.copytree(tiny_vl_path, ckpt)
    cfg = json.loads((ckpt / "processor_config.json").read_text())
    cfg["processor_class"] = "SomeUnknownProcessor"
    (ckpt / "processor_config.json").write_text(json.dumps(cfg))
    monkeypatch.setattr(proc, "torchvision_available", lambda: True)
    with pytest.raises(ValueError, match=r"not an image-text processor.*'SomeUnknownProcessor'"):
        load_model(ckpt)

def test_saved_weights_roundtrip(tiny_vl_path, tmp_path):
    """save_pretrained writes legacy key names; loading back must restore every tensor (no silent partial load)."""
    a = load_model(tiny_vl_path)
    randomize(a.model, seed=3)
    a.model.save_pretrained(tmp_path / "m")
    a.processor.save_pretrained(tmp_path / "m")
    b = load_model(tmp_path / "m")
    sa, sb = a.model.state_dict(), b.model.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


def test_prompt_encoding_expands_image_tokens(vl):
    p = _prompts(vl)[0]
    image_id = vl.model.config.image_token_id
    n_img = sum(t == image_id for t in p.input_ids)
    grid = p.image_grid_thw[0]
    assert n_img == int(grid.prod()) // 4  # merge 2x2
    assert [t for t, m in zip(p.input_ids, p.mm_token_type_ids) if m == 1] == [image_id] * n_img
    assert p.text.endswith("<|im_start|>assistant\n")


def test_greedy_matches_transformers_generate(vl):
    prompts = _prompts(vl)
    eng = _engine(vl)
    out = eng.generate([RolloutRequest(p, n=2) for p in prompts], SamplingParams(temperature=0, max_tokens=10))
    for p, comps in zip(prompts, out):
        enc = vl.processor(text=[p.text], images=p.images, return_tensors="pt")
        ref = vl.model.generate(**enc, max_new_tokens=10, do_sample=False)[0, enc["input_ids"].shape[1]:].tolist()
        assert len(comps) == 2
        for c in comps:
            stop = stop_token_ids(vl.tokenizer, vl.model)
            got = c.token_ids
            assert got == ref[:len(got)]
            assert c.finish_reason == ("stop" if got[-1] in stop else "length")


def test_prefill_is_shared_between_samples(vl):
    p = _prompts(vl)[0]
    eng = _engine(vl)
    eng.generate([RolloutRequest(p, n=5)], SamplingParams(temperature=1.0, max_tokens=3, seed=0))
    assert eng.stats["prefill_tokens"] == len(p.input_ids)  # one prefill, not five


def test_continuation_from_anchor_reproduces_greedy(vl):
    """Retrace: continuing the same assistant turn from a prefix of a greedy response gives the same tokens."""
    prompts = _prompts(vl)
    eng = _engine(vl)
    params = SamplingParams(temperature=0, max_tokens=12)
    full = eng.generate([RolloutRequest(p) for p in prompts], params)
    reqs = [RolloutRequest(p, n=2, prefix_ids=f[0].token_ids[:k]) for p, f, k in zip(prompts, full, (4, 7))]
    cont = eng.generate(reqs, SamplingParams(temperature=0, max_tokens=12))
    for f, c, k in zip(full, cont, (4, 7)):
        for comp in c:
            assert comp.prefix_ids == f[0].token_ids[:k]
            n = len(f[0].token_ids)
            assert comp.full_ids[:n] == f[0].token_ids


def test_sampled_logprobs_match_trainer_logprobs(vl):
    prompts = _prompts(vl)
    eng = _engine(vl)
    out = eng.generate([RolloutRequest(p, n=3) for p in prompts], SamplingParams(temperature=0.7, max_tokens=8, seed=1))
    ps, rs, lps = [], [], []
    for p, comps in zip(prompts, out):
        for c in comps:
            ps.append(p)
            rs.append(c.full_ids)
            lps.append(c.logprobs)
    with torch.no_grad():
        logp, _, mask = sequence_logprobs(vl.model, ps, rs, vl.tokenizer.pad_token_id, 0.7, "cpu")
    for i, lp in enumerate(lps):
        assert mask[i].sum() == len(lp)
        assert torch.allclose(logp[i, :len(lp)], torch.tensor(lp), atol=2e-3)


def test_sampling_is_seeded_and_never_emits_vision_tokens(vl):
    prompts = _prompts(vl)
    eng = _engine(vl)
    params = SamplingParams(temperature=1.5, max_tokens=16, seed=7)
    a = eng.generate([RolloutRequest(p, n=4) for p in prompts], params)
    b = eng.generate([RolloutRequest(p, n=4) for p in prompts], params)
    assert [[c.token_ids for c in r] for r in a] == [[c.token_ids for c in r] for r in b]
    banned = set(vision_token_ids(vl.tokenizer))
    assert all(not (set(c.token_ids) & banned) for r in a for c in r)
    c = eng.generate([RolloutRequest(p, n=4) for p in prompts], SamplingParams(temperature=1.5, max_tokens=16, seed=8))
    assert [[x.token_ids for x in r] for r in a] != [[x.token_ids for x in r] for r in c]


def test_text_only_model(tiny_text_path):
    lm = load_model(tiny_text_path)
    assert not lm.is_vl
    randomize(lm.model)
    p = encode_prompt(lm.processor, False, "Find x.", [])
    eng = _engine(lm)
    out = eng.generate([RolloutRequest(p, n=2)], SamplingParams(temperature=0, max_tokens=6))
    enc = lm.tokenizer(p.text, return_tensors="pt", add_special_tokens=False)
    ref = lm.model.generate(**enc, max_new_tokens=6, do_sample=False)[0, enc["input_ids"].shape[1]:].tolist()
    assert out[0][0].token_ids == ref[:len(out[0][0].token_ids)]


def test_missing_model_path_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_model(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_model(tmp_path / "empty")


def test_shared_prefix_logprobs_and_gradients_match_full_sequences(tiny_vl_path):
    """One prompt pass per group (expanded KV cache) gives the same log-probs and gradients as B full passes."""
    lm = load_model(tiny_vl_path)
    randomize(lm.model, std=0.2, seed=4)
    prompts = _prompts(lm)
    ps = [prompts[0]] * 3 + [prompts[1]] * 2  # two groups, as the trainer lays them out
    rs = [[105, 106, 107], [108], [109, 110, 111, 112, 113], [114, 115], [116, 117, 118]]  # ordinary tokens
    results = []
    for share in (False, True):
        lm.model.zero_grad()
        logp, ent, mask = sequence_logprobs(lm.model, ps, rs, lm.tokenizer.pad_token_id, 0.9, "cpu",
                                            with_entropy=True, share_prefix=share)
        ((logp * mask).sum() + (ent * mask).sum()).backward()
        grads = {n: p.grad.clone() for n, p in lm.model.named_parameters() if p.grad is not None}
        results.append((logp * mask, ent * mask, mask, grads))
    (l0, e0, m0, g0), (l1, e1, m1, g1) = results
    assert torch.equal(m0, m1)
    assert torch.allclose(l0, l1, atol=1e-4) and torch.allclose(e0, e1, atol=1e-4)
    assert g0.keys() == g1.keys() and any("visual" in n for n in g1)  # gradients reach the vision tower too
    for n in g0:
        # relative to the whole gradient: an element near 0 of a tensor whose entries reach 100 (the embedding's) is a
        # sum of large terms that cancel, and differs by 5e-4 between the two summation orders on some CPUs
        err = float((g0[n] - g1[n]).norm() / g0[n].norm().clamp(min=1e-12))
        assert err < 1e-4, (n, err)


def test_per_request_token_budget(vl):
    prompts = _prompts(vl)
    eng = _engine(vl, max_batch_seqs=64)
    eng.stop_ids = torch.tensor([], dtype=torch.long)  # never stop early: lengths equal the budgets
    reqs = [RolloutRequest(prompts[0], n=2, max_tokens=3), RolloutRequest(prompts[1], n=1),
            RolloutRequest(prompts[1], n=2, prefix_ids=[105, 106], max_tokens=0)]
    out = eng.generate(reqs, SamplingParams(temperature=1.0, max_tokens=6, seed=0))
    assert [[len(c.token_ids) for c in r] for r in out] == [[3, 3], [6], [0, 0]]
    assert all(c.finish_reason == "length" for r in out for c in r)
    assert out[2][0].full_ids == [105, 106]


def test_cpu_gqa_attention_matches_sdpa_with_padding(vl):
    """The loader's CPU kernel (GQA without repeating K/V) gives transformers' sdpa results on real tokens."""
    from mmevo.models.inputs import collate

    assert vl.model.config.text_config.num_key_value_heads < vl.model.config.text_config.num_attention_heads
    b = collate(vl.model, _prompts(vl), None, vl.tokenizer.pad_token_id)
    real = b.attention_mask.bool()
    outs = {}
    for impl in ("sdpa_gqa", "sdpa"):
        vl.model.set_attn_implementation(impl)
        with torch.no_grad():
            outs[impl] = vl.model(**b.model_kwargs()).logits[real]
    vl.model.set_attn_implementation("sdpa_gqa")
    assert torch.allclose(outs["sdpa_gqa"], outs["sdpa"], atol=1e-4)


def test_prompt_cache_keeps_a_byte_budget_and_re_encodes_identically(vl):
    from PIL import Image

    from mmevo.data.schema import Example
    from mmevo.grpo.trainer import PromptCache, _prompt_bytes

    exs = [Example(id=str(i), problem="<image>How many?", answer="1", choices=[],
                   images=[Image.new("RGB", (56, 56), (i * 40, 0, 0))]) for i in range(5)]
    one = _prompt_bytes(PromptCache(vl.processor, True, "none")(exs[0]))
    cache = PromptCache(vl.processor, True, "none", max_mb=2.5 * one / 2**20)  # room for two prompts
    first = cache(exs[0])
    assert cache(exs[0]) is first  # a hit
    for ex in exs[1:]:
        cache(ex)
    assert len(cache) == 2 and cache.nbytes <= cache.max_bytes
    again = cache(exs[0])  # dropped, encoded again: the same tensors
    assert again is not first and again.input_ids == first.input_ids
    assert torch.equal(again.pixel_values, first.pixel_values)


class _Prefill:
    """A prefill cache's layers: what SharedPrefixCache reads (keys / values [R, KV, W, D] per layer)."""

    def __init__(self, kvs):
        self.layers = [type("Layer", (), {"keys": k, "values": v})() for k, v in kvs]


@pytest.mark.parametrize("s", [1, 3])
def test_shared_prefix_attention_equals_attention_over_each_rows_full_keys(s):
    """Cascade attention (each prefix's keys once) = SDPA over every row's [real prefix tokens | own tokens]."""
    from mmevo.models.attention import shared_prefix_attention
    from mmevo.rollout.kv_cache import SharedPrefixCache

    g = torch.Generator().manual_seed(0)
    R, KV, H, W, D, t = 3, 2, 4, 7, 8, 5
    pk, pv = (torch.randn(R, KV, W, D, generator=g, dtype=torch.float64) for _ in range(2))
    mask = torch.ones(R, W, dtype=torch.bool)
    mask[0, :3] = False  # left padding of different widths
    mask[2, :1] = False
    row_of = torch.tensor([2, 0, 2, 2, 0])  # unsorted, unequal counts, prefix 1 without rows
    N = row_of.numel()
    ok, ov = (torch.randn(N, KV, t, D, generator=g, dtype=torch.float64) for _ in range(2))
    q = torch.randn(N, H, s, D, generator=g, dtype=torch.float64)
    cache = SharedPrefixCache(_Prefill([(pk, pv)]), mask, row_of)
    assert cache.flat_slot is not None and cache.width == 3
    got = shared_prefix_attention(q, ok, ov, cache, 0, scaling=0.3)  # [N, s, H, D]
    for i, p in enumerate(row_of.tolist()):
        k = torch.cat([pk[p][:, mask[p]], ok[i]], 1).repeat_interleave(H // KV, 0)  # [H, n, D]
        v = torch.cat([pv[p][:, mask[p]], ov[i]], 1).repeat_interleave(H // KV, 0)
        n = k.shape[1]
        causal = torch.ones(s, n, dtype=torch.bool).tril(n - s)  # the last s keys are the queries' own
        ref = torch.nn.functional.scaled_dot_product_attention(q[i], k, v, attn_mask=causal, scale=0.3)  # [H, s, D]
        assert torch.allclose(got[i], ref.transpose(0, 1), atol=1e-12), i
        kk, vv = cache.row_kv(0, i)  # no own tokens in the cache's layers yet: the real prefix only
        assert torch.equal(kk, pk[p][:, mask[p]]) and torch.equal(vv, pv[p][:, mask[p]])
    # rows in prefix order with equal counts take the index-free layout
    assert SharedPrefixCache(_Prefill([(pk, pv)]), mask, torch.tensor([0, 0, 1, 1, 2, 2])).flat_slot is None


def test_decoding_over_shared_prefixes_equals_repeated_prefixes(tiny_vl_path, monkeypatch):
    """The engine's shared-prefix decode (mmevo's attention) samples the same tokens with the same log-probs, and
    keeps the same KV caches, as decoding with each row's copy of the prefix (transformers' sdpa), while rows stop
    at different steps."""
    import mmevo.models.attention as attention

    lm = load_model(tiny_vl_path)
    randomize(lm.model, seed=5)
    lm.model.eval()
    prompts = _prompts(lm)
    calls = []
    real = attention.shared_prefix_attention
    monkeypatch.setattr(attention, "shared_prefix_attention", lambda *a, **k: calls.append(1) or real(*a, **k))
    runs = {}
    for impl in ("sdpa", "sdpa_gqa"):
        lm.model.set_attn_implementation(impl)
        eng = _engine(lm)
        eng.stop_ids = torch.arange(100, 160)  # frequent stops: rows leave the batch at different steps
        reqs = [RolloutRequest(prompts[0], n=4, keep_kv=True), RolloutRequest(prompts[1], n=3, max_tokens=4),
                RolloutRequest(prompts[1], n=2, prefix_ids=[105, 106], keep_kv=True)]
        n_calls = len(calls)
        runs[impl] = eng.generate(reqs, SamplingParams(temperature=1.2, max_tokens=12, seed=3))
        assert (len(calls) > n_calls) == (impl == "sdpa_gqa")  # only mmevo's attention takes the shared path
    lm.model.set_attn_implementation("sdpa_gqa")
    a, b = runs["sdpa"], runs["sdpa_gqa"]
    lengths = [len(c.token_ids) for r in b for c in r]
    assert len(set(lengths)) > 2  # rows did finish at different steps
    for ra, rb in zip(a, b):
        for ca, cb in zip(ra, rb):
            assert ca.token_ids == cb.token_ids and ca.finish_reason == cb.finish_reason
            assert torch.allclose(torch.tensor(ca.logprobs), torch.tensor(cb.logprobs), atol=1e-5)
            assert (ca.kv is None) == (cb.kv is None)
            if ca.kv is not None:
                assert ca.kv["next_position"] == cb.kv["next_position"]
                for (ka, va), (kb, vb) in zip(ca.kv["layers"], cb.kv["layers"]):
                    assert ka.shape == kb.shape and va.shape == vb.shape
                    # float noise of two summation orders, relative to the tensors' scale (~10 here)
                    assert (ka - kb).abs().max() <= 1e-5 * ka.abs().max()
                    assert (va - vb).abs().max() <= 1e-5 * va.abs().max()


def _decode_logits(monkeypatch):
    """Record the logits every decode step samples from (rows in the engine's live order)."""
    import mmevo.rollout.hf as hf

    steps = []
    real = hf.sample_next
    monkeypatch.setattr(hf, "sample_next",
                        lambda logits, *a, **k: steps.append(logits.clone()) or real(logits, *a, **k))
    return steps


def _logits_per_completion(steps, flat):
    """Per completion, the logits of each of its tokens: step s's rows are the completions with > s tokens, in
    order (finished rows and rows without budget leave the batch)."""
    per = [[] for _ in flat]
    for s, logits in enumerate(steps):
        live = [i for i, c in enumerate(flat) if len(c.token_ids) > s]
        assert len(live) == logits.shape[0]
        for j, i in enumerate(live):
            per[i].append(logits[j])
    return per


def _assert_decode_equals_full_forward(lm, reqs, out, steps, atol, temperature=1.2):
    from mmevo.models.inputs import collate

    flat = [c for r in out for c in r]
    req_of = [r for r in reqs for _ in range(r.n)]
    assert len(flat) == len(req_of)
    for c, got, r in zip(flat, _logits_per_completion(steps, flat), req_of):
        assert c.full_ids[:len(r.prefix_ids)] == list(r.prefix_ids)
        if not c.token_ids:
            continue
        # one unpadded forward of the whole sequence: prompt + prefix + tokens
        b = collate(lm.model, [r.prompt], [c.full_ids], lm.tokenizer.pad_token_id)
        with torch.no_grad():
            ref = lm.model(**b.model_kwargs()).logits[0]
        start = len(r.prompt.input_ids) + len(r.prefix_ids) - 1
        ref = ref[start:start + len(c.token_ids)]
        assert (torch.stack(got).double() - ref.double()).abs().max() <= atol
        policy = torch.log_softmax(ref.double() / temperature, -1)[range(len(c.token_ids)), c.token_ids]
        assert torch.allclose(torch.tensor(c.logprobs, dtype=torch.float64), policy, atol=1e-5)
        if c.kv is not None:  # the kept cache: prompt + full_ids[:-1], and the position full_ids[-1] took
            n_prompt = len(r.prompt.input_ids)
            assert c.kv["layers"][0][0].shape[1] == n_prompt + len(c.full_ids) - 1
            pos = b.position_ids[..., 0, -1] if b.position_ids.dim() == 3 else b.position_ids[0, -1]
            assert c.kv["next_position"] == int(pos.max())


@pytest.mark.parametrize("kind", ["vl", "text"])
def test_decode_logits_equal_an_unshared_forward_of_each_sequence(kind, tiny_vl_path, tiny_text_path, monkeypatch):
    """In float64 every decode step's logits equal those of one plain forward over that row's full sequence (to
    1e-9; float32 noise of another summation order is ~1e-5 of the logits' scale): shared prefixes of different
    prompt lengths, n = 1 and n > 1, retrace prefixes, rows leaving at stop tokens or at their own budgets, and a
    zero budget; both attention paths (shared prefix: sdpa_gqa; repeated prefix: sdpa). Then continuing from the
    kept KV caches (continue_from) equals a fresh prefill of prompt + prefix, mrope positions included. The shared
    path computed its softmax in float32 (2e-5 off in float64)."""
    lm = load_model(tiny_vl_path if kind == "vl" else tiny_text_path)
    randomize(lm.model, seed=5)
    lm.model.eval().double()
    if kind == "vl":
        prompts = _prompts(lm)
    else:
        prompts = [encode_prompt(lm.processor, False, t, []) for t in
                   ("Find x.", "In triangle ABC angle A is 50 degrees and angle B is 60; find angle C.")]
    assert len(prompts[0].input_ids) != len(prompts[1].input_ids)
    params = SamplingParams(temperature=1.2, max_tokens=12, seed=3)
    steps = _decode_logits(monkeypatch)
    for impl in ("sdpa_gqa", "sdpa"):
        lm.model.set_attn_implementation(impl)
        eng = _engine(lm)
        eng.stop_ids = torch.arange(100, 140)  # frequent stops: rows leave at different steps
        reqs = [RolloutRequest(prompts[0], n=3, keep_kv=True), RolloutRequest(prompts[1], n=1, max_tokens=5),
                RolloutRequest(prompts[1], n=2, prefix_ids=[105, 106], keep_kv=True),
                RolloutRequest(prompts[0], n=2, max_tokens=0)]
        steps.clear()
        out = eng.generate(reqs, params)
        assert {c.finish_reason for r in out for c in r} == {"stop", "length"}
        assert len({len(c.token_ids) for r in out for c in r}) > 2
        _assert_decode_equals_full_forward(lm, reqs, out, steps, atol=1e-9)
        for c in out[0] + out[2]:
            if c.finish_reason == "stop":
                assert c.token_ids[-1] in eng.stop_ids and not set(c.token_ids[:-1]) & set(eng.stop_ids.tolist())
        # continue from the kept caches, cut at 0, 1, half and all of each response
        sources = [(prompts[0], c) for c in out[0]] + [(prompts[1], c) for c in out[2]]
        cut = lambda c, k: [0, 1, len(c.full_ids) // 2, len(c.full_ids)][k % 4]
        cont = [RolloutRequest(p, n=2, prefix_ids=c.full_ids[:cut(c, k)], max_tokens=5, continue_from=c)
                for k, (p, c) in enumerate(sources)]
        fresh = [RolloutRequest(r.prompt, n=2, prefix_ids=r.prefix_ids, max_tokens=5) for r in cont]
        runs = []
        for rs in (cont, fresh):
            steps.clear()
            runs.append(eng.generate(rs, SamplingParams(temperature=1.2, max_tokens=12, seed=9)))
            _assert_decode_equals_full_forward(lm, rs, runs[-1], steps, atol=1e-9)
        assert eng.stats.get("kv_reused_tokens", 0) > 0
        assert [[c.token_ids for c in r] for r in runs[0]] == [[c.token_ids for c in r] for r in runs[1]]
    lm.model.set_attn_implementation("sdpa_gqa")


def test_requests_without_samples_and_bad_requests(vl):
    p = _prompts(vl)[0]
    eng = _engine(vl)
    params = SamplingParams(temperature=1.0, max_tokens=3, seed=0)
    assert eng.generate([RolloutRequest(p, n=0)], params) == [[]]  # crashed (max() of an empty budget)
    out = eng.generate([RolloutRequest(p, n=0), RolloutRequest(p, n=2)], params)
    assert out[0] == [] and len(out[1]) == 2
    with pytest.raises(ValueError, match="n must be >= 0"):
        eng.generate([RolloutRequest(p, n=-1)], params)
    src = eng.generate([RolloutRequest(p, keep_kv=True)], params)[0][0]
    other = _prompts(vl)[1]  # a different prompt than the kept cache's
    with pytest.raises(ValueError, match="kept KV cache covers"):
        eng.generate([RolloutRequest(other, prefix_ids=src.full_ids[:1], continue_from=src)], params)


def test_seed_reproduces_samples_for_the_same_chunking(vl):
    """generate's documented contract: a seed gives the same samples for the same requests and max_batch_seqs
    (chunks draw from one generator in turn, so another chunking draws other, equally distributed, samples);
    greedy decoding does not depend on the chunking."""
    prompts = _prompts(vl)
    reqs = [RolloutRequest(prompts[0], n=3), RolloutRequest(prompts[1], n=2), RolloutRequest(prompts[0], n=1)]
    params = SamplingParams(temperature=1.0, max_tokens=8, seed=11)
    ids = lambda out: [[c.token_ids for c in r] for r in out]
    for mbs in (64, 3, 1):
        eng = _engine(vl, max_batch_seqs=mbs)
        assert ids(eng.generate(reqs, params)) == ids(eng.generate(reqs, params))
    greedy = SamplingParams(temperature=0.0, max_tokens=8)
    assert ids(_engine(vl, max_batch_seqs=64).generate(reqs, greedy)) == ids(
        _engine(vl, max_batch_seqs=2).generate(reqs, greedy))
