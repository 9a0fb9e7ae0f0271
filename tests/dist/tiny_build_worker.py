"""Run by tests/test_tiny_build.py under `torchrun --nproc_per_node 2`: `model.path=tiny` on a fresh cache.

argv: cache_dir out_dir mode. mode "node": the launcher's LOCAL_RANKs (one node: rank 0 builds, rank 1 waits);
"two-nodes": every rank says LOCAL_RANK=0, as the single ranks of two nodes that share the cache (both build, and
global rank 1 must write a whole model although transformers saves on rank 0 only). Writes out_dir/rank<R>.json.
"""

import hashlib
import json
import os
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
cache_dir, out_dir, mode = sys.argv[1:4]

from mmevo.config import load_config  # noqa: E402
from mmevo.grpo import distributed as D  # noqa: E402
from mmevo.models import tiny  # noqa: E402

D.init_distributed("cpu")  # joined before the model is resolved, as in run_grpo
if mode == "two-nodes":
    os.environ["LOCAL_RANK"] = "0"
builds = []
_train_tokenizer = tiny.train_tokenizer


def counting_train_tokenizer(*args, **kwargs):  # called once per build
    builds.append(1)
    if mode == "two-nodes":
        # both "nodes" build: neither finishes (and renames into place) before the other has started its own build,
        # else a rank slowed by load finds the other's complete model and never builds (the case under test is the
        # build on global rank 1)
        Path(out_dir, f"building{D.rank()}").write_text("")
        deadline = time.monotonic() + 300
        while not Path(out_dir, f"building{1 - D.rank()}").exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the other rank never started its build")
            time.sleep(0.05)
    return _train_tokenizer(*args, **kwargs)


tiny.train_tokenizer = counting_train_tokenizer
from mmevo.recipes import resolve_model_path  # noqa: E402

cfg = load_config(None, ["model.path=tiny", f"model.cache_dir={cache_dir}"])
D.barrier()  # both ranks look at the empty cache at about the same time
path = Path(resolve_model_path(cfg))
D.barrier()  # every rank has resolved before any looks at the cache (no temp dirs of a rank still building)
from mmevo.models.loader import load_model  # noqa: E402

lm = load_model(str(path))
files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.iterdir())}
ids = lm.tokenizer("The answer is 42.")["input_ids"]
result = {"rank": D.rank(), "world_size": D.world_size(), "path": str(path), "builds": len(builds), "files": files,
          "missing": tiny.missing_parts(path), "param_sum": float(sum(p.double().sum() for p in lm.model.parameters())),
          "is_vl": lm.is_vl, "ids": ids, "cache_entries": sorted(p.name for p in Path(cache_dir).iterdir())}
Path(out_dir, f"rank{D.rank()}.json").write_text(json.dumps(result))
