"""GRPO math against a plain-torch reference written from the formulas, and hostile inputs (core review)."""

import pytest
import torch

from mmevo.grpo import algos

INF = float("inf")


@pytest.mark.parametrize("kind", ["k2", "mse"])
def test_k2_of_an_infinite_difference_at_padding_gives_a_finite_gradient(kind):
    # a -inf log-prob at a masked-out token: the token-mean never reads it, so neither its value nor its gradient may
    # reach the loss; the square's backward there was 0 * inf = NaN
    logp = torch.tensor([[-1.0, -INF], [-0.5, -2.0]], requires_grad=True)
    ref = torch.tensor([[-1.2, -3.0], [-0.4, -INF]])
    mask = torch.tensor([[1, 0], [1, 0]])
    kl = algos.kl_penalty(logp, ref, kind)
    assert kl[0, 1].item() == INF and kl[1, 1].item() == INF  # the value is still the estimate
    loss = algos.agg_loss(kl, mask, "token-mean")
    assert loss.item() == pytest.approx((0.5 * 0.2 ** 2 + 0.5 * 0.1 ** 2) / 2, rel=1e-6)
    loss.backward()
    # d/dlogp of (k2_00 + k2_10) / 2: (logp - ref) / 2 at the two read tokens, exactly 0 at the padding
    assert torch.allclose(logp.grad, torch.tensor([[0.1, 0.0], [-0.05, 0.0]]), atol=1e-7), logp.grad


def test_k2_of_two_minus_inf_log_probs_is_nan_with_gradient_zero():
    logp = torch.tensor([-1.0, -INF], requires_grad=True)
    kl = algos.kl_penalty(logp, torch.tensor([-1.5, -INF]), "k2")
    assert kl[0].item() == pytest.approx(0.125) and torch.isnan(kl[1])  # inf - inf is undefined: NaN, as documented
    algos.masked_mean(kl, torch.tensor([1, 0])).backward()
    assert logp.grad.tolist() == pytest.approx([0.5, 0.0])
