"""Review 14 of HONEST: the reliability bins' labels are the edges the ECE bins with (1); the replay entries a resumed
run cannot use (2); the HONEST reward equations against a restatement from the seed's text (3)."""

from __future__ import annotations

import json
import re
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


# -- 3. the HONEST equations restated from the seed's text, against mmevo on random and edge vectors -----------------
# Written from the memo alone (sections 2.1, 2.5, 3.1, 4.3, 5.1, 8), in exact rational arithmetic where a threshold
# decides (|r - c| < 0.02 on two-decimal texts), plus mmevo's documented rules for what the seed leaves open (module
# docstring of mmevo.rewards.honest): malformed -1, abstain -0.25, hindsight only after a real answer.
from fractions import Fraction

from mmevo.rewards.heads import ScoredSample
from mmevo.rewards.honest import (HonestBrierHead, HonestHindsightHead, brier_reward, casr_reward, hindsight_reward,
                                  replay_priorities)

K, ALPHA, BETA, GAMMA, DELTA, CLIP, COPY = Fraction(3, 10), 1, Fraction(5, 100), Fraction(5, 100), \
    Fraction(5, 100), Fraction(3, 10), Fraction(2, 100)
PROB_TEXTS = ["0", "1", "0.0", "1.0", "0.5", "0.3", "0.6", "0.7", "0.02", "0.98", "0.52", "0.50", "0.48", ".5",
              "abc", "1.5", "-0.1", "85%", "", "1e-1"]


def _prob(text: str | None) -> Fraction | None:
    """The seed's probability slot: a plain decimal in [0, 1]; anything else is no value."""
    if text is None or not re.fullmatch(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)\s*", text):
        return None
    v = Fraction(text.strip())
    return v if 0 <= v <= 1 else None


def seed_brier(c: Fraction, y: int) -> Fraction:
    return -(c - y) ** 2  # 2.1: R_B = -(c - y)^2


def seed_hindsight(r: Fraction, y: int, k: Fraction = K) -> Fraction:
    return -k * (r - y) ** 2  # 2.1: R_H = -k (r - y)^2, k = 0.3


def seed_casr(c: Fraction, r: Fraction | None, y: int, critique: str | None) -> Fraction:
    """2.5: alpha [(c-y)^2 - (r-y)^2] 1[full] + beta 1[critique >= 16 chars] - gamma 1[|r-c| < 0.02]
    - delta 1[critique XOR r], clipped to +-0.30; silent (0) without any refinement structure."""
    has_c = bool(critique and critique.strip())
    has_r = r is not None
    if not has_c and not has_r:
        return Fraction(0)
    out = Fraction(0)
    if has_c and has_r:
        out += ALPHA * ((c - y) ** 2 - (r - y) ** 2)
    if has_c and len(critique.strip()) >= 16:
        out += BETA
    if has_r and abs(r - c) < COPY:
        out -= GAMMA
    if has_c != has_r:
        out -= DELTA
    return max(-CLIP, min(CLIP, out))


def _random_prob_text(rng: random.Random) -> str | None:
    roll = rng.random()
    if roll < 0.1:
        return None
    if roll < 0.55:
        return rng.choice(PROB_TEXTS)
    if roll < 0.85:
        return f"{rng.randint(0, 100) / 100:.2f}"
    return f"{rng.random():.4f}"


