"""MM-Zero, fourth review: the easy-hard penalty exactly at its threshold, each proposal's reward over its own number of
render attempts, and non-answers written in LaTeX on the hard question. Expected values worked by hand."""

from types import SimpleNamespace

import pytest
import torch

from mmevo.evolve.mmzero import Judge, Proposal, substantive
from mmevo.rewards.mmzero import ProposerHead, easy_hard_penalty, proposal_penalties

P = Proposal("table", "A table with x=3.", "What is x?", "3", "What is x times 2?", "6")
SVG = "```svg\n<svg/>\n```"


# -- easy-hard penalty: -0.3 when mean min(c, 1 - c) over executed renders is < 0.15 (strict) --------------------------
@pytest.mark.parametrize("cs", [[0.1, 0.8], [0.8, 0.9], [0.0, 0.2, 0.8, 0.8], [0.8, 0.8, 0.8, 1.0], [0.15], [0.85],
                                [0.05, 0.25], [0.3, 0.0]])
def test_easy_hard_mean_exactly_on_the_threshold_is_not_below_it(cs):
    # shares of 5 / 10 / 20 solver samples; each mean of min(c, 1 - c) is exactly 3/20 (0.1 and 1 - 0.8 = 0.2 ->
    # 0.15), which float rounding put a few ulps under 0.15 (-0.3) for the first four
    assert easy_hard_penalty(cs) == 0.0


def test_easy_hard_below_the_threshold_is_still_penalised():
    assert easy_hard_penalty([0.1, 0.81]) == -0.3  # (0.1 + 0.19) / 2 = 0.145
    assert easy_hard_penalty([0.85, 0.9]) == -0.3  # (0.15 + 0.1) / 2 = 0.125
    assert easy_hard_penalty([1.0, 0.0, 0.2, 0.2]) == -0.3  # 0.1


def test_proposal_penalties_on_and_below_the_threshold():
    # failed attempts are left out: 0 (mean exactly 0.15; was -0.3) and -0.3 (0.145); two types 50/50: no type penalty
    aux = [{"valid": True, "content_type": "table", "executed": [True, True, False], "consistency": [0.1, 0.8, 0.0]},
           {"valid": True, "content_type": "map", "executed": [True, True], "consistency": [0.1, 0.81]}]
    assert proposal_penalties(aux) == [(0.0, 0.0), (-0.3, 0.0)]


# -- ProposerHead -------------------------------------------------------------------------------------------------------
class _ExactEmbedder:
    """Equal texts -> equal unit vectors, different texts -> orthogonal ones (clusters = distinct texts)."""

    def __init__(self):
        self.ids = {}

    def embed(self, texts):
        out = torch.zeros(len(texts), 32)
        for i, t in enumerate(texts):
            out[i, self.ids.setdefault(t, len(self.ids))] = 1.0
        return out


def _head_rewards(monkeypatch, auxes):
    import mmevo.models.embedder as emb

    monkeypatch.setattr(emb, "get_embedder", lambda name="": _ExactEmbedder())
    samples = [SimpleNamespace(aux=dict(a)) for a in auxes]
    r, _ = ProposerHead().score(samples)
    return r.tolist()


def _aux(k, executed, easy, cons, content_type="table"):
    return {"valid": True, "content_type": content_type, "caption": f"caption {k}", "easy_question": f"easy {k}",
            "hard_question": f"hard {k}", "executed": executed, "easy": easy, "consistency": cons}


def test_proposer_head_mean_on_the_threshold_gets_no_easy_hard_penalty(monkeypatch):
    # one proposal (M = 1: diversity 0, one type: 0); base (1/2)[(.5 + .1) + (.5 + .2)] = .65, no penalty (was .35)
    assert _head_rewards(monkeypatch, [_aux(0, [True, True], [1.0, 1.0], [0.1, 0.8])]) == pytest.approx([0.65])


def test_proposer_head_divides_each_proposal_by_its_own_attempts(monkeypatch):
    # distinct texts, M = 3: every share 1/3 = 1/M -> diversity 0; one type -> type 0; min(c, 1 - c) = .5 -> no
    # easy-hard penalty. Base rewards over each proposal's own N (the released code's num_codegen_rollouts):
    # A: (1/1)(.5 + .5) = 1.0 (was 1/4 padded to the longest proposal's 4 attempts)
    # B: (1/4)(.5 + .5) = .25; C: (1/2)(.5 + .5 + .5 + .5) = 1.0 (was .5)
    auxes = [_aux(0, [True], [1.0], [0.5]),
             _aux(1, [True, False, False, False], [1.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]),
             _aux(2, [True, True], [0.5, 0.5], [0.5, 0.5]),
             {"valid": False}]
    assert _head_rewards(monkeypatch, auxes) == pytest.approx([1.0, 0.25, 1.0, -1.0])


