"""HONEST loop, third review: a mod inside another operation is bracketed, in the question text (Python reads
"47 % 32 + 13" as 28, a reader of "47 mod 32 + 13" may take 47 mod 45 = 2) and in the Python rendering (% shares ×'s
level); a negated compound in a generated expression is shown in the task wording, not as raw Python; the
curriculum's base pool leaves out train rows whose gold the verifier does not re-derive (or whose difficulty is no
generator difficulty) and counts them; the generator reward refuses confidences outside [0, 1] (NaN) and correctness
other than 0 / 1."""

import dataclasses
import math

import pytest

from mmevo.honest.curriculum import CurriculumSource, DifficultyController
from mmevo.honest.selfplay import generator_reward, problem_from_expression
from mmevo.honest.tasks import _render, evaluate_expression, generate_task


# -- question text: "mod" has no agreed precedence, so a mod operand is bracketed ----------------------------------
@pytest.mark.parametrize("expression, question, answer", [
    ("47 % 32 + 13", "Compute (47 mod 32) + 13. Give the exact integer.", "28"),  # 15 + 13
    ("3 - 17 % 5", "Compute 3 - (17 mod 5). Give the exact integer.", "1"),  # 3 - 2
    ("17 % 5 * 3", "Compute (17 mod 5) × 3. Give the exact integer.", "6"),  # 2 * 3
    ("25 < -1 + 59 % 51", "Is this statement true or false: 25 < (-1) + (59 mod 51)? Answer True or False.",
     "False"),  # 25 < 7
    ("26 % 22 > 3", "Is this statement true or false: (26 mod 22) > 3? Answer True or False.", "True"),  # 4 > 3
    ("pow(2, 3, 5) + 1", "Compute (2^3 mod 5) + 1. Give the exact integer.", "4"),  # kept: 3 + 1
    ("(2 + 1) % 5", "Compute (2 + 1) mod 5. Give the remainder, an integer from 0 to the modulus minus 1.", "3"),
])
def test_a_mod_inside_another_operation_is_bracketed_in_the_question(expression, question, answer):
    p = problem_from_expression(expression)
    assert (p.question, p.answer) == (question, answer)


@pytest.mark.parametrize("expression, question, answer", [
    ("-(7 % 4) ** 2", "Compute 0 - (7 mod 4)^2. Give the exact integer.", "-9"),  # Python: -(3 ** 2)
    ("-(2 + 3)", "Compute 0 - (2 + 3). Give the exact integer.", "-5"),
    ("--5", "Compute 0 - (-5). Give the exact integer.", "5"),
    ("-pow(2, 3, 5) <= -2", "Is this statement true or false: 0 - (2^3 mod 5) ≤ (-2)? Answer True or False.", "True"),
])
def test_a_negated_compound_is_rendered_in_the_task_wording_not_as_python(expression, question, answer):
    # before: the question fell back to the raw Python text ("Compute -(7 % 4) ** 2."), which a reader may take as
    # (-3)^2 = 9
    p = problem_from_expression(expression)
    assert (p.question, p.answer, p.task_domain) == (question, answer, "logic" if answer == "True" else "arithmetic")


def test_a_mod_under_a_product_keeps_its_tree_in_python():
    # 2 * ((7 % 4) * 5) = 30; unbracketed, Python reads 2 * 7 % 4 * 5 as ((2 * 7) % 4) * 5 = 10
    tree = ("*", 2, ("*", ("%", 7, 4), 5))
    assert _render(tree, python=True) == "2 * (7 % 4) * 5"
    assert evaluate_expression(_render(tree, python=True)) == 30
    assert _render(tree, python=False) == "2 × (7 mod 4) × 5"


def test_generated_questions_keep_their_form():
    assert _render(("%", ("*", 87, 52), 15), python=True) == "(87 * 52) % 15"
    t = generate_task("modular", 4, seed=0, index=0)  # the mod is the whole expression: no brackets around it
    assert t.question.startswith("Compute (") and ") mod " in t.question and not t.question.startswith("Compute ((")


# -- the curriculum's base pool -------------------------------------------------------------------------------------
def _controller():
    return DifficultyController(["arithmetic"], start=5, cap=8, window=20, min_episodes=20, cooldown=10)


def test_pool_rows_whose_gold_is_not_the_verifiers_are_left_out_and_counted():
    good = generate_task("arithmetic", 2, seed=0, index=0).to_example()
    wrong = dataclasses.replace(good, id="wrong", answer=str(int(good.answer) + 1), meta=dict(good.meta))
    bad_expr = dataclasses.replace(good, id="bad-expr", meta={**good.meta, "expression": "1 / 0"})
    bad_d = [dataclasses.replace(good, id=f"d{i}", meta={**good.meta, "difficulty": d})
             for i, d in enumerate(["two", 0, 9, 2.5, True, None])]
    src = CurriculumSource(_controller(), [wrong, bad_expr, *bad_d, good], ceiling_share=0.0, min_difficulty=1)
    assert src.pool_skipped == 8 and src.pool_size == 1
    assert src.metrics()["curriculum/pool_skipped"] == 8.0
    draws = [src.task("arithmetic", 2) for _ in range(20)]
    assert {(t.id, t.answer) for t in draws} == {(good.id, good.answer)}
    # a cell with only a wrong row is left to the generator, whose answers are exact
    only_wrong = CurriculumSource(_controller(), [wrong])
    t = only_wrong.task("arithmetic", 2)
    assert only_wrong.pool_size == 0 and t.id == "smc-arithmetic-d2-0" and t.answer != wrong.answer