def _random_response(rng: random.Random, mode: str):
    """(response text, its parts) built from parts, so the expectation never reads mmevo's parser."""
    if rng.random() < 0.07:
        return "<reasoning>r</reasoning><abstain/>", {"abstain": True}
    answer = rng.choice(["4", "4", "5", "four?", "", " 4 "])
    conf = _random_prob_text(rng)
    parts = ["<reasoning>work</reasoning>", f"<answer>{answer}</answer>"]
    if conf is not None:
        parts.append(f"<confidence>{conf}</confidence>")
    extra: dict = {}
    if mode == "legacy" and rng.random() < 0.7:
        extra["hindsight"] = _random_prob_text(rng)
        if extra["hindsight"] is not None:
            parts.append(f"<hindsight>{extra['hindsight']}</hindsight>")
    if mode == "refined":
        crit = rng.choice([None, None, "", "   ", "x" * 15, "y" * 16, "  " + "z" * 15 + "  ",
                           "the step 2 + 2 is fine, no error"])
        ref = _random_prob_text(rng) if rng.random() < 0.7 else None
        if rng.random() < 0.3 and conf is not None and _prob(conf) is not None:  # near-copies of c: the boundary
            ref = str(Fraction(conf.strip()) + rng.choice([0, Fraction(1, 100), Fraction(2, 100), Fraction(-2, 100),
                                                          Fraction(3, 100)]))
            ref = f"{float(Fraction(ref)):.2f}" if 0 <= Fraction(ref) <= 1 else None
        if crit is not None:
            parts.append(f"<critique>{crit}</critique>")
        if ref is not None:
            parts.append(f"<refined_confidence>{ref}</refined_confidence>")
        extra.update(critique=crit, refined=ref)
    return "".join(parts), {"abstain": False, "answer": answer.strip(), "conf": conf, **extra}


def _seed_rewards(parts: dict, mode: str) -> tuple[Fraction, Fraction]:
    """(Brier head, hindsight head) as the seed and the documented bad-input rules give them (gold "4")."""
    if parts["abstain"]:
        return Fraction(-1, 4), Fraction(0)
    y = int(parts["answer"] == "4")
    c = _prob(parts["conf"])
    answered = parts["answer"] != ""
    brier = seed_brier(c, y) if answered and c is not None else Fraction(-1)
    if mode == "legacy":
        r = _prob(parts.get("hindsight"))
        return brier, (seed_hindsight(r, y) if answered and r is not None else Fraction(0))
    if not answered or c is None:
        return brier, Fraction(0)
    return brier, seed_casr(c, _prob(parts.get("refined")), y, parts.get("critique"))


@pytest.mark.parametrize("mode", ["legacy", "refined"])
def test_heads_match_the_seed_equations_on_thousands_of_responses(mode):
    rng = random.Random(f"honest14/{mode}")
    built = [_random_response(rng, mode) for _ in range(3000)]
    samples = [ScoredSample(response=t, group_id=0, gold="4", choices=None) for t, _ in built]
    brier, _ = HonestBrierHead().score(samples)
    hind, _ = HonestHindsightHead(mode=mode).score(samples)
    mismatches = []
    for i, (text, parts) in enumerate(built):
        want_b, want_h = _seed_rewards(parts, mode)
        if abs(brier[i].item() - float(want_b)) > 1e-6 or abs(hind[i].item() - float(want_h)) > 1e-6:
            mismatches.append((text, float(want_b), brier[i].item(), float(want_h), hind[i].item()))
    assert not mismatches, mismatches[:5]
    assert sum(1 for _, p in built if not p["abstain"] and _prob(p["conf"]) in (0, 1)) > 100  # the edges were drawn


def test_pure_functions_match_the_seed_equations_on_random_and_edge_vectors():
    rng = random.Random(1414)
    edges = [0.0, 1.0, 0.5, 0.02, 0.98, 0.3, 0.7]
    for _ in range(200):
        n = rng.randint(1, 64)
        c = [rng.choice(edges) if rng.random() < 0.3 else rng.random() for _ in range(n)]
        r = [rng.choice(edges) if rng.random() < 0.3 else rng.random() for _ in range(n)]
        y = [rng.randint(0, 1) for _ in range(n)]
        ct, rt, yt = (torch.tensor(v, dtype=torch.float64) for v in (c, r, y))
        assert brier_reward(ct, yt).tolist() == pytest.approx([float(seed_brier(Fraction(a), b)) for a, b in zip(c, y)],
                                                              abs=1e-15)
        assert hindsight_reward(rt, yt).tolist() == pytest.approx(
            [float(seed_hindsight(Fraction(a), b)) for a, b in zip(r, y)], abs=1e-15)
        alpha, eps = rng.choice([0.6, 0.0, 1.0, 2.5]), rng.choice([1e-3, 0.0, 0.1])
        prio = replay_priorities(ct, yt, alpha, eps)
        want = [(abs(a - b) + eps) ** alpha for a, b in zip(c, y)]  # 3.1: (|c - y| + eps)^alpha
        assert prio.tolist() == pytest.approx(want, rel=1e-12, abs=1e-300)
        # CASR on float vectors, the copy test away from its 1e-6 tolerance band (the band is tested on texts above)
        crit = [rng.choice([0, 1, 15, 16, 40]) for _ in range(n)]
        has_r = [rng.random() < 0.7 for _ in range(n)]
        r = [a if not h or abs(abs(a - b) - 0.02) > 2e-6 else b for a, b, h in zip(r, c, has_r)]
        got = casr_reward(ct, torch.tensor(r, dtype=torch.float64), yt, torch.tensor(crit), torch.tensor(has_r))
        want = [float(seed_casr(Fraction(a), Fraction(b) if h else None, yy, "q" * k if k else None))
                for a, b, yy, k, h in zip(c, r, y, crit, has_r)]
        assert got.tolist() == pytest.approx(want, abs=1e-12)


