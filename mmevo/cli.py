"""Command line: ``mmevo train|sft|demo|eval|build-tiny CONFIG key=value ...``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

USAGE = """mmevo <command> [CONFIG.yaml] [section.key=value ...]

commands:
  demo        tiny model, SFT warm-up, label-free CSRS beside majority vote (--method grpo: verifiable reward),
              pass@1 / maj@8 before and after with intervals, report (CPU: ~6 min on 2 idle cores, more if shared)
  train       GRPO training (resumes from the newest checkpoint in trainer.output_dir)
  sft         supervised warm-up on worked solutions
  eval        benchmark a model:  mmevo eval --model DIR --benchmark mathvision_testmini [--data PATH] [--out DIR]
              (mathvista_testmini | mathvision_testmini | mathvision_test | geometry3k_test; resumable);
              without --benchmark: held-out accuracy on data.heldout
              --calibration (or data.heldout=honest_tasks): HONEST calibration report on held-out honest_tasks
              (accuracy, abstain rate, ECE, Brier, reliability diagram; calibration.json + reliability.png)
  build-tiny  write the embedded tiny Qwen2.5-VL (or text model) to a directory:  mmevo build-tiny DIR [--text]
  render      run matplotlib code or an SVG file in the sandbox:  mmevo render FILE -o OUT.png [--timeout S]
  plan-memory per-GPU memory plan of a run, one JSON object (phases, peak, fits):
              mmevo plan-memory CONFIG [section.key=value ...] --gpus 8 --gpu-mem-gib 80
  evolve      self-evolution loops:  mmevo evolve mmzero CONFIG [section.key=value ...]  (resumable; mmzero.*)
              mmevo evolve prism CONFIG [...]  (questioner -> pool -> solver; resumable; prism.*)
              mmevo evolve honest CONFIG [...]  (HONEST: HCR / CPR / SMC / GSS solver + generator blocks; honest.*)
  prism       Prism's cluster space:  mmevo prism build-clusters CONFIG [section.key=value ...]  (prism.*: embed the
              corpus, seeded K-means, write prism.centroids + its .json sidecar)

