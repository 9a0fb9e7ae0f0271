"""HONEST SMC (mmevo.honest.mutators, mmevo.honest.curriculum): mutators keep a verifiable answer over thousands of
mutated tasks, unverifiable mutations are dropped and counted after 3 retries (never a crash), promotion after
exactly 20 episodes at > 0.75 (not at 19, not at exactly 0.75), demotion below 0.20, the cool-down, the hard cap 8, and the curriculum
prompt source's resume."""

import collections
import dataclasses
import pickle
import random
import zlib

import pytest

from mmevo.honest.curriculum import DEMOTE, PROMOTE, CurriculumSource, DifficultyController
from mmevo.honest.mutators import (DISTRACTORS, MUTATORS, PRIMES, MutatedTask, checked_mutation,
                                   compositional_mutator, distractor_mutator, expression_tree, numeric_mutator)
from mmevo.honest.tasks import (DOMAINS, evaluate_expression, generate_task, generate_tasks, recompute_answer,
                                verify_task)


def controller(**kw):
    args = {"domains": ["arithmetic", "logic"], "start": 5, "cap": 8, "window": 20, "promote": 0.75, "demote": 0.20,
            "min_episodes": 20, "cooldown": 10}
    args.update(kw)
    return DifficultyController(**args)


def record_all(c, domain, difficulty, outcomes):
    return [c.record(domain, difficulty, y) for y in outcomes]


# -- promotion / demotion ------------------------------------------------------------------------------------------
def test_promotion_after_exactly_20_episodes_at_075_not_at_19():
    c = controller()
    changes = record_all(c, "arithmetic", 5, [True] * 19)
    assert changes == [None] * 19 and c.ceiling("arithmetic") == 5  # 19 perfect episodes are not enough
    assert c.record("arithmetic", 5, True) == PROMOTE and c.ceiling("arithmetic") == 6  # the 20th
    assert c.ceiling("logic") == 5  # per domain
    # seed: "acc > τ": 0.80 (16 of 20) promotes, exactly 0.75 (15 of 20) and 0.70 (14 of 20) do not
    c = controller()
    assert record_all(c, "logic", 5, [False] * 4 + [True] * 15) == [None] * 19
    assert c.record("logic", 5, True) == PROMOTE  # 16 / 20 = 0.80
    c = controller()
    assert record_all(c, "logic", 5, [False] * 5 + [True] * 15) == [None] * 20  # 15 / 20 = 0.75
    assert c.ceiling("logic") == 5 and c.rolling_accuracy("logic") == 0.75
    c = controller()
    record_all(c, "logic", 5, [False] * 6 + [True] * 14)  # 14 / 20
    assert c.ceiling("logic") == 5 and c.rolling_accuracy("logic") == pytest.approx(0.70)


def test_only_episodes_at_the_ceiling_count():
    c = controller()
    record_all(c, "arithmetic", 3, [True] * 50)  # below the ceiling
    record_all(c, "arithmetic", 7, [True] * 50)  # above it (e.g. a replayed prompt)
    assert c.ceiling("arithmetic") == 5 and c.episodes_at_ceiling("arithmetic") == 0
    assert c.rolling_accuracy("arithmetic", 3) == 1.0


def test_demotion_below_020_and_never_below_the_start():
    c = controller(cooldown=0)
    record_all(c, "arithmetic", 5, [True] * 20)
    assert c.ceiling("arithmetic") == 6
    # 4 of 20 = 0.20 is not below 0.20
    assert record_all(c, "arithmetic", 6, [True] * 4 + [False] * 16) == [None] * 20
    assert c.ceiling("arithmetic") == 6
    # one more failure pushes a success out of the window: 3 of 20 = 0.15 < 0.20
    assert c.record("arithmetic", 6, False) == DEMOTE and c.ceiling("arithmetic") == 5
    # at the start ceiling (the generator's, 5) there is nothing to demote to
    record_all(c, "logic", 5, [False] * 40)
    assert c.ceiling("logic") == 5 and c.demotions == 1


