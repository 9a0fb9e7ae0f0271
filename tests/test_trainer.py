"""End-to-end GRPO on the tiny model: training steps, resume parity, divergence handling, SFT, config errors."""

import json
import math
from pathlib import Path

import pytest
import torch

from conftest import randomize
from mmevo.config import ConfigError, load_config
from mmevo.data.synthetic import split_train_heldout
from mmevo.grpo.checkpoint import latest_checkpoint, list_checkpoints
from mmevo.data.prompts import EpochSampler
from mmevo.grpo import algos
from mmevo.grpo.trainer import GRPOTrainer, TrainingDiverged, forward_tokens, sequence_logprobs
from mmevo.models.loader import load_model
from mmevo.rollout.factory import build_engine


def _cfg(out, **over):
    base = {
        "data.prompt_template": "none", "rollout.n": 4, "rollout.max_tokens": 12, "rollout.temperature": 1.0,
        "trainer.prompts_per_step": 4, "trainer.mini_batch_prompts": 2, "trainer.micro_batch_seqs": 4,
        "trainer.lr": 1e-3, "trainer.steps": 2, "trainer.output_dir": str(out), "trainer.wandb_mode": "disabled",
        "trainer.progress": False, "trainer.save_every": 1, "algo.kl_coef": 0.01, "trainer.seed": 3,
        "reward.heads": "{accuracy: 1.0, format: 0.5}",
    }
    base.update(over)
    return load_config(None, [f"{k}={v}" for k, v in base.items()])


@pytest.fixture(scope="module")
def data():
    return split_train_heldout(24, 4, seed=5)


def _trainer(cfg, path, data, seed_weights=True):
    lm = load_model(path)
    if seed_weights:
        randomize(lm.model, std=0.15, seed=11)
    ref = load_model(path).model.eval() if cfg.algo.kl_coef > 0 else None
    if ref is not None and seed_weights:
        randomize(ref, std=0.15, seed=11)
    return GRPOTrainer(cfg, lm, build_engine(cfg, lm), data[0], data[1], ref_model=ref)


def test_two_grpo_steps_update_the_model_and_log(tiny_vl_path, tmp_path, data):
    cfg = _cfg(tmp_path / "run")
    tr = _trainer(cfg, tiny_vl_path, data)
    before = {k: v.clone() for k, v in tr.model.state_dict().items()}
    hist = tr.train()
    assert len(hist) == 2
    m = hist[-1]
    for key in ["reward/accuracy/mean", "reward/format/mean", "reward/total/std", "frac_reward_zero_std",
                "actor/entropy", "actor/kl", "actor/clip_frac_low", "actor/clip_frac_high", "actor/grad_norm",
                "response/length_mean", "time/gen", "time/reward", "time/ref", "time/update", "time/sync", "time/old",
                "throughput/tokens_per_s", "memory/peak_rss_mb", "response/no_answer_frac"]:
        assert key in m, key
        assert math.isfinite(m[key]), key
    # two mini-batches per step: the second runs after the first update, against the old log-probs computed before
    # it, so its ratios moved away from 1 (a trainer that took old = current would report exactly 1)
    assert m["actor/updates"] == 2
    assert m["actor/ratio_max"] > 1.0 + 1e-4
    after = tr.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(l)["step"] for l in lines] == [1, 2]
    assert [p.name for p in list_checkpoints(tmp_path / "run")] == ["step_000001", "step_000002"]
    final = tr.export(tmp_path / "final")
    reloaded = load_model(final)
    assert all(torch.equal(reloaded.model.state_dict()[k], after[k]) for k in after)


