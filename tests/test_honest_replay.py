"""HONEST CPR (mmevo.honest.replay) and the HONEST strategy (mmevo.honest.strategy, mmevo.honest.plugins):
priorities and sampling frequencies against hand-computed values, ring overwrite, snapshot / entropy, the replay mix
after its warm-up, per-group write-back from aux, prompt-source resume, and a short run of the real GRPOTrainer on
the tiny text model with the HONEST heads, both prompt sources and a resume that restores buffer and controller."""

import json
import math
import random

import pytest
import torch

from mmevo.data.prompts import EpochSampler
from mmevo.honest.protocol import format_response
from mmevo.honest.replay import (REPLAY_FLAG, ReplayBuffer, ReplayMixSource, group_outcomes,
                                 replay_write_back)
from mmevo.honest.strategy import HonestStrategy, honest_aux
from mmevo.honest.tasks import generate_tasks
from mmevo.rollout.strategy import Rollout, RolloutStrategy, sample_groups

EXAMPLES = [t.to_example() for t in generate_tasks(40, seed=0)]


def filled(stats, **kw):
    """A buffer with EXAMPLES[i] at (confidence, correct) = stats[i]."""
    buf = ReplayBuffer(**kw)
    for ex, (c, y) in zip(EXAMPLES, stats):
        buf.add(ex, c, y)
    return buf


# -- priorities, sampling ------------------------------------------------------------------------------------------
def test_priorities_by_hand():
    # errors |c - y|: 0.9, 0.1, 0.5, 0.5; alpha 1, eps 0: p = error / 2.0
    buf = filled([(0.9, False), (0.9, True), (0.5, True), (0.5, False)], alpha=1.0, eps=0.0)
    assert buf.probabilities().tolist() == pytest.approx([0.45, 0.05, 0.25, 0.25])
    # alpha 0.5, eps 0: sqrt(0.25) = 0.5 and sqrt(0.01) = 0.1 -> 5/6, 1/6
    buf = filled([(0.25, False), (0.99, True)])
    assert buf.probabilities(alpha=0.5, eps=0.0).tolist() == pytest.approx([5 / 6, 1 / 6])
    # memo defaults alpha 0.6, eps 1e-3: a perfectly calibrated prompt keeps weight eps^alpha = 1e-3^0.6 = 0.015849
    buf = filled([(1.0, True), (0.0, True)])
    w = [0.001 ** 0.6, 1.001 ** 0.6]  # 10^-1.8 = 0.0158489, e^(0.6 * 0.0009995) = 1.0005999
    assert buf.probabilities().tolist() == pytest.approx([w[0] / sum(w), w[1] / sum(w)])
    assert buf.probabilities().tolist()[0] == pytest.approx(0.0155924, abs=1e-7)  # 0.0158489 / 1.0164488
    # alpha 0: uniform; eps 0 with every prompt calibrated: uniform instead of 0/0
    assert filled([(0.9, False), (0.9, True)]).probabilities(alpha=0.0).tolist() == [0.5, 0.5]
    assert filled([(1.0, True), (0.0, False)]).probabilities(eps=0.0).tolist() == [0.5, 0.5]


def test_sampling_frequencies_match_the_probabilities():
    buf = filled([(0.9, False), (0.9, True), (0.5, True), (0.5, False)], alpha=1.0, eps=0.0)
    n = 40_000
    draws = buf.sample(n, rng=random.Random(0))
    counts = [sum(d.example is EXAMPLES[i] for d in draws) for i in range(4)]
    for k, p in zip(counts, [0.45, 0.05, 0.25, 0.25]):
        sd = math.sqrt(n * p * (1 - p))
        assert abs(k - n * p) < 5 * sd, (counts, p)
    # seeded: the same draws again; another seed, other draws
    assert [d.example.id for d in buf.sample(50, rng=random.Random(0))] == [d.example.id for d in draws[:50]]
    assert [d.example.id for d in buf.sample(50, rng=random.Random(1))] != [d.example.id for d in draws[:50]]
    # a call's alpha / eps win over the buffer's: alpha 0 is uniform
    uni = buf.sample(n, alpha=0.0, rng=random.Random(2))
    assert abs(sum(d.example is EXAMPLES[1] for d in uni) - n / 4) < 5 * math.sqrt(n * 0.25 * 0.75)
    assert buf.sample(0) == []
    with pytest.raises(ValueError, match="empty replay buffer"):
        ReplayBuffer().sample(1)


