"""One vLLM engine per process, lent in turn to the roles of a self-play loop.

vLLM's sleep mode serves one engine per process (vLLM 0.33: a process-wide CuMem allocator that refuses a second
engine's weights, and whose sleep / wake act on every allocation in it), while MM-Zero, Prism and HONEST sample from
two or three models in one phase (the trained role and frozen ones; HONEST's solver and generator both train). Inside
``shared_vllm(context_len)`` every ``build_engine`` with ``rollout.engine=vllm`` returns a ``RoleEngine``: a view of
one ``VLLMEngine`` that holds one role's weights at a time. A view whose weights are not the loaded ones is
``weights_stale``: a trainer then pushes its module in (``sync_weights``), as it does after a level-2 sleep; a view
made from a saved model (a frozen role) loads that model's files itself when it samples (``load_checkpoint``).

The cost is a weight load per change of role (each vLLM worker reads the saved model's memory-mapped files itself,
so the page cache, not a copy per rank or per worker, holds them); the gain is one KV cache and one set of weights in
GPU memory instead of one per role.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Iterator, Sequence

from mmevo.rollout.base import Completion, RolloutRequest, SamplingParams

# config.json keys that do not change the engine's model (its architecture and shapes are what every role must share)
_CONFIG_NOISE = {"_name_or_path", "transformers_version", "torch_dtype", "dtype", "use_cache"}

_ACTIVE: "SharedVLLM | None" = None


@contextlib.contextmanager
def shared_vllm(context_len: int) -> Iterator["SharedVLLM"]:
    """Within: vLLM engines built by ``mmevo.rollout.factory.build_engine`` are views of one engine, started by the
    first and closed on exit. ``context_len``: the longest prompt + response any role will ask of it (vLLM's
    ``max_model_len`` is fixed at start)."""
    global _ACTIVE
    if _ACTIVE is not None:
        raise RuntimeError("shared_vllm() is already active in this process (one shared engine per process)")
    _ACTIVE = SharedVLLM(int(context_len))
    try:
        yield _ACTIVE
    finally:
        shared, _ACTIVE = _ACTIVE, None
        shared.close()


def for_roles(role_configs: Sequence) -> contextlib.AbstractContextManager:
    """``shared_vllm`` sized for the roles of a loop that sample with vLLM (the longest context any asks for), or a
    no-op where none does."""
    from mmevo.rollout.factory import max_model_len

    lens = [max_model_len(c) for c in role_configs if c.rollout.engine == "vllm"]
    return shared_vllm(max(lens)) if lens else contextlib.nullcontext()


def active() -> "SharedVLLM | None":
    """The shared engine of the enclosing ``shared_vllm`` block, if any."""
    return _ACTIVE


def engine_settings(cfg) -> dict:
    """The settings fixed when a vLLM engine starts: every role sharing it must have the same ones."""
    r = cfg.rollout
    return {"model.dtype": cfg.model.dtype, "rollout.gpu_memory_utilization": r.gpu_memory_utilization,
            "rollout.tensor_parallel_size": r.tensor_parallel_size, "rollout.vllm_kv_cache_gb": r.vllm_kv_cache_gb,
            "rollout.enable_sleep_mode": r.enable_sleep_mode, "rollout.sleep_level": r.sleep_level,
            "rollout.enforce_eager": r.enforce_eager, "rollout.max_images_per_prompt": r.max_images_per_prompt,
            "data.max_pixels": cfg.data.max_pixels}


def model_shape(model_path) -> dict | None:
    """A saved model's config.json without the keys that do not shape the model; None for a hub id."""
    p = Path(model_path) / "config.json"
    if not p.exists():
        return None
    return {k: v for k, v in json.loads(p.read_text()).items() if k not in _CONFIG_NOISE}


