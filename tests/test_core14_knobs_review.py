"""Core review 14: GRPO-core knobs through the trainer's own step, against hand computations.

``algo.kl_type``: the logged ``actor/kl`` is the chosen estimator's mean over the response tokens, computed here from
independent forwards of the policy and the reference (with k3's clamps), and the loss adds ``kl_coef`` times it.
``algo.loss_agg``: with responses of 1, 2, 3 and 6 tokens split over uneven micro-batches, the logged ``pg_loss`` of
an on-policy update (ratio 1, so the per-token loss is -A) equals each mode's definition over the whole mini-batch
(a token-less response counts in the seq-mean modes' number of sequences, as the ``agg_loss`` docstring says).
"""

import pytest
import torch

from mmevo.config import load_config
from mmevo.data.synthetic import split_train_heldout
from mmevo.grpo.trainer import GRPOTrainer
from mmevo.rollout.factory import build_engine
from test_core_review5 import Scripted, _model, _per_token

MAX_TOKENS = 6
REWARDS = [0.0, 1.0, 0.3, 0.7, 0.2, 0.9, 0.0, 0.5]  # two groups of four, every reward different within its group


def _cfg(tmp_path, **over):
    base = {"data.prompt_template": "none", "rollout.n": 4, "rollout.max_tokens": MAX_TOKENS,
            "rollout.temperature": 1.0, "trainer.prompts_per_step": 2, "trainer.mini_batch_prompts": 2,
            "trainer.micro_batch_seqs": 3, "trainer.lr": 1e-3, "trainer.steps": 1, "trainer.output_dir": str(tmp_path),
            "trainer.wandb_mode": "disabled", "trainer.progress": False, "trainer.save_every": 0, "trainer.seed": 3,
            "algo.kl_coef": 0.0}
    base.update(over)
    return load_config(None, [f"{k}={v}" for k, v in base.items()])


class FixedRewards:
    """REWARDS in sample order (a stand-in for the reward mixer: the advantages are then known exactly)."""

    def __call__(self, samples):
        return torch.tensor(REWARDS[:len(samples)]), {}

    def empty_step(self):
        pass


def _script(engine, first=None):
    stop = int(engine.stop_ids[0])
    return [([stop] if first is None else first, "stop"), ([30, 31], "length"), ([11] * MAX_TOKENS, "length"),
            ([20, 21, stop], "stop")]


