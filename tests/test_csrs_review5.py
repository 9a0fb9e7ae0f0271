"""Fifth review of CSRS: degenerate maternal responses through the real rollout path (tiny Qwen2.5-VL, HF engine).

The maternal responses are forced (a scripted first call: empty, one token, cut at max_tokens mid-``\\boxed{``, two
boxed answers, "None" / "N/A", a cut inside multi-token characters and ``<think>`` tags); the re-inferences are the
real HF engine's continuations of prompt + anchor tokens on the noised image. Checked against the seed:

    Eq. 6: anchor = floor(omega * L) of the response's own tokens
    Eq. 7: R_base(a) = Count(a, A_all) / ((m + 1) n)
    Eq. 8: R = (gamma * tanh(beta * (f_r / (f_base + eps) - 1)) + 1) * R_base,   f_r = Count(a, A_m) / (m n)

computed here by hand from the answers the extractor produced; only maternal responses reach the loss.
"""

import math

import pytest
import torch

from conftest import randomize
from mmevo.config import load_config
from mmevo.csrs.strategy import CSRSStrategy
from mmevo.data.synthetic import split_train_heldout
from mmevo.grpo.trainer import GRPOTrainer
from mmevo.models.loader import load_model
from mmevo.rewards.answers import extract_answer, group_answer_keys
from mmevo.rollout.base import Completion
from mmevo.rollout.factory import build_engine

MAX_TOKENS = 12
# what an untrained or collapsing model emits; None: EOS first (an empty response)
SCRIPT = [None, "5", "\\boxed{None}", "\\boxed{N/A}", "\\boxed{3} then \\boxed{5}", "aa \\boxed{1234567",
          "<think>\\boxed{7}</think>", "答案是🙂🙂\\boxed{三}"]


@pytest.fixture(scope="module")
def lm(tiny_vl_path):
    m = load_model(tiny_vl_path)
    randomize(m.model, std=0.15, seed=2)
    return m


class ScriptedMaternal:
    """The real engine, except that the maternal call (no prefix, clean image) returns ``script`` for every prompt."""

    def __init__(self, engine, script):
        self.engine, self.script, self.calls = engine, script, []

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def generate(self, requests, params):
        self.calls.append(list(requests))
        if len(self.calls) % 2 == 0:  # the re-inference call of the step
            return self.engine.generate(requests, params)
        return [[Completion(list(ids), [0.0] * len(ids), why) for ids, why in self.script[:r.n]] for r in requests]


def _script(tokenizer, stop):
    out = []
    for text in SCRIPT:
        ids = [] if text is None else tokenizer.encode(text, add_special_tokens=False)
        out.append((ids[:MAX_TOKENS], "length") if len(ids) >= MAX_TOKENS else (ids + [stop], "stop"))
    return out


def _step(lm, tmp_path, heads, **over):
    base = {"data.prompt_template": "none", "rollout.n": len(SCRIPT), "rollout.max_tokens": MAX_TOKENS,
            "trainer.prompts_per_step": 1, "trainer.mini_batch_prompts": 1, "trainer.micro_batch_seqs": 32,
            "trainer.output_dir": str(tmp_path), "trainer.wandb_mode": "disabled", "trainer.progress": False,
            "trainer.save_every": 0, "algo.kl_coef": 0, "csrs.enabled": True, "csrs.m": 2,
            "reward.heads": heads, "data.hide_labels": True, "trainer.lr": 1e-3}
    base.update(over)
    cfg = load_config(None, [f"{k}={v}" for k, v in base.items()])
    train, held = split_train_heldout(4, 0, seed=3)
    engine = build_engine(cfg, lm)
    script = _script(lm.tokenizer, int(engine.stop_ids[0]))
    spy_engine = ScriptedMaternal(engine, script)
    tr = GRPOTrainer(cfg, lm, spy_engine, train, held, strategy=CSRSStrategy(cfg.csrs), log=False)
    seen = {}
    score, update = tr.rewards, tr._update

    def rewards(samples):
        seen["samples"] = samples
        seen["rewards"], m = score(samples)
        return seen["rewards"], m

    def spy_update(prompts, responses, adv, *rest):
        seen["trained"] = [list(r) for r in responses]
        return update(prompts, responses, adv, *rest)

    tr.rewards, tr._update = rewards, spy_update
    return tr.step(), seen, spy_engine, script


