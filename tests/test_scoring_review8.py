"""MATH-V cost guards that refused cheap answers. gcd / lcm / binomials are evaluated while latex2sympy2 parses, so
an argument holding a power, a factorial or a 5-digit number was refused outright ("\\gcd(2^{3}, 12)" scored False
against gold 4); so was any factorial in an exponent ("2^{3!}"). The official MATH-V scorer (lmms-eval 0.7.3's port
with ``from math import *``, latex2sympy2 1.9.1) scores each pair below as given, in milliseconds; the guards now
bound the value of literal arguments / exponents instead of refusing on the symbol."""

from __future__ import annotations

import pytest

from mmevo.eval.scoring import _too_costly_for_sympy, mathvision_is_equal, score_mathvision


@pytest.mark.parametrize("answer,gold,official", [
    # was refused (False): literal arguments of a cheap value
    ("\\gcd(2^{3}, 12)", "4", True),
    ("\\gcd(2^3,12)", "4", True),
    ("\\binom{10^{2}}{2}", "4950", True),
    ("\\binom{3!}{2}", "15", True),
    ("\\operatorname{lcm}(2^{2}, 6)", "12", True),
    ("\\gcd(2^{10}, 3^{5})", "1", True),
    ("\\gcd(2^{3}-1, 14)", "7", True),
    ("\\gcd(10!, 3)", "3", True),
    ("\\gcd(2^{100}, 2^{99})", "2^{99}", True),
    ("\\binom{4}{2}+\\gcd(2^{2},6)", "8", True),
    ("\\binom{2^{13}}{2}", "33550336", True),
    # was refused: a literal factorial as a whole exponent, at most 6! = 720
    ("2^{3!}", "64", True),
    ("2^{6!}", "2^{720}", True),
    ("10^{3!}", "1000000", True),
    # the official verdict is False here too (parsed, and a different value or a parse error)
    ("\\gcd(2^{3}, 1.5)", "1", False),
    ("\\mathrm{lcm}(2^{2}, 6)", "12", False),
    ("\\binom{10}{3!}", "210", False),
    ("x^{3!}", "x^{6}", False),
    # still refused (too big, or not judged): False, whatever the official says
    ("\\binom{2^{99}}{3}", "1", False),
    ("2^{3!}!", "1", False),
    # judged by its value since tests/test_scoring_review13.py (2^5040): a different value
    ("2^{7!}", "1", False),
])
def test_cheap_literal_arguments_and_exponents_are_evaluated(answer, gold, official):
    assert mathvision_is_equal(answer, gold) is official
    # the same through the official pipeline (a boxed answer)
    assert score_mathvision(f"So the answer is \\boxed{{{answer}}}.", {"answer": gold, "options": []}) is official


@pytest.mark.parametrize("answer", [
    "\\binom{2^{99}}{49999}",
    "\\gcd(9^{9^{9}}, 3)",  # the argument's value is astronomic
    "\\gcd(2^{2^{2^{2^{2}}}}, 2)",
    "\\operatorname{lcm}(" + ", ".join(f"2^{{13}}-{2 * i + 1}" for i in range(60)) + ")",  # 8 s in sympy
    "\\gcd(2^3^2, 8)",  # a chain is not judged
    "\\gcd((3!)!, 6)",
])
def test_costly_or_unjudged_arguments_are_still_refused_by_the_guard(answer):
    assert _too_costly_for_sympy(answer)  # refused before parsing, not by a parse that happened to be quick
    assert mathvision_is_equal(answer, "1") is False


@pytest.mark.parametrize("answer", ["\\gcd(2^{3}, 12)", "\\binom{3!}{2}", "2^{6!}", "\\binom{2^{14}}{2}",
                                    "\\operatorname{lcm}(2^{60}-1, 2^{60}-3, 2^{60}-5, 2^{60}-7)",
                                    # refused as unjudged shapes before tests/test_scoring_review13.py, which judges
                                    # literal arithmetic by its values (2^7, 2^5040, 9^36)
                                    "2^{3!+1}", "2^{7!}", "9^{3!}^{3!}"])
def test_cheap_ones_pass_the_guard(answer):
    assert not _too_costly_for_sympy(answer)


# -- MathVista: a marked answer taken back after it, with no new answer marker --------------------------------------
FOUR = {"pid": "9", "question_type": "multi_choice", "answer_type": "text", "choices": ["3", "4", "5", "6"],
        "answer": "6", "precision": None, "unit": None}
YES_NO = {"pid": "31", "question_type": "multi_choice", "answer_type": "text", "choices": ["Yes", "No"],
          "answer": "No", "precision": None, "unit": None}
COUNT = {"pid": "1", "question_type": "free_form", "answer_type": "integer", "choices": None, "answer": "6",
         "precision": None, "unit": None}


