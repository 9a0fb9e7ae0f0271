"""HONEST tasks (mmevo.honest.tasks): determinism, every answer equal to the verifier's recomputation from
meta.expression over thousands of tasks at every difficulty, the safe evaluator, the train/held-out split and the
data.train=honest_tasks wiring with a text model."""

import collections
import statistics

import pytest

from mmevo.honest.tasks import (DOMAINS, MAX_DIFFICULTY, MIN_DIFFICULTY, HonestTask, evaluate_expression,
                                format_answer, generate_task, generate_tasks, recompute_answer, split_honest_tasks,
                                verify_task)

LEVELS = range(MIN_DIFFICULTY, MAX_DIFFICULTY + 1)


def test_generation_is_deterministic():
    a, b = generate_tasks(300, seed=7), generate_tasks(300, seed=7)
    assert a == b
    assert generate_tasks(100, seed=7) == a[:100]  # a shorter list is a prefix
    assert generate_tasks(300, seed=8) != a
    for i in (0, 17, 299):
        t = a[i]
        assert generate_task(t.domain, t.difficulty, seed=7, index=i) == t  # one task, addressable on its own
    held_out = generate_task("modular", 4, seed=1, index=3, stream="heldout")
    assert held_out != generate_task("modular", 4, seed=1, index=3)


def test_pinned_tasks_checked_by_hand():
    # fixed outputs of the generator (str seeds of random.Random hash with sha512: stable across runs and machines)
    t = generate_task("arithmetic", 1, seed=0, index=0)
    assert (t.question, t.expression, t.answer) == ("Compute 41 - 5. Give the exact integer.", "41 - 5", "36")
    t = generate_task("modular", 5, seed=0, index=7)
    # 17^2 = 289 = 6*42 + 37, 17^3 = 37*17 = 629 = 14*42 + 41 = -1 (mod 42), so 17^93 = (17^3)^31 = (-1)^31 = 41
    assert (t.expression, t.answer) == ("pow(17, 93, 42)", "41")
    assert t.question.startswith("Compute 17^93 mod 42.")
    t = generate_task("logic", 3, seed=1, index=2)
    # 55 <= 22 is False; (not (78 > 33)) is False, so the AND is False; False or False = False
    assert (t.expression, t.answer) == ("(55 <= 22) or ((not (78 > 33)) and (51 == 77))", "False")
    assert t.question == ("Is this statement true or false: (55 ≤ 22) OR ((NOT (78 > 33)) AND (51 = 77))? "
                          "Answer True or False.")


def test_every_answer_equals_the_verifiers_recomputation():
    tasks = generate_tasks(6000, seed=0) + generate_tasks(1500, seed=123)
    combos = collections.Counter((t.domain, t.difficulty) for t in tasks[:6000])
    assert set(combos) == {(d, k) for d in DOMAINS for k in LEVELS}
    assert set(combos.values()) == {6000 // 15}  # every (domain, difficulty) equally often
    for t in tasks:
        assert t.meta == {"domain": t.domain, "difficulty": t.difficulty, "expression": t.expression}
        assert recompute_answer(t.meta) == t.answer, t
        assert verify_task(t)
    logic = collections.Counter(t.answer for t in tasks if t.domain == "logic")
    assert set(logic) == {"True", "False"} and min(logic.values()) > 0.4 * sum(logic.values())  # both, balanced
    assert all(0 <= int(t.answer) for t in tasks if t.domain == "modular")


def test_difficulty_grows():
    tasks = generate_tasks(3000, seed=2)

    def mean_len(domain, d):
        return statistics.mean(len(t.expression) for t in tasks if t.domain == domain and t.difficulty == d)

    for domain in ("arithmetic", "logic"):  # longer expressions at every step
        lengths = [mean_len(domain, d) for d in LEVELS]
        assert lengths == sorted(lengths) and lengths[0] < lengths[-1] / 3, (domain, lengths)
    mod = {d: [t.expression for t in tasks if t.domain == "modular" and t.difficulty == d] for d in LEVELS}
    assert all("+" not in e and "*" not in e for e in mod[1])  # a mod m
    assert all("*" in e for e in mod[3]) and all("*" in e and "+" in e for e in mod[4])
    assert all(e.startswith("pow(") for e in mod[5])  # a^e mod m with e >= 10


def test_verifier_catches_a_wrong_answer_and_a_changed_expression():
    t = generate_task("arithmetic", 3, seed=0, index=5)
    wrong = HonestTask(t.id, t.question, str(int(t.answer) + 1), t.domain, t.difficulty, t.expression)
    assert verify_task(t) and not verify_task(wrong)
    assert not verify_task(HonestTask(t.id, t.question, t.answer, t.domain, t.difficulty, "1 +"))
    assert recompute_answer({"expression": "(3 + 4) * 2"}) == "14"  # what a mutator would do: recompute


@pytest.mark.parametrize("expr,value", [
    ("41 - 5", 36), ("(-3) * 4 + 2 ** 3", -4), ("7 % 3", 1), ("(-7) % 3", 2), ("pow(3, 4, 5)", 1),
    ("not (2 > 3) and (4 == 4)", True), ("(1 < 2) != (3 < 2)", True), ("(1 < 2) or (1 > 2)", True), ("True", True),
    ("5 - (3 - 1)", 3), ("5 - 3 - 1", 1),
])
def test_evaluator_values(expr, value):
    assert evaluate_expression(expr) == value and type(evaluate_expression(expr)) is type(value)


@pytest.mark.parametrize("expr", [
    "__import__('os').system('true')", "x + 1", "(1).__class__", "1 / 2", "7 // 2", "2 ** 100", "2 ** -1",
    "1 < 2 < 3", "True + 1", "not 3", "1 and 2", "5 % 0", "pow(2, 3)", "pow(2, 3, 0)", "abs(-3)", "'a'", "[1]",
    "1.5 + 1", "lambda: 1", "", "   ", "1 +", "(1 < 2) < 3", 7,
])
def test_evaluator_refuses_everything_else(expr):
    with pytest.raises(ValueError):
        evaluate_expression(expr)


def test_format_answer():
    assert (format_answer(True), format_answer(False), format_answer(-12)) == ("True", "False", "-12")
    with pytest.raises(ValueError):
        format_answer(1.5)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="domain"):
        generate_task("geometry", 1)
    for d in (0, 6, 2.0, True):
        with pytest.raises(ValueError, match="difficulty"):
            generate_task("logic", d)
    with pytest.raises(ValueError):
        generate_tasks(5, domains=[])
    with pytest.raises(ValueError):
        generate_tasks(5, min_difficulty=4, max_difficulty=2)
    assert {t.difficulty for t in generate_tasks(60, min_difficulty=2, max_difficulty=3)} == {2, 3}
    assert {t.domain for t in generate_tasks(60, domains=["logic"])} == {"logic"}


