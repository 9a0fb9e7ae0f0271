"""HONEST GSS (stub and trainable generator) and the outer loop (`mmevo evolve honest`)."""

import json

import pytest

from mmevo.honest.protocol import format_response
from mmevo.honest.selfplay import (GSS_DOMAIN, GSSMixSource, GeneratorStrategy, HonestGeneratorHead, StubGenerator,
                                   generator_reward, parse_generated)
from mmevo.honest.tasks import recompute_answer
from mmevo.rewards.heads import ScoredSample


# -- parsing / verifying generated problems -----------------------------------------------------------------------
def test_valid_expression_gets_a_computed_answer_and_a_rendered_question():
    p, why = parse_generated("<expression> (7 * 8) % 5 </expression>")
    assert why == "" and p.answer == "1" and p.task_domain == "modular"
    assert p.expression == "(7 * 8) % 5" and "mod" in p.question and "×" in p.question
    q, _ = parse_generated("<expression>not (3 < 4) or 2 == 2</expression>")
    assert q.answer == "True" and q.task_domain == "logic"
    r, _ = parse_generated("<expression>2 + 3 * 4</expression>")
    assert r.answer == "14" and r.task_domain == "arithmetic"
    ex = r.to_example("trainable")
    assert ex.meta["domain"] == GSS_DOMAIN and recompute_answer(ex.meta) == ex.answer == "14"


def test_answer_is_never_taken_from_the_generator_text():
    p, why = parse_generated("<answer>99</answer><expression>2 + 3</expression> = 99, answer: 99")
    assert why == "" and p.answer == "5"
    q, why = parse_generated("<expression>2 + 3 = 6</expression>")  # an answer inside the tag is not an expression
    assert q is None and why == "unverifiable"


@pytest.mark.parametrize("text,why", [
    ("no tags at all", "no_tag"),
    ("<expression>1+1</expression><expression>2+2</expression>", "several"),
    ("<expression>   </expression>", "empty"),
    ("<expression>" + "+".join(["1"] * 200) + "</expression>", "too_long"),
    ("<expression>7 / 2</expression>", "unverifiable"),  # division is outside the grammar
    ("<expression>x + 1</expression>", "unverifiable"),
    ("<expression>5 % 0</expression>", "unverifiable"),
    ("<expression>2 ** 1000</expression>", "unverifiable"),  # exponent bound
    ("<expression>__import__('os').system('true')</expression>", "unverifiable"),  # unsafe: never run
    ("<expression>(lambda: 3)()</expression>", "unverifiable"),
    ("<expression>[1, 2][0]</expression>", "unverifiable"),
])
def test_unparseable_unverifiable_and_unsafe_expressions_are_rejected(text, why):
    assert parse_generated(text) == (None, why)


def test_generator_reward_is_the_mean_calibration_error_of_graded_samples():
    r, n = generator_reward([0.9, 0.2, None, 0.6], [True, True, None, False])
    assert n == 3 and r == pytest.approx((0.1 + 0.8 + 0.6) / 3)
    assert generator_reward([None, None], [None, None]) == (0.0, 0)
    assert generator_reward([1.0], [True]) == (0.0, 1)


class _FakeRollout:
    def __init__(self, texts):
        self.texts, self.aux, self.extra_metrics = list(texts), None, {}

    def __len__(self):
        return len(self.texts)


class _FakeSolver:
    def __init__(self, responses):
        self.responses, self.calls = responses, []

    def sample(self, examples, n, seed):
        self.calls.append(([e.problem for e in examples], n))
        return [self.responses[:n] for _ in examples]


