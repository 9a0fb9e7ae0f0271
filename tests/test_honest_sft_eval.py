"""HONEST part 7: calibration SFT targets (mmevo.honest.sft), the calibration report / reliability diagram / hindsight
audit (mmevo.honest.calibration), the health detectors (mmevo.honest.health), `mmevo eval --calibration`, and one
short real SFT run of the tiny text model evaluated before and after."""

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from mmevo.honest.calibration import calibration_report, hindsight_audit, plot_reliability, reliability_bins
from mmevo.honest.health import (LOG2, HealthMonitor, generator_collapse, priority_entropy, replay_entropy_low,
                                 retry_until_verified, reward_collapse, unverifiable_mutations)
from mmevo.honest.protocol import format_response, parse_strict
from mmevo.honest.sft import (CORRECT_BAND, PERTURBED_BAND, SFT_PRESETS, TIER_PRESETS, calibration_sft_examples,
                              displayed_expression, sft_plan)
from mmevo.honest.tasks import recompute_answer
from mmevo.rewards.answers import answers_equivalent

ROOT = Path(__file__).resolve().parent.parent


# -- calibration SFT targets ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_tier():
    return calibration_sft_examples(n=4000, tier="tiny", seed=3)


def test_targets_parse_strictly_and_shares_are_exact(tiny_tier):
    for ex in tiny_tier:
        p = parse_strict(ex.solution)
        assert p.well_formed and not p.malformed, (ex.id, ex.solution, p.malformed)
        assert p.answer == ex.meta["sft_answer"] and p.confidence == ex.meta["sft_confidence"]
        y = 0.0 if ex.meta["sft_perturbed"] else 1.0
        assert p.hindsight == ex.meta["sft_hindsight"] and p.hindsight in (None, y)  # r bound to y (seed 2.6)
        assert p.critique is None and p.refined_confidence is None  # legacy mode
        assert ex.solution.startswith(f"<reasoning>{displayed_expression(ex.problem)} ")  # worked from the question
        assert 1 <= ex.meta["difficulty"] <= 2  # the tiny tier's max_d
    # seed 2.6: "half of the examples include <hindsight>"; perturbed share 0.5 (the seed gives none)
    assert sum(ex.meta["sft_perturbed"] for ex in tiny_tier) == 2000
    assert sum(ex.meta["sft_hindsight"] is not None for ex in tiny_tier) == 2000
    both = sum(ex.meta["sft_perturbed"] and ex.meta["sft_hindsight"] is not None for ex in tiny_tier)
    assert 850 < both < 1150  # the two shares are drawn independently: about a quarter has both


def _clipped_moments(mean: float, sd: float) -> tuple[float, float]:
    """Mean and sd of round(clip(N(mean, sd), 0, 1), 2), by numerical integration."""
    lo, hi, k = mean - 8 * sd, mean + 8 * sd, 40000
    xs = [lo + (hi - lo) * (i + 0.5) / k for i in range(k)]
    w = [math.exp(-0.5 * ((x - mean) / sd) ** 2) for x in xs]
    v = [round(min(1.0, max(0.0, x)), 2) for x in xs]
    m1 = sum(a * b for a, b in zip(w, v)) / sum(w)
    m2 = sum(a * b * b for a, b in zip(w, v)) / sum(w)
    return m1, math.sqrt(m2 - m1 ** 2)


def test_confidence_bands_have_the_seeds_means_and_sds(tiny_tier):
    assert CORRECT_BAND == (0.85, 0.10) and PERTURBED_BAND == (0.25, 0.15)  # seed 2.6
    for perturbed, band in ((False, (0.85, 0.10)), (True, (0.25, 0.15))):
        c = [ex.meta["sft_confidence"] for ex in tiny_tier if ex.meta["sft_perturbed"] is perturbed]
        want_mean, want_sd = _clipped_moments(*band)
        assert abs(want_mean - band[0]) < 0.005  # clipping moves the mean by < 0.005
        n = len(c)
        assert 0.0 <= min(c) and max(c) <= 1.0
        # 4 standard errors: of the mean sd / sqrt(n); of the sd about sd / sqrt(2 n)
        assert abs(statistics.fmean(c) - want_mean) < 4 * want_sd / math.sqrt(n), (perturbed, statistics.fmean(c))
        assert abs(statistics.pstdev(c) - want_sd) < 4 * want_sd / math.sqrt(2 * n), (perturbed, statistics.pstdev(c))


