"""Rollout engine on plain transformers models: our own batched decode loop over a KV cache.

Why not ``model.generate``: we need (1) one prefill per distinct prompt(+prefix) shared by its n samples — HF's
``num_return_sequences`` re-prefills every copy — (2) explicit mrope positions when continuing a retrace prefix,
(3) per-token log-probs, and (4) finished rows dropped from the batch as they stop.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Sequence

import torch

from mmevo.models.attention import SHARED_PREFIX_KWARG, supports_packing
from mmevo.models.inputs import EncodedPrompt, collate, unwrap
from mmevo.rollout.kv_cache import DecodeCache, SharedPrefixCache
from mmevo.rollout.fused_decode import FusedDecodeStep
from mmevo.rollout.lean_step import LeanDecodeStep
from mmevo.rollout.base import (FACTORY_CONTEXT, Completion, RolloutRequest, SamplingParams,
                                check_context, check_engine_token_ids, check_image_placeholders, check_max_model_len,
                                check_request_batch, check_request_prompts, check_vocab,
                                split_rows)


# below this ban-excluded mass a row's allowed probabilities (exp(scaled - lse), float32) may be subnormal or 0: the
# row is renormalised over its allowed tokens first. Never reached by a policy that is not near-certain to emit a
# banned token (every allowed token then has a probability below 2^-100).
_LOW_ALLOWED_MASS = 2.0**-100


def sample_next(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None,
                banned_ids: torch.Tensor | None = None,
                row_uniforms: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick the next token per row. logits [B, V] -> (tokens [B], logprobs [B] under softmax(logits / T)).

    ``banned_ids`` (vision placeholders) are never sampled: one in a response would desynchronise image features and
    placeholder tokens when the sequence is scored. The returned log-probs are those of the unmodified policy (what
    the trainer computes), not of the renormalised sampling distribution. ``top_p``: the smallest set of the likeliest
    allowed tokens whose renormalised mass reaches ``top_p`` (HF's / vLLM's nucleus, applied after the bans); 0 takes
    the likeliest allowed token (the engines refuse it when sampling, see ``check_request_batch``). A row whose every token is banned or has probability 0 raises ValueError.
    ``row_uniforms``: see ``sample_categorical``.
    """
    logits = logits.float()
    # as Python floats: a Fraction (a numbers.Real, accepted by check_request_batch) failed inside torch's division
    T, top_p = float(params.temperature), float(params.top_p)
    scaled = logits / T if T > 0 and T != 1.0 else logits  # x / 1 is x: skip a pass over [B, V]
    # logsumexp written out: its exp(scaled - max) is the sampling weight below (one exp pass over [B, V], not two)
    peak = scaled.amax(-1, keepdim=True)  # [B, 1]
    weights = torch.exp(scaled - peak)  # [B, V] the policy's probabilities times exp(lse - peak)
    mass = weights.sum(-1, keepdim=True)  # [B, 1]
    lse = (peak + mass.log()).squeeze(-1)  # [B]; NaN / +inf anywhere in a row makes it non-finite
    if not torch.isfinite(lse).all():
        if bool(torch.isfinite(logits).all()):
            raise FloatingPointError(f"temperature {params.temperature} is too small: logits / T overflow float32")
        raise FloatingPointError("the policy produced non-finite logits (NaN/inf weights?)")
    banned = banned_ids is not None and banned_ids.numel() > 0

    def allowed(x: torch.Tensor) -> torch.Tensor:
        return x.index_fill(-1, banned_ids, float("-inf")) if banned else x

    if T <= 0:
        masked = allowed(scaled)
        tok = masked.argmax(-1)
        if not bool((masked.gather(-1, tok[:, None]) > float("-inf")).all()):
            raise ValueError("sample_next: a row has no token to pick (every token banned or of probability 0)")
    else:
        # the policy's probabilities up to a per-row factor (sample_categorical normalises each row itself)
        probs = weights
        if banned:
            # cheap gate (few banned ids) before the exact allowed mass; both relative to the row's mass
            low = probs[:, banned_ids].sum(-1) > 0.5 * mass.squeeze(-1)
            if bool(low.any()):
                rows = low.nonzero().flatten()
                allowed_mass = probs[rows].index_fill(-1, banned_ids, 0.0).sum(-1)
                rows = rows[allowed_mass < _LOW_ALLOWED_MASS * mass[rows].squeeze(-1)]
                if rows.numel():  # float32 lost (some of) these rows' allowed probabilities: renormalise them
                    renorm = torch.softmax(allowed(scaled[rows]), -1)
                    if not bool(torch.isfinite(renorm).all()):
                        raise ValueError("sample_next: a row has no token to sample (every token banned or of "
                                         "probability 0)")
                    probs[rows] = renorm
            probs.index_fill_(-1, banned_ids, 0.0)
        if top_p <= 0:
            probs = torch.zeros_like(probs)  # keeps nothing: the likeliest allowed token (below)
        elif top_p < 1.0:
            # nucleus of the renormalised (ban-excluded) distribution, computed as transformers' TopPLogitsWarper and
            # vLLM compute it: ascending sort of the processed logits, drop while the mass from the unlikeliest up is
            # <= 1 - top_p, always keep the likeliest. Summing from the likeliest down instead gave another nucleus
            # where a mass equals top_p (float32 rounding: 3:1:1 at top_p 0.6 kept two tokens) and at tied tokens
            sorted_logits, idx = allowed(scaled).sort(-1)
            drop = sorted_logits.softmax(-1).cumsum(-1) <= 1 - top_p
            drop[:, -1] = False
            probs = probs.masked_fill(torch.zeros_like(drop).scatter(-1, idx, drop), 0.0)  # back to token order
        # without row uniforms the call of before (tests that watch the weights replace it with a 2-argument one)
        tok = (sample_categorical(probs, generator) if row_uniforms is None
               else sample_categorical(probs, generator, row_uniforms))
        empty = tok < 0
        if bool(empty.any()):  # top_p <= 0 keeps nothing: the likeliest allowed token
            tok[empty] = allowed(scaled[empty]).argmax(-1)
    return tok, scaled.gather(-1, tok[:, None]).squeeze(-1) - lse


