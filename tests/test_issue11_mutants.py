"""Issue 11 (7B on 8x80 GB) paths, pinned where a mutation audit found the existing tests blind: each test below
fails on a realistic bug in the implementation (named in its docstring) and passes on the real code."""

import pytest
import torch

from conftest import randomize
from mmevo.config import load_config
from mmevo.grpo.trainer import GRPOTrainer, sequence_logprobs
from mmevo.models.inputs import encode_prompt
from mmevo.models.loader import load_model


def _cfg(out, **over):
    base = {"data.prompt_template": "none", "rollout.n": 2, "rollout.max_tokens": 8, "trainer.prompts_per_step": 2,
            "trainer.mini_batch_prompts": 2, "trainer.micro_batch_seqs": 8, "trainer.output_dir": str(out),
            "trainer.wandb_mode": "disabled", "trainer.progress": False, "algo.kl_coef": 0, "trainer.seed": 3}
    base.update(over)
    return load_config(None, [f"{k}={v}" for k, v in base.items()])


def _samples(lm):
    """Two groups sharing their prompt, as the trainer lays them out, with responses of different lengths."""
    texts = ["In triangle ABC, angle A = 50. Find x.", "Find angle C."]
    prompts = [encode_prompt(lm.processor, lm.is_vl, t, []) for t in texts]
    ps = [prompts[0]] * 3 + [prompts[1]] * 2
    rs = [[105, 106, 107], [108], [109, 110, 111, 112, 113], [114, 115], [116, 117, 118]]
    return ps, rs


def _with_attention_dropout(model, p: float) -> int:
    """Attention dropout on every decoder layer (the tiny models have none): a forward in train mode becomes random."""
    n = 0
    for m in model.modules():
        if hasattr(m, "attention_dropout"):
            m.attention_dropout = p
            n += 1
    assert n > 0
    return n


def test_old_and_reference_logprob_passes_run_in_eval_mode(tiny_text_path, tmp_path):
    """Mutant: ``_logprobs_no_grad`` without ``base.eval()``. The no-gradient passes (old and reference log-probs)
    then ran in train mode: with dropout they are random, and under gradient checkpointing they lose the shared-prompt
    path. Every other test uses dropout-free models, where both modes give the same numbers."""
    lm = load_model(tiny_text_path)
    randomize(lm.model, std=0.15, seed=11)
    cfg = _cfg(tmp_path / "run", **{"model.gradient_checkpointing": True, "trainer.padding_free": False})
    tr = GRPOTrainer(cfg, lm, None)
    _with_attention_dropout(lm.model, 0.5)
    ps, rs = _samples(lm)
    lm.model.eval()
    with torch.no_grad():
        want, _, mask = sequence_logprobs(lm.model, ps, rs, lm.tokenizer.pad_token_id, cfg.rollout.temperature, "cpu")
    lm.model.train()
    modes = []
    hook = lm.model.model.register_forward_pre_hook(lambda mod, args: modes.append(mod.training))
    try:
        got = tr._logprobs_no_grad(tr.model, ps, rs)
    finally:
        hook.remove()
    for i, r in enumerate(rs):  # train-mode dropout would move these by ~0.1-1 nats
        assert torch.allclose(got[i][:len(r)], want[i, :len(r)], atol=1e-6, rtol=0), i
    assert modes and not any(modes)  # every forward of the pass in eval mode
    assert lm.model.training  # and the model is back in train mode for the update


@pytest.mark.parametrize("padding_free", [False, True])
def test_lora_gradients_are_the_same_under_gradient_checkpointing(tiny_text_path, tmp_path, padding_free):
    """LoRA under gradient checkpointing had no exactness test: the checkpointing tests train
    every weight. Kills the mutant that keeps the shared-prompt KV-cache path under checkpointing (``checkpointing =
    False`` in ``sequence_logprobs``: the adapters' gradients then come from responses scored without their prompt).
    Re-entrant checkpointing (``use_reentrant=True``) gives the same gradients here with this transformers version."""
    from mmevo.grpo.trainer import configure_training

    ps = rs = None
    grads = []
    for ckpt in (False, True):
        lm = load_model(tiny_text_path)
        randomize(lm.model, std=0.15, seed=11)
        cfg = _cfg(tmp_path / str(ckpt), **{"model.gradient_checkpointing": ckpt, "model.lora.rank": 4,
                                            "model.lora.alpha": 8})
        configure_training(lm.model, cfg.model, seed=5)
        with torch.no_grad():  # B starts at zero: give the adapters a delta, so A's gradient is not zero either
            for n, p in lm.model.named_parameters():
                if "lora_B" in n:
                    p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(len(n))) * 0.1)
        lm.model.train()
        if ps is None:
            ps, rs = _samples(lm)
        logp, _, mask = sequence_logprobs(lm.model, ps, rs, lm.tokenizer.pad_token_id, 1.0, "cpu",
                                          padding_free=padding_free)
        (logp * mask).sum().backward()
        grads.append({n: p.grad for n, p in lm.model.named_parameters() if p.requires_grad})
    plain, ckpt = grads
    assert plain.keys() == ckpt.keys() and len(plain) > 0
    for n, g in plain.items():
        assert g is not None and g.abs().max() > 0, n
        assert ckpt[n] is not None, f"{n}: no gradient under checkpointing"
        assert (ckpt[n] - g).abs().max() <= 1e-4 * g.abs().max(), n  # measured: 1.2e-6 of the largest entry