def test_perturbed_answers_are_wrong_and_the_others_right(tiny_tier):
    for ex in tiny_tier:
        gold = recompute_answer(ex.meta)  # the task verifier, from the expression alone
        assert ex.answer == gold
        shown = ex.meta["sft_answer"]
        if ex.meta["sft_perturbed"]:
            assert shown != gold and not answers_equivalent(shown, gold), ex.id
            if ex.meta["domain"] == "modular":  # a wrong remainder is still a remainder of the same modulus
                m = int(ex.meta["expression"].rsplit("%", 1)[1]) if "%" in ex.meta["expression"] else None
                assert m is None or 0 <= int(shown) < m
        else:
            assert shown == gold
        assert f"<answer>{shown}</answer>" in ex.solution and shown in ex.solution.split("</reasoning>")[0]


def test_targets_are_deterministic_by_seed():
    a = calibration_sft_examples(n=300, seed=7)
    b = calibration_sft_examples(n=300, seed=7)
    c = calibration_sft_examples(n=300, seed=8)
    assert [(e.id, e.solution) for e in a] == [(e.id, e.solution) for e in b]
    assert [e.solution for e in a] != [e.solution for e in c]
    same_band = [i for i in range(300) if a[i].meta["sft_perturbed"] == c[i].meta["sft_perturbed"]]
    assert sum(a[i].meta["sft_confidence"] != c[i].meta["sft_confidence"] for i in same_band) > 0.8 * len(same_band)


def test_refined_mode_targets_improve_brier_and_earn_casr():

    from mmevo.rewards.heads import ScoredSample
    from mmevo.rewards.honest import HonestHindsightHead

    exs = calibration_sft_examples(n=1000, tier="small", mode="refined", seed=1)
    plan = sft_plan(n=1000, tier="small", mode="refined")
    assert plan.hindsight_share == 0.40 and plan.max_difficulty == 3  # seed: qwen1.5b row
    refined = [e for e in exs if e.meta["sft_refined_confidence"] is not None]
    assert 300 < len(refined) <= 400  # 40 % minus those whose c is already within 0.04 of y
    for ex in exs:
        p = parse_strict(ex.solution)
        assert p.well_formed and not p.malformed and p.hindsight is None
        if ex.meta["sft_refined_confidence"] is None:
            assert p.critique is None
            continue
        y = 0.0 if ex.meta["sft_perturbed"] else 1.0
        c, r = p.confidence, p.refined_confidence
        assert p.critique_chars >= 16 and abs(r - c) >= 0.02  # CASR's format bonus, never its anti-copy penalty
        assert (r - y) ** 2 < (c - y) ** 2  # the refinement moves toward y: positive Delta-Brier
    samples = [ScoredSample(response=e.solution, group_id=i, gold=e.answer, choices=[]) for i, e in enumerate(refined)]
    rewards, m = HonestHindsightHead(mode="refined").score(samples)
    assert m["fired"] == len(refined) and m["copy"] == 0 and m["partial"] == 0
    assert bool((rewards > 0).all())


