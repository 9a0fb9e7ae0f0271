"""Run by tests/test_invar27_zero_step.py under `torchrun --nproc_per_node 2`: one whole GRPO ``step`` (the
replayed rollout of tests/invar27_harness.py: 2 of its 4 prompts per rank) under DeepSpeed ZeRO. Rank 0 saves its
gathered gradients of every update, the post-step weights and the step's metrics reduced over the ranks
(``GRPOTrainer.reduce_over_ranks``, what ``train`` logs) with torch.save to argv[3]; the test compares them with the
same step in one process, run outside this process group (inside it a plain trainer would take a rank's share of the
prompts too).
argv: model_dir ds_config out_file workdir overrides_json
"""

import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
model_dir, ds_config, out_file, workdir, over = sys.argv[1:6]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: the harness and conftest

from deepspeed.utils import safe_get_full_grad  # noqa: E402

from invar27_harness import run_step  # noqa: E402
from mmevo.grpo import distributed as D  # noqa: E402

ds = run_step(model_dir, Path(workdir), sgd=False, full_grad=safe_get_full_grad,
              **{**json.loads(over), "trainer.deepspeed": ds_config})
ds["world_size"] = D.world_size()
if D.rank() == 0:
    torch.save(ds, out_file)
D.barrier()
torch.distributed.destroy_process_group()
