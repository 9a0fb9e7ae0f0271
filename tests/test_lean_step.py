"""The HF engine's lean decode step: the same logits, bit for bit, as the model's own forward.

Each case samples the same requests twice with one seed, once through ``LeanDecodeStep`` and once through the
model's forward (``LeanDecodeStep.build`` patched to None), and compares every token and log-prob exactly: a sampled
token follows from its row's logits, so equal streams over hundreds of draws mean equal logits at every step. Cases:
the tiny Qwen2.5-VL (multimodal rope, images), the tiny Qwen2 text model, a Qwen3 (q / k norms, no biases), LoRA
layers, bf16, and a rope the lean step leaves to the model's rotary module (yarn).
"""

import pytest
import torch
from conftest import decode_text_requests, decode_vl_requests, hf_engine, randomize, randomized_model

from mmevo.models.loader import load_model
from mmevo.rollout import hf as hf_module
from mmevo.rollout.base import SamplingParams
from mmevo.rollout.lean_step import LeanDecodeStep


def _sample(lm, requests, monkeypatch, lean: bool, max_tokens=24):
    """(token ids, log-probs) of every completion, and how many lean steps ran."""
    real_build = LeanDecodeStep.build
    calls = []

    def build(model):
        step = real_build(model) if lean else None
        if step is None:
            return None

        def counted(*args):
            calls.append(1)
            return step(*args)
        return counted

    monkeypatch.setattr(hf_module.LeanDecodeStep, "build", staticmethod(build))
    engine = hf_engine(lm, max_batch_seqs=64, fused_decode=False)  # the fused step: tests/test_fused_decode.py
    out = engine.generate(requests, SamplingParams(temperature=1.0, max_tokens=max_tokens, seed=7))
    return [[(c.token_ids, c.logprobs) for c in group] for group in out], len(calls)


def _assert_same_stream(lm, requests, monkeypatch, max_tokens=24):
    # a dynamic rope's module keeps the frequencies of the longest sequence it saw: both runs start from the same
    rotary = [(m, m.inv_freq.clone(), getattr(m, "max_seq_len_cached", None)) for m in lm.model.modules()
              if type(m).__name__.endswith("RotaryEmbedding") and hasattr(m, "inv_freq")]
    lean, n_lean = _sample(lm, requests, monkeypatch, lean=True, max_tokens=max_tokens)
    for m, inv_freq, cached in rotary:
        m.inv_freq.copy_(inv_freq)
        m.max_seq_len_cached = cached
    model, n_model = _sample(lm, requests, monkeypatch, lean=False, max_tokens=max_tokens)
    assert n_model == 0 and n_lean >= max_tokens - 1  # the lean step ran every decode step of the first case only
    tokens = sum(len(ids) for group in lean for ids, _ in group)
    assert tokens > 100
    assert lean == model


@pytest.fixture(scope="module")
def vl(tiny_vl_path):
    return randomized_model(tiny_vl_path)


def test_vl_model_streams_are_identical(vl, monkeypatch):
    assert LeanDecodeStep.build(vl.model) is not None
    _assert_same_stream(vl, decode_vl_requests(vl), monkeypatch)


def test_vl_model_in_bf16(tiny_vl_path, monkeypatch):
    lm = load_model(tiny_vl_path, dtype="bfloat16")
    randomize(lm.model)
    lm.model.eval()
    _assert_same_stream(lm, decode_vl_requests(lm), monkeypatch)


def test_text_qwen2_streams_are_identical(tiny_text_path, monkeypatch):
    lm = randomized_model(tiny_text_path)
    _assert_same_stream(lm, decode_text_requests(lm), monkeypatch)


def test_lora_layers_are_called_as_modules(tiny_vl_path, monkeypatch):
    from mmevo.models.adapters import apply_lora

    lm = randomized_model(tiny_vl_path)
    apply_lora(lm.model, rank=4, alpha=8.0, dropout=0.0, target_modules=["q_proj", "v_proj", "down_proj"])
    with torch.no_grad():  # non-zero B matrices: the adapters change the logits
        for name, p in lm.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    lm.model.eval()
    _assert_same_stream(lm, decode_vl_requests(lm), monkeypatch)


def _saved_text_model(tiny_text_path, tmp_path, config):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(tiny_text_path).save_pretrained(tmp_path)
    return randomized_model(tmp_path)


def _text_config(cls, tiny_text_path, **kw):
    from transformers import AutoConfig

    base = AutoConfig.from_pretrained(tiny_text_path)
    return cls(vocab_size=base.vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
               bos_token_id=base.bos_token_id, eos_token_id=base.eos_token_id, pad_token_id=base.pad_token_id, **kw)


def test_qwen3_with_qk_norms(tiny_text_path, tmp_path, monkeypatch):
    from transformers import Qwen3Config

    lm = _saved_text_model(tiny_text_path, tmp_path, _text_config(Qwen3Config, tiny_text_path, head_dim=16))
    assert type(lm.model).__name__ == "Qwen3ForCausalLM" and LeanDecodeStep.build(lm.model).local_rope
    _assert_same_stream(lm, decode_text_requests(lm), monkeypatch)