def test_plan_quotes_the_seeds_tier_table_and_config_overrides():
    assert TIER_PRESETS["tiny"] == SFT_PRESETS["qwen0.5b"] == SFT_PRESETS["llama1b"]
    rows = {name: (p.tier, p.sft_n, p.epochs, p.max_difficulty, p.hindsight_frac, p.hindsight_mode)
            for name, p in SFT_PRESETS.items()}
    assert rows == {"qwen0.5b": ("tiny", 1500, 2, 2, 0.50, "legacy"), "llama1b": ("tiny", 1500, 2, 2, 0.50, "legacy"),
                    "qwen1.5b": ("small", 1000, 2, 3, 0.40, "refined"),
                    "qwen3b": ("medium", 600, 1, 4, 0.30, "refined"),
                    "llama3b": ("medium", 700, 1, 4, 0.30, "refined"),
                    "phi4mini": ("medium", 500, 1, 4, 0.30, "refined")}
    p = sft_plan()
    assert (p.n, p.min_difficulty, p.max_difficulty, p.hindsight_share, p.mode) == (1500, 1, 2, 0.5, "legacy")
    assert sft_plan(tier="phi4mini").n == 500 and sft_plan(tier="medium").n == 600
    from mmevo.config import ConfigError, load_config
    from mmevo.recipes import load_examples

    cfg = load_config(None, ["data.train=honest_sft", "data.system_prompt=honest", "honest.sft_tier=medium",
                             "honest.sft_n=40", "honest.sft_hindsight_frac=0.25", "honest.sft_perturbed_frac=0.1",
                             "honest.seed=4", "honest.domains=[logic]", "honest.max_difficulty=3"])
    rows, stats = load_examples(cfg, "train")
    assert stats["rows"] == 40 and stats["perturbed"] == 4 and stats["preset_epochs"] == 1
    assert stats["plan"]["max_difficulty"] == 3 and stats["plan"]["hindsight_share"] == 0.25  # min(4, honest max 3)
    assert stats["with_refinement"] <= 10 and stats["recommended_hindsight_mode"] == "refined"
    assert all(e.meta["domain"] == "logic" for e in rows)
    assert [e.solution for e in rows] == [e.solution for e in calibration_sft_examples(cfg)]
    # data.train=honest_sft alone selects the protocol prompt; another system prompt is refused
    auto = load_config(None, ["data.train=honest_sft"])
    assert "confidence" in auto.data.system_prompt and load_examples(auto, "train")[0]
    with pytest.raises(ConfigError, match="data.system_prompt=honest"):
        load_examples(load_config(None, ["data.train=honest_sft", "data.system_prompt=Be brief."]), "train")
    with pytest.raises(ConfigError, match="honest_tasks"):
        load_examples(load_config(None, ["data.train=honest_sft", "data.heldout=honest_sft",
                                         "data.system_prompt=honest"]), "heldout")
    with pytest.raises(ValueError, match="sft_tier"):
        sft_plan(tier="huge")
    with pytest.raises(ValueError, match="sft_perturbed_frac"):
        sft_plan(perturbed_share=1.5)


# -- calibration report -------------------------------------------------------------------------------------------
def R(answer=None, conf=None, abstain=False, hindsight=None):
    return format_response("work", answer, conf, abstain=abstain, hindsight=hindsight)


HAND_RECORDS = [
    {"id": "a", "response": R("4", 0.9), "gold": "4"},  # y = 1, bin 9
    {"id": "b", "response": R("5", 0.8), "gold": "4"},  # y = 0, bin 8
    {"id": "c", "response": R("7", 0.3, hindsight=1), "gold": "7"},  # y = 1, bin 3 (0.3 is its lower edge)
    {"id": "d", "response": R("2", 0.25), "gold": "3"},  # y = 0, bin 2
    {"id": "e", "response": R(abstain=True), "gold": "1"},  # abstain
    {"id": "f", "response": "I do not know", "gold": "1"},  # malformed
    {"id": "g", "response": "<answer>True</answer> <confidence>85%</confidence>", "gold": "True"},  # lenient only
]


