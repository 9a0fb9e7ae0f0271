"""Fourth review of CSRS (paper Eq. 6-8, VSP, Algorithm 1): hostile engines, other scalar types, malformed inputs.

SFR numbers by hand from the paper (Eq. 7: R_base = Count(a, A_all) / ((m + 1) n); Eq. 8:
R = (gamma * tanh(beta * (f_r / (f_base + eps) - 1)) + 1) * R_base, f_r = Count(a, A_m) / (m n)), gamma 0.2, beta 5,
eps 1e-6, cross-checked with an independent reference.
"""

import random
from decimal import Decimal
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from mmevo.config import CSRSConfig
from mmevo.csrs.perturb import perturb_image
from mmevo.csrs.retrace import anchor_position, anchor_prefixes, sample_omegas
from mmevo.csrs.strategy import CSRSStrategy
from mmevo.rewards.majority import majority_vote_rewards
from mmevo.rewards.sfr import softened_frequency_rewards
from mmevo.rollout.base import Completion, SamplingParams
from mmevo.rollout.strategy import RolloutContext


class MiscountingEngine:
    """Maternal call: n answers per request; re-inference call: ``delta`` completions too many / few for request 0."""

    def __init__(self, delta):
        self.calls, self.delta = 0, delta

    def generate(self, requests, params):
        self.calls += 1
        out = [[Completion([3, 4, 5, 0], [0.0] * 4, "stop", prefix_ids=list(r.prefix_ids)) for _ in range(r.n)]
               for r in requests]
        if self.calls == 2:
            first = out[0]
            out[0] = first[:len(first) + self.delta] if self.delta < 0 else first + [
                Completion([6, 0], [0.0] * 2, "stop", prefix_ids=list(requests[0].prefix_ids))] * self.delta
        return out


@pytest.mark.parametrize("delta", [-1, -2, 1])
def test_reinference_list_with_another_count_than_m_is_an_error(delta):
    # A_m has m re-inferences per anchor (m n in all): with one anchor's list short or long, |A_m| and the votes of
    # that anchor were silently off (m = 2, n = 3 gave 5 or 7 re-inferences instead of 6)
    tok = SimpleNamespace(decode=lambda ids, skip_special_tokens=True: " ".join(map(str, ids)))
    ctx = RolloutContext(MiscountingEngine(delta), None, tok, lambda ex: SimpleNamespace(input_ids=[1, 2], images=[]),
                         SamplingParams(max_tokens=8, seed=1), 3, 100, 0, 1, [0])
    strategy = CSRSStrategy(CSRSConfig(enabled=True, m=2, perturb=False))
    with pytest.raises(ValueError, match="re-inference request 0"):
        strategy.rollout(ctx, [SimpleNamespace(id="e0")])


def test_reinference_lists_of_m_each_pass():
    tok = SimpleNamespace(decode=lambda ids, skip_special_tokens=True: " ".join(map(str, ids)))
    ctx = RolloutContext(MiscountingEngine(0), None, tok, lambda ex: SimpleNamespace(input_ids=[1, 2], images=[]),
                         SamplingParams(max_tokens=8, seed=1), 3, 100, 0, 1, [0])
    ro = CSRSStrategy(CSRSConfig(enabled=True, m=2, perturb=False)).rollout(ctx, [SimpleNamespace(id="e0")])
    assert ro.parents == [-1, -1, -1, 0, 0, 1, 1, 2, 2]
    assert ro.group_ids.tolist() == [0] * 9 and ro.trainable.tolist() == [True] * 3 + [False] * 6


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("length, omega, expected", [(10, 0.7, 7), (100, 0.29, 29), (20, 0.35, 7), (1536, 0.7, 1075)])
def test_anchor_position_torch_low_precision_rate_is_its_decimal(dtype, length, omega, expected):
    # floor(omega * L) with omega as written: torch float32 0.7 is 0.699999988..., which cut 10 tokens at 6
    # (np.float32 was already read as "0.7"; a torch scalar was not)
    w = torch.tensor(omega, dtype=dtype)
    assert anchor_position(length, w) == expected
    assert anchor_position(length, sample_omegas(1, w, False, random.Random(0))[0]) == expected


