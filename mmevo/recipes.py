"""Recipes: resolve a config into model, data and engine, then run SFT, GRPO or evaluation end to end."""

from __future__ import annotations

import contextlib
import json
import time
import warnings
from pathlib import Path

import torch

from mmevo.atomic import write_json_atomic
from mmevo.config import TINY_ALIASES, Config, ConfigError, to_dict
from mmevo.data.schema import Example
from mmevo.models.loader import LoadedModel, _check_source, check_device, load_model


def check_start_model(cfg: Config) -> None:
    """A local ``model.path`` is a checkpoint directory: else a ConfigError naming the key (the loader's message names
    none), checked by ``load_policy`` and by the evolve loops before they make their output dir. Tiny aliases are built
    later; a hub id (``owner/name``, no such directory) is the loader's to fetch or refuse."""
    p = cfg.model.path
    hub_id = not Path(p).exists() and p.count("/") == 1 and not p.startswith((".", "/", "~"))
    if p in TINY_ALIASES or hub_id:
        return
    try:
        _check_source(cfg.model.path)
    except FileNotFoundError as e:
        raise ConfigError(f"model.path={cfg.model.path}: {e}") from None


def resolve_model_path(cfg: Config) -> str:
    """"tiny" / "tiny-wide" / "tiny-text" build the embedded models once into ``model.cache_dir``; anything else is used as given.

    In a multi-process run this is collective (every rank calls it): the first rank of each node (``LOCAL_RANK`` 0)
    builds while the other ranks wait, then all use the same directory, and a failed build fails every rank. One
    builder per node, not rank 0 alone, because nodes need not share ``cache_dir``; where they do share it, the node
    builders race harmlessly (each builds into a temp dir, the first rename wins, see ``mmevo.models.tiny``; the builds
    are seeded, so nodes with separate caches get the same model). Without a process group (single process, or ranks
    that never join one) nothing is waited on: each process builds or reuses the model itself, safe for the same reason.
    """
    name = cfg.model.path
    if name in TINY_ALIASES:
        from mmevo.grpo import distributed as D
        from mmevo.models.tiny import build_tiny

        out = Path(cfg.model.cache_dir) / TINY_ALIASES[name]
        error = None
        if D.local_rank() == 0:
            try:
                build_tiny(name, out)
            except Exception as e:  # the waiting ranks must hear of it, not wait forever
                error = e
        failures = D.all_gather_objects(None if error is None else f"{type(error).__name__}: {error}")  # the wait
        if error is not None:
            raise error
        for r, failure in enumerate(failures):
            if failure:
                raise RuntimeError(f"rank {r} could not build the tiny model in {out}: {failure}")
        return str(build_tiny(name, out))  # the node's finished build (a node without a LOCAL_RANK 0 builds its own here)
    return name


def check_engine(cfg: Config) -> None:
    """``rollout.engine=vllm`` needs a supported vLLM installed: checked before the model is loaded (the engine is built
    after the policy and the reference, and a missing vLLM was a raw ModuleNotFoundError there)."""
    if cfg.rollout.engine != "vllm":
        return
    from mmevo.rollout.vllm_engine import check_vllm_version

    try:
        check_vllm_version()
    except ImportError as e:
        raise ValueError(f"rollout.engine=vllm: vLLM is not installed ({e}); install it or use rollout.engine=hf") \
            from None
    except RuntimeError as e:
        raise ValueError(f"rollout.engine=vllm: {e}") from None


def load_policy(cfg: Config, path: str | None = None) -> LoadedModel:
    check_device("model.device", cfg.model.device)
    if path is None:  # the loader's "model path ... does not exist" named no setting: train / sft / eval name it
        check_start_model(cfg)
    torch.manual_seed(cfg.trainer.seed)
    return load_model(path or resolve_model_path(cfg), cfg.model.dtype, cfg.model.device)


