"""Review of model loading, LoRA, export, the tiny builds and the SFT loop: expected values computed independently
(plain torch formulas, PEFT's own merge, transformers' Auto classes), never by the code under test."""

import json

import pytest
import torch
import torch.nn.functional as F

from conftest import randomize
from mmevo.config import load_config
from mmevo.data.schema import Example
from mmevo.grpo.checkpoint import save_model
from mmevo.grpo.sft import run_sft
from mmevo.models.adapters import apply_lora
from mmevo.models.loader import load_model
from mmevo.models.weights import full_state_items


def _sft_cfg(path, out, **over):
    base = {"model.path": path, "sft.output_dir": out, "sft.batch_size": 3, "sft.epochs": 2, "sft.save_every": 0,
            "sft.lr": 1e-3, "sft.warmup_steps": 2, "trainer.progress": False, "data.prompt_template": "none"}
    base.update(over)
    return load_config(None, [f"{k}={v}" for k, v in base.items()])


def _text_examples(n):
    return [Example(f"t{i}", f"What is {i} plus {i}?", str(2 * i), [], [], solution=f"<think>{i}+{i}</think> "
                    f"\\boxed{{{2 * i}}}") for i in range(n)]


# -- SFT ------------------------------------------------------------------------------------------------------------
def test_sft_logs_the_lr_each_update_used(tiny_text_path, tmp_path, monkeypatch):
    """6 examples, batch 3, 2 epochs: 4 updates; warm-up 2 then cosine over the remaining 2 (make_scheduler):
    factors (0+1)/2, (1+1)/2, 0.5(1+cos 0), 0.5(1+cos(pi/2)) = 0.5, 1, 1, 0.5."""
    used = []
    orig = torch.optim.AdamW.step

    def record(self, *a, **k):
        used.append(self.param_groups[0]["lr"])
        return orig(self, *a, **k)

    monkeypatch.setattr(torch.optim.AdamW, "step", record)
    cfg = _sft_cfg(tiny_text_path, tmp_path)
    hist = run_sft(cfg, load_model(tiny_text_path), _text_examples(6), log=False)
    expected = [5e-4, 1e-3, 1e-3, 5e-4]
    assert used == pytest.approx(expected, rel=1e-12)
    assert [m["sft/lr"] for m in hist] == pytest.approx(expected, rel=1e-12)  # was the next update's: 1e-3, ..., 0


def test_sft_loss_is_the_token_mean_nll_of_the_responses_only(tiny_text_path, tmp_path):
    """The first logged loss equals an independent full forward over prompt + solution + <|im_end|>, cross-entropy
    on the response tokens only (logits at position t-1 predict token t), averaged over all response tokens."""
    lm = load_model(tiny_text_path)
    randomize(lm.model, std=0.1, seed=4)
    cfg = _sft_cfg(tiny_text_path, tmp_path, **{"sft.epochs": 1, "sft.batch_size": 2})
    exs = _text_examples(4)
    order = torch.randperm(4, generator=torch.Generator().manual_seed(cfg.trainer.seed)).tolist()[:2]
    tok, end = lm.tokenizer, lm.tokenizer.convert_tokens_to_ids("<|im_end|>")
    nll, n = 0.0, 0
    with torch.no_grad():
        for i in order:
            text = tok.apply_chat_template([{"role": "user", "content": exs[i].problem}], add_generation_prompt=True,
                                           tokenize=False)
            prompt = tok(text, add_special_tokens=False)["input_ids"]
            target = tok(exs[i].solution, add_special_tokens=False)["input_ids"] + [end]
            logits = lm.model(input_ids=torch.tensor([prompt + target])).logits[0].double()
            lp = F.log_softmax(logits[len(prompt) - 1:-1], -1).gather(-1, torch.tensor(target)[:, None])
            nll -= float(lp.sum())
            n += len(target)
    hist = run_sft(cfg, lm, exs, log=False)
    assert hist[0]["sft/loss"] == pytest.approx(nll / n, rel=1e-5)


def test_sft_without_examples_is_a_clear_error(tiny_text_path, tmp_path):
    with pytest.raises(ValueError, match="at least one example"):  # was an IndexError in the batch loop
        run_sft(_sft_cfg(tiny_text_path, tmp_path), load_model(tiny_text_path), [], log=False)


# -- LoRA -----------------------------------------------------------------------------------------------------------
def _lora_text_model(path, targets=("q_proj", "v_proj", "gate_proj", "o_proj"), dropout=0.1):
    lm = load_model(path)
    randomize(lm.model, std=0.15, seed=3)
    torch.manual_seed(0)
    apply_lora(lm.model, 4, 8.0, dropout, list(targets))
    with torch.no_grad():
        for n, p in lm.model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    return lm


