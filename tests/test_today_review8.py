"""Review of the day's changes: defects found, each with the case that showed it."""

import sys

import pytest

from mmevo.runlock import LOCK_FILE, OutputDirBusy, RunLock

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock: Linux")


def _discard_first(monkeypatch, module, name, holder, after=False):
    """Wrap ``module.name`` so that, on its first call, ``holder`` (a failed start) discards its directory and lets
    go of the lock before (``after``: right after) the real call: the moment a second run can hit between two of its
    own calls."""
    real = getattr(module, name)
    fired = []

    def wrapped(*args, **kwargs):
        result = real(*args, **kwargs) if after else None
        if not fired:
            fired.append(True)
            assert holder.discard()
            holder.release()
        return result if after else real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)
    return fired


@linux_only
def test_a_run_starting_while_a_failed_start_discards_locks_the_file_at_the_path(tmp_path, monkeypatch):
    """B opened the lock file, then A (which created the directory and failed) removed file and directory and let go;
    B's flock then succeeded on the unlinked file: B ran with no directory and no lock file, and a third run C made a
    new directory and lock beside it, two live runs on one output_dir."""
    import fcntl

    out = tmp_path / "run"
    a = RunLock(out).acquire()
    fired = _discard_first(monkeypatch, fcntl, "flock", a)
    b = RunLock(out).acquire()
    monkeypatch.undo()
    assert fired and b.held
    assert (out / LOCK_FILE).is_file() and b.created_dir  # B made the directory again and locked the file there
    with pytest.raises(OutputDirBusy):
        RunLock(out).acquire()
    b.release()


@linux_only
def test_a_run_whose_directory_is_discarded_before_its_open_starts_over(tmp_path, monkeypatch):
    """A discard between B's mkdir and B's open of the lock file failed B with a bare FileNotFoundError."""
    from pathlib import Path

    out = tmp_path / "run"
    a = RunLock(out).acquire()
    fired = _discard_first(monkeypatch, Path, "mkdir", a, after=True)
    b = RunLock(out).acquire()
    monkeypatch.undo()
    assert fired and b.held and (out / LOCK_FILE).is_file()
    with pytest.raises(OutputDirBusy):
        RunLock(out).acquire()
    b.release()


@pytest.mark.parametrize("argv, made", [
    (["evolve", "mmzero", "configs/mmzero_tiny.yaml"], "mmzero.output_dir"),
    (["evolve", "prism", "configs/prism_tiny.yaml"], "prism.output_dir"),
    (["evolve", "honest", "configs/honest_tiny.yaml"], "honest.output_dir"),
    (["demo"], "--out"),
])
def test_the_up_front_checks_leave_no_output_dir_behind(tmp_path, no_runs, capsys, argv, made):
    """The loops' and the demo's checks made the output directory (to name the key when it cannot be made): a run
    refused by a later check (no such device, missing centroids) then left an empty directory, nested ones too, and
    so did a check-only run. The check still names the key when the place cannot be made."""
    from mmevo.cli import main

    out = tmp_path / "a" / "b"
    given = ["--out", str(out)] if made == "--out" else [f"{made}={out}"]
    assert main([*argv, *given]) == 0 and no_runs  # only the checks ran: the runner (replaced) makes it itself
    assert not (tmp_path / "a").exists()
    (tmp_path / "file").write_text("x")
    below_file = tmp_path / "file" / "out"
    given = ["--out", str(below_file)] if made == "--out" else [f"{made}={below_file}"]
    capsys.readouterr()
    assert main([*argv, *given]) == 2
    assert f"{made} {below_file}" in capsys.readouterr().err.replace("=", " ")
    assert (tmp_path / "file").read_text() == "x"


def test_train_with_no_step_is_not_refused_for_its_rollout_settings(no_runs, capsys):
    """``trainer.steps=0`` runs no GRPO step (``run_grpo`` evaluates ``model.path`` before / after and exports it);
    the new ``rollout.temperature=0`` refusal ("no step would change the policy") blocked it, while the loops exempt
    ``phase_steps=0`` from the same check. A run with steps is still refused."""
    from mmevo.cli import main

    assert main(["train", "rollout.temperature=0", "trainer.steps=0"]) == 0 and no_runs == ["train"]
    assert main(["train", "rollout.n=1", "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2",
                 "trainer.steps=0"]) == 0
    capsys.readouterr()
    assert main(["train", "rollout.temperature=0", "trainer.steps=1"]) == 2
    assert "rollout.temperature=0 decodes greedily" in capsys.readouterr().err
    assert no_runs == ["train", "train"]
