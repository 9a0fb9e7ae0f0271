"""Adapters from benchmark / dataset layouts to :class:`BenchmarkItem` (evaluation) and :class:`Example` (training).

Formats (``load_items(fmt, source, ...)``):

* ``mathvision`` — MATH-Vision rows (``id, question, options, answer, image, subject, level``) from its jsonl
  (``testmini.jsonl`` / ``test.jsonl`` + ``images/``) or the hub dataset ``MathLLMs/MathVision`` (``decoded_image``).
* ``mathvista`` — MathVista rows (``pid, question, image, choices, unit, precision, answer, question_type,
  answer_type, metadata``) from ``testmini.json`` (id -> row) + ``images/`` or the hub ``AI4Math/MathVista``.
  The prompt is the official query: ``query.json`` beside the annotations, else the row's ``query``, else
  :func:`mathvista_query` (which reproduces query.json exactly).
* ``intergps`` — Geometry3K in InterGPS's raw layout: one folder per problem with ``data.json`` and
  ``img_diagram.png`` (``<split>/<id>/`` under the dataset root); the gold letter becomes the choice text.
  Categories: the raw ``graph`` / ``goal`` labels, and ``official_goal`` / ``official_graph`` as InterGPS's
  ``sub_acc.py`` table counts them (quadrilaterals merged into "Quad", "Other" dropped beside another goal).
* ``geometry3k`` — the hub schema used by RL trainers (``images``, ``problem`` with ``<image>``, ``answer``,
  optional ``choices``, ``solution``, ``meta``); what :func:`mmevo.data.geometry3k.load_geometry3k` reads.
* ``geoqa`` — R1-V style GeoQA (``image``, ``problem``, ``solution`` holding ``<answer>…</answer>``, or ``answer``;
  R1-V's evaluation rows ``image_path``, ``question``, ``ground_truth`` too); the figure is required.
* ``generic`` — the geometry3k rules with a field mapping ``{"id", "image", "problem", "answer", "choices"}``.

Images are resolved (and checked to exist) while loading but decoded only by :meth:`BenchmarkItem.load_images`, so a
benchmark of thousands of large images never sits decoded in memory.  Every error names where the row is —
``file:line (row i, id 'x')`` for jsonl, ``file row i (id 'x')`` otherwise — and the field; a missing image names the
row id.  With ``skip_bad=True`` bad rows are skipped and counted by reason.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError

from mmevo.config import CONTROL_TOKEN

from .images import RASTER_FORMATS, aspect_problem, fit_pixels, to_rgb
from .schema import IMAGE_PLACEHOLDER, DataError, Example
from .sources import RowRef, _unique_keys, iter_rows, open_regular, read_json_bytes, special_file_kind

__all__ = ["BenchmarkItem", "FORMATS", "load_items", "mathvista_query", "mathvision_problem", "choices_text"]

ImageRef = Path | bytes  # a file that exists, or encoded image bytes
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LETTER_RE = re.compile(r"^\(?([A-Za-z])\)?[.):]?$")  # a gold given as a choice letter: "B", "(B)", "B.", "b)"


def _where(label: str, index: int, line: int | None, row_id: str | None) -> str:
    """``file:line (row i, id 'x')`` (jsonl) or ``file row i (id 'x')``."""
    if line is not None:
        return f"{label}:{line} (row {index}" + (f", id {row_id!r})" if row_id is not None else ")")
    return f"{label} row {index}" + (f" (id {row_id!r})" if row_id is not None else "")


@dataclass
class BenchmarkItem:
    """One item: the prompt text, gold, lazily loaded images and the benchmark's own row."""

    id: str
    problem: str  # prompt text in the benchmark's form, one "<image>" per image where it belongs
    answer: str  # gold as the benchmark states it (MATH-V: the letter for multiple choice; MathVista: choice text)
    choices: list[str]
    images: list[ImageRef]
    row: dict  # the row as in the benchmark's file (image bytes dropped): what the official scorer reads
    categories: dict[str, list[str]] = field(default_factory=dict)  # e.g. {"subject": ["algebra"], "level": ["3"]}
    solution: str | None = None  # worked solution (training data only)
    meta: dict[str, Any] = field(default_factory=dict)  # free-form row metadata (training data only)
    image_field: str = "image"  # the row field the images came from, for error messages
    file: str = ""  # where the row is, for error messages
    index: int = 0
    line: int | None = None
    row_id: str | None = None  # the id as written in the row (None when the id was made from the position)

    @property
    def source(self) -> str:
        return _where(self.file, self.index, self.line, self.row_id)

    def load_images(self, min_pixels: int = 0, max_pixels: int = 0) -> list[Image.Image]:
        """Decode the images (RGB), each scaled into ``min_pixels..max_pixels`` (:func:`fit_pixels`) as soon as it is
        decoded; a missing or corrupt file raises a DataError naming this item."""
        out = []
        for k, ref in enumerate(self.images):
            what = f" of file {ref}" if isinstance(ref, Path) else ""
            try:
                # a file is decoded from its handle, not read whole first: Pillow reads the header and what the
                # pixels need, so a 10 GB file (or /proc/kcore) named as an image is refused, not held in memory
                # (a FIFO put at the path since loading is refused, not waited on)
                with open_regular(ref, str(ref)) if isinstance(ref, Path) else io.BytesIO(ref) as fh:
                    head = fh.read(16)
                    fh.seek(0)
                    if not head:  # Pillow's "cannot identify image file <_io.BytesIO object at 0x...>" named no cause
                        raise ValueError("empty (0 bytes)")
                    try:
                        im = Image.open(fh, formats=RASTER_FORMATS)
                    except UnidentifiedImageError:  # its message shows a memory address, not what the bytes are
                        raise ValueError(f"not an image in a format read here ({', '.join(RASTER_FORMATS)}); it "
                                         f"starts with {head!r}") from None
                    with im:
                        im.load()
                        out.append(to_rgb(im))  # transparency on white, 16-bit / 32-bit / float grey scaled
            except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
                raise DataError(f"{self.source}: field {self.image_field!r}: image {k}: cannot decode image "
                                f"bytes{what}: {e}", file=self.file, row=self.index, field=self.image_field,
                                reason="image_corrupt", row_id=self.row_id) from e
            problem = aspect_problem(out[-1])
            if problem:  # here, naming the row, not at the first step that encodes it (the processor's error)
                raise DataError(f"{self.source}: field {self.image_field!r}: image {k}{what}: {problem}",
                                file=self.file, row=self.index, field=self.image_field, reason="image_aspect",
                                row_id=self.row_id)
            out[-1] = fit_pixels(out[-1], min_pixels, max_pixels)
        return out

    def to_example(self, min_pixels: int = 0, max_pixels: int = 0) -> Example:
        """The trainer's Example (images decoded and fitted, :meth:`load_images`; a gold letter mapped to the choice
        text)."""
        answer = self.answer
        if self.choices and answer not in self.choices and re.fullmatch(r"[A-Z]", answer):
            j = ord(answer) - ord("A")
            if j < len(self.choices):
                answer = self.choices[j]
        meta = dict(self.meta)
        if self.categories:
            meta.setdefault("categories", self.categories)
        return Example(id=self.id, problem=self.problem, answer=answer, choices=list(self.choices),
                       images=self.load_images(min_pixels, max_pixels), solution=self.solution, meta=meta)


