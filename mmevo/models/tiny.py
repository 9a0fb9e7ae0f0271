"""Build tiny Qwen2.5-VL and Qwen2 models locally (no hub access needed).

The embedded default of mmevo is a real Qwen2.5-VL architecture at toy size: a byte-level BPE tokenizer trained here
on a small corpus, with Qwen's special tokens and chat template, Qwen's image processor (PIL backend) and a model of a
few million parameters. Everything is saved with ``save_pretrained`` and reloaded through the Auto classes, so the
same loading code serves the tiny model and a real checkpoint.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable

import torch

# Qwen2's special tokens, in Qwen's order. The vision tokens are what the processor and the model look for.
QWEN_SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# A Qwen2.5-VL style chat template (system default, image/video placeholders inside user turns).
QWEN_VL_CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}"
    "{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}"
    "{% endif %}"
    "{% endfor %}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# Qwen2's pre-tokenisation: digits one by one (helps arithmetic), words with a leading space, punctuation runs.
QWEN_PRETOKENIZE_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


@dataclass
class TinyVLSpec:
    """Sizes of the tiny Qwen2.5-VL; defaults give about 1.1 M parameters."""

    vocab_size: int = 1024  # BPE vocabulary incl. special tokens
    hidden_size: int = 128  # text hidden size
    intermediate_size: int = 384  # text MLP size
    num_hidden_layers: int = 4  # text layers
    num_attention_heads: int = 4  # text heads (head_dim = 32)
    num_key_value_heads: int = 2  # GQA like Qwen
    vision_hidden_size: int = 64  # ViT width
    vision_depth: int = 2  # ViT layers
    vision_heads: int = 2  # ViT heads
    image_pixels: int = 56 * 56  # images are resized to about this many pixels: 56x56 -> 4x4 patches -> 4 tokens
    max_position_embeddings: int = 2048  # rope table length
    seed: int = 0  # weight init seed


# "tiny-wide" (the demo's model, about 4.2 M parameters): twice the width, so that reading values off a figure is learnt
# in a few hundred SFT steps; the 128-wide default never learnt it in 1,000 steps (it learns copying from the text only)
WIDE_VL_SPEC = TinyVLSpec(hidden_size=256, intermediate_size=768, num_attention_heads=8, num_key_value_heads=4,
                          vision_hidden_size=128, vision_heads=4)


def build_tiny(name: str, out_dir: str | Path) -> Path:
    """The embedded model ``name`` (a key of ``mmevo.config.TINY_ALIASES``) built in ``out_dir``, or reused there."""
    if name == "tiny":
        return build_tiny_qwen2_5_vl(out_dir)
    if name == "tiny-wide":
        return build_tiny_qwen2_5_vl(out_dir, spec=WIDE_VL_SPEC, corpus=wide_corpus)
    if name == "tiny-text":
        return build_tiny_qwen2(out_dir)
    raise ValueError(f"unknown embedded model {name!r}")


def wide_corpus() -> list[str]:
    """The tokenizer corpus of "tiny-wide": the default one plus the figure tasks' texts (mmevo.data.figures), so their
    words ("red", "blue", "bar", "dots", ...) are single tokens, not byte runs."""
    from mmevo.data.figures import generate_figures

    texts = default_corpus()
    for ex in generate_figures(3000, seed=12345):
        texts += [ex.problem.replace("<image>", ""), ex.solution]
    return texts


def default_corpus() -> list[str]:
    """Text the tokenizer is trained on: the synthetic geometry problems with solutions, plus generic prose."""
    from mmevo.data.synthetic import generate_geometry

    texts = []
    for ex in generate_geometry(2000, seed=12345):
        texts.append(ex.problem.replace("<image>", ""))
        if ex.solution:
            texts.append(ex.solution)
    texts += [
        "You are a helpful assistant.",
        "Please reason step by step, and put your final answer within \\boxed{}.",
        "You FIRST think about the reasoning process as an internal monologue and then provide the final answer. "
        "The reasoning process MUST BE enclosed within <think> </think> tags. "
        "The final answer MUST BE put in \\boxed{}.",
        "Answer: The answer is (A) (B) (C) (D) (E). Choices: Hint: Question: Find x. Find y. Find the measure.",
        "0 1 2 3 4 5 6 7 8 9 10 0.5 \\frac{1}{2} \\sqrt{2} \\pi ^\\circ degrees",
    ]
    return texts


def train_tokenizer(corpus: Iterable[str], vocab_size: int):
    """Train a byte-level BPE with Qwen's pre-tokeniser and special tokens; returns a transformers tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PRETOKENIZE_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=QWEN_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    tok.train_from_iterator(list(corpus), trainer=trainer)
    special = {t: tok.token_to_id(t) for t in QWEN_SPECIAL_TOKENS}
    # special tokens are never split and are skipped on decode (like Qwen's tokenizer.json)
    from tokenizers import AddedToken

    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL_TOKENS])
    assert all(tok.token_to_id(t) == i for t, i in special.items())
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
        padding_side="left",  # must be a constructor argument to survive save/load
        chat_template=QWEN_VL_CHAT_TEMPLATE,
        model_max_length=32768,
        extra_special_tokens={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
                              "vision_bos_token": "<|vision_start|>", "vision_eos_token": "<|vision_end|>"},
    )


