"""Ninth review: do the methods and options compose? Several reward heads at once, a user head by import path with
arguments and state across a resume, heads that return the wrong thing, CSRS with the algorithm and model options,
and config combinations refused up front (tiny Qwen2.5-VL on the CPU, 1-2 steps each).

CSRS seed (003): "the model updates its policy P by maximizing the relative advantage of intra-group samples
A(x) = r(x) - r_bar", with the group the n = 8 maternal trajectories (Table 6: "Rollout Group Size (G) 8"); the m
re-inferences per maternal response only build the re-inference answer set that SFR compares against. So they never
enter the advantages (nor the batch std of ``adv_scale=batch``) or the loss.
"""

import math
import sys

import numpy as np
import pytest
import torch

from conftest import randomize
from mmevo.cli import main
from mmevo.config import load_config
from mmevo.data.synthetic import split_train_heldout
from mmevo.grpo.trainer import GRPOTrainer
from mmevo.models.loader import load_model
from mmevo.rewards.heads import RewardHead, RewardMixer, ScoredSample, register_head
from mmevo.rollout.base import Completion
from mmevo.rollout.factory import build_engine

SCRIPT = ["<think>so</think> \\boxed{3}", "so \\boxed{3}", "\\boxed{4}", "hmm no"]


# -- heads --------------------------------------------------------------------------------------------------------
class CountingHead(RewardHead):
    """A user head (named by import path, ``test_compose_review9:CountingHead``): reward lam x its call count, so its
    state must survive a resume."""

    def __init__(self, lam: float = 1.0):
        self.lam, self.calls = lam, 0

    def score(self, samples):
        self.calls += 1
        return torch.full((len(samples),), self.lam * self.calls), {"calls": self.calls}

    def state_dict(self):
        return {"calls": self.calls}

    def load_state_dict(self, state):
        self.calls = state["calls"]


