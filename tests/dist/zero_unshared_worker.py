"""Run by tests/test_distributed.py under `torchrun --nproc_per_node 2`: ``trainer.padding_free=false`` (padded
forwards), rank 0's micro-batch holds 2 samples of one prompt, rank 1's 2 samples of 2 distinct prompts. The
shared-prompt path of ``sequence_logprobs`` runs the model twice (prompt pass, then response pass), the unshared
path once: under ZeRO-3 every forward gathers the weights, so the ranks must take the same path. The old log-probs
(eval mode) and one GRPO update must neither abort nor differ from one process over all 4 samples.
argv: model_dir ds_config out_json workdir
"""

import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
model_dir, ds_config, out_json, workdir = sys.argv[1:5]
RESPONSES = [[105, 106, 107], [108, 109], [110, 111], [111, 112, 113, 114], [115, 116], [117]]
ADV = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.8, -0.8])

# tests/dist (the script's own directory) is on sys.path
from uneven_update import against_one_process, make_trainer, old_logprobs, one_update  # noqa: E402

from deepspeed.utils import safe_get_full_grad  # noqa: E402

from mmevo.grpo import distributed as D  # noqa: E402

OVER = {"trainer.padding_free": "false"}
ds_tr, train = make_trainer(model_dir, workdir, {**OVER, "trainer.deepspeed": ds_config})
mine = [0, 1] if D.rank() == 0 else [2, 4]  # prompts 0, 0 (shared) / prompts 1, 2 (distinct)
ds_old = [t for rank_old in D.all_gather_objects(old_logprobs(ds_tr, train, RESPONSES, mine)) for t in rank_old]
ds_grads = dict(one_update(ds_tr, train, RESPONSES, ADV, mine, safe_get_full_grad))
if D.rank() == 0:
    every = [0, 1, 2, 4]
    sp_tr, _ = make_trainer(model_dir, workdir + "-sp", OVER)
    _, diffs = against_one_process(sp_tr, train, RESPONSES, ADV, every, ds_old, ds_grads)
    Path(out_json).write_text(json.dumps({"world_size": D.world_size(), **diffs}))
D.barrier()
torch.distributed.destroy_process_group()
