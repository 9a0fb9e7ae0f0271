"""Two small fixes from the read-through of review round 26: the render pool keeps its own copy of the limits it
checked, and an InterGPS data.json refused by its size or kind is row 0 of its file, as an invalid one is."""

import os
import shutil
from pathlib import Path

import pytest

from mmevo.data.benchmarks import load_items
from mmevo.data.schema import DataError
from render.pool import RenderPool
from render.types import RenderLimits
from tests.datapaths import shared


def test_the_pool_keeps_the_limits_it_checked():
    limits = RenderLimits()
    side = limits.max_side
    with RenderPool(1, limits=limits, allow_reduced_isolation=True) as pool:
        limits.max_side = float("nan")  # the caller's object, changed after the check
        assert pool.limits.max_side == side and pool.limits is not limits


def test_an_intergps_data_json_that_is_no_regular_file_is_row_zero(tmp_path):
    src = shared("geometry3k_samples", "Geometry3K InterGPS sample rows")
    folders = sorted(p for p in src.iterdir() if (p / "data.json").is_file())[:2]
    assert folders, "the Geometry3K samples are part of the shared data"
    for d in folders:
        shutil.copytree(d, tmp_path / d.name)
    bad = tmp_path / folders[0].name / "data.json"
    bad.unlink()
    os.mkfifo(bad)
    with pytest.raises(DataError) as e:
        load_items("intergps", tmp_path)
    assert e.value.row == 0 and "FIFO" in str(e.value)
    items, stats = load_items("intergps", tmp_path, skip_bad=True)
    assert len(items) == 1 and stats["skipped"] == 1


def test_an_intergps_data_json_over_the_size_cap_is_row_zero(tmp_path):
    src = shared("geometry3k_samples", "Geometry3K InterGPS sample rows")
    d = sorted(p for p in src.iterdir() if (p / "data.json").is_file())[0]
    shutil.copytree(d, tmp_path / d.name)
    with open(tmp_path / d.name / "data.json", "r+b") as fh:
        fh.truncate((512 << 20) + 1)  # sparse: no disk used
    with pytest.raises(DataError) as e:
        load_items("intergps", tmp_path)
    assert e.value.row == 0 and "512 MiB" in str(e.value)