def test_lora_merge_is_w_plus_alpha_over_r_b_a_equals_peft_and_never_accumulates(tiny_text_path):
    from peft.tuners.lora import LoraLayer

    lm = _lora_text_model(tiny_text_path)
    base = lm.model
    q = base.model.layers[1].self_attn.q_proj
    W, A, B, bias = (q.base_layer.weight.detach().clone(), q.lora_A["default"].weight.detach().clone(),
                     q.lora_B["default"].weight.detach().clone(), q.base_layer.bias.detach().clone())
    first = dict(full_state_items(base))
    second = dict(full_state_items(base))  # a second sync: the same weights, the delta is not applied twice
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert not any("lora_" in k or "base_layer" in k for k in first)
    assert torch.allclose(first["model.layers.1.self_attn.q_proj.weight"], W + (8.0 / 4) * B @ A, atol=1e-6)
    assert torch.equal(first["model.layers.1.self_attn.q_proj.bias"], bias)  # the base bias, unchanged
    assert torch.equal(q.base_layer.weight, W)  # the base weight itself never changes
    for mod in base.modules():  # PEFT's own merge (float32): bit for bit the same weights
        if isinstance(mod, LoraLayer):
            mod.merge()
    peft = {k.replace(".base_layer", ""): v for k, v in base.state_dict().items() if "lora_" not in k}
    assert peft.keys() == first.keys()
    assert all(torch.equal(peft[k], first[k]) for k in first)


def test_lora_export_reloads_with_plain_transformers_tied_and_with_the_same_logits(tiny_text_path, tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    lm = _lora_text_model(tiny_text_path)
    out = save_model(tmp_path / "export", lm.model, lm.tokenizer)
    names = load_file(out / "model.safetensors").keys()
    assert names and not any("lora_" in k or "base_layer" in k for k in names)
    plain = AutoModelForCausalLM.from_pretrained(out)
    assert plain.lm_head.weight.data_ptr() == plain.get_input_embeddings().weight.data_ptr()  # still tied
    ids = torch.tensor([[5, 6, 7, 8, 9, 10, 11]])
    lm.model.eval()  # LoRA dropout off: the adapted model's function
    with torch.no_grad():
        a, b = lm.model(input_ids=ids).logits, plain(input_ids=ids).logits
    assert (a - b).abs().max() < 1e-4


@pytest.mark.parametrize("targets", [["embed_tokens"], ["q_proj", "embed_tokens"]])
def test_lora_on_a_non_linear_module_is_refused_when_injected(tiny_text_path, targets):
    """An embedding adapter used to train and then fail at the first sync / checkpoint / export ("missing A, B")."""
    lm = load_model(tiny_text_path)
    with pytest.raises(ValueError, match=r"target_modules=.*embed_tokens.*linear"):
        apply_lora(lm.model, 4, 8.0, 0.0, targets)


# -- frozen vision tower --------------------------------------------------------------------------------------------
def test_frozen_vision_export_keeps_the_vision_weights_bit_for_bit(tiny_vl_path, tmp_path):
    from safetensors.torch import load_file

    from mmevo.grpo.trainer import make_optimizer
    from mmevo.models.adapters import freeze_vision_tower

    lm = load_model(tiny_vl_path)
    freeze_vision_tower(lm.model)
    on_disk = load_file(tiny_vl_path / "model.safetensors")
    opt = make_optimizer(lm.model, 1e-2, 0.1)
    for p in lm.model.parameters():  # every trainable weight gets a gradient; decay would move frozen ones too
        if p.requires_grad:
            p.grad = torch.ones_like(p)
    opt.step()
    out = load_file(save_model(tmp_path / "frozen", lm.model, lm.processor) / "model.safetensors")
    vis = [k for k in on_disk if k.startswith(("visual.", "model.visual."))]
    assert vis and all(torch.equal(out[k], on_disk[k]) for k in vis)
    assert any(not torch.equal(out[k], on_disk[k]) for k in on_disk if k not in vis)


# -- tiny builds ----------------------------------------------------------------------------------------------------
def test_a_cached_tiny_model_of_other_sizes_is_refused(tiny_text_path, tmp_path):
    from mmevo.models.tiny import SPEC_FILE, TinyTextSpec, build_tiny_qwen2, build_tiny_qwen2_5_vl

    assert build_tiny_qwen2(tiny_text_path) == tiny_text_path  # the same spec: reused
    assert json.loads((tiny_text_path / SPEC_FILE).read_text())["hidden_size"] == 128
    with pytest.raises(ValueError, match="hidden_size"):  # was: the 128-wide model silently returned
        build_tiny_qwen2(tiny_text_path, spec=TinyTextSpec(hidden_size=64))
    with pytest.raises(ValueError, match="TinyVLSpec"):  # a text model is not a VL model
        build_tiny_qwen2_5_vl(tiny_text_path)
