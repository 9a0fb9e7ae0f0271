"""SFT honours the model settings that GRPO honours: ``model.freeze_vision_tower``, ``model.lora`` and
``model.gradient_checkpointing`` (``model.trainable`` stays RL-only, as its doc says). Before, SFT silently trained
every weight whatever these said."""

import pytest
import torch

from mmevo.config import load_config
from mmevo.data.schema import Example
from mmevo.data.synthetic import split_train_heldout
from mmevo.data.text_questions import generate_text_questions
from mmevo.grpo.checkpoint import save_model
from mmevo.grpo.sft import run_sft
from mmevo.models.loader import load_model


def _cfg(path, out, **over):
    base = {"model.path": path, "sft.output_dir": out, "sft.batch_size": 4, "sft.epochs": 1, "sft.save_every": 0,
            "sft.lr": 1e-2, "sft.warmup_steps": 0, "trainer.progress": False, "data.prompt_template": "none"}
    base.update(over)
    return load_config(None, [f"{k}={v}" for k, v in base.items()])


def _weights(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _changed(before, model) -> set[str]:
    return {n for n, p in model.named_parameters() if n in before and not torch.equal(before[n], p.detach())}


def test_sft_keeps_a_frozen_vision_tower_fixed(tiny_vl_path, tmp_path):
    lm = load_model(tiny_vl_path)
    before = _weights(lm.model)
    train, _ = split_train_heldout(8, 0, seed=1)
    run_sft(_cfg(tiny_vl_path, tmp_path, **{"model.freeze_vision_tower": True}), lm, train, log=False)
    changed = _changed(before, lm.model)
    visual = {n for n in before if ".visual." in f".{n}"}
    assert visual and not changed & visual  # every ViT / merger weight as it was
    assert any("language_model" in n for n in changed)  # the language model trained


def test_sft_trains_every_weight_by_default_and_ignores_the_rl_subset(tiny_vl_path, tmp_path):
    lm = load_model(tiny_vl_path)
    before = _weights(lm.model)
    train, _ = split_train_heldout(8, 0, seed=1)
    run_sft(_cfg(tiny_vl_path, tmp_path, **{"model.trainable": "['language_model\\.norm\\.weight']"}), lm, train,
            log=False)
    changed = _changed(before, lm.model)
    assert any(".visual." in f".{n}" for n in changed) and len(changed) > 10


def test_sft_with_lora_trains_adapters_only_and_exports_the_merged_model(tiny_text_path, tmp_path):
    lm = load_model(tiny_text_path)
    qs = generate_text_questions(8, seed=3)
    ex = [Example(f"q{i}", q.question, q.answer, [], [], solution=f"\\boxed{{{q.answer}}}") for i, q in enumerate(qs)]
    cfg = _cfg(tiny_text_path, tmp_path, **{"model.lora.rank": 4, "model.lora.alpha": 8})
    hist = run_sft(cfg, lm, ex, log=False)
    names = dict(lm.model.named_parameters())
    lora = [n for n in names if "lora_" in n]
    assert lora and all(names[n].requires_grad for n in lora)
    assert not any(p.requires_grad for n, p in names.items() if "lora_" not in n)  # the base stays frozen
    assert any(not torch.equal(names[n].detach(), torch.zeros_like(names[n])) for n in lora if "lora_B" in n)
    # the export is the plain model with W + s * B @ A folded in: same log-probs as the adapted model in memory
    out = save_model(tmp_path / "model", lm.model, lm.processor)
    merged = load_model(str(out))
    ids = torch.tensor([lm.tokenizer("what is 3 plus 4 ?")["input_ids"]])
    lm.model.eval()
    with torch.no_grad():
        want = lm.model(input_ids=ids).logits
        got = merged.model(input_ids=ids).logits
        base = load_model(tiny_text_path).model(input_ids=ids).logits
    assert torch.allclose(got, want, atol=1e-5)
    assert not torch.allclose(got, base, atol=1e-3)  # and it is not the untrained base
    assert len(hist) == 2


def test_sft_with_gradient_checkpointing_is_exact(tiny_vl_path, tmp_path):
    train, _ = split_train_heldout(8, 0, seed=1)
    runs = []
    for ckpt in (False, True):
        lm = load_model(tiny_vl_path)
        hist = run_sft(_cfg(tiny_vl_path, tmp_path / str(ckpt), **{"model.gradient_checkpointing": ckpt}), lm, train,
                       log=False)
        assert getattr(lm.model, "is_gradient_checkpointing", False) is ckpt
        runs.append(([m["sft/loss"] for m in hist], _weights(lm.model)))
    (loss_a, w_a), (loss_b, w_b) = runs
    assert loss_b == pytest.approx(loss_a, rel=1e-5)
    assert all(torch.allclose(w_a[n], w_b[n], atol=1e-6) for n in w_a)
