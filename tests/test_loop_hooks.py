"""The core's hooks for self-play loops, used only through their public surface (tests/loop_plugins.py):
strategies with per-sample aux, heads by import path with config arguments, prompt sources (checkpointed),
step(examples), seed offsets, content-keyed prompt cache, build_trainer / close."""

import dataclasses
import json

import pytest
import torch

from conftest import randomize
from loop_plugins import CountingSource, TaggingStrategy
from mmevo.config import ConfigError, load_config
from mmevo.data.synthetic import split_train_heldout
from mmevo.models.loader import load_model
from mmevo.recipes import build_trainer
from mmevo.rewards.heads import RewardMixer
from mmevo.rollout.strategy import PlainGroups

HEAD = "loop_plugins:AuxHead"


def _cfg(out, **over):
    base = {"data.prompt_template": "none", "rollout.n": 3, "rollout.max_tokens": 8, "trainer.prompts_per_step": 2,
            "trainer.mini_batch_prompts": 1, "trainer.micro_batch_seqs": 4, "trainer.lr": 1e-3, "trainer.steps": 2,
            "trainer.output_dir": str(out), "trainer.wandb_mode": "disabled", "trainer.progress": False,
            "trainer.save_every": 1, "algo.kl_coef": 0, "trainer.seed": 4}
    base.update(over)
    return load_config(None, [f"{k}={v}" for k, v in base.items()])


@pytest.fixture(scope="module")
def data():
    return split_train_heldout(12, 0, seed=8)


def _policy(path):
    lm = load_model(path)
    randomize(lm.model, std=0.15, seed=3)
    return lm


def test_strategy_aux_reaches_a_head_named_by_import_path_with_config_args(tiny_vl_path, tmp_path, data):
    kind = data[0][0].meta["kind"]
    cfg = _cfg(tmp_path, **{"reward.heads": f"{{{HEAD}: 1.0}}", "data.hide_labels": True,
                            "reward.head_args": f"{{{HEAD}: {{scale: 0.5, bonus: 2.0, kind: {kind}}}}}"})
    assert cfg.reward.heads == {HEAD: 1.0} and cfg.reward.head_args[HEAD]["scale"] == 0.5
    strategy = TaggingStrategy()
    tr = build_trainer(cfg, _policy(tiny_vl_path), data[0], strategy=strategy)
    exs = data[0][:2]
    m = tr.step(exs)
    # slots 0, 1, 2 per group (n = 3); +2 where the example's meta kind is the configured one
    expected = [0.5 * slot + 2.0 * (ex.meta["kind"] == kind) for ex in exs for slot in range(3)]
    assert strategy.seen_rewards == [pytest.approx(expected)]
    assert m["reward/AuxHead/mean"] == pytest.approx(sum(expected) / 6)
    assert m["reward/AuxHead/gold_seen"] == 0  # label-free: the head's Example carries no answer
    assert m["tagging/rounds"] == 1 and m["actor/updates"] == 2
    tr.close()


def test_head_resolution_and_argument_errors_are_clear():
    with pytest.raises(ValueError, match="cannot import module 'no_such_module'"):
        RewardMixer({"no_such_module:Head": 1.0})
    with pytest.raises(ValueError, match="has no attribute 'Nope'"):
        RewardMixer({"loop_plugins:Nope": 1.0})
    with pytest.raises(ValueError, match=r"AuxHead' rejected its arguments .*unexpected keyword argument 'scael'.*it takes \(scale"):
        RewardMixer({HEAD: 1.0}, {HEAD: {"scael": 2}})
    with pytest.raises(ValueError, match="unknown reward head 'acuracy'"):
        RewardMixer({"acuracy": 1.0})
    with pytest.raises(ConfigError, match=r"head_args names \['sfr'\]"):
        load_config(None, ["reward.head_args={sfr: {gamma: 0.1}}"])
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(None, ["reward.head_args={accuracy: 3}"])
    # SFR arguments: csrs.gamma / beta by default, reward.head_args wins
    from mmevo.grpo.trainer import head_arguments

    cfg = load_config(None, ["csrs.enabled=true", "reward.heads={sfr: 1.0}", "csrs.gamma=0.3",
                             "reward.head_args={sfr: {beta: 2.0}}"])
    assert head_arguments(cfg) == {"sfr": {"gamma": 0.3, "beta": 2.0}}
    assert RewardMixer(cfg.reward.heads, head_arguments(cfg)).heads["sfr"].beta == 2.0


def _run(cfg, path, steps):
    source, strategy = CountingSource(seed=5), TaggingStrategy()
    tr = build_trainer(cfg, _policy(path), strategy=strategy, prompt_source=source)
    hist = tr.train(steps=steps)
    tr.close()
    return tr, source, strategy, hist


