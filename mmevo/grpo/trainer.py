"""The GRPO loop. Read ``GRPOTrainer.step`` top to bottom: it is the whole algorithm.

prompts (a prompt source, or the examples given to ``step``) -> rollout strategy -> reward heads -> group advantages
-> (old log-probs) -> (reference log-probs) -> micro-batched policy loss with gradient accumulation -> AdamW step ->
weight sync to the engine -> metrics. Strategies (plain groups, CSRS, self-play roles) decide what is sampled and get
a ``RolloutContext``, never the trainer; everything after the rewards is shared.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import math
import random
import time
import warnings
import weakref
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from mmevo.config import Config, added_since_at_default, built_in_defaults, render_prompt, to_dict
from mmevo.data.prompts import EpochSampler, PromptSource
from mmevo.data.schema import Example
from mmevo.grpo import algos
from mmevo.grpo.distributed import is_max_metric
from mmevo.grpo.checkpoint import (DamagedCheckpointError, abandon_checkpoints, checkpoint_name, checkpoint_root,
                                   check_same_base, check_same_model, commit_checkpoint, export_atomically,
                                   latest_checkpoint, load_model_weights,
                                   load_state_file, load_trainer_state, remove_partial_checkpoints, rng_state,
                                   save_checkpoint, save_model, set_rng_state, write_checkpoint_files)
from mmevo.metrics import RunLogger, StageTimer, peak_memory_mb
from mmevo.models.attention import supports_packing
from mmevo.models.inputs import (EncodedPrompt, collate, collate_for_training, distinct_prompts, encode_prompt, pack,
                                  pack_shared, unwrap)
from mmevo.models.loader import LoadedModel
from mmevo.rewards.answers import canonical_answer, extract_answer
from mmevo.rewards.heads import RewardMixer, ScoredSample
from mmevo.rollout.base import RolloutRequest, SamplingParams, item_seeds
from mmevo.rollout.strategy import PlainGroups, Rollout, RolloutContext, RolloutStrategy, decode, step_seed


class TrainingDiverged(RuntimeError):
    """Raised on a NaN/inf loss; the last good checkpoint is left untouched."""


class PromptCache:
    """Encodes each example's prompt once (chat template + image processing).

    Keyed on content (id, problem text, image pixels), not on the id alone: a loop that reuses an id for a new
    problem or image (generated prompts) gets the new prompt, never a stale one. Encoded prompts hold the processed
    pixels (tens of MB for a large image), so the cache keeps at most ``max_mb`` of them and drops the least recently
    used beyond that; a dropped prompt is simply encoded again when next needed.
    """

    def __init__(self, processor, is_vl: bool, template: str, system_prompt: str = "", max_mb: float = 2048):
        self.processor, self.is_vl = processor, is_vl
        self.template = template
        self.system_prompt = system_prompt or None
        self.max_bytes = int(max_mb * 2**20)
        self._cache: collections.OrderedDict[tuple, EncodedPrompt] = collections.OrderedDict()
        self._digests: dict[int, str] = {}  # id(image) -> pixel digest, dropped when the image is freed
        self.nbytes = 0

    def key(self, ex: Example) -> tuple:
        images = tuple(self._image_digest(im) for im in ex.images) if self.is_vl else ()
        return ex.id, ex.problem, images

    def _image_digest(self, im) -> str:
        d = self._digests.get(id(im))
        if d is None:
            h = hashlib.blake2b(f"{im.mode}{im.size}".encode(), digest_size=16)
            h.update(im.tobytes())
            d = self._digests[id(im)] = h.hexdigest()
            weakref.finalize(im, self._digests.pop, id(im), None)
        return d

    def __call__(self, ex: Example) -> EncodedPrompt:
        key = self.key(ex)
        enc = self._cache.get(key)
        if enc is not None:
            self._cache.move_to_end(key)
            return enc
        enc = encode_prompt(self.processor, self.is_vl, render_prompt(self.template, ex.problem), ex.images,
                            self.system_prompt)
        self._cache[key] = enc
        self.nbytes += _prompt_bytes(enc)
        while self.nbytes > self.max_bytes and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self.nbytes -= _prompt_bytes(old)
        return enc

    def __len__(self) -> int:
        return len(self._cache)

    def with_system_prompt(self, system_prompt: str) -> PromptCache:
        """A cache like this one (processor, template, size bound) for another system prompt, with its own entries."""
        return PromptCache(self.processor, self.is_vl, self.template, system_prompt, self.max_bytes / 2**20)


# output dir -> the trainer of this process that started on it last: two live trainers of a loop on one output_dir
# resume each other's checkpoints and write one metrics.jsonl (the CLI's run lock is per process: it cannot see them)
_OUTPUT_DIR_OWNERS: dict[Path, weakref.ref] = {}


def _output_dir_key(trainer: "GRPOTrainer") -> Path:
    """The registry's key of a trainer's output_dir: as resolved when it took the directory (a relative output_dir or a
    symlink resolves elsewhere once the working directory changes or the link moves), else as resolved now."""
    return trainer._output_dir_key or trainer.out.resolve()


def _output_dir_owner(trainer: "GRPOTrainer") -> "GRPOTrainer | None":
    holder = _OUTPUT_DIR_OWNERS.get(_output_dir_key(trainer))
    return holder() if holder is not None else None


def _take_output_dir(trainer: "GRPOTrainer") -> None:
    """At a trainer's start: it owns its output_dir from now on. Taking it from another live, unclosed trainer is
    allowed (a rerun in one process, after a crash) but warned of: that one can no longer train or save."""
    other = _output_dir_owner(trainer)
    if other is not None and other is not trainer:
        warnings.warn(f"trainer.output_dir={trainer.out} was started by another trainer of this process that is not "
                      "closed: this one takes it over (resuming its checkpoints), and that one can no longer train or "
                      "save. Each trainer of a loop (role, phase) needs its own output_dir.", stacklevel=3)
    trainer._output_dir_key = trainer.out.resolve()
    _OUTPUT_DIR_OWNERS[trainer._output_dir_key] = weakref.ref(trainer)


def _check_output_dir(trainer: "GRPOTrainer") -> None:
    other = _output_dir_owner(trainer)
    if other is not None and other is not trainer:
        raise ValueError(f"trainer.output_dir={trainer.out} was taken over by another trainer of this process that "
                         "started on it later (it resumed this one's checkpoints and writes its metrics.jsonl): each "
                         "trainer of a loop (role, phase) needs its own output_dir")


def _release_output_dir(trainer: "GRPOTrainer") -> None:
    if _output_dir_owner(trainer) in (trainer, None):
        _OUTPUT_DIR_OWNERS.pop(_output_dir_key(trainer), None)


def _prompt_bytes(enc: EncodedPrompt) -> int:
    pixels = enc.pixel_values
    return (pixels.numel() * pixels.element_size() if pixels is not None else 0) + 16 * len(enc.input_ids)


def make_optimizer(model: torch.nn.Module, lr: float, weight_decay: float, betas=(0.9, 0.999)) -> torch.optim.Optimizer:
    """AdamW with no weight decay on biases and norms (standard for transformers)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.dim() < 2 else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=tuple(betas))


