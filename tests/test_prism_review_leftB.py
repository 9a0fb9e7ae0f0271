"""Prism review (leftB): an invisible-only question is no question; diversity_stats takes an integer k only."""

import numpy as np
import pytest

from mmevo.evolve.prism import parse_question
from mmevo.rewards.heads import ScoredSample
from mmevo.rewards.prism import PrismCoverageHead, diversity_stats

# zero-width space / non-joiner / joiner, word joiner, BOM, soft hyphen, LRM (all Cf) mixed with whitespace
INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u200e", " \u200b\t\u2060\n\ufeff "]


@pytest.mark.parametrize("blank", INVISIBLE)
def test_parse_question_reads_invisible_only_content_as_empty(blank):
    assert parse_question(f"<question>{blank}</question>") == (None, "empty")


def test_parse_question_keeps_a_question_with_a_zero_width_character_inside():
    assert parse_question("<question>What is 2\u200b+2?</question>") == ("What is 2\u200b+2?", "")


@pytest.mark.parametrize("blank", INVISIBLE)
def test_head_scores_an_invisible_only_question_as_invalid(blank):
    head = PrismCoverageHead(centroids="", k=2, gamma=0.5)
    rows = [{"question": blank, "p": 0.75, "cluster": 0}, {"question": "a", "p": 0.75, "cluster": 1}]
    r, m = head.score([ScoredSample("q", 0, None, None, aux=dict(a)) for a in rows])
    assert r.tolist()[0] == -1.0  # as an empty question: no reward, no visit
    assert r.tolist()[1] > 0
    assert m["valid_frac"] == 0.5
    assert head.counts.tolist() == pytest.approx([0.5, 1.0])  # only cluster 1 was visited


@pytest.mark.parametrize("k", [4.0, np.float64(4.0), 2.5, True, "4", float("nan")])
def test_diversity_stats_refuses_a_non_integer_k(k):
    with pytest.raises(ValueError, match="k must be an integer"):
        diversity_stats([0, 1], k)


@pytest.mark.parametrize("k", [4, np.int64(4), np.int32(4)])
def test_diversity_stats_takes_python_and_numpy_integers(k):
    s = diversity_stats([0, 1], k)
    assert s["active_clusters"] == 2 and s["normalized_entropy"] == pytest.approx(0.5) and s["gini"] == 0.5


def test_read_corpus_skips_an_invisible_only_question_as_missing_text(tmp_path):
    from mmevo.prism.clusters import read_corpus

    f = tmp_path / "q.jsonl"
    f.write_text('{"problem": "\\u200b\\u2060 \\ufeff", "answer": "1"}\n{"problem": "What is 1+1?", "answer": "2"}\n')
    c = read_corpus(f)
    assert c.questions == ["What is 1+1?"]
    assert c.stats["skipped_by_reason"] == {"missing_text": 1}


@pytest.mark.parametrize("k", [4.5, 4.0, True, "4", -1])
def test_coverage_head_refuses_a_non_integer_k(k):
    with pytest.raises(ValueError, match="prism_coverage: k must be an integer"):
        PrismCoverageHead(centroids="", k=k)
    assert PrismCoverageHead(centroids="", k=np.int64(4)).k == 4