@pytest.mark.parametrize("rope", [
    # yarn scales cos / sin by its attention factor
    {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 16},
    # dynamic NTK recomputes inv_freq inside the module's forward once positions pass max_position_embeddings (16)
    {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
], ids=["yarn", "dynamic"])
def test_other_rope_types_go_through_the_rotary_module(tiny_text_path, tmp_path, monkeypatch, rope):
    from transformers import Qwen2Config

    config = _text_config(Qwen2Config, tiny_text_path, rope_parameters=rope)
    config.max_position_embeddings = 16  # the prompts are longer: every decode step is past it
    lm = _saved_text_model(tiny_text_path, tmp_path, config)
    step = LeanDecodeStep.build(lm.model)
    assert step is not None and not step.local_rope
    _assert_same_stream(lm, decode_text_requests(lm), monkeypatch)


def test_local_rope_applies_the_attention_scaling(tiny_text_path, monkeypatch):
    """A default rope has scaling 1; set another on the module: the lean step must follow the module's value."""
    lm = randomized_model(tiny_text_path)
    monkeypatch.setattr(lm.model.model.rotary_emb, "attention_scaling", 1.5)
    assert LeanDecodeStep.build(lm.model).local_rope
    _assert_same_stream(lm, decode_text_requests(lm), monkeypatch)


def test_models_it_does_not_recognise_keep_their_forward(tiny_text_path, tmp_path):
    from transformers import LlamaConfig, Qwen2Config

    llama = _saved_text_model(tiny_text_path, tmp_path / "llama", _text_config(LlamaConfig, tiny_text_path))
    assert LeanDecodeStep.build(llama.model) is None
    sliding = _text_config(Qwen2Config, tiny_text_path, use_sliding_window=True, sliding_window=16,
                           max_window_layers=1)
    lm = _saved_text_model(tiny_text_path, tmp_path / "sliding", sliding)
    assert "sliding_attention" in lm.model.config.layer_types
    assert LeanDecodeStep.build(lm.model) is None
    plain = load_model(tiny_text_path).model
    assert LeanDecodeStep.build(plain) is not None
    next(plain.parameters()).ds_id = 0  # what DeepSpeed ZeRO-3 marks its partitioned parameters with
    assert LeanDecodeStep.build(plain) is None


def test_engine_flag_turns_the_lean_step_off(vl, monkeypatch):
    built = []
    real_build = LeanDecodeStep.build
    monkeypatch.setattr(hf_module.LeanDecodeStep, "build", staticmethod(lambda m: built.append(1) or real_build(m)))
    params = SamplingParams(temperature=1.0, max_tokens=6, seed=3)
    off = hf_engine(vl, lean_decode=False).generate(decode_vl_requests(vl), params)
    assert built == []
    on = hf_engine(vl, fused_decode=False).generate(decode_vl_requests(vl), params)
    assert built == [1]
    assert [[c.token_ids for c in g] for g in on] == [[c.token_ids for c in g] for g in off]


def test_bench_decode_script_compares_both_variants(tiny_vl_path, tmp_path):
    import os

    from conftest import load_script

    os.symlink(tiny_vl_path, tmp_path / "tiny-qwen2.5-vl")
    bench = load_script("bench_decode")
    res = bench.measure(bench.parse_args(["--prompts", "2", "--n", "3", "--max-tokens", "5", "--repeats", "2",
                                          "--cache-dir", str(tmp_path)]))
    assert res["identical_samples"] is True
    assert len(res["lean_s_all"]) == len(res["forward_s_all"]) == 2
    assert res["ratio_lean_over_forward"] == res["lean_s_median"] / res["forward_s_median"] > 0
    assert len(res["fused_s_all"]) == 2 and res["ratio_fused_over_forward"] > 0
    assert 0 <= res["fused_same_tokens_frac"] <= 1


def test_a_hooked_rotary_module_is_called(tiny_text_path, monkeypatch):
    """A forward hook on the rotary module changes the forward's cos / sin: the lean step calls the module (its own
    cos / sin would skip the hook)."""
    lm = randomized_model(tiny_text_path)
    lm.model.model.rotary_emb.register_forward_hook(lambda m, args, out: (out[0] * 0.5, out[1] * 0.5))
    assert not LeanDecodeStep.build(lm.model).local_rope
    _assert_same_stream(lm, decode_text_requests(lm), monkeypatch)


@pytest.mark.parametrize("kind", ["text", "vl"])
def test_hooks_on_the_decoder_keep_the_models_forward(tiny_text_path, tiny_vl_path, kind):
    """A forward hook on the decoder (or the multimodal model around it), whose forward the lean step does not call:
    the engine decodes through the model's forward, so the hook runs at every step as it does in the prefill."""
    lm = randomized_model(tiny_text_path if kind == "text" else tiny_vl_path)

    def shift(module, args, out):
        out.last_hidden_state.add_(0.5)

    lm.model.model.register_forward_hook(shift)
    assert LeanDecodeStep.build(lm.model) is None
    requests = decode_text_requests(lm) if kind == "text" else decode_vl_requests(lm)
    params = SamplingParams(temperature=1.0, max_tokens=12, seed=4)
    default = hf_engine(lm).generate(requests, params)
    forward = hf_engine(lm, lean_decode=False).generate(requests, params)
    assert [[(c.token_ids, c.logprobs) for c in g] for g in default] == \
        [[(c.token_ids, c.logprobs) for c in g] for g in forward]
