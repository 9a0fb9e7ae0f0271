"""The GRPO loop. Read ``GRPOTrainer.step`` top to bottom: it is the whole algorithm.

rollout -> reward heads -> group advantages -> (old log-probs) -> (reference log-probs) -> micro-batched policy
loss with gradient accumulation -> AdamW step -> weight sync to the engine -> metrics. Strategies (plain groups,
CSRS) decide what is sampled; everything after the rewards is shared.
"""

from __future__ import annotations

import collections
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from mmevo.config import Config, render_prompt, to_dict
from mmevo.data.schema import Example
from mmevo.grpo import algos
from mmevo.grpo.checkpoint import (checkpoint_root, commit_checkpoint, latest_checkpoint, load_model_weights,
                                   load_trainer_state, remove_partial_checkpoints, rng_state, save_checkpoint,
                                   save_model, set_rng_state, write_checkpoint_files)
from mmevo.metrics import RunLogger, StageTimer, peak_memory_mb
from mmevo.models.inputs import EncodedPrompt, collate, collate_for_training, encode_prompt, unwrap
from mmevo.models.loader import LoadedModel
from mmevo.rewards.answers import extract_answer
from mmevo.rewards.heads import RewardMixer, ScoredSample
from mmevo.rollout.base import Completion, RolloutRequest, SamplingParams


class TrainingDiverged(RuntimeError):
    """Raised on a NaN/inf loss; the last good checkpoint is left untouched."""


class EpochSampler:
    """Seeded shuffled pass over ``n`` items, epoch after epoch; its position is part of the checkpoint."""

    def __init__(self, n: int, seed: int):
        if n <= 0:
            raise ValueError("the training set is empty")
        self.n, self.seed, self.epoch, self.pos = n, seed, 0, 0
        self._perm = self._make_perm()

    def _make_perm(self) -> list[int]:
        return np.random.default_rng([self.seed, self.epoch]).permutation(self.n).tolist()

    def take(self, k: int) -> list[int]:
        out = []
        while len(out) < k:
            if self.pos == self.n:
                self.epoch, self.pos = self.epoch + 1, 0
                self._perm = self._make_perm()
            out.append(self._perm[self.pos])
            self.pos += 1
        return out

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos, "n": self.n, "seed": self.seed}

    def load_state_dict(self, s: dict) -> None:
        if s["n"] != self.n:
            raise ValueError(f"checkpoint was made with {s['n']} training rows, this run has {self.n}")
        self.epoch, self.pos = s["epoch"], s["pos"]
        self._perm = self._make_perm()


class PromptCache:
    """Encodes each example's prompt once (chat template + image processing).

    Encoded prompts hold the processed pixels (tens of MB for a large image), so the cache keeps at most ``max_mb`` of
    them and drops the least recently used beyond that; a dropped prompt is simply encoded again when next needed.
    """

    def __init__(self, processor, is_vl: bool, template: str, system_prompt: str = "", max_mb: float = 2048):
        self.processor, self.is_vl = processor, is_vl
        self.template = template
        self.system_prompt = system_prompt or None
        self.max_bytes = int(max_mb * 2**20)
        self._cache: collections.OrderedDict[str, EncodedPrompt] = collections.OrderedDict()
        self.nbytes = 0

    def __call__(self, ex: Example) -> EncodedPrompt:
        enc = self._cache.get(ex.id)
        if enc is not None:
            self._cache.move_to_end(ex.id)
            return enc
        enc = encode_prompt(self.processor, self.is_vl, render_prompt(self.template, ex.problem), ex.images,
                            self.system_prompt)
        self._cache[ex.id] = enc
        self.nbytes += _prompt_bytes(enc)
        while self.nbytes > self.max_bytes and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self.nbytes -= _prompt_bytes(old)
        return enc

    def __len__(self) -> int:
        return len(self._cache)


def _prompt_bytes(enc: EncodedPrompt) -> int:
    pixels = enc.pixel_values
    return (pixels.numel() * pixels.element_size() if pixels is not None else 0) + 16 * len(enc.input_ids)


