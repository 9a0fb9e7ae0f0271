"""MM-Zero co-evolution (proposer -> coder -> sandboxed renderer -> solver) on the GRPO core.

Each iteration trains three roles in turn, each by GRPO from its previous export, while the other two run frozen:

1. proposer: writes ``<content_type> <caption> <easy_question> <easy_answer> <hard_question> <hard_answer>``; the
   frozen coder writes N programs per valid proposal, the sandbox renders them, the frozen solver answers both
   questions m times per image; ``mmzero_proposer`` scores it (``mmevo.rewards.mmzero.proposal_rewards``).
2. coder: proposals whose render success was in ``coder_success_range``; each program it writes is rendered and
   the frozen solver asked; ``mmzero_coder`` scores 1 + s + min(c, 1 - c) + the proposal's penalties, 0 if no image.
3. solver: (image, hard question) pairs whose consistency was in ``solver_consistency_range``, the hard-question
   majority as silver label; any core strategy / heads by config (default accuracy 0.9 + format 0.1).

Everything a later phase needs is written as records (jsonl + PNG) under ``<out>/iter_<t>/<role>/``, so a finished
phase is skipped on rerun and an unfinished one resumes from its checkpoints exactly (its steps are re-run with the
same seeds and overwrite their records). Where a re-run samples other programs than the interrupted attempt (vLLM is
not bit-reproducible), that attempt's PNGs for those steps lose their records; a finishing phase deletes every image
no record of its own references (``orphan_images_removed`` in its summary).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import html
import io
import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from PIL import Image

from mmevo.atomic import write_json_atomic, write_text_atomic
from mmevo.config import Config, set_dotted, to_dict, validate
from mmevo.data.images import aspect_problem, fit_pixels, to_rgb
from mmevo.data.prompts import EpochSampler
from mmevo.data.schema import Example
from mmevo.evolve.rerun import (check_finished_steps, check_iterations_not_fewer, check_rerun_config, finished_phase,
                                 finished_steps_mismatches, say_reused_phases)
from mmevo.rewards.answers import canonical_answer, extract_answer, group_answer_keys
from mmevo.rewards.mmzero import CONTENT_TYPES, easy_accuracy, modal_share, proposal_penalties
from mmevo.rollout import shared_vllm
from mmevo.rollout.base import RolloutRequest, SamplingParams
from mmevo.rollout.strategy import RolloutStrategy, sample_groups
from mmevo.validation import is_real_number

ROLES = ("proposer", "coder", "solver")
PROPOSAL_TAGS = ("content_type", "caption", "easy_question", "easy_answer", "hard_question", "hard_answer")
MAX_FIELD_CHARS = 2000

PROPOSER_INSTRUCTION = (
    "Propose one image for a visual reasoning question. The image must be drawable by a short program. Use the "
    "content type {hint}. Answer in exactly this format: <content_type>one of data_chart, diagram, geometry, "
    "timeline, map, table, other</content_type> <caption>what the image shows</caption> <easy_question>a question "
    "read directly off the image</easy_question> <easy_answer>its short answer</easy_answer> <hard_question>a "
    "question that needs reasoning over the image</hard_question> <hard_answer>its short answer</hard_answer>")
CODER_INSTRUCTION = (
    "Write {language} code that draws this image: {caption} A reader must be able to answer: {easy} and {hard} "
    "Reply with the code only, in one ```{language} fenced block.")
SOLVER_INSTRUCTION = "<image>{question}"


# -- parsing ---------------------------------------------------------------------------------------------------------
@dataclass
class Proposal:
    content_type: str
    caption: str
    easy_question: str
    easy_answer: str
    hard_question: str
    hard_answer: str

    def text(self) -> str:
        """The proposer's output format (what ``parse_proposal`` reads back)."""
        return "\n".join(f"<{tag}>{getattr(self, tag)}</{tag}>" for tag in PROPOSAL_TAGS)


# markup inside a field (a stray or nested tag) makes the proposal invalid; a bare "<" or ">" is an inequality. So does
# a chat-template special token spelled out in plain text ("<|image_pad|>", "<|im_end|>"): the fields are re-encoded
# into the coder's and the solver's prompts, where the tokenizer reads it as the special token (an image slot without
# an image fails the whole step's prompt encoding; an end of turn ends the user's message)
SPECIAL_TOKEN = re.compile(r"<\|[^<>|\s]*\|>")  # "<|im_end|>": a chat / vision control token spelled out
_TAG_LIKE = re.compile(r"</?[A-Za-z_]+>|" + SPECIAL_TOKEN.pattern)
# control characters (NUL, terminal escapes) and lone surrogates (undecodable bytes kept by "surrogateescape") are no
# part of a proposal, and a surrogate cannot even be encoded for the coder's tokenizer or a record
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def _blank(value: str) -> bool:
    """Nothing visible: only whitespace and invisible format characters (zero-width spaces, bidi marks)."""
    return not any(ch.isprintable() and not ch.isspace() for ch in value)


def parse_proposal(text: str) -> tuple[Proposal | None, str]:
    """Strict parser: each of the six tags exactly once, in order, non-empty (something visible), a known content
    type, no tag-like text (``<b>``, ``</x>``) and no control characters or lone surrogates inside; nothing but
    whitespace between and around them. Returns (proposal, "") or (None, reason)."""
    pos, fields = 0, {}
    for tag in PROPOSAL_TAGS:
        m = re.compile(rf"\s*<{tag}>(.*?)</{tag}>", re.S).match(text, pos)
        if m is None:
            return None, f"missing or misplaced <{tag}>"
        value = m.group(1).strip()
        if (_blank(value) or len(value) > MAX_FIELD_CHARS or _TAG_LIKE.search(value)
                or _UNPRINTABLE.search(value)):
            return None, f"bad <{tag}> value"
        fields[tag] = value
        pos = m.end()
    if text[pos:].strip():
        return None, "text after <hard_answer>"
    if fields["content_type"] not in CONTENT_TYPES:
        return None, f"unknown content type {fields['content_type']!r}"
    return Proposal(**fields), ""


