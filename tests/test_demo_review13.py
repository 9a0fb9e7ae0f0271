"""Demo review 13: a killed demo leaves no run behind, and a rerun after a kill reads what the kill left torn."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TINY = ["data.n_train=64", "data.n_heldout=2", "rollout.n=4", "csrs.m=2", "rollout.max_tokens=12",
        "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2", "trainer.progress=false"]


def _spawned_children(pid: int) -> list[int]:
    """The multiprocessing-spawned children of ``pid`` (not its resource tracker)."""
    kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(k) for k in kids if b"spawn_main" in _cmdline(int(k))]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie has ended; only its reaping is left


@pytest.mark.skipif(not Path("/proc/self/task").exists() or not sys.platform.startswith("linux"),
                    reason="reads /proc; PR_SET_PDEATHSIG is Linux's")
def test_a_run_ends_when_the_demo_is_killed(tiny_vl_path, tmp_path):
    # run_jobs as the demo calls it, in a process of its own that the test kills with SIGKILL while its run trains
    # (500 steps: minutes). Before, the run went on training, holding its directory, and a rerun's run failed as busy
    script = f"""
from pathlib import Path
from mmevo.demo import demo_config, run_config, run_jobs
out = Path({str(tmp_path)!r})
cfg = run_config(demo_config({TINY + ["trainer.steps=500"]!r}, str(out)), "mv", out, Path({str(tiny_vl_path)!r}))
run_jobs({{"mv": (cfg, out / "evals" / "mv.json")}}, 1, 1)
"""
    demo = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children: list[int] = []
    try:
        deadline = time.time() + 180
        while not (tmp_path / "mv" / "train.log").exists():  # the run opens its log once it is set to end with us
            assert demo.poll() is None and time.time() < deadline, "the run never started"
            time.sleep(0.5)
        children = _spawned_children(demo.pid)
        assert len(children) == 1
        os.kill(demo.pid, signal.SIGKILL)
        demo.wait()
        deadline = time.time() + 60
        while _alive(children[0]) and time.time() < deadline:
            time.sleep(0.5)
        assert not _alive(children[0]), "the run kept training after the demo was killed"
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        for pid in children:  # only the run this test started, by its pid
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_progress_reads_past_the_torn_last_line_of_a_killed_run(tmp_path):
    from mmevo.demo import _progress_line, demo_config

    cfg = demo_config(TINY + ["trainer.steps=80", f"trainer.output_dir={tmp_path / 'csrs'}"], str(tmp_path))
    (tmp_path / "csrs").mkdir()
    # a run killed while it appended its step-3 row; the rerun's progress line comes before its resume drops that row
    rows = [json.dumps({"step": s, "reward/total/mean": 0.25 * s}) for s in (1, 2)]
    (tmp_path / "csrs" / "metrics.jsonl").write_text("\n".join(rows) + '\n{"step": 3, "reward/to')
    assert _progress_line("csrs", cfg) == "csrs step 2/80 reward 0.50"


def test_a_torn_cached_evaluation_is_evaluated_again(tiny_vl_path, tmp_path, capsys):
    from mmevo.demo import cached_eval, demo_config, evaluated
    from mmevo.recipes import load_examples

    cfg = demo_config(TINY + [f"model.path={tiny_vl_path}", f"trainer.output_dir={tmp_path / 'mv'}"], str(tmp_path))
    heldout, _ = load_examples(cfg, "heldout")
    path = tmp_path / "evals" / "sft.json"
    first = cached_eval(path, cfg, Path(tiny_vl_path), heldout)
    assert not path.with_name("sft.json.tmp").exists()  # written through a rename
    text = path.read_text()
    path.write_text(text[: len(text) // 2])  # a kill while an in-place write was half done
    again = cached_eval(path, cfg, Path(tiny_vl_path), heldout)
    assert "is unreadable" in capsys.readouterr().out
    assert again["real"]["pass1"] == first["real"]["pass1"] and again["per_problem"] == first["per_problem"]
    assert json.loads(path.read_text())["per_problem"] == first["per_problem"]
    # the run's evaluation torn the same way: not evaluated (so the run is evaluated again), not a crash
    run_eval = tmp_path / "evals" / "mv.json"
    run_eval.write_text(text[:100])
    assert evaluated(run_eval, cfg) is False


def test_an_interrupted_run_with_other_settings_is_refused_not_resumed(tiny_vl_path, tmp_path):
    from mmevo.demo import demo_config, interrupted_run_changes, run_config, run_jobs
    from mmevo.recipes import run_grpo

    def mv_config(*extra):
        cfg = demo_config(TINY + ["trainer.steps=1", "trainer.save_every=1", *extra], str(tmp_path))
        return run_config(cfg, "mv", tmp_path, Path(tiny_vl_path))

    run_grpo(mv_config(), evaluate_before_after=False)
    run = tmp_path / "mv"
    # what a kill leaves: the checkpoint, no summary.json, no final model
    (run / "summary.json").unlink()
    for f in (run / "final").iterdir():
        f.unlink()
    (run / "final").rmdir()
    assert interrupted_run_changes(mv_config()) == []  # the same settings: it resumes
    assert interrupted_run_changes(mv_config("trainer.threads=1")) == []  # where / how it runs is no change
    lr0 = mv_config("trainer.lr=0")
    assert interrupted_run_changes(lr0) == ["trainer.lr"]
    assert interrupted_run_changes(mv_config("trainer.lr=0", "trainer.resume=false")) == []  # starts afresh
    # before, the rerun resumed it (the saved optimizer state keeping its own lr) and the report said "lr 0.0"
    with pytest.raises(ValueError, match=r"interrupted run with other settings \(trainer.lr\).*another --out"):
        run_jobs({"mv": (lr0, tmp_path / "evals" / "mv.json")}, 1, 1)
    assert not (run / "final").exists()


def test_the_report_says_below_for_a_run_that_lost_accuracy(tmp_path):
    from mmevo.data.figures import FIGURE_KINDS
    from mmevo.demo import against_start, demo_config, write_report

    assert [against_start(x, [0.43, 0.49]) for x in (0.50, 0.46, 0.43, 0.40)] == ["above", "within", "within", "below"]
    ev = {"real": {"by_kind": {k: {"pass1": 0.4, "maj": 0.5} for k in FIGURE_KINDS}},
          "blank": {"pass1": 0.09}, "shuffled": {"pass1": 0.1}}
    r = {"base_model": "tiny-wide", "threads": {"threads": 2, "parallel": True}, "total_seconds": 600.0,
         "sft_seconds": 300.0, "runs_seconds": 300.0, "reused_phases": [], "heldout_problems": 400,
         "samples_per_problem": 8, "pass1_before": 0.458, "pass1_before_ci": [0.429, 0.488], "maj8_before": 0.6,
         "maj8_before_ci": [0.55, 0.65], "text_only_chance": 0.14, "sft_steps": 320}
    for n, after, lift in (("csrs", 0.395, -0.063), ("mv", 0.458, 0.0)):  # one lost accuracy, one did not move
        r.update({f"pass1_after_{n}": after, f"pass1_after_{n}_ci": [after - 0.03, after + 0.03],
                  f"maj8_after_{n}": 0.6, f"maj8_after_{n}_ci": [0.55, 0.65], f"pass1_lift_{n}": lift,
                  f"pass1_lift_{n}_ci": [lift - 0.02, lift + 0.02]})
    r.update(pass1_csrs_minus_mv=-0.063, pass1_csrs_minus_mv_ci=[-0.08, -0.04])
    cfg = demo_config(out_dir=str(tmp_path))
    write_report(tmp_path, cfg, {"csrs": cfg, "mv": cfg}, r, {n: ev for n in ("sft", "csrs", "mv")})
    text = " ".join((tmp_path / "report.md").read_text().split())
    assert "pass@1 0.458 -> 0.395 (below the start's interval [0.429, 0.488]; paired lift -0.063" in text
    assert "pass@1 0.458 -> 0.458 (within the start's interval [0.429, 0.488]; paired lift +0.000" in text


def test_an_sft_of_other_settings_is_not_reused(tmp_path, monkeypatch):
    """The demo reused an SFT whenever its step count matched: after `sft.lr=...` (or another data seed) the runs
    started from the old warm-up while report.md named the new settings. SFT summaries now hold their config."""
    import json
    import math

    from mmevo.config import to_dict
    from mmevo.demo import demo_config, run_demo, sft_changes

    cfg = demo_config(TINY, str(tmp_path))
    summary = {"steps": math.ceil(cfg.data.n_train * cfg.sft.epochs / cfg.sft.batch_size), "config": to_dict(cfg)}
    assert sft_changes(summary, cfg) == []
    # what the SFT does not read: the runs' settings, the held-out set, where things are written
    free = demo_config(TINY + ["trainer.lr=0", "data.n_heldout=3", "csrs.m=3"], str(tmp_path / "elsewhere"))
    assert sft_changes(summary, free) == []
    assert sft_changes(summary, demo_config(TINY + ["sft.lr=0.5", "data.seed=9"], str(tmp_path))) == [
        "data.seed", "sft.lr"]
    assert sft_changes({"steps": summary["steps"]}, cfg) == []  # an SFT from before: its step count alone
    sft_dir = tmp_path / "sft"
    sft_dir.mkdir(parents=True)
    (sft_dir / "summary.json").write_text(json.dumps(summary, default=str))
    with pytest.raises(ValueError, match=r"holds an SFT with other settings \(sft.lr\): use another --out"):
        run_demo(demo_config(TINY + ["sft.lr=0.5"], str(tmp_path)), str(tmp_path))
