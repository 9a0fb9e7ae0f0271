"""Review of the sampled evaluation and the demo's caches: missing golds and short engine outputs are errors, pass@1
/ maj@n by hand, bootstrap arguments checked, cached evaluations and finished runs reused only when they match."""

from __future__ import annotations

import json

import pytest

from mmevo.data.schema import Example
from mmevo.rollout.base import Completion


class _CharTokenizer:
    """Token id = code point: decoding is exact and needs no model files."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids)


class _Engine:
    """Returns the given texts as the completions of each request (``texts_per_request[i]`` for request i)."""

    def __init__(self, texts_per_request):
        self.texts, self.calls = texts_per_request, 0

    def generate(self, requests, params):
        self.calls += 1
        return [[Completion([ord(c) for c in t], [], "stop") for t in texts] for texts in self.texts]


def _ex(i, answer, choices=()):
    return Example(id=f"p{i}", problem=f"problem {i} <image>", answer=answer, choices=list(choices), images=[],
                   meta={"kind": "k"})


def test_pass1_and_majority_by_hand_with_choices_and_ties():
    from mmevo.eval.sampled import sampled_records, summarize_sampled

    exs = [_ex(0, "5", ["3", "5", "7"]), _ex(1, 12)]  # a choice problem, and a numeric gold that is not a str
    eng = _Engine([["\\boxed{B}", "\\boxed{5}", "\\boxed{C}", "\\boxed{7}"],  # 5 (B) and 7 (C) tie 2-2: first wins
                   ["\\boxed{12}", "\\boxed{13}", "\\boxed{13}", "no answer"]])  # mode 13 is wrong
    recs = sampled_records(eng, lambda ex: ex, exs, _CharTokenizer(), n=4, max_tokens=8)
    assert recs[0]["correct"] == [1, 1, 0, 0] and recs[0]["pass1"] == 0.5 and recs[0]["maj"] == 1
    assert recs[0]["modal_share"] == 0.5
    assert recs[1]["correct"] == [1, 0, 0, 0] and recs[1]["pass1"] == 0.25 and recs[1]["maj"] == 0
    s = summarize_sampled(recs)
    # pass@1 is the mean over problems of c/n: (2/4 + 1/4) / 2; maj@4 (1 + 0) / 2
    assert s["pass1"] == pytest.approx(0.375) and s["maj"] == pytest.approx(0.5)
    assert s["by_kind"] == {"k": {"n": 2, "pass1": 0.375, "maj": 0.5}}


@pytest.mark.parametrize("gold", [None, "", "   "])
def test_a_problem_without_gold_is_an_error_not_a_zero(gold):
    from mmevo.eval.sampled import sampled_records

    exs = [_ex(0, "5"), _ex(1, gold)]
    eng = _Engine([["\\boxed{5}"] * 2, ["\\boxed{5}"] * 2])
    with pytest.raises(ValueError, match=r"'p1'.*answer"):
        sampled_records(eng, lambda ex: ex, exs, _CharTokenizer(), n=2, max_tokens=8)
    assert eng.calls == 0  # refused before any generation


def test_an_engine_returning_too_few_groups_or_samples_is_an_error():
    from mmevo.eval.sampled import sampled_records

    exs = [_ex(0, "5"), _ex(1, "6")]
    with pytest.raises(ValueError, match="1 groups for 2 problems"):
        sampled_records(_Engine([["\\boxed{5}"] * 2]), lambda ex: ex, exs, _CharTokenizer(), n=2, max_tokens=8)
    with pytest.raises(ValueError, match=r"'p1'.*1 samples, 2"):
        sampled_records(_Engine([["\\boxed{5}"] * 2, ["\\boxed{6}"]]), lambda ex: ex, exs, _CharTokenizer(), n=2,
                        max_tokens=8)


@pytest.mark.parametrize("kw", [{"n_boot": 0}, {"level": 0.0}, {"level": 1.5}])
def test_bootstrap_arguments_are_checked(kw):
    from mmevo.eval.sampled import bootstrap_ci

    with pytest.raises(ValueError, match="n_boot >= 1 and 0 < level < 1"):
        bootstrap_ci([1.0, 0.0, 1.0], **kw)


def _fake_eval(monkeypatch):
    import mmevo.demo as demo

    calls = []

    def fake(cfg, model_path, examples, controls=False):
        calls.append(model_path)
        return {"real": {"pass1": float(len(calls))}, "samples": [{"id": "p0", "response": "x"}]}  # as the real one

    monkeypatch.setattr(demo, "sampled_eval", fake)
    return calls


def test_cached_eval_is_redone_for_a_rebuilt_model_or_other_problems(tmp_path, monkeypatch):
    from mmevo.config import load_config
    from mmevo.demo import cached_eval

    calls = _fake_eval(monkeypatch)
    cfg = load_config(None, [])
    model = tmp_path / "sft" / "model"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"old weights")
    path = tmp_path / "evals" / "sft.json"
    exs = [_ex(0, "5"), _ex(1, "6")]
    assert cached_eval(path, cfg, model, exs)["real"]["pass1"] == 1.0
    assert cached_eval(path, cfg, model, exs)["real"]["pass1"] == 1.0 and len(calls) == 1  # reused
    (model / "model.safetensors").write_bytes(b"retrained weights")  # same path, another model
    assert cached_eval(path, cfg, model, exs)["real"]["pass1"] == 2.0 and len(calls) == 2
    other = [_ex(0, "5"), _ex(1, "7")]  # as many problems, another gold
    assert cached_eval(path, cfg, model, other)["real"]["pass1"] == 3.0 and len(calls) == 3
    more_tokens = load_config(None, ["trainer.eval_max_tokens=7"])
    assert cached_eval(path, more_tokens, model, other)["real"]["pass1"] == 4.0 and len(calls) == 4


def test_run_jobs_retrains_a_run_whose_model_is_gone_despite_its_old_evaluation(tmp_path, monkeypatch, capsys):
    import mmevo.demo as demo
    from mmevo.config import load_config

    started = []

    class FakeProcess:
        def __init__(self, target, name, args):
            self.name, self.exitcode = name, 0

        def start(self):
            started.append(self.name)

        def is_alive(self):
            return False

        def join(self):
            pass

    class FakeContext:
        Process = FakeProcess

    monkeypatch.setattr(demo.multiprocessing, "get_context", lambda kind: FakeContext())
    monkeypatch.setattr(demo.time, "sleep", lambda s: None)
    run = tmp_path / "csrs"
    cfg = load_config(None, [f"trainer.output_dir={run}"])
    ev = tmp_path / "evals" / "csrs.json"
    ev.parent.mkdir()
    # the evaluation of an earlier run whose directory was deleted since (as the demo's refusal message advises)
    ev.write_text(json.dumps({"model": str(run / "final"), "n": 2, "real": {"pass1": 0.9}}))
    demo.run_jobs({"csrs": (cfg, ev)}, 1, 1)
    assert started == ["mmevo-csrs"] and "finished earlier" not in capsys.readouterr().out
    # its model is there again, evaluated at another token budget: evaluated again, then reused
    (run / "final").mkdir(parents=True)
    (run / "final" / "model.safetensors").write_bytes(b"weights")
    rec = {"model": str(run / "final"), "files": demo.model_stamp(run / "final"), "eval_samples": demo.EVAL_SAMPLES,
           "seed": cfg.trainer.seed, "max_tokens": 99, "template": [cfg.data.prompt_template, cfg.data.system_prompt]}
    ev.write_text(json.dumps(rec))
    demo.run_jobs({"csrs": (cfg, ev)}, 1, 1)
    assert started == ["mmevo-csrs"] * 2
    ev.write_text(json.dumps({**rec, "max_tokens": cfg.rollout.max_tokens}))
    demo.run_jobs({"csrs": (cfg, ev)}, 1, 1)
    assert started == ["mmevo-csrs"] * 2 and "finished earlier" in capsys.readouterr().out


def test_a_finished_run_with_other_settings_is_named_not_reused(tmp_path):
    from mmevo.config import load_config, to_dict
    from mmevo.demo import finished_run_changes, run_jobs

    run = tmp_path / "csrs"
    cfg = load_config(None, [f"trainer.output_dir={run}", "trainer.steps=80"])
    assert finished_run_changes(cfg) == []  # nothing there yet
    run.mkdir()
    recorded = to_dict(cfg)
    recorded["trainer"]["progress"] = False  # run_jobs turns the progress bar off in the child: not a change
    recorded["model"]["path"] = "elsewhere/sft/model"  # where the demo's --out put things: not a change either
    recorded["trainer"]["threads"] = 7  # another machine: not a change of what was trained
    (run / "summary.json").write_text(json.dumps({"config": recorded}))
    assert finished_run_changes(cfg) == []
    longer = load_config(None, [f"trainer.output_dir={run}", "trainer.steps=120", "rollout.n=4"])
    assert finished_run_changes(longer) == ["rollout.n", "trainer.steps"]
    # the demo (and the ablation script) would otherwise report the 80-step run as one of 120 steps
    ev = tmp_path / "csrs.json"
    ev.write_text(json.dumps({"model": str(run / "final"), "real": {"pass1": 0.5}}))
    with pytest.raises(ValueError, match=r"other settings \(rollout.n, trainer.steps\).*another --out"):
        run_jobs({"csrs": (longer, ev)}, 1, 1)