def sample_categorical(weights: torch.Tensor, generator: torch.Generator | None,
                       row_uniforms: torch.Tensor | None = None) -> torch.Tensor:
    """One draw per row from the unnormalised non-negative ``weights`` [B, V] -> token ids [B].

    Inverse-CDF: one uniform per row and a binary search in the running sum. ``torch.multinomial`` draws one
    exponential per vocabulary entry instead (on CPU about 0.6 ms per step at V=509 and 185 ms at Qwen's V=151,936
    for 64 rows, against 0.04 / 21 ms here). A zero-weight entry is never drawn: the uniform is kept strictly below
    the row's total, so the search lands on an entry where the running sum increases. A row whose weights are all
    0 gets -1. A row whose total is subnormal or overflows is scaled by a power of two first (exact); a NaN, infinite
    or negative weight in such a row raises ValueError. Resolution: float32 running sums and a 24-bit uniform, so a
    token's chance is exact only to about 2^-24 of its row's total. ``generator`` may live on another device than
    ``weights`` (generate's seeded CPU generator with a model on CUDA): the uniforms are drawn on its device.
    ``row_uniforms`` ([B] or None): a row's uniform drawn beforehand from its own stream (a seeded request's row:
    its draws do not depend on the other rows), NaN where the row has none; those rows draw theirs together from
    ``generator``, as without ``row_uniforms``.
    """
    cdf = weights.cumsum(-1)  # [B, V]
    total = cdf[:, -1:]
    odd = ((total > 0) & (total < torch.finfo(cdf.dtype).tiny)) | ~torch.isfinite(total)
    if bool(odd.any()):  # never for sample_next's probabilities (their total is about 1)
        rows = odd.squeeze(-1).nonzero().flatten()
        w = weights[rows]
        if not bool((torch.isfinite(w) & (w >= 0)).all()):
            raise ValueError("sample_categorical: weights must be finite and non-negative")
        w = torch.ldexp(w, -torch.frexp(w.amax(-1, keepdim=True)).exponent)  # largest weight in [0.5, 1)
        cdf = cdf.index_copy(0, rows, w.cumsum(-1))
        total = cdf[:, -1:]
    # the uniforms come from the generator's own device (torch.rand refuses a generator of another device: generate's
    # seeded CPU generator with a model on CUDA raised at the first draw), then move to the weights'
    at = generator.device if generator is not None else cdf.device
    if row_uniforms is None:
        u = torch.rand(total.shape, generator=generator, dtype=cdf.dtype, device=at).to(cdf.device)
    else:
        if tuple(row_uniforms.shape) != (cdf.shape[0],):  # one entry would broadcast over every row
            raise ValueError(f"sample_categorical: row_uniforms of shape {tuple(row_uniforms.shape)} for "
                             f"{cdf.shape[0]} rows")
        u = _with_shared_draws(row_uniforms, generator, at, cdf.dtype).to(cdf.device)[:, None]
    u = u * total
    u = torch.minimum(u, torch.nextafter(total, torch.zeros_like(total)))  # u * total may round up to total
    tok = torch.searchsorted(cdf, u, right=True).squeeze(-1)
    return tok.masked_fill(total.squeeze(-1) <= 0, -1)


