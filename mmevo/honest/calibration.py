"""HONEST calibration evaluation (seed section 8) and the hindsight audit (seed 2.5, "How to verify hindsight is
firing in any run").

- ``score_response`` / ``calibration_report``: per-sample records (response + gold) scored with the *lenient*
  protocol parser (evaluation recovers what it can) and the core answer equivalence; the report holds accuracy,
  abstain rate, malformed rate, the strict well-formed rate (what the training heads need), ECE (``expected_
  calibration_error``, 10 equal-width bins), Brier score and the bins of a reliability diagram;
- ``plot_reliability``: the diagram (accuracy per confidence bin against the diagonal, counts below);
- ``evaluate_calibration``: generate with the HF engine on held-out tasks and write ``responses.jsonl``,
  ``calibration.json`` and ``reliability.png``; ``run_calibration_eval`` is ``mmevo eval --calibration`` (and
  ``mmevo eval data.heldout=honest_tasks``);
- ``hindsight_audit``: the share of training steps whose hindsight reward was non-zero, from ``metrics.jsonl``.

Definitions (N = records): accuracy = correct / N (abstains and unreadable responses count as not correct);
abstain rate = abstains / N; malformed rate = responses that are neither a graded answer nor an abstain under the
lenient parser / N; ECE, Brier (mean (c - y)^2) and mean confidence over the graded responses (an answer with a
confidence), None when there are none; confidence sd (near 0: one degenerate value, seed 8's histogram check) and
confidence gap (mean confidence on correct answers minus on wrong ones: does the confidence discriminate);
gold-form rate (answers of the form the gold has, True / False or an integer, over the answers whose gold has one
of these forms: an answer of another form is sure to be wrong, the Brier reward's exploit at confidence 0).
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from mmevo.atomic import write_json_atomic
from mmevo.validation import is_blank_text, is_real_number

__all__ = ["score_response", "answer_has_gold_form", "calibration_report", "reliability_bins", "plot_reliability",
           "generate_records", "evaluate_calibration", "report_identity", "earlier_report", "write_report",
           "calibration_heldout", "run_calibration_eval", "hindsight_audit", "pillar_works"]

N_BINS = 10  # equal-width confidence bins of the ECE and the reliability diagram (seed 8)
PILLAR_ECE_BAR = -0.01  # seed 8: a pillar "works" if Delta ECE <= -0.01 vs. the base GRPO run (same seed, data, steps)


def pillar_works(ece_base: float, ece_pillar: float, bar: float = PILLAR_ECE_BAR) -> bool:
    """Seed 8's bar: Delta ECE = ece_pillar - ece_base <= ``bar`` (-0.01). A Delta of exactly -0.01 passes; the
    1e-12 slack keeps float rounding (0.29 - 0.30 = -0.00999...95) from deciding the boundary. Each ECE must be a
    number in [0, 1] and the bar finite: a NaN ECE (a run without graded samples) used to read as "does not work",
    and a string "0.3" as a number."""
    for name, x in (("ece_base", ece_base), ("ece_pillar", ece_pillar)):
        if not is_real_number(x) or not 0.0 <= x <= 1.0:  # NaN fails too
            raise ValueError(f"pillar_works: {name} must be an ECE in [0, 1], got {x!r}")
    if not is_real_number(bar) or not math.isfinite(bar):
        raise ValueError(f"pillar_works: bar must be a finite number, got {bar!r}")
    return (float(ece_pillar) - float(ece_base)) <= bar + 1e-12


# ----------------------------------------------------------------------------------------------------- scoring
def score_response(response: str, gold: str, choices: Sequence[str] | None = None) -> dict:
    """The lenient parse of one response and its correctness (core answer equivalence against ``gold``)."""
    from mmevo.honest.protocol import parse_lenient, parse_strict
    from mmevo.rewards.answers import answers_equivalent

    p = parse_lenient(response)
    correct = bool(p.answered and answers_equivalent(p.answer, gold, list(choices) if choices else None))
    gold_form = answer_has_gold_form(p.answer, gold) if p.answered and not choices else None
    if gold_form is False and correct:  # "5.0", "1,000", "true." are graded right: not of a sure-wrong form
        gold_form = True
    return {"answer": p.answer, "confidence": p.confidence, "abstain": p.abstain, "graded": p.graded,
            "well_formed": p.well_formed, "strict_well_formed": parse_strict(response).well_formed,
            "correct": correct, "hindsight": p.hindsight, "refined_confidence": p.refined_confidence,
            "malformed": list(p.malformed),
            "gold_form": gold_form}


_INTEGER = re.compile(r"[+-]?\d+")
_BOOLEANS = ("true", "false")


def answer_has_gold_form(answer: str, gold: str) -> bool | None:
    """Whether ``answer`` is of the form the question asks: True / False where the gold is one, an integer where the
    gold is one; None for any other gold. A Brier reward pays a sure-wrong answer at confidence 0 as much as a
    sure-right one at 1, and an answer of the wrong form is sure to be wrong: its share falling is that exploit."""
    gold = str(gold).strip()
    if gold.lower() in _BOOLEANS:
        return answer.strip().lower() in _BOOLEANS
    if _INTEGER.fullmatch(gold):
        return _INTEGER.fullmatch(answer.strip()) is not None
    return None


def _form_rate(scored: Sequence[dict]) -> float | None:
    """Share of the answers with a known gold form that have it (``answer_has_gold_form``); None without any."""
    known = [s["gold_form"] for s in scored if s.get("gold_form") is not None]
    return sum(known) / len(known) if known else None


def _checked(records: Sequence[dict]) -> list[dict]:
    out = []
    for i, r in enumerate(records):
        where = f"calibration record {i}" + (f" (id {r['id']!r})" if isinstance(r, dict) and "id" in r else "")
        if not isinstance(r, dict):
            raise ValueError(f"{where}: expected a mapping, got {type(r).__name__}")
        if not isinstance(r.get("response"), str):
            raise ValueError(f"{where}: field 'response' must be a string, got {r.get('response')!r}")
        if r.get("gold") is None:
            raise ValueError(f"{where}: field 'gold' is missing (a calibration report needs gold answers)")
        if isinstance(r["gold"], str) and is_blank_text(r["gold"]):  # every answer would be graded wrong
            raise ValueError(f"{where}: field 'gold' is empty (a calibration report needs gold answers)")
        out.append(r)
    return out


def reliability_bins(conf: Sequence[float], correct: Sequence[bool], bins: int = N_BINS) -> list[dict]:
    """Per equal-width bin of [0, 1]: edges, count, mean confidence and accuracy (None when empty). The binning is
    ``expected_calibration_error``'s: lo <= c < hi, c = 1.0 in the last bin, and lo / hi are the very edges it
    compares with (``ece_edges``: 0.30000000000000004, not 0.3, so c = 0.3 lies below the hi of the bin it is in)."""
    from mmevo.rewards.honest import ece_bins, ece_edges, is_outcome, n_bins

    bins = n_bins(bins)
    correct, conf = list(correct), list(conf)
    odd = [x for x in conf if isinstance(x, (bool, str, bytes)) or x is None]
    if odd:  # float() would read True as 1.0 and "0.5" as a number
        raise ValueError(f"reliability_bins: conf must hold numbers, got {odd[0]!r}")
    c = torch.tensor([float(x) for x in conf], dtype=torch.float64)  # [G]
    if not ((c >= 0) & (c <= 1)).all():  # NaN fails both; bucketize would file 1.5 or NaN in the last bin
        raise ValueError(f"reliability_bins: conf must lie in [0, 1], got {c[~((c >= 0) & (c <= 1))][0].item()}")
    bad = [x for x in correct if not is_outcome(x)]
    if bad:  # bool(None) / bool(nan) would count as a miss / a hit
        raise ValueError(f"reliability_bins: correct must hold only True / False (or 0 / 1), got {bad[0]!r}")
    y = torch.tensor([float(bool(x)) for x in correct], dtype=torch.float64)  # [G]
    if c.shape != y.shape:
        raise ValueError(f"{len(c)} confidences but {len(y)} correctness values")
    idx = ece_bins(c, bins)  # [G] bin of each confidence
    edges = ece_edges(bins)  # [bins + 1]
    out = []
    for b in range(bins):
        sel = idx == b
        n = int(sel.sum())
        out.append({"lo": edges[b], "hi": edges[b + 1], "count": n,
                    "mean_confidence": float(c[sel].mean()) if n else None,
                    "accuracy": float(y[sel].mean()) if n else None})
    return out


def calibration_report(records: Sequence[dict], bins: int = N_BINS) -> dict:
    """Accuracy, abstain / malformed rates, ECE, Brier and reliability bins of records with ``response`` and
    ``gold`` (optional ``choices``, and ``domain`` / ``difficulty`` for the breakdown)."""
    from mmevo.rewards.honest import expected_calibration_error, n_bins

    bins = n_bins(bins)  # a plain int: the report is written as JSON
    records = _checked(records)
    scored = [score_response(r["response"], r["gold"], r.get("choices")) for r in records]
    n = len(scored)
    graded = [s for s in scored if s["graded"]]
    conf = [s["confidence"] for s in graded]
    hits = [s["correct"] for s in graded]

    def share(key: str) -> float | None:
        return sum(bool(s[key]) for s in scored) / n if n else None

    report = {"n": n, "graded": len(graded), "answered": sum(s["answer"] is not None and not s["abstain"]
                                                             for s in scored),
              "correct": sum(s["correct"] for s in scored), "accuracy": share("correct"),
              "abstain_rate": share("abstain"),  # malformed_rate counted: 1 - 0.7 is 0.30000000000000004
              "malformed_rate": None if not n else sum(not s["well_formed"] for s in scored) / n,
              "well_formed_rate": share("well_formed"), "strict_well_formed_rate": share("strict_well_formed"),
              "hindsight_rate": None if not n else sum(s["hindsight"] is not None for s in scored) / n,
              "refinement_rate": None if not n else sum(s["refined_confidence"] is not None for s in scored) / n,
              "accuracy_graded": sum(hits) / len(hits) if hits else None,
              "mean_confidence": sum(conf) / len(conf) if conf else None,
              "confidence_sd": _sd(conf), "confidence_gap": _gap(conf, hits), "gold_form_rate": _form_rate(scored),
              "ece": None, "brier": None, "n_bins": bins, "bins": reliability_bins(conf, hits, bins)}
    if graded:
        c = torch.tensor(conf, dtype=torch.float64)
        y = torch.tensor(hits, dtype=torch.float64)
        report["ece"] = expected_calibration_error(c, y, bins)
        report["brier"] = float(((c - y) ** 2).mean())
    report["by"] = _breakdown(records, scored)
    return report


def _sd(values: list[float]) -> float | None:
    """Population sd of the stated confidences: near 0 flags the seed's "degenerate confidence value" (section 8)."""
    if not values:
        return None
    m = sum(values) / len(values)
    return (sum((v - m) ** 2 for v in values) / len(values)) ** 0.5


