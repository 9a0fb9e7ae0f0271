"""Run by tests/test_distributed.py under `torchrun --nproc_per_node 2`: ranks whose micro-batches need different
numbers of LM-head chunks (trainer.logits_chunk_tokens=4: rank 0 scores 10 response tokens in 3 chunks, rank 1 scores
3 in 1). Under ZeRO-3 every head call gathers the head's weight (in forward, and in backward for its recompute and
its gradient), so the ranks must call it alike: the old log-probs (no gradients) and one GRPO update must neither
abort nor differ from one process over all 6 samples. argv: model_dir ds_config out_json workdir tied|untied
"""

import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
model_dir, ds_config, out_json, workdir, head = sys.argv[1:6]
RESPONSES = [[105, 106, 107], [108, 109], [110], [111, 112, 113, 114], [115, 116], [117]]
ADV = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.8, -0.8])

# tests/dist (the script's own directory) is on sys.path
from uneven_update import against_one_process, make_trainer, old_logprobs, one_update  # noqa: E402


def make(over):
    return make_trainer(model_dir, workdir, {"trainer.logits_chunk_tokens": 4, **over}, untie_head=head == "untied")


from deepspeed.utils import safe_get_full_grad  # noqa: E402

from mmevo.grpo import distributed as D  # noqa: E402

ds_tr, train = make({"trainer.deepspeed": ds_config})
mine = [0, 1, 2, 3] if D.rank() == 0 else [4, 5]
ds_old = [t for rank_old in D.all_gather_objects(old_logprobs(ds_tr, train, RESPONSES, mine)) for t in rank_old]
ds_grads = dict(one_update(ds_tr, train, RESPONSES, ADV, mine, safe_get_full_grad))  # the step below adds its own
# a real data-parallel step (each rank rolls out its own groups, of other lengths): two PPO epochs, so the old
# log-probs run too, under the head calls the step agrees on with its plan; each rank's own counts are recorded
# (rank 1 samples at most 3 tokens a response: 4 samples need at most 3 calls where rank 0's need up to 8)
ds_tr.cfg.algo.ppo_epochs = 2
ds_tr.cfg.rollout.max_tokens = 8 if D.rank() == 0 else 3
own_calls, real_head_calls = [], ds_tr._head_calls
ds_tr._head_calls = lambda micro, responses: own_calls.append(real_head_calls(micro, responses)) or own_calls[-1]
step_metrics = ds_tr.step()
calls_by_rank = D.all_gather_objects(own_calls)
if D.rank() == 0:
    sp_tr, _ = make({})
    _, diffs = against_one_process(sp_tr, train, RESPONSES, ADV, list(range(6)), ds_old, ds_grads)
    Path(out_json).write_text(json.dumps({
        "world_size": D.world_size(), **diffs,
        "head_tied": sp_tr.model.lm_head.weight is sp_tr.model.get_input_embeddings().weight,
        "step_updates": step_metrics["actor/updates"], "step_head_calls_by_rank": calls_by_rank}))
D.barrier()
torch.distributed.destroy_process_group()
