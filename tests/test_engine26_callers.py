"""Built-in callers of a forced HF engine size its context (max_model_len, now given by build_engine) to the budget
they ask for: HONEST's generate_records with eval.max_tokens above rollout.max_tokens was refused."""


def test_calibration_records_with_a_budget_above_rollout_max_tokens(tiny_text_path):
    from mmevo.config import load_config
    from mmevo.honest.calibration import calibration_heldout, generate_records

    cfg = load_config(None, [f"model.path={tiny_text_path}", "data.heldout=honest_tasks", "data.n_heldout=2",
                             "data.system_prompt=honest", "trainer.progress=false", "data.max_prompt_length=440",
                             "rollout.max_tokens=4", "eval.max_tokens=40"])
    held, _ = calibration_heldout(cfg)
    recs = generate_records(cfg, tiny_text_path, held[:2], samples=1, temperature=0.0)
    assert len(recs) == 2
    assert cfg.trainer.eval_max_tokens == 0  # the caller's config is left as it was


def test_calibration_records_answer_prompts_longer_than_the_training_limit(tiny_text_path):
    """The protocol's system prompt alone passes a 256-token data.max_prompt_length (grpo_tiny's): once build_engine
    gave the HF engine a context, `mmevo eval --calibration` refused every task; the engine's context now holds the
    prompts it is given."""
    from mmevo.config import load_config
    from mmevo.honest.calibration import calibration_heldout, generate_records

    cfg = load_config(None, [f"model.path={tiny_text_path}", "data.heldout=honest_tasks", "data.n_heldout=2",
                             "data.system_prompt=honest", "trainer.progress=false", "data.max_prompt_length=64",
                             "rollout.max_tokens=4", "eval.max_tokens=6"])
    held, _ = calibration_heldout(cfg)
    recs = generate_records(cfg, tiny_text_path, held[:2], samples=1, temperature=0.0)
    assert len(recs) == 2 and all(r["n_tokens"] <= 6 for r in recs)
    assert cfg.data.max_prompt_length == 64  # the caller's config is left as it was


def test_demo_sampled_eval_samples_prompts_longer_than_the_training_limit(tiny_text_path):
    from mmevo.config import load_config
    from mmevo.data.schema import Example
    from mmevo.demo import EVAL_SAMPLES, sampled_eval

    cfg = load_config(None, [f"model.path={tiny_text_path}", "data.max_prompt_length=8", "rollout.max_tokens=4",
                             "trainer.eval_max_tokens=4", "trainer.progress=false"])
    long = "Add the numbers " + " + ".join(str(i) for i in range(20)) + "."
    examples = [Example(id=str(i), problem=long, answer="190", choices=[], images=[]) for i in range(2)]
    res = sampled_eval(cfg, tiny_text_path, examples)
    assert len(res["per_problem"]["pass1"]) == 2 and EVAL_SAMPLES >= 1
    assert cfg.data.max_prompt_length == 8
