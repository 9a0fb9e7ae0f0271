"""Deterministic procedural geometry problems with diagrams and exact answers.

The generator is the embedded data of the CPU demo: a tiny vision-language
model is warmed up with SFT on the worked solutions and then trained with GRPO
against the exact integer answers.  Everything is therefore kept deliberately
easy: short templated texts that contain every number needed, small integer
answers, one-step formulas, and a small diagram that illustrates the same
numbers.

Determinism: all randomness flows from ``random.Random(seed)``; the global RNG
is never touched, so ``generate_geometry(n, seed)`` returns the same texts and
the same image bytes on every run (for a given Pillow version), and
``generate_geometry(k, seed)`` is a prefix of ``generate_geometry(n, seed)``
for ``k <= n``.

Output files follow the Geometry3K hub schema (``id``, ``images``,
``problem``, ``answer``, ``choices``, ``solution``) so that
:func:`mmevo.data.geometry3k.load_geometry3k` serves real and synthetic data
alike.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import os
import random
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from .benchmarks import choices_text
from .schema import IMAGE_PLACEHOLDER, Example
from mmevo.validation import is_integer_number

__all__ = [
    "KINDS",
    "generate_geometry",
    "iter_geometry",
    "split_train_heldout",
    "write_hub_jsonl",
    "write_hub_parquet",
    "image_to_png_bytes",
]

# --------------------------------------------------------------------------
# Drawing
# --------------------------------------------------------------------------

_LINE = (20, 20, 20)
_NUM = (200, 0, 0)  # given numbers
_ASK = (0, 90, 200)  # the unknown ("?")
_NAME = (60, 60, 60)  # vertex / line names

# Below this size the labels would cover the figure; draw shapes only.
_MIN_LABEL_SIZE = 40

_font_cache: list[Any] = []


def _font() -> Any:
    """Pillow's built-in bitmap font (no FreeType, so rendering is stable)."""
    if not _font_cache:
        loader = getattr(ImageFont, "load_default_imagefont", None)
        _font_cache.append(loader() if loader is not None else ImageFont.load_default())
    return _font_cache[0]


def _dir(phi: float) -> tuple[float, float]:
    r = math.radians(phi)
    return (math.cos(r), math.sin(r))


def _add(p: tuple[float, float], v: tuple[float, float], t: float = 1.0) -> tuple[float, float]:
    return (p[0] + t * v[0], p[1] + t * v[1])