def seed_generator_reward(conf: list, correct: list) -> float:
    """5.1: R_G(p) = |c_S(p) - y(p)|, averaged over the solver samples that have both (none: 0)."""
    pairs = [(Fraction(c), int(y)) for c, y in zip(conf, correct) if c is not None and y is not None]
    return float(sum(abs(c - y) for c, y in pairs) / len(pairs)) if pairs else 0.0


def test_generator_reward_matches_the_seed_on_random_groups_with_missing_confidences():
    from mmevo.honest.selfplay import generator_reward

    rng = random.Random(55)
    for _ in range(2000):
        n = rng.randint(1, 8)
        conf = [None if rng.random() < 0.25 else rng.choice([0.0, 1.0, 0.5, rng.random()]) for _ in range(n)]
        corr = [None if rng.random() < 0.1 else rng.random() < 0.5 for _ in range(n)]
        got, graded = generator_reward(conf, corr)
        assert got == pytest.approx(seed_generator_reward(conf, corr), abs=1e-12)
        assert graded == sum(c is not None and y is not None for c, y in zip(conf, corr))


class SeedCurriculum:
    """4.1 / 4.3 / 9 restated: per domain a ceiling (start 5, cap 8); promote when the rolling accuracy at the ceiling
    over >= 20 episodes there is > 0.75 (strictly), demote when it is < 0.20, never below the start, never twice
    within 10 episodes of the domain; the new ceiling's episodes start afresh (the "for at least
    min_episodes_at_max episodes" of the new tier), rolling window of 20."""

    def __init__(self, start=5, cap=8, window=20, promote=0.75, demote=0.20, min_episodes=20, cooldown=10):
        self.start, self.cap, self.window, self.promote, self.demote = start, cap, window, promote, demote
        self.min_episodes, self.cooldown = min_episodes, cooldown
        self.ceiling, self.since, self.history = start, cooldown, {}

    def record(self, difficulty: int, correct: bool) -> None:
        h = self.history.setdefault(difficulty, [])
        h.append(int(correct))
        del h[:-self.window]
        self.since += 1
        at = self.history.get(self.ceiling, [])
        if self.since < self.cooldown or len(at) < self.min_episodes:
            return
        acc = Fraction(sum(at), len(at))
        if acc > Fraction(self.promote).limit_denominator(1000) and self.ceiling < self.cap:
            self.ceiling += 1
        elif acc < Fraction(self.demote).limit_denominator(1000) and self.ceiling > self.start:
            self.ceiling -= 1
        else:
            return
        self.history[self.ceiling] = []
        self.since = 0


