"""MM-Zero review (seed 001): the two seed APIs against an independent pure-Python reading of the seed text, and the
warm-up demonstrations (python bar charts, tied bars, content-type hints)."""

import random
import re
from types import SimpleNamespace

import pytest
import torch

from mmevo.config import load_config
from mmevo.evolve import mmzero
from mmevo.evolve.mmzero import CONTENT_TYPES, parse_proposal, proposer_examples
from mmevo.evolve.mmzero_demos import demos
from mmevo.rewards.mmzero import diversity_adjustment, proposal_rewards

W = (0.45, 0.20, 0.35)


def _div_ref(shares, m, strength):
    # seed: -clip(dot(shares - 1/M, [.45, .20, .35]) * M * strength, -strength, +strength)
    out = []
    for row in shares:
        x = sum((s - 1.0 / m) * w for s, w in zip(row, W)) * m * strength
        out.append(-min(strength, max(-strength, x)))
    return out


def _reward_ref(executed, easy, cons, adj, valid):
    # seed: r = 1/N sum_j e_j [min(s_j, .5) + min(c_j, 1 - c_j)] + sum_k a_k; invalid format -> -1
    out = []
    for e, s, c, a, v in zip(executed, easy, cons, adj, valid):
        n = len(e)
        base = sum(min(sj, 0.5) + min(cj, 1 - cj) for ej, sj, cj in zip(e, s, c) if ej) / n
        out.append(base + sum(a) if v else -1.0)
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_seed_apis_match_an_independent_reading_of_the_seed(dtype):
    rng = random.Random(7)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    for _ in range(50):
        b, n, m = rng.randint(1, 6), rng.randint(1, 5), rng.randint(1, 12)  # M need not be B
        strength = rng.choice([0.0, 0.25, 0.5, 1.0, 2.0])
        shares = [[rng.uniform(0, 2) for _ in range(3)] for _ in range(b)]  # rows may sum to anything
        t = torch.tensor(shares, dtype=dtype)
        d = diversity_adjustment(t, m, strength)
        assert d.dtype == dtype and d.shape == (b,) and not d.requires_grad
        assert d.double().tolist() == pytest.approx(_div_ref(t.double().tolist(), m, strength), abs=tol)
        assert d.abs().max().item() <= strength + 1e-12
        ex = [[rng.random() < 0.6 for _ in range(n)] for _ in range(b)]
        s = torch.rand(b, n, dtype=dtype)
        c = torch.rand(b, n, dtype=dtype)
        a = (torch.rand(b, 3, dtype=dtype) - 0.5) * 6  # adjustments of any sign and size
        v = [rng.random() < 0.7 for _ in range(b)]
        before = [x.clone() for x in (s, c, a)]
        r = proposal_rewards(torch.tensor(ex), s, c, a, torch.tensor(v))
        assert r.dtype == dtype and r.shape == (b,) and not r.requires_grad
        want = _reward_ref(ex, s.double().tolist(), c.double().tolist(), a.double().tolist(), v)
        assert r.double().tolist() == pytest.approx(want, abs=tol)
        assert all(torch.equal(x, y) for x, y in zip(before, (s, c, a)))


def test_worked_example_invalid_override_and_zero_strength():
    one = torch.tensor([[True, False]])
    for dtype in (torch.float32, torch.float64):  # one success in two attempts, easy = 1, c = .5 -> .5
        r = proposal_rewards(one, torch.ones(1, 2, dtype=dtype), torch.full((1, 2), 0.5, dtype=dtype),
                             torch.zeros(1, 3, dtype=dtype), torch.tensor([True]))
        assert r.dtype == dtype and r.tolist() == [0.5]
    # invalid format: -1 for every such row, whatever its renders and adjustments
    r = proposal_rewards(torch.ones(3, 2, dtype=torch.bool), torch.ones(3, 2), torch.full((3, 2), 0.5),
                         torch.tensor([[5.0, 5.0, 5.0], [-9.0, 0.0, 0.0], [0.1, 0.2, 0.3]]),
                         torch.tensor([False, False, True]))
    assert r.tolist() == pytest.approx([-1.0, -1.0, 1.0 + 0.6])
    # strength 0: no adjustment however crowded; detached from a graph
    sh = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]], requires_grad=True)
    d = diversity_adjustment(sh, 3, 0.0)
    assert d.tolist() == [0.0, 0.0] and not d.requires_grad


