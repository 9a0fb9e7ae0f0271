"""HONEST protocol (mmevo.honest.protocol): strict vs lenient parsing of every malformed variant, the system prompts
of the two hindsight modes, and how the config switches them."""

import pytest

from mmevo.config import ConfigError, load_config
from mmevo.honest.protocol import (LEGACY_SYSTEM_PROMPT, REFINED_SYSTEM_PROMPT, ParsedResponse, format_response,
                                   parse_lenient, parse_response, parse_strict, system_prompt)

GOOD = "<reasoning>2 + 2 = 4</reasoning><answer>4</answer><confidence>0.85</confidence>"


def test_clean_response_parses_the_same_both_ways():
    for parse in (parse_strict, parse_lenient):
        p = parse(GOOD)
        assert p == ParsedResponse(answer="4", confidence=0.85)
        assert p.answered and p.graded and p.well_formed and not p.abstain
    spaced = "\n  <reasoning>\nline 1\nline 2\n</reasoning>\n\n<answer> 4 </answer>\n<confidence> 0.85 </confidence>\n"
    assert parse_strict(spaced) == ParsedResponse(answer="4", confidence=0.85)  # whitespace between / inside is fine
    assert parse_response(GOOD, strict=False) == parse_lenient(GOOD) and parse_response(GOOD) == parse_strict(GOOD)


# (response, strict reasons, lenient (answer, confidence, abstain, reasons))
VARIANTS = [
    ("preamble " + GOOD, ("extra_text",), ("4", 0.85, False, ())),
    (GOOD + " trailing", ("extra_text",), ("4", 0.85, False, ())),
    ("<answer>4</answer><confidence>0.85</confidence>", ("no_reasoning",), ("4", 0.85, False, ())),
    ("<reasoning>x</reasoning><Answer>4</Answer><confidence>0.85</confidence>", ("extra_text",),
     ("4", 0.85, False, ())),
    ("<reasoning>x</reasoning><answer>3</answer><answer>4</answer><confidence>0.85</confidence>",
     ("duplicate_tag",), ("4", 0.85, False, ())),
    ("<reasoning>x</reasoning><confidence>0.85</confidence><answer>4</answer>", ("bad_order",),
     ("4", 0.85, False, ())),
    ("<answer>4</answer><reasoning>x</reasoning><confidence>0.85</confidence>", ("bad_order",),
     ("4", 0.85, False, ())),
    ("<reasoning>x</reasoning><answer>4", ("unclosed_tag",), (None, None, False, ("no_answer", "no_confidence"))),
    ("<reasoning>x</reasoning><answer>4<confidence>0.85</confidence>", ("nested_tag",),
     (None, 0.85, False, ("no_answer",))),
    ("<reasoning>x</reasoning></answer><confidence>0.85</confidence>", ("unclosed_tag",),
     (None, 0.85, False, ("no_answer",))),
    ("<reasoning>maybe <answer>3</answer></reasoning><answer>4</answer><confidence>0.85</confidence>",
     ("nested_tag",), ("4", 0.85, False, ())),
    ("<reasoning>x</reasoning><abstain/><answer>4</answer><confidence>0.85</confidence>",
     ("bad_order", "abstain_and_answer", "abstain_and_confidence"), ("4", 0.85, False, ("abstain_and_answer",))),
    ("<reasoning>x</reasoning><abstain/><confidence>0.1</confidence>", ("abstain_and_confidence",),
     (None, None, True, ())),
    ("", ("empty",), (None, None, False, ("empty",))),
    ("   \n", ("empty",), (None, None, False, ("empty",))),
    ("The answer is \\boxed{4}. Confidence: 85%", ("extra_text", "no_reasoning"), ("4", 0.85, False, ())),
]


@pytest.mark.parametrize("text,strict_reasons,lenient", VARIANTS)
def test_structural_variants_strict_rejects_lenient_recovers(text, strict_reasons, lenient):
    s = parse_strict(text)
    assert s.malformed == strict_reasons
    assert (s.answer, s.confidence, s.abstain, s.hindsight, s.critique, s.refined_confidence) == \
        (None, None, False, None, None, None)  # a structural violation rejects the whole response
    assert not s.well_formed and not s.graded
    p = parse_lenient(text)
    assert (p.answer, p.confidence, p.abstain, p.malformed) == lenient


