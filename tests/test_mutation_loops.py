"""Mutation round on the HONEST loops (CPR replay, SMC curriculum and mutators, calibration report, task generator)
and Prism's cluster assignment: each test kills a mutant that the rest of the suite let through. Expected values come
from the seeds' equations or the documented rules, worked by hand in the comments."""

import math
import random
import types

import pytest
import torch

from mmevo.honest.replay import GroupOutcome, ReplayBuffer, ReplayMixSource, group_outcomes, replay_write_back

from test_honest_replay import EXAMPLES, filled as _buffer  # EXAMPLES[i] at (confidence, correct) = stats[i]


# -- CPR replay (seed 3) -------------------------------------------------------------------------------------------
def test_entropy_ignores_zero_probability_entries():
    # eps = 0, alpha = 1: errors 0, 0.5, 0.5 -> p = [0, 0.5, 0.5]; H = -2 * 0.5 * log 0.5 = log 2 (0 log 0 := 0,
    # never NaN)
    buf = _buffer([(1.0, True), (0.5, True), (0.5, False)], alpha=1.0, eps=0.0)
    assert buf.probabilities().tolist() == pytest.approx([0.0, 0.5, 0.5])
    assert buf.entropy_of_priorities() == pytest.approx(math.log(2))


def test_snapshot_accuracy_is_the_share_of_correct_entries():
    # y = True, False, True -> accuracy 2/3; errors |c - y| = 0.1, 0.2, 0.3 -> mean 0.2; confidences mean 0.6
    snap = _buffer([(0.9, True), (0.2, False), (0.7, True)]).snapshot()
    assert snap["accuracy"] == pytest.approx(2 / 3)
    assert snap["error_mean"] == pytest.approx(0.2)
    assert snap["confidence_mean"] == pytest.approx(0.6)


def test_underflowed_priorities_fall_back_to_log_space_not_uniform():
    # eps = 0, alpha = 2000: errors 0, 0.5, 0.4 -> 0.5^2000 and 0.4^2000 underflow to 0 in float64, so the sum is 0;
    # the ratios are still defined: p ∝ (0, 0.5^2000, 0.4^2000) and 0.4^2000 / 0.5^2000 = 0.8^2000 ≈ 1e-194, so the
    # second entry takes all the mass (uniform 1/3 each would ignore the priorities)
    buf = _buffer([(1.0, True), (0.5, True), (0.6, True)], alpha=2000.0, eps=0.0)
    p = buf.probabilities().tolist()
    assert p[0] == 0.0 and p[1] == pytest.approx(1.0) and p[2] < 1e-100


def test_group_outcome_replay_label_uses_only_graded_confident_samples():
    # one group: sample 0 stated 0.9 but has no grade, sample 1 stated 0.8 and is right. The replay's y is the
    # majority over graded samples that stated a confidence: [True] -> True (an ungraded sample is no "wrong")
    aux = [{"correct": None, "confidence": 0.9}, {"correct": True, "confidence": 0.8}]
    (o,) = group_outcomes(torch.tensor([0, 0]), aux)
    assert o.confident_correct is True and o.n_graded == 1 and o.correct is True
    assert o.confidence == pytest.approx(0.85)


def test_write_back_skips_a_group_without_a_confident_graded_sample():
    # graded (correct = True) and a mean confidence, but no sample that is both: no (c, y) pair, skipped as
    # no-confidence (never buffer.add(..., None))
    buf = ReplayBuffer()
    rollout = types.SimpleNamespace(examples=[EXAMPLES[0]])
    out = replay_write_back(buf, rollout, [GroupOutcome(first=0, n=2, n_graded=1, n_correct=1, correct=True,
                                                        confidence=0.7, confident_correct=None)])
    assert out["replay/written"] == 0.0 and out["replay/skipped_no_confidence"] == 1.0 and len(buf) == 0


