"""Hostile input to the CLI entry points and the data they read: each is refused before any model loads, naming the
keys / file / row, or skipped and counted."""

import json
from pathlib import Path

import pytest
from PIL import Image

from mmevo.cli import main

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"


# -- a config written for another command -----------------------------------------------------------------------------
@pytest.mark.parametrize("argv, keys, run", [
    # 100 plain GRPO steps on synthetic geometry, mmzero.* never read: one MM-Zero iteration was meant
    (["train", "mmzero_tiny.yaml"], "mmzero.iterations, mmzero.output_dir, mmzero.roles, mmzero.phase_steps, ...",
     "evolve mmzero"),
    (["sft", "mmzero_tiny.yaml"], "mmzero.iterations, mmzero.output_dir, mmzero.roles, mmzero.phase_steps, ...",
     "evolve mmzero"),
    (["train", "prism_tiny.yaml"], "prism.k, prism.centroids, prism.corpus_size, prism.questioner_steps, ...",
     "evolve prism"),
    # HCR, GSS and the warm-up SFT are the loop's: train ran the accuracy head on geometry with the text model
    (["train", "honest_tiny.yaml", "honest.replay_enabled=false", "honest.smc_enabled=false"],
     "honest.hcr_enabled, honest.gss_mode, honest.gss_block_steps, honest.gss_share, ...", "evolve honest"),
    (["sft", "honest_qwen2_5_1_5b.yaml"], "honest.hcr_enabled, honest.replay_enabled, honest.smc_enabled, "
     "honest.gss_mode, ...", "evolve honest"),
])
def test_a_loop_config_given_to_train_or_sft_is_refused(argv, keys, run, no_runs, capsys):
    cmd, config, *overrides = argv
    assert main([cmd, str(CONFIGS / config), *overrides]) == 2
    err = capsys.readouterr().err
    readers = "evolve prism / mmevo prism build-clusters" if run == "evolve prism" else run
    assert err == (f"mmevo {cmd}: error: {keys}: only `mmevo {readers}` reads these settings, and `mmevo {cmd}` would "
                   f"run without them: run `mmevo {run} CONFIG`, or remove them from the config\n")
    assert no_runs == []


@pytest.mark.parametrize("argv, keys, own", [
    (["evolve", "mmzero", "prism_tiny.yaml"], "prism.k, prism.centroids, prism.corpus_size, prism.questioner_steps, "
     "...", "mmzero"),
    (["evolve", "prism", "mmzero_tiny.yaml"], "mmzero.iterations, mmzero.output_dir, mmzero.roles, "
     "mmzero.phase_steps, ...", "prism"),
    (["evolve", "honest", "prism_tiny.yaml"], "prism.k, prism.centroids, prism.corpus_size, prism.questioner_steps, "
     "...", "honest"),
    (["prism", "build-clusters", "mmzero_tiny.yaml"], "mmzero.iterations, mmzero.output_dir, mmzero.roles, "
     "mmzero.phase_steps, ...", "prism"),
])
def test_a_config_for_another_loop_is_refused(argv, keys, own, no_runs, capsys):
    *cmd, config = argv
    assert main([*cmd, str(CONFIGS / config)]) == 2
    err = capsys.readouterr().err
    assert f"error: {keys}: only `mmevo " in err
    assert f"would run without them (it sets nothing of {own}.*): run `mmevo " in err
    assert no_runs == []


def test_configs_that_set_the_commands_own_settings_still_run(no_runs, tmp_path):
    # one file may hold several loops' sections; head settings of the honest section are read by train too
    both = tmp_path / "both.yaml"
    both.write_text((CONFIGS / "mmzero_tiny.yaml").read_text() + "prism:\n  k: 8\n  iterations: 1\n")
    assert main(["evolve", "mmzero", str(both)]) == 0
    assert main(["train", "honest.hindsight_mode=refined", "honest.k=0.5"]) == 0
    assert main(["sft", "honest.sft_tier=small"]) == 0
    assert main(["eval", str(CONFIGS / "mmzero_tiny.yaml")]) == 0  # eval reads the model and data sections only
    assert no_runs == ["mmzero", "train", "sft", "eval"]


