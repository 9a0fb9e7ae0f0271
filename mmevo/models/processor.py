"""Qwen2.5-VL processor that works without torchvision (CPU machines, CI).

The stock ``Qwen2_5_VLProcessor`` wants a video processor, and the video processor needs torchvision, which has no
CPU wheel that imports beside CPU torch. We only ever feed still images, so this subclass leaves the video slot empty.
It is registered with ``AutoProcessor`` so that ``AutoProcessor.from_pretrained`` on a saved tiny model returns it
(otherwise AutoProcessor silently falls back to returning only the tokenizer).
"""

from __future__ import annotations

import importlib.util

from transformers import AutoProcessor, Qwen2_5_VLConfig
from transformers.models.qwen2_5_vl.processing_qwen2_5_vl import Qwen2_5_VLProcessor


def torchvision_available() -> bool:
    """True when torchvision imports with its compiled ops (it is absent or broken on CPU-only installs).

    A CUDA-only torchvision next to CPU torch fails at import, or imports without its ops once the vLLM engine's
    shim (``mmevo.torchvision_shim``) is in effect: both count as unavailable.
    """
    if importlib.util.find_spec("torchvision") is None:
        return False
    try:
        import torchvision.extension
    except Exception:
        return False
    return bool(torchvision.extension._has_ops())


class ImageOnlyQwen2_5_VLProcessor(Qwen2_5_VLProcessor):
    """Qwen2.5-VL processor with no video processor: images and text only."""

    def __init__(self, image_processor=None, tokenizer=None, video_processor=None, chat_template=None, **kwargs):
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)

    @classmethod
    def get_attributes(cls):
        return ["image_processor", "tokenizer"]


def register_cpu_processor() -> None:
    """Make AutoProcessor build the image-only processor for Qwen2.5-VL configs when torchvision is missing."""
    if not torchvision_available():
        AutoProcessor.register(Qwen2_5_VLConfig, ImageOnlyQwen2_5_VLProcessor, exist_ok=True)
