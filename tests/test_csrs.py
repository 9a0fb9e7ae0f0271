"""CSRS end to end on the tiny model: retrace continuations, VSP pixels, SFR rewards, only maternal samples trained."""

import math

import numpy as np
import pytest
import torch

from conftest import randomize
from mmevo.config import ConfigError, load_config
from mmevo.csrs.strategy import CSRSStrategy, perturbed_prompt
from mmevo.data.synthetic import split_train_heldout
from mmevo.grpo.trainer import GRPOTrainer
from mmevo.models.loader import load_model
from mmevo.rewards.heads import SFRHead, ScoredSample
from mmevo.rollout.factory import build_engine


@pytest.fixture(scope="module")
def lm(tiny_vl_path):
    m = load_model(tiny_vl_path)
    randomize(m.model, std=0.15, seed=2)
    return m


def _trainer(lm, tmp_path, **over):
    base = {"data.prompt_template": "none", "rollout.n": 3, "rollout.max_tokens": 10,
            "trainer.prompts_per_step": 2, "trainer.mini_batch_prompts": 2, "trainer.micro_batch_seqs": 16,
            "trainer.output_dir": str(tmp_path), "trainer.wandb_mode": "disabled", "trainer.progress": False,
            "trainer.save_every": 0, "algo.kl_coef": 0, "csrs.enabled": True, "csrs.m": 2,
            "reward.heads": "{sfr: 1.0}", "data.hide_labels": True, "trainer.lr": 1e-3}
    base.update(over)
    cfg = load_config(None, [f"{k}={v}" for k, v in base.items()])
    train, held = split_train_heldout(8, 0, seed=3)
    return GRPOTrainer(cfg, lm, build_engine(cfg, lm), train, held, strategy=CSRSStrategy(cfg.csrs), log=False)


def csrs_rollout(tr, examples):
    return tr.strategy.rollout(tr.rollout_context(), examples)


class SpyEngine:
    """The real engine, recording every generate call's requests."""

    def __init__(self, engine):
        self.engine, self.calls = engine, []

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def generate(self, requests, params):
        self.calls.append(list(requests))
        return self.engine.generate(requests, params)


def test_rollout_layout_anchors_and_budgets(lm, tmp_path):
    tr = _trainer(lm, tmp_path)
    ex = tr.prompt_source.examples[:2]
    ro = csrs_rollout(tr, ex)
    n_mat = 2 * 3
    assert len(ro.completions) == n_mat + n_mat * 2
    assert ro.trainable.tolist() == [True] * n_mat + [False] * (n_mat * 2)
    stop = set(tr.engine.stop_ids.tolist())
    for i in range(n_mat, len(ro.completions)):
        j = ro.parents[i]
        mat = ro.completions[j].token_ids
        content = mat[:-1] if mat and mat[-1] in stop else mat
        anchor = int(0.7 * 10 * len(content)) // 10  # floor(0.7 * own length), exact for these small ints
        assert ro.completions[i].prefix_ids == content[:anchor]  # cut at the maternal response's own length
        assert len(ro.completions[i].full_ids) <= 10  # prefix + continuation stay within max_tokens
        assert ro.group_ids[i] == ro.group_ids[j]
        assert ro.prompts[i] is ro.prompts[j]


def test_greedy_reinference_without_noise_reproduces_the_maternal_response(lm, tmp_path):
    tr = _trainer(lm, tmp_path, **{"rollout.temperature": 0, "csrs.perturb": False, "rollout.n": 2})
    ro = csrs_rollout(tr, tr.prompt_source.examples[:2])
    for i in range(4, len(ro.completions)):
        assert ro.completions[i].full_ids == ro.completions[ro.parents[i]].token_ids