def _with_shared_draws(row_uniforms: torch.Tensor, generator: torch.Generator | None, shared_device: torch.device,
                       dtype: torch.dtype) -> torch.Tensor:
    """``row_uniforms`` [B] with each NaN (a row without its own stream) replaced by a draw from ``generator`` (on
    ``shared_device``): one draw for those rows together, in row order."""
    u = row_uniforms.to("cpu", dtype).clone()
    shared = torch.isnan(u)
    if bool(shared.any()):
        u[shared] = torch.rand(int(shared.sum()), generator=generator, dtype=dtype, device=shared_device).cpu()
    return u


def row_uniform_table(reqs: Sequence[RolloutRequest], steps: int) -> torch.Tensor | None:
    """The uniforms of each decoded row's steps [rows, steps] (rows as the requests' samples in order), drawn once
    before decoding: row k of a request with a seed draws from a CPU generator seeded ``seed + k``, one uniform per
    step; NaN rows for requests without one (they share the call's generator); None when no request has a seed.
    Drawn whole, not per step: a generator call per row and step cost ~0.8 ms a step at 256 rows."""
    if all(r.seed is None for r in reqs):
        return None
    rows = []
    for r in reqs:
        for k in range(int(r.n)):
            rows.append(torch.full((steps,), float("nan")) if r.seed is None else
                        torch.rand(steps, generator=torch.Generator(device="cpu").manual_seed(int(r.seed) + k)))
    return torch.stack(rows) if rows else torch.empty(0, steps)


def _reuses_kv(req: RolloutRequest) -> bool:
    """Whether ``req`` continues from a kept KV cache: a source completion that kept one, and the source's image
    (otherwise it is prefilled as usual). A source sampled under an ``image_override`` kept that image's keys: a
    request for the prompt's own image must not reuse them."""
    src = req.continue_from
    return (src is not None and src.kv is not None and req.image_override is None
            and src.kv.get("image_override") is None)


def _same_prompt(a: EncodedPrompt, b: EncodedPrompt) -> bool:
    """Whether two encoded prompts run the same tokens and pixels through the model."""
    if a is b:
        return True
    if list(a.input_ids) != list(b.input_ids):
        return False
    if (a.pixel_values is None) != (b.pixel_values is None):
        return False
    return a.pixel_values is None or (a.pixel_values.shape == b.pixel_values.shape
                                      and bool(torch.equal(a.pixel_values.cpu(), b.pixel_values.cpu())))