def test_offloaded_reference_goes_back_to_the_host_after_its_pass(tiny_text_path, tmp_path, monkeypatch):
    """Mutant: ``_reference_logprobs`` moving the reference to ``self.device`` again in its ``finally`` (instead of
    "cpu"). On a CPU trainer both are "cpu", so the existing test (which counts two moves to "cpu") cannot tell; here
    the trainer's device is an accelerator that the moves only record (no GPU needed), and the pass itself is
    recorded with where the reference was at that moment."""
    lm = load_model(tiny_text_path)
    ref = load_model(tiny_text_path).model.eval().requires_grad_(False)
    cfg = _cfg(tmp_path / "run", **{"algo.kl_coef": 0.01, "model.ref_offload": True})
    tr = GRPOTrainer(cfg, lm, None, ref_model=ref)
    moves = []
    monkeypatch.setattr(ref, "to", lambda dev, *a, **k: moves.append(torch.device(dev)) or ref)
    during = []
    monkeypatch.setattr(tr, "_logprobs_no_grad", lambda model, *a, **k: during.append((model, list(moves))) or [])
    monkeypatch.setattr(tr, "device", torch.device("cuda", 0))
    ps, rs = _samples(lm)
    tr._reference_logprobs(ps, rs, None, 0)
    assert during == [(ref, [torch.device("cuda", 0)])]  # on the accelerator for its pass
    assert moves == [torch.device("cuda", 0), torch.device("cpu")]  # and back in host memory afterwards
    # not offloaded: the reference never moves
    moves.clear()
    monkeypatch.setattr(tr.cfg.model, "ref_offload", False)
    tr._reference_logprobs(ps, rs, None, 0)
    assert moves == []


_LOCK_RANK = """
import json, sys
import torch.distributed as dist
from mmevo.runlock import OutputDirBusy, output_dir_lock
store, rank, out, report = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
try:
    with output_dir_lock(out) as lock:
        result = {"entered": True, "holds": lock is not None}
except OutputDirBusy as e:
    result = {"busy": str(e)}
open(report, "w").write(json.dumps(result))
dist.destroy_process_group()
"""


@pytest.mark.parametrize("busy", [True, False])
def test_every_rank_hears_that_the_output_dir_is_busy(tmp_path, busy):
    """Mutants: ``output_dir_lock`` where a non-zero rank ignores rank 0's verdict, or rank 0 broadcasts None
    instead of its refusal. Either way rank 1 went on into the run while rank 0 stopped (in a real run: rank 1
    waits in its first collective forever). Two real processes in a gloo group; this process holds the lock."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from mmevo.runlock import RunLock

    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)}
    held = RunLock(out).acquire() if busy else None
    try:
        procs = [subprocess.Popen([sys.executable, "-c", _LOCK_RANK, str(tmp_path / "store"), str(r), str(out),
                                   str(tmp_path / f"rank{r}.json")], env=env) for r in (0, 1)]
        for p in procs:
            assert p.wait(timeout=120) == 0
    finally:
        if held is not None:
            held.release()
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    if busy:
        assert "in use by another live mmevo run" in r0["busy"] and f"pid {os.getpid()}" in r0["busy"]
        assert r1["busy"].startswith("(rank 1, from rank 0) output_dir") and f"pid {os.getpid()}" in r1["busy"]
    else:  # free: both ranks run, rank 0 alone holds the lock
        assert r0 == {"entered": True, "holds": True} and r1 == {"entered": True, "holds": False}


@pytest.mark.parametrize("entropy_coef", [0.0, 0.01])
def test_update_keeps_the_entropy_out_of_the_graph_without_an_entropy_bonus(tiny_text_path, tmp_path, monkeypatch,
                                                                            entropy_coef):
    """Mutant: the update passing ``entropy_grad=True`` whatever ``algo.entropy_coef``. The entropy metric then kept
    every chunk's [chunk, V] logits for a backward that never comes (the 7B vocabulary: 0.6 GB per 1024 positions).
    The update's own forwards are watched: their entropy has a graph exactly when the bonus is in the loss."""
    import mmevo.grpo.trainer as T

    lm = load_model(tiny_text_path)
    randomize(lm.model, std=0.15, seed=11)
    cfg = _cfg(tmp_path / "run", **{"algo.entropy_coef": entropy_coef, "trainer.logits_chunk_tokens": 3})
    tr = GRPOTrainer(cfg, lm, None)
    seen = []
    real = T.sequence_logprobs

    def watched(*a, **k):
        out = real(*a, **k)
        if k.get("with_entropy"):
            seen.append((out[0].requires_grad, out[1].requires_grad))
        return out

    monkeypatch.setattr(T, "sequence_logprobs", watched)
    ps, rs = _samples(lm)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.0])
    tr._pad_sample = (ps[0], rs[0])
    m = tr._update(ps, rs, adv, [[list(range(5))]], [1], None, None)
    assert seen == [(True, entropy_coef > 0)]
    assert m["actor/entropy"] > 0  # the metric is still computed


