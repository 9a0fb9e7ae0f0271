"""Run by tests/test_distributed.py under `torchrun --nproc_per_node 2`: GRPO under DeepSpeed ZeRO vs one process.

Writes rank 0's findings as JSON to argv[3]. argv: model_dir ds_config out_json workdir
"""

import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
model_dir, ds_config, out_json, workdir = sys.argv[1:5]


def make(cfg_over, model_seed=7):
    from mmevo.config import load_config
    from mmevo.data.synthetic import split_train_heldout
    from mmevo.grpo.trainer import GRPOTrainer
    from mmevo.models.loader import load_model
    from mmevo.rollout.factory import build_engine

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from conftest import randomize

    base = {"data.prompt_template": "none", "rollout.n": 2, "rollout.max_tokens": 8, "trainer.prompts_per_step": 4,
            "trainer.mini_batch_prompts": 4, "trainer.micro_batch_seqs": 4, "trainer.lr": 1e-3, "algo.kl_coef": 0,
            "trainer.wandb_mode": "disabled", "trainer.progress": False, "trainer.save_every": 0,
            "trainer.output_dir": workdir, "reward.heads": "{accuracy: 1.0, format: 0.5}"}
    base.update(cfg_over)
    cfg = load_config(None, [f"{k}={v}" for k, v in base.items()])
    lm = load_model(model_dir)
    randomize(lm.model, std=0.15, seed=model_seed)
    train, held = split_train_heldout(16, 0, seed=4)
    return GRPOTrainer(cfg, lm, build_engine(cfg, lm), train, held, log=False), lm


def fixed_batch(tr):
    prompts = [tr.prompts(ex) for ex in tr.prompt_source.examples[:3] for _ in range(2)]
    responses = [[105, 106, 107], [108, 109], [110], [111, 112, 113, 114], [115, 116], [117]]
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.8, -0.8])
    groups = torch.tensor([0, 0, 1, 1, 2, 2])
    return prompts, responses, adv, groups


ds_tr, _ = make({"trainer.deepspeed": ds_config})
from mmevo.grpo import distributed as D  # noqa: E402
from mmevo.models.weights import full_state_items, is_zero3, partitioned  # noqa: E402

rank = D.rank()
result = {"world_size": D.world_size(), "zero3": is_zero3(ds_tr.model) and partitioned(ds_tr.model)}
# 1) the same fixed batch on every rank: loss and full gradients equal the single-process ones; then one update
from deepspeed.utils import safe_get_full_grad  # noqa: E402

from mmevo.grpo import algos  # noqa: E402
from mmevo.grpo.trainer import sequence_logprobs  # noqa: E402


def policy_loss(tr):
    prompts, responses, adv, _ = fixed_batch(tr)
    logp, _, mask = sequence_logprobs(tr.model, prompts, responses, tr.pad_id, 1.0, "cpu")
    return algos.policy_loss(logp, logp.detach(), adv, mask)[0]


engine = ds_tr.ds_engine
engine.set_gradient_accumulation_boundary(True)
ds_loss = policy_loss(ds_tr)
engine.backward(ds_loss)
ds_grads = {n: safe_get_full_grad(p).clone() for n, p in engine.module.named_parameters()}
engine.step()
ds_weights = dict(full_state_items(ds_tr.model))
# 2) weight sync from the (partitioned) trainer model into a separate full engine model
from mmevo.models.loader import load_model  # noqa: E402
from mmevo.rollout.hf import HFEngine  # noqa: E402

other = load_model(model_dir)
HFEngine(other.model, 0, []).sync_weights(ds_tr.model)
synced = other.model.state_dict()
result["sync_max_abs_diff"] = max(float((synced[k] - ds_weights[k]).abs().max()) for k in ds_weights)
# 3) a real data-parallel step (each rank rolls out its own groups), metrics averaged over ranks, export
local_metrics = ds_tr.step()
step_metrics = D.all_reduce_mean(local_metrics)
ranks_metrics = D.all_gather_objects(local_metrics)
result["ratio_max_by_rank"] = [m["actor/ratio_max"] for m in ranks_metrics]
result["dp_ratio_max"] = step_metrics["actor/ratio_max"]
result["length_min_by_rank"] = [m["response/length_min"] for m in ranks_metrics]
result["dp_length_min"] = step_metrics["response/length_min"]
ds_tr.export(Path(workdir) / "final")
if rank == 0:
    # the single-process reference on the kernels ZeRO-3's partitioned weights take (F.linear: model.cpu_linear
    # leaves them to DeepSpeed); after one AdamW step a last-bit difference in a near-zero gradient is an lr-size one
    sp_tr, _ = make({"model.cpu_linear": "torch"} if result["zero3"] else {})
    sp_loss = policy_loss(sp_tr)
    sp_loss.backward()
    result["ds_loss"], result["sp_loss"] = float(ds_loss), float(sp_loss)
    result["grads_max_abs_diff"] = max(float((p.grad - ds_grads[n]).abs().max())
                                       for n, p in sp_tr.model.named_parameters())
    result["grad_norm"] = float(torch.sqrt(sum((p.grad ** 2).sum() for p in sp_tr.model.parameters())))
    sp_tr.backend.step()
    sp_weights = sp_tr.model.state_dict()
    result["lr"] = sp_tr.cfg.trainer.lr
    result["weights_max_abs_diff"] = max(float((sp_weights[k] - ds_weights[k]).abs().max()) for k in ds_weights)
    result["dp_step_reward_mean"] = step_metrics["reward/total/mean"]
    exported = load_model(Path(workdir) / "final").model.state_dict()
    result["export_max_abs_diff"] = max(
        float((exported[k] - v).abs().max()) for k, v in dict(full_state_items(ds_tr.model)).items())
    Path(out_json).write_text(json.dumps(result))
else:
    dict(full_state_items(ds_tr.model))  # the gather above is collective: take part
D.barrier()  # a clean shutdown: no rank exits (tearing down its gloo threads) while another still talks to it
torch.distributed.destroy_process_group()
