"""Review 13 of HONEST: what a kill -9 leaves behind in the loop's cached outputs (the frozen block solver of the
trainable generator) and the rerun that must finish as the uninterrupted run did."""

import hashlib
import json
import shutil

import pytest

from test_honest_loop import _rows, _tiny_cfg


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _text(path):
    return path.read_text() if path.exists() else None


def _gss_cfg(model, out):
    # the trainable generator without warm-ups or reports: the loop's block structure alone, fast on CPU
    return _tiny_cfg(model, out, "honest.gss_mode=trainable", "honest.gss_blocks=1", "honest.gss_block_steps=1",
                     "honest.warmup_sft=false", "honest.eval_calibration=false", "honest.gss_solver_samples=2",
                     "honest.roles={generator: {rollout.max_tokens: 16}}", "rollout.max_tokens=24")


def test_a_frozen_block_solver_torn_by_a_kill_mid_export_is_exported_again(tiny_text_path, tmp_path):
    from mmevo.honest.loop import run_honest

    ref = tmp_path / "uninterrupted"
    run_honest(_gss_cfg(tiny_text_path, ref))
    frozen = ref / "blocks" / "block_1" / "solver"
    assert (frozen / "model.safetensors").exists()

    # the state a kill -9 during the export of block 1's frozen solver leaves: the solver trained and checkpointed
    # its block, the export wrote config.json (transformers writes it first) but not the weights or the tokenizer,
    # and the generator never started its block
    out = tmp_path / "killed"
    shutil.copytree(ref, out)
    shutil.rmtree(out / "generator")
    shutil.rmtree(out / "solver" / "final")
    (out / "summary.json").unlink()
    torn = out / "blocks" / "block_1" / "solver"
    for f in torn.iterdir():
        if f.name != "config.json":
            f.unlink()
    # the rerun took config.json for a finished export and handed the generator a solver without weights (it
    # failed to load); it exports block 1's solver again and trains the generator as the uninterrupted run did
    summary = run_honest(_gss_cfg(tiny_text_path, out))
    assert _digest(torn / "model.safetensors") == _digest(frozen / "model.safetensors")
    assert {f.name for f in torn.iterdir()} == {f.name for f in frozen.iterdir()}
    assert _same_curves(_rows(out / "generator" / "metrics.jsonl"), _rows(ref / "generator" / "metrics.jsonl"))
    assert _text(out / "generator" / "pool.jsonl") == _text(ref / "generator" / "pool.jsonl")
    assert _digest(out / "generator" / "final" / "model.safetensors") == \
        _digest(ref / "generator" / "final" / "model.safetensors")
    assert summary["blocks"] == json.loads((ref / "summary.json").read_text())["blocks"]
    assert not list((out / "blocks" / "block_1").glob("*.partial"))  # no export left half-way beside it


class Killed(Exception):
    pass


