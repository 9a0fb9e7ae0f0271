"""The rollout-engine protocol: what every engine (HF transformers, vLLM) takes and returns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np
import torch

from mmevo.models.inputs import EncodedPrompt, needs_rgb_conversion
from mmevo.validation import is_integer_number, is_real_number


@dataclass
class SamplingParams:
    """How to sample. temperature 0 means greedy."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 256  # new tokens per completion (after any prefix)
    seed: int | None = None  # seeds the sampler: the same samples for the same requests and engine batching
    # (requests with their own RolloutRequest.seed draw from their own streams instead)


def check_request_batch(requests, params: SamplingParams) -> None:
    """Refuse what an engine would silently read as something else (NaN temperature as 1, a top_p above 1 or NaN as
    1, a negative temperature as greedy, a negative n or budget as nothing to sample); transformers and vLLM refuse
    such values too. Every engine checks its ``generate`` call with this, so they agree on what is valid."""
    if not isinstance(requests, Sequence):  # a generator was used up by these checks: the engine then sampled none
        raise ValueError(f"requests must be a sequence (list / tuple) of RolloutRequest, got {type(requests).__name__}")
    for i, r in enumerate(requests):  # a bare EncodedPrompt failed on a missing attribute deep in the engine
        if not isinstance(r, RolloutRequest):
            raise ValueError(f"RolloutRequest {i}: expected a RolloutRequest, got {type(r).__name__}")
    for name, v in (("temperature", params.temperature), ("top_p", params.top_p)):
        if not is_real_number(v):  # "1" / None failed deep in the sampler
            raise ValueError(f"SamplingParams.{name} must be a number, got {v!r}")
    # counts must be integers: a NaN budget sampled nothing and 2.5 sampled 2 tokens (silently), a float n crashed
    # inside torch, a float / out-of-range seed inside torch.manual_seed
    _check_int("SamplingParams.max_tokens", params.max_tokens)
    if params.seed is not None:
        _check_int("SamplingParams.seed", params.seed)
        if not -(2**63) <= params.seed < 2**64:  # what torch.Generator.manual_seed takes
            raise ValueError(f"SamplingParams.seed must be in [-2**63, 2**64), got {params.seed}")
    for i, r in enumerate(requests):
        _check_int(f"RolloutRequest {i}: RolloutRequest.n", r.n)
        if r.seed is not None:
            check_request_seed(f"RolloutRequest {i}: RolloutRequest.seed", r.seed, r.n)
        if r.max_tokens is not None:
            _check_int(f"RolloutRequest {i}: RolloutRequest.max_tokens", r.max_tokens)
        check_token_ids(f"RolloutRequest {i}: prefix_ids", r.prefix_ids)
        ov = r.image_override
        if (isinstance(ov, EncodedPrompt) and isinstance(r.prompt, EncodedPrompt)
                and list(ov.input_ids) != list(r.prompt.input_ids)):
            # an override only swaps pixels: other tokens (another image size / prompt) would be sampled as a
            # continuation of another prompt, and a kept KV cache would no longer match the request's prompt
            raise ValueError(f"RolloutRequest {i}: image_override has other token ids than prompt (an override "
                             "must keep the prompt and its image sizes, only the pixels change)")
    t, p = float(params.temperature), float(params.top_p)
    if not (math.isfinite(t) and t >= 0):
        raise ValueError(f"SamplingParams.temperature must be finite and >= 0 (0 = greedy), got {params.temperature}")
    if not 0 <= p <= 1:
        raise ValueError(f"SamplingParams.top_p must be in [0, 1], got {params.top_p}")
    if t > 0 and p <= 0:  # an empty nucleus: transformers and vLLM refuse it; the HF engine took the argmax (greedy)
        raise ValueError("SamplingParams.top_p = 0 with temperature > 0 keeps no token: top_p must be in (0, 1] when "
                         "sampling; use temperature 0 for greedy decoding")
    if params.max_tokens < 0:
        raise ValueError(f"SamplingParams.max_tokens must be >= 0, got {params.max_tokens}")
    bad = [r.n for r in requests if r.n < 0]
    if bad:
        raise ValueError(f"RolloutRequest.n must be >= 0, got {bad[0]}")
    bad = [r.max_tokens for r in requests if r.max_tokens is not None and r.max_tokens < 0]
    if bad:
        raise ValueError(f"RolloutRequest.max_tokens must be None or >= 0, got {bad[0]}")
    # the first token is predicted by the last context token: an empty context would sample from a padding slot's
    # logits (HF; alone in its chunk it crashed inside the model), or be refused by vLLM without naming the request
    bad = [i for i, r in enumerate(requests)
           if isinstance(r.prompt, EncodedPrompt) and not len(r.prompt.input_ids) + len(r.prefix_ids)]
    if bad:
        raise ValueError(f"RolloutRequest {bad[0]}: prompt + prefix_ids has no tokens (empty prompt.input_ids)")