Overrides use dotted keys, e.g. trainer.lr=1e-6 rollout.n=8 reward.heads='{majority: 1.0}' (a whole mapping) or
reward.heads.format=0.1 (one entry, the others kept). Unknown keys and out-of-range values are refused at load time.
Run `mmevo <command> --help` for the full list of config keys with their defaults.
"""

COMMANDS = ("demo", "train", "sft", "eval", "build-tiny", "render", "plan-memory", "evolve", "prism")
DESCRIPTIONS = {  # the first line of `mmevo <command> --help`
    "demo": "Tiny model, SFT warm-up, then label-free CSRS beside majority vote (--method grpo: the verifiable "
            "reward); pass@1 / maj@8 before and after, with a report.",
    "train": "GRPO training of model.path on data.train (resumes from the newest checkpoint in "
             "trainer.output_dir).",
    "sft": "Supervised warm-up on worked solutions; the model goes to sft.output_dir/model.",
    "eval": "Benchmark a model (--benchmark), held-out accuracy on data.heldout, or (--calibration) the HONEST "
            "calibration report.",
    "evolve mmzero": "MM-Zero co-evolution: proposer -> coder -> solver phases per iteration (mmzero.*; resumable).",
    "evolve prism": "Prism: questioner -> pool -> solver per iteration (prism.*; resumable).",
    "evolve honest": "HONEST: solver / generator blocks with HCR, CPR, SMC, GSS (honest.*).",
    "prism build-clusters": "Embed the corpus, seeded K-means, write prism.centroids and its .json sidecar (prism.*).",
}


def _parse(argv: list[str], prog: str):
    from mmevo.config import describe

    ap = argparse.ArgumentParser(prog=f"mmevo {prog}", formatter_class=argparse.RawDescriptionHelpFormatter,
                                 description=DESCRIPTIONS.get(prog),
                                 epilog="config keys (section.key = default  # meaning):\n" + "\n".join(describe()))
    ap.add_argument("config", nargs="?", help="YAML config file (optional)")
    ap.add_argument("overrides", nargs="*", help="section.key=value overrides")
    if prog == "demo":
        ap.add_argument("--out", default="runs/demo", help="output directory of the demo")
        ap.add_argument("--method", default="csrs", choices=["csrs", "grpo"],
                        help="csrs: label-free CSRS beside majority vote (default); grpo: the verifiable reward")
    if prog == "eval":  # shorthands for config keys
        for flag, key, what in EVAL_FLAGS:
            ap.add_argument(flag, dest=key.replace(".", "__"), default=None, metavar=flag[2:].replace("-", "_").upper(),
                            help=f"{what} (= {key})")
        ap.add_argument("--calibration", action="store_true", help="HONEST calibration report on held-out "
                        "honest_tasks (= data.heldout=honest_tasks; given overrides win)")
    args = ap.parse_intermixed_args(argv)  # overrides may come before, between or after the flags
    if args.config and "=" in args.config:  # no config file, only overrides
        args.overrides.insert(0, args.config)
        args.config = None
    if prog == "eval" and args.calibration:  # first, so that the command's own overrides win
        args.overrides.insert(0, "data.heldout=honest_tasks")  # an empty system prompt becomes the protocol's
    if prog == "eval":
        for _, key, _ in EVAL_FLAGS:
            value = getattr(args, key.replace(".", "__"))
            if value is not None:  # quoted: a flag's value is taken literally, never parsed as YAML
                args.overrides.append(f"{key}={json.dumps(value)}")
    return args


EVAL_FLAGS = [
    ("--model", "model.path", "checkpoint directory, hub id or 'tiny'"),
    ("--benchmark", "eval.benchmark", "mathvista_testmini | mathvision_testmini | mathvision_test | geometry3k_test"),
    ("--data", "eval.data", "local file or directory of the benchmark (default: its hub dataset)"),
    ("--out", "eval.out_dir", "output directory (default runs/eval/<benchmark>)"),
    ("--limit", "eval.limit", "evaluate the first N items only (0: all of them)"),
    ("--engine", "rollout.engine", "hf | vllm"),
    ("--max-tokens", "eval.max_tokens", "response token budget"),
    ("--template", "data.prompt_template", "r1v | none | a text containing {problem}"),
]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    cmd, rest = argv[0], argv[1:]
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if cmd in MODEL_COMMANDS:
        _deepspeed_logs_to_stderr()
    import warnings

    with warnings.catch_warnings():  # the library's own warnings keep the standard form outside the CLI
        warnings.showwarning = _one_line_warnings(cmd, warnings.showwarning)
        return _run_command(cmd, rest)


def _warning_issuer(frame) -> str:
    """The module that called ``warnings.warn``: the first frame above ``frame`` outside the warnings machinery."""
    while frame is not None and frame.f_globals.get("__name__") in ("warnings", __name__):
        frame = frame.f_back
    return frame.f_globals.get("__name__", "") if frame is not None else ""


def _one_line_warnings(cmd: str, standard):
    """A ``showwarning`` that prints mmevo's (and render's) own warnings as ``mmevo CMD: warning: MESSAGE`` on one
    line: the standard form added Python's file:line and the source line of the ``warnings.warn`` call (the resume
    warning showed ``warnings.warn(f"resuming ...`` below its text). Other packages' warnings keep ``standard``."""
    def show(message, category, filename, lineno, file=None, line=None):
        if _warning_issuer(sys._getframe(1)).partition(".")[0] not in ("mmevo", "render"):
            return standard(message, category, filename, lineno, file, line)
        text = " ".join(str(message).split())
        kind = "warning" if category is UserWarning else f"warning ({category.__name__})"
        print(f"mmevo {cmd}: {kind}: {text}", file=sys.stderr if file is None else file)
    return show


def _run_command(cmd: str, rest: list[str]) -> int:
    from mmevo.config import ConfigError, load_config

    try:
        if cmd == "build-tiny":
            from mmevo.models.tiny import build_tiny_qwen2, build_tiny_qwen2_5_vl

            dirs = [a for a in rest if a != "--text"]
            options = [a for a in dirs if a.startswith("-") and a not in ("-h", "--help")]
            if len(dirs) != 1 or dirs[0].startswith("-") or options:
                # an unknown option (--wide, --txt) is named, not only answered with the usage line
                return _usage("mmevo build-tiny DIR [--text]  (the tiny Qwen2.5-VL, or with --text the tiny Qwen2)",
                              options[:1] or rest, "option" if options else "", ["--text"])
            build = build_tiny_qwen2 if "--text" in rest else build_tiny_qwen2_5_vl
            if Path(dirs[0]).exists() and not Path(dirs[0]).is_dir():  # else found only at the rename, after the build
                raise ConfigError(f"{dirs[0]}: cannot build the tiny model there (a file, not a directory)")
            try:
                print(build(dirs[0]))
            except OSError as e:  # it builds into a temp dir beside DIR: the bare error named that temp path
                raise ConfigError(f"{dirs[0]}: cannot build the tiny model there ({e.strerror or e})") from None
            return 0
        if cmd == "render":
            return _render(rest)
        if cmd == "plan-memory":
            return _plan_memory(rest)
        if cmd == "evolve":
            loops = ("mmzero", "prism", "honest")
            if not rest or rest[0] not in loops:
                return _usage("mmevo evolve {mmzero|prism|honest} CONFIG [section.key=value ...]\n" + "\n".join(
                    f"  {loop:7} {DESCRIPTIONS['evolve ' + loop]}" for loop in loops), rest, "loop", loops)
            args = _parse(rest[1:], f"evolve {rest[0]}")
            cfg = load_config(args.config, args.overrides)
            _check_overrides_for_this_loop(args.overrides, f"evolve {rest[0]}")
            _check_no_loop_settings(cfg, f"evolve {rest[0]}")  # a file of another loop, none of this one's set
            _check_config_file_for_this_loop(args.config, rest[0])  # ... or only set by an override
            _check_loop(rest[0], cfg)
            if rest[0] == "honest":
                from mmevo.honest.loop import run_honest

                summary = run_honest(cfg)
                print(json.dumps({k: summary.get(k) for k in ("pillars", "blocks", "calibration_before",
                                                              "calibration_after", "final_model", "seconds")},
                                 indent=2, default=str))
                return 0
            if rest[0] == "mmzero":
                from mmevo.evolve.mmzero import run_mmzero

                summary = run_mmzero(cfg)
                print(json.dumps({"iterations": summary["iterations"]}, indent=2, default=str))
            else:
                from mmevo.evolve.prism import run_prism

                summary = run_prism(cfg)
                print(json.dumps({"iterations": [{k: v for k, v in it.items() if k != "questioner"}
                                                 for it in summary["iterations"]],
                                  "report": str(Path(cfg.prism.output_dir) / "report.md")}, indent=2, default=str))
            return 0
        if cmd == "prism":
            return _prism(rest)
        if cmd not in ("demo", "train", "sft", "eval"):
            print(f"mmevo: unknown command {cmd!r}{_did_you_mean(cmd, COMMANDS)}\n\n{USAGE}", file=sys.stderr)
            return 2
        args = _parse(rest, cmd)
        if cmd == "demo":
            from mmevo.demo import demo_config, run_demo

            if not args.out.strip() or Path(args.out).is_file():  # '' is the current directory, as trainer.output_dir
                raise ConfigError(f"--out {args.out!r}: give the demo's output directory"
                                  + (" (that path is a file)" if args.out.strip() else ""))

            cfg = demo_config(args.overrides, args.out, args.config)
            _check_no_loop_settings(cfg, "demo")  # a loop's config: minutes of SFT, then runs without its settings
            _check_demo_runs(cfg, args.out, args.method)
            run_demo(cfg, args.out, args.method)
            return 0
        cfg = load_config(args.config, args.overrides)
        if cmd == "train":
            _check_train(cfg)
            _check_settings_take_effect({"train": cfg})
        if cmd in ("train", "sft"):
            _check_no_loop_settings(cfg, cmd)
        if cmd == "eval" and args.calibration and (cfg.eval.benchmark or cfg.eval.format):  # the benchmark ran,
            # --calibration was dropped unseen
            raise ConfigError(f"--calibration and eval.benchmark={cfg.eval.benchmark!r} / eval.format="
                              f"{cfg.eval.format!r} ask for two evaluations: run them one at a time")
        from mmevo import recipes

        if cmd == "train":
            summary = recipes.run_grpo(cfg)
        elif cmd == "sft":
            summary = recipes.run_sft(cfg)
        elif cfg.eval.benchmark or cfg.eval.format:
            from mmevo.eval.runner import run_benchmark

            summary = run_benchmark(cfg)
            summary.pop("by", None)  # the breakdown is in scores.json / report.md
        elif cfg.data.heldout == "honest_tasks":  # --calibration, or the HONEST protocol's held-out tasks
            from mmevo.honest.calibration import run_calibration_eval

            summary = run_calibration_eval(cfg)
        else:
            summary = recipes.run_eval(cfg)
        from mmevo.grpo.distributed import is_main

        if is_main():  # under torchrun / deepspeed only rank 0 prints the summary
            print(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=2, default=str))
        return 0
    except (ConfigError, OSError, ValueError) as e:  # OSError: a path that is missing, a directory, unreadable
        print(f"mmevo {cmd}: error: {e}", file=sys.stderr)
        return 2


