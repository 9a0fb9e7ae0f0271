"""Atomic checkpoints: everything needed to continue a run exactly (model, optimizer, scheduler, RNG, data, heads).

Layout: ``<output_dir>/checkpoints/step_000020/{model/, trainer_state.pt}``; DeepSpeed runs add ``deepspeed/`` (ZeRO
optimizer partitions, one file per rank) and ``rng_rank<r>.pt``. A checkpoint is written to a temp dir and renamed
into place, so an interrupted save never leaves a half checkpoint that resume would pick up.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
from collections.abc import Collection
from pathlib import Path

import numpy as np
import torch

from mmevo.models.inputs import unwrap

_STEP_RE = re.compile(r"^step_(\d+)$")


def rng_state() -> dict:
    """Python, numpy and torch CPU generators, and the current CUDA device's (dropout on the GPU draws from it)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()  # this process's device only: a rank never touches the others
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    root = Path(output_dir) / "checkpoints"
    if not root.exists():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_RE.match(p.name)) and _is_complete(p)]
    return [p for _, p in sorted(found)]


def _is_complete(ckpt: Path) -> bool:
    """A step dir holding the model (config and weights) and the trainer state (written last); our saves rename only
    complete dirs into place, but a copied, hand-edited or half-deleted one may lack them: resume must not pick it (and
    fail on it)."""
    return ckpt.is_dir() and (ckpt / "trainer_state.pt").is_file() and (ckpt / "model" / "config.json").is_file() \
        and _has_weights(ckpt / "model")


def _has_weights(model_dir: Path) -> bool:
    """``save_model``'s safetensors: one file, or an index and every shard it names (an unreadable index counts as
    present: loading it names the damaged file)."""
    if (model_dir / "model.safetensors").is_file():
        return True
    index = model_dir / "model.safetensors.index.json"
    if not index.is_file():
        return False
    try:
        shards = set(json.loads(index.read_text())["weight_map"].values())
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        return True
    return all(isinstance(s, str) and (model_dir / s).is_file() for s in shards)


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    ckpts = list_checkpoints(output_dir)
    return ckpts[-1] if ckpts else None


def checkpoint_name(step: int) -> str:
    """The directory name of the checkpoint at ``step`` (under ``checkpoint_root``)."""
    return f"step_{step:06d}"


