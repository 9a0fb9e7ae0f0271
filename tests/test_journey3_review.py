"""A new user's walk through README's main job and evaluation (review "journey3")."""

import json
import shutil

import pytest

from mmevo import recipes
from mmevo.config import load_config
from test_csrs12_review12 import _cfg as _run_cfg  # the tiny CSRS run (sfr head, m = 1) the earlier reviews used


def _sft_cfg(model, out):
    return load_config(None, [f"model.path={model}", "data.train=synthetic", "data.n_train=4", "data.n_heldout=2",
                              "data.prompt_template=none", "sft.epochs=1", "sft.batch_size=4", "sft.save_every=0",
                              f"sft.output_dir={out}", "trainer.progress=false"])


def test_a_second_sft_round_from_its_own_export_is_refused_and_keeps_the_model(tiny_vl_path, tmp_path):
    # `mmevo sft model.path=runs/sft/model` (sft.output_dir=runs/sft): the fresh SFT removed runs/sft/model as it
    # began, so a kill or an error before its export lost the only copy of the model it trains from
    out = tmp_path / "sft"
    shutil.copytree(tiny_vl_path, out / "model")
    weights = sorted(p.name for p in (out / "model").iterdir())
    for path in (out / "model", f"{out}/./model/"):
        with pytest.raises(ValueError, match=r"model\.path=.* is sft\.output_dir/model .*another sft\.output_dir"):
            recipes.run_sft(_sft_cfg(path, out))
    assert sorted(p.name for p in (out / "model").iterdir()) == weights
    assert not (out / "summary.json").exists()


def test_a_grpo_run_from_its_own_final_export_is_refused_and_keeps_the_model(tiny_vl_path, tmp_path):
    # a fresh run (no checkpoint in trainer.output_dir) removed final/ before training: model.path=<out>/final was gone
    out = tmp_path / "run"
    shutil.copytree(tiny_vl_path, out / "final")
    config = json.loads((out / "final" / "config.json").read_text())
    with pytest.raises(ValueError, match=r"model\.path=.* is trainer\.output_dir/final .*another trainer\.output_dir"):
        recipes.run_grpo(_run_cfg(out / "final", out, "trainer.steps=1"))
    assert json.loads((out / "final" / "config.json").read_text()) == config
    assert not (out / "checkpoints").exists() and not (out / "metrics.jsonl").exists()


def test_a_start_model_beside_the_export_is_not_refused(tiny_vl_path, tmp_path):
    # the README's own chain: the SFT's export (another output dir) starts the GRPO run; a sibling named like the
    # export ("final2") is no part of it
    out = tmp_path / "run"
    shutil.copytree(tiny_vl_path, out / "final2")
    cfg = _run_cfg(out / "final2", out, "trainer.steps=1")
    recipes.refuse_start_model_in_export(cfg, "trainer.output_dir", out, "final")
    recipes.refuse_start_model_in_export(_run_cfg("tiny", out), "trainer.output_dir", out, "final")


def test_a_limited_benchmark_run_says_so_in_scores_and_report(tiny_vl_path, tmp_path):
    # `mmevo eval --benchmark mathvision_testmini --limit 3` wrote "Accuracy x% (k/3)" and a scores.json whose
    # n, all_rows and data.rows were all 3: nothing said that 301 of the 304 testmini items were never asked
    from datapaths import FIXTURES
    from mmevo.eval.runner import run_benchmark

    def run(limit):
        return run_benchmark(load_config(None, [
            f"model.path={tiny_vl_path}", "eval.benchmark=mathvision_testmini", f"eval.data={FIXTURES / 'mathvision'}",
            f"eval.out_dir={tmp_path / 'ev'}", "eval.max_tokens=2", "trainer.progress=false", f"eval.limit={limit}"]))

    s = run(3)
    assert (s["n"], s["limit"]) == (3, 3)
    assert json.loads((tmp_path / "ev" / "scores.json").read_text())["limit"] == 3
    report = (tmp_path / "ev" / "report.md").read_text()
    assert "Only the benchmark's first 3 items (eval.limit / --limit)" in report
    n_all = len((FIXTURES / "mathvision" / "testmini.jsonl").read_text().splitlines())
    for limit in (n_all + 5, n_all):  # a limit over or at the set's size cuts nothing: the whole set's score
        s = run(limit)
        assert (s["n"], s["limit"]) == (n_all, 0)
        assert "eval.limit" not in (tmp_path / "ev" / "report.md").read_text()