def test_custom_prompt_source_and_strategy_state_are_checkpointed_and_resumed(tiny_vl_path, tmp_path):
    over = {"reward.heads": f"{{{HEAD}: 1.0, format: 1.0}}"}
    a, src_a, strat_a, hist_a = _run(_cfg(tmp_path / "a", **{**over, "trainer.steps": 3}), tiny_vl_path, 3)
    _run(_cfg(tmp_path / "b", **over), tiny_vl_path, 2)
    b, src_b, strat_b, hist_b = _run(_cfg(tmp_path / "b", **{**over, "trainer.steps": 3}), tiny_vl_path, 1)
    assert b.step_idx == 3 and len(hist_b) == 1
    assert src_b.history == [src_a.history[2]]  # the resumed source hands out step 3's prompts, not step 1's
    assert src_b.taken == src_a.taken == 6
    assert strat_b.rounds == strat_a.rounds == 3 and strat_b.seen_rewards == [strat_a.seen_rewards[2]]
    assert b.rewards.heads[HEAD].calls == 3  # head state restored too
    for key in ("actor/loss", "reward/total/mean", "reward/AuxHead/mean", "response/length_mean"):
        assert hist_b[0][key] == pytest.approx(hist_a[2][key], rel=1e-5, abs=1e-7), key
    assert torch.load(tmp_path / "b" / "checkpoints" / "step_000003" / "trainer_state.pt",
                      weights_only=False)["strategy"] == {"rounds": 3, "reward_sum": pytest.approx(strat_a.reward_sum)}


def test_prompt_cache_keys_on_content_not_on_id(tiny_vl_path, tmp_path, data):
    tr = build_trainer(_cfg(tmp_path), _policy(tiny_vl_path), data[0])
    ex = data[0][0]
    first = tr.prompts(ex)
    assert tr.prompts(dataclasses.replace(ex)) is first  # same content: cached
    new_text = tr.prompts(dataclasses.replace(ex, problem=ex.problem + " Explain."))
    assert new_text.input_ids != first.input_ids
    other_image = data[0][1].images[0].resize(ex.images[0].size)
    new_image = tr.prompts(dataclasses.replace(ex, images=[other_image]))
    assert not torch.equal(new_image.pixel_values, first.pixel_values)


def test_step_on_given_examples_and_seed_offsets(tiny_vl_path, tmp_path, data):
    tr = build_trainer(_cfg(tmp_path, **{"reward.heads": "{format: 1.0}"}), _policy(tiny_vl_path),
                       strategy=TaggingStrategy())
    with pytest.raises(ValueError, match="no prompts"):
        tr.step()
    seen = []
    real = tr.strategy.rollout
    tr.strategy.rollout = lambda ctx, exs: seen.append([e.id for e in exs]) or real(ctx, exs)
    tr.step(data[0][5:7])
    assert seen == [[data[0][5].id, data[0][6].id]]
    # the seed offset changes the step's draws (a loop's iterations / roles), offset 0 reproduces them
    exs = data[0][:2]
    texts = {}
    for offset in (0, 1, 0):
        tr.seed_offset = offset
        texts.setdefault(offset, []).append(PlainGroups().rollout(tr.rollout_context(), exs).texts)
    assert texts[0][0] == texts[0][1] and texts[1][0] != texts[0][0]


def test_build_trainer_defaults_and_close(tiny_vl_path, tmp_path, data, monkeypatch):
    from mmevo.csrs.strategy import CSRSStrategy

    monkeypatch.setenv("WANDB_MODE", "offline")

    cfg = _cfg(tmp_path, **{"csrs.enabled": True, "csrs.m": 2, "reward.heads": "{sfr: 1.0}",
                            "trainer.wandb_mode": "offline"})
    tr = build_trainer(cfg, _policy(tiny_vl_path), data[0])
    assert isinstance(tr.strategy, CSRSStrategy) and tr.prompt_source.n == len(data[0])
    tr.step()
    tr.close()
    with pytest.raises(RuntimeError, match="closed"):
        tr.engine.generate([], tr.rollout_context().params)
    tr2 = build_trainer(_cfg(tmp_path / "two", **{"trainer.wandb_mode": "offline"}), _policy(tiny_vl_path), data[0])
    tr3 = build_trainer(_cfg(tmp_path / "three", **{"trainer.wandb_mode": "offline"}), _policy(tiny_vl_path), data[0])
    tr2.train(steps=1)
    tr3.train(steps=1)
    tr2.train(steps=1)  # the first trainer's run is still open after a second trainer started its own
    tr2.close()
    tr3.close()
    assert [json.loads(l)["step"] for l in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()] == [1, 2]