def test_proposer_head_proposal_without_attempts_is_one_failed_attempt(monkeypatch):
    # the released code: N = max(number of codes, 1). Two proposals, two types 50/50 (no type penalty), M = 2,
    # distinct texts (shares 1/2 = 1/M: diversity 0); the one with no attempt scores 0, no easy-hard penalty
    auxes = [_aux(0, [], [], [], "map"), _aux(1, [True, True], [1.0, 1.0], [0.5, 0.5])]
    assert _head_rewards(monkeypatch, auxes) == pytest.approx([0.0, 1.0])


def test_proposer_head_names_a_proposal_whose_attempt_lists_disagree(monkeypatch):
    auxes = [_aux(0, [True], [1.0], [0.5]), _aux(1, [True, False], [1.0], [0.5, 0.0])]
    with pytest.raises(ValueError, match="proposer sample 1: executed / easy / consistency give 2 / 1 / 2"):
        _head_rewards(monkeypatch, auxes)


# -- hard-question non-answers written in LaTeX ------------------------------------------------------------------------
from test_mmzero_review3 import _Pool, _png  # noqa: E402  (a renderer that returns a white PNG per job)


class _Solver:
    def __init__(self, hard):
        self.hard = hard

    def sample(self, exs, n, seed):
        return [["\\boxed{3}"] * len(self.hard) if ex.problem.endswith("What is x?") else self.hard for ex in exs]


def _judge_hard(hard):
    (r,) = Judge(_Pool(), _Solver(hard), len(hard), 1.0, min_pixels=0, max_pixels=0)([SVG], [P], seed=0)
    return r


@pytest.mark.parametrize("spelling", ["\\text{None}", "\\mathrm{N/A}", "$None$", "NONE.", "\\textbf{Unknown}",
                                      "\\text{ null }", "\\text{N/A}."])
def test_latex_spelled_non_answers_are_non_answers(spelling):
    assert substantive(spelling) is None


def test_latex_spelled_non_answers_stay_out_of_the_majority_and_the_silver_label():
    r = _judge_hard(["\\boxed{\\text{None}}"] * 3 + ["\\boxed{7}"])
    assert r.ok and r.consistency == 1.0 and r.silver == "7"  # was .75 with the silver label "\text{None}"
    r = _judge_hard(["\\boxed{\\text{None}}", "\\boxed{\\text{None}}", "\\boxed{7}", "\\boxed{8}"])
    assert r.consistency == 0.5 and r.silver == "7"  # was .5 with the silver label "\text{None}"
    r = _judge_hard(["\\boxed{NONE.}", "\\boxed{$None$}", "\\boxed{\\mathrm{N/A}}"])
    assert r.ok and r.consistency == 0.0 and r.silver is None  # nobody answered (was 1/2, silver "NONE.")
    assert r.hard_answers == ["NONE.", "None", "\\mathrm{N/A}"]  # the record keeps what the solver said


def test_latex_wrapping_keeps_real_answers():
    assert [substantive(a) for a in ["\\text{7 apples}", "\\text{None of them}", "\\text{no}", "$0$", "-5"]] == \
        ["\\text{7 apples}", "\\text{None of them}", "\\text{no}", "$0$", "-5"]


def test_a_render_the_judge_cannot_load_fails_that_attempt_not_the_step():
    """A PNG the sandbox passed but PIL cannot convert (a palette tRNS past 256 values, before the sandbox refused it):
    that attempt is invalid_image, the other attempt is judged as usual."""
    import struct
    import zlib

    from render.types import RenderResult

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))

    broken = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 3, 0, 0, 0)) +
              chunk(b"PLTE", b"\xff\x00\x00") + chunk(b"tRNS", b"\x80" * 257) +
              chunk(b"IDAT", zlib.compress(b"\x00\x00\x00" * 2)) + chunk(b"IEND", b""))

    class Pool:
        def render_many(self, jobs, timeout_s):
            return [RenderResult(True, broken, width=2, height=2), RenderResult(True, _png(), width=8, height=8)]

    class Solver:
        def sample(self, exs, n, seed):
            return [["\\boxed{3}"] * n for _ in exs]

    r_bad, r_good = Judge(Pool(), Solver(), 4, 1.0, min_pixels=0, max_pixels=0)([SVG, SVG], [P, P], seed=0)
    assert (r_bad.ok, r_bad.error_kind) == (False, "invalid_image") and "does not load" in r_bad.message
    assert r_good.ok and r_good.consistency == 1.0