def _check_split(key: str, source: str, split: str | None, which: str) -> None:
    """A ``@split`` names a split of a folder, saved dataset or hub dataset: on a .jsonl / .parquet file (one set of
    rows) it was ignored, and the file's rows loaded as that split. The held-out set of a source with several splits
    needs one: without it a saved DatasetDict or a hub dataset gave its train split."""
    from mmevo.data.sources import is_saved_dataset, looks_like_hub_name

    path, splits_file = Path(source), Path(source) / "dataset_dict.json"
    saved = path.is_dir() and is_saved_dataset(path)
    single_saved = saved and not splits_file.is_file()
    if split is not None and (single_saved or path.is_file() and path.suffix.lower() in (".jsonl", ".parquet")):
        what = "one saved Dataset" if single_saved else "one file"
        raise ValueError(f"{key}={source}@{split}: {source} is {what}, it has no splits; drop '@{split}' or give "
                         "the folder / dataset that holds the split")
    if split is None and which == "heldout":
        several = saved and not single_saved and len(json.loads(splits_file.read_text()).get("splits", [])) > 1
        if several or looks_like_hub_name(source):
            raise ValueError(f"{key}={source}: name the held-out split ({source}@test, ...), else the train split "
                             "would be read as held-out data")


def source_split(source: str) -> tuple[str, str | None]:
    """EasyR1's ``SOURCE@SPLIT`` (``hiyouga/geometry3k@train``, ``data/geometry3k@test``): a source that does not exist
    as written and ends in ``@name`` is that split of ``SOURCE``; anything else is the source itself, no split."""
    base, at, split = str(source).rpartition("@")
    if at and base and split and "/" not in split and not Path(source).exists():
        return base, split
    return str(source), None


def load_examples(cfg: Config, which: str) -> tuple[list[Example], dict]:
    """``which`` is "train" or "heldout"; synthetic sets come from disjoint seeded streams."""
    source = cfg.data.train if which == "train" else cfg.data.heldout
    if not source:
        return [], {}
    if source == "synthetic":
        from mmevo.data.synthetic import split_train_heldout

        d = cfg.data
        # held-out problems are de-duplicated against the train set, so the train set is always generated too
        train, held = split_train_heldout(d.n_train, d.n_heldout if which == "heldout" else 0, d.seed, d.image_size,
                                          d.mc_fraction)
        rows = train if which == "train" else held
        return rows, {"rows": len(rows), "loaded": len(rows), "skipped": 0}
    if source == "figures":
        from mmevo.data.figures import split_figures

        d = cfg.data
        train, held = split_figures(d.n_train, d.n_heldout if which == "heldout" else 0, d.seed, d.image_size)
        rows = train if which == "train" else held
        return rows, {"rows": len(rows), "loaded": len(rows), "skipped": 0}
    if source == "honest_tasks":  # HONEST text tasks (mmevo.honest.tasks), sized by data.n_train / n_heldout
        from mmevo.honest.tasks import split_honest_tasks

        d, h = cfg.data, cfg.honest
        train, held = split_honest_tasks(d.n_train, d.n_heldout if which == "heldout" else 0, h.seed, h.domains,
                                         h.min_difficulty, h.max_difficulty)
        rows = [t.to_example() for t in (train if which == "train" else held)]
        return rows, {"rows": len(rows), "loaded": len(rows), "skipped": 0}
    if source == "honest_sft":  # HONEST calibration SFT targets (mmevo.honest.sft), sized by honest.sft_tier / sft_n
        from mmevo.honest.sft import load_calibration_sft

        return load_calibration_sft(cfg, which)
    source, split = source_split(source)
    _check_split(f"data.{which}", source, split, which)
    if cfg.data.format == "geometry3k" and not cfg.data.fields:
        from mmevo.data.geometry3k import load_geometry3k

        # EasyR1's pixel bounds, applied to each image as it is decoded (memory holds no full-size set)
        rows, stats = load_geometry3k(source, split, skip_bad=cfg.data.skip_bad_rows, min_pixels=cfg.data.min_pixels,
                                      max_pixels=cfg.data.max_pixels)
    else:
        from mmevo.data.benchmarks import items_to_examples, load_items

        items, stats = load_items(cfg.data.format, source, split, fields=cfg.data.fields,
                                  skip_bad=cfg.data.skip_bad_rows)
        # an undecodable image: counted too
        rows, stats = items_to_examples(items, stats, cfg.data.skip_bad_rows, cfg.data.min_pixels, cfg.data.max_pixels)
    if not rows:  # else the first step fails far from here ("the training set is empty"), naming no file
        skipped = stats.get("skipped_by_reason") or {}
        raise ValueError(f"data.{which}={cfg.data.train if which == 'train' else cfg.data.heldout}: no usable rows "
                         f"({stats.get('rows', 0)} read" + (f", skipped {skipped}" if skipped else "") + ")")
    return rows, stats