def _sfr_by_hand(mat, rein, gamma=0.2, beta=5.0, eps=1e-6):
    """Eq. 7-8 from the seed, with no answer (None) matching nothing and scoring 0."""
    n_all, n_re = len(mat) + len(rein), len(rein)
    out = []
    for a in mat:
        if a is None:
            out.append(0.0)
            continue
        base = (mat.count(a) + rein.count(a)) / n_all
        f_r = rein.count(a) / n_re
        out.append((gamma * math.tanh(beta * (f_r / (base + eps) - 1)) + 1) * base)
    return out


@pytest.mark.parametrize("over", [{}, {"csrs.omega": 0.9}, {"csrs.random_anchor": True, "csrs.m": 1}])
def test_degenerate_maternal_responses_through_the_real_rollout(lm, tmp_path, over):
    metrics, seen, engine, script = _step(lm, tmp_path, "{sfr: 1.0}", **over)
    samples, rewards = seen["samples"], seen["rewards"]
    n, m = len(SCRIPT), over.get("csrs.m", 2)
    assert len(samples) == n * (m + 1)
    assert [s.role for s in samples] == ["maternal"] * n + ["reinference"] * (n * m)
    # the re-inference prompt is prompt + the maternal response's own tokens up to its anchor, token for token
    stop = set(engine.stop_ids.tolist())
    requests = engine.calls[1]
    for (ids, _), req in zip(script, requests):
        content = ids[:-1] if ids and ids[-1] in stop else ids
        assert list(req.prefix_ids) == content[:len(req.prefix_ids)]
        if not over.get("csrs.random_anchor"):
            assert len(req.prefix_ids) == math.floor(over.get("csrs.omega", 0.7) * 10 * len(content) / 10)
        assert req.max_tokens == MAX_TOKENS - len(req.prefix_ids)
    assert len(requests[0].prefix_ids) == 0 and len(requests[1].prefix_ids) == 0  # floor(omega * 1) < 1
    # SFR: Eq. 7-8 by hand from the answers the extractor produced
    answers = [extract_answer(s.response, s.choices) for s in samples]
    assert answers[:n] == [None, None, "None", "N/A", "5", None, "7", None]
    keys = group_answer_keys(answers, None)
    expected = _sfr_by_hand(keys[:n], keys[n:])
    assert rewards[:n].tolist() == pytest.approx(expected, abs=1e-6)
    assert rewards[n:].tolist() == [0.0] * (n * m)
    # only the maternal responses are trained on
    assert seen["trained"] == [ids for ids, _ in script]
    assert metrics["csrs/anchor_zero_frac"] == pytest.approx(
        sum(len(r.prefix_ids) == 0 for r in requests) / n)


def test_empty_response_share_counts_maternal_responses_only(lm, tmp_path):
    # one maternal response of 8 is empty (EOS first); its re-inferences' texts hold their anchors, so the share was
    # 1 / 24 (m = 2) or 1 / 16 (m = 1) over all samples instead of 1 / 8 like the other response/* metrics
    for m in (1, 2):
        metrics, seen, _, _ = _step(lm, tmp_path / str(m), "{majority: 1.0}", **{"csrs.m": m})
        mat = [s for s in seen["samples"] if s.role == "maternal"]
        assert sum(not s.response.strip() for s in mat) == 1 and len(mat) == len(SCRIPT)
        assert metrics["response/empty_frac"] == pytest.approx(1 / len(SCRIPT))
        # MM-UPT: the mode of the pooled answers (maternal and re-inference; ties to the first seen, no answer never
        # votes) is the pseudo label, reward 1 for each sample whose answer is it
        keys = group_answer_keys([extract_answer(s.response, s.choices) for s in seen["samples"]], None)
        votes = [k for k in keys if k is not None]
        mode = max(votes, key=lambda k: (votes.count(k), -votes.index(k))) if votes else None
        assert seen["rewards"].tolist() == [float(k is not None and k == mode) for k in keys]


