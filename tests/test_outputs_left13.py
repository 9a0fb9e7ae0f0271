"""Round left13: what a rerun or a second run does to an earlier run's outputs, and where README's commands write."""

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from mmevo.cli import main
from mmevo.config import load_config

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


# -- mmevo eval --calibration: its out_dir is held, a finished report is not overwritten unseen ------------------------
def _calibration(model, out, *extra) -> list[str]:
    return ["eval", "--calibration", "--model", str(model), "--out", str(out), "data.n_heldout=6",
            "trainer.progress=false", *extra]


def test_calibration_eval_keeps_a_report_of_other_settings(tiny_text_path, tmp_path, capsys):
    # the second of `mmevo eval --calibration ... --max-tokens 6` / `... --max-tokens 4` into one --out wrote its
    # report over the first one's without a word (and took no lock: two at once wrote their files over each other)
    out = tmp_path / "cal"
    assert main(_calibration(tiny_text_path, out, "--limit", "3", "--max-tokens", "6")) == 0
    first = json.loads(capsys.readouterr().out)
    report = (out / "calibration.json").read_text()
    assert first["reused"] is False and first["max_tokens"] == 6 and first["n"] == 3

    assert main(_calibration(tiny_text_path, out, "--limit", "2", "--max-tokens", "4")) == 2
    err = capsys.readouterr().err
    assert f"{out / 'calibration.json'} holds a finished calibration report of another evaluation" in err
    assert "tasks 3 -> 2" in err and "max_tokens 6 -> 4" in err and "eval.overwrite=true" in err
    assert (out / "calibration.json").read_text() == report

    # the same evaluation again: its report stands, nothing is generated
    responses = (out / "responses.jsonl").stat().st_mtime_ns
    assert main(_calibration(tiny_text_path, out, "--limit", "3", "--max-tokens", "6")) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["reused"] is True and again["n"] == 3 and again["ece"] == first["ece"]
    assert (out / "calibration.json").read_text() == report
    assert (out / "responses.jsonl").stat().st_mtime_ns == responses

    # new weights under the same path are another evaluation too
    model = tmp_path / "model"
    shutil.copytree(tiny_text_path, model)
    assert main(_calibration(model, out, "--limit", "3", "--max-tokens", "6")) == 2
    assert "model " in capsys.readouterr().err

    # eval.overwrite=true replaces it, saying what it replaces
    assert main(_calibration(tiny_text_path, out, "--limit", "2", "--max-tokens", "4", "eval.overwrite=true")) == 0
    captured = capsys.readouterr()
    assert "eval.overwrite=true: replacing" in captured.err and "max_tokens 6 -> 4" in captured.err
    replaced = json.loads((out / "calibration.json").read_text())
    assert replaced["n"] == 2 and replaced["max_tokens"] == 4 and replaced["identity"]["tasks"] == 2
    assert len((out / "responses.jsonl").read_text().splitlines()) == 2


def test_calibration_eval_refuses_a_report_that_records_no_identity(tmp_path, capsys):
    out = tmp_path / "cal"
    out.mkdir()
    (out / "calibration.json").write_text(json.dumps({"n": 6, "ece": 0.1}))  # an older mmevo's report
    model = tmp_path / "model"  # never loaded: the earlier report is checked first (a config.json and a weight
    model.mkdir()  # file pass the up-front model.path check, which refuses a directory without them)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"")
    assert main(_calibration(model, out, "--limit", "1")) == 2
    err = capsys.readouterr().err
    assert "it records no identity" in err and "eval.overwrite=true" in err
    assert json.loads((out / "calibration.json").read_text()) == {"n": 6, "ece": 0.1}


def test_calibration_eval_holds_its_out_dir(tmp_path, capsys):
    from mmevo.runlock import RunLock

    out = tmp_path / "cal"
    model = tmp_path / "model"  # never loaded (a config.json and a weight file pass the up-front model.path check)
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"")
    with RunLock(out):  # a live evaluation into it
        assert main(_calibration(model, out, "--limit", "1")) == 2
    err = capsys.readouterr().err
    assert f"output_dir {out} is in use by another live mmevo run" in err
    assert sorted(p.name for p in out.iterdir()) == [".mmevo.lock"]


