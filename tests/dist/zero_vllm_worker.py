"""Run by tests/test_distributed.py under `torchrun --nproc_per_node 2`: vLLM engines beside a ZeRO-3 policy.

Each rank joins the process group, starts its own vLLM engine in it (external launcher), takes one optimizer step on
a fixed batch, pushes the partitioned weights (gathered bucket by bucket) into its engine and checks that greedy
decoding then equals the HF engine's on the full updated weights. Rank 0 writes JSON to argv[3].
argv: model_dir ds_config out_json workdir
"""

import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
model_dir, ds_config, out_json, workdir = sys.argv[1:5]

import mmevo  # noqa: E402,F401  (torchvision shim before vLLM)
from mmevo.config import load_config  # noqa: E402
from mmevo.data.synthetic import split_train_heldout  # noqa: E402
from mmevo.grpo import algos  # noqa: E402
from mmevo.grpo import distributed as D  # noqa: E402
from mmevo.grpo.trainer import GRPOTrainer, sequence_logprobs  # noqa: E402
from mmevo.models.loader import load_model, stop_token_ids, vision_token_ids  # noqa: E402
from mmevo.models.weights import is_zero3, partitioned  # noqa: E402
from mmevo.rollout.base import RolloutRequest, SamplingParams  # noqa: E402
from mmevo.rollout.factory import build_engine  # noqa: E402
from mmevo.rollout.hf import HFEngine  # noqa: E402

cfg = load_config(None, [f"{k}={v}" for k, v in {
    "model.path": model_dir, "data.prompt_template": "none", "data.max_prompt_length": 256, "rollout.n": 2,
    "rollout.max_tokens": 12, "rollout.engine": "vllm", "trainer.prompts_per_step": 4, "trainer.mini_batch_prompts": 4,
    "trainer.lr": 0.05, "algo.kl_coef": 0, "trainer.wandb_mode": "disabled", "trainer.progress": False,
    "trainer.save_every": 0, "trainer.output_dir": workdir, "trainer.deepspeed": ds_config}.items()])
D.init_distributed("cpu")  # first: vLLM joins this process group
lm = load_model(model_dir)
engine = build_engine(cfg, lm)
train, _ = split_train_heldout(8, 0, seed=4)
tr = GRPOTrainer(cfg, lm, engine, train, [], log=False)
result = {"world_size": D.world_size(), "zero3": is_zero3(tr.model) and partitioned(tr.model), "executor": type(
    engine.llm.llm_engine.model_executor).__name__}

prompts = [tr.prompts(ex) for ex in train[:3]]
greedy = SamplingParams(temperature=0.0, max_tokens=12)
reqs = [RolloutRequest(p) for p in prompts]


def greedy_ids(eng):
    return [o[0].token_ids for o in eng.generate(reqs, greedy)]


before = greedy_ids(engine)
# one optimizer step on a fixed batch: push the sampled responses down
ds = tr.ds_engine
ds.set_gradient_accumulation_boundary(True)
logp, _, mask = sequence_logprobs(tr.model, prompts, before, tr.pad_id, 1.0, "cpu")
loss = algos.policy_loss(logp, logp.detach(), torch.full((len(prompts),), -1.0), mask)[0]
ds.backward(loss)
ds.step()
engine.sync_weights(tr.model)  # collective: the gathers run on every rank
after = greedy_ids(engine)
full = load_model(model_dir)
hf = HFEngine(full.model, full.tokenizer.pad_token_id, stop_token_ids(full.tokenizer, full.model),
              banned_ids=vision_token_ids(full.tokenizer))
hf.sync_weights(tr.model)  # the same gathered weights into a full HF model
expected = greedy_ids(hf)
result.update(changed=after != before, vllm_matches_hf=after == expected, after=after, expected=expected)
if D.rank() == 0:
    Path(out_json).write_text(json.dumps(result))
