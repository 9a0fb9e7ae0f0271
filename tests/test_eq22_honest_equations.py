"""Equation vectors, round 22: HONEST's section 9 detectors and section 3 / 5 numbers, against plain-Python references
written from the seed (not from mmevo's code), on seeded random cases plus hand-picked boundaries and hostile input."""

import math
import random

import pytest
import torch

from mmevo.honest.health import (generator_collapse, priority_entropy, replay_entropy_low, reward_collapse,
                                 unverifiable_mutations, HealthMonitor)
from mmevo.honest.selfplay import generator_reward
from mmevo.honest.seed_api import CalibrationPrioritizedReplay


# -- references (seed section 9 table, section 3.1 and section 5.1) ------------------------------------------------
def ref_collapse(std: float) -> bool:
    return std < 1e-4  # "Falls back to brier-only when reward_std<1e-4"


def ref_entropy(priorities: list[float]) -> float:
    total = sum(priorities)
    if total == 0:
        return 0.0
    return -sum(p / total * math.log(p / total) for p in priorities if p > 0)


def ref_replay_collapse(entropy: float) -> bool:
    return entropy < math.log(2)  # "buffer.entropy_of_priorities() < log(2)"


def ref_generator_collapse(ids: list) -> bool:
    return len(set(ids)) / len(ids) < 0.1  # "len(set(generated_pids)) / n_steps < 0.1"


def ref_priority(c: float, y: bool, alpha: float, eps: float) -> float:
    return (abs(c - float(y)) + eps) ** alpha  # section 3.1


def test_detectors_match_the_seed_thresholds_on_400_random_cases():
    rng = random.Random(22)
    for case in range(400):
        std = rng.choice([0.0, 1e-4, 9.999e-5, 1.0001e-4, rng.random() * 2e-4, rng.random()])
        assert reward_collapse([std]).fired == ref_collapse(std), (case, std)
        prios = [rng.choice([0.0, rng.random(), rng.random() * 1e-3]) for _ in range(rng.randint(1, 12))]
        h = priority_entropy(prios)
        assert h == pytest.approx(ref_entropy(prios), abs=1e-12), case
        assert replay_entropy_low(h).fired == ref_replay_collapse(h), case
        ids = [rng.randint(0, rng.choice([0, 1, 3, 50])) for _ in range(rng.randint(10, 60))]
        assert generator_collapse(ids).fired == ref_generator_collapse(ids), (case, ids)


def test_detector_boundaries_are_strict():
    assert not reward_collapse([1e-4]).fired and reward_collapse([math.nextafter(1e-4, 0)]).fired
    assert not replay_entropy_low(math.log(2)).fired and replay_entropy_low(math.nextafter(math.log(2), 0)).fired
    assert priority_entropy([1.0, 1.0]) == pytest.approx(math.log(2), abs=1e-15)  # two equal prompts: exactly log 2
    assert not generator_collapse([0] * 9 + [1] * 1 + [0] * 10).fired  # 2 distinct of 20 = 0.1: not below
    assert generator_collapse([7] * 11).fired  # 1 / 11 < 0.1
    d = unverifiable_mutations(0, 5)
    assert not d.fired and d.value == 0.0
    d = unverifiable_mutations(2, 5)
    assert d.fired and d.value == pytest.approx(0.4, abs=1e-15)


@pytest.mark.parametrize("call, name", [
    (lambda bad: reward_collapse([0.5, bad]), "reward std"),
    (lambda bad: priority_entropy([1.0, bad]), r"priorities\[1\]"),
    (lambda bad: replay_entropy_low(bad), "replay priority entropy"),
    (lambda bad: unverifiable_mutations(bad, 4), "n_unverifiable"),
    (lambda bad: unverifiable_mutations(1, bad), "n_mutations"),
])
@pytest.mark.parametrize("bad", [float("nan"), True, "0", float("inf")])
def test_a_detector_input_that_is_no_finite_number_is_named(call, name, bad):
    # a NaN failed every comparison and never fired, silently; True read as 1 and the text "0" as 0 by float()
    with pytest.raises(ValueError, match=name):
        call(bad)


def test_reward_collapse_window_must_be_an_integer():
    with pytest.raises(ValueError, match="window"):
        reward_collapse([0.0], window=True)
    with pytest.raises(ValueError, match="window"):
        reward_collapse([0.0], window=1.5)


def test_monitor_names_a_reward_std_metric_that_is_no_number():
    mon = HealthMonitor()
    assert mon.update({"reward/honest_hindsight/std": 0.0})["health/brier_only"] == 1.0
    with pytest.raises(ValueError, match="reward/honest_hindsight/std"):
        HealthMonitor().update({"reward/honest_hindsight/std": float("nan")})
    with pytest.raises(ValueError, match="reward/honest_hindsight/std"):
        HealthMonitor().update({"reward/honest_hindsight/std": True})