def test_split_is_disjoint_and_fails_clearly_when_it_cannot_be():
    train, held = split_honest_tasks(600, 150, seed=0)
    assert len(train) == 600 and len(held) == 150
    assert not {t.question for t in train} & {t.question for t in held}
    assert len({t.question for t in held}) == 150 and all(verify_task(t) for t in held)
    assert train == generate_tasks(600, seed=0)
    # "a mod m" at difficulty 1 has 90 * 8 = 720 questions: 2000 train tasks leave too few for 200 held out
    with pytest.raises(ValueError, match="held-out"):
        split_honest_tasks(2000, 200, domains=["modular"], min_difficulty=1, max_difficulty=1)


# -- wiring: data.train=honest_tasks, a text model ---------------------------------------------------------------
def test_load_examples_honest_tasks():
    from mmevo.config import load_config
    from mmevo.recipes import load_examples

    cfg = load_config(None, ["data.train=honest_tasks", "data.heldout=honest_tasks", "data.n_train=90",
                             "data.n_heldout=30", "honest.domains=[modular, logic]", "honest.min_difficulty=2",
                             "honest.seed=5"])
    train, stats = load_examples(cfg, "train")
    held, _ = load_examples(cfg, "heldout")
    assert stats == {"rows": 90, "loaded": 90, "skipped": 0} and len(held) == 30
    assert [(e.id, e.problem, e.answer) for e in train] == \
        [(t.id, t.question, t.answer) for t in generate_tasks(90, 5, ["modular", "logic"], 2, 5)]  # honest.seed
    for ex in train + held:
        assert ex.images == [] and ex.choices == [] and "<image>" not in ex.problem
        assert ex.meta["domain"] in ("modular", "logic") and 2 <= ex.meta["difficulty"] <= 5
        assert recompute_answer(ex.meta) == ex.answer
    assert not {e.problem for e in train} & {e.problem for e in held}
    from mmevo.config import ConfigError

    with pytest.raises(ConfigError, match="domains"):
        load_config(None, ["data.train=honest_tasks", "honest.domains=[geometry]"])
    with pytest.raises(ConfigError, match="difficulty"):
        load_config(None, ["data.train=honest_tasks", "honest.max_difficulty=6"])


def test_prompts_encode_with_the_tiny_text_model(tiny_text_path):
    from mmevo.config import load_config
    from mmevo.grpo.trainer import PromptCache
    from mmevo.models.loader import load_model
    from mmevo.recipes import load_examples

    cfg = load_config(None, ["data.train=honest_tasks", "data.n_train=15", "honest.hindsight_mode=refined"])
    lm = load_model(str(tiny_text_path), "float32", "cpu")
    assert not lm.is_vl
    cache = PromptCache(lm.processor, lm.is_vl, cfg.data.prompt_template, cfg.data.system_prompt)
    for ex in load_examples(cfg, "train")[0]:
        text = lm.tokenizer.decode(list(cache(ex).input_ids))
        assert ex.problem in text and "<refined_confidence>" in text and "\\boxed" not in text
