"""A data directory without a file of the names tried says what it holds (journey5): a folder with train.jsonl given
without @train, or a folder of images alone, read "no data file found for split None (tried: data.jsonl, ...)"."""

import pytest
from PIL import Image

from mmevo.data.sources import iter_rows


def test_a_folder_with_data_under_other_names_names_them(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"a": 1}\n')
    (tmp_path / "test.parquet").write_bytes(b"")
    with pytest.raises(FileNotFoundError) as e:
        list(iter_rows(tmp_path))
    msg = str(e.value)
    assert "split None" not in msg and "tried: data.jsonl, data.parquet, data.json" in msg
    assert "it holds test.parquet, train.jsonl: name the file, or DIR@SPLIT" in msg


def test_a_folder_of_images_alone_says_so(tmp_path):
    Image.new("RGB", (8, 8)).save(tmp_path / "0.png")
    with pytest.raises(FileNotFoundError, match=r"no data file found \(tried: .*\); it holds images but no \.jsonl / "
                                                r"\.json / \.parquet file \(a folder of images alone"):
        list(iter_rows(tmp_path))


def test_an_intergps_folder_names_its_format(tmp_path):
    (tmp_path / "11").mkdir()
    (tmp_path / "11" / "data.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"its sub-folders hold data\.json: Geometry3K's InterGPS layout is "
                                                r"read with data\.format=intergps"):
        list(iter_rows(tmp_path))


def test_a_named_split_keeps_its_wording(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"a": 1}\n')
    with pytest.raises(FileNotFoundError, match=r"no data file found for split 'test' \(tried: test\.jsonl.*it holds "
                                                r"train\.jsonl"):
        list(iter_rows(tmp_path, "test"))
