"""The HF engine's fused decode step (``mmevo/rollout/fused_decode.py``): float32 Qwen2 / Qwen2.5-VL layers on CPU
with q/k/v and gate/up fused into one oneDNN matmul each.

Its logits equal the lean step's (which equal the model's forward bit for bit, tests/test_lean_step.py) to float32
rounding at every decode step, from the same KV cache and the same tokens, also after rows leave the batch; the keys /
values it appends to the cache too. Models it does not cover (bf16, LoRA, Qwen3's q / k norms, hooks) get None and keep
the lean step."""

import copy

import pytest
import torch
from conftest import decode_text_requests, decode_vl_requests, hf_engine, randomized_model

from mmevo.models.cpu_linear import use_cpu_linear
from mmevo.rollout.base import SamplingParams
from mmevo.rollout import fused_decode
from mmevo.rollout.fused_decode import FusedDecodeStep
from mmevo.rollout.kv_cache import SharedPrefixCache
from mmevo.rollout.lean_step import LeanDecodeStep


def _varied(lm, seed=3):
    """Non-trivial biases and norm weights as well (``randomized_model`` leaves 1-D parameters at their init)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in lm.model.named_parameters():
            if p.dim() == 1:
                p.copy_((1.0 if "norm" in name else 0.0) + torch.randn(p.shape, generator=g) * 0.3)
    return lm


@torch.no_grad()
def _compare_steps(lm, requests, steps=16, drop_at=6, kernel="onednn"):
    """Drive the lean and the fused step from one prefill with the same tokens (the lean step's argmax); at
    ``drop_at`` rows 0 and 3 leave the batch. Returns the largest |logit difference| over the logits' scale."""
    model = lm.model.eval()
    engine = hf_engine(lm, fused_decode=False)
    last, cache, attn, next_pos, _ = engine._prefill(model, requests)
    row_of = torch.repeat_interleave(torch.arange(len(requests)), torch.tensor([r.n for r in requests]))
    lean_cache = SharedPrefixCache(cache, attn, row_of)
    fused_cache = copy.deepcopy(lean_cache)
    lean, fused = LeanDecodeStep.build(model), FusedDecodeStep.build(model, rows=row_of.numel(), kernel=kernel)
    assert lean is not None and fused is not None
    tok, pos = last[row_of].argmax(-1), next_pos[row_of]
    worst = 0.0
    for step in range(steps):
        if step == drop_at:
            keep = torch.tensor([i for i in range(tok.numel()) if i not in (0, 3)])
            lean_cache.batch_select_indices(keep)
            fused_cache.batch_select_indices(keep)
            tok, pos = tok[keep], pos[keep]
        a, b = lean(tok, pos, lean_cache), fused(tok, pos, fused_cache)
        assert a.shape == b.shape == (tok.numel(), model.config.get_text_config().vocab_size)
        worst = max(worst, float((a - b).abs().max() / a.abs().max()))
        tok, pos = a.argmax(-1), pos + 1
    for li in range(len(lean_cache.layers)):
        for x, y in ((lean_cache.layers[li].keys, fused_cache.layers[li].keys),
                     (lean_cache.layers[li].values, fused_cache.layers[li].values)):
            assert x.shape == y.shape and torch.allclose(x, y, atol=1e-4 * float(x.abs().max()))
    return worst


def test_vl_logits_equal_the_lean_steps(tiny_vl_path):
    lm = _varied(randomized_model(tiny_vl_path))
    assert _compare_steps(lm, decode_vl_requests(lm)) < 1e-5


def test_text_qwen2_logits_equal_the_lean_steps(tiny_text_path):
    lm = _varied(randomized_model(tiny_text_path))
    assert _compare_steps(lm, decode_text_requests(lm)) < 1e-5


@pytest.mark.parametrize("path", ["tiny_vl_path", "tiny_text_path"])
def test_the_f_linear_kernel_gives_the_lean_steps_logits_without_onednn(path, request, monkeypatch):
    """kernel="torch" (model.cpu_linear resolved to F.linear, the default on Intel CPUs): the same fused step with
    plain weights and F.linear matmuls; no oneDNN linear runs, and a build without oneDNN still gets it."""
    lm = _varied(randomized_model(request.getfixturevalue(path)))
    requests = decode_vl_requests(lm) if path == "tiny_vl_path" else decode_text_requests(lm)

    def no_onednn(*a, **k):
        raise AssertionError("a oneDNN linear ran under kernel='torch'")

    monkeypatch.setitem(fused_decode._KERNELS, "onednn", no_onednn)
    monkeypatch.setattr(fused_decode, "_onednn_linear", no_onednn)
    monkeypatch.setattr(fused_decode, "onednn_linear_available", lambda: False)
    assert FusedDecodeStep.build(lm.model, kernel="onednn") is None
    step = FusedDecodeStep.build(lm.model, rows=8, kernel="torch")
    assert step is not None and step.kernel == "torch"
    assert torch.equal(step.head, lm.model.lm_head.weight)  # plain, not oneDNN's blocked layout
    assert _compare_steps(lm, requests, kernel="torch") < 1e-5


def test_onednn_linear_layers_qualify(tiny_vl_path):
    """The trainer swaps float32 CPU linears to ``OneDNNLinear`` (``model.cpu_linear``): the same weights."""
    lm = _varied(randomized_model(tiny_vl_path))
    assert use_cpu_linear(lm.model, "onednn") > 0
    assert _compare_steps(lm, decode_vl_requests(lm), steps=6) < 1e-5


def test_models_it_does_not_cover_get_none(tiny_vl_path, tiny_text_path, tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3Config

    from mmevo.models.adapters import apply_lora

    bf16 = randomized_model(tiny_vl_path)
    bf16.model.to(torch.bfloat16)
    assert LeanDecodeStep.build(bf16.model) is not None and FusedDecodeStep.build(bf16.model) is None
    lora = randomized_model(tiny_vl_path)
    apply_lora(lora.model, rank=4, alpha=8.0, dropout=0.0, target_modules=["q_proj", "down_proj"])
    assert FusedDecodeStep.build(lora.model) is None
    hooked = randomized_model(tiny_text_path)
    hooked.model.model.layers[1].mlp.up_proj.register_forward_hook(lambda m, i, o: o * 2)
    assert LeanDecodeStep.build(hooked.model) is not None and FusedDecodeStep.build(hooked.model) is None
    base = AutoModelForCausalLM.from_pretrained(tiny_text_path).config
    config = Qwen3Config(vocab_size=base.vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(tiny_text_path).save_pretrained(tmp_path)
    qwen3 = randomized_model(tmp_path)
    assert LeanDecodeStep.build(qwen3.model) is not None and FusedDecodeStep.build(qwen3.model) is None
    big = randomized_model(tiny_text_path)  # its weights copied would pass the cap: lean step (no second copy)
    assert FusedDecodeStep.build(big.model) is not None
    monkeypatch.setattr(fused_decode, "MAX_COPY_BYTES", 4 * big.model.lm_head.weight.numel())
    assert FusedDecodeStep.build(big.model) is None


def test_engine_samples_through_it_by_default_and_the_flag_turns_it_off(tiny_vl_path, monkeypatch):
    """Same seed, same uniforms: the fused engine's samples follow the lean engine's except where float32 rounding
    moves a draw across a token boundary (rare); the log-probs of every token both drew agree to rounding."""
    from mmevo.rollout import hf as hf_module

    lm = _varied(randomized_model(tiny_vl_path))
    calls = []
    real_call = FusedDecodeStep.__call__
    monkeypatch.setattr(hf_module.FusedDecodeStep, "__call__", lambda self, *a: calls.append(1) or real_call(self, *a))
    params = SamplingParams(temperature=1.0, max_tokens=20, seed=5)
    fused = hf_engine(lm).generate(decode_vl_requests(lm), params)
    assert len(calls) == 19
    lean = hf_engine(lm, fused_decode=False).generate(decode_vl_requests(lm), params)
    assert len(calls) == 19
    same = total = 0
    for gf, gl in zip(fused, lean):
        for cf, cl in zip(gf, gl):
            n = next((i for i, (a, b) in enumerate(zip(cf.token_ids, cl.token_ids)) if a != b), len(cf.token_ids))
            same, total = same + n, total + len(cf.token_ids)
            assert torch.allclose(torch.tensor(cf.logprobs[:n]), torch.tensor(cl.logprobs[:n]), atol=1e-4)
    assert same >= 0.9 * total, (same, total)


def _scaled_mlp_class(base):
    """A subclass of the MLP class ``base`` whose forward triples the output (the submodules are the same)."""
    return type("ScaledMLP", (base,), {"forward": lambda self, x: base.forward(self, x) * 3})


@pytest.mark.parametrize("edit", ["hook_on_act_fn", "mlp_subclass", "forward_set_on_a_linear"])
def test_edited_modules_keep_the_lean_step(tiny_text_path, edit):
    """A module whose call computes something else than its Qwen2 class (a hook on the activation, an MLP of another
    class with the same submodules, accelerate-style ``forward`` set on an instance): the fused step, which computes
    the layer from the weights, must not run; the engine's default samples are the lean step's, bit for bit."""
    lm = _varied(randomized_model(tiny_text_path))
    mlp = lm.model.model.layers[0].mlp
    if edit == "hook_on_act_fn":
        mlp.act_fn.register_forward_hook(lambda m, args, out: out * 3)
    elif edit == "mlp_subclass":
        mlp.__class__ = _scaled_mlp_class(type(mlp))
    else:
        unscaled = mlp.down_proj.forward
        mlp.down_proj.forward = lambda x: unscaled(x) * 3
    assert LeanDecodeStep.build(lm.model) is not None and FusedDecodeStep.build(lm.model) is None
    params = SamplingParams(temperature=0.0, max_tokens=12)
    default = hf_engine(lm).generate(decode_text_requests(lm), params)
    lean = hf_engine(lm, fused_decode=False).generate(decode_text_requests(lm), params)
    streams = [[(c.token_ids, c.logprobs) for c in g] for g in default]
    assert streams == [[(c.token_ids, c.logprobs) for c in g] for g in lean]


def test_transformers_output_capturing_hooks_keep_the_fused_step(tiny_vl_path):
    """The first forward asked for hidden states installs transformers' output-capturing hooks on every decoder layer
    and attention for good (they record inside such a forward only): the fused step still applies (it was the lean
    step from then on), with the same samples as before those hooks."""
    lm = _varied(randomized_model(tiny_vl_path))
    params = SamplingParams(temperature=1.0, max_tokens=10, seed=2)
    before = hf_engine(lm).generate(decode_vl_requests(lm), params)
    with torch.no_grad():
        out = lm.model(input_ids=lm.tokenizer("What is 2 + 3?", return_tensors="pt").input_ids,
                       output_hidden_states=True)
    layers = lm.model.model.language_model.layers
    assert len(out.hidden_states) == len(layers) + 1
    assert all(layer._forward_hooks and layer.self_attn._forward_hooks for layer in layers)
    assert FusedDecodeStep.build(lm.model) is not None
    after = hf_engine(lm).generate(decode_vl_requests(lm), params)
    assert [[(c.token_ids, c.logprobs) for c in g] for g in after] == \
        [[(c.token_ids, c.logprobs) for c in g] for g in before]


@pytest.mark.parametrize("vendor, choice, kernel", [("AuthenticAMD", "auto", "onednn"), ("GenuineIntel", "auto", "torch"),
                                                    ("AuthenticAMD", "torch", "torch"),
                                                    ("GenuineIntel", "onednn", "onednn")])
def test_model_cpu_linear_sets_the_fused_steps_kernel_in_the_configured_engine(tiny_text_path, monkeypatch, vendor,
                                                                              choice, kernel):
    """The fused step's projections take the kernel model.cpu_linear resolves to: a run that asked for F.linear
    (model.cpu_linear=torch) gets no oneDNN matmuls in its rollouts either; auto is F.linear on Intel CPUs."""
    from mmevo.config import load_config
    from mmevo.models import cpu_linear
    from mmevo.models.loader import load_model
    from mmevo.rollout.factory import build_engine

    monkeypatch.setattr(cpu_linear, "cpu_vendor", lambda: vendor)
    cfg = load_config(None, ["rollout.engine=hf", f"model.cpu_linear={choice}"])
    engine = build_engine(cfg, load_model(tiny_text_path))
    assert engine.fused_decode is True and engine.decode_linear == kernel
