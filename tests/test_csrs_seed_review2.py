"""Second review of CSRS against its paper: seeds of the re-inference call (RRM sampling), group ids of the MM-UPT
majority vote, and hand-computed SFR vectors (Eq. 7-8) for the edge cases of the brief.

Expected numbers are derived by hand from the paper (gamma = 0.2, beta = 5.0, eps = 1e-6):

    Eq. 7: R_base(a) = Count(a, A_all) / ((m + 1) n)
    Eq. 8: R = (gamma * tanh(beta * (f_r / (f_base + eps) - 1)) + 1) * R_base,   f_r = Count(a, A_m) / (m n)
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mmevo.config import CSRSConfig
from mmevo.csrs.strategy import CSRSStrategy
from mmevo.rewards.majority import majority_vote_rewards
from mmevo.rewards.sfr import softened_frequency_rewards
from mmevo.rollout.base import Completion, SamplingParams
from mmevo.rollout.strategy import RolloutContext
from mmevo.rollout.vllm_engine import call_seed_base

STOP = 0


class SeedRecordingEngine:
    """Per-sample seeds as mmevo's vLLM engine assigns them: sample k of a request gets ``base + offset + k`` (vLLM's
    child-request convention), where ``base = call_seed_base(params.seed)`` and ``offset`` counts the samples of the
    call's earlier requests. Every completion is 6 tokens + a stop token."""

    def __init__(self):
        self.calls = []

    def generate(self, requests, params):
        seeds, out, offset = [], [], 0
        base = call_seed_base(params.seed)
        for req in requests:
            s = [base + offset + k for k in range(req.n)]
            offset += req.n
            seeds.append(s)
            out.append([Completion([3 + x % 5 for x in range(6)] + [STOP], [0.0] * 7, "stop",
                                   prefix_ids=list(req.prefix_ids)) for x in s])
        self.calls.append(seeds)
        return out


def _ctx(engine, seed, n):
    tok = SimpleNamespace(decode=lambda ids, skip_special_tokens=True: " ".join(map(str, ids)))
    return RolloutContext(engine, None, tok, lambda ex: SimpleNamespace(input_ids=[1, 2, 3], images=[]),
                          SamplingParams(max_tokens=16, seed=seed), n, 100, 0, seed, [STOP])


# Table 5 rows with re-inferences (+RRM, +VSP, both; text-only prompts, so VSP leaves them as they are) and A.5
@pytest.mark.parametrize("retrace, perturb, random_anchor", [(True, False, False), (False, True, False),
                                                             (True, True, False), (True, False, True)])
@pytest.mark.parametrize("n_prompts, n, m", [(1, 2, 1), (2, 4, 3), (3, 8, 5)])
def test_reinference_samples_never_reuse_a_maternal_seed(retrace, perturb, random_anchor, n_prompts, n, m):
    # A_m must be fresh samples: with one seeded random stream per sample (vLLM), a re-inference that shares its seed
    # with a maternal response replays that response's random draws. With the call's seed as the base of its samples'
    # seeds, the re-inference call (step seed + 1) gave re-inference k of the first maternal response the seed of
    # maternal response k + 1 of the same prompt.
    eng = SeedRecordingEngine()
    c = CSRSConfig(enabled=True, m=m, retrace=retrace, perturb=perturb, random_anchor=random_anchor)
    ro = CSRSStrategy(c).rollout(_ctx(eng, 1000, n), [f"ex{i}" for i in range(n_prompts)])
    assert len(eng.calls) == 2
    maternal = [s for req in eng.calls[0] for s in req]
    rein = [s for req in eng.calls[1] for s in req]
    assert len(maternal) == n_prompts * n and len(rein) == n_prompts * n * m
    assert len(set(rein)) == len(rein)
    assert set(maternal).isdisjoint(rein)
    assert ro.trainable.tolist() == [True] * len(maternal) + [False] * len(rein)


