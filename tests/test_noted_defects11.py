"""Three defects noted in earlier reviews and left then, fixed in session 51.

- A strategy metric named as one of the trainer's was refused only after that step's optimizer update: the step
  raised with the weights already moved (and, resumed, the step was lost). The trainer's names and namespaces are now
  refused before the update; the reward heads' too, which are known once the rewards are.
- ``model.ref_offload=true`` with ``algo.kl_coef=0`` loaded no reference and said nothing.
- ``reward.heads.pkg.mod:Class=W`` (a head by import path, set by an override) was split at its dots into nested keys
  and refused with "a head's weight must be a finite number" naming the package, not the head.
- With ``trainer.eval_every`` dividing ``trainer.steps``, the run's final held-out evaluation scored the weights that
  train()'s evaluation at the last step had just scored: a second whole pass.
"""

import json
import warnings

import pytest
import torch

from mmevo.config import ConfigError, load_config
from mmevo.grpo.trainer import TRAINER_METRIC_PREFIXES, TRAINER_METRICS
from mmevo.recipes import build_trainer
from test_hooks_review9 import _Loud, _cfg, _policy, _problems


@pytest.mark.parametrize("key,where", [("data/samples", "rollout"), ("actor/loss", "after"),
                                       ("data/my_count", "rollout"), ("lr", "after"),
                                       ("reward/format/mean", "after")])
def test_a_clashing_strategy_metric_is_refused_before_the_weights_move(tiny_text_path, tmp_path, key, where):
    tr = build_trainer(_cfg(tmp_path), _policy(tiny_text_path), _problems("m"), strategy=_Loud(key, where))
    before = {k: v.clone() for k, v in tr.model.state_dict().items()}
    with pytest.raises(ValueError, match=rf"strategy 'loud' returned metric\(s\) \['{key}'\].*prefix of its own"):
        tr.step()
    assert all(torch.equal(before[k], v) for k, v in tr.model.state_dict().items()), "the refused step updated"
    tr.strategy = _Loud("loud/x", where)
    m = tr.step()  # a name of its own passes, and the same trainer trains on
    assert m["loud/x"] == -1.0
    assert any(not torch.equal(before[k], v) for k, v in tr.model.state_dict().items())
    tr.close()


def test_the_reserved_names_cover_what_a_step_logs(tiny_text_path, tmp_path):
    """Every metric a step returns is a head's (``reward/``), a reserved name, or in a reserved namespace: a new
    trainer metric outside them would again be checked only after the update."""
    tr = build_trainer(_cfg(tmp_path, **{"algo.kl_coef": 0.05}), _policy(tiny_text_path), _problems("m"))
    m = tr.step()
    tr.close()
    loose = [k for k in m if not (k.startswith("reward/") or k in TRAINER_METRICS
                                  or k.startswith(TRAINER_METRIC_PREFIXES))]
    assert loose == []
    assert {"lr", "frac_reward_zero_std", "actor/kl", "data/samples", "time/update"} <= m.keys()


def test_ref_offload_without_kl_is_said(tiny_text_path, tmp_path):
    with pytest.warns(UserWarning, match=r"model.ref_offload=true has no effect with algo.kl_coef=0.*no reference"):
        tr = build_trainer(_cfg(tmp_path / "a", **{"model.ref_offload": True}), _policy(tiny_text_path),
                           _problems("m"))
    assert tr.ref_model is None
    tr.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # with a KL term the setting is used: nothing to say
        tr = build_trainer(_cfg(tmp_path / "b", **{"model.ref_offload": True, "algo.kl_coef": 0.05}),
                           _policy(tiny_text_path), _problems("m"))
    assert tr.ref_model is not None
    tr.close()


def test_a_head_by_import_path_can_be_set_by_an_override():
    cfg = load_config(None, ["reward.heads.mypkg.heads:Coverage=0.5", "reward.heads.other.mod.Head=2"])
    assert cfg.reward.heads == {"accuracy": 1.0, "mypkg.heads:Coverage": 0.5, "other.mod.Head": 2}
    cfg = load_config(None, ["reward.heads.format=0.25"])  # a plain name as before, the others kept
    assert cfg.reward.heads == {"accuracy": 1.0, "format": 0.25}
    with pytest.raises(ConfigError, match=r"reward.heads.mypkg.heads:Coverage='x': a head's weight must be a finite"):
        load_config(None, ["reward.heads.mypkg.heads:Coverage=x"])
    # head_args stay nested: the last part is the argument
    cfg = load_config(None, ["reward.heads.sfr=1", "reward.head_args.sfr.gamma=0.3", "csrs.enabled=true"])
    assert cfg.reward.head_args["sfr"] == {"gamma": 0.3}


@pytest.mark.parametrize("eval_every", [2, 3])
def test_the_final_evaluation_reuses_the_last_periodic_one_of_the_same_weights(tiny_text_path, tmp_path, monkeypatch,
                                                                                 eval_every):
    """With trainer.eval_every dividing trainer.steps, train()'s evaluation at the last step and the run's final
    (eval_after) one scored the same weights: a second whole held-out pass. Now the final one reuses it; where the
    last step was not evaluated (eval_every=3 of 4 steps) it still runs. ``calls``: the step of each held-out pass."""
    from mmevo import recipes
    from mmevo.grpo.trainer import GRPOTrainer

    calls = []
    real = GRPOTrainer.evaluate

    def counted(self, *a, **k):
        calls.append(self.step_idx)
        return real(self, *a, **k)

    monkeypatch.setattr(GRPOTrainer, "evaluate", counted)
    cfg = load_config(None, [f"model.path={tiny_text_path}", "data.train=honest_tasks", "data.n_train=8",
                             "data.n_heldout=4", "data.prompt_template=none", "rollout.n=2", "rollout.max_tokens=4",
                             "trainer.steps=4", f"trainer.eval_every={eval_every}", "trainer.prompts_per_step=2",
                             "trainer.mini_batch_prompts=2", "trainer.save_every=0", "reward.heads={format: 1.0}",
                             f"trainer.output_dir={tmp_path / 'run'}", "trainer.progress=false"])
    summary = recipes.run_grpo(cfg)
    last = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    if eval_every == 2:
        assert calls == [0, 2, 4]  # before, steps 2 and 4; the final one reused step 4's (was [0, 2, 4, 4])
        assert last["eval/accuracy"] == summary["eval_after"]["accuracy"] and last["eval/n"] == summary["eval_after"]["n"]
    else:
        assert calls == [0, 3, 4] and "eval/accuracy" not in last  # before, step 3, the final one
