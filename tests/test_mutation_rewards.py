"""Mutation-testing follow-up for mmevo/rewards (MM-Zero, HONEST, Prism, heads): tests that kill mutants the existing
suite let through. Every expected value is worked by hand from the seed / DESIGN.md formulas, not read off the code."""

from types import SimpleNamespace

import pytest
import torch

from mmevo.rewards.mmzero import CoderHead, ProposerHead, coder_reward, proposal_penalties, type_penalties
from test_mmzero_review4 import _ExactEmbedder  # equal texts -> equal unit vectors, others orthogonal


# -- MM-Zero: type penalty -0.15 * max(0, f_type - 0.5) / 0.5, f_type over the supplied population -------------------
def test_type_penalties_use_the_supplied_population():
    # this rank holds one "a"; the step's population (every rank) is a, a, a, b: f_a = 3/4 -> -.15 * .25 / .5 = -.075
    assert type_penalties(["a"], population=["a", "a", "a", "b"]) == pytest.approx([-0.075])
    # f_b = 1/4 < .5 -> 0; f_a = 3/4 -> -.075 (not 1/2 -> 0 as among the local types alone)
    assert type_penalties(["a", "b"], population=["a", "a", "a", "b"]) == pytest.approx([-0.075, 0.0])


def test_proposal_penalties_default_type_weight_is_0_15():
    # types a, a, b: f_a = 2/3 -> -.15 * (2/3 - .5) / .5 = -.05; f_b = 1/3 -> 0. c = .5 everywhere: no easy-hard penalty
    aux = [{"valid": True, "content_type": t, "executed": [True], "consistency": [0.5]} for t in ("a", "a", "b")]
    got = proposal_penalties(aux)
    assert [p[0] for p in got] == [0.0, 0.0, 0.0]
    assert [p[1] for p in got] == pytest.approx([-0.05, -0.05, 0.0])


# -- MM-Zero coder: 1 + s + min(c, 1 - c) + penalties on a render, 0 without one (DESIGN.md) --------------------------
def test_coder_reward_hand_values():
    assert coder_reward(True, 0.75, 0.8, -0.05) == pytest.approx(1.0 + 0.75 + 0.2 - 0.05)  # min(.8, .2) = .2
    assert coder_reward(True, 0.0, 0.3, 0.0) == pytest.approx(1.3)
    assert coder_reward(False, 1.0, 0.5, -0.3) == 0.0  # a failed render earns 0, penalties or not


def test_coder_head_adds_the_proposal_penalties():
    samples = [SimpleNamespace(aux={"rendered": True, "easy": 0.5, "consistency": 0.9, "penalties": -0.35}),
               SimpleNamespace(aux={"rendered": True, "easy": 1.0, "consistency": 0.5}),
               SimpleNamespace(aux={"rendered": False, "easy": 0.0, "consistency": 0.0, "penalties": -0.3})]
    r, m = CoderHead().score(samples)
    # 1 + .5 + .1 - .35 = 1.25; 1 + 1 + .5 = 2.5; 0
    assert r.tolist() == pytest.approx([1.25, 2.5, 0.0])
    assert m["rendered"] == pytest.approx(2 / 3)


# -- MM-Zero proposer head: penalties, diversity over the M valid proposals, strength -------------------------------
def _proposer_aux():
    def aux(caption, k, ctype):
        return {"valid": True, "content_type": ctype, "caption": caption, "easy_question": f"easy {k}",
                "hard_question": f"hard {k}", "executed": [True, True], "easy": [1.0, 1.0], "consistency": [0.5, 0.5]}
    return [aux("cap A", 0, "table"), aux("cap A", 1, "table"), aux("cap B", 2, "map"), {"valid": False}]


@pytest.mark.parametrize("kwargs, div", [({}, -0.225), ({"strength": 0.2}, -0.09)])
def test_proposer_head_hand_numbers(monkeypatch, kwargs, div):
    """M = 3 valid proposals. Base: (1/2)[2 x (min(1, .5) + min(.5, .5))] = 1.0; no easy-hard penalty (c = .5).
    Types table, table, map: f_table = 2/3 -> -.15 (1/6) / .5 = -.05. Caption shares 2/3, 2/3, 1/3, question shares
    1/3: dot(shares - 1/3, w) = .45/3 = .15 for the two "cap A" rows, 0 for "cap B"; diversity = -clip(.15 * M *
    strength, +-strength): strength .5 -> -.225, strength .2 -> -.09."""
    import mmevo.models.embedder as emb

    monkeypatch.setattr(emb, "get_embedder", lambda name="": _ExactEmbedder())
    samples = [SimpleNamespace(aux=dict(a)) for a in _proposer_aux()]
    r, m = ProposerHead(**kwargs).score(samples)
    want = [1.0 - 0.05 + div, 1.0 - 0.05 + div, 1.0, -1.0]
    assert r.tolist() == pytest.approx(want, abs=1e-6)
    assert samples[0].aux["penalties"] == pytest.approx((0.0, -0.05))
    assert samples[2].aux["penalties"] == pytest.approx((0.0, 0.0))
    assert m["population"] == 3 and m["valid"] == 3


