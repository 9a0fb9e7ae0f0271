"""What part of the policy trains: a frozen vision tower, parameters chosen by name, or LoRA adapters (PEFT) on the
language model's linears.

With LoRA the trained module holds ``<module>.base_layer.weight`` plus ``lora_A`` / ``lora_B``; everything outside
the trainer (vLLM weight sync, HF engine sync, checkpoints' ``model/``, the final export) sees plain merged weights
under the original names: W' = W + (alpha / r) * B @ A, computed out of place (the base weights never change, so no
merge/unmerge drift in bf16).
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator

import torch

from mmevo.models.inputs import unwrap
from mmevo.models.lora_targets import lora_target_pattern, unmatched_targets

_LORA_PART = re.compile(r"^(?P<prefix>.+)\.(?:base_layer\.(?P<base>weight|bias)|lora_(?P<ab>[AB])\.(?P<name>[^.]+)\.weight)$")


def freeze_vision_tower(model: torch.nn.Module) -> int:
    """Stop gradients into the vision encoder (ViT blocks and its merger); returns the number of frozen tensors."""
    frozen = 0
    for name, p in unwrap(model).named_parameters():
        if ".visual." in f".{name}":
            p.requires_grad_(False)
            frozen += 1
    if frozen == 0:
        raise ValueError("model.freeze_vision_tower=true, but the model has no vision tower (a text-only model?)")
    return frozen


def train_only(model: torch.nn.Module, patterns: Iterable[str]) -> int:
    """Freeze every parameter whose name matches none of the regexes ``patterns`` (``re.search``); returns the number
    of trainable elements. E.g. ``["norm"]``: only the normalisation weights train (LayerNorm tuning)."""
    pats = [re.compile(p) for p in patterns]
    n = 0
    for name, p in unwrap(model).named_parameters():
        keep = any(r.search(name) for r in pats)
        p.requires_grad_(keep)
        n += p.numel() if keep else 0
    if n == 0:
        raise ValueError(f"model.trainable={list(patterns)} matched no parameter of the model")
    return n


def apply_lora(model: torch.nn.Module, rank: int, alpha: float, dropout: float, target_modules: list[str]):
    """Inject LoRA adapters in place (the module keeps its class); only the adapters require gradients afterwards.

    A model that has adapters already (a second trainer built on the same policy) keeps them and goes on training
    them, as a fully fine-tuned policy keeps its trained weights: PEFT injected again re-initialised every adapter
    (B = 0), silently dropping what they had learnt. Adapters of other settings are refused."""
    from peft import LoraConfig, inject_adapter_in_model

    base = unwrap(model)
    if has_lora(base):
        _check_same_adapters(base, rank, alpha, dropout, target_modules)
        for name, p in base.named_parameters():
            p.requires_grad_("lora_" in name)
        return model
    cfg = LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout, target_modules=lora_target_pattern(target_modules))
    try:
        inject_adapter_in_model(cfg, base)
    except ValueError as e:
        raise ValueError(f"model.lora.target_modules={target_modules} matched no module of the language model ({e})")
    # merge_lora_items folds linear adapters only (W + s * B @ A); an embedding's adapter would train, then fail the
    # first sync or export (and a tied lm_head could not follow its delta)
    other = [n for n in lora_scalings(base) if not isinstance(base.get_submodule(n).base_layer, torch.nn.Linear)]
    if other:
        raise ValueError(f"model.lora.target_modules={target_modules} names non-linear modules {other[:3]}: LoRA "
                         "adapts the language model's linear layers only")
    # PEFT only refuses a pattern that matches nothing: a misspelt name beside good ones left its layers untrained
    unmatched = unmatched_targets(target_modules, lora_scalings(base))
    if unmatched:
        raise ValueError(f"model.lora.target_modules={target_modules}: {unmatched} matched no module of the language "
                         "model")
    for name, p in base.named_parameters():
        p.requires_grad_("lora_" in name)
    return model


def _check_same_adapters(base: torch.nn.Module, rank: int, alpha: float, dropout: float,
                         target_modules: list[str]) -> None:
    """The adapters ``base`` holds are those ``apply_lora(rank, alpha, dropout, target_modules)`` would inject."""
    from mmevo.models.lora_targets import adapted_module_names

    have = lora_scalings(base)
    want = adapted_module_names([n for n, _ in base.named_modules()], target_modules)

    def settings(name):
        mod = base.get_submodule(name)
        drop = mod.lora_dropout["default"]
        return mod.r["default"], mod.scaling["default"], drop.p if isinstance(drop, torch.nn.Dropout) else 0.0
    wanted = (rank, alpha / rank, float(dropout))
    other = sorted(set(have) ^ set(want)) or [n for n in have if settings(n) != wanted]
    if other:
        raise ValueError(f"the model already has LoRA adapters (it was configured for training before) that differ "
                         f"from model.lora rank={rank} alpha={alpha} dropout={dropout} target_modules={target_modules}"
                         f" at {other[:3]}: load the model afresh for other adapters")


def has_lora(model: torch.nn.Module) -> bool:
    return bool(lora_scalings(model))


def lora_scalings(model: torch.nn.Module) -> dict[str, float]:
    """``<module name>`` -> alpha / r of its (single, "default") adapter."""
    out = {}
    for name, mod in unwrap(model).named_modules():
        scaling = getattr(mod, "scaling", None)
        if isinstance(scaling, dict) and "default" in scaling and hasattr(mod, "base_layer"):
            out[name] = float(scaling["default"])
    return out


def merge_lora_items(items: Iterable[tuple[str, torch.Tensor]], scalings: dict[str, float]
                     ) -> Iterator[tuple[str, torch.Tensor]]:
    """Turn a (name, tensor) stream of a LoRA-injected model into the plain model's names and merged weights.

    A module's base weight, bias and A / B may arrive in any order (ZeRO-3 gathers in buckets); each module is
    emitted as soon as its parts are complete. W' = W + scaling * B @ A (computed in float32, cast back).
    """
    pending: dict[str, dict[str, torch.Tensor]] = {}
    done: set[str] = set()
    for name, t in items:
        m = _LORA_PART.match(name)
        if m is None or m.group("prefix") not in scalings:
            yield name, t
            continue
        prefix, part = m.group("prefix"), m.group("base") or m.group("ab")
        if prefix in done:  # only a bias can come after its module was emitted
            yield f"{prefix}.{part}", t
            continue
        parts = pending.setdefault(prefix, {})
        parts[part] = t
        if {"weight", "A", "B"} <= parts.keys():
            w, a, b = parts.pop("weight"), parts.pop("A"), parts.pop("B")
            delta = (b.float() @ a.float()) * scalings[prefix]  # [out, r] @ [r, in]
            yield f"{prefix}.weight", (w.float() + delta.to(w.device)).to(w.dtype)
            if "bias" in parts:
                yield f"{prefix}.bias", parts.pop("bias")
            del pending[prefix]
            done.add(prefix)
    if pending:
        prefix, parts = next(iter(pending.items()))
        raise RuntimeError(f"LoRA merge: module {prefix} is missing {sorted({'weight', 'A', 'B'} - set(parts))}")


def lora_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The adapters only (what a LoRA checkpoint needs besides the unchanged base model)."""
    return {n: p.detach().cpu().clone() for n, p in unwrap(model).named_parameters() if "lora_" in n}


