"""Run by tests/test_runlock.py under `torchrun --nproc_per_node 2`: ranks that must end when the launcher is killed.

Each rank joins the group through mmevo (which arms the parent-death signal), writes {pid, ppid} to argv[1]/rank<R>.json
and then waits forever: rank 0 in Python, rank 1 inside a gloo collective that rank 0 never joins.
"""

import json
import os
import sys
import time
from pathlib import Path

import torch.distributed as dist

from mmevo.grpo import distributed as D

D.init_distributed("cpu")
out = Path(sys.argv[1])
rank = D.rank()
dist.barrier()  # both ranks are in the group
tmp = out / f".rank{rank}.json.tmp"
tmp.write_text(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "world_size": D.world_size()}))
os.replace(tmp, out / f"rank{rank}.json")
if rank == 0:
    while True:
        time.sleep(0.2)
else:
    dist.barrier()
    time.sleep(3600)
