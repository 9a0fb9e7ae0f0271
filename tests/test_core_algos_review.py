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


@pytest.mark.parametrize("call, name", [
    (lambda: algos.group_advantages(None, torch.tensor([0, 0])), "rewards"),
    (lambda: algos.group_advantages([1.0, 0.0], torch.tensor([0, 0])), "rewards"),
    (lambda: algos.group_advantages(torch.tensor([1.0, 0.0]), [0, 0]), "group_ids"),
    (lambda: algos.reward_std([1.0, 2.0]), "rewards"),
    (lambda: algos.kl_penalty(torch.zeros(2), None, "k3"), "ref_logp"),
    (lambda: algos.masked_mean(torch.zeros(2), [1, 1]), "mask"),
    (lambda: algos.agg_loss(None, torch.ones(1, 2), "token-mean"), "loss_mat"),
    (lambda: algos.policy_loss(torch.zeros(1, 2), torch.zeros(1, 2), 1.0, torch.ones(1, 2)), "advantages"),
    (lambda: algos.policy_loss(torch.zeros(1, 2), None, torch.ones(1), torch.ones(1, 2)), "old_logp"),
    (lambda: algos.entropy_from_logits([[0.0, 1.0]]), "logits"),
    (lambda: algos.logprobs_from_logits(torch.zeros(1, 3), None), "labels"),
])
def test_a_non_tensor_argument_is_a_type_error_naming_it(call, name):
    # each was an AttributeError ("'NoneType' object has no attribute 'dim'") naming no argument
    with pytest.raises(TypeError, match=f"^{name} must be a torch.Tensor, got "):
        call()


def test_dr_grpo_default_normaliser_of_an_empty_response_axis_names_the_cause():
    # the default normaliser is T = 0 here; the error said "loss_scale_factor ... got None", which the caller never set
    with pytest.raises(ValueError, match=r"by default the mask's length T, which is 0 \(mask \(2, 0\)\)"):
        algos.agg_loss(torch.zeros(2, 0), torch.zeros(2, 0), "seq-mean-token-sum-norm")
    assert algos.agg_loss(torch.zeros(2, 0), torch.zeros(2, 0), "seq-mean-token-sum-norm", 8.0).item() == 0.0


_R, _G = torch.tensor([1.0, 0.0, 0.5]), torch.tensor([0, 0, 0])
_LP, _M, _A = torch.tensor([[-1.0, -0.5]]), torch.ones(1, 2), torch.tensor([1.0])


@pytest.mark.parametrize("call, name", [
    (lambda: algos.group_advantages(_R, _G, eps=True), "eps"),  # was read as eps = 1.0
    (lambda: algos.group_advantages(_R, _G, eps=None), "eps"),
    (lambda: algos.group_advantages(_R, _G, "batch", std_all=True), "std_all"),
    (lambda: algos.group_advantages(_R, _G, "batch", std_all=torch.tensor(True)), "std_all"),
    (lambda: algos.policy_loss(_LP, _LP - 1, _A, _M, clip_high=False), "clip_high"),  # was no upper clip at all
    (lambda: algos.policy_loss(_LP, _LP, _A, _M, clip_low="0.2"), "clip_low"),  # was "1.0 - str" deep inside
    (lambda: algos.policy_loss(_LP, _LP, _A, _M, clip_ratio_c="3"), "clip_ratio_c"),
    (lambda: algos.policy_loss(_LP, _LP, _A, _M, agg="seq-mean-token-sum-norm",
                                       loss_scale_factor=True), "loss_scale_factor"),
    (lambda: algos.agg_loss(_LP, _M, "seq-mean-token-sum-norm", loss_scale_factor=True), "loss_scale_factor"),
])
def test_a_bool_or_string_hyperparameter_is_a_type_error_naming_it(call, name):
    with pytest.raises(TypeError, match=f"^{name} must be a real number"):
        call()


def test_numbers_of_other_real_types_are_still_accepted():
    import numpy as np

    want = algos.group_advantages(_R, _G, eps=1e-6)
    for eps in (np.float32(1e-6), torch.tensor(1e-6, dtype=torch.float64)):
        assert torch.equal(algos.group_advantages(_R, _G, eps=eps), want)
    assert torch.equal(algos.group_advantages(_R, _G, eps=0), algos.group_advantages(_R, _G, eps=0.0))
    loss, _ = algos.policy_loss(_LP, _LP - 1, _A, _M, clip_low=np.float64(0.2), clip_high=1, clip_ratio_c=3)
    assert loss.item() == pytest.approx(-2.0)  # ratio e clipped at 1 + 1
