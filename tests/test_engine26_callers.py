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