# -- a loop's output directory that cannot be made --------------------------------------------------------------------
@pytest.mark.parametrize("loop", ["mmzero", "prism", "honest"])
def test_a_loop_output_dir_that_cannot_be_made_names_the_key(loop, no_runs, tmp_path, capsys):
    afile = tmp_path / "f"
    afile.write_text("x")
    for path, why in ((afile, "File exists"), (afile / "sub", "Not a directory")):
        # was the bare "[Errno 17] File exists: '...'" from the loop's first mkdir, naming no setting
        assert main(["evolve", loop, str(CONFIGS / f"{loop}_tiny.yaml"), f"{loop}.output_dir={path}"]) == 2
        assert capsys.readouterr().err == (f"mmevo evolve: error: {loop}.output_dir={path}: cannot be the loop's "
                                           f"output directory ({why})\n")
    assert no_runs == []


def test_a_demo_out_that_cannot_be_made_names_the_option(no_runs, tmp_path, capsys):
    afile = tmp_path / "f"
    afile.write_text("x")
    assert main(["demo", "--out", str(afile)]) == 2  # a file itself: refused by name already
    assert "give the demo's output directory (that path is a file)" in capsys.readouterr().err
    path = afile / "sub"  # below a file: was the bare "[Errno 20] Not a directory: '.../f/sub'", naming no option
    assert main(["demo", "--out", str(path)]) == 2
    assert capsys.readouterr().err == (f"mmevo demo: error: --out {path}: cannot be the demo's output directory "
                                       "(Not a directory)\n")
    assert no_runs == []


# -- data: an image path that is a directory --------------------------------------------------------------------------
def test_an_image_path_that_is_a_directory_says_so(tmp_path):
    from mmevo.data.geometry3k import load_geometry3k
    from mmevo.data.schema import DataError

    (tmp_path / "images").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "images" / "a.png")
    rows = [{"id": "a", "problem": "<image>x?", "answer": "3", "images": ["images/a.png"]},
            {"id": "b", "problem": "<image>x?", "answer": "4", "images": ["images"]}]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError) as e:  # was "image file images not found (looked in ...)": it is right there
        load_geometry3k(data)
    assert str(e.value) == (f"{data}:2 (row 1, id 'b'): field 'images': image file images is a directory "
                            f"({tmp_path / 'images'}), not an image file")
    examples, stats = load_geometry3k(data, skip_bad=True)
    assert [x.id for x in examples] == ["a"] and stats["skipped_by_reason"] == {"image_missing": 1}


# -- output places that cannot be made, named by their key ------------------------------------------------------------
def test_an_empty_model_path_is_refused_at_load(no_runs, capsys):
    from mmevo.config import ConfigError, load_config

    message = "model.path is empty: give a checkpoint directory, a hub id or 'tiny' / 'tiny-wide' / 'tiny-text'"
    with pytest.raises(ConfigError) as e:  # Path("") is the current directory: "model path . exists but has no
        load_config(None, ["model.path= "])  # config.json", after the data loaded
    assert str(e.value) == message
    assert main(["eval", "--model", ""]) == 2
    assert capsys.readouterr().err == f"mmevo eval: error: {message}\n"
    assert no_runs == []


def test_an_eval_out_dir_that_cannot_be_made_names_the_key(tmp_path):
    from mmevo.config import load_config
    from mmevo.eval.runner import run_benchmark
    from mmevo.honest.calibration import run_calibration_eval

    afile = tmp_path / "f"
    afile.write_text("x")
    empty_model = tmp_path / "model"  # never loaded: the out dir is made first (a config.json and a weights file
    empty_model.mkdir()  # pass the up-front model.path check, which refuses a directory without either)
    (empty_model / "config.json").write_text("{}")
    (empty_model / "model.safetensors").write_bytes(b"")
    for path, why in ((afile, "File exists"), (afile / "sub", "Not a directory")):
        cfg = load_config(None, [f"model.path={empty_model}", "eval.benchmark=mathvision_testmini",
                                 f"eval.data={ROOT / 'data/fixtures/mathvision'}", "eval.limit=1",
                                 f"eval.out_dir={path}"])
        with pytest.raises(ValueError) as e:  # was "[Errno 17] File exists: '...'"
            run_benchmark(cfg)
        assert str(e.value) == f"eval.out_dir={path}: cannot be the evaluation's output directory ({why})"
        cfg = load_config(None, [f"model.path={empty_model}", "data.heldout=honest_tasks", "data.n_heldout=2",
                                 f"eval.out_dir={path}"])
        with pytest.raises(ValueError) as e:
            run_calibration_eval(cfg)
        assert str(e.value) == f"eval.out_dir={path}: cannot be the evaluation's output directory ({why})"
    assert afile.read_text() == "x"


