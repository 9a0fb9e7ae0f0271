"""mmevo's vLLM logits processor (see ``mmevo.rollout.vllm_engine``): the policy's log-prob of each sampled token,
and the ban of vision tokens applied after it.

A module of its own, imported only where vLLM is installed, so that the class is defined at module level: vLLM hands
it to its workers by pickling (the ``mp`` executor of a tensor-parallel engine starts them with ``spawn`` once CUDA is
initialised, sending ``vllm_config`` with its ``logits_processors``), and pickle finds a class by its module and
qualified name -- a class built inside a function could not be sent, and every such engine failed to start.
"""

from __future__ import annotations

import numpy as np
import torch
from vllm.v1.sample.logits_processor import LogitsProcessor as V1LogitsProcessor

from mmevo.rollout.vllm_engine import _EXTRA_KEY, _GREEDY_EPS

try:
    from vllm.v1.worker.gpu.sample.logits_processor import LogitsProcessor as V2LogitsProcessor

    _BASES: tuple[type, ...] = (V1LogitsProcessor, V2LogitsProcessor)
except ImportError:  # a vLLM without the V2 runner's processor interface
    _BASES = (V1LogitsProcessor,)


def request_settings(params) -> tuple[float, float, tuple[int, ...]] | None:
    """(policy temperature T, vLLM's temperature T_v, banned ids) of one of our requests; None for others.

    vLLM raises a temperature in (0, 0.01) to 0.01 (SamplingParams.__post_init__), refuses one above 2 (the
    engine passes it 2), and divides by that T_v: the request's own T travels in extra_args, so the row becomes
    T_v * log_softmax(z / T) and vLLM's division leaves log softmax(z / T), whose sampling distribution is
    softmax(z / T). Greedy: T = T_v = 1."""
    extra = (params.extra_args or {}).get(_EXTRA_KEY)
    if extra is None:
        return None
    t_v = float(params.temperature)
    t_v = t_v if t_v > _GREEDY_EPS else 1.0
    t = float(extra.get("temperature", t_v))
    return (t if t > 0 else 1.0), t_v, tuple(sorted({int(b) for b in extra.get("banned", ())}))