def note_unseen_images(policy: LoadedModel, sets: dict[str, list], why: str = "") -> dict[str, int]:
    """A text-only model gets no images (``encode_prompt`` drops them): say how many examples (items) of each set it
    will see without theirs, on stderr, as a default ``data.train=synthetic`` with ``model.path=tiny-text`` trained
    blind without a word; ``why`` ends the line. Returns the counts (0s for a vision model)."""
    import sys

    from mmevo.grpo.distributed import is_main

    unseen = {name: 0 if policy.is_vl else sum(1 for ex in rows if ex.images) for name, rows in sets.items()}
    if any(unseen.values()) and is_main():  # every rank loads the same sets: one line
        counts = ", ".join(f"{n} of the {len(sets[name])} {name}" for name, n in unseen.items() if n)
        print(f"[mmevo] {policy.path} is a text-only model: the images of {counts} examples are left out of its "
              f"prompts{why}", file=sys.stderr)
    return unseen


def _need_train_rows(cfg: Config, train: list) -> None:
    """A training run without training examples fails before the model loads (the trainer found it only at its first
    step, as "no prompts", naming no setting)."""
    if not train:
        size = f" with data.n_train={cfg.data.n_train}" if cfg.data.train in GENERATED_SETS else ""
        raise ValueError(f"data.train={cfg.data.train!r}{size} gives no training examples")


def _need_solutions(cfg: Config, train: list) -> None:
    """SFT data whose examples lack a worked solution fails before the model loads, naming data.train and how many
    lack one (the SFT loop found the first only after the model was read, naming no data file)."""
    missing = [ex for ex in train if not ex.solution]
    if missing:
        raise ValueError(f"data.train={cfg.data.train!r}: {len(missing)} of {len(train)} examples have no 'solution' "
                         f"field (the first: id {missing[0].id!r}); SFT trains on worked solutions in the trainer's "
                         "format (\"<think>...</think> \\boxed{answer}\"): give the rows one, or train with "
                         "`mmevo train` (GRPO needs only the answers)")


GENERATED_SETS = ("synthetic", "figures", "honest_tasks")  # data.train values sized by data.n_train


