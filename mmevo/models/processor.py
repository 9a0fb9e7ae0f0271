"""Qwen2.5-VL processor that works without torchvision (CPU machines, CI).

The stock ``Qwen2_5_VLProcessor`` wants a video processor, and the video processor needs torchvision, which has no
CPU wheel that imports beside CPU torch. We only ever feed still images, so this subclass leaves the video slot empty.
``load_vl_processor`` builds it directly for checkpoints saved with it (mmevo's tiny models) and for Qwen2.5-VL
without torchvision. Not through ``AutoProcessor``: that resolves a saved ``processor_class`` by name among
transformers' own classes and, for a name it does not know, silently returns only the tokenizer (registering the class
with it helped on transformers 5.19 without torchvision only; not on 5.17, nor on any machine with a working
torchvision, i.e. every GPU machine).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from transformers import AutoProcessor
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


def _saved_processor_class(name_or_path: str) -> str | None:
    """The ``processor_class`` a local checkpoint was saved with (None for a hub id or a checkpoint without one)."""
    for fname in ("processor_config.json", "preprocessor_config.json", "tokenizer_config.json"):
        f = Path(name_or_path) / fname
        if f.is_file():
            cls = json.loads(f.read_text()).get("processor_class")
            if cls:
                return cls
    return None


def load_vl_processor(name_or_path: str, model_type: str):
    """The image-text processor of a VL checkpoint: mmevo's image-only one where the checkpoint was saved with it, or
    for Qwen2.5-VL without torchvision; AutoProcessor's otherwise. Raises ValueError when what comes back is not an
    image-text processor (a tokenizer alone would fail later, far from the cause)."""
    saved, torchvision = _saved_processor_class(name_or_path), torchvision_available()
    if saved == ImageOnlyQwen2_5_VLProcessor.__name__ or (model_type == "qwen2_5_vl" and not torchvision):
        processor = ImageOnlyQwen2_5_VLProcessor.from_pretrained(name_or_path)
    else:
        processor = AutoProcessor.from_pretrained(name_or_path)
    if getattr(processor, "tokenizer", None) is None or getattr(processor, "image_processor", None) is None:
        raise ValueError(
            f"{name_or_path}: AutoProcessor gave a {type(processor).__name__}, not an image-text processor with a "
            f"tokenizer and an image processor (saved processor_class: {saved!r}; torchvision usable: {torchvision})")
    return processor