def test_cooldown_is_respected():
    # every change clears the new ceiling's window, so the cool-down only binds when it exceeds min_episodes
    c = controller(window=5, min_episodes=5, cooldown=10)
    record_all(c, "arithmetic", 5, [True] * 5)  # promote to 6
    assert c.ceiling("arithmetic") == 6
    assert record_all(c, "arithmetic", 6, [False] * 9) == [None] * 9  # 0 / 5 at 6, but only 9 episodes since
    assert c.record("arithmetic", 6, False) == DEMOTE and c.since_change["arithmetic"] == 0  # the 10th
    assert record_all(c, "arithmetic", 5, [True] * 9) == [None] * 9  # 5 / 5 fresh successes: still cooling down
    assert c.record("arithmetic", 5, True) == PROMOTE and (c.promotions, c.demotions) == (2, 1)
    # the window at 6 was cleared on promotion: its old failures do not demote again
    assert record_all(c, "arithmetic", 6, [True] * 9) == [None] * 9
    assert c.ceiling("arithmetic") == 6 and c.rolling_accuracy("arithmetic") == 1.0


def test_demotion_clears_the_lower_window_so_a_regressed_model_is_not_promoted_again():
    for cooldown in (0, 10):
        c = controller(cooldown=cooldown)
        record_all(c, "arithmetic", 5, [True] * 20)  # promote to 6
        record_all(c, "arithmetic", 6, [False] * 20)  # the model regressed: demote to 5
        assert c.ceiling("arithmetic") == 5 and c.episodes_at_ceiling("arithmetic") == 0
        assert c.rolling_accuracy("arithmetic") is None  # the 20 pre-regression successes at 5 are gone
        # 40 % at 5 from now on: never back to 6, however long it runs
        assert record_all(c, "arithmetic", 5, [True, False, True, False, False] * 20) == [None] * 100
        assert c.ceiling("arithmetic") == 5 and c.rolling_accuracy("arithmetic") == pytest.approx(0.4)
        # a recovered model earns the ceiling back once the window at 5 exceeds 0.75 (seed: "acc > τ"). The 40 %
        # phase ends T F F T F T F F: after 12 and 13 successes the window holds 3 + 12 = 2 + 13 = 15 / 20 = 0.75
        # (not above), after 14 it holds the last 6 (F T F T F F, 2 right) and the 14: 16 / 20
        assert record_all(c, "arithmetic", 5, [True] * 13) == [None] * 13
        assert c.rolling_accuracy("arithmetic", 5) == 0.75
        assert c.record("arithmetic", 5, True) == PROMOTE and c.rolling_accuracy("arithmetic", 5) == 0.80


def test_no_promotion_after_a_regression_through_the_source():
    """The reviewer's scenario: d <= 5 solved at 95 % for 60 episodes, then 40 % at d = 5 and 0 % at d = 6. The old
    controller re-promoted to 6 on stale d = 5 outcomes exactly one cool-down after the demotion in 3 of 5 seeds."""
    for seed in range(5):
        rng = random.Random(seed)
        c = DifficultyController(["arithmetic"], start=5, cap=8)
        src = CurriculumSource(c, seed=seed, ceiling_share=0.5)
        changes = []
        for ep in range(600):
            d = src.take(1)[0].meta["difficulty"]
            acc = (0.95 if ep < 60 else 0.4) if d <= 5 else (0.0 if ep >= 60 else 0.9)
            change = c.record("arithmetic", d, rng.random() < acc)
            if change:
                changes.append((ep, change))
        assert [ch for ep, ch in changes if ep >= 60 and ch == PROMOTE] == [], (seed, changes)
        assert c.ceiling("arithmetic") == 5 and changes[-1][1] == DEMOTE, (seed, changes)


def test_hard_cap_8():
    c = controller(cooldown=0)
    for level in (5, 6, 7):
        record_all(c, "logic", level, [True] * 20)
    assert c.ceiling("logic") == 8 and c.promotions == 3
    assert record_all(c, "logic", 8, [True] * 60) == [None] * 60 and c.ceiling("logic") == 8
    c = controller(cap=6, cooldown=0)
    record_all(c, "logic", 5, [True] * 20)
    record_all(c, "logic", 6, [True] * 40)
    assert c.ceiling("logic") == 6