def invalid_kind(why: str) -> str:
    """A bounded metric name for ``parse_proposal``'s reason (its text may quote the model's content type):
    ``missing_<tag>``, ``bad_<tag>``, ``unknown_content_type`` or ``trailing_text``."""
    m = re.fullmatch(r"(missing or misplaced|bad) <([a-z_]+)>( value)?", why)
    if m:
        return ("missing_" if m.group(1) == "missing or misplaced" else "bad_") + m.group(2)
    return "unknown_content_type" if why.startswith("unknown content type") else "trailing_text"


_FENCE_LABEL = re.compile(r"[ \t]*([A-Za-z]*)")


def extract_code(text: str) -> tuple[str, str] | None:
    """(language, code) of the first fenced block (``svg``/``xml``/``html`` -> svg, ``python``/``py`` -> python,
    unlabelled: svg if it holds ``<svg``, else python); a bare ``<svg>...</svg>`` also counts. None if no code.

    Found with ``str.find``, in linear time: a backtracking search (``<svg\b.*?</svg>``, a fence label followed by
    ``[^\n]*\n``) restarts at every ``<svg`` / backtick run of an unclosed response and takes quadratic time, minutes
    on a few hundred KB of hostile output. If the first opening has no closing after it, no later opening has one."""
    start = text.find("```")
    nl = text.find("\n", start + 3) if start >= 0 else -1
    end = text.find("```", nl + 1) if nl >= 0 else -1
    if end >= 0:
        label, code = _FENCE_LABEL.match(text, start + 3, nl).group(1).lower(), text[nl + 1:end].strip()
        if not code:
            return None
        if label in ("svg", "xml", "html"):
            return "svg", code
        if label in ("python", "py", "python3"):
            return "python", code
        return ("svg" if "<svg" in code else "python"), code
    m = re.search(r"<svg\b", text)
    end = text.find("</svg>", m.end()) if m else -1
    return ("svg", text[m.start():end + len("</svg>")]) if end >= 0 else None


