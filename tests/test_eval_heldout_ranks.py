"""`mmevo eval` of held-out accuracy runs as one process, as `--benchmark` and `--calibration` do: under a launcher
every rank loaded the model, generated the whole data.heldout set and printed the same summary."""

import pytest

from mmevo.config import load_config
from mmevo.recipes import run_eval

REFUSAL = "mmevo eval (held-out accuracy) runs as one process, not under a launcher with WORLD_SIZE=2"


def test_heldout_eval_under_a_launchers_environment_is_refused_before_loading(tiny_vl_path, monkeypatch):
    for k in ("RANK", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    cfg = load_config(None, [f"model.path={tiny_vl_path}", "data.heldout=synthetic", "data.n_heldout=2",
                             "rollout.max_tokens=4", "trainer.progress=false"])
    import mmevo.recipes as recipes

    loaded = []
    monkeypatch.setattr(recipes, "load_policy", lambda c: loaded.append(c) or pytest.fail("model loaded"))
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match=REFUSAL.replace("(", r"\(").replace(")", r"\)")):
        run_eval(cfg)
    assert not loaded
    monkeypatch.undo()  # one process (no launcher's environment): it loads the model and scores the set
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    result = run_eval(cfg)
    assert result["n"] == 2 and 0.0 <= result["accuracy"] <= 1.0