def test_controller_checks_and_state():
    with pytest.raises(ValueError, match="min_episodes <= window"):
        controller(window=10)
    with pytest.raises(ValueError, match="demote < promote"):
        controller(promote=0.2, demote=0.3)
    with pytest.raises(ValueError, match="start ceiling <= cap"):
        controller(start=5, cap=4)
    c = controller(cooldown=3)
    with pytest.raises(ValueError, match="unknown curriculum domain 'modular'"):
        c.record("modular", 5, True)
    rng = random.Random(0)
    for _ in range(300):
        c.record(rng.choice(["arithmetic", "logic"]), rng.choice([4, 5, 6, 7]), rng.random() < 0.8)
    twin = controller(cooldown=3)
    twin.load_state_dict(pickle.loads(pickle.dumps(c.state_dict())))
    for _ in range(300):  # the restored controller continues exactly
        args = (rng.choice(["arithmetic", "logic"]), rng.choice([5, 6, 7, 8]), rng.random() < 0.6)
        assert c.record(*args) == twin.record(*args)
    assert c.state_dict() == twin.state_dict() and c.metrics() == twin.metrics()
    snap = c.snapshot()["logic"]
    assert snap["max_unlocked_difficulty"] == c.ceiling("logic") and set(snap) == {
        "max_unlocked_difficulty", "ceiling_accuracy", "ceiling_episodes", "since_change"}
    m = c.metrics()
    assert m["difficulty/logic/ceiling"] == c.ceiling("logic") and "difficulty/arithmetic/accuracy" in m


# -- mutators ------------------------------------------------------------------------------------------------------
def _partner(domain, difficulty, rng):
    return lambda: generate_task(domain, difficulty, seed=9, index=rng.randrange(10_000))


def test_thousands_of_mutated_tasks_keep_verifiable_answers():
    rng = random.Random(1)
    n = collections.Counter()
    for i in range(300):
        for domain in DOMAINS:
            task = generate_task(domain, 5, seed=3, index=i)
            for depth in range(3):  # 5 -> 6 -> 7 -> 8: chains of random mutators
                name = rng.choice(sorted(MUTATORS))
                partner = (lambda d=domain, t=task: _chain_partner(d, t.difficulty, rng))
                child, why = checked_mutation(MUTATORS[name], task, rng, partner)
                assert child is not None, (name, task, why)
                assert isinstance(child, MutatedTask) and child.difficulty == task.difficulty + 1 == 6 + depth
                assert child.answer == recompute_answer(child.meta), child  # stored = the verifier's, every time
                assert child.domain == domain and child.mutations[-1] == name
                n[name] += 1
                task = child
    assert sum(n.values()) == 2700 and min(n.values()) > 700


def _chain_partner(domain, difficulty, rng):
    """A task of ``difficulty`` (> 5: built by numeric mutations, so compositional partners are mutated too)."""
    t = generate_task(domain, 5, seed=11, index=rng.randrange(10_000))
    while t.difficulty < difficulty:
        t = numeric_mutator(t, rng)
    return t


def test_numeric_mutator_scales_every_literal_but_exponents():
    rng = random.Random(5)
    t = generate_task("arithmetic", 5, seed=0, index=4)
    m = numeric_mutator(t, random.Random(5))
    s = random.Random(5).choice(PRIMES)
    old, new = expression_tree(t.expression), expression_tree(m.expression)
    assert old[2][0] == "**" and new[2] == ("**", old[2][1] * s, 2)  # "... +- b ** 2": b scaled, the 2 kept

    def leaves(tree):
        return [tree] if not isinstance(tree, tuple) else [x for c in tree[1:] for x in leaves(c)]
    assert new[0] == old[0] and [x * s for x in leaves(old[1])] == leaves(new[1])  # every other literal times s
    assert m.answer == recompute_answer(m.meta) and m.answer != t.answer  # recomputed, not copied
    # pow(a, e, m): a and m scaled, e kept
    t = generate_task("modular", 5, seed=0, index=7)  # pow(17, 93, 42)
    m = numeric_mutator(t, random.Random(5))
    assert m.expression == f"pow({17 * s}, 93, {42 * s})" and m.answer == str(pow(17 * s, 93, 42 * s))
    # a comparison keeps its truth value under a positive factor
    for i in range(200):
        t = generate_task("logic", rng.randint(1, 5), seed=0, index=i)
        assert numeric_mutator(t, rng).answer == t.answer


