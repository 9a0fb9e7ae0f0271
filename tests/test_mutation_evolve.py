"""Mutation round on the loops' selection / labelling logic (``mmevo.evolve.mmzero`` and ``mmevo.evolve.prism``):
each test kills mutants that the rest of the suite let through. Expected values come from the rules in the seeds and
the MM-Zero code facts (proposals kept for the coder when render success is in [0.25, 0.75] over N = 4 renders; the
solver trained on (image, hard question) pairs with hard consistency in [0.25, 0.75], the hard-question majority as
silver label, 0.9 * accuracy + 0.1 * format), worked out by hand in the comments."""

import json
from types import SimpleNamespace

import pytest
from PIL import Image

from mmevo.config import load_config
from mmevo.evolve.mmzero import Proposal, coder_train_set, role_config, solver_train_set


def _proposal(k):
    return Proposal("table", f"Caption {k}.", f"Easy {k}?", "1", f"Hard {k}?", "hard-gold")


def _coder_row(k, oks):
    return {"valid": True, "proposal": _proposal(k).__dict__,
            "renders": [{"ok": ok, "consistency": 0.5, "silver": "x" if ok else None, "image": None} for ok in oks]}


# -- coder phase: render success over the N = 4 attempts in the closed band [0.25, 0.75] --------------------------------
def test_coder_set_keeps_exactly_the_render_success_band_over_four_attempts():
    T, F = True, False
    rows = [_coder_row(0, [F, F, F, F]),  # 0/4 = 0.00: out
            _coder_row(1, [T, F, F, F]),  # 1/4 = 0.25: in (lower edge)
            _coder_row(2, [T, F, T, F]),  # 2/4 = 0.50: in
            _coder_row(3, [T, T, F, T]),  # 3/4 = 0.75: in (upper edge)
            _coder_row(4, [T, T, T, T])]  # 4/4 = 1.00: out
    kept = coder_train_set(rows, 0.25, 0.75, "svg")
    assert [ex.meta["proposal"]["caption"] for ex in kept] == ["Caption 1.", "Caption 2.", "Caption 3."]


