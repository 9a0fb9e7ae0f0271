"""One real GRPO step (``GRPOTrainer.step``) on a fixed rollout, for parity sweeps over settings that must change the
cost of an update, never its mathematics (tests/test_invar27_*.py).

The rollout is replayed by a strategy, so every trainer trains on the same completions: four prompts x four responses
with unequal lengths, responses ended by EOS next to ones cut at ``rollout.max_tokens``, one group whose responses all
earn the same reward (zero advantage), one response with no token at all, and one prompt with three responses, not
four (as a filter leaves it; two data-parallel ranks then hold 8 and 7 samples). The optimizer is swapped for plain SGD:
AdamW's first update is about lr x sign(g), so a gradient entry of 1e-12 whose sign differs in the last bit moves a
weight by the whole lr and would hide real agreement; SGD keeps the post-step weights as exact as the gradients.
"""

from __future__ import annotations

import math

import torch

from conftest import randomize
from mmevo.config import load_config
from mmevo.data.synthetic import split_train_heldout
from mmevo.grpo.trainer import GRPOTrainer
from mmevo.models.loader import load_model
from mmevo.rollout.base import Completion
from mmevo.rollout.factory import build_engine
from mmevo.rollout.strategy import Rollout, RolloutStrategy

MAX_TOKENS = 10
N = 4
# per prompt: (text, finish) of each response; "length" responses are cut at MAX_TOKENS without their EOS
SPEC = [
    [("<think>8 * 6</think> \\boxed{48}", "stop"), ("\\boxed{47}", "stop"),
     ("the area is forty eight square units and so on", "length"), ("\\boxed{48}", "stop")],
    [("\\boxed{3}", "stop")] * N,  # all equal: zero advantage
    [("\\boxed{80}", "stop"), ("", "empty"), ("I do not know the answer to this one at all", "length")],  # 3 only
    [("\\boxed{75}", "stop"), ("\\boxed{75} yes", "stop"), ("x", "stop"),
     ("one two three four five six seven eight nine ten eleven", "length")],
]


class ReplayStrategy(RolloutStrategy):
    """Returns the same completions (``SPEC[k]``) for the k-th of ``examples`` (the step's global batch), whatever the
    engine; a data-parallel rank that gets a share of them gets each its own completions."""

    name = "replay"

    def __init__(self, examples):
        self.spec_of = {ex.id: responses for ex, responses in zip(examples, SPEC, strict=True)}

    def rollout(self, ctx, examples):
        tok = ctx.tokenizer
        eos = tok.eos_token_id
        prompts, comps, texts, groups, exs = [], [], [], [], []
        for g, ex in enumerate(examples):
            responses = self.spec_of[ex.id]
            enc = ctx.encode(ex)
            for text, finish in responses:
                ids = tok.encode(text, add_special_tokens=False)
                if finish == "length":
                    ids = ids[:MAX_TOKENS]
                    assert len(ids) == MAX_TOKENS, text
                elif finish == "stop":
                    ids = ids[:MAX_TOKENS - 1] + [eos]
                else:  # a response with no token (e.g. a prefix-only retrace): must count nowhere
                    ids, finish = [], "stop"
                prompts.append(enc)
                comps.append(Completion(ids, [0.0] * len(ids), finish))
                texts.append(ctx.decode(ids))
                groups.append(g)
                exs.append(ex)
        return Rollout(prompts, comps, texts, torch.tensor(groups), exs)


def make_cfg(out, **over):
    base = {
        "data.prompt_template": "none", "rollout.n": N, "rollout.max_tokens": MAX_TOKENS, "rollout.temperature": 0.8,
        "trainer.prompts_per_step": 4, "trainer.mini_batch_prompts": 4, "trainer.micro_batch_seqs": 16,
        "trainer.lr": 0.05, "trainer.steps": 1, "trainer.output_dir": str(out), "trainer.wandb_mode": "disabled",
        "trainer.progress": False, "trainer.save_every": 0, "algo.kl_coef": 0.0, "trainer.seed": 3,
        "trainer.max_grad_norm": 1e6, "reward.heads": "{accuracy: 1.0, format: 0.5}",
        "algo.clip_low": 0.2, "algo.clip_high": 0.28,
    }
    base.update({k: v for k, v in over.items()})
    return load_config(None, [f"{k}={v}" for k, v in base.items()])