def test_clean_image_reinferences_continue_from_the_maternal_kv_cache(lm, tmp_path):
    """csrs.perturb=false on the HF engine: each re-inference continues from its maternal response's kept keys /
    values instead of prefilling prompt + prefix again, and samples exactly what the prefill path samples."""
    from mmevo.grpo.trainer import sequence_logprobs
    from mmevo.rollout.base import RolloutRequest, SamplingParams

    runs = {}
    for reuse in (True, False):
        tr = _trainer(lm, tmp_path / str(reuse), **{"csrs.perturb": False, "rollout.max_tokens": 16, "rollout.n": 4})
        tr.engine.stop_ids = torch.arange(0, len(lm.tokenizer), 9)  # about 1 token in 9 ends a response
        tr.engine.supports_kv_reuse = reuse
        tr.engine.stats = {"prefill_tokens": 0, "generated_tokens": 0}
        runs[reuse] = (csrs_rollout(tr, tr.prompt_source.examples[:3]), dict(tr.engine.stats), tr)
    (a, stats_a, tr), (b, stats_b, _) = runs[True], runs[False]
    n_mat = 12
    assert len({len(c.token_ids) for c in a.completions[:n_mat]}) > 2  # rows left the batch at different steps
    assert [c.full_ids for c in a.completions] == [c.full_ids for c in b.completions]
    for ca, cb in zip(a.completions, b.completions):
        assert ca.logprobs == pytest.approx(cb.logprobs, abs=1e-4)
    assert stats_a["kv_reused_tokens"] > 0 and stats_a["prefill_tokens"] < stats_b["prefill_tokens"] / 2
    assert all(c.kv is None for c in a.completions)  # the kept caches are dropped after the re-inferences
    with torch.no_grad():  # the trainer scores the reused-cache samples as the engine did
        lp, _, _ = sequence_logprobs(tr.model, list(a.prompts), [c.full_ids for c in a.completions],
                                     lm.tokenizer.pad_token_id, 1.0, "cpu")
    for i, c in enumerate(a.completions[n_mat:], start=n_mat):
        k = len(c.prefix_ids)
        assert lp[i, k: k + len(c.token_ids)].tolist() == pytest.approx(c.logprobs, abs=1e-4)
    # a prefix that is not the source completion's is refused
    p = a.prompts[0]
    src = tr.engine.generate([RolloutRequest(p, n=1, keep_kv=True)], SamplingParams(max_tokens=6, seed=0))[0][0]
    assert src.kv is not None
    with pytest.raises(ValueError, match="not a prefix"):
        tr.engine.generate([RolloutRequest(p, n=1, prefix_ids=[src.full_ids[0] + 1], continue_from=src)],
                           SamplingParams(max_tokens=4, seed=0))


def test_vsp_changes_the_pixels_the_model_sees(lm, tmp_path):
    tr = _trainer(lm, tmp_path, **{"rollout.temperature": 0, "csrs.retrace": False, "csrs.sigma": 60})
    prompt = tr.prompts(tr.prompt_source.examples[0])
    noisy = perturbed_prompt(lm.processor, prompt, 60.0, seed=5)
    assert noisy.input_ids == prompt.input_ids and torch.equal(noisy.image_grid_thw, prompt.image_grid_thw)
    assert (noisy.pixel_values - prompt.pixel_values).abs().mean() > 0.1
    assert torch.equal(perturbed_prompt(lm.processor, prompt, 60.0, seed=5).pixel_values, noisy.pixel_values)
    # the perturbed pixels reach the model: the first-token distribution changes
    from mmevo.models.inputs import collate

    with torch.no_grad():
        a = lm.model(**collate(lm.model, [prompt], None, lm.tokenizer.pad_token_id).model_kwargs()).logits[0, -1]
        b = lm.model(**collate(lm.model, [noisy], None, lm.tokenizer.pad_token_id).model_kwargs()).logits[0, -1]
    assert (a - b).abs().max() > 1e-4


def test_only_maternal_responses_reach_the_loss(lm, tmp_path):
    tr = _trainer(lm, tmp_path)
    seen = {}
    real_update = tr._update

    def spy(prompts, responses, adv, micros, plan, *rest):
        seen.update(n=len(responses), adv=adv.clone(), prompts=list(prompts))
        return real_update(prompts, responses, adv, micros, plan, *rest)

    tr._update = spy
    m = tr.step()
    assert seen["n"] == 2 * 3  # prompts x n maternal, no re-inference
    assert m["csrs/reinference_frac"] == pytest.approx(2 / 3)
    # advantages are normalised over maternal samples only: each group's (prompt's) advantages sum to ~0
    groups = torch.tensor([id(p) for p in seen["prompts"]])
    assert len(groups.unique()) == 2
    for g in groups.unique():
        assert abs(float(seen["adv"][groups == g].sum())) < 1e-4
    for key in ["reward/sfr/modal_share", "reward/sfr/distinct_answers", "reward/sfr/sfr_mv_disagree_frac",
                "reward/sfr/pseudo_label_acc", "actor/entropy"]:
        assert key in m, key


