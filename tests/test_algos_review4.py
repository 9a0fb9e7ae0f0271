"""Review round 4 of the GRPO algorithm pieces: gradients at the dual-clip tie (verl parity), argument checks of
group_advantages (eps, NaN group ids), and shape checks of kl_penalty / logprobs_from_logits (silent broadcasts)."""

import math

import pytest
import torch

from mmevo.grpo.algos import agg_loss, group_advantages, kl_penalty, logprobs_from_logits, policy_loss


@pytest.mark.parametrize("agg, grad0, grad2", [
    ("token-mean", 0.7469481825828552, 0.5495737791061401),
    ("seq-mean-token-sum", 2.240844488143921, 1.6487212181091309),
])
def test_dual_clip_tie_splits_the_gradient_as_verl(agg, grad0, grad2):
    # token 0 sits exactly on the dual-clip bound (ratio == c, A = -1): verl's torch.min gives it half the gradient
    # (expected values from verl's compute_policy_loss_vanilla); token 1 is beyond c (no gradient), token 2 below it
    old = torch.zeros(1, 3)
    lp = torch.tensor([[1.5, 2.0, 0.5]], requires_grad=True)
    c = 4.481688976287842  # float32 exp(1.5), exactly representable
    loss, m = policy_loss(lp, old, torch.tensor([-1.0]), torch.ones(1, 3), 0.2, 0.2, agg, None, c)
    loss.backward()
    assert lp.grad[0].tolist() == pytest.approx([grad0, 0.0, grad2], rel=1e-6)
    assert loss.item() == pytest.approx(3.5373661518096924 if agg == "token-mean" else 10.612098693847656, rel=1e-6)
    assert m["clip_frac_dual"] == pytest.approx(1 / 3)  # the tie is not counted (verl's strict >)


@pytest.mark.parametrize("eps", [math.nan, -1e-3, math.inf, -math.inf])
def test_group_advantages_rejects_bad_eps(eps):
    # NaN made every advantage NaN, -1/sqrt(2) a division by ~0 (4.5e15), inf silently zeroed the whole signal
    with pytest.raises(ValueError, match="eps"):
        group_advantages(torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([0, 0, 1, 1]), "group", eps)


def test_group_advantages_accepts_zero_and_numpy_eps():
    import numpy as np

    out = group_advantages(torch.tensor([1.0, 0.0]), torch.tensor([0, 0]), "group", np.float64(0.0))
    assert out.tolist() == pytest.approx([0.7071067811865476, -0.7071067811865476])


def test_group_advantages_rejects_nan_group_ids():
    # each NaN id was a group of its own: those samples silently got advantage 0
    with pytest.raises(ValueError, match="group_ids"):
        group_advantages(torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([math.nan, math.nan, 1.0, 1.0]))
    # finite float ids are still ids
    out = group_advantages(torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([0.5, 0.5, 1.5, 1.5]), "none")
    assert out.tolist() == [0.5, -0.5, 0.5, -0.5]


@pytest.mark.parametrize("ref_shape", [(2, 1), (3,), (1, 3), ()])
def test_kl_penalty_refuses_broadcasting_ref_logp(ref_shape):
    # a [B, 1] / [T] reference log-prob broadcast silently over the tokens (e.g. k3 of a [2, 3] logp vs [2, 1] ref)
    with pytest.raises(ValueError, match="ref_logp"):
        kl_penalty(torch.zeros(2, 3), torch.full(ref_shape, -1.0), "k3")


@pytest.mark.parametrize("label_shape", [(2, 1), (1, 3)])
def test_logprobs_from_logits_refuses_short_labels(label_shape):
    # gather accepts a smaller index: [B, 1] labels gave a [B, T] result from position 0's label logit
    z = torch.randn(2, 3, 5)
    with pytest.raises(ValueError, match="labels"):
        logprobs_from_logits(z, torch.zeros(label_shape, dtype=torch.long))
    # the [N, V] / [N] form the trainer uses still works
    z2 = torch.tensor([[0.0, math.log(3.0)]])
    assert logprobs_from_logits(z2, torch.tensor([1])).tolist() == pytest.approx([math.log(0.75)])


@pytest.mark.parametrize("agg", ["seq-mean-token-mean", "seq-mean-token-sum"])
def test_seq_mean_of_an_empty_batch_is_zero(agg):
    # B = 0: the mean over no sequences was 0/0 = NaN (token-mean and seq-mean-token-sum-norm gave 0)
    lp = torch.zeros(0, 3, requires_grad=True)
    loss, m = policy_loss(lp, torch.zeros(0, 3), torch.zeros(0), torch.ones(0, 3), agg=agg)
    assert loss.item() == 0.0 and loss.dtype == torch.float32
    loss.backward()
    assert lp.grad.shape == (0, 3)
    assert agg_loss(torch.zeros(0, 4, dtype=torch.bfloat16), torch.zeros(0, 4), agg).item() == 0.0
