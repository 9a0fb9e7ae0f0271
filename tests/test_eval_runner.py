"""``mmevo eval --benchmark``: end to end with the tiny Qwen2.5-VL on real MATH-V rows, resume, report, errors."""

import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from datapaths import FIXTURES
from mmevo.cli import main
from mmevo.config import load_config
from mmevo.data.benchmarks import load_items
from mmevo.eval.runner import run_benchmark, summarize

# Real rows: the small fixtures of data/fixtures (see data/README.md) are enough for every test here.
MATHV = FIXTURES / "mathvision"  # 17 testmini rows, the first ten of the full file among them
MATHVISTA = FIXTURES / "mathvista_testmini"  # 11 rows, pids 1-5 first
G3K = FIXTURES / "geometry3k_samples"  # InterGPS problems 11, 12, 13, 20


def _cfg(model, out, **over):
    args = [f"model.path={model}", "eval.benchmark=mathvision_testmini", f"eval.data={MATHV}", f"eval.out_dir={out}",
            "eval.max_tokens=6", "eval.batch_size=4", "trainer.progress=false"]
    return load_config(None, args + [f"{k}={v}" for k, v in over.items()])


def _lines(out):
    return [json.loads(x) for x in (Path(out) / "responses.jsonl").read_text().splitlines()]


def test_eval_mathvision_end_to_end_and_resume(tiny_vl_path, tmp_path):
    out = tmp_path / "ev"
    s1 = run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 6}))
    assert (s1["n"], s1["generated_items"], s1["resumed_items"]) == (6, 6, 0)
    assert {p.name for p in out.iterdir()} >= {"run.json", "responses.jsonl", "scores.json", "report.md", "report.png"}
    recs = _lines(out)
    assert [r["id"] for r in recs] == ["4", "5", "6", "7", "8", "10"]
    assert all(r["n_tokens"] <= 6 and r["finish_reason"] in ("stop", "length") for r in recs)
    scores = json.loads((out / "scores.json").read_text())
    assert sum(g["n"] for g in scores["by"]["subject"].values()) == 6
    assert sum(g["n"] for g in scores["by"]["level"].values()) == 6
    assert scores["correct"] == sum(r["correct"] for r in recs)
    assert "## By subject" in (out / "report.md").read_text()

    # resume: a larger limit only generates the new items; the first six responses are kept byte for byte
    before = (out / "responses.jsonl").read_text()
    s2 = run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 9}))
    assert (s2["n"], s2["generated_items"], s2["resumed_items"]) == (9, 3, 6)
    assert (out / "responses.jsonl").read_text().startswith(before)

    # greedy decoding is deterministic: regenerating from scratch gives the same responses
    s3 = run_benchmark(_cfg(tiny_vl_path, tmp_path / "again", **{"eval.limit": 9}))
    assert [r["response"] for r in _lines(tmp_path / "again")] == [r["response"] for r in _lines(out)]
    assert s3["accuracy"] == s2["accuracy"]


def test_resume_refuses_a_different_run_and_overwrite_restarts(tiny_vl_path, tmp_path):
    out = tmp_path / "ev"
    run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 2}))
    with pytest.raises(ValueError, match=r"different run \(max_tokens: 6 -> 4\)"):
        run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 2, "eval.max_tokens": 4}))
    s = run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 2, "eval.max_tokens": 4, "eval.overwrite": "true"}))
    assert s["generated_items"] == 2 and all(r["n_tokens"] <= 4 for r in _lines(out))


def test_a_line_cut_by_a_crash_is_dropped_and_regenerated(tiny_vl_path, tmp_path):
    out = tmp_path / "ev"
    run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 3}))
    text = (out / "responses.jsonl").read_text()
    (out / "responses.jsonl").write_text(text[: text.rindex('{"id"') + 20])  # last record half written
    s = run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 3}))
    assert (s["dropped_corrupt_lines"], s["resumed_items"], s["generated_items"]) == (1, 2, 1)
    assert [r["id"] for r in _lines(out)] == ["4", "5", "6"]