def _usage(text: str, argv: list[str], what: str = "", choices=()) -> int:
    """``usage: text`` on stdout for -h / --help (exit 0), else on stderr after naming a wrong word (exit 2)."""
    if argv and argv[0] in ("-h", "--help"):
        print(f"usage: {text}")
        return 0
    wrong = f"mmevo: unknown {what} {argv[0]!r}{_did_you_mean(argv[0], choices)}\n" if what and argv else ""
    print(f"{wrong}usage: {text}", file=sys.stderr)
    return 2


MODEL_COMMANDS = ("demo", "train", "sft", "eval", "build-tiny", "evolve", "prism")  # they load transformers models


def _deepspeed_logs_to_stderr() -> None:
    """DeepSpeed's logger writes to the ``sys.stdout`` of the moment it is made, and transformers imports DeepSpeed
    with its models: its "Setting accelerator to CPU" line then led the JSON ``mmevo eval`` prints, or the path
    ``mmevo build-tiny`` prints. Made here, its handler is pointed at stderr for the whole run; what it says while
    being imported (that accelerator line, a note that the CPU is the accelerator) is dropped, so a command's stderr
    starts with its own messages."""
    import contextlib
    import importlib
    import io
    import logging

    during_import = io.StringIO()
    with contextlib.redirect_stdout(during_import):
        try:
            importlib.import_module("deepspeed.utils.logging")
        except Exception:  # not installed (it is an extra), or broken: nothing of it will print
            return
    for handler in logging.getLogger("DeepSpeed").handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is during_import:
            handler.setStream(sys.stderr)


def _did_you_mean(word: str, choices) -> str:
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


# settings only a self-evolution loop reads -> the commands that read them (honest: only its loop's keys; the others
# configure honest_* heads, the calibration SFT and eval, which train / sft / eval read too)
LOOP_ONLY_KEYS = {
    "mmzero": (None, ("evolve mmzero",)),
    "prism": (None, ("evolve prism", "prism build-clusters")),
    "honest": (("hcr_enabled", "replay_enabled", "smc_enabled", "format_weight", "gss_mode", "gss_blocks",
                "gss_block_steps", "gss_generator_steps", "gss_share", "gss_generator_samples", "gss_solver_samples",
                "gss_pool_size", "gss_stub_mutate_share", "gss_warmup_problems", "warmup_sft", "eval_calibration",
                "output_dir", "roles"), ("evolve honest",)),
}