class ShapedHead(RewardHead):
    """Returns ``kind`` of output: what a user head gets wrong."""

    def __init__(self, kind: str):
        self.kind = kind

    def score(self, samples):
        n, k = len(samples), self.kind
        outputs = {"list": lambda: ([1.0, 0.0] * (n // 2), {}), "array": lambda: (np.array([1.0, 0.0] * (n // 2)), {}),
                   "grad": lambda: (torch.tensor([1.0, 0.0] * (n // 2), requires_grad=True), {}),
                   "bare": lambda: torch.ones(n), "no_metrics": lambda: (torch.ones(n), None),
                   "list_metric": lambda: (torch.ones(n), {"hist": [1, 2]}),
                   "text_metric": lambda: (torch.ones(n), {"note": "1.5"}),
                   "mean_metric": lambda: (torch.ones(n), {"mean": 0.0}), "short": lambda: (torch.ones(n - 1), {}),
                   "inf": lambda: (torch.tensor([0.0] * (n - 1) + [math.inf]), {}),
                   "text": lambda: (["a"] * n, {})}
        if k == "raise":
            raise KeyError("missing")
        return outputs[k]()


register_head("c9_shaped", ShapedHead)


def _s(resp, g, role="maternal", gold="3"):
    return ScoredSample(resp, g, gold, None, role=role, eval_gold=gold)


SAMPLES = [_s("<think>a</think> \\boxed{3}", 0), _s("\\boxed{3}", 0), _s("\\boxed{4}", 1), _s("x", 1),
           _s("\\boxed{3}", 0, "reinference"), _s("\\boxed{4}", 1, "reinference")]


@pytest.mark.parametrize("heads", [{"sfr": 1.0, "format": 0.5}, {"majority": 1.0, "accuracy": 1.0}])
def test_several_heads_sum_with_their_weights_per_sample_and_each_logs(heads):
    mixer = RewardMixer(heads, {"sfr": {"gamma": 0.2, "beta": 5.0}} if "sfr" in heads else None)
    total, metrics = mixer(SAMPLES)
    parts = {name: head.score(SAMPLES)[0] for name, head in mixer.heads.items()}
    by_hand = sum(w * parts[name] for name, w in heads.items())
    assert total.tolist() == pytest.approx(by_hand.tolist(), abs=1e-7)
    mat = torch.tensor([s.role == "maternal" for s in SAMPLES])
    for name in heads:  # each head's mean / std over the maternal samples (the ones trained on)
        assert metrics[f"reward/{name}/mean"] == pytest.approx(parts[name][mat].mean().item())
        assert metrics[f"reward/{name}/std"] == pytest.approx(parts[name][mat].std(unbiased=False).item())
    assert metrics["reward/total/mean"] == pytest.approx(by_hand[mat].mean().item())
    if "sfr" in heads:  # Eq. 7-8: group 0 all 3 -> R_base 1, f_r / R_base 1 -> 1; group 1: 4 twice of 3 answers,
        # the one re-inference 4 -> (0.2 tanh(5 (1 / (2/3) - 1)) + 1) 2/3; no answer 0; re-inferences 0; format 0.5 x 1
        assert total.tolist() == pytest.approx([1.5, 1.0, (0.2 * math.tanh(2.5) + 1) * 2 / 3, 0.0, 0.0, 0.0], abs=1e-5)
    if "accuracy" in heads:  # gold 3: maternal 1, 1, 0, 0; majority pools maternal and re-inference answers
        assert parts["accuracy"].tolist() == [1, 1, 0, 0, 1, 0]
        assert total.tolist() == [2.0, 2.0, 1.0, 0.0, 2.0, 1.0]


@pytest.mark.parametrize("kind", ["list", "array", "grad"])
def test_a_head_may_return_its_rewards_as_a_list_or_array_and_they_never_carry_a_graph(kind):
    # before: a list / array failed with "'list' object has no attribute 'float'" (no head named), and a reward with a
    # graph made the total (and so the advantages) require grad
    total, metrics = RewardMixer({"c9_shaped": 2.0, "format": 1.0}, {"c9_shaped": {"kind": kind}})(SAMPLES)
    assert total.tolist() == [3.0, 0.0, 2.0, 0.0, 2.0, 0.0]
    assert not total.requires_grad and total.dtype == torch.float32
    assert metrics["reward/c9_shaped/mean"] == 0.5


@pytest.mark.parametrize("kind, error, match", [
    ("bare", TypeError, r"'c9_shaped': score\(samples\) must return \(rewards \[B\], metrics dict\), got Tensor"),
    ("no_metrics", TypeError, "'c9_shaped': its metrics must be a dict of numbers, got NoneType"),
    ("list_metric", TypeError, "'c9_shaped': metric 'hist' must be a number, got list"),
    ("text_metric", TypeError, "'c9_shaped': metric 'note' must be a number, got str"),
    ("mean_metric", ValueError, "'c9_shaped' returned a metric named 'mean'"),
    ("short", ValueError, r"'c9_shaped' returned \(5,\) rewards for 6 samples"),
    ("inf", FloatingPointError, r"'c9_shaped' returned non-finite rewards for 1 of 6 samples \(first: sample 5, inf\)"),
    ("text", TypeError, "'c9_shaped' returned rewards of type list that are not numbers"),
])
def test_a_head_that_returns_the_wrong_thing_is_an_error_naming_it(kind, error, match):
    # before: "too many values to unpack", "'NoneType' object has no attribute 'items'", "float() argument must be
    # ...", and a head's own 'mean' metric silently replaced the mixer's reward/<head>/mean
    with pytest.raises(error, match=match):
        RewardMixer({"c9_shaped": 1.0}, {"c9_shaped": {"kind": kind}})(SAMPLES)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception notes are Python 3.11+")
def test_an_exception_a_head_raises_keeps_its_type_and_names_the_head():
    with pytest.raises(KeyError) as e:
        RewardMixer({"format": 1.0, "c9_shaped": 1.0}, {"c9_shaped": {"kind": "raise"}})(SAMPLES)
    assert e.value.__notes__ == ["raised by reward head 'c9_shaped'"]


# -- the trainer on the tiny model ----------------------------------------------------------------------------------
class Scripted:
    """The real engine, except that maternal / plain requests (no anchor prefix, clean image) return ``script``."""

    def __init__(self, engine, script):
        self.engine, self.script = engine, script

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def generate(self, requests, params):
        if any(r.image_override is not None or len(r.prefix_ids or ()) for r in requests):  # CSRS re-inferences
            return self.engine.generate(requests, params)
        return [[Completion(list(ids), [0.0] * len(ids), "stop") for ids in self.script[:r.n]] for r in requests]


def _trainer(path, out, ref_seed=None, **over):
    lm = load_model(path)
    randomize(lm.model, std=0.15, seed=2)
    base = {"data.prompt_template": "none", "rollout.n": len(SCRIPT), "rollout.max_tokens": 8,
            "trainer.prompts_per_step": 2, "trainer.mini_batch_prompts": 2, "trainer.micro_batch_seqs": 32,
            "trainer.output_dir": str(out), "trainer.wandb_mode": "disabled", "trainer.progress": False,
            "trainer.save_every": 0, "algo.kl_coef": 0, "trainer.lr": 1e-4}
    base.update(over)
    cfg = load_config(None, [f"{k}={v}" for k, v in base.items()])
    ref = None
    if cfg.algo.kl_coef > 0:  # a reference other than the policy, so that the KL term has a gradient
        ref = randomize(load_model(path).model, std=0.15, seed=ref_seed).eval()
        if cfg.model.ref_offload:
            ref.to("cpu")
    train, held = split_train_heldout(4, 0, seed=3)
    engine = build_engine(cfg, lm)
    stop = int(engine.stop_ids[0])
    script = [lm.tokenizer.encode(t, add_special_tokens=False) + [stop] for t in SCRIPT]
    return GRPOTrainer(cfg, lm, Scripted(engine, script), train, held, ref_model=ref, log=True)


def _spied_step(tr):
    """One step; returns its metrics, the rewards of every sample, the advantages and responses trained on, and the
    gradients of each update (before clipping)."""
    seen = {"grads": []}
    score, update, backend_step = tr.rewards, tr._update, tr.backend.step

    def rewards(samples):
        seen["roles"] = [s.role for s in samples]
        seen["rewards"], m = score(samples)
        return seen["rewards"], m

    def spy_update(prompts, responses, adv, *rest):
        seen["adv"], seen["trained"] = adv.clone(), [list(r) for r in responses]
        return update(prompts, responses, adv, *rest)

    def spy_backend_step():
        seen["grads"].append({n: p.grad.clone() for n, p in tr.model.named_parameters() if p.grad is not None})
        return backend_step()

    tr.rewards, tr._update, tr.backend.step = rewards, spy_update, spy_backend_step
    return tr.step(), seen


CSRS = {"csrs.enabled": True, "csrs.m": 2, "reward.heads": "{sfr: 1.0, format: 0.5}", "data.hide_labels": True}


def _by_hand(rewards, groups, scale, eps=1e-6):
    """GRPO advantages (algos.group_advantages' definition), written out."""
    out = []
    every = torch.tensor(rewards, dtype=torch.float64)
    for r, g in zip(rewards, groups):
        mine = torch.tensor([x for x, h in zip(rewards, groups) if h == g], dtype=torch.float64)
        centred = r - mine.mean().item()
        std = {"group": mine.std().item(), "batch": every.std().item(), "none": None}[scale]
        out.append(centred if std is None else centred / (std + eps))
    return out


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_csrs_advantages_by_hand_over_maternal_samples_only(tiny_vl_path, tmp_path, scale):
    metrics, seen = _spied_step(_trainer(tiny_vl_path, tmp_path, **CSRS, **{"algo.adv_scale": scale}))
    roles, rewards = seen["roles"], seen["rewards"]
    n_mat = 2 * len(SCRIPT)
    assert roles == ["maternal"] * n_mat + ["reinference"] * (2 * n_mat)
    assert seen["trained"][:len(SCRIPT)] == seen["trained"][len(SCRIPT):] and len(seen["trained"]) == n_mat
    mat = rewards[:n_mat].tolist()
    assert len(set(mat[:len(SCRIPT)])) > 1  # a group with a signal
    groups = [0] * len(SCRIPT) + [1] * len(SCRIPT)
    assert seen["adv"].tolist() == pytest.approx(_by_hand(mat, groups, scale), abs=1e-5)
    # per-head metrics and the total over the maternal samples: total = sfr + 0.5 format
    assert metrics["reward/total/mean"] == pytest.approx(
        metrics["reward/sfr/mean"] + 0.5 * metrics["reward/format/mean"], abs=1e-6)
    assert metrics["reward/format/mean"] == 0.25  # one maternal response of four has <think>…</think> \boxed{}


def _max_rel_diff(a, b):
    assert len(a) == len(b) and all(x.keys() == y.keys() for x, y in zip(a, b))
    return max(((x[k] - y[k]).abs().max() / y[k].abs().max().clamp(min=1e-12)).item() for x, y in zip(a, b) for k in x)


def test_csrs_options_that_must_not_change_the_update_do_not(tiny_vl_path, tmp_path):
    # KL > 0, two PPO epochs over two mini-batches: token-budget micro-batches, gradient checkpointing, an offloaded
    # reference and padded forwards give the same loss and gradients, update for update
    common = {**CSRS, "algo.kl_coef": 0.05, "algo.ppo_epochs": 2, "trainer.mini_batch_prompts": 1}
    plain_m, plain = _spied_step(_trainer(tiny_vl_path, tmp_path / "a", ref_seed=5, **common))
    other_m, other = _spied_step(_trainer(tiny_vl_path, tmp_path / "b", ref_seed=5, **common, **{
        "trainer.max_tokens_per_micro_batch": 30, "model.gradient_checkpointing": True, "model.ref_offload": True,
        "trainer.padding_free": False}))
    assert plain_m["actor/updates"] == other_m["actor/updates"] == 4 and len(plain["grads"]) == 4
    assert plain_m["actor/kl"] > 0
    for key in ("actor/loss", "actor/pg_loss", "actor/kl"):
        assert other_m[key] == pytest.approx(plain_m[key], rel=1e-4)
    assert _max_rel_diff(other["grads"], plain["grads"]) < 1e-3


@pytest.mark.parametrize("agg", ["seq-mean-token-mean", "seq-mean-token-sum-norm"])
def test_csrs_with_lora_frozen_tower_and_loss_agg_matches_one_sequence_micro_batches(tiny_vl_path, tmp_path, agg):
    common = {**CSRS, "model.lora.rank": 4, "model.freeze_vision_tower": True, "algo.loss_agg": agg}
    a_m, a = _spied_step(_trainer(tiny_vl_path, tmp_path / "a", **common))
    b_m, b = _spied_step(_trainer(tiny_vl_path, tmp_path / "b", **common, **{"trainer.micro_batch_seqs": 1,
                                                                           "model.gradient_checkpointing": True}))
    assert all("lora_" in k for k in a["grads"][0]) and not any("visual" in k for k in a["grads"][0])
    assert _max_rel_diff(b["grads"], a["grads"]) < 1e-4
    assert b_m["actor/loss"] == pytest.approx(a_m["actor/loss"], abs=1e-6)


def test_user_head_by_import_path_with_arguments_keeps_its_state_across_a_resume(tiny_vl_path, tmp_path):
    heads = {"reward.heads": "{test_compose_review9:CountingHead: 1.0, format: 0.5}",
             "reward.head_args": "{test_compose_review9:CountingHead: {lam: 2.0}}", "trainer.save_every": 1}
    first = _trainer(tiny_vl_path, tmp_path, **heads, **{"trainer.steps": 2}).train()
    again = _trainer(tiny_vl_path, tmp_path, **heads, **{"trainer.steps": 3}).train()  # resumes step 2
    rows = first + again
    assert [m["reward/CountingHead/calls"] for m in rows] == [1, 2, 3]
    assert [m["reward/CountingHead/mean"] for m in rows] == [2.0, 4.0, 6.0]  # lam x calls: lam=2 reached the head
    for m in rows:  # one of the four scripted responses has the format: 0.25 x 0.5 on top of CountingHead's
        assert m["reward/total/mean"] == pytest.approx(m["reward/CountingHead/mean"] + 0.5 * 0.25)


# -- config combinations ---------------------------------------------------------------------------------------------
def test_accuracy_with_hidden_labels_is_refused_before_anything_loads(no_runs, capsys):
    # before: `train` loaded the model and ran the first rollout, then AccuracyHead refused the label-free batch; an
    # MM-Zero run with data.hide_labels=true reached its solver phase (after proposer and coder) before failing
    assert main(["train", "configs/grpo_tiny.yaml", "data.hide_labels=true"]) == 2
    err = capsys.readouterr().err
    assert "'accuracy', which scores against gold answers, and data.hide_labels=true hides them" in err
    assert main(["evolve", "mmzero", "configs/mmzero_tiny.yaml", "data.hide_labels=true"]) == 2
    assert "mmzero.roles.solver" in capsys.readouterr().err
    assert no_runs == []
    # what makes sense still runs: a label-free head, evaluation only, CSRS with SFR, the CSRS MM-Zero solver
    assert main(["train", "configs/grpo_tiny.yaml", "data.hide_labels=true", "reward.heads={majority: 1.0}"]) == 0
    assert main(["train", "configs/grpo_tiny.yaml", "data.hide_labels=true", "trainer.steps=0"]) == 0
    assert main(["train", "configs/csrs_tiny.yaml"]) == 0
    assert main(["evolve", "mmzero", "configs/mmzero_tiny_csrs_solver.yaml"]) == 0
    assert no_runs == ["train", "train", "train", "mmzero"]


def test_csrs_with_heads_that_never_read_a_reinference_is_refused(no_runs, capsys):
    # before: accepted; the run sampled m re-inferences per maternal response (2-3x the rollout time) that no reward
    # read, and trained exactly as plain GRPO while its config said CSRS
    for heads in ("{accuracy: 1.0}", "{accuracy: 0.9, format: 0.1}"):
        assert main(["train", "configs/grpo_tiny.yaml", "csrs.enabled=true", f"reward.heads={heads}"]) == 2
        assert "CSRS's re-inferences would be sampled and never used" in capsys.readouterr().err
    assert main(["evolve", "mmzero", "configs/mmzero_tiny.yaml", "mmzero.roles={solver: {csrs.enabled: true}}"]) == 2
    assert "mmzero.roles.solver" in capsys.readouterr().err
    assert no_runs == []
    # heads that read them, or one of one's own (it may read ScoredSample.role), are accepted
    for heads in ("{sfr: 1.0, format: 0.5}", "{majority: 1.0, accuracy: 1.0}", "{loop_plugins:AuxHead: 1.0}"):
        assert main(["train", "configs/grpo_tiny.yaml", "csrs.enabled=true", f"reward.heads={heads}"]) == 0
    assert no_runs == ["train"] * 3
