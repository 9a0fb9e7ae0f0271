"""Review csrs22: hostile inputs at CSRS's edges that earlier reviews left open, and a re-inference whose engine drops
its anchor prefix (its answer is then read from the continuation alone, against Eq. 6's Concat(X_p, y_1..y_wL)).

SFR by hand (Eq. 7: R_base = Count(a, A_all) / ((m + 1) n); Eq. 8: R = (gamma tanh(beta (f_r / (f_base + eps) - 1))
+ 1) R_base, f_r = Count(a, A_m) / (m n); gamma 0.2, beta 5, eps 1e-6).
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mmevo.config import CSRSConfig
from mmevo.csrs.retrace import anchor_prefixes
from mmevo.csrs.strategy import CSRSStrategy
from mmevo.rewards.heads import MajorityHead, ScoredSample, SFRHead
from mmevo.rewards.majority import majority_vote_rewards
from mmevo.rewards.sfr import softened_frequency_rewards
from mmevo.rollout.base import Completion, SamplingParams
from mmevo.rollout.strategy import RolloutContext

BOXED_7 = [11, 12, 13]  # the tokens of "\boxed{7}" in WORDS below
STOP = 0
WORDS = {11: "\\boxed{", 12: "7", 13: "}", 14: "so", 15: "done", STOP: ""}


# -- bools are not group ids or token ids --------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [True, False, np.True_, torch.tensor(True)])
def test_majority_vote_refuses_a_boolean_group_id(bad):
    # True was group 1 and False group 0: [True, 1] put two prompts' samples in one vote (torch.tensor(True) too)
    with pytest.raises(ValueError, match=r"group_ids\[0\]"):
        majority_vote_rewards(["\\boxed{1}", "\\boxed{2}"], [bad, 1])


@pytest.mark.parametrize("head", [MajorityHead(), SFRHead()])
def test_reward_heads_refuse_a_boolean_group_id(head):
    samples = [ScoredSample("\\boxed{1}", True, None, None), ScoredSample("\\boxed{2}", 1, None, None)]
    with pytest.raises(ValueError, match=r"group_id"):
        head.score(samples)


def test_integer_group_ids_of_every_kind_still_count():
    r, _ = majority_vote_rewards(["\\boxed{1}"] * 3 + ["\\boxed{2}"], [np.int64(4), torch.tensor(4), 4, 5])
    assert r.tolist() == [1.0, 1.0, 1.0, 1.0]


@pytest.mark.parametrize("resp", [[5, True, 7, 8], np.array([True, False, True]), torch.tensor([True, True])])
def test_anchor_prefixes_refuse_boolean_token_ids(resp):
    # read as tokens 1 / 0 and cut into a prefix the engine then accepted as ints (it refuses a bool itself)
    with pytest.raises(ValueError, match=r"responses\[1\]"):
        anchor_prefixes([[1, 2, 3], resp], [0.7, 0.7])


@pytest.mark.parametrize("resp", [None, 5, "abc"])
def test_anchor_prefixes_name_a_response_that_is_no_token_list(resp):
    with pytest.raises(ValueError, match=r"responses\[0\]"):
        anchor_prefixes([resp], [0.5])


def test_anchor_prefixes_refuse_a_boolean_stop_id():
    with pytest.raises(ValueError, match="strip_ids"):
        anchor_prefixes([[1, 2, 3]], [0.7], strip_ids=[True])


# -- SFR answer lists that cannot be counted -----------------------------------------------------------------------
@pytest.mark.parametrize("which", ["maternal", "reinference"])
@pytest.mark.parametrize("bad", [["7"], {"v": 7}, {7}])
def test_sfr_names_an_unhashable_answer_key(which, bad):
    keys = {"maternal": ["7", "8"], "reinference": ["7", "8"]}
    keys[which] = keys[which][:1] + [bad]
    with pytest.raises(ValueError, match=rf"{which}\[1\] is an unhashable"):
        softened_frequency_rewards(keys["maternal"], keys["reinference"])


@pytest.mark.parametrize("which", ["maternal", "reinference"])
@pytest.mark.parametrize("make", [set, frozenset, lambda ks: dict.fromkeys(ks, 1)])
def test_sfr_refuses_a_set_or_mapping_of_answers(which, make):
    # {"7", "7", "8"} holds "7" once: Count(7, A_all) lost a vote, silently
    keys = {"maternal": ["7", "7", "8"], "reinference": ["7", "8", "8"]}
    keys[which] = make(keys[which])
    with pytest.raises(ValueError, match=which):
        softened_frequency_rewards(keys["maternal"], keys["reinference"])


def test_sfr_hashable_keys_unchanged():
    # n = 2, m = 1: a = 7: R_base 3/4, f_r 1/2 -> ratio 2/3; a = 8: R_base 1/4, f_r 1/2 -> ratio 2
    r = softened_frequency_rewards([("n", 7), ("n", 7)], [("n", 7), ("n", 8)])
    want = (0.2 * math.tanh(5 * (0.5 / (0.75 + 1e-6) - 1)) + 1) * 0.75
    assert r.tolist() == pytest.approx([want, want], abs=1e-12)


# -- a re-inference engine that drops the anchor prefix ------------------------------------------------------------
class PrefixEngine:
    """Maternal call: each response boxes 7 first, then talks on; re-inference call: a continuation with no box of its
    own, returned with (``keep``) or without the request's prefix_ids, as an engine that fills only token_ids would."""

    def __init__(self, keep: bool):
        self.keep, self.calls = keep, 0

    def generate(self, requests, params):
        self.calls += 1
        if self.calls == 1:
            return [[Completion(BOXED_7 + [14, 14, 14, 14, 14, 14, 15, STOP], [0.0] * 11, "stop")
                     for _ in range(r.n)] for r in requests]
        return [[Completion([15, STOP], [0.0] * 2, "stop", prefix_ids=list(r.prefix_ids) if self.keep else [])
                 for _ in range(r.n)] for r in requests]


