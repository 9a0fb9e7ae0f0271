"""Run by tests/test_distributed.py under `torchrun --nproc_per_node 2`: a held-out evaluation split over the ranks,
sampled (rollout.eval_temperature = 1), of one prompt four times. Writes JSON to argv[3].
argv: model_dir ds_config out_json workdir
"""

import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
model_dir, ds_config, out_json, workdir = sys.argv[1:5]


def main():
    from mmevo.config import load_config
    from mmevo.data.synthetic import split_train_heldout
    from mmevo.grpo import distributed as D
    from mmevo.grpo.trainer import GRPOTrainer, eval_records
    from mmevo.models.loader import load_model
    from mmevo.rollout.factory import build_engine

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from conftest import randomize

    over = {"data.prompt_template": "none", "rollout.n": 2, "rollout.max_tokens": 8, "rollout.eval_temperature": 1.0,
            "trainer.prompts_per_step": 2, "trainer.mini_batch_prompts": 2, "algo.kl_coef": 0,
            "trainer.wandb_mode": "disabled", "trainer.progress": False, "trainer.save_every": 0,
            "trainer.output_dir": workdir, "trainer.deepspeed": ds_config}
    cfg = load_config(None, [f"{k}={v}" for k, v in over.items()])
    lm = load_model(model_dir)
    randomize(lm.model, std=0.15, seed=7)
    ex, _ = split_train_heldout(1, 0, seed=4)
    tr = GRPOTrainer(cfg, lm, build_engine(cfg, lm), ex, [], log=False)
    same = [ex[0]] * 4  # rank 0 evaluates positions 0 and 2, rank 1 positions 1 and 3: the same prompt everywhere
    split = [s["response"] for s in tr.evaluate(same, max_tokens=6)["samples"]]
    with tr._sampling_weights():  # the whole set evaluated in one process, with the run's seed
        alone = [r["response"] for r in eval_records(tr.engine, tr.prompts, same, lm.tokenizer, 6, 1.0,
                                                     seed=cfg.trainer.seed)]
    if D.rank() == 0:
        Path(out_json).write_text(json.dumps({"world_size": D.world_size(), "split": split, "one_process": alone}))
    D.barrier()
    torch.distributed.destroy_process_group()


main()
