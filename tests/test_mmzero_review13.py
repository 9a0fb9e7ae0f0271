"""Review 13 of `mmevo evolve mmzero`: what a kill leaves behind and what a user can recompute. A ``done.json`` torn
by a kill mid-write is never read back."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from mmevo.config import load_config
from mmevo.evolve import mmzero
from mmevo.evolve.mmzero import Recorder
from test_mmzero_records_review7 import _fake_phases, _NoPool


def _cfg(out, *overrides):
    return load_config("configs/mmzero_tiny.yaml", [f"mmzero.output_dir={out}", "mmzero.warmup_demos=0",
                                                   "mmzero.iterations=1", "trainer.progress=false", *overrides])


def _stub_heavy_parts(monkeypatch, run_phase):
    import render

    import mmevo.recipes

    monkeypatch.setattr(render, "RenderPool", _NoPool)
    monkeypatch.setattr(mmevo.recipes, "resolve_model_path", lambda cfg: "unused")
    monkeypatch.setattr(mmzero, "run_phase", run_phase)


def test_a_kill_while_done_json_is_written_leaves_none_a_rerun_cannot_read(monkeypatch, tmp_path):
    """Killed mid-write of the proposer's done.json (its first bytes on disk), the rerun failed decoding it
    (JSONDecodeError) on every try; now the file appears whole or not at all, and the rerun finishes the phase."""
    out = tmp_path / "run"
    phases = _fake_phases({"proposer": [(0, ["a"]), (1, ["b"])], "coder": [(0, ["c"])]})
    _stub_heavy_parts(monkeypatch, phases)
    real_write_text = Path.write_text

    def killed_mid_write(self, data, *a, **k):
        if self.parent.name == "proposer" and self.name.startswith("done.json"):
            real_write_text(self, data[:7], *a, **k)
            raise KeyboardInterrupt  # stands for the SIGKILL: nothing after this line runs
        return real_write_text(self, data, *a, **k)

    monkeypatch.setattr(Path, "write_text", killed_mid_write)
    with pytest.raises(KeyboardInterrupt):
        mmzero.run_mmzero(_cfg(out))
    monkeypatch.setattr(Path, "write_text", real_write_text)
    summary = mmzero.run_mmzero(_cfg(out))  # the rerun: the proposer phase is redone (its records are rewritten)
    done = json.loads((out / "iter_0" / "proposer" / "done.json").read_text())
    assert done == summary["iterations"][0]["proposer"] and done["steps"] == 2
    assert [p.name for p in (out / "iter_0" / "proposer").iterdir() if p.name.startswith("done")] == ["done.json"]


def test_a_truncated_warm_up_model_is_an_error_naming_its_directory(tiny_vl_path, tmp_path):
    """A warm-up export whose weights file was cut short (config.json whole, so the loop reuses it): the proposer
    phase's frozen coder failed deep in transformers with safetensors' 'invalid header length', naming no file."""
    import shutil

    from mmevo.models.loader import load_model

    model = tmp_path / "warmup" / "coder" / "model"
    shutil.copytree(tiny_vl_path, model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(ValueError, match=rf"model {model}: its weights cannot be read \(SafetensorError") as e:
        load_model(model)
    assert "redone once its directory is deleted" in str(e.value)


def _proposer_records(phase_dir: Path) -> Path:
    """One step of proposer records as the strategy writes them: a valid proposal with one render, an invalid one."""
    from mmevo.evolve.mmzero import RenderedImage, _render_rows
    from test_mmzero_records_review7 import PROPOSAL_FIELDS, _png

    recorder = Recorder(phase_dir)
    renders = _render_rows(recorder, "p0", [RenderedImage(True, png=_png(9), consistency=0.5, silver="8")], ["x"])
    recorder.write(0, [{"valid": True, "proposal": PROPOSAL_FIELDS, "renders": renders, "penalties": 0.0},
                       {"valid": False, "reason": "missing or misplaced <caption>", "text": "oops"}])
    return phase_dir / "records" / "step_0000.jsonl"


@pytest.mark.parametrize("damage, why", [
    (lambda rows: rows[:1] + ['{"valid": true, "proposal": {'], r"2: not JSON \("),
    (lambda rows: [rows[0].replace('"hard_question": "What is A plus B?", ', "")] + rows[1:],
     r"1: proposal field 'hard_question' is missing or not text"),
    (lambda rows: [rows[0].replace('"silver": "8"', '"silver_": "8"')] + rows[1:], r"1: renders\[0\] lacks 'silver'"),
    (lambda rows: ["[1, 2]"] + rows[1:], r"1: a record must be a JSON object, got list"),
], ids=["cut_line", "no_hard_question", "render_without_silver", "not_an_object"])
def test_a_damaged_record_is_an_error_naming_its_file_and_line(tmp_path, damage, why):
    """The coder phase reads the proposer's records: a line cut short was a bare 'Expecting ...' JSON error naming no
    file, and a proposal without its hard question a TypeError from Proposal() deep in the coder's data set."""
    out = tmp_path / "run"
    prop = out / "iter_0" / "proposer"
    path = _proposer_records(prop)
    whole = path.read_text()
    path.write_text("\n".join(damage(whole.splitlines())) + "\n")
    coder_dir = out / "iter_0" / "coder"
    with pytest.raises(ValueError, match=rf"{path}:{why}.*delete {prop} to run that phase again"):
        # the coder phase reads the records before it loads a model or renders: no model path, no pool
        mmzero.run_phase(_cfg(out), "coder", 0, 1, coder_dir, dict.fromkeys(mmzero.ROLES, "unused"), None, out)
    with pytest.raises(ValueError, match=rf"{path}:{why}"):
        mmzero.solver_train_set([prop], 0.0, 1.0, 0, 0)
    with pytest.raises(ValueError, match=rf"{path}:{why}"):
        mmzero.write_gallery(out / "iter_0")
    path.write_text(whole)  # whole: every reader takes it
    assert len(mmzero.coder_train_set(Recorder.read(prop, mmzero.record_problem), 0.0, 1.0, "python")) == 1
    assert len(mmzero.solver_train_set([prop], 0.0, 1.0, 0, 0)) == 1 and mmzero.write_gallery(out / "iter_0").exists()