def test_ring_overwrite_and_in_place_update():
    buf = ReplayBuffer(capacity=3)
    for i in range(5):
        buf.add(EXAMPLES[i], 0.1 * i, True)
    assert len(buf) == 3 and buf.overwritten == 2 and buf.added == 5
    # slots 0, 1 were overwritten by prompts 3, 4: slot order 3, 4, 2
    assert [e.example.id for e in buf.entries()] == [EXAMPLES[i].id for i in (3, 4, 2)]
    buf.add(EXAMPLES[2], 0.9, False)  # already there: updated in place, no slot used, nothing evicted
    assert len(buf) == 3 and buf.updated == 1 and buf.entries()[2].confidence == 0.9
    assert buf.entries()[2].writes == 2 and buf.entries()[2].error == pytest.approx(0.9)
    buf.add(EXAMPLES[0], 0.5, True)  # evicted earlier: new again, takes the oldest slot (2)
    assert [e.example.id for e in buf.entries()] == [EXAMPLES[i].id for i in (3, 4, 0)]
    # a replayed copy updates its original and is stored clean
    tagged = EXAMPLES[3].__class__(**{**EXAMPLES[3].__dict__, "meta": {**EXAMPLES[3].meta, REPLAY_FLAG: True}})
    buf.add(tagged, 0.2, True)
    assert len(buf) == 3 and REPLAY_FLAG not in buf.entries()[0].example.meta
    for bad in (1.2, -0.1, float("nan")):
        with pytest.raises(ValueError, match=r"in \[0, 1\]"):
            buf.add(EXAMPLES[9], bad, True)
    with pytest.raises(ValueError, match="positive integer"):
        ReplayBuffer(capacity=0)


def test_snapshot_and_entropy_values():
    buf = filled([(0.9, False), (0.9, True), (0.5, True), (0.5, False)], alpha=1.0, eps=0.0)
    # H = -(0.45 ln 0.45 + 0.05 ln 0.05 + 2 * 0.25 ln 0.25) = 0.359329 + 0.149787 + 0.693147 = 1.202263
    assert buf.entropy_of_priorities() == pytest.approx(1.202263, abs=1e-6)
    snap = buf.snapshot()
    assert snap == {"size": 4, "capacity": 4096, "added": 4, "updated": 0, "overwritten": 0, "resume_dropped": 0,
                    "priority_entropy": pytest.approx(1.202263, abs=1e-6), "priority_entropy_max": math.log(4),
                    "error_mean": pytest.approx(0.5), "confidence_mean": pytest.approx(0.7), "accuracy": 0.5}
    json.dumps(snap)
    assert filled([(0.3, True)] * 6).entropy_of_priorities() == pytest.approx(math.log(6))  # equal: ln n
    assert filled([(0.3, True)]).entropy_of_priorities() == 0.0
    assert ReplayBuffer().entropy_of_priorities() == 0.0 and ReplayBuffer().snapshot()["size"] == 0
    # one miscalibrated prompt among 5 calibrated ones: p = 1.0006 / (1.0006 + 5 * 0.0158489) = 0.9266, the others
    # 0.0147 each; H = 0.0706 + 5 * 0.0619 = 0.380, below the seed's log 2 alarm (with 20 calibrated ones it is not)
    assert filled([(1.0, False)] + [(1.0, True)] * 5).entropy_of_priorities() == pytest.approx(0.380, abs=2e-3)
    assert filled([(1.0, False)] + [(1.0, True)] * 20).entropy_of_priorities() > math.log(2)


