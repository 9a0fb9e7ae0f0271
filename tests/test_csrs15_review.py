"""CSRS review 15: boxed blanks other than the wide spaces (``\\underline{\\quad}``, ``\\phantom{0}``, ``?``) are no
answer for the votes and the accuracy head; a wide space between two numbers parts them (``1 \\quad 2`` is no 12);
CSRS / MM-UPT settings that a run would accept and ignore are refused, naming the key."""

import math

import pytest

from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import answers_equivalent, canonical_answer, extract_answer, group_answer_keys
from mmevo.rewards.heads import ScoredSample, SFRHead
from mmevo.rewards.majority import majority_vote_rewards

BLANKS = ["\\underline{\\quad}", "\\underline{\\hspace{2cm}}", "\\phantom{0}", "\\hphantom{00}", "\\vphantom{x}",
          "\\phantom{\\frac{1}{2}}", "?", "??", "\\text{?}", "\\_\\_", "___"]


@pytest.mark.parametrize("blank", BLANKS)
def test_a_boxed_blank_is_no_answer_for_majority_vote(blank):
    # "\boxed{?}" was the answer "?": three of them out-voted two 7s, became the pseudo label and scored 1
    responses = [f"<think>fill in</think> \\boxed{{{a}}}" for a in [blank, blank, blank, "7", "7"]]
    rewards, info = majority_vote_rewards(responses, [0] * 5)
    assert rewards.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert info["pseudo_labels"] == {0: "7"} and info["no_answer_frac"] == 0.6 and info["distinct_answers_mean"] == 1
    assert canonical_answer(extract_answer(responses[0])) is None


@pytest.mark.parametrize("blank", BLANKS)
def test_a_boxed_blank_is_no_answer_for_sfr(blank):
    # 2 maternal (blank, 7), 4 re-inferences (blank, blank, 7, blank): 7 counts 2 of 6 in all, 1 of 4 re-inferences
    samples = [ScoredSample(f"\\boxed{{{a}}}", 0, None, None, role=role) for a, role in
               [(blank, "maternal"), ("7", "maternal"), (blank, "reinference"), (blank, "reinference"),
                ("7", "reinference"), (blank, "reinference")]]
    sfr, metrics = SFRHead().score(samples)
    r_base = 2 / 6
    expected_7 = (0.2 * math.tanh(5.0 * ((1 / 4) / (r_base + 1e-6) - 1.0)) + 1.0) * r_base
    assert sfr[0].item() == 0.0 and sfr[1].item() == pytest.approx(expected_7, rel=1e-6)
    assert metrics["distinct_answers"] == 1


@pytest.mark.parametrize("blank", BLANKS)
def test_the_accuracy_head_never_credits_a_blank(blank):
    # math-verify reads "\phantom{0}" as 0: the accuracy head credited a blank against gold 0; a gold "?" is no answer
    golds = ["0", "00", "x", "?", "\\frac{1}{2}"]
    assert accuracy_rewards([f"\\boxed{{{blank}}}"] * len(golds), golds).tolist() == [0.0] * len(golds)
    assert not answers_equivalent(blank, blank)


def test_underline_is_presentation_only():
    assert canonical_answer("\\underline{5}") == ("num", 5)
    assert answers_equivalent("\\underline{5}", "5") and answers_equivalent("\\underline{B}", "40", ["30", "40"])
    assert canonical_answer("x_1") == ("str", "x_1")  # an underscore inside an answer is kept


@pytest.mark.parametrize("spelling", ["1 \\quad 2", "1\\quad2", "1 \\qquad 2", "1\\hspace{1cm}2", "1 \\quad\\quad 2",
                                      "1\\enspace 2"])
def test_two_numbers_parted_by_a_wide_space_stay_two_numbers(spelling):
    # "1 \quad 2" read as 12 (the space dropped), and math-verify reads "1 2" as 3: both matched it
    assert canonical_answer(spelling) == ("str", "1, 2")
    for single in ("12", "3", "1", "2"):
        assert not answers_equivalent(spelling, single) and not answers_equivalent(single, spelling)
    assert answers_equivalent(spelling, "1, 2") and answers_equivalent(spelling, "1 \\qquad 2")
    keys = group_answer_keys([spelling, "12", "12", "1, 2"])
    assert keys[0] == keys[3] != keys[1] == keys[2]
    rewards, _ = majority_vote_rewards([f"\\boxed{{{a}}}" for a in [spelling, "12", "12"]], [0] * 3)
    assert rewards.tolist() == [0.0, 1.0, 1.0]


def test_spaces_that_are_not_a_gap_between_numbers_keep_their_meaning():
    assert canonical_answer("1\\,000") == ("num", 1000)  # a thin space is a thousands separator
    assert canonical_answer("5\\quad") == canonical_answer("\\quad 5") == ("num", 5)
    assert canonical_answer("5 \\quad \\text{cm}") == ("num", 5)