def test_the_coder_records_hold_each_programs_reward_and_the_penalties_it_added(monkeypatch, tmp_path, render_pool):
    """README: records hold the rewards. The coder's rows held none (nor the proposal's penalties its reward adds),
    so the phase's reward/mmzero_coder/mean (1.679 in the tiny run) could not be recomputed from its records."""
    import torch

    from mmevo.evolve.mmzero import CoderStrategy, Judge
    from mmevo.rewards.heads import RewardMixer, ScoredSample
    from scripted_roles import Scripted, scripted_rollout
    from test_mmzero_records_review7 import BARS, PROPOSAL_FIELDS, RENDER_TIMEOUT_S, _answer_3_then_8

    judge = Judge(render_pool, Scripted(_answer_3_then_8), 4, RENDER_TIMEOUT_S, min_pixels=0, max_pixels=0)
    strategy = CoderStrategy(judge, Recorder(tmp_path))
    ro = scripted_rollout(["no code", BARS, BARS, "no code either"])
    for ex, pen in zip(ro.examples, (-0.3, -0.3, -0.05, -0.05)):
        ex.meta.update(proposal=PROPOSAL_FIELDS, penalties=pen)
    ro.group_ids = torch.tensor([0, 0, 1, 1])  # two groups, their samples as the trainer lays them out
    monkeypatch.setattr(mmzero, "sample_groups", lambda ctx, examples: ro)
    out = strategy.rollout(SimpleNamespace(seed=3, step=0), [])
    samples = [ScoredSample(t, i, None, [], aux=a) for i, (t, a) in enumerate(zip(out.texts, out.aux))]
    rewards, _ = RewardMixer({"mmzero_coder": 1.0})(samples)
    strategy.after_rewards(out, rewards)
    rows = Recorder.read(tmp_path)
    assert [row["penalties"] for row in rows] == [-0.3, -0.05]
    recorded = [r["reward"] for row in rows for r in row["renders"]]
    assert recorded == pytest.approx(rewards.tolist())
    # s = 1 (every sample answers 3), c = 3/4 (8, 8, 7, 8): 1 + 1 + 1/4 + the penalties; 0 without an image
    assert recorded == pytest.approx([0.0, 1.95, 2.2, 0.0], abs=1e-6)
    for row in rows:
        for r in row["renders"]:
            expect = 1 + r["easy"] + min(r["consistency"], 1 - r["consistency"]) + row["penalties"] if r["ok"] else 0
            assert r["reward"] == pytest.approx(expect, abs=1e-6)


def test_the_phase_type_shares_are_over_every_step_with_proposals_and_sum_to_one(monkeypatch):
    """The tiny run's proposer phase logged type_share geometry 0.333, table 0.583, data_chart 0.5 (sum 1.42): each
    type's share was logged only by the steps where it occurred, so its phase mean skipped the steps without it
    (geometry: 1/3 of step 1's proposals, none of step 2's, is 1/6 of the phase's)."""
    import mmevo.models.embedder as emb
    from mmevo.evolve.mmzero import CONTENT_TYPES, phase_means
    from mmevo.rewards.heads import RewardMixer, ScoredSample
    from test_mmzero_review4 import _ExactEmbedder

    monkeypatch.setattr(emb, "get_embedder", lambda name="": _ExactEmbedder())

    def step(types):
        samples = [ScoredSample("", 0, None, [], aux={
            "valid": True, "content_type": t, "caption": f"c{k}", "easy_question": f"e{k}", "hard_question": f"h{k}",
            "executed": [True], "easy": [1.0], "consistency": [0.5]}) for k, t in enumerate(types)]
        invalid = ScoredSample("", 0, None, [], aux={"valid": False})
        return RewardMixer({"mmzero_proposer": 1.0})(samples + [invalid])[1]

    history = [step(["geometry", "table", "table"]), step(["data_chart", "table", "data_chart"]),
               RewardMixer({"mmzero_proposer": 1.0})([ScoredSample("", 0, None, [], aux={"valid": False})])[1]]
    means = phase_means(history)
    shares = {k.rsplit("/", 1)[1]: v for k, v in means.items() if "/type_share/" in k}
    assert set(shares) == set(CONTENT_TYPES)  # a step without valid proposals logs no share: it is left out
    assert shares["geometry"] == pytest.approx(1 / 6) and shares["data_chart"] == pytest.approx(1 / 3)
    assert shares["table"] == pytest.approx(1 / 2) and sum(shares.values()) == pytest.approx(1.0)
