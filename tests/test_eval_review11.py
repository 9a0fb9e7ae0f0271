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
