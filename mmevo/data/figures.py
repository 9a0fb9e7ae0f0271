"""Synthetic problems whose values are only in the figure (``data.train=figures``).

The geometry generator (``synthetic.py``) writes every number into the problem text, so a model can ignore the image
and visual perturbation (VSP) has nothing to act on. Here the text holds no digit at all: it speaks of "the red
number" and "the blue number" (or red and blue dots), and the values are drawn in the image only, as seven-segment
digits or as counts of dots, each colour in a random quadrant. A model that cannot see the image is at chance
(``text_only_chance``); ``read_figure`` decodes the values back from the pixels, which is how the tests prove that the
figure carries them.

Why colours and random quadrants: Qwen2.5-VL's vision tokens carry no absolute position (rotary positions only), so
"the top left cell" asks a tiny model to learn position-selective attention, which it does not in a CPU budget (a
2 x 2 digit table stayed at chance after 12,000 SFT examples); picking a token by its colour is attention by content.

Layouts are drawn on a 56 x 56 grid (the tiny Qwen2.5-VL sees 4 x 4 patches of 14 pixels, merged to 2 x 2 tokens:
one token per quadrant) and scaled to ``image_size``. Everything is seeded by ``random.Random``; rows follow the
Geometry3K hub schema like the geometry generator's, and the held-out set is de-duplicated against the train set on
(problem text, marks): the texts alone repeat by design.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageDraw

from .schema import IMAGE_PLACEHOLDER, Example
from .synthetic import _check_count, _check_stream_args, _derive_seed, _solution
from mmevo.validation import is_integer_number

__all__ = ["FIGURE_KINDS", "iter_figures", "generate_figures", "split_figures", "draw_figure", "read_figure",
           "text_only_chance", "blank_images", "shuffled_images"]

GRID = 56  # layout units: the figure is drawn on a 56 x 56 grid, then scaled to the requested size
CELL = 28  # one quadrant = one merged vision token of the tiny model
MAX_VALUE = 9  # digits and dot counts are 1..9
SEGMENT_WIDTH = 6  # thick strokes: a mark must change a large share of its quadrant's pixels (see draw_figure)
COLORS = {"red": (220, 0, 0), "blue": (0, 0, 220)}

# seven-segment digits: segment -> ((x0, y0), (x1, y1)) inside a 28 x 28 cell, and the segments of each digit
_SEGMENTS = {"a": ((7, 4), (21, 4)), "b": ((21, 4), (21, 14)), "c": ((21, 14), (21, 24)), "d": ((7, 24), (21, 24)),
             "e": ((7, 14), (7, 24)), "f": ((7, 4), (7, 14)), "g": ((7, 14), (21, 14))}
_DIGIT_SEGMENTS = {0: "abcdef", 1: "bc", 2: "abged", 3: "abgcd", 4: "fgbc", 5: "afgcd", 6: "afgedc", 7: "abc",
                   8: "abcdefg", 9: "abcdfg"}
_SEGMENT_DIGIT = {frozenset(s): d for d, s in _DIGIT_SEGMENTS.items()}
# dots: up to 9 on a 3 x 3 grid of a cell, filled in reading order (each count has its own pattern)
_DOT_CENTRES = [(7 + 7 * (k % 3), 7 + 7 * (k // 3)) for k in range(9)]
_DOT_RADIUS = 3.4
BAR_UNIT = 3  # grid units of bar height per unit of value (9 units fill the quadrant)


def _cell_origin(cell: int) -> tuple[int, int]:
    return CELL * (cell % 2), CELL * (cell // 2)


def draw_figure(style: str, marks: dict[str, tuple[int, int]], size: int = GRID) -> Image.Image:
    """A white figure with light quadrant lines and, per colour in ``marks`` ({colour: (quadrant, value)}), the value
    drawn in that colour in that quadrant: a seven-segment digit (``style="digits"``) or that many dots (``"dots"``)."""
    _check_marks(style, marks)
    img = Image.new("RGB", (size, size), (255, 255, 255))
    d = ImageDraw.Draw(img)
    k = size / GRID
    for v in (0.5, CELL, GRID - 1.5):
        d.line([(k * v, 0), (k * v, size)], fill=(190, 190, 190), width=1)
        d.line([(0, k * v), (size, k * v)], fill=(190, 190, 190), width=1)
    width = max(1, round(k * SEGMENT_WIDTH))
    for colour, (cell, value) in marks.items():
        ox, oy = _cell_origin(cell)
        fill = COLORS[colour]
        if style == "digits":
            for seg in _DIGIT_SEGMENTS[value]:
                (x0, y0), (x1, y1) = _SEGMENTS[seg]
                d.line([(k * (ox + x0), k * (oy + y0)), (k * (ox + x1), k * (oy + y1))], fill=fill, width=width)
        elif style == "bars":  # a bar standing on the quadrant's floor, BAR_UNIT grid units per unit of value
            d.rectangle([k * (ox + 3), k * (oy + CELL - 1 - BAR_UNIT * value), k * (ox + CELL - 3), k * (oy + CELL - 1)],
                        fill=fill)
        elif style == "dots":
            r = k * _DOT_RADIUS
            for cx, cy in _DOT_CENTRES[:value]:
                x, y = k * (ox + cx), k * (oy + cy)
                d.ellipse([x - r, y - r, x + r, y + r], fill=fill)
        else:
            raise ValueError(f"unknown figure style {style!r}")
    return img


_STYLES = ("digits", "bars", "dots")


def _check_marks(style: str, marks: dict[str, tuple[int, int]]) -> None:
    """Only marks ``read_figure`` can read back: drawing clips silently otherwise (dots past 9 are not drawn, a bar
    past 9 runs into the next quadrant, two colours in one quadrant overdraw each other)."""
    if style not in _STYLES:
        raise ValueError(f"unknown figure style {style!r}")
    lowest = 0 if style == "digits" else 1  # a 0 is a digit, but no dots / no bar
    cells = []
    for colour, (cell, value) in marks.items():
        if colour not in COLORS:
            raise ValueError(f"unknown mark colour {colour!r}; known: {sorted(COLORS)}")
        for name, v, lo, hi in (("quadrant", cell, 0, 3), ("value", value, lowest, MAX_VALUE)):
            if not is_integer_number(v) or not lo <= v <= hi:
                raise ValueError(f"the {colour} {name} must be an integer in [{lo}, {hi}] for {style!r}, got {v!r}")
        cells.append(cell)
    if len(set(cells)) < len(cells):
        raise ValueError(f"two colours in one quadrant cannot be read apart: {marks!r}")


def _colour_at(img: Image.Image, x: float, y: float) -> str | None:
    r, g, b = img.getpixel((min(img.width - 1, int(x)), min(img.height - 1, int(y))))[:3]
    if r > 150 and g < 100 and b < 100:
        return "red"
    if b > 150 and r < 100 and g < 100:
        return "blue"
    return None


def read_figure(img: Image.Image, style: str) -> dict[str, tuple[int, int]]:
    """The marks of a ``draw_figure`` image read back from its pixels: {colour: (quadrant, value)}."""
    if style not in _STYLES:  # any other name was read as dots
        raise ValueError(f"unknown figure style {style!r}")
    k = img.width / GRID
    img = img.convert("RGB")
    found: dict[str, tuple[int, int]] = {}
    for cell in range(4):
        ox, oy = _cell_origin(cell)
        if style == "digits":
            lit = {seg: _colour_at(img, k * (ox + (x0 + x1) / 2), k * (oy + (y0 + y1) / 2))
                   for seg, ((x0, y0), (x1, y1)) in _SEGMENTS.items()}
            colours = {c for c in lit.values() if c}
            if len(colours) == 1:
                (colour,) = colours
                value = _SEGMENT_DIGIT.get(frozenset(s for s, c in lit.items() if c))
                if value is not None:
                    found[colour] = (cell, value)
        elif style == "bars":
            x, bottom = k * (ox + CELL / 2), k * (oy + CELL - 2)
            colour = _colour_at(img, x, bottom)
            if colour:
                # The bar's top pixel row, not samples at unit midpoints: Pillow puts the top edge up to one pixel
                # off its float coordinate, more than half a unit below about 38 px (a 2 read as 3 at 29 px).
                top = int(bottom)
                while top - 1 >= int(k * oy) and _colour_at(img, x, top - 1) == colour:
                    top -= 1
                found[colour] = (cell, round((k * (oy + CELL - 1) - (top + 0.5)) / (k * BAR_UNIT)))
        else:
            dots = [_colour_at(img, k * (ox + cx), k * (oy + cy)) for cx, cy in _DOT_CENTRES]
            colours = {c for c in dots if c}
            if len(colours) == 1:
                (colour,) = colours
                found[colour] = (cell, sum(c is not None for c in dots))
    return found


@dataclass
class _Problem:
    style: str  # "digits" | "dots" | "bars"
    red: int
    blue: int
    text: str
    think: str
    answer: int


_INTRO = {"digits": "The figure shows a red number and a blue number. ",
          "dots": "The figure shows a group of red dots and a group of blue dots. ",
          "bars": "The figure shows a red bar and a blue bar on a grid. "}
_READ = "The red {noun} is {r} and the blue {noun} is {b}. "
# kind -> (style, question, worked reasoning, answer(red, blue, asked)). Placeholders: {c} the colour a "read" question
# asks about and {v} its value; {r} / {b} the red / blue values; {hi} / {lo} the larger / smaller; {a} the answer.
_KINDS: dict[str, tuple[str, str, str, Callable[[int, int, int], int]]] = {
    "digit_read": ("digits", "What is the {c} number?", "The {c} number is {v}.", lambda r, b, v: v),
    "digit_sum": ("digits", "What is the red number plus the blue number?",
                  _READ.replace("{noun}", "number") + "{r} + {b} = {a}", lambda r, b, v: r + b),
    "digit_diff": ("digits", "What is the larger number minus the smaller one?",
                   _READ.replace("{noun}", "number") + "{hi} - {lo} = {a}", lambda r, b, v: abs(r - b)),
    "rectangle_area": ("digits", "A rectangle has the red number as its width and the blue number as its height. "
                       "What is its area?", "The width is {r} and the height is {b}. {r} * {b} = {a}",
                       lambda r, b, v: r * b),
    "dots_read": ("dots", "How many {c} dots are there?", "There are {v} {c} dots.", lambda r, b, v: v),
    "dots_total": ("dots", "How many dots are there in all?",
                   "There are {r} red dots and {b} blue dots. {r} + {b} = {a}", lambda r, b, v: r + b),
    "bar_read": ("bars", "How tall is the {c} bar?", "The {c} bar is {v} tall.", lambda r, b, v: v),
    "bar_sum": ("bars", "What is the total height of the two bars?",
                _READ.replace("{noun}", "bar") + "{r} + {b} = {a}", lambda r, b, v: r + b),
    "bar_diff": ("bars", "How much taller is the taller bar than the shorter one?",
                 _READ.replace("{noun}", "bar") + "{hi} - {lo} = {a}", lambda r, b, v: abs(r - b)),
}


def _problem(kind: str, rng: random.Random) -> _Problem:
    style, question, think, answer = _KINDS[kind]
    r, b = rng.randint(1, MAX_VALUE), rng.randint(1, MAX_VALUE)
    c = rng.choice(("red", "blue")) if "{c}" in question else None  # only "read" kinds draw the colour
    v = r if c == "red" else b
    a = answer(r, b, v)
    fields = {"c": c, "v": v, "r": r, "b": b, "hi": max(r, b), "lo": min(r, b), "a": a}
    return _Problem(style, r, b, _INTRO[style] + question.format(**fields), think.format(**fields), a)


FIGURE_KINDS: tuple[str, ...] = tuple(_KINDS)


def iter_figures(seed: int, image_size: int = GRID, id_prefix: str | None = None) -> Iterator[Example]:
    """Endless deterministic stream of figure problems (kinds drawn uniformly); open answers, no choices."""
    _check_stream_args(seed, image_size, 28)  # 28: digits need 2 pixels per segment
    rng = random.Random(int(seed))  # a numpy integer is no seed type of random.Random
    prefix = id_prefix if id_prefix is not None else f"fig-s{seed}"
    i = 0
    while True:
        kind = FIGURE_KINDS[rng.randrange(len(FIGURE_KINDS))]
        p = _problem(kind, rng)
        red_cell, blue_cell = rng.sample(range(4), 2)  # where each colour sits: found by colour, not by position
        marks = {"red": (red_cell, p.red), "blue": (blue_cell, p.blue)}
        yield Example(id=f"{prefix}-{i:06d}", problem=IMAGE_PLACEHOLDER + p.text, answer=str(p.answer), choices=[],
                      images=[draw_figure(p.style, marks, image_size)], solution=_solution(p.think, str(p.answer)),
                      meta={"kind": kind, "style": p.style, "mc": False,
                            "params": {"red": list(marks["red"]), "blue": list(marks["blue"])}})
        i += 1


def generate_figures(n: int, seed: int, image_size: int = GRID, *, id_prefix: str | None = None) -> list[Example]:
    """``n`` deterministic figure problems; a prefix of any longer list with the same seed."""
    _check_count("n", n)
    stream = iter_figures(seed, image_size, id_prefix)
    return [next(stream) for _ in range(n)]


def _key(ex: Example) -> tuple:
    return ex.problem, tuple(ex.meta["params"]["red"]), tuple(ex.meta["params"]["blue"])


def split_figures(n_train: int, n_heldout: int, seed: int, image_size: int = GRID) -> tuple[list[Example],
                                                                                          list[Example]]:
    """A train set and a held-out set that share no (problem text, figure values) pair; ids ``train-NNNNNN`` and
    ``heldout-NNNNNN``, from streams seeded apart from the geometry generator's."""
    _check_count("n_train", n_train)
    _check_count("n_heldout", n_heldout)
    train = generate_figures(n_train, _derive_seed(seed, "figures-train"), image_size, id_prefix="train")
    seen = {_key(ex) for ex in train}
    stream = iter_figures(_derive_seed(seed, "figures-heldout"), image_size, id_prefix="heldout-raw")
    heldout: list[Example] = []
    for tries in range(200 * max(n_heldout, 1) + 10_000):
        if len(heldout) == n_heldout:
            break
        ex = next(stream)
        if _key(ex) in seen:
            continue
        seen.add(_key(ex))  # no duplicates inside the held-out set either
        ex.id = f"heldout-{len(heldout):06d}"
        heldout.append(ex)
    if len(heldout) < n_heldout:
        raise ValueError(f"could not find {n_heldout} held-out figure problems unseen in {n_train} train problems")
    return train, heldout


