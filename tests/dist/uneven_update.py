"""Shared by the workers that compare one GRPO update of ranks with uneven samples against the single-process update
over all of them (zero_global_mean_worker.py, zero_cpu_linear_worker.py, zero_head_chunks_worker.py,
zero_unshared_worker.py, zero_text_only_worker.py)."""

import sys
from pathlib import Path


def make_trainer(model_dir: str, workdir: str, over: dict, untie_head: bool = False):
    """A GRPO trainer on the randomised tiny model (seed 7) and its 8 synthetic train examples; ``over``: config.
    ``untie_head``: the LM head gets its own copy of the embedding weight (a module ZeRO-3 partitions on its own)."""
    from mmevo.config import load_config
    from mmevo.data.synthetic import split_train_heldout
    from mmevo.grpo.trainer import GRPOTrainer
    from mmevo.models.loader import load_model
    from mmevo.rollout.factory import build_engine

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from conftest import randomize

    base = {"data.prompt_template": "none", "rollout.n": 2, "rollout.max_tokens": 8, "trainer.prompts_per_step": 4,
            "trainer.mini_batch_prompts": 4, "trainer.micro_batch_seqs": 4, "trainer.lr": 1e-3, "algo.kl_coef": 0,
            "trainer.wandb_mode": "disabled", "trainer.progress": False, "trainer.save_every": 0,
            "trainer.output_dir": workdir, "reward.heads": "{accuracy: 1.0}", **over}
    cfg = load_config(None, [f"{k}={v}" for k, v in base.items()])
    lm = load_model(model_dir)
    randomize(lm.model, std=0.15, seed=7)
    if untie_head:
        import torch

        lm.model.lm_head.weight = torch.nn.Parameter(lm.model.lm_head.weight.detach().clone())
        lm.model.config.tie_word_embeddings = False
        lm.model.config.get_text_config().tie_word_embeddings = False
    train, _ = split_train_heldout(8, 0, seed=4)
    return GRPOTrainer(cfg, lm, build_engine(cfg, lm), train, [], log=False), train


def one_update(tr, train, responses, adv, ids, full_grad) -> dict:
    """One ``_update`` on samples ``ids`` (one micro-batch; sample i has prompt i // 2 and ``responses[i]``); the full
    gradient it stepped with, read by ``full_grad(param)``."""
    prompts = [tr.prompts(ex) for ex in train[:3] for _ in range(2)]
    grads = {}
    real_step = tr.backend.step

    def step():
        grads.update({n: full_grad(p).clone() for n, p in tr.model.named_parameters()})
        return real_step()

    tr.backend.step = step
    tr._update([prompts[i] for i in ids], [responses[i] for i in ids], adv[ids], [[list(range(len(ids)))]], [1],
               None, None)
    return grads


def old_logprobs(tr, train, responses, ids) -> list:
    """Samples ``ids``' log-probs without gradients (the old / reference pass), in one micro-batch whose LM-head
    calls are agreed over the ranks as the trainer's step agrees them; each cut to its response's length."""
    prompts = [tr.prompts(ex) for ex in train[:3] for _ in range(2)]
    ps, rs = [prompts[i] for i in ids], [responses[i] for i in ids]
    micro = [list(range(len(ids)))]
    n_micro, calls = tr._agree([len(micro)], tr._head_calls(micro, rs))
    out = tr._logprobs_no_grad(tr.model, ps, rs, micro, n_micro[0], calls)
    return [logp[:len(r)] for logp, r in zip(out, rs, strict=True)]


def against_one_process(sp_tr, train, responses, adv, ids, ds_old, ds_grads) -> tuple[dict, dict]:
    """The single-process reference (trainer ``sp_tr``) over samples ``ids``, and how far the ranks' gathered old
    log-probs ``ds_old`` and update gradients ``ds_grads`` are from it: (its gradients, {grad_norm, old_max_abs_diff,
    grads_max_abs_diff})."""
    import torch

    sp_old = old_logprobs(sp_tr, train, responses, ids)
    sp_grads = one_update(sp_tr, train, responses, adv, ids, lambda p: p.grad)
    return sp_grads, {
        "grad_norm": float(torch.sqrt(sum((g ** 2).sum() for g in sp_grads.values()))),
        "old_max_abs_diff": max(float((a - b).abs().max()) for a, b in zip(sp_old, ds_old, strict=True)),
        "grads_max_abs_diff": max(float((sp_grads[n] - ds_grads[n]).abs().max()) for n in sp_grads)}
