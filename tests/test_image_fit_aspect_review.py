"""Data review: ``fit_pixels`` floored both sides, which takes a larger share off the short side, so an image the
loader had accepted (at most 200:1) could come out past the 200:1 that Qwen2-VL's ``smart_resize`` refuses — with
EasyR1's ``data.min_pixels=262144`` a 3990x20 figure became 7231x36 (200.9:1), and at 1,000,000 pixels a 20000x100 one
became 14142x70 (202:1) — and training or evaluation failed at the step that encoded it, naming no example."""

from __future__ import annotations

import math
import random

import pytest
from PIL import Image

from mmevo.data.images import MAX_ASPECT_RATIO, _scaled_size, aspect_problem, fit_pixels

NEAR_THE_BOUND = [((3990, 20), 262144, 4194304, (7182, 36)), ((20000, 100), 0, 1_000_000, (14000, 70)),
                  ((40000, 200), 0, 4194304, (28800, 144)), ((20, 3990), 262144, 0, (36, 7182))]


@pytest.mark.parametrize("size,min_pixels,max_pixels,expected", NEAR_THE_BOUND)
def test_an_accepted_aspect_ratio_stays_accepted_after_fitting(size, min_pixels, max_pixels, expected):
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    image = Image.new("L", size)
    assert aspect_problem(image) is None
    out = fit_pixels(image, min_pixels, max_pixels)
    assert out.size == expected and aspect_problem(out) is None
    smart_resize(out.height, out.width)  # the processor's own check: raised "absolute aspect ratio" before


def test_fitting_keeps_easyr1_sizes_within_the_bound_and_never_passes_it():
    # the size rule fit_pixels resizes to, over many shapes up to 200:1 (resizing each would take minutes)
    rng = random.Random(7)
    for _ in range(20000):
        short = rng.randint(1, 300)
        long_ = rng.randint(short, short * MAX_ASPECT_RATIO)
        w, h = (long_, short) if rng.random() < 0.5 else (short, long_)
        target = rng.choice([262144, 1_000_000, 4194304, 50_000, 3136])
        factor = math.sqrt(target / (w * h))
        out = _scaled_size(w, h, factor)
        floored = (max(1, int(w * factor)), max(1, int(h * factor)))  # EasyR1's rule
        if max(floored) <= MAX_ASPECT_RATIO * min(floored):
            assert out == floored, ((w, h), target, out)  # within the bound: EasyR1's size, pixel for pixel
        else:  # past it: shortened to the original ratio, never above it
            assert max(out) / min(out) <= max(w, h) / min(w, h) + 1e-12, ((w, h), target, out)
        assert max(out) <= MAX_ASPECT_RATIO * min(out), ((w, h), target, out)
        assert out[0] * out[1] <= max(target, 1) or factor >= 1 and min(out) == 1, ((w, h), target, out)
        if min(out) > 1:  # close to the target: flooring costs each side at most a pixel, the cap the long side one
            # short-side pixel's worth, so at most about three rows of the short side in all
            assert out[0] * out[1] >= target * (1 - 3 / min(out)), ((w, h), target, out)


def test_ordinary_sizes_scale_as_before():
    # EasyR1's floor of both sides where it does not raise the aspect ratio
    assert fit_pixels(Image.new("L", (4000, 1000)), 0, 1_000_000).size == (2000, 500)
    assert fit_pixels(Image.new("L", (56, 28)), 262144, 4194304).size == (724, 362)
    assert fit_pixels(Image.new("L", (28, 56)), 262144, 4194304).size == (362, 724)