class _Base:
    def __init__(self):
        self.i = 0

    def take(self, k):
        out = EXAMPLES[self.i:self.i + k]
        self.i += k
        return out

    def state_dict(self):
        return {"i": self.i}

    def load_state_dict(self, s):
        self.i = s["i"]


def test_mix_source_restores_a_switched_off_guardrail():
    # the entropy guardrail switched the mix off; a resume must keep it off (not silently re-enable replay)
    src = ReplayMixSource(_Base(), _buffer([(0.9, False)]), warmup_steps=0)
    src.enabled = False
    state = src.state_dict()
    fresh = ReplayMixSource(_Base(), ReplayBuffer(), warmup_steps=0)
    fresh.load_state_dict(state)
    assert fresh.enabled is False and not fresh.active()


# -- SMC curriculum (seed 4) ---------------------------------------------------------------------------------------
from mmevo.honest.curriculum import PROMOTE, CurriculumSource, DifficultyController  # noqa: E402
from mmevo.honest.tasks import generate_task  # noqa: E402


def _controller(**kw):
    args = {"domains": ["arithmetic", "logic"], "start": 5, "cap": 8, "window": 20, "promote": 0.75, "demote": 0.20,
            "min_episodes": 20, "cooldown": 10}
    args.update(kw)
    return DifficultyController(**args)


def test_promotion_starts_the_new_ceiling_with_an_empty_window():
    # 20 right answers at difficulty 6 while the ceiling is 5 (e.g. left over from before a demotion), then 20 at 5:
    # the promotion to 6 must not count the old d6 outcomes ("only episodes at the new ceiling count")
    c = _controller()
    for _ in range(20):
        c.record("arithmetic", 6, True)
    assert c.ceiling("arithmetic") == 5
    changes = [c.record("arithmetic", 5, True) for _ in range(20)]
    assert changes[-1] == PROMOTE and c.ceiling("arithmetic") == 6
    assert c.episodes_at_ceiling("arithmetic") == 0 and c.rolling_accuracy("arithmetic") is None
    # one more right answer at 6 is 1 episode of 20, far from a second promotion
    assert c.record("arithmetic", 6, True) is None and c.ceiling("arithmetic") == 6


def test_domain_accuracy_metric_is_rolling_over_recorded_episodes():
    # arithmetic: right, wrong, right (any difficulty) -> 2/3; logic: wrong -> 0.0
    c = _controller()
    c.record("arithmetic", 5, True)
    c.record("arithmetic", 3, False)
    c.record("arithmetic", 1, True)
    c.record("logic", 5, False)
    m = c.metrics()
    assert m["difficulty/arithmetic/accuracy"] == pytest.approx(2 / 3)
    assert m["difficulty/logic/accuracy"] == 0.0


def _as_difficulty(task, d):
    ex = task.to_example()
    ex.meta["difficulty"] = d
    return ex


def test_pool_rows_outside_difficulty_1_to_5_are_skipped():
    # a verifiable row labelled difficulty 6 is no generator task (d > 5 exist only as mutation chains): skipped
    t = generate_task("arithmetic", 5, index=0)
    src = CurriculumSource(_controller(), pool=[_as_difficulty(t, 6), t.to_example()])
    assert src.pool_skipped == 1 and src.pool_size == 1


def test_pool_draws_are_random_within_a_cell():
    pool = [generate_task("arithmetic", 2, index=i).to_example() for i in range(5)]
    src = CurriculumSource(_controller(), pool=pool, seed=0)
    ids = {src.task("arithmetic", 2).id for _ in range(60)}
    # uniform over 5 tasks, 60 draws: P(some task never drawn) <= 5 * 0.8^60 < 1e-5
    assert ids == {ex.id for ex in pool}


def test_generator_draws_advance_the_stream_index():
    # no pool: the cell's draws are generate_task(..., index=0, 1, 2, stream="smc"), ids "smc-arithmetic-d5-<i>"
    src = CurriculumSource(_controller(), seed=0)
    got = [src.task("arithmetic", 5).id for _ in range(3)]
    assert got == ["smc-arithmetic-d5-0", "smc-arithmetic-d5-1", "smc-arithmetic-d5-2"]


