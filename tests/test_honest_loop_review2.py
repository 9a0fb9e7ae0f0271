"""HONEST review (tasks, protocol, self-play): hostile model outputs must parse in linear time, the strict parser
takes only a plain (ASCII) decimal, a generated problem's question must read as its expression, and the verifier
refuses what has no remainder "from 0 to the modulus minus 1" or is too deep to walk. Expected values are worked out
by hand in the comments."""

import re
import time

import pytest

from mmevo.honest.protocol import parse_lenient, parse_strict
from mmevo.honest.selfplay import parse_generated
from mmevo.honest.tasks import HonestTask, evaluate_expression, verify_task


def _timed(fn, text):
    fn.cache_clear()  # both parsers are lru-cached
    t0 = time.perf_counter()
    out = fn(text)
    return out, time.perf_counter() - t0


# -- linear time on long whitespace runs -------------------------------------------------------------------------
# Each input is a few kB; a linear parser needs milliseconds. Before the fix the lenient confidence number regex was
# cubic in a whitespace run inside <confidence> (1,500 spaces: several seconds; 4,000: two minutes) and the
# "confidence: 0.8" phrase and the <abstain/> regexes were quadratic.
@pytest.mark.parametrize("text,want", [
    # "0.5", 1,500 spaces, "x": not a number -> non-numeric, no confidence
    ("<answer>4</answer><confidence>0.5" + " " * 1500 + "x</confidence>", (None, ("non_numeric_confidence",))),
    # no tag, 12,000 spaces after the word and no number: no confidence phrase -> no_confidence
    ("<answer>4</answer> confidence" + " " * 12000 + "x", (None, ("no_confidence",))),
    # an unclosed "<abstain" with 60,000 spaces is no abstain; the answer and confidence still count
    ("<answer>4</answer><confidence>0.7</confidence><abstain" + " " * 60000 + "x", (0.7, ())),
])
def test_lenient_parser_is_linear_on_long_whitespace_runs(text, want):
    p, seconds = _timed(parse_lenient, text)
    assert (p.confidence, p.malformed) == want
    assert not p.abstain and p.answer == "4"
    assert seconds < 1.0, f"{seconds:.2f} s for {len(text)} characters"


def test_lenient_number_still_reads_percent_and_trailing_period_after_the_fix():
    cases = [("85%", 0.85), ("85 % .", 0.85), ("0.8.", 0.8), ("85.%", 0.85), (" .5 ", 0.5), ("1e-1", 0.1)]
    for raw, want in cases:
        p = parse_lenient(f"<answer>1</answer><confidence>{raw}</confidence>")
        assert p.confidence == pytest.approx(want) and p.malformed == (), raw
    p = parse_lenient("<answer>1</answer> my confidence is   70 %")  # phrase fallback: 70 % = 0.70
    assert p.confidence == pytest.approx(0.70)
    assert parse_lenient("reasoning <abstain / >").abstain  # spaced abstain tag


# -- strict: a plain decimal ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("raw", ["０.９", "٠.٩", "𝟎.𝟗"])  # fullwidth, Arabic-Indic, mathematical bold 0.9
def test_strict_parser_rejects_non_ascii_digits_lenient_reads_them(raw):
    text = f"<reasoning>r</reasoning><answer>1</answer><confidence>{raw}</confidence>"
    s = parse_strict(text)
    assert s.confidence is None and s.malformed == ("non_numeric_confidence",) and not s.graded
    assert parse_lenient(text).confidence == pytest.approx(0.9)


def test_strict_parser_still_takes_plain_decimals_with_unicode_spaces():
    p = parse_strict("<reasoning>r</reasoning><answer>1</answer><confidence>\u00a00.85\u00a0</confidence>")
    assert p.confidence == 0.85 and p.malformed == ()