@pytest.mark.parametrize("reward", ["majority", "sfr"])
@pytest.mark.parametrize("retrace,perturb", [(False, False), (True, False), (False, True), (True, True)])
def test_table5_ablation_rows_do_what_they_say(lm, tmp_path, reward, retrace, perturb):
    tr = _trainer(lm, tmp_path, **{"reward.heads": f"{{{reward}: 1.0}}", "csrs.retrace": retrace,
                                   "csrs.perturb": perturb, "csrs.sigma": 20.0})
    tr.engine = spy = SpyEngine(tr.engine)
    m = tr.step()
    if not (retrace or perturb):  # plain MM-UPT / frequency reward: one generate call, no re-inference
        assert len(spy.calls) == 1 and m["csrs/reinference_frac"] == 0.0
    else:
        maternal_reqs, rein_reqs = spy.calls
        assert len(spy.calls) == 2 and m["csrs/reinference_frac"] == pytest.approx(2 / 3)
        assert all(r.n == 2 for r in rein_reqs) and len(rein_reqs) == 2 * 3  # m re-inferences per maternal response
        prefixes = [len(r.prefix_ids) for r in rein_reqs]
        if retrace:  # RRM: continued from the anchor, floor(0.7 len) > 0 for responses of >= 2 tokens
            assert sum(prefixes) > 0 and m["csrs/anchor_mean"] == pytest.approx(sum(prefixes) / 6)
        else:  # re-inferred from scratch
            assert prefixes == [0] * 6 and m["csrs/anchor_zero_frac"] == 1.0
        for r in rein_reqs:
            if perturb:  # VSP: the pixels the model sees are noisy, by about sigma (0-255 units) per pixel
                noisy = np.asarray(r.image_override.images[0], dtype=np.float64)
                clean = np.asarray(r.prompt.images[0], dtype=np.float64)
                # E|N(0, 20)| = 16; about half of it is clipped away on the mostly white diagrams
                assert 0.25 * 20 < np.abs(noisy - clean).mean() < 20
                assert not torch.equal(r.image_override.pixel_values, r.prompt.pixel_values)
            else:  # clean pixels: no override, the prompt's own image
                assert r.image_override is None
    assert math.isfinite(m[f"reward/{reward}/mean"]) and math.isfinite(m["actor/loss"])


def test_majority_head_pools_maternal_and_reinference_votes():
    from mmevo.rewards.heads import MajorityHead

    def s(ans, role):
        return ScoredSample(f"<think>x</think> \\boxed{{{ans}}}", 0, None, [], False, role, -1, None)

    # maternal 4, 4, 5 alone would make 4 the mode; with re-inferences 5, 5, 5 the pooled mode is 5 (4 votes to 2)
    samples = [s("4", "maternal"), s("4", "maternal"), s("5", "maternal")] + [s("5", "reinference")] * 3
    r, _ = MajorityHead().score(samples)
    assert r[:3].tolist() == [0.0, 0.0, 1.0]


def test_sfr_head_scores_maternal_by_reinference_frequency():
    def s(ans, g, role="maternal", gold="4"):
        return ScoredSample(f"<think>x</think> \\boxed{{{ans}}}" if ans else "no answer", g, None, [], False, role,
                            -1, gold)

    # group 0: maternal answers 4, 4, 5; re-inferences 5, 5, 5, 4, none, 5
    samples = [s("4", 0), s("4", 0), s("5", 0)] + [s(a, 0, "reinference") for a in ["5", "5", "5", "4", None, "5"]]
    r, m = SFRHead().score(samples)
    # by hand, 9 answers in all (3 maternal + 6 re-inference), gamma 0.2, beta 5, eps 1e-6:
    # a=4: R_base = 3/9 = 0.333333, f_r = 1/6 = 0.166667, f_r/(R_base+eps) - 1 = -0.5000015, tanh(-2.5000075) = -0.986614
    #      R = (1 + 0.2 * -0.986614) * 0.333333 = 0.267559
    # a=5: R_base = 5/9 = 0.555556, f_r = 4/6 = 0.666667, f_r/(R_base+eps) - 1 = 0.1999978, tanh(0.999989) = 0.761590
    #      R = (1 + 0.2 * 0.761590) * 0.555556 = 0.640177
    assert r[:3].tolist() == pytest.approx([0.267559, 0.267559, 0.640177], abs=2e-6)
    assert r[3:].abs().sum() == 0  # re-inferences are never rewarded
    assert m["sfr_mv_disagree_frac"] == 1.0  # MV picks the maternal mode "4", SFR picks "5"
    assert m["pseudo_label_acc"] == 0.0 and m["modal_share"] == pytest.approx(2 / 3)


def test_sfr_head_scores_an_empty_batch():
    r, m = SFRHead().score([])  # a rank with nothing to score (another loop's tap, a collective call)
    assert r.shape == (0,) and m == {}


def test_sfr_needs_csrs():
    with pytest.raises(ConfigError, match="csrs.enabled"):
        load_config(None, ["reward.heads={sfr: 1.0}"])


def test_all_none_group_and_empty_responses_are_zero_not_nan():
    from mmevo.grpo import algos

    samples = [ScoredSample("", 0, None, [], True, "maternal", -1, "4"),
               ScoredSample("no box here", 0, None, [], False, "maternal", -1, "4"),
               ScoredSample("", 0, None, [], False, "reinference", 0, "4")]
    r, m = SFRHead().score(samples)
    assert r.tolist() == [0.0, 0.0, 0.0]
    assert m["modal_share"] == 0.0 and m["distinct_answers"] == 0 and m["pseudo_label_acc"] == 0.0
    adv = algos.group_advantages(r[:2], torch.tensor([0, 0]))
    assert torch.isfinite(adv).all() and adv.abs().sum() == 0
