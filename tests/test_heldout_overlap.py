"""`mmevo train`: a held-out set that is the train file is refused; held-out items also in the train set are counted
(summary.json ``data_heldout.train_overlap``) and said on stderr."""
import copy

import pytest

from mmevo.config import load_config
from mmevo.data.overlap import count_heldout_overlap, item_fingerprint, same_data_source
from mmevo.data.synthetic import generate_geometry, write_hub_jsonl


def _cfg(tiny_vl_path, out, train, heldout, steps=1):
    return load_config(None, [f"model.path={tiny_vl_path}", f"data.train={train}", f"data.heldout={heldout}",
                              "rollout.n=2", "rollout.max_tokens=4", f"trainer.steps={steps}",
                              "trainer.prompts_per_step=2", "trainer.mini_batch_prompts=2", "trainer.save_every=0",
                              "trainer.wandb_mode=disabled", f"trainer.output_dir={out}", "trainer.progress=false"])


def test_fingerprint_ignores_whitespace_runs_but_not_pixels():
    a, b = generate_geometry(2, seed=3)
    spaced = copy.copy(a)
    spaced.problem = "  " + a.problem.replace(" ", "\n  ") + " "
    assert item_fingerprint(spaced) == item_fingerprint(a)
    other_image = copy.copy(a)
    other_image.images = b.images
    assert item_fingerprint(other_image) != item_fingerprint(a)
    no_image = copy.copy(a)
    no_image.images = []
    assert item_fingerprint(no_image) != item_fingerprint(a)


def test_overlap_counts_held_out_items_found_in_train():
    exs = generate_geometry(6, seed=5)
    assert count_heldout_overlap(exs[:4], exs[2:]) == 2
    assert count_heldout_overlap(exs[:2], exs[2:]) == 0
    assert count_heldout_overlap([], exs) == 0


def test_same_source_resolves_paths_and_splits(tmp_path):
    d = tmp_path / "g3k"
    d.mkdir()
    assert same_data_source((str(d), None), (str(tmp_path / "g3k" / ".." / "g3k"), None))
    assert not same_data_source((str(d), "train"), (str(d), "test"))
    assert same_data_source(("org/set", "test"), ("org/set", "test"))


def test_train_file_as_held_out_is_refused_before_the_model_loads(tmp_path):
    path = write_hub_jsonl(generate_geometry(4, seed=1), tmp_path / "d")
    from mmevo import recipes

    cfg = _cfg("no/such/model", tmp_path / "run", path, str(path.parent / "." / path.name))
    with pytest.raises(ValueError, match=r"data\.train=.*data\.heldout=.*same data"):
        recipes.run_grpo(cfg)


def test_overlapping_held_out_items_are_counted_and_said(tiny_vl_path, tmp_path, capsys):
    exs = generate_geometry(6, seed=2)
    train = write_hub_jsonl(exs[:4], tmp_path / "train")
    heldout = write_hub_jsonl(exs[1:3] + exs[4:], tmp_path / "heldout")  # 2 of its 4 items are train items
    from mmevo import recipes

    summary = recipes.run_grpo(_cfg(tiny_vl_path, tmp_path / "run", train, heldout))
    assert summary["data_heldout"]["train_overlap"] == 2
    assert "2 of the 4 data.heldout items also occur in data.train" in capsys.readouterr().err