def test_compositional_mutator_binds_the_partner_value():
    rng = random.Random(2)
    for domain in DOMAINS:
        for i in range(100):
            p2 = generate_task(domain, 5, seed=0, index=i)
            p1 = generate_task(domain, 5, seed=1, index=i)
            m = compositional_mutator(p2, rng, partner=lambda: p1)
            assert m.bindings[0][0] == "X" and evaluate_expression(m.bindings[0][1]) == evaluate_expression(
                p1.expression)
            assert "X" in m.body and "X" not in m.expression and m.answer == recompute_answer(m.meta)
            first = "Let X be the truth value of" if domain == "logic" else "Let X ="
            assert m.question.startswith(first)
    # never an exponent or a modulus (a 0 there would make an invalid problem): only the numbers left of "mod"
    for d in range(1, 6):
        for i in range(30):
            p2 = generate_task("modular", d, seed=0, index=i)
            m = compositional_mutator(p2, rng, partner=lambda: generate_task("modular", d, seed=1, index=i))
            old, new = expression_tree(p2.expression), expression_tree(m.body, {"X"})
            if old[0] == "pow3":
                assert str(new[1]) == "X" and new[2:] == old[2:]
            else:
                assert old[0] == new[0] == "%" and new[2] == old[2]
    with pytest.raises(ValueError, match="partner"):
        compositional_mutator(p2, rng)
    with pytest.raises(ValueError, match="partner is logic d5"):
        compositional_mutator(generate_task("arithmetic", 5), rng, partner=lambda: generate_task("logic", 5))


def test_distractor_mutator_keeps_expression_and_answer():
    rng = random.Random(3)
    assert len(DISTRACTORS) == len(set(DISTRACTORS)) == 50
    t = generate_task("modular", 4, seed=0, index=2)
    m = distractor_mutator(t, rng)
    assert (m.expression, m.answer) == (t.expression, t.answer) and m.question.endswith(t.question)
    prose = m.question[:-len(t.question)]
    assert sum(s in prose for s in DISTRACTORS) == 3
    m2 = distractor_mutator(m, rng)  # stacked: new prose first
    assert m2.question.endswith(m.question) and sum(s in m2.question for s in DISTRACTORS) == 6
    for _ in range(14):  # never a snippet twice: 16 mutations use 48 of the 50
        m2 = distractor_mutator(m2, rng)
    assert sum(s in m2.question for s in DISTRACTORS) == 48 and m2.answer == t.answer
    assert "distractor pool" in checked_mutation(distractor_mutator, m2, rng)[1]


def test_checked_mutation_rejects_and_explains():
    t = generate_task("arithmetic", 5, seed=0, index=1)
    rng = random.Random(0)

    def wrong_answer(task, r, partner=None):
        m = numeric_mutator(task, r)
        return dataclasses.replace(m, answer=str(int(m.answer) + 1))

    def raises(task, r, partner=None):
        raise ZeroDivisionError("boom")

    def same(task, r, partner=None):
        return dataclasses.replace(task, difficulty=task.difficulty + 1)

    def too_big(task, r, partner=None):  # an expression beyond the verifier's bounds: no value at all
        m = numeric_mutator(task, r)
        return dataclasses.replace(m, expression=f"({m.expression}) * {10 ** 61}", answer="0")

    assert checked_mutation(wrong_answer, t, rng)[1].startswith("unverifiable")
    assert checked_mutation(too_big, t, rng)[1].startswith("unverifiable")
    assert checked_mutation(raises, t, rng)[1] == "ZeroDivisionError: boom"
    assert checked_mutation(same, t, rng)[1] == "the mutation left the question unchanged"
    assert "need arithmetic d6" in checked_mutation(lambda task, r, p=None: task, t, rng)[1]
    assert "not an HonestTask" in checked_mutation(lambda task, r, p=None: "x", t, rng)[1]
    child, why = checked_mutation(numeric_mutator, t, rng)
    assert why is None and verify_task(child)


# -- the curriculum source -----------------------------------------------------------------------------------------
POOL = [t.to_example() for t in generate_tasks(150, seed=0, domains=["arithmetic", "logic"])]


def source(c=None, **kw):
    return CurriculumSource(c or controller(), POOL, **{"seed": 1, **kw})


