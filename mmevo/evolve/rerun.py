"""A self-evolution loop's rerun: the settings of its first run into its output dir, and a rerun with others refused.

A loop skips every finished phase (``done.json``) on rerun, so a rerun with other settings would keep the finished
phases' records, images and exports while its ``summary.json`` named the new settings. The first run into a directory
records its config (``run_config.json``); a rerun is compared with it by the trainer's own comparison
(``resume_config_changes``, which leaves out where runs write and how they log) and the loop's own free keys.

Among those free keys are the phases' steps: they apply to the phases not finished yet, a finished phase keeping the
steps it trained. ``check_finished_steps`` names the finished phases whose steps differ (stderr, and ``summary.json``'s
``steps_mismatch``), and refuses new steps that would apply to no phase at all (a rerun that would only relabel).
"""

from __future__ import annotations

import json
from pathlib import Path

from mmevo.atomic import write_json_atomic
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
        write_json_atomic(path, current)  # a kill mid-write leaves no torn file to refuse on the next run


def _summary_config(out: Path) -> dict | None:
    """The config in ``out/summary.json`` of a run finished before ``run_config.json`` existed, else None. Without it
    such a run's first rerun recorded its own settings as the run's: other settings were let through, and the
    finished run's own were refused from then on."""
    try:
        config = json.loads((out / "summary.json").read_text()).get("config")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return None
    return config if isinstance(config, dict) else None


def finished_steps_mismatches(out: Path, planned: list[tuple[str, str, int]]) -> list[dict]:
    """The finished phases among ``planned`` (``(phase dir under out, config key, steps it gives)``) that trained
    another number of steps than the key now gives: ``{"phase", "steps" (recorded in its done.json), "key",
    "config"}`` each. A finished phase is skipped on rerun, so it keeps the steps it trained whatever the key says
    now; a phase skipped for want of data trained none and is left out."""
    found = []
    for phase, key, steps in planned:
        done = _done(out / phase)
        if done is not None and not done.get("skipped") and isinstance(done.get("steps"), int) \
                and done["steps"] != steps:
            found.append({"phase": phase, "steps": done["steps"], "key": key, "config": steps})
    return found


def check_finished_steps(out: Path, planned: list[tuple[str, str, int]], section: str, say: bool = True) -> list[dict]:
    """Before a rerun: the finished phases that trained other steps than their key now gives (printed on stderr when
    ``say``, the main rank). Refused where a key applies to no phase at all, every phase it covers being finished
    with other steps: the rerun would train nothing and only relabel ``summary.json`` with steps no phase trained."""
    import sys

    mismatches = finished_steps_mismatches(out, planned)
    for key in dict.fromkeys(m["key"] for m in mismatches):
        covered = [(phase, steps) for phase, k, steps in planned if k == key]
        unfinished = [phase for phase, _ in covered if _done(out / phase) is None]
        matching = [phase for phase, steps in covered if phase not in unfinished
                    and (_done(out / phase) or {}).get("steps") == steps]
        if not unfinished and not matching:
            value = covered[0][1]
            was = ", ".join(f"{m['phase']} {m['steps']}" for m in mismatches if m["key"] == key)
            raise ConfigError(f"{key}={value}: every phase of {section}.output_dir={out} it applies to has finished, "
                              f"with other steps ({was}); a finished phase is not trained again, extended or cut, so "
                              f"this rerun would train nothing and only relabel summary.json: rerun with the steps "
                              f"they trained, add iterations ({section}.iterations), or use another "
                              f"{section}.output_dir")
    if mismatches and say:
        print(f"[mmevo] finished phases keep the steps they trained (they are not trained again, extended or cut): "
              + "; ".join(f"{m['phase']} trained {m['steps']} steps, {m['key']}={m['config']}" for m in mismatches)
              + " (summary.json lists them under steps_mismatch)", file=sys.stderr)
    return mismatches


def check_iterations_not_fewer(out: Path, iterations: int, first: int, section: str) -> None:
    """Refuse a rerun with fewer ``<section>.iterations`` than ``out`` holds finished phases of (``iter_<t>/<phase>/
    done.json``, t counted from ``first``). The loop summarises only the iterations it plans, so such a rerun rewrote
    ``summary.json`` (and Prism's report) without the finished rounds past them, in silence, while their exports stayed
    on disk. An iteration that finished no phase (killed in its first phase) is not a round yet and may be dropped."""
    import re

    finished = [int(d.name[len("iter_"):]) for d in out.glob("iter_*")
                if re.fullmatch(r"iter_[0-9]+", d.name) and d.is_dir()
                and any(_done(phase) is not None for phase in d.iterdir() if phase.is_dir())]
    beyond = [t for t in finished if t >= first + iterations]
    if beyond:
        needed = max(beyond) - first + 1
        raise ConfigError(f"{section}.iterations={iterations}: {section}.output_dir={out} holds finished phases of "
                          f"{needed} iterations (up to iter_{max(beyond)}); with fewer, its summary.json would leave "
                          f"finished rounds out: rerun with {section}.iterations>={needed}, or use another "
                          f"{section}.output_dir")


def say_reused_phases(out: Path, phases: list[str], section: str) -> list[str]:
    """The phases among ``phases`` (dirs under ``out``) finished before (``done.json``), named on stderr: a rerun skips
    them and reuses their exports and records, and said nothing of it (a finished run's rerun, taking seconds, read
    as a run that trained). Returns them."""
    import sys

    reused = [phase for phase in phases if _done(out / phase) is not None]  # a damaged record: refused, naming it
    if reused:
        print(f"[mmevo] {section}.output_dir={out}: {len(reused)} of {len(phases)} phases finished before and are "
              f"reused, not trained again ({', '.join(reused)})", file=sys.stderr)
    return reused


def _done(phase_dir: Path) -> dict | None:
    """A finished phase's ``done.json``, else None."""
    try:
        done = json.loads((phase_dir / "done.json").read_text())
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{phase_dir / 'done.json'}: not a readable phase record ({e}); remove it to train the "
                          "phase again") from None
    return done if isinstance(done, dict) else {}


def finished_phase(phase_dir: Path) -> dict | None:
    """A finished phase's record (its ``done.json``), else None; its model is its export in ``phase_dir``: done.json
    names the absolute path the phase exported to, and a moved or copied output dir continued from there (a missing
    model, or another run's)."""
    done = _done(phase_dir)
    if done and done.get("model"):
        done["model"] = str(phase_dir / "final")
    return done
