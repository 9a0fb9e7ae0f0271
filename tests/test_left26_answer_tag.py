"""Answer tags in any case: "<ANSWER>x</ANSWER>" is an answer as "<answer>x</answer>" is; a box still wins."""

from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import extract_answer


def test_capital_and_mixed_case_tags_give_the_answer():
    assert extract_answer("<think>7+5</think><ANSWER>12</ANSWER>") == "12"
    assert extract_answer("<Answer> 12 </Answer>") == "12"
    assert extract_answer("<answer>3</ANSWER>") == "3"


def test_the_last_tag_wins_whatever_its_case():
    assert extract_answer("<answer>3</answer> then <ANSWER>4</ANSWER>") == "4"
    assert extract_answer("<ANSWER>3</ANSWER> then <answer>4</answer>") == "4"


def test_a_box_keeps_precedence_over_a_capital_tag():
    assert extract_answer("\\boxed{5} <ANSWER>6</ANSWER>") == "5"


def test_capital_tag_letter_scores_against_choices():
    rewards = accuracy_rewards(["<ANSWER>B</ANSWER>", "<ANSWER>A</ANSWER>"], ["12", "12"],
                               [["10", "12"], ["10", "12"]])
    assert rewards.tolist() == [1.0, 0.0]


def test_unclosed_or_reversed_tags_give_no_tag_answer():
    assert extract_answer("<ANSWER>12") is None
    assert extract_answer("</ANSWER>12<ANSWER>") is None
