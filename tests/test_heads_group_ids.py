"""Reward heads group samples by the integer value of their group id, whatever type the caller gives it."""

import numpy as np
import pytest
import torch

from mmevo.rewards.heads import MajorityHead, ScoredSample, SFRHead


def _samples(gid):
    mat = ["\\boxed{1}", "\\boxed{1}", "\\boxed{2}"]
    rein = ["\\boxed{1}", "\\boxed{2}", "\\boxed{2}", "\\boxed{2}", "\\boxed{1}", "\\boxed{1}"]
    return ([ScoredSample(r, gid(0), None, None, eval_gold="1") for r in mat] +
            [ScoredSample(r, gid(0), None, None, role="reinference", parent=j // 2) for j, r in enumerate(rein)])


@pytest.mark.parametrize("gid", [int, torch.tensor, np.int64, lambda v: torch.tensor([v])[0]])
def test_sfr_head_groups_tensor_and_numpy_ids_by_value(gid):
    r, _ = SFRHead(gamma=0.2, beta=5.0).score(_samples(gid))
    # Eq. 7-8 on answers {1: 2 of 3 maternal + 3 of 6 re-inferences, 2: 1 + 3}; one group: every id was its own
    # group before (each sample then saw only itself: [1, 1, 1])
    assert r[:3].tolist() == pytest.approx([0.5042, 0.5042, 0.4937], abs=1e-4)
    assert r[3:].tolist() == [0.0] * 6


def test_majority_head_with_tensor_ids_logs_the_pseudo_label_accuracy():
    samples = [ScoredSample(r, torch.tensor(g), None, None, eval_gold="1") for r, g in
               [("\\boxed{1}", 0), ("\\boxed{1}", 0), ("\\boxed{2}", 0), ("\\boxed{2}", 1), ("\\boxed{2}", 1)]]
    r, m = MajorityHead().score(samples)
    assert r.tolist() == [1.0, 1.0, 0.0, 1.0, 1.0]
    assert m["pseudo_label_acc"] == 0.5  # group 0's mode 1 is right, group 1's mode 2 is wrong


def test_a_non_integer_group_id_is_named():
    with pytest.raises(ValueError, match=r"samples\[0\]\.group_id must be an integer, got 0.5"):
        SFRHead().score([ScoredSample("\\boxed{1}", 0.5, None, None)])
