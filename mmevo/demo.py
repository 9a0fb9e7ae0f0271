"""The main job on the embedded default: tiny Qwen2.5-VL on figure tasks whose values are only in the image, on CPU.

``mmevo demo`` (= ``--method csrs``): SFT warm-up on worked solutions, then two label-free runs from the same SFT
checkpoint, side by side: CSRS (retrace re-inference, visual perturbation, softened frequency reward) and majority
vote (MM-UPT). No gold answer reaches either reward; gold answers are used only to score the held-out set and for the
logged pseudo-label accuracy. ``--method grpo`` runs GRPO with the verifiable accuracy reward instead.

Held-out pass@1 (mean correctness of 8 samples at temperature 1) and maj@8 are measured before and after, with 95%
bootstrap intervals; the image-ablation controls (blank and shuffled images) and the text-only chance level show that
the model reads the figure. Everything resumes: a rerun skips finished phases and continues SFT and each run from
their last saved state. Writes ``<out>/result.json`` and ``<out>/report.md`` with the plots beside it
(``--method grpo``: ``result_grpo.json``, ``report_grpo.md``, ...; ``method_files``); a rerun that measures nothing
again keeps them as they are, with the times of the invocation that measured them.
"""

from __future__ import annotations

import copy
import json
import math
import multiprocessing
import os
import time
from pathlib import Path

from mmevo.atomic import write_json_atomic, write_text_atomic
from mmevo.config import Config, load_config, set_dotted

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo_tiny.yaml"
METHODS = {"csrs": ("csrs", "mv"), "grpo": ("grpo",)}  # --method -> the runs it trains from the SFT checkpoint
# what each run changes in the demo config: label-free runs hide the gold answers from everything but the evaluation
RUNS: dict[str, dict] = {
    "csrs": {"csrs.enabled": True, "reward.heads": {"sfr": 1.0}, "data.hide_labels": True},
    "mv": {"csrs.enabled": False, "reward.heads": {"majority": 1.0}, "data.hide_labels": True},
    "grpo": {"csrs.enabled": False, "reward.heads": {"accuracy": 0.9, "format": 0.1}, "data.hide_labels": False},
}
LABELS = {"sft": "SFT (start)", "csrs": "CSRS (label-free)", "mv": "majority vote (label-free)",
          "grpo": "GRPO (verifiable reward)"}
EVAL_SAMPLES = 8  # samples per held-out problem: pass@1 is their mean correctness, maj@8 their modal answer's


def demo_config(overrides: list[str] | None = None, out_dir: str = "runs/demo", config_path: str | None = None) -> Config:
    """The demo's config: ``configs/demo_tiny.yaml`` (or ``config_path``), outputs under ``out_dir``, then overrides."""
    base = [f"trainer.output_dir={out_dir}/run", f"sft.output_dir={out_dir}/sft"]
    return load_config(config_path or DEMO_CONFIG, base + list(overrides or []))