def test_gold_form_rate_counts_answers_that_cannot_be_right():
    """A Brier reward pays "24" at confidence 0 for a True / False question as much as a sure right answer: the
    report's gold-form rate (and per domain) shows how often the policy answers outside the question's form."""
    from mmevo.honest.calibration import answer_has_gold_form

    assert answer_has_gold_form("False", "True") and answer_has_gold_form(" true ", "False")
    assert answer_has_gold_form("24", "True") is False and answer_has_gold_form("-3", "17")
    assert answer_has_gold_form("+3", "-17") and answer_has_gold_form("True", "4") is False
    assert answer_has_gold_form("3.5", "4") is False and answer_has_gold_form("x", "1/2") is None
    recs = [{"response": R("24", 0.0), "gold": "True", "domain": "logic"},  # a number for True / False
            {"response": R("False", 0.6), "gold": "True", "domain": "logic"},
            {"response": R("True", 0.6), "gold": "True", "domain": "logic"},
            {"response": R("7", 0.1), "gold": "-2", "domain": "arithmetic"},
            {"response": R(abstain=True), "gold": "3", "domain": "arithmetic"},  # no answer: not counted
            {"response": "no tags at all", "gold": "3", "domain": "arithmetic"}]  # unreadable: not counted
    rep = calibration_report(recs)
    assert rep["gold_form_rate"] == pytest.approx(3 / 4)
    by = rep["by"]["domain"]
    assert by["logic"]["gold_form_rate"] == pytest.approx(2 / 3) and by["arithmetic"]["gold_form_rate"] == 1.0
    assert calibration_report(recs[4:])["gold_form_rate"] is None


def test_calibration_report_against_hand_computed_values():
    rep = calibration_report(HAND_RECORDS)
    assert (rep["n"], rep["graded"], rep["correct"]) == (7, 5, 3)
    assert rep["accuracy"] == pytest.approx(3 / 7)  # abstain and malformed count as not correct
    assert rep["accuracy_graded"] == pytest.approx(3 / 5)
    assert rep["abstain_rate"] == pytest.approx(1 / 7)
    assert rep["malformed_rate"] == pytest.approx(1 / 7) and rep["well_formed_rate"] == pytest.approx(6 / 7)
    assert rep["strict_well_formed_rate"] == pytest.approx(5 / 7)  # "85%" and no <reasoning>: lenient only
    assert rep["hindsight_rate"] == pytest.approx(1 / 7)
    assert rep["mean_confidence"] == pytest.approx((0.9 + 0.8 + 0.3 + 0.25 + 0.85) / 5)  # 0.62
    # sd: deviations 0.28, 0.18, -0.32, -0.37, 0.23 -> sqrt(0.403 / 5); gap: mean(0.9, 0.3, 0.85) - mean(0.8, 0.25)
    assert rep["confidence_sd"] == pytest.approx(math.sqrt(0.403 / 5))
    assert rep["confidence_gap"] == pytest.approx(2.05 / 3 - 1.05 / 2)
    # Brier over the graded: (0.1^2 + 0.8^2 + 0.7^2 + 0.25^2 + 0.15^2) / 5 = 1.225 / 5
    assert rep["brier"] == pytest.approx(0.245)
    # ECE (bins as the seed's reference compute_ece: np.linspace edges, whose 0.3 edge is 0.30000000000000004, so
    # c = 0.3 is in bin 2): bin 8 {0.8 wrong, 0.85 right}: 2/5 |0.5 - 0.825|; bin 9: 1/5 |1 - 0.9|;
    # bin 2 {0.3 right, 0.25 wrong}: 2/5 |0.5 - 0.275|  ->  0.13 + 0.02 + 0.09
    assert rep["ece"] == pytest.approx(0.24)
    bins = rep["bins"]
    assert len(bins) == 10 and [b["count"] for b in bins] == [0, 0, 2, 0, 0, 0, 0, 0, 2, 1]
    assert bins[8]["mean_confidence"] == pytest.approx(0.825) and bins[8]["accuracy"] == pytest.approx(0.5)
    assert bins[2]["lo"] == pytest.approx(0.2) and bins[2]["accuracy"] == 0.5
    assert bins[0]["mean_confidence"] is None and bins[0]["accuracy"] is None
    graded = sum(b["count"] for b in bins)
    assert sum(b["count"] / graded * abs(b["accuracy"] - b["mean_confidence"]) for b in bins if b["count"]) \
        == pytest.approx(rep["ece"])