# what an engine's message names as the source of an explicit max_model_len
FACTORY_CONTEXT = ("max_model_len; rollout's build_engine sets data.max_prompt_length + the larger of "
                   "rollout.max_tokens and trainer.eval_max_tokens")
MODEL_CONTEXT = "the length vLLM derived from the model (no max_model_len given)"


def check_max_model_len(engine: str, value) -> None:
    """An engine's ``max_model_len`` argument: None (the model's own) or an integer >= 1."""
    if value is not None and not (is_integer_number(value) and value >= 1):
        raise ValueError(f"{engine} max_model_len must be None or an integer >= 1, got {value!r}")


def check_context(engine: str, requests, params: SamplingParams, limit: int | None, source: str) -> None:
    """Refuse the call when a request's prompt + prefix_ids + new-token budget is above the engine's context length
    ``limit`` (``source``: the setting it comes from), naming the first such request. vLLM itself refuses a prompt
    longer than its ``max_model_len`` but silently stops a completion at it (fewer than max_tokens new tokens,
    finish_reason "length"); both engines refuse either before sampling anything. A request with nothing to sample
    (n = 0 or budget 0) is not checked: both engines return its empty completions."""
    if limit is None:
        return
    for i, r in enumerate(requests):
        budget = int(params.max_tokens if r.max_tokens is None else r.max_tokens)
        if r.n <= 0 or budget <= 0:
            continue
        used = len(r.prompt.input_ids) + len(r.prefix_ids)  # image runs expanded (an override has the same ids)
        if used + budget > limit:
            raise ValueError(f"RolloutRequest {i}: prompt + prefix_ids ({used} tokens) + max_tokens ({budget}) is "
                             f"above the {engine} engine's context length ({limit}, {source})")


def check_request_prompts(requests) -> None:
    """Each request's prompt (and image_override, if any) is an EncodedPrompt: None failed with an AttributeError
    inside either engine. Engines call it after ``check_request_batch`` (which checks the counts and parameters
    alone)."""
    for i, r in enumerate(requests):
        for name, enc in (("prompt", r.prompt), ("image_override", r.image_override)):
            if not (isinstance(enc, EncodedPrompt) or (name == "image_override" and enc is None)):
                raise ValueError(f"RolloutRequest {i}: {name} must be an EncodedPrompt (see "
                                 f"mmevo.models.inputs.encode_prompt), got {type(enc).__name__}")


def check_vocab(requests, vocab_size: int | None) -> None:
    """Refuse a request whose prompt or prefix_ids holds a token id outside [0, vocab_size), naming the request and
    the field: the HF engine failed inside the model (IndexError on CPU, a device-side assert on CUDA), vLLM with a
    message naming neither. None (size unknown): nothing is checked."""
    if vocab_size is None:
        return
    for i, r in enumerate(requests):
        for name, ids in (("prompt.input_ids", r.prompt.input_ids), ("prefix_ids", r.prefix_ids)):
            if not len(ids) or 0 <= min(ids) and max(ids) < vocab_size:  # C-level scans: a hot path for long prompts
                continue
            bad = [t for t in ids if not 0 <= t < vocab_size]
            if bad:
                raise ValueError(f"RolloutRequest {i}: {name} holds token {bad[0]!r}, outside the model's "
                                 f"vocabulary of {vocab_size}")


def image_placeholder_count(input_ids: Sequence[int], image_token_id: int | None) -> int:
    """How many images ``input_ids`` has slots for: runs of ``image_token_id`` (a prompt's placeholders are expanded
    to one run per image); 0 for a model without an image token."""
    if image_token_id is None:
        return 0
    runs, inside = 0, False
    for t in input_ids:
        is_slot = t == image_token_id
        runs += is_slot and not inside
        inside = is_slot
    return runs