def build_trainer(cfg: Config, policy: LoadedModel, train=(), heldout=None, strategy=None, prompt_source=None,
                  log: bool = True):
    """A ready GRPO trainer: reference model (when ``algo.kl_coef > 0``), strategy, prompt source, engine.

    ``strategy`` defaults to the config's (CSRS or plain groups), ``prompt_source`` to seeded epochs over ``train``;
    a loop passes its own and may call ``trainer.step(examples)``. Call ``trainer.close()`` when done with it.
    """
    from mmevo.grpo.trainer import GRPOTrainer
    from mmevo.rollout.factory import build_engine

    ref = None
    if cfg.algo.kl_coef > 0:  # the reference is the run's starting model, also after a resume
        ref_device = "cpu" if cfg.model.ref_offload else cfg.model.device  # offloaded: visits the GPU per pass
        ref = load_model(policy.path, cfg.model.dtype, ref_device).model.eval().requires_grad_(False)
    elif cfg.model.ref_offload:  # said, not refused: a config may keep the setting while toggling the KL term
        warnings.warn(f"model.ref_offload=true has no effect with algo.kl_coef={cfg.algo.kl_coef}: no reference model "
                      "is loaded (it serves only the KL term)", UserWarning, stacklevel=2)
    trainer = GRPOTrainer(cfg, policy, None, train, heldout, ref_model=ref, strategy=strategy,
                          prompt_source=prompt_source, log=log)
    # the engine starts after DeepSpeed has partitioned the policy (ZeRO-3): vLLM claims its share of the GPU
    # (rollout.gpu_memory_utilization of the total) only while that much is free
    trainer.engine = build_engine(cfg, policy)
    return trainer


def hold_output_dir(held: contextlib.ExitStack, lock, key: str, path, owner: str = "run") -> None:
    """Enter the run's output-dir lock; a path that is a file (or lies below one) failed there with the bare OSError
    ("[Errno 17] File exists: ..."), naming no setting. ``owner`` names the run in the message."""
    try:
        held.enter_context(lock(path))
    except OSError as e:
        raise ValueError(f"{key}={path}: cannot be the {owner}'s output directory ({e.strerror or e})") from None


def run_sft(cfg: Config) -> dict:
    """SFT warm-up on the train set's worked solutions; exports ``sft.output_dir/model``.

    Holds ``sft.output_dir`` for the run (``mmevo.runlock``): a second live run on it fails at once.
    """
    from mmevo.runlock import exit_with_parent_if_launched, output_dir_lock

    exit_with_parent_if_launched()  # under a launcher: end with it (SFT never joins a process group)
    with contextlib.ExitStack() as held:
        hold_output_dir(held, output_dir_lock, "sft.output_dir", cfg.sft.output_dir)
        return _run_sft(cfg)


def _run_sft(cfg: Config) -> dict:
    from mmevo.grpo.checkpoint import check_replaceable_export, export_atomically, save_model
    from mmevo.grpo.sft import run_sft as sft_loop

    refuse_start_model_in_export(cfg, "sft.output_dir", cfg.sft.output_dir, SFT_EXPORT)
    if cfg.sft.teacher_noise > 0 and cfg.data.train != "synthetic":
        raise ValueError("sft.teacher_noise only applies to data.train=synthetic")
    train, stats = load_examples(cfg, "train")  # before the model: a bad data path fails in seconds, not minutes
    _need_train_rows(cfg, train)
    _need_solutions(cfg, train)
    check_replaceable_export(Path(cfg.sft.output_dir) / SFT_EXPORT)  # a file or link there: refused before training
    policy = load_policy(cfg)
    note_unseen_images(policy, {"SFT": train})
    if cfg.sft.teacher_noise > 0:
        from mmevo.data.synthetic import with_teacher_noise

        train = with_teacher_noise(train, cfg.sft.teacher_noise, cfg.data.seed)
        stats["teacher_wrong"] = sum(bool(ex.meta.get("teacher_wrong")) for ex in train)
    # every SFT run trains (a finished one left no state to resume): an earlier run's summary.json and model/ would
    # mark this one finished (to the demo, which reuses it) until it ends, and a kill in between left them as its own
    remove_finished_markers(Path(cfg.sft.output_dir), export=SFT_EXPORT)
    t0 = time.time()
    history = sft_loop(cfg, policy, train)
    # whole or not at all: a kill mid-export left a model/ with its config.json but not all its weights or tokenizer,
    # which a GRPO run (model.path) or the demo took for the finished SFT's model
    out = export_atomically(Path(cfg.sft.output_dir) / SFT_EXPORT, lambda d: save_model(d, policy.model,
                                                                                          policy.processor))
    summary = {"model": str(out), "steps": len(history), "final_loss": history[-1]["sft/loss"] if history else None,
               "seconds": time.time() - t0, "data": stats, "config": to_dict(cfg)}  # config: what a reuse compares
    write_json_atomic(Path(cfg.sft.output_dir) / "summary.json", summary)
    from mmevo.grpo.sft import discard_state

    discard_state(cfg.sft.output_dir)  # finished: a rerun starts a new SFT
    return summary