# -- the replay mix ------------------------------------------------------------------------------------------------
def test_mix_is_fresh_during_warmup_then_mixes_a_share():
    buf = filled([(0.8, False)] * 10)
    mix = ReplayMixSource(EpochSampler(EXAMPLES, seed=1), buf, share=0.3, warmup_steps=3, seed=2)
    plain = EpochSampler(EXAMPLES, seed=1)
    for _ in range(3):  # warm-up: exactly the base source
        assert [e.id for e in mix.take(8)] == [e.id for e in plain.take(8)]
    assert mix.epoch == plain.epoch
    replayed = total = 0
    for _ in range(400):
        batch = mix.take(10)
        flags = [e.meta.get(REPLAY_FLAG, False) for e in batch]
        assert sum(flags) == mix.last_replayed and mix.last_active
        replayed += sum(flags)
        total += len(batch)
    # Binomial(4000, 0.3): sd 29
    assert abs(replayed - 0.3 * total) < 5 * math.sqrt(total * 0.3 * 0.7)
    assert mix.replayed == replayed and all(REPLAY_FLAG not in e.example.meta for e in buf.entries())
    mix.enabled = False  # the health guardrail's switch
    assert not any(e.meta.get(REPLAY_FLAG) for e in mix.take(50))
    # past warm-up with an empty buffer: fresh prompts only
    empty = ReplayMixSource(EpochSampler(EXAMPLES, seed=1), ReplayBuffer(), warmup_steps=0)
    assert not any(e.meta.get(REPLAY_FLAG) for e in empty.take(20)) and not empty.last_active


def test_mix_resume_gives_the_uninterrupted_sequence():
    def run(mix, steps):
        seq = []
        for _ in range(steps):
            batch = mix.take(6)
            seq.append([(e.id, bool(e.meta.get(REPLAY_FLAG))) for e in batch])
            for e in batch:  # write-back between takes changes the priorities
                mix.buffer.add(e, (len(e.problem) % 10) / 10, len(e.problem) % 3 == 0)
        return seq

    def make():
        return ReplayMixSource(EpochSampler(EXAMPLES, seed=3), ReplayBuffer(capacity=16), share=0.5,
                               warmup_steps=2, seed=7)

    full = run(make(), 10)
    assert any(r for batch in full for _, r in batch)
    b = make()
    assert run(b, 4) == full[:4]
    state = torch.load(_roundtrip(b.state_dict()), weights_only=False)  # as a checkpoint holds it
    c = make()
    c.load_state_dict(state)
    assert run(c, 6) == full[4:]
    with pytest.raises(ValueError, match="capacity 16"):
        ReplayMixSource(EpochSampler(EXAMPLES, seed=3), ReplayBuffer(capacity=8)).load_state_dict(state)


def _roundtrip(obj):
    import io

    f = io.BytesIO()
    torch.save(obj, f)
    f.seek(0)
    return f


# -- aux, write-back -----------------------------------------------------------------------------------------------
def test_honest_aux_contract():
    ex = EXAMPLES[0]
    right = format_response("r", ex.answer, 0.8)
    assert honest_aux(right, ex) == {"correct": True, "confidence": 0.8, "abstain": False, "well_formed": True}
    wrong = format_response("r", ex.answer + "1", 0.3)
    assert honest_aux(wrong, ex)["correct"] is False and honest_aux(wrong, ex)["confidence"] == 0.3
    abstain = format_response("r", abstain=True)
    assert honest_aux(abstain, ex) == {"correct": False, "confidence": None, "abstain": True, "well_formed": True}
    assert honest_aux("just " + ex.answer, ex) == {"correct": False, "confidence": None, "abstain": False,
                                                    "well_formed": False}
    assert honest_aux(right, ex, use_gold=False)["correct"] is None  # label-free: nothing to grade against
    # a valid confidence without an answer is not a graded response: no confidence for the replay's mean
    no_answer = "<reasoning>r</reasoning><confidence>0.9</confidence>"
    assert honest_aux(no_answer, ex) == {"correct": False, "confidence": None, "abstain": False, "well_formed": False}


def _rollout(aux, gids, examples, trainable=None):
    B = len(aux)
    return Rollout([None] * B, [None] * B, [""] * B, torch.tensor(gids), examples, trainable=trainable, aux=aux)


def a(correct, conf):
    return {"correct": correct, "confidence": conf}


