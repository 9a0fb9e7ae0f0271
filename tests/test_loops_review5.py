"""Self-play loops, fifth review: degenerate model outputs and loop state across a resume.

HONEST's lenient parser read a ``confidence: 0.7.5`` or ``confidence: 0x1`` phrase (a garbled or hex number, what a
model cut mid-number or rambling writes) as its prefix, 0.7 or 0.0: a confidence the response never stated went into
the calibration report. The trainable GSS generator's ``pool.jsonl`` kept the accepted problems of the generator
steps after its last checkpoint when a run was killed: the resumed run ran those steps again and added theirs, so the
solver's pool held problems of a generator state no checkpoint had (and each row was labelled with the step before
its own)."""

import json

import pytest

from mmevo.honest.calibration import calibration_report
from mmevo.honest.protocol import parse_lenient


# ------------------------------------------------------------------------ lenient confidence phrase: whole token
@pytest.mark.parametrize("text", ["confidence: 0.7.5", "Confidence: 0x1", "confidence = 0.5abc", "confidence: 1e-3x",
                                  "confidence: 0.9.9 and more"])
def test_a_garbled_confidence_phrase_is_non_numeric_not_its_prefix(text):
    p = parse_lenient("The answer is \\boxed{4}. " + text)
    assert (p.answer, p.confidence, p.malformed) == ("4", None, ("non_numeric_confidence",))


@pytest.mark.parametrize("text, conf", [
    ("Confidence: 0.8.", 0.8), ("confidence=0.9, so", 0.9), ("confidence is 85 %.", 0.85), ("confidence: 1e-1", 0.1),
    ("confidence: 0.5e", 0.5),  # review 4: a lone 'e' is no exponent
])
def test_well_written_confidence_phrases_are_still_read(text, conf):
    p = parse_lenient("\\boxed{4} " + text)
    assert (p.answer, p.confidence, p.malformed) == ("4", conf, ())


def test_the_last_phrase_wins_even_when_it_is_garbled():
    """The phrase read is the last one, as before; a garbled last one leaves the response ungraded."""
    p = parse_lenient("\\boxed{4} confidence: 0.8, then on reflection confidence: 0.7.5")
    assert p.confidence is None and p.malformed == ("non_numeric_confidence",)


def test_report_leaves_a_garbled_phrase_ungraded():
    rep = calibration_report([{"response": "\\boxed{4} confidence: 0x1", "gold": "4"},
                              {"response": "\\boxed{4} confidence: 0.75", "gold": "4"}])
    # only the second is graded: c = 0.75, y = 1 -> Brier 0.0625 (with 0x1 read as 0: (0.0625 + 1) / 2 = 0.53125)
    assert rep["graded"] == 1 and rep["brier"] == pytest.approx(0.0625)


# ------------------------------------------------------------------ trainable GSS: pool.jsonl across a resume
def _gss_cfg(model, out, *extra):
    from mmevo.config import load_config

    return load_config("configs/honest_tiny.yaml", [
        f"model.path={model}", f"honest.output_dir={out}", "honest.sft_n=32", "sft.epochs=1", "data.n_train=40",
        "honest.gss_mode=trainable", "honest.gss_blocks=1", "honest.gss_block_steps=1", "honest.gss_generator_steps=2",
        "honest.gss_warmup_problems=16", "honest.gss_solver_samples=2", "honest.eval_calibration=false",
        "honest.hcr_enabled=false", "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2", "rollout.n=2", "rollout.max_tokens=16",
        "honest.roles={generator: {rollout.max_tokens: 8}}", *extra])


@pytest.fixture
def every_generation_accepted(monkeypatch):
    """A stub for the tiny generator and frozen solver: every generator sample is the problem 3 + 4 and every solver
    sample a graded answer, so each step accepts prompts_per_step x rollout.n = 4 problems."""
    import mmevo.honest.selfplay as sp

    monkeypatch.setattr(sp, "parse_generated", lambda text: (sp.problem_from_expression("3 + 4"), ""))
    monkeypatch.setattr(sp, "honest_aux", lambda text, ex: {"confidence": 0.5, "correct": True})


def test_a_resumed_generator_does_not_keep_the_pool_rows_of_the_steps_it_runs_again(
        tiny_text_path, tmp_path, every_generation_accepted):
    import shutil

    from mmevo.honest.loop import run_honest

    out = tmp_path / "honest"
    run_honest(_gss_cfg(tiny_text_path, out))
    pool = out / "generator" / "pool.jsonl"
    straight = [json.loads(line) for line in pool.read_text().splitlines()]
    assert [r["step"] for r in straight] == [1] * 4 + [2] * 4  # the step that accepted it (was 0 and 1)
    # killed after generator step 2 wrote its rows but before its checkpoint: the rerun runs step 2 again
    shutil.rmtree(out / "generator" / "checkpoints" / "step_000002")
    shutil.rmtree(out / "generator" / "final")
    (out / "summary.json").unlink()
    run_honest(_gss_cfg(tiny_text_path, out))
    assert [r["step"] for r in (json.loads(line) for line in pool.read_text().splitlines())] == [1] * 4 + [2] * 4


# ------------------------------------------------------------------------- Prism: non-answers are no agreement
def test_prism_agreement_counts_non_answers_as_unanswered():
    """6 of 8 solver samples box "None": p was 6/8 = 0.75, the ZPD peak (zpd = 1, the highest reward a question can
    get) and the pool's silver label "None". Now the 6 are answerless: p = 2/8 (the two 3s), silver 3."""
    from mmevo.evolve.prism import agreement
    from mmevo.rewards.prism import zpd

    a = agreement(["\\boxed{None}"] * 6 + ["\\boxed{3}"] * 2)
    assert (a["p"], a["silver"], a["answered"], a["samples"]) == (0.25, "3", 2, 8)
    assert zpd(a["p"]) == 0.0
    spelled = agreement(["\\boxed{\\text{N/A}}", "\\boxed{unknown}", "\\boxed{none}", "\\boxed{\\mathrm{None}}"] +
                        ["\\boxed{3}"] * 3 + ["no answer"])
    assert (spelled["p"], spelled["silver"], spelled["answered"]) == (3 / 8, "3", 3)
    only_none = agreement(["\\boxed{None}"] * 8)  # was p = 1 with silver "None"
    assert (only_none["p"], only_none["silver"], only_none["answered"]) == (0.0, None, 0)
