"""CSRS review 14: a rerun into the output dir of a run that has already run all its steps, with a knob changed
(``csrs.omega=0.5`` after a run at 0.7), trains nothing, so it must not be reported as a run under the new value; a
boxed blank (``\\quad``, ``\\ ``) is no answer for the votes; SFR and majority vote against references written from
the seeds."""

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from mmevo import recipes
from test_csrs12_review12 import _cfg  # the tiny CSRS run (sfr head, m = 1, omega = 0.7) the earlier review used


def test_a_finished_run_rerun_with_a_changed_knob_is_refused_not_reported_as_applied(tiny_vl_path, tmp_path):
    out = tmp_path / "run"
    recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=1"))
    summary_before = (out / "summary.json").read_text()
    weights_before = load_file(out / "final" / "model.safetensors")
    # it used to resume at step 1 of 1, warn "this run's values apply", run no step, re-export the same weights and
    # write a summary whose config said omega 0.5 with resumed_with_changes [{step 1, csrs.omega, 0.7 -> 0.5}]:
    # a model trained wholly at 0.7 recorded as a run at 0.5
    with pytest.raises(ValueError, match=r"(?s)all 1 of its trainer\.steps=1.*csrs\.omega 0\.7 -> 0\.5.*"
                                         r"trainer\.steps.*trainer\.resume=false"):
        recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=1", "csrs.omega=0.5"))
    assert (out / "summary.json").read_text() == summary_before  # nothing rewritten
    assert json.loads(summary_before)["config"]["csrs"]["omega"] == 0.7
    weights_after = load_file(out / "final" / "model.safetensors")
    assert all(torch.equal(weights_before[k], weights_after[k]) for k in weights_before)

    # the same rerun with the run's own settings still re-exports and re-evaluates (nothing to refuse) ...
    again = recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=1"))
    assert "resumed_with_changes" not in again
    # ... and raising trainer.steps continues the run under the new value, which then applies to step 2
    more = recipes.run_grpo(_cfg(tiny_vl_path, out, "trainer.steps=2", "csrs.omega=0.5"))
    assert more["resumed_with_changes"] == [{"step": 1, "key": "csrs.omega", "was": 0.7, "now": 0.5}]
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]


@pytest.mark.parametrize("blank", ["\\quad", "\\qquad", "\\enspace", "\\hspace{1cm}", "\\quad\\quad"])
def test_a_boxed_wide_space_is_no_answer_for_majority_vote_and_sfr(blank):
    from mmevo.rewards.answers import canonical_answer
    from mmevo.rewards.heads import SFRHead, ScoredSample
    from mmevo.rewards.majority import majority_vote_rewards

    # "\boxed{\,}" was no answer but "\boxed{\quad}" the answer "\quad": three blanks out-voted two 7s, became the
    # group's pseudo label and scored 1 (the 7s scored 0)
    responses = [f"<think>fill in</think> \\boxed{{{a}}}" for a in [blank, blank, blank, "7", "7"]]
    rewards, info = majority_vote_rewards(responses, [0] * 5)
    assert rewards.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert info["pseudo_labels"] == {0: "7"} and info["no_answer_frac"] == 0.6
    # SFR: a blank maternal answer scores 0, and blank re-inferences count for nothing (7: 2 of 6, 1 of 4)
    samples = [ScoredSample(f"\\boxed{{{a}}}", 0, None, None, role=role) for a, role in
               [(blank, "maternal"), ("7", "maternal"), (blank, "reinference"), (blank, "reinference"),
                ("7", "reinference"), (blank, "reinference")]]
    sfr, _ = SFRHead().score(samples)
    r_base = 2 / 6
    expected_7 = (0.2 * math.tanh(5.0 * ((1 / 4) / (r_base + 1e-6) - 1.0)) + 1.0) * r_base
    assert sfr[0].item() == 0.0 and sfr[1].item() == pytest.approx(expected_7, rel=1e-6)
    # a number with a wide space beside it is still the number; a command that only starts with "quad" is kept
    assert canonical_answer(f"5{blank}") == canonical_answer(f"{blank} 5") == ("num", 5)
    assert canonical_answer("\\quadrilateral") == ("str", "\\quadrilateral")