# -- README's commands write where git does not look ------------------------------------------------------------------
def _readme_commands() -> list[list[str]]:
    """Each command line of README.md's bash blocks (comments and `&&` split, environment assignments dropped)."""
    cmds = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split(" # ")[0].split("&&"):
                words = [w for w in shlex.split(part, comments=True) if not re.match(r"^[A-Z_]+=", w)]
                if words:
                    cmds.append(words)
    return cmds


def _option(words: list[str], *names: str) -> str | None:
    for i, w in enumerate(words):
        if w in names and i + 1 < len(words):
            return words[i + 1]
        for n in names:
            if w.startswith(n + "="):
                return w.split("=", 1)[1]
    return None


def _written_paths(words: list[str]) -> list[str]:
    """The paths (relative to the repository) a README command writes into."""
    if words[:2] == ["torchrun", "--standalone"] and "mmevo.cli" in words:
        words = ["mmevo", *words[words.index("mmevo.cli") + 1:]]
    if words[0] == "python":  # scripts/*.py: their --out
        return [p for p in [_option(words, "--out")] if p]
    if words[0] != "mmevo" or len(words) < 2 or "--help" in words:
        return []
    cmd, rest = words[1], words[2:]
    if cmd == "build-tiny":
        return [w for w in rest if not w.startswith("-")]
    if cmd == "render":
        return [_option(rest, "-o", "--out")]
    if cmd == "demo":
        return [_option(rest, "--out") or "runs/demo"]
    if cmd not in ("train", "sft", "eval", "evolve", "prism"):
        return []
    if cmd in ("evolve", "prism"):
        loop, rest = rest[0], rest[1:]
    config = rest[0] if rest and rest[0].endswith(".yaml") else None
    overrides = [w for w in rest[1 if config else 0:] if "=" in w and not w.startswith("-")]
    cfg = load_config(ROOT / config if config else None, overrides)
    paths = [cfg.model.cache_dir] if cfg.model.path.startswith("tiny") else []
    if cmd == "train":
        paths.append(cfg.trainer.output_dir)
    elif cmd == "sft":
        paths.append(cfg.sft.output_dir)
    elif cmd == "evolve":
        paths.append(getattr(cfg, loop).output_dir)
    elif cmd == "prism":
        paths.append(str(Path(cfg.prism.centroids).parent))
    elif "--benchmark" in rest or "--calibration" in rest:
        paths.append(_option(rest, "--out") or "runs/eval")
    return paths


