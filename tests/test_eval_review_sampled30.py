"""Sampled evaluation on hostile inputs: problem kinds of mixed types, bools and floats as counts."""

from __future__ import annotations

import numpy as np
import pytest

from mmevo.data.schema import Example
from mmevo.eval.sampled import bootstrap_ci, paired_diff_ci, sampled_records, summarize_sampled


class _ScriptedEngine:
    """Returns fixed texts as completions (tokenised by the real tiny tokenizer)."""

    def __init__(self, tokenizer, texts_per_request):
        self.tok, self.texts = tokenizer, texts_per_request

    def generate(self, requests, params):
        from mmevo.rollout.base import Completion

        return [[Completion(self.tok(t, add_special_tokens=False)["input_ids"], [], "stop") for t in texts[:r.n]]
                for r, texts in zip(requests, self.texts)]


def test_kinds_of_mixed_types_are_one_sortable_key_each(tiny_vl_path):
    """A data file's meta.kind may be null, a number or text: the summary sorted them (a TypeError after every
    problem was generated), and 7 and "7" were two kinds; now as the held-out evaluation keys them."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_vl_path)
    kinds = [None, 7, "7", "geo", ""]
    exs = [Example(id=str(i), problem="p", answer="3", choices=[], images=[], meta={"kind": k})
           for i, k in enumerate(kinds)]
    texts = [["\\boxed{3}", "\\boxed{3}"], ["\\boxed{3}", "\\boxed{4}"], ["\\boxed{4}", "\\boxed{4}"],
             ["\\boxed{3}", "x"], ["\\boxed{4}", "\\boxed{3}"]]
    recs = sampled_records(_ScriptedEngine(tok, texts), lambda ex: ex, exs, tok, n=2, max_tokens=8)
    assert [r["kind"] for r in recs] == ["all", "7", "7", "geo", "all"]
    s = summarize_sampled(recs)
    assert s["by_kind"] == {"7": {"n": 2, "pass1": 0.25, "maj": 0.5}, "all": {"n": 2, "pass1": 0.75, "maj": 0.5},
                            "geo": {"n": 1, "pass1": 0.5, "maj": 1.0}}
    assert s["pass1"] == pytest.approx(0.5) and s["maj"] == pytest.approx(0.6)


def test_sample_and_bootstrap_counts_must_be_integers(tiny_vl_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_vl_path)
    exs = [Example(id="a", problem="p", answer="3", choices=[], images=[], meta={})]
    eng = _ScriptedEngine(tok, [["\\boxed{3}", "\\boxed{3}"]])
    for bad in (True, 2.0, 1.5):
        with pytest.raises(ValueError, match="n must be an integer"):
            sampled_records(eng, lambda ex: ex, exs, tok, n=bad, max_tokens=8)
    for bad in (True, 100.0):  # True drew one resample; a float failed inside numpy naming no argument
        with pytest.raises(ValueError, match="integer n_boot"):
            bootstrap_ci([1.0, 0.0], n_boot=bad)
    assert bootstrap_ci([1.0, 0.0, 1.0], n_boot=np.int64(50)) == bootstrap_ci([1.0, 0.0, 1.0], n_boot=50)
    # one problem: the percentile interval is the point itself
    assert bootstrap_ci([0.25]) == [0.25, 0.25]


def test_bootstrap_needs_one_value_per_problem():
    """A per-sample table (problems x samples) or a bare number failed as an IndexError that named nothing."""
    for bad in ([[1.0, 1.0], [1.0, 1.0], [0.0, 0.0]], 0.5):
        with pytest.raises(ValueError, match="one value per problem"):
            bootstrap_ci(bad)
    with pytest.raises(ValueError, match="one value per problem"):
        paired_diff_ci([[1.0], [0.0]], [[0.0], [0.0]])
    assert paired_diff_ci([1.0, 0.0], [0.0, 0.0], n_boot=10)["mean"] == 0.5