def test_group_outcomes_and_write_back_by_hand():
    aux = [a(True, 0.9), a(True, 0.8), a(False, None),  # group 0: 2 of 3 correct -> True; mean(0.9, 0.8) = 0.85
           a(True, 0.5), a(False, 0.7),  # group 1: 1 of 2 is a tie, not a majority -> False; mean 0.6
           a(None, 0.4), a(None, 0.6),  # group 2: no gold -> None
           a(False, None), a(False, None),  # group 3: wrong and no confidence stated
           a(True, 0.2), a(False, 1.0)]  # group 4: the second is a re-inference (masked): True, 0.2
    gids = [0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    exs = [EXAMPLES[g] for g in gids]
    mask = torch.tensor([True] * 10 + [False])
    out = group_outcomes(torch.tensor(gids), aux, mask)
    assert [(o.first, o.n, o.n_graded, o.n_correct, o.correct) for o in out] == [
        (0, 3, 3, 2, True), (3, 2, 2, 1, False), (5, 2, 0, 0, None), (7, 2, 2, 0, False), (9, 1, 1, 1, True)]
    assert [o.confidence for o in out] == pytest.approx([0.85, 0.6, 0.5, None, 0.2])
    buf = ReplayBuffer()
    m = replay_write_back(buf, _rollout(aux, gids, exs, trainable=mask))
    assert m == {"replay/written": 3.0, "replay/skipped_no_gold": 1.0, "replay/skipped_no_confidence": 1.0}
    assert [(e.example.id, e.correct, round(e.confidence, 6)) for e in buf.entries()] == [
        (EXAMPLES[0].id, True, 0.85), (EXAMPLES[1].id, False, 0.6), (EXAMPLES[4].id, True, 0.2)]
    with pytest.raises(ValueError, match="aux dicts"):
        group_outcomes(torch.tensor([0, 1]), [a(True, 0.5)])


def test_write_back_correctness_comes_from_the_samples_that_stated_a_confidence():
    from mmevo.honest.curriculum import DifficultyController

    fresh = [e for e in EXAMPLES if e.meta["difficulty"] == 5 and e.meta["domain"] == "logic"][:2]
    gold = [ex.answer for ex in fresh]
    # group 0 (the reviewer's case): one right answer at 0.9, three abstains -> all-sample majority 1 / 4 = wrong,
    # but the only stated confidence was right: |0.9 - 1| = 0.1, not |0.9 - 0| = 0.9
    # group 1: two right answers without a confidence (malformed), one wrong at 0.2 -> 2 / 3 right, replay y = 0
    texts = [format_response("r", gold[0], 0.9)] + [format_response("unsure", abstain=True)] * 3 \
        + ["<reasoning>r</reasoning><answer>" + gold[1] + "</answer>"] * 2 + [format_response("r", "nope", 0.2)]
    exs = [fresh[0]] * 4 + [fresh[1]] * 3
    aux = [honest_aux(x, ex) for x, ex in zip(texts, exs)]
    assert [x["correct"] for x in aux] == [True, False, False, False, True, True, False]
    gids = [0, 0, 0, 0, 1, 1, 1]
    out = group_outcomes(torch.tensor(gids), aux)
    assert [(o.n_correct, o.correct, o.confident_correct) for o in out] == [(1, False, True), (2, True, False)]
    assert [o.confidence for o in out] == pytest.approx([0.9, 0.2])
    ctl = DifficultyController(["logic"], start=5, window=2, min_episodes=2, cooldown=0)
    buf = ReplayBuffer()
    m = HonestStrategy(buffer=buf, controller=ctl).after_rewards(_rollout(aux, gids, exs), torch.zeros(7))
    assert m["replay/written"] == 2.0 and m["curriculum/recorded"] == 2.0
    assert [(e.correct, round(e.confidence, 6), round(e.error, 6)) for e in buf.entries()] == [
        (True, 0.9, 0.1), (False, 0.2, 0.2)]  # the old write-back stored (False, 0.9, 0.9) and (True, 0.2, 0.8)
    # priorities (|c - y| + 1e-3)^0.6: 0.101^0.6 and 0.201^0.6, normalised
    w = [0.101 ** 0.6, 0.201 ** 0.6]
    assert buf.probabilities().tolist() == pytest.approx([x / sum(w) for x in w], rel=1e-9)
    # the curriculum keeps the all-sample majority: group 0 failed, group 1 solved
    assert ctl.rolling_accuracy("logic", 5) == 0.5 and list(ctl.outcomes[("logic", 5)]) == [0, 1]


def test_strategy_after_rewards_skips_replays_for_the_curriculum():
    from mmevo.honest.curriculum import DifficultyController

    ctl = DifficultyController(["arithmetic", "modular", "logic"], start=5, window=2, min_episodes=2, cooldown=0)
    buf = ReplayBuffer()
    st = HonestStrategy(buffer=buf, controller=ctl)
    fresh = [e for e in EXAMPLES if e.meta["difficulty"] == 5 and e.meta["domain"] == "logic"][:2]
    replay = EXAMPLES[0].__class__(**{**fresh[0].__dict__, "meta": {**fresh[0].meta, REPLAY_FLAG: True}})
    exs = [fresh[0], fresh[0], fresh[1], fresh[1], replay, replay]
    ro = _rollout([a(True, 0.9)] * 6, [0, 0, 1, 1, 2, 2], exs)
    m = st.after_rewards(ro, torch.zeros(6))
    assert m["curriculum/recorded"] == 2.0 and m["curriculum/skipped"] == 1.0 and m["curriculum/promoted_now"] == 1
    assert m["difficulty/logic/ceiling"] == 6.0 and m["replay/written"] == 3.0 and len(buf) == 2
    assert m["honest/group_majority_correct"] == 1.0 and st.state_dict() == {"inner": {}, "rounds": 1}


# -- the real trainer ----------------------------------------------------------------------------------------------
class ScriptedProtocol(RolloutStrategy):
    """Plain groups whose response texts are replaced by protocol responses (the tiny model never writes one): all
    but the last sample of a group answer right with confidence 0.7, the last answers wrong with 0.4. Training still
    runs on the sampled tokens; only the rewards and the HONEST bookkeeping read the texts."""

    def rollout(self, ctx, examples):
        ro = sample_groups(ctx, examples)
        gids = ro.group_ids.tolist()
        for i, ex in enumerate(ro.examples):
            last = i + 1 == len(gids) or gids[i + 1] != gids[i]
            ro.texts[i] = format_response("work", ex.answer + "0" if last else ex.answer, 0.4 if last else 0.7)
        return ro


def _trainer_cfg(path, out, steps):
    from mmevo.config import load_config

    over = {"model.path": path, "rollout.n": 3, "rollout.max_tokens": 6, "trainer.prompts_per_step": 4,
            "trainer.mini_batch_prompts": 4, "trainer.micro_batch_seqs": 12, "trainer.lr": 1e-4,
            "trainer.steps": steps, "trainer.output_dir": out, "trainer.wandb_mode": "disabled",
            "trainer.progress": False, "trainer.save_every": 1, "algo.kl_coef": 0, "trainer.seed": 4,
            "data.max_prompt_length": 2048, "reward.heads": "{honest_brier: 1.0, honest_format: 0.5}",
            "honest.domains": "[arithmetic, logic]", "honest.replay_enabled": True, "honest.replay_warmup_steps": 1,
            "honest.replay_share": 0.5, "honest.smc_enabled": True, "honest.smc_window": 2,
            "honest.smc_min_episodes": 2, "honest.smc_cooldown": 0, "honest.smc_cap": 6,
            "honest.smc_ceiling_share": 1.0}
    return load_config(None, [f"{k}={v}" for k, v in over.items()])


def _build(cfg, path, train):
    from mmevo.honest import build_honest_plugins
    from mmevo.models.loader import load_model
    from mmevo.recipes import build_trainer

    strategy, source = build_honest_plugins(cfg, train)
    strategy.inner = ScriptedProtocol()
    return build_trainer(cfg, load_model(path), strategy=strategy, prompt_source=source), strategy, source


def test_real_trainer_fills_buffer_logs_ceilings_and_resumes(tiny_text_path, tmp_path):
    from mmevo.honest.curriculum import CurriculumSource
    from mmevo.honest.tasks import recompute_answer

    train = [t.to_example() for t in generate_tasks(30, seed=0, domains=["arithmetic", "logic"])]
    cfg = _trainer_cfg(str(tiny_text_path), str(tmp_path / "run"), 3)
    assert "<confidence>" in cfg.data.system_prompt  # the HONEST protocol prompt (resolve_honest_config)
    tr, strategy, source = _build(cfg, str(tiny_text_path), train)
    assert isinstance(source, ReplayMixSource) and isinstance(source.base, CurriculumSource)
    assert strategy.buffer is source.buffer and strategy.controller is source.base.controller
    hist = tr.train()
    tr.close()
    buf, ctl = source.buffer, source.base.controller
    # every group: 2 of 3 answers right (majority True), mean confidence (0.7 + 0.7 + 0.4) / 3 = 0.6
    assert len(buf) >= 8 and all(e.correct and e.confidence == pytest.approx(0.6) for e in buf.entries())
    assert any(e.writes > 1 for e in buf.entries())  # replayed prompts were written back in place
    # step 1: 4 fresh prompts at ceiling 5 (2 per domain), each domain 2 episodes at accuracy 1.0: promoted to 6
    assert ctl.ceilings == {"arithmetic": 6, "logic": 6}
    logged = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in logged] == [1, 2, 3]
    assert [m["difficulty/arithmetic/ceiling"] for m in logged] == [6.0, 6.0, 6.0]
    assert all("difficulty/logic/ceiling" in m and "replay/priority_entropy" in m for m in logged)
    assert logged[0]["replay/active"] == 0.0 and logged[0]["reward/honest_brier/accuracy"] == pytest.approx(2 / 3)
    assert sum(m["replay/batch_replayed"] for m in logged[1:]) == source.replayed > 0  # after the 1-step warm-up
    assert hist[1]["curriculum/mutations"] > 0  # step 2 draws difficulty-6 tasks: mutations of 5s
    # a resumed trainer restores buffer, controller and the sources' positions
    tr2, strategy2, source2 = _build(_trainer_cfg(str(tiny_text_path), str(tmp_path / "run"), 3),
                                     str(tiny_text_path), train)
    assert len(source2.buffer) == 0 and tr2.maybe_resume() and tr2.step_idx == 3
    assert source2.buffer.snapshot() == buf.snapshot()
    assert [(e.example.id, e.confidence, e.correct) for e in source2.buffer.entries()] == \
        [(e.example.id, e.confidence, e.correct) for e in buf.entries()]
    assert source2.base.controller.state_dict() == ctl.state_dict() and strategy2.rounds == strategy.rounds == 3
    nxt, nxt2 = source.take(8), source2.take(8)
    assert [(e.id, e.problem) for e in nxt2] == [(e.id, e.problem) for e in nxt]
    assert all(e.answer == recompute_answer(e.meta) for e in nxt2)
    tr2.close()