class SharedVLLM:
    """The process's one ``VLLMEngine`` and which view's weights it holds."""

    def __init__(self, context_len: int):
        self.context_len = context_len
        self.engine = None  # the VLLMEngine, started by the first view
        self.settings: dict | None = None
        self.shape: dict | None = None
        self.model_path = None
        self.owner: "RoleEngine | None" = None  # the view whose weights are loaded
        self.role_switches = 0  # times the loaded weights became another view's (each a full weight load)

    def view(self, cfg, policy, build) -> "RoleEngine":
        """A view for a role with config ``cfg`` whose weights start as those saved at ``policy.path``; ``build(
        context_len)`` starts the engine if none runs yet."""
        from mmevo.rollout.factory import max_model_len

        settings, shape = engine_settings(cfg), model_shape(policy.path)
        need = max_model_len(cfg)
        if self.engine is None:
            self.engine = build(max(self.context_len, need))
            self.settings, self.shape, self.model_path = settings, shape, policy.path
            first = RoleEngine(self, policy.path)
            self.owner = first  # vLLM started from this model's files
            return first
        changed = [f"{k} {self.settings[k]!r} vs {v!r}" for k, v in settings.items() if self.settings[k] != v]
        if changed:
            raise ValueError("the roles of this loop share one vLLM engine per process (vLLM's sleep mode serves one "
                             "engine per process), so its start-up settings must be the same for every role; they "
                             "differ: " + "; ".join(changed) + " (set them at the top level, not under a role)")
        if shape is not None and self.shape is not None and shape != self.shape:
            keys = sorted(k for k in set(shape) | set(self.shape) if shape.get(k) != self.shape.get(k))
            raise ValueError(f"the shared vLLM engine serves the model of {self.model_path}; {policy.path} has "
                             f"another architecture or shape (config.json differs in {', '.join(keys)}): the roles "
                             "of one loop must share one base model")
        limit = self.engine.max_model_len
        if limit is not None and need > limit:
            raise ValueError(f"a role needs a context of {need} tokens (data.max_prompt_length + its largest "
                             f"rollout.max_tokens / trainer.eval_max_tokens), above the shared vLLM engine's "
                             f"{limit}: the loop's shared_vllm(context_len) must cover every role")
        return RoleEngine(self, policy.path)

    def close(self) -> None:
        engine, self.engine, self.owner = self.engine, None, None
        if engine is not None:
            engine.close()


class RoleEngine:
    """One role's view of the shared engine: the rollout engine protocol (``generate``, ``sync_weights``, ``sleep``,
    ``wake``, ``weights_stale``, ``close``), with the role's own ``stats``."""

    def __init__(self, shared: SharedVLLM, model_path):
        self.shared = shared
        self.checkpoint = model_path  # weights to load when this view samples without holding them; None: a module's
        self.closed = False
        self.stats = {"prefill_tokens": 0, "generated_tokens": 0}

    # the engine's read-only facts (stop / banned ids, context length, model runner, dtype ...)
    def __getattr__(self, name):
        if name in ("shared", "checkpoint", "closed", "stats"):
            raise AttributeError(name)
        engine = self.shared.engine
        if engine is None:
            raise AttributeError(name)
        return getattr(engine, name)

    @property
    def holds_weights(self) -> bool:
        return self.shared.owner is self

    @property
    def weights_stale(self) -> bool:
        """True where the engine holds another role's weights, or none (a level-2 sleep): ``sync_weights`` first."""
        return not self.holds_weights or self.shared.engine.weights_stale

    def sync_weights(self, model) -> None:
        self._require_open()
        self.shared.engine.sync_weights(model)
        self.checkpoint = None  # from now on this view's weights are the module's, which only its trainer can push
        self._own()

    def wake(self) -> None:
        self._require_open()
        if self.weights_stale:
            self._load_own()
        self.shared.engine.wake()

    def sleep(self) -> None:
        self._require_open()
        self.shared.engine.sleep()

    def generate(self, requests: Sequence[RolloutRequest], params: SamplingParams) -> list[list[Completion]]:
        self._require_open()
        if self.weights_stale:
            self._load_own()
        engine = self.shared.engine
        before = dict(engine.stats)
        out = engine.generate(requests, params)
        for k in self.stats:
            self.stats[k] += engine.stats.get(k, 0) - before.get(k, 0)
        return out

    def close(self) -> None:
        """Detach this role and put the engine to sleep (its GPU memory back to whatever runs next, as closing an
        engine of its own would); the engine lives on for the loop's other roles until ``shared_vllm`` exits."""
        if self.closed:
            return
        self.closed = True
        if self.shared.owner is self:
            self.shared.owner = None
        if self.shared.engine is not None:
            self.shared.engine.sleep()

    def _load_own(self) -> None:
        if self.checkpoint is None:
            raise RuntimeError("the shared vLLM engine holds another role's weights (or none after a level-2 sleep) "
                               "and this role's are a trained module's: call sync_weights(model) before sampling")
        self.shared.engine.load_checkpoint(self.checkpoint)
        self._own()

    def _own(self) -> None:
        if self.shared.owner is not self:
            self.shared.role_switches += 1
        self.shared.owner = self

    def _require_open(self) -> None:
        if self.closed:
            raise RuntimeError("this role's view of the shared vLLM engine is closed")
        if self.shared.engine is None:
            raise RuntimeError("the shared vLLM engine is closed (its shared_vllm block has ended)")
