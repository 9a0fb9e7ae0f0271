"""MM-Zero, third review: seed-001 equation vectors (expected values worked by hand from the seed's equations), a failed
render attempt whose s / c are NaN or inf placeholders, and non-answers on the hard question."""

import io

import pytest
import torch

from mmevo.evolve.mmzero import Judge, Proposal, substantive
from mmevo.rewards.mmzero import diversity_adjustment, proposal_rewards

P = Proposal("table", "A table with x=3.", "What is x?", "3", "What is x times 2?", "6")
SVG = "```svg\n<svg/>\n```"
NAN, INF = float("nan"), float("inf")


# -- proposal_rewards -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("placeholder", [NAN, INF, -INF])
def test_failed_attempt_contributes_zero_whatever_its_placeholder(dtype, placeholder):
    # seed: "Failed renders contribute zero but remain in the denominator"; the failed attempt's s / c are undefined
    executed = torch.tensor([[True, False], [False, False], [True, False]])
    easy = torch.tensor([[1.0, placeholder], [placeholder, placeholder], [0.25, placeholder]], dtype=dtype)
    cons = torch.tensor([[0.5, placeholder], [placeholder, 0.0], [0.9, placeholder]], dtype=dtype)
    adj = torch.tensor([[0.0, 0.0, 0.0], [-0.3, -0.15, 0.2], [0.0, -0.075, -0.1]], dtype=dtype)
    valid = torch.tensor([True, True, True])
    got = proposal_rewards(executed, easy, cons, adj, valid)
    # row 0: seed worked example (1/2)(.5 + .5) = .5; row 1: 0 - .25; row 2: (1/2)(.25 + .1) - .175 = 0
    assert got.dtype == dtype and torch.isfinite(got).all()
    assert got.tolist() == pytest.approx([0.5, -0.25, 0.0], abs=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_proposal_reward_vectors(dtype):
    # by hand: r = 1/N sum_j e_j [min(s_j,.5) + min(c_j,1-c_j)] + sum_k a_k; invalid -> -1
    executed = torch.tensor([[True, True, True, True], [True, False, True, False], [False, False, False, False],
                             [True, True, True, True], [True, True, False, True]])
    easy = torch.tensor([[1.0, 0.75, 0.5, 0.0], [0.25, 1.0, 0.5, 1.0], [1.0, 1.0, 1.0, 1.0],
                         [1.0, 1.0, 1.0, 1.0], [0.125, 0.375, 1.0, 0.625]], dtype=dtype)
    cons = torch.tensor([[0.5, 0.25, 1.0, 0.75], [0.125, 0.5, 0.875, 0.5], [0.5, 0.5, 0.5, 0.5],
                         [0.5, 0.5, 0.5, 0.5], [0.375, 1.0, 0.5, 0.0]], dtype=dtype)
    adj = torch.tensor([[-0.3, 0.0, 0.25], [0.0, -0.15, -0.5], [-0.3, -0.075, 0.5],
                        [5.0, 5.0, 5.0], [0.0, 0.0, 0.0]], dtype=dtype)
    valid = torch.tensor([True, True, True, False, True])
    got = proposal_rewards(executed, easy, cons, adj, valid)
    # row 0: (1 + .75 + .5 + .25)/4 - .05 = .575; row 1: (.375 + .625)/4 - .65 = -.4
    # row 2: 0 + .125 = .125; row 3: invalid; row 4: ((.125+.375) + (.375+0) + (.5+0))/4 = .34375
    assert got.tolist() == pytest.approx([0.575, -0.4, 0.125, -1.0, 0.34375], abs=1e-6)
    assert not got.requires_grad and got.shape == (5,)


# -- diversity_adjustment ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_diversity_adjustment_vectors(dtype):
    shares = torch.tensor([[0.5, 0.5, 0.5], [0.1, 0.1, 0.1], [1.0, 0.1, 0.1], [0.1, 1.0, 0.1], [0.15, 0.1, 0.1]],
                          dtype=dtype)
    # M = 10: dot(shares - .1, w) * 10 * .5 -> .4*5 = 2 (clip .5), 0, .9*.45*5 = 2.025 (clip), .9*.2*5 = .9 (clip),
    # .05*.45*5 = .1125
    assert diversity_adjustment(shares, 10).tolist() == pytest.approx([-0.5, 0.0, -0.5, -0.5, -0.1125], abs=1e-6)
    # M = 4, strength .2: share .25 is fair; (.5-.25)*(.45+.2+.35)*4*.2 = .2; (.1-.25)*4*.2 = -.12 -> +.12
    out = diversity_adjustment(torch.tensor([[0.5, 0.5, 0.5], [0.1, 0.1, 0.1], [0.25, 0.5, 0.25]], dtype=dtype), 4, .2)
    assert out.tolist() == pytest.approx([-0.2, 0.12, -0.04], abs=1e-6)  # row 2: .25*.2*4*.2 = .04
    # M = 100 (not B = 2): all singletons of 100 -> 0; one crowded caption cluster of 3 -> .02*.45*100*.5 = .45
    out = diversity_adjustment(torch.tensor([[0.01, 0.01, 0.01], [0.03, 0.01, 0.01]], dtype=dtype), 100)
    assert out.tolist() == pytest.approx([0.0, -0.45], abs=1e-6) and out.dtype == dtype


# -- the Judge: non-answers on the hard question ----------------------------------------------------------------------
def _png():
    from PIL import Image

    b = io.BytesIO()
    Image.new("RGB", (8, 8), "white").save(b, format="PNG")
    return b.getvalue()


class _Pool:
    def render_many(self, jobs, timeout_s=10):
        from render.types import RenderResult

        return [RenderResult(True, _png()) for _ in jobs]


class _Solver:
    def __init__(self, hard):
        self.hard = hard

    def sample(self, exs, n, seed):
        return [["\\boxed{3}"] * 4 if ex.problem.endswith("What is x?") else self.hard for ex in exs]


def _judge_hard(hard):
    (r,) = Judge(_Pool(), _Solver(hard), 4, 1.0, min_pixels=0, max_pixels=0)([SVG], [P], seed=0)
    return r


def test_hard_question_non_answers_neither_balance_the_question_nor_become_the_silver_label():
    # MM-Zero's released solver server: the majority share is over substantive answers ("None", "N/A", "unknown",
    # "null", "na", "-" and empty ones excluded)
    r = _judge_hard(["\\boxed{None}", "\\boxed{None}", "\\boxed{7}", "\\boxed{7}"])
    assert r.ok and r.consistency == 1.0 and r.silver == "7"  # was 0.5 (the maximum difficulty term), silver "None"
    r = _judge_hard(["\\boxed{N/A}", "\\boxed{ unknown }", "\\boxed{NULL}", "\\boxed{6}"])
    assert r.consistency == 1.0 and r.silver == "6"  # was 0.25
    r = _judge_hard(["\\boxed{none}", "\\boxed{-}", "\\boxed{na}", "\\boxed{NA}"])
    assert r.ok and r.consistency == 0.0 and r.silver is None  # nobody answered: no silver label
    assert r.hard_answers == ["none", "-", "na", "NA"]  # the record keeps what the solver said
    r = _judge_hard(["\\boxed{7}", "\\boxed{8}", "\\boxed{None}", "\\boxed{9}"])
    assert r.consistency == pytest.approx(1 / 3) and r.silver == "7"
    # the proposal's reward for the first case, easy answered right: (1/1)(min(1,.5) + min(1, 0)) = .5, not 1.0
    rew = proposal_rewards(torch.tensor([[True]]), torch.tensor([[1.0]]), torch.tensor([[1.0]]), torch.zeros(1, 3),
                           torch.tensor([True]))
    assert rew.tolist() == [0.5]


def test_substantive_keeps_real_answers():
    assert [substantive(a) for a in ["0", "no", "None of them", "n", "—", " None ", None, "Unknown"]] == \
        ["0", "no", "None of them", "n", "—", None, None, None]
