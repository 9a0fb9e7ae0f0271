"""Review 10 of the day's changes: defects in cases their own tests did not reach.

- HONEST's ``gold_form_rate`` counted answers the grader accepts ("5.0" for 5, "1,000" for 1000, "true." for True)
  as answers of another form, which the report calls sure to be wrong: a run answering right read as exploiting the
  Brier reward.
"""

import pytest

from mmevo.honest.calibration import calibration_report, score_response
from mmevo.honest.protocol import format_response


# -- HONEST: gold_form_rate ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer,gold", [("5.0", "5"), ("1,000", "1000"), ("true.", "True"), ("$5$", "5"),
                                         ("10/2", "5")])
def test_an_answer_graded_right_is_of_the_golds_form(answer, gold):
    scored = score_response(format_response("work", answer, 0.9), gold)
    assert scored["correct"] is True
    assert scored["gold_form"] is True  # was False: "sure to be wrong" while graded right


def test_gold_form_rate_counts_right_answers_of_another_spelling_and_still_flags_the_exploit():
    recs = [{"response": format_response("work", "5.0", 0.9), "gold": "5", "domain": "arithmetic"},
            {"response": format_response("work", "1,000", 0.8), "gold": "1000", "domain": "arithmetic"},
            {"response": format_response("work", "3.5", 0.2), "gold": "4", "domain": "arithmetic"},  # wrong form
            {"response": format_response("work", "true.", 0.7), "gold": "True", "domain": "logic"},
            {"response": format_response("work", "24", 0.0), "gold": "False", "domain": "logic"}]  # the exploit
    rep = calibration_report(recs)
    assert rep["accuracy"] == pytest.approx(3 / 5)
    assert rep["gold_form_rate"] == pytest.approx(3 / 5)  # was 0 / 5
    by = rep["by"]["domain"]
    assert by["arithmetic"]["gold_form_rate"] == pytest.approx(2 / 3) and by["logic"]["gold_form_rate"] == 0.5
