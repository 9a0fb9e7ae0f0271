"""Review 12 of the day's changes: the HONEST rerun's free keys as seen by the role trainers' resume, and a rerun
with fewer honest.gss_blocks than the solver trained."""

import json
import warnings

import pytest

from test_honest_loop import _rows, _tiny_cfg


def test_resume_config_changes_leaves_out_a_loops_free_keys():
    from mmevo.grpo.trainer import resume_config_changes, resume_config_diff

    saved = {"honest": {"gss_blocks": 2, "gss_share": 0.25}, "algo": {"clip_high": 0.2}}
    now = {"honest": {"gss_blocks": 3, "gss_share": 0.25}, "algo": {"clip_high": 0.3}}
    assert resume_config_changes(saved, now) == ["algo.clip_high", "honest.gss_blocks"]
    assert resume_config_changes(saved, now, frozenset({"honest.gss_blocks"})) == ["algo.clip_high"]
    assert [d["key"] for d in resume_config_diff(saved, now, 4, frozenset({"honest.gss_blocks"}))] == ["algo.clip_high"]


def _checkpoint_changes(out):
    import torch

    ckpts = sorted((out / "solver" / "checkpoints").glob("step_*"))
    return torch.load(ckpts[-1] / "trainer_state.pt", map_location="cpu", weights_only=False)["settings_changes"]


def test_honest_rerun_free_keys_are_no_settings_change_and_fewer_blocks_are_refused(tiny_text_path, tmp_path):
    from mmevo.config import ConfigError
    from mmevo.honest.loop import run_honest

    out = tmp_path / "honest"
    run_honest(_tiny_cfg(tiny_text_path, out))
    # more blocks (a free key of the loop): the solver resumes without a warning naming them as a changed setting,
    # and its checkpoints do not record them as one (they did: "honest.gss_blocks 2 -> 3", "this run's values apply")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        more = run_honest(_tiny_cfg(tiny_text_path, out, "honest.gss_blocks=3"))
    resumed = [str(w.message) for w in caught if "settings other than" in str(w.message)]
    assert resumed == [], resumed
    assert [b["solver_steps"] for b in more["blocks"]] == [2, 2, 2]
    assert _checkpoint_changes(out) == []
    # fewer blocks than the solver trained: refused (the summary listed 1 block beside the 3-block final model and
    # its calibration report), and the finished run's summary is left as it was
    before = (out / "summary.json").read_text()
    with pytest.raises(ConfigError, match=r"honest.gss_blocks=1: .* trained 6 steps \(3 blocks .*gss_blocks>=3"):
        run_honest(_tiny_cfg(tiny_text_path, out, "honest.gss_blocks=1"))
    assert (out / "summary.json").read_text() == before
    assert len(json.loads(before)["blocks"]) == 3
    assert [r["step"] for r in _rows(out / "solver" / "metrics.jsonl")] == [1, 2, 3, 4, 5, 6]


def test_honest_calibration_report_is_reused_only_under_the_eval_settings_it_was_made_with(tiny_text_path, tmp_path):
    # the rerun check leaves the eval section out (as a resume does), so a rerun may change eval.max_tokens or
    # eval.limit: the cached report (64 tokens, 6 examples) was returned under a summary whose config said 8 / 2
    from mmevo.honest.loop import calibration_eval

    out = tmp_path / "eval_after"
    first = calibration_eval(_tiny_cfg(tiny_text_path, tmp_path), str(tiny_text_path), out, "t")
    assert (first["max_tokens"], first["examples"]) == (64, 6)
    same = calibration_eval(_tiny_cfg(tiny_text_path, tmp_path), str(tiny_text_path), out, "t")
    assert same == first  # same weights, same settings: the cached report, not a new evaluation
    shorter = calibration_eval(_tiny_cfg(tiny_text_path, tmp_path, "eval.max_tokens=8"), str(tiny_text_path), out, "t")
    assert shorter["max_tokens"] == 8 and json.loads((out / "calibration.json").read_text())["max_tokens"] == 8
    fewer = calibration_eval(_tiny_cfg(tiny_text_path, tmp_path, "eval.limit=2"), str(tiny_text_path), out, "t")
    assert fewer["examples"] == 2


def test_a_rerun_into_a_finished_run_from_before_run_config_json_is_compared_with_its_summary(tmp_path):
    # a finished HONEST / MM-Zero / Prism run written before run_config.json existed: its first rerun recorded its
    # own settings as the run's (honest.gss_share 0.5 over blocks trained at 0.25, summary rewritten saying 0.5), and
    # the run's own settings were refused from then on
    from mmevo.config import ConfigError, load_config, to_dict
    from mmevo.evolve.rerun import RUN_CONFIG, check_rerun_config

    free = frozenset({"honest.output_dir", "honest.gss_blocks"})
    out = tmp_path / "old_run"
    out.mkdir()
    first = load_config(None, ["honest.gss_share=0.25", "honest.gss_blocks=2"])
    saved = to_dict(first)
    saved["honest"].pop("eval_calibration")  # a setting its mmevo did not have yet: not held against a rerun
    (out / "summary.json").write_text(json.dumps({"config": saved, "blocks": [{}, {}]}, default=str))
    with pytest.raises(ConfigError, match=r"honest.gss_share=0.25 in summary.json"):
        check_rerun_config(out, load_config(None, ["honest.gss_share=0.5"]), "honest", free)
    assert not (out / RUN_CONFIG).exists()
    # its own settings (and a free key) pass, and are recorded from then on
    check_rerun_config(out, load_config(None, ["honest.gss_share=0.25", "honest.gss_blocks=3"]), "honest", free)
    assert json.loads((out / RUN_CONFIG).read_text())["honest"]["gss_share"] == 0.25
    # a directory without a summary (a run not finished) or with an unreadable one: the first run's settings, as before
    for name, text in (("fresh", None), ("torn", '{"config": {"hon')):
        d = tmp_path / name
        d.mkdir()
        if text is not None:
            (d / "summary.json").write_text(text)
        check_rerun_config(d, load_config(None, ["honest.gss_share=0.5"]), "honest", free)
        assert json.loads((d / RUN_CONFIG).read_text())["honest"]["gss_share"] == 0.5