# -- solver phase ---------------------------------------------------------------------------------------------------
def _solver_dir(root, rows, name="phase"):
    """A phase directory with one record file; every render that has an image gets its own PNG (8+k x 8)."""
    d = root / name
    (d / "records").mkdir(parents=True)
    (d / "images").mkdir()
    k = 0
    for row in rows:
        for r in row.get("renders", []):
            if r.get("image"):
                Image.new("RGB", (8 + k, 8), "white").save(d / r["image"])
                k += 1
    (d / "records" / "step_0000.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def _render(name, c, silver="7", ok=True):
    return {"ok": ok, "consistency": c, "silver": silver, "image": f"images/{name}.png" if ok else None}


def _row(renders, k=0, valid=True):
    return {"valid": valid, "proposal": _proposal(k).__dict__, "renders": renders}


def test_solver_set_keeps_the_closed_consistency_band_per_image(tmp_path):
    # every render has its own image, so each is judged on its own (no de-duplication can hide a wrong keep)
    cs = [0.0, 0.2, 0.25, 0.5, 0.75, 0.8, 1.0]
    d = _solver_dir(tmp_path, [_row([_render(f"r{k}", c) for k, c in enumerate(cs)])])
    kept = solver_train_set([d], 0.25, 0.75, 0, 0)
    assert [ex.meta["consistency"] for ex in kept] == [0.25, 0.5, 0.75]  # 0.25 <= c <= 0.75, both edges included


def test_solver_set_labels_with_the_majority_not_the_proposers_answer(tmp_path):
    # the proposal says "hard-gold"; the frozen solver's majority on each image is the silver label
    d = _solver_dir(tmp_path, [_row([_render("a", 0.5, silver="12"), _render("b", 0.5, silver="13")])])
    kept = solver_train_set([d], 0.25, 0.75, 0, 0)
    assert [ex.answer for ex in kept] == ["12", "13"]
    assert all(ex.problem == "<image>Hard 0?" for ex in kept)  # the hard question, not the easy one


def test_solver_set_drops_failed_unanswered_and_invalid_rows(tmp_path):
    rows = [_row([_render("a", 0.5, silver=None),       # nobody answered: no majority, no label -> out
                  _render("b", 0.5, ok=False),           # failed render -> out
                  {"ok": False, "consistency": 0.5, "silver": "7", "image": "images/c.png"},  # not executed -> out
                  _render("d", 0.5)]),                   # the only one kept
            _row([_render("e", 0.5)], k=1, valid=False)]  # an invalid proposal's row -> out
    d = _solver_dir(tmp_path, rows)
    kept = solver_train_set([d], 0.25, 0.75, 0, 0)
    assert len(kept) == 1 and kept[0].answer == "7"
    # PNGs written in order a (8 px wide), c (9), d (10), e (11): the kept one is d
    assert kept[0].images[0].size == (10, 8)


def test_solver_set_keeps_two_images_of_one_question_and_one_copy_of_a_repeat(tmp_path):
    # the same hard question drawn twice is two training pairs; the same image recorded twice (a re-run step) is one
    rows = [_row([_render("a", 0.5), _render("b", 0.5)]), _row([_render("a", 0.5)])]
    d = _solver_dir(tmp_path, rows)
    kept = solver_train_set([d], 0.25, 0.75, 0, 0)
    assert len(kept) == 2 and len({ex.id for ex in kept}) == 2


# -- role configs ---------------------------------------------------------------------------------------------------
def test_solver_role_defaults_to_accuracy_0_9_plus_format_0_1(tmp_path):
    rc = role_config(load_config(None, []), "solver", tmp_path, "m")
    assert rc.reward.heads == {"accuracy": 0.9, "format": 0.1}


# -- a fake sandbox: every job renders an 8 x 8 white PNG -------------------------------------------------------------
class _Pool:
    def render_many(self, jobs, timeout_s=10):
        import io

        from render.types import RenderResult

        b = io.BytesIO()
        Image.new("RGB", (8, 8), "white").save(b, format="PNG")
        return [RenderResult(True, b.getvalue()) for _ in jobs]


# -- step metrics of the MM-Zero strategies -------------------------------------------------------------------------
def test_render_metrics_rates_over_their_own_denominators():
    from mmevo.evolve.mmzero import RenderedImage, render_metrics

    renders = [RenderedImage(True, easy=1.0, consistency=0.5), RenderedImage(True, easy=0.5, consistency=1.0),
               RenderedImage(False, "timeout"), RenderedImage(False, "no_code")]
    # render success over all 4 attempts = 2/4; easy accuracy and consistency over the 2 executed ones:
    # (1.0 + 0.5) / 2 = 0.75 and (0.5 + 1.0) / 2 = 0.75
    assert render_metrics(renders) == {"mmzero/render_success": 0.5, "mmzero/easy_accuracy": 0.75,
                                       "mmzero/consistency": 0.75, "mmzero/render_error/no_code": 1,
                                       "mmzero/render_error/timeout": 1}
    # the coder phase's strategy does not judge the easy / hard rates (judged=False): only success and failures
    assert render_metrics(renders, judged=False) == {"mmzero/render_success": 0.5, "mmzero/render_error/no_code": 1,
                                                     "mmzero/render_error/timeout": 1}


class _Scripted:
    def __init__(self, script):
        self.script = script

    def sample(self, exs, n, seed):
        return [self.script(ex) for ex in exs]


class _Coder:
    """A frozen coder that writes as many programs as it is asked for (n)."""

    def sample(self, exs, n, seed):
        return [["```svg\n<svg/>\n```"] * n for _ in exs]


def _text(content_type, k, easy_q, hard_q):
    return (f"<content_type>{content_type}</content_type><caption>Picture {k}.</caption><easy_question>{easy_q}"
            f"</easy_question><easy_answer>3</easy_answer><hard_question>{hard_q}</hard_question>"
            f"<hard_answer>6</hard_answer>")


def test_proposer_step_aux_and_recorded_penalties(monkeypatch, tmp_path):
    import torch

    from mmevo.evolve import mmzero
    from mmevo.evolve.mmzero import Judge, ProposerStrategy, Recorder
    from mmevo.rollout.base import Completion
    from mmevo.rollout.strategy import Rollout

    texts = ["no tags at all"] + [_text("table", k, "What is x?", "What is 2x?") for k in range(3)] + \
        [_text("map", 9, "How many bridges?", "Which bridge is north?")]

    def solver(ex):  # easy question: 2 of 4 say the easy answer 3 -> s = 0.5; hard: all say 6 -> c = 1.0
        easy = ex.problem.endswith(("What is x?", "How many bridges?"))
        return ["\\boxed{3}", "\\boxed{3}", "\\boxed{4}", "\\boxed{4}"] if easy else ["\\boxed{6}"] * 4

    judge = Judge(_Pool(), _Scripted(solver), 4, 1.0, min_pixels=0, max_pixels=0)
    strategy = ProposerStrategy(_Coder(), judge, 2, Recorder(tmp_path), "svg",
                                {"threshold": 0.15, "penalty": 0.3, "type_weight": 0.15})
    n = len(texts)
    ro = Rollout([None] * n, [Completion([1], [0.0], "stop") for _ in texts], list(texts),
                 torch.arange(n), [None] * n)
    monkeypatch.setattr(mmzero, "sample_groups", lambda ctx, examples: ro)
    ro = strategy.rollout(SimpleNamespace(seed=0, step=0), [])
    assert [a["valid"] for a in ro.aux] == [False, True, True, True, True]
    for a in ro.aux[1:]:  # N = 2 attempts asked of the coder for each, both rendered: s and c per attempt, each in its own field
        assert a["executed"] == [True, True] and a["easy"] == [0.5, 0.5] and a["consistency"] == [1.0, 1.0]
    # no head recorded penalties in aux: the strategy computes them. Easy-hard: mean min(c, 1 - c) = 0 < 0.15 -> -0.3
    # for all; type: 3 of the 4 valid proposals are tables, f = 0.75 -> -0.15 * (0.75 - 0.5) / 0.5 = -0.075, the map
    # (f = 0.25) 0. The record keeps their sum for the coder phase: tables -0.375, map -0.3
    strategy.after_rewards(ro, torch.zeros(n))
    rows = Recorder.read(tmp_path)
    assert "penalties" not in rows[0]
    assert [row["penalties"] for row in rows[1:]] == pytest.approx([-0.375, -0.375, -0.375, -0.3])


def test_coder_step_aux_carries_the_proposals_penalties(monkeypatch, tmp_path):
    import torch

    from mmevo.evolve import mmzero
    from mmevo.evolve.mmzero import CoderStrategy, Judge, Recorder, coder_example, parse_proposal
    from mmevo.rollout.base import Completion
    from mmevo.rollout.strategy import Rollout

    ex = coder_example(parse_proposal(_text("table", 0, "What is x?", "What is 2x?"))[0], "svg")
    ex.meta["penalties"] = -0.375  # what the proposer phase recorded for it

    def solver(q):  # easy: 3 of 4 say 3 -> s = 0.75; hard: 6, 6, 5, 5 -> c = 0.5
        if q.problem.endswith("What is x?"):
            return ["\\boxed{3}"] * 3 + ["\\boxed{4}"]
        return ["\\boxed{6}", "\\boxed{6}", "\\boxed{5}", "\\boxed{5}"]

    judge = Judge(_Pool(), _Scripted(solver), 4, 1.0, min_pixels=0, max_pixels=0)
    texts = ["```svg\n<svg/>\n```", "no code"]
    ro = Rollout([None] * 2, [Completion([1], [0.0], "stop") for _ in texts], texts, torch.zeros(2, dtype=torch.long),
                 [ex, ex])
    monkeypatch.setattr(mmzero, "sample_groups", lambda ctx, examples: ro)
    ro = CoderStrategy(judge, Recorder(tmp_path)).rollout(SimpleNamespace(seed=0, step=0), [])
    # the coder reward reads these: 1 + s + min(c, 1 - c) + penalties = 1 + 0.75 + 0.5 - 0.375 for the render
    assert ro.aux == [{"rendered": True, "easy": 0.75, "consistency": 0.5, "penalties": -0.375},
                      {"rendered": False, "easy": 0.0, "consistency": 0.0, "penalties": -0.375}]


# -- parsing --------------------------------------------------------------------------------------------------------
def test_a_field_of_exactly_max_field_chars_is_valid_one_more_is_not():
    from mmevo.evolve.mmzero import MAX_FIELD_CHARS, parse_proposal

    def with_caption(n):
        return _text("table", 0, "What is x?", "What is 2x?").replace("Picture 0.", "c" * n)

    p, why = parse_proposal(with_caption(MAX_FIELD_CHARS))  # at most MAX_FIELD_CHARS: the bound itself is allowed
    assert why == "" and len(p.caption) == MAX_FIELD_CHARS
    assert parse_proposal(with_caption(MAX_FIELD_CHARS + 1)) == (None, "bad <caption> value")


def test_an_html_fence_is_svg_even_without_an_svg_tag():
    from mmevo.evolve.mmzero import extract_code

    # labels svg / xml / html -> svg; only an unlabelled fence is decided by "<svg" in its code
    assert extract_code("```html\n<rect width='1'/>\n```") == ("svg", "<rect width='1'/>")
    assert extract_code("```xml\n<rect/>\n```") == ("svg", "<rect/>")
    assert extract_code("```\n<rect/>\n```") == ("python", "<rect/>")


def test_role_configs_carry_the_loop_keys(tmp_path):
    cfg = load_config(None, ["mmzero.easy_hard_threshold=0.2", "mmzero.easy_hard_penalty=0.4", "mmzero.phase_steps=3"])
    p = role_config(cfg, "proposer", tmp_path, "m")
    args = p.reward.head_args["mmzero_proposer"]
    assert args["threshold"] == 0.2 and args["penalty"] == 0.4
    assert p.trainer.steps == 3 and not p.data.hide_labels
    c = role_config(cfg, "coder", tmp_path, "m")
    assert c.trainer.steps == 3 and not c.data.hide_labels and c.reward.heads == {"mmzero_coder": 1.0}


def test_prism_solver_role_is_label_free_majority(tmp_path):
    from mmevo.evolve.prism import role_config as prism_role_config

    rc = prism_role_config(load_config(None, []), "solver", tmp_path, "m")
    assert rc.reward.heads == {"majority": 1.0} and rc.data.hide_labels  # the loop has no gold answers


def test_prism_pool_file_reads_back_label_free(tmp_path):
    from mmevo.evolve.prism import read_pool

    path = tmp_path / "pool.jsonl"
    path.write_text(json.dumps({"question": "What is 2 + 3?", "cluster": 4, "p": 0.75, "silver": "5"}) + "\n")
    (ex,) = read_pool(path)
    # the solver trains label-free: the silver answer is only a diagnostic in meta, never the example's answer
    assert ex.problem == "What is 2 + 3?" and ex.answer is None
    assert ex.meta == {"kind": "cluster_4", "cluster": 4, "p": 0.75, "silver": "5"}  # cluster: for the records
    assert read_pool(tmp_path / "absent.jsonl") == []


def test_prism_phase_means_average_over_the_steps_that_logged_a_key():
    from mmevo.evolve.prism import _means

    history = [{"prism/p_mean": 1.0, "loss": 9.0}, {"reward/prism_coverage/mean": 2.0}, {"prism/p_mean": 0.5}]
    # p_mean logged by 2 of the 3 steps: (1.0 + 0.5) / 2 = 0.75; other prefixes are left out
    assert _means(history, ("prism/", "reward/")) == {"prism/p_mean": 0.75, "reward/prism_coverage/mean": 2.0}


def test_prism_questioner_step_aux_and_metrics(monkeypatch, tmp_path):
    import torch

    from mmevo.evolve import prism
    from mmevo.evolve.mmzero import Recorder
    from mmevo.rollout.base import Completion
    from mmevo.rollout.strategy import Rollout

    texts = ["<question>Q1?</question>", "no tag here", "<question>Q2?</question>"]
    answers = {"Q1?": ["\\boxed{1}"] * 4,  # p = 4/4 = 1.0
               "Q2?": ["\\boxed{2}", "\\boxed{3}", "none boxed", "none boxed"]}  # p = 1/4 (tie -> first), answered 2
    solver = _Scripted(lambda ex: answers[ex.problem])
    ro = Rollout([None] * 3, [Completion([1], [0.0], "stop") for _ in texts], texts, torch.arange(3), [None] * 3)
    monkeypatch.setattr(prism, "sample_groups", lambda ctx, examples: ro)
    strategy = prism.QuestionerStrategy(solver, 4, lambda qs: [{"Q1?": 5, "Q2?": 7}[q] for q in qs], Recorder(tmp_path))
    ro = strategy.rollout(SimpleNamespace(seed=0, step=0), [])
    assert ro.aux == [{"question": "Q1?", "valid": True, "p": 1.0, "cluster": 5},
                      {"question": None, "valid": False, "reason": "no_tag"},
                      {"question": "Q2?", "valid": True, "p": 0.25, "cluster": 7}]
    # valid 2 of 3; mean p over the 2 valid questions = (1.0 + 0.25) / 2; no valid question went unanswered
    assert ro.extra_metrics == pytest.approx({"prism/valid_frac": 2 / 3, "prism/p_mean": 0.625,
                                              "prism/unanswered_frac": 0.0, "prism/unsampled": 0,
                                              "prism/invalid/no_tag": 1})
    strategy.after_rewards(ro, torch.tensor([0.5, -1.0, 0.0]))
    rows = Recorder.read(tmp_path)
    assert [r.get("reward") for r in rows] == [0.5, -1.0, 0.0] and rows[2]["silver"] == "2"


class _Reached(Exception):
    pass


def test_each_phase_filters_with_its_own_range(monkeypatch, tmp_path):
    import sys
    import types

    from mmevo.evolve import mmzero

    def reached(*a, **kw):
        raise _Reached

    monkeypatch.setattr(mmzero, "FrozenRole", reached)  # the coder phase got examples and loads its frozen solver
    # the solver phase got examples and loads its policy (a stub module: the real one imports the model stack)
    monkeypatch.setitem(sys.modules, "mmevo.recipes", types.SimpleNamespace(load_policy=reached, build_trainer=reached))
    # coder band [0.25, 0.5] and solver band [0.75, 1.0] disjoint: one proposal, 1 of 4 renders ok (success 0.25, in
    # the coder band only), that render's hard consistency 1.0 (in the solver band only)
    cfg = load_config(None, ["mmzero.coder_success_range=[0.25, 0.5]", "mmzero.solver_consistency_range=[0.75, 1.0]",
                             f"mmzero.output_dir={tmp_path}"])
    renders = [_render("a", 1.0)] + [_render(f"x{k}", 0.0, silver=None, ok=False) for k in range(3)]
    _solver_dir(tmp_path / "iter_0", [_row(renders)], name="proposer")
    paths = {r: "m" for r in mmzero.ROLES}
    for role, index in (("coder", 1), ("solver", 2)):
        with pytest.raises(_Reached):  # a phase filtering with the other phase's band finds nothing and skips
            mmzero.run_phase(cfg, role, 0, index, tmp_path / "iter_0" / role, paths, None, tmp_path)


def test_prism_pool_caps_each_cluster_separately():
    from mmevo.evolve.prism import balance_pool

    # all in the band [0.5, 0.9] with an answer; at most 1 per cluster: q0 (cluster 0), q1 (cluster 1), q3 (cluster 2)
    rows = [{"question": f"q{i}", "cluster": c, "p": 0.75, "silver": "1"} for i, c in enumerate([0, 1, 1, 2, 0])]
    kept = balance_pool(rows, (0.5, 0.9), max_per_cluster=1)
    assert [r["question"] for r in kept] == ["q0", "q1", "q3"]
    assert [r["kept"] for r in rows] == [True, True, False, True, False]


def test_prism_pool_phase_drops_repeats_and_uses_the_configured_band(monkeypatch, tmp_path):
    from mmevo.evolve import prism

    answers = {"A?": ["\\boxed{1}"] * 4,  # p = 1.0
               "B?": ["\\boxed{2}", "\\boxed{2}", "\\boxed{3}", "no box"]}  # p = 2/4 = 0.5

    class Role:
        def __init__(self, cfg, path):
            self.path = path

        def sample(self, exs, n, seed):
            if self.path == "questioner":
                return [["<question>A?</question>", "<question>A?</question>", "<question>B?</question>", "bad"]
                        for _ in exs]
            return [answers[ex.problem] for ex in exs]

        def close(self):
            pass

    class Assign:
        def __init__(self, *a, **kw):
            self.k = 4

        def __call__(self, questions):
            return [{"A?": 0, "B?": 1}[q] for q in questions]

    monkeypatch.setattr(prism, "FrozenRole", Role)
    monkeypatch.setattr(prism, "ClusterAssigner", Assign)
    cfg = load_config(None, ["prism.pool_prompts=1", "prism.pool_band=[0.25, 1.0]", "prism.solver_samples=4"])
    out = prism.build_pool(cfg, 1, tmp_path, "questioner", "solver")
    # 4 texts: A, A again (a repeat), B, one without a tag -> 2 distinct questions, both in the band [0.25, 1.0]
    assert out["generated"] == 4 and out["valid_distinct"] == 2
    assert out["invalid"] == {"duplicate": 1, "no_tag": 1}
    assert out["in_band"] == 2 and out["kept"] == 2
    pool = [json.loads(line) for line in (tmp_path / "pool.jsonl").read_text().splitlines()]
    assert [(r["question"], r["p"], r["silver"]) for r in pool] == [("A?", 1.0, "1"), ("B?", 0.5, "2")]
