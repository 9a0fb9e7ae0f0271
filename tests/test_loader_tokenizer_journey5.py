"""A checkpoint directory without its tokenizer files is refused naming the directory, before its weights are read
(journey5). transformers built an empty tokenizer (one token, every text encoded as no ids) from the processor config
alone, and `mmevo eval` failed at its first prompt with "Mismatch in `image` token count", `train` likewise: neither
named the missing files. A directory without its processor failed only after the weights were read."""

import shutil

import pytest

from mmevo.models.loader import load_model


@pytest.fixture
def tiny_dirs(tiny_vl_path, tiny_text_path):
    return {"vl": tiny_vl_path, "text": tiny_text_path}


def _copy_without(src, dst, drop, damage_weights=False):
    shutil.copytree(src, dst)
    for f in list(dst.iterdir()):
        if any(f.name.startswith(d) for d in drop):
            f.unlink()
    if damage_weights:  # read only if the loader gets that far
        (dst / "model.safetensors").write_bytes(b"\x00" * 64)
    return dst


@pytest.mark.parametrize("kind", ["vl", "text"])
def test_a_directory_without_tokenizer_files_is_refused_naming_it(tiny_dirs, tmp_path, kind):
    d = _copy_without(tiny_dirs[kind], tmp_path / "m", ("tokenizer", "vocab", "merges"))
    with pytest.raises(OSError, match=rf"model {d}: its tokenizer"):
        load_model(d)


@pytest.mark.parametrize("kind,drop", [("vl", ("tokenizer", "vocab", "merges")), ("vl", ("processor_config",)),
                                       ("text", ("tokenizer", "vocab", "merges"))])
def test_the_missing_tokenizer_or_processor_is_named_before_the_weights_are_read(tiny_dirs, tmp_path, kind, drop):
    d = _copy_without(tiny_dirs[kind], tmp_path / "m", drop, damage_weights=True)
    with pytest.raises(OSError, match=rf"model {d}: its (tokenizer|processor)"):
        load_model(d)


def test_a_whole_checkpoint_still_loads(tiny_dirs):
    lm = load_model(tiny_dirs["vl"], weights=False)
    assert lm.tokenizer("0 a", add_special_tokens=False)["input_ids"]
