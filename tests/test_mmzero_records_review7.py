"""MM-Zero, seventh review: records hygiene. A resumed step whose re-run samples other programs (vLLM is not
bit-reproducible) leaves the interrupted attempt's PNGs unreferenced; a finishing phase removes them and counts them.
An image write interrupted mid-way never leaves a torn PNG under a recorded name. A program that renders a blank
canvas still executes (the seed's e_j = 1, rewards unchanged) but is counted in ``mmzero/render_blank``."""

import dataclasses
import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from PIL import Image

from mmevo.evolve import mmzero
from mmevo.evolve.mmzero import (CoderStrategy, Judge, ProposerStrategy, Recorder, RenderedImage, _render_rows,
                                 phase_means, render_metrics)
from mmevo.rewards.heads import RewardMixer, ScoredSample
from mmevo.rewards.mmzero import coder_reward
from scripted_roles import Scripted
from scripted_roles import scripted_rollout as _rollout

PROPOSAL = ("<content_type>data_chart</content_type><caption>A bar chart with bars A=3 and B=5.</caption>"
            "<easy_question>What is A?</easy_question><easy_answer>3</easy_answer>"
            "<hard_question>What is A plus B?</hard_question><hard_answer>8</hard_answer>")
BARS = "```python\nimport matplotlib.pyplot as plt\nplt.bar(['A', 'B'], [3, 5])\n```"
OTHER_BARS = "```python\nimport matplotlib.pyplot as plt\nplt.bar(['A', 'B'], [3, 5], color='red')\n```"
BLANK_FIGURE = "```python\nimport matplotlib.pyplot as plt\nfig = plt.figure()\n```"  # executes, draws nothing
PROPOSAL_FIELDS = dataclasses.asdict(mmzero.parse_proposal(PROPOSAL)[0])
PENALTIES = {"threshold": 0.15, "penalty": 0.3, "type_weight": 0.15}
RENDER_TIMEOUT_S = 15.0


def _proposer_step(monkeypatch, phase_dir, pool, step, programs, solver, texts=(PROPOSAL,)):
    """One proposer step through the real strategy, sandbox and head; the coder writes ``programs``."""
    judge = Judge(pool, Scripted(solver), 4, RENDER_TIMEOUT_S, min_pixels=0, max_pixels=0)
    strategy = ProposerStrategy(Scripted(lambda ex: list(programs)), judge, len(programs), Recorder(phase_dir),
                                "python", PENALTIES)
    monkeypatch.setattr(mmzero, "sample_groups", lambda ctx, examples: _rollout(list(texts)))
    ro = strategy.rollout(SimpleNamespace(seed=7, step=step), [])
    samples = [ScoredSample(t, i, None, [], aux=a) for i, (t, a) in enumerate(zip(ro.texts, ro.aux))]
    rewards, _ = RewardMixer({"mmzero_proposer": 1.0})(samples)
    strategy.after_rewards(ro, rewards)
    return ro, rewards


def _images(phase_dir: Path) -> set[str]:
    return {f"images/{p.name}" for p in (phase_dir / "images").iterdir()}


def _referenced(phase_dir: Path) -> set[str]:
    return {r["image"] for row in Recorder.read(phase_dir) for r in row.get("renders", ()) if r["image"]}


def _answer_3_then_8(ex):
    return ["\\boxed{3}"] * 4 if ex.problem.endswith("What is A?") else ["\\boxed{8}", "\\boxed{8}", "\\boxed{7}",
                                                                          "\\boxed{8}"]


