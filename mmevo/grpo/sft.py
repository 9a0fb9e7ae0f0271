"""SFT warm-up: cross-entropy on worked solutions ("first SFT, then RL").

A randomly initialised tiny model never samples a correct, well-formatted answer, so GRPO would see only zero
rewards. A short SFT pass teaches the format and some skill; GRPO then improves on it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Sequence

import torch

from mmevo.config import Config, recorded_config_changes, to_dict
from mmevo.data.schema import SFT_SYSTEM_PROMPT, Example
from mmevo.grpo.algos import masked_mean
from mmevo.grpo.checkpoint import DamagedCheckpointError, load_state_file, rng_state, set_rng_state
from mmevo.grpo.trainer import (PromptCache, configure_training, make_optimizer, make_scheduler, seed_everything,
                                sequence_logprobs)
from mmevo.metrics import RunLogger
from mmevo.models.loader import LoadedModel


def sft_targets(tokenizer, examples: Sequence[Example]) -> list[list[int]]:
    """Token ids of each example's solution followed by the end-of-turn token."""
    out = []
    for i, ex in enumerate(examples):
        if not ex.solution:
            raise ValueError(f"SFT example {ex.id!r} (index {i}) has no 'solution' field")
        ids = tokenizer(ex.solution, add_special_tokens=False)["input_ids"]
        out.append(ids + [tokenizer.convert_tokens_to_ids("<|im_end|>")])
    return out


def _prompt_encoder(prompts: PromptCache, examples: Sequence[Example]):
    """``prompts`` for an example, or a cache of the same kind for its own system prompt when its meta has one
    (``SFT_SYSTEM_PROMPT``: a string, else a ValueError naming the example, checked before the first step)."""
    own: dict[str, PromptCache] = {}
    for i, ex in enumerate(examples):
        sp = (ex.meta or {}).get(SFT_SYSTEM_PROMPT)
        if sp is not None and not isinstance(sp, str):
            raise ValueError(f"SFT example {ex.id!r} (index {i}): meta[{SFT_SYSTEM_PROMPT!r}] must be a string, got "
                             f"{type(sp).__name__}")
        if sp is not None and sp not in own:
            own[sp] = prompts.with_system_prompt(sp)

    def encode(ex: Example):
        sp = (ex.meta or {}).get(SFT_SYSTEM_PROMPT)
        return prompts(ex) if sp is None else own[sp](ex)

    return encode


def run_sft(cfg: Config, policy: LoadedModel, examples: list[Example], log: bool = True) -> list[dict]:
    """Train ``policy.model`` in place on (prompt, solution) pairs; returns per-step metrics.

    ``model.lora``, ``model.freeze_vision_tower`` and ``model.gradient_checkpointing`` apply as in RL (with LoRA the
    adapters train and the export holds the merged weights); ``model.trainable`` is RL-only: SFT trains the rest.
    An example whose ``meta`` has ``SFT_SYSTEM_PROMPT`` is prompted with that system prompt, not ``data.system_prompt``."""
    s = cfg.sft
    if not examples:  # else an IndexError deep in the batch loop
        raise ValueError("SFT needs at least one example and got none (is data.train empty, or was every row skipped?)")
    model = policy.model
    device = torch.device(cfg.model.device)
    configure_training(model, cfg.model, cfg.trainer.seed, subset=False)
    # dropout (LoRA's, e.g.) draws from the global generators: seeded by the run's seed, as GRPO's fresh start does,
    # else the masks depended on what the process drew before; a resume restores the saved state over this
    seed_everything(cfg.trainer.seed)
    prompts = PromptCache(policy.processor, policy.is_vl, cfg.data.prompt_template, cfg.data.system_prompt,
                          cfg.data.prompt_cache_mb)
    encode = _prompt_encoder(prompts, examples)
    targets = sft_targets(policy.tokenizer, examples)
    n_steps = max(1, math.ceil(len(examples) * s.epochs / s.batch_size))
    opt = make_optimizer(model, s.lr, s.weight_decay)
    sched = make_scheduler(opt, s.warmup_steps, n_steps, "cosine")
    logger = RunLogger(s.output_dir, None, "disabled", enabled=log, filename="sft_metrics.jsonl")
    gen = torch.Generator().manual_seed(cfg.trainer.seed)
    order = torch.randperm(len(examples), generator=gen).tolist()
    pos, start = 0, 0
    history: list[dict] = []
    state_path = Path(s.output_dir) / STATE_FILE
    if s.save_every > 0 and state_path.exists():  # an interrupted run: continue where its last state left off
        state = load_sft_state(state_path)
        if state["n_steps"] != n_steps or state["n_examples"] != len(examples):
            raise ValueError(f"{state_path} is from another SFT run ({state['n_steps']} steps over "
                             f"{state['n_examples']} examples, this one: {n_steps} over {len(examples)}); delete it "
                             "or use another sft.output_dir")
        # the same length is not the same SFT: after a kill, a rerun with another sft.lr or data.seed resumed the
        # saved optimizer and scheduler (which keep the old lr) on the new examples, and its summary named the new
        # settings (a state saved before states held their config is checked by its length alone)
        changed = sft_config_changes(state["config"], cfg) if isinstance(state.get("config"), dict) else []
        if changed:
            raise ValueError(f"{state_path} is from an interrupted SFT with other settings ({', '.join(changed)}): "
                             "rerun with its settings to resume it, or delete it (or use another sft.output_dir)")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        gen.set_state(state["generator"])
        if "rng" in state:  # the global generators (dropout, e.g. LoRA's); a state file written before they were kept
            set_rng_state(state["rng"])  # resumes with fresh ones, as it did
        order, pos, start, history = state["order"], state["pos"], state["step"], state["history"]
        if log:
            print(f"[mmevo sft] resuming at step {start}/{n_steps} from {state_path}")
    logger.truncate_after(start)
    model.train()
    from tqdm import tqdm

    bar = tqdm(range(start, n_steps), desc="sft", dynamic_ncols=True, disable=not cfg.trainer.progress,
               initial=start, total=n_steps)
    for step in bar:
        idx = []
        while len(idx) < s.batch_size:
            if pos == len(order):
                order, pos = torch.randperm(len(examples), generator=gen).tolist(), 0
            idx.append(order[pos])
            pos += 1
        logp, _, mask = sequence_logprobs(model, [encode(examples[i]) for i in idx], [targets[i] for i in idx],
                                          policy.tokenizer.pad_token_id, 1.0, device,
                                          padding_free=cfg.trainer.padding_free)
        loss = -masked_mean(logp, mask)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"SFT loss became {float(loss)} at step {step}; lower sft.lr")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), s.max_grad_norm)
        lr = sched.get_last_lr()[0]  # the lr this update uses, read before the scheduler moves on to the next one
        opt.step()
        sched.step()
        m = {"sft/loss": loss.item(), "sft/lr": lr,
             "sft/token_acc": float(((logp.detach() > math.log(0.5)).float() * mask).sum() / mask.sum())}
        logger.log(step + 1, m)
        history.append(m)
        bar.set_postfix(loss=f"{m['sft/loss']:.3f}")
        if s.save_every > 0 and (step + 1) % s.save_every == 0 and step + 1 < n_steps:
            _save_state(state_path, {"model": model.state_dict(), "optimizer": opt.state_dict(),
                                     "scheduler": sched.state_dict(), "generator": gen.get_state(), "rng": rng_state(),
                                     "order": order,
                                     "pos": pos, "step": step + 1, "history": history, "n_steps": n_steps,
                                     "n_examples": len(examples), "config": to_dict(cfg)})
    logger.close()
    return history


