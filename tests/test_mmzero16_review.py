"""Review 16 of MM-Zero against its seed (001): the reward API's errors name the argument at fault, and a kill -9
of the loop mid-phase / between phases reruns to the records and summary of an uninterrupted run."""

import pytest
import torch

from mmevo.rewards.mmzero import proposal_rewards


def _row(**over):
    args = dict(executed=torch.tensor([[True, False]]), easy_accuracy=torch.tensor([[1.0, 0.0]]),
                consistency=torch.tensor([[0.5, 0.0]]), adjustments=torch.zeros(1, 3), valid=torch.tensor([True]))
    args.update(over)
    return args


def test_the_seed_example_scores_one_half():
    """Seed: "With one success in two attempts, easy=1 and c=0.5 yield base reward 0.5"."""
    assert proposal_rewards(**_row()).tolist() == [0.5]


@pytest.mark.parametrize("over, message", [
    # a list used to fail with AttributeError: "'list' object has no attribute 'shape'" (no argument named)
    ({"easy_accuracy": [[1.0, 0.0]]}, r"^easy_accuracy must be a tensor, got list$"),
    ({"executed": [[True, False]]}, r"^executed must be a tensor, got list$"),
    ({"valid": [True]}, r"^valid must be a tensor, got list$"),
    # each shape error names its argument alone: these used to read "easy_accuracy / consistency must be [1, 2], got
    # (1, 2), (1, 1)" and "adjustments must be float [1, 3] and valid bool [1], got (1, 3), torch.bool (2,)"
    ({"consistency": torch.zeros(1, 1)}, r"^consistency must be \[1, 2\] \(B, N from executed\), got \(1, 1\)$"),
    ({"easy_accuracy": torch.zeros(2, 2)}, r"^easy_accuracy must be \[1, 2\]"),
    ({"adjustments": torch.zeros(1, 2)}, r"^adjustments must be \[1, 3\] \(B from executed\), got \(1, 2\)$"),
    ({"valid": torch.tensor([True, False])}, r"^valid must be a bool \[1\] tensor .*got torch.bool \(2,\)$"),
    ({"valid": torch.tensor([1.0])}, r"^valid must be a bool \[1\] tensor .*got torch.float32 \(1,\)$"),
    ({"executed": torch.zeros(1, 0, dtype=torch.bool), "easy_accuracy": torch.zeros(1, 0),
      "consistency": torch.zeros(1, 0)}, r"^executed must be \[B, N\] with B, N >= 1, got \(1, 0\)$"),
    ({"consistency": torch.tensor([[float("nan"), 0.0]])}, r"^consistency\[0, 0\] must lie in \[0, 1\], got nan$"),
    ({"easy_accuracy": torch.tensor([[-0.5, 0.0]])}, r"^easy_accuracy\[0, 0\] must lie in \[0, 1\], got -0.5$"),
])
def test_bad_input_is_an_error_naming_the_argument(over, message):
    with pytest.raises(ValueError, match=message):
        proposal_rewards(**_row(**over))


def test_a_moved_output_dir_continues_from_its_own_exports(tmp_path, monkeypatch):
    """A finished phase's done.json names the absolute path it exported to. A run directory moved and rerun with one
    more iteration (mmzero.iterations=2) loaded iteration 1's roles from there: "model path '<old dir>/iter_0/coder/
    final' does not exist" (or, from a copy, the models of the other directory). It continues from its own exports."""
    import json

    import mmevo.recipes
    import render
    from mmevo.config import load_config
    from mmevo.evolve import mmzero
    from test_mmzero_records_review7 import _NoPool

    old, out = tmp_path / "old", tmp_path / "moved"
    for role in mmzero.ROLES:
        d = out / "iter_0" / role
        d.mkdir(parents=True)
        (d / "done.json").write_text(json.dumps({"model": str(old / "iter_0" / role / "final"), "steps": 2}))
    seen = {}

    def run_phase(cfg, role, t, role_index, phase_dir, paths, pool, out):
        seen[(t, role)] = dict(paths)
        phase_dir.mkdir(parents=True, exist_ok=True)
        return {"skipped": "test", "model": None}

    monkeypatch.setattr(render, "RenderPool", _NoPool)
    monkeypatch.setattr(mmevo.recipes, "resolve_model_path", lambda cfg: "unused")
    monkeypatch.setattr(mmzero, "run_phase", run_phase)
    cfg = load_config("configs/mmzero_tiny.yaml", [f"mmzero.output_dir={out}", "mmzero.warmup_demos=0",
                                                   "mmzero.iterations=2", "trainer.progress=false"])
    summary = mmzero.run_mmzero(cfg)
    own = {role: str(out / "iter_0" / role / "final") for role in mmzero.ROLES}
    assert list(seen) == [(1, "proposer"), (1, "coder"), (1, "solver")]  # iteration 0 finished: not re-run
    assert seen[(1, "proposer")] == own
    assert {role: summary["iterations"][0][role]["model"] for role in mmzero.ROLES} == own
