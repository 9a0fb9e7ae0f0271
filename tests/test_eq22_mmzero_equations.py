"""Equation vectors, round 22: MM-Zero's proposer reward API (seed 001) by the seed's names, argument order and
defaults, against plain-Python references on seeded random batches plus hand-picked edges:

    r = 1/N sum_j e_j [min(s_j, 0.5) + min(c_j, 1 - c_j)] + sum_k a_k       (-1 for an invalid format)
    diversity = -clip(dot(shares - 1/M, [.45, .20, .35]) * M * strength, -strength, +strength)"""

import inspect
import math
import random

import pytest
import torch

from mmevo.rewards.mmzero import (diversity_adjustment, easy_hard_penalty, modal_share, proposal_rewards,
                                  type_penalties)

# the seed's reference equations, written once in round 20's file (plain Python, independent of mmevo)
from test_eq20_mmzero_equations import ref_diversity, ref_proposal  # noqa: E402


def test_signatures_follow_the_seed():
    assert list(inspect.signature(diversity_adjustment).parameters) == ["shares", "valid_count", "strength"]
    assert inspect.signature(diversity_adjustment).parameters["strength"].default == 0.5
    assert list(inspect.signature(proposal_rewards).parameters) == ["executed", "easy_accuracy", "consistency",
                                                                    "adjustments", "valid"]


def test_proposal_rewards_with_placeholders_and_mixed_dtypes_on_400_random_batches():
    # failed attempts and invalid rows carry arbitrary placeholders (NaN, out of range): they must not leak
    rng = random.Random(220)
    for case in range(400):
        B, N = rng.randint(1, 5), rng.randint(1, 6)
        ex = [[rng.random() < 0.6 for _ in range(N)] for _ in range(B)]
        valid = [rng.random() < 0.8 for _ in range(B)]
        easy = [[rng.choice([0.0, 0.5, 1.0, rng.randint(0, 8) / 8, rng.random()]) for _ in range(N)] for _ in range(B)]
        cons = [[rng.choice([0.0, 0.5, 1.0, rng.randint(1, 8) / 8, rng.random()]) for _ in range(N)] for _ in range(B)]
        adj = [[rng.choice([0.0, -0.3, -0.15, rng.uniform(-0.5, 0.5)]) for _ in range(3)] for _ in range(B)]
        want = [ref_proposal(ex[i], easy[i], cons[i], adj[i], valid[i]) for i in range(B)]
        for i in range(B):  # placeholders where the value is unused
            for j in range(N):
                if not (ex[i][j] and valid[i]):
                    easy[i][j], cons[i][j] = rng.choice([math.nan, 7.0, -1.0]), rng.choice([math.nan, 2.0])
            if not valid[i]:
                adj[i] = [math.nan, math.inf, -math.inf]
        d_easy = rng.choice([torch.float64, torch.float32])
        got = proposal_rewards(torch.tensor(ex), torch.tensor(easy, dtype=d_easy), torch.tensor(cons, dtype=torch.float64),
                               torch.tensor(adj, dtype=torch.float64), torch.tensor(valid))
        assert got.dtype == d_easy and got.shape == (B,)
        tol = 1e-12 if d_easy == torch.float64 else 1e-6
        assert got.tolist() == pytest.approx(want, abs=tol), case


def test_proposal_rewards_hand_edges():
    one = torch.tensor([True])
    # one attempt, easy above the cap and c = 0.5: 0.5 + 0.5 = 1
    assert proposal_rewards(torch.tensor([[True]]), torch.tensor([[1.0]]), torch.tensor([[0.5]]), torch.zeros(1, 3),
                            one).item() == 1.0
    # every render failed: base 0, adjustments still added
    r = proposal_rewards(torch.tensor([[False, False]]), torch.tensor([[1.0, 1.0]]), torch.tensor([[0.5, 0.5]]),
                         torch.tensor([[-0.3, -0.15, 0.25]]), one)
    assert r.item() == pytest.approx(-0.2, abs=1e-7)
    # seed 3: one success in two attempts, easy = 1 and c = 0.5: base 0.5
    r = proposal_rewards(torch.tensor([[True, False]], dtype=torch.bool), torch.tensor([[1.0, 0.0]]),
                         torch.tensor([[0.5, 0.0]]), torch.zeros(1, 3), one)
    assert r.item() == 0.5
    # invalid format overrides the adjustments too
    r = proposal_rewards(torch.tensor([[True]]), torch.tensor([[1.0]]), torch.tensor([[0.5]]),
                         torch.tensor([[5.0, 5.0, 5.0]]), torch.tensor([False]))
    assert r.item() == -1.0
    # the result is detached and the inputs untouched
    s = torch.tensor([[0.7]], requires_grad=True)
    before = s.detach().clone()
    out = proposal_rewards(torch.tensor([[True]]), s, torch.tensor([[0.25]]), torch.zeros(1, 3), one)
    assert not out.requires_grad and out.item() == 0.75 and torch.equal(s.detach(), before)