# -- orphan images ----------------------------------------------------------------------------------------------------
def test_a_resumed_step_with_other_programs_orphans_the_first_attempts_images(monkeypatch, tmp_path, render_pool):
    """Reproduction through the real strategy and sandbox: steps 1 and 2 run, the phase is killed before a checkpoint
    after step 1, the resume re-runs step 2 (same seed) and the coder samples other programs this time. Step 2's record
    is rewritten, the first attempt's two PNGs of step 2 stay; a finished phase removes exactly those."""
    phase = tmp_path / "iter_0" / "proposer"
    _proposer_step(monkeypatch, phase, render_pool, 1, [BARS, BARS], _answer_3_then_8)
    _proposer_step(monkeypatch, phase, render_pool, 2, [BARS, OTHER_BARS], _answer_3_then_8)
    first_attempt = _images(phase)
    assert len(first_attempt) == 4 and first_attempt == _referenced(phase)  # every image referenced before the kill
    # the resumed attempt: step 2 again, the coder's samples differ (not bit-reproducible)
    _proposer_step(monkeypatch, phase, render_pool, 2, [OTHER_BARS, BARS], _answer_3_then_8)
    referenced = _referenced(phase)
    orphans = _images(phase) - referenced
    assert len(orphans) == 2 and orphans <= first_attempt  # the first attempt's step-2 images, in no record
    assert len(Recorder.read(phase)) == 2  # one record per step: step 2's was overwritten
    # another phase's images, none of them referenced by this phase's records, are not this phase's to clean
    other = tmp_path / "iter_0" / "coder" / "images"
    other.mkdir(parents=True)
    (other / "c-1.png").write_bytes(b"x")

    assert Recorder(phase).remove_orphan_images() == 2
    assert _images(phase) == referenced and len(referenced) == 4  # every referenced image kept, each one loads
    for name in referenced:
        with Image.open(phase / name) as im:
            im.load()
    assert (other / "c-1.png").exists()
    assert Recorder(phase).remove_orphan_images() == 0  # idempotent


def _fake_phases(attempts: dict):
    """A run_phase that writes records and PNGs like the strategies do: per role, a list of (step, render keys) writes
    in order, a later write of a step overwriting its record (a resumed re-run)."""

    def run_phase(cfg, role, t, role_index, phase_dir, paths, pool, out):
        recorder = Recorder(phase_dir)
        for step, keys in attempts.get(role, []):
            renders = [RenderedImage(True, png=_png(len(k))) for k in keys]
            rows = _render_rows(recorder, f"p{step}", renders, keys)
            recorder.write(step, [{"valid": True, "proposal": PROPOSAL_FIELDS, "renders": rows}])
        if role == "solver":
            return {"skipped": "nothing to train", "model": None}
        return {"model": None, "steps": 2}

    return run_phase


def _png(shade: int) -> bytes:
    b = io.BytesIO()
    Image.new("RGB", (4, 4), (shade, 0, 0)).save(b, format="PNG")
    return b.getvalue()


class _NoPool:
    def __init__(self, **kw):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_finishing_phase_removes_and_counts_its_orphans_in_done_json_and_the_summary(monkeypatch, tmp_path):
    import render

    import mmevo.recipes
    from mmevo.config import load_config

    out = tmp_path / "run"
    cfg = load_config("configs/mmzero_tiny.yaml", [f"mmzero.output_dir={out}", "mmzero.warmup_demos=0",
                                                   "mmzero.iterations=1", "mmzero.phase_steps=2",
                                                   "trainer.progress=false"])
    monkeypatch.setattr(render, "RenderPool", _NoPool)
    monkeypatch.setattr(mmevo.recipes, "resolve_model_path", lambda cfg: "unused")
    # proposer: step 0, step 1, then the resumed step 1 with other programs (3 orphans); coder: one clean step
    monkeypatch.setattr(mmzero, "run_phase", _fake_phases({
        "proposer": [(0, ["a", "b"]), (1, ["c", "d", "e"]), (1, ["f", "g", "h"])],
        "coder": [(0, ["i", "j"])]}))
    summary = mmzero.run_mmzero(cfg)
    it = summary["iterations"][0]
    assert [it[r]["orphan_images_removed"] for r in ("proposer", "coder", "solver")] == [3, 0, 0]
    for role, n_images in (("proposer", 5), ("coder", 2)):
        d = out / "iter_0" / role
        assert json.loads((d / "done.json").read_text())["orphan_images_removed"] == it[role]["orphan_images_removed"]
        assert _images(d) == _referenced(d) and len(_images(d)) == n_images
    saved = json.loads((out / "summary.json").read_text())
    assert saved["iterations"][0]["proposer"]["orphan_images_removed"] == 3