def test_a_kill_mid_export_leaves_no_frozen_block_solver_to_reuse(tiny_text_path, tmp_path, monkeypatch):
    # save_pretrained writes config.json and the weights before the tokenizer: killed in between (the tokenizer
    # save raising stands in for the kill), no blocks/block_1/solver may look finished
    import transformers

    from mmevo.honest.loop import run_honest

    ref = tmp_path / "uninterrupted"
    run_honest(_gss_cfg(tiny_text_path, ref))
    out = tmp_path / "killed"
    save = transformers.PreTrainedTokenizerBase.save_pretrained

    def die_in_block_export(self, path, *args, **kwargs):
        if "blocks" in str(path):
            raise Killed
        return save(self, path, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(transformers.PreTrainedTokenizerBase, "save_pretrained", die_in_block_export)
        with pytest.raises(Killed):
            run_honest(_gss_cfg(tiny_text_path, out))
    assert not (out / "blocks" / "block_1" / "solver" / "config.json").exists()
    run_honest(_gss_cfg(tiny_text_path, out))
    frozen = "blocks/block_1/solver/model.safetensors"
    assert _digest(out / frozen) == _digest(ref / frozen)
    assert _same_curves(_rows(out / "generator" / "metrics.jsonl"), _rows(ref / "generator" / "metrics.jsonl"))


def _same_curves(a, b):
    """Per-step metrics equal except wall-clock timings and memory."""
    def clean(rows):
        return [{k: v for k, v in r.items() if not k.startswith(("time/", "throughput/", "memory/"))} for r in rows]
    return clean(a) == clean(b)


def _gss_rollout(examples, aux):
    import torch

    from mmevo.rollout.strategy import Rollout

    n = len(examples)
    return Rollout([None] * n, [None] * n, [""] * n, torch.arange(n) // 2, examples, aux=aux)


def test_gss_metrics_count_this_steps_generated_problems_not_replayed_ones():
    from mmevo.honest.replay import ReplayBuffer, ReplayMixSource
    from mmevo.honest.selfplay import GSSMixSource, StubGenerator, gss_outcome_metrics

    # a stub problem of an earlier step sits in the replay buffer (the buffer takes generated problems like any)
    old = StubGenerator(seed=3).propose(1)[0]
    buffer = ReplayBuffer()
    buffer.add(old, 0.9, False)
    # this step: every base prompt is a replay (share 1), and the GSS mix hands out one fresh stub problem
    replay = ReplayMixSource(_Fresh(), buffer, share=1.0, warmup_steps=0)
    mix = GSSMixSource(replay, StubGenerator(seed=4), share=0.5, seed=1)
    batch = []
    while not (any(ex.meta.get("replay") for ex in batch) and mix.last_generated == 1):
        batch = mix.take(2)
    fresh = [ex for ex in batch if not ex.meta.get("replay")]
    replayed = [ex for ex in batch if ex.meta.get("replay")]
    assert len(fresh) == len(replayed) == 1 and replayed[0].meta["domain"] == fresh[0].meta["domain"] == "gss"
    # two samples per prompt: the fresh problem's |c - y| are 0.2 and 0.4 (mean 0.3), the replayed one's 0.9 and 1
    examples = [fresh[0], fresh[0], replayed[0], replayed[0]]
    aux = [{"correct": True, "confidence": 0.8}, {"correct": False, "confidence": 0.4},
           {"correct": False, "confidence": 0.9}, {"correct": False, "confidence": 1.0}]
    m = gss_outcome_metrics(_gss_rollout(examples, aux))
    # the replayed problem counted as generated: gss/problems 2 beside gss/batch_generated 1, and the generator's
    # reward averaged with the replay's (0.3 + 0.95) / 2 = 0.625
    assert m["gss/problems"] == mix.metrics()["gss/batch_generated"] == 1.0
    assert abs(m["gss/generator_reward"] - 0.3) < 1e-12


class _Fresh:
    """A base source the replay mix never reaches (share 1): any take of it is a test failure."""

    epoch = 0

    def take(self, k):
        assert k == 0, k
        return []

    def state_dict(self):
        return {}


def test_a_step_whose_prompts_are_all_generated_reports_no_replays_or_mutations_of_its_own():
    from mmevo.data.schema import Example
    from mmevo.honest.curriculum import CurriculumSource, DifficultyController
    from mmevo.honest.health import HealthMonitor
    from mmevo.honest.replay import ReplayBuffer, ReplayMixSource
    from mmevo.honest.selfplay import GSSMixSource, StubGenerator

    ctl = DifficultyController(["arithmetic"], start=5)
    ctl.ceilings["arithmetic"] = 6  # every draw at 6 is one mutation of a difficulty-5 task
    buffer = ReplayBuffer()
    buffer.add(Example("old", "What is 2 + 2?", "4", [], []), 0.9, False)
    replay = ReplayMixSource(CurriculumSource(ctl, seed=0, ceiling_share=1.0), buffer, share=0.5, warmup_steps=0)
    mix = GSSMixSource(replay, StubGenerator(seed=0), share=0.5, seed=0)
    monitor = HealthMonitor(reward_std_keys=())
    steps = []
    # step A hands out a replay and a mutated curriculum task, the step after it two generated problems (seeded:
    # the first such pair of steps)
    while not (len(steps) >= 2 and steps[-2][0] == (0, 1) and steps[-1][0] == (2, 0)):
        batch = mix.take(2)
        kinds = (mix.last_generated, sum(bool(ex.meta.get("replay")) for ex in batch))
        metrics = mix.metrics()
        monitor.update(metrics)
        steps.append((kinds, metrics))
        assert len(steps) < 200
    before, after = steps[-2][1], steps[-1][1]
    assert before["replay/batch_replayed"] == 1.0 and before["curriculum/mutations"] == 1.0
    # the replay mix was not asked for a prompt on the all-generated step: it logged the step before's replay and
    # mutation, the health monitor counted that mutation twice, and the replay warm-up counted its own takes, not
    # steps (the seed's --replay-warmup is in steps)
    assert after["replay/batch_replayed"] == 0.0 and after["replay/active"] == 1.0
    assert after["curriculum/mutations"] == 0.0
    assert replay.takes == len(steps)
    assert monitor.counts["mutations"] == sum(m["curriculum/mutations"] for _, m in steps)