_EVAL_RANK = """
import json, sys
import torch.distributed as dist
import mmevo.grpo.trainer as T
from conftest import randomize
from mmevo.config import load_config
from mmevo.data.schema import Example
from mmevo.models.loader import load_model
from mmevo.rollout.factory import build_engine
store, rank, path, out, report = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
lm = load_model(path)
randomize(lm.model, std=0.15, seed=1)
over = {"data.prompt_template": "none", "rollout.n": 2, "trainer.prompts_per_step": 2, "trainer.mini_batch_prompts": 2,
        "trainer.output_dir": out, "trainer.wandb_mode": "disabled", "trainer.progress": False, "algo.kl_coef": 0}
cfg = load_config(None, [f"{k}={v}" for k, v in over.items()])
tr = T.GRPOTrainer(cfg, lm, build_engine(cfg, lm))
tr.ds_engine = "stand-in"  # evaluate() splits whenever a DeepSpeed engine runs the policy; nothing else runs here
examples = [Example(f"q{i}", f"What is {i} + {i + 1}?", str(2 * i + 1), [], []) for i in range(5)]
local = []
real = T.eval_records
T.eval_records = lambda engine, prompts, exs, *a, **k: local.extend(e.id for e in exs) or real(engine, prompts, exs,
                                                                                              *a, **k)
split = tr.evaluate(examples, max_tokens=5)
T.eval_records = real
with tr._sampling_weights():
    whole = T.summarize_eval(real(tr.engine, tr.prompts, examples, lm.tokenizer, 5, cfg.rollout.eval_temperature,
                                  seed=cfg.trainer.seed))
open(report, "w").write(json.dumps({"local": local, "same": split == whole, "n": split["n"],
                                    "ids": [s["id"] for s in split["samples"]]}))
dist.barrier()
dist.destroy_process_group()
"""