def test_calls_with_nearby_seeds_get_disjoint_sample_seeds():
    # the self-play loops' later calls in a step are seeded step seed + 11 / + 17, CSRS's re-inferences step seed + 1:
    # every per-sample seed of every such call must differ (calls of up to 10,000 samples, seeds 0 .. 40 apart)
    ranges = sorted((call_seed_base(s), call_seed_base(s) + 10_000) for s in [0, 1, 2, 11, 17, 40, 7919, 7920, 2**40])
    assert all(hi <= lo2 for (_, hi), (lo2, _) in zip(ranges, ranges[1:]))
    assert all(0 <= lo and hi < 2**63 for lo, hi in ranges)  # inside torch.Generator's seed range
    assert call_seed_base(5) == call_seed_base(5) and call_seed_base(None) is None
    assert call_seed_base(-1) != call_seed_base(1)


def _box(a):
    return f"<think>x</think> \\boxed{{{a}}}"


@pytest.mark.parametrize("make", [torch.tensor, np.array, list])
def test_majority_vote_group_ids_may_be_a_tensor(make):
    # group 0: 4, 4, 5 -> mode 4; group 1: 7, 8 -> tie, the first answer (7) wins (Counter.most_common, as MM-UPT)
    # (old code: a tensor's elements hash by identity, every sample was a group of one and got reward 1)
    r, info = majority_vote_rewards([_box(a) for a in [4, 7, 4, 8, 5]], make([0, 1, 0, 1, 0]))
    assert r.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert info["pseudo_labels"] == {0: "4", 1: "7"}
    assert info["modal_share"] == pytest.approx((2 / 3 + 1 / 2) / 2)


@pytest.mark.parametrize("bad", [[0, 0.5], [0, "a"], [0, None]])
def test_majority_vote_rejects_non_integer_group_ids(bad):
    with pytest.raises(ValueError, match=r"group_ids\[1\]"):
        majority_vote_rewards([_box(1), _box(2)], bad)


# ------------------------------------------------------------------ SFR vectors at the paper's n = 8, m = 5

def test_sfr_every_answer_different():
    # every one of the 48 answers distinct: R_base = 1/48, f_r = 0 -> (1 + 0.2 tanh(-5)) / 48
    #   tanh(5) = 0.999909204262595 -> (1 - 0.199981840852519) / 48 = 0.0166670449822
    r = softened_frequency_rewards([f"m{i}" for i in range(8)], [f"r{i}" for i in range(40)])
    assert r.tolist() == pytest.approx([0.800018159147481 / 48] * 8, abs=1e-12)
    assert 0.800018159147481 / 48 == pytest.approx(0.0166670449822, abs=1e-12)


def test_sfr_maternal_tie_broken_by_reinference():
    # maternal 4 x4, 6 x4 (a majority-vote tie); re-inference 4 x10, 6 x30. 48 answers.
    #   4: R_base = 14/48 = 0.291666666667, f_r = 10/40 = 0.25: 0.25 / 0.291667666667 = 0.857139796 -> -0.142860204
    #      tanh(-0.714301020) = -0.613367 -> R = (1 - 0.1226734) * 0.291667 = 0.255887
    #   6: R_base = 34/48 = 0.708333333333, f_r = 30/40 = 0.75: 0.75 / 0.708334333333 = 1.058822037 -> 0.058822037
    #      tanh(0.294110185) = 0.285913 -> R = (1 + 0.0571827) * 0.708333 = 0.748838
    r = softened_frequency_rewards(["4", "6"] * 4, ["4"] * 10 + ["6"] * 30)
    assert r.tolist() == pytest.approx([0.255887, 0.748838] * 4, abs=2e-6)
    four = (1 + 0.2 * math.tanh(5 * (0.25 / (14 / 48 + 1e-6) - 1))) * 14 / 48
    assert r[0].item() == pytest.approx(four, abs=1e-12)