def set_loop_keys(cfg, section: str) -> list[str]:
    """The loop-only keys of ``section`` whose value differs from the default, as ``section.key``."""
    import dataclasses

    keys, _ = LOOP_ONLY_KEYS[section]
    given, default = getattr(cfg, section), type(getattr(cfg, section))()
    names = keys or [f.name for f in dataclasses.fields(given)]
    return [f"{section}.{k}" for k in names if getattr(given, k) != getattr(default, k)]


def other_loop_overrides(overrides: list[str], command: str) -> list[tuple[str, str]]:
    """``(key, section)`` for each command-line override that sets a loop-only key of a loop ``command`` does not run.
    A config file may hold several loops' sections (one file for all of them), but an override typed for this run
    that names another loop's section (``mmevo evolve mmzero CONFIG prism.roles.solver=...``) is ignored by it."""
    import yaml

    found = []
    for item in overrides:
        key, _, value = item.partition("=")
        parts = key.strip().split(".")
        entry = LOOP_ONLY_KEYS.get(parts[0])
        if entry is None or command in entry[1]:
            continue
        keys = entry[0]
        if len(parts) > 1:
            named = [parts[1]]
        else:  # the whole section as a mapping (``prism='{solver_steps: 2}'``): its keys
            try:
                mapping = yaml.safe_load(value) if value.strip() else {}
            except yaml.YAMLError:  # load_config has refused it already; nothing to name here
                mapping = {}
            named = list(mapping) if isinstance(mapping, dict) else []
        if keys is None or any(k in keys for k in named):
            found.append((key.strip(), parts[0]))
    return found


def config_file_loop_sections(path) -> list[str]:
    """The self-evolution loop sections (``mmzero:``, ``prism:``, ``honest:``) a config file holds at its top level.
    Called after ``load_config`` read the file, so it is readable YAML here."""
    import yaml

    if not path:
        return []
    with open(path) as f:
        data = yaml.safe_load(f)
    return [k for k in LOOP_ONLY_KEYS if isinstance(data, dict) and k in data]


def _check_config_file_for_this_loop(path, loop: str) -> None:
    """A config file of another loop (``mmevo evolve mmzero configs/honest_tiny.yaml``): refused. Without a section
    of its own the command would run its loop on all defaults (MM-Zero: 3 iterations of 10 steps on whatever model the
    file names) and ignore the file's loop section, finishing with a summary of a run nobody asked for. The check on
    the merged config misses it where an override sets one key of this loop (``mmzero.output_dir=...``)."""
    from mmevo.config import ConfigError

    sections = config_file_loop_sections(path)
    if sections and loop not in sections:
        others = " / ".join(f"`{s}:`" for s in sections)
        raise ConfigError(f"{path}: a config of `mmevo evolve {sections[0]}` ({others} section, no `{loop}:` "
                          f"section): `mmevo evolve {loop}` would ignore it and run on its own defaults: run "
                          f"`mmevo evolve {sections[0]} {path}`, or add a `{loop}:` section")


def _check_overrides_for_this_loop(overrides: list[str], command: str) -> None:
    """A command-line override of another loop's section: refused, naming the key and the loop it belongs to."""
    from mmevo.config import ConfigError

    found = other_loop_overrides(overrides, command)
    if found:
        key, section = found[0]
        readers = LOOP_ONLY_KEYS[section][1]
        more = f" (and {', '.join(k for k, _ in found[1:])})" if len(found) > 1 else ""
        raise ConfigError(f"{key}{more}: set on the command line, but it belongs to the {section} loop: only "
                          f"`mmevo {' / mmevo '.join(readers)}` reads it, and `mmevo {command}` would ignore it: "
                          f"remove it, or run `mmevo {readers[0]} CONFIG {key}=...`")


def _check_no_loop_settings(cfg, command: str) -> None:
    """A config written for another command (``mmevo train configs/mmzero_tiny.yaml``): the command would run
    without the loop's settings, e.g. 100 plain GRPO steps where one MM-Zero iteration was meant. A loop's command
    takes a config that sets its own section too: one file may hold the sections of several loops."""
    from mmevo.config import ConfigError

    own = [section for section, (_, readers) in LOOP_ONLY_KEYS.items() if command in readers]
    if any(getattr(cfg, section) != type(getattr(cfg, section))() for section in own):
        return
    for section, (_, readers) in LOOP_ONLY_KEYS.items():
        given = [] if section in own else set_loop_keys(cfg, section)
        if given:
            shown = ", ".join(given[:4]) + (", ..." if len(given) > 4 else "")
            unset = f" (it sets nothing of {own[0]}.*)" if own else ""
            raise ConfigError(f"{shown}: only `mmevo {' / mmevo '.join(readers)}` reads these settings, and "
                              f"`mmevo {command}` would run without them{unset}: run `mmevo {readers[0]} CONFIG`, "
                              f"or remove them from the config")