def test_pool_rows_of_other_domains_are_neither_pool_nor_skipped():
    # the controller runs arithmetic only: a logic row is not drawn, not counted as pool, not counted as skipped
    src = CurriculumSource(_controller(domains=["arithmetic"]),
                           pool=[generate_task("logic", 3).to_example(), generate_task("arithmetic", 3).to_example()])
    assert src.pool_size == 1 and src.pool_skipped == 0


def test_below_ceiling_draws_reach_the_minimum_difficulty():
    # ceiling_share 0: every draw is uniform in [min_difficulty, ceiling - 1]; with ceiling 2 and minimum 1 that is
    # always 1 (the ceiling itself is only drawn when it equals the minimum)
    src = CurriculumSource(_controller(domains=["arithmetic"], start=2), min_difficulty=1, ceiling_share=0.0)
    assert [ex.meta["difficulty"] for ex in src.take(6)] == [1] * 6
    src = CurriculumSource(_controller(domains=["arithmetic"], start=1), min_difficulty=1, ceiling_share=0.0)
    assert [ex.meta["difficulty"] for ex in src.take(3)] == [1] * 3


# -- SMC mutators (seed 4.2) ---------------------------------------------------------------------------------------
from mmevo.honest.mutators import PRIMES, Var, _substitutable  # noqa: E402


def test_numeric_factors_are_the_primes_7_to_97():
    # seed 4.2.1: "s ∈ {7, 11, 13, …, 97} (small primes ...)": every prime in [7, 97], by trial division
    primes = [p for p in range(7, 98) if all(p % q for q in range(2, p))]
    assert list(PRIMES) == primes


def test_compositional_spots_are_plain_numbers_or_comparisons_only():
    # want_bool=False: integer leaves only, never an existing variable (X) and never a comparison node itself
    assert _substitutable(("+", Var("X"), 3), want_bool=False) == [(2,)]
    assert _substitutable(("<", 1, 2), want_bool=False) == [(1,), (2,)]
    # want_bool=True: the comparison node, never its numbers
    assert _substitutable(("and", ("<", 1, 2), ("==", 3, 3)), want_bool=True) == [(1,), (2,)]
    # exponents and moduli are never replaced: 2 ** 3 -> the base only; 7 % 5 -> 7 only; pow(2, 3, 5) -> 2 only
    assert _substitutable(("**", 2, 3), want_bool=False) == [(1,)]
    assert _substitutable(("%", 7, 5), want_bool=False) == [(1,)]
    assert _substitutable(("pow3", 2, 3, 5), want_bool=False) == [(1,)]


from mmevo.honest.mutators import MutatedTask, compositional_mutator  # noqa: E402
from mmevo.honest.tasks import verify_task  # noqa: E402


def _mutated(id, bindings, body, preface="", domain="arithmetic", difficulty=6):
    return MutatedTask(id=id, question=f"question {id}", answer="0", domain=domain, difficulty=difficulty,
                       expression="0", preface=preface, bindings=tuple(bindings), body=body, mutations=("numeric",))


def test_compositional_renames_partner_bindings_and_keeps_both_prefaces():
    # P2: X = 4, body X * 5. P1 (the partner): X = 2, body X + 1 (value 3), prose "P1 prose.".
    # P2 uses X, so P1's X moves to the first free name Y, and P1's value is bound to the next one, Z:
    #   Y = 2, Z = Y + 1, X = 4 (or Z), body X * 5 (or X * Z)
    # the number replaced is either P2's 4 (X = Z: 3 * 5 = 15) or its 5 (X * Z = 4 * 3 = 12)
    p2 = _mutated("p2", [("X", "4")], "X * 5", preface="P2 prose.")
    p1 = _mutated("p1", [("X", "2")], "X + 1", preface="P1 prose.")
    child = compositional_mutator(p2, random.Random(0), partner=lambda: p1)
    names = [n for n, _ in child.bindings]
    assert names == ["Y", "Z", "X"]
    assert child.bindings[:2] == (("Y", "2"), ("Z", "Y + 1"))
    assert child.answer in ("12", "15") and verify_task(child)
    assert child.preface == "P1 prose. P2 prose." and child.question.startswith("P1 prose. P2 prose. Let Y = 2.")