def test_reliability_bins_edges_and_empty_reports(tmp_path):
    bins = reliability_bins([0.0, 0.1, 0.99, 1.0], [False, True, True, True])
    assert [b["count"] for b in bins] == [1, 1, 0, 0, 0, 0, 0, 0, 0, 2]  # 0.1 opens bin 1, 1.0 is in the last
    assert calibration_report([])["ece"] is None
    only_bad = calibration_report([{"response": "", "gold": "1"}])
    assert only_bad["graded"] == 0 and only_bad["ece"] is None and only_bad["brier"] is None
    assert only_bad["malformed_rate"] == 1.0
    for rep, name in ((calibration_report(HAND_RECORDS), "hand.png"), (only_bad, "empty.png")):
        path = plot_reliability(rep, tmp_path / name, title="t")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_names_the_bad_record():
    with pytest.raises(ValueError, match=r"record 1 \(id 'x'\): field 'gold'"):
        calibration_report([HAND_RECORDS[0], {"id": "x", "response": "r"}])
    with pytest.raises(ValueError, match="record 0: field 'response'"):
        calibration_report([{"gold": "1"}])


# -- hindsight audit ----------------------------------------------------------------------------------------------
def _write_metrics(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


AUDIT_ROWS = [
    {"step": 1, "reward/honest_hindsight/nonzero_frac": 0.0, "reward/honest_hindsight/fired": 0.0},
    {"step": 2, "reward/honest_hindsight/nonzero_frac": 0.25, "reward/honest_hindsight/fired": 2.0},
    {"step": 3, "data/skipped_steps": 1.0},  # a skipped step: no reward metrics
    "",
    {"step": 4, "reward/honest_hindsight/nonzero_frac": 0.0, "reward/honest_hindsight/fired": 3.0},  # fired, r = y
    {"step": 2, "reward/honest_hindsight/nonzero_frac": 0.5, "reward/honest_hindsight/fired": 4.0},  # resumed: last wins
]


def test_hindsight_audit_on_a_hand_written_metrics_file(tmp_path):
    path = _write_metrics(tmp_path / "metrics.jsonl", AUDIT_ROWS)
    a = hindsight_audit(path)
    assert (a["steps"], a["nonzero_steps"], a["fired_steps"]) == (3, 1, 2)
    assert a["nonzero_share"] == pytest.approx(1 / 3) and a["fired_share"] == pytest.approx(2 / 3)
    assert a["mean_nonzero_frac"] == pytest.approx(0.5 / 3)
    assert a["first_nonzero_step"] == 2 and a["lines"] == 5 and a["lines_without_metric"] == 1
    assert a["nonzero_frac_start"] == 0.0 and a["nonzero_frac_end"] == 0.0  # steps 1 and 4 (a tenth: 1 step)
    rising = hindsight_audit(_write_metrics(tmp_path / "rising.jsonl", [
        {"step": s, "reward/honest_hindsight/nonzero_frac": s / 20} for s in range(20, 0, -1)]))
    assert rising["nonzero_frac_start"] == pytest.approx((0.05 + 0.1) / 2)  # steps 1-2, whatever the line order
    assert rising["nonzero_frac_end"] == pytest.approx((0.95 + 1.0) / 2)
    assert rising["first_nonzero_step"] == 1
    assert hindsight_audit(tmp_path)["steps"] == 3  # a run directory works too
    silent = hindsight_audit(_write_metrics(tmp_path / "silent.jsonl", AUDIT_ROWS[:1]))
    assert silent["nonzero_share"] == 0.0  # the seed's silent v1 channel
    assert hindsight_audit(_write_metrics(tmp_path / "none.jsonl", [{"step": 1}]))["nonzero_share"] is None
    _write_metrics(tmp_path / "bad.jsonl", [AUDIT_ROWS[0], "{not json"])
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not a JSON line"):
        hindsight_audit(tmp_path / "bad.jsonl")
    with pytest.raises(FileNotFoundError):
        hindsight_audit(tmp_path / "missing.jsonl")


def test_audit_script_prints_json(tmp_path):
    _write_metrics(tmp_path / "metrics.jsonl", AUDIT_ROWS)
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "honest_audit.py"), str(tmp_path)],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["nonzero_share"] == pytest.approx(1 / 3)
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "honest_audit.py"), str(tmp_path / "nope")],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "no metrics.jsonl" in bad.stderr