def _not_ignored(paths: list[str], tmp_path: Path) -> list[str]:
    """The repository paths among ``paths`` that the repository's .gitignore does not ignore (asked of git, in a
    scratch repository holding only that .gitignore: this checkout's own links or state do not count)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "ignore"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    inside = [p for p in paths if not Path(p).is_absolute() and not p.startswith(("../", "$"))]
    found = subprocess.run(["git", "-C", str(repo), "check-ignore", "--stdin"], input="\n".join(inside) + "\n",
                           capture_output=True, text=True).stdout.split("\n")
    return [p for p in inside if p not in found]


def test_readme_commands_write_only_into_ignored_paths(tmp_path):
    # README's `mmevo build-tiny models/tiny-vl` left a several-MB model in the checkout as untracked files
    commands = _readme_commands()
    written = {p: words for words in commands for p in _written_paths(words)}
    assert {"runs/tiny-vl", "runs/plot.png", "runs/honest_tiny_gss", "runs/eval", ".cache/mmevo"} <= set(written)
    assert _not_ignored(sorted(written), tmp_path) == []


def test_the_ignore_check_catches_a_path_git_would_show(tmp_path):
    assert _not_ignored(["models/tiny-vl", "plot.png", "runs/x", ".cache/mmevo/tiny"], tmp_path) == [
        "models/tiny-vl", "plot.png"]
    assert _written_paths(shlex.split("mmevo build-tiny models/tiny-vl")) == ["models/tiny-vl"]
    assert _written_paths(shlex.split("mmevo render plot.py -o plot.png")) == ["plot.png"]


def test_config_outputs_are_ignored(tmp_path):
    # what the shipped configs (and the defaults) write: their run dirs, the tiny-model cache, Prism's clusters
    paths = set()
    for cfg in [load_config(p, []) for p in sorted((ROOT / "configs").glob("*.yaml"))] + [load_config(None, [])]:
        paths |= {cfg.model.cache_dir, cfg.trainer.output_dir, cfg.sft.output_dir, cfg.mmzero.output_dir,
                  cfg.prism.output_dir, cfg.honest.output_dir, str(Path(cfg.prism.centroids).parent)}
    assert _not_ignored(sorted(paths), tmp_path) == []


def test_render_makes_the_directory_of_its_output(tmp_path, capsys):
    # README's `mmevo render plot.py -o runs/plot.png` in a fresh checkout has no runs/ yet
    src = tmp_path / "plot.py"
    src.write_text("import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\nplt.savefig('out.png')\n")
    out = tmp_path / "runs" / "figs" / "plot.png"
    assert main(["render", str(src), "-o", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"


# -- a rerun with other phase steps: finished phases keep theirs, and say so ---------------------------------------
def _prism_cfg(tiny_text_path, out, centroids, *extra):
    return load_config(ROOT / "configs" / "prism_tiny.yaml", [
        f"model.path={tiny_text_path}", f"prism.output_dir={out}", f"prism.centroids={centroids}",
        "prism.warmup_questions=8", "sft.epochs=1", "prism.questioner_prompts=4", "prism.pool_prompts=4",
        "prism.solver_samples=4", "trainer.progress=false", *extra])


@pytest.fixture(scope="module")
def prism_two_steps(tiny_text_path, tmp_path_factory):
    """A finished one-iteration Prism run whose questioner trained 2 steps."""
    from mmevo.evolve.prism import run_prism
    from mmevo.prism.clusters import build_clusters

    root = tmp_path_factory.mktemp("prism_steps")
    centroids = root / "clusters" / "centroids.npy"
    cfg = _prism_cfg(tiny_text_path, root / "run", centroids, "prism.iterations=1", "prism.questioner_steps=2",
                     "prism.solver_steps=1")
    build_clusters(cfg)
    summary = run_prism(cfg)
    assert summary["iterations"][0]["questioner"]["steps"] == 2 and not summary.get("steps_mismatch")
    return root / "run", centroids


@pytest.mark.parametrize("steps", [1, 3])
def test_prism_rerun_that_would_only_relabel_finished_phases_is_refused(prism_two_steps, tiny_text_path, tmp_path,
                                                                        steps):
    # `mmevo evolve prism ... prism.questioner_steps=1` into a finished 2-step run trained nothing (the finished
    # questioner is skipped) and rewrote summary.json with questioner_steps=1 in its config, without a word
    from mmevo.config import ConfigError
    from mmevo.evolve.prism import run_prism

    run, centroids = prism_two_steps
    out = tmp_path / "run"
    shutil.copytree(run, out)
    before = (out / "summary.json").read_text()
    cfg = _prism_cfg(tiny_text_path, out, centroids, "prism.iterations=1", f"prism.questioner_steps={steps}",
                     "prism.solver_steps=1")
    with pytest.raises(ConfigError) as e:
        run_prism(cfg)
    assert str(e.value).startswith(f"prism.questioner_steps={steps}: every phase of prism.output_dir={out} it "
                                   "applies to has finished, with other steps (iter_1/questioner 2)")
    assert "not trained again, extended or cut" in str(e.value)
    assert (out / "summary.json").read_text() == before


def test_prism_rerun_with_other_steps_names_the_finished_phases_that_keep_theirs(prism_two_steps, tiny_text_path,
                                                                                 tmp_path, capsys):
    from mmevo.evolve.prism import run_prism

    run, centroids = prism_two_steps
    out = tmp_path / "run"
    shutil.copytree(run, out)
    capsys.readouterr()
    cfg = _prism_cfg(tiny_text_path, out, centroids, "prism.iterations=2", "prism.questioner_steps=1",
                     "prism.solver_steps=1")
    summary = run_prism(cfg)
    err = capsys.readouterr().err
    assert "finished phases keep the steps they trained" in err
    assert "iter_1/questioner trained 2 steps, prism.questioner_steps=1" in err
    first, second = summary["iterations"]
    assert first["questioner"]["steps"] == 2 and second["questioner"]["steps"] == 1  # kept / trained now
    expected = [{"phase": "iter_1/questioner", "steps": 2, "key": "prism.questioner_steps", "config": 1}]
    assert summary["steps_mismatch"] == expected
    assert json.loads((out / "summary.json").read_text())["steps_mismatch"] == expected


def _mmzero_cfg(out, *extra):
    # no warm-up: the random tiny proposer writes nothing parsable, so coder and solver are skipped (no data); the
    # proposer phase still trains its steps
    return load_config(ROOT / "configs" / "mmzero_tiny.yaml", [
        f"mmzero.output_dir={out}", "mmzero.warmup_demos=0", "mmzero.proposer_prompts=4", "mmzero.code_samples=1",
        "mmzero.solver_samples=2", "rollout.n=2", "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2",
        "mmzero.roles={proposer: {rollout.max_tokens: 16}, coder: {rollout.max_tokens: 16}, "
        "solver: {rollout.max_tokens: 8, data.prompt_template: r1v}}", "trainer.progress=false", *extra])


def test_mmzero_rerun_with_other_phase_steps_is_refused_or_reported(tmp_path, capsys):
    from mmevo.config import ConfigError
    from mmevo.evolve.mmzero import run_mmzero

    out = tmp_path / "run"
    proposer = out / "iter_0" / "proposer"
    first = run_mmzero(_mmzero_cfg(out, "mmzero.iterations=1", "mmzero.phase_steps=2"))
    assert first["iterations"][0]["proposer"]["steps"] == 2 and not first.get("steps_mismatch")
    records = sorted(p.name for p in (proposer / "records").iterdir())
    assert records == ["step_0000.jsonl", "step_0001.jsonl"]
    before = (out / "summary.json").read_text()
    with pytest.raises(ConfigError) as e:  # nothing left to train under phase_steps=1: it would only relabel
        run_mmzero(_mmzero_cfg(out, "mmzero.iterations=1", "mmzero.phase_steps=1"))
    assert str(e.value).startswith(f"mmzero.phase_steps=1: every phase of mmzero.output_dir={out} it applies to "
                                   "has finished, with other steps (iter_0/proposer 2)")
    assert (out / "summary.json").read_text() == before

    # killed after its last checkpoint, before done.json: the rerun with phase_steps=1 resumes it at step 2, past the
    # new end; it trains nothing and exports the 2-step model, whose step-1 proposals its records must keep (they were
    # deleted as "past mmzero.phase_steps", so the coder phase read half the proposals the exported proposer made)
    (proposer / "done.json").unlink()
    expected = [{"phase": "iter_0/proposer", "steps": 2, "key": "mmzero.phase_steps", "config": 1}]
    resumed = run_mmzero(_mmzero_cfg(out, "mmzero.iterations=1", "mmzero.phase_steps=1"))
    assert resumed["iterations"][0]["proposer"]["steps"] == 2
    assert resumed["iterations"][0]["proposer"]["stale_records_removed"] == 0
    assert sorted(p.name for p in (proposer / "records").iterdir()) == records
    assert resumed["steps_mismatch"] == expected

    capsys.readouterr()
    second = run_mmzero(_mmzero_cfg(out, "mmzero.iterations=2", "mmzero.phase_steps=1"))
    assert "iter_0/proposer trained 2 steps, mmzero.phase_steps=1" in capsys.readouterr().err
    assert [it["proposer"]["steps"] for it in second["iterations"]] == [2, 1]
    assert second["steps_mismatch"] == json.loads((out / "summary.json").read_text())["steps_mismatch"] == expected