def test_resume_gives_the_same_next_step_loss(tiny_vl_path, tmp_path, data):
    # uninterrupted: 3 steps
    cfg_a = _cfg(tmp_path / "a", **{"trainer.steps": 3})
    hist_a = _trainer(cfg_a, tiny_vl_path, data).train()
    # interrupted after 2 steps, then a fresh process-like trainer resumes from the checkpoint
    cfg_b = _cfg(tmp_path / "b", **{"trainer.steps": 2})
    _trainer(cfg_b, tiny_vl_path, data).train()
    assert latest_checkpoint(tmp_path / "b").name == "step_000002"
    cfg_b3 = _cfg(tmp_path / "b", **{"trainer.steps": 3})
    resumed = _trainer(cfg_b3, tiny_vl_path, data)  # weights are re-randomised, then overwritten by the resume
    hist_b = resumed.train()
    assert resumed.step_idx == 3 and len(hist_b) == 1
    for key in ["actor/loss", "actor/pg_loss", "actor/kl", "reward/total/mean", "response/length_mean"]:
        assert hist_b[0][key] == pytest.approx(hist_a[2][key], rel=1e-5, abs=1e-7), key
    steps = [json.loads(l)["step"] for l in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]


def test_nonfinite_loss_stops_and_keeps_last_checkpoint(tiny_vl_path, tmp_path, data):
    cfg = _cfg(tmp_path / "run", **{"trainer.steps": 2})
    tr = _trainer(cfg, tiny_vl_path, data)
    tr.train(steps=1)
    assert latest_checkpoint(tmp_path / "run").name == "step_000001"
    with torch.no_grad():
        next(tr.model.parameters()).fill_(float("nan"))
    with pytest.raises(TrainingDiverged, match="last good checkpoint"):
        tr.train()
    assert latest_checkpoint(tmp_path / "run").name == "step_000001"


def test_sft_teaches_the_format(tiny_vl_path, tmp_path):
    from mmevo.grpo.sft import run_sft

    cfg = load_config(None, ["data.prompt_template=none", "sft.epochs=6", "sft.batch_size=8", "sft.lr=3e-3",
                             "sft.warmup_steps=2", f"sft.output_dir={tmp_path}", "trainer.progress=false"])
    lm = load_model(tiny_vl_path)
    train, _ = split_train_heldout(16, 0, seed=1)
    hist = run_sft(cfg, lm, train)
    assert hist[-1]["sft/loss"] < 0.5 * hist[0]["sft/loss"]
    assert (tmp_path / "sft_metrics.jsonl").exists()


def test_epoch_sampler_state_roundtrip():
    items = list("abcde")
    a = EpochSampler(items, seed=2)
    first = a.take(7)
    assert sorted(first[:5]) == items and first[:5] != items  # one shuffled epoch, then the next begins
    b = EpochSampler(items, seed=2)
    b.load_state_dict(a.state_dict())
    assert a.take(6) == b.take(6)
    assert EpochSampler(items, seed=3).take(5) != EpochSampler(items, seed=2).take(5)
    with pytest.raises(ValueError, match="training rows"):
        EpochSampler(items + ["f"], seed=2).load_state_dict(a.state_dict())
    with pytest.raises(ValueError, match="empty"):
        EpochSampler([], seed=2)


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match="trainer.lrr"):
        load_config(None, ["trainer.lrr=1"])
    with pytest.raises(ConfigError, match="trainer.steps"):
        load_config(None, ["trainer.steps=abc"])
    with pytest.raises(ConfigError, match="multiple of"):
        load_config(None, ["trainer.prompts_per_step=10", "trainer.mini_batch_prompts=4"])
    # null is no value of a non-optional field: not the text "None", not False
    with pytest.raises(ConfigError, match=r"trainer.deepspeed: expected str, got null \(write '' for an empty"):
        load_config(None, ["trainer.deepspeed=null"])
    with pytest.raises(ConfigError, match="data.hide_labels: expected bool, got null"):
        load_config(None, ["data.hide_labels=~"])
    assert load_config(None, ["trainer.deepspeed=", "algo.clip_ratio_c=null"]).trainer.deepspeed == ""
    bad = tmp_path / "c.yaml"
    bad.write_text("algo:\n  kl_typo: 1\n")
    with pytest.raises(ConfigError, match=r"c.yaml.*algo.kl_typo"):
        load_config(bad)
    cfg = load_config(None, ["reward.heads={majority: 1.0}", "algo.clip_high=0.28", "data.hide_labels=true"])
    assert cfg.reward.heads == {"majority": 1.0} and cfg.algo.clip_high == 0.28 and cfg.data.hide_labels is True


