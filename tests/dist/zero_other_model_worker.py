"""Run by tests/test_ckpt3_review.py as one DeepSpeed process (RANK=0, WORLD_SIZE=1, gloo on CPU): a ZeRO run's
checkpoint resumed onto another model behind the same model.path. Writes the resume's error as JSON to argv[2].

argv: ds_config out_json workdir
"""

import json
import shutil
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
ds_config, out_json, workdir = sys.argv[1:4]
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mmevo.data.synthetic import split_train_heldout  # noqa: E402
from mmevo.models.tiny import TinyVLSpec, build_tiny_qwen2_5_vl  # noqa: E402
from test_trainer import _cfg, _trainer  # noqa: E402

model = Path(workdir) / "model"
out = Path(workdir) / "run"
data = split_train_heldout(24, 4, seed=5)
over = {"algo.kl_coef": 0, "trainer.steps": 2, "trainer.deepspeed": ds_config}
build_tiny_qwen2_5_vl(model, TinyVLSpec())
_trainer(_cfg(out, **over), model, data).train(steps=1)
shutil.rmtree(model)
build_tiny_qwen2_5_vl(model, TinyVLSpec(num_hidden_layers=2))  # the same model.path, another model behind it
try:
    _trainer(_cfg(out, **over), model, data, seed_weights=False).train(steps=0)
    error = None
except Exception as e:  # noqa: BLE001 (what the user would see, whatever its type)
    error = f"{type(e).__name__}: {e}"
Path(out_json).write_text(json.dumps({"error": error, "ckpt": str(out / "checkpoints" / "step_000001")}))
