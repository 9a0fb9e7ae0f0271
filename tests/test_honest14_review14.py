"""Review 14 of HONEST: the reliability bins' labels are the edges the ECE bins with (1); the replay entries a resumed
run cannot use (2); the HONEST reward equations against a restatement from the seed's text (3)."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch

from mmevo.honest.calibration import calibration_report, reliability_bins
from mmevo.rewards.honest import expected_calibration_error


# -- 1. reliability-bin labels are the ECE's linspace edges -----------------------------------------------------------
def _edge_confidences(bins: int) -> list[float]:
    """Every linspace edge, the decimal b / bins beside it, and their float neighbours: the values a label can get
    wrong."""
    out = {0.0, 1.0}
    for b in range(bins + 1):
        for x in (float(np.linspace(0.0, 1.0, bins + 1)[b]), b / bins):
            out.update(v for v in (x, math.nextafter(x, 0.0), math.nextafter(x, 1.0)) if 0.0 <= v <= 1.0)
    return sorted(out)


@pytest.mark.parametrize("bins", list(range(1, 41)) + [64, 100])
def test_each_confidence_lies_between_the_labels_of_its_bin(bins):
    # c = 0.3 at 10 bins was counted in bin 2, labelled [0.2, 0.3): its own label said it was not there (the ECE bins
    # against np.linspace's 0.30000000000000004, the labels were b / bins)
    conf = _edge_confidences(bins) + [round(x / 100, 2) for x in range(101)]
    for c in conf:
        got = [b for b in reliability_bins([c], [True], bins) if b["count"]]
        assert len(got) == 1, c
        b = got[0]
        last = b["hi"] == 1.0
        assert b["lo"] <= c < b["hi"] or (last and c == 1.0), (bins, c, b["lo"], b["hi"])
    labels = reliability_bins([0.5], [True], bins)
    assert labels[0]["lo"] == 0.0 and labels[-1]["hi"] == 1.0
    assert all(a["hi"] == b["lo"] for a, b in zip(labels, labels[1:]))  # contiguous: no gap, no overlap


def test_bin_labels_at_ten_bins_are_the_edges_the_report_compares_with():
    bins = reliability_bins([0.3, 0.6, 0.7], [True, True, False])
    assert [b["count"] for b in bins] == [0, 0, 1, 0, 0, 1, 1, 0, 0, 0]
    assert bins[2]["hi"] == bins[3]["lo"] == 0.30000000000000004 and bins[2]["mean_confidence"] == 0.3
    assert bins[6]["hi"] == 0.7000000000000001 and bins[6]["mean_confidence"] == 0.7


@pytest.mark.parametrize("bad", [math.nan, -0.01, 1.5, math.inf])
def test_reliability_bins_refuse_confidences_outside_the_unit_interval(bad):
    with pytest.raises(ValueError, match="conf must lie in \\[0, 1\\]"):
        reliability_bins([0.5, bad], [True, False])


def _independent_ece(conf: list[float], correct: list[bool], bins: int) -> float:
    """ECE restated without mmevo: edges np.linspace(0, 1, bins + 1); bin = last edge <= c, 1.0 in the last bin."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    members: dict[int, list[int]] = {}
    for i, c in enumerate(conf):
        b = min(int(np.searchsorted(edges, c, side="right")) - 1, bins - 1)
        members.setdefault(b, []).append(i)
    n = len(conf)
    return sum(len(ix) / n * abs(sum(correct[i] for i in ix) / len(ix) - sum(conf[i] for i in ix) / len(ix))
               for ix in members.values())


def _response(c_text: str | None, answer: str) -> str:
    if c_text is None:
        return "<reasoning>r</reasoning><abstain/>"
    return f"<reasoning>r</reasoning><answer>{answer}</answer><confidence>{c_text}</confidence>"


def test_ece_of_the_report_equals_an_independent_computation_from_responses_jsonl(tmp_path):
    rng = random.Random(14)
    records = []
    for i in range(600):
        kind = rng.random()
        gold = str(rng.randint(0, 9))
        answer = gold if rng.random() < 0.55 else str(int(gold) + 1)
        if kind < 0.05:
            text = "no tags at all"  # malformed: not graded
        elif kind < 0.10:
            text = _response(None, answer)  # abstain: not graded
        else:
            c = rng.choice([0.0, 1.0, 0.3, 0.6, 0.7, 0.1, 0.9, round(rng.random(), 2), round(rng.random(), 4)])
            text = _response(f"{c:g}" if rng.random() < 0.8 else f"{c * 100:g}%", answer)
        records.append({"id": f"t{i}", "response": text, "gold": gold})
    from mmevo.honest.calibration import score_response

    path = tmp_path / "responses.jsonl"  # as evaluate_calibration writes it: each record with its score
    path.write_text("".join(json.dumps({**r, **score_response(r["response"], r["gold"])}) + "\n" for r in records))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    graded = [r for r in rows if r["graded"]]
    conf, hits = [r["confidence"] for r in graded], [bool(r["correct"]) for r in graded]
    assert 450 < len(graded) < 600
    for bins in list(range(1, 51)) + [64, 100, 1000]:
        rep = calibration_report(records, bins)
        want = _independent_ece(conf, hits, bins)
        assert rep["ece"] == pytest.approx(want, abs=1e-12), bins
        assert sum(b["count"] for b in rep["bins"]) == len(graded)
        by_bins = sum(b["count"] / len(graded) * abs(b["accuracy"] - b["mean_confidence"])
                      for b in rep["bins"] if b["count"])
        assert by_bins == pytest.approx(want, abs=1e-12), bins
        assert expected_calibration_error(torch.tensor(conf, dtype=torch.float64), torch.tensor(hits), bins) \
            == pytest.approx(want, abs=1e-12)
