"""Render jobs start from one fixed RNG state. Each job child is forked from its worker's zygote: numpy's global RNG was
the zygote's (seeded from the OS when it imported numpy, so one state per worker start) and Python's ``random``
reseeds itself from the OS after a fork, so the same program drawing random numbers rendered another image on each
worker, each run, or each job."""

import io
import random
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import start_render_pool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="render sandbox is Linux-only")

from render import RenderJob  # noqa: E402
from render.worker import JOB_RNG_SEED  # noqa: E402

NOISE = """
import random
import numpy as np
from PIL import Image
pixels = np.random.randint(0, 256, (8, 8, 3)).astype(np.uint8)
pixels[0, 0] = [random.randrange(256) for _ in range(3)]
Image.fromarray(pixels).save("out.png")
"""
# draws from both RNGs and reseeds them, as a program may: none of it may reach a later job
BURN = """
import random
import numpy as np
import matplotlib.pyplot as plt
np.random.rand(1000); random.random()
np.random.seed(123); random.seed(9); np.random.rand(7); random.random()
plt.imshow(np.random.rand(8, 8))
"""


def _expected() -> np.ndarray:
    pixels = np.random.RandomState(JOB_RNG_SEED).randint(0, 256, (8, 8, 3)).astype(np.uint8)
    r = random.Random(JOB_RNG_SEED)
    pixels[0, 0] = [r.randrange(256) for _ in range(3)]
    return pixels


def _pixels(result) -> np.ndarray:
    assert result.ok, result
    return np.asarray(Image.open(io.BytesIO(result.png)).convert("RGB"))


def test_a_program_using_random_and_numpy_renders_the_same_image_on_warm_and_fresh_workers(render_pool):
    want = _expected()
    assert (_pixels(render_pool.render(RenderJob(NOISE))) == want).all()
    assert all(r.ok for r in render_pool.render_many([RenderJob(BURN)] * 4))  # both workers ran RNG-hungry jobs
    again = render_pool.render_many([RenderJob(NOISE)] * 4)  # spread over both workers
    assert all((_pixels(r) == want).all() for r in again)
    fresh = start_render_pool(workers=1)  # another zygote: numpy's state was drawn anew from the OS
    try:
        assert (_pixels(fresh.render(RenderJob(NOISE))) == want).all()
    finally:
        fresh.close()
