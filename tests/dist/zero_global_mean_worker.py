"""Run by tests/test_distributed.py under `torchrun --nproc_per_node 2`: ranks with uneven response tokens.

Rank 0 trains on 4 samples (10 response tokens), rank 1 on 2 (3 tokens). One GRPO update under DeepSpeed must equal
the single-process update over all 6 samples: the token-mean over the global mini-batch, not the mean of the two
ranks' token-means. Writes rank 0's findings as JSON to argv[3]. argv: model_dir ds_config out_json workdir
"""

import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
model_dir, ds_config, out_json, workdir = sys.argv[1:5]
RESPONSES = [[105, 106, 107], [108, 109], [110], [111, 112, 113, 114], [115, 116], [117]]
ADV = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.8, -0.8])

from uneven_update import make_trainer, one_update  # noqa: E402  (tests/dist: the script's own directory)


def make(over):
    return make_trainer(model_dir, workdir, over)


def update(tr, train, ids, full_grad):
    return one_update(tr, train, RESPONSES, ADV, ids, full_grad)


from deepspeed.utils import safe_get_full_grad  # noqa: E402

from mmevo.grpo import distributed as D  # noqa: E402

ds_tr, train = make({"trainer.deepspeed": ds_config})
rank = D.rank()
ds_grads = update(ds_tr, train, [0, 1, 2, 3] if rank == 0 else [4, 5], safe_get_full_grad)
if rank == 0:
    sp_tr, _ = make({})
    sp_grads = update(sp_tr, train, [0, 1, 2, 3, 4, 5], lambda p: p.grad)
    norm = float(torch.sqrt(sum((g ** 2).sum() for g in sp_grads.values())))
    Path(out_json).write_text(json.dumps({
        "world_size": D.world_size(), "grad_norm": norm,
        "grads_max_abs_diff": max(float((sp_grads[n] - ds_grads[n]).abs().max()) for n in sp_grads)}))
D.barrier()
torch.distributed.destroy_process_group()
