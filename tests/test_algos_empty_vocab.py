"""Logits over an empty vocabulary are bad input: a ValueError naming logits, not an entropy of -inf."""

import pytest
import torch

from mmevo.grpo.algos import entropy_from_logits, logprobs_from_logits


@pytest.mark.parametrize("shape", [(2, 0), (1, 3, 0), ()])
def test_entropy_of_no_vocabulary_is_an_error(shape):
    # [2, 0] gave tensor([-inf, -inf]): logsumexp over nothing
    with pytest.raises(ValueError, match="logits must have a non-empty last \\(vocabulary\\) dimension"):
        entropy_from_logits(torch.zeros(shape))


def test_logprobs_of_no_vocabulary_is_an_error():
    # was torch's "index 0 is out of bounds for dimension 2 with size 0" from the gather
    with pytest.raises(ValueError, match="logits must have a non-empty last \\(vocabulary\\) dimension"):
        logprobs_from_logits(torch.zeros(2, 3, 0), torch.zeros(2, 3, dtype=torch.long))


def test_empty_batch_of_a_real_vocabulary_is_fine():
    assert entropy_from_logits(torch.zeros(0, 5)).shape == (0,)
    assert logprobs_from_logits(torch.zeros(0, 3, 5), torch.zeros(0, 3, dtype=torch.long)).shape == (0, 3)
    # a vocabulary of one: probability 1, entropy 0, log-prob 0
    assert entropy_from_logits(torch.tensor([[3.0]])).tolist() == [0.0]
    assert logprobs_from_logits(torch.tensor([[[3.0]]]), torch.tensor([[0]])).tolist() == [[0.0]]
