"""``mmevo eval --benchmark NAME``: generate (greedy by default) through a rollout engine, score with the benchmark's
official rules, break down by category, write responses / scores / report.  Resumable: items already in
``responses.jsonl`` are not generated again.

Files in ``eval.out_dir``:

* ``run.json`` — what produced the responses (model, benchmark, prompt template, budget, decoding); a resume with a
  different model or prompt is refused unless ``eval.overwrite=true``.
* ``responses.jsonl`` — one line per item: id, response, extracted answer, correct, gold, tokens, finish reason,
  categories, question; appended after every batch, so an interrupted run loses at most one batch. A resume keeps a
  record whose id, question and gold are the item's; a sampled item draws from its own seed (its place in the
  benchmark), so a resume draws what the uninterrupted run would.
* ``scores.json`` — overall accuracy and per-category breakdowns; ``report.md`` + ``report.png``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mmevo.atomic import write_text_atomic
from mmevo.config import Config, render_prompt
from mmevo.data.benchmarks import BenchmarkItem, load_items
from mmevo.data.schema import DataError


@dataclass(frozen=True)
class BenchmarkSpec:
    format: str  # adapter in mmevo.data.benchmarks.FORMATS
    split: str  # split name in the benchmark's files / hub dataset
    hub: str  # hub dataset used when eval.data is empty
    categories: tuple[str, ...]  # BenchmarkItem.categories keys reported as breakdowns


# BenchmarkItem.categories keys each format's rows carry; MathVista's are the breakdowns of its official
# calculate_score.py, in its order
CATEGORIES: dict[str, tuple[str, ...]] = {
    "mathvision": ("subject", "level", "subject_level"),
    "mathvista": ("question_type", "answer_type", "language", "source", "category", "task", "context", "grade",
                  "skills"),
    "intergps": ("graph", "goal", "official_goal", "official_graph"),
}
# breakdowns reported in scores.json and report.md but not plotted (MATH-V's subject x level: up to 80 bars)
_TABLE_ONLY = ("subject_level",)
# InterGPS's per-type table (symbolic_solver/sub_acc.py): its rows in its column order, and its counting, once per
# label occurrence (a problem tagged Rectangle and Square counts twice under Quad)
ROW_ORDER: dict[str, tuple[str, ...]] = {
    "official_goal": ("Angle", "Length", "Area", "Ratio", "Other"),
    "official_graph": ("Line", "Triangle", "Quad", "Circle", "Other"),
}
PER_OCCURRENCE = frozenset({"official_goal", "official_graph"})
BENCHMARKS: dict[str, BenchmarkSpec] = {
    "mathvision_testmini": BenchmarkSpec("mathvision", "testmini", "MathLLMs/MathVision", CATEGORIES["mathvision"]),
    "mathvision_test": BenchmarkSpec("mathvision", "test", "MathLLMs/MathVision", CATEGORIES["mathvision"]),
    "mathvista_testmini": BenchmarkSpec("mathvista", "testmini", "AI4Math/MathVista", CATEGORIES["mathvista"]),
    "geometry3k_test": BenchmarkSpec("geometry3k", "test", "hiyouga/geometry3k", ()),
}

# (response, item) -> (extracted answer for the record, correct)
Scorer = Callable[[str, BenchmarkItem], tuple[str | None, bool]]


def _score_mathvision(response: str, item: BenchmarkItem) -> tuple[str | None, bool]:
    from mmevo.eval.scoring import extract_mathvision_answer, score_mathvision

    return extract_mathvision_answer(response), score_mathvision(response, item.row)


def _score_mathvista(response: str, item: BenchmarkItem) -> tuple[str | None, bool]:
    from mmevo.eval.scoring import extract_mathvista_answer, score_mathvista

    return extract_mathvista_answer(response, item.row), score_mathvista(response, item.row)


def _score_verifiable(response: str, item: BenchmarkItem) -> tuple[str | None, bool]:
    """Geometry3K / GeoQA / generic: last box, <answer> tag or choice letter; math-verify equivalence."""
    from mmevo.rewards.answers import answers_equivalent, extract_answer

    pred = extract_answer(response, item.choices)  # the adapters already turned a gold letter into the choice text
    return pred, answers_equivalent(pred, item.answer, item.choices)


SCORERS: dict[str, Scorer] = {"mathvision": _score_mathvision, "mathvista": _score_mathvista}


def scorer_for(fmt: str) -> Scorer:
    """The format's scorer, wrapped so that no model output can crash an evaluation (a failure scores wrong)."""
    score = SCORERS.get(fmt, _score_verifiable)

    def safe(response: str, item: BenchmarkItem) -> tuple[str | None, bool]:
        try:
            return score(response, item)
        except Exception as e:  # noqa: BLE001 - counted as wrong and visible in the record
            return f"<scoring error: {type(e).__name__}>", False

    return safe


