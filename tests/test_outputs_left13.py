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
    model = tmp_path / "model"  # never loaded: the earlier report is checked first
    model.mkdir()
    assert main(_calibration(model, out, "--limit", "1")) == 2
    err = capsys.readouterr().err
    assert "it records no identity" in err and "eval.overwrite=true" in err
    assert json.loads((out / "calibration.json").read_text()) == {"n": 6, "ece": 0.1}


def test_calibration_eval_holds_its_out_dir(tmp_path, capsys):
    from mmevo.runlock import RunLock

    out = tmp_path / "cal"
    model = tmp_path / "model"
    model.mkdir()
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
