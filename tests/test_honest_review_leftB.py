"""HONEST review (leftB): a blank gold answer ("", whitespace, zero-width) is no gold, in the heads and in honest_aux
(skipped and counted like a None gold), and a calibration report refuses it naming the record."""

import pytest
import torch

from mmevo.data.schema import Example
from mmevo.honest.calibration import calibration_report
from mmevo.honest.protocol import format_response
from mmevo.honest.replay import group_outcomes
from mmevo.honest.strategy import honest_aux
from mmevo.rewards.heads import ScoredSample
from mmevo.rewards.honest import HonestBrierHead, HonestHindsightHead, has_gold_answer

BLANK = ["", "   ", "\t\n", "\u200b", " \ufeff\u2060 "]
RIGHT = "<reasoning>2 + 2 = 4</reasoning><answer>4</answer><confidence>0.9</confidence>"
WITH_HINDSIGHT = "<reasoning>2 + 2 = 4</reasoning><answer>4</answer><confidence>0.9</confidence>" \
                 "<hindsight>0.5</hindsight>"


def _pair(response, blank):
    return [ScoredSample(response=response, group_id=0, gold="4", choices=None),
            ScoredSample(response=response, group_id=0, gold=blank, choices=None)]


@pytest.mark.parametrize("blank", BLANK)
def test_has_gold_answer(blank):
    assert not has_gold_answer(blank) and not has_gold_answer(None)
    assert has_gold_answer("4") and has_gold_answer("0") and has_gold_answer(" x ")


@pytest.mark.parametrize("blank", BLANK)
def test_brier_head_counts_a_blank_gold_as_no_gold(blank):
    r, m = HonestBrierHead().score(_pair(RIGHT, blank))
    # the blank-gold sample: 0 and counted, as a None gold; it was graded wrong: -(0.9 - 0)^2 = -0.81
    assert r.tolist() == pytest.approx([-0.01, 0.0])
    assert m["no_gold"] == 1 and m["graded"] == 1 and m["accuracy"] == 1.0


@pytest.mark.parametrize("blank", BLANK)
def test_brier_head_refuses_a_batch_of_blank_golds_as_label_free(blank):
    with pytest.raises(ValueError, match="needs gold answers"):
        HonestBrierHead().score(_pair(RIGHT, blank)[1:])


@pytest.mark.parametrize("blank", BLANK)
def test_hindsight_head_skips_a_blank_gold(blank):
    r, m = HonestHindsightHead().score(_pair(WITH_HINDSIGHT, blank))
    want, _ = HonestHindsightHead().score(_pair(WITH_HINDSIGHT, None))
    assert r.tolist() == pytest.approx(want.tolist())
    assert r.tolist()[1] == 0.0 and r.tolist()[0] == pytest.approx(-0.3 * (0.5 - 1) ** 2)  # -k (h - y)^2, k = 0.3
    assert m["fired"] == 1


@pytest.mark.parametrize("blank", BLANK)
def test_honest_aux_reads_a_blank_gold_as_none(blank):
    ex = Example("e0", "What is 2 + 2?", blank, [], [])
    aux = honest_aux(format_response("r", "4", 0.8), ex)
    assert aux["correct"] is None and aux["confidence"] == 0.8  # not False: nothing to grade against
    # the replay write-back then skips and counts the group as it does a label-free one
    outcomes = group_outcomes(torch.tensor([0, 0]), [aux, aux], None)
    assert outcomes[0].correct is None


@pytest.mark.parametrize("blank", BLANK)
def test_calibration_report_refuses_a_blank_gold_naming_the_record(blank):
    records = [{"id": "a", "response": RIGHT, "gold": "4"}, {"id": "b", "response": RIGHT, "gold": blank}]
    with pytest.raises(ValueError, match=r"calibration record 1 \(id 'b'\): field 'gold' is empty"):
        calibration_report(records)