def test_generator_reward_matches_the_reference_on_400_random_groups():
    # R_G(p) = |c_S(p) - y(p)| (section 5.1), averaged over the solver samples that stated a confidence
    rng = random.Random(7)
    for case in range(400):
        n = rng.randint(0, 9)
        conf = [rng.choice([None, 0.0, 1.0, 0.5, round(rng.random(), 2), rng.random()]) for _ in range(n)]
        y = [rng.random() < 0.5 for _ in range(n)]
        errs = [abs(c - float(t)) for c, t in zip(conf, y) if c is not None]
        got, count = generator_reward(conf, y)
        assert count == len(errs), case
        assert got == pytest.approx(sum(errs) / len(errs) if errs else 0.0, abs=1e-12), case


def test_seed_replay_sample_priorities_and_entropy_match_the_reference_on_300_buffers():
    rng = random.Random(3)
    for case in range(300):
        alpha, eps = rng.choice([0.6, 0.0, 1.0, rng.uniform(0, 3)]), rng.choice([1e-3, 0.0, rng.uniform(0, 0.1)])
        buf = CalibrationPrioritizedReplay(seed=case, alpha=alpha, eps=eps)
        rows = {}
        for i in range(rng.randint(1, 10)):
            c, y = rng.choice([0.0, 1.0, 0.5, rng.random()]), rng.random() < 0.5
            prompt = f"p{rng.randint(0, 6)}"
            buf.add(prompt, "1", "math", 2, c, y)
            rows[prompt] = (c, y)  # the same prompt written again is updated in place
        prios = [ref_priority(c, y, alpha, eps) for c, y in rows.values()]
        if sum(prios) == 0:
            continue  # eps = 0 and every prompt calibrated: uniform by convention, checked elsewhere
        assert buf.entropy_of_priorities() == pytest.approx(ref_entropy(prios), abs=1e-9), case
        for d in buf.sample(5):
            assert d["priority"] == pytest.approx(ref_priority(d["conf"], d["correct"], alpha, eps), abs=1e-12)
            assert (d["conf"], d["correct"]) == rows[d["prompt"]]
            assert ref_priority(d["conf"], d["correct"], alpha, eps) > 0  # a zero-priority prompt is never drawn


def test_seed_replay_hand_numbers():
    buf = CalibrationPrioritizedReplay(seed=0)  # alpha 0.6, eps 1e-3 (section 3.3 defaults)
    buf.add("right", "1", "math", 1, 1.0, True)  # |c - y| = 0: weight eps^alpha
    buf.add("wrong", "2", "math", 1, 1.0, False)  # |c - y| = 1: full weight
    p_right, p_wrong = 1e-3 ** 0.6, 1.001 ** 0.6
    want = -sum(q * math.log(q) for q in (p_right / (p_right + p_wrong), p_wrong / (p_right + p_wrong)))
    assert buf.entropy_of_priorities() == pytest.approx(want, abs=1e-12)
    assert buf.entropy_of_priorities() < math.log(2)  # the section 9 detector would fire on this buffer
    assert torch.tensor(0.0).item() == 0.0


def test_seed_replay_samples_at_the_alpha_and_eps_it_was_built_with():
    # sample()'s fixed defaults 0.6 / 1e-3 ignored a buffer built with alpha=1, eps=0: a perfectly calibrated prompt
    # (weight 0 there) was still drawn, and the priorities disagreed with entropy_of_priorities()
    buf = CalibrationPrioritizedReplay(alpha=1.0, eps=0.0, seed=1)
    buf.add("calibrated", "1", "math", 1, 1.0, True)
    buf.add("off", "2", "math", 1, 0.75, False)
    draws = buf.sample(400)
    assert {d["prompt"] for d in draws} == {"off"}
    assert {d["priority"] for d in draws} == {0.75}
    assert buf.entropy_of_priorities() == 0.0
    assert buf.sample(1, alpha=0.6, eps=1e-3)[0]["priority"] in (1e-3 ** 0.6, 0.751 ** 0.6)  # explicit values win


@pytest.mark.parametrize("kwargs, name", [
    ({"reward_std_min": float("nan")}, "reward_std_min"), ({"replay_entropy_min": True}, "replay_entropy_min"),
    ({"min_distinct_share": "0.1"}, "min_distinct_share"), ({"collapse_window": 2.5}, "collapse_window"),
    ({"replay_cooldown": True}, "replay_cooldown"), ({"generator_window": 0}, "generator_window"),
    ({"generator_min_count": -1}, "generator_min_count"), ({"reward_std_min": -1e-4}, "reward_std_min"),
])
def test_monitor_names_a_threshold_or_window_that_is_no_valid_number(kwargs, name):
    # a NaN threshold never fired its detector; 2.5 was cut to a window of 2 and True read as 1
    with pytest.raises(ValueError, match=name):
        HealthMonitor(**kwargs)
    HealthMonitor(reward_std_min=0, replay_entropy_min=0.5, min_distinct_share=1, collapse_window=3,
                  replay_cooldown=0, generator_window=1, generator_min_count=0)  # boundaries are accepted