def check_image_placeholders(requests, image_token_id: int | None, pixels: bool = False) -> None:
    """Refuse a request whose prompt (or image_override) holds another number of images than of image placeholders
    in its ``input_ids`` (``encode_prompt`` keeps the two in step; a hand-built prompt may not): vLLM failed with a
    bare AssertionError and the HF engine sampled on, ignoring the images or reading the placeholders as text.
    ``pixels``: the engine reads ``pixel_values`` / ``image_grid_thw`` (HF), so they must hold one grid per image.
    A text prompt without images and placeholders passes; placeholders in prefix_ids are not counted here. An image
    that is not plain RGB (``needs_rgb_conversion``) is refused too."""
    for i, r in enumerate(requests):
        for name, enc in (("prompt", r.prompt), ("image_override", r.image_override)):
            if enc is None:
                continue
            n_images = len(enc.images or ())
            n_slots = image_placeholder_count(enc.input_ids, image_token_id)
            if n_images != n_slots:
                model = "" if image_token_id is not None else " (this model has no image token)"
                raise ValueError(f"RolloutRequest {i}: {name} holds {n_images} image(s) but {n_slots} image "
                                 f"placeholder(s) in its input_ids{model}; encode prompts with "
                                 "mmevo.models.inputs.encode_prompt")
            for k, im in enumerate(enc.images or ()):
                # the HF engine reads the prompt's pixel values, vLLM the image itself, through its own conversion
                why = needs_rgb_conversion(im)
                if why is not None:
                    raise ValueError(f"RolloutRequest {i}: {name} image {k} is not a plain RGB image ({why}): the "
                                     "trainer's processor and vLLM would read it differently; encode prompts with "
                                     "mmevo.models.inputs.encode_prompt (which converts it)")
            if pixels:
                grids = enc.image_grid_thw
                n_grids = 0 if enc.pixel_values is None or grids is None else int(grids.shape[0])
                if n_grids != n_images:
                    raise ValueError(f"RolloutRequest {i}: {name} holds {n_images} image(s) but pixel values for "
                                     f"{n_grids} (pixel_values / image_grid_thw); encode prompts with "
                                     "mmevo.models.inputs.encode_prompt")


# a request's sample k draws from the stream seeded seed + k: the last must stay below 2**63 (torch's and vLLM's
# generators take it; vLLM reads a seed of -1 as none, so negative seeds are refused rather than run unseeded)
REQUEST_SEED_LIMIT = 2**63
_ITEM_SEED_BITS = 62  # item_seed's range: + a request's sample count stays below REQUEST_SEED_LIMIT


def check_request_seed(name: str, seed, n) -> None:
    """A request's own seed: an integer with ``seed + n - 1`` in [0, 2**63) (its samples take seed, seed + 1, ...)."""
    _check_int(name, seed)
    if not 0 <= int(seed) or int(seed) + max(int(n), 1) - 1 >= REQUEST_SEED_LIMIT:  # int: numpy's would wrap
        raise ValueError(f"{name} must be in [0, 2**63 - n] for its n = {n} samples (sample k is seeded "
                         f"seed + k), got {seed}")


def item_seed(seed: int, index: int) -> int:
    """The request seed of the item at global ``index`` of an evaluation seeded ``seed``: a 62-bit hash of the pair,
    so the item samples alike whatever else is in its call, batch or rank, and the items' ranges seed, seed + 1, ...
    (one per sample) do not meet as consecutive seeds' would."""
    _check_int("item_seed seed", seed)
    _check_int("item_seed index", index)
    if index < 0:
        raise ValueError(f"item_seed index must be >= 0, got {index}")
    state = np.random.SeedSequence([int(seed) % 2**64, int(index)]).generate_state(1, dtype=np.uint64)[0]
    return int(state) >> (64 - _ITEM_SEED_BITS)


def item_seeds(seed: int, indices: Sequence[int], temperature: float) -> list[int | None]:
    """The request seeds of a sampled evaluation's items at ``indices`` (``item_seed``); None for each when greedy
    (``temperature`` <= 0: no randomness, the requests are left as they were)."""
    if not temperature > 0:
        return [None] * len(indices)
    return [item_seed(seed, i) for i in indices]


def _check_int(name: str, v) -> None:
    if not is_integer_number(v):
        raise ValueError(f"{name} must be an integer, got {v!r}")


def split_rows(n: int, cap: int) -> list[int]:
    """Row counts of the pieces a request of ``n`` samples is decoded in: as many ``cap`` as fit, then the rest
    (``[n]`` when ``n <= cap``, also for ``n = 0``)."""
    full, rest = divmod(n, cap)
    return [cap] * full + ([rest] if rest or not full else [])