def test_build_tiny_into_a_file_names_the_directory_given(tmp_path, capsys):
    afile = tmp_path / "f"
    afile.write_text("x")
    # was "[Errno 17] File exists: '.../f/sub.tmpXXXX'" (its temp dir), or a whole build before the rename failed
    for path, why in ((afile, "a file, not a directory"), (afile / "sub", "File exists")):
        assert main(["build-tiny", str(path)]) == 2
        assert capsys.readouterr().err == f"mmevo build-tiny: error: {path}: cannot build the tiny model there ({why})\n"
    assert afile.read_text() == "x"


def test_prism_centroids_below_a_file_are_refused_before_the_corpus_is_embedded(tmp_path, monkeypatch, capsys):
    import mmevo.prism.clusters as clusters

    def never(*args, **kwargs):
        raise AssertionError("the corpus was read")

    monkeypatch.setattr(clusters, "load_corpus", never)
    afile = tmp_path / "f"
    afile.write_text("x")
    path = afile / "centroids.npy"  # was "[Errno 17] File exists: '...'" once every question was embedded
    assert main(["prism", "build-clusters", f"prism.centroids={path}"]) == 2
    assert capsys.readouterr().err == (f"mmevo prism: error: prism.centroids={path}: cannot write the centroids there "
                                       "(File exists)\n")


# -- GRPO at temperature 0 --------------------------------------------------------------------------------------------
GREEDY = ("rollout.temperature=0 decodes greedily: the rollout.n responses of a prompt are the same text, their "
          "advantages cancel and no step would change the policy; sample at a temperature > 0 (EasyR1: 1.0); greedy "
          "evaluation is rollout.eval_temperature=0")


def test_grpo_at_temperature_0_is_refused_before_the_model_loads(no_runs, capsys, tmp_path):
    import torch

    from mmevo.grpo.algos import group_advantages

    # why: n copies of one response get advantages that sum to 0, so the policy gradient of the group is 0 whatever
    # the rewards (here a reward that differs per copy, as SFR's re-inferences can)
    adv = group_advantages(torch.tensor([1.0, 0.0, 0.5, 0.5]), torch.tensor([0, 0, 0, 0]))
    assert adv.sum().item() == pytest.approx(0.0, abs=1e-6) and adv.abs().max().item() > 0.5
    assert main(["train", "rollout.temperature=0"]) == 2  # the whole run learned nothing, silently
    assert capsys.readouterr().err == f"mmevo train: error: {GREEDY}\n"
    assert main(["demo", "--out", str(tmp_path / "demo"), "rollout.temperature=0"]) == 2
    assert f"the demo's csrs run: {GREEDY}" in capsys.readouterr().err
    out = f"mmzero.output_dir={tmp_path / 'mz'}"
    assert main(["evolve", "mmzero", out, "mmzero.roles.solver={rollout.temperature: 0}"]) == 2
    assert f"mmevo evolve: error: mmzero.roles.solver: the solver phase's config: {GREEDY}" in capsys.readouterr().err
    assert no_runs == []
    assert main(["train", "rollout.temperature=0.01", "rollout.eval_temperature=0"]) == 0
    assert main(["evolve", "mmzero", out, "rollout.temperature=0", "mmzero.phase_steps=0"]) == 0  # no GRPO step
    assert main(["eval", "rollout.temperature=0"]) == 0
    assert no_runs == ["train", "mmzero", "eval"]
