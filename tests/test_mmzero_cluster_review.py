"""MM-Zero cluster shares at mmzero.cluster_threshold = 1.0 (the config's upper bound: only duplicates cluster).

A text's float32 unit embedding against itself reads a few 1e-7 below 1.0 for about a third of texts, so at threshold
1.0 identical captions each led a cluster of their own: a proposer repeating one proposal looked perfectly diverse
(shares 1/M, adjustment 0) instead of crowded (-strength)."""

import pytest

from mmevo.evolve.mmzero_demos import demos
from mmevo.models.embedder import cluster, get_embedder
from mmevo.rewards.heads import ScoredSample
from mmevo.rewards.mmzero import ProposerHead


def _texts():
    ds = demos(12, seed=0)
    return [t for d in ds for t in (d.proposal.caption, d.proposal.easy_question, d.proposal.hard_question)]


def test_identical_texts_share_a_cluster_at_threshold_one():
    emb = get_embedder("")
    texts = sorted(set(_texts()))
    for t in texts:
        assert cluster(emb.embed([t, t]), 1.0) == [0, 0], t
    # and a distinct text still leads its own cluster at 1.0
    assert cluster(emb.embed([texts[0], texts[1], texts[0]]), 1.0) == [0, 1, 0]


def test_a_repeated_proposal_is_crowded_at_threshold_one():
    d = demos(12, seed=0)
    head = ProposerHead(cluster_threshold=1.0)
    samples = []
    for demo in d:  # each demo's proposal twice: M = 24, every text at least twice in its column
        p = demo.proposal
        aux = {"valid": True, "content_type": p.content_type, "caption": p.caption, "easy_question": p.easy_question,
               "hard_question": p.hard_question, "executed": [False], "easy": [0.0], "consistency": [0.0]}
        samples += [ScoredSample("", 0, None, [], aux=dict(aux)), ScoredSample("", 0, None, [], aux=dict(aux))]
    M = len(samples)
    rewards, metrics = head.score(samples)
    # the demos repeat some texts (e.g. every bar chart asks "How many bars are there?"): count each column's copies
    cols = [[s.aux[k] for s in samples] for k in ("caption", "easy_question", "hard_question")]
    for i, s in enumerate(samples):
        shares = [col.count(col[i]) / M for col in cols]
        excess = sum((x - 1 / M) * w for x, w in zip(shares, (0.45, 0.20, 0.35))) * M * 0.5
        expected = -min(0.5, max(-0.5, excess))
        type_share = sum(t.aux["content_type"] == s.aux["content_type"] for t in samples) / M
        expected += -0.15 * max(0.0, type_share - 0.5) / 0.5  # no render executed: no easy-hard penalty, base 0
        assert float(rewards[i]) == pytest.approx(expected, abs=1e-6), i
    assert metrics["clusters_caption"] == len(set(cols[0]))
    assert metrics["clusters_easy_question"] == len(set(cols[1]))
    assert metrics["clusters_hard_question"] == len(set(cols[2]))
