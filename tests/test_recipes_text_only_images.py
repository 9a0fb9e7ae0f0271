"""`mmevo train` / `sft` with a text-only model on data with images (the default data.train=synthetic with
model.path=tiny-text) say that the images are left out of its prompts; they trained blind without a word."""
from mmevo import recipes
from mmevo.config import load_config


def _cfg(model, tmp_path, *extra):
    return load_config(None, [f"model.path={model}", "data.n_train=4", "data.n_heldout=2", "sft.epochs=1",
                              "sft.batch_size=4", f"sft.output_dir={tmp_path / 'sft'}", "trainer.progress=false",
                              *extra])


def test_sft_of_a_text_model_on_image_data_names_the_unseen_images(tiny_text_path, tmp_path, capsys):
    recipes.run_sft(_cfg(tiny_text_path, tmp_path))
    err = capsys.readouterr().err
    assert f"{tiny_text_path} is a text-only model: the images of 4 of the 4 SFT examples are left out" in err


def test_counts_per_set_for_text_and_vision_models(tiny_text_path, tiny_vl_path, tmp_path, capsys):
    cfg = _cfg(tiny_text_path, tmp_path)
    train, _ = recipes.load_examples(cfg, "train")
    heldout, _ = recipes.load_examples(cfg, "heldout")
    text_only = recipes.load_policy(cfg)
    assert recipes.note_unseen_images(text_only, {"train": train, "held-out": heldout, "none": []}) == \
        {"train": 4, "held-out": 2, "none": 0}
    assert "the images of 4 of the 4 train, 2 of the 2 held-out examples" in capsys.readouterr().err
    vision = recipes.load_policy(_cfg(tiny_vl_path, tmp_path))
    capsys.readouterr()  # the loader's progress bar
    assert recipes.note_unseen_images(vision, {"train": train}) == {"train": 0}
    assert capsys.readouterr().err == ""