# -- HONEST heads: answers graded with the sample's multiple-choice options ---------------------------------------
def test_honest_brier_head_grades_choice_letters_against_the_options():
    from mmevo.rewards.heads import ScoredSample
    from mmevo.rewards.honest import HonestBrierHead

    resp = "<reasoning>2 + 2 = 4, option B</reasoning><answer>B</answer><confidence>0.8</confidence>"
    s = ScoredSample(response=resp, group_id=0, gold="4", choices=["3", "4", "5"])
    r, m = HonestBrierHead().score([s])
    # letter B is the option "4" = gold: correct, -(0.8 - 1)^2 = -0.04 (graded as wrong it would be -0.64)
    assert r.tolist() == pytest.approx([-0.04])
    assert m["accuracy"] == 1.0


# -- Prism head: only maternal samples' clusters update the EMA counts -------------------------------------------
def test_prism_head_counts_only_maternal_visits():
    from mmevo.rewards.prism import PrismCoverageHead

    head = PrismCoverageHead(centroids="", k=4, lam=5.0, gamma=0.5)
    samples = [SimpleNamespace(aux={"question": "q0", "p": 0.75, "cluster": 0}, role="maternal"),
               SimpleNamespace(aux={"question": "q1", "p": 0.75, "cluster": 1}, role="reinference")]
    r, _ = head.score(samples)
    # counts all 1 before: n_c / mean = 1 for both, zpd(.75) = 1 -> 1 + 5 e^-1 each
    assert r.tolist() == pytest.approx([1 + 5 * 2.718281828459045 ** -1] * 2, rel=1e-6)
    # n <- .5 n + .5 1[visited by a maternal sample]: cluster 0 only
    assert head.counts.tolist() == pytest.approx([1.0, 0.5, 0.5, 0.5])


# -- heads.py: accuracy with some golds missing, mixer guards and maternal-only metrics ---------------------------
def test_accuracy_head_scores_missing_golds_zero_when_others_have_one():
    from mmevo.rewards.heads import AccuracyHead, ScoredSample

    s = [ScoredSample(response="<think>x</think> \\boxed{4}", group_id=0, gold="4", choices=None),
         ScoredSample(response="<think>x</think> \\boxed{4}", group_id=0, gold=None, choices=None)]
    r, m = AccuracyHead().score(s)
    assert r.tolist() == [1.0, 0.0] and m["no_gold"] == 1


class _FixedHead:
    name = "fixed"

    def __init__(self, values=(1.0, 0.0)):
        self.values = values

    def score(self, samples):
        return torch.tensor(self.values, dtype=torch.float32), {}


def _pair():
    from mmevo.rewards.heads import ScoredSample

    return [ScoredSample(response="a", group_id=0, gold=None, choices=None),
            ScoredSample(response="b", group_id=0, gold=None, choices=None, role="reinference", parent=0)]


def test_mixer_metrics_are_over_maternal_samples(monkeypatch):
    from mmevo.rewards import heads

    monkeypatch.setitem(heads.HEADS, "fixed_test_head", _FixedHead)
    total, m = heads.RewardMixer({"fixed_test_head": 2.0})(_pair())
    assert total.tolist() == [2.0, 0.0]
    # only the maternal sample (reward 1) counts: mean 1, std 0; total mean 2 (all samples: 0.5 and 1.0)
    assert m["reward/fixed_test_head/mean"] == 1.0 and m["reward/fixed_test_head/std"] == 0.0
    assert m["reward/total/mean"] == 2.0


def test_mixer_rejects_non_finite_head_rewards(monkeypatch):
    from mmevo.rewards import heads

    monkeypatch.setitem(heads.HEADS, "fixed_test_head", _FixedHead)
    mixer = heads.RewardMixer({"fixed_test_head": 1.0}, {"fixed_test_head": {"values": (float("nan"), 0.0)}})
    with pytest.raises(FloatingPointError):
        mixer(_pair())


