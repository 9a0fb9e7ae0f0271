"""Review 11 of `mmevo evolve mmzero` run as the README documents it: a rerun into the same output dir with another
setting, and a missing start model."""

import json

import pytest

from mmevo.cli import main
from mmevo.config import ConfigError, load_config
from mmevo.evolve import mmzero
from test_mmzero_records_review7 import _NoPool  # the sandbox is not reached: every phase is finished already


def _finished_run(out, monkeypatch, *overrides):
    """run_mmzero over an output dir whose every phase is finished (done.json), as a rerun after a complete run."""
    import render

    import mmevo.recipes

    monkeypatch.setattr(render, "RenderPool", _NoPool)
    monkeypatch.setattr(mmevo.recipes, "resolve_model_path", lambda cfg: "unused")
    monkeypatch.setattr(mmzero, "run_phase", lambda *a, **k: pytest.fail("a finished phase was re-run"))
    for role in mmzero.ROLES:
        d = out / "iter_0" / role
        d.mkdir(parents=True, exist_ok=True)
        (d / "done.json").write_text(json.dumps({"skipped": "test", "model": None}))
    cfg = load_config("configs/mmzero_tiny.yaml", [f"mmzero.output_dir={out}", "mmzero.warmup_demos=0",
                                                   "trainer.progress=false", *overrides])
    return mmzero.run_mmzero(cfg)


def test_a_rerun_with_another_loop_setting_is_refused_naming_it(tmp_path, monkeypatch):
    """Finished phases are skipped on rerun: rerun with mmzero.code_samples=3, the iteration's proposer records (2
    programs per proposal) were reused silently while summary.json said code_samples 3."""
    out = tmp_path / "run"
    _finished_run(out, monkeypatch)
    _finished_run(out, monkeypatch)  # the same settings: reruns as before
    with pytest.raises(ConfigError, match=r"mmzero\.code_samples=2") as e:
        _finished_run(out, monkeypatch, "mmzero.code_samples=3")
    assert "another mmzero.output_dir" in str(e.value)
    with pytest.raises(ConfigError, match=r"mmzero\.roles=.*'solver': {'rollout.max_tokens': 32"):  # a role override too
        _finished_run(out, monkeypatch, "mmzero.roles.solver={rollout.max_tokens: 64}")
    # its length and where / how it logs may change (a rerun may add iterations, as a resume may add steps)
    _finished_run(out, monkeypatch, "mmzero.render_workers=2", "trainer.wandb_mode=offline")
    assert json.loads((out / "run_config.json").read_text())["mmzero"]["code_samples"] == 2  # the first run's


def test_a_damaged_run_config_is_named(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run_config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="run_config.json"):
        _finished_run(out, monkeypatch)


def test_a_missing_start_model_is_refused_naming_model_path_and_leaves_no_output_dir(tmp_path, capsys):
    """It failed in the warm-up with "model path '...' does not exist" after the loop had made its output dir."""
    out = tmp_path / "mz"
    missing = tmp_path / "no_such_model"
    assert main(["evolve", "mmzero", "configs/mmzero_tiny.yaml", f"model.path={missing}",
                 f"mmzero.output_dir={out}"]) == 2
    assert f"model.path={missing}" in capsys.readouterr().err
    assert not out.exists()


def test_prism_refuses_a_rerun_with_other_settings_too(tmp_path, monkeypatch):
    """Prism skips finished phases on rerun as MM-Zero does: ``prism.pool_band`` changed over a finished run kept the
    old pool while summary.json named the new band."""
    import mmevo.recipes
    from mmevo.evolve import prism

    out = tmp_path / "run"
    (out / "clusters").mkdir(parents=True)
    (out / "clusters" / "centroids.npy").write_bytes(b"")  # never read: every phase below is finished
    monkeypatch.setattr(mmevo.recipes, "resolve_model_path", lambda cfg: "unused")
    monkeypatch.setattr(prism, "write_diversity", lambda out, summary: None)
    for phase in prism.PHASES:
        d = out / "iter_1" / phase
        d.mkdir(parents=True, exist_ok=True)
        (d / "done.json").write_text(json.dumps({"model": None, "head_state": {}}))

    def rerun(*overrides):
        return prism.run_prism(load_config("configs/prism_tiny.yaml", [
            f"prism.output_dir={out}", f"prism.centroids={out}/clusters/centroids.npy", "prism.warmup_questions=0",
            "prism.iterations=1", *overrides]))

    rerun()
    rerun("prism.solver_steps=9", "trainer.progress=false")  # its length and how it logs may change
    with pytest.raises(ConfigError, match=r"prism\.pool_band=\[0\.5, 0\.9\] in run_config\.json.*another "
                                          r"prism\.output_dir"):
        rerun("prism.pool_band=[0.2, 0.8]")


@pytest.mark.parametrize("loop, config", [("prism", "configs/prism_tiny.yaml"), ("honest", "configs/honest_tiny.yaml")])
def test_every_loop_refuses_a_missing_start_model_before_making_its_output_dir(tmp_path, capsys, loop, config):
    """Prism and HONEST made their output dir before the first model load, as MM-Zero did: an empty dir was left
    and the error ("model path '...' does not exist") named no setting."""
    out = tmp_path / loop
    missing = tmp_path / "no_such_model"
    assert main(["evolve", loop, config, f"model.path={missing}", f"{loop}.output_dir={out}"]) == 2
    assert f"model.path={missing}" in capsys.readouterr().err
    assert not out.exists()