@dataclass
class Rollout:
    """One step's samples, flattened: sample i belongs to group ``group_ids[i]`` (its prompt)."""

    prompts: list[EncodedPrompt]  # per sample
    completions: list[Completion]  # per sample
    texts: list[str]  # decoded responses
    group_ids: torch.Tensor  # [B]
    examples: list[Example]  # per sample
    trainable: torch.Tensor | None = None  # [B] bool; None = all (CSRS: re-inferences only feed rewards)
    parents: list[int] | None = None  # [B] CSRS: index of each re-inference's maternal sample, -1 for maternal ones
    extra_metrics: dict = field(default_factory=dict)

    def trainable_mask(self) -> torch.Tensor:
        return self.trainable if self.trainable is not None else torch.ones(len(self.completions), dtype=torch.bool)


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float, betas=(0.9, 0.999)) -> torch.optim.Optimizer:
    """AdamW with no weight decay on biases and norms (standard for transformers)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.dim() < 2 else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas))


def make_scheduler(opt, warmup: int, total: int, kind: str) -> torch.optim.lr_scheduler.LambdaLR:
    def factor(i: int) -> float:
        if warmup and i < warmup:
            return (i + 1) / warmup
        if kind == "cosine":
            prog = min(1.0, (i - warmup) / max(1, total - warmup))
            return 0.5 * (1 + math.cos(math.pi * prog))
        return 1.0

    if kind not in ("constant", "cosine"):
        raise ValueError(f"lr_schedule={kind!r} not in ['constant', 'cosine']")
    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


def sequence_logprobs(model, prompts: Sequence[EncodedPrompt], responses: Sequence[Sequence[int]], pad_id: int,
                      temperature: float, device, with_entropy: bool = False, share_prefix: bool = True):
    """Per-token log p(response | prompt) [B, R] (+ entropy [B, R]) and the response mask [B, R].

    Samples of one group share their prompt: with ``share_prefix`` the prompt is run once per distinct prompt and its
    KV cache is expanded to the group's responses (gradients flow back through it), instead of running it B times.
    Only hidden states at response positions go through the LM head (no [B, P, V] prompt logits).
    """
    base = unwrap(model)
    owner: dict[int, int] = {}
    for p in prompts:
        owner.setdefault(id(p), len(owner))
    if share_prefix and len(owner) < len(prompts):
        hidden, response_ids, mask = _shared_prefix_hidden(base, prompts, responses, owner, pad_id, device)
    else:
        tb = collate_for_training(model, prompts, responses, pad_id, device)
        out = base.model(**tb.batch.model_kwargs(), use_cache=False).last_hidden_state
        R = tb.response_ids.shape[1]
        hidden = out[:, tb.prompt_len - 1: tb.prompt_len - 1 + R]  # the state before each response token predicts it
        response_ids, mask = tb.response_ids, tb.response_mask
    logits = base.lm_head(hidden).float()
    if temperature and temperature > 0:
        logits = logits / temperature
    logp = algos.logprobs_from_logits(logits, response_ids)
    ent = algos.entropy_from_logits(logits) if with_entropy else None
    return logp, ent, mask.to(logp.dtype)


def _shared_prefix_hidden(base, prompts, responses, owner: dict[int, int], pad_id: int, device):
    """Hidden states predicting each response token [B, R, H], computed with one prompt pass per distinct prompt."""
    from transformers import DynamicCache

    uniq = list({id(p): p for p in prompts}.values())
    rows = torch.tensor([owner[id(p)] for p in prompts], device=device)  # [B] prompt index of each sample
    pb = collate(base, uniq, None, pad_id, device)  # [U, P], left padded
    cache = DynamicCache(config=base.config.get_text_config() if hasattr(base.config, "get_text_config") else base.config)
    prompt_h = base.model(**pb.model_kwargs(), past_key_values=cache, use_cache=True).last_hidden_state
    cache.batch_select_indices(rows)  # differentiable gather of the prompt KV: [U, ...] -> [B, ...]
    B, R = len(responses), max(1, max(len(r) for r in responses))
    response_ids = torch.full((B, R), pad_id, dtype=torch.long)
    mask = torch.zeros((B, R), dtype=torch.long)
    for i, r in enumerate(responses):
        if len(r):
            response_ids[i, :len(r)] = torch.tensor(list(r))
            mask[i, :len(r)] = 1
    response_ids, mask = response_ids.to(device), mask.to(device)
    attn = torch.cat([pb.attention_mask[rows], mask], dim=1)
    pos = pb.next_position[rows][:, None] + torch.arange(R, device=device)[None]  # text positions after the prompt
    if pb.position_ids.dim() == 3:
        pos = pos[None].expand(3, -1, -1)
    resp_h = base.model(input_ids=response_ids, attention_mask=attn, position_ids=pos, past_key_values=cache,
                        use_cache=True).last_hidden_state
    hidden = torch.cat([prompt_h[rows, -1:], resp_h[:, :-1]], dim=1)  # state before token t predicts token t
    return hidden, response_ids, mask


class TorchBackend:
    """Plain PyTorch: accumulate gradients over micro-batches, clip, AdamW step, scheduler step."""

    def __init__(self, model, optimizer, scheduler, max_grad_norm: float):
        self.model, self.optimizer, self.scheduler, self.max_grad_norm = model, optimizer, scheduler, max_grad_norm

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def backward(self, loss: torch.Tensor, boundary: bool) -> None:
        loss.backward()

    def step(self) -> float:
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
        if torch.isfinite(norm):
            self.optimizer.step()
            self.scheduler.step()
        return float(norm)


class DeepSpeedBackend:
    """DeepSpeed ZeRO engine: mmevo marks the accumulation boundary; DeepSpeed reduces, clips and steps there."""

    def __init__(self, engine):
        self.engine = engine

    def zero_grad(self) -> None:
        pass  # the engine clears gradients after each optimizer step

    def backward(self, loss: torch.Tensor, boundary: bool) -> None:
        self.engine.set_gradient_accumulation_boundary(boundary)
        self.engine.backward(loss)
        if not boundary:
            self.engine.step()  # bookkeeping only: no update before the boundary

    def step(self) -> float:
        self.engine.step()
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else float("nan")


class GRPOTrainer:
    """Single-process GRPO trainer (the DeepSpeed path wraps the same step)."""

    def __init__(self, cfg: Config, policy: LoadedModel, engine, train_set: list[Example],
                 heldout: list[Example] | None = None, ref_model: torch.nn.Module | None = None,
                 strategy=None, log: bool = True):
        self.cfg = cfg
        self.policy = policy
        self.model = policy.model
        self.engine = engine
        self.train_set = train_set
        self.heldout = heldout or []
        self.ref_model = ref_model
        if cfg.algo.kl_coef > 0 and ref_model is None:
            raise ValueError("algo.kl_coef > 0 needs a reference model (pass ref_model, or set algo.kl_coef=0)")
        self.device = torch.device(cfg.model.device)
        self.pad_id = policy.tokenizer.pad_token_id
        self.prompts = PromptCache(policy.processor, policy.is_vl, cfg.data.prompt_template, cfg.data.system_prompt,
                                   cfg.data.prompt_cache_mb)
        self.sampler = EpochSampler(len(train_set), cfg.trainer.seed)
        self.rewards = RewardMixer(cfg.reward.heads, {"sfr": {"gamma": cfg.csrs.gamma, "beta": cfg.csrs.beta}})
        self.strategy = strategy  # callable(trainer, examples, step) -> Rollout; None = plain groups
        t = cfg.trainer
        self.optimizer = make_optimizer(self.model, t.lr, t.weight_decay, t.betas)
        updates_per_step = (t.prompts_per_step // t.mini_batch_prompts) * cfg.algo.ppo_epochs
        self.scheduler = make_scheduler(self.optimizer, t.warmup_steps, t.steps * updates_per_step, t.lr_schedule)
        self.step_idx = 0
        self.out = Path(t.output_dir)
        self.ds_engine = None
        from mmevo.grpo.distributed import launched_world_size

        # torchrun without DeepSpeed would run N unsynchronised copies writing one output_dir (a process that joined
        # the group itself may still build a single-process trainer, as the ZeRO parity test does)
        if launched_world_size() > 1 and not t.deepspeed and not torch.distributed.is_initialized():
            raise ValueError(f"launched as {launched_world_size()} processes, but trainer.deepspeed is empty: give "
                             f"trainer.deepspeed=configs/deepspeed/zero2.json (or zero3.json), or run one process")
        if t.deepspeed:
            from mmevo.grpo import distributed as D

            D.init_distributed(cfg.model.device)
            if t.prompts_per_step % D.world_size():
                raise ValueError(f"trainer.prompts_per_step={t.prompts_per_step} must divide over "
                                 f"{D.world_size()} ranks (whole prompt groups per rank)")
            self.ds_engine = D.wrap_deepspeed(self.model, self.optimizer, self.scheduler,
                                              D.load_ds_config(t.deepspeed, self.model, t.max_grad_norm))
            self.backend = DeepSpeedBackend(self.ds_engine)
        else:
            self.backend = TorchBackend(self.model, self.optimizer, self.scheduler, t.max_grad_norm)
        from mmevo.grpo.distributed import is_main

        self.logger = RunLogger(self.out, to_dict(cfg), t.wandb_mode, t.wandb_project, enabled=log and is_main())
        self.skipped_prompts = 0
        self._started = False

    # -- the algorithm ------------------------------------------------------------------------------------------
    def step(self) -> dict:
        from mmevo.grpo.distributed import rank, world_size

        cfg, timer = self.cfg, StageTimer()
        examples = [self.train_set[i] for i in self.sampler.take(cfg.trainer.prompts_per_step)]
        if world_size() > 1:  # every rank draws the same global batch and keeps its own whole groups
            k = len(examples) // world_size()
            examples = examples[rank() * k:(rank() + 1) * k]

        with timer("gen"):
            self.engine.wake()
            rollout = (self.strategy or plain_groups)(self, examples, self.step_idx)
            self.engine.sleep()

        # only trainable samples (all, except CSRS re-inferences) reach advantages and the loss
        keep = rollout.trainable_mask()
        idx = keep.nonzero().flatten().tolist()
        with timer("reward"):
            parents = rollout.parents or [-1] * len(rollout.completions)
            samples = [ScoredSample(text, int(g), None if cfg.data.hide_labels else ex.answer, ex.choices,
                                    c.finish_reason == "length", "maternal" if k else "reinference", par, ex.answer)
                       for text, g, ex, c, k, par in zip(rollout.texts, rollout.group_ids.tolist(), rollout.examples,
                                                         rollout.completions, keep.tolist(), parents)]
            rewards, reward_metrics = self.rewards(samples)
            groups = rollout.group_ids[idx]
            adv = algos.group_advantages(rewards[idx], groups, cfg.algo.adv_scale, cfg.algo.adv_eps)
        prompts = [rollout.prompts[i] for i in idx]
        responses = [rollout.completions[i].full_ids for i in idx]

        n_mini = cfg.trainer.prompts_per_step // cfg.trainer.mini_batch_prompts
        need_old = n_mini > 1 or cfg.algo.ppo_epochs > 1  # else on-policy: old = current (detached), ratio = 1
        old_logp = ref_logp = None
        if need_old:
            with timer("old"):
                old_logp = self._logprobs_no_grad(self.model, prompts, responses)
        if cfg.algo.kl_coef > 0:
            with timer("ref"):
                ref_logp = self._logprobs_no_grad(self.ref_model, prompts, responses)

        with timer("update"):
            update_metrics = self._update(prompts, responses, adv, groups, old_logp, ref_logp)

        with timer("sync"):
            self.engine.sync_weights(self.model)

        self.step_idx += 1
        metrics = {**reward_metrics, **update_metrics, **rollout.extra_metrics,
                   **self._response_metrics(rollout, rewards[idx], adv, idx), **timer.metrics(), **peak_memory_mb()}
        total_time = sum(timer.times.values())
        metrics["time/step"] = total_time
        n_tok = sum(len(c.token_ids) for c in rollout.completions)
        metrics["throughput/gen_tokens_per_s"] = n_tok / max(timer.times.get("gen", 0.0), 1e-9)
        metrics["throughput/tokens_per_s"] = (n_tok + sum(len(p.input_ids) for p in rollout.prompts)) / max(total_time, 1e-9)
        metrics["data/epoch"] = self.sampler.epoch
        metrics["lr"] = self.scheduler.get_last_lr()[0]
        return metrics

    def _logprobs_no_grad(self, model, prompts, responses) -> list[torch.Tensor]:
        """Log-probs [R_i] of each sample (in sample order), computed in micro-batches without gradients."""
        out = []
        with torch.no_grad():
            mb = self.cfg.trainer.micro_batch_seqs
            for s in range(0, len(prompts), mb):
                logp, _, _ = sequence_logprobs(model, prompts[s:s + mb], responses[s:s + mb], self.pad_id,
                                               self.cfg.rollout.temperature, self.device)
                out.extend(list(logp))
        return out

    def _update(self, prompts, responses, adv, groups, old_logp, ref_logp) -> dict:
        """PPO-style epochs over mini-batches (whole groups), micro-batches accumulate gradients."""
        cfg, a = self.cfg, self.cfg.algo
        model = self.model
        model.train()
        # mini-batches hold whole prompt groups, so group statistics never straddle two updates
        uniq = torch.unique(groups).tolist()
        per_mini = max(1, len(uniq) // max(1, cfg.trainer.prompts_per_step // cfg.trainer.mini_batch_prompts))
        mini_of_group = {g: k // per_mini for k, g in enumerate(uniq)}
        minis: list[list[int]] = [[] for _ in range(math.ceil(len(uniq) / per_mini))]
        for i, g in enumerate(groups.tolist()):
            minis[mini_of_group[g]].append(i)
        agg_totals: dict[str, float] = {}
        n_updates = 0
        for _ in range(a.ppo_epochs):
            for mini in minis:
                if not mini:
                    continue
                self.backend.zero_grad()
                mini_tokens = sum(max(1, len(responses[i])) for i in mini)
                mb = cfg.trainer.micro_batch_seqs
                for s in range(0, len(mini), mb):
                    ids = mini[s:s + mb]
                    logp, ent, mask = sequence_logprobs(model, [prompts[i] for i in ids], [responses[i] for i in ids],
                                                        self.pad_id, cfg.rollout.temperature, self.device,
                                                        with_entropy=True)
                    R = logp.shape[1]
                    old = logp.detach() if old_logp is None else _stack_padded([old_logp[i] for i in ids], R)
                    scale_factor = None
                    if a.loss_agg == "token-mean":
                        weight = float(mask.sum()) / mini_tokens
                    else:
                        weight = len(ids) / len(mini)
                        if a.loss_agg == "seq-mean-token-sum-norm":  # Dr.GRPO: constant length normaliser
                            scale_factor = float(cfg.rollout.max_tokens) * len(ids)
                    pg_loss, pg_m = algos.policy_loss(logp, old, adv[ids].to(logp), mask, a.clip_low, a.clip_high,
                                                      a.loss_agg, loss_scale_factor=scale_factor)
                    loss = pg_loss
                    if ref_logp is not None:
                        ref = _stack_padded([ref_logp[i] for i in ids], R)
                        kl = algos.agg_loss(algos.kl_penalty(logp, ref, a.kl_type), mask, a.loss_agg, scale_factor)
                        loss = loss + a.kl_coef * kl
                        pg_m["kl"] = float(kl.detach())
                    ent_mean = algos.agg_loss(ent, mask, a.loss_agg, scale_factor)
                    if a.entropy_coef:
                        loss = loss - a.entropy_coef * ent_mean
                    pg_m["entropy"] = float(ent_mean.detach())
                    pg_m["pg_loss"] = float(pg_loss.detach())
                    pg_m["loss"] = float(loss.detach())
                    if not torch.isfinite(loss):
                        raise TrainingDiverged(
                            f"non-finite loss ({float(loss)}) at step {self.step_idx}: stopping; the last good "
                            f"checkpoint in {self.out / 'checkpoints'} is kept (lower trainer.lr or check the data)")
                    self.backend.backward(loss * weight, boundary=s + mb >= len(mini))
                    for k, v in pg_m.items():
                        agg_totals[k] = agg_totals.get(k, 0.0) + v * weight
                grad_norm = self.backend.step()
                if not math.isfinite(grad_norm):
                    raise TrainingDiverged(f"non-finite gradient norm at step {self.step_idx}: stopping; the last "
                                           f"good checkpoint in {self.out / 'checkpoints'} is kept")
                agg_totals["grad_norm"] = agg_totals.get("grad_norm", 0.0) + grad_norm
                n_updates += 1
        return {f"actor/{k}": v / max(1, n_updates) for k, v in agg_totals.items()}

    def _response_metrics(self, rollout: Rollout, rewards, advantages, idx: list[int]) -> dict:
        """Length / truncation / no-answer shares and zero-signal groups, over the trained (maternal) samples."""
        comps = [rollout.completions[i] for i in idx]
        lengths = torch.tensor([len(c.full_ids) for c in comps], dtype=torch.float32)
        truncated = sum(c.finish_reason == "length" for c in comps)
        no_answer = sum(extract_answer(rollout.texts[i], rollout.examples[i].choices) is None for i in idx)
        # share of groups whose rewards are all equal: they give zero advantage (no learning signal)
        g = rollout.group_ids[idx]
        uniq = torch.unique(g)
        zero_std = sum(bool((rewards[g == u].max() - rewards[g == u].min()).abs() < 1e-9) for u in uniq)
        return {
            "response/length_mean": lengths.mean().item(),
            "response/length_max": lengths.max().item(),
            "response/length_min": lengths.min().item(),
            "response/truncated_frac": truncated / len(comps),
            "response/no_answer_frac": no_answer / len(comps),
            "frac_reward_zero_std": zero_std / len(uniq),
            "advantage/mean": advantages.mean().item(),
            "advantage/abs_mean": advantages.abs().mean().item(),
        }

    # -- running, checkpoints -----------------------------------------------------------------------------------
    def trainer_state(self, with_optimizer: bool = True) -> dict:
        """What a checkpoint holds besides the weights (``with_optimizer=False``: no optimizer / scheduler state)."""
        state = {"sampler": self.sampler.state_dict(), "rewards": self.rewards.state_dict(), "config": to_dict(self.cfg)}
        if with_optimizer:
            state.update(optimizer=self.optimizer.state_dict(), scheduler=self.scheduler.state_dict())
        return state

    def save(self) -> Path | None:
        """Checkpoint (every rank must call it under DeepSpeed: ZeRO-3 weights are gathered; rank 0 writes)."""
        if self.ds_engine is None:
            return save_checkpoint(self.out, self.step_idx, self.model, self.policy.processor, self.trainer_state(),
                                   keep=self.cfg.trainer.keep_checkpoints)
        return self._save_deepspeed()

    def _save_deepspeed(self) -> Path | None:
        """ZeRO partitions the optimizer state across ranks (its torch state_dict cannot even be built), so DeepSpeed
        writes it, one file per rank, beside the gathered HF model; every rank also keeps its RNG state."""
        import shutil

        from mmevo.grpo import distributed as D
        from mmevo.models.weights import full_state_items

        gathered = full_state_items(self.model)  # collective under ZeRO-3: every rank takes part
        weights = dict(gathered) if D.is_main() else collections.deque(gathered, maxlen=0)  # only rank 0 keeps it
        tmp = checkpoint_root(self.out) / f".step_{self.step_idx:06d}.tmp"  # one name on every rank
        if D.is_main():
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
        D.barrier()
        self.ds_engine.save_checkpoint(str(tmp / "deepspeed"), tag="zero", save_latest=False)
        torch.save(rng_state(), tmp / f"rng_rank{D.rank()}.pt")
        D.barrier()
        final = None
        if D.is_main():
            state = {**self.trainer_state(with_optimizer=False), "world_size": D.world_size()}
            write_checkpoint_files(tmp, self.step_idx, self.model, self.policy.processor, state, weights)
            final = commit_checkpoint(tmp, self.out, self.step_idx, self.cfg.trainer.keep_checkpoints)
        D.barrier()  # nobody reads or writes the next checkpoint before this one is in place
        return final

    def maybe_resume(self) -> bool:
        from mmevo.grpo import distributed as D

        if D.is_main():
            remove_partial_checkpoints(self.out)
        ckpt = latest_checkpoint(self.out) if self.cfg.trainer.resume else None
        if self.ds_engine is not None:  # rank 0 decides, so that every rank loads the same step
            ckpt = D.broadcast_from_main(ckpt)
        if ckpt is None:
            return False
        state = load_trainer_state(ckpt)
        if self.ds_engine is None:
            if "optimizer" not in state:
                raise ValueError(f"{ckpt} was written by a DeepSpeed run: resume it with the same trainer.deepspeed "
                                 f"config, or start from its weights with model.path={ckpt / 'model'} "
                                 "trainer.resume=false")
            load_model_weights(self.model, ckpt / "model")
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            set_rng_state(state["rng"])
        else:
            if not (ckpt / "deepspeed").is_dir():
                raise ValueError(f"{ckpt} has no DeepSpeed optimizer state (written without trainer.deepspeed, or by "
                                 f"an older mmevo): start from its weights with model.path={ckpt / 'model'} "
                                 "trainer.resume=false (or another output_dir)")
            if state.get("world_size") != D.world_size():
                raise ValueError(f"{ckpt} was written by {state.get('world_size')} ranks and this run has "
                                 f"{D.world_size()}: ZeRO optimizer partitions are per rank; resume with as many "
                                 f"ranks, or start from model.path={ckpt / 'model'} trainer.resume=false")
            # weights, optimizer partitions and scheduler (DeepSpeed owns the one it was given)
            self.ds_engine.load_checkpoint(str(ckpt / "deepspeed"), tag="zero", load_optimizer_states=True,
                                           load_lr_scheduler_states=True)
            set_rng_state(torch.load(ckpt / f"rng_rank{D.rank()}.pt", weights_only=False))
        self.sampler.load_state_dict(state["sampler"])
        self.rewards.load_state_dict(state["rewards"])
        self.step_idx = int(state["step"])
        self.engine.sync_weights(self.model)
        self.logger.truncate_after(self.step_idx)
        if D.is_main():
            print(f"[mmevo] resumed from {ckpt} (step {self.step_idx})")
        return True

    def train(self, steps: int | None = None, on_step=None) -> list[dict]:
        """Run until ``trainer.steps`` (or ``steps`` more); returns the per-step metrics."""
        t = self.cfg.trainer
        if not self._started:  # resume (or start a fresh curve) once per trainer, not on every train() call
            if not self.maybe_resume():
                self.logger.truncate_after(self.step_idx)  # a fresh run never appends to an old run's curve
            self._started = True
        target = t.steps if steps is None else self.step_idx + steps
        history = []
        from mmevo.grpo.distributed import is_main

        bar = _progress(target, self.step_idx, enabled=t.progress and is_main())
        try:
            while self.step_idx < target:
                try:
                    metrics = self.step()
                    if self.ds_engine is not None:
                        from mmevo.grpo.distributed import all_reduce_mean

                        metrics = all_reduce_mean(metrics)
                except FloatingPointError as e:
                    raise TrainingDiverged(f"{e} at step {self.step_idx}: stopping; the last good checkpoint in "
                                           f"{self.out / 'checkpoints'} is kept") from e
                if t.eval_every and self.step_idx % t.eval_every == 0 and self.heldout:
                    metrics.update({f"eval/{k}": v for k, v in self.evaluate().items() if not isinstance(v, dict)})
                self.logger.log(self.step_idx, metrics)
                history.append(metrics)
                if on_step:
                    on_step(self.step_idx, metrics)
                if t.save_every and self.step_idx % t.save_every == 0:
                    self.save()
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(reward=f"{metrics['reward/total/mean']:.3f}",
                                    len=f"{metrics['response/length_mean']:.0f}", s=f"{metrics['time/step']:.1f}")
        finally:
            if bar is not None:
                bar.close()
        return history

    def export(self, path: str | Path) -> Path:
        """Final model in HF format (under DeepSpeed: gathered on every rank, written by rank 0)."""
        if self.ds_engine is None:
            return save_model(path, self.model, self.policy.processor)
        from mmevo.grpo.distributed import is_main
        from mmevo.models.weights import full_state_items

        weights = dict(full_state_items(self.model))
        if is_main():
            save_model(path, self.model, self.policy.processor, weights)
        return Path(path)

    def evaluate(self, examples: Sequence[Example] | None = None, max_tokens: int | None = None) -> dict:
        return evaluate(self.engine, self.prompts, list(examples or self.heldout), self.policy.tokenizer,
                        max_tokens or self.cfg.trainer.eval_max_tokens or self.cfg.rollout.max_tokens,
                        self.cfg.rollout.eval_temperature, seed=self.cfg.trainer.seed)


def _stack_padded(rows: list[torch.Tensor], width: int) -> torch.Tensor:
    out = torch.zeros(len(rows), width, dtype=rows[0].dtype, device=rows[0].device)
    for i, r in enumerate(rows):
        n = min(width, r.shape[0])
        out[i, :n] = r[:n]
    return out


def _progress(total: int, initial: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, desc="grpo", dynamic_ncols=True)


def decode(tokenizer, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=True)


def plain_groups(trainer: GRPOTrainer, examples: list[Example], step: int) -> Rollout:
    """Standard GRPO sampling: n completions per prompt, all trainable."""
    cfg = trainer.cfg
    prompts, kept = [], []
    for ex in examples:
        p = trainer.prompts(ex)
        if len(p.input_ids) > cfg.data.max_prompt_length:  # counted, like verl's filter_overlong_prompts
            trainer.skipped_prompts += 1
            continue
        prompts.append(p)
        kept.append(ex)
    if not prompts:
        raise ValueError(f"every prompt of step {step} is longer than data.max_prompt_length={cfg.data.max_prompt_length}")
    params = SamplingParams(cfg.rollout.temperature, cfg.rollout.top_p, cfg.rollout.max_tokens,
                            seed=_step_seed(cfg.trainer.seed, step))
    outs = trainer.engine.generate([RolloutRequest(p, n=cfg.rollout.n) for p in prompts], params)
    flat_p, flat_c, flat_e, gids = [], [], [], []
    for gi, (p, ex, comps) in enumerate(zip(prompts, kept, outs)):
        for c in comps:
            flat_p.append(p)
            flat_c.append(c)
            flat_e.append(ex)
            gids.append(gi)
    texts = [decode(trainer.policy.tokenizer, c.full_ids) for c in flat_c]
    return Rollout(flat_p, flat_c, texts, torch.tensor(gids), flat_e,
                   extra_metrics={"data/skipped_overlong_prompts": trainer.skipped_prompts})


def _step_seed(seed: int, step: int) -> int:
    """Per-step sampling seed: reproducible and independent of how many steps ran in this process (resume)."""
    from mmevo.grpo.distributed import rank

    return (seed * 1_000_003 + step * 7_919 + rank() * 104_729) % (2**31 - 1)


def evaluate(engine, prompts: PromptCache, examples: list[Example], tokenizer, max_tokens: int, temperature: float = 0.0,
             seed: int = 0) -> dict:
    """Held-out accuracy (and format rate) with the given engine; per-kind breakdown when examples carry meta.kind."""
    from mmevo.rewards.accuracy import accuracy_rewards
    from mmevo.rewards.format import format_rewards

    if not examples:
        return {}
    params = SamplingParams(temperature=temperature, top_p=1.0, max_tokens=max_tokens, seed=seed)
    outs = engine.generate([RolloutRequest(prompts(ex), n=1) for ex in examples], params)
    texts = [decode(tokenizer, o[0].full_ids) for o in outs]
    acc = accuracy_rewards(texts, [ex.answer for ex in examples], [ex.choices for ex in examples])
    fmt = format_rewards(texts)
    by_kind: dict[str, list[float]] = {}
    for ex, a in zip(examples, acc.tolist()):
        by_kind.setdefault(ex.meta.get("kind", "all"), []).append(a)
    return {"accuracy": acc.mean().item(), "format": fmt.mean().item(), "n": len(examples),
            "by_kind": {k: sum(v) / len(v) for k, v in sorted(by_kind.items())},
            "samples": [{"id": ex.id, "response": t, "gold": ex.answer, "correct": bool(a)}
                        for ex, t, a in zip(examples[:20], texts[:20], acc.tolist()[:20])]}


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