RESUME_SCRIPT = ["\\boxed{3}", "so \\boxed{3}", "\\boxed{4}", "hmm"]


def _resume_trainer(lm_path, out, heads):
    """A fresh trainer (fresh weights, as a new process builds them) on ``out``: 4 CSRS steps, a checkpoint every 2."""
    lm = load_model(lm_path)
    randomize(lm.model, std=0.15, seed=2)
    over = {"data.prompt_template": "none", "rollout.n": len(RESUME_SCRIPT), "rollout.max_tokens": 8,
            "trainer.steps": 4, "trainer.save_every": 2, "trainer.prompts_per_step": 2,
            "trainer.mini_batch_prompts": 1, "trainer.micro_batch_seqs": 32, "trainer.output_dir": str(out),
            "trainer.wandb_mode": "disabled", "trainer.progress": False, "algo.kl_coef": 0, "csrs.enabled": True,
            "csrs.m": 2, "csrs.random_anchor": True, "reward.heads": heads, "data.hide_labels": True,
            "trainer.lr": 1e-2}
    cfg = load_config(None, [f"{k}={v}" for k, v in over.items()])
    train, held = split_train_heldout(6, 0, seed=3)
    engine = build_engine(cfg, lm)
    stop = int(engine.stop_ids[0])
    script = [(lm.tokenizer.encode(t, add_special_tokens=False) + [stop], "stop") for t in RESUME_SCRIPT]
    spy = ScriptedMaternal(engine, script)
    return GRPOTrainer(cfg, lm, spy, train, held, strategy=CSRSStrategy(cfg.csrs), log=True), spy


def _reinference_inputs(spy):
    """Per step: each re-inference request's anchor tokens and a digest of its noised pixels."""
    return [[(list(r.prefix_ids), float(r.image_override.pixel_values.double().sum())) for r in call]
            for call in spy.calls[1::2]]


def _curve(out):
    import json

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    timing = ("time/", "throughput/", "memory/")
    return [{k: v for k, v in row.items() if not k.startswith(timing)} for row in rows]


@pytest.mark.parametrize("heads", ["{sfr: 1.0}", "{majority: 1.0}"])
def test_resume_mid_run_matches_the_straight_run(tiny_vl_path, tmp_path, heads):
    straight, spy = _resume_trainer(tiny_vl_path, tmp_path / "straight", heads)
    straight.train()
    inputs = _reinference_inputs(spy)
    assert len(inputs) == 4 and any(a for step in inputs for a, _ in step)
    curve = _curve(tmp_path / "straight")
    assert any(row[f"reward/{heads[1:-6]}/mean"] > 0 for row in curve)  # the updates had a signal to learn from

    # killed after step 3 was logged, with the newest checkpoint at step 2; a new process with other global RNG state
    first, _ = _resume_trainer(tiny_vl_path, tmp_path / "resumed", heads)
    first.train(3)
    del first
    torch.manual_seed(12345)
    again, spy2 = _resume_trainer(tiny_vl_path, tmp_path / "resumed", heads)
    again.train()
    assert again.step_idx == 4
    assert len(spy2.calls) == 4  # steps 3 and 4 again, from the step-2 checkpoint
    assert _reinference_inputs(spy2) == inputs[2:]  # anchors and VSP noise of the same steps
    assert _curve(tmp_path / "resumed") == curve  # steps 1-4 once each, same numbers
    assert again.counters == straight.counters
    for (name, a), b in zip(straight.model.state_dict().items(), again.model.state_dict().values()):
        assert torch.equal(a, b), name
