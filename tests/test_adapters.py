"""Frozen vision tower and LoRA (PEFT): what trains, merged weights for sync / export / vLLM, checkpoints."""

import pytest
import torch

from conftest import randomize
from mmevo.config import load_config
from mmevo.data.synthetic import split_train_heldout
from mmevo.grpo.checkpoint import latest_checkpoint
from mmevo.grpo.trainer import GRPOTrainer
from mmevo.models.adapters import apply_lora, merge_lora_items
from mmevo.models.inputs import collate
from mmevo.models.loader import load_model
from mmevo.models.weights import full_state_items
from mmevo.rollout.factory import build_engine


def _cfg(out, **over):
    base = {"data.prompt_template": "none", "rollout.n": 3, "rollout.max_tokens": 8, "trainer.prompts_per_step": 2,
            "trainer.mini_batch_prompts": 1, "trainer.micro_batch_seqs": 4, "trainer.lr": 1e-2, "trainer.steps": 2,
            "trainer.output_dir": str(out), "trainer.wandb_mode": "disabled", "trainer.progress": False,
            "trainer.save_every": 1, "algo.kl_coef": 0, "trainer.seed": 2,
            "reward.heads": "{loop_plugins:LengthHead: 1.0}"}
    base.update(over)
    return load_config(None, [f"{k}={v}" for k, v in base.items()])


def _trainer(cfg, path, train):
    torch.manual_seed(cfg.trainer.seed)  # as recipes.load_policy: dropout masks are drawn from the run's seed
    lm = load_model(path)
    randomize(lm.model, std=0.15, seed=3)
    return GRPOTrainer(cfg, lm, build_engine(cfg, lm), train, [], log=False)


@pytest.fixture(scope="module")
def train():
    return split_train_heldout(8, 0, seed=1)[0]


def _logits(model, lm, prompt):
    with torch.no_grad():
        return model(**collate(model, [prompt], None, lm.tokenizer.pad_token_id).model_kwargs()).logits[0, -1]


def test_lora_adapts_only_the_language_model_and_merges_exactly(tiny_vl_path, train):
    lm = load_model(tiny_vl_path)
    randomize(lm.model, std=0.15, seed=3)
    apply_lora(lm.model, 4, 8.0, 0.0, ["q_proj", "v_proj", "gate_proj"])
    trainable = [n for n, p in lm.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n and "visual" not in n for n in trainable)
    assert any("mlp.gate_proj.lora_A" in n for n in trainable)  # the LM's MLP, not the ViT's same-named one
    with torch.no_grad():  # B starts at 0 (merged = base); give the adapters a real effect
        for n, p in lm.model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    merged = dict(full_state_items(lm.model))
    plain = load_model(tiny_vl_path).model
    assert merged.keys() == plain.state_dict().keys()  # the plain model's names, no lora_* / base_layer
    plain.load_state_dict(merged, strict=True)
    from mmevo.models.inputs import encode_prompt

    prompt = encode_prompt(lm.processor, True, train[0].problem, train[0].images)
    a, b = _logits(lm.model, lm, prompt), _logits(plain, lm, prompt)
    base = load_model(tiny_vl_path).model
    randomize(base, std=0.15, seed=3)
    assert (a - _logits(base, lm, prompt)).abs().max() > 1e-2  # the adapters change the outputs ...
    assert torch.allclose(a, b, atol=1e-4)  # ... and the merged plain model reproduces them


def test_merge_accepts_any_order_and_reports_missing_parts():
    W, A, B, bias = torch.ones(3, 2), torch.ones(1, 2), torch.full((3, 1), 2.0), torch.zeros(3)
    items = [("m.lora_B.default.weight", B), ("x", torch.zeros(1)), ("m.base_layer.bias", bias),
             ("m.lora_A.default.weight", A), ("m.base_layer.weight", W)]
    out = dict(merge_lora_items(items, {"m": 0.5}))
    assert set(out) == {"x", "m.weight", "m.bias"}
    assert torch.equal(out["m.weight"], torch.full((3, 2), 2.0))  # 1 + 0.5 * (2 * 1)
    with pytest.raises(RuntimeError, match="missing"):
        list(merge_lora_items(items[:2], {"m": 0.5}))


