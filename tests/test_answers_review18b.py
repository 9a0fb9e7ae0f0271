"""Review of the answer-equivalence changes (option identity, str-for-list refusals): what they left."""
import pytest

from mmevo.rewards.accuracy import accuracy_rewards
from mmevo.rewards.answers import answers_equivalent, canonical_answer, group_answer_keys


def test_a_flat_option_list_given_for_per_sample_choices_is_refused_by_name():
    # before: each sample's options were the characters of one option text ("10" -> "1", "0"), so the right letter
    # B (option "12") was graded against option "0" and every response scored 0 without complaint
    with pytest.raises(ValueError, match=r"choices\[0\] must be a list of options or None, got the text '10'"):
        accuracy_rewards(["\\boxed{B}"] * 3, ["12"] * 3, ["10", "12", "14"])
    # a list, a tuple or no options per sample still score as before
    assert accuracy_rewards(["\\boxed{B}", "\\boxed{B}", "\\boxed{12}"], ["12"] * 3,
                            [["10", "12"], ("10", "12"), None]).tolist() == [1.0, 1.0, 1.0]
    assert accuracy_rewards(["\\boxed{A}", "\\boxed{14}"], ["12", "12"], [["10", "12"], None]).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("call", [
    lambda: answers_equivalent("B", "b", "abc"),  # before: True, the letter B named the option "b"
    lambda: answers_equivalent("B", "12", "10 12"),
    lambda: canonical_answer("A", "xyz"),  # before: ("str", "x")
    lambda: group_answer_keys(["A", "x", "B", "y"], "xyz"),  # before: two classes {A, x} {B, y}
])
def test_one_text_given_for_a_questions_options_is_refused_not_read_as_letter_options(call):
    with pytest.raises(ValueError, match="choices must be a list of options or None, got the text"):
        call()


def test_options_as_list_tuple_or_numpy_array_still_name_options():
    np = pytest.importorskip("numpy")
    for options in (["10", "12", "14"], ("10", "12", "14"), np.array(["10", "12", "14"])):
        assert answers_equivalent("B", "12", options) and not answers_equivalent("A", "12", options)
        assert group_answer_keys(["B", "12", "(B)", "A"], options) == [("num", 12)] * 3 + [("num", 10)]


def test_a_groups_option_texts_are_spelled_once_not_once_per_answer_compared(monkeypatch):
    # 3804190 re-spelled every option text for each answer matched against the options (4 times per
    # answers_equivalent): grouping 72 answers over 5 options took 6.3 ms warm where comparing texts by value had
    # taken 2.2 ms. Counted, not timed: the option texts (unique to this test, so no earlier call cached them) are
    # each spelled once, however many answers and comparisons there are.
    from collections import Counter

    from mmevo.rewards import answers

    options = [f"review18b range {i}.0 - {i}.5" for i in range(5)]
    spelled = Counter()
    real = answers._option_spelling
    monkeypatch.setattr(answers, "_option_spelling", lambda text: spelled.update([text]) or real(text))
    votes = [chr(65 + i % 5) if i % 2 else f"({chr(65 + i % 5)}) {options[i % 5]}" for i in range(72)]
    keys = group_answer_keys(votes, options)
    assert len(set(keys)) == 5 and keys[:5] == keys[5:10]  # five options, five classes
    assert [spelled[o] for o in options] == [1] * 5
    assert answers_equivalent("C", "(C)", options) and not answers_equivalent("C", "D", options)
    assert [spelled[o] for o in options] == [1] * 5


RANGES = ["0.0 - 0.2", "0.2 - 0.4", "0.4 - 0.6", "0.6 - 0.8", "0.8 - 1.0"]  # MathVista testmini 288


def test_a_value_naming_no_option_is_not_graded_equal_to_every_option_of_that_value():
    # 3804190 told two named options apart, but an answer that names none ("0-0.2", not the exact text) was still
    # compared by value with the option: every range evaluates to -0.2, so "0-0.2" was the answer B, D and E too,
    # and in a vote it joined the B voters while the exact "0.0 - 0.2" stayed apart
    from mmevo.rewards.majority import majority_vote_rewards

    for spelling in ["0-0.2", "0 - 0.2"]:
        assert [answers_equivalent(spelling, chr(65 + i), RANGES) for i in range(5)] == [False] * 5
        assert [answers_equivalent(chr(65 + i), spelling, RANGES) for i in range(5)] == [False] * 5
    votes = ["0-0.2", "B", "B", "C", "0.0 - 0.2"]
    keys = group_answer_keys(votes, RANGES)
    assert len(set(keys)) == 4 and keys[1] == keys[2] and keys[0] != keys[1]
    rewards, info = majority_vote_rewards([f"\\boxed{{{v}}}" for v in votes], [0] * 5, [RANGES] * 5)
    assert rewards.tolist() == [0.0, 1.0, 1.0, 0.0, 0.0] and info["distinct_answers_mean"] == 4.0
    # a value that singles one option out still names it, both ways round (Geometry3K-style numeric options)
    options = ["3\\sqrt{2}", "4.24", "6", "8"]
    assert answers_equivalent("\\sqrt{18}", "A", options) and answers_equivalent("A", "\\sqrt{18}", options)
    assert not answers_equivalent("\\sqrt{18}", "B", options) and answers_equivalent("4.240", "B", options)
    assert answers_equivalent("12.0", "B", ["10", "12", "14"]) and answers_equivalent("50", "B", ["40°", "50°"])
    assert answers_equivalent("5.0", "B", ["5", "5", "6"])  # a duplicated option is one answer