def test_an_interrupted_image_write_leaves_the_recorded_png_whole(monkeypatch, tmp_path):
    """A bit-reproducible re-run of a step rewrites the same image names; a kill in the middle of one of those writes
    used to leave a torn PNG under the name that the first attempt's record of that step references."""
    recorder = Recorder(tmp_path)
    good = _png(200)
    name = recorder.image("p-1", good)
    recorder.write(1, [{"valid": True, "renders": [{"ok": True, "image": name}]}])
    real_write = Path.write_bytes

    def killed_mid_write(self, data):
        real_write(self, data[:len(data) // 2])
        raise KeyboardInterrupt  # the process dies here

    monkeypatch.setattr(Path, "write_bytes", killed_mid_write)
    with pytest.raises(KeyboardInterrupt):
        recorder.image("p-1", _png(10))
    monkeypatch.undo()
    assert (tmp_path / name).read_bytes() == good  # the record's image is the whole first PNG, not half of the new
    assert recorder.remove_orphan_images() == 1  # the half-written temporary file, referenced by nothing
    assert _images(tmp_path) == {name}


# -- blank renders ----------------------------------------------------------------------------------------------------
def test_a_blank_figure_executes_with_unchanged_rewards_and_is_counted(monkeypatch, tmp_path, render_pool):
    """The real sandbox runs a program that only opens a matplotlib figure: it executes (e_j = 1, as the seed gates
    only on execution) and the reward is the seed's; ``mmzero/render_blank`` counts it, the record marks it."""
    ro, r = _proposer_step(monkeypatch, tmp_path, render_pool, 1, [BLANK_FIGURE, BARS], _answer_3_then_8)
    assert ro.aux[0]["executed"] == [True, True]
    # s = 1 on both renders, c = 3/4 on both: (1/2) * 2 * (min(1, .5) + min(.75, .25)) = .75; no penalty (.25 >= .15)
    assert r.tolist() == pytest.approx([0.75], abs=1e-6)
    assert ro.extra_metrics["mmzero/render_blank"] == 1 and ro.extra_metrics["mmzero/render_success"] == 1.0
    row = Recorder.read(tmp_path)[0]
    assert [x["blank"] for x in row["renders"]] == [True, False]


def test_the_solvers_non_answers_on_a_blank_render_give_s_and_c_zero(monkeypatch, tmp_path, render_pool):
    """What a frozen solver says about a blank canvas: "None" / "N/A" on both questions. Both are non-answers
    (``substantive``), so s = 0 and c = 0: the proposer gets only the easy-hard penalty and the coder 1 + 0 + 0."""
    nothing = ["\\boxed{None}", "\\boxed{N/A}", "\\boxed{\\text{unknown}}", "\\boxed{None}"]
    ro, r = _proposer_step(monkeypatch, tmp_path, render_pool, 1, [BLANK_FIGURE, BLANK_FIGURE], lambda ex: nothing)
    assert ro.aux[0]["executed"] == [True, True]
    assert ro.aux[0]["easy"] == [0.0, 0.0] and ro.aux[0]["consistency"] == [0.0, 0.0]
    assert ro.extra_metrics["mmzero/render_blank"] == 2
    assert r.tolist() == pytest.approx([-0.3], abs=1e-6)  # base 0; mean min(c, 1 - c) = 0 < .15 -> -.3
    row = Recorder.read(tmp_path)[0]
    assert row["renders"][0]["silver"] is None  # no silver label: the solver phase never trains on it
    assert coder_reward(True, 0.0, 0.0, row["penalties"]) == pytest.approx(0.7)  # 1 + 0 + 0 - .3


def test_the_coder_phase_counts_blank_renders_too(monkeypatch, tmp_path, render_pool):
    judge = Judge(render_pool, Scripted(_answer_3_then_8), 4, RENDER_TIMEOUT_S, min_pixels=0, max_pixels=0)
    strategy = CoderStrategy(judge, Recorder(tmp_path))
    ro = _rollout([BLANK_FIGURE, BARS, "no code"])
    for ex in ro.examples:
        ex.meta["proposal"] = PROPOSAL_FIELDS
    ro.group_ids = torch.zeros(3, dtype=torch.long)
    monkeypatch.setattr(mmzero, "sample_groups", lambda ctx, examples: ro)
    out = strategy.rollout(SimpleNamespace(seed=1, step=1), [])
    assert [a["rendered"] for a in out.aux] == [True, True, False]
    assert out.extra_metrics["mmzero/render_blank"] == 1


def test_render_blank_is_a_count_logged_when_non_zero_and_averaged_over_every_step():
    executed = [RenderedImage(True, blank=True), RenderedImage(True, easy=1.0), RenderedImage(False, "timeout")]
    assert render_metrics(executed)["mmzero/render_blank"] == 1
    assert "mmzero/render_blank" not in render_metrics([RenderedImage(True), RenderedImage(False, "timeout")])
    # a failed attempt is never blank, whatever its flag says (it has no image)
    assert "mmzero/render_blank" not in render_metrics([RenderedImage(False, "invalid_image", blank=True)])
    # 3 blank renders over 4 steps (only the steps that had one logged it): .75 per step, not 1.5
    history = [{"mmzero/render_blank": 2}, {"mmzero/render_success": 1.0}, {"mmzero/render_blank": 1}, {}]
    assert phase_means(history)["mmzero/render_blank"] == 0.75


@pytest.mark.parametrize("colours, blank", [
    ([(255, 255, 255)], True), ([(0, 0, 0)], True), ([(255, 255, 255), (254, 255, 255)], False),
    ([(10, 20, 30), (10, 20, 31)], False)])
def test_single_colour_reads_every_band(colours, blank):
    img = Image.new("RGB", (64, 48), colours[0])
    if len(colours) > 1:
        img.putpixel((63, 47), colours[1])  # one pixel of another colour, in one band only
    assert mmzero.single_colour(img) is blank


def test_a_finishing_phase_removes_the_records_another_launch_left(monkeypatch, tmp_path):
    """An attempt killed before its first checkpoint under 2 ranks left ``step_0000_rank{0,1}.jsonl``; the phase
    restarted from scratch on one rank writes ``step_0000.jsonl``. Before, ``Recorder.read`` returned both, so the
    next phase trained on that step's data twice (and on the dead attempt's images)."""
    import render

    import mmevo.recipes
    from mmevo.config import load_config

    out = tmp_path / "run"
    cfg = load_config("configs/mmzero_tiny.yaml", [f"mmzero.output_dir={out}", "mmzero.warmup_demos=0",
                                                   "mmzero.iterations=1", "mmzero.phase_steps=2",
                                                   "trainer.progress=false"])
    prop = out / "iter_0" / "proposer"
    dead = Recorder(prop)
    for r in (0, 1):  # what the 2-rank attempt wrote (its names), plus a step past the phase and a torn write
        rows = _render_rows(dead, f"dead{r}", [RenderedImage(True, png=_png(50 + r))], ["x"])
        (prop / "records" / f"step_0000_rank{r}.jsonl").write_text(json.dumps(
            {"valid": True, "proposal": PROPOSAL_FIELDS, "renders": rows}) + "\n")
    (prop / "records" / "step_0002.jsonl").write_text("")
    (prop / "records" / "step_0003.tmp").write_text("{")
    monkeypatch.setattr(render, "RenderPool", _NoPool)
    monkeypatch.setattr(mmevo.recipes, "resolve_model_path", lambda cfg: "unused")
    monkeypatch.setattr(mmzero, "run_phase", _fake_phases({"proposer": [(0, ["a"]), (1, ["b", "c"])]}))
    it = mmzero.run_mmzero(cfg)["iterations"][0]
    assert sorted(p.name for p in (prop / "records").iterdir()) == ["step_0000.jsonl", "step_0001.jsonl"]
    assert it["proposer"]["stale_records_removed"] == 4
    assert it["proposer"]["orphan_images_removed"] == 2  # the dead attempt's images went with its records
    assert len(Recorder.read(prop)) == 2 and _images(prop) == _referenced(prop) and len(_images(prop)) == 3
    assert "stale_records_removed" not in it["solver"]  # skipped: it trained nothing, so nothing of it is final