# -- health detectors ---------------------------------------------------------------------------------------------
def test_reward_collapse_detector():
    assert reward_collapse([0.2, 5e-5, 5e-5, 5e-5, 5e-5], window=5).fired is False  # one healthy step in the window
    d = reward_collapse([0.2] + [5e-5] * 5, window=5)
    assert d.fired and d.value == 5e-5 and "brier-only" in d.event
    assert reward_collapse([5e-5] * 4, window=5).fired is False  # not enough steps yet
    assert reward_collapse([1e-4] * 5).fired is False  # the seed's test is std < 1e-4
    assert reward_collapse([5e-5], window=1).fired and reward_collapse([]).value is None


def test_reward_collapse_fires_on_the_step_by_default():
    # seed: "Falls back to brier-only when reward_std<1e-4" -- the step itself, no waiting period
    assert reward_collapse([0.2, 5e-5]).fired and not reward_collapse([5e-5, 0.2]).fired
    mon = HealthMonitor()
    assert mon.update({"reward/honest_hindsight/std": 0.3})["health/brier_only"] == 0
    assert mon.update({"reward/honest_hindsight/std": 5e-5})["health/brier_only"] == 1 and mon.brier_only
    assert mon.update({"reward/honest_hindsight/std": 0.3})["health/brier_only"] == 0  # recovers the next step
    from mmevo.config import load_config

    assert load_config(None, []).honest.health_collapse_window == 1


def test_replay_entropy_detector():
    assert priority_entropy([1, 1]) == pytest.approx(LOG2) and priority_entropy([3]) == 0.0
    assert priority_entropy([1, 1, 1, 1]) == pytest.approx(math.log(4))
    assert replay_entropy_low(priority_entropy([1, 1])).fired is False  # exactly log 2 is not below it
    d = replay_entropy_low(priority_entropy([1.0, 0.01, 0.01]))
    assert d.fired and "50 steps" in d.event
    assert replay_entropy_low(priority_entropy([1, 1, 1])).fired is False
    assert replay_entropy_low(None).fired is False
    with pytest.raises(ValueError):
        priority_entropy([1, -1])


def test_unverifiable_mutation_detector_and_retry_guardrail():
    assert unverifiable_mutations(0, 10).fired is False and unverifiable_mutations(0, 10).value == 0.0
    d = unverifiable_mutations(2, 8)
    assert d.fired and d.value == 0.25 and "retry up to 3" in d.event
    assert unverifiable_mutations(None, 0).value is None
    with pytest.raises(ValueError):
        unverifiable_mutations(3, 2)
    tries = []
    item, failed = retry_until_verified(lambda k: tries.append(k) or k, lambda x: x == 2)
    assert (item, failed, tries) == (2, 2, [0, 1, 2])
    item, failed = retry_until_verified(lambda k: k, lambda x: False)
    assert item is None and failed == 4  # the first attempt and 3 retries, then dropped

    def boom(k):
        raise ValueError("unverifiable")
    assert retry_until_verified(boom, lambda x: True, retries=1) == (None, 2)