def plan_threads(configured: int, available: int | None = None) -> dict:
    """How the demo uses the machine: ``configured`` cores (``trainer.threads``; 0 = all there are) capped at the
    ``available`` ones; with two or more the two label-free runs train at once, one half of the threads each."""
    available = available or len(os.sched_getaffinity(0))
    use = min(configured or available, available)
    note = None
    if configured and available < configured:
        note = (f"this machine has {available} core(s), the config asks for {configured} (trainer.threads): "
                f"using {use}" + ("; the runs go one after the other" if use < 2 else ""))
    return {"configured": configured, "available": available, "threads": use, "parallel": use >= 2,
            "threads_per_run": max(1, use // 2) if use >= 2 else use, "note": note}


def run_config(cfg: Config, name: str, out: Path, sft_model: Path) -> Config:
    """The config of one run (``RUNS[name]``) from the SFT checkpoint, writing to ``out/name``."""
    c = copy.deepcopy(cfg)
    for key, value in {**RUNS[name], "model.path": str(sft_model), "trainer.output_dir": str(out / name)}.items():
        set_dotted(c, key, value)
    return c


def run_demo(cfg: Config, out_dir: str = "runs/demo", method: str = "csrs") -> dict:
    import torch

    from mmevo.recipes import load_examples, resolve_model_path, run_sft

    if method not in METHODS:
        raise ValueError(f"--method {method!r} not in {sorted(METHODS)}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    threads = plan_threads(cfg.trainer.threads)
    if threads["note"]:
        print(f"[mmevo demo] {threads['note']}")
    torch.set_num_threads(threads["threads"])
    print(f"[mmevo demo] building the tiny model in {cfg.model.cache_dir}")
    base_model = resolve_model_path(cfg)

    sft_dir = Path(cfg.sft.output_dir)
    sft_model = sft_dir / "model"
    names = METHODS[method]
    configs = {n: run_config(cfg, n, out, sft_model) for n in names}
    reused = []  # phases finished by an earlier invocation: their time is not in this one's total
    if (sft_dir / "summary.json").exists():
        reused.append("sft")
        sft_summary = json.loads((sft_dir / "summary.json").read_text())
        expected = math.ceil(cfg.data.n_train * cfg.sft.epochs / cfg.sft.batch_size)
        if sft_summary.get("steps") != expected:
            raise ValueError(f"{sft_dir} holds an SFT of {sft_summary.get('steps')} steps, this config asks for "
                             f"{expected}: use another --out (or delete {sft_dir} and the runs after it)")
        changed = sft_changes(sft_summary, cfg)
        if changed:  # before, an SFT of the same length was reused whatever its sft.lr, data or model
            raise ValueError(f"{sft_dir} holds an SFT with other settings ({', '.join(changed)}): use another --out "
                             f"(or delete {sft_dir} and the runs after it)")
        print(f"[mmevo demo] reusing the SFT model in {sft_dir / 'model'}")
    # before anything is trained or evaluated: a refused run (rollout.max_tokens changed, say) was refused only after
    # the start's evaluation was made again under the new settings and written over the one result.json states
    check_runs(configs.values(), HELDOUT_KEYS)
    if "sft" not in reused:
        print(f"[mmevo demo] SFT warm-up on {cfg.data.n_train} worked solutions ({cfg.data.train} tasks)")
        sft_summary = run_sft(cfg)
    t_sft = time.time() - t0

    train, _ = load_examples(cfg, "train")
    heldout, _ = load_examples(cfg, "heldout")
    evals = {"sft": cached_eval(out / "evals" / "sft.json", cfg, sft_model, heldout, controls=True)}
    _print_eval("sft", evals["sft"])

    t_runs = time.time()
    parallel = len(names) if threads["parallel"] else 1
    trained_before = [n for n in names if (Path(configs[n].trainer.output_dir) / "summary.json").exists()]
    reused += run_jobs({n: (configs[n], out / "evals" / f"{n}.json") for n in names}, parallel,
                       threads["threads_per_run"] if parallel > 1 else threads["threads"], LABELS,
                       problems=evals["sft"]["problems"])
    for n in names:
        evals[n] = json.loads((out / "evals" / f"{n}.json").read_text())
        _print_eval(n, evals[n])
    t_end = time.time()
    total = t_end - t0

    result = build_result(evals, names, train, heldout)
    # the three parts of the total: the start's evaluation (with loading the problems) was in neither of the two the
    # report named ("Total time 2.0 min (SFT 0.0 min, runs 1.5 min)")
    result.update(method=method, base_model=base_model, sft_model=str(sft_model), sft_seconds=t_sft,
                  start_eval_seconds=t_runs - t0 - t_sft, runs_seconds=t_end - t_runs, total_seconds=total,
                  reused_phases=reused, threads=threads,
                  sft_steps=sft_summary.get("steps"),
                  # trained by an earlier invocation, evaluated in this one: "runs N min" is their evaluation
                  reevaluated_runs=[n for n in trained_before if n not in reused])
    result = publish(out, method, cfg, configs, result, evals, sorted(reused) == sorted(["sft", *names]))
    print(f"[mmevo demo] done in {total / 60:.1f} min; report: {method_files(out, method)['report']}")
    return result


def publish(out: Path, method: str, cfg: Config, configs: dict[str, Config], result: dict, evals: dict,
            all_reused: bool) -> dict:
    """Write ``method``'s report, its plots and then its result (``method_files``); returns the result they state.
    Where nothing was measured again (``all_reused``) and the saved result has these figures, it is kept with its times
    (a plain rerun rewrote the report with its own seconds of reuse). The result is written last: a kill before it
    leaves the old result, whose figures differ, so the rerun draws the plots and report again (written first, a kill
    before the plots left a result the rerun kept beside the old plots)."""
    files = method_files(out, method)
    saved = read_saved_result(files["result"], method)
    if saved is not None and all_reused and same_figures(saved, result):
        print(f"[mmevo demo] nothing was measured again: keeping {files['result'].name} and its times")
        write_report(out, cfg, configs, saved, evals, files, replot=False)  # a report or plot lost is drawn again
        return saved
    write_report(out, cfg, configs, result, evals, files)
    write_json_atomic(files["result"], result)  # a kill mid-write leaves the old file or none
    return result


def method_files(out: Path, method: str) -> dict[str, Path]:
    """Where a method's result, report and plots go: the default label-free demo's are ``result.json``,
    ``report.md``, ``accuracy.png`` and ``curves.png``; another method's carry its name (``report_grpo.md``, ...), so
    that ``--method grpo`` into the same ``--out`` keeps the label-free results (it wrote over them)."""
    tag = "" if method == "csrs" else f"_{method}"
    return {"result": out / f"result{tag}.json", "report": out / f"report{tag}.md",
            "accuracy": out / f"accuracy{tag}.png", "curves": out / f"curves{tag}.png"}


# what differs between two invocations that measured the same thing: how long they took and what they reused
_TIMING_KEYS = ("sft_seconds", "start_eval_seconds", "runs_seconds", "total_seconds", "reused_phases",
                "reevaluated_runs", "threads")


def same_figures(saved: dict, result: dict) -> bool:
    """``saved`` (read back from result.json) holds the same figures and settings as ``result``, times apart."""
    now = json.loads(json.dumps(result, default=str))  # tuples as lists, as the saved file holds them
    return ({k: v for k, v in saved.items() if k not in _TIMING_KEYS}
            == {k: v for k, v in now.items() if k not in _TIMING_KEYS})


def read_saved_result(path: Path, method: str) -> dict | None:
    """The result an earlier invocation of ``method`` saved at ``path``; None where there is none or it is torn (then
    written again). A result of another method there (an earlier build wrote every method's to result.json) is
    refused: writing over it would lose that method's results."""
    if not path.exists():
        return None
    try:
        saved = json.loads(path.read_text())
    except ValueError:
        print(f"[mmevo demo] {path} is unreadable: writing it again", flush=True)
        return None
    if not isinstance(saved, dict):
        return None
    if saved.get("method", method) != method:
        raise ValueError(f"{path} holds the results of --method {saved['method']}, not {method}: move it away (or "
                         "use another --out) to keep them")
    return saved


# -- evaluation ---------------------------------------------------------------------------------------------------
def sampled_eval(cfg: Config, model_path: Path, examples, controls: bool = False) -> dict:
    """pass@1 / maj@8 of ``model_path`` on ``examples`` (HF engine, temperature 1); with ``controls`` also on blank
    and on shuffled images. Per-problem values are kept for paired intervals."""
    from mmevo.data.figures import blank_images, shuffled_images
    from mmevo.eval.sampled import sampled_records, summarize_sampled
    from mmevo.grpo.trainer import PromptCache
    from mmevo.models.loader import load_model
    from mmevo.rollout.factory import build_engine, fit_context_to_prompts

    c = copy.deepcopy(cfg)
    c.rollout.engine = "hf"
    policy = load_model(str(model_path), c.model.dtype, c.model.device)
    policy.model.eval()
    prompts = PromptCache(policy.processor, policy.is_vl, c.data.prompt_template, c.data.system_prompt,
                          c.data.prompt_cache_mb)
    max_tokens = c.trainer.eval_max_tokens or c.rollout.max_tokens
    sets = {"real": list(examples)}
    if controls:
        sets.update(blank=blank_images(examples), shuffled=shuffled_images(examples, seed=c.data.seed))
    # every problem is sampled (no training filter before it): the engine's context holds the longest prompt
    fit_context_to_prompts(c, [len(prompts(ex).input_ids) for exs in sets.values() for ex in exs])
    engine = build_engine(c, policy)
    res = {}
    for name, exs in sets.items():
        recs = sampled_records(engine, prompts, exs, policy.tokenizer, EVAL_SAMPLES, max_tokens,
                               temperature=1.0, seed=c.trainer.seed)
        res[name] = summarize_sampled(recs, seed=c.trainer.seed)
        if name == "real":
            res["per_problem"] = {"pass1": [r["pass1"] for r in recs], "maj": [r["maj"] for r in recs]}
            res["samples"] = [{"id": r["id"], "gold": r["gold"], "response": r["sample"]} for r in recs[:5]]
    return res


def model_stamp(model_path: Path) -> list:
    """Name, size and modification time of each file of a model directory: a model rebuilt or retrained at the same
    path does not match what was recorded for the old one."""
    p = Path(model_path)
    return sorted([f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in p.iterdir() if f.is_file()) \
        if p.is_dir() else []


def eval_key(cfg: Config, model_path: Path, examples, controls: bool) -> dict:
    """What a cached evaluation must match to be reused: the model (path and files), the problems, the sampling."""
    return {"model": str(model_path), "files": model_stamp(model_path), "n": len(examples),
            "problems": problems_digest(examples), "controls": controls, **_sampling_key(cfg)}


def problems_digest(examples) -> str:
    """A digest of the problems of an evaluation set (ids, texts, gold answers, choices): which set was evaluated."""
    import hashlib

    return hashlib.sha256(json.dumps([[ex.id, ex.problem, str(ex.answer), list(ex.choices or [])]
                                      for ex in examples]).encode()).hexdigest()


def _sampling_key(cfg: Config) -> dict:  # key names apart from sampled_eval's ("samples" are example responses)
    return {"eval_samples": EVAL_SAMPLES, "seed": cfg.trainer.seed, "max_tokens": cfg.trainer.eval_max_tokens or
            cfg.rollout.max_tokens, "template": [cfg.data.prompt_template, cfg.data.system_prompt]}


def cached_eval(path: Path, cfg: Config, model_path: Path, examples, controls: bool = False) -> dict:
    """``sampled_eval``, written to ``path`` and read back on a rerun while ``eval_key`` (model files, problems,
    sampling) is unchanged."""
    key = eval_key(cfg, model_path, examples, controls)
    cached = read_cached_eval(path)
    if cached is not None and all(cached.get(k) == v for k, v in key.items()):
        return cached
    res = {**key, **sampled_eval(cfg, model_path, examples, controls)}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, res, indent=None)  # a kill mid-write leaves the old file or none
    return res


def read_cached_eval(path: Path) -> dict | None:
    """The evaluation saved at ``path``; None where there is none, or where it is unreadable (torn by a kill while an
    earlier build wrote it in place: the rerun raised a bare JSONDecodeError), which is said and evaluated again."""
    if not path.exists():
        return None
    try:
        cached = json.loads(path.read_text())
    except ValueError as e:
        print(f"[mmevo demo] {path} is unreadable ({e}): evaluating again", flush=True)
        return None
    return cached if isinstance(cached, dict) else None


def _print_eval(name: str, ev: dict) -> None:
    r = ev["real"]
    line = (f"[mmevo demo] {LABELS[name]}: pass@1 {r['pass1']:.3f} [{r['pass1_ci'][0]:.3f}, {r['pass1_ci'][1]:.3f}]"
            f"  maj@8 {r['maj']:.3f} [{r['maj_ci'][0]:.3f}, {r['maj_ci'][1]:.3f}]")
    if "blank" in ev:
        line += f"  (blank image {ev['blank']['pass1']:.3f}, shuffled {ev['shuffled']['pass1']:.3f})"
    print(line, flush=True)


def build_result(evals: dict, names, train, heldout) -> dict:
    """The numbers of the report: pass@1 / maj@8 with intervals per model, paired lifts, controls, chance."""
    from mmevo.data.figures import text_only_chance
    from mmevo.eval.sampled import paired_diff_ci

    before = evals["sft"]
    sets = {n: ev.get("problems") for n, ev in evals.items()}
    if len(set(sets.values())) > 1:  # one held-out set or no comparison: the lifts pair problem i with problem i
        raise ValueError(f"the evaluations are of different held-out sets (problems digests {sets}): evaluate "
                         "every model on one")
    res: dict = {"heldout_problems": len(heldout), "samples_per_problem": EVAL_SAMPLES,
                 # trainer.eval_max_tokens changes no run (a rerun keeps them) but every evaluation: the report says it
                 "eval_max_tokens": before.get("max_tokens"),
                 "text_only_chance": text_only_chance(train, heldout)["accuracy"] if train and "style" in
                 heldout[0].meta else None,
                 "pass1_before": before["real"]["pass1"], "pass1_before_ci": before["real"]["pass1_ci"],
                 "maj8_before": before["real"]["maj"], "maj8_before_ci": before["real"]["maj_ci"]}
    for n in names:
        ev = evals[n]
        res[f"pass1_after_{n}"] = ev["real"]["pass1"]
        res[f"pass1_after_{n}_ci"] = ev["real"]["pass1_ci"]
        res[f"maj8_after_{n}"] = ev["real"]["maj"]
        res[f"maj8_after_{n}_ci"] = ev["real"]["maj_ci"]
        lift = paired_diff_ci(ev["per_problem"]["pass1"], before["per_problem"]["pass1"])
        res[f"pass1_lift_{n}"] = lift["mean"]
        res[f"pass1_lift_{n}_ci"] = lift["ci"]
        # "beyond the interval": the run's pass@1 is above the upper end of the start's interval
        res[f"{n}_beyond_interval"] = ev["real"]["pass1"] > before["real"]["pass1_ci"][1]
    for n, ev in evals.items():
        if "blank" in ev:
            res[f"pass1_blank_image_{n}"] = ev["blank"]["pass1"]
            res[f"pass1_shuffled_image_{n}"] = ev["shuffled"]["pass1"]
    if "csrs" in names and "mv" in names:
        d = paired_diff_ci(evals["csrs"]["per_problem"]["pass1"], evals["mv"]["per_problem"]["pass1"])
        res["pass1_csrs_minus_mv"], res["pass1_csrs_minus_mv_ci"] = d["mean"], d["ci"]
    return res


# -- the training runs --------------------------------------------------------------------------------------------
def _end_with_parent(parent_pid: int) -> None:
    """End this run's process when the demo that spawned it dies: after a ``kill -9`` of the demo its runs went on
    training for minutes, holding their output directories, so a rerun's runs failed as busy."""
    from mmevo.runlock import exit_with_parent

    exit_with_parent()  # the kernel sends SIGTERM when the parent dies (Linux)
    if os.getppid() != parent_pid:  # it died before that was armed (or nothing could be armed): end now
        os._exit(1)


def _run_child(cfg: Config, threads: int, log_path: str, eval_path: str, parent_pid: int) -> None:
    """One run in its own process (spawned): train (resuming), then the sampled held-out evaluation of its final
    model with the image controls; output goes to ``log_path``. Ends when the demo (``parent_pid``) dies."""
    import sys

    _end_with_parent(parent_pid)
    import torch

    with open(log_path, "a", buffering=1) as log:
        sys.stdout = sys.stderr = log
        torch.set_num_threads(threads)
        from mmevo.recipes import load_examples, run_grpo

        out = Path(cfg.trainer.output_dir)
        if not (out / "summary.json").exists():
            run_grpo(cfg, evaluate_before_after=False)
        heldout, _ = load_examples(cfg, "heldout")
        cached_eval(Path(eval_path), cfg, out / "final", heldout, controls=True)


def run_jobs(jobs: dict[str, tuple[Config, Path]], parallel: int, threads_per_job: int, labels=None,
             problems: str | None = None) -> list[str]:
    """Train and evaluate every job (name -> (config, eval json path)) without an evaluation of the model now in its
    ``final/`` (missing, or of a model deleted or retrained since), ``parallel`` at a time, one spawned process each
    with ``threads_per_job`` threads; each resumes from its last checkpoint. Progress is read from the runs'
    metrics.jsonl every 15 s. A failed job stops the rest and raises with its log's tail; a finished run (its
    summary.json) or an interrupted one (its last checkpoint) whose config differs from the job's is refused, naming
    the keys. With ``problems`` (``problems_digest`` of the held-out set) an evaluation of another set is made
    again and the held-out settings (``HELDOUT_KEYS``) are no change of a run; without it they are. Returns the names
    of the jobs that were already trained and evaluated (nothing run for them)."""
    check_runs([cfg for cfg, _ in jobs.values()], HELDOUT_KEYS if problems is not None else ())
    todo = [n for n, (cfg, ev) in jobs.items() if not evaluated(ev, cfg, problems)]
    reused = [n for n in jobs if n not in todo]
    for n in reused:
        print(f"[mmevo] {(labels or {}).get(n, n)}: finished earlier, reusing {jobs[n][1]}")
    ctx = multiprocessing.get_context("spawn")
    running: dict[str, multiprocessing.Process] = {}
    try:
        while todo or running:
            while todo and len(running) < max(1, parallel):
                n = todo.pop(0)
                cfg, ev = jobs[n]
                c = copy.deepcopy(cfg)
                c.trainer.progress = False
                out = Path(c.trainer.output_dir)
                out.mkdir(parents=True, exist_ok=True)
                p = ctx.Process(target=_run_child, name=f"mmevo-{n}",
                                args=(c, threads_per_job, str(out / "train.log"), str(ev), os.getpid()))
                p.start()
                running[n] = p
                print(f"[mmevo] {(labels or {}).get(n, n)}: {job_plan(c)}, log in {out / 'train.log'}", flush=True)
            time.sleep(15)
            print("[mmevo] " + " | ".join(_progress_line(n, jobs[n][0]) for n in running), flush=True)
            for n, p in list(running.items()):
                if not p.is_alive():
                    p.join()
                    del running[n]
                    if p.exitcode != 0:
                        log = Path(jobs[n][0].trainer.output_dir) / "train.log"
                        raise RuntimeError(f"run {n} failed (exit {p.exitcode}); a rerun resumes it. Its log "
                                           f"({log}) ends:\n{_tail(log)}")
    finally:
        for p in running.values():
            if p.is_alive():
                p.terminate()
            p.join()
    return reused


def job_plan(cfg: Config) -> str:
    """What a job not reused does: a run finished earlier (its summary.json) is only evaluated again (a rerun after
    its evaluation was lost or its sampling changed said "80 steps", as if it trained them)."""
    if (Path(cfg.trainer.output_dir) / "summary.json").exists():
        return "trained earlier, evaluating its final model again"
    return f"{cfg.trainer.steps} steps"


def check_runs(cfgs, ignore: tuple[str, ...] = ()) -> None:
    """Refuse a finished or interrupted run, in the output directory of one of ``cfgs``, whose config differs from
    it in a key other than where it is (``_RUN_PLACE_KEYS``) and ``ignore``, naming the keys."""
    for cfg in cfgs:  # a finished run is reused as it is: it must be the run its config asks for
        changed = finished_run_changes(cfg, ignore)
        if changed:
            raise ValueError(f"{cfg.trainer.output_dir} holds a finished run with other settings "
                             f"({', '.join(changed)}): use another --out (or delete that run)")
        # an interrupted run resumes under this config: its report would state settings its first steps did not
        # use (after trainer.lr=0, "lr 0.0", while the resumed optimizer state kept stepping at the saved lr)
        changed = interrupted_run_changes(cfg, ignore)
        if changed:
            raise ValueError(f"{cfg.trainer.output_dir} holds an interrupted run with other settings "
                             f"({', '.join(changed)}): rerun with its settings to resume it, or use another --out "
                             "(or delete that run)")


def evaluated(eval_path: Path, cfg: Config, problems: str | None = None) -> bool:
    """``eval_path`` holds an evaluation, with this config's sampling, of the model now in the run's ``final/`` (not
    of one deleted or retrained since), and, given ``problems`` (``problems_digest``), of that held-out set; without
    it the problems follow from the run's data settings (``finished_run_changes``)."""
    cached = read_cached_eval(eval_path)
    if cached is None:
        return False
    model = Path(cfg.trainer.output_dir) / "final"
    stamp = model_stamp(model)
    return (bool(stamp) and cached.get("model") == str(model) and cached.get("files") == stamp
            and all(cached.get(k) == v for k, v in _sampling_key(cfg).items())
            and (problems is None or cached.get("problems") == problems))


# settings that say where a run is, how it logs, saves or is evaluated, not what it trains
_RUN_PLACE_KEYS = ("model.path", "model.cache_dir", "trainer.output_dir", "sft.output_dir", "trainer.progress",
                   "trainer.threads", "trainer.wandb_mode", "trainer.wandb_project", "trainer.save_every",
                   "trainer.keep_checkpoints", "trainer.resume", "trainer.eval_every", "trainer.eval_max_tokens",
                   "model.cpu_malloc")  # allocator thresholds: speed and resident memory, not the numbers
# the held-out set: what the demo evaluates every model on, not what a run trains on (the train set is drawn apart
# from it); a rerun with another one evaluates every model on it again (``run_jobs``'s ``problems``)
HELDOUT_KEYS = ("data.n_heldout", "data.heldout")


def finished_run_changes(cfg: Config, ignore: tuple[str, ...] = ()) -> list[str]:
    """The config keys (less ``ignore``) in which the finished run in ``cfg.trainer.output_dir`` (its
    ``summary.json``) differs from ``cfg``; [] when there is none or it matches."""
    path = Path(cfg.trainer.output_dir) / "summary.json"
    if not path.exists():
        return []
    return _changed_keys(json.loads(path.read_text()).get("config") or {}, cfg, ignore)


def sft_changes(summary: dict, cfg: Config) -> list[str]:
    """The keys the SFT reads (``sft_config_changes``) in which the SFT that wrote ``summary`` (its ``config``)
    differs from ``cfg``; [] for an SFT from before summaries held their config (its step count is checked alone)."""
    from mmevo.grpo.sft import sft_config_changes

    recorded = summary.get("config")
    return sft_config_changes(recorded, cfg) if isinstance(recorded, dict) else []


def interrupted_run_changes(cfg: Config, ignore: tuple[str, ...] = ()) -> list[str]:
    """The config keys in which the newest checkpoint of an unfinished run in ``cfg.trainer.output_dir`` (which
    ``trainer.resume`` would continue) differs from ``cfg``; [] when there is none, it matches, or the run is
    finished (``finished_run_changes``)."""
    from mmevo.grpo.checkpoint import latest_checkpoint, load_trainer_state

    out = Path(cfg.trainer.output_dir)
    ckpt = latest_checkpoint(out) if cfg.trainer.resume and not (out / "summary.json").exists() else None
    if ckpt is None:
        return []
    return _changed_keys(load_trainer_state(ckpt).get("config") or {}, cfg, ignore)


def _changed_keys(recorded: dict, cfg: Config, ignore: tuple[str, ...] = ()) -> list[str]:
    """The keys, other than where a run is and how it logs (``_RUN_PLACE_KEYS``), in which the config ``recorded``
    by a run differs from ``cfg`` (both through JSON, as summary.json holds them)."""
    from mmevo.config import recorded_config_changes

    return [k for k in recorded_config_changes(recorded, cfg) if k not in _RUN_PLACE_KEYS and k not in ignore]


def _progress_line(name: str, cfg: Config) -> str:
    from mmevo.metrics import read_curve

    # read_curve skips the torn last line of a run killed mid-write (read_jsonl raised on it and ended the demo:
    # before the resumed run's own clean-up, or where a run died, instead of its "failed" message)
    rows = read_curve(Path(cfg.trainer.output_dir) / "metrics.jsonl")
    if not rows:
        return f"{name} starting"
    last = rows[-1]
    if last["step"] >= cfg.trainer.steps:
        return f"{name} evaluating"
    return f"{name} step {last['step']}/{cfg.trainer.steps} reward {last.get('reward/total/mean', float('nan')):.2f}"


def _tail(path: Path, n: int = 3000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else "(no log)"


# -- report -------------------------------------------------------------------------------------------------------
def against_start(after: float, start_ci: list[float]) -> str:
    """Where a run's pass@1 lies against the start's interval: a run that lost accuracy beyond it was reported as
    "NOT above" it, the words of a run that merely did not gain."""
    return "above" if after > start_ci[1] else "below" if after < start_ci[0] else "within"


def write_report(out: Path, cfg: Config, configs: dict[str, Config], r: dict, evals: dict,
                 files: dict[str, Path] | None = None, replot: bool = True) -> None:
    """``files['report']`` (``method_files``; the label-free demo's by default) from the result ``r``, with its two
    plots, drawn again unless ``replot`` is false and they are there."""
    names = list(configs)
    files = files or method_files(out, "csrs")
    curves, accuracy = files["curves"], files["accuracy"]
    if replot or not curves.exists():
        _plot_runs(curves, out, names)
    if replot or not accuracy.exists():
        _plot_accuracy(accuracy, r, names)

    def ci(x):
        return f"[{x[0]:.3f}, {x[1]:.3f}]"

    rows = [f"| {LABELS['sft']} | {r['pass1_before']:.3f} {ci(r['pass1_before_ci'])} | {r['maj8_before']:.3f} "
            f"{ci(r['maj8_before_ci'])} | | {evals['sft']['blank']['pass1']:.3f} | "
            f"{evals['sft']['shuffled']['pass1']:.3f} |"]
    for n in names:
        rows.append(f"| {LABELS[n]} | {r[f'pass1_after_{n}']:.3f} {ci(r[f'pass1_after_{n}_ci'])} | "
                    f"{r[f'maj8_after_{n}']:.3f} {ci(r[f'maj8_after_{n}_ci'])} | {r[f'pass1_lift_{n}']:+.3f} "
                    f"{ci(r[f'pass1_lift_{n}_ci'])} | {evals[n]['blank']['pass1']:.3f} | "
                    f"{evals[n]['shuffled']['pass1']:.3f} |")
    kinds = sorted(evals["sft"]["real"]["by_kind"])
    head = " | ".join(f"{LABELS[n]} pass@1 / maj@8" for n in ["sft", *names])
    kind_rows = "\n".join(
        f"| {k} | " + " | ".join(f"{evals[n]['real']['by_kind'][k]['pass1']:.3f} / "
                                  f"{evals[n]['real']['by_kind'][k]['maj']:.3f}" for n in ["sft", *names]) + " |"
        for k in kinds)
    verdict = []
    for n in names:
        verdict.append(f"- {LABELS[n]}: pass@1 {r['pass1_before']:.3f} -> {r[f'pass1_after_{n}']:.3f} "
                       f"({against_start(r[f'pass1_after_{n}'], r['pass1_before_ci'])} the start's interval "
                       f"{ci(r['pass1_before_ci'])}; paired lift {r[f'pass1_lift_{n}']:+.3f} "
                       f"{ci(r[f'pass1_lift_{n}_ci'])}).")
    if "pass1_csrs_minus_mv" in r:
        verdict.append(f"- CSRS - majority vote, paired: {r['pass1_csrs_minus_mv']:+.3f} "
                       f"{ci(r['pass1_csrs_minus_mv_ci'])}.")
    c0 = configs[names[0]]
    label_free = all(configs[n].data.hide_labels for n in names)
    reused = r.get("reused_phases") or []
    reused_note = (f"; reused from an earlier invocation, so not in these times: "
                   f"{', '.join(LABELS.get(n, n) for n in reused)}" if reused else "")
    # a result saved before it was recorded has no start_eval_seconds (kept as it is by a rerun that measures nothing)
    start_eval = (f"evaluation of the start {r['start_eval_seconds'] / 60:.1f} min, "
                  if r.get("start_eval_seconds") is not None else "")
    reevaluated = r.get("reevaluated_runs") or []
    if reevaluated:  # their training is an earlier invocation's: these runs' minutes are their evaluation alone
        reused_note += (f"; trained by an earlier invocation and only evaluated again in this one: "
                        f"{', '.join(LABELS.get(n, n) for n in reevaluated)}")
    max_tokens_note = f", at most {r['eval_max_tokens']} tokens" if r.get("eval_max_tokens") else ""
    # one run, or runs one after the other: nothing between "thread(s)" and the full stop
    together = " (two runs at once)" if r["threads"]["parallel"] and len(names) > 1 else ""
    text = f"""# mmevo demo report

Tiny Qwen2.5-VL ({r['base_model']}) on figure tasks whose values are drawn only in the image (bar heights,
seven-segment digits or dot counts, each colour in a random quadrant; the problem text holds no number), CPU,
{r['threads']['threads']} thread(s){together}. Total time {r['total_seconds'] / 60:.1f} min
(SFT {r['sft_seconds'] / 60:.1f} min, {start_eval}runs {r['runs_seconds'] / 60:.1f} min{reused_note}).

{'Label-free: no gold answer reaches any reward; gold answers only score the held-out set and the logged pseudo-label accuracy.' if label_free else 'Verifiable reward: the gold answers of the train set reach the accuracy reward.'}

## Held-out ({r['heldout_problems']} problems, {r['samples_per_problem']} samples each at temperature 1{max_tokens_note}; 95% bootstrap intervals)

| model | pass@1 | maj@8 | pass@1 lift (paired) | pass@1, blank image | pass@1, shuffled images |
|---|---|---|---|---|---|
{chr(10).join(rows)}

Text-only chance (the best guess from the problem text alone): {r['text_only_chance'] if r['text_only_chance'] is None else f"{r['text_only_chance']:.3f}"}.
The blank- and shuffled-image columns are the image ablation: a model that reads the figure falls to chance there.

{chr(10).join(verdict)}

## Per problem kind (pass@1 / maj@8)

| kind | {head} |
|---|{'---|' * (len(names) + 1)}
{kind_rows}

![accuracy]({accuracy.name})

## Training curves (raw and smoothed)

![curves]({curves.name})

Diagnostics in the curves: `pseudo_label_acc` is the share of groups whose pseudo-label (the majority answer; for CSRS
the answer with the highest SFR) equals the (hidden) gold answer, `modal_share` the mean share of a group's samples on its modal answer (how sharp the policy is).

## Setup

SFT: {r['sft_steps']} steps on {cfg.data.n_train} worked solutions. Runs: {c0.trainer.steps} steps x
{c0.trainer.prompts_per_step} prompts x {c0.rollout.n} samples, lr {c0.trainer.lr}, KL {c0.algo.kl_coef}; RL trains
{'the parameters matching ' + str(list(c0.model.trainable)) + ' (model.trainable)' if c0.model.trainable else 'every weight'}.
{'CSRS: m = ' + str(configs['csrs'].csrs.m) + ', omega = ' + str(configs['csrs'].csrs.omega) + ', sigma = ' + str(configs['csrs'].csrs.sigma) + ', SFR gamma = ' + str(configs['csrs'].csrs.gamma) + ', beta = ' + str(configs['csrs'].csrs.beta) + '.' if 'csrs' in configs else ''}
Reward heads: {', '.join(f'{n}: {dict(configs[n].reward.heads)}' for n in names)}.
"""
    write_text_atomic(files["report"], text)  # a kill mid-write leaves the old report or none, never half of one


def _smooth(ys: list[float], alpha: float = 0.1) -> list[float]:
    out, m = [], None
    for y in ys:
        m = y if m is None else (1 - alpha) * m + alpha * y
        out.append(m)
    return out


CURVE_KEYS = ("reward/total/mean", "pseudo_label_acc", "modal_share", "actor/entropy", "response/length_mean")


def _plot_runs(path: Path, out: Path, names) -> Path:
    """``path`` (``out/curves.png``): a subplot per metric of CURVE_KEYS, raw (thin) and smoothed (EMA 0.1, thick), runs
    overlaid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mmevo.metrics import read_curve

    data = {n: read_curve(out / n / "metrics.jsonl") for n in names if (out / n / "metrics.jsonl").exists()}
    fig, axes = plt.subplots(len(CURVE_KEYS), 1, figsize=(7, 2.3 * len(CURVE_KEYS)), squeeze=False)
    for ax, key in zip(axes[:, 0], CURVE_KEYS):
        for i, (n, rows) in enumerate(data.items()):
            pts = [(row["step"], v) for row in rows for k, v in row.items()
                   if (k == key or k.endswith("/" + key)) and isinstance(v, (int, float))]
            if not pts:
                continue
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            color = f"C{i}"
            ax.plot(xs, ys, color=color, alpha=0.3, lw=0.8)
            ax.plot(xs, _smooth(ys), color=color, lw=2, label=LABELS[n])
        ax.set_ylabel(key.split("/")[-2] if key.endswith("/mean") else key.split("/")[-1], fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7)
    axes[-1, 0].set_xlabel("step")
    fig.tight_layout()
    _save_figure(fig, path)
    plt.close(fig)
    return path


def _save_figure(fig, path: Path) -> None:
    """``fig`` as a PNG at ``path`` through a temporary file and a rename: a kill mid-write left a torn plot that a
    rerun which measures nothing again keeps (it draws only the plots that are missing)."""
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, dpi=90, format="png")
    os.replace(tmp, path)


def _plot_accuracy(path: Path, r: dict, names) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    labels = [LABELS[key].split(" (")[0] for key in ("sft", *names)]
    prefs = ["before", *[f"after_{n}" for n in names]]
    xs = range(len(labels))
    for metric, dx, colour, label in (("pass1", -0.2, "#3a7", "pass@1"), ("maj8", 0.2, "#999", "maj@8")):
        values = [r[f"{metric}_{p}"] for p in prefs]
        err = [[v - r[f"{metric}_{p}_ci"][0] for v, p in zip(values, prefs)],
               [r[f"{metric}_{p}_ci"][1] - v for v, p in zip(values, prefs)]]
        ax.bar([x + dx for x in xs], values, 0.4, yerr=err, capsize=3, label=f"{label} (95% CI)", color=colour)
    ax.axhline(r["text_only_chance"] or 0, ls="--", color="k", lw=0.8, label="text-only chance")
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("held-out accuracy")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, loc="upper left", ncol=3)
    fig.tight_layout()
    _save_figure(fig, path)
    plt.close(fig)
