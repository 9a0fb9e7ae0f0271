"""Run by tests/test_distributed.py under `torchrun --nproc_per_node 2`: model.cpu_linear under ZeRO-1/2 with one rank
above oneDNN's row threshold and one below.

Rank 0 trains on 4 samples of 90 response tokens (over MIN_ROWS rows: oneDNN), rank 1 on 2 (under: F.linear's
kernels). The DeepSpeed update's gradient must equal the single-process one over all 6 samples; it did not while
the two kernels were two different autograd nodes (the ranks fired their gradient hooks in different orders and
ZeRO summed one parameter's gradient with another's). Writes rank 0's findings as JSON to argv[3].
argv: model_dir ds_config out_json workdir
"""

import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
model_dir, ds_config, out_json, workdir = sys.argv[1:5]
RESPONSES = [list(range(100 + i, 190 + i)) for i in range(6)]
ADV = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.8, -0.8])

from mmevo.models import cpu_linear as cl  # noqa: E402

ONEDNN_CALLS = [0]
_onednn = cl._onednn


def counted_onednn(*args):
    ONEDNN_CALLS[0] += 1
    return _onednn(*args)


cl._onednn = counted_onednn  # to report which rank ran which kernel; the kernel itself runs unchanged


def make(over):
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
            "trainer.output_dir": workdir, "reward.heads": "{accuracy: 1.0}", "model.cpu_linear": "onednn", **over}
    cfg = load_config(None, [f"{k}={v}" for k, v in base.items()])
    lm = load_model(model_dir)
    randomize(lm.model, std=0.15, seed=7)
    train, _ = split_train_heldout(8, 0, seed=4)
    return GRPOTrainer(cfg, lm, build_engine(cfg, lm), train, [], log=False), train


def update(tr, train, ids, full_grad):
    """One ``_update`` on samples ``ids`` (one micro-batch); the full gradient it stepped with."""
    prompts = [tr.prompts(ex) for ex in train[:3] for _ in range(2)]
    grads = {}
    real_step = tr.backend.step

    def step():
        grads.update({n: full_grad(p).clone() for n, p in tr.model.named_parameters()})
        return real_step()

    tr.backend.step = step
    tr._update([prompts[i] for i in ids], [RESPONSES[i] for i in ids], ADV[ids], [[list(range(len(ids)))]], [1],
               None, None)
    return grads


from deepspeed.utils import safe_get_full_grad  # noqa: E402

from mmevo.grpo import distributed as D  # noqa: E402

ds_tr, train = make({"trainer.deepspeed": ds_config})
rank = D.rank()
ONEDNN_CALLS[0] = 0
ds_grads = update(ds_tr, train, [0, 1, 2, 3] if rank == 0 else [4, 5], safe_get_full_grad)
calls = [None] * D.world_size()
torch.distributed.all_gather_object(calls, ONEDNN_CALLS[0])
if rank == 0:
    sp_tr, _ = make({})
    sp_grads = update(sp_tr, train, [0, 1, 2, 3, 4, 5], lambda p: p.grad)
    norm = float(torch.sqrt(sum((g ** 2).sum() for g in sp_grads.values())))
    Path(out_json).write_text(json.dumps({
        "world_size": D.world_size(), "onednn_calls_per_rank": calls, "grad_norm": norm,
        "grads_max_abs_diff": max(float((sp_grads[n] - ds_grads[n]).abs().max()) for n in sp_grads)}))
D.barrier()
torch.distributed.destroy_process_group()
