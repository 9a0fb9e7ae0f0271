"""Review 9 of the loop hooks: a teacher / solver self-play loop on the tiny text model, written from the README.

- Two live trainers of one process on one output_dir (a loop that forgot to give each role its own): the second is
  warned of as it starts (taking over the directory), and the first refuses to train or save after that. Before, the
  solver silently resumed the teacher's checkpoint and the two went on writing one metrics.jsonl and one checkpoint
  series.
- ``step()`` before the first ``train()`` on an output_dir with a checkpoint is refused: ``train()`` used to resume the
  checkpoint over the steps just run, silently discarding them.
- A strategy's metric that the trainer or a head logs too (``data/samples``, ``reward/total/mean``) is refused: one
  of the two values used to overwrite the other silently.
"""

import json
import random
import warnings

import pytest
import torch

from conftest import randomize
from mmevo.config import load_config
from mmevo.data.schema import Example
from mmevo.models.loader import load_model
from mmevo.recipes import build_trainer
from mmevo.rollout.strategy import RolloutStrategy, sample_groups


def _cfg(out, **over):
    base = {"data.prompt_template": "none", "rollout.n": 2, "rollout.max_tokens": 4, "trainer.prompts_per_step": 2,
            "trainer.mini_batch_prompts": 1, "trainer.micro_batch_seqs": 4, "trainer.lr": 1e-2, "trainer.steps": 4,
            "trainer.output_dir": str(out), "trainer.wandb_mode": "disabled", "trainer.progress": False,
            "trainer.save_every": 1, "algo.kl_coef": 0, "trainer.seed": 3, "reward.heads": "{format: 1.0}"}
    base.update(over)
    return load_config(None, [f"{k}={v}" for k, v in base.items()])


def _problems(prefix, k=8):
    return [Example(f"{prefix}{i}", f"What is {i} + {i + 1}?", str(2 * i + 1), [], []) for i in range(k)]


def _policy(path, seed=1):
    lm = load_model(path)
    randomize(lm.model, std=0.15, seed=seed)
    return lm