def _gap(conf: list[float], hits: list[bool]) -> float | None:
    """Mean confidence on correct answers minus on wrong ones (discrimination; None without both kinds)."""
    right = [c for c, h in zip(conf, hits) if h]
    wrong = [c for c, h in zip(conf, hits) if not h]
    return sum(right) / len(right) - sum(wrong) / len(wrong) if right and wrong else None


def _breakdown(records: list[dict], scored: list[dict]) -> dict:
    """n, accuracy, well-formed rate, gold-form rate and mean confidence per domain and per difficulty (when records
    carry them)."""
    by: dict[str, dict] = {}
    for key in ("domain", "difficulty"):
        groups: dict[str, list[dict]] = {}
        for r, s in zip(records, scored):
            if r.get(key) is not None:
                groups.setdefault(str(r[key]), []).append(s)
        if groups:
            by[key] = {g: {"n": len(ss), "accuracy": sum(s["correct"] for s in ss) / len(ss),
                           "well_formed_rate": sum(s["well_formed"] for s in ss) / len(ss),
                           "gold_form_rate": _form_rate(ss),
                           "mean_confidence": (sum(s["confidence"] for s in ss if s["graded"])
                                               / max(1, sum(s["graded"] for s in ss)))
                           if any(s["graded"] for s in ss) else None}
                       for g, ss in sorted(groups.items())}
    return by