@pytest.mark.parametrize("cooldown,window,min_episodes", [(10, 20, 20), (30, 20, 20), (0, 25, 5), (5, 8, 8)])
def test_difficulty_controller_matches_the_seed_rules_on_random_episode_streams(cooldown, window, min_episodes):
    from mmevo.honest.curriculum import DifficultyController

    rng = random.Random(f"smc/{cooldown}/{window}")
    changes = 0
    for _ in range(60):
        ctl = DifficultyController(["arith"], start=5, cap=8, window=window, min_episodes=min_episodes,
                                   cooldown=cooldown)
        ref = SeedCurriculum(window=window, min_episodes=min_episodes, cooldown=cooldown)
        p_right = rng.choice([0.05, 0.2, 0.5, 0.76, 0.8, 0.95])
        for _ in range(400):
            if rng.random() < 0.02:
                p_right = rng.choice([0.05, 0.2, 0.5, 0.8, 0.95])
            d = ref.ceiling if rng.random() < 0.7 else rng.randint(1, ref.ceiling)
            y = rng.random() < p_right
            before = ref.ceiling
            ctl.record("arith", d, y)
            ref.record(d, y)
            changes += ref.ceiling != before
            assert ctl.ceiling("arith") == ref.ceiling
    assert changes > 20  # promotions and demotions happened


def test_promotion_threshold_is_strict_at_exactly_fifteen_of_twenty():
    from mmevo.honest.curriculum import DifficultyController

    ctl = DifficultyController(["arith"], start=5, cap=8, cooldown=0)
    for i in range(20):
        ctl.record("arith", 5, i >= 5)  # 5 wrong, then 15 right: 15 / 20 = 0.75, not > 0.75
    assert ctl.ceiling("arith") == 5
    ctl.record("arith", 5, True)  # the oldest (wrong) leaves the window: 16 / 20 = 0.8
    assert ctl.ceiling("arith") == 6


# -- 2. a resumed replay buffer drops the entries this run cannot use, and says so ------------------------------------
from mmevo.data.schema import Example
from mmevo.honest.heldout import HeldoutGuard, HeldoutGuardSource
from mmevo.honest.replay import ReplayBuffer, ReplayMixSource


def _ex(i: int, question: str | None = None) -> Example:
    return Example(id=f"q{i}", problem=question or f"What is {i} + 1?", answer=str(i + 1), choices=[], images=[],
                   meta={"domain": "arithmetic", "difficulty": 1})


class _Fresh:
    def __init__(self):
        self.n = 0

    def take(self, k):
        self.n += k
        return [_ex(1000 + self.n + j) for j in range(k)]

    def state_dict(self):
        return {"n": self.n}

    def load_state_dict(self, state):
        self.n = state["n"]


def test_resumed_replay_drops_held_out_and_old_format_entries_and_counts_them(capsys):
    held = "What is 7 * 6 (held out)?"
    buf = ReplayBuffer(8)
    for i in range(6):
        buf.add(_ex(i, held if i in (1, 2, 3, 4) else None), 0.9, i % 2 == 0)
    state = ReplayMixSource(_Fresh(), buf, share=1.0, warmup_steps=0).state_dict()
    state["buffer"]["slots"][5]["correct"] = "False"  # an older mmevo's y (bool("False") is True)
    # the checkpoint of a run from before the held-out guard: slots 1-4 hold a question this run holds out
    guard = HeldoutGuard([held])
    source = ReplayMixSource(_Fresh(), ReplayBuffer(8), share=1.0, warmup_steps=0, heldout=guard)
    source.load_state_dict(state)
    err = capsys.readouterr().err
    assert "dropped 5 of the checkpoint's replay entries" in err and "resume is not exact" in err
    assert "slot 1 (id 'q1'): a held-out calibration task of this run" in err
    assert [e.example.id for e in source.buffer.entries()] == ["q0"]
    assert source.metrics()["replay/resume_dropped"] == 5.0
    out = HeldoutGuardSource(source, guard).take(4)  # before: the guard stopped the run at a replayed held-out task
    assert [ex.id for ex in out] == ["q0"] * 4
    # the count is cumulative: a later resume from this state keeps it
    again = ReplayMixSource(_Fresh(), ReplayBuffer(8), share=1.0, warmup_steps=0, heldout=guard)
    again.load_state_dict(source.state_dict())
    assert again.buffer.resume_dropped == 5 and len(again.buffer) == 1 and capsys.readouterr().err == ""


