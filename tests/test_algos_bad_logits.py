"""Bad logits / labels for the logits helpers: a ValueError naming the argument, not a silent number."""

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


@pytest.mark.parametrize("labels", [torch.tensor([[2.7, 1.2]]), torch.tensor([[2.0, 1.0]]),
                                    torch.tensor([[True, False]])])
def test_labels_that_are_not_integer_ids_are_an_error(labels):
    # 2.7 was truncated to token 2 and True read as token 1: log-probs of tokens nobody asked for
    with pytest.raises(ValueError, match="labels must be integer token ids, got dtype"):
        logprobs_from_logits(torch.zeros(1, 2, 4), labels)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_integer_labels_of_any_width(dtype):
    z = torch.tensor([[[0.0, 1.0, 2.0, 3.0]]])
    assert logprobs_from_logits(z, torch.tensor([[2]], dtype=dtype)).item() == pytest.approx(
        torch.log_softmax(z, -1)[0, 0, 2].item(), rel=1e-6)