def plot_reliability(report: dict, path: str | Path, title: str = "") -> Path:
    """Reliability diagram of a ``calibration_report``: per-bin accuracy against the diagonal (gaps shaded), the
    bin counts below; the title states ECE, Brier, accuracy and the well-formed rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    bins = report["bins"]
    width = 1.0 / len(bins)
    centers = [(b["lo"] + b["hi"]) / 2 for b in bins]
    fig, (ax, axc) = plt.subplots(2, 1, figsize=(5, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    ax.plot([0, 1], [0, 1], ls="--", color="gray", lw=1, label="perfect calibration")
    full = [(x, b) for x, b in zip(centers, bins) if b["count"]]
    if full:
        ax.bar([x for x, _ in full], [b["accuracy"] for _, b in full], width=width * 0.9, color="tab:blue",
               edgecolor="black", lw=0.5, label="accuracy")
        ax.bar([x for x, _ in full], [abs(b["mean_confidence"] - b["accuracy"]) for _, b in full],
               width=width * 0.9, bottom=[min(b["accuracy"], b["mean_confidence"]) for _, b in full],
               color="tab:red", alpha=0.3, label="gap to mean confidence")
    else:
        ax.text(0.5, 0.5, "no graded responses", ha="center", va="center")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("accuracy")
    ax.legend(loc="upper left", fontsize=7)

    def fmt(key: str) -> str:
        v = report.get(key)
        return "n/a" if v is None else f"{v:.3f}"

    ax.set_title(f"{title + chr(10) if title else ''}ECE {fmt('ece')}  Brier {fmt('brier')}  accuracy "
                 f"{fmt('accuracy')}  well-formed {fmt('well_formed_rate')}", fontsize=8)
    axc.bar(centers, [b["count"] for b in bins], width=width * 0.9, color="gray")
    axc.set_xlabel("stated confidence")
    axc.set_ylabel("responses")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


# --------------------------------------------------------------------------------------------------- generation
def _protocol_config(cfg):
    """A copy of ``cfg`` for generation: HF engine, the protocol prompt when none is set (template ``none``)."""
    from mmevo.honest.protocol import system_prompt

    c = copy.deepcopy(cfg)
    c.rollout.engine = "hf"
    if not c.data.system_prompt:
        c.data.system_prompt = system_prompt(c.honest.hindsight_mode)
        if c.data.prompt_template == "r1v":
            c.data.prompt_template = "none"
    return c


def generate_records(cfg, model_path, examples, samples: int = 1, max_tokens: int | None = None,
                     temperature: float | None = None) -> list[dict]:
    """Responses of ``model_path`` to ``examples`` (``samples`` each; HF engine; ``rollout.eval_temperature`` unless
    given, 0 = greedy), one scored record per response."""
    from mmevo.grpo.trainer import PromptCache
    from mmevo.models.loader import load_model
    from mmevo.rollout.base import RolloutRequest, SamplingParams, item_seeds
    from mmevo.rollout.factory import build_engine, fit_context_to_prompts
    from mmevo.rollout.strategy import decode

    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    examples = list(examples)
    if not examples:
        return []
    c = _protocol_config(cfg)
    max_tokens = max_tokens or c.eval.max_tokens or c.trainer.eval_max_tokens or c.rollout.max_tokens
    # the engine's context (data.max_prompt_length + the larger response budget) must hold this call's budget
    c.trainer.eval_max_tokens = max(c.trainer.eval_max_tokens, max_tokens)
    policy = load_model(str(model_path), c.model.dtype, c.model.device)
    policy.model.eval()
    prompts = PromptCache(policy.processor, policy.is_vl, c.data.prompt_template, c.data.system_prompt,
                          c.data.prompt_cache_mb)
    encoded = [prompts(ex) for ex in examples]
    # every task is answered: the protocol's system prompt alone can pass data.max_prompt_length (392 tokens of a
    # 256-token training limit), and the engine's context must hold them all
    fit_context_to_prompts(c, [len(e.input_ids) for e in encoded])
    engine = build_engine(c, policy)
    temperature = c.rollout.eval_temperature if temperature is None else temperature
    params = SamplingParams(temperature=temperature, top_p=1.0, max_tokens=max_tokens, seed=c.trainer.seed)
    # sampled: task i's samples seeded by (trainer.seed, i), whatever the engine's batching
    seeds = item_seeds(c.trainer.seed, range(len(examples)), temperature)
    records = []
    with torch.no_grad():
        outs = engine.generate([RolloutRequest(enc, n=samples, seed=s) for enc, s in zip(encoded, seeds)], params)
    for ex, group in zip(examples, outs, strict=True):
        for k, comp in enumerate(group):
            text = decode(policy.tokenizer, comp.full_ids)
            records.append({"id": ex.id, "sample": k, "response": text, "gold": ex.answer,
                            "choices": list(ex.choices), "domain": ex.meta.get("domain"),
                            "difficulty": ex.meta.get("difficulty"), "n_tokens": len(comp.token_ids),
                            "finish_reason": comp.finish_reason, **score_response(text, ex.answer, ex.choices)})
    close = getattr(engine, "close", None)
    if callable(close):
        close()
    return records


def evaluate_calibration(cfg, model_path, examples, out_dir, samples: int = 1, max_tokens: int | None = None,
                         temperature: float | None = None, title: str = "", extra: dict | None = None) -> dict:
    """Generate, score and write ``out_dir/responses.jsonl``, ``calibration.json`` (the report, the settings and
    their ``identity``, see ``report_identity``, plus the caller's ``extra`` keys) and ``reliability.png``; returns
    the report."""
    t0 = time.time()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    examples = list(examples)
    identity = report_identity(cfg, model_path, examples, samples, max_tokens, temperature)
    records = generate_records(cfg, model_path, examples, samples, max_tokens, temperature)
    report = calibration_report(records)
    report.update(model=str(model_path), examples=len(examples), samples=samples,
                  max_tokens=identity["max_tokens"], temperature=identity["temperature"],
                  hindsight_mode=cfg.honest.hindsight_mode, seconds=time.time() - t0, out_dir=str(out),
                  truncated=sum(r["finish_reason"] == "length" for r in records), identity=identity, **(extra or {}))
    (out / "responses.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                                         encoding="utf-8")
    plot_reliability(report, out / "reliability.png", title or Path(str(model_path)).name)
    write_report(out, report)  # last: a report on disk is a finished one
    return report


REPORT_FILE = "calibration.json"


def write_report(out: Path, report: dict) -> None:
    """``out/calibration.json``, replaced whole: a kill mid-write leaves the earlier report or none, not a torn one."""
    write_json_atomic(out / REPORT_FILE, report)


def report_identity(cfg, model_path, examples, samples: int = 1, max_tokens: int | None = None,
                    temperature: float | None = None) -> dict:
    """What a calibration report measures: the model (its path and a fingerprint of its weights), the tasks (their
    number and a digest of their ids, questions and gold answers: ``data.n_heldout``, ``eval.limit``, the task
    settings all show there), the prompt and the decoding. Two reports of one identity are the same evaluation."""
    import hashlib

    from mmevo.eval.runner import weights_fingerprint

    c = _protocol_config(cfg)
    temperature = c.rollout.eval_temperature if temperature is None else temperature
    tasks = json.dumps([[ex.id, ex.problem, str(ex.answer), list(ex.choices)] for ex in examples], default=str)
    identity = {"model": str(model_path), "weights": weights_fingerprint(model_path), "dtype": c.model.dtype,
                "tasks": len(examples), "tasks_digest": hashlib.sha256(tasks.encode()).hexdigest()[:16],
                "template": c.data.prompt_template, "system_prompt": c.data.system_prompt, "samples": samples,
                "max_tokens": max_tokens or c.eval.max_tokens or c.trainer.eval_max_tokens or c.rollout.max_tokens,
                "temperature": temperature}
    if temperature > 0:  # sampled responses depend on the seed; greedy ones do not
        identity["seed"] = c.trainer.seed
    return identity


def earlier_report(out: Path, identity: dict, overwrite: bool) -> dict | None:
    """The finished report in ``out`` when it is of ``identity`` (to reuse), else None (to evaluate). A report of
    another evaluation is refused, naming the file and what differs, unless ``overwrite`` (``eval.overwrite``): then
    it is replaced, and stderr says what the replaced one measured."""
    path = out / REPORT_FILE
    if not path.exists():
        return None
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        before = report.get("identity") if isinstance(report, dict) else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        report, before, why = None, None, f"it is not readable ({e})"
    else:
        why = "it records no identity (written by an older mmevo, or not a calibration report)"
    if isinstance(before, dict):
        diff = [k for k in identity if before.get(k) != identity[k]] + [k for k in before if k not in identity]
        if not diff:
            return report
        why = "another evaluation: " + ", ".join(f"{k} {before.get(k, '<unset>')!r} -> {identity.get(k, '<unset>')!r}"
                                                 for k in diff)
    if not overwrite:
        raise ValueError(f"{path} holds a finished calibration report of {why}; use another eval.out_dir, or "
                         "eval.overwrite=true to replace it")
    print(f"[mmevo] eval.overwrite=true: replacing {path}, a calibration report of {why}", file=sys.stderr)
    return None


def calibration_heldout(cfg) -> tuple[list, dict]:
    """Held-out ``honest_tasks`` for a calibration report (``data.n_heldout``, first ``eval.limit``); questions that
    also occur in the calibration SFT set of this config (``data.train=honest_sft``) are left out and counted."""
    from mmevo.recipes import load_examples

    if cfg.data.heldout != "honest_tasks":
        raise ValueError(f"a calibration report needs data.heldout=honest_tasks, got {cfg.data.heldout!r}")
    held, stats = load_examples(cfg, "heldout")
    stats = dict(stats)
    if cfg.data.train == "honest_sft":
        from mmevo.honest.sft import calibration_sft_examples

        seen = {ex.problem for ex in calibration_sft_examples(cfg)}
        kept = [ex for ex in held if ex.problem not in seen]
        stats["dropped_in_sft_set"] = len(held) - len(kept)
        held = kept
    if cfg.eval.limit:
        held = held[:cfg.eval.limit]
    stats["evaluated"] = len(held)
    return held, stats


def run_calibration_eval(cfg) -> dict:
    """``mmevo eval --calibration``: the report of ``model.path`` on held-out ``honest_tasks`` in ``eval.out_dir``
    (default ``runs/eval/calibration``). Holds the directory for the run (``mmevo.runlock``), as the benchmark
    evaluation does: two live evaluations into it wrote their files over each other. A finished report of the same
    evaluation is reused (``reused``: true); one of another is refused unless ``eval.overwrite=true``.

    Runs as one process, as ``mmevo eval --benchmark`` does: under a launcher (torchrun / deepspeed) every rank
    generated every task and wrote the report, rank 1 without holding ``eval.out_dir`` (only rank 0 locks it). No split
    across ranks is offered."""
    from mmevo.grpo.distributed import world_size
    from mmevo.recipes import hold_output_dir, resolve_model_path
    from mmevo.runlock import output_dir_lock

    if world_size() > 1:  # before anything is loaded or written: every rank refuses
        raise ValueError(f"mmevo eval --calibration runs as one process, not under a launcher with WORLD_SIZE="
                         f"{world_size()}: each rank would generate every held-out task and write the same "
                         f"eval.out_dir; run it without torchrun / deepspeed")
    from mmevo.models.loader import check_device
    from mmevo.recipes import check_start_model

    check_device("model.device", cfg.model.device)  # as eval --benchmark: the loader's own words name no setting
    check_start_model(cfg)
    held, stats = calibration_heldout(cfg)
    if not held:
        raise ValueError("no held-out honest_tasks to evaluate: raise data.n_heldout")
    out = Path(cfg.eval.out_dir or "runs/eval/calibration")
    max_tokens = cfg.eval.max_tokens or None
    with contextlib.ExitStack() as lock:
        hold_output_dir(lock, output_dir_lock, "eval.out_dir", out, owner="evaluation")  # before the model loads
        model_path = resolve_model_path(cfg)
        report = earlier_report(out, report_identity(cfg, model_path, held, max_tokens=max_tokens), cfg.eval.overwrite)
        reused = report is not None
        if reused:
            print(f"[mmevo] {out / REPORT_FILE}: the same evaluation (weights, tasks, prompt, decoding) finished "
                  "before: its report is reused (eval.overwrite=true evaluates again)", file=sys.stderr)
        else:
            report = evaluate_calibration(cfg, model_path, held, out, max_tokens=max_tokens, extra={"data": stats})
    return {**{k: v for k, v in report.items() if k not in ("bins", "by")}, "data": stats, "reused": reused,
            "files": [str(out / f) for f in (REPORT_FILE, "reliability.png", "responses.jsonl")]}


# -------------------------------------------------------------------------------------------------------- audit
def hindsight_audit(metrics_path: str | Path, head: str = "honest_hindsight") -> dict:
    """The seed's "fraction of steps the hindsight head returned non-zero", from a run's ``metrics.jsonl``.

    A step counts when its line has ``reward/<head>/nonzero_frac`` (the head's share of samples with a non-zero
    hindsight reward); it is non-zero when that share is > 0. ``fired`` (the head graded at least one hindsight
    slot) is reported beside it: a legacy slot can fire and still earn exactly 0 when r equals y. A step logged
    twice (a resumed run) counts once, its last line; a line without a step (or a null one) is a step of its own. A
    line that is not JSON, or whose step (a finite number or a string), share (a number in [0, 1]) or fired count
    (a number >= 0) is not one, is an error naming file and line.

    With ``honest.hindsight_prob`` < 1 only some steps offer the slot (``honest/hindsight_offered`` 1; a line
    without it offered it, as every step did before): ``offered_steps`` counts them and ``nonzero_share_offered`` is
    the non-zero share among them (the head pays 0 on the other steps by design). An offered flag other than 0 / 1
    is an error naming file and line."""
    from mmevo.honest.strategy import OFFERED_METRIC

    path = Path(metrics_path)
    if path.is_dir():
        path = path / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no metrics.jsonl to audit")
    key, fired_key = f"reward/{head}/nonzero_frac", f"reward/{head}/fired"
    by_step: dict = {}
    lines = without = 0
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        lines += 1
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{lineno}: not a JSON line ({e.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
        if key not in row:
            without += 1
            continue
        where = f"{path}:{lineno}"
        step = row.get("step")
        if step is None:  # no step (or null): the line is its own step; several nulls are not one step
            step = f"line{lineno}"
        # a list / object is no step id; true would merge with step 1; JSON's NaN / Infinity sort nowhere
        if isinstance(step, bool) or not isinstance(step, (int, float, str)) \
                or (isinstance(step, float) and not math.isfinite(step)):
            raise ValueError(f"{where}: field 'step' must be a finite number or a string, got {step!r}")
        offered = row.get(OFFERED_METRIC, 1)
        if isinstance(offered, bool) or offered not in (0, 1):
            raise ValueError(f"{where}: field {OFFERED_METRIC!r} must be 0 or 1, got {offered!r}")
        by_step[step] = (_logged_share(row, key, where, 1.0), _logged_share(row, fired_key, where, math.inf),
                         offered == 1)
    steps = len(by_step)
    ordered = [by_step[s] for s in sorted(by_step, key=_step_order)]
    tenth = max(1, steps // 10)
    nonzero = [s for s, (f, _, _) in by_step.items() if f > 0]
    fired = [s for s, (_, n, _) in by_step.items() if n > 0]
    offered_steps = sum(o for _, _, o in by_step.values())
    return {"path": str(path), "head": head, "metric": key, "steps": steps, "nonzero_steps": len(nonzero),
            "nonzero_share": len(nonzero) / steps if steps else None,
            "fired_steps": len(fired), "fired_share": len(fired) / steps if steps else None,
            "offered_steps": offered_steps,
            "nonzero_share_offered": len(nonzero) / offered_steps if offered_steps else None,
            "mean_nonzero_frac": sum(f for f, _, _ in by_step.values()) / steps if steps else None,
            # the trend: mean share of samples with a non-zero hindsight reward in the first / last tenth of steps
            "nonzero_frac_start": sum(f for f, _, _ in ordered[:tenth]) / tenth if steps else None,
            "nonzero_frac_end": sum(f for f, _, _ in ordered[-tenth:]) / tenth if steps else None,
            "first_nonzero_step": min(nonzero, key=_step_order) if nonzero else None, "lines": lines, "lines_without_metric": without}


def _logged_share(row: dict, key: str, where: str, hi: float) -> float:
    """A logged share / count in [0, hi] (a missing or null count is 0). NaN, inf, a bool or a string is an error:
    ``f > 0`` would read a NaN share as a silent step and ``float(True)`` as one."""
    v = row.get(key)
    if v is None and hi == math.inf:
        return 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and 0 <= v <= hi):
        raise ValueError(f"{where}: field {key!r} must be a number in [0, {hi:g}], got {v!r}")
    return float(v)


def _step_order(step) -> tuple:
    return (0, float(step), "") if isinstance(step, (int, float)) else (1, 0.0, str(step))