# --------------------------------------------------------------------------------------------------------------
# Prompt builders
# --------------------------------------------------------------------------------------------------------------

_MATHVISTA_HINTS = {
    "multi_choice": "Hint: Please answer the question and provide the correct option letter, e.g., A, B, C, D, "
                    "at the end.",
    "integer": "Hint: Please answer the question requiring an integer answer and provide the final value, "
               "e.g., 1, 2, 3, at the end.",
    "float1": "Hint: Please answer the question requiring a floating-point number with one decimal place and "
              "provide the final value, e.g., 1.2, 1.3, 1.4, at the end.",
    "float2": "Hint: Please answer the question requiring a floating-point number with two decimal places and "
              "provide the final value, e.g., 1.23, 1.34, 1.45, at the end.",
    "list": "Hint: Please answer the question requiring a Python list as an answer and provide the final list, "
            "e.g., [1, 2, 3], [1.2, 1.3, 1.4], at the end.",
}


class _NoHint(ValueError):
    """A row the official query builder has no hint for (``field`` names why)."""

    def __init__(self, fld: str, detail: str) -> None:
        super().__init__(f"{fld}: {detail}")
        self.field, self.detail = fld, detail


def mathvista_query(row: dict) -> str:
    """MathVista's official zero-shot query (hint, question with unit, lettered choices), as in its query.json.

    Raises ValueError for a row its build_query.py has no hint for (a free-form text answer, a float answer of other
    than 1 or 2 decimal places): any hint would ask for another answer than the scorer checks."""
    if row.get("question_type") == "multi_choice":
        hint = _MATHVISTA_HINTS["multi_choice"]
    elif row.get("answer_type") == "float":
        precision = str(row.get("precision"))
        if precision not in ("1", "1.0", "2", "2.0"):
            raise _NoHint("precision", f"the official query has hints for 1 or 2 decimal places, not "
                                       f"{row.get('precision')!r}")
        hint = _MATHVISTA_HINTS["float2" if precision in ("2", "2.0") else "float1"]
    elif row.get("answer_type") == "text":
        raise _NoHint("answer_type", "the official query has no hint for a free-form text answer")
    elif row.get("answer_type") == "list":
        hint = _MATHVISTA_HINTS["list"]
    else:
        hint = _MATHVISTA_HINTS["integer"]
    question = f"Question: {row['question']}"
    if row.get("unit"):
        question += f" (Unit: {row['unit']})"
    parts = [hint, question]
    if row.get("choices"):
        parts.append("\n".join(["Choices:"] + [f"({_LETTERS[i]}) {c}" for i, c in enumerate(row["choices"])]))
    return "\n".join(parts).strip()


def choices_text(choices: list[str]) -> str:
    """" Choices: A. x B. y" — the style the synthetic data and EasyR1's Geometry3K prompts use."""
    return " Choices: " + " ".join(f"{_LETTERS[i]}. {c}" for i, c in enumerate(choices)) if choices else ""


def mathvision_problem(row: dict, n_images: int) -> str:
    """MATH-V question, then its lettered options.

    A question whose only marker is ``<image1>`` gets the image there; otherwise (no marker, or markers such as
    ``<image2>`` naming parts of the one composite image) the image goes first and the markers stay as literal text,
    as in the official and lmms-eval prompts.
    """
    q = str(row["question"])
    markers = re.findall(r"<image\d*>", q)
    if n_images == 1 and markers == ["<image1>"]:
        q = q.replace("<image1>", IMAGE_PLACEHOLDER)
    else:
        q = IMAGE_PLACEHOLDER * n_images + q
    options = row.get("options") or []
    if options:
        q += "\nChoices:\n" + "\n".join(f"({_LETTERS[i]}) {o}" for i, o in enumerate(options))
    return q