# (confidence text, strict (value, reasons), lenient (value, reasons))
CONFIDENCES = [
    ("0.85", (0.85, ()), (0.85, ())),
    ("1", (1.0, ()), (1.0, ())),
    ("0", (0.0, ()), (0.0, ())),
    (".5", (0.5, ()), (0.5, ())),
    ("1.0", (1.0, ()), (1.0, ())),
    ("85%", (None, ("non_numeric_confidence",)), (0.85, ())),
    ("0.8.", (None, ("non_numeric_confidence",)), (0.8, ())),
    ("1e-1", (None, ("non_numeric_confidence",)), (0.1, ())),
    ("1.5", (None, ("confidence_out_of_range",)), (None, ("confidence_out_of_range",))),
    ("-0.1", (None, ("confidence_out_of_range",)), (None, ("confidence_out_of_range",))),
    ("85", (None, ("confidence_out_of_range",)), (None, ("confidence_out_of_range",))),  # never read as a percent
    ("150%", (None, ("non_numeric_confidence",)), (None, ("confidence_out_of_range",))),
    ("high", (None, ("non_numeric_confidence",)), (None, ("non_numeric_confidence",))),
    ("nan", (None, ("non_numeric_confidence",)), (None, ("non_numeric_confidence",))),
    ("inf", (None, ("non_numeric_confidence",)), (None, ("non_numeric_confidence",))),
    ("", (None, ("non_numeric_confidence",)), (None, ("non_numeric_confidence",))),
    ("0.7 or 0.8", (None, ("non_numeric_confidence",)), (None, ("non_numeric_confidence",))),
]


@pytest.mark.parametrize("raw,strict,lenient", CONFIDENCES)
def test_confidence_values(raw, strict, lenient):
    text = f"<reasoning>x</reasoning><answer>4</answer><confidence>{raw}</confidence>"
    for parse, (value, reasons) in ((parse_strict, strict), (parse_lenient, lenient)):
        p = parse(text)
        assert (p.confidence, p.malformed) == (value, reasons), parse.__name__
        assert p.answer == "4" and p.answered  # a bad value only empties its own slot
        assert p.graded == (value is not None) and p.well_formed == (value is not None)


def test_missing_slots():
    for parse in (parse_strict, parse_lenient):
        p = parse("<reasoning>x</reasoning><answer>4</answer>")
        assert (p.answer, p.confidence, p.malformed) == ("4", None, ("no_confidence",))
        assert p.answered and not p.graded and not p.well_formed
        p = parse("<reasoning>x</reasoning><confidence>0.4</confidence>")
        assert (p.answer, p.confidence, p.malformed) == (None, 0.4, ("no_answer",)) and not p.answered
        p = parse("<reasoning>x</reasoning><answer> </answer><confidence>0.4</confidence>")
        assert (p.answer, p.malformed) == (None, ("empty_answer",))
    # lenient only: a confidence phrase outside the tags, \boxed inside the answer
    p = parse_lenient("<answer>\\boxed{4}</answer> my confidence: 0.6")
    assert (p.answer, p.confidence, p.malformed) == ("4", 0.6, ())
    assert parse_strict("<reasoning>x</reasoning><answer>\\boxed{4}</answer><confidence>0.6</confidence>").answer \
        == "\\boxed{4}"  # kept as written; the core's answer equivalence reads the box


def test_abstain_forms():
    p = parse_strict("<reasoning>I cannot tell</reasoning>\n<abstain/>")
    assert p.abstain and p.well_formed and not p.answered and not p.graded and p.malformed == ()
    assert parse_strict("<reasoning>x</reasoning><abstain></abstain>").malformed == ("extra_text",)
    assert parse_strict("<abstain/>").malformed == ("no_reasoning",)
    for text in ("<abstain>", "<ABSTAIN />", "<reasoning>x</reasoning><abstain></abstain>", "<answer>abstain</answer>",
                 "<answer>I abstain</answer>"):
        p = parse_lenient(text)
        assert p.abstain and p.answer is None and not p.answered and p.well_formed, text


def test_optional_slots_legacy_hindsight():
    base = "<reasoning>x</reasoning><answer>4</answer><confidence>0.85</confidence>"
    for parse in (parse_strict, parse_lenient):
        assert parse(base + "<hindsight>0.3</hindsight>").hindsight == 0.3
        p = parse(base + "<hindsight>later</hindsight>")
        assert (p.hindsight, p.malformed, p.graded) == (None, ("non_numeric_hindsight",), True)
        p = parse(base + "<hindsight>2</hindsight>")
        assert (p.hindsight, p.malformed, p.graded) == (None, ("hindsight_out_of_range",), True)
    assert parse_strict(base + "<hindsight>0.3</hindsight><hindsight>0.4</hindsight>").malformed == ("duplicate_tag",)
    assert parse_strict("<reasoning>x</reasoning><hindsight>0.3</hindsight><answer>4</answer>"
                        "<confidence>0.85</confidence>").malformed == ("bad_order",)
    assert parse_lenient(base + "<hindsight>0.3</hindsight><hindsight>0.4</hindsight>").hindsight == 0.4


def test_optional_slots_refinement():
    base = "<reasoning>x</reasoning><answer>4</answer><confidence>0.85</confidence>"
    crit = "<critique>the addition is right</critique>"
    for parse in (parse_strict, parse_lenient):
        p = parse(base + crit + "<refined_confidence>0.9</refined_confidence>")
        assert (p.critique, p.refined_confidence, p.malformed) == ("the addition is right", 0.9, ())
        assert p.critique_chars == len("the addition is right")
        p = parse(base + crit)
        assert (p.refined_confidence, p.malformed) == (None, ("partial_refinement",))
        p = parse(base + "<refined_confidence>0.9</refined_confidence>")
        assert (p.critique, p.malformed) == (None, ("partial_refinement",))
        p = parse(base + "<critique>  </critique><refined_confidence>0.9</refined_confidence>")
        assert (p.critique, p.critique_chars, p.malformed) == ("", 0, ("partial_refinement",))
        p = parse(base + crit + "<refined_confidence>sure</refined_confidence>")
        assert p.malformed == ("non_numeric_refined_confidence", "partial_refinement")
        p = parse(base + crit + "<refined_confidence>1.1</refined_confidence>")
        assert p.malformed == ("refined_confidence_out_of_range", "partial_refinement")
        assert p.graded  # the core stays graded
    assert parse_strict(base + "<refined_confidence>0.9</refined_confidence>" + crit).malformed == ("bad_order",)