def test_a_model_dir_without_weights_is_refused_naming_model_path_before_anything_is_written(tiny_vl_path, tmp_path):
    # a config.json without weights (an interrupted copy): transformers' "no file named model.safetensors" came only
    # after the benchmark was read and run.json written, and named no setting
    from datapaths import FIXTURES
    from mmevo.eval.runner import run_benchmark

    model = tmp_path / "model"
    shutil.copytree(tiny_vl_path, model, ignore=shutil.ignore_patterns("*.safetensors"))
    cfg = load_config(None, [f"model.path={model}", "eval.benchmark=mathvision_testmini",
                             f"eval.data={FIXTURES / 'mathvision'}", f"eval.out_dir={tmp_path / 'ev'}", "eval.limit=1"])
    with pytest.raises(ValueError, match=rf"model\.path={model}: .* has a config\.json but no weight files"):
        run_benchmark(cfg)
    assert not (tmp_path / "ev").exists()
    with pytest.raises(ValueError, match=rf"model\.path={model}: .* no weight files"):
        recipes.run_sft(_sft_cfg(model, tmp_path / "sft"))
    assert not (tmp_path / "sft").exists()
    for other in ("training_args.bin", "optimizer.bin"):  # a Trainer's files beside the config are no weights
        (model / other).write_bytes(b"\0" * 8)
        with pytest.raises(ValueError, match="no weight files"):
            recipes.check_start_model(cfg)
    (model / "pytorch_model.bin").write_bytes(b"\0" * 8)  # PyTorch weights pass the check
    recipes.check_start_model(cfg)
    (model / "pytorch_model.bin").unlink()
    (model / "model.safetensors.index.json").write_text("{}")  # a sharded checkpoint's index passes the check
    recipes.check_start_model(cfg)


def test_render_to_a_path_below_a_file_or_onto_a_directory_names_the_option(tmp_path, capsys):
    # was "mmevo render: error: [Errno 17] File exists: '.../f'" after the render had run, naming no option
    from mmevo.cli import main

    src = tmp_path / "plot.py"
    src.write_text("import matplotlib.pyplot as plt\nplt.plot([0, 1], [0, 1])\n")
    (tmp_path / "f").write_text("x")
    (tmp_path / "d.png").mkdir()
    for out, why in ((tmp_path / "f" / "x.png", "lies below a file, not a directory"), (tmp_path / "d.png",
                                                                                         "is a directory")):
        with pytest.raises(SystemExit) as e:
            main(["render", str(src), "-o", str(out)])
        assert e.value.code == 2
        assert f"mmevo render: error: -o {out}: {why}" in capsys.readouterr().err
    assert (tmp_path / "f").read_text() == "x" and not any((tmp_path / "d.png").iterdir())
    assert main(["render", str(src), "-o", str(tmp_path / "new" / "sub" / "x.png")]) == 0  # missing parents: made


def test_build_tiny_into_a_users_own_directory_does_not_advise_deleting_it(tmp_path, capsys):
    # `mmevo build-tiny data/` (a directory of one's own files) said "the cached tiny model data is incomplete ...
    # Delete that directory and run again": followed, that advice deleted the user's files
    from mmevo.cli import main

    own = tmp_path / "data"
    own.mkdir()
    (own / "train.jsonl").write_text("{}\n")
    assert main(["build-tiny", str(own)]) == 2
    err = capsys.readouterr().err
    assert f"{own} is not a tiny model directory: it holds other files (train.jsonl) and none of a build's" in err
    assert "Delete" not in err
    assert [p.name for p in own.iterdir()] == ["train.jsonl"]


def test_a_benchmark_file_read_with_the_default_layout_points_at_data_format(tmp_path):
    # MATH-V's testmini.jsonl as data.train without data.format: "field 'problem': missing" named no way out
    from datapaths import FIXTURES
    from mmevo.data.benchmarks import load_items
    from mmevo.data.schema import DataError

    src = FIXTURES / "mathvision" / "testmini.jsonl"
    with pytest.raises(DataError, match=r"testmini\.jsonl:1 \(row 0, id '\w+'\): field 'problem': the row has no such "
                                        r"field, but has 'question': .*data\.fields\.problem=question.*data\.format="
                                        r"mathvision"):
        load_items("generic", src)
    items, stats = load_items("generic", src, skip_bad=True)  # counted under the reason it had
    assert not items and stats["skipped_by_reason"] == {"missing_problem": stats["rows"]}
    items, _ = load_items("generic", src, fields={"problem": "question", "image": "image", "choices": "options"})
    assert items  # the mapping the message names reads it