def test_diversity_adjustment_with_a_population_unlike_the_batch_on_400_rows():
    rng = random.Random(221)
    for case in range(400):
        B, M = rng.randint(1, 4), rng.choice([1, 2, 3, 7, 64, rng.randint(1, 500)])
        strength = rng.choice([0.5, 0.0, 1.0, rng.uniform(0, 2)])
        rows = [[rng.choice([1 / M, 1.0, 0.0, rng.randint(1, M) / M, rng.random()]) for _ in range(3)]
                for _ in range(B)]
        got = diversity_adjustment(torch.tensor(rows, dtype=torch.float64), M, strength)
        assert got.tolist() == pytest.approx([ref_diversity(r, M, strength) for r in rows], abs=1e-12), case
        assert all(abs(v) <= strength for v in got.tolist())


def test_diversity_adjustment_hand_edges():
    # every proposal alone in its clusters: shares 1/M, adjustment 0
    assert diversity_adjustment(torch.full((2, 3), 0.25, dtype=torch.float64), 4).tolist() == [0.0, 0.0]
    # all M in one cluster on every axis: dot = (1 - 1/M) * 1.0, times M * 0.5 = (M - 1) / 2, clipped at 0.5
    assert diversity_adjustment(torch.ones(1, 3, dtype=torch.float64), 2).item() == -0.5
    # exactly at the clip: M = 2, caption share 1, others 1/2: 0.45 * 0.5 * 2 * 0.5 = 0.225 (no clip)
    got = diversity_adjustment(torch.tensor([[1.0, 0.5, 0.5]], dtype=torch.float64), 2).item()
    assert got == pytest.approx(-0.225, abs=1e-15)
    # a single valid proposal (M = 1): every share is 1 and 1/M = 1, so no adjustment
    assert diversity_adjustment(torch.ones(1, 3, dtype=torch.float64), 1).item() == 0.0
    # strength 0: nothing
    assert diversity_adjustment(torch.tensor([[1.0, 0.0, 0.3]], dtype=torch.float64), 5, 0.0).item() == 0.0
    # rare proposals are pushed up, capped at +strength
    assert diversity_adjustment(torch.zeros(1, 3, dtype=torch.float64), 50, 0.5).item() == pytest.approx(0.5)


def ref_modal(answers, answered_only):
    seen = [a for a in answers if a is not None]
    if not seen:
        return None, 0.0
    counts = {a: seen.count(a) for a in seen}
    best = max(counts.values())
    mode = next(a for a in seen if counts[a] == best)
    return mode, best / (len(seen) if answered_only else len(answers))


def test_upstream_consistency_and_penalties_on_400_random_cases():
    rng = random.Random(222)
    for case in range(400):
        answers = [rng.choice([None, "1", "2", "3"]) for _ in range(rng.randint(0, 9))]
        for answered_only in (False, True):
            mode, share = modal_share(answers, answered_only)
            want_mode, want_share = ref_modal(answers, answered_only)
            assert mode == want_mode and share == pytest.approx(want_share, abs=1e-15), case
        cs = [rng.choice([0.0, 1.0, 0.15, 0.85, rng.randint(0, 20) / 20, rng.random()]) for _ in range(rng.randint(0, 5))]
        bal = sum(min(c, 1 - c) for c in cs) / len(cs) if cs else None
        if bal is not None and abs(bal - 0.15) > 1e-9:  # away from the tie, which the test below pins
            assert easy_hard_penalty(cs) == (-0.3 if bal < 0.15 else 0.0), (case, cs)
        types = [rng.choice("abc") for _ in range(rng.randint(1, 8))]
        f = {t: types.count(t) / len(types) for t in types}
        want = [0.0] * len(types) if len(f) == 1 else [-0.15 * max(0.0, f[t] - 0.5) / 0.5 for t in types]
        assert type_penalties(types) == pytest.approx(want, abs=1e-15), case


def test_easy_hard_penalty_tie_at_the_threshold_is_not_penalised():
    # c = 0.85 gives min(c, 1 - c) = 1 - 0.85 = 0.15000000000000002 and c = 0.15 exactly 0.15; 0.8 / 0.2 pairs sit
    # 1 ulp under 0.2: a mean exactly at the threshold is the threshold itself
    assert easy_hard_penalty([0.85]) == 0.0 and easy_hard_penalty([0.15]) == 0.0
    assert easy_hard_penalty([0.1, 0.2]) == 0.0  # mean 0.15
    assert easy_hard_penalty([0.8], threshold=0.2) == 0.0
    assert easy_hard_penalty([0.14]) == -0.3 and easy_hard_penalty([1.0, 0.0]) == -0.3