def _check_train(cfg) -> None:
    """What only GRPO training needs, checked before the model is loaded (the trainer would find it minutes later)."""
    from mmevo.config import ConfigError
    from mmevo.rewards.heads import resolve_head

    if cfg.trainer.steps > 0:  # trainer.steps=0 evaluates model.path only (as a loop's phase_steps=0): no group
        _check_grpo(cfg)
    if not any(cfg.reward.heads.values()):
        raise ConfigError(f"reward.heads={cfg.reward.heads!r}: every weight is 0, so every reward is 0 and no step would "
                          "change the policy")
    loop_only = [f"honest.{k}=true" for k in ("replay_enabled", "smc_enabled") if getattr(cfg.honest, k)]
    if loop_only:  # the HONEST loop builds CPR / SMC (with its health monitor); plain training would ignore them
        raise ConfigError(f"{', '.join(loop_only)}: CPR replay and the SMC curriculum run in `mmevo evolve honest "
                          "CONFIG`; `mmevo train` would ignore them: use that command, or set them to false")
    loop_heads = {h: LOOP_HEADS[h] for h in cfg.reward.heads if h in LOOP_HEADS}
    if loop_heads:  # they score what the loop's strategy attaches (renders, solver votes): absent in plain training,
        # a KeyError or an all-invalid batch after the first rollout
        head, loop = next(iter(loop_heads.items()))
        raise ConfigError(f"reward.heads: {head} scores what `mmevo evolve {loop}` computes for each sample; it "
                          f"cannot train with `mmevo train`: run `mmevo evolve {loop} CONFIG`")
    import inspect

    for name in cfg.reward.heads:
        try:
            factory = resolve_head(name)
        except ValueError as e:
            raise ConfigError(f"reward.heads: {e}") from None
        args = cfg.reward.head_args.get(name) or {}
        try:
            sig = inspect.signature(factory)
        except (TypeError, ValueError):  # no signature to check against (a builtin): the trainer will tell
            continue
        try:  # a misspelt argument would otherwise fail only when the trainer builds the head
            sig.bind(**{str(k): v for k, v in args.items()})
        except TypeError as e:
            raise ConfigError(f"reward.head_args.{name}={args!r}: {e}; {name} takes {sig}") from None
    _check_deepspeed(cfg)


# reward heads of the self-evolution loops' roles (registered in mmevo.rewards.heads) -> the loop that feeds them
LOOP_HEADS = {"mmzero_proposer": "mmzero", "mmzero_coder": "mmzero", "prism_coverage": "prism",
              "honest_generator": "honest"}


def _check_grpo(cfg) -> None:
    """What a GRPO run that trains (``train``, a demo run, a loop role) needs of its group and its reward heads."""
    _check_group(cfg)
    _check_gold(cfg)
    _check_reinference_use(cfg)


def _check_gold(cfg) -> None:
    """``accuracy`` scores against gold answers, which ``data.hide_labels`` removes: the trainer would refuse it only
    at the first reward, after the model loaded and the first rollout ran (in a loop: when that role's phase starts)."""
    from mmevo.config import ConfigError

    if cfg.data.hide_labels and "accuracy" in cfg.reward.heads:
        raise ConfigError(f"reward.heads={cfg.reward.heads!r} has 'accuracy', which scores against gold answers, and "
                          "data.hide_labels=true hides them from every reward head: use a label-free head ('majority', "
                          "or 'sfr' with csrs.enabled=true), or data.hide_labels=false")


# heads that score each sample on its own: they never read a CSRS re-inference
_SAMPLEWISE_HEADS = frozenset({"accuracy", "format"})


def _check_reinference_use(cfg) -> None:
    """CSRS samples m re-inferences per maternal response only for the reward heads that compare against them (``sfr``,
    the pooled ``majority`` vote, a head of one's own): with ``accuracy`` / ``format`` alone they cost the rollout
    time and change nothing, a run that looks like CSRS and trains as plain GRPO. A head of weight 0 adds nothing to
    the reward: ``{sfr: 0.0, accuracy: 1.0}`` trains as plain GRPO too (all weights 0: ``_check_train`` says so)."""
    from mmevo.config import ConfigError

    weighted = {h for h, w in cfg.reward.heads.items() if w}
    if cfg.csrs.enabled and weighted and weighted <= _SAMPLEWISE_HEADS:
        idle = sorted(set(cfg.reward.heads) - weighted)
        raise ConfigError(f"csrs.enabled=true with reward.heads={cfg.reward.heads!r}: "
                          + (f"{', '.join(idle)} of weight 0 add{'s' if len(idle) == 1 else ''} nothing to the "
                             "reward and the others score" if idle else "these heads score")
                          + " each sample on its own, so CSRS's re-inferences would be sampled and never used; add a "
                          "head that uses them ('sfr', or 'majority' for the pooled vote) with a weight, or set "
                          "csrs.enabled=false")


def _check_settings_take_effect(runs: dict, whose: str = "", noun: str = "run") -> None:
    """A ``csrs.*`` / ``algo.*`` key that would be accepted and ignored (``csrs.random_anchor=true`` with
    ``csrs.retrace=false``, ``csrs.gamma`` with the majority-vote head, ``algo.kl_type`` with ``algo.kl_coef=0``):
    refused when every training run of ``runs`` (name -> its config) that sets it ignores it. The demo's runs and a loop's roles share one base config, so a key that one of them
    reads stays (the demo's csrs.gamma is for its CSRS run, not its majority-vote run)."""
    from mmevo.config import Config, ConfigError, _fmt, _get, settings_without_effect

    training = {name: rc for name, rc in runs.items() if rc.trainer.steps > 0}
    ignored = {name: settings_without_effect(rc) for name, rc in training.items()}
    default = Config()
    for key in sorted(set().union(*ignored.values())):
        setting = [name for name, rc in training.items() if _get(rc, key) != _get(default, key)]
        if all(key in ignored[name] for name in setting):
            by_reason: dict[str, list[str]] = {}
            for name in setting:
                by_reason.setdefault(ignored[name][key], []).append(name)
            where = "; ".join(f"{whose} {', '.join(names)} {noun}{'s' if len(names) > 1 else ''}: {reason}"
                              if whose else f"this run: {reason}" for reason, names in by_reason.items())
            raise ConfigError(f"{key}={_fmt(_get(training[setting[0]], key))} has no effect in {where}. Remove it, "
                              "or change the setting that leaves it unused")