def load_lora_state_dict(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    params = {n: p for n, p in unwrap(model).named_parameters() if "lora_" in n}
    if params.keys() != state.keys():
        missing, extra = sorted(params.keys() - state.keys())[:3], sorted(state.keys() - params.keys())[:3]
        raise ValueError(f"LoRA checkpoint does not match this model's adapters (missing {missing}, extra {extra}): "
                         "resume with the same model.lora settings")
    # copy_ broadcasts: rank-1 adapters (1 x in, out x 1) were spread over rank-4 ones without a word
    shapes = [f"{n} {tuple(state[n].shape)} -> {tuple(p.shape)}" for n, p in params.items()
              if tuple(state[n].shape) != tuple(p.shape)]
    if shapes:
        raise ValueError(f"LoRA checkpoint's adapters have other shapes than this model's ({', '.join(shapes[:3])}): "
                         "resume with the same model.lora settings")
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(state[n])


_FINGERPRINT_TENSORS, _FINGERPRINT_SAMPLES = 8, 4096


def base_fingerprint(model: torch.nn.Module) -> dict[str, dict] | None:
    """A cheap record of the frozen base a LoRA run trains on: ``{plain name: {"dtype", "values"}}`` for 8 frozen
    tensors spread over the model (sorted by name), each with 4096 evenly spaced elements as float32 on the CPU.

    A LoRA checkpoint keeps only the adapters, so a resume onto other base weights of the same shapes (a rebuilt model
    at the same ``model.path``) would go on silently; this lets it notice. Names are the plain model's (PEFT's
    ``.base_layer`` dropped); evenly spaced elements catch a fine-tune, which moves weights throughout a tensor.
    None where the weights are not in memory (meta tensors, ZeRO-3 partitions)."""
    frozen = sorted(((_plain_name(n), p) for n, p in unwrap(model).named_parameters() if "lora_" not in n),
                    key=lambda item: item[0])
    if not frozen or any(p.is_meta or p.numel() == 0 for _, p in frozen):
        return None
    step = max(1, len(frozen) - 1) / max(1, _FINGERPRINT_TENSORS - 1)
    chosen = sorted({round(k * step) for k in range(_FINGERPRINT_TENSORS)} & set(range(len(frozen))))
    out = {}
    for i in chosen:
        name, p = frozen[i]
        flat = p.detach().reshape(-1)
        idx = torch.linspace(0, flat.numel() - 1, min(_FINGERPRINT_SAMPLES, flat.numel())).round().long()
        out[name] = {"dtype": str(p.dtype).removeprefix("torch."), "values": flat[idx.to(flat.device)].float().cpu()}
    return out


def _plain_name(name: str) -> str:
    return name.replace(".base_layer.", ".")


def base_fingerprint_differences(saved: dict, current: dict | None) -> list[str]:
    """The tensors of fingerprint ``saved`` whose sampled values ``current`` (this model's) lacks or holds otherwise;
    [] for the same base. Equal where both were taken in one dtype; across dtypes (a resume with another
    ``model.dtype``) within the coarser one's rounding, so a cast of the same weights is not taken for others."""
    if current is None:
        return []  # nothing to compare with (weights not in memory)
    differ = []
    for name, rec in saved.items():
        now = current.get(name)
        if now is None:
            differ.append(f"{name} (not in this model)")
        elif not _same_samples(rec, now):
            differ.append(name)
    return differ


def _same_samples(a: dict, b: dict) -> bool:
    x, y = a["values"].float(), b["values"].float()
    if x.shape != y.shape:
        return False
    if a["dtype"] == b["dtype"]:
        return bool(torch.allclose(x, y, rtol=0, atol=0, equal_nan=True))
    # each side is the same weight rounded to its dtype: they differ by at most the coarser dtype's rounding
    info = max((torch.finfo(_float_dtype(d)) for d in (a["dtype"], b["dtype"])), key=lambda f: f.eps)
    return bool(torch.allclose(x, y, rtol=2 * info.eps, atol=info.tiny, equal_nan=True))


def _float_dtype(name) -> torch.dtype:
    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    return dtype if isinstance(dtype, torch.dtype) and dtype.is_floating_point else torch.float32
