"""`mmevo train ... trainer.steps=0` evaluates and exports model.path: one held-out pass, not two of the same weights."""
import json

from mmevo.config import load_config


def _count_evaluations(monkeypatch) -> list:
    from mmevo.grpo.trainer import GRPOTrainer

    calls = []
    real = GRPOTrainer.evaluate

    def counting(self, *args, **kwargs):
        calls.append(self.step_idx)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(GRPOTrainer, "evaluate", counting)
    return calls


def _cfg(tiny_vl_path, out, steps):
    return load_config(None, [f"model.path={tiny_vl_path}", "data.n_train=8", "data.n_heldout=6", "rollout.n=2",
                              "rollout.max_tokens=4", f"trainer.steps={steps}", "trainer.prompts_per_step=2",
                              "trainer.mini_batch_prompts=2", "trainer.save_every=0", "trainer.wandb_mode=disabled",
                              f"trainer.output_dir={out}", "trainer.progress=false"])


def test_steps_zero_evaluates_the_held_out_set_once(tiny_vl_path, tmp_path, monkeypatch):
    from mmevo import recipes

    calls = _count_evaluations(monkeypatch)
    summary = recipes.run_grpo(_cfg(tiny_vl_path, tmp_path / "run", 0))
    assert calls == [0]  # was [0, 0]: the "after" evaluation scored the unchanged weights again
    assert summary["eval_after"] == summary["eval_before"] and summary["eval_after"]["n"] == 6
    written = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert written["eval_after"]["accuracy"] == written["eval_before"]["accuracy"]
    assert (tmp_path / "run" / "final" / "config.json").exists()  # still exported


def test_a_run_that_trains_evaluates_before_and_after(tiny_vl_path, tmp_path, monkeypatch):
    from mmevo import recipes

    calls = _count_evaluations(monkeypatch)
    summary = recipes.run_grpo(_cfg(tiny_vl_path, tmp_path / "run", 1))
    assert calls == [0, 1]
    assert summary["eval_after"]["n"] == summary["eval_before"]["n"] == 6


def test_the_held_out_evaluation_of_a_step_is_made_once(tiny_vl_path, tmp_path, monkeypatch):
    """heldout_eval_now() keeps its result for the step (as train()'s periodic evaluation does): the recipe's
    before / after of trainer.steps=0 is that one pass, not a special case beside the trainer's own reuse."""
    from mmevo import recipes

    cfg = _cfg(tiny_vl_path, tmp_path / "run", 1)
    train, _ = recipes.load_examples(cfg, "train")
    heldout, _ = recipes.load_examples(cfg, "heldout")
    trainer = recipes.build_trainer(cfg, recipes.load_policy(cfg), train, heldout)
    calls = _count_evaluations(monkeypatch)
    first = trainer.heldout_eval_now()
    assert trainer.heldout_eval_now() == first and calls == [0]  # was [0, 0]
    trainer.train()
    after = trainer.heldout_eval_now()
    assert calls == [0, 1] and trainer.heldout_eval_now() is after
    trainer.close()


def test_a_resume_at_the_cached_step_evaluates_the_loaded_weights(tiny_vl_path, tmp_path, monkeypatch):
    """heldout_eval_now()'s result is of the weights it scored: a resume loading another step-0 checkpoint's weights
    (other weights at the same step_idx) evaluates them, not the cached result of the weights it replaced."""
    import torch

    from conftest import randomize
    from mmevo import recipes

    cfg = _cfg(tiny_vl_path, tmp_path / "run", 0)
    train, _ = recipes.load_examples(cfg, "train")
    heldout, _ = recipes.load_examples(cfg, "heldout")
    writer = recipes.build_trainer(cfg, recipes.load_policy(cfg), train, heldout)
    randomize(writer.model, std=0.5, seed=7)  # the checkpoint holds other weights than model.path's
    writer.save()  # step_000000
    saved = {k: v.clone() for k, v in writer.model.state_dict().items()}
    writer.close()

    trainer = recipes.build_trainer(cfg, recipes.load_policy(cfg), train, heldout)
    calls = _count_evaluations(monkeypatch)
    first = trainer.heldout_eval_now()  # model.path's weights at step 0
    trainer.train(steps=0)  # resumes step_000000: the same step_idx, the checkpoint's weights
    assert trainer.step_idx == 0
    assert all(torch.equal(v, saved[k]) for k, v in trainer.model.state_dict().items())
    after = trainer.heldout_eval_now()
    assert calls == [0, 0]  # was [0]: the first weights' result returned for the loaded ones
    assert after == trainer.evaluate()
    assert [s["response"] for s in after["samples"]] != [s["response"] for s in first["samples"]]
    trainer.close()
