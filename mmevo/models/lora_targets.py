"""Which modules ``model.lora.target_modules`` adapts, without torch: the trainer (``mmevo.models.adapters``) hands
PEFT this pattern, and the memory planner matches the same pattern against the module names the model will have, so
both count the same adapters.

A target is a module name or a dotted suffix of one: ``q_proj`` (every layer's), ``self_attn.q_proj`` (the same),
``layers.0.self_attn.q_proj`` (layer 0's only). PEFT matches a string ``target_modules`` with ``re.fullmatch``
against each module's full name (peft.utils.other.match_target_against_key).
"""

from __future__ import annotations

import re
from typing import Iterable


def lora_target_pattern(module_names: Iterable[str]) -> str:
    """Regex (PEFT full match) for the named linears of the language model only: the vision tower's MLP uses the
    same names (gate_proj / up_proj / down_proj) and stays out."""
    names = "|".join(re.escape(n) for n in module_names)
    return rf"^(?!.*\bvisual\b).*\.({names})$"


def adapted_module_names(module_names: Iterable[str], targets: Iterable[str]) -> list[str]:
    """The names among ``module_names`` that PEFT wraps for ``targets`` (each full name matched as PEFT does)."""
    pattern = re.compile(lora_target_pattern(targets))
    return [name for name in module_names if pattern.fullmatch(name)]


def unmatched_targets(targets: Iterable[str], adapted: Iterable[str]) -> list[str]:
    """The targets that adapt none of ``adapted``: PEFT raises only when the whole pattern matches nothing, so a
    misspelt name beside good ones would leave its layers untrained."""
    adapted = list(adapted)
    return [t for t in targets if not any(n.endswith(f".{t}") for n in adapted)]