@pytest.mark.parametrize("field,value,why", [("correct", "False", "correct 'False' is not True / False"),
                                             ("correct", None, "correct None is not True / False"),
                                             ("correct", 0.5, "correct 0.5 is not True / False"),
                                             ("confidence", 1.5, "confidence 1.5 is not a number in [0, 1]"),
                                             ("confidence", math.nan, "confidence nan is not a number in [0, 1]"),
                                             ("example", {"problem": "x"}, "no prompt (example dict)")])
def test_an_old_format_replay_slot_is_dropped_not_restored_as_another_value(field, value, why, capsys):
    buf = ReplayBuffer(4)
    buf.add(_ex(0), 0.2, False)
    buf.add(_ex(1), 0.8, True)
    state = buf.state_dict()
    state["slots"][0][field] = value
    fresh = ReplayBuffer(4)
    fresh.load_state_dict(state)
    assert [(e.example.id, e.confidence, e.correct) for e in fresh.entries()] == [("q1", 0.8, True)]
    assert fresh.snapshot()["resume_dropped"] == 1 and fresh.index == {("q1", "What is 1 + 1?"): 1}
    assert why in capsys.readouterr().err
    fresh.add(_ex(2), 0.5, True)  # the ring goes on where it was
    assert [e.example.id for e in fresh.entries()] == ["q1", "q2"]


def test_a_clean_resume_drops_nothing_and_prints_nothing(capsys):
    buf = ReplayBuffer(4)
    for i in range(3):
        buf.add(_ex(i), 0.1 * i, i == 1)
    fresh = ReplayBuffer(4)
    fresh.load_state_dict(buf.state_dict())
    assert fresh.snapshot() == buf.snapshot() and fresh.resume_dropped == 0 and capsys.readouterr().err == ""
    with pytest.raises(ValueError, match="capacity 4, this run's 8"):  # a capacity change is still refused
        ReplayBuffer(8).load_state_dict(buf.state_dict())


def test_real_trainer_resumes_a_checkpoint_whose_replay_holds_held_out_tasks(tiny_text_path, tmp_path, capsys):
    """A run trained with replay; its checkpoint then holds what an older mmevo wrote (entries that are held-out
    tasks of this run, a y of "False"). The resume with the held-out guard drops and counts them and trains on;
    before, the guard around the source stopped the first step that replayed one."""
    from mmevo.grpo.checkpoint import latest_checkpoint
    from mmevo.honest import build_honest_plugins
    from mmevo.honest.tasks import generate_tasks
    from mmevo.models.loader import load_model
    from mmevo.recipes import build_trainer
    from tests.test_honest_replay import ScriptedProtocol, _trainer_cfg

    train = [t.to_example() for t in generate_tasks(30, seed=0, domains=["arithmetic", "logic"])]

    def build(steps, guard=None):
        cfg = _trainer_cfg(str(tiny_text_path), str(tmp_path / "run"), steps)
        cfg.honest.replay_share = 1.0
        strategy, source = build_honest_plugins(cfg, train, guard)
        strategy.inner = ScriptedProtocol()
        if guard is not None:
            source = HeldoutGuardSource(source, guard)
        return build_trainer(cfg, load_model(str(tiny_text_path)), strategy=strategy, prompt_source=source), source

    tr, _ = build(2)
    tr.train()
    tr.close()
    path = latest_checkpoint(tmp_path / "run") / "trainer_state.pt"
    state = torch.load(path, map_location="cpu", weights_only=False)
    slots = state["prompt_source"]["buffer"]["slots"]
    live = [s for s in slots if s is not None]
    assert len(live) >= 4
    held = [s["example"].problem for s in live[1:]]  # all but the first are this run's held-out tasks
    live[0]["correct"] = "False"  # ... and the first has an older mmevo's y
    torch.save(state, path)
    tr2, source2 = build(4, HeldoutGuard(held))
    hist = tr2.train()
    tr2.close()
    assert tr2.step_idx == 4 and len(hist) == 2
    err = capsys.readouterr().err
    assert f"dropped {len(live)} of the checkpoint's replay entries" in err and "held-out calibration task" in err
    assert all(m["replay/resume_dropped"] == float(len(live)) for m in hist)
    assert not any(e.example.problem in held for e in source2.buffer.entries())