def test_label_free_run_with_majority_vote(tiny_vl_path, tmp_path, data):
    cfg = _cfg(tmp_path / "mv", **{"reward.heads": "{majority: 1.0}", "data.hide_labels": True, "trainer.steps": 1,
                                   "algo.kl_coef": 0})
    hist = _trainer(cfg, tiny_vl_path, data).train()
    assert "reward/majority/modal_share" in hist[0]
    cfg = _cfg(tmp_path / "acc", **{"data.hide_labels": True, "trainer.steps": 1, "algo.kl_coef": 0})
    with pytest.raises(ValueError, match="needs gold answers"):
        _trainer(cfg, tiny_vl_path, data).train()


def test_a_deepspeed_checkpoint_is_not_resumed_without_deepspeed(tiny_vl_path, tmp_path, data):
    cfg = _cfg(tmp_path / "run", **{"trainer.steps": 1})
    tr = _trainer(cfg, tiny_vl_path, data)
    tr.train()
    ckpt = latest_checkpoint(tmp_path / "run")
    state = torch.load(ckpt / "trainer_state.pt", weights_only=False)
    for key in ("optimizer", "scheduler"):  # what a DeepSpeed checkpoint keeps in deepspeed/ instead
        state.pop(key)
    torch.save({**state, "world_size": 2}, ckpt / "trainer_state.pt")
    with pytest.raises(ValueError, match="written by a DeepSpeed run: resume it with the same trainer.deepspeed"):
        _trainer(_cfg(tmp_path / "run", **{"trainer.steps": 2}), tiny_vl_path, data).train()


def _fixed_batch(tr, lengths=(3, 2, 1, 4, 2, 1)):
    """Three prompts x two responses of different lengths, with advantages of both signs."""
    exs = tr.prompt_source.examples[:3]
    prompts = [tr.prompts(ex) for ex in exs for _ in range(2)]
    g = torch.Generator().manual_seed(0)
    responses = [torch.randint(100, 200, (n,), generator=g).tolist() for n in lengths]
    adv = torch.tensor([1.0, -1.0, 0.5, -0.7, 0.8, -0.2])
    return prompts, responses, adv


