"""Sampled evaluation (pass@1, maj@n, bootstrap intervals) and the demo's thread plan and SFT resume."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mmevo.eval.sampled import bootstrap_ci, paired_diff_ci, sampled_records, summarize_sampled


def test_bootstrap_interval_brackets_the_mean_and_shrinks_with_n():
    rng = np.random.default_rng(0)
    small = rng.binomial(1, 0.4, 100).astype(float)
    big = rng.binomial(1, 0.4, 1600).astype(float)
    lo, hi = bootstrap_ci(small)
    assert lo < small.mean() < hi
    blo, bhi = bootstrap_ci(big)
    # the interval of a mean shrinks like 1/sqrt(n): 16x the problems, about a quarter of the width
    assert 0.15 < (bhi - blo) / (hi - lo) < 0.4
    # 95% of a binomial(0.4) mean over 1600: about +-1.96 * sqrt(0.24 / 1600) = +-0.024
    assert abs((bhi - blo) / 2 - 1.96 * np.sqrt(0.24 / 1600)) < 0.005
    assert bootstrap_ci([1.0] * 10) == [1.0, 1.0]


def test_paired_interval_sees_a_small_consistent_lift():
    before = np.tile([0.0, 0.25, 0.5, 0.75], 50)
    after = before + 0.125  # every problem gains one sample of eight
    d = paired_diff_ci(after, before)
    assert d["mean"] == pytest.approx(0.125) and d["ci"] == pytest.approx([0.125, 0.125])
    with pytest.raises(ValueError, match="length"):
        paired_diff_ci([1.0], [1.0, 2.0])


def test_summary_counts_pass1_and_majority_per_kind():
    recs = [{"kind": "a", "correct": [1, 1, 0, 0], "pass1": 0.5, "maj": 1, "modal_share": 0.5},
            {"kind": "a", "correct": [0, 0, 0, 1], "pass1": 0.25, "maj": 0, "modal_share": 0.75},
            {"kind": "b", "correct": [1, 1, 1, 1], "pass1": 1.0, "maj": 1, "modal_share": 1.0}]
    s = summarize_sampled(recs)
    assert s["pass1"] == pytest.approx(1.75 / 3) and s["maj"] == pytest.approx(2 / 3)
    assert s["by_kind"]["a"] == {"n": 2, "pass1": 0.375, "maj": 0.5}
    assert s["samples_per_problem"] == 4 and s["pass1_ci"][0] <= s["pass1"] <= s["pass1_ci"][1]


class _ScriptedEngine:
    """Returns the given texts as completions (tokenised by the real tiny tokenizer): what each sample says is
    fixed, so pass@1 and maj@n can be checked exactly."""

    def __init__(self, tokenizer, texts_per_request):
        self.tok, self.texts = tokenizer, texts_per_request

    def generate(self, requests, params):
        from mmevo.rollout.base import Completion

        assert params.temperature == 1.0
        return [[Completion(self.tok(t, add_special_tokens=False)["input_ids"], [], "stop") for t in texts[:r.n]]
                for r, texts in zip(requests, self.texts)]


def test_records_from_real_tokenizer_and_answer_equivalence(tiny_vl_path):
    from transformers import AutoTokenizer

    from mmevo.data.figures import generate_figures

    tok = AutoTokenizer.from_pretrained(tiny_vl_path)

    exs = generate_figures(2, seed=3)
    g0, g1 = exs[0].answer, exs[1].answer
    wrong0 = str(int(g0) + 1)
    texts = [[f"\\boxed{{{wrong0}}}", f"\\boxed{{{g0}}}", f"\\boxed{{{g0}.0}}", "no answer"],  # mode = gold (2 of 4)
             [f"\\boxed{{{int(g1) + 2}}}", f"\\boxed{{{int(g1) + 2}}}", f"\\boxed{{{g1}}}", "x"]]  # mode wrong
    eng = _ScriptedEngine(tok, texts)
    recs = sampled_records(eng, lambda ex: ex, exs, tok, n=4, max_tokens=8)
    # the first sample is wrong, the mode is right: maj comes from the vote, not from any one sample
    assert recs[0]["correct"] == [0, 1, 1, 0] and recs[0]["pass1"] == 0.5 and recs[0]["maj"] == 1
    assert recs[1]["correct"] == [0, 0, 1, 0] and recs[1]["maj"] == 0 and recs[1]["modal_share"] == 0.5
    with pytest.raises(ValueError, match="n must be"):
        sampled_records(eng, lambda ex: ex, exs, tok, n=0, max_tokens=8)


def test_thread_plan_adapts_to_the_machine():
    from mmevo.demo import plan_threads

    few = plan_threads(2, available=1)
    assert few["threads"] == 1 and not few["parallel"] and "1 core" in few["note"]
    ok = plan_threads(2, available=2)
    assert ok["parallel"] and ok["threads_per_run"] == 1 and ok["note"] is None
    assert plan_threads(0, available=8) == {"configured": 0, "available": 8, "threads": 8, "parallel": True,
                                            "threads_per_run": 4, "note": None}


@pytest.mark.parametrize("extra", [[], ["model.lora.rank=4", "model.lora.dropout=0.3", "sft.lr=3e-3"]],
                         ids=["full", "lora-dropout"])
def test_sft_resumes_from_its_saved_state(tiny_vl_path, tmp_path, extra):
    """An SFT interrupted after a saved state and rerun ends with the same weights as one uninterrupted run; with
    dropout too (the saved state holds the global generators that draw its masks)."""
    import torch

    from mmevo.config import load_config
    from mmevo.grpo.sft import STATE_FILE, run_sft
    from mmevo.recipes import load_examples, load_policy

    def cfg(out):
        return load_config(None, [f"model.path={tiny_vl_path}", "data.train=figures", "data.n_train=24",
                                  "sft.batch_size=4", "sft.epochs=1", "sft.save_every=2", f"sft.output_dir={out}",
                                  "trainer.progress=false", "data.prompt_template=none", *extra])

    full = cfg(tmp_path / "full")
    ref = load_policy(full)
    run_sft(full, ref, load_examples(full, "train")[0])

    part = cfg(tmp_path / "part")
    pol = load_policy(part)
    examples = load_examples(part, "train")[0]

    class Stop(Exception):
        pass

    steps = []
    orig = torch.optim.AdamW.step

    def step_then_stop(self, *a, **k):  # the 5th optimizer step never happens: interrupted after state 4
        if len(steps) == 4:
            raise Stop
        steps.append(1)
        return orig(self, *a, **k)

    torch.optim.AdamW.step = step_then_stop
    try:
        with pytest.raises(Stop):
            run_sft(part, pol, examples)
    finally:
        torch.optim.AdamW.step = orig
    assert (tmp_path / "part" / STATE_FILE).exists()
    pol2 = load_policy(part)  # a new process: fresh weights, then the state
    steps.clear()
    counted = []

    def count_steps(self, *a, **k):
        counted.append(1)
        return orig(self, *a, **k)

    torch.optim.AdamW.step = count_steps
    try:
        history = run_sft(part, pol2, examples)
    finally:
        torch.optim.AdamW.step = orig
    assert len(counted) == 2  # only the steps after the saved state are trained again
    assert len(history) == 6  # all 6 steps, the first 4 from the saved state
    for (n, a), (_, b) in zip(ref.model.state_dict().items(), pol2.model.state_dict().items()):
        assert torch.allclose(a, b, atol=1e-6), n
    lines = [json.loads(x) for x in (tmp_path / "part" / "sft_metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [1, 2, 3, 4, 5, 6]  # no duplicate steps in the curve