class _Sketch:
    """A square canvas with abstract (y-up) coordinates fitted to the image.

    ``extent`` is the list of abstract points the figure must show; they are
    scaled uniformly into the image, leaving a margin for labels.  Angles are
    given in math convention (degrees, counter-clockwise, y up).
    """

    def __init__(self, size: int, extent: Sequence[tuple[float, float]], margin: float = 0.17) -> None:
        self.size = size
        self.img = Image.new("RGB", (size, size), (255, 255, 255))
        self.draw = ImageDraw.Draw(self.img)
        self.lw = max(1, round(size / 56))
        self.labels = size >= _MIN_LABEL_SIZE
        xs = [p[0] for p in extent]
        ys = [p[1] for p in extent]
        span = max(max(xs) - min(xs), max(ys) - min(ys), 1e-9)
        self.k = size * (1.0 - 2.0 * margin) / span
        self.cx = (min(xs) + max(xs)) / 2.0
        self.cy = (min(ys) + max(ys)) / 2.0

    # abstract -> pixel
    def px(self, p: tuple[float, float]) -> tuple[float, float]:
        h = self.size / 2.0
        return (h + self.k * (p[0] - self.cx), h - self.k * (p[1] - self.cy))

    def line(self, p: tuple[float, float], q: tuple[float, float], fill=_LINE) -> None:
        self.draw.line([self.px(p), self.px(q)], fill=fill, width=self.lw)

    def polygon(self, pts: Sequence[tuple[float, float]]) -> None:
        pix = [self.px(p) for p in pts]
        self.draw.line(pix + [pix[0]], fill=_LINE, width=self.lw, joint="curve")

    def circle(self, c: tuple[float, float], r: float) -> None:
        x, y = self.px(c)
        rr = self.k * r
        self.draw.ellipse([x - rr, y - rr, x + rr, y + rr], outline=_LINE, width=self.lw)

    def dot(self, p: tuple[float, float]) -> None:
        x, y = self.px(p)
        r = max(1.0, self.size / 56)
        self.draw.ellipse([x - r, y - r, x + r, y + r], fill=_LINE)

    def arc(self, v: tuple[float, float], phi1: float, phi2: float, r_px: float | None = None, fill=_NUM) -> None:
        """Arc at vertex ``v`` sweeping counter-clockwise from ``phi1`` to ``phi2``."""
        r = r_px if r_px is not None else max(3.0, self.size * 0.09)
        x, y = self.px(v)
        # After the y flip a math angle phi is Pillow angle -phi, and Pillow
        # sweeps clockwise from start to end.
        self.draw.arc([x - r, y - r, x + r, y + r], start=-phi2, end=-phi1, fill=fill, width=1)

    def right_mark(self, v: tuple[float, float], phi: float) -> None:
        """Small square marking a right angle between directions phi and phi+90."""
        s = max(2.0, self.size * 0.07) / self.k
        a = _add(v, _dir(phi), s)
        b = _add(a, _dir(phi + 90), s)
        c = _add(v, _dir(phi + 90), s)
        self.draw.line([self.px(a), self.px(b), self.px(c)], fill=_NUM, width=1)

    def text(self, s: str, p_px: tuple[float, float], fill=_NUM) -> None:
        """Text centred on pixel position ``p_px``, clamped inside the image."""
        if not self.labels:
            return
        font = _font()
        l, t, r, b = self.draw.textbbox((0, 0), s, font=font)
        w, h = r - l, b - t
        x = min(max(p_px[0] - w / 2.0, 0.0), self.size - w)
        y = min(max(p_px[1] - h / 2.0, 0.0), self.size - h)
        self.draw.text((round(x) - l, round(y) - t), s, fill=fill, font=font)

    def label_at(self, p: tuple[float, float], s: str, fill=_NUM, offset: tuple[float, float] = (0.0, 0.0)) -> None:
        x, y = self.px(p)
        self.text(s, (x + offset[0], y + offset[1]), fill=fill)

    def angle(self, v: tuple[float, float], phi1: float, phi2: float, s: str, fill=_NUM, dist: float = 2.3) -> None:
        """Arc plus a label on the bisector of the angle from phi1 to phi2 (CCW)."""
        r = max(3.0, self.size * 0.09)
        self.arc(v, phi1, phi2, r, fill=fill)
        mid = math.radians((phi1 + phi2) / 2.0)
        x, y = self.px(v)
        self.text(s, (x + dist * r * math.cos(mid), y - dist * r * math.sin(mid)), fill=fill)

    def name(self, p: tuple[float, float], s: str, away: tuple[float, float]) -> None:
        """Vertex name placed just outside the figure, away from point ``away``."""
        x, y = self.px(p)
        ax, ay = self.px(away)
        dx, dy = x - ax, y - ay
        n = math.hypot(dx, dy) or 1.0
        d = max(4.0, self.size * 0.09)
        self.text(s, (x + d * dx / n, y + d * dy / n), fill=_NAME)


# --------------------------------------------------------------------------
# Problem kinds
# --------------------------------------------------------------------------


@dataclass
class _Problem:
    text: str  # question stem, without the "<image>" prefix and without choices
    answer: int
    think: str  # one-line reasoning that ends in the answer
    distractors: list[int]  # plausible wrong answers (other formulas' results)
    params: dict[str, Any]
    draw: Callable[[int], Image.Image]