@pytest.mark.parametrize("split", ["seqs", "tokens", "empty"])
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_micro_batch_accumulation_equals_one_full_batch_loss(tiny_vl_path, tmp_path, data, agg, split):
    """split "empty": one response has no tokens (a zero budget), which must count no token in token-mean."""
    over = {"algo.loss_agg": agg, "algo.kl_coef": 0, "trainer.micro_batch_seqs": 2, "algo.clip_low": 0.05,
            "algo.clip_high": 0.05}
    if split == "tokens":  # micro-batches cut by a token budget (uneven sizes), logits in chunks of 2 positions
        over.update({"trainer.micro_batch_seqs": 6, "trainer.logits_chunk_tokens": 2})
    cfg = _cfg(tmp_path / "run", **over)
    tr = _trainer(cfg, tiny_vl_path, data)
    prompts, responses, adv = _fixed_batch(tr, (3, 2, 1, 4, 0, 2) if split == "empty" else (3, 2, 1, 4, 2, 1))
    if split == "tokens":
        # responses 2 and 3 (lengths 1 and 4) share a prompt: a budget one token short of their joint forward
        joint = forward_tokens([2, 3], prompts, responses, packs=True)
        assert joint == len(prompts[2].input_ids) + 1 + 4  # packed (the default): real tokens, the prompt once
        tr.cfg.trainer.max_tokens_per_micro_batch = joint - 1
        sizes = [len(m) for m in tr._micro_batches(list(range(6)), prompts, responses)]
        assert sum(sizes) == 6 and max(sizes) <= 2 and 1 in sizes, sizes  # uneven micro-batches
    n_micro = len(tr._micro_batches(list(range(6)), prompts, responses))
    # off-policy old log-probs, so that some tokens are clipped and the ratio is not 1
    old = [lp + 0.2 * torch.randn(lp.shape, generator=torch.Generator().manual_seed(i))
           for i, lp in enumerate(tr._logprobs_no_grad(tr.model, prompts, responses))]
    grads = {}

    def capture():  # the optimizer step is replaced: look at the accumulated gradients instead
        grads.update({n: p.grad.clone() for n, p in tr.model.named_parameters() if p.grad is not None})
        return 0.0

    tr.backend.step = capture
    tr._update(prompts, responses, adv, [tr._micro_batches(list(range(6)), prompts, responses)], [n_micro], old, None)
    # one full-batch forward and loss, the definition the accumulation must reproduce
    tr.model.zero_grad(set_to_none=True)
    logp, _, mask = sequence_logprobs(tr.model, prompts, responses, tr.pad_id, 1.0, "cpu")
    R = logp.shape[1]
    old_full = torch.stack([torch.cat([o, o.new_zeros(R - len(o))]) for o in old])
    scale = cfg.rollout.max_tokens * 6 if agg == "seq-mean-token-sum-norm" else None
    loss, m = algos.policy_loss(logp, old_full, adv, mask, 0.05, 0.05, agg, loss_scale_factor=scale)
    assert m["clip_frac"] > 0  # the clipped branch is exercised
    loss.backward()
    ref = {n: p.grad for n, p in tr.model.named_parameters() if p.grad is not None}
    assert set(ref) == set(grads)
    norm = math.sqrt(sum(float((g ** 2).sum()) for g in ref.values()))
    diff = math.sqrt(sum(float(((grads[n] - ref[n]) ** 2).sum()) for n in ref))
    assert norm > 1e-4 and diff < 1e-5 * norm, (diff, norm)


def _overlong(ex, words=400):
    import dataclasses

    return dataclasses.replace(ex, id=ex.id + "-long", problem=ex.problem + " padding" * words)


def test_dropped_prompt_keeps_the_configured_mini_batch_size(tiny_vl_path, tmp_path, data):
    # 8 prompts, mini-batches of 2 -> 4 updates; one prompt too long leaves 7 groups: still 4 updates (2+2+2+1),
    # not 7 updates of one prompt each
    cfg = _cfg(tmp_path / "run", **{"trainer.prompts_per_step": 8, "trainer.mini_batch_prompts": 2,
                                    "data.max_prompt_length": 300, "algo.kl_coef": 0})
    tr = _trainer(cfg, tiny_vl_path, data)
    exs = list(data[0][:8])
    exs[3] = _overlong(exs[3])
    assert len(tr.prompts(exs[3]).input_ids) > 300 >= max(len(tr.prompts(e).input_ids) for e in exs if e is not exs[3])
    sizes = []
    real_update = tr._update

    def spy(prompts, responses, adv, micros, plan, *rest):
        sizes.extend(len({id(prompts[i]) for ids in micro for i in ids}) for micro in micros)
        return real_update(prompts, responses, adv, micros, plan, *rest)

    tr._update = spy
    steps = []
    real_step = tr.backend.step
    tr.backend.step = lambda: steps.append(1) or real_step()
    m = tr.step(exs)
    assert sizes == [2, 2, 2, 1] and len(steps) == 4 and m["actor/updates"] == 4
    assert m["data/skipped_overlong_prompts"] == 1 and m["data/skipped_steps"] == 0
    assert tr.scheduler.last_epoch == 4  # the schedule advanced once per update