def test_held_out_eval_is_split_over_ranks_and_gathered_in_order(tiny_text_path, tmp_path):
    """Mutant: ``evaluate`` not splitting the held-out set (every rank evaluates every example: the same summary,
    world-size times the eval time), which the DeepSpeed test (summary equality) cannot see. Two real processes in a
    gloo group; each rank must evaluate exactly its strided share, and the gathered summary is the whole set's, in
    the examples' order."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")])}
    procs = [subprocess.Popen([sys.executable, "-c", _EVAL_RANK, str(tmp_path / "store"), str(r), str(tiny_text_path),
                               str(tmp_path / "run"), str(tmp_path / f"rank{r}.json")], env=env) for r in (0, 1)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["local"] == ["q0", "q2", "q4"] and r1["local"] == ["q1", "q3"]  # no overlap, none dropped
    for r in (r0, r1):
        assert r["same"] and r["n"] == 5 and r["ids"] == ["q0", "q1", "q2", "q3", "q4"]


def test_old_and_reference_passes_run_the_head_one_chunk_at_a_time(tiny_text_path, tmp_path):
    """Mutant: ``_logprobs_no_grad`` passing ``logits_chunk=0``. Its log-probs are the same, so no value test sees
    it, but the no-gradient passes then built the whole [N, V] fp32 logits at once (the 7B run's 152k vocabulary:
    0.6 GB per 1024 positions) that ``trainer.logits_chunk_tokens`` exists to avoid. Watched at the LM head."""
    lm = load_model(tiny_text_path)
    randomize(lm.model, std=0.15, seed=11)
    ps, rs = _samples(lm)
    n = sum(len(r) for r in rs)  # 14 response positions
    got = {}
    for chunk in (0, 3):
        tr = GRPOTrainer(_cfg(tmp_path / str(chunk), **{"trainer.logits_chunk_tokens": chunk}), lm, None)
        rows = []
        hook = lm.model.lm_head.register_forward_hook(lambda mod, args, out: rows.append(args[0].shape[0]))
        try:
            got[chunk] = tr._logprobs_no_grad(tr.model, ps, rs)
        finally:
            hook.remove()
        assert rows == ([n] if chunk == 0 else [3, 3, 3, 3, 2]), rows
    for a, b in zip(got[0], got[3]):
        assert torch.allclose(a, b, atol=1e-6, rtol=0)


@pytest.mark.parametrize("offload,where", [(True, "cpu"), (False, "cuda")])
def test_an_offloaded_reference_is_loaded_into_host_memory(tmp_path, monkeypatch, offload, where):
    """Mutant: ``build_trainer`` loading the reference on ``model.device`` whatever ``model.ref_offload``. With a CPU
    run both are "cpu", so the existing test (the built reference is on the CPU) cannot tell; here the run is a GPU
    run that stops at the reference's load, where the device it is loaded on is recorded (no GPU needed)."""
    import mmevo.recipes as R
    from mmevo.models.loader import LoadedModel

    class Loaded(Exception):
        pass

    def load(path, dtype, device):
        raise Loaded(device)

    monkeypatch.setattr(R, "load_model", load)
    cfg = _cfg(tmp_path / "run", **{"algo.kl_coef": 0.01, "model.ref_offload": offload, "model.device": "cuda"})
    policy = LoadedModel(model=None, processor=None, tokenizer=None, is_vl=False, path="some/model")
    with pytest.raises(Loaded) as e:
        R.build_trainer(cfg, policy)
    assert str(e.value) == where


def test_plan_counts_no_vision_activations_under_lora(tmp_path):
    """Mutant: the planner's ``_vision_frozen`` ignoring LoRA. LoRA adapts the language model only (the ViT gets no
    gradients, as with ``model.freeze_vision_tower``), so autograd keeps no ViT activations; the mutant planned them
    anyway (5.66 GiB per GPU for the shipped 7B config) and no planner test looked at the ViT under LoRA."""
    from mmevo import memory_plan as mp

    root = __import__("pathlib").Path(__file__).resolve().parent.parent
    cfg_path = root / "configs" / "qwen2_5_vl_7b_geometry3k.yaml"

    def plan(*over):
        return mp.plan(load_config(cfg_path, list(over)), 8, 80.0, config_path=cfg_path)

    full = plan("model.lora.rank=0", "model.freeze_vision_tower=false")
    assert full["per_gpu_gib"]["activations_vision"] > 0 and full["setup"]["image_patches_per_micro_batch"] > 0
    for over in (("model.lora.rank=16", "model.freeze_vision_tower=false"),
                 ("model.lora.rank=0", "model.freeze_vision_tower=true")):
        p = plan(*over)
        assert p["per_gpu_gib"]["activations_vision"] == 0, over
        assert p["setup"]["image_patches_per_micro_batch"] == 0, over


_BUILD_RANK = """
import json, os, sys
import torch.distributed as dist
from mmevo.config import load_config
from mmevo.recipes import resolve_model_path
store, rank, cache, report = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=2)
try:
    resolve_model_path(load_config(None, ["model.path=tiny-text", "model.cache_dir=" + cache]))
    result = {"ok": True}
except Exception as e:
    result = {"error": f"{type(e).__name__}: {e}"}
open(report, "w").write(json.dumps(result))
dist.destroy_process_group()
"""


def test_a_failed_tiny_build_fails_every_rank_naming_the_builder(tmp_path):
    """Mutant: ``resolve_model_path`` where a rank checks only its own build for a failure. The waiting rank then
    went on to build the model itself (here failing with its own, unrelated error; on a node whose builder died it
    would build a second copy) instead of reporting the builder's failure. Two real processes in a gloo group; the
    cache directory lies below a regular file, so the builder (LOCAL_RANK 0) fails."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    (tmp_path / "file").write_text("not a directory")
    cache = tmp_path / "file" / "cache"
    procs = [subprocess.Popen([sys.executable, "-c", _BUILD_RANK, str(tmp_path / "store"), str(r), str(cache),
                               str(tmp_path / f"rank{r}.json")],
                              env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root), "LOCAL_RANK": str(r)})
             for r in (0, 1)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r0["error"].startswith(("NotADirectoryError", "FileExistsError")), r0
    assert r1["error"].startswith(f"RuntimeError: rank 0 could not build the tiny model in {cache / 'tiny-qwen2'}: "
                                  + r0["error"]), r1
