"""Load a policy (Qwen2.5-VL or text-only Qwen2/Qwen3) and its processor by local path or hub id."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from mmevo.models.processor import load_vl_processor

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class LoadedModel:
    """A model with its processor (VL) or tokenizer (text); ``is_vl`` says which."""

    model: torch.nn.Module
    processor: object  # Qwen2_5_VLProcessor (VL) or a tokenizer (text-only)
    tokenizer: object
    is_vl: bool
    path: str


def resolve_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise ValueError(f"model.dtype={name!r} is not one of {sorted(DTYPES)}")
    return DTYPES[name]


def check_device(key: str, device: str) -> None:
    """``device`` exists on this machine. torch finds out only at ``model.to(device)``, after the whole checkpoint was
    read, with an AssertionError ("Torch not compiled with CUDA enabled") or RuntimeError that names no setting."""
    d = torch.device(device)
    if d.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0 or (d.index is not None and d.index >= n):
            raise ValueError(f"{key}={device}: this machine has {n} visible CUDA device(s); use {key}=cpu or another "
                             "device")
    elif d.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{key}={device}: MPS is not available on this machine; use {key}=cpu")


def _has_weight_files(model_dir: Path) -> bool:
    """Whether a checkpoint directory holds weights transformers can read (safetensors or PyTorch .bin, whole or
    sharded with an index), or is a PEFT adapter (``adapter_config.json``), which names its base model."""
    if (model_dir / "adapter_config.json").is_file():
        return True
    # not any *.bin: a Trainer's training_args.bin or an optimizer.bin beside a config.json is no weights
    return any(f.suffix == ".safetensors" or (f.name.startswith("pytorch_model") and f.suffix == ".bin")
               or f.name.endswith(".index.json") for f in model_dir.iterdir())


def _check_source(name_or_path: str) -> None:
    """Fail early with a clear message when neither a local model dir nor a reachable hub id was given."""
    p = Path(name_or_path)
    if p.exists():
        if not (p / "config.json").exists():
            raise FileNotFoundError(f"model path {p} exists but has no config.json: not a transformers checkpoint")
        if not _has_weight_files(p):  # else transformers' "no file named ..." came after the data was read, or a
            # vLLM engine (which reads the weights itself) found out only once it started
            raise FileNotFoundError(f"model path {p} has a config.json but no weight files (model.safetensors, "
                                    "pytorch_model.bin or a sharded *.index.json with its shards): an incomplete copy?")
        return
    looks_like_path = name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") != 1
    if looks_like_path:
        raise FileNotFoundError(f"model path {name_or_path!r} does not exist")
    offline = hub_offline_setting()
    if offline and not in_hub_cache(name_or_path):  # a cached hub model loads offline: only the uncached one fails
        raise FileNotFoundError(
            f"model {name_or_path!r} is not a local directory, nor in the hub cache, and {offline} forbids the hub; "
            "pass a local path (e.g. the tiny model built by `mmevo demo`)"
        )


def check_hub_reachable(repo_id: str) -> None:
    """One request, with no retries, for ``repo_id``'s config.json on the hub (the request a fetch starts with), made
    before an uncached hub id is fetched: an unreachable hub (no network, a wrong ``HF_ENDPOINT``) is an OSError at
    once. The hub client retries a failed connection five times with backoff, so a mistyped one-slash id on a machine
    without internet failed only after ~30 s (more where connections time out). Any answer (the file, a redirect, a
    404 for a typo) means the hub is reachable: the fetch goes on and reports it."""
    from huggingface_hub import constants, get_session, hf_hub_url
    from huggingface_hub.utils import build_hf_headers

    url = hf_hub_url(repo_id, "config.json")
    try:
        get_session().head(url, headers=build_hf_headers(), timeout=constants.HF_HUB_ETAG_TIMEOUT,
                           follow_redirects=False)
    except (TypeError, AttributeError):  # a call this client does not take: our error, not the hub's
        raise
    except Exception as e:  # the client's connect / timeout / protocol errors (its own httpx build's): no answer
        raise OSError(f"model {repo_id!r} is not a local directory, and loading it from the hub failed (the hub at "
                      f"{constants.ENDPOINT} cannot be reached: {type(e).__name__}: {e}); pass a local checkpoint "
                      "directory (a one-slash name is taken for a hub repository id)") from None


# huggingface_hub's reading of a boolean environment variable (constants._is_true)
_TRUE_WORDS = ("1", "ON", "YES", "TRUE")


def hub_offline_setting() -> str:
    """``HF_HUB_OFFLINE=1`` (or ``TRANSFORMERS_OFFLINE``, either in any of huggingface_hub's true spellings) as
    set, or "" when the hub may be asked. Read now, not at import: huggingface_hub's own flag is fixed at import."""
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        value = os.environ.get(var, "")
        if value.strip().upper() in _TRUE_WORDS:
            return f"{var}={value}"
    return ""


def in_hub_cache(repo_id: str) -> bool:
    """Whether the hub cache holds ``repo_id``'s config.json: transformers then loads it without the network."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # an id the hub would refuse (HFValidationError), an unreadable cache: not cached
        return False


def note_hub_fetch(name: str) -> bool:
    """Said on stderr before a hub fetch of an uncached id (a one-slash typo of a local path, ``runs/nope``, looks
    like a hub id); returns whether the hub is to be asked."""
    import sys

    if Path(name).exists() or in_hub_cache(name):
        return False
    print(f"[mmevo] model {name!r}: no local directory of that name; fetching it from the hub as a repository id "
          "(set HF_HUB_OFFLINE=1 to fail at once instead)", file=sys.stderr)
    return True


def load_model(name_or_path: str | Path, dtype: str = "float32", device: str = "cpu", attn_implementation: str | None = None,
               weights: bool = True) -> LoadedModel:
    """Load model + processor. VL checkpoints go through AutoModelForImageTextToText, text ones AutoModelForCausalLM.

    ``weights=False``: the model is built on the meta device (no memory, no weights read) with the checkpoint's
    generation config: what a rollout engine that loads the weights itself (vLLM) needs from a policy it only samples.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    name = str(name_or_path)
    # every loader (trainer, frozen MM-Zero roles, demo / calibration evaluations) checks before reading the checkpoint
    check_device("model.device", device)
    _check_source(name)
    if note_hub_fetch(name):
        check_hub_reachable(name)
    try:
        config = AutoConfig.from_pretrained(name)
    except OSError as e:  # transformers' offline / unknown-repo text names a URL, not the model or the setting
        if Path(name).exists():
            raise
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise OSError(f"model {name!r} is not a local directory, and loading it from the hub failed ({reason}); "
                      "pass a local checkpoint directory") from None
    is_vl = hasattr(config, "vision_config")
    kwargs = {"dtype": resolve_dtype(dtype)}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    auto = AutoModelForImageTextToText if is_vl else AutoModelForCausalLM
    # the processor first: a checkpoint without it fails in a moment, not after its weights were read
    processor, tokenizer = _load_processor(name, config, is_vl)
    if weights:
        model = _read_weights(auto, name, kwargs)
    else:
        from transformers import GenerationConfig

        with torch.device("meta"):
            model = auto.from_config(config, **kwargs)
        try:
            model.generation_config = GenerationConfig.from_pretrained(name)
        except OSError:  # no generation_config.json: the one from_config derived from config.json
            pass
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if attn_implementation is None and model.config._attn_implementation == "sdpa":
        from mmevo.models import attention  # CPU grouped-query kernel, packed rows; CUDA: transformers' sdpa otherwise

        model.set_attn_implementation(attention.NAME)
    if weights:
        model.to(device)
    return LoadedModel(model=model, processor=processor, tokenizer=tokenizer, is_vl=is_vl, path=name)


def _load_processor(name: str, config, is_vl: bool):
    """The checkpoint's (processor, tokenizer). A local directory without tokenizer files is an error naming it:
    transformers then built an empty tokenizer (one token, every text encoded as no ids) from the processor's config
    alone, and the run failed at its first prompt with an image-token count mismatch naming neither."""
    from transformers import AutoTokenizer

    try:
        if is_vl:
            processor = load_vl_processor(name, config.model_type)
            tokenizer = processor.tokenizer
        else:
            tokenizer = AutoTokenizer.from_pretrained(name, padding_side="left")
            processor = tokenizer
    except OSError as e:
        if not Path(name).exists():
            raise
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise OSError(f"model {name}: its {'processor' if is_vl else 'tokenizer'} cannot be loaded ({reason}); a "
                      f"checkpoint directory holds the tokenizer{' and image processor' if is_vl else ''} files "
                      "beside its weights: copy them from the model it was trained from") from None
    if Path(name).exists() and not tokenizer("0 a", add_special_tokens=False)["input_ids"]:
        raise OSError(f"model {name}: its tokenizer is empty ({len(tokenizer)} token(s); no tokenizer.json, "
                      "tokenizer.model or vocab.json + merges.txt in the directory?): copy the tokenizer files from "
                      "the model it was trained from")
    return processor, tokenizer


def _read_weights(auto, name: str, kwargs: dict):
    """The checkpoint's module with its weights; a damaged weights or index file is a ValueError naming the model
    directory (transformers re-raised safetensors' bare "invalid header length", naming no file)."""
    from safetensors import SafetensorError

    try:
        return auto.from_pretrained(name, **kwargs)
    except (SafetensorError, json.JSONDecodeError) as e:
        raise ValueError(f"model {name}: its weights cannot be read ({type(e).__name__}: {e}); the checkpoint is "
                         "damaged (a full disk, an interrupted copy?): restore it, or export it again (a loop's "
                         "warm-up model is redone once its directory is deleted)") from None


def stop_token_ids(tokenizer, model) -> list[int]:
    """Token ids that end a response: the generation config's EOS ids plus <|im_end|> / <|endoftext|> when present."""
    ids: set[int] = set()
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    elif eos:
        ids.update(eos)
    for tok in ("<|im_end|>", "<|endoftext|>"):
        tid = tokenizer.convert_tokens_to_ids(tok)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id and tid is not None:
            ids.add(tid)
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return sorted(ids)


def vision_token_ids(tokenizer) -> list[int]:
    """Placeholder tokens a response must never contain (they would be taken for image slots)."""
    ids = []
    for tok in ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>"):
        tid = tokenizer.convert_tokens_to_ids(tok)
        if isinstance(tid, int) and tid != tokenizer.unk_token_id:
            ids.append(tid)
    return ids