def test_generator_strategy_and_head_against_hand_computed_rewards(monkeypatch):
    import torch

    import mmevo.honest.selfplay as sp

    texts = ["<expression>2 + 3</expression><answer>4</answer>", "garbage", "<expression>2 / 3</expression>"]
    monkeypatch.setattr(sp, "sample_groups", lambda ctx, examples: _FakeRollout(texts))
    solver = _FakeSolver([format_response("r", "5", 0.9), format_response("r", "4", 0.8), "no protocol",
                          format_response("r", "5", 0.3)])
    accepted = []
    strat = GeneratorStrategy(solver, 4, on_accept=accepted.extend)
    ro = strat.rollout(type("Ctx", (), {"seed": 3})(), [])
    assert solver.calls == [(["Compute 2 + 3. Give the exact integer."], 4)]
    assert ro.aux[0]["solver_confidence"] == [0.9, 0.8, None, 0.3]
    assert ro.aux[0]["solver_correct"] == [True, False, None, True]  # y from answer equivalence with the computed 5
    assert ro.aux[1] == {"valid": False, "reason": "no_tag"} and ro.aux[2]["reason"] == "unverifiable"
    samples = [ScoredSample(t, 0, None, [], aux=a) for t, a in zip(texts, ro.aux)]
    rewards, m = HonestGeneratorHead().score(samples)
    assert rewards.tolist() == pytest.approx([(0.1 + 0.8 + 0.7) / 3, 0.0, 0.0])
    assert m["invalid"] == 2 and m["invalid/no_tag"] == 1 and m["invalid/unverifiable"] == 1
    assert m["solver_graded_frac"] == pytest.approx(3 / 4)
    strat.after_rewards(ro, rewards)
    assert [r["answer"] for r in accepted] == ["5"] and accepted[0]["reward"] == pytest.approx(rewards[0].item())
    # no graded solver sample: reward 0, counted
    ungraded = [ScoredSample("x", 0, None, [], aux={"valid": True, "solver_confidence": [None],
                                                     "solver_correct": [None]})]
    r, m = HonestGeneratorHead().score(ungraded)
    assert r.tolist() == [0.0] and m["no_graded"] == 1
    assert isinstance(rewards, torch.Tensor)


# -- the stub generator and the mix source ------------------------------------------------------------------------
def test_stub_generator_is_deterministic_and_verifiable():
    a, b = StubGenerator(seed=5), StubGenerator(seed=5)
    xs, ys = a.propose(12), b.propose(12)
    assert [(e.id, e.problem, e.answer) for e in xs] == [(e.id, e.problem, e.answer) for e in ys]
    assert len({e.id for e in xs}) > 6
    for e in xs:
        assert e.meta["domain"] == GSS_DOMAIN and recompute_answer(e.meta) == e.answer
    assert StubGenerator(seed=6).propose(12) != xs
    state = a.state_dict()
    c = StubGenerator(seed=5)
    c.load_state_dict(state)
    assert [e.id for e in c.propose(4)] == [e.id for e in a.propose(4)]  # resumes where it stopped
    before = [e.id for e in StubGenerator(seed=5).propose(4)]
    a.reseed()
    a.draws = 0
    assert [e.id for e in a.propose(4)] != before  # a re-seeded generation draws other problems
    assert all(e.meta.get("difficulty_hint") for e in xs)


def test_stub_generator_mutates_every_draw_by_default():
    # seed 5.2: the v1 stub "samples from the existing unified sampler + applies a pillar-3 mutator"
    from mmevo.honest.mutators import MUTATORS
    from mmevo.honest.tasks import generate_task

    def base_question(g, i):  # the unmutated parent of draw i, as StubGenerator._draw picks it
        import random
        rng = random.Random(f"gss-stub/{g.seed}/{g.generation}/{i}")
        domain, d = rng.choice(g.domains), rng.randint(g.min_d, g.max_d)
        return generate_task(domain, d, seed=g.seed, index=i, stream=f"gss{g.generation}").question

    g = StubGenerator(seed=3)
    xs = g.propose(60)
    m = g.metrics()
    changed = [e.problem != base_question(g, i) for i, e in enumerate(xs)]
    assert [e.meta["stub_mutator"] is not None for e in xs] == changed
    assert all(e.meta["stub_mutator"] in MUTATORS for e in xs if e.meta["stub_mutator"])
    assert m["gss/stub_mutated"] == sum(changed) and m["gss/stub_mutated"] + m["gss/stub_mutation_failed"] == 60
    assert sum(changed) >= 45  # failed (unverifiable) mutations keep the parent, and are few
    none = StubGenerator(seed=3, mutate_share=0.0)
    ys = none.propose(20)
    assert all(e.problem == base_question(none, i) and e.meta["stub_mutator"] is None for i, e in enumerate(ys))
    assert none.metrics()["gss/stub_mutated"] == 0 == none.metrics()["gss/stub_mutation_failed"]
    half = StubGenerator(seed=3, mutate_share=0.5)
    half.propose(60)
    assert 0 < half.metrics()["gss/stub_mutated"] < m["gss/stub_mutated"]
    resumed = StubGenerator(seed=3)
    resumed.load_state_dict(g.state_dict())
    assert resumed.metrics() == m  # the counters survive a checkpoint


