"""HONEST ``honest.hindsight_prob`` (seed 2.3 "epsilon-probability per step", section 7 ``--hindsight-prob``): the
per-step draw (frequency, reproducibility), the prompts with and without the ``<hindsight>`` slot, the hindsight
head on offered / not-offered samples, the step metric, the health monitor and audit on such steps, the config
checks, and the real GRPOTrainer on the tiny text model (the draw per step, survived by a resume)."""

import json
import math
import os
import subprocess
import sys
import warnings

import pytest

from mmevo.config import ConfigError, load_config
from mmevo.honest.protocol import (CORE_SYSTEM_PROMPT, LEGACY_SYSTEM_PROMPT, REFINED_SYSTEM_PROMPT, format_response,
                                   system_prompt)
from mmevo.honest.strategy import OFFERED_METRIC, HindsightSlotDraw, hindsight_slot_offered
from mmevo.rewards.heads import ScoredSample
from mmevo.rewards.honest import HonestHindsightHead

HCR = "reward.heads={honest_brier: 1.0, honest_hindsight: 1.0}"


# -- the draw -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.3, 0.05, 0.5, 0.9])
def test_draw_frequency_is_close_to_p(p):
    n = 20_000
    k = sum(hindsight_slot_offered(p, 7, step) for step in range(n))
    assert abs(k - n * p) < 5 * math.sqrt(n * p * (1 - p)), (k, p)


def test_draw_is_a_function_of_seed_and_step_only():
    draws = [hindsight_slot_offered(0.3, 11, s) for s in range(200)]
    assert [hindsight_slot_offered(0.3, 11, s) for s in reversed(range(200))] == draws[::-1]  # order-free
    assert [hindsight_slot_offered(0.3, 12, s) for s in range(200)] != draws  # another seed, other steps
    assert 30 < sum(draws) < 90
    # a fresh interpreter with another hash seed (a resumed run) draws the same
    code = ("from mmevo.honest.strategy import hindsight_slot_offered as f; "
            "print(''.join('1' if f(0.3, 11, s) else '0' for s in range(200)))")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": os.getcwd()}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == "".join("1" if d else "0" for d in draws)


def test_p0_never_and_p1_always_offer():
    assert not any(hindsight_slot_offered(0.0, s, step) for s in range(3) for step in range(2000))
    assert all(hindsight_slot_offered(1.0, s, step) for s in range(3) for step in range(2000))
    # the same threshold as p: raising p only adds offered steps (a run at 0.6 offers every step 0.3 offered)
    low = [hindsight_slot_offered(0.3, 5, s) for s in range(500)]
    high = [hindsight_slot_offered(0.6, 5, s) for s in range(500)]
    assert all(h for lo, h in zip(low, high) if lo) and sum(high) > sum(low)


# -- the prompts --------------------------------------------------------------------------------------------------
def test_prompts_with_and_without_the_slot():
    with_slot, without = system_prompt("legacy"), system_prompt("legacy", hindsight_slot=False)
    assert with_slot == LEGACY_SYSTEM_PROMPT and without == CORE_SYSTEM_PROMPT
    assert "<hindsight>" in with_slot and "hindsight" not in without.lower()
    slot = ("After the confidence you may look back over your work and add\n"
            "<hindsight>your reconsidered probability from 0 to 1 that the answer is correct</hindsight>\n")
    assert with_slot.replace(slot, "") == without  # the same protocol, less exactly the slot's two lines
    for part in ("<reasoning>", "<answer>", "<confidence>", "<abstain/>", "Brier score"):
        assert part in without
    assert system_prompt("refined") == REFINED_SYSTEM_PROMPT
    with pytest.raises(ValueError, match="refined mode"):
        system_prompt("refined", hindsight_slot=False)


# -- the head -----------------------------------------------------------------------------------------------------
_ABSENT = object()


def _sample(text, offered=_ABSENT, gold="4"):
    aux = {} if offered is _ABSENT else {"hindsight_offered": offered}
    return ScoredSample(text, 0, gold, [], aux=aux)


