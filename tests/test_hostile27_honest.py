"""Round 27, hostile generator expressions: every integer of a task expression is bounded, literals included, and
the mutators' tree parser refuses what Python's parser cannot build with a ValueError."""

import pytest

from mmevo.honest.mutators import expression_tree
from mmevo.honest.selfplay import parse_generated
from mmevo.honest.tasks import MAX_MAGNITUDE, evaluate_expression, recompute_answer


@pytest.mark.parametrize("literal", ["1" + "0" * 70, "0x" + "f" * 290, "-" + "9" * 200, "0b1" + "0" * 250])
def test_a_huge_literal_is_unverifiable(literal):
    assert parse_generated(f"<expression>{literal}</expression>") == (None, "unverifiable")


def test_a_literal_past_4300_digits_is_a_named_error():
    with pytest.raises(ValueError, match="literal of .* bits"):
        evaluate_expression("0x" + "f" * 3990)
    with pytest.raises(ValueError, match="literal"):
        recompute_answer({"expression": "9" * 3999})


def test_a_modpow_with_a_huge_modulus_is_unverifiable():
    assert parse_generated("<expression>pow(7, 999999, 0x" + "f" * 250 + ")</expression>") == (None, "unverifiable")


def test_the_bound_itself_is_allowed():
    assert evaluate_expression(str(MAX_MAGNITUDE)) == MAX_MAGNITUDE
    p, why = parse_generated("<expression>pow(2, 10, 1000) + 5</expression>")
    assert why == "" and p.answer == "29"


def test_expression_tree_refuses_a_parser_recursion():
    with pytest.raises(ValueError, match="nested too deeply"):
        expression_tree("-" * 3999 + "1")