def test_gss_mix_source_shares_and_state():
    from mmevo.data.prompts import EpochSampler
    from mmevo.honest.tasks import generate_tasks

    base = [t.to_example() for t in generate_tasks(20)]
    none = GSSMixSource(EpochSampler(base, 0), StubGenerator(seed=1), share=0.0, seed=1)
    assert all(e.meta["domain"] != GSS_DOMAIN for e in none.take(8))
    allg = GSSMixSource(EpochSampler(base, 0), StubGenerator(seed=1), share=1.0, seed=1)
    assert all(e.meta["domain"] == GSS_DOMAIN for e in allg.take(8)) and allg.metrics()["gss/batch_generated"] == 8
    half = GSSMixSource(EpochSampler(base, 0), StubGenerator(seed=1), share=0.5, seed=2)
    half.take(4)
    state = json.loads(json.dumps(half.state_dict()))
    again = GSSMixSource(EpochSampler(base, 0), StubGenerator(seed=1), share=0.5, seed=2)
    again.load_state_dict(state)
    assert [e.id for e in again.take(6)] == [e.id for e in half.take(6)]


def test_loop_config_errors_name_the_field():
    from mmevo.config import ConfigError, load_config
    from mmevo.honest.loop import check_loop_config, solver_heads

    for override, field in (("honest.gss_mode=sometimes", "honest.gss_mode"), ("honest.gss_blocks=0", "gss_blocks"),
                            ("honest.gss_share=1.5", "gss_share"), ("honest.roles={judge: {}}", "honest.roles")):
        with pytest.raises(ConfigError, match=field):
            check_loop_config(load_config(None, [override]))
    h = load_config(None, ["honest.hcr_enabled=false", "honest.format_weight=0.5"]).honest
    assert solver_heads(h) == {"honest_brier": 1.0, "honest_format": 0.5}
    # seed §7: "All four flags default to off"; the shipped configs turn on the recommended HCR + SMC
    h = load_config(None, []).honest
    assert (h.hcr_enabled, h.replay_enabled, h.smc_enabled, h.gss_mode) == (False, False, False, "off")
    assert solver_heads(h) == {"honest_brier": 1.0}
    for shipped in ("configs/honest_tiny.yaml", "configs/honest_qwen2_5_1_5b.yaml"):
        h = load_config(shipped, []).honest
        assert h.hcr_enabled and h.smc_enabled and "honest_hindsight" in solver_heads(h)