_DATA = None


def data():
    global _DATA
    if _DATA is None:
        _DATA = split_train_heldout(8, 2, seed=5)
    return _DATA


def run_step(path, out, sgd: bool = True, full_grad=None, order=None, **over) -> dict:
    """One step under ``over``: {"metrics", "grads" (one dict per optimizer update, read by ``full_grad(param)``,
    default ``param.grad``), "weights" (after the step)}; ``sgd``: swap AdamW for SGD (not under DeepSpeed, which
    holds the optimizer it was given); ``order``: the step's examples in this order of ``SPEC``'s (default as listed)."""
    cfg = make_cfg(out, **over)
    lm = load_model(path)
    randomize(lm.model, std=0.15, seed=11)
    ref = None
    if cfg.algo.kl_coef > 0:  # a reference that differs from the policy, so the KL term has a gradient
        ref = load_model(path).model.eval()
        randomize(ref, std=0.15, seed=12)
    tr = GRPOTrainer(cfg, lm, build_engine(cfg, lm), data()[0], data()[1], ref_model=ref, strategy=ReplayStrategy(data()[0][:len(SPEC)]))
    if sgd:
        opt = torch.optim.SGD([p for p in tr.model.parameters() if p.requires_grad], lr=cfg.trainer.lr)
        tr.optimizer = tr.backend.optimizer = opt
    full_grad = full_grad or (lambda p: p.grad)
    grads: list[dict] = []
    real_step = tr.backend.step

    def capture():
        grads.append({n: g.detach().clone() for n, p in tr.model.named_parameters()
                      if (g := full_grad(p)) is not None})
        return real_step()

    tr.backend.step = capture
    try:
        examples = data()[0][:len(SPEC)]
        examples = examples if order is None else [examples[k] for k in order]
        metrics = tr.reduce_over_ranks(tr.step(examples))  # what train() logs
    finally:
        tr.close()
    weights = {n: p.detach().clone() for n, p in tr.model.named_parameters()}
    return {"metrics": metrics, "grads": grads, "weights": weights}


def rel_diff(a: dict, b: dict) -> tuple[float, float]:
    """(norm of b, norm of a - b) over the tensors of two name -> tensor dicts with the same names."""
    assert set(a) == set(b), sorted(set(a) ^ set(b))
    norm = math.sqrt(sum(float((v.double() ** 2).sum()) for v in b.values()))
    diff = math.sqrt(sum(float(((a[n].double() - b[n].double()) ** 2).sum()) for n in b))
    return norm, diff


# metrics that measure cost (time, memory, throughput), not the update
_COST = ("time/", "memory/", "throughput/")


def math_metrics(m: dict) -> dict:
    return {k: v for k, v in m.items() if not k.startswith(_COST)}


def assert_same_step(a: dict, b: dict, rtol: float = 1e-5, what: str = "", weights_atol: float = 0.0) -> None:
    """Equal gradients of every update, post-step weights and logged (non-cost) metrics, to ``rtol`` (the weights to
    ``rtol`` of their norm plus ``weights_atol`` per entry)."""
    assert len(a["grads"]) == len(b["grads"]) > 0, (what, len(a["grads"]), len(b["grads"]))
    for u, (ga, gb) in enumerate(zip(a["grads"], b["grads"])):
        norm, diff = rel_diff(ga, gb)
        assert norm > 1e-6 and diff <= rtol * norm, (what, "update", u, diff, norm)
    w0 = b["weights"]
    norm, diff = rel_diff(a["weights"], w0)
    n_entries = sum(v.numel() for v in w0.values())
    assert diff <= rtol * norm + weights_atol * math.sqrt(n_entries), (what, "weights", diff, norm)
    ma, mb = math_metrics(a["metrics"]), math_metrics(b["metrics"])
    assert set(ma) == set(mb), (what, sorted(set(ma) ^ set(mb)))
    # absolutely to 2e-6 too: approx_kl is a mean of log-prob differences near 0, where fp32 log-probs' own ~1e-6
    # noise is all there is (-0.0377170 vs -0.0377181 after two chained updates)
    bad = {k: (ma[k], mb[k]) for k in ma if not math.isclose(ma[k], mb[k], rel_tol=rtol, abs_tol=2e-6)}
    assert not bad, (what, bad)