def optimizer_param_names(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """The names of the parameters ``optimizer`` holds, in the order of its groups (that of its state dict)."""
    names = {id(p): n for n, p in model.named_parameters()}
    return [names.get(id(p), "?") for group in optimizer.param_groups for p in group["params"]]


def check_optimizer_params(ckpt: Path, saved: list[str] | None, current: list[str]) -> None:
    """A checkpoint's optimizer state belongs to the parameters this run trains. torch's ``load_state_dict`` matches
    them by position and checks only each group's size: with another ``model.trainable`` (``[k_proj]`` -> ``[v_proj]``)
    v_proj took k_proj's Adam moments and step count without a word. ``saved`` None: a checkpoint without the names."""
    if saved is None or saved == current:
        return
    gone, new = sorted(set(saved) - set(current)), sorted(set(current) - set(saved))
    raise ValueError(f"{ckpt}: its optimizer state is for other parameters than this run trains (only in the "
                     f"checkpoint: {gone[:3]}{' ...' if len(gone) > 3 else ''}; only in this run: {new[:3]}"
                     f"{' ...' if len(new) > 3 else ''}), and torch would hand their Adam moments to other weights: "
                     "resume with the model.trainable / model.freeze_vision_tower it was saved with, or start from its "
                     f"weights with model.path={ckpt / 'model'} trainer.resume=false")


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


def configure_training(model: torch.nn.Module, model_cfg, seed: int, subset: bool = True) -> None:
    """What of ``model`` trains, as ``model_cfg`` (``cfg.model``) says: LoRA adapters on the language model (everything
    else frozen), else the ``trainable`` subset (RL only: ``subset=False`` for SFT, which trains all) and/or a frozen
    vision tower; then gradient checkpointing, the CPU linear kernel (``model.cpu_linear``) and allocator
    (``model.cpu_malloc``). Shared by GRPO and SFT, so a config means the same in both."""
    if model_cfg.lora.rank > 0 and model_cfg.trainable and subset:
        raise ValueError("model.trainable and model.lora.rank > 0 both choose what trains: set one of them")
    if model_cfg.lora.rank > 0:  # adapters on the language model's linears; everything else frozen
        from mmevo.models.adapters import apply_lora

        lo = model_cfg.lora
        with torch.random.fork_rng(devices=[]):  # the adapters' initial A is drawn from the run's seed
            torch.manual_seed(seed)
            apply_lora(model, lo.rank, lo.alpha, lo.dropout, list(lo.target_modules))
    else:
        from mmevo.models.adapters import has_lora

        if has_lora(model):  # a second trainer on a policy an earlier one gave adapters: it would train them alone
            raise ValueError("model.lora.rank=0, but the model has LoRA adapters (an earlier trainer configured it "
                             "with model.lora): load the model afresh, or keep the model.lora settings")
        # everything trains unless frozen below: a second trainer on the same policy object kept what an earlier
        # one had frozen (its vision tower, what its model.trainable left out) without a word
        model.requires_grad_(True)
        if model_cfg.trainable and subset:
            from mmevo.models.adapters import train_only

            train_only(model, model_cfg.trainable)
        if model_cfg.freeze_vision_tower:
            from mmevo.models.adapters import freeze_vision_tower

            freeze_vision_tower(model)
        if not any(p.requires_grad for p in model.parameters()):  # else the first backward, after a whole rollout,
            # fails with torch's "element 0 of tensors does not require grad", naming no setting
            raise ValueError(f"model.trainable={list(model_cfg.trainable)} with model.freeze_vision_tower=true leaves "
                             "no parameter to train: every one matching the patterns is in the vision tower")
    if model_cfg.gradient_checkpointing:  # non-reentrant: exact, and inputs need not require grad
        unwrap(model).gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    from mmevo.models.cpu_linear import use_cpu_linear
    from mmevo.models.cpu_malloc import use_cpu_malloc

    use_cpu_linear(model, model_cfg.cpu_linear)  # float32 CPU matmuls of the training passes on oneDNN (AMD: ~2x)
    # freed activations stay in the heap for the next micro-batch (no page faults on fresh memory)
    use_cpu_malloc(model_cfg.cpu_malloc, all(p.device.type == "cpu" for p in model.parameters()))


def _reapply_schedule(scheduler: torch.optim.lr_scheduler.LambdaLR) -> None:
    """After loading a checkpoint, set the lr of the next update from this run's schedule at the loaded position.

    The loaded optimizer holds the lr of the run that saved it; with another ``trainer.steps`` (a cosine run extended)
    its schedule differs, and the first update would use the old one. Same schedule: the same values, bit for bit."""
    lrs = [base * fn(scheduler.last_epoch) for base, fn in zip(scheduler.base_lrs, scheduler.lr_lambdas)]
    for group, lr in zip(scheduler.optimizer.param_groups, lrs):
        group["lr"] = lr
    scheduler._last_lr = lrs


# settings that say where a run writes, how it logs or how often it saves / evaluates, and its length (a resume may
# extend a run): changing them on resume is routine, not a different run; so is the eval section (``mmevo eval``'s)
_RESUME_FREE_KEYS = frozenset({"trainer.output_dir", "trainer.steps", "trainer.resume", "trainer.progress",
                               "trainer.threads", "trainer.wandb_mode", "trainer.wandb_project", "trainer.save_every",
                               "trainer.keep_checkpoints", "trainer.eval_every", "trainer.eval_max_tokens",
                               "model.cache_dir", "sft.output_dir",
                               # allocator thresholds: speed and resident memory only, the same numbers either way
                               "model.cpu_malloc"})


# step metrics that are counts over the step's global batch: each rank counts its own share, so they are summed over
# ranks (the rest are averaged); averaged, a 2-process run logged half the re-inference tokens of one process
SUMMED_STEP_METRICS = ("data/skipped_overlong_prompts", "data/samples", "csrs/reinference_tokens",
                       "reward/comparisons_cut_short")
# means over a step's trained samples (``_response_metrics``, the reward mixer's empty share): over ranks, weighted
PER_SAMPLE_STEP_METRICS = ("response/length_mean", "response/truncated_frac", "response/no_answer_frac",
                           "response/empty_frac", "advantage/mean", "advantage/abs_mean")


# what a resumed optimizer / scheduler state brings with it (as in verl and TRL): this run's values do not apply
OPTIMIZER_STATE_KEYS = ("trainer.lr", "trainer.betas", "trainer.weight_decay")


def flat_config(d: dict | None) -> dict:
    """A ``to_dict`` config as ``{"section.key": value}`` (sections only; the ``eval`` section left out: it is
    ``mmevo eval``'s, never a run's)."""
    from mmevo.config import flat_dict

    return {k: v for k, v in flat_dict(d or {}).items() if "." in k and not k.startswith("eval.")}


def same_local_model(key: str, was: dict, now: dict) -> bool:
    """``model.path`` spelled two ways for one local directory (relative and absolute, through a symlink): the same
    starting model and tokenizer, not a changed setting (a rerun with it was refused once the run had run all its
    steps: "model.path '/abs/sft/model' -> 'sft/model'")."""
    if key != "model.path" or not isinstance(was.get(key), str) or not isinstance(now.get(key), str):
        return False
    a, b = Path(was[key]), Path(now[key])
    return a.is_dir() and b.is_dir() and a.resolve() == b.resolve()


def resume_config_changes(saved: dict | None, current: dict, free: frozenset[str] = frozenset()) -> list[str]:
    """Dotted config keys (``section.key``) whose value differs between the config a checkpoint was saved with and
    this run's (both ``to_dict``), leaving out ``_RESUME_FREE_KEYS`` and ``free``, and the settings added since the
    checkpoint was saved that this run leaves at their defaults (``added_since_at_default``); [] for a checkpoint
    without a config."""
    if not saved:
        return []
    a, b = flat_config(saved), flat_config(current)
    defaults = built_in_defaults()
    return sorted(k for k in a.keys() | b.keys()
                  if k not in _RESUME_FREE_KEYS and k not in free and (k in a, a.get(k)) != (k in b, b.get(k))
                  and not added_since_at_default(k, a, b, defaults) and not same_local_model(k, a, b))


def resume_config_diff(saved: dict | None, current: dict, step: int, free: frozenset[str] = frozenset()) -> list[dict]:
    """``resume_config_changes`` with the values: one ``{"step", "key", "was", "now"}`` per changed key, ``step``
    being the checkpoint's (the steps after it ran under ``now``); a key absent on one side has ``None`` there. An
    optimizer setting the loaded optimizer state keeps (``OPTIMIZER_STATE_KEYS``) has ``"applied": False``: the
    steps after the checkpoint ran under ``was``."""
    was, now = flat_config(saved), flat_config(current)
    return [{"step": step, "key": k, "was": was.get(k), "now": now.get(k),
             **({"applied": False} if k in OPTIMIZER_STATE_KEYS else {})}
            for k in resume_config_changes(saved, current, free)]


def sequence_logprobs(model, prompts: Sequence[EncodedPrompt], responses: Sequence[Sequence[int]], pad_id: int,
                      temperature: float, device, with_entropy: bool = False, share_prefix: bool = True,
                      logits_chunk: int = 0, entropy_grad: bool = True, padding_free: bool = False,
                      min_head_calls: int = 0, vision_tower: bool = False):
    """Per-token log p(response | prompt) [B, R] (+ entropy [B, R]) and the response mask [B, R].

    Samples of one group share their prompt: with ``share_prefix`` the prompt is run once per distinct prompt instead
    of once per sample. ``padding_free`` (when the model attends through ``mmevo.models.attention``, the loader's
    choice for "sdpa" checkpoints) runs the real tokens only, in one row: each distinct prompt once and then every
    response, which attends to its prompt and itself (``inputs.pack_shared``), or without ``share_prefix`` every
    sample whole (``inputs.pack``); both work under gradient checkpointing. Otherwise the shared prompt's KV cache is
    expanded to the group's responses (gradients flow back through it); under gradient checkpointing in training
    mode transformers drops a given KV cache (it would score responses without their prompt), and under ZeRO-3 its
    two forwards would differ in number from another rank's one, so that path is then replaced by the exact padded
    unshared forward.
    Only hidden states at real response tokens go through the LM head, ``logits_chunk`` positions at a time
    (see ``token_logprobs``; ``min_head_calls``: its ``min_calls``); no [B, P, V] prompt logits and no fp32 [B, R, V]
    logits are materialised.
    ``vision_tower`` (under ZeRO-3 only): a batch without images runs the vision tower too, on a dummy image with
    weight 0 (``_vision_tower_in_graph``), so that it gathers that tower's weights as a rank with images does.
    """
    from mmevo.models.inputs import check_samples
    from mmevo.models.weights import is_zero3

    check_samples(prompts, responses)
    base = unwrap(model)
    checkpointing = base.training and getattr(base, "is_gradient_checkpointing", False)
    shared = share_prefix and len(distinct_prompts(prompts)[0]) < len(prompts)
    packs = padding_free and supports_packing(base)
    if vision_tower and all(p.pixel_values is None for p in prompts) and is_zero3(base):
        with _vision_tower_in_graph(base):
            return sequence_logprobs(model, prompts, responses, pad_id, temperature, device, with_entropy,
                                     share_prefix, logits_chunk, entropy_grad, padding_free, min_head_calls)
    if shared and packs:
        sp = pack_shared(base, prompts, responses, pad_id, device)
        flat = base.model(**sp.model_kwargs(), use_cache=False).last_hidden_state[0]  # [N, H]
        hidden = flat[sp.predictors.clamp(min=0)]  # [B, R]; the slots past a response's end are masked out
        response_ids, mask = _right_padded(responses, pad_id, device)
    elif shared and not checkpointing and not is_zero3(base):
        # two forwards (prompts, then responses) where the unshared path makes one: under ZeRO-3 every forward
        # gathers the weights, and a rank with distinct prompts (or a padding micro-batch) beside one with repeated
        # prompts aborted on a collective mismatch; the unshared forward is exact
        hidden, response_ids, mask = _shared_prefix_hidden(base, prompts, responses, pad_id, device)
    else:
        tb = collate_for_training(model, prompts, responses, pad_id, device)
        R = tb.response_ids.shape[1]
        if packs:
            packed = pack(tb.batch)
            flat = base.model(**packed.model_kwargs(), use_cache=False).last_hidden_state[0]  # [N, H]
            at = packed.index[:, tb.prompt_len - 1: tb.prompt_len - 1 + R]  # [B, R]; -1 past a response's end
            hidden = flat[at.clamp(min=0)]  # the slots past the end are masked out in token_logprobs
        else:
            out = base.model(**tb.batch.model_kwargs(), use_cache=False).last_hidden_state
            hidden = out[:, tb.prompt_len - 1: tb.prompt_len - 1 + R]  # the state before each response token predicts it
        response_ids, mask = tb.response_ids, tb.response_mask
    logp, ent = token_logprobs(base.lm_head, hidden, response_ids, mask, temperature, logits_chunk, with_entropy,
                               entropy_grad, min_head_calls)
    return logp, ent, mask.to(logp.dtype)


def head_calls(n_tokens: int, chunk: int) -> int:
    """LM-head calls ``token_logprobs`` makes for ``n_tokens`` scored tokens in chunks of ``chunk`` (0 = one call);
    a micro-batch with nothing to score still makes one (its head stays in the graph)."""
    return 1 if chunk <= 0 or n_tokens <= 0 else -(-n_tokens // chunk)


def token_logprobs(head, hidden, labels, mask, temperature: float, chunk: int = 0, with_entropy: bool = False,
                   entropy_grad: bool = True, min_calls: int = 0):
    """log p(label) [B, R] under softmax(head(hidden) / T), and the entropy [B, R] (zeros where ``mask`` is 0).

    hidden [B, R, H], labels / mask [B, R]. Only masked-in positions go through the head (padding-free), ``chunk`` of
    them at a time (0 = all); with gradients and several chunks each chunk is recomputed in backward (activation
    checkpointing), so at most one chunk's fp32 logits [chunk, V] exist at a time. ``entropy_grad=False`` computes the
    entropy without gradients (a metric only, when the entropy bonus is 0).

    ``min_calls``: run the head at least this often. Under ZeRO-3 every head call gathers the head's weight (again
    in backward), so ranks must make as many calls as each other, whatever their token counts: the calls beyond this
    rank's chunks score one real row with weight 0 (exact zeros in the result and every gradient), checkpointed like
    the real chunks so that backward recomputes them alike.
    """
    B, R = labels.shape
    sel = mask.bool()
    h, y = hidden[sel], labels[sel]  # [N, H], [N]
    n = y.numel()
    # at least float32 (half-precision logits are upcast); a float64 model keeps float64 log-probs
    dtype = torch.promote_types(hidden.dtype, torch.float32)
    size = max(n, 1) if chunk <= 0 else chunk  # n = 0: no real chunk (range() refuses a step of 0)
    n_calls = max(head_calls(n, chunk), min_calls)
    # a trained head under a frozen body (hidden without grad) keeps each chunk's logits for its weight's gradient too
    needs_grad = h.requires_grad or any(p.requires_grad for p in head.parameters())
    recompute = torch.is_grad_enabled() and needs_grad and n_calls > 1

    def run(fn, *args):
        if not recompute:
            return fn(*args)
        from torch.utils.checkpoint import checkpoint

        return checkpoint(fn, *args, use_reentrant=False)

    T = temperature if temperature and temperature > 0 else 1.0
    mode = "none" if not with_entropy else "grad" if entropy_grad else "nograd"
    vocab = getattr(head, "out_features", None)  # an nn.Linear's, also under ZeRO-3 (whose weight is then empty)
    if vocab is not None:  # every label checked once here, not in each chunk and again in its recompute
        algos.check_label_range(y, vocab)

    def logits_of(hc):
        logits = head(hc).to(dtype)  # [n_c, V]
        return logits / T if T != 1.0 else logits  # x / 1 is x: skip a pass over [n_c, V]

    def scored(hc, yc):
        # the logits go straight into the call (no name holds them here): it frees them once their log-softmax exists
        lp, ent = algos.logprobs_and_entropy(logits_of(hc), yc, mode, labels_in_range=vocab is not None)
        return lp, (lp.new_zeros(()) if ent is None else ent)

    lps, ents = [], []
    for s in range(0, n, size):
        lp, en = run(scored, h[s:s + size], y[s:s + size])
        lps.append(lp)
        ents.append(en)
    # The padding calls come last and score a chunk of the first row (none when there is nothing to score) exactly as
    # a real chunk is scored, so that backward meets the same graph and gathers / recomputes in the same order on every
    # rank; their weight 0 keeps the result and every gradient exact. With nothing to score they are the path from a
    # trained head over a frozen body to the loss (without it its backward raised, and ranks skipped its hooks).
    padding = 0
    for _ in range(n_calls - len(lps)):
        lp, en = run(scored, h[:1], y[:1])
        padding = padding + (lp.sum() + en.sum()) * 0
    if n == 0:
        zero = hidden[..., 0].to(dtype) * 0 + padding
        return zero, (zero.detach() if with_entropy else None)
    logp = hidden.new_zeros((B, R), dtype=dtype).masked_scatter(sel, torch.cat(lps))
    if n_calls > len(lps):
        logp = logp + padding
    ent = None
    if with_entropy:
        ent = hidden.new_zeros((B, R), dtype=dtype).masked_scatter(sel, torch.cat(ents))
    return logp, ent


@contextlib.contextmanager
def _vision_tower_in_graph(base):
    """While inside, each call of ``base``'s input embeddings also runs its vision tower on a dummy image (the
    smallest grid it takes) and adds 0 x its features to the embeddings.

    Under ZeRO-3 every module's forward gathers its weights (and its backward again), and transformers' VL models run
    the vision tower only for a batch with pixels: a rank with a text-only micro-batch beside a rank with images
    aborted on a collective mismatch. Run here, the tower comes where a real image's would (after the token
    embeddings, before the language model, and in backward after the language model's layers); its weight 0 keeps the
    result and every gradient exact. A model without a vision tower is left as it is."""
    inner = getattr(base, "model", base)
    features = getattr(inner, "get_image_features", None)
    vision_cfg = getattr(base.config, "vision_config", None)
    if features is None or vision_cfg is None:
        yield
        return
    side = int(vision_cfg.spatial_merge_size)
    patch = int(vision_cfg.in_channels) * int(vision_cfg.temporal_patch_size) * int(vision_cfg.patch_size) ** 2

    def add_dummy_image(module, args, embeds):
        grid = torch.tensor([[1, side, side]], device=embeds.device)
        pixels = torch.zeros((side * side, patch), device=embeds.device)
        out = features(pixels, grid)
        pooled = getattr(out, "pooler_output", out)  # per-image features (a tuple), or a tensor
        total = sum(t.sum() for t in pooled) if isinstance(pooled, (list, tuple)) else pooled.sum()
        return embeds + total.to(embeds.dtype) * 0

    handle = base.get_input_embeddings().register_forward_hook(add_dummy_image)
    try:
        yield
    finally:
        handle.remove()


def _shared_prefix_hidden(base, prompts, responses, pad_id: int, device):
    """Hidden states predicting each response token [B, R, H], computed with one prompt pass per distinct prompt."""
    from transformers import DynamicCache

    uniq, rows = distinct_prompts(prompts)
    rows = torch.tensor(rows, device=device)  # [B] prompt index of each sample
    pb = collate(base, uniq, None, pad_id, device)  # [U, P], left padded
    cache = DynamicCache(config=base.config.get_text_config() if hasattr(base.config, "get_text_config") else base.config)
    prompt_h = base.model(**pb.model_kwargs(), past_key_values=cache, use_cache=True).last_hidden_state
    cache.batch_select_indices(rows)  # differentiable gather of the prompt KV: [U, ...] -> [B, ...]
    response_ids, mask = _right_padded(responses, pad_id, device)
    R = response_ids.shape[1]
    attn = torch.cat([pb.attention_mask[rows], mask], dim=1)
    pos = pb.next_position[rows][:, None] + torch.arange(R, device=device)[None]  # text positions after the prompt
    if pb.position_ids.dim() == 3:
        pos = pos[None].expand(3, -1, -1)
    resp_h = base.model(input_ids=response_ids, attention_mask=attn, position_ids=pos, past_key_values=cache,
                        use_cache=True).last_hidden_state
    hidden = torch.cat([prompt_h[rows, -1:], resp_h[:, :-1]], dim=1)  # state before token t predicts token t
    return hidden, response_ids, mask


def _right_padded(responses, pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Response ids [B, R] right-padded with ``pad_id`` (R = longest, at least 1) and their mask [B, R]."""
    B, R = len(responses), max(1, max(len(r) for r in responses))
    response_ids = torch.full((B, R), pad_id, dtype=torch.long)
    mask = torch.zeros((B, R), dtype=torch.long)
    for i, r in enumerate(responses):
        if len(r):
            response_ids[i, :len(r)] = torch.tensor(list(r))
            mask[i, :len(r)] = 1
    return response_ids.to(device), mask.to(device)


# update metrics that are means over the micro-batch's tokens: a mini-batch's value is their token-weighted mean
# (the value over all its tokens), never a mean of micro-batch means, which would depend on how it was split.
# entropy / kl are logged per response token whatever loss_agg (the loss terms keep loss_agg): aggregated like the loss,
# seq-mean-token-sum-norm divided them by rollout.max_tokens and the seq-mean modes counted token-less samples
# what the trainer itself logs in a step (besides the reward heads'): a strategy metric of these names or namespaces
# is refused before the step's update
TRAINER_METRICS = frozenset({"lr", "frac_reward_zero_std"})
TRAINER_METRIC_PREFIXES = ("actor/", "response/", "advantage/", "time/", "memory/", "throughput/", "data/", "eval/")
_TOKEN_MEAN_METRICS = frozenset({"clip_frac", "clip_frac_low", "clip_frac_high", "clip_frac_dual", "approx_kl",
                                 "ratio_mean", "entropy", "kl"})


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
    """GRPO trainer: one process, or one rank of a DeepSpeed data-parallel run (the same ``step``).

    Plug-ins: ``strategy`` (a ``RolloutStrategy``; default the config's: CSRS or plain groups), ``prompt_source`` (``take(k)`` examples per
    step; default an ``EpochSampler`` over ``train_set``), reward heads from ``cfg.reward``. A self-play loop may call
    ``step(examples)`` with its own examples, and set ``seed_offset`` per iteration / role so that iterations draw
    different samples.
    """

    def __init__(self, cfg: Config, policy: LoadedModel, engine, train_set: Sequence[Example] = (),
                 heldout: list[Example] | None = None, ref_model: torch.nn.Module | None = None,
                 strategy: RolloutStrategy | None = None, prompt_source: PromptSource | None = None,
                 log: bool = True):
        self.cfg = cfg
        self.policy = policy
        self.model = policy.model
        self.engine = engine
        self.heldout = heldout or []
        self.ref_model = ref_model
        if cfg.algo.kl_coef > 0 and ref_model is None:
            raise ValueError("algo.kl_coef > 0 needs a reference model (pass ref_model, or set algo.kl_coef=0)")
        if strategy is not None and not callable(getattr(strategy, "rollout", None)):
            raise TypeError(f"strategy {strategy!r} has no rollout(ctx, examples) method (see "
                            "mmevo.rollout.strategy.RolloutStrategy)")
        self.device = torch.device(cfg.model.device)
        configure_training(self.model, cfg.model, cfg.trainer.seed)
        if ref_model is not None:  # the same kernels as the policy: at equal weights their log-probs are equal
            from mmevo.models.cpu_linear import use_cpu_linear

            use_cpu_linear(ref_model, cfg.model.cpu_linear)
        self.pad_id = policy.tokenizer.pad_token_id
        self.prompts = PromptCache(policy.processor, policy.is_vl, cfg.data.prompt_template, cfg.data.system_prompt,
                                   cfg.data.prompt_cache_mb)
        self.prompt_source = prompt_source if prompt_source is not None else (
            EpochSampler(train_set, cfg.trainer.seed) if len(train_set) else None)
        self.strategy = strategy if strategy is not None else default_strategy(cfg)
        self.rewards = RewardMixer(cfg.reward.heads, head_arguments(cfg))
        self.seed_offset = 0  # added to the step seed (loops: a different offset per iteration / role)
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
            for key in ("prompts_per_step", "mini_batch_prompts"):
                if getattr(t, key) % D.world_size():
                    raise ValueError(f"trainer.{key}={getattr(t, key)} must divide over {D.world_size()} ranks "
                                     "(whole prompt groups per rank)")
            self.ds_engine = D.wrap_deepspeed(self.model, self.optimizer, self.scheduler,
                                              D.load_ds_config(t.deepspeed, self.model, t.max_grad_norm))
            self.backend = DeepSpeedBackend(self.ds_engine)
        else:
            self.backend = TorchBackend(self.model, self.optimizer, self.scheduler, t.max_grad_norm)
        from mmevo.grpo.distributed import is_main

        # the wandb run opens in train(): a resume continues its checkpoint's run instead of opening another
        self.logger = RunLogger(self.out, to_dict(cfg), t.wandb_mode, t.wandb_project, enabled=log and is_main(),
                                defer_wandb=True)
        self.counters = {"skipped_prompts": 0, "skipped_steps": 0}  # cumulative, checkpointed
        self._pad_sample: tuple[EncodedPrompt, list[int]] | None = None  # see _update
        self._ran: list[tuple[int, dict]] = []  # (step, metrics) of every step this trainer ran (see logged_history)
        # (step, summary) of train()'s last held-out evaluation (trainer.eval_every): the weights it scored until the
        # next step, so a caller evaluating them again may reuse it (``heldout_eval_now``)
        self._last_heldout_eval: tuple[int, dict] | None = None
        self._started = False
        self._unstarted_steps = 0  # steps run through step() before the first train() (a resume would discard them)
        self._own_checkpoints: set[str] = set()  # names of the checkpoints this trainer saved (not an earlier run's)
        # every setting a resume changed, oldest first ({"step", "key", "was", "now"}; see resume_config_diff):
        # checkpointed, so the summary of a run resumed several times names each change and the steps it applied to
        self.settings_changes: list[dict] = []
        # keys a loop lets its rerun change (its length, its reports: ``honest.gss_blocks``, ``mmzero.iterations``):
        # the role trainer's resume neither warns of them nor records them as a change of its settings
        self.resume_free_keys: frozenset[str] = frozenset()
        self._output_dir_key: Path | None = None  # see _take_output_dir
        self._trained_samples = self._trained_groups = 0  # of the last step (see step)

    # -- the algorithm ------------------------------------------------------------------------------------------
    def step(self, examples: Sequence[Example] | None = None) -> dict:
        """One GRPO step on ``examples`` (the global batch), else on ``trainer.prompts_per_step`` from the source."""
        cfg, timer = self.cfg, StageTimer()
        t_start = time.perf_counter()
        lr = self.scheduler.get_last_lr()[0]  # the lr this step's (first) optimizer update uses, read before it steps
        if examples is None:
            if self.prompt_source is None:
                raise ValueError("no prompts: the trainer has no train set or prompt source; pass step(examples)")
            examples = self.prompt_source.take(cfg.trainer.prompts_per_step)
        examples = self._local_share(list(examples))

        if self._weights_stale_on_any_rank():  # vLLM slept at level 2, or holds another role's: reload
            with timer("sync"):
                self.engine.sync_weights(self.model)
        if self.device.type == "cuda":  # the update's cached blocks go back before vLLM claims its share again
            torch.cuda.empty_cache()
        with timer("gen"), self._sampling_weights():
            self.engine.wake()
            rollout = self.strategy.rollout(self.rollout_context(), examples)
            self.engine.sleep()
        self.counters["skipped_prompts"] += rollout.skipped_prompts

        # only trainable samples (all, except CSRS re-inferences) reach advantages and the loss
        keep = rollout.trainable_mask()
        idx = keep.nonzero().flatten().tolist()
        metrics: dict = {}
        strategy_metrics = dict(rollout.extra_metrics)  # merged last: a name the trainer logs too is refused
        rewards = torch.zeros(len(rollout))
        adv = torch.zeros(0)
        if len(rollout):
            with timer("reward"):
                rewards, reward_metrics = self.rewards(self.scored_samples(rollout))
                metrics.update(reward_metrics)
                strategy_metrics.update(self.strategy.after_rewards(rollout, rewards) or {})
                adv = self._advantages(rewards[idx], rollout.group_ids[idx])
        else:  # heads with a collective call per step (e.g. an all-reduce of their state) still take part
            self.rewards.empty_step()
            self._advantages(torch.zeros(0), torch.zeros(0, dtype=torch.long))  # and so does the batch std
        # refused before the update: a step that raises must not have moved the weights
        self._refuse_metric_clash(strategy_metrics, metrics, reserved=True)
        groups = rollout.group_ids[idx]
        # what this step's per-sample / per-group metrics average over (weights of the rank reduction in train)
        self._trained_samples, self._trained_groups = len(idx), len(torch.unique(groups))
        prompts = [rollout.prompts[i] for i in idx]
        responses = [rollout.completions[i].full_ids for i in idx]
        if idx:
            self._pad_sample = (prompts[0], responses[0])
        elif self._pad_sample is None and examples:
            self._pad_sample = (self.prompts(examples[0]), [self.pad_id])

        # every rank runs the same number of updates and micro-batches (ZeRO collectives): agree on the plan
        micros = [self._micro_batches(m, prompts, responses) for m in self._mini_batches(groups)]
        all_micro = self._micro_batches(list(range(len(idx))), prompts, responses)  # old / reference passes
        # and the same number of LM-head calls in each micro-batch (each one gathers the head's weight)
        # and whether the vision tower runs in every forward (some rank has images, ZeRO-3)
        (n_old,), plan, old_calls, update_calls, (vision,) = self._agree(
            [len(all_micro)], [len(m) for m in micros], self._head_calls(all_micro, responses),
            [self._head_calls(m, responses) for m in micros], [self._has_images(prompts)])
        n_updates = sum(1 for k in plan if k) * cfg.algo.ppo_epochs
        if n_updates == 0:  # nothing trainable on any rank (all prompts too long, or all filtered): skip, count
            self.counters["skipped_steps"] += 1
        else:
            need_old = n_updates > 1  # else on-policy: old = current (detached), ratio = 1
            old_logp = ref_logp = None
            if need_old:
                with timer("old"):
                    old_logp = self._logprobs_no_grad(self.model, prompts, responses, all_micro, n_old, old_calls,
                                                      bool(vision))
            if cfg.algo.kl_coef > 0:
                with timer("ref"):
                    ref_logp = self._reference_logprobs(prompts, responses, all_micro, n_old, old_calls, bool(vision))
            with timer("update"):
                metrics.update(self._update(prompts, responses, adv, micros, plan, old_logp, ref_logp, update_calls,
                                            bool(vision)))
            with timer("sync"):
                self.engine.sync_weights(self.model)
        if idx:
            metrics.update(self._response_metrics(rollout, rewards[idx], adv, idx))

        self.step_idx += 1
        self._unstarted_steps += not self._started
        metrics.update(timer.metrics())
        metrics.update(peak_memory_mb())
        total_time = time.perf_counter() - t_start  # the step's wall time, not just its named stages
        metrics["time/step"] = total_time
        n_tok = sum(len(c.token_ids) for c in rollout.completions)
        metrics["throughput/gen_tokens_per_s"] = n_tok / max(timer.times.get("gen", 0.0), 1e-9)
        metrics["throughput/tokens_per_s"] = (n_tok + sum(len(p.input_ids) for p in rollout.prompts)) / max(total_time, 1e-9)
        metrics["data/skipped_overlong_prompts"] = self.counters["skipped_prompts"]
        metrics["data/skipped_steps"] = self.counters["skipped_steps"]
        metrics["data/samples"] = len(rollout)
        if hasattr(self.prompt_source, "epoch"):
            metrics["data/epoch"] = self.prompt_source.epoch
        # draws that were held-out tasks (HONEST), drawn again; averaged over ranks, not summed: every rank draws
        # the same global batch from its own copy of the source, so each holds the whole count
        if hasattr(self.prompt_source, "heldout_overlap_skipped"):
            metrics["data/heldout_overlap_skipped"] = self.prompt_source.heldout_overlap_skipped
        metrics["lr"] = lr
        self._refuse_metric_clash(strategy_metrics, metrics)  # a name outside the namespaces known up front
        metrics.update(strategy_metrics)
        return metrics

    def reduce_over_ranks(self, metrics: dict) -> dict:
        """A step's metrics as ``train`` logs them: under DeepSpeed reduced over the ranks (a collective), the reward
        means / stds over every rank's trained samples, the per-sample (per-group) shares weighted by each rank's trained
        samples (groups): as one process over the global batch logs them."""
        if self.ds_engine is None:
            return metrics
        from mmevo.grpo.distributed import all_reduce_mean

        n, groups = self._trained_samples, self._trained_groups
        weights = {**dict.fromkeys(PER_SAMPLE_STEP_METRICS, n), "frac_reward_zero_std": groups}
        return all_reduce_mean(metrics, sum_keys=SUMMED_STEP_METRICS, pooled=("reward/",), count=n, weights=weights)

    def _refuse_metric_clash(self, strategy_metrics: dict, metrics: dict, reserved: bool = False) -> None:
        """ValueError for a strategy metric named as one of ``metrics`` (the reward heads' so far) or, with
        ``reserved``, as one the trainer logs later in the step (its names and namespaces, see ``TRAINER_METRICS``)."""
        clash = {k for k in strategy_metrics if k in metrics}
        if reserved:
            clash |= {k for k in strategy_metrics if k in TRAINER_METRICS or k.startswith(TRAINER_METRIC_PREFIXES)}
        if clash:
            name = getattr(self.strategy, "name", type(self.strategy).__name__)
            raise ValueError(f"strategy {name!r} returned metric(s) {sorted(clash)} that the trainer or a reward head "
                             f"logs too (one would silently overwrite the other; the trainer's own are "
                             f"{sorted(TRAINER_METRICS)} and {list(TRAINER_METRIC_PREFIXES)}...): name them under a "
                             f"prefix of its own, e.g. '{name}/...'")

    def _sampling_weights(self):
        """Under ZeRO-3 an engine that samples from the trained module itself (HF) gets its full weights for the
        whole rollout, with DeepSpeed's hooks off: otherwise every decoding forward would be a collective, and ranks
        that decode different numbers of steps (or have no prompts) would hang. Every rank enters (a collective)."""
        import contextlib

        engine_model = getattr(self.engine, "model", None)
        if self.ds_engine is None or engine_model is None or unwrap(engine_model) is not unwrap(self.model):
            return contextlib.nullcontext()
        from mmevo.models.weights import is_zero3

        if not is_zero3(self.model):
            return contextlib.nullcontext()
        from mmevo.grpo.distributed import zero3_full_weights

        return zero3_full_weights(self.ds_engine)

    def rollout_context(self) -> RolloutContext:
        """What the strategy gets for this step: engine, processor, prompt encoder, seeded sampling parameters."""
        from mmevo.grpo.distributed import rank

        cfg = self.cfg
        seed = step_seed(cfg.trainer.seed, self.step_idx, rank(), self.seed_offset)
        params = SamplingParams(cfg.rollout.temperature, cfg.rollout.top_p, cfg.rollout.max_tokens, seed=seed)
        stop = getattr(self.engine, "stop_ids", ())
        stop = stop.tolist() if torch.is_tensor(stop) else list(stop)
        return RolloutContext(self.engine, self.policy.processor, self.policy.tokenizer, self.prompts, params,
                              cfg.rollout.n, cfg.data.max_prompt_length, self.step_idx, seed, stop, self.seed_offset)

    def scored_samples(self, rollout: Rollout) -> list[ScoredSample]:
        """What the reward heads see of each sample; in label-free runs no gold answer reaches them."""
        hide = self.cfg.data.hide_labels
        keep = rollout.trainable_mask().tolist()
        parents = rollout.parents or [-1] * len(rollout)
        shown: dict[int, Example] = {}
        for ex in rollout.examples:  # one label-free copy per example, shared by its samples
            if id(ex) not in shown:
                shown[id(ex)] = dataclasses.replace(ex, answer=None, solution=None) if hide else ex
        return [ScoredSample(text, int(g), None if hide else ex.answer, ex.choices, c.finish_reason == "length",
                             "maternal" if k else "reinference", par, ex.answer, rollout.aux_of(i), shown[id(ex)])
                for i, (text, g, ex, c, k, par) in enumerate(zip(rollout.texts, rollout.group_ids.tolist(),
                                                                 rollout.examples, rollout.completions, keep, parents))]

    def _advantages(self, rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
        """Group advantages of this rank's trainable samples (rewards, group_ids [b]) -> [b]. A group never spans
        ranks (``_local_share`` splits by prompt), so ``group`` / ``none`` need no other rank; ``batch`` scales by
        the std of the whole step's rewards, gathered from every rank (a collective: every rank calls this once per
        step), as one process over the global batch would (TRL gathers the rewards for its batch scaling too)."""
        from mmevo.grpo.distributed import all_gather_objects, world_size

        a = self.cfg.algo
        std_all = None
        if a.adv_scale == "batch" and world_size() > 1:
            parts = all_gather_objects(rewards.detach().to(torch.float64).tolist())  # exact: float32 -> float
            std_all = algos.reward_std(torch.tensor([r for part in parts for r in part], dtype=torch.float64))
        return algos.group_advantages(rewards, group_ids, a.adv_scale, a.adv_eps, std_all=std_all)

    def _local_share(self, examples: list[Example]) -> list[Example]:
        """Every rank gets the same global batch and keeps its own contiguous share of whole prompts."""
        from mmevo.grpo.distributed import rank, world_size

        w = world_size()
        if w == 1:
            return examples
        n = len(examples)
        return examples[rank() * n // w:(rank() + 1) * n // w]

    def _mini_batches(self, groups: torch.Tensor) -> list[list[int]]:
        """Sample indices of each mini-batch: whole prompt groups, ``trainer.mini_batch_prompts`` (this rank's share)
        per update, so a step that lost prompts makes fewer full-size updates, not more smaller ones."""
        from mmevo.grpo.distributed import world_size

        per_mini = max(1, self.cfg.trainer.mini_batch_prompts // world_size())
        uniq = torch.unique(groups).tolist()
        mini_of_group = {g: k // per_mini for k, g in enumerate(uniq)}
        minis: list[list[int]] = [[] for _ in range(math.ceil(len(uniq) / per_mini))]
        for i, g in enumerate(groups.tolist()):
            minis[mini_of_group[g]].append(i)
        return minis

    def _global_sizes(self, micros: list[list[list[int]]], plan: list[int], responses) -> tuple[int, list[tuple]]:
        """(ranks averaging the gradients, [(real response tokens, sequences)] of each update summed over the ranks,
        each at least 1); one process: its own sizes, 1 rank."""
        local = [(sum(len(responses[i]) for ids in m for i in ids), sum(len(ids) for ids in m))
                 for m in (micros[u] if u < len(micros) else [] for u in range(len(plan)))]
        n_ranks = 1
        if self.ds_engine is not None:
            from mmevo.grpo.distributed import all_gather_objects

            ranks = all_gather_objects(local)
            n_ranks = len(ranks)
            local = [tuple(map(sum, zip(*sizes))) for sizes in zip(*ranks)]
        return n_ranks, [(max(1, t), max(1, n)) for t, n in local]

    def _weights_stale_on_any_rank(self) -> bool:
        """Whether the engine must get this trainer's weights again before sampling, agreed over the ranks: under
        ZeRO-3 ``sync_weights`` gathers every parameter (a collective), so ranks must decide alike. A loop role's view
        of the shared vLLM engine (``mmevo.rollout.shared_vllm``) is stale on a rank where a frozen role loaded its
        weights, and a frozen role samples only on ranks that have something to ask it (MM-Zero's coder: proposals
        that parsed; Prism's and HONEST's solver: questions): after a step without an update (nothing trainable on
        any rank), which syncs nothing, the ranks' views differed (at sleep level 1, or with no sleep)."""
        if not hasattr(self.engine, "weights_stale"):  # the HF engine samples from the module itself
            return False
        stale = bool(self.engine.weights_stale)
        if self.ds_engine is None:
            return stale
        return bool(self._agree([int(stale)])[0][0])

    def _agree(self, *counts: list) -> list[list]:
        """Element-wise max over ranks of each list of counts, or of lists of such lists (``elementwise_max``);
        identity in one process."""
        if self.ds_engine is None:
            return [elementwise_max([c]) for c in counts]
        from mmevo.grpo.distributed import all_gather_objects

        return [elementwise_max(list(lists)) for lists in zip(*all_gather_objects(counts))]

    def _head_calls(self, micro: list[list[int]], responses) -> list[int]:
        """LM-head calls (``head_calls``) of each micro-batch (sample indices) under ``trainer.logits_chunk_tokens``."""
        chunk = self.cfg.trainer.logits_chunk_tokens
        return [head_calls(sum(len(responses[i]) for i in ids), chunk) for ids in micro]

    def _has_images(self, prompts) -> int:
        """1 where a forward of this rank may run the vision tower: one of ``prompts``, or the padding sample, has an
        image. Agreed over ranks (max) it tells every rank to run the tower in each forward (``sequence_logprobs``'s
        ``vision_tower``)."""
        pad = [self._pad_sample[0]] if self._pad_sample is not None else []
        return int(any(p.pixel_values is not None for p in [*prompts, *pad]))

    def _agreed_vision(self, prompts) -> bool:
        """``_has_images`` agreed over ranks; False in one process (nothing to agree with) and off ZeRO-3."""
        from mmevo.models.weights import is_zero3

        if self.ds_engine is None or not is_zero3(self.model):
            return False
        return bool(self._agree([self._has_images(prompts)])[0][0])

    def _padding_micro_batch(self) -> tuple[list[EncodedPrompt], list[list[int]]]:
        """The padding sample as a micro-batch, its response cut to one LM-head chunk: a padding micro-batch then
        makes one head call, never more than the real micro-batch of another rank it stands beside."""
        prompt, response = self._padding()
        chunk = self.cfg.trainer.logits_chunk_tokens
        return [prompt], [response[:chunk] if chunk > 0 else response]

    def _micro_batches(self, ids: list[int], prompts, responses) -> list[list[int]]:
        """``split_micro_batches`` under this trainer's settings (packed where padding-free applies to the model)."""
        t = self.cfg.trainer
        packs = bool(t.padding_free) and supports_packing(unwrap(self.model))
        return split_micro_batches(ids, prompts, responses, t.micro_batch_seqs, t.max_tokens_per_micro_batch, packs)

    def _logprobs_no_grad(self, model, prompts, responses, micro: list[list[int]] | None = None,
                          n_micro: int | None = None, min_calls: list[int] | None = None,
                          vision: bool | None = None) -> list[torch.Tensor]:
        """Log-probs [R_i] of each sample (in sample order), in micro-batches (``micro``: sample indices, in order;
        default ``_micro_batches`` of all), without gradients, in eval mode (no dropout, and no gradient
        checkpointing, which would disable the shared-prompt path).

        ``n_micro``: micro-batches to run (the agreed count under ZeRO-3, where every forward is collective); the ones
        beyond this rank's samples run the padding sample and are discarded. ``min_calls[k]``: the LM-head calls
        micro-batch k makes at least (agreed likewise; default: its own). ``vision``: every forward runs the vision
        tower (under ZeRO-3; default: ``_agreed_vision``, a collective under DeepSpeed)."""
        out = []
        if vision is None:
            vision = self._agreed_vision(prompts)
        if micro is None:
            micro = self._micro_batches(list(range(len(prompts))), prompts, responses)
        n_micro = len(micro) if n_micro is None else n_micro
        base = unwrap(model)
        was_training = base.training
        base.eval()
        try:
            with torch.no_grad():
                for k in range(n_micro):
                    ids = micro[k] if k < len(micro) else []
                    ps, rs = (([prompts[i] for i in ids], [responses[i] for i in ids]) if ids
                              else self._padding_micro_batch())
                    logp, _, _ = sequence_logprobs(model, ps, rs, self.pad_id, self.cfg.rollout.temperature,
                                                   self.device, logits_chunk=self.cfg.trainer.logits_chunk_tokens,
                                                   padding_free=self.cfg.trainer.padding_free,
                                                   min_head_calls=min_calls[k] if min_calls else 0,
                                                   vision_tower=vision)
                    if ids:
                        out.extend(list(logp))
        finally:
            base.train(was_training)
        return out

    def _reference_logprobs(self, prompts, responses, micro, n_micro: int,
                            min_calls: list[int] | None = None, vision: bool | None = None) -> list[torch.Tensor]:
        """Reference log-probs; with ``model.ref_offload`` the reference lives in host memory and visits the device
        only for this pass (a full 7B bf16 replica is 15 GiB of GPU memory otherwise)."""
        if not self.cfg.model.ref_offload:
            return self._logprobs_no_grad(self.ref_model, prompts, responses, micro, n_micro, min_calls, vision)
        self.ref_model.to(self.device)
        try:
            return self._logprobs_no_grad(self.ref_model, prompts, responses, micro, n_micro, min_calls, vision)
        finally:
            self.ref_model.to("cpu")
            if self.device.type == "cuda":
                torch.cuda.empty_cache()

    def _padding(self) -> tuple[EncodedPrompt, list[int]]:
        if self._pad_sample is None:
            from mmevo.grpo.distributed import rank

            raise RuntimeError(f"rank {rank()} has no sample to pad its share of a collective update with (it got no "
                               "prompts this step): give every rank at least one prompt")
        return self._pad_sample

    def _update(self, prompts, responses, adv, micros: list[list[list[int]]], plan: list[int], old_logp,
                ref_logp, min_calls: list[list[int]] | None = None, vision: bool | None = None) -> dict:
        """PPO-style epochs over mini-batches (whole groups); micro-batches accumulate gradients.

        ``micros[u]``: this rank's micro-batches (sample indices) of update u; ``plan[u]``: the number of micro-batches
        of update u agreed by all ranks. Where this rank has fewer it runs the padding sample with weight 0, so every
        rank makes the same collective calls; ``min_calls[u][k]``: the LM-head calls micro-batch k of update u makes at
        least (agreed likewise; default: agreed here); ``vision``: as in ``_logprobs_no_grad``."""
        cfg, a = self.cfg, self.cfg.algo
        if min_calls is None:  # agreed here (a collective): the caller agreed on the plan alone
            (min_calls,) = self._agree([self._head_calls(m, responses) for m in micros])
        if vision is None:
            vision = self._agreed_vision(prompts)
        model = self.model
        model.train()
        agg_totals: dict[str, float] = {}
        n_updates = real_updates = 0
        # the mini-batch is the global one: DeepSpeed averages the ranks' gradients, so each rank weights its part by
        # world size / global count, and the update is the mean over every rank's tokens (or sequences), as verl's
        # global normalisation, not the mean of the ranks' means (which over-weights ranks with short responses)
        n_ranks, global_sizes = self._global_sizes(micros, plan, responses)
        for _ in range(a.ppo_epochs):
            for u, n_micro in enumerate(plan):
                if n_micro == 0:
                    continue
                micro = micros[u] if u < len(micros) else []
                mini = [i for ids in micro for i in ids]
                self.backend.zero_grad()
                mini_tokens, mini_seqs = global_sizes[u]  # real response tokens / sequences over all ranks
                totals: dict[str, float] = {}
                for k in range(n_micro):
                    ids = micro[k] if k < len(micro) else []
                    if ids:
                        ps, rs = [prompts[i] for i in ids], [responses[i] for i in ids]
                    else:  # padding for the collective calls: runs, contributes nothing
                        ps, rs = self._padding_micro_batch()
                    logp, ent, mask = sequence_logprobs(model, ps, rs, self.pad_id, cfg.rollout.temperature,
                                                        self.device, with_entropy=True,
                                                        logits_chunk=cfg.trainer.logits_chunk_tokens,
                                                        entropy_grad=bool(a.entropy_coef),
                                                        padding_free=cfg.trainer.padding_free,
                                                        min_head_calls=_at(min_calls, u, k), vision_tower=vision)
                    R = logp.shape[1]
                    scale_factor = None
                    if a.loss_agg == "seq-mean-token-sum-norm":  # Dr.GRPO: constant length normaliser
                        scale_factor = float(cfg.rollout.max_tokens) * len(rs)
                    if not ids:
                        weight = tok_weight = 0.0
                        old, ref, adv_mb = logp.detach(), None, torch.zeros(1, dtype=logp.dtype)
                    else:
                        tok_weight = float(mask.sum()) * n_ranks / mini_tokens
                        weight = tok_weight if a.loss_agg == "token-mean" else len(ids) * n_ranks / mini_seqs
                        old = logp.detach() if old_logp is None else _stack_padded([old_logp[i] for i in ids], R)
                        ref = None if ref_logp is None else _stack_padded([ref_logp[i] for i in ids], R)
                        adv_mb = adv[ids].to(logp)
                    pg_loss, pg_m = algos.policy_loss(logp, old, adv_mb, mask, a.clip_low, a.clip_high, a.loss_agg,
                                                      loss_scale_factor=scale_factor, clip_ratio_c=a.clip_ratio_c)
                    loss = pg_loss
                    if ref is not None:
                        kl_tok = algos.kl_penalty(logp, ref, a.kl_type)  # [b, R]
                        kl = algos.agg_loss(kl_tok, mask, a.loss_agg, scale_factor)
                        loss = loss + a.kl_coef * kl
                        pg_m["kl"] = float(algos.masked_mean(kl_tok.detach(), mask))  # per token, as the README says
                    ent_mean = algos.agg_loss(ent, mask, a.loss_agg, scale_factor)
                    if a.entropy_coef:
                        loss = loss - a.entropy_coef * ent_mean
                    pg_m["entropy"] = float(algos.masked_mean(ent.detach(), mask))
                    pg_m["pg_loss"] = float(pg_loss.detach())
                    pg_m["loss"] = float(loss.detach())
                    if not torch.isfinite(loss):
                        raise TrainingDiverged(
                            f"non-finite loss ({float(loss)}) at step {self.step_idx}: stopping; the last good "
                            f"checkpoint in {self.out / 'checkpoints'} is kept (lower trainer.lr or check the data)")
                    self.backend.backward(loss * weight, boundary=k + 1 == n_micro)
                    for key, v in pg_m.items():
                        if is_max_metric(key):  # a maximum, not a mean: the largest over the micro-batches
                            if ids:
                                totals[key] = max(totals.get(key, v), v)
                        else:  # token means (clip fractions, ratio, approx_kl) weigh by tokens whatever loss_agg
                            w = tok_weight if key in _TOKEN_MEAN_METRICS else weight
                            totals[key] = totals.get(key, 0.0) + v * w
                grad_norm = self.backend.step()
                if not math.isfinite(grad_norm):
                    raise TrainingDiverged(f"non-finite gradient norm at step {self.step_idx}: stopping; the last "
                                           f"good checkpoint in {self.out / 'checkpoints'} is kept")
                n_updates += 1
                if mini:  # padding-only updates of this rank are not part of its metrics
                    real_updates += 1
                    totals["grad_norm"] = grad_norm
                    for key, v in totals.items():
                        agg_totals[key] = (max(agg_totals.get(key, v), v) if is_max_metric(key)
                                           else agg_totals.get(key, 0.0) + v)
        metrics = {f"actor/{k}": v if is_max_metric(k) else v / max(1, real_updates) for k, v in agg_totals.items()}
        metrics["actor/updates"] = n_updates
        return metrics

    def _response_metrics(self, rollout: Rollout, rewards, advantages, idx: list[int]) -> dict:
        """Length / truncation / no-answer shares and zero-signal groups, over the trained (maternal) samples."""
        comps = [rollout.completions[i] for i in idx]
        lengths = torch.tensor([len(c.full_ids) for c in comps], dtype=torch.float32)
        truncated = sum(c.finish_reason == "length" for c in comps)
        # as the votes count them: a boxed blank (\boxed{\,}) is no answer either
        no_answer = sum(canonical_answer(extract_answer(rollout.texts[i], rollout.examples[i].choices),
                                         rollout.examples[i].choices) is None for i in idx)
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
    def plugin_state(self) -> dict:
        """State of the plug-ins (prompt source, strategy, reward heads) and the run's counters."""
        return {"prompt_source": self.prompt_source.state_dict() if self.prompt_source is not None else None,
                "strategy": self.strategy.state_dict(), "rewards": self.rewards.state_dict(),
                "counters": dict(self.counters)}

    def load_plugin_state(self, state: dict) -> None:
        source = state.get("prompt_source", state.get("sampler"))  # "sampler": checkpoints before prompt sources
        if source is not None:
            if self.prompt_source is None:
                raise ValueError("the checkpoint has a prompt-source position, but this trainer has no prompt source "
                                 "(pass the same train set or prompt source as the run that wrote it)")
            self.prompt_source.load_state_dict(source)
        self.strategy.load_state_dict(state.get("strategy") or {})
        self.rewards.load_state_dict(state["rewards"])
        self.counters.update(state.get("counters") or {})

    def trainer_state(self, with_optimizer: bool = True) -> dict:
        """What a checkpoint holds besides the weights (``with_optimizer=False``: no optimizer / scheduler state)."""
        # the wandb run's id: a resume from this checkpoint continues that run (rank 0's logger has it)
        state = {**self.plugin_state(), "config": to_dict(self.cfg), "wandb_run_id": self.logger.wandb_run_id,
                 "settings_changes": list(self.settings_changes)}
        if self.cfg.model.lora.rank > 0 and self.ds_engine is None:  # model/ holds merged weights: keep the adapters
            from mmevo.models.adapters import base_fingerprint, lora_state_dict

            state["lora"] = lora_state_dict(self.model)
            state["lora_base"] = base_fingerprint(self.model)  # what a resume checks its base weights against
        if with_optimizer:
            state.update(optimizer=self.optimizer.state_dict(), scheduler=self.scheduler.state_dict(),
                         optimizer_params=optimizer_param_names(self.model, self.optimizer))
        return state

    def save(self) -> Path | None:
        """Checkpoint (every rank must call it under DeepSpeed: ZeRO-3 weights are gathered; rank 0 writes)."""
        _check_output_dir(self)
        if self.ds_engine is None:
            saved = save_checkpoint(self.out, self.step_idx, self.model, self.policy.processor, self.trainer_state(),
                                    keep=self.cfg.trainer.keep_checkpoints)
        else:
            saved = self._save_deepspeed()
        self._own_checkpoints.add(checkpoint_name(self.step_idx))
        return saved

    def _save_deepspeed(self) -> Path | None:
        """ZeRO partitions the optimizer state across ranks (its torch state_dict cannot even be built), so DeepSpeed
        writes it, one file per rank, beside the gathered HF model; every rank also keeps its RNG state."""
        import shutil

        from mmevo.grpo import distributed as D
        from mmevo.models.weights import full_state_items

        gathered = full_state_items(self.model, device="cpu")  # collective under ZeRO-3: every rank takes part
        weights = dict(gathered) if D.is_main() else collections.deque(gathered, maxlen=0)  # only rank 0 keeps it
        tmp = checkpoint_root(self.out) / f".{checkpoint_name(self.step_idx)}.tmp"  # one name on every rank
        if D.is_main():
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
        D.barrier()
        self.ds_engine.save_checkpoint(str(tmp / "deepspeed"), tag="zero", save_latest=False)
        torch.save(rng_state(), tmp / f"rng_rank{D.rank()}.pt")
        torch.save(self.plugin_state(), tmp / f"plugins_rank{D.rank()}.pt")  # a rank's replay / counts are its own
        D.barrier()
        final = None
        if D.is_main():
            state = {**self.trainer_state(with_optimizer=False), "world_size": D.world_size()}
            write_checkpoint_files(tmp, self.step_idx, self.model, self.policy.processor, state, weights)
            final = commit_checkpoint(tmp, self.out, self.step_idx, self.cfg.trainer.keep_checkpoints)
        D.barrier()  # nobody reads or writes the next checkpoint before this one is in place
        return final

    def _abandon_earlier_run(self) -> None:
        """``trainer.resume=false`` in an output_dir with checkpoints: they are an earlier run's, removed at once."""
        from mmevo.grpo import distributed as D

        if self.cfg.trainer.resume:
            return
        gone = abandon_checkpoints(self.out, keep=self._own_checkpoints) if D.is_main() else []
        if gone:
            print(f"[mmevo] trainer.resume=false: removed {len(gone)} checkpoint(s) of an earlier run in "
                  f"{self.out / 'checkpoints'} ({gone[0]} .. {gone[-1]})")
        if self.ds_engine is not None:
            D.barrier()  # no rank saves (or looks for checkpoints) before they are gone

    def maybe_resume(self, final_step: int | None = None) -> bool:
        """Resume from the newest checkpoint, if any (True when it did). ``final_step``: the step the caller will train
        up to (``trainer.steps``), given so that a rerun with changed settings that would train no step is refused."""
        from mmevo.grpo import distributed as D

        if D.is_main():
            remove_partial_checkpoints(self.out)
        ckpt = latest_checkpoint(self.out) if self.cfg.trainer.resume else None
        if self.ds_engine is not None:  # rank 0 decides, so that every rank loads the same step
            ckpt = D.broadcast_from_main(ckpt)
        if ckpt is None:
            return False
        state = load_trainer_state(ckpt)
        diff = resume_config_diff(state.get("config"), to_dict(self.cfg), int(state["step"]), self.resume_free_keys)
        changed = [d["key"] for d in diff]
        if diff and final_step is not None and int(state["step"]) >= final_step:
            # nothing would run under the new values, yet the summary would name them as this run's settings
            raise ValueError(
                f"{ckpt} has run all {int(state['step'])} of its trainer.steps={final_step} under other settings than "
                "this rerun's: " + "; ".join(f"{d['key']} {d['was']!r} -> {d['now']!r}" for d in diff)
                + ". No step is left to run with them, so they would apply to nothing: raise trainer.steps to continue "
                "the run under them, rerun with the settings it was saved with (to re-export / re-evaluate it), or "
                "start afresh with trainer.resume=false or another trainer.output_dir")
        what = "its weights / optimizer state"
        try:
            self._load_checkpoint_state(ckpt, state)
            state = {**state, **self._rank_plugin_state(ckpt)}
            # before the warning below: a data position that does not fit this run's train set (another data.n_train
            # or data.train) was refused after "this run's values apply", in words that named no setting
            what = "its data position / plug-in state"
            self.load_plugin_state(state)
        except DamagedCheckpointError:
            raise
        except (RuntimeError, ValueError, KeyError) as e:  # torch's shape / group-size messages name no setting
            if not changed:
                raise
            raise ValueError(f"cannot resume {ckpt}: {what} do not fit this run, whose settings "
                             f"differ from the checkpoint's in {', '.join(changed)} ({type(e).__name__}: {e}); resume "
                             "with the settings it was saved with, or start afresh with trainer.resume=false or "
                             "another trainer.output_dir") from e
        self.settings_changes = list(state.get("settings_changes", [])) + diff
        if changed and D.is_main():  # verl / TRL resume silently; a changed algorithm or data is most likely a mistake
            # the loaded optimizer / scheduler state brings its own lr, betas and weight decay (as in verl and TRL)
            kept = [k for k in changed if k in OPTIMIZER_STATE_KEYS]
            note = f", except {', '.join(kept)}: the checkpoint's optimizer state keeps its own" if kept else ""
            warnings.warn(f"resuming {ckpt} with settings other than those it was saved with: {', '.join(changed)} "
                          f"(this run's values apply{note}; use another trainer.output_dir or trainer.resume=false "
                          "to start afresh); saved -> now: "
                          + "; ".join(f"{d['key']} {d['was']!r} -> {d['now']!r}" for d in diff), stacklevel=2)
        _reapply_schedule(self.scheduler)
        self.step_idx = int(state["step"])
        # other weights, maybe at the step_idx a held-out result was kept for (a step-0 checkpoint): score them anew
        self._last_heldout_eval = None
        self.engine.sync_weights(self.model)
        self.logger.begin(self.step_idx, state.get("wandb_run_id"))  # the curve and wandb run go on after it
        if D.is_main():
            print(f"[mmevo] resumed from {ckpt} (step {self.step_idx})")
        return True

    def _load_checkpoint_state(self, ckpt: Path, state: dict) -> None:
        """Weights, optimizer, scheduler and RNG of ``ckpt`` (``state``: its trainer state) into this trainer."""
        from mmevo.grpo import distributed as D

        if self.ds_engine is None:
            if "optimizer" not in state:
                raise ValueError(f"{ckpt} was written by a DeepSpeed run: resume it with the same trainer.deepspeed "
                                 f"config, or start from its weights with model.path={ckpt / 'model'} "
                                 "trainer.resume=false")
            if self.cfg.model.lora.rank > 0:  # the base weights never change: load the adapters only
                from mmevo.models.adapters import load_lora_state_dict

                if "lora" not in state:
                    raise ValueError(f"{ckpt} has no LoRA adapters: it was written with model.lora.rank=0")
                check_same_model(ckpt / "model", self.model)  # the adapters of another model: PEFT's / torch's error
                check_same_base(ckpt / "model", self.model, state.get("lora_base"))  # same shapes, other weights
                load_lora_state_dict(self.model, state["lora"])
            else:
                load_model_weights(self.model, ckpt / "model")
            check_optimizer_params(ckpt, state.get("optimizer_params"), optimizer_param_names(self.model,
                                                                                               self.optimizer))
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
            check_same_model(ckpt / "model", self.model)  # another model's partitions: DeepSpeed's own error
            # weights, optimizer partitions and scheduler (DeepSpeed owns the one it was given)
            self.ds_engine.load_checkpoint(str(ckpt / "deepspeed"), tag="zero", load_optimizer_states=True,
                                           load_lr_scheduler_states=True)
            set_rng_state(load_state_file(ckpt / f"rng_rank{D.rank()}.pt"))

    def _rank_plugin_state(self, ckpt: Path) -> dict:
        """Under DeepSpeed, this rank's own plug-in state (replay, counts), which overrides the trainer state's."""
        from mmevo.grpo import distributed as D

        own = ckpt / f"plugins_rank{D.rank()}.pt"
        return load_state_file(own) if self.ds_engine is not None and own.exists() else {}

    def train(self, steps: int | None = None, on_step=None) -> list[dict]:
        """Run until ``trainer.steps`` (or ``steps`` more); returns the per-step metrics."""
        t = self.cfg.trainer
        if not self._started:  # resume (or start a fresh curve) once per trainer, not on every train() call
            ckpt = latest_checkpoint(self.out) if self._unstarted_steps and t.resume else None
            own = ckpt is not None and ckpt.name == checkpoint_name(self.step_idx) and ckpt.name in self._own_checkpoints
            if ckpt is not None and not own:  # resuming would replace the weights and state of the steps run since
                raise ValueError(f"this trainer ran {self._unstarted_steps} step(s) through step() before its first "
                                 f"train(), and resuming {ckpt} would silently discard them: call train(steps=0) "
                                 "(resume) before the first step(), or start afresh with trainer.resume=false or "
                                 "another trainer.output_dir")
            _take_output_dir(self)
            if not self.maybe_resume(final_step=t.steps if steps is None else None):
                # as a resume restores them from its checkpoint: a plug-in's random / numpy / torch draws are seeded
                # by the run's seed and this trainer's seed_offset (a loop's roles and phases draw differently); as
                # "step -1", not step 0's sampling seed, whose streams CSRS's anchors and the HF sampler draw from
                seed_everything(step_seed(t.seed, -1, 0, self.seed_offset))
                self.logger.begin(self.step_idx)  # a fresh run: a new wandb run, never an old run's curve
                self._abandon_earlier_run()
            self._started = True
        _check_output_dir(self)
        target = t.steps if steps is None else self.step_idx + steps
        history = []  # this call's steps (``logged_history`` has the run's whole curve)
        from mmevo.grpo.distributed import is_main

        bar = _progress(target, self.step_idx, enabled=t.progress and is_main())
        try:
            while self.step_idx < target:
                try:
                    metrics = self.reduce_over_ranks(self.step())
                except FloatingPointError as e:
                    raise TrainingDiverged(f"{e} at step {self.step_idx}: stopping; the last good checkpoint in "
                                           f"{self.out / 'checkpoints'} is kept") from e
                if t.eval_every and self.step_idx % t.eval_every == 0 and self.heldout:
                    heldout = self.evaluate()
                    self._last_heldout_eval = (self.step_idx, heldout)
                    metrics.update(eval_metrics(heldout))
                self.logger.log(self.step_idx, metrics)
                history.append(metrics)
                self._ran.append((self.step_idx, metrics))
                if on_step:
                    on_step(self.step_idx, metrics)
                if t.save_every and self.step_idx % t.save_every == 0:
                    self.save()
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(reward=f"{metrics.get('reward/total/mean', float('nan')):.3f}",
                                    len=f"{metrics.get('response/length_mean', float('nan')):.0f}",
                                    s=f"{metrics['time/step']:.1f}")
        finally:
            if bar is not None:
                bar.close()
        return history

    def logged_history(self, first: int = 1, last: int | None = None) -> list[dict]:
        """Per-step metrics of steps ``first``..``last`` (default: through the current step), in step order: the
        run's curve (metrics.jsonl), steps run before a resume included, which ``train``'s return value (the steps
        that call ran) lacks, so a loop's summary of a resumed phase or block covers all its steps. Where this
        trainer writes no curve (``log=False``, ranks other than 0): the steps it ran itself."""
        from mmevo.metrics import read_curve

        last = self.step_idx if last is None else last
        if self.logger.enabled and self.logger.path.exists():
            rows = [(int(r["step"]), {k: v for k, v in r.items() if k != "step"}) for r in read_curve(self.logger.path)
                    if "step" in r]
        else:
            rows = self._ran
        return [m for step, m in rows if first <= step <= last]

    def export(self, path: str | Path) -> Path:
        """Final model in HF format (under DeepSpeed: gathered on every rank, written by rank 0), written whole or
        not at all (``export_atomically``): a rerun of a finished run exports again over its ``final/``, and a kill
        mid-write left torn weights beside the summary that marks the run finished (and reused as it is)."""
        if self.ds_engine is None:
            return export_atomically(path, lambda d: save_model(d, self.model, self.policy.processor))
        from mmevo.grpo.distributed import is_main
        from mmevo.models.weights import full_state_items

        gathered = full_state_items(self.model, device="cpu")  # collective: every rank takes part, rank 0 keeps it
        weights = dict(gathered) if is_main() else collections.deque(gathered, maxlen=0)
        if is_main():
            export_atomically(path, lambda d: save_model(d, self.model, self.policy.processor, weights))
        return Path(path)

    def close(self) -> None:
        """End the run's logging and free the engine (a loop builds and drops several trainers)."""
        _release_output_dir(self)
        self.logger.close()
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()

    def heldout_eval_now(self) -> dict:
        """``evaluate()`` of the held-out set at the current weights, reused from train()'s periodic evaluation or an
        earlier call when one ran at this step (``trainer.eval_every`` dividing the steps, or ``trainer.steps=0``'s
        before and after: the same weights scored again, a whole held-out pass). Every rank gets the same answer (a
        collective where it evaluates). A resume drops the kept result: it may load other weights at the same step."""
        if self._last_heldout_eval is not None and self._last_heldout_eval[0] == self.step_idx:
            return self._last_heldout_eval[1]
        result = self.evaluate()
        self._last_heldout_eval = (self.step_idx, result)
        return result

    def evaluate(self, examples: Sequence[Example] | None = None, max_tokens: int | None = None) -> dict:
        """Held-out accuracy; under DeepSpeed every rank evaluates every world_size-th example and the records are
        gathered, so each rank returns the summary over the whole set."""
        from mmevo.grpo.distributed import all_gather_objects, rank, world_size

        examples = list(self.heldout if examples is None else examples)  # an empty list is an empty set
        examples, overlong = fitting_examples(self.prompts, examples, self.cfg.data.max_prompt_length)
        if self._weights_stale_on_any_rank():  # vLLM slept at level 2, or holds another role's, since the last sync
            self.engine.sync_weights(self.model)
        split = self.ds_engine is not None and world_size() > 1
        r, W = (rank(), world_size()) if split else (0, 1)
        local = examples[r::W]
        with self._sampling_weights():  # sampled: each item seeded by its place in the whole set, on any rank
            records = eval_records(self.engine, self.prompts, local, self.policy.tokenizer,
                                   max_tokens or self.cfg.trainer.eval_max_tokens or self.cfg.rollout.max_tokens,
                                   self.cfg.rollout.eval_temperature, seed=self.cfg.trainer.seed,
                                   indices=range(r, len(examples), W))
        if split:  # back in the examples' order: rank r holds positions r, r + W, ...
            parts = all_gather_objects(records)
            records = [parts[i % len(parts)][i // len(parts)] for i in range(len(examples))]
        summary = summarize_eval(records)
        if overlong:
            summary["skipped_overlong_prompts"] = overlong
        return summary


def default_strategy(cfg: Config) -> RolloutStrategy:
    """The rollout strategy the config asks for: CSRS when ``csrs.enabled``, else plain GRPO groups; in a legacy HCR
    run (``mmevo.honest.draws_hindsight_slot``) wrapped in the per-step hindsight slot draw (``honest.hindsight_prob``,
    ``mmevo.honest.strategy.HindsightSlotDraw``). The HONEST loop's solver strategy wraps this one in turn."""
    from mmevo.honest import draws_hindsight_slot

    if cfg.csrs.enabled:
        from mmevo.csrs.strategy import CSRSStrategy

        strategy: RolloutStrategy = CSRSStrategy(cfg.csrs)
    else:
        strategy = PlainGroups()
    if draws_hindsight_slot(cfg):
        from mmevo.honest.strategy import HindsightSlotDraw

        strategy = HindsightSlotDraw(strategy, cfg.honest.hindsight_prob, cfg.trainer.seed)
    return strategy


def head_arguments(cfg: Config) -> dict[str, dict]:
    """Keyword arguments of each reward head: ``reward.head_args``; SFR's default to ``csrs.gamma`` / ``csrs.beta``."""
    args = {name: dict(kw or {}) for name, kw in cfg.reward.head_args.items()}
    if "sfr" in cfg.reward.heads:
        args["sfr"] = {"gamma": cfg.csrs.gamma, "beta": cfg.csrs.beta, **args.get("sfr", {})}
    return args


def split_micro_batches(ids: list[int], prompts, responses, micro_batch_seqs: int, max_tokens: int,
                        packs: bool) -> list[list[int]]:
    """Split sample indices (in order) into micro-batches of at most ``micro_batch_seqs`` sequences and, with
    ``max_tokens`` > 0, at most that many tokens as the training forward runs them (``forward_tokens``; ``packs``:
    padding-free applies). A single longer sample still forms its own micro-batch."""
    out: list[list[int]] = []
    cur: list[int] = []
    # forward_tokens(cur + [i]) kept as running totals: recounting the micro-batch per sample was quadratic
    seen: set[int] = set()  # id() of the distinct prompts in cur (packed)
    p_sum = r_sum = p_max = r_max = 0
    for i in ids:
        p_len, r_len = len(prompts[i].input_ids), max(1, len(responses[i]))
        if cur and (len(cur) >= micro_batch_seqs or (max_tokens and (
                p_sum + (0 if id(prompts[i]) in seen else p_len) + r_sum + r_len if packs
                else (len(cur) + 1) * (max(p_max, p_len) + max(r_max, r_len))) > max_tokens)):
            out.append(cur)
            cur, seen = [], set()
            p_sum = r_sum = p_max = r_max = 0
        cur.append(i)
        if id(prompts[i]) not in seen:
            seen.add(id(prompts[i]))
            p_sum += p_len
        r_sum += r_len
        p_max, r_max = max(p_max, p_len), max(r_max, r_len)
    if cur:
        out.append(cur)
    return out


def forward_tokens(ids: list[int], prompts, responses, packs: bool) -> int:
    """Tokens that the training forward of ``sequence_logprobs`` processes for samples ``ids``: where it packs them
    (``packs``: padding-free applies to the model) the real tokens, each distinct prompt once; else the padded
    len(ids) x (longest prompt + longest response), which also bounds the shared-prompt KV-cache forward."""
    r_lens = [max(1, len(responses[i])) for i in ids]
    if packs:
        uniq, _ = distinct_prompts([prompts[i] for i in ids])
        return sum(len(p.input_ids) for p in uniq) + sum(r_lens)
    return len(ids) * (max(len(prompts[i].input_ids) for i in ids) + max(r_lens))


def elementwise_max(values: list):
    """The element-wise max of several versions (one per rank) of a count or of a (nested) list of counts; a list
    shorter than another counts as padded with 0 (or with empty lists)."""
    if not isinstance(values[0], (list, tuple)):
        return max(values)
    width = max(len(v) for v in values)
    return [elementwise_max([v[i] for v in values if i < len(v)]) for i in range(width)]


def _at(nested: list[list[int]], u: int, k: int) -> int:
    """``nested[u][k]``, 0 where there is none."""
    return nested[u][k] if u < len(nested) and k < len(nested[u]) else 0


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


def eval_metrics(summary: dict) -> dict[str, float]:
    """A held-out summary as per-step metrics: its numbers and the accuracy of each kind (``eval/by_kind/<kind>``),
    not its sample responses (up to 20 whole responses on every evaluated step of metrics.jsonl)."""
    out = {f"eval/{k}": v for k, v in summary.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    out.update({f"eval/by_kind/{kind}": acc for kind, acc in summary.get("by_kind", {}).items()})
    return out


def fitting_examples(prompts: PromptCache, examples: Sequence[Example], max_prompt_length: int) -> tuple[list[Example], int]:
    """(the examples whose prompt fits ``max_prompt_length``, how many did not). Held-out evaluation leaves longer
    prompts out and counts them, as training does (verl filters its validation set the same way); the vLLM engine's
    context holds no more than that plus the response budget."""
    fits = [ex for ex in examples if len(prompts(ex).input_ids) <= max_prompt_length]
    return fits, len(examples) - len(fits)


def evaluate(engine, prompts: PromptCache, examples: list[Example], tokenizer, max_tokens: int, temperature: float = 0.0,
             seed: int = 0) -> dict:
    """Held-out accuracy (and format rate) with the given engine; per-kind breakdown when examples carry meta.kind."""
    return summarize_eval(eval_records(engine, prompts, examples, tokenizer, max_tokens, temperature, seed))


def eval_records(engine, prompts: PromptCache, examples: list[Example], tokenizer, max_tokens: int,
                 temperature: float = 0.0, seed: int = 0, indices: Sequence[int] | None = None) -> list[dict]:
    """One record per example: id, kind, response, gold, correct (0/1), format (0/1).

    Sampled (``temperature`` > 0), each example's request is seeded ``item_seed(seed, index)`` by its ``indices``
    entry, its place in the whole evaluated set (default: its place in ``examples``), so an example's response does
    not depend on the batching, the world size or the other examples of the call. Greedy requests carry no seed."""
    from mmevo.rewards.accuracy import accuracy_rewards
    from mmevo.rewards.format import format_rewards

    indices = range(len(examples)) if indices is None else list(indices)
    if len(indices) != len(examples):
        raise ValueError(f"eval_records: {len(indices)} indices for {len(examples)} examples")
    if not examples:
        return []
    params = SamplingParams(temperature=temperature, top_p=1.0, max_tokens=max_tokens, seed=seed)
    seeds = item_seeds(seed, indices, temperature)
    outs = engine.generate([RolloutRequest(prompts(ex), n=1, seed=s) for ex, s in zip(examples, seeds)], params)
    texts = [decode(tokenizer, o[0].full_ids) for o in outs]
    acc = accuracy_rewards(texts, [ex.answer for ex in examples], [ex.choices for ex in examples]).tolist()
    fmt = format_rewards(texts).tolist()
    return [{"id": ex.id, "kind": eval_kind(ex), "response": t, "gold": ex.answer, "correct": a,
             "format": f} for ex, t, a, f in zip(examples, texts, acc, fmt)]


def eval_kind(ex: Example) -> str:
    """An example's kind in the per-kind breakdown: its ``meta.kind`` as text, "all" where it has none. A data file's
    meta may hold null or a number there: such kinds beside text ones could not be sorted (a TypeError after the whole
    set was generated), and 7 and "7" are one key in summary.json and in ``eval/by_kind/<kind>`` anyway."""
    kind = ex.meta.get("kind")
    return "all" if kind is None or kind == "" else str(kind)


def summarize_eval(records: list[dict]) -> dict:
    """Accuracy, format rate, count, per-kind accuracy and the first samples, from ``eval_records`` output."""
    if not records:
        return {}
    by_kind: dict[str, list[float]] = {}
    for r in records:
        by_kind.setdefault(r["kind"], []).append(r["correct"])
    n = len(records)
    return {"accuracy": sum(r["correct"] for r in records) / n, "format": sum(r["format"] for r in records) / n,
            "n": n, "by_kind": {k: sum(v) / len(v) for k, v in sorted(by_kind.items())},
            "samples": [{"id": r["id"], "response": r["response"], "gold": r["gold"], "correct": bool(r["correct"])}
                        for r in records[:20]]}


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