def test_compositional_refuses_a_partner_of_another_difficulty_or_out_of_names():
    t5 = _mutated("a", [], "3 + 4", difficulty=5)
    t4 = _mutated("b", [], "1 + 2", difficulty=4)
    with pytest.raises(ValueError):
        compositional_mutator(t5, random.Random(0), partner=lambda: t4)
    # 25 of the 26 names taken by P2 and a partner with one binding: P1's binding takes the last free name and its
    # value has none left -> "out of variable names" (a ValueError, not an IndexError)
    names25 = "XYZWVUTSRQPONMLKJIHGFEDCB"
    p2 = _mutated("p2", [(n, "1") for n in names25], "X + 1")
    p1 = _mutated("p1", [("X", "2")], "X + 3")
    with pytest.raises(ValueError, match="out of variable names"):
        compositional_mutator(p2, random.Random(0), partner=lambda: p1)


def test_expression_tree_reads_a_negated_group_as_zero_minus_it():
    from mmevo.honest.mutators import expression_tree
    from mmevo.honest.tasks import _render, _value, evaluate_expression

    # -(2 + 3) has no negation node in the tree grammar: it is 0 - (2 + 3) = -5 (not (2 + 3) - 0 = 5)
    tree = expression_tree("-(2 + 3)")
    assert tree == ("-", 0, ("+", 2, 3))
    assert _value(tree) == -5 and evaluate_expression(_render(tree, python=True)) == -5
    # Python's -2 ** 2 is -(2 ** 2) = -4
    assert _value(expression_tree("-2 ** 2")) == -4


# -- calibration report (seed 8) -----------------------------------------------------------------------------------
def test_pillar_bar_has_no_more_than_rounding_slack():
    from mmevo.honest.calibration import pillar_works

    # seed 8: a pillar works if Delta ECE <= -0.01. Delta = 0.2905 - 0.30 = -0.0095 misses the bar; -0.011 passes
    assert not pillar_works(0.30, 0.2905)
    assert not pillar_works(0.30, 0.29999)
    assert pillar_works(0.30, 0.289)


def test_reliability_bin_edges_are_b_over_10_to_b_plus_1_over_10():
    from mmevo.honest.calibration import reliability_bins

    # 10 equal-width bins of [0, 1]: bin b spans [b/10, (b+1)/10); 0.05 falls in bin 0, 1.0 in the last
    bins = reliability_bins([0.05, 1.0], [True, False])
    assert [(b["lo"], b["hi"]) for b in bins] == [pytest.approx((b / 10, (b + 1) / 10)) for b in range(10)]
    assert bins[0]["count"] == 1 and bins[0]["accuracy"] == 1.0 and bins[0]["mean_confidence"] == pytest.approx(0.05)
    assert bins[9]["count"] == 1 and bins[9]["accuracy"] == 0.0


def test_breakdown_mean_confidence_is_over_graded_responses_only():
    from mmevo.honest.calibration import calibration_report
    from mmevo.honest.protocol import format_response

    # arithmetic: a right answer at 0.8 and an abstain (no confidence): mean confidence 0.8 (not 0.8 / 2),
    # accuracy 1 / 2, both well formed
    recs = [{"response": format_response("2 + 2 = 4", "4", 0.8), "gold": "4", "domain": "arithmetic"},
            {"response": format_response("not sure", abstain=True), "gold": "4", "domain": "arithmetic"}]
    by = calibration_report(recs)["by"]["domain"]["arithmetic"]
    assert by["n"] == 2 and by["accuracy"] == 0.5 and by["well_formed_rate"] == 1.0
    assert by["mean_confidence"] == pytest.approx(0.8)