@pytest.mark.parametrize("bad", [np.True_, np.False_, torch.tensor(True)])
def test_numpy_and_torch_bools_are_not_rates_lengths_or_hyperparameters(bad):
    # float(np.True_) is 1.0 and int(np.True_) 1: a Python True was refused, a numpy / torch one was read as a number
    with pytest.raises(ValueError, match="omega"):
        anchor_position(10, bad)
    with pytest.raises(ValueError, match="omega"):
        sample_omegas(2, bad, False, random.Random(0))
    with pytest.raises(ValueError, match="response_len"):
        anchor_position(bad, 0.7)
    for kw in ("gamma", "beta", "eps"):
        with pytest.raises(ValueError, match=kw):
            softened_frequency_rewards(["a"], ["a"], **{kw: bad})
    with pytest.raises(ValueError, match="sigma"):
        perturb_image(Image.new("RGB", (2, 2)), bad, 0)


EOS = 99
RESP = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, EOS, EOS]  # 10 content tokens


def test_anchor_prefixes_token_lists_of_zero_dim_tensors():
    # list(tensor) gives 0-d tensors, which hash by identity: the trailing EOS were never stripped, so omega = 1 kept
    # them (12 tokens, not 10) and omega = 0.7 cut at floor(8.4) = 8 instead of floor(7.0) = 7
    assert anchor_prefixes([list(torch.tensor(RESP))], [1.0], strip_ids={EOS}) == [RESP[:10]]
    assert anchor_prefixes([RESP], [0.7], strip_ids=list(torch.tensor([EOS]))) == [RESP[:7]]
    assert anchor_prefixes([list(torch.tensor(RESP))], [0.7], strip_ids=[EOS]) == [RESP[:7]]


def test_anchor_prefixes_refuses_non_integer_token_ids():
    with pytest.raises(ValueError, match=r"responses\[1\]"):
        anchor_prefixes([RESP, [5.0, 6.5, EOS]], [0.7, 0.7], strip_ids={EOS})


# n = 3, m = 2: a=1: R_base 5/9, f_r 3/6 -> 0.504208; a=2: R_base 4/9, f_r 3/6 -> 0.493741
EXPECTED_123 = [0.5042085, 0.5042085, 0.4937414]


@pytest.mark.parametrize("make", [np.array, np.int64, np.str_, lambda v: np.array(str(v))])
def test_sfr_numpy_scalar_and_zero_dim_keys_count_by_value(make):
    # a 0-d array is unhashable (TypeError before); numpy scalars count like the Python values they hold
    r = softened_frequency_rewards([make(v) for v in [1, 1, 2]], [make(v) for v in [1, 2, 2, 2, 1, 1]])
    assert r.tolist() == pytest.approx(EXPECTED_123, abs=1e-6)


def test_sfr_decimal_and_numpy_int_keys_of_one_value_are_one_answer():
    # Decimal(2) == np.int64(2) raises TypeError inside the counter: a numpy key is its Python value first
    r = softened_frequency_rewards([Decimal(1), np.int64(1), Decimal(2)], [1, np.int64(2), 2, Decimal(2), 1.0, 1])
    assert r.tolist() == pytest.approx(EXPECTED_123, abs=1e-6)


def _box(a):
    return f"<think>x</think> \\boxed{{{a}}}"


def test_majority_vote_refuses_one_flat_option_list_for_all_samples():
    # choices are per sample: ["3", "4", "5", "6"] for 4 samples made sample 0's options the characters of "3", so
    # B / C were not options and only the first answer scored (reward [1, 0, 0, 0] instead of B = 4 twice)
    with pytest.raises(ValueError, match=r"choices\[0\]"):
        majority_vote_rewards([_box("B"), _box(4), _box("C"), _box(5)], [0] * 4, ["3", "4", "5", "6"])
    r, _ = majority_vote_rewards([_box("B"), _box(4), _box("C"), _box(5)], [0] * 4, [["3", "4", "5", "6"]] * 4)
    assert r.tolist() == [1.0, 1.0, 0.0, 0.0]