def _check_group(cfg) -> None:
    """GRPO's group: a group of one has advantage exactly 0 (``group_advantages`` subtracts the group mean whatever
    ``algo.adv_scale``), and the advantages of n copies of one greedy response cancel."""
    from mmevo.config import ConfigError

    if cfg.rollout.n < 2:
        raise ConfigError(f"rollout.n={cfg.rollout.n}: GRPO needs a group of >= 2 samples per prompt (a group of one "
                          "has advantage 0, so no step would change the policy)")
    if cfg.rollout.temperature == 0:  # greedy: the group is one response n times, whose advantages sum to 0
        raise ConfigError("rollout.temperature=0 decodes greedily: the rollout.n responses of a prompt are the same "
                          "text, their advantages cancel and no step would change the policy; sample at a temperature "
                          "> 0 (EasyR1: 1.0); greedy evaluation is rollout.eval_temperature=0")


def _check_demo_runs(cfg, out: str, method: str) -> None:
    """Each GRPO run of the demo, checked as ``train`` checks its config before the SFT warm-up (e.g. rollout.n=1
    failed the CSRS run, or let the majority-vote run learn nothing, minutes after the start)."""
    from mmevo.config import ConfigError, validate
    from mmevo.demo import METHODS, run_config

    _check_output_dir(Path(out), f"--out {out}", "the demo's")
    runs = {}
    for name in METHODS[method]:
        try:
            runs[name] = rc = run_config(cfg, name, Path(out), Path(cfg.sft.output_dir) / "model")
            validate(rc)
            _check_train(rc)
        except ConfigError as e:
            raise ConfigError(f"the demo's {name} run: {e}") from None
    _check_settings_take_effect(runs, "the demo's")


def _check_output_dir(path: Path, setting: str, whose: str) -> None:
    """``path`` can be made: else a ConfigError naming ``setting`` (the run makes it first thing, where a file there,
    or below one, was a bare OSError naming no setting). Leaves nothing behind: a check must not leave an empty output
    directory when a later check, or the run's own start, fails."""
    from mmevo.config import ConfigError

    try:
        _try_making_dir(path)
    except OSError as e:
        raise ConfigError(f"{setting}: cannot be {whose} output directory ({e.strerror or e})") from None


def _try_making_dir(path: Path) -> None:
    """Raise the OSError that making ``path`` would raise, removing whatever it made."""
    made = []  # the missing directories, deepest first
    q = path
    while not q.exists() and q != q.parent:
        made.append(q)
        q = q.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
    finally:
        for d in made:
            try:
                d.rmdir()
            except OSError:  # never made (the mkdir failed above it), or another process put something there
                pass


def _check_deepspeed(cfg) -> None:
    """``trainer.deepspeed`` names a readable JSON file (the trainer reads it only after loading the model)."""
    from mmevo.config import ConfigError

    path = cfg.trainer.deepspeed
    if not path:
        return
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"trainer.deepspeed={path}: file not found (relative paths are from the current directory, "
                          "e.g. configs/deepspeed/zero3.json)")
    try:
        ds = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"trainer.deepspeed={path}: not a readable JSON file ({e})") from None
    if not isinstance(ds, dict):
        raise ConfigError(f"trainer.deepspeed={path}: a DeepSpeed config is a JSON object, got {type(ds).__name__}")


# base-config keys that every phase of the loop overwrites with its own value (role_config): set at the top level they
# would be ignored without a word (``trainer.steps=10`` ran gss_blocks x gss_block_steps steps); where to set them
LOOP_OWNED_KEYS = {
    "honest": {"trainer.steps": "honest.gss_blocks x honest.gss_block_steps (solver), honest.gss_generator_steps",
               "reward.heads": "the pillar toggles (honest.hcr_enabled, honest.format_weight) or honest.roles.solver",
               "reward.head_args": "the honest section, or honest.roles.<role>",
               "data.train": "the solver trains on generated honest_tasks (data.n_train), or honest.roles.solver",
               "data.hide_labels": "honest.roles.<role>"},
    "mmzero": {"trainer.steps": "mmzero.phase_steps",
               "reward.heads": "mmzero.roles.<role>",
               "reward.head_args": "the mmzero section (diversity_strength, easy_hard_threshold, ...), or "
                                   "mmzero.roles.<role>",
               "data.train": "MM-Zero makes its own data (the proposer's questions, the coder's figures); nothing "
                             "reads it",
               "csrs.enabled": "mmzero.roles.solver (CSRS applies to the solver only)"},
    "prism": {"trainer.steps": "prism.questioner_steps / prism.solver_steps",
              "reward.heads": "prism.roles.<role> (questioner: prism_coverage, solver: majority)",
              "reward.head_args": "the prism section, or prism.roles.<role>",
              "data.train": "the solver trains on the questioner's pool; the cluster corpus is prism.corpus",
              "data.hide_labels": "prism.roles.<role>"},
}