def test_the_honest_loop_summary_counts_the_dropped_replay_entries_of_its_resume(tiny_text_path, tmp_path, capsys):
    from mmevo.config import load_config
    from mmevo.grpo.checkpoint import latest_checkpoint
    from mmevo.honest.loop import run_honest

    def cfg(blocks):
        return load_config("configs/honest_tiny.yaml", [
            f"model.path={tiny_text_path}", f"honest.output_dir={tmp_path / 'run'}", "honest.warmup_sft=false",
            "honest.eval_calibration=false", "honest.domains=[modular]", "honest.max_difficulty=1", "data.n_train=8",
            "data.n_heldout=4", "rollout.max_tokens=8", "honest.replay_enabled=true",
            "honest.replay_warmup_steps=0", f"honest.gss_blocks={blocks}", "honest.gss_block_steps=1"])

    first = run_honest(cfg(1))
    assert first["replay_resume_dropped"] == 0
    path = latest_checkpoint(tmp_path / "run" / "solver") / "trainer_state.pt"
    state = torch.load(path, map_location="cpu", weights_only=False)

    def buffer_state(s):  # under the held-out guard's (and any GSS mix's) wrappers
        return s["buffer"] if "buffer" in s else buffer_state(s["base"])

    slots = buffer_state(state["prompt_source"])["slots"]
    # the tiny model states no confidence, so its buffer is empty: the slot an older mmevo wrote for a group
    # without gold (y None), in the ring's next slot
    slots[slots.index(None)] = {"example": _ex(0), "confidence": 0.5, "correct": None, "writes": 1}
    torch.save(state, path)
    capsys.readouterr()
    second = run_honest(cfg(2))
    assert second["replay_resume_dropped"] == 1 and "dropped 1 of the checkpoint's replay entries" in \
        capsys.readouterr().err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["replay_resume_dropped"] == 1


def test_replay_sampling_probabilities_and_draws_follow_the_seed_per_rule():
    # 3.1: p_i = (|c_i - y_i| + eps)^alpha / sum_j (|c_j - y_j| + eps)^alpha, through the seed's own adapter
    from mmevo.honest.seed_api import CalibrationPrioritizedReplay

    rng = random.Random(31)
    for _ in range(100):
        n = rng.randint(1, 30)
        stats = [(rng.choice([0.0, 1.0, 0.5, rng.random()]), rng.random() < 0.5) for _ in range(n)]
        alpha, eps = rng.choice([0.6, 1.0, 0.0, 3.0]), rng.choice([1e-3, 0.05])
        buf = ReplayBuffer(64, alpha, eps)
        for i, (c, y) in enumerate(stats):
            buf.add(_ex(i), c, y)
        w = [(abs(c - y) + eps) ** alpha for c, y in stats]
        assert buf.probabilities().tolist() == pytest.approx([x / sum(w) for x in w], rel=1e-12)
    seed_buf = CalibrationPrioritizedReplay(capacity=16)
    for i, (c, y) in enumerate([(1.0, False), (0.0, False), (0.5, True), (0.9, True)]):
        seed_buf.add(f"q{i}", "1", "arithmetic", 1, c, y)
    draws = seed_buf.sample(40_000, alpha=0.6, eps=1e-3)
    w = [(e + 1e-3) ** 0.6 for e in (1.0, 0.0, 0.5, 0.1)]
    freq = [sum(d["prompt"] == f"q{i}" for d in draws) / len(draws) for i in range(4)]
    assert freq == pytest.approx([x / sum(w) for x in w], abs=0.01)


def test_brier_head_ece_metric_equals_the_independent_ece():
    rng = random.Random(8)
    texts, conf, hits = [], [], []
    for _ in range(400):
        c = rng.choice(["0.3", "0.6", "0.7", "0", "1", f"{rng.random():.2f}"])
        right = rng.random() < 0.6
        texts.append(_response(c, "4" if right else "5"))
        conf.append(float(c))
        hits.append(right)
    _, m = HonestBrierHead().score([ScoredSample(response=t, group_id=0, gold="4", choices=None) for t in texts])
    assert m["ece"] == pytest.approx(_independent_ece(conf, hits, 10), abs=1e-9)
