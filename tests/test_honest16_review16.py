"""Review 16 of HONEST: rows of the GSS problem pool that the loop drops are counted, not silent (1); the reward heads
give the seed's values of the written confidences rounded once (2); a solver task file's rows that
data.skip_bad_rows leaves out are counted in the loop's summary, and without it a row missing its answer is an error
naming file, row and field (3); a real kill -9 in the middle of a step's replay write-back reruns to the uninterrupted
run (4)."""

from __future__ import annotations

import json

from mmevo.honest.loop import read_pool
from mmevo.honest.selfplay import GSSMixSource, PoolGenerator


def _row(i, expression, step=1):
    return json.dumps({"id": i, "answer": "0", "meta": {"expression": expression}, "step": step})


# -- 1. the pool file's dropped rows are counted -----------------------------------------------------------------------
def _bad_pool(tmp_path):
    path = tmp_path / "pool.jsonl"
    path.write_text("\n".join([
        _row("a", "2 + 3"),
        _row("b", "4 * 4")[:20],  # torn by a kill mid-write
        '["not", "a row"]',  # JSON, but no row
        json.dumps({"answer": "3", "meta": {"expression": "1 + 2"}}),  # no id
        json.dumps({"id": "c", "answer": "3"}),  # no meta.expression
        json.dumps({"id": "d", "meta": {"expression": 7}}),  # an expression that is no string
        _row("e", "1 / 0"),  # division is outside the task grammar: unverifiable
        _row("f", "not (3 < 4)"),
    ]) + "\n")
    return path


def test_read_pool_counts_each_dropped_rows_reason(tmp_path):
    skipped = {}
    pool = read_pool(_bad_pool(tmp_path), limit=10, skipped=skipped)
    assert [(ex.meta["expression"], ex.answer) for ex in pool] == [("2 + 3", "5"), ("not (3 < 4)", "False")]
    assert skipped == {"not_a_row": 3, "no_expression": 2, "unverifiable": 1}
    # without a dict to count into, the same problems
    assert [ex.id for ex in read_pool(_bad_pool(tmp_path), limit=10)] == [ex.id for ex in pool]


def test_a_clean_pool_counts_nothing(tmp_path):
    path = tmp_path / "pool.jsonl"
    path.write_text(_row("a", "2 + 3") + "\n" + _row("a", "2 + 3", step=2) + "\n" + _row("b", "5 % 3") + "\n")
    skipped = {}
    assert len(read_pool(path, limit=10, skipped=skipped)) == 2 and skipped == {}


def test_the_solvers_gss_metrics_show_the_dropped_rows(tmp_path, capsys):
    class Base:
        def take(self, k):
            return []

    from mmevo.honest.loop import load_pool

    generator = PoolGenerator(seed=0)
    path = _bad_pool(tmp_path)
    load_pool(generator, path, limit=10)
    assert len(generator.pool) == 2 and generator.pool_skipped == 6
    assert GSSMixSource(Base(), generator, share=1.0).metrics()["gss/pool_skipped"] == 6.0
    err = capsys.readouterr().err
    assert str(path) in err and "no_expression: 2, not_a_row: 3, unverifiable: 1" in err


# -- 2. the heads' rewards are the seed's values rounded once ------------------------------------------------------
def _sample(response, gold):
    from types import SimpleNamespace

    return SimpleNamespace(response=response, gold=gold, choices=None, aux={})


def _f32(x):
    import torch

    return torch.tensor(x, dtype=torch.float64).to(torch.float32).item()


def test_brier_and_hindsight_heads_are_the_correctly_rounded_seed_values_at_every_two_decimal_confidence():
    # R_B = -(c - y)^2, R_H = -0.3 (r - y)^2 (seed 2.1) of the written decimal, rounded to float32 once; the heads
    # rounded c to float32 first and missed 84 of these 202 Brier rewards by an ulp (c = 0.05, y = 0: -0.0025000002)
    from mmevo.honest.protocol import format_response
    from mmevo.rewards.honest import HonestBrierHead, HonestHindsightHead

    samples, brier, hindsight = [], [], []
    for i in range(101):
        c = i / 100
        for gold, y in (("4", 1.0), ("5", 0.0)):
            samples.append(_sample(format_response("work", "4", c, hindsight=c), gold))
            brier.append(_f32(-(c - y) ** 2))
            hindsight.append(_f32(-0.3 * (c - y) ** 2))
    assert HonestBrierHead().score(samples)[0].tolist() == brier
    assert HonestHindsightHead("legacy", k=0.3).score(samples)[0].tolist() == hindsight
    assert HonestBrierHead().score([samples[11]])[0].item() == _f32(-0.0025)  # c = 0.05, wrong


def test_casr_head_is_the_correctly_rounded_seed_value():
    # alpha [(c - y)^2 - (r - y)^2] + beta (critique >= 16 chars), clipped to +-0.3 (seed 2.5): c = 0.35, r = 0.15,
    # wrong answer: 0.1225 - 0.0225 + 0.05 = 0.15
    from mmevo.honest.protocol import format_response
    from mmevo.rewards.honest import HonestHindsightHead

    text = format_response("work", "4", 0.35, critique="the carry in step two is wrong", refined_confidence=0.15)
    got = HonestHindsightHead("refined").score([_sample(text, "5")])[0].item()
    assert got == _f32((0.35 - 0.0) ** 2 - (0.15 - 0.0) ** 2 + 0.05)