# --------------------------------------------------------------------------------------------------------------
# Row helpers
# --------------------------------------------------------------------------------------------------------------

_TYPE_NAMES = {str: "a string", list: "a list", dict: "an object"}


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


_DATA_URI = re.compile(r"data:[^,]*;base64,", re.I)


def _b64decode(text: str) -> bytes:
    """Strict base64 (whitespace and line breaks ignored); ``binascii.Error`` on anything else."""
    return base64.b64decode("".join(text.split()), validate=True)


def _base64_raster(text: str) -> bytes | None:
    """The bytes ``text`` encodes in base64 when they start like an image Pillow reads, else None."""
    try:
        data = _b64decode(text)
        with Image.open(io.BytesIO(data), formats=RASTER_FORMATS):  # reads the header only
            return data
    except (binascii.Error, ValueError, OSError, SyntaxError, Image.DecompressionBombError):
        return None


class _Row:
    """One row being converted: checked field access and errors naming file:line / row and the row id."""

    def __init__(self, ref: RowRef, image_root: Path | None) -> None:
        self.ref, self.image_root, self.id = ref, image_root, None

    @property
    def where(self) -> str:
        return _where(self.ref.label, self.ref.index, self.ref.line, self.id)

    def err(self, fld: str, detail: str, reason: str) -> DataError:
        return DataError(f"{self.where}: field {fld!r}: {detail}", file=self.ref.label, row=self.ref.index,
                         field=fld, reason=reason, row_id=self.id)

    def get(self, row: dict, key: str, types: tuple = (str,), required: bool = True, numbers: bool = True) -> Any:
        """``row[key]`` of one of ``types`` (with ``numbers``, numbers become strings where a string is wanted); None
        if optional."""
        if key not in row or row[key] is None or _is_nan(row[key]):  # NaN: a missing value in pandas exports
            if required:
                raise self.err(key, "missing", f"missing_{key}")
            return None
        v = row[key]
        if isinstance(v, float) and math.isinf(v):
            raise self.err(key, f"expected a finite number, got {v}", "bad_type")
        if numbers and str in types and isinstance(v, (int, float)) and not isinstance(v, bool):
            v = str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)
        if not isinstance(v, types):
            expected = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
            raise self.err(key, f"expected {expected}, got {type(v).__name__}", "bad_type")
        return v

    def choices(self, row: dict, key: str, required: bool = True) -> list | None:
        """A list field of at most 26 strings or numbers (choices, options), elements unconverted; None if optional."""
        v = self.get(row, key, (list,), required)
        if v is not None and len(v) > len(_LETTERS):  # the prompts letter them (A-Z): a 27th has no letter
            raise self.err(key, f"{len(v)} choices; at most {len(_LETTERS)} can be lettered A-Z", "bad_value")
        for c in v or []:
            if isinstance(c, bool) or not isinstance(c, (str, int, float)):
                raise self.err(key, f"choice of type {type(c).__name__}", "bad_type")
            if isinstance(c, float) and not math.isfinite(c):
                raise self.err(key, f"choice {c} is not a finite number", "bad_type")
        return v

    def labels(self, value: Any, fld: str) -> list[str]:
        """Category labels: a list of strings or numbers (a bare string would split into its characters)."""
        if value is None:
            return []
        if not isinstance(value, list) or any(isinstance(g, (bool, list, dict)) or g is None for g in value):
            raise self.err(fld, f"expected a list of labels, got {value!r:.80}", "bad_type")
        return [str(g) for g in value]

    def text(self, row: dict, key: str, required: bool = True, numbers: bool = True) -> str | None:
        """A non-empty stripped string field (numbers accepted with ``numbers``: a gold 3, not a problem 3)."""
        v = self.get(row, key, (str,), required, numbers)
        if v is None:
            return None
        v = v.strip()
        if not v:
            raise self.err(key, "empty", f"missing_{key}")
        return v

    def image(self, value: Any, fld: str) -> ImageRef:
        """A path (relative to image_root or the data file's directory; must exist), embedded bytes, or base64 text
        (a ``data:image/...;base64,`` URI, the ``bytes`` of a JSON export, or a string that is no file)."""
        if isinstance(value, dict):  # {"bytes", "path"} struct of parquet / datasets
            if isinstance(value.get("bytes"), str) and value["bytes"]:  # JSON holds no bytes: an export writes base64
                return self.base64_image(value["bytes"], fld)
            if value.get("bytes") is not None:
                value = value["bytes"]
            else:
                value = value.get("path")
        if isinstance(value, (bytes, bytearray, memoryview)):
            if not value:
                raise self.err(fld, "empty image bytes", "image_corrupt")
            return bytes(value)
        if not isinstance(value, str) or not value:
            raise self.err(fld, f"no image (got {type(value).__name__})", "image_missing")
        if _DATA_URI.match(value):
            return self.base64_image(value[value.index(",") + 1:], fld)
        p = Path(value)
        candidates = [p] if p.is_absolute() else [r / p for r in (self.image_root, self.ref.base) if r is not None]
        if self.image_root is not None and not p.is_absolute():
            candidates.append(self.image_root / p.name)  # image_root may point at the images/ folder itself
        shown = value if len(value) <= 200 else value[:200] + "..."
        for c in candidates:
            try:
                found = c.is_file()
            except OSError as e:  # e.g. a file name too long
                if (data := _base64_raster(value)) is not None:
                    return data
                raise self.err(fld, f"image file {shown}: {e.strerror}", "image_missing") from e
            if found:
                return c
            if (kind := special_file_kind(c)) is not None:  # reading it would block (a FIFO) or never end (a device)
                raise self.err(fld, f"image file {shown} is {kind} ({c}), not a regular file", "image_missing")
        if (data := _base64_raster(value)) is not None:  # no such file, but the text is an encoded image
            return data
        folder = next((c for c in candidates if c.is_dir()), None)
        if folder is not None:  # "not found" would send the user looking for a file that is there, as a folder
            raise self.err(fld, f"image file {shown} is a directory ({folder}), not an image file", "image_missing")
        raise self.err(fld, f"image file {shown} not found (looked in {', '.join(str(c.parent) for c in candidates)})",
                       "image_missing")

    def base64_image(self, text: str, fld: str) -> bytes:
        try:
            data = _b64decode(text)
        except (binascii.Error, ValueError) as e:
            raise self.err(fld, f"invalid base64 image data: {e}", "image_corrupt") from e
        if not data:
            raise self.err(fld, "empty image bytes", "image_corrupt")
        return data

    def hub_image(self, row: dict) -> ImageRef:
        """MathVista / MATH-V: the hub's ``decoded_image`` when it holds bytes or a path, else the ``image`` path."""
        dec = row.get("decoded_image")
        if isinstance(dec, dict) and (dec.get("bytes") is not None or dec.get("path")):
            return self.image(dec, "decoded_image")
        if isinstance(dec, (bytes, bytearray, memoryview)) and dec:
            return bytes(dec)
        return self.image(row.get("image"), "image")

    def meta(self, row: dict, key: str) -> dict:
        """An object field, or a JSON string of one (hub exports store nested metadata as text)."""
        v = row.get(key)
        if v is None:
            return {}
        if isinstance(v, str):
            try:
                v = json.loads(v) if v.strip() else {}
            except json.JSONDecodeError as e:
                raise self.err(key, f"invalid JSON string: {e.msg}", "bad_type") from e
            if (bad := _non_unicode(v, key)) is not None:  # a "\\ud83d" escape inside the text
                raise self.err(bad, "text with a lone surrogate (\\ud800-\\udfff), not Unicode", "invalid_text")
        if not isinstance(v, dict):
            raise self.err(key, f"expected an object, got {type(v).__name__}", "bad_type")
        return v


