"""MM-Zero inputs nobody tried: cluster_threshold 1.0, damaged record values, integers past float64's range.

Cluster shares at mmzero.cluster_threshold = 1.0 (the config's upper bound: only duplicates cluster): a text's float32
unit embedding against itself reads a few 1e-7 below 1.0 for about a third of texts, so identical captions each led a
cluster of their own and a proposer repeating one proposal looked perfectly diverse (adjustment 0, not -strength)."""

import pytest
import torch

import mmevo.rewards.mmzero as R
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


# -- damaged record values (the keys were checked, their values not) ------------------------------------------------
def _records(tmp_path, edit):
    """One proposer record step (a valid proposal, one executed render at c = 0.5, silver "8"), edited by ``edit``."""
    from mmevo.evolve.mmzero import Recorder, RenderedImage, _render_rows
    from test_mmzero_records_review7 import PROPOSAL_FIELDS, _png

    prop = tmp_path / "iter_0" / "proposer"
    recorder = Recorder(prop)
    renders = _render_rows(recorder, "p0", [RenderedImage(True, png=_png(9), consistency=0.5, silver="8")], ["x"])
    row = {"valid": True, "proposal": PROPOSAL_FIELDS, "renders": renders, "penalties": -0.3}
    edit(row)
    recorder.write(0, [row])
    return prop, prop / "records" / "step_0000.jsonl"


def _set(path, value):
    def edit(row):
        target = row
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


@pytest.mark.parametrize("edit, why", [
    (_set(("valid",), "false"), r"'valid' must be true or false, got 'false'"),
    (_set(("penalties",), None), r"'penalties' must be a finite number, got None"),
    (_set(("penalties",), float("nan")), r"'penalties' must be a finite number, got nan"),
    (_set(("renders", 0, "ok"), "false"), r"renders\[0\] 'ok' must be true or false, got 'false'"),
    (_set(("renders", 0, "consistency"), None), r"renders\[0\] 'consistency' must be a number in \[0, 1\], got None"),
    (_set(("renders", 0, "consistency"), float("nan")), r"renders\[0\] 'consistency' must be a number in \[0, 1\]"),
    (_set(("renders", 0, "consistency"), 1.5), r"renders\[0\] 'consistency' must be a number in \[0, 1\], got 1.5"),
    (_set(("renders", 0, "consistency"), True), r"renders\[0\] 'consistency' must be a number in \[0, 1\], got True"),
    (_set(("renders", 0, "silver"), 8), r"renders\[0\] 'silver' must be text or null, got 8"),
    (_set(("renders", 0, "image"), None), r"renders\[0\] 'image' of a render must be its file name, got None"),
], ids=["valid_text", "penalties_null", "penalties_nan", "ok_text", "c_null", "c_nan", "c_above_1", "c_bool",
        "silver_number", "image_null"])
def test_a_record_value_the_later_phases_cannot_use_is_named(tmp_path, edit, why):
    from mmevo.evolve import mmzero

    prop, path = _records(tmp_path, edit)
    with pytest.raises(ValueError, match=rf"{path}:1: {why}"):
        mmzero.coder_train_set(mmzero.Recorder.read(prop, mmzero.record_problem), 0.0, 1.0, "python")
    with pytest.raises(ValueError, match=rf"{path}:1: {why}"):
        mmzero.solver_train_set([prop], 0.0, 1.0, 0, 0)


def test_whole_records_still_feed_both_phases(tmp_path):
    from mmevo.evolve import mmzero

    prop, _ = _records(tmp_path, lambda row: None)
    coder = mmzero.coder_train_set(mmzero.Recorder.read(prop, mmzero.record_problem), 0.0, 1.0, "python")
    assert len(coder) == 1 and coder[0].meta["penalties"] == -0.3
    solver = mmzero.solver_train_set([prop], 0.0, 1.0, 0, 0)
    assert len(solver) == 1 and solver[0].answer == "8"
    # a failed render's null image and silver, and an invalid row without a proposal, stay readable
    prop2, _ = _records(tmp_path / "b", lambda row: row["renders"][0].update(ok=False, image=None, silver=None))
    assert mmzero.solver_train_set([prop2], 0.0, 1.0, 0, 0) == []


