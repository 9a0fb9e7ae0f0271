"""HONEST response protocol: the system prompts that teach it, and a strict and a lenient parser.

A response states its reasoning, an answer and the probability that the answer is correct::

    <reasoning>...</reasoning><answer>42</answer><confidence>0.8</confidence>

or abstains, ``<reasoning>...</reasoning><abstain/>``. Two optional slots follow the confidence:

- legacy mode (HCR, seed section 2.1-2.4): ``<hindsight>r</hindsight>``, a reconsidered probability (in GRPO with
  the hindsight head, offered by the prompt on a share ``honest.hindsight_prob`` of the steps; ``CORE_SYSTEM_PROMPT``
  is the prompt of the other steps);
- refined mode (CASR, seed section 2.5): ``<critique>...</critique><refined_confidence>r</refined_confidence>``.

``parse_strict`` is for training rewards: the tags must appear once each, in that order, with only whitespace
between them, exact lower-case names, and probabilities written as plain decimals in [0, 1]. A structural violation
(text outside the tags, a missing ``<reasoning>``, a repeated, unclosed, nested or misplaced tag, abstaining and
answering at once) rejects the whole response: every field is None and ``malformed`` says why. A bad value (missing,
non-numeric or out-of-range number, empty answer) only empties its own slot.

``parse_lenient`` is for evaluation: any order, text around the tags, tag names in any case, the last occurrence of
a tag wins, probabilities may be percentages (``85%``), a missing ``<answer>`` falls back to the last ``\\boxed{}``
and a missing ``<confidence>`` tag to a ``confidence: 0.8`` phrase (a number with more glued to it,
``confidence: 0.7.5`` or ``0x1``, is non-numeric, not its prefix). Out-of-range numbers are never clamped.

Both return a ``ParsedResponse``; ``malformed`` lists reason codes (the ``REASON_*`` names below) that the reward
heads count in their metrics.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from dataclasses import dataclass

from mmevo.validation import is_blank_text

__all__ = ["MODES", "TAGS", "ParsedResponse", "system_prompt", "LEGACY_SYSTEM_PROMPT", "CORE_SYSTEM_PROMPT",
           "parse_strict", "parse_lenient", "parse_response", "format_response", "CORE_REASONS", "HINDSIGHT_REASONS",
           "REFINEMENT_REASONS"]

MODES = ("legacy", "refined")
TAGS = ("reasoning", "answer", "confidence", "hindsight", "critique", "refined_confidence")  # <name>...</name> slots
ABSTAIN = "<abstain/>"

# -- reason codes --------------------------------------------------------------------------------------------------
# structural: the strict parser rejects the whole response
EMPTY, EXTRA_TEXT, UNCLOSED, NESTED, DUPLICATE, BAD_ORDER, NO_REASONING, ABSTAIN_AND_ANSWER, ABSTAIN_AND_CONFIDENCE = (
    "empty", "extra_text", "unclosed_tag", "nested_tag", "duplicate_tag", "bad_order", "no_reasoning",
    "abstain_and_answer", "abstain_and_confidence")
# core slots: no gradeable answer
NO_ANSWER, EMPTY_ANSWER, NO_CONFIDENCE, NON_NUMERIC_CONFIDENCE, CONFIDENCE_OUT_OF_RANGE = (
    "no_answer", "empty_answer", "no_confidence", "non_numeric_confidence", "confidence_out_of_range")
# optional slots: only that slot is dropped
NON_NUMERIC_HINDSIGHT, HINDSIGHT_OUT_OF_RANGE = "non_numeric_hindsight", "hindsight_out_of_range"
NON_NUMERIC_REFINED, REFINED_OUT_OF_RANGE, PARTIAL_REFINEMENT = (
    "non_numeric_refined_confidence", "refined_confidence_out_of_range", "partial_refinement")

STRUCTURAL_REASONS = (EMPTY, EXTRA_TEXT, UNCLOSED, NESTED, DUPLICATE, BAD_ORDER, NO_REASONING, ABSTAIN_AND_ANSWER,
                      ABSTAIN_AND_CONFIDENCE)
CORE_REASONS = STRUCTURAL_REASONS + (NO_ANSWER, EMPTY_ANSWER, NO_CONFIDENCE, NON_NUMERIC_CONFIDENCE,
                                     CONFIDENCE_OUT_OF_RANGE)
HINDSIGHT_REASONS = (NON_NUMERIC_HINDSIGHT, HINDSIGHT_OUT_OF_RANGE)
REFINEMENT_REASONS = (NON_NUMERIC_REFINED, REFINED_OUT_OF_RANGE, PARTIAL_REFINEMENT)


@dataclass(frozen=True)
class ParsedResponse:
    answer: str | None = None  # the stated answer (stripped); None when missing, empty or the response was rejected
    confidence: float | None = None  # c in [0, 1]; None when missing, non-numeric or out of range
    abstain: bool = False  # the response abstained instead of answering
    hindsight: float | None = None  # legacy slot r in [0, 1], else None
    critique: str | None = None  # refined slot, stripped; None when the tag is absent ("" when empty)
    refined_confidence: float | None = None  # refined slot r in [0, 1], else None
    malformed: tuple[str, ...] = ()  # reason codes, empty for a clean response

    @property
    def answered(self) -> bool:
        """A real answer (not an abstain): what the hindsight rewards require."""
        return self.answer is not None and not self.abstain

    @property
    def graded(self) -> bool:
        """A real answer with a valid confidence: what the Brier reward scores."""
        return self.answered and self.confidence is not None

    @property
    def well_formed(self) -> bool:
        """The core of the protocol holds: a graded answer or a clean abstain (optional slots may still be bad)."""
        return self.graded or self.abstain

    @property
    def critique_chars(self) -> int:
        """Characters of critique text (0 when absent or empty); CASR's format bonus needs >= 16. Unicode format
        characters (zero-width space / joiners, BOM, bidi marks) show nothing and are not counted: 16 zero-width
        spaces earned the bonus for "a non-trivial critique"."""
        return sum(unicodedata.category(ch) != "Cf" for ch in self.critique) if self.critique else 0


# ------------------------------------------------------------------------------------------------------ prompts
_CORE_PROMPT = (
    "Solve the problem, then say how likely it is that your answer is correct.\n"
    "Reply in exactly this format, with nothing outside the tags:\n"
    "<reasoning>your step-by-step work</reasoning>\n"
    "<answer>your final answer only</answer>\n"
    "<confidence>the probability from 0 to 1 that your answer is correct, e.g. 0.7</confidence>\n"
    "If you cannot give an answer, write <abstain/> in place of the answer and confidence.\n"
)
_SCORING = "Your confidence is scored with the Brier score: being sure of a wrong answer costs the most."

# the legacy protocol without the hindsight slot: a GRPO step's prompt when it does not offer it (honest.hindsight_prob)
CORE_SYSTEM_PROMPT = _CORE_PROMPT + _SCORING

LEGACY_SYSTEM_PROMPT = _CORE_PROMPT + (
    "After the confidence you may look back over your work and add\n"
    "<hindsight>your reconsidered probability from 0 to 1 that the answer is correct</hindsight>\n"
) + _SCORING

REFINED_SYSTEM_PROMPT = _CORE_PROMPT + (
    "After the confidence, check your own answer and refine your confidence:\n"
    "<critique>look for errors in the reasoning above</critique>\n"
    "<refined_confidence>your probability from 0 to 1 after the critique</refined_confidence>\n"
) + _SCORING


def system_prompt(mode: str = "legacy", hindsight_slot: bool = True) -> str:
    """The system prompt that teaches the protocol of ``mode`` (legacy: optional hindsight; refined: critique).

    ``hindsight_slot=False``: the legacy protocol without the ``<hindsight>`` slot (a step that does not offer it,
    ``honest.hindsight_prob``). Refined mode has no such variant: CASR's tags are taught on every step (seed 2.5: a
    prompt that does not describe a tag never gets it written)."""
    if mode == "legacy":
        return LEGACY_SYSTEM_PROMPT if hindsight_slot else CORE_SYSTEM_PROMPT
    if mode == "refined":
        if not hindsight_slot:
            raise ValueError("HONEST refined mode (CASR) has no prompt without its critique slots: only the legacy "
                             "<hindsight> slot is offered per step")
        return REFINED_SYSTEM_PROMPT
    raise ValueError(f"HONEST hindsight mode {mode!r} not in {list(MODES)}")


def format_response(reasoning: str, answer: str | None = None, confidence: float | None = None,
                    abstain: bool = False, hindsight: float | None = None, critique: str | None = None,
                    refined_confidence: float | None = None) -> str:
    """A response in the strict protocol (for worked examples and tests); ``abstain`` replaces answer and confidence."""
    parts = [f"<reasoning>{reasoning}</reasoning>"]
    if abstain:
        parts.append(ABSTAIN)
    else:
        parts += [f"<answer>{answer}</answer>", f"<confidence>{_num(confidence)}</confidence>"]
    if hindsight is not None:
        parts.append(f"<hindsight>{_num(hindsight)}</hindsight>")
    if critique is not None:
        parts.append(f"<critique>{critique}</critique>")
    if refined_confidence is not None:
        parts.append(f"<refined_confidence>{_num(refined_confidence)}</refined_confidence>")
    return "\n".join(parts)


def _num(x) -> str:
    return f"{float(x):.4f}".rstrip("0").rstrip(".") if isinstance(x, (int, float)) else str(x)


# ------------------------------------------------------------------------------------------------------- numbers
# Every optional piece carries its own leading \s*: two \s* runs with only optional text between them backtrack
# over every split of a long whitespace run (cubic time on "0.5" + many spaces + "x").
_STRICT_NUMBER = re.compile(r"\s*([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))\s*")  # ASCII digits: "０.９" is not plain
_LENIENT_NUMBER = re.compile(r"\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)(?:\s*(%))?(?:\s*\.)?\s*")


def _probability(text: str, lenient: bool, non_numeric: str, out_of_range: str) -> tuple[float | None, str | None]:
    """(value, None) for a probability in [0, 1], else (None, reason). Strict: a plain decimal; lenient also takes
    ``85%``, exponents and a trailing period. Never clamps."""
    if lenient:
        m = _LENIENT_NUMBER.fullmatch(text)
        if not m:
            return None, non_numeric
        value = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
    else:
        m = _STRICT_NUMBER.fullmatch(text)
        if not m:
            return None, non_numeric
        value = float(m.group(1))  # float() itself rejects the \s the pattern allows around it (\x1c-\x1f)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        return None, out_of_range
    return value, None


# -------------------------------------------------------------------------------------------------------- strict
_STRICT_TAG = re.compile(r"<(/?)(reasoning|answer|confidence|hindsight|critique|refined_confidence)>|<abstain/>")
_ORDER = {"reasoning": 0, "answer": 1, "abstain": 1, "confidence": 2, "hindsight": 3, "critique": 4,
          "refined_confidence": 5}


def _strict_blocks(text: str) -> tuple[list[tuple[str, str]], list[str], bool]:
    """The response as (tag, content) blocks in order, the structural reasons found while cutting it, and whether
    the cut reached the end (a nested or unclosed tag stops it)."""
    blocks: list[tuple[str, str]] = []
    reasons: list[str] = []
    tokens = list(_STRICT_TAG.finditer(text))
    pos, i = 0, 0
    while i < len(tokens):
        t = tokens[i]
        if text[pos:t.start()].strip():
            reasons.append(EXTRA_TEXT)
        if t.group(0) == ABSTAIN:
            blocks.append(("abstain", ""))
            pos, i = t.end(), i + 1
            continue
        if t.group(1):  # a closing tag with no opening
            reasons.append(UNCLOSED)
            pos, i = t.end(), i + 1
            continue
        name = t.group(2)
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if nxt is None:
            reasons.append(UNCLOSED)
            return blocks, reasons, False
        if not (nxt.group(1) and nxt.group(2) == name):  # another protocol tag before this one closes
            reasons.append(NESTED)
            return blocks, reasons, False
        blocks.append((name, text[t.end():nxt.start()]))
        pos, i = nxt.end(), i + 2
    if text[pos:].strip():
        reasons.append(EXTRA_TEXT)
    return blocks, reasons, True


@functools.lru_cache(maxsize=4096)  # the heads of one step parse the same responses
def parse_strict(text: str) -> ParsedResponse:
    """Training parser: the exact protocol, or a rejection with reasons (see the module docstring)."""
    if not isinstance(text, str) or not text.strip():
        return ParsedResponse(malformed=(EMPTY,))
    blocks, reasons, complete = _strict_blocks(text)
    if not complete:
        return ParsedResponse(malformed=tuple(dict.fromkeys(reasons)))
    names = [n for n, _ in blocks]
    if len(set(names)) != len(names):
        reasons.append(DUPLICATE)
    ranks = [_ORDER[n] for n in names]
    if any(b <= a for a, b in zip(ranks, ranks[1:])) and DUPLICATE not in reasons:
        reasons.append(BAD_ORDER)
    if "reasoning" not in names:
        reasons.append(NO_REASONING)
    if "abstain" in names and "answer" in names:
        reasons.append(ABSTAIN_AND_ANSWER)
    if "abstain" in names and "confidence" in names:
        reasons.append(ABSTAIN_AND_CONFIDENCE)
    if reasons:
        return ParsedResponse(malformed=tuple(dict.fromkeys(reasons)))
    return _fill(dict(blocks), lenient=False, reasons=[])


def _fill(slots: dict[str, str], lenient: bool, reasons: list[str], abstain: bool | None = None) -> ParsedResponse:
    """Read the slot values (shared by both parsers); bad values empty their slot and add a reason."""
    abstain = "abstain" in slots if abstain is None else abstain
    answer = confidence = hindsight = refined = critique = None
    if not abstain:
        if "answer" not in slots:
            reasons.append(NO_ANSWER)
        else:
            answer = slots["answer"].strip() or None
            if answer is None:
                reasons.append(EMPTY_ANSWER)
        if "confidence" not in slots:
            reasons.append(NO_CONFIDENCE)
        else:
            confidence, why = _probability(slots["confidence"], lenient, NON_NUMERIC_CONFIDENCE,
                                           CONFIDENCE_OUT_OF_RANGE)
            reasons += [why] if why else []
    if "hindsight" in slots:
        hindsight, why = _probability(slots["hindsight"], lenient, NON_NUMERIC_HINDSIGHT, HINDSIGHT_OUT_OF_RANGE)
        reasons += [why] if why else []
    if "critique" in slots:
        critique = slots["critique"].strip()
        if is_blank_text(critique):  # only whitespace and invisible format characters: an empty critique
            critique = ""
    if "refined_confidence" in slots:
        refined, why = _probability(slots["refined_confidence"], lenient, NON_NUMERIC_REFINED, REFINED_OUT_OF_RANGE)
        reasons += [why] if why else []
    if bool(critique) != (refined is not None):  # exactly one of a non-empty critique and a valid refined value
        reasons.append(PARTIAL_REFINEMENT)
    return ParsedResponse(answer=answer, confidence=confidence, abstain=abstain, hindsight=hindsight,
                          critique=critique, refined_confidence=refined, malformed=tuple(dict.fromkeys(reasons)))


# ------------------------------------------------------------------------------------------------------- lenient
_LENIENT_ABSTAIN = re.compile(r"<\s*abstain(?:\s*/)?\s*>", re.IGNORECASE)  # linear: see _LENIENT_NUMBER
# the number as _LENIENT_NUMBER reads it, exponent included: without it "confidence: 1e-1" was read as 1.0; with
# whatever is glued to it ("0.7.5", "0x1"): the whole token is judged (non-numeric), never its prefix (0.7, 0); a
# lone trailing "e" is no exponent and stays outside the number, as before
_CONFIDENCE_PHRASE = re.compile(
    r"confidence(?:\s*(?:is|[:=]))?\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?:(?![eE]\b)[\w.]*\w)?\s*%?)",
    re.IGNORECASE)
_ABSTAIN_WORDS = {"abstain", "i abstain", "<abstain/>", "abstained"}


def _last_tag(text: str, name: str) -> str | None:
    """Content of the last closed ``<name>...</name>`` (any case, spaces inside the brackets allowed)."""
    closes = list(re.finditer(rf"<\s*/\s*{name}\s*>", text, re.IGNORECASE))
    if not closes:
        return None
    end = closes[-1].start()
    opens = list(re.finditer(rf"<\s*{name}\s*>", text[:end], re.IGNORECASE))
    return text[opens[-1].end():end] if opens else None


@functools.lru_cache(maxsize=4096)  # the heads of one step parse the same responses
def parse_lenient(text: str) -> ParsedResponse:
    """Evaluation parser: recovers what it can (see the module docstring); ``malformed`` still lists what was off."""
    if not isinstance(text, str) or not text.strip():
        return ParsedResponse(malformed=(EMPTY,))
    from mmevo.rewards.answers import extract_boxed

    slots = {name: v for name in TAGS if (v := _last_tag(text, name)) is not None}
    reasons: list[str] = []
    if "answer" in slots:
        boxed = extract_boxed(slots["answer"])  # "<answer>\boxed{4}</answer>"
        if boxed is not None:
            slots["answer"] = boxed
    else:
        boxed = extract_boxed(text)
        if boxed is not None:
            slots["answer"] = boxed
    abstain_tag = bool(_LENIENT_ABSTAIN.search(text))
    says_abstain = slots.get("answer", "").strip().casefold() in _ABSTAIN_WORDS
    if says_abstain:
        slots.pop("answer")
    has_answer = bool(slots.get("answer", "").strip())
    if abstain_tag and has_answer:
        reasons.append(ABSTAIN_AND_ANSWER)  # a stated answer wins: it is what would be graded
    abstain = (abstain_tag or says_abstain) and not has_answer
    if "confidence" not in slots and not abstain:
        phrases = list(_CONFIDENCE_PHRASE.finditer(text))  # "Confidence: 0.8" without the tag; the last one wins
        if phrases:
            slots["confidence"] = phrases[-1].group(1)
    return _fill(slots, lenient=True, reasons=reasons, abstain=abstain)


def parse_response(text: str, strict: bool = True) -> ParsedResponse:
    """``parse_strict`` (training) or ``parse_lenient`` (evaluation)."""
    return parse_strict(text) if strict else parse_lenient(text)