def ref_head(rows):
    """The proposer reward of each row from the seed's equation with the supplied pieces computed by hand: M = the
    valid rows, shares = copies of the same text / M per column (clusters of identical texts), type penalty
    -0.15 max(0, f - 0.5) / 0.5 (0 when one type), easy-hard penalty -0.3 when mean min(c, 1 - c) of the executed
    renders is below 0.15, base = mean over the row's own attempts."""
    valid = [r for r in rows if r["valid"]]
    M = len(valid)
    out = []
    for r in rows:
        if not r["valid"]:
            out.append(-1.0)
            continue
        shares = [sum(v[k] == r[k] for v in valid) / M for k in ("caption", "easy_question", "hard_question")]
        types = [v["content_type"] for v in valid]
        f = types.count(r["content_type"]) / M
        type_pen = 0.0 if len(set(types)) == 1 else -0.15 * max(0.0, f - 0.5) / 0.5
        cs = [c for c, e in zip(r["consistency"], r["executed"]) if e]
        eh = -0.3 if cs and sum(min(c, 1 - c) for c in cs) / len(cs) < 0.15 - 1e-9 else 0.0
        n = max(1, len(r["executed"]))
        base = sum(min(s, 0.5) + min(c, 1 - c) for e, s, c in zip(r["executed"], r["easy"], r["consistency"]) if e) / n
        out.append(base + eh + type_pen + ref_diversity(shares, M, 0.5))
    return out


def test_proposer_head_matches_the_seed_equation_over_320_random_proposals():
    from mmevo.rewards.heads import ScoredSample
    from mmevo.rewards.mmzero import ProposerHead

    rng = random.Random(223)
    head = ProposerHead(cluster_threshold=1.0)  # only identical texts share a cluster: shares countable by hand
    captions = ["A bar chart of rainfall by month.", "A map of three towns and a river.", "A right triangle ABC."]
    easy_q = ["How many bars are there?", "What colour is the river?", "What is the length of AB?"]
    hard_q = ["Which month had the most rain?", "How far is town B from town C?", "What is angle C?"]
    total = 0
    while total < 320:
        rows = []
        for _ in range(rng.randint(1, 10)):
            n = rng.randint(0, 4)
            rows.append({"valid": rng.random() < 0.85, "content_type": rng.choice(["data_chart", "map", "geometry"]),
                         "caption": rng.choice(captions), "easy_question": rng.choice(easy_q),
                         "hard_question": rng.choice(hard_q), "executed": [rng.random() < 0.7 for _ in range(n)],
                         "easy": [rng.randint(0, 4) / 4 for _ in range(n)],
                         "consistency": [rng.randint(1, 8) / 8 for _ in range(n)]})
        samples = [ScoredSample("", 0, None, [], aux=dict(r)) for r in rows]
        got, metrics = head.score(samples)
        assert got.tolist() == pytest.approx(ref_head(rows), abs=1e-6), rows
        assert metrics["population"] == sum(r["valid"] for r in rows)
        total += len(rows)


def _proposal(**changes):
    from mmevo.rewards.heads import ScoredSample

    aux = {"valid": True, "content_type": "map", "caption": "A map.", "easy_question": "Colour of the river?",
           "hard_question": "Distance from A to B?", "executed": [True, False], "easy": [1.0, 0.0],
           "consistency": [0.5, 0.0]}
    aux.update(changes)
    return ScoredSample("", 0, None, [], aux=aux)


@pytest.mark.parametrize("changes, field", [
    ({"executed": [2, False]}, r"aux\['executed'\]\[0\]"), ({"executed": [1.0, 0.0]}, r"aux\['executed'\]\[0\]"),
    ({"easy": [True, 0.0]}, r"aux\['easy'\]\[0\]"), ({"easy": [None, 0.0]}, r"aux\['easy'\]\[0\]"),
    ({"consistency": [0.5, "0"]}, r"aux\['consistency'\]\[1\]"), ({"executed": True}, r"aux\['executed'\]"),
    ({"valid": "no"}, r"aux\['valid'\]"), ({"valid": 1}, r"aux\['valid'\]"),
    ({"caption": None}, r"aux\['caption'\]"), ({"content_type": 3}, r"aux\['content_type'\]"),
])
def test_proposer_head_names_a_sample_field_that_is_no_valid_value(changes, field):
    # executed [2] / [1.0] read as rendered, easy [True] as 1.0 and valid "no" as valid, silently; a None easy or
    # caption failed with a TypeError / the tokenizer's message naming neither sample nor field
    from mmevo.rewards.mmzero import ProposerHead

    with pytest.raises(ValueError, match=r"proposer sample 1: " + field):
        ProposerHead(cluster_threshold=1.0).score([_proposal(), _proposal(**changes)])


def test_proposer_head_reads_a_sample_without_a_valid_flag_as_invalid():
    from mmevo.rewards.mmzero import ProposerHead

    bare = _proposal()
    del bare.aux["valid"]
    r, m = ProposerHead(cluster_threshold=1.0).score([_proposal(), bare])
    assert r.tolist()[1] == -1.0 and m["population"] == 1
    assert r.tolist()[0] == pytest.approx(0.5)  # (0.5 + 0.5 + 0) / 2 attempts; alone: no penalty or adjustment
