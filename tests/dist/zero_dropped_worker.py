"""Run by tests/test_distributed.py under `torchrun --nproc_per_node 2`: prompts dropped on one rank only.

Three scripted steps of 4 prompts (2 per rank, mini-batches of 2 prompts = 1 per rank, so 2 updates per step):
1. rank 1 loses one prompt (too long): 1 group there, 2 on rank 0;
2. rank 1 loses both: no sample at all there;
3. every prompt is too long: nothing to train anywhere.
Every rank must run the same number of optimizer updates (2, 2, 0) without hanging. Writes JSON to argv[3].
argv: model_dir ds_config out_json workdir
"""

import dataclasses
import json
import sys
from pathlib import Path

import torch

torch.set_num_threads(1)
model_dir, ds_config, out_json, workdir = sys.argv[1:5]

from scripted_source import ScriptedSource  # noqa: E402  (tests/dist, the script's own directory)


def main():
    from mmevo.config import load_config
    from mmevo.data.synthetic import split_train_heldout
    from mmevo.grpo import distributed as D
    from mmevo.grpo.trainer import GRPOTrainer
    from mmevo.models.loader import load_model
    from mmevo.rollout.factory import build_engine

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from conftest import randomize

    over = {"data.prompt_template": "none", "rollout.n": 2, "rollout.max_tokens": 8, "trainer.prompts_per_step": 4,
            "trainer.mini_batch_prompts": 2, "trainer.micro_batch_seqs": 1, "trainer.lr": 1e-3, "algo.kl_coef": 0.01,
            "algo.entropy_coef": 0.01, "trainer.steps": 3, "trainer.wandb_mode": "disabled",
            "trainer.progress": False, "trainer.save_every": 0, "trainer.output_dir": workdir,
            "trainer.deepspeed": ds_config, "data.max_prompt_length": 300,
            "reward.heads": "{accuracy: 1.0, format: 0.5}"}
    cfg = load_config(None, [f"{k}={v}" for k, v in over.items()])
    lm = load_model(model_dir)
    randomize(lm.model, std=0.15, seed=7)
    ref = load_model(model_dir).model.eval().requires_grad_(False)
    randomize(ref, std=0.15, seed=7)
    ex, _ = split_train_heldout(8, 0, seed=4)

    def long(e):
        return dataclasses.replace(e, id=e.id + "-long", problem=e.problem + " padding" * 400)

    batches = [[ex[0], ex[1], long(ex[2]), ex[3]], [ex[4], ex[5], long(ex[6]), long(ex[7])],
               [long(e) for e in ex[:4]]]
    tr = GRPOTrainer(cfg, lm, build_engine(cfg, lm), (), [], ref_model=ref, prompt_source=ScriptedSource(batches),
                     log=True)
    updates = []
    real_step = tr.backend.step

    def counting_step():
        updates[-1] += 1
        return real_step()

    tr.backend.step = counting_step
    hist = []
    for _ in range(3):
        updates.append(0)
        hist += tr.train(steps=1)
    per_rank = D.all_gather_objects({"updates": updates, "last_epoch": tr.scheduler.last_epoch})
    # held-out evaluation split over ranks and gathered == every example evaluated on one rank
    from mmevo.grpo.trainer import eval_records, summarize_eval

    split_eval = tr.evaluate(ex[:5], max_tokens=6)
    with tr._sampling_weights():
        whole = summarize_eval(eval_records(tr.engine, tr.prompts, ex[:5], lm.tokenizer, 6, 0.0, seed=tr.cfg.trainer.seed))
    same_eval = D.all_gather_objects(split_eval == whole and split_eval["n"] == 5)
    from mmevo.models.weights import full_state_items

    digest = float(sum(t.double().abs().sum() for _, t in full_state_items(tr.model)))
    digests = D.all_gather_objects(digest)
    if D.rank() == 0:
        keys = ["data/skipped_overlong_prompts", "data/skipped_steps", "data/samples", "actor/updates"]
        Path(out_json).write_text(json.dumps({
            "world_size": D.world_size(), "per_rank": per_rank, "digests": digests, "same_eval": same_eval,
            "metrics": [{k: h.get(k) for k in keys} for h in hist],
            "finite_loss": [h.get("actor/loss") is not None and h["actor/loss"] == h["actor/loss"] for h in hist]}))
    D.barrier()  # a clean shutdown: no rank leaves while another still talks to it
    torch.distributed.destroy_process_group()


main()