def test_hindsight_audit_refuses_a_null_share(tmp_path):
    import json

    from mmevo.honest.calibration import hindsight_audit

    # the share must be a number in [0, 1]; only the fired count may be missing / null (read as 0)
    f = tmp_path / "metrics.jsonl"
    f.write_text(json.dumps({"step": 1, "reward/honest_hindsight/nonzero_frac": None}) + "\n")
    with pytest.raises(ValueError, match="nonzero_frac"):
        hindsight_audit(f)
    f.write_text(json.dumps({"step": 1, "reward/honest_hindsight/nonzero_frac": 0.5,
                             "reward/honest_hindsight/fired": None}) + "\n")
    out = hindsight_audit(f)
    assert out["nonzero_steps"] == 1 and out["fired_steps"] == 0


# -- task rendering: the Python text must read back as the same tree ------------------------------------------------
def test_render_brackets_mod_and_nested_comparisons():
    from mmevo.honest.tasks import _render, _value, evaluate_expression

    # 10 * (7 % 4) = 10 * 3 = 30; unbracketed "10 * 7 % 4" would be (10 * 7) % 4 = 2
    tree = ("*", 10, ("%", 7, 4))
    assert _value(tree) == 30 and evaluate_expression(_render(tree, python=True)) == 30
    # the question text brackets a mod under + for the reader: "(47 mod 32) + 13"
    assert _render(("+", ("%", 47, 32), 13), python=False) == "(47 mod 32) + 13"
    # (1 < 2) == True is True; "1 < 2 == True" would be a chained comparison (and False)
    tree = ("==", ("<", 1, 2), True)
    assert _value(tree) is True and evaluate_expression(_render(tree, python=True)) is True


def test_render_brackets_powers_and_negative_leaves():
    from mmevo.honest.tasks import _render, _value, evaluate_expression

    # (2 ** 3) ** 2 = 64; "2 ** 3 ** 2" is 2 ** 9 = 512 (** associates to the right)
    tree = ("**", ("**", 2, 3), 2)
    assert _value(tree) == 64 and evaluate_expression(_render(tree, python=True)) == 64
    # (-5) ** 2 = 25; "-5 ** 2" is -(5 ** 2) = -25
    tree = ("**", -5, 2)
    assert evaluate_expression(_render(tree, python=True)) == 25
    assert _render(tree, python=False) == "(-5)^2"


def test_only_difficulty_5_arithmetic_has_the_squared_leaf():
    from mmevo.honest.tasks import generate_task

    # levels: d4 = 4 operators from + - * ; d5 = 5 of them plus one leaf squared (a ** 2 term)
    assert not any("**" in generate_task("arithmetic", 4, index=i).expression for i in range(20))
    assert all(generate_task("arithmetic", 5, index=i).expression.count("**") == 1 for i in range(20))


def test_logic_comparison_counts_and_equal_sides():
    import ast

    from mmevo.honest.tasks import generate_task

    def n_compare(expr):
        return sum(isinstance(n, ast.Compare) for n in ast.walk(ast.parse(expr, mode="eval")))

    # comparisons per logic task: d3 3, d4 3, d5 4
    for d, k in ((3, 3), (4, 3), (5, 4)):
        assert all(n_compare(generate_task("logic", d, index=i).expression) == k for i in range(10)), d
    # d1: one comparison of two ints in 0..99, made equal-sided 20% of the time (+ 0.8% by chance): ~40 of 200
    # (sd ~6); without the rule ~2
    same = 0
    for i in range(200):
        cmp = ast.parse(generate_task("logic", 1, index=i).expression, mode="eval").body
        same += ast.literal_eval(cmp.left) == ast.literal_eval(cmp.comparators[0])
    assert 15 <= same <= 70


