"""Run by tests/test_distributed.py under `torchrun --nproc_per_node 2`: a loop role's view of the shared vLLM engine
that is stale on one rank only.

In a self-play loop on vLLM every role samples through one engine per process (mmevo.rollout.shared_vllm); a frozen
role loads its weights only on a rank that has something to ask it (MM-Zero's coder: parsed proposals; Prism's and
HONEST's solver: questions), so after a step without an update (which syncs nothing) the trained role's view is
stale on that rank alone. The view here stands in for that RoleEngine: it samples through the HF engine and its
sync_weights consumes ``iter_weights`` (the ZeRO-3 gather, a collective) as VLLMEngine.sync_weights does.

Step 1: every prompt too long (nothing trainable anywhere: no update, no sync); then rank 0's view turns stale;
step 2 trains; then rank 1's view turns stale and the held-out set is evaluated. Each rank's syncs are counted.
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


class RankView:
    """A trained role's view of the shared engine on one rank: ``weights_stale`` where another role's weights were
    loaded; a sync gathers every parameter (ZeRO-3), as a VLLMEngine's does."""

    def __init__(self, hf):
        self.hf, self.weights_stale, self.syncs = hf, False, 0
        self.model = hf.model  # the trainer gathers ZeRO-3 weights for an engine sampling from its module

    def generate(self, requests, params):
        assert not self.weights_stale, "sampled with another role's weights"
        return self.hf.generate(requests, params)

    def sync_weights(self, model):
        from mmevo.rollout.vllm_engine import iter_weights

        for _ in iter_weights(model, torch.float32):  # collective under ZeRO-3: every rank must take part
            pass
        self.syncs += 1
        self.weights_stale = False

    def wake(self):
        pass

    def sleep(self):
        pass

    def close(self):
        self.hf.close()


def main():
    from mmevo.config import load_config
    from mmevo.data.synthetic import split_train_heldout
    from mmevo.grpo import distributed as D
    from mmevo.grpo.trainer import GRPOTrainer
    from mmevo.models.loader import load_model
    from mmevo.rollout.factory import build_engine

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from conftest import randomize

    over = {"data.prompt_template": "none", "rollout.n": 2, "rollout.max_tokens": 6, "trainer.prompts_per_step": 4,
            "trainer.mini_batch_prompts": 4, "trainer.micro_batch_seqs": 2, "trainer.lr": 1e-3, "algo.kl_coef": 0,
            "trainer.steps": 2, "trainer.wandb_mode": "disabled", "trainer.progress": False,
            "trainer.save_every": 0, "trainer.output_dir": workdir, "trainer.deepspeed": ds_config,
            "data.max_prompt_length": 300, "reward.heads": "{accuracy: 1.0, format: 0.5}"}
    cfg = load_config(None, [f"{k}={v}" for k, v in over.items()])
    lm = load_model(model_dir)
    randomize(lm.model, std=0.15, seed=7)
    ex, _ = split_train_heldout(8, 0, seed=4)

    def long(e):
        return dataclasses.replace(e, id=e.id + "-long", problem=e.problem + " padding" * 400)

    batches = [[long(e) for e in ex[:4]], ex[4:8]]
    view = RankView(build_engine(cfg, lm))
    tr = GRPOTrainer(cfg, lm, view, (), [], prompt_source=ScriptedSource(batches), log=True)
    syncs = []
    tr.train(steps=1)  # nothing trainable anywhere: no update, no sync
    syncs.append(view.syncs)
    if D.rank() == 0:
        view.weights_stale = True  # a frozen role sampled on rank 0 only
    tr.train(steps=1)
    syncs.append(view.syncs)
    if D.rank() == 1:
        view.weights_stale = True
    tr.evaluate(ex[:2], max_tokens=4)
    syncs.append(view.syncs)
    per_rank = D.all_gather_objects(syncs)
    if D.rank() == 0:
        Path(out_json).write_text(json.dumps({"world_size": D.world_size(), "syncs": per_rank}))
    D.barrier()
    torch.distributed.destroy_process_group()


main()