def test_summary_counts_categories_and_scores_official_rules():
    items, _ = load_items("mathvision", MATHV, "testmini", limit=10)
    # records as the runner writes them, judged by the official MATH-V rules
    from mmevo.eval.runner import scorer_for

    score = scorer_for("mathvision")
    records = {}
    for i, it in enumerate(items):
        resp = f"The answer is \\boxed{{{it.answer}}}" if i % 2 == 0 else "I think it is \\boxed{999}"
        extracted, ok = score(resp, it)
        records[it.id] = {"correct": ok, "extracted": extracted, "finish_reason": "stop"}
    s = summarize(items, records, ("subject", "level"))
    assert (s["n"], s["correct"], s["accuracy"]) == (10, 5, 0.5)
    for key in ("subject", "level"):
        assert sum(g["correct"] for g in s["by"][key].values()) == 5
        assert sum(g["n"] for g in s["by"][key].values()) == 10


def test_mathvista_with_stand_in_images_reports_task_and_skills(tiny_vl_path, tmp_path):
    rows = json.loads((MATHVISTA / "testmini.json").read_text())
    for i, pid in enumerate(list(rows)[:5]):
        p = tmp_path / "img" / rows[pid]["image"]
        p.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (40, 30), (i * 40, 80, 120)).save(p)
    cfg = load_config(None, [f"model.path={tiny_vl_path}", "eval.benchmark=mathvista_testmini", f"eval.data={MATHVISTA}",
                             f"eval.image_root={tmp_path / 'img'}", "eval.limit=5", "eval.max_tokens=4",
                             f"eval.out_dir={tmp_path / 'ev'}", "trainer.progress=false"])
    s = run_benchmark(cfg)
    assert s["n"] == 5 and list(s["by"]) == ["question_type", "answer_type", "language", "source", "category", "task",
                                             "context", "grade", "skills"]  # calculate_score.py's breakdowns
    assert sum(g["n"] for g in s["by"]["task"].values()) == 5