@pytest.mark.parametrize("call", [
    lambda bad: reward_collapse([0.0], threshold=bad),
    lambda bad: replay_entropy_low(0.1, threshold=bad),
    lambda bad: generator_collapse([1] * 20, threshold=bad),
])
@pytest.mark.parametrize("bad", [float("nan"), True, "0.1"])
def test_a_detector_threshold_that_is_no_finite_number_is_named(call, bad):
    with pytest.raises(ValueError, match="threshold"):
        call(bad)


def test_generator_collapse_min_count_must_be_an_integer():
    with pytest.raises(ValueError, match="min_count"):
        generator_collapse([1] * 20, min_count=2.5)


# -- SMC numeric mutator (section 4.2.1): every literal times one prime s in {7, 11, ..., 97}, answer re-evaluated ----
SEED_PRIMES = [p for p in range(7, 98) if all(p % q for q in range(2, p))]


def literals(expression):
    """Integer literals of a Python expression, in order, with their role: exponents (right of ** and pow's e)
    apart; a negative literal -3 counts as one literal."""
    import ast

    out = []

    def walk(node, exponent=False):
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
                and type(node.operand.value) is int:
            out.append((-node.operand.value, exponent))
        elif isinstance(node, ast.Constant):
            if type(node.value) is int:
                out.append((node.value, exponent))
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            walk(node.left)
            walk(node.right, True)
        elif isinstance(node, ast.Call):
            walk(node.args[0]), walk(node.args[1], True), walk(node.args[2])
        else:
            for child in ast.iter_child_nodes(node):
                walk(child, exponent)

    walk(ast.parse(expression, mode="eval").body)
    return out


def test_numeric_mutator_scales_every_literal_by_one_seed_prime_on_300_tasks():
    from mmevo.honest.mutators import PRIMES, numeric_mutator
    from mmevo.honest.tasks import DOMAINS, format_answer, generate_task

    assert list(PRIMES) == SEED_PRIMES
    rng = random.Random(4)
    for case in range(300):
        task = generate_task(rng.choice(DOMAINS), rng.randint(1, 5), seed=case, index=case)
        m = numeric_mutator(task, random.Random(case))
        before, after = literals(task.expression), literals(m.expression)
        assert len(before) == len(after), case
        scales = {a // b for (b, e), (a, _) in zip(before, after) if not e and b != 0}
        assert len(scales) <= 1 and scales <= set(SEED_PRIMES), (case, task.expression, m.expression)
        for (b, e), (a, _) in zip(before, after):
            assert (a == b) if e else (a == b * next(iter(scales), 1)), (case, task.expression, m.expression)
        value = eval(m.expression, {"__builtins__": {}, "pow": pow})  # the gold is re-evaluated, never copied
        assert m.answer == format_answer(value), case
        assert m.difficulty == task.difficulty + 1


def _smc():
    from mmevo.honest.curriculum import DifficultyController
    from mmevo.honest.seed_api import SelfMutatingCurriculum

    return SelfMutatingCurriculum(DifficultyController(["arithmetic"]))  # seed 4.3 defaults: cap 8, 0.75, 20, 0.20


def _feed(smc, difficulty, hits, n=20):
    for i in range(n):
        smc.record_outcome("arithmetic", difficulty, i < hits)
        smc.maybe_promote("arithmetic")


def test_smc_seed_adapter_ceiling_rises_to_the_cap_and_demotes_only_strictly_below_0_2():
    smc = _smc()
    assert smc.ceiling("arithmetic") == 5
    for want in (6, 7, 8, 8):  # 20 of 20 at the ceiling promotes once per window, never past 8
        _feed(smc, smc.ceiling("arithmetic"), 20)
        assert smc.ceiling("arithmetic") == want
    _feed(smc, 8, 4)  # 4 / 20 = 0.20: not below the threshold
    assert smc.ceiling("arithmetic") == 8
    smc = _smc()
    _feed(smc, 5, 20)
    _feed(smc, 6, 3)  # 3 / 20 = 0.15 < 0.20 at a mutated tier: back to 5
    assert smc.ceiling("arithmetic") == 5
    _feed(smc, 5, 0)  # never below the base ceiling 5
    assert smc.ceiling("arithmetic") == 5


def test_smc_needs_min_episodes_at_the_ceiling():
    smc = _smc()
    _feed(smc, 5, 19, n=19)  # 19 / 19 correct but fewer than min_episodes_at_max = 20
    assert smc.ceiling("arithmetic") == 5
    _feed(smc, 5, 1, n=1)
    assert smc.ceiling("arithmetic") == 6


@pytest.mark.parametrize("domain, difficulty, name", [("math", True, "difficulty"), ("math", 2.5, "difficulty"),
                                                      ("math", 0, "difficulty"), (None, 2, "domain"),
                                                      ("  ", 2, "domain")])
def test_seed_replay_add_names_a_domain_or_difficulty_that_is_no_valid_value(domain, difficulty, name):
    # True was stored as the entry's difficulty (its id "math-dTrue") and a None domain as the text "None"
    buf = CalibrationPrioritizedReplay(seed=0)
    with pytest.raises(ValueError, match=f"replay {name}"):
        buf.add("q", "1", domain, difficulty, 0.5, True)
    assert len(buf) == 0