def check_engine_token_ids(engine: str, banned_ids, stop_ids) -> None:
    """An engine's banned / stop ids: integers (``check_token_ids``) and >= 0 (a banned -1 was read as the last token
    of the vocabulary, silently)."""
    for name, ids in (("banned_ids", banned_ids), ("stop_ids", stop_ids)):
        check_token_ids(f"{engine} {name}", ids)
        bad = [t for t in ids if not 0 <= t]
        if bad:
            raise ValueError(f"{engine} {name} must be token ids >= 0, got {bad[0]!r}")


def check_token_ids(name: str, ids) -> None:
    """Token ids must be integers (Python / numpy ints, integer 0-d tensors): a float 5.5 was read as token 5 and
    True as token 1 (torch.tensor / int() truncate), silently."""
    if ids is None or isinstance(ids, (str, bytes)):  # None failed in len() inside the engine
        raise ValueError(f"{name} must be a sequence of integer token ids, got {ids!r}")
    for t in ids:
        if type(t) is int:  # the usual case, first: CSRS checks hundreds of long prefixes per call
            continue
        if isinstance(t, torch.Tensor):
            ok = t.dim() == 0 and not (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool)
        else:
            ok = is_integer_number(t)
        if not ok:
            raise ValueError(f"{name} must be integer token ids, got {t!r}")


@dataclass
class RolloutRequest:
    """Sample ``n`` completions of ``prompt``, each continuing ``prefix_ids`` in the same assistant turn."""

    prompt: EncodedPrompt
    n: int = 1
    prefix_ids: Sequence[int] = ()
    image_override: EncodedPrompt | None = None  # same prompt tokens with other pixels (CSRS perturbed image)
    max_tokens: int | None = None  # this request's new-token budget (None: the SamplingParams value)
    keep_kv: bool = False  # engines with supports_kv_reuse: attach each completion's KV cache (Completion.kv)
    # engines with supports_kv_reuse: continue from this completion's kept KV cache instead of prefilling prompt +
    # prefix_ids again; prefix_ids must be a prefix of its full_ids and the image unchanged (no override)
    continue_from: Completion | None = None
    # this request's own sampling seed: sample k draws from a stream seeded ``seed + k`` (vLLM's convention), so its
    # samples do not depend on the other requests of the call, their order or the engine's batching (up to the
    # floating-point differences of batched compute); None: the call's SamplingParams.seed stream, shared by the rows
    seed: int | None = None


@dataclass
class Completion:
    """One sampled continuation. ``token_ids`` / ``logprobs`` cover only the newly generated tokens."""

    token_ids: list[int]
    logprobs: list[float]  # log p of each sampled token under the temperature-scaled policy (temperature 0: 1)
    finish_reason: str  # "stop" (a stop token was sampled, and is included) or "length"
    prefix_ids: list[int] = field(default_factory=list)  # the request's prefix_ids, copied (CSRS refuses others)
    # with RolloutRequest.keep_kv: {"layers": [(K [kv_heads, T, D], V)], "next_position": int, "mrope": bool,
    # "image_override": the request's override prompt or None, "prompt": the request's prompt}, the keys / values of
    # prompt + full_ids[:-1] (T positions, no padding, computed with the override image if any) and the position id
    # full_ids[-1] would take
    kv: dict | None = field(default=None, repr=False, compare=False)

    @property
    def full_ids(self) -> list[int]:
        """Prefix + new tokens: the whole response in its assistant turn."""
        return list(self.prefix_ids) + list(self.token_ids)


class RolloutEngine(Protocol):
    """Produces samples; knows nothing about who drives it."""

    def generate(self, requests: Sequence[RolloutRequest], params: SamplingParams) -> list[list[Completion]]:
        """One list of ``request.n`` completions per request, in order."""

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Make the engine sample from ``model``'s current weights."""

    def sleep(self) -> None:
        """Free accelerator memory between rollout phases (no-op where unsupported)."""

    def wake(self) -> None:
        """Undo ``sleep``."""

    def close(self) -> None:
        """Release what the engine holds (its model reference, caches, accelerator memory) for good.

        Idempotent. Afterwards ``generate`` and ``sync_weights`` raise RuntimeError; ``sleep`` / ``wake`` do
        nothing. A loop that builds one engine after another closes each before building the next.
        """