def test_cli_eval_benchmark_and_errors(tiny_vl_path, tmp_path, capsys):
    # overrides may sit between and after the flags
    rc = main(["eval", "--model", str(tiny_vl_path), "eval.batch_size=1", "--benchmark", "mathvision_testmini",
               "--data", str(MATHV), "--out", str(tmp_path / "ev"), "--limit", "2", "--max-tokens", "3",
               "trainer.progress=false"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert json.loads(printed[printed.index("{"):])["n"] == 2
    assert main(["eval", "--model", str(tiny_vl_path), "--benchmark", "nope"]) == 2
    assert "eval.benchmark='nope' is not one of" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    assert main(["eval", "--model", str(tiny_vl_path), "--benchmark", "mathvision_testmini",
                 "--data", str(tmp_path / "bad")]) == 2
    assert "no data file found for split 'testmini'" in capsys.readouterr().err


def test_geometry3k_interGPS_layout_as_benchmark_and_as_heldout(tiny_vl_path, tmp_path, capsys):
    g3k = G3K
    cfg = load_config(None, [f"model.path={tiny_vl_path}", "eval.benchmark=geometry3k_test", f"eval.data={g3k}",
                             "eval.max_tokens=4", f"eval.out_dir={tmp_path / 'ev'}", "trainer.progress=false"])
    s = run_benchmark(cfg)  # a directory of <id>/data.json folders is read as InterGPS's layout
    assert (s["format"], s["n"]) == ("intergps", 4)
    # raw labels, then InterGPS's official table (sub_acc.py): 13 and 20 are Parallelograms, counted under Quad
    assert list(s["by"]) == ["graph", "goal", "official_goal", "official_graph"]
    assert {k: g["n"] for k, g in s["by"]["official_graph"].items()} == {"Quad": 2, "Circle": 2}
    assert "## By official_graph" in (tmp_path / "ev" / "report.md").read_text()
    assert [r["gold"] for r in _lines(tmp_path / "ev")][0] == "80"
    # the same adapters feed training / held-out evaluation through data.format
    rc = main(["eval", f"model.path={tiny_vl_path}", f"data.heldout={g3k}", "data.format=intergps",
               "trainer.eval_max_tokens=4"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert json.loads(printed[printed.index("{"):])["n"] == 4
    assert main(["eval", f"model.path={tiny_vl_path}", "data.format=nope"]) == 2
    assert "data.format='nope' not in" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["mathvision", "mathvista", "intergps"])
def test_any_model_output_is_scored_never_a_crash(fmt, tmp_path):
    if fmt == "mathvista":
        rows = json.loads((MATHVISTA / "testmini.json").read_text())
        for pid in list(rows)[:20]:
            p = tmp_path / rows[pid]["image"]
            p.parent.mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (8, 8)).save(p)
        items, _ = load_items(fmt, MATHVISTA, "testmini", image_root=tmp_path, limit=20)
    else:
        items, _ = load_items(fmt, MATHV if fmt == "mathvision" else G3K,
                              "testmini" if fmt == "mathvision" else None, limit=20)
    from mmevo.eval.runner import SCORERS, _score_verifiable

    score = SCORERS.get(fmt, _score_verifiable)  # unwrapped: the scorer itself must not raise
    nasty = ["", "\\boxed{", "}}}{{{", "\\boxed{\\frac{1}{0}}", "\x00\ufffd" * 50, "9" * 5000, "\\boxed{10^{99999}}",
             "The answer is (Z).", "<think></think>\\boxed{[1, 2, }", "\\boxed{\\sqrt{-1}}", "A" * 30000]
    for it in items:
        for resp in nasty:
            extracted, ok = score(resp, it)
            assert ok in (True, False)


def test_prompts_over_the_eval_limit_are_scored_wrong_and_counted(tiny_vl_path, tmp_path):
    s = run_benchmark(_cfg(tiny_vl_path, tmp_path / "ev", **{"eval.limit": 3, "eval.max_prompt_length": 10}))
    assert (s["n"], s["correct"], s["prompt_too_long"]) == (3, 0, 3)
    assert {r["finish_reason"] for r in _lines(tmp_path / "ev")} == {"prompt_too_long"}
    assert "eval.max_prompt_length or the context window (scored wrong): 3" in (tmp_path / "ev" / "report.md").read_text()


def test_resume_regenerates_too_long_prompts_and_changed_golds_and_rescores(tiny_vl_path, tmp_path):
    out = tmp_path / "ev"
    s = run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 3, "eval.max_prompt_length": 10}))
    assert s["prompt_too_long"] == 3
    s = run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 3, "eval.max_prompt_length": 10}))
    assert (s["prompt_too_long"], s["generated_items"]) == (3, 0)  # same limit: nothing to redo
    s = run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 3}))  # limit raised: those three are generated now
    assert (s["prompt_too_long"], s["generated_items"], s["resumed_items"]) == (0, 3, 0)
    assert [r["id"] for r in _lines(out)] == ["4", "5", "6"]  # superseded lines dropped
    # a stored verdict is not trusted: records are re-scored with the current rules on every run
    recs = _lines(out)
    recs[0].update(response="The answer is \\boxed{6}", correct=False, extracted="?")  # id 4: gold 6
    recs[1]["gold"] = "not the gold any more"
    (out / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    s = run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 3}))
    assert (s["generated_items"], s["resumed_items"]) == (1, 2)  # id 5: its gold changed
    after = {r["id"]: r for r in _lines(out)}
    assert after["4"]["correct"] is True and after["4"]["extracted"] == "6" and s["correct"] >= 1
    assert after["5"]["gold"] == "61"


