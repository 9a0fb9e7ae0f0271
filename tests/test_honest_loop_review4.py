"""HONEST loop, fourth review: a generated expression the verifier takes but that is too deep to render is a
ValueError (the contract of problem_from_expression, which read_pool relies on), not a RecursionError that stops the
loop; numpy integers are integers for a task difficulty and a replay capacity; a boolean is no confidence for the
replay buffer or the generator reward (float(True) would store c = 1)."""

import inspect
import json
import sys

import numpy as np
import pytest
import torch

from mmevo.data.schema import Example
from mmevo.honest.loop import read_pool
from mmevo.honest.mutators import expression_tree
from mmevo.honest.replay import ReplayBuffer
from mmevo.honest.selfplay import generator_reward, problem_from_expression
from mmevo.honest.tasks import evaluate_expression, generate_task


# -- too deep to render ------------------------------------------------------------------------------------------
def _deep_sum(levels: int) -> str:
    return "1 + " * levels + "1"  # a left-deep chain: one verifier frame per level, two or more to render


@pytest.fixture
def python_default_recursion_limit():
    """Python's default limit of 1,000 frames for the test: earlier tests may have raised it for the whole process
    (torch's inductor sets 2,000), and under 2,000 no chain short enough to pass MAX_EXPRESSION_CHARS is too deep."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(old)


def test_an_expression_too_deep_to_render_is_a_value_error(python_default_recursion_limit):
    room = sys.getrecursionlimit() - len(inspect.stack())
    expr = _deep_sum(room * 2 // 3)  # the verifier walks it (one frame a level), the renderer cannot
    assert len(expr) < 4000 and evaluate_expression(expr) == room * 2 // 3 + 1
    with pytest.raises(ValueError, match="nested too deeply"):
        problem_from_expression(expr)
    with pytest.raises(ValueError, match="nested too deeply"):
        expression_tree(_deep_sum(1500))  # its contract: ValueError for what it cannot read


def test_read_pool_skips_a_row_too_deep_to_render(tmp_path, python_default_recursion_limit):
    room = sys.getrecursionlimit() - len(inspect.stack())
    rows = [{"id": "deep", "meta": {"expression": _deep_sum(room * 2 // 3)}},
            {"id": "ok", "meta": {"expression": "(41 + 57) % 9"}}]
    path = tmp_path / "pool.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    pool = read_pool(path, 10)
    assert [(ex.problem, ex.answer) for ex in pool] == [
        ("Compute (41 + 57) mod 9. Give the remainder, an integer from 0 to the modulus minus 1.", "8")]  # 98 = 10*9+8


# -- numpy integers ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", [3, np.int64(3), np.int32(3), np.uint8(3)])
def test_a_numpy_difficulty_is_an_integer(d):
    t = generate_task("arithmetic", d, seed=0, index=0)
    assert (t.id, t.question, t.answer, t.expression) == (
        "train-arithmetic-d3-0", "Compute 19 × 28 × 25 - 29. Give the exact integer.", "13271",  # 13300 - 29
        "19 * 28 * 25 - 29")
    assert type(t.difficulty) is int and type(t.meta["difficulty"]) is int


@pytest.mark.parametrize("d", [True, 3.0, "3", np.float64(3.0), 0, np.int64(6)])
def test_a_difficulty_that_is_no_integer_in_1_to_5_is_still_refused(d):
    with pytest.raises(ValueError, match="difficulty must be an integer"):
        generate_task("arithmetic", d)


def test_a_numpy_replay_capacity_is_an_integer():
    b = ReplayBuffer(np.int64(2))
    assert b.capacity == 2 and type(b.capacity) is int
    for i, (c, y) in enumerate([(0.9, False), (0.2, True), (0.5, True)]):  # the third evicts the first
        b.add(Example(f"p{i}", f"q{i}", "1", [], []), c, y)
    assert sorted(e.example.id for e in b.entries()) == ["p1", "p2"]
    # (|c - y| + eps)^alpha with alpha = 1, eps = 0: 0.8 and 0.5 -> 8/13 and 5/13
    assert sorted(b.probabilities(alpha=1.0, eps=0.0).tolist()) == pytest.approx([5 / 13, 8 / 13])
    for bad in (True, 2.0, np.float64(2.0), 0, np.int64(0)):
        with pytest.raises(ValueError, match="capacity"):
            ReplayBuffer(bad)


# -- a boolean is no confidence -----------------------------------------------------------------------------------
@pytest.mark.parametrize("c", [True, False, np.bool_(True), np.bool_(False), torch.tensor(True), np.array(False)])
def test_the_replay_buffer_refuses_a_boolean_confidence(c):
    b = ReplayBuffer(4)
    with pytest.raises(ValueError, match="confidence"):
        b.add(Example("p", "q", "1", [], []), c, True)
    assert len(b) == 0


def test_the_replay_buffer_still_takes_numeric_confidences_of_any_type():
    b = ReplayBuffer(8)
    for i, c in enumerate([np.float32(0.25), torch.tensor(0.5), 1, 0, np.float64(0.75)]):
        b.add(Example(f"p{i}", f"q{i}", "1", [], []), c, True)
    assert [e.confidence for e in b.entries()] == [0.25, 0.5, 1.0, 0.0, 0.75]
    # errors 0.75, 0.5, 0, 1, 0.25 (alpha 1, eps 0): p = error / 2.5
    assert b.probabilities(alpha=1.0, eps=0.0).tolist() == pytest.approx([0.3, 0.2, 0.0, 0.4, 0.1])


@pytest.mark.parametrize("c", [np.bool_(True), np.bool_(False), torch.tensor(True)])
def test_the_generator_reward_refuses_a_numpy_or_torch_boolean_confidence(c):
    with pytest.raises(ValueError, match="solver sample 1"):
        generator_reward([0.5, c], [True, False])


def test_the_generator_reward_still_takes_numpy_and_torch_numbers():
    # |0.25 - 1| = 0.75, |0.5 - 0| = 0.5: mean 0.625 over 2 graded samples
    assert generator_reward([np.float32(0.25), torch.tensor(0.5), None], [True, np.bool_(False), True]) == (0.625, 2)