def test_a_second_live_trainer_on_one_output_dir_is_warned_of_and_the_first_refused(tiny_text_path, tmp_path):
    shared = tmp_path / "loop"  # a loop that forgot to give its two roles their own output_dir
    teacher = build_trainer(_cfg(shared), _policy(tiny_text_path, 1), _problems("t"))
    solver = build_trainer(_cfg(shared), _policy(tiny_text_path, 2), _problems("s"))
    teacher.train(steps=1)
    with pytest.warns(UserWarning, match=r"output_dir=.*loop was started by another trainer of this process that is "
                                         r"not closed.*needs its own output_dir"):
        solver.train(steps=1)  # (also how a rerun in one process, after a crash, takes over the directory)
    assert solver.step_idx == 2  # it resumed the teacher's step 1
    with pytest.raises(ValueError, match=r"output_dir=.*loop was taken over by another trainer of this process"):
        teacher.train(steps=1)  # the teacher's next phase no longer writes into the solver's run
    with pytest.raises(ValueError, match="taken over"):
        teacher.save()
    assert teacher.step_idx == 1
    assert [json.loads(l)["step"] for l in (shared / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    solver.close()
    teacher.close()
    # after close() the directory passes on without a word: a later phase may reuse it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        later = build_trainer(_cfg(shared), _policy(tiny_text_path, 3), _problems("s"))
        later.train(steps=0)
    assert later.step_idx == 2
    later.close()


def test_step_before_train_on_a_resumable_dir_is_refused_not_silently_rewound(tiny_text_path, tmp_path):
    first = build_trainer(_cfg(tmp_path), _policy(tiny_text_path), _problems("a"))
    first.train(steps=1)
    first.close()
    again = build_trainer(_cfg(tmp_path), _policy(tiny_text_path), _problems("a"))
    again.step()
    again.step()
    trained = {k: v.clone() for k, v in again.model.state_dict().items()}
    with pytest.raises(ValueError, match=r"ran 2 step\(s\) through step\(\) before its first train\(\).*"
                                         r"step_000001.*train\(steps=0\)"):
        again.train(steps=1)
    assert again.step_idx == 2  # nothing was rewound
    assert all(torch.equal(trained[k], v) for k, v in again.model.state_dict().items())
    again.close()
    # the documented order: resume first, then step() continues from the checkpoint
    third = build_trainer(_cfg(tmp_path), _policy(tiny_text_path), _problems("a"))
    third.train(steps=0)
    assert third.step_idx == 1
    third.step()
    assert third.step_idx == 2
    third.close()


class _Loud(RolloutStrategy):
    name = "loud"

    def __init__(self, key, where):
        self.key, self.where = key, where

    def rollout(self, ctx, examples):
        ro = sample_groups(ctx, examples)
        if self.where == "rollout":
            ro.extra_metrics[self.key] = -1.0
        return ro

    def after_rewards(self, rollout, rewards):
        return {self.key: -1.0} if self.where == "after" else {"loud/rounds": 1.0}


@pytest.mark.parametrize("key,where", [("data/samples", "rollout"), ("reward/total/mean", "after"),
                                       ("reward/format/mean", "after")])
def test_strategy_metrics_may_not_overwrite_the_trainers(tiny_text_path, tmp_path, key, where):
    tr = build_trainer(_cfg(tmp_path), _policy(tiny_text_path), _problems("m"), strategy=_Loud(key, where))
    with pytest.raises(ValueError, match=rf"strategy 'loud' returned metric\(s\) \['{key}'\].*prefix of its own"):
        tr.step()
    tr.strategy = _Loud("loud/x", where)
    m = tr.step()
    assert m["loud/x"] == -1.0  # a namespaced name passes through
    assert m["data/samples"] == 4 and m["reward/total/mean"] >= 0
    tr.close()


class _GlobalRandomSource:
    """A plug-in that draws from the process's ``random`` (as much research code does) rather than its own RNG."""

    def __init__(self):
        self.picked: list[int] = []

    def take(self, k):
        picks = [random.randrange(1000) for _ in range(k)]
        self.picked += picks
        return [Example(f"g{p}", f"What is {p} + 1?", str(p + 1), [], []) for p in picks]

    def state_dict(self):
        return {"picked": list(self.picked)}

    def load_state_dict(self, state):
        self.picked = list(state["picked"])


def _global_draws(path, out, offset, disturb):
    random.seed(disturb)  # whatever the process drew before
    source = _GlobalRandomSource()
    tr = build_trainer(_cfg(out, **{"trainer.steps": 2}), _policy(path), prompt_source=source)
    tr.seed_offset = offset
    tr.train(steps=1)
    tr.close()
    return source.picked


def test_a_fresh_start_seeds_the_global_generators_from_the_seed_and_offset(tiny_text_path, tmp_path):
    first = _global_draws(tiny_text_path, tmp_path / "a", 1, disturb=11)
    assert _global_draws(tiny_text_path, tmp_path / "b", 1, disturb=12) == first  # reproducible from trainer.seed
    assert _global_draws(tiny_text_path, tmp_path / "c", 2, disturb=11) != first  # another role / phase
    # a resume restores the generators of its checkpoint instead: step 2 draws what an uninterrupted run drew
    whole = build_trainer(_cfg(tmp_path / "whole", **{"trainer.steps": 2}), _policy(tiny_text_path),
                          prompt_source=_GlobalRandomSource())
    whole.seed_offset = 1
    whole.train()
    whole.close()
    random.seed(13)
    resumed = build_trainer(_cfg(tmp_path / "a", **{"trainer.steps": 2}), _policy(tiny_text_path),
                            prompt_source=_GlobalRandomSource())
    resumed.train()
    assert resumed.step_idx == 2 and resumed.prompt_source.picked == whole.prompt_source.picked
    resumed.close()
