"""Trainer review 4: a checkpoint dir without its weights is torn (not resumed from); a damaged weights file is named;
a resume whose weights / optimizer state cannot fit this run's settings names the changed settings; the lr schedule
over several mini-batches and PPO epochs; a resume at the final step is a no-op."""

import json

import pytest
import torch

from conftest import randomize
from test_trainer_review3 import _cfg, _trainer, data  # noqa: F401  (the module-scoped data fixture)
from mmevo.grpo.checkpoint import DamagedCheckpointError, latest_checkpoint, list_checkpoints, load_model_weights
from mmevo.grpo.trainer import GRPOTrainer
from mmevo.models.loader import load_model
from mmevo.rollout.factory import build_engine


def _files(root, name, files):
    for f, text in files.items():
        (root / name / f).parent.mkdir(parents=True, exist_ok=True)
        (root / name / f).write_text(text)


def test_a_checkpoint_without_its_weights_is_torn(tmp_path):
    root = tmp_path / "checkpoints"
    index = json.dumps({"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}})
    base = {"trainer_state.pt": "x", "model/config.json": "{}"}
    _files(root, "step_000001", {**base, "model/model.safetensors": "x"})
    _files(root, "step_000002", {**base, "model/model.safetensors.index.json": index, "model/model-1.safetensors": "x",
                                 "model/model-2.safetensors": "x"})
    _files(root, "step_000003", base)  # an interrupted copy: config, no weights
    _files(root, "step_000004", {**base, "model/model.safetensors.index.json": index,  # a shard missing
                                 "model/model-1.safetensors": "x"})
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step_000001", "step_000002"]
    assert latest_checkpoint(tmp_path).name == "step_000002"


def test_resume_skips_a_newer_checkpoint_without_weights(tiny_text_path, tmp_path, data):
    _trainer(_cfg(tmp_path, **{"trainer.steps": 2}), tiny_text_path, data).train()
    (tmp_path / "checkpoints" / "step_000002" / "model" / "model.safetensors").unlink()
    tr = _trainer(_cfg(tmp_path, **{"trainer.steps": 2}), tiny_text_path, data)
    assert tr.maybe_resume() and tr.step_idx == 1  # was transformers' OSError "no file named model.safetensors"


@pytest.mark.parametrize("how", ["head", "half", "zeros", "index"])
def test_a_damaged_weights_file_names_the_checkpoint_and_the_previous_one(tiny_text_path, tmp_path, data, how):
    tr = _trainer(_cfg(tmp_path, **{"trainer.steps": 2}), tiny_text_path, data)
    tr.train()
    model = tmp_path / "checkpoints" / "step_000002" / "model"
    w = model / "model.safetensors"
    raw = w.read_bytes()
    if how == "index":  # a sharded save whose index is cut
        w.rename(model / "model-00001-of-00001.safetensors")
        (model / "model.safetensors.index.json").write_text('{"weight_map": {"a": "model-0')
    else:
        w.write_bytes({"head": raw[:100], "half": raw[: len(raw) // 2], "zeros": bytes(len(raw))}[how])
    with pytest.raises(DamagedCheckpointError) as e:  # was safetensors' "Error while deserializing header"
        load_model_weights(tr.model, model)
    msg = str(e.value)
    assert f"checkpoint file {model} cannot be read" in msg
    assert f"delete {model.parent} to resume from step_000001" in msg


@pytest.mark.parametrize("rank", [8, 0])
def test_a_resume_that_cannot_load_under_another_lora_rank_names_the_setting(tiny_text_path, tmp_path, data, rank):
    _trainer(_cfg(tmp_path, **{"model.lora.rank": 4}), tiny_text_path, data).train()
    tr = _trainer(_cfg(tmp_path, **{"trainer.steps": 2, "model.lora.rank": rank}), tiny_text_path, data)
    # was torch's "The size of tensor a (8) must match ..." / "... doesn't match the size of optimizer's group"
    with pytest.raises(ValueError, match=r"step_000001: its weights / optimizer state do not fit this run, whose "
                                         r"settings differ from the checkpoint's in model\.lora \("):
        tr.maybe_resume()


def _logging_trainer(cfg, path, data):
    lm = load_model(path)
    randomize(lm.model, std=0.15, seed=11)
    return GRPOTrainer(cfg, lm, build_engine(cfg, lm), data[0], [], ref_model=None)


@pytest.mark.filterwarnings("ignore:Seems like `optimizer.step\(\)` has been overridden")
def test_lr_schedule_over_mini_batches_and_epochs_and_a_resume_at_the_final_step(tiny_text_path, tmp_path, data):
    # 2 prompts / step, 1 per mini-batch, 3 PPO epochs: 6 optimizer updates a step, 12 in 2 steps; warm-up 4 updates
    # (lr * (i + 1) / 4), then cosine over the remaining 8: lr * (1 + cos(pi * (i - 4) / 8)) / 2
    over = {"trainer.steps": 2, "trainer.save_every": 2, "algo.ppo_epochs": 3, "trainer.warmup_steps": 4,
            "trainer.lr_schedule": "cosine"}
    tr = _logging_trainer(_cfg(tmp_path, **over), tiny_text_path, data)
    seen, step = [], tr.optimizer.step
    tr.optimizer.step = lambda *a, **k: (seen.append([g["lr"] for g in tr.optimizer.param_groups]), step(*a, **k))[1]
    history = tr.train()
    expected = [2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 9.619397662556434e-4, 8.535533905932737e-4, 6.913417161825449e-4,
                5e-4, 3.086582838174551e-4, 1.4644660940672628e-4, 3.806023374435663e-5]
    assert [lr for lr, _ in seen] == pytest.approx(expected, rel=1e-12, abs=0)
    assert all(a == b for a, b in seen)  # decay and no-decay groups alike
    assert [m["lr"] for m in history] == pytest.approx([expected[0], expected[6]], rel=1e-12, abs=0)
    weights = {k: v.clone() for k, v in tr.model.state_dict().items()}
    lines = (tmp_path / "metrics.jsonl").read_text()
    again = _logging_trainer(_cfg(tmp_path, **over), tiny_text_path, data)
    assert again.train() == [] and again.step_idx == 2  # resumed at the final step: nothing more runs or is logged
    assert (tmp_path / "metrics.jsonl").read_text() == lines
    assert all(torch.equal(weights[k], v) for k, v in again.model.state_dict().items())
    assert again.scheduler.last_epoch == 12


def test_micro_batch_split_keeps_running_totals_equal_to_forward_tokens():
    """split_micro_batches counts tokens incrementally (recounting the micro-batch per added sample was quadratic:
    6.5 s for 4,096 samples); its splits equal the definition through forward_tokens on random layouts."""
    import random
    from types import SimpleNamespace as NS

    from mmevo.grpo.trainer import forward_tokens, split_micro_batches

    def by_definition(ids, prompts, responses, mbs, budget, packs):
        out, cur = [], []
        for i in ids:
            if cur and (len(cur) >= mbs or (budget and forward_tokens(cur + [i], prompts, responses, packs) > budget)):
                out.append(cur)
                cur = []
            cur.append(i)
        return out + [cur] if cur else out

    rng = random.Random(0)
    for _ in range(1500):
        groups = [NS(input_ids=[0] * rng.randint(1, 30)) for _ in range(rng.randint(1, 5))]
        n = rng.randint(1, 30)
        prompts = [rng.choice(groups) for _ in range(n)]
        responses = [[0] * rng.randint(0, 20) for _ in range(n)]
        ids = rng.sample(range(n), rng.randint(1, n))
        args = (ids, prompts, responses, rng.randint(1, 12), rng.choice([0, 1, 10, 40, 80, 200]), rng.random() < 0.5)
        assert split_micro_batches(*args) == by_definition(*args)
