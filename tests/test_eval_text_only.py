"""A text-only model on a visual benchmark answers without the images: the evaluation says so (stderr, scores.json's
images_not_shown, report.md) instead of reporting a blind accuracy as if the model had seen the figures."""
from datapaths import FIXTURES
from mmevo.config import load_config
from mmevo.eval.runner import run_benchmark

MATHV = FIXTURES / "mathvision"  # testmini rows with one image each


def _eval(model, out, limit):
    return run_benchmark(load_config(None, [f"model.path={model}", "eval.benchmark=mathvision_testmini",
                                            f"eval.data={MATHV}", f"eval.out_dir={out}", f"eval.limit={limit}",
                                            "eval.max_tokens=2", "trainer.progress=false"]))


def test_text_model_counts_the_images_it_was_not_shown_across_a_resume(tiny_text_path, tmp_path, capsys):
    out = tmp_path / "ev"
    first = _eval(tiny_text_path, out, 2)
    assert first["images_not_shown"] == 2 and first["n"] == 2
    # worded as train / sft word it (one helper), counted in items as they count examples
    assert f"{tiny_text_path} is a text-only model: the images of 2 of the 2 pending benchmark examples are left out " \
        "of its prompts (a text-only baseline; images_not_shown in scores.json)" in capsys.readouterr().err
    assert "Text-only model: the 2 image(s) of these items were not shown to it" in (out / "report.md").read_text()
    resumed = _eval(tiny_text_path, out, 3)  # two kept from the first run, one generated
    assert resumed["resumed_items"] == 2 and resumed["images_not_shown"] == 3


def test_vision_model_sees_every_image(tiny_vl_path, tmp_path, capsys):
    summary = _eval(tiny_vl_path, tmp_path / "ev", 2)
    assert summary["images_not_shown"] == 0
    assert "text-only" not in capsys.readouterr().err
    assert "Text-only model" not in (tmp_path / "ev" / "report.md").read_text()