# -- 3. a solver task file's skipped rows reach the loop's summary --------------------------------------------------
def _task_file(tmp_path):
    rows = [{"id": f"t{i}", "problem": f"Compute {i} + 3. Give the exact integer.", "answer": str(i + 3),
             "meta": {"domain": "arithmetic", "difficulty": 1, "expression": f"{i} + 3"}} for i in range(6)]
    rows.insert(2, {"id": "no-answer", "problem": "Compute 4 * 4. Give the exact integer.",
                    "meta": {"domain": "arithmetic", "difficulty": 1, "expression": "4 * 4"}})
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _file_cfg(model, tmp_path, *extra):
    from mmevo.config import load_config

    return load_config("configs/honest_tiny.yaml", [
        f"model.path={model}", f"honest.output_dir={tmp_path / 'run'}",
        f"honest.roles={{solver: {{data.train: {_task_file(tmp_path)}}}}}", "data.n_heldout=0", *extra])


def test_a_task_row_without_its_answer_is_an_error_naming_file_row_and_field(tmp_path):
    from pathlib import Path

    import pytest

    from mmevo.honest.loop import role_config, solver_sources

    cfg = _file_cfg("tiny-text", tmp_path)
    rc = role_config(cfg, "solver", tmp_path / "run" / "solver", "tiny-text")
    with pytest.raises(Exception, match=r"tasks\.jsonl:3 .*no-answer.*field 'answer'"):
        solver_sources(cfg, rc, Path("unused"))


def test_a_skipped_task_row_is_counted_in_the_solver_sources_stats(tmp_path):
    from pathlib import Path

    from mmevo.honest.loop import role_config, solver_sources

    cfg = _file_cfg("tiny-text", tmp_path, "data.skip_bad_rows=true")
    rc = role_config(cfg, "solver", tmp_path / "run" / "solver", "tiny-text")
    stats = {}
    _, source, _, train = solver_sources(cfg, rc, Path("unused"), stats=stats)
    assert len(train) == 6
    assert stats["rows"] == 7 and stats["loaded"] == 6 and stats["skipped"] == 1
    assert stats["skipped_by_reason"] == {"missing_answer": 1} and stats["heldout_dropped"] == 0
    assert source.base.base.base.pool_size == 6  # the curriculum's pool: the file's six verified tasks


def test_the_loop_summary_reports_the_skipped_task_rows(tiny_text_path, tmp_path):
    from mmevo.honest.loop import run_honest

    cfg = _file_cfg(tiny_text_path, tmp_path, "data.skip_bad_rows=true", "honest.warmup_sft=false",
                    "honest.eval_calibration=false", "honest.gss_mode='off'", "honest.gss_blocks=1",
                    "honest.gss_block_steps=1", "rollout.max_tokens=16")
    summary = run_honest(cfg)
    assert summary["data"]["skipped_by_reason"] == {"missing_answer": 1} and summary["data"]["loaded"] == 6
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["data"] == summary["data"]


# -- 4. kill -9 in the middle of a step's replay / curriculum write-back, then rerun ------------------------------------
_DRIVER = '''
import os, signal, sys

sys.path.insert(0, sys.argv[1])
from test_honest_loop import _tiny_cfg
from mmevo.honest import replay

kill_at = int(sys.argv[4])
if kill_at:  # SIGKILL on the kill_at-th replay write: some of the step's groups written, the rest and the step not
    calls = [0]
    add = replay.ReplayBuffer.add

    def add_or_die(self, *a, **k):
        calls[0] += 1
        if calls[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return add(self, *a, **k)

    replay.ReplayBuffer.add = add_or_die
from mmevo.honest.loop import run_honest

run_honest(_tiny_cfg(sys.argv[2], sys.argv[3], "honest.eval_calibration=false"))
'''


def _clean_rows(path):
    return [{k: v for k, v in json.loads(line).items() if not k.startswith(("time/", "throughput/", "memory/"))}
            for line in path.read_text().splitlines() if line.strip()]


def test_a_kill_mid_replay_write_back_reruns_to_the_uninterrupted_run(tiny_text_path, tmp_path):
    """SIGKILL while a step writes its groups into the CPR buffer (curriculum outcomes, GSS stub draws, health
    monitor in flight): the rerun resumes from the step before and ends as the uninterrupted run did: the same
    per-step metrics, health events, block summaries and final weights."""
    import hashlib
    import os
    import shutil
    import signal
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests.parent), os.environ.get("PYTHONPATH", "")])}

    def run(out, kill_at=0):
        return subprocess.run([sys.executable, str(driver), str(tests), str(tiny_text_path), str(out), str(kill_at)],
                              env=env, capture_output=True, text=True, timeout=1200)

    ref = tmp_path / "uninterrupted"
    done = run(ref)
    assert done.returncode == 0, done.stderr[-3000:]
    # step 1 writes each of its groups as a new entry (the buffer starts empty): its writes are replay/added
    writes = json.loads((ref / "solver" / "metrics.jsonl").read_text().splitlines()[0])["replay/added"]
    assert writes >= 2  # the warmed-up model states confidences
    out = tmp_path / "killed"
    out.mkdir()
    shutil.copytree(ref / "warmup", out / "warmup")  # the same calibration SFT, not trained again
    kill_at = int(writes) + 2  # in a later step's write-back (step 2's on this machine), after one of its groups
    killed = run(out, kill_at)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert not (out / "summary.json").exists()
    rerun = run(out)
    assert rerun.returncode == 0, rerun.stderr[-3000:]

    assert _clean_rows(out / "solver" / "metrics.jsonl") == _clean_rows(ref / "solver" / "metrics.jsonl")
    assert (out / "health_events.jsonl").read_text() == (ref / "health_events.jsonl").read_text()
    summary, want = (json.loads((d / "summary.json").read_text()) for d in (out, ref))
    assert summary["blocks"] == want["blocks"]
    digest = [hashlib.sha256((d / "solver" / "final" / "model.safetensors").read_bytes()).hexdigest() for d in (out, ref)]
    assert digest[0] == digest[1]