def save_checkpoint(output_dir: str | Path, step: int, model, processor, trainer_state: dict, keep: int = 2,
                    state_dict: dict | None = None) -> Path:
    """Write ``step_<step>`` atomically; prune to the newest ``keep``. ``state_dict``: gathered weights (ZeRO-3)."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{checkpoint_name(step)}.tmp", dir=checkpoint_root(output_dir)))
    try:
        write_checkpoint_files(tmp, step, model, processor, trainer_state, state_dict)
        return commit_checkpoint(tmp, output_dir, step, keep)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def checkpoint_root(output_dir: str | Path) -> Path:
    root = Path(output_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    return root


def write_checkpoint_files(ckpt_dir: Path, step: int, model, processor, trainer_state: dict,
                           state_dict: dict | None = None) -> None:
    """The HF model and ``trainer_state.pt`` (with this process's RNG and the step) into ``ckpt_dir``."""
    save_model(ckpt_dir / "model", model, processor, state_dict)
    torch.save({**trainer_state, "rng": rng_state(), "step": step}, ckpt_dir / "trainer_state.pt")


def commit_checkpoint(tmp: Path, output_dir: str | Path, step: int, keep: int) -> Path:
    """Rename a fully written temp dir to ``step_<step>`` and prune to the newest ``keep`` checkpoints.

    Checkpoints of later steps belong to an abandoned run in the same output_dir (this one started afresh): they are
    removed, so neither pruning nor a later resume can prefer them to this run's own.
    """
    final = checkpoint_root(output_dir) / checkpoint_name(step)
    # a step saved again (a loop's rerun saves the step it resumed): the old one is moved aside, where a kill before
    # the next rename leaves it for ``remove_partial_checkpoints`` to put back, not to delete
    replaced = _move_aside(final, _REPLACED) if final.exists() else None
    os.replace(tmp, final)
    ckpts = list_checkpoints(output_dir)
    stale = [c for c in ckpts if _step_of(c) > step]
    kept = [c for c in ckpts if _step_of(c) <= step]
    _remove_checkpoints(stale + (kept[:-keep] if keep > 0 else []), [replaced] if replaced else [])
    return final


def abandon_checkpoints(output_dir: str | Path, keep: Collection[str] = ()) -> list[str]:
    """A run that starts afresh (``trainer.resume=false``) in ``output_dir``: the checkpoints there belong to an
    earlier run. Removed now, not at this run's first save: until then a rerun (resuming by default) would resume the
    old run's state under this run's curve, and with ``save_every=0`` they would never go. ``keep``: names of this
    run's own (saved after ``step()`` calls, before its first ``train()``). Returns the names removed."""
    ckpts = [c for c in list_checkpoints(output_dir) if c.name not in keep]
    _remove_checkpoints(ckpts)
    return [c.name for c in ckpts]


def _remove_checkpoints(ckpts: list[Path], moved: list[Path] = ()) -> None:
    """Delete checkpoint dirs (and dirs ``moved`` aside already). Every one is renamed away before any file is
    deleted: a crash mid-deletion (a whole optimizer state takes a while) leaves only temp dirs that resume ignores,
    never a half-deleted or an abandoned step_*."""
    for gone in [*moved, *(_move_aside(c) for c in ckpts)]:
        shutil.rmtree(gone, ignore_errors=True)


_REPLACED = "replaced"  # the temp-name tag of a checkpoint moved aside for a new save of its step


def _move_aside(ckpt: Path, why: str = "deleted") -> Path:
    """Rename (atomic) a checkpoint dir to a temp name that resume ignores and ``remove_partial_checkpoints`` clears;
    returns the dir to delete."""
    gone = Path(tempfile.mkdtemp(prefix=f".{ckpt.name}.tmp.{why}", dir=ckpt.parent))
    os.replace(ckpt, gone / ckpt.name)
    return gone


def _step_of(ckpt: Path) -> int:
    return int(_STEP_RE.match(ckpt.name).group(1))


def remove_partial_checkpoints(output_dir: str | Path) -> None:
    """Temp dirs of saves that never completed (a crash mid-save); they can hold a whole optimizer state. A complete
    checkpoint moved aside for a new save of its step, whose rename into place never came, is put back first: it was
    the run's newest (with ``trainer.keep_checkpoints=1`` its only) checkpoint."""
    root = Path(output_dir) / "checkpoints"
    for tmp in root.glob(".step_*.tmp*") if root.exists() else []:
        if f".tmp.{_REPLACED}" in tmp.name:
            _put_back(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def _put_back(aside: Path) -> None:
    for ckpt in aside.iterdir():
        final = aside.parent / ckpt.name
        if _STEP_RE.match(ckpt.name) and not final.exists() and _is_complete(ckpt):
            os.replace(ckpt, final)


def save_model(path: str | Path, model, processor, state_dict: dict | None = None) -> Path:
    """HF-format export (config, safetensors, processor/tokenizer) loadable by transformers' Auto classes."""
    from mmevo.models.adapters import has_lora

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if state_dict is None and has_lora(model):  # LoRA: the plain model with merged weights, loadable anywhere
        from mmevo.models.weights import full_state_items

        state_dict = dict(full_state_items(model, device="cpu"))
    unwrap(model).save_pretrained(path, safe_serialization=True, state_dict=state_dict)
    if processor is not None:
        processor.save_pretrained(path)
    return path


def export_atomically(target: str | Path, write) -> Path:
    """``write(dir)`` (an HF export) into a sibling ``<target>.partial`` moved into place once complete.

    The loops take a directory with ``config.json`` for a finished export, and ``save_model`` writes that file
    first: exported in place, a kill mid-export left a model without weights or tokenizer for a rerun to reuse. A
    leftover ``.partial`` of such a kill is written again. ``target`` is replaced whole, so it must be absent, empty
    or an earlier export (``config.json``): any other directory (a run's output_dir) is refused, not deleted."""
    target = Path(target)
    check_replaceable_export(target)
    partial = target.with_name(f"{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    write(partial)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(partial, target)
    return target


def check_replaceable_export(target: Path) -> None:
    """``export_atomically`` may replace ``target``: absent, an empty directory or an earlier export."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise ValueError(f"cannot export the model to {target}: it is a file or a link, not a directory")
    if target.is_dir() and any(target.iterdir()) and not (target / "config.json").is_file():
        raise ValueError(f"cannot export the model to {target}: that directory holds other files than an earlier "
                         "export (no config.json), which replacing it would delete; export to a new directory")


def load_trainer_state(ckpt: str | Path) -> dict:
    """``ckpt``'s trainer state, checked for what every save writes (the step, the RNG, the reward heads' state): a
    state from another tool or a hand edit failed resume with a bare ``KeyError: 'step'``, and one copied from
    another step dir resumed that step under this dir's name."""
    path = Path(ckpt) / "trainer_state.pt"
    state = load_state_file(path)
    missing = [k for k in ("step", "rng", "rewards") if k not in state]
    if missing:
        raise DamagedCheckpointError(_damaged_message(path, f"it lacks {', '.join(map(repr, missing))}"))
    step = state["step"]
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise DamagedCheckpointError(_damaged_message(path, f"its step is {step!r}, not a step count"))
    named = _STEP_RE.match(path.parent.name)
    if named and int(named.group(1)) != step:
        raise DamagedCheckpointError(_damaged_message(path, f"it holds step {step}, not the step "
                                                            f"{int(named.group(1))} its directory names"))
    return state


class DamagedCheckpointError(ValueError):
    """A checkpoint file exists but cannot be read (truncated by a full disk or an interrupted copy)."""


def load_state_file(path: Path) -> dict:
    """One of our own ``.pt`` files of a checkpoint (it holds numpy RNG state and config dicts, so full unpickling is
    required); a damaged one is an error naming the file and the way out, not torch's internal zip / EOF message."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as e:  # torch raises EOFError, RuntimeError, OSError or KeyError depending on where it is cut
        raise DamagedCheckpointError(_damaged_message(path, f"{type(e).__name__}: {e}")) from None
    if not isinstance(state, dict):
        raise DamagedCheckpointError(_damaged_message(path, f"holds a {type(state).__name__}, not a state dict"))
    return state


def _damaged_message(path: Path, why: str) -> str:
    ckpt = path.parent
    if not _STEP_RE.match(ckpt.name):  # a run's own state file (SFT's): deleting it restarts that run
        way = "delete it to start that run afresh"
    else:
        older = [c for c in list_checkpoints(ckpt.parent.parent) if _step_of(c) < _step_of(ckpt)]
        way = (f"delete {ckpt} to resume from {older[-1].name}, or" if older else f"delete {ckpt}, or") + \
            " start afresh with trainer.resume=false or another trainer.output_dir"
    return f"checkpoint file {path} cannot be read ({why.strip()}); it is damaged (a full disk or an interrupted " \
           f"copy?): {way}"


def load_model_weights(model, ckpt_model_dir: str | Path) -> None:
    """Load checkpoint weights into an existing module, strictly (a silent partial load would be a wrong resume)."""
    from safetensors import SafetensorError
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    base = unwrap(model)
    auto = AutoModelForImageTextToText if hasattr(base.config, "vision_config") else AutoModelForCausalLM
    # from_pretrained maps the on-disk (legacy) key names to the module's; then copy state strictly
    try:
        loaded = auto.from_pretrained(str(ckpt_model_dir), dtype=next(base.parameters()).dtype)
    except (SafetensorError, json.JSONDecodeError) as e:  # a truncated / zeroed weights or index file: name it
        raise DamagedCheckpointError(_damaged_message(Path(ckpt_model_dir), f"{type(e).__name__}: {e}")) from None
    except ValueError as e:  # transformers' "Unrecognized configuration class ... for AutoModelForCausalLM"
        raise _other_model_error(Path(ckpt_model_dir), base, _first_line(e)) from None
    try:
        base.load_state_dict(loaded.state_dict(), strict=True)
    except RuntimeError as e:  # torch's missing / unexpected keys and size mismatches
        raise _other_model_error(Path(ckpt_model_dir), base, _first_line(e)) from None
    del loaded


# config keys that fix a model's parameter names and shapes (top level, text_config, vision_config)
_SHAPE_KEYS = ("model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
               "num_attention_heads", "num_key_value_heads", "head_dim", "tie_word_embeddings", "depth", "num_heads",
               "embed_dim", "out_hidden_size", "patch_size", "temporal_patch_size", "spatial_merge_size", "in_chans",
               "in_channels")


def shape_config_differences(saved: dict, current: dict) -> list[str]:
    """``key saved -> current`` for each ``_SHAPE_KEYS`` entry that both HF config dicts hold with other values
    (at the top level, in ``text_config`` or in ``vision_config``); [] for the same architecture."""
    found = []
    for section in (None, "text_config", "vision_config"):
        a = saved.get(section) if section else saved
        b = current.get(section) if section else current
        if not isinstance(a, dict) or not isinstance(b, dict):
            continue
        for key in _SHAPE_KEYS:
            if key in a and key in b and a[key] != b[key]:
                found.append(f"{section + '.' if section else ''}{key} {a[key]!r} -> {b[key]!r}")
    return found


def check_same_model(ckpt_model_dir: str | Path, model) -> None:
    """Refuse, naming the checkpoint and both models, a checkpoint whose saved ``config.json`` is another
    architecture than ``model``'s: the LoRA and DeepSpeed resumes load adapters / ZeRO partitions, never the HF
    weights, and failed with PEFT's, torch's or DeepSpeed's own message (or copied a broadcastable tensor)."""
    ckpt_model_dir = Path(ckpt_model_dir)
    base = unwrap(model)
    differ = shape_config_differences(_saved_config(ckpt_model_dir), base.config.to_dict())
    if differ:
        raise _other_model_error(ckpt_model_dir, base, "config " + ", ".join(differ))


def check_same_base(ckpt_model_dir: str | Path, model, saved_fingerprint) -> None:
    """Refuse, as ``check_same_model`` does, a LoRA checkpoint whose adapters were trained on other frozen base weights
    than ``model``'s (``saved_fingerprint``: ``adapters.base_fingerprint`` at the save): the shapes match, so the
    adapters loaded and the run went on from another model without a word. A checkpoint saved before fingerprints
    were kept (None) is not checked."""
    from mmevo.models.adapters import base_fingerprint, base_fingerprint_differences

    if saved_fingerprint is None:
        return
    if not _is_fingerprint(saved_fingerprint):  # a hand edit or another tool: not taken for "no record", unchecked
        raise DamagedCheckpointError(_damaged_message(Path(ckpt_model_dir).parent / "trainer_state.pt",
                                                      "its 'lora_base' is not a base-weights fingerprint"))
    differ = base_fingerprint_differences(saved_fingerprint, base_fingerprint(model))
    if differ:
        raise _other_model_error(Path(ckpt_model_dir), unwrap(model), "its LoRA adapters were trained on other base "
                                 f"weights: the sampled values of {', '.join(differ[:3])}"
                                 f"{f' and {len(differ) - 3} more' if len(differ) > 3 else ''} differ")


def _is_fingerprint(saved) -> bool:
    return isinstance(saved, dict) and bool(saved) and all(
        isinstance(name, str) and isinstance(rec, dict) and isinstance(rec.get("dtype"), str)
        and isinstance(rec.get("values"), torch.Tensor) and rec["values"].dim() == 1 for name, rec in saved.items())


def _saved_config(ckpt_model_dir: Path) -> dict:
    try:
        saved = json.loads((ckpt_model_dir / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) else {}


def _first_line(error: Exception) -> str:
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {first[:300]}"


def _other_model_error(ckpt_model_dir: Path, base, why: str) -> ValueError:
    """The checkpoint's weights are another model's than the one this run loaded (``model.path`` now names another
    model, or the same path holds a rebuilt one): say so and name both, not transformers' or torch's message alone."""
    return ValueError(f"cannot resume {ckpt_model_dir.parent}: its weights are another model's than this run's "
                      f"(checkpoint: {_model_kind(_saved_config(ckpt_model_dir))}; this run: "
                      f"{_model_kind(base.config.to_dict())}; {why}): resume with the model.path it was trained "
                      "from, or start afresh with trainer.resume=false or another trainer.output_dir")


def _model_kind(config) -> str:
    """``qwen2_5_vl, 4 layers, hidden 128`` from an HF config dict (what tells two models apart in a message)."""
    if not isinstance(config, dict):
        return "unknown"
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    layers, hidden = text.get("num_hidden_layers", config.get("num_hidden_layers")), \
        text.get("hidden_size", config.get("hidden_size"))
    return f"{config.get('model_type')}, {layers} layers, hidden {hidden}"