# -- integers past float64's range (math.isfinite / float() raise OverflowError on them) ----------------------------
HUGE = 10 ** 400


@pytest.mark.parametrize("call, name", [
    (lambda: R.diversity_adjustment(torch.tensor([[0.5, 0.25, 0.25]]), HUGE), "valid_count"),
    (lambda: R.diversity_adjustment(torch.tensor([[0.5, 0.25, 0.25]]), 4, HUGE), "strength"),
    (lambda: R.easy_hard_penalty([HUGE]), r"consistencies\[0\]"),
    (lambda: R.easy_hard_penalty([0.5], HUGE), "threshold"),
    (lambda: R.easy_hard_penalty([0.5], 0.15, HUGE), "penalty"),
    (lambda: R.coder_reward(True, 0.5, 0.5, HUGE), "penalties"),
    (lambda: R.coder_reward(True, HUGE, 0.5, 0.0), "easy"),
    (lambda: R.type_penalties(["a", "b", "a"], HUGE), "weight"),
], ids=["valid_count", "strength", "consistency", "threshold", "penalty", "coder_penalties", "coder_easy", "weight"])
def test_an_integer_past_float_range_is_a_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        call()


def test_large_integers_within_float_range_still_score():
    # M = 2**63: shares far above 1/M -> clipped to -strength; an integral strength works as its float
    assert R.diversity_adjustment(torch.tensor([[0.5, 0.25, 0.25]]), 2 ** 63).tolist() == [-0.5]
    assert R.diversity_adjustment(torch.tensor([[0.25, 0.25, 0.25]], dtype=torch.float64), 4, 2).tolist() == [0.0]
    assert R.easy_hard_penalty([0.0], 0.15, 1) == -1.0


# -- one text or None where the solver's answer list belongs --------------------------------------------------------
@pytest.mark.parametrize("call, message", [
    (lambda: R.easy_accuracy("77", "7"), r"answers must be a list with one entry per sample, got the text '77'"),
    (lambda: R.easy_accuracy(None, "7"), r"answers must be a list of the solver's answers"),
    (lambda: R.easy_accuracy(["7"], None), r"easy_answer must be the proposal's easy answer, got None"),
    (lambda: R.modal_share("aab"), r"answers must be a list with one entry per sample, got the text 'aab'"),
    (lambda: R.modal_share(None, answered_only=True), r"answers must be a list of answer keys"),
], ids=["easy_text", "easy_none", "easy_answer_none", "modal_text", "modal_none"])
def test_text_or_none_for_the_answer_lists_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_answer_lists_still_score_by_the_seed():
    assert R.easy_accuracy(["7", "7.0", None, "8"], "7") == 0.5  # None counts in the denominator
    assert R.easy_accuracy([], "7") == 0.0
    assert R.easy_accuracy(("7",), "7") == 1.0
    assert R.modal_share(["a", None, "b", "b"], answered_only=True) == ("b", 2 / 3)
    assert R.modal_share(["a", None, "b", "b"]) == ("b", 0.5)
    assert R.modal_share([None, None]) == (None, 0.0) and R.modal_share([]) == (None, 0.0)


def test_text_for_the_type_and_label_lists_is_named():
    with pytest.raises(ValueError, match=r"types must be a list with one entry per sample, got the text 'aab'"):
        R.type_penalties("aab")
    with pytest.raises(ValueError, match=r"population must be a list with one entry per sample, got the text 'ab'"):
        R.type_penalties(["a"], population="ab")
    with pytest.raises(ValueError, match=r"labels must be a list with one entry per sample, got the text '001'"):
        R.cluster_shares("001")
    assert R.type_penalties(["a", "a", "a", "b"]) == pytest.approx([-0.075, -0.075, -0.075, 0.0])
    assert R.cluster_shares([0, 0, 1]) == pytest.approx([2 / 3, 2 / 3, 1 / 3])
