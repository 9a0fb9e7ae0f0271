"""LM-head calls agreed over ranks: under ZeRO-3 every call of the (partitioned) head gathers its weight, so a
micro-batch runs the head as often on every rank, whatever its own token count (``token_logprobs``' ``min_calls``)."""

import pytest
import torch

from mmevo.grpo.trainer import elementwise_max, head_calls, token_logprobs


def test_head_calls_counts_the_chunks_and_at_least_one():
    assert [head_calls(n, 4) for n in (0, 1, 4, 5, 8, 9)] == [1, 1, 1, 2, 2, 3]
    assert head_calls(12288, 1024) == 12  # the shipped 7B micro-batch: 8 x 1536 tokens
    assert head_calls(5000, 0) == 1  # 0: the whole micro-batch in one call


def test_elementwise_max_over_ranks_of_ragged_nested_counts():
    assert elementwise_max([3, 5]) == 5
    assert elementwise_max([[1, 4], [2]]) == [2, 4]  # the shorter list counts as padded with 0
    # per update, per micro-batch; rank 1 has one update fewer and one micro-batch fewer in update 0
    assert elementwise_max([[[3, 1], [2]], [[1]]]) == [[3, 1], [2]]
    assert elementwise_max([[[1]], [[2, 2], [1, 5]]]) == [[2, 2], [1, 5]]


def _case(seed=0):
    g = torch.Generator().manual_seed(seed)
    head = torch.nn.Linear(16, 50, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.randn(50, 16, generator=g) * 0.5)
    hidden = torch.randn(3, 5, 16, generator=g, requires_grad=True)
    labels = torch.randint(0, 50, (3, 5), generator=g)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])  # 9 tokens: 3 chunks of 4
    return head, hidden, labels, mask


def _counting(head):
    calls = []
    head.register_forward_hook(lambda m, i, o: calls.append(torch.is_grad_enabled()))
    return calls


@pytest.mark.parametrize("min_calls", [0, 3, 5])
@pytest.mark.parametrize("entropy_grad", [True, False])
def test_padding_calls_run_the_head_in_forward_and_backward_and_change_nothing(min_calls, entropy_grad):
    head, hidden, labels, mask = _case()
    ref = None
    for m in (0, min_calls):
        head.zero_grad()
        hidden.grad = None
        calls = _counting(head)
        lp, en = token_logprobs(head, hidden, labels, mask, 0.7, 4, with_entropy=True, entropy_grad=entropy_grad,
                                min_calls=m)
        assert len(calls) == max(3, m)
        ((lp * 1.3).sum() + (en * 0.4).sum()).backward()
        assert len(calls) == 2 * max(3, m)  # every call, padding too, is recomputed in backward
        head._forward_hooks.clear()
        got = (lp.detach(), en.detach(), hidden.grad.clone(), head.weight.grad.clone())
        ref = ref or got
        for a, b in zip(ref, got):
            assert torch.equal(a, b)  # exact: the padding adds 0 to the values and to every gradient


def test_one_chunk_padded_to_several_is_checkpointed_like_them():
    # rank 1 of the 2-process test: 3 tokens (1 chunk of 4) while rank 0 makes 3 calls
    head, hidden, labels, _ = _case(1)
    mask = torch.tensor([[1, 1, 0, 0, 0], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0]])
    calls = _counting(head)
    lp, _ = token_logprobs(head, hidden, labels, mask, 1.0, 4, min_calls=3)
    lp.sum().backward()
    assert len(calls) == 6  # 3 in forward, 3 recomputed in backward (one chunk alone is not checkpointed)
    head._forward_hooks.clear()
    with torch.no_grad():
        calls = _counting(head)
        nograd, _ = token_logprobs(head, hidden, labels, mask, 1.0, 4, min_calls=3)
    assert len(calls) == 3 and torch.equal(nograd, lp.detach())


def test_nothing_to_score_still_makes_the_agreed_calls():
    head, hidden, labels, _ = _case(2)
    calls = _counting(head)
    lp, en = token_logprobs(head, hidden, labels, torch.zeros(3, 5), 1.0, 4, with_entropy=True, min_calls=2)
    assert len(calls) == 2 and lp.abs().sum() == 0 and en.abs().sum() == 0 and lp.requires_grad
    lp.sum().backward()
    assert len(calls) == 4 and head.weight.grad.abs().sum() == 0 and hidden.grad.abs().sum() == 0


def test_a_padding_micro_batch_makes_one_head_call(tiny_vl_path, tmp_path):
    """A rank with fewer micro-batches runs the padding sample; cut to one chunk it makes 1 call, never more than the
    other ranks' real micro-batch beside it (which makes at least 1): the agreed count stays the max over real ones."""
    from mmevo.config import load_config
    from mmevo.data.synthetic import split_train_heldout
    from mmevo.grpo.trainer import GRPOTrainer
    from mmevo.models.loader import load_model
    from mmevo.rollout.factory import build_engine

    over = {"data.prompt_template": "none", "trainer.logits_chunk_tokens": 4, "trainer.wandb_mode": "disabled",
            "trainer.progress": False, "trainer.output_dir": str(tmp_path), "reward.heads": "{accuracy: 1.0}",
            "algo.kl_coef": 0}
    cfg = load_config(None, [f"{k}={v}" for k, v in over.items()])
    lm = load_model(tiny_vl_path)
    train, _ = split_train_heldout(2, 0, seed=4)
    tr = GRPOTrainer(cfg, lm, build_engine(cfg, lm), train, [], log=False)
    tr._pad_sample = (tr.prompts(train[0]), list(range(100, 111)))  # 11 tokens: 3 chunks of 4
    prompts, responses = tr._padding_micro_batch()
    assert len(prompts) == 1 and responses == [[100, 101, 102, 103]]
    assert tr._head_calls([[0]], responses) == [1]