def test_grpo_with_lora_trains_adapters_exports_merged_and_resumes(tiny_vl_path, tmp_path, train):
    # with dropout: the resumed step draws its masks from the checkpoint's RNG state (else it differs from run a's)
    over = {"model.lora.rank": 4, "model.lora.alpha": 8, "model.lora.dropout": 0.3, "trainer.steps": 3}
    a = _trainer(_cfg(tmp_path / "a", **over), tiny_vl_path, train)
    base_before = {n: p.clone() for n, p in a.model.named_parameters() if not p.requires_grad}
    hist_a = a.train()
    assert all(torch.equal(p, base_before[n]) for n, p in a.model.named_parameters() if n in base_before)
    assert any(float(p.abs().sum()) > 0 for n, p in a.model.named_parameters() if "lora_B" in n)  # adapters moved
    assert sum(len(g["params"]) for g in a.optimizer.param_groups) == sum(
        p.requires_grad for p in a.model.parameters())  # the optimizer holds the adapters only
    out = a.export(tmp_path / "final")
    exported = load_model(out).model.state_dict()
    merged = dict(full_state_items(a.model))
    assert all(torch.allclose(exported[k], merged[k]) for k in merged)
    # 2 steps, then a new trainer resumes the adapters and optimizer from the checkpoint: step 3 as in run a
    _trainer(_cfg(tmp_path / "b", **{**over, "trainer.steps": 2}), tiny_vl_path, train).train()
    assert "lora" in torch.load(latest_checkpoint(tmp_path / "b") / "trainer_state.pt", weights_only=False)
    hist_b = _trainer(_cfg(tmp_path / "b", **over), tiny_vl_path, train).train()
    for key in ("actor/loss", "actor/grad_norm", "reward/total/mean"):
        assert hist_b[0][key] == pytest.approx(hist_a[2][key], rel=1e-5, abs=1e-7), key


def test_frozen_vision_tower_stays_fixed(tiny_vl_path, tmp_path, train):
    tr = _trainer(_cfg(tmp_path, **{"model.freeze_vision_tower": True, "trainer.steps": 1}), tiny_vl_path, train)
    before = {n: p.clone() for n, p in tr.model.named_parameters()}
    tr.train()
    after = dict(tr.model.named_parameters())
    vis = [n for n in before if ".visual." in f".{n}"]
    assert vis and all(torch.equal(before[n], after[n]) for n in vis)
    assert any(not torch.equal(before[n], after[n]) for n in before if n not in vis)
    with pytest.raises(ValueError, match="no vision tower"):
        from mmevo.models.adapters import freeze_vision_tower

        freeze_vision_tower(torch.nn.Linear(2, 2))


def test_trainable_patterns_train_only_the_matching_parameters(tiny_vl_path, tmp_path, train):
    tr = _trainer(_cfg(tmp_path, **{"model.trainable": "[norm]", "trainer.steps": 1}), tiny_vl_path, train)
    before = {n: p.clone() for n, p in tr.model.named_parameters()}
    tr.train()
    after = dict(tr.model.named_parameters())
    norms = [n for n in before if "norm" in n]
    assert norms and all(not torch.equal(before[n], after[n]) for n in norms)  # every norm weight moved
    assert all(torch.equal(before[n], after[n]) for n in before if n not in norms)
    with pytest.raises(ValueError, match="matched no parameter"):
        _trainer(_cfg(tmp_path / "b", **{"model.trainable": "[no_such_weight]"}), tiny_vl_path, train)
    with pytest.raises(ValueError, match="set one of them"):
        _trainer(_cfg(tmp_path / "c", **{"model.trainable": "[norm]", "model.lora.rank": 2}), tiny_vl_path, train)


def test_lora_merged_weights_reach_vllm(tiny_vl_path, tmp_path, train):
    """The engine loads the base checkpoint; after a sync it samples like the LoRA-adapted HF model (greedy)."""
    pytest.importorskip("vllm", reason="vLLM is not installed")
    from mmevo.models.loader import stop_token_ids, vision_token_ids
    from mmevo.rollout.base import RolloutRequest, SamplingParams
    from mmevo.rollout.hf import HFEngine
    from mmevo.models.inputs import encode_prompt

    lm = load_model(tiny_vl_path)
    randomize(lm.model, std=0.3, seed=5)
    base_dir = tmp_path / "base"
    lm.model.save_pretrained(base_dir)
    lm.processor.save_pretrained(base_dir)
    lm = load_model(base_dir)
    cfg = _cfg(tmp_path, **{"rollout.engine": "vllm", "data.max_prompt_length": 256, "rollout.max_tokens": 12})
    engine = build_engine(cfg, lm)
    apply_lora(lm.model, 4, 16.0, 0.0, ["q_proj", "o_proj", "down_proj"])
    with torch.no_grad():
        for n, p in lm.model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 1.0)
    hf = HFEngine(lm.model, lm.tokenizer.pad_token_id, stop_token_ids(lm.tokenizer, lm.model),
                  banned_ids=vision_token_ids(lm.tokenizer))
    reqs = [RolloutRequest(encode_prompt(lm.processor, True, ex.problem, ex.images)) for ex in train[:2]]
    greedy = SamplingParams(temperature=0.0, max_tokens=12)
    before = [o[0].token_ids for o in engine.generate(reqs, greedy)]
    engine.sync_weights(lm.model)
    after = [o[0].token_ids for o in engine.generate(reqs, greedy)]
    expected = [o[0].token_ids for o in hf.generate(reqs, greedy)]
    engine.close()
    assert after == expected and after != before


