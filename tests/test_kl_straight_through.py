"""verl's straight-through KL kinds ("k3+" etc.): the value of the kind, the gradient of k2 (logp - ref).

verl's kl_penalty: forward = the kind's estimate; for a kind ending in "+" it returns k2 - k2.detach() +
forward.detach(). Numbers: logp = [-1, -2], ref = [-1.5, -1]: d = ref - logp = [-0.5, 1]; k3 = e^d - d - 1 =
[0.1065306597, 0.7182818285]; the k2 gradient is logp - ref = [0.5, -1].
"""

import math

import pytest
import torch

from mmevo.config import CHOICES, load_config
from mmevo.grpo.algos import KL_KINDS, kl_penalty

PLUS = ["k1+", "kl+", "abs+", "k3+", "low_var_kl+"]


@pytest.mark.parametrize("kind", PLUS)
def test_value_is_the_kind_and_gradient_is_k2s(kind):
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    ref = torch.tensor([[-1.5, -1.0]])
    kl = kl_penalty(logp, ref, kind)
    assert torch.equal(kl.detach(), kl_penalty(logp.detach(), ref, kind[:-1]))  # bit-for-bit the plain value
    kl.sum().backward()
    assert logp.grad.tolist() == [[0.5, -1.0]]  # d/dlogp 0.5 (logp - ref)^2


def test_k3_plus_numbers():
    kl = kl_penalty(torch.tensor([-1.0, -2.0]), torch.tensor([-1.5, -1.0]), "k3+")
    assert kl.tolist() == pytest.approx([math.exp(-0.5) - 0.5, math.e - 2], rel=1e-7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_dtype_as_the_plain_kind(dtype):
    logp, ref = torch.tensor([-1.0, -2.0], dtype=dtype), torch.tensor([-1.5, -1.0], dtype=dtype)
    assert kl_penalty(logp, ref, "k3+").dtype == kl_penalty(logp, ref, "k3").dtype


def test_infinite_padding_log_prob_gives_no_nan_gradient():
    # a -inf log-prob at a padding token: 0.5 * (-inf)^2's backward is 0 * inf = NaN even under a zero upstream
    logp = torch.tensor([-1.0, -math.inf], requires_grad=True)
    kl = kl_penalty(logp, torch.tensor([-1.5, -1.0]), "k1+")
    (kl * torch.tensor([1.0, 0.0])).nan_to_num().sum().backward()
    assert logp.grad.tolist() == [0.5, 0.0]


def test_config_accepts_the_plus_kinds():
    assert CHOICES["algo.kl_type"] == KL_KINDS
    assert load_config(None, ["algo.kl_type=k3+"]).algo.kl_type == "k3+"  # was refused: not a valid choice


def test_k2_plus_is_not_a_kind():
    # verl has none either (kl_penalty_forward("k2+") raises NotImplementedError)
    with pytest.raises(ValueError, match="unknown kl kind 'k2\\+'"):
        kl_penalty(torch.zeros(2), torch.zeros(2), "k2+")