# -- warm-up demonstrations ------------------------------------------------------------------------------------------
def test_python_bar_chart_demo_draws_one_bar_per_name():
    """The python demo is "the same picture" as the SVG: ``plt.bar('ABC', ...)`` drew a single category 'ABC' (all
    bars stacked at one x), so "How many bars are there?" had no visible answer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = [d for d in demos(9, seed=3) if d.proposal.content_type == "data_chart"]
    assert bars
    for d in bars:
        plt.close("all")
        exec(d.python, {})  # trusted, generated here
        xs = {round(p.get_x(), 6) for p in plt.gca().patches}
        names = re.findall(r"([A-D])=(\d)", d.proposal.caption)
        assert len(xs) == len(names) == int(d.proposal.easy_answer), d.python
        heights = sorted(round(p.get_height()) for p in plt.gca().patches)
        assert heights == sorted(int(v) for _, v in names)
    plt.close("all")


def test_tallest_bar_question_only_when_the_tallest_is_unique():
    asked = 0
    for seed in range(40):
        for d in demos(6, seed=seed):
            if d.proposal.hard_question != "Which bar is the tallest?":
                continue
            asked += 1
            vals = {n: int(v) for n, v in re.findall(r"([A-D])=(\d)", d.proposal.caption)}
            top = max(vals.values())
            assert [n for n, v in vals.items() if v == top] == [d.proposal.hard_answer], d.proposal.caption
    assert asked > 10


def test_warm_up_proposer_prompts_ask_for_their_demonstration_content_type(monkeypatch, tmp_path):
    """SFT pairs must not contradict their prompt: the hint cycled over 7 types while the demos cycle over 3, so 4 of
    every 7 prompts asked for one type and were answered with another."""
    import mmevo.grpo.checkpoint
    import mmevo.grpo.sft
    import mmevo.recipes

    seen = {}

    def fake_sft(rc, policy, exs, log=False):
        seen[policy.role] = exs

    monkeypatch.setattr(mmevo.grpo.sft, "run_sft", fake_sft)
    monkeypatch.setattr(mmevo.recipes, "load_policy", lambda rc: SimpleNamespace(
        role=rc.trainer.output_dir.rsplit("/", 1)[-1], model=None, processor=None))
    monkeypatch.setattr(mmevo.grpo.checkpoint, "save_model", lambda *a, **k: None)
    monkeypatch.setattr(mmzero, "_rasterise", lambda svg: None)
    cfg = load_config(None, ["mmzero.warmup_demos=14"])
    mmzero.warm_up(cfg, {r: "m" for r in mmzero.ROLES}, tmp_path)
    exs = seen["proposer"]
    assert len(exs) == 14 and len({ex.id for ex in exs}) == 14  # distinct prompts
    for ex in exs:
        kind = parse_proposal(ex.solution)[0].content_type
        assert ex.meta["hint"] == kind and f"Use the content type {kind}." in ex.problem, (ex.problem, kind)
    # the GRPO prompts still cycle over every content type
    assert [ex.meta["hint"] for ex in proposer_examples(7)] == list(CONTENT_TYPES)


def test_proposer_prompts_are_the_same_in_every_iteration(monkeypatch, tmp_path):
    """Iteration t's prompts said "Variant {k + 1000 t}": from iteration 1 on every prompt lay outside the warmed-up tiny
    proposer's demonstrations (`mmevo evolve mmzero configs/mmzero_tiny.yaml mmzero.iterations=2`: valid share 0.75 in
    iteration 0, 0 of 16 samples in iteration 1, so its coder and solver phases were skipped)."""
    import mmevo.recipes

    class Captured(Exception):
        pass

    def fake_build_trainer(rc, policy, examples, **kw):
        raise Captured([ex.problem for ex in examples])

    monkeypatch.setattr(mmzero, "FrozenRole", lambda rc, path: SimpleNamespace(cfg=rc, close=lambda: None))
    monkeypatch.setattr(mmevo.recipes, "load_policy", lambda rc: None)
    monkeypatch.setattr(mmevo.recipes, "build_trainer", fake_build_trainer)
    cfg = load_config("configs/mmzero_tiny.yaml", [f"mmzero.output_dir={tmp_path}"])
    prompts = []
    for t in range(3):
        with pytest.raises(Captured) as got:
            mmzero.run_phase(cfg, "proposer", t, 0, tmp_path / f"iter_{t}" / "proposer", {r: "m" for r in mmzero.ROLES},
                             None, tmp_path)
        prompts.append(got.value.args[0])
    assert len(prompts[0]) == cfg.mmzero.proposer_prompts == len(set(prompts[0]))
    assert prompts[1] == prompts[0] and prompts[2] == prompts[0]
