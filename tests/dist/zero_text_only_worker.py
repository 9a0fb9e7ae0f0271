"""Run by tests/test_distributed.py under `torchrun --nproc_per_node 2`: rank 0's micro-batch holds samples of an
image prompt, rank 1's of a text-only prompt. Only a batch with pixels runs the vision tower, and under ZeRO-3 every
module's forward gathers its weights (its backward again): the ranks must run the vision tower alike. The old
log-probs (eval mode) and one GRPO update must neither abort nor differ from one process over all 4 samples; then a
real step (2 PPO epochs: old log-probs and 2 updates) where rank 0 rolls out image prompts and rank 1 text-only ones.
argv: model_dir ds_config out_json workdir [key=value ...]
"""

import dataclasses
import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
model_dir, ds_config, out_json, workdir = sys.argv[1:5]
OVER = dict(a.split("=", 1) for a in sys.argv[5:])  # config overrides, key=value
RESPONSES = [[105, 106, 107], [108, 109], [110, 111], [111, 112, 113, 114], [115, 116], [117]]
ADV = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.8, -0.8])

# tests/dist (the script's own directory) is on sys.path
from uneven_update import against_one_process, make_trainer, old_logprobs, one_update  # noqa: E402

from deepspeed.utils import safe_get_full_grad  # noqa: E402

from mmevo.grpo import distributed as D  # noqa: E402


def text_only(ex):
    return dataclasses.replace(ex, images=[], problem=ex.problem.replace("<image>", "").strip())


def with_text_only(train):
    """The first 3 examples, the third without its image (samples 4, 5 have a text-only prompt)."""
    return [train[0], train[1], text_only(train[2])]


ds_tr, train = make_trainer(model_dir, workdir, {**OVER, "trainer.deepspeed": ds_config})
step_batch = [train[3], train[4], text_only(train[5]), text_only(train[6])]  # rank 0: images, rank 1: text only
train = with_text_only(train)
mine = [0, 1] if D.rank() == 0 else [4, 5]  # an image prompt / a text-only prompt
ds_old = [t for rank_old in D.all_gather_objects(old_logprobs(ds_tr, train, RESPONSES, mine)) for t in rank_old]
ds_grads = dict(one_update(ds_tr, train, RESPONSES, ADV, mine, safe_get_full_grad))
ds_tr.cfg.algo.ppo_epochs = 2
step_metrics = ds_tr.step(step_batch)
if D.rank() == 0:
    every = [0, 1, 4, 5]
    sp_tr, _ = make_trainer(model_dir, workdir + "-sp", OVER)
    sp_grads, diffs = against_one_process(sp_tr, train, RESPONSES, ADV, every, ds_old, ds_grads)
    Path(out_json).write_text(json.dumps({
        "world_size": D.world_size(), **diffs, "step_updates": step_metrics["actor/updates"],
        "visual_grad_norm": float(torch.sqrt(sum((g ** 2).sum() for n, g in sp_grads.items() if "visual" in n)))}))
D.barrier()
torch.distributed.destroy_process_group()
