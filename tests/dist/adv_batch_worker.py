"""Run by tests/test_distributed.py under `torchrun --nproc_per_node 2`: ``algo.adv_scale=batch`` over 2 ranks.

Each rank rolls out its own 2 prompts x 2 samples and gets fixed rewards of its own scale (rank 0: 0 / 1, rank 1:
0 / 0.1). The advantages each rank's GRPO step trains on must be those of one process over the global batch: the
rewards centred by their group and divided by the std of all 8 rewards, not by each rank's own std. Writes rank 0's
findings as JSON to argv[3]. argv: model_dir ds_config out_json workdir
"""

import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
model_dir, ds_config, out_json, workdir = sys.argv[1:5]
REWARDS = {0: [0.0, 1.0, 1.0, 1.0], 1: [0.0, 0.1, 0.1, 0.0]}  # per rank: prompt a's 2 samples, then prompt b's


class FixedRewards:
    """The trainer's reward mixer with its rewards replaced by this rank's fixed ones (metrics kept)."""

    def __init__(self, inner, values):
        self.inner, self.values = inner, values

    def __call__(self, samples):
        _, metrics = self.inner(samples)
        assert len(samples) == len(self.values), (len(samples), self.values)
        return torch.tensor(self.values), metrics

    def __getattr__(self, name):
        return getattr(self.inner, name)


def main():
    from mmevo.config import load_config
    from mmevo.data.synthetic import split_train_heldout
    from mmevo.grpo import distributed as D
    from mmevo.grpo.trainer import GRPOTrainer
    from mmevo.models.loader import load_model
    from mmevo.rollout.factory import build_engine

    over = {"data.prompt_template": "none", "rollout.n": 2, "rollout.max_tokens": 4, "trainer.prompts_per_step": 4,
            "trainer.mini_batch_prompts": 4, "trainer.micro_batch_seqs": 4, "trainer.lr": 1e-3, "algo.kl_coef": 0,
            "algo.adv_scale": "batch", "trainer.wandb_mode": "disabled", "trainer.progress": False,
            "trainer.save_every": 0, "trainer.output_dir": workdir, "reward.heads": "{accuracy: 1.0}",
            "trainer.deepspeed": ds_config}
    cfg = load_config(None, [f"{k}={v}" for k, v in over.items()])
    lm = load_model(model_dir)
    train, _ = split_train_heldout(8, 0, seed=4)
    tr = GRPOTrainer(cfg, lm, build_engine(cfg, lm), train, [], log=False)
    rank = D.rank()
    tr.rewards = FixedRewards(tr.rewards, REWARDS[rank])
    seen = {}
    real_update = tr._update

    def update(prompts, responses, adv, *rest):
        seen["adv"] = adv.tolist()
        return real_update(prompts, responses, adv, *rest)

    tr._update = update
    tr.step()
    everyone = D.all_gather_objects(seen.get("adv"))
    if rank == 0:
        Path(out_json).write_text(json.dumps({"world_size": D.world_size(), "adv_by_rank": everyone,
                                              "rewards_by_rank": [REWARDS[0], REWARDS[1]]}))
    D.barrier()
    torch.distributed.destroy_process_group()


main()