def _check_role_data_read(loop: str, phases: dict) -> None:
    """``<loop>.roles.<role>`` with a ``data.train`` that the role's phase never reads (MM-Zero's phases make their own
    data, Prism's questioner trains on its instruction prompt and its solver on the pool): refused, as the same key at
    the top level is, rather than accepted and ignored. Only HONEST's solver reads one (its task file)."""
    from mmevo.config import Config, ConfigError

    default = Config().data.train  # the top level's data.train is refused when it differs (loop_owned_settings)
    for role, rc in phases.items():
        if rc.data.train != default and not (loop == "honest" and role == "solver"):
            raise ConfigError(f"{loop}.roles.{role} sets data.train={rc.data.train!r}, which the {role} phase never "
                              f"reads (it would be ignored): {LOOP_OWNED_KEYS[loop]['data.train']}")


def loop_owned_settings(loop: str, cfg) -> list[str]:
    """``key=value (set instead: ...)`` for each base-config key the loop overwrites in every phase and that ``cfg``
    changes from the default."""
    from mmevo.config import Config, _get

    default = Config()
    given = [k for k in LOOP_OWNED_KEYS.get(loop, {}) if _get(cfg, k) != _get(default, k)]
    if "reward.heads" in given and "reward.head_args" in given:  # filled in from the heads given (HONEST's): one note
        given.remove("reward.head_args")
    return [f"{k}={_get(cfg, k)!r} (set instead: {LOOP_OWNED_KEYS[loop][k]})" for k in given]


def _check_loop(loop: str, cfg) -> None:
    """Each role's phase config of an evolve loop, built and validated before anything loads (a bad role override,
    e.g. ``{solver: {rollout.top_p: 5}}``, would otherwise fail only when that role's first phase starts)."""
    from mmevo.config import ConfigError
    from mmevo.recipes import check_start_model

    _check_no_loop_settings(cfg, f"evolve {loop}")
    check_start_model(cfg)  # every loop makes its output dir before its first model load
    owned = loop_owned_settings(loop, cfg)
    if owned:
        raise ConfigError(f"`mmevo evolve {loop}` sets these for each of its phases and would ignore them: "
                          + "; ".join(owned))
    if loop == "mmzero":
        from mmevo.evolve.mmzero import ROLES as roles, role_config, text_only_model
        out = cfg.mmzero.output_dir
        if text_only_model(cfg.model.path):  # it loaded, and the solver answered every image question blind
            raise ConfigError(f"model.path={cfg.model.path}: a text-only model, but MM-Zero's solver answers "
                              f"questions about the rendered images, which a text model never sees: give a "
                              f"vision-language model (`tiny`, a Qwen2.5-VL checkpoint)")
    elif loop == "prism":
        from mmevo.evolve.prism import check_loop_config, role_config
        check_loop_config(cfg)  # the loop's own keys first: their messages name them
        roles, out = ("questioner", "solver"), cfg.prism.output_dir
    else:
        from mmevo.honest.loop import check_loop_config, role_config
        check_loop_config(cfg)
        out = cfg.honest.output_dir
        roles = ("solver", "generator") if cfg.honest.gss_mode == "trainable" else ("solver",)
    phases = {}
    for role in roles:
        try:
            phases[role] = rc = role_config(cfg, role, Path(out) / role, cfg.model.path)
            if rc.trainer.steps > 0:  # every role trains by GRPO: with rollout.n=1 the loop ran and learned nothing
                _check_grpo(rc)
        except ValueError as e:  # ConfigError too
            raise ConfigError(f"{loop}.roles.{role}: the {role} phase's config: {e}") from None
    _check_settings_take_effect(phases, f"the {loop} loop's", "role")
    _check_role_data_read(loop, phases)
    if loop == "mmzero" and cfg.mmzero.embedder:  # read by the proposer's reward, mid-phase after models loaded
        from mmevo.models.embedder import DEFAULT_EMBEDDER

        if cfg.mmzero.embedder != DEFAULT_EMBEDDER and not (Path(cfg.mmzero.embedder) / "config.json").is_file():
            raise ConfigError(f"mmzero.embedder={cfg.mmzero.embedder}: no config.json there; give a local "
                              f"sentence-transformers model directory, or '' for the packaged {DEFAULT_EMBEDDER}")
    if loop != "honest":  # the HONEST loop refuses trainer.deepspeed itself
        _check_deepspeed(cfg)
    _check_output_dir(Path(out), f"{loop}.output_dir={out}", "the loop's")