def resolve(cfg: Config) -> tuple[str, str, str, tuple[str, ...]]:
    """(format, split, source, category keys) for ``cfg.eval``; Geometry3K given as a directory of
    ``[<split>/]<id>/data.json`` folders is InterGPS's layout."""
    e = cfg.eval
    if e.benchmark not in BENCHMARKS and not (e.data and e.format):
        raise ValueError(f"eval.benchmark={e.benchmark!r} is not one of {sorted(BENCHMARKS)}; for other data give "
                         "eval.data=PATH and eval.format=mathvision|mathvista|intergps|geometry3k|geoqa|generic")
    spec = BENCHMARKS.get(e.benchmark, BenchmarkSpec(e.format, e.split or "test", "", ()))
    source = e.data or spec.hub
    fmt = e.format or spec.format
    split = e.split or spec.split
    if fmt == "geometry3k" and e.data and Path(e.data).is_dir():
        root = Path(e.data)
        if (root / "data.json").is_file() or any(root.glob("*/data.json")) or any(root.glob(f"{split}/*/data.json")):
            fmt = "intergps"
    # the rows' own categories decide the breakdowns: the same data gives the same report with or without a
    # benchmark name
    cats = spec.categories if e.benchmark in BENCHMARKS and fmt == spec.format else CATEGORIES.get(fmt, ())
    return fmt, split, source, cats


_RECORD_KEYS = ("id", "response", "extracted", "correct", "gold", "finish_reason")  # what a resume reads
# finish reasons of items whose image could not be used (recorded so a resume skips them, left out of the scores)
IMAGE_SKIPS = ("image_corrupt", "image_aspect")


def _parse_records(data: bytes) -> tuple[dict[str, dict], int, int]:
    """(finished records by id, lines dropped, lines superseded) of ``responses.jsonl``'s bytes. Lines that do not
    parse (a run killed mid-write, bytes that are not UTF-8) and records lacking a field a resume reads are dropped
    (so generated again) and counted; of several lines of one id (a regenerated item is appended, the file rewritten
    only at the end of its run) the last stands."""
    records: dict[str, dict] = {}
    bad = superseded = 0
    for line in data.split(b"\n"):
        if not line.strip():
            continue
        try:
            rec = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            rec = None
        if isinstance(rec, dict) and all(k in rec for k in _RECORD_KEYS) and isinstance(rec["response"], str):
            superseded += str(rec["id"]) in records
            records[str(rec["id"])] = rec
        else:
            bad += 1
    return records, bad, superseded


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
_FINGERPRINT_CHUNKS, _FINGERPRINT_CHUNK_BYTES = 16, 1 << 16


def weights_fingerprint(model_path: str | os.PathLike) -> str | None:
    """A short digest of a local checkpoint's weight files, so that a resume notices new weights under the same path
    (a retrained checkpoint saved over the old one): each file's name and size and 16 evenly spaced 64 KiB chunks of
    its bytes, about a MiB a file whatever its size. Training changes weights throughout a file, so any fine-tune
    shows in the sampled chunks. None where ``model_path`` is not a local directory (a hub name)."""
    import hashlib

    root = Path(model_path)
    if not root.is_dir():
        return None
    digest = hashlib.sha256()
    files = sorted(p for p in root.iterdir() if p.is_file() and p.name.endswith(_WEIGHT_SUFFIXES))
    for f in files:
        size = f.stat().st_size
        digest.update(f"{f.name}\0{size}\0".encode())
        with open(f, "rb") as fh:
            starts = sorted({size * k // _FINGERPRINT_CHUNKS for k in range(_FINGERPRINT_CHUNKS)} | {
                max(0, size - _FINGERPRINT_CHUNK_BYTES)})
            for start in starts:
                fh.seek(start)
                digest.update(fh.read(_FINGERPRINT_CHUNK_BYTES))
    return digest.hexdigest()[:16] if files else None


