"""The figure tasks (``data.train=figures``): the values are in the image and nowhere else."""

from __future__ import annotations

import re

import pytest
from PIL import Image

from mmevo.data.figures import (FIGURE_KINDS, blank_images, draw_figure, generate_figures, read_figure,
                                shuffled_images, split_figures, text_only_chance)
from mmevo.data.schema import IMAGE_PLACEHOLDER


@pytest.fixture(scope="module")
def split():
    return split_figures(1500, 300, seed=0)


def _answer_from_pixels(ex) -> int:
    """Solve a problem from its image and the kind's rule only (the text has no values): the oracle that proves the
    figure carries everything the answer needs."""
    marks = read_figure(ex.images[0], ex.meta["style"])
    red, blue = marks["red"][1], marks["blue"][1]
    kind, text = ex.meta["kind"], ex.problem
    if kind in ("digit_read", "dots_read", "bar_read"):
        return red if "red number?" in text or "red dots are" in text or "red bar?" in text else blue
    if kind in ("digit_sum", "dots_total", "bar_sum"):
        return red + blue
    if kind in ("digit_diff", "bar_diff"):
        return abs(red - blue)
    assert kind == "rectangle_area"
    return red * blue


def test_text_holds_no_value_and_the_image_holds_every_one(split):
    train, held = split
    assert {ex.meta["kind"] for ex in train} == set(FIGURE_KINDS)
    for ex in train + held:
        assert ex.problem.startswith(IMAGE_PLACEHOLDER) and not ex.choices
        assert not re.search(r"\d", ex.problem), ex.problem  # no digit at all in the text
        marks = {colour: tuple(m) for colour, m in ex.meta["params"].items()}
        assert read_figure(ex.images[0], ex.meta["style"]) == marks
        assert marks["red"][0] != marks["blue"][0]  # two quadrants
        assert str(_answer_from_pixels(ex)) == ex.answer
        # the worked solution reads the values first, then computes: \boxed{answer} at the end
        assert ex.solution.endswith(f"\\boxed{{{ex.answer}}}")


def test_text_alone_is_at_chance(split):
    """The best text-only guess (the most frequent train answer for the same text) stays near chance on every kind,
    while a reader of the pixels is always right."""
    train, held = split
    chance = text_only_chance(train, held)
    assert chance["accuracy"] < 0.2
    assert all(a < 0.4 for a in chance["by_kind"].values()), chance
    assert all(str(_answer_from_pixels(ex)) == ex.answer for ex in held)


def test_blank_and_shuffled_controls(split):
    _, held = split
    blank = blank_images(held)
    assert all(read_figure(ex.images[0], ex.meta["style"]) == {} for ex in blank)
    assert [ex.problem for ex in blank] == [ex.problem for ex in held]
    shuf = shuffled_images(held, seed=1)
    assert [ex.answer for ex in shuf] == [ex.answer for ex in held]
    for a, b in zip(held, shuf):
        assert a.meta["style"] == b.meta["style"] and b.images[0] is not a.images[0]
    # a pixel reader on shuffled images answers from another problem's values: close to chance
    hits = sum(str(_answer_from_pixels(ex)) == ex.answer for ex in shuf) / len(shuf)
    assert hits < 0.25


def test_determinism_dedup_and_scaling(split):
    train, held = split
    again = generate_figures(10, seed=123)
    assert [e.problem for e in again] == [e.problem for e in generate_figures(10, seed=123)]
    assert again[3].images[0].tobytes() == generate_figures(4, seed=123)[3].images[0].tobytes()
    def key(e):
        return e.problem, tuple(e.meta["params"]["red"]), tuple(e.meta["params"]["blue"])

    keys = {key(e) for e in train}
    held_keys = [key(e) for e in held]
    assert not keys & set(held_keys) and len(set(held_keys)) == len(held_keys)
    assert [e.id for e in held[:2]] == ["heldout-000000", "heldout-000001"]
    for size in (28, 112):  # layouts scale with the image
        for style in ("digits", "dots", "bars"):
            marks = {"red": (3, 8), "blue": (0, 1)}
            assert read_figure(draw_figure(style, marks, size), style) == marks
    with pytest.raises(ValueError, match="image_size"):
        generate_figures(1, seed=0, image_size=20)
    with pytest.raises(ValueError, match="style"):
        draw_figure("pie", {"red": (0, 1)})
    assert isinstance(train[0].images[0], Image.Image) and train[0].images[0].size == (56, 56)