@pytest.mark.parametrize("response,item,extracted", [
    ("The answer is C. Wait, actually it is D.", FOUR, "D"),  # was C
    ("The answer is C. Hmm, no, it is D.", FOUR, "D"),  # was C
    ("The answer is C.\n\nCorrection: D.", FOUR, "D"),  # was C
    ("The answer is C. Actually, it is D, since 6 > 5.", FOUR, "D"),  # was C
    ("Answer: B\nNo, it's A.", FOUR, "A"),  # was B
    ("The answer is 5. Wait, actually it is 6.", COUNT, "6"),  # was 5
    ("The answer is 5. On second thought, it should be 6.", COUNT, "6"),  # was 5
    # controls: a later sentence that is no answer leaves the marked one
    ("The answer is C. Actually, it is the only option with a right angle.", FOUR, "C"),
    ("The answer is 5. Wait, it is consistent with 2+3.", COUNT, "5"),
    ("The answer is 5. Actually it's 5 apples, not 6.", COUNT, "5"),
    ("The answer is 5. That is 2+3.", COUNT, "5"),
    ("The answer is C. No, it is not D.", FOUR, "C"),
    ("The answer is D. Hmm, it is 5 sides plus one, so 6.", FOUR, "D"),
    ("The answer is Yes. Actually, it is no wonder the bar is taller.", YES_NO, "Yes"),
    ("The answer is B. Wait, it is a square.", FOUR, "B"),
    ("The answer is C. Wait, that is wrong. The correct answer is D.", FOUR, "D"),  # a new marker, as before
])
def test_a_marked_answer_taken_back_gives_the_correction(response, item, extracted):
    from mmevo.eval.scoring import extract_mathvista_answer

    assert extract_mathvista_answer(response, item) == extracted


@pytest.mark.parametrize("response,item,extracted", [
    ("The answer is either A or C, but most likely C.", FOUR, "C"),  # was the whole text (-> nearest choice)
    ("The answer is A or C, most likely C.", FOUR, "C"),
    ("The answer is probably C.", FOUR, "C"),  # was 'probably C'
    ("The answer is likely (C) 5.", FOUR, "C"),
    ("The answer is either 5 or 6, but most likely 6.", COUNT, "6"),  # was 5
    ("The answer is 5 or 6, more likely 6.", COUNT, "6"),  # was 5
    # controls
    ("The answer is 6 because it is more likely 3 + 3.", COUNT, "6"),  # no alternatives before it
    ("The answer is C, which is most likely 5.", FOUR, "C"),
    ("The answer is 6, most likely.", COUNT, "6"),
    ("The answer is probably yes.", {**YES_NO, "choices": ["Probably yes", "No"]}, "Probably yes"),  # a choice text
])
def test_a_hedged_marked_answer_gives_the_answer_it_leans_to(response, item, extracted):
    from mmevo.eval.scoring import extract_mathvista_answer

    assert extract_mathvista_answer(response, item) == extracted


@pytest.mark.parametrize("response,extracted", [
    ("There are 1000 g in total. (2 weights, 3 marks.)", "1000"),  # was 3
    ("There are 6 objects in total. (This counts the 2 spheres and 3 cubes.)", "6"),  # was 3
    ("6 apples (2 red). Also 1,000 (about 3 kg).", "1000"),  # was 3
    # controls: a bracketed value, a bracket with no number before it, negations
    ("So the total is 6 (3 + 3).", "3"),
    ("The total is (5).", "5"),
    ("It has (2 legs and 3 arms)", "3"),
    ("The length is 5.8 (or about 6 when rounded).", "5.8"),
    ("It is 6, not 7 (not 8 either).", "6"),
])
def test_an_unmarked_conclusion_is_read_before_a_closing_remark_in_brackets(response, extracted):
    from mmevo.eval.scoring import extract_mathvista_answer

    assert extract_mathvista_answer(response, COUNT) == extracted


@pytest.mark.parametrize("response,item,extracted", [
    ("Evaluating the options:\n- A: incorrect\n- B: incorrect\n- C: correct\n- D: incorrect", FOUR, "C"),  # was ''
    ("- (A) 3: wrong\n- (B) 4: wrong\n- (C) 5: correct\n- (D) 6: wrong", FOUR, "C"),  # was ''
    ("A. 3 - incorrect\nB. 4 - correct\nC. 5 - incorrect", FOUR, "B"),  # was ''
    ("A is incorrect. B is incorrect. C is correct. D is incorrect.", FOUR, "C"),  # was ''
    ("A: False\nB: True\nC: False", FOUR, "B"),  # was A
    ("**A**: incorrect\n**B**: correct", FOUR, "B"),  # was A
    ("Option A is wrong. Option D is right.", FOUR, "D"),
    # controls: one verdict, two right ones, and verdict words that are the choices' own texts
    ("A is correct.", FOUR, "A"),  # one verdict is no judged set; read as a bare letter said to be correct
    ("A: correct\nB: correct", FOUR, "A"),  # as before (the whole text read as "A: ...")
    ("Option A: True - does not match.\nOption B: False - this matches.\nSo B is the one.",
     {**YES_NO, "choices": ["True", "False"], "answer": "False"}, ""),
])
def test_one_option_judged_right_among_several_is_the_answer(response, item, extracted):
    from mmevo.eval.scoring import extract_mathvista_answer

    assert extract_mathvista_answer(response, item) == extracted