def run_grpo(cfg: Config, evaluate_before_after: bool = True) -> dict:
    """GRPO from ``model.path``; evaluates on the held-out set before and after, exports ``output_dir/final``.

    Holds ``trainer.output_dir`` for the whole run (``mmevo.runlock``): rank 0 locks it before anything is loaded or
    written, and a second live run on it fails at once on every rank, naming the holder.
    """
    if cfg.trainer.deepspeed:
        from mmevo.grpo.distributed import init_distributed

        # before anything is loaded: each rank picks its GPU, and vLLM joins the existing process group
        init_distributed(cfg.model.device)
    from mmevo.runlock import output_dir_lock

    with contextlib.ExitStack() as held:  # after joining the group: rank 0's verdict is broadcast
        hold_output_dir(held, output_dir_lock, "trainer.output_dir", cfg.trainer.output_dir)
        return _run_grpo(cfg, evaluate_before_after)


EVAL_BEFORE_FILE = "eval_before.json"  # the held-out accuracy before training, in trainer.output_dir


GENERATED_OR_TASK_SETS = GENERATED_SETS + ("honest_sft",)  # split apart by their generators, never one file


def refuse_train_as_heldout(cfg: Config) -> None:
    """Training on the held-out file makes its accuracy measure memorised items: refused, naming both settings."""
    train, heldout = cfg.data.train, cfg.data.heldout
    if not train or not heldout or train in GENERATED_OR_TASK_SETS or heldout in GENERATED_OR_TASK_SETS:
        return
    from mmevo.data.overlap import same_data_source

    if same_data_source(source_split(train), source_split(heldout)):
        raise ValueError(f"data.train={train} and data.heldout={heldout} are the same data: the held-out accuracy "
                         "would score items trained on; give the held-out split (DIR@test) or another file, or "
                         "data.heldout='' to train without evaluation")


def note_heldout_overlap(train: list, heldout: list) -> int:
    """Held-out items whose problem and images also occur in the train set, counted and said on stderr."""
    import sys

    from mmevo.data.overlap import count_heldout_overlap
    from mmevo.grpo.distributed import is_main

    n = count_heldout_overlap(train, heldout)
    if n and is_main():  # every rank loads the same sets: one line
        print(f"[mmevo] warning: {n} of the {len(heldout)} data.heldout items also occur in data.train (same problem "
              "text and images): the held-out accuracy partly scores trained items (summary.json: "
              "data_heldout.train_overlap)", file=sys.stderr)
    return n