def test_generator_collapse_detector():
    d = generator_collapse(["p1"] * 20)
    assert d.fired and d.value == pytest.approx(1 / 20) and "re-seed" in d.event
    assert generator_collapse(["p1"] * 9).fired is False  # too few problems to judge
    assert generator_collapse(["p1"] * 10 + ["p2"]).fired is False  # 2/11 >= 0.1
    assert generator_collapse([f"p{i % 3}" for i in range(40)]).fired is True  # 3/40 < 0.1
    assert generator_collapse([]).value is None


def test_health_monitor_fires_recovers_and_resumes(tmp_path):
    from mmevo.config import load_config

    cfg = load_config(None, ["honest.health_collapse_window=3", "honest.health_replay_cooldown=4"])
    mon = HealthMonitor.from_config(cfg, events_path=tmp_path / "events.jsonl")
    healthy = {"reward/honest_hindsight/std": 0.3, "replay/priority_entropy": 2.0, "curriculum/mutations": 4.0,
               "curriculum/unverifiable_mutations": 0.0}
    out = mon.update(healthy)
    assert out["health/reward_collapse"] == 0 and out["health/replay_mix_off"] == 0 and out["health/events"] == 0
    assert out["health/unverifiable_mutation_rate"] == 0.0 and mon.replay_enabled()
    flat = {**healthy, "reward/honest_hindsight/std": 0.0}
    assert [mon.update(flat)["health/brier_only"] for _ in range(3)] == [0.0, 0.0, 1.0]  # window 3
    assert mon.brier_only and "reward collapse" in mon.last_events[0]
    assert mon.update(flat)["health/events"] == 0  # still collapsed: no new event
    assert mon.update(healthy)["health/brier_only"] == 0.0 and "recovered" in mon.last_events[0]
    # replay: low entropy at step 7 switches the mix off for steps 8..11
    out = mon.update({**healthy, "replay/priority_entropy": 0.1})
    assert mon.step == 7 and out["health/replay_mix_off"] == 1.0 and mon.replay_off_until == 12
    assert [mon.replay_enabled(s) for s in (8, 11, 12)] == [False, False, True]
    mon.update({**healthy, "replay/priority_entropy": 0.1})  # during the cool-down: not extended
    assert mon.replay_off_until == 12 and mon.counts["replay_collapse"] == 1
    idle = HealthMonitor()  # a buffer in warm-up (replay/active 0) or empty is not judged
    assert idle.update({"replay/priority_entropy": 0.0, "replay/active": 0.0, "replay/size": 5.0})[
        "health/replay_mix_off"] == 0.0
    assert idle.update({"replay/priority_entropy": 0.0, "replay/size": 0.0})["health/replay_mix_off"] == 0.0
    assert idle.update({"replay/priority_entropy": 0.0, "replay/active": 1.0})["health/replay_mix_off"] == 1.0
    out = mon.update({**healthy, "curriculum/unverifiable_mutations": 1.0})
    assert out["health/unverifiable_mutation_rate"] == 0.25 and out["health/unverifiable_mutations_total"] == 1.0
    # generator: one problem over and over
    for _ in range(3):  # 1 distinct of 10 is still 0.1; of 15 it is below
        out = mon.update(healthy, generated_ids=["same"] * 5)
    assert out["health/generator_reseed"] == 1.0 and mon.reseed_generator and len(mon.generated) == 0
    assert mon.update(healthy, generated_ids=["a", "b"])["health/generator_reseed"] == 0.0
    logged = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["detector"] for e in logged] == ["reward_collapse", "reward_collapse", "replay_collapse",
                                               "unverifiable_mutations", "generator_collapse"]
    # resume mid-collapse: a monitor loaded from the state answers the next steps exactly as the original
    mon.update(flat)
    mon.update(flat)
    twin = HealthMonitor.from_config(cfg)
    twin.load_state_dict(json.loads(json.dumps(mon.state_dict())))
    for m in (flat, healthy, flat):
        assert twin.update(m) == mon.update(m)
    assert mon.counts["reward_collapse"] == 2
    assert twin.state_dict() == mon.state_dict()