def test_head_pays_only_where_the_slot_was_offered():
    right = format_response("2 + 2", "4", 0.7, hindsight=0.8)  # y = 1: -0.3 * 0.2^2 = -0.012
    wrong = format_response("2 + 3", "5", 0.6, hindsight=0.9)  # y = 0: -0.3 * 0.9^2 = -0.243
    plain = format_response("2 + 2", "4", 0.7)
    samples = [_sample(right, True), _sample(wrong, True), _sample(right, False), _sample(wrong, False),
               _sample(plain, False), _sample(right)]  # no aux key: the legacy prompt offered it (as before)
    rewards, m = HonestHindsightHead("legacy", k=0.3).score(samples)
    assert rewards.tolist() == pytest.approx([-0.012, -0.243, 0.0, 0.0, 0.0, -0.012])
    assert m["fired"] == 3 and m["not_offered"] == 3 and m["unoffered_slot"] == 2
    assert m["nonzero_frac"] == pytest.approx(3 / 6)
    # a malformed slot written on a step that did not offer it is counted as written (and by its reason)
    bad = "<reasoning>r</reasoning><answer>4</answer><confidence>0.7</confidence><hindsight>high</hindsight>"
    rewards, m = HonestHindsightHead().score([_sample(bad, False), _sample(bad, True)])
    assert rewards.tolist() == [0.0, 0.0] and m["unoffered_slot"] == 1 and m["bad/non_numeric_hindsight"] == 2


def test_other_heads_score_an_unoffered_slot_like_any_response():
    from mmevo.rewards.honest import HonestBrierHead, HonestFormatHead

    text = format_response("2 + 2", "4", 0.7, hindsight=0.8)
    for head in (HonestBrierHead(), HonestFormatHead()):
        offered, _ = head.score([_sample(text, True)])
        unoffered, _ = head.score([_sample(text, False)])
        assert unoffered.tolist() == offered.tolist()
    assert HonestBrierHead().score([_sample(text, False)])[0].tolist() == pytest.approx([-0.09])


def test_refined_head_is_gated_too_and_bad_flags_are_refused():
    text = ("<reasoning>2 + 2 = 4</reasoning><answer>4</answer><confidence>0.6</confidence>"
            "<critique>checked the sum once more</critique><refined_confidence>0.9</refined_confidence>")
    rewards, m = HonestHindsightHead("refined").score([_sample(text, True), _sample(text, False)])
    # offered: alpha [(0.6-1)^2 - (0.9-1)^2] + beta = 0.16 - 0.01 + 0.05 = 0.2
    assert rewards.tolist() == pytest.approx([0.2, 0.0]) and m["unoffered_slot"] == 1 and m["fired"] == 1
    for flag in (1, "no", None):
        with pytest.raises(ValueError, match=r"samples\[0\].aux\['hindsight_offered'\]"):
            HonestHindsightHead().score([_sample(format_response("r", "4", 0.7), flag)])


# -- the strategy without a model ---------------------------------------------------------------------------------
class _Encoder:
    """A stand-in PromptCache: records which system prompt encoded each example."""

    def __init__(self, system):
        self.system_prompt, self.siblings = system, []

    def with_system_prompt(self, system):
        self.siblings.append(_Encoder(system))
        return self.siblings[-1]

    def __call__(self, ex):
        return self.system_prompt


class _Inner:
    def __init__(self):
        self.seen, self.state = [], {"k": 1}

    def rollout(self, ctx, examples):
        from mmevo.rollout.strategy import Rollout
        import torch

        self.seen.append([ctx.encode(ex) for ex in examples])
        n = len(examples)
        return Rollout([None] * n, [None] * n, ["x"] * n, torch.arange(n), list(examples), aux=[{"mine": 1}] * n)

    def after_rewards(self, rollout, rewards):
        return {"inner": 1.0}

    def state_dict(self):
        return self.state

    def load_state_dict(self, state):
        self.state = state


def _ctx(step, encode):
    from mmevo.rollout.strategy import RolloutContext

    return RolloutContext(None, None, None, encode, None, 2, 100, step, 0)