# -- end to end on the tiny text model ----------------------------------------------------------------------------
def _tiny_cfg(model, out, *extra):
    from mmevo.config import load_config

    return load_config("configs/honest_tiny.yaml", [
        f"model.path={model}", f"honest.output_dir={out}", "honest.sft_n=320", "sft.epochs=2", "data.n_train=60",
        "data.n_heldout=6", "honest.gss_blocks=2", "honest.gss_block_steps=2", "trainer.prompts_per_step=4",
        "rollout.max_tokens=96", "eval.max_tokens=64", "rollout.temperature=0.5", "honest.smc_min_episodes=2",
        "honest.smc_window=2", "honest.smc_cooldown=0", *extra])


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_tiny_run_with_hcr_cpr_smc_and_stub_gss_resumes(tiny_text_path, tmp_path):
    from mmevo.honest.loop import run_honest

    out = tmp_path / "honest"
    summary = run_honest(_tiny_cfg(tiny_text_path, out))
    rows = _rows(out / "solver" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    keys = set().union(*rows)
    for k in ("reward/honest_brier/mean", "reward/honest_hindsight/mean", "replay/size", "replay/active",
              "difficulty/arithmetic/ceiling", "difficulty/logic/ceiling", "curriculum/recorded",
              "gss/generated_total", "health/brier_only", "health/replay_mix_off"):
        assert k in keys, k
    assert "reward/honest_format/mean" not in keys  # format_weight 0: the head is off
    graded = [r.get("reward/honest_brier/graded", 0) for r in rows]
    assert max(r["replay/size"] for r in rows) >= 1, graded
    assert rows[-1]["gss/generated_total"] >= 1
    assert summary["pillars"] == {"hcr": True, "cpr": True, "smc": True, "gss": "stub"}
    assert [b["solver_steps"] for b in summary["blocks"]] == [2, 2]
    for d in ("eval_before", "eval_after"):
        rep = json.loads((out / d / "calibration.json").read_text())
        assert {"accuracy", "abstain_rate", "ece", "brier"} <= set(rep) and (out / d / "reliability.png").exists()
    assert summary["hindsight_audit"]["steps"] == 4
    assert (out / "warmup" / "solver" / "model" / "config.json").exists()
    saved = json.loads((out / "summary.json").read_text())
    assert saved["final_model"] == summary["final_model"]
    events = (out / "health_events.jsonl").read_text()
    # a rerun resumes: nothing is retrained, the curve is not extended or duplicated; the summary's blocks still
    # report their steps (from the curve), as the uninterrupted run's did
    again = run_honest(_tiny_cfg(tiny_text_path, out))
    assert again["blocks"] == summary["blocks"]
    assert [r["step"] for r in _rows(out / "solver" / "metrics.jsonl")] == [1, 2, 3, 4]
    assert (out / "health_events.jsonl").read_text() == events  # no event logged twice
    # a rerun with another setting would reuse blocks trained under the first run's: refused before anything runs
    from mmevo.config import ConfigError

    with pytest.raises(ConfigError, match=r"honest.gss_share=0.25.*run_config.json"):
        run_honest(_tiny_cfg(tiny_text_path, out, "honest.gss_share=0.5"))
    assert json.loads((out / "summary.json").read_text())["config"]["honest"]["gss_share"] == 0.25
    assert [r["step"] for r in _rows(out / "solver" / "metrics.jsonl")] == [1, 2, 3, 4]
    # and a longer run continues from the checkpoint (curriculum / replay / stub state from its plugin state)
    more = run_honest(_tiny_cfg(tiny_text_path, out, "honest.gss_blocks=3"))
    assert [b["solver_steps"] for b in more["blocks"]] == [2, 2, 2] and more["blocks"][:2] == summary["blocks"]
    rows = _rows(out / "solver" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6] and rows[-1]["gss/generated_total"] >= \
        rows[3]["gss/generated_total"]


def test_tiny_run_with_the_trainable_generator(tiny_text_path, tmp_path):
    from mmevo.honest.loop import run_honest

    out = tmp_path / "honest"
    cfg = _tiny_cfg(tiny_text_path, out, "honest.gss_mode=trainable", "honest.gss_blocks=1",
                    "honest.gss_block_steps=1", "honest.sft_n=64", "honest.gss_warmup_problems=48", "honest.gss_solver_samples=2",
                    "honest.eval_calibration=false", "honest.roles={generator: {rollout.max_tokens: 32}}")
    summary = run_honest(cfg)
    grows = _rows(out / "generator" / "metrics.jsonl")
    assert [r["step"] for r in grows] == [1]
    g = grows[0]
    assert "reward/honest_generator/mean" in g and "reward/honest_generator/invalid" in g and "gss/valid_frac" in g
    assert g["reward/honest_generator/mean"] >= 0.0
    assert summary["blocks"][0]["generator_steps"] == 1 and "pool_size" in summary["blocks"][0]
    assert (out / "blocks" / "block_1" / "solver" / "config.json").exists()
    assert (out / "generator" / "final" / "config.json").exists()
    assert summary["calibration_before"] is None


def test_generator_strategy_counts_problems_the_frozen_solver_did_not_sample(monkeypatch):
    """A valid problem whose prompt is over the frozen solver's data.max_prompt_length gets no solver sample
    (``FrozenRole.sample`` returns [] for it): reward 0, and ``gss/unsampled`` says how many (it was only in the
    head's ``no_graded``, mixed with problems whose samples had no readable confidence)."""
    import mmevo.honest.selfplay as sp

    texts = ["<expression>2 + 3</expression>", "<expression>4 * 5</expression>", "garbage"]
    monkeypatch.setattr(sp, "sample_groups", lambda ctx, examples: _FakeRollout(texts))

    class _SkipsLong(_FakeSolver):
        def sample(self, examples, n, seed):
            return [[] if i == 1 else self.responses[:n] for i, _ in enumerate(examples)]

    strat = GeneratorStrategy(_SkipsLong([format_response("r", "5", 0.9)]), 1)
    ro = strat.rollout(type("Ctx", (), {"seed": 3})(), [])
    assert ro.extra_metrics["gss/unsampled"] == 1.0
    assert ro.aux[1]["solver_confidence"] == [] and ro.aux[0]["solver_confidence"] == [0.9]
    rewards, m = HonestGeneratorHead().score([ScoredSample(t, 0, None, [], aux=a) for t, a in zip(texts, ro.aux)])
    assert rewards.tolist()[1] == 0.0 and m["no_graded"] == 1


@pytest.mark.parametrize("spelling", ["2+3", "(2 + 3)", "2 + 3  # the same again", "((2)) + (3)", "2 +\n 3"])
def test_spellings_of_one_generated_problem_share_its_id(spelling):
    """The id is the problem the solver is shown: re-spacing, redundant brackets or a comment inside <expression>
    gave the same question a new id, so a generator repeating one problem counted as proposing distinct ones."""
    base, _ = parse_generated("<expression>2 + 3</expression>")
    other, why = parse_generated(f"<expression>{spelling}</expression>")
    assert why == "" and other.question == base.question and other.id == base.id
    different, _ = parse_generated("<expression>2 + 4</expression>")
    assert different.id != base.id
