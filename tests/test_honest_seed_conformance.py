"""HONEST leftovers of the seed-conformance audit: the per-step hindsight slot draw follows the trainer's
``seed_offset`` (as every other per-step draw of a loop does), the health monitor reads the strategy's metric name
(no second copy of the literal), and the calibration SFT prompts each target the way the RL steps after it do (the
slot offered exactly where the target writes it, seed 2.3 / 2.6)."""

import json
import inspect
import random
from types import SimpleNamespace

import pytest

from mmevo.config import load_config
from mmevo.data.schema import SFT_SYSTEM_PROMPT, Example
from mmevo.honest.protocol import CORE_SYSTEM_PROMPT, LEGACY_SYSTEM_PROMPT
from mmevo.honest.strategy import OFFERED_METRIC, HindsightSlotDraw, hindsight_slot_offered


# -- the slot draw and the trainer's seed_offset --------------------------------------------------------------------
def _reference_draw(prob, seed, step, offset):
    """The draw written out independently: one uniform number per (seed, offset, step); offset 0 is the stream a
    run without an offset always had."""
    key = f"honest-hindsight-slot/{seed}/{step}" + (f"/offset{offset}" if offset else "")
    return random.Random(key).random() < prob


def test_slot_draw_depends_on_the_seed_offset():
    steps = range(300)
    by_offset = {o: [hindsight_slot_offered(0.3, 5, s, o) for s in steps] for o in (0, 1, 2, 7)}
    for o, draws in by_offset.items():
        assert draws == [_reference_draw(0.3, 5, s, o) for s in steps]
        assert 60 <= sum(draws) <= 120  # ~0.3 of 300 steps for every offset
    # offset 0 is the old stream (resumed runs draw what they drew); other offsets draw afresh
    assert by_offset[0] == [hindsight_slot_offered(0.3, 5, s) for s in steps]
    assert len({tuple(d) for d in by_offset.values()}) == 4
    # p = 0 / 1 stay never / always whatever the offset
    assert not any(hindsight_slot_offered(0.0, 5, s, 3) for s in steps)
    assert all(hindsight_slot_offered(1.0, 5, s, 3) for s in steps)


class _Encoder:
    def __init__(self, system):
        self.system_prompt = system

    def with_system_prompt(self, system):
        return _Encoder(system)

    def __call__(self, ex):
        return self.system_prompt


class _Inner:
    def __init__(self):
        self.seen = []

    def rollout(self, ctx, examples):
        import torch

        from mmevo.rollout.strategy import Rollout

        self.seen.append(ctx.encode(examples[0]))
        n = len(examples)
        return Rollout([None] * n, [None] * n, ["x"] * n, torch.arange(n), list(examples))


def test_strategy_draws_with_the_context_seed_offset():
    from mmevo.rollout.strategy import RolloutContext

    steps = range(40)
    for offset in (0, 1, 4):
        inner = _Inner()
        draw = HindsightSlotDraw(inner, 0.5, seed=3)
        got = []
        for s in steps:
            ctx = RolloutContext(None, None, None, _Encoder(LEGACY_SYSTEM_PROMPT), None, 2, 100, s, 0,
                                 seed_offset=offset)
            got.append(draw.rollout(ctx, ["a"]).aux[0]["hindsight_offered"])
        expect = [_reference_draw(0.5, 3, s, offset) for s in steps]
        assert got == expect
        assert inner.seen == [LEGACY_SYSTEM_PROMPT if e else CORE_SYSTEM_PROMPT for e in expect]
    # the context default (a strategy driven without a trainer) is offset 0
    ctx = RolloutContext(None, None, None, _Encoder(LEGACY_SYSTEM_PROMPT), None, 2, 100, 0, 0)
    assert ctx.seed_offset == 0


def test_trainer_context_carries_its_seed_offset():
    """``GRPOTrainer.rollout_context`` hands the trainer's current ``seed_offset`` to the strategy (a loop sets it
    after building the trainer), and it is not the rank-dependent step seed."""
    from mmevo.grpo.trainer import GRPOTrainer
    from mmevo.rollout.strategy import step_seed

    cfg = load_config(None, ["trainer.seed=4"])
    fake = SimpleNamespace(cfg=cfg, step_idx=6, seed_offset=5, engine=SimpleNamespace(stop_ids=[2]),
                           policy=SimpleNamespace(processor=None, tokenizer=None), prompts=None)
    ctx = GRPOTrainer.rollout_context(fake)
    assert (ctx.step, ctx.seed_offset, ctx.seed) == (6, 5, step_seed(4, 6, 0, 5))
    fake.seed_offset = 0
    assert GRPOTrainer.rollout_context(fake).seed_offset == 0


# -- health reads the strategy's metric name --------------------------------------------------------------------------
def test_health_uses_the_strategy_metric_name_not_a_copy():
    import mmevo.honest.health as health

    assert health.OFFERED_KEY is OFFERED_METRIC
    assert health.HealthMonitor().offered_key is OFFERED_METRIC
    assert '"honest/hindsight_offered"' not in inspect.getsource(health)