def test_strategy_switches_the_prompt_per_step_and_marks_samples():
    inner, enc = _Inner(), _Encoder(LEGACY_SYSTEM_PROMPT)
    draw = HindsightSlotDraw(inner, 0.5, seed=3)
    steps = range(12)
    expect = [hindsight_slot_offered(0.5, 3, s) for s in steps]
    assert 0 < sum(expect) < 12
    for s, offered in zip(steps, expect):
        ro = draw.rollout(_ctx(s, enc), ["a", "b"])
        assert inner.seen[-1] == [LEGACY_SYSTEM_PROMPT if offered else CORE_SYSTEM_PROMPT] * 2
        assert ro.aux == [{"mine": 1, "hindsight_offered": offered}] * 2
        assert ro.extra_metrics == {OFFERED_METRIC: float(offered)}
    assert len(enc.siblings) == 1  # one cache of the prompts without the slot, reused
    assert draw.after_rewards(ro, None) == {"inner": 1.0}
    assert draw.state_dict() is inner.state  # no state of its own: checkpoints stay the inner strategy's
    draw.load_state_dict({"k": 2})
    assert inner.state == {"k": 2}
    # p = 1: today's behaviour, the legacy prompt on every step; p = 0: never
    always, never = HindsightSlotDraw(_Inner(), 1.0, 3), HindsightSlotDraw(_Inner(), 0.0, 3)
    for s in steps:
        assert always.rollout(_ctx(s, enc), ["a"]).aux[0]["hindsight_offered"] is True
        assert never.rollout(_ctx(s, enc), ["a"]).extra_metrics[OFFERED_METRIC] == 0.0
    assert always.inner.seen == [[LEGACY_SYSTEM_PROMPT]] * 12 and never.inner.seen == [[CORE_SYSTEM_PROMPT]] * 12
    with pytest.raises(ValueError, match="data.system_prompt=honest"):
        HindsightSlotDraw(_Inner(), 0.0, 3).rollout(_ctx(0, _Encoder("my own prompt")), ["a"])
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        HindsightSlotDraw(_Inner(), 1.5, 3)


# -- config -------------------------------------------------------------------------------------------------------
def test_config_default_validation_and_where_it_applies():
    from mmevo.grpo.trainer import default_strategy
    from mmevo.honest import build_honest_plugins, draws_hindsight_slot
    from mmevo.rollout.strategy import PlainGroups

    assert load_config(None, []).honest.hindsight_prob == 0.3  # the seed's --hindsight-prob 0.3
    for bad in ("1.5", "-0.1", "1.0000001"):
        with pytest.raises(ConfigError, match=rf"honest.hindsight_prob={bad} must be in \[0, 1\]"):
            load_config(None, [HCR, f"honest.hindsight_prob={bad}"])
    with pytest.raises(ConfigError, match="honest.hindsight_prob: expected a finite number"):  # the loader's check
        load_config(None, [HCR, "honest.hindsight_prob=.nan"])
    cfg = load_config(None, [HCR, "trainer.seed=9"])
    st = default_strategy(cfg)
    assert draws_hindsight_slot(cfg) and isinstance(st, HindsightSlotDraw) and isinstance(st.inner, PlainGroups)
    assert (st.prob, st.seed) == (0.3, 9)
    honest, _ = build_honest_plugins(cfg, [])  # the HONEST strategy wraps it (the loop's solver too)
    assert isinstance(honest.inner, HindsightSlotDraw)
    # no hindsight head, or weight 0: the prompt is the same on every step (nothing rewards the slot)
    for heads in ("{honest_brier: 1.0}", "{honest_brier: 1.0, honest_hindsight: 0.0}"):
        plain = load_config(None, [f"reward.heads={heads}"])
        assert not draws_hindsight_slot(plain) and isinstance(default_strategy(plain), PlainGroups)
    # a custom system prompt cannot lose the slot per step: refused unless the probability is 1
    with pytest.raises(ConfigError, match="data.system_prompt is a custom prompt"):
        load_config(None, [HCR, "data.system_prompt=Be honest."])
    assert load_config(None, [HCR, "data.system_prompt=Be honest.", "honest.hindsight_prob=1"])


def test_refined_mode_ignores_the_probability_with_a_warning():
    from mmevo.grpo.trainer import default_strategy
    from mmevo.rollout.strategy import PlainGroups

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default value: no warning
        cfg = load_config(None, [HCR, "honest.hindsight_mode=refined"])
    assert cfg.data.system_prompt == REFINED_SYSTEM_PROMPT and isinstance(default_strategy(cfg), PlainGroups)
    with pytest.warns(UserWarning, match="hindsight_prob=0.5 is ignored in honest.hindsight_mode=refined"):
        cfg = load_config(None, [HCR, "honest.hindsight_mode=refined", "honest.hindsight_prob=0.5"])
    assert isinstance(default_strategy(cfg), PlainGroups)