def _kl_by_formula(kind: str, logp: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    d = (ref - logp).double()
    if kind in ("k1", "kl"):
        return -d
    if kind in ("k2", "mse"):
        return 0.5 * d * d
    if kind == "abs":
        return d.abs()
    dc = d.clamp(-20, 20)  # k3 / low_var_kl: verl's clamps of the log-ratio and of the estimate
    return (torch.exp(dc) - dc - 1).clamp(-10, 10)


@pytest.mark.parametrize("kind", ["k1", "kl", "k2", "mse", "k3", "low_var_kl", "abs", "k3+", "low_var_kl+", "abs+"])
def test_each_kl_type_is_its_formula_over_the_response_tokens(tiny_text_path, tmp_path, kind):
    # a reference far from the policy (another random init): k3's output clamp at 10 is reached on some tokens
    cfg = _cfg(tmp_path, **{"algo.kl_coef": 0.5, "algo.kl_type": kind})
    lm, ref, start = _model(tiny_text_path, 11), _model(tiny_text_path, 12), _model(tiny_text_path, 11)
    engine = build_engine(cfg, lm)
    script = _script(engine)
    scripted = Scripted(engine, script)
    tr = GRPOTrainer(cfg, lm, scripted, split_train_heldout(8, 0, seed=5)[0], [], ref_model=ref.model, log=False)
    tr.rewards = FixedRewards()
    m = tr.step()

    per_token = []
    for prompt in scripted.prompts:
        for ids, _ in script:
            _, k1 = _per_token(start.model, ref.model, prompt, ids)  # k1 = logp - ref at each response token
            ids_t = torch.tensor([list(prompt.input_ids) + list(ids)])
            P = len(prompt.input_ids)
            with torch.no_grad():
                lp = torch.log_softmax(start.model(input_ids=ids_t).logits[0, P - 1:P - 1 + len(ids)].float(), -1)
            logp = lp.gather(-1, torch.tensor(ids)[:, None])[:, 0]
            per_token += _kl_by_formula(kind.removesuffix("+"), logp, logp - k1).tolist()  # "+": the value of the kind
    assert len(per_token) == 2 * (1 + 2 + 6 + 3)
    if kind.removesuffix("+") in ("k3", "low_var_kl"):
        assert max(per_token) == 10.0  # the clamp is exercised
    expected = sum(per_token) / len(per_token)
    assert m["actor/kl"] == pytest.approx(expected, rel=2e-5, abs=1e-6)
    # token-mean loss: the KL term is kl_coef times the same token mean
    assert m["actor/loss"] - m["actor/pg_loss"] == pytest.approx(0.5 * expected, rel=2e-5, abs=1e-6)


def _weights_after_a_step(tiny_text_path, tmp_path, kind):
    cfg = _cfg(tmp_path / kind, **{"algo.kl_coef": 0.5, "algo.kl_type": kind})
    lm, ref = _model(tiny_text_path, 11), _model(tiny_text_path, 12)
    engine = build_engine(cfg, lm)
    tr = GRPOTrainer(cfg, lm, Scripted(engine, _script(engine)), split_train_heldout(8, 0, seed=5)[0], [],
                     ref_model=ref.model, log=False)
    tr.rewards = FixedRewards()
    tr.step()
    return torch.cat([p.detach().flatten().double() for p in lm.model.parameters()])


def test_a_plus_kl_type_trains_with_k2s_gradient(tiny_text_path, tmp_path):
    # verl's straight-through "k3+": the loss's KL gradient is k2's (logp - ref), so one step moves the weights as
    # "k2" does, and not as "k3" (whose gradient is 1 - e^(ref - logp), far from it with a reference this far off)
    k2, k3, k3_plus = (_weights_after_a_step(tiny_text_path, tmp_path, k) for k in ("k2", "k3", "k3+"))
    assert (k3_plus - k2).abs().max() < 1e-6 * k2.abs().max()
    assert (k3 - k2).abs().max() > 1e3 * (k3_plus - k2).abs().max()


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"])
def test_each_loss_agg_is_its_definition_over_the_mini_batch(tiny_text_path, tmp_path, agg):
    cfg = _cfg(tmp_path, **{"algo.loss_agg": agg})
    lm = _model(tiny_text_path, 11)
    engine = build_engine(cfg, lm)
    script = _script(engine, first=[])  # a token-less response: seq-mean-token-mean is then not 0
    tr = GRPOTrainer(cfg, lm, Scripted(engine, script), split_train_heldout(8, 0, seed=5)[0], [], log=False)
    tr.rewards = FixedRewards()
    m = tr.step()  # one mini-batch, one epoch: on-policy, ratio 1, per-token loss -A; micro-batches of 3, 3, 2

    lengths = [len(ids) for ids, _ in script] * 2  # 0, 2, 6, 3 per group
    adv = []
    for g in range(2):
        r = torch.tensor(REWARDS[4 * g:4 * g + 4], dtype=torch.float64)
        adv += ((r - r.mean()) / (r.std() + 1e-6)).tolist()
    N = len(adv)
    seq_sums = [-a * n for a, n in zip(adv, lengths)]
    expected = {
        "token-mean": sum(seq_sums) / sum(lengths),
        "seq-mean-token-mean": sum(-a for a, n in zip(adv, lengths) if n) / N,  # per-sequence token mean: -A
        "seq-mean-token-sum": sum(seq_sums) / N,
        "seq-mean-token-sum-norm": sum(seq_sums) / (MAX_TOKENS * N),  # README: / rollout.max_tokens, mean over seqs
    }[agg]
    assert m["actor/clip_frac"] == 0.0 and m["actor/ratio_mean"] == 1.0
    assert m["actor/pg_loss"] == pytest.approx(expected, rel=1e-5, abs=1e-6)
    assert abs(expected) > 0.02  # not a vacuous 0 = 0


def test_max_batch_seqs_caps_the_rows_decoded_together(tiny_text_path, monkeypatch):
    # rollout.max_batch_seqs=3 with a request of n=8: 8 rows were decoded together (a request with more rows than the
    # cap was one chunk of its own), past the bound the knob's doc line and the memory plan give. Now its samples
    # are decoded in pieces of 3, 3 and 2, each prefilled on its own, in order, seeded as before
    from conftest import hf_engine, randomized_model
    from mmevo.models.inputs import encode_prompt
    from mmevo.rollout import hf
    from mmevo.rollout.base import RolloutRequest, SamplingParams

    lm = randomized_model(tiny_text_path, seed=1)
    rows = []
    real = hf.sample_next

    def counting(logits, *args, **kwargs):
        rows.append(logits.shape[0])
        return real(logits, *args, **kwargs)

    monkeypatch.setattr(hf, "sample_next", counting)
    prompts = [encode_prompt(lm.processor, False, text, []) for text in ("Find x.", "In triangle ABC, find angle C.")]
    reqs = [RolloutRequest(prompts[0], n=8), RolloutRequest(prompts[1], n=2), RolloutRequest(prompts[0], n=0)]
    sampled = SamplingParams(temperature=1.0, max_tokens=6, seed=4)
    greedy = SamplingParams(temperature=0.0, max_tokens=6)
    ids = lambda out: [[c.token_ids for c in group] for group in out]  # noqa: E731
    capped, wide = hf_engine(lm, max_batch_seqs=3), hf_engine(lm, max_batch_seqs=64)

    out = capped.generate(reqs, sampled)
    assert [len(group) for group in out] == [8, 2, 0]
    assert max(rows) == 3
    assert ids(out) == ids(capped.generate(reqs, sampled))  # a seed still reproduces the samples
    # each piece decodes its own request's prompt, and the pieces' samples come back in order
    rows.clear()
    by_piece = capped.generate(reqs, greedy)
    assert max(rows) == 3
    whole = wide.generate(reqs, greedy)
    assert ids(by_piece) == ids(whole)
    assert whole[0][0].token_ids != whole[1][0].token_ids  # the two prompts are told apart

    # continuations from a kept KV cache (CSRS re-inferences) are split the same way
    src = wide.generate([RolloutRequest(prompts[1], n=1, keep_kv=True)], greedy)[0][0]
    cont = [RolloutRequest(prompts[1], n=5, prefix_ids=src.full_ids[:1], continue_from=src)]
    rows.clear()
    by_piece = capped.generate(cont, greedy)
    assert max(rows) == 3 and len(by_piece[0]) == 5
    assert ids(by_piece) == ids(wide.generate(cont, greedy))
    assert all(c.prefix_ids == src.full_ids[:1] for c in by_piece[0])
    with pytest.raises(ValueError, match="max_batch_seqs must be an integer >= 1"):
        hf_engine(lm, max_batch_seqs=0)  # it would split every request into pieces of 0 rows