# -- calibration SFT prompts ------------------------------------------------------------------------------------------
def _sft_cfg(*over):
    return load_config(None, ["data.train=honest_sft", "honest.sft_n=40", *over])


def _prompts(rows):
    return [ex.meta.get(SFT_SYSTEM_PROMPT) for ex in rows]


def test_sft_prompt_offers_the_slot_exactly_on_targets_that_write_it():
    from mmevo.honest.sft import calibration_sft_examples, load_calibration_sft

    for over in ((), ("reward.heads={honest_brier: 1.0, honest_hindsight: 1.0}",)):  # mmevo sft's own; HCR heads
        rows = calibration_sft_examples(_sft_cfg(*over))
        with_slot = [ex for ex in rows if "<hindsight>" in ex.solution]
        assert len(with_slot) == 20  # the tiny tier's hindsight_frac 0.5 of 40
        for ex in rows:
            writes = "<hindsight>" in ex.solution
            assert ex.meta[SFT_SYSTEM_PROMPT] == (LEGACY_SYSTEM_PROMPT if writes else CORE_SYSTEM_PROMPT), ex.id
        _, stats = load_calibration_sft(_sft_cfg(*over), "train")
        assert stats["prompted_without_slot"] == 20 and stats["plan"]["slot_prompts"] is True


@pytest.mark.parametrize("over", [
    ("honest.hindsight_prob=1",),  # the slot on every RL step: the one legacy prompt everywhere
    ("reward.heads={honest_brier: 1.0}",),  # RL heads without HCR: the legacy prompt on every RL step
    ("honest.hindsight_mode=refined",),  # CASR's tags are taught on every step
])
def test_sft_keeps_the_run_prompt_where_rl_does(over):
    from mmevo.honest.sft import calibration_sft_examples

    rows = calibration_sft_examples(_sft_cfg(*over))
    assert _prompts(rows) == [None] * len(rows)


def test_loop_solver_sft_follows_its_rl_steps():
    from pathlib import Path

    from mmevo.honest.loop import role_config
    from mmevo.honest.sft import slot_follows_target

    tiny = load_config("configs/honest_tiny.yaml", [])
    assert slot_follows_target(role_config(tiny, "solver", Path("unused"), "tiny-text"))  # HCR at 0.3
    no_hcr = load_config("configs/honest_tiny.yaml", ["honest.hcr_enabled=false"])
    assert not slot_follows_target(role_config(no_hcr, "solver", Path("unused"), "tiny-text"))


def test_run_sft_encodes_each_example_with_its_own_system_prompt(tiny_text_path, tmp_path, monkeypatch):
    import mmevo.grpo.sft as sft_mod
    from mmevo.models.loader import load_model

    cfg = load_config(None, [f"model.path={tiny_text_path}", f"sft.output_dir={tmp_path}", "sft.batch_size=3",
                             "sft.epochs=1", "sft.save_every=0", "data.system_prompt=run prompt",
                             "data.prompt_template=none"])
    rows = [Example("a", "q1", "1", [], [], solution="s1", meta={SFT_SYSTEM_PROMPT: "own prompt A"}),
            Example("b", "q2", "2", [], [], solution="s2"),
            Example("c", "q3", "3", [], [], solution="s3", meta={SFT_SYSTEM_PROMPT: "own prompt B"})]
    policy = load_model(cfg.model.path)
    seen = {}

    class Stop(Exception):
        pass

    def capture(model, prompts, targets, *a, **k):
        for p in prompts:
            seen[p.text.split("q")[-1][:1]] = p.text
        raise Stop

    monkeypatch.setattr(sft_mod, "sequence_logprobs", capture)
    with pytest.raises(Stop):
        sft_mod.run_sft(cfg, policy, rows, log=False)
    assert "own prompt A" in seen["1"] and "run prompt" not in seen["1"]
    assert "run prompt" in seen["2"]
    assert "own prompt B" in seen["3"] and "run prompt" not in seen["3"]
    bad = [Example("d", "q", "1", [], [], solution="s", meta={SFT_SYSTEM_PROMPT: 3})]
    with pytest.raises(ValueError, match=r"SFT example 'd' \(index 0\): meta\['sft_system_prompt'\] must be a string"):
        sft_mod.run_sft(cfg, policy, bad, log=False)


def test_health_events_file_exists_empty_until_a_detector_fires(tmp_path):
    # a run's outputs list health_events.jsonl: a run whose detectors never fire has it empty, not missing
    import mmevo.honest.health as health

    path = tmp_path / "run" / "health_events.jsonl"
    mon = health.HealthMonitor(events_path=path)
    assert path.read_text() == ""
    mon.update({"reward/honest_hindsight/std": 0.5})  # no collapse: nothing appended
    assert path.read_text() == ""
    mon.update({"reward/honest_hindsight/std": 0.0})  # the seed's std < 1e-4: one reward-collapse event
    assert [json.loads(line)["detector"] for line in path.read_text().splitlines()] == ["reward_collapse"]
    health.HealthMonitor(events_path=path)  # a resumed run's monitor keeps what was logged
    assert len(path.read_text().splitlines()) == 1