def test_resume_bookkeeping_lower_limit_duplicates_and_identity(tiny_vl_path, tmp_path):
    out = tmp_path / "ev"
    s = run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 3}))
    recs = _lines(out)
    assert s["prompt_too_long"] == 0 and all(r["prompt_tokens"] > 10 for r in recs)
    # a lower prompt limit on resume: the kept answers are re-checked against it, as a fresh run would score them
    s = run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 3, "eval.max_prompt_length": 10}))
    assert (s["prompt_too_long"], s["correct"], s["generated_items"]) == (3, 0, 3)
    # a run killed after appending a regenerated record, before its final rewrite: two lines of one id; the next
    # run keeps the last and rewrites the file to one line per item
    dup = _lines(out)
    (out / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*recs, *dup]))
    s = run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 3, "eval.max_prompt_length": 10}))
    assert (s["generated_items"], s["prompt_too_long"]) == (0, 3)
    assert [r["id"] for r in _lines(out)] == ["4", "5", "6"]
    # other data, another image root, another dtype: a different run, refused
    other = tmp_path / "copy"
    shutil.copytree(MATHV, other)
    for over, key in (({"eval.data": str(other)}, "source"), ({"eval.image_root": str(other)}, "image_root"),
                      ({"model.dtype": "bfloat16"}, "dtype")):
        with pytest.raises(ValueError, match=rf"different run \({key}: "):
            run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 3, "eval.max_prompt_length": 10, **over}))
    # a run.json written before these keys were part of the identity still resumes
    run = json.loads((out / "run.json").read_text())
    for key in ("source", "image_root", "dtype"):
        run.pop(key)
    (out / "run.json").write_text(json.dumps(run))
    s = run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 3, "eval.max_prompt_length": 10}))
    assert s["resumed_items"] == 3 and json.loads((out / "run.json").read_text())["dtype"] == "float32"


def test_sampled_eval_identity_holds_the_seed(tiny_vl_path, tmp_path):
    out = tmp_path / "ev"
    over = {"eval.limit": 2, "rollout.eval_temperature": 1.0}
    run_benchmark(_cfg(tiny_vl_path, out, **over))
    with pytest.raises(ValueError, match=r"different run \(seed: "):
        run_benchmark(_cfg(tiny_vl_path, out, **{**over, "trainer.seed": 7}))
    greedy = tmp_path / "greedy"
    run_benchmark(_cfg(tiny_vl_path, greedy, **{"eval.limit": 2}))
    s = run_benchmark(_cfg(tiny_vl_path, greedy, **{"eval.limit": 2, "trainer.seed": 7}))  # greedy: no seed
    assert s["resumed_items"] == 2 and "seed" not in json.loads((greedy / "run.json").read_text())