def test_trainable_patterns_inside_a_frozen_vision_tower_are_refused_before_any_rollout(tiny_vl_path):
    """model.trainable=[visual] with model.freeze_vision_tower=true left no parameter trainable: the trainer started,
    sampled a whole step, and its first backward failed with torch's "element 0 of tensors does not require grad"."""
    from mmevo.grpo.trainer import configure_training

    settings = ["model.trainable=[visual]", "model.freeze_vision_tower=true"]
    with pytest.raises(ValueError, match=r"model\.trainable=\['visual'\] with model\.freeze_vision_tower=true leaves "
                                         "no parameter to train"):
        configure_training(load_model(tiny_vl_path).model, load_config(None, settings).model, seed=0)
    # patterns that reach past the tower still train what lies outside it (the freeze wins inside)
    lm = load_model(tiny_vl_path)
    configure_training(lm.model, load_config(None, ["model.trainable=[visual|norm]",
                                                    "model.freeze_vision_tower=true"]).model, seed=0)
    trainable = [n for n, p in lm.model.named_parameters() if p.requires_grad]
    assert trainable and all("norm" in n and ".visual." not in f".{n}" for n in trainable)


def test_a_second_trainer_on_an_adapted_policy_keeps_its_trained_adapters(tiny_text_path):
    """configure_training on a model that has adapters already (a second trainer built on the same policy) injected
    PEFT's adapters again: every one re-initialised (B = 0), so what the first trainer taught them was gone from the
    second's sampling, checkpoints and export, with only PEFT's "Already found a peft_config" warning."""
    from mmevo.grpo.trainer import configure_training
    from mmevo.models.adapters import lora_state_dict

    lm = load_model(tiny_text_path)
    lora = ["model.lora.rank=2", "model.lora.alpha=4", "model.lora.target_modules=[q_proj,down_proj]"]
    configure_training(lm.model, load_config(None, lora).model, seed=0)
    with torch.no_grad():  # what the first trainer's updates did
        for n, p in lm.model.named_parameters():
            if "lora_" in n:
                p.add_(0.25)
    trained = lora_state_dict(lm.model)
    merged = dict(full_state_items(lm.model))
    for p in lm.model.parameters():
        p.requires_grad_(True)  # whatever happened in between, the adapters alone train again
    configure_training(lm.model, load_config(None, lora).model, seed=1)
    kept = lora_state_dict(lm.model)
    assert kept.keys() == trained.keys() and all(torch.equal(kept[k], trained[k]) for k in trained)
    assert all(torch.equal(t, merged[k]) for k, t in full_state_items(lm.model))
    assert all(p.requires_grad == ("lora_" in n) for n, p in lm.model.named_parameters())
    for other in ("model.lora.rank=4", "model.lora.alpha=8", "model.lora.dropout=0.1",
                  "model.lora.target_modules=[q_proj]"):
        with pytest.raises(ValueError, match="already has LoRA adapters .* load the model afresh"):
            configure_training(lm.model, load_config(None, [*lora, other]).model, seed=0)


def test_a_resume_that_trains_other_parameters_is_refused_not_given_their_adam_moments(tiny_vl_path, tmp_path, train):
    """torch's optimizer load_state_dict pairs the saved state with the parameters by position and checks only the
    groups' sizes: a run saved with model.trainable=[k_proj] resumed with [v_proj] (same shapes) gave every v_proj
    k_proj's Adam moments and step count, under a warning that "this run's values apply" to it."""
    _trainer(_cfg(tmp_path, **{"model.trainable": "[k_proj]", "trainer.steps": 1}), tiny_vl_path, train).train()
    resumed = _trainer(_cfg(tmp_path, **{"model.trainable": "[v_proj]", "trainer.steps": 2}), tiny_vl_path, train)
    with pytest.raises(ValueError, match=r"differ from the checkpoint's in model\.trainable .*optimizer state is for "
                                         r"other parameters .*only in the checkpoint: \['model\.language_model\."
                                         r"layers\.0\.self_attn\.k_proj\.bias'"):
        resumed.train()
    assert all(not s for s in resumed.optimizer.state.values())  # nothing loaded into it
    # the same parameters resume as before
    again = _trainer(_cfg(tmp_path, **{"model.trainable": "[k_proj]", "trainer.steps": 2}), tiny_vl_path, train)
    assert len(again.train()) == 1


def test_a_second_trainer_on_the_same_policy_trains_what_its_own_settings_say(tiny_vl_path):
    """configure_training only ever froze: a policy configured with model.freeze_vision_tower=true (or a
    model.trainable subset) and then given to a trainer without it kept its vision tower (the rest) frozen."""
    from mmevo.grpo.trainer import configure_training

    lm = load_model(tiny_vl_path)
    configure_training(lm.model, load_config(None, ["model.freeze_vision_tower=true"]).model, seed=0)
    assert not all(p.requires_grad for p in lm.model.parameters())
    configure_training(lm.model, load_config(None, []).model, seed=0)
    assert all(p.requires_grad for p in lm.model.parameters())
    configure_training(lm.model, load_config(None, ["model.trainable=[norm]"]).model, seed=0)
    configure_training(lm.model, load_config(None, []).model, seed=0, subset=False)  # SFT: trains all
    assert all(p.requires_grad for p in lm.model.parameters())
    configure_training(lm.model, load_config(None, ["model.lora.rank=2"]).model, seed=0)
    with pytest.raises(ValueError, match="model.lora.rank=0, but the model has LoRA adapters"):
        configure_training(lm.model, load_config(None, []).model, seed=0)