def test_system_prompts_teach_the_tags_of_their_mode():
    assert system_prompt() == LEGACY_SYSTEM_PROMPT and system_prompt("refined") == REFINED_SYSTEM_PROMPT
    for prompt in (LEGACY_SYSTEM_PROMPT, REFINED_SYSTEM_PROMPT):
        for tag in ("reasoning", "answer", "confidence"):
            assert f"<{tag}>" in prompt and f"</{tag}>" in prompt
        assert "<abstain/>" in prompt
    assert "<hindsight>" in LEGACY_SYSTEM_PROMPT and "<critique>" not in LEGACY_SYSTEM_PROMPT
    for tag in ("critique", "refined_confidence"):
        assert f"<{tag}>" in REFINED_SYSTEM_PROMPT and f"</{tag}>" in REFINED_SYSTEM_PROMPT
    assert "<hindsight>" not in REFINED_SYSTEM_PROMPT
    with pytest.raises(ValueError, match="mode"):
        system_prompt("v3")


def test_format_response_round_trips_through_the_strict_parser():
    text = format_response("2 + 2 = 4", "4", 0.85, hindsight=0.9)
    assert parse_strict(text) == ParsedResponse(answer="4", confidence=0.85, hindsight=0.9)
    text = format_response("2 + 2 = 4", "4", 0.5, critique="the sum is right", refined_confidence=1.0)
    assert parse_strict(text) == ParsedResponse(answer="4", confidence=0.5, critique="the sum is right",
                                                refined_confidence=1.0)
    assert parse_strict(format_response("no idea", abstain=True)) == ParsedResponse(abstain=True)


# -- config: the mode switches the system prompt ------------------------------------------------------------------
def test_config_puts_the_mode_prompt_in_place():
    cfg = load_config(None, ["data.train=honest_tasks"])
    assert cfg.data.system_prompt == LEGACY_SYSTEM_PROMPT and cfg.data.prompt_template == "none"
    cfg = load_config(None, ["data.train=honest_tasks", "honest.hindsight_mode=refined"])
    assert cfg.data.system_prompt == REFINED_SYSTEM_PROMPT
    cfg = load_config(None, ["data.system_prompt=honest", "honest.hindsight_mode=refined"])
    assert cfg.data.system_prompt == REFINED_SYSTEM_PROMPT
    cfg = load_config(None, ["reward.heads={honest_brier: 1.0}"])  # an honest head alone also asks for the protocol
    assert cfg.data.system_prompt == LEGACY_SYSTEM_PROMPT
    cfg = load_config(None, ["data.train=honest_tasks", "data.system_prompt=Be brief."])  # an own prompt stays
    assert cfg.data.system_prompt == "Be brief." and cfg.data.prompt_template == "r1v"
    cfg = load_config(None, [])  # other runs are untouched
    assert cfg.data.system_prompt == "" and cfg.data.prompt_template == "r1v" and cfg.reward.head_args == {}


def test_config_feeds_the_heads():
    cfg = load_config(None, ["reward.heads={honest_brier: 1.0, honest_hindsight: 0.3, honest_format: 0.1}",
                             "honest.hindsight_mode=refined", "honest.casr_clip=0.2", "honest.k=0.4",
                             "honest.malformed_penalty=-2", "reward.head_args={honest_brier: {abstain_reward: -0.3}}"])
    args = cfg.reward.head_args
    assert args["honest_hindsight"] == {"mode": "refined", "k": 0.4, "alpha": 1.0, "beta": 0.05, "gamma": 0.05,
                                        "delta": 0.05, "clip": 0.2, "copy_tol": 0.02}
    assert args["honest_brier"] == {"malformed_penalty": -2.0, "abstain_reward": -0.3}  # head_args win
    assert args["honest_format"] == {"malformed_penalty": -2.0}
    from mmevo.grpo.trainer import head_arguments
    from mmevo.rewards.heads import RewardMixer

    mixer = RewardMixer(cfg.reward.heads, head_arguments(cfg))
    assert mixer.heads["honest_hindsight"].mode == "refined" and mixer.heads["honest_hindsight"].casr["clip"] == 0.2
    with pytest.raises(ConfigError, match="hindsight_mode"):
        load_config(None, ["reward.heads={honest_hindsight: 1.0}",
                           "reward.head_args={honest_hindsight: {mode: refined}}"])
    with pytest.raises(ConfigError, match="hindsight_mode"):
        load_config(None, ["honest.hindsight_mode=retro"])