def _run_grpo(cfg: Config, evaluate_before_after: bool) -> dict:
    refuse_start_model_in_export(cfg, "trainer.output_dir", cfg.trainer.output_dir, "final")
    if cfg.trainer.steps > 0:
        refuse_train_as_heldout(cfg)
    train, train_stats = load_examples(cfg, "train")  # before the model: a bad data path fails in seconds
    if cfg.trainer.steps > 0:
        _need_train_rows(cfg, train)
    heldout, heldout_stats = load_examples(cfg, "heldout")
    if heldout and cfg.trainer.steps > 0:
        heldout_stats = {**heldout_stats, "train_overlap": note_heldout_overlap(train, heldout)}
    check_engine(cfg)
    policy = load_policy(cfg)
    note_unseen_images(policy, {"train": train if cfg.trainer.steps > 0 else [], "held-out": heldout or []})
    trainer = build_trainer(cfg, policy, train, heldout)
    from mmevo.grpo.distributed import is_main

    main = is_main()  # under DeepSpeed every rank runs this; only rank 0 prints and writes files
    out = Path(cfg.trainer.output_dir)
    # the held-out rows skipped at load time (data.skip_bad_rows) show beside the accuracies measured without them
    summary: dict = {"config": to_dict(cfg), "data": train_stats, "data_heldout": heldout_stats if heldout else None}
    resumed = latest_checkpoint_exists(out) and cfg.trainer.resume
    if not resumed and main:
        # a fresh run over a finished one: its summary.json and final/ would mark this run finished (to the demo and
        # reruns) until it finishes, and a kill in between left them naming the earlier run's weights as this one's
        remove_finished_markers(out)
    before_file = out / EVAL_BEFORE_FILE  # kept for the summary of a resumed (or rerun) run
    measured_before = evaluate_before_after and bool(heldout) and not resumed
    if measured_before:
        summary["eval_before"] = _strip(trainer.heldout_eval_now())  # trainer.steps=0: also the "after" one
        if main:
            print(f"[mmevo] held-out accuracy before GRPO: {_accuracy_text(summary['eval_before'], cfg)}")
            out.mkdir(parents=True, exist_ok=True)
            write_json_atomic(before_file, summary["eval_before"])  # read back by every resume: whole or absent
    elif evaluate_before_after and heldout and main and before_file.exists():
        summary["eval_before"] = json.loads(before_file.read_text())  # measured when this run started
    t0 = time.time()
    trainer.train()
    summary["train_seconds"] = time.time() - t0
    from mmevo.grpo.checkpoint import latest_checkpoint
    from mmevo.grpo.distributed import broadcast_from_main

    # the last periodic save (or a finished run's final one) is kept as is; rank 0 decides (the save is collective)
    last = broadcast_from_main(latest_checkpoint(out))
    if cfg.trainer.save_every and (last is None or last.name != f"step_{trainer.step_idx:06d}"):
        trainer.save()
    if trainer.settings_changes:  # summary["config"] holds the last run's values only: earlier steps ran under others
        summary["resumed_with_changes"] = trainer.settings_changes
    summary["final_model"] = str(trainer.export(out / "final"))
    if evaluate_before_after and heldout:
        summary["eval_after"] = _strip(trainer.heldout_eval_now())
        if main:
            print(f"[mmevo] held-out accuracy after GRPO: {_accuracy_text(summary['eval_after'], cfg)}")
    trainer.close()
    if not main:
        return summary
    from mmevo.metrics import plot_curves

    plot_curves(out / "metrics.jsonl", out / "curves.png",
                ["reward/total/mean", "frac_reward_zero_std", "actor/entropy", "actor/kl", "response/length_mean",
                 "time/step"], "GRPO")
    # whole or not at all: a rerun of a finished run writes it again, and a torn one (a kill, a full disk) still
    # marked the run finished for the demo, which then failed decoding it
    write_json_atomic(out / "summary.json", summary)
    return summary


def _accuracy_text(result: dict, cfg: Config) -> str:
    """A held-out summary's accuracy for the log line; every prompt over data.max_prompt_length leaves none (the
    line read ``result["accuracy"]``: a KeyError that ended the run before training, or after it on a resume)."""
    if "accuracy" in result:
        return f"{result['accuracy']:.3f}"
    return (f"none: all {result.get('skipped_overlong_prompts', 0)} held-out prompts are over "
            f"data.max_prompt_length={cfg.data.max_prompt_length}")


