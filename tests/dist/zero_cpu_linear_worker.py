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


from uneven_update import make_trainer, one_update  # noqa: E402  (tests/dist: the script's own directory)


def make(over):
    return make_trainer(model_dir, workdir, {"model.cpu_linear": "onednn", **over})


def update(tr, train, ids, full_grad):
    return one_update(tr, train, RESPONSES, ADV, ids, full_grad)


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