def test_response_no_answer_frac_counts_a_boxed_blank_as_no_answer():
    from types import SimpleNamespace

    from mmevo.grpo.trainer import GRPOTrainer
    from mmevo.rollout.strategy import Rollout

    # response/no_answer_frac said 0.0 for a group of "\boxed{\,}" that no vote counted: it read extraction only
    texts = ["\\boxed{\\,}", "\\boxed{\\quad}", "\\boxed{}", "no box", "\\boxed{3}", "\\boxed{\\text{}}"]
    comps = [SimpleNamespace(full_ids=[1, 2], finish_reason="stop") for _ in texts]
    examples = [SimpleNamespace(choices=None) for _ in texts]
    rollout = Rollout([None] * 6, comps, texts, torch.zeros(6, dtype=torch.long), examples)
    metrics = GRPOTrainer._response_metrics(None, rollout, torch.zeros(6), torch.zeros(6), list(range(6)))
    assert metrics["response/no_answer_frac"] == pytest.approx(5 / 6)


def _seed_sfr(maternal, reinference, m, n, gamma, beta, eps=1e-6):
    """Eq. 7-8 of the CSRS paper as written: R_base = Count(a, A_all) / ((m+1) n), f_r = Count(a, A_m) / (m n),
    R_final = (gamma tanh(beta (f_r / (R_base + eps) - 1)) + 1) R_base; no answer scores 0."""
    every = list(maternal) + list(reinference)
    out = []
    for a in maternal:
        if a is None:
            out.append(0.0)
            continue
        r_base = sum(b == a for b in every) / ((m + 1) * n)
        f_r = sum(b == a for b in reinference) / (m * n)
        out.append((gamma * math.tanh(beta * (f_r / (r_base + eps) - 1.0)) + 1.0) * r_base)
    return out


def test_sfr_and_majority_vote_match_references_written_from_the_seeds_on_random_groups():
    import random

    from mmevo.rewards.majority import majority_vote_rewards
    from mmevo.rewards.sfr import softened_frequency_rewards

    rng = random.Random(14)
    for _ in range(3000):  # ties, all-distinct, all-equal, all-None, n = 1, m = 1 all occur
        n, m, k = rng.randint(1, 9), rng.randint(1, 6), rng.choice([1, 2, 3, 50])
        p_none = rng.choice([0.0, 0.3, 1.0])
        draw = lambda: None if rng.random() < p_none else rng.randrange(k)  # noqa: E731
        maternal, reinference = [draw() for _ in range(n)], [draw() for _ in range(m * n)]
        gamma, beta = rng.choice([0.0, 0.2, 0.35]), rng.choice([0.0, 3.5, 5.0])
        got = softened_frequency_rewards(maternal, reinference, gamma, beta).tolist()
        assert got == pytest.approx(_seed_sfr(maternal, reinference, m, n, gamma, beta), abs=1e-12)

        # majority vote (MM-UPT): 1 iff the answer is the group's most frequent one; no answer never votes
        answers = [None if a is None else str(a) for a in maternal + reinference]
        texts = ["no box" if a is None else f"\\boxed{{{a}}}" for a in answers]
        votes = [a for a in answers if a is not None]
        top = max((votes.count(a) for a in votes), default=0)
        modes = [a for a in votes if votes.count(a) == top]
        rewards, _ = majority_vote_rewards(texts, [0] * len(texts))
        assert rewards.tolist() == [float(a is not None and a == modes[0]) for a in answers]


def test_a_boxed_latex_space_is_no_answer():
    from mmevo.rewards.answers import canonical_answer, extract_answer
    from mmevo.rewards.majority import majority_vote_rewards

    # "\boxed{\ }" was stripped to a lone backslash before its space was seen: the answer "\", which out-voted 7
    assert extract_answer("\\boxed{\\ }") is None and extract_answer("\\boxed{\\ \\ }") is None
    rewards, info = majority_vote_rewards(["\\boxed{\\ }"] * 3 + ["\\boxed{7}"] * 2, [0] * 5)
    assert rewards.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0] and info["pseudo_labels"] == {0: "7"}
    assert canonical_answer(extract_answer("\\boxed{5\\ }")) == ("num", 5)
    assert extract_answer("\\boxed{5 \\\\}") == "5 \\\\"  # a line break "\\" is not a space