def test_corrupt_image_is_recorded_left_out_and_not_retried(tiny_vl_path, tmp_path):
    rows = [json.loads(x) for x in (MATHV / "testmini.jsonl").read_text().splitlines()[:3]]
    (tmp_path / "images").mkdir()
    for r in rows:
        (tmp_path / r["image"]).write_bytes((MATHV / r["image"]).read_bytes())
    (tmp_path / rows[1]["image"]).write_bytes(b"not an image")
    (tmp_path / "testmini.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = _cfg(tiny_vl_path, tmp_path / "ev", **{"eval.data": tmp_path})
    with pytest.raises(Exception, match=r"testmini.jsonl:2 \(row 1, id '5'\): field 'image': image 0: cannot decode"):
        run_benchmark(cfg)
    cfg = _cfg(tiny_vl_path, tmp_path / "ev", **{"eval.data": tmp_path, "data.skip_bad_rows": "true"})
    s = run_benchmark(cfg)
    assert s["n"] == 2 and s["data"]["skipped_at_generation"] == {"image_corrupt": 1}
    # the official scripts score all 3 rows: the left-out one counts as wrong there
    assert s["all_rows"] == {"n": 3, "correct": s["correct"], "accuracy": s["correct"] / 3}
    s = run_benchmark(cfg)
    assert (s["generated_items"], s["n"]) == (0, 2)  # nothing to generate: the model is not even loaded
    report = (tmp_path / "ev" / "report.md").read_text()
    assert "left out at generation" in report
    assert "Counting the 1 rows left out as wrong" in report and f"({s['correct']}/3)" in report


def test_rows_skipped_at_load_count_as_wrong_over_all_rows(tiny_vl_path, tmp_path):
    """A row that does not load (here a gold-less row) is left out of ``accuracy`` and counted wrong in
    ``all_rows``: with 1 of 3 rows skipped and both others right, 100% of those scored, 66.67% of the set."""
    rows = [json.loads(x) for x in (MATHV / "testmini.jsonl").read_text().splitlines()[:3]]
    rows[2]["answer"] = None
    (tmp_path / "testmini.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    shutil.copytree(MATHV / "images", tmp_path / "images")
    out = tmp_path / "ev"
    cfg = _cfg(tiny_vl_path, out, **{"eval.data": tmp_path, "data.skip_bad_rows": "true"})
    run_benchmark(cfg)
    recs = _lines(out)
    for r in recs:  # kept responses are re-scored on the next run: make both right
        r["response"] = f"The answer is \\boxed{{{r['gold']}}}"
    (out / "responses.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    s = run_benchmark(cfg)
    assert (s["n"], s["correct"], s["accuracy"], s["generated_items"]) == (2, 2, 1.0, 0)
    assert s["data"]["skipped"] == 1
    assert s["all_rows"] == {"n": 3, "correct": 2, "accuracy": 2 / 3}
    assert "**66.67%** (2/3)" in (out / "report.md").read_text()
    # nothing left out: no second figure
    s = run_benchmark(_cfg(tiny_vl_path, tmp_path / "ev2", **{"eval.limit": 2}))
    assert s["all_rows"]["n"] == 2 and "Counting the" not in (tmp_path / "ev2" / "report.md").read_text()


def test_cli_flag_values_are_taken_literally(tiny_vl_path, tmp_path, capsys):
    out = tmp_path / "007"
    rc = main(["eval", "--model", str(tiny_vl_path), "--benchmark", "mathvision_testmini", "--data", str(MATHV),
               "--out", str(out), "--limit", "1", "--max-tokens", "2", "--template", "Solve: {problem} Box it.",
               "trainer.progress=false"])
    assert rc == 0
    run = json.loads((out / "run.json").read_text())
    assert run["template"] == "Solve: {problem} Box it."
    assert main(["eval", "--model", str(tiny_vl_path), "eval.out_dir=[unclosed"]) == 2
    assert "not a YAML value" in capsys.readouterr().err


def test_prompt_limit_fits_the_context_window(tiny_vl_path):
    from mmevo.eval.runner import _prompt_limit
    from mmevo.models.loader import load_model

    model = load_model(tiny_vl_path).model
    context = model.config.text_config.max_position_embeddings
    assert _prompt_limit(model, 8192, 256) == min(8192, context - 256)
    assert _prompt_limit(model, 100, 256) == 100
    with pytest.raises(ValueError, match="leaves no room for a prompt"):
        _prompt_limit(model, 8192, context)


def test_resume_refuses_new_weights_under_the_same_model_path(tiny_vl_path, tmp_path):
    """A checkpoint retrained and saved over the old one keeps its path: the run identity's weight fingerprint
    refuses to mix its answers with the old weights' ones; the same weights (also copied elsewhere) fingerprint alike."""
    import torch
    from transformers import AutoModelForImageTextToText

    from mmevo.eval.runner import weights_fingerprint

    model_dir = tmp_path / "model"
    shutil.copytree(tiny_vl_path, model_dir)
    assert weights_fingerprint(model_dir) == weights_fingerprint(tiny_vl_path) is not None
    assert weights_fingerprint(tmp_path / "no-such-dir") is None and weights_fingerprint("Qwen/Qwen2.5-VL-7B-Instruct") is None
    out = tmp_path / "ev"
    s = run_benchmark(_cfg(model_dir, out, **{"eval.limit": 1}))
    assert json.loads((out / "run.json").read_text())["weights"] == weights_fingerprint(model_dir)
    assert run_benchmark(_cfg(model_dir, out, **{"eval.limit": 1}))["resumed_items"] == 1
    model = AutoModelForImageTextToText.from_pretrained(model_dir)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1e-3)  # one small step of "training"
    model.save_pretrained(model_dir)
    with pytest.raises(ValueError, match=r"holds responses of a different run \(weights: '[0-9a-f]{16}' -> '[0-9a-f]{16}'\)"):
        run_benchmark(_cfg(model_dir, out, **{"eval.limit": 1}))
    # an out_dir of an older version (no weights in run.json) still resumes
    run = json.loads((out / "run.json").read_text())
    del run["weights"]
    (out / "run.json").write_text(json.dumps(run))
    assert run_benchmark(_cfg(model_dir, out, **{"eval.limit": 1}))["resumed_items"] == 1
    assert s["n"] == 1