def text_only_chance(train: Sequence[Example], heldout: Sequence[Example]) -> dict[str, Any]:
    """Accuracy on ``heldout`` of the best guess that sees only the problem text: the train set's most frequent
    answer for the same text (the overall most frequent answer for a text never seen). Overall and per kind."""
    by_text: dict[str, Counter] = {}
    overall: Counter = Counter()
    for ex in train:
        by_text.setdefault(ex.problem, Counter())[ex.answer] += 1
        overall[ex.answer] += 1
    fallback = overall.most_common(1)[0][0] if overall else None
    hits: dict[str, list[int]] = {}
    for ex in heldout:
        c = by_text.get(ex.problem)
        guess = c.most_common(1)[0][0] if c else fallback
        hits.setdefault(ex.meta.get("kind", "all"), []).append(int(guess == ex.answer))
    flat = [h for v in hits.values() for h in v]
    return {"accuracy": sum(flat) / len(flat) if flat else 0.0,
            "by_kind": {k: sum(v) / len(v) for k, v in sorted(hits.items())}}


def blank_images(examples: Sequence[Example]) -> list[Example]:
    """Copies of ``examples`` with every image replaced by a white one of the same size (the image-ablation
    control)."""
    from dataclasses import replace

    return [replace(ex, images=[Image.new("RGB", im.size, (255, 255, 255)) for im in ex.images]) for ex in examples]


def shuffled_images(examples: Sequence[Example], seed: int = 0) -> list[Example]:
    """Copies of ``examples`` whose images are permuted among examples of the same figure style, no example keeping
    its own (a derangement inside each style: the image is valid but belongs to another problem). The one example of
    a style that has no other keeps its image (there is none to swap with)."""
    from dataclasses import replace

    rng = random.Random(seed)
    out = list(examples)
    by_style: dict[str, list[int]] = {}
    for i, ex in enumerate(examples):
        by_style.setdefault(ex.meta.get("style", "all"), []).append(i)
    for idx in by_style.values():
        if len(idx) < 2:
            continue
        order = idx[:]
        rng.shuffle(order)
        for a, b in zip(order, order[1:] + order[:1]):  # each takes the next one's image in a shuffled cycle
            out[a] = replace(examples[a], images=list(examples[b].images))
    return out
