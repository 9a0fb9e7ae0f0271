"""Shared fixtures: the tiny models are built once per test session into a temp dir (no hub, no network)."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_vl_path(tmp_path_factory):
    from mmevo.models.tiny import build_tiny_qwen2_5_vl

    return build_tiny_qwen2_5_vl(tmp_path_factory.mktemp("models") / "tiny-vl")


@pytest.fixture(scope="session")
def tiny_text_path(tmp_path_factory):
    from mmevo.models.tiny import build_tiny_qwen2

    return build_tiny_qwen2(tmp_path_factory.mktemp("models") / "tiny-text")


def randomize(model, std=0.3, seed=0):
    """Give a freshly initialised tiny model varied outputs (default init makes every logit nearly equal)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=g) * std)
    return model


def start_render_pool(**kw):
    """A render.RenderPool, or a skip where the full sandbox cannot start (no root / no Landlock in a container)."""
    from render import RenderPool, RenderPoolError

    try:
        return RenderPool(**kw)
    except RenderPoolError as e:
        pytest.skip(f"full sandbox unavailable here: {e}")


@pytest.fixture(scope="module")
def render_pool():
    p = start_render_pool(workers=2)
    yield p
    p.close()
