"""Third review of CSRS (paper Eq. 6-8, VSP, Algorithm 1): differential equation vectors and hostile inputs.

SFR numbers are by hand from the paper (Eq. 7: R_base = Count(a, A_all) / |A_all|; Eq. 8:
R = (gamma * tanh(beta * (f_r / (f_base + eps) - 1)) + 1) * R_base, f_r = Count(a, A_m) / |A_m|), cross-checked
with an independent reference; "no answer" (None) counts in both denominators, matches nothing and scores 0.
"""

import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from PIL import Image

from mmevo.config import CSRSConfig
from mmevo.csrs.perturb import perturb_image
from mmevo.csrs.retrace import anchor_position, anchor_prefixes, sample_omegas
from mmevo.csrs.strategy import CSRSStrategy
from mmevo.rewards.sfr import softened_frequency_rewards
from mmevo.rollout.base import Completion, SamplingParams
from mmevo.rollout.strategy import RolloutContext


# n = 3, |A_m| = 6, |A_all| = 9, gamma 0.2, beta 5, eps 1e-6:
# a=1: R_base = 5/9, f_r = 3/6 -> tanh(5 * (0.5 / 0.555557 - 1)) = -0.462110 -> R = 0.504208
# a=2: R_base = 4/9, f_r = 3/6 -> tanh(5 * (0.5 / 0.444445 - 1)) = 0.554643 -> R = 0.493741
TENSOR_EXPECTED = [0.5042085, 0.5042085, 0.4937414]


@pytest.mark.parametrize("make", [torch.tensor, lambda x: [torch.tensor(v) for v in x], np.array])
def test_sfr_answer_keys_given_as_tensors_count_like_ints(make):
    # tensor elements hash by identity: every answer was its own class (R = 0.0889 for all three)
    r = softened_frequency_rewards(make([1, 1, 2]), make([1, 2, 2, 2, 1, 1]))
    assert r.tolist() == pytest.approx(TENSOR_EXPECTED, abs=1e-6)


@pytest.mark.parametrize("maternal, reinference, gamma, beta, eps, expected", [
    # n=4, m=2, |A_all|=12; a: 3/12, f_r 1/8 -> 0.200669; b: 5/12, f_r 4/8 -> 0.480132; no answer -> 0
    (["a", "a", "b", None], ["b", "b", "b", "b", None, None, "a", "c"], 0.2, 5.0, 1e-6,
     [0.2006693, 0.2006693, 0.4801323, 0.0]),
    # gamma 1, beta 1e6: a step function, 2 R_base when f_r > f_base and 0 when f_r < f_base
    (["a", "b", "c"], ["a", "a", "a"], 1.0, 1e6, 1e-6, [1.3333333, 0.0, 0.0]),
    # eps 0 and f_r == f_base exactly: R = R_base
    (["a", "b"], ["b", "b", "a", "a"], 0.2, 5.0, 0.0, [0.5, 0.5]),
    # only unparseable re-inferences: f_r = 0, R = (1 - 0.2 tanh(5)) / 4
    (["x"], [None, None, None], 0.2, 5.0, 1e-6, [0.2000045]),
    # m = 0: no re-inference frequency, R = R_base
    (["a", "a"], [], 0.2, 5.0, 1e-6, [1.0, 1.0]),
    # Table 2 extremes gamma 0.35, beta 8: a: 2/3, f_r 1 -> (1 + 0.35 tanh(4.0)) 2/3
    ([None, "a"], ["a"], 0.35, 8.0, 1e-6, [0.0, 0.8998435]),
])
def test_sfr_equation_vectors(maternal, reinference, gamma, beta, eps, expected):
    r = softened_frequency_rewards(maternal, reinference, gamma, beta, eps)
    assert r.tolist() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("kw", [{"gamma": True}, {"beta": "5.0"}, {"eps": b"1"}])
def test_sfr_rejects_hyperparameters_that_are_not_numbers(kw):
    with pytest.raises(ValueError, match=next(iter(kw))):
        softened_frequency_rewards(["a"], ["a"], **kw)


@pytest.mark.parametrize("sigma", ["20", True])
def test_vsp_rejects_sigma_that_is_not_a_number(sigma):
    with pytest.raises(ValueError, match="sigma"):
        perturb_image(Image.new("RGB", (2, 2)), sigma, 0)


def test_anchor_position_rejects_a_bool_length():
    with pytest.raises(ValueError, match="response_len"):
        anchor_position(True, 0.7)


def test_anchor_position_rejects_a_string_rate():
    with pytest.raises(ValueError, match="omega"):
        anchor_position(10, "0.7")


@pytest.mark.parametrize("length, omega, expected", [(10, 0.7, 7), (100, 0.29, 29), (1536, 0.7, 1075),
                                                     (20, 0.35, 7)])
def test_anchor_position_float32_rate_is_its_decimal(length, omega, expected):
    # floor(omega * L) with omega as written: float32(0.7) is 0.69999998807..., which cut at 6 of 10 tokens
    assert anchor_position(length, np.float32(omega)) == expected
    assert sample_omegas(2, np.float32(omega), False, random.Random(0)) == [pytest.approx(omega, abs=1e-7)] * 2
    w = sample_omegas(1, np.float32(omega), False, random.Random(0))[0]
    assert anchor_position(length, w) == expected


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.longdouble])
def test_anchor_position_other_float_widths(dtype):
    assert anchor_position(10, dtype(0.7)) == 7 and anchor_position(100, dtype(0.5)) == 50


def test_anchor_prefixes_strip_ids_given_as_a_tensor():
    EOS = 99
    resp = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, EOS, EOS, EOS]  # 10 content tokens
    assert anchor_prefixes([resp], [1.0], strip_ids=torch.tensor([EOS])) == [resp[:10]]
    assert anchor_prefixes([resp], [0.7], strip_ids=np.array([EOS])) == [resp[:7]]


class DroppingEngine:
    """Maternal call: n answers per request; re-inference call: one completion list too few (hostile engine)."""

    def __init__(self, drop):
        self.calls, self.drop = 0, drop

    def generate(self, requests, params):
        self.calls += 1
        out = [[Completion([3, 4, 5, 0], [0.0] * 4, "stop", prefix_ids=list(r.prefix_ids)) for _ in range(r.n)]
               for r in requests]
        return out[:len(out) - self.drop] if self.calls == 2 else out


@pytest.mark.parametrize("drop", [1, 2])
def test_reinference_call_with_missing_completion_lists_is_an_error(drop):
    # an anchor silently left without its m re-inferences would change |A_m| and every f_r of the group
    tok = SimpleNamespace(decode=lambda ids, skip_special_tokens=True: " ".join(map(str, ids)))
    ctx = RolloutContext(DroppingEngine(drop), None, tok, lambda ex: SimpleNamespace(input_ids=[1, 2], images=[]),
                         SamplingParams(max_tokens=8, seed=1), 3, 100, 0, 1, [0])
    strategy = CSRSStrategy(CSRSConfig(enabled=True, m=2, perturb=False))
    with pytest.raises(ValueError, match="completion lists"):
        strategy.rollout(ctx, [SimpleNamespace(id="e0")])