def test_a_step_with_nothing_trainable_is_skipped_and_counted(tiny_vl_path, tmp_path, data):
    cfg = _cfg(tmp_path / "run", **{"data.max_prompt_length": 8, "trainer.steps": 2, "algo.kl_coef": 0,
                                    "trainer.save_every": 0})
    tr = _trainer(cfg, tiny_vl_path, data)
    before = {k: v.clone() for k, v in tr.model.state_dict().items()}
    hist = tr.train()  # every prompt is longer than 8 tokens
    assert [h["data/skipped_steps"] for h in hist] == [1, 2]
    assert [h["data/skipped_overlong_prompts"] for h in hist] == [4, 8]
    assert hist[-1]["data/samples"] == 0 and "actor/loss" not in hist[-1]
    assert tr.step_idx == 2 and tr.scheduler.last_epoch == 0
    assert all(torch.equal(before[k], v) for k, v in tr.model.state_dict().items())
    lines = [json.loads(l) for l in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [l["data/skipped_steps"] for l in lines] == [1, 2]


@pytest.mark.parametrize("c", [1.05, None])
def test_dual_clip_bound_comes_from_the_config(tiny_vl_path, tmp_path, data, c):
    cfg = _cfg(tmp_path / "run", **{"algo.kl_coef": 0, "algo.clip_ratio_c": "null" if c is None else c})
    assert cfg.algo.clip_ratio_c == c
    tr = _trainer(cfg, tiny_vl_path, data)
    prompts, responses, adv = _fixed_batch(tr)
    # old log-probs 0.5 below the current ones: ratio e^0.5 = 1.65 > 1.05 on every token
    old = [lp - 0.5 for lp in tr._logprobs_no_grad(tr.model, prompts, responses)]
    m = tr._update(prompts, responses, adv, [tr._micro_batches(list(range(6)), prompts, responses)], [2], old, None)
    if c is None:
        assert m["actor/clip_frac_dual"] == 0.0
    else:  # the tokens of the three negative-advantage responses (lengths 2, 4, 1 of 13) are bounded by -A * c
        assert m["actor/clip_frac_dual"] == pytest.approx(7 / 13, abs=1e-6)


@pytest.mark.parametrize("padding_free", [True, False])
@pytest.mark.parametrize("checkpointing", [True, False])
def test_token_budget_counts_the_tokens_the_training_forward_runs(tiny_vl_path, tmp_path, data, padding_free,
                                                                  checkpointing):
    """Packed forwards (padding-free) are charged their real tokens, a shared prompt once; padded ones sequences x
    (longest prompt + longest response). Checkpointing does not change which forward runs."""
    cfg = _cfg(tmp_path / "run", **{"trainer.micro_batch_seqs": 6, "trainer.padding_free": padding_free,
                                    "model.gradient_checkpointing": checkpointing})
    tr = _trainer(cfg, tiny_vl_path, data)
    prompts, responses, _ = _fixed_batch(tr, lengths=(9, 1, 1, 9, 5, 5))
    p = [len(x.input_ids) for x in prompts]
    assert p[0] != p[2]  # distinct prompt lengths: padding appears across groups too
    r = [len(x) for x in responses]
    pairs = {"group": [0, 1], "distinct": [1, 3]}  # samples 0, 1 share a prompt; 1 and 3 do not
    real = {"group": p[0] + r[0] + r[1], "distinct": p[1] + p[3] + r[1] + r[3]}
    padded = {k: 2 * (max(p[i], p[j]) + max(r[i], r[j])) for k, (i, j) in pairs.items()}
    assert all(real[k] < padded[k] for k in pairs)
    for kind, ids in pairs.items():
        tr.cfg.trainer.max_tokens_per_micro_batch = real[kind]  # a budget that only the real count meets
        micro = tr._micro_batches(ids, prompts, responses)
        assert micro == ([ids] if padding_free else [[ids[0]], [ids[1]]]), (kind, micro)
        tr.cfg.trainer.max_tokens_per_micro_batch = real[kind] - 1
        assert tr._micro_batches(ids, prompts, responses) == [[ids[0]], [ids[1]]]
        tr.cfg.trainer.max_tokens_per_micro_batch = padded[kind]
        assert tr._micro_batches(ids, prompts, responses) == [ids]


def test_gradient_checkpointing_and_token_budget_leave_training_unchanged(tiny_vl_path, tmp_path, data):
    """A step of four updates with checkpointing, token-budget micro-batches and chunked logits = the plain step (old
    and reference log-probs run in eval mode, so their shared-prompt pass stays valid under checkpointing).

    One step on one rollout: the updates after the first see ratios and a KL away from 1 and 0, and nothing depends on
    sampling after an update. A second step would: Adam turns the paths' float differences (1e-7 of the gradient) into
    weight differences of up to 2e-5 at lr 1e-3 wherever a gradient is tiny, and at temperature 1 those flip a sampled
    token on some CPUs, after which the steps compare different rollouts."""
    keys = ["actor/loss", "actor/pg_loss", "actor/kl", "actor/ratio_mean", "actor/grad_norm", "reward/total/mean",
            "response/length_mean"]
    runs = []
    for over in ({}, {"model.gradient_checkpointing": True, "trainer.max_tokens_per_micro_batch": 150,
                      "trainer.logits_chunk_tokens": 3}):
        # a reward with signal in every group (the tiny model's answers are all wrong): with zero advantages Adam
        # would turn float noise of 1e-6 into full-size, run-dependent updates
        cfg = _cfg(tmp_path / str(len(runs)), **{"trainer.save_every": 0, "reward.heads": "{loop_plugins:LengthHead: 1.0}",
                                                 "trainer.steps": 1, "trainer.prompts_per_step": 8, **over})
        tr = _trainer(cfg, tiny_vl_path, data)
        runs.append(tr.train())
        if over:
            assert tr.model.is_gradient_checkpointing
    (a,), (b,) = runs
    assert abs(a["actor/ratio_mean"] - 1) > 1e-3 and a["actor/kl"] > 1e-3  # the later updates are off-policy
    for k in keys:
        assert b[k] == pytest.approx(a[k], rel=1e-4, abs=1e-5), (k, a[k], b[k])


def test_reference_offload_visits_the_device_only_for_its_pass(tiny_vl_path, tmp_path, data):
    runs = []
    for offload in (False, True):
        cfg = _cfg(tmp_path / str(offload), **{"trainer.steps": 1, "trainer.save_every": 0,
                                               "model.ref_offload": offload})
        tr = _trainer(cfg, tiny_vl_path, data)
        moves = []
        real_to = tr.ref_model.to
        tr.ref_model.to = lambda *a, **k: moves.append(str(a[0])) or real_to(*a, **k)
        runs.append(tr.train()[0])
        assert moves == (["cpu", "cpu"] if offload else [])  # to the trainer's device (cpu here), then back to host
    for k in ("actor/kl", "actor/loss", "reward/total/mean"):
        assert runs[1][k] == pytest.approx(runs[0][k], rel=1e-6, abs=1e-9), k
    from mmevo.recipes import build_trainer

    lm = load_model(tiny_vl_path)
    tr = build_trainer(_cfg(tmp_path / "b", **{"model.ref_offload": True}), lm, data[0], log=False)
    assert next(tr.ref_model.parameters()).device.type == "cpu"


def test_ratio_max_is_the_largest_ratio_of_the_step_not_a_mean_of_micro_batches(tiny_vl_path, tmp_path, data):
    cfg = _cfg(tmp_path / "run", **{"algo.kl_coef": 0, "trainer.micro_batch_seqs": 2})
    tr = _trainer(cfg, tiny_vl_path, data)
    prompts, responses, adv = _fixed_batch(tr)
    old = tr._logprobs_no_grad(tr.model, prompts, responses)
    old[0] = old[0] - 0.5  # one sample (in the first of three micro-batches) has ratio e^0.5, the rest 1
    tr.backend.step = lambda: 0.0  # no update: the ratios stay as set
    m = tr._update(prompts, responses, adv, [tr._micro_batches(list(range(6)), prompts, responses)], [3], old, None)
    assert m["actor/ratio_max"] == pytest.approx(math.exp(0.5), rel=1e-4)


def test_evaluate_on_an_empty_list_evaluates_nothing(tiny_vl_path, tmp_path, data):
    tr = _trainer(_cfg(tmp_path / "run", **{"algo.kl_coef": 0}), tiny_vl_path, data)
    assert tr.evaluate()["n"] == len(data[1])  # None: the held-out set
    assert tr.evaluate([]) == {}  # an empty set, not the held-out set under another name


def test_held_out_prompts_over_the_prompt_limit_are_left_out_and_counted(tiny_vl_path, tmp_path, data):
    """As in training: a held-out prompt longer than data.max_prompt_length would overflow the vLLM engine's context
    (data.max_prompt_length + the response budget) and stop the run at its first evaluation."""
    import dataclasses

    from mmevo.rollout.factory import max_model_len

    held = list(data[1])
    held[1] = dataclasses.replace(held[1], problem=held[1].problem + " and more words" * 200)
    cfg = _cfg(tmp_path / "run", **{"algo.kl_coef": 0, "data.max_prompt_length": 400})
    tr = _trainer(cfg, tiny_vl_path, (data[0], held))
    assert len(tr.prompts(held[1]).input_ids) > 400 >= max(len(tr.prompts(ex).input_ids) for ex in data[1])
    summary = tr.evaluate()
    assert summary["n"] == len(held) - 1 and summary["skipped_overlong_prompts"] == 1
    assert held[1].id not in {s["id"] for s in summary["samples"]}
    assert "skipped_overlong_prompts" not in tr.evaluate(data[1])
    # vLLM's context holds the longest kept prompt and the larger of the training / evaluation budgets
    assert max_model_len(cfg) == 400 + 12
    cfg.trainer.eval_max_tokens = 64
    assert max_model_len(cfg) == 400 + 64


def test_a_crash_while_deleting_old_checkpoints_leaves_no_half_checkpoint(tiny_vl_path, tmp_path, data, monkeypatch):
    import shutil

    from mmevo.grpo import checkpoint

    out = tmp_path / "run"
    over = {"trainer.keep_checkpoints": 5, "algo.kl_coef": 0}
    _trainer(_cfg(out, **{**over, "trainer.steps": 4, "trainer.save_every": 2}), tiny_vl_path, data).train()
    assert [p.name for p in list_checkpoints(out)] == ["step_000002", "step_000004"]

    class Killed(BaseException):
        pass

    real_rmtree, calls = shutil.rmtree, []

    def killed_midway(path, *a, **k):  # the process dies after the first file of a checkpoint is deleted
        calls.append(path)
        if len(calls) == 1:
            next(Path(path).rglob("trainer_state.pt")).unlink()
            raise Killed()
        return real_rmtree(path, *a, **k)

    # a fresh run in the same dir removes the earlier run's step_000002 and step_000004 as it starts
    fresh = _trainer(_cfg(out, **{**over, "trainer.resume": False}), tiny_vl_path, data)
    monkeypatch.setattr(checkpoint.shutil, "rmtree", killed_midway)
    with pytest.raises(Killed):
        fresh.train(steps=1)
    monkeypatch.undo()
    # neither a half-deleted checkpoint nor the earlier run's step_000004 is left to be taken for the newest one
    assert list_checkpoints(out) == []
    resumed = _trainer(_cfg(out, **over), tiny_vl_path, data)
    resumed.train(steps=0)
    assert resumed.step_idx == 0
    assert list((out / "checkpoints").iterdir()) == []  # leftovers cleared on resume

    # pruning at a save: the doomed checkpoint is renamed away before it is deleted
    pruned = _trainer(_cfg(out, **{**over, "trainer.keep_checkpoints": 1}), tiny_vl_path, data)
    pruned.train(steps=1)
    calls.clear()
    monkeypatch.setattr(checkpoint.shutil, "rmtree", killed_midway)
    with pytest.raises(Killed):
        pruned.train(steps=1)
    monkeypatch.undo()
    assert [p.name for p in list_checkpoints(out)] == ["step_000002"]


def test_a_fresh_run_leaves_no_earlier_checkpoint_for_a_later_rerun(tiny_vl_path, tmp_path, data, capsys):
    """trainer.resume=false in a dir with checkpoints, stopped before its own first save: a rerun (resuming by
    default) must not pick up the earlier run's state under the new run's curve."""
    out = tmp_path / "run"
    over = {"algo.kl_coef": 0, "trainer.steps": 3}
    _trainer(_cfg(out, **{**over, "trainer.save_every": 3}), tiny_vl_path, data).train()
    assert [p.name for p in list_checkpoints(out)] == ["step_000003"]
    fresh = _trainer(_cfg(out, **{**over, "trainer.resume": False, "trainer.save_every": 2}), tiny_vl_path, data)
    fresh.train(steps=1)  # stopped before its first save
    assert "removed 1 checkpoint(s) of an earlier run" in capsys.readouterr().out
    assert list_checkpoints(out) == []
    rerun = _trainer(_cfg(out, **{**over, "trainer.save_every": 2}), tiny_vl_path, data)
    rerun.train(steps=0)
    assert rerun.step_idx == 0  # starts again, not at the earlier run's step 3
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == []  # the fresh curve restarts too: no step of either earlier run stays
    # a run that resumes (the default) keeps its checkpoints
    again = _trainer(_cfg(out, **{**over, "trainer.save_every": 1}), tiny_vl_path, data)
    again.train(steps=1)
    kept = _trainer(_cfg(out, **over), tiny_vl_path, data)
    kept.train(steps=0)
    assert kept.step_idx == 1 and [p.name for p in list_checkpoints(out)] == ["step_000001"]


def test_logged_history_covers_the_steps_before_a_resume(tiny_vl_path, tmp_path, data):
    out = tmp_path / "run"
    over = {"algo.kl_coef": 0, "trainer.steps": 3}
    first = _trainer(_cfg(out, **over), tiny_vl_path, data)
    ran = first.train(steps=2)
    resumed = _trainer(_cfg(out, **over), tiny_vl_path, data)
    assert len(resumed.train()) == 1  # train() returns the steps that call ran
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    full = resumed.logged_history()
    assert len(full) == 3 and full == [{k: v for k, v in r.items() if k != "step"} for r in rows]
    assert full[0]["reward/total/mean"] == ran[0]["reward/total/mean"]
    assert resumed.logged_history(2, 3) == full[1:] and resumed.logged_history(4, 9) == []
    # a trainer that writes no curve: the steps it ran itself
    cfg = _cfg(tmp_path / "quiet", **{**over, "trainer.save_every": 0})
    lm = load_model(tiny_vl_path)
    quiet = GRPOTrainer(cfg, lm, build_engine(cfg, lm), data[0], data[1], log=False)
    got = quiet.train(steps=2)
    assert quiet.logged_history() == got and quiet.logged_history(2) == got[1:]
    assert not (tmp_path / "quiet" / "metrics.jsonl").exists()


def test_rng_state_round_trips_the_cuda_generator(monkeypatch):
    from mmevo.grpo import checkpoint

    restored = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state", lambda *a, **k: torch.tensor([7], dtype=torch.uint8))
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda s, *a, **k: restored.append(s))
    state = checkpoint.rng_state()
    checkpoint.set_rng_state(state)
    assert len(restored) == 1 and restored[0].tolist() == [7]  # dropout on the GPU continues where it was