class PolicyLogprobProcessor(*_BASES):
    """Each row z of a request carrying ``extra_args[_EXTRA_KEY]`` becomes ``T_v * log_softmax(z / T)`` (T = T_v = 1
    when greedy; T_v is vLLM's temperature, which differs from T only below 0.01 and above 2, see request_settings)
    -- a per-row shift when T = T_v, so sampling, greedy choice and top-p are unchanged -- and then the banned
    (vision) tokens are set to -inf. vLLM divides by T_v next, so with ``logprobs_mode="processed_logits"`` it
    reports, for the sampled token, exactly log softmax(z / T) of the unmodified policy: the log-prob the trainer
    computes. Rows of other requests are left untouched."""

    def __init__(self, vllm_config, *args):
        if len(args) == 1:  # V2 runner: (req_states)
            self._init_v2(args[0])
        else:  # V1 runner: (device, is_pin_memory)
            self._init_v1(args[0])

    # -- V1 runner: state per persistent-batch index ------------------------------------------------------------
    def _init_v1(self, device) -> None:
        self.device = device
        self.rows: dict[int, tuple[float, float, tuple[int, ...]]] = {}  # batch index -> request_settings
        self.tensors = None  # (row index, T, T_v, banned row, banned column), rebuilt when rows change

    def is_argmax_invariant(self) -> bool:
        return False  # the ban changes the greedy choice

    def update_state(self, batch_update) -> None:
        if batch_update is None:
            return
        for index in batch_update.removed:
            self.rows.pop(index, None)
        for index, params, _, _ in batch_update.added:
            settings = request_settings(params)
            if settings is None:
                self.rows.pop(index, None)
            else:
                self.rows[index] = settings
        for a, b, direction in batch_update.moved:
            ra, rb = self.rows.pop(a, None), self.rows.pop(b, None)
            if ra is not None:
                self.rows[b] = ra
            if rb is not None and direction.name == "SWAP":
                self.rows[a] = rb
        order = sorted(self.rows)
        ban = [(j, t) for j, i in enumerate(order) for t in self.rows[i][2]]
        r, c = zip(*ban) if ban else ((), ())
        dev = self.device
        self.tensors = (torch.tensor(order, dtype=torch.long, device=dev),
                        torch.tensor([self.rows[i][0] for i in order], dtype=torch.float32, device=dev)[:, None],
                        torch.tensor([self.rows[i][1] for i in order], dtype=torch.float32, device=dev)[:, None],
                        torch.tensor(r, dtype=torch.long, device=dev),
                        torch.tensor(c, dtype=torch.long, device=dev))

    def _apply_v1(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        idx, temps, scales, ban_r, ban_c = self.tensors
        shifted = torch.log_softmax(logits[idx] / temps, dim=-1) * scales
        if ban_r.numel():
            shifted[ban_r, ban_c] = float("-inf")
        logits[idx] = shifted.to(logits.dtype)
        return logits

    # -- V2 runner: state per request slot (slots are recycled: add_request overwrites all of a slot) ------------
    def _init_v2(self, req_states) -> None:
        self.device = req_states.device
        n = int(req_states.max_num_reqs)
        self.slot_on = np.zeros(n, dtype=bool)  # host copies: add_request writes, apply_staged_writes uploads
        self.slot_temp = np.ones(n, dtype=np.float32)  # 1 for slots that are not ours: the shift is then a no-op
        self.slot_scale = np.ones(n, dtype=np.float32)  # vLLM's temperature T_v (1 for slots that are not ours)
        self.slot_ban = np.zeros((n, 0), dtype=np.int64)  # banned ids, padded by repeating the slot's last one
        self.slot_has_ban = np.zeros(n, dtype=bool)
        self._upload()

    def _upload(self) -> None:
        dev = self.device
        self.dev_on = torch.from_numpy(self.slot_on.copy()).to(dev)
        self.dev_temp = torch.from_numpy(self.slot_temp.copy()).to(dev)
        self.dev_scale = torch.from_numpy(self.slot_scale.copy()).to(dev)
        self.dev_ban = torch.from_numpy(self.slot_ban.copy()).to(dev)
        self.dev_has_ban = torch.from_numpy(self.slot_has_ban.copy()).to(dev)
        self.dirty = False

    def add_request(self, req_idx: int, sampling_params) -> bool:
        settings = request_settings(sampling_params)
        self.dirty = True
        if settings is None:
            self.slot_on[req_idx], self.slot_temp[req_idx], self.slot_has_ban[req_idx] = False, 1.0, False
            self.slot_scale[req_idx] = 1.0
            self.slot_ban[req_idx] = 0
            return False
        temp, scale, banned = settings
        if len(banned) > self.slot_ban.shape[1]:  # widen, padding every slot with its own last id
            pad = len(banned) - self.slot_ban.shape[1]
            last = self.slot_ban[:, -1:] if self.slot_ban.shape[1] else np.zeros((len(self.slot_ban), 1), np.int64)
            self.slot_ban = np.concatenate([self.slot_ban, np.repeat(last, pad, axis=1)], axis=1)
        width = self.slot_ban.shape[1]
        self.slot_on[req_idx], self.slot_temp[req_idx], self.slot_scale[req_idx] = True, temp, scale
        self.slot_has_ban[req_idx] = bool(banned)
        self.slot_ban[req_idx] = list(banned) + [banned[-1]] * (width - len(banned)) if banned else 0
        return True

    def apply_staged_writes(self) -> None:
        if self.dirty:
            self._upload()

    def _apply_v2(self, logits: torch.Tensor, ctx) -> torch.Tensor:
        if not self.slot_on[ctx.idx_mapping_np].any():  # host check, no device sync
            return logits
        slots = ctx.expanded_idx_mapping.long()
        t = self.dev_temp[slots].unsqueeze(1)
        on = self.dev_on[slots].unsqueeze(1)
        logits.div_(t)  # in place; rows that are not ours (t = 1, on = False) stay as they were
        lse = torch.logsumexp(logits, dim=-1, keepdim=True)
        logits.sub_(torch.where(on, lse, torch.zeros_like(lse)))  # where, not lse * on: lse may be -inf there
        logits.mul_(self.dev_scale[slots].unsqueeze(1))
        if self.dev_ban.shape[1]:
            cols = self.dev_ban[slots]
            banned = self.dev_has_ban[slots].unsqueeze(1)
            # every write of a row is either all -inf (its own banned ids) or all the current values: no
            # conflicting duplicates in the scatter
            logits.scatter_(1, cols, torch.where(banned, float("-inf"), logits.gather(1, cols)))
        return logits

    def apply(self, logits: torch.Tensor, ctx=None) -> torch.Tensor:
        return self._apply_v1(logits) if ctx is None else self._apply_v2(logits, ctx)
