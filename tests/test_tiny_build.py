"""The embedded tiny model's cache: atomic builds, refusal of a broken cache, one build per node under torchrun."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mmevo.config import load_config
from mmevo.models import tiny
from mmevo.models.tiny import IncompleteModelDir, build_tiny_qwen2, missing_parts

ROOT = Path(__file__).resolve().parent.parent


def _fake_build(tmp: Path) -> None:
    for f in ("config.json", "tokenizer_config.json", "model.safetensors", tiny.SPEC_FILE):
        (tmp / f).write_text("{}")


def _old_rank1_build(d: Path) -> None:
    """What an older mmevo left when rank 1 renamed first: tokenizer and spec, no config.json, no weights."""
    d.mkdir(parents=True)
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", tiny.SPEC_FILE):
        (d / f).write_text("{}")


def test_a_broken_cache_dir_is_refused_with_a_hint_to_delete_it(tmp_path, monkeypatch):
    from mmevo.recipes import resolve_model_path

    broken = tmp_path / "cache" / "tiny-qwen2"
    _old_rank1_build(broken)
    monkeypatch.setattr(tiny, "train_tokenizer", lambda *a, **k: pytest.fail("a broken cache must not be rebuilt"))
    cfg = load_config(None, ["model.path=tiny-text", f"model.cache_dir={tmp_path / 'cache'}"])
    with pytest.raises(IncompleteModelDir) as e:
        resolve_model_path(cfg)
    msg = str(e.value)
    assert str(broken) in msg and "Delete that directory" in msg and "config.json" in msg and "weights" in msg
    assert isinstance(e.value, FileNotFoundError)  # the CLI reports it as a plain error
    assert sorted(p.name for p in broken.iterdir()) == sorted(
        ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja", tiny.SPEC_FILE])  # left untouched


def test_cli_reports_the_broken_cache_plainly(tmp_path, capsys):
    from mmevo.cli import main

    _old_rank1_build(tmp_path / "cache" / "tiny-qwen2.5-vl")
    assert main(["eval", "model.path=tiny", f"model.cache_dir={tmp_path / 'cache'}", "data.heldout=synthetic"]) == 2
    assert "Delete that directory" in capsys.readouterr().err


def test_build_is_atomic_reused_and_loses_a_race_gracefully(tmp_path):
    out = tmp_path / "m"
    out.mkdir()  # an empty directory is built into
    assert tiny._atomic_save_dir(_fake_build, out) == out and missing_parts(out) == []
    assert tiny._atomic_save_dir(lambda tmp: pytest.fail("rebuilt"), out) == out  # complete: reused

    winner = tmp_path / "w"

    def racing_build(tmp):  # another process renames its finished build into place while this one builds
        _fake_build(tmp)
        other = tmp_path / "other"
        other.mkdir()
        _fake_build(other)
        (other / "winner").write_text("")
        os.rename(other, winner)

    assert tiny._atomic_save_dir(racing_build, winner) == winner
    assert (winner / "winner").exists()  # the first rename's build is used ...
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "w"]  # ... and the loser's temp dir is gone


def test_a_build_that_writes_no_weights_is_not_renamed_into_place(tmp_path):
    out = tmp_path / "m"

    def no_weights(tmp):  # like save_pretrained on a non-zero rank once torch.distributed is initialised
        _fake_build(tmp)
        (tmp / "model.safetensors").unlink()

    with pytest.raises(RuntimeError, match="wrote no weights"):
        tiny._atomic_save_dir(no_weights, out)
    assert list(tmp_path.iterdir()) == []  # neither out nor a temp dir is left


def test_real_build_is_complete(tmp_path):
    out = build_tiny_qwen2(tmp_path / "tiny-text")
    assert missing_parts(out) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-text"]


def _torchrun(tmp_path, mode: str, port: str) -> list[dict]:
    cache, out = tmp_path / "cache", tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", port,
           str(ROOT / "tests" / "dist" / "tiny_build_worker.py"), str(cache), str(out), mode]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


@pytest.mark.parametrize("mode", ["node", "two-nodes"])
def test_two_processes_build_one_complete_model(tmp_path, mode):
    pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (mmevo joins the group through it)")
    r0, r1 = _torchrun(tmp_path, mode, {"node": "29542", "two-nodes": "29543"}[mode])
    assert r0["world_size"] == 2 and r0["path"] == r1["path"] == str(tmp_path / "cache" / "tiny-qwen2.5-vl")
    # one node: rank 0 alone builds; "two nodes" sharing the cache: each node's first rank builds, one rename wins
    assert [r0["builds"], r1["builds"]] == ([1, 0] if mode == "node" else [1, 1])
    assert r0["missing"] == r1["missing"] == []
    assert r0["files"] == r1["files"] and "model.safetensors" in r0["files"] and "config.json" in r0["files"]
    assert r0["cache_entries"] == r1["cache_entries"] == ["tiny-qwen2.5-vl"]  # no temp dir left behind
    assert r0["is_vl"] and r0["param_sum"] == r1["param_sum"] and r0["ids"] == r1["ids"]  # loadable, the same