def test_verifier_bounds_magnitude_and_refuses_ordering_booleans():
    from mmevo.honest.tasks import evaluate_expression

    assert evaluate_expression("10 ** 60") == 10 ** 60  # at the bound
    with pytest.raises(ValueError):
        evaluate_expression("10 ** 61")  # any intermediate above 10^60
    assert evaluate_expression("(1 < 2) == True") is True  # == / != on booleans is fine
    with pytest.raises(ValueError):
        evaluate_expression("True < False")  # ordering booleans is not
    assert evaluate_expression("pow(2, 1000000, 7)") == pow(2, 10 ** 6, 7)  # modpow exponent at its bound 10^6
    with pytest.raises(ValueError):
        evaluate_expression("pow(2, 1000001, 7)")


def test_logic_difficulty_4_compares_small_sums():
    import ast

    from mmevo.honest.tasks import generate_task

    # from d4 each side is a leaf in 1..30 or one + / - of two such leaves (d1-3: plain ints in 0..99)
    nums, binops = [], 0
    for i in range(20):
        tree = ast.parse(generate_task("logic", 4, index=i).expression, mode="eval")
        nums += [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is int]
        binops += sum(isinstance(n, ast.BinOp) for n in ast.walk(tree))
    assert nums and all(1 <= v <= 30 for v in nums) and binops > 0


# -- Prism cluster space corpus ------------------------------------------------------------------------------------
def test_read_corpus_prefers_problem_and_writes_whole_float_answers_as_integers(tmp_path):
    import json

    from mmevo.prism.clusters import read_corpus

    rows = [{"problem": "P text", "question": "Q text", "answer": 72.0},  # problem first; 72.0 is "72"
            {"question": "Only a question", "answer": 2.5},  # a non-integer float stays "2.5"
            {"question": "GSM8K style", "answer": "work ... #### 1,234"}]  # "1234"
    f = tmp_path / "corpus.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    corpus = read_corpus(f)
    assert corpus.questions == ["P text", "Only a question", "GSM8K style"]
    assert corpus.answers == ["72", "2.5", "1234"]


class _Batch(dict):
    def to(self, device):
        return self


def _fake_embedder(pooling, hidden, mask):
    from mmevo.prism.clusters import SentenceEmbedder

    emb = SentenceEmbedder.__new__(SentenceEmbedder)  # no model load: a tokenizer and an encoder that return fixed
    emb.pooling, emb.batch_size, emb.device, emb.max_length, emb.dim = pooling, 8, "cpu", 16, hidden.shape[-1]
    emb.tokenizer = lambda texts, **kw: _Batch(attention_mask=mask)
    emb.model = lambda **batch: types.SimpleNamespace(last_hidden_state=hidden)
    return emb


# row 0 is left-padded (mask 0 1 1), row 1 right-padded (mask 1 1 0); padding positions hold (9, -9) / (5, -5)
_HIDDEN = torch.tensor([[[9.0, -9.0], [1.0, 0.0], [0.0, 1.0]],
                        [[1.0, 0.0], [0.0, 1.0], [5.0, -5.0]]])
_MASK = torch.tensor([[0, 1, 1], [1, 1, 0]])
_R = 2 ** -0.5


@pytest.mark.parametrize("pooling, expected", [
    # last real token: row 0 position 2 -> (0, 1); row 1 position 1 -> (0, 1), whichever side is padded
    ("lasttoken", [[0.0, 1.0], [0.0, 1.0]]),
    # first position: row 1 (right-padded) -> (1, 0)
    ("cls", [[_R, -_R], [1.0, 0.0]]),
    # max over real tokens only: (1, 0) and (0, 1) -> (1, 1) / sqrt 2 in both rows; the padding never wins
    ("max", [[_R, _R], [_R, _R]]),
])
def test_sentence_embedder_pooling_values(pooling, expected):
    out = _fake_embedder(pooling, _HIDDEN, _MASK).embed(["a", "b"])
    assert out.tolist() == [pytest.approx(row, abs=1e-6) for row in expected]