def test_sfr_head_places_rewards_on_maternal_samples_listed_after_a_reinference():
    """CSRS Eq. 7-8 (gamma .2, beta 5): maternal answers 4, 5 and one re-inference 4, listed first in the batch.
    f_base(4) = 2/3, f_base(5) = 1/3; f_r(4) = 1, f_r(5) = 0. R(4) = (.2 tanh(5 (1 / (2/3) - 1)) + 1) 2/3,
    R(5) = (.2 tanh(-5) + 1) / 3; the re-inference (never trained on) gets 0."""
    import math

    from mmevo.rewards.heads import ScoredSample, SFRHead

    s = [ScoredSample(response="\\boxed{4}", group_id=0, gold=None, choices=None, role="reinference", parent=1),
         ScoredSample(response="\\boxed{4}", group_id=0, gold=None, choices=None),
         ScoredSample(response="\\boxed{5}", group_id=0, gold=None, choices=None)]
    r, _ = SFRHead().score(s)
    want = [0.0, (0.2 * math.tanh(2.5) + 1) * 2 / 3, (0.2 * math.tanh(-5.0) + 1) / 3]
    assert r.tolist() == pytest.approx(want, rel=1e-4)


def test_proposer_head_defaults_match_the_mmzero_config():
    from mmevo.config import MMZeroConfig

    head, cfg = ProposerHead(), MMZeroConfig()
    assert head.cluster_threshold == cfg.cluster_threshold and head.strength == cfg.diversity_strength == 0.5


def test_legacy_hindsight_head_pays_nothing_without_gold():
    from mmevo.rewards.heads import ScoredSample
    from mmevo.rewards.honest import HonestHindsightHead

    resp = "<reasoning>2 + 2</reasoning><answer>4</answer><confidence>0.9</confidence><hindsight>0.5</hindsight>"
    s = [ScoredSample(response=resp, group_id=0, gold="4", choices=None),
         ScoredSample(response=resp, group_id=0, gold=None, choices=None)]
    r, m = HonestHindsightHead(mode="legacy").score(s)
    # with gold: right, -0.3 (0.5 - 1)^2 = -0.075; without gold nothing can be graded: 0
    assert r.tolist() == pytest.approx([-0.075, 0.0])
    assert m["fired"] == 1.0


def test_diversity_stats_entropy_keeps_rare_clusters():
    import math

    from mmevo.rewards.prism import diversity_stats

    st = diversity_stats([0] * 199 + [1], 2)  # shares .995 and .005
    h = -(0.995 * math.log(0.995) + 0.005 * math.log(0.005)) / math.log(2)
    assert st["normalized_entropy"] == pytest.approx(h, rel=1e-9)
    assert st["active_clusters"] == 2 and st["questions"] == 200


def test_prism_head_band_metric_is_over_valid_samples():
    from mmevo.rewards.prism import PrismCoverageHead

    head = PrismCoverageHead(centroids="", k=2)
    samples = [SimpleNamespace(aux={"question": "q0", "p": 0.75, "cluster": 0}),
               SimpleNamespace(aux={"question": "q1", "p": 0.2, "cluster": 1}),
               SimpleNamespace(aux={"question": "", "p": 0.75, "cluster": 1})]  # invalid: empty question
    r, m = head.score(samples)
    assert r[2].item() == -1.0 and r[1].item() == 0.0
    assert m["valid_frac"] == pytest.approx(2 / 3)
    assert m["in_band_frac"] == pytest.approx(0.5)  # one of the two valid samples lies in [0.5, 0.9]


def test_format_reward_needs_exactly_one_closing_think():
    from mmevo.rewards.format import format_reward

    assert format_reward("<think>a</think> \\boxed{1}") == 1.0
    assert format_reward("<think>a</think>b</think> \\boxed{1}") == 0.0


def test_accuracy_rewards_refuse_more_golds_than_responses():
    from mmevo.rewards.accuracy import accuracy_rewards

    with pytest.raises(ValueError):
        accuracy_rewards(["\\boxed{1}"], ["1", "2"])
    with pytest.raises(ValueError):
        accuracy_rewards(["\\boxed{1}"], ["1"], [None, None])


def test_head_metric_name_of_an_import_path_is_its_class():
    from mmevo.rewards.heads import head_metric_name

    assert head_metric_name("accuracy") == "accuracy"
    assert head_metric_name("mypkg.rewards:CustomHead") == "CustomHead"
    assert head_metric_name("mypkg.rewards.CustomHead") == "CustomHead"