def test_a_hand_checked_pool_row_is_kept():
    # 7 * 6 - 5 = 37, written by hand (not by the generator)
    from mmevo.data.schema import Example
    row = Example("hand", "Compute 7 × 6 - 5. Give the exact integer.", "37", [], [],
                  meta={"domain": "arithmetic", "difficulty": 2, "expression": "7 * 6 - 5"})
    src = CurriculumSource(_controller(), [row])
    assert src.pool_skipped == 0 and src.task("arithmetic", 2).answer == "37"


# -- the generator reward -------------------------------------------------------------------------------------------
def test_generator_reward_values_and_bad_inputs():
    assert generator_reward([0.7, 0.2, None], [True, False, True]) == (pytest.approx(0.25), 2)  # (0.3 + 0.2) / 2
    assert generator_reward([0.9], [None]) == (0.0, 0)
    for c, y in [(math.nan, True), (1.5, False), (-0.1, True), ("0.3", True), (0.3, 0.5), (0.3, "False")]:
        with pytest.raises(ValueError, match="solver sample 0"):
            generator_reward([c], [y])


# -- replay probabilities at a large alpha (session review) ---------------------------------------------------------
def _buffer_with(errors_and_outcomes, alpha, eps=1e-3):
    from mmevo.data.schema import Example
    from mmevo.honest.replay import ReplayBuffer

    buf = ReplayBuffer(capacity=8, alpha=alpha, eps=eps)
    for i, (conf, correct) in enumerate(errors_and_outcomes):
        buf.add(Example(f"r{i}", f"q{i}", "1", [], []), conf, correct)
    return buf


def test_replay_probabilities_stay_a_distribution_when_the_powers_overflow():
    """|c - y| = 0.5, 0.999, 0.999 with eps 1e-3: bases 0.501, 1.0, 1.0. At alpha = 1e6, 1.0^1e6 = 1 but
    0.501^1e6 underflows to 0: p = [0, 1/2, 1/2]. At alpha = 1e6 with |c - y| = 1 (base 1.001): 1.001^1e6 = inf,
    which gave NaN probabilities; the ratio of the two equal bases is still 1/2 each."""
    import torch

    p = _buffer_with([(0.5, True), (0.001, True), (0.001, True)], alpha=1e6).probabilities()
    assert torch.allclose(p, torch.tensor([0.0, 0.5, 0.5], dtype=torch.float64))
    p = _buffer_with([(0.0, True), (0.0, True), (0.5, True)], alpha=1e6).probabilities()  # bases 1.001, 1.001, .501
    assert torch.isfinite(p).all() and torch.allclose(p, torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64))


def test_replay_probabilities_keep_their_ratio_when_every_power_underflows():
    """Bases 0.002 and 0.0015 at alpha = 200: both powers underflow to 0 (which fell back to uniform), but their
    ratio is (0.002 / 0.0015)^200 = (4/3)^200 ~ 1e25: p = [1, ~1e-25]."""
    p = _buffer_with([(0.999, True), (0.9995, True)], alpha=200).probabilities()
    assert float(p[0]) == 1.0 and 0 < float(p[1]) < 1e-24
    q = _buffer_with([(0.999, True), (0.9995, True)], alpha=0.6).probabilities()  # the ordinary path, unchanged
    expected0 = 0.002 ** 0.6 / (0.002 ** 0.6 + 0.0015 ** 0.6)
    assert abs(float(q[0]) - expected0) < 1e-12


def test_resuming_a_gss_generator_of_the_other_mode_names_the_setting():
    """A run resumed with another honest.gss_mode got a bare KeyError('rng') / KeyError('generation')."""
    import pytest

    from mmevo.honest.selfplay import PoolGenerator, StubGenerator

    stub, pool = StubGenerator(), PoolGenerator([], seed=1)
    with pytest.raises(ValueError, match=r"honest.gss_mode=stub\), this run has honest.gss_mode=trainable"):
        pool.load_state_dict(stub.state_dict())
    with pytest.raises(ValueError, match=r"honest.gss_mode=trainable\), this run has honest.gss_mode=stub"):
        stub.load_state_dict(pool.state_dict())
    pool.load_state_dict(PoolGenerator([], seed=2).state_dict())  # the same mode still resumes
    stub.load_state_dict(StubGenerator().state_dict())
