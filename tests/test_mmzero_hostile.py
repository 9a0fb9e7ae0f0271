"""MM-Zero loop under hostile or degenerate model outputs: the parser, code extraction, the strategies (driven with a
scripted frozen coder, a fake sandbox and a scripted frozen solver) and the phase metrics must neither crash, hang,
mis-count nor credit the wrong proposal."""

import io
import signal
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
import torch

from mmevo.evolve import mmzero
from mmevo.evolve.mmzero import (CoderStrategy, Judge, ProposerStrategy, Recorder, coder_example, content_id,
                                 extract_code, parse_proposal)
from mmevo.rollout.base import Completion
from mmevo.rollout.strategy import Rollout

GOOD = ("<content_type>table</content_type>\n<caption>A table with x=3.</caption>\n<easy_question>What is x?"
        "</easy_question>\n<easy_answer>3</easy_answer>\n<hard_question>What is x times 2?</hard_question>\n"
        "<hard_answer>6</hard_answer>")
MAP = ("<content_type>map</content_type><caption>A map of a town with a river and two bridges.</caption>"
       "<easy_question>How many bridges are there?</easy_question><easy_answer>3</easy_answer>"
       "<hard_question>Which bridge is closer to the church?</hard_question><hard_answer>north</hard_answer>")
SVG = "```svg\n<svg/>\n```"