def run_eval(cfg: Config) -> dict:
    """Greedy held-out accuracy of ``model.path`` on ``data.heldout``. One process, as ``eval --benchmark`` /
    ``--calibration``: under a launcher every rank loaded the model, generated the whole set and printed the summary
    (the training loop's held-out evaluation is the one split across ranks)."""
    from mmevo.grpo.distributed import world_size
    from mmevo.grpo.trainer import PromptCache, evaluate, fitting_examples
    from mmevo.rollout.factory import build_engine

    if world_size() > 1:  # before anything is loaded: every rank refuses
        raise ValueError(f"mmevo eval (held-out accuracy) runs as one process, not under a launcher with WORLD_SIZE="
                         f"{world_size()}: each rank would generate the whole data.heldout set; run it without "
                         "torchrun / deepspeed")
    heldout, stats = load_examples(cfg, "heldout")  # before the model: a bad data path fails in seconds
    if not heldout:
        raise ValueError("data.heldout is empty: give a Geometry3K-schema file or 'synthetic'")
    check_engine(cfg)
    policy = load_policy(cfg)
    prompts = PromptCache(policy.processor, policy.is_vl, cfg.data.prompt_template, cfg.data.system_prompt,
                          cfg.data.prompt_cache_mb)
    # the set a training run's held-out evaluation scores (its summary's before / after): prompts over
    # data.max_prompt_length left out and counted
    heldout, overlong = fitting_examples(prompts, heldout, cfg.data.max_prompt_length)
    if not heldout:  # else a summary without an accuracy, and exit 0
        raise ValueError(f"data.heldout: all {overlong} prompts are over data.max_prompt_length="
                         f"{cfg.data.max_prompt_length} tokens: raise it to evaluate them")
    engine = build_engine(cfg, policy)
    try:
        result = evaluate(engine, prompts, heldout, policy.tokenizer,
                          cfg.trainer.eval_max_tokens or cfg.rollout.max_tokens, cfg.rollout.eval_temperature,
                          seed=cfg.trainer.seed)
    finally:  # vLLM's process group and memory go with it (a caller in the same process may start another)
        engine.close()
    if overlong:
        result["skipped_overlong_prompts"] = overlong
    return {**_strip(result), "data": stats}


SFT_EXPORT = "model"  # the SFT's export in sft.output_dir (a GRPO run's is final/)


def refuse_start_model_in_export(cfg: Config, out_key: str, out: str | Path, export: str) -> None:
    """A ``model.path`` that is (or lies inside) the export this run writes, ``<out>/<export>``, is refused before
    anything is loaded: a run that starts afresh removes that export first (``remove_finished_markers``), so a kill
    or an error before the run's own export lost the only copy of its start model, and every run writes its result
    there at the end, after which ``model.path`` in its config names the trained weights, not the ones it started
    from. (``mmevo sft model.path=runs/sft/model`` for a second SFT round deleted ``runs/sft/model`` as it began.)"""
    start = Path(cfg.model.path).expanduser()
    if cfg.model.path in TINY_ALIASES or not start.exists():  # an alias or a hub id: no directory of this run's
        return
    target = (Path(out).expanduser() / export).resolve()
    start = start.resolve()
    if start == target or target in start.parents:
        raise ValueError(f"model.path={cfg.model.path} is {out_key}/{export} ({target}), the export this run removes "
                         f"as it starts and writes its own result to: copy the model elsewhere and point model.path "
                         f"there, or use another {out_key}")


def remove_finished_markers(out: Path, export: str = "final") -> None:
    """Remove a finished run's ``summary.json`` (first: the marker the demo reads) and its export ``export/``."""
    import shutil

    (out / "summary.json").unlink(missing_ok=True)
    final = out / export
    if final.is_dir() and not final.is_symlink():  # a file or link there is not an export: the export refuses it
        shutil.rmtree(final)


def latest_checkpoint_exists(out: Path) -> bool:
    from mmevo.grpo.checkpoint import latest_checkpoint

    return latest_checkpoint(out) is not None


def _strip(ev: dict) -> dict:
    return {k: v for k, v in ev.items() if k != "samples"} | {"samples": ev.get("samples", [])[:5]}