def test_shipped_configs_solver_strategies():
    """configs/honest_tiny.yaml (legacy, HCR) now draws the slot at 0.3; the 1.5B config (refined) does not."""
    from pathlib import Path

    from mmevo.honest import draws_hindsight_slot
    from mmevo.honest.loop import role_config

    tiny = role_config(load_config("configs/honest_tiny.yaml", []), "solver", Path("unused"), "tiny-text")
    assert draws_hindsight_slot(tiny) and tiny.honest.hindsight_prob == 0.3
    big = role_config(load_config("configs/honest_qwen2_5_1_5b.yaml", []), "solver", Path("unused"), "m")
    assert not draws_hindsight_slot(big) and big.data.system_prompt == REFINED_SYSTEM_PROMPT


# -- health monitor and audit -------------------------------------------------------------------------------------
def test_health_monitor_does_not_judge_the_hindsight_std_of_unoffered_steps():
    from mmevo.honest.health import HealthMonitor

    mon = HealthMonitor(reward_std_keys=("reward/honest_hindsight/std", "reward/total/std"))
    quiet = {"reward/honest_hindsight/std": 0.0, "reward/total/std": 0.2, OFFERED_METRIC: 0.0}
    assert mon.update({"reward/honest_hindsight/std": 0.1, "reward/total/std": 0.2, OFFERED_METRIC: 1.0}
                      )["health/brier_only"] == 0
    for _ in range(3):  # not offered: the head paid 0 by design, no collapse
        assert mon.update(quiet)["health/brier_only"] == 0
    assert mon.counts["reward_collapse"] == 0 and not mon.events
    # an offered step with std 0 is the seed's collapse; other watched keys are judged on every step
    assert mon.update({**quiet, OFFERED_METRIC: 1.0})["health/brier_only"] == 1
    mon2 = HealthMonitor(reward_std_keys=("reward/total/std",))
    assert mon2.update({"reward/total/std": 0.0, OFFERED_METRIC: 0.0})["health/brier_only"] == 1


def test_loop_solver_strategy_tells_its_monitor_the_step_offered_no_slot():
    import torch

    from mmevo.honest.health import HealthMonitor
    from mmevo.honest.selfplay import SolverStrategy
    from mmevo.honest.strategy import HonestStrategy
    from mmevo.honest.tasks import generate_tasks

    tap = type("Tap", (), {"last_metrics": {"reward/honest_hindsight/std": 0.0}, "muted": set()})()
    examples = [t.to_example() for t in generate_tasks(2, seed=0)]
    for prob, collapsed in ((0.0, 0.0), (1.0, 1.0)):  # std 0: by design when not offered, a collapse when offered
        solver = SolverStrategy(HonestStrategy(HindsightSlotDraw(_Inner(), prob, 3)), HealthMonitor(), tap)
        ro = solver.rollout(_ctx(0, _Encoder(LEGACY_SYSTEM_PROMPT)), examples)
        assert solver.after_rewards(ro, torch.zeros(len(ro)))["health/brier_only"] == collapsed


def test_audit_counts_offered_steps(tmp_path):
    from mmevo.honest.calibration import hindsight_audit

    key = "reward/honest_hindsight/nonzero_frac"
    rows = [{"step": 1, key: 0.5, OFFERED_METRIC: 1.0}, {"step": 2, key: 0.0, OFFERED_METRIC: 0.0},
            {"step": 3, key: 0.0, OFFERED_METRIC: 0.0}, {"step": 4, key: 0.0, OFFERED_METRIC: 1.0},
            {"step": 5, key: 0.25}]  # no flag: offered (every step offered the slot before)
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    a = hindsight_audit(path)
    assert (a["steps"], a["nonzero_steps"], a["offered_steps"]) == (5, 2, 3)
    assert a["nonzero_share"] == pytest.approx(2 / 5) and a["nonzero_share_offered"] == pytest.approx(2 / 3)
    path.write_text(json.dumps({"step": 1, key: 0.0, OFFERED_METRIC: 0.5}) + "\n")
    with pytest.raises(ValueError, match=r"metrics.jsonl:1: field 'honest/hindsight_offered' must be 0 or 1"):
        hindsight_audit(path)


