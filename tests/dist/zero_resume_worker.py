"""Run by tests/test_distributed.py under `torchrun --nproc_per_node 2`: a DeepSpeed ZeRO run resumed from its
checkpoint continues exactly like the uninterrupted run (weights, optimizer partitions, scheduler, data, RNG).

Writes rank 0's findings as JSON to argv[3]. argv: model_dir ds_config out_json workdir
"""

import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
model_dir, ds_config, out_json, workdir = sys.argv[1:5]
KEYS = ["actor/loss", "actor/pg_loss", "reward/total/mean", "response/length_mean", "actor/grad_norm"]


def make(out, steps):
    from mmevo.config import load_config
    from mmevo.data.synthetic import split_train_heldout
    from mmevo.grpo.trainer import GRPOTrainer
    from mmevo.models.loader import load_model
    from mmevo.rollout.factory import build_engine

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from conftest import randomize

    over = {"data.prompt_template": "none", "rollout.n": 2, "rollout.max_tokens": 8, "trainer.prompts_per_step": 4,
            "trainer.mini_batch_prompts": 2, "trainer.micro_batch_seqs": 4, "trainer.lr": 1e-3, "algo.kl_coef": 0,
            "algo.entropy_coef": 0.01,  # a gradient even when every reward is 0 (random tiny model)
            "trainer.lr_schedule": "cosine", "trainer.warmup_steps": 1, "trainer.steps": steps,
            "trainer.wandb_mode": "disabled", "trainer.progress": False, "trainer.save_every": 2,
            "trainer.output_dir": out, "trainer.deepspeed": ds_config, "reward.heads": "{accuracy: 1.0, format: 0.5}"}
    cfg = load_config(None, [f"{k}={v}" for k, v in over.items()])
    lm = load_model(model_dir)
    randomize(lm.model, std=0.15, seed=7)
    train, _ = split_train_heldout(24, 0, seed=4)
    return GRPOTrainer(cfg, lm, build_engine(cfg, lm), train, [], log=True)


def expected_lr(trainer, n_updates):
    from mmevo.grpo.trainer import make_optimizer, make_scheduler

    t = trainer.cfg.trainer
    opt = make_optimizer(torch.nn.Linear(1, 1), t.lr, 0.0)
    sched = make_scheduler(opt, t.warmup_steps, t.steps * 2, t.lr_schedule)
    for _ in range(n_updates):
        opt.step()
        sched.step()
    return sched.get_last_lr()[0]


from mmevo.grpo import distributed as D  # noqa: E402
from mmevo.models.weights import full_state_items  # noqa: E402

# uninterrupted: 3 steps (of a 4-step schedule, so the learning rate is not 0 yet)
a = make(f"{workdir}/a", 4)
hist_a = a.train(steps=3)
weights_a = dict(full_state_items(a.model))
# interrupted after 2 steps (checkpoint at step 2), then a new trainer resumes in the same output_dir
b = make(f"{workdir}/b", 4)
b.train(steps=2)
rng_b = torch.rand(4)  # the global RNG right after the step-2 checkpoint
del b
c = make(f"{workdir}/b", 4)  # building it draws from the global RNG (weight init)
c.train(steps=0)  # resume only
rng_c = torch.rand(4)
hist_c = c.train(steps=1)
weights_c = dict(full_state_items(c.model))
if D.rank() == 0:
    ckpt = Path(workdir) / "b" / "checkpoints" / "step_000002"
    result = {
        "world_size": D.world_size(),
        "resumed_steps": len(hist_c), "step": c.step_idx,
        "a3": {k: hist_a[2][k] for k in KEYS}, "c3": {k: hist_c[0][k] for k in KEYS},
        "weights_max_abs_diff": max(float((weights_a[k] - weights_c[k]).abs().max()) for k in weights_a),
        "lr_a": a.scheduler.get_last_lr(), "lr_c": c.scheduler.get_last_lr(),
        "lr_expected": expected_lr(a, 6),  # 3 steps x 2 optimizer updates: stepped once per update
        "rng_restored": bool(torch.equal(rng_b, rng_c)),
        "ckpt_files": sorted(str(p.relative_to(ckpt)) for p in ckpt.rglob("*") if p.is_file()),
        "metric_steps": [json.loads(line)["step"] for line in
                         (Path(workdir) / "b" / "metrics.jsonl").read_text().splitlines()],
    }
    Path(out_json).write_text(json.dumps(result))
D.barrier()  # a clean shutdown: no rank exits (tearing down its gloo threads) while another still talks to it
torch.distributed.destroy_process_group()