def _choice_texts(r: _Row, values: list, fld: str) -> list[str]:
    """Training / Geometry3K choices as texts: a whole float as the integer (30.0 -> "30", as an answer of 30.0
    reads), stripped; an empty choice is an error (a gold letter pointing at it would make the gold "")."""
    out = []
    for k, c in enumerate(values):
        text = (str(int(c)) if isinstance(c, float) and c.is_integer() else str(c)).strip()
        if not text:
            raise r.err(fld, f"choice {k} is empty", "bad_value")
        out.append(text)
    return out


def _non_unicode(value: Any, name: str = "") -> str | None:
    """The field (``choices[2]``, ``metadata.task``) of the first text in ``value`` that is not Unicode: JSON decodes a
    lone surrogate escape ("\\ud83d", half of an emoji cut by an exporter) that no tokenizer or UTF-8 file takes."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return name or "<row>"
        return None
    if isinstance(value, dict):
        pairs = [(f"{name}.{k}" if name else str(k), k, v) for k, v in value.items()]
    elif isinstance(value, list):
        pairs = [(f"{name}[{k}]", None, v) for k, v in enumerate(value)]
    else:
        return None
    for sub, key, v in pairs:
        if key is not None and _non_unicode(key) is not None:
            return sub
        if (found := _non_unicode(v, sub)) is not None:
            return found
    return None


def _clean_row(row: dict) -> dict:
    """The row without image payloads, safe to store as JSON; NaN (a missing value in pandas exports) is None, so
    that the scorer and the prompt builders do not read it as a value (a unit "nan", options to iterate)."""
    return {k: None if _is_nan(v) else v for k, v in row.items() if k != "decoded_image"
            and not isinstance(v, (bytes, bytearray, memoryview)) and not (isinstance(v, dict) and "bytes" in v)}


# --------------------------------------------------------------------------------------------------------------
# Per-format converters: (row dict, _Row, extra) -> BenchmarkItem
# --------------------------------------------------------------------------------------------------------------


def _mathvision(row: dict, r: _Row, extra: dict) -> BenchmarkItem:
    r.id = str(r.get(row, "id"))
    # an empty question asked the model about the image and the options alone; a number is another column's value
    r.text(row, "question", numbers=False)
    answer = r.text(row, "answer")
    options = r.choices(row, "options", required=False) or []
    if options and not (len(answer) == 1 and 0 <= ord(answer) - 65 < len(options)):
        raise r.err("answer", f"{answer!r} is not a letter among the {len(options)} options", "bad_answer")
    images = [r.hub_image(row)]
    item_row = {**_clean_row(row), "options": options}  # NaN options (a pandas export) would crash both readers
    # labels as the official per-subject / per-level tables print them (a level 3.0 of a float column is "3")
    subject, level = r.get(row, "subject", required=False), r.get(row, "level", required=False)
    subject, level = subject or "unknown", level or "unknown"
    # subject_level: the official evaluate.py's cross-breakdown key f"{subject}_level{level}"
    cats = {"subject": [subject], "level": [level], "subject_level": [f"{subject}_level{level}"]}
    return BenchmarkItem(r.id, mathvision_problem(item_row, len(images)), answer, [str(o) for o in options], images,
                         item_row, cats)


_MATHVISTA_QTYPES = ("multi_choice", "free_form")
_MATHVISTA_ATYPES = ("text", "integer", "float", "list")


def _check_mathvista_gold(r: _Row, answer: str, answer_type: str, precision: Any) -> None:
    """A free-form gold must be a text the official normalisation can produce (calculate_score.py: an integer answer
    is ``str(int(float(x)))``, a float ``str(round(float(x), precision))``); any other gold scores every answer
    wrong, e.g. "1.50" at precision 2 (the prediction reads "1.5") or "abc" for an integer."""
    try:
        if answer_type == "integer":
            reachable = str(int(float(answer)))
        elif answer_type == "float":
            reachable = str(round(float(answer), int(precision)))
        else:
            return
    except (ValueError, OverflowError):
        reachable = None
    if reachable != answer:
        hint = f" (it normalises to {reachable!r})" if reachable is not None else ""
        raise r.err("answer", f"{answer!r} cannot equal a normalised {answer_type} prediction{hint}", "bad_answer")


def _mathvista(row: dict, r: _Row, extra: dict) -> BenchmarkItem:
    r.id = str(r.get(row, "pid"))
    r.text(row, "question", numbers=False)  # an empty question asked "Question: " of the model
    for key in ("question_type", "answer_type"):
        r.get(row, key)
    r.get(row, "unit", required=False)  # the prompt writes it as "(Unit: ...)": a list or object would show its repr
    # the prompt's hint and the official scorer branch on these: an unknown value would score every answer wrong
    for key, known in (("question_type", _MATHVISTA_QTYPES), ("answer_type", _MATHVISTA_ATYPES)):
        if row[key] not in known:
            raise r.err(key, f"{row[key]!r} is not one of {', '.join(known)}", "bad_value")
    precision = row.get("precision")
    if row["answer_type"] == "float" and (isinstance(precision, bool) or not isinstance(precision, (int, float))
                                         or _is_nan(precision) or not float(precision).is_integer()):
        raise r.err("precision", f"expected a whole number of decimal places for a float answer, got {precision!r}",
                    "bad_value")
    answer = r.get(row, "answer")
    if not answer.strip():  # no gold (the hub's test split withholds its answers): every response would score wrong
        raise r.err("answer", "empty", "missing_answer")
    choices = r.choices(row, "choices", required=False) or []
    if row["question_type"] == "multi_choice" and answer not in [str(c) for c in choices]:
        raise r.err("answer", f"{answer!r} is not one of the choices", "bad_answer")
    if row["question_type"] == "free_form":
        _check_mathvista_gold(r, answer, row["answer_type"], row.get("precision"))
    meta = r.meta(row, "metadata")
    images = [r.hub_image(row)]
    # the official scorer compares its normalised (text) prediction with the row's answer and choices: they are
    # given to it as the texts checked here (a gold 3 in the file would otherwise never equal "3")
    item_row = {**_clean_row(row), "answer": answer, "choices": [str(c) for c in choices] if choices else None,
                "metadata": meta}
    query = extra.get("queries", {}).get(r.id)
    question = " ".join(str(row.get("question") or "").split())
    # every official query holds its row's question: one from query.json that does not is another pid's (a file out
    # of step with the annotations would ask one question and score another's gold). A row's own query is its own.
    if query and question and question not in " ".join(query.split()):
        raise r.err("query", f"query.json's query does not hold the row's question {question[:60]!r}: another pid's "
                    "query (a query.json out of step with the annotations?)", "bad_value")
    query = query or r.get(row, "query", required=False)
    if not query:
        try:
            query = mathvista_query(item_row)
        except _NoHint as e:
            raise r.err(e.field, f"{e.detail}; give the row its query (a query.json or a 'query' field)",
                        "bad_value") from e
    # the breakdowns of the official calculate_score.py: question / answer type, then every metadata field it reads;
    # skills is a list and an item counts in each of its skills (an empty list: in none, as there)
    cats = {"question_type": [row["question_type"]], "answer_type": [row["answer_type"]]}
    for key in ("language", "source", "category", "task", "context", "grade"):
        cats[key] = [str(meta[key]) if meta.get(key) is not None else "unknown"]
    cats["skills"] = r.labels(meta["skills"], "metadata.skills") if meta.get("skills") is not None else ["unknown"]
    return BenchmarkItem(r.id, IMAGE_PLACEHOLDER + query, answer, [str(c) for c in choices], images, item_row, cats)


# InterGPS's symbolic_solver/sub_acc.py reports shapes with the five quadrilaterals merged into "Quad"
_INTERGPS_QUADS = ("Rectangle", "Rhombus", "Parallelogram", "Trapezoid", "Square")


def intergps_official_types(graph: list[str], goal: list[str]) -> tuple[list[str], list[str]]:
    """(goal, graph) labels as InterGPS's sub_acc.py counts them: a goal list drops one "Other" when it has other
    goals; every quadrilateral becomes "Quad".  Lists keep their repeats: sub_acc.py appends the id once per label,
    so ["Rectangle", "Square"] counts twice under Quad (in the total and, when right, in the correct count)."""
    goal = list(goal)
    if "Other" in goal and len(goal) > 1:
        goal.remove("Other")
    return goal, ["Quad" if g in _INTERGPS_QUADS else g for g in graph]


def _intergps(row: dict, r: _Row, extra: dict) -> BenchmarkItem:
    r.id = str(r.get(row, "id"))
    text = r.text(row, "problem_text", numbers=False)
    choices = _choice_texts(r, r.choices(row, "choices"), "choices")
    if not choices:
        raise r.err("choices", "empty (the answer is a letter among them)", "bad_value")
    letter = r.text(row, "answer")
    if not (len(letter) == 1 and 0 <= ord(letter) - 65 < len(choices)):
        raise r.err("answer", f"{letter!r} is not a letter among the {len(choices)} choices", "bad_answer")
    images = [r.image("img_diagram.png", "img_diagram.png")]  # beside data.json
    graph = r.labels(row.get("problem_type_graph"), "problem_type_graph")
    goal = r.labels(row.get("problem_type_goal"), "problem_type_goal")
    official_goal, official_graph = intergps_official_types(graph, goal)
    # graph / goal: the raw labels; official_*: the rows of InterGPS's per-type table (an empty list: in none)
    return BenchmarkItem(r.id, IMAGE_PLACEHOLDER + text + choices_text(choices), choices[ord(letter) - 65],
                         choices, images, {"id": r.id, "answer": letter, "choices": choices},
                         {"graph": graph or ["unknown"], "goal": goal or ["unknown"],
                          "official_goal": official_goal, "official_graph": official_graph})


_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.S)
# column names that hold a row's image(s) in common layouts: one of them beside a missing image field is a misnamed
# field, not a text-only row
_IMAGE_FIELD_NAMES = ("images", "image", "image_path", "image_paths", "img", "imgs", "picture", "figure",
                      "decoded_image", "image_url")


def _same_number_choice(answer: str, choices: list[str]) -> str | None:
    """The one choice text holding the same finite number as ``answer`` ("30.0" and "30"), else None."""
    def number(text: str) -> float | None:
        try:
            x = float(text.strip().replace(",", ""))
        except ValueError:
            return None
        return x if math.isfinite(x) else None

    gold = number(answer)
    same = {c for c in choices if gold is not None and number(c) == gold}  # a repeated option ("3", "3") is one text
    return same.pop() if len(same) == 1 else None


def _generic(row: dict, r: _Row, extra: dict) -> BenchmarkItem:
    """Geometry3K hub schema (and any layout through a field mapping): the rules training data is read with."""
    f = {"id": "id", "image": "images", "problem": "problem", "answer": "answer", "choices": "choices",
         **extra.get("fields", {})}
    rid = row.get(f["id"])
    if isinstance(rid, float) and rid.is_integer():
        rid = int(rid)
    # a row without an id gets one from its position (not named in messages: the row index already is)
    r.id = str(rid) if isinstance(rid, (str, int)) and not isinstance(rid, bool) and str(rid) else None
    if r.id is None and rid is not None and rid != "" and not _is_nan(rid):  # an id that is there but unusable
        raise r.err(f["id"], f"expected a string or an integer, got {rid!r:.80}", "bad_type")
    if f["problem"] not in row and "question" in row:  # a MATH-V / MathVista / R1-V row read with the default layout
        # was "field 'problem': missing", which sent one looking for a typo in the file, not at data.format
        raise r.err(f["problem"], "the row has no such field, but has 'question': name the problem field "
                    "(data.fields.problem=question), or read the benchmark's layout (data.format=mathvision | "
                    "mathvista | geoqa)", "missing_problem")
    # a problem that is a number (5) is a shifted or misnamed column, not a question: it was asked as the text "5"
    problem = r.text(row, f["problem"], numbers=False)
    answer = r.text(row, f["answer"], required=not isinstance(row.get("solution"), str))
    answer_field = f["answer"]
    if answer is None:  # R1-V: solution = "<answer>...</answer>"
        tags = _ANSWER_TAG.findall(row["solution"])
        if not tags or not tags[-1].strip():  # an empty tag is named as such: "has none" sent one looking for a typo
            what = "has no <answer>...</answer>" if not tags else "has an empty <answer></answer> (its last)"
            raise r.err("solution", f"{what} and the row has no answer field", "missing_answer")
        answer, answer_field = tags[-1].strip(), "solution"
    if f["choices"] not in row:  # options under another column name: the gold would stay a bare letter
        other = next((k for k in ("options", "choice", "answer_choices") if row.get(k) not in (None, "", [])), None)
        if other is not None:
            raise r.err(f["choices"], f"the row has no such field, but has {other!r}: name the choices field "
                        f"(data.fields.choices={other})", "missing_choices")
    choices = _choice_texts(r, r.choices(row, f["choices"], required=False) or [], f["choices"])
    m = _LETTER_RE.match(answer)
    if choices and answer not in choices:
        if m:  # gold given as a letter: the choice text (one convention)
            j = ord(m.group(1).upper()) - ord("A")
            if j >= len(choices):
                raise r.err(answer_field, f"letter {answer!r} out of range for {len(choices)} choices", "bad_answer")
            answer = choices[j]
        elif (same := _same_number_choice(answer, choices)) is not None:
            answer = same  # "30.0" beside a choice "30": the same number, written as the choice writes it
        else:  # no option can be right: every response would score wrong (or the model would learn to answer off-list)
            raise r.err(answer_field, f"{answer!r} is neither a letter nor the text of one of the {len(choices)} "
                        f"choices in {f['choices']!r}", "bad_answer")
    if f["image"] not in row:  # a text-only row, unless the images are under another name: then they were lost
        if f["image"] != "images":  # a column named in data.fields (the default is "images")
            raise r.err(f["image"], "the row has no such field (data.fields.image names it)", "missing_images")
        other = next((k for k in _IMAGE_FIELD_NAMES if k != f["image"] and row.get(k) not in (None, "", [])), None)
        if other is not None:
            raise r.err(f["image"], f"the row has no such field, but has {other!r}: name the image field "
                        f"(data.fields.image={other}; R1-V GeoQA rows: data.format=geoqa)", "missing_images")
    raw = row.get(f["image"])
    values = [] if raw is None else list(raw) if isinstance(raw, (list, tuple)) else [raw]
    images = [r.image(v, f["image"]) for v in values]
    n_ph = problem.count(IMAGE_PLACEHOLDER)
    if images and n_ph == 0:
        problem = IMAGE_PLACEHOLDER * len(images) + problem
    elif n_ph != len(images):
        raise r.err(f["problem"] if images else f["image"],
                    f"problem has {n_ph} {IMAGE_PLACEHOLDER} placeholder(s) but the row has {len(images)} image(s)",
                    "placeholder_mismatch")
    solution = r.get(row, "solution", required=False)
    meta = r.meta(row, "meta")
    item_id = r.id if r.id is not None else f"{Path(r.ref.label).stem}-{r.ref.index}"
    return BenchmarkItem(item_id, problem, answer, choices, images, {"id": item_id, "answer": answer,
                         "choices": choices}, solution=solution, meta=meta, image_field=f["image"])


# R1-V's GeoQA test prompts (geoqa_test_prompts.jsonl) name the fields image_path / question / ground_truth
_GEOQA_ALIASES = {"image": ("image", "image_path"), "problem": ("problem", "question"),
                  "answer": ("answer", "ground_truth")}


def _geoqa(row: dict, r: _Row, extra: dict) -> BenchmarkItem:
    fields = dict(extra.get("fields", {}))
    for key, names in _GEOQA_ALIASES.items():
        fields.setdefault(key, next((n for n in names if n in row), names[0]))
    # every GeoQA problem is about its figure: a row without one is malformed, not a text-only problem
    img = row.get(fields["image"])
    if img is None or _is_nan(img) or (isinstance(img, (list, tuple)) and not img):
        raise r.err(fields["image"], "missing (a GeoQA row needs its figure)", "image_missing")
    return _generic(row, r, {"fields": fields})


FORMATS: dict[str, Callable[[dict, _Row, dict], BenchmarkItem]] = {
    "mathvision": _mathvision,
    "mathvista": _mathvista,
    "intergps": _intergps,
    "geometry3k": _generic,
    "geoqa": _geoqa,
    "generic": _generic,
}


def _intergps_rows(src: Path) -> Iterator[RowRef]:
    """InterGPS raw layout: ``src/<id>/data.json`` (or a single problem folder)."""
    def has_data(d: Path) -> bool:  # a FIFO / device data.json is a problem folder too: refused by name when read
        return (d / "data.json").is_file() or special_file_kind(d / "data.json") is not None

    folders = [src] if has_data(src) else sorted(
        (d for d in src.iterdir() if has_data(d)),
        key=lambda d: (0, int(d.name)) if d.name.isdecimal() else (1, d.name))  # "²".isdigit(), but int() fails
    if not folders:
        raise FileNotFoundError(f"{src}: no <problem>/data.json folders (InterGPS Geometry3K layout)")
    for i, d in enumerate(folders):
        label = str(d / "data.json")
        try:
            raw = read_json_bytes(d / "data.json", label)
            row = json.loads(raw.decode("utf-8-sig"), object_pairs_hook=_unique_keys)
        except DataError as e:  # over the size cap, or no regular file: says so itself (row 0, as below)
            e.row, row = 0, e
        except (OSError, ValueError, RecursionError) as e:  # bad UTF-8 / JSON, huge integer, repeated key
            row = DataError(f"{label}: invalid JSON: {e}", file=label, row=0, reason="invalid_json")
        yield RowRef(label, d, 0, None, row)  # one row per file


def _mathvista_queries(qfile: Path) -> dict[str, str]:
    """MathVista's query.json: pid -> the official prompt."""
    label = str(qfile)
    try:
        # a BOM is allowed as in the annotations; a repeated pid would keep one of two prompts silently
        queries = json.loads(read_json_bytes(qfile, label).decode("utf-8-sig"), object_pairs_hook=_unique_keys)
    except DataError:  # over the size cap, or no regular file: says so itself
        raise
    except (OSError, ValueError, RecursionError) as e:  # ValueError: bad UTF-8, bad JSON, a repeated pid
        raise DataError(f"{label}: cannot read: {e}", file=label, reason="invalid_json") from e
    if not isinstance(queries, dict):
        raise DataError(f"{label}: expected an object pid -> query, got {type(queries).__name__}", file=label,
                        reason="bad_type")
    for pid, q in queries.items():
        if not isinstance(q, str):
            raise DataError(f"{label}: pid {pid!r}: expected a string query, got {type(q).__name__}", file=label,
                            reason="bad_type", row_id=pid)
        if _non_unicode(q) is not None:
            raise DataError(f"{label}: pid {pid!r}: query with a lone surrogate (\\ud800-\\udfff), not Unicode",
                            file=label, reason="invalid_text", row_id=pid)
    return queries