# -- the real trainer on the tiny text model ----------------------------------------------------------------------
def _trainer_cfg(path, out, steps, prob, seed=2):
    over = {"model.path": path, "data.train": "honest_tasks", "data.n_train": 16, "rollout.n": 2,
            "rollout.max_tokens": 4, "trainer.prompts_per_step": 2, "trainer.mini_batch_prompts": 2,
            "trainer.micro_batch_seqs": 4, "trainer.steps": steps, "trainer.output_dir": out,
            "trainer.wandb_mode": "disabled", "trainer.progress": False, "trainer.save_every": 1,
            "algo.kl_coef": 0, "trainer.seed": seed, "data.max_prompt_length": 2048, "honest.hindsight_prob": prob}
    return load_config(None, [HCR, *(f"{k}={v}" for k, v in over.items())])


def _trainer(cfg):
    from mmevo.models.loader import load_model
    from mmevo.recipes import build_trainer, load_examples

    train, _ = load_examples(cfg, "train")
    return build_trainer(cfg, load_model(cfg.model.path), train)


def test_real_trainer_draws_per_step_and_a_resume_draws_the_same(tiny_text_path, tmp_path):
    out = tmp_path / "run"
    seed, prob = 2, 0.5
    draws = [hindsight_slot_offered(prob, seed, s) for s in range(6)]
    assert 0 < sum(draws) < 6  # both kinds of step in this run
    tr = _trainer(_trainer_cfg(str(tiny_text_path), str(out), 6, prob, seed))
    assert isinstance(tr.strategy, HindsightSlotDraw)
    # the prompts of a step: the legacy prompt when offered, the protocol without the slot otherwise
    examples = tr.prompt_source.take(2)
    for step in (draws.index(True), draws.index(False)):
        tr.step_idx = step
        ro = tr.strategy.rollout(tr.rollout_context(), examples)
        text = ro.prompts[0].text
        assert ("<hindsight>" in text) is draws[step] and "<confidence>" in text
        assert (CORE_SYSTEM_PROMPT in text) is not draws[step]
        assert all(a["hindsight_offered"] is draws[step] for a in ro.aux)
        assert (ro.prompts[0].input_ids == tr.prompts(examples[0]).input_ids) is draws[step]
    tr.step_idx = 0
    tr.train(steps=3)
    tr.close()
    tr2 = _trainer(_trainer_cfg(str(tiny_text_path), str(out), 6, prob, seed))
    tr2.train()  # resumes at step 3 and runs 3 more
    tr2.close()
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r[OFFERED_METRIC] for r in rows] == [float(d) for d in draws]  # step k logs draw k - 1
    for r, d in zip(rows, draws):
        assert r["reward/honest_hindsight/not_offered"] == (0.0 if d else 4.0)  # 2 prompts x 2 samples
        if not d:
            assert r["reward/honest_hindsight/mean"] == 0.0 and r["reward/honest_hindsight/fired"] == 0.0


def test_real_trainer_at_p1_keeps_the_legacy_prompt(tiny_text_path, tmp_path):
    tr = _trainer(_trainer_cfg(str(tiny_text_path), str(tmp_path / "run"), 0, 1.0))
    examples = tr.prompt_source.take(2)
    for step in range(4):
        tr.step_idx = step
        ro = tr.strategy.rollout(tr.rollout_context(), examples)
        assert [p.input_ids for p in ro.prompts[::2]] == [tr.prompts(ex).input_ids for ex in examples]
        assert ro.extra_metrics[OFFERED_METRIC] == 1.0
    tr.close()


def test_readme_quotes_the_default_and_no_longer_says_not_implemented():
    from pathlib import Path

    readme = " ".join((Path(__file__).resolve().parent.parent / "README.md").read_text().split())
    assert load_config(None, []).honest.hindsight_prob == 0.3
    assert "probability `honest.hindsight_prob`, default 0.3" in readme
    assert "Not implemented: the seed's `--hindsight-prob`" not in readme