class HFEngine:
    """Batched sampling with a transformers model (colocated with the trainer: it samples from the same module)."""

    supports_kv_reuse = True  # RolloutRequest.keep_kv / continue_from

    def __init__(self, model: torch.nn.Module, pad_id: int, stop_ids: Sequence[int], max_batch_seqs: int = 64,
                 device: str | torch.device = "cpu", banned_ids: Sequence[int] = (), lean_decode: bool = True,
                 fused_decode: bool = True, max_model_len: int | None = None, decode_linear: str = "auto"):
        from mmevo.models.cpu_linear import resolve_cpu_linear

        self.model = model
        # False: every decode step runs the model's forward, not ``LeanDecodeStep`` (same logits; for comparisons)
        self.lean_decode = lean_decode
        # False: no ``FusedDecodeStep`` (float32 CPU Qwen2 models: fused projections, logits equal to float32
        # rounding, not bit for bit); the lean step (or the forward) instead
        self.fused_decode = fused_decode
        # the fused step's matmul kernel, ``model.cpu_linear`` resolved: "onednn" or "torch" (F.linear)
        self.decode_linear = resolve_cpu_linear(decode_linear)
        check_engine_token_ids("HFEngine", banned_ids, stop_ids)  # index_fill read a banned -1 as the last token
        self.banned_ids = torch.tensor(sorted(set(banned_ids)), dtype=torch.long)
        self.pad_id = pad_id
        self.stop_ids = torch.tensor(sorted(set(stop_ids)), dtype=torch.long)
        if isinstance(max_batch_seqs, bool) or not isinstance(max_batch_seqs, int) or max_batch_seqs < 1:
            raise ValueError(f"HFEngine max_batch_seqs must be an integer >= 1, got {max_batch_seqs!r}")
        self.max_batch_seqs = max_batch_seqs  # the most sequences decoded together (prompts × n, split if larger)
        self.device = torch.device(device)
        # the context length (prompt + prefix_ids + new tokens) a request may use, as vLLM's max_model_len: the
        # factory gives the same value to both engines; None: no limit of the engine's own (max_position_embeddings is
        # no bound for a model whose rope extrapolates past it: dynamic NTK, yarn)
        check_max_model_len("HFEngine", max_model_len)
        self.max_model_len = int(max_model_len) if max_model_len is not None else None
        self._context_source = FACTORY_CONTEXT
        self.stats = {"prefill_tokens": 0, "generated_tokens": 0, "prefill_s": 0.0}  # prefill_s: wall time in prefills

    # -- protocol -------------------------------------------------------------------------------------------------
    def sync_weights(self, model: torch.nn.Module) -> None:
        """Colocated: sampling uses the trained module itself, so only a different module needs copying.

        The source may be ZeRO-3 partitioned: its weights are gathered bucket by bucket (every rank must call this).
        """
        self._require_open()
        if unwrap(model) is unwrap(self.model):
            return
        from mmevo.models.weights import full_state_items

        target = unwrap(self.model).state_dict()  # tensors sharing storage with the engine's parameters
        written = set()  # storages written (tied weights share one)
        with torch.no_grad():
            for name, tensor in full_state_items(model):
                if name not in target:
                    raise KeyError(f"weight sync: the engine model has no tensor named {name!r}")
                target[name].copy_(tensor)
                written.add(target[name].data_ptr())
        missing = [n for n, t in target.items() if t.data_ptr() not in written]
        if missing:
            raise KeyError(f"weight sync: the source model lacks {sorted(missing)[:5]}")

    def sleep(self) -> None:
        pass

    def wake(self) -> None:
        pass

    def close(self) -> None:
        """Drop the engine's reference to the model (idempotent); the KV caches live only inside ``generate``.

        The model is the trainer's module (colocated), so its memory is freed once the caller drops it too.
        """
        self.model = None

    @torch.no_grad()
    def generate(self, requests: Sequence[RolloutRequest], params: SamplingParams) -> list[list[Completion]]:
        """``request.n`` completions per request, in order.

        Requests are decoded in chunks of at most ``max_batch_seqs`` rows (a request with more rows is split into
        pieces of at most that many, each prefilled on its own; requests that continue from kept KV caches and those
        that prefill go to separate chunks), one chunk after the other, all drawing from one generator seeded with
        ``params.seed``: each decode step takes one uniform per live row. So a seed reproduces the same samples for
        the same requests and ``max_batch_seqs``, but another ``max_batch_seqs`` (another chunking), other requests
        in the call, another order or other stop tokens give other samples (from the same distribution).

        A request with its own ``seed`` instead draws sample k's uniforms from a generator seeded ``seed + k``
        (a split request's pieces continue the count): its samples are the same whatever the other requests, their
        order and ``max_batch_seqs``, up to the floating-point differences of batched compute (padding, batch size).
        """
        self._require_open()
        self._refuse_hooked_zero3()
        check_request_batch(requests, params)
        check_request_prompts(requests)
        check_context("HF", requests, params, self.max_model_len, self._context_source)
        image_token_id = getattr(getattr(unwrap(self.model), "config", None), "image_token_id", None)
        check_image_placeholders(requests, image_token_id, pixels=True)
        self._check_vocab(requests)
        generator = None
        if params.seed is not None:
            generator = torch.Generator(device="cpu").manual_seed(int(params.seed))  # a numpy seed raised in torch
        results: list[list[Completion]] = [[] for _ in requests]
        # max_batch_seqs bounds the rows decoded together (their KV cache and logits): a request with more rows was
        # decoded whole, 8 rows at rollout.n=8 under max_batch_seqs=2, past the cap the memory plan counts on
        pieces, out_lists = [], []
        for req, out in zip(requests, results):
            first = 0  # the piece's first sample index in its request: a seeded piece starts at seed + first
            for n in split_rows(int(req.n), self.max_batch_seqs):
                seed = None if req.seed is None else int(req.seed) + first
                pieces.append(req if n == req.n else dataclasses.replace(req, n=n, seed=seed))
                out_lists.append(out)  # the pieces of a request append to its list, in order
                first += n
        reuse = [_reuses_kv(r) for r in pieces]
        # pack the pieces into chunks of at most max_batch_seqs decoded rows; a chunk either prefills or continues
        # from kept KV caches
        chunk: list[int] = []
        rows = 0
        for i, req in enumerate(pieces):
            if chunk and (rows + req.n > self.max_batch_seqs or reuse[i] != reuse[chunk[0]]):
                self._generate_chunk(pieces, chunk, params, generator, out_lists)
                chunk, rows = [], 0
            chunk.append(i)
            rows += req.n
        if chunk:
            self._generate_chunk(pieces, chunk, params, generator, out_lists)
        return results

    # -- internals ------------------------------------------------------------------------------------------------
    def _check_vocab(self, requests) -> None:
        """Token ids outside the embedding table failed inside the model (IndexError on CPU, a device-side assert
        that leaves CUDA unusable); a banned id past the logits failed at the first draw."""
        get = getattr(unwrap(self.model), "get_input_embeddings", None)
        V = getattr(get(), "num_embeddings", None) if get is not None else None
        if V is None:
            return
        if self.banned_ids.numel() and int(self.banned_ids.max()) >= V:
            raise ValueError(f"HFEngine banned_ids: token {int(self.banned_ids.max())} is outside the model's "
                             f"vocabulary of {V}")
        check_vocab(requests, V)

    def _refuse_hooked_zero3(self) -> None:
        """Under ZeRO-3 with several ranks the model's weights must be gathered (hooks off) while it samples: with
        DeepSpeed's hooks on every forward is a collective, and ranks that decode different numbers of steps, prefill
        different numbers of chunks or make different numbers of calls hang (NCCL) or abort (gloo). The trainer
        samples inside ``mmevo.grpo.distributed.zero3_full_weights``; a weight still partitioned here means a caller
        did not. One process (nothing to agree with) is not checked."""
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()
                and torch.distributed.get_world_size() > 1):
            return
        if any(getattr(getattr(p, "ds_status", None), "name", "") == "NOT_AVAILABLE"
               for p in unwrap(self.model).parameters()):
            raise RuntimeError("HFEngine: the model's weights are ZeRO-3 partitioned over several ranks; sample inside "
                               "mmevo.grpo.distributed.zero3_full_weights(ds_engine) (as GRPOTrainer does), else each "
                               "decode step is a collective and ranks decoding different lengths hang")

    def _require_open(self) -> None:
        if self.model is None:
            raise RuntimeError("this HFEngine is closed (close() was called); build a new engine to sample")

    def _generate_chunk(self, requests, idxs, params, generator, results) -> None:
        if not any(requests[i].n for i in idxs):  # only n=0 requests: nothing to sample, no prefill
            return
        model = unwrap(self.model)
        was_training = model.training
        model.eval()
        try:
            self._decode(model, [requests[i] for i in idxs], params, generator, [results[i] for i in idxs])
        finally:
            model.train(was_training)

    def _prefill(self, model, reqs: list[RolloutRequest]):
        """One forward over every request's prompt (+ prefix), left padded: (last logits [R, V], cache, attention
        mask [R, T], next position [R], whether positions are 3-D mrope)."""
        prompts: list[EncodedPrompt] = [r.image_override or r.prompt for r in reqs]
        prefixes = [list(r.prefix_ids) for r in reqs]
        batch = collate(model, prompts, prefixes, self.pad_id, self.device)
        self.stats["prefill_tokens"] += int(batch.attention_mask.sum())
        cache = DecodeCache()
        out = model(**batch.model_kwargs(), past_key_values=cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1], cache, batch.attention_mask, batch.next_position, batch.position_ids.dim() == 3

    def _continue_from_kv(self, model, reqs: list[RolloutRequest]):
        """``_prefill`` without the prefill: each request's cache is its source completion's kept KV cut to
        (prompt + prefix_ids)[:-1] (left padded to a common length), and only the last of those tokens runs through
        the model. Exact: the kept keys / values are those a prefill of the same tokens and image computes."""
        rows = []
        for r in reqs:
            src, a = r.continue_from, len(r.prefix_ids)
            full = src.full_ids
            if list(r.prefix_ids) != full[:a]:
                raise ValueError("continue_from: prefix_ids is not a prefix of that completion's tokens")
            n_kv = src.kv["layers"][0][0].shape[1]  # prompt + full[:-1]
            if n_kv - (len(full) - 1) != len(r.prompt.input_ids):
                raise ValueError(f"continue_from: that completion's kept KV cache covers a {n_kv - len(full) + 1}-"
                                 f"token prompt, this request's prompt has {len(r.prompt.input_ids)} tokens")
            if "prompt" in src.kv and not _same_prompt(src.kv["prompt"], r.prompt):
                # another prompt of the same length (or the same tokens with other pixels) was continued from the
                # kept keys / values of the source's prompt
                raise ValueError("continue_from: that completion was sampled for another prompt (other tokens or "
                                 "pixels) than this request's")
            keep = n_kv - (len(full) - 1) + (a - 1)  # (prompt + prefix)[:-1]
            last = full[a - 1] if a else r.prompt.input_ids[-1]  # the token that runs: (prompt + prefix)[-1]
            rows.append((src.kv, keep, last, src.kv["next_position"] - len(full) + a))
        R, width = len(rows), max(k for _, k, _, _ in rows)
        attn = torch.zeros((R, width + 1), dtype=torch.long, device=self.device)
        attn[:, -1] = 1
        for i, (_, keep, _, _) in enumerate(rows):
            attn[i, width - keep: width] = 1
        cache = DecodeCache()
        for li in range(len(rows[0][0]["layers"])):
            k0 = rows[0][0]["layers"][li][0]
            keys = k0.new_zeros((R, k0.shape[0], width, k0.shape[-1]))
            values = torch.zeros_like(keys)
            for i, (kv, keep, _, _) in enumerate(rows):
                k, v = kv["layers"][li]
                keys[i, :, width - keep:] = k[:, :keep]
                values[i, :, width - keep:] = v[:, :keep]
            cache.update(keys, values, li)
        self.stats["kv_reused_tokens"] = self.stats.get("kv_reused_tokens", 0) + sum(k for _, k, _, _ in rows)
        self.stats["prefill_tokens"] += R
        tok = torch.tensor([t for _, _, t, _ in rows], device=self.device)
        pos = torch.tensor([p for _, _, _, p in rows], device=self.device)
        mrope = bool(rows[0][0]["mrope"])
        out = model(input_ids=tok[:, None], attention_mask=attn,
                    position_ids=pos[None, :, None].expand(3, -1, -1) if mrope else pos[:, None],
                    past_key_values=cache, use_cache=True)
        return out.logits[:, -1], cache, attn, pos + 1, mrope

    def _decode(self, model, reqs: list[RolloutRequest], params: SamplingParams, generator, out_lists) -> None:
        t0 = time.perf_counter()
        prefill = self._continue_from_kv if _reuses_kv(reqs[0]) else self._prefill
        last_logits, cache, attn, next_pos, vl_positions = prefill(model, reqs)
        self.stats["prefill_s"] = self.stats.get("prefill_s", 0.0) + time.perf_counter() - t0
        # share each prefill among its n samples instead of re-prefilling: with mmevo's attention the prefix keys stay
        # once per request (SharedPrefixCache); another attention function gets the cache's rows repeated
        reps = torch.tensor([int(r.n) for r in reqs], device=self.device)  # int: numpy's uint64 fails in torch.tensor
        row_of = torch.repeat_interleave(torch.arange(len(reqs), device=self.device), reps)  # [N] request index
        shared = supports_packing(model)
        lean = None
        if shared:
            cache = SharedPrefixCache(cache, attn, row_of)
            if self.lean_decode:
                lean = LeanDecodeStep.build(model)
                if self.fused_decode:
                    lean = FusedDecodeStep.from_lean(lean, rows=len(row_of), kernel=self.decode_linear) or lean
        elif bool((reps != 1).any()):
            cache.batch_select_indices(row_of)
        logits = last_logits[row_of]
        attn = attn[row_of]
        next_pos = next_pos[row_of]
        N = row_of.numel()
        tokens: list[list[int]] = [[] for _ in range(N)]
        logps: list[list[float]] = [[] for _ in range(N)]
        finish = ["length"] * N
        req_of = row_of.tolist()
        keep_kv = [bool(reqs[i].keep_kv) for i in req_of]
        any_keep_kv = any(keep_kv)
        kvs: list[dict | None] = [None] * N
        active = torch.arange(N, device=self.device)  # original row index of each live row
        stop_ids = self.stop_ids.to(self.device)
        banned = self.banned_ids.to(self.device)
        # per-row token budget: a request's own max_tokens (e.g. what a retrace prefix leaves) or the call's
        budget = torch.tensor([int(params.max_tokens if r.max_tokens is None else r.max_tokens) for r in reqs],
                              device=self.device)[row_of]
        live = (budget > 0).nonzero().flatten()
        if live.numel() < N:  # rows with no budget produce an empty completion
            if live.numel() == 0:
                self._emit(reqs, row_of, tokens, logps, finish, out_lists)
                return
            cache.batch_select_indices(live)
            logits, attn, next_pos, active, budget = logits[live], attn[live], next_pos[live], active[live], budget[live]
        row_u = row_uniform_table(reqs, int(budget.max()))  # None: every row draws from the call's generator
        assert row_u is None or row_u.shape[0] == N
        for step in range(int(budget.max())):
            act_l = active.tolist()
            tok, lp = sample_next(logits, params, generator, banned, None if row_u is None else row_u[act_l, step])
            tok_l, lp_l = tok.tolist(), lp.tolist()
            for j, r in enumerate(act_l):
                tokens[r].append(tok_l[j])
                logps[r].append(lp_l[j])
            done = torch.isin(tok, stop_ids)
            for j in done.nonzero().flatten().tolist():
                finish[act_l[j]] = "stop"
            self.stats["generated_tokens"] += len(act_l)
            keep = ((~done) & (budget > step + 1)).nonzero().flatten()
            if any_keep_kv:  # rows leaving the batch take their keys / values along (prompt + tokens but the last)
                staying = set(keep.tolist())
                for j, r in enumerate(act_l):
                    if keep_kv[r] and j not in staying:
                        if shared:
                            layers = [cache.row_kv(li, j) for li in range(len(cache.prefix_keys))]
                        else:
                            real = attn[j].bool()
                            layers = [(lay.keys[j][:, real], lay.values[j][:, real]) for lay in cache.layers]
                        kvs[r] = {"layers": layers, "next_position": int(next_pos[j]), "mrope": vl_positions,
                                  "image_override": reqs[req_of[r]].image_override, "prompt": reqs[req_of[r]].prompt}
            if keep.numel() == 0:
                break
            if keep.numel() < active.numel():  # drop finished rows from every per-row state
                cache.batch_select_indices(keep)
                tok, attn, next_pos, active, budget = tok[keep], attn[keep], next_pos[keep], active[keep], budget[keep]
            if lean is not None:  # the same modules and logits without the model-level wrappers
                logits = lean(tok, next_pos, cache)
            else:
                pos = next_pos[:, None]
                if vl_positions:
                    pos = pos[None].expand(3, -1, -1)
                if shared:  # the rows' own tokens have no padding and the prefix mask is in the cache
                    mask = {SHARED_PREFIX_KWARG: cache}
                else:
                    attn = torch.cat([attn, attn.new_ones(attn.shape[0], 1)], dim=1)
                    mask = {"attention_mask": attn}
                out = model(input_ids=tok[:, None], position_ids=pos, past_key_values=cache, use_cache=True, **mask)
                logits = out.logits[:, -1]
            next_pos = next_pos + 1
        self._emit(reqs, row_of, tokens, logps, finish, out_lists, kvs)

    @staticmethod
    def _emit(reqs, row_of, tokens, logps, finish, out_lists, kvs=None) -> None:
        row_list = row_of.tolist()
        for r in range(len(row_list)):
            out_lists[row_list[r]].append(
                Completion(tokens[r], logps[r], finish[r], prefix_ids=[int(t) for t in reqs[row_list[r]].prefix_ids],
                           kv=kvs[r] if kvs else None))