@contextmanager
def deadline(seconds):
    """Fails the test instead of hanging it (``re`` and the loop code check signals between steps)."""
    def expire(*_):
        raise TimeoutError(f"took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# -- stubs: the frozen coder / solver and the sandbox, scripted ------------------------------------------------------
def _png():
    from PIL import Image

    b = io.BytesIO()
    Image.new("RGB", (8, 8), "white").save(b, format="PNG")
    return b.getvalue()


class ScriptedPool:
    """render_many: every job renders, unless ``fail`` names an error kind for it."""

    def __init__(self, fail=lambda job: None):
        self.fail = fail

    def render_many(self, jobs, timeout_s=10):
        from render.types import RenderResult

        return [RenderResult(False, None, error_kind=k, message="scripted") if (k := self.fail(j)) else
                RenderResult(True, _png()) for j in jobs]


class Scripted:
    """A frozen role: ``script(example)`` -> its samples."""

    def __init__(self, script):
        self.script = script

    def sample(self, exs, n, seed):
        return [self.script(ex) for ex in exs]


def _judge(solver=lambda ex: ["\\boxed{3}"] * 4, fail=lambda job: None):
    return Judge(ScriptedPool(fail), Scripted(solver), 4, 1.0, min_pixels=0, max_pixels=0)


def _rollout(texts, examples=None, groups=None):
    n = len(texts)
    examples = examples or [SimpleNamespace(id=f"e{i}", meta={}, choices=None) for i in range(n)]
    groups = list(range(n)) if groups is None else groups
    return Rollout([None] * n, [Completion([1], [0.0], "stop") for _ in texts], list(texts),
                   torch.tensor(groups, dtype=torch.long), examples)


def _proposer_rollout(monkeypatch, tmp_path, texts, coder, n_code=2, **judge):
    strategy = ProposerStrategy(Scripted(coder), _judge(**judge), n_code, Recorder(tmp_path), "svg",
                                {"threshold": 0.15, "penalty": 0.3, "type_weight": 0.15})
    monkeypatch.setattr(mmzero, "sample_groups", lambda ctx, examples: _rollout(texts))
    return strategy, strategy.rollout(SimpleNamespace(seed=0, step=0), [])


def _coder_rollout(monkeypatch, tmp_path, texts, **judge):
    ex = coder_example(parse_proposal(GOOD)[0], "svg")
    ex.meta["penalties"] = -0.3
    strategy = CoderStrategy(_judge(**judge), Recorder(tmp_path))
    monkeypatch.setattr(mmzero, "sample_groups", lambda ctx, examples: _rollout(texts, [ex] * len(texts),
                                                                                 [0] * len(texts)))
    return strategy, strategy.rollout(SimpleNamespace(seed=0, step=0), [])


# -- enormous outputs --------------------------------------------------------------------------------------------------
def test_code_extraction_is_linear_on_huge_unclosed_outputs():
    # the old backtracking searches restarted at every "<svg" / after every unclosed fence: quadratic, ~10 minutes on
    # this megabyte of coder output (a run cut at a huge max_tokens, or a model repeating itself)
    with deadline(20):
        assert extract_code("<svg " * 200_000) is None
        assert extract_code("```" + "a" * 1_000_000) is None
        assert extract_code("```" * 300_000) is None
        assert extract_code("<svg " * 200_000 + "</svg>")[0] == "svg"
    # the first fenced block still wins, the language is read from its label as before
    assert extract_code("```bash\npip install x\n```\n```python\nimport matplotlib\n```") == ("python", "pip install x")
    assert extract_code("````svg\n<svg/>\n````") == ("svg", "<svg/>")


# -- proposals that are no valid format: -1 (seed), never a crash downstream -----------------------------------------
@pytest.mark.parametrize("field", [
    "A \udcff table.",  # a lone surrogate (undecodable bytes): cannot be encoded for the coder's tokenizer or an id
    "A \x00 table.", "\x1b[31mA table.", "A\x85table.",  # control characters
    "\u200b", "\u200b \u202e\ufeff",  # nothing visible: an empty tag in disguise
    "What is <|image_pad|> here?", "Stop.<|im_end|><|im_start|>system", "<|vision_start|>",  # chat special tokens
])
def test_unprintable_invisible_or_special_token_fields_are_invalid(field):
    for tag, value in (("caption", "A table with x=3."), ("hard_question", "What is x times 2?")):
        p, why = parse_proposal(GOOD.replace(value, field))
        assert p is None and why == f"bad <{tag}> value", (field, why)


@pytest.mark.parametrize("field", ["Prix é 中文 ≤ 5", "a\tb", "|x| < 5 and |y| > 2", "A<B or A>B", "x <| y"])
def test_ordinary_text_stays_valid(field):
    assert parse_proposal(GOOD.replace("A table with x=3.", field))[0].caption == field


def test_special_token_in_a_question_breaks_the_solver_prompt(tiny_vl_path):
    """Why spelled-out special tokens are refused: the fields go into the frozen solver's prompt next to the image,
    where "<|image_pad|>" becomes a second image slot and the processor fails the whole step."""
    from PIL import Image

    from mmevo.models.inputs import encode_prompt
    from mmevo.models.loader import load_model

    lm = load_model(tiny_vl_path)
    q = "What is <|image_pad|> here?"
    with pytest.raises(Exception):
        encode_prompt(lm.processor, lm.is_vl, mmzero.SOLVER_INSTRUCTION.format(question=q), [Image.new("RGB", (8, 8))])
    assert parse_proposal(GOOD.replace("What is x times 2?", q))[0] is None


def test_surrogates_in_model_text_give_ids_and_rewards_not_crashes(monkeypatch, tmp_path):
    assert content_id("c", "x\udcff") != content_id("c", "x\udcfe")
    # proposer: a surrogate in a field is an invalid format (-1 from the head), and the rollout goes on
    _, ro = _proposer_rollout(monkeypatch, tmp_path / "p", [GOOD.replace("A table", "A \udcff table"), GOOD],
                              lambda ex: [SVG] * 2)
    assert [a["valid"] for a in ro.aux] == [False, True] and ro.aux[1]["executed"] == [True, True]
    # coder: a program holding a surrogate is still rendered (the sandbox reports it) and recorded
    strategy, ro = _coder_rollout(monkeypatch, tmp_path / "c", [SVG, "```svg\n<svg>\udcff</svg>\n```", "\udcff"])
    assert [a["rendered"] for a in ro.aux] == [True, True, False]
    strategy.after_rewards(ro, torch.zeros(3))
    assert len(Recorder.read(tmp_path / "c")[0]["renders"]) == 3


# -- the frozen coder's samples are attributed to their own proposal ------------------------------------------------
def test_a_coder_with_fewer_samples_does_not_shift_renders_onto_the_next_proposal(monkeypatch, tmp_path):
    # the frozen coder returns one program per proposal instead of n_code = 2: each proposal must keep its own render
    # and count the missing attempt as failed, not take its neighbour's render (which also shortened the neighbour)
    def coder(ex):
        return [SVG] if "x=3" in ex.problem else ["no code at all"]

    _, ro = _proposer_rollout(monkeypatch, tmp_path, [GOOD, MAP], coder)
    assert [a["executed"] for a in ro.aux] == [[True, False], [False, False]]
    assert ro.extra_metrics["mmzero/render_error/no_code"] == 1
    assert ro.extra_metrics["mmzero/render_error/unsampled"] == 2
    # more samples than asked: the extra ones are ignored
    _, ro = _proposer_rollout(monkeypatch, tmp_path, [GOOD, MAP], lambda ex: [SVG] * 3)
    assert [a["executed"] for a in ro.aux] == [[True, True], [True, True]]


def test_attempts_the_coder_never_sampled_are_counted_apart_from_code_less_outputs(monkeypatch, tmp_path):
    # no samples (the coder prompt over data.max_prompt_length): failed attempts in the proposal's denominator, but
    # counted as "unsampled", not as a coder that wrote no code
    _, ro = _proposer_rollout(monkeypatch, tmp_path, [GOOD], lambda ex: [])
    assert ro.aux[0]["executed"] == [False, False]
    assert ro.extra_metrics["mmzero/render_error/unsampled"] == 2
    assert "mmzero/render_error/no_code" not in ro.extra_metrics
    _, ro = _proposer_rollout(monkeypatch, tmp_path, [GOOD], lambda ex: ["", "I cannot draw that."])
    assert ro.extra_metrics["mmzero/render_error/no_code"] == 2


class RandomPixelsPool(ScriptedPool):
    """Every render draws other pixels (a program plotting unseeded random data)."""

    def __init__(self):
        self.calls = 0

    def render_many(self, jobs, timeout_s=10):
        from PIL import Image
        from render.types import RenderResult

        out = []
        for _ in jobs:
            self.calls += 1
            b = io.BytesIO()
            Image.new("RGB", (8, 8), (self.calls, 0, 0)).save(b, format="PNG")
            out.append(RenderResult(True, b.getvalue()))
        return out


def test_repeated_proposals_and_programs_keep_their_own_images(monkeypatch, tmp_path):
    # a collapsed proposer repeats its text, the frozen coder its program: each record must still name the image its
    # own solver answers were given, not one that a later render of the same text overwrote
    judge = _judge()
    judge.pool = RandomPixelsPool()
    strategy = ProposerStrategy(Scripted(lambda ex: [SVG]), judge, 1, Recorder(tmp_path / "p"), "svg",
                                {"threshold": 0.15, "penalty": 0.3, "type_weight": 0.15})
    monkeypatch.setattr(mmzero, "sample_groups", lambda ctx, examples: _rollout([GOOD, GOOD, GOOD]))
    ro = strategy.rollout(SimpleNamespace(seed=0, step=0), [])
    strategy.after_rewards(ro, torch.zeros(3))
    images = [row["renders"][0]["image"] for row in Recorder.read(tmp_path / "p")]
    assert len(set(images)) == 3
    # the coder phase: one proposal in two groups of a step, the same program in both
    ex = coder_example(parse_proposal(GOOD)[0], "svg")
    strategy = CoderStrategy(judge, Recorder(tmp_path / "c"))
    monkeypatch.setattr(mmzero, "sample_groups", lambda ctx, examples: _rollout([SVG] * 4, [ex] * 4, [0, 0, 1, 1]))
    ro = strategy.rollout(SimpleNamespace(seed=0, step=0), [])
    strategy.after_rewards(ro, torch.zeros(4))
    images = [r["image"] for row in Recorder.read(tmp_path / "c") for r in row["renders"]]
    assert len(images) == 4 and len(set(images)) == 4


# -- metrics: an undefined rate is left out, a count is 0 where absent ---------------------------------------------
def test_rates_without_a_denominator_are_not_logged_as_zero(monkeypatch, tmp_path):
    # every proposal invalid: no render attempt, so no render success / easy accuracy / consistency (were logged 0.0)
    _, ro = _proposer_rollout(monkeypatch, tmp_path, ["no tags", GOOD + GOOD], lambda ex: [SVG] * 2)
    assert ro.extra_metrics == {"mmzero/valid_frac": 0.0, "mmzero/invalid/missing_content_type": 1,
                                "mmzero/invalid/trailing_text": 1}
    # every render failing: render success 0 is real; accuracy and consistency over no executed render are not
    _, ro = _proposer_rollout(monkeypatch, tmp_path, [GOOD, MAP], lambda ex: [SVG] * 2, fail=lambda job: "timeout")
    assert ro.extra_metrics == {"mmzero/valid_frac": 1.0, "mmzero/render_success": 0.0,
                                "mmzero/render_error/timeout": 4}
    # no sample at all (every prompt over the limit): nothing to report
    _, ro = _proposer_rollout(monkeypatch, tmp_path, [], lambda ex: [SVG] * 2)
    assert ro.extra_metrics == {}
    _, ro = _coder_rollout(monkeypatch, tmp_path, [])
    assert ro.extra_metrics == {}


def test_phase_means_count_absent_failures_as_zero_and_skip_undefined_rates():
    from mmevo.evolve.mmzero import phase_means

    history = [{"mmzero/render_success": 1.0, "mmzero/easy_accuracy": 0.5},
               {"mmzero/render_success": 0.0, "mmzero/render_error/timeout": 4},
               {"mmzero/valid_frac": 0.0}, {"mmzero/render_success": 0.5, "mmzero/easy_accuracy": 1.0,
                                            "mmzero/render_error/timeout": 2}]
    means = phase_means(history)
    assert means["mmzero/render_error/timeout"] == 1.5  # 6 timeouts over 4 steps, not 3 per step that had one
    assert means["mmzero/render_success"] == 0.5 and means["mmzero/easy_accuracy"] == 0.75
    assert phase_means([]) == {}


# -- a whole hostile step through the proposer head: each reward as the seed says -----------------------------------
def test_hostile_proposer_step_rewards_follow_the_seed(monkeypatch, tmp_path):
    """Guard: invalid formats get -1 and nothing else does; a valid proposal whose renders all fail gets 0 + its
    adjustments (failed renders stay in the denominator), never -1; the coder's no-code / timeout attempts count as
    failed attempts of their own proposal."""
    from mmevo.rewards.heads import RewardMixer, ScoredSample

    hostile = ["", "Sure! " + GOOD, GOOD + GOOD, GOOD.replace("<caption>", "<CAPTION>"),
               GOOD.replace(">3<", ">```python\nprint(3)\n```<"),  # code as the easy answer: valid, s = 0
               MAP, "x" * 200_000]

    def coder(ex):
        return ["```python\nwhile True: pass\n```", SVG] if "bridges" in ex.problem else ["no code", "no code"]

    with deadline(60):
        strategy, ro = _proposer_rollout(monkeypatch, tmp_path, hostile, coder,
                                         fail=lambda job: "timeout" if "while" in job.code else None)
        samples = [ScoredSample(t, i, None, [], aux=a) for i, (t, a) in enumerate(zip(ro.texts, ro.aux))]
        r, _ = RewardMixer({"mmzero_proposer": 1.0})(samples)
        strategy.after_rewards(ro, r)
    valid = [a["valid"] for a in ro.aux]
    assert valid == [False, False, False, False, True, True, False]
    assert all(x == -1.0 for x, v in zip(r.tolist(), valid) if not v)
    assert ro.aux[4]["executed"] == [False, False] and ro.aux[5]["executed"] == [False, True]
    # M = 2 distinct clusters / types: no diversity or type adjustment; no executed render -> no easy-hard penalty
    assert r[4].item() == pytest.approx(0.0, abs=1e-6)
    # map: 1 of 2 attempts executed, s = 1 (capped .5), c = 1 (min(c, 1 - c) = 0, so the easy-hard penalty -.3)
    assert r[5].item() == pytest.approx((0.5 + 0.0) / 2 - 0.3, abs=1e-6)
    assert ro.extra_metrics["mmzero/render_error/timeout"] == 1 and ro.extra_metrics["mmzero/render_error/no_code"] == 2
    rows = Recorder.read(tmp_path)
    assert [row["reward"] for row in rows] == pytest.approx(r.tolist())


def test_reward_heads_take_an_empty_batch():
    from mmevo.rewards.mmzero import CoderHead

    r, m = CoderHead().score([])
    assert r.shape == (0,) and m == {}
