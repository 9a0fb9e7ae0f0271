"""A self-evolution loop's rerun: the settings of its first run into its output dir, and a rerun with others refused.

A loop skips every finished phase (``done.json``) on rerun, so a rerun with other settings would keep the finished
phases' records, images and exports while its ``summary.json`` named the new settings. The first run into a directory
records its config (``run_config.json``); a rerun is compared with it by the trainer's own comparison
(``resume_config_changes``, which leaves out where runs write and how they log) and the loop's own free keys.
"""

from __future__ import annotations

import json
from pathlib import Path

from mmevo.config import Config, ConfigError, to_dict

RUN_CONFIG = "run_config.json"


def check_rerun_config(out: Path, cfg: Config, section: str, free_keys: frozenset[str], write: bool = True) -> None:
    """Refuse a rerun into ``out`` (``<section>.output_dir``) whose settings differ, beyond ``free_keys`` (what the loop
    lets a rerun change: its output dir, its length), from those its first run recorded. The first run writes them
    (``write``: the main rank only); a directory from before this file existed is compared with its ``summary.json``'s
    config where it has one (a finished run), on the settings that config holds."""
    from mmevo.grpo.trainer import flat_config, resume_config_changes

    path = out / RUN_CONFIG
    current = json.loads(json.dumps(to_dict(cfg), default=str))  # as the file holds it (tuples as lists)
    saved, source = None, RUN_CONFIG
    if path.exists():
        try:
            saved = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ConfigError(f"{path}: not a readable run config ({e}); restore it, or use another "
                              f"{section}.output_dir") from None
    else:
        saved, source = _summary_config(out), "summary.json"
    if saved is not None:
        flat = flat_config(saved)
        changed = [k for k in resume_config_changes(saved, current, free_keys)
                   # a summary of an older mmevo lacks the settings added since: those it cannot tell
                   if source == RUN_CONFIG or k in flat]
        if changed:
            was = ", ".join(f"{k}={flat.get(k, '<unset>')!r}" for k in changed)
            raise ConfigError(f"{section}.output_dir={out} holds a run with other settings ({was} in {source}); "
                              "its finished phases would be reused under this run's settings: rerun with those "
                              f"settings, or use another {section}.output_dir")
    if not path.exists() and write:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(current, indent=2))
        tmp.replace(path)  # a kill mid-write leaves no torn file to refuse on the next run


def _summary_config(out: Path) -> dict | None:
    """The config in ``out/summary.json`` of a run finished before ``run_config.json`` existed, else None. Without it
    such a run's first rerun recorded its own settings as the run's: other settings were let through, and the
    finished run's own were refused from then on."""
    try:
        config = json.loads((out / "summary.json").read_text()).get("config")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None
    return config if isinstance(config, dict) else None
