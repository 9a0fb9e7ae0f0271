"""Rollout engine on plain transformers models: our own batched decode loop over a KV cache.

Why not ``model.generate``: we need (1) one prefill per distinct prompt(+prefix) shared by its n samples — HF's
``num_return_sequences`` re-prefills every copy — (2) explicit mrope positions when continuing a retrace prefix,
(3) per-token log-probs, and (4) finished rows dropped from the batch as they stop.
"""

from __future__ import annotations

import time
from typing import Sequence

import torch

from mmevo.models.inputs import EncodedPrompt, collate, unwrap
from mmevo.rollout.kv_cache import DecodeCache
from mmevo.rollout.base import Completion, RolloutRequest, SamplingParams


def sample_next(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None,
                banned_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick the next token per row. logits [B, V] -> (tokens [B], logprobs [B] under softmax(logits / T)).

    ``banned_ids`` (vision placeholders) are never sampled: one in a response would desynchronise image features and
    placeholder tokens when the sequence is scored. The returned log-probs are those of the unmodified policy (what
    the trainer computes), not of the renormalised sampling distribution.
    """
    logits = logits.float()
    if not torch.isfinite(logits).all():
        raise FloatingPointError("the policy produced non-finite logits (NaN/inf weights?)")
    scaled = logits / params.temperature if params.temperature > 0 else logits
    logp = torch.log_softmax(scaled, -1)
    if banned_ids is not None and banned_ids.numel():
        scaled = scaled.index_fill(-1, banned_ids, float("-inf"))
    if params.temperature <= 0:
        tok = scaled.argmax(-1)
        return tok, logp.gather(-1, tok[:, None]).squeeze(-1)
    probs = torch.softmax(scaled, -1)
    if params.top_p < 1.0:
        sorted_p, idx = probs.sort(-1, descending=True)
        keep = sorted_p.cumsum(-1) - sorted_p < params.top_p  # always keeps the most likely token
        probs = torch.zeros_like(probs).scatter(-1, idx, sorted_p * keep)
    tok = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)


class HFEngine:
    """Batched sampling with a transformers model (colocated with the trainer: it samples from the same module)."""

    def __init__(self, model: torch.nn.Module, pad_id: int, stop_ids: Sequence[int], max_batch_seqs: int = 64,
                 device: str | torch.device = "cpu", banned_ids: Sequence[int] = ()):
        self.model = model
        self.banned_ids = torch.tensor(sorted(set(banned_ids)), dtype=torch.long)
        self.pad_id = pad_id
        self.stop_ids = torch.tensor(sorted(set(stop_ids)), dtype=torch.long)
        self.max_batch_seqs = max_batch_seqs  # sequences decoded together (prompts × n)
        self.device = torch.device(device)
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
        self._require_open()
        generator = None
        if params.seed is not None:
            generator = torch.Generator(device="cpu").manual_seed(params.seed)
        results: list[list[Completion]] = [[] for _ in requests]
        # pack requests into chunks of at most max_batch_seqs decoded rows
        chunk: list[int] = []
        rows = 0
        for i, req in enumerate(requests):
            if chunk and rows + req.n > self.max_batch_seqs:
                self._generate_chunk(requests, chunk, params, generator, results)
                chunk, rows = [], 0
            chunk.append(i)
            rows += req.n
        if chunk:
            self._generate_chunk(requests, chunk, params, generator, results)
        return results

    # -- internals ------------------------------------------------------------------------------------------------
    def _require_open(self) -> None:
        if self.model is None:
            raise RuntimeError("this HFEngine is closed (close() was called); build a new engine to sample")

    def _generate_chunk(self, requests, idxs, params, generator, results) -> None:
        model = unwrap(self.model)
        was_training = model.training
        model.eval()
        try:
            self._decode(model, [requests[i] for i in idxs], params, generator, [results[i] for i in idxs])
        finally:
            model.train(was_training)

    def _decode(self, model, reqs: list[RolloutRequest], params: SamplingParams, generator, out_lists) -> None:
        prompts: list[EncodedPrompt] = [r.image_override or r.prompt for r in reqs]
        prefixes = [list(r.prefix_ids) for r in reqs]
        batch = collate(model, prompts, prefixes, self.pad_id, self.device)
        self.stats["prefill_tokens"] += int(batch.attention_mask.sum())
        cache = DecodeCache()
        t0 = time.perf_counter()
        out = model(**batch.model_kwargs(), past_key_values=cache, use_cache=True, logits_to_keep=1)
        self.stats["prefill_s"] = self.stats.get("prefill_s", 0.0) + time.perf_counter() - t0
        # share each prefill among its n samples: repeat rows of the cache instead of re-prefilling
        reps = torch.tensor([r.n for r in reqs], device=self.device)
        row_of = torch.repeat_interleave(torch.arange(len(reqs), device=self.device), reps)  # [N] request index
        if bool((reps != 1).any()):
            cache.batch_select_indices(row_of)
        logits = out.logits[:, -1][row_of]
        attn = batch.attention_mask[row_of]
        next_pos = batch.next_position[row_of]
        vl_positions = batch.position_ids.dim() == 3
        N = row_of.numel()
        tokens: list[list[int]] = [[] for _ in range(N)]
        logps: list[list[float]] = [[] for _ in range(N)]
        finish = ["length"] * N
        active = torch.arange(N, device=self.device)  # original row index of each live row
        stop_ids = self.stop_ids.to(self.device)
        banned = self.banned_ids.to(self.device)
        # per-row token budget: a request's own max_tokens (e.g. what a retrace prefix leaves) or the call's
        budget = torch.tensor([params.max_tokens if r.max_tokens is None else r.max_tokens for r in reqs],
                              device=self.device)[row_of]
        live = (budget > 0).nonzero().flatten()
        if live.numel() < N:  # rows with no budget produce an empty completion
            if live.numel() == 0:
                self._emit(reqs, row_of, tokens, logps, finish, out_lists)
                return
            cache.batch_select_indices(live)
            logits, attn, next_pos, active, budget = logits[live], attn[live], next_pos[live], active[live], budget[live]
        for step in range(int(budget.max())):
            tok, lp = sample_next(logits, params, generator, banned)
            tok_l, lp_l, act_l = tok.tolist(), lp.tolist(), active.tolist()
            for j, r in enumerate(act_l):
                tokens[r].append(tok_l[j])
                logps[r].append(lp_l[j])
            done = torch.isin(tok, stop_ids)
            for j in done.nonzero().flatten().tolist():
                finish[act_l[j]] = "stop"
            self.stats["generated_tokens"] += len(act_l)
            keep = ((~done) & (budget > step + 1)).nonzero().flatten()
            if keep.numel() == 0:
                break
            if keep.numel() < active.numel():  # drop finished rows from every per-row state
                cache.batch_select_indices(keep)
                tok, attn, next_pos, active, budget = tok[keep], attn[keep], next_pos[keep], active[keep], budget[keep]
            attn = torch.cat([attn, attn.new_ones(attn.shape[0], 1)], dim=1)
            pos = next_pos[:, None]
            if vl_positions:
                pos = pos[None].expand(3, -1, -1)
            out = model(input_ids=tok[:, None], attention_mask=attn, position_ids=pos, past_key_values=cache,
                        use_cache=True)
            logits = out.logits[:, -1]
            next_pos = next_pos + 1
        self._emit(reqs, row_of, tokens, logps, finish, out_lists)

    @staticmethod
    def _emit(reqs, row_of, tokens, logps, finish, out_lists) -> None:
        row_list = row_of.tolist()
        for r in range(len(row_list)):
            out_lists[row_list[r]].append(
                Completion(tokens[r], logps[r], finish[r], prefix_ids=list(reqs[row_list[r]].prefix_ids)))