SPEC_FILE = "mmevo_tiny_spec.json"  # written last: its presence marks a finished build
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


class IncompleteModelDir(FileNotFoundError):
    """A cached tiny-model directory that a build did not finish (a FileNotFoundError: the CLI reports it plainly)."""


def missing_parts(model_dir: str | Path) -> list[str]:
    """What a finished tiny-model build has and ``model_dir`` lacks; empty when it is complete."""
    d = Path(model_dir)
    missing = [f for f in ("config.json", "tokenizer_config.json") if not (d / f).is_file()]
    if not any((d / f).is_file() for f in _WEIGHT_FILES):
        missing.append("weights (model.safetensors)")
    if not (d / SPEC_FILE).is_file():
        missing.append(SPEC_FILE)
    return missing


def _save_model(model, out: Path) -> None:
    """``save_pretrained`` that writes on any rank.

    Once torch.distributed is initialised, transformers writes model files on global rank 0 only; the tiny model is
    built whole by the first rank of each node (see ``mmevo.recipes.resolve_model_path``), which may be any rank.
    """
    if hasattr(model, "should_save_on_this_rank"):
        model.should_save_on_this_rank = lambda is_main_process: is_main_process
    model.save_pretrained(out)


def _atomic_save_dir(build, out_dir: Path) -> Path:
    """Build into a temp dir next to ``out_dir`` and rename, so that ``out_dir`` is either absent or complete.

    A complete ``out_dir`` is reused as is. A non-empty but incomplete one (an interrupted build, or one by an older
    mmevo under torchrun, whose non-zero ranks wrote no weights) is refused with a hint to delete it; an empty one is
    replaced. Processes may build concurrently (nodes that share the cache): each builds into its own temp dir, the
    first rename wins, and the others drop their build (the builds are seeded, hence identical) and use the winner's.
    """
    if out_dir.is_dir() and any(out_dir.iterdir()):
        return _checked(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp: Path | None = Path(tempfile.mkdtemp(prefix=out_dir.name + ".tmp", dir=out_dir.parent))
    try:
        build(tmp)
        missing = missing_parts(tmp)
        if missing:
            raise RuntimeError(f"building {out_dir} wrote no {', '.join(missing)} (in {tmp})")
        try:
            os.rename(tmp, out_dir)  # atomic; replaces an empty dir, fails on a non-empty one
            tmp = None
        except OSError:
            if not (out_dir.is_dir() and any(out_dir.iterdir())):
                raise
            # another process finished first: its build is used
    finally:
        if tmp is not None:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
    return _checked(out_dir)


def _checked(out_dir: Path) -> Path:
    missing = missing_parts(out_dir)
    build_files = ("config.json", "tokenizer_config.json", SPEC_FILE, *_WEIGHT_FILES)
    if not any((out_dir / f).exists() for f in build_files):  # no part of a build at all: someone's own directory
        # (`mmevo build-tiny data/`), which the advice below to delete it would have cost its files
        held = sorted(f.name for f in out_dir.iterdir())
        raise IncompleteModelDir(
            f"{out_dir} is not a tiny model directory: it holds other files ({', '.join(held[:5])}"
            f"{', ...' if len(held) > 5 else ''}) and none of a build's; give a new or empty directory")
    if missing:
        raise IncompleteModelDir(
            f"the cached tiny model {out_dir} is incomplete (no {', '.join(missing)}): a build that was interrupted, "
            "or one from an older mmevo in a multi-process run. Delete that directory and run again; it is rebuilt.")
    return out_dir


def _same_spec(out_dir: Path, spec) -> Path:
    """Refuse a cached build of other sizes (or of the other architecture): reusing it would silently give another
    model than the one asked for."""
    cached = json.loads((out_dir / SPEC_FILE).read_text())
    if cached != asdict(spec):
        raise ValueError(f"the cached tiny model {out_dir} was built with {cached}, not with the requested "
                         f"{type(spec).__name__} {asdict(spec)}: delete that directory or build into another one")
    return out_dir


def build_tiny_qwen2_5_vl(out_dir: str | Path, spec: TinyVLSpec | None = None,
                          corpus: Iterable[str] | Callable[[], Iterable[str]] | None = None) -> Path:
    """Create a tiny Qwen2.5-VL (tokenizer, image processor, processor, weights) in ``out_dir``; reuse it if present.

    ``corpus`` (texts, or a function returning them: only called when the model is built) trains the tokenizer."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from mmevo.models.processor import ImageOnlyQwen2_5_VLProcessor

    spec = spec or TinyVLSpec()

    def build(tmp: Path) -> None:
        texts = corpus() if callable(corpus) else corpus
        tokenizer = train_tokenizer(texts if texts is not None else default_corpus(), spec.vocab_size)
        ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN_SPECIAL_TOKENS}
        head_dim = spec.hidden_size // spec.num_attention_heads
        # mrope splits head_dim/2 rotary frequencies over (temporal, height, width); Qwen uses 16/24/24 of 64
        half = head_dim // 2
        mrope_section = [2 * (half // 8), 3 * (half // 8), half - 5 * (half // 8)]
        assert sum(mrope_section) == head_dim // 2
        config = Qwen2_5_VLConfig(
            text_config=dict(
                vocab_size=len(tokenizer),
                hidden_size=spec.hidden_size,
                intermediate_size=spec.intermediate_size,
                num_hidden_layers=spec.num_hidden_layers,
                num_attention_heads=spec.num_attention_heads,
                num_key_value_heads=spec.num_key_value_heads,
                max_position_embeddings=spec.max_position_embeddings,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": mrope_section},
                tie_word_embeddings=True,
                bos_token_id=ids["<|endoftext|>"],
                eos_token_id=ids["<|im_end|>"],
                pad_token_id=ids["<|endoftext|>"],
            ),
            vision_config=dict(
                depth=spec.vision_depth,
                hidden_size=spec.vision_hidden_size,
                intermediate_size=spec.vision_hidden_size * 2,
                num_heads=spec.vision_heads,
                out_hidden_size=spec.hidden_size,  # merger projects straight into the text width
                patch_size=14,
                spatial_merge_size=2,
                temporal_patch_size=2,
                window_size=56,
                fullatt_block_indexes=list(range(spec.vision_depth)),
            ),
            image_token_id=ids["<|image_pad|>"],
            video_token_id=ids["<|video_pad|>"],
            vision_start_token_id=ids["<|vision_start|>"],
            vision_end_token_id=ids["<|vision_end|>"],
            tie_word_embeddings=True,
        )
        torch.manual_seed(spec.seed)
        model = Qwen2_5_VLForConditionalGeneration(config)
        model.generation_config.eos_token_id = [ids["<|im_end|>"], ids["<|endoftext|>"]]
        model.generation_config.pad_token_id = ids["<|endoftext|>"]
        image_processor = Qwen2VLImageProcessorPil(
            min_pixels=spec.image_pixels, max_pixels=spec.image_pixels, patch_size=14, merge_size=2, temporal_patch_size=2
        )
        processor = ImageOnlyQwen2_5_VLProcessor(
            image_processor=image_processor, tokenizer=tokenizer, chat_template=QWEN_VL_CHAT_TEMPLATE
        )
        _save_model(model, tmp)
        processor.save_pretrained(tmp)
        (tmp / SPEC_FILE).write_text(json.dumps(asdict(spec), indent=2))

    return _same_spec(_atomic_save_dir(build, Path(out_dir)), spec)


@dataclass
class TinyTextSpec:
    """Sizes of the tiny text-only Qwen2 model."""

    vocab_size: int = 1024
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 2048
    seed: int = 0


def build_tiny_qwen2(out_dir: str | Path, spec: TinyTextSpec | None = None, corpus: Iterable[str] | None = None) -> Path:
    """Create a tiny text-only Qwen2 causal LM with the same tokenizer recipe; reuse it if present."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    spec = spec or TinyTextSpec()

    def build(tmp: Path) -> None:
        tokenizer = train_tokenizer(corpus if corpus is not None else default_corpus(), spec.vocab_size)
        config = Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=spec.hidden_size,
            intermediate_size=spec.intermediate_size,
            num_hidden_layers=spec.num_hidden_layers,
            num_attention_heads=spec.num_attention_heads,
            num_key_value_heads=spec.num_key_value_heads,
            max_position_embeddings=spec.max_position_embeddings,
            tie_word_embeddings=True,
            bos_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
        torch.manual_seed(spec.seed)
        model = Qwen2ForCausalLM(config)
        model.generation_config.eos_token_id = [tokenizer.eos_token_id, tokenizer.pad_token_id]
        _save_model(model, tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / SPEC_FILE).write_text(json.dumps(asdict(spec), indent=2))

    return _same_spec(_atomic_save_dir(build, Path(out_dir)), spec)