def content_id(prefix: str, *parts: str) -> str:
    # surrogatepass: a model's text may hold lone surrogates (undecodable bytes): they get an id, not crash the step
    return f"{prefix}-" + hashlib.sha1("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


# -- frozen roles, rendering, judging -------------------------------------------------------------------------------
class FrozenRole:
    """A role's latest export, sampling only: its own engine (HF), or a view of the loop's shared vLLM engine that
    loads the export's weights when it samples; ``close()`` frees it (puts the shared one to sleep) when the phase
    ends."""

    def __init__(self, cfg: Config, path: str):
        from mmevo.grpo.trainer import PromptCache
        from mmevo.models.loader import load_model
        from mmevo.rollout.factory import build_engine

        cfg = copy.deepcopy(cfg)
        if shared_vllm.active() is None or cfg.rollout.engine != "vllm":
            cfg.rollout.sleep_level = 1  # asleep between uses with its weights kept on the host (never re-synced)
        # else a view of the loop's one vLLM engine, which loads this role's saved weights when it samples
        self.cfg = cfg
        # the HF engine samples from this module; vLLM loads the checkpoint itself, so the frozen role's module
        # holds no weights (a 7B copy on the GPU per frozen role would not fit beside the engines)
        self.lm = load_model(path, cfg.model.dtype, cfg.model.device, weights=cfg.rollout.engine != "vllm")
        self.lm.model.eval().requires_grad_(False)
        self.engine = build_engine(cfg, self.lm)
        self.engine.sleep()  # GPU memory goes back to the trainer until the first rollout
        self.prompts = PromptCache(self.lm.processor, self.lm.is_vl, cfg.data.prompt_template, cfg.data.system_prompt,
                                   cfg.data.prompt_cache_mb)

    def sample(self, examples: Sequence[Example], n: int, seed: int) -> list[list[str]]:
        """n decoded responses per example (prompts longer than data.max_prompt_length get none)."""
        from mmevo.rollout.strategy import decode

        keep = [i for i, ex in enumerate(examples) if len(self.prompts(ex).input_ids) <= self.cfg.data.max_prompt_length]
        out: list[list[str]] = [[] for _ in examples]
        if not keep:
            return out
        r = self.cfg.rollout
        params = SamplingParams(r.temperature, r.top_p, r.max_tokens, seed=seed)
        self.engine.wake()
        try:
            gens = self.engine.generate([RolloutRequest(self.prompts(examples[i]), n=n) for i in keep], params)
        finally:
            self.engine.sleep()
        for i, comps in zip(keep, gens):
            out[i] = [decode(self.lm.tokenizer, c.full_ids) for c in comps]
        return out

    def close(self) -> None:
        close = getattr(self.engine, "close", None)
        if close is not None:
            close()
        self.engine = self.lm = None


@dataclass
class RenderedImage:
    """One program's render and what the frozen solver said about it."""

    ok: bool  # e_j: rendered and judged by the solver ("unjudged" when its prompt was too long to sample)
    error_kind: str | None = None
    message: str = ""
    png: bytes | None = None
    easy: float = 0.0  # share of solver answers equivalent to the easy answer
    consistency: float = 0.0  # modal share of the answered solver samples on the hard question, non-answers left out
    silver: str | None = None  # the modal hard answer
    blank: bool = False  # executed, but every pixel one colour (a blank canvas): still e_j = 1, counted apart
    easy_answers: list = field(default_factory=list)
    hard_answers: list = field(default_factory=list)


def load_image(src, min_pixels: int, max_pixels: int) -> Image.Image:
    """A rendered PNG (bytes or path) as RGB, scaled into the solver's data.min_pixels / data.max_pixels like every
    dataset image (the sandbox allows 4096 px a side; the engines refuse or drop images above the bound). ValueError
    for an aspect ratio the processors refuse (``Judge`` makes the attempt ``invalid_image``)."""
    return solver_view(decode_render(src), min_pixels, max_pixels)


def decode_render(src) -> Image.Image:
    """A rendered PNG (bytes or path) as RGB at its own size."""
    # on white: an SVG (cairosvg) or transparent matplotlib render is RGBA, and convert("RGB") shows its transparent
    # background black, hiding black strokes
    return to_rgb(Image.open(io.BytesIO(src) if isinstance(src, bytes) else src))


def single_colour(img: Image.Image) -> bool:
    """Every pixel the same colour (a blank canvas), read off the per-band extrema of the decoded RGB image."""
    return all(lo == hi for lo, hi in img.getextrema())


def solver_view(img: Image.Image, min_pixels: int, max_pixels: int) -> Image.Image:
    """A decoded render scaled into the solver's pixel bounds; ValueError for an aspect ratio it cannot take."""
    problem = aspect_problem(img)
    if problem:  # within the sandbox's max_side (4096x20 is 204.8:1), but the solver's processor would fail the step
        raise ValueError(problem)
    return fit_pixels(img, min_pixels, max_pixels)


# hard-question answers that say nothing (MM-Zero's released solver server drops them before its majority vote):
# counted as answers, a solver saying "None" on half its samples would make the question look perfectly balanced
# (c = 0.5, the maximum difficulty term), and a "None" majority would become the solver's silver label
_NON_ANSWERS = frozenset({"none", "n/a", "na", "null", "unknown", "-"})


def substantive(answer: str | None) -> str | None:
    """The answer, or None when it is a non-answer (``None``, ``N/A``, ``unknown``, ...) or missing."""
    if answer is None or answer.strip().lower() in _NON_ANSWERS:
        return None
    # by its answer key too: a boxed answer in LaTeX (\text{None}, \mathrm{N/A}, $None$, "None.") is the same
    # non-answer, and the majority would otherwise count it as a real answer that "None" itself is not
    key = canonical_answer(answer)
    return None if key is None or (key[0] == "str" and key[1] in _NON_ANSWERS) else answer


class Judge:
    """Renders programs in the sandbox and asks the frozen solver both questions about each image (scaled into the
    solver's ``min_pixels`` / ``max_pixels``)."""

    def __init__(self, pool, solver: FrozenRole, m: int, timeout_s: float, *, min_pixels: int, max_pixels: int):
        self.pool, self.solver, self.m, self.timeout_s = pool, solver, m, timeout_s
        self.min_pixels, self.max_pixels = min_pixels, max_pixels

    def __call__(self, programs: Sequence[str | None], proposals: Sequence[Proposal], seed: int) -> list[RenderedImage]:
        from render import RenderJob

        # None: the frozen coder gave no sample for this attempt (its prompt over data.max_prompt_length); still a
        # failed attempt in the proposal's denominator, but not counted as a coder that wrote no code
        out = [RenderedImage(False, "unsampled", "the frozen coder got no sample for this attempt (prompt over "
                                                 "data.max_prompt_length)") if text is None else
               RenderedImage(False, "no_code", "no fenced code in the coder output") for text in programs]
        jobs, where = [], []
        for i, text in enumerate(programs):
            code = extract_code(text) if text else None
            if code is not None:
                jobs.append(RenderJob(code=code[1], language=code[0]))
                where.append(i)
        results = self.pool.render_many(jobs, timeout_s=self.timeout_s) if jobs else []
        images, questions = [], []
        for i, res in zip(where, results):
            out[i] = RenderedImage(bool(res.ok), res.error_kind, res.message[:500], res.png if res.ok else None)
            if res.ok:
                try:
                    rgb = decode_render(res.png)
                    # on the render as made: a resize could blur a faint line into, or a blank canvas out of, one colour
                    out[i].blank = single_colour(rgb)
                    img = solver_view(rgb, self.min_pixels, self.max_pixels)
                except (OSError, ValueError, Image.DecompressionBombError) as e:  # PIL's decode errors
                    # the sandbox checks every PNG, but a decoder disagreement must fail this attempt, not the step
                    out[i] = RenderedImage(False, "invalid_image", f"the rendered PNG does not load: {e}"[:500])
                    continue
                images.append(i)
                questions += [(img, proposals[i].easy_question), (img, proposals[i].hard_question)]
        if not images:
            return out
        exs = [Example(content_id("q", q, str(k)), SOLVER_INSTRUCTION.format(question=q), "", [], [img])
               for k, (img, q) in enumerate(questions)]
        answers = self.solver.sample(exs, self.m, seed)
        for j, i in enumerate(images):
            if not answers[2 * j] or not answers[2 * j + 1]:
                # no samples (prompt over data.max_prompt_length): s and c are undefined, so the render is not an
                # executed attempt; scoring it s = c = 0 would credit the coder and penalise the proposer for it
                out[i] = RenderedImage(False, "unjudged", "the frozen solver got no samples for this image (prompt "
                                                          "over data.max_prompt_length)")
                continue
            easy_raw = [extract_answer(t) for t in answers[2 * j]]
            hard_raw = [extract_answer(t) for t in answers[2 * j + 1]]
            keys = group_answer_keys([substantive(a) for a in hard_raw])
            mode, share = modal_share(keys, answered_only=True)
            r = out[i]
            # a non-answer ("None", "unknown") is an unanswered sample here too: it shows no solvability, and a
            # solver that says "None" to everything would otherwise confirm a proposal whose easy answer is "None"
            r.easy = easy_accuracy([substantive(a) for a in easy_raw], proposals[i].easy_answer)
            r.consistency = share
            r.silver = next((a for a, k in zip(hard_raw, keys) if mode is not None and k == mode), None)
            r.easy_answers, r.hard_answers = easy_raw, hard_raw
        return out


# -- records -----------------------------------------------------------------------------------------------------------
class Recorder:
    """Per-step records of a phase: ``records/step_<k>.jsonl`` (rewritten when a step is re-run) and PNGs."""

    def __init__(self, phase_dir: Path):
        self.dir = phase_dir
        (phase_dir / "records").mkdir(parents=True, exist_ok=True)
        (phase_dir / "images").mkdir(parents=True, exist_ok=True)

    def write(self, step: int, rows: list[dict]) -> None:
        from mmevo.grpo.distributed import rank, world_size

        suffix = f"_rank{rank()}" if world_size() > 1 else ""  # data-parallel: each rank records its own share
        path = self.dir / "records" / f"step_{step:04d}{suffix}.jsonl"
        write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in rows))

    def image(self, key: str, png: bytes) -> str:
        name = f"images/{key}.png"
        path = self.dir / name
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(png)
        tmp.replace(path)  # a kill mid-write leaves a .tmp, never a torn PNG under a name a record may reference
        return name

    def remove_stale_records(self, steps: int, world_size: int) -> int:
        """Deletes the files under ``records/`` that the finished phase (``steps`` steps, 0-based, on ``world_size``
        ranks) did not write: another world size's names (a phase restarted from scratch under another launch, whose
        ``step_0001.jsonl`` would otherwise be read beside ``step_0001_rank0.jsonl``, doubling that step's data),
        steps past its last, a torn ``.tmp``. Returns how many. Run once, after every rank wrote its records."""
        suffixes = [f"_rank{r}" for r in range(world_size)] if world_size > 1 else [""]
        keep = {f"step_{k:04d}{sfx}.jsonl" for k in range(steps) for sfx in suffixes}
        stale = [p for p in sorted((self.dir / "records").iterdir()) if p.is_file() and p.name not in keep]
        for p in stale:
            p.unlink()
        return len(stale)

    def remove_orphan_images(self) -> int:
        """Deletes the files under ``images/`` that no record of this phase references; returns how many. For a
        finished phase only: a resumed step's re-run may sample other programs than the interrupted attempt, whose
        images then stay behind unreferenced (and a kill mid-write leaves a ``.tmp``). Reads every rank's records, so
        under data parallelism it runs once, after all ranks have written theirs."""
        referenced = {r["image"] for row in self.read(self.dir) for r in row.get("renders", ()) if r.get("image")}
        orphans = [p for p in sorted((self.dir / "images").iterdir())
                   if p.is_file() and f"images/{p.name}" not in referenced]
        for p in orphans:
            p.unlink()
        return len(orphans)

    @staticmethod
    def read(phase_dir: Path, check=None) -> list[dict]:
        """Every record of the phase, in step order. A line that is not JSON, or one ``check(row)`` finds a problem
        with (MM-Zero's phases: ``record_problem``), is a ``ValueError`` naming its file and line (it was a bare JSON
        error naming no file, or a TypeError deep in the coder phase's data set)."""
        rows = []
        for p in sorted((phase_dir / "records").glob("step_*.jsonl")):
            for n, line in enumerate(p.read_text().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as e:
                    row, why = None, f"not JSON ({e})"
                else:
                    why = check(row) if check else ""
                if why:
                    raise ValueError(f"{p}:{n}: {why}; the phase's records are damaged: restore the file, or delete "
                                     f"{phase_dir} to run that phase again")
                rows.append(row)
        return rows


# what the coder / solver data sets read of each render (the gallery shows the rest where a row has it)
_RENDER_RECORD_KEYS = ("ok", "image", "consistency", "silver")


def record_problem(row) -> str:
    """What a record row lacks that the later phases read (its proposal's six fields as text, its renders' outcome),
    or "" when it is whole. An invalid proposal's row needs nothing more."""
    if not isinstance(row, dict):
        return f"a record must be a JSON object, got {type(row).__name__}"
    if "valid" in row and not isinstance(row["valid"], bool):  # "false" read as a valid proposal
        return f"'valid' must be true or false, got {row['valid']!r}"
    if row.get("valid") is False:
        return ""
    proposal = row.get("proposal")
    if not isinstance(proposal, dict):
        return "no 'proposal' object"
    for tag in PROPOSAL_TAGS:
        if not isinstance(proposal.get(tag), str):
            return f"proposal field {tag!r} is missing or not text"
    extra = sorted(set(proposal) - set(PROPOSAL_TAGS))
    if extra:
        return f"proposal has unknown field {extra[0]!r}"
    renders = row.get("renders")
    if not isinstance(renders, list):
        return "no 'renders' list"
    if "penalties" in row and not (is_real_number(row["penalties"]) and math.isfinite(row["penalties"])):
        return f"'penalties' must be a finite number, got {row['penalties']!r}"
    for k, r in enumerate(renders):
        missing = [key for key in _RENDER_RECORD_KEYS if not isinstance(r, dict) or key not in r]
        if missing:
            return f"renders[{k}] lacks {missing[0]!r}"
        why = _render_record_problem(r)
        if why:
            return f"renders[{k}] {why}"
    return ""


def _render_record_problem(r: dict) -> str:
    """What is wrong with the values the later phases read of one render record ("" when none): a string "false" as
    ``ok`` counted as a render, a null consistency or image was a TypeError deep in the solver's data set, and a NaN
    or out-of-range consistency fell outside every keep window silently."""
    if not isinstance(r["ok"], bool):
        return f"'ok' must be true or false, got {r['ok']!r}"
    c = r["consistency"]
    if not (is_real_number(c) and 0.0 <= c <= 1.0):
        return f"'consistency' must be a number in [0, 1], got {c!r}"
    if r["silver"] is not None and not isinstance(r["silver"], str):
        return f"'silver' must be text or null, got {r['silver']!r}"
    if r["ok"] and not (isinstance(r["image"], str) and r["image"]):
        return f"'image' of a render must be its file name, got {r['image']!r}"
    return ""


def _render_rows(recorder: Recorder, prefix: str, renders: list[RenderedImage],
                 programs: Sequence[str | None]) -> list[dict]:
    rows = []
    for k, (r, prog) in enumerate(zip(renders, programs)):
        key = content_id(prefix, str(k), prog or "")
        rows.append({"ok": r.ok, "error_kind": r.error_kind, "message": r.message, "code": (prog or "")[:4000],
                     "image": recorder.image(key, r.png) if r.ok else None, "easy": r.easy,
                     "consistency": r.consistency, "silver": r.silver, "easy_answers": r.easy_answers,
                     "hard_answers": r.hard_answers, "blank": r.blank})
    return rows


def render_error_counts(renders: Sequence[RenderedImage]) -> dict:
    """``mmzero/render_error/<kind>``: how many attempts failed (or went unjudged) by kind."""
    kinds = sorted({r.error_kind for r in renders if not r.ok})
    return {f"mmzero/render_error/{k}": sum(not r.ok and r.error_kind == k for r in renders) for k in kinds}


def render_metrics(renders: Sequence[RenderedImage], judged: bool = True) -> dict:
    """Render success over the attempts, easy accuracy / consistency over the executed ones (``judged``), the
    failures by kind, and ``mmzero/render_blank``: how many executed renders are one colour all over (a blank canvas
    still executed, so the seed's e_j = 1 and the rewards stand; logged, like the failure counts, only when non-zero).
    A rate with an empty denominator (no attempt, or none executed) is left out rather than logged as 0: a step whose
    proposals were all invalid, or whose renders all failed, would otherwise drag the phase means and curves of the
    steps that had renders towards 0."""
    out = render_error_counts(renders)
    ok = [r for r in renders if r.ok]
    blank = sum(r.blank for r in ok)
    if blank:
        out["mmzero/render_blank"] = blank
    if renders:
        out["mmzero/render_success"] = len(ok) / len(renders)
    if ok and judged:
        out["mmzero/easy_accuracy"] = sum(r.easy for r in ok) / len(ok)
        out["mmzero/consistency"] = sum(r.consistency for r in ok) / len(ok)
    return out


# -- strategies ---------------------------------------------------------------------------------------------------------
class ProposerStrategy(RolloutStrategy):
    """Proposals -> strict parse -> frozen coder (N programs each) -> sandbox -> frozen solver -> aux."""

    name = "mmzero_proposer"

    def __init__(self, coder: FrozenRole, judge: Judge, n_code: int, recorder: Recorder, language: str,
                 penalty_args: dict):
        self.coder, self.judge, self.n_code, self.recorder, self.language = coder, judge, n_code, recorder, language
        self.penalty_args = penalty_args  # threshold / penalty / type_weight, as the proposer head gets them

    def rollout(self, ctx, examples):
        ro = sample_groups(ctx, examples)
        parsed = [parse_proposal(t) for t in ro.texts]
        valid = [i for i, (p, _) in enumerate(parsed) if p is not None]
        proposals = [parsed[i][0] for i in valid]
        coder_exs = [coder_example(p, self.language) for p in proposals]
        programs = self.coder.sample(coder_exs, self.n_code, ctx.seed + 11) if proposals else []
        # exactly n_code attempts per proposal (missing ones are failed attempts): the renders are sliced by proposal
        # below, so a coder answer with fewer / more samples must not shift renders onto a neighbour's slice
        flat_prog = [t for progs in programs for t in (list(progs or []) + [None] * self.n_code)[:self.n_code]]
        flat_prop = [p for p in proposals for _ in range(self.n_code)]
        renders = self.judge(flat_prog, flat_prop, ctx.seed + 23) if flat_prog else []
        ro.aux, rows = [], []
        slot = {i: k for k, i in enumerate(valid)}
        for i, (p, why) in enumerate(parsed):
            if p is None:
                ro.aux.append({"valid": False, "reason": why})
                rows.append({"valid": False, "reason": why, "text": ro.texts[i][:2000]})
                continue
            k = slot[i]
            rs = renders[k * self.n_code:(k + 1) * self.n_code]
            # image names: the sample's index and the step seed (distinct per rank) too, as a collapsed proposer repeats
            # its text within a step and a frozen coder its program; a program drawing random data then gives other
            # pixels under the same name, and a record would point at an image that another record's answers judged
            prefix = content_id("p", ro.texts[i], str(ctx.step), str(ctx.seed), str(i))
            ro.aux.append({"valid": True, **dataclasses.asdict(p), "executed": [r.ok for r in rs],
                           "easy": [r.easy for r in rs], "consistency": [r.consistency for r in rs]})
            rows.append({"valid": True, "proposal": dataclasses.asdict(p), "text": ro.texts[i][:2000],
                         "renders": _render_rows(self.recorder, prefix, rs,
                                                 flat_prog[k * self.n_code:(k + 1) * self.n_code])})
        self._rows = rows
        ro.extra_metrics.update(render_metrics(renders))
        if len(ro):  # a share of nothing is undefined, not 0: left out, so the phase means skip this step
            ro.extra_metrics["mmzero/valid_frac"] = len(valid) / len(ro)
        kinds = [invalid_kind(why) for p, why in parsed if p is None]
        for kind in sorted(set(kinds)):  # which rule each -1 broke (a count, like the render errors)
            ro.extra_metrics[f"mmzero/invalid/{kind}"] = kinds.count(kind)
        self._step = ctx.step
        return ro

    def after_rewards(self, rollout, rewards):
        # the penalties the head applied (it records them in aux, with type shares over every rank's proposals), kept
        # for the coder phase, whose reward adds them; computed here, over this rank's proposals, only for a run
        # whose heads do not record them
        penalties = [a.get("penalties") for a in rollout.aux]
        if any(p is None and a.get("valid") for p, a in zip(penalties, rollout.aux)):
            penalties = proposal_penalties(rollout.aux, **self.penalty_args)
        for row, r, pen in zip(self._rows, rewards.tolist(), penalties):
            row["reward"] = r
            if row["valid"]:
                row["penalties"] = sum(pen)
        self.recorder.write(self._step, self._rows)
        return None


class CoderStrategy(RolloutStrategy):
    """The coder's programs for kept proposals -> sandbox -> frozen solver -> aux (rendered, s, c, penalties)."""

    name = "mmzero_coder"

    def __init__(self, judge: Judge, recorder: Recorder):
        self.judge, self.recorder = judge, recorder

    def rollout(self, ctx, examples):
        ro = sample_groups(ctx, examples)
        proposals = [Proposal(**ex.meta["proposal"]) for ex in ro.examples]
        renders = self.judge(ro.texts, proposals, ctx.seed + 23) if len(ro) else []
        ro.aux = [{"rendered": r.ok, "easy": r.easy, "consistency": r.consistency,
                   "penalties": float(ex.meta.get("penalties", 0.0))} for r, ex in zip(renders, ro.examples)]
        self._rows, self._where = [], [None] * len(ro)
        for g in sorted(set(ro.group_ids.tolist())):  # g in the image names: one proposal may fill two groups
            idx = [i for i, x in enumerate(ro.group_ids.tolist()) if x == g]
            p = proposals[idx[0]]
            prefix = content_id("c", ro.examples[idx[0]].id, str(ctx.step), str(ctx.seed), str(g))
            rows = _render_rows(self.recorder, prefix, [renders[i] for i in idx], [ro.texts[i] for i in idx])
            self._rows.append({"proposal": dataclasses.asdict(p), "penalties": ro.aux[idx[0]]["penalties"],
                               "renders": rows})
            for k, i in enumerate(idx):
                self._where[i] = (len(self._rows) - 1, k)
        self._step = ctx.step
        ro.extra_metrics.update(render_metrics(renders, judged=False))
        return ro

    def after_rewards(self, rollout, rewards):
        # each program's reward beside its render, as the proposer's records hold theirs: the penalties added are the
        # first record's of the proposal (coder_train_set), which a later step may have scored otherwise
        for (row, k), r in zip(self._where, rewards.tolist()):
            self._rows[row]["renders"][k]["reward"] = r
        self.recorder.write(self._step, self._rows)
        return None


def coder_example(p: Proposal, language: str) -> Example:
    text = CODER_INSTRUCTION.format(language=language, caption=p.caption, easy=p.easy_question, hard=p.hard_question)
    return Example(content_id("coder", text), text, "", [], [], meta={"proposal": dataclasses.asdict(p)})


def proposer_examples(n: int, hints: Sequence[str] | None = None) -> list[Example]:
    """n proposer prompts; content-type hints cycle through CONTENT_TYPES unless ``hints`` gives each one's.

    The same prompts in every iteration (samples differ by the phase's seed): a number per iteration in the text
    ("Variant 1000") put every prompt of iteration 1 outside the warmed-up tiny proposer's demonstrations, and none of
    its 16 samples was a valid proposal (0.75 in iteration 0)."""
    exs = []
    for k in range(n):
        if hints is None:
            hint, variant = CONTENT_TYPES[k % len(CONTENT_TYPES)], k // len(CONTENT_TYPES)
        else:
            hint, variant = hints[k], k  # given hints repeat: the variant keeps every prompt distinct
        text = PROPOSER_INSTRUCTION.format(hint=hint) + f" Variant {variant}."
        exs.append(Example(content_id("proposer", text), text, "", [], [], meta={"hint": hint}))
    return exs


# -- phase data ---------------------------------------------------------------------------------------------------------
def coder_train_set(rows: list[dict], lo: float, hi: float, language: str) -> list[Example]:
    """Proposals whose render success over their N attempts was in [lo, hi] (one example per distinct proposal),
    with the penalties the proposer head gave them."""
    seen, out = set(), []
    for row in rows:
        if not row.get("valid"):
            continue
        renders = row["renders"]
        success = sum(r["ok"] for r in renders) / max(1, len(renders))
        p = Proposal(**row["proposal"])
        ex = coder_example(p, language)
        if lo <= success <= hi and ex.id not in seen:
            seen.add(ex.id)
            ex.meta["penalties"] = row.get("penalties", 0.0)
            out.append(ex)
    return out


def solver_train_set(phase_dirs: Sequence[Path], lo: float, hi: float, min_pixels: int,
                     max_pixels: int) -> list[Example]:
    """(image, hard question) pairs whose consistency was in [lo, hi], the hard-question majority as silver label;
    images scaled into the solver's data.min_pixels / data.max_pixels (records keep the render as made)."""
    seen, out = set(), []
    for d in phase_dirs:
        for row in Recorder.read(d, record_problem):
            if row.get("valid") is False:
                continue
            for r in row["renders"]:
                if not r["ok"] or r["silver"] is None or not lo <= r["consistency"] <= hi:
                    continue
                q = row["proposal"]["hard_question"]
                ex_id = content_id("solver", r["image"], q)
                if ex_id in seen:
                    continue
                seen.add(ex_id)
                img = load_image(d / r["image"], min_pixels, max_pixels)
                out.append(Example(ex_id, SOLVER_INSTRUCTION.format(question=q), r["silver"], [], [img],
                                   meta={"kind": row["proposal"]["content_type"], "consistency": r["consistency"]}))
    return out


# -- the loop -----------------------------------------------------------------------------------------------------------
def text_only_model(path: str) -> bool:
    """``model.path`` names a model that takes no images: a text tiny alias, or a local checkpoint whose config.json has
    no ``vision_config`` (the loader's test). A hub id, or a directory whose config cannot be read, is the loader's."""
    from mmevo.config import TINY_ALIASES

    if path in TINY_ALIASES:
        return "-vl" not in TINY_ALIASES[path]
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and "vision_config" not in config


def role_config(cfg: Config, role: str, phase_dir: Path, model_path: str) -> Config:
    """The base config with the role's defaults and ``mmzero.roles.<role>`` overrides (dotted keys) applied."""
    rc = copy.deepcopy(cfg)
    m = cfg.mmzero
    defaults = {
        "proposer": {"reward.heads": {"mmzero_proposer": 1.0}, "data.hide_labels": False,
                     "reward.head_args": {"mmzero_proposer": {
                         "strength": m.diversity_strength, "threshold": m.easy_hard_threshold,
                         "penalty": m.easy_hard_penalty, "type_weight": m.type_penalty, "embedder": m.embedder,
                         "cluster_threshold": m.cluster_threshold}}},
        "coder": {"reward.heads": {"mmzero_coder": 1.0}, "data.hide_labels": False, "reward.head_args": {}},
        "solver": {"reward.heads": {"accuracy": 0.9, "format": 0.1}, "reward.head_args": {}},
    }[role]
    rc.csrs.enabled = False
    for key, value in {**defaults, **(m.roles.get(role) or {})}.items():
        set_dotted(rc, key, value)
    rc.model.path = model_path
    rc.trainer.output_dir = str(phase_dir)
    rc.trainer.steps = m.phase_steps
    if role != "solver" and rc.csrs.enabled:
        raise ValueError(f"mmzero.roles.{role}: CSRS applies to the solver only")
    validate(rc)
    return rc


def run_mmzero(cfg: Config) -> dict:
    """``mmevo evolve mmzero``: ``mmzero.iterations`` x (proposer, coder, solver) phases; returns the summary."""
    from render import RenderPool

    from mmevo.grpo.distributed import barrier, init_distributed, is_main, world_size
    from mmevo.recipes import resolve_model_path

    if cfg.trainer.deepspeed:  # every rank runs the loop; each samples, renders and judges its own share
        init_distributed(cfg.model.device)
    m = cfg.mmzero
    out = Path(m.output_dir)
    base = resolve_model_path(cfg)
    out.mkdir(parents=True, exist_ok=True)
    check_rerun_config(out, cfg, "mmzero", _RERUN_FREE_KEYS, write=is_main())
    planned = [(f"iter_{t}/{role}", "mmzero.phase_steps", m.phase_steps) for t in range(m.iterations) for role in ROLES]
    check_finished_steps(out, planned, "mmzero", say=is_main())
    check_iterations_not_fewer(out, m.iterations, 0, "mmzero")
    if is_main():
        say_reused_phases(out, [phase for phase, _, _ in planned], "mmzero")
    paths = {role: base for role in ROLES}
    if m.warmup_demos > 0:
        paths = warm_up(cfg, paths, out / "warmup")
        barrier()  # the main rank exports the warm-ups (sft_and_export): in place before any rank loads them
    summary: dict = {"config": to_dict(cfg), "iterations": []}
    # one vLLM engine in this process serves the three roles, trained or frozen, in turn (vLLM's sleep mode serves
    # one engine per process); a no-op on the HF engine
    engines = shared_vllm.for_roles([role_config(cfg, r, out, base) for r in ROLES])
    with RenderPool(workers=m.render_workers) as pool, engines:
        for t in range(m.iterations):
            it = {"iteration": t}
            for role_index, role in enumerate(ROLES):
                phase_dir = out / f"iter_{t}" / role
                done = phase_dir / "done.json"
                result = finished_phase(phase_dir)
                if result is None:
                    result = run_phase(cfg, role, t, role_index, phase_dir, paths, pool, out)
                    barrier()  # every rank's records and images are written before the orphans are read off them
                    if is_main():
                        recorder = Recorder(phase_dir)
                        if "skipped" not in result:  # trained: its records are final (stale first: their images too)
                            # the steps it trained, not mmzero.phase_steps: a phase resumed from a checkpoint past a
                            # lowered phase_steps trained (and exported) them all, and the next phase reads them
                            result["stale_records_removed"] = recorder.remove_stale_records(result["steps"],
                                                                                             world_size())
                        result["orphan_images_removed"] = recorder.remove_orphan_images()
                        write_json_atomic(done, result)  # a rerun reads it back: a kill mid-write left it torn
                    barrier()  # every rank reads the phase's records (a filesystem all ranks share) next
                it[role] = result
                if result.get("model"):
                    if m.shared_model:
                        paths = {r: result["model"] for r in ROLES}
                    else:
                        paths[role] = result["model"]
            if is_main():
                write_gallery(out / f"iter_{t}")
            summary["iterations"].append(it)
    summary["steps_mismatch"] = finished_steps_mismatches(out, planned)  # also a phase resumed past lowered steps
    if is_main():
        plot_iterations(summary, out / "curves.png")
        write_json_atomic(out / "summary.json", summary)
    return summary


# settings a rerun into the same output dir may change: where it writes, how many render workers, and its length in
# iterations (a rerun may add iterations) and phase steps (as a resumed trainer's trainer.steps)
_RERUN_FREE_KEYS = frozenset({"mmzero.output_dir", "mmzero.iterations", "mmzero.phase_steps", "mmzero.render_workers"})


def run_phase(cfg: Config, role: str, t: int, role_index: int, phase_dir: Path, paths: dict, pool,
              out: Path) -> dict:
    """One role's GRPO phase (resumable); returns {model, steps, data counts, metrics means} or a skip reason."""
    from mmevo.recipes import build_trainer, load_policy

    m = cfg.mmzero
    rc = role_config(cfg, role, phase_dir, paths[role])
    recorder = Recorder(phase_dir)
    frozen: list[FrozenRole] = []
    t0 = time.time()
    try:
        if role == "proposer":
            examples = proposer_examples(m.proposer_prompts)
            coder = FrozenRole(role_config(cfg, "coder", phase_dir, paths["coder"]), paths["coder"])
            solver = FrozenRole(role_config(cfg, "solver", phase_dir, paths["solver"]), paths["solver"])
            frozen += [coder, solver]
            strategy = ProposerStrategy(coder, _judge(pool, solver, m), m.code_samples, recorder, m.code_language,
                                        {"threshold": m.easy_hard_threshold, "penalty": m.easy_hard_penalty,
                                         "type_weight": m.type_penalty})
        elif role == "coder":
            prop_dir = out / f"iter_{t}" / "proposer"
            rows = Recorder.read(prop_dir, record_problem)
            examples = coder_train_set(rows, *m.coder_success_range, m.code_language)
            if not examples:
                return {"skipped": "no proposal with render success in the coder range", "model": None}
            solver = FrozenRole(role_config(cfg, "solver", phase_dir, paths["solver"]), paths["solver"])
            frozen.append(solver)
            strategy = CoderStrategy(_judge(pool, solver, m), recorder)
        else:
            examples = solver_train_set([out / f"iter_{t}" / "proposer", out / f"iter_{t}" / "coder"],
                                        *m.solver_consistency_range, rc.data.min_pixels, rc.data.max_pixels)
            if not examples:
                return {"skipped": "no image with hard-question consistency in the solver range", "model": None}
            strategy = None  # the role config's (plain groups, or CSRS)
        policy = load_policy(rc)
        trainer = build_trainer(rc, policy, examples, strategy=strategy, prompt_source=EpochSampler(examples, t))
        trainer.seed_offset = 3 * t + role_index  # iterations and roles draw different samples
        trainer.resume_free_keys = _RERUN_FREE_KEYS  # a rerun's iterations / phase steps: not a changed setting
        trainer.train()
        history = trainer.logged_history()  # all the phase's steps, those before a resume too
        final = trainer.export(phase_dir / "final")
        trainer.close()
    finally:
        for f in frozen:
            f.close()
    return {"model": str(final), "steps": len(history), "examples": len(examples), "seconds": time.time() - t0,
            "metrics": phase_means(history)}


def phase_means(history: Sequence[dict]) -> dict:
    """Means over a phase's steps of the loop's and the heads' metrics. A rate is averaged over the steps that logged
    it (a step without its denominator leaves it out); a count (``mmzero/render_error/<kind>``,
    ``mmzero/invalid/<kind>``, ``mmzero/render_blank``, logged only by the steps where it occurred) over every step,
    absent counting 0: averaged only over the steps that had the failure, one timeout in one step of ten would read as
    one timeout per step."""
    return step_means(history, ("mmzero/", "reward/"),
                      ("mmzero/render_error/", "mmzero/invalid/", "mmzero/render_blank"))


def step_means(history: Sequence[dict], prefixes: tuple[str, ...], counts: tuple[str, ...] = ()) -> dict:
    """Per key with one of ``prefixes``: the mean over the steps that logged it, or, for a count (a key starting with
    one of ``counts``, logged only where it is non-zero), over every step."""
    keys = sorted({k for h in history for k in h if k.startswith(prefixes)})
    means = {}
    for k in keys:
        logged = [h[k] for h in history if k in h]
        means[k] = sum(logged) / (len(history) if k.startswith(counts) else len(logged))
    return means


def _judge(pool, solver: FrozenRole, m) -> Judge:
    """The phase's judge; images are sized by the frozen solver's own data config (its role overrides included)."""
    return Judge(pool, solver, m.solver_samples, m.render_timeout_s, min_pixels=solver.cfg.data.min_pixels,
                 max_pixels=solver.cfg.data.max_pixels)


def warm_up(cfg: Config, paths: dict, out: Path) -> dict:
    """SFT each role on embedded demonstrations (tiny models only learn the formats this way); cached in ``out``."""
    from mmevo.evolve.mmzero_demos import demos
    from mmevo.grpo.sft import sft_and_export
    from mmevo.recipes import load_policy

    ds = demos(cfg.mmzero.warmup_demos, seed=cfg.trainer.seed)
    new = {}
    for role in ROLES:
        target = out / role / "model"
        if not (target / "config.json").exists():
            rc = role_config(cfg, role, out / role, paths[role])
            rc.sft.output_dir = str(out / role)
            if role == "proposer":
                # each prompt asks for its demonstration's content type: a cycled hint would teach ignoring it
                hints = proposer_examples(len(ds), hints=[d.proposal.content_type for d in ds])
                exs = [dataclasses.replace(h, solution=d.proposal.text()) for h, d in zip(hints, ds)]
            elif role == "coder":
                lang = cfg.mmzero.code_language
                exs = [dataclasses.replace(coder_example(d.proposal, lang), solution=d.code_text(lang)) for d in ds]
            else:
                exs = []
                for d in ds:
                    img = _rasterise(d.svg)
                    p = d.proposal
                    for q, a in ((p.easy_question, p.easy_answer), (p.hard_question, p.hard_answer)):
                        exs.append(Example(content_id("demo", d.svg, q), SOLVER_INSTRUCTION.format(question=q), a, [],
                                           [img], solution=f"<think>I read the image.</think> \\boxed{{{a}}}"))
            sft_and_export(rc, load_policy(rc), exs, target)
        new[role] = str(target)
    return new


def _rasterise(svg: str) -> Image.Image:
    import cairosvg

    return to_rgb(Image.open(io.BytesIO(cairosvg.svg2png(bytestring=svg.encode()))))  # transparent -> white


# -- reports ------------------------------------------------------------------------------------------------------------
def write_gallery(iter_dir: Path) -> Path:
    """``gallery.html``: every render of the iteration with its proposal, the solver's answers, consistency and
    failures (proposer and coder phases)."""
    parts = [f"<html><head><meta charset='utf-8'><title>MM-Zero {html.escape(iter_dir.name)}</title><style>"
             "td{vertical-align:top;border-bottom:1px solid #ccc;padding:4px;font:12px sans-serif}"
             "img{max-width:240px;image-rendering:pixelated}</style></head><body>"
             f"<h1>MM-Zero {html.escape(iter_dir.name)}</h1>"]
    for role in ("proposer", "coder"):
        d = iter_dir / role
        rows = Recorder.read(d, record_problem) if (d / "records").exists() else []
        invalid = sum(1 for r in rows if r.get("valid") is False)
        parts.append(f"<h2>{role} phase: {len(rows)} records, {invalid} invalid proposals</h2><table>")
        for row in rows:
            if row.get("valid") is False:
                continue
            p = row["proposal"]
            for r in row["renders"]:
                cell = (f"<img src='{role}/{html.escape(r['image'])}'>" if r["ok"] else
                        f"<b>render failed: {html.escape(str(r.get('error_kind')))}</b><br>"
                        f"{html.escape(str(r.get('message', '')))}")
                reward = f"<br>proposal reward {row['reward']:.3f}" if "reward" in row else ""
                parts.append(
                    f"<tr><td>{cell}</td><td><b>{html.escape(p['content_type'])}</b>: {html.escape(p['caption'])}<br>"
                    f"easy: {html.escape(p['easy_question'])} [{html.escape(p['easy_answer'])}] solver: "
                    f"{html.escape(str(r.get('easy_answers', [])))} (acc {r.get('easy', 0.0):.2f})<br>hard: "
                    f"{html.escape(p['hard_question'])} [{html.escape(p['hard_answer'])}] solver: "
                    f"{html.escape(str(r.get('hard_answers', [])))} (consistency {r['consistency']:.2f}){reward}"
                    "</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    path = iter_dir / "gallery.html"
    iter_dir.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(parts))
    return path


def plot_iterations(summary: dict, out_png: Path) -> Path | None:
    """Per-iteration curves of the proposer phase: render success, easy accuracy, consistency, valid share (left);
    content-type mix and diversity (cluster counts, mean diversity adjustment) (right)."""
    its = summary["iterations"]
    metrics = [it["proposer"].get("metrics", {}) for it in its]
    left = ["mmzero/render_success", "mmzero/easy_accuracy", "mmzero/consistency", "mmzero/valid_frac"]
    right = sorted({k for m in metrics for k in m if "/type_share/" in k or "/clusters_" in k
                    or k.endswith("/diversity_adjustment")})
    if not any(k in m for m in metrics for k in left + right):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for ax, keys in zip(axes, (left, right)):
        for k in keys:
            ys = [m.get(k, float("nan")) for m in metrics]
            ax.plot(range(len(ys)), ys, marker="o", label=k.split("/", 2)[-1])
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_title("rendering and solving", fontsize=9)
    axes[1].set_title("type mix and diversity", fontsize=9)
    fig.tight_layout()
    fig.savefig(out_png, dpi=90)
    plt.close(fig)
    return out_png