# -- mmevo eval --calibration -------------------------------------------------------------------------------------
def test_cli_eval_calibration_writes_the_report(tiny_text_path, tmp_path, capsys):
    from mmevo.cli import main

    out = tmp_path / "cal"
    rc = main(["eval", "--calibration", "--model", str(tiny_text_path), "--out", str(out), "--limit", "6",
               "--max-tokens", "6", "data.n_train=20", "data.n_heldout=12", "trainer.progress=false"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n"] == 6 and summary["data"]["evaluated"] == 6 and summary["max_tokens"] == 6
    report = json.loads((out / "calibration.json").read_text())
    assert set(report) >= {"accuracy", "abstain_rate", "ece", "brier", "malformed_rate", "bins"}
    assert (out / "reliability.png").read_bytes()[:4] == b"\x89PNG"
    assert len((out / "responses.jsonl").read_text().splitlines()) == 6


# -- one real short run: calibration SFT of the tiny text model, evaluated before and after ----------------------
def test_calibration_sft_teaches_the_tiny_model_the_format(tiny_text_path, tmp_path):
    """120 SFT steps (batch 8, 3 epochs) on 320 calibration targets (~90 s): the untrained model writes no protocol
    response; after SFT most greedy responses hold the protocol's tags (the tiny tier's full 188 steps reach 1.0 /
    1.0, scripts/honest_calibration_demo.py). 80 steps were on the edge of the bar: well formed (lenient parser,
    its held-out tasks) 0.625 / 0.5 / 1.0 at trainer.seed 1 / 2 / 3 with F.linear's kernels and 0.4375 / 0.75 / 1.0 with
    model.cpu_linear's oneDNN ones (float32 rounding alone moves a run that short); 120 steps gave 1.0 at seeds 1 and
    2 with either. Seed 0 stays at 0.0 at 80 and 120 steps with either kernel."""
    from mmevo.config import load_config
    from mmevo.honest.calibration import calibration_heldout, evaluate_calibration
    from mmevo.recipes import run_sft

    cfg = load_config(None, [f"model.path={tiny_text_path}", "data.train=honest_sft", "data.system_prompt=honest",
                             "data.heldout=honest_tasks", "data.n_train=0", "data.n_heldout=50",
                             "honest.sft_n=320", "honest.max_difficulty=2", "sft.epochs=3", "sft.batch_size=8",
                             "sft.lr=5e-3", "sft.warmup_steps=5", "sft.save_every=0",
                             f"sft.output_dir={tmp_path / 'sft'}", "trainer.progress=false"])
    held, stats = calibration_heldout(cfg)
    assert len(held) + stats["dropped_in_sft_set"] == 50
    sft_questions = {e.problem for e in calibration_sft_examples(cfg)}
    assert not sft_questions & {e.problem for e in held}
    before = evaluate_calibration(cfg, tiny_text_path, held, tmp_path / "before", max_tokens=96)
    summary = run_sft(cfg)
    assert summary["steps"] == 120
    after = evaluate_calibration(cfg, tmp_path / "sft" / "model", held, tmp_path / "after", max_tokens=96)
    for d in ("before", "after"):
        assert {p.name for p in (tmp_path / d).iterdir()} >= {"calibration.json", "reliability.png",
                                                             "responses.jsonl"}
    assert before["well_formed_rate"] == 0.0 and before["ece"] is None
    assert after["well_formed_rate"] > before["well_formed_rate"] + 0.5
    assert after["strict_well_formed_rate"] > 0.1
    assert after["graded"] > 0 and after["ece"] is not None and 0.0 <= after["brier"] <= 1.0