def test_build_honest_plugins_combinations_and_config_errors():
    from mmevo.config import ConfigError, load_config
    from mmevo.csrs.strategy import CSRSStrategy
    from mmevo.honest import build_honest_plugins
    from mmevo.honest.curriculum import CurriculumSource

    def build(*over, train=EXAMPLES):
        return build_honest_plugins(load_config(None, ["reward.heads={honest_brier: 1.0}", *over]), train)

    st, src = build()
    assert isinstance(src, EpochSampler) and st.buffer is None and st.controller is None
    st, src = build("honest.replay_enabled=true")
    assert isinstance(src, ReplayMixSource) and isinstance(src.base, EpochSampler) and st.buffer is src.buffer
    assert (src.buffer.capacity, src.share, src.warmup_steps, src.alpha, src.eps) == (4096, 0.3, 100, 0.6, 1e-3)
    st, src = build("honest.smc_enabled=true", "honest.smc_mutators=[numeric]", "csrs.enabled=true")
    assert isinstance(src, CurriculumSource) and st.controller is src.controller and list(src.mutators) == ["numeric"]
    assert isinstance(st.inner, CSRSStrategy)  # the config's strategy, wrapped
    ctl = src.controller
    assert (ctl.start, ctl.cap, ctl.window, ctl.promote_at, ctl.demote_below, ctl.min_episodes, ctl.cooldown,
            src.max_retries) == (5, 8, 20, 0.75, 0.20, 20, 10, 3)
    st, src = build("honest.smc_enabled=true", "honest.replay_enabled=true", train=())
    assert isinstance(src.base, CurriculumSource) and src.base.pool_size == 0  # the generator alone
    assert st.use_gold and build("data.hide_labels=true")[0].use_gold is False  # label-free: nothing is graded
    with pytest.raises(ValueError, match="needs fresh prompts"):
        build("honest.replay_enabled=true", train=())
    for bad, match in [("honest.replay_share=1.5", "replay_share"), ("honest.smc_window=10", "smc_min_episodes"),
                       ("honest.smc_cap=4", "smc_cap"), ("honest.smc_mutators=[shuffle]", "smc_mutators"),
                       ("honest.smc_promote=0.1", "smc_demote < smc_promote")]:
        with pytest.raises(ConfigError, match=match):
            build(bad)