def items_to_examples(items: list[BenchmarkItem], stats: dict, skip_bad: bool = False, min_pixels: int = 0,
                      max_pixels: int = 0) -> tuple[list[Example], dict]:
    """The trainer's Examples of ``items`` (images decoded) and ``stats`` updated: an image that does not decode
    raises its :class:`DataError`, or with ``skip_bad`` its item is skipped and counted under its reason.

    Each image is scaled into ``min_pixels..max_pixels`` as it is decoded: fitted only after the whole set was
    decoded, a set of large images sat in memory at full size (a thousand 4000x4000 scans, ~48 GB) before any was
    scaled down."""
    examples: list[Example] = []
    reasons: Counter[str] = Counter(stats.get("skipped_by_reason", {}))
    for item in items:
        try:
            examples.append(item.to_example(min_pixels, max_pixels))
        except DataError as e:
            if not skip_bad:
                raise
            reasons[e.reason or "other"] += 1
    stats = {**stats, "loaded": len(examples), "skipped": sum(reasons.values()),
             "skipped_by_reason": dict(sorted(reasons.items()))}
    return examples, stats


def load_items(fmt: str, source: str | Path, split: str | None = None, *, image_root: str | Path | None = None,
               fields: dict | None = None, skip_bad: bool = False,
               limit: int | None = None) -> tuple[list[BenchmarkItem], dict]:
    """Items of ``source`` in format ``fmt`` and ``stats = {rows, loaded, skipped, skipped_by_reason, files,
    cut_by_limit, repeated_choices}`` (``cut_by_limit``: ``limit`` left rows of the source unread;
    ``repeated_choices``: loaded items whose options repeat a text).

    A directory with a ``<split>/`` sub-directory (and no ``<split>.*`` file) is read from there.  Without
    ``skip_bad`` the first bad row raises :class:`DataError`; duplicate ids always raise (prompts and results are keyed
    by id).  ``limit`` keeps the first N good items.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown data format {fmt!r}; known: {sorted(FORMATS)}")
    convert = FORMATS[fmt]
    src = Path(source)
    if split and src.is_dir() and (src / split).is_dir() and not any(
            (src / f"{split}{ext}").is_file() for ext in (".jsonl", ".json", ".parquet")):
        src, split = src / split, None
    extra: dict = {"fields": dict(fields or {})}
    files: list[str] = []
    if fmt == "intergps":
        if not src.is_dir():
            raise FileNotFoundError(f"{src}: the InterGPS layout is a directory of <id>/data.json folders")
        rows = _intergps_rows(src)
        image_root = None  # every problem's image sits in its own folder
    else:
        rows = iter_rows(src if src.exists() else source, split,
                         names=(f"{split}.json", f"annot_{split}.json") if fmt == "mathvista" and split else (),
                         id_key="pid" if fmt == "mathvista" else None, opened=files)
    if fmt == "mathvista":  # the official prompts, when shipped beside the annotations
        qfile = (src if src.is_dir() else src.parent) / "query.json"
        if src.exists() and qfile.is_file():
            extra["queries"] = _mathvista_queries(qfile)
    root = Path(image_root) if image_root else None

    items: list[BenchmarkItem] = []
    seen: dict[str, str] = {}
    reasons: Counter[str] = Counter()
    n_rows = 0
    # rows whose options repeat a text (MathVista 587 / 740 / 781 and MATH-V 1843 / 1893 do): loaded, as the scorer
    # and the vote read a repeated text as one option (both letters right, one vote), and counted in the stats
    repeated_choices = 0
    cut = False  # the limit left rows unread (a row beyond it exists), not merely reached at the set's end
    for ref in rows:
        if limit is not None and len(items) >= limit:
            cut = True
            break
        n_rows += 1
        r = _Row(ref, root)
        try:
            if isinstance(ref.row, DataError):
                raise ref.row
            if not isinstance(ref.row, dict):
                raise r.err("<row>", f"expected an object, got {type(ref.row).__name__}", "bad_type")
            item = convert(ref.row, r, extra)
            if (bad := _non_unicode(ref.row)) is not None:  # else the tokenizer or the records file fails far later
                raise r.err(bad, "text with a lone surrogate (\\ud800-\\udfff), not Unicode", "invalid_text")
            for fld, text in (("problem", item.problem), ("answer", item.answer), ("solution", item.solution), *(
                    (f"choices[{k}]", c) for k, c in enumerate(item.choices))):
                if isinstance(text, str) and (m := CONTROL_TOKEN.search(text)):
                    # the tokenizer reads it as the token itself: a fake chat turn in the prompt, or an image
                    # placeholder with no pixels (a bare StopIteration inside the processor); in a solution (the
                    # SFT target) an <|im_end|> ends the turn inside the target the model is taught to write
                    raise r.err(fld, f"holds the chat / vision control token {m.group()!r}", "invalid_text")
            item.file, item.index, item.line, item.row_id = ref.label, ref.index, ref.line, r.id
        except DataError as e:
            if not skip_bad:
                raise
            reasons[e.reason or "other"] += 1
            continue
        if item.id in seen:
            raise DataError(f"{r.where}: field 'id': {item.id!r} repeats {seen[item.id]}", file=ref.label, row=ref.index,
                            field="id", reason="duplicate_id", row_id=item.id)
        seen[item.id] = r.where
        items.append(item)
        repeated_choices += len(set(item.choices)) < len(item.choices)
    if fmt == "intergps":
        files = sorted({it.file for it in items})
    stats = {"rows": n_rows, "loaded": len(items), "skipped": sum(reasons.values()),
             "skipped_by_reason": dict(sorted(reasons.items())), "files": files, "cut_by_limit": cut,
             "repeated_choices": repeated_choices}
    return items, stats