def _prism(argv: list[str]) -> int:
    """``mmevo prism build-clusters CONFIG [key=value ...]``: print the build summary as one JSON object."""
    if not argv or argv[0] != "build-clusters":
        return _usage("mmevo prism build-clusters CONFIG [section.key=value ...]\n  " +
                      DESCRIPTIONS["prism build-clusters"], argv, "prism command", ["build-clusters"])
    from mmevo.config import load_config

    args = _parse(argv[1:], "prism build-clusters")
    cfg = load_config(args.config, args.overrides)
    _check_overrides_for_this_loop(args.overrides, "prism build-clusters")
    _check_no_loop_settings(cfg, "prism build-clusters")
    from mmevo.prism.clusters import build_clusters
    from mmevo.recipes import check_device

    check_device("prism.embed_device", cfg.prism.embed_device)  # else torch's AssertionError once the embedder loaded

    try:
        summary = build_clusters(cfg)
    except ImportError as e:  # a missing package (scikit-learn, the packaged embedder)
        print(f"mmevo prism build-clusters: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=2, default=str))
    return 0


def _plan_memory(argv: list[str]) -> int:
    """``mmevo plan-memory CONFIG [key=value ...] --gpus N --gpu-mem-gib G``: print the plan as one JSON object."""
    from mmevo.config import load_config
    from mmevo.memory_plan import plan

    ap = argparse.ArgumentParser(prog="mmevo plan-memory", description="Per-GPU memory plan (GiB) of a GRPO run: "
                                 "rollout / logprob / update phases, the peak and whether it fits with 8% headroom.",
                                 epilog="The config keys are those of `mmevo train --help`.")
    ap.add_argument("config", nargs="?", help="YAML config file (optional)")
    ap.add_argument("overrides", nargs="*", help="section.key=value overrides")
    ap.add_argument("--gpus", type=int, default=1, help="GPUs (data-parallel ranks) in the run")
    ap.add_argument("--gpu-mem-gib", type=float, default=80.0, help="memory of one GPU in GiB")
    args = ap.parse_intermixed_args(argv)
    if not (args.gpus >= 1 and 0 < args.gpu_mem_gib < float("inf")):  # NaN fails too
        ap.error(f"--gpus must be >= 1 and --gpu-mem-gib a finite number > 0, got {args.gpus} and {args.gpu_mem_gib}")
    if args.config and "=" in args.config:  # no config file, only overrides
        args.overrides.insert(0, args.config)
        args.config = None
    cfg = load_config(args.config, args.overrides)
    print(json.dumps(plan(cfg, args.gpus, args.gpu_mem_gib, config_path=args.config), indent=2))
    return 0


# XML's byte order marks (XML 1.0, appendix F), UTF-32 before the UTF-16 mark that starts it
_XML_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe\x00\x00", "utf-32"), (b"\x00\x00\xfe\xff", "utf-32"),
             (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def _source_text(raw: bytes, language: str) -> str:
    """A source file's text in the encoding it declares: Python's coding cookie (PEP 263); for an SVG its byte order
    mark (a UTF-16 / UTF-32 file has one), else its XML declaration's ``encoding``; UTF-8 otherwise. A declared
    encoding that does not read back the declaration it was found in (``UTF-16`` on ASCII bytes) is a
    ``UnicodeError``, as is any failure of the codec (``undefined``, ``punycode`` raise plain ``UnicodeError``)."""
    import io
    import re
    import tokenize

    if language == "python":
        encoding = tokenize.detect_encoding(io.BytesIO(raw).readline)[0]
    else:
        bom = next((enc for mark, enc in _XML_BOMS if raw.startswith(mark)), None)
        declared = None if bom else re.match(rb"\s*<\?xml[^>]*?\bencoding\s*=\s*[\"']([A-Za-z0-9._-]+)", raw)
        encoding = bom or (declared.group(1).decode() if declared else "utf-8")
    text = raw.decode(encoding)
    text = text[1:] if text.startswith("\ufeff") else text
    if language != "python" and not bom and declared and not text.lstrip().startswith("<?xml"):
        raise UnicodeError(f"its bytes are not in the encoding it declares ({encoding!r}: the declaration does not "
                           f"decode to itself)")
    return text


def _render(argv: list[str]) -> int:
    """Sandboxed rendering of one file (".svg" is SVG, anything else matplotlib Python); 1 when it is refused."""
    ap = argparse.ArgumentParser(prog="mmevo render")
    ap.add_argument("file", help="Python (matplotlib) source or an .svg file")
    ap.add_argument("-o", "--out", required=True, help="PNG to write (a .png path)")
    ap.add_argument("--timeout", type=float, default=10.0, help="wall-clock limit in seconds")
    args = ap.parse_args(argv)
    from pathlib import Path

    from render import RenderJob, RenderPool
    from render.pool import MAX_TIMEOUT_S

    if not 0 < args.timeout <= MAX_TIMEOUT_S:  # before starting a pool; NaN fails too
        ap.error(f"--timeout must be in (0, {MAX_TIMEOUT_S:g}] seconds, got {args.timeout}")
    if Path(args.out).suffix.lower() != ".png":  # the sandbox returns PNG bytes: out.jpg held a PNG under a JPEG name
        ap.error(f"-o {args.out}: the render is a PNG image; give a path ending in .png")

    src = Path(args.file)
    if not src.is_file():
        print(f"mmevo render: error: {src} {'is not a file' if src.exists() else 'not found'}", file=sys.stderr)
        return 2
    out = Path(args.out)
    if out.is_dir() or any(p.exists() and not p.is_dir() for p in out.parents):  # before the render, not after it
        # with a bare "[Errno 17] File exists" / "Is a directory" that named no option
        ap.error(f"-o {args.out}: " + ("is a directory" if out.is_dir() else "lies below a file, not a directory"))
    language = "svg" if src.suffix.lower() == ".svg" else "python"
    try:
        code = _source_text(src.read_bytes(), language)
    except (UnicodeError, LookupError, SyntaxError) as e:
        print(f"mmevo render: error: {src} cannot be decoded as text ({e})", file=sys.stderr)
        return 2
    with RenderPool(workers=1) as pool:
        result = pool.render(RenderJob(code=code, language=language), timeout_s=args.timeout)
    if not result.ok:
        print(f"mmevo render: {src}: {result.error_kind}: {result.message}", file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)  # as every command makes its output directory (runs/...)
    out.write_bytes(result.png)
    print(f"{args.out} {result.width}x{result.height} ({result.elapsed_s * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