def _ang(rng: random.Random, lo: int, hi: int, exclude: Sequence[int] = ()) -> int:
    """A multiple of 5 in [lo, hi] (both multiples of 5), avoiding ``exclude``."""
    while True:
        v = 5 * rng.randint(lo // 5, hi // 5)
        if v not in exclude:
            return v


def _triangle_angle(rng: random.Random) -> _Problem:
    while True:
        a, b = _ang(rng, 25, 85), _ang(rng, 25, 85)
        c = 180 - a - b
        if c >= 20:
            break

    def draw(size: int) -> Image.Image:
        A, B = (0.0, 0.0), (1.0, 0.0)
        ta, tb = math.tan(math.radians(a)), math.tan(math.radians(b))
        x = tb / (ta + tb)
        C = (x, x * ta)
        sk = _Sketch(size, [A, B, C])
        sk.polygon([A, B, C])
        g = ((A[0] + B[0] + C[0]) / 3, (A[1] + B[1] + C[1]) / 3)
        for p, s in ((A, "A"), (B, "B"), (C, "C")):
            sk.name(p, s, g)
        sk.angle(A, 0, a, str(a))
        sk.angle(B, 180 - b, 180, str(b))
        sk.angle(C, 180 + a, 360 - b, "?", fill=_ASK)
        return sk.img

    return _Problem(
        f"In triangle ABC, angle A = {a} and angle B = {b}. Find angle C.",
        c,
        f"180 - {a} - {b} = {c}",
        [a + b, 180 - a, 180 - b, 90 - a, c + 10, c - 10],
        {"a": a, "b": b},
        draw,
    )


def _straight_line(a: int) -> Callable[[int], Image.Image]:
    def draw(size: int) -> Image.Image:
        O = (0.0, 0.0)
        L, R = (-1.0, 0.0), (1.0, 0.0)
        T = _dir(a)
        sk = _Sketch(size, [L, R, (0.0, 1.0), (0.0, -0.2)])
        sk.line(L, R)
        sk.line(O, T)
        sk.dot(O)
        sk.angle(O, 0, a, str(a))
        sk.angle(O, a, 180, "?", fill=_ASK)
        return sk.img

    return draw


def _supplementary(rng: random.Random) -> _Problem:
    a = _ang(rng, 20, 160, exclude=(90,))
    x = 180 - a
    return _Problem(
        f"Angles 1 and 2 form a straight line. Angle 1 = {a}. Find angle 2.",
        x,
        f"180 - {a} = {x}",
        [a, abs(90 - a), 360 - a, x + 10, x - 10],
        {"a": a},
        _straight_line(a),
    )


def _vertical(rng: random.Random) -> _Problem:
    a = _ang(rng, 20, 160, exclude=(90,))

    def draw(size: int) -> Image.Image:
        O = (0.0, 0.0)
        d1, d2 = _dir(0), _dir(a)
        pts = [_add(O, d1, 1), _add(O, d1, -1), _add(O, d2, 1), _add(O, d2, -1)]
        sk = _Sketch(size, pts)
        sk.line(pts[0], pts[1])
        sk.line(pts[2], pts[3])
        sk.dot(O)
        sk.angle(O, 0, a, str(a))
        sk.angle(O, 180, 180 + a, "?", fill=_ASK)
        return sk.img

    return _Problem(
        f"Two lines cross. Angle 1 = {a}. Find angle 2, its vertical angle.",
        a,
        f"vertical angles are equal, so {a}",
        [180 - a, abs(90 - a), a + 10, a - 10, 2 * a],
        {"a": a},
        draw,
    )


def _complementary(rng: random.Random) -> _Problem:
    a = _ang(rng, 15, 75)
    x = 90 - a

    def draw(size: int) -> Image.Image:
        O = (0.0, 0.0)
        sk = _Sketch(size, [O, (1.0, 0.0), (0.0, 1.0)])
        sk.line(O, (1.0, 0.0))
        sk.line(O, (0.0, 1.0))
        sk.line(O, _dir(a))
        sk.angle(O, 0, a, str(a), dist=2.6)
        sk.angle(O, a, 90, "?", fill=_ASK, dist=2.6)
        return sk.img

    return _Problem(
        f"Angles 1 and 2 are complementary. Angle 1 = {a}. Find angle 2.",
        x,
        f"90 - {a} = {x}",
        [180 - a, a, x + 10, x - 10],
        {"a": a},
        draw,
    )


_PARALLEL_SUBTYPES = ("corresponding", "alternate", "co-interior")


def _parallel(rng: random.Random) -> _Problem:
    a = _ang(rng, 25, 155, exclude=(90,))
    sub = rng.choice(_PARALLEL_SUBTYPES)
    x = 180 - a if sub == "co-interior" else a
    # Transversal direction a (math angle).  P on line m (top), Q on line n.
    # Angle 1 at P lies between the left ray and the downward transversal.
    if sub == "corresponding":
        text = f"Lines m and n are parallel. Angle 1 = {a}. Find angle 2, its corresponding angle."
        think = f"corresponding angles are equal, so {a}"
        q_span = (180.0, 180.0 + a)
    elif sub == "alternate":
        text = f"Lines m and n are parallel. Angle 1 = {a}. Find angle 2, its alternate interior angle."
        think = f"alternate interior angles are equal, so {a}"
        q_span = (0.0, float(a))
    else:
        text = f"Lines m and n are parallel. Angle 1 = {a}. Find angle 2, its co-interior angle."
        think = f"co-interior angles add to 180, 180 - {a} = {x}"
        q_span = (float(a), 180.0)

    def draw(size: int) -> Image.Image:
        t = 1.0 / math.tan(math.radians(a))  # horizontal run per unit rise
        P, Q = (0.5 * t, 0.5), (-0.5 * t, -0.5)
        ext = 0.45
        T1, T2 = (P[0] + ext * t, P[1] + ext), (Q[0] - ext * t, Q[1] - ext)
        x0 = min(P[0], Q[0]) - 0.9
        x1 = max(P[0], Q[0]) + 0.9
        sk = _Sketch(size, [(x0, 1.0), (x1, -1.0)])
        sk.line((x0, 0.5), (x1, 0.5))
        sk.line((x0, -0.5), (x1, -0.5))
        sk.line(T1, T2)
        sk.label_at((x1, 0.5), "m", fill=_NAME, offset=(-3.0, -6.0))
        sk.label_at((x1, -0.5), "n", fill=_NAME, offset=(-3.0, -6.0))
        sk.angle(P, 180.0, 180.0 + a, str(a), dist=2.1)
        sk.angle(Q, q_span[0], q_span[1], "?", fill=_ASK, dist=2.1)
        return sk.img

    return _Problem(
        text,
        x,
        think,
        [180 - x, abs(90 - a), x + 10, x - 10],
        {"a": a, "relation": sub},
        draw,
    )


def _isosceles(rng: random.Random) -> _Problem:
    apex = 10 * rng.randint(2, 14)  # 20..140, so the base angle is a multiple of 5
    x = (180 - apex) // 2

    def draw(size: int) -> Image.Image:
        h = 1.0 / math.tan(math.radians(apex / 2.0))
        A, B, C = (0.0, h), (-1.0, 0.0), (1.0, 0.0)
        sk = _Sketch(size, [A, B, C])
        sk.polygon([A, B, C])
        g = (0.0, h / 3.0)
        for p, s in ((A, "A"), (B, "B"), (C, "C")):
            sk.name(p, s, g)
        # tick marks on the equal sides AB and AC
        for p in (B, C):
            m = ((A[0] + p[0]) / 2, (A[1] + p[1]) / 2)
            dx, dy = p[0] - A[0], p[1] - A[1]
            n = math.hypot(dx, dy)
            tick = 0.06 * max(1.0, h)
            nx, ny = -dy / n * tick, dx / n * tick
            sk.line((m[0] - nx, m[1] - ny), (m[0] + nx, m[1] + ny))
        sk.angle(A, 270 - apex / 2.0, 270 + apex / 2.0, str(apex))
        sk.angle(B, 0, x, "?", fill=_ASK)
        return sk.img

    return _Problem(
        f"Triangle ABC is isosceles with AB = AC. Angle A = {apex}. Find angle B.",
        x,
        f"(180 - {apex}) / 2 = {x}",
        [180 - apex, apex, 90 - apex, x + 10, x - 10],
        {"apex": apex},
        draw,
    )


def _right_triangle(rng: random.Random) -> _Problem:
    a = _ang(rng, 15, 75)
    x = 90 - a

    def draw(size: int) -> Image.Image:
        C, A = (0.0, 0.0), (1.0, 0.0)
        B = (0.0, math.tan(math.radians(a)))
        sk = _Sketch(size, [A, B, C])
        sk.polygon([A, B, C])
        g = ((A[0] + B[0] + C[0]) / 3, (A[1] + B[1] + C[1]) / 3)
        for p, s in ((A, "A"), (B, "B"), (C, "C")):
            sk.name(p, s, g)
        sk.right_mark(C, 0)
        sk.angle(A, 180 - a, 180, str(a))
        sk.angle(B, 270, 270 + x, "?", fill=_ASK)
        return sk.img

    return _Problem(
        f"In right triangle ABC, angle C = 90 and angle A = {a}. Find angle B.",
        x,
        f"90 - {a} = {x}",
        [180 - a, a, 180 - x, x + 10, x - 10],
        {"a": a},
        draw,
    )


def _rect_sides(rng: random.Random, lo: int, hi: int) -> tuple[int, int]:
    while True:
        w, h = rng.randint(lo, hi), rng.randint(lo, hi)
        if w != h:
            return w, h


def _rect_draw(w: int, h: int) -> Callable[[int], Image.Image]:
    def draw(size: int) -> Image.Image:
        pts = [(0.0, 0.0), (float(w), 0.0), (float(w), float(h)), (0.0, float(h))]
        sk = _Sketch(size, pts, margin=0.2)
        sk.polygon(pts)
        x0, y0 = sk.px((0.0, 0.0))
        x1, y1 = sk.px((float(w), float(h)))
        sk.text(str(w), ((x0 + x1) / 2, y0 + 6))
        sk.text(str(h), (x1 + 6, (y0 + y1) / 2))
        return sk.img

    return draw


def _rect_perimeter(rng: random.Random) -> _Problem:
    w, h = _rect_sides(rng, 2, 12)
    p = 2 * (w + h)
    return _Problem(
        f"A rectangle has width {w} and height {h}. Find its perimeter.",
        p,
        f"2 * ({w} + {h}) = {p}",
        [w * h, w + h, 2 * w + h, p + 2, p - 2],
        {"w": w, "h": h},
        _rect_draw(w, h),
    )


def _rect_area(rng: random.Random) -> _Problem:
    w, h = _rect_sides(rng, 2, 9)
    s = w * h
    return _Problem(
        f"A rectangle has width {w} and height {h}. Find its area.",
        s,
        f"{w} * {h} = {s}",
        [2 * (w + h), w + h, s + w, s - h, s + 10],
        {"w": w, "h": h},
        _rect_draw(w, h),
    )


def _circle_central(rng: random.Random) -> _Problem:
    a = _ang(rng, 15, 85)
    x = 2 * a

    def draw(size: int) -> Image.Image:
        O = (0.0, 0.0)
        A, B, C = _dir(-90 - a), _dir(-90 + a), _dir(90)
        sk = _Sketch(size, [(-1.0, -1.0), (1.0, 1.0)], margin=0.12)
        sk.circle(O, 1.0)
        sk.line(C, A)
        sk.line(C, B)
        sk.line(O, A)
        sk.line(O, B)
        sk.dot(O)
        for p, s in ((A, "A"), (B, "B"), (C, "C")):
            sk.name(p, s, O)
        sk.angle(C, 270 - a / 2.0, 270 + a / 2.0, str(a))
        sk.angle(O, 270 - a, 270 + a, "?", fill=_ASK, dist=1.9)
        return sk.img

    return _Problem(
        f"In circle O, inscribed angle ACB = {a}. Find central angle AOB.",
        x,
        f"2 * {a} = {x}",
        [a, 180 - a, 180 - x if x != 90 else 45, x + 10, x - 10],
        {"a": a},
        draw,
    )


def _circle_radius(rng: random.Random) -> _Problem:
    d = 2 * rng.randint(2, 15)
    r = d // 2

    def draw(size: int) -> Image.Image:
        O = (0.0, 0.0)
        sk = _Sketch(size, [(-1.0, -1.0), (1.0, 1.0)], margin=0.1)
        sk.circle(O, 1.0)
        sk.line((-1.0, 0.0), (1.0, 0.0))
        sk.dot(O)
        sk.label_at((0.0, 0.0), str(d), offset=(0.0, -7.0))
        return sk.img

    return _Problem(
        f"A circle has diameter {d}. Find its radius.",
        r,
        f"{d} / 2 = {r}",
        [d, 2 * d, r + 1, r - 1, r + 2],
        {"d": d},
        draw,
    )


def _square_side(rng: random.Random) -> _Problem:
    s = rng.randint(2, 15)
    p = 4 * s

    def draw(size: int) -> Image.Image:
        pts = [(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0)]
        sk = _Sketch(size, pts, margin=0.2)
        sk.polygon(pts)
        sk.label_at((0.5, 0.5), str(p))
        x0, y0 = sk.px((0.0, 0.0))
        x1, _ = sk.px((1.0, 0.0))
        sk.text("?", ((x0 + x1) / 2, y0 + 6), fill=_ASK)
        return sk.img

    return _Problem(
        f"A square has perimeter {p}. Find its side length.",
        s,
        f"{p} / 4 = {s}",
        [p // 2, p, s * s if s * s != p else s + 3, s + 1, s - 1],
        {"p": p},
        draw,
    )


_KIND_FUNCS: dict[str, Callable[[random.Random], _Problem]] = {
    "triangle_angle": _triangle_angle,
    "supplementary_angle": _supplementary,
    "vertical_angles": _vertical,
    "complementary_angle": _complementary,
    "parallel_lines": _parallel,
    "isosceles_base_angle": _isosceles,
    "right_triangle_angle": _right_triangle,
    "rectangle_perimeter": _rect_perimeter,
    "rectangle_area": _rect_area,
    "circle_central_angle": _circle_central,
    "circle_radius": _circle_radius,
    "square_side": _square_side,
}

#: Problem kinds, in the order used for uniform sampling.
KINDS: tuple[str, ...] = tuple(_KIND_FUNCS)

_LETTERS = "ABCD"


def _choices(rng: random.Random, gold: int, distractors: Sequence[int]) -> tuple[list[int], int]:
    """Four distinct positive integers including ``gold`` at a random position."""
    pool: list[int] = []
    for d in distractors:
        if d > 0 and d != gold and d not in pool:
            pool.append(d)
    rng.shuffle(pool)
    picked = pool[:3]
    if len(picked) < 3:
        step = 10 if gold >= 20 else 1
        for k in (1, -1, 2, -2, 3, -3, 4, 5, 6, 7):
            d = gold + k * step
            if d > 0 and d != gold and d not in picked:
                picked.append(d)
            if len(picked) == 3:
                break
    pos = rng.randrange(4)
    out = picked[:pos] + [gold] + picked[pos:]
    return out, pos


def _check_count(name: str, v: Any) -> None:
    """A count is a whole number >= 0 (``while len(out) < 1.5`` would give 2 problems, NaN none, True one)."""
    if not is_integer_number(v) or v < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {v!r}")


def _check_stream_args(seed: Any, image_size: Any, min_size: int) -> None:
    """``random.Random(None)`` seeds from the clock (a different data set on every run); sizes are whole pixels.

    The seed is a whole number >= 0: ``random.Random(-s)`` is ``random.Random(s)`` (it seeds with ``abs``), so a
    negative seed would silently repeat another seed's data, and a NaN seed hashes by identity (new data every run).
    """
    if seed is None:
        raise ValueError("seed must be given (None would draw a different data set on every run)")
    if not is_integer_number(seed) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if not is_integer_number(image_size) or image_size < min_size:
        raise ValueError(f"image_size must be an integer >= {min_size}, got {image_size!r}")


def _solution(think: str, answer: str) -> str:
    return f"<think>{think}</think> \\boxed{{{answer}}}"


def iter_geometry(
    seed: int,
    image_size: int = 56,
    mc_fraction: float = 0.5,
    id_prefix: str | None = None,
) -> Iterator[Example]:
    """Endless deterministic stream of synthetic geometry examples."""
    _check_stream_args(seed, image_size, 8)
    if not 0.0 <= mc_fraction <= 1.0:
        raise ValueError(f"mc_fraction must be in [0, 1], got {mc_fraction}")
    rng = random.Random(int(seed))  # a numpy integer is no seed type of random.Random
    prefix = id_prefix if id_prefix is not None else f"geo-s{seed}"
    i = 0
    while True:
        kind = KINDS[rng.randrange(len(KINDS))]
        prob = _KIND_FUNCS[kind](rng)
        answer = str(prob.answer)
        mc = rng.random() < mc_fraction
        text = IMAGE_PLACEHOLDER + prob.text
        choices: list[str] = []
        meta: dict[str, Any] = {"kind": kind, "mc": mc, "params": dict(prob.params)}
        if mc:
            vals, pos = _choices(rng, prob.answer, prob.distractors)
            choices = [str(v) for v in vals]
            text += choices_text(choices)
            meta["answer_letter"] = _LETTERS[pos]
        yield Example(
            id=f"{prefix}-{i:06d}",
            problem=text,
            answer=answer,
            choices=choices,
            images=[prob.draw(image_size)],
            solution=_solution(prob.think, answer),
            meta=meta,
        )
        i += 1


def generate_geometry(
    n: int,
    seed: int,
    image_size: int = 56,
    mc_fraction: float = 0.5,
    *,
    id_prefix: str | None = None,
) -> list[Example]:
    """``n`` deterministic synthetic geometry examples (kinds drawn uniformly).

    The same ``(n, seed, image_size, mc_fraction)`` always gives the same
    texts, answers and image pixels.
    """
    _check_count("n", n)
    stream = iter_geometry(seed, image_size=image_size, mc_fraction=mc_fraction, id_prefix=id_prefix)
    return [next(stream) for _ in range(n)]


def teacher_mistake(kind: str, params: dict[str, Any]) -> tuple[str, int]:
    """A plausible wrong rule for a problem kind (a weak teacher's systematic error): (reasoning, wrong value)."""
    a = params.get("a")
    if kind == "vertical_angles":
        return f"vertical angles add to 180, 180 - {a} = {180 - a}", 180 - a
    if kind == "parallel_lines":
        rel = params["relation"]
        if rel == "co-interior":
            return f"co-interior angles are equal, so {a}", a
        name = "alternate interior" if rel == "alternate" else rel
        return f"{name} angles add to 180, 180 - {a} = {180 - a}", 180 - a
    if kind == "supplementary_angle":
        return f"supplementary angles are equal, so {a}", a
    if kind in ("complementary_angle", "right_triangle_angle", "triangle_angle"):
        return f"180 - {a} = {180 - a}", 180 - a
    if kind == "isosceles_base_angle":
        return f"base angles equal the apex, so {params['apex']}", params["apex"]
    if kind == "rectangle_perimeter":
        w, h = params["w"], params["h"]
        return f"{w} + {h} = {w + h}", w + h
    if kind == "rectangle_area":
        w, h = params["w"], params["h"]
        return f"2 * ({w} + {h}) = {2 * (w + h)}", 2 * (w + h)
    if kind == "circle_central_angle":
        return f"central angles equal inscribed angles, so {a}", a
    if kind == "circle_radius":
        return f"2 * {params['d']} = {2 * params['d']}", 2 * params["d"]
    if kind == "square_side":
        return f"{params['p']} / 2 = {params['p'] // 2}", params["p"] // 2
    raise ValueError(f"no teacher mistake defined for kind {kind!r}")


def with_teacher_noise(examples: Sequence[Example], rate: float, seed: int) -> list[Example]:
    """Copies of ``examples`` whose SFT ``solution`` applies a wrong rule for a seeded ``rate`` share of them.

    Simulates SFT data from a weak teacher; gold ``answer`` fields are untouched, so a verifiable reward can later
    correct what SFT taught. Problems, images and ids are unchanged.
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"teacher noise rate must be in [0, 1], got {rate}")
    rng = random.Random(_derive_seed(seed, "teacher-noise"))
    out = []
    for ex in examples:
        # a figure problem (figures.py, it has a "style") may share a kind name (rectangle_area) but has no w / h
        if rng.random() < rate and ex.meta.get("kind") in KINDS and "style" not in ex.meta:
            think, wrong = teacher_mistake(ex.meta["kind"], ex.meta["params"])
            if str(wrong) == ex.answer:  # the wrong rule happens to give the right value (e.g. apex 60)
                out.append(ex)
                continue
            ex = dataclasses.replace(ex, solution=_solution(think, str(wrong)), meta={**ex.meta, "teacher_wrong": True})
        out.append(ex)
    return out


def _derive_seed(seed: int, tag: str) -> int:
    h = hashlib.sha256(f"mmevo-geometry:{seed}:{tag}".encode()).digest()
    return int.from_bytes(h[:8], "big")


def split_train_heldout(
    n_train: int,
    n_heldout: int,
    seed: int,
    image_size: int = 56,
    mc_fraction: float = 0.5,
) -> tuple[list[Example], list[Example]]:
    """A train set and a held-out set that share no problem text.

    The two sets come from different seeds derived from ``seed``; held-out
    candidates whose problem text also occurs in the train set are dropped
    (the answer spaces are small, so identical questions do recur).  Ids are
    ``train-NNNNNN`` and ``heldout-NNNNNN``.
    """
    _check_count("n_train", n_train)
    _check_count("n_heldout", n_heldout)
    train = generate_geometry(
        n_train, _derive_seed(seed, "train"), image_size, mc_fraction, id_prefix="train"
    )
    seen = {ex.problem for ex in train}
    stream = iter_geometry(
        _derive_seed(seed, "heldout"), image_size=image_size, mc_fraction=mc_fraction, id_prefix="heldout-raw"
    )
    heldout: list[Example] = []
    tries = 0
    max_tries = 200 * max(n_heldout, 1) + 10_000
    while len(heldout) < n_heldout:
        ex = next(stream)
        tries += 1
        if tries > max_tries:
            raise ValueError(
                f"could not find {n_heldout} held-out problems unseen in {n_train} train problems "
                f"(got {len(heldout)} after {tries - 1} candidates); lower n_train or raise mc_fraction"
            )
        if ex.problem in seen:
            continue
        ex.id = f"heldout-{len(heldout):06d}"
        heldout.append(ex)
    return train, heldout


# --------------------------------------------------------------------------
# Writers (Geometry3K hub schema)
# --------------------------------------------------------------------------

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def _safe_name(s: str) -> str:
    return _SAFE.sub("_", s) or "_"


def image_to_png_bytes(img: Image.Image) -> bytes:
    """PNG encoding of one image (RGB), deterministic for a given Pillow."""
    buf = io.BytesIO()
    img.convert("RGB").save(buf, format="PNG")
    return buf.getvalue()


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _jsonable_meta(meta: dict[str, Any]) -> dict[str, Any]:
    # Round-trip through JSON so non-serialisable values fail loudly here.
    return json.loads(json.dumps(meta, sort_keys=True))


def write_hub_jsonl(examples: Sequence[Example], out_dir: str | Path) -> Path:
    """Write ``out_dir/data.jsonl`` plus ``out_dir/images/<id>_<k>.png``.

    Rows follow the Geometry3K hub schema (``id``, ``images`` as paths
    relative to ``out_dir``, ``problem``, ``answer``, ``choices``,
    ``solution``) plus a ``meta`` object.  Every file is written to a
    temporary name and renamed into place.  Returns the jsonl path.
    """
    out = Path(out_dir)
    (out / "images").mkdir(parents=True, exist_ok=True)
    lines = []
    used: set[str] = set()
    for ex in examples:
        stem = _safe_name(ex.id)
        if stem in used:
            raise ValueError(f"duplicate example id {ex.id!r} (file stem {stem!r})")
        used.add(stem)
        rels = []
        for k, img in enumerate(ex.images):
            rel = f"images/{stem}_{k}.png"
            _atomic_write_bytes(out / rel, image_to_png_bytes(img))
            rels.append(rel)
        row = {
            "id": ex.id,
            "images": rels,
            "problem": ex.problem,
            "answer": ex.answer,
            "choices": list(ex.choices),
            "solution": ex.solution,
            "meta": _jsonable_meta(ex.meta),
        }
        lines.append(json.dumps(row, ensure_ascii=False))
    path = out / "data.jsonl"
    _atomic_write_bytes(path, ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8"))
    return path


def _hf_features_metadata() -> bytes:
    """Schema metadata that lets ``datasets`` decode the images column as images."""
    string = {"dtype": "string", "_type": "Value"}
    feats = {
        "id": string,
        "images": {"feature": {"_type": "Image"}, "_type": "Sequence"},
        "problem": string,
        "answer": string,
        "choices": {"feature": string, "_type": "Sequence"},
        "solution": string,
        "meta": string,
    }
    return json.dumps({"info": {"features": feats}}).encode("utf-8")


def write_hub_parquet(examples: Sequence[Example], path: str | Path) -> Path:
    """Write one parquet file like the Hugging Face hub export.

    Images are stored as ``[{"bytes": <png>, "path": None}]``; ``meta`` is a
    JSON string column.  Written to a temporary name and renamed into place.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    img_t = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("images", pa.list_(img_t)),
            ("problem", pa.string()),
            ("answer", pa.string()),
            ("choices", pa.list_(pa.string())),
            ("solution", pa.string()),
            ("meta", pa.string()),
        ],
        metadata={b"huggingface": _hf_features_metadata()},
    )
    cols: dict[str, list[Any]] = {name: [] for name in schema.names}
    for ex in examples:
        cols["id"].append(ex.id)
        cols["images"].append([{"bytes": image_to_png_bytes(im), "path": None} for im in ex.images])
        cols["problem"].append(ex.problem)
        cols["answer"].append(ex.answer)
        cols["choices"].append(list(ex.choices))
        cols["solution"].append(ex.solution)
        cols["meta"].append(json.dumps(_jsonable_meta(ex.meta), sort_keys=True))
    table = pa.table(cols, schema=schema)
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return dest