STATE_FILE = "sft_state.pt"
_STATE_KEYS = ("model", "optimizer", "scheduler", "generator", "order", "pos", "step", "history", "n_steps",
               "n_examples")  # what every ``_save_state`` writes (``rng`` and ``config`` came later: optional)


def load_sft_state(path: Path) -> dict:
    """An interrupted SFT's state; one lacking what every save writes (another tool's file, a hand edit) is a
    ``DamagedCheckpointError`` naming the file and the keys, not a bare ``KeyError`` from the middle of the resume."""
    state = load_state_file(path)
    missing = [k for k in _STATE_KEYS if k not in state]
    if missing:
        raise DamagedCheckpointError(f"SFT state {path} lacks {', '.join(map(repr, missing))}: it was not written by "
                                     "an mmevo SFT; delete it to start that SFT afresh")
    return state

# what the SFT reads (the sft / data / model sections, the seed; model.path is the model it starts from), less where
# it writes, how often it saves its state, and what only RL (model.trainable) or the held-out evaluations read
SFT_SETTINGS = ("sft.", "data.", "model.", "trainer.seed", "trainer.padding_free")
NOT_SFT_SETTINGS = ("sft.output_dir", "sft.save_every", "model.cache_dir", "model.cpu_malloc", "model.trainable",
                    "data.n_heldout", "data.heldout", "data.heldout_split")


def sft_config_changes(recorded: dict, cfg: Config) -> list[str]:
    """The settings the SFT reads in which the config ``recorded`` by an SFT (``to_dict``, as its summary or state
    holds it) differs from ``cfg``, sorted."""
    return [k for k in recorded_config_changes(recorded, cfg)
            if k.startswith(SFT_SETTINGS) and k not in NOT_SFT_SETTINGS]


def discard_state(output_dir) -> None:
    """Remove a finished SFT's resumable state once its model is exported: nothing reads it again (a cached model is
    reused), and a later SFT in the same dir (the export deleted, the config changed) would resume from it."""
    (Path(output_dir) / STATE_FILE).unlink(missing_ok=True)


def sft_and_export(cfg: Config, policy: LoadedModel, examples: list[Example], target: Path) -> None:
    """A loop's warm-up: ``run_sft`` (no log), the model saved to ``target``, the SFT's resumable state discarded.

    The loops take ``target/config.json`` for a finished warm-up, and ``save_model`` writes it first: the export goes
    to a sibling directory moved into place once complete, so a kill mid-export leaves no ``target`` to be reused
    without its weights or tokenizer (the rerun resumes the SFT from its state and exports again). Every rank trains
    the same warm-up; the main rank alone exports it (the loops wait for it with a barrier before any rank loads it):
    transformers writes no weights on the other ranks, and a rank's tokenizer-only export moved into place first
    would have kept the main rank's out."""
    from mmevo.grpo.checkpoint import export_atomically, save_model
    from mmevo.grpo.distributed import is_main

    run_sft(cfg, policy, examples, log=False)
    if is_main():
        export_atomically(target, lambda d: save_model(d, policy.model, policy.processor))
    discard_state(cfg.sft.output_dir)


def _save_state(path: Path, state: dict) -> None:
    """Write atomically: an interruption during the write leaves the previous state intact."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
