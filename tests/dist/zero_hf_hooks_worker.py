"""Run by tests/test_distributed.py under `torchrun --nproc_per_node 2`: the HF engine asked to sample from the ZeRO-3
partitioned training module outside ``mmevo.grpo.distributed.zero3_full_weights`` (DeepSpeed's hooks on: every
forward a collective), rank 0 up to 8 tokens, rank 1 up to 2. Ranks decoding different numbers of steps made
different collectives (gloo aborted, NCCL hangs): the engine refuses on every rank with a message naming the fix.
Inside the trainer's ``_sampling_weights`` the same calls sample. argv: model_dir ds_config out_json workdir
"""

import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
model_dir, ds_config, out_json, workdir = sys.argv[1:5]

from uneven_update import make_trainer  # noqa: E402  (tests/dist: the script's own directory)

from mmevo.grpo import distributed as D  # noqa: E402
from mmevo.rollout.base import RolloutRequest, SamplingParams  # noqa: E402

tr, train = make_trainer(model_dir, workdir, {"trainer.deepspeed": ds_config})
requests = [RolloutRequest(tr.prompts(train[D.rank()]), n=2)]
params = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=8 if D.rank() == 0 else 2, seed=3)
try:
    tr.engine.generate(requests, params)
    refused = ""
except RuntimeError as e:
    refused = str(e)
with tr._sampling_weights():
    lengths = [len(c.token_ids) for c in tr.engine.generate(requests, params)[0]]
by_rank = D.all_gather_objects({"refused": refused, "lengths": lengths})
if D.rank() == 0:
    Path(out_json).write_text(json.dumps({"world_size": D.world_size(), "by_rank": by_rank}))
D.barrier()
torch.distributed.destroy_process_group()