# -- generated problems: the question reads as the expression ------------------------------------------------------
def _question_value(question: str):
    """Evaluate the question text the way a reader does: x mod m, a^e mod m with ^ before mod, left to right."""
    expr = re.match(r"(?:Compute |Is this statement true or false: )(.+?)(?:\. Give|\? Answer)", question).group(1)
    py = expr.replace("×", "*").replace(" mod ", " % ").replace("^", "**")
    return eval(py, {"__builtins__": {}})  # noqa: S307 - our own digits and operators only


@pytest.mark.parametrize("expression,answer,shown", [
    # pow(2, 3, 5) = 8 mod 5 = 3; 3 ** 2 = 9. Unbracketed "2^3 mod 5^2" reads as 8 mod 25 = 8.
    ("pow(2, 3, 5) ** 2", "9", "(2^3 mod 5)^2"),
    # 3 * 3 = 9. "3 × 2^3 mod 5" reads left to right as 24 mod 5 = 4.
    ("3 * pow(2, 3, 5)", "9", "3 × (2^3 mod 5)"),
    # (2 + 1) ** 3 = 27, 27 mod 5 = 2. "2 + 1^3 mod 5" reads as 2 + (1 mod 5) = 3.
    ("pow(2 + 1, 3, 5)", "2", "(2 + 1)^3 mod 5"),
    # 2 ** 3 = 8, 8 mod 5 = 3
    ("pow(2, 1 + 2, 5)", "3", "2^(1 + 2) mod 5"),
    # 3 mod 2 = 1
    ("pow(2, 3, 5) % 2", "1", "(2^3 mod 5) mod 2"),
    # 3 < 4
    ("pow(2, 3, 5) < 4", "True", "(2^3 mod 5) < 4"),
])
def test_generated_question_brackets_a_modular_power_inside_a_larger_expression(expression, answer, shown):
    p, why = parse_generated(f"<expression>{expression}</expression>")
    assert why == "" and p.answer == answer
    assert shown in p.question
    assert str(_question_value(p.question)) == answer


# -- the verifier's modulus and depth ------------------------------------------------------------------------------
@pytest.mark.parametrize("expression", ["7 % -3", "(-7) % (-3)"])
def test_a_modulus_below_one_is_not_verifiable(expression):
    # Python gives 7 % -3 = -2: no remainder "from 0 to the modulus minus 1", which the modular question promises
    with pytest.raises(ValueError, match="modulus"):
        evaluate_expression(expression)
    assert parse_generated(f"<expression>{expression}</expression>") == (None, "unverifiable")
    assert evaluate_expression("(-7) % 3") == 2  # a negative dividend is fine: -7 = -3 * 3 + 2


@pytest.mark.parametrize("expression", ["-" * 3000 + "1", "+".join(["1"] * 1999)])
def test_a_too_deep_expression_is_a_value_error_not_a_recursion_error(expression):
    assert len(expression) <= 4000  # inside the verifier's length limit
    with pytest.raises(ValueError):
        evaluate_expression(expression)
    task = HonestTask(id="t", question="q", answer="1", domain="arithmetic", difficulty=1, expression=expression)
    assert verify_task(task) is False


# -- the loop's generator pool -------------------------------------------------------------------------------------
def test_read_pool_drops_a_torn_line_and_still_recomputes_every_answer(tmp_path):
    import json

    from mmevo.honest.loop import read_pool

    row = lambda i, expr, answer: json.dumps({"id": i, "answer": answer, "meta": {"expression": expr}})  # noqa: E731
    path = tmp_path / "pool.jsonl"
    # a run killed mid-write leaves a torn line; the next run's append continues it on the same line
    path.write_text(row("a", "2 + 3", "99") + "\n" + row("b", "(7 * 8) % 5", "1")[:25] + row("c", "4 * 4", "16")
                    + "\n" + '["not", "a row"]\n' + row("d", "not (3 < 4)", "True") + "\n")
    pool = read_pool(path, limit=10)
    # 2 + 3 = 5 (the file's 99 is ignored); the torn b+c line and the list row are dropped; not (3 < 4) = False
    assert [(ex.meta["expression"], ex.answer) for ex in pool] == [("2 + 3", "5"), ("not (3 < 4)", "False")]
