"""A Prism phase's done.json names the absolute path it exported to. A run directory moved (or copied) and rerun with
one more iteration took iteration 1's questioner and solver from there: the models of the old directory, or a model
path that no longer exists. A rerun continues from the exports in the directory it runs (as MM-Zero's loop)."""

import json


def test_a_moved_output_dir_continues_from_its_own_exports(tiny_text_path, tmp_path, monkeypatch):
    from mmevo.config import load_config
    from mmevo.evolve import prism
    from mmevo.prism.clusters import build_clusters

    old, out = tmp_path / "old", tmp_path / "moved"
    cfg = load_config("configs/prism_tiny.yaml", [
        f"model.path={tiny_text_path}", f"prism.output_dir={out}", f"prism.centroids={tmp_path}/c/centroids.npy",
        "prism.corpus_size=64", "prism.k=4", "prism.warmup_questions=0", "prism.iterations=2",
        "trainer.progress=false"])
    build_clusters(cfg)
    it1 = out / "iter_1"
    steps = {"questioner": cfg.prism.questioner_steps, "solver": cfg.prism.solver_steps}
    for phase in prism.PHASES:
        (it1 / phase).mkdir(parents=True)
        record = {"steps": steps[phase]} if phase in steps else {"kept": 3}
        if phase in steps:  # what the first run recorded: its own directory's export
            record.update(model=str(old / "iter_1" / phase / "final"), head_state={})
        (it1 / phase / "done.json").write_text(json.dumps(record))
    seen = {}

    class _Stop(Exception):
        pass

    def run_questioner(cfg, t, role_index, phase_dir, solver_path, counts_state):
        seen["questioner_solver_in"] = solver_path
        raise _Stop

    monkeypatch.setattr(prism, "run_questioner", run_questioner)
    try:
        prism.run_prism(cfg)
    except _Stop:
        pass
    assert seen == {"questioner_solver_in": str(it1 / "solver" / "final")}  # iteration 2 starts from its own S_1
