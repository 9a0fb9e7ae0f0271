"""HONEST without SMC: task rows whose stated answer contradicts their own expression are counted (a metric, the
summary's ``data``, a stderr line), kept in the train set (its size is what a resume checks), and a run from before
the count resumes."""

import json

from mmevo.data.prompts import EpochSampler
from mmevo.data.schema import Example
# the task rows, JSONL writer and solver-source loader of the earlier HONEST loop tests
from test_honest17_loops17 import _jsonl, _solver_sources_of, _task


def test_without_smc_rows_whose_gold_contradicts_their_expression_are_counted_not_dropped(tmp_path, capsys):
    """t4 states 99 for "4 + 3" and t5's expression does not evaluate: with SMC off both were trained on with that
    gold and counted nowhere (stats had no count, the metrics none). Now they count 2 in the stats the summary
    reports, in the metrics and on stderr; the train set (and the sampler's row count) keeps all 5 rows."""
    rows = [_task(0), _task(1), _task(4, answer="99"), _task(5, meta={**_task(5)["meta"], "expression": "5 +"}),
            {"id": "plain", "problem": "What is 2 + 2?", "answer": "4"}]  # no expression: nothing to check
    source, train, stats = _solver_sources_of(tmp_path, _jsonl(rows), "honest.smc_enabled=false")
    assert [ex.id for ex in train] == ["t0", "t1", "t4", "t5", "plain"]
    assert stats["gold_contradicts_expression"] == 2 and "curriculum_pool" not in stats
    assert source.metrics()["honest/gold_contradicts_expression"] == 2.0  # through the replay / GSS / guard wrappers
    from mmevo.honest.loop import _source_in_chain
    from mmevo.honest.plugins import TaskSampler

    assert _source_in_chain(source, TaskSampler).state_dict()["n"] == 5  # the row count a resume checks
    err = capsys.readouterr().err
    assert "2 task rows state an answer their expression does not give" in err
    assert "id 't4': answer '99', expression '4 + 3'" in err


def test_a_clean_task_file_counts_zero_and_prints_nothing(tmp_path, capsys):
    source, _, stats = _solver_sources_of(tmp_path, _jsonl([_task(0), _task(1)]), "honest.smc_enabled=false",
                                          "honest.replay_enabled=false", "honest.gss_mode='off'")
    assert stats["gold_contradicts_expression"] == 0 and source.metrics() == {"honest/gold_contradicts_expression": 0.0}
    assert "their expression does not give" not in capsys.readouterr().err


def test_the_counting_sampler_resumes_a_plain_epoch_sampler_checkpoint():
    """Its state is the EpochSampler's: a checkpoint written before the count loads and continues the same order."""
    from mmevo.honest.plugins import TaskSampler

    exs = [Example(id=f"e{i}", problem=f"Compute {i} + 3.", answer=str(i + 3), choices=[], images=[], solution=None,
                   meta={"domain": "arithmetic", "difficulty": 1, "expression": f"{i} + 3"}) for i in range(7)]
    old = EpochSampler(exs, 11)
    old.take(10)  # into the second epoch
    new = TaskSampler(exs, 11)
    new.load_state_dict(json.loads(json.dumps(old.state_dict())))
    assert new.state_dict() == old.state_dict()
    assert [ex.id for ex in new.take(9)] == [ex.id for ex in old.take(9)]


def test_a_run_from_before_the_count_resumes_and_reports_it(tiny_text_path, tmp_path):
    """A real tiny HONEST run with SMC off on a task file with one contradicting row; its curve and summary are made
    to look like the earlier code's (no count), then a rerun with one more block resumes from the checkpoint, keeps
    the older curve line, logs the count from then on and reports it in summary.json."""
    from mmevo.config import load_config
    from mmevo.honest.loop import run_honest

    out = tmp_path / "run"
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(_jsonl([_task(i) for i in range(7)] + [_task(7, answer="11")]))

    def cfg(blocks):
        return load_config("configs/honest_tiny.yaml", [
            f"model.path={tiny_text_path}", f"honest.output_dir={out}", "honest.warmup_sft=false",
            "honest.eval_calibration=false", f"honest.gss_blocks={blocks}", "honest.gss_block_steps=1",
            f"honest.roles={{solver: {{data.train: {tasks}}}}}", "honest.smc_enabled=false", "data.n_heldout=0",
            "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2", "rollout.n=2", "rollout.max_tokens=8"])

    first = run_honest(cfg(1))
    assert first["data"]["gold_contradicts_expression"] == 1 and first["data"]["loaded"] == 8
    curve = out / "solver" / "metrics.jsonl"
    old_lines = [{k: v for k, v in json.loads(line).items() if k != "honest/gold_contradicts_expression"}
                 for line in curve.read_text().splitlines()]
    curve.write_text("".join(json.dumps(r) + "\n" for r in old_lines))
    summary = json.loads((out / "summary.json").read_text())
    del summary["data"]["gold_contradicts_expression"]
    (out / "summary.json").write_text(json.dumps(summary))

    resumed = run_honest(cfg(2))
    assert resumed["data"]["gold_contradicts_expression"] == 1
    assert [b["solver_steps"] for b in resumed["blocks"]] == [1, 1]
    rows = [json.loads(line) for line in curve.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert rows[0] == old_lines[0]
    assert rows[1]["honest/gold_contradicts_expression"] == 1.0
    assert sorted(p.name for p in (out / "solver" / "checkpoints").iterdir())[-1] == "step_000002"


def test_a_resumed_run_draws_the_train_rows_an_uninterrupted_run_draws(tiny_text_path, tmp_path, monkeypatch):
    """Real tiny HONEST runs with SMC off: 3 blocks in one go, and 1 block then a resume to 3 blocks, draw the same
    task rows in the same order from the train sampler (its draws are recorded, not changed)."""
    from mmevo.config import load_config
    from mmevo.honest.loop import run_honest

    tasks = tmp_path / "tasks.jsonl"
    task_ids = {f"t{i}" for i in range(5)}
    tasks.write_bytes(_jsonl([_task(i) for i in range(4)] + [_task(4, answer="0")]))
    drawn: list[str] = []
    real_take = EpochSampler.take

    def recording_take(self, k):
        out = real_take(self, k)
        if {ex.id for ex in self.examples} == task_ids:  # the solver's train sampler, not another role's
            drawn.extend(ex.id for ex in out)
        return out

    monkeypatch.setattr(EpochSampler, "take", recording_take)

    def run(out, blocks):
        return run_honest(load_config("configs/honest_tiny.yaml", [
            f"model.path={tiny_text_path}", f"honest.output_dir={out}", "honest.warmup_sft=false",
            "honest.eval_calibration=false", f"honest.gss_blocks={blocks}", "honest.gss_block_steps=1",
            f"honest.roles={{solver: {{data.train: {tasks}}}}}", "honest.smc_enabled=false", "data.n_heldout=0",
            "honest.replay_enabled=false", "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2",
            "rollout.n=2", "rollout.max_tokens=8"]))

    run(tmp_path / "whole", 3)
    whole = list(drawn)
    drawn.clear()
    run(tmp_path / "split", 1)
    first_part = list(drawn)
    drawn.clear()
    resumed = run(tmp_path / "split", 3)
    # 2 prompts per step, 1 step per block; 5 rows: the third block crosses into the second epoch
    assert len(whole) == 6 and len(first_part) == 2
    assert first_part + drawn == whole
    assert resumed["data"]["gold_contradicts_expression"] == 1