def test_unverifiable_mutation_dropped_and_counted_after_3_retries():
    calls = []

    def broken(task, rng, partner=None):  # a new expression whose stored answer is the parent's: never verifies
        calls.append(task.id)
        m = numeric_mutator(task, rng)
        return dataclasses.replace(m, answer=task.answer)

    c = controller(domains=["arithmetic"])
    c.ceilings["arithmetic"] = 6
    src = source(c, mutators={"broken": broken}, ceiling_share=1.0)
    ex = src.take(1)[0]
    assert len(calls) == 4  # the first attempt and 3 retries, each with a fresh difficulty-5 parent
    assert ex.meta["difficulty"] == 5 and ex.answer == recompute_answer(ex.meta)  # falls back to the verified parent
    m = src.metrics()
    assert (m["curriculum/unverifiable_mutations"], m["curriculum/mutations"], m["curriculum/mutation_gave_up"]) == \
        (4.0, 4.0, 1.0)
    assert "broken: unverifiable" in src.last_error
    # at ceiling 8 the chain gives up at 6 and hands out the 5: 4 drops per draw, never a crash
    c.ceilings["arithmetic"] = 8
    out = src.take(5)
    assert [e.meta["difficulty"] for e in out] == [5] * 5 and len(calls) == 24
    assert src.metrics()["curriculum/mutation_dropped_total"] == 24.0
    # max_retries=0: one attempt
    calls.clear()
    src = source(controller(domains=["arithmetic"]), mutators={"broken": broken}, ceiling_share=1.0, max_retries=0)
    src.controller.ceilings["arithmetic"] = 6
    src.take(1)
    assert len(calls) == 1

    def raising(task, rng, partner=None):
        raise RuntimeError("a buggy mutator")
    src = source(c, mutators={"raising": raising}, ceiling_share=1.0)
    assert [e.meta["difficulty"] for e in src.take(3)] == [5] * 3 and "RuntimeError" in src.last_error


def test_source_draws_up_to_the_ceiling_and_mutates_above_5():
    c = controller(cooldown=0)
    c.ceilings.update(arithmetic=7, logic=5)
    src = source(c, ceiling_share=0.5, min_difficulty=2)
    exs = src.take(2000)
    by = collections.Counter((e.meta["domain"], e.meta["difficulty"]) for e in exs)
    assert [e.meta["domain"] for e in exs[:4]] == ["arithmetic", "logic"] * 2  # domains in turn
    assert {d for (dom, d) in by if dom == "arithmetic"} == {2, 3, 4, 5, 6, 7}
    assert {d for (dom, d) in by if dom == "logic"} == {2, 3, 4, 5}
    # half at the ceiling (binomial sd over 1000 draws: 0.016), the rest uniform below it
    assert abs(by["arithmetic", 7] / 1000 - 0.5) < 0.06 and abs(by["logic", 5] / 1000 - 0.5) < 0.06
    pool_ids = {e.id for e in POOL}
    for e in exs:
        assert e.answer == recompute_answer(e.meta)
        if e.meta["difficulty"] <= 5:
            assert e.id in pool_ids  # base draws come from the train set
        else:
            assert len(e.meta["mutations"]) == e.meta["difficulty"] - 5 and e.id.startswith("smc-")
    mutated = [e.id for e in exs if e.meta["difficulty"] > 5]
    assert len(set(mutated)) == len(mutated)
    # a cell the pool lacks comes from the generator
    src = CurriculumSource(controller(domains=["modular"]), POOL, seed=1, ceiling_share=1.0)
    e = src.take(1)[0]
    assert e.meta["domain"] == "modular" and e.id.startswith("smc-modular-d5-") and verify_task(
        generate_task("modular", 5, seed=1, index=0, stream="smc"))


def test_source_resume_gives_the_uninterrupted_sequence():
    def run(src, steps):
        seq = []
        for _ in range(steps):
            batch = src.take(6)
            seq.append([(e.id, e.problem, e.answer) for e in batch])
            for e in batch:  # outcomes (a function of the problem) move the ceilings within the run
                src.controller.record(e.meta["domain"], e.meta["difficulty"], zlib.crc32(e.problem.encode()) % 10 < 9)
        return seq

    def make():
        return source(controller(window=4, min_episodes=4, cooldown=0), ceiling_share=0.7)

    a = make()
    full = run(a, 12)
    assert a.controller.promotions >= 2 and any(i.startswith("smc-") for batch in full[5:] for i, _, _ in batch)
    b = make()
    assert run(b, 5) == full[:5]
    state = pickle.loads(pickle.dumps(b.state_dict()))  # a checkpoint round trip
    c = make()
    c.load_state_dict(state)
    assert c.state_dict() == b.state_dict()
    assert run(c, 7) == full[5:]  # mutations and ceiling changes included
    with pytest.raises(ValueError, match="pool"):
        CurriculumSource(controller(), POOL[:10]).load_state_dict(state)
