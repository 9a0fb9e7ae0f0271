"""Defects a README walk-through found in the command line: `render -o x.jpg`, another loop's section overridden on
an evolve command line, a one-slash model.path typo tried on the hub, the resume warning's formatting."""

import pytest

from mmevo.cli import main

PLOT = "import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\n"


@pytest.mark.parametrize("name", ["x.jpg", "x.jpeg", "x.webp", "x", "x.png.gif"])
def test_render_refuses_an_output_that_is_not_png(tmp_path, capsys, name):
    # the sandbox returns PNG bytes: `-o x.jpg` wrote them under a JPEG name
    src = tmp_path / "plot.py"
    src.write_text(PLOT)
    with pytest.raises(SystemExit) as e:
        main(["render", str(src), "-o", str(tmp_path / name)])
    assert e.value.code == 2
    assert f"-o {tmp_path / name}: the render is a PNG image; give a path ending in .png" in capsys.readouterr().err
    assert not (tmp_path / name).exists()


def test_render_takes_a_png_suffix_in_any_case(tmp_path):
    src = tmp_path / "plot.py"
    src.write_text(PLOT)
    out = tmp_path / "X.PNG"
    assert main(["render", str(src), "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- an override of another loop's section on an evolve command line ------------------------------------------------
# each call also points the command's own output at a file, so that a command that took the stray key (the old code)
# stops at that check, in seconds, instead of running its loop
@pytest.mark.parametrize("argv, key, section", [
    (["evolve", "mmzero", "configs/mmzero_tiny.yaml", "prism.roles.solver={trainer.lr: 1e-6}"],
     "prism.roles.solver", "prism"),
    (["evolve", "mmzero", "configs/mmzero_tiny.yaml", "honest.gss_mode=stub"], "honest.gss_mode", "honest"),
    (["evolve", "prism", "configs/prism_tiny.yaml", "mmzero.phase_steps=3"], "mmzero.phase_steps", "mmzero"),
    (["evolve", "prism", "configs/prism_tiny.yaml", "mmzero={phase_steps: 3}"], "mmzero", "mmzero"),
    (["evolve", "honest", "configs/honest_tiny.yaml", "prism.solver_steps=2"], "prism.solver_steps", "prism"),
    (["evolve", "honest", "configs/honest_tiny.yaml", "mmzero.roles.solver={trainer.lr: 1e-6}"],
     "mmzero.roles.solver", "mmzero"),
    (["prism", "build-clusters", "configs/prism_tiny.yaml", "honest.roles.solver={trainer.lr: 1e-6}"],
     "honest.roles.solver", "honest"),
])
def test_evolve_refuses_another_loops_key_on_the_command_line(tmp_path, capsys, argv, key, section):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    own = argv[1] if argv[0] == "evolve" else "prism"
    own_out = f"{own}.output_dir={blocker}" if argv[0] == "evolve" else f"prism.centroids={blocker}/c.npy"
    assert main([*argv, own_out]) == 2
    err = capsys.readouterr().err
    assert f"{key}: set on the command line, but it belongs to the {section} loop" in err
    assert f"`mmevo {' '.join(argv[:2]) if argv[0] == 'evolve' else 'prism build-clusters'}` would ignore it" in err


def test_evolve_keeps_its_own_and_shared_keys_on_the_command_line(tmp_path, capsys):
    # its own section, and honest.* keys other loops' data reads (honest.domains): not refused as another loop's
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    for argv in (["evolve", "prism", "configs/prism_tiny.yaml", "prism.solver_steps=2"],
                 ["evolve", "mmzero", "configs/mmzero_tiny.yaml", "honest.min_difficulty=2"],
                 ["evolve", "honest", "configs/honest_tiny.yaml", "honest.gss_blocks=1"]):
        assert main([*argv, f"{argv[1]}.output_dir={blocker}"]) == 2
        err = capsys.readouterr().err
        assert "belongs to the" not in err and f"{argv[1]}.output_dir={blocker}: cannot be" in err, err


# -- a one-slash model.path typo (`runs/nope`) looks like a hub id ---------------------------------------------------
def _hub_cache_with(repo_id: str, model_dir, cache) -> None:
    """The hub cache's layout for ``repo_id`` at one commit, holding the files of ``model_dir``."""
    import shutil

    repo = cache / f"models--{repo_id.replace('/', '--')}"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(model_dir, repo / "snapshots" / commit)


@pytest.mark.parametrize("offline", [("HF_HUB_OFFLINE", "1"), ("HF_HUB_OFFLINE", "true"), ("HF_HUB_OFFLINE", "YES"),
                                     ("TRANSFORMERS_OFFLINE", "1")])
def test_an_offline_hub_fails_a_one_slash_typo_at_once(tmp_path, monkeypatch, capsys, offline):
    # HF_HUB_OFFLINE=true (huggingface_hub's spelling too) or TRANSFORMERS_OFFLINE: the hub client was asked anyway,
    # ~30 s of retries without a network
    import transformers

    from mmevo.models.loader import load_model

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv(*offline)
    monkeypatch.chdir(tmp_path)

    def asked(*args, **kwargs):
        raise AssertionError("the hub was asked")
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", asked)
    with pytest.raises(FileNotFoundError, match=rf"model 'runs/nope' is not a local directory, nor in the hub cache, "
                                                rf"and {offline[0]}={offline[1]} forbids the hub"):
        load_model("runs/nope")
    assert main(["train", "model.path=runs/nope", f"trainer.output_dir={tmp_path / 'out'}"]) == 2
    assert "mmevo train: error: model 'runs/nope' is not a local directory, nor in the hub cache" in \
        capsys.readouterr().err


def test_a_cached_hub_model_loads_offline(tmp_path, monkeypatch, tiny_text_path):
    # HF_HUB_OFFLINE=1 is how a cached hub model is used without a network: it was refused before transformers looked
    import huggingface_hub.constants

    from mmevo.models.loader import load_model

    _hub_cache_with("someone/tiny-text", tiny_text_path, tmp_path / "hub")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    loaded = load_model("someone/tiny-text")
    assert loaded.path == "someone/tiny-text" and not loaded.is_vl


def test_an_online_fetch_of_an_uncached_id_is_said_before_the_hub_is_asked(tmp_path, monkeypatch, capsys):
    import transformers

    from local_hub import reachable_hub
    from mmevo.models.loader import load_model

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.chdir(tmp_path)
    said = []

    def hub(name, *args, **kwargs):  # what stderr held when the hub client started (and would retry)
        said.append(capsys.readouterr().err)
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files.")
    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", hub)
    with reachable_hub(monkeypatch) as asked, \
            pytest.raises(OSError, match="model 'runs/nope' is not a local directory, and loading it from the hub failed"):
        load_model("runs/nope")
    assert asked == ["HEAD /runs/nope/resolve/main/config.json"]  # mmevo's one-request check that the hub answers
    assert said == ["[mmevo] model 'runs/nope': no local directory of that name; fetching it from the hub as a "
                    "repository id (set HF_HUB_OFFLINE=1 to fail at once instead)\n"]


# -- the CLI prints mmevo's warnings on one line ---------------------------------------------------------------------
def _tiny_train(tiny_text_path, out, *extra):
    return ["train", f"model.path={tiny_text_path}", f"trainer.output_dir={out}", "trainer.steps=1",
            "trainer.save_every=1", "trainer.prompts_per_step=1", "trainer.mini_batch_prompts=1", "rollout.n=2", "rollout.max_tokens=4",
            "data.n_train=4", "data.heldout=", "trainer.eval_every=0", *extra]


def test_the_resume_warning_is_one_clean_line_in_the_cli(tiny_text_path, tmp_path, capsys):
    # the standard form showed `file.py:1226: UserWarning: ...` and then the source line `warnings.warn(f"resuming ...`
    out = tmp_path / "run"
    assert main(_tiny_train(tiny_text_path, out)) == 0
    capsys.readouterr()
    assert main(_tiny_train(tiny_text_path, out, "trainer.steps=2", "rollout.max_tokens=5")) == 0
    err = capsys.readouterr().err.splitlines()
    said = [ln for ln in err if "resuming" in ln and "settings other than" in ln]
    assert len(said) == 1 and said[0].startswith(f"mmevo train: warning: resuming {out}"), err
    assert "rollout.max_tokens 4 -> 5" in said[0]
    assert not any("warnings.warn(" in ln or "UserWarning" in ln for ln in err), err


def test_a_library_user_keeps_the_warning(tmp_path):
    # the one-line form is the CLI's only: after it, mmevo's warnings are standard warnings (pytest.warns, filters)
    import warnings

    from mmevo.config import load_config

    before = warnings.showwarning
    hindsight = ["honest.hindsight_mode=refined", "honest.hindsight_prob=0.5"]
    assert main(["train", *hindsight, f"trainer.deepspeed={tmp_path / 'no.json'}"]) == 2
    assert warnings.showwarning is before
    with pytest.warns(UserWarning, match=r"honest\.hindsight_prob=0\.5 is ignored"):
        load_config(None, hindsight)


def test_a_warning_at_config_load_is_one_line_too(capsys, tmp_path):
    missing = tmp_path / "no_ds.json"  # stops the command at a later check, before anything loads
    assert main(["train", "honest.hindsight_mode=refined", "honest.hindsight_prob=0.5",
                 f"trainer.deepspeed={missing}", f"trainer.output_dir={tmp_path / 'o'}"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == ("mmevo train: warning: honest.hindsight_prob=0.5 is ignored in honest.hindsight_mode=refined: "
                      "CASR's <critique> and <refined_confidence> are taught on every step (only the legacy "
                      "<hindsight> slot is offered per step)"), err