def make_eval_out_dir(out: Path) -> None:
    """``eval.out_dir`` (or its default below runs/eval), made; a file there, or below one, was the bare OSError
    ("[Errno 17] File exists: ..."), naming no setting."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"eval.out_dir={out}: cannot be the evaluation's output directory ({e.strerror or e})") \
            from None


def _read_run_identity(run_file: Path) -> dict:
    """The identity an earlier run recorded beside its responses. Without it (deleted, or unreadable) the responses
    are of an unknown model and settings: reused, they were scored as this run's (a JSON error named no file)."""
    fix = "use another eval.out_dir or eval.overwrite=true"
    if not run_file.is_file():
        raise ValueError(f"{run_file.parent} holds responses.jsonl but no run.json: which model and settings produced "
                         f"those responses is unknown; {fix}")
    try:
        before = json.loads(run_file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{run_file}: not readable as the earlier run's identity ({e}); {fix}") from None
    if not isinstance(before, dict):
        raise ValueError(f"{run_file}: expected a JSON object (the earlier run's identity), got "
                         f"{type(before).__name__}; {fix}")
    return before


# identity keys whose absence from an earlier run.json is a difference: sampled responses written before per-item
# seeds (each item seeded by its place in the benchmark) were drawn under batch seeds; a resume mixed the two
_IDENTITY_KEYS_SINCE_CHANGE = frozenset({"sample_seeds"})


def _prepare_out_dir(out: Path, identity: dict, overwrite: bool) -> tuple[dict[str, dict], int]:
    """Check the run identity against an earlier run in ``out``; return its finished records."""
    make_eval_out_dir(out)
    run_file, resp_file = out / "run.json", out / "responses.jsonl"
    if overwrite:
        resp_file.unlink(missing_ok=True)
    data = resp_file.read_bytes() if resp_file.exists() else b""  # read once: checked, then parsed
    if data.strip():
        before = _read_run_identity(run_file)
        # a key the earlier run.json lacks (written before it was part of the identity) is not a difference, but for
        # _IDENTITY_KEYS_SINCE_CHANGE: a run before it drew its samples otherwise
        diff = sorted(k for k in identity
                      if before.get(k, None if k in _IDENTITY_KEYS_SINCE_CHANGE else identity[k]) != identity[k])
        if diff:
            changes = ", ".join(f"{k}: {before.get(k)!r} -> {identity[k]!r}" for k in diff)
            raise ValueError(f"{out} holds responses of a different run ({changes}); "
                             "use another eval.out_dir or eval.overwrite=true")
    write_text_atomic(run_file, json.dumps(identity, indent=2))  # a kill mid-write left a run.json no resume reads
    records, bad, superseded = _parse_records(data)
    if bad or superseded:  # one line per item again, and appends start on a clean line
        _write_records(resp_file, records)
    return records, bad


def summarize(items: list[BenchmarkItem], records: dict[str, dict], categories: tuple[str, ...]) -> dict:
    """Overall and per-category accuracy over ``items`` (all must have a record)."""
    def acc(n: int, c: int) -> dict:
        return {"n": n, "correct": c, "accuracy": c / n if n else 0.0}

    correct = sum(bool(records[it.id]["correct"]) for it in items)
    by: dict[str, dict] = {}
    for key in categories:
        groups: dict[str, list[int]] = {}
        for it in items:
            labels = it.categories.get(key, ["unknown"])
            # once per distinct label (MathVista's official skill filter is ``value in skills``), except where the
            # official script appends the item once per label (InterGPS)
            for value in labels if key in PER_OCCURRENCE else dict.fromkeys(labels):
                g = groups.setdefault(value, [0, 0])
                g[0] += 1
                g[1] += bool(records[it.id]["correct"])
        order = ROW_ORDER.get(key, ())
        by[key] = {v: acc(*groups[v]) for v in sorted(groups, key=lambda v: (
            order.index(v) if v in order else len(order), _natural(v)))}
    finish = [records[it.id].get("finish_reason") for it in items]
    return {**acc(len(items), correct), "truncated": finish.count("length"),
            "prompt_too_long": finish.count("prompt_too_long"), "by": by}


def _natural(s: str):
    """Number labels (levels) in numeric order, then the others: any label sorts ("²" is a digit int() refuses, a run of
    over 4300 digits too)."""
    if s.isdecimal():
        try:
            return (0, int(s), "")
        except ValueError:
            pass
    return (1, 0, s)


def _cell(label: str) -> str:
    """A label as one markdown table cell (a "|" or a line break would split the row)."""
    return " ".join(label.replace("|", "\\|").split())


def _pct(accuracy: float) -> str:
    """A percentage with two decimals, computed as the official scripts print it ((correct / n) * 100, rounded)."""
    return f"{accuracy * 100:.2f}%"


def write_report(out: Path, summary: dict, records: dict[str, dict], items: list[BenchmarkItem]) -> None:
    """``report.md`` (tables + a few responses) and ``report.png`` (per-category accuracy bars)."""
    data = summary["data"]
    skipped = f"{data['skipped']}" + (f" {data['skipped_by_reason']}" if data["skipped"] else "")
    if "skipped_at_generation" in data:
        skipped += f"; left out at generation: {data['skipped_at_generation']}"
    lines = [f"# {summary['benchmark']} — {summary['model']}", "",
             f"Accuracy **{_pct(summary['accuracy'])}** ({summary['correct']}/{summary['n']}); "
             f"prompt template `{summary['template']}`, max {summary['max_tokens']} new tokens, "
             f"temperature {summary['temperature']}.",
             f"Responses that hit the token budget: {summary['truncated']}; prompts over "
             f"eval.max_prompt_length or the context window (scored wrong): {summary['prompt_too_long']}; rows skipped while loading: "
             f"{skipped}.", ""]
    if summary.get("images_not_shown"):
        lines[3:3] = [f"Text-only model: the {summary['images_not_shown']} image(s) of these items were not shown to "
                      "it (a text-only baseline)."]
    if summary.get("limit"):
        lines[3:3] = [f"Only the benchmark's first {summary['limit']} items (eval.limit / --limit): not its score "
                      "over the whole set."]
    all_rows = summary.get("all_rows")  # absent from a summary built by summarize() alone
    left_out = all_rows["n"] - summary["n"] if all_rows else 0
    if left_out:
        lines[3:3] = [f"Counting the {left_out} rows left out as wrong, as the official scripts score every row: "
                      f"**{_pct(all_rows['accuracy'])}** ({summary['correct']}/{all_rows['n']})."]
    for key, groups in summary["by"].items():
        lines += [f"## By {key}", "", "| " + key + " | n | correct | accuracy |", "|---|---:|---:|---:|"]
        lines += [f"| {_cell(v)} | {g['n']} | {g['correct']} | {_pct(g['accuracy'])} |" for v, g in groups.items()]
        lines.append("")
    lines += ["## First responses", ""]
    for it in items[:5]:
        r = records[it.id]
        resp = r["response"].replace("\n", " ")
        lines.append(f"- id {it.id}: gold `{r['gold']}`, extracted `{r['extracted']}`, "
                     f"{'correct' if r['correct'] else 'wrong'}: {resp[:300]}{'…' if len(resp) > 300 else ''}")
    if summary["by"]:
        lines += ["", "![per-category accuracy](report.png)"]
        _plot(out / "report.png", summary)
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _plot(path: Path, summary: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in summary["by"] if k not in _TABLE_ONLY]
    heights = [max(1.5, 0.28 * len(summary["by"][k]) + 0.8) for k in keys]
    fig, axes = plt.subplots(len(keys), 1, figsize=(7, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    for ax, key in zip(axes[:, 0], keys):
        groups = summary["by"][key]
        names = list(groups)
        ax.barh(range(len(names)), [groups[n]["accuracy"] for n in names], color="tab:blue")
        # labels are data, not mathtext: "$\\frac$" in a subject name would stop the report
        ax.set_yticks(range(len(names)), [f"{n} ({groups[n]['n']})" for n in names], fontsize=7, parse_math=False)
        ax.invert_yaxis()
        ax.axvline(summary["accuracy"], color="tab:red", lw=1, ls="--")
        ax.set_xlim(0, 1)
        ax.set_title(f"accuracy by {key} (dashed: overall {_pct(summary['accuracy'])})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def run_name(cfg: Config) -> tuple[str, Path]:
    """(the run's name, its output directory: ``eval.out_dir``, else ``runs/eval/<name>``)."""
    fmt, _, source, _ = resolve(cfg)
    name = cfg.eval.benchmark or f"{fmt}:{Path(source).name}"
    return name, Path(cfg.eval.out_dir or Path("runs/eval") / name.replace(":", "_"))


def run_benchmark(cfg: Config, policy=None, engine=None) -> dict:
    """Evaluate ``model.path`` on ``eval.benchmark``; returns the summary written to scores.json.

    ``policy`` / ``engine`` reuse an already loaded model and rollout engine (``policy.path`` names the model).
    Holds ``eval.out_dir`` for the run (``mmevo.runlock``), as train and sft hold theirs: a second live evaluation
    into the same directory would generate every pending item again and append each one a second time.
    """
    from mmevo.grpo.distributed import world_size
    from mmevo.recipes import hold_output_dir
    from mmevo.runlock import output_dir_lock

    if world_size() > 1:  # every rank would generate every item and write the same out_dir
        raise ValueError(f"mmevo eval --benchmark runs as one process, not under a launcher with WORLD_SIZE="
                         f"{world_size()} (for several GPUs: --engine vllm rollout.tensor_parallel_size=N)")
    if policy is None:  # a --model that is no checkpoint failed only after the whole benchmark was read (from the
        # hub: downloaded) and run.json written, in the loader's words that name no setting
        from mmevo.models.loader import check_device
        from mmevo.recipes import check_start_model

        check_device("model.device", cfg.model.device)
        check_start_model(cfg)
    name, out = run_name(cfg)
    with contextlib.ExitStack() as held:
        hold_output_dir(held, output_dir_lock, "eval.out_dir", out, owner="evaluation")
        return _run_benchmark(cfg, name, out, policy, engine)


def _run_benchmark(cfg: Config, name: str, out: Path, policy=None, engine=None) -> dict:
    from tqdm import tqdm

    from mmevo.grpo.trainer import decode
    from mmevo.models.inputs import encode_prompt
    from mmevo.recipes import load_policy, note_unseen_images, resolve_model_path
    from mmevo.rollout.base import RolloutRequest, SamplingParams, item_seeds
    from mmevo.rollout.factory import build_engine

    e = cfg.eval
    fmt, split, source, categories = resolve(cfg)
    t0 = time.time()
    items, stats = load_items(fmt, source, split, image_root=e.image_root or None, fields=e.fields,
                              skip_bad=cfg.data.skip_bad_rows, limit=e.limit or None)
    if not items:
        raise ValueError(f"{source}: no usable items ({stats})")
    model_path = policy.path if policy is not None else resolve_model_path(cfg)
    max_tokens = e.max_tokens or cfg.trainer.eval_max_tokens or cfg.rollout.max_tokens
    identity = {"benchmark": name, "model": str(model_path), "format": fmt, "split": split,
                "template": cfg.data.prompt_template, "system_prompt": cfg.data.system_prompt,
                "max_tokens": max_tokens, "temperature": cfg.rollout.eval_temperature,
                "pixels": [cfg.data.min_pixels, cfg.data.max_pixels], "source": str(source),
                "image_root": e.image_root or None, "dtype": cfg.model.dtype,
                "weights": weights_fingerprint(model_path)}
    if cfg.rollout.eval_temperature > 0:  # sampled answers depend on the seed (not the batches); greedy ones do not
        identity["seed"] = cfg.trainer.seed
        identity["sample_seeds"] = "per item"  # item_seeds: (seed, the item's place in the benchmark)
        # HF and vLLM draw other samples from the same seed: a resume on the other engine mixed the two
        identity["engine"] = cfg.rollout.engine
    records, dropped = _prepare_out_dir(out, identity, e.overwrite)
    def final(rec: dict | None, it: BenchmarkItem) -> bool:
        """A record stands unless its gold or question changed, its prompt was too long under another limit or is now longer
        than ``eval.max_prompt_length``, or its image did not decode and now does (or bad rows are no longer
        skipped: then the image's error is raised)."""
        if rec is None or rec.get("gold") != it.answer or rec.get("question") != it.problem:
            return False  # the record of another item under this id (a reordered file, ids by row), or older
        if rec["finish_reason"] == "prompt_too_long":
            return rec.get("max_prompt_length") == e.max_prompt_length
        if e.max_prompt_length and rec.get("prompt_tokens", 0) > e.max_prompt_length:
            return False  # answered under a larger limit: scored as a fresh run with this limit would score it
        if rec["finish_reason"] in IMAGE_SKIPS:
            return cfg.data.skip_bad_rows and not _decodes(it)
        return True

    pending = [it for it in items if not final(records.get(it.id), it)]
    resumed = len(items) - len(pending)
    score = scorer_for(fmt)
    print(f"[mmevo] {name}: {len(items)} items from {source} ({stats['skipped']} rows skipped), "
          f"{resumed} already done in {out}, {len(pending)} to generate")

    rewrite = any(it.id in records for it in pending)  # superseded lines are dropped from the file at the end
    generated: set[str] = set()  # ids scored just now
    if pending:
        policy = policy or load_policy(cfg, str(model_path))
        prompt_limit = _prompt_limit(policy.model, e.max_prompt_length, max_tokens)
        cfg = copy.deepcopy(cfg)  # the caller's config (a run that goes on to train) keeps its own budgets
        cfg.rollout.max_tokens = cfg.trainer.eval_max_tokens = max_tokens  # these size vLLM's max_model_len
        cfg.data.max_prompt_length = prompt_limit
        if engine is None:
            engine = build_engine(cfg, policy)
        else:  # the caller's engine keeps its own context: prompts it cannot hold are left out, not the whole batch
            prompt_limit = engine_prompt_limit(engine, prompt_limit, max_tokens)
        # a prompt_too_long record names the limit it was refused under: e.max_prompt_length, unless the caller's
        # engine set a smaller one (a resume without that engine answers it then)
        refused_under = e.max_prompt_length if prompt_limit == cfg.data.max_prompt_length else prompt_limit
        # a text model on a visual benchmark answers blind: say so, not only in the (low) accuracy
        note_unseen_images(policy, {"pending benchmark": pending},
                           " (a text-only baseline; images_not_shown in scores.json)")
        params = SamplingParams(temperature=cfg.rollout.eval_temperature, top_p=1.0, max_tokens=max_tokens,
                                seed=cfg.trainer.seed)
        place = {it.id: k for k, it in enumerate(items)}
        bar = tqdm(total=len(items), initial=resumed, desc=name, unit="item", disable=not cfg.trainer.progress)
        with open(out / "responses.jsonl", "a", encoding="utf-8") as fh:
            for start in range(0, len(pending), e.batch_size):
                batch = pending[start:start + e.batch_size]
                prompts, fresh = [], []
                for it in batch:
                    try:
                        # each image fitted as it is decoded (not a whole batch at full size first)
                        images = it.load_images(cfg.data.min_pixels, cfg.data.max_pixels) if policy.is_vl else []
                    except DataError as err:
                        if not cfg.data.skip_bad_rows:
                            raise
                        # recorded under its reason (undecodable, or an aspect ratio the processor refuses), so a
                        # resume does not load the model again for it; left out of the scores
                        reason = err.reason if err.reason in IMAGE_SKIPS else "image_corrupt"
                        fresh.append(_record(it, str(err), None, False, 0, reason))
                        continue
                    p = encode_prompt(policy.processor, policy.is_vl, render_prompt(cfg.data.prompt_template,
                                      it.problem), images, cfg.data.system_prompt or None)
                    if len(p.input_ids) > prompt_limit:
                        fresh.append({**_record(it, "", None, False, 0, "prompt_too_long"),
                                      "prompt_tokens": len(p.input_ids), "max_prompt_length": refused_under})
                    else:
                        prompts.append((it, p))
                # sampled: a seed per item from its place in the benchmark, so its answer does not depend on
                # eval.batch_size, on the other items of its batch or on which items a resume still had pending
                seeds = item_seeds(cfg.trainer.seed, [place[it.id] for it, _ in prompts],
                                   cfg.rollout.eval_temperature)
                outs = engine.generate([RolloutRequest(p, n=1, seed=s) for (_, p), s in zip(prompts, seeds)],
                                       params) if prompts else []
                for (it, p), (c,) in zip(prompts, outs, strict=True):
                    text = decode(policy.tokenizer, c.full_ids)
                    fresh.append({**_record(it, text, *score(text, it), len(c.token_ids), c.finish_reason),
                                  "prompt_tokens": len(p.input_ids),
                                  **({} if policy.is_vl or not it.images else {"images_not_shown": len(it.images)})})
                fresh.sort(key=lambda r: place[r["id"]])  # the benchmark's order, skipped items included
                records.update((r["id"], r) for r in fresh)
                generated.update(r["id"] for r in fresh)
                fh.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in fresh))
                fh.flush()
                bar.update(len(batch))
        bar.close()

    # re-score every response kept from an earlier run with the current rules (a scorer fix applies to it too)
    for it in items:
        rec = records.get(it.id)
        if rec is not None and rec.get("categories") != it.categories:  # older records lack them
            rec["categories"] = it.categories
            rewrite = True
        if rec is not None and it.id not in generated and rec["finish_reason"] not in ("prompt_too_long",
                                                                                         *IMAGE_SKIPS):
            extracted, correct = score(rec["response"], it)
            extracted = None if extracted is None else str(extracted)
            if (extracted, correct) != (rec["extracted"], rec["correct"]):
                rec.update(extracted=extracted, correct=correct)
                rewrite = True
    if rewrite:
        _write_records(out / "responses.jsonl", records)

    unusable = Counter(records[it.id]["finish_reason"] for it in items if records[it.id]["finish_reason"] in IMAGE_SKIPS)
    if unusable:
        stats["skipped_at_generation"] = dict(sorted(unusable.items()))
    done = [it for it in items if records[it.id]["finish_reason"] not in IMAGE_SKIPS]
    scores = summarize(done, records, categories)
    # the official scripts score every row of the set: a row skipped at load or at generation counts as wrong there
    rows = stats["rows"]
    scores["all_rows"] = {"n": rows, "correct": scores["correct"],
                          "accuracy": scores["correct"] / rows if rows else 0.0}
    # images a text-only model never saw, kept per record so that a resumed evaluation counts them too
    scores["images_not_shown"] = sum(records[it.id].get("images_not_shown", 0) for it in done)
    # a --limit run scores the benchmark's first items only: said beside the accuracy, which is no benchmark score
    # (0: every item, also where the limit is the set's size or over it)
    limit = e.limit if stats.get("cut_by_limit") else 0
    summary = {**identity, **scores, "limit": limit, "data": stats,
               "resumed_items": resumed, "generated_items": len(items) - resumed, "dropped_corrupt_lines": dropped,
               "seconds": time.time() - t0, "out_dir": str(out)}
    (out / "scores.json").write_text(json.dumps(summary, indent=2))
    write_report(out, summary, records, done)
    return summary


def _decodes(it: BenchmarkItem) -> bool:
    try:
        it.load_images()
    except DataError:
        return False
    return True


def engine_prompt_limit(engine, prompt_limit: int, max_tokens: int) -> int:
    """``prompt_limit`` lowered so that prompt + ``max_tokens`` fits a given engine's context length
    (``max_model_len``; None or absent: unbounded). Both engines refuse a whole generate call when one request is
    above it, so a benchmark run on a caller's engine (a training run's: data.max_prompt_length + its response budget)
    scores the prompts it cannot hold as prompt_too_long instead of failing every batch that holds one."""
    context = getattr(engine, "max_model_len", None)
    if context is None:
        return prompt_limit
    if max_tokens >= context:
        raise ValueError(f"eval.max_tokens={max_tokens} leaves no room for a prompt in the given engine's context "
                         f"length of {context} tokens (its max_model_len): raise that engine's context or lower "
                         "eval.max_tokens")
    return min(prompt_limit, context - max_tokens)


def _prompt_limit(model, max_prompt_length: int, max_tokens: int) -> int:
    """``eval.max_prompt_length``, lowered so that prompt + response fits the model's context window."""
    config = getattr(model, "config", None)
    text_config = getattr(config, "text_config", None) or config
    context = getattr(text_config, "max_position_embeddings", None)
    if not context:
        return max_prompt_length
    if max_tokens >= context:
        raise ValueError(f"eval.max_tokens={max_tokens} leaves no room for a prompt in the model's context of "
                         f"{context} tokens")
    return min(max_prompt_length, context - max_tokens)


def _write_records(path: Path, records: dict[str, dict]) -> None:
    """Rewrite ``responses.jsonl`` atomically, one line per id."""
    write_text_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records.values()))


def _record(it: BenchmarkItem, text: str, extracted, correct: bool, n_tokens: int, finish: str) -> dict:
    # categories: with the finish reason (IMAGE_SKIPS are left out) enough to recompute scores.json from this file
    return {"id": it.id, "response": text, "extracted": None if extracted is None else str(extracted),
            "correct": bool(correct), "gold": it.answer, "n_tokens": n_tokens, "finish_reason": finish,
            "categories": it.categories, "question": it.problem}  # question: with the id, which item it answers
