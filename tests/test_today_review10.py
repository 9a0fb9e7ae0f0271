"""Review 10 of the day's changes: defects in cases their own tests did not reach.

- HONEST's ``gold_form_rate`` counted answers the grader accepts ("5.0" for 5, "1,000" for 1000, "true." for True)
  as answers of another form, which the report calls sure to be wrong: a run answering right read as exploiting the
  Brier reward.
- ``step()`` before the first ``train()``: a trainer that saved its own checkpoint at its current step was refused
  ("resuming would silently discard" steps that the checkpoint holds).
- The registry of output dirs resolved a relative ``trainer.output_dir`` anew at each look-up: a trainer closed after
  the working directory changed stayed registered, and the next trainer on that directory was warned of a live,
  unclosed one.
- A fresh ``train()`` seeded the process's generators with step 0's sampling seed: a plug-in's first draws repeated
  the numbers CSRS's anchors and the HF sampler drew at step 0.
- With ``trainer.resume=false`` the first ``train()`` removed the checkpoint the trainer itself had saved after its
  ``step()`` calls, reporting it as an earlier run's.
"""

import os
import warnings

import pytest
import torch

from conftest import randomize
from test_hooks_review9 import _cfg, _problems
from mmevo.honest.calibration import calibration_report, score_response
from mmevo.honest.protocol import format_response
from mmevo.models.loader import load_model
from mmevo.recipes import build_trainer


# -- HONEST: gold_form_rate ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("answer,gold", [("5.0", "5"), ("1,000", "1000"), ("true.", "True"), ("$5$", "5"),
                                         ("10/2", "5")])
def test_an_answer_graded_right_is_of_the_golds_form(answer, gold):
    scored = score_response(format_response("work", answer, 0.9), gold)
    assert scored["correct"] is True
    assert scored["gold_form"] is True  # was False: "sure to be wrong" while graded right


def test_gold_form_rate_counts_right_answers_of_another_spelling_and_still_flags_the_exploit():
    recs = [{"response": format_response("work", "5.0", 0.9), "gold": "5", "domain": "arithmetic"},
            {"response": format_response("work", "1,000", 0.8), "gold": "1000", "domain": "arithmetic"},
            {"response": format_response("work", "3.5", 0.2), "gold": "4", "domain": "arithmetic"},  # wrong form
            {"response": format_response("work", "true.", 0.7), "gold": "True", "domain": "logic"},
            {"response": format_response("work", "24", 0.0), "gold": "False", "domain": "logic"}]  # the exploit
    rep = calibration_report(recs)
    assert rep["accuracy"] == pytest.approx(3 / 5)
    assert rep["gold_form_rate"] == pytest.approx(3 / 5)  # was 0 / 5
    by = rep["by"]["domain"]
    assert by["arithmetic"]["gold_form_rate"] == pytest.approx(2 / 3) and by["logic"]["gold_form_rate"] == 0.5


# -- trainer: step() before train(), the output-dir registry -------------------------------------------------------
def _trainer(path, out, **over):
    lm = load_model(path)
    randomize(lm.model, std=0.15, seed=1)
    return build_trainer(_cfg(out, **over), lm, _problems("p"))


def test_step_then_its_own_save_then_train_goes_on(tiny_text_path, tmp_path):
    """A loop driving step() and save() itself, then train(): the newest checkpoint is the one it just wrote, whose
    resume discards nothing (it was refused as if it rewound the steps)."""
    tr = _trainer(tiny_text_path, tmp_path)
    tr.step()
    tr.step()
    assert tr.save().name == "step_000002"
    weights = {k: v.clone() for k, v in tr.model.state_dict().items()}
    tr.train(steps=0)  # resumes its own step 2: the same weights
    assert tr.step_idx == 2
    assert all(torch.equal(weights[k], v) for k, v in tr.model.state_dict().items())
    tr.train(steps=1)
    assert tr.step_idx == 3 and (tmp_path / "checkpoints" / "step_000003").is_dir()
    tr.close()
    # a step after its own save: the checkpoint would rewind it, still refused
    again = _trainer(tiny_text_path, tmp_path / "b")
    again.step()
    again.save()
    again.step()
    with pytest.raises(ValueError, match=r"ran 2 step\(s\) through step\(\).*step_000001"):
        again.train(steps=1)
    assert again.step_idx == 2
    again.close()


def test_a_trainer_closed_after_a_chdir_releases_its_relative_output_dir(tiny_text_path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = _trainer(tiny_text_path, "run", **{"trainer.save_every": 0})
    first.train(steps=0)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # e.g. a notebook cell, or a plug-in that changes directory
    first.close()
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # was: "started by another trainer of this process that is not closed"
        second = _trainer(tiny_text_path, "run", **{"trainer.save_every": 0})
        second.train(steps=0)
    second.close()
    # a symlinked output_dir and its target are one directory: the second trainer takes it over, warned
    os.symlink(tmp_path / "run", tmp_path / "link")
    a = _trainer(tiny_text_path, "run", **{"trainer.save_every": 0})
    b = _trainer(tiny_text_path, "link", **{"trainer.save_every": 0})
    a.train(steps=0)
    with pytest.warns(UserWarning, match="not closed"):
        b.train(steps=0)
    with pytest.raises(ValueError, match="taken over"):
        a.train(steps=1)
    b.close()
    a.close()


def test_a_fresh_start_seeds_the_global_generators_apart_from_step_0s_sampling(tiny_text_path, tmp_path):
    """The global generators were seeded with step 0's sampling seed: a plug-in's first ``random`` / torch draws were
    the very numbers CSRS drew its anchors from (``random.Random(ctx.seed)``) and the HF sampler its tokens from."""
    import random

    from mmevo.rollout.strategy import step_seed

    tr = _trainer(tiny_text_path, tmp_path, **{"trainer.save_every": 0})
    tr.seed_offset = 2
    tr.train(steps=0)
    step0 = step_seed(3, 0, 0, 2)  # trainer.seed 3: what rollout_context gives step 0 on rank 0
    plugin_py, plugin_torch = [random.random() for _ in range(4)], torch.rand(4)
    assert plugin_py != [random.Random(step0).random() for _ in range(4)]
    assert not torch.equal(plugin_torch, torch.rand(4, generator=torch.Generator().manual_seed(step0)))
    tr.close()
    # still reproducible from trainer.seed and seed_offset
    again = _trainer(tiny_text_path, tmp_path / "b", **{"trainer.save_every": 0})
    again.seed_offset = 2
    random.seed(99)
    again.train(steps=0)
    assert [random.random() for _ in range(4)] == plugin_py
    again.close()


def test_a_fresh_start_keeps_the_checkpoint_it_saved_itself_and_removes_the_earlier_runs(tiny_text_path, tmp_path,
                                                                                        capsys):
    """``trainer.resume=false``: train() removes an earlier run's checkpoints, and used to remove the one this trainer
    had just saved after its step()s too, reporting it as "of an earlier run"."""
    earlier = _trainer(tiny_text_path, tmp_path)
    earlier.train(steps=1)  # an earlier run's step_000001
    earlier.close()
    tr = _trainer(tiny_text_path, tmp_path, **{"trainer.resume": "false", "trainer.save_every": 0})
    tr.step()
    tr.step()
    tr.save()  # its own step_000002
    capsys.readouterr()
    tr.train(steps=0)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_000002"]
    assert "removed 1 checkpoint(s) of an earlier run" in capsys.readouterr().out
    assert tr.step_idx == 2
    tr.close()