def _ctx(engine):
    tok = SimpleNamespace(decode=lambda ids, skip_special_tokens=True: " ".join(WORDS[i] for i in ids))
    return RolloutContext(engine, None, tok, lambda ex: SimpleNamespace(input_ids=[1, 2], images=[]),
                          SamplingParams(max_tokens=16, seed=1), 2, 100, 0, 1, [STOP])


def test_reinference_completion_without_its_anchor_prefix_is_an_error():
    # omega 0.7 of 10 content tokens: the prefix is the 7 tokens "\boxed{ 7 } so so so so", holding the answer 7.
    # Read from the continuation "done" alone, every re-inference had no answer: f_r(7) = 0 and SFR damped both
    # maternal responses to (1 - 0.2 tanh(5)) * 2/6 = 0.2667 instead of about 1
    strategy = CSRSStrategy(CSRSConfig(enabled=True, m=2, perturb=False))
    with pytest.raises(ValueError, match=r"re-inference request 0 whose prefix_ids \(0 tokens\).*\(7 tokens\)"):
        strategy.rollout(_ctx(PrefixEngine(keep=False)), [SimpleNamespace(id="e0")])


def test_reinference_completion_with_its_anchor_prefix_reads_the_prefix_answer():
    ro = CSRSStrategy(CSRSConfig(enabled=True, m=2, perturb=False)).rollout(_ctx(PrefixEngine(keep=True)),
                                                                            [SimpleNamespace(id="e0")])
    assert [c.prefix_ids for c in ro.completions[2:]] == [BOXED_7 + [14] * 4] * 4
    samples = [ScoredSample(t, int(g), None, None, role="maternal" if k else "reinference")
               for t, g, k in zip(ro.texts, ro.group_ids, ro.trainable)]
    r, _ = SFRHead().score(samples)
    # every answer is 7: R_base = 6/6, f_r = 4/4, so R = (0.2 tanh(5 (1 / (1 + 1e-6) - 1)) + 1) * 1
    want = 0.2 * math.tanh(5 * (1 / (1 + 1e-6) - 1)) + 1
    assert r.tolist() == pytest.approx([want, want, 0, 0, 0, 0], abs=1e-6)


@pytest.mark.parametrize("responses, group_ids, name", [(None, [0], "responses"), (["\\boxed{1}"], None, "group_ids"),
                                                        (["\\boxed{1}"], 0, "group_ids")])
def test_majority_vote_names_a_list_argument_that_is_no_list(responses, group_ids, name):
    with pytest.raises(ValueError, match=name):
        majority_vote_rewards(responses, group_ids)


# -- answer classes must not depend on the order of the samples ----------------------------------------------------
def _classes(answers, choices=None):
    from mmevo.rewards.answers import group_answer_keys

    found: dict = {}
    for a, k in zip(answers, group_answer_keys(answers, choices)):
        found.setdefault(k, []).append(a)
    return tuple(sorted(tuple(sorted(v)) for v in found.values()))


@pytest.mark.parametrize("multiset, choices", [
    (["10^4", "1e4", "10000"], None),  # 1e4 and 10000 share a cheap key; only 10000 equals 10^4
    (["10^4", "10,000", "1e4"], None),
    (["10^4", "1e4", "1e4", "10000"], None),
    (["50\\%", "A", "\\frac{1}{2}"], ["1/2", "2", "4", "50"]),  # A (= 1/2) and \frac{1}{2} share a key
])
def test_same_answers_in_any_order_form_the_same_classes(multiset, choices):
    import itertools

    # a cheap key spelled two ways was compared through the spelling seen first, so these gave two partitions each
    assert len({_classes(list(p), choices) for p in itertools.permutations(multiset)}) == 1


def test_sfr_rewards_do_not_depend_on_the_order_of_the_samples():
    # n = 2, m = 1, all of 10^4, 1e4, 10000 one answer, 7 another: R_base = 3/4, f_r = 1/2 for both maternal answers
    # (0.6103). With 1e4 seen before 10000, 10^4 was its own answer before: (1 - 0.2 tanh 5) / 4 = 0.2000, and the
    # other maternal answer R_base = 2/4, f_r = 1/2: 0.5000; with 10000 seen first, 0.6103 for both
    want = (0.2 * math.tanh(5 * (0.5 / (0.75 + 1e-6) - 1)) + 1) * 0.75
    for mat, rein in ((["10^4", "10000"], ["1e4", "7"]), (["10^4", "1e4"], ["10000", "7"]),
                      (["1e4", "10^4"], ["7", "10000"])):
        samples = ([ScoredSample(f"\\boxed{{{a}}}", 0, None, None) for a in mat]
                   + [ScoredSample(f"\\boxed{{{a}}}", 0, None, None, role="reinference") for a in rein])
        r, _ = SFRHead().score(samples)
        assert r.tolist() == pytest.approx([want, want, 0.0, 0.0], abs=1e-6)


@pytest.mark.parametrize("m", [0, -1, True, 2.0, "5"])
def test_csrs_strategy_refuses_an_m_that_is_no_count_of_reinferences(m):
    # built from a CSRSConfig directly (not through load_config): m = 0 sampled no re-inference at all and SFR fell
    # back to R_base silently; True / 2.0 were read as 1 / 2 by the engine or refused there without naming csrs.m
    with pytest.raises(ValueError, match=r"csrs\.m"):
        CSRSStrategy(CSRSConfig(enabled=True, m=m))
